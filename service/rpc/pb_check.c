/* pb_check: iterative over fields, recursive over nested messages with the
 * depth bounded before each call, so the scan itself cannot run deep. */
#include "service/rpc/pb_check.h"

#include <string.h>

size_t pb_read_varint(const uint8_t *p, size_t len, uint64_t *out) {
    uint64_t v = 0;
    for (size_t i = 0; i < len && i < 10; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

static int scan(const ProtobufCMessageDescriptor *desc, const uint8_t *p, size_t len, int depth,
                int max_depth, const char **why) {
    size_t off = 0;
    while (off < len) {
        uint64_t key, v;
        size_t n = pb_read_varint(p + off, len - off, &key);
        if (!n) return *why = "malformed field tag", -1;
        off += n;
        uint64_t field = key >> 3;
        if (field == 0 || field > 536870911u) return *why = "invalid field number", -1;
        switch (key & 7) {
        case 0: /* varint */
            if (!(n = pb_read_varint(p + off, len - off, &v))) return *why = "malformed varint", -1;
            off += n;
            break;
        case 1: /* 64-bit */
            if (len - off < 8) return *why = "truncated fixed64", -1;
            off += 8;
            break;
        case 5: /* 32-bit */
            if (len - off < 4) return *why = "truncated fixed32", -1;
            off += 4;
            break;
        case 2: { /* length-delimited: maybe a nested message */
            if (!(n = pb_read_varint(p + off, len - off, &v)) || v > len - off - n)
                return *why = "length runs past the end", -1;
            off += n;
            const ProtobufCFieldDescriptor *fd =
                desc ? protobuf_c_message_descriptor_get_field(desc, (unsigned)field) : NULL;
            /* protobuf-c hands strings to handlers NUL-terminated, so
             * "a\0b" would arrive as "a": two different keys on the wire,
             * one in the handler. Refuse instead of aliasing. */
            if (fd && fd->type == PROTOBUF_C_TYPE_STRING && memchr(p + off, 0, (size_t)v))
                return *why = "a string field holds a NUL byte (use a bytes field for binary "
                              "data)",
                       -1;
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 > max_depth) return *why = "messages nest too deep", -1;
                if (scan(fd->descriptor, p + off, (size_t)v, depth + 1, max_depth, why) != 0)
                    return -1;
            }
            off += (size_t)v;
            break;
        }
        default: /* groups (3, 4) do not exist in proto3; 6 and 7 never did */
            return *why = "unsupported wire type", -1;
        }
    }
    return 0;
}

int pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int max_depth,
             const char **why) {
    *why = "";
    return scan(desc, data, len, 0, max_depth, why);
}
