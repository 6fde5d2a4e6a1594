/*
 * explain.c — og_store_explain's PostgreSQL part: EXPLAIN EXECUTE of the
 * store's own prepared statements (the descriptors internal.h declares, in
 * the store's consumption keys, I9), with custom and generic plans, so
 * what is shown is what admissions (one-row and batched), consume verdicts
 * and outcome writes (batched), cleanup and the payout store's hot
 * statements run. docs/plans.md repeats the statements verbatim.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* EXPLAIN's one column: a line of the plan. */
/* A ticket hash (64 hex digits) of one repeated digit. */
#define EXPLAIN_HASH(d)                                                    \
    d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d           \
    d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d d
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

static int pg_explain_stmt_as(og__pg_store *pg, og__pg_conn *c,
                              const char *title, const og__pg_stmt *s,
                              const char *const *values, bool generic,
                              FILE *out);

/* One statement's section: its text, its values, its custom and generic
 * plans. */
static int pg_explain_stmt(og__pg_store *pg, og__pg_conn *c, const char *title,
                           const og__pg_stmt *s, const char *const *values,
                           FILE *out)
{
    return pg_explain_stmt_as(pg, c, title, s, values, true, out);
}

/* pg_explain_stmt, with the generic plan only when generic: a statement
 * the store runs unnamed (og_op_scan's) is planned for each call's values
 * and never has one. */
static int pg_explain_stmt_as(og__pg_store *pg, og__pg_conn *c,
                              const char *title, const og__pg_stmt *s,
                              const char *const *values, bool generic,
                              FILE *out)
{
    int rc, n = s->nparams;

    og__explain_statement(out, title, s->name, s->sql, values, n);
    rc = pg_explain_one(pg, c, s, values, n, "force_custom_plan",
                        generic ? "Custom plan (planned for these values, as "
                                  "PostgreSQL does for a prepared statement's "
                                  "first five executions):"
                                : "Custom plan (the store runs this statement "
                                  "unnamed: planned for each call's values, "
                                  "never a generic plan):",
                        out);
    if (rc == 0 && generic)
        rc = pg_explain_one(pg, c, s, values, n, "force_generic_plan",
                            "Generic plan (the one PostgreSQL may keep "
                            "after five executions, for any values):",
                            out);
    return rc;
}

/* The payout pipeline's statements, per payout and per loop pass, in its
 * order (docs/payouts.md section 7 step 4), planned for one payout of the
 * documented shapes that no row holds: PAY-explain of tenant T-explain,
 * its grant pgr-explain, its attempt ATT and job JOB. */
static int pg_explain_pipeline(og__pg_store *pg, og__pg_conn *c, FILE *out)
{
#define ATT "00000000-0000-4000-8000-0000000000a1"
#define JOB "00000000-0000-4000-b000-0000000000a1"
#define DEC "00000000-0000-4000-a000-0000000000a1"
#define FP "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
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
    char sst[PG_STATUSES_MAX], sbefore[24], slimit[16];
    char rst[PG_STATUSES_MAX], rbefore[24], rlimit[16];
    char bst[PG_STATUSES_MAX], bbefore[24], blimit[16];
    const char *sweep[6], *recon[6], *backlog[6];
    char now[24], later[24], owner[24];
    const char *payout[1] = {"PAY-explain"};
    const char *day[2] = {"T-explain", "2026-01-15"};
    const char *decision[19] = {
        DEC, "PAY-explain", "T-explain", "submit", "Allowed",
        "payout.allowed", OG_PAYOUT_POLICY_VERSION, FP, "1", "1", "1", "1",
        "clerk-1", "accounts-payable", "1000000", now, "COR-explain",
        NULL, NULL}; /* a submission's: it settles nothing */
    const char *approve[15] = {
        "PAY-explain", "1", "Draft", "2026-01-15", now, "pgr-explain", now,
        later, DEC, FP, OG_PAYOUT_POLICY_VERSION, JOB, "COR-explain",
        "clerk-1", OG_PAYOUT_AUDIENCE};
    const char *grant[1] = {"pgr-explain"};
    const char *attempt[1] = {ATT};
    const char *claim[12] = {
        "pgr-explain", ATT, now, OG_PAYOUT_POLICY_VERSION, "2",
        "svc-payout-worker", "1.00", "30000000", "600000000",
        "pk-explain", "ref-explain", "5000000"};
    const char *start[3] = {ATT, owner, "svc-payout-worker"};
    const char *ack[2] = {JOB, "1"};
    const char *record[9] = {ATT, "{Started}", owner, "Succeeded", "found",
                             "prv-explain", "svc-payout-worker", NULL, NULL};
    const char *resolve[10] = {"PAY-explain", "3", ATT, "Paid", "true",
                               "pgr-explain", "paid", "svc-payout-worker",
                               "Executing", "Succeeded"};
    const char *takeover[4] = {ATT, owner, pg->recovery_lease,
                               "svc-payout-sweeper"};
    const char *later_[5] = {ATT, "2", "60000000", "not_found",
                             "svc-payout-reconciler"};
    const char *ret[4] = {"PAY-explain", "prv-explain", "ops-1", NULL};
    const struct {
        const char *title;
        const og__pg_stmt *stmt;
        const char *const *values;
        bool generic;
    } steps[] = {
        {"Payout decision: the policy's current release",
         &og__pg_payout_policy_release_locked_stmt, NULL, true},
        {"Payout decision: the facts, locked",
         &og__pg_payout_facts_locked_stmt, payout, true},
        {"Payout context read: the facts", &og__pg_payout_facts_stmt, payout,
         true},
        {"Payout decision and context read: the day's counters",
         &og__pg_payout_day_stmt, day, true},
        {"Payout decision: the decision and its entry",
         &og__pg_payout_decision_stmt, decision, true},
        {"Payout decision: what an Allowed decision enables",
         &og__pg_payout_approve_stmt, approve, true},
        {"Payout claim: the facts and their locks",
         &og__pg_payout_claim_facts_stmt, grant, true},
        {"Payout claim: the consuming operation (a claim that waited)",
         &og__pg_payout_claim_consumer_stmt, attempt, true},
        {"Payout claim: its writes", &og__pg_payout_claim_stmt, claim, true},
        {"Payout attempt: og_op_start", &og__pg_op_start_stmt, start, true},
        {"Payout jobs: the ack", &og__pg_payout_job_ack_stmt, ack, true},
        {"Payout resolution: the outcome (og_op_record's statement)",
         &og__pg_op_record_stmt, record, true},
        {"Payout resolution: the binding and the payout, locked",
         &og__pg_payout_resolve_facts_stmt, attempt, true},
        {"Payout resolution: its writes", &og__pg_payout_resolve_stmt,
         resolve, true},
        {"Payout sweeper: the lapsed Admitted and Started attempts",
         &og__pg_op_scan_stmt, sweep, false},
        {"Payout reconciler: the lapsed Unknown attempts",
         &og__pg_op_scan_stmt, recon, false},
        {"Operators' backlog: Unknown and NeedsReconciliation, oldest first",
         &og__pg_op_scan_stmt, backlog, false},
        {"Payout sweeper and reconciler: the takeover",
         &og__pg_op_takeover_stmt, takeover, true},
        {"Payout reconciler: later (og_payout_reconcile_later)",
         &og__pg_payout_reconcile_later_stmt, later_, true},
        {"Payout evidence: the attempt, locked (og_payout_evidence)",
         &og__pg_payout_attempt_read_stmt, attempt, true},
        {"Payout return: the entry (og_payout_return_record)",
         &og__pg_payout_return_stmt, ret, true},
    };
    int rc;

    og__pg_fmt_i64(now, sizeof now, (int64_t)time(NULL) * 1000000);
    og__pg_fmt_i64(later, sizeof later,
                   (int64_t)time(NULL) * 1000000 + INT64_C(1800000000));
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    if ((rc = og__pg_op_list_params(&fsweep, sst, sbefore, slimit, sweep)) !=
            0 ||
        (rc = og__pg_op_list_params(&frecon, rst, rbefore, rlimit, recon)) !=
            0 ||
        (rc = og__pg_op_list_params(&fbacklog, bst, bbefore, blimit,
                                    backlog)) != 0)
        return rc;
    for (size_t k = 0; rc == 0 && k < sizeof steps / sizeof steps[0]; k++)
        rc = pg_explain_stmt_as(pg, c, steps[k].title, steps[k].stmt,
                                steps[k].values, steps[k].generic, out);
    return rc;
#undef ATT
#undef JOB
#undef DEC
#undef FP
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
    /* A batch of two such first admissions, as the group commit binds it
     * (admit_batch.c: text[] literals; the row form ignores expires_at). */
    char bexpires[64];
    const char *batch2[13] = {"{support-approvals,support-approvals}",
                              "{g-explain-1,g-explain-2}",
                              "{00000000-0000-4000-8000-000000000001,"
                              "00000000-0000-4000-8000-000000000002}",
                              bexpires,
                              "{agent-1,agent-1}",
                              "{acct-1,acct-1}",
                              "{10.00,10.00}",
                              "{EUR,EUR}",
                              pg->leeway,
                              pg->lease,
                              pg->window,
                              owner,
                              "{NULL,NULL}"};
    /* A batch of two first consume verdicts (consume_batch.c). */
    const char *cbatch2[5] = {"{support-approvals,support-approvals}",
                              "{g-explain-1,g-explain-2}", bexpires,
                              pg->leeway, "{NULL,NULL}"};
    const char *rbatch2[2] = {"{" EXPLAIN_HASH("a") "," EXPLAIN_HASH("b") "}",
                              "{" EXPLAIN_HASH("c") "," EXPLAIN_HASH("d") "}"};
    /* A batch of two outcome writes (outcome_batch.c): a payout attempt's
     * start and a credit's outcome, of operations no row holds. */
    char owners[64];
    const char *obatch2[9] = {"{00000000-0000-4000-8000-0000000000a1,"
                              "00000000-0000-4000-8000-0000000000a2}",
                              "{start,record}",
                              owners,
                              "{Admitted,\"Started,Unknown\"}",
                              "{Started,Succeeded}",
                              "{NULL,found}",
                              "{NULL,prv-explain}",
                              "{svc-payout-worker,agent-1}",
                              "{NULL,NULL}"};
    const char *cleanup[3] = {pg->cleanup_margin, limit, from};
    /* A tenant's day of no row, a 30 s delivery lease, a janitor batch. */
    const char *reserve[3] = {"T-explain", "2026-01-15", "425000"};
    const char *take[1] = {"30000000"};
    const char *expire[3] = {pg->expiry_margin, limit, from};
    int rc;

    og__pg_fmt_i64(expires, sizeof expires,
                   (int64_t)time(NULL) * 1000000 + INT64_C(900000000));
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    snprintf(bexpires, sizeof bexpires, "{%s,%s}", expires, expires);
    snprintf(owners, sizeof owners, "{%s,%s}", owner, owner);
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
    for (int f = 0; rc == 0 && f < 2; f++)
        rc = pg_explain_stmt(
            pg, c,
            f ? "Admission, batched (group commit), row form, a batch of two"
              : "Admission, batched (group commit), token form, a batch of two",
            f ? og__pg_keyed(pg, &og__pg_admit_batch_row_stmt,
                             &og__pg_admit_batch_row_hashed_stmt)
              : og__pg_keyed(pg, &og__pg_admit_batch_stmt,
                             &og__pg_admit_batch_hashed_stmt),
            batch2, out);
    for (int f = 0; rc == 0 && f < 2; f++)
        rc = pg_explain_stmt(
            pg, c,
            f ? "Consume verdict, batched (group commit), row form, a batch "
                "of two"
              : "Consume verdict, batched (group commit), token form, a "
                "batch of two",
            f ? og__pg_keyed(pg, &og__pg_consume_batch_row_stmt,
                             &og__pg_consume_batch_row_hashed_stmt)
              : og__pg_keyed(pg, &og__pg_consume_batch_stmt,
                             &og__pg_consume_batch_hashed_stmt),
            cbatch2, out);
    if (rc == 0) /* two rotations of unknown tickets (rotate_batch.c) */
        rc = pg_explain_stmt(pg, c,
                             "Ticket rotation, batched (group commit), a "
                             "batch of two",
                             &og__pg_rotate_batch_stmt, rbatch2, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c,
                             "Outcome writes, batched (group commit), a batch "
                             "of two",
                             &og__pg_outcome_batch_stmt, obatch2, out);
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
    if (rc == 0)
        rc = pg_explain_pipeline(pg, c, out);
    /* plan_cache_mode was changed on this session: it ends with it. */
    c->broken = true;
    og__pg_release(pg, c);
    return rc;
}
