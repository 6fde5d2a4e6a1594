/*
 * dispatch.h — what the store's files above the backends share: the store
 * object and the input checks more than one of them runs. Private to
 * lib/store/: store.c, grants.c, exec.c, retention.c, redeem.c, payout.c
 * and payout_run.c include it; a backend never sees the store object, only
 * its own impl.
 *
 * Invariants (each file states its own besides: S2, S3, S5 store.c; S4
 * retention.c; S6, S7 payout.c; S8 payout_run.c):
 *   S1  A backend never sees raw input: every entry point checks each
 *       argument and builds a canonical, validated request first
 *       (og__admit_req, og__issuance_req, og__payout_*_req, ...); bad input
 *       returns its own error code with nothing written.
 */
#ifndef OG_STORE_DISPATCH_H
#define OG_STORE_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store_int.h"

/* The store object og_store_open returns. */
struct og_store {
    const og__store_methods *m;
    void *impl;
    og_store_options opts;
    og_consumption_keys keys; /* S5 (store.c): as the store records them */
};

/* 0 when s is exactly 64 lower-case hex characters; else -1 (store.c). */
int og__hex64_check(const char *s);

/* Whether us is a time the store keeps: OG__TIME_MIN_US..OG__TIME_MAX_US
 * (store.c). */
bool og__time_ok(int64_t us);

/* Copies a checked id (og__id_check passed) into a fixed buffer
 * (store.c). */
void og__idcpy(char dst[OG_ID_MAX + 1], const char *src);

/* og_op_record's input checks, shared with og_payout_resolve: 0, or the
 * error og_op_record returns for it (OG_ETRANSITION, OG_EREASON, ...)
 * (exec.c). */
int og__op_outcome_check(unsigned expected, int64_t expected_owner_version,
                         const og_op_outcome *o);

/* Where a retention pass's keyset cursor starts: every time the store keeps
 * is at or after the epoch (S1: expires_at >= OG__TIME_MIN_US; the store's
 * clock). */
#define OG__RETENTION_FROM_US OG__TIME_MIN_US

/* The batch arguments of a retention pass (S4): 1..OG_RETENTION_BATCH_MAX
 * rows per batch, 1..OG_RETENTION_BATCHES_MAX batches (retention.c). */
bool og__batch_args_ok(int batch, int max_batches);

#endif /* OG_STORE_DISPATCH_H */
