/* tier_sql_rank: see tier_sql_rank.h. */
#include "service/tier/tier_sql_rank.h"

#include <stdio.h>

#define CFG_SQL                                                                                    \
    "(SELECT coalesce((SELECT oid::regconfig FROM pg_ts_config WHERE cfgname = $%d),"              \
    " 'simple'::regconfig))"

void tier_sql_rank_cfg(pgq_sql *b, const char *language, char *buf, size_t n) {
    snprintf(buf, n, CFG_SQL, pgq_text(b, language));
}

void tier_sql_rank_doc(pgq_sql *b, const char *language, int text_param, char *buf, size_t n) {
    char cfg[128];
    tier_sql_rank_cfg(b, language, cfg, sizeof cfg);
    snprintf(buf, n, "to_tsvector(%s, left($%d, %d))", cfg, text_param, TIER_SQL_RANK_DOC_CHARS);
}

/* The query's distinct lexemes, each also as a one-word tsquery;
 * quote_literal keeps a lexeme a single operand whatever it holds. */
void tier_sql_rank_open(pgq_sql *b, const char *language, const char *query) {
    int p_lang = pgq_text(b, language), p_query = pgq_text(b, query);
    pgq_sql_add(b,
                "WITH rank_q AS (SELECT lexeme, quote_literal(lexeme)::tsquery AS tq FROM"
                " (SELECT DISTINCT lexeme FROM unnest(to_tsvector(" CFG_SQL ", $%d))) l),"
                " rank_tsq AS (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery AS q"
                " FROM rank_q), rank_all AS (SELECT count(*)::float8 AS n FROM ",
                p_lang, p_query);
}

void tier_sql_rank_candidates(pgq_sql *b) { pgq_sql_add(b, "), rank_cand AS (SELECT "); }

/* BM25 per candidate, each word counted once (tf 1): idf = ln(1 + (N -
 * df + 0.5) / (df + 0.5)) times (k1 + 1) / (1 + k1 (1 - b + b dl /
 * avgdl)), summed over the query's words the row holds. Which words a row
 * holds is a lookup in its tsvector per query word; counting repeats would
 * mean unnesting every candidate's document, ten times the cost. */
void tier_sql_rank_close(pgq_sql *b, const char *keys) {
    pgq_sql_add(
        b,
        "), rank_hit AS (SELECT %s, length(rank_doc) AS dl, lexeme"
        " FROM rank_cand JOIN rank_q ON rank_doc @@ tq),"
        " rank_df AS (SELECT lexeme, count(*)::float8 AS df FROM rank_hit GROUP BY lexeme),"
        " rank_n AS (SELECT (SELECT n FROM rank_all) AS n, (SELECT"
        " greatest(coalesce(avg(length(rank_doc)), 1), 1) FROM rank_cand)::float8 AS avgdl),"
        " rank_scores AS (SELECT %s, round(sum(ln(1 + (n - df + 0.5) / (df + 0.5)) * 2.2 /"
        " (1 + 1.2 * (0.25 + 0.75 * dl / avgdl)))::numeric, 9) AS rank_score FROM rank_hit"
        " JOIN rank_df USING (lexeme) CROSS JOIN rank_n GROUP BY %s) ",
        keys, keys, keys);
}
