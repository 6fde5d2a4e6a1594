/*
 * exec.h — the I/O that runs the decisions of oncegate/execute.h, once for
 * every owner of an operation (lib/exec/): one create and its record
 * (og_exec_drive), the admitting request's admit-then-drive
 * (og_exec_admit), and a recovery pass (og_recover_once). These log
 * nothing: they return what happened, and the caller logs identifiers and
 * counts. docs/design.md, "Execution: one owner at a time" and "The
 * executor's order", describes the protocol.
 *
 * Layer: exec (it uses the store and the provider client). Conventions as
 * in oncegate/core.h. Part of the public API.
 */
#ifndef ONCEGATE_EXEC_H
#define ONCEGATE_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "oncegate/execute.h"
#include "oncegate/grant.h"
#include "oncegate/provider.h"
#include "oncegate/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Driving an owned credit: one create and its record (lib/exec/execute.c).
 * ------------------------------------------------------------------------- */

/* Where a drive ended: X(NAME, name). The names are stable: the service
 * logs them as the request's "execution" field.
 *   MAY_SUBMIT_FAILED   og_op_may_submit failed: nothing sent (E1)
 *   MAY_SUBMIT_REFUSED  not this owner's to send now (another owner
 *                       version, past least(lease_until, submit_by), or
 *                       the status moved on): nothing sent (E1)
 *   NOT_SENT            the client refused the request before any I/O
 *   TRANSIENT           sent; a documented transient answer: nothing is
 *                       recorded, the operation stays as it was (E5)
 *   RECORD_FAILED       sent; the record's store call failed: whether it
 *                       was written is unknown
 *   RECORD_SUPERSEDED   sent; the conditional write changed nothing
 *                       (another owner moved on, or the status did)
 *   RECORDED            sent; the outcome is recorded (E2-E4) */
#define OG_EXEC_END_MAP(X)                                                     \
    X(MAY_SUBMIT_FAILED, "may_submit_failed")                                  \
    X(MAY_SUBMIT_REFUSED, "may_submit_refused")                                \
    X(NOT_SENT, "not_sent")                                                    \
    X(TRANSIENT, "transient")                                                  \
    X(RECORD_FAILED, "record_failed")                                          \
    X(RECORD_SUPERSEDED, "record_superseded")                                  \
    X(RECORDED, "recorded")

typedef enum og_exec_end {
#define OG__EXEC_END_ENUM(name, text) OG_EXEC_END_##name,
    OG_EXEC_END_MAP(OG__EXEC_END_ENUM)
#undef OG__EXEC_END_ENUM
} og_exec_end;

/* The end's name ("may_submit_failed", ..., "recorded"); "?" for a bad
 * value. */
const char *og_exec_end_name(og_exec_end e);

/* The store calls lib/exec makes for its caller. */
typedef enum og_exec_call {
    OG_EXEC_CALL_ADMIT,      /* og_admit */
    OG_EXEC_CALL_MAY_SUBMIT, /* og_op_may_submit */
    OG_EXEC_CALL_RECORD,     /* og_op_record */
} og_exec_call;

/* Told after each store call lib/exec makes, with its duration on the
 * monotonic clock and its result (0, or the negative error), for the
 * caller's latency metrics. Called on the calling thread, before the call
 * it observes returns; it must not call back into lib/exec. */
typedef struct og_exec_observer {
    void (*store_call)(void *arg, og_exec_call call, int64_t elapsed_us,
                       int rc);
    void *arg;
} og_exec_observer;

/* How the caller owns the operation it drives. Strings borrowed. */
typedef struct og_exec_drive_req {
    const char *actor;  /* who records, as the history shows it: "handler"
                           (the admitting request), "recovery" */
    unsigned expected;  /* the statuses the record expects, a set of
                           OG_OP_BIT(ADMITTED) and OG_OP_BIT(UNKNOWN): the
                           admitting request knows it Admitted, recovery
                           took over an Admitted or Unknown one */
    int64_t timeout_us; /* the provider call's own timeout
                           (timings.provider_timeout), never a caller's
                           request's */
    const og_exec_observer *observe; /* NULL: nobody times the store */
} og_exec_drive_req;

/* What a drive did. Plain data the caller owns. */
typedef struct og_exec_run {
    og_exec_end end;
    int error;          /* MAY_SUBMIT_FAILED, RECORD_FAILED: the store's
                           error; NOT_SENT: the client's; else 0 */
    bool sent;          /* a create request was attempted: TRANSIENT,
                           RECORD_FAILED, RECORD_SUPERSEDED, RECORDED */
    og_provider_outcome answer; /* when sent: its classified answer (class,
                                   reason, reference); zeroed otherwise */
    og_operation op;    /* the record as this owner leaves it: when
                           RECORDED, status, reason and provider_reference
                           are the recorded ones; otherwise as given */
} og_exec_run;

/* The local clock E6 measures on, in microseconds: one that counts the
 * time the system was suspended (CLOCK_BOOTTIME). */
int64_t og_exec_clock_us(void);

/* Drives the credit op, owned by the caller at op->owner_version, through
 * ONE create and its record: og_op_may_submit (E1) -> the create call
 * (og_provider_create_credit: key and reference the operation id, the
 * record's account, amount and currency, expires_at = the record's
 * submit_by, q->timeout_us) -> og_exec_after_create (E2-E5) -> when it
 * decides RECORD, og_op_record expecting q->expected at op->owner_version,
 * by q->actor. Nothing is retried: not the create (whatever it answered),
 * not the record (an error after the create leaves the effect to
 * recovery's lookup under the same key). Every end is an outcome the caller
 * handles (what the request answers, what recovery counts): MaySubmit's
 * refusal in particular is left to the caller — the admitting request
 * leaves the operation to recovery, recovery records NeedsReconciliation.
 * The two callers' differences, end by end, are tabled at the definition
 * (lib/exec/execute.c).
 *
 * Returns 0 and *out for every end, or OG_EINVAL before any I/O: an
 * argument NULL, q->actor NULL, q->timeout_us <= 0, q->expected empty or
 * with another status, or op not a credit (a payout attempt is sent by its
 * worker only after og_op_start, docs/payouts.md P1). Thread-safe as the
 * store and the client are. */
OG_MUST_CHECK int og_exec_drive(og_store *s, og_provider *p,
                                const og_operation *op,
                                const og_exec_drive_req *q, og_exec_run *out);

/* The request that presents a verified grant for an operation. Strings
 * borrowed. */
typedef struct og_exec_admit_req {
    const og_validated_grant *grant; /* og_grant_verify()'s for the caller
                                        and the request's parameters:
                                        everything admitted comes from it
                                        (og_validated_grant_admission) */
    const char *operation_id;        /* canonical (og_operation_id_canonical) */
    og_grant_form form;              /* the store's grant form */
    const char *actor;               /* with a provider: who records the
                                        create's outcome ("handler") */
    int64_t timeout_us;              /* with a provider: the provider call's
                                        own timeout */
    const og_exec_observer *observe; /* NULL: nobody times the store */
} og_exec_admit_req;

/* What the admission and, when it ran, the drive did. */
typedef struct og_exec_admitted {
    og_admission admission; /* og_admit's outcome and record */
    bool driven;            /* ADMITTED with a provider: run says what
                               became of its one create */
    og_exec_run run;        /* when driven; zeroed otherwise */
} og_exec_admitted;

/* Admits q->grant for q->operation_id with og_admit (ONE write) and, when
 * THIS call admitted it and p is not NULL, drives it at once as its owner
 * at version 1: og_exec_drive() expecting Admitted, by q->actor — except
 * that the admission itself answers MaySubmit while the time since it was
 * sent, plus the store's lease_margin + max_clock_step, is inside its lease
 * and submission window (E6, lib/core/execute.c). An
 * ALREADY_ADMITTED or REFUSED outcome, or no provider, is reported and
 * never driven: only the admitting request and recovery call the provider.
 *
 * Returns 0 and *out, or an error and nothing in *out: OG_EINVAL before
 * any I/O (an argument NULL; with p, q->actor NULL or q->timeout_us <= 0);
 * og_validated_grant_admission()'s and og_admit()'s errors (input; store
 * unavailable: the admission may or may not have happened, a retry with
 * the same operation id finds out). A drive's end is never an error. */
OG_MUST_CHECK int og_exec_admit(og_store *s, og_provider *p,
                                const og_exec_admit_req *q,
                                og_exec_admitted *out);

/* What one recovery pass did (counts of operations). */
typedef struct og_recovery_stats {
    int scanned;      /* stalled operations found (lease ended) */
    int taken;        /* taken over (owner_version + 1) */
    int succeeded;    /* recorded Succeeded (found, or resubmitted) */
    int failed;       /* recorded Failed (a resubmit was refused) */
    int unknown;      /* recorded Unknown */
    int reconcile;    /* recorded NeedsReconciliation */
    int resubmitted;  /* create calls sent (same key), after MaySubmit */
    int later;        /* left for a later pass (lookup unavailable, ...) */
    int errors;       /* store or client errors (the operation is left as
                         it was, for a later pass) */
} og_recovery_stats;

/* One recovery pass (docs/design.md, "Execution: one owner at a time"):
 * scans up to limit (1..1000) Admitted or Unknown credit operations whose
 * lease ended, oldest first — never an operation of another kind: a payout
 * attempt is neither taken over, looked up nor resent here
 * (og_payout_after_takeover is its sweeper's rule); takes each over
 * (og_op_takeover); looks its effect up by reference (= operation id, as
 * the handler sends it); decides with og_recovery_after_lookup(); and
 * records, or resubmits the SAME create with og_exec_drive() (key,
 * parameters, expires_at = submit_by; only after og_op_may_submit() says
 * yes for the new owner version, and NeedsReconciliation when it says no).
 * Every write expects the version the takeover returned. Returns
 * 0 and *stats, or the scan's store error; errors on one operation are
 * counted and leave it for a later pass. p and t may not be NULL. */
OG_MUST_CHECK int og_recover_once(og_store *s, og_provider *p,
                                  const og_provider_table *t,
                                  int64_t provider_timeout_us, int limit,
                                  og_recovery_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_EXEC_H */
