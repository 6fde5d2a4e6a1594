/*
 * main.c — `oncegate-sandbox`: the flag table, startup, and the signal
 * loop (SIGTERM and SIGINT drain, then exit 0).
 *
 * Every flag is one row of `flags` (name, type, bounds, default, doc): the
 * parser, the bounds check and --help all read it, and docs/sandbox.md
 * copies --help. Startup refuses, naming the problem:
 *   2   usage: an unknown flag, a missing --listen/--state, a value out of
 *       its bounds;
 *   78  --api-key-file unreadable or empty;
 *   74  the state file cannot be opened, or has an unknown schema;
 *   69  the address cannot be listened on;
 *   70  internal (libsodium or threads could not start).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "sandbox.h"

enum {
    EXIT_USAGE = 2,
    EXIT_UNAVAILABLE = 69,
    EXIT_INTERNAL = 70,
    EXIT_STATE = 74,
    EXIT_CONFIG = 78,
};

#define API_KEY_FILE_MAX 4096  /* bytes read from --api-key-file */
#define DRAIN_MAX_S 120        /* > the longest request: a 60 s delay fault
                                  plus the store's 10 s busy wait, twice */

/* ===========================================================================
 * The flag table
 * ========================================================================= */
typedef enum { F_LISTEN, F_PATH, F_SET, F_CLEAR, F_INT } flag_type;

typedef struct flag {
    const char *name;
    flag_type type;
    size_t off;          /* into og_sbx_config */
    const char *arg;     /* the value's name in --help */
    int64_t def, lo, hi; /* F_INT, in the flag's own unit */
    int64_t unit_us;     /* F_INT: microseconds per unit */
    const char *doc;
} flag;

#define CFG(m) offsetof(og_sbx_config, m)
#define S_US INT64_C(1000000)
#define MS_US INT64_C(1000)

static const flag flags[] = {
    {"listen", F_LISTEN, 0, "HOST:PORT", 0, 0, 0, 0,
     "address to listen on; port 0 picks a free port (printed when ready)"},
    {"state", F_PATH, CFG(state_path), "PATH", 0, 0, 0, 0,
     "SQLite state file (created when absent): credits, payouts, keys, "
     "codes, counters"},
    {"control", F_SET, CFG(control), NULL, 0, 0, 0, 0,
     "serve /_control/* (faults, stats, reset, codes, payout returns); "
     "without it they are 404"},
    {"api-key-file", F_PATH, CFG(api_key_file), "PATH", 0, 0, 0, 0,
     "require Authorization: Bearer <the file's content, trimmed>"},
    {"retention-seconds", F_INT, CFG(policy.retention_us), "N", 86400, 1,
     INT64_C(315360000), S_US,
     "how long an idempotency key is remembered; after it the key is new"},
    {"skew-seconds", F_INT, CFG(policy.skew_us), "N", 5, 0, 86400, S_US,
     "a create takes effect only until expires_at + N"},
    {"visibility-delay-ms", F_INT, CFG(policy.visibility_delay_us), "N", 0, 0,
     3600000, MS_US, "a new credit or payout is hidden from lookups for N ms"},
    {"async-complete-ms", F_INT, CFG(policy.async_complete_us), "N", 1000, 0,
     3600000, MS_US,
     "an async- account's credit (dst_async_ destination's payout) stays "
     "pending for N ms"},
    {"no-atomic-same-key", F_CLEAR, CFG(policy.atomic_same_key), NULL, 0, 0,
     0, 0, "concurrent first uses of a key race and may create duplicates"},
    {"race-gap-ms", F_INT, CFG(policy.race_gap_us), "N", 50, 0, 60000, MS_US,
     "with --no-atomic-same-key: the gap between key check and insert"},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

/* --help, generated from the table. */
static void usage(FILE *f)
{
    char left[64];

    fputs("usage: oncegate-sandbox --listen HOST:PORT --state PATH "
          "[options]\n\n"
          "A stand-in billing provider with documented idempotency "
          "(docs/sandbox.md).\n\n",
          f);
    for (size_t i = 0; i < N_FLAGS; i++) {
        snprintf(left, sizeof left, "--%s%s%s", flags[i].name,
                 flags[i].arg ? " " : "", flags[i].arg ? flags[i].arg : "");
        fprintf(f, "  %-26s %s", left, flags[i].doc);
        if (flags[i].type == F_INT)
            fprintf(f, " (default %lld, %lld..%lld)", (long long)flags[i].def,
                    (long long)flags[i].lo, (long long)flags[i].hi);
        fputc('\n', f);
    }
    fputs("\nWhen ready, prints `oncegate-sandbox: listening on "
          "http://HOST:PORT`.\nLogs are JSON lines on stderr. SIGTERM drains "
          "and exits 0.\nexit: 0 drained, 2 usage, 69 cannot listen, 70 "
          "internal, 74 state, 78 api key file.\n",
          f);
}

/* Every default from the table. */
static void config_defaults(og_sbx_config *c)
{
    memset(c, 0, sizeof *c);
    c->policy.atomic_same_key = true;
    for (size_t i = 0; i < N_FLAGS; i++)
        if (flags[i].type == F_INT)
            *(int64_t *)((char *)c + flags[i].off) =
                flags[i].def * flags[i].unit_us;
}

/* A decimal integer within the flag's bounds. 0 or -1. */
static int parse_int(const flag *fl, const char *v, int64_t *out)
{
    char *end;
    long long n;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < fl->lo || n > fl->hi)
        return -1;
    *out = (int64_t)n;
    return 0;
}

/* Applies one flag's value to c. 0, or -1 after saying why on stderr. */
static int flag_apply(og_sbx_config *c, const flag *fl, const char *v)
{
    char *base = (char *)c + fl->off;
    int64_t n;

    switch (fl->type) {
    case F_LISTEN:
        if (og_sbx_listen_parse(v, c->listen_host, sizeof c->listen_host,
                                &c->listen_port) == 0)
            return 0;
        fprintf(stderr, "oncegate-sandbox: --listen: expected HOST:PORT\n");
        return -1;
    case F_PATH:
        /* "" would make SQLite open a private temporary database. */
        if (v[0]) {
            *(const char **)base = v;
            return 0;
        }
        fprintf(stderr, "oncegate-sandbox: --%s: expected a path\n",
                fl->name);
        return -1;
    case F_SET: *(bool *)base = true; return 0;
    case F_CLEAR: *(bool *)base = false; return 0;
    case F_INT:
        if (parse_int(fl, v, &n) == 0) {
            *(int64_t *)base = n * fl->unit_us;
            return 0;
        }
        fprintf(stderr, "oncegate-sandbox: --%s: expected an integer in "
                        "%lld..%lld\n", fl->name, (long long)fl->lo,
                (long long)fl->hi);
        return -1;
    }
    return -1;
}

/* Parses argv into c. OG exit code; *done when --help was answered. */
static int parse_args(int argc, char **argv, og_sbx_config *c, bool *done)
{
    struct option longopts[N_FLAGS + 2];
    bool have_listen = false;
    int ch;

    for (size_t i = 0; i < N_FLAGS; i++)
        longopts[i] = (struct option){
            flags[i].name,
            flags[i].arg ? required_argument : no_argument, NULL,
            256 + (int)i};
    longopts[N_FLAGS] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[N_FLAGS + 1] = (struct option){NULL, 0, NULL, 0};
    config_defaults(c);
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            *done = true;
            return 0;
        }
        if (ch < 256 || flag_apply(c, &flags[ch - 256], optarg) != 0)
            goto bad;
        have_listen |= flags[ch - 256].type == F_LISTEN;
    }
    if (optind == argc && have_listen && c->state_path)
        return 0;
    fprintf(stderr, "oncegate-sandbox: --listen and --state are required\n");
bad:
    usage(stderr);
    return EXIT_USAGE;
}

/* ===========================================================================
 * The API key: only its SHA-256 is kept.
 * ========================================================================= */

/* Reads at most API_KEY_FILE_MAX bytes of path into buf; length or -1. */
static ssize_t read_small_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    ssize_t got;

    if (fd < 0)
        return -1;
    while (n < cap && (got = read(fd, buf + n, cap - n)) != 0) {
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            close(fd);
            return -1;
        }
        n += (size_t)got;
    }
    close(fd);
    return (ssize_t)n;
}

/* Loads --api-key-file: its content with surrounding white space trimmed,
 * hashed into srv; the plain key is wiped. OG exit code. */
static int load_api_key(og_sbx_srv *srv)
{
    char buf[API_KEY_FILE_MAX];
    ssize_t n;
    size_t a = 0, b;

    if (!srv->cfg.api_key_file)
        return 0;
    n = read_small_file(srv->cfg.api_key_file, buf, sizeof buf);
    b = n > 0 ? (size_t)n : 0;
    while (a < b && strchr(" \t\r\n", buf[a]))
        a++;
    while (b > a && strchr(" \t\r\n", buf[b - 1]))
        b--;
    if (n < 0 || (size_t)n == sizeof buf || a == b) {
        sodium_memzero(buf, sizeof buf);
        fprintf(stderr, "oncegate-sandbox: --api-key-file %s: unreadable, "
                        "empty or longer than %d bytes\n",
                srv->cfg.api_key_file, API_KEY_FILE_MAX - 1);
        return EXIT_CONFIG;
    }
    crypto_hash_sha256(srv->api_key_hash, (unsigned char *)buf + a, b - a);
    sodium_memzero(buf, sizeof buf);
    srv->auth_required = true;
    return 0;
}

/* ===========================================================================
 * Running
 * ========================================================================= */

/* SIGTERM: stop accepting, let requests in flight finish (bounded), stop. */
static void drain(og_sbx_srv *srv, struct MHD_Daemon *d)
{
    struct timespec deadline;

    atomic_store(&srv->draining, true);
    og_sbx_http_quiesce(d);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += DRAIN_MAX_S;
    pthread_mutex_lock(&srv->drain_mu);
    while (atomic_load(&srv->inflight) > 0)
        if (pthread_cond_timedwait(&srv->drain_cv, &srv->drain_mu,
                                   &deadline) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&srv->drain_mu);
    og_sbx_log(OG_SBX_LOG_INFO, "drained",
               json_pack("{s:i}", "in_flight_at_stop",
                         atomic_load(&srv->inflight)));
    og_sbx_http_stop(d);
}

/* The ready event: every setting, never the key. */
static void log_ready(const og_sbx_srv *srv, const char *url)
{
    const og_sbx_policy *p = &srv->cfg.policy;

    og_sbx_log(OG_SBX_LOG_INFO, "ready",
               json_pack("{s:s, s:s, s:b, s:b, s:I, s:I, s:I, s:I, s:b, s:I}",
                         "url", url, "state", srv->cfg.state_path, "control",
                         srv->cfg.control, "auth", srv->auth_required,
                         "retention_seconds",
                         (json_int_t)(p->retention_us / S_US), "skew_seconds",
                         (json_int_t)(p->skew_us / S_US),
                         "visibility_delay_ms",
                         (json_int_t)(p->visibility_delay_us / MS_US),
                         "async_complete_ms",
                         (json_int_t)(p->async_complete_us / MS_US),
                         "atomic_same_key", p->atomic_same_key, "race_gap_ms",
                         (json_int_t)(p->race_gap_us / MS_US)));
}

/* Opens the state, listens, announces readiness and waits for a signal. */
static int serve(og_sbx_srv *srv, const sigset_t *set)
{
    struct MHD_Daemon *d = NULL;
    char err[512], url[320];
    int port = 0, sig = 0;

    if (og_sbx_store_open(srv->cfg.state_path, &srv->store, err,
                          sizeof err) != 0) {
        fprintf(stderr, "oncegate-sandbox: %s\n", err);
        return EXIT_STATE;
    }
    if (og_sbx_http_start(srv, &d, &port, err, sizeof err) != 0) {
        fprintf(stderr, "oncegate-sandbox: %s\n", err);
        return EXIT_UNAVAILABLE;
    }
    snprintf(url, sizeof url,
             strchr(srv->cfg.listen_host, ':') ? "http://[%s]:%d"
                                               : "http://%s:%d",
             srv->cfg.listen_host, port);
    log_ready(srv, url);
    printf("oncegate-sandbox: listening on %s\n", url);
    fflush(stdout);
    while (sig != SIGTERM && sig != SIGINT)
        if (sigwait(set, &sig) != 0)
            sig = 0;
    og_sbx_log(OG_SBX_LOG_INFO, "draining",
               json_pack("{s:s, s:i}", "signal",
                         sig == SIGTERM ? "SIGTERM" : "SIGINT", "in_flight",
                         atomic_load(&srv->inflight)));
    drain(srv, d);
    return 0;
}

int main(int argc, char **argv)
{
    og_sbx_srv srv;
    sigset_t set;
    bool done = false;
    int rc;

    memset(&srv, 0, sizeof srv);
    srv.routes = og_sbx_routes;
    srv.n_routes = og_sbx_n_routes;
    if ((rc = parse_args(argc, argv, &srv.cfg, &done)) != 0 || done)
        return rc;
    if (sodium_init() < 0 || pthread_mutex_init(&srv.faults_mu, NULL) != 0 ||
        pthread_mutex_init(&srv.drain_mu, NULL) != 0 ||
        pthread_cond_init(&srv.drain_cv, NULL) != 0)
        return EXIT_INTERNAL;
    /* Blocked before any thread exists, so only sigwait sees them; a
     * client that hangs up must not kill the process (SIGPIPE). */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((rc = load_api_key(&srv)) == 0)
        rc = serve(&srv, &set);
    og_sbx_store_free(srv.store);
    sodium_memzero(srv.api_key_hash, sizeof srv.api_key_hash);
    pthread_cond_destroy(&srv.drain_cv);
    pthread_mutex_destroy(&srv.drain_mu);
    pthread_mutex_destroy(&srv.faults_mu);
    return rc;
}
