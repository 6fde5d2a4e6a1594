/*
 * payout_fixture.c — puts one payout into a stage for tests/cli.sh, through
 * the library (oncegate/payout_store.h), on a store already migrated
 * (sqlite:PATH or a PostgreSQL URL): the operator commands (`oncegate
 * payout ...`) need a payout in each state they act on, and no command
 * creates one yet.
 *
 *   payout_fixture STORE-URL ID approved|unknown|needs-reconciliation
 *
 * approved: a tenant T-ID (10,000.00 EUR a day), its verified, Active
 * beneficiary BEN-ID, a destination DST-ID registered to it and changed 30
 * days ago (the policy's "changed in the last 7 days" does not decide), the
 * payout ID of 4,250.00 EUR drafted by clerk-22 and decided Allowed with a
 * window open now. unknown / needs-reconciliation: then claimed by worker-7
 * and its attempt resolved to that status. Prints one JSON line: payout,
 * grant, job, decision and (after a claim) attempt ids. Exit 0, or 1 with a
 * message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "oncegate/oncegate.h"
#include "oncegate/payout_store.h"

#define SEC INT64_C(1000000)

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

static int put_ok(const char *what, int rc, const og_payout_put_result *r)
{
    if (rc != 0 || r->outcome != OG_PAYOUT_WRITTEN) {
        fprintf(stderr, "payout_fixture: %s: %s %s\n", what,
                rc ? og_err_name(rc) : "", og_payout_write_name(r->outcome));
        return -1;
    }
    return 0;
}

/* Moves the destination's changed_at 30 days back, behind the store's back
 * (SQLite keeps it in microseconds; PostgreSQL as a timestamptz). */
static int age_destination(const char *url, const char *dst)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = -1;

    if (strncmp(url, "sqlite:", 7) != 0) {
        PGconn *pg = PQconnectdb(url);
        const char *params[1] = {dst};
        PGresult *res = NULL;

        if (PQstatus(pg) == CONNECTION_OK)
            res = PQexecParams(pg,
                               "UPDATE destinations SET changed_at ="
                               " clock_timestamp() - interval '30 days'"
                               " WHERE destination_id = $1",
                               1, NULL, params, NULL, NULL, 0);
        if (res && PQresultStatus(res) == PGRES_COMMAND_OK &&
            strcmp(PQcmdTuples(res), "1") == 0)
            rc = 0;
        else
            fprintf(stderr, "payout_fixture: aging %s: %s\n", dst,
                    PQerrorMessage(pg));
        PQclear(res);
        PQfinish(pg);
        return rc;
    }
    if (sqlite3_open(url + 7, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "UPDATE destinations SET changed_at = ?"
                           " WHERE destination_id = ?",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, now_us() - 30 * 86400 * SEC);
        sqlite3_bind_text(st, 2, dst, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_DONE && sqlite3_changes(db) == 1)
            rc = 0;
    }
    if (rc)
        fprintf(stderr, "payout_fixture: aging %s: %s\n", dst,
                db ? sqlite3_errmsg(db) : "open");
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

int main(int argc, char **argv)
{
    char url[4200], tenant[80], ben[80], dst[80], token[80];
    og_store *s = NULL;
    og_payout_put_result r = {0, 0};
    og_payout_decision d;
    og_payout_decide_req q;
    og_payout_claim_req c;
    og_payout_claim_result cr;
    og_payout_resolution res;
    og_op_status to = OG_OP_UNKNOWN;
    bool claim;
    json_t *out;
    int rc, ret = 1;

    if (argc != 4 || strlen(argv[1]) > 4000 || strlen(argv[2]) > 60) {
        fputs("usage: payout_fixture STORE-URL ID "
              "approved|unknown|needs-reconciliation\n", stderr);
        return 2;
    }
    claim = strcmp(argv[3], "approved") != 0;
    if (strcmp(argv[3], "needs-reconciliation") == 0)
        to = OG_OP_NEEDS_RECONCILIATION;
    else if (claim && strcmp(argv[3], "unknown") != 0)
        return 2;
    snprintf(url, sizeof url, "%s", argv[1]);
    snprintf(tenant, sizeof tenant, "T-%s", argv[2]);
    snprintf(ben, sizeof ben, "BEN-%s", argv[2]);
    snprintf(dst, sizeof dst, "DST-%s", argv[2]);
    snprintf(token, sizeof token, "tok_fixture_%s", argv[2]);
    if ((rc = og_store_open(url, NULL, &s)) != 0) {
        fprintf(stderr, "payout_fixture: open: %s\n", og_err_name(rc));
        return 1;
    }
    {
        og_payout_tenant_settings t = {tenant, false, 1000000, "EUR", NULL};
        og_payout_beneficiary_record b = {ben, tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        og_payout_destination_record de = {dst, ben, token};
        og_payout_draft_req dr = {
            argv[2],
            {tenant, ben, dst, 1, "4250.00", "EUR", "invoice INV-9031"},
            "clerk-22"};

        if (put_ok("tenant", og_payout_tenant_put(s, &t, 0, &r), &r) ||
            put_ok("beneficiary", og_payout_beneficiary_put(s, &b, 0, &r),
                   &r) ||
            put_ok("destination", og_payout_destination_put(s, &de, 0, &r),
                   &r) ||
            age_destination(url, dst) ||
            put_ok("draft", og_payout_draft(s, &dr, &r), &r))
            goto out;
    }
    memset(&q, 0, sizeof q);
    q.payout_id = argv[2];
    q.requester_id = "clerk-22";
    q.requester_role = "accounts-payable";
    q.requester_approval_limit = 1000000;
    q.correlation_id = "COR-8812";
    q.audience = OG_PAYOUT_AUDIENCE;
    q.not_before_us = now_us() - SEC;
    q.expires_at_us = q.not_before_us + 30 * 60 * SEC;
    if ((rc = og_payout_decide(s, &q, &d)) != 0 || !d.issued) {
        fprintf(stderr, "payout_fixture: decide: %s %s\n",
                rc ? og_err_name(rc) : "",
                rc ? "" : og_payout_reason_name(d.verdict.reason));
        goto out;
    }
    out = json_pack("{s:s, s:s, s:s, s:s}", "payout", argv[2], "decision",
                    d.decision_id, "grant", d.grant_id, "job", d.job_id);
    if (claim) {
        og_op_outcome o = {to, "fixture.lost-answer", NULL, "worker-7",
                           NULL};

        memset(&c, 0, sizeof c);
        c.grant_id = d.grant_id;
        c.worker_id = "worker-7";
        c.audience = OG_PAYOUT_AUDIENCE;
        c.relied = d.verdict.evaluated;
        c.relied.payout = d.executable_payout_version;
        c.policy_version = OG_PAYOUT_POLICY_VERSION;
        c.send_window_us = 60 * SEC;
        c.lease_us = 60 * SEC;
        c.final_absence_margin_us = -1;
        if ((rc = og_payout_claim(s, &c, &cr)) != 0 ||
            cr.outcome != OG_PAYOUT_CLAIM_CLAIMED) {
            fprintf(stderr, "payout_fixture: claim: %s %s\n",
                    rc ? og_err_name(rc) : "",
                    rc ? "" : og_payout_claim_outcome_name(cr.outcome));
            json_decref(out);
            goto out;
        }
        if ((rc = og_payout_resolve(s, cr.attempt.operation_id,
                                    OG_OP_BIT(OG_OP_ADMITTED), 1, &o,
                                    &res)) != 0 ||
            res.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
            fprintf(stderr, "payout_fixture: resolve: %s\n",
                    rc ? og_err_name(rc)
                       : og_payout_resolve_outcome_name(res.outcome));
            json_decref(out);
            goto out;
        }
        json_object_set_new(out, "attempt",
                            json_string(cr.attempt.operation_id));
    }
    {
        char *txt = json_dumps(out, JSON_COMPACT);

        if (txt)
            puts(txt);
        free(txt);
    }
    json_decref(out);
    ret = 0;
out:
    og_store_free(s);
    return ret;
}
