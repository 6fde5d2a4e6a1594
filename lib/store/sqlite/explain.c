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
    bool oom = false;
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
        if (!text[n]) {
            oom = true;
            break;
        }
        n++;
    }
    if (oom)
        rc = OG_ENOMEM;
    else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = 0;
    else
        rc = og__sq_err(c);
    sqlite3_finalize(st);
    if (rc == 0) {
        /* An INSERT ... VALUES reads no table: SQLite has no plan row
         * for it (its keys are checked by the b-trees it writes). */
        static const char *const none[] = {"(no plan rows: reads no table)"};

        og__explain_statement(out, title, name, stmt, NULL, 0);
        if (n > 0)
            og__explain_plan(out, NULL, (const char *const *)text, n);
        else
            og__explain_plan(out, NULL, none, 1);
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
    /* The loops' scans (og_op_scan) as the sweeper and the reconciler
     * filter them (lib/exec/payout.c), built by exec.c's own builder. */
    const og_op_filter fsweep = {OG_OP_BIT(OG_OP_ADMITTED) |
                                     OG_OP_BIT(OG_OP_STARTED),
                                 true, 0, 100,
                                 OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT)};
    const og_op_filter frecon = {OG_OP_BIT(OG_OP_UNKNOWN), true, 0, 100,
                                 OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT)};
    /* the operators' backlog (GET /v1/admin/operations, /metrics): over
     * operations_backlog_idx, which from schema 15 holds no Admitted row */
    const og_op_filter fbacklog = {OG_OP_BIT(OG_OP_UNKNOWN) |
                                       OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION),
                                   false, 0, 100, 0};
    char sweep[2048], recon[2048], backlog[2048];
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
        /* The payout pipeline, per payout and per loop pass, in its order
         * (docs/payouts.md section 7 step 4). */
        {"Payout decision: the policy's current release",
         "PAYOUT_POLICY_RELEASE", og__sq_payout_policy_release_sql},
        {"Payout decision and context read: the facts", "PAYOUT_FACTS",
         og__sq_payout_facts_sql},
        {"Payout decision and context read: the day's counters",
         "PAYOUT_DAY", og__sq_payout_day_sql},
        {"Payout decision: the decision", "PAYOUT_DECISION",
         og__sq_payout_decision_sql},
        {"Payout decision: the payout approved", "PAYOUT_APPROVE",
         og__sq_payout_approve_sql},
        {"Payout decision: the grant's binding", "PAYOUT_BIND",
         og__sq_payout_bind_sql},
        {"Payout decision: the job", "PAYOUT_JOB", og__sq_payout_job_sql},
        {"Payout history: an entry", "PAYOUT_EVENT", og__sq_payout_event_sql},
        {"Payout claim: the facts, under the write lock", "PAYOUT_CLAIM_FACTS",
         og__sq_payout_claim_facts_sql},
        {"Payout claim: the grant consumed", "PAYOUT_CLAIM_GRANT",
         og__sq_payout_claim_grant_sql},
        {"Payout claim: the payout executing", "PAYOUT_CLAIM_PAYOUT",
         og__sq_payout_claim_payout_sql},
        {"Payout claim: the attempt", "PAYOUT_CLAIM_OP",
         og__sq_payout_claim_op_sql},
        {"Payout attempt: og_op_start", "OP_START", og__sq_op_start_sql},
        {"Payout attempt: its history entry", "OP_EVENT",
         og__sq_op_event_sql},
        {"Payout jobs: the ack", "PAYOUT_JOB_ACK", og__sq_payout_job_ack_sql},
        {"Payout resolution: the outcome (og_op_record's statement)",
         "OP_RECORD", og__sq_op_record_sql},
        {"Payout resolution: the binding and the payout",
         "PAYOUT_RESOLVE_FACTS", og__sq_payout_resolve_facts_sql},
        {"Payout resolution: the payout", "PAYOUT_RESOLVE_PAYOUT",
         og__sq_payout_resolve_payout_sql},
        {"Payout resolution: the binding's reservation released",
         "PAYOUT_RELEASE", og__sq_payout_release_sql},
        {"Payout resolution: the day, reserved to paid", "PAYOUT_PAY",
         og__sq_payout_pay_sql},
        {"Payout resolution: the day, reservation released",
         "PAYOUT_UNRESERVE", og__sq_payout_unreserve_sql},
        {"Payout sweeper: the lapsed Admitted and Started attempts",
         "OP_SCAN_SWEEPER", sweep},
        {"Payout reconciler: the lapsed Unknown attempts",
         "OP_SCAN_RECONCILER", recon},
        {"Operators' backlog: Unknown and NeedsReconciliation, oldest first",
         "OP_SCAN_BACKLOG", backlog},
        {"Payout sweeper and reconciler: the takeover", "OP_TAKEOVER",
         og__sq_op_takeover_sql},
        {"Payout reconciler: later (og_payout_reconcile_later)",
         "PAYOUT_RECONCILE_LATER", og__sq_payout_reconcile_later_sql},
        {"Payout evidence: the attempt read (og_payout_evidence)",
         "PAYOUT_ATTEMPT_READ", og__sq_payout_attempt_read_sql},
        {"Payout return: the entry (og_payout_return_record)",
         "PAYOUT_RETURN", og__sq_payout_return_sql},
        {"Payout grants: one expiry batch (the days)", "PAYOUT_EXPIRE_DAYS",
         og__sq_payout_expire_days_sql},
        {"Payout grants: one expiry batch (the entries)",
         "PAYOUT_EXPIRE_EVENTS", og__sq_payout_expire_events_sql},
    };
    og__sq_conn *c;
    int rc = 0;

    (void)batch; /* a LIMIT value: no bearing on SQLite's plan */
    if (og__sq_op_list_sql(&fsweep, sweep, sizeof sweep) < 0 ||
        og__sq_op_list_sql(&frecon, recon, sizeof recon) < 0 ||
        og__sq_op_list_sql(&fbacklog, backlog, sizeof backlog) < 0)
        return OG_EINTERNAL;
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
