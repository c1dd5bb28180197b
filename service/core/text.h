/* text: checks on the text fields of requests — UTF-8 validity, character
 * counts, control characters — quoting untrusted text for error messages,
 * and writing an error message into a caller's buffer. Pure functions over
 * bytes. */
#ifndef MEMORYD_CORE_TEXT_H
#define MEMORYD_CORE_TEXT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"

/* 1 if s[0..n) is valid UTF-8 (no overlongs, no surrogates) without NUL. */
int text_utf8_valid(const uint8_t *s, size_t n);

/* Characters in the NUL-terminated s, or -1 when it is not valid UTF-8. */
long text_utf8_chars(const char *s);

/* Characters in s, or -1 when it is not valid UTF-8 or holds a control
 * character (C0, DEL, C1): for ids, types, tags and other names. */
long text_name_chars(const char *s);

/* s for an error message, in arena a: at most 64 bytes, only printable
 * ASCII (others as \xNN, `"` and `\` too), "..." when cut. "" on OOM. */
const char *text_quote(arena *a, const char *s);

/* snprintf into an error buffer the caller may not have given (err NULL or
 * errlen 0: nothing written): the `char *err, size_t errlen` convention of
 * the parsers. */
void text_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void text_verrf(char *err, size_t errlen, const char *fmt, va_list ap);
/* text_errf, then returns code: `return text_fail(err, errlen,
 * STATUS_EINVALID, "...")`. */
int text_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The whole file at path ("-": standard input), under 1 MiB, malloc'd and
 * NUL-terminated (free()), its length in *len (may be NULL); NULL when it
 * cannot be read or is larger. For the command-line tools. */
char *text_read_file(const char *path, size_t *len);

/* A positive duration "90s", "30m", "1h", "7d" (a bare number: seconds)
 * into *seconds: 0, or -1 when it is not one. */
int text_parse_duration(const char *s, int64_t *seconds);

#endif
