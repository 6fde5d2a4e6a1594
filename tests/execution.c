/*
 * execution.c — the ownership protocol that moves an admitted operation
 * forward (docs/design.md, "Execution: one owner at a time"), against the
 * real engine, in the suite's grant form.
 * The claims under test:
 *   - MaySubmit is true only for the current owner, before least(lease_until,
 *     submit_by), on the store's clock;
 *   - every write is conditional on (status, owner_version): a stale writer
 *     changes nothing, a terminal status is never overwritten, and of two
 *     competing writers on one version exactly one wins;
 *   - recovery takes over only an operation whose lease ended, once;
 *   - an operator resolves only NeedsReconciliation, and that fences late
 *     writers; the grant stays spent whatever the outcome;
 *   - every change is in the operation's history, in order;
 *   - a payout attempt (schema 7) is Started by ONE conditional write that
 *     needs Admitted, its owner's version, a running lease and submit_by
 *     ahead, recorded with its event in the same write; a takeover fences
 *     the old owner's start; a Started attempt whose lease lapsed is taken
 *     over and becomes Unknown, never NotStarted; NotStarted only after a
 *     takeover fenced the claimer (P2), NotApplied only from Unknown, and
 *     the terminal statuses never change.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "store/store_int.h" /* og__op_insert: payout attempts before their claim */
#include "oncegate/execute.h"

#define SEC INT64_C(1000000)
#define ADMITTED OG_OP_BIT(OG_OP_ADMITTED)
#define STARTED OG_OP_BIT(OG_OP_STARTED)
#define UNKNOWN OG_OP_BIT(OG_OP_UNKNOWN)
#define OWNED (ADMITTED | STARTED | UNKNOWN)

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

static void x_set_time_ms(const char *op_id, const char *column, int ms)
{
    t_set_op_time_ms(x_url[0] ? x_url : NULL, op_id, column, ms);
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
    og_op_outcome o = {to, reason, ref, actor, NULL};
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
    og_op_outcome o = {OG_OP_SUCCEEDED, "created", "cr_race", "handler", NULL};
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

/* ------------------------------------------------------------------------
 * Payout attempts (schema 7): Started, NotStarted, NotApplied.
 * ------------------------------------------------------------------------ */

static bool x_start(og_store *s, const char *op_id, int64_t v)
{
    bool started = true;

    assert_int_equal(og_op_start(s, op_id, v, "payout-worker-1", &started),
                     0);
    return started;
}

/* The events of op_id, the synthesized "admitted" first. */
static og_op_events x_history(og_store *s, const char *op_id)
{
    og_op_events h;

    assert_int_equal(og_op_history(s, op_id, &h), 0);
    return h;
}

/* Takes op over after ending its lease: the record after the takeover. */
static og_operation x_sweep(og_store *s, const og_operation *op)
{
    og_operation taken;

    x_set_time(op->operation_id, "lease_until", -1);
    assert_true(x_takeover(s, op->operation_id, op->owner_version, &taken));
    return taken;
}

/* P1, P2: og_op_start is ONE conditional write on Admitted, the owner's
 * version, lease_until > now and submit_by > now; each condition failing
 * alone changes nothing and writes no event. A credit is never started. */
static void start_requires_admitted_owner_lease_and_submit_by(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, after, credit;
    og_op_events h;
    t_case c;
    bool b;

    (void)st;
    /* Another owner version: not this owner's attempt. */
    op = t_payout_op(s);
    assert_int_equal(op.kind, OG_OP_KIND_PAYOUT);
    assert_false(x_start(s, op.operation_id, 2));
    /* The lease ended (the owner may have been swept). */
    x_set_time(op.operation_id, "lease_until", -1);
    assert_false(x_start(s, op.operation_id, 1));
    after = x_get(s, op.operation_id);
    assert_int_equal(after.status, OG_OP_ADMITTED);
    assert_int_equal(after.owner_version, 1);
    assert_true(after.updated_at_us == after.created_at_us);
    h = x_history(s, op.operation_id);
    assert_int_equal(h.n, 1); /* admitted only: no event for a refusal */
    og_op_events_free(&h);

    /* submit_by passed, the lease still running. */
    op = t_payout_op(s);
    x_set_time(op.operation_id, "submit_by", -1);
    assert_false(x_start(s, op.operation_id, 1));
    assert_int_equal(x_get(s, op.operation_id).status, OG_OP_ADMITTED);

    /* Not Admitted any more (an owner recorded Failed before sending). */
    op = t_payout_op(s);
    assert_true(x_record(s, op.operation_id, ADMITTED, 1, OG_OP_FAILED,
                         "request_invalid", NULL, "payout-worker-1"));
    assert_false(x_start(s, op.operation_id, 1));
    assert_int_equal(x_get(s, op.operation_id).status, OG_OP_FAILED);

    /* A credit: admission's operations are never started. */
    x_admit(s, &c, &credit);
    assert_int_equal(credit.kind, OG_OP_KIND_CREDIT);
    assert_false(x_start(s, c.op, 1));
    assert_int_equal(x_get(s, c.op).status, OG_OP_ADMITTED);
    assert_true(x_may(s, c.op, 1)); /* the credit path is unchanged */

    /* All four hold: started, once, in the same write as its event. */
    op = t_payout_op(s);
    assert_false(x_may(s, op.operation_id, 1)); /* P1: not before Started */
    assert_true(x_start(s, op.operation_id, 1));
    after = x_get(s, op.operation_id);
    assert_int_equal(after.status, OG_OP_STARTED);
    assert_int_equal(after.owner_version, 1);
    assert_true(after.updated_at_us >= after.created_at_us);
    assert_true(x_may(s, op.operation_id, 1));
    assert_false(x_start(s, op.operation_id, 1)); /* Started: no second */
    h = x_history(s, op.operation_id);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.v[0].kind, "admitted");
    assert_string_equal(h.v[1].kind, "started");
    assert_int_equal(h.v[1].from_status, OG_OP_ADMITTED);
    assert_int_equal(h.v[1].to_status, OG_OP_STARTED);
    assert_int_equal(h.v[1].owner_version, 1);
    assert_string_equal(h.v[1].actor, "payout-worker-1");
    /* one instant: the status change and its event */
    assert_true(h.v[1].at_us == after.updated_at_us);
    og_op_events_free(&h);

    /* Input is checked before the store. */
    assert_int_equal(og_op_start(s, "not-a-uuid", 1, "w", &b),
                     OG_EOPERATION_ID);
    assert_int_equal(og_op_start(s, op.operation_id, 0, "w", &b), OG_EINVAL);
    assert_int_equal(og_op_start(s, op.operation_id, 1, "has space", &b),
                     OG_EACTOR);
    assert_int_equal(og_op_start(s, op.operation_id, 1, "w", NULL),
                     OG_EINVAL);
    og_store_free(s);
}

/* P2: after a takeover the claimer's start finds another owner version. */
static void start_after_a_takeover_is_refused_to_the_old_owner(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, taken, after;
    og_exec_decision d;
    og_op_outcome o;
    og_op_events h;
    bool rec = false;

    (void)st;
    op = t_payout_op(s);
    taken = x_sweep(s, &op);
    assert_int_equal(taken.owner_version, 2);
    assert_int_equal(taken.status, OG_OP_ADMITTED);
    /* The paused claimer wakes and tries to start: refused, so it never
     * sends (P1), and the lease it carries would not help either. */
    x_set_time(op.operation_id, "lease_until", 60);
    assert_false(x_start(s, op.operation_id, 1));
    after = x_get(s, op.operation_id);
    assert_int_equal(after.status, OG_OP_ADMITTED);
    assert_int_equal(after.owner_version, 2);
    /* The sweeper's rule: an Admitted attempt after a takeover sent
     * nothing, NotStarted. */
    og_payout_after_takeover(&taken, &d);
    assert_int_equal(d.action, OG_EXEC_RECORD);
    assert_int_equal(d.status, OG_OP_NOT_STARTED);
    o = (og_op_outcome){d.status, d.reason, NULL, "sweeper", NULL};
    assert_int_equal(og_op_record(s, op.operation_id, ADMITTED,
                                  taken.owner_version, &o, &rec),
                     0);
    assert_true(rec);
    assert_false(x_start(s, op.operation_id, 1));
    assert_false(x_start(s, op.operation_id, 2)); /* terminal */
    after = x_get(s, op.operation_id);
    assert_int_equal(after.status, OG_OP_NOT_STARTED);
    assert_string_equal(after.reason, "not_started");
    h = x_history(s, op.operation_id);
    assert_int_equal(h.n, 3);
    assert_string_equal(h.v[1].kind, "takeover");
    assert_string_equal(h.v[2].kind, "outcome");
    assert_int_equal(h.v[2].to_status, OG_OP_NOT_STARTED);
    for (size_t i = 0; i < h.n; i++)
        assert_true(strcmp(h.v[i].kind, "started") != 0);
    og_op_events_free(&h);
    og_store_free(s);
}

/* P3: a Started attempt whose lease lapsed is taken over (owner version +
 * 1) and recorded Unknown; NotStarted is refused for it, by store.c (it was
 * not Admitted) and by the store (it is not Admitted any more). */
static void started_operation_is_taken_over_after_its_lease_and_recorded_unknown_never_not_started(
    void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, taken, after;
    og_exec_decision d;
    og_op_outcome o;
    og_op_events h;
    bool rec = true;

    (void)st;
    op = t_payout_op(s);
    assert_true(x_start(s, op.operation_id, 1));
    assert_false(x_takeover(s, op.operation_id, 1, NULL)); /* lease runs */
    taken = x_sweep(s, &op);
    assert_int_equal(taken.status, OG_OP_STARTED);
    assert_int_equal(taken.owner_version, 2);
    assert_int_equal(taken.kind, OG_OP_KIND_PAYOUT);
    assert_string_equal(taken.idempotency_key, op.idempotency_key);
    assert_string_equal(taken.client_reference, op.client_reference);

    /* Never NotStarted: not from Started (store.c) ... */
    o = (og_op_outcome){OG_OP_NOT_STARTED, "not_started", NULL, "sweeper", NULL};
    assert_int_equal(og_op_record(s, op.operation_id, STARTED, 2, &o, &rec),
                     OG_ETRANSITION);
    /* ... and the store's write expects Admitted, which it is not. */
    assert_int_equal(og_op_record(s, op.operation_id, ADMITTED, 2, &o, &rec),
                     0);
    assert_false(rec);
    assert_int_equal(x_get(s, op.operation_id).status, OG_OP_STARTED);

    /* The sweeper's rule: Unknown. */
    og_payout_after_takeover(&taken, &d);
    assert_int_equal(d.action, OG_EXEC_RECORD);
    assert_int_equal(d.status, OG_OP_UNKNOWN);
    assert_string_equal(d.reason, "lease_lapsed_after_start");
    /* The old owner's late outcome is fenced; the sweeper's lands. */
    assert_false(x_record(s, op.operation_id, STARTED, 1, OG_OP_SUCCEEDED,
                          "completed", "po_late", "payout-worker-1"));
    assert_false(x_may(s, op.operation_id, 1));
    o = (og_op_outcome){d.status, d.reason, NULL, "sweeper", NULL};
    assert_int_equal(og_op_record(s, op.operation_id, STARTED, 2, &o, &rec),
                     0);
    assert_true(rec);
    after = x_get(s, op.operation_id);
    assert_int_equal(after.status, OG_OP_UNKNOWN);
    assert_string_equal(after.reason, "lease_lapsed_after_start");
    assert_int_equal(after.owner_version, 2);
    assert_false(x_may(s, op.operation_id, 2)); /* Unknown: reconcile first */
    /* Unknown is the reconciler's: the sweeper records nothing more. */
    og_payout_after_takeover(&after, &d);
    assert_int_equal(d.action, OG_EXEC_RETRY_LATER);

    h = x_history(s, op.operation_id);
    assert_int_equal(h.n, 4);
    assert_string_equal(h.v[1].kind, "started");
    assert_string_equal(h.v[2].kind, "takeover");
    assert_int_equal(h.v[2].from_status, OG_OP_STARTED);
    assert_int_equal(h.v[2].to_status, OG_OP_STARTED);
    assert_int_equal(h.v[2].owner_version, 2);
    assert_string_equal(h.v[3].kind, "outcome");
    assert_int_equal(h.v[3].from_status, OG_OP_STARTED);
    assert_int_equal(h.v[3].to_status, OG_OP_UNKNOWN);
    og_op_events_free(&h);
    og_store_free(s);
}

/* P2: NotStarted is recorded only once a takeover raised the owner version:
 * at the initial version store.c refuses it (OG_ETRANSITION), the schema
 * refuses a raw write of it, and the store's write refuses it for a credit
 * even after a takeover. */
static void not_started_only_after_a_takeover_fenced_the_claimer(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, credit, taken;
    og_op_outcome o = {OG_OP_NOT_STARTED, "not_started", NULL, "sweeper", NULL};
    t_raw *raw = t_raw_open();
    og_exec_decision d;
    bool rec = true;
    t_case c;

    (void)st;
    op = t_payout_op(s);
    assert_int_equal(og_op_record(s, op.operation_id, ADMITTED, 1, &o, &rec),
                     OG_ETRANSITION);
    /* Only exactly Admitted may be expected. */
    assert_int_equal(og_op_record(s, op.operation_id, ADMITTED | UNKNOWN, 2,
                                  &o, &rec),
                     OG_ETRANSITION);
    /* The sweeper's rule asks for nothing without a takeover either. */
    og_payout_after_takeover(&op, &d);
    assert_int_equal(d.action, OG_EXEC_RETRY_LATER);
    /* Behind the library's back, the schema refuses it too. */
    {
        char sql[256];

        snprintf(sql, sizeof sql,
                 "UPDATE operations SET status = 'NotStarted'"
                 " WHERE operation_id = '%s'",
                 op.operation_id);
        assert_int_equal(t_raw_exec(raw, sql), -1);
    }
    assert_int_equal(x_get(s, op.operation_id).status, OG_OP_ADMITTED);
    /* The claimer can still start: nothing fenced it. */
    assert_true(x_start(s, op.operation_id, 1));

    /* A credit taken over is never NotStarted: its handler sends without a
     * start, so Admitted proves nothing (the store's write refuses it). */
    x_admit(s, &c, &credit);
    taken = x_sweep(s, &credit);
    assert_int_equal(og_op_record(s, c.op, ADMITTED, taken.owner_version, &o,
                                  &rec),
                     0);
    assert_false(rec);
    assert_int_equal(x_get(s, c.op).status, OG_OP_ADMITTED);
    og_payout_after_takeover(&taken, &d);
    assert_int_equal(d.action, OG_EXEC_RETRY_LATER);

    /* A payout after a takeover: recorded. */
    op = t_payout_op(s);
    taken = x_sweep(s, &op);
    assert_int_equal(og_op_record(s, op.operation_id, ADMITTED,
                                  taken.owner_version, &o, &rec),
                     0);
    assert_true(rec);
    assert_int_equal(x_get(s, op.operation_id).status, OG_OP_NOT_STARTED);
    t_raw_close(raw);
    og_store_free(s);
}

/* Concurrency: a claimer starting while a sweeper takes the attempt over as
 * its lease ends, each on its own thread and store object. */
typedef struct x_duel {
    pthread_barrier_t *ready, *go; /* stores open; the lease is set */
    const char *op;
    int start_delay_ms;
    bool started;       /* the claimer's og_op_start said yes */
    bool took_admitted; /* the sweeper took it over while Admitted */
    bool recorded;      /* ... and recorded NotStarted */
    int errors;
} x_duel;

static void x_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void *x_claimer(void *arg)
{
    x_duel *d = arg;
    og_store *s = t_store(1, 0);
    bool started = false;

    pthread_barrier_wait(d->ready);
    pthread_barrier_wait(d->go);
    x_sleep_ms(d->start_delay_ms);
    if (og_op_start(s, d->op, 1, "payout-worker-1", &started) != 0)
        __atomic_add_fetch(&d->errors, 1, __ATOMIC_RELAXED);
    d->started = started;
    og_store_free(s);
    return NULL;
}

/* The sweeper of docs/payouts.md: retries the takeover until it takes the
 * attempt (its lease lapses within the round), then applies
 * og_payout_after_takeover. */
static void *x_sweeper(void *arg)
{
    x_duel *d = arg;
    og_store *s = t_store(1, 0);
    og_operation taken;
    og_exec_decision dec;
    bool took = false;

    pthread_barrier_wait(d->ready);
    pthread_barrier_wait(d->go);
    for (int i = 0; i < 2000 && !took; i++) {
        if (og_op_takeover(s, d->op, 1, "sweeper", &taken, &took) != 0) {
            __atomic_add_fetch(&d->errors, 1, __ATOMIC_RELAXED);
            break;
        }
        if (!took)
            x_sleep_ms(1);
    }
    if (took) {
        d->took_admitted = taken.status == OG_OP_ADMITTED;
        og_payout_after_takeover(&taken, &dec);
        if (dec.action == OG_EXEC_RECORD) {
            og_op_outcome o = {dec.status, dec.reason, NULL, "sweeper", NULL};
            bool rec = false;

            if (og_op_record(s, d->op, OG_OP_BIT(taken.status),
                             taken.owner_version, &o, &rec) != 0)
                __atomic_add_fetch(&d->errors, 1, __ATOMIC_RELAXED);
            d->recorded = rec && dec.status == OG_OP_NOT_STARTED;
        }
    } else {
        __atomic_add_fetch(&d->errors, 1, __ATOMIC_RELAXED);
    }
    og_store_free(s);
    return NULL;
}

/* P2 under a real race, repeated: the lease ends 40 ms into each round and
 * the claimer starts 0-80 ms in, so either may come first. Exactly one
 * wins — the claimer's start, or the sweeper's takeover of the still
 * Admitted attempt — never both: a started attempt is never NotStarted,
 * and a NotStarted one was never started. */
static void concurrent_start_and_takeover_exactly_one_wins(void **st)
{
    og_store *s = t_store(0, 0);
    int starts = 0, sweeps = 0;

    (void)st;
    for (int round = 0; round < 24; round++) {
        pthread_barrier_t ready, go;
        pthread_t a, b;
        og_operation op = t_payout_op(s), after;
        x_duel d = {.ready = &ready, .go = &go, .op = op.operation_id,
                    .start_delay_ms = (round * 37) % 81};
        og_op_events h;
        int n_started = 0;

        pthread_barrier_init(&ready, NULL, 3);
        pthread_barrier_init(&go, NULL, 3);
        assert_int_equal(pthread_create(&a, NULL, x_claimer, &d), 0);
        assert_int_equal(pthread_create(&b, NULL, x_sweeper, &d), 0);
        /* Both store objects are open (connected): the lease ends 40 ms
         * from now. */
        pthread_barrier_wait(&ready);
        x_set_time_ms(op.operation_id, "lease_until", 40);
        pthread_barrier_wait(&go);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        pthread_barrier_destroy(&ready);
        pthread_barrier_destroy(&go);
        assert_int_equal(d.errors, 0);
        assert_true(d.started != d.took_admitted); /* exactly one wins */
        after = x_get(s, op.operation_id);
        h = x_history(s, op.operation_id);
        for (size_t i = 0; i < h.n; i++)
            n_started += strcmp(h.v[i].kind, "started") == 0;
        og_op_events_free(&h);
        if (d.started) {
            /* The sweeper found it Started: Unknown, never NotStarted. */
            starts++;
            assert_int_equal(n_started, 1);
            assert_int_equal(after.status, OG_OP_UNKNOWN);
            assert_false(d.recorded);
        } else {
            sweeps++;
            assert_int_equal(n_started, 0);
            assert_true(d.recorded);
            assert_int_equal(after.status, OG_OP_NOT_STARTED);
        }
        assert_int_equal(after.owner_version, 2);
    }
    print_message("starts won %d rounds, sweeps %d\n", starts, sweeps);
    og_store_free(s);
}

/* Unknown -> NotApplied (and an operator's NeedsReconciliation ->
 * NotApplied); NotApplied only from Unknown; nothing changes Succeeded,
 * Failed, NotStarted or NotApplied: no record from any owned status at any
 * version, no start, no takeover, no resolution. */
static void unknown_to_not_applied_and_terminal_statuses_never_change(
    void **st)
{
    og_store *s = t_store(0, 0);
    og_operation ops[4], taken;
    og_op_outcome o = {OG_OP_NOT_APPLIED, "not_found_after_window", NULL,
                       "reconciler", NULL};
    bool rec = true;

    (void)st;
    /* NotApplied from anything but Unknown is not a transition. */
    ops[0] = t_payout_op(s);
    assert_int_equal(og_op_record(s, ops[0].operation_id, ADMITTED, 1, &o,
                                  &rec),
                     OG_ETRANSITION);
    assert_true(x_start(s, ops[0].operation_id, 1));
    assert_int_equal(og_op_record(s, ops[0].operation_id, STARTED, 1, &o,
                                  &rec),
                     OG_ETRANSITION);
    assert_int_equal(og_op_record(s, ops[0].operation_id, STARTED | UNKNOWN, 1,
                                  &o, &rec),
                     OG_ETRANSITION);
    assert_int_equal(og_op_resolve(s, ops[0].operation_id, OG_OP_NOT_STARTED,
                                   "operator-1", "r", "e", NULL, &rec),
                     OG_ETRANSITION);
    /* Started -> Unknown -> NotApplied. */
    assert_true(x_record(s, ops[0].operation_id, STARTED, 1, OG_OP_UNKNOWN,
                         "provider_timeout", NULL, "payout-worker-1"));
    /* The store decides it too (P6, M36): not while "not found" cannot be
     * final (no final_absence_after), only after a takeover past it. */
    assert_int_equal(og_op_record(s, ops[0].operation_id, UNKNOWN, 1, &o,
                                  &rec),
                     0);
    assert_false(rec);
    assert_int_equal(og_op_record(
                         s, ops[0].operation_id, UNKNOWN,
                         t_absence_final(s, x_url[0] ? x_url : NULL,
                                         ops[0].operation_id, 1),
                         &o, &rec),
                     0);
    assert_true(rec);
    assert_int_equal(x_get(s, ops[0].operation_id).status, OG_OP_NOT_APPLIED);

    /* An operator: NeedsReconciliation -> NotApplied, fencing (v + 1). */
    ops[1] = t_payout_op(s);
    assert_true(x_start(s, ops[1].operation_id, 1));
    assert_true(x_record(s, ops[1].operation_id, STARTED, 1,
                         OG_OP_NEEDS_RECONCILIATION, "escalated", NULL,
                         "reconciler"));
    assert_int_equal(og_op_resolve(s, ops[1].operation_id, OG_OP_NOT_APPLIED,
                                   "operator-1", "not_in_provider_export",
                                   "export 2026-11-29: no PAY reference",
                                   NULL, &rec),
                     0);
    assert_true(rec);
    assert_int_equal(x_get(s, ops[1].operation_id).status, OG_OP_NOT_APPLIED);
    assert_int_equal(x_get(s, ops[1].operation_id).owner_version, 2);

    /* NotStarted, and a Succeeded attempt. */
    ops[2] = t_payout_op(s);
    taken = x_sweep(s, &ops[2]);
    o = (og_op_outcome){OG_OP_NOT_STARTED, "not_started", NULL, "sweeper", NULL};
    assert_int_equal(og_op_record(s, ops[2].operation_id, ADMITTED,
                                  taken.owner_version, &o, &rec),
                     0);
    assert_true(rec);
    ops[3] = t_payout_op(s);
    assert_true(x_start(s, ops[3].operation_id, 1));
    assert_true(x_record(s, ops[3].operation_id, STARTED, 1, OG_OP_SUCCEEDED,
                         "completed", "po_1", "payout-worker-1"));

    /* Nothing moves any of them. */
    for (int i = 0; i < 4; i++) {
        const char *id = ops[i].operation_id;
        og_operation before = x_get(s, id), after;
        static const og_op_status targets[] = {
            OG_OP_SUCCEEDED, OG_OP_FAILED, OG_OP_UNKNOWN,
            OG_OP_NEEDS_RECONCILIATION};

        x_set_time(id, "lease_until", -1);
        for (int64_t v = 1; v <= 3; v++) {
            for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++)
                assert_false(x_record(s, id, OWNED, v, targets[k], "late",
                                      NULL, "payout-worker-1"));
            o = (og_op_outcome){OG_OP_NOT_APPLIED, "late", NULL, "r", NULL};
            assert_int_equal(og_op_record(s, id, UNKNOWN, v, &o, &rec), 0);
            assert_false(rec);
            if (v > 1) {
                o = (og_op_outcome){OG_OP_NOT_STARTED, "late", NULL, "r", NULL};
                assert_int_equal(og_op_record(s, id, ADMITTED, v, &o, &rec),
                                 0);
                assert_false(rec);
            }
            assert_false(x_start(s, id, v));
            assert_false(x_takeover(s, id, v, NULL));
            assert_false(x_may(s, id, v));
        }
        assert_int_equal(og_op_resolve(s, id, OG_OP_FAILED, "operator-1", "r",
                                       "e", NULL, &rec),
                         0);
        assert_false(rec);
        after = x_get(s, id);
        assert_int_equal(after.status, before.status);
        assert_int_equal(after.owner_version, before.owner_version);
        assert_true(after.updated_at_us == before.updated_at_us);
    }
    og_store_free(s);
}

/* The operation's kind, key and reference come back as written; an
 * admission's are "credit" and its id (schema 7, M22). */
static void payout_operation_reads_back_its_kind_key_and_reference(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op, got, credit;
    og_op_list l;
    og_op_filter f = {0, false, 0, 1000, OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT)};
    og_grant g;
    og_intent in;
    char long_key[OG_ID_MAX + 2], gid[64], id[OG_UUID_LEN + 1];
    t_case c;

    (void)st;
    op = t_payout_op(s);
    got = x_get(s, op.operation_id);
    assert_int_equal(got.kind, OG_OP_KIND_PAYOUT);
    assert_true(strncmp(got.client_reference, "PAY-", 4) == 0);
    assert_string_equal(got.client_reference, op.client_reference);
    assert_true(strncmp(got.idempotency_key, "payout-PAY-", 11) == 0);
    assert_string_equal(got.issuer, "payouts");
    assert_true(got.lease_until_us > got.created_at_us);
    x_admit(s, &c, &credit);
    assert_int_equal(credit.kind, OG_OP_KIND_CREDIT);
    assert_string_equal(credit.idempotency_key, c.op);
    assert_string_equal(credit.client_reference, c.op);
    got = x_get(s, c.op);
    assert_int_equal(got.kind, OG_OP_KIND_CREDIT);
    assert_string_equal(got.idempotency_key, c.op);
    assert_string_equal(got.client_reference, c.op);
    /* The kind filter: payouts only, no credit. */
    assert_int_equal(og_op_scan(s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        assert_int_equal(l.v[i].kind, OG_OP_KIND_PAYOUT);
    og_op_list_free(&l);
    f.kinds = 1u << OG_OP_KIND_COUNT;
    assert_int_equal(og_op_scan(s, &f, &l), OG_EINVAL);
    f = (og_op_filter){1u << OG_OP_STATUS_COUNT, false, 0, 10, 0};
    assert_int_equal(og_op_scan(s, &f, &l), OG_EINVAL);
    /* The bounds of the new columns, before the store (S1). */
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    t_grant_id(gid, sizeof gid);
    t_uuid(id);
    g = (og_grant){"payouts", gid, t_now_us() + 60 * SEC, NULL, OG_FORM_ROW};
    in = (og_intent){id, "payout-worker-1", "BEN-7", "1", "EUR"};
    assert_int_equal(og__op_insert(s, OG_OP_KIND_PAYOUT, &g, &in, long_key,
                                   NULL, &got),
                     OG_EIDEMPOTENCY_KEY);
    assert_int_equal(og__op_insert(s, OG_OP_KIND_PAYOUT, &g, &in, NULL,
                                   "has space", &got),
                     OG_ECLIENT_REFERENCE);
    assert_int_equal(og_operation_get(s, id, &got), 0);
    og_store_free(s);
}

static void execution_inputs_are_validated(void **st)
{
    og_store *s = t_store(0, 0);
    og_operation op;
    og_op_outcome o = {OG_OP_SUCCEEDED, "created", NULL, "handler", NULL};
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
    cmocka_unit_test(start_requires_admitted_owner_lease_and_submit_by),
    cmocka_unit_test(start_after_a_takeover_is_refused_to_the_old_owner),
    cmocka_unit_test(
        started_operation_is_taken_over_after_its_lease_and_recorded_unknown_never_not_started),
    cmocka_unit_test(not_started_only_after_a_takeover_fenced_the_claimer),
    cmocka_unit_test(concurrent_start_and_takeover_exactly_one_wins),
    cmocka_unit_test(unknown_to_not_applied_and_terminal_statuses_never_change),
    cmocka_unit_test(payout_operation_reads_back_its_kind_key_and_reference),
};
const size_t t_execution_tests_count =
    sizeof t_execution_tests / sizeof t_execution_tests[0];
