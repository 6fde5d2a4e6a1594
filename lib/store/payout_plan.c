/*
 * payout_plan.c — the payout store's pure pieces, shared by both backends
 * (lib/store/sqlite/, lib/store/postgres/): what the facts a backend read
 * mean as a context (og__payout_snapshot_build), what a decision, a claim
 * or a resolution on them writes (og__payout_plan_decide, _claim,
 * _resolve), what a write that wrote nothing reports (og__payout_*_outcome)
 * and a payout grant's derived state. No I/O, no clock, no randomness: the
 * backends read and write, this decides, so the two engines cannot decide
 * differently. Pure, yet in the store layer: what it reads and writes are
 * the store's records (store_int.h, oncegate/payout_store.h); the policy
 * it applies is the core's.
 *
 * Invariants:
 *   PP1  A decision's verdict is always the pure core's (lib/core/payout.c)
 *        over the facts read in the decision's own transaction: nothing
 *        here sets an outcome, except og__payout_plan_limit_taken, which
 *        writes the one the core would give when the counters it read were
 *        overtaken by a concurrent reservation (Denied tenant.daily-limit).
 *   PP2  The intent is bound from the record, never from a request: the
 *        terms are the payout's as stored; only the version the requester
 *        acted on comes from the request (0: the version read).
 *   PP3  Stored facts the core refuses are a defect (OG_EINTERNAL), never
 *        an input error and never a Deferred decision: the schema's checks
 *        forbid them, so something is wrong that a wait will not fix.
 *   PP4  A claim's verdict is decided here, from the facts read in the
 *        claim's own transaction, in one order for both engines — the
 *        worker's (docs/payouts.md, section 5): the binding (not a payout
 *        grant: MISMATCH; another audience: NOT_AUDIENCE), then the grant's
 *        row (revoked: REVOKED; consumed: DUPLICATE when by this binding's
 *        attempt — recognised by the consuming attempt's reference, which
 *        only this binding's claim writes —, else LOST; outside its window:
 *        EXPIRED), then the fence (the context and the store's current
 *        policy release: CONTEXT_CHANGED). Nothing but CLAIMED lets the
 *        claim write (S6, lib/store/dispatch.h).
 *   PP5  The reservation follows the attempt's outcome (docs/payouts.md, P5):
 *        paid on Succeeded; released on Failed, NotStarted and NotApplied;
 *        held on Unknown and NeedsReconciliation. Only a terminal outcome
 *        clears the payout's active attempt, and it always moves the
 *        reservation with it: no reservation is released while its attempt
 *        lives, and none stays held once it cannot. The payout follows
 *        too: Paid, Failed, back to Approved (NotStarted, NotApplied: a new
 *        attempt needs a new decision and grant, docs/payouts.md, section 4,
 *        "Re-authorization: a materially new attempt"), or Unknown.
 *   PP6  A write that wrote nothing is answered from the backend's report
 *        of the records as its own transaction or statement saw them (M27),
 *        in one order for both engines: the record missing or taken, then
 *        what it names missing, then a fixed field that differs; a report
 *        that explains nothing at the version expected is a change that
 *        committed in between, VERSION_CONFLICT.
 *   PP7  A payout grant is valid while not_before <= now < expires_at on
 *        the store's clock, with no admission leeway, in every place that
 *        asks: the claim's verdict and its write, the grant's derived state
 *        (Expired from now >= expires_at) and the expiry, which releases a
 *        reservation only after expires_at + the cleanup margin. One clock
 *        and one edge: no claim can succeed after its grant reads Expired,
 *        and the janitor never releases a reservation a claim may still
 *        take (docs/payouts.md, section 5).
 */
#include <stdio.h>
#include <string.h>

#include "store/store_int.h"

/* ===========================================================================
 * Names
 * ========================================================================= */

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#define NAME_OF(table, v)                                                      \
    ((unsigned)(v) < COUNT_OF(table) ? table[(unsigned)(v)] : "?")

static const char *const write_names[] = {
#define X(name, text) text,
    OG_PAYOUT_WRITE_MAP(X)
#undef X
};

static const char *const unavailable_names[] = {
#define X(name, text) text,
    OG_PAYOUT_UNAVAILABLE_MAP(X)
#undef X
};

static const char *const grant_state_names[] = {
#define X(name, text) text,
    OG_PAYOUT_GRANT_STATE_MAP(X)
#undef X
};

const char *og_payout_write_name(og_payout_write w)
{
    return NAME_OF(write_names, w);
}

const char *og_payout_unavailable_name(og_payout_unavailable u)
{
    return NAME_OF(unavailable_names, u);
}

const char *og_payout_grant_state_name(og_payout_grant_state g)
{
    return NAME_OF(grant_state_names, g);
}

/* ===========================================================================
 * Facts, snapshot, plan
 * ========================================================================= */

static int parse_name(const char *text, const char *(*name)(int), int n)
{
    if (text == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(text, name(i)) == 0)
            return i;
    return -1;
}

static const char *state_name(int i)
{
    return og_payout_state_name((og_payout_state)i);
}

static const char *bstatus_name(int i)
{
    return og_payout_beneficiary_status_name((og_payout_beneficiary_status)i);
}

int og__payout_state_parse(const char *text)
{
    return parse_name(text, state_name, OG_PAYOUT_STATE_CANCELLED + 1);
}

int og__payout_bstatus_parse(const char *text)
{
    return parse_name(text, bstatus_name, OG_PAYOUT_BENEFICIARY_CLOSED + 1);
}

static const char *outcome_name(int i)
{
    return og_payout_outcome_name((og_payout_outcome)i);
}

static const char *reason_name(int i)
{
    return og_payout_reason_name((og_payout_reason)i);
}

int og__payout_outcome_parse(const char *text)
{
    return parse_name(text, outcome_name,
                      OG_PAYOUT_ESCALATION_RECOMMENDED + 1);
}

int og__payout_reason_parse(const char *text)
{
    return parse_name(text, reason_name, OG_PAYOUT_REASON_ALLOWED + 1);
}

void og_payout_snapshot_bind(og_payout_snapshot *s)
{
    og_payout_terms t;

    if (s == NULL)
        return;
    t.tenant_id = s->tenant_id;
    t.beneficiary_id = s->beneficiary_id;
    t.destination_id = s->destination_id;
    t.destination_version = s->ctx.payout.terms.destination_version;
    t.amount = s->amount;
    t.currency = s->currency;
    t.purpose = s->has_purpose ? s->purpose : NULL;
    s->ctx.payout.terms = t;
    s->ctx.intent.terms = t;
    s->ctx.destination.beneficiary_id = s->destination_beneficiary_id;
}

int og__payout_snapshot_build(const og__payout_facts *f,
                              og_payout_snapshot *out)
{
    og_payout_snapshot s;

    memset(&s, 0, sizeof s);
    s.ctx.observed_at_us = f->observed_at_us;
    if (!f->found) {
        s.ctx.unavailable = true;
        s.why = OG_PAYOUT_UNAVAILABLE_MISSING;
        *out = s;
        return 0;
    }
    /* Every money value of a payout, its tenant's limit and counters are
     * in one currency (the draft checks it; a tenant's currency never
     * changes): anything else is a defect (PP3). */
    if (strcmp(f->currency, f->tenant_currency) != 0 ||
        og_payout_amount_format(f->amount_minor, f->currency, s.amount,
                                sizeof s.amount) != 0)
        return OG_EINTERNAL;
    s.why = OG_PAYOUT_UNAVAILABLE_NONE;
    memcpy(s.payout_id, f->payout_id, sizeof s.payout_id);
    memcpy(s.tenant_id, f->tenant_id, sizeof s.tenant_id);
    memcpy(s.beneficiary_id, f->beneficiary_id, sizeof s.beneficiary_id);
    memcpy(s.destination_id, f->destination_id, sizeof s.destination_id);
    memcpy(s.destination_beneficiary_id, f->destination_beneficiary_id,
           sizeof s.destination_beneficiary_id);
    memcpy(s.currency, f->currency, sizeof s.currency);
    s.has_purpose = f->has_purpose;
    memcpy(s.purpose, f->purpose, sizeof s.purpose);
    s.amount_minor = f->amount_minor;
    memcpy(s.release_day, f->release_day, sizeof s.release_day);
    memcpy(s.settlement_time_zone, f->time_zone, sizeof s.settlement_time_zone);
    s.day_version = f->day_version;
    s.attempt_count = f->attempt_count;
    memcpy(s.active_attempt, f->active_attempt, sizeof s.active_attempt);

    s.ctx.tenant.payouts_suspended = f->payouts_suspended;
    s.ctx.tenant.daily_limit = f->daily_limit;
    s.ctx.tenant.paid_today = f->paid;
    s.ctx.tenant.reserved_today = f->reserved;
    s.ctx.tenant.settings_version = f->settings_version;
    s.ctx.beneficiary.verified = f->verified;
    s.ctx.beneficiary.status = f->beneficiary_status;
    s.ctx.beneficiary.version = f->beneficiary_version;
    s.ctx.destination.version = f->destination_record_version;
    s.ctx.destination.changed_at_us = f->destination_changed_at_us;
    s.ctx.payout.state = f->state;
    s.ctx.payout.version = f->version;
    s.ctx.payout.terms.destination_version = f->destination_version;
    s.ctx.intent.payout_version = f->version; /* PP2 */
    *out = s;
    og_payout_snapshot_bind(out);
    return 0;
}

int og__payout_plan_decide(const og__payout_facts *f,
                           const og__payout_decide_req *r,
                           og__payout_plan *out)
{
    og__payout_plan p;
    og_payout_snapshot s;
    int rc;

    memset(&p, 0, sizeof p);
    p.mode = r->reauthorize ? "reauthorize" : "submit";
    if ((rc = og__payout_snapshot_build(f, &s)) != 0)
        return rc;
    if (!s.ctx.unavailable) {
        if (r->payout_version != 0)
            s.ctx.intent.payout_version = r->payout_version; /* PP2 */
        s.ctx.requester.approval_limit = r->approval_limit;
        s.ctx.acknowledged_destination_version =
            r->acknowledged_destination_version;
    }
    rc = r->reauthorize
             ? og_payout_evaluate_reauthorization(
                   &s.ctx, s.active_attempt[0] != '\0', &p.verdict)
             : og_payout_evaluate(&s.ctx, &p.verdict);
    if (rc != 0)
        return OG_EINTERNAL; /* PP3 */
    p.allowed = p.verdict.outcome == OG_PAYOUT_ALLOWED;
    if (p.allowed) {
        p.from_state = og_payout_state_name(f->state);
        p.new_version = f->version + 1;
        p.attempt_number = f->attempt_count + 1;
    }
    *out = p;
    return 0;
}

void og__payout_plan_limit_taken(og__payout_plan *p)
{
    p->verdict.reason = OG_PAYOUT_REASON_DAILY_LIMIT;
    p->verdict.outcome = og_payout_reason_outcome(p->verdict.reason);
    p->allowed = false;
    p->from_state = NULL;
    p->new_version = 0;
    p->attempt_number = 0;
}

void og__payout_decision_fill(const og__payout_decide_req *r,
                              const og__payout_facts *f,
                              const og__payout_plan *p, int64_t decided_at_us,
                              og_payout_decision *out)
{
    memset(out, 0, sizeof *out);
    memcpy(out->decision_id, r->decision_id, sizeof out->decision_id);
    out->verdict = p->verdict;
    out->observed_at_us = f->observed_at_us;
    out->decided_at_us = decided_at_us;
    out->issued = p->allowed;
    memcpy(out->settles_decision_id, r->settles_decision_id,
           sizeof out->settles_decision_id);
    out->acknowledged_destination_version =
        r->acknowledged_destination_version;
    if (p->allowed) {
        memcpy(out->grant_id, r->grant_id, sizeof out->grant_id);
        memcpy(out->job_id, r->job_id, sizeof out->job_id);
        out->attempt_number = p->attempt_number;
        out->executable_payout_version = p->new_version;
        out->reserved_minor = f->amount_minor;
        memcpy(out->release_day, f->release_day, sizeof out->release_day);
    }
}

/* ===========================================================================
 * What a write that may write nothing did (PP6)
 * ========================================================================= */

og_payout_put_result og__payout_put_outcome(int64_t expected_version,
                                            const og__payout_put_report *r)
{
    og_payout_put_result out = {OG_PAYOUT_WRITTEN, 0};

    if (r->written) {
        out.version = r->version;
        return out;
    }
    if (expected_version == 0)
        /* A create: the record was there (or came, concurrently), or what
         * it names is not. */
        out.outcome = r->exists || r->refs_exist ? OG_PAYOUT_VERSION_CONFLICT
                                                 : OG_PAYOUT_NOT_FOUND;
    else if (!r->exists)
        out.outcome = OG_PAYOUT_NOT_FOUND;
    else if (r->stored_version != expected_version)
        out.outcome = OG_PAYOUT_VERSION_CONFLICT;
    else if (!r->fixed_same)
        out.outcome = OG_PAYOUT_REFUSED;
    else if (!r->refs_exist)
        out.outcome = OG_PAYOUT_NOT_FOUND;
    else
        /* At the expected version when read, yet not changed: a concurrent
         * change committed in between (PostgreSQL re-checks after a
         * wait). */
        out.outcome = OG_PAYOUT_VERSION_CONFLICT;
    return out;
}

bool og__payout_draft_outcome(const og__payout_draft_report *r,
                              og_payout_put_result *out)
{
    og_payout_put_result res = {OG_PAYOUT_WRITTEN, 0};
    bool explained = true;

    if (r->written)
        res.version = 1;
    else if (r->payout_exists)
        res.outcome = OG_PAYOUT_VERSION_CONFLICT; /* the id is taken */
    else if (!r->tenant_exists || !r->beneficiary_exists ||
             !r->destination_exists)
        res.outcome = OG_PAYOUT_NOT_FOUND;
    else if (!r->currency_matches)
        res.outcome = OG_PAYOUT_REFUSED; /* not the tenant's currency */
    else {
        res.outcome = OG_PAYOUT_VERSION_CONFLICT;
        explained = false;
    }
    *out = res;
    return explained;
}

og_payout_put_result og__payout_cancel_outcome(
    int64_t expected_version, const og__payout_cancel_report *r)
{
    og_payout_put_result out = {OG_PAYOUT_WRITTEN, 0};

    if (r->written)
        out.version = r->version;
    else if (!r->found)
        out.outcome = OG_PAYOUT_NOT_FOUND;
    else
        /* At the version expected, yet not cancelled: its state does not
         * allow it (Executing, Unknown, an active attempt, terminal). */
        out.outcome = r->seen_version != expected_version
                          ? OG_PAYOUT_VERSION_CONFLICT
                          : OG_PAYOUT_REFUSED;
    return out;
}

og_payout_put_result og__payout_edit_outcome(int64_t expected_version,
                                             const og__payout_edit_report *r)
{
    og_payout_put_result out = {OG_PAYOUT_WRITTEN, 0};

    if (r->written)
        out.version = r->version;
    else if (!r->found)
        out.outcome = OG_PAYOUT_NOT_FOUND;
    else if (r->seen_version != expected_version)
        out.outcome = OG_PAYOUT_VERSION_CONFLICT;
    else if (!r->draft || !r->tenant_same || !r->currency_matches)
        /* decided, cancelled or past: its terms are history; a tenant and
         * its currency are fixed */
        out.outcome = OG_PAYOUT_REFUSED;
    else if (!r->beneficiary_exists || !r->destination_exists)
        out.outcome = OG_PAYOUT_NOT_FOUND;
    else
        /* At the version expected when read, yet not changed: a concurrent
         * change committed in between. */
        out.outcome = OG_PAYOUT_VERSION_CONFLICT;
    return out;
}

og_revoke_outcome og__payout_revoke_outcome(const og__payout_revoke_report *r)
{
    if (r->revoked)
        return OG_REVOKE_REVOKED;
    return r->payout_grant ? OG_REVOKE_ALREADY_USED_OR_REVOKED
                           : OG_REVOKE_NOT_ISSUED;
}

og_payout_grant_state og__payout_grant_state(bool consumed, bool revoked,
                                             int64_t expires_at_us,
                                             int64_t now_us)
{
    if (consumed)
        return OG_PAYOUT_GRANT_CONSUMED;
    if (revoked)
        return OG_PAYOUT_GRANT_REVOKED;
    /* The claim admits while now < expires_at, no leeway (PP7). */
    if (expires_at_us <= now_us)
        return OG_PAYOUT_GRANT_EXPIRED;
    return OG_PAYOUT_GRANT_ISSUED;
}

/* ===========================================================================
 * The claim (og_payout_claim, PP4)
 * ========================================================================= */

static const char *const claim_names[] = {
#define X(name, text) text,
    OG_PAYOUT_CLAIM_MAP(X)
#undef X
};

const char *og_payout_claim_outcome_name(og_payout_claim_outcome o)
{
    return NAME_OF(claim_names, o);
}

int og__payout_attempt_names(const char *payout_id, int64_t attempt,
                             char key[OG_ID_MAX + 1],
                             char reference[OG_ID_MAX + 1])
{
    char k[OG_ID_MAX + 32], ref[OG_ID_MAX + 32];
    int nk, nr;

    if (!payout_id || attempt < 1)
        return -1;
    nk = snprintf(k, sizeof k, "payout-%s-a%lld", payout_id,
                  (long long)attempt);
    nr = snprintf(ref, sizeof ref, "%s-a%lld", payout_id, (long long)attempt);
    if (nk < 0 || nr < 0 || (size_t)nk > OG_ID_MAX || (size_t)nr > OG_ID_MAX)
        return -1;
    memcpy(key, k, (size_t)nk + 1);
    memcpy(reference, ref, (size_t)nr + 1);
    return 0;
}

int og__payout_plan_claim(const og__payout_claim_facts *f,
                          const og__payout_claim_req *r,
                          og__payout_claim_plan *out)
{
    og__payout_claim_plan p;
    char text[OG_PAYOUT_MONEY_TEXT_MAX + 1];

    memset(&p, 0, sizeof p);
    if (!f->found) {
        p.outcome = OG_PAYOUT_CLAIM_MISMATCH;
        *out = p;
        return 0;
    }
    if (strcmp(f->audience, r->audience) != 0) {
        p.outcome = OG_PAYOUT_CLAIM_NOT_AUDIENCE;
        *out = p;
        return 0;
    }
    /* The names exist for every binding the schema allows (ids are at most
     * OG_ID_MAX, and the store checked the payout id leaves room). A
     * payout id too long for them cannot have a claimable grant. */
    if (og__payout_attempt_names(f->payout_id, f->attempt_number,
                                 p.idempotency_key, p.client_reference) != 0)
        return OG_EINTERNAL;
    if (f->revoked) {
        p.outcome = OG_PAYOUT_CLAIM_REVOKED;
    } else if (f->consumed) {
        p.outcome = f->consumer_found && f->consumer_payout &&
                            strcmp(f->consumer_reference,
                                   p.client_reference) == 0
                        ? OG_PAYOUT_CLAIM_DUPLICATE
                        : OG_PAYOUT_CLAIM_LOST;
    } else if (f->now_us < f->not_before_us ||
               f->now_us >= f->expires_at_us) {
        p.outcome = OG_PAYOUT_CLAIM_EXPIRED; /* PP7: no leeway */
    } else if (f->payouts_suspended ||
               f->settings_version != r->relied.tenant_settings ||
               f->beneficiary_status != OG_PAYOUT_BENEFICIARY_ACTIVE ||
               f->beneficiary_version != r->relied.beneficiary ||
               f->destination_version != r->relied.destination ||
               f->state != OG_PAYOUT_STATE_APPROVED ||
               f->payout_version != f->executable_version ||
               f->payout_version != r->relied.payout || f->active_attempt ||
               strcmp(r->policy_version, f->policy_release) != 0 ||
               strcmp(r->policy_version, OG_PAYOUT_POLICY_VERSION) != 0) {
        p.outcome = OG_PAYOUT_CLAIM_CONTEXT_CHANGED;
    } else {
        if (og_payout_amount_format(f->amount_minor, f->currency, text,
                                    sizeof text) != 0 ||
            og_amount_canonical(text, p.amount, sizeof p.amount) != 0)
            return OG_EINTERNAL; /* PP3: the schema's checks forbid it */
        p.outcome = OG_PAYOUT_CLAIM_CLAIMED;
        p.new_version = f->payout_version + 1;
    }
    *out = p;
    return 0;
}

/* ===========================================================================
 * The resolution (og_payout_resolve, PP5)
 * ========================================================================= */

static const char *const resolve_names[] = {
#define X(name, text) text,
    OG_PAYOUT_RESOLVE_MAP(X)
#undef X
};

static const char *const reservation_names[] = {
#define X(name, text) text,
    OG_PAYOUT_RESERVATION_MAP(X)
#undef X
};

const char *og_payout_resolve_outcome_name(og_payout_resolve_outcome o)
{
    return NAME_OF(resolve_names, o);
}

const char *og_payout_reservation_name(og_payout_reservation r)
{
    return NAME_OF(reservation_names, r);
}

int og__payout_plan_resolve(const og__payout_resolve_facts *f, og_op_status st,
                            og__payout_resolve_plan *out)
{
    og__payout_resolve_plan p;

    memset(&p, 0, sizeof p);
    if (!f->found || !f->active ||
        (f->state != OG_PAYOUT_STATE_EXECUTING &&
         f->state != OG_PAYOUT_STATE_UNKNOWN)) {
        p.outcome = OG_PAYOUT_RESOLVE_NOT_ACTIVE;
        *out = p;
        return 0;
    }
    if (f->released)
        return OG_EINTERNAL; /* PP5: a live attempt's reservation is held */
    switch (st) {
    case OG_OP_SUCCEEDED:
        p.to = OG_PAYOUT_STATE_PAID;
        p.reservation = OG_PAYOUT_RESERVATION_PAID;
        p.release_cause = "paid";
        break;
    case OG_OP_FAILED:
        p.to = OG_PAYOUT_STATE_FAILED;
        p.reservation = OG_PAYOUT_RESERVATION_RELEASED;
        p.release_cause = "failed";
        break;
    case OG_OP_NOT_STARTED:
        p.to = OG_PAYOUT_STATE_APPROVED;
        p.reservation = OG_PAYOUT_RESERVATION_RELEASED;
        p.release_cause = "not-started";
        break;
    case OG_OP_NOT_APPLIED:
        p.to = OG_PAYOUT_STATE_APPROVED;
        p.reservation = OG_PAYOUT_RESERVATION_RELEASED;
        p.release_cause = "not-applied";
        break;
    case OG_OP_UNKNOWN:
    case OG_OP_NEEDS_RECONCILIATION:
        p.to = OG_PAYOUT_STATE_UNKNOWN;
        p.reservation = OG_PAYOUT_RESERVATION_HELD;
        break;
    case OG_OP_ADMITTED:
    case OG_OP_STARTED:
        return OG_EINTERNAL; /* exec.c checked the transition */
    }
    p.outcome = OG_PAYOUT_RESOLVE_RESOLVED;
    p.clear_attempt = p.release_cause != NULL;
    p.from_state = og_payout_state_name(f->state);
    p.to_state = og_payout_state_name(p.to);
    p.new_version = f->payout_version + 1;
    *out = p;
    return 0;
}
