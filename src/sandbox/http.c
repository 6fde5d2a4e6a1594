/*
 * http.c — the sandbox's libmicrohttpd edge: routing, headers and query,
 * the body cap, content type, JSON parsing, bearer authentication, the
 * answer, the request's log line — and, for the drop fault, closing the
 * connection without any answer.
 *
 * libmicrohttpd calls the access handler several times per request (its
 * "two-call pattern"): the first call only announces the request (we
 * capture headers and query there), later calls deliver the body, and the
 * last (upload size 0) asks for the response. Every answer is queued on
 * the last call; answering on the first would lose keep-alive for requests
 * with a body.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so
 * a request sleeping in a delay fault or the race gap holds only its own
 * connection, and concurrent creates reach the store concurrently.
 *
 * Order of checks, each answering when it fails (docs/sandbox.md):
 * route (404/405) -> Authorization (401) -> body size (413) -> Content-Type
 * (415) -> JSON object (400 invalid_json) -> the handler's own checks. A
 * form route (/oauth/token) skips the JSON step: its handler parses the
 * form, so that every refusal of it has RFC 6749's shape.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <sodium.h>

#include "sandbox.h"

#define ARGS_MAX 8            /* query parameters per request */
#define ARG_VALUE_MAX 1024    /* bytes of one query value */
#define CONNECTIONS_MAX 256
#define IDLE_TIMEOUT_S 60

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ===========================================================================
 * Answers
 * ========================================================================= */
void og_sbx_answer(og_sbx_req *r, unsigned status, json_t *body)
{
    json_decref(r->answer);
    r->answer = body;
    r->status = status;
}

void og_sbx_fail(og_sbx_req *r, og_sbx_code c, const char *field)
{
    og_sbx_answer(r, og_sbx_code_status(c), og_sbx_error_json(c, field));
    og_sbx_log_str(r, "error", og_sbx_code_name(c));
    if (field && field[0])
        og_sbx_log_str(r, "field", field);
}

void og_sbx_log_str(og_sbx_req *r, const char *key, const char *value)
{
    if (value && r->log)
        json_object_set_new(r->log, key, json_string(value));
}

void og_sbx_log_int(og_sbx_req *r, const char *key, int64_t value)
{
    if (r->log)
        json_object_set_new(r->log, key, json_integer(value));
}

/* ===========================================================================
 * The first call: route, headers, query.
 * ========================================================================= */

/* 1 when path matches pattern: byte for byte, except that a "{id}"
 * segment of pattern matches one segment of 1..OG_SBX_PATH_ARG_MAX bytes,
 * copied to arg (which is left alone otherwise). */
static bool path_match(const char *pattern, const char *path,
                       char arg[OG_SBX_PATH_ARG_MAX + 1])
{
    const char *hole = strstr(pattern, "{id}");
    size_t pre, n;

    if (!hole)
        return strcmp(pattern, path) == 0;
    pre = (size_t)(hole - pattern);
    if (strncmp(pattern, path, pre) != 0)
        return false;
    n = strcspn(path + pre, "/");
    if (n == 0 || n > OG_SBX_PATH_ARG_MAX ||
        strcmp(hole + 4, path + pre + n) != 0)
        return false;
    memcpy(arg, path + pre, n);
    arg[n] = '\0';
    return true;
}

/* Finds the route for method and path; control routes exist only with
 * --control. No match: 404, or 405 with every method the path has. */
static void route_find(og_sbx_req *r)
{
    size_t used = 0;

    for (size_t i = 0; i < r->srv->n_routes; i++) {
        const og_sbx_route *rt = &r->srv->routes[i];

        if ((rt->control && !r->srv->cfg.control) ||
            !path_match(rt->path, r->path, r->path_id))
            continue;
        if (strcmp(rt->method, r->method) == 0) {
            r->route = rt;
            return;
        }
        used += (size_t)snprintf(r->allow + used, sizeof r->allow - used,
                                 "%s%s", used ? ", " : "", rt->method);
        if (used >= sizeof r->allow)
            used = sizeof r->allow - 1;
    }
    og_sbx_fail(r, r->allow[0] ? OG_SBX_C_METHOD_NOT_ALLOWED
                               : OG_SBX_C_NOT_FOUND,
                NULL);
}

/* Counts Idempotency-Key headers and keeps the value of the first. */
static enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind,
                                 const char *key, size_t key_size,
                                 const char *value, size_t value_size)
{
    og_sbx_req *r = cls;

    (void)kind;
    (void)key_size;
    if (strcasecmp(key, "Idempotency-Key") != 0)
        return MHD_YES;
    if (r->idem_key_count++ > 0)
        return MHD_YES;
    if (!value || value_size > OG_SBX_KEY_MAX || strlen(value) != value_size)
        r->idem_key_bad = true; /* too long, or a NUL inside */
    else
        memcpy(r->idem_key, value, value_size + 1);
    return MHD_YES;
}

/* Marks the query bad, naming the parameter at fault; bytes outside
 * visible ASCII become '?', so the name is safe in JSON and logs. */
static enum MHD_Result arg_bad(og_sbx_req *r, const char *name)
{
    size_t i;

    r->args_bad = true;
    for (i = 0; name[i] && i + 1 < sizeof r->args_bad_name; i++)
        r->args_bad_name[i] =
            name[i] > 0x20 && name[i] < 0x7f ? name[i] : '?';
    r->args_bad_name[i] = '\0';
    return MHD_NO; /* stops the iteration */
}

/* Collects query parameters into r->args: bounded in count and size,
 * refusing repeats and NULs (libmicrohttpd has URL-decoded them). */
static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind,
                              const char *key, size_t key_size,
                              const char *value, size_t value_size)
{
    og_sbx_req *r = cls;

    (void)kind;
    if (!value)
        value = "";
    if (strlen(key) != key_size || strlen(value) != value_size ||
        value_size > ARG_VALUE_MAX || json_object_size(r->args) >= ARGS_MAX ||
        json_object_get(r->args, key))
        return arg_bad(r, key);
    if (json_object_set_new(r->args, key, json_stringn(value, value_size)))
        return arg_bad(r, key); /* out of memory, or not UTF-8 */
    return MHD_YES;
}

/* The media type ct names is want (parameters such as ";charset=utf-8"
 * allowed). */
static bool is_type(const char *ct, const char *want)
{
    size_t n, len = strlen(want);

    if (!ct)
        return false;
    n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    return n == len && strncasecmp(ct, want, len) == 0;
}

/* A new request for the first call; NULL on out of memory. */
static og_sbx_req *req_begin(og_sbx_srv *srv, struct MHD_Connection *c,
                             const char *method, const char *url)
{
    og_sbx_req *r = calloc(1, sizeof *r);
    const char *ct;

    if (!r)
        return NULL;
    r->srv = srv;
    r->method = method;
    r->start_us = mono_us();
    r->log = json_object();
    r->args = json_object();
    if (!r->log || !r->args) {
        json_decref(r->log);
        json_decref(r->args);
        free(r);
        return NULL;
    }
    if ((size_t)snprintf(r->path, sizeof r->path, "%s", url) >= sizeof r->path)
        r->path[0] = '\0'; /* an over-long path matches no route */
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, on_header, r);
    MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, on_arg, r);
    ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_TYPE);
    r->json_content_type = is_type(ct, "application/json");
    r->form_content_type = is_type(ct, "application/x-www-form-urlencoded");
    atomic_fetch_add(&srv->inflight, 1);
    route_find(r);
    return r;
}

/* Frees r; the last request to finish wakes a draining main thread. */
static void req_end(og_sbx_req *r)
{
    og_sbx_srv *srv = r->srv;

    json_decref(r->json);
    json_decref(r->answer);
    json_decref(r->log);
    json_decref(r->args);
    free(r->body);
    free(r);
    if (atomic_fetch_sub(&srv->inflight, 1) == 1) {
        pthread_mutex_lock(&srv->drain_mu);
        pthread_cond_broadcast(&srv->drain_cv);
        pthread_mutex_unlock(&srv->drain_mu);
    }
}

/* ===========================================================================
 * The body and the checks before the handler.
 * ========================================================================= */

/* Appends body bytes up to OG_SBX_BODY_MAX; past it (or out of memory)
 * the body is dropped and the request answered 413, while the rest is
 * read and discarded so the connection stays usable. */
static void req_body(og_sbx_req *r, const char *data, size_t n)
{
    if (r->body_too_large || !r->route || !r->route->body)
        return;
    if (r->body_len + n > OG_SBX_BODY_MAX) {
        r->body_too_large = true;
        return;
    }
    if (r->body_len + n + 1 > r->body_cap) {
        size_t want = r->body_cap ? 2 * r->body_cap : 1024;
        char *nb;

        while (want < r->body_len + n + 1)
            want *= 2;
        if (want > OG_SBX_BODY_MAX + 1)
            want = OG_SBX_BODY_MAX + 1;
        if (!(nb = realloc(r->body, want))) {
            r->body_too_large = true;
            return;
        }
        r->body = nb;
        r->body_cap = want;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
}

/* Bearer authentication against SHA-256 of the configured key, compared
 * in constant time. The presented key is never logged or kept. */
static bool authorized(const og_sbx_srv *srv, const char *h)
{
    unsigned char got[OG_SBX_API_KEY_HASH];
    const char *key;
    bool ok;

    if (!srv->auth_required)
        return true;
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    for (key = h + 7; *key == ' '; key++)
        ;
    crypto_hash_sha256(got, (const unsigned char *)key, strlen(key));
    ok = sodium_memcmp(got, srv->api_key_hash, sizeof got) == 0;
    sodium_memzero(got, sizeof got);
    return ok;
}

/* The member jansson names in a duplicate-key error ("... near '"NAME"'"),
 * into buf; "" when the message has another shape. */
static const char *duplicate_member(const json_error_t *e, char *buf,
                                    size_t len)
{
    const char *p = strstr(e->text, "near '\"");
    size_t n;

    buf[0] = '\0';
    if (!p)
        return buf;
    p += 7;
    n = strcspn(p, "\"");
    if (n > 0 && n < len && strcmp(p + n, "\"'") == 0) {
        memcpy(buf, p, n);
        buf[n] = '\0';
    }
    return buf;
}

/* Size, content type and JSON object checks. 0 when the handler may run. */
static int req_parse_body(og_sbx_req *r)
{
    json_error_t jerr;
    char name[80];

    if (!r->route->body)
        return 0;
    if (r->body_too_large)
        return og_sbx_fail(r, OG_SBX_C_BODY_TOO_LARGE, NULL), -1;
    if (r->body_len == 0 && r->route->optional_body)
        return 0;
    if (r->route->form) /* the handler parses it (RFC 6749 errors) */
        return r->form_content_type
                   ? 0
                   : (og_sbx_fail(r, OG_SBX_C_UNSUPPORTED_MEDIA_TYPE, NULL),
                      -1);
    if (!r->json_content_type)
        return og_sbx_fail(r, OG_SBX_C_UNSUPPORTED_MEDIA_TYPE, NULL), -1;
    r->json = json_loadb(r->body ? r->body : "", r->body_len,
                         JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(r->json)) {
        og_sbx_fail(r, OG_SBX_C_INVALID_JSON,
                    !r->json && json_error_code(&jerr) ==
                                    json_error_duplicate_key
                        ? duplicate_member(&jerr, name, sizeof name)
                        : NULL);
        return -1;
    }
    return 0;
}

/* Runs the checks and the handler: the answer is then in r (or r->drop). */
static void req_run(og_sbx_req *r, const char *authorization)
{
    if (!r->route)
        return; /* 404/405 answered when routing */
    if (!authorized(r->srv, authorization)) {
        og_sbx_fail(r, OG_SBX_C_UNAUTHORIZED, NULL);
        return;
    }
    if (req_parse_body(r) != 0)
        return;
    r->route->fn(r);
}

/* ===========================================================================
 * The answer
 * ========================================================================= */

/* Writes the request's log line: identifiers and outcomes only. */
static void req_log(og_sbx_req *r)
{
    json_t *f = r->log;

    r->log = NULL;
    if (!f)
        return;
    json_object_set_new(f, "method", json_string(r->method));
    json_object_set_new(f, "route",
                        json_string(r->route ? r->route->path : "(none)"));
    json_object_set_new(f, "status", json_integer(r->drop ? 0 : r->status));
    if (r->drop)
        json_object_set_new(f, "dropped", json_true());
    json_object_set_new(f, "duration_us",
                        json_integer(mono_us() - r->start_us));
    og_sbx_log(r->status >= 500 ? OG_SBX_LOG_WARN : OG_SBX_LOG_INFO,
               "request", f);
}

/* The answer's headers beyond Content-Type. */
static void add_headers(og_sbx_req *r, struct MHD_Response *resp)
{
    char num[16];

    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->status == 401)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                "Bearer");
    if (r->status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
    if (r->retry_after > 0) {
        snprintf(num, sizeof num, "%d", r->retry_after);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
    }
    if (r->replayed)
        MHD_add_response_header(resp, "Idempotent-Replayed", "true");
    if (atomic_load(&r->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* Queues the answer in r. MHD_NO (the connection closes) when no answer
 * can be built. */
static enum MHD_Result req_respond(og_sbx_req *r, struct MHD_Connection *c)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;
    char *text = NULL;

    if (!r->status || !r->answer)
        og_sbx_fail(r, OG_SBX_C_INTERNAL, NULL);
    if (r->answer)
        text = json_dumps(r->answer, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        r->status = 500;
        if (!(text = strdup("{\"error\":\"internal\"}")))
            return MHD_NO;
    }
    resp = MHD_create_response_from_buffer(strlen(text), text,
                                           MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "application/json");
    add_headers(r, resp);
    ret = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    req_log(r);
    r->responded = true;
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    og_sbx_req *r = *con_cls;

    (void)version;
    if (!r) {
        /* First call: announce only (two-call pattern, see top). */
        if (!(r = req_begin(cls, c, method, url)))
            return MHD_NO;
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        req_body(r, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->responded)
        return MHD_YES;
    req_run(r, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                           MHD_HTTP_HEADER_AUTHORIZATION));
    if (r->drop) {
        /* The drop fault: the effect is committed; returning MHD_NO closes
         * the connection with no status line, as a crash or a cut network
         * would. */
        req_log(r);
        r->responded = true;
        return MHD_NO;
    }
    return req_respond(r, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    if (*con_cls) {
        req_end(*con_cls);
        *con_cls = NULL;
    }
}

/* libmicrohttpd's diagnostics as log lines (its format, our sink). */
__attribute__((format(printf, 2, 0)))
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];

    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    og_sbx_log(OG_SBX_LOG_WARN, "http_library",
               json_pack("{s:s}", "message", msg));
}

/* ===========================================================================
 * Daemon
 * ========================================================================= */

/* cfg's address into ss; MHD_USE_IPv6 added to *flags for IPv6. */
static int listen_addr(const og_sbx_config *cfg, struct sockaddr_storage *ss,
                       unsigned *flags)
{
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof *ss);
    if (inet_pton(AF_INET, cfg->listen_host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)cfg->listen_port);
        return 0;
    }
    if (inet_pton(AF_INET6, cfg->listen_host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)cfg->listen_port);
        *flags |= MHD_USE_IPv6;
        return 0;
    }
    return -1;
}

int og_sbx_http_start(og_sbx_srv *srv, struct MHD_Daemon **out, int *port,
                      char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;

    if (listen_addr(&srv->cfg, &ss, &flags) != 0) {
        snprintf(err, errlen, "--listen: %s is not an IP address",
                 srv->cfg.listen_host);
        return -1;
    }
    d = MHD_start_daemon(
        flags, (uint16_t)srv->cfg.listen_port, NULL, NULL, on_request, srv,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTIONS_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "--listen: cannot listen on %s:%d: %s",
                 srv->cfg.listen_host, srv->cfg.listen_port, strerror(errno));
        return -1;
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : srv->cfg.listen_port;
    *out = d;
    return 0;
}

void og_sbx_http_quiesce(struct MHD_Daemon *d)
{
    MHD_socket fd = MHD_quiesce_daemon(d);

    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void og_sbx_http_stop(struct MHD_Daemon *d)
{
    if (d)
        MHD_stop_daemon(d);
}
