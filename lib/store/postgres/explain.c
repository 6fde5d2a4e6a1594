/*
 * explain.c — og_store_explain's PostgreSQL part: EXPLAIN EXECUTE of the
 * store's own prepared statements (the descriptors internal.h declares, in
 * the store's consumption keys, I9), with custom and generic plans, so
 * what is shown is what admissions, cleanup and the payout store's hot
 * statements run. docs/plans.md repeats the statements verbatim.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* EXPLAIN's one column: a line of the plan. */
enum { EXPLAIN_LINE, EXPLAIN_NCOLS };

/* The plan of prepared statement s on c for the n literal values (NULL:
 * SQL NULL) under plan_cache_mode = mode, written as a block. */
static int pg_explain_one(og__pg_store *pg, og__pg_conn *c,
                          const og__pg_stmt *s, const char *const *values,
                          int n, const char *mode, const char *caption,
                          FILE *out)
{
    char set[64], *sql = NULL;
    size_t len = 0;
    const char **lines = NULL;
    PGresult *res = NULL;
    FILE *q;
    int rc, rows;

    snprintf(set, sizeof set, "SET plan_cache_mode = %s", mode);
    if ((rc = og__pg_exec_params(pg, c, set, 0, NULL, PQTRANS_IDLE, NULL)) != 0)
        return rc;
    if ((rc = og__pg_prepare(pg, c, s, og__pg_mono_us() + pg->timeout_us)) != 0)
        return rc == OG__PG_REFUSE ? OG_EINTERNAL : rc;
    if (!(q = open_memstream(&sql, &len)))
        return OG_ENOMEM;
    fprintf(q, "EXPLAIN EXECUTE %s", s->name);
    for (int k = 0; k < n; k++) {
        char *lit = values[k]
                        ? PQescapeLiteral(c->conn, values[k], strlen(values[k]))
                        : NULL;
        if (values[k] && !lit) {
            fclose(q);
            free(sql);
            return OG_ENOMEM;
        }
        fprintf(q, "%s%s", k ? ", " : " (", lit ? lit : "NULL");
        PQfreemem(lit);
    }
    fputs(n > 0 ? ")" : "", q);
    if (fclose(q) != 0 || !sql) {
        free(sql);
        return OG_ENOMEM;
    }
    rc = og__pg_exec_params(pg, c, sql, 0, NULL, PQTRANS_IDLE, &res);
    free(sql);
    if (rc != 0)
        return rc;
    rows = PQntuples(res);
    if (PQnfields(res) != EXPLAIN_NCOLS || rows < 1) {
        PQclear(res);
        return OG_EINTERNAL;
    }
    if (!(lines = calloc((size_t)rows, sizeof *lines))) {
        PQclear(res);
        return OG_ENOMEM;
    }
    for (int r = 0; r < rows; r++)
        lines[r] = PQgetvalue(res, r, EXPLAIN_LINE);
    og__explain_plan(out, caption, lines, rows);
    free(lines);
    PQclear(res);
    return 0;
}

/* One statement's section: its text, its values, its custom and generic
 * plans. */
static int pg_explain_stmt(og__pg_store *pg, og__pg_conn *c, const char *title,
                           const og__pg_stmt *s, const char *const *values,
                           FILE *out)
{
    int rc, n = s->nparams;

    og__explain_statement(out, title, s->name, s->sql, values, n);
    rc = pg_explain_one(pg, c, s, values, n, "force_custom_plan",
                        "Custom plan (planned for these values, as "
                        "PostgreSQL does for a prepared statement's first "
                        "five executions):",
                        out);
    if (rc == 0)
        rc = pg_explain_one(pg, c, s, values, n, "force_generic_plan",
                            "Generic plan (the one PostgreSQL may keep "
                            "after five executions, for any values):",
                            out);
    return rc;
}

int og__pg_explain(void *impl, int batch, FILE *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c;
    char expires[24], owner[24], limit[16], from[24];
    /* A grant of the default lifetime (15 min) on its first admission;
     * the ids are of the documented shapes, held by no row. */
    const char *admit[13] = {"support-approvals",
                             "g-explain-1",
                             "00000000-0000-4000-8000-000000000001",
                             expires,
                             "agent-1",
                             "acct-1",
                             "10.00",
                             "EUR",
                             pg->leeway,
                             pg->lease,
                             pg->window,
                             owner,
                             NULL};
    const char *row[12] = {"support-approvals",
                           "g-explain-1",
                           "00000000-0000-4000-8000-000000000001",
                           NULL,
                           "agent-1",
                           "acct-1",
                           "10.00",
                           "EUR",
                           pg->leeway,
                           pg->lease,
                           pg->window,
                           owner};
    const char *unclaimed[4] = {"support-approvals", "g-explain-1",
                                "00000000-0000-4000-8000-000000000001", NULL};
    const char *cleanup[3] = {pg->cleanup_margin, limit, from};
    /* A tenant's day of no row, a 30 s delivery lease, a janitor batch. */
    const char *reserve[3] = {"T-explain", "2026-01-15", "425000"};
    const char *take[1] = {"30000000"};
    const char *expire[3] = {pg->expiry_margin, limit, from};
    int rc;

    og__pg_fmt_i64(expires, sizeof expires,
                   (int64_t)time(NULL) * 1000000 + INT64_C(900000000));
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    snprintf(limit, sizeof limit, "%d", batch);
    og__pg_fmt_i64(from, sizeof from,
                   OG__TIME_MIN_US); /* a pass's first batch */
    if ((rc = og__pg_acquire(pg, &c)) < 0)
        return rc;
    rc = pg_explain_stmt(
        pg, c, "Admission, token form",
        og__pg_keyed(pg, &og__pg_admit_stmt, &og__pg_admit_hashed_stmt), admit,
        out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Admission, row form",
                             og__pg_keyed(pg, &og__pg_admit_row_stmt,
                                          &og__pg_admit_row_hashed_stmt),
                             row, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c,
                             "Admission, the follow-up read of a claim that "
                             "did not happen",
                             og__pg_keyed(pg, &og__pg_unclaimed_stmt,
                                          &og__pg_unclaimed_hashed_stmt),
                             unclaimed, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Cleanup, one batch", &og__pg_cleanup_stmt,
                             cleanup, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c,
                             "Payout decision: the daily-limit reservation",
                             &og__pg_payout_reserve_stmt, reserve, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Payout jobs: take the oldest available",
                             &og__pg_payout_job_take_stmt, take, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Payout grants: one expiry batch",
                             &og__pg_payout_expire_stmt, expire, out);
    /* plan_cache_mode was changed on this session: it ends with it. */
    c->broken = true;
    og__pg_release(pg, c);
    return rc;
}
