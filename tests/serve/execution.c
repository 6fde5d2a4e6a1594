/*
 * execution.c — executing a credit against the sandbox provider
 * (docs/sandbox.md, docs/design.md "Execution: one owner at a time"):
 * applied once with the operation id as key, refusals, the server-side
 * bound, a dropped answer, the recovery loop, retries while in flight,
 * timeouts, transient refusals, the store unavailable at admission.
 */
#include "harness.h"
#include "cases.h"

void executed_operation_is_applied_once_with_the_operation_id_as_key(
    void **state)
{
    char op[OG_UUID_LEN + 1], path[256], ref[128];
    xenv x;
    grant g;
    hres r;
    json_t *credits, *c;

    xenv_start(&x, "exec-applied", false, LOADED_STORE_TIMEOUT_MS, 0, true);
    issue_grant_account(x.s, &g, ACCOUNT);
    uuid4(op);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "succeeded");
    assert_str(jstr(r.json, "result"), "applied");
    assert_str(jstr(r.json, "outcome"), "admitted");
    assert_non_null(jstr(r.json, "provider_reference"));
    assert_true(strncmp(jstr(r.json, "provider_reference"), "cr_", 3) == 0);
    snprintf(ref, sizeof ref, "%s", jstr(r.json, "provider_reference"));
    hres_free(&r);

    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    /* The credit was created under the operation id as key and reference. */
    snprintf(path, sizeof path, "/v1/credits?idempotency_key=%s", op);
    sbx_http(&r, x.sbx, "GET", path, sbx_key(&x), NULL);
    assert_http(&r, 200);
    credits = json_object_get(r.json, "credits");
    assert_int_equal(json_array_size(credits), 1);
    c = json_array_get(credits, 0);
    assert_str(jstr(c, "id"), ref);
    assert_str(jstr(c, "reference"), op);
    assert_str(jstr(c, "account"), ACCOUNT);
    assert_str(jstr(c, "amount"), "250");
    assert_str(jstr(c, "currency"), CURRENCY);
    assert_str(jstr(c, "status"), "succeeded");
    hres_free(&r);

    assert_op_status(&r, x.s, op, "succeeded");
    assert_str(jstr(r.json, "provider_reference"), ref);
    hres_free(&r);

    /* The same operation again: the stored answer, no billing call. */
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "succeeded");
    assert_str(jstr(r.json, "result"), "applied");
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    if (jstr(r.json, "provider_reference"))
        assert_str(jstr(r.json, "provider_reference"), ref);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
}

/* Concurrent executions each record their outcome once through the group
 * commit of outcomes (docs/design.md, "Group commit of outcomes"): every
 * credit applied exactly once, every operation Succeeded, and every
 * outcome write counted in exactly one batch on /metrics, on both
 * engines. */
#define OUTCOME_RACERS 16

typedef struct outcome_race {
    grant g[OUTCOME_RACERS];
    int next;
} outcome_race;

static char *outcome_body_for(racer *me, const void *arg)
{
    outcome_race *o = (outcome_race *)arg;
    json_t *b = exec_body(me->op, o->g[o->next++].token, ACCOUNT);
    char *t = json_dumps(b, JSON_COMPACT);

    json_decref(b);
    return t;
}

static double outcome_writes(const srv *s)
{
    hres r;
    double v;

    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    v = metric_value(r.body, "oncegate_outcome_batched_writes_total");
    hres_free(&r);
    return v;
}

void concurrent_executions_each_record_once_through_the_outcome_batches(
    void **state)
{
    outcome_race *o = calloc(1, sizeof *o);
    racer *rs = calloc(OUTCOME_RACERS, sizeof *rs);
    double before, after;
    xenv x;
    hres r;

    (void)state;
    assert_non_null(o);
    assert_non_null(rs);
    xenv_start(&x, "exec-outcome-batch", false, LOADED_STORE_TIMEOUT_MS, 0,
               true);
    for (int i = 0; i < OUTCOME_RACERS; i++)
        issue_grant_account(x.s, &o->g[i], ACCOUNT);
    before = outcome_writes(x.s);
    assert_true(before >= 0);
    race(rs, OUTCOME_RACERS, x.s, x.s, "/v1/operations", KEY(P_AGENT),
         outcome_body_for, o);
    for (int i = 0; i < OUTCOME_RACERS; i++) {
        if (rs[i].r.status != 200)
            race_report("outcome batch", 0, rs, OUTCOME_RACERS);
        assert_int_equal(rs[i].r.status, 200);
        assert_str(jstr(rs[i].r.json, "result"), "applied");
        assert_op_status(&r, x.s, rs[i].op, "succeeded");
        hres_free(&r);
    }
    assert_sbx_stat(&x, "credits_created", OUTCOME_RACERS);
    assert_sbx_stat(&x, "create_requests", OUTCOME_RACERS);
    after = outcome_writes(x.s); /* both engines batch them */
    assert_true(after - before == OUTCOME_RACERS);
    race_free(rs, OUTCOME_RACERS);
    free(rs);
    free(o);
}

/* With a provider the service executes credit.apply only (recovery would
 * send any stalled operation to the credit provider): a presentation for
 * another action is refused before validation and the store, 422
 * action_not_executable — nothing admitted, nothing billed — and the same
 * grant and operation id then execute under the grant's own action. */
void action_other_than_credit_apply_is_422_and_changes_nothing(
    void **state)
{
    char op[OG_UUID_LEN + 1], path[128];
    json_t *body;
    xenv x;
    grant g;
    hres r;

    xenv_start(&x, "action", false, LOADED_STORE_TIMEOUT_MS, 0, true);
    issue_grant_account(x.s, &g, ACCOUNT);
    uuid4(op);
    body = admit_body(op, g.token);
    json_object_set_new(body, "action", json_string("refund.apply"));
    post(&r, x.s, "/v1/operations", KEY(P_AGENT), body);
    assert_error(&r, 422, "action_not_executable");
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(&r, x.s, path, KEY(P_AGENT));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 0);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "result"), "applied");
    hres_free(&r);
    assert_sbx_stat(&x, "credits_created", 1);
}

/* Runs sql in the site's own database (PostgreSQL) as the superuser. */
static void pg_site_exec(const site *st, const char *sql)
{
    PGconn *c = PQconnectdb(st->direct_url);
    PGresult *r = PQexec(c, sql);

    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

/* A PostgreSQL deployment that runs admissions as a role which does not
 * carry the server-side bound (store_bounds_from_role: the role must) is
 * refused at startup, naming the missing setting; once the role carries
 * finite statement_timeout and lock_timeout within store_timeout, the same
 * configuration starts. */
void deployment_without_the_server_side_bound_is_refused_at_startup(
    void **state)
{
    char role[64], url[512], sql[512], *log = NULL;
    site *st;
    srv *s;
    int code;

    if (!g_pg) {
        skip(); /* SQLite has no such settings: its bound is the client's */
        return;
    }
    assert_non_null(st = site_new("no-bound", false, 0, true));
    snprintf(role, sizeof role, "og_nobound_%ld", (long)getpid());
    snprintf(sql, sizeof sql, "CREATE ROLE %s LOGIN", role);
    assert_int_equal(pg_admin(sql), 0);
    snprintf(sql, sizeof sql,
             "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
             "public TO %s; GRANT USAGE ON ALL SEQUENCES IN SCHEMA public "
             "TO %s",
             role, role);
    pg_site_exec(st, sql);
    snprintf(url, sizeof url, "postgresql://%s@%s:%d/%s", role, g_pg_host,
             g_pg_port, st->db);
    json_object_set_new(st->conf, "store", json_string(url));
    json_object_set_new(st->conf, "store_bounds_from_role", json_true());
    assert_int_equal(site_write(st), 0);

    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "statement_timeout=0ms"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(strstr(log, "statement_timeout=0ms"));
    free(log);

    snprintf(sql, sizeof sql,
             "ALTER ROLE %s SET statement_timeout = '2s'; "
             "ALTER ROLE %s SET lock_timeout = '2s'",
             role, role);
    assert_int_equal(pg_admin(sql), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);

    snprintf(sql, sizeof sql, "DROP OWNED BY %s", role);
    pg_site_exec(st, sql);
    snprintf(sql, sizeof sql, "DROP ROLE %s", role);
    assert_int_equal(pg_admin(sql), 0);
}

void definite_refusal_is_failed_and_the_grant_stays_spent(void **state)
{
    char op[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;

    xenv_start(&x, "exec-refused", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g, "closed-9");
    uuid4(op);
    execute(&r, x.s, op, g.token, "closed-9");
    assert_http(&r, 422);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "failed");
    assert_str(jstr(r.json, "result"), "rejected");
    assert_str(jstr(r.json, "error"), "provider_rejected");
    assert_str(jstr(r.json, "reason"), "account_closed");
    assert_str(jstr(r.json, "outcome"), "admitted");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 0);

    assert_op_status(&r, x.s, op, "failed");
    assert_str(jstr(r.json, "reason"), "account_closed");
    assert_true(json_is_null(json_object_get(r.json, "provider_reference")) ||
                !json_object_get(r.json, "provider_reference"));
    hres_free(&r);

    /* The same operation: its stored verdict, 200 failed, no billing call. */
    execute(&r, x.s, op, g.token, "closed-9");
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "failed");
    assert_str(jstr(r.json, "result"), "rejected");
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);

    /* The grant was spent on the refused operation. */
    uuid4(op2);
    execute(&r, x.s, op2, g.token, "closed-9");
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 0);
}

void dropped_response_is_pending_unknown_and_one_credit_exists(
    void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;

    xenv_start(&x, "exec-dropped", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g, ACCOUNT);
    sbx_arm(&x, "drop_response_after_effect", -1);
    uuid4(op);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_pending(&r, op, "unknown", "admitted", __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "create_requests", 1);

    assert_op_status(&r, x.s, op, "unknown");
    hres_free(&r);

    /* The same operation: still pending, and no second billing call. */
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_pending(&r, op, "unknown", "already_admitted", __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
}

/* The background recovery loop settles an operation whose answer was
 * lost: after the execution lease ends, it takes the operation over, finds
 * the credit by lookup and records Succeeded — one credit, no second create
 * request. Short timings so the lease ends within seconds. */
void recovery_loop_settles_a_lost_answer_by_lookup(void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;
    int64_t deadline;

    xenv_prepare(&x, "exec-recovery", false, 1000, 1000, false);
    site_exec_timings(x.st, 1000, 1000);
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(srv_start(x.s), 0);
    issue_grant_account(x.s, &g, ACCOUNT);
    sbx_arm(&x, "drop_response_after_effect", -1);
    uuid4(op);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_pending(&r, op, "unknown", "admitted", __LINE__);
    hres_free(&r);

    for (deadline = t_now_ms() + 30000;; ) {
        char path[128];
        const char *st;

        snprintf(path, sizeof path, "/v1/operations/%s", op);
        get(&r, x.s, path, KEY(P_AGENT));
        assert_http(&r, 200);
        st = jstr(r.json, "status");
        if (st && strcmp(st, "succeeded") == 0) {
            assert_non_null(jstr(r.json, "provider_reference"));
            assert_int_equal(json_integer_value(json_object_get(
                                 r.json, "owner_version")),
                             2);
            hres_free(&r);
            break;
        }
        hres_free(&r);
        if (t_now_ms() > deadline)
            fail_msg("recovery did not settle the operation within 30 s");
        usleep(200 * 1000);
    }
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "create_requests", 1);
}

void same_operation_retry_while_the_first_is_in_flight_gets_pending_without_a_billing_call(
    void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;
    xinflight *a;
    int64_t t0, t1;

    xenv_start(&x, "exec-inflight", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g, ACCOUNT);
    sbx_arm(&x, "delay_after_effect", 2000);
    uuid4(op);
    a = xinflight_start(x.s, op, g.token);
    /* A is in flight once the sandbox has its create request (it then
     * sleeps 2 s after the effect). */
    sbx_wait_stat(&x, "create_requests", 1);
    t0 = t_now_ms();
    execute(&r, x.s, op, g.token, ACCOUNT);
    t1 = t_now_ms();
    xinflight_join(a);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "result"), "pending");
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    assert_str(jstr(r.json, "operation_id"), op);
    hres_free(&r);
    /* It did not wait for A. */
    if (t1 - t0 >= 1500)
        fail_msg("the retry took %lld ms: it waited for the call in flight",
                 (long long)(t1 - t0));
    assert_true(t1 < a->done_ms);
    assert_http(&a->r, 200);
    assert_str(jstr(a->r.json, "status"), "succeeded");
    assert_str(jstr(a->r.json, "result"), "applied");
    assert_str(jstr(a->r.json, "outcome"), "admitted");
    xinflight_free(a);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_op_status(&r, x.s, op, "succeeded");
    hres_free(&r);
}

void provider_timeout_is_pending_unknown(void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;
    int64_t t0, took, deadline;

    /* provider_timeout 1 s: T4 (1 s < 60 s - 5 s), T5 (60 s >= 3 x 15 s +
     * 1 s + 5 s) and T6 (60 s >= 2 x 1 s + 15 s) hold with the defaults. */
    xenv_start(&x, "exec-timeout", false, LOADED_STORE_TIMEOUT_MS, 1000, false);
    issue_grant_account(x.s, &g, ACCOUNT);
    sbx_arm(&x, "delay_before_effect", 3000);
    uuid4(op);
    t0 = t_now_ms();
    execute(&r, x.s, op, g.token, ACCOUNT);
    took = t_now_ms() - t0;
    assert_pending(&r, op, "unknown", "admitted", __LINE__);
    hres_free(&r);
    /* The call was cut at its own timeout, not waited out. */
    if (took >= 2900)
        fail_msg("the answer took %lld ms: the 1 s provider timeout did not "
                 "cut the 3 s call", (long long)took);
    assert_op_status(&r, x.s, op, "unknown");
    hres_free(&r);

    /* The sandbox still applies it after its delay (and counts the request
     * only then: the delay is before the effect): exactly why the outcome
     * is unknown. A retry does not call again. */
    for (deadline = t_now_ms() + 15000; sbx_stat(&x, "credits_created") < 1;) {
        if (t_now_ms() > deadline)
            fail_msg("the delayed create never took effect");
        t_sleep_ms(100);
    }
    assert_sbx_stat(&x, "create_requests", 1);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_pending(&r, op, "unknown", "already_admitted", __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
}

void transient_refusal_leaves_the_operation_admitted(void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;

    xenv_start(&x, "exec-busy", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g, "busy-3");
    uuid4(op);
    execute(&r, x.s, op, g.token, "busy-3");
    assert_pending(&r, op, "admitted", "admitted", __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 0);
    assert_op_status(&r, x.s, op, "admitted");
    hres_free(&r);

    execute(&r, x.s, op, g.token, "busy-3");
    assert_pending(&r, op, "admitted", "already_admitted", __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
}

void store_unavailable_at_admission_makes_no_billing_call(void **state)
{
    char op[OG_UUID_LEN + 1];
    xenv x;
    grant g;
    hres r;
    json_t *body;

    xenv_start(&x, "exec-outage", true, OUTAGE_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g, ACCOUNT);
    uuid4(op);
    store_down(x.st);
    for (int i = 0; i < 2; i++) {
        execute(&r, x.s, op, g.token, ACCOUNT);
        assert_retry_later(&r, __LINE__);
        hres_free(&r);
    }
    assert_sbx_stat(&x, "create_requests", 0);
    assert_sbx_stat(&x, "credits_created", 0);
    store_up(x.st);

    /* Back: the retry is admitted and executed once (or, when a 503 hid a
     * committed admission, answered pending without a billing call). */
    body = exec_body(op, g.token, ACCOUNT);
    post_patient(&r, x.s, "/v1/operations", KEY(P_AGENT), body); /* steals */
    if (r.status == 200) {
        assert_str(jstr(r.json, "result"), "applied");
        assert_str(jstr(r.json, "outcome"), "admitted");
        hres_free(&r);
        assert_sbx_stat(&x, "create_requests", 1);
        assert_op_status(&r, x.s, op, "succeeded");
    } else {
        assert_pending(&r, op, "admitted", "already_admitted", __LINE__);
        hres_free(&r);
        assert_sbx_stat(&x, "create_requests", 0);
        assert_op_status(&r, x.s, op, "admitted");
    }
    hres_free(&r);
}

/* Kept-alive provider connections (provider.keep_alive, on by default;
 * docs/design.md KA1): the sandbox closes the kept connection under
 * every other request, before the effect (an idle close meeting the
 * request) or after it (the answer lost). libcurl re-sends each on a fresh
 * connection with the same key and body; the sandbox creates it, or
 * replays the credit the lost answer made: every credit exactly once,
 * every operation Succeeded, every answer 200 applied. */
#define KA_ROUNDS 12
void kept_alive_provider_connections_closed_by_the_sandbox_execute_every_credit_once(
    void **state)
{
    char ops[KA_ROUNDS][OG_UUID_LEN + 1];
    int i, drops = 0, closes = 0;
    xenv x;
    grant g;
    hres r;

    (void)state;
    xenv_start(&x, "exec-keepalive", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    for (i = 0; i < KA_ROUNDS; i++) {
        /* Round 0 opens the connection the later rounds reuse. */
        if (i > 0 && i % 2 == 1) {
            sbx_arm(&x, i % 4 == 1 ? "close_before_effect"
                                   : "drop_response_after_effect",
                    -1);
            if (i % 4 == 1)
                closes++;
            else
                drops++;
        }
        issue_grant_account(x.s, &g, ACCOUNT);
        uuid4(ops[i]);
        execute(&r, x.s, ops[i], g.token, ACCOUNT);
        assert_http(&r, 200);
        assert_str(jstr(r.json, "status"), "succeeded");
        assert_str(jstr(r.json, "result"), "applied");
        hres_free(&r);
    }
    assert_true(closes > 0 && drops > 0);
    for (i = 0; i < KA_ROUNDS; i++) {
        assert_op_status(&r, x.s, ops[i], "succeeded");
        hres_free(&r);
    }
    assert_sbx_stat(&x, "credits_created", KA_ROUNDS);
    assert_sbx_stat(&x, "idempotent_replays", drops);
    assert_sbx_stat(&x, "create_requests", KA_ROUNDS + drops);
}

/* The store calls of one execution, from the store latency histogram's
 * counts (GET /metrics). */
static double store_calls(const srv *s, const char *op)
{
    char series[128];
    hres m = {0};
    double v;

    snprintf(series, sizeof series,
             "oncegate_store_latency_seconds_count{op=\"%s\"}", op);
    get(&m, s, "/metrics", NULL);
    assert_http(&m, 200);
    v = metric_value(m.body, series);
    hres_free(&m);
    return v;
}

/* E6 (lib/core/execute.c): the admitting request's own admission answers
 * MaySubmit while the time since it plus the margin (lease_margin +
 * max_clock_step) is inside its lease: with the default timings an
 * execution is two store writes and no MaySubmit read; with a lease no
 * longer than that margin the store is asked, as recovery always does.
 * Either way the credit is applied once. */
/* Executes one credit on x's server and checks it was applied with one
 * admission, may_submit MaySubmit reads and one outcome write. */
static void execute_counting_store_calls(const xenv *x, double may_submit)
{
    char op[OG_UUID_LEN + 1];
    grant g;
    hres r;

    issue_grant_account(x->s, &g, ACCOUNT);
    uuid4(op);
    execute(&r, x->s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "result"), "applied");
    hres_free(&r);
    assert_true(store_calls(x->s, "admit") == 1);
    assert_true(store_calls(x->s, "may_submit") == may_submit);
    assert_true(store_calls(x->s, "record") == 1);
    assert_sbx_stat(x, "credits_created", 1);
}

void admission_answers_may_submit_only_when_its_lease_leaves_the_margin(
    void **state)
{
    xenv x;

    (void)state;
    xenv_start(&x, "exec-e6", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    execute_counting_store_calls(&x, 0);

    /* A 4.5 s lease, a 10.5 s margin (lease_margin 0.5 s + the default
     * max_clock_step 10 s): the admission cannot answer. */
    xenv_prepare(&x, "exec-e6-short", false, 1000, 1000, false);
    site_exec_timings(x.st, 1000, 1000);
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(srv_start(x.s), 0);
    execute_counting_store_calls(&x, 1);
}
