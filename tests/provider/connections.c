/*
 * connections.c — an established connection that fails is never
 * connect_failed: an in-test TCP peer plays each way an exchange can
 * break after the connection (closed, reset, silent, cut short,
 * oversized, redirected), all UNKNOWN; a connect timeout is
 * connect_failed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Established connections that fail are never connect_failed: an in-test
 * TCP peer plays each way an exchange can break after the connection.
 * ========================================================================= */
typedef enum peer_mode {
    PEER_CLOSE,        /* read the request, close: no answer */
    PEER_RESET,        /* read the request, RST */
    PEER_SILENT,       /* read the request, say nothing */
    PEER_PARTIAL,      /* 201, Content-Length 100, 10 bytes, close */
    PEER_HUGE,         /* 201 with a 70000-byte declared body */
    PEER_HUGE_CHUNKED, /* 201, chunked, 70000 bytes */
    PEER_REDIRECT,     /* 302 to a credit */
} peer_mode;

typedef struct peer {
    int lfd;
    int port;
    peer_mode mode;
    pthread_t th;
    volatile int stop;
} peer;

/* Reads one request: headers and a Content-Length body. */
static void peer_read_request(int fd)
{
    char buf[8192];
    size_t n = 0, need = 0;
    char *hdr_end = NULL;

    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            return;
        n += (size_t)r;
        buf[n] = '\0';
        if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n"))) {
            char *cl = strstr(buf, "Content-Length:"); /* libcurl's spelling */
            need = (size_t)(hdr_end - buf) + 4 +
                   (cl ? (size_t)strtoul(cl + 15, NULL, 10) : 0);
        }
        if (hdr_end && n >= need)
            return;
        if (n >= sizeof buf - 1)
            return;
    }
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void *peer_main(void *arg)
{
    peer *pe = arg;
    int fd = accept(pe->lfd, NULL, NULL);
    char big[4096];

    if (fd < 0)
        return NULL;
    peer_read_request(fd);
    memset(big, 'x', sizeof big);
    switch (pe->mode) {
    case PEER_CLOSE:
        break;
    case PEER_RESET: {
        struct linger lg = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        break;
    }
    case PEER_SILENT:
        while (!pe->stop)
            t_sleep_ms(10);
        break;
    case PEER_PARTIAL: {
        static const char r[] = "HTTP/1.1 201 Created\r\nContent-Type: "
                                "application/json\r\nContent-Length: 100\r\n"
                                "\r\n{\"id\":\"cr";
        write_all(fd, r, sizeof r - 1);
        break;
    }
    case PEER_HUGE: {
        static const char r[] = "HTTP/1.1 201 Created\r\nContent-Length: "
                                "70000\r\n\r\n";
        write_all(fd, r, sizeof r - 1);
        for (int i = 0; i < 17; i++)
            write_all(fd, big, sizeof big);
        break;
    }
    case PEER_HUGE_CHUNKED: {
        static const char r[] = "HTTP/1.1 201 Created\r\nTransfer-Encoding: "
                                "chunked\r\n\r\n";
        write_all(fd, r, sizeof r - 1);
        for (int i = 0; i < 18; i++) {
            write_all(fd, "1000\r\n", 6);
            write_all(fd, big, sizeof big);
            write_all(fd, "\r\n", 2);
        }
        write_all(fd, "0\r\n\r\n", 5);
        break;
    }
    case PEER_REDIRECT: {
        static const char r[] =
            "HTTP/1.1 302 Found\r\nLocation: /v1/credits/cr_1\r\n"
            "Content-Length: 0\r\n\r\n";
        write_all(fd, r, sizeof r - 1);
        break;
    }
    }
    close(fd);
    return NULL;
}

static void peer_start(peer *pe, peer_mode mode)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof a;

    memset(pe, 0, sizeof *pe);
    pe->mode = mode;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pe->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(pe->lfd >= 0);
    assert_int_equal(bind(pe->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(pe->lfd, 4), 0);
    assert_int_equal(getsockname(pe->lfd, (struct sockaddr *)&a, &al), 0);
    pe->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&pe->th, NULL, peer_main, pe), 0);
}

static void peer_stop(peer *pe)
{
    pe->stop = 1;
    pthread_join(pe->th, NULL);
    close(pe->lfd);
}

/* One create against a peer in mode; the outcome. */
static og_provider_outcome against_peer(peer_mode mode, int64_t timeout_us)
{
    og_provider *p;
    og_provider_outcome o;
    char url[64];
    peer pe;

    peer_start(&pe, mode);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", pe.port);
    assert_int_equal(og_provider_open(url, NULL, g_table, &p), 0);
    assert_int_equal(create(p, "op-peer", "acct-1", timeout_us, &o), 0);
    og_provider_free(p);
    peer_stop(&pe);
    return o;
}

void a_broken_established_exchange_is_unknown(void **state)
{
    static const struct {
        peer_mode mode;
        const char *reason;
    } cases[] = {
        {PEER_CLOSE, "no_response"},
        {PEER_RESET, "connection_reset"},
        {PEER_SILENT, "timeout"},
        {PEER_PARTIAL, "connection_reset"},
        {PEER_HUGE, "transport_response_too_large"},
        {PEER_HUGE_CHUNKED, "transport_response_too_large"},
        {PEER_REDIRECT, "undocumented_status_302"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_provider_outcome o = against_peer(cases[i].mode, 500000);
        if (o.cls != OG_CLASS_UNKNOWN ||
            strcmp(o.reason, cases[i].reason) != 0)
            fail_msg("peer mode %d: %s %s, expected unknown %s",
                     (int)cases[i].mode, og_outcome_class_name(o.cls),
                     o.reason, cases[i].reason);
        assert_string_equal(o.reference, "");
    }
}

void a_connect_timeout_is_connect_failed(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof a;
    og_provider *p;
    og_provider_outcome o;
    int64_t t0, took;
    int lfd, fill[4];
    char url[64];

    /* A listener whose accept queue is full: the kernel drops our SYN, the
     * connection never completes, and the call's timeout expires during
     * connect (libcurl: CURLE_OPERATION_TIMEDOUT, connect time 0). */
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 0), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        assert_true(fill[i] >= 0);
        (void)connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    t_sleep_ms(100);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    assert_int_equal(og_provider_open(url, NULL, g_table, &p), 0);
    t0 = mono_us();
    assert_int_equal(create(p, "op-backlog", "acct-1", 500000, &o), 0);
    took = mono_us() - t0;
    og_provider_free(p);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "connect_failed");
    assert_true(took >= 500000 * 9 / 10 && took < 2 * 500000);

    /* A TEST-NET-1 address (RFC 5737), never routed: unreachable or timed
     * out at connect, never established. */
    assert_int_equal(og_provider_open("http://192.0.2.1:9", NULL, g_table, &p),
                     0);
    t0 = mono_us();
    assert_int_equal(create(p, "op-net", "acct-1", 300000, &o), 0);
    took = mono_us() - t0;
    og_provider_free(p);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "connect_failed");
    assert_true(took < 2 * 300000);
}
