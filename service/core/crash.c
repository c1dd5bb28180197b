/* crash: see crash.h. Everything the handler does is async-signal-safe
 * except backtrace(), whose one unsafe step (loading libgcc on first use)
 * crash_install() takes in advance. */
#include "crash.h"

#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#if defined(__SANITIZE_ADDRESS__)
#define CRASH_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRASH_UNDER_ASAN 1
#endif
#endif

#ifndef CRASH_UNDER_ASAN
#define CRASH_FRAMES 64
#define CRASH_ALTSTACK (64 * 1024)

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

/* Appends s to buf[*n..cap). */
static void put_str(char *buf, size_t cap, size_t *n, const char *s) {
    while (*s && *n + 1 < cap) buf[(*n)++] = *s++;
}

/* Appends v in base 10 (base 16 with a 0x prefix when hex). */
static void put_num(char *buf, size_t cap, size_t *n, uintptr_t v, int hex) {
    char digits[2 + 2 * sizeof v + 1];
    size_t d = sizeof digits;
    digits[--d] = '\0';
    do {
        unsigned r = (unsigned)(v % (hex ? 16u : 10u));
        digits[--d] = (char)(r < 10 ? '0' + r : 'a' + r - 10);
        v /= hex ? 16u : 10u;
    } while (v);
    if (hex) {
        digits[--d] = 'x';
        digits[--d] = '0';
    }
    put_str(buf, cap, n, digits + d);
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "fatal signal";
    }
}

/* Appends the time as the log writes it (RFC 3339 UTC, microseconds),
 * by arithmetic: gmtime_r may take a lock the crashed thread holds. */
static void put_time(char *buf, size_t cap, size_t *n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t days = ts.tv_sec / 86400, secs = ts.tv_sec % 86400;
    /* civil date from days since 1970-01-01 (H. Hinnant's algorithm) */
    int64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    const int64_t parts[] = {y, m, d, secs / 3600, secs / 60 % 60, secs % 60, ts.tv_nsec / 1000};
    const char *seps[] = {"-", "-", "T", ":", ":", ".", "Z"};
    const int widths[] = {4, 2, 2, 2, 2, 2, 6};
    for (int i = 0; i < 7; i++) {
        char digits[8];
        int64_t v = parts[i];
        for (int k = widths[i] - 1; k >= 0; k--, v /= 10) digits[k] = (char)('0' + v % 10);
        digits[widths[i]] = '\0';
        put_str(buf, cap, n, digits);
        put_str(buf, cap, n, seps[i]);
    }
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void on_fatal(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    int fd = log_get_fd();
    char line[256];
    size_t n = 0;
    put_str(line, sizeof line, &n, "{\"time\":\"");
    put_time(line, sizeof line, &n);
    put_str(line, sizeof line, &n,
            "\",\"level\":\"fatal\",\"msg\":\"memoryd crashed\",\"signal\":\"");
    put_str(line, sizeof line, &n, signal_name(sig));
    put_str(line, sizeof line, &n, "\",\"address\":\"");
    put_num(line, sizeof line, &n, (uintptr_t)(info ? info->si_addr : 0), 1);
    put_str(line, sizeof line, &n, "\",\"thread\":");
    put_num(line, sizeof line, &n, (uintptr_t)syscall(SYS_gettid), 0);
    put_str(line, sizeof line, &n, ",\"stack\":\"follows\"}\n");
    write_all(fd, line, n);
    void *frames[CRASH_FRAMES];
    int depth = backtrace(frames, CRASH_FRAMES);
    backtrace_symbols_fd(frames, depth, fd);
    /* SA_RESETHAND put the default action back: die of the same signal. */
    raise(sig);
}

int crash_install(void) {
    void *warm[1];
    (void)backtrace(warm, 1); /* loads libgcc now, not in the handler */
    static char altstack[CRASH_ALTSTACK];
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    (void)sigaltstack(&ss, NULL); /* without it only a stack overflow goes unreported */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    int rc = 0;
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        if (sigaction(crash_signals[i], &sa, NULL) != 0) rc = -1;
    return rc;
}

#else /* ASan reports fatal signals itself */

int crash_install(void) { return 0; }

#endif
