/*
 * recovery.c — og_recover_once() against the real engine and the real
 * oncegate-sandbox (OG_TEST_SANDBOX), each test asserting the sandbox's
 * counters as well as the store's state. The claims (docs/design.md,
 * "Execution: one owner at a time"):
 *   - billing succeeded but the answer was lost: recovery looks up and
 *     records Succeeded; one credit, no second create;
 *   - a crash right after admission: recovery finds nothing and, since the
 *     provider declares atomic same-key handling, resubmits the same key
 *     once before submit_by; one credit;
 *   - without atomic same-key handling recovery never sends a create: it
 *     marks NeedsReconciliation, never Failed;
 *   - after submit_by nothing is sent: NeedsReconciliation;
 *   - a recoverer paused past its own lease between its lookup and its
 *     resubmit sends nothing and records nothing (RV8): no false
 *     "submit_window_passed" while submit_by is an hour away; the next
 *     pass takes the operation over and finishes it with one create;
 *   - recovery is the credits' only: a payout attempt (schema 7) whose
 *     lease lapsed, Admitted, Started or Unknown, is never taken over,
 *     looked up or resent by it.
 * Leases are ended by moving lease_until in the store (raw SQL), not by
 * sleeping.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "harness.h"
#include "support.h"
#include "oncegate/execute.h"

#define SEC INT64_C(1000000)

/* The table of the sandbox, or a copy with atomic_same_key false. */
static og_provider_table *r_table(bool atomic)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char path[4200];
    og_provider_table *t = NULL;
    og_provider_table_error err;
    json_t *j;
    char *text;

    assert_non_null(root);
    snprintf(path, sizeof path, "%s/providers/sandbox-credits.v1.json", root);
    if (atomic) {
        assert_int_equal(og_provider_table_load_file(path, &t, &err), 0);
        return t;
    }
    j = json_load_file(path, 0, NULL);
    assert_non_null(j);
    json_object_set_new(json_object_get(j, "properties"), "atomic_same_key",
                        json_false());
    text = json_dumps(j, 0);
    json_decref(j);
    assert_non_null(text);
    assert_int_equal(og_provider_table_load(text, strlen(text), &t, &err), 0);
    free(text);
    return t;
}

static char r_url[4200]; /* this test's own store */

/* A brand-new store: recovery scans the whole store, and the suite's store
 * holds thousands of other suites' operations, which it must neither touch
 * nor wade through. */
static og_store *r_store(void)
{
    return t_fresh_store("recovery", r_url, sizeof r_url);
}

static void r_set_time(const char *op_id, const char *column, int seconds)
{
    t_set_op_time(r_url, op_id, column, seconds);
}

/* Admits a fresh grant; *c describes it. */
static og_operation r_admit(og_store *s, t_case *c)
{
    og_admission a;

    t_case_new(c);
    assert_int_equal(og_admit(s, &c->g, &c->in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    return a.operation;
}

/* Runs recovery passes until the operation is settled (in this test's own
 * store, one pass does it; a few more prove nothing else happens). */
static og_operation r_recover(og_store *s, og_provider *p,
                              const og_provider_table *t, const char *op_id,
                              og_recovery_stats *sum)
{
    og_operation op;

    memset(sum, 0, sizeof *sum);
    for (int pass = 0; pass < 3; pass++) {
        og_recovery_stats st;

        assert_int_equal(og_recover_once(s, p, t, 5 * SEC, 1000, &st), 0);
        sum->succeeded += st.succeeded;
        sum->reconcile += st.reconcile;
        sum->resubmitted += st.resubmitted;
        sum->failed += st.failed;
        assert_int_equal(og_operation_get(s, op_id, &op), 1);
        if (op.owner_version > 1 && op.status != OG_OP_ADMITTED &&
            op.status != OG_OP_UNKNOWN)
            return op;
    }
    return op;
}

/* What every test here needs: the sandbox's table (or a non-atomic copy),
 * a fresh store, a running sandbox and a client for it. */
typedef struct r_env {
    og_provider_table *t;
    og_store *s;
    og_provider *p;
    t_sbx sb;
} r_env;

static void r_env_start(r_env *e, bool atomic)
{
    memset(e, 0, sizeof *e);
    e->t = r_table(atomic);
    e->s = r_store();
    t_sbx_start(&e->sb, "og-recovery");
    assert_int_equal(og_provider_open(e->sb.url, NULL, e->t, &e->p), 0);
}

static void r_env_stop(r_env *e)
{
    og_provider_free(e->p);
    og_provider_table_free(e->t);
    og_store_free(e->s);
    t_sbx_stop(&e->sb);
}

static void billing_success_with_a_lost_answer_is_found_by_lookup(void **st)
{
    r_env e;
    og_provider_outcome po;
    og_recovery_stats sum;
    og_operation op, after;
    og_op_outcome unknown = {OG_OP_UNKNOWN, NULL, NULL, "handler", NULL};
    bool rec = false;
    t_case c;

    (void)st;
    r_env_start(&e, true);
    op = r_admit(e.s, &c);
    /* The handler's call: the credit is made, the answer is lost. */
    json_decref(t_sbx_control(&e.sb, "/_control/faults",
                          "{\"fault\":\"drop_response_after_effect\"}"));
    assert_int_equal(og_provider_create_credit(e.p, op.operation_id,
                                               op.account_id, op.amount,
                                               op.currency, op.operation_id,
                                               op.submit_by_us, 5 * SEC, &po),
                     0);
    assert_int_equal(po.cls, OG_CLASS_UNKNOWN);
    unknown.reason = po.reason;
    assert_int_equal(og_op_record(e.s, op.operation_id,
                                  OG_OP_BIT(OG_OP_ADMITTED), 1, &unknown,
                                  &rec),
                     0);
    assert_true(rec);
    r_set_time(op.operation_id, "lease_until", -1);

    after = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_int_equal(after.owner_version, 2);
    assert_true(strncmp(after.provider_reference, "cr_", 3) == 0);
    assert_int_equal(t_sbx_stat(&e.sb, "credits_created"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 1); /* no resubmit */
    r_env_stop(&e);
}

static void crash_right_after_admission_is_resubmitted_once(void **st)
{
    r_env e;
    og_recovery_stats sum;
    og_operation op, after;
    t_case c;

    (void)st;
    r_env_start(&e, true);
    op = r_admit(e.s, &c); /* ... and the handler died: no call was made */
    r_set_time(op.operation_id, "lease_until", -1);

    after = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_true(sum.resubmitted >= 1);
    assert_int_equal(t_sbx_stat(&e.sb, "credits_created"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 1);
    /* A later pass leaves a settled operation alone. */
    after = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 1);
    r_env_stop(&e);
}

static void without_atomic_same_key_recovery_never_creates(void **st)
{
    r_env e;
    og_recovery_stats sum;
    og_operation op, after;
    t_case c;

    (void)st;
    r_env_start(&e, false);
    op = r_admit(e.s, &c);
    r_set_time(op.operation_id, "lease_until", -1);

    after = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_NEEDS_RECONCILIATION);
    assert_string_equal(after.reason, "not_found_no_atomic_same_key");
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 0);
    r_env_stop(&e);
}

static void after_submit_by_recovery_never_creates(void **st)
{
    r_env e;
    og_recovery_stats sum;
    og_operation op, after;
    t_case c;

    (void)st;
    r_env_start(&e, true);
    op = r_admit(e.s, &c);
    r_set_time(op.operation_id, "submit_by", -1);
    r_set_time(op.operation_id, "lease_until", -1);

    after = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_NEEDS_RECONCILIATION);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 0);
    r_env_stop(&e);
}

/* One recovery pass in a thread (the recoverer the test pauses). */
typedef struct r_pass {
    r_env *e;
    og_recovery_stats st;
    int rc;
} r_pass;

static void *r_pass_main(void *arg)
{
    r_pass *rp = arg;

    rp->rc = og_recover_once(rp->e->s, rp->e->p, rp->e->t, 10 * SEC, 1000,
                             &rp->st);
    return NULL;
}

static void a_recoverer_paused_past_its_lease_records_no_false_reason(
    void **st)
{
    r_env e;
    r_pass rp;
    og_recovery_stats sum;
    og_operation op, now;
    pthread_t th;
    t_case c;
    int waited;

    (void)st;
    r_env_start(&e, true);
    op = r_admit(e.s, &c); /* the handler died: no call was made */
    r_set_time(op.operation_id, "lease_until", -1);
    /* The provider answers nothing while stopped: the pass takes the
     * operation over and then hangs in its lookup, as a paused recoverer
     * would. */
    assert_int_equal(kill(e.sb.pid, SIGSTOP), 0);
    memset(&rp, 0, sizeof rp);
    rp.e = &e;
    assert_int_equal(pthread_create(&th, NULL, r_pass_main, &rp), 0);
    for (waited = 0; waited < 5000; waited += 20) {
        assert_int_equal(og_operation_get(e.s, op.operation_id, &now), 1);
        if (now.owner_version == 2)
            break;
        usleep(20000);
    }
    assert_int_equal(now.owner_version, 2);
    /* Its lease lapses during the pause; submit_by is an hour away. */
    r_set_time(op.operation_id, "lease_until", -1);
    assert_int_equal(kill(e.sb.pid, SIGCONT), 0);
    pthread_join(th, NULL);
    assert_int_equal(rp.rc, 0);
    assert_int_equal(rp.st.taken, 1);
    assert_int_equal(rp.st.reconcile, 0);
    assert_int_equal(rp.st.later, 1);
    assert_int_equal(rp.st.resubmitted, 0);
    assert_int_equal(og_operation_get(e.s, op.operation_id, &now), 1);
    assert_int_equal(now.status, OG_OP_ADMITTED); /* not parked */
    assert_int_equal(now.owner_version, 2);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 0);

    /* The next pass owns it and finishes it with one create. */
    now = r_recover(e.s, e.p, e.t, op.operation_id, &sum);
    assert_int_equal(now.status, OG_OP_SUCCEEDED);
    assert_int_equal(now.owner_version, 3);
    assert_int_equal(t_sbx_stat(&e.sb, "credits_created"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 1);
    r_env_stop(&e);
}

/* A payout attempt's snapshot: what recovery must leave exactly as it is. */
typedef struct r_untouched {
    og_operation op;
    size_t events;
} r_untouched;

static r_untouched r_snapshot(og_store *s, const char *op_id)
{
    r_untouched u;
    og_op_events h;

    assert_int_equal(og_operation_get(s, op_id, &u.op), 1);
    assert_int_equal(og_op_history(s, op_id, &h), 0);
    u.events = h.n;
    og_op_events_free(&h);
    return u;
}

static void recovery_never_touches_payout_operations(void **st)
{
    r_env e;
    og_recovery_stats one, sum;
    og_operation credit, after, p[4];
    r_untouched before[4];
    og_op_outcome unknown = {OG_OP_UNKNOWN, "provider_timeout", NULL,
                             "payout-worker-1", NULL};
    bool b = false;
    t_case c;

    (void)st;
    r_env_start(&e, true);
    /* Every stalled shape a payout attempt can have: Admitted, Started,
     * Unknown, and Admitted past submit_by (a credit there would be
     * recorded NeedsReconciliation). Each lease has lapsed. */
    for (int i = 0; i < 4; i++)
        p[i] = t_payout_op(e.s);
    assert_int_equal(og_op_start(e.s, p[1].operation_id, 1, "payout-worker-1",
                                 &b),
                     0);
    assert_true(b);
    assert_int_equal(og_op_start(e.s, p[2].operation_id, 1, "payout-worker-1",
                                 &b),
                     0);
    assert_true(b);
    assert_int_equal(og_op_record(e.s, p[2].operation_id,
                                  OG_OP_BIT(OG_OP_STARTED), 1, &unknown, &b),
                     0);
    assert_true(b);
    r_set_time(p[3].operation_id, "submit_by", -1);
    for (int i = 0; i < 4; i++) {
        r_set_time(p[i].operation_id, "lease_until", -5);
        before[i] = r_snapshot(e.s, p[i].operation_id);
    }
    /* The control: a stalled credit, which recovery does settle. */
    credit = r_admit(e.s, &c);
    r_set_time(credit.operation_id, "lease_until", -1);

    assert_int_equal(og_recover_once(e.s, e.p, e.t, 5 * SEC, 1000, &one), 0);
    assert_int_equal(one.scanned, 1); /* the credit alone */
    assert_int_equal(one.taken, 1);
    after = r_recover(e.s, e.p, e.t, credit.operation_id, &sum);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_int_equal(after.kind, OG_OP_KIND_CREDIT);
    /* The provider saw the credit's lookup and create, nothing else. */
    assert_int_equal(t_sbx_stat(&e.sb, "lookups"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "create_requests"), 1);
    assert_int_equal(t_sbx_stat(&e.sb, "credits_created"), 1);
    /* Each payout attempt exactly as it was: no takeover, no outcome. */
    for (int i = 0; i < 4; i++) {
        r_untouched now = r_snapshot(e.s, p[i].operation_id);

        assert_int_equal(now.op.status, before[i].op.status);
        assert_int_equal(now.op.owner_version, 1);
        assert_true(now.op.lease_until_us == before[i].op.lease_until_us);
        assert_true(now.op.updated_at_us == before[i].op.updated_at_us);
        assert_string_equal(now.op.reason, before[i].op.reason);
        assert_int_equal(now.events, before[i].events);
    }
    r_env_stop(&e);
}

const struct CMUnitTest t_recovery_tests[] = {
    cmocka_unit_test(billing_success_with_a_lost_answer_is_found_by_lookup),
    cmocka_unit_test(crash_right_after_admission_is_resubmitted_once),
    cmocka_unit_test(without_atomic_same_key_recovery_never_creates),
    cmocka_unit_test(after_submit_by_recovery_never_creates),
    cmocka_unit_test(a_recoverer_paused_past_its_lease_records_no_false_reason),
    cmocka_unit_test(recovery_never_touches_payout_operations),
};
const size_t t_recovery_tests_count =
    sizeof t_recovery_tests / sizeof t_recovery_tests[0];
