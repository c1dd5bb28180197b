/* entries_store_read: Read, List, Search and Stats, each one round trip
 * carrying the read diode; see entries_store.h. */
#include <string.h>

#include "service/entries/entries_store_internal.h"
#include "service/tier/tier_sql_rank.h"

/* ------------------------------------------------------------ Read */

typedef struct {
    const char *ns, *key;
    entries_record *out;
} read_args;

void entries_sql_read(const tier_ctx *c, const char *ns, const char *key, pgq_sql *b) {
    pgq_sql_add(b, "SELECT " ENTRIES_COLS ", value FROM entries WHERE ");
    entries_read_diode(b, c);
    pgq_sql_add(b, " AND namespace = $%d AND key = $%d", pgq_text(b, ns), pgq_text(b, key));
}

static int read_result(tier_ctx *c, const PGresult *r, const read_args *a) {
    if (PQntuples(r) == 0)
        return tier_fail(c, STATUS_ENOTFOUND, "entry %s/%s not found", a->ns, a->key);
    entries_record *recs;
    size_t n;
    int rc = entries_decode_rows(c, r, 1, 1, &recs, &n);
    if (rc == STATUS_OK) *a->out = recs[0];
    return rc;
}

static int decode_read(tier_async *op, const PGresult *res) {
    return read_result(op->c, res, op->arg);
}

tier_async *entries_store_read_async(entries_store *s, tier_ctx *c, const char *ns, const char *key,
                                     entries_record *out, tier_async_done_fn done, void *arg) {
    (void)s;
    read_args a = {ns, key, out};
    tier_async *op = tier_async_new(c, "read", decode_read, &a, sizeof a, done, arg);
    if (op) entries_sql_read(c, ns, key, &op->sql);
    return op;
}

/* The entry of the caller's tenant whatever its owner and label, unless
 * expired: for the router's cache, shared by the tenant's callers. */
static int decode_load(tier_async *op, const PGresult *res) {
    read_args *a = op->arg;
    if (PQntuples(res) == 0)
        return tier_fail(op->c, STATUS_ENOTFOUND, "entry %s/%s not found", a->ns, a->key);
    return entries_decode_row(op->c, res, 0, 1, a->out);
}

tier_async *entries_store_load_async(entries_store *s, tier_ctx *c, const char *ns, const char *key,
                                     entries_record *out, tier_async_done_fn done, void *arg) {
    (void)s;
    read_args a = {ns, key, out};
    tier_async *op = tier_async_new(c, "load entry", decode_load, &a, sizeof a, done, arg);
    if (op)
        pgq_sql_add(&op->sql,
                    "SELECT " ENTRIES_COLS ", value FROM entries WHERE tenant = $%d"
                    " AND namespace = $%d AND key = $%d"
                    " AND (expires_at IS NULL OR expires_at > now())",
                    pgq_text(&op->sql, principal_tenant(c->p)), pgq_text(&op->sql, ns),
                    pgq_text(&op->sql, key));
    return op;
}

/* ------------------------------------------------------------ List / Search */

/* How many leading rows came back with their value: with values, a
 * running sum of sizes marks the rows past the byte budget, which come
 * back without their value and end the page. */
static int rows_with_values(const PGresult *r, int take) {
    for (int i = 0; i < take; i++)
        if (PQgetisnull(r, i, ECOL_VALUE)) return i;
    return take;
}

/* The SELECT head of List and Search: with values, the rows are numbered
 * by a running sum of sizes in the order `order` (budget check above). */
static void select_head(pgq_sql *b, const entries_store *s, int with_values, const char *order) {
    if (with_values)
        pgq_sql_add(b,
                    "SELECT " ENTRIES_COLS ", CASE WHEN run - size_bytes < $%d THEN value END"
                    " FROM (SELECT " ENTRIES_COLS ", value, sum(size_bytes) OVER (ORDER BY %s"
                    " ROWS UNBOUNDED PRECEDING) AS run FROM entries WHERE ",
                    pgq_int8(b, (int64_t)s->max_response_bytes), order);
    else pgq_sql_add(b, "SELECT " ENTRIES_COLS " FROM entries WHERE ");
}

typedef struct {
    const entries_store *s;
    entries_list_in in;
    entries_page *out;
} list_args;

static int build_list(tier_ctx *c, const list_args *a, pgq_sql *b) {
    const entries_list_in *in = &a->in;
    const char *kl = entries_to_like(c->ar, in->key_pattern);
    if (!kl) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    select_head(b, a->s, in->with_values, "namespace, key");
    entries_read_diode(b, c);
    int none, rc = entries_sql_ns_scope(c, in->ns_pattern, b, &none);
    if (rc != STATUS_OK) return rc;
    if (none) return TIER_NO_ROWS;
    pgq_sql_add(b, " AND key LIKE $%d", pgq_text(b, kl));
    if (in->after_ns)
        pgq_sql_add(b, " AND (namespace, key) > ($%d, $%d)", pgq_text(b, in->after_ns),
                    pgq_text(b, in->after_key));
    pgq_sql_add(b, " ORDER BY namespace, key LIMIT $%d", pgq_int8(b, (int64_t)in->limit + 1));
    if (in->with_values) pgq_sql_add(b, ") page ORDER BY namespace, key");
    return STATUS_OK;
}

static int decode_list(tier_async *op, const PGresult *r) {
    const list_args *a = op->arg;
    const entries_list_in *in = &a->in;
    int rows = PQntuples(r), take = rows < in->limit ? rows : in->limit;
    if (in->with_values) take = rows_with_values(r, take);
    a->out->more = rows > take;
    return entries_decode_rows(op->c, r, in->with_values, take, &a->out->recs, &a->out->n);
}

tier_async *entries_store_list_async(entries_store *s, tier_ctx *c, const entries_list_in *in,
                                     entries_page *out, tier_async_done_fn done, void *arg) {
    list_args a = {s, *in, out};
    tier_async *op = tier_async_new(c, "list", decode_list, &a, sizeof a, done, arg);
    return tier_async_built(op, op ? build_list(c, op->arg, &op->sql) : STATUS_OK);
}

typedef struct {
    const entries_store *s;
    entries_search_in in;
    entries_page *out;
} search_args;

/* term with LIKE's `\`, `%` and `_` escaped, so it matches literally. */
static char *like_escape(arena *ar, const char *s) {
    char *out = arena_alloc(ar, 2 * strlen(s) + 1), *w = out;
    if (!out) return NULL;
    for (; *s; s++) {
        if (*s == '%' || *s == '_' || *s == '\\') *w++ = '\\';
        *w++ = *s;
    }
    *w = '\0';
    return out;
}

/* Search's criteria besides the term, as AND fragments. */
static int add_search_filters(tier_ctx *c, const entries_search_in *in, pgq_sql *b) {
    if (in->ntags) {
        const char *tl = pgq_array_literal(c->ar, in->tags, in->ntags);
        if (!tl) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        pgq_sql_add(b, " AND tags @> $%d", pgq_text_array(b, tl));
    }
    if (in->content_type[0])
        pgq_sql_add(b, " AND content_type = $%d", pgq_text(b, in->content_type));
    if (in->created_by[0]) pgq_sql_add(b, " AND owner = $%d", pgq_text(b, in->created_by));
    if (in->has_start) pgq_sql_add(b, " AND updated_at >= $%d", pgq_ts(b, in->start_us));
    if (in->has_end) pgq_sql_add(b, " AND updated_at < $%d", pgq_ts(b, in->end_us));
    return STATUS_OK;
}

static int build_search(tier_ctx *c, const search_args *a, pgq_sql *b) {
    const entries_search_in *in = &a->in;
    select_head(b, a->s, in->with_values, "updated_at DESC, namespace, key");
    entries_read_diode(b, c);
    int none, rc = entries_sql_ns_scope(c, in->ns_pattern, b, &none);
    if (rc != STATUS_OK) return rc;
    if (none) return TIER_NO_ROWS;
    if (in->term[0]) {
        const char *t = like_escape(c->ar, in->term);
        if (!t) return tier_fail(c, STATUS_ENOMEM, "out of memory");
        /* search_text is lower-cased with the same ICU rules at write time.
         * The pattern is put back to the column's collation, or the
         * planner could not use the trigram index (157 ms -> 2 ms over
         * 200k rows). */
        pgq_sql_add(b,
                    " AND search_text LIKE ('%%' || lower($%d COLLATE \"und-x-icu\") || '%%')"
                    " COLLATE \"default\"",
                    pgq_text(b, t));
    }
    if ((rc = add_search_filters(c, in, b)) != STATUS_OK) return rc;
    pgq_sql_add(b, " ORDER BY updated_at DESC, namespace, key LIMIT $%d",
                pgq_int8(b, (int64_t)in->limit));
    if (in->with_values) pgq_sql_add(b, ") page ORDER BY updated_at DESC, namespace, key");
    return STATUS_OK;
}

/* The visible entries of the search's scope and criteria: FROM ... WHERE. */
static int ranked_scope(tier_ctx *c, const entries_search_in *in, pgq_sql *b) {
    pgq_sql_add(b, "entries WHERE ");
    entries_read_diode(b, c);
    int none, rc = entries_sql_ns_scope(c, in->ns_pattern, b, &none);
    if (rc != STATUS_OK) return rc;
    if (none) return TIER_NO_ROWS;
    return add_search_filters(c, in, b);
}

/* TEXT_MATCH_RANKED: BM25 over the key and the value's text of the
 * entries the caller may see that the other criteria admit
 * (tier_sql_rank.h); the best limit are then read whole, the values
 * within the answer's budget in rank order. Columns: ENTRIES_COLS, the
 * value when asked for, the score. */
static int build_ranked(tier_ctx *c, const search_args *a, pgq_sql *b) {
    const entries_search_in *in = &a->in;
    tier_sql_rank_open(b, a->s->text_language, in->term);
    int rc = ranked_scope(c, in, b);
    if (rc != STATUS_OK) return rc;
    tier_sql_rank_candidates(b);
    pgq_sql_add(b, "namespace, key, search_doc AS rank_doc FROM ");
    if ((rc = ranked_scope(c, in, b)) != STATUS_OK) return rc;
    pgq_sql_add(b, " AND search_doc @@ " TIER_SQL_RANK_QUERY);
    tier_sql_rank_close(b, "namespace, key");
    const char *order = "top.rank_score DESC, namespace, key";
    if (in->with_values)
        pgq_sql_add(b,
                    "SELECT " ENTRIES_COLS ", CASE WHEN run - size_bytes < $%d THEN value END,"
                    " rank_score::float4 FROM (SELECT " ENTRIES_COLS ", value, top.rank_score,"
                    " sum(size_bytes) OVER (ORDER BY %s ROWS UNBOUNDED PRECEDING) AS run FROM ",
                    pgq_int8(b, (int64_t)a->s->max_response_bytes), order);
    else pgq_sql_add(b, "SELECT " ENTRIES_COLS ", top.rank_score::float4 FROM ");
    pgq_sql_add(b,
                "(SELECT namespace AS top_ns, key AS top_key, rank_score FROM rank_scores"
                " ORDER BY rank_score DESC, namespace, key LIMIT $%d) top JOIN entries ON"
                " tenant = $%d AND namespace = top.top_ns AND key = top.top_key",
                pgq_int8(b, (int64_t)in->limit), pgq_text(b, principal_tenant(c->p)));
    if (in->with_values) pgq_sql_add(b, ") page ORDER BY rank_score DESC, namespace, key");
    else pgq_sql_add(b, " ORDER BY %s", order);
    return STATUS_OK;
}

static int decode_search(tier_async *op, const PGresult *r) {
    const search_args *a = op->arg;
    int take = PQntuples(r);
    if (a->in.with_values) take = rows_with_values(r, take);
    int rc = entries_decode_rows(op->c, r, a->in.with_values, take, &a->out->recs, &a->out->n);
    if (rc != STATUS_OK || !a->in.ranked) return rc;
    int col = a->in.with_values ? ECOL_VALUE + 1 : ECOL_VALUE;
    float *scores = arena_alloc(op->c->ar, ((size_t)take + 1) * sizeof *scores);
    if (!scores) return tier_fail(op->c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < take; i++)
        if (pgq_col_float4(r, i, col, &scores[i]) != 0)
            return tier_fail(op->c, STATUS_EINTERNAL, "unreadable score");
    a->out->scores = scores;
    return STATUS_OK;
}

tier_async *entries_store_search_async(entries_store *s, tier_ctx *c, const entries_search_in *in,
                                       entries_page *out, tier_async_done_fn done, void *arg) {
    search_args a = {s, *in, out};
    tier_async *op = tier_async_new(c, "search", decode_search, &a, sizeof a, done, arg);
    if (!op) return NULL;
    return tier_async_built(op, in->ranked ? build_ranked(c, op->arg, &op->sql)
                                           : build_search(c, op->arg, &op->sql));
}

/* ------------------------------------------------------------ Stats */

static int build_stats(tier_ctx *c, const char *ns_pattern, pgq_sql *b) {
    pgq_sql_add(b, "SELECT count(*), count(DISTINCT namespace), coalesce(sum(size_bytes), 0)::int8,"
                   " coalesce(sum(octet_length(value)), 0)::int8,"
                   " count(*) FILTER (WHERE compressed) FROM entries WHERE ");
    entries_read_diode(b, c);
    int none, rc = entries_sql_ns_scope(c, ns_pattern, b, &none);
    if (rc != STATUS_OK) return rc;
    return none ? TIER_NO_ROWS : STATUS_OK;
}

static int decode_stats(tier_async *op, const PGresult *r) {
    const entries_ns_args *a = op->arg;
    entries_stats *o = a->out;
    if (PQntuples(r) != 1 || pgq_col_int(r, 0, 0, &o->entry_count) != 0 ||
        pgq_col_int(r, 0, 1, &o->namespace_count) != 0 ||
        pgq_col_int(r, 0, 2, &o->value_bytes) != 0 || pgq_col_int(r, 0, 3, &o->stored_bytes) != 0 ||
        pgq_col_int(r, 0, 4, &o->compressed_count) != 0)
        return tier_fail(op->c, STATUS_EINTERNAL, "unexpected stats result");
    return STATUS_OK;
}

tier_async *entries_store_stats_async(entries_store *s, tier_ctx *c, const char *ns_pattern,
                                      entries_stats *out, tier_async_done_fn done, void *arg) {
    (void)s;
    entries_ns_args a = {ns_pattern, out};
    tier_async *op = tier_async_new(c, "stats", decode_stats, &a, sizeof a, done, arg);
    return tier_async_built(op, op ? build_stats(c, ns_pattern, &op->sql) : STATUS_OK);
}
