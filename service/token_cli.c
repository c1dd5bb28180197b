/* token_cli: key generation, minting and inspection; see token_cli.h.
 * Argument parsing and file I/O live here; claim building and signing are
 * in service/auth (jwt_claims_render, jwt_sign). */
#include "service/token_cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "service/auth/jwk_private.h"
#include "service/auth/jwks.h"
#include "service/auth/jwt.h"
#include "service/core/b64url.h"
#include "service/core/text.h"
#include "service/core/uuid.h"

#define MAX_NS 64

static const char usage[] =
    "usage: memoryd token <command> [flags]\n"
    "\n"
    "commands:\n"
    "  keygen --kid KID --private FILE --jwks FILE [--force]\n"
    "      new Ed25519 key: the private JWK goes to FILE (mode 0600; refuses to\n"
    "      overwrite without --force), its public key is added to the JWKS file\n"
    "      (created if absent; other keys are kept, so this also rotates keys).\n"
    "  mint --key FILE --sub SUB --tenant TENANT --scope \"S1 S2 ...\"\n"
    "       [--ns GLOB]... [--clr LABEL] [--lvl LABEL] [--ttl DUR] [--iss ISS]\n"
    "       [--jti ID] [--nbf-in DUR]\n"
    "      prints a signed token. LABEL: PUBLIC | INTERNAL | CONFIDENTIAL | SECRET\n"
    "      (lvl defaults to PUBLIC, clr to lvl; lvl <= clr). DUR: 90s, 30m, 1h, 7d\n"
    "      (ttl defaults to 1h). iss defaults to memoryd, jti to a random UUID.\n"
    "  inspect TOKEN [--jwks FILE]\n"
    "      prints the header and claims; with --jwks also verifies the token and\n"
    "      exits 1 with the reason when it does not verify.\n"
    "\n"
    "example:\n"
    "  memoryd token keygen --kid k1 --private memoryd.jwk --jwks jwks.json\n"
    "  memoryd token mint --key memoryd.jwk --sub agent-1 --tenant acme \\\n"
    "      --scope \"entries:read entries:write\" --ns 'agent-1:*:*' --ttl 1h\n";

static int fail(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "memoryd token: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 2;
}

/* Writes data to path via a temporary file and rename, with mode. */
static int write_file(const char *path, const char *data, mode_t mode, int exclusive) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0) return -1;
    size_t n = strlen(data);
    int ok = write(fd, data, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && fsync(fd) == 0;
    close(fd);
    if (ok && exclusive) ok = link(tmp, path) == 0; /* fails if path exists */
    else if (ok) ok = rename(tmp, path) == 0;
    if (exclusive || !ok) unlink(tmp);
    return ok ? 0 : -1;
}

static int parse_label(const char *s, jwt_label *out) {
    for (int l = JWT_LABEL_PUBLIC; l <= JWT_LABEL_SECRET; l++)
        if (strcasecmp(s, jwt_label_name(l)) == 0) {
            *out = (jwt_label)l;
            return 0;
        }
    return -1;
}

/* Value of flag argv[*i] ("--x v" or "--x=v"); NULL when it has none. */
static const char *flag_value(int argc, char **argv, int *i, const char *name) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static int keygen(int argc, char **argv) {
    const char *kid = NULL, *priv_path = NULL, *jwks_path = NULL, *v;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if ((v = flag_value(argc, argv, &i, "--kid"))) kid = v;
        else if ((v = flag_value(argc, argv, &i, "--private"))) priv_path = v;
        else if ((v = flag_value(argc, argv, &i, "--jwks"))) jwks_path = v;
        else if (strcmp(argv[i], "--force") == 0) force = 1;
        else return fail("keygen: unknown argument %s%s", argv[i], "");
    }
    if (!kid || !kid[0] || !priv_path || !jwks_path)
        return fail("keygen needs --kid, --private and --jwks%s%s", "", "");
    if (!force && access(priv_path, F_OK) == 0)
        return fail("%s exists; pass --force to replace it%s", priv_path, "");

    json_t *doc = NULL;
    size_t len = 0;
    char *existing = text_read_file(jwks_path, &len);
    if (existing) {
        json_error_t jerr;
        doc = json_loadb(existing, len, 0, &jerr);
        free(existing);
        if (!json_is_array(json_object_get(doc, "keys"))) {
            json_decref(doc);
            return fail("%s is not a JWKS document (no \"keys\" array)%s", jwks_path, "");
        }
        json_t *k;
        size_t idx;
        json_array_foreach(json_object_get(doc, "keys"), idx, k) {
            const char *other = json_string_value(json_object_get(k, "kid"));
            if (other && strcmp(other, kid) == 0) {
                json_decref(doc);
                return fail("%s already has a key with kid %s", jwks_path, kid);
            }
        }
    } else if (errno != ENOENT) {
        return fail("cannot read %s: %s", jwks_path, strerror(errno));
    } else {
        doc = json_pack("{s:[]}", "keys");
    }
    EVP_PKEY *key = NULL;
    char *pub = NULL, *priv = NULL, *out = NULL;
    int rc = 2;
    json_error_t jerr;
    json_t *pubj = NULL;
    if (jwks_generate_ed25519(&key) != 0 || jwks_render_public(key, kid, &pub) != 0 ||
        jwk_private_render(key, kid, &priv) != 0 || !(pubj = json_loads(pub, 0, &jerr)) ||
        json_array_append_new(json_object_get(doc, "keys"), pubj) != 0) {
        fail("cannot generate an Ed25519 key%s%s", "", "");
        goto out;
    }
    out = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (unlink(priv_path) != 0 && errno != ENOENT) {
        fail("cannot replace %s: %s", priv_path, strerror(errno));
        goto out;
    }
    if (write_file(priv_path, priv, 0600, 1) != 0) {
        fail("cannot write %s: %s", priv_path, strerror(errno));
        goto out;
    }
    if (!out || write_file(jwks_path, out, 0644, 0) != 0) {
        fail("cannot write %s: %s", jwks_path, strerror(errno));
        goto out;
    }
    printf("wrote private key %s (kid %s) and added its public key to %s\n", priv_path, kid,
           jwks_path);
    rc = 0;
out:
    if (priv) {
        memset(priv, 0, strlen(priv));
        free(priv);
    }
    free(pub);
    free(out);
    json_decref(doc);
    EVP_PKEY_free(key);
    return rc;
}

static int mint(int argc, char **argv) {
    const char *key_path = NULL, *v;
    char *ns[MAX_NS];
    jwt_claims c;
    memset(&c, 0, sizeof c);
    c.iss = "memoryd";
    c.lvl = JWT_LABEL_PUBLIC;
    int has_clr = 0;
    int64_t ttl = 3600, nbf_in = 0;
    int has_nbf = 0;
    char *scope = NULL;
    char jti[UUID_TEXT_LEN];
    uuid_new(jti);
    c.jti = jti;
    for (int i = 1; i < argc; i++) {
        if ((v = flag_value(argc, argv, &i, "--key"))) key_path = v;
        else if ((v = flag_value(argc, argv, &i, "--sub"))) c.sub = (char *)v;
        else if ((v = flag_value(argc, argv, &i, "--tenant"))) c.tenant = (char *)v;
        else if ((v = flag_value(argc, argv, &i, "--scope"))) scope = (char *)v;
        else if ((v = flag_value(argc, argv, &i, "--iss"))) c.iss = (char *)v;
        else if ((v = flag_value(argc, argv, &i, "--jti"))) c.jti = (char *)v;
        else if ((v = flag_value(argc, argv, &i, "--ns"))) {
            if (c.nns == MAX_NS) return fail("at most %d --ns flags%s", "64", "");
            ns[c.nns++] = (char *)v;
        } else if ((v = flag_value(argc, argv, &i, "--clr"))) {
            if (parse_label(v, &c.clr) != 0) return fail("--clr: unknown label %s%s", v, "");
            has_clr = 1;
        } else if ((v = flag_value(argc, argv, &i, "--lvl"))) {
            if (parse_label(v, &c.lvl) != 0) return fail("--lvl: unknown label %s%s", v, "");
        } else if ((v = flag_value(argc, argv, &i, "--ttl"))) {
            if (text_parse_duration(v, &ttl) != 0) return fail("--ttl: bad duration %s%s", v, "");
        } else if ((v = flag_value(argc, argv, &i, "--nbf-in"))) {
            if (text_parse_duration(v, &nbf_in) != 0)
                return fail("--nbf-in: bad duration %s%s", v, "");
            has_nbf = 1;
        } else {
            return fail("mint: unknown argument %s%s", argv[i], "");
        }
    }
    if (!key_path || !c.sub || !c.sub[0] || !c.tenant || !c.tenant[0] || !scope || !scope[0])
        return fail("mint needs --key, --sub, --tenant and --scope%s%s", "", "");
    if (!has_clr) c.clr = c.lvl;
    if (c.lvl > c.clr) return fail("--lvl may not be above --clr%s%s", "", "");
    char *scopes[JWT_MAX_SCOPES];
    char *scope_copy = strdup(scope), *save = NULL;
    for (char *t = strtok_r(scope_copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (c.nscopes == JWT_MAX_SCOPES) {
            free(scope_copy);
            return fail("at most %s scopes%s", "64", "");
        }
        scopes[c.nscopes++] = t;
    }
    c.scopes = scopes;
    c.ns = ns;
    int64_t now = (int64_t)time(NULL);
    c.iat = now;
    c.has_iat = 1;
    c.exp = now + ttl;
    if (has_nbf) {
        c.nbf = now + nbf_in;
        c.has_nbf = 1;
    }
    EVP_PKEY *key = NULL;
    char *kid = NULL, *payload = NULL, *token = NULL, err[512];
    int rc = 2;
    if (jwk_private_load_file(key_path, &key, &kid, err, sizeof err) != 0) {
        fail("%s%s", err, "");
    } else if (jwt_claims_render(&c, &payload) != 0 ||
               jwt_sign(key, kid, payload, &token, err, sizeof err) != JWT_OK) {
        fail("cannot sign the token%s%s", "", "");
    } else {
        printf("%s\n", token);
        rc = 0;
    }
    free(scope_copy);
    free(payload);
    free(token);
    free(kid);
    EVP_PKEY_free(key);
    return rc;
}

static void print_part(const char *label, const char *part, size_t n) {
    unsigned char *raw = NULL;
    size_t rawlen = 0;
    json_error_t jerr;
    json_t *j = b64url_decode_alloc(part, n, &raw, &rawlen) == 0
                    ? json_loadb((const char *)raw, rawlen, 0, &jerr)
                    : NULL;
    char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    printf("%s: %s\n", label, s ? s : "(not base64url JSON)");
    free(s);
    json_decref(j);
    free(raw);
}

static int inspect(int argc, char **argv) {
    const char *token = NULL, *jwks_path = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if ((v = flag_value(argc, argv, &i, "--jwks"))) jwks_path = v;
        else if (argv[i][0] != '-' && !token) token = argv[i];
        else return fail("inspect: unknown argument %s%s", argv[i], "");
    }
    if (!token) return fail("inspect needs a TOKEN%s%s", "", "");
    const char *dot1 = strchr(token, '.');
    const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot2) return fail("not a JWS compact token (needs three dot-separated parts)%s%s", "", "");
    print_part("header", token, (size_t)(dot1 - token));
    print_part("claims", dot1 + 1, (size_t)(dot2 - dot1 - 1));
    if (!jwks_path) return 0;
    jwks *keys = NULL;
    char err[512];
    if (jwks_load_file(jwks_path, &keys, err, sizeof err) != 0) return fail("%s%s", err, "");
    jwt_claims *claims = NULL;
    int rc = jwt_verify(keys, token, strlen(token), (int64_t)time(NULL), JWT_DEFAULT_SKEW_S,
                        &claims, err, sizeof err);
    jwks_free(keys);
    jwt_claims_free(claims);
    if (rc != JWT_OK) {
        printf("verification: FAILED (%s): %s\n", jwt_strerror(rc), err);
        return 1;
    }
    printf("verification: OK\n");
    return 0;
}

int token_cli_main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "keygen") == 0) return keygen(argc - 1, argv + 1);
    if (strcmp(argv[1], "mint") == 0) return mint(argc - 1, argv + 1);
    if (strcmp(argv[1], "inspect") == 0) return inspect(argc - 1, argv + 1);
    fprintf(stderr, "memoryd token: unknown command %s\n\n%s", argv[1], usage);
    return 2;
}
