/*
 * races.c — the pipeline's claims under real concurrency: workers on
 * threads with separate store objects and in separate OS processes, each
 * with its own, repeated; a change committed between a worker's validation
 * and its claim; two payouts decided at once against one day's limit; and
 * a worker process paused past its lease whose request reaches the
 * provider late.
 */
#include "pipeline.h"

#define RACERS 4
#define THREAD_ROUNDS 3
#define PROC_ROUNDS 2

typedef struct racer {
    og_store *s;
    og_payout_worker_cfg cfg;
    pl_cred cred;
    pthread_barrier_t *start;
    og_payout_work wk;
    int rc;
} racer;

static void *racer_main(void *arg)
{
    racer *r = arg;

    pthread_barrier_wait(r->start);
    memset(&r->wk, 0, sizeof r->wk);
    r->rc = og_payout_work_once(r->s, &r->cfg, &r->wk);
    return NULL;
}

/* One grant, RACERS deliveries of it (the job and operator resubmissions),
 * RACERS workers at once. */
static void one_grant_many_jobs(pl_world *w, char *id, int n)
{
    og_payout_decision d = pl_example(w, id, n);
    char job[OG_UUID_LEN + 1];

    for (int i = 1; i < RACERS; i++)
        assert_int_equal(og_payout_job_resubmit(w->s, d.job_id, "ops-7", job),
                         1);
}

static void round_check(pl_world *w, const char *id, int sent, int dup,
                        long long requests, const int *ends)
{
    if (sent != 1 || dup != RACERS - 1) {
        for (int i = 0; i < RACERS; i++)
            fprintf(stderr, "worker %d: %s\n", i,
                    ends[i] < 0 ? og_err_name(ends[i])
                                : og_payout_work_end_name(
                                      (og_payout_work_end)ends[i]));
    }
    assert_int_equal(sent, 1);
    assert_int_equal(dup, RACERS - 1);
    assert_int_equal(pl_attempts(w, id), 1);
    assert_int_equal(pl_payout(w, id).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(pl_stats_of(&w->sbx).payout_requests, requests);
    assert_int_equal(pl_stats_of(&w->sbx).payouts_created, requests);
}

void concurrent_workers_on_one_grant_make_one_attempt_and_one_provider_call(
    void **state)
{
    pl_world w;
    long long requests = 0;

    (void)state;
    pl_world_up(&w, "race", PL_DST_OPEN, 5);
    /* threads, two store objects */
    for (int round = 0; round < THREAD_ROUNDS; round++) {
        char id[64];
        og_store *stores[2] = {t_store_url(w.url, 4, 30000),
                               t_store_url(w.url, 4, 30000)};
        pthread_barrier_t start;
        pthread_t th[RACERS];
        racer r[RACERS];
        int sent = 0, dup = 0;

        one_grant_many_jobs(&w, id, round);
        pthread_barrier_init(&start, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
            memset(&r[i], 0, sizeof r[i]);
            r[i].s = stores[i % 2];
            r[i].cfg = pl_cfg(&w, &r[i].cred);
            r[i].start = &start;
            assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]),
                             0);
        }
        for (int i = 0; i < RACERS; i++) {
            pthread_join(th[i], NULL);
            if (r[i].rc != 0)
                fail_msg("round %d worker %d: %s", round, i,
                         og_err_name(r[i].rc));
            sent += r[i].wk.end == OG_PAYOUT_WORK_SENT;
            dup += r[i].wk.end == OG_PAYOUT_WORK_DUPLICATE;
            assert_int_equal(r[i].wk.end == OG_PAYOUT_WORK_SENT ? 1 : 0,
                             r[i].wk.sends);
        }
        pthread_barrier_destroy(&start);
        og_store_free(stores[0]);
        og_store_free(stores[1]);
        {
            int e[RACERS];

            for (int i = 0; i < RACERS; i++)
                e[i] = (int)r[i].wk.end;
            round_check(&w, id, sent, dup, ++requests, e);
        }
    }
    /* separate processes, each with its own store object */
    for (int round = 0; round < PROC_ROUNDS; round++) {
        char id[64];
        int *ends = mmap(NULL, sizeof(int) * RACERS * 2,
                         PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
        pid_t pid[RACERS];
        int sent = 0, dup = 0;

        assert_true(ends != MAP_FAILED);
        one_grant_many_jobs(&w, id, 100 + round);
        for (int i = 0; i < RACERS; i++) {
            ends[2 * i] = -1000;
            pid[i] = fork();
            assert_true(pid[i] >= 0);
            if (pid[i] == 0) {
                og_store *s = t_store_url(w.url, 1, 30000);
                pl_cred c;
                og_payout_worker_cfg cfg = pl_cfg(&w, &c);
                og_payout_work wk;
                int rc;

                memset(&wk, 0, sizeof wk);
                rc = og_payout_work_once(s, &cfg, &wk);
                ends[2 * i] = rc != 0 ? rc : (int)wk.end;
                ends[2 * i + 1] = (int)wk.reason;
                if (wk.sends != (wk.end == OG_PAYOUT_WORK_SENT ? 1 : 0))
                    ends[2 * i] = -1000;
                og_store_free(s);
                _exit(0);
            }
        }
        for (int i = 0; i < RACERS; i++) {
            int st = 0;

            assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (ends[2 * i] < 0)
                fail_msg("process %d: %s", i, og_err_name(ends[2 * i]));
            sent += ends[2 * i] == OG_PAYOUT_WORK_SENT;
            dup += ends[2 * i] == OG_PAYOUT_WORK_DUPLICATE;
            dup += ends[2 * i] == OG_PAYOUT_WORK_REFUSED &&
                   ends[2 * i + 1] == OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE;
        }
        {
            int e[RACERS];

            for (int i = 0; i < RACERS; i++)
                e[i] = ends[2 * i];
            round_check(&w, id, sent, dup, ++requests, e);
        }
        munmap(ends, sizeof(int) * RACERS * 2);
    }
    pl_world_down(&w);
}

/* P-T11 through the pipeline: a change to the beneficiary, the destination,
 * the tenant or the policy committed between the worker's validation and
 * its claim
 * rolls the claim back — claim.context-changed, zero provider calls. */
void context_change_between_validation_and_claim_makes_zero_provider_calls(
    void **state)
{
    static const struct {
        const char *what, *table, *key_col;
        const char *set;
    } changes[] = {
        {"beneficiary", "beneficiaries", "beneficiary_id",
         "status = 'Suspended', version = version + 1"},
        {"destination", "destinations", "destination_id",
         "version = version + 1"},
        {"tenant", "tenants", "tenant_id",
         "payouts_suspended = true, settings_version = settings_version + 1"},
        /* a new policy release, current in the store (a rolling deploy's
         * other binary): this worker's policy is not the current one */
        {"policy", "payout_policy_releases", "operation",
         "current_version = 'oncegate-payout-policy/99'"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof changes / sizeof changes[0]; k++) {
        bool landed = false;

        for (int attempt = 0; attempt < 8 && !landed; attempt++) {
            char id[64], sql[512];
            const char *key;
            pl_world w;
            pl_cred c;
            og_payout_worker_cfg cfg;
            og_payout_decision d;
            og_payout_work wk;
            og_payout_grant_view g;

            pl_world_up(&w, changes[k].what, PL_DST_OPEN, 5);
            cfg = pl_cfg(&w, &c);
            d = pl_example(&w, id, 1);
            key = k == 0   ? w.ben
                  : k == 1 ? w.dst
                  : k == 2 ? w.tenant
                           : OG_PAYOUT_OPERATION;
            snprintf(sql, sizeof sql, "UPDATE %s SET %s WHERE %s = '%s'",
                     changes[k].table, changes[k].set, changes[k].key_col,
                     key);
            landed = pl_between_validation_and_claim(
                &w, d.job_id, changes[k].table, changes[k].key_col, key, sql,
                &cfg, &wk);
            if (landed) {
                assert_int_equal(wk.end, OG_PAYOUT_WORK_REFUSED);
                assert_string_equal(og_payout_worker_reason_name(wk.reason),
                                    "claim.context-changed");
                assert_int_equal(wk.sends, 0);
                assert_int_equal(c.calls, 0);
                assert_int_equal(pl_attempts(&w, id), 0);
                assert_int_equal(pl_payout(&w, id).state,
                                 OG_PAYOUT_STATE_APPROVED);
                assert_int_equal(og_payout_grant_get(w.s, d.grant_id, &g), 1);
                assert_int_equal(g.consumed_at_us, 0);
                assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 0);
            }
            pl_world_down(&w);
        }
        if (!landed)
            fail_msg("%s: the change never landed between validation and"
                     " claim",
                     changes[k].what);
    }
}

/* P-T4 with the pipeline behind it: two payouts of 3,000.00 against a day
 * limit of 5,000.00, decided at once (threads on two store objects, then
 * processes): one is Allowed, and the provider is asked for one. */
typedef struct decider {
    og_store *s;
    og_payout_decide_req r;
    pthread_barrier_t *start;
    og_payout_decision d;
    int rc;
} decider;

static void *decider_main(void *arg)
{
    decider *x = arg;

    pthread_barrier_wait(x->start);
    x->rc = og_payout_decide(x->s, &x->r, &x->d);
    return NULL;
}

void two_payouts_run_concurrently_cannot_exceed_the_daily_limit(void **state)
{
    (void)state;
    for (int mode = 0; mode < 2; mode++) {
        char ids[2][64];
        pl_world w;
        pl_cred c;
        og_payout_worker_cfg cfg;
        og_payout_put_result pr;
        og_payout_tenant_settings t;
        int allowed = 0;

        pl_world_up(&w, mode ? "limitp" : "limitt", PL_DST_OPEN, 5);
        cfg = pl_cfg(&w, &c);
        memset(&t, 0, sizeof t);
        t.tenant_id = w.tenant;
        t.daily_limit = 500000;
        t.currency = "EUR";
        assert_int_equal(og_payout_tenant_put(w.s, &t, w.tenant_v, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        pl_draft(&w, ids[0], 1, "3000.00");
        pl_draft(&w, ids[1], 2, "3000.00");
        if (mode == 0) {
            pthread_barrier_t start;
            pthread_t th[2];
            decider x[2];

            pthread_barrier_init(&start, NULL, 2);
            for (int i = 0; i < 2; i++) {
                memset(&x[i], 0, sizeof x[i]);
                x[i].s = t_store_url(w.url, 2, 30000);
                x[i].r = pl_decide_req(ids[i]);
                x[i].start = &start;
                assert_int_equal(
                    pthread_create(&th[i], NULL, decider_main, &x[i]), 0);
            }
            for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(x[i].rc, 0);
                allowed += x[i].d.verdict.outcome == OG_PAYOUT_ALLOWED;
                og_store_free(x[i].s);
            }
            pthread_barrier_destroy(&start);
        } else {
            int *outc = mmap(NULL, sizeof(int) * 2, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
            pid_t pid[2];

            assert_true(outc != MAP_FAILED);
            for (int i = 0; i < 2; i++) {
                outc[i] = -1000;
                pid[i] = fork();
                assert_true(pid[i] >= 0);
                if (pid[i] == 0) {
                    og_store *s = t_store_url(w.url, 1, 30000);
                    og_payout_decide_req r = pl_decide_req(ids[i]);
                    og_payout_decision d;
                    int rc = og_payout_decide(s, &r, &d);

                    outc[i] = rc != 0 ? rc : (int)d.verdict.outcome;
                    og_store_free(s);
                    _exit(0);
                }
            }
            for (int i = 0; i < 2; i++) {
                int st = 0;

                assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
                assert_true(outc[i] >= 0);
                allowed += outc[i] == OG_PAYOUT_ALLOWED;
            }
            munmap(outc, sizeof(int) * 2);
        }
        assert_int_equal(allowed, 1);
        assert_int_equal(pl_reserved(&w), 300000);
        /* the worker: one job, one create; nothing for the other */
        assert_int_equal(pl_work(&w, &cfg).end, OG_PAYOUT_WORK_SENT);
        assert_int_equal(pl_work(&w, &cfg).end, OG_PAYOUT_WORK_IDLE);
        assert_int_equal(pl_paid(&w), 300000);
        assert_true(pl_paid(&w) + pl_reserved(&w) <= 500000);
        assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 1);
        pl_world_down(&w);
    }
}

/* P-T29, second part (P4): a worker process, paused (SIGSTOP) between its
 * Started write and its send, wakes after its lease, submit_by and the
 * sandbox's skew have passed and the sweeper made its attempt Unknown. Its
 * request reaches the provider and is refused with no effect
 * (request_expired): nothing is created, and reconciliation then proves
 * the attempt NotApplied. The pause point is the worker's on_started hook,
 * told after the confirmed Started write and before the send: it tells the
 * test through a pipe and waits long enough to be stopped there. */
void paused_worker_past_its_lease_has_its_late_request_refused(void **state)
{
    char id[64];
    pl_world w;
    pl_cred rcred;
    og_payout_reconciler_cfg rc;
    int fds[2];
    int *shared;
    pid_t pid;
    char byte;
    og_payout_view v;
    og_operation op;
    pl_stats st;
    int status = 0;

    (void)state;
    pl_world_up(&w, "paused", PL_DST_OPEN, 1);
    rc = pl_rcfg(&w, &rcred);
    pl_example(&w, id, 1);
    assert_int_equal(pipe(fds), 0);
    shared = mmap(NULL, sizeof(int) * 4, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared != MAP_FAILED);
    shared[0] = -1000;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        og_store *s = t_store_url(w.url, 1, 30000);
        pl_cred c;
        og_payout_worker_cfg cfg = pl_cfg(&w, &c);
        og_payout_work wk;
        int r;

        close(fds[0]);
        c.pipe_fd = fds[1];
        c.pause_ms = 1000;
        cfg.on_started = pl_on_started;
        cfg.on_started_arg = &c;
        cfg.attempt_lease_us = 500 * PL_MS;
        cfg.send_window_us = PL_SEC;
        cfg.provider_timeout_us = 5 * PL_SEC;
        memset(&wk, 0, sizeof wk);
        r = og_payout_work_once(s, &cfg, &wk);
        shared[0] = r != 0 ? r : (int)wk.end;
        shared[1] = wk.sends;
        shared[2] = (int)wk.answer.cls;
        og_store_free(s);
        _exit(0);
    }
    close(fds[1]);
    /* the worker is in its on_started hook, after Started: stop it */
    assert_int_equal(read(fds[0], &byte, 1), 1);
    assert_int_equal(kill(pid, SIGSTOP), 0);
    close(fds[0]);
    v = pl_payout(&w, id);
    op = pl_attempt(&w, v.active_attempt);
    assert_int_equal(op.status, OG_OP_STARTED);
    /* past its lease, submit_by and the skew: the sweeper takes over */
    pl_wait_until_us(op.submit_by_us + PL_SEC + 300 * PL_MS);
    assert_int_equal(pl_sweep(&w).unknown, 1);
    assert_int_equal(pl_attempt(&w, op.operation_id).status, OG_OP_UNKNOWN);
    /* it wakes and sends, late */
    assert_int_equal(kill(pid, SIGCONT), 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (shared[0] < 0)
        fail_msg("the paused worker: %s", og_err_name(shared[0]));
    assert_int_equal(shared[1], 1);               /* it did send */
    assert_int_equal(shared[2], OG_CLASS_FAILED); /* request_expired */
    st = pl_stats_of(&w.sbx);
    assert_int_equal(st.payout_requests, 1);
    assert_int_equal(st.payouts_created, 0); /* no effect */
    /* the attempt was not resolved by the fenced worker as its owner; it is
     * Unknown, or Failed by the late answer's evidence; when Unknown, a
     * lookup after the cutoff proves it NotApplied */
    op = pl_attempt(&w, op.operation_id);
    assert_true(op.owner_version >= 2);
    if (op.status == OG_OP_UNKNOWN) {
        pl_age_attempt(&w, op.operation_id, -1000, false);
        pl_reconcile(&w, &rc);
        op = pl_attempt(&w, op.operation_id);
        assert_int_equal(op.status, OG_OP_NOT_APPLIED);
        assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_APPROVED);
    } else {
        assert_int_equal(op.status, OG_OP_FAILED);
    }
    assert_int_equal(pl_reserved(&w), 0);
    assert_int_equal(pl_paid(&w), 0);
    assert_int_equal(pl_stats_of(&w.sbx).payouts_created, 0);
    munmap(shared, sizeof(int) * 4);
    pl_world_down(&w);
}
