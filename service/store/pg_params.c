/* pg_params: connection parameters for memoryd's pools; see pg_params.h. */
#include "service/store/pg_params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pg_params_init(pg_params *pp, const char *url, char *err, size_t errlen) {
    memset(pp, 0, sizeof *pp);
    char *perr = NULL;
    pp->info = PQconninfoParse(url, &perr);
    if (!pp->info) {
        snprintf(err, errlen, "postgres: bad connection URL: %s", perr ? perr : "out of memory");
        PQfreemem(perr);
        return -1;
    }
    size_t n = 0;
    const char *user_options = "";
    int named = 0;
    for (PQconninfoOption *o = pp->info; o->keyword; o++) {
        if (!o->val) continue;
        if (strcmp(o->keyword, "options") == 0) user_options = o->val;
        else n++;
        if (strcmp(o->keyword, "application_name") == 0) named = 1;
    }
    if (asprintf(&pp->options, "%s -c client_connection_check_interval=%d", user_options,
                 PG_CHECK_INTERVAL_MS) < 0)
        pp->options = NULL;
    pp->kw = calloc(n + 3, sizeof *pp->kw);
    pp->vals = calloc(n + 3, sizeof *pp->vals);
    if (!pp->options || !pp->kw || !pp->vals) {
        pg_params_free(pp);
        return snprintf(err, errlen, "postgres: out of memory"), -1;
    }
    size_t i = 0;
    for (PQconninfoOption *o = pp->info; o->keyword; o++) {
        if (!o->val || strcmp(o->keyword, "options") == 0) continue;
        pp->kw[i] = o->keyword;
        pp->vals[i++] = o->val;
    }
    pp->kw[i] = "options";
    pp->vals[i++] = pp->options;
    if (!named) {
        pp->kw[i] = "application_name";
        pp->vals[i] = "memoryd";
    }
    return 0;
}

void pg_params_free(pg_params *pp) {
    free(pp->kw);
    free(pp->vals);
    free(pp->options);
    if (pp->info) PQconninfoFree(pp->info);
    memset(pp, 0, sizeof *pp);
}
