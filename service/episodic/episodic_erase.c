/* episodic_erase: a data subject's points out of every collection; see
 * episodic_erase.h. */
#include "service/episodic/episodic_erase.h"

#define PAGE 100 /* collections listed at a time */

/* Erases (or counts) sel's points of one collection. */
static int erase_collection(vstore *vs, tier_ctx *c, const vs_collection *col,
                            const Memory__V1__Filter *filter, const tier_erase_sel *sel,
                            int64_t *n) {
    if (sel->dry_run) return vstore_count(vs, c, col, filter, 1, n);
    vs_meta_sel meta = {.updated_before_us = sel->before_us,
                        .label = sel->label,
                        .pii_kind = sel->pii_kind,
                        .limit = sel->limit};
    return vstore_delete_filter(vs, c, col, filter, &meta, n);
}

int episodic_erase(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    *count = 0;
    if (sel->dry_run && tier_erase_is_retention(sel))
        return tier_fail(c, STATUS_EINVALID, "episodic: no dry run of a retention rule");
    /* payload.subject_id == sel->subject_id, when there is one. */
    Google__Protobuf__Value v = GOOGLE__PROTOBUF__VALUE__INIT;
    v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    v.string_value = (char *)sel->subject_id;
    Memory__V1__FieldCondition fc = MEMORY__V1__FIELD_CONDITION__INIT;
    fc.key = "subject_id";
    fc.condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE;
    fc.match_value = &v;
    Memory__V1__Condition cond = MEMORY__V1__CONDITION__INIT;
    cond.condition_case = MEMORY__V1__CONDITION__CONDITION_FIELD;
    cond.field = &fc;
    Memory__V1__Condition *must[] = {&cond};
    Memory__V1__Filter f = MEMORY__V1__FILTER__INIT;
    f.n_must = 1;
    f.must = must;
    const Memory__V1__Filter *filter = sel->subject_id ? &f : NULL;

    const char *after = NULL;
    for (;;) {
        vs_collection *cols = NULL;
        size_t n = 0;
        int rc = vstore_list_collections(vs, c, after, PAGE, &cols, &n);
        if (rc != STATUS_OK) return rc;
        for (size_t i = 0; i < n; i++) {
            int64_t got = 0;
            tier_erase_sel left = *sel;
            if (sel->limit) left.limit = sel->limit - *count; /* the bound is per call */
            rc = erase_collection(vs, c, &cols[i], filter, &left, &got);
            if (rc != STATUS_OK) return rc;
            *count += got;
            if (sel->limit && *count >= sel->limit) return STATUS_OK;
        }
        if (n < PAGE) return STATUS_OK;
        after = cols[n - 1].name;
    }
}
