/*
 * pool.c — a bounded connection pool shared by the backends.
 *
 * Invariants:
 *   PL1 A connection is used by one thread at a time: it is either in idle[]
 *       or held by exactly one caller.
 *   PL2 open_count never exceeds max; a caller beyond it waits.
 *   PL3 A connection put back as broken is closed, never reused: its state
 *       (in a transaction? mid-statement?) is unknown.
 *   PL4 Connecting happens outside the mutex, so a slow or unreachable store
 *       does not serialize callers that could use an idle connection.
 *   PL5 Waiting for a connection is bounded (the store timeout): a caller
 *       never waits unboundedly behind others, it reports "unavailable".
 *   PL6 An idle connection the peer has closed (a server restart, a
 *       failover, an outage that cut the sockets) is never handed out: the
 *       alive check closes it at checkout, so an outage costs the requests
 *       made during it, not one more failure per pooled connection after.
 */
#include <stdlib.h>
#include <time.h>

#include "store/store_int.h"

struct og__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const og__pool_ops *ops;
    void *ctx;
    int max;
    int64_t wait_us;
    int open_count; /* idle + held + being connected */
    int idle_count;
    void **idle;
};

og__pool *og__pool_new(const og__pool_ops *ops, void *ctx, int max,
                       int64_t wait_us)
{
    pthread_condattr_t ca;
    og__pool *p;

    if (max < 1)
        max = 1;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->idle = calloc((size_t)max, sizeof *p->idle);
    if (!p->idle) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    p->ops = ops;
    p->ctx = ctx;
    p->max = max;
    p->wait_us = wait_us;
    return p;
}

void og__pool_free(og__pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->idle_count; i++)
        p->ops->disconnect(p->ctx, p->idle[i]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->idle);
    free(p);
}

int og__pool_get(og__pool *p, void **conn)
{
    void *c = NULL;
    int rc;

    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(p->wait_us / 1000000);
    until.tv_nsec += (long)(p->wait_us % 1000000) * 1000;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
again:
    while (p->idle_count == 0 && p->open_count >= p->max) { /* PL2 */
        if (pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0 &&
            p->idle_count == 0 && p->open_count >= p->max) {
            pthread_mutex_unlock(&p->mu); /* PL5 */
            return OG_ESTORE_UNAVAILABLE;
        }
    }
    if (p->idle_count > 0) {
        /* LIFO: the most recently used connection is the likeliest alive. */
        c = p->idle[--p->idle_count];
        pthread_mutex_unlock(&p->mu);
        if (p->ops->alive && !p->ops->alive(p->ctx, c)) { /* PL6 */
            p->ops->disconnect(p->ctx, c);
            pthread_mutex_lock(&p->mu);
            p->open_count--;
            goto again;
        }
        *conn = c;
        return 0;
    }
    p->open_count++; /* reserve the slot, then connect unlocked (PL4) */
    pthread_mutex_unlock(&p->mu);

    rc = p->ops->connect(p->ctx, &c);
    if (rc < 0) {
        pthread_mutex_lock(&p->mu);
        p->open_count--;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    *conn = c;
    return 0;
}

void og__pool_put(og__pool *p, void *conn, bool broken)
{
    if (broken) { /* PL3 */
        p->ops->disconnect(p->ctx, conn);
        pthread_mutex_lock(&p->mu);
        p->open_count--;
    } else {
        pthread_mutex_lock(&p->mu);
        p->idle[p->idle_count++] = conn;
    }
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
