/* text: request text checks; see text.h. */
#include "service/core/text.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int text_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        if (b == 0) return 0;
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (b >= 0xc2 && b <= 0xdf) {
            len = 2;
            cp = b & 0x1f;
        } else if (b >= 0xe0 && b <= 0xef) {
            len = 3;
            cp = b & 0x0f;
        } else if (b >= 0xf0 && b <= 0xf4) {
            len = 4;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (n - i < len) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

/* Number of UTF-8 characters in s, or -1 when s is not valid UTF-8 or
 * holds a control character (C0, DEL, C1). */
long text_name_chars(const char *s) {
    size_t n = strlen(s);
    if (!text_utf8_valid((const uint8_t *)s, n)) return -1;
    long chars = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b < 0x20 || b == 0x7f) return -1;
        if (b == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0) return -1; /* C1 */
        if ((b & 0xc0) != 0x80) chars++;
    }
    return chars;
}

/* Number of UTF-8 characters in s, or -1 when it is not valid UTF-8. */
long text_utf8_chars(const char *s) {
    size_t n = strlen(s);
    if (!text_utf8_valid((const uint8_t *)s, n)) return -1;
    long chars = 0;
    for (size_t i = 0; i < n; i++) chars += ((unsigned char)s[i] & 0xc0) != 0x80;
    return chars;
}

/* Quotes untrusted input for an error message: at most 64 bytes, and only
 * printable ASCII (others as \xNN), so messages stay readable and safe. */
const char *text_quote(arena *a, const char *s) {
    char *out = arena_alloc(a, 64 * 4 + 8), *w = out;
    if (!out) return "";
    size_t i = 0;
    for (; s[i] && i < 64; i++) {
        unsigned char b = (unsigned char)s[i];
        if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') *w++ = (char)b;
        else w += sprintf(w, "\\x%02x", b);
    }
    if (s[i]) w += sprintf(w, "...");
    *w = '\0';
    return out;
}

void text_verrf(char *err, size_t errlen, const char *fmt, va_list ap) {
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
}

void text_errf(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    text_verrf(err, errlen, fmt, ap);
    va_end(ap);
}

int text_fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    text_verrf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

char *text_read_file(const char *path, size_t *len) {
    int std = strcmp(path, "-") == 0;
    FILE *f = std ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *bigger = cap < (1 << 20) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (!std) fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int text_parse_duration(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v <= 0) return -1;
    int64_t mult = 1;
    if (*end == 's') mult = 1, end++;
    else if (*end == 'm') mult = 60, end++;
    else if (*end == 'h') mult = 3600, end++;
    else if (*end == 'd') mult = 86400, end++;
    if (*end || v > INT64_MAX / mult / 2) return -1;
    *out = v * mult;
    return 0;
}
