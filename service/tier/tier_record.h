/* tier_record: the rules every tier applies to its records, whatever
 * stores them: may the caller read this record (the read diode's final
 * check, behind the one pushed into the backend query), may it change it
 * (the write diode), and does the version it expects match
 * (compare-and-set). No I/O, no gRPC; results as tier_ctx.h says. */
#ifndef MEMORYD_TIER_TIER_RECORD_H
#define MEMORYD_TIER_TIER_RECORD_H

#include <stdint.h>

#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"

/* A stored record's state, as a write finds it (under a row lock). */
typedef struct tier_row {
    int exists;
    const char *owner; /* in ctx->ar */
    int label;
    int64_t version;
} tier_row;

/* 1 if the caller of c may read a record of its tenant with this owner and
 * label (tenant, owner unless read breadth :all, label <= clr). */
int tier_may_read(const tier_ctx *c, const char *owner, int label);

/* The write diode for changing an existing record: the caller must be able
 * to read it (label <= clr) and own it or hold "<tier>:write:all".
 * STATUS_EDENIED naming what ("entity") and id otherwise. */
int tier_may_modify(tier_ctx *c, const tier_row *row, const char *what, const char *id);

/* Compare-and-set: with has_expected, the record's version (0 when it
 * does not exist) must equal expected (0 = must not exist).
 * STATUS_ECONFLICT saying which way it differs otherwise. */
int tier_check_version(tier_ctx *c, const tier_row *row, int has_expected, int64_t expected,
                       const char *what, const char *id);

/* Both, for a write of row: when it exists the caller may modify it, and
 * with has_expected its version is the expected one. */
int tier_may_write(tier_ctx *c, const tier_row *row, int has_expected, int64_t expected,
                   const char *what, const char *id);

/* The final read filter behind the backend's own predicates: a row the caller may
 * not read (or, allowed = 0, one a tier's own rule hides, such as a
 * namespace outside the token's ns claim) means a query let it through: a
 * bug. It is logged loudly, naming the record as fmt... says ("entity %s"),
 * and STATUS_EINTERNAL returned: the row never leaves. */
int tier_check_row(tier_ctx *c, const tier_meta *m, int allowed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
