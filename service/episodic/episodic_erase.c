/* episodic_erase: a data subject's points out of every collection, or
 * read out of them for an export; see episodic_erase.h. */
#include "service/episodic/episodic_erase.h"

#include <stdlib.h>

#define PAGE 100        /* collections listed at a time */
#define EXPORT_PAGE 256 /* points held at a time by an export */
#define STOP 1          /* a collection callback's "done, stop early" (not a STATUS_*) */

/* payload.subject_id == sel->subject_id as a memory.v1.Filter, the one the
 * backends push down (Qdrant's filter, the embedded index's efilter). The
 * struct holds every part, so it lives on the caller's stack. */
typedef struct subject_filter {
    Google__Protobuf__Value v;
    Memory__V1__FieldCondition fc;
    Memory__V1__Condition cond;
    Memory__V1__Condition *must[1];
    Memory__V1__Filter f;
} subject_filter;

/* sf's filter for sel, or NULL when sel names no subject (every point
 * the context reaches). sel->subject_id is borrowed. */
static const Memory__V1__Filter *subject_filter_of(subject_filter *sf, const tier_erase_sel *sel) {
    if (!sel->subject_id) return NULL;
    sf->v = (Google__Protobuf__Value)GOOGLE__PROTOBUF__VALUE__INIT;
    sf->v.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    sf->v.string_value = (char *)sel->subject_id;
    sf->fc = (Memory__V1__FieldCondition)MEMORY__V1__FIELD_CONDITION__INIT;
    sf->fc.key = "subject_id";
    sf->fc.condition_case = MEMORY__V1__FIELD_CONDITION__CONDITION_MATCH_VALUE;
    sf->fc.match_value = &sf->v;
    sf->cond = (Memory__V1__Condition)MEMORY__V1__CONDITION__INIT;
    sf->cond.condition_case = MEMORY__V1__CONDITION__CONDITION_FIELD;
    sf->cond.field = &sf->fc;
    sf->must[0] = &sf->cond;
    sf->f = (Memory__V1__Filter)MEMORY__V1__FILTER__INIT;
    sf->f.n_must = 1;
    sf->f.must = sf->must;
    return &sf->f;
}

/* Calls fn for every collection of c's tenant, by name, until it returns
 * other than STATUS_OK: STATUS_OK (also when fn said STOP), or the
 * listing's or fn's code. */
typedef int (*collection_fn)(void *arg, const vs_collection *col);
static int each_collection(vstore *vs, tier_ctx *c, collection_fn fn, void *arg) {
    const char *after = NULL;
    for (;;) {
        vs_collection *cols = NULL;
        size_t n = 0;
        int rc = vstore_list_collections(vs, c, after, PAGE, &cols, &n);
        if (rc != STATUS_OK) return rc;
        for (size_t i = 0; i < n; i++) {
            rc = fn(arg, &cols[i]);
            if (rc == STOP) return STATUS_OK;
            if (rc != STATUS_OK) return rc;
        }
        if (n < PAGE) return STATUS_OK;
        after = cols[n - 1].name;
    }
}

/* ------------------------------------------------------------ erase */

typedef struct erase_run {
    vstore *vs;
    tier_ctx *c;
    const tier_erase_sel *sel;
    const Memory__V1__Filter *filter;
    int64_t *count;
} erase_run;

/* Erases (or counts) sel's points of one collection. */
static int erase_collection(void *arg, const vs_collection *col) {
    erase_run *r = arg;
    const tier_erase_sel *sel = r->sel;
    int64_t got = 0;
    int rc;
    if (sel->dry_run) {
        rc = vstore_count(r->vs, r->c, col, r->filter, 1, &got);
    } else {
        vs_meta_sel meta = {.updated_before_us = sel->before_us,
                            .label = sel->label,
                            .pii_kind = sel->pii_kind,
                            /* the bound is per call, not per collection */
                            .limit = sel->limit ? sel->limit - *r->count : 0};
        rc = vstore_delete_filter(r->vs, r->c, col, r->filter, &meta, &got);
    }
    if (rc != STATUS_OK) return rc;
    *r->count += got;
    return sel->limit && *r->count >= sel->limit ? STOP : STATUS_OK;
}

int episodic_erase(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    *count = 0;
    if (sel->dry_run && tier_erase_is_retention(sel))
        return tier_fail(c, STATUS_EINVALID, "episodic: no dry run of a retention rule");
    subject_filter sf;
    erase_run r = {vs, c, sel, subject_filter_of(&sf, sel), count};
    return each_collection(vs, c, erase_collection, &r);
}

/* ------------------------------------------------------------ export */

typedef struct export_run {
    vstore *vs;
    tier_ctx *c;
    const Memory__V1__Filter *filter;
    tier_export_emit emit;
    void *emit_arg;
} export_run;

/* One point as a record: "<collection>/<id>", its payload as compact JSON
 * ("{}" without one), or {"payload": ..., "text": ...} when it has a text,
 * and its metadata under the collection's tenant. */
static int emit_point(export_run *r, const vs_collection *col, const vs_point *p) {
    char idt[37];
    char *id = arena_printf(r->c->ar, "%s/%s", col->name, vs_id_text(&p->id, idt));
    char *json = NULL;
    if (p->text) {
        json_t *both = json_pack("{s:O?, s:s}", "payload", p->payload, "text", p->text);
        json = both ? json_dumps(both, JSON_COMPACT) : NULL;
        json_decref(both);
        if (!json) return tier_fail(r->c, STATUS_ENOMEM, "out of memory");
    } else if (p->payload) {
        json = json_dumps(p->payload, JSON_COMPACT);
    }
    if (!id || ((p->payload || p->text) && !json)) {
        free(json);
        return tier_fail(r->c, STATUS_ENOMEM, "out of memory");
    }
    tier_meta meta = p->meta;
    if (!meta.tenant) meta.tenant = principal_tenant(r->c->p);
    tier_export_rec rec = {.kind = "point", .id = id, .json = json ? json : "{}", .meta = &meta};
    int rc = r->emit(r->emit_arg, &rec);
    free(json);
    return rc;
}

/* Every point of one collection the context reads and the filter takes,
 * a page at a time in its own arena: an export of a million points holds
 * EXPORT_PAGE of them, not a million. */
static int export_collection(void *arg, const vs_collection *col) {
    export_run *r = arg;
    tier_ctx *c = r->c;
    arena *pa = arena_create();
    if (!pa) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    arena *call_ar = c->ar;
    c->ar = pa; /* the pages, and emit_point's ids, go in pa */
    vs_id after;
    int rc = STATUS_OK, has_after = 0;
    for (;;) {
        vs_point *pts = NULL;
        size_t n = 0;
        rc = vstore_scroll(r->vs, c, col, r->filter, has_after ? &after : NULL, EXPORT_PAGE, 1,
                           &pts, &n);
        if (rc != STATUS_OK) break;
        for (size_t i = 0; i < n && rc == STATUS_OK; i++) rc = emit_point(r, col, &pts[i]);
        if (n) {
            after = pts[n - 1].id;
            has_after = 1;
        }
        vs_points_release(pts, n);
        if (rc != STATUS_OK || n < EXPORT_PAGE) break;
        arena_reset(pa);
    }
    c->ar = call_ar;
    arena_free(pa);
    return rc;
}

int episodic_export(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                    void *emit_arg) {
    /* A retention rule selects what to erase by age and kind; it names
     * nobody whose records an export would hand over. */
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    subject_filter sf;
    export_run r = {vs, c, subject_filter_of(&sf, sel), emit, emit_arg};
    return each_collection(vs, c, export_collection, &r);
}
