/*
 * handlers.c — one function per endpoint, and the route table. Each handler
 * checks its body, makes ONE library call and maps the outcome to HTTP
 * (docs/http.md). No handler decides single use itself: the store does, in
 * one conditional write, so any instance may answer any request.
 *
 * Secrets: tokens, tickets, redemption codes and their results arrive in
 * bodies and leave in answers; they are never added to r->log. Log fields
 * are identifiers and outcomes.
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "refusals.h"

#define OG_DEFAULT_ACTION "credit.apply"

/* Times one store call into the latency histogram
 * (oncegate_store_latency_seconds{op}, and store_unavailable_total{op} for
 * OG_ESTORE_UNAVAILABLE): t0_us is og_http_mono_us() read in a statement
 * of its own just before the call — so it is sequenced before it, which an
 * argument beside the call would not be — and rc is the call's result,
 * returned. */
static int store_timed(og_metric_op op, int64_t t0_us, int rc)
{
    og_metrics_store_call(op, og_http_mono_us() - t0_us, rc);
    return rc;
}

/* og_exec_observer: the store calls lib/exec makes for POST /v1/operations
 * go into the same histogram, under the same names. */
static void exec_store_call(void *arg, og_exec_call call, int64_t elapsed_us,
                            int rc)
{
    static const og_metric_op ops[] = {
        [OG_EXEC_CALL_ADMIT] = OG_MOP_ADMIT,
        [OG_EXEC_CALL_MAY_SUBMIT] = OG_MOP_MAY_SUBMIT,
        [OG_EXEC_CALL_RECORD] = OG_MOP_RECORD,
    };

    (void)arg;
    if ((unsigned)call < sizeof ops / sizeof ops[0])
        og_metrics_store_call(ops[call], elapsed_us, rc);
}

static const og_exec_observer exec_observer = {exec_store_call, NULL};

/* The reason code of a grant that does not validate, answered 403. Errors
 * that are not about the grant (OG_ENOMEM, OG_EINVAL) are 500s. */
static void grant_invalid(og_http_req *r, int rc)
{
    json_t *e;

    if (strncmp(og_err_name(rc), "grant.", 6) != 0) {
        og_http_lib_error(r, rc);
        return;
    }
    e = json_pack("{s:s, s:s, s:s}", "error", "grant_not_valid", "reason",
                  og_err_name(rc), "message", og_strerror(rc));
    og_http_json(r, 403, e);
    og_http_log_str(r, "error", "grant_not_valid");
    og_http_log_str(r, "reason", og_err_name(rc));
}

/* Lower-case status names for answers: "admitted", "needs_reconciliation". */
static const char *status_api_name(og_op_status st)
{
    switch (st) {
    case OG_OP_ADMITTED: return "admitted";
    case OG_OP_SUCCEEDED: return "succeeded";
    case OG_OP_FAILED: return "failed";
    case OG_OP_UNKNOWN: return "unknown";
    case OG_OP_NEEDS_RECONCILIATION: return "needs_reconciliation";
    /* payout attempts' (schema 7); no credit is ever in them, and the
     * operators' ?status= filter and resolve take the five above only */
    case OG_OP_STARTED: return "started";
    case OG_OP_NOT_STARTED: return "not_started";
    case OG_OP_NOT_APPLIED: return "not_applied";
    }
    return "unknown";
}

/* 200 for a settled operation, 202 for one still to be settled ("check
 * again", never "done"). */
static unsigned status_http(og_op_status st)
{
    return st == OG_OP_SUCCEEDED || st == OG_OP_FAILED ? 200 : 202;
}

/* An RFC 3339 string for us (a new reference). */
static json_t *time_json(int64_t us)
{
    char buf[40];

    return json_string(og_time_format_rfc3339(us, buf, sizeof buf));
}

/* Validates the bound parameters {account, amount, currency}. */
static int params_read(og_http_req *r, json_t *params, const char **account,
                       const char **amount, const char **currency)
{
    static const char *const allowed[] = {"account", "amount", "currency",
                                          NULL};
    int rc;

    if (og_http_members_only(r, params, allowed, "params") != 0 ||
        og_http_str(r, params, "account", true, account) != 0 ||
        og_http_str(r, params, "amount", true, amount) != 0 ||
        og_http_str(r, params, "currency", true, currency) != 0)
        return -1;
    if (!og_id_valid(*account)) {
        og_http_lib_error(r, OG_EACCOUNT);
        return -1;
    }
    /* The grammar, an ISO 4217 currency with minor units, and no finer
     * than them (input.amount_minor_units): before the grant, the signer
     * and the store. */
    if ((rc = og_amount_check(*amount, *currency)) != 0) {
        og_http_lib_error(r, rc);
        return -1;
    }
    return 0;
}

/* A token member: present, a string. Its size is the validator's business
 * (grant.too_large), so an oversize token is a grant that does not
 * validate, not a malformed request. */
static int token_read(og_http_req *r, json_t *obj, const char **token)
{
    return og_http_str(r, obj, "token", true, token);
}

/* ===========================================================================
 * POST /v1/grants (issuer)
 * ========================================================================= */
static int h_grants_issue(og_http_req *r)
{
    static const char *const allowed[] = {"subject", "action", "params",
                                          "ttl_seconds", "family", NULL};
    og_srv *srv = r->srv;
    const og_signer *signer = og_srv_auth_signer(r->auth);
    const char *subject, *action, *family, *account, *amount, *currency;
    json_t *params;
    int64_t ttl = 0, now_s;
    char jti[OG_GRANT_ID_LEN + 1];
    char op_id[OG_UUID_LEN + 1], op_mac[OG_OPID_MAC_LEN + 1];
    og_grant_claims gc;
    og_issue_outcome out;
    char *token = NULL;
    int64_t t0;
    int rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "subject", true, &subject) != 0 ||
        og_http_str(r, r->json, "action", true, &action) != 0 ||
        og_http_obj(r, r->json, "params", true, &params) != 0 ||
        og_http_int(r, r->json, "ttl_seconds", true, 1,
                    srv->cfg.timings.max_grant_lifetime_us / 1000000,
                    &ttl) != 0 ||
        og_http_str(r, r->json, "family", false, &family) != 0 ||
        params_read(r, params, &account, &amount, &currency) != 0)
        return 0;
    if (!og_id_valid(subject))
        return og_http_lib_error(r, OG_ESUBJECT), 0;
    if (!og_id_valid(action))
        return og_http_lib_error(r, OG_EACTION), 0;
    if (family && !og_id_valid(family))
        return og_http_lib_error(r, OG_EFAMILY), 0;
    if (!signer) {
        og_http_error(r, 501, "issuing_not_configured",
                      "this instance has no signing key for its issuer",
                      NULL);
        return 0;
    }
    if ((rc = og_grant_new_id(jti)) != 0 ||
        (rc = og_operation_id_new(op_id)) != 0 ||
        (srv->opid_key && (rc = og_opid_mac(srv->opid_key, srv->cfg.issuer,
                                            jti, op_id, op_mac)) != 0))
        return og_http_lib_error(r, rc), 0;
    now_s = og_http_now_us() / 1000000;
    memset(&gc, 0, sizeof gc);
    gc.iss = srv->cfg.issuer;
    gc.jti = jti;
    gc.iat = now_s;
    gc.exp = now_s + ttl;
    gc.sub = subject;
    gc.aud = srv->cfg.audience;
    gc.act = action;
    gc.prm.account = account;
    gc.prm.amount = amount;
    gc.prm.currency = currency;
    gc.fam = family;
    og_http_log_str(r, "issuer", srv->cfg.issuer);
    og_http_log_str(r, "grant_id", jti);
    og_http_log_str(r, "family", family);
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_ISSUE, t0,
                     og_grant_issue(srv->store, signer, &gc,
                                    srv->cfg.grant_form, &token, &out));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (out != OG_ISSUE_RECORDED) {
        free(token);
        og_http_log_str(r, "outcome", out == OG_ISSUE_FAMILY_REVOKED
                                          ? "family_revoked"
                                          : "duplicate_id");
        if (out == OG_ISSUE_FAMILY_REVOKED)
            og_http_error(r, 409, "family_revoked",
                          "the family is revoked: nothing can be issued "
                          "into it",
                          NULL);
        else
            og_http_error(r, 500, "internal_error", "grant id collision",
                          NULL);
        return 0;
    }
    og_http_log_str(r, "outcome", "issued");
    /* The fresh operation id for the approval form this grant is shown
     * on, and its MAC when a key is configured (docs/design.md,
     * "Server-issued operation ids"): the id is logged, the MAC is not. */
    og_http_log_str(r, "operation_id", op_id);
    og_http_json(r, 201,
                 json_pack("{s:s, s:s, s:s, s:o, s:s?, s:s, s:s?}", "grant_id",
                           jti, "issuer", srv->cfg.issuer, "token", token,
                           "expires_at", time_json(gc.exp * 1000000),
                           "family", family, "operation_id", op_id,
                           "operation_mac",
                           srv->opid_key ? op_mac : NULL));
    free(token);
    return 0;
}

/* ===========================================================================
 * POST /v1/grants/consume (enforcer): the consume verdict.
 * ========================================================================= */
static int h_grants_consume(og_http_req *r)
{
    static const char *const allowed[] = {"token", NULL};
    og_srv *srv = r->srv;
    const char *token;
    og_validated_grant v;
    og_consume_result res;
    og_grant g;
    int64_t t0;
    int rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        token_read(r, r->json, &token) != 0)
        return 0;
    rc = og_grant_verify_unbound(og_srv_auth_keyset(r->auth), &srv->policy,
                                 token, og_http_now_us(), &v);
    if (rc != 0)
        return grant_invalid(r, rc), 0;
    og_http_log_str(r, "issuer", v.issuer);
    og_http_log_str(r, "grant_id", v.grant_id);
    memset(&g, 0, sizeof g);
    g.issuer = v.issuer;
    g.grant_id = v.grant_id;
    g.expires_at_us = v.expires_at_us;
    g.family = v.family[0] ? v.family : NULL;
    g.form = srv->cfg.grant_form;
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_CONSUME, t0, og_consume(srv->store, &g, &res));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    og_metrics_consume(res.consumed);
    if (res.consumed) {
        og_http_log_str(r, "outcome", "consumed");
        og_http_json(r, 200, json_pack("{s:b, s:s?}", "consumed", 1, "family",
                                       res.family[0] ? res.family : NULL));
    } else {
        og_http_log_str(r, "outcome", "not_consumed");
        og_http_log_str(r, "refusal", og_refusal_name(res.refusal));
        og_http_json(r, 409, json_pack("{s:b, s:s}", "consumed", 0, "error",
                                       "already_consumed"));
    }
    return 0;
}

/* ===========================================================================
 * POST /v1/grants/revoke (revoker)
 * ========================================================================= */
static int h_grants_revoke(og_http_req *r)
{
    static const char *const allowed[] = {"token", "issuer", "grant_id", NULL};
    og_srv *srv = r->srv;
    const char *token = NULL, *issuer = NULL, *grant_id = NULL;
    og_validated_grant v;
    og_revocation rv;
    og_revoke_outcome out;
    int64_t t0;
    int rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "token", false, &token) != 0 ||
        og_http_str(r, r->json, "issuer", false, &issuer) != 0 ||
        og_http_str(r, r->json, "grant_id", false, &grant_id) != 0)
        return 0;
    memset(&rv, 0, sizeof rv);
    if (token && !issuer && !grant_id) {
        /* The verified token proves issuance and gives the trusted expiry. */
        rc = og_grant_verify_unbound(og_srv_auth_keyset(r->auth),
                                     &srv->policy, token, og_http_now_us(),
                                     &v);
        if (rc != 0)
            return grant_invalid(r, rc), 0;
        rv.issuer = v.issuer;
        rv.grant_id = v.grant_id;
        rv.trusted_expires_at_us = v.expires_at_us;
    } else if (!token && issuer && grant_id) {
        /* Issuance is proven from the issuance log. */
        rv.issuer = issuer;
        rv.grant_id = grant_id;
    } else {
        og_http_error(r, 400, "malformed_request",
                      "give either token, or issuer and grant_id", NULL);
        return 0;
    }
    rv.revoker = r->principal->id;
    rv.form = srv->cfg.grant_form;
    og_http_log_str(r, "issuer", rv.issuer);
    og_http_log_str(r, "grant_id", rv.grant_id);
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_REVOKE, t0,
                     og_revoke(srv->store, og_srv_auth_revokers(r->auth), &rv,
                               &out));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    switch (out) {
    case OG_REVOKE_REVOKED:
        og_http_log_str(r, "outcome", "revoked");
        og_http_json(r, 200, json_pack("{s:b}", "revoked", 1));
        break;
    case OG_REVOKE_ALREADY_USED_OR_REVOKED:
        og_http_log_str(r, "outcome", "already_used_or_revoked");
        og_http_json(r, 409, json_pack("{s:b, s:s}", "revoked", 0, "error",
                                       "already_used_or_revoked"));
        break;
    case OG_REVOKE_NOT_ISSUED:
        og_http_log_str(r, "outcome", "not_issued");
        og_http_json(r, 404, json_pack("{s:b, s:s}", "revoked", 0, "error",
                                       "grant_not_issued"));
        break;
    case OG_REVOKE_NOT_PERMITTED:
        og_http_error(r, 403, "forbidden", "not a revoker of this issuer",
                      NULL);
        break;
    }
    return 0;
}

/* ===========================================================================
 * POST /v1/families/{family}/revoke (revoker)
 * ========================================================================= */
static int h_family_revoke(og_http_req *r)
{
    static const char *const allowed[] = {"issuer", NULL};
    og_srv *srv = r->srv;
    const char *issuer = NULL;
    og_revoke_outcome out;
    og_strv list = {0};
    json_t *ids;
    int64_t t0;
    int rc;

    if (r->json && (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
                    og_http_str(r, r->json, "issuer", false, &issuer) != 0))
        return 0;
    if (!issuer)
        issuer = srv->cfg.issuer;
    og_http_log_str(r, "issuer", issuer);
    og_http_log_str(r, "family", r->param);
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_FAMILY_REVOKE, t0,
                     og_family_revoke(srv->store,
                                      og_srv_auth_revokers(r->auth), issuer,
                                      r->param, r->principal->id, &out,
                                      &list));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (out == OG_REVOKE_NOT_PERMITTED) {
        og_strv_free(&list);
        og_http_error(r, 403, "forbidden", "not a revoker of this issuer",
                      NULL);
        return 0;
    }
    ids = json_array();
    for (size_t i = 0; ids && i < list.n; i++)
        json_array_append_new(ids, json_string(list.v[i]));
    og_strv_free(&list);
    og_http_log_str(r, "outcome", "family_revoked");
    og_http_json(r, 200, json_pack("{s:s, s:o}", "family", r->param,
                                   "revoked", ids));
    return 0;
}

/* ===========================================================================
 * Tickets.
 * ========================================================================= */
static int h_tickets_create(og_http_req *r)
{
    static const char *const allowed[] = {"family", NULL};
    og_srv *srv = r->srv;
    const char *family = NULL;
    char fam[OG_ID_MAX + 1];
    char id[OG_GRANT_ID_LEN + 1];
    og_ticket_result res;
    int64_t t0;
    int rc;

    if (r->json && (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
                    og_http_str(r, r->json, "family", false, &family) != 0))
        return 0;
    if (family && !og_id_valid(family))
        return og_http_lib_error(r, OG_EFAMILY), 0;
    if (!family) {
        if ((rc = og_grant_new_id(id)) != 0)
            return og_http_lib_error(r, rc), 0;
        snprintf(fam, sizeof fam, "fam-%s", id);
        family = fam;
    }
    og_http_log_str(r, "issuer", srv->cfg.issuer);
    og_http_log_str(r, "family", family);
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_TICKET_CREATE, t0,
                     og_ticket_create(srv->store, srv->cfg.issuer, family,
                                      &res));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (res.outcome != OG_TICKET_ISSUED) {
        og_http_log_str(r, "outcome", "family_revoked");
        og_http_error(r, 409, "family_revoked",
                      "the family is revoked: no ticket can be created",
                      NULL);
        return 0;
    }
    og_http_log_str(r, "outcome", "ticket_created");
    og_http_json(r, 201, json_pack("{s:s, s:s}", "ticket", res.ticket,
                                   "family", family));
    return 0;
}

static int h_tickets_rotate(og_http_req *r)
{
    static const char *const allowed[] = {"ticket", NULL};
    og_srv *srv = r->srv;
    const char *ticket;
    og_ticket_result res;
    int64_t t0;
    int rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "ticket", true, &ticket) != 0)
        return 0;
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_TICKET_ROTATE, t0,
                     og_ticket_rotate(srv->store, ticket, &res));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    og_http_log_str(r, "issuer", res.issuer[0] ? res.issuer : NULL);
    og_http_log_str(r, "family", res.family[0] ? res.family : NULL);
    if (res.outcome != OG_TICKET_ISSUED) {
        /* Unknown, reused (the family is now revoked) or revoked: one
         * answer, so a replayer learns nothing; the log says which. */
        og_http_log_str(r, "outcome",
                        res.outcome == OG_TICKET_REUSED ? "ticket_reused"
                        : res.outcome == OG_TICKET_FAMILY_REVOKED
                            ? "family_revoked"
                            : "ticket_not_found");
        og_http_json(r, 409, json_pack("{s:s, s:s}", "error",
                                       "ticket_not_found", "message",
                                       "no such live ticket"));
        return 0;
    }
    og_http_log_str(r, "outcome", "ticket_rotated");
    og_http_json(r, 200, json_pack("{s:s, s:s}", "ticket", res.ticket,
                                   "family", res.family));
    return 0;
}

/* ===========================================================================
 * POST /v1/operations (agent): admission at the execution boundary.
 * ========================================================================= */

/* The operation as answered to its caller. */
static json_t *operation_json(const og_operation *op)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:o,"
                     " s:o, s:s?, s:s?}",
                     "operation_id", op->operation_id, "status",
                     status_api_name(op->status), "issuer", op->issuer,
                     "grant_id", op->grant_id, "account", op->account_id,
                     "amount", op->amount, "currency", op->currency,
                     "owner_version", (json_int_t)op->owner_version,
                     "created_at", time_json(op->created_at_us),
                     "lease_until", time_json(op->lease_until_us),
                     "submit_by", time_json(op->submit_by_us),
                     "updated_at", time_json(op->updated_at_us),
                     "provider_reference",
                     op->provider_reference[0] ? op->provider_reference : NULL,
                     "reason", op->reason[0] ? op->reason : NULL);
}

/* The answer to POST /v1/operations for op in status st. */
static json_t *operation_answer(const og_operation *op, og_op_status st,
                                const char *outcome)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s?}", "operation_id",
                     op->operation_id, "status", status_api_name(st),
                     "result", og_exec_answer(st), "outcome", outcome,
                     "issuer", op->issuer, "grant_id", op->grant_id,
                     "provider_reference",
                     op->provider_reference[0] ? op->provider_reference
                                               : NULL);
}

/* The answer to the request that admitted an operation and drove it
 * (og_exec_admit, lib/exec/execute.c, docs/http.md "POST /v1/operations"):
 * 200 applied or 422 rejected when the outcome is recorded Succeeded or
 * Failed; 202 pending for everything else — a MaySubmit that failed or
 * said no, a request the client never sent, a transient answer, an unknown
 * outcome, a record that failed or was superseded: recovery takes it from
 * there, and this request never calls the provider again. The log line
 * says what became of the create and of its record, with identifiers and
 * error names only. */
static void execution_answer(og_http_req *r, const og_exec_run *run)
{
    const og_operation *op = &run->op;
    unsigned status = 202;
    json_t *a;

    if (run->sent) {
        og_http_log_str(r, "provider_class",
                        og_outcome_class_name(run->answer.cls));
        og_http_log_str(r, "provider_reason", run->answer.reason);
    }
    switch (run->end) {
    case OG_EXEC_END_MAY_SUBMIT_FAILED:
    case OG_EXEC_END_MAY_SUBMIT_REFUSED:
    case OG_EXEC_END_TRANSIENT:
        og_http_log_str(r, "execution", og_exec_end_name(run->end));
        og_http_log_str(r, "store_error",
                        run->error ? og_err_name(run->error) : NULL);
        break;
    case OG_EXEC_END_NOT_SENT:
        og_http_log_str(r, "execution", og_exec_end_name(run->end));
        og_http_log_str(r, "provider_error", og_err_name(run->error));
        break;
    case OG_EXEC_END_RECORD_FAILED:
    case OG_EXEC_END_RECORD_SUPERSEDED:
        /* The outcome is known here but not recorded: recovery will
         * reconcile it. The operation id is already on the line; the owner
         * version and the error's name join it. */
        og_http_log_str(r, "execution", og_exec_end_name(run->end));
        og_http_log_str(r, "store_error",
                        run->error ? og_err_name(run->error) : NULL);
        json_object_set_new(r->log, "owner_version",
                            json_integer(op->owner_version));
        break;
    case OG_EXEC_END_RECORDED:
        og_metrics_outcome(op->status, OG_SOURCE_HANDLER);
        og_http_log_str(r, "execution", status_api_name(op->status));
        status = status_http(op->status);
        break;
    }
    a = operation_answer(op, op->status, "admitted");
    if (run->end == OG_EXEC_END_RECORDED && op->status == OG_OP_FAILED) {
        status = 422;
        json_object_set_new(a, "error", json_string("provider_rejected"));
        json_object_set_new(a, "reason", json_string(op->reason));
        json_object_set_new(a, "message",
                            json_string("the provider refused the operation "
                                        "with a documented no-effect answer; "
                                        "the grant stays spent"));
    }
    og_http_json(r, status, a);
}

/* The operation id's MAC (docs/design.md, "Server-issued operation ids"),
 * after the grant verified and before the store: a MAC present is verified
 * whenever a key is configured; none is refused only when
 * operation_ids.require_mac is on. 0 to go on, or -1 with the refusal
 * answered. The MAC itself is never logged: only whether it verified. */
static int operation_mac_check(og_http_req *r, const char *mac,
                               const char *issuer, const char *grant_id,
                               const char *op_id)
{
    og_srv *srv = r->srv;

    if (!mac) {
        og_http_log_str(r, "operation_mac", "absent");
        if (!srv->cfg.opid_require_mac)
            return 0;
        og_http_error(r, 403, "operation_mac_required",
                      "this instance admits only operation ids it issued: "
                      "send the operation_mac issued with the grant",
                      "operation_mac");
        return -1;
    }
    if (!srv->opid_key) {
        og_http_log_str(r, "operation_mac", "unverifiable");
        og_http_error(r, 422, "operation_mac_unverifiable",
                      "this instance has no operation-id MAC key",
                      "operation_mac");
        return -1;
    }
    if (!og_opid_mac_valid(srv->opid_key, issuer, grant_id, op_id, mac)) {
        og_http_log_str(r, "operation_mac", "invalid");
        og_http_error(r, 403, "operation_mac_invalid",
                      "operation_mac is not the one issued for this "
                      "operation id and grant",
                      "operation_mac");
        return -1;
    }
    og_http_log_str(r, "operation_mac", "valid");
    return 0;
}

/* The answer to an admission the store refused (or the refusal cache,
 * for the store: RF1-RF6 in refusals.h). The reason is for operators; the
 * caller learns only that this grant is not available, never about
 * another operation. */
static void admission_refused(og_http_req *r, og_refusal why)
{
    og_metrics_admission(OG_OUTCOME_REFUSED, why);
    og_http_log_str(r, "outcome", og_outcome_name(OG_OUTCOME_REFUSED));
    og_http_log_str(r, "refusal", og_refusal_name(why));
    og_http_error(r, 409, "grant_not_available",
                  "the grant is spent, revoked, or bound to another "
                  "operation",
                  NULL);
}

/* The refusal cache's answer to this request, before the signature check
 * (refusals.h, RF2-RF5): 1 answered (the operation MAC checked as the
 * normal path checks it, then the store's refusal), 0 not. */
static int refused_from_cache(og_http_req *r, const og_refusals_key *k,
                              const char *op_id, const char *op_mac)
{
    og_refusals_hit hit;

    if (!og_refusals_find(r->srv->refusals, k,
                          og_srv_auth_generation(r->auth), og_http_now_us(),
                          op_id, &hit)) {
        og_metrics_refusal_cache(false);
        return 0;
    }
    og_metrics_refusal_cache(true);
    og_http_log_str(r, "issuer", hit.issuer);
    og_http_log_str(r, "grant_id", hit.grant_id);
    og_http_log_str(r, "refusal_cache", "hit");
    if (operation_mac_check(r, op_mac, hit.issuer, hit.grant_id, op_id) == 0)
        admission_refused(r, hit.refusal);
    return 1;
}

static int h_operations_post(og_http_req *r)
{
    static const char *const allowed[] = {"operation_id", "token", "action",
                                          "params", "operation_mac", NULL};
    og_srv *srv = r->srv;
    const char *op_text, *token, *action, *account, *amount, *currency;
    const char *op_mac;
    char op_id[OG_UUID_LEN + 1];
    og_grant_request greq;
    og_validated_grant v;
    og_exec_admit_req q;
    og_exec_admitted res;
    const og_admission *adm = &res.admission;
    og_refusals_key rkey;
    json_t *params;
    int rc;

    /* Validation first: the request, then the grant; the store last. */
    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "operation_id", true, &op_text) != 0 ||
        token_read(r, r->json, &token) != 0 ||
        og_http_str(r, r->json, "action", false, &action) != 0 ||
        og_http_obj(r, r->json, "params", true, &params) != 0 ||
        params_read(r, params, &account, &amount, &currency) != 0 ||
        og_http_str(r, r->json, "operation_mac", false, &op_mac) != 0)
        return 0;
    if ((rc = og_operation_id_canonical(op_text, op_id)) != 0)
        return og_http_lib_error(r, rc), 0;
    og_http_log_str(r, "operation_id", op_id);
    if (!action)
        action = OG_DEFAULT_ACTION;
    /* The provider executes credit.apply and nothing else, and recovery
     * would take any stalled Admitted operation to it: a grant for another
     * action must not be admitted here at all (before the store: it
     * changes nothing). */
    if (srv->provider && strcmp(action, OG_DEFAULT_ACTION) != 0) {
        og_http_error(r, 422, "action_not_executable",
                      "this instance executes only " OG_DEFAULT_ACTION
                      " at its provider",
                      "action");
        return 0;
    }
    /* Authorization: the grant, verified with this snapshot's keys for this
     * caller and these parameters. */
    greq.caller = r->principal->id;
    greq.action = action;
    greq.account = account;
    greq.amount = amount;
    greq.currency = currency;
    if (srv->refusals) {
        og_refusals_key_of(srv->refusals, token, greq.caller, action, account,
                           amount, currency, &rkey);
        if (refused_from_cache(r, &rkey, op_id, op_mac))
            return 0;
    }
    rc = og_grant_verify(og_srv_auth_keyset(r->auth), &srv->policy, token,
                         &greq, og_http_now_us(), &v);
    if (rc != 0)
        return grant_invalid(r, rc), 0;
    og_http_log_str(r, "issuer", v.issuer);
    og_http_log_str(r, "grant_id", v.grant_id);
    if (operation_mac_check(r, op_mac, v.issuer, v.grant_id, op_id) != 0)
        return 0;
    /* ONE library call admits from the validated grant (never from the
     * request) and, when this request admitted it and a provider is
     * configured, executes it. */
    q = (og_exec_admit_req){.grant = &v,
                            .operation_id = op_id,
                            .form = srv->cfg.grant_form,
                            .actor = "handler",
                            .timeout_us = srv->cfg.timings.provider_timeout_us,
                            .observe = &exec_observer};
    rc = og_exec_admit(srv->store, srv->provider, &q, &res);
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (adm->outcome == OG_OUTCOME_REFUSED) {
        if (srv->refusals) /* RF1: only a key held for good is kept */
            og_refusals_put(srv->refusals, &rkey,
                            og_srv_auth_generation(r->auth), v.expires_at_us,
                            adm, v.issuer, v.grant_id);
        admission_refused(r, adm->refusal);
        return 0;
    }
    og_metrics_admission(adm->outcome, adm->refusal);
    og_http_log_str(r, "outcome", og_outcome_name(adm->outcome));
    if (res.driven) {
        execution_answer(r, &res.run);
        return 0;
    }
    /* Admitted without a provider, or a same-operation retry: reported,
     * never executed — only the admitting request and recovery call the
     * provider. */
    og_http_json(r, status_http(adm->operation.status),
                 operation_answer(&adm->operation, adm->operation.status,
                                  og_outcome_name(adm->outcome)));
    return 0;
}

/* The operation's history as JSON (a new reference); evidence only for
 * operators: it is their free text, not the caller's business. NULL when
 * the store could not be read (the answer then goes without it). */
static json_t *history_json(og_http_req *r, const char *op_id,
                            bool with_evidence)
{
    int64_t t0 = og_http_mono_us();
    og_op_events h;
    json_t *a;

    if (store_timed(OG_MOP_OPERATION_GET, t0,
                    og_op_history(r->srv->store, op_id, &h)) != 0)
        return NULL;
    a = json_array();
    for (size_t i = 0; a && i < h.n; i++) {
        const og_op_event *e = &h.v[i];
        json_t *o = json_pack("{s:I, s:o, s:s, s:s, s:s, s:I, s:s}", "seq",
                              (json_int_t)e->seq, "at", time_json(e->at_us),
                              "kind", e->kind, "from",
                              status_api_name(e->from_status), "to",
                              status_api_name(e->to_status), "owner_version",
                              (json_int_t)e->owner_version, "actor",
                              e->actor);

        if (!o)
            continue;
        if (e->reason[0])
            json_object_set_new(o, "reason", json_string(e->reason));
        if (e->provider_reference[0])
            json_object_set_new(o, "provider_reference",
                                json_string(e->provider_reference));
        if (with_evidence && e->evidence[0])
            json_object_set_new(o, "evidence", json_string(e->evidence));
        json_array_append_new(a, o);
    }
    og_op_events_free(&h);
    return a;
}

/* GET /v1/operations/{operation_id} (agent): to its stored caller only. */
static int h_operations_get(og_http_req *r)
{
    og_srv *srv = r->srv;
    char id[OG_UUID_LEN + 1];
    og_operation op;
    int64_t t0;
    int rc;

    /* An id that breaks the UUID rule is the caller's own mistake, answered
     * like any other identifier (400); it says nothing about anyone's
     * operation. */
    if ((rc = og_operation_id_canonical(r->param, id)) != 0)
        return og_http_lib_error(r, rc), 0;
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_OPERATION_GET, t0,
                     og_operation_get(srv->store, id, &op));
    if (rc < 0)
        return og_http_lib_error(r, rc), 0;
    if (rc == 1 && strcmp(op.caller_id, r->principal->id) == 0) {
        og_http_log_str(r, "operation_id", op.operation_id);
        og_http_log_str(r, "issuer", op.issuer);
        og_http_log_str(r, "grant_id", op.grant_id);
        {
            json_t *a = operation_json(&op), *h = history_json(r, id, false);

            if (a && h)
                json_object_set_new(a, "history", h);
            else
                json_decref(h);
            og_http_json(r, 200, a);
        }
        return 0;
    }
    /* Absent or another caller's: one answer for both. */
    og_http_error(r, 404, "not_found", "no such operation", NULL);
    return 0;
}

/* ===========================================================================
 * POST /v1/redemptions (agent): redeem an external single-use token
 * (docs/design.md, "Redeeming an external single-use token") with
 * catch-up, in ONE library call (og_redeem). The code and the result are
 * secrets: neither reaches r->log; the key, the outcome and the exchange's
 * reason do.
 * ========================================================================= */

/* The 200 answer {"idempotency_key","outcome","persisted","result"}, with
 * the token response spliced in as og_redeem returned it (compact JSON):
 * not parsed again, so no library keeps a copy of the credential that
 * nobody wipes. The text is wiped when the answer is freed (http.c). */
static void redemption_answer(og_http_req *r, const char *key,
                              const og_redeem_result *res)
{
    static const char member[] = ",\"result\":";
    json_t *head = json_pack("{s:s, s:s, s:b}", "idempotency_key", key,
                             "outcome", og_redeem_outcome_name(res->outcome),
                             "persisted", res->persisted);
    char *h = head ? json_dumps(head, JSON_COMPACT) : NULL, *text = NULL;
    size_t hl = h ? strlen(h) : 0, n;

    json_decref(head);
    /* h is "{...}": its members, the result member, the closing brace. */
    n = hl + sizeof member + res->result_len + 1;
    if (h && hl >= 2 && (text = malloc(n)))
        snprintf(text, n, "%.*s%s%s}", (int)(hl - 1), h, member, res->result);
    free(h);
    if (!text) {
        og_http_error(r, 500, "internal_error", "out of memory", NULL);
        return;
    }
    og_http_json(r, 200, NULL);
    r->text = text;
}

/* Maps a redemption that returned no result to its answer. */
static void redemption_refusal(og_http_req *r, const og_redeem_result *res)
{
    switch (res->outcome) {
    case OG_REDEEM_CODE_SPENT:
        og_http_error(r, 409, "code_spent",
                      "the code was already redeemed by another operation "
                      "(another idempotency key); its result is not "
                      "returned here",
                      NULL);
        break;
    case OG_REDEEM_KEY_REUSED:
        og_http_error(r, 422, "idempotency_key_reused",
                      "this idempotency key was used with another code",
                      "idempotency_key");
        break;
    case OG_REDEEM_LOST:
        og_http_error(r, 409, "redemption_lost",
                      "the code was spent and no result was persisted under "
                      "this idempotency key within the catch-up bound: the "
                      "provider never gives a result twice, so it cannot be "
                      "recovered; start over with a new code",
                      NULL);
        break;
    case OG_REDEEM_UNKNOWN:
        og_http_error(r, 502, "redemption_unknown",
                      "the token endpoint's answer was lost or undocumented "
                      "and no result was persisted within the catch-up "
                      "bound; retry the same request (same idempotency key "
                      "and code): it finds the result, or ends in "
                      "redemption_lost",
                      NULL);
        r->retry_after = r->srv->cfg.retry_after_s;
        break;
    case OG_REDEEM_REJECTED:
        og_http_error(r, 502, "provider_rejected",
                      "the token endpoint refused the request itself; the "
                      "code was not exchanged",
                      NULL);
        json_object_set_new(r->answer, "reason", json_string(res->reason));
        break;
    default:
        og_http_error(r, 500, "internal_error", "internal error", NULL);
        break;
    }
}

/* og_redeem_request.stopping: a catch-up ends when the drain begins, so a
 * redemption waiting for a duplicate's result never outlives the stop
 * (its answer is 503 retry_later, OG_ESTOPPED). */
static bool srv_draining(void *arg)
{
    return atomic_load(&((og_srv *)arg)->draining);
}

static int h_redemptions(og_http_req *r)
{
    static const char *const allowed[] = {"idempotency_key", "code", NULL};
    og_srv *srv = r->srv;
    const char *key, *code;
    og_redeem_request q;
    og_redeem_result res;
    int rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "idempotency_key", true, &key) != 0 ||
        og_http_str(r, r->json, "code", true, &code) != 0)
        return 0;
    if (!og_id_valid(key))
        return og_http_lib_error(r, OG_EIDEMPOTENCY_KEY), 0;
    og_http_log_str(r, "idempotency_key", key);
    if (!srv->redeemer) {
        og_http_error(r, 501, "redemption_not_configured",
                      "this instance has no redemption.key_file (and token "
                      "endpoint)",
                      NULL);
        return 0;
    }
    q = (og_redeem_request){.caller = r->principal->id,
                            .idempotency_key = key,
                            .code = code,
                            .exchange_timeout_us =
                                srv->cfg.timings.provider_timeout_us,
                            .catch_up_us = srv->cfg.redemption_catch_up_us,
                            .stopping = srv_draining,
                            .stopping_arg = srv};
    rc = og_redeem(srv->store, srv->redeemer, srv->redeem_key, &q, &res);
    og_metrics_redemption(rc != 0 ? rc : (int)res.outcome);
    if (rc == OG_EREDEMPTION_UNDECRYPTABLE) {
        og_http_error(r, 500, "redemption_undecryptable", og_strerror(rc),
                      NULL);
        return 0;
    }
    if (rc != 0) /* input 400, store 503 retry_later, else 500 */
        return og_http_lib_error(r, rc), 0;
    og_http_log_str(r, "outcome", og_redeem_outcome_name(res.outcome));
    og_http_log_str(r, "provider_reason", res.reason[0] ? res.reason : NULL);
    json_object_set_new(r->log, "looks", json_integer(res.looks));
    if (res.outcome == OG_REDEEM_REDEEMED && !res.persisted) {
        /* The result exists only in this answer: the others with this key
         * will end redemption_lost. The log says why, never what. */
        og_log(OG_LOG_ERROR, "redemption_not_persisted",
               json_pack("{s:s, s:s, s:s}", "idempotency_key", key, "caller",
                         r->principal->id, "store_error",
                         res.persist_error ? og_err_name(res.persist_error)
                                           : "key_holds_another_code"));
    }
    if (res.result)
        redemption_answer(r, key, &res);
    else
        redemption_refusal(r, &res);
    og_redeem_result_clear(&res);
    return 0;
}

/* ===========================================================================
 * Operators (role operator): the backlog, one operation with its evidence,
 * and resolution by hand of an operation awaiting reconciliation.
 * ========================================================================= */

/* The status named by its lower-case API name; -1 when none. */
static int status_from_api(const char *name, size_t len)
{
    for (int st = OG_OP_ADMITTED; st <= OG_OP_NEEDS_RECONCILIATION; st++) {
        const char *n = status_api_name((og_op_status)st);

        if (strlen(n) == len && strncmp(n, name, len) == 0)
            return st;
    }
    return -1;
}

/* Parses "?status=a,b" into a set of OG_OP_BIT; -1 when a name is bad. */
static int parse_statuses(const char *text, unsigned *out)
{
    unsigned set = 0;

    for (;;) {
        size_t n = strcspn(text, ",");
        int st = status_from_api(text, n); /* an empty name is no status */

        if (st < 0)
            return -1;
        set |= OG_OP_BIT(st);
        if (text[n] == '\0')
            break;
        text += n + 1; /* past the comma: another name must follow */
    }
    if (set == 0)
        return -1;
    *out = set;
    return 0;
}

/* A non-negative integer query parameter within max; -1 when bad. */
static int64_t query_int(const char *text, int64_t max)
{
    char *end;
    long long v;

    if (!text || *text < '0' || *text > '9') /* digits only: no sign, no
                                                 space ('+' decodes to one) */
        return -1;
    v = strtoll(text, &end, 10);
    return *end || v < 0 || v > max ? -1 : v;
}

/* GET /v1/admin/operations?status=…&kind=…&older_than_seconds=…&limit=… */
static int h_admin_list(og_http_req *r)
{
    og_srv *srv = r->srv;
    const char *qs = og_http_query(r, "status");
    const char *qo = og_http_query(r, "older_than_seconds");
    const char *ql = og_http_query(r, "limit");
    const char *qk = og_http_query(r, "kind");
    og_op_filter f = {OG_OP_BIT(OG_OP_UNKNOWN) |
                          OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION),
                      false, 0, 100, 0};
    int64_t now = og_http_now_us(), v;
    og_op_list l = {0};
    json_t *ops;
    int64_t t0;
    int rc;

    if (qs && parse_statuses(qs, &f.statuses) != 0)
        return og_http_error(r, 400, "malformed_request",
                             "status: comma-separated status names", "status"),
               0;
    if (qo) {
        if ((v = query_int(qo, 366 * 86400)) < 0)
            return og_http_error(r, 400, "malformed_request",
                                 "older_than_seconds: 0 .. 31622400",
                                 "older_than_seconds"),
                   0;
        f.created_before_us = now - v * 1000000;
    }
    if (qk) {
        if (strcmp(qk, og_op_kind_name(OG_OP_KIND_CREDIT)) == 0)
            f.kinds = OG_OP_KIND_BIT(OG_OP_KIND_CREDIT);
        else if (strcmp(qk, og_op_kind_name(OG_OP_KIND_PAYOUT)) == 0)
            f.kinds = OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT);
        else
            return og_http_error(r, 400, "malformed_request",
                                 "kind: credit or payout", "kind"),
                   0;
    }
    if (ql) {
        if ((v = query_int(ql, 1000)) < 1)
            return og_http_error(r, 400, "malformed_request",
                                 "limit: 1 .. 1000", "limit"),
                   0;
        f.limit = (int)v;
    }
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_OPERATION_GET, t0, og_op_scan(srv->store, &f, &l));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    ops = json_array();
    for (size_t i = 0; ops && i < l.n; i++) {
        json_t *o = operation_json(&l.v[i]);

        if (!o)
            continue;
        json_object_set_new(o, "caller", json_string(l.v[i].caller_id));
        json_object_set_new(o, "kind",
                            json_string(og_op_kind_name(l.v[i].kind)));
        json_object_set_new(o, "age_seconds",
                            json_integer((now - l.v[i].created_at_us) /
                                         1000000));
        json_array_append_new(ops, o);
    }
    og_op_list_free(&l);
    og_http_json(r, 200, json_pack("{s:o}", "operations", ops));
    return 0;
}

/* The operation, its caller and its whole history (with evidence). */
static json_t *admin_operation_json(og_http_req *r, const og_operation *op)
{
    json_t *a = operation_json(op), *h = history_json(r, op->operation_id,
                                                      true);

    if (a) {
        json_object_set_new(a, "caller", json_string(op->caller_id));
        json_object_set_new(a, "kind", json_string(og_op_kind_name(op->kind)));
        if (h)
            json_object_set_new(a, "history", h);
    } else {
        json_decref(h);
    }
    return a;
}

/* Reads the operation named by the path for an operator; 1 found, 0 answered
 * (404 or an error). */
static int admin_find(og_http_req *r, og_operation *op)
{
    char id[OG_UUID_LEN + 1];
    int64_t t0;
    int rc;

    if ((rc = og_operation_id_canonical(r->param, id)) != 0)
        return og_http_lib_error(r, rc), 0;
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_OPERATION_GET, t0,
                     og_operation_get(r->srv->store, id, op));
    if (rc < 0)
        return og_http_lib_error(r, rc), 0;
    if (rc == 0) {
        og_http_error(r, 404, "not_found", "no such operation", NULL);
        return 0;
    }
    og_http_log_str(r, "operation_id", op->operation_id);
    return 1;
}

/* GET /v1/admin/operations/{operation_id} */
static int h_admin_get(og_http_req *r)
{
    og_operation op;

    if (admin_find(r, &op))
        og_http_json(r, 200, admin_operation_json(r, &op));
    return 0;
}

/* A payout attempt resolved by hand (og_payout_operator_resolve): the
 * attempt, its payout and the reservation move in ONE transaction
 * (docs/payouts.md, section 3: NeedsReconciliation -> Succeeded | Failed |
 * NotApplied, operators only). Answers as the credit's path, with the
 * payout's new state; what did not fit has its own stable code. */
static int admin_resolve_payout(og_http_req *r, const og_operation *op,
                                og_op_status to, const char *reason,
                                const char *evidence, const char *ref)
{
    og_srv *srv = r->srv;
    og_payout_resolution res;
    og_operation now;
    int64_t t0 = og_http_mono_us();
    int rc = store_timed(OG_MOP_RECORD, t0,
                         og_payout_operator_resolve(
                             srv->store, op->operation_id, to,
                             r->principal->id, reason, evidence, ref, &res));

    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (res.outcome == OG_PAYOUT_RESOLVE_NOT_ACTIVE) {
        og_http_log_str(r, "outcome", "payout_attempt_not_active");
        og_http_json(r, 409,
                     json_pack("{s:b, s:s, s:s}", "resolved", 0, "error",
                               "payout_attempt_not_active", "message",
                               "the attempt is not its payout's active "
                               "attempt: its payout moved on"));
        return 0;
    }
    if (res.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
        /* Still awaiting reconciliation and asked for NotApplied: the
         * store refuses it before the attempt's final-absence cutoff
         * (never before the request expiry, docs/payouts.md P6). */
        bool early = to == OG_OP_NOT_APPLIED &&
                     og_operation_get(srv->store, op->operation_id, &now) ==
                         1 &&
                     now.status == OG_OP_NEEDS_RECONCILIATION;
        const char *code =
            early ? "not_applied_before_cutoff" : "not_needs_reconciliation";

        og_http_log_str(r, "outcome", code);
        og_http_json(
            r, 409,
            json_pack("{s:b, s:s, s:s}", "resolved", 0, "error", code,
                      "message",
                      early ? "NotApplied only once nothing sent for the "
                              "attempt can take effect any more"
                            : "only an operation awaiting reconciliation is "
                              "resolved by hand"));
        return 0;
    }
    og_metrics_outcome(to, OG_SOURCE_OPERATOR);
    og_http_log_str(r, "outcome", "resolved");
    og_http_log_str(r, "reason", reason);
    og_http_log_str(r, "payout_id", res.payout_id);
    og_http_json(
        r, 200,
        json_pack("{s:b, s:o*, s:{s:s, s:s, s:I, s:s}}", "resolved", 1,
                  "operation",
                  og_operation_get(srv->store, op->operation_id, &now) == 1
                      ? admin_operation_json(r, &now)
                      : NULL,
                  "payout", "payout_id", res.payout_id, "state",
                  og_payout_state_name(res.state), "version",
                  (json_int_t)res.payout_version, "reservation",
                  og_payout_reservation_name(res.reservation)));
    return 0;
}

/* POST /v1/admin/operations/{operation_id}/resolve: a credit through
 * og_op_resolve, a payout attempt through og_payout_operator_resolve. */
static int h_admin_resolve(og_http_req *r)
{
    static const char *const allowed[] = {"status", "reason", "evidence",
                                          "provider_reference", NULL};
    og_srv *srv = r->srv;
    const char *status, *reason, *evidence, *ref;
    og_operation op;
    bool resolved = false;
    int64_t t0;
    int to, rc;

    if (og_http_members_only(r, r->json, allowed, NULL) != 0 ||
        og_http_str(r, r->json, "status", true, &status) != 0 ||
        og_http_str(r, r->json, "reason", true, &reason) != 0 ||
        og_http_str(r, r->json, "evidence", true, &evidence) != 0 ||
        og_http_str(r, r->json, "provider_reference", false, &ref) != 0)
        return 0;
    to = strcmp(status, "not_applied") == 0
             ? (int)OG_OP_NOT_APPLIED
             : status_from_api(status, strlen(status));
    if (to != OG_OP_SUCCEEDED && to != OG_OP_FAILED &&
        to != OG_OP_NOT_APPLIED) {
        og_http_error(r, 400, "malformed_request",
                      "status: succeeded, failed or (a payout attempt) "
                      "not_applied", "status");
        return 0;
    }
    if (!admin_find(r, &op))
        return 0;
    if (op.kind == OG_OP_KIND_PAYOUT)
        return admin_resolve_payout(r, &op, (og_op_status)to, reason,
                                    evidence, ref);
    if (to == OG_OP_NOT_APPLIED) { /* a credit never is (P6 is payouts') */
        og_http_error(r, 400, "malformed_request",
                      "status: a credit is resolved succeeded or failed",
                      "status");
        return 0;
    }
    t0 = og_http_mono_us();
    rc = store_timed(OG_MOP_RECORD, t0,
                     og_op_resolve(srv->store, op.operation_id,
                                   (og_op_status)to, r->principal->id, reason,
                                   evidence, ref, &resolved));
    if (rc != 0)
        return og_http_lib_error(r, rc), 0;
    if (!resolved) {
        og_http_log_str(r, "outcome", "not_needs_reconciliation");
        og_http_json(r, 409,
                     json_pack("{s:b, s:s, s:s}", "resolved", 0, "error",
                               "not_needs_reconciliation", "message",
                               "only an operation awaiting reconciliation "
                               "is resolved by hand"));
        return 0;
    }
    og_metrics_outcome((og_op_status)to, OG_SOURCE_OPERATOR);
    og_http_log_str(r, "outcome", "resolved");
    og_http_log_str(r, "reason", reason);
    if (og_operation_get(srv->store, op.operation_id, &op) != 1) {
        og_http_json(r, 200, json_pack("{s:b}", "resolved", 1));
        return 0;
    }
    og_http_json(r, 200, json_pack("{s:b, s:o}", "resolved", 1, "operation",
                                   admin_operation_json(r, &op)));
    return 0;
}

/* The backlog by age, computed at scrape time from the store: the oldest
 * 1000 Unknown and NeedsReconciliation operations of the kinds in `kinds`
 * (0: all), as family `name` (the Prometheus text says when the count was
 * capped). Appended to text. */
static void render_backlog(og_srv *srv, char **text, const char *name,
                           unsigned kinds, const char *what)
{
    static const char *const ages[] = {"lt_1m", "lt_10m", "lt_1h", "lt_1d",
                                       "ge_1d"};
    static const int64_t bound_s[] = {60, 600, 3600, 86400};
    og_op_filter f = {OG_OP_BIT(OG_OP_UNKNOWN) |
                          OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION),
                      false, 0, 1000, kinds};
    int64_t count[2][5] = {{0}}, now = og_http_now_us();
    og_op_list l = {0};
    char *out = NULL;
    size_t n = 0;
    FILE *fp;

    if (og_op_scan(srv->store, &f, &l) != 0)
        return; /* the store is down: no backlog lines, counters stay */
    for (size_t i = 0; i < l.n; i++) {
        int64_t age = (now - l.v[i].created_at_us) / 1000000;
        int b = 0, st = l.v[i].status == OG_OP_UNKNOWN ? 0 : 1;

        while (b < 4 && age >= bound_s[b])
            b++;
        count[st][b]++;
    }
    if (!(fp = open_memstream(&out, &n))) {
        og_op_list_free(&l);
        return;
    }
    fputs(*text, fp);
    fprintf(fp, "# HELP %s %s awaiting an "
                "outcome (unknown) or an operator (needs_reconciliation), by "
                "age; the oldest 1000 are counted%s.\n"
                "# TYPE %s gauge\n",
            name, what, l.n == 1000 ? " (capped)" : "", name);
    for (int st = 0; st < 2; st++)
        for (int b = 0; b < 5; b++)
            fprintf(fp, "%s{status=\"%s\",age=\"%s\"} %lld\n", name,
                    st ? "needs_reconciliation" : "unknown", ages[b],
                    (long long)count[st][b]);
    og_op_list_free(&l);
    if (fclose(fp) != 0) {
        free(out);
        return;
    }
    free(*text);
    *text = out;
}

/* ===========================================================================
 * Health, readiness, metrics (public).
 * ========================================================================= */
static int h_healthz(og_http_req *r)
{
    og_http_json(r, 200, json_pack("{s:b}", "ok", 1));
    return 0;
}

static int h_readyz(og_http_req *r)
{
    int64_t t0 = og_http_mono_us();
    int rc = store_timed(OG_MOP_CHECK, t0, og_store_check(r->srv->store));

    if (rc == 0)
        og_http_json(r, 200, json_pack("{s:b}", "ready", 1));
    else
        og_http_json(r, 503, json_pack("{s:b, s:s}", "ready", 0, "error",
                                       rc == OG_ESCHEMA ? "schema_mismatch"
                                                        : "store_unavailable"));
    return 0;
}

static int h_metrics(og_http_req *r)
{
    char *text = NULL;
    size_t len = 0;

    if (og_metrics_render(&text, &len) != 0) {
        og_http_error(r, 500, "internal_error", "out of memory", NULL);
        return 0;
    }
    render_backlog(r->srv, &text, "oncegate_operations_backlog", 0,
                   "Operations");
    /* the payout attempts alone (docs/http.md, payout pipeline metrics) */
    render_backlog(r->srv, &text, "oncegate_payout_attempts_backlog",
                   OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT), "Payout attempts");
    og_metrics_payout_stats(r->srv->store, &text); /* the same, payouts' */
    og_metrics_admit_batches(r->srv->store, &text); /* group commit */
    og_http_json(r, 200, NULL);
    r->text = text;
    r->text_type = "text/plain; version=0.0.4; charset=utf-8";
    return 0;
}

/* The routes, in the order docs/openapi.json lists them. */
const og_route og_routes[] = {
    {"POST", "/v1/grants", OG_ROLE_ISSUER, true, false, h_grants_issue},
    {"POST", "/v1/grants/consume", OG_ROLE_ENFORCER, true, false,
     h_grants_consume},
    {"POST", "/v1/grants/revoke", OG_ROLE_REVOKER, true, false,
     h_grants_revoke},
    {"POST", "/v1/families/{family}/revoke", OG_ROLE_REVOKER, true, true,
     h_family_revoke},
    {"POST", "/v1/tickets", OG_ROLE_ISSUER, true, true, h_tickets_create},
    {"POST", "/v1/tickets/rotate", OG_ROLE_AGENT, true, false,
     h_tickets_rotate},
    {"POST", "/v1/operations", OG_ROLE_AGENT, true, false, h_operations_post},
    {"GET", "/v1/operations/{operation_id}", OG_ROLE_AGENT, false, false,
     h_operations_get},
    {"POST", "/v1/redemptions", OG_ROLE_AGENT, true, false, h_redemptions},
    {"GET", "/v1/admin/operations", OG_ROLE_OPERATOR, false, false,
     h_admin_list},
    {"GET", "/v1/admin/operations/{operation_id}", OG_ROLE_OPERATOR, false,
     false, h_admin_get},
    {"POST", "/v1/admin/operations/{operation_id}/resolve", OG_ROLE_OPERATOR,
     true, false, h_admin_resolve},
    /* payouts: context administration (payout_http.c) */
    {"POST", "/v1/payout-admin/tenants/{tenant_id}", OG_ROLE_PAYOUT_ADMIN,
     true, false, og_h_payout_tenant_put},
    {"POST", "/v1/payout-admin/beneficiaries/{beneficiary_id}",
     OG_ROLE_PAYOUT_ADMIN, true, false, og_h_payout_beneficiary_put},
    {"POST", "/v1/payout-admin/destinations/{destination_id}",
     OG_ROLE_PAYOUT_ADMIN, true, false, og_h_payout_destination_put},
    {"POST", "/v1/payout-admin/payouts/{payout_id}", OG_ROLE_PAYOUT_ADMIN,
     true, false, og_h_payout_draft},
    {"POST", "/v1/payout-admin/payouts/{payout_id}/cancel",
     OG_ROLE_PAYOUT_ADMIN, true, false, og_h_payout_cancel},
    /* payouts: the clerk's submission (payout_http.c) */
    {"POST", "/v1/payouts/{payout_id}/submit", OG_ROLE_CLERK, true, false,
     og_h_payout_submit},
    /* payouts: an approver settles an acknowledgment or an escalation */
    {"POST", "/v1/payouts/{payout_id}/approve", OG_ROLE_APPROVER, true, false,
     og_h_payout_approve},
    /* payouts: reading, for operators (payout_http.c) */
    {"GET", "/v1/admin/payouts/{payout_id}", OG_ROLE_OPERATOR, false, false,
     og_h_payout_get},
    {"GET", "/v1/admin/payout-backlog", OG_ROLE_OPERATOR, false, false,
     og_h_payout_backlog},
    /* payouts: finance, for operators (payout_http.c) */
    {"POST", "/v1/admin/payout-grants/{grant_id}/hold", OG_ROLE_OPERATOR,
     true, true, og_h_payout_hold},
    {"POST", "/v1/admin/payouts/{payout_id}/reauthorize", OG_ROLE_OPERATOR,
     true, false, og_h_payout_reauthorize},
    {"POST", "/v1/admin/payout-jobs/{job_id}/resubmit", OG_ROLE_OPERATOR,
     true, false, og_h_payout_resubmit},
    {"GET", "/healthz", 0, false, false, h_healthz},
    {"GET", "/readyz", 0, false, false, h_readyz},
    {"GET", "/metrics", 0, false, false, h_metrics},
    {"GET", "/console", 0, false, false, og_h_console},
    {"GET", "/console/{asset}", 0, false, false, og_h_console_asset},
};
const size_t og_n_routes = sizeof og_routes / sizeof og_routes[0];
