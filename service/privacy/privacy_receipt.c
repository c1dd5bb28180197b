/* privacy_receipt: Forget's receipt as JSON, JWS and proto; see
 * privacy_receipt.h. */
#include "service/privacy/privacy_receipt.h"

#include <assert.h>
#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory/v1/privacy.pb-c.h"
#include "service/auth/jws.h"
#include "service/auth/jwt.h"
#include "service/core/text.h"

/* The counts' names, from the enum (a tier added to the proto is counted
 * and named without an edit here). */
static char tier_names[PRIVACY_TIER_MAX][32];
static int ntiers;
static pthread_once_t tier_names_once = PTHREAD_ONCE_INIT;

static void name_tiers(void) {
    const ProtobufCEnumDescriptor *d = &memory__v1__tier__descriptor;
    for (unsigned i = 0; i < d->n_values; i++) {
        int v = d->values[i].value;
        const char *n = d->values[i].name;
        /* Values count from 1 without a gap and fit the counts' room (a
         * build without asserts names the tiers up to the first that does
         * not, rather than write past the names). */
        assert(v == (int)i && v < PRIVACY_TIER_MAX && strncmp(n, "TIER_", 5) == 0);
        if (v != (int)i || v >= PRIVACY_TIER_MAX || strncmp(n, "TIER_", 5) != 0) break;
        size_t k = 0;
        for (n += 5; n[k] && k + 1 < sizeof tier_names[v]; k++)
            tier_names[v][k] = (char)tolower((unsigned char)n[k]);
        ntiers = v;
    }
}

int privacy_tiers(void) {
    pthread_once(&tier_names_once, name_tiers);
    return ntiers;
}

const char *privacy_tier_name(int tier) {
    return tier >= 1 && tier <= privacy_tiers() ? tier_names[tier] : NULL;
}

/* RFC 3339 in UTC with microseconds: "2026-11-26T09:00:00.123456Z". */
static void format_time(int64_t us, char out[40]) {
    time_t s = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%06lldZ", (long long)(us % 1000000));
}

static int parse_time(const char *s, int64_t *us) {
    struct tm tm = {0};
    int frac = 0, used = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%6dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac, &used) != 7 ||
        used != 27 || s[used] != '\0' || frac < 0)
        return -1;
    /* Fields in their ranges (timegm would roll "13-45" into another
     * date) and no time before 1970: a receipt is never older than that. */
    if (tm.tm_year < 1970 || tm.tm_year > 9999 || tm.tm_mon < 1 || tm.tm_mon > 12 ||
        tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour < 0 || tm.tm_hour > 23 || tm.tm_min < 0 ||
        tm.tm_min > 59 || tm.tm_sec < 0 || tm.tm_sec > 59)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t < 0) return -1;
    *us = (int64_t)t * 1000000 + frac;
    return 0;
}

/* {"records":"principal","owner":...,"namespaces":[...]} or
 * {"records":"tenant","namespaces":[...]}; NULL when out of memory. */
static json_t *scope_json(const privacy_receipt *r) {
    json_t *ns = json_array();
    for (size_t i = 0; ns && i < r->nns; i++)
        if (json_array_append_new(ns, json_string(r->ns[i])) != 0) {
            json_decref(ns);
            ns = NULL;
        }
    if (!ns) return NULL;
    return r->scope_owner ? json_pack("{s:s, s:s, s:o}", "records", "principal", "owner",
                                      r->scope_owner, "namespaces", ns)
                          : json_pack("{s:s, s:o}", "records", "tenant", "namespaces", ns);
}

/* The "scope" member of a payload into r (absent: a receipt from before
 * scopes, has_scope 0): 0, or -1 with err. */
static int parse_scope(arena *a, json_t *o, privacy_receipt *r, char *err, size_t errlen) {
    json_t *sc = json_object_get(o, "scope");
    if (!sc) return 0;
    json_t *records = json_object_get(sc, "records"), *owner = json_object_get(sc, "owner");
    json_t *ns = json_object_get(sc, "namespaces");
    const char *what = json_string_value(records);
    int principal = what && strcmp(what, "principal") == 0;
    if (!json_is_object(sc) || !what || (!principal && strcmp(what, "tenant") != 0) ||
        principal != json_is_string(owner) || (!principal && owner) || !json_is_array(ns)) {
        text_errf(err, errlen,
                  "receipt: scope needs records (\"principal\" with an owner, or \"tenant\") "
                  "and namespaces");
        return -1;
    }
    const char **globs = arena_alloc(a, (json_array_size(ns) + 1) * sizeof *globs);
    if (!globs) return text_errf(err, errlen, "receipt: out of memory"), -1;
    for (size_t i = 0; i < json_array_size(ns); i++) {
        json_t *g = json_array_get(ns, i);
        if (!json_is_string(g) || !(globs[i] = arena_strdup(a, json_string_value(g)))) {
            text_errf(err, errlen, "receipt: scope.namespaces must be strings");
            return -1;
        }
    }
    r->scope_owner = principal ? arena_strdup(a, json_string_value(owner)) : NULL;
    if (principal && !r->scope_owner) return text_errf(err, errlen, "receipt: out of memory"), -1;
    r->has_scope = 1;
    r->ns = globs;
    r->nns = json_array_size(ns);
    return 0;
}

const char *privacy_receipt_scope_text(arena *a, const privacy_receipt *r) {
    if (!r->has_scope)
        return arena_strdup(a, "not stated (a receipt issued before receipts stated their "
                               "scope)");
    size_t cap = 64, n;
    for (size_t i = 0; i < r->nns; i++) cap += strlen(r->ns[i]) + 2;
    char *ns = arena_alloc(a, cap);
    if (!ns) return NULL;
    n = (size_t)snprintf(ns, cap, "%s", r->nns ? "" : "none");
    for (size_t i = 0; i < r->nns; i++)
        n += (size_t)snprintf(ns + n, cap - n, "%s%s", i ? ", " : "", r->ns[i]);
    return r->scope_owner
               ? arena_printf(a,
                              "the records of principal %s only; in entries and working memory, "
                              "namespaces %s",
                              r->scope_owner, ns)
               : arena_printf(a,
                              "every principal's records in tenant %s; in entries and working "
                              "memory, namespaces %s",
                              r->tenant, ns);
}

char *privacy_receipt_json(const privacy_receipt *r) {
    char when[40];
    format_time(r->complete_us, when);
    json_t *counts = json_object();
    for (int t = 1; counts && t <= privacy_tiers(); t++)
        if (json_object_set_new(counts, tier_names[t], json_integer(r->counts[t])) != 0) {
            json_decref(counts);
            counts = NULL;
        }
    json_t *scope = r->has_scope ? scope_json(r) : NULL;
    if (r->has_scope && !scope) {
        json_decref(counts);
        return NULL;
    }
    json_t *o = counts
                    ? json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:o, s:s, s:s}", "iss", "memoryd",
                                "receipt_id", r->receipt_id, "tenant", r->tenant,
                                r->principal ? "principal" : "subject_id",
                                r->principal ? r->principal : r->subject_id, "dry_run", r->dry_run,
                                "complete_time", when, "counts", counts, "request_id",
                                r->request_id ? r->request_id : "", "requested_by", r->requested_by)
                    : NULL; /* json_pack takes counts, even when it fails */
    if (o && scope && json_object_set_new(o, "scope", scope) != 0) {
        json_decref(o);
        o = NULL;
    } else if (!o) {
        json_decref(scope);
    }
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

/* A string member into the arena, or NULL (absent or not a string). */
static const char *take(arena *a, json_t *o, const char *name) {
    json_t *v = json_object_get(o, name);
    return json_is_string(v) ? arena_strdup(a, json_string_value(v)) : NULL;
}

int privacy_receipt_parse(arena *a, const char *json, size_t len, privacy_receipt *r, char *err,
                          size_t errlen) {
    memset(r, 0, sizeof *r);
    json_error_t jerr;
    json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    int rc = -1;
    if (!json_is_object(o)) {
        text_errf(err, errlen, "receipt: not a JSON object");
        goto done;
    }
    const char *id = take(a, o, "receipt_id"), *when = take(a, o, "complete_time");
    json_t *dry = json_object_get(o, "dry_run"), *counts = json_object_get(o, "counts");
    r->tenant = take(a, o, "tenant");
    r->principal = take(a, o, "principal");
    r->subject_id = take(a, o, "subject_id");
    r->request_id = take(a, o, "request_id");
    r->requested_by = take(a, o, "requested_by");
    if (!id || strlen(id) >= sizeof r->receipt_id || !r->tenant || !r->requested_by ||
        !r->request_id || !when || !json_is_boolean(dry) || !json_is_object(counts)) {
        text_errf(err, errlen,
                  "receipt: receipt_id, tenant, complete_time, dry_run, counts, request_id "
                  "and requested_by are required");
        goto done;
    }
    if (!r->principal == !r->subject_id) {
        text_errf(err, errlen, "receipt: exactly one of principal and subject_id is required");
        goto done;
    }
    if (parse_time(when, &r->complete_us) != 0) {
        text_errf(err, errlen, "receipt: complete_time \"%.40s\" is not RFC 3339 UTC with µs",
                  when);
        goto done;
    }
    snprintf(r->receipt_id, sizeof r->receipt_id, "%s", id);
    r->dry_run = json_is_true(dry);
    /* A receipt issued before a tier existed has no count for it: 0. */
    for (int t = 1; t <= privacy_tiers(); t++) {
        json_t *n = json_object_get(counts, tier_names[t]);
        if (n && (!json_is_integer(n) || json_integer_value(n) < 0)) {
            text_errf(err, errlen, "receipt: counts.%s must be a count", tier_names[t]);
            goto done;
        }
        r->counts[t] = n ? json_integer_value(n) : 0;
    }
    rc = parse_scope(a, o, r, err, errlen);
done:
    json_decref(o);
    return rc;
}

int privacy_receipt_sign(EVP_PKEY *key, const char *kid, const privacy_receipt *r, char **jws,
                         char *err, size_t errlen) {
    *jws = NULL;
    char *payload = privacy_receipt_json(r);
    if (!payload) {
        text_errf(err, errlen, "receipt: out of memory");
        return -1;
    }
    int rc = jws_sign(key, kid, PRIVACY_RECEIPT_TYP, payload, jws, err, errlen);
    free(payload);
    return rc == JWT_OK ? 0 : -1;
}

int privacy_receipt_verify(const jwks *keys, const char *jws, size_t len, arena *a,
                           privacy_receipt *r, const char **kid, char *err, size_t errlen) {
    json_t *payload = NULL;
    char *k = NULL;
    if (jws_verify(keys, jws, len, PRIVACY_RECEIPT_TYP, &payload, &k, err, errlen) != JWT_OK)
        return -1;
    char *json = json_dumps(payload, JSON_COMPACT);
    int rc = json ? privacy_receipt_parse(a, json, strlen(json), r, err, errlen) : -1;
    if (!json) text_errf(err, errlen, "receipt: out of memory");
    if (rc == 0 && kid) *kid = arena_strdup(a, k);
    free(json);
    free(k);
    json_decref(payload);
    return rc;
}

Memory__V1__ForgetReceipt *privacy_receipt_render(arena *a, const privacy_receipt *r,
                                                  const char *signed_receipt) {
    Memory__V1__ForgetReceipt *m = arena_alloc(a, sizeof *m);
    int ntiers = privacy_tiers();
    Memory__V1__TierCount **counts = arena_alloc(a, (size_t)ntiers * sizeof *counts);
    Google__Protobuf__Timestamp *ts = arena_alloc(a, sizeof *ts);
    if (!m || !counts || !ts) return NULL;
    memory__v1__forget_receipt__init(m);
    google__protobuf__timestamp__init(ts);
    ts->seconds = r->complete_us / 1000000;
    ts->nanos = (int32_t)(r->complete_us % 1000000) * 1000;
    for (int t = 1; t <= ntiers; t++) {
        Memory__V1__TierCount *c = arena_alloc(a, sizeof *c);
        if (!c) return NULL;
        memory__v1__tier_count__init(c);
        c->tier = (Memory__V1__Tier)t;
        c->erased_count = r->counts[t];
        counts[t - 1] = c;
    }
    m->receipt_id = arena_strdup(a, r->receipt_id);
    m->complete_time = ts;
    if (r->principal) {
        m->subject_case = MEMORY__V1__FORGET_RECEIPT__SUBJECT_PRINCIPAL;
        m->principal = (char *)r->principal;
    } else {
        m->subject_case = MEMORY__V1__FORGET_RECEIPT__SUBJECT_SUBJECT_ID;
        m->subject_id = (char *)r->subject_id;
    }
    m->dry_run = r->dry_run;
    m->n_counts = (size_t)ntiers;
    m->counts = counts;
    m->request_id = (char *)(r->request_id ? r->request_id : "");
    m->tenant = (char *)r->tenant;
    m->requested_by = (char *)r->requested_by;
    m->signed_receipt = (char *)(signed_receipt ? signed_receipt : "");
    if (r->has_scope) {
        Memory__V1__ForgetScope *sc = arena_alloc(a, sizeof *sc);
        char **ns = arena_alloc(a, (r->nns + 1) * sizeof *ns);
        if (!sc || !ns) return NULL;
        memory__v1__forget_scope__init(sc);
        sc->owner = (char *)(r->scope_owner ? r->scope_owner : "");
        for (size_t i = 0; i < r->nns; i++) ns[i] = (char *)r->ns[i];
        sc->n_namespaces = r->nns;
        sc->namespaces = ns;
        m->scope = sc;
    }
    return m->receipt_id ? m : NULL;
}
