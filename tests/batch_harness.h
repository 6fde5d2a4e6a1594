/*
 * batch_harness.h — what the group-commit tests share (tests/batch.c,
 * consume_batch.c, outcome_batch.c, rotate_batch.c): their store objects,
 * the mixed batch against the one-row path, the race of two store objects,
 * the queue of many callers, the counters of two store objects' batches,
 * and the kill -9 of a child in the middle of its batches (docs/design.md,
 * the batch sections).
 */
#ifndef OG_TEST_BATCH_HARNESS_H
#define OG_TEST_BATCH_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* The options of a batch test's store object: the defaults in the suite's
 * keys, pool connections, and a 30 s store timeout (the tests are about
 * atomicity, not latency). The caller then sets its batch maximum. */
/* Records c's issuance by issuer in the suite's form (t_issue records the
 * row form only; a token-form family exists once a grant is issued into
 * it), asserting it is recorded. */
void t_batch_issue(og_store *s, const char *issuer, const t_case *c);
/* A fresh family name, "fam-" and 12 characters of a UUID, into out[n]. */
void t_batch_family(char *out, size_t n);
void t_batch_options(og_store_options *o, int pool);
/* A store object on the suite's store opened with o; aborts on failure. */
og_store *t_batch_store(const og_store_options *o);

/* The mixed batch of a group commit, described by a test file: a mix is
 * the state of every case a batch meets (size bytes, rows cases, at most
 * 64), init builds it on a store object. The batch's mix is built on a
 * store object store(64, 4), a twin alike on one store(1, 2) (the one-row
 * path); batch runs the whole mix as ONE batch on s (its answers kept in
 * the mix, each row's rc in rcs); row compares row i's answer with what
 * it expects and with the twin's through the one-row path on one; after
 * checks what the batch left. abort_fault is the fault point that stands
 * for a row that aborts the batch's statement. */
typedef struct t_mix_def {
    size_t size;
    int rows;
    og_store *(*store)(int batch_max, int pool);
    void (*stats)(og_store *s, og_admit_stats *out); /* the kind's counters */
    void (*init)(og_store *s, void *mix);
    int (*batch)(og_store *s, void *mix, int *rcs);
    void (*row)(void *mix, og_store *one, void *twin, int i);
    void (*after)(og_store *s, void *mix, void *twin);
    const char *abort_fault;
} t_mix_def;
/* The mix as cmocka cases, *state its t_mix_def. Untouched, the batch
 * answers every row as the one-row path and takes no fallback: ONE
 * statement. With abort_fault set, PostgreSQL's statement aborts whole and
 * the batch falls back once, row by row, every row still answering as
 * alone; SQLite's savepoints keep a row's error to its row, so it never
 * falls back. The second skips when the fault points are not compiled in
 * (-Dfault_injection=true). */
void t_mix_takes_no_fallback(void **state);
void t_mix_falls_back_once(void **state);

/* A race of two store objects, described by a group-commit test file:
 * on a zeroed context of size bytes, init(ctx); then racers 0 and 1 at
 * once, each on a store object of its own (store(64, 2): batches of up to
 * 64), run(ctx, who, s); then check(ctx). */
typedef struct t_race_def {
    size_t size;
    og_store *(*store)(int batch_max, int pool);
    void (*init)(void *ctx);
    void (*run)(void *ctx, int who, og_store *s);
    void (*check)(const void *ctx);
} t_race_def;
/* The race as cmocka cases, *state its t_race_def (a CMUnitTest's
 * initial_state): the racers in two threads of this process
 * (t_race_threads), or in two forked children (t_race_processes). */
void t_race_in_threads(void **state);
void t_race_in_processes(void **state);
/* The start line of one round of a race: counts this racer in at *arrived
 * and returns once both racers did. */
void t_race_start(volatile int *arrived);

/* The queue of a group commit, described by a test file: callers (at
 * most 64) at once, alternately on two store objects store(batch_max, 4),
 * each presenting every one of items (at most 64) in an order of its own,
 * on a zeroed context of size bytes whose items init made (on the first
 * store object). call(ctx, s, i) presents item i on s: 1 it won the item,
 * 0 it was told another caller had, -1 anything else. */
typedef struct t_queue_def {
    size_t size;
    int callers, items;
    og_store *(*store)(int batch_max, int pool);
    void (*stats)(og_store *s, og_admit_stats *out); /* the kind's counters */
    void (*init)(void *ctx, og_store *s);
    int (*call)(void *ctx, og_store *s, int i);
    void (*check)(void *ctx, t_raw *raw, int i); /* item i's rows */
} t_queue_def;
/* The queue as a cmocka case, *state its t_queue_def, in batches of up to
 * 64 and then of one: every call answered, each item won by exactly one
 * caller, check of each item, and each call counted in exactly one batch
 * of its store object (t_assert_batch_stats). */
void t_queue_in_batches_and_alone(void **state);

/* The counters of two store objects' batches after rows rows between them
 * (st[0], st[1] as og_store_*_stats filled them): each row counted in
 * exactly one batch, no batch fell back, and with batch_max 1 one batch a
 * row. */
void t_assert_batch_stats(const og_admit_stats st[2], uint64_t rows,
                          int batch_max);

/* size zeroed bytes of MAP_SHARED memory (what a forked child writes
 * there reaches the parent); aborts the test when none. munmap frees it. */
void *t_shared_zeroed(size_t size);

/* The body of a child to be killed: on s, batch(ctx, s, base) for base
 * 0, rows, 2 rows... while a whole batch of rows fits in n — each runs
 * items base..base+rows-1 as ONE batch and records what each row was told
 * — counting every batch done in *batches. Never returns: _exit(0) once
 * all are done, _exit(3) when a batch fails. */
void t_batches_until_killed(og_store *s, int n, int rows,
                            int (*batch)(void *ctx, og_store *s, int base),
                            void *ctx, volatile int *batches);

/* Forks a child that runs child(ctx) (which ends with _exit), waits until
 * *progress reaches at_least (failing the test if the child ended first),
 * lets it run pause_us longer — somewhere in a batch — and kills it with
 * SIGKILL; asserts it died of it. ctx lives in MAP_SHARED memory. */
void t_kill_midway(void (*child)(void *ctx), void *ctx,
                   volatile int *progress, int at_least, unsigned pause_us);

#endif
