/* wm_render: a working memory as prompt text (WorkingMemory.Render): FULL
 * (each document's path and content) or TREE (the paths as an indented
 * tree), within a budget of characters (Unicode code points), FULL falling
 * back to TREE when it does not fit and TREE cut at a line. Pure: the
 * store hands it the documents, in path order; no I/O, so its budget
 * arithmetic is unit-tested and fuzzed. */
#ifndef MEMORYD_WORKING_WM_RENDER_H
#define MEMORYD_WORKING_WM_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"

/* One document as Render sees it. */
typedef struct wm_doc {
    const char *path;    /* normalized (ASCII) */
    const char *content; /* UTF-8; NULL: not fetched, because FULL cannot fit */
    int64_t chars;       /* code points of content (fetched or not) */
} wm_doc;

/* Characters of the FULL text of docs[0..n): per document "## " path "\n"
 * and its content, with "\n" after it unless it ends with one; the
 * documents separated by "\n". INT64_MAX when a content was not fetched. */
int64_t wm_render_full_chars(const wm_doc *docs, size_t n);
/* At least what one document adds to wm_render_full_chars beyond its
 * content, with its separator (one less when its content does not end in
 * "\n"): summed over a memory it is a lower bound of the FULL text plus
 * one, so the store fetches the contents when that sum is within the
 * budget plus one, which it is whenever FULL fits. */
#define WM_RENDER_FULL_OVERHEAD(path_len) ((int64_t)(path_len) + 5)

typedef struct wm_rendered {
    const char *text;  /* NUL-terminated, in the arena */
    size_t len;        /* bytes */
    int64_t chars;     /* code points, <= max_chars */
    int tree;          /* the text is the TREE (asked for, or FULL did not fit) */
    int tree_fallback; /* FULL was asked for and did not fit */
    int truncated;     /* the TREE was cut; its last line is "… N more" */
    int64_t omitted;   /* documents whose leaf the cut left out */
} wm_rendered;

/* Renders docs[0..n) (sorted by path, byte order) into *out in arena a:
 * FULL unless want_tree, FULL falling back to TREE when longer than
 * max_chars (> 0) or a content is missing. 0, or -1 when out of memory. */
int wm_render(arena *a, const wm_doc *docs, size_t n, int want_tree, int64_t max_chars,
              wm_rendered *out);

#endif
