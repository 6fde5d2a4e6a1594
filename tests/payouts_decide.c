/*
 * payouts_decide.c — the payout store, the decision (og_payout_decide): two
 * payouts decided concurrently cannot exceed the daily limit; an Allowed
 * decision's records are written in one transaction, every other outcome
 * alone; a decision is never rewritten, and og_payout_decision_get reads
 * it back as it captured the requester; re-authorization.
 * The conformance group payouts (payouts.c has the list).
 */
#include "payouts.h"

/* ===========================================================================
 * Two payouts decided concurrently cannot exceed the daily limit
 * ========================================================================= */
#define LIMIT_RACERS 8
#define LIMIT_THREAD_ROUNDS 8
#define LIMIT_PROC_ROUNDS 4
#define LIMIT_PROC_THREADS 4 /* per process, two processes */

/* One round: a fresh tenant whose limit the racers' payouts hit exactly.
 * Even rounds: 8 payouts of 25.00 on a limit of 100.00 (four fit, to the
 * cent); odd rounds: 60.00 and 40.00 decided concurrently by two racers
 * each (the first two exhaust the limit exactly, which of them wins
 * varies), and 60.00 x 6 on the same tenant. */
typedef struct limit_round {
    p_world w;
    char payout[LIMIT_RACERS][64];
    og_payout_decision d[LIMIT_RACERS];
    int rc[LIMIT_RACERS];
} limit_round;

static const char *limit_amount(int round, int i)
{
    if (round % 2 == 0)
        return "25.00";
    return i == 1 ? "40.00" : "60.00";
}

static void limit_round_setup(og_store *s, t_raw *raw, limit_round *lr,
                              int round)
{
    memset(lr, 0, sizeof *lr);
    p_world_new(s, raw, &lr->w, "lim", 10000);
    for (int i = 0; i < LIMIT_RACERS; i++) {
        p_id(lr->payout[i], &lr->w, "PAY", i);
        p_draft(s, &lr->w, lr->payout[i], limit_amount(round, i));
    }
}

/* What a round proves: no error; every decision Allowed or Denied
 * tenant.daily-limit; what was allowed sums to the reserved total, which
 * never exceeds the limit and here reaches it exactly; one grant, binding
 * and job per Allowed, none for the others. */
static void limit_round_check(t_raw *raw, limit_round *lr, int round)
{
    int64_t allowed_sum = 0;
    int allowed = 0;
    char where[1024];

    for (int i = 0; i < LIMIT_RACERS; i++) {
        int64_t minor = 0;

        if (lr->rc[i] != 0)
            fail_msg("round %d racer %d: %s", round, i,
                     og_err_name(lr->rc[i]));
        assert_int_equal(og_payout_amount_parse(limit_amount(round, i), "EUR",
                                                &minor),
                         0);
        if (lr->d[i].verdict.outcome == OG_PAYOUT_ALLOWED) {
            allowed++;
            allowed_sum += minor;
            assert_true(lr->d[i].issued);
            assert_int_equal(lr->d[i].reserved_minor, minor);
            assert_int_equal(p_count_payout(raw, "payout_grants",
                                            lr->payout[i]),
                             1);
            assert_int_equal(p_count_payout(raw, "payout_jobs", lr->payout[i]),
                             1);
        } else {
            assert_int_equal(lr->d[i].verdict.reason,
                             OG_PAYOUT_REASON_DAILY_LIMIT);
            assert_false(lr->d[i].issued);
            assert_int_equal(p_count_payout(raw, "payout_grants",
                                            lr->payout[i]),
                             0);
            assert_int_equal(p_count_payout(raw, "payout_jobs", lr->payout[i]),
                             0);
        }
    }
    if (allowed_sum != 10000 || p_reserved(raw, lr->w.tenant) != 10000)
        fail_msg("round %d: allowed %d summing %lld, reserved %lld (limit "
                 "10000)",
                 round, allowed, (long long)allowed_sum,
                 (long long)p_reserved(raw, lr->w.tenant));
    snprintf(where, sizeof where, "tenant_id = '%s' AND outcome = 'Allowed'",
             lr->w.tenant);
    assert_int_equal(p_count(raw, "payout_decisions", where), allowed);
    snprintf(where, sizeof where, "tenant_id = '%s'", lr->w.tenant);
    assert_int_equal(p_count(raw, "payout_grants", where), allowed);
    assert_int_equal(p_count(raw, "payout_decisions", where), LIMIT_RACERS);
}

typedef struct limit_race {
    og_store *stores[2];
    pthread_barrier_t start, done;
    limit_round round;
} limit_race;

typedef struct limit_racer {
    limit_race *r;
    int i;
} limit_racer;

static void *limit_racer_main(void *arg)
{
    limit_racer *me = arg;
    limit_race *r = me->r;

    for (int round = 0; round < LIMIT_THREAD_ROUNDS; round++) {
        og_payout_decide_req q;

        pthread_barrier_wait(&r->start);
        q = p_req(r->round.payout[me->i]);
        r->round.rc[me->i] = og_payout_decide(r->stores[me->i % 2], &q,
                                              &r->round.d[me->i]);
        pthread_barrier_wait(&r->done);
    }
    return NULL;
}

/* The processes' shared round results. */
typedef struct limit_shared {
    pthread_barrier_t start, done;
    limit_round rounds[LIMIT_PROC_ROUNDS];
} limit_shared;

typedef struct limit_proc_racer {
    limit_shared *sh;
    og_store *s;
    int i; /* the payout index this thread decides */
} limit_proc_racer;

static void *limit_proc_main(void *arg)
{
    limit_proc_racer *me = arg;

    for (int round = 0; round < LIMIT_PROC_ROUNDS; round++) {
        limit_round *lr = &me->sh->rounds[round];
        og_payout_decide_req q;

        pthread_barrier_wait(&me->sh->start);
        q = p_req(lr->payout[me->i]);
        lr->rc[me->i] = og_payout_decide(me->s, &q, &lr->d[me->i]);
        pthread_barrier_wait(&me->sh->done);
    }
    return NULL;
}

static void limit_proc_child(limit_shared *sh, int first)
{
    og_store *s = t_store(LIMIT_PROC_THREADS, P_RACE_TIMEOUT_MS);
    pthread_t th[LIMIT_PROC_THREADS];
    limit_proc_racer rs[LIMIT_PROC_THREADS];

    for (int k = 0; k < LIMIT_PROC_THREADS; k++) {
        rs[k] = (limit_proc_racer){sh, s, first + k};
        if (pthread_create(&th[k], NULL, limit_proc_main, &rs[k]) != 0)
            _exit(3);
    }
    for (int k = 0; k < LIMIT_PROC_THREADS; k++)
        pthread_join(th[k], NULL);
    og_store_free(s);
    _exit(0);
}

void two_payouts_decided_concurrently_cannot_exceed_the_daily_limit(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    limit_race *r = calloc(1, sizeof *r);
    pthread_t th[LIMIT_RACERS];
    limit_racer rs[LIMIT_RACERS];
    limit_shared *sh;
    pthread_barrierattr_t ba;
    pid_t kids[2];
    int status;

    (void)state;
    assert_non_null(r);
    /* Threads on two separate store objects. */
    r->stores[0] = t_store(LIMIT_RACERS, P_RACE_TIMEOUT_MS);
    r->stores[1] = t_store(LIMIT_RACERS, P_RACE_TIMEOUT_MS);
    pthread_barrier_init(&r->start, NULL, LIMIT_RACERS + 1);
    pthread_barrier_init(&r->done, NULL, LIMIT_RACERS + 1);
    for (int i = 0; i < LIMIT_RACERS; i++) {
        rs[i] = (limit_racer){r, i};
        assert_int_equal(pthread_create(&th[i], NULL, limit_racer_main, &rs[i]),
                         0);
    }
    for (int round = 0; round < LIMIT_THREAD_ROUNDS; round++) {
        limit_round_setup(s, raw, &r->round, round);
        pthread_barrier_wait(&r->start);
        pthread_barrier_wait(&r->done);
        limit_round_check(raw, &r->round, round);
    }
    for (int i = 0; i < LIMIT_RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r->start);
    pthread_barrier_destroy(&r->done);
    og_store_free(r->stores[0]);
    og_store_free(r->stores[1]);
    free(r);

    /* Separate processes, each with its own store object and threads. */
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->start, &ba, 2 * LIMIT_PROC_THREADS + 1);
    pthread_barrier_init(&sh->done, &ba, 2 * LIMIT_PROC_THREADS + 1);
    for (int round = 0; round < LIMIT_PROC_ROUNDS; round++)
        limit_round_setup(s, raw, &sh->rounds[round], round);
    fflush(NULL);
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0)
            limit_proc_child(sh, k * LIMIT_PROC_THREADS);
    }
    for (int round = 0; round < LIMIT_PROC_ROUNDS; round++) {
        pthread_barrier_wait(&sh->start);
        pthread_barrier_wait(&sh->done);
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int round = 0; round < LIMIT_PROC_ROUNDS; round++)
        limit_round_check(raw, &sh->rounds[round], round);
    pthread_barrier_destroy(&sh->start);
    pthread_barrier_destroy(&sh->done);
    munmap(sh, sizeof *sh);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * One transaction: an Allowed decision's records exist together or not at
 * all
 * ========================================================================= */

/* Nothing of a decision exists for payout id: no decision, binding, job,
 * grant row (the grants count unchanged), reservation, history beyond the
 * draft; the payout still Draft at version 1 with no attempt. */
static void p_assert_nothing_decided(og_store *s, t_raw *raw,
                                     const p_world *w, const char *id,
                                     int64_t payout_grants_before)
{
    og_payout_view v = p_get(s, id);
    char where[1024];

    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 0);
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 0);
    assert_int_equal(p_count_payout(raw, "payout_jobs", id), 0);
    assert_int_equal(p_count(raw, "grants", "issuer = 'payouts'"),
                     payout_grants_before);
    assert_int_equal(p_reserved(raw, w->tenant), 0);
    snprintf(where, sizeof where, "payout_id = '%s' AND kind <> 'drafted'", id);
    assert_int_equal(p_count(raw, "payout_events", where), 0);
    assert_int_equal(v.state, OG_PAYOUT_STATE_DRAFT);
    assert_int_equal(v.version, 1);
    assert_int_equal(v.attempt_count, 0);
    assert_string_equal(v.release_day, "");
}

/* A failure at each step of the Allowed decision's transaction leaves
 * nothing of it, and the same decision then succeeds. Skipped (reported
 * as a skip, not a pass) without the fault points. */
void allowed_decision_failing_at_any_step_of_its_transaction_writes_nothing(
    void **state)
{
    static const char *const points[] = {
        "payout_decide_after_reservation", "payout_decide_after_decision",
        "payout_decide_before_commit"};
    og_store *s;
    t_raw *raw;
    p_world w;
    char id[64];
    og_payout_decide_req r;
    og_payout_decision d;
    int64_t grants_before;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    s = t_store(0, 0);
    raw = t_raw_open();
    p_world_new(s, raw, &w, "txf", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        grants_before = p_count(raw, "grants", "issuer = 'payouts'");
        assert_int_equal(setenv("OG_FAULT", points[i], 1), 0);
        memset(&d, 0x5a, sizeof d);
        assert_int_equal(og_payout_decide(s, &r, &d), OG_ESTORE_UNAVAILABLE);
        assert_int_equal(unsetenv("OG_FAULT"), 0);
        assert_int_equal(d.decision_id[0], 0x5a); /* out untouched */
        p_assert_nothing_decided(s, raw, &w, id, grants_before);
    }
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_true(d.issued);
    assert_int_equal(d.attempt_number, 1);
    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 1);
    t_raw_close(raw);
    og_store_free(s);
}

void
allowed_decision_writes_decision_grant_reservation_approval_and_job_in_one_transaction(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    p_world w;
    char id[64], where[1024], *events;
    og_payout_decide_req r;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_view v;

    (void)state;
    p_world_new(s, raw, &w, "tx", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);

    /* Every record, together (a failure at each step: the test above). */
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_true(d.issued);
    assert_int_equal(d.attempt_number, 1);
    assert_int_equal(d.executable_payout_version, 2);
    assert_int_equal(d.reserved_minor, 425000);
    assert_string_equal(d.verdict.policy_version, OG_PAYOUT_POLICY_VERSION);
    assert_int_equal(d.verdict.evaluated.payout, 1);
    assert_true(d.decided_at_us >= d.observed_at_us);
    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 1);
    snprintf(where, sizeof where,
             "decision_id = '%s' AND outcome = 'Allowed' AND"
             " reason = 'payout.allowed' AND payout_version = 1 AND"
             " terms_fingerprint = '%s' AND requester_id = 'clerk-22' AND"
             " requester_role = 'accounts-payable' AND"
             " requester_approval_limit = 1000000 AND"
             " correlation_id = 'COR-8812' AND mode = 'submit'",
             d.decision_id, d.verdict.terms_fingerprint);
    assert_int_equal(p_count(raw, "payout_decisions", where), 1);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_string_equal(g.decision_id, d.decision_id);
    assert_string_equal(g.payout_id, id);
    assert_string_equal(g.tenant_id, w.tenant);
    assert_string_equal(g.operation, OG_PAYOUT_OPERATION);
    assert_string_equal(g.audience, OG_PAYOUT_AUDIENCE);
    assert_string_equal(g.terms_fingerprint, d.verdict.terms_fingerprint);
    assert_string_equal(g.policy_version, OG_PAYOUT_POLICY_VERSION);
    assert_int_equal(g.executable_payout_version, 2);
    assert_int_equal(g.attempt_number, 1);
    assert_int_equal(g.reserved_minor, 425000);
    assert_string_equal(g.release_day, d.release_day);
    assert_true(g.not_before_us / 1000 == r.not_before_us / 1000);
    assert_true(g.expires_at_us / 1000 == r.expires_at_us / 1000);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);
    assert_int_equal(g.released_at_us, 0);
    snprintf(where, sizeof where,
             "issuer = 'payouts' AND grant_id = '%s' AND family IS NULL AND"
             " consumed_at IS NULL AND revoked_at IS NULL",
             d.grant_id);
    assert_int_equal(p_count(raw, "grants", where), 1);
    assert_int_equal(p_reserved(raw, w.tenant), 425000);
    snprintf(where, sizeof where,
             "job_id = '%s' AND payout_id = '%s' AND grant_id = '%s' AND"
             " correlation_id = 'COR-8812' AND deliveries = 0 AND"
             " done_at IS NULL",
             d.job_id, id, d.grant_id);
    assert_int_equal(p_count(raw, "payout_jobs", where), 1);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(v.version, 2);
    assert_int_equal(v.attempt_count, 1);
    assert_string_equal(v.release_day, d.release_day);
    /* a history entry per step, in order */
    snprintf(where, sizeof where,
             "SELECT kind FROM payout_events WHERE payout_id = '%s'"
             " ORDER BY seq",
             id);
    events = t_raw_lines(raw, where);
    assert_non_null(events);
    assert_string_equal(events, "drafted\ndecided\nreserved\napproved\n"
                                "grant-issued\njob-queued\n");
    free(events);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Every outcome but Allowed is written alone
 * ========================================================================= */

typedef struct p_case {
    const char *what;
    og_payout_outcome outcome;
    og_payout_reason reason;
} p_case;

void non_allowed_decision_is_written_alone_and_issues_nothing(
    void **state)
{
    static const p_case cases[] = {
        {"tenant suspended", OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_TENANT_SUSPENDED},
        {"beneficiary not verified", OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE},
        {"destination moved to another beneficiary", OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED},
        {"the requester acted on another version", OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE},
        {"over the daily limit", OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"no such payout", OG_PAYOUT_DEFERRED,
         OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE},
        {"destination changed yesterday", OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"above the requester's approval limit",
         OG_PAYOUT_ESCALATION_RECOMMENDED,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
    };
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const p_case *c = &cases[i];
        og_payout_put_result pr = {0, 0};
        og_payout_decide_req r;
        og_payout_decision d;
        int64_t grants_before;
        char id[64], where[1024];
        p_world w;

        p_world_new(s, raw, &w, "na", 5000000);
        p_id(id, &w, "PAY", 1);
        p_draft(s, &w, id, "4250.00");
        r = p_req(id);
        switch (c->reason) {
        case OG_PAYOUT_REASON_TENANT_SUSPENDED: {
            og_payout_tenant_settings t = {w.tenant, true, 5000000, "EUR", 0};
            p_put_ok(og_payout_tenant_put(s, &t, 1, &pr), pr, "suspend");
            break;
        }
        case OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE: {
            og_payout_beneficiary_record b = {w.ben, w.tenant, false,
                                              OG_PAYOUT_BENEFICIARY_ACTIVE};
            p_put_ok(og_payout_beneficiary_put(s, &b, 1, &pr), pr, "unverify");
            break;
        }
        case OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED: {
            char other[64];
            og_payout_beneficiary_record b = {other, w.tenant, true,
                                              OG_PAYOUT_BENEFICIARY_ACTIVE};
            og_payout_destination_record dst = {w.dst, other, w.token};

            p_id(other, &w, "BEN", 2);
            p_put_ok(og_payout_beneficiary_put(s, &b, 0, &pr), pr, "ben 2");
            p_put_ok(og_payout_destination_put(s, &dst, 1, &pr), pr, "move");
            p_age_destination(raw, w.dst, 30);
            break;
        }
        case OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE:
            r.payout_version = 7; /* the record is at 1 */
            break;
        case OG_PAYOUT_REASON_DAILY_LIMIT: {
            og_payout_tenant_settings t = {w.tenant, false, 100000, "EUR", 0};
            p_put_ok(og_payout_tenant_put(s, &t, 1, &pr), pr, "lower limit");
            break;
        }
        case OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE:
            p_id(id, &w, "PAY-MISSING", 9);
            r.payout_id = id;
            break;
        case OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED:
            p_age_destination(raw, w.dst, 1);
            break;
        case OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT:
            r.requester_approval_limit = 425000 - 1;
            break;
        default:
            fail();
        }
        grants_before = p_count(raw, "grants", "issuer = 'payouts'");
        d = p_decide(s, &r);
        if (d.verdict.reason != c->reason)
            fail_msg("%s: %s", c->what,
                     og_payout_reason_name(d.verdict.reason));
        assert_int_equal(d.verdict.outcome, c->outcome);
        assert_false(d.issued);
        assert_string_equal(d.grant_id, "");
        assert_string_equal(d.job_id, "");
        /* the decision, with its reason, and its history entry: alone */
        snprintf(where, sizeof where,
                 "decision_id = '%s' AND payout_id = '%s' AND outcome = '%s'"
                 " AND reason = '%s'",
                 d.decision_id, id, og_payout_outcome_name(c->outcome),
                 og_payout_reason_name(c->reason));
        assert_int_equal(p_count(raw, "payout_decisions", where), 1);
        assert_int_equal(p_count_payout(raw, "payout_decisions", id), 1);
        snprintf(where, sizeof where,
                 "payout_id = '%s' AND kind = 'decided' AND reason = '%s'", id,
                 og_payout_reason_name(c->reason));
        assert_int_equal(p_count(raw, "payout_events", where), 1);
        snprintf(where, sizeof where,
                 "payout_id = '%s' AND kind NOT IN ('drafted', 'decided')", id);
        assert_int_equal(p_count(raw, "payout_events", where), 0);
        assert_int_equal(p_count_payout(raw, "payout_grants", id), 0);
        assert_int_equal(p_count_payout(raw, "payout_jobs", id), 0);
        assert_int_equal(p_count(raw, "grants", "issuer = 'payouts'"),
                         grants_before);
        assert_int_equal(p_reserved(raw, w.tenant), 0);
        if (c->reason == OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE) {
            /* nothing was read: no tenant, no fingerprint, no versions */
            snprintf(where, sizeof where,
                     "decision_id = '%s' AND tenant_id IS NULL AND"
                     " terms_fingerprint IS NULL AND payout_version IS NULL",
                     d.decision_id);
            assert_int_equal(p_count(raw, "payout_decisions", where), 1);
            assert_int_equal(og_payout_get(s, id, &(og_payout_view){0}), 0);
        } else {
            og_payout_view v = p_get(s, id);

            assert_int_equal(v.state, OG_PAYOUT_STATE_DRAFT);
            assert_int_equal(v.version, 1);
            assert_int_equal(v.attempt_count, 0);
        }
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A decision is history: never rewritten
 * ========================================================================= */
void decision_is_never_rewritten(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {0, 0};
    og_revoke_outcome ro;
    og_payout_decide_req r;
    og_payout_decision d, d2;
    char id[64], where[1024], sql[1280], *before, *after;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "hist", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    snprintf(where, sizeof where, "decision_id = '%s'", d.decision_id);
    before = p_rows_text(raw, "payout_decisions", where);
    assert_non_null(before);
    assert_non_null(strstr(before, "Allowed"));

    /* What happens afterwards is recorded elsewhere: a finance hold, a
     * fresh decision (re-authorization), a cancellation. */
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1", &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    r = p_req(id);
    r.reauthorize = true;
    d2 = p_decide(s, &r);
    assert_int_equal(d2.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_string_not_equal(d2.decision_id, d.decision_id);
    assert_int_equal(og_payout_cancel(s, id, 3, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    r.reauthorize = false;
    d2 = p_decide(s, &r); /* a Cancelled payout: Denied, a new row */
    assert_int_equal(d2.verdict.reason,
                     OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 3);

    /* The store itself refuses to change or remove a decision or a history
     * entry, whoever asks. */
    snprintf(sql, sizeof sql,
             "UPDATE payout_decisions SET outcome = 'Denied' WHERE %s", where);
    assert_int_not_equal(t_raw_exec(raw, sql), 0);
    snprintf(sql, sizeof sql, "DELETE FROM payout_decisions WHERE %s", where);
    assert_int_not_equal(t_raw_exec(raw, sql), 0);
    snprintf(sql, sizeof sql,
             "UPDATE payout_events SET reason = 'x' WHERE payout_id = '%s'",
             id);
    assert_int_not_equal(t_raw_exec(raw, sql), 0);
    snprintf(sql, sizeof sql, "DELETE FROM payout_events WHERE payout_id = '%s'",
             id);
    assert_int_not_equal(t_raw_exec(raw, sql), 0);
    if (t_kind == T_POSTGRES) /* nothing references the history */
        assert_int_not_equal(t_raw_exec(raw, "TRUNCATE payout_events"), 0);

    after = p_rows_text(raw, "payout_decisions", where);
    assert_non_null(after);
    assert_string_equal(after, before);
    free(before);
    free(after);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A decision read back (og_payout_decision_get): what it captured
 * ========================================================================= */

/* view is the row decision d of request r wrote: every column. */
static void assert_decision_view(const og_payout_decision_view *v,
                                 const og_payout_decision *d,
                                 const og_payout_decide_req *r,
                                 const char *tenant)
{
    assert_string_equal(v->decision_id, d->decision_id);
    assert_string_equal(v->payout_id, r->payout_id);
    assert_string_equal(v->tenant_id, tenant);
    assert_int_equal(v->reauthorize, r->reauthorize);
    assert_int_equal(v->outcome, d->verdict.outcome);
    assert_int_equal(v->reason, d->verdict.reason);
    assert_string_equal(v->policy_version, d->verdict.policy_version);
    assert_string_equal(v->terms_fingerprint, d->verdict.terms_fingerprint);
    assert_memory_equal(&v->evaluated, &d->verdict.evaluated,
                        sizeof v->evaluated);
    assert_string_equal(v->requester_id, r->requester_id);
    assert_string_equal(v->requester_role, r->requester_role);
    assert_int_equal(v->requester_approval_limit,
                     r->requester_approval_limit);
    assert_int_equal(v->observed_at_us, d->observed_at_us);
    assert_int_equal(v->decided_at_us, d->decided_at_us);
    assert_string_equal(v->correlation_id, r->correlation_id);
}

void decision_read_returns_what_the_decision_captured(void **state)
{
    static char not_a_store[64]; /* touching it would crash the test */
    og_store *bogus = (og_store *)(void *)not_a_store;
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decide_req r;
    og_payout_decision d;
    og_payout_decision_view v, untouched;
    char id[64], upper[OG_UUID_LEN + 1], big[OG_UUID_LEN + 2];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "dget", 5000000);

    /* Allowed: the requester's facts as captured, every other column as
     * og_payout_decide reported it; the id in any case. */
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_decision_get(s, d.decision_id, &v), 1);
    assert_decision_view(&v, &d, &r, w.tenant);
    assert_int_equal(v.requester_approval_limit, 1000000);
    for (size_t i = 0; i <= OG_UUID_LEN; i++)
        upper[i] = (char)(d.decision_id[i] >= 'a' && d.decision_id[i] <= 'f'
                              ? d.decision_id[i] - 'a' + 'A'
                              : d.decision_id[i]);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_decision_get(s, upper, &v), 1);
    assert_decision_view(&v, &d, &r, w.tenant);

    /* Not Allowed (EscalationRecommended: the captured limit is below the
     * amount): another requester, role and limit, read back as captured. */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);
    r.requester_id = "clerk-23";
    r.requester_role = "junior-clerk";
    r.requester_approval_limit = 425000 - 1;
    r.correlation_id = "COR-8813";
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_decision_get(s, d.decision_id, &v), 1);
    assert_decision_view(&v, &d, &r, w.tenant);
    assert_int_equal(v.outcome, OG_PAYOUT_ESCALATION_RECOMMENDED);
    assert_int_equal(v.requester_approval_limit, 425000 - 1);

    /* A re-authorization of a payout that is not there: Deferred, nothing
     * read — no tenant, no fingerprint, no versions (the NULL columns). */
    p_id(id, &w, "PAY-MISSING", 3);
    r = p_req(id);
    r.reauthorize = true;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_decision_get(s, d.decision_id, &v), 1);
    assert_decision_view(&v, &d, &r, "");
    assert_true(v.reauthorize);
    assert_string_equal(v.terms_fingerprint, "");
    assert_int_equal(v.evaluated.payout, 0);

    /* No such decision: 0, *out untouched. */
    memset(&untouched, 0x5a, sizeof untouched);
    v = untouched;
    assert_int_equal(og_payout_decision_get(
                         s, "0b9e7c4e-6f7d-4a44-9c1e-3f2a9d8b7c61", &v),
                     0);
    assert_memory_equal(&v, &untouched, sizeof v);

    /* Input is checked before any I/O: bogus is not a store. */
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(og_payout_decision_get(bogus, NULL, &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(bogus, "", &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(bogus, "not-a-uuid", &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(
                         bogus, "00000000-0000-0000-0000-000000000000", &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(
                         bogus, "0b9e7c4e-6f7d-4a44-9c1e-3f2a9d8b7c6g", &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(bogus, big, &v),
                     OG_EPAYOUT_DECISION);
    assert_int_equal(og_payout_decision_get(bogus, upper, NULL), OG_EINVAL);
    assert_int_equal(og_payout_decision_get(NULL, upper, &v), OG_EINVAL);
    assert_memory_equal(&v, &untouched, sizeof v);
    assert_string_equal(og_err_name(OG_EPAYOUT_DECISION),
                        "input.decision_id_invalid");
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Re-authorization (docs/payouts.md, section 3, P5; docs/design.md,
 * "Delayed payouts: the decision side")
 * ========================================================================= */
#define REAUTH_RACERS 6
#define REAUTH_ROUNDS 4

typedef struct reauth_race {
    og_store *stores[2];
    pthread_barrier_t start;
    char payout[64];
    int64_t version; /* 0: as read */
    og_payout_decision d[REAUTH_RACERS];
    int rc[REAUTH_RACERS];
} reauth_race;

typedef struct reauth_racer {
    reauth_race *r;
    int i;
} reauth_racer;

static void *reauth_racer_main(void *arg)
{
    reauth_racer *me = arg;
    reauth_race *r = me->r;
    og_payout_decide_req q = p_req(r->payout);

    q.reauthorize = true;
    q.payout_version = r->version;
    pthread_barrier_wait(&r->start);
    r->rc[me->i] = og_payout_decide(r->stores[me->i % 2], &q, &r->d[me->i]);
    return NULL;
}

static void reauth_race_run(reauth_race *r)
{
    pthread_t th[REAUTH_RACERS];
    reauth_racer rs[REAUTH_RACERS];

    pthread_barrier_init(&r->start, NULL, REAUTH_RACERS);
    for (int i = 0; i < REAUTH_RACERS; i++) {
        rs[i] = (reauth_racer){r, i};
        assert_int_equal(pthread_create(&th[i], NULL, reauth_racer_main, &rs[i]),
                         0);
    }
    for (int i = 0; i < REAUTH_RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r->start);
    for (int i = 0; i < REAUTH_RACERS; i++)
        if (r->rc[i] != 0)
            fail_msg("racer %d: %s", i, og_err_name(r->rc[i]));
}

void concurrent_reauthorizations_allocate_distinct_attempt_numbers(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    reauth_race *r = calloc(1, sizeof *r);

    (void)state;
    assert_non_null(r);
    r->stores[0] = t_store(REAUTH_RACERS, P_RACE_TIMEOUT_MS);
    r->stores[1] = t_store(REAUTH_RACERS, P_RACE_TIMEOUT_MS);
    for (int round = 0; round < REAUTH_ROUNDS; round++) {
        bool seen[REAUTH_RACERS + 2] = {false};
        og_payout_view v;
        int allowed = 0;
        p_world w;

        /* Each acting on the version it reads: every one is a fresh
         * decision on the newest record, and each gets its own number. */
        p_world_new(s, raw, &w, "reauth", INT64_C(100000000));
        p_id(r->payout, &w, "PAY", 1);
        p_draft(s, &w, r->payout, "4250.00");
        assert_int_equal(p_decide_allowed(s, r->payout).attempt_number, 1);
        r->version = 0;
        reauth_race_run(r);
        for (int i = 0; i < REAUTH_RACERS; i++) {
            int64_t n = r->d[i].attempt_number;

            assert_int_equal(r->d[i].verdict.outcome, OG_PAYOUT_ALLOWED);
            assert_true(n >= 2 && n <= REAUTH_RACERS + 1);
            assert_false(seen[n]); /* distinct */
            seen[n] = true;
            assert_int_equal(r->d[i].executable_payout_version, n + 1);
        }
        v = p_get(s, r->payout);
        assert_int_equal(v.attempt_count, REAUTH_RACERS + 1);
        assert_int_equal(v.version, REAUTH_RACERS + 2);
        assert_int_equal(p_count_payout(raw, "payout_grants", r->payout),
                         REAUTH_RACERS + 1);
        assert_int_equal(t_raw_int(raw,
                                   "SELECT count(DISTINCT attempt_number)"
                                   " FROM payout_grants WHERE payout_id = '%s'",
                                   r->payout),
                         REAUTH_RACERS + 1);

        /* Each acting on the same version: one decision wins it; the
         * others find it moved (payout.not-submittable) and issue nothing. */
        r->version = v.version;
        reauth_race_run(r);
        for (int i = 0; i < REAUTH_RACERS; i++) {
            if (r->d[i].verdict.outcome == OG_PAYOUT_ALLOWED) {
                allowed++;
                assert_int_equal(r->d[i].attempt_number, REAUTH_RACERS + 2);
            } else {
                assert_int_equal(r->d[i].verdict.reason,
                                 OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
            }
        }
        assert_int_equal(allowed, 1);
        assert_int_equal(p_get(s, r->payout).attempt_count, REAUTH_RACERS + 2);
        assert_int_equal(p_count_payout(raw, "payout_grants", r->payout),
                         REAUTH_RACERS + 2);
    }
    og_store_free(r->stores[0]);
    og_store_free(r->stores[1]);
    free(r);
    t_raw_close(raw);
    og_store_free(s);
}

/* Sets (uuid) or clears (NULL) the payout's active attempt, behind the
 * store's back: the claim that sets it is another branch's. */
static void p_set_active_attempt(t_raw *raw, const char *id, const char *att)
{
    char sql[256];

    if (att)
        snprintf(sql, sizeof sql,
                 "UPDATE payouts SET active_attempt = '%s' WHERE payout_id = '%s'",
                 att, id);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE payouts SET active_attempt = NULL WHERE payout_id = '%s'",
                 id);
    p_raw_exec(raw, sql);
}

void reauthorization_is_refused_while_an_attempt_is_active(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {0, 0};
    char id[64], draft[64], att[OG_UUID_LEN + 1];
    og_payout_decide_req r;
    og_payout_decision d;
    og_payout_view v;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "active", 5000000);
    p_id(id, &w, "PAY", 1);
    p_id(draft, &w, "PAY", 2);
    p_draft(s, &w, id, "4250.00");
    p_draft(s, &w, draft, "10.00");
    p_decide_allowed(s, id);
    t_uuid(att);
    p_set_active_attempt(raw, id, att); /* attempt 1 Claimed/Started/Unknown */
    r = p_req(id);
    r.reauthorize = true;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_DENIED);
    assert_int_equal(d.verdict.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    assert_false(d.issued);
    /* nothing moved: one grant, one job, one reservation, attempt 1 */
    v = p_get(s, id);
    assert_int_equal(v.version, 2);
    assert_int_equal(v.attempt_count, 1);
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    assert_int_equal(p_count_payout(raw, "payout_jobs", id), 1);
    assert_int_equal(p_reserved(raw, w.tenant), 425000);
    /* nor can it be cancelled under a live attempt */
    assert_int_equal(og_payout_cancel(s, id, 2, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);

    /* The attempt resolved (terminal): a re-authorization gets attempt 2. */
    p_set_active_attempt(raw, id, NULL);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(d.attempt_number, 2);
    assert_int_equal(d.executable_payout_version, 3);

    /* The modes do not mix: a Draft cannot be re-authorized, an Approved
     * payout cannot be submitted as a first decision. */
    r.payout_id = draft;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    r.payout_id = id;
    r.reauthorize = false;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    assert_int_equal(p_get(s, draft).state, OG_PAYOUT_STATE_DRAFT);
    assert_int_equal(p_get(s, id).attempt_count, 2);
    t_raw_close(raw);
    og_store_free(s);
}
