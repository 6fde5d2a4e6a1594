/*
 * payout.c — the payout pipeline's I/O around the pure decisions of
 * lib/core/payout.c (the recheck) and lib/core/execute.c (the answer's
 * meaning, SW1-SW4, RC1-RC8): the worker, the sweeper and the reconciler
 * (oncegate/payout_exec.h; docs/payouts.md, sections 5 and 6). Store calls
 * are the payout store's (oncegate/payout_store.h) and the ownership
 * protocol (oncegate/store.h, "Execution"); provider calls go through the
 * client. This file logs nothing: it returns ends, reason codes and counts.
 *
 * The worker, for one job:
 *
 *   take job -> grant checks (unknown, binding, audience, revoked,
 *     consumed, window) -> context read + the grant's decision -> recheck
 *     (pure) -> claim -> token + credential -> og_op_start -> send (same
 *     key, while a transient answer and og_op_may_submit allow) -> classify
 *     -> resolve
 *   every refusal: acknowledged, nothing sent; a postponement or an
 *   unconfirmed claim: nothing acknowledged, nothing sent.
 *
 * Invariants:
 *   PX1 Nothing is sent unless this worker's og_op_start returned started
 *       = true for the attempt it claimed (P1): a claim or a start that
 *       failed, was refused or is unconfirmed ends the job before any
 *       request is built; a failed claim ends it before any secret is
 *       fetched.
 *   PX2 The destination token and the credential are fetched only after
 *       the worker's claim committed (before its start, so a worker that
 *       cannot have them leaves an Admitted attempt: NotStarted) or the
 *       reconciler's takeover,
 *       live only in buffers this file wipes on every path, and never
 *       reach a result, an error, an event or the store.
 *   PX3 Every send of an attempt carries the attempt's key, reference,
 *       amount, currency, destination and expires_at = submit_by, fixed by
 *       the claim (P4): a resend is the same request.
 *   PX4 A resend follows only a documented transient answer, only while
 *       og_op_may_submit says yes for this owner (Started, its version,
 *       before the lease and submit_by), and at most max_sends in all;
 *       nothing resends after a timeout, a 5xx or any Unknown answer.
 *   PX5 An accepted-but-pending answer (202) records nothing: the attempt
 *       stays Started, the sweeper makes it Unknown, the reconciler finds
 *       it. Any other Unknown answer is recorded Unknown by the worker.
 *   PX6 A record that finds the attempt no longer this worker's (a
 *       takeover) changes nothing; a decisive answer (Succeeded, Failed)
 *       is then offered as late evidence, which resolves the attempt only
 *       while it is still Unknown (og_payout_evidence).
 *   PX7 The sweeper records only what og_payout_after_takeover decides,
 *       expecting exactly the status it took over at the new owner
 *       version: an Admitted attempt is NotStarted, a Started one Unknown.
 *   PX8 The reconciler never creates (RC8); it looks up by the attempt's
 *       own reference with the attempt's terms, decides with
 *       og_payout_after_lookup on the takeover's instant, and either
 *       resolves or backs off with og_payout_reconcile_later — one lookup
 *       per takeover, so a backlog drains at max_per_pass per pass.
 *   PX9 A grant whose window has not opened yet is not refused: the job
 *       is postponed to its not_before (a job is queued at the decision,
 *       hours before its release batch).
 *   PX10 A delivery refused payout.not-executable reads its grant again:
 *       when a concurrent claim consumed it meanwhile, the delivery is
 *       handled as any consumed grant (a duplicate of this binding's
 *       attempt), never as a refusal of the payout the grant runs.
 *   PX11 The recheck takes the requester's facts from the decision that
 *       issued the grant (og_payout_decision_get of its decision_id): the
 *       approval limit it captured, never one derived from the payout,
 *       and the destination version an approver acknowledged there. A
 *       decision that cannot be read postpones the job (context.unavailable);
 *       one that is missing, not Allowed or another payout's is a defect
 *       (OG_EINTERNAL), postponed too — never allowed, never refused.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "exec/payout_int.h"

/* ===========================================================================
 * Names, bounds, small helpers
 * ========================================================================= */

static const char *const work_end_names[] = {
#define X(name, text) text,
    OG_PAYOUT_WORK_END_MAP(X)
#undef X
};

const char *og_payout_work_end_name(og_payout_work_end e)
{
    return (unsigned)e < sizeof work_end_names / sizeof work_end_names[0]
               ? work_end_names[e]
               : "?";
}

#define MS INT64_C(1000)
#define SEC INT64_C(1000000)

static bool in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi;
}

static void sleep_us(int64_t us)
{
    struct timespec ts;

    if (us <= 0)
        return;
    ts.tv_sec = (time_t)(us / SEC);
    ts.tv_nsec = (long)(us % SEC) * 1000;
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec / 1000;
}

/* Fetches the credential into buf (PX2). 0, or < 0: none. */
static int credential_get(og_payout_credential_fn fn, void *arg, char *buf,
                          size_t len)
{
    buf[0] = '\0';
    if (fn(arg, buf, len) < 0 || !memchr(buf, '\0', len)) {
        sodium_memzero(buf, len);
        return -1;
    }
    return 0;
}

/* ===========================================================================
 * The worker
 * ========================================================================= */

int og__payout_worker_cfg_check(const og_payout_worker_cfg *c)
{
    if (!c || !c->worker_id || !og_id_valid(c->worker_id) || !c->audience ||
        !og_id_valid(c->audience) || !c->provider_url || !c->table ||
        !c->credential ||
        !in_range(c->job_lease_us, MS, OG_PAYOUT_LEASE_MAX_US) ||
        !in_range(c->attempt_lease_us, MS, OG_PAYOUT_LEASE_MAX_US) ||
        !in_range(c->send_window_us, MS, OG_PAYOUT_LEASE_MAX_US) ||
        c->provider_timeout_us <= 0 || c->record_timeout_us < 0 ||
        !in_range(c->postpone_us, 0, OG_PAYOUT_LEASE_MAX_US) ||
        c->max_sends < 1 || c->clock_error_us < 0 ||
        c->clock_error_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    return 0;
}

/* The claim's final_absence_margin_us: the table's processing window plus
 * the clock error allowed, or -1 when absence is never final (then the
 * attempt can never be NotApplied by a lookup, RC5). */
static int64_t absence_margin(const og_payout_worker_cfg *c)
{
    int64_t m = og_provider_final_absence_margin_us(
        og_provider_table_properties(c->table));

    if (m < 0 || m > OG_PAYOUT_LEASE_MAX_US - c->clock_error_us)
        return -1;
    return m + c->clock_error_us;
}

/* A refusal: acknowledged (every refusal is), nothing sent. */
static void refuse(og_store *s, og_payout_work *w,
                   og_payout_worker_reason why, bool signal)
{
    bool acked = false;

    w->end = OG_PAYOUT_WORK_REFUSED;
    w->reason = why;
    w->security_signal = signal;
    if (og_payout_job_ack(s, w->job.job_id, w->job.delivery, &acked) == 0)
        w->acknowledged = acked;
}

static void ack(og_store *s, og_payout_work *w)
{
    bool acked = false;

    if (og_payout_job_ack(s, w->job.job_id, w->job.delivery, &acked) == 0)
        w->acknowledged = acked;
}

/* The job comes again after delay_us: no acknowledgment, nothing used. */
static void postpone(og_store *s, og_payout_work *w,
                     og_payout_worker_reason why, int error, int64_t delay_us)
{
    bool done = false;

    w->end = OG_PAYOUT_WORK_POSTPONED;
    w->reason = why;
    w->error = error;
    if (delay_us > OG_PAYOUT_LEASE_MAX_US)
        delay_us = OG_PAYOUT_LEASE_MAX_US;
    /* A failed postponement leaves the delivery lease to bring the job
     * back: nothing is lost either way. */
    if (og_payout_job_postpone(s, w->job.job_id, w->job.delivery,
                               delay_us < 0 ? 0 : delay_us, &done) != 0)
        done = false;
}

/* Grant check 5: a consumed grant is a duplicate delivery when the attempt
 * that consumed it is this payout's for this binding (its reference is the
 * binding's), else a refusal — and a security signal when it is someone
 * else's attempt, or no attempt at all. 0 when decided, < 0 a store error. */
static int consumed(og_store *s, const og_payout_grant_view *g,
                    og_payout_work *w)
{
    char ref[OG_ID_MAX + 32];
    og_operation op;
    int rc;

    if (!g->consumed_by_operation[0]) {
        refuse(s, w, OG_PAYOUT_WORKER_GRANT_CONSUMED, true);
        return 0;
    }
    rc = og_operation_get(s, g->consumed_by_operation, &op);
    if (rc < 0)
        return rc;
    snprintf(ref, sizeof ref, "%s-a%lld", g->payout_id,
             (long long)g->attempt_number);
    if (rc == 1 && op.kind == OG_OP_KIND_PAYOUT &&
        strcmp(op.client_reference, ref) == 0) {
        w->end = OG_PAYOUT_WORK_DUPLICATE;
        w->attempt_status = op.status;
        snprintf(w->attempt_id, sizeof w->attempt_id, "%s", op.operation_id);
        ack(s, w);
        return 0;
    }
    /* rc == 0: the consuming attempt was archived (terminal long ago): no
     * signal; otherwise another binding's attempt holds this grant. */
    refuse(s, w, OG_PAYOUT_WORKER_GRANT_CONSUMED, rc == 1);
    return 0;
}

/* The requester's facts the decision behind grant g captured (PX11) into
 * *out. 0, or < 0: the store's error, or OG_EINTERNAL when the grant's
 * decision is missing, not Allowed or another payout's — every grant is
 * issued by the Allowed decision of its own payout, in the decision's
 * transaction (and the schema's foreign key holds the row), so any of
 * these is a broken store: a defect to see, never a reason to allow or to
 * refuse a payout. */
static int decision_facts(og_store *s, const og_payout_grant_view *g,
                          og_payout_context *out)
{
    og_payout_decision_view d;
    int rc;

    rc = og_payout_decision_get(s, g->decision_id, &d);
    if (rc == OG_EPAYOUT_DECISION) /* the store's own binding: not an id */
        return OG_EINTERNAL;
    if (rc < 0)
        return rc;
    if (rc == 0 || d.outcome != OG_PAYOUT_ALLOWED ||
        strcmp(d.payout_id, g->payout_id) != 0)
        return OG_EINTERNAL;
    out->requester.approval_limit = d.requester_approval_limit;
    /* An approver's acknowledgment of the destination at the version it
     * evaluated (PC7, lib/core/payout.c): the recheck honours it for that
     * version, and a destination changed since asks again. */
    out->acknowledged_destination_version =
        d.acknowledged_destination_version;
    return 0;
}

/* Validation (docs/payouts.md, section 5, step 2): the grant's own checks
 * in order, then the context and the pure recheck. true and *v VALID (with
 * the grant) when the worker may claim; false when w says how it ended. */
static bool validate(og_store *s, const og_payout_worker_cfg *c,
                     og_payout_work *w, og_payout_grant_view *g,
                     og_payout_exec_verdict *v)
{
    og_payout_snapshot snap;
    og_payout_grant_binding b;
    int rc;

    rc = og_payout_grant_get(s, w->job.grant_id, g);
    if (rc == OG_EGRANT_ID) /* not even an id: no grant can be it */
        rc = 0;
    if (rc < 0) { /* the store could not say: ask again later */
        postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc,
                 c->postpone_us);
        return false;
    }
    if (rc == 0) {
        refuse(s, w, OG_PAYOUT_WORKER_GRANT_UNKNOWN, false);
        return false;
    }
    if (strcmp(g->payout_id, w->job.payout_id) != 0) {
        refuse(s, w, OG_PAYOUT_WORKER_BINDING_MISMATCH, true);
        return false;
    }
    /* The job's payout's grant: its decision is the job's from here on
     * (another payout's is never reported as this job's). */
    snprintf(w->decision_id, sizeof w->decision_id, "%s", g->decision_id);
    if (strcmp(g->operation, OG_PAYOUT_OPERATION) != 0 ||
        strcmp(g->audience, c->audience) != 0) {
        refuse(s, w, OG_PAYOUT_WORKER_PRESENTER_NOT_AUDIENCE, true);
        return false;
    }
    if (g->revoked_at_us != 0 || g->state == OG_PAYOUT_GRANT_REVOKED) {
        refuse(s, w, OG_PAYOUT_WORKER_GRANT_REVOKED, false);
        return false;
    }
    if (g->consumed_at_us != 0 || g->state == OG_PAYOUT_GRANT_CONSUMED) {
        if ((rc = consumed(s, g, w)) < 0)
            postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc,
                     c->postpone_us);
        return false;
    }
    if (g->state == OG_PAYOUT_GRANT_EXPIRED) {
        refuse(s, w, OG_PAYOUT_WORKER_GRANT_EXPIRED, false);
        return false;
    }
    if (g->read_at_us < g->not_before_us) { /* PX9 */
        postpone(s, w, OG_PAYOUT_WORKER_NONE, 0,
                 g->not_before_us - g->read_at_us);
        return false;
    }

    /* The context as it stands now, the day the decision reserved on. */
    rc = og_payout_context_read(s, w->job.payout_id, g->not_before_us, &snap);
    if (rc < 0 || snap.ctx.unavailable) {
        postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc < 0 ? rc : 0,
                 c->postpone_us);
        return false;
    }
    /* The requester's facts as the decision captured them (docs/payouts.md,
     * section 5; PX11), never read anew: the requester acted then, not
     * now. A decision is never changed, so it needs no common snapshot
     * with the context. */
    if ((rc = decision_facts(s, g, &snap.ctx)) < 0) {
        postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc,
                 c->postpone_us);
        return false;
    }
    b.terms_fingerprint = g->terms_fingerprint;
    b.executable_payout_version = g->executable_payout_version;
    rc = og_payout_evaluate_for_execution(&snap.ctx, &b, v);
    if (rc < 0) { /* facts the core refuses: a defect to see, not to use */
        postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc,
                 c->postpone_us);
        return false;
    }
    switch (v->outcome) {
    case OG_PAYOUT_EXEC_VALID:
        return true;
    case OG_PAYOUT_EXEC_POSTPONED:
        postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, 0,
                 c->postpone_us);
        return false;
    case OG_PAYOUT_EXEC_REFUSED:
        break;
    }
    if (v->reason == OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE) {
        /* PX10: the grant was read before a concurrent claim of it
         * committed and the payout after: the payout is Executing because
         * the grant is consumed now. Read it again, so that a delivery
         * racing the winner is told what it is — a duplicate of this
         * binding's attempt — and not a refusal of a payout that is in
         * fact running under this very grant. */
        rc = og_payout_grant_get(s, w->job.grant_id, g);
        if (rc == 1 && strcmp(g->payout_id, w->job.payout_id) == 0 &&
            (g->consumed_at_us != 0 ||
             g->state == OG_PAYOUT_GRANT_CONSUMED)) {
            if ((rc = consumed(s, g, w)) < 0)
                postpone(s, w, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE, rc,
                         c->postpone_us);
            return false;
        }
    }
    refuse(s, w, v->reason, v->reason == OG_PAYOUT_WORKER_BINDING_MISMATCH);
    return false;
}

/* The worker reason a refusing claim outcome reports: the code with the
 * outcome's stable text (the lists share their codes), else claim.lost —
 * an outcome this build does not name is a claim that did not happen. */
static og_payout_worker_reason claim_reason(og_payout_claim_outcome o)
{
    const char *text = og_payout_claim_outcome_name(o);

    for (int i = 0; i < OG_PAYOUT_WORKER_REASON_COUNT; i++)
        if (strcmp(text, og_payout_worker_reason_name(
                             (og_payout_worker_reason)i)) == 0)
            return (og_payout_worker_reason)i;
    return OG_PAYOUT_WORKER_CLAIM_LOST;
}

/* The claim (step 3). true with *r CLAIMED; false when w says how it
 * ended. */
static bool claim(og_store *s, const og_payout_worker_cfg *c,
                  og_payout_work *w, const og_payout_exec_verdict *v,
                  og_payout_claim_result *r)
{
    og_payout_claim_req q;
    og_payout_worker_reason why;
    int rc;

    memset(&q, 0, sizeof q);
    q.grant_id = w->job.grant_id;
    q.worker_id = c->worker_id;
    q.audience = c->audience;
    q.relied = v->relied;
    q.policy_version = v->recheck.policy_version ? v->recheck.policy_version
                                                 : OG_PAYOUT_POLICY_VERSION;
    q.send_window_us = c->send_window_us;
    q.lease_us = c->attempt_lease_us;
    q.final_absence_margin_us = absence_margin(c);
    rc = og_payout_claim(s, &q, r);
    if (rc < 0) {
        /* OG_ESTORE_UNAVAILABLE: the claim may have committed. Send
         * nothing, acknowledge nothing: a redelivery reports DUPLICATE, or
         * the sweeper finds the Admitted attempt (P2). Any other error
         * wrote nothing; the job is redelivered after its lease. */
        w->end = OG_PAYOUT_WORK_CLAIM_UNCONFIRMED;
        w->error = rc;
        return false;
    }
    switch (r->outcome) {
    case OG_PAYOUT_CLAIM_CLAIMED:
        snprintf(w->attempt_id, sizeof w->attempt_id, "%s",
                 r->attempt.operation_id);
        w->attempt_status = r->attempt.status;
        ack(s, w); /* the job's work is the claim's: the attempt is owned */
        return true;
    case OG_PAYOUT_CLAIM_DUPLICATE:
        w->end = OG_PAYOUT_WORK_DUPLICATE;
        if (r->has_attempt) {
            snprintf(w->attempt_id, sizeof w->attempt_id, "%s",
                     r->attempt.operation_id);
            w->attempt_status = r->attempt.status;
        }
        ack(s, w);
        return false;
    default:
        break;
    }
    /* Every other outcome refused, and nothing was written: its stable
     * text is a worker reason code (claim.lost, claim.context-changed,
     * binding.mismatch, grant.revoked, grant.expired,
     * presenter.not-audience), counted under that code. */
    why = claim_reason(r->outcome);
    refuse(s, w, why,
           why == OG_PAYOUT_WORKER_CLAIM_LOST ||
               why == OG_PAYOUT_WORKER_BINDING_MISMATCH ||
               why == OG_PAYOUT_WORKER_PRESENTER_NOT_AUDIENCE);
    return false;
}

/* Evidence text for an answer: identifiers and codes only (PX2). */
static void answer_evidence(const og_provider_outcome *a, char *out,
                            size_t len)
{
    snprintf(out, len, "create answer: class=%s reason=%s reference=%s",
             og_outcome_class_name(a->cls), a->reason,
             a->reference[0] ? a->reference : "-");
}

/* Records what the answer decided (step 5), expecting Started at the
 * claimer's owner version; retried while the store fails and
 * record_timeout allows, reading the attempt between tries (PX6). */
static void record(og_store *s, const og_payout_worker_cfg *c,
                   og_payout_work *w, const og_operation *att,
                   const og_exec_decision *d)
{
    og_op_outcome o;
    og_payout_resolution res;
    char evidence[OG_EVIDENCE_MAX + 1];
    int64_t until = mono_us() + c->record_timeout_us;
    og_operation now;
    int rc;

    answer_evidence(&w->answer, evidence, sizeof evidence);
    memset(&o, 0, sizeof o);
    o.status = d->status;
    o.reason = d->reason;
    o.provider_reference = d->reference;
    o.actor = c->worker_id;
    o.evidence = evidence;
    for (;;) {
        rc = og_payout_resolve(s, att->operation_id,
                               OG_OP_BIT(OG_OP_STARTED), att->owner_version,
                               &o, &res);
        if (rc == 0)
            break;
        w->error = rc;
        if (rc != OG_ESTORE_UNAVAILABLE || mono_us() >= until)
            return; /* the sweeper and the reconciler settle it */
        /* Unknown whether it committed: read, then try again only if it
         * is still ours and Started. */
        if (og_operation_get(s, att->operation_id, &now) == 1) {
            if (now.status == d->status &&
                now.owner_version == att->owner_version) {
                w->error = 0;
                w->recorded = true;
                w->attempt_status = d->status;
                return;
            }
            if (now.status != OG_OP_STARTED ||
                now.owner_version != att->owner_version)
                break; /* moved on: as NOT_RECORDED below */
        }
        sleep_us(100 * MS);
    }
    if (rc == 0 && res.outcome == OG_PAYOUT_RESOLVE_RESOLVED) {
        w->error = 0;
        w->recorded = true;
        w->attempt_status = d->status;
        return;
    }
    /* Not this worker's any more (a takeover), or not its payout's active
     * attempt: a decisive answer is late evidence (PX6). */
    if (d->status == OG_OP_SUCCEEDED || d->status == OG_OP_FAILED) {
        og_payout_evidence_req e;

        memset(&e, 0, sizeof e);
        e.operation_id = att->operation_id;
        e.status = d->status;
        e.reason = d->reason;
        e.provider_reference = d->reference;
        e.source = "late-response";
        e.evidence = evidence;
        e.actor = c->worker_id;
        if (og_payout_evidence(s, &e, &res) == 0 &&
            res.outcome == OG_PAYOUT_RESOLVE_RESOLVED) {
            w->late_evidence = true;
            w->attempt_status = d->status;
            return;
        }
    }
    if (og_operation_get(s, att->operation_id, &now) == 1)
        w->attempt_status = now.status;
}

/* Sends the attempt (steps 4 and 5, after the confirmed start): PX3-PX6.
 * token and cred are wiped by the caller. */
static void send_attempt(og_store *s, const og_payout_worker_cfg *c,
                         og_payout_work *w, const og_operation *att,
                         og_provider *p, const char *token)
{
    og_exec_decision d;
    bool may;
    int rc;

    for (;;) {
        og_provider_outcome a;

        rc = og_provider_create_payout(p, att->idempotency_key, token,
                                       att->amount, att->currency,
                                       att->client_reference,
                                       att->submit_by_us,
                                       c->provider_timeout_us, &a);
        if (rc < 0) { /* nothing sent by this call */
            w->error = rc;
            if (w->sends == 0)
                w->end = OG_PAYOUT_WORK_NOT_SENT;
            return; /* Started: the sweeper makes it Unknown */
        }
        w->sends++;
        w->answer = a;
        og_exec_after_create(&a, &d);
        if (d.action == OG_EXEC_RETRY_LATER) { /* PX4 */
            if (w->sends >= c->max_sends)
                return;
            sleep_us(d.retry_after_us > 0
                         ? (d.retry_after_us < c->send_window_us
                                ? d.retry_after_us
                                : c->send_window_us)
                         : 200 * MS);
            may = false;
            if (og_op_may_submit(s, att->operation_id, att->owner_version,
                                 &may) != 0 ||
                !may)
                return;
            continue;
        }
        if (d.action != OG_EXEC_RECORD)
            return;
        if (d.status == OG_OP_UNKNOWN && strcmp(a.reason, "pending") == 0)
            return; /* PX5: accepted, not completed */
        record(s, c, w, att, &d);
        return;
    }
}

int og_payout_work_once(og_store *s, const og_payout_worker_cfg *c,
                        og_payout_work *out)
{
    og_payout_work w;
    og_payout_grant_view g;
    og_payout_exec_verdict v;
    og_payout_claim_result r;
    og_provider *p = NULL;
    char token[OG_PAYOUT_TOKEN_MAX + 1];
    char cred[OG_PAYOUT_CREDENTIAL_MAX + 1];
    bool started = false;
    int rc;

    if (!s || !out || og__payout_worker_cfg_check(c) != 0)
        return OG_EINVAL;
    memset(&w, 0, sizeof w);
    w.attempt_status = OG_OP_ADMITTED;
    rc = og_payout_job_take(s, c->job_lease_us, &w.job);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        w.end = OG_PAYOUT_WORK_IDLE;
        *out = w;
        return 0;
    }
    if (!validate(s, c, &w, &g, &v) || !claim(s, c, &w, &v, &r)) {
        *out = w;
        return 0;
    }

    /* PX2: the secrets, only now that the claim is ours and before the
     * start: a worker that cannot have them stops with its attempt still
     * Admitted, which provably sent nothing, so the sweeper ends it
     * NotStarted and the payout waits for fresh authority (docs/payouts.md,
     * section 8). Wiped on every path below. */
    w.end = OG_PAYOUT_WORK_NOT_SENT;
    rc = og_payout_destination_token(s, r.attempt.account_id,
                                     v.relied.destination, token,
                                     sizeof token);
    if (rc != 1) {
        w.error = rc < 0 ? rc : 0;
        goto out;
    }
    if (credential_get(c->credential, c->credential_arg, cred,
                       sizeof cred) != 0)
        goto out;
    rc = og_provider_open(c->provider_url, cred[0] ? cred : NULL, c->table,
                          &p);
    sodium_memzero(cred, sizeof cred);
    if (rc < 0) {
        w.error = rc;
        goto out;
    }

    /* PX1: a confirmed start, or nothing. */
    rc = og_op_start(s, r.attempt.operation_id, r.attempt.owner_version,
                     c->worker_id, &started);
    if (rc < 0) {
        w.end = OG_PAYOUT_WORK_START_UNCONFIRMED;
        w.error = rc;
        goto out;
    }
    if (!started)
        goto out;
    w.attempt_status = OG_OP_STARTED;
    w.end = OG_PAYOUT_WORK_SENT;
    if (c->on_started)
        c->on_started(c->on_started_arg, r.attempt.operation_id);
    send_attempt(s, c, &w, &r.attempt, p, token);
out:
    og_provider_free(p);
    sodium_memzero(token, sizeof token);
    sodium_memzero(cred, sizeof cred);
    *out = w;
    return 0;
}

/* ===========================================================================
 * The sweeper (SW1-SW4, PX7)
 * ========================================================================= */

int og_payout_sweep_once(og_store *s, const char *actor, int limit,
                         og_payout_sweep_stats *out)
{
    og_op_filter f = {OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED),
                      true, 0, limit, OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT)};
    og_payout_sweep_stats st;
    og_op_list l = {0};
    int rc;

    if (!s || !out || !actor || !og_id_valid(actor) || limit < 1 ||
        limit > 1000)
        return OG_EINVAL;
    memset(&st, 0, sizeof st);
    if ((rc = og_op_scan(s, &f, &l)) != 0)
        return rc;
    st.scanned = (int)l.n;
    for (size_t i = 0; i < l.n; i++) {
        const og_operation *seen = &l.v[i];
        og_operation op;
        og_exec_decision d;
        og_op_outcome o;
        og_payout_resolution res;
        bool taken = false;

        if (seen->kind != OG_OP_KIND_PAYOUT) { /* SW4 */
            st.later++;
            continue;
        }
        if (og_op_takeover(s, seen->operation_id, seen->owner_version, actor,
                           &op, &taken) != 0) {
            st.errors++;
            continue;
        }
        if (!taken) {
            st.later++;
            continue;
        }
        st.taken++;
        og_payout_after_takeover(&op, &d);
        if (d.action != OG_EXEC_RECORD) {
            st.later++;
            continue;
        }
        memset(&o, 0, sizeof o);
        o.status = d.status;
        o.reason = d.reason;
        o.actor = actor;
        rc = og_payout_resolve(s, op.operation_id, OG_OP_BIT(op.status),
                               op.owner_version, &o, &res);
        if (rc != 0) {
            st.errors++; /* taken over, lease running: a later pass */
            continue;
        }
        if (res.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
            st.later++;
            continue;
        }
        if (d.status == OG_OP_NOT_STARTED)
            st.not_started++;
        else
            st.unknown++;
    }
    og_op_list_free(&l);
    *out = st;
    return 0;
}

/* ===========================================================================
 * The reconciler (RC1-RC8, PX8)
 * ========================================================================= */

int og__payout_reconciler_cfg_check(const og_payout_reconciler_cfg *c)
{
    const og_provider_properties *p;

    if (!c || !c->actor || !og_id_valid(c->actor) || !c->provider_url ||
        !c->table || !c->credential || !c->backoff_us || c->backoff_n < 1 ||
        c->backoff_n > 16 || c->escalate_after_us < 0 ||
        c->escalate_after_us > OG_PAYOUT_LEASE_MAX_US * 365 ||
        c->max_per_pass < 1 || c->max_per_pass > 1000 ||
        c->provider_timeout_us <= 0)
        return OG_EINVAL;
    for (int i = 0; i < c->backoff_n; i++)
        if (!in_range(c->backoff_us[i], MS, OG_PAYOUT_LEASE_MAX_US))
            return OG_EINVAL;
    p = og_provider_table_properties(c->table);
    if (!p || !(p->lookup & OG_PROVIDER_LOOKUP_REFERENCE))
        return OG_EINVAL;
    return 0;
}

/* The lookup for op (taken over): 1, 0, or < 0 when it could not be asked
 * (no token at the payout's destination version, no credential, a client
 * error). *payout_id is the attempt's payout. */
static int look_up(og_store *s, const og_payout_reconciler_cfg *c,
                   const og_operation *op, og_provider_outcome *lo,
                   char payout_id[OG_ID_MAX + 1])
{
    og_payout_grant_view g;
    og_payout_view pv;
    og_provider *p = NULL;
    char token[OG_PAYOUT_TOKEN_MAX + 1];
    char cred[OG_PAYOUT_CREDENTIAL_MAX + 1];
    int rc;

    payout_id[0] = '\0';
    if ((rc = og_payout_grant_get(s, op->grant_id, &g)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    snprintf(payout_id, OG_ID_MAX + 1, "%s", g.payout_id);
    if ((rc = og_payout_get(s, g.payout_id, &pv)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    /* The terms' destination version: a payout's terms never change, and
     * the token at that version is the one the attempt was sent with. A
     * token rotated since is no evidence about this attempt. */
    rc = og_payout_destination_token(s, op->account_id,
                                     pv.destination_version, token,
                                     sizeof token);
    if (rc != 1) {
        sodium_memzero(token, sizeof token);
        return rc < 0 ? rc : OG_EPROVIDER_UNAVAILABLE;
    }
    if (credential_get(c->credential, c->credential_arg, cred,
                       sizeof cred) != 0) {
        sodium_memzero(token, sizeof token);
        return OG_EPROVIDER_UNAVAILABLE;
    }
    rc = og_provider_open(c->provider_url, cred[0] ? cred : NULL, c->table,
                          &p);
    sodium_memzero(cred, sizeof cred);
    if (rc == 0)
        rc = og_provider_lookup_payout(p, op->client_reference, token,
                                       op->amount, op->currency,
                                       c->provider_timeout_us, lo);
    og_provider_free(p);
    sodium_memzero(token, sizeof token);
    return rc;
}

static void reconcile_one(og_store *s, const og_payout_reconciler_cfg *c,
                          const og_operation *seen,
                          og_payout_reconcile_stats *st)
{
    const og_provider_properties *props =
        og_provider_table_properties(c->table);
    og_payout_lookup_facts f;
    og_payout_lookup_decision d;
    og_payout_resolution res;
    og_provider_outcome lo;
    og_operation op;
    og_op_outcome o;
    char payout_id[OG_ID_MAX + 1], evidence[OG_EVIDENCE_MAX + 1];
    int64_t escalate_at;
    bool taken = false, flag = false;
    int lrc, rc;

    if (seen->kind != OG_OP_KIND_PAYOUT || seen->status != OG_OP_UNKNOWN) {
        st->later++;
        return;
    }
    if (og_op_takeover(s, seen->operation_id, seen->owner_version, c->actor,
                       &op, &taken) != 0) {
        st->errors++;
        return;
    }
    if (!taken) {
        st->later++;
        return;
    }
    memset(&lo, 0, sizeof lo);
    lrc = look_up(s, c, &op, &lo, payout_id);
    if (lrc >= 0)
        st->looked_up++;
    else if (lrc != OG_EPROVIDER_UNAVAILABLE)
        st->errors++;
    /* The deadline: submit_by + escalate_after, never before absence can
     * be final (docs/payouts.md, section 6: 60 minutes or the processing
     * window, the later). */
    escalate_at = op.submit_by_us + c->escalate_after_us;
    if (op.final_absence_after_us > escalate_at)
        escalate_at = op.final_absence_after_us;
    memset(&f, 0, sizeof f);
    f.lookup = lrc;
    f.cls = lo.cls;
    f.reason = lo.reason;
    f.not_found_final = props->not_found_final;
    f.now_us = op.taken_at_us;
    f.final_absence_after_us = op.final_absence_after_us;
    f.escalate_at_us = escalate_at;
    f.lookups = op.lookups;
    og_payout_after_lookup(&f, &d);

    if (d.action == OG_PAYOUT_LOOKUP_LATER) {
        rc = og_payout_reconcile_later(
            s, op.operation_id, op.owner_version,
            og_payout_lookup_delay(&f, c->backoff_us, c->backoff_n,
                                   OG_PAYOUT_LEASE_MAX_US),
            d.reason, c->actor, &flag);
        if (rc != 0)
            st->errors++;
        else
            st->later++;
        return;
    }
    if (lrc == 1)
        snprintf(evidence, sizeof evidence,
                 "lookup %lld by reference %s: found, %s, provider "
                 "reference %s",
                 (long long)op.lookups + 1, op.client_reference, lo.reason,
                 lo.reference[0] ? lo.reference : "-");
    else
        snprintf(evidence, sizeof evidence,
                 "lookup %lld by reference %s: %s", (long long)op.lookups + 1,
                 op.client_reference,
                 lrc == 0 ? "not found" : "the provider could not be asked");
    memset(&o, 0, sizeof o);
    o.status = d.status;
    o.reason = d.reason;
    o.provider_reference =
        lrc == 1 && lo.reference[0] ? lo.reference : NULL;
    o.actor = c->actor;
    o.evidence = evidence;
    rc = og_payout_resolve(s, op.operation_id, OG_OP_BIT(OG_OP_UNKNOWN),
                           op.owner_version, &o, &res);
    if (rc != 0) {
        st->errors++;
        return;
    }
    if (res.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
        st->later++; /* the store refused it (P6's guard), or moved on */
        return;
    }
    switch (d.status) {
    case OG_OP_SUCCEEDED: st->succeeded++; break;
    case OG_OP_FAILED: st->failed++; break;
    case OG_OP_NOT_APPLIED: st->not_applied++; break;
    case OG_OP_NEEDS_RECONCILIATION: st->escalated++; break;
    case OG_OP_ADMITTED:
    case OG_OP_STARTED:
    case OG_OP_UNKNOWN:
    case OG_OP_NOT_STARTED: break;
    }
    if (d.returned && lo.reference[0]) { /* RC2, P8 */
        flag = false;
        rc = og_payout_return_record(s, res.payout_id[0] ? res.payout_id
                                                         : payout_id,
                                     lo.reference, c->actor, evidence, &flag);
        if (rc != 0)
            st->errors++;
        else if (flag)
            st->returned++;
    }
}

int og_payout_reconcile_once(og_store *s, const og_payout_reconciler_cfg *c,
                             og_payout_reconcile_stats *out)
{
    og_op_filter f;
    og_payout_reconcile_stats st;
    og_op_list l = {0};
    int rc;

    if (!s || !out || og__payout_reconciler_cfg_check(c) != 0)
        return OG_EINVAL;
    memset(&f, 0, sizeof f);
    f.statuses = OG_OP_BIT(OG_OP_UNKNOWN);
    f.lease_expired = true;
    f.limit = c->max_per_pass;
    f.kinds = OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT);
    memset(&st, 0, sizeof st);
    if ((rc = og_op_scan(s, &f, &l)) != 0)
        return rc;
    st.scanned = (int)l.n;
    for (size_t i = 0; i < l.n; i++)
        reconcile_one(s, c, &l.v[i], &st);
    og_op_list_free(&l);
    *out = st;
    return 0;
}
