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
#include <string.h>

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
 * retry meets version_conflict). The requester is the authenticated
 * principal, never the body.
 * ========================================================================= */
int og_h_payout_draft(og_http_req *r)
{
    static const char *const allowed[] = {
        "tenant_id", "beneficiary_id", "destination_id",
        "destination_version", "amount", "currency", "purpose", NULL};
    og_payout_draft_req d;
    og_payout_put_result res;
    int64_t dv = 0;
    int rc;

    memset(&d, 0, sizeof d);
    if (path_id(r, OG_EPAYOUT_ID) != 0 ||
        og_http_members_only(r, r->json, allowed, NULL) != 0 ||
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
    rc = og_payout_draft(r->srv->store, &d, &res);
    put_answer(r, rc, &res, 0, "payout_id",
               "the currency is not the tenant's");
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
