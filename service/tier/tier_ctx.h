/* tier_ctx: the context every tier's storage code gets for one call: who
 * is asking (the principal and how broadly it holds the tier's read and
 * write scopes), by when (the deadline), where results go (the arena),
 * what to run around a write's COMMIT (the audit row), and where the
 * reason for a failure goes (err). Storage code knows this struct, never
 * gRPC: the rpc side fills it (tier_call.h) and maps the code back.
 *
 * Functions taking a tier_ctx return STATUS_OK or a STATUS_E* code
 * (core/status.h) with the reason in ctx->err. */
#ifndef MEMORYD_TIER_TIER_CTX_H
#define MEMORYD_TIER_TIER_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/core/status.h"

/* Runs inside a write's transaction just before COMMIT (pgq_commit's
 * before_commit; the session's statements may run in it). */
struct pgq_session;
struct pgq_sql;
typedef int (*tier_before_commit_fn)(struct pgq_session *ss, void *arg, char *err, size_t errlen);

typedef struct tier_ctx {
    const char *tier;                /* "entries", "global", "episodic": scopes, logs */
    const principal *p;              /* the caller (borrowed) */
    principal_breadth read_breadth;  /* of "<tier>:read" */
    principal_breadth write_breadth; /* of "<tier>:write" */
    int64_t deadline_ms;             /* CLOCK_MONOTONIC ms; INT64_MAX = none */
    arena *ar;                       /* where results are allocated */
    /* Around a write's COMMIT (the audit row goes in before it, so data and
     * audit commit together; pgq_commit): may be NULL. */
    tier_before_commit_fn before_commit;
    void (*after_commit)(void *arg);
    void *hook_arg;
    /* The event loop's writes (tier_async_commit): builds the statement
     * (the audit row) sent with COMMIT in one round trip, instead of
     * before_commit; 0, or -1 with err. NULL: none. */
    int (*commit_sql)(void *arg, struct pgq_sql *b, char *err, size_t errlen);
    /* For work that blocks its thread (the task pool's): fired when the
     * client cancels (tier_ctx_watch_cancel); NULL: nobody watches. */
    struct cancel_token *cancel;
    /* The call's W3C traceparent, sent on to HTTP backends (Qdrant) so
     * their logs join the caller's trace; NULL: none. */
    const char *traceparent;
    /* The call carries a recent consistency token (rpc_call_wants_fresh):
     * reads go past replica-local caches to the shared store. */
    int fresh;
    char err[512];
} tier_ctx;

/* A context for principal p calling tier (scopes "<tier>:read" and
 * "<tier>:write"), without commit hooks. For storage code called outside
 * a gRPC call (benchmarks, tests); the rpc side uses tier_ctx_for. */
void tier_ctx_make(tier_ctx *c, const char *tier, const principal *p, int64_t deadline_ms,
                   arena *ar);

/* Formats c->err and returns code: `return tier_fail(c, STATUS_EDENIED, ...)`. */
int tier_fail(tier_ctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The end of work that must leave time to answer after it (the Router's
 * parts, a hybrid search's vector part): end less a tenth of what is left
 * at now, at most max_margin_ms. end INT64_MAX (no deadline) stays. */
static inline int64_t tier_end_less_margin(int64_t end, int64_t now, int64_t max_margin_ms) {
    if (end == INT64_MAX) return end;
    int64_t margin = (end - now) / 10;
    return end - (margin > max_margin_ms ? max_margin_ms : margin);
}

#endif
