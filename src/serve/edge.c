/*
 * edge.c — the connections of `oncegate serve`: a listening socket, one
 * thread per connection (at most max_connections), the request framing of
 * wire.c and the request core of http.c, with the deadlines and caps of
 * the `http.` configuration rows (docs/http.md, "Framing and early
 * refusals").
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
 *     close; a slow client holds its thread for one deadline at most;
 *   HE3 a source address has at most http.max_unauthenticated_per_source
 *     connections on which no request has authenticated; one more is
 *     answered 429 too_many_connections and closed when accepted, as one
 *     past max_connections is answered 503 retry_later;
 *   HE4 every answer, the refusals' too, is the JSON error shape with a
 *     Content-Length, sent once;
 *   HE5 a connection closed by us is first half-closed, and what the client
 *     still sends is read and dropped for a short bounded time
 *     (LINGER_MS), so the answer is not lost to a reset (RFC 9112 §9.6).
 */
#define _GNU_SOURCE /* accept4, pipe2 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "http.h"
#include "ratelimit.h"
#include "refusals.h"
#include "wire.h"

#define READ_CHUNK 16384
#define LINGER_MS 500
#define LINGER_BYTES (256 * 1024)
#define RATE_SLOTS 4096

/* ===========================================================================
 * One connection's requests (og_edge_serve): socket-free, so fuzz_http
 * drives the same code through its own og_edge_io.
 * ========================================================================= */

typedef struct conn_in {
    char *buf;
    size_t len, cap;
} conn_in;

/* Milliseconds until deadline_us (monotonic); at most INT32_MAX. */
static int ms_until(int64_t deadline_us)
{
    int64_t left = deadline_us - og_http_mono_us();

    if (left <= 0)
        return 0;
    left = (left + 999) / 1000;
    return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* Sends r's answer (closing: Connection: close). 0 or -1. */
static int respond(const og_edge_io *io, og_http_req *r, bool close)
{
    size_t n = 0;
    char *t = og_http_req_render(r, close, &n);
    int rc;

    if (!t)
        return -1;
    rc = io->send(io->ctx, t, n);
    og_http_answer_free(t, n);
    return rc;
}

/* Answers a refusal that has no request to carry it (a framing error, a
 * deadline): the JSON error shape (HE4), Connection: close. */
static void refuse(og_srv *srv, const og_edge_io *io, const char *source,
                   const og_wire_error *e)
{
    og_http_req *r = og_http_req_begin(srv, "-", "", source, NULL, NULL);

    if (!r)
        return;
    og_http_error(r, e->status, e->code, e->message, NULL);
    og_http_log_str(r, "edge", "refused");
    respond(io, r, true);
    og_http_req_end(r);
}

static void body_sink(void *ctx, const char *data, size_t n)
{
    og_http_req_body(ctx, data, n);
}

static const og_wire_error timeout_error = {
    408, "request_timeout",
    "the request did not arrive within its deadline"};

/* Reads r's body (HE2) into r. 0; -1 with e set to answer (a framing
 * error, a deadline, too large); -1 with e->status 0 when the client went
 * away. */
static int read_body(og_srv *srv, const og_edge_io *io, const og_wire_head *h,
                     og_http_req *r, conn_in *in, og_wire_error *e)
{
    int64_t deadline = og_http_mono_us() + srv->cfg.http_body_timeout_us;
    uint64_t left = h->framing == OG_WIRE_LENGTH ? h->length : 0;
    og_wire_chunks ch;
    bool done = h->framing == OG_WIRE_NONE ||
                (h->framing == OG_WIRE_LENGTH && h->length == 0);

    memset(&ch, 0, sizeof ch);
    e->status = 0;
    for (;;) {
        long n;
        int tmo;

        if (in->len > 0 && h->framing == OG_WIRE_LENGTH) {
            size_t take = in->len < left ? in->len : (size_t)left;

            og_http_req_body(r, in->buf, take);
            memmove(in->buf, in->buf + take, in->len - take);
            in->len -= take;
            left -= take;
            done = left == 0;
        } else if (in->len > 0 && h->framing == OG_WIRE_CHUNKED) {
            long k = og_wire_chunks_feed(&ch, in->buf, in->len,
                                         srv->cfg.max_body_bytes, body_sink,
                                         r, &done, e);

            if (k < 0)
                return -1;
            memmove(in->buf, in->buf + k, in->len - (size_t)k);
            in->len -= (size_t)k;
        }
        if (done)
            return 0;
        if ((tmo = ms_until(deadline)) == 0) {
            *e = timeout_error;
            return -1;
        }
        n = io->recv(io->ctx, in->buf + in->len,
                     h->framing == OG_WIRE_LENGTH && left < in->cap - in->len
                         ? (size_t)left
                         : in->cap - in->len,
                     tmo);
        if (n == -2) {
            *e = timeout_error;
            return -1;
        }
        if (n <= 0)
            return -1; /* gone: nothing to answer */
        in->len += (size_t)n;
    }
}

/* Waits for and parses the next head (HE2). 1 parsed; 0 the connection
 * ends quietly (closed, idle past its deadline, draining); -1 with e set
 * to answer. */
static int read_head(og_srv *srv, const og_edge_io *io, conn_in *in,
                     og_wire_head *h, og_wire_error *e, long *hlen)
{
    og_wire_limits lim = {srv->cfg.http_max_header_bytes,
                          srv->cfg.http_max_url_bytes};
    int64_t deadline = 0;

    for (;;) {
        long n;
        int tmo;

        if (in->len > 0) {
            if ((*hlen = og_wire_head_parse(in->buf, in->len, &lim, h, e)) != 0)
                return *hlen > 0 ? 1 : -1;
            if (!deadline)
                deadline = og_http_mono_us() +
                           srv->cfg.http_header_timeout_us;
        }
        if (in->len == 0 && atomic_load(&srv->draining))
            return 0;
        tmo = in->len == 0
                  ? (int)(srv->cfg.http_idle_timeout_us / 1000)
                  : ms_until(deadline);
        if (tmo == 0 && in->len > 0) {
            *e = timeout_error;
            return -1;
        }
        n = io->recv(io->ctx, in->buf + in->len, in->cap - in->len, tmo);
        if (n == -2 && in->len > 0) {
            *e = timeout_error;
            return -1;
        }
        if (n == 0 && in->len > 0) {
            /* Half-closed inside a head: the answer can still be read. */
            e->status = 400;
            e->code = "malformed_request";
            e->message = "the connection ended inside a request head";
            return -1;
        }
        if (n <= 0)
            return 0;
        in->len += (size_t)n;
    }
}

void og_edge_serve(og_srv *srv, const og_edge_io *io, const char *source,
                   void (*authenticated)(void *ctx), void *ctx)
{
    og_wire_head *h = malloc(sizeof *h);
    conn_in in = {0};
    bool authed = false;

    in.cap = srv->cfg.http_max_header_bytes + READ_CHUNK;
    if (!h || !(in.buf = malloc(in.cap)))
        goto out;
    for (;;) {
        og_wire_error e;
        og_http_req *r;
        long hlen = 0;
        bool has_body, close;
        int rc = read_head(srv, io, &in, h, &e, &hlen);

        if (rc <= 0) {
            if (rc < 0)
                refuse(srv, io, source, &e); /* HE1 */
            goto out;
        }
        memmove(in.buf, in.buf + hlen, in.len - (size_t)hlen);
        in.len -= (size_t)hlen;
        r = og_http_req_begin(srv, h->method, h->target, source,
                              h->request_id, h->content_type);
        if (!r)
            goto out;
        has_body = h->framing == OG_WIRE_CHUNKED ||
                   (h->framing == OG_WIRE_LENGTH && h->length > 0);
        close = h->close || atomic_load(&srv->draining);
        if (og_http_req_check(r, h->authorization, has_body,
                              h->framing == OG_WIRE_LENGTH ? h->length : 0) !=
            0) {
            close = close || has_body; /* HE1: the body is never read */
            rc = respond(io, r, close);
            og_http_req_end(r);
            if (close || rc != 0)
                goto out;
            continue;
        }
        if (r->principal && !authed) {
            authed = true;
            if (authenticated)
                authenticated(ctx);
        }
        if (has_body && h->expect_continue) {
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

            if (io->send(io->ctx, cont, sizeof cont - 1) != 0) {
                og_http_req_end(r);
                goto out;
            }
        }
        if (read_body(srv, io, h, r, &in, &e) != 0) {
            if (e.status) {
                og_http_error(r, e.status, e.code, e.message, NULL);
                respond(io, r, true);
            }
            og_http_req_end(r);
            goto out;
        }
        og_http_req_run(r, h->authorization);
        close = close || atomic_load(&srv->draining);
        rc = respond(io, r, close);
        og_http_req_end(r);
        if (close || rc != 0)
            goto out;
    }
out:
    if (in.buf) {
        sodium_memzero(in.buf, in.cap); /* it may hold a key or a token */
        free(in.buf);
    }
    if (h) {
        sodium_memzero(h, sizeof *h);
        free(h);
    }
}

/* ===========================================================================
 * Sockets: the listener and a thread per connection.
 * ========================================================================= */

typedef struct econn econn;

typedef struct src_count {
    char addr[64];
    int n; /* connections not yet authenticated */
} src_count;

struct og_edge {
    og_srv *srv;
    int lfd;
    int wake[2];
    pthread_t th;
    bool accepting;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* live reached 0 */
    int live;
    econn *conns;
    src_count *src;     /* max_connections slots */
};

struct econn {
    og_edge *e;
    int fd;
    char source[64];
    bool unauth;        /* counted in e->src */
    econn *prev, *next;
};

/* The source's count slot (creating it when create); NULL when absent. */
static src_count *src_slot(og_edge *e, const char *addr, bool create)
{
    src_count *free_slot = NULL;

    for (int i = 0; i < e->srv->cfg.max_connections; i++) {
        if (e->src[i].n > 0 && strcmp(e->src[i].addr, addr) == 0)
            return &e->src[i];
        if (e->src[i].n == 0 && !free_slot)
            free_slot = &e->src[i];
    }
    if (create && free_slot)
        snprintf(free_slot->addr, sizeof free_slot->addr, "%s", addr);
    return create ? free_slot : NULL;
}

/* Under e->mu: c no longer counts as unauthenticated. */
static void unauth_drop(econn *c)
{
    src_count *s;

    if (!c->unauth)
        return;
    c->unauth = false;
    if ((s = src_slot(c->e, c->source, false)))
        s->n--;
}

static void on_authenticated(void *ctx)
{
    econn *c = ctx;

    pthread_mutex_lock(&c->e->mu);
    unauth_drop(c);
    pthread_mutex_unlock(&c->e->mu);
}

typedef struct sock_io {
    int fd;
    int rcv_ms; /* the SO_RCVTIMEO set on fd; -1: none yet */
} sock_io;

/* One blocking recv bounded by SO_RCVTIMEO: a kept-alive connection's
 * next request costs one system call, not a poll and a recv. The timeout
 * is set only when it changes (the idle wait's stays the same from request
 * to request; a head's or body's deadline shrinks). */
static long sock_recv(void *ctx, char *buf, size_t n, int timeout_ms)
{
    sock_io *s = ctx;

    if (n == 0)
        return -1;
    if (timeout_ms != s->rcv_ms) {
        struct timeval tv = {(time_t)(timeout_ms / 1000),
                             (suseconds_t)(timeout_ms % 1000) * 1000};

        if (setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
            return -1;
        s->rcv_ms = timeout_ms;
    }
    for (;;) {
        ssize_t got = recv(s->fd, buf, n, 0);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return -2;
        return got < 0 ? -1 : (long)got;
    }
}

/* Blocking, bounded by SO_SNDTIMEO (a client that does not read its
 * answers holds its thread for one body deadline at most). */
static int sock_send(void *ctx, const char *buf, size_t n)
{
    sock_io *s = ctx;

    while (n > 0) {
        ssize_t k = send(s->fd, buf, n, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        buf += k;
        n -= (size_t)k;
    }
    return 0;
}

/* HE5: half-closes, drops what still comes for LINGER_MS at most, closes. */
static void linger_close(int fd)
{
    int64_t until = og_http_mono_us() + LINGER_MS * 1000;
    size_t dropped = 0;
    char sink[4096];
    sock_io s = {fd, -1};

    shutdown(fd, SHUT_WR);
    while (dropped < LINGER_BYTES) {
        int tmo = ms_until(until);
        long n;

        if (tmo == 0 || (n = sock_recv(&s, sink, sizeof sink, tmo)) <= 0)
            break;
        dropped += (size_t)n;
    }
    close(fd);
}

static void *conn_main(void *arg)
{
    econn *c = arg;
    og_edge *e = c->e;
    og_edge_io io;
    sock_io s = {c->fd, -1};
    int64_t snd_us = e->srv->cfg.http_body_timeout_us;
    struct timeval tv = {(time_t)(snd_us / 1000000),
                         (suseconds_t)(snd_us % 1000000)};
    int one = 1;

    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    io.ctx = &s;
    io.recv = sock_recv;
    io.send = sock_send;
    og_edge_serve(e->srv, &io, c->source, on_authenticated, c);
    linger_close(c->fd);
    pthread_mutex_lock(&e->mu);
    unauth_drop(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        e->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (--e->live == 0)
        pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    free(c);
    return NULL;
}

/* HE3: answers a connection refused when accepted and closes it. What the
 * client already sent is read first (not waited for), so the close does
 * not reset the answer away. */
static void refuse_accepted(og_srv *srv, int fd, const char *source,
                            int reason)
{
    og_http_req *r = og_http_req_begin(srv, "-", "", source, NULL, NULL);
    char sink[4096], *t;
    size_t n = 0;

    og_metrics_connection_refused(reason);
    if (r) {
        if (reason == 0) {
            og_http_error(r, 503, "retry_later",
                          "this instance serves max_connections "
                          "connections; retry",
                          NULL);
            r->retry_after = srv->cfg.retry_after_s;
        } else {
            og_http_error(r, 429, "too_many_connections",
                          "too many connections from this address that "
                          "have not authenticated a request",
                          NULL);
            r->retry_after = srv->cfg.retry_after_s;
        }
        og_http_log_str(r, "edge", "connection_refused");
        if ((t = og_http_req_render(r, true, &n))) {
            (void)!send(fd, t, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            og_http_answer_free(t, n);
        }
        og_http_req_end(r);
    }
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0)
        ;
    shutdown(fd, SHUT_WR);
    close(fd);
}

/* The peer's address as text. */
static void peer_name(const struct sockaddr_storage *ss, char *out, size_t n)
{
    const void *a = ss->ss_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)ss)
                              ->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)ss)
                              ->sin_addr;

    if (!inet_ntop(ss->ss_family, a, out, (socklen_t)n))
        snprintf(out, n, "unknown");
}

static void *accept_main(void *arg)
{
    og_edge *e = arg;
    const og_srv_config *cfg = &e->srv->cfg;

    for (;;) {
        struct pollfd p[2] = {{.fd = e->lfd, .events = POLLIN},
                              {.fd = e->wake[0], .events = POLLIN}};
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        char addr[64];
        econn *c;
        pthread_t th;
        pthread_attr_t at;
        src_count *sc;
        int fd, refused = -1;

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        fd = accept4(e->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0) {
            struct timespec pause = {0, 10 * 1000 * 1000};

            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
                nanosleep(&pause, NULL); /* let connections end */
            continue;
        }
        peer_name(&ss, addr, sizeof addr);
        c = calloc(1, sizeof *c);
        pthread_mutex_lock(&e->mu);
        sc = src_slot(e, addr, true);
        if (!c || e->live >= cfg->max_connections || !sc)
            refused = 0;
        else if (sc->n >= cfg->http_unauth_per_source)
            refused = 1;
        if (refused < 0) {
            c->e = e;
            c->fd = fd;
            c->unauth = true;
            snprintf(c->source, sizeof c->source, "%s", addr);
            sc->n++;
            e->live++;
            c->next = e->conns;
            if (e->conns)
                e->conns->prev = c;
            e->conns = c;
        }
        pthread_mutex_unlock(&e->mu);
        if (refused >= 0) {
            free(c);
            refuse_accepted(e->srv, fd, addr, refused);
            continue;
        }
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, conn_main, c) != 0) {
            pthread_mutex_lock(&e->mu);
            unauth_drop(c);
            if (c->next)
                c->next->prev = NULL;
            e->conns = c->next;
            e->live--;
            pthread_mutex_unlock(&e->mu);
            free(c);
            refuse_accepted(e->srv, fd, addr, 0);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

int og_http_start(og_srv *srv, og_edge **out, int *port, char *err,
                  size_t errlen)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    socklen_t sl;
    og_edge *e;
    int one = 1;

    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, srv->cfg.listen_host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)srv->cfg.listen_port);
        sl = sizeof *v4;
    } else if (inet_pton(AF_INET6, srv->cfg.listen_host, &v6->sin6_addr) ==
               1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)srv->cfg.listen_port);
        sl = sizeof *v6;
    } else {
        snprintf(err, errlen, "listen: %s is not an IP address",
                 srv->cfg.listen_host);
        return -1;
    }
    if (!(e = calloc(1, sizeof *e)) ||
        !(e->src = calloc((size_t)srv->cfg.max_connections, sizeof *e->src)) ||
        !(srv->limits = og_ratelimit_new(RATE_SLOTS)) ||
        (srv->cfg.http_refusal_cache > 0 &&
         !(srv->refusals = og_refusals_new(srv->cfg.http_refusal_cache)))) {
        og_ratelimit_free(srv->limits);
        srv->limits = NULL;
        if (e)
            free(e->src);
        free(e);
        snprintf(err, errlen, "listen: out of memory");
        return -1;
    }
    e->srv = srv;
    e->wake[0] = e->wake[1] = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (e->lfd < 0 ||
        setsockopt(e->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(e->lfd, (struct sockaddr *)&ss, sl) != 0 ||
        listen(e->lfd, 511) != 0 || pipe2(e->wake, O_CLOEXEC) != 0 ||
        getsockname(e->lfd, (struct sockaddr *)&ss, &sl) != 0) {
        snprintf(err, errlen, "listen: cannot listen on %s:%d: %s",
                 srv->cfg.listen_host, srv->cfg.listen_port, strerror(errno));
        goto fail;
    }
    *port = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    if (pthread_create(&e->th, NULL, accept_main, e) != 0) {
        snprintf(err, errlen, "listen: cannot start the accept thread");
        goto fail;
    }
    e->accepting = true;
    *out = e;
    return 0;
fail:
    if (e->lfd >= 0)
        close(e->lfd);
    if (e->wake[0] >= 0) {
        close(e->wake[0]);
        close(e->wake[1]);
    }
    og_ratelimit_free(srv->limits);
    srv->limits = NULL;
    og_refusals_free(srv->refusals);
    srv->refusals = NULL;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->src);
    free(e);
    return -1;
}

void og_http_quiesce(og_edge *e)
{
    if (!e || !e->accepting)
        return;
    (void)!write(e->wake[1], "q", 1);
    pthread_join(e->th, NULL);
    e->accepting = false;
    close(e->lfd);
    e->lfd = -1;
}

void og_http_stop(og_edge *e)
{
    if (!e)
        return;
    og_http_quiesce(e);
    pthread_mutex_lock(&e->mu);
    /* Wakes every connection thread: a read returns the end, a write an
     * error; each then ends and unlinks itself. */
    for (econn *c = e->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    while (e->live > 0)
        pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    close(e->wake[0]);
    close(e->wake[1]);
    og_ratelimit_free(e->srv->limits);
    e->srv->limits = NULL;
    og_refusals_free(e->srv->refusals);
    e->srv->refusals = NULL;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e->src);
    free(e);
}
