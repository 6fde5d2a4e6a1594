/*
 * explain.c — og_store_explain's SQLite part: EXPLAIN QUERY PLAN of the
 * very text each statement is prepared from (the texts are the other
 * files', declared in internal.h), written as docs/plans.md repeats it. EQP
 * plans without binding: the values do not change SQLite's choice of
 * index. Nothing here runs a statement, so nothing is claimed or deleted.
 */
#include "internal.h"

#define SQ_EQP_MAX 256 /* plan rows; ours have a handful */

/* The columns of an EXPLAIN QUERY PLAN row. */
enum { EQP_ID, EQP_PARENT, EQP_NOTUSED, EQP_DETAIL, EQP_NCOLS };

/* The plan of statement sql, headed title and name, as the sqlite3 shell
 * draws it (indented by depth), written as a block. */
static int sq_explain_stmt(og__sq_conn *c, const char *title,
                           const char *name, const char *stmt, FILE *out)
{
    char *sql = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", stmt);
    int ids[SQ_EQP_MAX], depth[SQ_EQP_MAX], n = 0, rc;
    char *text[SQ_EQP_MAX];
    sqlite3_stmt *st = NULL;

    if (!sql)
        return OG_ENOMEM;
    rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return og__sq_err(c);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < SQ_EQP_MAX) {
        int id = sqlite3_column_int(st, EQP_ID);
        int parent = sqlite3_column_int(st, EQP_PARENT);
        const char *detail = (const char *)sqlite3_column_text(st, EQP_DETAIL);

        depth[n] = 0;
        for (int k = n - 1; k >= 0; k--)
            if (ids[k] == parent) {
                depth[n] = depth[k] + 1;
                break;
            }
        ids[n] = id;
        text[n] = sqlite3_mprintf("%*s%s", 2 * depth[n], "",
                                  detail ? detail : "");
        if (!text[n])
            break;
        n++;
    }
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = n > 0 && text[n - 1] ? 0 : OG_EINTERNAL;
    else
        rc = og__sq_err(c);
    sqlite3_finalize(st);
    if (rc == 0) {
        og__explain_statement(out, title, name, stmt, NULL, 0);
        og__explain_plan(out, NULL, (const char *const *)text, n);
    }
    for (int k = 0; k < n; k++)
        sqlite3_free(text[k]);
    return rc;
}

/* The variant of statement name in s's consumption keys, with its heading
 * name: NAME, or NAME_HASHED. */
#define SQ_KEYED_STEP(s, title, NAME, name)                                    \
    {title, (s)->keys == OG_KEYS_HASHED ? #NAME "_HASHED" : #NAME,             \
     SQ_KEYED(s, name)}

int og__sq_explain(void *impl, int batch, FILE *out)
{
    og__sq_store *s = impl;
    const struct {
        const char *title;
        const char *name; /* the heading's (docs/plans.md) */
        const char *sql;
    } steps[] = {
        {"Admission, token form: the family's state (a grant with a family)",
         "FAMILY_STATE", og__sq_family_state_sql},
        SQ_KEYED_STEP(s, "Admission, token form: the claim", CLAIM,
                      og__sq_claim),
        {"Admission, row form: the claim", "ROW_CLAIM", og__sq_row_claim_sql},
        {"Admission: the operation, in the same transaction", "INSERT_OP",
         og__sq_insert_op_sql},
        SQ_KEYED_STEP(s, "Admission: what holds a key the claim did not take",
                      READ_CONSUMPTION, og__sq_read_consumption),
        SQ_KEYED_STEP(s, "Cleanup, one batch", CLEANUP, og__sq_cleanup),
        {"Payout decision: the daily-limit reservation", "PAYOUT_RESERVE",
         og__sq_payout_reserve_sql},
        {"Payout jobs: take the oldest available", "PAYOUT_JOB_TAKE",
         og__sq_payout_job_take_sql},
        {"Payout grants: one expiry batch (its pick)", "PAYOUT_EXPIRE_MARK",
         og__sq_payout_expire_mark_sql},
    };
    og__sq_conn *c;
    int rc = 0;

    (void)batch; /* a LIMIT value: no bearing on SQLite's plan */
    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    fputs("SQLite runs the statements below for each admission in its own "
          "savepoint (claim and operation together, G1), queued admissions "
          "grouped in one `BEGIN IMMEDIATE` transaction with one commit "
          "(group commit).\n\n", out);
    for (size_t k = 0; rc == 0 && k < sizeof steps / sizeof steps[0]; k++)
        rc = sq_explain_stmt(c, steps[k].title, steps[k].name, steps[k].sql,
                             out);
    og__sq_release(s, c, false);
    return rc;
}
