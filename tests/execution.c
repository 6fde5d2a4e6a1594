/*
 * execution.c — the ownership protocol that moves an admitted operation
 * forward (seed 000, "Recovery and the original executor share one
 * ownership protocol"), against the real engine, in the suite's grant form.
 * The claims under test:
 *   - MaySubmit is true only for the current owner, before least(lease_until,
 *     submit_by), on the store's clock;
 *   - every write is conditional on (status, owner_version): a stale writer
 *     changes nothing, a terminal status is never overwritten, and of two
 *     competing writers on one version exactly one wins;
 *   - recovery takes over only an operation whose lease ended, once;
 *   - an operator resolves only NeedsReconciliation, and that fences late
 *     writers; the grant stays spent whatever the outcome;
 *   - every change is in the operation's history, in order.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define SEC INT64_C(1000000)
#define ADMITTED OG_OP_BIT(OG_OP_ADMITTED)
#define UNKNOWN OG_OP_BIT(OG_OP_UNKNOWN)

/* Admits a fresh grant on s; *c and *op describe it. */
static void x_admit(og_store *s, t_case *c, og_operation *op)
{
    og_admission a;

    t_case_new(c);
    t_issue(&c->g, &c->in);
    assert_int_equal(og_admit(s, &c->g, &c->in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    *op = a.operation;
}

/* Moves column (lease_until or submit_by) of op_id to `seconds` from the
 * store's now, outside oncegate: the tests decide when a lease ends rather
 * than sleeping through it. */
static char x_url[4200] = ""; /* "": the suite's store (t_url) */

/* t_set_op_time in this test's store. */
static void x_set_time(const char *op_id, const char *column, int seconds)
{
    t_set_op_time(x_url[0] ? x_url : NULL, op_id, column, seconds);
}

static og_operation x_get(og_store *s, const char *op_id)
{
    og_operation op;

    assert_int_equal(og_operation_get(s, op_id, &op), 1);
    return op;
}

static bool x_may(og_store *s, const char *op_id, int64_t v)
{
    bool may = true;

    assert_int_equal(og_op_may_submit(s, op_id, v, &may), 0);
    return may;
}

static bool x_record(og_store *s, const char *op_id, unsigned expected,
                     int64_t v, og_op_status to, const char *reason,
                     const char *ref, const char *actor)
{
    og_op_outcome o = {to, reason, ref, actor};
    bool rec = true;

    assert_int_equal(og_op_record(s, op_id, expected, v, &o, &rec), 0);
    return rec;
}

static bool x_takeover(og_store *s, const char *op_id, int64_t v,
                       og_operation *out)
{
    og_operation tmp;
    bool taken = true;

    assert_int_equal(og_op_takeover(s, op_id, v, "recovery", out ? out : &tmp,
                                    &taken),
                     0);
    return taken;
}

/* ------------------------------------------------------------------------ */

static void new_operation_may_submit_at_the_initial_owner_version(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    t_case c;

    (void)st;
    x_admit(s, &c, &op);
    assert_int_equal(op.owner_version, 1);
    assert_true(x_may(s, c.op, 1));
    assert_false(x_may(s, c.op, 2));
    og_store_free(s);
}

static void may_submit_is_false_after_the_lease_or_after_submit_by(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    t_case a, b;

    (void)st;
    x_admit(s, &a, &op);
    x_set_time(a.op, "lease_until", -1);
    assert_false(x_may(s, a.op, 1));

    x_admit(s, &b, &op);
    x_set_time(b.op, "submit_by", -1);
    assert_false(x_may(s, b.op, 1));
    og_store_free(s);
}

static void owner_records_once_and_a_terminal_status_is_never_overwritten(
    void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, after;
    t_case c;

    (void)st;
    x_admit(s, &c, &op);
    assert_true(x_record(s, c.op, ADMITTED, 1, OG_OP_SUCCEEDED, "created",
                         "cr_123", "handler"));
    after = x_get(s, c.op);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_string_equal(after.provider_reference, "cr_123");
    assert_string_equal(after.reason, "created");
    assert_true(after.updated_at_us >= after.created_at_us);
    assert_int_equal(after.owner_version, 1);

    /* Nothing moves a terminal status: not the same owner, not Unknown. */
    assert_false(x_record(s, c.op, ADMITTED | UNKNOWN, 1, OG_OP_UNKNOWN,
                          "timeout", NULL, "handler"));
    assert_false(x_record(s, c.op, ADMITTED | UNKNOWN, 1, OG_OP_FAILED,
                          "account_closed", NULL, "handler"));
    assert_false(x_may(s, c.op, 1));
    after = x_get(s, c.op);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_string_equal(after.provider_reference, "cr_123");
    og_store_free(s);
}

static void takeover_needs_an_ended_lease_and_happens_once(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, taken;
    t_case c;
    int64_t before;

    (void)st;
    x_admit(s, &c, &op);
    assert_false(x_takeover(s, c.op, 1, NULL)); /* the lease is running */
    x_set_time(c.op, "lease_until", -1);
    before = t_now_us();
    assert_true(x_takeover(s, c.op, 1, &taken));
    assert_int_equal(taken.owner_version, 2);
    assert_int_equal(taken.status, OG_OP_ADMITTED);
    /* The recovery lease (default 60 s) from the store's clock. */
    assert_true(taken.lease_until_us > before + 30 * SEC);
    assert_true(taken.lease_until_us < before + 120 * SEC);
    assert_false(x_takeover(s, c.op, 1, NULL)); /* version moved on */
    assert_false(x_takeover(s, c.op, 2, NULL)); /* recovery's lease runs */
    assert_false(x_may(s, c.op, 1));
    assert_true(x_may(s, c.op, 2));
    og_store_free(s);
}

static void late_write_from_the_original_owner_changes_nothing(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    t_case c;

    (void)st;
    x_admit(s, &c, &op);
    x_set_time(c.op, "lease_until", -1);
    assert_true(x_takeover(s, c.op, 1, NULL));
    /* The original handler resumes and records what it saw: nothing. */
    assert_false(x_record(s, c.op, ADMITTED, 1, OG_OP_SUCCEEDED, "created",
                          "cr_late", "handler"));
    assert_true(x_record(s, c.op, ADMITTED | UNKNOWN, 2, OG_OP_SUCCEEDED,
                         "found_by_lookup", "cr_1", "recovery"));
    /* A late Unknown cannot overwrite the recovered Succeeded. */
    assert_false(x_record(s, c.op, ADMITTED | UNKNOWN, 1, OG_OP_UNKNOWN,
                          "timeout", NULL, "handler"));
    assert_int_equal(x_get(s, c.op).status, OG_OP_SUCCEEDED);
    assert_string_equal(x_get(s, c.op).provider_reference, "cr_1");
    og_store_free(s);
}

/* Concurrency: every racer has its own store object (own connections). */
typedef struct x_racer {
    pthread_t th;
    pthread_barrier_t *go;
    const char *op;
    int what; /* 0: takeover v1; 1: record Succeeded v1 */
    bool won;
} x_racer;

static void *x_race(void *arg)
{
    x_racer *r = arg;
    og_store *s = t_store(1, 0);
    og_op_outcome o = {OG_OP_SUCCEEDED, "created", "cr_race", "handler"};
    og_operation out;

    bool won = false;
    int rc;

    pthread_barrier_wait(r->go);
    if (r->what == 0)
        rc = og_op_takeover(s, r->op, 1, "recovery", &out, &won);
    else
        rc = og_op_record(s, r->op, ADMITTED, 1, &o, &won);
    r->won = rc == 0 && won;
    og_store_free(s);
    return NULL;
}

static int x_run_race(const char *op, int n, const int *what, x_racer *rs)
{
    pthread_barrier_t go;
    int won = 0;

    pthread_barrier_init(&go, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        rs[i] = (x_racer){.go = &go, .op = op, .what = what[i]};
        assert_int_equal(pthread_create(&rs[i].th, NULL, x_race, &rs[i]), 0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(rs[i].th, NULL);
        won += rs[i].won;
    }
    pthread_barrier_destroy(&go);
    return won;
}

static void concurrent_takeovers_take_an_operation_once(void **st)
{
    og_store *s = t_store(0, 0);
    int what[16] = {0};
    x_racer rs[16];

    (void)st;
    for (int round = 0; round < 10; round++) {
        og_operation op;
        t_case c;

        x_admit(s, &c, &op);
        x_set_time(c.op, "lease_until", -1);
        assert_int_equal(x_run_race(c.op, 16, what, rs), 1);
        assert_int_equal(x_get(s, c.op).owner_version, 2);
    }
    og_store_free(s);
}

static void outcome_write_racing_a_takeover_has_one_winner(void **st)
{
    og_store *s = t_store(0, 0);
    int what[2] = {0, 1};
    x_racer rs[2];

    (void)st;
    for (int round = 0; round < 40; round++) {
        og_operation op, after;
        t_case c;

        x_admit(s, &c, &op);
        x_set_time(c.op, "lease_until", -1);
        assert_int_equal(x_run_race(c.op, 2, what, rs), 1);
        after = x_get(s, c.op);
        if (rs[1].won) { /* the handler recorded first: terminal */
            assert_int_equal(after.status, OG_OP_SUCCEEDED);
            assert_int_equal(after.owner_version, 1);
        } else { /* recovery took over first: the late write was fenced */
            assert_int_equal(after.status, OG_OP_ADMITTED);
            assert_int_equal(after.owner_version, 2);
        }
    }
    og_store_free(s);
}

static void operator_resolves_only_needs_reconciliation_and_fences_writers(
    void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, after;
    t_case c, again;
    og_admission adm;
    bool resolved = false;

    (void)st;
    x_admit(s, &c, &op);
    /* Not NeedsReconciliation yet: nothing to resolve. */
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_SUCCEEDED, "operator-1",
                                   "found_in_ledger", "ledger line 42", NULL,
                                   &resolved),
                     0);
    assert_false(resolved);
    assert_true(x_record(s, c.op, ADMITTED, 1, OG_OP_NEEDS_RECONCILIATION,
                         "window_passed", NULL, "recovery"));
    assert_false(x_may(s, c.op, 1));
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_SUCCEEDED, "operator-1",
                                   "found_in_ledger",
                                   "provider export 2026-11-29\nline 42",
                                   "cr_77", &resolved),
                     0);
    assert_true(resolved);
    after = x_get(s, c.op);
    assert_int_equal(after.status, OG_OP_SUCCEEDED);
    assert_int_equal(after.owner_version, 2);
    assert_string_equal(after.provider_reference, "cr_77");
    /* Once resolved: no second resolution, no late owner write. */
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_FAILED, "operator-2",
                                   "changed_mind", "none", NULL, &resolved),
                     0);
    assert_false(resolved);
    assert_false(x_record(s, c.op, ADMITTED | UNKNOWN, 1, OG_OP_UNKNOWN,
                          "timeout", NULL, "handler"));
    /* The grant stays spent. */
    again = c;
    t_uuid(again.op);
    again.in.operation_id = again.op;
    assert_int_equal(og_admit(s, &again.g, &again.in, &adm), 0);
    assert_int_equal(adm.outcome, OG_OUTCOME_REFUSED);
    og_store_free(s);
}

static void failed_outcome_keeps_the_grant_spent(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    og_admission adm;
    t_case c, again;

    (void)st;
    x_admit(s, &c, &op);
    assert_true(x_record(s, c.op, ADMITTED, 1, OG_OP_FAILED, "account_closed",
                         NULL, "handler"));
    again = c;
    t_uuid(again.op);
    again.in.operation_id = again.op;
    assert_int_equal(og_admit(s, &again.g, &again.in, &adm), 0);
    assert_int_equal(adm.outcome, OG_OUTCOME_REFUSED);
    /* The same operation's retry reports the Failed record. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &adm), 0);
    assert_int_equal(adm.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_int_equal(adm.operation.status, OG_OP_FAILED);
    og_store_free(s);
}

static void history_lists_every_change_in_order(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    og_op_events h;
    t_case c;

    (void)st;
    x_admit(s, &c, &op);
    assert_true(x_record(s, c.op, ADMITTED, 1, OG_OP_UNKNOWN, "timeout", NULL,
                         "handler"));
    x_set_time(c.op, "lease_until", -1);
    assert_true(x_takeover(s, c.op, 1, NULL));
    assert_true(x_record(s, c.op, UNKNOWN, 2, OG_OP_SUCCEEDED,
                         "found_by_lookup", "cr_9", "recovery"));
    assert_int_equal(og_op_history(s, c.op, &h), 0);
    assert_int_equal(h.n, 4);
    assert_string_equal(h.v[0].kind, "admitted");
    assert_string_equal(h.v[0].actor, c.in.caller_id);
    assert_string_equal(h.v[1].kind, "outcome");
    assert_int_equal(h.v[1].from_status, OG_OP_ADMITTED);
    assert_int_equal(h.v[1].to_status, OG_OP_UNKNOWN);
    assert_int_equal(h.v[1].owner_version, 1);
    assert_string_equal(h.v[1].reason, "timeout");
    assert_string_equal(h.v[1].actor, "handler");
    assert_string_equal(h.v[2].kind, "takeover");
    assert_int_equal(h.v[2].owner_version, 2);
    assert_string_equal(h.v[2].actor, "recovery");
    assert_string_equal(h.v[3].kind, "outcome");
    assert_int_equal(h.v[3].from_status, OG_OP_UNKNOWN);
    assert_int_equal(h.v[3].to_status, OG_OP_SUCCEEDED);
    assert_string_equal(h.v[3].provider_reference, "cr_9");
    for (size_t i = 2; i < h.n; i++)
        assert_true(h.v[i].seq > h.v[i - 1].seq);
    for (size_t i = 1; i < h.n; i++)
        assert_true(h.v[i].at_us >= h.v[i - 1].at_us - SEC);
    og_op_events_free(&h);

    /* An operation that does not exist has no history. */
    t_uuid(c.op);
    assert_int_equal(og_op_history(s, c.op, &h), 0);
    assert_int_equal(h.n, 0);
    og_store_free(s);
}

static bool x_listed(const og_op_list *l, const char *op)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].operation_id, op) == 0)
            return true;
    return false;
}

static void list_finds_stalled_operations_and_the_backlog(void **st)
{
    /* Its own store: the scans' oldest rows must be this test's, not the
     * thousands of other suites' operations in the suite's store. */
    og_store *s = t_fresh_store("exec", x_url, sizeof x_url);
    og_operation op;
    og_op_list l;
    og_op_filter f;
    t_case live, stalled, unknown, recon, done;

    (void)st;
    x_admit(s, &live, &op);
    x_admit(s, &stalled, &op);
    x_set_time(stalled.op, "lease_until", -5);
    x_admit(s, &unknown, &op);
    assert_true(x_record(s, unknown.op, ADMITTED, 1, OG_OP_UNKNOWN, "timeout",
                         NULL, "handler"));
    x_set_time(unknown.op, "lease_until", -5);
    x_admit(s, &recon, &op);
    assert_true(x_record(s, recon.op, ADMITTED, 1,
                         OG_OP_NEEDS_RECONCILIATION, "window_passed", NULL,
                         "recovery"));
    x_admit(s, &done, &op);
    assert_true(x_record(s, done.op, ADMITTED, 1, OG_OP_SUCCEEDED, "created",
                         "cr_d", "handler"));
    x_set_time(done.op, "lease_until", -5);

    /* Recovery's scan: Admitted or Unknown whose lease ended. */
    f = (og_op_filter){ADMITTED | UNKNOWN, true, 0, 1000, 0};
    assert_int_equal(og_op_scan(s, &f, &l), 0);
    assert_true(x_listed(&l, stalled.op));
    assert_true(x_listed(&l, unknown.op));
    assert_false(x_listed(&l, live.op));
    assert_false(x_listed(&l, recon.op));
    assert_false(x_listed(&l, done.op));
    for (size_t i = 1; i < l.n; i++)
        assert_true(l.v[i].created_at_us >= l.v[i - 1].created_at_us);
    og_op_list_free(&l);

    /* The operators' backlog. */
    f = (og_op_filter){OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION), false, 0, 1000,
                       0};
    assert_int_equal(og_op_scan(s, &f, &l), 0);
    assert_true(x_listed(&l, recon.op));
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(l.v[i].status, OG_OP_NEEDS_RECONCILIATION);
    og_op_list_free(&l);

    /* created_before and limit. */
    f = (og_op_filter){0, false, x_get(s, live.op).created_at_us, 1000, 0};
    assert_int_equal(og_op_scan(s, &f, &l), 0);
    assert_false(x_listed(&l, live.op));
    assert_false(x_listed(&l, done.op));
    og_op_list_free(&l);
    f = (og_op_filter){0, false, 0, 2, 0};
    assert_int_equal(og_op_scan(s, &f, &l), 0);
    assert_int_equal(l.n, 2);
    og_op_list_free(&l);
    og_store_free(s);
    if (t_kind == T_SQLITE) {
        char path[4300];

        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "%s%s", x_url + 7,
                     i == 0 ? "" : i == 1 ? "-wal" : "-shm");
            unlink(path);
        }
    }
    x_url[0] = '\0';
}

static void execution_inputs_are_validated(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    og_op_outcome o = {OG_OP_SUCCEEDED, "created", NULL, "handler"};
    og_op_list l;
    og_op_filter f = {0, false, 0, 0, 0};
    bool b;
    t_case c;

    (void)st;
    x_admit(s, &c, &op);
    assert_int_equal(og_op_may_submit(s, "not-a-uuid", 1, &b),
                     OG_EOPERATION_ID);
    assert_int_equal(og_op_may_submit(s, c.op, 0, &b), OG_EINVAL);
    /* Only Admitted/Unknown may be expected; Admitted is never a target. */
    assert_int_equal(og_op_record(s, c.op, OG_OP_BIT(OG_OP_SUCCEEDED), 1, &o,
                                  &b),
                     OG_ETRANSITION);
    o.status = OG_OP_ADMITTED;
    assert_int_equal(og_op_record(s, c.op, ADMITTED, 1, &o, &b),
                     OG_ETRANSITION);
    o.status = OG_OP_SUCCEEDED;
    o.reason = "has space";
    assert_int_equal(og_op_record(s, c.op, ADMITTED, 1, &o, &b), OG_EREASON);
    o.reason = "created";
    o.actor = "";
    assert_int_equal(og_op_record(s, c.op, ADMITTED, 1, &o, &b), OG_EACTOR);
    o.actor = "handler";
    o.provider_reference = "bad ref";
    assert_int_equal(og_op_record(s, c.op, ADMITTED, 1, &o, &b),
                     OG_EPROVIDER_REFERENCE);
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_UNKNOWN, "op-1", "r", "e",
                                   NULL, &b),
                     OG_ETRANSITION);
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_FAILED, "op-1", "r",
                                   "bell\a", NULL, &b),
                     OG_EEVIDENCE);
    assert_int_equal(og_op_resolve(s, c.op, OG_OP_FAILED, "op-1", "r",
                                   "bad \xff utf8", NULL, &b),
                     OG_EEVIDENCE);
    assert_int_equal(og_op_scan(s, &f, &l), OG_EINVAL); /* limit 0 */
    /* Nothing above changed the operation. */
    assert_int_equal(x_get(s, c.op).status, OG_OP_ADMITTED);
    assert_true(x_may(s, c.op, 1));
    og_store_free(s);
}

const struct CMUnitTest t_execution_tests[] = {
    cmocka_unit_test(new_operation_may_submit_at_the_initial_owner_version),
    cmocka_unit_test(may_submit_is_false_after_the_lease_or_after_submit_by),
    cmocka_unit_test(
        owner_records_once_and_a_terminal_status_is_never_overwritten),
    cmocka_unit_test(takeover_needs_an_ended_lease_and_happens_once),
    cmocka_unit_test(late_write_from_the_original_owner_changes_nothing),
    cmocka_unit_test(concurrent_takeovers_take_an_operation_once),
    cmocka_unit_test(outcome_write_racing_a_takeover_has_one_winner),
    cmocka_unit_test(
        operator_resolves_only_needs_reconciliation_and_fences_writers),
    cmocka_unit_test(failed_outcome_keeps_the_grant_spent),
    cmocka_unit_test(history_lists_every_change_in_order),
    cmocka_unit_test(list_finds_stalled_operations_and_the_backlog),
    cmocka_unit_test(execution_inputs_are_validated),
};
const size_t t_execution_tests_count =
    sizeof t_execution_tests / sizeof t_execution_tests[0];
