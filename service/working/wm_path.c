/* wm_path: see wm_path.h. */
#include "service/working/wm_path.h"

#include <string.h>

#include "service/core/text.h"

static int segment_char(unsigned char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == ' ' || ch == '-';
}

/* 0 when seg[0..len), the k-th segment (from 1), is a good one; else -1
 * with the reason in err. */
static int check_segment(const char *seg, size_t len, int k, char *err, size_t errlen) {
    if (len == 2 && seg[0] == '.' && seg[1] == '.') {
        text_errf(err, errlen, "segment %d is \"..\": parent references are not allowed", k);
        return -1;
    }
    if (len == 1 && seg[0] == '.') {
        text_errf(err, errlen, "segment %d is \".\": paths are absolute, without \".\"", k);
        return -1;
    }
    if (len > WM_SEGMENT_MAX) {
        text_errf(err, errlen, "segment %d is %zu characters; at most %d", k, len, WM_SEGMENT_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)seg[i];
        if (ch == '$') {
            text_errf(err, errlen, "segment %d holds \"$\", which is not allowed", k);
            return -1;
        }
        if (!segment_char(ch)) {
            if (ch > 0x20 && ch < 0x7f)
                text_errf(err, errlen,
                          "segment %d holds \"%c\"; segments are made of [A-Za-z0-9_ -]", k, ch);
            else
                text_errf(err, errlen,
                          "segment %d holds byte 0x%02x; segments are made of [A-Za-z0-9_ -]", k,
                          ch);
            return -1;
        }
    }
    if (seg[0] == ' ' || seg[len - 1] == ' ') {
        text_errf(err, errlen, "segment %d %s with a space", k, seg[0] == ' ' ? "begins" : "ends");
        return -1;
    }
    return 0;
}

int wm_path_normalize(const char *in, size_t n, unsigned flags, char *out, char *err,
                      size_t errlen) {
    if (n > WM_PATH_INPUT_MAX) {
        text_errf(err, errlen, "%zu bytes; at most %d", n, WM_PATH_INPUT_MAX);
        return -1;
    }
    size_t o = 0, i = 0;
    int k = 0;
    while (i < n) {
        while (i < n && in[i] == '/') i++;
        if (i == n) break;
        size_t start = i;
        while (i < n && in[i] != '/') i++;
        size_t len = i - start;
        if (++k > WM_SEGMENTS_MAX) {
            text_errf(err, errlen, "more than %d segments", WM_SEGMENTS_MAX);
            return -1;
        }
        if (check_segment(in + start, len, k, err, errlen) != 0) return -1;
        if (o + 1 + len > WM_PATH_MAX) {
            text_errf(err, errlen, "longer than %d characters once normalized", WM_PATH_MAX);
            return -1;
        }
        out[o++] = '/';
        memcpy(out + o, in + start, len);
        o += len;
    }
    if (k == 0) {
        if (!(flags & WM_PATH_ROOT_OK)) {
            text_errf(err, errlen, "a document's path needs a segment after \"/\"");
            return -1;
        }
        out[o++] = '/';
    }
    out[o] = '\0';
    return 0;
}

int wm_path_under(const char *path, const char *dir) {
    if (strcmp(dir, "/") == 0) return 1;
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}
