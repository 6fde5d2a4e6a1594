/*
 * payouts.c — the payout pipeline inside `serve` (payouts.runner,
 * src/serve/payout_runner.c; docs/payouts.md, sections 5 and 6): a payout
 * decided Allowed in the store is paid by the server's own worker at the
 * sandbox, once, and its log line carries the identifiers and no secret;
 * `oncegate payout-worker --config FILE` does the same as its own process.
 */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <time.h>

#include "harness.h"
#include "cases.h"

#define PAYOUT_DAY_US (86400 * INT64_C(1000000))

/* Wall-clock microseconds: what the store's clock compares with. */
static int64_t payouts_wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The payouts rows of a site's configuration: the pipeline on, against
 * x's sandbox, with short polls so a test sees it within seconds. */
static void payouts_conf(xenv *x, bool runner)
{
    char table[PATHLEN];

    snprintf(table, sizeof table, "%s/providers/sandbox-payouts.v1.json",
             g_src);
    json_object_set_new(
        x->st->conf, "payouts",
        json_pack("{s:b, s:s, s:i, s:i, s:i, s:s}", "runner", runner,
                  "provider_table", table, "workers", 2, "poll_ms", 50,
                  "interval_ms", 200, "backoff_ms", "1000,2000"));
    /* the worker's own principal, with the payout-worker role */
    {
        char key[API_KEY_LEN], hash[65];

        api_key_new(key);
        sha256_hex(key, hash);
        assert_int_equal(
            json_array_append_new(
                json_object_get(x->st->conf, "principals"),
                json_pack("{s:s, s:[s], s:s}", "id", "payout-worker",
                          "roles", "payout-worker", "api_key_sha256", hash)),
            0);
    }
    assert_int_equal(site_write(x->st), 0);
}

/* Runs one statement on the site's store, behind the library's back. */
static void payouts_raw(const site *st, const char *sql)
{
    if (g_pg) {
        PGconn *c = PQconnectdb(st->direct_url);
        PGresult *r;

        assert_int_equal(PQstatus(c), CONNECTION_OK);
        r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            fail_msg("%s: %s", sql, PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
    } else {
        sqlite3 *db = NULL;
        char *e = NULL;

        assert_int_equal(strncmp(st->direct_url, "sqlite:", 7), 0);
        assert_int_equal(sqlite3_open(st->direct_url + 7, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 10000);
        if (sqlite3_exec(db, sql, NULL, NULL, &e) != SQLITE_OK)
            fail_msg("%s: %s", sql, e ? e : "?");
        sqlite3_free(e);
        sqlite3_close(db);
    }
}

/* The section 1 context in the store: tenant, beneficiary, a destination
 * registered 30 days ago (so no acknowledgment is required), and payout
 * `id` for 4,250.00 EUR decided Allowed with its window open now, its
 * grant issued to `audience`: the site's worker principal
 * (payouts.worker_id), whose workers present it. */
static og_payout_decision payouts_seed(const site *st, og_store *s,
                                       const char *tag, const char *id,
                                       const char *token,
                                       const char *audience)
{
    char tenant[64], ben[64], dst[64], sql[512];
    og_payout_put_result r = {0, 0};
    og_payout_decide_req q;
    og_payout_decision d;

    snprintf(tenant, sizeof tenant, "T-%s", tag);
    snprintf(ben, sizeof ben, "BEN-%s", tag);
    snprintf(dst, sizeof dst, "DST-%s", tag);
    {
        og_payout_tenant_settings t = {tenant, false, 5000000, "EUR", 0};
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    }
    {
        og_payout_beneficiary_record b = {ben, tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    }
    {
        og_payout_destination_record dr = {dst, ben, token};
        assert_int_equal(og_payout_destination_put(s, &dr, 0, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    }
    if (g_pg)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = clock_timestamp() -"
                 " interval '30 days' WHERE destination_id = '%s'",
                 dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = %lld"
                 " WHERE destination_id = '%s'",
                 (long long)(payouts_wall_us() - 30 * PAYOUT_DAY_US), dst);
    payouts_raw(st, sql);
    {
        og_payout_draft_req dq = {
            id, {tenant, ben, dst, 1, "4250.00", "EUR", "invoice INV-9031"},
            "clerk-22"};
        assert_int_equal(og_payout_draft(s, &dq, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    }
    memset(&q, 0, sizeof q);
    q.payout_id = id;
    q.requester_id = "clerk-22";
    q.requester_role = "accounts-payable";
    q.requester_approval_limit = 1000000;
    q.correlation_id = "COR-8812";
    q.audience = audience;
    q.not_before_us = payouts_wall_us() - 1000000;
    q.expires_at_us = q.not_before_us + 30 * 60 * INT64_C(1000000);
    assert_int_equal(og_payout_decide(s, &q, &d), 0);
    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

/* The payout's state once it leaves Approved, or after timeout_ms. */
static og_payout_state payouts_wait_paid(og_store *s, const char *id,
                                         int timeout_ms)
{
    og_payout_view v;
    int64_t deadline = t_now_ms() + timeout_ms;

    for (;;) {
        memset(&v, 0, sizeof v);
        assert_int_equal(og_payout_get(s, id, &v), 1);
        if (v.state == OG_PAYOUT_STATE_PAID || t_now_ms() > deadline)
            return v.state;
        t_sleep_ms(100);
    }
}

void serve_runner_pays_an_allowed_payout_once(void **state)
{
    char id[64], tag[16], uuid[OG_UUID_LEN + 1], token[64], line[256];
    og_payout_decision d;
    og_store *s = NULL;
    og_store_options o;
    xenv x;

    (void)state;
    uuid4(uuid);
    snprintf(tag, sizeof tag, "%.8s", uuid);
    snprintf(id, sizeof id, "PAY-3107-%s", tag);
    snprintf(token, sizeof token, "tok_SECRET_%.8s%.4s", uuid, uuid + 9);
    secret_add(token); /* the teardown scans every log line for it */

    xenv_prepare(&x, "payout-runner", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, true);
    assert_int_equal(srv_start(x.s), 0);
    assert_true(log_wait_for(x.s, "\"event\":\"payouts_started\"", 10000));

    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    d = payouts_seed(x.st, s, tag, id, token, "payout-worker");

    assert_int_equal(payouts_wait_paid(s, id, 60000), OG_PAYOUT_STATE_PAID);
    assert_sbx_stat(&x, "payouts_created", 1);
    assert_sbx_stat(&x, "payout_requests", 1);

    /* The job's log line: the identifiers, what came of it. */
    snprintf(line, sizeof line, "\"payout_id\":\"%s\"", id);
    assert_true(log_wait_for(x.s, line, 10000));
    snprintf(line, sizeof line, "\"grant_id\":\"%s\"", d.grant_id);
    assert_true(log_wait_for(x.s, line, 10000));
    assert_true(log_wait_for(x.s, "\"correlation_id\":\"COR-8812\"", 10000));
    assert_true(log_wait_for(x.s, "\"end\":\"sent\"", 10000));

    /* /metrics: the runner's counters, non-zero where the payout went. */
    {
        hres r;

        get(&r, x.s, "/metrics", NULL);
        assert_http(&r, 200);
        assert_true(metric_value(r.body,
                                 "oncegate_payout_jobs_total{end=\"sent\"}") ==
                    1);
        assert_true(metric_value(r.body, "oncegate_payout_sends_total") == 1);
        assert_true(metric_value(r.body, "oncegate_payout_job_reasons_total{"
                                         "reason=\"claim.lost\"}") == 0);
        assert_true(metric_value(r.body, "oncegate_payout_reconciler_total{"
                                         "outcome=\"succeeded\"}") == 0);
        /* Paid: no payout attempt is Unknown */
        assert_true(metric_value(r.body,
                                 "oncegate_payout_attempts_backlog{status="
                                 "\"unknown\",age=\"lt_1m\"}") == 0);
        hres_free(&r);
    }
    og_store_free(s);
}

void serve_refuses_a_payout_timing_relation_that_fails(void **state)
{
    char *log = NULL;
    xenv x;

    (void)state;
    xenv_prepare(&x, "payout-p1", false, LOADED_STORE_TIMEOUT_MS, 0, true);
    payouts_conf(&x, true);
    /* R3: 3 sends x 10 s + 10 s + the store timeout > 20 s */
    json_object_set_new(json_object_get(x.st->conf, "payouts"),
                        "attempt_lease_ms", json_integer(20000));
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(run_refused(x.st, &log), 78);
    assert_non_null(strstr(log, "payouts.attempt_lease_ms: R3"));
    free(log);
}

void payout_worker_command_pays_an_allowed_payout_once(void **state)
{
    char id[64], tag[16], uuid[OG_UUID_LEN + 1], token[64], line[256];
    char out[PATHLEN], errp[PATHLEN], *text, *log;
    char *argv[] = {(char *)g_bin, "payout-worker", "--config", NULL,
                    "--until-idle", NULL};
    og_payout_decision d;
    og_store *s = NULL;
    og_store_options o;
    unsigned n = ++g_srv_seq;
    json_t *j;
    xenv x;
    int code;

    (void)state;
    uuid4(uuid);
    snprintf(tag, sizeof tag, "%.8s", uuid);
    snprintf(id, sizeof id, "PAY-3107-%s", tag);
    snprintf(token, sizeof token, "tok_SECRET_%.8s%.4s", uuid, uuid + 9);
    secret_add(token);

    /* serve is not started: the worker process alone pays. */
    xenv_prepare(&x, "payout-worker", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, false);
    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    d = payouts_seed(x.st, s, tag, id, token, "payout-worker");

    argv[3] = x.st->config;
    snprintf(out, sizeof out, "%s/payout-worker-%03u.out", g_tmp, n);
    snprintf(errp, sizeof errp, "%s/payout-worker-%03u.log", g_tmp, n);
    outfile_add(out, OUT_STDOUT);
    outfile_add(errp, OUT_LOG_JSON);
    code = t_proc_run(argv, out, errp, 60000);
    text = t_slurp(out, NULL);
    log = t_slurp(errp, NULL);
    if (code != 0)
        fail_msg("payout-worker: exit %d\nstdout: %s\nstderr: %s", code,
                 text ? text : "", log ? log : "");
    j = text ? json_loads(text, 0, NULL) : NULL;
    assert_non_null(j);
    assert_str(jstr(j, "job"), "payout-worker");
    assert_int_equal(jint(json_object_get(j, "ends"), "sent"), 1);
    assert_int_equal(jint(j, "sends"), 1);
    assert_int_equal(jint(j, "errors"), 0);
    json_decref(j);

    assert_int_equal(payouts_wait_paid(s, id, 1000), OG_PAYOUT_STATE_PAID);
    assert_sbx_stat(&x, "payouts_created", 1);
    snprintf(line, sizeof line, "\"grant_id\":\"%s\"", d.grant_id);
    assert_non_null(strstr(log, line));
    snprintf(line, sizeof line, "\"payout_id\":\"%s\"", id);
    assert_non_null(strstr(log, line));
    assert_null(strstr(log, token));
    free(text);
    free(log);
    og_store_free(s);

    /* A relation that fails refuses to start, whatever payouts.runner says. */
    json_object_set_new(json_object_get(x.st->conf, "payouts"),
                        "job_lease_ms", json_integer(1000));
    assert_int_equal(site_write(x.st), 0);
    n = ++g_srv_seq;
    snprintf(out, sizeof out, "%s/payout-worker-%03u.out", g_tmp, n);
    snprintf(errp, sizeof errp, "%s/payout-worker-%03u.log", g_tmp, n);
    outfile_add(out, OUT_STDOUT);
    outfile_add(errp, OUT_LOG_TEXT); /* a refusal to start: plain text */
    assert_int_equal(t_proc_run(argv, out, errp, 60000), 78);
    log = t_slurp(errp, NULL);
    assert_non_null(log);
    assert_non_null(strstr(log, "payouts.job_lease_ms: R5"));
    free(log);
}

void dev_mode_runs_the_payout_pipeline_and_pays(void **state)
{
    char id[64], tag[16], uuid[OG_UUID_LEN + 1], token[64], dir[PATHLEN];
    site *pgsite = NULL, local;
    const site *st;
    og_store *s = NULL;
    og_store_options o;
    srv *a;

    (void)state;
    uuid4(uuid);
    snprintf(tag, sizeof tag, "%.8s", uuid);
    snprintf(id, sizeof id, "PAY-3107-%s", tag);
    snprintf(token, sizeof token, "tok_SECRET_%.8s%.4s", uuid, uuid + 9);
    secret_add(token);
    if (g_pg)
        assert_non_null(pgsite = site_new("dev-payouts-pg", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-payouts", g_tmp);
    a = dev_server(dir, pgsite);
    assert_int_equal(srv_start(a), 0);
    /* on by default in dev mode, with the compiled-in payouts table */
    assert_true(log_wait_for(a, "\"event\":\"payouts_started\"", 10000));
    if (pgsite) {
        st = pgsite;
    } else {
        memset(&local, 0, sizeof local);
        assert_true(strlen(dir) + 20 < sizeof local.direct_url);
        snprintf(local.direct_url, sizeof local.direct_url,
                 "sqlite:%.1000s/oncegate.db", dir);
        st = &local;
    }
    og_store_options_default(&o);
    assert_int_equal(og_store_open(st->direct_url, &o, &s), 0);
    (void)payouts_seed(st, s, tag, id, token, "dev-payout-worker");
    assert_int_equal(payouts_wait_paid(s, id, 60000), OG_PAYOUT_STATE_PAID);
    og_store_free(s);
}

void payout_pipeline_without_its_principal_refuses_to_start(void **state)
{
    char *log = NULL;
    xenv x;

    (void)state;
    xenv_prepare(&x, "payout-noworker", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, true);
    json_object_set_new(json_object_get(x.st->conf, "payouts"), "worker_id",
                        json_string("issuer-1"));
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(run_refused(x.st, &log), 78);
    assert_non_null(strstr(log, "payouts.worker_id: no principal"));
    free(log);
}

void serve_runner_reconciles_a_lost_answer_to_paid_once(void **state)
{
    char id[64], tag[16], uuid[OG_UUID_LEN + 1], token[64];
    og_store *s = NULL;
    og_store_options o;
    json_t *p;
    hres r;
    xenv x;

    (void)state;
    uuid4(uuid);
    snprintf(tag, sizeof tag, "%.8s", uuid);
    snprintf(id, sizeof id, "PAY-3107-%s", tag);
    snprintf(token, sizeof token, "tok_SECRET_%.8s%.4s", uuid, uuid + 9);
    secret_add(token);

    xenv_prepare(&x, "payout-lost", false, 3000, 2000, true);
    site_exec_timings(x.st, 3000, 2000);
    payouts_conf(&x, true);
    /* short leases, so the reconciler sees the Unknown attempt in seconds:
     * R3: 15 s > 3 x 2 s + 1 s + 3 s; R5: 10 s > 3 x 3 s */
    p = json_object_get(x.st->conf, "payouts");
    json_object_set_new(p, "attempt_lease_ms", json_integer(15000));
    json_object_set_new(p, "job_lease_ms", json_integer(10000));
    json_object_set_new(p, "record_timeout_ms", json_integer(1000));
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(srv_start(x.s), 0);
    sbx_arm(&x, "drop_response_after_effect", -1); /* the answer is lost */

    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    (void)payouts_seed(x.st, s, tag, id, token, "payout-worker");
    assert_int_equal(payouts_wait_paid(s, id, 90000), OG_PAYOUT_STATE_PAID);
    /* sent once, found by the lookup: nothing sent twice */
    assert_sbx_stat(&x, "payout_requests", 1);
    assert_sbx_stat(&x, "payouts_created", 1);

    get(&r, x.s, "/metrics", NULL);
    assert_http(&r, 200);
    assert_true(metric_value(r.body,
                             "oncegate_payout_jobs_total{end=\"sent\"}") == 1);
    assert_true(metric_value(r.body, "oncegate_payout_reconciler_total{"
                                     "outcome=\"looked_up\"}") >= 1);
    assert_true(metric_value(r.body, "oncegate_payout_reconciler_total{"
                                     "outcome=\"succeeded\"}") == 1);
    hres_free(&r);
    og_store_free(s);
}
