/*
 * payouts.c — the payout pipeline inside `serve` (payouts.runner,
 * src/serve/payout_runner.c; docs/payouts.md, sections 5 and 6): a payout
 * decided Allowed in the store is paid by the server's own worker at the
 * sandbox, once, and its log line carries the identifiers and no secret;
 * `oncegate payout-worker --config FILE` does the same as its own process.
 * The payout signals on /metrics: the store's gauges (reservations held,
 * grants not consumed) and the runner's counters made non-zero by the
 * failures they count (fault points payout_claim_ack_lost,
 * payout_start_ack_lost and payout_claim_pause: skipped without
 * -Dfault_injection=true); the
 * operators' backlog with Unknown attempts in it; finance's writes 503
 * while the store is down, on both engines.
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
static og_payout_decision payouts_seed_at(const site *st, og_store *s,
                                          const char *tag, const char *id,
                                          const char *token,
                                          const char *audience,
                                          int64_t not_before_us,
                                          int64_t expires_at_us);

static og_payout_decision payouts_seed(const site *st, og_store *s,
                                       const char *tag, const char *id,
                                       const char *token,
                                       const char *audience)
{
    int64_t nb = payouts_wall_us() - 1000000;

    return payouts_seed_at(st, s, tag, id, token, audience, nb,
                           nb + 30 * 60 * INT64_C(1000000));
}

/* payouts_seed with the grant's window [not_before_us, expires_at_us). */
static og_payout_decision payouts_seed_at(const site *st, og_store *s,
                                          const char *tag, const char *id,
                                          const char *token,
                                          const char *audience,
                                          int64_t not_before_us,
                                          int64_t expires_at_us)
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
    q.not_before_us = not_before_us;
    q.expires_at_us = expires_at_us;
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
    snprintf(line, sizeof line, "\"decision_id\":\"%s\"", d.decision_id);
    assert_true(log_wait_for(x.s, line, 10000));

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
    snprintf(line, sizeof line, "\"decision_id\":\"%s\"", d.decision_id);
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

/* ===========================================================================
 * The payout signals on /metrics (docs/http.md, payout metrics): the
 * store's statistics, and the runner's counters made non-zero by the
 * failures they count.
 * ========================================================================= */

/* A fresh tag, payout id and destination token (added to the secrets every
 * log line is scanned for). */
static void payouts_ids(char tag[16], char id[64], char token[64])
{
    char uuid[OG_UUID_LEN + 1];

    uuid4(uuid);
    snprintf(tag, 16, "%.8s", uuid);
    snprintf(id, 64, "PAY-3107-%s", tag);
    snprintf(token, 64, "tok_SECRET_%.8s%.4s", uuid, uuid + 9);
    secret_add(token);
}

/* The value of series on s's /metrics (-1: absent). */
static double payouts_metric(const srv *s, const char *series)
{
    double v;
    hres r;

    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    v = metric_value(r.body, series);
    hres_free(&r);
    return v;
}

/* Polls series on s's /metrics until it reaches min; fails after
 * timeout_ms, with the exposition. */
static void payouts_metric_wait(const srv *s, const char *series, double min,
                                int timeout_ms)
{
    int64_t deadline = t_now_ms() + timeout_ms;
    hres r;

    for (;;) {
        get(&r, s, "/metrics", NULL);
        assert_http(&r, 200);
        if (metric_value(r.body, series) >= min) {
            hres_free(&r);
            return;
        }
        if (t_now_ms() > deadline) {
            fprintf(stderr, "%s\n", r.body);
            hres_free(&r);
            fail_msg("%s did not reach %g within %d ms", series, min,
                     timeout_ms);
        }
        hres_free(&r);
        t_sleep_ms(200);
    }
}

void metrics_show_reservations_held_and_grants_not_consumed(void **state)
{
    char id[64], id2[64], tag[16], tag2[16], token[64], token2[64];
    char series[256];
    og_payout_decision d;
    og_store *s = NULL;
    og_store_options o;
    int64_t nb;
    hres r;
    xenv x;

    (void)state;
    payouts_ids(tag, id, token);
    payouts_ids(tag2, id2, token2);
    /* The pipeline off: the reservations stay held, and the gauges come
     * from the store whether or not a runner is here. */
    xenv_prepare(&x, "payout-gauges", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, false);
    assert_int_equal(srv_start(x.s), 0);
    snprintf(series, sizeof series,
             "oncegate_payout_reservations_held{tenant=\"other tenants\"}");
    assert_true(payouts_metric(x.s, series) >= 0); /* there from the start */
    get(&r, x.s, "/metrics", NULL);
    assert_http(&r, 200);
    {
        static const char *const fams[] = {
            "oncegate_payout_reservations_held",
            "oncegate_payout_reserved_minor",
            "oncegate_payout_grants_unconsumed"};

        for (size_t i = 0; i < 3; i++) {
            char want[128];
            const char *at;

            snprintf(want, sizeof want, "# TYPE %s gauge\n", fams[i]);
            assert_non_null(at = strstr(r.body, want));
            assert_null(strstr(at + 1, want)); /* once */
            snprintf(want, sizeof want, "# HELP %s ", fams[i]);
            assert_non_null(strstr(r.body, want));
        }
    }
    hres_free(&r);
    assert_true(payouts_metric(x.s, "oncegate_payout_grants_unconsumed{"
                                    "window=\"open\"}") >= 0);

    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    /* PAY-3107 Approved, its grant open, not paid: 4,250.00 EUR held */
    d = payouts_seed(x.st, s, tag, id, token, "payout-worker");
    assert_int_equal(d.reserved_minor, 425000);
    /* another tenant's, released at a batch an hour ahead: pending */
    nb = payouts_wall_us() + 3600 * INT64_C(1000000);
    (void)payouts_seed_at(x.st, s, tag2, id2, token2, "payout-worker", nb,
                          nb + 30 * 60 * INT64_C(1000000));

    get(&r, x.s, "/metrics", NULL);
    assert_http(&r, 200);
    snprintf(series, sizeof series,
             "oncegate_payout_reservations_held{tenant=\"T-%s\"}", tag);
    assert_true(metric_value(r.body, series) == 1);
    snprintf(series, sizeof series,
             "oncegate_payout_reserved_minor{tenant=\"T-%s\"}", tag);
    assert_true(metric_value(r.body, series) == 425000);
    snprintf(series, sizeof series,
             "oncegate_payout_reserved_minor{tenant=\"T-%s\"}", tag2);
    assert_true(metric_value(r.body, series) == 425000);
    assert_true(metric_value(r.body, "oncegate_payout_grants_unconsumed{"
                                     "window=\"open\"}") >= 1);
    assert_true(metric_value(r.body, "oncegate_payout_grants_unconsumed{"
                                     "window=\"pending\"}") >= 1);
    assert_true(metric_value(r.body, "oncegate_payout_grants_unconsumed{"
                                     "window=\"expired\"}") >= 0);
    assert_null(strstr(r.body, token));
    hres_free(&r);

    /* A finance hold releases the reservation: the tenant's series goes
     * to 0 with it (it leaves the listed holders). */
    {
        char path[160];

        snprintf(path, sizeof path, "/v1/admin/payout-grants/%s/hold",
                 d.grant_id);
        post(&r, x.s, path, KEY(P_OPERATOR), NULL);
        assert_http(&r, 200);
        hres_free(&r);
    }
    snprintf(series, sizeof series,
             "oncegate_payout_reservations_held{tenant=\"T-%s\"}", tag);
    assert_true(payouts_metric(x.s, series) <= 0); /* 0 or not listed */
    og_store_free(s);
}

/* The runner's timings for the failure tests: leases short enough that the
 * sweeper takes an attempt over within seconds. R3: 6 s > 3 x 1 s + 0.5 s
 * + 1 s; R5: 4 s > 3 x 1 s. backoff: a lookup, then nothing for ten
 * minutes (R6, R7 with the default escalation). */
static void payouts_conf_fast(xenv *x, const char *fault)
{
    json_t *p;

    site_exec_timings(x->st, 1000, 1000);
    payouts_conf(x, true);
    p = json_object_get(x->st->conf, "payouts");
    json_object_set_new(p, "attempt_lease_ms", json_integer(6000));
    json_object_set_new(p, "job_lease_ms", json_integer(4000));
    json_object_set_new(p, "record_timeout_ms", json_integer(500));
    json_object_set_new(p, "postpone_ms", json_integer(1000));
    json_object_set_new(p, "backoff_ms", json_string("600000"));
    assert_int_equal(site_write(x->st), 0);
    srv_setenv(x->s, fault);
}

/* The start of a failure test: two payouts' ids, x's server running the
 * pipeline with fault point `fault` armed (OG_FAULT), and a store handle
 * on its site in *s. Skips without the fault points. */
static void payouts_fault_start(xenv *x, const char *name, const char *fault,
                                char tag[2][16], char id[2][64],
                                char token[2][64], og_store **s)
{
    og_store_options o;
    char env[96];

    if (!OG_TEST_FAULT_INJECTION) {
        fprintf(stderr, "skipped: needs the %s fault point (meson "
                        "configure -Dfault_injection=true)\n", fault);
        skip();
    }
    payouts_ids(tag[0], id[0], token[0]);
    payouts_ids(tag[1], id[1], token[1]);
    xenv_prepare(x, name, false, 1000, 1000, true);
    snprintf(env, sizeof env, "OG_FAULT=%s", fault);
    payouts_conf_fast(x, env);
    assert_int_equal(srv_start(x->s), 0);
    og_store_options_default(&o);
    assert_int_equal(og_store_open(x->st->direct_url, &o, s), 0);
}

/* A job nobody issued, written behind the store's back: payout `payout`
 * presented with grant `grant_id` (another payout's) — what a forged or
 * mixed-up queue message looks like to the worker. */
static void payouts_forge_job(const site *st, const char *payout,
                              const char *grant_id)
{
    char job[OG_UUID_LEN + 1], sql[768];

    uuid4(job);
    if (g_pg)
        snprintf(sql, sizeof sql,
                 "INSERT INTO payout_jobs (job_id, payout_id, grant_id,"
                 " correlation_id, created_at, available_at, deliveries)"
                 " VALUES ('%s', '%s', '%s', 'COR-FORGED', clock_timestamp(),"
                 " clock_timestamp(), 0)",
                 job, payout, grant_id);
    else
        snprintf(sql, sizeof sql,
                 "INSERT INTO payout_jobs (job_id, payout_id, grant_id,"
                 " correlation_id, created_at, available_at, deliveries)"
                 " VALUES ('%s', '%s', '%s', 'COR-FORGED', %lld, %lld, 0)",
                 job, payout, grant_id, (long long)payouts_wall_us(),
                 (long long)payouts_wall_us());
    payouts_raw(st, sql);
}

/* A claim whose acknowledgment is lost (the fault point
 * payout_claim_ack_lost: the claim committed, the worker told it failed):
 * the worker sends nothing (claim_unconfirmed), the job's redelivery is a
 * duplicate, the sweeper makes the Admitted attempt NotStarted and the
 * payout is Approved again; a job whose grant's window has ended is a
 * validation refusal with its reason code, and a job presenting another
 * payout's grant a security signal. Each counted on /metrics. */
void payout_failures_are_counted_on_metrics(void **state)
{
    char id[2][64], tag[2][16], token[2][64], line[160];
    og_payout_decision d;
    og_store *s = NULL;
    og_payout_view v;
    int64_t nb;
    xenv x;

    (void)state;
    payouts_fault_start(&x, "payout-claim-lost", "payout_claim_ack_lost",
                        tag, id, token, &s);
    assert_true(payouts_metric(x.s, "oncegate_payout_jobs_total{end="
                                    "\"claim_unconfirmed\"}") == 0);
    d = payouts_seed(x.st, s, tag[0], id[0], token[0], "payout-worker");
    /* a grant whose window ended a minute ago */
    nb = payouts_wall_us() - 31 * 60 * INT64_C(1000000);
    (void)payouts_seed_at(x.st, s, tag[1], id[1], token[1], "payout-worker", nb,
                          nb + 30 * 60 * INT64_C(1000000));
    /* the first payout's grant presented for the second: a security
     * signal, refused binding.mismatch */
    payouts_forge_job(x.st, id[1], d.grant_id);

    payouts_metric_wait(x.s, "oncegate_payout_jobs_total{end="
                             "\"claim_unconfirmed\"}", 1, 20000);
    payouts_metric_wait(x.s, "oncegate_payout_job_reasons_total{reason="
                             "\"binding.mismatch\"}", 1, 20000);
    payouts_metric_wait(x.s, "oncegate_payout_security_signals_total", 1,
                        5000);
    payouts_metric_wait(x.s, "oncegate_payout_jobs_total{end=\"duplicate\"}",
                        1, 30000);
    payouts_metric_wait(x.s, "oncegate_payout_sweeper_total{result="
                             "\"not_started\"}", 1, 30000);
    payouts_metric_wait(x.s, "oncegate_payout_job_reasons_total{reason="
                             "\"grant.expired\"}", 1, 20000);
    assert_true(payouts_metric(x.s, "oncegate_payout_jobs_total{end="
                                    "\"refused\"}") >= 1);
    assert_true(payouts_metric(x.s, "oncegate_payout_sweeper_total{result="
                                    "\"taken\"}") >= 1);
    assert_true(payouts_metric(x.s, "oncegate_payout_sends_total") == 0);
    /* nothing reached the provider; the payout waits for fresh authority */
    assert_sbx_stat(&x, "payout_requests", 0);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_get(s, id[0], &v), 1);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    /* the job lines carry the decision id, and never the token (the
     * teardown scans every line for it) */
    snprintf(line, sizeof line, "\"decision_id\":\"%s\"", d.decision_id);
    assert_true(log_wait_for(x.s, line, 10000));
    og_store_free(s);
}

/* Moves attempt op's creation `hours` into the past, behind the store's
 * back, so the backlog's order by age is visible. */
static void payouts_age_attempt(const site *st, const char *op, int hours)
{
    char sql[256];

    if (g_pg)
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET created_at = created_at - interval"
                 " '%d hours' WHERE operation_id = '%s'",
                 hours, op);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET created_at = created_at - %lld"
                 " WHERE operation_id = '%s'",
                 (long long)hours * 3600 * INT64_C(1000000), op);
    payouts_raw(st, sql);
}

/* The payout's active attempt once the payout is Unknown (fails after
 * timeout_ms). */
static void payouts_wait_unknown(og_store *s, const char *id, int timeout_ms,
                                 char attempt[OG_UUID_LEN + 1])
{
    int64_t deadline = t_now_ms() + timeout_ms;
    og_payout_view v;

    for (;;) {
        memset(&v, 0, sizeof v);
        assert_int_equal(og_payout_get(s, id, &v), 1);
        if (v.state == OG_PAYOUT_STATE_UNKNOWN) {
            memcpy(attempt, v.active_attempt, OG_UUID_LEN + 1);
            return;
        }
        if (t_now_ms() > deadline)
            fail_msg("%s: %s, not Unknown", id, og_payout_state_name(v.state));
        t_sleep_ms(200);
    }
}

/* A Started write whose acknowledgment is lost (payout_start_ack_lost):
 * the worker sends nothing (start_unconfirmed), the sweeper makes the
 * attempt Unknown, the reconciler looks it up, finds nothing final yet and
 * decides again later — the backlog an operator reads, oldest first. */
void payout_backlog_lists_unknown_attempts_by_age(void **state)
{
    char id[2][64], tag[2][16], token[2][64];
    char a1[OG_UUID_LEN + 1], a2[OG_UUID_LEN + 1];
    og_payout_decision d1, d2;
    og_store *s = NULL;
    json_t *b, *e;
    hres r;
    xenv x;

    (void)state;
    payouts_fault_start(&x, "payout-backlog", "payout_start_ack_lost", tag,
                        id, token, &s);
    d1 = payouts_seed(x.st, s, tag[0], id[0], token[0], "payout-worker");
    d2 = payouts_seed(x.st, s, tag[1], id[1], token[1], "payout-worker");
    payouts_wait_unknown(s, id[0], 40000, a1);
    payouts_wait_unknown(s, id[1], 40000, a2);
    payouts_age_attempt(x.st, a2, 2); /* the second is the older */

    payouts_metric_wait(x.s, "oncegate_payout_jobs_total{end="
                             "\"start_unconfirmed\"}", 2, 10000);
    payouts_metric_wait(x.s, "oncegate_payout_sweeper_total{result="
                             "\"unknown\"}", 2, 10000);
    payouts_metric_wait(x.s, "oncegate_payout_reconciler_total{outcome="
                             "\"looked_up\"}", 2, 20000);
    payouts_metric_wait(x.s, "oncegate_payout_reconciler_total{outcome="
                             "\"later\"}", 2, 20000);
    assert_true(payouts_metric(x.s, "oncegate_payout_attempts_backlog{status="
                                    "\"unknown\",age=\"lt_1d\"}") == 1);
    assert_true(payouts_metric(x.s, "oncegate_payout_attempts_backlog{status="
                                    "\"unknown\",age=\"lt_1m\"}") +
                    payouts_metric(x.s, "oncegate_payout_attempts_backlog{"
                                        "status=\"unknown\",age=\"lt_10m\"}") ==
                1);
    /* the reservations stay held while the attempts are Unknown */
    {
        char series[160];

        snprintf(series, sizeof series,
                 "oncegate_payout_reserved_minor{tenant=\"T-%s\"}", tag[1]);
        assert_true(payouts_metric(x.s, series) == 425000);
    }

    get(&r, x.s, "/v1/admin/payout-backlog", KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_null(strstr(r.body, token[0]));
    assert_null(strstr(r.body, token[1]));
    assert_int_equal(jint(r.json, "unknown"), 2);
    assert_int_equal(jint(r.json, "needs_reconciliation"), 0);
    b = json_object_get(r.json, "backlog");
    assert_int_equal(json_array_size(b), 2);
    /* oldest first: the attempt made two hours older */
    e = json_array_get(b, 0);
    assert_str(jstr(e, "attempt"), a2);
    assert_str(jstr(e, "payout"), id[1]);
    assert_str(jstr(e, "grant"), d2.grant_id);
    assert_str(jstr(e, "status"), "Unknown");
    assert_true(jint(e, "owner_version") >= 2); /* the sweeper's takeover */
    assert_true(jint(e, "age_seconds") >= 7200);
    assert_non_null(jstr(e, "created_at"));
    assert_non_null(jstr(e, "updated_at"));
    e = json_array_get(b, 1);
    assert_str(jstr(e, "attempt"), a1);
    assert_str(jstr(e, "payout"), id[0]);
    assert_str(jstr(e, "grant"), d1.grant_id);
    assert_true(jint(e, "age_seconds") < 7200);
    assert_null(json_object_get(e, "provider_token"));
    assert_null(json_object_get(e, "token"));
    hres_free(&r);
    /* limit=1: the oldest alone */
    get(&r, x.s, "/v1/admin/payout-backlog?limit=1", KEY(P_OPERATOR));
    assert_http(&r, 200);
    b = json_object_get(r.json, "backlog");
    assert_int_equal(json_array_size(b), 1);
    assert_str(jstr(json_array_get(b, 0), "attempt"), a2);
    hres_free(&r);
    /* nothing was sent: a lost Started acknowledgment sends nothing */
    assert_sbx_stat(&x, "payout_requests", 0);
    og_store_free(s);
}

/* ===========================================================================
 * The store down: finance's writes are 503 retry_later on both engines.
 * SQLite's outage is a writer holding the lock (store_down): finance's
 * routes write (a hold, a re-authorization's decision, a resubmitted job),
 * so on records that exist they wait for the lock and answer 503 like any
 * write. A read is not stopped by it — WAL readers never wait for a writer
 * — so the payout read answers 200 there (docs/http.md says so), and 503
 * on PostgreSQL, where the outage cuts the connection.
 * ========================================================================= */
void payout_finance_is_503_retry_later_while_the_store_is_down(void **state)
{
    char id[64], tag[16], token[64], path[200], key[OG_UUID_LEN + 1];
    char release[40];
    og_payout_decision d;
    og_store *s = NULL;
    og_store_options o;
    og_payout_view v;
    hres r;
    xenv x;

    (void)state;
    payouts_ids(tag, id, token);
    xenv_prepare(&x, "payout-finance-outage", true, OUTAGE_STORE_TIMEOUT_MS,
                 0, true);
    payouts_conf(&x, false); /* nobody takes the job: it stays for us */
    assert_int_equal(srv_start(x.s), 0);
    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    d = payouts_seed(x.st, s, tag, id, token, "payout-worker");
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_get(s, id, &v), 1);
    og_store_free(s); /* its connection would hold no lock, but be plain */
    uuid4(key);
    og_time_format_rfc3339(payouts_wall_us() + 3600 * INT64_C(1000000),
                           release, sizeof release);

    store_down(x.st);
    snprintf(path, sizeof path, "/v1/admin/payout-grants/%s/hold",
             d.grant_id);
    post(&r, x.s, path, KEY(P_OPERATOR), NULL);
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payout-jobs/%s/resubmit",
             d.job_id);
    post(&r, x.s, path, KEY(P_OPERATOR),
         json_pack("{s:s}", "idempotency_key", key));
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s/reauthorize", id);
    post(&r, x.s, path, KEY(P_OPERATOR),
         json_pack("{s:I, s:s}", "payout_version", (json_int_t)v.version,
                   "release_at", release));
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", id);
    get(&r, x.s, path, KEY(P_OPERATOR));
    if (g_pg)
        assert_retry_later(&r, __LINE__);
    else
        assert_http(&r, 200); /* a WAL reader: the writer's lock is no
                                 outage for it */
    hres_free(&r);
    store_up(x.st);

    /* The same requests again: each applies once — the 503s wrote
     * nothing. */
    snprintf(path, sizeof path, "/v1/admin/payout-jobs/%s/resubmit",
             d.job_id);
    post_patient(&r, x.s, path, KEY(P_OPERATOR),
                 json_pack("{s:s}", "idempotency_key", key));
    assert_http(&r, 201);
    assert_str(jstr(r.json, "job_id"), key);
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payout-grants/%s/hold",
             d.grant_id);
    post(&r, x.s, path, KEY(P_OPERATOR), NULL);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "outcome"), "revoked");
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s/reauthorize", id);
    post(&r, x.s, path, KEY(P_OPERATOR),
         json_pack("{s:I, s:s}", "payout_version", (json_int_t)v.version,
                   "release_at", release));
    assert_http(&r, 200); /* a fresh decision, the first */
    hres_free(&r);
}

/* A context-fence rollback (claim.context-changed), made deterministic: the
 * claim fences the store's current policy release, which validation does
 * not read. A payout decided with its window two seconds ahead is
 * postponed to it; meanwhile an operator moves the release to a version
 * this build does not know; when the window opens the worker validates,
 * claims, and the claim rolls back. Nothing is sent, the payout stays
 * Approved and its reservation held until a fresh decision. */
void payout_fence_rollback_is_counted_on_metrics(void **state)
{
    char id[64], tag[16], token[64], cur[OG_ID_MAX + 1], series[160];
    og_payout_write wr;
    og_store *s = NULL;
    og_store_options o;
    og_payout_view v;
    int64_t nb;
    xenv x;

    (void)state;
    payouts_ids(tag, id, token);
    xenv_prepare(&x, "payout-fence", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, true);
    assert_int_equal(srv_start(x.s), 0);
    assert_true(log_wait_for(x.s, "\"event\":\"payouts_started\"", 10000));
    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    nb = payouts_wall_us() + 2 * INT64_C(1000000);
    (void)payouts_seed_at(x.st, s, tag, id, token, "payout-worker", nb,
                          nb + 30 * 60 * INT64_C(1000000));
    assert_int_equal(og_payout_policy_release_get(s, cur), 0);
    assert_string_equal(cur, OG_PAYOUT_POLICY_VERSION);
    assert_int_equal(og_payout_policy_release_set(s, "payout-policy-next",
                                                  cur, "ops-1", &wr),
                     0);
    assert_int_equal(wr, OG_PAYOUT_WRITTEN);

    payouts_metric_wait(x.s, "oncegate_payout_job_reasons_total{reason="
                             "\"claim.context-changed\"}", 1, 30000);
    assert_true(payouts_metric(x.s, "oncegate_payout_jobs_total{end="
                                    "\"refused\"}") >= 1);
    assert_true(payouts_metric(x.s, "oncegate_payout_sends_total") == 0);
    assert_sbx_stat(&x, "payout_requests", 0);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_get(s, id, &v), 1);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    snprintf(series, sizeof series,
             "oncegate_payout_reserved_minor{tenant=\"T-%s\"}", tag);
    assert_true(payouts_metric(x.s, series) == 425000);
    og_store_free(s);
}

/* The job's deliveries (how often a worker took it; -1: no such job), read
 * behind the library's back on the test's own connection. */
static int64_t payouts_job_deliveries(const site *st, const char *job_id)
{
    char sql[256];
    int64_t n = -1;

    snprintf(sql, sizeof sql,
             "SELECT deliveries FROM payout_jobs WHERE job_id = '%s'", job_id);
    if (g_pg) {
        PGconn *c = PQconnectdb(st->direct_url);
        PGresult *r;

        assert_int_equal(PQstatus(c), CONNECTION_OK);
        r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("%s: %s", sql, PQerrorMessage(c));
        if (PQntuples(r) == 1)
            n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        PQfinish(c);
    } else {
        sqlite3 *db = NULL;
        sqlite3_stmt *q = NULL;

        assert_int_equal(sqlite3_open(st->direct_url + 7, &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 10000);
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
        if (sqlite3_step(q) == SQLITE_ROW)
            n = sqlite3_column_int64(q, 0);
        sqlite3_finalize(q);
        sqlite3_close(db);
    }
    return n;
}

/* The payout_job line s logged for grant_id (a new reference), or NULL
 * after timeout_ms. */
static json_t *payouts_job_line(const srv *s, const char *grant_id,
                                int timeout_ms)
{
    int64_t deadline = t_now_ms() + timeout_ms;

    do {
        char *log = t_slurp(s->log_path, NULL), *save = NULL;

        for (char *line = log ? strtok_r(log, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
            json_t *j, *e, *g;

            if (!strstr(line, grant_id) || !strstr(line, "payout_job"))
                continue;
            j = json_loads(line, 0, NULL);
            e = json_object_get(j, "event");
            g = json_object_get(j, "grant_id");
            if (json_is_string(e) &&
                strcmp(json_string_value(e), "payout_job") == 0 &&
                json_is_string(g) &&
                strcmp(json_string_value(g), grant_id) == 0) {
                free(log);
                return j;
            }
            json_decref(j);
        }
        free(log);
        t_sleep_ms(50);
    } while (t_now_ms() < deadline);
    return NULL;
}

/* A claim lost (claim.lost), made deterministic by the fault point
 * payout_claim_pause: the server's worker takes the job, validates, and its
 * claim waits 1500 ms before it begins; in that window the test — a second
 * claimant on its own store object — spends the payout grant with an
 * ordinary admission of its row (another binding's attempt). The worker's
 * claim finds the grant consumed by something that is not its binding's
 * attempt: LOST, nothing sent, a security signal. (A second og_payout_claim
 * of the same grant would be the same binding's attempt, and the later
 * claim a duplicate.) Three rounds, each a claim.lost, never a
 * grant.consumed: the consumption always lands after the validation. */
void payout_claim_lost_is_counted_on_metrics(void **state)
{
    char id[64], tag[16], token[64], op[OG_UUID_LEN + 1];
    og_store *s = NULL, *rival = NULL;
    og_store_options o;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_view v;
    og_admission adm;
    json_t *j;
    xenv x;
    const int rounds = 3;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        fprintf(stderr, "skipped: needs the payout_claim_pause fault point "
                        "(meson configure -Dfault_injection=true)\n");
        skip();
    }
    xenv_prepare(&x, "payout-claim-lost", false, LOADED_STORE_TIMEOUT_MS, 0,
                 true);
    payouts_conf(&x, true);
    srv_setenv(x.s, "OG_FAULT=payout_claim_pause");
    assert_int_equal(srv_start(x.s), 0);
    assert_true(log_wait_for(x.s, "\"event\":\"payouts_started\"", 10000));
    og_store_options_default(&o);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &s), 0);
    assert_int_equal(og_store_open(x.st->direct_url, &o, &rival), 0);

    for (int i = 0; i < rounds; i++) {
        int64_t deadline;

        payouts_ids(tag, id, token);
        d = payouts_seed(x.st, s, tag, id, token, "payout-worker");
        /* the job taken: the worker validates and enters its claim */
        deadline = t_now_ms() + 20000;
        while (payouts_job_deliveries(x.st, d.job_id) < 1) {
            if (t_now_ms() > deadline)
                fail_msg("job %s not taken within 20 s", d.job_id);
            t_sleep_ms(20);
        }
        /* the validation's reads done (600 ms: OG__FAULT_CLAIM_PAUSE_MS
         * says why), the claim still waiting: the rival spends the grant */
        t_sleep_ms(600);
        {
            og_grant gr = {OG_PAYOUT_ISSUER, d.grant_id,
                           payouts_wall_us() + 30 * 60 * INT64_C(1000000),
                           NULL, OG_FORM_ROW};
            og_intent in;

            uuid4(op);
            in.operation_id = op;
            in.caller_id = "gateway-2";
            in.account_id = "ACC-2";
            in.amount = "4250.00";
            in.currency = "EUR";
            memset(&adm, 0, sizeof adm);
            assert_int_equal(og_admit(rival, &gr, &in, &adm), 0);
            assert_int_equal(adm.outcome, OG_OUTCOME_ADMITTED);
        }
        payouts_metric_wait(x.s, "oncegate_payout_job_reasons_total{reason="
                                 "\"claim.lost\"}", i + 1, 20000);
        /* the grant is the rival's; the payout waits, nothing sent */
        memset(&g, 0, sizeof g);
        assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
        assert_string_equal(g.consumed_by_operation, op);
        memset(&v, 0, sizeof v);
        assert_int_equal(og_payout_get(s, id, &v), 1);
        assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
        /* the worker's line: the reason, no attempt, no send; the token
         * never (the teardown scans every line for it) */
        j = payouts_job_line(x.s, d.grant_id, 10000);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "reason")),
                            "claim.lost");
        assert_string_equal(json_string_value(json_object_get(j, "end")),
                            "refused");
        assert_string_equal(
            json_string_value(json_object_get(j, "attempt_id")), "");
        assert_int_equal(json_integer_value(json_object_get(j, "sends")), 0);
        assert_true(json_is_true(json_object_get(j, "security_signal")));
        assert_string_equal(
            json_string_value(json_object_get(j, "decision_id")),
            d.decision_id);
        json_decref(j);
    }
    assert_true(payouts_metric(x.s, "oncegate_payout_job_reasons_total{reason="
                                    "\"claim.lost\"}") == rounds);
    assert_true(payouts_metric(x.s, "oncegate_payout_job_reasons_total{reason="
                                    "\"grant.consumed\"}") == 0);
    assert_true(payouts_metric(x.s, "oncegate_payout_jobs_total{end="
                                    "\"refused\"}") == rounds);
    assert_true(payouts_metric(x.s, "oncegate_payout_sends_total") == 0);
    assert_sbx_stat(&x, "payout_requests", 0);
    og_store_free(rival);
    og_store_free(s);
}
