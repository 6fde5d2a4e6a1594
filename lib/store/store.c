/*
 * store.c — the store's public face: resolves a URL to a backend table,
 * validates input before anything reaches the store, and dispatches.
 *
 * Invariants:
 *   S1  A backend never sees raw input: og_admit builds a canonical
 *       og__admit_req first, and bad input returns its own error code with
 *       nothing written.
 *   S2  A store whose schema version differs from OG_SCHEMA_VERSION is not
 *       opened: running an admission against a schema this build does not
 *       know could silently drop a guarantee (a missing unique key).
 *   S3  og_admit never retries: an unavailable store is reported to the
 *       caller, whose retry with the same operation id finds out what
 *       happened.
 */
#include <stdlib.h>
#include <string.h>

#include "og_internal.h"

#define OG__URL_MAX 4096

struct og_store {
    const og__store_methods *m;
    void *impl;
    og_store_options opts;
};

void og_store_options_default(og_store_options *o)
{
    og_timings_default(&o->timings);
    o->pool_size = 16;
}

/* Picks the backend for url and the target string it gets. */
static int og__resolve(const char *url, const og__store_methods **m,
                       const char **target)
{
    if (!url || !*url || strlen(url) > OG__URL_MAX)
        return OG_EBAD_URL;
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (url[7] == '\0')
            return OG_EBAD_URL;
        *m = &og__sqlite_methods;
        *target = url + 7;
        return 0;
    }
    if (strncmp(url, "postgres://", 11) == 0 ||
        strncmp(url, "postgresql://", 13) == 0 ||
        (strchr(url, '=') && !strstr(url, "://"))) {
        *m = &og__postgres_methods;
        *target = url;
        return 0;
    }
    return OG_EBAD_URL;
}

static int og__options(const og_store_options *in, og_store_options *out)
{
    if (in)
        *out = *in;
    else
        og_store_options_default(out);
    if (out->pool_size < 1 || out->pool_size > 1024)
        return OG_EINVAL;
    return og_timings_check(&out->timings, NULL);
}

int og_store_open(const char *url, const og_store_options *opts,
                  og_store **out)
{
    const og__store_methods *m;
    const char *target;
    og_store *s = NULL;
    int version = -1, rc;

    if (!out)
        return OG_EINVAL;
    if ((rc = og__resolve(url, &m, &target)) < 0)
        return rc;
    s = calloc(1, sizeof *s);
    if (!s)
        return OG_ENOMEM;
    if ((rc = og__options(opts, &s->opts)) < 0)
        goto fail;
    s->m = m;
    if ((rc = m->open(target, &s->opts, &s->impl)) < 0)
        goto fail;
    if ((rc = m->schema_version(s->impl, &version)) < 0)
        goto fail;
    if (version != OG_SCHEMA_VERSION) { /* S2 */
        rc = OG_ESCHEMA;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    if (s->impl)
        m->close(s->impl);
    free(s);
    return rc;
}

void og_store_free(og_store *s)
{
    if (!s)
        return;
    s->m->close(s->impl);
    free(s);
}

const char *og_store_backend(const og_store *s)
{
    return s ? s->m->name : "none";
}

int og_store_migrate(const char *url, const og_store_options *opts,
                     int *from, int *to)
{
    const og__store_methods *m;
    const char *target;
    og_store_options o;
    void *impl = NULL;
    int f = 0, t = 0, rc;

    if ((rc = og__resolve(url, &m, &target)) < 0)
        return rc;
    if ((rc = og__options(opts, &o)) < 0)
        return rc;
    if ((rc = m->open(target, &o, &impl)) < 0)
        return rc;
    rc = m->migrate(impl, &f, &t);
    m->close(impl);
    if (rc < 0)
        return rc;
    if (from)
        *from = f;
    if (to)
        *to = t;
    return 0;
}

int og_admit(og_store *s, const og_grant *grant, const og_intent *intent,
             og_admission *result)
{
    og__admit_req req;
    og_admission res;
    int rc;

    if (!s || !grant || !intent || !result)
        return OG_EINVAL;
    if ((rc = og__admit_req_build(grant, intent, &req)) < 0) /* S1 */
        return rc;
    if ((rc = s->m->admit(s->impl, &req, &res)) < 0) /* S3: no retry */
        return rc;
    *result = res;
    return 0;
}

int og_operation_get(og_store *s, const char *operation_id, og_operation *out)
{
    char id[OG_UUID_LEN + 1];
    og_operation op;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    rc = s->m->operation_get(s->impl, id, &op);
    if (rc == 1)
        *out = op;
    return rc;
}
