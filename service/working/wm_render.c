/* wm_render: see wm_render.h. Paths are ASCII (wm_path), so in the TREE a
 * byte is a character; only contents and the cut marker's ellipsis are
 * counted as UTF-8. */
#include "service/working/wm_render.h"

#include <stdio.h>
#include <string.h>

#define INDENT 2
#define ELLIPSIS "\xe2\x80\xa6" /* U+2026, one character of three bytes */

static int ends_line(const char *s, size_t len) { return len > 0 && s[len - 1] == '\n'; }

int64_t wm_render_full_chars(const wm_doc *docs, size_t n) {
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *c = docs[i].content;
        if (!c) return INT64_MAX;
        total += WM_RENDER_FULL_OVERHEAD(strlen(docs[i].path)) + docs[i].chars +
                 !ends_line(c, strlen(c));
    }
    return n ? total - 1 : 0;
}

static int render_full(arena *a, const wm_doc *docs, size_t n, int64_t chars, wm_rendered *out) {
    size_t bytes = 1;
    for (size_t i = 0; i < n; i++) bytes += strlen(docs[i].path) + strlen(docs[i].content) + 6;
    char *t = arena_alloc(a, bytes), *w = t;
    if (!t) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t pl = strlen(docs[i].path), cl = strlen(docs[i].content);
        if (i) *w++ = '\n';
        memcpy(w, "## ", 3);
        memcpy(w + 3, docs[i].path, pl);
        w += 3 + pl;
        *w++ = '\n';
        memcpy(w, docs[i].content, cl);
        w += cl;
        if (!ends_line(docs[i].content, cl)) *w++ = '\n';
    }
    *w = '\0';
    out->text = t;
    out->len = (size_t)(w - t);
    out->chars = chars;
    return 0;
}

/* ---- the tree ---- */

/* The segment of path starting at *p (past its `/`): its length; *p moves
 * to the next `/` or the end. */
static size_t next_segment(const char **p) {
    const char *s = *p;
    if (*s == '/') s++;
    const char *e = s;
    while (*e && *e != '/') e++;
    *p = e;
    return (size_t)(e - s);
}

/* Walks the tree's lines in order, calling line(arg, depth, seg, len,
 * is_dir, leaves_before) for each; a line's text is INDENT*depth spaces,
 * the segment, `/` for a directory, "\n". leaves_before: documents whose
 * line came before this one. Stops when line returns nonzero. */
typedef int (*line_fn)(void *arg, int depth, const char *seg, size_t len, int is_dir,
                       size_t leaves_before);
static void walk_tree(const wm_doc *docs, size_t n, line_fn line, void *arg) {
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *path = docs[i].path;
        /* Directories shared with the previous path (its segments but its
         * last) are printed already. */
        int shared = 0;
        if (prev) {
            const char *a = prev, *b = path;
            for (;;) {
                const char *as = a, *bs = b;
                size_t al = next_segment(&a), bl = next_segment(&b);
                if (!*a || !*b) break; /* a last segment: a leaf, not a directory */
                if (al != bl || memcmp(as + 1, bs + 1, al) != 0) break;
                shared++;
            }
        }
        const char *p = path;
        int depth = 0;
        for (;;) {
            const char *s = p;
            size_t len = next_segment(&p);
            int is_dir = *p != '\0';
            if (depth >= shared || !is_dir)
                if (line(arg, depth, s + 1, len, is_dir, i)) return;
            if (!is_dir) break;
            depth++;
        }
        prev = path;
    }
}

static size_t line_bytes(int depth, size_t len, int is_dir) {
    return (size_t)depth * INDENT + len + (is_dir ? 1 : 0) + 1;
}

typedef struct {
    int64_t budget; /* < 0: no cut */
    size_t n;       /* documents */
    size_t used;    /* bytes (= characters) so far */
    char *w;        /* NULL: measuring only */
    size_t leaves;  /* documents whose line went in */
    int cut;
} tree_state;

/* The marker's characters for `omitted` documents left out. */
static size_t marker_chars(size_t omitted) {
    char buf[48];
    int n = snprintf(buf, sizeof buf, "%s %zu more\n", ELLIPSIS, omitted);
    return (size_t)n - 2; /* the ellipsis is three bytes, one character */
}

static int tree_line(void *arg, int depth, const char *seg, size_t len, int is_dir,
                     size_t leaves_before) {
    tree_state *t = arg;
    size_t bytes = line_bytes(depth, len, is_dir);
    size_t leaves = leaves_before + (is_dir ? 0 : 1);
    if (t->budget >= 0 && (int64_t)(t->used + bytes + marker_chars(t->n - leaves)) > t->budget) {
        t->cut = 1;
        return 1;
    }
    if (t->w) {
        memset(t->w, ' ', (size_t)depth * INDENT);
        char *w = t->w + (size_t)depth * INDENT;
        memcpy(w, seg, len);
        w += len;
        if (is_dir) *w++ = '/';
        *w++ = '\n';
        t->w = w;
    }
    t->used += bytes;
    t->leaves = leaves;
    return 0;
}

static int render_tree(arena *a, const wm_doc *docs, size_t n, int64_t max_chars,
                       wm_rendered *out) {
    tree_state t = {.budget = -1, .n = n};
    walk_tree(docs, n, tree_line, &t);
    size_t total = t.used;
    int cut = (int64_t)total > max_chars;
    /* Cut, the text is at most max_chars ASCII characters and the marker's
     * ellipsis (two bytes more than its one character). */
    char *text = arena_alloc(a, (cut ? (size_t)max_chars + 2 : total) + 1);
    if (!text) return -1;
    t = (tree_state){.budget = cut ? max_chars : -1, .n = n, .w = text};
    walk_tree(docs, n, tree_line, &t);
    out->omitted = (int64_t)(n - t.leaves);
    out->truncated = cut;
    out->chars = (int64_t)t.used;
    if (cut && (int64_t)(t.used + marker_chars(n - t.leaves)) <= max_chars) {
        int m = sprintf(t.w, "%s %zu more\n", ELLIPSIS, n - t.leaves);
        t.w += m;
        out->chars += m - 2;
    }
    *t.w = '\0';
    out->text = text;
    out->len = (size_t)(t.w - text);
    return 0;
}

int wm_render(arena *a, const wm_doc *docs, size_t n, int want_tree, int64_t max_chars,
              wm_rendered *out) {
    memset(out, 0, sizeof *out);
    if (!want_tree) {
        int64_t full = wm_render_full_chars(docs, n);
        if (full <= max_chars) return render_full(a, docs, n, full, out);
        out->tree_fallback = 1;
    }
    out->tree = 1;
    return render_tree(a, docs, n, max_chars, out);
}
