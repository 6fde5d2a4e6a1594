/*
 * payouts.c — the payout store (schemas 8-10: decision, claim, resolution,
 * oncegate/payout_store.h; seed 002 sections 5, 6, 7, 12, 16), run
 * unchanged on both engines and both consumption-keys modes:
 *
 *   conformance BACKEND payouts [token [readable|hashed]]
 *
 * Each test is named after the claim it proves. The concurrency claims
 * race real callers — threads on two store objects, and separate OS
 * processes with their own — against the real engine, and repeat. Rows are
 * read behind the store's back (tests/harness.c's raw access), so what is
 * checked is what the store holds, not what it says.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "oncegate/payout_store.h"

#ifndef OG_TEST_FAULT_INJECTION
#define OG_TEST_FAULT_INJECTION 0
#endif

#define SEC INT64_C(1000000)
#define MINUTE (60 * SEC)
#define DAY (86400 * SEC)
/* The claim under test is atomicity, not latency (conformance.c). */
#define P_RACE_TIMEOUT_MS 30000

/* ===========================================================================
 * A world: a tenant, a verified Active beneficiary, a destination changed
 * long ago (so destination.recently-changed does not decide), payouts.
 * ========================================================================= */

typedef struct p_world {
    char tag[48];
    char tenant[64], ben[64], dst[64];
    char token[96];
} p_world;

/* A unique id "<prefix>-<tag>-<n>" into out (64 bytes). */
static void p_id(char *out, const p_world *w, const char *prefix, int n)
{
    snprintf(out, 64, "%s-%s-%d", prefix, w->tag, n);
}

static void p_raw_exec(t_raw *raw, const char *sql)
{
    if (t_raw_exec(raw, sql) != 0)
        fail_msg("raw: %s", sql);
}

/* Moves destination dst's changed_at `days` into the past, behind the
 * store's back: tests decide when it changed rather than wait a week. */
static void p_age_destination(t_raw *raw, const char *dst, int days)
{
    char sql[512];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = clock_timestamp() -"
                 " interval '%d days' WHERE destination_id = '%s'",
                 days, dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = %lld"
                 " WHERE destination_id = '%s'",
                 (long long)(t_now_us() - days * DAY), dst);
    p_raw_exec(raw, sql);
}

static og_payout_put_result p_put_ok(int rc, og_payout_put_result r,
                                     const char *what)
{
    if (rc != 0 || r.outcome != OG_PAYOUT_WRITTEN)
        fail_msg("%s: %s / %s", what, og_err_name(rc),
                 og_payout_write_name(r.outcome));
    return r;
}

/* Creates w's records in s: tenant (limit in EUR cents, offset 0), its
 * beneficiary, a destination aged 30 days. */
static void p_world_new(og_store *s, t_raw *raw, p_world *w, const char *tag,
                        int64_t limit)
{
    char u[OG_UUID_LEN + 1];
    og_payout_put_result r = {0, 0};
    int rc;

    memset(w, 0, sizeof *w);
    t_uuid(u);
    snprintf(w->tag, sizeof w->tag, "%s-%.8s", tag, u);
    p_id(w->tenant, w, "T", 0);
    p_id(w->ben, w, "BEN", 0);
    p_id(w->dst, w, "DST", 0);
    snprintf(w->token, sizeof w->token, "tok_SECRET_%.8s%.4s", u, u + 9);
    {
        og_payout_tenant_settings t = {w->tenant, false, limit, "EUR", 0};
        rc = og_payout_tenant_put(s, &t, 0, &r);
        p_put_ok(rc, r, "tenant");
    }
    {
        og_payout_beneficiary_record b = {w->ben, w->tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        rc = og_payout_beneficiary_put(s, &b, 0, &r);
        p_put_ok(rc, r, "beneficiary");
    }
    {
        og_payout_destination_record d = {w->dst, w->ben, w->token};
        rc = og_payout_destination_put(s, &d, 0, &r);
        p_put_ok(rc, r, "destination");
    }
    p_age_destination(raw, w->dst, 30);
}

/* Drafts payout id of amount (EUR text) in w. */
static void p_draft(og_store *s, const p_world *w, const char *id,
                    const char *amount)
{
    og_payout_draft_req d = {
        id, {w->tenant, w->ben, w->dst, 1, amount, "EUR", "invoice INV-9031"},
        "clerk-22"};
    og_payout_put_result r = {0, 0};
    int rc = og_payout_draft(s, &d, &r);

    p_put_ok(rc, r, "draft");
    assert_int_equal(r.version, 1);
}

/* A window from now + start_min for 30 minutes. */
static void p_window(og_payout_decide_req *r, int start_min)
{
    r->not_before_us = t_now_us() + start_min * MINUTE;
    r->expires_at_us = r->not_before_us + 30 * MINUTE;
}

static og_payout_decide_req p_req(const char *payout_id)
{
    og_payout_decide_req r;

    memset(&r, 0, sizeof r);
    r.payout_id = payout_id;
    r.requester_id = "clerk-22";
    r.requester_role = "accounts-payable";
    r.requester_approval_limit = 1000000; /* 10,000.00 EUR */
    r.correlation_id = "COR-8812";
    p_window(&r, 5);
    return r;
}

static og_payout_decision p_decide(og_store *s, const og_payout_decide_req *r)
{
    og_payout_decision d;
    int rc = og_payout_decide(s, r, &d);

    if (rc != 0)
        fail_msg("og_payout_decide(%s): %s", r->payout_id, og_err_name(rc));
    return d;
}

static og_payout_decision p_decide_allowed(og_store *s, const char *id)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d = p_decide(s, &r);

    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

/* Counts rows of table where the condition holds (printf-formatted). */
static int64_t p_count(t_raw *raw, const char *table, const char *where)
{
    return t_raw_int(raw, "SELECT count(*) FROM %s WHERE %s", table, where);
}

static int64_t p_count_payout(t_raw *raw, const char *table, const char *id)
{
    char where[1024];

    snprintf(where, sizeof where, "payout_id = '%s'", id);
    return p_count(raw, table, where);
}

/* The tenant's reserved total over all its days (0 without a day row). */
static int64_t p_reserved(t_raw *raw, const char *tenant)
{
    return t_raw_int(raw,
                     "SELECT coalesce(sum(reserved), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     tenant);
}

static og_payout_view p_get(og_store *s, const char *id)
{
    og_payout_view v;

    assert_int_equal(og_payout_get(s, id, &v), 1);
    return v;
}

/* Every row of table matching where, every column as text, one line a row
 * (SQLite: quote() of each column; PostgreSQL: the row as text), into a
 * malloc'd string. */
static char *p_rows_text(t_raw *raw, const char *table, const char *where)
{
    char sql[8192];

    if (t_kind == T_POSTGRES) {
        snprintf(sql, sizeof sql, "SELECT x::text FROM %s x WHERE %s", table,
                 where);
    } else {
        char q[256], *cols;
        size_t n = 0;

        snprintf(q, sizeof q, "SELECT name FROM pragma_table_info('%s')",
                 table);
        cols = t_raw_lines(raw, q);
        assert_non_null(cols);
        n = (size_t)snprintf(sql, sizeof sql, "SELECT ''");
        for (char *line = strtok(cols, "\n"); line; line = strtok(NULL, "\n"))
            n += (size_t)snprintf(sql + n, sizeof sql - n,
                                  " || quote(\"%s\") || '|'", line);
        snprintf(sql + n, sizeof sql - n, " FROM %s WHERE %s", table, where);
        free(cols);
    }
    return t_raw_lines(raw, sql);
}

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

static void two_payouts_decided_concurrently_cannot_exceed_the_daily_limit(
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

static void
allowed_decision_writes_decision_grant_reservation_approval_and_job_in_one_transaction(
    void **state)
{
    static const char *const points[] = {
        "payout_decide_after_reservation", "payout_decide_after_decision",
        "payout_decide_before_commit"};
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    p_world w;
    char id[64], where[1024], *events;
    og_payout_decide_req r;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_view v;
    int64_t grants_before;

    (void)state;
    p_world_new(s, raw, &w, "tx", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);

    /* A failure at each step of the transaction leaves nothing of it. */
    if (OG_TEST_FAULT_INJECTION) {
        for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
            grants_before = p_count(raw, "grants", "issuer = 'payouts'");
            assert_int_equal(setenv("OG_FAULT", points[i], 1), 0);
            memset(&d, 0x5a, sizeof d);
            assert_int_equal(og_payout_decide(s, &r, &d),
                             OG_ESTORE_UNAVAILABLE);
            assert_int_equal(unsetenv("OG_FAULT"), 0);
            assert_int_equal(d.decision_id[0], 0x5a); /* out untouched */
            p_assert_nothing_decided(s, raw, &w, id, grants_before);
        }
    } else {
        fprintf(stderr, "(fault points not compiled in: "
                        "-Dfault_injection=true runs that half)\n");
    }

    /* The same decision without a failure: every record, together. */
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

static void non_allowed_decision_is_written_alone_and_issues_nothing(
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
static void decision_is_never_rewritten(void **state)
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
 * Re-authorization (seed section 16)
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

static void concurrent_reauthorizations_allocate_distinct_attempt_numbers(
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

static void reauthorization_is_refused_while_an_attempt_is_active(
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

/* ===========================================================================
 * Grants: expiry and revocation release a reservation exactly once
 * ========================================================================= */

/* Marks the grant consumed by an attempt, behind the store's back: the
 * claim that consumes it is another branch's. */
static void p_consume(t_raw *raw, const char *grant_id)
{
    char sql[512], op[OG_UUID_LEN + 1];

    t_uuid(op);
    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE grants SET consumed_at = clock_timestamp(),"
                 " consumed_by_operation = '%s'"
                 " WHERE issuer = 'payouts' AND grant_id = '%s'",
                 op, grant_id);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE grants SET consumed_at = %lld,"
                 " consumed_by_operation = '%s'"
                 " WHERE issuer = 'payouts' AND grant_id = '%s'",
                 (long long)t_now_us(), op, grant_id);
    p_raw_exec(raw, sql);
}

/* A decision whose window ended `ago_min` minutes ago (20 minutes long):
 * the policy does not read the window, the janitor does. */
static og_payout_decision p_decide_window_past(og_store *s, const char *id,
                                               int ago_min)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d;

    r.expires_at_us = t_now_us() - ago_min * MINUTE;
    r.not_before_us = r.expires_at_us - 20 * MINUTE;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    return d;
}

static int64_t p_released_events(t_raw *raw, const char *grant_id)
{
    return t_raw_int(raw,
                     "SELECT count(*) FROM payout_events WHERE grant_id = '%s'"
                     " AND kind = 'reservation-released'",
                     grant_id);
}

#define EXPIRY_JANITORS 4
#define EXPIRY_GRANTS 12

typedef struct janitor_run {
    og_store *s;
    pthread_barrier_t *start;
    og_payout_expiry_stats st;
    int rc;
} janitor_run;

static void *janitor_main(void *arg)
{
    janitor_run *j = arg;

    pthread_barrier_wait(j->start);
    j->rc = og_payout_expire_grants(j->s, 2, 100, &j->st);
    return NULL;
}

static void unused_grant_expiry_releases_its_reservation_once(void **state)
{
    char url[4200], id[64], gone[EXPIRY_GRANTS][OG_ID_MAX + 1];
    og_store *s = t_fresh_store("pexpiry", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision expired, live, consumed;
    og_payout_expiry_stats st;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_store *js[2];
    janitor_run runs[EXPIRY_JANITORS];
    pthread_t th[EXPIRY_JANITORS];
    pthread_barrier_t start;
    int64_t released = 0;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "exp", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    expired = p_decide_window_past(s, id, 10); /* past leeway + margin */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "200.00");
    live = p_decide_allowed(s, id); /* its window lies ahead */
    p_id(id, &w, "PAY", 3);
    p_draft(s, &w, id, "400.00");
    consumed = p_decide_window_past(s, id, 10);
    p_consume(raw, consumed.grant_id); /* its reservation follows its attempt */
    assert_int_equal(p_reserved(raw, w.tenant), 70000);
    assert_int_equal(og_payout_grant_get(s, expired.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_EXPIRED);
    assert_int_equal(g.released_at_us, 0);

    /* One pass releases the unused expired grant's reservation, and only
     * it; a second pass finds nothing. */
    assert_int_equal(og_payout_expire_grants(s, 1, 10, &st), 0);
    assert_int_equal(st.grants, 1);
    assert_int_equal(st.batches, 2); /* a full batch of 1, then an empty */
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(og_payout_grant_get(s, expired.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_EXPIRED);
    assert_true(g.released_at_us > 0);
    assert_int_equal(p_count(raw, "payout_grants",
                             "release_cause = 'expired'"),
                     1);
    assert_int_equal(p_released_events(raw, expired.grant_id), 1);
    assert_int_equal(og_payout_expire_grants(s, 100, 10, &st), 0);
    assert_int_equal(st.grants, 0);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(og_payout_grant_get(s, consumed.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_int_equal(g.released_at_us, 0);
    assert_int_equal(og_payout_grant_get(s, live.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);

    /* Revoking it afterwards (unconsumed, so still revocable) releases
     * nothing again. */
    assert_int_equal(og_payout_grant_revoke(s, expired.grant_id, "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(p_released_events(raw, expired.grant_id), 1);

    /* Janitors in parallel, on two store objects: each expired grant's
     * reservation is released once. */
    for (int i = 0; i < EXPIRY_GRANTS; i++) {
        p_id(id, &w, "PAYX", i);
        p_draft(s, &w, id, "1.00");
        memcpy(gone[i], p_decide_window_past(s, id, 10).grant_id,
               sizeof gone[i]);
    }
    assert_int_equal(p_reserved(raw, w.tenant), 60000 + EXPIRY_GRANTS * 100);
    js[0] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
    js[1] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
    pthread_barrier_init(&start, NULL, EXPIRY_JANITORS);
    for (int i = 0; i < EXPIRY_JANITORS; i++) {
        runs[i] = (janitor_run){js[i % 2], &start, {0, 0}, 1};
        assert_int_equal(pthread_create(&th[i], NULL, janitor_main, &runs[i]),
                         0);
    }
    for (int i = 0; i < EXPIRY_JANITORS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(runs[i].rc, 0);
        released += runs[i].st.grants;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(released, EXPIRY_GRANTS);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    for (int i = 0; i < EXPIRY_GRANTS; i++)
        assert_int_equal(p_released_events(raw, gone[i]), 1);
    og_store_free(js[0]);
    og_store_free(js[1]);
    t_raw_close(raw);
    og_store_free(s);
}

static void revoked_grant_releases_its_reservation_and_cannot_be_presented(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision d, other;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_consume_result cr;
    og_admission a;
    char id[64], op[OG_UUID_LEN + 1], where[1024];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "revoke", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(p_reserved(raw, w.tenant), 425000);

    /* A finance hold: revoked, and its reservation released with it. */
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1", &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_REVOKED);
    assert_true(g.revoked_at_us > 0 && g.released_at_us == g.revoked_at_us);
    snprintf(where, sizeof where,
             "grant_id = '%s' AND release_cause = 'revoked'", d.grant_id);
    assert_int_equal(p_count(raw, "payout_grants", where), 1);
    snprintf(where, sizeof where,
             "grant_id = '%s' AND kind = 'grant-revoked' AND actor = 'finance-1'",
             d.grant_id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    assert_int_equal(p_released_events(raw, d.grant_id), 1);

    /* It cannot be presented: the row-form admission and the consume
     * verdict refuse it as revoked. */
    {
        og_grant gr = {OG_PAYOUT_ISSUER, d.grant_id, g.expires_at_us, NULL,
                       OG_FORM_ROW};
        og_intent in = {op, "payout-executor", id, "4250.00", "EUR"};

        t_uuid(op);
        assert_int_equal(og_admit(s, &gr, &in, &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
        assert_int_equal(og_consume(s, &gr, &cr), 0);
        assert_false(cr.consumed);
        assert_int_equal(cr.refusal, OG_REFUSAL_GRANT_REVOKED);
    }

    /* Once: a second hold changes nothing and releases nothing. */
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-2", &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(p_released_events(raw, d.grant_id), 1);

    /* A consumed grant is not revoked here, and its reservation stays with
     * its attempt. Not a payout grant: NOT_ISSUED. */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    other = p_decide_allowed(s, id);
    p_consume(raw, other.grant_id);
    assert_int_equal(og_payout_grant_revoke(s, other.grant_id, "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 1000);
    assert_int_equal(og_payout_grant_get(s, other.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_int_not_equal(g.consumed_by_operation[0], '\0');
    assert_int_equal(og_payout_grant_revoke(s, "no-such-grant", "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_NOT_ISSUED);
    assert_int_equal(og_payout_grant_get(s, "no-such-grant", &g), 0);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Jobs: the outbox is the queue
 * ========================================================================= */

static void p_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define TAKERS 4

typedef struct taker {
    og_store *s;
    pthread_barrier_t *start;
    og_payout_job job;
    int rc;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;

    pthread_barrier_wait(t->start);
    t->rc = og_payout_job_take(t->s, 60 * SEC, &t->job);
    return NULL;
}

static void job_is_redelivered_after_its_delivery_lease_and_acknowledged_once(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pjobs", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_job j, again;
    bool done = true;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "jobs", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);

    /* A delivery holds the job for its lease. */
    assert_int_equal(og_payout_job_take(s, 50000, &j), 1);
    assert_string_equal(j.job_id, d.job_id);
    assert_string_equal(j.payout_id, id);
    assert_string_equal(j.grant_id, d.grant_id);
    assert_string_equal(j.correlation_id, "COR-8812");
    assert_string_equal(j.resubmitted_from, "");
    assert_int_equal(j.delivery, 1);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 0);

    /* Its taker went quiet: the lease lapses and the job comes again. */
    p_sleep_ms(150);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 1);
    assert_string_equal(again.job_id, j.job_id);
    assert_int_equal(again.delivery, 2);

    /* The superseded delivery cannot acknowledge; the current one does,
     * once; an acknowledged job is never delivered again. */
    assert_int_equal(og_payout_job_ack(s, j.job_id, 1, &done), 0);
    assert_false(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_true(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_false(done);
    p_sleep_ms(150);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 0);

    /* Postponed (context.unavailable): available again after the delay,
     * with a new delivery; the postponed delivery can no longer ack. */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &j), 1);
    assert_string_equal(j.job_id, d.job_id);
    assert_int_equal(og_payout_job_postpone(s, j.job_id, j.delivery, 0, &done),
                     0);
    assert_true(done);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &again), 1);
    assert_string_equal(again.job_id, j.job_id);
    assert_int_equal(again.delivery, 2);
    assert_int_equal(og_payout_job_postpone(s, j.job_id, 1, 0, &done), 0);
    assert_false(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_true(done);

    /* Concurrent takers on two store objects take different jobs. */
    {
        og_store *ts[2] = {t_store_url(url, 4, P_RACE_TIMEOUT_MS),
                           t_store_url(url, 4, P_RACE_TIMEOUT_MS)};
        pthread_barrier_t start;
        pthread_t th[TAKERS];
        taker tk[TAKERS];

        for (int i = 0; i < TAKERS; i++) {
            p_id(id, &w, "PAYT", i);
            p_draft(s, &w, id, "1.00");
            p_decide_allowed(s, id);
        }
        pthread_barrier_init(&start, NULL, TAKERS);
        for (int i = 0; i < TAKERS; i++) {
            memset(&tk[i], 0, sizeof tk[i]);
            tk[i].s = ts[i % 2];
            tk[i].start = &start;
            tk[i].rc = -1;
            assert_int_equal(pthread_create(&th[i], NULL, taker_main, &tk[i]),
                             0);
        }
        for (int i = 0; i < TAKERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < TAKERS; i++) {
            assert_int_equal(tk[i].rc, 1);
            assert_int_equal(tk[i].job.delivery, 1);
            for (int k = 0; k < i; k++)
                assert_string_not_equal(tk[i].job.job_id, tk[k].job.job_id);
        }
        assert_int_equal(og_payout_job_take(s, 60 * SEC, &again), 0);
        og_store_free(ts[0]);
        og_store_free(ts[1]);
    }
    t_raw_close(raw);
    og_store_free(s);
}

static void resubmitted_job_points_at_the_same_grant(void **state)
{
    char url[4200], id[64], fresh[OG_UUID_LEN + 1], where[1024];
    og_store *s = t_fresh_store("presub", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_job j, copy;
    bool done = false;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "resub", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &j), 1);
    assert_int_equal(og_payout_job_ack(s, j.job_id, j.delivery, &done), 0);
    assert_true(done);

    /* An operator republishes it: a new job id, the same grant, payout and
     * correlation — a duplicate delivery for the worker to meet. */
    assert_int_equal(og_payout_job_resubmit(s, j.job_id, "ops-7", fresh), 1);
    assert_string_not_equal(fresh, j.job_id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &copy), 1);
    assert_string_equal(copy.job_id, fresh);
    assert_string_equal(copy.grant_id, d.grant_id);
    assert_string_equal(copy.payout_id, id);
    assert_string_equal(copy.correlation_id, j.correlation_id);
    assert_string_equal(copy.resubmitted_from, j.job_id);
    assert_int_equal(copy.delivery, 1);
    /* authority did not change: one grant, still Issued */
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    assert_int_equal(p_count_payout(raw, "payout_jobs", id), 2);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND kind = 'job-resubmitted' AND job_id = '%s'"
             " AND grant_id = '%s' AND actor = 'ops-7'",
             id, fresh, d.grant_id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    /* A job that does not exist: nothing. */
    t_uuid(fresh);
    assert_int_equal(og_payout_job_resubmit(s, fresh, "ops-7", fresh), 0);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The provider token is a secret
 * ========================================================================= */

/* Whether needle's bytes occur anywhere in the n bytes at mem. */
static bool p_has(const void *mem, size_t n, const char *needle)
{
    const unsigned char *m = mem;
    size_t k = strlen(needle);

    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (memcmp(m + i, needle, k) == 0)
            return true;
    return false;
}

/* The claim's helpers (below, with the claim's tests). */
static og_payout_decision p_decide_now(og_store *s, const char *id);
static og_payout_claim_req p_claim_req(const og_payout_decision *d,
                                       const char *worker);
static og_payout_claim_result p_claim(og_store *s,
                                      const og_payout_claim_req *c);

static void no_destination_token_in_decisions_grants_jobs_or_events(
    void **state)
{
    static const char *const tables[] = {
        "payout_decisions", "payout_grants", "grants",        "payout_jobs",
        "payout_events",    "payouts",       "tenants",       "tenant_days",
        "beneficiaries",    "operations",    "grant_issuance",
        "operation_events"};
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    char id[64], fresh[OG_UUID_LEN + 1], token[OG_PAYOUT_TOKEN_MAX + 1];
    og_payout_put_result pr = {0, 0};
    og_payout_decide_req r;
    og_payout_decision d, denied;
    og_payout_snapshot snap;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_payout_view v;
    og_payout_job j;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "secret", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    while (og_payout_job_take(s, 60 * SEC, &j) == 1) /* the store's queue */
        assert_false(p_has(&j, sizeof j, w.token));
    assert_int_equal(og_payout_job_resubmit(s, d.job_id, "ops-7", fresh), 1);
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1", &ro),
                     0);
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    r = p_req(id);
    r.requester_approval_limit = 1;
    denied = p_decide(s, &r);
    assert_int_equal(denied.verdict.outcome, OG_PAYOUT_ESCALATION_RECOMMENDED);
    assert_int_equal(og_payout_cancel(s, id, 1, "clerk-22", &pr), 0);
    /* an attempt: claimed, started and resolved, so the operations and
     * their events hold a payout's rows */
    {
        og_payout_decision dc;
        og_payout_claim_req cr;
        og_payout_claim_result c;
        og_op_outcome o = {OG_OP_SUCCEEDED, "provider.completed", "prv-81",
                           "worker-7"};
        og_payout_resolution res;
        bool started = false;
        char id3[64];


        p_id(id3, &w, "PAY", 3);
        p_draft(s, &w, id3, "12.00");
        dc = p_decide_now(s, id3);
        cr = p_claim_req(&dc, "worker-7");
        c = p_claim(s, &cr);
        assert_int_equal(c.outcome, OG_PAYOUT_CLAIM_CLAIMED);
        assert_false(p_has(&c, sizeof c, w.token));
        assert_int_equal(og_op_start(s, c.attempt.operation_id, 1, "worker-7",
                                     &started),
                         0);
        assert_true(started);
        assert_int_equal(og_payout_resolve(s, c.attempt.operation_id,
                                           OG_OP_BIT(OG_OP_STARTED), 1, &o,
                                           &res),
                         0);
        assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
        assert_false(p_has(&res, sizeof res, w.token));
        {
            char where[256];

            snprintf(where, sizeof where,
                     "operation_id = '%s' AND kind = 'payout'",
                     c.attempt.operation_id);
            assert_int_equal(p_count(raw, "operations", where), 1);
            snprintf(where, sizeof where, "operation_id = '%s'",
                     c.attempt.operation_id);
            assert_true(p_count(raw, "operation_events", where) >= 2);
        }
    }
    /* a rotation: the old and the new token */
    {
        char rotated[160];
        og_payout_destination_record dst = {w.dst, w.ben, rotated};

        snprintf(rotated, sizeof rotated, "%s-rotated", w.token);
        p_put_ok(og_payout_destination_put(s, &dst, 1, &pr), pr, "rotate");
    }

    /* No row of any other table holds it (the destination's does). */
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char *rows = p_rows_text(raw, tables[i], "1 = 1");

        assert_non_null(rows);
        if (strstr(rows, w.token))
            fail_msg("%s holds the provider token", tables[i]);
        free(rows);
    }
    {
        char where[1024], *rows;

        snprintf(where, sizeof where, "destination_id = '%s'", w.dst);
        rows = p_rows_text(raw, "destinations", where);
        assert_non_null(rows);
        assert_non_null(strstr(rows, w.token)); /* the scan sees it there */
        free(rows);
    }
    /* Nor does anything the API returns but the executor's read. */
    assert_false(p_has(&d, sizeof d, w.token));
    assert_false(p_has(&denied, sizeof denied, w.token));
    v = p_get(s, id);
    assert_false(p_has(&v, sizeof v, w.token));
    assert_int_equal(og_payout_context_read(s, id, t_now_us(), &snap), 0);
    assert_false(snap.ctx.unavailable);
    assert_false(p_has(&snap, sizeof snap, w.token));
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_false(p_has(&g, sizeof g, w.token));
    assert_int_equal(og_payout_destination_token(s, w.dst, 2, token,
                                                 sizeof token),
                     1);
    assert_non_null(strstr(token, w.token));
    assert_non_null(strstr(token, "-rotated"));
    /* only at the version the claim fenced */
    assert_int_equal(og_payout_destination_token(s, w.dst, 1, token,
                                                 sizeof token),
                     0);
    assert_int_equal(og_payout_destination_token(s, w.dst, 2, token, 8),
                     OG_EINVAL);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Versions move with every change
 * ========================================================================= */

/* Reads id's context into *snap (its strings point into *snap). */
static void p_read(og_store *s, const char *id, int64_t at,
                   og_payout_snapshot *snap)
{
    assert_int_equal(og_payout_context_read(s, id, at, snap), 0);
    assert_false(snap->ctx.unavailable);
    assert_int_equal(snap->why, OG_PAYOUT_UNAVAILABLE_NONE);
}

static void context_versions_move_with_every_change(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {0, 0};
    og_payout_snapshot snap, copy;
    og_payout_decide_req r;
    og_payout_decision d;
    char id[64], other[64];
    int64_t changed, at;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "ver", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);
    at = r.not_before_us;
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.tenant.settings_version, 1);
    assert_int_equal(snap.ctx.beneficiary.version, 1);
    assert_int_equal(snap.ctx.destination.version, 1);
    assert_int_equal(snap.ctx.payout.version, 1);
    assert_int_equal(snap.ctx.intent.payout_version, 1);
    assert_int_equal(snap.day_version, 0);
    assert_int_equal(snap.ctx.tenant.daily_limit, 5000000);
    assert_string_equal(snap.ctx.payout.terms.amount, "4250.00");
    assert_string_equal(snap.ctx.payout.terms.purpose, "invoice INV-9031");
    assert_string_equal(snap.ctx.destination.beneficiary_id, w.ben);
    /* the snapshot owns its strings; a copy is re-pointed at its own */
    copy = snap;
    og_payout_snapshot_bind(&copy);
    assert_ptr_equal(copy.ctx.payout.terms.tenant_id, copy.tenant_id);
    assert_string_equal(copy.ctx.payout.terms.tenant_id, w.tenant);

    /* Tenant settings: each change moves settings_version; a stale one,
     * or a change of the currency, changes nothing. */
    {
        og_payout_tenant_settings t = {w.tenant, false, 6000000, "EUR", 60};

        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        assert_int_equal(pr.version, 2);
        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        t.currency = "USD";
        assert_int_equal(og_payout_tenant_put(s, &t, 2, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        t.tenant_id = "T-nobody";
        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    }
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.tenant.settings_version, 2);
    assert_int_equal(snap.ctx.tenant.daily_limit, 6000000);
    assert_int_equal(snap.settlement_offset_minutes, 60);

    /* Beneficiary: moves its version; it cannot change tenant. */
    {
        og_payout_beneficiary_record b = {w.ben, w.tenant, true,
                                          OG_PAYOUT_BENEFICIARY_SUSPENDED};

        assert_int_equal(og_payout_beneficiary_put(s, &b, 1, &pr), 0);
        assert_int_equal(pr.version, 2);
        b.status = OG_PAYOUT_BENEFICIARY_ACTIVE;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 2, &pr), 0);
        assert_int_equal(pr.version, 3);
        b.tenant_id = "T-other";
        assert_int_equal(og_payout_beneficiary_put(s, &b, 3, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        p_id(other, &w, "BEN", 9);
        b.beneficiary_id = other;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND); /* no such tenant */
    }
    /* Destination: every write moves its version and changed_at. */
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.beneficiary.version, 3);
    changed = snap.ctx.destination.changed_at_us;
    {
        og_payout_destination_record dst = {w.dst, w.ben, "tok_rotated"};

        assert_int_equal(og_payout_destination_put(s, &dst, 1, &pr), 0);
        assert_int_equal(pr.version, 2);
        assert_int_equal(og_payout_destination_put(s, &dst, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        dst.beneficiary_id = "BEN-nobody";
        assert_int_equal(og_payout_destination_put(s, &dst, 2, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    }
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.destination.version, 2);
    assert_true(snap.ctx.destination.changed_at_us > changed);
    p_age_destination(raw, w.dst, 30);

    /* The payout names destination version 1: now at 2, it is no longer
     * the destination the terms were drafted for. */
    r = p_req(id);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason,
                     OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED);
    assert_int_equal(d.verdict.evaluated.destination, 2);

    /* A payout drafted for it: Draft 1 -> Approved 2 (a decision) ->
     * Cancelled 3; the day's counters move with the reservation and
     * settings_version does not. */
    p_id(id, &w, "PAY", 3);
    {
        og_payout_draft_req dr = {
            id, {w.tenant, w.ben, w.dst, 2, "4250.00", "EUR", NULL},
            "clerk-22"};

        p_put_ok(og_payout_draft(s, &dr, &pr), pr, "draft for v2");
    }
    r = p_req(id);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(d.verdict.evaluated.destination, 2);
    assert_int_equal(d.verdict.evaluated.beneficiary, 3);
    assert_int_equal(d.verdict.evaluated.tenant_settings, 2);
    p_read(s, id, r.not_before_us, &snap);
    assert_int_equal(snap.ctx.payout.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(snap.ctx.payout.version, 2);
    assert_int_equal(snap.attempt_count, 1);
    assert_int_equal(snap.day_version, 1);
    assert_int_equal(snap.ctx.tenant.reserved_today, 425000);
    assert_int_equal(snap.ctx.tenant.settings_version, 2);
    assert_string_equal(snap.release_day, d.release_day);
    {
        og_revoke_outcome ro;

        assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1",
                                                &ro),
                         0);
    }
    p_read(s, id, r.not_before_us, &snap);
    assert_int_equal(snap.day_version, 2);
    assert_int_equal(snap.ctx.tenant.reserved_today, 0);
    assert_int_equal(og_payout_cancel(s, id, 1, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
    assert_int_equal(og_payout_cancel(s, id, 2, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    assert_int_equal(pr.version, 3);
    assert_int_equal(og_payout_cancel(s, id, 3, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED); /* Cancelled is final */
    assert_int_equal(og_payout_cancel(s, "PAY-nobody", 1, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.payout.state, OG_PAYOUT_STATE_CANCELLED);
    assert_int_equal(snap.ctx.payout.version, 3);

    /* Drafts: an id is taken once; every record named must exist; the
     * currency must be the tenant's. */
    {
        og_payout_draft_req dr = {
            id, {w.tenant, w.ben, w.dst, 2, "1.00", "EUR", NULL}, "clerk-22"};

        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        p_id(other, &w, "PAY", 2);
        dr.payout_id = other;
        dr.terms.destination_id = "DST-nobody";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
        dr.terms.destination_id = w.dst;
        dr.terms.beneficiary_id = "BEN-nobody";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
        dr.terms.beneficiary_id = w.ben;
        dr.terms.currency = "USD";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        assert_int_equal(og_payout_get(s, other, &(og_payout_view){0}), 0);
        dr.terms.currency = "EUR";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        assert_false(p_get(s, other).has_purpose);
    }

    /* A payout that is not there: unavailable (missing), never facts. */
    assert_int_equal(og_payout_context_read(s, "PAY-nobody", at, &snap), 0);
    assert_true(snap.ctx.unavailable);
    assert_int_equal(snap.why, OG_PAYOUT_UNAVAILABLE_MISSING);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A store that cannot be read or locked: unavailable, nothing decided
 * ========================================================================= */
static void context_that_cannot_be_read_is_unavailable_and_nothing_is_decided(
    void **state)
{
    og_store *s = t_store(0, 0), *quick = t_store(1, 300);
    t_raw *raw = t_raw_open(), *holder = t_raw_open();
    og_payout_snapshot snap;
    og_payout_decide_req r;
    og_payout_decision d;
    char id[64];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "locked", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);

    /* Another session holds what the decision needs: SQLite's write lock;
     * on PostgreSQL an exclusive lock on payouts, which the reads wait
     * for too (until the store's timeout). */
    p_raw_exec(holder, t_kind == T_POSTGRES
                           ? "BEGIN; LOCK TABLE payouts IN ACCESS EXCLUSIVE MODE"
                           : "BEGIN IMMEDIATE");
    assert_int_equal(og_payout_decide(quick, &r, &d), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(og_payout_context_read(quick, id, r.not_before_us, &snap),
                     0);
    if (t_kind == T_POSTGRES) {
        /* "cannot read": unavailable — wait, never allow, never old facts */
        assert_true(snap.ctx.unavailable);
        assert_int_equal(snap.why, OG_PAYOUT_UNAVAILABLE_STORE);
    } else {
        /* a WAL snapshot reads past a writer: the facts as committed */
        assert_false(snap.ctx.unavailable);
        assert_int_equal(snap.ctx.payout.version, 1);
    }
    p_raw_exec(holder, "ROLLBACK");

    /* Nothing of the failed decision exists; the payout decides now. */
    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 0);
    assert_int_equal(p_get(s, id).version, 1);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    t_raw_close(holder);
    t_raw_close(raw);
    og_store_free(quick);
    og_store_free(s);
}

/* ===========================================================================
 * Bad input: the pure core's codes, nothing written
 * ========================================================================= */
static void bad_payout_input_gets_the_cores_error_and_writes_nothing(
    void **state)
{
    static const char *const tables[] = {
        "tenants", "beneficiaries", "destinations", "payouts",
        "payout_decisions", "payout_grants", "payout_jobs", "payout_events",
        "tenant_days"};
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {OG_PAYOUT_WRITTEN, 77};
    int64_t before[sizeof tables / sizeof tables[0]];
    char big[OG_ID_MAX + 2], bigtok[OG_PAYOUT_TOKEN_MAX + 2], id[64];
    og_payout_decision d;
    og_payout_job j;
    bool done = false;
    p_world w;

    (void)state;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0'; /* 129 bytes */
    memset(bigtok, 't', sizeof bigtok - 1);
    bigtok[sizeof bigtok - 1] = '\0'; /* 513 bytes */
    p_world_new(s, raw, &w, "bad", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        before[i] = p_count(raw, tables[i], "1 = 1");

    /* Context records. */
    {
        og_payout_tenant_settings t = {big, false, 100, "EUR", 0};

        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_TENANT);
        t.tenant_id = "T-bad";
        t.daily_limit = -1;
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), OG_EPAYOUT_LIMIT);
        t.daily_limit = OG_PAYOUT_LIMIT_MAX + 1;
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), OG_EPAYOUT_LIMIT);
        t.daily_limit = 100;
        t.currency = "XAU"; /* a metal: no minor units */
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_CURRENCY);
        t.currency = "eur";
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_CURRENCY);
        t.currency = "EUR";
        t.settlement_offset_minutes = 841;
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_OFFSET);
        t.settlement_offset_minutes = 0;
        assert_int_equal(og_payout_tenant_put(s, &t, -1, &pr),
                         OG_EPAYOUT_VERSION);
        assert_int_equal(og_payout_tenant_put(s, NULL, 0, &pr), OG_EINVAL);
    }
    {
        og_payout_beneficiary_record b = {"BEN-bad", big, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};

        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr),
                         OG_EPAYOUT_TENANT);
        b.tenant_id = w.tenant;
        b.beneficiary_id = "BEN bad";
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr),
                         OG_EPAYOUT_BENEFICIARY);
        b.beneficiary_id = "BEN-bad";
        b.status = (og_payout_beneficiary_status)7;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr), OG_EINVAL);
    }
    {
        og_payout_destination_record dst = {"DST-bad", w.ben, "tok with space"};

        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = bigtok;
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = "";
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = "tok";
        dst.destination_id = big;
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_DESTINATION);
    }
    /* Drafts: the terms by the pure core's rules and codes. */
    {
        static const struct {
            const char *what, *amount, *currency, *purpose;
            int64_t dv;
            int want;
        } rows[] = {
            {"amount with a sign", "-10.00", "EUR", NULL, 1,
             OG_EPAYOUT_AMOUNT},
            {"zero", "0.00", "EUR", NULL, 1, OG_EPAYOUT_AMOUNT},
            {"finer than the currency", "10.001", "EUR", NULL, 1,
             OG_EPAYOUT_AMOUNT},
            {"yen with decimals", "10.5", "JPY", NULL, 1, OG_EPAYOUT_AMOUNT},
            {"over the maximum", "10000000000000.00", "EUR", NULL, 1,
             OG_EPAYOUT_AMOUNT},
            {"exponent", "1e3", "EUR", NULL, 1, OG_EPAYOUT_AMOUNT},
            {"unknown currency", "10.00", "ZZZ", NULL, 1,
             OG_EPAYOUT_CURRENCY},
            {"control character in purpose", "10.00", "EUR", "a\nb", 1,
             OG_EPAYOUT_PURPOSE},
            {"blank purpose", "10.00", "EUR", "   ", 1, OG_EPAYOUT_PURPOSE},
            {"destination version 0", "10.00", "EUR", NULL, 0,
             OG_EPAYOUT_DESTINATION_VERSION},
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            og_payout_draft_req dr = {
                "PAY-bad",
                {w.tenant, w.ben, w.dst, rows[i].dv, rows[i].amount,
                 rows[i].currency, rows[i].purpose},
                "clerk-22"};
            int rc = og_payout_draft(s, &dr, &pr);

            if (rc != rows[i].want)
                fail_msg("%s: %s", rows[i].what, og_err_name(rc));
        }
        {
            og_payout_draft_req dr = {
                big, {w.tenant, w.ben, w.dst, 1, "1.00", "EUR", NULL},
                "clerk-22"};

            assert_int_equal(og_payout_draft(s, &dr, &pr), OG_EPAYOUT_ID);
            dr.payout_id = "PAY-bad";
            dr.terms.tenant_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr), OG_EPAYOUT_TENANT);
            dr.terms.tenant_id = w.tenant;
            dr.terms.beneficiary_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr),
                             OG_EPAYOUT_BENEFICIARY);
            dr.terms.beneficiary_id = w.ben;
            dr.requester_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr),
                             OG_EPAYOUT_REQUESTER);
        }
    }
    assert_int_equal(pr.version, 77); /* never written on an error */
    /* Decisions. */
    {
        og_payout_decide_req r = p_req(id);

        r.payout_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_ID);
        r = p_req(id);
        r.requester_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_REQUESTER);
        r = p_req(id);
        r.requester_role = "";
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_REQUESTER);
        r = p_req(id);
        r.requester_approval_limit = -5;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_LIMIT);
        r = p_req(id);
        r.expires_at_us = r.not_before_us;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.expires_at_us = r.not_before_us + 2 * 3600 * SEC; /* not short */
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.not_before_us = -1;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.correlation_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_CORRELATION);
        r = p_req(id);
        r.payout_version = -1;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_VERSION);
    }
    /* Jobs and grants. */
    assert_int_equal(og_payout_job_take(s, 999, &j), OG_EINVAL);
    assert_int_equal(og_payout_job_take(s, OG_PAYOUT_LEASE_MAX_US + 1, &j),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_ack(s, "not-a-uuid", 1, &done),
                     OG_EPAYOUT_JOB);
    assert_int_equal(og_payout_job_ack(s, "00000000-0000-4000-8000-000000000001",
                                       0, &done),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_postpone(
                         s, "00000000-0000-4000-8000-000000000001", 1, -1,
                         &done),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_resubmit(s, big, "ops-7", id),
                     OG_EPAYOUT_JOB);
    assert_int_equal(og_payout_grant_revoke(s, big, "finance-1",
                                            &(og_revoke_outcome){0}),
                     OG_EGRANT_ID);
    assert_int_equal(og_payout_grant_revoke(s, "g-1", "fin ance",
                                            &(og_revoke_outcome){0}),
                     OG_EACTOR);
    assert_int_equal(og_payout_cancel(s, id, 0, "clerk-22", &pr),
                     OG_EPAYOUT_VERSION);
    assert_int_equal(og_payout_expire_grants(s, 0, 1,
                                             &(og_payout_expiry_stats){0}),
                     OG_EINVAL);
    assert_int_equal(og_payout_context_read(s, big, t_now_us(),
                                            &(og_payout_snapshot){0}),
                     OG_EPAYOUT_ID);

    /* Nothing was written anywhere. */
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        assert_int_equal(p_count(raw, tables[i], "1 = 1"), before[i]);
    assert_int_equal(p_get(s, id).version, 1);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The claim (og_payout_claim): one grant, one attempt
 * ========================================================================= */

/* An Allowed decision whose window is open now (not_before 1 s ago). */
static og_payout_decision p_decide_now(og_store *s, const char *id)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d;

    r.not_before_us = t_now_us() - SEC;
    r.expires_at_us = r.not_before_us + 30 * MINUTE;
    d = p_decide(s, &r);
    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

/* The claim request a VALID recheck of d would hand over. */
static og_payout_claim_req p_claim_req(const og_payout_decision *d,
                                       const char *worker)
{
    og_payout_claim_req c;

    memset(&c, 0, sizeof c);
    c.grant_id = d->grant_id;
    c.worker_id = worker;
    c.audience = OG_PAYOUT_AUDIENCE;
    c.relied = d->verdict.evaluated;
    c.relied.payout = d->executable_payout_version;
    c.policy_version = OG_PAYOUT_POLICY_VERSION;
    c.send_window_us = 5 * MINUTE;
    c.lease_us = 2 * MINUTE;
    return c;
}

static og_payout_claim_result p_claim(og_store *s,
                                      const og_payout_claim_req *c)
{
    og_payout_claim_result r;
    int rc = og_payout_claim(s, c, &r);

    if (rc != 0)
        fail_msg("og_payout_claim(%s): %s", c->grant_id, og_err_name(rc));
    return r;
}

/* The rows a claim writes, for "nothing written" checks. */
static const char *const p_claim_tables[] = {"operations", "payout_events",
                                              "payout_decisions",
                                              "payout_grants", "tenant_days"};
#define P_CLAIM_TABLES (sizeof p_claim_tables / sizeof p_claim_tables[0])

static void p_counts(t_raw *raw, int64_t out[P_CLAIM_TABLES])
{
    for (size_t i = 0; i < P_CLAIM_TABLES; i++)
        out[i] = p_count(raw, p_claim_tables[i], "1 = 1");
}

/* Nothing changed: the same row counts, the payout as it was, the grant
 * unconsumed. */
static void p_assert_unclaimed(og_store *s, t_raw *raw, const int64_t *before,
                               const char *id, const og_payout_view *was,
                               const char *grant_id)
{
    int64_t now[P_CLAIM_TABLES];
    og_payout_view v = p_get(s, id);
    og_payout_grant_view g;

    p_counts(raw, now);
    for (size_t i = 0; i < P_CLAIM_TABLES; i++)
        if (now[i] != before[i])
            fail_msg("%s: %lld rows, %lld before", p_claim_tables[i],
                     (long long)now[i], (long long)before[i]);
    assert_int_equal(v.version, was->version);
    assert_int_equal(v.state, was->state);
    assert_string_equal(v.active_attempt, was->active_attempt);
    assert_int_equal(og_payout_grant_get(s, grant_id, &g), 1);
    assert_int_equal(g.consumed_at_us, 0);
}

static void claim_sets_the_attempt_key_and_reference_from_the_payout_and_attempt_number(
    void **state)
{
    char url[4200], id[64], key[OG_ID_MAX + 1], ref[OG_ID_MAX + 1],
        where[1024];
    og_store *s = t_fresh_store("pclaim", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_view v;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "claim", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_true(r.has_attempt);
    assert_string_equal(r.payout_id, id);
    assert_int_equal(r.attempt_number, 1);
    snprintf(key, sizeof key, "payout-%s-a1", id);
    snprintf(ref, sizeof ref, "%s-a1", id);
    assert_string_equal(r.attempt.idempotency_key, key);
    assert_string_equal(r.attempt.client_reference, ref);
    assert_int_equal(r.attempt.kind, OG_OP_KIND_PAYOUT);
    assert_int_equal(r.attempt.status, OG_OP_ADMITTED);
    assert_int_equal(r.attempt.owner_version, 1);
    assert_string_equal(r.attempt.issuer, OG_PAYOUT_ISSUER);
    assert_string_equal(r.attempt.grant_id, d.grant_id);
    assert_string_equal(r.attempt.caller_id, "worker-7");
    assert_string_equal(r.attempt.account_id, w.dst);
    assert_string_equal(r.attempt.amount, "4250");
    assert_string_equal(r.attempt.currency, "EUR");
    assert_int_equal(r.attempt.submit_by_us - r.attempt.created_at_us,
                     5 * MINUTE);
    assert_int_equal(r.attempt.lease_until_us - r.attempt.created_at_us,
                     2 * MINUTE);
    /* what the store holds: the key and reference with the attempt, before
     * any send; the payout Executing with this attempt; the grant consumed
     * by it; one "claimed" entry */
    snprintf(where, sizeof where,
             "operation_id = '%s' AND idempotency_key = '%s'"
             " AND client_reference = '%s' AND kind = 'payout'",
             r.attempt.operation_id, key, ref);
    assert_int_equal(p_count(raw, "operations", where), 1);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(v.version, d.executable_payout_version + 1);
    assert_string_equal(v.active_attempt, r.attempt.operation_id);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_string_equal(g.consumed_by_operation, r.attempt.operation_id);
    assert_int_equal(g.released_at_us, 0); /* held while the attempt lives */
    snprintf(where, sizeof where,
             "payout_id = '%s' AND kind = 'claimed' AND actor = 'worker-7'"
             " AND grant_id = '%s' AND from_state = 'Approved'"
             " AND to_state = 'Executing' AND reason = '%s'",
             id, d.grant_id, ref);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    /* the attempt goes on as any payout attempt: Started by its owner */
    {
        bool started = false;

        assert_int_equal(og_op_start(s, r.attempt.operation_id, 1, "worker-7",
                                     &started),
                         0);
        assert_true(started);
    }
    /* bad input writes nothing and is an error */
    c.worker_id = "";
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EACTOR);
    c = p_claim_req(&d, "worker-7");
    c.relied.beneficiary = 0;
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EINVAL);
    c = p_claim_req(&d, "worker-7");
    c.grant_id = "";
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EGRANT_ID);
    /* not a payout grant, or another audience: binding.mismatch */
    c = p_claim_req(&d, "worker-7");
    c.grant_id = "no-such-grant";
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_MISMATCH);
    t_raw_close(raw);
    og_store_free(s);
}

static void redelivery_after_the_claim_is_a_duplicate_with_no_state_change(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pdup", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_claim_req c;
    og_payout_claim_result first, again;
    og_payout_decision d;
    og_payout_view was;
    int64_t before[P_CLAIM_TABLES];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "dup", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    first = p_claim(s, &c);
    assert_int_equal(first.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    was = p_get(s, id);
    p_counts(raw, before);
    /* the same delivery again, and another worker with the same job: a
     * duplicate, the winner's attempt reported, nothing written */
    for (int i = 0; i < 2; i++) {
        c = p_claim_req(&d, i == 0 ? "worker-7" : "worker-8");
        /* the validation it would have run read the versions before */
        again = p_claim(s, &c);
        assert_int_equal(again.outcome, OG_PAYOUT_CLAIM_DUPLICATE);
        assert_true(again.has_attempt);
        assert_string_equal(again.attempt.operation_id,
                            first.attempt.operation_id);
        assert_string_equal(again.payout_id, id);
        assert_int_equal(again.attempt_number, 1);
        {
            int64_t now[P_CLAIM_TABLES];
            og_payout_view v = p_get(s, id);

            p_counts(raw, now);
            for (size_t k = 0; k < P_CLAIM_TABLES; k++)
                assert_int_equal(now[k], before[k]);
            assert_int_equal(v.version, was.version);
            assert_string_equal(v.active_attempt, was.active_attempt);
        }
    }
    /* a grant consumed by something that is not this binding's attempt
     * is lost, not a duplicate */
    {
        char id2[64];
        og_payout_decision d2;

        p_id(id2, &w, "PAY", 2);
        p_draft(s, &w, id2, "100.00");
        d2 = p_decide_now(s, id2);
        p_consume(raw, d2.grant_id);
        c = p_claim_req(&d2, "worker-7");
        assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_LOST);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* The four fenced changes of seed section 9, each landing between the
 * validation (the versions of the decision) and the claim. */
static void context_change_between_validation_and_claim_rolls_the_claim_back(
    void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pfence", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);

    (void)state;
    for (int k = 0; k < 4; k++) {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        og_payout_put_result pr = {0, 0};
        og_payout_view was;
        og_payout_grant_view g;
        int64_t before[P_CLAIM_TABLES];
        p_world w;

        p_world_new(s, raw, &w, "fence", 5000000);
        p_id(id, &w, "PAY", k);
        p_draft(s, &w, id, "100.00");
        d = p_decide_now(s, id);
        c = p_claim_req(&d, "worker-7");
        switch (k) {
        case 0: { /* beneficiary suspended */
            og_payout_beneficiary_record b = {
                w.ben, w.tenant, true, OG_PAYOUT_BENEFICIARY_SUSPENDED};
            p_put_ok(og_payout_beneficiary_put(s, &b, 1, &pr), pr, "ben");
            break;
        }
        case 1: { /* destination changed */
            og_payout_destination_record dr = {w.dst, w.ben, "tok_ROTATED_1"};
            p_put_ok(og_payout_destination_put(s, &dr, 1, &pr), pr, "dst");
            break;
        }
        case 2: { /* tenant suspended */
            og_payout_tenant_settings t = {w.tenant, true, 5000000, "EUR", 0};
            p_put_ok(og_payout_tenant_put(s, &t, 1, &pr), pr, "tenant");
            break;
        }
        default: /* payout cancelled */
            assert_int_equal(og_payout_cancel(s, id,
                                              d.executable_payout_version,
                                              "clerk-22", &pr),
                             0);
            assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
            break;
        }
        was = p_get(s, id);
        p_counts(raw, before);
        assert_int_equal(p_claim(s, &c).outcome,
                         OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
        p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
        assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
        assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);
    }
    /* a policy other than the current one is a changed context too */
    {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        p_world w;

        p_world_new(s, raw, &w, "fencep", 5000000);
        p_id(id, &w, "PAY", 9);
        p_draft(s, &w, id, "100.00");
        d = p_decide_now(s, id);
        c = p_claim_req(&d, "worker-7");
        c.policy_version = "oncegate-payout-policy/0";
        assert_int_equal(p_claim(s, &c).outcome,
                         OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
        c = p_claim_req(&d, "worker-7");
        assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CLAIMED);
    }
    t_raw_close(raw);
    og_store_free(s);
}

static void expired_or_revoked_grant_is_not_claimed(void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pexp", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "exp", 5000000);
    for (int k = 0; k < 3; k++) {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        og_payout_view was;
        int64_t before[P_CLAIM_TABLES];

        p_id(id, &w, "PAY", k);
        p_draft(s, &w, id, "10.00");
        if (k == 0) { /* expired past the leeway */
            d = p_decide_window_past(s, id, 60);
        } else if (k == 1) { /* revoked: a finance hold */
            og_revoke_outcome ro;

            d = p_decide_now(s, id);
            assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "ops-7",
                                                    &ro),
                             0);
            assert_int_equal(ro, OG_REVOKE_REVOKED);
        } else { /* not yet valid: the release batch is later */
            og_payout_decide_req r = p_req(id);

            d = p_decide(s, &r);
            assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
        }
        c = p_claim_req(&d, "worker-7");
        was = p_get(s, id);
        p_counts(raw, before);
        assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_LOST);
        p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ---- concurrent claims ---------------------------------------------------- */
#define CLAIM_RACERS 6
#define CLAIM_THREAD_ROUNDS 6
#define CLAIM_PROC_ROUNDS 3

typedef struct claim_race {
    og_store *stores[2];
    pthread_barrier_t start;
    og_payout_claim_req req;
    og_payout_claim_result r[CLAIM_RACERS];
    int rc[CLAIM_RACERS], next;
    pthread_mutex_t mu;
} claim_race;

static void *claim_racer_main(void *arg)
{
    claim_race *cr = arg;
    int i;

    pthread_mutex_lock(&cr->mu);
    i = cr->next++;
    pthread_mutex_unlock(&cr->mu);
    pthread_barrier_wait(&cr->start);
    cr->rc[i] = og_payout_claim(cr->stores[i % 2], &cr->req, &cr->r[i]);
    return NULL;
}

/* What a round proves, from the store's rows: exactly one attempt for the
 * grant, the payout Executing with it, one "claimed" entry. */
static void claim_round_check(t_raw *raw, const char *id,
                              const og_payout_decision *d, int claimed)
{
    char where[1024];

    assert_int_equal(claimed, 1);
    snprintf(where, sizeof where, "issuer = 'payouts' AND grant_id = '%s'",
             d->grant_id);
    assert_int_equal(p_count(raw, "operations", where), 1);
    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'claimed'", id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND state = 'Executing' AND active_attempt = "
             "(SELECT operation_id FROM operations WHERE grant_id = '%s')",
             id, d->grant_id);
    assert_int_equal(p_count(raw, "payouts", where), 1);
}

static void concurrent_claims_of_one_grant_make_exactly_one_attempt(
    void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pclrace", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "clrace", 500000000);
    /* threads, two store objects */
    for (int round = 0; round < CLAIM_THREAD_ROUNDS; round++) {
        char id[64];
        pthread_t th[CLAIM_RACERS];
        claim_race cr;
        og_payout_decision d;
        int claimed = 0;

        memset(&cr, 0, sizeof cr);
        p_id(id, &w, "PAYT", round);
        p_draft(s, &w, id, "10.00");
        d = p_decide_now(s, id);
        cr.req = p_claim_req(&d, "worker-race");
        cr.stores[0] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
        cr.stores[1] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
        pthread_mutex_init(&cr.mu, NULL);
        pthread_barrier_init(&cr.start, NULL, CLAIM_RACERS);
        for (int i = 0; i < CLAIM_RACERS; i++)
            assert_int_equal(
                pthread_create(&th[i], NULL, claim_racer_main, &cr), 0);
        for (int i = 0; i < CLAIM_RACERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < CLAIM_RACERS; i++) {
            if (cr.rc[i] != 0)
                fail_msg("round %d racer %d: %s", round, i,
                         og_err_name(cr.rc[i]));
            if (cr.r[i].outcome == OG_PAYOUT_CLAIM_CLAIMED)
                claimed++;
            else /* the loser's delivery is a duplicate of the winner's */
                assert_int_equal(cr.r[i].outcome, OG_PAYOUT_CLAIM_DUPLICATE);
        }
        claim_round_check(raw, id, &d, claimed);
        pthread_barrier_destroy(&cr.start);
        pthread_mutex_destroy(&cr.mu);
        og_store_free(cr.stores[0]);
        og_store_free(cr.stores[1]);
    }
    /* separate processes, each with its own store object */
    for (int round = 0; round < CLAIM_PROC_ROUNDS; round++) {
        char id[64];
        og_payout_decision d;
        og_payout_claim_req req;
        int *outcomes, claimed = 0;
        pid_t pid[CLAIM_RACERS];

        p_id(id, &w, "PAYP", round);
        p_draft(s, &w, id, "10.00");
        d = p_decide_now(s, id);
        req = p_claim_req(&d, "worker-proc");
        outcomes = mmap(NULL, sizeof(int) * CLAIM_RACERS,
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
        assert_true(outcomes != MAP_FAILED);
        for (int i = 0; i < CLAIM_RACERS; i++) {
            outcomes[i] = -1000;
            pid[i] = fork();
            assert_true(pid[i] >= 0);
            if (pid[i] == 0) {
                og_store *cs = t_store_url(url, 1, P_RACE_TIMEOUT_MS);
                og_payout_claim_result r;
                int rc = og_payout_claim(cs, &req, &r);

                outcomes[i] = rc != 0 ? rc : (int)r.outcome;
                og_store_free(cs);
                _exit(0);
            }
        }
        for (int i = 0; i < CLAIM_RACERS; i++) {
            int st = 0;

            assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (outcomes[i] < 0)
                fail_msg("process %d: %s", i, og_err_name(outcomes[i]));
            if (outcomes[i] == OG_PAYOUT_CLAIM_CLAIMED)
                claimed++;
            else
                assert_int_equal(outcomes[i], OG_PAYOUT_CLAIM_DUPLICATE);
        }
        claim_round_check(raw, id, &d, claimed);
        munmap(outcomes, sizeof(int) * CLAIM_RACERS);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The resolution (og_payout_resolve): the payout and the reservation
 * follow the attempt
 * ========================================================================= */

/* A payout of 100.00 EUR in a world of its own, decided now and claimed by
 * worker-7 with lease_us: *d and the claim's result. */
static og_payout_claim_result p_claimed(og_store *s, t_raw *raw, p_world *w,
                                        const char *tag, char id[64],
                                        og_payout_decision *d,
                                        int64_t lease_us)
{
    og_payout_claim_req c;
    og_payout_claim_result r;

    p_world_new(s, raw, w, tag, 5000000);
    p_id(id, w, "PAY", 1);
    p_draft(s, w, id, "100.00");
    *d = p_decide_now(s, id);
    c = p_claim_req(d, "worker-7");
    c.lease_us = lease_us;
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    return r;
}

static void p_start(og_store *s, const og_payout_claim_result *r)
{
    bool started = false;

    assert_int_equal(og_op_start(s, r->attempt.operation_id, 1, "worker-7",
                                 &started),
                     0);
    assert_true(started);
}

static og_payout_resolution p_resolve(og_store *s, const char *op,
                                      unsigned expected, int64_t v,
                                      og_op_status to, const char *actor)
{
    og_op_outcome o = {to, "test.outcome", NULL, actor};
    og_payout_resolution r;
    int rc;

    memset(&r, 0x5a, sizeof r);
    rc = og_payout_resolve(s, op, expected, v, &o, &r);
    if (rc != 0)
        fail_msg("og_payout_resolve(%s): %s", og_op_status_name(to),
                 og_err_name(rc));
    return r;
}

/* The tenant's paid total over all its days. */
static int64_t p_paid(t_raw *raw, const char *tenant)
{
    return t_raw_int(raw,
                     "SELECT coalesce(sum(paid), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     tenant);
}

/* The binding's release: 1 when released for cause, 0 when held (cause
 * NULL: asserts it is held). */
static void p_assert_release(t_raw *raw, const char *grant_id,
                             const char *cause)
{
    char where[512];

    if (cause)
        snprintf(where, sizeof where,
                 "grant_id = '%s' AND released_at IS NOT NULL"
                 " AND release_cause = '%s'",
                 grant_id, cause);
    else
        snprintf(where, sizeof where,
                 "grant_id = '%s' AND released_at IS NULL"
                 " AND release_cause IS NULL",
                 grant_id);
    assert_int_equal(p_count(raw, "payout_grants", where), 1);
}

static int64_t p_resolved_events(t_raw *raw, const char *id)
{
    char where[512];

    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'resolved'",
             id);
    return p_count(raw, "payout_events", where);
}

/* Everything a resolution could change, for "nothing changed" checks. */
typedef struct p_resolve_state {
    int64_t payout_events, operation_events, reserved, paid, released;
    og_payout_view v;
    og_operation op;
} p_resolve_state;

static p_resolve_state p_resolve_snap(og_store *s, t_raw *raw,
                                      const p_world *w, const char *id,
                                      const char *op)
{
    p_resolve_state st;
    char where[512];

    memset(&st, 0, sizeof st);
    st.payout_events = p_count_payout(raw, "payout_events", id);
    snprintf(where, sizeof where, "operation_id = '%s'", op);
    st.operation_events = p_count(raw, "operation_events", where);
    st.reserved = p_reserved(raw, w->tenant);
    st.paid = p_paid(raw, w->tenant);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND released_at IS NOT NULL", id);
    st.released = p_count(raw, "payout_grants", where);
    st.v = p_get(s, id);
    assert_int_equal(og_operation_get(s, op, &st.op), 1);
    return st;
}

static void p_assert_unchanged(const p_resolve_state *a,
                               const p_resolve_state *b)
{
    assert_int_equal(a->payout_events, b->payout_events);
    assert_int_equal(a->operation_events, b->operation_events);
    assert_int_equal(a->reserved, b->reserved);
    assert_int_equal(a->paid, b->paid);
    assert_int_equal(a->released, b->released);
    assert_int_equal(a->v.state, b->v.state);
    assert_int_equal(a->v.version, b->v.version);
    assert_string_equal(a->v.active_attempt, b->v.active_attempt);
    assert_int_equal(a->op.status, b->op.status);
    assert_int_equal(a->op.owner_version, b->op.owner_version);
    assert_int_equal(a->op.updated_at_us, b->op.updated_at_us);
}

/* Takes op over once its lease lapsed: the new owner version. */
static int64_t p_takeover(og_store *s, const char *op, int64_t v)
{
    og_operation after;
    bool taken = false;

    for (int i = 0; i < 200 && !taken; i++) {
        assert_int_equal(og_op_takeover(s, op, v, "sweeper", &after, &taken),
                         0);
        if (!taken)
            usleep(5000);
    }
    assert_true(taken);
    assert_int_equal(after.owner_version, v + 1);
    return after.owner_version;
}

static void resolution_moves_the_reservation_with_the_outcome(void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("presolve", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    static const struct {
        og_op_status to;
        og_payout_state state;
        og_payout_reservation res;
        const char *cause;
    } cases[] = {
        {OG_OP_SUCCEEDED, OG_PAYOUT_STATE_PAID, OG_PAYOUT_RESERVATION_PAID,
         "paid"},
        {OG_OP_FAILED, OG_PAYOUT_STATE_FAILED, OG_PAYOUT_RESERVATION_RELEASED,
         "failed"},
        {OG_OP_NOT_STARTED, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-started"},
        {OG_OP_NOT_APPLIED, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-applied"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char id[64];
        og_payout_decision d;
        og_payout_claim_result c;
        og_payout_resolution r;
        p_resolve_state before, after;
        og_operation op;
        og_payout_view v;
        unsigned expected = OG_OP_BIT(OG_OP_STARTED);
        int64_t owner = 1, claimed_version;
        p_world w;

        c = p_claimed(s, raw, &w, "resolve",  id, &d,
                      cases[k].to == OG_OP_NOT_STARTED ? 1000 : 2 * MINUTE);
        claimed_version = p_get(s, id).version;
        assert_int_equal(p_reserved(raw, w.tenant), 10000);
        if (cases[k].to == OG_OP_NOT_STARTED) {
            /* P2: the claimer fenced by a takeover, the attempt Admitted */
            owner = p_takeover(s, c.attempt.operation_id, 1);
            expected = OG_OP_BIT(OG_OP_ADMITTED);
        } else {
            p_start(s, &c);
        }
        if (cases[k].to == OG_OP_NOT_APPLIED) {
            /* Unknown first: the payout Unknown, everything held */
            r = p_resolve(s, c.attempt.operation_id, expected, owner,
                          OG_OP_UNKNOWN, "worker-7");
            assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
            assert_int_equal(r.state, OG_PAYOUT_STATE_UNKNOWN);
            assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
            assert_false(r.attempt_cleared);
            v = p_get(s, id);
            assert_int_equal(v.state, OG_PAYOUT_STATE_UNKNOWN);
            assert_string_equal(v.active_attempt, c.attempt.operation_id);
            assert_int_equal(p_reserved(raw, w.tenant), 10000);
            p_assert_release(raw, d.grant_id, NULL);
            claimed_version = v.version;
            expected = OG_OP_BIT(OG_OP_UNKNOWN);
        }
        r = p_resolve(s, c.attempt.operation_id, expected, owner, cases[k].to,
                      "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
        assert_string_equal(r.payout_id, id);
        assert_string_equal(r.grant_id, d.grant_id);
        assert_int_equal(r.state, cases[k].state);
        assert_int_equal(r.payout_version, claimed_version + 1);
        assert_true(r.attempt_cleared);
        assert_int_equal(r.reservation, cases[k].res);
        assert_int_equal(r.amount_minor, 10000);
        assert_string_equal(r.release_day, d.release_day);
        /* what the store holds */
        v = p_get(s, id);
        assert_int_equal(v.state, cases[k].state);
        assert_int_equal(v.version, claimed_version + 1);
        assert_string_equal(v.active_attempt, "");
        assert_int_equal(og_operation_get(s, c.attempt.operation_id, &op), 1);
        assert_int_equal(op.status, cases[k].to);
        assert_int_equal(p_reserved(raw, w.tenant), 0);
        assert_int_equal(p_paid(raw, w.tenant),
                         cases[k].to == OG_OP_SUCCEEDED ? 10000 : 0);
        p_assert_release(raw, d.grant_id, cases[k].cause);
        assert_int_equal(p_resolved_events(raw, id),
                         cases[k].to == OG_OP_NOT_APPLIED ? 2 : 1);
        /* released once: the same resolution again changes nothing */
        before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
        r = p_resolve(s, c.attempt.operation_id, expected, owner, cases[k].to,
                      "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        assert_string_equal(r.payout_id, ""); /* zeroed */
        r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN),
                      owner, OG_OP_FAILED, "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
        p_assert_unchanged(&before, &after);
    }
    /* input is og_op_record's: checked before any I/O */
    {
        og_op_outcome o = {OG_OP_STARTED, NULL, NULL, "w"};
        og_payout_resolution r;
        char u[OG_UUID_LEN + 1];

        t_uuid(u);
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_ADMITTED), 1,
                                           &o, &r),
                         OG_ETRANSITION);
        o.status = OG_OP_NOT_APPLIED;
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         OG_ETRANSITION);
        o.status = OG_OP_FAILED;
        assert_int_equal(og_payout_resolve(s, "not-a-uuid",
                                           OG_OP_BIT(OG_OP_STARTED), 1, &o,
                                           &r),
                         OG_EOPERATION_ID);
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 0,
                                           &o, &r),
                         OG_EINVAL);
        o.actor = "";
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         OG_EACTOR);
        /* no such operation: not recorded */
        o.actor = "w";
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    }
    t_raw_close(raw);
    og_store_free(s);
}

static void stale_owner_cannot_resolve(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pstale", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_result c;
    og_payout_resolution r;
    p_resolve_state before, after;
    int64_t owner;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "stale", id, &d, 1000);
    owner = p_takeover(s, c.attempt.operation_id, 1);
    before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    /* the fenced claimer, with every outcome it could report */
    {
        static const og_op_status tos[] = {OG_OP_SUCCEEDED, OG_OP_FAILED,
                                           OG_OP_UNKNOWN};

        for (size_t i = 0; i < sizeof tos / sizeof tos[0]; i++) {
            r = p_resolve(s, c.attempt.operation_id,
                          OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED),
                          1, tos[i], "worker-7");
            assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        }
    }
    after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    p_assert_unchanged(&before, &after);
    assert_int_equal(after.v.state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(after.reserved, 10000);
    p_assert_release(raw, d.grant_id, NULL);
    /* the new owner resolves it */
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_ADMITTED), owner,
                  OG_OP_NOT_STARTED, "sweeper");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, "not-started");
    t_raw_close(raw);
    og_store_free(s);
}

static void unknown_holds_the_reservation_and_blocks_reauthorization(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("punknown", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, again;
    og_payout_decide_req rq;
    og_payout_claim_result c;
    og_payout_resolution r;
    og_payout_view v;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "unknown", id, &d, 2 * MINUTE);
    p_start(s, &c);
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_STARTED), 1,
                  OG_OP_UNKNOWN, "worker-7");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_UNKNOWN);
    assert_string_equal(v.active_attempt, c.attempt.operation_id);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    assert_int_equal(p_paid(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, NULL);
    /* escalated, still held */
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN), 1,
                  OG_OP_NEEDS_RECONCILIATION, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_UNKNOWN);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    /* P5: no re-authorization while the attempt may still take effect */
    v = p_get(s, id);
    rq = p_req(id);
    rq.reauthorize = true;
    rq.payout_version = v.version;
    rq.not_before_us = t_now_us() - SEC;
    rq.expires_at_us = rq.not_before_us + 30 * MINUTE;
    again = p_decide(s, &rq);
    assert_int_not_equal(again.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_false(again.issued);
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    assert_int_equal(p_get(s, id).attempt_count, 1);
    t_raw_close(raw);
    og_store_free(s);
}

static void reauthorization_after_not_applied_gets_attempt_2_with_its_own_key(
    void **state)
{
    char url[4200], id[64], key[OG_ID_MAX + 1], ref[OG_ID_MAX + 1];
    og_store *s = t_fresh_store("preauth", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_decide_req rq;
    og_payout_claim_req cr;
    og_payout_claim_result c, c2;
    og_payout_resolution r;
    og_payout_view v;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "reauth", id, &d, 2 * MINUTE);
    p_start(s, &c);
    assert_int_equal(p_resolve(s, c.attempt.operation_id,
                               OG_OP_BIT(OG_OP_STARTED), 1, OG_OP_UNKNOWN,
                               "worker-7")
                         .outcome,
                     OG_PAYOUT_RESOLVE_RESOLVED);
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN), 1,
                  OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(v.version, r.payout_version);
    assert_string_equal(v.active_attempt, "");
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    /* a materially new attempt: a new decision and grant, attempt 2 */
    rq = p_req(id);
    rq.reauthorize = true;
    rq.payout_version = v.version;
    rq.not_before_us = t_now_us() - SEC;
    rq.expires_at_us = rq.not_before_us + 30 * MINUTE;
    d2 = p_decide(s, &rq);
    if (d2.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("reauthorize: %s", og_payout_reason_name(d2.verdict.reason));
    assert_int_equal(d2.attempt_number, 2);
    assert_int_equal(d2.executable_payout_version, v.version + 1);
    assert_string_not_equal(d2.grant_id, d.grant_id);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    cr = p_claim_req(&d2, "worker-9");
    c2 = p_claim(s, &cr);
    assert_int_equal(c2.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_int_equal(c2.attempt_number, 2);
    snprintf(key, sizeof key, "payout-%s-a2", id);
    snprintf(ref, sizeof ref, "%s-a2", id);
    assert_string_equal(c2.attempt.idempotency_key, key);
    assert_string_equal(c2.attempt.client_reference, ref);
    assert_string_not_equal(c2.attempt.operation_id, c.attempt.operation_id);
    /* the first grant stays consumed by attempt 1, its release once */
    {
        og_payout_grant_view g;

        assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
        assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
        assert_string_equal(g.consumed_by_operation, c.attempt.operation_id);
        p_assert_release(raw, d.grant_id, "not-applied");
        p_assert_release(raw, d2.grant_id, NULL);
    }
    /* and attempt 2 resolves on its own binding */
    {
        bool started = false;

        assert_int_equal(og_op_start(s, c2.attempt.operation_id, 1,
                                     "worker-9", &started),
                         0);
        assert_true(started);
    }
    r = p_resolve(s, c2.attempt.operation_id, OG_OP_BIT(OG_OP_STARTED), 1,
                  OG_OP_SUCCEEDED, "worker-9");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_string_equal(r.grant_id, d2.grant_id);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(p_paid(raw, w.tenant), 10000);
    p_assert_release(raw, d2.grant_id, "paid");
    t_raw_close(raw);
    og_store_free(s);
}

/* A redelivery after the consuming attempt was archived (retention) is
 * still a duplicate: the claim reads operations_archive too. */
static void redelivery_after_the_attempt_was_archived_is_a_duplicate(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("parch", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result first, again;
    og_payout_view was;
    og_archive_stats st;
    int64_t before[P_CLAIM_TABLES];
    char where[256];
    p_world w;

    (void)state;
    first = p_claimed(s, raw, &w, "arch", id, &d, 2 * MINUTE);
    p_start(s, &first);
    assert_int_equal(p_resolve(s, first.attempt.operation_id,
                               OG_OP_BIT(OG_OP_STARTED), 1, OG_OP_SUCCEEDED,
                               "worker-7")
                         .outcome,
                     OG_PAYOUT_RESOLVE_RESOLVED);
    usleep(20000); /* its last change lies before the archive's clock */
    memset(&st, 0, sizeof st);
    assert_int_equal(og_store_archive_operations(s, 0, OG_ARCHIVE_MOVE, 10, 1,
                                                 &st),
                     0);
    assert_int_equal(st.operations, 1);
    snprintf(where, sizeof where, "operation_id = '%s'",
             first.attempt.operation_id);
    assert_int_equal(p_count(raw, "operations", where), 0);
    assert_int_equal(p_count(raw, "operations_archive", where), 1);
    was = p_get(s, id);
    p_counts(raw, before);
    c = p_claim_req(&d, "worker-8");
    c.relied.payout = d.executable_payout_version;
    again = p_claim(s, &c);
    assert_int_equal(again.outcome, OG_PAYOUT_CLAIM_DUPLICATE);
    assert_string_equal(again.payout_id, id);
    assert_int_equal(again.attempt_number, 1);
    assert_false(again.has_attempt); /* og_operation_get no longer sees it */
    {
        int64_t now[P_CLAIM_TABLES];
        og_payout_view v = p_get(s, id);

        p_counts(raw, now);
        for (size_t k = 0; k < P_CLAIM_TABLES; k++)
            assert_int_equal(now[k], before[k]);
        assert_int_equal(v.version, was.version);
        assert_int_equal(v.state, OG_PAYOUT_STATE_PAID);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* A claim that fails before its commit wrote nothing: the grant is still
 * Issued and the same claim then succeeds. */
static void claim_failing_before_its_commit_writes_nothing(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pcfault", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_grant_view g;
    og_payout_view was;
    int64_t before[P_CLAIM_TABLES];
    p_world w;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        fprintf(stderr, "(fault points not compiled in: "
                        "-Dfault_injection=true runs this test)\n");
        t_raw_close(raw);
        og_store_free(s);
        return;
    }
    p_world_new(s, raw, &w, "cfault", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    was = p_get(s, id);
    p_counts(raw, before);
    assert_int_equal(setenv("OG_FAULT", "payout_claim_before_commit", 1), 0);
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(og_payout_claim(s, &c, &r), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(unsetenv("OG_FAULT"), 0);
    assert_int_equal(r.payout_id[0], 0x5a); /* out untouched */
    p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);
    {
        char where[256];

        snprintf(where, sizeof where, "grant_id = '%s'", d.grant_id);
        assert_int_equal(p_count(raw, "operations", where), 0);
    }
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CLAIMED);
    t_raw_close(raw);
    og_store_free(s);
}

const struct CMUnitTest t_payout_tests[] = {
    cmocka_unit_test(
        claim_sets_the_attempt_key_and_reference_from_the_payout_and_attempt_number),
    cmocka_unit_test(
        redelivery_after_the_claim_is_a_duplicate_with_no_state_change),
    cmocka_unit_test(
        context_change_between_validation_and_claim_rolls_the_claim_back),
    cmocka_unit_test(redelivery_after_the_attempt_was_archived_is_a_duplicate),
    cmocka_unit_test(claim_failing_before_its_commit_writes_nothing),
    cmocka_unit_test(resolution_moves_the_reservation_with_the_outcome),
    cmocka_unit_test(stale_owner_cannot_resolve),
    cmocka_unit_test(unknown_holds_the_reservation_and_blocks_reauthorization),
    cmocka_unit_test(
        reauthorization_after_not_applied_gets_attempt_2_with_its_own_key),
    cmocka_unit_test(expired_or_revoked_grant_is_not_claimed),
    cmocka_unit_test(concurrent_claims_of_one_grant_make_exactly_one_attempt),
    cmocka_unit_test(context_versions_move_with_every_change),
    cmocka_unit_test(bad_payout_input_gets_the_cores_error_and_writes_nothing),
    cmocka_unit_test(
        allowed_decision_writes_decision_grant_reservation_approval_and_job_in_one_transaction),
    cmocka_unit_test(non_allowed_decision_is_written_alone_and_issues_nothing),
    cmocka_unit_test(decision_is_never_rewritten),
    cmocka_unit_test(reauthorization_is_refused_while_an_attempt_is_active),
    cmocka_unit_test(
        concurrent_reauthorizations_allocate_distinct_attempt_numbers),
    cmocka_unit_test(
        two_payouts_decided_concurrently_cannot_exceed_the_daily_limit),
    cmocka_unit_test(unused_grant_expiry_releases_its_reservation_once),
    cmocka_unit_test(
        revoked_grant_releases_its_reservation_and_cannot_be_presented),
    cmocka_unit_test(
        job_is_redelivered_after_its_delivery_lease_and_acknowledged_once),
    cmocka_unit_test(resubmitted_job_points_at_the_same_grant),
    cmocka_unit_test(no_destination_token_in_decisions_grants_jobs_or_events),
    cmocka_unit_test(
        context_that_cannot_be_read_is_unavailable_and_nothing_is_decided),
};
const size_t t_payout_tests_count =
    sizeof t_payout_tests / sizeof t_payout_tests[0];
