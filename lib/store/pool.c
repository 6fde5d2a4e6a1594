/*
 * pool.c — a bounded connection pool shared by the backends.
 *
 * Invariants:
 *   P1  A connection is used by one thread at a time: it is either in idle[]
 *       or held by exactly one caller.
 *   P2  open_count never exceeds max; a caller beyond it waits.
 *   P3  A connection put back as broken is closed, never reused: its state
 *       (in a transaction? mid-statement?) is unknown.
 *   P4  Connecting happens outside the mutex, so a slow or unreachable store
 *       does not serialize callers that could use an idle connection.
 */
#include <stdlib.h>

#include "og_internal.h"

struct og__pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const og__pool_ops *ops;
    void *ctx;
    int max;
    int open_count; /* idle + held + being connected */
    int idle_count;
    void **idle;
};

og__pool *og__pool_new(const og__pool_ops *ops, void *ctx, int max)
{
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
    pthread_cond_init(&p->cv, NULL);
    p->ops = ops;
    p->ctx = ctx;
    p->max = max;
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

    pthread_mutex_lock(&p->mu);
    while (p->idle_count == 0 && p->open_count >= p->max) /* P2 */
        pthread_cond_wait(&p->cv, &p->mu);
    if (p->idle_count > 0) {
        /* LIFO: the most recently used connection is the likeliest alive. */
        c = p->idle[--p->idle_count];
        pthread_mutex_unlock(&p->mu);
        *conn = c;
        return 0;
    }
    p->open_count++; /* reserve the slot, then connect unlocked (P4) */
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
    if (broken) { /* P3 */
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
