/*
 * batcher.c — the waiter queue of group commit (batcher.h), one for every
 * backend and every kind of row that batches: what the PostgreSQL
 * admissions' queue (lib/store/postgres/admit_batch.c, B1, B2, B4) and
 * SQLite's (lib/store/sqlite/admit.c, G2, G3) each wrote for themselves.
 * SQLite's admissions and outcome writes (lib/store/sqlite/exec.c,
 * Q31-Q35) and PostgreSQL's admissions, consume verdicts and outcome
 * writes (lib/store/postgres/batch_run.c, one queue per kind and store
 * object, with B2's, CB2's and OB2's conflicts) queue here.
 *
 *  GQ1 Coalescing, never a timer. A caller leads when fewer than in_flight
 *      batches run, and takes EVERYTHING queued at that moment that GQ2
 *      admits, up to max_rows; the others wait on their own condition
 *      variable. A batch therefore closes when it is full or when nobody
 *      else is waiting, and a lone caller runs at once, as a batch of one:
 *      batching adds no latency to it.
 *  GQ2 Rows the backend says may not meet (ops.conflicts) never share a
 *      batch: such a row stays queued, in order, for a later one.
 *  GQ3 Deadlines: a caller whose deadline passes while it is still queued
 *      leaves with OG_ESTORE_UNAVAILABLE, nothing of it having run; a row
 *      taken into a batch waits for the batch's answer, which the backend
 *      bounds by the earliest deadline of its rows.
 *  GQ4 One answer per row, written by the leader into the waiter, which
 *      lives on its caller's stack until the caller sees done; a caller
 *      never reads another row's answer.
 *  GQ5 max_rows = 1 turns the queue off: every caller runs its row alone,
 *      at once, with no queue and no bound but the backend's own (its
 *      pool), as before group commit; each call counts as a batch of one.
 *      Unless the backend asks to queue lone rows (ops.queue_lone: SQLite's
 *      admissions, whose batches of one run one at a time, as they always
 *      did).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/batcher.h"
#include "store/store_int.h"

typedef struct og__bwaiter {
    void *row;
    int rc;
    int64_t deadline_us;
    bool taken; /* in a batch: its answer is coming */
    bool done;
    /* Its own condition variable (CLOCK_MONOTONIC): a finished batch wakes
     * its own callers and the one caller at the head of the queue, who may
     * lead next, rather than every waiting thread. */
    pthread_cond_t cv;
    struct og__bwaiter *next;
} og__bwaiter;

struct og__batcher {
    const og__batch_ops *ops;
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t idle;   /* a batch ended (og__batcher_direct waits) */
    pthread_condattr_t ca; /* CLOCK_MONOTONIC, for the waiters' */
    og__bwaiter *head, *tail;
    int running;   /* batches in flight */
    int in_flight; /* at most this many */
    int max_rows;  /* rows per batch */
};

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct timespec abs_mono(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    return ts;
}

og__batcher *og__batcher_new(const og__batch_ops *ops, void *ctx,
                             int in_flight, int max_rows)
{
    og__batcher *b = calloc(1, sizeof *b);

    if (b == NULL)
        return NULL;
    b->ops = ops;
    b->ctx = ctx;
    b->in_flight = in_flight < 1 ? 1 : in_flight;
    b->max_rows = max_rows < 1                    ? 1
                  : max_rows > OG__BATCH_ROWS_MAX ? OG__BATCH_ROWS_MAX
                                                  : max_rows;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_init(&b->ca);
    pthread_condattr_setclock(&b->ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->idle, &b->ca);
    return b;
}

void og__batcher_free(og__batcher *b)
{
    if (b == NULL)
        return;
    pthread_cond_destroy(&b->idle);
    pthread_condattr_destroy(&b->ca);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Takes a batch off the queue (with mu): in order, every waiter GQ2 admits,
 * up to max_rows; a waiter past its deadline leaves with
 * OG_ESTORE_UNAVAILABLE, nothing of it run (GQ3). */
static int take(og__batcher *b, og__bwaiter **batch, void **rows, int64_t now)
{
    og__bwaiter **pp = &b->head, *prev = NULL;
    int n = 0;

    while (*pp != NULL && n < b->max_rows) {
        og__bwaiter *w = *pp;
        bool expired = now >= w->deadline_us;

        if (!expired && n > 0 && b->ops->conflicts &&
            b->ops->conflicts(b->ctx, (void *const *)rows, n, w->row)) {
            prev = w; /* GQ2: stays queued, in order */
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        if (b->tail == w)
            b->tail = prev;
        w->next = NULL;
        if (expired) {
            w->rc = OG_ESTORE_UNAVAILABLE;
            w->done = true;
            pthread_cond_signal(&w->cv);
            continue;
        }
        w->taken = true;
        rows[n] = w->row;
        batch[n++] = w;
    }
    return n;
}

static void unqueue(og__batcher *b, og__bwaiter *w)
{
    og__bwaiter **pp = &b->head, *prev = NULL;

    while (*pp != NULL && *pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp != NULL) {
        *pp = w->next;
        if (b->tail == w)
            b->tail = prev;
    }
}

/* Wakes the caller at the head of the queue when a batch may start (with
 * mu): it leads next (GQ1). */
static void wake_head(og__batcher *b)
{
    if (b->head != NULL && b->running < b->in_flight)
        pthread_cond_signal(&b->head->cv);
}

/* A batch ended: the next one may start (with mu). */
static void batch_end(og__batcher *b)
{
    b->running--;
    pthread_cond_broadcast(&b->idle);
    wake_head(b);
}

/* Leads one batch (with mu, released while it runs; GQ4). */
static void lead(og__batcher *b)
{
    og__bwaiter *batch[OG__BATCH_ROWS_MAX];
    void *rows[OG__BATCH_ROWS_MAX];
    int rcs[OG__BATCH_ROWS_MAX];
    int64_t deadline;
    int n, i;

    n = take(b, batch, rows, mono_us());
    if (n == 0)
        return;
    b->running++;
    wake_head(b); /* another batch may start beside this one */
    pthread_mutex_unlock(&b->mu);

    deadline = batch[0]->deadline_us;
    for (i = 1; i < n; i++)
        if (batch[i]->deadline_us < deadline)
            deadline = batch[i]->deadline_us;
    b->ops->run(b->ctx, rows, n, deadline, rcs);

    pthread_mutex_lock(&b->mu);
    for (i = 0; i < n; i++) {
        batch[i]->rc = rcs[i];
        batch[i]->done = true;
        pthread_cond_signal(&batch[i]->cv);
    }
    batch_end(b);
}

int og__batcher_submit(og__batcher *b, void *row, int64_t deadline_us)
{
    og__bwaiter w = {.row = row, .deadline_us = deadline_us};

    if (b->max_rows == 1 && !b->ops->queue_lone) { /* GQ5: no queue */
        int rc;

        b->ops->run(b->ctx, &row, 1, deadline_us, &rc);
        return rc;
    }
    pthread_cond_init(&w.cv, &b->ca);
    pthread_mutex_lock(&b->mu);
    if (b->tail != NULL)
        b->tail->next = &w;
    else
        b->head = &w;
    b->tail = &w;
    while (!w.done) {
        if (!w.taken && b->running < b->in_flight) {
            lead(b); /* GQ1: everything queued now */
            continue;
        }
        if (w.taken) {
            pthread_cond_wait(&w.cv, &b->mu);
            continue;
        }
        if (mono_us() >= w.deadline_us) {
            unqueue(b, &w); /* GQ3: never ran */
            w.rc = OG_ESTORE_UNAVAILABLE;
            wake_head(b); /* it may have been woken to lead */
            break;
        }
        struct timespec until = abs_mono(w.deadline_us);
        pthread_cond_timedwait(&w.cv, &b->mu, &until);
    }
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&w.cv);
    return w.rc;
}

int og__batcher_direct(og__batcher *b, void *const *rows, int n,
                       int64_t deadline_us, int *rcs)
{
    if (n < 1 || n > OG__BATCH_ROWS_MAX)
        return OG_EINVAL;
    pthread_mutex_lock(&b->mu);
    while (b->running >= b->in_flight)
        pthread_cond_wait(&b->idle, &b->mu);
    b->running++;
    pthread_mutex_unlock(&b->mu);
    b->ops->run(b->ctx, rows, n, deadline_us, rcs);
    pthread_mutex_lock(&b->mu);
    batch_end(b);
    pthread_mutex_unlock(&b->mu);
    return 0;
}
