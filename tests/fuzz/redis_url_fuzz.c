/* redis_url_fuzz: redis_url_parse on arbitrary strings. The URL comes from
 * a flag or the environment, so it is checked for memory safety and for
 * the promises of its header: a parsed URL has a host, a port in 1-65535,
 * a db in range and NUL-terminated fixed-size fields; a rejected one says
 * why. */
#include <string.h>

#include "service/store/redis_url.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy: a read past the terminator is an ASan report. */
  char *url = malloc(size + 1);
  if (!url) return 0;
  memcpy(url, data, size);
  url[size] = '\0';

  redis_url u;
  char err[256];
  err[0] = '\0';
  if (redis_url_parse(url, &u, err, sizeof err) == 0) {
    FUZZ_CHECK(memchr(u.host, '\0', sizeof u.host) != NULL);
    FUZZ_CHECK(u.host[0] != '\0');
    FUZZ_CHECK(memchr(u.password, '\0', sizeof u.password) != NULL);
    FUZZ_CHECK(u.port >= 1 && u.port <= 65535);
    FUZZ_CHECK(u.db >= 0 && u.db <= (1 << 20));
    /* The host is a piece of the URL, never invented. */
    FUZZ_CHECK(strstr(url, u.host) != NULL);
  } else {
    FUZZ_CHECK(err[0] != '\0');
  }
  free(url);
  return 0;
}
