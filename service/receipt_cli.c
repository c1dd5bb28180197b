/* receipt_cli: `memoryd receipt verify`; see receipt_cli.h. */
#include "service/receipt_cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/jwks.h"
#include "service/core/arena.h"
#include "service/core/text.h"
#include "service/privacy/privacy_receipt.h"

static const char usage[] =
    "usage: memoryd receipt verify --jwks FILE (RECEIPT | --file FILE | -)\n"
    "\n"
    "  Verifies a Forget receipt (the signed_receipt of Privacy.Forget's answer,\n"
    "  a JWS) with the deployment's public keys and prints its payload: who was\n"
    "  erased, when, by whom and how many records per tier. Exits 0 when it\n"
    "  verifies, 1 when it does not (the reason is printed), 2 on usage or I/O\n"
    "  errors. \"-\" reads the receipt from standard input.\n"
    "\n"
    "example:\n"
    "  memoryd receipt verify --jwks .local/jwks.json --file receipt.jws\n";

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "memoryd receipt: %s%s\n", what, detail ? detail : "");
    return 2;
}

/* The receipt text without surrounding whitespace (files end in a newline). */
static char *trim(char *s) {
    while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

static int verify(int argc, char **argv) {
    const char *jwks_path = NULL, *file = NULL, *inline_receipt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jwks") == 0 && i + 1 < argc) jwks_path = argv[++i];
        else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc) file = argv[++i];
        else if (strcmp(argv[i], "-") == 0 && !file && !inline_receipt) file = "-";
        else if (argv[i][0] != '-' && !inline_receipt && !file) inline_receipt = argv[i];
        else return fail("verify: unexpected argument ", argv[i]);
    }
    if (!jwks_path) return fail("verify needs --jwks FILE", NULL);
    if (!file == !inline_receipt) return fail("verify needs one RECEIPT, --file FILE or -", NULL);
    char *owned = file ? text_read_file(file, NULL) : strdup(inline_receipt);
    if (!owned) return fail("cannot read the receipt from ", file ? file : "the argument");
    char err[512];
    jwks *keys = NULL;
    if (jwks_load_file(jwks_path, &keys, err, sizeof err) != 0) {
        free(owned);
        return fail(err, NULL);
    }
    arena *a = arena_create();
    privacy_receipt r;
    const char *kid = NULL, *text = trim(owned);
    int ok =
        a && privacy_receipt_verify(keys, text, strlen(text), a, &r, &kid, err, sizeof err) == 0;
    if (!ok) printf("verification: FAILED: %s\n", a ? err : "out of memory");
    char *payload = ok ? privacy_receipt_json(&r) : NULL;
    json_error_t jerr;
    json_t *j = payload ? json_loads(payload, 0, &jerr) : NULL;
    char *pretty = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    const char *scope = ok ? privacy_receipt_scope_text(a, &r) : NULL;
    if (ok)
        printf("%s\nverification: OK (key %s)\nscope: %s%s\n", pretty ? pretty : "?",
               kid ? kid : "?", scope ? scope : "?",
               r.dry_run ? "\nthis is a DRY RUN's receipt: it counts what would have been "
                           "erased; NOTHING WAS ERASED"
                         : "");
    free(pretty);
    json_decref(j);
    free(payload);
    arena_free(a);
    jwks_free(keys);
    free(owned);
    return ok ? 0 : 1;
}

int receipt_cli_main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "verify") == 0) return verify(argc - 1, argv + 1);
    fprintf(stderr, "memoryd receipt: unknown command %s\n\n%s", argv[1], usage);
    return 2;
}
