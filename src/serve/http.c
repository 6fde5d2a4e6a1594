/*
 * http.c — the libmicrohttpd edge. Everything HTTP-shaped happens here:
 * routing, the body cap, content types, bearer authentication, correlation
 * ids, the request's log line and metrics. Handlers (handlers.c) see a
 * parsed, authenticated og_http_req and set an answer.
 *
 * libmicrohttpd calls the access handler several times per request (its
 * "two-call pattern"): the first call only announces the request, later
 * calls deliver the body, the last (upload size 0) asks for the response.
 * Answering on the first call would lose keep-alive for requests with a
 * body, so every answer is queued on the last call.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION).
 * Handlers block on the store; a thread per connection lets concurrent
 * requests reach the store concurrently (where SQLite's group commit and
 * PostgreSQL's pool turn concurrency into throughput) without an event loop
 * of our own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <sodium.h>

#include "http.h"

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
 * response). Also libmicrohttpd's free callback for a queued answer. */
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
    if (!r->conn)
        return NULL;
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
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

og_http_req *og_http_req_begin(og_srv *srv, const char *method,
                               const char *url, const char *request_id,
                               const char *content_type)
{
    og_http_req *r = calloc(1, sizeof *r);
    const char *ct = content_type;
    unsigned char rnd[12];

    if (!r)
        return NULL;
    r->srv = srv;
    r->method = method;
    r->start_us = og_http_mono_us();
    r->log = json_object();
    if ((size_t)snprintf(r->path, sizeof r->path, "%s", url) >=
        sizeof r->path)
        r->path[0] = '\0'; /* an over-long path matches no route */

    if (request_id && header_id_ok(request_id)) {
        snprintf(r->correlation_id, sizeof r->correlation_id, "%s",
                 request_id);
    } else {
        randombytes_buf(rnd, sizeof rnd);
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
    if (r->body) {
        sodium_memzero(r->body, r->body_cap); /* it may hold a token */
        free(r->body);
    }
    og_srv_auth_unref(r->auth);
    free(r);
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

/* Authenticates with the Authorization header: 401 without a known key,
 * 403 without one of the route's roles. 0 when the handler may run. */
static int req_authenticate(og_http_req *r, const char *h)
{
    const char *key;

    r->auth = og_srv_auth_current(r->srv);
    if (r->route->roles == 0)
        return 0;
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        og_http_error(r, 401, "unauthorized",
                      "an API key is required: Authorization: Bearer <key>",
                      NULL);
        return -1;
    }
    key = h + 7;
    while (*key == ' ')
        key++;
    r->principal = og_srv_auth_lookup(r->auth, key, strlen(key));
    if (!r->principal) {
        og_http_error(r, 401, "unauthorized", "unknown API key", NULL);
        return -1;
    }
    og_http_log_str(r, "principal", r->principal->id);
    if (!(r->principal->roles & r->route->roles)) {
        og_http_error(r, 403, "forbidden",
                      "this principal's roles do not include this route's",
                      NULL);
        return -1;
    }
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

void og_http_req_run(og_http_req *r, const char *authorization)
{
    if (r->responded || !r->route)
        return;
    if (req_authenticate(r, authorization) != 0 || req_parse_body(r) != 0)
        return;
    if (r->param_too_long)
        og_http_error(r, 400, "malformed_request",
                      "path parameter longer than 128 bytes", NULL);
    else
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

/* Queues the answer built in r (og_http_req_answer's text). */
static enum MHD_Result req_respond(og_http_req *r, struct MHD_Connection *c)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    char *text;
    size_t len;
    char num[16];

    if (!r->status) {
        og_http_error(r, 500, "internal_error", "no answer", NULL);
    }
    if (r->text) {
        text = r->text;
        r->text = NULL;
        len = strlen(text);
    } else {
        text = r->answer ? json_dumps(r->answer, JSON_COMPACT) : NULL;
        if (!text) {
            text = strdup("{\"error\":\"internal_error\"}");
            r->status = 500;
        }
        if (!text)
            return MHD_NO;
        len = strlen(text);
    }
    /* Wiped when libmicrohttpd is done with it. */
    resp = MHD_create_response_from_buffer_with_free_callback(len, text,
                                                              answer_free);
    if (!resp) {
        answer_free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->text_type ? r->text_type : "application/json");
    MHD_add_response_header(resp, "X-Request-Id", r->correlation_id);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer");
    if (r->allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->retry_after > 0) {
        snprintf(num, sizeof num, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
    }
    if (atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    og_metrics_response(r->status);
    req_log(r);
    r->responded = true;
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    og_srv *srv = cls;
    og_http_req *r = *con_cls;

    (void)version;
    if (!r) {
        /* First call: announce only (two-call pattern, see top). */
        r = og_http_req_begin(
            srv, method, url,
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id"),
            MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                        MHD_HTTP_HEADER_CONTENT_TYPE));
        if (!r)
            return MHD_NO;
        r->conn = c;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        og_http_req_body(r, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->responded)
        return MHD_YES;
    og_http_req_run(r, MHD_lookup_connection_value(
                           c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
    return req_respond(r, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    if (*con_cls) {
        og_http_req_end(*con_cls);
        *con_cls = NULL;
    }
}

/* libmicrohttpd's own diagnostics, as log lines. They carry no request
 * data beyond what libmicrohttpd prints (addresses, protocol errors). The
 * format comes from the library, as a printf-style logger's must. */
__attribute__((format(printf, 2, 0)))
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];

    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    og_log(OG_LOG_WARN, "http_library", json_pack("{s:s}", "message", msg));
}

int og_http_start(og_srv *srv, struct MHD_Daemon **out, int *port, char *err,
                  size_t errlen)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;

    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, srv->cfg.listen_host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)srv->cfg.listen_port);
    } else if (inet_pton(AF_INET6, srv->cfg.listen_host, &v6->sin6_addr) ==
               1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)srv->cfg.listen_port);
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "listen: %s is not an IP address",
                 srv->cfg.listen_host);
        return -1;
    }
    d = MHD_start_daemon(
        flags, (uint16_t)srv->cfg.listen_port, NULL, NULL, on_request, srv,
        /* First, so every message of the library goes through it. */
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "listen: cannot listen on %s:%d: %s",
                 srv->cfg.listen_host, srv->cfg.listen_port, strerror(errno));
        return -1;
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : srv->cfg.listen_port;
    *out = d;
    return 0;
}

void og_http_quiesce(struct MHD_Daemon *d)
{
    MHD_socket fd = MHD_quiesce_daemon(d);

    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void og_http_stop(struct MHD_Daemon *d)
{
    if (d)
        MHD_stop_daemon(d);
}
