/*
 * rows.c — the one reader of each row both backends return alike
 * (rows.h): an operation, its history, a redemption point, and the payout
 * store's facts, payouts, decisions, grants and jobs. A backend supplies
 * the row through its og__row accessors; everything a column means is
 * decided here.
 *
 * A column the schema declares NOT NULL (or that its statement computes
 * never NULL) that reads NULL, a text that does not fit its buffer, a
 * state, status or kind that is not one: each is a defect, OG_EINTERNAL —
 * never a default, since the schema's checks forbid it and a reader that
 * guessed would hide a broken store.
 */
#include <stdlib.h>
#include <string.h>

#include "store/rows.h"

/* ===========================================================================
 * Columns
 * ========================================================================= */

/* A text column that may not be NULL, into dst (n bytes): 0 or
 * OG_EINTERNAL (NULL, or longer than n - 1). */
static int text(og__row r, int col, char *dst, size_t n)
{
    return og__copy(dst, n, r.ops->text(&r, col)) == 0 ? 0 : OG_EINTERNAL;
}

/* A text column that may be NULL ("" then). */
static int text_opt(og__row r, int col, char *dst, size_t n)
{
    if (r.ops->null(&r, col)) {
        dst[0] = '\0';
        return 0;
    }
    return text(r, col, dst, n);
}

static int i64(og__row r, int col, int64_t *out)
{
    return r.ops->i64(&r, col, out);
}

/* An integer column that may be NULL (0 then). */
static int i64_opt(og__row r, int col, int64_t *out)
{
    if (r.ops->null(&r, col)) {
        *out = 0;
        return 0;
    }
    return i64(r, col, out);
}

/* A boolean column that may not be NULL: 0 and *out, or OG_EINTERNAL. */
static int flag(og__row r, int col, bool *out)
{
    if (r.ops->null(&r, col))
        return OG_EINTERNAL;
    *out = r.ops->flag(&r, col);
    return 0;
}

/* A column holding one of the names parse() knows: its index, or
 * OG_EINTERNAL. */
static int named(og__row r, int col, int (*parse)(const char *), int *out)
{
    int v = parse(r.ops->text(&r, col)); /* NULL parses as nothing */

    if (v < 0)
        return OG_EINTERNAL;
    *out = v;
    return 0;
}

/* ===========================================================================
 * Operations
 * ========================================================================= */

int og__row_operation(og__row r, int col, og_operation *out)
{
    og_operation op;
    const char *amount;
    int status, kind;

    memset(&op, 0, sizeof op);
    amount = r.ops->text(&r, col + OP_AMOUNT);
    if (text(r, col + OP_OPERATION_ID, op.operation_id,
             sizeof op.operation_id) ||
        text(r, col + OP_ISSUER, op.issuer, sizeof op.issuer) ||
        text(r, col + OP_GRANT_ID, op.grant_id, sizeof op.grant_id) ||
        text(r, col + OP_CALLER_ID, op.caller_id, sizeof op.caller_id) ||
        text(r, col + OP_ACCOUNT_ID, op.account_id, sizeof op.account_id) ||
        /* SQLite keeps the canonical text (Q3), PostgreSQL a numeric whose
         * text may carry trailing zeros: both read back canonical. */
        amount == NULL ||
        og_amount_canonical(amount, op.amount, sizeof op.amount) != 0 ||
        text(r, col + OP_CURRENCY, op.currency, sizeof op.currency) ||
        named(r, col + OP_STATUS, og__op_status_parse, &status) ||
        i64(r, col + OP_OWNER_VERSION, &op.owner_version) ||
        i64(r, col + OP_LEASE_UNTIL, &op.lease_until_us) ||
        i64(r, col + OP_SUBMIT_BY, &op.submit_by_us) ||
        i64(r, col + OP_CREATED_AT, &op.created_at_us) ||
        i64(r, col + OP_UPDATED_AT, &op.updated_at_us) ||
        text_opt(r, col + OP_PROVIDER_REFERENCE, op.provider_reference,
                 sizeof op.provider_reference) ||
        text_opt(r, col + OP_OUTCOME_REASON, op.reason, sizeof op.reason) ||
        named(r, col + OP_KIND, og__op_kind_parse, &kind) ||
        text(r, col + OP_IDEMPOTENCY_KEY, op.idempotency_key,
             sizeof op.idempotency_key) ||
        text(r, col + OP_CLIENT_REFERENCE, op.client_reference,
             sizeof op.client_reference) ||
        i64_opt(r, col + OP_TAKEN_AT, &op.taken_at_us) ||
        i64(r, col + OP_LOOKUPS, &op.lookups) ||
        i64_opt(r, col + OP_FINAL_ABSENCE_AFTER,
                &op.final_absence_after_us))
        return OG_EINTERNAL;
    op.status = (og_op_status)status;
    op.kind = (og_op_kind)kind;
    *out = op;
    return 0;
}

int og__row_op_event(og__row r, og_op_event *out)
{
    og_op_event ev;
    int from, to;

    memset(&ev, 0, sizeof ev);
    if (i64(r, OP_HISTORY_SEQ, &ev.seq) || i64(r, OP_HISTORY_AT, &ev.at_us) ||
        text(r, OP_HISTORY_KIND, ev.kind, sizeof ev.kind) ||
        named(r, OP_HISTORY_FROM_STATUS, og__op_status_parse, &from) ||
        named(r, OP_HISTORY_TO_STATUS, og__op_status_parse, &to) ||
        i64(r, OP_HISTORY_OWNER_VERSION, &ev.owner_version) ||
        text_opt(r, OP_HISTORY_REASON, ev.reason, sizeof ev.reason) ||
        text_opt(r, OP_HISTORY_PROVIDER_REFERENCE, ev.provider_reference,
                 sizeof ev.provider_reference) ||
        text(r, OP_HISTORY_ACTOR, ev.actor, sizeof ev.actor) ||
        text_opt(r, OP_HISTORY_EVIDENCE, ev.evidence, sizeof ev.evidence) ||
        text_opt(r, OP_HISTORY_SOURCE, ev.source, sizeof ev.source))
        return OG_EINTERNAL;
    ev.from_status = (og_op_status)from;
    ev.to_status = (og_op_status)to;
    *out = ev;
    return 0;
}

/* ===========================================================================
 * Redemption points
 * ========================================================================= */

int og__row_redemption(og__row r, og_redemption_found *found,
                       og_redemption_point *out)
{
    og_redemption_point p;
    size_t nlen = 0, slen = 0;
    bool own;

    if (flag(r, REDEMPTION_GET_OWN, &own))
        return OG_EINTERNAL;
    if (!own) {
        *found = OG_REDEMPTION_CODE_ELSEWHERE; /* nothing of it is read */
        return 0;
    }
    memset(&p, 0, sizeof p);
    if (text(r, REDEMPTION_GET_CODE_HASH, p.code_hash, sizeof p.code_hash) ||
        i64(r, REDEMPTION_GET_CREATED_AT, &p.created_at_us) ||
        r.ops->bytes(&r, REDEMPTION_GET_NONCE, p.nonce, sizeof p.nonce,
                     &nlen) != 0 ||
        nlen != OG_REDEMPTION_NONCE_LEN ||
        r.ops->bytes(&r, REDEMPTION_GET_SEALED, NULL, 0, &slen) != 0 ||
        slen <= OG_REDEMPTION_TAG_LEN || slen > OG_REDEMPTION_SEALED_MAX)
        return OG_EINTERNAL; /* the schema's CHECKs forbid it */
    if (!(p.sealed = malloc(slen)))
        return OG_ENOMEM;
    if (r.ops->bytes(&r, REDEMPTION_GET_SEALED, p.sealed, slen,
                     &p.sealed_len) != 0 ||
        p.sealed_len != slen) {
        free(p.sealed);
        return OG_EINTERNAL;
    }
    *found = OG_REDEMPTION_OWN;
    *out = p;
    return 0;
}

/* ===========================================================================
 * The payout store
 * ========================================================================= */

int og__row_put_report(og__row r, int col, og__payout_put_report *out)
{
    out->exists = !r.ops->null(&r, col + PUT_REPORT_STORED);
    if ((out->exists &&
         i64(r, col + PUT_REPORT_STORED, &out->stored_version)) ||
        flag(r, col + PUT_REPORT_NAMED_EXISTS, &out->refs_exist))
        return OG_EINTERNAL;
    /* NULL when there is no record to compare with. */
    out->fixed_same = r.ops->flag(&r, col + PUT_REPORT_FIXED_MATCHES);
    return 0;
}

int og__row_draft_report(og__row r, int col, og__payout_draft_report *out)
{
    return flag(r, col + DRAFT_REPORT_PAYOUT_EXISTS, &out->payout_exists) ||
                   flag(r, col + DRAFT_REPORT_TENANT_EXISTS,
                        &out->tenant_exists) ||
                   flag(r, col + DRAFT_REPORT_CURRENCY_MATCHES,
                        &out->currency_matches) ||
                   flag(r, col + DRAFT_REPORT_BENEFICIARY_EXISTS,
                        &out->beneficiary_exists) ||
                   flag(r, col + DRAFT_REPORT_DESTINATION_EXISTS,
                        &out->destination_exists)
               ? OG_EINTERNAL
               : 0;
}

int og__row_payout_facts(og__row r, og__payout_facts *f)
{
    int state, status;

    if (named(r, PAYOUT_FACTS_STATE, og__payout_state_parse, &state) ||
        i64(r, PAYOUT_FACTS_VERSION, &f->version) ||
        i64(r, PAYOUT_FACTS_ATTEMPT_COUNT, &f->attempt_count) ||
        text_opt(r, PAYOUT_FACTS_ACTIVE_ATTEMPT, f->active_attempt,
                 sizeof f->active_attempt) ||
        text(r, PAYOUT_FACTS_TENANT_ID, f->tenant_id, sizeof f->tenant_id) ||
        text(r, PAYOUT_FACTS_BENEFICIARY_ID, f->beneficiary_id,
             sizeof f->beneficiary_id) ||
        text(r, PAYOUT_FACTS_DESTINATION_ID, f->destination_id,
             sizeof f->destination_id) ||
        i64(r, PAYOUT_FACTS_DESTINATION_VERSION, &f->destination_version) ||
        i64(r, PAYOUT_FACTS_AMOUNT, &f->amount_minor) ||
        text(r, PAYOUT_FACTS_CURRENCY, f->currency, sizeof f->currency) ||
        text_opt(r, PAYOUT_FACTS_PURPOSE, f->purpose, sizeof f->purpose) ||
        flag(r, PAYOUT_FACTS_PAYOUTS_SUSPENDED, &f->payouts_suspended) ||
        i64(r, PAYOUT_FACTS_DAILY_LIMIT, &f->daily_limit) ||
        text(r, PAYOUT_FACTS_TENANT_CURRENCY, f->tenant_currency,
             sizeof f->tenant_currency) ||
        text(r, PAYOUT_FACTS_TIME_ZONE, f->time_zone, sizeof f->time_zone) ||
        i64(r, PAYOUT_FACTS_SETTINGS_VERSION, &f->settings_version) ||
        flag(r, PAYOUT_FACTS_VERIFIED, &f->verified) ||
        named(r, PAYOUT_FACTS_BENEFICIARY_STATUS, og__payout_bstatus_parse,
              &status) ||
        i64(r, PAYOUT_FACTS_BENEFICIARY_VERSION, &f->beneficiary_version) ||
        text(r, PAYOUT_FACTS_DESTINATION_BENEFICIARY_ID,
             f->destination_beneficiary_id,
             sizeof f->destination_beneficiary_id) ||
        i64(r, PAYOUT_FACTS_DESTINATION_RECORD_VERSION,
            &f->destination_record_version) ||
        i64(r, PAYOUT_FACTS_DESTINATION_CHANGED_AT,
            &f->destination_changed_at_us) ||
        og_payout_time_zone_check(f->time_zone) != 0)
        return OG_EINTERNAL;
    f->found = true;
    f->state = (og_payout_state)state;
    f->has_purpose = !r.ops->null(&r, PAYOUT_FACTS_PURPOSE);
    f->beneficiary_status = (og_payout_beneficiary_status)status;
    return 0;
}

int og__row_payout_day(og__row r, og__payout_facts *f)
{
    return i64_opt(r, PAYOUT_DAY_PAID, &f->paid) ||
                   i64_opt(r, PAYOUT_DAY_RESERVED, &f->reserved) ||
                   i64_opt(r, PAYOUT_DAY_VERSION, &f->day_version)
               ? OG_EINTERNAL
               : 0;
}

int og__row_claim_facts(og__row r, og__payout_claim_facts *f)
{
    int state, status;

    if (text(r, CLAIM_FACTS_PAYOUT_ID, f->payout_id, sizeof f->payout_id) ||
        text(r, CLAIM_FACTS_AUDIENCE, f->audience, sizeof f->audience) ||
        i64(r, CLAIM_FACTS_EXECUTABLE_VERSION, &f->executable_version) ||
        i64(r, CLAIM_FACTS_ATTEMPT_NUMBER, &f->attempt_number) ||
        i64(r, CLAIM_FACTS_NOT_BEFORE, &f->not_before_us) ||
        i64(r, CLAIM_FACTS_EXPIRES_AT, &f->expires_at_us) ||
        flag(r, CLAIM_FACTS_CONSUMED, &f->consumed) ||
        text_opt(r, CLAIM_FACTS_CONSUMED_BY, f->consumed_by,
                 sizeof f->consumed_by) ||
        flag(r, CLAIM_FACTS_REVOKED, &f->revoked) ||
        flag(r, CLAIM_FACTS_CONSUMER_FOUND, &f->consumer_found) ||
        text_opt(r, CLAIM_FACTS_CONSUMER_REFERENCE, f->consumer_reference,
                 sizeof f->consumer_reference) ||
        named(r, CLAIM_FACTS_STATE, og__payout_state_parse, &state) ||
        i64(r, CLAIM_FACTS_PAYOUT_VERSION, &f->payout_version) ||
        flag(r, CLAIM_FACTS_ACTIVE_ATTEMPT, &f->active_attempt) ||
        i64(r, CLAIM_FACTS_AMOUNT, &f->amount_minor) ||
        text(r, CLAIM_FACTS_CURRENCY, f->currency, sizeof f->currency) ||
        text(r, CLAIM_FACTS_DESTINATION_ID, f->destination_id,
             sizeof f->destination_id) ||
        flag(r, CLAIM_FACTS_PAYOUTS_SUSPENDED, &f->payouts_suspended) ||
        i64(r, CLAIM_FACTS_SETTINGS_VERSION, &f->settings_version) ||
        named(r, CLAIM_FACTS_BENEFICIARY_STATUS, og__payout_bstatus_parse,
              &status) ||
        i64(r, CLAIM_FACTS_BENEFICIARY_VERSION, &f->beneficiary_version) ||
        i64(r, CLAIM_FACTS_DESTINATION_VERSION, &f->destination_version) ||
        text(r, CLAIM_FACTS_POLICY_RELEASE, f->policy_release,
             sizeof f->policy_release) ||
        i64(r, CLAIM_FACTS_NOW, &f->now_us))
        return OG_EINTERNAL;
    f->found = true;
    /* NULL when nothing consumed the grant: no consumer, not a payout. */
    f->consumer_payout = r.ops->flag(&r, CLAIM_FACTS_CONSUMER_PAYOUT);
    f->state = (og_payout_state)state;
    f->beneficiary_status = (og_payout_beneficiary_status)status;
    return 0;
}

int og__row_resolve_facts(og__row r, og__payout_resolve_facts *f)
{
    int state;

    if (text(r, RESOLVE_FACTS_PAYOUT_ID, f->payout_id, sizeof f->payout_id) ||
        text(r, RESOLVE_FACTS_GRANT_ID, f->grant_id, sizeof f->grant_id) ||
        text(r, RESOLVE_FACTS_RELEASE_DAY, f->release_day,
             sizeof f->release_day) ||
        i64(r, RESOLVE_FACTS_AMOUNT, &f->amount_minor) ||
        flag(r, RESOLVE_FACTS_RELEASED, &f->released) ||
        named(r, RESOLVE_FACTS_STATE, og__payout_state_parse, &state) ||
        i64(r, RESOLVE_FACTS_VERSION, &f->payout_version) ||
        flag(r, RESOLVE_FACTS_ACTIVE, &f->active))
        return OG_EINTERNAL;
    f->found = true;
    f->state = (og_payout_state)state;
    return 0;
}

int og__row_payout_view(og__row r, og_payout_view *out)
{
    og_payout_view v;
    int state;

    memset(&v, 0, sizeof v);
    if (text(r, PAYOUT_VIEW_PAYOUT_ID, v.payout_id, sizeof v.payout_id) ||
        text(r, PAYOUT_VIEW_TENANT_ID, v.tenant_id, sizeof v.tenant_id) ||
        text(r, PAYOUT_VIEW_BENEFICIARY_ID, v.beneficiary_id,
             sizeof v.beneficiary_id) ||
        text(r, PAYOUT_VIEW_DESTINATION_ID, v.destination_id,
             sizeof v.destination_id) ||
        i64(r, PAYOUT_VIEW_DESTINATION_VERSION, &v.destination_version) ||
        i64(r, PAYOUT_VIEW_AMOUNT, &v.amount_minor) ||
        text(r, PAYOUT_VIEW_CURRENCY, v.currency, sizeof v.currency) ||
        text_opt(r, PAYOUT_VIEW_PURPOSE, v.purpose, sizeof v.purpose) ||
        named(r, PAYOUT_VIEW_STATE, og__payout_state_parse, &state) ||
        i64(r, PAYOUT_VIEW_VERSION, &v.version) ||
        i64(r, PAYOUT_VIEW_ATTEMPT_COUNT, &v.attempt_count) ||
        text_opt(r, PAYOUT_VIEW_ACTIVE_ATTEMPT, v.active_attempt,
                 sizeof v.active_attempt) ||
        text_opt(r, PAYOUT_VIEW_RELEASE_DAY, v.release_day,
                 sizeof v.release_day) ||
        text(r, PAYOUT_VIEW_REQUESTER_ID, v.requester_id,
             sizeof v.requester_id) ||
        i64(r, PAYOUT_VIEW_CREATED_AT, &v.created_at_us) ||
        i64(r, PAYOUT_VIEW_UPDATED_AT, &v.updated_at_us) ||
        og_payout_amount_format(v.amount_minor, v.currency, v.amount,
                                sizeof v.amount) != 0)
        return OG_EINTERNAL;
    v.has_purpose = !r.ops->null(&r, PAYOUT_VIEW_PURPOSE);
    v.state = (og_payout_state)state;
    *out = v;
    return 0;
}

int og__row_payout_decision(og__row r, og_payout_decision_view *out)
{
    og_payout_decision_view v;
    const char *mode;
    int outcome, reason;

    memset(&v, 0, sizeof v);
    if (text(r, PAYOUT_DECISION_DECISION_ID, v.decision_id,
             sizeof v.decision_id) ||
        text(r, PAYOUT_DECISION_PAYOUT_ID, v.payout_id, sizeof v.payout_id) ||
        text_opt(r, PAYOUT_DECISION_TENANT_ID, v.tenant_id,
                 sizeof v.tenant_id) ||
        named(r, PAYOUT_DECISION_OUTCOME, og__payout_outcome_parse,
              &outcome) ||
        named(r, PAYOUT_DECISION_REASON, og__payout_reason_parse, &reason) ||
        text(r, PAYOUT_DECISION_POLICY_VERSION, v.policy_version,
             sizeof v.policy_version) ||
        text_opt(r, PAYOUT_DECISION_TERMS_FINGERPRINT, v.terms_fingerprint,
                 sizeof v.terms_fingerprint) ||
        i64_opt(r, PAYOUT_DECISION_TENANT_SETTINGS_VERSION,
                &v.evaluated.tenant_settings) ||
        i64_opt(r, PAYOUT_DECISION_BENEFICIARY_VERSION,
                &v.evaluated.beneficiary) ||
        i64_opt(r, PAYOUT_DECISION_DESTINATION_VERSION,
                &v.evaluated.destination) ||
        i64_opt(r, PAYOUT_DECISION_PAYOUT_VERSION, &v.evaluated.payout) ||
        text(r, PAYOUT_DECISION_REQUESTER_ID, v.requester_id,
             sizeof v.requester_id) ||
        text(r, PAYOUT_DECISION_REQUESTER_ROLE, v.requester_role,
             sizeof v.requester_role) ||
        i64(r, PAYOUT_DECISION_REQUESTER_APPROVAL_LIMIT,
            &v.requester_approval_limit) ||
        i64(r, PAYOUT_DECISION_OBSERVED_AT, &v.observed_at_us) ||
        i64(r, PAYOUT_DECISION_DECIDED_AT, &v.decided_at_us) ||
        text(r, PAYOUT_DECISION_CORRELATION_ID, v.correlation_id,
             sizeof v.correlation_id) ||
        text_opt(r, PAYOUT_DECISION_SETTLES_DECISION_ID,
                 v.settles_decision_id, sizeof v.settles_decision_id) ||
        i64_opt(r, PAYOUT_DECISION_ACKNOWLEDGED_DESTINATION_VERSION,
                &v.acknowledged_destination_version))
        return OG_EINTERNAL;
    mode = r.ops->text(&r, PAYOUT_DECISION_MODE);
    if (mode && strcmp(mode, "reauthorize") == 0)
        v.reauthorize = true;
    else if (!mode || strcmp(mode, "submit") != 0)
        return OG_EINTERNAL;
    /* The store writes a reason with its own outcome; a row that pairs
     * them otherwise was not written by a decision. */
    v.outcome = (og_payout_outcome)outcome;
    v.reason = (og_payout_reason)reason;
    if (og_payout_reason_outcome(v.reason) != v.outcome)
        return OG_EINTERNAL;
    *out = v;
    return 0;
}

int og__row_payout_grant(og__row r, og_payout_grant_view *out)
{
    og_payout_grant_view v;

    memset(&v, 0, sizeof v);
    if (text(r, PAYOUT_GRANT_GRANT_ID, v.grant_id, sizeof v.grant_id) ||
        text(r, PAYOUT_GRANT_DECISION_ID, v.decision_id,
             sizeof v.decision_id) ||
        text(r, PAYOUT_GRANT_PAYOUT_ID, v.payout_id, sizeof v.payout_id) ||
        text(r, PAYOUT_GRANT_TENANT_ID, v.tenant_id, sizeof v.tenant_id) ||
        text(r, PAYOUT_GRANT_OPERATION, v.operation, sizeof v.operation) ||
        text(r, PAYOUT_GRANT_AUDIENCE, v.audience, sizeof v.audience) ||
        text(r, PAYOUT_GRANT_TERMS_FINGERPRINT, v.terms_fingerprint,
             sizeof v.terms_fingerprint) ||
        text(r, PAYOUT_GRANT_POLICY_VERSION, v.policy_version,
             sizeof v.policy_version) ||
        i64(r, PAYOUT_GRANT_EXECUTABLE_VERSION,
            &v.executable_payout_version) ||
        i64(r, PAYOUT_GRANT_ATTEMPT_NUMBER, &v.attempt_number) ||
        i64(r, PAYOUT_GRANT_AMOUNT, &v.reserved_minor) ||
        text(r, PAYOUT_GRANT_RELEASE_DAY, v.release_day,
             sizeof v.release_day) ||
        i64(r, PAYOUT_GRANT_NOT_BEFORE, &v.not_before_us) ||
        i64(r, PAYOUT_GRANT_EXPIRES_AT, &v.expires_at_us) ||
        i64(r, PAYOUT_GRANT_CREATED_AT, &v.created_at_us) ||
        i64_opt(r, PAYOUT_GRANT_CONSUMED_AT, &v.consumed_at_us) ||
        text_opt(r, PAYOUT_GRANT_CONSUMED_BY, v.consumed_by_operation,
                 sizeof v.consumed_by_operation) ||
        i64_opt(r, PAYOUT_GRANT_REVOKED_AT, &v.revoked_at_us) ||
        i64_opt(r, PAYOUT_GRANT_RELEASED_AT, &v.released_at_us) ||
        i64(r, PAYOUT_GRANT_NOW, &v.read_at_us))
        return OG_EINTERNAL;
    v.state = og__payout_grant_state(
        !r.ops->null(&r, PAYOUT_GRANT_CONSUMED_AT),
        !r.ops->null(&r, PAYOUT_GRANT_REVOKED_AT), v.expires_at_us,
        v.read_at_us);
    *out = v;
    return 0;
}

int og__row_payout_job(og__row r, og_payout_job *out)
{
    og_payout_job j;

    memset(&j, 0, sizeof j);
    if (text(r, PAYOUT_JOB_JOB_ID, j.job_id, sizeof j.job_id) ||
        text(r, PAYOUT_JOB_PAYOUT_ID, j.payout_id, sizeof j.payout_id) ||
        text(r, PAYOUT_JOB_GRANT_ID, j.grant_id, sizeof j.grant_id) ||
        text(r, PAYOUT_JOB_CORRELATION_ID, j.correlation_id,
             sizeof j.correlation_id) ||
        text_opt(r, PAYOUT_JOB_RESUBMITTED_FROM, j.resubmitted_from,
                 sizeof j.resubmitted_from) ||
        i64(r, PAYOUT_JOB_DELIVERY, &j.delivery) ||
        i64(r, PAYOUT_JOB_LEASE_UNTIL, &j.lease_until_us))
        return OG_EINTERNAL;
    *out = j;
    return 0;
}

/* ===========================================================================
 * A payout's history (og_payout_history)
 * ========================================================================= */

int og__row_payout_event(og__row r, og_payout_event *out)
{
    og_payout_event ev;

    memset(&ev, 0, sizeof ev);
    ev.has_amount = !r.ops->null(&r, PAYOUT_EVENT_AMOUNT);
    if (i64(r, PAYOUT_EVENT_SEQ, &ev.seq) ||
        i64(r, PAYOUT_EVENT_AT, &ev.at_us) ||
        text(r, PAYOUT_EVENT_KIND, ev.kind, sizeof ev.kind) ||
        text(r, PAYOUT_EVENT_ACTOR, ev.actor, sizeof ev.actor) ||
        text_opt(r, PAYOUT_EVENT_CORRELATION, ev.correlation_id,
                 sizeof ev.correlation_id) ||
        text_opt(r, PAYOUT_EVENT_DECISION, ev.decision_id,
                 sizeof ev.decision_id) ||
        text_opt(r, PAYOUT_EVENT_GRANT, ev.grant_id, sizeof ev.grant_id) ||
        text_opt(r, PAYOUT_EVENT_JOB, ev.job_id, sizeof ev.job_id) ||
        text_opt(r, PAYOUT_EVENT_FROM, ev.from_state, sizeof ev.from_state) ||
        text_opt(r, PAYOUT_EVENT_TO, ev.to_state, sizeof ev.to_state) ||
        i64_opt(r, PAYOUT_EVENT_VERSION, &ev.payout_version) ||
        i64_opt(r, PAYOUT_EVENT_AMOUNT, &ev.amount_minor) ||
        text_opt(r, PAYOUT_EVENT_DAY, ev.release_day,
                 sizeof ev.release_day) ||
        text_opt(r, PAYOUT_EVENT_REASON, ev.reason, sizeof ev.reason) ||
        text_opt(r, PAYOUT_EVENT_EVIDENCE, ev.evidence, sizeof ev.evidence))
        return OG_EINTERNAL;
    *out = ev;
    return 0;
}
