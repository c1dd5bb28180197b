/* entries_pii: the PII policy over an entry write; see entries_pii.h. */
#include "service/entries/entries_pii.h"

#include <stdio.h>
#include <string.h>

#include "service/privacy/pii.h"
#include "service/privacy/pii_struct.h"
#include "service/pb/pbjson.h"

int entries_pii_apply(arena *a, const entries_pii_input *in, entries_pii_mode mode,
                      entries_pii_result *out, char *why, size_t whylen) {
    memset(out, 0, sizeof *out);
    out->value = in->value;
    out->value_len = in->value_len;
    out->tags = in->tags;
    out->metadata = in->metadata;

    pii_findings f;
    pii_findings_init(&f);
    if (in->key) {
        pii_scan_field(&f, "key", in->key, strlen(in->key));
        if (f.kinds && mode == ENTRIES_PII_MODE_REDACT) {
            char found[256];
            pii_findings_format(&f, found, sizeof found);
            snprintf(why, whylen, "PII found (%s); a key cannot be redacted, nothing was written",
                     found);
            return ENTRIES_PII_EFOUND;
        }
    }
    size_t before_value = f.total;
    pii_scan_field(&f, "value", (const char *)in->value, in->value_len);
    int value_hit = f.total > before_value;
    size_t before_tags = f.total;
    for (size_t i = 0; i < in->ntags; i++) {
        char path[32];
        snprintf(path, sizeof path, "tags[%zu]", i);
        pii_scan_field(&f, path, in->tags[i], strlen(in->tags[i]));
    }
    int tags_hit = f.total > before_tags;
    size_t before_meta = f.total;
    if (in->metadata && pii_scan_struct(&f, "metadata", in->metadata) != 0) {
        snprintf(why, whylen, "metadata: nests deeper than %d levels", PII_MAX_DEPTH);
        return ENTRIES_PII_EFOUND;
    }
    int meta_hit = f.total > before_meta;
    if (!f.kinds) return 0;

    if (mode == ENTRIES_PII_MODE_ALLOW) {
        const char *names[PII_KIND_COUNT];
        size_t n = pii_kind_names(f.kinds, names, PII_KIND_COUNT);
        const char **kinds = arena_alloc(a, (n ? n : 1) * sizeof *kinds);
        if (!kinds) return ENTRIES_PII_ENOMEM;
        memcpy(kinds, names, n * sizeof *kinds);
        out->kinds = kinds;
        out->nkinds = n;
        return 0;
    }
    if (mode == ENTRIES_PII_MODE_REJECT) {
        char found[400];
        pii_findings_format(&f, found, sizeof found);
        snprintf(why, whylen, "PII found (%s); nothing was written", found);
        return ENTRIES_PII_EFOUND;
    }

    /* Redact: copies in the arena, inputs untouched. */
    if (value_hit) {
        size_t n = 0;
        const char *v = pii_redact_arena(a, (const char *)in->value, in->value_len, &n);
        if (!v) return ENTRIES_PII_ENOMEM;
        out->value = (const uint8_t *)v;
        out->value_len = n;
    }
    if (tags_hit) {
        const char **tags = arena_alloc(a, in->ntags * sizeof *tags);
        if (!tags) return ENTRIES_PII_ENOMEM;
        for (size_t i = 0; i < in->ntags; i++) {
            size_t n = 0;
            if (!(tags[i] = pii_redact_arena(a, in->tags[i], strlen(in->tags[i]), &n)))
                return ENTRIES_PII_ENOMEM;
        }
        out->tags = tags;
    }
    if (meta_hit) {
        Google__Protobuf__Struct *m = pbjson_struct_copy(a, in->metadata);
        if (!m || pii_redact_struct(a, m) != 0) return ENTRIES_PII_ENOMEM;
        out->metadata = m;
    }
    return 0;
}
