/* config: memoryd's settings from defaults, MEMORYD_* environment variables
 * and command-line flags, in that order of precedence (flags win).
 *
 * Every option is declared once in a table in config.c; --help is printed
 * from that table so the documentation cannot drift from the parser. */
#ifndef MEMORYD_CORE_CONFIG_H
#define MEMORYD_CORE_CONFIG_H

#include <stdio.h>

typedef struct config {
    char *listen;                      /* host:port for the gRPC listener */
    char *metrics_listen;              /* host:port for /metrics; "" = off */
    int workers;                       /* completion-queue threads; 0 = number of cores */
    int task_threads;                  /* threads for blocking handlers (rpc.h) */
    int task_queue_max;                /* calls waiting for one */
    char *pg_url;                      /* libpq connection URI (required) */
    int pg_pool_size;                  /* libpq connections kept open */
    int pg_connect_timeout_s;          /* per connection attempt */
    int pg_queue_max;                  /* calls waiting for a PostgreSQL connection */
    int default_deadline_ms;           /* backend work of a call without a deadline */
    char *redis_url;                   /* redis://host:port[/db]; empty = L1 cache only */
    char *qdrant_url;                  /* http(s)://host:port; empty = embedded index */
    char *qdrant_api_key;              /* sent as the api-key header */
    int qdrant_timeout_ms;             /* one Qdrant request at most (calls without deadline) */
    char *qdrant_collection_prefix;    /* of the Qdrant collections memoryd creates */
    char *embedder_url;                /* OpenAI-compatible API base; empty = no text queries */
    char *embedder_model;              /* the model asked for (required with a URL) */
    char *embedder_api_key;            /* sent as Authorization: Bearer */
    int embedder_timeout_ms;           /* one embeddings request at most */
    int embedder_batch;                /* texts a request */
    char *tls_cert;                    /* PEM certificate chain; empty = plaintext */
    char *tls_key;                     /* PEM private key for tls_cert */
    char *tls_client_ca;               /* CAs of required client certificates; empty = none */
    char *tls_client_identity;         /* off | sub: token sub must match the certificate */
    char *log_level;                   /* debug | info | warn | error */
    int max_message_bytes;             /* largest request/response accepted */
    int keepalive_time_s;              /* server pings an idle connection this often */
    int keepalive_timeout_s;           /* and drops it when the ping is not answered */
    int keepalive_min_ping_s;          /* clients pinging faster get GOAWAY */
    int max_connection_age_s;          /* GOAWAY after this long; 0 = never */
    int max_connection_age_grace_s;    /* then calls in flight get this long */
    int shutdown_grace_s;              /* in-flight calls get this long on SIGTERM */
    int max_call_memory_mb;            /* one call's decoded request and working memory */
    int stream_buffer_bytes;           /* messages queued for one slow stream reader */
    int max_streams;                   /* open streams, server-wide */
    int max_streams_per_tenant;        /* ... of one tenant */
    int max_streams_per_principal;     /* ... of one principal */
    int max_health_watchers;           /* open Health/Watch streams (no token needed) */
    int health_interval_ms;            /* how often backends are probed */
    int reflection;                    /* serve grpc.reflection v1 + v1alpha */
    int migrate;                       /* apply schema migrations at start-up */
    char *jwks;                        /* token verification keys (JWKS file) */
    char *signing_key;                 /* private JWK for minted tokens; empty = none */
    char *token_issuer;                /* iss of minted tokens */
    int token_skew_s;                  /* clock skew allowed on exp/nbf */
    int token_cache_size;              /* verified tokens cached */
    int revocation_poll_ms;            /* revocation set refresh period */
    int jwks_reload_ms;                /* how often the JWKS file is checked for changes */
    int open_health;                   /* health + reflection without a token */
    char *pii_policy;                  /* reject | redact */
    int traverse_max_depth;            /* GlobalMemory.Traverse max_depth ceiling (1..10) */
    int router_default_deadline_ms;    /* Router budget of a call without a deadline */
    int cache_l1_max_entries;          /* in-process cache entries; 0 = no L1 */
    int cache_l1_max_bytes;            /* in-process cache byte bound */
    int cache_l1_ttl_ms;               /* longest an L1 entry lives */
    int cache_entities;                /* GetEntity through the cache-aside L1 */
    int episodic_index_max_mb;         /* the embedded vector index's memory budget */
    char *text_language;               /* lexical ranking's stemmer (lex_text.h) */
    int blackboard_log_entries;        /* a board's change log: entries ... */
    int blackboard_log_bytes;          /* ... and bytes kept for resuming streams */
    int blackboard_redis_grace_ms;     /* how long Subscribe streams wait for Redis */
    int session_grace_ms;              /* a session's records outlive it this long */
    int session_sweep_ms;              /* durable sessions past their grace are closed this often */
    int quota_boards_per_tenant;       /* boards in Redis of one tenant ... (0: no limit) */
    int quota_boards_per_principal;    /* ... created by one principal */
    int quota_board_mib_per_tenant;    /* their items' and change logs' MiB of one tenant ... */
    int quota_board_mib_per_principal; /* ... of one principal's items and changes */
    int quota_sessions_per_tenant;     /* sessions in Redis of one tenant ... */
    int quota_sessions_per_principal;  /* ... owned by one principal */
    int quota_session_mib_per_tenant;  /* their values' MiB of one tenant ... */
    int quota_session_mib_per_principal; /* ... in one principal's sessions */
    char *retention;                     /* long-term records' retention ("730d", "off") */
    char *retention_pii;                 /* records with PII ("180d", "off") */
    char *retention_policy;              /* a policy file of further rules; empty = none */
    int retention_sweep_ms;              /* sweep period; 0 = this replica never sweeps */
    int retention_batch;                 /* records erased per statement by a sweep */
    char *audit_retention;               /* audit rows' retention ("90d", "off") */
    int audit_max_mib;                   /* the audit trail's size guard; 0: none */
    int export_threads;                  /* Privacy.Export's own threads */
    int export_max_per_principal;        /* open exports per principal */
} config;

/* Outcome of config_load besides 0 (= run the service). */
#define CONFIG_EXIT_OK 1 /* --help or --version was printed: exit 0 */

/* Fills *c from defaults, the environment and argv. Strings in *c are
 * malloc'd and owned by *c (release with config_free). On a bad value
 * returns -1 with a message in err naming the flag, its env variable and
 * what was wrong; *c is then freed already. out receives --help text. */
int config_load(config *c, int argc, char **argv, FILE *out, char *err, size_t errlen);

/* Releases the strings of *c; safe on a zeroed or already freed config. */
void config_free(config *c);

/* Prints the option table (flags, env variables, defaults, help). */
void config_print_help(FILE *out, const char *argv0);

/* Writes the effective settings as JSON-lines log fields (secrets masked). */
void config_log(const config *c);

#endif
