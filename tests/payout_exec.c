/*
 * payout_exec.c — the payout worker, sweeper and reconciler
 * (lib/exec/payout.c) end to end against the real engine and the real
 * oncegate-sandbox (OG_TEST_SANDBOX): a smoke group (`conformance BACKEND
 * payout-exec`), each test asserting the sandbox's counters as well as the
 * store's state. The pipeline's full matrix (docs/payouts.md, section 8)
 * is tests/pipeline/'s; these make sure the pieces run:
 *   - one payout decided, one worker pass: one create, Succeeded, Paid;
 *   - the create's answer dropped after the effect: the worker records
 *     Unknown, the reconciler looks the attempt up by its reference and
 *     records Succeeded — one create, one lookup, Paid;
 *   - a claimed attempt whose worker never started it: the sweeper makes
 *     it NotStarted and the payout Approved again, with no provider call;
 *   - a claim or a start whose acknowledgment is lost sends nothing; the
 *     sweeper settles it, and a lost start becomes NotApplied only through
 *     a lookup begun after the attempt's cutoff;
 *   - the runner's threads pay three payouts once each;
 *   - the recheck uses the approval limit the grant's decision captured
 *     (PX11): below the amount it refuses, at the amount it sends, and a
 *     grant bound to a decision that did not allow it is postponed;
 *   - an approver's acknowledgment of a recently changed destination holds
 *     at the worker: the payout is paid.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "payouts.h"
#include "support.h"
#include "oncegate/payout_exec.h"

/* The sandbox has no API key: the credential is empty (none). */
static int x_no_key(void *arg, char *out, size_t outlen)
{
    (void)arg;
    if (outlen < 1)
        return -1;
    out[0] = '\0';
    return 0;
}

typedef struct x_env {
    og_store *s;
    t_raw *raw;
    og_provider_table *t;
    t_sbx sb;
    p_world w;
    og_payout_worker_cfg wc;
    og_payout_reconciler_cfg rc;
    int64_t backoff[2];
    char url[4200];
} x_env;

static void x_env_start(x_env *e, const char *tag)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char path[4200];
    og_provider_table_error err;

    memset(e, 0, sizeof *e);
    snprintf(path, sizeof path, "%s/providers/sandbox-payouts.v1.json",
             root ? root : ".");
    if (og_provider_table_load_file(path, &e->t, &err) != 0)
        fail_msg("%s: %s", path, err.text);
    e->s = t_fresh_store(tag, e->url, sizeof e->url);
    e->raw = t_raw_open_url(e->url);
    t_sbx_start(&e->sb, "og-payexec");
    p_world_new(e->s, e->raw, &e->w, tag, 5000000);

    e->wc.worker_id = "svc-payout-worker";
    e->wc.audience = OG_PAYOUT_AUDIENCE;
    e->wc.provider_url = e->sb.url;
    e->wc.table = e->t;
    e->wc.credential = x_no_key;
    e->wc.job_lease_us = MINUTE;
    e->wc.attempt_lease_us = SEC; /* short: the tests wait it out */
    e->wc.send_window_us = 5 * MINUTE;
    e->wc.provider_timeout_us = 5 * SEC;
    e->wc.record_timeout_us = 5 * SEC;
    e->wc.postpone_us = SEC;
    e->wc.max_sends = 3;

    e->backoff[0] = SEC;
    e->backoff[1] = 2 * SEC;
    e->rc.actor = "payout-reconciler";
    e->rc.provider_url = e->sb.url;
    e->rc.table = e->t;
    e->rc.credential = x_no_key;
    e->rc.backoff_us = e->backoff;
    e->rc.backoff_n = 2;
    e->rc.escalate_after_us = 60 * MINUTE;
    e->rc.max_per_pass = 10;
    e->rc.provider_timeout_us = 5 * SEC;
}

static void x_env_stop(x_env *e)
{
    t_sbx_stop(&e->sb);
    t_raw_close(e->raw);
    og_store_free(e->s);
    og_provider_table_free(e->t);
}

/* Ends op's lease now, behind the store's back: the sweeper's takeover
 * leases an attempt for the store's recovery lease (a minute), which the
 * tests do not wait out. */
static void x_end_lease(t_raw *raw, const char *op)
{
    char sql[256];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET lease_until = clock_timestamp() -"
                 " interval '1 second' WHERE operation_id = '%s'", op);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET lease_until = %lld"
                 " WHERE operation_id = '%s'",
                 (long long)(t_now_us() - SEC), op);
    p_raw_exec(raw, sql);
}

/* A payout of 4250.00 EUR decided Allowed, its window open now. */
static og_payout_decision x_payout(x_env *e, char id[64], int n)
{
    p_id(id, &e->w, "PAY", n);
    p_draft(e->s, &e->w, id, "4250");
    return p_decide_now(e->s, id);
}

static og_operation x_attempt(og_store *s, const char *id)
{
    og_operation op;

    assert_int_equal(og_operation_get(s, id, &op), 1);
    return op;
}

static void worker_sends_once_and_the_payout_is_paid(void **state)
{
    x_env e;
    char id[64];
    og_payout_work w;
    og_payout_view v;
    og_operation op;

    (void)state;
    x_env_start(&e, "pxpaid");
    (void)x_payout(&e, id, 1);

    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    if (w.end != OG_PAYOUT_WORK_SENT)
        fail_msg("end %s reason %s error %s", og_payout_work_end_name(w.end),
                 og_payout_worker_reason_name(w.reason),
                 og_err_name(w.error));
    assert_string_equal(w.job.payout_id, id);
    assert_true(w.acknowledged);
    assert_int_equal(w.sends, 1);
    assert_int_equal(w.answer.cls, OG_CLASS_SUCCEEDED);
    assert_true(w.recorded);
    assert_int_equal(w.attempt_status, OG_OP_SUCCEEDED);
    assert_false(w.security_signal);
    /* no token in what the worker returns */
    assert_null(strstr(w.answer.reason, "SECRET"));
    assert_null(strstr(w.answer.reference, "SECRET"));

    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_string_equal(op.provider_reference, w.answer.reference);
    v = p_get(e.s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_PAID);
    assert_string_equal(v.active_attempt, "");
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_created"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_lookups"), 0);

    /* The job was acknowledged: nothing more to take. */
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    assert_int_equal(w.end, OG_PAYOUT_WORK_IDLE);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    x_env_stop(&e);
}

static void dropped_answer_is_unknown_until_the_reconciler_finds_it_paid(
    void **state)
{
    x_env e;
    char id[64];
    og_payout_work w;
    og_payout_reconcile_stats st;
    og_payout_sweep_stats sw;
    og_operation op;
    json_t *j;

    (void)state;
    x_env_start(&e, "pxdrop");
    (void)x_payout(&e, id, 1);
    j = t_sbx_control(&e.sb, "/_control/faults",
                  "{\"fault\":\"drop_response_after_effect\"}");
    json_decref(j);

    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    assert_int_equal(w.end, OG_PAYOUT_WORK_SENT);
    assert_int_equal(w.sends, 1); /* nothing resends after no answer */
    assert_int_equal(w.answer.cls, OG_CLASS_UNKNOWN);
    assert_true(w.recorded);
    assert_int_equal(w.attempt_status, OG_OP_UNKNOWN);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_UNKNOWN);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_created"), 1);

    /* The sweeper leaves an Unknown attempt to the reconciler (SW3). */
    usleep(1200 * 1000); /* past the attempt's 1 s lease */
    assert_int_equal(og_payout_sweep_once(e.s, "payout-sweeper", 10, &sw), 0);
    assert_int_equal(sw.scanned, 0);

    assert_int_equal(og_payout_reconcile_once(e.s, &e.rc, &st), 0);
    assert_int_equal(st.scanned, 1);
    assert_int_equal(st.looked_up, 1);
    assert_int_equal(st.succeeded, 1);
    assert_int_equal(st.errors, 0);
    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_true(op.provider_reference[0] != '\0');
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_PAID);
    /* one create and one lookup in all */
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_created"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_lookups"), 1);
    /* and nothing left to reconcile */
    assert_int_equal(og_payout_reconcile_once(e.s, &e.rc, &st), 0);
    assert_int_equal(st.scanned, 0);
    x_env_stop(&e);
}

/* An answer lost, then the payout returned before anyone looked: the
 * reconciler finds it returned — Succeeded (it did complete, P8) and one
 * "returned" payout event; the payout stays Paid. */
static void returned_payout_is_succeeded_with_a_return_event(void **state)
{
    x_env e;
    char id[64], path[256], where[256];
    og_payout_work w;
    og_payout_reconcile_stats st;
    og_operation op;
    json_t *j, *list;
    const char *po;

    (void)state;
    x_env_start(&e, "pxret");
    (void)x_payout(&e, id, 1);
    json_decref(t_sbx_control(&e.sb, "/_control/faults",
                          "{\"fault\":\"drop_response_after_effect\"}"));
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    assert_int_equal(w.attempt_status, OG_OP_UNKNOWN);
    op = x_attempt(e.s, w.attempt_id);

    /* the beneficiary's bank sends it back */
    snprintf(path, sizeof path, "/v1/payouts?reference=%s",
             op.client_reference);
    j = t_sbx_control(&e.sb, path, NULL);
    list = json_object_get(j, "payouts");
    assert_int_equal(json_array_size(list), 1);
    po = json_string_value(json_object_get(json_array_get(list, 0), "id"));
    assert_non_null(po);
    snprintf(path, sizeof path, "/_control/payouts/%s/return", po);
    json_decref(t_sbx_control(&e.sb, path, "{}"));

    usleep(1200 * 1000);
    assert_int_equal(og_payout_reconcile_once(e.s, &e.rc, &st), 0);
    assert_int_equal(st.succeeded, 1);
    assert_int_equal(st.returned, 1);
    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_string_equal(op.reason, "returned");
    assert_string_equal(op.provider_reference, po);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_PAID);
    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'returned'",
             id);
    assert_int_equal(p_count(e.raw, "payout_events", where), 1);
    json_decref(j);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_returned"), 1);
    x_env_stop(&e);
}

typedef struct x_worker {
    x_env *e;
    og_payout_work w;
    int rc;
} x_worker;

static void *x_worker_main(void *arg)
{
    x_worker *x = arg;

    x->rc = og_payout_work_once(x->e->s, &x->e->wc, &x->w);
    return NULL;
}

/* The answer arrives after the worker's lease lapsed and the sweeper made
 * the attempt Unknown: the worker's record changes nothing, and its
 * decisive answer resolves the attempt as late evidence (PX6) — the outcome
 * event says so — with no lookup and no second create. */
static void late_answer_after_the_sweep_is_late_evidence(void **state)
{
    x_env e;
    char id[64];
    x_worker x;
    pthread_t t;
    og_payout_sweep_stats sw;
    og_op_events h;
    og_operation op;
    bool late = false;

    (void)state;
    x_env_start(&e, "pxlate");
    (void)x_payout(&e, id, 1);
    json_decref(t_sbx_control(&e.sb, "/_control/faults",
                          "{\"fault\":\"delay_after_effect\",\"ms\":3000}"));
    memset(&x, 0, sizeof x);
    x.e = &e;
    assert_int_equal(pthread_create(&t, NULL, x_worker_main, &x), 0);
    usleep(1500 * 1000); /* the worker's 1 s lease lapsed mid-send */
    assert_int_equal(og_payout_sweep_once(e.s, "payout-sweeper", 10, &sw), 0);
    assert_int_equal(sw.unknown, 1);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(x.rc, 0);
    assert_int_equal(x.w.end, OG_PAYOUT_WORK_SENT);
    assert_int_equal(x.w.answer.cls, OG_CLASS_SUCCEEDED);
    assert_false(x.w.recorded);
    assert_true(x.w.late_evidence);
    op = x_attempt(e.s, x.w.attempt_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_int_equal(op.owner_version, 2); /* nobody's ownership restored */
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(og_op_history(e.s, x.w.attempt_id, &h), 0);
    for (size_t i = 0; i < h.n; i++)
        if (strcmp(h.v[i].kind, "outcome") == 0 &&
            h.v[i].to_status == OG_OP_SUCCEEDED)
            late = strcmp(h.v[i].source, "late-response") == 0;
    og_op_events_free(&h);
    assert_true(late);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_lookups"), 0);
    x_env_stop(&e);
}

static void claimed_attempt_never_started_is_not_started_after_the_sweep(
    void **state)
{
    x_env e;
    char id[64];
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_sweep_stats sw;
    og_payout_view v;

    (void)state;
    x_env_start(&e, "pxsweep");
    d = x_payout(&e, id, 1);
    /* A worker that claimed and died before its start. */
    c = p_claim_req(&d, "worker-7");
    c.lease_us = SEC;
    r = p_claim(e.s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    usleep(1200 * 1000);

    assert_int_equal(og_payout_sweep_once(e.s, "payout-sweeper", 10, &sw), 0);
    assert_int_equal(sw.scanned, 1);
    assert_int_equal(sw.taken, 1);
    assert_int_equal(sw.not_started, 1);
    assert_int_equal(sw.errors, 0);
    assert_int_equal(x_attempt(e.s, r.attempt.operation_id).status,
                     OG_OP_NOT_STARTED);
    v = p_get(e.s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    assert_string_equal(v.active_attempt, "");
    assert_int_equal(p_reserved(e.raw, e.w.tenant), 0);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);
    x_env_stop(&e);
}

/* The claim commits and its acknowledgment is lost (the fault point
 * payout_claim_ack_lost): the worker sends nothing and acknowledges
 * nothing; the sweeper makes the attempt NotStarted (the payout Approved
 * again, the reservation released); the job's redelivery is a duplicate. */
static void claim_ack_lost_sends_nothing_and_the_sweeper_settles_it(
    void **state)
{
    x_env e;
    char id[64];
    og_payout_work w;
    og_payout_sweep_stats sw;
    og_payout_view v;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip();
    x_env_start(&e, "pxclack");
    (void)x_payout(&e, id, 1);
    e.wc.job_lease_us = SEC; /* redelivered a second later */
    setenv("OG_FAULT", "payout_claim_ack_lost", 1);
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    unsetenv("OG_FAULT");
    assert_int_equal(w.end, OG_PAYOUT_WORK_CLAIM_UNCONFIRMED);
    assert_int_equal(w.error, OG_ESTORE_UNAVAILABLE);
    assert_false(w.acknowledged);
    assert_int_equal(w.sends, 0);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_EXECUTING);

    usleep(1200 * 1000); /* past the attempt's lease and the job's */
    assert_int_equal(og_payout_sweep_once(e.s, "payout-sweeper", 10, &sw), 0);
    assert_int_equal(sw.not_started, 1);
    v = p_get(e.s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(p_reserved(e.raw, e.w.tenant), 0);

    /* The redelivery finds the grant consumed by this binding's attempt. */
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    assert_int_equal(w.end, OG_PAYOUT_WORK_DUPLICATE);
    assert_true(w.acknowledged);
    assert_false(w.security_signal);
    assert_int_equal(w.attempt_status, OG_OP_NOT_STARTED);
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    assert_int_equal(w.end, OG_PAYOUT_WORK_IDLE);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);
    x_env_stop(&e);
}

/* og_op_start commits and its acknowledgment is lost: nothing is sent;
 * the sweeper makes the Started attempt Unknown (never NotStarted); the
 * reconciler finds nothing, waits for the attempt's cutoff (submit_by + the
 * sandbox's 5 s skew + its 0 ms visibility delay), and only a lookup that
 * began after it records NotApplied — the payout Approved again, its
 * reservation released, no create ever made. */
static void start_ack_lost_is_not_applied_only_after_the_cutoff(void **state)
{
    x_env e;
    char id[64];
    og_payout_work w;
    og_payout_sweep_stats sw;
    og_payout_reconcile_stats st;
    og_operation op;
    int64_t deadline;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip();
    x_env_start(&e, "pxstack");
    (void)x_payout(&e, id, 1);
    e.wc.send_window_us = SEC; /* a cutoff 6 s after the claim */
    setenv("OG_FAULT", "payout_start_ack_lost", 1);
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    unsetenv("OG_FAULT");
    assert_int_equal(w.end, OG_PAYOUT_WORK_START_UNCONFIRMED);
    assert_int_equal(w.sends, 0);
    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_STARTED); /* the write stayed */
    assert_int_equal(op.final_absence_after_us, op.submit_by_us + 5 * SEC);

    usleep(1200 * 1000);
    assert_int_equal(og_payout_sweep_once(e.s, "payout-sweeper", 10, &sw), 0);
    assert_int_equal(sw.unknown, 1);
    assert_int_equal(x_attempt(e.s, w.attempt_id).status, OG_OP_UNKNOWN);
    x_end_lease(e.raw, w.attempt_id);

    /* Before the cutoff: not found is no answer. */
    assert_int_equal(og_payout_reconcile_once(e.s, &e.rc, &st), 0);
    assert_int_equal(st.looked_up, 1);
    assert_int_equal(st.later, 1);
    assert_int_equal(st.not_applied, 0);
    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_UNKNOWN);
    assert_int_equal(op.lookups, 1);
    assert_true(op.taken_at_us < op.final_absence_after_us);

    /* Look again as each backoff ends, until a lookup begun after the
     * cutoff settles it. */
    deadline = t_now_us() + 20 * SEC;
    do {
        usleep(250 * 1000);
        assert_int_equal(og_payout_reconcile_once(e.s, &e.rc, &st), 0);
        assert_int_equal(st.errors, 0);
        assert_int_equal(st.succeeded + st.failed + st.escalated, 0);
    } while (st.not_applied == 0 && t_now_us() < deadline);
    assert_int_equal(st.not_applied, 1);
    op = x_attempt(e.s, w.attempt_id);
    assert_int_equal(op.status, OG_OP_NOT_APPLIED);
    assert_true(op.taken_at_us >= op.final_absence_after_us);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(p_reserved(e.raw, e.w.tenant), 0);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);
    assert_true(t_sbx_stat(&e.sb, "payout_lookups") >= 2);
    x_env_stop(&e);
}

/* The runner: two workers, the sweeper, the reconciler and the janitor on
 * threads, three payouts: each paid with one create, the counters say so,
 * and the runner finds itself idle. */
static void runner_pays_every_payout_once_and_goes_idle(void **state)
{
    x_env e;
    char id[3][64];
    og_payout_runner_cfg c;
    og_payout_runner *r = NULL;
    og_payout_runner_counts n;
    int64_t deadline;
    int idle = 0;

    (void)state;
    x_env_start(&e, "pxrun");
    for (int i = 0; i < 3; i++)
        (void)x_payout(&e, id[i], i + 1);
    memset(&c, 0, sizeof c);
    c.worker = e.wc;
    c.worker.attempt_lease_us = MINUTE;
    c.workers = 2;
    c.sweeper = c.reconciler = c.janitor = true;
    c.reconcile = e.rc;
    c.sweeper_actor = "payout-sweeper";
    c.sweep_limit = 10;
    c.janitor_batch = 100;
    c.janitor_max_batches = 2;
    c.idle_wait_us = 20 * 1000;
    c.interval_us = 100 * 1000;
    assert_int_equal(og_payout_runner_start(e.s, &c, &r), 0);
    deadline = t_now_us() + 30 * SEC;
    while (idle == 0 && t_now_us() < deadline) {
        usleep(100 * 1000);
        idle = og_payout_runner_idle(r);
        assert_true(idle >= 0);
        og_payout_runner_counts_get(r, &n);
        if (n.ends[OG_PAYOUT_WORK_SENT] < 3)
            idle = 0;
    }
    og_payout_runner_stop(r);
    og_payout_runner_counts_get(r, &n);
    og_payout_runner_free(r);
    assert_int_equal(n.ends[OG_PAYOUT_WORK_SENT], 3);
    assert_int_equal(n.sends, 3);
    assert_int_equal(n.ends[OG_PAYOUT_WORK_REFUSED], 0);
    assert_int_equal(n.worker_errors, 0);
    assert_int_equal(n.pass_errors, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(p_get(e.s, id[i]).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 3);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_created"), 3);
    /* a bad configuration starts nothing */
    c.workers = 65;
    assert_int_equal(og_payout_runner_start(e.s, &c, &r), OG_EINVAL);
    og_payout_runner_free(NULL);
    x_env_stop(&e);
}

/* One job through the worker: its end, reason, acknowledgment and
 * signal as expected, and no provider call. */
static og_payout_work x_work_expect(x_env *e, const og_payout_worker_cfg *c,
                                    og_payout_work_end end,
                                    og_payout_worker_reason why, bool acked,
                                    bool signal, int line)
{
    og_payout_work w;

    assert_int_equal(og_payout_work_once(e->s, c, &w), 0);
    if (w.end != end || w.reason != why || w.acknowledged != acked ||
        w.security_signal != signal || w.sends != 0)
        fail_msg("line %d: %s %s acked=%d signal=%d sends=%d", line,
                 og_payout_work_end_name(w.end),
                 og_payout_worker_reason_name(w.reason), w.acknowledged,
                 w.security_signal, w.sends);
    return w;
}

/* The worker's own checks, each on its own payout and job: refused (and
 * acknowledged) or postponed, never a provider call. */
static void grant_checks_refuse_or_postpone_with_no_provider_call(
    void **state)
{
    x_env e;
    char id[64], other[64], sql[512];
    og_payout_decision d;
    og_payout_worker_cfg c;
    og_payout_put_result pr;
    og_revoke_outcome ro;
    og_payout_work w;

    (void)state;
    x_env_start(&e, "pxchecks");

    /* delivered after the grant's window: grant.expired */
    p_id(id, &e.w, "PAY", 1);
    p_draft(e.s, &e.w, id, "10");
    (void)p_decide_window_past(e.s, id, 5);
    x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                  OG_PAYOUT_WORKER_GRANT_EXPIRED, true, false, __LINE__);

    /* revoked (a finance hold): grant.revoked */
    d = x_payout(&e, id, 2);
    assert_int_equal(og_payout_grant_revoke(e.s, d.grant_id, "finance-1", &ro),
                     0);
    x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                  OG_PAYOUT_WORKER_GRANT_REVOKED, true, false, __LINE__);

    /* presented by another service: presenter.not-audience, a signal */
    (void)x_payout(&e, id, 3);
    c = e.wc;
    c.audience = "refund-executor";
    x_work_expect(&e, &c, OG_PAYOUT_WORK_REFUSED,
                  OG_PAYOUT_WORKER_PRESENTER_NOT_AUDIENCE, true, true,
                  __LINE__);

    /* the job altered to name another payout: binding.mismatch, a signal */
    d = x_payout(&e, id, 4);
    p_id(other, &e.w, "PAY", 3);
    snprintf(sql, sizeof sql,
             "UPDATE payout_jobs SET payout_id = '%s' WHERE job_id = '%s'",
             other, d.job_id);
    p_raw_exec(e.raw, sql);
    x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                  OG_PAYOUT_WORKER_BINDING_MISMATCH, true, true, __LINE__);

    /* cancelled after the decision: payout.not-executable */
    d = x_payout(&e, id, 5);
    assert_int_equal(og_payout_cancel(e.s, id, d.executable_payout_version,
                                      "clerk-22", &pr),
                     0);
    assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                  OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, true, false,
                  __LINE__);

    /* the window opens in five minutes: postponed to it (PX9), nothing
     * acknowledged, and the job is not available again before then */
    p_id(id, &e.w, "PAY", 6);
    p_draft(e.s, &e.w, id, "10");
    (void)p_decide_allowed(e.s, id);
    w = x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_POSTPONED,
                      OG_PAYOUT_WORKER_NONE, false, false, __LINE__);
    assert_string_equal(w.job.payout_id, id);
    x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_IDLE, OG_PAYOUT_WORKER_NONE,
                  false, false, __LINE__);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_APPROVED);

    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);
    x_env_stop(&e);
}

/* Sets the approval limit decision_id captured to limit, behind the
 * store's back. Decisions are append-only and the store's triggers refuse
 * any UPDATE (payouts_decide.c proves it), so this test — and only it —
 * lifts the trigger for the one statement, in one transaction that puts
 * it back: the only way to make a grant's decision say something the
 * payout's own facts do not, and so to see which of the two the worker
 * rechecks with. */
static void x_set_captured_limit(t_raw *raw, const char *decision_id,
                                 int64_t limit)
{
    char sql[1024];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "BEGIN;"
                 " ALTER TABLE payout_decisions"
                 "   DISABLE TRIGGER payout_decisions_append_only;"
                 " UPDATE payout_decisions SET requester_approval_limit = %lld"
                 "   WHERE decision_id = '%s';"
                 " ALTER TABLE payout_decisions"
                 "   ENABLE TRIGGER payout_decisions_append_only;"
                 " COMMIT",
                 (long long)limit, decision_id);
    else
        snprintf(sql, sizeof sql,
                 "BEGIN;"
                 " DROP TRIGGER payout_decisions_append_only_update;"
                 " UPDATE payout_decisions SET requester_approval_limit = %lld"
                 "   WHERE decision_id = '%s';"
                 " CREATE TRIGGER payout_decisions_append_only_update"
                 "   BEFORE UPDATE ON payout_decisions BEGIN SELECT"
                 "   RAISE(ABORT, 'payout_decisions is append-only'); END;"
                 " COMMIT",
                 (long long)limit, decision_id);
    p_raw_exec(raw, sql);
    snprintf(sql, sizeof sql,
             "SELECT requester_approval_limit FROM payout_decisions"
             " WHERE decision_id = '%s'", decision_id);
    assert_int_equal(t_raw_int(raw, "%s", sql), limit);
}

/* The recheck takes the requester's facts from the grant's decision
 * (PX11; docs/payouts.md, section 5): with the captured limit below the
 * amount the worker refuses policy.no-longer-allows — an approval limit
 * derived from the payout (the amount) would have let it send — and at
 * exactly the amount it sends. A grant whose decision is not its payout's
 * Allowed one is a broken store: postponed (context.unavailable,
 * OG_EINTERNAL), never sent, never refused. */
static void worker_rechecks_with_the_limit_the_decision_captured(
    void **state)
{
    x_env e;
    char id[64], sql[512];
    og_payout_decide_req r;
    og_payout_decision d, denied;
    og_payout_decision_view dv;
    og_payout_grant_view g;
    og_payout_work w;

    (void)state;
    x_env_start(&e, "pxlimit");

    /* Allowed at 10,000.00; the row then says 4,249.99 for 4,250.00. */
    d = x_payout(&e, id, 1);
    x_set_captured_limit(e.raw, d.decision_id, 425000 - 1);
    assert_int_equal(og_payout_decision_get(e.s, d.decision_id, &dv), 1);
    assert_int_equal(dv.requester_approval_limit, 425000 - 1);
    w = x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                      OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, true, false,
                      __LINE__);
    assert_string_equal(w.job.payout_id, id);
    assert_string_equal(w.attempt_id, "");
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(og_payout_grant_get(e.s, d.grant_id, &g), 1);
    assert_int_equal(g.consumed_at_us, 0);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);

    /* Captured at exactly the amount: allowed then, allowed now. */
    p_id(id, &e.w, "PAY", 2);
    p_draft(e.s, &e.w, id, "4250");
    r = p_req(id);
    r.requester_approval_limit = 425000;
    r.not_before_us = t_now_us() - SEC;
    r.expires_at_us = r.not_before_us + 30 * MINUTE;
    d = p_decide(e.s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    if (w.end != OG_PAYOUT_WORK_SENT)
        fail_msg("end %s reason %s error %s", og_payout_work_end_name(w.end),
                 og_payout_worker_reason_name(w.reason),
                 og_err_name(w.error));
    assert_int_equal(w.attempt_status, OG_OP_SUCCEEDED);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);

    /* A grant bound to a decision that did not allow it (a payout's
     * EscalationRecommended one, pointed at behind the store's back: the
     * bindings are not append-only, and the foreign key holds — the row
     * exists): a defect, postponed with OG_EINTERNAL, nothing sent, the
     * job not acknowledged, the grant unconsumed. */
    d = x_payout(&e, id, 3);
    p_id(id, &e.w, "PAY", 4);
    p_draft(e.s, &e.w, id, "4250");
    r = p_req(id);
    r.requester_approval_limit = 425000 - 1;
    denied = p_decide(e.s, &r);
    assert_int_equal(denied.verdict.outcome, OG_PAYOUT_ESCALATION_RECOMMENDED);
    snprintf(sql, sizeof sql,
             "UPDATE payout_grants SET decision_id = '%s' WHERE grant_id = '%s'",
             denied.decision_id, d.grant_id);
    p_raw_exec(e.raw, sql);
    w = x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_POSTPONED,
                      OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, false, false,
                      __LINE__);
    assert_int_equal(w.error, OG_EINTERNAL);
    assert_string_equal(w.job.grant_id, d.grant_id);
    assert_int_equal(og_payout_grant_get(e.s, d.grant_id, &g), 1);
    assert_int_equal(g.consumed_at_us, 0);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    x_env_stop(&e);
}

/* Bad configurations are refused before any I/O: the handles below are
 * not a store, and touching one would crash the test. */
static void bad_configurations_are_refused_before_any_io(void **state)
{
    static char not_a_store[64];
    og_store *s = (og_store *)(void *)not_a_store;
    x_env e;
    og_payout_worker_cfg w;
    og_payout_reconciler_cfg rc;
    og_payout_work out;
    og_payout_reconcile_stats st;
    og_payout_sweep_stats sw;

    (void)state;
    memset(&e, 0, sizeof e);
    e.wc.worker_id = "w";
    e.wc.audience = OG_PAYOUT_AUDIENCE;
    e.wc.provider_url = "http://127.0.0.1:9";
    e.wc.table = (const og_provider_table *)(void *)not_a_store;
    e.wc.credential = x_no_key;
    e.wc.job_lease_us = e.wc.attempt_lease_us = e.wc.send_window_us = SEC;
    e.wc.provider_timeout_us = SEC;
    e.wc.max_sends = 1;
    w = e.wc;
    w.max_sends = 0;
    assert_int_equal(og_payout_work_once(s, &w, &out), OG_EINVAL);
    w = e.wc;
    w.worker_id = "not an id";
    assert_int_equal(og_payout_work_once(s, &w, &out), OG_EINVAL);
    w = e.wc;
    w.send_window_us = 0;
    assert_int_equal(og_payout_work_once(s, &w, &out), OG_EINVAL);
    w = e.wc;
    w.credential = NULL;
    assert_int_equal(og_payout_work_once(s, &w, &out), OG_EINVAL);
    assert_int_equal(og_payout_work_once(s, NULL, &out), OG_EINVAL);
    memset(&rc, 0, sizeof rc);
    assert_int_equal(og_payout_reconcile_once(s, &rc, &st), OG_EINVAL);
    assert_int_equal(og_payout_sweep_once(s, "sweeper", 0, &sw), OG_EINVAL);
    assert_int_equal(og_payout_sweep_once(s, NULL, 10, &sw), OG_EINVAL);
    assert_string_equal(og_payout_work_end_name(OG_PAYOUT_WORK_SENT), "sent");
    assert_string_equal(og_payout_work_end_name(OG_PAYOUT_WORK_END_COUNT),
                        "?");
}

/* An approver's acknowledgment of a recently changed destination
 * (docs/payouts.md, section 4, "Acknowledgment and escalation") holds at
 * the worker: the recheck honours the acknowledgment the issuing decision
 * recorded for that destination version (PX11, PC7), and the payout is
 * PAID — one create. A payout whose destination is re-registered after its
 * approval is refused, with no provider call. */
/* Payout n of amount on e's (recently changed) destination: clerk-22's
 * AcknowledgmentRequired, then approver-5's Allowed, its window open now. */
static void x_acknowledged(x_env *e, char id[64], int n, const char *amount)
{
    og_payout_decide_req q;
    og_payout_decision pending;

    p_id(id, &e->w, "PAY", n);
    p_draft(e->s, &e->w, id, amount);
    q = p_req(id);
    pending = p_decide(e->s, &q);
    assert_int_equal(pending.verdict.outcome,
                     OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED);
    q.requester_id = "approver-5";
    q.requester_role = "approver";
    q.settles_decision_id = pending.decision_id;
    q.not_before_us = t_now_us() - SEC;
    q.expires_at_us = q.not_before_us + 30 * MINUTE;
    assert_int_equal(p_decide(e->s, &q).verdict.outcome, OG_PAYOUT_ALLOWED);
}

static void acknowledged_recent_destination_is_paid_by_the_worker(
    void **state)
{
    og_payout_destination_record dr;
    og_payout_put_result r;
    og_payout_work w;
    x_env e;
    char id[64], id2[64];

    (void)state;
    x_env_start(&e, "pxack");
    p_age_destination(e.raw, e.w.dst, 2);
    x_acknowledged(&e, id, 1, "4250");

    assert_int_equal(og_payout_work_once(e.s, &e.wc, &w), 0);
    if (w.end != OG_PAYOUT_WORK_SENT)
        fail_msg("end %s reason %s error %s", og_payout_work_end_name(w.end),
                 og_payout_worker_reason_name(w.reason),
                 og_err_name(w.error));
    assert_int_equal(w.attempt_status, OG_OP_SUCCEEDED);
    assert_int_equal(p_get(e.s, id).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(t_sbx_stat(&e.sb, "payouts_created"), 1);

    /* The second: approved, then its destination re-registered. */
    x_acknowledged(&e, id2, 2, "10");
    dr = (og_payout_destination_record){e.w.dst, e.w.ben, "tok_rotated_9"};
    assert_int_equal(og_payout_destination_put(e.s, &dr, 1, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    w = x_work_expect(&e, &e.wc, OG_PAYOUT_WORK_REFUSED,
                      OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, true, false,
                      __LINE__);
    assert_string_equal(w.job.payout_id, id2);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 1);
    x_env_stop(&e);
}

/* The grant's audience is the worker principal (og_payout_decide_req's
 * audience; serve passes payouts.worker_id): the worker that presents its
 * own principal sends, a worker of another principal is refused
 * presenter.not-audience with no provider call. */
static void grant_names_the_worker_principal_that_may_present_it(
    void **state)
{
    og_payout_worker_cfg other;
    og_payout_decide_req q;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_work w;
    x_env e;
    char id[64];

    (void)state;
    x_env_start(&e, "pxaud");
    e.wc.audience = e.wc.worker_id; /* as serve's runner presents it */
    p_id(id, &e.w, "PAY", 1);
    p_draft(e.s, &e.w, id, "4250");
    q = p_req(id);
    q.audience = e.wc.worker_id;
    q.not_before_us = t_now_us() - SEC;
    q.expires_at_us = q.not_before_us + 30 * MINUTE;
    d = p_decide(e.s, &q);
    assert_true(d.issued);
    assert_int_equal(og_payout_grant_get(e.s, d.grant_id, &g), 1);
    assert_string_equal(g.audience, "svc-payout-worker");

    other = e.wc;
    other.worker_id = "svc-other-worker";
    other.audience = other.worker_id;
    w = x_work_expect(&e, &other, OG_PAYOUT_WORK_REFUSED,
                      OG_PAYOUT_WORKER_PRESENTER_NOT_AUDIENCE, true, true,
                      __LINE__);
    assert_string_equal(w.job.payout_id, id);
    assert_int_equal(t_sbx_stat(&e.sb, "payout_requests"), 0);
    /* an audience is required */
    q.audience = NULL;
    assert_int_equal(og_payout_decide(e.s, &q, &d), OG_EINVAL);
    q.audience = "not an id";
    assert_int_equal(og_payout_decide(e.s, &q, &d), OG_EINVAL);
    x_env_stop(&e);
}

const struct CMUnitTest t_payout_exec_tests[] = {
    cmocka_unit_test(bad_configurations_are_refused_before_any_io),
    cmocka_unit_test(worker_sends_once_and_the_payout_is_paid),
    cmocka_unit_test(
        dropped_answer_is_unknown_until_the_reconciler_finds_it_paid),
    cmocka_unit_test(returned_payout_is_succeeded_with_a_return_event),
    cmocka_unit_test(late_answer_after_the_sweep_is_late_evidence),
    cmocka_unit_test(
        claimed_attempt_never_started_is_not_started_after_the_sweep),
    cmocka_unit_test(claim_ack_lost_sends_nothing_and_the_sweeper_settles_it),
    cmocka_unit_test(start_ack_lost_is_not_applied_only_after_the_cutoff),
    cmocka_unit_test(runner_pays_every_payout_once_and_goes_idle),
    cmocka_unit_test(
        grant_checks_refuse_or_postpone_with_no_provider_call),
    cmocka_unit_test(worker_rechecks_with_the_limit_the_decision_captured),
    cmocka_unit_test(acknowledged_recent_destination_is_paid_by_the_worker),
    cmocka_unit_test(grant_names_the_worker_principal_that_may_present_it),
};
const size_t t_payout_exec_tests_count =
    sizeof t_payout_exec_tests / sizeof t_payout_exec_tests[0];
