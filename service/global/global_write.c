/* global_write: the shape every GlobalMemory write has on the event loop
 * (rpc.h's execution model): a transaction of round trips on one held
 * connection, the row lock with BEGIN first and the audit row with COMMIT
 * last; see global_store_internal.h. */
#include <string.h>

#include "service/global/global_store_internal.h"

enum { PUT_LOCKED, PUT_CHECKED, PUT_WRITTEN };

/* The INSERT or UPDATE, as the lock found the row. */
static int put_write(tier_async *op, global_put *g) {
    tier_ctx *c = op->c;
    int label = principal_stamp_label(c->p, g->label, g->row.exists ? g->row.label : 0);
    /* A statement longer than its buffer is refused by apg when sent. */
    g->k->write(g, c, tier_async_next(op, "write", NULL), g->row.exists, label);
    g->step = PUT_WRITTEN;
    return TIER_NEXT;
}

static int decode_put(tier_async *op, const PGresult *r) {
    global_put *g = op->arg;
    tier_ctx *c = op->c;
    int rc;
    switch (g->step) {
    case PUT_LOCKED:
        if ((rc = tier_sql_lock_row(c, r, &g->row)) != STATUS_OK ||
            (rc = g->k->locked(g, c, r)) != STATUS_OK)
            return rc;
        if (g->k->check && !g->checked) {
            g->k->check(g, c, tier_async_next(op, "check", NULL));
            g->step = PUT_CHECKED;
            return TIER_NEXT;
        }
        return put_write(op, g);
    case PUT_CHECKED:
        if ((rc = g->k->checked(g, c, r)) != STATUS_OK) return rc;
        g->checked = 1;
        return put_write(op, g);
    default:
        if (PQntuples(r) == 0) {
            /* Lost a create race: the other transaction's row committed
             * (ON CONFLICT waited for it); lock and decide again. */
            if (++g->races >= GLOBAL_MAX_CREATE_RACES)
                return tier_fail(c, STATUS_ECONFLICT, "%s %s is being created concurrently; retry",
                                 g->k->what, g->name);
            g->k->lock(g, c, tier_async_next(op, "row lock", NULL));
            g->step = PUT_LOCKED;
            return TIER_NEXT;
        }
        if ((rc = g->k->written(g, c, r)) != STATUS_OK) return rc;
        *g->created = !g->row.exists;
        return tier_async_commit(op);
    }
}

tier_async *global_put_start(tier_ctx *c, const global_put *g, size_t in_size,
                             const char *const *pii_kinds, size_t npii, tier_async_done_fn done,
                             void *arg) {
    void *in = arena_alloc(c->ar, in_size);
    const char *pii = pgq_array_literal(c->ar, pii_kinds, npii);
    tier_async *op =
        in && pii ? tier_async_new(c, "row lock", decode_put, g, sizeof *g, done, arg) : NULL;
    if (!op) return NULL;
    global_put *mine = op->arg;
    memcpy(in, g->in, in_size);
    mine->in = in;
    mine->pii = pii;
    tier_async_begin(op, "BEGIN");
    mine->k->lock(mine, c, &op->sql);
    return op;
}

/* ---- deletes ---- */

static int decode_delete(tier_async *op, const PGresult *r) {
    global_delete *d = op->arg;
    tier_ctx *c = op->c;
    if (d->deleted) {
        if (d->refusable && PQntuples(r) == 0)
            return tier_fail(c, STATUS_EPRECONDITION, "%s %s %s", d->what, d->name, d->refused_why);
        return tier_async_commit(op);
    }
    tier_row row;
    int rc = tier_sql_lock_row(c, r, &row);
    if (rc != STATUS_OK) return rc;
    if (!row.exists) return tier_fail(c, STATUS_ENOTFOUND, "%s %s not found", d->what, d->name);
    if ((rc = tier_may_write(c, &row, d->has_expected, d->expected, d->what, d->name)) != STATUS_OK)
        return rc;
    d->delete_sql(d, c, tier_async_next(op, "delete", NULL));
    d->deleted = 1;
    return TIER_NEXT;
}

tier_async *global_delete_start(tier_ctx *c, const global_delete *d, tier_async_done_fn done,
                                void *arg) {
    tier_async *op = tier_async_new(c, "row lock", decode_delete, d, sizeof *d, done, arg);
    if (!op) return NULL;
    global_delete *mine = op->arg;
    tier_async_begin(op, "BEGIN");
    mine->lock_sql(mine, c, &op->sql);
    return op;
}
