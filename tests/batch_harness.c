/*
 * batch_harness.c — what the group-commit tests share (batch_harness.h).
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch_harness.h"

#define SEC INT64_C(1000000)

void t_batch_issue(og_store *s, const char *issuer, const t_case *c)
{
    char digest[65];
    og_issuance iss;
    og_issue_outcome o;
    int64_t issued = c->g.expires_at_us - 60 * SEC;

    if (issued > t_now_us() - SEC)
        issued = t_now_us() - SEC;
    assert_int_equal(og_params_digest(c->in.account_id, c->in.amount,
                                      c->in.currency, digest), 0);
    iss = (og_issuance){issuer, c->grant_id, c->g.family, c->in.caller_id,
                        "credit.apply", digest, issued, c->g.expires_at_us,
                        t_form};
    assert_int_equal(og_issuance_record(s, &iss, &o), 0);
    assert_int_equal(o, OG_ISSUE_RECORDED);
}

void t_batch_family(char *out, size_t n)
{
    char u[OG_UUID_LEN + 1];

    t_uuid(u);
    snprintf(out, n, "fam-%.12s", u);
}

void t_batch_options(og_store_options *o, int pool)
{
    og_store_options_default(o);
    o->consumption_keys = t_keys;
    o->pool_size = pool;
    o->timings.store_timeout_us = 30 * SEC; /* atomicity, not latency */
    og_timings_fit(&o->timings);
}

og_store *t_batch_store(const og_store_options *o)
{
    og_store *s = NULL;
    int rc = og_store_open(t_url, o, &s);

    if (rc != 0) {
        fprintf(stderr, "og_store_open(%s): %s\n", t_url, og_err_name(rc));
        abort();
    }
    return s;
}

/* Runs the mix as ONE batch, with the fault point fault set (when not
 * NULL), and the twin through the one-row path; returns the fallbacks the
 * batch took. */
static uint64_t t_mix_run(const t_mix_def *def, const char *fault)
{
    og_store *s = def->store(64, 4), *one = def->store(1, 2);
    void *m = calloc(1, def->size), *twin = calloc(1, def->size);
    og_admit_stats before, after;
    int rcs[64];

    assert_true(def->rows >= 1 && def->rows <= 64);
    assert_non_null(m);
    assert_non_null(twin);
    def->init(s, m);
    def->init(one, twin);
    def->stats(s, &before);
    if (fault)
        setenv("OG_FAULT", fault, 1);
    assert_int_equal(def->batch(s, m, rcs), 0);
    unsetenv("OG_FAULT");
    def->stats(s, &after);
    assert_true(after.batches == before.batches + 1);
    assert_true(after.rows == before.rows + (uint64_t)def->rows);
    for (int i = 0; i < def->rows; i++) {
        if (rcs[i] != 0)
            fprintf(stderr, "row %d: %s\n", i, og_err_name(rcs[i]));
        assert_int_equal(rcs[i], 0);
        def->row(m, one, twin, i);
    }
    def->after(s, m, twin);
    free(m);
    free(twin);
    og_store_free(one);
    og_store_free(s);
    return after.fallbacks - before.fallbacks;
}

void t_mix_takes_no_fallback(void **state)
{
    assert_true(t_mix_run(*state, NULL) == 0);
}

void t_mix_falls_back_once(void **state)
{
    const t_mix_def *def = *state;

    if (!OG_TEST_FAULT_INJECTION)
        skip();
    assert_true(t_mix_run(def, def->abort_fault) ==
                (t_kind == T_POSTGRES ? 1u : 0u));
}

typedef struct t_race_ctx {
    const t_race_def *def;
    void *ctx;
} t_race_ctx;

/* Racer who on a store object of its own. */
static void t_racer(void *arg, int who)
{
    const t_race_ctx *r = arg;
    og_store *s = r->def->store(64, 2);

    r->def->run(r->ctx, who, s);
    og_store_free(s);
}

static void t_race_case(const t_race_def *def, bool processes)
{
    /* MAP_SHARED whether threads or children race: anonymous pages come
     * zeroed, and the children's answers reach the parent. */
    t_race_ctx r = {def, t_shared_zeroed(def->size)};

    def->init(r.ctx);
    if (processes)
        t_race_processes(t_racer, &r);
    else
        t_race_threads(t_racer, &r);
    def->check(r.ctx);
    munmap(r.ctx, def->size);
}

void t_race_in_threads(void **state)
{
    t_race_case(*state, false);
}

void t_race_in_processes(void **state)
{
    t_race_case(*state, true);
}

void t_race_start(volatile int *arrived)
{
    __atomic_add_fetch(arrived, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(arrived, __ATOMIC_SEQ_CST) < 2)
        sched_yield();
}

void t_assert_batch_stats(const og_admit_stats st[2], uint64_t rows,
                          int batch_max)
{
    assert_true(st[0].rows + st[1].rows == rows);
    for (int k = 0; k < 2; k++) {
        assert_true(st[k].batches >= 1 && st[k].batches <= st[k].rows);
        if (batch_max == 1)
            assert_true(st[k].batches == st[k].rows);
        assert_true(st[k].fallbacks == 0);
    }
}

typedef struct t_queue {
    const t_queue_def *def;
    void *ctx;
    og_store *s[2];
    int won[64]; /* with __atomic */
    int errors;
} t_queue;

/* Caller who: every item once, in an order of its own, on store object
 * who % 2. */
static void t_queue_caller(void *arg, int who)
{
    t_queue *q = arg;

    for (int n = 0; n < q->def->items; n++) {
        int i = (n * 7 + who * 5) % q->def->items;
        int r = q->def->call(q->ctx, q->s[who % 2], i);

        if (r < 0)
            __atomic_add_fetch(&q->errors, 1, __ATOMIC_SEQ_CST);
        else if (r > 0)
            __atomic_add_fetch(&q->won[i], 1, __ATOMIC_SEQ_CST);
    }
}

static void t_queue_run(const t_queue_def *def, int batch_max)
{
    t_queue q = {def, calloc(1, def->size), {NULL, NULL}, {0}, 0};
    og_admit_stats st[2];
    t_raw *raw;

    assert_true(def->items >= 1 && def->items <= 64);
    assert_non_null(q.ctx);
    q.s[0] = def->store(batch_max, 4);
    q.s[1] = def->store(batch_max, 4);
    def->init(q.ctx, q.s[0]);
    t_callers(def->callers, t_queue_caller, &q);
    assert_int_equal(q.errors, 0);
    raw = t_raw_open();
    for (int i = 0; i < def->items; i++) {
        assert_int_equal(q.won[i], 1);
        def->check(q.ctx, raw, i);
    }
    t_raw_close(raw);
    def->stats(q.s[0], &st[0]);
    def->stats(q.s[1], &st[1]);
    t_assert_batch_stats(st, (uint64_t)def->callers * (uint64_t)def->items,
                         batch_max);
    og_store_free(q.s[0]);
    og_store_free(q.s[1]);
    free(q.ctx);
}

void t_queue_in_batches_and_alone(void **state)
{
    t_queue_run(*state, 64);
    t_queue_run(*state, 1);
}

void *t_shared_zeroed(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    assert_true(p != MAP_FAILED); /* anonymous pages come zeroed */
    return p;
}

void t_batches_until_killed(og_store *s, int n, int rows,
                            int (*batch)(void *ctx, og_store *s, int base),
                            void *ctx, volatile int *batches)
{
    for (int base = 0; base + rows <= n; base += rows) {
        if (batch(ctx, s, base) != 0)
            _exit(3);
        __atomic_add_fetch(batches, 1, __ATOMIC_SEQ_CST);
    }
    _exit(0);
}

void t_kill_midway(void (*child)(void *ctx), void *ctx,
                   volatile int *progress, int at_least, unsigned pause_us)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        child(ctx);
        _exit(0);
    }
    while (__atomic_load_n(progress, __ATOMIC_SEQ_CST) < at_least) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            fail_msg("the child ended before it was killed");
        usleep(1000);
    }
    usleep(pause_us);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
}
