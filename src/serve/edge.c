/*
 * edge.c — one connection of `oncegate serve` as a state machine without
 * I/O (edge.h): the request framing of wire.c and the request core of
 * http.c, with the deadlines and caps of the `http.` configuration rows
 * (docs/http.md, "Framing and early refusals"). The event loop (loop.c)
 * drives it over sockets; og_edge_serve drives it over an og_edge_io, for
 * fuzz_http.
 *
 * Why not libmicrohttpd (0.9.75, Debian 12's): it frames requests more
 * loosely than RFC 9112 asks (repeated Content-Length, obs-fold, unknown
 * transfer codings waited on) and answers its own errors as HTML; no
 * option or callback changes either (README.md, "Dependencies").
 *
 * A connection, request after request:
 *
 *   idle --first byte--> head --parsed--> check --0--> body --> run --> answer
 *    ^      (idle_timeout)   (header_timeout)  |        (body_timeout)      |
 *    |                                         +--1--> answer               |
 *    +-------------------- kept alive (no refusal, no close asked) <--------+
 *
 *   HE1 a refusal on the head (wire.c's W1-W10, or og_http_req_check's) is
 *     answered before any body byte is read; the connection is then
 *     closed when a body was declared (its bytes are never read as a
 *     request) and after every framing refusal (nothing after it can be
 *     trusted to start a request);
 *   HE2 a deadline passed (header or body) is 408 request_timeout and a
 *     close; a slow client holds its connection slot for one deadline at
 *     most, and no thread at all while it waits (loop.c);
 *   HE3 a source address has at most http.max_unauthenticated_per_source
 *     connections on which no request has authenticated; one more is
 *     answered 429 too_many_connections and closed when accepted, as one
 *     past max_connections is answered 503 retry_later (loop.c);
 *   HE4 every answer, the refusals' too, is the JSON error shape with a
 *     Content-Length, sent once;
 *   HE5 a connection closed by us is first half-closed, and what the client
 *     still sends is read and dropped for a short bounded time, so the
 *     answer is not lost to a reset (RFC 9112 §9.6; loop.c).
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "edge.h"

#define READ_CHUNK 16384

enum { CS_HEAD, CS_BODY, CS_RUN };

static const og_wire_error timeout_error = {
    408, "request_timeout",
    "the request did not arrive within its deadline"};

int og_conn_init(og_conn *c, og_srv *srv, const char *source)
{
    memset(c, 0, sizeof *c);
    c->srv = srv;
    snprintf(c->source, sizeof c->source, "%s", source ? source : "");
    c->cap = srv->cfg.http_max_header_bytes + READ_CHUNK;
    c->h = malloc(sizeof *c->h);
    c->in = malloc(c->cap);
    return c->h && c->in ? 0 : -1;
}

void og_conn_sent(og_conn *c)
{
    og_http_answer_free(c->out, c->out_len);
    c->out = NULL;
    c->out_len = 0;
}

void og_conn_free(og_conn *c)
{
    if (c->r)
        og_http_req_end(c->r);
    c->r = NULL;
    og_conn_sent(c);
    if (c->in) {
        sodium_memzero(c->in, c->cap); /* it may hold a key or a token */
        free(c->in);
    }
    if (c->h) {
        sodium_memzero(c->h, sizeof *c->h);
        free(c->h);
    }
    c->in = NULL;
    c->h = NULL;
}

static void consume(og_conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->len - n);
    c->len -= n;
}

/* Renders r's answer into out (closing: Connection: close) and ends r:
 * SEND, or CLOSE when memory ran out. */
static int respond(og_conn *c, bool close)
{
    og_http_req *r = c->r;

    c->r = NULL;
    c->state = CS_HEAD;
    c->out = og_http_req_render(r, close, &c->out_len);
    c->out_close = close;
    og_http_req_end(r);
    return c->out ? OG_CONN_SEND : OG_CONN_CLOSE;
}

/* A refusal that has no request to carry it (a framing error, a deadline
 * in a head): the JSON error shape (HE4), Connection: close. */
static int refuse(og_conn *c, const og_wire_error *e)
{
    if (c->r) {
        og_http_req_end(c->r);
        c->r = NULL;
    }
    if (!(c->r = og_http_req_begin(c->srv, "-", "", c->source, NULL, NULL)))
        return OG_CONN_CLOSE;
    og_http_error(c->r, e->status, e->code, e->message, NULL);
    og_http_log_str(c->r, "edge", "refused");
    return respond(c, true);
}

static void body_sink(void *ctx, const char *data, size_t n)
{
    og_http_req_body(ctx, data, n);
}

/* A parsed head of hlen bytes: the request begins, is checked before any
 * body byte is read (HE1), and goes on to its body. */
static int begin(og_conn *c, long hlen, int64_t now_us)
{
    og_srv *srv = c->srv;
    og_wire_head *h = c->h;
    bool has_body;

    consume(c, (size_t)hlen);
    c->head_deadline_us = 0;
    c->r = og_http_req_begin(srv, h->method, h->target, c->source,
                             h->request_id, h->content_type);
    if (!c->r)
        return OG_CONN_CLOSE;
    has_body = h->framing == OG_WIRE_CHUNKED ||
               (h->framing == OG_WIRE_LENGTH && h->length > 0);
    c->close = h->close || atomic_load(&srv->draining);
    if (og_http_req_check(c->r, h->authorization, has_body,
                          h->framing == OG_WIRE_LENGTH ? h->length : 0) != 0)
        return respond(c, c->close || has_body); /* HE1: body never read */
    if (c->r->principal && !c->authed) {
        c->authed = true;
        if (c->authenticated)
            c->authenticated(c->auth_ctx);
    }
    c->state = CS_BODY;
    c->deadline_us = now_us + srv->cfg.http_body_timeout_us;
    memset(&c->ch, 0, sizeof c->ch);
    c->left = h->framing == OG_WIRE_LENGTH ? h->length : 0;
    if (has_body && h->expect_continue) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

        if (!(c->out = malloc(sizeof cont)))
            return OG_CONN_CLOSE;
        memcpy(c->out, cont, sizeof cont);
        c->out_len = sizeof cont - 1;
        c->out_close = false;
        return OG_CONN_SEND;
    }
    return -1; /* go on with the body */
}

/* The body's bytes in the buffer (HE2): RUN when it is whole, WAIT for
 * more, SEND a refusal (framing, too large). */
static int body(og_conn *c, int64_t now_us)
{
    og_wire_head *h = c->h;
    bool done = h->framing == OG_WIRE_NONE ||
                (h->framing == OG_WIRE_LENGTH && h->length == 0);
    og_wire_error e;

    if (h->framing == OG_WIRE_LENGTH && c->len > 0 && c->left > 0) {
        size_t take = c->len < c->left ? c->len : (size_t)c->left;

        og_http_req_body(c->r, c->in, take);
        consume(c, take);
        c->left -= take;
    }
    if (h->framing == OG_WIRE_LENGTH)
        done = c->left == 0;
    else if (h->framing == OG_WIRE_CHUNKED && c->len > 0) {
        long k = og_wire_chunks_feed(&c->ch, c->in, c->len,
                                     c->srv->cfg.max_body_bytes, body_sink,
                                     c->r, &done, &e);

        if (k < 0) {
            og_http_error(c->r, e.status, e.code, e.message, NULL);
            return respond(c, true);
        }
        consume(c, (size_t)k);
    }
    if (done) {
        c->state = CS_RUN;
        return OG_CONN_RUN;
    }
    if (now_us >= c->deadline_us)
        return og_conn_timeout(c);
    return OG_CONN_WAIT;
}

int og_conn_step(og_conn *c, int64_t now_us)
{
    og_wire_limits lim = {c->srv->cfg.http_max_header_bytes,
                          c->srv->cfg.http_max_url_bytes};
    og_wire_error e;

    for (;;) {
        long hlen;
        int act;

        if (c->state == CS_RUN)
            return OG_CONN_RUN;
        if (c->state == CS_BODY)
            return body(c, now_us);
        if (c->len == 0) {
            c->head_deadline_us = 0;
            if (atomic_load(&c->srv->draining))
                return OG_CONN_CLOSE;
            c->deadline_us = now_us + c->srv->cfg.http_idle_timeout_us;
            return OG_CONN_WAIT;
        }
        hlen = og_wire_head_parse(c->in, c->len, &lim, c->h, &e);
        if (hlen < 0)
            return refuse(c, &e); /* HE1 */
        if (hlen == 0) {
            if (!c->head_deadline_us)
                c->head_deadline_us =
                    now_us + c->srv->cfg.http_header_timeout_us;
            c->deadline_us = c->head_deadline_us;
            if (now_us >= c->deadline_us)
                return og_conn_timeout(c);
            return OG_CONN_WAIT;
        }
        if ((act = begin(c, hlen, now_us)) >= 0)
            return act;
    }
}

int og_conn_answer(og_conn *c)
{
    return respond(c, c->close || atomic_load(&c->srv->draining));
}

int og_conn_eof(og_conn *c)
{
    static const og_wire_error ended = {
        400, "malformed_request", "the connection ended inside a request head"};

    if (c->state == CS_HEAD && c->len > 0)
        return refuse(c, &ended); /* half-closed: the answer can be read */
    return OG_CONN_CLOSE; /* idle, or gone inside a body: nothing to answer */
}

int og_conn_timeout(og_conn *c)
{
    if (c->state == CS_HEAD)
        return c->len == 0 ? OG_CONN_CLOSE : refuse(c, &timeout_error);
    og_http_error(c->r, timeout_error.status, timeout_error.code,
                  timeout_error.message, NULL);
    return respond(c, true);
}

/* ===========================================================================
 * og_edge_serve: the state machine over an og_edge_io (fuzz_http).
 * ========================================================================= */

/* Milliseconds until deadline_us (monotonic); at most INT32_MAX. */
static int ms_until(int64_t deadline_us)
{
    int64_t left = deadline_us - og_http_mono_us();

    if (left <= 0)
        return 0;
    left = (left + 999) / 1000;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

void og_edge_serve(og_srv *srv, const og_edge_io *io, const char *source,
                   void (*authenticated)(void *ctx), void *ctx)
{
    og_conn c;
    int act;

    if (og_conn_init(&c, srv, source) != 0)
        goto out;
    c.authenticated = authenticated;
    c.auth_ctx = ctx;
    act = og_conn_step(&c, og_http_mono_us());
    for (;;) {
        long n;
        int tmo, rc;
        bool close;

        switch (act) {
        case OG_CONN_WAIT:
            if ((tmo = ms_until(c.deadline_us)) == 0) {
                act = og_conn_timeout(&c);
                break;
            }
            n = c.len < c.cap
                    ? io->recv(io->ctx, c.in + c.len, c.cap - c.len, tmo)
                    : -1;
            if (n == -2)
                act = og_conn_timeout(&c);
            else if (n == 0)
                act = og_conn_eof(&c);
            else if (n < 0)
                goto out;
            else {
                c.len += (size_t)n;
                act = og_conn_step(&c, og_http_mono_us());
            }
            break;
        case OG_CONN_RUN:
            og_http_req_run(c.r, c.h->authorization);
            act = og_conn_answer(&c);
            break;
        case OG_CONN_SEND:
            rc = io->send(io->ctx, c.out, c.out_len);
            close = c.out_close;
            og_conn_sent(&c);
            if (rc != 0 || close)
                goto out;
            act = og_conn_step(&c, og_http_mono_us());
            break;
        default:
            goto out;
        }
    }
out:
    og_conn_free(&c);
}
