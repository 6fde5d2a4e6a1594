/*
 * batcher.h — the waiter queue of group commit, shared by the backends
 * (lib/store/batcher.c, GQ1-GQ5): callers of one store object queue their
 * rows, and one of them, the leader, hands everything queued to the
 * backend's run function as ONE batch. What a batch is (one transaction,
 * one statement) is the backend's; the queue only decides who leads, what
 * goes together and when a caller gives up.
 */
#ifndef OG_STORE_BATCHER_H
#define OG_STORE_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "oncegate/store.h"

/* The most rows one batch may hold. */
#define OG__BATCH_ROWS_MAX OG_ADMIT_BATCH_MAX

typedef struct og__batcher og__batcher;

typedef struct og__batch_ops {
    /* Runs rows[0..n) (1..max_rows) as one batch, bounded by deadline_us
     * (CLOCK_MONOTONIC µs): writes each row's answer into the row and its
     * return code into rcs[i] (0, or a negative error for that row alone).
     * The backend counts its own batches, rows and fallbacks. Called
     * without the queue's lock; at most in_flight calls at once. */
    void (*run)(void *ctx, void *const *rows, int n, int64_t deadline_us,
                int *rcs);
    /* Whether row may not join rows[0..n) (GQ2); NULL: every row may.
     * Called with the queue's lock held. */
    bool (*conflicts)(void *ctx, void *const *rows, int n, const void *row);
    /* max_rows = 1 still queues, one batch at a time, instead of running
     * every caller at once (GQ5): SQLite's admissions, one writer. */
    bool queue_lone;
} og__batch_ops;

/* A new queue for ops over ctx: at most in_flight batches at once (1..),
 * at most max_rows rows each (1..OG__BATCH_ROWS_MAX; 1 turns the queue
 * off: every caller runs its row alone at once, GQ5). NULL when memory
 * runs out. ops and ctx are borrowed and must outlive the queue. */
og__batcher *og__batcher_new(const og__batch_ops *ops, void *ctx,
                             int in_flight, int max_rows);
/* Frees b (NULL: nothing). No caller may still be in it. */
void og__batcher_free(og__batcher *b);

/* Queues row and waits for its batch (GQ1-GQ4): the row's rc from run, or
 * OG_ESTORE_UNAVAILABLE when deadline_us passes while it is still queued
 * (nothing of it ran; GQ3). */
int og__batcher_submit(og__batcher *b, void *row, int64_t deadline_us);

/* Runs rows[0..n) as one batch of their own, bypassing the queue but
 * counted with it, once fewer than in_flight batches run (tests build a
 * batch exactly so). rcs[i] as run's. 0, or OG_EINVAL for n out of
 * 1..OG__BATCH_ROWS_MAX. */
int og__batcher_direct(og__batcher *b, void *const *rows, int n,
                       int64_t deadline_us, int *rcs);

#endif
