/*
 * consume_batch.c — the group commit of the consume verdict
 * (docs/design.md, "The consume verdict in batches"), on both engines, in
 * both grant forms and both consumption keys:
 *
 *   conformance sqlite|postgres consume-batch [token|row] [hashed]
 *
 * A batch is built deterministically with og__consume_batch (the test
 * hook: the given verdicts as ONE batch, lib/store/store_int.h); the queue
 * that coalesces og_consume callers is exercised by many callers on one
 * store object. Every claim compares a batched answer with what the
 * one-row path answers (og_consume on a store object whose batches hold
 * one verdict), or with the store's rows.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "store/store_int.h" /* og__consume_batch: a batch built by the test */

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static const char *const v_revokers[] = {"supervisor-3"};
static const og_revoke_policy v_policy = {v_revokers, 1};

/* A store object on the suite's store whose batches hold at most batch_max
 * verdicts (1: the one-row path). */
static og_store *v_store(int batch_max, int pool)
{
    og_store_options o;
    og_store *s = NULL;
    int rc;

    og_store_options_default(&o);
    o.consumption_keys = t_keys;
    o.admit_batch_max = batch_max;   /* SQLite's verdicts: its batches */
    o.consume_batch_max = batch_max; /* PostgreSQL's */
    o.pool_size = pool;
    o.timings.store_timeout_us = 30 * SEC; /* atomicity, not latency */
    og_timings_fit(&o.timings);
    rc = og_store_open(t_url, &o, &s);
    if (rc != 0) {
        fprintf(stderr, "og_store_open(%s): %s\n", t_url, og_err_name(rc));
        abort();
    }
    return s;
}

/* The same verdicts, compared (two twins' families differ in name: each
 * answer's own is checked against its case by v_mix_expect). */
static void v_same(const og_consume_result *a, const og_consume_result *b)
{
    assert_int_equal(a->consumed, b->consumed);
    assert_int_equal(a->refusal, b->refusal);
    assert_int_equal(a->family[0] != '\0', b->family[0] != '\0');
}

/* ===========================================================================
 * A mixed batch answers as the one-row path does
 * ========================================================================= */
enum {
    MIX_FRESH,
    MIX_CONSUMED,       /* consumed before by the verdict */
    MIX_ADMITTED,       /* admitted before */
    MIX_REVOKED,
    MIX_EXPIRED,
    MIX_FAMILY_REVOKED,
    MIX_FAMILY_LIVE,
    MIX_NOT_ISSUED,     /* row form: no row; token form: fresh, never logged */
    MIX_FRESH2,
    MIX_N
};

typedef struct v_mix {
    t_case c[MIX_N];
    og_grant g[MIX_N];
    char fam[2][32]; /* the revoked family, the live one */
} v_mix;

/* Records c's issuance in the suite's form (t_issue records the row form
 * only; a token-form family exists once a grant is issued into it). */
static void v_issue(og_store *s, const t_case *c)
{
    char digest[65];
    og_issuance iss;
    og_issue_outcome o;
    int64_t issued = c->g.expires_at_us - 60 * SEC;

    if (issued > t_now_us() - SEC)
        issued = t_now_us() - SEC;
    assert_int_equal(og_params_digest(c->in.account_id, c->in.amount,
                                      c->in.currency, digest), 0);
    iss = (og_issuance){ISSUER, c->grant_id, c->g.family, c->in.caller_id,
                        "credit.apply", digest, issued, c->g.expires_at_us,
                        t_form};
    assert_int_equal(og_issuance_record(s, &iss, &o), 0);
    assert_int_equal(o, OG_ISSUE_RECORDED);
}

static void v_family(char *out, size_t n)
{
    char u[OG_UUID_LEN + 1];
    t_uuid(u);
    snprintf(out, n, "fam-%.12s", u);
}

/* Builds the state of every case on s: what the batch then meets. */
static void v_mix_new(og_store *s, v_mix *m)
{
    int64_t later = t_now_us() + 15 * 60 * SEC;
    og_revoke_outcome ro;
    og_strv list = {0};
    og_revocation rv;
    og_consume_result cr;
    og_admission a;

    memset(m, 0, sizeof *m);
    v_family(m->fam[0], sizeof m->fam[0]);
    v_family(m->fam[1], sizeof m->fam[1]);
    for (int i = 0; i < MIX_N; i++) {
        int64_t exp = i == MIX_EXPIRED ? t_now_us() - 3600 * SEC : later;

        memset(&m->c[i], 0, sizeof m->c[i]);
        t_grant_id(m->c[i].grant_id, sizeof m->c[i].grant_id);
        t_uuid(m->c[i].op);
        m->c[i].g = (og_grant){ISSUER, m->c[i].grant_id, exp,
                               i == MIX_FAMILY_REVOKED ? m->fam[0]
                               : i == MIX_FAMILY_LIVE  ? m->fam[1]
                                                       : NULL,
                               t_form};
        m->c[i].in = (og_intent){m->c[i].op, "agent-17", "A-1187", "250.00",
                                 "USD"};
        /* In token form the revoked family's case itself is not issued:
         * its family, not a revocation of its logged key, blocks it. */
        if (i != MIX_NOT_ISSUED &&
            (i != MIX_FAMILY_REVOKED || t_form == OG_FORM_ROW))
            v_issue(s, &m->c[i]); /* families exist from here */
        m->g[i] = m->c[i].g;
    }
    if (t_form == OG_FORM_TOKEN) { /* the revoked family exists */
        t_case other;

        memset(&other, 0, sizeof other);
        t_grant_id(other.grant_id, sizeof other.grant_id);
        t_uuid(other.op);
        other.g = (og_grant){ISSUER, other.grant_id, later, m->fam[0], t_form};
        other.in = (og_intent){other.op, "agent-17", "A-1187", "250.00", "USD"};
        v_issue(s, &other);
    }
    assert_int_equal(og_family_revoke(s, &v_policy, ISSUER, m->fam[0],
                                      "supervisor-3", &ro, &list), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    og_strv_free(&list);
    assert_int_equal(og_consume(s, &m->g[MIX_CONSUMED], &cr), 0);
    assert_true(cr.consumed);
    assert_int_equal(og_admit(s, &m->g[MIX_ADMITTED], &m->c[MIX_ADMITTED].in,
                              &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    rv = (og_revocation){ISSUER, m->c[MIX_REVOKED].grant_id, "supervisor-3",
                         m->c[MIX_REVOKED].g.expires_at_us, t_form};
    assert_int_equal(og_revoke(s, &v_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
}

/* What the one-row path answers for each case, explicitly. */
static void v_mix_expect(const v_mix *m, int i, const og_consume_result *r)
{
    switch (i) {
    case MIX_FRESH:
    case MIX_FRESH2:
        assert_true(r->consumed);
        assert_string_equal(r->family, "");
        break;
    case MIX_FAMILY_LIVE:
        assert_true(r->consumed);
        assert_string_equal(r->family, m->fam[1]);
        break;
    case MIX_NOT_ISSUED:
        if (t_form == OG_FORM_ROW) {
            assert_false(r->consumed);
            assert_int_equal(r->refusal, OG_REFUSAL_NOT_ISSUED);
        } else {
            assert_true(r->consumed); /* a verified token is the proof */
        }
        break;
    case MIX_CONSUMED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_CONSUMED);
        break;
    case MIX_ADMITTED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_SPENT);
        break;
    case MIX_REVOKED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_REVOKED);
        break;
    case MIX_EXPIRED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_DEADLINE_PASSED);
        break;
    case MIX_FAMILY_REVOKED:
        /* token form: the family blocks the claim; row form: the family's
         * revocation revoked the issued row */
        assert_false(r->consumed);
        assert_int_equal(r->refusal, t_form == OG_FORM_ROW
                                         ? OG_REFUSAL_GRANT_REVOKED
                                         : OG_REFUSAL_FAMILY_REVOKED);
        break;
    default:
        fail();
    }
}

/* Runs the whole mix as one batch (with the fault point fault set, when
 * not NULL) and, on a twin built alike, through the one-row path; compares
 * every answer with the twin's and with the expectation. Returns the
 * fallbacks the batch took. */
static uint64_t v_mix_run(const char *fault)
{
    og_store *s = v_store(64, 4), *one = v_store(1, 2);
    v_mix *m = calloc(1, sizeof *m), *twin = calloc(1, sizeof *twin);
    og_consume_result out[MIX_N], alone;
    og_admit_stats before, after;
    int rcs[MIX_N];

    assert_non_null(m);
    assert_non_null(twin);
    v_mix_new(s, m);
    v_mix_new(one, twin);
    og__consume_stats(s, &before);
    if (fault)
        setenv("OG_FAULT", fault, 1);
    assert_int_equal(og__consume_batch(s, MIX_N, m->g, out, rcs), 0);
    unsetenv("OG_FAULT");
    og__consume_stats(s, &after);
    assert_true(after.batches == before.batches + 1);
    assert_true(after.rows == before.rows + MIX_N);
    for (int i = 0; i < MIX_N; i++) {
        if (rcs[i] != 0)
            fprintf(stderr, "row %d: %s\n", i, og_err_name(rcs[i]));
        assert_int_equal(rcs[i], 0);
        v_mix_expect(m, i, &out[i]);
        assert_int_equal(og_consume(one, &twin->g[i], &alone), 0);
        v_same(&out[i], &alone);
    }
    /* What the batch consumed stays consumed: asked again, denied. */
    for (int i = 0; i < MIX_N; i++) {
        if (!out[i].consumed)
            continue;
        assert_int_equal(og_consume(s, &m->g[i], &alone), 0);
        assert_false(alone.consumed);
        assert_int_equal(alone.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
    free(m);
    free(twin);
    og_store_free(one);
    og_store_free(s);
    return after.fallbacks - before.fallbacks;
}

static void mixed_verdict_batch_answers_as_the_one_row_path(void **state)
{
    (void)state;
    assert_true(v_mix_run(NULL) == 0); /* ONE statement, no fallback */
}

static void aborted_verdict_batch_falls_back_row_by_row(void **state)
{
    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    /* PostgreSQL's statement aborted whole (the fault point stands for a
     * row that aborts it): the round falls back to one statement per row,
     * every row still answering as alone. SQLite's savepoints keep a row's
     * error to its row; it never falls back. */
    assert_true(v_mix_run("consume_batch_abort") ==
                (t_kind == T_POSTGRES ? 1u : 0u));
}

/* ===========================================================================
 * An unconfirmed commit answers every row unavailable
 * ========================================================================= */
static void unconfirmed_verdict_batch_is_unavailable_for_every_row(void **state)
{
    og_store *s;
    t_case c[4];
    og_grant g[4];
    og_consume_result out[4], r;
    int rcs[4];

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip();
    s = v_store(64, 4);
    for (int i = 0; i < 4; i++) {
        t_case_new(&c[i]);
        g[i] = c[i].g;
    }
    /* Row 3 was consumed before: its denial is read from a key the batch
     * did not claim. */
    assert_int_equal(og_consume(s, &g[3], &r), 0);
    assert_true(r.consumed);

    setenv("OG_FAULT", "consume_batch_ack_lost", 1);
    assert_int_equal(og__consume_batch(s, 4, g, out, rcs), 0);
    unsetenv("OG_FAULT");
    for (int i = 0; i < 4; i++)
        assert_int_equal(rcs[i], OG_ESTORE_UNAVAILABLE);
    /* The commit stayed: each grant is spent, by the verdict. */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(og_consume(s, &g[i], &r), 0);
        assert_false(r.consumed);
        assert_int_equal(r.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
    og_store_free(s);
}

/* ===========================================================================
 * Batches of two instances race on the same keys
 * ========================================================================= */
#define RACE_ROWS 16
#define RACE_ROUNDS 24

typedef struct v_race {
    char grant_id[RACE_ROUNDS][RACE_ROWS][64];
    int64_t expires_at_us;
    int rc[RACE_ROUNDS][2][RACE_ROWS];
    int consumed[RACE_ROUNDS][2][RACE_ROWS];
    int refusal[RACE_ROUNDS][2][RACE_ROWS];
    volatile int arrived[RACE_ROUNDS]; /* the start line of each round */
} v_race;

static void v_race_new(v_race *r)
{
    memset(r, 0, sizeof *r);
    r->expires_at_us = t_now_us() + 15 * 60 * SEC;
    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            t_case c;

            t_case_new_exp(&c, r->expires_at_us);
            memcpy(r->grant_id[k][i], c.grant_id, sizeof r->grant_id[k][i]);
        }
}

/* Racer who (0 or 1) runs every round on s, each round starting when both
 * arrived; the other racer lists the rows backwards (CB6). */
static void v_race_run(v_race *r, int who, og_store *s)
{
    og_grant g[RACE_ROWS];
    og_consume_result out[RACE_ROWS];
    int rcs[RACE_ROWS];

    for (int k = 0; k < RACE_ROUNDS; k++) {
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            g[i] = (og_grant){ISSUER, r->grant_id[k][j], r->expires_at_us,
                              NULL, t_form};
        }
        __atomic_add_fetch(&r->arrived[k], 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&r->arrived[k], __ATOMIC_SEQ_CST) < 2)
            sched_yield();
        if (og__consume_batch(s, RACE_ROWS, g, out, rcs) != 0)
            abort();
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            r->rc[k][who][j] = rcs[i];
            r->consumed[k][who][j] = rcs[i] == 0 && out[i].consumed;
            r->refusal[k][who][j] = rcs[i] == 0 ? (int)out[i].refusal : -1;
        }
    }
}

/* Each grant consumed exactly once; the loser told grant_consumed; the
 * store holds one claim per grant. */
static void v_race_check(const v_race *r)
{
    t_raw *raw = t_raw_open();

    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            int loser;

            assert_int_equal(r->rc[k][0][i], 0);
            assert_int_equal(r->rc[k][1][i], 0);
            assert_int_equal(r->consumed[k][0][i] + r->consumed[k][1][i], 1);
            loser = r->consumed[k][0][i] ? 1 : 0;
            assert_int_equal(r->refusal[k][loser][i],
                             OG_REFUSAL_GRANT_CONSUMED);
            assert_true(t_raw_consumptions(raw, ISSUER, r->grant_id[k][i]) ==
                        1);
        }
    t_raw_close(raw);
}

/* Racer who on a store object of its own. */
static void v_race_in(void *ctx, int who)
{
    og_store *s = v_store(64, 2);

    v_race_run(ctx, who, s);
    og_store_free(s);
}

static void verdict_batches_of_two_store_objects_race(void **state)
{
    v_race *r = calloc(1, sizeof *r);

    (void)state;
    assert_non_null(r);
    v_race_new(r);
    t_race_threads(v_race_in, r);
    v_race_check(r);
    free(r);
}

static void verdict_batches_of_two_processes_race(void **state)
{
    v_race *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    (void)state;
    assert_true(r != MAP_FAILED);
    v_race_new(r);
    t_race_processes(v_race_in, r);
    v_race_check(r);
    munmap(r, sizeof *r);
}

/* ===========================================================================
 * The queue: many callers on two store objects, the same grants
 * ========================================================================= */
#define QUEUE_CALLERS 8
#define QUEUE_GRANTS 24

typedef struct v_queue {
    og_store *s[2];
    t_case c[QUEUE_GRANTS];
    int consumed[QUEUE_GRANTS]; /* with __atomic */
    int errors;
} v_queue;

typedef struct v_caller {
    v_queue *q;
    int who;
} v_caller;

static void *v_caller_thread(void *arg)
{
    v_caller *t = arg;

    for (int n = 0; n < QUEUE_GRANTS; n++) {
        /* each caller its own order over the same grants */
        int i = (n * 7 + t->who * 5) % QUEUE_GRANTS;
        og_consume_result r;

        if (og_consume(t->q->s[t->who % 2], &t->q->c[i].g, &r) != 0 ||
            (!r.consumed && r.refusal != OG_REFUSAL_GRANT_CONSUMED))
            __atomic_add_fetch(&t->q->errors, 1, __ATOMIC_SEQ_CST);
        else if (r.consumed)
            __atomic_add_fetch(&t->q->consumed[i], 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* Every verdict answered, each grant consumed by exactly one caller, each
 * verdict counted in exactly one batch of its store object. */
static void v_queue_run(int batch_max)
{
    v_queue *q = calloc(1, sizeof *q);
    v_caller t[QUEUE_CALLERS];
    pthread_t th[QUEUE_CALLERS];
    og_admit_stats st[2];
    t_raw *raw;

    assert_non_null(q);
    q->s[0] = v_store(batch_max, 4);
    q->s[1] = v_store(batch_max, 4);
    for (int i = 0; i < QUEUE_GRANTS; i++)
        t_case_new(&q->c[i]);
    for (int w = 0; w < QUEUE_CALLERS; w++) {
        t[w] = (v_caller){q, w};
        assert_int_equal(pthread_create(&th[w], NULL, v_caller_thread, &t[w]),
                         0);
    }
    for (int w = 0; w < QUEUE_CALLERS; w++)
        pthread_join(th[w], NULL);
    assert_int_equal(q->errors, 0);
    raw = t_raw_open();
    for (int i = 0; i < QUEUE_GRANTS; i++) {
        assert_int_equal(q->consumed[i], 1);
        assert_true(t_raw_consumptions(raw, ISSUER, q->c[i].grant_id) == 1);
    }
    t_raw_close(raw);
    og__consume_stats(q->s[0], &st[0]);
    og__consume_stats(q->s[1], &st[1]);
    assert_true(st[0].rows + st[1].rows ==
                (uint64_t)QUEUE_CALLERS * QUEUE_GRANTS);
    for (int k = 0; k < 2; k++) {
        assert_true(st[k].batches >= 1 && st[k].batches <= st[k].rows);
        if (batch_max == 1)
            assert_true(st[k].batches == st[k].rows);
        assert_true(st[k].fallbacks == 0);
    }
    og_store_free(q->s[0]);
    og_store_free(q->s[1]);
    free(q);
}

static void queued_verdicts_consume_each_grant_once(void **state)
{
    (void)state;
    v_queue_run(64);
    v_queue_run(1);
}

/* ===========================================================================
 * kill -9 in the middle of batches
 * ========================================================================= */
#define KILL_ROWS 8
#define KILL_MAX 2048

typedef struct v_killed {
    char prefix[32];
    int64_t expires_at_us;
    char grant_id[KILL_MAX][64];
    volatile int answered[KILL_MAX]; /* 1 + consumed, once told */
    volatile int batches;
} v_killed;

static void v_killed_child(v_killed *k)
{
    og_store *s = v_store(64, 2);
    og_grant g[KILL_ROWS];
    og_consume_result out[KILL_ROWS];
    int rcs[KILL_ROWS];

    for (int base = 0; base + KILL_ROWS <= KILL_MAX; base += KILL_ROWS) {
        for (int i = 0; i < KILL_ROWS; i++)
            g[i] = (og_grant){ISSUER, k->grant_id[base + i], k->expires_at_us,
                              NULL, t_form};
        if (og__consume_batch(s, KILL_ROWS, g, out, rcs) != 0)
            _exit(3);
        for (int i = 0; i < KILL_ROWS; i++)
            if (rcs[i] == 0)
                k->answered[base + i] = 1 + out[i].consumed;
        __atomic_add_fetch(&k->batches, 1, __ATOMIC_SEQ_CST);
    }
    _exit(0);
}

static void killed_verdict_batches_keep_every_answer(void **state)
{
    v_killed *k = mmap(NULL, sizeof *k, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    og_store *s;
    t_raw *raw;
    int status, told = 0;
    pid_t pid;

    (void)state;
    assert_true(k != MAP_FAILED);
    memset(k, 0, sizeof *k);
    snprintf(k->prefix, sizeof k->prefix, "kv%d", (int)getpid());
    k->expires_at_us = t_now_us() + 15 * 60 * SEC;
    for (int i = 0; i < KILL_MAX; i++) {
        snprintf(k->grant_id[i], sizeof k->grant_id[i], "%s-%d", k->prefix, i);
        if (t_form == OG_FORM_ROW) {
            og_grant g = {ISSUER, k->grant_id[i], k->expires_at_us, NULL,
                          t_form};
            og_intent in = {"00000000-0000-4000-8000-000000000000",
                            "agent-17", "A-1187", "250.00", "USD"};
            t_issue(&g, &in);
        }
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        v_killed_child(k);
    while (__atomic_load_n(&k->batches, __ATOMIC_SEQ_CST) < 3) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            fail_msg("the child ended before it was killed");
        usleep(1000);
    }
    usleep(7000);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    /* Every verdict the child was told holds; every grant holds at most
     * one claim, and one by the verdict only (no operation). */
    raw = t_raw_open();
    for (int i = 0; i < KILL_MAX; i++) {
        if (!k->answered[i])
            continue;
        told++;
        assert_int_equal(k->answered[i], 2); /* consumed */
        assert_true(t_raw_consumptions(raw, ISSUER, k->grant_id[i]) == 1);
    }
    assert_true(told >= 3 * KILL_ROWS);
    if (t_form == OG_FORM_ROW)
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grants WHERE grant_id"
                              " LIKE '%s-%%' AND consumed_by_operation IS NOT"
                              " NULL",
                              k->prefix) == 0);
    else if (t_keys != OG_KEYS_HASHED)
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grant_consumptions WHERE"
                              " grant_id LIKE '%s-%%' AND (kind <> 'consume'"
                              " OR operation_id IS NOT NULL)",
                              k->prefix) == 0);
    t_raw_close(raw);
    /* Whatever the kill cut, each grant's verdict is decided once: asked
     * again, consumed now, or denied because the killed batch consumed
     * it. */
    s = v_store(64, 2);
    for (int i = 0; i < KILL_MAX; i += 37) {
        og_grant g = {ISSUER, k->grant_id[i], k->expires_at_us, NULL, t_form};
        og_consume_result r;

        assert_int_equal(og_consume(s, &g, &r), 0);
        if (k->answered[i])
            assert_false(r.consumed);
        if (!r.consumed)
            assert_int_equal(r.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
    og_store_free(s);
    munmap(k, sizeof *k);
}

/* How many times needle occurs in hay. */
static int v_count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* docs/performance.md, "VERDICT2": PostgreSQL keeps a prepared
 * statement's generic plan, and a store's first batches plan it on tables
 * that are empty and never analysed. On such a store every plan of every
 * batched statement (the admissions', the consume verdicts', both forms,
 * and the ticket rotations', docs/performance.md "ROTATE",
 * custom and generic, as og_store_explain shows them) reads every table by
 * key — no sequential scan of any table — and the report probes
 * grant_consumptions_pkey, the families' locks families_pkey and (row
 * form) the grants' locks and claims grants_pkey. As plain joins, the
 * generic plans hashed sequential scans of grant_consumptions, grants,
 * families and (row form) operations_archive on every batch. */
static void batched_plans_probe_by_key_on_a_new_store(void **state)
{
    static const char *const batched[4] = {
        "### Admission, batched (group commit), token form",
        "### Admission, batched (group commit), row form",
        "### Consume verdict, batched (group commit), token form",
        "### Consume verdict, batched (group commit), row form"};
    char *plan = NULL, url[4200];
    og_store *s;

    (void)state;
    if (t_kind != T_POSTGRES)
        skip(); /* SQLite has no batched statement (og_store_explain) */
    s = t_fresh_store("cb_new_plans", url, sizeof url);
    assert_int_equal(og_store_explain(s, 1000, &plan), 0);
    assert_non_null(plan);
    for (int f = 0; f < 4; f++) {
        const char *p = strstr(plan, batched[f]), *q;
        char *b;

        assert_non_null(p);
        q = strstr(p + 4, "\n### "); /* the section ends at the next */
        b = strndup(p, q ? (size_t)(q - p) : strlen(p));
        assert_non_null(b);
        if (b != NULL && strstr(b, "Seq Scan") != NULL)
            fprintf(stderr, "plans:\n%s\n", b);
        assert_null(strstr(b, "Seq Scan"));
        /* custom and generic: the report, and the families' locks */
        assert_true(v_count_of(b, "using grant_consumptions_pkey on "
                                  "grant_consumptions c") >= 2);
        assert_true(v_count_of(b, "using families_pkey on families") >= 4);
        if (f % 2 == 1) /* row form: the grants' locks and claims */
            assert_true(v_count_of(b, "using grants_pkey on grants") >= 6);
        free(b);
    }
    /* Ticket rotation's batch (rotate_batch.c, RB3): the tickets' locks,
     * the rotation's UPDATE and the report probe tickets_pkey, the
     * families' liveness families_pkey, custom and generic. */
    {
        const char *p = strstr(plan, "### Ticket rotation, batched"), *q;
        char *b;

        assert_non_null(p);
        q = strstr(p + 4, "\n### ");
        b = strndup(p, q ? (size_t)(q - p) : strlen(p));
        assert_non_null(b);
        if (b != NULL && strstr(b, "Seq Scan") != NULL)
            fprintf(stderr, "plans:\n%s\n", b);
        assert_null(strstr(b, "Seq Scan"));
        assert_true(v_count_of(b, "tickets_pkey") >= 6);
        assert_true(v_count_of(b, "using families_pkey on families") >= 4);
        free(b);
    }
    free(plan);
    og_store_free(s);
}

const struct CMUnitTest t_consume_batch_tests[] = {
    cmocka_unit_test(mixed_verdict_batch_answers_as_the_one_row_path),
    cmocka_unit_test(aborted_verdict_batch_falls_back_row_by_row),
    cmocka_unit_test(unconfirmed_verdict_batch_is_unavailable_for_every_row),
    cmocka_unit_test(verdict_batches_of_two_store_objects_race),
    cmocka_unit_test(verdict_batches_of_two_processes_race),
    cmocka_unit_test(queued_verdicts_consume_each_grant_once),
    cmocka_unit_test(killed_verdict_batches_keep_every_answer),
    cmocka_unit_test(batched_plans_probe_by_key_on_a_new_store),
};
const size_t t_consume_batch_tests_count =
    sizeof t_consume_batch_tests / sizeof t_consume_batch_tests[0];
