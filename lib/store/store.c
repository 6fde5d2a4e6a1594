/*
 * store.c — the store's front door: resolves a URL to a backend's method
 * table, opens, checks and migrates a store, admits (the one write the
 * library exists for), reads an operation, and formats og_store_explain's
 * plans. The other subsystems' entry points check their input and dispatch
 * in files of their own beside this one: grants.c, exec.c, retention.c,
 * redeem.c, payout.c, payout_run.c (lib/store/dispatch.h).
 *
 * It carries S1 (every input checked first), S2 (the schema version), S3
 * (no retry) and S5 (the store's consumption keys): dispatch.h states
 * them.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/dispatch.h"
#include "store/store_int.h"

#define URL_MAX 4096

void og_store_options_default(og_store_options *o)
{
    og_timings_default(&o->timings);
    o->pool_size = 16;
    o->session_bounds_from_role = false;
    o->consumption_keys = OG_KEYS_AS_STORED;
    o->admit_batch_max = 64;
    o->admit_batches_in_flight = 2;
    o->outcome_batch_max = 64;
    o->consume_batch_max = 64;
    o->rotate_batch_max = 64;
}

/* Picks the backend for url and the target string it gets. */
static int url_resolve(const char *url, const og__store_methods **m,
                       const char **target)
{
    if (!url || !*url || strlen(url) > URL_MAX)
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

static int options_check(const og_store_options *in, og_store_options *out)
{
    if (in)
        *out = *in;
    else
        og_store_options_default(out);
    if (out->pool_size < 1 || out->pool_size > 1024)
        return OG_EINVAL;
    if (out->admit_batch_max < 1 || out->admit_batch_max > OG_ADMIT_BATCH_MAX ||
        out->admit_batches_in_flight < 1 || out->admit_batches_in_flight > 64 ||
        out->outcome_batch_max < 1 ||
        out->outcome_batch_max > OG_ADMIT_BATCH_MAX ||
        out->consume_batch_max < 1 ||
        out->consume_batch_max > OG_ADMIT_BATCH_MAX ||
        out->rotate_batch_max < 1 ||
        out->rotate_batch_max > OG_ADMIT_BATCH_MAX)
        return OG_EINVAL;
    if (out->consumption_keys != OG_KEYS_AS_STORED &&
        out->consumption_keys != OG_KEYS_READABLE &&
        out->consumption_keys != OG_KEYS_HASHED)
        return OG_EINVAL;
    return og_timings_check(&out->timings, NULL);
}

/* S5: the store's recorded keys against what the caller asked for. */
static int keys_agree(og_consumption_keys asked, og_consumption_keys stored)
{
    return asked == OG_KEYS_AS_STORED || asked == stored ? 0 : OG_ESTORE_KEYS;
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
    if ((rc = url_resolve(url, &m, &target)) < 0)
        return rc;
    s = calloc(1, sizeof *s);
    if (!s)
        return OG_ENOMEM;
    if ((rc = options_check(opts, &s->opts)) < 0)
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
    if ((rc = m->read_keys(s->impl, &s->keys)) < 0 ||
        (rc = keys_agree(s->opts.consumption_keys, s->keys)) < 0) /* S5 */
        goto fail;
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

const og_timings *og_store_timings(const og_store *s)
{
    return s ? &s->opts.timings : NULL;
}

const char *og_store_backend(const og_store *s)
{
    return s ? s->m->name : "none";
}

og_consumption_keys og_store_consumption_keys(const og_store *s)
{
    return s ? s->keys : OG_KEYS_AS_STORED;
}

/* og_store_migrate up to schema version (og__store_migrate_to). */
static int migrate_to(const char *url, const og_store_options *opts,
                      int version, int *from, int *to)
{
    const og__store_methods *m;
    const char *target;
    og_store_options o;
    og_consumption_keys keys = OG_KEYS_AS_STORED;
    void *impl = NULL;
    int f = 0, t = 0, rc;

    if ((rc = url_resolve(url, &m, &target)) < 0)
        return rc;
    if ((rc = options_check(opts, &o)) < 0)
        return rc;
    if ((rc = m->open(target, &o, &impl)) < 0)
        return rc;
    rc = m->migrate(impl, o.consumption_keys, version, &f, &t);
    /* S5: a store already at 5 keeps its keys; asking for others is an
     * error, with nothing changed. */
    if (rc == 0 && (rc = m->read_keys(impl, &keys)) == 0)
        rc = keys_agree(o.consumption_keys, keys);
    m->close(impl);
    if (rc < 0)
        return rc;
    if (from)
        *from = f;
    if (to)
        *to = t;
    return 0;
}

int og_store_migrate(const char *url, const og_store_options *opts,
                     int *from, int *to)
{
    return migrate_to(url, opts, OG_SCHEMA_VERSION, from, to);
}

int og__store_migrate_to(const char *url, const og_store_options *opts,
                         int version, int *from, int *to)
{
    if (version < 1 || version > OG_SCHEMA_VERSION)
        return OG_EINVAL;
    return migrate_to(url, opts, version, from, to);
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

int og__admit_batch(og_store *s, int n, const og_grant *g,
                    const og_intent *in, og_admission *out, int *rcs)
{
    og__admit_req *reqs;
    int rc = 0, i, j;

    if (!s || !g || !in || !out || !rcs || n < 1 || n > OG_ADMIT_BATCH_MAX)
        return OG_EINVAL;
    if ((reqs = calloc((size_t)n, sizeof *reqs)) == NULL)
        return OG_ENOMEM;
    for (i = 0; i < n && rc == 0; i++)
        rc = og__admit_req_build(&g[i], &in[i], &reqs[i]); /* S1 */
    for (i = 0; i < n && rc == 0; i++)
        for (j = 0; j < i && rc == 0; j++)
            if (reqs[i].form != reqs[j].form ||
                strcmp(reqs[i].operation_id, reqs[j].operation_id) == 0 ||
                (strcmp(reqs[i].issuer, reqs[j].issuer) == 0 &&
                 strcmp(reqs[i].grant_id, reqs[j].grant_id) == 0))
                rc = OG_EINVAL;
    if (rc == 0)
        rc = s->m->admit_batch(s->impl, reqs, n, out, rcs); /* S3 */
    free(reqs);
    return rc;
}

int og__consume_batch(og_store *s, int n, const og_grant *g,
                      og_consume_result *out, int *rcs)
{
    og__admit_req *reqs;
    int rc = 0, i, j;

    if (!s || !g || !out || !rcs || n < 1 || n > OG_ADMIT_BATCH_MAX)
        return OG_EINVAL;
    if ((reqs = calloc((size_t)n, sizeof *reqs)) == NULL)
        return OG_ENOMEM;
    for (i = 0; i < n && rc == 0; i++)
        rc = og__grant_req_build(&g[i], &reqs[i]); /* S1 */
    for (i = 0; i < n && rc == 0; i++)
        for (j = 0; j < i && rc == 0; j++)
            if (reqs[i].form != reqs[j].form ||
                (strcmp(reqs[i].issuer, reqs[j].issuer) == 0 &&
                 strcmp(reqs[i].grant_id, reqs[j].grant_id) == 0))
                rc = OG_EINVAL;
    if (rc == 0)
        rc = s->m->consume_batch(s->impl, reqs, n, out, rcs); /* S3 */
    free(reqs);
    return rc;
}

void og__consume_stats(og_store *s, og_admit_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s)
        s->m->consume_stats(s->impl, out);
}

void og_store_consume_stats(og_store *s, og_admit_stats *out)
{
    og__consume_stats(s, out);
}

void og_store_rotate_stats(og_store *s, og_admit_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s)
        s->m->rotate_stats(s->impl, out);
}

void og_store_admit_stats(og_store *s, og_admit_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s)
        s->m->admit_stats(s->impl, out);
}

void og_store_outcome_stats(og_store *s, og_admit_stats *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (s && s->m->outcome_stats)
        s->m->outcome_stats(s->impl, out);
}

int og_store_check(og_store *s)
{
    int version = 0;
    int rc;

    if (!s)
        return OG_EINVAL;
    rc = s->m->schema_version(s->impl, &version);
    if (rc < 0)
        return rc;
    return version == OG_SCHEMA_VERSION ? 0 : OG_ESCHEMA;
}

int og_store_session_bounds(og_store *s, og_session_bounds *out)
{
    if (!s || !out)
        return OG_EINVAL;
    if (s->m->session_bounds == NULL) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    return s->m->session_bounds(s->impl, out);
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

/* ===========================================================================
 * Input checks the other files of the store share (dispatch.h).
 * ========================================================================= */

/* 0 when s is exactly 64 lower-case hex characters. */
int og__hex64_check(const char *s)
{
    size_t i;

    if (!s)
        return -1;
    for (i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    return s[64] == '\0' ? 0 : -1;
}

bool og__time_ok(int64_t us)
{
    return us >= OG__TIME_MIN_US && us <= OG__TIME_MAX_US;
}

/* Copies a checked id (og__id_check passed) into a fixed buffer. */
void og__idcpy(char dst[OG_ID_MAX + 1], const char *src)
{
    size_t n = strlen(src);
    memcpy(dst, src, n + 1);
}

/* ===========================================================================
 * Plans (og_store_explain)
 * ========================================================================= */

void og__explain_statement(FILE *out, const char *title, const char *name,
                           const char *sql, const char *const *values, int n)
{
    fprintf(out, "### %s: `%s`\n\n```sql\n%s\n```\n\n", title, name, sql);
    if (n <= 0)
        return;
    fputs("Planned with", out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s $%d = %s%s%s", i ? "," : "", i + 1,
                values[i] ? "'" : "", values[i] ? values[i] : "NULL",
                values[i] ? "'" : "");
    fputs(".\n\n", out);
}

void og__explain_plan(FILE *out, const char *caption,
                      const char *const *lines, int n)
{
    if (caption)
        fprintf(out, "%s\n\n", caption);
    fputs("```text\n", out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s\n", lines[i]);
    fputs("```\n\n", out);
}

int og_store_explain(og_store *s, int batch, char **text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out;
    int rc;

    if (!s || !text || batch < 1 || batch > OG_RETENTION_BATCH_MAX)
        return OG_EINVAL;
    if (!(out = open_memstream(&buf, &len)))
        return OG_ENOMEM;
    fprintf(out, "## %s, %s consumption keys\n\n", s->m->name,
            og_consumption_keys_name(s->keys));
    rc = s->m->explain(s->impl, batch, out);
    if ((fclose(out) != 0 || buf == NULL) && rc == 0)
        rc = OG_ENOMEM;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    return 0;
}
