/* config: one table of options drives defaults, env parsing, flag parsing
 * and --help. */
#include "service/core/config.h"

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
    const char *flag; /* without the leading "--" */
    const char *env;
    opt_type type;
    size_t offset; /* into struct config */
    const char *def;
    long min, max; /* OPT_INT bounds */
    int secret;    /* never logged */
    const char *help;
} opt_def;

#define OFF(field) offsetof(config, field)

static const opt_def options[] = {
    {"listen", "MEMORYD_LISTEN", OPT_STR, OFF(listen), "127.0.0.1:50051", 0, 0, 0,
     "address to serve gRPC on (host:port; [::]:port or 0.0.0.0:port for all interfaces)"},
    {"workers", "MEMORYD_WORKERS", OPT_INT, OFF(workers), "0", 0, 1024, 0,
     "worker threads polling the completion queue; 0 = one per core"},
    {"pg-url", "MEMORYD_PG_URL", OPT_STR, OFF(pg_url), "", 0, 0, 1,
     "PostgreSQL connection URI, e.g. postgresql://user@127.0.0.1:5432/memoryd (required)"},
    {"pg-pool-size", "MEMORYD_PG_POOL_SIZE", OPT_INT, OFF(pg_pool_size), "8", 1, 256, 0,
     "PostgreSQL connections kept open"},
    {"pg-connect-timeout", "MEMORYD_PG_CONNECT_TIMEOUT", OPT_INT, OFF(pg_connect_timeout_s), "5", 1,
     300, 0, "seconds allowed for one PostgreSQL connection attempt"},
    {"redis-url", "MEMORYD_REDIS_URL", OPT_STR, OFF(redis_url), "", 0, 0, 1,
     "Redis URL redis://host:port[/db]; empty = in-process cache only, no blackboard"},
    {"qdrant-url", "MEMORYD_QDRANT_URL", OPT_STR, OFF(qdrant_url), "", 0, 0, 0,
     "Qdrant REST URL, e.g. http://127.0.0.1:6333; empty = embedded vector index"},
    {"qdrant-api-key", "MEMORYD_QDRANT_API_KEY", OPT_STR, OFF(qdrant_api_key), "", 0, 0, 1,
     "API key sent to Qdrant in the api-key header"},
    {"qdrant-timeout-ms", "MEMORYD_QDRANT_TIMEOUT_MS", OPT_INT, OFF(qdrant_timeout_ms), "10000",
     100, 600000, 0, "longest one Qdrant request may take when the call has no shorter deadline"},
    {"qdrant-collection-prefix", "MEMORYD_QDRANT_COLLECTION_PREFIX", OPT_STR,
     OFF(qdrant_collection_prefix), "memoryd_", 0, 0, 0,
     "prefix of the Qdrant collections memoryd creates (one per tenant and collection), so "
     "deployments can share a Qdrant"},
    {"tls-cert", "MEMORYD_TLS_CERT", OPT_STR, OFF(tls_cert), "", 0, 0, 0,
     "PEM certificate chain file; with --tls-key serves TLS instead of plaintext"},
    {"tls-key", "MEMORYD_TLS_KEY", OPT_STR, OFF(tls_key), "", 0, 0, 0,
     "PEM private key file for --tls-cert"},
    {"log-level", "MEMORYD_LOG_LEVEL", OPT_STR, OFF(log_level), "info", 0, 0, 0,
     "debug | info | warn | error; debug also logs every successful call"},
    {"max-message-bytes", "MEMORYD_MAX_MESSAGE_BYTES", OPT_INT, OFF(max_message_bytes), "4194304",
     1024, INT_MAX, 0, "largest request or response message in bytes"},
    {"keepalive-time", "MEMORYD_KEEPALIVE_TIME", OPT_INT, OFF(keepalive_time_s), "60", 1, 86400, 0,
     "seconds between server keepalive pings on an idle connection"},
    {"keepalive-timeout", "MEMORYD_KEEPALIVE_TIMEOUT", OPT_INT, OFF(keepalive_timeout_s), "20", 1,
     3600, 0, "seconds to wait for a keepalive ping answer before closing the connection"},
    {"shutdown-grace", "MEMORYD_SHUTDOWN_GRACE", OPT_INT, OFF(shutdown_grace_s), "10", 0, 3600, 0,
     "seconds in-flight calls get to finish on SIGTERM before streams are cancelled"},
    {"health-interval-ms", "MEMORYD_HEALTH_INTERVAL_MS", OPT_INT, OFF(health_interval_ms), "1000",
     50, 600000, 0, "milliseconds between backend health probes"},
    {"reflection", "MEMORYD_REFLECTION", OPT_BOOL, OFF(reflection), "true", 0, 0, 0,
     "serve gRPC server reflection (v1 and v1alpha) so grpcurl needs no .proto files"},
    {"migrate", "MEMORYD_MIGRATE", OPT_BOOL, OFF(migrate), "true", 0, 0, 0,
     "apply PostgreSQL schema migrations at start-up"},
    {"jwks", "MEMORYD_JWKS", OPT_STR, OFF(jwks), "", 0, 0, 0,
     "JWKS file with the Ed25519 keys that sign capability tokens (required; "
     "`memoryd token keygen` creates one)"},
    {"signing-key", "MEMORYD_SIGNING_KEY", OPT_STR, OFF(signing_key), "", 0, 0, 0,
     "private JWK memoryd signs Access.Attenuate tokens with; empty = Attenuate unavailable"},
    {"token-issuer", "MEMORYD_TOKEN_ISSUER", OPT_STR, OFF(token_issuer), "memoryd", 0, 0, 0,
     "`iss` claim of the tokens memoryd mints"},
    {"token-skew", "MEMORYD_TOKEN_SKEW", OPT_INT, OFF(token_skew_s), "60", 0, 3600, 0,
     "seconds of clock difference tolerated on token exp and nbf"},
    {"token-cache-size", "MEMORYD_TOKEN_CACHE_SIZE", OPT_INT, OFF(token_cache_size), "65536", 16,
     16777216, 0, "verified tokens kept in memory (each until its exp)"},
    {"revocation-poll-ms", "MEMORYD_REVOCATION_POLL_MS", OPT_INT, OFF(revocation_poll_ms), "1000",
     50, 600000, 0, "how often revocations made by other replicas are picked up"},
    {"pii-policy", "MEMORYD_PII_POLICY", OPT_STR, OFF(pii_policy), "reject", 0, 0, 0,
     "what a write holding PII gets without the pii:write scope: reject (INVALID_ARGUMENT "
     "naming the kinds) | redact (stored with [REDACTED:<kind>] markers)"},
    {"traverse-max-depth", "MEMORYD_TRAVERSE_MAX_DEPTH", OPT_INT, OFF(traverse_max_depth), "10", 1,
     10, 0,
     "deepest GlobalMemory.Traverse a caller may ask for (max_depth above it is "
     "INVALID_ARGUMENT)"},
    {"cache-l1-max-entries", "MEMORYD_CACHE_L1_MAX_ENTRIES", OPT_INT, OFF(cache_l1_max_entries),
     "1000", 0, 10000000, 0,
     "entries the in-process cache (L1) keeps; 0 turns L1 off (every "
     "Cache lookup goes to Redis)"},
    {"cache-l1-max-bytes", "MEMORYD_CACHE_L1_MAX_BYTES", OPT_INT, OFF(cache_l1_max_bytes),
     "67108864", 4096, 2147483647, 0,
     "bytes the in-process cache keeps (keys, values and "
     "bookkeeping); least recently used entries go first"},
    {"cache-l1-ttl-ms", "MEMORYD_CACHE_L1_TTL_MS", OPT_INT, OFF(cache_l1_ttl_ms), "60000", 100,
     3600000, 0, "longest an entry stays in the in-process cache (never past its own TTL)"},
    {"cache-entities", "MEMORYD_CACHE_ENTITIES", OPT_BOOL, OFF(cache_entities), "false", 0, 0, 0,
     "GlobalMemory.GetEntity answers from the in-process cache (single-flight loads, "
     "invalidated on every replica through Redis pub/sub)"},
    {"open-health", "MEMORYD_OPEN_HEALTH", OPT_BOOL, OFF(open_health), "true", 0, 0, 0,
     "health checks and reflection answer without a token (false: any valid token needed)"},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

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
                     source, o->flag, o->env, o->min, o->max, value);
            return -1;
        }
        *int_field(c, o) = (int)v;
        return 0;
    }
    case OPT_BOOL:
        if (parse_bool(value, int_field(c, o)) != 0) {
            snprintf(err, errlen, "%s: --%s (%s) must be true or false, got \"%s\"", source,
                     o->flag, o->env, value);
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
            "usage: %s [--flag=value ...]\n\n"
            "Every flag can also be set by its environment variable; flags win.\n\n",
            MEMORYD_VERSION, argv0);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_def *o = &options[i];
        fprintf(out, "  --%-20s %-28s default: %s\n      %s\n", o->flag, o->env,
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

static int parse_argv(config *c, int argc, char **argv, FILE *out, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            config_print_help(out, argv[0]);
            return CONFIG_EXIT_OK;
        }
        if (strcmp(arg, "--version") == 0) {
            fprintf(out, "memoryd %s\n", MEMORYD_VERSION);
            return CONFIG_EXIT_OK;
        }
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
    if (c->qdrant_url[0] && strncmp(c->qdrant_url, "http://", 7) != 0 &&
        strncmp(c->qdrant_url, "https://", 8) != 0) {
        snprintf(err, errlen,
                 "--qdrant-url (MEMORYD_QDRANT_URL) must start with http:// or "
                 "https:// (Qdrant's REST port, 6333 by default)");
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
        const char *v = getenv(options[i].env);
        if (v) rc = set_value(c, &options[i], v, "environment", err, errlen);
    }
    if (rc == 0) rc = parse_argv(c, argc, argv, out, err, errlen);
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
