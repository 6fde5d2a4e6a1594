/*
 * fuzz_http.c — the HTTP edge of `oncegate serve` from raw request bytes:
 * the framing parser (wire.c: request line, fields, Content-Length,
 * chunked bodies), the connection loop (edge.c: early refusals, keep-alive,
 * pipelining), the request core and router (http.c) and every handler's
 * checks (handlers.c), against a real SQLite store in a temporary
 * directory. Only the socket is replaced: og_edge_serve reads the input
 * from memory, in pieces whose sizes the input's first byte sets, and its
 * answers are checked as they are sent.
 *
 * Input: a first byte (the read size: 1 + byte, so heads split anywhere),
 * then the bytes of one connection. "Bearer @" and one more byte are
 * replaced by "Bearer " and a real key of role (byte % OG_ROLE_COUNT), so
 * the fuzzer reaches the handlers without having to guess a 256-bit key.
 *
 * Invariants checked on every answer: it is one HTTP/1.1 status line with
 * a valid status, headers, a Content-Length that frames exactly the body
 * sent, a JSON body (but /metrics) that parses, an error body with "error"
 * and "message"; and no 5xx other than 501 and 503: bad input must be a
 * 4xx (or 505 for an HTTP version not served), never an internal error.
 */
#define _GNU_SOURCE /* nftw, memmem */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "http.h"
#include "ratelimit.h"

static og_srv srv;
static char keys[OG_ROLE_COUNT][48];
static char tmpdir[] = "/tmp/og-fuzz-http.XXXXXX";

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the temporary store and keys when the fuzzer exits. */
static void cleanup(void)
{
    og_store_free(srv.store);
    srv.store = NULL;
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Builds the service once: config defaults, an SQLite store, one
 * principal per role with a known key, an issuer key pair. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char *dir = tmpdir, url[128], kdir[96];
    og_store_options o;
    og_keygen_result kg;
    og_principal p[OG_ROLE_COUNT];
    char err[256] = "";

    (void)argc;
    (void)argv;
    if (!mkdtemp(dir) || sodium_init() < 0 ||
        og_srv_config_defaults(&srv.cfg) != 0)
        abort();
    atexit(cleanup);
    snprintf(kdir, sizeof kdir, "%s/keys", dir);
    if (mkdir(kdir, 0700) != 0 || og_keygen("oncegate", kdir, &kg) != 0)
        abort();
    free(srv.cfg.keys_dir);
    srv.cfg.keys_dir = strdup(kdir);
    snprintf(url, sizeof url, "sqlite:%s/og.db", dir);
    og_store_options_default(&o);
    if (og_store_migrate(url, &o, NULL, NULL) != 0 ||
        og_store_open(url, &o, &srv.store) != 0)
        abort();
    og_log_open("/dev/null", OG_LOG_DEBUG);
    og_grant_policy_init(&srv.policy, srv.cfg.audience, &srv.cfg.timings);
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        memset(&p[i], 0, sizeof p[i]);
        snprintf(p[i].id, sizeof p[i].id, "fuzz-%d", i);
        p[i].roles = 1u << i;
        snprintf(keys[i], sizeof keys[i], "og_fuzz_key_%d", i);
        crypto_hash_sha256(p[i].key_hash, (unsigned char *)keys[i],
                           strlen(keys[i]));
    }
    pthread_mutex_init(&srv.auth_mu, NULL);
    pthread_mutex_init(&srv.drain_mu, NULL);
    pthread_cond_init(&srv.drain_cv, NULL);
    if (og_srv_auth_build(&srv.cfg, p, OG_ROLE_COUNT, &srv.auth, err,
                          sizeof err) != 0 ||
        !(srv.limits = og_ratelimit_new(256)))
        abort();
    return 0;
}

/* One connection in memory. */
typedef struct mem_io {
    const char *in;
    size_t len, at, step;
} mem_io;

static long mem_recv(void *ctx, char *buf, size_t n, int timeout_ms)
{
    mem_io *m = ctx;
    size_t k = m->len - m->at;

    (void)timeout_ms;
    if (k == 0)
        return 0; /* the client's FIN */
    if (k > n)
        k = n;
    if (k > m->step)
        k = m->step;
    memcpy(buf, m->in + m->at, k);
    m->at += k;
    return (long)k;
}

/* Checks one whole answer (HTTP/1.1 status line, headers, body framed by
 * its Content-Length); aborts on a broken invariant. 100 Continue has no
 * body. */
static int mem_send(void *ctx, const char *buf, size_t n)
{
    const char *end, *cl, *ct;
    unsigned status;
    size_t hl, bl;

    (void)ctx;
    if (n < 12 || memcmp(buf, "HTTP/1.1 ", 9) != 0)
        abort();
    status = (unsigned)atoi(buf + 9);
    if (status < 100 || status > 599)
        abort();
    if (status >= 500 && status != 501 && status != 503 && status != 505)
        abort();
    if (status == 100)
        return n == 25 ? 0 : (abort(), -1);
    if (!(end = memmem(buf, n, "\r\n\r\n", 4)))
        abort();
    hl = (size_t)(end - buf) + 4;
    cl = memmem(buf, hl, "\r\nContent-Length: ", 18);
    ct = memmem(buf, hl, "\r\nContent-Type: application/json\r\n", 34);
    if (!cl || sscanf(cl + 18, "%zu", &bl) != 1 || hl + bl != n)
        abort();
    if (memmem(buf + 9, hl - 9, "HTTP/1.1 ", 9)) /* a status line, twice */
        abort();
    if (ct) {
        json_t *j = json_loadb(buf + hl, bl, 0, NULL);

        if (!j || (status >= 400 &&
                   (!json_is_string(json_object_get(j, "error")) ||
                    (!json_object_get(j, "message") &&
                     !json_object_get(j, "consumed") &&
                     !json_object_get(j, "revoked") &&
                     !json_object_get(j, "ready")))))
            abort();
        json_decref(j);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char mark[] = "Bearer @";
    og_edge_io io;
    mem_io m;
    char *in;
    size_t n = 0;

    if (size < 1 || size > 65536)
        return 0;
    m.step = 1 + (size_t)data[0];
    data++;
    size--;
    if (!(in = malloc(size * 8 + 1)))
        return 0;
    for (size_t i = 0; i < size;) {
        if (size - i > sizeof mark - 1 &&
            memcmp(data + i, mark, sizeof mark - 1) == 0) {
            const char *k = keys[data[i + sizeof mark - 1] % OG_ROLE_COUNT];

            memcpy(in + n, "Bearer ", 7);
            n += 7;
            memcpy(in + n, k, strlen(k));
            n += strlen(k);
            i += sizeof mark;
            continue;
        }
        in[n++] = (char)data[i++];
    }
    m.in = in;
    m.len = n;
    m.at = 0;
    io.ctx = &m;
    io.recv = mem_recv;
    io.send = mem_send;
    og_edge_serve(&srv, &io, "fuzz", NULL, NULL);
    free(in);
    return 0;
}
