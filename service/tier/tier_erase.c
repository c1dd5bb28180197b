/* tier_erase: the erasure principal and the subject's JSON; see
 * tier_erase.h. */
#include "service/tier/tier_erase.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/tier/tier_sql.h"

principal *tier_erase_principal(const tier_erase_sel *sel) {
    jwt_claims *cl = calloc(1, sizeof *cl);
    if (!cl) return NULL;
    /* No scopes: the principal only carries the diode's inputs; the
     * breadths are the context's (PRINCIPAL_ALL without an owner, so the
     * placeholder sub is never compared with an owner). */
    cl->sub = strdup(sel->owner ? sel->owner : " erasure");
    cl->tenant = strdup(sel->tenant);
    cl->iss = NULL;
    cl->clr = sel->max_label ? (jwt_label)sel->max_label : JWT_LABEL_SECRET;
    cl->lvl = JWT_LABEL_PUBLIC;
    if (!cl->sub || !cl->tenant) {
        jwt_claims_free(cl);
        return NULL;
    }
    return principal_create(cl);
}

const char *tier_erase_subject_json(arena *a, const tier_erase_sel *sel) {
    json_t *o = json_pack("{s:s}", "subject_id", sel->subject_id ? sel->subject_id : "");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    const char *copy = s ? arena_strdup(a, s) : NULL;
    free(s);
    return copy;
}

int tier_erase_is_retention(const tier_erase_sel *sel) {
    return sel->before_us || sel->label || sel->pii_kind;
}

int tier_erase_sql_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel, const char *alias,
                         const char *json_col) {
    const char *a = alias ? alias : "", *dot = alias ? "." : "";
    tier_sql_read_diode(b, c, alias);
    if (sel->before_us)
        pgq_sql_add(b, " AND %s%supdated_at < $%d", a, dot, pgq_ts(b, sel->before_us));
    if (sel->label) pgq_sql_add(b, " AND %s%slabel = $%d", a, dot, pgq_int4(b, sel->label));
    if (sel->pii_kind && strcmp(sel->pii_kind, "*") == 0)
        pgq_sql_add(b, " AND %s%spii_kinds <> '{}'", a, dot);
    else if (sel->pii_kind)
        pgq_sql_add(b, " AND $%d = ANY(%s%spii_kinds)", pgq_text(b, sel->pii_kind), a, dot);
    if (!sel->subject_id) return STATUS_OK;
    if (!json_col) {
        pgq_sql_add(b, " AND false");
        return STATUS_OK;
    }
    const char *json = tier_erase_subject_json(c->ar, sel);
    if (!json) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    pgq_sql_add(b, " AND (%s%s%s->>'subject_id') = $%d AND %s%s%s @> $%d", a, dot, json_col,
                pgq_text(b, sel->subject_id), a, dot, json_col, pgq_jsonb(b, json));
    return STATUS_OK;
}
