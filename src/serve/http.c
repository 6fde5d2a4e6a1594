/*
 * http.c — the request core of the HTTP edge: routing, early refusals on
 * the head (authentication, rate limits, route, method, Content-Type, the
 * declared length), the body cap, content types, correlation ids, the
 * request's log line and metrics, and the answer's bytes. Handlers
 * (handlers.c) see a parsed, authenticated og_http_req and set an answer.
 *
 * edge.c drives it from a connection (the head parsed by wire.c, then
 * og_http_req_begin, og_http_req_check before any body byte is read,
 * og_http_req_body, og_http_req_run, og_http_req_render); fuzz_http drives
 * the same path from fuzzed bytes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <sodium.h>

#include "http.h"
#include "ratelimit.h"
#include "wire.h"

int64_t og_http_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t og_http_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

og_srv_auth *og_srv_auth_current(og_srv *srv)
{
    og_srv_auth *a;

    pthread_mutex_lock(&srv->auth_mu);
    a = srv->auth;
    og_srv_auth_ref(a);
    pthread_mutex_unlock(&srv->auth_mu);
    return a;
}

/* ===========================================================================
 * Answers.
 * ========================================================================= */

/* Wipes and frees an answer's text (NUL-terminated; NULL is a no-op):
 * answers may carry credentials (a grant, a ticket, a redemption's token
 * response). */
static void answer_free(void *text)
{
    if (!text)
        return;
    sodium_memzero(text, strlen(text));
    free(text);
}

void og_http_json(og_http_req *r, unsigned status, json_t *body)
{
    json_decref(r->answer);
    answer_free(r->text);
    r->text = NULL;
    r->answer = body;
    r->status = status;
}

void og_http_error(og_http_req *r, unsigned status, const char *code,
                   const char *message, const char *field)
{
    json_t *e = json_pack("{s:s, s:s}", "error", code, "message", message);

    if (e && field)
        json_object_set_new(e, "field", json_string(field));
    og_http_json(r, status, e);
    og_http_log_str(r, "error", code);
}

void og_http_lib_error(og_http_req *r, int err)
{
    const char *name = og_err_name(err);

    if (err == OG_ESTORE_UNAVAILABLE) {
        /* Nothing executed; the write may or may not have happened. A
         * retry with the same request meets a defined state. Never a
         * refusal, never "unused". */
        og_http_error(r, 503, "retry_later",
                      "the store is unavailable or did not confirm the "
                      "write; nothing was executed. Retry the same request "
                      "(same operation id)",
                      NULL);
        r->retry_after = r->srv->cfg.retry_after_s;
        og_http_log_str(r, "store_error", name);
    } else if (err == OG_ESTOPPED) {
        /* The instance is draining and stopped waiting: nothing was
         * decided, so the retry (on any instance) meets a defined state. */
        og_http_error(r, 503, "retry_later",
                      "this instance is shutting down and stopped before "
                      "deciding; nothing was decided. Retry the same request",
                      NULL);
        r->retry_after = r->srv->cfg.retry_after_s;
    } else if (strncmp(name, "input.", 6) == 0) {
        og_http_error(r, 400, name, og_strerror(err), NULL);
    } else {
        og_http_error(r, 500, "internal_error", "internal error", NULL);
        og_http_log_str(r, "internal", name);
    }
}

const char *og_http_query(og_http_req *r, const char *name)
{
    char *out;
    int rc;

    if (!r->query || r->n_qvals == OG_HTTP_QVALS)
        return NULL;
    out = r->qvals[r->n_qvals];
    rc = og_wire_query_get(r->query, name, out, sizeof r->qvals[0]);
    if (rc == 0)
        return NULL;
    if (rc < 0)
        snprintf(out, sizeof r->qvals[0], "%%"); /* fails every check */
    r->n_qvals++;
    return out;
}

void og_http_log_str(og_http_req *r, const char *key, const char *value)
{
    if (value && r->log)
        json_object_set_new(r->log, key, json_string(value));
}

/* ===========================================================================
 * Body members. Every check answers 400 malformed_request naming the
 * member, so a client can fix its request from the answer alone.
 * ========================================================================= */

int og_http_members_only(og_http_req *r, json_t *obj,
                         const char *const *allowed, const char *where)
{
    const char *key;
    json_t *v;
    char field[160];

    json_object_foreach(obj, key, v) {
        size_t i;

        (void)v;
        for (i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (!allowed[i]) {
            snprintf(field, sizeof field, "%s%s%.64s", where ? where : "",
                     where ? "." : "", key);
            og_http_error(r, 400, "malformed_request", "unknown member",
                          field);
            return -1;
        }
    }
    return 0;
}

int og_http_str(og_http_req *r, json_t *obj, const char *name, bool required,
                const char **out)
{
    json_t *v = json_object_get(obj, name);

    if (!v && !required) {
        *out = NULL;
        return 0;
    }
    if (!json_is_string(v)) {
        og_http_error(r, 400, "malformed_request",
                      v ? "member must be a string" : "member missing", name);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

int og_http_int(og_http_req *r, json_t *obj, const char *name, bool required,
                int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = json_object_get(obj, name);

    if (!v && !required)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo ||
        json_integer_value(v) > hi) {
        og_http_error(r, 400, "malformed_request",
                      v ? "member must be an integer within its bounds"
                        : "member missing",
                      name);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

int og_http_obj(og_http_req *r, json_t *obj, const char *name, bool required,
                json_t **out)
{
    json_t *v = json_object_get(obj, name);

    if (!v && !required) {
        *out = NULL;
        return 0;
    }
    if (!json_is_object(v)) {
        og_http_error(r, 400, "malformed_request",
                      v ? "member must be an object" : "member missing",
                      name);
        return -1;
    }
    *out = v;
    return 0;
}

/* ===========================================================================
 * Routing.
 * ========================================================================= */

/* Matches path against pattern segment by segment; a "{x}" segment captures
 * one non-empty segment into r->param. 1 on a match. */
static int route_match(const char *pattern, const char *path, og_http_req *r)
{
    const char *p = pattern, *u = path;

    while (*p && *u) {
        if (*p == '{') {
            const char *pe = strchr(p, '}');
            const char *ue = strchr(u, '/');
            size_t n = ue ? (size_t)(ue - u) : strlen(u);

            if (!pe || n == 0)
                return 0;
            if (n > OG_ID_MAX) {
                r->param_too_long = true;
                n = 0;
            }
            memcpy(r->param, u, n);
            r->param[n] = '\0';
            p = pe + 1;
            u += ue ? (size_t)(ue - u) : strlen(u);
            continue;
        }
        if (*p != *u)
            return 0;
        p++;
        u++;
    }
    return *p == '\0' && *u == '\0';
}

/* Finds the route for method and path. When only the method differs,
 * answers 405 with Allow; when nothing matches, 404 route_not_found. */
static void route_find(og_http_req *r)
{
    const char *allow = NULL;

    for (size_t i = 0; i < og_n_routes; i++) {
        r->param_too_long = false;
        if (!route_match(og_routes[i].pattern, r->path, r))
            continue;
        if (strcmp(og_routes[i].method, r->method) == 0) {
            r->route = &og_routes[i];
            return;
        }
        /* Each path is served with exactly one method. */
        allow = og_routes[i].method;
    }
    if (allow) {
        og_http_error(r, 405, "method_not_allowed",
                      "this path is served with another method", NULL);
        r->allow = allow;
    } else {
        og_http_error(r, 404, "route_not_found", "no such route", NULL);
    }
}

/* ===========================================================================
 * The request's lifetime.
 * ========================================================================= */

/* 1 when v is 1..OG_ID_MAX printable ASCII without spaces. */
static int header_id_ok(const char *v)
{
    return og_id_valid(v);
}

/* A correlation id for a request that brought none: 12 bytes, 8 drawn
 * once per process and a 4-byte counter, so ids are unique within a
 * process and unlikely to meet another's. It names a log line, not a
 * secret: no system call per request for it. */
static unsigned char cid_prefix[8];
static atomic_uint_fast32_t cid_seq;
static pthread_once_t cid_once = PTHREAD_ONCE_INIT;

static void cid_draw(void)
{
    randombytes_buf(cid_prefix, sizeof cid_prefix);
}

static void fresh_correlation_id(unsigned char out[12])
{
    uint32_t n;

    pthread_once(&cid_once, cid_draw);
    memcpy(out, cid_prefix, sizeof cid_prefix);
    n = (uint32_t)atomic_fetch_add(&cid_seq, 1);
    out[8] = (unsigned char)(n >> 24);
    out[9] = (unsigned char)(n >> 16);
    out[10] = (unsigned char)(n >> 8);
    out[11] = (unsigned char)n;
}

/* Each thread keeps the last request it ended, with its body buffer, for
 * its next one: an og_http_req (2 KB) and a body buffer (1 KB and up) are
 * glibc "large" requests, and every one of them first consolidates the
 * fastbins that jansson's small frees fill (malloc_consolidate, several
 * µs a request in docs/performance.md's profiles). The body is wiped when
 * a request ends, as before; the spare is freed when its thread ends. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_ok;

static void spare_free(void *p)
{
    og_http_req *r = p;

    free(r->body);
    free(r);
}

static void spare_init(void)
{
    spare_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* A zeroed request, keeping a spare's body buffer (wiped). */
static og_http_req *req_new(void)
{
    og_http_req *r;
    char *body;
    size_t cap;

    pthread_once(&spare_once, spare_init);
    if (!spare_ok || !(r = pthread_getspecific(spare_key)))
        return calloc(1, sizeof *r);
    pthread_setspecific(spare_key, NULL);
    body = r->body;
    cap = r->body_cap;
    memset(r, 0, sizeof *r);
    r->body = body;
    r->body_cap = cap;
    return r;
}

/* Frees r (its body already wiped), or keeps it as this thread's spare. */
static void req_free(og_http_req *r)
{
    if (spare_ok && !pthread_getspecific(spare_key) &&
        pthread_setspecific(spare_key, r) == 0)
        return;
    free(r->body);
    free(r);
}

og_http_req *og_http_req_begin(og_srv *srv, const char *method,
                               const char *target, const char *source,
                               const char *request_id,
                               const char *content_type)
{
    og_http_req *r = req_new();
    const char *ct = content_type, *query = NULL;
    unsigned char rnd[12];
    bool bad_target;

    if (!r)
        return NULL;
    r->srv = srv;
    snprintf(r->method, sizeof r->method, "%s", method);
    snprintf(r->source, sizeof r->source, "%s", source ? source : "");
    r->start_us = og_http_mono_us();
    r->log = json_object();
    /* A target that does not decode is 400; one whose path does not fit
     * matches no route (404). */
    bad_target = false;
    if (og_wire_target(target, r->path, sizeof r->path, &query) != 0) {
        bad_target = target[0] != '/' || strlen(target) < sizeof r->path;
        r->path[0] = '\0';
        query = NULL;
    }
    if (query && !(r->query = strdup(query))) {
        json_decref(r->log);
        req_free(r);
        return NULL;
    }

    if (request_id && header_id_ok(request_id)) {
        snprintf(r->correlation_id, sizeof r->correlation_id, "%s",
                 request_id);
    } else {
        fresh_correlation_id(rnd);
        sodium_bin2hex(r->correlation_id, sizeof r->correlation_id, rnd,
                       sizeof rnd);
    }
    if (ct) {
        size_t n = strcspn(ct, ";");

        r->has_content_type = true;
        while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
            n--;
        r->json_content_type = n == 16 &&
                               strncasecmp(ct, "application/json", 16) == 0;
    }
    atomic_fetch_add(&srv->inflight, 1);
    og_metrics_inflight(1);
    if (bad_target)
        og_http_error(r, 400, "malformed_request",
                      "request target: a malformed percent escape or NUL",
                      NULL);
    else
        route_find(r);
    return r;
}

void og_http_req_end(og_http_req *r)
{
    og_srv *srv = r->srv;

    json_decref(r->json);
    json_decref(r->answer);
    json_decref(r->log);
    answer_free(r->text);
    if (r->body)
        sodium_memzero(r->body, r->body_cap); /* it may hold a token */
    og_srv_auth_unref(r->auth);
    free(r->query);
    req_free(r);
    og_metrics_inflight(-1);
    if (atomic_fetch_sub(&srv->inflight, 1) == 1) {
        pthread_mutex_lock(&srv->drain_mu);
        pthread_cond_broadcast(&srv->drain_cv);
        pthread_mutex_unlock(&srv->drain_mu);
    }
}

/* Appends body bytes up to the cap; past it, the body is dropped and the
 * request will be answered 413 (the rest is read and discarded, so the
 * connection stays usable). */
void og_http_req_body(og_http_req *r, const char *data, size_t n)
{
    size_t cap = r->srv->cfg.max_body_bytes;

    if (r->body_too_large || !r->route || !r->route->body)
        return;
    if (r->body_len + n > cap) {
        r->body_too_large = true;
        return;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t want = r->body_cap ? r->body_cap * 2 : 1024;
        char *nb;

        while (want < r->body_len + n + 1)
            want *= 2;
        if (want > cap + 1)
            want = cap + 1;
        if (!(nb = malloc(want))) {
            r->body_too_large = true; /* answered 413; nothing changes */
            return;
        }
        if (r->body) {
            memcpy(nb, r->body, r->body_len);
            sodium_memzero(r->body, r->body_cap);
            free(r->body);
        }
        r->body = nb;
        r->body_cap = want;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
}

/* The kinds of bucket (ratelimit.c) and metrics' labels for them. */
enum { RL_AUTH = 0, RL_REVOKE = 1 };
enum { BY_PRINCIPAL = 0, BY_SOURCE = 1 };

/* 429 rate_limited after wait seconds; counted. Returns -1. */
static int rate_limited(og_http_req *r, int limit, int by, int wait)
{
    og_http_error(r, 429, "rate_limited",
                  limit == RL_AUTH
                      ? "too many failed authentications; retry after "
                        "Retry-After seconds"
                      : "too many revocations; retry after Retry-After "
                        "seconds",
                  NULL);
    og_http_log_str(r, "limited_by", by == BY_PRINCIPAL ? "principal"
                                                        : "source");
    r->retry_after = wait;
    og_metrics_rate_limited(limit, by);
    return -1;
}

/* One token of kind from the bucket of key (take) or only a look (!take):
 * 0, or the seconds until a token. */
static int rl_use(og_http_req *r, int kind, int by, const char *key,
                  bool take)
{
    const og_srv_config *c = &r->srv->cfg;
    og_rate rate = kind == RL_AUTH
                       ? (og_rate){c->rl_auth_per_minute, c->rl_auth_burst}
                       : (og_rate){c->rl_revoke_per_minute,
                                   c->rl_revoke_burst};

    return og_ratelimit_use(r->srv->limits, kind * 2 + by, key, rate,
                            og_http_mono_us(), take);
}

/* A failed authentication: one token from the source's bucket and, for a
 * known principal, from its own. */
static void auth_failed(og_http_req *r)
{
    rl_use(r, RL_AUTH, BY_SOURCE, r->source, true);
    if (r->principal)
        rl_use(r, RL_AUTH, BY_PRINCIPAL, r->principal->id, true);
}

/* Authenticates with the Authorization header: 401 without a known key,
 * 403 without one of the route's roles, 429 while the source's (or the
 * principal's) failed-authentication bucket is empty — looked at before
 * the key, so a source past its limit learns nothing more about keys.
 * 0 when the handler may run. */
static int req_authenticate(og_http_req *r, const char *h)
{
    const char *key;
    int wait;

    r->auth = og_srv_auth_current(r->srv);
    if (r->route->roles == 0)
        return 0;
    if ((wait = rl_use(r, RL_AUTH, BY_SOURCE, r->source, false)) > 0)
        return rate_limited(r, RL_AUTH, BY_SOURCE, wait);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        og_http_error(r, 401, "unauthorized",
                      "an API key is required: Authorization: Bearer <key>",
                      NULL);
        auth_failed(r);
        return -1;
    }
    key = h + 7;
    while (*key == ' ')
        key++;
    r->principal = og_srv_auth_lookup(r->auth, key, strlen(key));
    if (!r->principal) {
        og_http_error(r, 401, "unauthorized", "unknown API key", NULL);
        auth_failed(r);
        return -1;
    }
    og_http_log_str(r, "principal", r->principal->id);
    if ((wait = rl_use(r, RL_AUTH, BY_PRINCIPAL, r->principal->id, false)) >
        0) {
        r->principal = NULL;
        return rate_limited(r, RL_AUTH, BY_PRINCIPAL, wait);
    }
    if (!(r->principal->roles & r->route->roles)) {
        og_http_error(r, 403, "forbidden",
                      "this principal's roles do not include this route's",
                      NULL);
        auth_failed(r);
        r->principal = NULL;
        return -1;
    }
    return 0;
}

/* A revocation route (a grant's, a family's: the patterns ending in
 * "/revoke"): one token from the principal's and the source's revocation
 * buckets. 0 when the handler may run. */
static int req_limit_revocation(og_http_req *r)
{
    size_t n = strlen(r->route->pattern);
    int wait;

    if (n < 7 || strcmp(r->route->pattern + n - 7, "/revoke") != 0)
        return 0;
    if ((wait = rl_use(r, RL_REVOKE, BY_PRINCIPAL, r->principal->id, true)) >
        0)
        return rate_limited(r, RL_REVOKE, BY_PRINCIPAL, wait);
    if ((wait = rl_use(r, RL_REVOKE, BY_SOURCE, r->source, true)) > 0)
        return rate_limited(r, RL_REVOKE, BY_SOURCE, wait);
    return 0;
}

/* The member name jansson reports for a duplicated key (its message reads
 * `duplicate object key near '"NAME"'`), copied into buf; NULL when the
 * message has another shape or the name does not fit. */
static const char *duplicate_key(const json_error_t *e, char *buf, size_t len)
{
    const char *p = strstr(e->text, "near '\"");
    size_t n;

    if (!p)
        return NULL;
    p += 7;
    n = strcspn(p, "\"");
    if (n == 0 || n >= len || strcmp(p + n, "\"'") != 0)
        return NULL;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

/* Body checks in order: size, content type, JSON object. 0 when the
 * handler may run. */
static int req_parse_body(og_http_req *r)
{
    json_error_t jerr;

    if (!r->route->body)
        return 0;
    if (r->body_too_large) {
        og_http_error(r, 413, "body_too_large",
                      "request body exceeds max_body_bytes", NULL);
        return -1;
    }
    if (r->body_len == 0 && r->route->optional_body)
        return 0;
    if (!r->json_content_type) {
        og_http_error(r, 415, "unsupported_media_type",
                      "Content-Type must be application/json", NULL);
        return -1;
    }
    r->json = json_loadb(r->body ? r->body : "", r->body_len,
                         JSON_REJECT_DUPLICATES, &jerr);
    if (!r->json && json_error_code(&jerr) == json_error_duplicate_key) {
        char field[OG_ID_MAX + 1];

        og_http_error(r, 400, "malformed_request", "duplicated member",
                      duplicate_key(&jerr, field, sizeof field));
        return -1;
    }
    if (!r->json || !json_is_object(r->json)) {
        og_http_error(r, 400, "malformed_request",
                      r->json ? "body must be a JSON object"
                              : "body is not valid JSON",
                      NULL);
        return -1;
    }
    return 0;
}

int og_http_req_check(og_http_req *r, const char *authorization,
                      bool has_body, uint64_t declared)
{
    if (r->checked)
        return r->status ? 1 : 0;
    r->checked = true;
    if (r->status || !r->route)
        return 1; /* the target or the route refused it */
    if (req_authenticate(r, authorization) != 0 ||
        req_limit_revocation(r) != 0)
        return 1;
    if (declared > r->srv->cfg.max_body_bytes) {
        og_http_error(r, 413, "body_too_large",
                      "request body exceeds max_body_bytes", NULL);
        return 1;
    }
    if (r->route->body && (has_body || !r->route->optional_body) &&
        !r->json_content_type) {
        og_http_error(r, 415, "unsupported_media_type",
                      "Content-Type must be application/json", NULL);
        return 1;
    }
    if (r->param_too_long) {
        og_http_error(r, 400, "malformed_request",
                      "path parameter longer than 128 bytes", NULL);
        return 1;
    }
    return 0;
}

void og_http_req_run(og_http_req *r, const char *authorization)
{
    if (r->responded ||
        og_http_req_check(r, authorization,
                          r->body_len > 0 || r->body_too_large,
                          r->body_len) != 0)
        return;
    if (req_parse_body(r) != 0)
        return;
    r->route->fn(r);
}

/* Writes the request's log line: identifiers and outcomes only. */
static void req_log(og_http_req *r)
{
    json_t *f = r->log;

    r->log = NULL;
    if (!f)
        return;
    json_object_set_new(f, "correlation_id", json_string(r->correlation_id));
    json_object_set_new(f, "method", json_string(r->method));
    json_object_set_new(f, "route", json_string(r->route ? r->route->pattern
                                                         : "(none)"));
    json_object_set_new(f, "status", json_integer(r->status));
    json_object_set_new(f, "duration_us",
                        json_integer(og_http_mono_us() - r->start_us));
    og_log(r->status >= 500 ? OG_LOG_WARN : OG_LOG_INFO, "request", f);
}

/* The reason phrase of status (RFC 9110 §15); "" for one not listed. */
static const char *reason_phrase(unsigned status)
{
    static const struct {
        unsigned status;
        const char *text;
    } t[] = {
        {200, "OK"}, {201, "Created"}, {202, "Accepted"},
        {204, "No Content"}, {400, "Bad Request"}, {401, "Unauthorized"},
        {403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
        {408, "Request Timeout"}, {409, "Conflict"}, {410, "Gone"},
        {412, "Precondition Failed"}, {413, "Content Too Large"},
        {414, "URI Too Long"}, {415, "Unsupported Media Type"},
        {417, "Expectation Failed"}, {422, "Unprocessable Content"},
        {428, "Precondition Required"}, {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {500, "Internal Server Error"}, {501, "Not Implemented"},
        {502, "Bad Gateway"}, {503, "Service Unavailable"},
        {504, "Gateway Timeout"}, {505, "HTTP Version Not Supported"},
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].status == status)
            return t[i].text;
    return "";
}

char *og_http_req_render(og_http_req *r, bool close, size_t *len)
{
    char *body, *out = NULL, head[2048], date[64], num[32];
    size_t blen;
    struct tm tm;
    time_t now = time(NULL);
    int hn;

    if (!r->status)
        og_http_error(r, 500, "internal_error", "no answer", NULL);
    if (r->text) {
        body = r->text;
        r->text = NULL;
    } else {
        body = r->answer ? json_dumps(r->answer, JSON_COMPACT) : NULL;
        if (!body) {
            body = strdup("{\"error\":\"internal_error\",\"message\":"
                          "\"internal error\"}");
            r->status = 500;
        }
        if (!body)
            return NULL;
    }
    blen = strlen(body);
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    num[0] = '\0';
    if (r->retry_after > 0)
        snprintf(num, sizeof num, "Retry-After: %d\r\n", r->retry_after);
    hn = snprintf(head, sizeof head,
                  "HTTP/1.1 %u %s\r\n"
                  "Date: %s\r\n"
                  "Content-Type: %s\r\n"
                  "Content-Length: %zu\r\n"
                  "X-Request-Id: %s\r\n"
                  "Cache-Control: no-store\r\n"
                  "%s%s%s%s%s%s"
                  "%s\r\n",
                  r->status, reason_phrase(r->status), date,
                  r->text_type ? r->text_type : "application/json", blen,
                  r->correlation_id,
                  r->status == 401 ? "WWW-Authenticate: Bearer\r\n" : "",
                  r->allow ? "Allow: " : "", r->allow ? r->allow : "",
                  r->allow ? "\r\n" : "", num,
                  r->extra_headers ? r->extra_headers : "",
                  close ? "Connection: close\r\n" : "");
    if (hn > 0 && (size_t)hn < sizeof head &&
        (out = malloc((size_t)hn + blen + 1))) {
        memcpy(out, head, (size_t)hn);
        memcpy(out + hn, body, blen + 1);
        *len = (size_t)hn + blen;
    }
    answer_free(body); /* it may carry a credential */
    og_metrics_response(r->status);
    if (close)
        og_http_log_str(r, "connection", "close");
    req_log(r);
    r->responded = true;
    return out;
}

void og_http_answer_free(char *text, size_t len)
{
    if (text) {
        sodium_memzero(text, len);
        free(text);
    }
}
