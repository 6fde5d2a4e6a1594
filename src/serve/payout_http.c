/*
 * payout_http.c — the payout API's context administration (docs/http.md,
 * "Payouts: context administration"; role payout-admin): tenants,
 * beneficiaries, destinations and payout drafts. Each handler checks its
 * body, makes ONE conditional write of the store (oncegate/payout_store.h)
 * and maps the outcome to HTTP.
 *
 * Idempotency is by version precondition: every write names the version it
 * expects (0: create), so a retried request that was applied meets
 * 409 version_conflict with the record's version unchanged, never a second
 * change.
 *
 * Secrets: a destination's provider token arrives in a body and goes to
 * the store; it is never answered, never added to r->log.
 */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "http.h"
#include "oncegate/payout_store.h"

/* A boolean member: present (when required) and true or false. */
static int body_bool(og_http_req *r, json_t *obj, const char *name,
                     bool required, bool *out)
{
    json_t *v = json_object_get(obj, name);

    if (!v && !required)
        return 0;
    if (!json_is_boolean(v)) {
        og_http_error(r, 400, "malformed_request",
                      v ? "member must be true or false" : "member missing",
                      name);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* The path's record id: og_id_valid, else the library's code for err. */
static int path_id(og_http_req *r, int err)
{
    if (r->param_too_long || !og_id_valid(r->param)) {
        og_http_lib_error(r, err);
        return -1;
    }
    return 0;
}

/* Answers a conditional write: WRITTEN 201 (created: expected 0) or 200
 * with {id_name: id, "version"}; the others 409/404 with their stable
 * code. refused is the REFUSED outcome's message. */
static void put_answer(og_http_req *r, int rc, const og_payout_put_result *res,
                       int64_t expected, const char *id_name,
                       const char *refused)
{
    if (rc != 0) {
        og_http_lib_error(r, rc);
        return;
    }
    og_http_log_str(r, "outcome",
                    res->outcome == OG_PAYOUT_WRITTEN ? "written"
                    : res->outcome == OG_PAYOUT_VERSION_CONFLICT
                        ? "version_conflict"
                    : res->outcome == OG_PAYOUT_NOT_FOUND ? "not_found"
                                                          : "refused");
    switch (res->outcome) {
    case OG_PAYOUT_WRITTEN:
        og_http_json(r, expected == 0 ? 201 : 200,
                     json_pack("{s:s, s:I}", id_name, r->param, "version",
                               (json_int_t)res->version));
        return;
    case OG_PAYOUT_VERSION_CONFLICT:
        og_http_error(r, 409, "version_conflict",
                      expected == 0 ? "the record exists already"
                                    : "the record is not at expected_version",
                      "expected_version");
        return;
    case OG_PAYOUT_NOT_FOUND:
        og_http_error(r, 404, "not_found",
                      "the record, or one it names, does not exist", NULL);
        return;
    case OG_PAYOUT_REFUSED:
        og_http_error(r, 409, "change_refused", refused, NULL);
        return;
    }
    og_http_error(r, 500, "internal_error", "internal error", NULL);
}

/* ===========================================================================
 * POST /v1/payout-admin/tenants/{tenant_id}
 * ========================================================================= */
int og_h_payout_tenant_put(og_http_req *r)
{
    static const char *const allowed[] = {
        "expected_version", "currency", "daily_limit_minor",
        "payouts_suspended", "settlement_time_zone", NULL};
    og_payout_tenant_settings t;
    og_payout_put_result res;
    int64_t expected = 0, limit = 0;
    bool suspended = false;
    int rc;

    memset(&t, 0, sizeof t);
    if (path_id(r, OG_EPAYOUT_TENANT) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_int(r, r->json, "expected_version", true, 0, INT64_MAX,
                    &expected) != 0 ||
        og_http_str(r, r->json, "currency", true, &t.currency) != 0 ||
        og_http_int(r, r->json, "daily_limit_minor", true, 0,
                    OG_PAYOUT_LIMIT_MAX, &limit) != 0 ||
        body_bool(r, r->json, "payouts_suspended", true, &suspended) != 0 ||
        og_http_str(r, r->json, "settlement_time_zone", false,
                    &t.settlement_time_zone) != 0)
        return 0;
    t.tenant_id = r->param;
    t.daily_limit = limit;
    t.payouts_suspended = suspended;
    og_http_log_str(r, "tenant_id", r->param);
    rc = og_payout_tenant_put(r->srv->store, &t, expected, &res);
    put_answer(r, rc, &res, expected, "tenant_id",
               "a tenant's currency is fixed when it is created");
    return 0;
}

/* ===========================================================================
 * POST /v1/payout-admin/beneficiaries/{beneficiary_id}
 * ========================================================================= */
static int status_parse(const char *s, og_payout_beneficiary_status *out)
{
#define OG__BS_TRY(name, text)                                                 \
    if (strcmp(s, text) == 0) {                                                \
        *out = OG_PAYOUT_BENEFICIARY_##name;                                   \
        return 0;                                                              \
    }
    OG_PAYOUT_BENEFICIARY_STATUS_MAP(OG__BS_TRY)
#undef OG__BS_TRY
    return -1;
}

int og_h_payout_beneficiary_put(og_http_req *r)
{
    static const char *const allowed[] = {"expected_version", "tenant_id",
                                          "verified", "status", NULL};
    og_payout_beneficiary_record b;
    og_payout_put_result res;
    const char *status;
    int64_t expected = 0;
    bool verified = false;
    int rc;

    memset(&b, 0, sizeof b);
    if (path_id(r, OG_EPAYOUT_BENEFICIARY) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_int(r, r->json, "expected_version", true, 0, INT64_MAX,
                    &expected) != 0 ||
        og_http_str(r, r->json, "tenant_id", true, &b.tenant_id) != 0 ||
        body_bool(r, r->json, "verified", true, &verified) != 0 ||
        og_http_str(r, r->json, "status", true, &status) != 0)
        return 0;
    if (status_parse(status, &b.status) != 0) {
        og_http_error(r, 400, "malformed_request",
                      "status: Active, Suspended or Closed", "status");
        return 0;
    }
    b.beneficiary_id = r->param;
    b.verified = verified;
    og_http_log_str(r, "beneficiary_id", r->param);
    rc = og_payout_beneficiary_put(r->srv->store, &b, expected, &res);
    put_answer(r, rc, &res, expected, "beneficiary_id",
               "a beneficiary's tenant is fixed when it is created");
    return 0;
}

/* ===========================================================================
 * POST /v1/payout-admin/destinations/{destination_id}
 * The provider token is write-only: in the body, never in an answer or a
 * log line (the store's errors never carry it either).
 * ========================================================================= */
int og_h_payout_destination_put(og_http_req *r)
{
    static const char *const allowed[] = {"expected_version", "beneficiary_id",
                                          "provider_token", NULL};
    og_payout_destination_record d;
    og_payout_put_result res;
    int64_t expected = 0;
    int rc;

    memset(&d, 0, sizeof d);
    if (path_id(r, OG_EPAYOUT_DESTINATION) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_int(r, r->json, "expected_version", true, 0, INT64_MAX,
                    &expected) != 0 ||
        og_http_str(r, r->json, "beneficiary_id", true, &d.beneficiary_id) !=
            0 ||
        og_http_str(r, r->json, "provider_token", true, &d.provider_token) !=
            0)
        return 0;
    d.destination_id = r->param;
    og_http_log_str(r, "destination_id", r->param);
    rc = og_payout_destination_put(r->srv->store, &d, expected, &res);
    put_answer(r, rc, &res, expected, "destination_id", "refused");
    return 0;
}

/* ===========================================================================
 * POST /v1/payout-admin/payouts/{payout_id}: a draft, created once (a
 * retry meets version_conflict), or — with expected_version >= 1, as the
 * other records of this API change — a Draft's edit (og_payout_edit: its
 * terms replaced, its version moved; a retry meets version_conflict, a
 * payout past Draft change_refused). The requester (the editor) is the
 * authenticated principal, never the body.
 * ========================================================================= */
int og_h_payout_draft(og_http_req *r)
{
    static const char *const allowed[] = {
        "tenant_id", "beneficiary_id", "destination_id",
        "destination_version", "amount", "currency", "purpose",
        "expected_version", NULL};
    og_payout_draft_req d;
    og_payout_put_result res;
    int64_t dv = 0, expected = 0;
    int rc;

    memset(&d, 0, sizeof d);
    if (path_id(r, OG_EPAYOUT_ID) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_int(r, r->json, "expected_version", false, 0, INT64_MAX,
                    &expected) != 0 ||
        og_http_str(r, r->json, "tenant_id", true, &d.terms.tenant_id) != 0 ||
        og_http_str(r, r->json, "beneficiary_id", true,
                    &d.terms.beneficiary_id) != 0 ||
        og_http_str(r, r->json, "destination_id", true,
                    &d.terms.destination_id) != 0 ||
        og_http_int(r, r->json, "destination_version", true, 1, INT64_MAX,
                    &dv) != 0 ||
        og_http_str(r, r->json, "amount", true, &d.terms.amount) != 0 ||
        og_http_str(r, r->json, "currency", true, &d.terms.currency) != 0 ||
        og_http_str(r, r->json, "purpose", false, &d.terms.purpose) != 0)
        return 0;
    d.payout_id = r->param;
    d.terms.destination_version = dv;
    d.requester_id = r->principal->id;
    og_http_log_str(r, "payout_id", r->param);
    if (expected == 0) {
        rc = og_payout_draft(r->srv->store, &d, &res);
        put_answer(r, rc, &res, 0, "payout_id",
                   "the currency is not the tenant's");
        return 0;
    }
    rc = og_payout_edit(r->srv->store, &d, expected, &res);
    put_answer(r, rc, &res, expected, "payout_id",
               "only a Draft is edited, in its own tenant and the tenant's "
               "currency");
    return 0;
}

/* ===========================================================================
 * POST /v1/payout-admin/payouts/{payout_id}/cancel
 * ========================================================================= */
int og_h_payout_cancel(og_http_req *r)
{
    static const char *const allowed[] = {"expected_version", NULL};
    og_payout_put_result res;
    int64_t expected = 0;
    int rc;

    if (path_id(r, OG_EPAYOUT_ID) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_int(r, r->json, "expected_version", true, 1, INT64_MAX,
                    &expected) != 0)
        return 0;
    og_http_log_str(r, "payout_id", r->param);
    rc = og_payout_cancel(r->srv->store, r->param, expected, r->principal->id,
                          &res);
    put_answer(r, rc, &res, expected, "payout_id",
               "only a Draft, or an Approved payout with no active attempt, "
               "is cancelled");
    return 0;
}

/* ===========================================================================
 * POST /v1/payouts/{payout_id}/submit (clerk): the requester's intent,
 * compared with the record before any policy runs, then ONE decision
 * (og_payout_decide). The requester is the authenticated principal, with
 * its configured approval limit; never the body.
 *
 * Idempotency is by version precondition: the intent names the payout
 * version it acted on, and an Allowed decision moves the payout to
 * Approved at version + 1, so a retried submission meets
 * 409 payout_version_mismatch and no second grant, reservation or job.
 * ========================================================================= */

/* The first intent member that differs from the record, or NULL. The
 * amount is compared in minor units (so "4250" and "4250.00" EUR are one
 * amount), the purpose normalized; a bad amount or purpose is returned
 * as an error code in *err. */
static const char *intent_differs(const og_payout_view *p,
                                  const char *beneficiary,
                                  const char *destination, const char *amount,
                                  const char *currency, const char *purpose,
                                  int *err)
{
    char norm[OG_PAYOUT_PURPOSE_MAX + 1];
    int64_t minor = 0;
    int rc;

    *err = 0;
    if (strcmp(beneficiary, p->beneficiary_id) != 0)
        return "beneficiary_id";
    if (strcmp(destination, p->destination_id) != 0)
        return "destination_id";
    if (strcmp(currency, p->currency) != 0)
        return "currency";
    if ((rc = og_payout_amount_parse(amount, currency, &minor)) != 0) {
        *err = rc;
        return NULL;
    }
    if (minor != p->amount_minor)
        return "amount";
    if (!purpose != !p->has_purpose)
        return "purpose";
    if (purpose) {
        if ((rc = og_payout_purpose_normalize(purpose, norm, sizeof norm)) !=
            0) {
            *err = rc;
            return NULL;
        }
        if (strcmp(norm, p->purpose) != 0)
            return "purpose";
    }
    return NULL;
}

/* 409 payout_version_mismatch (with the record's version) when p is not
 * at version: true when it answered. */
static bool version_mismatch(og_http_req *r, const og_payout_view *p,
                             int64_t version)
{
    if (version == p->version)
        return false;
    og_http_log_str(r, "outcome", "payout_version_mismatch");
    og_http_json(r, 409,
                 json_pack("{s:s, s:s, s:s, s:I}", "error",
                           "payout_version_mismatch", "message",
                           "the payout is not at payout_version", "field",
                           "payout_version", "payout_version",
                           (json_int_t)p->version));
    return true;
}

/* The body's payout_version and release_at (into *version, *release_us),
 * then the path's payout into *p, at that version when at_version: 0, or
 * -1 when it answered (400, 404, 409 payout_version_mismatch, the store's
 * error). */
static int payout_at_version(og_http_req *r, og_payout_view *p,
                             int64_t *version, int64_t *release_us,
                             bool at_version)
{
    const char *release;
    int rc;

    if (og_http_int(r, r->json, "payout_version", true, 1, INT64_MAX,
                    version) != 0 ||
        og_http_str(r, r->json, "release_at", true, &release) != 0)
        return -1;
    if (og_time_parse_rfc3339(release, release_us) != 0) {
        og_http_error(r, 400, "malformed_request",
                      "release_at: an RFC 3339 time", "release_at");
        return -1;
    }
    og_http_log_str(r, "payout_id", r->param);
    rc = og_payout_get(r->srv->store, r->param, p);
    if (rc < 0) {
        og_http_lib_error(r, rc);
        return -1;
    }
    if (rc == 0) {
        og_http_error(r, 404, "not_found", "no such payout", NULL);
        return -1;
    }
    return at_version && version_mismatch(r, p, *version) ? -1 : 0;
}

/* An approval's refusal by the store (nothing written): true when it
 * answered — 409 for a decision that cannot be settled, was settled, or
 * went stale, 403 for the four-eyes rule. */
static bool settle_refused(og_http_req *r, int rc)
{
    unsigned status = 409;

    switch (rc) {
    case OG_EPAYOUT_APPROVER_IS_REQUESTER:
        status = 403;
        break;
    case OG_EPAYOUT_NOT_SETTLEABLE:
    case OG_EPAYOUT_ALREADY_SETTLED:
    case OG_EPAYOUT_SETTLE_STALE:
        break;
    default:
        return false;
    }
    og_http_log_str(r, "outcome", og_err_name(rc));
    og_http_error(r, status, og_err_name(rc), og_strerror(rc),
                  "settles_decision_id");
    return true;
}

/* Decides on the path's payout at version (ONE og_payout_decide; the
 * requester the authenticated principal in role, the grant's window from
 * release_us; settles: the pending decision an approval settles, or NULL)
 * and answers the decision: 200 with its outcome and reason, and what an
 * Allowed one issued (never a credential). */
static void decide_and_answer(og_http_req *r, int64_t version,
                              int64_t release_us, bool reauthorize,
                              const char *role, const char *settles)
{
    og_payout_decide_req d;
    og_payout_decision dec;
    json_t *a;
    int rc;

    memset(&d, 0, sizeof d);
    d.payout_id = r->param;
    d.payout_version = version;
    d.reauthorize = reauthorize;
    d.requester_id = r->principal->id;
    d.requester_role = role;
    d.requester_approval_limit = r->principal->approval_limit_minor;
    d.not_before_us = release_us;
    d.expires_at_us = release_us + r->srv->cfg.timings.max_grant_lifetime_us;
    d.correlation_id = r->correlation_id;
    /* The grant names the worker principal that may present it
     * (payouts.worker_id): the one source of the audience. */
    d.audience = r->srv->cfg.payouts_worker_id;
    d.settles_decision_id = settles;
    rc = og_payout_decide(r->srv->store, &d, &dec);
    if (rc != 0) {
        if (!settle_refused(r, rc))
            og_http_lib_error(r, rc);
        return;
    }
    og_http_log_str(r, "decision_id", dec.decision_id);
    og_http_log_str(r, "outcome",
                    og_payout_outcome_name(dec.verdict.outcome));
    og_http_log_str(r, "reason", og_payout_reason_name(dec.verdict.reason));
    a = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "decision_id",
                  dec.decision_id, "payout_id", r->param, "outcome",
                  og_payout_outcome_name(dec.verdict.outcome), "reason",
                  og_payout_reason_name(dec.verdict.reason), "policy_version",
                  dec.verdict.policy_version, "issued", dec.issued);
    if (a && dec.settles_decision_id[0]) {
        og_http_log_str(r, "settles_decision_id", dec.settles_decision_id);
        json_object_set_new(a, "settles_decision_id",
                            json_string(dec.settles_decision_id));
    }
    if (a && dec.issued) {
        og_http_log_str(r, "grant_id", dec.grant_id);
        json_object_set_new(a, "grant_id", json_string(dec.grant_id));
        json_object_set_new(a, "job_id", json_string(dec.job_id));
        json_object_set_new(a, "attempt_number",
                            json_integer(dec.attempt_number));
        json_object_set_new(a, "payout_version",
                            json_integer(dec.executable_payout_version));
        json_object_set_new(a, "release_day", json_string(dec.release_day));
    }
    og_http_json(r, 200, a);
}

/* The intent of a submission or an approval (allowed: the body's
 * members), checked against the record before any policy runs: another
 * version is a conflict (409: read it again) — unless the store is to
 * judge it (at_version false: an approval, whose retry must read as
 * settled) —, other terms a request that can never be right for this
 * payout (422). 0 with *version and *release_us, or -1 when it answered. */
static int intent_checked(og_http_req *r, const char *const *allowed,
                          bool at_version, int64_t *version,
                          int64_t *release_us)
{
    const char *ben, *dst, *amount, *currency, *purpose, *field;
    og_payout_view p;
    int err;

    if (path_id(r, OG_EPAYOUT_ID) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "beneficiary_id", true, &ben) != 0 ||
        og_http_str(r, r->json, "destination_id", true, &dst) != 0 ||
        og_http_str(r, r->json, "amount", true, &amount) != 0 ||
        og_http_str(r, r->json, "currency", true, &currency) != 0 ||
        og_http_str(r, r->json, "purpose", false, &purpose) != 0)
        return -1;
    if (payout_at_version(r, &p, version, release_us, at_version) != 0)
        return -1;
    field = intent_differs(&p, ben, dst, amount, currency, purpose, &err);
    if (err != 0)
        return og_http_lib_error(r, err), -1;
    if (field) {
        og_http_log_str(r, "outcome", "intent_mismatch");
        og_http_error(r, 422, "intent_mismatch",
                      "the intent differs from the payout record", field);
        return -1;
    }
    return 0;
}

int og_h_payout_submit(og_http_req *r)
{
    static const char *const allowed[] = {
        "beneficiary_id", "destination_id", "amount",  "currency",
        "purpose",        "payout_version", "release_at", NULL};
    int64_t version = 0, release_us = 0;

    if (intent_checked(r, allowed, true, &version, &release_us) != 0)
        return 0;
    decide_and_answer(r, version, release_us, false, "clerk", NULL);
    return 0;
}

/* ===========================================================================
 * POST /v1/payouts/{payout_id}/approve (approver): the submission's intent
 * and settles_decision_id, the payout's pending AcknowledgmentRequired or
 * EscalationRecommended decision. ONE fresh decision (og_payout_decide
 * with settles_decision_id; docs/payouts.md, section 4, "Acknowledgment
 * and escalation"): the approver is the authenticated principal, with its
 * configured approval limit, and never the pending decision's requester;
 * the pending decision is never changed.
 *
 * Idempotency: a decision is settled once (the schema's unique
 * settles_decision_id), so a retried approval is 409
 * decision_already_settled and issues nothing twice, whatever its version.
 * ========================================================================= */
int og_h_payout_approve(og_http_req *r)
{
    static const char *const allowed[] = {
        "beneficiary_id", "destination_id", "amount",
        "currency",       "purpose",        "payout_version",
        "release_at",     "settles_decision_id", NULL};
    const char *settles;
    int64_t version = 0, release_us = 0;

    if (intent_checked(r, allowed, false, &version, &release_us) != 0 ||
        og_http_str(r, r->json, "settles_decision_id", true, &settles) != 0)
        return 0;
    og_http_log_str(r, "settles_decision_id", settles);
    decide_and_answer(r, version, release_us, false, "approver", settles);
    return 0;
}

/* ===========================================================================
 * Reading (role operator): GET /v1/admin/payouts/{payout_id} and
 * GET /v1/admin/payout-backlog — the assembly `oncegate payout show|backlog`
 * prints too (payout_view.c).
 * ========================================================================= */
int og_h_payout_get(og_http_req *r)
{
    json_t *out;
    int rc;

    if (path_id(r, OG_EPAYOUT_ID) != 0)
        return 0;
    og_http_log_str(r, "payout_id", r->param);
    rc = og_payout_show_json(r->srv->store, r->param, &out);
    if (rc < 0)
        return og_http_lib_error(r, rc), 0;
    if (rc == 0) {
        og_http_error(r, 404, "not_found", "no such payout", NULL);
        return 0;
    }
    og_http_json(r, 200, out);
    return 0;
}

int og_h_payout_backlog(og_http_req *r)
{
    const char *ql = og_http_query(r, "limit");
    long limit = 100;
    json_t *out;
    int rc;

    if (ql) {
        char *end = NULL;

        limit = ql[0] >= '0' && ql[0] <= '9' && strlen(ql) <= 4
                    ? strtol(ql, &end, 10)
                    : 0;
        if (!end || *end || limit < 1 || limit > 1000) {
            og_http_error(r, 400, "malformed_request", "limit: 1 .. 1000",
                          "limit");
            return 0;
        }
    }
    rc = og_payout_backlog_json(r->srv->store, (int)limit, og_http_now_us(),
                                &out);
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    og_http_json(r, 200, out);
    return 0;
}

/* ===========================================================================
 * Finance (role operator): POST /v1/admin/payout-grants/{grant_id}/hold
 * and POST /v1/admin/payouts/{payout_id}/reauthorize. The actor, and the
 * re-authorization's requester, is the authenticated principal.
 * ========================================================================= */

/* A hold: revokes the unused payout grant and releases its reservation
 * (ONE conditional write: og_payout_grant_revoke). Its precondition is the
 * grant's state: a retried hold meets 409 already_used_or_revoked and
 * changes nothing. */
int og_h_payout_hold(og_http_req *r)
{
    static const char *const allowed[] = {NULL};
    og_revoke_outcome out;
    int rc;

    if (path_id(r, OG_EGRANT_ID) != 0 ||
        (r->json && og_http_members_only(r, r->json, allowed, NULL) != 0))
        return 0;
    og_http_log_str(r, "grant_id", r->param);
    rc = og_payout_grant_revoke(r->srv->store, r->param, r->principal->id,
                                &out);
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    switch (out) {
    case OG_REVOKE_REVOKED:
        og_http_log_str(r, "outcome", "revoked");
        og_http_json(r, 200, json_pack("{s:s, s:s}", "outcome", "revoked",
                                       "grant_id", r->param));
        return 0;
    case OG_REVOKE_ALREADY_USED_OR_REVOKED:
        og_http_log_str(r, "outcome", "already_used_or_revoked");
        og_http_error(r, 409, "already_used_or_revoked",
                      "the grant was consumed or revoked before", NULL);
        return 0;
    case OG_REVOKE_NOT_ISSUED:
    default:
        og_http_error(r, 404, "not_found", "no such payout grant", NULL);
        return 0;
    }
}

/* A re-authorization after NotStarted / NotApplied / Failed: ONE fresh
 * decision (og_payout_decide, reauthorize) on the payout at
 * payout_version, which an Allowed one moves: a retried request meets 409
 * payout_version_mismatch and issues nothing twice. */
int og_h_payout_reauthorize(og_http_req *r)
{
    static const char *const allowed[] = {"payout_version", "release_at",
                                          NULL};
    og_payout_view p;
    int64_t version = 0, release_us = 0;

    if (path_id(r, OG_EPAYOUT_ID) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        payout_at_version(r, &p, &version, &release_us, true) != 0)
        return 0;
    decide_and_answer(r, version, release_us, true, "operator", NULL);
    return 0;
}

/* Job resubmission (POST /v1/admin/payout-jobs/{job_id}/resubmit
 * {"idempotency_key": UUID}): a new job for the same payout and grant
 * (og_payout_job_resubmit_keyed; the grant still decides). The key becomes
 * the new job's id, remembered as its primary key: a retried request
 * writes nothing and is 409 idempotency_key_used naming the job. */
int og_h_payout_resubmit(og_http_req *r)
{
    static const char *const allowed[] = {"idempotency_key", NULL};
    char job[OG_UUID_LEN + 1];
    const char *key;
    int rc;

    if (path_id(r, OG_EPAYOUT_JOB) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "idempotency_key", true, &key) != 0)
        return 0;
    og_http_log_str(r, "job_id", r->param);
    rc = og_payout_job_resubmit_keyed(r->srv->store, r->param, key,
                                      r->principal->id, job);
    if (rc < 0)
        return og_http_lib_error(r, rc), 0;
    if (rc == 0) {
        og_http_error(r, 404, "not_found", "no such payout job", NULL);
        return 0;
    }
    og_http_log_str(r, "new_job_id", job);
    if (rc == 2) {
        og_http_log_str(r, "outcome", "idempotency_key_used");
        og_http_json(r, 409,
                     json_pack("{s:s, s:s, s:s, s:s}", "error",
                               "idempotency_key_used", "message",
                               "a job with this key exists: nothing written",
                               "field", "idempotency_key", "job_id", job));
        return 0;
    }
    og_http_log_str(r, "outcome", "resubmitted");
    og_http_json(r, 201, json_pack("{s:s, s:s, s:s}", "outcome",
                                   "resubmitted", "job_id", job, "from",
                                   r->param));
    return 0;
}
