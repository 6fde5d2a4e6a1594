/*
 * handlers.c — one function per endpoint of docs/sandbox.md, and the
 * route table. A handler validates with core.c, makes one store call and
 * turns the result into an answer; the create handler also applies the
 * armed fault around that call. The create and lookup handlers serve every
 * resource (credits, payouts): the route names the og_sbx_resources row
 * they act on, and nothing in them is specific to one.
 *
 * Where a fault acts on a create request that passed validation:
 *
 *   take one firing ──> error_500_before_effect: count, answer 500, stop
 *        │              close_before_effect:    close, no answer, stop
 *        │              delay_before_effect:    sleep ms
 *        v
 *   og_sbx_store_create (the effect, or the replay: COMMIT returned)
 *        │
 *        v              drop_response_after_effect: close, no answer
 *   the answer ───────> delay_after_effect:         sleep ms, answer
 *                       error_500_after_effect:     answer 500 instead
 *                       exit_after_effect:          _exit(137), no answer
 *
 * POST /oauth/token takes its firing the same way, after its form was
 * read: the "effect" is the code's exchange (store.c SB8).
 *
 * Log fields are identifiers and outcomes; an Idempotency-Key is logged
 * only after it was validated (visible ASCII). Authorization codes,
 * tokens and secret targets (payout destinations) are never logged: a
 * destination is named by the first 12 hex digits of its SHA-256.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "sandbox.h"

/* Exit status of the exit_after_effect fault: what a SIGKILL'd process
 * reports (128 + 9), so tests cannot mistake it for a clean exit. */
#define FAULT_EXIT_STATUS 137

/* A store failure: nothing changed (store.c SB6); answered 500. */
static void store_failed(og_sbx_req *r, int rc)
{
    og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
    og_sbx_log_str(r, "store_error", rc == OG_SBX_ENOMEM ? "out_of_memory"
                                     : rc == OG_SBX_ESTORE ? "sqlite"
                                                           : "internal");
}

/* Answers 200 with body, or 500 when it could not be built. */
static void answer_ok(og_sbx_req *r, json_t *body)
{
    if (!body)
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
    else
        og_sbx_answer(r, 200, body);
}

/* A body that must be empty or {}: 0, or -1 answered 400 naming the
 * first member. */
static int refuse_members(og_sbx_req *r)
{
    if (json_object_size(r->json) == 0)
        return 0;
    og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST,
                json_object_iter_key(json_object_iter(r->json)));
    return -1;
}

/* ===========================================================================
 * POST /v1/credits, POST /v1/payouts
 * ========================================================================= */

/* Logs the decision's word ("refused_" and the closed code for a refusal
 * of a closed target). */
static void log_decision(og_sbx_req *r, const og_sbx_resource *res,
                         og_sbx_decision d)
{
    char refused[64];
    const char *w = "unknown";

    switch (d) {
    case OG_SBX_DO_REPLAY: w = "replayed"; break;
    case OG_SBX_DO_MISMATCH: w = "mismatch"; break;
    case OG_SBX_DO_RATE_LIMIT: w = "rate_limited"; break;
    case OG_SBX_DO_EXPIRE: w = "expired"; break;
    case OG_SBX_DO_REFUSE_CLOSED:
        snprintf(refused, sizeof refused, "refused_%s",
                 og_sbx_code_name(res->closed));
        w = refused;
        break;
    case OG_SBX_DO_CREATE: w = "created"; break;
    case OG_SBX_DO_CREATE_ASYNC: w = "created_pending"; break;
    }
    og_sbx_log_str(r, "outcome", w);
}

/* One firing of the armed faults for a request offering subject (NULL:
 * nothing an aimed fault can name); NONE when none fires. */
static og_sbx_fault fault_take(og_sbx_srv *srv,
                               const og_sbx_fault_subject *subject)
{
    og_sbx_fault f;

    pthread_mutex_lock(&srv->faults_mu);
    f = og_sbx_faults_take(&srv->faults, subject);
    pthread_mutex_unlock(&srv->faults_mu);
    return f;
}

/* Turns a committed result of resource rs into the answer. */
static void answer_result(og_sbx_req *r, const og_sbx_resource *rs,
                          const og_sbx_result *res)
{
    unsigned status;
    json_t *body;

    log_decision(r, rs, res->decision);
    if (og_sbx_result_answer(rs, res, &status, &body) != 0) {
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        return;
    }
    og_sbx_answer(r, status, body);
    r->replayed = res->decision == OG_SBX_DO_REPLAY;
    if (res->decision == OG_SBX_DO_RATE_LIMIT)
        r->retry_after = OG_SBX_RETRY_AFTER_S;
    /* Only these decisions carry a saved result. */
    if ((og_sbx_decision_writes(res->decision) ||
         res->decision == OG_SBX_DO_REPLAY) &&
        !res->saved.refused)
        og_sbx_log_str(r, rs->id_log, res->saved.record.id);
}

/* The after-effect part of fault f, on an answer already built. */
static void fault_after(og_sbx_req *r, const og_sbx_fault *f)
{
    switch (f->kind) {
    case OG_SBX_FAULT_DROP_RESPONSE_AFTER_EFFECT:
        r->drop = true;
        break;
    case OG_SBX_FAULT_DELAY_AFTER_EFFECT:
        og_sbx_sleep_us(f->ms * 1000);
        break;
    case OG_SBX_FAULT_ERROR_500_AFTER_EFFECT:
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        break;
    case OG_SBX_FAULT_EXIT_AFTER_EFFECT:
        /* The effect is durable (store.c SB1); die before answering, as a
         * crash between commit and reply would. */
        og_sbx_log(OG_SBX_LOG_WARN, "fault_exit",
                   json_pack("{s:O}", "request", r->log));
        _exit(FAULT_EXIT_STATUS);
    default:
        break;
    }
}

/* Logs target: as it is, or for a secret one the first 12 hex digits of
 * its SHA-256 under "<target>_sha256" — enough to tell two apart in a log,
 * useless for paying one. */
static void log_target(og_sbx_req *r, const og_sbx_resource *res,
                       const char *target)
{
    unsigned char h[32];
    char hex[2 * sizeof h + 1], name[64];

    if (!res->target_secret) {
        og_sbx_log_str(r, res->target, target);
        return;
    }
    crypto_hash_sha256(h, (const unsigned char *)target, strlen(target));
    sodium_bin2hex(hex, sizeof hex, h, sizeof h);
    hex[12] = '\0';
    snprintf(name, sizeof name, "%s_sha256", res->target);
    og_sbx_log_str(r, name, hex);
}

/* Validates the key header and the body; 0 when the create may run. */
static int create_read(og_sbx_req *r, const og_sbx_resource *res,
                       og_sbx_params *req)
{
    og_sbx_problem why;

    if (r->idem_key_count != 1 || r->idem_key_bad ||
        !og_sbx_key_valid(r->idem_key)) {
        og_sbx_fail(r, OG_SBX_C_IDEMPOTENCY_KEY_REQUIRED, NULL);
        return -1;
    }
    if (og_sbx_params_parse(res, r->json, req, &why) != 0) {
        og_sbx_fail(r, why.code, why.field);
        return -1;
    }
    og_sbx_log_str(r, "idempotency_key", r->idem_key);
    log_target(r, res, req->target);
    og_sbx_log_str(r, "reference", req->reference);
    return 0;
}

static void h_create(og_sbx_req *r)
{
    const og_sbx_resource *rs = r->route->res;
    og_sbx_srv *srv = r->srv;
    og_sbx_params req;
    og_sbx_result res;
    og_sbx_fault_subject subject;
    og_sbx_fault f;
    int rc;

    if (create_read(r, rs, &req) != 0)
        return;
    /* A payout's destination is a secret: no fault names it (a payout is
     * aimed at by its key or reference). */
    subject.key = r->idem_key;
    subject.reference = req.reference;
    subject.account = rs->kind == OG_SBX_CREDIT ? req.target : NULL;
    f = fault_take(srv, &subject);
    if (f.kind != OG_SBX_FAULT_NONE) {
        og_sbx_log_str(r, "fault", og_sbx_fault_name(f.kind));
        if (f.aimed)
            og_sbx_log_int(r, "fault_aimed", 1);
    }
    if (f.kind == OG_SBX_FAULT_ERROR_500_BEFORE_EFFECT) {
        if ((rc = og_sbx_store_count_request(srv->store, rs->c_requests)) !=
            0)
            store_failed(r, rc);
        else
            og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        return;
    }
    if (f.kind == OG_SBX_FAULT_CLOSE_BEFORE_EFFECT) {
        /* What a client sees when the server closed an idle kept-alive
         * connection as the request went out: nothing, and nothing done
         * (not even counted). */
        r->drop = true;
        return;
    }
    if (f.kind == OG_SBX_FAULT_DELAY_BEFORE_EFFECT)
        og_sbx_sleep_us(f.ms * 1000);
    rc = og_sbx_store_create(srv->store, rs, &srv->cfg.policy, r->idem_key,
                             &req, &res);
    if (rc != 0) {
        store_failed(r, rc); /* nothing changed: no after-fault */
        return;
    }
    answer_result(r, rs, &res);
    fault_after(r, &f);
}

/* ===========================================================================
 * POST /oauth/token (RFC 6749 4.1.3): each code is exchanged once. The
 * armed faults act here as on creates, around the exchange (the "effect").
 * Neither the code nor the tokens are logged.
 * ========================================================================= */

/* An error answer in RFC 6749 5.2's shape; logs the code and the field. */
static void oauth_fail(og_sbx_req *r, og_sbx_code c, const char *field)
{
    json_t *e = og_sbx_oauth_error_json(c, field);

    if (!e) {
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        return;
    }
    og_sbx_answer(r, og_sbx_code_status(c), e);
    og_sbx_log_str(r, "error", og_sbx_code_name(c));
    if (field && field[0])
        og_sbx_log_str(r, "field", field);
}

/* A fresh token: prefix ("at_", "rt_") and 256 random bits in hex. */
static void token_new(const char *prefix, char out[OG_SBX_TOKEN_LEN + 1])
{
    unsigned char b[32];
    char hex[2 * sizeof b + 1];

    randombytes_buf(b, sizeof b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    snprintf(out, OG_SBX_TOKEN_LEN + 1, "%s%s", prefix, hex);
    sodium_memzero(b, sizeof b);
    sodium_memzero(hex, sizeof hex);
}

/* Exchanges the code and builds the answer: the token response, or 400
 * invalid_grant for a code that is unknown or already exchanged. 0, or
 * -1 when the store failed (answered 500; nothing changed). */
static int token_exchange(og_sbx_req *r, const char *code)
{
    char access[OG_SBX_TOKEN_LEN + 1], refresh[OG_SBX_TOKEN_LEN + 1];
    bool exchanged = false;
    int rc = og_sbx_store_code_exchange(r->srv->store, code, &exchanged);

    if (rc != 0) {
        store_failed(r, rc); /* the code is still good */
        return -1;
    }
    if (!exchanged) {
        og_sbx_log_str(r, "outcome", "invalid_grant");
        oauth_fail(r, OG_SBX_C_INVALID_GRANT, NULL);
        return 0;
    }
    token_new("at_", access);
    token_new("rt_", refresh);
    og_sbx_log_str(r, "outcome", "exchanged");
    answer_ok(r, og_sbx_token_json(access, refresh));
    sodium_memzero(access, sizeof access);
    sodium_memzero(refresh, sizeof refresh);
    return 0;
}

static void h_token(og_sbx_req *r)
{
    og_sbx_srv *srv = r->srv;
    og_sbx_problem why;
    og_sbx_fault f;
    json_t *form = NULL;
    const char *code;
    int rc;

    rc = og_sbx_form_parse(r->body ? r->body : "", r->body_len, &form, &why);
    if (rc == OG_SBX_ENOMEM) {
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        return;
    }
    if (rc != 0 || og_sbx_token_request_parse(form, &code, &why) != 0) {
        oauth_fail(r, why.code, why.field);
        json_decref(form);
        return;
    }
    f = fault_take(srv, NULL); /* an exchange names nothing to aim at */
    if (f.kind != OG_SBX_FAULT_NONE)
        og_sbx_log_str(r, "fault", og_sbx_fault_name(f.kind));
    if (f.kind == OG_SBX_FAULT_ERROR_500_BEFORE_EFFECT) {
        if ((rc = og_sbx_store_count_request(srv->store, "token_requests")) !=
            0)
            store_failed(r, rc);
        else
            og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
        json_decref(form);
        return;
    }
    if (f.kind == OG_SBX_FAULT_CLOSE_BEFORE_EFFECT) {
        r->drop = true; /* as for a create: nothing spent, nothing counted */
        json_decref(form);
        return;
    }
    if (f.kind == OG_SBX_FAULT_DELAY_BEFORE_EFFECT)
        og_sbx_sleep_us(f.ms * 1000);
    if (token_exchange(r, code) == 0) /* a store failure: no after-fault */
        fault_after(r, &f);
    json_decref(form);
}

/* ===========================================================================
 * GET /v1/credits, GET /v1/payouts: ?reference=R | ?idempotency_key=K
 * ========================================================================= */

/* The one lookup parameter into *by / *value; 0, or -1 answered 400. */
static int lookup_read(og_sbx_req *r, og_sbx_lookup_by *by,
                       const char **value)
{
    const char *name, *v;
    json_t *jv;

    if (r->args_bad)
        return og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST, r->args_bad_name),
               -1;
    json_object_foreach(r->args, name, jv) {
        if (strcmp(name, "reference") != 0 &&
            strcmp(name, "idempotency_key") != 0)
            return og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST, name), -1;
    }
    if (json_object_size(r->args) != 1)
        return og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST, "query"), -1;
    if ((v = json_string_value(json_object_get(r->args, "reference")))) {
        size_t n = strlen(v);

        for (size_t i = 0; i < n; i++)
            if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
                n = 0;
        if (n == 0 || n > OG_SBX_REFERENCE_MAX)
            return og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST, "reference"), -1;
        *by = OG_SBX_BY_REFERENCE;
    } else {
        v = json_string_value(json_object_get(r->args, "idempotency_key"));
        if (!og_sbx_key_valid(v))
            return og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST,
                               "idempotency_key"),
                   -1;
        *by = OG_SBX_BY_KEY;
    }
    *value = v;
    return 0;
}

/* {"<list>": [record, …]} of n records as seen at now. */
static json_t *records_json(const og_sbx_resource *res,
                            const og_sbx_record *v, size_t n, int64_t now)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, og_sbx_record_json(res, &v[i], now)) !=
            0) {
            json_decref(a);
            a = NULL;
        }
    return a ? json_pack("{s:o}", res->list, a) : NULL;
}

static void h_lookup(og_sbx_req *r)
{
    const og_sbx_resource *rs = r->route->res;
    og_sbx_srv *srv = r->srv;
    og_sbx_lookup_by by;
    og_sbx_record *v = NULL;
    const char *value;
    size_t n = 0;
    int64_t now;
    int rc;

    if (lookup_read(r, &by, &value) != 0)
        return;
    og_sbx_log_str(r, by == OG_SBX_BY_KEY ? "idempotency_key" : "reference",
                   value);
    rc = og_sbx_store_lookup(srv->store, rs, &srv->cfg.policy, by, value, &v,
                             &n, &now);
    if (rc != 0) {
        store_failed(r, rc);
        return;
    }
    og_sbx_log_int(r, "found", (int64_t)n);
    answer_ok(r, records_json(rs, v, n, now));
    free(v);
}

/* ===========================================================================
 * The /_control/ routes (only with --control)
 * ========================================================================= */

/* {"faults": [...]} of the armed queue; the caller holds faults_mu. */
static json_t *faults_body(og_sbx_srv *srv)
{
    json_t *list = og_sbx_faults_json(&srv->faults);

    return list ? json_pack("{s:o}", "faults", list) : NULL;
}

static void h_faults_arm(og_sbx_req *r)
{
    og_sbx_srv *srv = r->srv;
    og_sbx_problem why;
    og_sbx_fault f;
    json_t *body = NULL;
    int full;

    if (og_sbx_fault_parse(r->json, &f, &why) != 0) {
        og_sbx_fail(r, why.code, why.field);
        return;
    }
    pthread_mutex_lock(&srv->faults_mu);
    full = og_sbx_faults_arm(&srv->faults, &f);
    if (!full)
        body = faults_body(srv);
    pthread_mutex_unlock(&srv->faults_mu);
    if (full) {
        og_sbx_fail(r, OG_SBX_C_FAULT_QUEUE_FULL, NULL);
        return;
    }
    og_sbx_log_str(r, "fault", og_sbx_fault_name(f.kind));
    og_sbx_log_int(r, "count", f.count);
    og_sbx_log_int(r, "aimed", f.aimed);
    answer_ok(r, body);
}

static void h_faults_list(og_sbx_req *r)
{
    json_t *body;

    pthread_mutex_lock(&r->srv->faults_mu);
    body = faults_body(r->srv);
    pthread_mutex_unlock(&r->srv->faults_mu);
    answer_ok(r, body);
}

static void h_faults_clear(og_sbx_req *r)
{
    json_t *body;

    pthread_mutex_lock(&r->srv->faults_mu);
    og_sbx_faults_clear(&r->srv->faults);
    body = faults_body(r->srv);
    pthread_mutex_unlock(&r->srv->faults_mu);
    answer_ok(r, body);
}

static void h_stats(og_sbx_req *r)
{
    og_sbx_stats s;
    int rc = og_sbx_store_stats(r->srv->store, &s);

    if (rc != 0) {
        store_failed(r, rc);
        return;
    }
    answer_ok(r, og_sbx_stats_json(&s));
}

/* POST /_control/payouts/{id}/return: a completed payout is returned — a
 * later event of a payout that DID complete (store.c SB10). The body is
 * optional and takes no members. Answers the record as lookups show it,
 * at once (the visibility delay is about lookups, not this route). */
static void h_return(og_sbx_req *r)
{
    const og_sbx_resource *rs = r->route->res;
    og_sbx_return_outcome o;
    og_sbx_record rec;
    int64_t now;
    int rc;

    if (refuse_members(r) != 0)
        return;
    if (!og_sbx_id_valid(rs, r->path_id)) {
        og_sbx_fail(r, OG_SBX_C_INVALID_REQUEST, "id");
        return;
    }
    og_sbx_log_str(r, rs->id_log, r->path_id);
    rc = og_sbx_store_return(r->srv->store, rs, r->path_id, &o, &rec, &now);
    if (rc != 0) {
        store_failed(r, rc);
        return;
    }
    switch (o) {
    case OG_SBX_RETURN_NOT_FOUND:
        og_sbx_fail(r, OG_SBX_C_PAYOUT_NOT_FOUND, NULL);
        return;
    case OG_SBX_RETURN_REFUSED:
        og_sbx_fail(r, OG_SBX_C_PAYOUT_NOT_RETURNABLE, NULL);
        return;
    case OG_SBX_RETURNED:
        break;
    }
    og_sbx_log_str(r, "outcome", "returned");
    answer_ok(r, og_sbx_record_json(rs, &rec, now));
}

/* POST /_control/codes: mints an authorization code. The body is optional
 * and takes no members. The code is answered, never logged. */
static void h_codes_mint(og_sbx_req *r)
{
    char code[OG_SBX_CODE_LEN + 1];
    int rc;

    if (refuse_members(r) != 0)
        return;
    if ((rc = og_sbx_store_code_mint(r->srv->store, code)) != 0) {
        store_failed(r, rc);
        return;
    }
    og_sbx_log_str(r, "outcome", "minted");
    answer_ok(r, json_pack("{s:s}", "code", code));
}

static void h_reset(og_sbx_req *r)
{
    int rc;

    /* The body is optional and takes no members: any is a mistake. */
    if (refuse_members(r) != 0)
        return;
    if ((rc = og_sbx_store_reset(r->srv->store)) != 0) {
        store_failed(r, rc);
        return;
    }
    pthread_mutex_lock(&r->srv->faults_mu);
    og_sbx_faults_clear(&r->srv->faults);
    pthread_mutex_unlock(&r->srv->faults_mu);
    answer_ok(r, json_pack("{s:b}", "reset", 1));
}

/* ===========================================================================
 * Routes: method, path, control-only, takes a body, body optional, the
 * body is a form, the handler, the resource it serves.
 * ========================================================================= */
#define CREDITS (&og_sbx_resources[OG_SBX_CREDIT])
#define PAYOUTS (&og_sbx_resources[OG_SBX_PAYOUT])

const og_sbx_route og_sbx_routes[] = {
    {"POST", "/v1/credits", false, true, false, false, h_create, CREDITS},
    {"GET", "/v1/credits", false, false, false, false, h_lookup, CREDITS},
    {"POST", "/v1/payouts", false, true, false, false, h_create, PAYOUTS},
    {"GET", "/v1/payouts", false, false, false, false, h_lookup, PAYOUTS},
    {"POST", "/oauth/token", false, true, false, true, h_token, NULL},
    {"POST", "/_control/faults", true, true, false, false, h_faults_arm, NULL},
    {"GET", "/_control/faults", true, false, false, false, h_faults_list, NULL},
    {"DELETE", "/_control/faults", true, false, false, false, h_faults_clear,
     NULL},
    {"GET", "/_control/stats", true, false, false, false, h_stats, NULL},
    {"POST", "/_control/reset", true, true, true, false, h_reset, NULL},
    {"POST", "/_control/codes", true, true, true, false, h_codes_mint, NULL},
    {"POST", "/_control/payouts/{id}/return", true, true, true, false,
     h_return, PAYOUTS},
};
const size_t og_sbx_n_routes = sizeof og_sbx_routes / sizeof og_sbx_routes[0];
