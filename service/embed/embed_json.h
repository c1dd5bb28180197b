/* embed_json: the OpenAI embeddings API's bodies as pure functions (no
 * I/O), so the unit test and tests/fuzz/embed_json_fuzz feed them bytes.
 *
 * Request (POST <base>/embeddings):
 *   {"model": M, "input": [T0, T1, ...], "encoding_format": "float"}
 * Answer:
 *   {"object": "list", "model": M, "usage": {...},
 *    "data": [{"object": "embedding", "index": i, "embedding": [f, ...]}, ...]}
 * Error:
 *   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
 *
 * Servers that speak the API (Ollama, vLLM, text-embeddings-inference,
 * hosted providers) differ in what they add around it, so an answer is
 * read for what memoryd needs and nothing more: `data`, each element's
 * `index` and `embedding`. Functions return STATUS_OK or a STATUS_E* code
 * with a message in err. */
#ifndef MEMORYD_EMBED_EMBED_JSON_H
#define MEMORYD_EMBED_EMBED_JSON_H

#include <stddef.h>

#include "service/core/arena.h"

/* Vector lengths an answer may have (the episodic tier's bound). */
#define EMBED_MAX_DIMS 65536

/* The request body for texts[0..n) (UTF-8, n >= 1) with model:
 * malloc'd, NUL-terminated, its length in *len; NULL when out of memory
 * or a text is not valid UTF-8. */
char *embed_json_request(const char *model, const char *const *texts, size_t n, size_t *len);

/* Reads an answer to a request of n inputs into n vectors of *dims floats
 * each, in input order, in arena a (*out). dims_want > 0: every vector
 * must have that length, else STATUS_EPRECONDITION naming both lengths
 * (*dims is then the answer's length); 0: any length, the same for all.
 * An answer of another shape (not JSON, no `data`, a count other than n,
 * an index missing, repeated or out of range, vectors of different
 * lengths, a component that is not a finite number within float range, a
 * base64 string instead of numbers) is STATUS_EINTERNAL naming what was
 * wrong. */
int embed_json_parse(const char *body, size_t len, size_t n, int dims_want, arena *a, float **out,
                     int *dims, char *err, size_t errlen);

/* The text of a failed answer for an error message, into out (always
 * NUL-terminated, never fails): error.message with error.type and
 * error.code when present, or `error` itself when a string (text-
 * embeddings-inference), else the body; only printable ASCII is kept
 * (others become '?'), cut with "..."; "(empty body)" for none. */
void embed_json_error_text(const char *body, size_t len, char *out, size_t outlen);

#endif
