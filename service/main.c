/* memoryd: start-up and shutdown. Wires configuration, backends, the
 * runtime and the services together; owns nothing that outlives main. */
#include <errno.h>
#include <openssl/rand.h>
#include <grpc/grpc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protos/descriptor_set.h"
#include "service/audit/audit.h"
#include "service/access/access.h"
#include "service/auth/authn.h"
#include "service/core/config.h"
#include "service/entries/entries_service.h"
#include "service/global/global_service.h"
#include "service/core/log.h"
#include "service/health/health.h"
#include "service/health/health_probe.h"
#include "service/reflection/descpool.h"
#include "service/reflection/reflection.h"
#include "service/rpc/rpc.h"
#include "service/rpc/rpc_log.h"
#include "service/store/instance.h"
#include "service/store/pg_migrate.h"
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"
#include "service/cache/cache_aside.h"
#include "service/cache/cache_codec.h"
#include "service/cache/cache_l1.h"
#include "service/cache/cache_l2.h"
#include "service/cache/cache_service.h"
#include "service/cache/cache_sub.h"
#include "service/episodic/episodic_embedded.h"
#include "service/episodic/episodic_qdrant.h"
#include "service/episodic/episodic_service.h"
#include "service/token_cli.h"

#define ERRLEN 512

/* Everything main builds, so one function can tear it down in order. */
typedef struct {
    config cfg;
    pg_pool *pg;
    redis_pool *redis;
    descpool *pool;
    health *health;
    health_probe *probe;
    rpc_server *srv;
    instance *inst;
    authn *auth;
    audit *audit;
    entries_service *entries;
    global_service *global;
    cache_l1 *l1;
    cache_l2 *l2;
    cache_sub *sub;
    cache_aside *entity_cache;
    cache_service *cache;
    vstore *vectors;
    episodic_service *episodic;
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

static int open_backends(app *a, char *err) {
    const config *c = &a->cfg;
    if (pg_pool_create(c->pg_url, c->pg_pool_size, c->pg_connect_timeout_s, &a->pg, err, ERRLEN))
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
    authn_options ao = {
        .jwks_path = c->jwks,
        .signing_key_path = c->signing_key,
        .issuer = c->token_issuer,
        .skew_s = c->token_skew_s,
        .open_infra = c->open_health,
        .cache_max = (size_t)c->token_cache_size,
        .revocation_poll_ms = c->revocation_poll_ms,
    };
    if (authn_create(&ao, a->pg, &a->auth, err, ERRLEN) != 0) return -1;
    if (c->redis_url[0]) {
        char rerr[ERRLEN];
        int rc = redis_pool_create(c->redis_url, 8, 1000, &a->redis, rerr, sizeof rerr);
        if (rc < 0) {
            snprintf(err, ERRLEN, "--redis-url (MEMORYD_REDIS_URL): %.400s", rerr);
            return -1;
        }
        if (rc > 0)
            log_fields(LOG_WARN, "redis unreachable at start-up; cache runs in-process only and "
                       "the blackboard is NOT_SERVING until it answers", LOG_F_STR, "error",
                       rerr, LOG_F_END);
    }
    return 0;
}

/* The cache tier: L1 always (unless sized 0), L2 and the invalidation
 * subscriber when Redis is configured. Replicas tell their own
 * invalidations apart by a random id. */
static int open_cache(app *a, char *err) {
    const config *c = &a->cfg;
    cache_l1_options lo = {(size_t)c->cache_l1_max_entries, (size_t)c->cache_l1_max_bytes,
                           c->cache_l1_ttl_ms};
    unsigned char rnd[CACHE_REPLICA_ID_LEN / 2];
    char replica[CACHE_REPLICA_ID_LEN + 1];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        snprintf(err, ERRLEN, "no randomness for the cache replica id");
        return -1;
    }
    for (size_t i = 0; i < sizeof rnd; i++) snprintf(replica + 2 * i, 3, "%02x", rnd[i]);
    if (!(a->l1 = cache_l1_create(&lo)) ||
        (a->redis && (!(a->l2 = cache_l2_create(a->redis, replica)) ||
                      cache_sub_start(a->redis, a->l1, replica, &a->sub) != 0)) ||
        (c->cache_entities && !(a->entity_cache = cache_aside_create(a->l1, a->sub)))) {
        snprintf(err, ERRLEN, "cannot start the cache tier (out of memory or threads)");
        return -1;
    }
    /* Serve with invalidations heard when Redis is there: until then the
     * entity cache bypasses L1. A Redis that is down does not hold us up. */
    if (a->sub) cache_sub_wait_live(a->sub, rpc_now_ms() + 2000);
    log_fields(LOG_INFO, "cache tier", LOG_F_STR, "replica", replica, LOG_F_INT, "l1_max_entries",
               (int64_t)c->cache_l1_max_entries, LOG_F_INT, "l1_max_bytes",
               (int64_t)c->cache_l1_max_bytes, LOG_F_STR, "l2", a->l2 ? "redis" : "none",
               LOG_F_STR, "entities", c->cache_entities ? "cached" : "not cached", LOG_F_END);
    return 0;
}

/* Audit.Watch ends streams whose token died; authn knows. */
static int audit_check_live_authn(void *ctx, const principal *p, char *err, size_t errlen) {
    return authn_check_live(ctx, p, err, errlen);
}

static int build_server(app *a, char *err) {
    const config *c = &a->cfg;
    char *cert = NULL, *key = NULL;
    if (c->tls_cert[0]) {
        cert = read_file(c->tls_cert, err, ERRLEN);
        key = cert ? read_file(c->tls_key, err, ERRLEN) : NULL;
        if (!key) {
            free(cert);
            return -1;
        }
    }
    rpc_server_options o = {
        .listen = c->listen,
        .workers = c->workers,
        .max_message_bytes = c->max_message_bytes,
        .keepalive_time_ms = c->keepalive_time_s * 1000,
        .keepalive_timeout_ms = c->keepalive_timeout_s * 1000,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
    };
    int rc = rpc_server_create(&o, &a->srv, err, ERRLEN);
    free(cert);
    free(key);
    if (rc != 0) return -1;
    if (descpool_create(memoryd_descriptor_set, memoryd_descriptor_set_len, &a->pool) != 0) {
        snprintf(err, ERRLEN, "the embedded descriptor set is corrupt");
        return -1;
    }
    /* The interceptor chain, in order: authenticate + authorize, then the
     * handler; observers see every finished call (access log, audit). */
    if (!(a->health = health_create()) || health_register(a->srv, a->health) != 0 ||
        (c->reflection && reflection_register(a->srv, a->pool) != 0) ||
        rpc_server_add_interceptor(a->srv, authn_interceptor, a->auth) != 0 ||
        rpc_server_add_observer(a->srv, rpc_log_observer, NULL) != 0) {
        snprintf(err, ERRLEN, "cannot register the built-in services");
        return -1;
    }
    audit_options audo = {.queue_capacity = 65536, .batch_max = 512, .linger_ms = 10,
                          .check_live = audit_check_live_authn, .check_live_ctx = a->auth};
    if (audit_create(a->pg, &audo, &a->audit, err, ERRLEN) != 0) return -1;
    /* A List/Search answer must fit the message limit with room for the
     * framing around the values. */
    entries_options eo = {.max_response_bytes = (size_t)c->max_message_bytes / 4 * 3};
    entries_pii_policy_parse(c->pii_policy, &eo.pii_policy); /* validated by config */
    global_options go = {.redact_pii = eo.pii_policy == ENTRIES_PII_REDACT,
                         .max_depth = c->traverse_max_depth,
                         .max_response_bytes = eo.max_response_bytes,
                         .entity_cache = a->entity_cache,
                         .entity_l2 = a->l2};
    cache_options co = {.redact_pii = eo.pii_policy == ENTRIES_PII_REDACT};
    episodic_options epo = {.redact_pii = eo.pii_policy == ENTRIES_PII_REDACT};
    if (c->qdrant_url[0]) {
        qdrant_options qo = {.url = c->qdrant_url,
                             .api_key = c->qdrant_api_key,
                             .collection_prefix = c->qdrant_collection_prefix,
                             .timeout_ms = c->qdrant_timeout_ms};
        if (episodic_qdrant_open(a->pg, &qo, &a->vectors, err, ERRLEN) != 0) return -1;
    } else if (episodic_embedded_open(a->pg, &a->vectors) != 0) {
        snprintf(err, ERRLEN, "out of memory");
        return -1;
    }
    if (audit_register(a->srv, a->audit) != 0 || access_register(a->srv, a->auth, a->pg) != 0 ||
        entries_register(a->srv, a->pg, a->audit, &eo, &a->entries) != 0 ||
        global_register(a->srv, a->pg, a->audit, &go, &a->global) != 0 ||
        cache_register(a->srv, a->l1, a->l2, &co, &a->cache) != 0 ||
        episodic_register(a->srv, a->vectors, a->audit, &epo, &a->episodic) != 0) {
        snprintf(err, ERRLEN, "cannot register the services");
        return -1;
    }
    rpc_server_set_unknown_describer(a->srv, reflection_describe_unknown, a->pool);
    return 0;
}

static void teardown(app *a) {
    health_probe_stop(a->probe);
    rpc_server_free(a->srv);
    entries_service_free(a->entries);
    global_service_free(a->global);
    cache_service_free(a->cache);
    episodic_service_free(a->episodic);
    vstore_free(a->vectors);
    cache_aside_free(a->entity_cache);
    cache_sub_stop(a->sub);
    cache_l2_free(a->l2);
    if (a->l1) {
        cache_l1_stats st;
        cache_l1_get_stats(a->l1, &st);
        log_fields(LOG_INFO, "cache L1 totals", LOG_F_INT, "hits", (int64_t)st.hits, LOG_F_INT,
                   "misses", (int64_t)st.misses, LOG_F_INT, "evictions", (int64_t)st.evictions,
                   LOG_F_INT, "expirations", (int64_t)st.expirations, LOG_F_INT,
                   "invalidations", (int64_t)st.invalidations, LOG_F_END);
    }
    cache_l1_free(a->l1);
    audit_free(a->audit);
    authn_free(a->auth);
    instance_stop(a->inst, a->pg);
    health_free(a->health);
    descpool_free(a->pool);
    redis_pool_free(a->redis);
    pg_pool_free(a->pg);
    config_free(&a->cfg);
}

/* EpisodicMemory's health with Qdrant: the Qdrant server answers. */
static int probe_vectors(void *vs) { return ((vstore *)vs)->ops->probe((vstore *)vs); }

static int run(app *a, const sigset_t *signals) {
    char err[ERRLEN] = "";
    if (open_backends(a, err) != 0 || open_cache(a, err) != 0 || build_server(a, err) != 0 ||
        health_probe_start(a->health, a->pg, a->redis, a->cfg.qdrant_url[0] ? probe_vectors : NULL,
                           a->vectors, a->cfg.health_interval_ms, &a->probe) != 0 ||
        rpc_server_start(a->srv, err, sizeof err) != 0) {
        log_fields(LOG_ERROR, "start-up failed", LOG_F_STR, "error", err[0] ? err : "see above",
                   LOG_F_END);
        fprintf(stderr, "memoryd: %s\n", err[0] ? err : "start-up failed");
        return 1;
    }
    a->inst = instance_start(a->pg, a->cfg.listen);
    log_fields(LOG_INFO, "memoryd serving", LOG_F_STR, "listen", a->cfg.listen, LOG_F_INT, "port",
               (int64_t)rpc_server_port(a->srv), LOG_F_STR, "tls",
               a->cfg.tls_cert[0] ? "on" : "off", LOG_F_STR, "redis",
               a->redis ? "configured" : "none", LOG_F_END);

    int sig = 0;
    while (sigwait(signals, &sig) != 0) {
    }
    log_fields(LOG_INFO, "shutting down", LOG_F_STR, "signal", strsignal(sig), LOG_F_INT,
               "grace_s", (int64_t)a->cfg.shutdown_grace_s, LOG_F_END);
    health_shutdown(a->health);
    rpc_server_shutdown(a->srv, a->cfg.shutdown_grace_s * 1000);
    log_msg(LOG_INFO, "memoryd stopped");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "token") == 0) return token_cli_main(argc - 1, argv + 1);
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
