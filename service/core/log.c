/* log: JSON-lines logger. Lines are built in a stack buffer and written
 * with one write(2); a line longer than the buffer is truncated, never split. */
#include "service/core/log.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 4096

static atomic_int log_min_level = LOG_INFO;
static atomic_int log_out_fd = 2;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static _Thread_local char thread_trace[LOG_TRACE_MAX]; /* "": none */

void log_trace_enter(log_trace_scope *scope, const char *trace_id) {
    memcpy(scope->prev, thread_trace, sizeof thread_trace);
    snprintf(thread_trace, sizeof thread_trace, "%s", trace_id ? trace_id : "");
}

void log_trace_leave(const log_trace_scope *scope) {
    memcpy(thread_trace, scope->prev, sizeof thread_trace);
}

void log_set_level(log_level level) { atomic_store(&log_min_level, (int)level); }
log_level log_get_level(void) { return (log_level)atomic_load(&log_min_level); }
int log_enabled(log_level level) { return (int)level >= atomic_load(&log_min_level); }
void log_set_fd(int fd) { atomic_store(&log_out_fd, fd); }
int log_get_fd(void) { return atomic_load(&log_out_fd); }

const char *log_level_name(log_level level) {
    return (level >= LOG_DEBUG && level <= LOG_ERROR) ? level_names[level] : "info";
}

int log_level_parse(const char *name, log_level *out) {
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

/* A bounded line builder. Writes are all-or-nothing: once one does not fit,
 * the line is marked truncated and later writes are dropped, so a cut never
 * falls inside an escape sequence. LINE_RESERVE bytes past cap stay free for
 * the closing quote, the "truncated" marker, the brace and the newline. */
#define LINE_RESERVE 24

typedef struct {
    char *buf;
    size_t len, cap;
    int truncated;
} line_buf;

static int put_raw(line_buf *b, const char *s, size_t n) {
    if (b->truncated || b->len + n > b->cap) {
        b->truncated = 1;
        return -1;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    return 0;
}

/* Appends into the reserve: only for the closing bytes of a line. */
static void put_closing(line_buf *b, const char *s) {
    size_t n = strlen(s);
    memcpy(b->buf + b->len, s, n);
    b->len += n;
}

static void put_cstr(line_buf *b, const char *s) { put_raw(b, s, strlen(s)); }

/* A cut may split a multi-byte UTF-8 character: drop its leading bytes. */
static void drop_partial_utf8(line_buf *b) {
    for (size_t back = 1; back <= 4 && back <= b->len; back++) {
        unsigned char c = (unsigned char)b->buf[b->len - back];
        if ((c & 0xc0) == 0x80) continue; /* continuation byte */
        size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (need > back) b->len -= back;
        return;
    }
}

/* Writes s as a JSON string literal (quotes included), escaping control
 * characters so a hostile peer address or method name cannot forge lines.
 * When the line fills up, the string is cut at a character boundary and
 * still closed. Returns -1 when not even the opening quote fit. */
static int put_json_string(line_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    if (put_raw(b, "\"", 1) != 0) return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p && !b->truncated; p++) {
        char esc[6];
        switch (*p) {
        case '"': put_raw(b, "\\\"", 2); break;
        case '\\': put_raw(b, "\\\\", 2); break;
        case '\n': put_raw(b, "\\n", 2); break;
        case '\r': put_raw(b, "\\r", 2); break;
        case '\t': put_raw(b, "\\t", 2); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                put_raw(b, esc, 6);
            } else {
                put_raw(b, (const char *)p, 1);
            }
        }
    }
    if (!b->truncated && put_raw(b, "\"", 1) == 0) return 0;
    /* Cut, or no room left for the closing quote itself (the string ended
     * exactly at the cap): close it in the reserve all the same. */
    drop_partial_utf8(b);
    put_closing(b, "\"");
    return 0;
}

static void put_time(line_buf *b) {
    struct timespec ts;
    struct tm tm;
    char tmp[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(tmp, sizeof tmp, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(tmp + n, sizeof tmp - n, ".%06ldZ", ts.tv_nsec / 1000);
    put_json_string(b, tmp);
}

static void emit(log_level level, const char *msg, va_list *ap) {
    char storage[LOG_LINE_MAX];
    line_buf b = {storage, 0, sizeof storage - LINE_RESERVE, 0};
    char num[64];

    put_cstr(&b, "{\"time\":");
    put_time(&b);
    put_cstr(&b, ",\"level\":\"");
    put_cstr(&b, log_level_name(level));
    put_cstr(&b, "\",\"msg\":");
    put_json_string(&b, msg);
    if (thread_trace[0]) {
        put_cstr(&b, ",\"trace_id\":");
        put_json_string(&b, thread_trace);
    }
    while (ap && !b.truncated) {
        log_field_kind kind = (log_field_kind)va_arg(*ap, int);
        if (kind == LOG_F_END) break;
        const char *key = va_arg(*ap, const char *);
        size_t field_start = b.len;
        put_raw(&b, ",", 1);
        put_json_string(&b, key);
        put_raw(&b, ":", 1);
        int complete = !b.truncated;
        switch (kind) {
        case LOG_F_STR: {
            const char *v = va_arg(*ap, const char *);
            if (!complete) break;
            /* A value cut short is still a well-formed (shortened) string. */
            if (v) complete = put_json_string(&b, v) == 0;
            else complete = put_raw(&b, "null", 4) == 0;
            break;
        }
        case LOG_F_INT:
            snprintf(num, sizeof num, "%lld", (long long)va_arg(*ap, int64_t));
            complete = complete && put_raw(&b, num, strlen(num)) == 0;
            break;
        case LOG_F_DBL: {
            double d = va_arg(*ap, double);
            /* JSON has no NaN or infinity. */
            if (isfinite(d)) snprintf(num, sizeof num, "%.6g", d);
            else snprintf(num, sizeof num, "null");
            complete = complete && put_raw(&b, num, strlen(num)) == 0;
            break;
        }
        default:
            /* A cut here drops the field like any other, never leaving a
             * key without its value. */
            complete = complete && put_raw(&b, "null", 4) == 0;
            ap = NULL; /* unknown kind: the rest of the list cannot be trusted */
        }
        if (!complete) b.len = field_start; /* drop a field that did not fit */
    }
    if (b.truncated) put_closing(&b, ",\"truncated\":true");
    put_closing(&b, "}\n");
    /* One write per line; a short write to a pipe/file is not retried so a
     * stuck log consumer cannot wedge request threads forever. */
    ssize_t rc = write(atomic_load(&log_out_fd), storage, b.len);
    (void)rc;
}

void log_vfields(log_level level, const char *msg, va_list ap) {
    if (!log_enabled(level)) return;
    va_list copy;
    va_copy(copy, ap);
    emit(level, msg, &copy);
    va_end(copy);
}

void log_fields(log_level level, const char *msg, ...) {
    va_list ap;
    va_start(ap, msg);
    log_vfields(level, msg, ap);
    va_end(ap);
}

void log_msg(log_level level, const char *fmt, ...) {
    if (!log_enabled(level)) return;
    char text[LOG_LINE_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    emit(level, text, NULL);
}

void log_outage_begin(log_outage *o, const char *msg, const char *key, const char *why) {
    if (!o->down) log_fields(LOG_WARN, msg, LOG_F_STR, key, why, LOG_F_END);
    o->down = 1;
}

void log_outage_end(log_outage *o, const char *msg) {
    if (o->down) log_fields(LOG_INFO, msg, LOG_F_END);
    o->down = 0;
}
