/* privacy_retention: the retention policy; see privacy_retention.h. */
#include "service/privacy/privacy_retention.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "service/auth/jwt.h"
#include "service/core/text.h"
#include "service/pii/pii.h"

/* The longest period a rule may have: 100 years (and a cutoff that can
 * never wrap around). */
#define MAX_AFTER_S ((int64_t)36500 * 86400)

/* A flag's period: "off" (or "0") is none (*s = 0). */
static int flag_period(const char *flag, const char *v, int64_t *s, char *err, size_t errlen) {
    *s = 0;
    if (!v || !v[0] || strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return 0;
    if (text_parse_duration(v, s) == 0 && *s <= MAX_AFTER_S) return 0;
    text_errf(err, errlen,
              "--%s: \"%.40s\" is not a duration (90s, 30m, 12h, 30d; at most 36500d) or off", flag,
              v);
    return -1;
}

static int add(retention_policy *p, const retention_rule *r, char *err, size_t errlen) {
    if (p->n >= RETENTION_MAX_RULES) {
        text_errf(err, errlen, "retention: more than %d rules", RETENTION_MAX_RULES);
        return -1;
    }
    p->rules[p->n++] = *r;
    return 0;
}

/* "global, episodic or entries" of the tiers a rule may name. */
static void tier_list(const retention_tier *tiers, size_t n, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t t = 0; t < n && at < len; t++)
        at += (size_t)snprintf(buf + at, len - at, "%s%s",
                               t == 0      ? ""
                               : t + 1 < n ? ", "
                                           : " or ",
                               tiers[t].name);
    if (n == 0) snprintf(buf, len, "(no tier keeps records a rule can sweep)");
}

/* One rule of the file. */
static int take_rule(json_t *o, size_t i, const retention_tier *tiers, size_t ntiers,
                     retention_rule *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (!json_is_object(o)) {
        text_errf(err, errlen, "retention policy: rules[%zu] is not an object", i);
        return -1;
    }
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        const char *s = json_string_value(v);
        if (!s) {
            text_errf(err, errlen, "retention policy: rules[%zu].%.32s must be a string", i, key);
            return -1;
        }
        if (strcmp(key, "after") == 0) {
            if (text_parse_duration(s, &r->after_s) != 0 || r->after_s > MAX_AFTER_S) {
                text_errf(err, errlen,
                          "retention policy: rules[%zu].after: \"%.40s\" is not a duration "
                          "(90s, 30m, 12h, 30d; at most 36500d)",
                          i, s);
                return -1;
            }
        } else if (strcmp(key, "tier") == 0) {
            for (size_t t = 0; t < ntiers && !r->tier; t++)
                if (strcmp(s, tiers[t].name) == 0)
                    r->tier = tiers[t].tier, r->tier_name = tiers[t].name;
            if (!r->tier) {
                char names[256];
                tier_list(tiers, ntiers, names, sizeof names);
                text_errf(err, errlen, "retention policy: rules[%zu].tier: \"%.32s\" is not %s", i,
                          s, names);
                return -1;
            }
        } else if (strcmp(key, "label") == 0) {
            for (int l = JWT_LABEL_PUBLIC; l <= JWT_LABEL_SECRET; l++)
                if (strcasecmp(s, jwt_label_name(l)) == 0) r->label = l;
            if (!r->label) {
                text_errf(err, errlen,
                          "retention policy: rules[%zu].label: \"%.32s\" is not PUBLIC, "
                          "INTERNAL, CONFIDENTIAL or SECRET",
                          i, s);
                return -1;
            }
        } else if (strcmp(key, "pii_kind") == 0) {
            if (strcmp(s, "*") != 0 && !pii_kind_of(s)) {
                text_errf(err, errlen,
                          "retention policy: rules[%zu].pii_kind: \"%.32s\" is no PII kind "
                          "(email, phone, payment_card, national_id, iban, api_key, "
                          "private_key, bearer_token, or * for any)",
                          i, s);
                return -1;
            }
            snprintf(r->pii_kind, sizeof r->pii_kind, "%s", s);
        } else {
            text_errf(err, errlen,
                      "retention policy: rules[%zu]: unknown member \"%.32s\" (after, tier, "
                      "label, pii_kind)",
                      i, key);
            return -1;
        }
    }
    if (!r->after_s) {
        text_errf(err, errlen, "retention policy: rules[%zu].after is required", i);
        return -1;
    }
    return 0;
}

static int parse_file(const char *file, size_t len, const retention_tier *tiers, size_t ntiers,
                      retention_policy *p, char *err, size_t errlen) {
    json_error_t jerr;
    json_t *doc = json_loadb(file, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *rules = json_object_get(doc, "rules");
    int rc = -1;
    if (!json_is_object(doc) || json_object_size(doc) != 1 || !json_is_array(rules)) {
        text_errf(err, errlen, "retention policy: %s",
                  doc ? "want {\"rules\": [...]} and nothing else" : jerr.text);
        goto done;
    }
    size_t i;
    json_t *o;
    json_array_foreach(rules, i, o) {
        retention_rule r;
        if (take_rule(o, i, tiers, ntiers, &r, err, errlen) != 0 || add(p, &r, err, errlen) != 0)
            goto done;
    }
    rc = 0;
done:
    json_decref(doc);
    return rc;
}

int retention_policy_build(const char *def, const char *pii, const char *file, size_t len,
                           const retention_tier *tiers, size_t ntiers, retention_policy *out,
                           char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    retention_rule all = {0}, with_pii = {.pii_kind = "*"};
    if (flag_period("retention", def, &all.after_s, err, errlen) != 0 ||
        flag_period("retention-pii", pii, &with_pii.after_s, err, errlen) != 0)
        return -1;
    if (all.after_s && add(out, &all, err, errlen) != 0) return -1;
    if (with_pii.after_s && add(out, &with_pii, err, errlen) != 0) return -1;
    return file ? parse_file(file, len, tiers, ntiers, out, err, errlen) : 0;
}

int retention_rule_covers(const retention_rule *r, int tier) {
    return r->tier == 0 || r->tier == tier;
}

void retention_rule_text(const retention_rule *r, char *buf, size_t len) {
    int64_t s = r->after_s;
    char period[32];
    if (s % 86400 == 0) snprintf(period, sizeof period, "%lldd", (long long)(s / 86400));
    else if (s % 3600 == 0) snprintf(period, sizeof period, "%lldh", (long long)(s / 3600));
    else if (s % 60 == 0) snprintf(period, sizeof period, "%lldm", (long long)(s / 60));
    else snprintf(period, sizeof period, "%llds", (long long)s);
    snprintf(buf, len, "%s%s%s%s%s: %s", r->tier_name ? r->tier_name : "every tier",
             r->label ? ", label " : "", r->label ? jwt_label_name(r->label) : "",
             r->pii_kind[0] ? ", pii " : "", r->pii_kind, period);
}
