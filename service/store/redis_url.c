/* redis_url: a strict little parser; anything unexpected is an error that
 * names the part it could not read. */
#include "service/store/redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *s, size_t n, int lo, int hi, int *out) {
    if (n == 0 || n > 9) return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int redis_url_parse(const char *url, redis_url *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->port = 6379;
    static const char scheme[] = "redis://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
        snprintf(err, errlen, "Redis URL must start with redis:// (got \"%s\")", url);
        return -1;
    }
    const char *p = url + sizeof scheme - 1;
    const char *end = p + strcspn(p, "/");
    const char *at = memchr(p, '@', (size_t)(end - p));
    if (at) {
        /* user:password@ or :password@; a bare user@ carries no password. */
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *pw = colon ? colon + 1 : at;
        size_t n = (size_t)(at - pw);
        if (n >= sizeof out->password) return snprintf(err, errlen, "Redis password too long"), -1;
        memcpy(out->password, pw, n);
        p = at + 1;
    }
    const char *colon = memchr(p, ':', (size_t)(end - p));
    const char *host_end = colon ? colon : end;
    size_t hn = (size_t)(host_end - p);
    if (hn == 0 || hn >= sizeof out->host) {
        snprintf(err, errlen, "Redis URL has no usable host (\"%s\")", url);
        return -1;
    }
    memcpy(out->host, p, hn);
    if (colon && parse_int(colon + 1, (size_t)(end - colon - 1), 1, 65535, &out->port) != 0) {
        snprintf(err, errlen, "Redis URL port must be 1-65535 (\"%s\")", url);
        return -1;
    }
    if (*end == '/' && end[1] != '\0' &&
        parse_int(end + 1, strlen(end + 1), 0, 1 << 20, &out->db) != 0) {
        snprintf(err, errlen, "Redis URL database must be a number (\"%s\")", url);
        return -1;
    }
    return 0;
}
