/* wm_path: working-memory paths (working_memory.proto): normalization and
 * the rules a path must meet. Pure functions over bytes, no I/O, so the
 * table of accepted and refused paths is a unit test and the normalizer a
 * fuzz target. */
#ifndef MEMORYD_WORKING_WM_PATH_H
#define MEMORYD_WORKING_WM_PATH_H

#include <stddef.h>

#define WM_PATH_MAX 512        /* bytes (= characters: paths are ASCII) once normalized */
#define WM_PATH_INPUT_MAX 4096 /* bytes of a path as given (slashes not yet collapsed) */
#define WM_SEGMENTS_MAX 16
#define WM_SEGMENT_MAX 64 /* characters of one segment */

#define WM_PATH_ROOT_OK (1u << 0) /* "/" (or "") is accepted: List, recursive delete */

/* Normalizes in[0..n) into out (room for WM_PATH_MAX + 1 bytes): a leading
 * `/` added when missing, runs of `/` collapsed to one, a trailing `/`
 * dropped; every segment 1 to WM_SEGMENT_MAX characters of
 * [A-Za-z0-9_ -] not beginning or ending with a space; `..`, `.` and `$`
 * refused by name. 0 with the NUL-terminated path in out, or -1 with the
 * reason in err (out then holds nothing useful). The root "/" only with
 * WM_PATH_ROOT_OK. */
int wm_path_normalize(const char *in, size_t n, unsigned flags, char *out, char *err,
                      size_t errlen);

/* 1 when path (normalized) is root or lies under dir (normalized): `/a`
 * is under `/` and `/a`; `/ab` is not under `/a`. */
int wm_path_under(const char *path, const char *dir);

#endif
