/*
 * recover.c — one recovery pass: the I/O around the pure decisions of
 * lib/core/execute.c (RV1-RV8). Store calls are the ownership protocol
 * (oncegate.h, "Execution"); provider calls go through the client
 * (lib/provider/client.c). This file logs nothing: it returns counts, and
 * the caller (oncegate recover, serve's loop) logs identifiers.
 *
 * It recovers credits only: the scan asks for kind credit, and an
 * operation of any other kind is skipped before anything is written.
 *
 * Order for each stalled operation, every write expecting the version the
 * takeover returned:
 *   takeover -> lookup by reference -> decide ->
 *     record                       (found; reconcile; pending), or
 *     og_exec_drive: may_submit -> create -> decide -> record
 *                                  (resubmit, RV4 + E1: the drive the
 *                                  admitting request runs too,
 *                                  lib/exec/execute.c), or
 *     nothing                      (ask again later, RV6).
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "oncegate/exec.h"
#include "oncegate/provider.h"
#include "oncegate/store.h"

#define ACTOR "recovery"
/* What recovery owns after a takeover, and so what its records expect. */
#define RECOVERABLE (OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_UNKNOWN))

static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Counts an outcome this pass recorded. */
static void count(og_recovery_stats *st, og_op_status recorded)
{
    switch (recorded) {
    case OG_OP_SUCCEEDED: st->succeeded++; break;
    case OG_OP_FAILED: st->failed++; break;
    case OG_OP_UNKNOWN: st->unknown++; break;
    case OG_OP_NEEDS_RECONCILIATION: st->reconcile++; break;
    /* never a credit's outcome (the decisions of lib/core/execute.c) */
    case OG_OP_ADMITTED:
    case OG_OP_STARTED:
    case OG_OP_NOT_STARTED:
    case OG_OP_NOT_APPLIED: break;
    }
}

/* Records d for op (owned at op->owner_version); counts the result. */
static void record(og_store *s, const og_operation *op,
                   const og_exec_decision *d, og_recovery_stats *st)
{
    og_op_outcome o = {d->status, d->reason, d->reference, ACTOR, NULL};
    bool recorded = false;
    int rc = og_op_record(s, op->operation_id, RECOVERABLE, op->owner_version,
                          &o, &recorded);

    if (rc != 0) {
        st->errors++;
        return;
    }
    if (!recorded) { /* someone newer owns it now: not ours to count */
        st->later++;
        return;
    }
    count(st, d->status);
}

/* RV4: the same create again (og_exec_drive), only while MaySubmit holds
 * for this owner. What recovery does with each end is tabled at
 * og_exec_drive (lib/exec/execute.c). */
static void resubmit(og_store *s, og_provider *p, const og_operation *op,
                     int64_t timeout_us, og_recovery_stats *st)
{
    const og_exec_drive_req q = {ACTOR, RECOVERABLE, timeout_us, NULL};
    og_exec_decision d;
    og_exec_run run;

    if (og_exec_drive(s, p, op, &q, &run) != 0) {
        st->errors++; /* nothing was sent */
        return;
    }
    if (run.sent)
        st->resubmitted++;
    switch (run.end) {
    case OG_EXEC_END_MAY_SUBMIT_REFUSED:
        /* Nothing was sent (E1). Past submit_by the operation waits for
         * an operator; before it, only this owner's lease lapsed (or a
         * newer owner took it): the next pass takes it over (RV8). */
        og_recovery_after_refusal(op, wall_us(), &d);
        if (d.action == OG_EXEC_RECORD)
            record(s, op, &d, st);
        else
            st->later++;
        break;
    case OG_EXEC_END_MAY_SUBMIT_FAILED:
    case OG_EXEC_END_NOT_SENT:       /* nothing was sent */
    case OG_EXEC_END_RECORD_FAILED:  /* a later pass looks it up (RV1, RV2) */
        st->errors++;
        break;
    case OG_EXEC_END_TRANSIENT:
    case OG_EXEC_END_RECORD_SUPERSEDED: /* someone newer owns it now */
        st->later++;
        break;
    case OG_EXEC_END_RECORDED:
        count(st, run.op.status);
        break;
    }
}

/* Takes one stalled operation over and moves it forward. */
static void recover_one(og_store *s, og_provider *p,
                        const og_provider_table *t, const og_operation *seen,
                        int64_t timeout_us, og_recovery_stats *st)
{
    og_operation op;
    og_provider_outcome lo;
    og_exec_decision d;
    bool taken = false;
    int lrc;

    /* The scan lists credits only; an operation of another kind (a payout
     * attempt, whose sweeper decides by other rules: P2, P3) is never
     * taken over, looked up or resent here, whatever a scan returned. */
    if (seen->kind != OG_OP_KIND_CREDIT) {
        st->later++;
        return;
    }
    if (og_op_takeover(s, seen->operation_id, seen->owner_version, ACTOR, &op,
                       &taken) != 0) {
        st->errors++;
        return;
    }
    if (!taken) { /* another recoverer, or its owner, got there first */
        st->later++;
        return;
    }
    st->taken++;
    memset(&lo, 0, sizeof lo);
    lrc = og_provider_lookup(p, op.operation_id, timeout_us, &lo);
    og_recovery_after_lookup(&op, og_provider_table_properties(t), lrc, &lo,
                             wall_us(), &d);
    switch (d.action) {
    case OG_EXEC_RECORD:
        record(s, &op, &d, st);
        break;
    case OG_EXEC_SUBMIT:
        resubmit(s, p, &op, timeout_us, st);
        break;
    case OG_EXEC_RETRY_LATER:
        st->later++;
        break;
    }
}

int og_recover_once(og_store *s, og_provider *p, const og_provider_table *t,
                    int64_t provider_timeout_us, int limit,
                    og_recovery_stats *stats)
{
    og_op_filter f = {RECOVERABLE, true, 0, limit,
                      OG_OP_KIND_BIT(OG_OP_KIND_CREDIT)};
    og_recovery_stats st;
    og_op_list l = {0};
    int rc;

    if (!s || !p || !t || !stats || provider_timeout_us <= 0)
        return OG_EINVAL;
    memset(&st, 0, sizeof st);
    if ((rc = og_op_scan(s, &f, &l)) != 0)
        return rc;
    st.scanned = (int)l.n;
    for (size_t i = 0; i < l.n; i++)
        recover_one(s, p, t, &l.v[i], provider_timeout_us, &st);
    og_op_list_free(&l);
    *stats = st;
    return 0;
}
