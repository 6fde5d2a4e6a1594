/*
 * payout_run.c — the payout runner (oncegate/payout_exec.h): workers, a
 * sweeper, a reconciler and a janitor, each a thread looping over one
 * library call of lib/exec/payout.c (or og_payout_expire_grants) until
 * stopped, with counters a caller reads while they run. It decides
 * nothing itself: every guarantee is the calls' (PX1-PX9 in payout.c);
 * here only scheduling, counting and stopping.
 *
 * Threads share the store object (thread-safe, pooled) and one mutex that
 * guards the counters and the stop flag; a wait is a timed wait on the
 * runner's condition variable, so a stop wakes every loop at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec/payout_int.h"

#define MS INT64_C(1000)
#define SEC INT64_C(1000000)
#define WORKERS_MAX 64

typedef enum { T_WORKER, T_SWEEPER, T_RECONCILER, T_JANITOR } thread_kind;

typedef struct runner_thread {
    og_payout_runner *r;
    thread_kind kind;
    int index;             /* T_WORKER: which */
    pthread_t thread;
    bool running;
} runner_thread;

struct og_payout_runner {
    og_store *s;
    og_payout_runner_cfg cfg;
    og_payout_worker_cfg wcfg[WORKERS_MAX];
    char worker_ids[WORKERS_MAX][OG_ID_MAX + 1];
    bool worker_idle[WORKERS_MAX]; /* the worker's last take found nothing */
    runner_thread threads[WORKERS_MAX + 3];
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    og_payout_runner_counts counts;
};

/* Waits us or until stopped; true when stopped. */
static bool wait_or_stop(og_payout_runner *r, int64_t us)
{
    struct timespec at;
    bool stop;

    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += (time_t)(us / SEC);
    at.tv_nsec += (long)(us % SEC) * 1000;
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->stop)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &at) == ETIMEDOUT)
            break;
    stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static bool stopping(og_payout_runner *r)
{
    bool stop;

    pthread_mutex_lock(&r->mu);
    stop = r->stop;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

static void worker_loop(runner_thread *t)
{
    og_payout_runner *r = t->r;
    const og_payout_worker_cfg *c = &r->wcfg[t->index];

    while (!stopping(r)) {
        og_payout_work w;
        int rc = og_payout_work_once(r->s, c, &w);

        pthread_mutex_lock(&r->mu);
        if (rc != 0) {
            r->counts.worker_errors++;
            r->worker_idle[t->index] = false;
        } else {
            r->counts.ends[w.end]++;
            if (w.end == OG_PAYOUT_WORK_REFUSED ||
                w.end == OG_PAYOUT_WORK_POSTPONED)
                r->counts.reasons[w.reason]++;
            r->counts.sends += w.sends;
            r->counts.security_signals += w.security_signal;
            r->worker_idle[t->index] = w.end == OG_PAYOUT_WORK_IDLE;
        }
        pthread_mutex_unlock(&r->mu);
        if (rc == 0 && w.end != OG_PAYOUT_WORK_IDLE && r->cfg.on_work)
            r->cfg.on_work(r->cfg.on_work_arg, &w);
        if ((rc != 0 || w.end == OG_PAYOUT_WORK_IDLE) &&
            wait_or_stop(r, r->cfg.idle_wait_us))
            break;
    }
}

static void sweeper_loop(runner_thread *t)
{
    og_payout_runner *r = t->r;

    do {
        og_payout_sweep_stats st;
        int rc = og_payout_sweep_once(r->s, r->cfg.sweeper_actor,
                                      r->cfg.sweep_limit, &st);

        pthread_mutex_lock(&r->mu);
        if (rc != 0) {
            r->counts.pass_errors++;
        } else {
            og_payout_sweep_stats *a = &r->counts.sweep;
            a->scanned += st.scanned;
            a->taken += st.taken;
            a->not_started += st.not_started;
            a->unknown += st.unknown;
            a->later += st.later;
            a->errors += st.errors;
        }
        pthread_mutex_unlock(&r->mu);
    } while (!wait_or_stop(r, r->cfg.interval_us));
}

static void reconciler_loop(runner_thread *t)
{
    og_payout_runner *r = t->r;

    do {
        og_payout_reconcile_stats st;
        int rc = og_payout_reconcile_once(r->s, &r->cfg.reconcile, &st);

        pthread_mutex_lock(&r->mu);
        if (rc != 0) {
            r->counts.pass_errors++;
        } else {
            og_payout_reconcile_stats *a = &r->counts.reconcile;
            a->scanned += st.scanned;
            a->looked_up += st.looked_up;
            a->succeeded += st.succeeded;
            a->failed += st.failed;
            a->not_applied += st.not_applied;
            a->escalated += st.escalated;
            a->later += st.later;
            a->returned += st.returned;
            a->errors += st.errors;
        }
        pthread_mutex_unlock(&r->mu);
    } while (!wait_or_stop(r, r->cfg.interval_us));
}

static void janitor_loop(runner_thread *t)
{
    og_payout_runner *r = t->r;

    do {
        og_payout_expiry_stats st;
        int rc = og_payout_expire_grants(r->s, r->cfg.janitor_batch,
                                         r->cfg.janitor_max_batches, &st);

        pthread_mutex_lock(&r->mu);
        if (rc != 0)
            r->counts.pass_errors++;
        else
            r->counts.expired_grants += st.grants;
        pthread_mutex_unlock(&r->mu);
    } while (!wait_or_stop(r, r->cfg.interval_us));
}

static void *thread_main(void *arg)
{
    runner_thread *t = arg;

    switch (t->kind) {
    case T_WORKER: worker_loop(t); break;
    case T_SWEEPER: sweeper_loop(t); break;
    case T_RECONCILER: reconciler_loop(t); break;
    case T_JANITOR: janitor_loop(t); break;
    }
    return NULL;
}

static int cfg_check(const og_payout_runner_cfg *c)
{
    if (!c || c->workers < 0 || c->workers > WORKERS_MAX ||
        c->idle_wait_us < MS || c->idle_wait_us > 60 * SEC ||
        c->interval_us < MS || c->interval_us > 3600 * SEC)
        return OG_EINVAL;
    if (c->workers > 0 &&
        (!c->worker.worker_id || strlen(c->worker.worker_id) + 4 > OG_ID_MAX))
        return OG_EINVAL;
    if (c->sweeper && (!c->sweeper_actor || !og_id_valid(c->sweeper_actor) ||
                       c->sweep_limit < 1 || c->sweep_limit > 1000))
        return OG_EINVAL;
    if (c->janitor &&
        (c->janitor_batch < 1 || c->janitor_batch > OG_RETENTION_BATCH_MAX ||
         c->janitor_max_batches < 1 ||
         c->janitor_max_batches > OG_RETENTION_BATCHES_MAX))
        return OG_EINVAL;
    return 0;
}

static int spawn(og_payout_runner *r, thread_kind kind, int index)
{
    runner_thread *t = &r->threads[r->n_threads];

    t->r = r;
    t->kind = kind;
    t->index = index;
    if (pthread_create(&t->thread, NULL, thread_main, t) != 0)
        return OG_EINTERNAL;
    t->running = true;
    r->n_threads++;
    return 0;
}

int og_payout_runner_start(og_store *s, const og_payout_runner_cfg *c,
                           og_payout_runner **out)
{
    og_payout_runner *r;
    int rc = 0;

    if (!s || !out || cfg_check(c) != 0)
        return OG_EINVAL;
    r = calloc(1, sizeof *r);
    if (!r)
        return OG_ENOMEM;
    r->s = s;
    r->cfg = *c;
    for (int i = 0; i < c->workers; i++) {
        r->wcfg[i] = c->worker;
        if (c->workers > 1) {
            snprintf(r->worker_ids[i], sizeof r->worker_ids[i], "%s-%d",
                     c->worker.worker_id, i + 1);
            r->wcfg[i].worker_id = r->worker_ids[i];
        }
    }
    /* Every configuration is checked before a thread starts. */
    for (int i = 0; i < c->workers; i++)
        if (og__payout_worker_cfg_check(&r->wcfg[i]) != 0) {
            free(r);
            return OG_EINVAL;
        }
    if (c->reconciler && og__payout_reconciler_cfg_check(&c->reconcile) != 0) {
        free(r);
        return OG_EINVAL;
    }
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    for (int i = 0; i < c->workers && rc == 0; i++)
        rc = spawn(r, T_WORKER, i);
    if (rc == 0 && c->sweeper)
        rc = spawn(r, T_SWEEPER, 0);
    if (rc == 0 && c->reconciler)
        rc = spawn(r, T_RECONCILER, 0);
    if (rc == 0 && c->janitor)
        rc = spawn(r, T_JANITOR, 0);
    if (rc != 0) {
        og_payout_runner_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void og_payout_runner_counts_get(og_payout_runner *r,
                                 og_payout_runner_counts *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->counts;
    pthread_mutex_unlock(&r->mu);
}

int og_payout_runner_idle(og_payout_runner *r)
{
    og_op_filter f;
    og_op_list l = {0};
    bool workers_idle = true;
    int rc;

    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->cfg.workers; i++)
        workers_idle = workers_idle && r->worker_idle[i];
    pthread_mutex_unlock(&r->mu);
    if (!workers_idle)
        return 0;
    memset(&f, 0, sizeof f);
    f.statuses = OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED) |
                 OG_OP_BIT(OG_OP_UNKNOWN);
    f.limit = 1;
    f.kinds = OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT);
    if ((rc = og_op_scan(r->s, &f, &l)) != 0)
        return rc;
    rc = l.n == 0 ? 1 : 0;
    og_op_list_free(&l);
    if (rc == 1) {
        pthread_mutex_lock(&r->mu);
        r->counts.idle_passes++;
        pthread_mutex_unlock(&r->mu);
    }
    return rc;
}

void og_payout_runner_stop(og_payout_runner *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; i < r->n_threads; i++)
        if (r->threads[i].running) {
            pthread_join(r->threads[i].thread, NULL);
            r->threads[i].running = false;
        }
}

void og_payout_runner_free(og_payout_runner *r)
{
    if (!r)
        return;
    og_payout_runner_stop(r);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
