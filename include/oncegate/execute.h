/*
 * execute.h — what an owner of an admitted operation does next: the pure
 * decisions of the handler, of recovery and of the payout sweeper
 * (lib/core/execute.c, which draws the state machine and its numbered
 * invariants). No I/O: the caller runs the decided step — a conditional
 * write through og_op_record(), a create call after og_op_may_submit(), or
 * nothing until the next round. The I/O that runs them, once for every
 * owner, is oncegate/exec.h (lib/exec/). docs/design.md, "Execution: one
 * owner at a time", describes the protocol.
 *
 * Layer: core. Conventions as in oncegate/core.h. Part of the public API.
 */
#ifndef ONCEGATE_EXECUTE_H
#define ONCEGATE_EXECUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "oncegate/classify.h"
#include "oncegate/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum og_exec_action {
    OG_EXEC_RECORD,      /* record status/reason/reference, conditionally on
                            the owner's (status, owner_version) */
    OG_EXEC_SUBMIT,      /* send the create call with the operation id as
                            the idempotency key — after og_op_may_submit()
                            says yes, and never otherwise */
    OG_EXEC_RETRY_LATER, /* nothing now; decide again later (after
                            retry_after_us when it is > 0) */
} og_exec_action;

typedef struct og_exec_decision {
    og_exec_action action;
    og_op_status status;   /* RECORD: the new status */
    const char *reason;    /* RECORD: a reason code (static, or the
                              outcome's); never NULL for RECORD */
    const char *reference; /* RECORD: the provider's id, or NULL */
    int64_t retry_after_us;/* RETRY_LATER: the provider's hint; 0: none */
} og_exec_decision;

/* The action's name ("record", "submit", "retry_later"). */
const char *og_exec_action_name(og_exec_action a);

/* After a create call, by the handler or by recovery: what its classified
 * answer o means (E2-E5). Borrows o's strings into *d. */
void og_exec_after_create(const og_provider_outcome *o, og_exec_decision *d);

/* E6: whether the admission that just created op answers MaySubmit for
 * its first create: op as og_admit returned it (a credit, Admitted, the
 * initial owner version), elapsed_us the time since before the admission
 * was sent on a local clock that counts suspension, margin_us the allowance
 * for the store's clock running ahead (0: never — ask the store). True
 * only while elapsed_us + margin_us < least(lease_until, submit_by) -
 * created_at. */
bool og_exec_admission_may_submit(const og_operation *op, int64_t elapsed_us,
                                  int64_t margin_us);

/* Recovery, after it took op over and looked the effect up: lookup_rc and
 * lo are og_provider_lookup()'s result (1 found, 0 not found, negative:
 * could not ask), or lookup_rc = OG_EINVAL when the provider documents no
 * lookup. now_us is the store's clock as last read. What to do (RV1-RV7).
 * Borrows lo's strings into *d. */
void og_recovery_after_lookup(const og_operation *op,
                              const og_provider_properties *p, int lookup_rc,
                              const og_provider_outcome *lo, int64_t now_us,
                              og_exec_decision *d);

/* Recovery, after MaySubmit refused its resubmit of op: record
 * NeedsReconciliation "submit_window_passed" when now_us (the clock
 * og_recovery_after_lookup read) is at or after submit_by; otherwise
 * retry_later, nothing recorded — the refusal was this owner's lapsed
 * lease or a newer owner, and the next pass decides (RV8). */
void og_recovery_after_refusal(const og_operation *op, int64_t now_us,
                               og_exec_decision *d);

/* The payout sweeper, after it took over (og_op_takeover) a payout attempt
 * whose lease lapsed: what to record (docs/payouts.md P2, P3; SW1-SW4 in
 * lib/core/execute.c). op is the record the takeover returned.
 *   Admitted  -> RECORD NotStarted, reason "not_started": its claimer could
 *                send only after og_op_start, which the takeover's new owner
 *                version now fences, so nothing was sent (P2);
 *   Started   -> RECORD Unknown, reason "lease_lapsed_after_start": the
 *                owner may have sent, or may still be about to (P3);
 *   Unknown   -> RETRY_LATER: the reconciler decides, from the provider's
 *                records (never the sweeper);
 * anything else — another status, a credit, or a record at the initial
 * owner version (no takeover happened) — RETRY_LATER: nothing to record.
 * The RECORD is to be written expecting exactly op's status at op's owner
 * version. Pure; *d's strings are static. */
void og_payout_after_takeover(const og_operation *op, og_exec_decision *d);

/* ---------------------------------------------------------------------------
 * The payout reconciler (docs/payouts.md, section 6; RC1-RC8 in
 * lib/core/execute.c): what a lookup of an Unknown payout attempt by its
 * client reference means. The reconciler never sends (P7): no decision
 * here is a create.
 * ------------------------------------------------------------------------- */

/* What the reconciler knows after one lookup. Every time is the store's
 * clock, in microseconds since the epoch. */
typedef struct og_payout_lookup_facts {
    int lookup;               /* og_provider_lookup_payout's result: 1 found,
                                 0 not found, < 0 the provider could not be
                                 asked (unreachable, undocumented answer) */
    og_outcome_class cls;     /* found: SUCCEEDED (completed or returned),
                                 FAILED (rejected), UNKNOWN (pending,
                                 terms_mismatch, undocumented) */
    const char *reason;       /* the classifier's reason ("found",
                                 "found_multiple", "returned", "pending",
                                 "terms_mismatch", ...); NULL reads as "" */
    bool not_found_final;     /* the provider's table declares absence final
                                 after expiry + skew + visibility delay
                                 (og_provider_properties.not_found_final) */
    int64_t now_us;           /* the store's clock at the takeover that began
                                 this lookup (the attempt's taken_at): the
                                 lookup ran at or after it */
    int64_t final_absence_after_us; /* the attempt's cutoff (submit_by +
                                 skew + visibility delay, fixed by the
                                 claim); 0: "not found" is never final */
    int64_t escalate_at_us;   /* the escalation deadline: still Unknown then
                                 -> NeedsReconciliation */
    int64_t lookups;          /* lookups already made (backoff index) */
} og_payout_lookup_facts;

typedef enum og_payout_lookup_action {
    OG_PAYOUT_LOOKUP_RECORD, /* resolve the attempt: status, reason */
    OG_PAYOUT_LOOKUP_LATER,  /* nothing now: look again after a backoff */
} og_payout_lookup_action;

typedef struct og_payout_lookup_decision {
    og_payout_lookup_action action;
    og_op_status status;      /* RECORD: SUCCEEDED | FAILED | NOT_APPLIED |
                                 NEEDS_RECONCILIATION; LATER: UNKNOWN */
    const char *reason;       /* static: "found", "found_multiple",
                                 "returned", "rejected", "terms_mismatch",
                                 "not_found_final", "escalation_deadline";
                                 LATER: "not_found", "pending",
                                 "provider_unavailable" */
    bool returned;            /* found returned: record a return event too
                                 (P8), after the Succeeded */
} og_payout_lookup_decision;

/* The reconciler's decision after one lookup (RC1-RC8). Pure; never
 * fails: f NULL is LATER "provider_unavailable" (nothing is known). */
void og_payout_after_lookup(const og_payout_lookup_facts *f,
                            og_payout_lookup_decision *d);

/* How long a LATER decision waits before the attempt may be looked up
 * again: backoff_us[min(f->lookups, n - 1)] (n >= 1, each > 0; else one
 * second), shortened so that the next lookup is not later than the
 * cutoff after which "not found" becomes final (while the cutoff is
 * ahead) nor than the escalation deadline (while it is ahead), and kept
 * within 1 ms .. max_us. Pure. */
int64_t og_payout_lookup_delay(const og_payout_lookup_facts *f,
                               const int64_t *backoff_us, int n,
                               int64_t max_us);

/* What a caller is told about an operation in status st: "applied"
 * (Succeeded), "rejected" (Failed), or "pending" (anything else: check
 * again, never "done"). */
const char *og_exec_answer(og_op_status st);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_EXECUTE_H */
