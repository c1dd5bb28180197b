/* tier_sql_rank: ranked text search in PostgreSQL, written once for the
 * tiers that keep text there (Entries.Search and QueryEntities in
 * TEXT_MATCH_RANKED): Okapi BM25 (k1 1.2, b 0.75) of a query's words, any
 * of them, each counted once in a row (tf 1: what a row holds is a lookup
 * in its tsvector; counting repeats would unnest every candidate's
 * document, ten times the cost, and records here are short), as PostgreSQL's text search
 * configuration of the server's text language analyzes them (stemmed, stop words left out; 'simple'
 * when PostgreSQL has no configuration of that name).
 *
 * A ranked table keeps each row's document (a tsvector made at write time
 * with tier_sql_rank_cfg, GIN-indexed), so a query reads only the rows
 * sharing a word with it. Term statistics count only rows the caller may
 * see that its filters admit, so hidden rows weigh nothing in a score: the
 * row count N over all of those (a count, no documents read), each word's
 * document frequency and the average document length over the candidates
 * (the rows sharing a word: every row holding a word is one, so the
 * frequencies are exact; the average is theirs, not the whole scope's,
 * which would mean reading every document). Scores are rounded to 9
 * decimals (numeric), so a page's last score read back as a cursor meets
 * the same row again.
 *
 * A ranked statement is built in four parts, the caller's FROM ... WHERE
 * (the same both times) between them:
 *
 *   tier_sql_rank_open(b, language, query);
 *   pgq_sql_add(b, "entities e WHERE <read diode, filters>");           N
 *   tier_sql_rank_candidates(b);
 *   pgq_sql_add(b, "e.id, e.rank_doc FROM entities e WHERE <read diode, filters>"
 *                  " AND e.rank_doc @@ " TIER_SQL_RANK_QUERY);
 *   tier_sql_rank_close(b, "id");
 *   pgq_sql_add(b, "SELECT id, rank_score FROM rank_scores ORDER BY rank_score DESC, id");
 *
 * The scores carry the candidates' key columns, not a row number to join
 * the candidates on again: a generic plan of a prepared statement does not
 * know how many candidates there are and may join them in a nested loop.
 */
#ifndef MEMORYD_TIER_TIER_SQL_RANK_H
#define MEMORYD_TIER_TIER_SQL_RANK_H

#include <stddef.h>

#include "service/store/pgq.h"

/* The query's words as a tsquery matching any of them (NULL: none, which
 * matches nothing), inside the candidates' WHERE. */
#define TIER_SQL_RANK_QUERY "(SELECT q FROM rank_tsq)"

/* Opens the statement (language and query go in as parameters) up to the
 * FROM of the row count: "... rank_all AS (SELECT count(*)::float8 AS n FROM ". */
void tier_sql_rank_open(pgq_sql *b, const char *language, const char *query);
/* Between the row count and the candidates: "), rank_cand AS (SELECT ".
 * The candidates' columns are their key, then their document named
 * rank_doc (no other column of that name, nor lexeme, tq, dl, df, n or
 * avgdl). */
void tier_sql_rank_candidates(pgq_sql *b);
/* Closes the candidates and adds their scores: rank_scores (keys...,
 * rank_score numeric), keys being the candidates' key columns ("id",
 * "namespace, key"); the caller's SELECT follows. */
void tier_sql_rank_close(pgq_sql *b, const char *keys);

/* language's text search configuration as a SQL expression (language
 * bound as a parameter of b) into buf (n bytes, 128 are enough): for the
 * document a write stores, to_tsvector(<expr>, text). */
void tier_sql_rank_cfg(pgq_sql *b, const char *language, char *buf, size_t n);

/* A document is made of a text's first TIER_SQL_RANK_DOC_CHARS characters:
 * PostgreSQL refuses a tsvector of 1 MB or more, which a longer text (an
 * entry's value may be 1 MiB) can reach. */
#define TIER_SQL_RANK_DOC_CHARS 65536
/* The document of parameter text_param (SQL text) in language, into buf
 * (n bytes, 192 are enough): to_tsvector(<cfg>, left($text, 65536)). */
void tier_sql_rank_doc(pgq_sql *b, const char *language, int text_param, char *buf, size_t n);

#endif
