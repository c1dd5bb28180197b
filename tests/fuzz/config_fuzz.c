/* config_fuzz: config_load on a command line made of fuzz bytes. The bytes
 * are split on NUL into at most 16 arguments after a fixed argv[0]; the
 * environment holds no MEMORYD_* variable so only argv decides. Checks the
 * ownership contract of config.h: on success every string is set, on error
 * *c is already freed and err says why. */
#include <string.h>

#include "service/core/config.h"
#include "tests/fuzz/fuzz_target.h"

#define MAX_ARGS 16

extern char **environ;

/* Test runners export MEMORYD_* (make test sets MEMORYD_TEST_*); any of
 * them that config.c reads would make the outcome depend on the machine. */
static void clear_memoryd_env(void) {
  for (;;) {
    char **e = environ;
    while (*e && strncmp(*e, "MEMORYD_", 8) != 0) e++;
    if (!*e) return;
    const char *eq = strchr(*e, '=');
    char name[256];
    size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
    if (n >= sizeof name) n = sizeof name - 1;
    memcpy(name, *e, n);
    name[n] = '\0';
    unsetenv(name); /* rewrites environ: restart the scan */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) {
    clear_memoryd_env();
    devnull = fopen("/dev/null", "w"); /* --help text goes nowhere */
    if (!devnull) abort();
  }

  /* Each argument is its own heap block so ASan sees overruns of any. */
  static char argv0[] = "memoryd";
  char *argv[MAX_ARGS + 2] = {argv0};
  int argc = 1;
  size_t off = 0;
  while (off < size && argc <= MAX_ARGS) {
    const uint8_t *nul = memchr(data + off, 0, size - off);
    size_t n = nul ? (size_t)(nul - (data + off)) : size - off;
    char *arg = malloc(n + 1);
    if (!arg) break;
    memcpy(arg, data + off, n);
    arg[n] = '\0';
    argv[argc++] = arg;
    off += n + 1;
  }
  argv[argc] = NULL;

  config c;
  char err[512];
  err[0] = '\0';
  int rc = config_load(&c, argc, argv, devnull, err, sizeof err);
  if (rc == 0) {
    FUZZ_CHECK(c.listen && strchr(c.listen, ':'));
    FUZZ_CHECK(c.pg_url && c.pg_url[0] != '\0');
    FUZZ_CHECK(c.redis_url && c.qdrant_url && c.qdrant_api_key && c.log_level);
    FUZZ_CHECK(c.tls_cert && c.tls_key && (c.tls_cert[0] == '\0') == (c.tls_key[0] == '\0'));
    FUZZ_CHECK(c.workers >= 0 && c.workers <= 1024);
    FUZZ_CHECK(c.max_message_bytes >= 1024);
    FUZZ_CHECK(c.reflection == 0 || c.reflection == 1);
  } else if (rc < 0) {
    FUZZ_CHECK(err[0] != '\0');
    FUZZ_CHECK(!c.listen && !c.pg_url && !c.redis_url && !c.log_level && !c.tls_cert);
  } else {
    FUZZ_CHECK(rc == CONFIG_EXIT_OK);
  }
  config_free(&c);
  config_free(&c); /* documented as safe on an already freed config */
  for (int i = 1; i < argc; i++) free(argv[i]);
  return 0;
}
