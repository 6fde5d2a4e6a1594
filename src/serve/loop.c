/*
 * loop.c — the connections of `oncegate serve` over sockets: ONE event
 * loop thread (epoll) accepts, reads, frames requests with the connection
 * state machine (edge.h: HE1-HE5) and keeps every deadline; each request
 * whose body is whole goes to a bounded pool of http.workers threads, which
 * run the handler and write the answer (docs/http.md, "Connections").
 *
 * Why a loop and a pool rather than a thread per connection: on a machine
 * bound by its CPUs, the kernel's context switches between one thread per
 * connection, the store's pool and libpq's socket waits were the largest
 * cost of a request beside the signature check (docs/performance.md, "The
 * request path (PATH)"); a waiting connection here costs no thread, and a
 * busy worker takes the next request without sleeping.
 *
 * Who owns a connection: the loop, while it waits for bytes (armed in
 * epoll, EPOLLONESHOT) or sends what the loop produced; ONE worker, from
 * the moment its request is queued until the answer is sent. A worker
 * whose answer went out whole on a kept-alive connection with nothing
 * buffered re-arms it in epoll itself (no wake-up of the loop); anything
 * else (a close, a partial send, pipelined bytes, the client's end) goes
 * back through the loop's inbox. Only the loop changes the list of
 * connections and the per-source counts, so they need no lock.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "edge.h"
#include "ratelimit.h"
#include "refusals.h"

#define LINGER_US (500 * 1000)
#define LINGER_BYTES (256 * 1024)
#define RATE_SLOTS 4096
#define TICK_MS 20 /* how often deadlines are looked at, at most */
#define EVENTS 64

typedef struct src_count {
    char addr[64];
    int n; /* connections not yet authenticated */
} src_count;

enum { LC_READ, LC_BUSY, LC_WRITE, LC_LINGER };

typedef struct lconn lconn;
struct lconn {
    og_conn c;
    struct og_edge *e;
    int fd;
    int mode;              /* LC_*: who has it and what it waits for */
    atomic_bool busy;      /* with a worker: the loop keeps off */
    bool eof;              /* the client's stream ended */
    bool unauth;           /* counted in src */
    size_t sent;           /* LC_WRITE: bytes of c.out already sent */
    size_t dropped;        /* LC_LINGER */
    int64_t linger_until;
    lconn *prev, *next;    /* every connection (the loop's list) */
    lconn *qnext;          /* the workers' queue, or the loop's inbox */
};

struct og_edge {
    og_srv *srv;
    int lfd, ep, evfd;
    pthread_t loop;
    pthread_t *workers;
    int n_workers;
    atomic_bool accepting;
    atomic_bool stopping;
    int live;              /* loop only */
    lconn *conns;          /* loop only */
    src_count *src;        /* loop only: max_connections slots */
    pthread_mutex_t mu;    /* guards the queue, the inbox and quit */
    pthread_cond_t cv;     /* the queue has work, or quit */
    pthread_cond_t quiet;  /* the listening socket closed (lfd -1) */
    lconn *q_head, *q_tail;
    lconn *inbox;
    bool quit;             /* workers end */
};

/* ===========================================================================
 * Per-source counts (HE3): the loop's only.
 * ========================================================================= */

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

static void unauth_drop(og_edge *e, lconn *l)
{
    src_count *s;

    if (!l->unauth)
        return;
    l->unauth = false;
    if ((s = src_slot(e, l->c.source, false)))
        s->n--;
}

/* Called by og_conn_step, which only the loop runs. */
static void on_authenticated(void *ctx)
{
    lconn *l = ctx;

    unauth_drop(l->e, l);
}

/* ===========================================================================
 * The loop's side
 * ========================================================================= */

static void arm(og_edge *e, lconn *l, uint32_t events)
{
    struct epoll_event ev = {.events = events | EPOLLONESHOT, .data.ptr = l};

    epoll_ctl(e->ep, EPOLL_CTL_MOD, l->fd, &ev);
}

static void conn_free(og_edge *e, lconn *l)
{
    unauth_drop(e, l);
    epoll_ctl(e->ep, EPOLL_CTL_DEL, l->fd, NULL);
    close(l->fd);
    if (l->prev)
        l->prev->next = l->next;
    else
        e->conns = l->next;
    if (l->next)
        l->next->prev = l->prev;
    e->live--;
    og_conn_free(&l->c);
    free(l);
}

/* HE5: half-closes, then drops what still comes for a bounded time. */
static void linger(og_edge *e, lconn *l)
{
    og_conn_sent(&l->c);
    shutdown(l->fd, SHUT_WR);
    if (l->eof) {
        conn_free(e, l);
        return;
    }
    l->mode = LC_LINGER;
    l->linger_until = og_http_mono_us() + LINGER_US;
    arm(e, l, EPOLLIN | EPOLLRDHUP);
}

/* Sends what is left of c.out without blocking. 1 all sent, 0 not yet
 * (EAGAIN), -1 the connection failed. */
static int send_out(lconn *l)
{
    while (l->sent < l->c.out_len) {
        ssize_t k = send(l->fd, l->c.out + l->sent, l->c.out_len - l->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k <= 0)
            return -1;
        l->sent += (size_t)k;
    }
    return 1;
}

static void enqueue(og_edge *e, lconn *l)
{
    l->mode = LC_BUSY;
    atomic_store(&l->busy, true);
    pthread_mutex_lock(&e->mu);
    l->qnext = NULL;
    if (e->q_tail)
        e->q_tail->qnext = l;
    else
        e->q_head = l;
    e->q_tail = l;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* Acts on act until the connection waits, is queued or ends. */
static void drive(og_edge *e, lconn *l, int act)
{
    for (;;) {
        int rc;

        switch (act) {
        case OG_CONN_WAIT:
            if (l->eof) {
                /* Every byte before the end was stepped: what the end
                 * means (an answer, then close; or a quiet close). */
                act = og_conn_eof(&l->c);
                if (act == OG_CONN_WAIT)
                    act = OG_CONN_CLOSE;
                continue;
            }
            l->mode = LC_READ;
            arm(e, l, EPOLLIN | EPOLLRDHUP);
            return;
        case OG_CONN_RUN:
            enqueue(e, l);
            return;
        case OG_CONN_SEND:
            l->sent = 0;
            rc = send_out(l);
            if (rc < 0) {
                conn_free(e, l);
                return;
            }
            if (rc == 0) {
                l->mode = LC_WRITE;
                l->c.deadline_us =
                    og_http_mono_us() + e->srv->cfg.http_body_timeout_us;
                arm(e, l, EPOLLOUT);
                return;
            }
            if (l->c.out_close) {
                linger(e, l);
                return;
            }
            og_conn_sent(&l->c);
            act = og_conn_step(&l->c, og_http_mono_us());
            continue;
        default:
            linger(e, l);
            return;
        }
    }
}

/* Reads what the socket has (without blocking) into the connection. 1
 * read something or saw the end, 0 nothing yet, -1 failed. */
static int read_in(lconn *l)
{
    int got = 0;

    while (l->c.len < l->c.cap) {
        ssize_t n = recv(l->fd, l->c.in + l->c.len, l->c.cap - l->c.len,
                         MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return got;
        if (n < 0)
            return -1;
        if (n == 0) {
            l->eof = true;
            return 1;
        }
        got = (size_t)n < l->c.cap - l->c.len ? 1 : 2;
        l->c.len += (size_t)n;
        if (got == 1)
            return 1; /* a short read drained the socket for now: no
                         second recv to hear EAGAIN (the re-armed
                         EPOLLONESHOT reports what comes later) */
    }
    return 1;
}

static void on_readable(og_edge *e, lconn *l)
{
    int rc;

    if (l->mode == LC_LINGER) {
        char sink[4096];
        ssize_t n;

        while ((n = recv(l->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0 &&
               l->dropped < LINGER_BYTES)
            l->dropped += (size_t)n;
        if ((n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) &&
            l->dropped < LINGER_BYTES && og_http_mono_us() < l->linger_until) {
            arm(e, l, EPOLLIN | EPOLLRDHUP);
            return;
        }
        conn_free(e, l);
        return;
    }
    if ((rc = read_in(l)) < 0) {
        conn_free(e, l); /* reset: nothing to answer */
        return;
    }
    drive(e, l, og_conn_step(&l->c, og_http_mono_us()));
}

static void on_writable(og_edge *e, lconn *l)
{
    int rc = send_out(l);

    if (rc < 0) {
        conn_free(e, l);
        return;
    }
    if (rc == 0) {
        arm(e, l, EPOLLOUT);
        return;
    }
    if (l->c.out_close) {
        linger(e, l);
        return;
    }
    og_conn_sent(&l->c);
    drive(e, l, og_conn_step(&l->c, og_http_mono_us()));
}

/* Deadlines (HE2) and the linger's end. A worker hands a connection
 * back with a fresh deadline before it clears busy, so a connection seen
 * here is never one a worker still touches. */
static void tick(og_edge *e, int64_t now)
{
    for (lconn *l = e->conns, *next; l; l = next) {
        next = l->next;
        if (atomic_load(&l->busy))
            continue;
        if (l->mode == LC_LINGER) {
            if (now >= l->linger_until)
                conn_free(e, l);
        } else if (l->mode == LC_WRITE) {
            if (now >= l->c.deadline_us)
                conn_free(e, l); /* a client that does not read */
        } else if (now >= l->c.deadline_us) {
            drive(e, l, og_conn_timeout(&l->c));
        }
    }
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
        if (reason == 0)
            og_http_error(r, 503, "retry_later",
                          "this instance serves max_connections "
                          "connections; retry",
                          NULL);
        else
            og_http_error(r, 429, "too_many_connections",
                          "too many connections from this address that "
                          "have not authenticated a request",
                          NULL);
        r->retry_after = srv->cfg.retry_after_s;
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

static void on_accept(og_edge *e)
{
    const og_srv_config *cfg = &e->srv->cfg;

    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        struct epoll_event ev;
        char addr[64];
        src_count *sc;
        lconn *l;
        int fd, one = 1, refused = -1;

        fd = accept4(e->lfd, (struct sockaddr *)&ss, &sl,
                     SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* EAGAIN, or EMFILE and the like: retried next time */
        peer_name(&ss, addr, sizeof addr);
        sc = src_slot(e, addr, true);
        l = calloc(1, sizeof *l);
        if (!l || e->live >= cfg->max_connections || !sc)
            refused = 0;
        else if (sc->n >= cfg->http_unauth_per_source)
            refused = 1;
        if (refused < 0 && og_conn_init(&l->c, e->srv, addr) != 0) {
            og_conn_free(&l->c);
            refused = 0;
        }
        if (refused >= 0) {
            free(l);
            refuse_accepted(e->srv, fd, addr, refused);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        l->fd = fd;
        l->e = e;
        l->unauth = true;
        l->c.authenticated = on_authenticated;
        l->c.auth_ctx = l;
        sc->n++;
        e->live++;
        l->next = e->conns;
        if (e->conns)
            e->conns->prev = l;
        e->conns = l;
        ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
        ev.data.ptr = l;
        l->mode = LC_READ;
        l->c.deadline_us = og_http_mono_us() + cfg->http_idle_timeout_us;
        if (epoll_ctl(e->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            l->unauth = true;
            e->conns = l->next;
            if (e->conns)
                e->conns->prev = NULL;
            e->live--;
            unauth_drop(e, l);
            og_conn_free(&l->c);
            free(l);
            refuse_accepted(e->srv, fd, addr, 0);
        }
    }
}

/* What the workers handed back. */
static void take_inbox(og_edge *e)
{
    uint64_t v;
    lconn *l;

    (void)!read(e->evfd, &v, sizeof v);
    pthread_mutex_lock(&e->mu);
    l = e->inbox;
    e->inbox = NULL;
    pthread_mutex_unlock(&e->mu);
    while (l) {
        lconn *next = l->qnext;

        atomic_store(&l->busy, false);
        if (l->c.out) {
            /* A partial send, or an answer that closes. */
            if (l->sent < l->c.out_len) {
                l->mode = LC_WRITE;
                l->c.deadline_us =
                    og_http_mono_us() + e->srv->cfg.http_body_timeout_us;
                arm(e, l, EPOLLOUT);
            } else if (l->c.out_close) {
                linger(e, l);
            } else {
                og_conn_sent(&l->c);
                drive(e, l, og_conn_step(&l->c, og_http_mono_us()));
            }
        } else if (l->mode == LC_LINGER) {
            conn_free(e, l); /* the worker's send failed */
        } else {
            drive(e, l, og_conn_step(&l->c, og_http_mono_us()));
        }
        l = next;
    }
}

static void *loop_main(void *arg)
{
    og_edge *e = arg;
    struct epoll_event evs[EVENTS];
    int64_t next_tick = og_http_mono_us() + TICK_MS * 1000;

    while (!atomic_load(&e->stopping)) {
        int n = epoll_wait(e->ep, evs, EVENTS, TICK_MS);
        int64_t now;

        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;

            if (p == &e->lfd) {
                if (atomic_load(&e->accepting))
                    on_accept(e);
            } else if (p == &e->evfd) {
                take_inbox(e);
            } else {
                lconn *l = p;

                if (l->mode == LC_WRITE)
                    on_writable(e, l);
                else
                    on_readable(e, l);
            }
        }
        if (!atomic_load(&e->accepting) && e->lfd >= 0) {
            /* og_http_quiesce: the listening socket closes here, where
             * nothing else uses it; new connections are then refused. */
            epoll_ctl(e->ep, EPOLL_CTL_DEL, e->lfd, NULL);
            close(e->lfd);
            pthread_mutex_lock(&e->mu);
            e->lfd = -1;
            pthread_cond_broadcast(&e->quiet);
            pthread_mutex_unlock(&e->mu);
        }
        now = og_http_mono_us();
        if (now >= next_tick) {
            tick(e, now);
            next_tick = now + TICK_MS * 1000;
        }
    }
    return NULL;
}

/* ===========================================================================
 * The workers
 * ========================================================================= */

static void hand_back(og_edge *e, lconn *l)
{
    uint64_t one = 1;

    pthread_mutex_lock(&e->mu);
    l->qnext = e->inbox;
    e->inbox = l;
    pthread_mutex_unlock(&e->mu);
    (void)!write(e->evfd, &one, sizeof one);
}

static void *worker_main(void *arg)
{
    og_edge *e = arg;

    for (;;) {
        lconn *l;
        int rc;

        pthread_mutex_lock(&e->mu);
        while (!e->q_head && !e->quit)
            pthread_cond_wait(&e->cv, &e->mu);
        if (e->quit) {
            /* og_http_stop: a queued request ends unrun (its connection
             * is already shut down; og_http_stop frees it). */
            pthread_mutex_unlock(&e->mu);
            return NULL;
        }
        l = e->q_head;
        e->q_head = l->qnext;
        if (!e->q_head)
            e->q_tail = NULL;
        pthread_mutex_unlock(&e->mu);

        og_http_req_run(l->c.r, l->c.h->authorization);
        if (og_conn_answer(&l->c) != OG_CONN_SEND) {
            l->mode = LC_LINGER; /* out of memory: the loop ends it */
            hand_back(e, l);
            continue;
        }
        l->sent = 0;
        rc = send_out(l);
        if (rc < 0) {
            og_conn_sent(&l->c);
            l->mode = LC_LINGER;
            hand_back(e, l);
        } else if (rc == 1 && !l->c.out_close && !l->eof && l->c.len == 0 &&
                   !atomic_load(&e->srv->draining)) {
            /* The common case: kept alive, nothing buffered. Back to
             * waiting without waking the loop. */
            og_conn_sent(&l->c);
            l->mode = LC_READ;
            l->c.deadline_us =
                og_http_mono_us() + e->srv->cfg.http_idle_timeout_us;
            atomic_store(&l->busy, false);
            arm(e, l, EPOLLIN | EPOLLRDHUP);
        } else {
            hand_back(e, l);
        }
    }
}

/* ===========================================================================
 * Start and stop
 * ========================================================================= */

/* http.workers, or, when 0, the store's pool_size: a handler spends most
 * of its time waiting for the store, so fewer workers than store
 * connections would leave connections idle while requests queue (and
 * admissions commit in groups only as large as what is in flight), and
 * more would only wait for a connection. At least 4. */
static int workers_for(const og_srv_config *cfg)
{
    if (cfg->http_workers > 0)
        return cfg->http_workers;
    return cfg->pool_size < 4 ? 4 : cfg->pool_size;
}

int og_http_start(og_srv *srv, og_edge **out, int *port, char *err,
                  size_t errlen)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    struct epoll_event ev;
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
    if (!(e = calloc(1, sizeof *e)))
        goto oom;
    e->lfd = e->ep = e->evfd = -1;
    e->srv = srv;
    e->n_workers = workers_for(&srv->cfg);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->quiet, NULL);
    if (!(e->src = calloc((size_t)srv->cfg.max_connections, sizeof *e->src)) ||
        !(e->workers = calloc((size_t)e->n_workers, sizeof *e->workers)) ||
        !(srv->limits = og_ratelimit_new(RATE_SLOTS)) ||
        (srv->cfg.http_refusal_cache > 0 &&
         !(srv->refusals = og_refusals_new(srv->cfg.http_refusal_cache))))
        goto oom;
    e->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
    if (e->lfd < 0 ||
        setsockopt(e->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(e->lfd, (struct sockaddr *)&ss, sl) != 0 ||
        listen(e->lfd, 511) != 0 ||
        getsockname(e->lfd, (struct sockaddr *)&ss, &sl) != 0 ||
        (e->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (e->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        snprintf(err, errlen, "listen: cannot listen on %s:%d: %s",
                 srv->cfg.listen_host, srv->cfg.listen_port, strerror(errno));
        goto fail;
    }
    ev.events = EPOLLIN;
    ev.data.ptr = &e->lfd;
    epoll_ctl(e->ep, EPOLL_CTL_ADD, e->lfd, &ev);
    ev.data.ptr = &e->evfd;
    epoll_ctl(e->ep, EPOLL_CTL_ADD, e->evfd, &ev);
    *port = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
    atomic_store(&e->accepting, true);
    for (int i = 0; i < e->n_workers; i++)
        if (pthread_create(&e->workers[i], NULL, worker_main, e) != 0) {
            e->n_workers = i;
            snprintf(err, errlen, "listen: cannot start the workers");
            goto fail;
        }
    if (pthread_create(&e->loop, NULL, loop_main, e) != 0) {
        snprintf(err, errlen, "listen: cannot start the event loop");
        goto fail;
    }
    *out = e;
    return 0;
oom:
    snprintf(err, errlen, "listen: out of memory");
fail:
    if (e) {
        pthread_mutex_lock(&e->mu);
        e->quit = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        for (int i = 0; i < e->n_workers && e->workers; i++)
            pthread_join(e->workers[i], NULL);
        if (e->lfd >= 0)
            close(e->lfd);
        if (e->ep >= 0)
            close(e->ep);
        if (e->evfd >= 0)
            close(e->evfd);
        pthread_cond_destroy(&e->cv);
        pthread_cond_destroy(&e->quiet);
        pthread_mutex_destroy(&e->mu);
        free(e->workers);
        free(e->src);
        free(e);
    }
    og_ratelimit_free(srv->limits);
    srv->limits = NULL;
    og_refusals_free(srv->refusals);
    srv->refusals = NULL;
    return -1;
}

void og_http_quiesce(og_edge *e)
{
    uint64_t one = 1;

    if (!e || !atomic_load(&e->accepting))
        return;
    atomic_store(&e->accepting, false);
    (void)!write(e->evfd, &one, sizeof one); /* the loop closes it */
    pthread_mutex_lock(&e->mu);
    while (e->lfd >= 0)
        pthread_cond_wait(&e->quiet, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

void og_http_stop(og_edge *e)
{
    if (!e)
        return;
    og_http_quiesce(e);
    /* The loop ends; every connection is shut down, so a worker inside a
     * handler finds its send failing when it answers; queued requests end
     * unrun; then everything is freed. */
    atomic_store(&e->stopping, true);
    pthread_join(e->loop, NULL);
    for (lconn *l = e->conns; l; l = l->next)
        shutdown(l->fd, SHUT_RDWR);
    pthread_mutex_lock(&e->mu);
    e->quit = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (int i = 0; i < e->n_workers; i++)
        pthread_join(e->workers[i], NULL);
    while (e->conns)
        conn_free(e, e->conns);
    close(e->ep);
    close(e->evfd);
    og_ratelimit_free(e->srv->limits);
    e->srv->limits = NULL;
    og_refusals_free(e->srv->refusals);
    e->srv->refusals = NULL;
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->quiet);
    pthread_mutex_destroy(&e->mu);
    free(e->workers);
    free(e->src);
    free(e);
}
