/* tier_record: the record rules; see tier_record.h. */
#include "service/tier/tier_record.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "service/core/log.h"

int tier_may_read(const tier_ctx *c, const char *owner, int label) {
    return principal_may_read(c->p, c->read_breadth, principal_tenant(c->p), owner, label);
}

int tier_may_modify(tier_ctx *c, const tier_row *row, const char *what, const char *id) {
    if (row->label > (int)principal_clr(c->p))
        return tier_fail(c, STATUS_EDENIED,
                         "%s %s is labelled above the token's read ceiling and cannot be "
                         "modified by it",
                         what, id);
    if (strcmp(row->owner, principal_sub(c->p)) != 0 && c->write_breadth != PRINCIPAL_ALL)
        return tier_fail(c, STATUS_EDENIED,
                         "%s %s belongs to another principal; modifying it needs %s:write:all",
                         what, id, c->tier);
    return STATUS_OK;
}

int tier_check_version(tier_ctx *c, const tier_row *row, int has_expected, int64_t expected,
                       const char *what, const char *id) {
    if (!has_expected) return STATUS_OK;
    int64_t current = row->exists ? row->version : 0;
    if (current == expected) return STATUS_OK;
    if (current == 0)
        return tier_fail(c, STATUS_ECONFLICT, "%s %s does not exist (expected_version %lld)", what,
                         id, (long long)expected);
    if (expected == 0)
        return tier_fail(c, STATUS_ECONFLICT, "%s %s already exists (version %lld)", what, id,
                         (long long)current);
    return tier_fail(c, STATUS_ECONFLICT, "%s %s is at version %lld, not %lld", what, id,
                     (long long)current, (long long)expected);
}

int tier_check_row(tier_ctx *c, const tier_meta *m, int allowed, const char *fmt, ...) {
    if (allowed && principal_may_read(c->p, c->read_breadth, m->tenant, m->owner, m->label))
        return STATUS_OK;
    char record[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(record, sizeof record, fmt, ap);
    va_end(ap);
    log_fields(LOG_ERROR, "READ DIODE MISMATCH, a row escaped the SQL predicates", LOG_F_STR,
               "tier", c->tier, LOG_F_STR, "caller", principal_sub(c->p), LOG_F_STR,
               "caller_tenant", principal_tenant(c->p), LOG_F_STR, "row_tenant", m->tenant,
               LOG_F_STR, "row_owner", m->owner, LOG_F_INT, "row_label", (int64_t)m->label,
               LOG_F_STR, "record", record, LOG_F_END);
    return tier_fail(c, STATUS_EINTERNAL, "internal error: read filter mismatch (logged)");
}

int tier_may_write(tier_ctx *c, const tier_row *row, int has_expected, int64_t expected,
                   const char *what, const char *id) {
    int rc = row->exists ? tier_may_modify(c, row, what, id) : STATUS_OK;
    return rc == STATUS_OK ? tier_check_version(c, row, has_expected, expected, what, id) : rc;
}
