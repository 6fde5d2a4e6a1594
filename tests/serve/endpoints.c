/*
 * endpoints.c — each endpoint's documented answer (docs/http.md): issuing,
 * admitting, retries, reading an operation, consume verdicts, revocations
 * and families; a refusal's reason logged for operators but never told to
 * the caller; issuing without a signing key.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Endpoints' answers
 * ========================================================================= */
void issued_grant_is_201_with_the_documented_fields(void **state)
{
    int64_t exp_us, now_us = (int64_t)time(NULL) * 1000000;
    hres r;

    post(&r, g_a, "/v1/grants", KEY(P_ISSUER), grant_request("agent-1", NULL, 900));
    assert_http(&r, 201);
    secret_add_token(jstr(r.json, "token"));
    assert_non_null(jstr(r.json, "grant_id"));
    assert_str(jstr(r.json, "issuer"), ISSUER);
    assert_non_null(jstr(r.json, "token"));
    assert_true(json_is_null(json_object_get(r.json, "family")));
    assert_non_null(jstr(r.json, "expires_at"));
    assert_int_equal(og_time_parse_rfc3339(jstr(r.json, "expires_at"), &exp_us), 0);
    assert_true(exp_us > now_us + 800 * INT64_C(1000000));
    assert_true(exp_us < now_us + 1000 * INT64_C(1000000));
    hres_free(&r);

    post(&r, g_a, "/v1/grants", KEY(P_ISSUER),
         grant_request("agent-1", "fam-issued-fields", 60));
    assert_http(&r, 201);
    secret_add_token(jstr(r.json, "token"));
    assert_str(jstr(r.json, "family"), "fam-issued-fields");
    hres_free(&r);

    /* ttl_seconds outside 1 .. max_grant_lifetime */
    post(&r, g_a, "/v1/grants", KEY(P_ISSUER), grant_request("agent-1", NULL, 0));
    assert_http(&r, 400);
    hres_free(&r);
    post(&r, g_a, "/v1/grants", KEY(P_ISSUER),
         grant_request("agent-1", NULL, 3601));
    assert_http(&r, 400);
    hres_free(&r);
}

void fresh_grant_is_admitted_with_202(void **state)
{
    char op[OG_UUID_LEN + 1];
    grant g;

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_b, op, g.token); /* issued on A, admitted on B */
}

void same_operation_retry_is_202_already_admitted_on_every_instance(
    void **state)
{
    char op[OG_UUID_LEN + 1];
    srv *s[3] = {g_a, g_a, g_b};
    grant g;

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    for (int i = 0; i < 3; i++) {
        hres r;
        admit(&r, s[i], KEY(P_AGENT), op, g.token);
        assert_http(&r, 202);
        assert_str(jstr(r.json, "operation_id"), op);
        assert_str(jstr(r.json, "status"), "admitted");
        assert_str(jstr(r.json, "outcome"), "already_admitted");
        hres_free(&r);
    }
}

void operation_id_reused_for_another_grant_is_409(void **state)
{
    char op[OG_UUID_LEN + 1];
    grant g, g2;
    hres r;

    issue_grant(g_a, &g);
    issue_grant(g_a, &g2);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    admit(&r, g_b, KEY(P_AGENT), op, g2.token);
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
    /* g2 was not spent by that refusal. */
    uuid4(op);
    assert_admits(g_b, op, g2.token);
}

void operation_read_by_its_caller_is_200_with_fields(void **state)
{
    static const char *const fields[] = {
        "operation_id", "status", "issuer", "grant_id", "account", "amount",
        "currency", "owner_version", "created_at", "lease_until", "submit_by"};
    char op[OG_UUID_LEN + 1], path[128];
    int64_t created, lease, submit;
    grant g;
    hres r;

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(&r, g_b, path, KEY(P_AGENT));
    assert_http(&r, 200);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!json_object_get(r.json, fields[i]))
            fail_msg("GET operation lacks %s", fields[i]);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "admitted");
    assert_str(jstr(r.json, "issuer"), ISSUER);
    assert_str(jstr(r.json, "grant_id"), g.grant_id);
    assert_str(jstr(r.json, "account"), ACCOUNT);
    assert_str(jstr(r.json, "currency"), CURRENCY);
    assert_non_null(jstr(r.json, "amount"));
    assert_true(strcmp(jstr(r.json, "amount"), "250") == 0 ||
                strcmp(jstr(r.json, "amount"), AMOUNT) == 0);
    assert_int_equal(json_integer_value(json_object_get(r.json, "owner_version")), 1);
    assert_int_equal(og_time_parse_rfc3339(jstr(r.json, "created_at"), &created), 0);
    assert_int_equal(og_time_parse_rfc3339(jstr(r.json, "lease_until"), &lease), 0);
    assert_int_equal(og_time_parse_rfc3339(jstr(r.json, "submit_by"), &submit), 0);
    assert_true(lease > created);
    assert_true(submit > created);
    hres_free(&r);

    /* Upper case ids name the same operation. */
    for (char *p = path; *p; p++)
        if (p > path + strlen("/v1/operations/"))
            *p = (char)toupper((unsigned char)*p);
    get(&r, g_a, path, KEY(P_AGENT));
    assert_http(&r, 200);
    assert_str(jstr(r.json, "operation_id"), op);
    hres_free(&r);
}

void consume_verdict_is_200_once_then_409_and_the_grant_cannot_be_admitted(
    void **state)
{
    grant g;
    hres r;

    issue_grant(g_a, &g);
    consume(&r, g_a, g.token);
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "consumed")));
    assert_non_null(json_object_get(r.json, "family"));
    hres_free(&r);
    consume(&r, g_b, g.token);
    assert_error(&r, 409, "already_consumed");
    assert_true(json_is_false(json_object_get(r.json, "consumed")));
    hres_free(&r);
    assert_refused(g_a, g.token);

    /* An admitted grant is denied by the verdict too. */
    {
        char op[OG_UUID_LEN + 1];
        grant g2;
        issue_grant(g_a, &g2);
        uuid4(op);
        assert_admits(g_a, op, g2.token);
        consume(&r, g_b, g2.token);
        assert_error(&r, 409, "already_consumed");
        assert_true(json_is_false(json_object_get(r.json, "consumed")));
        hres_free(&r);
    }
    /* An invalid token is not a denial but 403. */
    {
        char bad[OG_TOKEN_MAX + 1];
        snprintf(bad, sizeof bad, "%s", g.token);
        bad[strlen(bad) - 10] = bad[strlen(bad) - 10] == 'A' ? 'B' : 'A';
        consume(&r, g_a, bad);
        assert_error(&r, 403, "grant_not_valid");
        assert_str(jstr(r.json, "reason"), "grant.bad_signature");
        hres_free(&r);
    }
}

void revoked_grant_is_refused_and_a_second_revocation_is_409(
    void **state)
{
    grant g, g2;
    hres r;

    issue_grant(g_a, &g);
    post(&r, g_a, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s}", "token", g.token));
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "revoked")));
    hres_free(&r);
    assert_refused(g_b, g.token);
    post(&r, g_b, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s}", "token", g.token));
    assert_error(&r, 409, "already_used_or_revoked");
    assert_true(json_is_false(json_object_get(r.json, "revoked")));
    hres_free(&r);

    /* By id: issuance proven from the issuance log. */
    issue_grant(g_a, &g2);
    post(&r, g_b, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s, s:s}", "issuer", ISSUER, "grant_id", g2.grant_id));
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "revoked")));
    hres_free(&r);
    assert_refused(g_a, g2.token);

    post(&r, g_a, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s, s:s}", "issuer", ISSUER, "grant_id",
                   "never-issued-grant-id"));
    assert_error(&r, 404, "grant_not_issued");
    assert_true(json_is_false(json_object_get(r.json, "revoked")));
    hres_free(&r);
}

void revocation_never_recalls_an_operation_admitted_before_it(
    void **state)
{
    char op[OG_UUID_LEN + 1];
    grant g;
    hres r;

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    post(&r, g_b, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s}", "token", g.token));
    assert_error(&r, 409, "already_used_or_revoked");
    assert_true(json_is_false(json_object_get(r.json, "revoked")));
    hres_free(&r);
    admit(&r, g_b, KEY(P_AGENT), op, g.token);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
}

void revoked_family_refuses_its_grants_tickets_and_new_issuance(
    void **state)
{
    char fam[64], u[OG_UUID_LEN + 1], path[160];
    grant g;
    hres r;

    uuid4(u);
    snprintf(fam, sizeof fam, "fam-%.8s", u);
    issue_grant_ex(g_a, &g, "agent-1", fam);
    assert_str(g.family, fam);
    snprintf(path, sizeof path, "/v1/families/%s/revoke", fam);
    post(&r, g_b, path, KEY(P_REVOKER), NULL);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "family"), fam);
    assert_int_equal(json_array_size(json_object_get(r.json, "revoked")), 1);
    assert_str(json_string_value(json_array_get(json_object_get(r.json, "revoked"), 0)),
               g.grant_id);
    hres_free(&r);
    assert_refused(g_a, g.token);

    post(&r, g_a, "/v1/grants", KEY(P_ISSUER), grant_request("agent-1", fam, 900));
    assert_error(&r, 409, "family_revoked");
    hres_free(&r);
    post(&r, g_a, "/v1/tickets", KEY(P_ISSUER), json_pack("{s:s}", "family", fam));
    assert_error(&r, 409, "family_revoked");
    hres_free(&r);
    post(&r, g_a, path, KEY(P_REVOKER), NULL);
    assert_http(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "revoked")), 0);
    hres_free(&r);
}

void refusal_reason_is_logged_for_operators_but_not_told_to_the_caller(
    void **state)
{
    char op[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1], rid1[64], rid2[64];
    json_t *ev;
    grant g;
    hres r;

    issue_grant(g_a, &g);
    uuid4(op);
    uuid4(op2);
    snprintf(rid1, sizeof rid1, "adm-%.30s", op);
    snprintf(rid2, sizeof rid2, "ref-%.30s", op2);
    admit_rid(&r, g_a, op, g.token, rid1);
    assert_http(&r, 202);
    hres_free(&r);
    admit_rid(&r, g_a, op2, g.token, rid2);
    assert_error(&r, 409, "grant_not_available");
    assert_null(strstr(r.body, "grant_spent"));
    assert_null(json_object_get(r.json, "refusal"));
    assert_null(strstr(r.body, op)); /* nothing about the other operation */
    hres_free(&r);

    ev = log_request_event(g_a, rid1, 5000);
    if (!ev)
        fail_msg("no request event for %s in %s", rid1, g_a->log_path);
    assert_str(jstr(ev, "route"), "/v1/operations");
    assert_int_equal(json_integer_value(json_object_get(ev, "status")), 202);
    assert_str(jstr(ev, "principal"), "agent-1");
    assert_str(jstr(ev, "operation_id"), op);
    assert_str(jstr(ev, "grant_id"), g.grant_id);
    assert_str(jstr(ev, "outcome"), "admitted");
    json_decref(ev);
    ev = log_request_event(g_a, rid2, 5000);
    if (!ev)
        fail_msg("no request event for %s in %s", rid2, g_a->log_path);
    assert_int_equal(json_integer_value(json_object_get(ev, "status")), 409);
    assert_str(jstr(ev, "refusal"), "grant_spent_by_other_operation");
    json_decref(ev);
}

void grant_issuing_without_a_signing_key_is_501(void **state)
{
    site *st = site_new("no-signing-key", false, 0, true);
    char dir[PATHLEN + 32], op[OG_UUID_LEN + 1], jti[OG_GRANT_ID_LEN + 1];
    og_grant_claims c;
    char *tok;
    srv *s;
    hres r;

    assert_non_null(st);
    /* Verification keys only: the issuer's public key. */
    snprintf(dir, sizeof dir, "%s/public-keys", st->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(copy_file(g_pub_path, dir), 0);
    json_object_set_new(st->conf, "keys_dir", json_string(dir));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);

    post(&r, s, "/v1/grants", KEY(P_ISSUER), grant_request("agent-1", NULL, 900));
    assert_error(&r, 501, "issuing_not_configured");
    hres_free(&r);
    /* It still verifies and admits the issuer's grants. */
    claims_default(&c, jti);
    tok = sign(&c);
    uuid4(op);
    assert_admits(s, op, tok);
    free(tok);
}
