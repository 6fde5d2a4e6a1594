/*
 * payout.c — the payout store's decision side (oncegate/payout_store.h):
 * the context records' puts, the provider token's one read, drafts,
 * cancellations, reads, the context read and the decision. Every input is
 * checked here, before the store (S1), with the pure core's own rules and
 * codes where it has them (ids, currencies, amounts, purposes). Fresh
 * identifiers (decision, grant, job) are made here, so both backends write
 * the same kinds. What runs a decided payout is payout_run.c.
 *
 * The context read and the decision are orchestrated here, once for both
 * backends (S6): one transaction of the method table, the backend's steps
 * (M28-M31) and the pure plan between them. A put, a draft or a
 * cancellation is one backend write (M27) whose report payout_plan.c
 * reads. The provider token's copies here are wiped (S7). dispatch.h
 * states S1, S6 and S7.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <sodium.h>

#include "store/dispatch.h"
#include "store/store_int.h"
#include "token/token_int.h"

/* og_id_valid(): 0, or err. */
static int checked_id(const char *id, int err)
{
    return og__id_check(id) == 0 ? 0 : err;
}

static int limit_check(int64_t v)
{
    return v >= 0 && v <= OG_PAYOUT_LIMIT_MAX ? 0 : OG_EPAYOUT_LIMIT;
}


int og_payout_tenant_put(og_store *s, const og_payout_tenant_settings *t,
                         int64_t expected_version, og_payout_put_result *out)
{
    og__payout_tenant_req r;
    og__payout_put_report rep;
    const char *zone;
    int scale, rc;

    if (!s || !t || !out)
        return OG_EINVAL;
    if ((rc = checked_id(t->tenant_id, OG_EPAYOUT_TENANT)) != 0 ||
        (rc = limit_check(t->daily_limit)) != 0 ||
        (rc = og_payout_currency_scale(t->currency, &scale)) != 0)
        return rc;
    zone = t->settlement_time_zone ? t->settlement_time_zone : "UTC";
    if ((rc = og_payout_time_zone_check(zone)) != 0)
        return rc;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.tenant_id, t->tenant_id);
    r.payouts_suspended = t->payouts_suspended;
    r.daily_limit = t->daily_limit;
    memcpy(r.currency, t->currency, OG_CURRENCY_LEN + 1);
    memcpy(r.time_zone, zone, strlen(zone) + 1); /* checked: it fits */
    r.expected_version = expected_version;
    memset(&rep, 0, sizeof rep);
    if ((rc = s->m->payout_tenant_put(s->impl, &r, &rep)) != 0)
        return rc;
    *out = og__payout_put_outcome(expected_version, &rep);
    return 0;
}

int og_payout_beneficiary_put(og_store *s,
                              const og_payout_beneficiary_record *b,
                              int64_t expected_version,
                              og_payout_put_result *out)
{
    og__payout_beneficiary_req r;
    og__payout_put_report rep;
    const char *status;
    int rc;

    if (!s || !b || !out)
        return OG_EINVAL;
    if ((rc = checked_id(b->beneficiary_id, OG_EPAYOUT_BENEFICIARY)) != 0 ||
        (rc = checked_id(b->tenant_id, OG_EPAYOUT_TENANT)) != 0)
        return rc;
    status = og_payout_beneficiary_status_name(b->status);
    if (strcmp(status, "?") == 0)
        return OG_EINVAL;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.beneficiary_id, b->beneficiary_id);
    og__idcpy(r.tenant_id, b->tenant_id);
    r.verified = b->verified;
    r.status = status;
    r.expected_version = expected_version;
    memset(&rep, 0, sizeof rep);
    if ((rc = s->m->payout_beneficiary_put(s->impl, &r, &rep)) != 0)
        return rc;
    *out = og__payout_put_outcome(expected_version, &rep);
    return 0;
}

/* A provider token: 1..OG_PAYOUT_TOKEN_MAX printable ASCII, no spaces. */
static int token_check(const char *t)
{
    size_t n = 0;

    if (!t)
        return OG_EPAYOUT_TOKEN;
    while (n <= OG_PAYOUT_TOKEN_MAX && t[n] != '\0') {
        if ((unsigned char)t[n] < 0x21 || (unsigned char)t[n] > 0x7e)
            return OG_EPAYOUT_TOKEN;
        n++;
    }
    return n >= 1 && n <= OG_PAYOUT_TOKEN_MAX ? 0 : OG_EPAYOUT_TOKEN;
}

/* A destination's conditional write; changed_at_us 0: the store's clock
 * (og_payout_destination_put), else a create whose changed_at is the earlier
 * of it and the store's clock (og_payout_destination_import). */
static int destination_write(og_store *s,
                             const og_payout_destination_record *d,
                             int64_t expected_version, int64_t changed_at_us,
                             og_payout_put_result *out)
{
    og__payout_destination_req r;
    og__payout_put_report rep;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = checked_id(d->destination_id, OG_EPAYOUT_DESTINATION)) != 0 ||
        (rc = checked_id(d->beneficiary_id, OG_EPAYOUT_BENEFICIARY)) != 0 ||
        (rc = token_check(d->provider_token)) != 0)
        return rc;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.destination_id, d->destination_id);
    og__idcpy(r.beneficiary_id, d->beneficiary_id);
    memcpy(r.provider_token, d->provider_token, strlen(d->provider_token) + 1);
    r.expected_version = expected_version;
    r.changed_at_us = changed_at_us;
    memset(&rep, 0, sizeof rep);
    rc = s->m->payout_destination_put(s->impl, &r, &rep);
    sodium_memzero(r.provider_token, sizeof r.provider_token); /* S7 */
    if (rc != 0)
        return rc;
    *out = og__payout_put_outcome(expected_version, &rep);
    return 0;
}

int og_payout_destination_put(og_store *s,
                              const og_payout_destination_record *d,
                              int64_t expected_version,
                              og_payout_put_result *out)
{
    return destination_write(s, d, expected_version, 0, out);
}

int og_payout_destination_import(og_store *s,
                                 const og_payout_destination_record *d,
                                 int64_t changed_at_us,
                                 og_payout_put_result *out)
{
    /* 2000-01-01 .. 9999-12-31: a time both engines hold exactly. */
    if (changed_at_us < INT64_C(946684800000000) ||
        changed_at_us > INT64_C(253402300799000000))
        return OG_EINVAL;
    return destination_write(s, d, 0, changed_at_us, out);
}

int og_payout_destination_token(og_store *s, const char *destination_id,
                                int64_t version, char *out, size_t outlen)
{
    char token[OG_PAYOUT_TOKEN_MAX + 1];
    int rc;

    if (!s || !out || outlen < sizeof token)
        return OG_EINVAL;
    if ((rc = checked_id(destination_id, OG_EPAYOUT_DESTINATION)) != 0)
        return rc;
    if (version < 1)
        return OG_EPAYOUT_VERSION;
    rc = s->m->payout_destination_token(s->impl, destination_id, version,
                                        token, sizeof token);
    if (rc == 1)
        memcpy(out, token, strlen(token) + 1);
    sodium_memzero(token, sizeof token); /* S7 */
    return rc;
}

/* d checked and copied into *r (a draft's or an edit's): 0, or the input
 * error — the payout id, the terms by the pure core's rules in its order
 * and with its codes (OG_EPAYOUT_TENANT ... OG_EPAYOUT_PURPOSE), the
 * requester. */
static int draft_req_build(const og_payout_draft_req *d,
                           og__payout_draft_req *r)
{
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];
    int rc;

    if ((rc = checked_id(d->payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if ((rc = og_payout_terms_fingerprint(&d->terms, fp)) != 0)
        return rc;
    if ((rc = checked_id(d->requester_id, OG_EPAYOUT_REQUESTER)) != 0)
        return rc;
    memset(r, 0, sizeof *r);
    og__idcpy(r->payout_id, d->payout_id);
    og__idcpy(r->tenant_id, d->terms.tenant_id);
    og__idcpy(r->beneficiary_id, d->terms.beneficiary_id);
    og__idcpy(r->destination_id, d->terms.destination_id);
    r->destination_version = d->terms.destination_version;
    if (og_payout_amount_parse(d->terms.amount, d->terms.currency,
                               &r->amount_minor) != 0)
        return OG_EINTERNAL; /* the fingerprint just parsed it */
    memcpy(r->currency, d->terms.currency, OG_CURRENCY_LEN + 1);
    r->has_purpose = d->terms.purpose != NULL;
    if (r->has_purpose &&
        og_payout_purpose_normalize(d->terms.purpose, r->purpose,
                                    sizeof r->purpose) != 0)
        return OG_EINTERNAL; /* likewise */
    og__idcpy(r->requester_id, d->requester_id);
    return 0;
}

int og_payout_draft(og_store *s, const og_payout_draft_req *d,
                    og_payout_put_result *out)
{
    og__payout_draft_req r;
    og__payout_draft_report rep;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = draft_req_build(d, &r)) != 0)
        return rc;
    memset(&rep, 0, sizeof rep);
    if ((rc = s->m->payout_draft(s->impl, &r, &rep)) != 0)
        return rc;
    (void)og__payout_draft_outcome(&rep, out);
    return 0;
}

int og_payout_edit(og_store *s, const og_payout_draft_req *d,
                   int64_t expected_version, og_payout_put_result *out)
{
    og__payout_draft_req r;
    og__payout_edit_report rep;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = draft_req_build(d, &r)) != 0)
        return rc;
    if (expected_version < 1)
        return OG_EPAYOUT_VERSION;
    memset(&rep, 0, sizeof rep);
    if ((rc = s->m->payout_edit(s->impl, &r, expected_version, &rep)) != 0)
        return rc;
    *out = og__payout_edit_outcome(expected_version, &rep);
    return 0;
}

int og_payout_cancel(og_store *s, const char *payout_id,
                     int64_t expected_version, const char *actor,
                     og_payout_put_result *out)
{
    og__payout_cancel_report rep;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = checked_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (expected_version < 1)
        return OG_EPAYOUT_VERSION;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    memset(&rep, 0, sizeof rep);
    if ((rc = s->m->payout_cancel(s->impl, payout_id, expected_version, actor,
                                  &rep)) != 0)
        return rc;
    *out = og__payout_cancel_outcome(expected_version, &rep);
    return 0;
}

int og_payout_get(og_store *s, const char *payout_id, og_payout_view *out)
{
    og_payout_view v;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = checked_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    memset(&v, 0, sizeof v);
    rc = s->m->payout_get(s->impl, payout_id, &v);
    if (rc == 1)
        *out = v;
    return rc;
}

int og_payout_history(og_store *s, const char *payout_id,
                      og_payout_events *out)
{
    og_payout_events e = {NULL, 0};
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = checked_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if ((rc = s->m->payout_history(s->impl, payout_id, &e)) != 0)
        return rc;
    *out = e;
    return 0;
}

void og_payout_events_free(og_payout_events *e)
{
    if (!e)
        return;
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

int og_payout_decision_get(og_store *s, const char *decision_id,
                           og_payout_decision_view *out)
{
    og_payout_decision_view v;
    char id[OG_UUID_LEN + 1];
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    /* Normalized: the store keeps the lower-case form og__uuid_new made. */
    if (og__uuid_normalize(decision_id, id) != 0)
        return OG_EPAYOUT_DECISION;
    memset(&v, 0, sizeof v);
    rc = s->m->payout_decision_get(s->impl, id, &v);
    if (rc == 1)
        *out = v;
    return rc;
}

int og_payout_context_read(og_store *s, const char *payout_id,
                           int64_t release_at_us, og_payout_snapshot *out)
{
    og__payout_facts f;
    og_payout_snapshot snap;
    void *tx;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = checked_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (!og__time_ok(release_at_us))
        return OG_EINVAL;
    memset(&f, 0, sizeof f);
    /* One snapshot for all the facts; a read keeps nothing: no commit. */
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_READ, &tx)) == 0) {
        rc = s->m->payout_facts(s->impl, tx, payout_id, release_at_us, false,
                                &f);
        rc = s->m->txn_end(s->impl, tx, rc, false);
    }
    if (rc == OG_ESTORE_UNAVAILABLE) {
        /* "Cannot read": unavailable, never an answer from old facts. */
        memset(&snap, 0, sizeof snap);
        snap.ctx.unavailable = true;
        snap.why = OG_PAYOUT_UNAVAILABLE_STORE;
    } else if (rc != 0 || (rc = og__payout_snapshot_build(&f, &snap)) != 0) {
        return rc;
    }
    *out = snap;
    og_payout_snapshot_bind(out);
    return 0;
}

/* The decision's steps, in tx (S6): the policy's current release, held
 * until the commit — a build that is not the current release decides
 * nothing (OG_EPAYOUT_POLICY_RELEASE, rolled back: no decision row, since
 * a decision names the policy that made it and this one is not current);
 * the facts, held until the commit;
 * the pure plan (PP1); the reservation, which decides on the newest
 * counters — taking nothing makes the decision Denied tenant.daily-limit,
 * alone; the decision and its entry at one instant; for Allowed what it
 * enables. The fault points act as the store failing there. */
/* An approval's checks on the pending decision r settles (og_payout_decide,
 * "Settling"), in tx after the facts held the payout's row: 0 with r's
 * mode and acknowledged destination version taken from it, or the refusal
 * (nothing written: the caller rolls back) or an error. The order makes a
 * retried approval read as what it is: settled, before anything else. */
static int settle_check(og_store *s, void *tx, const og__payout_facts *f,
                        og__payout_decide_req *r)
{
    og_payout_decision_view d;
    bool settled = false;
    int rc;

    memset(&d, 0, sizeof d);
    rc = s->m->payout_settle_read(s->impl, tx, r->settles_decision_id, &d,
                                  &settled);
    if (rc < 0)
        return rc;
    if (rc == 0 || strcmp(d.payout_id, r->payout_id) != 0 ||
        (d.outcome != OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED &&
         d.outcome != OG_PAYOUT_ESCALATION_RECOMMENDED))
        return OG_EPAYOUT_NOT_SETTLEABLE;
    if (settled)
        return OG_EPAYOUT_ALREADY_SETTLED;
    if (strcmp(d.requester_id, r->requester_id) == 0)
        return OG_EPAYOUT_APPROVER_IS_REQUESTER;
    if (!f->found || f->version != d.evaluated.payout ||
        (r->payout_version != 0 && r->payout_version != f->version))
        return OG_EPAYOUT_SETTLE_STALE;
    r->reauthorize = d.reauthorize;
    /* PC7: the version the approver acknowledges is the one the pending
     * decision evaluated; an escalation that carried an acknowledgment
     * (an approval that was itself escalated) carries it on. */
    r->acknowledged_destination_version =
        d.outcome == OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED
            ? d.evaluated.destination
            : d.acknowledged_destination_version;
    return 0;
}

static int decide_in(og_store *s, void *tx, const og__payout_decide_req *req,
                     og_payout_decision *out)
{
    const og__store_methods *m = s->m;
    og__payout_decide_req rr = *req, *r = &rr;
    og__payout_facts f;
    og__payout_plan p;
    char release[OG_ID_MAX + 1];
    int64_t decided_at = 0;
    bool reserved = false;
    int rc;

    if ((rc = m->payout_policy_release(s->impl, tx, true, release)) < 0)
        return rc;
    if (rc == 0)
        return OG_EINTERNAL; /* migration 12 writes the row */
    if (strcmp(release, OG_PAYOUT_POLICY_VERSION) != 0)
        return OG_EPAYOUT_POLICY_RELEASE;
    if ((rc = m->payout_facts(s->impl, tx, r->payout_id, r->not_before_us,
                              true, &f)) != 0)
        return rc;
    if (r->settles_decision_id[0] != '\0' &&
        (rc = settle_check(s, tx, &f, r)) != 0)
        return rc;
    if ((rc = og__payout_plan_decide(&f, r, &p)) != 0)
        return rc;
    if (p.allowed) {
        if ((rc = m->payout_reserve(s->impl, tx, &f, &reserved)) != 0)
            return rc;
        if (!reserved)
            og__payout_plan_limit_taken(&p);
    }
    if (og__fault(OG__FAULT_DECIDE_AFTER_RESERVATION))
        return OG_ESTORE_UNAVAILABLE;
    if ((rc = m->payout_decision_write(s->impl, tx, r, &f, &p,
                                       &decided_at)) != 0)
        return rc;
    if (og__fault(OG__FAULT_DECIDE_AFTER_DECISION))
        return OG_ESTORE_UNAVAILABLE;
    if (p.allowed && (rc = m->payout_decision_issue(s->impl, tx, r, &f, &p,
                                                    decided_at)) != 0)
        return rc;
    if (og__fault(OG__FAULT_DECIDE_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    og__payout_decision_fill(r, &f, &p, decided_at, out);
    return 0;
}

int og_payout_decide(og_store *s, const og_payout_decide_req *d,
                     og_payout_decision *out)
{
    og__payout_decide_req r;
    og_payout_decision res;
    void *tx;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = checked_id(d->payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (d->payout_version < 0)
        return OG_EPAYOUT_VERSION;
    if ((rc = checked_id(d->requester_id, OG_EPAYOUT_REQUESTER)) != 0 ||
        (rc = checked_id(d->requester_role, OG_EPAYOUT_REQUESTER)) != 0 ||
        (rc = limit_check(d->requester_approval_limit)) != 0)
        return rc;
    /* A short-lived window (docs/payouts.md, section 4): at most the
     * lifetime the store's validators allow any grant. */
    if (!og__time_ok(d->not_before_us) || !og__time_ok(d->expires_at_us) ||
        d->expires_at_us <= d->not_before_us ||
        d->expires_at_us - d->not_before_us >
            s->opts.timings.max_grant_lifetime_us)
        return OG_EPAYOUT_WINDOW;
    if ((rc = checked_id(d->correlation_id, OG_EPAYOUT_CORRELATION)) != 0)
        return rc;
    /* The grant's audience: who may present it (docs/payouts.md, section
     * 5, check 3). */
    if (og__id_check(d->audience) != 0)
        return OG_EINVAL;
    memset(&r, 0, sizeof r);
    og__idcpy(r.payout_id, d->payout_id);
    r.payout_version = d->payout_version;
    r.reauthorize = d->reauthorize;
    og__idcpy(r.requester_id, d->requester_id);
    og__idcpy(r.requester_role, d->requester_role);
    r.approval_limit = d->requester_approval_limit;
    r.not_before_us = d->not_before_us;
    r.expires_at_us = d->expires_at_us;
    og__idcpy(r.correlation_id, d->correlation_id);
    og__idcpy(r.audience, d->audience);
    /* Normalized: the store keeps the lower-case form og__uuid_new made. */
    if (d->settles_decision_id &&
        og__uuid_normalize(d->settles_decision_id, r.settles_decision_id) !=
            0)
        return OG_EPAYOUT_DECISION;
    if ((rc = og__uuid_new(r.decision_id)) != 0 ||
        (rc = og__uuid_new(r.job_id)) != 0 ||
        (rc = og_grant_new_id(r.grant_id)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_WRITE, &tx)) != 0)
        return rc;
    rc = decide_in(s, tx, &r, &res);
    /* Every decision is kept, Allowed or not: it is history (S6). Any
     * error rolls all of it back. */
    if ((rc = s->m->txn_end(s->impl, tx, rc, true)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_policy_release_get(og_store *s, char out[OG_ID_MAX + 1])
{
    char release[OG_ID_MAX + 1];
    void *tx;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_READ, &tx)) != 0)
        return rc;
    rc = s->m->payout_policy_release(s->impl, tx, false, release);
    if (rc == 0)
        rc = OG_EINTERNAL; /* migration 12 writes the row */
    if ((rc = s->m->txn_end(s->impl, tx, rc < 0 ? rc : 0, false)) != 0)
        return rc;
    memcpy(out, release, strlen(release) + 1);
    return 0;
}

int og_payout_policy_release_set(og_store *s, const char *version,
                                 const char *expected_current,
                                 const char *actor, og_payout_write *out)
{
    bool written = false;
    int rc;

    if (!s || !out || og__id_check(version) != 0 ||
        og__id_check(expected_current) != 0)
        return OG_EINVAL;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    if ((rc = s->m->payout_policy_release_set(s->impl, version,
                                              expected_current, actor,
                                              &written)) != 0)
        return rc;
    *out = written ? OG_PAYOUT_WRITTEN : OG_PAYOUT_VERSION_CONFLICT;
    return 0;
}
