/* pii_policy: the write diode's PII rule over a write's fields; see
 * pii_policy.h. */
#include "service/pii/pii_policy.h"

#include <stdio.h>
#include <string.h>

#include "service/metrics/metrics.h"
#include "service/pb/pbjson.h"
#include "service/pii/pii.h"
#include "service/pii/pii_struct.h"

int pii_policy_parse(const char *name, pii_policy *out) {
    if (strcmp(name, "reject") == 0) *out = PII_POLICY_REJECT;
    else if (strcmp(name, "redact") == 0) *out = PII_POLICY_REDACT;
    else return -1;
    return 0;
}

pii_mode pii_policy_mode(pii_policy policy, const principal *p) {
    /* The same matching as every scope check and Attenuate's (pii:* holds
     * pii:write). */
    if (principal_scope(p, "pii:write") != PRINCIPAL_DENY) return PII_MODE_ALLOW;
    return policy == PII_POLICY_REDACT ? PII_MODE_REDACT : PII_MODE_REJECT;
}

static size_t text_len(const pii_field *f) { return f->len ? *f->len : strlen(*f->text); }

/* Scans one field; returns 1 when it holds PII, -1 when a Struct nests too
 * deep. */
static int scan(pii_findings *found, const pii_field *f) {
    size_t before = found->total;
    if (f->text) {
        pii_scan_field(found, f->path, *f->text, text_len(f));
    } else if (f->v) {
        if (*f->v && pii_scan_value(found, f->path, *f->v) != 0) return -1;
    } else if (*f->st && pii_scan_struct(found, f->path, *f->st) != 0) {
        return -1;
    }
    return found->total > before;
}

static int redact(arena *a, pii_field *f) {
    if (f->v) {
        if (!*f->v) return 0;
        Google__Protobuf__Value *copy = pbjson_value_copy(a, *f->v);
        if (!copy || pii_redact_value(a, copy) != 0) return -1;
        *f->v = copy;
        return 0;
    }
    if (!f->text && !*f->st) return 0;
    if (f->text) {
        size_t n = 0;
        const char *r = pii_redact_arena(a, *f->text, text_len(f), &n);
        if (!r) return -1;
        *f->text = r;
        if (f->len) *f->len = n;
        return 0;
    }
    Google__Protobuf__Struct *copy = pbjson_struct_copy(a, *f->st);
    if (!copy || pii_redact_struct(a, copy) != 0) return -1;
    *f->st = copy;
    return 0;
}

/* Writes that carried PII, by what became of them and kind: process-wide,
 * as the policy is (pii_policy_metrics_collect). */
enum { ACTION_REJECTED, ACTION_REDACTED, ACTION_ALLOWED, ACTIONS };
static const char *const action_names[ACTIONS] = {"rejected", "redacted", "allowed"};
static metrics_counter pii_writes[ACTIONS][PII_KIND_COUNT];

static void count_kinds(int action, unsigned kinds) {
    for (int k = 0; k < PII_KIND_COUNT; k++)
        if (kinds & (1u << k)) metrics_inc(&pii_writes[action][k]);
}

void pii_policy_metrics_collect(strbuf *out, void *arg) {
    (void)arg;
    metrics_family(out, "memoryd_pii_writes_total", "counter",
                   "Writes that carried personal data or secrets, by action (rejected, redacted, "
                   "allowed for a token with pii:write) and kind; a write counts once per kind.");
    char l[96];
    for (int a = 0; a < ACTIONS; a++) {
        for (int k = 0; k < PII_KIND_COUNT; k++) {
            snprintf(l, sizeof l, "action=\"%s\",kind=\"%s\"", action_names[a],
                     pii_kind_name(1u << k));
            metrics_sample_u64(out, "memoryd_pii_writes_total", l, metrics_get(&pii_writes[a][k]));
        }
    }
}

int pii_policy_apply(arena *a, pii_mode mode, pii_field *f, size_t n, const char ***kinds,
                     size_t *nkinds, char *why, size_t whylen) {
    if (kinds) *kinds = NULL;
    if (nkinds) *nkinds = 0;
    pii_findings found;
    pii_findings_init(&found);
    char list[400];
    /* Names first: under redact, PII in a name refuses the write before
     * anything else is looked at. */
    for (size_t i = 0; i < n; i++) {
        if (!f[i].names_record) continue;
        scan(&found, &f[i]);
        if (found.kinds && mode == PII_MODE_REDACT) {
            count_kinds(ACTION_REJECTED, found.kinds);
            pii_findings_format(&found, list, sizeof list);
            snprintf(why, whylen,
                     "PII found (%s); %s names the record and cannot be redacted, nothing was "
                     "written",
                     list, f[i].path);
            return STATUS_EINVALID;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!f[i].names_record && scan(&found, &f[i]) < 0) {
            snprintf(why, whylen, "%s: nests deeper than %d levels", f[i].path, PII_MAX_DEPTH);
            return STATUS_EINVALID;
        }
    }
    if (!found.kinds) return STATUS_OK;
    if (mode == PII_MODE_ALLOW) {
        const char *names[PII_KIND_COUNT];
        size_t k = pii_kind_names(found.kinds, names, PII_KIND_COUNT);
        const char **v = arena_alloc(a, (k ? k : 1) * sizeof *v);
        if (!v) return STATUS_ENOMEM;
        memcpy(v, names, k * sizeof *v);
        if (kinds) *kinds = v;
        if (nkinds) *nkinds = k;
        count_kinds(ACTION_ALLOWED, found.kinds);
        return STATUS_OK;
    }
    if (mode == PII_MODE_REJECT) {
        count_kinds(ACTION_REJECTED, found.kinds);
        pii_findings_format(&found, list, sizeof list);
        snprintf(why, whylen, "PII found (%s); nothing was written", list);
        return STATUS_EINVALID;
    }
    /* Redact: every field but the names (a field without PII comes back
     * unchanged; this path runs only when something was found). */
    for (size_t i = 0; i < n; i++)
        if (!f[i].names_record && redact(a, &f[i]) != 0) return STATUS_ENOMEM;
    count_kinds(ACTION_REDACTED, found.kinds);
    return STATUS_OK;
}
