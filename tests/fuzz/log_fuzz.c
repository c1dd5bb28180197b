/* log_fuzz: log_fields/log_msg with fuzz strings as message, keys and
 * values (peer addresses and method names reach the log from outside).
 * The line is written to a memfd and checked against log.h's promises:
 * one line per call, at most LOG_LINE_MAX bytes, no raw control bytes, and
 * -- when the inputs are valid UTF-8, which is all JSON can carry -- a JSON
 * object that parses, even when it had to be truncated. */
#include <jansson.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "service/core/log.h"
#include "tests/fuzz/fuzz_target.h"

#define LINE_MAX_BYTES 4096 /* LOG_LINE_MAX in log.c */
#define N_STRINGS 9         /* msg + 4 keys + 4 values */

static int utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    int n = *p < 0x80             ? 0
            : (*p & 0xe0) == 0xc0 ? 1
            : (*p & 0xf0) == 0xe0 ? 2
            : (*p & 0xf8) == 0xf0 ? 3
                                  : -1;
    if (n < 0 || (n == 1 && *p < 0xc2)) return 0;
    unsigned cp = n ? (*p & (0x3f >> n)) : *p;
    for (int i = 1; i <= n; i++) {
      if ((p[i] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (p[i] & 0x3f);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    p += n + 1;
  }
  return 1;
}

static int64_t as_int(const char *s) {
  int64_t v = 0;
  memcpy(&v, s, strnlen(s, sizeof v));
  return v;
}

static double as_dbl(const char *s) {
  double v = 0;
  memcpy(&v, s, strnlen(s, sizeof v));
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  if (fd < 0) {
    fd = memfd_create("log_fuzz", 0);
    if (fd < 0) abort();
    log_set_fd(fd);
    log_set_level(LOG_DEBUG);
  }
  if (size < 1) return 0;
  unsigned shape = data[0] % 5;
  log_level level = (log_level)((data[0] >> 3) & 3);
  data++;
  size--;

  /* NUL-split into the strings; missing ones are empty. One heap block
   * each, so ASan catches a read past any terminator. */
  char *s[N_STRINGS];
  size_t off = 0;
  for (int i = 0; i < N_STRINGS; i++) {
    const uint8_t *nul = off < size ? memchr(data + off, 0, size - off) : NULL;
    size_t n = off >= size ? 0 : nul ? (size_t)(nul - (data + off)) : size - off;
    if (!(s[i] = malloc(n + 1))) abort();
    if (n) memcpy(s[i], data + off, n);
    s[i][n] = '\0';
    off += n + 1;
  }

  /* Which of s[] each shape writes as strings (the others feed numbers,
   * whose raw bytes need not be text). */
  static const unsigned as_text[5] = {0x1ff, 0x0af, 0x1ab, 0x00f, 0x001};
  int check_json = 1;
  for (int i = 0; i < N_STRINGS; i++)
    if (as_text[shape] & (1u << i)) check_json = check_json && utf8_valid(s[i]);
  double d1 = as_dbl(s[4]), d2 = as_dbl(s[6]);
  switch (shape) {
    case 0:
      log_fields(level, s[0], LOG_F_STR, s[1], s[2], LOG_F_STR, s[3], s[4], LOG_F_STR, s[5], s[6],
                 LOG_F_STR, s[7], s[8], LOG_F_END);
      break;
    case 1:
      log_fields(level, s[0], LOG_F_STR, s[1], s[2], LOG_F_INT, s[3], as_int(s[4]), LOG_F_DBL, s[5],
                 d2, LOG_F_STR, s[7], (const char *)NULL, LOG_F_END);
      break;
    case 2:
      log_fields(level, s[0], LOG_F_DBL, s[1], d1, LOG_F_DBL, s[3], d2, LOG_F_INT, s[5],
                 as_int(s[6]), LOG_F_STR, s[7], s[8], LOG_F_END);
      break;
    case 3: /* an unknown kind: log.c must stop reading the list there */
      log_fields(level, s[0], LOG_F_STR, s[1], s[2], 99, s[3], LOG_F_END);
      break;
    default:
      log_msg(level, "%s", s[0]);
  }

  char line[LINE_MAX_BYTES + 1];
  ssize_t n = pread(fd, line, sizeof line, 0);
  FUZZ_CHECK(n > 0 && n <= LINE_MAX_BYTES);
  FUZZ_CHECK(line[n - 1] == '\n');
  for (ssize_t i = 0; i < n - 1; i++) FUZZ_CHECK((unsigned char)line[i] >= 0x20);
  FUZZ_CHECK(n >= 3 && line[0] == '{' && line[n - 2] == '}');
  if (check_json) {
    json_error_t jerr;
    json_t *j = json_loadb(line, (size_t)n, 0, &jerr);
    if (!j) fprintf(stderr, "log_fuzz: not JSON (%s): %.*s", jerr.text, (int)n, line);
    /* (Not checking "msg" itself: a fuzz key may reuse the name.) */
    FUZZ_CHECK(j != NULL && json_is_object(j));
    json_decref(j);
  }
  if (ftruncate(fd, 0) != 0) abort();
  lseek(fd, 0, SEEK_SET);
  for (int i = 0; i < N_STRINGS; i++) free(s[i]);
  return 0;
}
