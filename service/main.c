/* memoryd: start-up and shutdown. Wires configuration, backends, the
 * runtime and the services together; owns nothing that outlives main. */
#include <errno.h>
#include <grpc/grpc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protos/descriptor_set.h"
#include "service/audit/audit.h"
#include "service/audit/audit_keeper.h"
#include "service/auth/authn.h"
#include "service/auth/stream_quota.h"
#include "service/core/config.h"
#include "service/core/crash.h"
#include "service/core/log.h"
#include "service/health/health.h"
#include "service/health/health_probe.h"
#include "service/metrics/backend_metrics.h"
#include "service/metrics/call_metrics.h"
#include "service/metrics/metrics.h"
#include "service/metrics/metrics_http.h"
#include "service/pb/page_token.h"
#include "service/receipt_cli.h"
#include "service/reflection/descpool.h"
#include "service/reflection/reflection.h"
#include "service/rpc/rpc.h"
#include "service/rpc/rpc_log.h"
#include "service/store/apg.h"
#include "service/store/aredis.h"
#include "service/store/evloop.h"
#include "service/store/instance.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"
#include "service/store/server_secret.h"
#include "service/tier/tier.h"
#include "service/token_cli.h"

/* The tiers, in the order they open (a tier may use what an earlier one
 * offers in tier_env: the cache before Entries and GlobalMemory, every tier
 * that keeps records before Privacy, which runs their erasers), each by the name of
 * the `const tier <name>_tier` its folder exports. Adding a tier is its
 * folder, its library in BUILD and its name on this one line. */
#define TIERS(X)                                                                                   \
    X(access)                                                                                      \
    X(audit)                                                                                       \
    X(cache)                                                                                       \
    TEST_TIER(X)                                                                                   \
    X(entries) X(working) X(session) X(global) X(episodic) X(blackboard) X(router) X(privacy)

/* A test binary's own tier (tests/server/stub_tier: -DMEMORYD_TEST_TIER=stub),
 * added as any tier is: by its name on the line above. */
#ifdef MEMORYD_TEST_TIER
#define TEST_TIER_NAMED(X, name) X(name)
#define TEST_TIER(X) TEST_TIER_NAMED(X, MEMORYD_TEST_TIER)
#else
#define TEST_TIER(X)
#endif

#define TIER_DECLARE(name) extern const tier name##_tier;
#define TIER_ENTRY(name) &name##_tier,
TIERS(TIER_DECLARE)
static const tier *const tiers[] = {TIERS(TIER_ENTRY)};

#define ERRLEN 512

/* Everything main builds, so one function can tear it down in order. */
typedef struct {
    config cfg;
    pg_pool *pg;
    evloop *loop; /* backend I/O (rpc.h's execution model) */
    apg *pga;     /* PostgreSQL on loop */
    redis_pool *redis;
    aredis *redis_async; /* Redis on loop: the cache's lookups */
    descpool *pool;
    health *health;
    health_probe *probe;
    call_metrics *calls;
    metrics_http *metrics;
    rpc_server *srv;
    instance *inst;
    authn *auth;
    stream_quota *quota;
    audit *audit;
    tier_set *tiers;
} app;

static char *read_file(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read %s", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Ranked text in PostgreSQL (tier/tier_sql_rank.h) analyzes in the text
 * search configuration named as --text-language, and in 'simple' (no
 * stemming, no stop words) when PostgreSQL has none of that name: said
 * once at start, since ranked queries would quietly lose their stems. */
static void warn_text_config(PGconn *conn, const char *language) {
    const char *lang = language && language[0] ? language : "english";
    const char *params[1] = {lang};
    PGresult *r = PQexecParams(conn, "SELECT 1 FROM pg_ts_config WHERE cfgname = $1", 1, NULL,
                               params, NULL, NULL, 0);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 0)
        log_fields(LOG_WARN,
                   "PostgreSQL has no text search configuration of --text-language: ranked "
                   "Entries.Search and QueryEntities analyze with 'simple' (no stemming, no stop "
                   "words); EpisodicMemory ranks with libstemmer as asked",
                   LOG_F_STR, "text_language", lang, LOG_F_END);
    PQclear(r);
}

static int open_backends(app *a, char *err) {
    const config *c = &a->cfg;
    if (pg_pool_create(c->pg_url, c->pg_pool_size, c->pg_connect_timeout_s, &a->pg, err, ERRLEN))
        return -1;
    /* The event loop's pool: the same server and size, its own queue bound
     * and the deadline of calls that sent none. */
    apg_options po = {.url = c->pg_url, .size = c->pg_pool_size, .max_queue = c->pg_queue_max};
    po.connect_timeout_ms = c->pg_connect_timeout_s * 1000;
    po.default_timeout_ms = c->default_deadline_ms;
    if (evloop_create("backend", &a->loop, err, ERRLEN) != 0 ||
        apg_create(a->loop, &po, &a->pga, err, ERRLEN) != 0)
        return -1;
    if (c->migrate) {
        char merr[ERRLEN];
        PGconn *conn = pg_pool_acquire(a->pg, INT64_MAX, merr, sizeof merr);
        int applied = 0;
        int rc = conn ? pg_migrate(conn, memoryd_migrations, memoryd_migrations_count, &applied,
                                   merr, sizeof merr)
                      : -1;
        pg_pool_release(a->pg, conn, rc != 0);
        if (rc != 0) {
            snprintf(err, ERRLEN, "schema migration failed: %.400s", merr);
            return -1;
        }
        log_fields(LOG_INFO, "schema ready", LOG_F_INT, "applied", (int64_t)applied, LOG_F_INT,
                   "version", (int64_t)memoryd_migrations[memoryd_migrations_count - 1].version,
                   LOG_F_END);
    }
    /* The audit trail's partitions of the coming days, whether or not this
     * replica ever sweeps (a write finds the default partition else). */
    char aerr[ERRLEN];
    PGconn *conn = pg_pool_acquire(a->pg, INT64_MAX, aerr, sizeof aerr);
    int made = 0;
    if (!conn || audit_keeper_make_ahead(conn, &made, aerr, sizeof aerr) != 0)
        log_fields(LOG_WARN, "audit trail: the coming days' partitions were not made", LOG_F_STR,
                   "reason", aerr, LOG_F_END);
    if (conn) warn_text_config(conn, c->text_language);
    if (conn) pg_pool_release(a->pg, conn, 0);
    /* Page tokens open on every replica of this database and on nothing
     * else: their seal's key is the deployment's. */
    _Static_assert(SERVER_SECRET_LEN == PAGE_TOKEN_KEY_LEN, "the page-token key is a secret");
    unsigned char key[SERVER_SECRET_LEN];
    char kerr[ERRLEN];
    if (server_secret_get(a->pg, "page_token_key", key, kerr, sizeof kerr) != 0) {
        snprintf(err, ERRLEN, "cannot read the page-token key: %.400s", kerr);
        return -1;
    }
    page_token_set_key(key);
    memset(key, 0, sizeof key);
    authn_options ao = {
        .jwks_path = c->jwks,
        .signing_key_path = c->signing_key,
        .issuer = c->token_issuer,
        .skew_s = c->token_skew_s,
        .open_infra = c->open_health,
        .cache_max = (size_t)c->token_cache_size,
        .revocation_poll_ms = c->revocation_poll_ms,
        .jwks_reload_ms = c->jwks_reload_ms,
        .bind_to_client_certificate = strcmp(c->tls_client_identity, "sub") == 0,
    };
    if (authn_create(&ao, a->pg, &a->auth, err, ERRLEN) != 0) return -1;
    if (c->redis_url[0]) {
        /* Calls use Redis through the event loop (aredis); the blocking
         * pool checks the URL at start-up and gives the invalidation
         * subscriber its connection's settings: one connection is enough. */
        char rerr[ERRLEN];
        int rc = redis_pool_create(c->redis_url, 1, 1000, &a->redis, rerr, sizeof rerr);
        if (rc < 0) {
            snprintf(err, ERRLEN, "--redis-url (MEMORYD_REDIS_URL): %.400s", rerr);
            return -1;
        }
        if (rc > 0)
            log_fields(LOG_WARN,
                       "redis unreachable at start-up; cache runs in-process only and "
                       "the blackboard is NOT_SERVING until it answers",
                       LOG_F_STR, "error", rerr, LOG_F_END);
        aredis_options ro = {.url = c->redis_url,
                             .connect_timeout_ms = 1000,
                             .default_timeout_ms = c->default_deadline_ms,
                             .max_in_flight = 4096};
        if (aredis_create(a->loop, &ro, &a->redis_async, err, ERRLEN) != 0) return -1;
    }
    return 0;
}

static int build_server(app *a, char *err) {
    const config *c = &a->cfg;
    char *cert = NULL, *key = NULL, *client_ca = NULL;
    if (c->tls_cert[0]) {
        cert = read_file(c->tls_cert, err, ERRLEN);
        key = cert ? read_file(c->tls_key, err, ERRLEN) : NULL;
        client_ca = key && c->tls_client_ca[0] ? read_file(c->tls_client_ca, err, ERRLEN) : NULL;
        if (!key || (c->tls_client_ca[0] && !client_ca)) {
            free(cert);
            free(key);
            return -1;
        }
    }
    rpc_server_options o = {
        .listen = c->listen,
        .workers = c->workers,
        .task_threads = c->task_threads,
        .task_queue_max = c->task_queue_max,
        .max_message_bytes = c->max_message_bytes,
        .keepalive_time_ms = c->keepalive_time_s * 1000,
        .keepalive_timeout_ms = c->keepalive_timeout_s * 1000,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
        .tls_client_ca_pem = client_ca,
        .max_connection_age_ms = c->max_connection_age_s * 1000,
        .max_connection_age_grace_ms = c->max_connection_age_grace_s * 1000,
        .min_ping_interval_ms = c->keepalive_min_ping_s * 1000,
        /* A copy older than the L1 TTL is gone from every replica, give or
         * take the replicas' clock difference (--token-skew bounds it for
         * tokens already). */
        .consistency_window_ms = (int64_t)c->cache_l1_ttl_ms + (int64_t)c->token_skew_s * 1000,
        .max_call_memory = (size_t)c->max_call_memory_mb << 20,
        .stream_buffer_bytes = (size_t)c->stream_buffer_bytes,
        .max_streams = c->max_streams,
    };
    int rc = rpc_server_create(&o, &a->srv, err, ERRLEN);
    free(cert);
    free(key);
    free(client_ca);
    if (rc != 0) return -1;
    if (descpool_create(memoryd_descriptor_set, memoryd_descriptor_set_len, &a->pool) != 0) {
        snprintf(err, ERRLEN, "the embedded descriptor set is corrupt");
        return -1;
    }
    /* The interceptor chain, in order: authenticate + authorize, then the
     * handler; observers see every finished call (access log, audit). */
    if (!(a->health = health_create(c->max_health_watchers)) ||
        health_register(a->srv, a->health) != 0 ||
        (c->reflection && reflection_register(a->srv, a->pool) != 0) ||
        rpc_server_add_interceptor(a->srv, authn_interceptor, a->auth) != 0 ||
        !(a->quota =
              stream_quota_create(c->max_streams_per_tenant, c->max_streams_per_principal)) ||
        rpc_server_add_interceptor(a->srv, stream_quota_interceptor, a->quota) != 0 ||
        rpc_server_add_observer(a->srv, rpc_log_observer, NULL) != 0) {
        snprintf(err, ERRLEN, "cannot register the built-in services");
        return -1;
    }
    audit_options audo = {.queue_capacity = 65536, .batch_max = 512, .linger_ms = 10};
    if (audit_create(a->pg, &audo, &a->audit, err, ERRLEN) != 0 ||
        audit_observe(a->srv, a->audit) != 0 ||
        (c->metrics_listen[0] && (metrics_add_collector(audit_metrics_collect, a->audit) != 0 ||
                                  metrics_add_collector(authn_metrics_collect, a->auth) != 0))) {
        if (!err[0]) snprintf(err, ERRLEN, "cannot start the audit trail");
        return -1;
    }
    tier_env env = {
        .cfg = c,
        .pg = a->pg,
        .pga = a->pga,
        .redis = a->redis,
        .redis_async = a->redis_async,
        .loop = a->loop,
        .auth = a->auth,
        .audit = a->audit,
        /* A List/Search answer must fit the message limit with room for
         * the framing around the values. */
        .max_response_bytes = (size_t)c->max_message_bytes / 4 * 3,
    };
    pii_policy_parse(c->pii_policy, &env.pii); /* validated by config */
    if (tier_set_open(tiers, TIER_COUNT(tiers), &env, a->srv, &a->tiers, err, ERRLEN) != 0)
        return -1;
    rpc_server_set_unknown_describer(a->srv, reflection_describe_unknown, a->pool);
    /* Last: the call metrics' label set is the finished method table. */
    if (c->metrics_listen[0] && call_metrics_create(a->srv, &a->calls) != 0) {
        snprintf(err, ERRLEN, "cannot set up the call metrics");
        return -1;
    }
    return 0;
}

/* The backends' pools, under their labels (backend_metrics.h). */
static int register_backend_metrics(app *a) {
    if (backend_metrics_add("postgres", "loop", apg_stats(a->pga),
                            BACKEND_HAS_WAIT | BACKEND_HAS_DURATION, apg_gauges, a->pga) != 0 ||
        backend_metrics_add("postgres", "blocking", pg_pool_stats(a->pg), BACKEND_HAS_WAIT,
                            pg_pool_gauges, a->pg) != 0)
        return -1;
    if (a->redis_async &&
        backend_metrics_add("redis", "loop", aredis_stats(a->redis_async), BACKEND_HAS_DURATION,
                            aredis_gauges, a->redis_async) != 0)
        return -1;
    return 0;
}

/* The /metrics listener, when --metrics-listen asks for one. */
static int start_metrics(app *a, char *err) {
    if (!a->cfg.metrics_listen[0]) return 0;
    if (register_backend_metrics(a) != 0) {
        snprintf(err, ERRLEN, "cannot register the backends' metrics");
        return -1;
    }
    if (metrics_http_start(a->cfg.metrics_listen, &a->metrics, err, ERRLEN) != 0) return -1;
    log_fields(LOG_INFO, "metrics serving", LOG_F_STR, "listen", a->cfg.metrics_listen, LOG_F_INT,
               "port", (int64_t)metrics_http_port(a->metrics), LOG_F_STR, "path", "/metrics",
               LOG_F_END);
    return 0;
}

static void teardown(app *a) {
    metrics_http_stop(a->metrics); /* no scrape may read what is freed below */
    metrics_reset_collectors();
    health_probe_stop(a->probe);
    rpc_server_free(a->srv);
    call_metrics_free(a->calls);
    tier_set_free(a->tiers);
    audit_free(a->audit);
    authn_free(a->auth);
    stream_quota_free(a->quota); /* after the server: streams hand places back */
    instance_stop(a->inst, a->pg);
    health_free(a->health);
    descpool_free(a->pool);
    redis_pool_free(a->redis);
    aredis_free(a->redis_async); /* after the server, as apg */
    apg_free(a->pga);            /* after the server: pending calls end through it */
    evloop_free(a->loop);
    pg_pool_free(a->pg);
    config_free(&a->cfg);
}

/* Health: each tier's services follow the backends they need; the API's
 * services no tier of this build serves are NOT_SERVING for good. */
static int start_health(app *a) {
    health_dep *deps = NULL;
    size_t n = 0;
    if (tier_set_health_deps(a->tiers, &deps, &n) != 0) return -1;
    for (size_t i = 0; i < descpool_service_count(a->pool); i++) {
        const char *svc = descpool_service_name(a->pool, i);
        if (strncmp(svc, "memory.v1.", 10) == 0 && !tier_set_serves(a->tiers, svc) &&
            health_set(a->health, svc, HEALTH_NOT_SERVING) != 0) {
            free(deps);
            return -1;
        }
    }
    int rc = health_probe_start(a->health, a->pga, a->redis_async, deps, n,
                                a->cfg.health_interval_ms, &a->probe);
    free(deps);
    return rc;
}

static int run(app *a, const sigset_t *signals) {
    char err[ERRLEN] = "";
    if (open_backends(a, err) != 0 || build_server(a, err) != 0 || start_health(a) != 0 ||
        rpc_server_start(a->srv, err, sizeof err) != 0 || start_metrics(a, err) != 0) {
        log_fields(LOG_ERROR, "start-up failed", LOG_F_STR, "error", err[0] ? err : "see above",
                   LOG_F_END);
        fprintf(stderr, "memoryd: %s\n", err[0] ? err : "start-up failed");
        return 1;
    }
    a->inst = instance_start(a->pg, a->cfg.listen);
    log_fields(LOG_INFO, "memoryd serving", LOG_F_STR, "listen", a->cfg.listen, LOG_F_INT, "port",
               (int64_t)rpc_server_port(a->srv), LOG_F_STR, "tls",
               a->cfg.tls_cert[0] ? (a->cfg.tls_client_ca[0] ? "mutual" : "on") : "off", LOG_F_STR,
               "redis", a->redis ? "configured" : "none", LOG_F_END);

    int sig = 0;
    while (sigwait(signals, &sig) != 0) {}
    log_fields(LOG_INFO, "shutting down", LOG_F_STR, "signal", strsignal(sig), LOG_F_INT, "grace_s",
               (int64_t)a->cfg.shutdown_grace_s, LOG_F_END);
    health_shutdown(a->health);
    rpc_server_shutdown(a->srv, a->cfg.shutdown_grace_s * 1000);
    log_msg(LOG_INFO, "memoryd stopped");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "token") == 0) return token_cli_main(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "receipt") == 0) return receipt_cli_main(argc - 1, argv + 1);
    app a;
    memset(&a, 0, sizeof a);
    char err[ERRLEN];
    int rc = config_load(&a.cfg, argc, argv, stdout, err, sizeof err);
    if (rc == CONFIG_EXIT_OK) return 0;
    if (rc != 0) {
        fprintf(stderr, "memoryd: %s\n", err);
        return 2;
    }
    log_level level = LOG_INFO;
    log_level_parse(a.cfg.log_level, &level);
    log_set_level(level);
    config_log(&a.cfg);
    if (crash_install() != 0)
        log_msg(LOG_WARN, "crash reporter not installed: %s", strerror(errno));

    /* Block the shutdown signals in every thread (threads inherit the
     * mask) so main receives them with sigwait; ignore SIGPIPE from peers
     * that hang up on a socket we write. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    grpc_init();
    rc = run(&a, &signals);
    teardown(&a);
    grpc_shutdown();
    return rc;
}
