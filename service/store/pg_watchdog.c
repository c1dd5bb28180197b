/* pg_watchdog: cuts connections whose round trips outlive their deadline;
 * see pg_watchdog.h. One thread sleeps until the earliest armed deadline
 * (+ grace) and shuts down the sockets that are past theirs. */
#include "service/store/pg_watchdog.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/core/clock.h"
#include "service/core/log.h"

typedef struct {
    const PGconn *conn; /* NULL: free slot */
    int fd;             /* our dup of the connection's socket, -1: none */
    int64_t deadline_ms;
    int cut;
} slot;

struct pg_watchdog {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    pthread_t thread;
    slot *slots;
    int capacity, grace_ms, stop;
    int64_t wake_at; /* when the thread wakes next (INT64_MAX: when signalled) */
};

static slot *find(pg_watchdog *w, const PGconn *conn) {
    for (int i = 0; i < w->capacity; i++)
        if (w->slots[i].conn == conn) return &w->slots[i];
    return NULL;
}

static void *watch_main(void *arg) {
    pg_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stop) {
        int64_t now = clock_mono_ms(NULL), next = INT64_MAX;
        for (int i = 0; i < w->capacity; i++) {
            slot *s = &w->slots[i];
            if (!s->conn || s->cut || s->deadline_ms == INT64_MAX) continue;
            int64_t at = s->deadline_ms + w->grace_ms;
            if (at <= now) {
                /* The session is blocked in libpq (or about to be): wake it
                 * with a dead socket. Through our own duplicate of the
                 * descriptor, taken when the session armed: libpq may have
                 * closed its own by now, and that number be someone else's. */
                if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
                s->cut = 1;
                log_fields(LOG_WARN,
                           "postgres: no answer by the call's deadline; connection closed",
                           LOG_F_INT, "late_ms", now - s->deadline_ms, LOG_F_END);
            } else if (at < next) {
                next = at;
            }
        }
        w->wake_at = next;
        if (next == INT64_MAX) pthread_cond_wait(&w->cond, &w->lock);
        else {
            struct timespec ts = clock_cond_deadline(next);
            pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* Frees w once its thread is gone (or was never started). */
static void destroy(pg_watchdog *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    free(w->slots);
    free(w);
}

int pg_watchdog_create(int capacity, int grace_ms, pg_watchdog **out) {
    pg_watchdog *w = calloc(1, sizeof *w);
    if (!w || !(w->slots = calloc((size_t)capacity, sizeof *w->slots))) {
        free(w);
        return -1;
    }
    w->capacity = capacity;
    w->grace_ms = grace_ms;
    for (int i = 0; i < capacity; i++) w->slots[i].fd = -1;
    w->wake_at = INT64_MAX;
    pthread_mutex_init(&w->lock, NULL);
    clock_cond_init(&w->cond);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        destroy(w);
        return -1;
    }
    *out = w;
    return 0;
}

void pg_watchdog_free(pg_watchdog *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    destroy(w);
}

void pg_watchdog_arm(pg_watchdog *w, PGconn *conn, int64_t deadline_ms) {
    /* On the session's thread, while the connection is its own. */
    int fd = PQsocket(conn) >= 0 ? dup(PQsocket(conn)) : -1;
    pthread_mutex_lock(&w->lock);
    slot *s = find(w, conn);
    if (!s) s = find(w, NULL);
    if (s) {
        if (s->conn && s->fd >= 0) close(s->fd);
        *s = (slot){conn, fd, deadline_ms, 0};
        fd = -1;
        /* Wake the thread only for a deadline it would otherwise sleep
         * past: arming is on every session's path, a wake-up is not. */
        if (deadline_ms != INT64_MAX && deadline_ms + w->grace_ms < w->wake_at) {
            w->wake_at = deadline_ms + w->grace_ms;
            pthread_cond_signal(&w->cond);
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (fd >= 0) close(fd); /* no room: unwatched */
}

void pg_watchdog_expire(pg_watchdog *w, const PGconn *conn) {
    pthread_mutex_lock(&w->lock);
    slot *s = find(w, conn);
    if (s && !s->cut) {
        s->deadline_ms = clock_mono_ms(NULL) - w->grace_ms; /* due now */
        w->wake_at = s->deadline_ms + w->grace_ms;
        pthread_cond_signal(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

int pg_watchdog_disarm(pg_watchdog *w, PGconn *conn) {
    pthread_mutex_lock(&w->lock);
    slot *s = find(w, conn);
    int cut = s && s->cut;
    int fd = s ? s->fd : -1;
    if (s) *s = (slot){.fd = -1};
    pthread_mutex_unlock(&w->lock);
    if (fd >= 0) close(fd);
    return cut;
}

int pg_watchdog_cut(pg_watchdog *w, const PGconn *conn) {
    pthread_mutex_lock(&w->lock);
    slot *s = find(w, conn);
    int cut = s && s->cut;
    pthread_mutex_unlock(&w->lock);
    return cut;
}
