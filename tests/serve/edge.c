/*
 * edge.c — the HTTP edge over raw sockets (serve_test's edge group): the
 * bytes a test sends reach the server exactly as written, with no HTTP
 * client to normalize them. Each case asserts the status, the JSON error
 * body (with a Content-Length that frames it, sent once) and whether the
 * server closed the connection. docs/http.md, "Framing and early
 * refusals", states the rules; src/serve/wire.h (W1-W10) and
 * src/serve/edge.c (HE1-HE5) implement them.
 */
#define _GNU_SOURCE /* strcasestr, vasprintf */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "harness.h"
#include "cases.h"

#define QUIET_MS 2000 /* no byte for this long: the server keeps it open */

/* What came back on one connection. */
typedef struct raw {
    char *data;
    size_t len;
    bool closed;      /* the server closed it (end of stream or reset) */
    int responses;    /* final responses, each framed by Content-Length */
    int continues;    /* 100 Continue interim responses */
    bool framed;      /* every response parsed and no byte left over */
    int status[8];
    json_t *json[8];  /* each response's body, when JSON */
    char head[8][1024];
} raw;

static void raw_free(raw *r)
{
    free(r->data);
    for (int i = 0; i < 8; i++)
        json_decref(r->json[i]);
    memset(r, 0, sizeof *r);
}

static int raw_connect(const srv *s)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)s->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    assert_true(fd >= 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect to port %d: %s", s->port, strerror(errno));
    return fd;
}

static void raw_send(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

        if (k <= 0)
            return; /* the server closed: what it answered is still read */
        p += k;
        n -= (size_t)k;
    }
}

/* Splits r->data into responses. */
static void raw_parse(raw *r)
{
    size_t at = 0;

    r->framed = true;
    while (at < r->len && r->responses < 8) {
        char *h = r->data + at, *end = strstr(h, "\r\n\r\n"), *cl;
        size_t hl, bl = 0;
        int st;

        if (!end || sscanf(h, "HTTP/1.1 %d ", &st) != 1) {
            r->framed = false;
            return;
        }
        hl = (size_t)(end - h) + 4;
        if (st == 100) {
            r->continues++;
            at += hl;
            continue;
        }
        snprintf(r->head[r->responses], sizeof r->head[0], "%.*s", (int)hl, h);
        cl = strcasestr(r->head[r->responses], "\r\nContent-Length: ");
        if (!cl || sscanf(cl + 18, "%zu", &bl) != 1 || at + hl + bl > r->len) {
            r->framed = false;
            return;
        }
        r->status[r->responses] = st;
        r->json[r->responses] = json_loadb(h + hl, bl, 0, NULL);
        r->responses++;
        at += hl + bl;
    }
    if (at != r->len)
        r->framed = false;
}

/* Reads until the server closes or stays quiet for quiet_ms. */
static void raw_read(int fd, raw *r, int quiet_ms)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char buf[8192];
        ssize_t n;

        if (poll(&p, 1, quiet_ms) <= 0)
            break;
        n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            r->closed = true;
            break;
        }
        r->data = realloc(r->data, r->len + (size_t)n + 1);
        assert_non_null(r->data);
        memcpy(r->data + r->len, buf, (size_t)n);
        r->len += (size_t)n;
        r->data[r->len] = '\0';
    }
    raw_parse(r);
}

/* One connection: sends req (n bytes; half-closes after when shut), reads
 * what comes back. */
static void xchg(const srv *s, const char *req, size_t n, bool shut, raw *r)
{
    int fd = raw_connect(s);

    memset(r, 0, sizeof *r);
    raw_send(fd, req, n);
    if (shut)
        shutdown(fd, SHUT_WR);
    raw_read(fd, r, QUIET_MS);
    close(fd);
}

#define XCHG(s, lit, r) xchg((s), (lit), sizeof(lit) - 1, false, (r))

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    char *out = NULL;

    va_start(ap, f);
    assert_true(vasprintf(&out, f, ap) > 0);
    va_end(ap);
    return out;
}

/* One request from the loopback address from (127.0.0.2, ...: a source
 * address of its own for the server's per-source limits); the first
 * answer's status, and its error code into code. */
static int from_addr(const srv *s, const char *from, const char *req,
                     char *code, size_t codelen)
{
    struct sockaddr_in src = {.sin_family = AF_INET};
    struct sockaddr_in dst = {.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)s->port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), st;
    raw r;

    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, from, &src.sin_addr), 1);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0)
        fail_msg("from %s: %s", from, strerror(errno));
    memset(&r, 0, sizeof r);
    raw_send(fd, req, strlen(req));
    raw_read(fd, &r, QUIET_MS);
    close(fd);
    if (r.responses < 1)
        fail_msg("from %s: no answer:\n%s", from, r.data ? r.data : "");
    st = r.status[0];
    snprintf(code, codelen, "%s",
             jstr(r.json[0], "error") ? jstr(r.json[0], "error") : "");
    if (st == 429 && !strcasestr(r.head[0], "\r\nRetry-After: "))
        fail_msg("429 without Retry-After:\n%s", r.head[0]);
    raw_free(&r);
    return st;
}

/* A request with key (NULL: none), Connection: close; a body {} on POST. */
static char *keyed(const char *method, const char *path, const char *key)
{
    bool post = strcmp(method, "POST") == 0;

    return fmt("%s %s HTTP/1.1\r\nHost: x\r\n%s%s%s%s"
               "Connection: close\r\n\r\n%s",
               method, path, key ? "Authorization: Bearer " : "",
               key ? key : "", key ? "\r\n" : "",
               post ? "Content-Type: application/json\r\n"
                      "Content-Length: 2\r\n"
                    : "",
               post ? "{}" : "");
}

#define ASSERT_FROM(s, from, method, path, key, status, err)                   \
    do {                                                                       \
        char *q_ = keyed((method), (path), (key)), c_[64];                     \
        int st_ = from_addr((s), (from), q_, c_, sizeof c_);                   \
        free(q_);                                                              \
        if (st_ != (status) || ((err) && strcmp(c_, (err) ? (err) : "")))      \
            fail_msg("%s %s from %s: expected %d %s, got %d %s", (method),     \
                     (path), (from), (status), (err) ? (err) : "", st_, c_);   \
    } while (0)

/* The rule every refusal keeps: exactly one response, framed by its
 * Content-Length, JSON {"error": code, "message": ...} with status, an
 * X-Request-Id, and the connection closed (closed) or kept (!closed). */
static void expect_one(const raw *r, int status, const char *code,
                       bool closed, const char *what)
{
    const char *e = r->responses ? jstr(r->json[0], "error") : NULL;

    if (!r->framed || r->responses != 1 || r->status[0] != status ||
        (code && (!e || strcmp(e, code) != 0)) ||
        (status >= 400 && (!e || !jstr(r->json[0], "message"))) ||
        !strcasestr(r->head[0], "\r\nContent-Type: application/json") ||
        !strcasestr(r->head[0], "\r\nX-Request-Id: ") ||
        r->closed != closed)
        fail_msg("%s: expected one JSON %d %s and the connection %s; got %d "
                 "response(s) (framed %d), first %d %s, connection %s:\n%.1500s",
                 what, status, code ? code : "", closed ? "closed" : "open",
                 r->responses, r->framed, r->responses ? r->status[0] : 0,
                 e ? e : "(no error member)",
                 r->closed ? "closed" : "open", r->data ? r->data : "");
}

/* A server on a fresh site whose http and rate_limit objects are as given
 * (NULL: defaults). */
static srv *edge_server(json_t *http, json_t *rate_limit)
{
    site *st = site_new("edge", false, 0, true);
    srv *s;

    assert_non_null(st);
    if (http)
        json_object_set_new(st->conf, "http", http);
    if (rate_limit)
        json_object_set_new(st->conf, "rate_limit", rate_limit);
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    return s;
}

/* ===========================================================================
 * Framing (RFC 9112), before any handler
 * ========================================================================= */

void repeated_content_length_is_400_and_the_smuggled_request_is_not_served(
    void **state)
{
    char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\nContent-Length: 0\r\n"
                    "Content-Length: 53\r\n\r\n"
                    "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    "\r\n",
                    KEY(P_ISSUER));
    raw r;

    (void)state;
    xchg(g_a, req, strlen(req), false, &r);
    expect_one(&r, 400, "bad_framing", true, "CL.CL (the issue's repro)");
    raw_free(&r);
    free(req);
    XCHG(g_a, "POST /v1/grants HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
              "Content-Length: 5\r\n\r\n{}{}{", &r);
    expect_one(&r, 400, "bad_framing", true, "equal repeated Content-Length");
    raw_free(&r);
    XCHG(g_a, "POST /v1/grants HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n"
              "\r\n{}{}{", &r);
    expect_one(&r, 400, "bad_framing", true, "listed Content-Length");
    raw_free(&r);
}

void content_length_minus_5_is_one_json_400_sent_once(void **state)
{
    static const char *const bad[] = {"-5", "+5", "0x10", "5 5", "abc",
                                      "99999999999999999999", ""};
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: %s\r\n\r\n",
                        bad[i]);
        char what[64];

        xchg(g_a, req, strlen(req), false, &r);
        snprintf(what, sizeof what, "Content-Length: %s", bad[i]);
        expect_one(&r, 400, "bad_framing", true, what);
        raw_free(&r);
        free(req);
    }
}

/* CL.TE and TE.CL: whichever a proxy in front believes, the request is
 * refused and nothing after it is read as a request. */
void chunked_with_content_length_is_400_and_the_pipelined_request_is_not_served(
    void **state)
{
    static const char *const reqs[] = {
        /* CL.TE */
        "POST /v1/grants HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n"
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        /* TE.CL */
        "POST /v1/grants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
        "Content-Length: 3\r\n\r\n2c\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n"
        "\r\n\r\n0\r\n\r\n",
    };
    raw r;

    (void)state;
    for (size_t i = 0; i < 2; i++) {
        xchg(g_a, reqs[i], strlen(reqs[i]), false, &r);
        expect_one(&r, 400, "bad_framing", true, i ? "TE.CL" : "CL.TE");
        raw_free(&r);
    }
}

void unknown_transfer_encoding_is_501_at_once_and_closes(void **state)
{
    static const char *const te[] = {"gzip", "identity", "xchunked",
                                      "chunked, gzip", "gzip, chunked",
                                      "chunked;q=1"};
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof te / sizeof te[0]; i++) {
        for (int auth = 0; auth < 2; auth++) {
            char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                            "%s%s%s"
                            "Content-Type: application/json\r\n"
                            "Transfer-Encoding: %s\r\n\r\n",
                            auth ? "Authorization: Bearer " : "",
                            auth ? KEY(P_ISSUER) : "", auth ? "\r\n" : "",
                            te[i]);
            char what[96];

            xchg(g_a, req, strlen(req), false, &r);
            snprintf(what, sizeof what, "Transfer-Encoding: %s (%s)", te[i],
                     auth ? "authenticated" : "no key");
            expect_one(&r, 501, "unsupported_transfer_encoding", true, what);
            raw_free(&r);
            free(req);
        }
    }
}

void invalid_chunk_size_is_400_at_once_and_closes(void **state)
{
    static const char *const bodies[] = {
        "fffffffffffffffff\r\n",  /* absurd */
        "zz\r\n",                 /* not hex */
        "-1\r\n",                 /* signed */
        " 5\r\n",                 /* white space */
        "5\n{}{}{\r\n0\r\n\r\n",  /* bare LF */
        "2\r\n{}}\r\n0\r\n\r\n",  /* data longer than its size */
    };
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                        "Authorization: Bearer %s\r\n"
                        "Content-Type: application/json\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n%s",
                        KEY(P_ISSUER), bodies[i]);
        char what[96];

        xchg(g_a, req, strlen(req), false, &r);
        snprintf(what, sizeof what, "chunked body #%zu", i);
        expect_one(&r, 400, "bad_framing", true, what);
        raw_free(&r);
        free(req);
    }
}

/* TE.TE: Transfer-Encoding disguised so that one parser sees it and
 * another does not. Every disguise is refused and closes. */
void obfuscated_transfer_encoding_names_are_refused_and_close(void **state)
{
    static const struct {
        const char *fields;
        int status;
        const char *code;
    } rows[] = {
        {"Transfer-Encoding : chunked\r\n", 400, "malformed_request"},
        {"Transfer-Encoding:\x0b" "chunked\r\n", 400, "malformed_request"},
        {"X: y\r\n Transfer-Encoding: chunked\r\n", 400, "malformed_request"},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n", 501,
         "unsupported_transfer_encoding"},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400,
         "bad_framing"},
        {"Transfer-Encoding: chunked, chunked\r\n", 400, "bad_framing"},
        {"Transfer-Encoding: \"chunked\"\r\n", 501,
         "unsupported_transfer_encoding"},
        {"Transfer-Encoding\r\n", 400, "malformed_request"},
    };
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                        "Content-Length: 4\r\n%s\r\n0\r\n\r\n"
                        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                        rows[i].fields);
        char what[96];

        /* Without Content-Length too: the disguise alone. */
        char *req2 = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n%s\r\n"
                         "0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                         rows[i].fields);

        xchg(g_a, req2, strlen(req2), false, &r);
        snprintf(what, sizeof what, "TE.TE row %zu", i);
        expect_one(&r, rows[i].status, rows[i].code, true, what);
        raw_free(&r);
        xchg(g_a, req, strlen(req), false, &r);
        snprintf(what, sizeof what, "TE.TE row %zu with Content-Length", i);
        /* With Content-Length beside it, every row is a 400: the field
         * line is malformed, or Transfer-Encoding meets Content-Length. */
        expect_one(&r, 400, NULL, true, what);
        raw_free(&r);
        free(req);
        free(req2);
    }
}

void transfer_encoding_in_http10_is_400_and_closes(void **state)
{
    raw r;

    (void)state;
    XCHG(g_a, "POST /v1/grants HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"
              "0\r\n\r\n", &r);
    expect_one(&r, 400, "bad_framing", true, "HTTP/1.0 with chunked");
    raw_free(&r);
}

void http11_without_host_or_with_two_is_400(void **state)
{
    raw r;

    (void)state;
    XCHG(g_a, "GET /healthz HTTP/1.1\r\n\r\n", &r);
    expect_one(&r, 400, "malformed_request", true, "no Host");
    raw_free(&r);
    XCHG(g_a, "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", &r);
    expect_one(&r, 400, "malformed_request", true, "two Hosts");
    raw_free(&r);
    /* HTTP/1.0 needs none. */
    XCHG(g_a, "GET /healthz HTTP/1.0\r\n\r\n", &r);
    expect_one(&r, 200, NULL, true, "HTTP/1.0 without Host");
    raw_free(&r);
}

/* W10: the absolute-form is served as its path (RFC 9112 §3.2.2: a server
 * must accept it); with userinfo it is refused. */
void absolute_form_target_is_served_as_its_path(void **state)
{
    raw r;

    (void)state;
    XCHG(g_a, "GET http://other.example:1/healthz HTTP/1.1\r\nHost: x\r\n"
              "\r\n", &r);
    expect_one(&r, 200, NULL, false, "absolute-form /healthz");
    raw_free(&r);
    XCHG(g_a, "GET http://user@x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    expect_one(&r, 400, "malformed_request", true, "absolute-form, userinfo");
    raw_free(&r);
}

void obs_fold_and_malformed_field_lines_are_400(void **state)
{
    static const char *const reqs[] = {
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A : a\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n",
        "GET /healthz HTTP/1.1\nHost: x\n\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n",
        "GET /healthz  HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        char what[64];

        xchg(g_a, reqs[i], strlen(reqs[i]), false, &r);
        snprintf(what, sizeof what, "malformed head #%zu", i);
        expect_one(&r, 400, "malformed_request", true, what);
        raw_free(&r);
    }
}

/* ===========================================================================
 * Errors the HTTP library raised: one JSON shape, framed once
 * ========================================================================= */

void library_level_errors_are_json_with_one_status_line(void **state)
{
    char *longurl = malloc(8192), *bighead = malloc(20000);
    raw r;

    (void)state;
    snprintf(longurl, 8192, "GET /%04000d HTTP/1.1\r\nHost: x\r\n\r\n", 0);
    xchg(g_a, longurl, strlen(longurl), false, &r);
    expect_one(&r, 414, "uri_too_long", true, "a 4 KB target");
    raw_free(&r);
    snprintf(bighead, 20000, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %0*d"
             "\r\n\r\n", 16000, 0);
    xchg(g_a, bighead, strlen(bighead), false, &r);
    expect_one(&r, 431, "headers_too_large", true, "a 16 KB field");
    raw_free(&r);
    {
        char *many = malloc(8192);
        size_t at = (size_t)snprintf(many, 8192,
                                     "GET /healthz HTTP/1.1\r\nHost: x\r\n");

        for (int i = 0; i < 100; i++)
            at += (size_t)snprintf(many + at, 8192 - at, "X-%d: 1\r\n", i);
        snprintf(many + at, 8192 - at, "\r\n");
        xchg(g_a, many, strlen(many), false, &r);
        expect_one(&r, 431, "headers_too_large", true, "100 fields");
        raw_free(&r);
        free(many);
    }
    XCHG(g_a, "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", &r);
    expect_one(&r, 505, "http_version_not_supported", true, "HTTP/2.0");
    raw_free(&r);
    XCHG(g_a, "GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n", &r);
    expect_one(&r, 505, "http_version_not_supported", true, "HTTP/1.2");
    raw_free(&r);
    XCHG(g_a, "GET /healthz FOO/1.1\r\nHost: x\r\n\r\n", &r);
    expect_one(&r, 400, "malformed_request", true, "no HTTP version");
    raw_free(&r);
    XCHG(g_a, "GET /heal%zzthz HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    expect_one(&r, 400, "malformed_request", false, "a bad percent escape");
    raw_free(&r);
    {
        /* 413 on a chunked body: its size is known only while reading. */
        size_t n = MAX_BODY + 100;
        char *body = malloc(n + 512);
        char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                        "Authorization: Bearer %s\r\n"
                        "Content-Type: application/json\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n%zx\r\n",
                        KEY(P_ISSUER), n);
        size_t rl = strlen(req);

        memcpy(body, req, rl);
        memset(body + rl, ' ', n);
        memcpy(body + rl + n, "\r\n0\r\n\r\n", 7);
        xchg(g_a, body, rl + n + 7, false, &r);
        expect_one(&r, 413, "body_too_large", true, "a chunked body past "
                                                    "max_body_bytes");
        raw_free(&r);
        free(req);
        free(body);
    }
    free(longurl);
    free(bighead);
}

/* ===========================================================================
 * Early refusals: on the head, before the body
 * ========================================================================= */

/* Each declares a body (1 GB, or 16000 bytes) and sends 10 bytes of it:
 * the answer comes without the body, and the connection is closed. */
void early_refusals_are_answered_on_the_head_and_close_without_the_body(
    void **state)
{
    const struct {
        const char *method, *path, *key, *ctype, *length;
        int status;
        const char *code;
    } rows[] = {
        {"POST", "/v1/grants", NULL, "application/json", "1000000000", 401,
         "unauthorized"},
        {"POST", "/v1/grants", "not-a-key", "application/json", "1000000000",
         401, "unauthorized"},
        {"POST", "/v1/grants", KEY(P_AGENT), "application/json", "1000000000",
         403, "forbidden"},
        {"POST", "/v1/nowhere", KEY(P_ISSUER), "application/json",
         "1000000000", 404, "route_not_found"},
        {"PUT", "/v1/grants", KEY(P_ISSUER), "application/json", "1000000000",
         405, "method_not_allowed"},
        {"POST", "/v1/grants", KEY(P_ISSUER), "application/json", "1000000000",
         413, "body_too_large"},
        /* Within max_body_bytes, but not JSON: refused before it comes. */
        {"POST", "/v1/grants", KEY(P_ISSUER), "text/plain", "16000", 415,
         "unsupported_media_type"},
    };
    raw r;

    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *req = fmt("%s %s HTTP/1.1\r\nHost: x\r\n%s%s%s"
                        "Content-Type: %s\r\nContent-Length: %s\r\n"
                        "\r\n{\"a\":1234",
                        rows[i].method, rows[i].path,
                        rows[i].key ? "Authorization: Bearer " : "",
                        rows[i].key ? rows[i].key : "",
                        rows[i].key ? "\r\n" : "", rows[i].ctype,
                        rows[i].length);
        char what[96];

        xchg(g_a, req, strlen(req), false, &r);
        snprintf(what, sizeof what, "%s %s declaring %s bytes", rows[i].method,
                 rows[i].path, rows[i].length);
        expect_one(&r, rows[i].status, rows[i].code, true, what);
        raw_free(&r);
        free(req);
    }
}

void slow_headers_and_slow_bodies_get_408_after_their_deadlines(void **state)
{
    srv *s = edge_server(json_pack("{s:i, s:i}", "header_timeout_ms", 500,
                                   "body_timeout_ms", 500),
                         NULL);
    char *req;
    raw r;
    int fd;

    (void)state;
    /* A head that never ends. */
    fd = raw_connect(s);
    memset(&r, 0, sizeof r);
    raw_send(fd, "GET /healthz HTTP/1.1\r\nHo", 25);
    raw_read(fd, &r, 10000);
    close(fd);
    expect_one(&r, 408, "request_timeout", true, "a head trickling");
    raw_free(&r);
    /* A body that never ends. */
    req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
              "Content-Length: 100\r\n\r\n{\"subject\":",
              KEY(P_ISSUER));
    fd = raw_connect(s);
    memset(&r, 0, sizeof r);
    raw_send(fd, req, strlen(req));
    raw_read(fd, &r, 10000);
    close(fd);
    expect_one(&r, 408, "request_timeout", true, "a body trickling");
    raw_free(&r);
    free(req);
}

void unauthenticated_connections_per_source_are_capped_with_429(void **state)
{
    srv *s = edge_server(json_pack("{s:i}", "max_unauthenticated_per_source",
                                   3),
                         NULL);
    int held[3], fd;
    char *req;
    raw r;

    (void)state;
    for (int i = 0; i < 3; i++)
        held[i] = raw_connect(s);
    fd = raw_connect(s); /* accepted after them: the backlog is in order */
    memset(&r, 0, sizeof r);
    raw_read(fd, &r, 10000);
    close(fd);
    expect_one(&r, 429, "too_many_connections", true, "a fourth connection");
    assert_non_null(strcasestr(r.head[0], "\r\nRetry-After: "));
    raw_free(&r);
    /* A request that authenticates frees its connection's place. */
    req = fmt("GET /v1/operations/op-none HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\n\r\n",
              KEY(P_AGENT));
    raw_send(held[0], req, strlen(req));
    memset(&r, 0, sizeof r);
    raw_read(held[0], &r, 1000);
    assert_int_equal(r.responses, 1);
    assert_false(r.closed);
    raw_free(&r);
    XCHG(s, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
         &r);
    expect_one(&r, 200, NULL, true, "after one authenticated");
    raw_free(&r);
    for (int i = 0; i < 3; i++)
        close(held[i]);
    free(req);
}

void connection_past_max_connections_is_503_retry_later_and_closed(
    void **state)
{
    site *st = site_new("edge", false, 0, true);
    int held[2];
    srv *s;
    raw r;
    int fd;

    (void)state;
    assert_non_null(st);
    json_object_set_new(st->conf, "max_connections", json_integer(2));
    json_object_set_new(st->conf, "pool_size", json_integer(1));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    for (int i = 0; i < 2; i++)
        held[i] = raw_connect(s);
    fd = raw_connect(s); /* accepted after them: the backlog is in order */
    memset(&r, 0, sizeof r);
    raw_read(fd, &r, 10000);
    close(fd);
    expect_one(&r, 503, "retry_later", true, "a third connection");
    assert_non_null(strcasestr(r.head[0], "\r\nRetry-After: "));
    raw_free(&r);
    close(held[0]);
    close(held[1]);
    /* Their threads end when they see the close: served again then. */
    for (int i = 0; i < 300; i++) {
        XCHG(s, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close"
                "\r\n\r\n", &r);
        if (r.responses != 1 || r.status[0] != 503)
            break;
        raw_free(&r);
        t_sleep_ms(100);
    }
    expect_one(&r, 200, NULL, true, "once they closed");
    raw_free(&r);
}

/* 100 Continue only once the head passed every early check; a refusal is
 * the final answer at once. */
void expect_100_continue_is_answered_only_when_the_head_passes(void **state)
{
    char *ok = fmt("POST /v1/grants/revoke HTTP/1.1\r\nHost: x\r\n"
                   "Authorization: Bearer %s\r\n"
                   "Content-Type: application/json\r\n"
                   "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n",
                   KEY(P_REVOKER));
    raw r;
    int fd;

    (void)state;
    fd = raw_connect(g_a);
    memset(&r, 0, sizeof r);
    raw_send(fd, ok, strlen(ok));
    raw_read(fd, &r, 1000); /* the interim answer only */
    assert_int_equal(r.continues, 1);
    assert_int_equal(r.responses, 0);
    raw_free(&r);
    raw_send(fd, "{}", 2);
    raw_read(fd, &r, 1000);
    assert_int_equal(r.responses, 1);
    assert_int_equal(r.status[0], 400); /* the body, read and judged */
    assert_false(r.closed);
    raw_free(&r);
    close(fd);
    free(ok);
    XCHG(g_a, "POST /v1/grants/revoke HTTP/1.1\r\nHost: x\r\n"
              "Content-Type: application/json\r\n"
              "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n", &r);
    expect_one(&r, 401, "unauthorized", true, "no key, Expect");
    assert_int_equal(r.continues, 0);
    raw_free(&r);
}

/* ===========================================================================
 * Keep-alive, pipelining, half-closed connections, chunked bodies
 * ========================================================================= */

void pipelined_requests_are_answered_in_order_on_one_connection(void **state)
{
    char *req = fmt("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET /v1/nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
                    "POST /v1/grants/revoke HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\nContent-Length: 2\r\n"
                    "\r\n{}"
                    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                    KEY(P_REVOKER));
    raw r;

    (void)state;
    xchg(g_a, req, strlen(req), false, &r);
    if (!r.framed || r.responses != 4 || r.closed || r.status[0] != 200 ||
        r.status[1] != 404 || r.status[2] != 400 || r.status[3] != 200)
        fail_msg("expected 200, 404, 400, 200 on an open connection; got "
                 "%d response(s) (%d %d %d %d), %s:\n%.2000s",
                 r.responses, r.status[0], r.status[1], r.status[2],
                 r.status[3], r.closed ? "closed" : "open", r.data);
    raw_free(&r);
    free(req);
}

void half_closed_connection_gets_its_answer_then_closes(void **state)
{
    /* The whole request, then the client's FIN. */
    static const char whole[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char part[] = "GET /healthz HTTP/1.1\r\nHo";
    raw r;

    (void)state;
    xchg(g_a, whole, sizeof whole - 1, true, &r);
    expect_one(&r, 200, NULL, true, "a request then FIN");
    raw_free(&r);
    /* FIN inside the head. */
    xchg(g_a, part, sizeof part - 1, true, &r);
    expect_one(&r, 400, "malformed_request", true, "FIN inside a head");
    raw_free(&r);
}

void chunked_body_is_accepted_and_the_connection_kept(void **state)
{
    json_t *body = grant_request("agent-1", NULL, 300);
    char *text = json_dumps(body, JSON_COMPACT);
    size_t half = strlen(text) / 2;
    char *req = fmt("POST /v1/grants HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"
                    "%zx;ext=1\r\n%.*s\r\n%zx\r\n%s\r\n0\r\nX-T: 1\r\n\r\n"
                    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                    KEY(P_ISSUER), half, (int)half, text,
                    strlen(text) - half, text + half);
    raw r;

    (void)state;
    xchg(g_a, req, strlen(req), false, &r);
    if (!r.framed || r.responses != 2 || r.closed || r.status[0] != 201 ||
        r.status[1] != 200)
        fail_msg("expected 201 then 200 on an open connection; got %d "
                 "response(s) (%d %d), %s:\n%.2000s",
                 r.responses, r.status[0], r.status[1],
                 r.closed ? "closed" : "open", r.data);
    secret_add(jstr(r.json[0], "grant"));
    raw_free(&r);
    free(req);
    free(text);
    json_decref(body);
}

/* ===========================================================================
 * Authorization: repeated, and rate limits
 * ========================================================================= */

void repeated_authorization_is_400(void **state)
{
    char *req = fmt("GET /v1/operations/op-1 HTTP/1.1\r\nHost: x\r\n"
                    "Authorization: Bearer %s\r\n"
                    "Authorization: Bearer %s\r\n\r\n",
                    KEY(P_AGENT), KEY(P_AGENT2));
    raw r;

    (void)state;
    xchg(g_a, req, strlen(req), false, &r);
    expect_one(&r, 400, "malformed_request", true, "two Authorization "
                                                   "fields");
    raw_free(&r);
    free(req);
}

static double metric_of(const srv *s, const char *series)
{
    hres m = {0};
    double v;

    get(&m, s, "/metrics", NULL);
    assert_http(&m, 200);
    v = metric_value(m.body, series);
    hres_free(&m);
    return v;
}

void failed_authentication_is_rate_limited_per_source_with_429(void **state)
{
    srv *s = edge_server(NULL, json_pack("{s:i, s:i}",
                                         "auth_failures_per_minute", 1,
                                         "auth_failures_burst", 3));
    hres h = {0};

    (void)state;
    for (int i = 0; i < 3; i++) {
        get(&h, s, "/v1/operations/op-1", "not-a-key");
        assert_error(&h, 401, "unauthorized");
        hres_free(&h);
    }
    get(&h, s, "/v1/operations/op-1", "not-a-key");
    assert_error(&h, 429, "rate_limited");
    {
        char ra[16];

        assert_true(hdr_value(&h, "Retry-After", ra, sizeof ra));
        assert_true(atoi(ra) >= 1);
    }
    hres_free(&h);
    /* The source is limited: a real key from it waits too, and the key is
     * not looked at (a guess learns nothing). */
    get(&h, s, "/v1/operations/op-1", KEY(P_AGENT));
    assert_error(&h, 429, "rate_limited");
    hres_free(&h);
    /* Public routes are not behind authentication. */
    get(&h, s, "/healthz", NULL);
    assert_http(&h, 200);
    hres_free(&h);
    assert_true(metric_of(s, "oncegate_rate_limited_total{limit=\""
                             "auth_failures\",by=\"source\"}") >= 2);
}

/* Each limit is kept per principal and per source address: the sources
 * here are loopback addresses of their own (127.0.0.2, 127.0.0.3). */
void failed_authentication_is_rate_limited_per_principal_and_per_source(
    void **state)
{
    srv *s = edge_server(NULL, json_pack("{s:i, s:i}",
                                         "auth_failures_per_minute", 1,
                                         "auth_failures_burst", 2));
    char op[OG_UUID_LEN + 1], path[96];

    (void)state;
    uuid4(op);
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    /* Two failures of the agent (a route of another role) from .2. */
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants", KEY(P_AGENT), 403,
                "forbidden");
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants", KEY(P_AGENT), 403,
                "forbidden");
    /* The agent's bucket is empty: from a fresh source, even its own
     * route is 429 ... */
    ASSERT_FROM(s, "127.0.0.3", "GET", path, KEY(P_AGENT), 429,
                "rate_limited");
    /* ... while another principal from that source is served. */
    ASSERT_FROM(s, "127.0.0.3", "POST", "/v1/grants", KEY(P_ISSUER), 400,
                NULL);
    /* .2's bucket is empty too: any key from it is 429, unlooked-at. */
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants", KEY(P_ISSUER), 429,
                "rate_limited");
    ASSERT_FROM(s, "127.0.0.2", "GET", path, "no-such-key", 429,
                "rate_limited");
    assert_true(metric_of(s, "oncegate_rate_limited_total{limit=\""
                             "auth_failures\",by=\"principal\"}") >= 1);
    assert_true(metric_of(s, "oncegate_rate_limited_total{limit=\""
                             "auth_failures\",by=\"source\"}") >= 2);
}

void revocations_are_rate_limited_per_principal_and_per_source(void **state)
{
    site *st = site_new("edge", false, 0, true);
    char key2[API_KEY_LEN], hash2[65];
    srv *s;

    (void)state;
    assert_non_null(st);
    /* A second revoker, so the two limits can be told apart. */
    api_key_new(key2);
    sha256_hex(key2, hash2);
    secret_add(key2);
    json_array_append_new(json_object_get(st->conf, "principals"),
                          json_pack("{s:s, s:[s], s:s}", "id", "revoker-2",
                                    "roles", "revoker", "api_key_sha256",
                                    hash2));
    json_object_set_new(st->conf, "rate_limit",
                        json_pack("{s:i, s:i, s:i, s:i}",
                                  "revocations_per_minute", 1,
                                  "revocations_burst", 2,
                                  "auth_failures_per_minute", 1000000,
                                  "auth_failures_burst", 1000000));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    /* Two revocations (malformed, counted all the same) from .2 ... */
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants/revoke", KEY(P_REVOKER),
                400, "malformed_request");
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants/revoke", KEY(P_REVOKER),
                400, "malformed_request");
    /* ... empty the revoker's bucket, wherever it comes from ... */
    ASSERT_FROM(s, "127.0.0.3", "POST", "/v1/grants/revoke", KEY(P_REVOKER),
                429, "rate_limited");
    ASSERT_FROM(s, "127.0.0.3", "POST", "/v1/families/fam-1/revoke",
                KEY(P_REVOKER), 429, "rate_limited");
    /* ... and .2's: the other revoker is limited there, not from .4. */
    ASSERT_FROM(s, "127.0.0.2", "POST", "/v1/grants/revoke", key2, 429,
                "rate_limited");
    ASSERT_FROM(s, "127.0.0.4", "POST", "/v1/grants/revoke", key2, 400,
                "malformed_request");
    /* Other routes are not limited by it. */
    {
        char op[OG_UUID_LEN + 1], path[96];

        uuid4(op);
        snprintf(path, sizeof path, "/v1/operations/%s", op);
        ASSERT_FROM(s, "127.0.0.2", "GET", path, KEY(P_AGENT), 404, NULL);
    }
    assert_true(metric_of(s, "oncegate_rate_limited_total{limit=\""
                             "revocations\",by=\"principal\"}") >= 2);
    assert_true(metric_of(s, "oncegate_rate_limited_total{limit=\""
                             "revocations\",by=\"source\"}") >= 1);
}
