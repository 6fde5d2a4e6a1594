/*
 * payouts.c — the payout API over HTTP (docs/http.md, "Payouts"): the
 * context administration of role payout-admin — tenants, beneficiaries,
 * destinations (the provider token write-only), drafts and their
 * cancellation — each write a version precondition, so a retried request
 * changes nothing twice.
 */
#include "harness.h"
#include "cases.h"

/* POST prefix + id + suffix as payout-admin; body stolen. */
static void admin_post(hres *r, const char *prefix, const char *id,
                       const char *suffix, json_t *body)
{
    char path[256];

    snprintf(path, sizeof path, "%s%s%s", prefix, id, suffix);
    post(r, g_a, path, KEY(P_PAYOUT_ADMIN), body);
}

static void assert_written(hres *r, long status, const char *id_name,
                           const char *id, json_int_t version, int line)
{
    json_t *v = r->json ? json_object_get(r->json, "version") : NULL;

    if (r->status != status || !json_is_integer(v) ||
        json_integer_value(v) != version || !jstr(r->json, id_name) ||
        strcmp(jstr(r->json, id_name), id) != 0) {
        dump("r", r, line);
        fail_msg("line %d: expected %ld with %s version %lld", line, status,
                 id, (long long)version);
    }
}

static json_t *tenant_body(json_int_t expected, const char *currency,
                           json_int_t limit)
{
    return json_pack("{s:I, s:s, s:I, s:b, s:s}", "expected_version",
                     expected, "currency", currency, "daily_limit_minor",
                     limit, "payouts_suspended", 0, "settlement_time_zone",
                     "Europe/Berlin");
}

void payout_admin_writes_the_context_under_version_preconditions(void **state)
{
    char u[OG_UUID_LEN + 1], ten[64], ben[64], dst[64], pay[64], pay2[64];
    char token[80];
    hres r;

    (void)state;
    uuid4(u);
    snprintf(ten, sizeof ten, "T-%.8s", u);
    snprintf(ben, sizeof ben, "BEN-%.8s", u);
    snprintf(dst, sizeof dst, "DST-%.8s", u);
    snprintf(pay, sizeof pay, "PAY-%.8s", u);
    snprintf(pay2, sizeof pay2, "PAY2-%.8s", u);
    snprintf(token, sizeof token, "dsttok_%s_secret", u);
    secret_add(token);

    /* Tenant: created at version 1; the same request again is a conflict
     * that changes nothing; a change names the version it expects. */
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(0, "EUR", 1000000));
    assert_written(&r, 201, "tenant_id", ten, 1, __LINE__);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(0, "EUR", 1000000));
    assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(1, "EUR", 2000000));
    assert_written(&r, 200, "tenant_id", ten, 2, __LINE__);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(1, "EUR", 2000000)); /* retried: no second move */
    assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(2, "USD", 2000000));
    assert_error(&r, 409, "change_refused");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               tenant_body(2, "EURO", 2000000));
    assert_http(&r, 400);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/tenants/", ten, "",
               json_pack("{s:i, s:s}", "expected_version", 2, "currency",
                         "EUR"));
    assert_error(&r, 400, "malformed_request");
    hres_free(&r);

    /* Beneficiary: its tenant must exist. */
    admin_post(&r, "/v1/payout-admin/beneficiaries/", ben, "",
               json_pack("{s:i, s:s, s:b, s:s}", "expected_version", 0,
                         "tenant_id", "T-NOSUCH-TENANT", "verified", 1,
                         "status", "Active"));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/beneficiaries/", ben, "",
               json_pack("{s:i, s:s, s:b, s:s}", "expected_version", 0,
                         "tenant_id", ten, "verified", 1, "status", "Open"));
    assert_error(&r, 400, "malformed_request");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/beneficiaries/", ben, "",
               json_pack("{s:i, s:s, s:b, s:s}", "expected_version", 0,
                         "tenant_id", ten, "verified", 1, "status", "Active"));
    assert_written(&r, 201, "beneficiary_id", ben, 1, __LINE__);
    hres_free(&r);

    /* Destination: the token goes in and never comes out. */
    admin_post(&r, "/v1/payout-admin/destinations/", dst, "",
               json_pack("{s:i, s:s, s:s}", "expected_version", 0,
                         "beneficiary_id", ben, "provider_token",
                         "has a space"));
    assert_http(&r, 400);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/destinations/", dst, "",
               json_pack("{s:i, s:s, s:s}", "expected_version", 0,
                         "beneficiary_id", ben, "provider_token", token));
    assert_written(&r, 201, "destination_id", dst, 1, __LINE__);
    assert_null(strstr(r.body, token));
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/destinations/", dst, "",
               json_pack("{s:i, s:s, s:s}", "expected_version", 0,
                         "beneficiary_id", ben, "provider_token", token));
    assert_error(&r, 409, "version_conflict");
    assert_null(strstr(r.body, token));
    hres_free(&r);

    /* Draft: created once; a retry meets the existing one. */
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "tenant_id",
                         ten, "beneficiary_id", ben, "destination_id", dst,
                         "destination_version", 1, "amount", "4250.00",
                         "currency", "EUR", "purpose", "supplier invoice"));
    assert_written(&r, 201, "payout_id", pay, 1, __LINE__);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "tenant_id",
                         ten, "beneficiary_id", ben, "destination_id", dst,
                         "destination_version", 1, "amount", "4250.00",
                         "currency", "EUR", "purpose", "supplier invoice"));
    assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", pay2, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "tenant_id", ten,
                         "beneficiary_id", ben, "destination_id", dst,
                         "destination_version", 1, "amount", "10.00",
                         "currency", "USD"));
    assert_error(&r, 409, "change_refused");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", pay2, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "tenant_id", ten,
                         "beneficiary_id", ben, "destination_id", dst,
                         "destination_version", 1, "amount", "-1",
                         "currency", "EUR"));
    assert_http(&r, 400);
    hres_free(&r);

    /* Cancel: at its version, once. */
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "/cancel",
               json_pack("{s:i}", "expected_version", 1));
    assert_written(&r, 200, "payout_id", pay, 2, __LINE__);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "/cancel",
               json_pack("{s:i}", "expected_version", 1));
    assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "/cancel",
               json_pack("{s:i}", "expected_version", 2));
    assert_error(&r, 409, "change_refused");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", "PAY-NOSUCH-1", "/cancel",
               json_pack("{s:i}", "expected_version", 1));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
}
