/* nsglob_fuzz: namespace and key patterns from requests and token claims.
 * The input is split at its first two NULs into an outer pattern, an inner
 * pattern and a subject (a namespace or a key). Checks what principal
 * checks, Access.Attenuate and the Entries SQL rely on:
 * - only a valid pattern matches, and only a valid namespace (key) is
 *   matched; a valid namespace matches itself as a pattern;
 * - a valid pattern covers itself and is covered by `*:*:*`;
 * - covers is exact: when outer covers inner, inner with its `*`s replaced
 *   by pieces of the subject is matched by outer whenever it is a valid
 *   namespace, and so is the subject if inner matches it; when it does
 *   not, inner with every `*` replaced by a character outer does not use
 *   is a namespace inner matches and outer does not;
 * - the LIKE translation stays within 2 * len + 1 bytes, refuses one byte
 *   less than it needs, and (checked by a LIKE emulator) selects exactly
 *   what nsglob_match / nsglob_key_match select. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/nsglob.h"
#include "tests/fuzz/fuzz_target.h"

/* `s LIKE p ESCAPE '\'`, byte-wise (PostgreSQL compares characters; the
 * same thing for valid UTF-8 when `_` is escaped, as nsglob_to_like does).
 * Dynamic programming over s: O(|p| * |s|), so long inputs cannot blow up
 * the way a backtracking emulator would. */
static int like(const char *p, const char *s) {
  size_t sn = strlen(s);
  unsigned char *at = calloc(sn + 1, 1), *next = calloc(sn + 1, 1);
  int r = 0;
  if (!at || !next) goto out;
  at[0] = 1;
  for (; *p; p++) {
    memset(next, 0, sn + 1);
    if (*p == '%') {
      unsigned char any = 0;
      for (size_t j = 0; j <= sn; j++) next[j] = any = any | at[j];
    } else {
      int wild = *p == '_';
      if (*p == '\\' && !*++p) goto out; /* PostgreSQL: an error */
      for (size_t j = 0; j < sn; j++)
        if (at[j] && (wild || s[j] == *p)) next[j + 1] = 1;
    }
    unsigned char *t = at;
    at = next;
    next = t;
  }
  r = at[sn];
out:
  free(at);
  free(next);
  return r;
}

/* nsglob_to_like(p) into a fresh buffer of exactly 2 * len + 1 bytes, with
 * the bound and the too-small refusal checked on the way. */
static char *to_like(const char *p) {
  size_t len = strlen(p);
  char *out = malloc(2 * len + 1);
  FUZZ_CHECK(out != NULL);
  int n = nsglob_to_like(p, len, out, 2 * len + 1);
  FUZZ_CHECK(n >= (int)len && n <= (int)(2 * len) && out[n] == '\0');
  FUZZ_CHECK(strlen(out) == (size_t)n); /* no NUL in p, none in out */
  FUZZ_CHECK(nsglob_to_like(p, len, out, (size_t)n) == -1);
  FUZZ_CHECK(nsglob_to_like(p, len, out, (size_t)n + 1) == n);
  return out;
}

/* A namespace character that p does not contain, or 0. One always exists
 * for a valid segment: 65 characters, at most 64 in a segment. */
static char unused_char(const char *p) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";
  for (const char *c = alphabet; *c; c++)
    if (!strchr(p, *c)) return *c;
  return 0;
}

/* inner with each `*` replaced by the next ','-separated piece of fill
 * (the empty string once fill runs out). */
static char *substitute(const char *inner, const char *fill) {
  char *w = malloc(strlen(inner) + strlen(fill) + 1), *o = w;
  FUZZ_CHECK(w != NULL);
  for (const char *c = inner; *c; c++) {
    if (*c != '*') {
      *o++ = *c;
    } else {
      while (*fill && *fill != ',') *o++ = *fill++;
      if (*fill == ',') fill++;
    }
  }
  *o = '\0';
  return w;
}

/* For valid outer and inner: the namespace w made of inner with each `*`
 * replaced by a character that outer's segment does not use is matched by
 * inner, and by outer exactly when outer covers inner (nsglob.c argues why
 * this w is a counterexample whenever one exists). */
static void covers_exactly(const char *outer, const char *inner) {
  int c = nsglob_covers(outer, inner);
  char w[NSGLOB_NAMESPACE_MAX + 1], *o = w;
  const char *os = outer, *is = inner;
  for (int seg = 0; seg < 3; seg++) {
    const char *oe = strchr(os, ':'), *ie = strchr(is, ':');
    size_t on = oe ? (size_t)(oe - os) : strlen(os);
    size_t inn = ie ? (size_t)(ie - is) : strlen(is);
    char oseg[NSGLOB_SEGMENT_MAX + 1];
    memcpy(oseg, os, on);
    oseg[on] = '\0';
    char z = unused_char(oseg);
    FUZZ_CHECK(z != 0); /* a valid segment leaves one of 65 unused */
    for (size_t k = 0; k < inn; k++) *o++ = is[k] == '*' ? z : is[k];
    if (seg < 2) *o++ = ':';
    os += on + 1;
    is += inn + 1;
  }
  *o = '\0';
  FUZZ_CHECK(nsglob_valid_namespace(w, strlen(w)));
  FUZZ_CHECK(nsglob_match(inner, w));
  FUZZ_CHECK(nsglob_match(outer, w) == c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 3);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = buf[size + 1] = buf[size + 2] = '\0';
  const char *outer = buf;
  const char *inner = outer + strlen(outer) + 1;
  if (inner > buf + size) inner = buf + size + 1;
  const char *subj = inner + strlen(inner) + 1;
  if (subj > buf + size + 1) subj = buf + size + 2;

  char why[128];
  int outer_ok = nsglob_check_pattern(outer, strlen(outer), why, sizeof why) == 0;
  if (!outer_ok) FUZZ_CHECK(why[0] != '\0');
  FUZZ_CHECK(outer_ok == nsglob_valid_pattern(outer, strlen(outer)));
  int inner_ok = nsglob_valid_pattern(inner, strlen(inner));
  int subj_ns = nsglob_check_namespace(subj, strlen(subj), why, sizeof why) == 0;
  FUZZ_CHECK(subj_ns == nsglob_valid_namespace(subj, strlen(subj)));

  /* Matching. */
  int m = nsglob_match(outer, subj);
  if (m) FUZZ_CHECK(outer_ok && subj_ns);
  if (subj_ns) {
    FUZZ_CHECK(nsglob_match(subj, subj));
    FUZZ_CHECK(nsglob_match("*:*:*", subj));
    FUZZ_CHECK(nsglob_is_literal(subj));
  }
  if (outer_ok && nsglob_is_literal(outer)) FUZZ_CHECK(m == (strcmp(outer, subj) == 0));

  /* Containment. */
  if (outer_ok) {
    FUZZ_CHECK(nsglob_covers(outer, outer));
    FUZZ_CHECK(nsglob_covers("*:*:*", outer));
  }
  int c = nsglob_covers(outer, inner);
  if (c) FUZZ_CHECK(outer_ok && inner_ok);
  if (outer_ok && inner_ok) {
    covers_exactly(outer, inner);
    if (c) {
      if (nsglob_match(inner, subj)) FUZZ_CHECK(nsglob_match(outer, subj));
      char *w = substitute(inner, subj);
      if (nsglob_valid_namespace(w, strlen(w))) {
        FUZZ_CHECK(nsglob_match(inner, w));
        FUZZ_CHECK(nsglob_match(outer, w));
      }
      free(w);
    }
    /* Covering each other means matching the same namespaces. */
    if (c && nsglob_covers(inner, outer))
      FUZZ_CHECK(nsglob_match(outer, subj) == nsglob_match(inner, subj));
  }

  /* LIKE, for the namespace reading and the key reading of outer. */
  char *lk = to_like(outer);
  if (outer_ok && subj_ns) FUZZ_CHECK(like(lk, subj) == m);
  int km = nsglob_key_match(outer, subj);
  int kp_ok = nsglob_valid_key_pattern(outer, strlen(outer));
  int k_ok = nsglob_check_key(subj, strlen(subj), why, sizeof why) == 0;
  FUZZ_CHECK(k_ok == nsglob_valid_key(subj, strlen(subj)));
  if (km) FUZZ_CHECK(kp_ok && k_ok);
  if (kp_ok && k_ok) FUZZ_CHECK(like(lk, subj) == km);
  free(lk);

  free(buf);
  return 0;
}
