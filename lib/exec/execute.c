/*
 * execute.c — one create and its record, for whoever owns an admitted
 * credit: the request that admitted it (og_exec_admit, behind
 * POST /v1/operations) and recovery after a takeover (og_recover_once's
 * resubmit, lib/exec/recover.c). The decisions are the pure ones of
 * lib/core/execute.c (E1-E5); the store calls are the ownership protocol
 * (oncegate.h, "Execution"; docs/design.md, "Execution: one owner at a
 * time"); the create goes through the client (lib/provider/client.c).
 *
 * This file logs nothing and counts nothing: it returns what happened
 * (og_exec_run), and the caller logs identifiers, answers and counts. The
 * only thing it tells a caller on the way is how long each store call took
 * (og_exec_observer), for the service's latency metrics.
 *
 * Order, every write expecting the owner version the caller holds:
 *   [og_admit ->] og_op_may_submit (unless the admission answered it,
 *     E6) -> create -> og_exec_after_create -> og_op_record (RECORD)  or
 *     nothing (E5)
 *
 * Invariants (beyond E1-E5):
 *   EX1  At most one create per drive, and only after og_op_may_submit
 *        answered yes for this owner version — or, in the drive of the
 *        request that admitted it, after its admission did (E6: the local
 *        time since the admission was sent, plus the margin, still inside
 *        the lease and the submission window; otherwise the store is
 *        asked as for any drive); a MaySubmit that failed or said no sends
 *        nothing.
 *   EX2  Nothing is retried here: not the create (a transient answer, an
 *        unknown outcome), not the record (a store error after the
 *        create). What the record could not write is left to recovery,
 *        whose lookup under the same key finds the effect (RV1, RV2).
 *   EX3  Every create of one operation is the same request: key and
 *        reference the operation id, the record's account, amount and
 *        currency, expires_at the record's submit_by (fixed at admission,
 *        never "now + x"), so a resubmission is never an
 *        idempotency_mismatch and never outlives submit_by.
 *   EX4  Only the call that admitted an operation drives it from
 *        og_exec_admit: an ALREADY_ADMITTED retry reports, never sends.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "oncegate/exec.h"

const char *og_exec_end_name(og_exec_end e)
{
    switch (e) {
#define OG__EXEC_END_NAME(name, text)                                          \
    case OG_EXEC_END_##name:                                                   \
        return text;
        OG_EXEC_END_MAP(OG__EXEC_END_NAME)
#undef OG__EXEC_END_NAME
    }
    return "?";
}

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t og_exec_clock_us(void)
{
    struct timespec ts;

#ifdef CLOCK_BOOTTIME
    clock_gettime(CLOCK_BOOTTIME, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Tells the observer, if any, that call returned rc, started at t0_us. */
static void observed(const og_exec_observer *o, og_exec_call call,
                     int64_t t0_us, int rc)
{
    if (o && o->store_call)
        o->store_call(o->arg, call, mono_us() - t0_us, rc);
}

/* og_exec_drive's checks, before any I/O. */
static int drive_check(const og_operation *op, const og_exec_drive_req *q)
{
    const unsigned ownable =
        OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_UNKNOWN);

    if (!q->actor || q->timeout_us <= 0 || q->expected == 0 ||
        (q->expected & ~ownable) != 0)
        return OG_EINVAL;
    /* A payout attempt may be sent only after og_op_start (P1); its worker
     * sends it, with its secret destination, never this path. */
    if (op && op->kind != OG_OP_KIND_CREDIT)
        return OG_EINVAL;
    return 0;
}

/* E6's margin for store s: the allowance its timings make for the
 * store's clock running ahead of ours (the lease's margin) and stepping
 * (docs/design.md, "Timing values"). */
static int64_t admission_margin_us(const og_store *s)
{
    const og_timings *t = og_store_timings(s);

    return t ? t->lease_margin_us + t->max_clock_step_us : 0;
}

/* The drive itself, its input checked (drive_check). Every end is written
 * to *run; nothing fails. admitted_at_us: og_exec_clock_us() before the
 * admission of op was sent, when this drive belongs to the request that
 * admitted it (E6); 0 otherwise. */
static void drive(og_store *s, og_provider *p, const og_operation *op,
                  const og_exec_drive_req *q, int64_t admitted_at_us,
                  og_exec_run *run)
{
    og_exec_decision d;
    og_op_outcome oc;
    bool may = false, recorded = false;
    int64_t t0;
    int rc;

    memset(run, 0, sizeof *run);
    run->op = *op;

    /* EX1: the admission's own answer while it holds (E6), else ask, for
     * this owner version, on the store's clock (E1). */
    may = admitted_at_us > 0 &&
          og_exec_admission_may_submit(op,
                                       og_exec_clock_us() - admitted_at_us,
                                       admission_margin_us(s));
    if (!may) {
        t0 = mono_us();
        rc = og_op_may_submit(s, op->operation_id, op->owner_version, &may);
        observed(q->observe, OG_EXEC_CALL_MAY_SUBMIT, t0, rc);
        if (rc != 0) {
            run->end = OG_EXEC_END_MAY_SUBMIT_FAILED;
            run->error = rc;
            return;
        }
    }
    if (!may) {
        run->end = OG_EXEC_END_MAY_SUBMIT_REFUSED;
        return;
    }

    /* EX3: the same request every time. */
    rc = og_provider_create_credit(p, op->operation_id, op->account_id,
                                   op->amount, op->currency, op->operation_id,
                                   op->submit_by_us, q->timeout_us,
                                   &run->answer);
    if (rc != 0) {
        memset(&run->answer, 0, sizeof run->answer);
        run->end = OG_EXEC_END_NOT_SENT;
        run->error = rc;
        return;
    }
    run->sent = true;

    og_exec_after_create(&run->answer, &d);
    if (d.action != OG_EXEC_RECORD) {
        run->end = OG_EXEC_END_TRANSIENT; /* E5; EX2: not resent here */
        return;
    }
    oc = (og_op_outcome){d.status, d.reason, d.reference, q->actor, NULL};
    t0 = mono_us();
    rc = og_op_record(s, op->operation_id, q->expected, op->owner_version,
                      &oc, &recorded);
    observed(q->observe, OG_EXEC_CALL_RECORD, t0, rc);
    if (rc != 0) {
        run->end = OG_EXEC_END_RECORD_FAILED; /* EX2 */
        run->error = rc;
        return;
    }
    if (!recorded) {
        run->end = OG_EXEC_END_RECORD_SUPERSEDED;
        return;
    }
    run->end = OG_EXEC_END_RECORDED;
    run->op.status = d.status;
    snprintf(run->op.reason, sizeof run->op.reason, "%s", d.reason);
    if (d.reference)
        snprintf(run->op.provider_reference,
                 sizeof run->op.provider_reference, "%s", d.reference);
}

/*
 * The two owners that drive a credit today, and what each passes or does
 * with the end — the differences this one implementation keeps:
 *
 *                  admitting request             recovery
 *                  (og_exec_admit, behind        (resubmit after a
 *                  POST /v1/operations)          takeover, RV4)
 *  owner version   1 (it just admitted it)       the takeover's (v + 1)
 *  actor           "handler"                     "recovery"
 *  record expects  Admitted                      Admitted or Unknown
 *  timeout         timings.provider_timeout,     the same, from its caller
 *                  the call's own (never the     (oncegate recover, serve's
 *                  HTTP request's)               loop)
 *  key, reference, the operation id; expires_at = the record's submit_by
 *  expires_at      (EX3): the same for both
 *  store timing    observed (latency metrics)    not observed
 *
 *  end             the request answers           recovery counts
 *  MAY_SUBMIT_     202 pending, "admitted";      errors
 *    FAILED        logs store_error
 *  MAY_SUBMIT_     202 pending: its lease        records NeedsReconciliation
 *    REFUSED       lapses, recovery takes it     "submit_window_passed"
 *                  over                          itself (nobody else would)
 *  NOT_SENT        202 pending; logs             errors
 *                  provider_error
 *  TRANSIENT       202 pending                   resubmitted, later
 *  RECORD_FAILED   202 pending, status as        resubmitted, errors: the
 *    (a store      admitted; logs store_error    operation stays for a
 *    timeout after and owner_version: the        later pass, whose lookup
 *    the create)   outcome is known here, not    finds the effect
 *                  recorded (EX2)
 *  RECORD_         202 pending; logs             resubmitted, later
 *    SUPERSEDED    owner_version
 *  RECORDED        200 applied, 422 rejected     resubmitted, and the
 *                  or 202 pending by the         recorded status counted
 *                  recorded status; counts the   (serve turns the counts
 *                  outcome (source handler)      into outcomes, source
 *                                                recovery)
 */
int og_exec_drive(og_store *s, og_provider *p, const og_operation *op,
                  const og_exec_drive_req *q, og_exec_run *out)
{
    og_exec_run run;
    int rc;

    if (!s || !p || !op || !q || !out)
        return OG_EINVAL;
    if ((rc = drive_check(op, q)) != 0)
        return rc;
    drive(s, p, op, q, 0, &run);
    *out = run;
    return 0;
}

int og_exec_admit(og_store *s, og_provider *p, const og_exec_admit_req *q,
                  og_exec_admitted *out)
{
    og_exec_drive_req dq;
    og_exec_admitted res;
    og_grant g;
    og_intent in;
    int64_t t0, admitted_at;
    int rc;

    if (!s || !q || !q->grant || !out)
        return OG_EINVAL;
    /* The admitting request owns what it admits at version 1, and knows it
     * Admitted: nobody else may have moved it yet. */
    dq = (og_exec_drive_req){q->actor, OG_OP_BIT(OG_OP_ADMITTED),
                             q->timeout_us, q->observe};
    /* The drive's input is checked before the admission: once admitted,
     * nothing may fail for want of an argument. */
    if (p && (rc = drive_check(NULL, &dq)) != 0)
        return rc;
    if ((rc = og_validated_grant_admission(q->grant, q->operation_id, &g,
                                           &in)) != 0)
        return rc;
    g.form = q->form;
    memset(&res, 0, sizeof res);
    /* E6: before the admission is sent, so no later than its created_at. */
    admitted_at = og_exec_clock_us();
    t0 = mono_us();
    rc = og_admit(s, &g, &in, &res.admission);
    observed(q->observe, OG_EXEC_CALL_ADMIT, t0, rc);
    if (rc != 0)
        return rc;
    /* EX4: this call admitted it, so it owns it at version 1; a
     * same-operation retry or a refusal is only reported. og_admit
     * creates credits only, so drive_check has nothing left to refuse. */
    if (p && res.admission.outcome == OG_OUTCOME_ADMITTED) {
        drive(s, p, &res.admission.operation, &dq, admitted_at, &res.run);
        res.driven = true;
    }
    *out = res;
    return 0;
}
