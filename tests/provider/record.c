/*
 * record.c — the recording mode of provider_test (a test helper, not a
 * test): `provider_test --record credits|payouts PATH` (`--record PATH`:
 * credits) starts sandboxes, sends every documented kind of request of
 * that API with a plain libcurl handle, and writes
 * tests/vectors/sandbox-<api>.v1.jsonl: what the sandbox answered (status,
 * Content-Type, Retry-After, Idempotent-Replayed, the exact body) with the
 * expectation written here by hand — never computed by the classifier —
 * followed by the invented undocumented answers. Both APIs are recorded by
 * the same code through a rec_api row; payouts add a return (the lookup
 * still finds the payout, the create's key still replays its answer).
 * test_classify replays both files.
 */
#include "harness.h"

/* ===========================================================================
 * Recording mode: one recorder for every API of the sandbox, read through
 * a rec_api row (the credits' vectors and the payouts' are the same
 * requests, with the API's own path, target and test targets).
 * ========================================================================= */
typedef struct rec_api {
    const char *name;         /* "credits": the --record argument */
    const char *path;         /* "/v1/credits" */
    const char *typo_path;    /* a route the sandbox does not serve */
    const char *target;       /* the body member: "account" */
    const char *list;         /* the lookup answer's array */
    const char *open, *closed, *busy, *async; /* test targets */
    const char *closed_code;  /* "account_closed" */
    bool returns;             /* POST /_control/payouts/{id}/return */
    /* Invented answers are written for credits; these words are put in
     * for the API's own (identity for credits). */
    const char *id_prefix, *noun, *completed;
} rec_api;

static const rec_api rec_apis[] = {
    {"credits", "/v1/credits", "/v1/credit", "account", "credits", "acct-1",
     "closed-1", "busy-1", "async-1", "account_closed", false, "cr_",
     "credit", "succeeded"},
    {"payouts", "/v1/payouts", "/v1/payout", "destination", "payouts",
     "dst_vec_1", "dst_closed_1", "dst_busy_1", "dst_async_1",
     "destination_closed", true, "po_", "payout", "completed"},
};

typedef struct recorder {
    FILE *out;
    int n;
    const rec_api *api;
} recorder;

/* Writes one vector line. ref_from_body: the expected reference is the
 * body's "id" (read here with jansson, not by the classifier). */
static void vector(recorder *rec, const char *name, const char *source,
                   const char *call, const char *query, const char *transport,
                   long status, const raw *r, const char *cls,
                   const char *reason, bool ref_from_body, const char *result)
{
    json_t *v = json_object(), *h = json_object(), *e = json_object();
    const char *ref = "";
    json_t *b = NULL;
    char *line;

    if (ref_from_body && r) {
        b = json_loadb(r->body, r->len, 0, NULL);
        if (call && strcmp(call, "lookup") == 0)
            ref = json_string_value(json_object_get(
                json_array_get(json_object_get(b, rec->api->list), 0), "id"));
        else
            ref = json_string_value(json_object_get(b, "id"));
        if (!ref) {
            fprintf(stderr, "record %s: no id in %s\n", name, r->body);
            exit(1);
        }
    }
    json_object_set_new(v, "name", json_string(name));
    json_object_set_new(v, "source", json_string(source));
    if (call) {
        json_object_set_new(v, "call", json_string(call));
        json_object_set_new(v, "query", json_string(query));
    }
    json_object_set_new(v, "transport", json_string(transport));
    json_object_set_new(v, "status", json_integer(status));
    if (r && r->content_type[0])
        json_object_set_new(h, "Content-Type", json_string(r->content_type));
    if (r && r->retry_after[0])
        json_object_set_new(h, "Retry-After", json_string(r->retry_after));
    if (r && r->replayed[0])
        json_object_set_new(h, "Idempotent-Replayed",
                            json_string(r->replayed));
    json_object_set_new(v, "headers", h);
    json_object_set_new(v, "body",
                        r ? json_stringn(r->body, r->len) : json_string(""));
    if (result)
        json_object_set_new(e, "result", json_string(result));
    json_object_set_new(e, "class", json_string(cls));
    json_object_set_new(e, "reason", json_string(reason));
    json_object_set_new(e, "reference", json_string(ref));
    json_object_set_new(v, "expect", e);
    line = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    fprintf(rec->out, "%s\n", line);
    free(line);
    json_decref(b);
    json_decref(v);
    rec->n++;
}

/* A recorded create: POST url/path with key (NULL: no header), the
 * JSON body, content type. The transport kind as libcurl ended. */
static raw rec_post(const sbx *s, const char *path, const char *key,
                    const char *ctype, const char *body, const char *auth,
                    long timeout_ms)
{
    char url[256], kh[300], ct[128], ah[256];
    const char *hs[4];
    int n = 0;

    snprintf(url, sizeof url, "%s%s", s->url, path);
    if (ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        hs[n++] = ct;
    }
    if (key) {
        snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
        hs[n++] = kh;
    }
    if (auth) {
        snprintf(ah, sizeof ah, "Authorization: Bearer %s", auth);
        hs[n++] = ah;
    }
    hs[n] = NULL;
    return http("POST", url, hs, body, timeout_ms);
}

static const char *transport_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK: return "ok";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_CONNECT: return "connect_failed";
    case CURLE_GOT_NOTHING: return "no_response";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE: return "connection_reset";
    default: return "error";
    }
}

#define JSON_CT "application/json"
#define LATER "2099-01-01T00:00:00Z"

/* Records one create answer with its hand-written expectation. */
static void rec_create(recorder *rec, const char *name, raw r,
                       const char *cls, const char *reason, bool ref)
{
    const char *tr = transport_of(r.rc);
    bool ok = strcmp(tr, "ok") == 0;

    vector(rec, name, "recorded", NULL, NULL, tr, ok ? r.status : 0,
           ok ? &r : NULL, cls, reason, ref, NULL);
    free(r.body);
}

/* Records a lookup of reference (NULL: no query at all). */
static void rec_lookup(recorder *rec, const sbx *s, const char *name,
                       const char *reference, const char *cls,
                       const char *reason, bool ref, const char *result)
{
    char url[256];
    raw r;

    snprintf(url, sizeof url, "%s%s%s%s", s->url, rec->api->path,
             reference ? "?reference=" : "", reference ? reference : "");
    r = http("GET", url, NULL, NULL, 10000);
    vector(rec, name, "recorded", "lookup", reference ? reference : "vec-ref-1",
           "ok", r.status, &r, cls, reason, ref, result);
    free(r.body);
}

/* The create body of the recorder's API. */
static char *body_of(const recorder *rec, const char *target,
                     const char *amount, const char *reference,
                     const char *expires)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"%s\":\"%s\",\"amount\":\"%s\",\"currency\":\"EUR\","
             "\"reference\":\"%s\",\"expires_at\":\"%s\"}",
             rec->api->target, target, amount, reference, expires);
    return buf;
}

/* POST of the recorder's API with key and a body of target. */
static raw rec_send(const recorder *rec, const sbx *s, const char *key,
                    const char *target, const char *amount,
                    const char *reference, const char *expires,
                    const char *auth, long timeout_ms)
{
    return rec_post(s, rec->api->path, key, JSON_CT,
                    body_of(rec, target, amount, reference, expires), auth,
                    timeout_ms);
}

/* A payout's return, then what a lookup and the create's key answer:
 * found (it completed) and the original create's answer. */
static void record_return(recorder *rec, const sbx *s, raw created)
{
    json_t *b = json_loadb(created.body, created.len, 0, NULL);
    char url[512];
    raw r;

    snprintf(url, sizeof url, "%s/_control/payouts/%s/return", s->url,
             json_string_value(json_object_get(b, "id")));
    json_decref(b);
    r = http("POST", url, NULL, NULL, 10000);
    if (r.rc != CURLE_OK || r.status != 200) {
        fprintf(stderr, "record: return: %ld %s\n", r.status, r.body);
        exit(1);
    }
    free(r.body);
    rec_lookup(rec, s, "lookup_200_found_returned", "vec-ref-1", "succeeded",
               "found", true, "found");
    r = rec_send(rec, s, "vec-0001", rec->api->open, "25.00", "vec-ref-1",
                 LATER, NULL, 10000);
    if (r.len != created.len || memcmp(r.body, created.body, r.len) != 0) {
        fprintf(stderr, "record: the replay after a return changed\n");
        exit(1);
    }
    rec_create(rec, "create_201_replayed_after_return", r, "succeeded",
               "created", true);
}

static void record_sandbox(recorder *rec)
{
    const rec_api *ap = rec->api;
    char big[70001], url[256], keyfile[PATH_MAX + 8], name[96], text[512];
    const char *auth_args[3];
    sbx s, a;
    raw r, first;
    FILE *kf;

    if (sbx_new(&s, async_fast) != 0)
        exit(1);

    first = rec_send(rec, &s, "vec-0001", ap->open, "25.00", "vec-ref-1",
                     LATER, NULL, 10000);
    r = first;
    r.body = strdup(first.body);
    rec_create(rec, "create_201_created", r, "succeeded", "created", true);
    r = rec_send(rec, &s, "vec-0001", ap->open, "25.00", "vec-ref-1", LATER,
                 NULL, 10000);
    rec_create(rec, "create_201_replayed", r, "succeeded", "created", true);
    /* The same parameters spelled differently are the same request. */
    r = rec_send(rec, &s, "vec-0001", ap->open, "25", "vec-ref-1",
                 "2099-01-01T01:00:00+01:00", NULL, 10000);
    rec_create(rec, "create_201_replayed_canonical_equal", r, "succeeded",
               "created", true);
    r = rec_send(rec, &s, "vec-0001", ap->open, "26.00", "vec-ref-1", LATER,
                 NULL, 10000);
    rec_create(rec, "create_422_idempotency_mismatch", r, "unknown",
               "idempotency_mismatch", false);
    if (ap->returns)
        record_return(rec, &s, first);
    free(first.body);

    r = rec_send(rec, &s, "vec-0002", ap->async, "5", "vec-ref-2", LATER,
                 NULL, 10000);
    rec_create(rec, "create_202_pending", r, "unknown", "pending", true);
    rec_lookup(rec, &s, "lookup_200_pending", "vec-ref-2", "unknown",
               "pending", true, "found");
    t_sleep_ms(400);
    rec_lookup(rec, &s, "lookup_200_found_after_completion", "vec-ref-2",
               "succeeded", "found", true, "found");
    r = rec_send(rec, &s, "vec-0002", ap->async, "5", "vec-ref-2", LATER,
                 NULL, 10000);
    rec_create(rec, "create_201_async_completed_replay", r, "succeeded",
               "created", true);

    r = rec_send(rec, &s, "vec-0003", ap->closed, "5", "vec-ref-3", LATER,
                 NULL, 10000);
    snprintf(name, sizeof name, "create_422_%s", ap->closed_code);
    rec_create(rec, name, r, "failed", ap->closed_code, false);
    r = rec_send(rec, &s, "vec-0003", ap->closed, "5", "vec-ref-3", LATER,
                 NULL, 10000);
    snprintf(name, sizeof name, "create_422_%s_replayed", ap->closed_code);
    rec_create(rec, name, r, "failed", ap->closed_code, false);
    r = rec_send(rec, &s, "vec-0004", ap->open, "5", "vec-ref-4",
                 "2020-01-01T00:00:00Z", NULL, 10000);
    rec_create(rec, "create_422_request_expired", r, "failed",
               "request_expired", false);
    r = rec_send(rec, &s, "vec-0005", ap->busy, "5", "vec-ref-5", LATER,
                 NULL, 10000);
    rec_create(rec, "create_429_rate_limited", r, "transient", "rate_limited",
               false);

    snprintf(text, sizeof text, "{\"%s\":", ap->target);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_json", r, "failed", "invalid_json",
               false);
    snprintf(text, sizeof text,
             "{\"%s\":\"%s\",\"currency\":\"EUR\",\"reference\":"
             "\"r\",\"expires_at\":\"" LATER "\"}",
             ap->target, ap->open);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_request_missing_amount", r, "failed",
               "invalid_request", false);
    snprintf(text, sizeof text,
             "{\"%s\":\"%s\",\"amount\":\"1\",\"currency\":"
             "\"EUR\",\"reference\":\"r\",\"expires_at\":\"" LATER
             "\",\"memo\":\"hi\"}",
             ap->target, ap->open);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_request_unknown_member", r, "failed",
               "invalid_request", false);
    r = rec_post(&s, ap->path, NULL, JSON_CT,
                 body_of(rec, ap->open, "5", "vec-ref-6", LATER), NULL, 10000);
    rec_create(rec, "create_400_idempotency_key_required", r, "failed",
               "idempotency_key_required", false);
    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    r = rec_post(&s, ap->path, "vec-0007", JSON_CT, big, NULL, 10000);
    rec_create(rec, "create_413_body_too_large", r, "failed", "body_too_large",
               false);
    r = rec_post(&s, ap->path, "vec-0008", "text/plain",
                 body_of(rec, ap->open, "5", "vec-ref-8", LATER), NULL, 10000);
    rec_create(rec, "create_415_unsupported_media_type", r, "failed",
               "unsupported_media_type", false);
    r = rec_post(&s, ap->typo_path, "vec-0009", JSON_CT,
                 body_of(rec, ap->open, "5", "vec-ref-9", LATER), NULL, 10000);
    rec_create(rec, "create_404_route_not_found", r, "unknown",
               "route_not_found", false);
    {
        static const char *const hs[] = {"Content-Type: application/json",
                                         "Idempotency-Key: vec-0009", NULL};
        snprintf(url, sizeof url, "%s%s", s.url, ap->path);
        r = http("PUT", url, hs,
                 body_of(rec, ap->open, "5", "vec-ref-9", LATER), 10000);
        rec_create(rec, "create_405_method_not_allowed", r, "unknown",
                   "method_not_allowed", false);
    }

    /* Faults. */
    arm(&s, "error_500_after_effect", -1);
    r = rec_send(rec, &s, "vec-0010", ap->open, "5", "vec-ref-10", LATER,
                 NULL, 10000);
    rec_create(rec, "create_500_internal_after_effect", r, "unknown",
               "internal", false);
    arm(&s, "error_500_before_effect", -1);
    r = rec_send(rec, &s, "vec-0011", ap->open, "5", "vec-ref-11", LATER,
                 NULL, 10000);
    rec_create(rec, "create_500_internal_before_effect", r, "unknown",
               "internal", false);
    arm(&s, "drop_response_after_effect", -1);
    r = rec_send(rec, &s, "vec-0012", ap->open, "5", "vec-ref-12", LATER,
                 NULL, 10000);
    rec_create(rec, "transport_no_response_drop_after_effect", r, "unknown",
               "no_response", false);
    arm(&s, "delay_after_effect", 1500);
    r = rec_send(rec, &s, "vec-0013", ap->open, "5", "vec-ref-13", LATER,
                 NULL, 300);
    rec_create(rec, "transport_timeout_delay_after_effect", r, "unknown",
               "timeout", false);

    /* Lookups. */
    rec_lookup(rec, &s, "lookup_200_found_after_dropped_response",
               "vec-ref-12", "succeeded", "found", true, "found");
    rec_lookup(rec, &s, "lookup_200_not_found", "vec-ref-11", "unknown",
               "not_found", false, "not_found");
    rec_lookup(rec, &s, "lookup_400_without_query", NULL, "unknown", "",
               false, "provider_unavailable");

    /* Stopped: refused before anything was sent. */
    sbx_stop(&s);
    r = rec_send(rec, &s, "vec-0014", ap->open, "5", "vec-ref-14", LATER,
                 NULL, 2000);
    rec_create(rec, "transport_connect_failed_sandbox_stopped", r,
               "transient", "connect_failed", false);
    sbx_free(&s);

    /* An API key. */
    memset(&a, 0, sizeof a);
    snprintf(a.dir, sizeof a.dir, "/tmp/og-provider-XXXXXX");
    if (!mkdtemp(a.dir))
        exit(1);
    snprintf(keyfile, sizeof keyfile, "%s/key", a.dir);
    kf = fopen(keyfile, "w");
    fputs(API_KEY "\n", kf);
    fclose(kf);
    auth_args[0] = "--api-key-file";
    auth_args[1] = keyfile;
    auth_args[2] = NULL;
    if (sbx_start(&a, auth_args) != 0)
        exit(1);
    r = rec_send(rec, &a, "vec-0020", ap->open, "5", "vec-ref-20", LATER,
                 NULL, 10000);
    rec_create(rec, "create_401_unauthorized_no_key", r, "transient",
               "unauthorized", false);
    r = rec_send(rec, &a, "vec-0020", ap->open, "5", "vec-ref-20", LATER,
                 "wrong-key", 10000);
    rec_create(rec, "create_401_unauthorized_wrong_key", r, "transient",
               "unauthorized", false);
    sbx_free(&a);
}

/* text with the credits' words put in for the recorder's API's (none for
 * credits), into out. */
static const char *adapt(const recorder *rec, const char *text, char *out,
                         size_t len)
{
    const struct {
        const char *from, *to;
    } words[] = {
        {"cr_", rec->api->id_prefix},   {"account", rec->api->target},
        {"credits", rec->api->list},    {"credit", rec->api->noun},
        {"succeeded", rec->api->completed},
    };
    size_t o = 0;

    while (*text && o + 1 < len) {
        size_t k;

        for (k = 0; k < sizeof words / sizeof words[0]; k++)
            if (strncmp(text, words[k].from, strlen(words[k].from)) == 0)
                break;
        if (k == sizeof words / sizeof words[0]) {
            out[o++] = *text++;
            continue;
        }
        o += (size_t)snprintf(out + o, len - o, "%s", words[k].to);
        text += strlen(words[k].from);
        if (o >= len)
            o = len - 1;
    }
    out[o] = '\0';
    return out;
}

/* Answers the sandbox does not document (or cannot be made to give):
 * each must be UNKNOWN unless a rule proves otherwise. */
static void record_invented(recorder *rec)
{
    static const struct {
        const char *name, *transport;
        long status;
        const char *ctype, *retry_after, *body, *cls, *reason;
    } inv[] = {
        {"invented_418_teapot", "ok", 418, "text/plain", NULL,
         "I'm a teapot", "unknown", "undocumented_status_418"},
        {"invented_503_html", "ok", 503, "text/html", "30",
         "<html><body><h1>503 Service Temporarily Unavailable</h1></body>"
         "</html>\n",
         "unknown", "undocumented_status_503"},
        {"invented_502_gateway_json", "ok", 502, "application/json", NULL,
         "{\"error\":\"bad_gateway\"}", "unknown", "undocumented_status_502"},
        {"invented_200_credit_body", "ok", 200, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000001\",\"account\":\"acct-1\","
         "\"amount\":\"5\",\"currency\":\"EUR\",\"reference\":\"r\","
         "\"status\":\"succeeded\",\"created_at\":"
         "\"2026-11-29T19:00:00.000000Z\"}",
         "unknown", "undocumented_status_200"},
        {"invented_204_no_content", "ok", 204, NULL, NULL, "", "unknown",
         "undocumented_status_204"},
        {"invented_302_redirect", "ok", 302, NULL, NULL, "", "unknown",
         "undocumented_status_302"},
        {"invented_201_not_json", "ok", 201, "text/plain", NULL, "Created",
         "unknown", "malformed_success"},
        {"invented_201_empty", "ok", 201, "application/json", NULL, "",
         "unknown", "malformed_success"},
        {"invented_201_missing_id", "ok", 201, "application/json", NULL,
         "{\"account\":\"acct-1\",\"amount\":\"5\",\"currency\":\"EUR\","
         "\"reference\":\"r\",\"status\":\"succeeded\"}",
         "unknown", "malformed_success"},
        {"invented_201_id_not_a_string", "ok", 201, "application/json", NULL,
         "{\"id\":42,\"status\":\"succeeded\"}", "unknown",
         "malformed_success"},
        {"invented_201_status_pending", "ok", 201, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000002\",\"status\":\"pending\"}",
         "unknown", "malformed_success"},
        {"invented_201_duplicate_id_member", "ok", 201, "application/json",
         NULL,
         "{\"id\":\"cr_000000000000000000000003\",\"id\":"
         "\"cr_000000000000000000000004\",\"status\":\"succeeded\"}",
         "unknown", "malformed_success"},
        {"invented_201_truncated_body", "ok", 201, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000005\",\"account\":\"acct",
         "unknown", "malformed_success"},
        {"invented_201_cut_by_reset", "connection_reset", 201,
         "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000006\",\"status\":\"succ",
         "unknown", "connection_reset"},
        {"invented_422_unknown_code", "ok", 422, "application/json", NULL,
         "{\"error\":\"insufficient_funds\",\"message\":\"m\"}", "unknown",
         "undocumented_error_422"},
        {"invented_422_no_body", "ok", 422, NULL, NULL, "", "unknown",
         "undocumented_error_422"},
        {"invented_422_error_not_a_string", "ok", 422, "application/json",
         NULL, "{\"error\":{\"code\":\"account_closed\"}}", "unknown",
         "undocumented_error_422"},
        {"invented_429_gateway_html", "ok", 429, "text/html", "5",
         "<html>Too Many Requests</html>", "unknown",
         "undocumented_error_429"},
        {"invented_429_http_date_retry_after", "ok", 429, "application/json",
         "Wed, 21 Oct 2026 07:28:00 GMT",
         "{\"error\":\"rate_limited\",\"message\":\"m\"}", "transient",
         "rate_limited"},
        {"invented_500_html", "ok", 500, "text/html", NULL,
         "<html>Internal Server Error</html>", "unknown",
         "undocumented_error_500"},
        {"invented_400_unknown_code", "ok", 400, "application/json", NULL,
         "{\"error\":\"invalid_currency_for_account\"}", "unknown",
         "undocumented_error_400"},
        {"invented_connection_reset", "connection_reset", 0, NULL, NULL, "",
         "unknown", "connection_reset"},
        {"invented_response_too_large", "response_too_large", 201, NULL, NULL,
         "", "unknown", "transport_response_too_large"},
        {"invented_transport_error", "error", 0, NULL, NULL, "", "unknown",
         "transport_error"},
    };
    char name[96], body[512];

    for (size_t i = 0; i < sizeof inv / sizeof inv[0]; i++) {
        raw r = {0};

        r.body = (char *)adapt(rec, inv[i].body, body, sizeof body);
        r.len = strlen(r.body);
        if (inv[i].ctype)
            snprintf(r.content_type, sizeof r.content_type, "%s",
                     inv[i].ctype);
        if (inv[i].retry_after)
            snprintf(r.retry_after, sizeof r.retry_after, "%s",
                     inv[i].retry_after);
        vector(rec, adapt(rec, inv[i].name, name, sizeof name), "invented",
               NULL, NULL, inv[i].transport, inv[i].status, &r, inv[i].cls,
               inv[i].reason, false, NULL);
    }
    if (rec->api->returns) {
        /* A create answer never shows a return: a 201 saying returned is
         * not the documented answer. */
        raw r = {0};
        r.body = "{\"id\":\"po_000000000000000000000008\",\"status\":"
                 "\"returned\"}";
        r.len = strlen(r.body);
        snprintf(r.content_type, sizeof r.content_type, "application/json");
        vector(rec, "invented_201_status_returned", "invented", NULL, NULL,
               "ok", 201, &r, "unknown", "malformed_success", false, NULL);
    }
    {
        /* A lookup answer listing a stranger: the filter was ignored. */
        raw r = {0};
        r.body = (char *)adapt(
            rec,
            "{\"credits\":[{\"id\":\"cr_000000000000000000000007\","
            "\"reference\":\"someone-else\",\"status\":\"succeeded\"}]}",
            body, sizeof body);
        r.len = strlen(r.body);
        snprintf(r.content_type, sizeof r.content_type, "application/json");
        vector(rec, "invented_lookup_lists_a_stranger", "invented", "lookup",
               "vec-ref-1", "ok", 200, &r, "unknown", "", false,
               "provider_unavailable");
    }
}

/* Records the vectors of API name (credits, payouts) into path. */
int record(const char *name, const char *path)
{
    recorder rec = {0};

    for (size_t i = 0; i < sizeof rec_apis / sizeof rec_apis[0]; i++)
        if (strcmp(name, rec_apis[i].name) == 0)
            rec.api = &rec_apis[i];
    if (!rec.api) {
        fprintf(stderr, "provider_test: --record credits|payouts PATH\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    rec.out = fopen(path, "w");
    if (!rec.out) {
        perror(path);
        return 1;
    }
    record_sandbox(&rec);
    record_invented(&rec);
    fclose(rec.out);
    curl_global_cleanup();
    fprintf(stderr, "provider_test: %d vectors written to %s\n", rec.n, path);
    return 0;
}
