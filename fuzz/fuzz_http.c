/*
 * fuzz_http.c — the HTTP request edge of `oncegate serve`: routing, path
 * parameters, the Authorization and X-Request-Id headers, content types,
 * the body cap, JSON bodies and every handler's member checks, driven
 * through the same request core libmicrohttpd drives (og_http_req_begin /
 * body / run / end), against a real SQLite store in a temporary directory.
 *
 * Input: four lines — method, path, Authorization value, Content-Type —
 * then the body. A first byte of '@' in the Authorization line is replaced
 * by a real key of role (next byte % 5), so the fuzzer reaches the handlers
 * without having to guess a 256-bit key.
 *
 * Invariants checked on every input: an answer exists, its status is a
 * valid HTTP status, a JSON answer serializes, and no 5xx other than 501
 * (issuing not configured) and 503 (store) is produced: bad input must be a
 * 4xx, never an internal error.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "http.h"

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
                          sizeof err) != 0)
        abort();
    return 0;
}

/* Cuts the next '\n'-terminated line out of *data into a NUL-terminated
 * copy (at most cap - 1 bytes); NULL when the input ends first. */
static char *next_line(const uint8_t **data, size_t *size, char *buf,
                       size_t cap)
{
    const uint8_t *nl = memchr(*data, '\n', *size);
    size_t n;

    if (!nl)
        return NULL;
    n = (size_t)(nl - *data);
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, *data, n);
    buf[n] = '\0';
    *size -= (size_t)(nl - *data) + 1;
    *data = nl + 1;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char method[16], path[1024], auth[512], ctype[256], bearer[600];
    const char *authz = auth;
    og_http_req *r;

    if (!next_line(&data, &size, method, sizeof method) ||
        !next_line(&data, &size, path, sizeof path) ||
        !next_line(&data, &size, auth, sizeof auth) ||
        !next_line(&data, &size, ctype, sizeof ctype))
        return 0;
    if (auth[0] == '@') {
        int role = (unsigned char)auth[1] % OG_ROLE_COUNT;

        snprintf(bearer, sizeof bearer, "Bearer %s", keys[role]);
        authz = bearer;
    }
    r = og_http_req_begin(&srv, method, path, NULL,
                          ctype[0] ? ctype : NULL);
    if (!r)
        return 0;
    og_http_req_body(r, (const char *)data, size);
    og_http_req_run(r, authz[0] ? authz : NULL);
    if (r->status < 200 || r->status > 599)
        abort();
    if (r->status >= 500 && r->status != 501 && r->status != 503)
        abort();
    if (r->answer) {
        char *text = json_dumps(r->answer, JSON_COMPACT);

        if (!text)
            abort();
        free(text);
    }
    og_http_req_end(r);
    return 0;
}
