/* entries_token: List's page tokens on top of page_token.h; see
 * entries_token.h. */
#include "service/entries/entries_token.h"

#include <string.h>

#include "service/pb/page_token.h"

#define DOMAIN "memoryd entries page token v1"
#define NS_MAX 255
#define KEY_MAX 1024

char *entries_token_encode(arena *a, const entries_token_binding *b, const char *ns,
                           const char *key) {
    if (strlen(ns) > NS_MAX || strlen(key) > KEY_MAX) return NULL;
    const char *bind[] = {b->tenant, b->principal, b->ns_pattern, b->key_pattern};
    const char *fields[] = {ns, key};
    return page_token_encode(a, DOMAIN, bind, 4, fields, 2);
}

int entries_token_decode(arena *a, const entries_token_binding *b, const char *token,
                         const char **ns, const char **key) {
    if (strnlen(token, ENTRIES_TOKEN_MAX + 1) > ENTRIES_TOKEN_MAX) return -1;
    const char *bind[] = {b->tenant, b->principal, b->ns_pattern, b->key_pattern};
    const char *fields[2];
    if (page_token_decode(a, DOMAIN, bind, 4, token, fields, 2) != 0) return -1;
    if (!fields[0][0] || !fields[1][0]) return -1;
    *ns = fields[0];
    *key = fields[1];
    return 0;
}
