/* config: one table of options drives defaults, env parsing, flag parsing
 * and --help. */
#include "service/core/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/core/log.h"

#ifndef MEMORYD_VERSION
#define MEMORYD_VERSION "0.1.0"
#endif

typedef enum { OPT_STR, OPT_INT, OPT_BOOL } opt_type;

typedef struct {
    const char *flag; /* without the leading "--"; MEMORYD_FLAG_NAME is its variable */
    opt_type type;
    size_t offset; /* into struct config */
    const char *def;
    long min, max; /* OPT_INT bounds */
    int secret;    /* never logged */
    const char *help;
} opt_def;

#define OFF(field) offsetof(config, field)
/* The table's rows: text, a secret (logged as set or not, never shown),
 * an integer within [min, max], or a boolean. */
#define OPT_TEXT(flag, field, def, help)                                                           \
    { flag, OPT_STR, OFF(field), def, 0, 0, 0, help }
#define OPT_SECRET(flag, field, def, help)                                                         \
    { flag, OPT_STR, OFF(field), def, 0, 0, 1, help }
#define OPT_NUMBER(flag, field, def, min, max, help)                                               \
    { flag, OPT_INT, OFF(field), def, min, max, 0, help }
#define OPT_SWITCH(flag, field, def, help)                                                         \
    { flag, OPT_BOOL, OFF(field), def, 0, 0, 0, help }

static const opt_def options[] = {
    OPT_TEXT("listen", listen, "127.0.0.1:50051",
             "address to serve gRPC on (host:port; [::]:port or 0.0.0.0:port for all interfaces)"),
    OPT_TEXT("metrics-listen", metrics_listen, "",
             "address of the Prometheus /metrics HTTP listener (host:port); empty = none"),
    OPT_NUMBER("workers", workers, "0", 0, 1024,
               "worker threads polling the completion queue; 0 = one per core"),
    OPT_NUMBER("task-threads", task_threads, "16", 1, 1024,
               "threads running the handlers that compute or block (EpisodicMemory)"),
    OPT_NUMBER("task-queue-max", task_queue_max, "1024", 1, 1000000,
               "calls that may wait for a task thread; more get RESOURCE_EXHAUSTED"),
    OPT_SECRET(
        "pg-url", pg_url, "",
        "PostgreSQL connection URI, e.g. postgresql://user@127.0.0.1:5432/memoryd (required)"),
    OPT_NUMBER("pg-pool-size", pg_pool_size, "8", 1, 256,
               "PostgreSQL connections of each pool (the event loop's opens them on demand)"),
    OPT_NUMBER("pg-connect-timeout", pg_connect_timeout_s, "5", 1, 300,
               "seconds allowed for one PostgreSQL connection attempt"),
    OPT_NUMBER("pg-queue-max", pg_queue_max, "1024", 0, 1000000,
               "calls that may wait for a busy PostgreSQL pool; more get RESOURCE_EXHAUSTED"),
    OPT_NUMBER("default-deadline-ms", default_deadline_ms, "30000", 10, 3600000,
               "deadline of backend work for a call that sent none"),
    OPT_SECRET("redis-url", redis_url, "",
               "Redis URL redis://host:port[/db]; empty = in-process cache only, no blackboard"),
    OPT_TEXT("qdrant-url", qdrant_url, "",
             "Qdrant REST URL, e.g. http://127.0.0.1:6333; empty = embedded vector index"),
    OPT_SECRET("qdrant-api-key", qdrant_api_key, "",
               "API key sent to Qdrant in the api-key header"),
    OPT_NUMBER("qdrant-timeout-ms", qdrant_timeout_ms, "10000", 100, 600000,
               "longest one Qdrant request may take when the call has no shorter deadline"),
    OPT_TEXT("qdrant-collection-prefix", qdrant_collection_prefix, "memoryd_",
             "prefix of the Qdrant collections memoryd creates (one per tenant and collection), so "
             "deployments can share a Qdrant"),
    OPT_TEXT("embedder-url", embedder_url, "",
             "base URL of an OpenAI-compatible embeddings API (memoryd POSTs to <url>/embeddings), "
             "e.g. http://127.0.0.1:11434/v1; empty = no text queries, vectors only"),
    OPT_TEXT("embedder-model", embedder_model, "",
             "the model asked of --embedder-url, recorded by every collection filled through it"),
    OPT_SECRET("embedder-api-key", embedder_api_key, "",
               "API key sent to the embedder as Authorization: Bearer"),
    OPT_NUMBER("embedder-timeout-ms", embedder_timeout_ms, "10000", 100, 600000,
               "longest one embeddings request may take when the call has no shorter deadline"),
    OPT_NUMBER("embedder-batch", embedder_batch, "64", 1, 2048,
               "texts sent in one embeddings request; more are sent in several"),
    OPT_TEXT("tls-cert", tls_cert, "",
             "PEM certificate chain file; with --tls-key serves TLS instead of plaintext"),
    OPT_TEXT("tls-key", tls_key, "", "PEM private key file for --tls-cert"),
    OPT_TEXT(
        "tls-client-ca", tls_client_ca, "",
        "PEM file of the CAs client certificates must chain to: with it (and --tls-cert) every "
        "connection must present a valid client certificate (mutual TLS), whose identity "
        "each audit record keeps beside the token's principal"),
    OPT_TEXT("tls-client-identity", tls_client_identity, "off",
             "off | sub: with sub, a token is accepted only from a client whose certificate names "
             "the token's sub (a subject alternative name, else the common name): a token copied "
             "to another client is UNAUTHENTICATED"),
    OPT_TEXT("log-level", log_level, "info",
             "debug | info | warn | error; debug also logs every successful call"),
    OPT_NUMBER("max-message-bytes", max_message_bytes, "4194304", 1024, INT_MAX,
               "largest request or response message in bytes"),
    OPT_NUMBER("keepalive-time", keepalive_time_s, "60", 1, 86400,
               "seconds between server keepalive pings on an idle connection"),
    OPT_NUMBER("keepalive-timeout", keepalive_timeout_s, "20", 1, 3600,
               "seconds to wait for a keepalive ping answer before closing the connection"),
    OPT_NUMBER("keepalive-min-ping-interval", keepalive_min_ping_s, "10", 1, 2147483,
               "least seconds between a client's keepalive pings while it has no call open; a "
               "client pinging faster is sent GOAWAY (ENHANCE_YOUR_CALM) at the third such ping"),
    OPT_NUMBER("max-connection-age", max_connection_age_s, "0", 0, 2147483,
               "seconds a client connection lives before memoryd sends GOAWAY, so clients "
               "reconnect and spread over the replicas behind an L4 balancer (gRPC adds ±10% "
               "jitter); 0: connections live on"),
    OPT_NUMBER("max-connection-age-grace", max_connection_age_grace_s, "30", 1, 2147483,
               "seconds the calls in flight on a connection that reached --max-connection-age get "
               "to finish before it is closed"),
    OPT_NUMBER("shutdown-grace", shutdown_grace_s, "10", 0, 3600,
               "seconds the calls accepted before SIGTERM get to finish before they are cancelled"),
    OPT_NUMBER("max-call-memory", max_call_memory_mb, "64", 1, 65536,
               "MiB one call may use for its decoded request and its work; more is "
               "RESOURCE_EXHAUSTED"),
    OPT_NUMBER("stream-buffer-bytes", stream_buffer_bytes, "262144", 1024, 1073741824,
               "bytes of messages queued for one stream whose client reads slowly; past it the "
               "method's overflow rule applies (Audit.Watch ends RESOURCE_EXHAUSTED)"),
    OPT_NUMBER("max-streams", max_streams, "1024", 1, 1000000,
               "streams (Watch, Subscribe, reflection) open at once on this server"),
    OPT_NUMBER("max-streams-per-tenant", max_streams_per_tenant, "256", 1, 1000000,
               "streams one tenant may have open at once"),
    OPT_NUMBER("max-streams-per-principal", max_streams_per_principal, "32", 1, 1000000,
               "streams one principal (token subject) may have open at once"),
    OPT_NUMBER("max-health-watchers", max_health_watchers, "1024", 1, 1000000,
               "Health/Watch streams open at once (Watch needs no token)"),
    OPT_NUMBER("health-interval-ms", health_interval_ms, "1000", 50, 600000,
               "milliseconds between backend health probes"),
    OPT_SWITCH("reflection", reflection, "true",
               "serve gRPC server reflection (v1 and v1alpha) so grpcurl needs no .proto files"),
    OPT_SWITCH("migrate", migrate, "true", "apply PostgreSQL schema migrations at start-up"),
    OPT_TEXT("jwks", jwks, "",
             "JWKS file with the Ed25519 keys that sign capability tokens (required; `memoryd "
             "token keygen` creates one)"),
    OPT_TEXT(
        "signing-key", signing_key, "",
        "private JWK memoryd signs Access.Attenuate tokens with; empty = Attenuate unavailable"),
    OPT_TEXT("token-issuer", token_issuer, "memoryd", "`iss` claim of the tokens memoryd mints"),
    OPT_NUMBER("token-skew", token_skew_s, "60", 0, 3600,
               "seconds of clock difference tolerated on token exp and nbf"),
    OPT_NUMBER("token-cache-size", token_cache_size, "65536", 16, 16777216,
               "verified tokens kept in memory (each until its exp)"),
    OPT_NUMBER("revocation-poll-ms", revocation_poll_ms, "1000", 50, 600000,
               "how often revocations made by other replicas are picked up"),
    OPT_NUMBER("jwks-reload-ms", jwks_reload_ms, "1000", 100, 600000,
               "how often the --jwks file is checked for changes; a key removed from it stops "
               "verifying tokens (cached ones too) within this delay"),
    OPT_TEXT("pii-policy", pii_policy, "reject",
             "what a write holding PII gets without the pii:write scope: reject (INVALID_ARGUMENT "
             "naming the kinds) | redact (stored with [REDACTED:<kind>] markers)"),
    OPT_NUMBER("traverse-max-depth", traverse_max_depth, "10", 1, 10,
               "deepest GlobalMemory.Traverse a caller may ask for (max_depth above it is "
               "INVALID_ARGUMENT)"),
    OPT_NUMBER("router-default-deadline-ms", router_default_deadline_ms, "5000", 1, 600000,
               "the budget of a Router.Query or QueryStream call that has no deadline (a tier "
               "still running when it ends is cancelled and reported DEADLINE_EXCEEDED)"),
    OPT_NUMBER("cache-l1-max-entries", cache_l1_max_entries, "1000", 0, 10000000,
               "entries the in-process cache (L1) keeps; 0 turns L1 off (every Cache lookup goes "
               "to Redis)"),
    OPT_NUMBER("cache-l1-max-bytes", cache_l1_max_bytes, "67108864", 4096, 2147483647,
               "bytes the in-process cache keeps (keys, values and bookkeeping); least recently "
               "used entries go first"),
    OPT_NUMBER("cache-l1-ttl-ms", cache_l1_ttl_ms, "60000", 100, 3600000,
               "longest an entry stays in the in-process cache (never past its own TTL)"),
    OPT_TEXT("text-language", text_language, "english",
             "the language texts are ranked in: episodic texts by its Snowball stemmer "
             "(libstemmer: english, german, french, spanish, ...), which makes one term of a "
             "word's forms (english also drops stop words); ranked Entries.Search and "
             "QueryEntities by PostgreSQL's text search configuration of that name ('simple' "
             "when it has none), entries and entities keeping the language they were written "
             "in; every replica must use the same"),
    OPT_NUMBER("episodic-index-max-mb", episodic_index_max_mb, "1024", 1, 1048576,
               "MiB the embedded vector index may hold in memory across collections; idle "
               "collections leave memory past it, and one that alone needs more fails its reads "
               "RESOURCE_EXHAUSTED"),
    OPT_NUMBER("blackboard-log-entries", blackboard_log_entries, "1000", 1, 1000000,
               "changes each board keeps in Redis so a Blackboard.Subscribe can resume from "
               "after_version instead of downloading a SNAPSHOT"),
    OPT_NUMBER("blackboard-log-bytes", blackboard_log_bytes, "4194304", 1024, 1073741824,
               "bytes each board's change log may hold (the oldest changes go first)"),
    OPT_NUMBER("blackboard-redis-grace-ms", blackboard_redis_grace_ms, "5000", 0, 600000,
               "how long open Blackboard.Subscribe streams wait for a lost Redis to return (then "
               "they catch up); past it they end UNAVAILABLE"),
    OPT_NUMBER("session-grace-ms", session_grace_ms, "3600000", 0, 604800000,
               "how long a session's records stay readable after it expired or ended (then they "
               "go; a durable session's PostgreSQL copy is closed, its PII redacted or dropped)"),
    OPT_NUMBER("session-sweep-ms", session_sweep_ms, "60000", 0, 86400000,
               "how often durable sessions past their grace are closed in PostgreSQL (their PII "
               "redacted or dropped per --pii-policy); 0: this replica never closes them"),
    OPT_NUMBER("quota-boards-per-tenant", quota_boards_per_tenant, "10000", 0, INT_MAX,
               "blackboards one tenant may hold in Redis at once (a board is held until it "
               "expires); more are RESOURCE_EXHAUSTED; 0: no limit"),
    OPT_NUMBER("quota-boards-per-principal", quota_boards_per_principal, "1000", 0, INT_MAX,
               "blackboards one principal (token subject) may have created and not yet expired; 0: "
               "no limit"),
    OPT_NUMBER("quota-board-mib-per-tenant", quota_board_mib_per_tenant, "1024", 0, 1048576,
               "MiB one tenant's blackboards may hold in Redis: items and the change logs kept "
               "for resuming streams; 0: no limit"),
    OPT_NUMBER(
        "quota-board-mib-per-principal", quota_board_mib_per_principal, "256", 0, 1048576,
        "MiB of blackboard items one principal owns and of change-log entries about them; 0: "
        "no limit"),
    OPT_NUMBER("quota-sessions-per-tenant", quota_sessions_per_tenant, "10000", 0, INT_MAX,
               "sessions one tenant may hold in Redis at once (until their purge time); 0: no "
               "limit"),
    OPT_NUMBER("quota-sessions-per-principal", quota_sessions_per_principal, "1000", 0, INT_MAX,
               "sessions one principal may hold in Redis at once (until their purge time); 0: no "
               "limit"),
    OPT_NUMBER("quota-session-mib-per-tenant", quota_session_mib_per_tenant, "1024", 0, 1048576,
               "MiB of session records (keys, headers, values) one tenant may hold in Redis; 0: "
               "no limit"),
    OPT_NUMBER("quota-session-mib-per-principal", quota_session_mib_per_principal, "256", 0,
               1048576, "MiB of records in the sessions one principal owns; 0: no limit"),
    OPT_TEXT("retention", retention, "730d",
             "how long long-term records (GlobalMemory, EpisodicMemory, Entries, WorkingMemory, "
             "closed durable sessions) are kept after "
             "their last change before the retention sweeper erases them (90s, 12h, 30d; off: "
             "for ever)"),
    OPT_TEXT("retention-pii", retention_pii, "180d",
             "how long records carrying PII (written with pii:write) are kept after their last "
             "change (off: as every other record)"),
    OPT_TEXT("retention-policy", retention_policy, "",
             "a JSON file of further retention rules by tier, label and PII kind (README: "
             "Privacy); empty: none"),
    OPT_NUMBER("retention-sweep-ms", retention_sweep_ms, "3600000", 0, 86400000,
               "how often one replica at a time (a PostgreSQL advisory lock) erases what is past "
               "retention; 0: this replica never sweeps"),
    OPT_NUMBER("retention-batch", retention_batch, "1000", 1, 1000000,
               "records a retention sweep erases per statement (small batches keep other calls "
               "moving)"),
    OPT_TEXT("audit-retention", audit_retention, "90d",
             "how long audit rows are kept: every sweep drops whole the days' partitions older "
             "than this (90s, 12h, 30d; off: kept for ever)"),
    OPT_NUMBER("audit-max-mib", audit_max_mib, "0", 0, 1048576,
               "the audit trail's size guard in MiB: past it, sweeps drop the oldest past days "
               "first (0: none)"),
    OPT_NUMBER("export-threads", export_threads, "4", 1, 256,
               "threads that run Privacy.Export streams, apart from the task pool (a slow "
               "reader holds one of them, never a shared thread)"),
    OPT_NUMBER("export-max-per-principal", export_max_per_principal, "2", 1, 1000,
               "Privacy.Export streams one principal may have open at once; more are "
               "RESOURCE_EXHAUSTED"),
    OPT_SWITCH("cache-entities", cache_entities, "false",
               "GlobalMemory.GetEntity answers from the in-process cache (single-flight loads, "
               "invalidated on every replica through Redis pub/sub)"),
    OPT_SWITCH(
        "open-health", open_health, "true",
        "health checks and reflection answer without a token (false: any valid token needed)"),
};

#define N_OPTIONS (sizeof options / sizeof options[0])

/* An option's environment variable: MEMORYD_ and the flag in upper case
 * with '_' for '-' (--pg-url: MEMORYD_PG_URL). */
typedef struct {
    char s[64];
} env_var;

static env_var env_of(const opt_def *o) {
    env_var v;
    size_t n = (size_t)snprintf(v.s, sizeof v.s, "MEMORYD_%s", o->flag);
    for (size_t i = 8; i < n && i < sizeof v.s; i++)
        v.s[i] = v.s[i] == '-' ? '_' : (char)toupper((unsigned char)v.s[i]);
    return v;
}

static char **str_field(config *c, const opt_def *o) { return (char **)((char *)c + o->offset); }
static int *int_field(config *c, const opt_def *o) { return (int *)((char *)c + o->offset); }

static int parse_bool(const char *s, int *out) {
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0) return *out = 0, 0;
    }
    return -1;
}

/* Stores value into the option's field; on error writes why into err. */
static int set_value(config *c, const opt_def *o, const char *value, const char *source, char *err,
                     size_t errlen) {
    switch (o->type) {
    case OPT_STR: {
        char *copy = strdup(value);
        if (!copy) return snprintf(err, errlen, "out of memory"), -1;
        free(*str_field(c, o));
        *str_field(c, o) = copy;
        return 0;
    }
    case OPT_INT: {
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end != '\0' || v < o->min || v > o->max) {
            snprintf(err, errlen, "%s: --%s (%s) must be an integer from %ld to %ld, got \"%s\"",
                     source, o->flag, env_of(o).s, o->min, o->max, value);
            return -1;
        }
        *int_field(c, o) = (int)v;
        return 0;
    }
    case OPT_BOOL:
        if (parse_bool(value, int_field(c, o)) != 0) {
            snprintf(err, errlen, "%s: --%s (%s) must be true or false, got \"%s\"", source,
                     o->flag, env_of(o).s, value);
            return -1;
        }
        return 0;
    }
    return -1;
}

void config_free(config *c) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (options[i].type != OPT_STR) continue;
        free(*str_field(c, &options[i]));
        *str_field(c, &options[i]) = NULL;
    }
}

void config_print_help(FILE *out, const char *argv0) {
    fprintf(out,
            "memoryd %s - gRPC memory service for AI agents\n\n"
            "usage: %s [--flag=value ...]\n"
            "       %s token <command> ...     capability tokens and signing keys\n"
            "       %s receipt verify ...      check a Forget receipt offline\n\n"
            "Every flag can also be set by its environment variable; flags win.\n\n",
            MEMORYD_VERSION, argv0, argv0, argv0);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *o = &options[i];
        fprintf(out, "  --%-20s %-28s default: %s\n      %s\n", o->flag, env_of(o).s,
                *o->def ? o->def : "(empty)", o->help);
    }
    fprintf(out, "\n  --help                   this text\n  --version                "
                 "print the version\n");
}

static const opt_def *find_flag(const char *name, size_t len) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        if (strlen(options[i].flag) == len && strncmp(options[i].flag, name, len) == 0)
            return &options[i];
    }
    return NULL;
}

static int parse_argv(config *c, int argc, char **argv, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i]; /* --help and --version: config_load */
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen,
                     "unexpected argument \"%s\" (flags look like --name=value; "
                     "see --help)",
                     arg);
            return -1;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *o = find_flag(name, len);
        int negated = 0;
        if (!o && len > 3 && strncmp(name, "no-", 3) == 0 && !eq) {
            o = find_flag(name + 3, len - 3);
            negated = o && o->type == OPT_BOOL;
            if (!negated) o = NULL;
        }
        if (!o) {
            snprintf(err, errlen, "unknown flag \"--%.*s\" (see --help)", (int)len, name);
            return -1;
        }
        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (o->type == OPT_BOOL) {
            value = negated ? "false" : "true";
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            snprintf(err, errlen, "flag --%s needs a value", o->flag);
            return -1;
        }
        if (set_value(c, o, value, "command line", err, errlen) != 0) return -1;
    }
    return 0;
}

/* A backend URL flag's value: empty (no backend) or http(s)://. */
static int http_url_or_empty(const char *url) {
    return !url[0] || strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
}

static int validate(const config *c, char *err, size_t errlen) {
    log_level lvl;
    if (log_level_parse(c->log_level, &lvl) != 0) {
        snprintf(err, errlen,
                 "--log-level (MEMORYD_LOG_LEVEL) must be debug, info, warn or "
                 "error, got \"%s\"",
                 c->log_level);
        return -1;
    }
    if (c->listen[0] == '\0' || !strchr(c->listen, ':')) {
        snprintf(err, errlen, "--listen (MEMORYD_LISTEN) must be host:port, got \"%s\"", c->listen);
        return -1;
    }
    if (c->pg_url[0] == '\0') {
        snprintf(err, errlen,
                 "no PostgreSQL configured: set --pg-url or MEMORYD_PG_URL "
                 "(make run starts a private one)");
        return -1;
    }
    if (strcmp(c->pii_policy, "reject") != 0 && strcmp(c->pii_policy, "redact") != 0) {
        snprintf(err, errlen,
                 "--pii-policy (MEMORYD_PII_POLICY) must be reject or redact, got "
                 "\"%s\"",
                 c->pii_policy);
        return -1;
    }
    if (!http_url_or_empty(c->qdrant_url)) {
        snprintf(err, errlen,
                 "--qdrant-url (MEMORYD_QDRANT_URL) must start with http:// or "
                 "https:// (Qdrant's REST port, 6333 by default)");
        return -1;
    }
    if (!http_url_or_empty(c->embedder_url)) {
        snprintf(err, errlen,
                 "--embedder-url (MEMORYD_EMBEDDER_URL) must start with http:// or https:// "
                 "(the API's base, e.g. http://127.0.0.1:11434/v1)");
        return -1;
    }
    if (c->embedder_url[0] && !c->embedder_model[0]) {
        snprintf(err, errlen,
                 "--embedder-url is set but --embedder-model (MEMORYD_EMBEDDER_MODEL) is not: "
                 "name the model to ask for");
        return -1;
    }
    if (c->qdrant_collection_prefix[0] &&
        strspn(c->qdrant_collection_prefix,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               "0123456789_-") != strlen(c->qdrant_collection_prefix)) {
        snprintf(err, errlen,
                 "--qdrant-collection-prefix (MEMORYD_QDRANT_COLLECTION_PREFIX) may "
                 "hold only A-Z, a-z, 0-9, '_' and '-'");
        return -1;
    }
    if (c->jwks[0] == '\0') {
        snprintf(err, errlen,
                 "no token keys configured: set --jwks or MEMORYD_JWKS to a JWKS "
                 "file (`memoryd token keygen` creates one; make run does it for you)");
        return -1;
    }
    if ((c->tls_cert[0] == '\0') != (c->tls_key[0] == '\0')) {
        snprintf(err, errlen,
                 "--tls-cert and --tls-key (MEMORYD_TLS_CERT, MEMORYD_TLS_KEY) "
                 "must be given together");
        return -1;
    }
    if (c->tls_client_ca[0] && !c->tls_cert[0]) {
        snprintf(err, errlen,
                 "--tls-client-ca (MEMORYD_TLS_CLIENT_CA) needs --tls-cert and --tls-key: client "
                 "certificates are a TLS feature");
        return -1;
    }
    if (strcmp(c->tls_client_identity, "off") != 0 && strcmp(c->tls_client_identity, "sub") != 0) {
        snprintf(err, errlen, "--tls-client-identity must be off or sub, not \"%s\"",
                 c->tls_client_identity);
        return -1;
    }
    if (strcmp(c->tls_client_identity, "sub") == 0 && !c->tls_client_ca[0]) {
        snprintf(err, errlen,
                 "--tls-client-identity=sub needs --tls-client-ca: without client certificates "
                 "there is nothing to match the token against");
        return -1;
    }
    return 0;
}

int config_load(config *c, int argc, char **argv, FILE *out, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    /* --help and --version work even when the environment holds bad values. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            config_print_help(out, argv[0]);
            return CONFIG_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0) {
            fprintf(out, "memoryd %s\n", MEMORYD_VERSION);
            return CONFIG_EXIT_OK;
        }
    }
    int rc = 0;
    for (size_t i = 0; i < N_OPTIONS && rc == 0; i++)
        rc = set_value(c, &options[i], options[i].def, "default", err, errlen);
    for (size_t i = 0; i < N_OPTIONS && rc == 0; i++) {
        const char *v = getenv(env_of(&options[i]).s);
        if (v) rc = set_value(c, &options[i], v, "environment", err, errlen);
    }
    if (rc == 0) rc = parse_argv(c, argc, argv, err, errlen);
    if (rc == 0) rc = validate(c, err, errlen);
    if (rc != 0) config_free(c);
    return rc;
}

void config_log(const config *c) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *o = &options[i];
        if (o->type == OPT_STR) {
            const char *v = *(char *const *)((const char *)c + o->offset);
            /* URLs may embed passwords: say only whether a secret is set. */
            const char *shown = o->secret ? (*v ? "(set)" : "(empty)") : v;
            log_fields(LOG_DEBUG, "config", LOG_F_STR, "flag", o->flag, LOG_F_STR, "value", shown,
                       LOG_F_END);
        } else {
            int v = *(const int *)((const char *)c + o->offset);
            log_fields(LOG_DEBUG, "config", LOG_F_STR, "flag", o->flag, LOG_F_INT, "value",
                       (int64_t)v, LOG_F_END);
        }
    }
}
