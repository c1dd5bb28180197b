/* log: structured logging as JSON lines (one object per line on stderr).
 *
 * Every line has "time" (RFC 3339 UTC, microseconds), "level" and "msg";
 * callers add fields as key/value pairs. A line is written with a single
 * write(2) so lines from concurrent threads never interleave. */
#ifndef MEMORYD_CORE_LOG_H
#define MEMORYD_CORE_LOG_H

#include <stdarg.h>
#include <stdint.h>

typedef enum {
    LOG_DEBUG = 0,
    LOG_INFO = 1,
    LOG_WARN = 2,
    LOG_ERROR = 3,
} log_level;

/* Field kinds for log_fields(); each field is (kind, key, value). */
typedef enum {
    LOG_F_END = 0, /* terminates the list */
    LOG_F_STR,     /* const char *value (NULL is written as null) */
    LOG_F_INT,     /* int64_t value */
    LOG_F_DBL,     /* double value */
} log_field_kind;

/* Sets the lowest level written; default LOG_INFO. Thread-safe. */
void log_set_level(log_level level);
log_level log_get_level(void);
/* True when lines of this level are written (callers skip building fields). */
int log_enabled(log_level level);

/* Parses "debug" / "info" / "warn" / "error". Returns 0 or -1. */
int log_level_parse(const char *name, log_level *out);
const char *log_level_name(log_level level);

/* Redirects output to fd (default 2). The caller keeps owning fd. */
void log_set_fd(int fd);
/* The fd lines go to (for the crash reporter, which writes raw). */
int log_get_fd(void);

/* The trace id of the call this thread is working for: every line
 * logged on the thread between log_trace_enter and log_trace_leave
 * carries it as "trace_id" (copied: the call may end meanwhile). enter
 * keeps the id it replaces in scope, leave puts it back. */
#define LOG_TRACE_MAX 48
typedef struct log_trace_scope {
    char prev[LOG_TRACE_MAX];
} log_trace_scope;
void log_trace_enter(log_trace_scope *scope, const char *trace_id);
void log_trace_leave(const log_trace_scope *scope);

/* A message formatted printf-style, without extra fields. */
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A message plus fields: log_fields(LOG_INFO, "listening",
 *     LOG_F_STR, "addr", addr, LOG_F_INT, "workers", (int64_t)n, LOG_F_END); */
void log_fields(log_level level, const char *msg, ...);
void log_vfields(log_level level, const char *msg, va_list ap);

/* An outage of something a background loop retries (a connection, a
 * poll): logged when it begins and when it ends, not on every retry. */
typedef struct log_outage {
    int down;
} log_outage;
/* WARN msg with why under key, unless this outage was logged already. */
void log_outage_begin(log_outage *o, const char *msg, const char *key, const char *why);
/* INFO msg when an outage was logged; it is over. */
void log_outage_end(log_outage *o, const char *msg);

#endif
