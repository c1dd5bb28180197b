/* nsglob: namespace and key patterns; see nsglob.h. */
#include "service/auth/nsglob.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "service/core/text.h"

/* Matches one pattern p[0..pn) against s[0..sn), `*` = any run (possibly
 * empty). With `*` as the only metacharacter, resuming after the most
 * recent `*` is enough: an earlier `*` could only take less, which the
 * later one can make up for. O(pn * sn) worst case. opaque_stars: a `*`
 * of s is a symbol only a `*` of p can consume (nsglob_covers). */
static int star_match(const char *p, size_t pn, const char *s, size_t sn, int opaque_stars) {
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si] && !(opaque_stars && s[si] == '*')) {
            pi++;
            si++;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return 0;
        }
    }
    while (pi < pn && p[pi] == '*') pi++;
    return pi == pn;
}

static int ns_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static int check_segments(const char *s, size_t len, int allow_star, char *why, size_t whylen) {
    const char *what = allow_star ? "namespace pattern" : "namespace";
    int seg = 1;
    size_t seglen = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == ':') {
            if (seglen == 0) {
                text_errf(why, whylen, "%s: segment %d is empty", what, seg);
                return -1;
            }
            if (seglen > NSGLOB_SEGMENT_MAX) {
                text_errf(why, whylen, "%s: segment %d is longer than %d characters", what, seg,
                          NSGLOB_SEGMENT_MAX);
                return -1;
            }
            if (i == len) break;
            if (++seg > 3) {
                text_errf(why, whylen, "%s: more than three `:`-separated segments", what);
                return -1;
            }
            seglen = 0;
            continue;
        }
        unsigned char c = (unsigned char)s[i];
        if (!ns_char(c) && !(allow_star && c == '*')) {
            if (c >= 0x20 && c < 0x7f)
                text_errf(why, whylen, "%s: character '%c' is not allowed in segment %d", what, c,
                          seg);
            else
                text_errf(why, whylen, "%s: byte 0x%02x is not allowed in segment %d", what, c,
                          seg);
            return -1;
        }
        seglen++;
    }
    if (seg != 3) {
        text_errf(why, whylen,
                  "%s: needs three `:`-separated segments (agent:workflow:node), found %d", what,
                  seg);
        return -1;
    }
    return 0;
}

int nsglob_check_namespace(const char *s, size_t len, char *why, size_t whylen) {
    return check_segments(s, len, 0, why, whylen);
}

int nsglob_check_pattern(const char *s, size_t len, char *why, size_t whylen) {
    return check_segments(s, len, 1, why, whylen);
}

/* Length of the UTF-8 sequence at s[0..n) (1..4), or 0 when invalid
 * (overlong, surrogate, above U+10FFFF, truncated). *cp gets the code
 * point. */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return len;
}

static int check_key(const char *s, size_t len, int allow_star, char *why, size_t whylen) {
    const char *what = allow_star ? "key pattern" : "key";
    if (len == 0 || len > NSGLOB_KEY_MAX) {
        text_errf(why, whylen, "%s: must be 1 to %d bytes, got %zu", what, NSGLOB_KEY_MAX, len);
        return -1;
    }
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        unsigned cp;
        size_t n = utf8_seq(u + i, len - i, &cp);
        if (n == 0) {
            text_errf(why, whylen, "%s: not valid UTF-8 at byte %zu", what, i);
            return -1;
        }
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            text_errf(why, whylen, "%s: control character U+%04X at byte %zu", what, cp, i);
            return -1;
        }
        if (cp == '*' && !allow_star) {
            text_errf(why, whylen, "%s: `*` is only allowed in patterns (byte %zu)", what, i);
            return -1;
        }
        i += n;
    }
    return 0;
}

int nsglob_check_key(const char *s, size_t len, char *why, size_t whylen) {
    return check_key(s, len, 0, why, whylen);
}

int nsglob_check_key_pattern(const char *s, size_t len, char *why, size_t whylen) {
    return check_key(s, len, 1, why, whylen);
}

int nsglob_valid_namespace(const char *s, size_t len) {
    return check_segments(s, len, 0, NULL, 0) == 0;
}

int nsglob_valid_pattern(const char *s, size_t len) {
    return check_segments(s, len, 1, NULL, 0) == 0;
}

int nsglob_valid_key(const char *s, size_t len) { return check_key(s, len, 0, NULL, 0) == 0; }

int nsglob_valid_key_pattern(const char *s, size_t len) {
    return check_key(s, len, 1, NULL, 0) == 0;
}

/* Segment i (0..2) of a validated namespace or pattern s: *n gets its
 * length, the return value its start. */
static const char *segment(const char *s, int i, size_t *n) {
    while (i-- > 0) s = strchr(s, ':') + 1;
    const char *e = strchr(s, ':');
    *n = e ? (size_t)(e - s) : strlen(s);
    return s;
}

/* star_match of each segment of pattern p against that of s. */
static int segments_match(const char *p, const char *s, int opaque_stars) {
    for (int i = 0; i < 3; i++) {
        size_t pn, sn;
        const char *ps = segment(p, i, &pn), *ss = segment(s, i, &sn);
        if (!star_match(ps, pn, ss, sn, opaque_stars)) return 0;
    }
    return 1;
}

int nsglob_match(const char *glob, const char *ns) {
    return nsglob_valid_pattern(glob, strlen(glob)) && nsglob_valid_namespace(ns, strlen(ns)) &&
           segments_match(glob, ns, 0);
}

int nsglob_key_match(const char *pattern, const char *key) {
    size_t pn = strlen(pattern), kn = strlen(key);
    if (!nsglob_valid_key_pattern(pattern, pn) || !nsglob_valid_key(key, kn)) return 0;
    return star_match(pattern, pn, key, kn, 0);
}

/* Namespaces are the product of their three segment languages, none of
 * them empty, so containment is containment in every segment: does each
 * outer segment pattern match the inner one, each `*` of inner being an
 * opaque symbol that only a `*` of outer can consume (star_match with
 * opaque_stars)?
 *
 * Why this is exact containment of the segment languages (valid segments,
 * 1..64 bytes over the 65 characters [A-Za-z0-9_.-]):
 * - if it holds, whatever each `*` of inner stands for, the `*` of outer
 *   that consumed it can consume that too, so outer matches;
 * - if it fails, pick a character z that is no literal of outer (one
 *   exists: outer has at most 64 bytes, one fewer literals if it has any
 *   `*`) and replace every `*` of inner by z. The result is a valid
 *   segment as long as inner (so within 64 bytes), inner matches it, and
 *   outer cannot: z can only be consumed by a `*` of outer, which is
 *   exactly the opaque-symbol match that failed.
 * So the segment length limit never changes the verdict, and neither does
 * the alphabet as long as it has a character outer does not use. */
int nsglob_covers(const char *outer, const char *inner) {
    return nsglob_valid_pattern(outer, strlen(outer)) &&
           nsglob_valid_pattern(inner, strlen(inner)) && segments_match(outer, inner, 1);
}

int nsglob_is_literal(const char *pattern) { return strchr(pattern, '*') == NULL; }

int nsglob_to_like(const char *s, size_t len, char *out, size_t outlen) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        size_t need = (c == '%' || c == '_' || c == '\\') ? 2 : 1;
        if (outlen - o < need + 1) return -1; /* o < outlen always holds here */
        if (c == '*') {
            out[o++] = '%';
        } else {
            if (need == 2) out[o++] = '\\';
            out[o++] = c;
        }
    }
    if (outlen - o < 1 || o > INT_MAX) return -1;
    out[o] = '\0';
    return (int)o;
}
