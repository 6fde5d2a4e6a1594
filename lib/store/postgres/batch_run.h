/*
 * batch_run.h — one PostgreSQL group commit, whatever its rows
 * (lib/store/postgres/batch_run.c, BR1-BR6): a kind of row (admissions,
 * consume verdicts, outcome writes, ...) describes its one-row statement,
 * how a batch of its rows binds ONE statement and how each result row
 * answers its request; batch_run.c queues its rows on the shared waiter
 * queue (lib/store/batcher.c, GQ1-GQ5), runs each batch, falls back to the
 * one-row statement when the statement aborted, answers every row
 * unavailable when the commit is unconfirmed, and counts the batches.
 *
 * A new kind (a file X_batch.c beside admit_batch.c) writes a row type of
 * its own (the request and where its answer goes), the callbacks below,
 * one const og__pg_batch_kind, an og__pg_X_open() that calls
 * og__pg_batch_new() from pg_open (conn.c), and its store methods over
 * og__pg_batch_submit(), og__pg_batch_direct() and og__pg_batch_stats().
 */
#ifndef OG_STORE_PG_BATCH_RUN_H
#define OG_STORE_PG_BATCH_RUN_H

#include "internal.h"
#include "store/batcher.h"

/* A text[] literal being built (og__pg_batch_kind.bind): the
 * parameters of a batched statement, one element per row. */
typedef struct og__pg_buf {
    char *p;
    size_t len, cap;
    bool oom;
} og__pg_buf;
/* Appends n bytes of s (oom set on failure: checked once at the end). */
void og__pg_buf_put(og__pg_buf *b, const char *s, size_t n);
/* Element i of an array literal: v double-quoted with '"' and '\'
 * escaped, or (v NULL) the NULL element; "}" ends it. */
void og__pg_buf_elem(og__pg_buf *b, int i, const char *v);

/* Ends arr[0..count): "}" after each literal; 0, or OG_ENOMEM when any
 * ran out of memory. */
int og__pg_bufs_end(og__pg_buf *arr, int count);

/* The most text[] literals and parameters a batched statement binds. */
#define OG__PG_BATCH_ARRAYS 12
#define OG__PG_BATCH_PARAMS 16

/* A batch's statement as bound (og__pg_batch_kind.bind): arr holds the
 * text[] literals (zeroed before bind, freed after the statement), params
 * the statement's parameters (pointing into arr, at pg's strings or at
 * literals), stmt the statement. */
typedef struct og__pg_batch_args {
    og__pg_buf arr[OG__PG_BATCH_ARRAYS];
    const char *params[OG__PG_BATCH_PARAMS];
    const og__pg_stmt *stmt;
} og__pg_batch_args;

typedef struct og__pg_batch_kind {
    /* The one-row statement of row on a connection of its own, before
     * deadline_us: a batch of one, and each row of a fallback (BR1, BR2).
     * Writes row's answer into row; returns its return code. */
    int (*one)(og__pg_store *pg, void *row, int64_t deadline_us);
    /* Binds rows[0..n) (n >= 2) into *a: one element per row in each
     * array (og__pg_buf_elem, then og__pg_bufs_end), the parameters, the
     * statement. 0, or an error: the statement does not run and the round
     * falls back (BR2). */
    int (*bind)(og__pg_store *pg, void *const *rows, int n,
                og__pg_batch_args *a);
    /* Result row i of res (its column 0 the ordinality of row, BR4)
     * answers row: its answer into row, its return code into *rc (a
     * failure of that row alone). Returns nonzero when res and the
     * statement disagree: every row of the batch then answers
     * OG_EINTERNAL. c is the statement's connection, idle again (a
     * follow-up read may use it). */
    int (*answer)(og__pg_store *pg, og__pg_conn *c, const PGresult *res,
                  int i, void *row, int *rc);
    /* NULL, or run once every row answered, on the same connection: what
     * the statement's rows need after it (the consume verdict's read
     * fence, CB5), which may set rcs[i] of the rows it concerns. */
    void (*finish)(og__pg_store *pg, og__pg_conn *c, void *const *rows,
                   int n, int *rcs);
    /* NULL, or clears row's answer: before the statement binds, and when
     * every row answers an error (BR3, BR4). */
    void (*clear)(void *row);
    /* Whether row may not join rows[0..n) (GQ2: the kind's rule that rows
     * of one batch never meet); NULL: every row may. */
    bool (*conflicts)(void *const *rows, int n, const void *row);
    /* The result's columns, the ordinality first (BR4). */
    int ncols;
    /* Fault points (lib/core/fault.c), NULL for none: the statement counts
     * as aborted before it runs (BR2); committed, the acknowledgment lost
     * (BR3). */
    const char *abort_fault;
    const char *ack_lost_fault;
} og__pg_batch_kind;

/* One store object's group commit of one kind (batch_run.c). */
typedef struct og__pg_batch og__pg_batch;

/* A group commit of kind for pg into *out: at most in_flight batches at
 * once, at most max_rows rows each (1 is no queue: every row its one-row
 * statement at once, GQ5). 0, or OG_ENOMEM (*out untouched). kind must
 * outlive it. */
int og__pg_batch_new(og__pg_store *pg, const og__pg_batch_kind *kind,
                     int in_flight, int max_rows, og__pg_batch **out);
/* Frees b (NULL: nothing). No caller may still be in it. */
void og__pg_batch_free(og__pg_batch *b);
/* Queues row and waits for its batch, bounded by the store timeout from
 * now (GQ1-GQ4): row's return code, its answer in row when 0. */
int og__pg_batch_submit(og__pg_batch *b, void *row);
/* Runs rows[0..n) (1..OG__BATCH_ROWS_MAX, the kind's conflicts holding)
 * as ONE batch bypassing the queue but counted with it: the test hooks.
 * rcs[i] as submit's. 0, or OG_EINVAL. */
int og__pg_batch_direct(og__pg_batch *b, void *const *rows, int n, int *rcs);
/* b's counters (og_store_admit_stats and its siblings, /metrics). */
void og__pg_batch_stats(og__pg_batch *b, og_admit_stats *out);

#endif
