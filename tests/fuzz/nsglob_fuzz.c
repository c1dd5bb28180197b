/* nsglob_fuzz: namespace patterns from requests and token claims. Splits
 * the input at the first two NULs into outer pattern, inner pattern and a
 * namespace, and checks what Attenuate and the Entries SQL rely on:
 * containment is sound (covers(o, i) and i matches ns imply o matches ns),
 * a valid pattern covers itself, a namespace that passes validation
 * matches itself, and the LIKE translation fits its documented bound. */
#include <stdlib.h>
#include <string.h>

#include "service/auth/nsglob.h"
#include "tests/fuzz/fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 3);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = buf[size + 2] = '\0';
    const char *outer = buf;
    const char *inner = outer + strlen(outer) + 1;
    if (inner > buf + size) inner = buf + size + 1;
    const char *ns = inner + strlen(inner) + 1;
    if (ns > buf + size + 1) ns = buf + size + 2;
    char why[128];
    int outer_ok = nsglob_check_pattern(outer, strlen(outer), why, sizeof why) == 0;
    if (nsglob_covers(outer, inner) && nsglob_match(inner, ns)) FUZZ_CHECK(nsglob_match(outer, ns));
    if (outer_ok) FUZZ_CHECK(nsglob_covers(outer, outer));
    if (nsglob_check_namespace(ns, strlen(ns), why, sizeof why) == 0)
        FUZZ_CHECK(nsglob_match(ns, ns));
    size_t len = strlen(outer);
    char *like = malloc(2 * len + 1);
    if (like) {
        int n = nsglob_to_like(outer, len, like, 2 * len + 1);
        FUZZ_CHECK(n >= (int)len && like[n] == '\0');
        free(like);
    }
    nsglob_check_key(inner, strlen(inner), why, sizeof why);
    free(buf);
    return 0;
}
