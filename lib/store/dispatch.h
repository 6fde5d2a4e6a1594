/*
 * dispatch.h — what the store's files above the backends share: the store
 * object and the input checks more than one of them runs. Private to
 * lib/store/: store.c, grants.c, exec.c, retention.c, redeem.c, payout.c,
 * payout_run.c and payout_after.c include it; a backend never sees the
 * store object, only its own impl.
 *
 * The dispatch's invariants, one list for all of those files (each names
 * the ones it carries); what the backends' methods guarantee under them is
 * the method contract, M1-M36 (store_int.h):
 *   S1  A backend never sees raw input: every entry point checks each
 *       argument and builds a canonical, validated request first
 *       (og__admit_req, og__issuance_req, og__payout_*_req, ...); bad input
 *       returns its own error code with nothing written.
 *   S2  A store whose schema version differs from OG_SCHEMA_VERSION is not
 *       opened (store.c): running an admission against a schema this build
 *       does not know could silently drop a guarantee (a missing unique
 *       key).
 *   S3  og_admit never retries (store.c): an unavailable store is reported
 *       to the caller, whose retry with the same operation id finds out
 *       what happened.
 *   S4  Retention runs in bounded batches (retention.c; the payout grants'
 *       expiry in payout_run.c the same way): every batch takes at most
 *       `batch` rows in its own transaction, and the loop stops at the first
 *       batch that took fewer or after max_batches, so neither job holds
 *       admissions behind one long delete nor runs unbounded. A backend that
 *       reports more than `batch` rows is a defect (OG_EINTERNAL). Each call
 *       starts its keyset cursor afresh, so a row an earlier call's cursor
 *       passed is looked at again.
 *   S5  The consumption keys (readable or hashed) are the store's (store.c),
 *       recorded by migration 5 and read on every open: two store objects —
 *       in one process or two — of one store run the same statements on the
 *       same keys. A caller that asks for the other mode is refused
 *       (OG_ESTORE_KEYS), at open and at migrate; nothing is converted once
 *       recorded. Retention (S4) runs on either: the backends' cleanup
 *       statements address rows by their key mode's primary key (SQLite) or
 *       by ctid (PostgreSQL).
 *   S6  The payout store's orchestrations are written here, once for both
 *       backends (payout.c: the context read and the decision; payout_run.c:
 *       the claim and the resolution; payout_after.c: late evidence and an
 *       operator's resolution): each is ONE transaction of the method
 *       table (txn_begin/txn_end, M28) — READ for the context read, WRITE
 *       for the others — running the backend's steps in one order: the
 *       facts, the pure plan (payout_plan.c), the writes, the fault point
 *       (OG__FAULT_*, store_int.h), then commit or roll back. Every decision
 *       commits, Allowed or not: it is history. Only CLAIMED and RESOLVED
 *       commit; every other claim outcome, NOT_RECORDED and NOT_ACTIVE roll
 *       back — the resolution's outcome write with them — and any error or
 *       fault point rolls back everything. Every other payout write is ONE
 *       backend write (M27) whose report payout_plan.c reads. Out-parameters
 *       are written only once the transaction committed.
 *   S7  A provider token reaches the store through og_payout_destination_put
 *       and leaves it through og_payout_destination_token only (payout.c);
 *       no other record, result or error carries it, the backends bind it
 *       without copying it, and every copy this layer or a backend makes is
 *       wiped.
 *   S8  A claim's inputs are checked before any I/O (payout_run.c); the
 *       attempt's id is fresh (og__uuid_new); a DUPLICATE's consuming
 *       attempt is read after the claim's transaction, from the store, for
 *       the caller's evidence.
 */
#ifndef OG_STORE_DISPATCH_H
#define OG_STORE_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
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

/* 1..max printable ASCII without spaces — a reason code, a provider
 * reference, an actor (exec.c). */
bool og__code_ok(const char *s, size_t max);

/* Evidence: 1..OG_EVIDENCE_MAX bytes of UTF-8 without control characters
 * other than newline and tab (exec.c). */
bool og__evidence_ok(const char *s);

/* og_op_record's input checks, shared with og_payout_resolve: 0, or the
 * error og_op_record returns for it (OG_ETRANSITION, OG_EREASON, ...)
 * (exec.c). */
int og__op_outcome_check(unsigned expected, int64_t expected_owner_version,
                         const og_op_outcome *o);

/* The resolution's steps in tx (payout_run.c; S6): the outcome's
 * conditional write (its event carrying source, NULL: none), then
 * og__payout_follow. *resolved: commit. */
int og__payout_resolve_in(og_store *s, void *tx, const char *id,
                          unsigned expected, int64_t owner_version,
                          const og_op_outcome *o, const char *source,
                          og_payout_resolution *out, bool *resolved);

/* What follows a recorded outcome o of payout attempt id in tx
 * (payout_run.c; S6): its binding and payout, the pure plan (PP5), for
 * RESOLVED the writes and the fault point; out->outcome RESOLVED or
 * NOT_ACTIVE. *resolved: commit. */
int og__payout_follow(og_store *s, void *tx, const char *id,
                      const og_op_outcome *o, og_payout_resolution *out,
                      bool *resolved);

/* Where a retention pass's keyset cursor starts: every time the store keeps
 * is at or after the epoch (S1 checks every time against OG__TIME_MIN_US;
 * the store's clock is past it). */
#define OG__RETENTION_FROM_US OG__TIME_MIN_US

/* The batch arguments of a retention pass (S4): 1..OG_RETENTION_BATCH_MAX
 * rows per batch, 1..OG_RETENTION_BATCHES_MAX batches (retention.c). */
bool og__batch_args_ok(int batch, int max_batches);

#endif /* OG_STORE_DISPATCH_H */
