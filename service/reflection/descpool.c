/* descpool: FileDescriptorSet index. The set's top level is walked by hand
 * (field 1, length-delimited) so each file's bytes can be served exactly as
 * protoc wrote them; each file is then decoded with protobuf-c to collect
 * its symbols into a sorted array searched with bsearch. */
#include "service/reflection/descpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/protobuf/descriptor.pb-c.h"
#include "service/core/array.h"
#include "service/rpc/pb_check.h"

typedef struct {
    char *name;
    const uint8_t *data;
    size_t len;
    int *deps; /* file indexes */
    size_t ndeps;
} dp_file;

typedef struct {
    char *name; /* fully qualified, no leading dot */
    int file;
    int is_message;
} dp_symbol;

struct descpool {
    dp_file *files;
    size_t nfiles;
    dp_symbol *symbols;
    size_t nsymbols, cap_symbols;
    char **services;
    size_t nservices;
};

static int add_symbol(descpool *p, const char *prefix, const char *name, int file, int is_msg) {
    dp_symbol *s = array_grow(p->symbols, &p->cap_symbols, p->nsymbols + 1, sizeof *s, 256);
    if (!s) return -1;
    p->symbols = s;
    size_t n = strlen(prefix) + strlen(name) + 2;
    char *full = malloc(n);
    if (!full) return -1;
    if (*prefix) snprintf(full, n, "%s.%s", prefix, name);
    else snprintf(full, n, "%s", name);
    p->symbols[p->nsymbols++] = (dp_symbol){full, file, is_msg};
    return 0;
}

static int add_enum(descpool *p, const char *scope, const Google__Protobuf__EnumDescriptorProto *e,
                    int file) {
    if (!e->name || add_symbol(p, scope, e->name, file, 0) != 0) return -1;
    /* Enum values live in the enum's enclosing scope (C++ rules). */
    for (size_t i = 0; i < e->n_value; i++)
        if (e->value[i]->name && add_symbol(p, scope, e->value[i]->name, file, 0) != 0) return -1;
    return 0;
}

static int add_message(descpool *p, const char *scope, const Google__Protobuf__DescriptorProto *m,
                       int file) {
    if (!m->name || add_symbol(p, scope, m->name, file, 1) != 0) return -1;
    const char *full = p->symbols[p->nsymbols - 1].name;
    for (size_t i = 0; i < m->n_field; i++)
        if (m->field[i]->name && add_symbol(p, full, m->field[i]->name, file, 0) != 0) return -1;
    for (size_t i = 0; i < m->n_oneof_decl; i++)
        if (m->oneof_decl[i]->name && add_symbol(p, full, m->oneof_decl[i]->name, file, 0) != 0)
            return -1;
    for (size_t i = 0; i < m->n_enum_type; i++)
        if (add_enum(p, full, m->enum_type[i], file) != 0) return -1;
    for (size_t i = 0; i < m->n_nested_type; i++)
        if (add_message(p, full, m->nested_type[i], file) != 0) return -1;
    return 0;
}

static int add_service(descpool *p, const char *pkg,
                       const Google__Protobuf__ServiceDescriptorProto *s, int file) {
    if (!s->name || add_symbol(p, pkg, s->name, file, 0) != 0) return -1;
    const char *full = p->symbols[p->nsymbols - 1].name;
    char **sv = realloc(p->services, (p->nservices + 1) * sizeof *sv);
    if (!sv) return -1;
    p->services = sv;
    if (!(sv[p->nservices] = strdup(full))) return -1;
    p->nservices++;
    for (size_t i = 0; i < s->n_method; i++)
        if (s->method[i]->name && add_symbol(p, full, s->method[i]->name, file, 0) != 0) return -1;
    return 0;
}

static int index_file(descpool *p, int idx, const Google__Protobuf__FileDescriptorProto *f) {
    const char *pkg = f->package ? f->package : "";
    if (*pkg && add_symbol(p, "", pkg, idx, 0) != 0) return -1;
    for (size_t i = 0; i < f->n_message_type; i++)
        if (add_message(p, pkg, f->message_type[i], idx) != 0) return -1;
    for (size_t i = 0; i < f->n_enum_type; i++)
        if (add_enum(p, pkg, f->enum_type[i], idx) != 0) return -1;
    for (size_t i = 0; i < f->n_service; i++)
        if (add_service(p, pkg, f->service[i], idx) != 0) return -1;
    return 0;
}

static int cmp_symbol(const void *a, const void *b) {
    return strcmp(((const dp_symbol *)a)->name, ((const dp_symbol *)b)->name);
}

/* Splits the set into files: each top-level field must be #1, wire type 2. */
static int split_files(descpool *p, const uint8_t *data, size_t len) {
    size_t off = 0;
    while (off < len) {
        uint64_t key, flen;
        size_t n = pb_read_varint(data + off, len - off, &key);
        if (!n || key != ((1 << 3) | 2)) return -1;
        off += n;
        n = pb_read_varint(data + off, len - off, &flen);
        if (!n || flen > len - off - n) return -1;
        off += n;
        dp_file *files = realloc(p->files, (p->nfiles + 1) * sizeof *files);
        if (!files) return -1;
        p->files = files;
        p->files[p->nfiles++] = (dp_file){NULL, data + off, (size_t)flen, NULL, 0};
        off += (size_t)flen;
    }
    return 0;
}

static int decode_files(descpool *p) {
    Google__Protobuf__FileDescriptorProto **decoded = calloc(p->nfiles + 1, sizeof *decoded);
    if (!decoded) return -1;
    int rc = 0;
    for (size_t i = 0; i < p->nfiles && rc == 0; i++) {
        decoded[i] = google__protobuf__file_descriptor_proto__unpack(NULL, p->files[i].len,
                                                                     p->files[i].data);
        if (!decoded[i] || !decoded[i]->name || !(p->files[i].name = strdup(decoded[i]->name)))
            rc = -1;
        else rc = index_file(p, (int)i, decoded[i]);
    }
    /* Dependencies by name, once every file is known. */
    for (size_t i = 0; i < p->nfiles && rc == 0; i++) {
        p->files[i].deps = calloc(decoded[i]->n_dependency + 1, sizeof(int));
        if (!p->files[i].deps) rc = -1;
        for (size_t d = 0; rc == 0 && d < decoded[i]->n_dependency; d++) {
            int j = descpool_find_file(p, decoded[i]->dependency[d]);
            if (j >= 0) p->files[i].deps[p->files[i].ndeps++] = j;
        }
    }
    for (size_t i = 0; i < p->nfiles; i++)
        if (decoded[i]) google__protobuf__file_descriptor_proto__free_unpacked(decoded[i], NULL);
    free(decoded);
    return rc;
}

int descpool_create(const uint8_t *data, size_t len, descpool **out) {
    descpool *p = calloc(1, sizeof *p);
    if (!p) return -1;
    if (split_files(p, data, len) != 0 || decode_files(p) != 0) {
        descpool_free(p);
        return -1;
    }
    if (p->nsymbols) /* qsort/bsearch must not see a NULL array */
        qsort(p->symbols, p->nsymbols, sizeof *p->symbols, cmp_symbol);
    *out = p;
    return 0;
}

void descpool_free(descpool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nfiles; i++) {
        free(p->files[i].name);
        free(p->files[i].deps);
    }
    for (size_t i = 0; i < p->nsymbols; i++) free(p->symbols[i].name);
    for (size_t i = 0; i < p->nservices; i++) free(p->services[i]);
    free(p->files);
    free(p->symbols);
    free(p->services);
    free(p);
}

int descpool_find_file(const descpool *p, const char *name) {
    for (size_t i = 0; i < p->nfiles; i++)
        if (p->files[i].name && strcmp(p->files[i].name, name) == 0) return (int)i;
    return -1;
}

static const dp_symbol *find_symbol(const descpool *p, const char *symbol) {
    if (symbol[0] == '.') symbol++;
    if (!p->nsymbols) return NULL;
    dp_symbol key = {(char *)symbol, 0, 0};
    return bsearch(&key, p->symbols, p->nsymbols, sizeof key, cmp_symbol);
}

int descpool_find_symbol(const descpool *p, const char *symbol) {
    const dp_symbol *s = find_symbol(p, symbol);
    return s ? s->file : -1;
}

int descpool_is_message(const descpool *p, const char *symbol) {
    const dp_symbol *s = find_symbol(p, symbol);
    return s && s->is_message;
}

size_t descpool_file_count(const descpool *p) { return p->nfiles; }
const char *descpool_file_name(const descpool *p, int file) { return p->files[file].name; }

void descpool_file_bytes(const descpool *p, int file, const uint8_t **data, size_t *len) {
    *data = p->files[file].data;
    *len = p->files[file].len;
}

size_t descpool_file_closure(const descpool *p, int file, int *out) {
    size_t n = 0;
    out[n++] = file;
    /* Breadth-first over the output array itself; linear membership check
     * is fine for a few dozen files. */
    for (size_t i = 0; i < n; i++) {
        const dp_file *f = &p->files[out[i]];
        for (size_t d = 0; d < f->ndeps; d++) {
            int dep = f->deps[d], seen = 0;
            for (size_t k = 0; k < n && !seen; k++) seen = out[k] == dep;
            if (!seen) out[n++] = dep;
        }
    }
    return n;
}

size_t descpool_service_count(const descpool *p) { return p->nservices; }
const char *descpool_service_name(const descpool *p, size_t i) { return p->services[i]; }

int descpool_has_method_path(const descpool *p, const char *path) {
    if (path[0] != '/') return 0;
    const char *slash = strchr(path + 1, '/');
    if (!slash || !slash[1]) return 0;
    char symbol[512];
    size_t svc = (size_t)(slash - path - 1);
    if (svc + strlen(slash) + 1 > sizeof symbol) return 0;
    memcpy(symbol, path + 1, svc);
    symbol[svc] = '.';
    strcpy(symbol + svc + 1, slash + 1);
    /* The service must be one, and the method one of its symbols. */
    symbol[svc] = '\0';
    int is_service = 0;
    for (size_t i = 0; i < p->nservices && !is_service; i++)
        is_service = strcmp(p->services[i], symbol) == 0;
    symbol[svc] = '.';
    return is_service && find_symbol(p, symbol) != NULL;
}
