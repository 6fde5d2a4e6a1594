/*
 * payout_api.c — the payout API over HTTP (docs/http.md, "Payouts"): the
 * context administration of role payout-admin — tenants, beneficiaries,
 * destinations (the provider token write-only), drafts and their
 * cancellation — each write a version precondition, so a retried request
 * changes nothing twice; and the operator's reading of a payout and of
 * the payout backlog.
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

/* ===========================================================================
 * The clerk's submission.
 * ========================================================================= */

/* A payout context made over HTTP: tenant (EUR, daily limit 100,000.00),
 * an Active verified beneficiary, a destination and a draft of amount. */
typedef struct pctx {
    char ten[64], ben[64], dst[64], pay[64];
} pctx;

static void pctx_new(pctx *c, const char *amount)
{
    char u[OG_UUID_LEN + 1], token[80];
    hres r;

    uuid4(u);
    snprintf(c->ten, sizeof c->ten, "T-%.8s", u);
    snprintf(c->ben, sizeof c->ben, "BEN-%.8s", u);
    snprintf(c->dst, sizeof c->dst, "DST-%.8s", u);
    snprintf(c->pay, sizeof c->pay, "PAY-%.8s", u);
    snprintf(token, sizeof token, "dsttok_%s_secret", u);
    secret_add(token);
    admin_post(&r, "/v1/payout-admin/tenants/", c->ten, "",
               tenant_body(0, "EUR", 10000000));
    assert_http(&r, 201);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/beneficiaries/", c->ben, "",
               json_pack("{s:i, s:s, s:b, s:s}", "expected_version", 0,
                         "tenant_id", c->ten, "verified", 1, "status",
                         "Active"));
    assert_http(&r, 201);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/destinations/", c->dst, "",
               json_pack("{s:i, s:s, s:s}", "expected_version", 0,
                         "beneficiary_id", c->ben, "provider_token", token));
    assert_http(&r, 201);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", c->pay, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "tenant_id",
                         c->ten, "beneficiary_id", c->ben, "destination_id",
                         c->dst, "destination_version", 1, "amount", amount,
                         "currency", "EUR", "purpose", "supplier invoice"));
    assert_http(&r, 201);
    hres_free(&r);
}

/* Ages the destination's last change by 8 days: past the policy's
 * "changed in the last 7 days" (docs/payouts.md, section 4). */
static void pctx_age_destination(const pctx *c)
{
    char sql[256];

    if (g_pg)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = changed_at - "
                 "interval '8 days' WHERE destination_id = '%s'", c->dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = changed_at - "
                 "(8 * 86400 * 1000000) WHERE destination_id = '%s'", c->dst);
    store_sql(g_main, sql);
}

/* POST /v1/payouts/{pay}/submit as key with the intent. */
static void submit(hres *r, const pctx *c, const char *key, const char *amount,
                   json_int_t version)
{
    char path[160], release[40];

    snprintf(path, sizeof path, "/v1/payouts/%s/submit", c->pay);
    og_time_format_rfc3339((int64_t)time(NULL) * 1000000 + 60000000, release,
                           sizeof release);
    post(r, g_a, path, key,
         json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "beneficiary_id",
                   c->ben, "destination_id", c->dst, "amount", amount,
                   "currency", "EUR", "purpose", "supplier  invoice",
                   "payout_version", version, "release_at", release));
}

static void assert_decision(const hres *r, const char *outcome,
                            const char *reason, bool issued, int line)
{
    if (r->status != 200 || !jstr(r->json, "decision_id") ||
        !jstr(r->json, "outcome") || strcmp(jstr(r->json, "outcome"),
                                            outcome) != 0 ||
        !jstr(r->json, "reason") || strcmp(jstr(r->json, "reason"),
                                           reason) != 0 ||
        json_is_true(json_object_get(r->json, "issued")) != issued) {
        dump("r", r, line);
        fail_msg("line %d: expected 200 %s %s", line, outcome, reason);
    }
}

/* The clerk submits c's payout (amount as written, version 1): the
 * destination changed today needs an acknowledgment; aged past 7 days the
 * same submission is Allowed — its answer left in *r. */
static void submit_until_allowed(hres *r, const pctx *c, const char *amount)
{
    submit(r, c, KEY(P_CLERK), amount, 1);
    assert_decision(r, "AcknowledgmentRequired",
                    "destination.recently-changed", false, __LINE__);
    hres_free(r);
    pctx_age_destination(c);
    submit(r, c, KEY(P_CLERK), "4250.00", 1);
    assert_decision(r, "Allowed", "payout.allowed", true, __LINE__);
}

void clerk_submission_compares_the_intent_then_answers_the_decision(
    void **state)
{
    pctx c, big;
    hres r;

    (void)state;
    pctx_new(&c, "4250.00");

    /* The intent against the record, before policy: nothing decided. */
    submit(&r, &c, KEY(P_CLERK), "4250.01", 1);
    assert_error(&r, 422, "intent_mismatch");
    assert_str(jstr(r.json, "field"), "amount");
    hres_free(&r);
    submit(&r, &c, KEY(P_CLERK), "4250.00", 2);
    assert_error(&r, 409, "payout_version_mismatch");
    hres_free(&r);
    submit(&r, &c, KEY(P_CLERK), "4250.000", 1);
    assert_error(&r, 400, "input.amount_minor_units");
    hres_free(&r);

    /* A destination changed today needs an acknowledgment; older than 7
     * days: Allowed, with its grant (no credential), and the payout
     * Approved at version 2. */
    submit_until_allowed(&r, &c, "4250");
    assert_non_null(jstr(r.json, "grant_id"));
    assert_non_null(jstr(r.json, "job_id"));
    assert_null(json_object_get(r.json, "token"));
    assert_int_equal(json_integer_value(json_object_get(r.json,
                                                        "payout_version")),
                     2);
    hres_free(&r);

    /* Retried: the version moved, so no second decision, grant or job. */
    submit(&r, &c, KEY(P_CLERK), "4250.00", 1);
    assert_error(&r, 409, "payout_version_mismatch");
    assert_int_equal(json_integer_value(json_object_get(r.json,
                                                        "payout_version")),
                     2);
    hres_free(&r);

    /* Above the clerk's approval limit: escalation, never an Allowed. */
    pctx_new(&big, "5000.01");
    pctx_age_destination(&big);
    submit(&r, &big, KEY(P_CLERK), "5000.01", 1);
    assert_decision(&r, "EscalationRecommended",
                    "amount.above-requester-limit", false, __LINE__);
    hres_free(&r);

    /* No such payout. */
    snprintf(big.pay, sizeof big.pay, "PAY-NOSUCH-2");
    submit(&r, &big, KEY(P_CLERK), "5000.01", 1);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
}

/* ===========================================================================
 * A Draft's edit: POST /v1/payout-admin/payouts/{id} with expected_version.
 * ========================================================================= */
static json_t *edit_body(const pctx *c, json_int_t expected,
                         const char *amount, const char *currency)
{
    return json_pack("{s:I, s:s, s:s, s:s, s:i, s:s, s:s, s:s}",
                     "expected_version", expected, "tenant_id", c->ten,
                     "beneficiary_id", c->ben, "destination_id", c->dst,
                     "destination_version", 1, "amount", amount, "currency",
                     currency, "purpose", "supplier invoice");
}

void payout_admin_edits_a_draft_under_its_version(void **state)
{
    char path[160];
    pctx c;
    hres r;

    (void)state;
    pctx_new(&c, "4000.00");
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 1, "4250.00", "EUR"));
    assert_written(&r, 200, "payout_id", c.pay, 2, __LINE__);
    hres_free(&r);
    /* retried: the version moved, nothing changes twice */
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 1, "4250.00", "EUR"));
    assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 2, "4250.00", "USD"));
    assert_error(&r, 409, "change_refused");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", "PAY-NOSUCH-EDIT", "",
               edit_body(&c, 1, "4250.00", "EUR"));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, -1, "4250.00", "EUR"));
    assert_error(&r, 400, "malformed_request");
    hres_free(&r);

    /* The clerk submits the edited terms at the edited version; once
     * Approved the draft's terms are history. */
    pctx_age_destination(&c);
    submit(&r, &c, KEY(P_CLERK), "4250.00", 2);
    assert_decision(&r, "Allowed", "payout.allowed", true, __LINE__);
    hres_free(&r);
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 3, "1.00", "EUR"));
    assert_error(&r, 409, "change_refused");
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", c.pay);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_str(jstr(json_object_get(r.json, "payout"), "amount"), "4250.00");
    assert_str(jstr(json_array_get(json_object_get(r.json, "history"), 1),
                    "kind"),
               "edited");
    hres_free(&r);
}

/* ===========================================================================
 * An approver settles an acknowledgment or an escalation with a FRESH
 * decision (docs/payouts.md, section 4, "Acknowledgment and escalation").
 * ========================================================================= */

/* POST /v1/payouts/{pay}/approve as key with the intent at version and
 * settles. */
static void approve_amount(hres *r, const pctx *c, const char *key,
                           const char *amount, json_int_t version,
                           const char *settles)
{
    char path[160], release[40];

    snprintf(path, sizeof path, "/v1/payouts/%s/approve", c->pay);
    og_time_format_rfc3339((int64_t)time(NULL) * 1000000 + 60000000, release,
                           sizeof release);
    post(r, g_a, path, key,
         json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s}",
                   "beneficiary_id", c->ben, "destination_id", c->dst,
                   "amount", amount, "currency", "EUR", "purpose",
                   "supplier invoice", "payout_version", version,
                   "release_at", release, "settles_decision_id", settles));
}

static void approve(hres *r, const pctx *c, const char *key,
                    json_int_t version, const char *settles)
{
    approve_amount(r, c, key, "4250.00", version, settles);
}

static void decision_id_of(const hres *r, char out[OG_UUID_LEN + 1])
{
    const char *id = jstr(r->json, "decision_id");

    assert_non_null(id);
    snprintf(out, OG_UUID_LEN + 1, "%s", id);
}

void approver_settles_an_acknowledgment_or_an_escalation_afresh(void **state)
{
    char ack[OG_UUID_LEN + 1], esc[OG_UUID_LEN + 1], esc2[OG_UUID_LEN + 1];
    char path[160];
    json_t *d;
    pctx c, big, mine;
    hres r;

    (void)state;
    /* An acknowledgment: the clerk's AcknowledgmentRequired, then the
     * approver's fresh Allowed decision with its grant. */
    pctx_new(&c, "4250.00");
    submit(&r, &c, KEY(P_CLERK), "4250.00", 1);
    assert_decision(&r, "AcknowledgmentRequired",
                    "destination.recently-changed", false, __LINE__);
    decision_id_of(&r, ack);
    hres_free(&r);
    /* the intent is checked as for a submission */
    approve_amount(&r, &c, KEY(P_APPROVER), "4250.01", 1, ack);
    assert_error(&r, 422, "intent_mismatch");
    hres_free(&r);
    approve(&r, &c, KEY(P_APPROVER), 1, "not-a-uuid");
    assert_error(&r, 400, "input.decision_id_invalid");
    hres_free(&r);
    /* the clerk cannot use the route; neither can payout-admin */
    approve(&r, &c, KEY(P_CLERK), 1, ack);
    assert_error(&r, 403, "forbidden");
    hres_free(&r);
    approve(&r, &c, KEY(P_PAYOUT_ADMIN), 1, ack);
    assert_error(&r, 403, "forbidden");
    hres_free(&r);
    approve(&r, &c, KEY(P_APPROVER), 1, ack);
    assert_decision(&r, "Allowed", "payout.allowed", true, __LINE__);
    assert_str(jstr(r.json, "settles_decision_id"), ack);
    assert_non_null(jstr(r.json, "grant_id"));
    assert_string_not_equal(jstr(r.json, "decision_id"), ack);
    hres_free(&r);
    /* Retried: settled, whatever version it names; nothing issued twice. */
    approve(&r, &c, KEY(P_APPROVER), 1, ack);
    assert_error(&r, 409, "decision_already_settled");
    hres_free(&r);
    approve(&r, &c, KEY(P_APPROVER_LOW), 2, ack);
    assert_error(&r, 409, "decision_already_settled");
    hres_free(&r);
    /* The payout shows both decisions, the fresh one naming the first. */
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", c.pay);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    d = json_object_get(r.json, "decisions");
    assert_int_equal(json_array_size(d), 2);
    assert_str(jstr(json_array_get(d, 0), "outcome"),
               "AcknowledgmentRequired");
    assert_true(json_is_null(
        json_object_get(json_array_get(d, 0), "settles_decision_id")));
    assert_str(jstr(json_array_get(d, 1), "settles_decision_id"), ack);
    assert_str(jstr(json_array_get(d, 1), "requester_id"), "approver-5");
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(d, 1),
                         "acknowledged_destination_version")),
                     1);
    assert_int_equal(json_array_size(json_object_get(r.json, "grants")), 1);
    hres_free(&r);

    /* An escalation (5,000.01 above clerk-22's 5,000.00): an approver whose limit does not cover it escalates again, as a
     * fresh decision; one whose limit covers it allows. */
    pctx_new(&big, "5000.01");
    pctx_age_destination(&big);
    submit(&r, &big, KEY(P_CLERK), "5000.01", 1);
    assert_decision(&r, "EscalationRecommended",
                    "amount.above-requester-limit", false, __LINE__);
    decision_id_of(&r, esc);
    hres_free(&r);
    approve_amount(&r, &big, KEY(P_APPROVER_LOW), "5000.01", 1, esc);
    assert_decision(&r, "EscalationRecommended",
                    "amount.above-requester-limit", false, __LINE__);
    assert_str(jstr(r.json, "settles_decision_id"), esc);
    decision_id_of(&r, esc2);
    hres_free(&r);
    approve_amount(&r, &big, KEY(P_APPROVER), "5000.01", 1, esc2);
    assert_decision(&r, "Allowed", "payout.allowed", true, __LINE__);
    assert_str(jstr(r.json, "settles_decision_id"), esc2);
    hres_free(&r);

    /* Four eyes: a clerk that is also an approver cannot settle its own
     * decision. */
    pctx_new(&mine, "4250.00");
    submit(&r, &mine, KEY(P_CLERK_APPROVER), "4250.00", 1);
    assert_decision(&r, "AcknowledgmentRequired",
                    "destination.recently-changed", false, __LINE__);
    decision_id_of(&r, ack);
    hres_free(&r);
    approve(&r, &mine, KEY(P_CLERK_APPROVER), 1, ack);
    assert_error(&r, 403, "approver_is_requester");
    hres_free(&r);
    /* another payout's decision is not this one's to settle */
    approve(&r, &mine, KEY(P_APPROVER), 1, esc);
    assert_error(&r, 409, "decision_not_settleable");
    hres_free(&r);
    /* a version the pending decision did not evaluate */
    approve(&r, &mine, KEY(P_APPROVER), 2, ack);
    assert_error(&r, 409, "decision_stale");
    hres_free(&r);
    approve(&r, &mine, KEY(P_APPROVER), 1, ack);
    assert_decision(&r, "Allowed", "payout.allowed", true, __LINE__);
    hres_free(&r);
}

/* ===========================================================================
 * Reading, for operators: a payout with its decisions, grants (no
 * credential) and history; the backlog.
 * ========================================================================= */
void operator_reads_a_payout_with_its_decisions_grants_and_history(
    void **state)
{
    char path[160];
    json_t *d, *g, *h;
    pctx c;
    hres r;

    (void)state;
    pctx_new(&c, "4250.00");
    submit_until_allowed(&r, &c, "4250.00");
    hres_free(&r);

    snprintf(path, sizeof path, "/v1/admin/payouts/%s", c.pay);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_str(jstr(json_object_get(r.json, "payout"), "payout_id"), c.pay);
    assert_str(jstr(json_object_get(r.json, "payout"), "state"), "Approved");
    d = json_object_get(r.json, "decisions");
    g = json_object_get(r.json, "grants");
    h = json_object_get(r.json, "history");
    assert_int_equal(json_array_size(d), 2);
    assert_str(jstr(json_array_get(d, 1), "outcome"), "Allowed");
    assert_int_equal(json_array_size(g), 1);
    assert_str(jstr(json_array_get(g, 0), "state"), "Issued");
    /* issued to the worker principal (payouts.worker_id, its default
     * here), the one source of the grants' audience */
    assert_str(jstr(json_array_get(g, 0), "audience"), "payout-worker");
    assert_null(json_object_get(json_array_get(g, 0), "token"));
    assert_true(json_is_array(json_object_get(r.json, "attempts")));
    assert_true(json_array_size(h) >= 3);
    /* never the destination's provider token */
    assert_null(strstr(r.body, "dsttok_"));
    hres_free(&r);

    /* The same assembly the CLI prints; a missing payout is 404, a bad
     * id 400. */
    get(&r, g_a, "/v1/admin/payouts/PAY-NOSUCH-3", KEY(P_OPERATOR));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    get(&r, g_a, "/v1/admin/payouts/bad%20id", KEY(P_OPERATOR));
    assert_http(&r, 400);
    hres_free(&r);

    get(&r, g_a, "/v1/admin/payout-backlog?limit=5", KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_true(json_is_array(json_object_get(r.json, "backlog")));
    assert_true(json_is_integer(json_object_get(r.json, "unknown")));
    assert_true(json_is_integer(json_object_get(r.json,
                                                "needs_reconciliation")));
    hres_free(&r);
    get(&r, g_a, "/v1/admin/payout-backlog?limit=0", KEY(P_OPERATOR));
    assert_error(&r, 400, "malformed_request");
    hres_free(&r);
}

/* ===========================================================================
 * The store down: the payout writes are 503 retry_later, and the retry
 * after it came back meets a defined state.
 * ========================================================================= */
void payout_writes_are_503_retry_later_while_the_store_is_down(void **state)
{
    site *st = site_new("payout-outage", true, OUTAGE_STORE_TIMEOUT_MS, true);
    char u[OG_UUID_LEN + 1], ten[64], path[128], ra[32], job[128];
    srv *s;
    hres r;

    (void)state;
    assert_non_null(st);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    uuid4(u);
    snprintf(ten, sizeof ten, "T-%.8s", u);
    snprintf(path, sizeof path, "/v1/payout-admin/tenants/%s", ten);

    store_down(st);
    post(&r, s, path, KEY(P_PAYOUT_ADMIN), tenant_body(0, "EUR", 100000));
    assert_error(&r, 503, "retry_later");
    assert_true(hdr_value(&r, "Retry-After", ra, sizeof ra));
    hres_free(&r);
    /* the reads too, where the outage stops readers (SQLite's lock stops
     * only writers: WAL readers go on, as in outage.c) */
    if (g_pg) {
        /* finance's too (on missing records: under SQLite's lock they
         * find nothing to write; on records that exist they are 503 on
         * SQLite too: payout_finance_is_503_retry_later_while_the_store_
         * is_down, payouts.c): nothing refused, nothing applied */
        post(&r, s, "/v1/admin/payout-grants/G-OUTAGE-1/hold", KEY(P_OPERATOR),
             NULL);
        assert_error(&r, 503, "retry_later");
        hres_free(&r);
        post(&r, s, "/v1/admin/payouts/PAY-OUTAGE-1/reauthorize",
             KEY(P_OPERATOR),
             json_pack("{s:i, s:s}", "payout_version", 1, "release_at",
                       "2026-03-01T16:00:00Z"));
        assert_error(&r, 503, "retry_later");
        hres_free(&r);
        uuid4(u);
        snprintf(job, sizeof job, "/v1/admin/payout-jobs/%s/resubmit", u);
        post(&r, s, job, KEY(P_OPERATOR),
             json_pack("{s:s}", "idempotency_key", u));
        assert_error(&r, 503, "retry_later");
        hres_free(&r);
        get(&r, s, "/v1/admin/payouts/PAY-OUTAGE-1", KEY(P_OPERATOR));
        assert_error(&r, 503, "retry_later");
        hres_free(&r);
        get(&r, s, "/v1/admin/payout-backlog", KEY(P_OPERATOR));
        assert_error(&r, 503, "retry_later");
        hres_free(&r);
    }
    store_up(st);

    /* The same request again: created (the 503 wrote nothing), or, had
     * the write happened, version_conflict — never a second change. */
    post_patient(&r, s, path, KEY(P_PAYOUT_ADMIN),
                 tenant_body(0, "EUR", 100000));
    if (r.status != 201)
        assert_error(&r, 409, "version_conflict");
    hres_free(&r);
    post(&r, s, path, KEY(P_PAYOUT_ADMIN), tenant_body(1, "EUR", 200000));
    assert_http(&r, 200);
    hres_free(&r);
}

/* ===========================================================================
 * An amount finer than its currency's minor units is refused with
 * input.amount_minor_units on every payout route that takes one (a draft,
 * its edit, the clerk's submission), before anything is written.
 * ========================================================================= */
void payout_amount_finer_than_its_currency_is_400_amount_minor_units(
    void **state)
{
    char path[160], pay[80];
    pctx c;
    hres r;

    (void)state;
    pctx_new(&c, "4000.00");
    /* a draft: refused, and no payout of that id exists afterwards */
    snprintf(pay, sizeof pay, "%s-FINE", c.pay);
    admin_post(&r, "/v1/payout-admin/payouts/", pay, "",
               json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "tenant_id",
                         c.ten, "beneficiary_id", c.ben, "destination_id",
                         c.dst, "destination_version", 1, "amount",
                         "4000.001", "currency", "EUR"));
    assert_error(&r, 400, "input.amount_minor_units");
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", pay);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    /* an edit: refused, the draft stays at version 1 with its amount */
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 1, "4250.005", "EUR"));
    assert_error(&r, 400, "input.amount_minor_units");
    hres_free(&r);
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", c.pay);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_str(jstr(json_object_get(r.json, "payout"), "amount"), "4000.00");
    assert_int_equal(jint(json_object_get(r.json, "payout"), "version"), 1);
    hres_free(&r);
    /* the clerk's submission: refused before any decision */
    submit(&r, &c, KEY(P_CLERK), "4000.001", 1);
    assert_error(&r, 400, "input.amount_minor_units");
    hres_free(&r);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "decisions")), 0);
    hres_free(&r);
    /* at the currency's scale it passes */
    admin_post(&r, "/v1/payout-admin/payouts/", c.pay, "",
               edit_body(&c, 1, "4250.01", "EUR"));
    assert_written(&r, 200, "payout_id", c.pay, 2, __LINE__);
    hres_free(&r);
}
