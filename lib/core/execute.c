/*
 * execute.c — the operation state machine: what the owner of an admitted
 * operation does next (docs/design.md, "The one operation: og_admit" and
 * "Execution: one owner at a time").
 * Pure: the store's writes (og_op_record, og_op_takeover, og_op_resolve)
 * and the provider client do the I/O; this file only decides.
 *
 *                    admission (ONE write: grant spent + operation)
 *                                  |
 *                                  v
 *     +-------------------------[Admitted]-------------------------+
 *     |  owner v1 (handler) until lease_until;  recovery v+1 after |
 *     |                                                            |
 *     |  create -> SUCCEEDED      create -> FAILED   create/lookup |
 *     |  or lookup found          (documented,       -> UNKNOWN    |
 *     v                           no effect)              |        |
 * [Succeeded] <------------------+     |                  v        |
 *     ^      found / create ok   |     v             [Unknown] ----+
 *     |                          |  [Failed]              |  not found and no
 *     |                          |     ^                  |  safe resubmit, or
 *     |                          +-----|------------------+  past submit_by
 *     |                                |                  v
 *     +------- operator resolves ------+-------- [NeedsReconciliation]
 *
 * Invariants (each names what protects it):
 *   E1  Nothing here executes: every create call is sent only after
 *       og_op_may_submit() said yes for this owner's version, before
 *       least(lease_until, submit_by) on the store's clock (the store) —
 *       or, for the first create of a credit, after its own admission
 *       said the same (E6).
 *   E2  A SUCCEEDED answer is recorded Succeeded with the provider's
 *       reference.
 *   E3  A FAILED answer — a refusal the provider documents as having no
 *       effect — is recorded Failed. The grant stays spent: a new attempt
 *       needs a new grant.
 *   E4  Anything else the create call produced — a timeout, a dropped
 *       response, a 500, an answer nobody documented — is Unknown: the
 *       effect may exist. Never Failed, never "retry as new".
 *   E5  A TRANSIENT answer (documented: nothing done, nothing recorded by
 *       the provider) records nothing: the operation stays as it was and
 *       the same owner may send the same create again while E1 allows.
 *   E6  An admission answers MaySubmit for the first create of the credit
 *       it admitted (og_exec_admission_may_submit): the admission wrote
 *       Admitted at the initial owner version with lease_until and
 *       submit_by at created_at + lease and + window, ONE reading of the
 *       store's clock, so MaySubmit would say yes until least(lease_until,
 *       submit_by) - created_at has passed on that clock — and nobody can
 *       move the operation before (a takeover needs the lease ended; only
 *       its owner records at that version). The caller measures the time
 *       since before it SENT the admission (so since no later than
 *       created_at) on a local clock that counts suspension, and the
 *       answer is yes only while that time plus margin is below the
 *       window: margin covers the store's clock stepping or running ahead
 *       of the local one (timings: lease_margin + max_clock_step). margin
 *       0, another status or version, a payout, or a clock that went
 *       backwards: no — ask the store.
 *   RV1 Recovery looks up before it acts. Found (final) -> Succeeded.
 *   RV2 Found but not final (pending) -> Unknown with the reference, or,
 *       when already Unknown, decide again later.
 *   RV3 Not found is not proof of nothing: recovery never records Failed
 *       on it.
 *   RV4 Not found -> resubmit with the same key ONLY when the provider
 *       declares atomic handling of concurrent same-key requests AND the
 *       store clock is before submit_by (E1 re-checks it); otherwise
 *       NeedsReconciliation, with no create request.
 *   RV5 A provider without a documented lookup -> NeedsReconciliation: no
 *       evidence can be gathered, and no create is sent.
 *   RV6 A lookup that could not be asked (unreachable, undocumented answer)
 *       -> decide again later; nothing recorded.
 *   RV7 Succeeded and Failed are terminal and NeedsReconciliation waits for
 *       an operator; none of them is ever decided on here (the store's
 *       conditional writes refuse them anyway).
 *   RV8 A resubmit that MaySubmit refused names the reason that is true:
 *       at or after submit_by -> NeedsReconciliation
 *       "submit_window_passed" (E1: no create may be sent any more);
 *       before it, the refusal is this owner's lease lapsing or a newer
 *       owner (a takeover) -> nothing recorded: the operation is still
 *       recoverable, and the next pass takes it over and decides by
 *       RV1-RV7 (an owner past its lease has no business parking it).
 *       Bounded: once recovery's clock too is past submit_by, RV4 records
 *       "not_found_after_submit_by" at the lookup (a store clock ahead of
 *       recovery's only delays that by the difference).
 *
 * A payout attempt (docs/payouts.md) follows the same protocol with one more
 * step, Started, written by og_op_start before its first send:
 *
 *     [Admitted] --og_op_start (owner v, lease and submit_by ahead)--> [Started]
 *        |  lease lapsed: sweeper takes over (v+1)        |  lease lapsed:
 *        v                                                v  takeover (v+1)
 *   [NotStarted]  (nothing was sent: SW1)             [Unknown] (SW2)
 *                                                         |
 *                                       reconciler (provider's records, SW3)
 *
 *   SW1 A payout taken over while Admitted is recorded NotStarted: its owner
 *       sends only after og_op_start confirmed, and the takeover's owner
 *       version fences that write, so nothing was or will be sent (P2).
 *       Only after a takeover: at the initial owner version the claimer may
 *       still start (the store refuses it there too).
 *   SW2 A payout taken over while Started is recorded Unknown, never
 *       NotStarted: its owner may have sent, or be paused about to (P3).
 *   SW3 An Unknown payout is left alone by the sweeper: only the
 *       reconciler's lookup decides it.
 *   SW4 The sweeper decides on payouts only; a credit goes to RV1-RV7.
 *
 * The payout reconciler (og_payout_after_lookup; docs/payouts.md, section
 * 6) decides on an Unknown attempt after one lookup by its client
 * reference, checked against the attempt's terms:
 *
 *   lookup ---found, terms differ----------------------> NeedsReconciliation
 *     |  ----found, completed or returned--------------> Succeeded (+ return)
 *     |  ----found, rejected---------------------------> Failed
 *     |  ----found, pending / undocumented--+
 *     |  ----not found, absence final------ | ----------> NotApplied
 *     |  ----not found, not final ----------+-- before the deadline: later
 *     +-----could not ask-------------------+-- at the deadline:
 *                                                NeedsReconciliation
 *
 *   RC1 A record listed under the reference with other terms than the
 *       attempt's is NeedsReconciliation, always: it proves nothing about
 *       this attempt, and a person decides (P7).
 *   RC2 Found completed (or returned: it did complete) is Succeeded; a
 *       returned one also asks for the payout's return event (P8), never
 *       a Failed attempt.
 *   RC3 Found rejected (the provider's documented no-effect end) is
 *       Failed.
 *   RC4 Found but not final (pending, or a state nobody documented) is
 *       looked up again later; never resolved from it.
 *   RC5 Not found is NotApplied only when all three hold (P6): the
 *       provider's table declares absence final, the attempt has a cutoff
 *       (submit_by + skew + visibility delay, fixed by its claim), and the
 *       takeover that began this lookup came at or after the cutoff on
 *       the store's clock. An earlier "not found" is never reused: each
 *       lookup decides on its own instant. The store refuses NotApplied
 *       otherwise too.
 *   RC6 Any other "not found", and a provider that could not be asked,
 *       decide nothing: look again later.
 *   RC7 An attempt still undecided (RC4, RC6) at its escalation deadline
 *       is NeedsReconciliation: a person decides, and nothing waits
 *       forever. RC5 is checked first: a final absence is an answer.
 *   RC8 No decision sends: the reconciler holds no grant and has no create
 *       to make (P7). Every decision is a record or a wait.
 */
#include <string.h>

#include "core/core_int.h" /* OG__INITIAL_OWNER_VERSION */
#include "oncegate/execute.h"

const char *og_exec_action_name(og_exec_action a)
{
    switch (a) {
    case OG_EXEC_RECORD: return "record";
    case OG_EXEC_SUBMIT: return "submit";
    case OG_EXEC_RETRY_LATER: return "retry_later";
    }
    return "?";
}

const char *og_exec_answer(og_op_status st)
{
    if (st == OG_OP_SUCCEEDED)
        return "applied";
    if (st == OG_OP_FAILED)
        return "rejected";
    return "pending";
}

/* A RECORD decision. */
static void record(og_exec_decision *d, og_op_status st, const char *reason,
                   const char *reference)
{
    memset(d, 0, sizeof *d);
    d->action = OG_EXEC_RECORD;
    d->status = st;
    d->reason = reason;
    d->reference = reference && reference[0] ? reference : NULL;
}

static void retry_later(og_exec_decision *d, int64_t after_us)
{
    memset(d, 0, sizeof *d);
    d->action = OG_EXEC_RETRY_LATER;
    d->retry_after_us = after_us > 0 ? after_us : 0;
}

/* The outcome's reason, or fallback when it has none. */
static const char *reason_or(const og_provider_outcome *o,
                             const char *fallback)
{
    return o && o->reason[0] ? o->reason : fallback;
}

void og_exec_after_create(const og_provider_outcome *o, og_exec_decision *d)
{
    if (!o) { /* no answer at all: the effect may exist (E4) */
        record(d, OG_OP_UNKNOWN, "no_outcome", NULL);
        return;
    }
    switch (o->cls) {
    case OG_CLASS_SUCCEEDED: /* E2 */
        record(d, OG_OP_SUCCEEDED, reason_or(o, "succeeded"), o->reference);
        return;
    case OG_CLASS_FAILED: /* E3 */
        record(d, OG_OP_FAILED, reason_or(o, "failed"), NULL);
        return;
    case OG_CLASS_TRANSIENT: /* E5 */
        retry_later(d, o->retry_after_s > 0 ? o->retry_after_s * 1000000
                                            : 0);
        return;
    case OG_CLASS_UNKNOWN:
        break;
    }
    record(d, OG_OP_UNKNOWN, reason_or(o, "unknown"), o->reference); /* E4 */
}

bool og_exec_admission_may_submit(const og_operation *op, int64_t elapsed_us,
                                  int64_t margin_us)
{
    int64_t window;

    if (!op || margin_us <= 0 || elapsed_us < 0 ||
        op->kind != OG_OP_KIND_CREDIT || op->status != OG_OP_ADMITTED ||
        op->owner_version != OG__INITIAL_OWNER_VERSION)
        return false;
    window = (op->lease_until_us < op->submit_by_us ? op->lease_until_us
                                                    : op->submit_by_us) -
             op->created_at_us;
    /* E6: strictly inside the window, the margin left over. */
    return elapsed_us < window && margin_us < window - elapsed_us;
}

void og_recovery_after_lookup(const og_operation *op,
                              const og_provider_properties *p, int lookup_rc,
                              const og_provider_outcome *lo, int64_t now_us,
                              og_exec_decision *d)
{
    if (!op || !p) { /* nothing to decide on: ask again later */
        retry_later(d, 0);
        return;
    }
    if (op->status != OG_OP_ADMITTED && op->status != OG_OP_UNKNOWN) {
        retry_later(d, 0); /* RV7: not ours to move */
        return;
    }
    if (p->lookup == 0 || lookup_rc == OG_EINVAL) {
        record(d, OG_OP_NEEDS_RECONCILIATION, "no_lookup", NULL); /* RV5 */
        return;
    }
    if (lookup_rc < 0) {
        retry_later(d, 0); /* RV6 */
        return;
    }
    if (lookup_rc == 1 && lo && lo->cls == OG_CLASS_SUCCEEDED) {
        record(d, OG_OP_SUCCEEDED, reason_or(lo, "found"), lo->reference);
        return; /* RV1 */
    }
    if (lookup_rc == 1) { /* RV2: it exists, not final */
        if (op->status == OG_OP_ADMITTED)
            record(d, OG_OP_UNKNOWN, reason_or(lo, "pending"),
                   lo ? lo->reference : NULL);
        else
            retry_later(d, 0);
        return;
    }
    /* RV3, RV4: not found. */
    if (p->atomic_same_key && now_us < op->submit_by_us) {
        memset(d, 0, sizeof *d);
        d->action = OG_EXEC_SUBMIT;
        return;
    }
    record(d, OG_OP_NEEDS_RECONCILIATION,
           p->atomic_same_key ? "not_found_after_submit_by"
                              : "not_found_no_atomic_same_key",
           NULL);
}

void og_recovery_after_refusal(const og_operation *op, int64_t now_us,
                               og_exec_decision *d)
{
    if (op && now_us >= op->submit_by_us) { /* RV8: the window is shut */
        record(d, OG_OP_NEEDS_RECONCILIATION, "submit_window_passed", NULL);
        return;
    }
    retry_later(d, 0); /* RV8: the lease lapsed or the owner changed */
}

void og_payout_after_takeover(const og_operation *op, og_exec_decision *d)
{
    if (!op || op->kind != OG_OP_KIND_PAYOUT || /* SW4 */
        op->owner_version <= OG__INITIAL_OWNER_VERSION) { /* SW1: no takeover */
        retry_later(d, 0);
        return;
    }
    switch (op->status) {
    case OG_OP_ADMITTED: /* SW1 */
        record(d, OG_OP_NOT_STARTED, "not_started", NULL);
        return;
    case OG_OP_STARTED: /* SW2 */
        record(d, OG_OP_UNKNOWN, "lease_lapsed_after_start", NULL);
        return;
    case OG_OP_UNKNOWN: /* SW3 */
    case OG_OP_SUCCEEDED:
    case OG_OP_FAILED:
    case OG_OP_NEEDS_RECONCILIATION:
    case OG_OP_NOT_STARTED:
    case OG_OP_NOT_APPLIED:
        break;
    }
    retry_later(d, 0);
}

/* ===========================================================================
 * The payout reconciler (RC1-RC8)
 * ========================================================================= */

static void lookup_record(og_payout_lookup_decision *d, og_op_status st,
                          const char *reason)
{
    memset(d, 0, sizeof *d);
    d->action = OG_PAYOUT_LOOKUP_RECORD;
    d->status = st;
    d->reason = reason;
}

/* RC4, RC6 — or RC7 once the deadline is reached. */
static void lookup_later(og_payout_lookup_decision *d,
                         const og_payout_lookup_facts *f, const char *reason)
{
    if (f && f->now_us >= f->escalate_at_us) { /* RC7 */
        lookup_record(d, OG_OP_NEEDS_RECONCILIATION, "escalation_deadline");
        return;
    }
    memset(d, 0, sizeof *d);
    d->action = OG_PAYOUT_LOOKUP_LATER;
    d->status = OG_OP_UNKNOWN;
    d->reason = reason;
}

static bool reason_is(const og_payout_lookup_facts *f, const char *r)
{
    return f->reason && strcmp(f->reason, r) == 0;
}

void og_payout_after_lookup(const og_payout_lookup_facts *f,
                            og_payout_lookup_decision *d)
{
    if (!f) { /* nothing known: RC6 (no deadline to compare with) */
        memset(d, 0, sizeof *d);
        d->action = OG_PAYOUT_LOOKUP_LATER;
        d->status = OG_OP_UNKNOWN;
        d->reason = "provider_unavailable";
        return;
    }
    if (f->lookup < 0) { /* RC6 */
        lookup_later(d, f, "provider_unavailable");
        return;
    }
    if (f->lookup > 0) {
        if (reason_is(f, "terms_mismatch")) { /* RC1, whatever the class */
            lookup_record(d, OG_OP_NEEDS_RECONCILIATION, "terms_mismatch");
            return;
        }
        switch (f->cls) {
        case OG_CLASS_SUCCEEDED: /* RC2 */
            if (reason_is(f, "returned")) {
                lookup_record(d, OG_OP_SUCCEEDED, "returned");
                d->returned = true;
            } else {
                lookup_record(d, OG_OP_SUCCEEDED,
                              reason_is(f, "found_multiple") ? "found_multiple"
                                                             : "found");
            }
            return;
        case OG_CLASS_FAILED: /* RC3 */
            lookup_record(d, OG_OP_FAILED, "rejected");
            return;
        case OG_CLASS_UNKNOWN:   /* RC4: pending, undocumented */
        case OG_CLASS_TRANSIENT: /* no lookup answer is transient */
            break;
        }
        lookup_later(d, f, "pending");
        return;
    }
    /* Not found. */
    if (f->not_found_final && f->final_absence_after_us > 0 &&
        f->now_us >= f->final_absence_after_us) { /* RC5 */
        lookup_record(d, OG_OP_NOT_APPLIED, "not_found_final");
        return;
    }
    lookup_later(d, f, "not_found"); /* RC6, RC7 */
}

int64_t og_payout_lookup_delay(const og_payout_lookup_facts *f,
                               const int64_t *backoff_us, int n,
                               int64_t max_us)
{
    const int64_t min_us = 1000;
    int64_t delay = 1000000, idx;

    if (f && backoff_us && n >= 1) {
        idx = f->lookups < 0 ? 0 : f->lookups;
        if (idx > n - 1)
            idx = n - 1;
        if (backoff_us[idx] > 0)
            delay = backoff_us[idx];
    }
    if (f) {
        /* Look at the cutoff, not a backoff after it: that lookup may be
         * the one that finds absence final (RC5). */
        if (f->lookup == 0 && f->not_found_final &&
            f->final_absence_after_us > f->now_us &&
            f->final_absence_after_us - f->now_us < delay)
            delay = f->final_absence_after_us - f->now_us;
        /* and at the deadline, not after it (RC7) */
        if (f->escalate_at_us > f->now_us &&
            f->escalate_at_us - f->now_us < delay)
            delay = f->escalate_at_us - f->now_us;
    }
    if (max_us < min_us)
        max_us = min_us;
    if (delay > max_us)
        delay = max_us;
    return delay < min_us ? min_us : delay;
}
