/* sess_record: a session record as the scripts store it (sess_lua.h): the
 * header "<label> <version> <created ms> <updated ms> <pii|-> <owner
 * length>:<owner>\n" and the value (or, in a List without values, the
 * value's size in decimal). A parser apart from I/O: fed bytes by the
 * store and by its fuzz target. */
#ifndef MEMORYD_SESSION_SESS_RECORD_H
#define MEMORYD_SESSION_SESS_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"

typedef struct sess_rec {
    const char *key;
    int label;
    int64_t version;
    int64_t create_ms, update_ms; /* Unix ms */
    const char **pii_kinds;
    size_t npii;
    const char *owner;
    int has_value; /* value points at the bytes (else only size is known) */
    const uint8_t *value;
    int64_t size;
} sess_rec;

/* Parses blob[0..len) into *out (strings in arena a; value borrows blob).
 * with_value: the bytes after the header are the value; else its size in
 * decimal. 0, or -1 when malformed or out of memory. */
int sess_rec_parse(arena *a, const char *blob, size_t len, int with_value, sess_rec *out);

/* The pii kinds as the header carries them: comma-separated, "-" for none
 * (in a). NULL when out of memory. */
const char *sess_rec_pii_field(arena *a, const char *const *kinds, size_t n);

#endif
