/* privacy_retention: the retention policy, i.e. how long each kind of
 * long-term record is kept after its last change before the sweeper
 * (privacy_sweeper.h) erases it. Pure: parsed from the flags and an
 * optional policy file, tested and fuzzed without a server.
 *
 * A rule names what it covers (a tier that keeps long-term records —
 * global, episodic, entries, working, session: the tiers whose descriptor
 * lists tables (tier_erase.h's tier_records) — or all of them; a label;
 * records carrying a PII kind, or any PII)
 * and a period. A record is erased once any rule covering it has run out,
 * so the shortest period that applies wins: "records with PII go sooner"
 * is a rule of its own. Cache values (an hour at most) and blackboards
 * (with their task) end by their TTLs and no rule covers them.
 *
 * The flags give two rules: --retention (every record; default 730d) and
 * --retention-pii (records carrying any PII kind; default 180d); "off"
 * drops a rule. The file (--retention-policy) adds rules:
 *   {"rules": [
 *     {"after": "30d", "tier": "entries"},
 *     {"after": "7d", "pii_kind": "payment_card"},
 *     {"after": "90d", "tier": "episodic", "label": "SECRET"}]}
 * "after" is a duration (90s, 30m, 12h, 30d) and required; "tier" is
 * one of those tiers' names; "label" PUBLIC .. SECRET; "pii_kind" a
 * detector's kind (pii.h) or "*" for any. Unknown members are refused: a
 * misspelt rule must not silently keep data. */
#ifndef MEMORYD_PRIVACY_PRIVACY_RETENTION_H
#define MEMORYD_PRIVACY_PRIVACY_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#define RETENTION_MAX_RULES 64

/* A tier a rule may name (strings borrowed for the policy's life: the
 * tiers' descriptors'). */
typedef struct retention_tier {
    const char *name; /* "entries" */
    int tier;         /* memory.v1.Tier */
} retention_tier;

typedef struct retention_rule {
    int tier;              /* memory.v1.Tier of the tier it names; 0: every tier */
    const char *tier_name; /* its name (retention_tier's); NULL: every tier */
    int label;             /* memory.v1.Label; 0: any */
    char pii_kind[24];     /* "": any record; "*": records carrying PII; else that kind */
    int64_t after_s;       /* erased this long after the record's last change */
} retention_rule;

typedef struct retention_policy {
    retention_rule rules[RETENTION_MAX_RULES];
    size_t n;
} retention_policy;

/* The policy of the flags: def and pii are --retention and
 * --retention-pii (a duration, or "off"); file is the policy file's
 * contents (NULL: none), len its length; tiers[0..ntiers) the tiers a rule
 * may name. 0, or -1 with what is wrong in err (naming the rule's index
 * and member). */
int retention_policy_build(const char *def, const char *pii, const char *file, size_t len,
                           const retention_tier *tiers, size_t ntiers, retention_policy *out,
                           char *err, size_t errlen);

/* 1 when rule r covers records of tier (memory.v1.Tier). */
int retention_rule_covers(const retention_rule *r, int tier);

/* r as text for logs ("entries, label SECRET, pii email: 30d"). */
void retention_rule_text(const retention_rule *r, char *buf, size_t len);

#endif
