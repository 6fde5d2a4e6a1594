/*
 * provider_test.c — claims about the provider client (lib/provider/
 * client.c) against the REAL sandbox (oncegate-sandbox, OG_TEST_SANDBOX),
 * classified by providers/sandbox-credits.v1.json:
 *
 *   - a create with an idempotency key is SUCCEEDED with the credit id as
 *     its reference; the same key again is SUCCEEDED with the same
 *     reference and the sandbox still counts one credit — also when eight
 *     threads send it at once through one client;
 *   - closed- is FAILED account_closed (and stays so), busy- is TRANSIENT
 *     with Retry-After, async- is UNKNOWN pending until a lookup finds it
 *     final, a late request is FAILED request_expired, a key reused with
 *     other parameters is UNKNOWN;
 *   - every fault that may follow the effect is UNKNOWN, and the credit is
 *     there: drop_response_after_effect, error_500_after_effect,
 *     delay_after_effect beyond the client's timeout (which returns within
 *     2x its timeout), exit_after_effect (found after a restart on the same
 *     state); delay_before_effect beyond the timeout is UNKNOWN too, and the
 *     credit appears AFTER the client gave up;
 *   - a lookup of a missing reference is "not found", never a failure; an
 *     unreachable provider is OG_EPROVIDER_UNAVAILABLE;
 *   - connection refused (the sandbox stopped) is connect_failed, which the
 *     table classifies TRANSIENT: not one byte was sent. An established
 *     connection that fails is never that: closed without an answer, reset,
 *     silent, cut short, oversized or redirected (a small in-test TCP peer
 *     plays each) are all UNKNOWN;
 *   - bad arguments are refused before anything is sent (the sandbox counts
 *     no request); the API key is sent as a bearer token and a wrong or
 *     missing one is TRANSIENT unauthorized;
 *   - payouts (og_provider_create_payout, og_provider_lookup_payout,
 *     classified by providers/sandbox-payouts.v1.json) make the same claims
 *     from the same test bodies (a capi row per API) — created, replayed,
 *     destination_closed FAILED, busy TRANSIENT, accepted-for-processing
 *     UNKNOWN until a lookup finds it completed, late FAILED, a lost answer
 *     UNKNOWN and found — and: a returned payout is still SUCCEEDED; a
 *     payout listed with other terms is terms_mismatch; a lookup after
 *     expires_at + skew + visibility delay that finds nothing stays so (the
 *     request sent then is refused); a bad destination is
 *     OG_EDESTINATION with nothing sent, and no outcome carries it.
 *
 * Each test starts its own sandbox: `--listen 127.0.0.1:0 --state DIR/s.db
 * --control`, reading `oncegate-sandbox: listening on http://HOST:PORT`.
 *
 * Recording mode (a test helper, not a test): `provider_test --record
 * credits|payouts PATH` (`--record PATH`: credits) starts sandboxes, sends
 * every documented kind of request of that API with a plain libcurl
 * handle, and writes tests/vectors/sandbox-<api>.v1.jsonl: what the
 * sandbox answered (status, Content-Type, Retry-After, Idempotent-Replayed,
 * the exact body) with the expectation written here by hand — never
 * computed by the classifier — followed by the invented undocumented
 * answers. Both APIs are recorded by the same code through a rec_api row;
 * payouts add a return (the lookup still finds the payout, the create's
 * key still replays its answer). test_classify replays both files.
 *
 * OG_TEST_SOURCE_ROOT: the repository root (for the table).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>

#include "oncegate/provider.h"

#define TABLE_PATH "providers/sandbox-credits.v1.json"
#define PAYOUTS_TABLE_PATH "providers/sandbox-payouts.v1.json"
#define CALL_US (INT64_C(10) * 1000000) /* a call that should not time out */
#define API_KEY "sbx-test-key-7f3a9c"

static og_provider_table *g_table;          /* credits */
static og_provider_table *g_payouts_table;  /* payouts */
/* The expires_at every create of this run sends: fixed, because it is
 * part of the request the sandbox compares under a key (a retry computing
 * "now + 1 h" afresh would be a different request: idempotency_mismatch). */
static int64_t g_expires_us;

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ===========================================================================
 * The sandbox process
 * ========================================================================= */
typedef struct sbx {
    pid_t pid;
    char dir[PATH_MAX];   /* scratch: s.db, stdout, stderr, key */
    char url[128];        /* http://127.0.0.1:PORT */
} sbx;

/* Starts the sandbox on dir's state with extra flags (NULL-terminated).
 * Returns 0 or -1 (message on stderr). */
static int sbx_start(sbx *s, const char *const *extra)
{
    const char *bin = getenv("OG_TEST_SANDBOX");
    char state[PATH_MAX + 8], out[PATH_MAX + 8], err[PATH_MAX + 8];
    const char *argv[32];
    int n = 0;

    if (!bin) {
        fprintf(stderr, "OG_TEST_SANDBOX is not set\n");
        return -1;
    }
    snprintf(state, sizeof state, "%s/s.db", s->dir);
    snprintf(out, sizeof out, "%s/stdout", s->dir);
    snprintf(err, sizeof err, "%s/stderr", s->dir);
    unlink(out);
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--state";
    argv[n++] = state;
    argv[n++] = "--control";
    for (; extra && *extra && n < 30; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;

    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    /* Wait up to 20 s for the ready line. */
    for (int i = 0; i < 2000; i++) {
        char line[256] = "";
        FILE *f = fopen(out, "r");
        int status;

        if (f) {
            const char *p;
            if (fgets(line, sizeof line, f) &&
                (p = strstr(line, "listening on "))) {
                snprintf(s->url, sizeof s->url, "%s", p + 13);
                s->url[strcspn(s->url, "\r\n")] = '\0';
                fclose(f);
                return 0;
            }
            fclose(f);
        }
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "oncegate-sandbox exited early (%d); see %s\n",
                    status, err);
            s->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "oncegate-sandbox did not become ready\n");
    return -1;
}

/* Stops the sandbox (SIGTERM, then SIGKILL after 10 s); returns its wait
 * status, or -1 when it was not running. */
static int sbx_stop(sbx *s)
{
    int status = -1;

    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 1000; i++) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return status;
        }
        sleep_ms(10);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return status;
}

/* Waits for a sandbox that is exiting by itself; its wait status. */
static int sbx_reap(sbx *s)
{
    int status = -1;

    for (int i = 0; i < 1000 && s->pid > 0; i++) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return status;
        }
        sleep_ms(10);
    }
    return -1;
}

static void rm_rf(const char *dir)
{
    static const char *const files[] = {"s.db", "s.db-wal", "s.db-shm",
                                        "stdout", "stderr", "key"};
    char p[PATH_MAX + 16];

    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int sbx_new(sbx *s, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/og-provider-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    return sbx_start(s, extra);
}

static void sbx_free(sbx *s)
{
    sbx_stop(s);
    rm_rf(s->dir);
}

/* ===========================================================================
 * Plain HTTP (control calls and the recorder): a raw libcurl exchange.
 * ========================================================================= */
typedef struct raw {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
    char content_type[128], retry_after[64], replayed[16];
} raw;

static size_t raw_body(char *p, size_t sz, size_t n, void *ud)
{
    raw *r = ud;
    char *nb = realloc(r->body, r->len + sz * n + 1);

    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

/* Copies the value of header `name` from line p (n bytes) into dst. */
static void header_value(const char *p, size_t n, const char *name, char *dst,
                         size_t dstlen)
{
    size_t k = strlen(name), e = n;

    if (n <= k || strncasecmp(p, name, k) != 0 || p[k] != ':')
        return;
    k++;
    while (k < n && p[k] == ' ')
        k++;
    while (e > k && (p[e - 1] == '\r' || p[e - 1] == '\n'))
        e--;
    snprintf(dst, dstlen, "%.*s", (int)(e - k), p + k);
}

static size_t raw_header(char *p, size_t sz, size_t n, void *ud)
{
    raw *r = ud;

    header_value(p, sz * n, "Content-Type", r->content_type,
                 sizeof r->content_type);
    header_value(p, sz * n, "Retry-After", r->retry_after,
                 sizeof r->retry_after);
    header_value(p, sz * n, "Idempotent-Replayed", r->replayed,
                 sizeof r->replayed);
    return sz * n;
}

/* One request. headers: NULL-terminated list of "Name: value". body NULL:
 * no body. */
static raw http(const char *method, const char *url,
                const char *const *headers, const char *body, long timeout_ms)
{
    struct curl_slist *h = NULL;
    raw r = {0};
    CURL *c = curl_easy_init();

    assert_non_null(c);
    for (; headers && *headers; headers++)
        h = curl_slist_append(h, *headers);
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, raw_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, raw_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)strlen(body));
    }
    r.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

/* POST /_control/faults {"fault":f,"count":1[,"ms":ms]}. */
static void arm(const sbx *s, const char *fault, int ms)
{
    static const char *const hs[] = {"Content-Type: application/json", NULL};
    char url[256], body[128];
    raw r;

    snprintf(url, sizeof url, "%s/_control/faults", s->url);
    if (ms >= 0)
        snprintf(body, sizeof body, "{\"fault\":\"%s\",\"count\":1,\"ms\":%d}",
                 fault, ms);
    else
        snprintf(body, sizeof body, "{\"fault\":\"%s\",\"count\":1}", fault);
    r = http("POST", url, hs, body, 10000);
    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("arming %s: %d %ld %s", fault, r.rc, r.status, r.body);
    free(r.body);
}

/* One counter of GET /_control/stats. */
static long long stat_of(const sbx *s, const char *name)
{
    char url[256];
    json_t *j;
    long long v;
    raw r;

    snprintf(url, sizeof url, "%s/_control/stats", s->url);
    r = http("GET", url, NULL, NULL, 10000);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_integer(json_object_get(j, name)));
    v = json_integer_value(json_object_get(j, name));
    json_decref(j);
    free(r.body);
    return v;
}

/* ===========================================================================
 * Fixtures
 * ========================================================================= */
typedef struct fx {
    sbx s;
    og_provider *p;
} fx;

/* The table at rel (under OG_TEST_SOURCE_ROOT) into *out; 0 or -1. */
static int load_one(const char *rel, og_provider_table **out)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char path[PATH_MAX];
    og_provider_table_error err;

    snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
    if (og_provider_table_load_file(path, out, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return -1;
    }
    return 0;
}

static int load_table(void **state)
{
    if (load_one(TABLE_PATH, &g_table) != 0 ||
        load_one(PAYOUTS_TABLE_PATH, &g_payouts_table) != 0)
        return -1;
    g_expires_us = wall_us() + INT64_C(3600) * 1000000;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

static int free_table(void **state)
{
    og_provider_table_free(g_table);
    og_provider_table_free(g_payouts_table);
    curl_global_cleanup();
    return 0;
}

/* A sandbox with extra flags and a client classifying by table t. */
static int fx_up_table(void **state, const char *const *extra,
                       const og_provider_table *t)
{
    fx *f = calloc(1, sizeof *f);

    if (!f || sbx_new(&f->s, extra) != 0 ||
        og_provider_open(f->s.url, NULL, t, &f->p) != 0) {
        if (f)
            sbx_free(&f->s);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fx_up_with(void **state, const char *const *extra)
{
    return fx_up_table(state, extra, g_table);
}

static int fx_up(void **state)
{
    return fx_up_with(state, NULL);
}

/* async- credits (dst_async_ payouts) complete after 300 ms, not 1 s. */
static const char *const async_fast[] = {"--async-complete-ms", "300", NULL};

static int fx_up_async(void **state)
{
    return fx_up_with(state, async_fast);
}

/* A client of the payouts API (providers/sandbox-payouts.v1.json). */
static int fx_up_payouts(void **state)
{
    return fx_up_table(state, NULL, g_payouts_table);
}

static int fx_up_payouts_async(void **state)
{
    return fx_up_table(state, async_fast, g_payouts_table);
}

static int fx_down(void **state)
{
    fx *f = *state;

    if (f) {
        og_provider_free(f->p);
        sbx_free(&f->s);
        free(f);
    }
    return 0;
}

/* One API of the client as the claims below use it: its create call, a
 * lookup by reference, its id prefix and test targets, and the sandbox's
 * counters. A claim both APIs make is ONE body taking a capi. */
typedef struct capi {
    int (*create)(og_provider *, const char *, const char *, const char *,
                  const char *, const char *, int64_t, int64_t,
                  og_provider_outcome *);
    bool payouts;            /* lookups verify the terms of open */
    const char *id_prefix, *open, *closed, *busy, *async, *closed_code;
    const char *c_rows, *c_replays, *c_requests;
} capi;

static const capi CREDITS = {og_provider_create_credit, false, "cr_",
                             "acct-1", "closed-7", "busy-7", "async-7",
                             "account_closed", "credits_created",
                             "idempotent_replays", "create_requests"};
static const capi PAYOUTS = {og_provider_create_payout, true, "po_",
                             "dst_tok_7f3a", "dst_closed_7", "dst_busy_7",
                             "dst_async_7", "destination_closed",
                             "payouts_created", "payout_replays",
                             "payout_requests"};

/* A create of a for key on target (amount 25.00 EUR, reference = key,
 * expiry g_expires_us), bounded by timeout_us. Returns the call's rc; the
 * outcome never carries the target. */
static int create_in(const capi *a, og_provider *p, const char *key,
                     const char *target, int64_t timeout_us,
                     og_provider_outcome *o)
{
    int rc;

    memset(o, 0x5a, sizeof *o);
    rc = a->create(p, key, target, "25.00", "EUR", key, g_expires_us,
                   timeout_us, o);
    if (rc == 0 && a->payouts)
        assert_null(strstr(o->reason, target));
    if (rc == 0 && a->payouts)
        assert_null(strstr(o->reference, target));
    return rc;
}

/* A credit create: create_in(&CREDITS, ...). */
static int create(og_provider *p, const char *key, const char *account,
                  int64_t timeout_us, og_provider_outcome *o)
{
    return create_in(&CREDITS, p, key, account, timeout_us, o);
}

/* A lookup of a by reference; a payout lookup verifies the terms a
 * create_in of target sent. */
static int lookup_in(const capi *a, og_provider *p, const char *reference,
                     const char *target, og_provider_outcome *o)
{
    memset(o, 0x5a, sizeof *o);
    return a->payouts ? og_provider_lookup_payout(p, reference, target,
                                                  "25.00", "EUR", CALL_US, o)
                      : og_provider_lookup(p, reference, CALL_US, o);
}

/* A named test of one claim for one API: the body is shared. */
#define CLAIM(name, call)                                                      \
    static void name(void **state)                                             \
    {                                                                          \
        call;                                                                  \
    }

static void assert_outcome(const og_provider_outcome *o, og_outcome_class cls,
                           const char *reason)
{
    if (o->cls != cls || strcmp(o->reason, reason) != 0)
        fail_msg("outcome %s %s, expected %s %s",
                 og_outcome_class_name(o->cls), o->reason,
                 og_outcome_class_name(cls), reason);
}

/* A create is SUCCEEDED with the new record's id as its reference. */
static void create_succeeds(fx *f, const capi *a)
{
    og_provider_outcome o;

    assert_int_equal(create_in(a, f->p, "op-0001", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(strncmp(o.reference, a->id_prefix, 3), 0);
    assert_int_equal(strlen(o.reference), 27);
    assert_int_equal(o.rule, 0);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
}

CLAIM(create_succeeds_with_the_credit_id, create_succeeds(*state, &CREDITS))
CLAIM(payout_create_succeeds_with_the_payout_id,
      create_succeeds(*state, &PAYOUTS))

/* The same key again is SUCCEEDED with the same reference, one record. */
static void same_key_replays(fx *f, const capi *a)
{
    og_provider_outcome o1, o2;

    assert_int_equal(create_in(a, f->p, "op-0002", a->open, CALL_US, &o1), 0);
    assert_outcome(&o1, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(create_in(a, f->p, "op-0002", a->open, CALL_US, &o2), 0);
    assert_outcome(&o2, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o1.reference, o2.reference);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
    assert_int_equal(stat_of(&f->s, a->c_replays), 1);
    assert_int_equal(stat_of(&f->s, a->c_requests), 2);
}

CLAIM(the_same_key_again_replays_the_same_credit,
      same_key_replays(*state, &CREDITS))
CLAIM(the_same_key_again_replays_the_same_payout,
      same_key_replays(*state, &PAYOUTS))

/* A closed target is FAILED with the closed code, and stays so. */
static void closed_fails(fx *f, const capi *a)
{
    og_provider_outcome o;

    for (int i = 0; i < 2; i++) {
        assert_int_equal(create_in(a, f->p, "op-0003", a->closed, CALL_US, &o),
                         0);
        assert_outcome(&o, OG_CLASS_FAILED, a->closed_code);
        assert_string_equal(o.reference, "");
    }
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(closed_account_fails_and_stays_failed, closed_fails(*state, &CREDITS))
CLAIM(closed_destination_fails_and_stays_failed,
      closed_fails(*state, &PAYOUTS))

/* A busy target is TRANSIENT rate_limited with Retry-After. */
static void busy_is_transient(fx *f, const capi *a)
{
    og_provider_outcome o;

    assert_int_equal(create_in(a, f->p, "op-0004", a->busy, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "rate_limited");
    assert_int_equal(o.retry_after_s, 1);
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(busy_account_is_transient_with_retry_after,
      busy_is_transient(*state, &CREDITS))
CLAIM(busy_destination_is_transient_with_retry_after,
      busy_is_transient(*state, &PAYOUTS))

/* An async target is UNKNOWN pending (accepted is not completed) until a
 * lookup finds it final; then its key answers the complete record. */
static void async_is_pending_until_found(fx *f, const capi *a)
{
    og_provider_outcome o, l;
    int rc = -1;

    assert_int_equal(create_in(a, f->p, "op-0005", a->async, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "pending");
    assert_int_equal(strncmp(o.reference, a->id_prefix, 3), 0);
    /* Found, but not final: still UNKNOWN. */
    rc = lookup_in(a, f->p, "op-0005", a->async, &l);
    if (rc == 1 && l.cls == OG_CLASS_UNKNOWN) {
        assert_string_equal(l.reason, "pending");
        assert_string_equal(l.reference, o.reference);
    }
    /* Completes after --async-complete-ms 300. */
    for (int i = 0; i < 100; i++) {
        rc = lookup_in(a, f->p, "op-0005", a->async, &l);
        assert_int_equal(rc, 1);
        if (l.cls == OG_CLASS_SUCCEEDED)
            break;
        sleep_ms(50);
    }
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "found");
    assert_string_equal(l.reference, o.reference);
    /* And the same key now answers the complete record. */
    assert_int_equal(create_in(a, f->p, "op-0005", a->async, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, l.reference);
}

CLAIM(async_account_is_pending_until_a_lookup_finds_it,
      async_is_pending_until_found(*state, &CREDITS))
CLAIM(async_payout_is_pending_until_a_lookup_finds_it_completed,
      async_is_pending_until_found(*state, &PAYOUTS))

/* A request whose expires_at is past the sandbox's skew is FAILED
 * request_expired, and nothing was created. */
static void late_fails_expired(fx *f, const capi *a)
{
    og_provider_outcome o;

    /* expires_at a minute ago: past the sandbox's 5 s skew. */
    assert_int_equal(a->create(f->p, "op-0006", a->open, "1", "EUR",
                               "op-0006", wall_us() - INT64_C(60000000),
                               CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_FAILED, "request_expired");
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(a_late_request_fails_expired, late_fails_expired(*state, &CREDITS))
CLAIM(a_late_payout_fails_expired, late_fails_expired(*state, &PAYOUTS))

static void a_key_reused_with_other_parameters_is_unknown(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    assert_int_equal(create(f->p, "op-0007", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    /* This request creates nothing, but the key's first use did. */
    assert_int_equal(og_provider_create_credit(f->p, "op-0007", "acct-1", "26",
                                               "EUR", "op-0007",
                                               g_expires_us, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "idempotency_mismatch");
    assert_int_equal(stat_of(&f->s, "credits_created"), 1);
}

/* ===========================================================================
 * Faults after (or around) the effect: UNKNOWN, and the credit exists
 * ========================================================================= */

/* A lookup of a's reference (terms: target) that must find a final
 * record; its id. */
static void must_find_in(fx *f, const capi *a, const char *reference,
                         const char *target,
                         char id[OG_PROVIDER_REF_MAX + 1])
{
    og_provider_outcome l;

    assert_int_equal(lookup_in(a, f->p, reference, target, &l), 1);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "found");
    snprintf(id, OG_PROVIDER_REF_MAX + 1, "%s", l.reference);
}

/* A lookup of a credit's reference that must find it final; its id. */
static void must_find(fx *f, const char *reference, char id[OG_PROVIDER_REF_MAX + 1])
{
    must_find_in(f, &CREDITS, reference, NULL, id);
}

/* The answer lost after the effect (seed 002's timeout after the provider
 * completed): UNKNOWN, the lookup finds the record, and resending with
 * the key replays it — one record, no second one. */
static void dropped_is_unknown_and_found(fx *f, const capi *a)
{
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;

    arm(&f->s, "drop_response_after_effect", -1);
    assert_int_equal(create_in(a, f->p, "op-0010", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "no_response");
    must_find_in(f, a, "op-0010", a->open, id);
    /* Resending with the same key replays that record; still one. */
    assert_int_equal(create_in(a, f->p, "op-0010", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, id);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
}

CLAIM(dropped_response_is_unknown_and_the_credit_exists,
      dropped_is_unknown_and_found(*state, &CREDITS))
CLAIM(dropped_payout_response_is_unknown_and_a_lookup_finds_the_payout,
      dropped_is_unknown_and_found(*state, &PAYOUTS))

static void error_500_after_effect_is_unknown(void **state)
{
    fx *f = *state;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;

    arm(&f->s, "error_500_after_effect", -1);
    assert_int_equal(create(f->p, "op-0011", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "internal");
    must_find(f, "op-0011", id);
    assert_int_equal(stat_of(&f->s, "credits_created"), 1);
}

static void error_500_before_effect_is_unknown_too(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    /* The same answer as after the effect: the client cannot tell, so it
     * must not guess. */
    arm(&f->s, "error_500_before_effect", -1);
    assert_int_equal(create(f->p, "op-0012", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "internal");
    assert_int_equal(og_provider_lookup(f->p, "op-0012", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "not_found");
}

static void a_delay_after_effect_beyond_the_timeout_is_unknown(void **state)
{
    fx *f = *state;
    const int64_t timeout_us = 1000000;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;
    int64_t t0, took;

    arm(&f->s, "delay_after_effect", 4000);
    t0 = mono_us();
    assert_int_equal(create(f->p, "op-0013", "acct-1", timeout_us, &o), 0);
    took = mono_us() - t0;
    assert_outcome(&o, OG_CLASS_UNKNOWN, "timeout");
    /* The call returns on its own timeout: not before it, and within 2x. */
    assert_true(took >= timeout_us * 9 / 10);
    assert_true(took < 2 * timeout_us);
    must_find(f, "op-0013", id);
}

static void a_delay_before_effect_creates_after_the_client_gave_up(void **state)
{
    fx *f = *state;
    const int64_t timeout_us = 500000;
    og_provider_outcome o;
    int rc = 0;

    arm(&f->s, "delay_before_effect", 1500);
    assert_int_equal(create(f->p, "op-0014", "acct-1", timeout_us, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "timeout");
    /* Nothing yet — and "not found" proves nothing: the credit appears
     * once the sandbox wakes up. */
    for (int i = 0; i < 100 && rc == 0; i++) {
        rc = og_provider_lookup(f->p, "op-0014", CALL_US, &o);
        assert_true(rc == 0 || rc == 1);
        if (rc == 0)
            sleep_ms(50);
    }
    assert_int_equal(rc, 1);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "found");
}

static void exit_after_effect_is_unknown_and_durable(void **state)
{
    fx *f = *state;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;
    int status;

    arm(&f->s, "exit_after_effect", -1);
    assert_int_equal(create(f->p, "op-0015", "acct-1", CALL_US, &o), 0);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_true(strcmp(o.reason, "no_response") == 0 ||
                strcmp(o.reason, "connection_reset") == 0);
    status = sbx_reap(&f->s);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 137);

    /* Down: a lookup cannot tell anything. */
    assert_int_equal(og_provider_lookup(f->p, "op-0015", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);
    /* Restarted on the same state: the credit was committed. */
    assert_int_equal(sbx_start(&f->s, NULL), 0);
    og_provider_free(f->p);
    assert_int_equal(og_provider_open(f->s.url, NULL, g_table, &f->p), 0);
    must_find(f, "op-0015", id);
    assert_int_equal(create(f->p, "op-0015", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, id);
}

/* ===========================================================================
 * Lookups and an unreachable provider
 * ========================================================================= */
static void a_missing_reference_is_not_found_never_failed(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    memset(&o, 0x5a, sizeof o);
    assert_int_equal(og_provider_lookup(f->p, "never-sent", CALL_US, &o), 0);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_string_equal(o.reason, "not_found");
    assert_string_equal(o.reference, "");
    assert_int_equal(stat_of(&f->s, "lookups"), 1);
}

static void connection_refused_is_connect_failed(void **state)
{
    fx *f = *state;
    og_provider_outcome o;
    int64_t t0;

    sbx_stop(&f->s);
    t0 = mono_us();
    assert_int_equal(create(f->p, "op-0020", "acct-1", CALL_US, &o), 0);
    /* Refused at connect: no byte was sent, so the table may call it
     * TRANSIENT (no effect, retry allowed) — see its "why". */
    assert_outcome(&o, OG_CLASS_TRANSIENT, "connect_failed");
    assert_true(mono_us() - t0 < CALL_US);
    assert_int_equal(og_provider_lookup(f->p, "op-0020", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);

    /* Back on the same state: the sandbox never saw a request. */
    assert_int_equal(sbx_start(&f->s, NULL), 0);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
}

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
            sleep_ms(10);
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

static void a_broken_established_exchange_is_unknown(void **state)
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

static void a_connect_timeout_is_connect_failed(void **state)
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
    sleep_ms(100);
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

/* ===========================================================================
 * Arguments, secrets, threads
 * ========================================================================= */
static void bad_arguments_send_nothing(void **state)
{
    fx *f = *state;
    const int64_t exp = wall_us() + INT64_C(3600000000);
    char long_key[300];
    og_provider_outcome o;
    og_provider *p = NULL;

    memset(long_key, 'k', 256);
    long_key[256] = '\0';
#define CREATE(key, acct, amt, cur, ref, ex, to)                               \
    og_provider_create_credit(f->p, key, acct, amt, cur, ref, ex, to, &o)
    assert_int_equal(CREATE(NULL, "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("", "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k y", "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k\r\nX-Evil: 1", "a", "1", "EUR", "r", exp, CALL_US),
                     OG_EINVAL);
    assert_int_equal(CREATE(long_key, "a", "1", "EUR", "r", exp, CALL_US),
                     OG_EINVAL);
    assert_int_equal(CREATE("k", "a b", "1", "EUR", "r", exp, CALL_US),
                     OG_EACCOUNT);
    assert_int_equal(CREATE("k", NULL, "1", "EUR", "r", exp, CALL_US),
                     OG_EACCOUNT);
    assert_int_equal(CREATE("k", "a", "-1", "EUR", "r", exp, CALL_US), OG_EAMOUNT);
    assert_int_equal(CREATE("k", "a", "1e3", "EUR", "r", exp, CALL_US), OG_EAMOUNT);
    assert_int_equal(CREATE("k", "a", "1", "eur", "r", exp, CALL_US),
                     OG_ECURRENCY);
    assert_int_equal(CREATE("k", "a", "1", "EU", "r", exp, CALL_US), OG_ECURRENCY);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", -1, CALL_US),
                     OG_EEXPIRES_AT);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", exp, 0), OG_EINVAL);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", exp, -5), OG_EINVAL);
#undef CREATE
    assert_int_equal(og_provider_lookup(f->p, "a b", CALL_US, &o), OG_EINVAL);
    assert_int_equal(og_provider_lookup(f->p, "r", 0, &o), OG_EINVAL);
    assert_int_equal(og_provider_lookup(NULL, "r", CALL_US, &o), OG_EINVAL);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
    assert_int_equal(stat_of(&f->s, "lookups"), 0);

    assert_int_equal(og_provider_open("ftp://127.0.0.1", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://h/x?y=1", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://a b", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://", NULL, g_table, &p), OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, "key\r\nX-Evil: 1", g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, "", g_table, &p), OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, NULL, NULL, &p), OG_EINVAL);
    assert_null(p);
    og_provider_free(NULL); /* a no-op */
}

static void the_api_key_is_a_bearer_token(void **state)
{
    static const char *const extra[] = {"--api-key-file", NULL, NULL};
    char keyfile[PATH_MAX + 8];
    const char *args[3];
    og_provider *with = NULL, *without = NULL, *wrong = NULL;
    og_provider_outcome o;
    sbx s;
    FILE *kf;

    memset(&s, 0, sizeof s);
    snprintf(s.dir, sizeof s.dir, "/tmp/og-provider-XXXXXX");
    assert_non_null(mkdtemp(s.dir));
    snprintf(keyfile, sizeof keyfile, "%s/key", s.dir);
    kf = fopen(keyfile, "w");
    assert_non_null(kf);
    fputs(API_KEY "\n", kf);
    fclose(kf);
    args[0] = extra[0];
    args[1] = keyfile;
    args[2] = NULL;
    assert_int_equal(sbx_start(&s, args), 0);

    assert_int_equal(og_provider_open(s.url, NULL, g_table, &without), 0);
    assert_int_equal(og_provider_open(s.url, "not-the-key", g_table, &wrong), 0);
    assert_int_equal(og_provider_open(s.url, API_KEY, g_table, &with), 0);
    assert_int_equal(create(without, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "unauthorized");
    assert_int_equal(create(wrong, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "unauthorized");
    assert_null(strstr(o.reason, "not-the-key"));
    assert_int_equal(create(with, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(og_provider_lookup(with, "op-key", CALL_US, &o), 1);
    assert_int_equal(og_provider_lookup(without, "op-key", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);
    og_provider_free(with);
    og_provider_free(without);
    og_provider_free(wrong);
    sbx_free(&s);
}

typedef struct racer {
    og_provider *p;
    const char *key;
    pthread_barrier_t *go;
    og_provider_outcome o;
    int rc;
} racer;

static void *race(void *arg)
{
    racer *r = arg;

    pthread_barrier_wait(r->go);
    r->rc = create(r->p, r->key, "acct-1", CALL_US, &r->o);
    return NULL;
}

static void threads_share_one_client(void **state)
{
    enum { N = 8 };
    static const char *const keys[N] = {"op-t0", "op-t1", "op-t2", "op-t3",
                                        "op-t4", "op-t5", "op-t6", "op-t7"};
    fx *f = *state;
    pthread_barrier_t go;
    pthread_t th[N];
    racer r[N];

    /* Eight different keys at once: eight credits. */
    pthread_barrier_init(&go, NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.p = f->p, .key = keys[i], .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].rc, 0);
        assert_outcome(&r[i].o, OG_CLASS_SUCCEEDED, "created");
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(stat_of(&f->s, "credits_created"), N);

    /* One key eight times at once: one credit, one reference everywhere
     * (the sandbox handles concurrent same-key requests atomically). */
    pthread_barrier_init(&go, NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.p = f->p, .key = "op-same", .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].rc, 0);
        assert_outcome(&r[i].o, OG_CLASS_SUCCEEDED, "created");
        assert_string_equal(r[i].o.reference, r[0].o.reference);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(stat_of(&f->s, "credits_created"), N + 1);
}

/* ===========================================================================
 * Payouts only: returns, terms, the processing window, the secret
 * destination
 * ========================================================================= */

/* POST /_control/payouts/{id}/return on s. */
static void return_payout(const sbx *s, const char *id)
{
    char url[512];
    raw r;

    snprintf(url, sizeof url, "%s/_control/payouts/%s/return", s->url, id);
    r = http("POST", url, NULL, NULL, 10000);
    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("returning %s: %d %ld %s", id, r.rc, r.status, r.body);
    free(r.body);
}

static void a_returned_payout_is_found_succeeded_and_its_key_still_replays_created(
    void **state)
{
    fx *f = *state;
    og_provider_outcome o, l;

    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open,
                               CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    return_payout(&f->s, o.reference);
    /* It completed: the return is a later event, not a failure. */
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open, &l),
                     1);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "found");
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open,
                               CALL_US, &l),
                     0);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(stat_of(&f->s, "payouts_created"), 1);
    assert_int_equal(stat_of(&f->s, "payouts_returned"), 1);
}

static void a_payout_listed_with_other_terms_is_terms_mismatch(void **state)
{
    static const struct {
        const char *dest, *amount, *currency, *reason;
    } cases[] = {
        {"dst_tok_7f3a", "26.00", "EUR", "terms_mismatch"},
        {"dst_tok_other", "25", "EUR", "terms_mismatch"},
        {"dst_tok_7f3a", "25", "USD", "terms_mismatch"},
        {"dst_tok_7f3a", "25.000", "EUR", "found"}, /* canonical amounts */
    };
    fx *f = *state;
    og_provider_outcome o, l;

    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0031", PAYOUTS.open,
                               CALL_US, &o),
                     0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&l, 0x5a, sizeof l);
        assert_int_equal(og_provider_lookup_payout(
                             f->p, "op-0031", cases[i].dest, cases[i].amount,
                             cases[i].currency, CALL_US, &l),
                         1);
        assert_outcome(&l,
                       strcmp(cases[i].reason, "found") == 0
                           ? OG_CLASS_SUCCEEDED
                           : OG_CLASS_UNKNOWN,
                       cases[i].reason);
        assert_string_equal(l.reference, o.reference);
        assert_null(strstr(l.reason, "dst_"));
    }
}

/* A lookup after expires_at + skew + visibility delay lists the payout
 * accepted before the expiry, and one that finds nothing is final: the
 * request sent afterwards is FAILED request_expired and never appears. */
static void not_found_after_expiry_skew_and_visibility_delay_is_final(
    void **state)
{
    fx *f = *state;
    const int64_t expires = wall_us() + 500000;
    og_provider_outcome o, l;
    int64_t cutoff = expires + 1000000 + 500000; /* + skew + delay */

    assert_int_equal(PAYOUTS.create(f->p, "op-0033", PAYOUTS.open, "25.00",
                                    "EUR", "op-0033", expires, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    sleep_ms((int)((cutoff - wall_us()) / 1000) + 200);
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0033", PAYOUTS.open, &l),
                     1);
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0032", PAYOUTS.open, &l),
                     0);
    assert_outcome(&l, OG_CLASS_UNKNOWN, "not_found");
    assert_int_equal(PAYOUTS.create(f->p, "op-0032", PAYOUTS.open, "25.00",
                                    "EUR", "op-0032", expires, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_FAILED, "request_expired");
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0032", PAYOUTS.open, &l),
                     0);
    assert_int_equal(stat_of(&f->s, "payouts_created"), 1);
}

static int fx_up_payouts_window(void **state)
{
    static const char *const extra[] = {"--skew-seconds", "1",
                                        "--visibility-delay-ms", "500", NULL};
    return fx_up_table(state, extra, g_payouts_table);
}

static void bad_payout_arguments_send_nothing_and_never_echo_the_destination(
    void **state)
{
    static const struct {
        const char *key, *dest, *amount, *currency, *reference;
        int rc;
    } bad[] = {
        {"k", NULL, "1", "EUR", "r", OG_EDESTINATION},
        {"k", "", "1", "EUR", "r", OG_EDESTINATION},
        {"k", "dst a", "1", "EUR", "r", OG_EDESTINATION},
        {"k", "dst\r\nX-Evil: 1", "1", "EUR", "r", OG_EDESTINATION},
        {"k y", "dst_1", "1", "EUR", "r", OG_EINVAL},
        {"k", "dst_1", "1", "EUR", "r r", OG_EINVAL},
        {"k", "dst_1", "-1", "EUR", "r", OG_EAMOUNT},
        {"k", "dst_1", "1", "eur", "r", OG_ECURRENCY},
    };
    fx *f = *state;
    const int64_t exp = wall_us() + INT64_C(3600000000);
    char long_dest[200];
    og_provider *x = NULL;
    og_provider_outcome o;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(og_provider_create_payout(
                             f->p, bad[i].key, bad[i].dest, bad[i].amount,
                             bad[i].currency, bad[i].reference, exp, CALL_US,
                             &o),
                         bad[i].rc);
        assert_int_equal(og_provider_lookup_payout(
                             f->p, bad[i].reference, bad[i].dest,
                             bad[i].amount, bad[i].currency, CALL_US, &o),
                         bad[i].rc == OG_EINVAL && strcmp(bad[i].key, "k")
                             ? 0 /* the key is no lookup's business */
                             : bad[i].rc);
    }
    memset(long_dest, 'd', 129);
    long_dest[129] = '\0';
    assert_int_equal(og_provider_create_payout(f->p, "k", long_dest, "1",
                                               "EUR", "r", exp, CALL_US, &o),
                     OG_EDESTINATION);
    assert_int_equal(og_provider_create_payout(f->p, "k", "dst_1", "1", "EUR",
                                               "r", -1, CALL_US, &o),
                     OG_EEXPIRES_AT);
    /* The error names the rule, never the value. */
    assert_string_equal(og_err_name(OG_EDESTINATION),
                        "input.destination_invalid");
    assert_null(strstr(og_strerror(OG_EDESTINATION), "dst"));
    assert_int_equal(stat_of(&f->s, "payout_requests"), 0);
    assert_int_equal(stat_of(&f->s, "payout_lookups"), 1); /* "k y" only */
    /* A token-endpoint client has no table: no payout call. */
    assert_int_equal(og_provider_open_exchange(f->s.url, NULL, &x), 0);
    assert_int_equal(og_provider_create_payout(x, "k", "dst_1", "1", "EUR",
                                               "r", exp, CALL_US, &o),
                     OG_EINVAL);
    assert_int_equal(og_provider_lookup_payout(x, "r", "dst_1", "1", "EUR",
                                               CALL_US, &o),
                     OG_EINVAL);
    og_provider_free(x);
}

/* ===========================================================================
 * Recording mode: one recorder for every API of the sandbox, read through
 * a rec_api row (the credits' vectors and the payouts' are the same
 * requests, with the API's own path, target and test targets).
 * ========================================================================= */
typedef struct rec_api {
    const char *name;         /* "credits": the --record argument */
    const char *path;         /* "/v1/credits" */
    const char *typo_path;    /* a route the sandbox does not serve */
    const char *target;       /* the body member: "account" */
    const char *list;         /* the lookup answer's array */
    const char *open, *closed, *busy, *async; /* test targets */
    const char *closed_code;  /* "account_closed" */
    bool returns;             /* POST /_control/payouts/{id}/return */
    /* Invented answers are written for credits; these words are put in
     * for the API's own (identity for credits). */
    const char *id_prefix, *noun, *completed;
} rec_api;

static const rec_api rec_apis[] = {
    {"credits", "/v1/credits", "/v1/credit", "account", "credits", "acct-1",
     "closed-1", "busy-1", "async-1", "account_closed", false, "cr_",
     "credit", "succeeded"},
    {"payouts", "/v1/payouts", "/v1/payout", "destination", "payouts",
     "dst_vec_1", "dst_closed_1", "dst_busy_1", "dst_async_1",
     "destination_closed", true, "po_", "payout", "completed"},
};

typedef struct recorder {
    FILE *out;
    int n;
    const rec_api *api;
} recorder;

/* Writes one vector line. ref_from_body: the expected reference is the
 * body's "id" (read here with jansson, not by the classifier). */
static void vector(recorder *rec, const char *name, const char *source,
                   const char *call, const char *query, const char *transport,
                   long status, const raw *r, const char *cls,
                   const char *reason, bool ref_from_body, const char *result)
{
    json_t *v = json_object(), *h = json_object(), *e = json_object();
    const char *ref = "";
    json_t *b = NULL;
    char *line;

    if (ref_from_body && r) {
        b = json_loadb(r->body, r->len, 0, NULL);
        if (call && strcmp(call, "lookup") == 0)
            ref = json_string_value(json_object_get(
                json_array_get(json_object_get(b, rec->api->list), 0), "id"));
        else
            ref = json_string_value(json_object_get(b, "id"));
        if (!ref) {
            fprintf(stderr, "record %s: no id in %s\n", name, r->body);
            exit(1);
        }
    }
    json_object_set_new(v, "name", json_string(name));
    json_object_set_new(v, "source", json_string(source));
    if (call) {
        json_object_set_new(v, "call", json_string(call));
        json_object_set_new(v, "query", json_string(query));
    }
    json_object_set_new(v, "transport", json_string(transport));
    json_object_set_new(v, "status", json_integer(status));
    if (r && r->content_type[0])
        json_object_set_new(h, "Content-Type", json_string(r->content_type));
    if (r && r->retry_after[0])
        json_object_set_new(h, "Retry-After", json_string(r->retry_after));
    if (r && r->replayed[0])
        json_object_set_new(h, "Idempotent-Replayed",
                            json_string(r->replayed));
    json_object_set_new(v, "headers", h);
    json_object_set_new(v, "body",
                        r ? json_stringn(r->body, r->len) : json_string(""));
    if (result)
        json_object_set_new(e, "result", json_string(result));
    json_object_set_new(e, "class", json_string(cls));
    json_object_set_new(e, "reason", json_string(reason));
    json_object_set_new(e, "reference", json_string(ref));
    json_object_set_new(v, "expect", e);
    line = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    fprintf(rec->out, "%s\n", line);
    free(line);
    json_decref(b);
    json_decref(v);
    rec->n++;
}

/* A recorded create: POST url/path with key (NULL: no header), the
 * JSON body, content type. The transport kind as libcurl ended. */
static raw rec_post(const sbx *s, const char *path, const char *key,
                    const char *ctype, const char *body, const char *auth,
                    long timeout_ms)
{
    char url[256], kh[300], ct[128], ah[256];
    const char *hs[4];
    int n = 0;

    snprintf(url, sizeof url, "%s%s", s->url, path);
    if (ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        hs[n++] = ct;
    }
    if (key) {
        snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
        hs[n++] = kh;
    }
    if (auth) {
        snprintf(ah, sizeof ah, "Authorization: Bearer %s", auth);
        hs[n++] = ah;
    }
    hs[n] = NULL;
    return http("POST", url, hs, body, timeout_ms);
}

static const char *transport_of(CURLcode rc)
{
    switch (rc) {
    case CURLE_OK: return "ok";
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_CONNECT: return "connect_failed";
    case CURLE_GOT_NOTHING: return "no_response";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE: return "connection_reset";
    default: return "error";
    }
}

#define JSON_CT "application/json"
#define LATER "2099-01-01T00:00:00Z"

/* Records one create answer with its hand-written expectation. */
static void rec_create(recorder *rec, const char *name, raw r,
                       const char *cls, const char *reason, bool ref)
{
    const char *tr = transport_of(r.rc);
    bool ok = strcmp(tr, "ok") == 0;

    vector(rec, name, "recorded", NULL, NULL, tr, ok ? r.status : 0,
           ok ? &r : NULL, cls, reason, ref, NULL);
    free(r.body);
}

/* Records a lookup of reference (NULL: no query at all). */
static void rec_lookup(recorder *rec, const sbx *s, const char *name,
                       const char *reference, const char *cls,
                       const char *reason, bool ref, const char *result)
{
    char url[256];
    raw r;

    snprintf(url, sizeof url, "%s%s%s%s", s->url, rec->api->path,
             reference ? "?reference=" : "", reference ? reference : "");
    r = http("GET", url, NULL, NULL, 10000);
    vector(rec, name, "recorded", "lookup", reference ? reference : "vec-ref-1",
           "ok", r.status, &r, cls, reason, ref, result);
    free(r.body);
}

/* The create body of the recorder's API. */
static char *body_of(const recorder *rec, const char *target,
                     const char *amount, const char *reference,
                     const char *expires)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"%s\":\"%s\",\"amount\":\"%s\",\"currency\":\"EUR\","
             "\"reference\":\"%s\",\"expires_at\":\"%s\"}",
             rec->api->target, target, amount, reference, expires);
    return buf;
}

/* POST of the recorder's API with key and a body of target. */
static raw rec_send(const recorder *rec, const sbx *s, const char *key,
                    const char *target, const char *amount,
                    const char *reference, const char *expires,
                    const char *auth, long timeout_ms)
{
    return rec_post(s, rec->api->path, key, JSON_CT,
                    body_of(rec, target, amount, reference, expires), auth,
                    timeout_ms);
}

/* A payout's return, then what a lookup and the create's key answer:
 * found (it completed) and the original create's answer. */
static void record_return(recorder *rec, const sbx *s, raw created)
{
    json_t *b = json_loadb(created.body, created.len, 0, NULL);
    char url[512];
    raw r;

    snprintf(url, sizeof url, "%s/_control/payouts/%s/return", s->url,
             json_string_value(json_object_get(b, "id")));
    json_decref(b);
    r = http("POST", url, NULL, NULL, 10000);
    if (r.rc != CURLE_OK || r.status != 200) {
        fprintf(stderr, "record: return: %ld %s\n", r.status, r.body);
        exit(1);
    }
    free(r.body);
    rec_lookup(rec, s, "lookup_200_found_returned", "vec-ref-1", "succeeded",
               "found", true, "found");
    r = rec_send(rec, s, "vec-0001", rec->api->open, "25.00", "vec-ref-1",
                 LATER, NULL, 10000);
    if (r.len != created.len || memcmp(r.body, created.body, r.len) != 0) {
        fprintf(stderr, "record: the replay after a return changed\n");
        exit(1);
    }
    rec_create(rec, "create_201_replayed_after_return", r, "succeeded",
               "created", true);
}

static void record_sandbox(recorder *rec)
{
    const rec_api *ap = rec->api;
    char big[70001], url[256], keyfile[PATH_MAX + 8], name[96], text[512];
    const char *auth_args[3];
    sbx s, a;
    raw r, first;
    FILE *kf;

    if (sbx_new(&s, async_fast) != 0)
        exit(1);

    first = rec_send(rec, &s, "vec-0001", ap->open, "25.00", "vec-ref-1",
                     LATER, NULL, 10000);
    r = first;
    r.body = strdup(first.body);
    rec_create(rec, "create_201_created", r, "succeeded", "created", true);
    r = rec_send(rec, &s, "vec-0001", ap->open, "25.00", "vec-ref-1", LATER,
                 NULL, 10000);
    rec_create(rec, "create_201_replayed", r, "succeeded", "created", true);
    /* The same parameters spelled differently are the same request. */
    r = rec_send(rec, &s, "vec-0001", ap->open, "25", "vec-ref-1",
                 "2099-01-01T01:00:00+01:00", NULL, 10000);
    rec_create(rec, "create_201_replayed_canonical_equal", r, "succeeded",
               "created", true);
    r = rec_send(rec, &s, "vec-0001", ap->open, "26.00", "vec-ref-1", LATER,
                 NULL, 10000);
    rec_create(rec, "create_422_idempotency_mismatch", r, "unknown",
               "idempotency_mismatch", false);
    if (ap->returns)
        record_return(rec, &s, first);
    free(first.body);

    r = rec_send(rec, &s, "vec-0002", ap->async, "5", "vec-ref-2", LATER,
                 NULL, 10000);
    rec_create(rec, "create_202_pending", r, "unknown", "pending", true);
    rec_lookup(rec, &s, "lookup_200_pending", "vec-ref-2", "unknown",
               "pending", true, "found");
    sleep_ms(400);
    rec_lookup(rec, &s, "lookup_200_found_after_completion", "vec-ref-2",
               "succeeded", "found", true, "found");
    r = rec_send(rec, &s, "vec-0002", ap->async, "5", "vec-ref-2", LATER,
                 NULL, 10000);
    rec_create(rec, "create_201_async_completed_replay", r, "succeeded",
               "created", true);

    r = rec_send(rec, &s, "vec-0003", ap->closed, "5", "vec-ref-3", LATER,
                 NULL, 10000);
    snprintf(name, sizeof name, "create_422_%s", ap->closed_code);
    rec_create(rec, name, r, "failed", ap->closed_code, false);
    r = rec_send(rec, &s, "vec-0003", ap->closed, "5", "vec-ref-3", LATER,
                 NULL, 10000);
    snprintf(name, sizeof name, "create_422_%s_replayed", ap->closed_code);
    rec_create(rec, name, r, "failed", ap->closed_code, false);
    r = rec_send(rec, &s, "vec-0004", ap->open, "5", "vec-ref-4",
                 "2020-01-01T00:00:00Z", NULL, 10000);
    rec_create(rec, "create_422_request_expired", r, "failed",
               "request_expired", false);
    r = rec_send(rec, &s, "vec-0005", ap->busy, "5", "vec-ref-5", LATER,
                 NULL, 10000);
    rec_create(rec, "create_429_rate_limited", r, "transient", "rate_limited",
               false);

    snprintf(text, sizeof text, "{\"%s\":", ap->target);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_json", r, "failed", "invalid_json",
               false);
    snprintf(text, sizeof text,
             "{\"%s\":\"%s\",\"currency\":\"EUR\",\"reference\":"
             "\"r\",\"expires_at\":\"" LATER "\"}",
             ap->target, ap->open);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_request_missing_amount", r, "failed",
               "invalid_request", false);
    snprintf(text, sizeof text,
             "{\"%s\":\"%s\",\"amount\":\"1\",\"currency\":"
             "\"EUR\",\"reference\":\"r\",\"expires_at\":\"" LATER
             "\",\"memo\":\"hi\"}",
             ap->target, ap->open);
    r = rec_post(&s, ap->path, "vec-0006", JSON_CT, text, NULL, 10000);
    rec_create(rec, "create_400_invalid_request_unknown_member", r, "failed",
               "invalid_request", false);
    r = rec_post(&s, ap->path, NULL, JSON_CT,
                 body_of(rec, ap->open, "5", "vec-ref-6", LATER), NULL, 10000);
    rec_create(rec, "create_400_idempotency_key_required", r, "failed",
               "idempotency_key_required", false);
    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    r = rec_post(&s, ap->path, "vec-0007", JSON_CT, big, NULL, 10000);
    rec_create(rec, "create_413_body_too_large", r, "failed", "body_too_large",
               false);
    r = rec_post(&s, ap->path, "vec-0008", "text/plain",
                 body_of(rec, ap->open, "5", "vec-ref-8", LATER), NULL, 10000);
    rec_create(rec, "create_415_unsupported_media_type", r, "failed",
               "unsupported_media_type", false);
    r = rec_post(&s, ap->typo_path, "vec-0009", JSON_CT,
                 body_of(rec, ap->open, "5", "vec-ref-9", LATER), NULL, 10000);
    rec_create(rec, "create_404_route_not_found", r, "unknown",
               "route_not_found", false);
    {
        static const char *const hs[] = {"Content-Type: application/json",
                                         "Idempotency-Key: vec-0009", NULL};
        snprintf(url, sizeof url, "%s%s", s.url, ap->path);
        r = http("PUT", url, hs,
                 body_of(rec, ap->open, "5", "vec-ref-9", LATER), 10000);
        rec_create(rec, "create_405_method_not_allowed", r, "unknown",
                   "method_not_allowed", false);
    }

    /* Faults. */
    arm(&s, "error_500_after_effect", -1);
    r = rec_send(rec, &s, "vec-0010", ap->open, "5", "vec-ref-10", LATER,
                 NULL, 10000);
    rec_create(rec, "create_500_internal_after_effect", r, "unknown",
               "internal", false);
    arm(&s, "error_500_before_effect", -1);
    r = rec_send(rec, &s, "vec-0011", ap->open, "5", "vec-ref-11", LATER,
                 NULL, 10000);
    rec_create(rec, "create_500_internal_before_effect", r, "unknown",
               "internal", false);
    arm(&s, "drop_response_after_effect", -1);
    r = rec_send(rec, &s, "vec-0012", ap->open, "5", "vec-ref-12", LATER,
                 NULL, 10000);
    rec_create(rec, "transport_no_response_drop_after_effect", r, "unknown",
               "no_response", false);
    arm(&s, "delay_after_effect", 1500);
    r = rec_send(rec, &s, "vec-0013", ap->open, "5", "vec-ref-13", LATER,
                 NULL, 300);
    rec_create(rec, "transport_timeout_delay_after_effect", r, "unknown",
               "timeout", false);

    /* Lookups. */
    rec_lookup(rec, &s, "lookup_200_found_after_dropped_response",
               "vec-ref-12", "succeeded", "found", true, "found");
    rec_lookup(rec, &s, "lookup_200_not_found", "vec-ref-11", "unknown",
               "not_found", false, "not_found");
    rec_lookup(rec, &s, "lookup_400_without_query", NULL, "unknown", "",
               false, "provider_unavailable");

    /* Stopped: refused before anything was sent. */
    sbx_stop(&s);
    r = rec_send(rec, &s, "vec-0014", ap->open, "5", "vec-ref-14", LATER,
                 NULL, 2000);
    rec_create(rec, "transport_connect_failed_sandbox_stopped", r,
               "transient", "connect_failed", false);
    sbx_free(&s);

    /* An API key. */
    memset(&a, 0, sizeof a);
    snprintf(a.dir, sizeof a.dir, "/tmp/og-provider-XXXXXX");
    if (!mkdtemp(a.dir))
        exit(1);
    snprintf(keyfile, sizeof keyfile, "%s/key", a.dir);
    kf = fopen(keyfile, "w");
    fputs(API_KEY "\n", kf);
    fclose(kf);
    auth_args[0] = "--api-key-file";
    auth_args[1] = keyfile;
    auth_args[2] = NULL;
    if (sbx_start(&a, auth_args) != 0)
        exit(1);
    r = rec_send(rec, &a, "vec-0020", ap->open, "5", "vec-ref-20", LATER,
                 NULL, 10000);
    rec_create(rec, "create_401_unauthorized_no_key", r, "transient",
               "unauthorized", false);
    r = rec_send(rec, &a, "vec-0020", ap->open, "5", "vec-ref-20", LATER,
                 "wrong-key", 10000);
    rec_create(rec, "create_401_unauthorized_wrong_key", r, "transient",
               "unauthorized", false);
    sbx_free(&a);
}

/* text with the credits' words put in for the recorder's API's (none for
 * credits), into out. */
static const char *adapt(const recorder *rec, const char *text, char *out,
                         size_t len)
{
    const struct {
        const char *from, *to;
    } words[] = {
        {"cr_", rec->api->id_prefix},   {"account", rec->api->target},
        {"credits", rec->api->list},    {"credit", rec->api->noun},
        {"succeeded", rec->api->completed},
    };
    size_t o = 0;

    while (*text && o + 1 < len) {
        size_t k;

        for (k = 0; k < sizeof words / sizeof words[0]; k++)
            if (strncmp(text, words[k].from, strlen(words[k].from)) == 0)
                break;
        if (k == sizeof words / sizeof words[0]) {
            out[o++] = *text++;
            continue;
        }
        o += (size_t)snprintf(out + o, len - o, "%s", words[k].to);
        text += strlen(words[k].from);
        if (o >= len)
            o = len - 1;
    }
    out[o] = '\0';
    return out;
}

/* Answers the sandbox does not document (or cannot be made to give):
 * each must be UNKNOWN unless a rule proves otherwise. */
static void record_invented(recorder *rec)
{
    static const struct {
        const char *name, *transport;
        long status;
        const char *ctype, *retry_after, *body, *cls, *reason;
    } inv[] = {
        {"invented_418_teapot", "ok", 418, "text/plain", NULL,
         "I'm a teapot", "unknown", "undocumented_status_418"},
        {"invented_503_html", "ok", 503, "text/html", "30",
         "<html><body><h1>503 Service Temporarily Unavailable</h1></body>"
         "</html>\n",
         "unknown", "undocumented_status_503"},
        {"invented_502_gateway_json", "ok", 502, "application/json", NULL,
         "{\"error\":\"bad_gateway\"}", "unknown", "undocumented_status_502"},
        {"invented_200_credit_body", "ok", 200, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000001\",\"account\":\"acct-1\","
         "\"amount\":\"5\",\"currency\":\"EUR\",\"reference\":\"r\","
         "\"status\":\"succeeded\",\"created_at\":"
         "\"2026-11-29T19:00:00.000000Z\"}",
         "unknown", "undocumented_status_200"},
        {"invented_204_no_content", "ok", 204, NULL, NULL, "", "unknown",
         "undocumented_status_204"},
        {"invented_302_redirect", "ok", 302, NULL, NULL, "", "unknown",
         "undocumented_status_302"},
        {"invented_201_not_json", "ok", 201, "text/plain", NULL, "Created",
         "unknown", "malformed_success"},
        {"invented_201_empty", "ok", 201, "application/json", NULL, "",
         "unknown", "malformed_success"},
        {"invented_201_missing_id", "ok", 201, "application/json", NULL,
         "{\"account\":\"acct-1\",\"amount\":\"5\",\"currency\":\"EUR\","
         "\"reference\":\"r\",\"status\":\"succeeded\"}",
         "unknown", "malformed_success"},
        {"invented_201_id_not_a_string", "ok", 201, "application/json", NULL,
         "{\"id\":42,\"status\":\"succeeded\"}", "unknown",
         "malformed_success"},
        {"invented_201_status_pending", "ok", 201, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000002\",\"status\":\"pending\"}",
         "unknown", "malformed_success"},
        {"invented_201_duplicate_id_member", "ok", 201, "application/json",
         NULL,
         "{\"id\":\"cr_000000000000000000000003\",\"id\":"
         "\"cr_000000000000000000000004\",\"status\":\"succeeded\"}",
         "unknown", "malformed_success"},
        {"invented_201_truncated_body", "ok", 201, "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000005\",\"account\":\"acct",
         "unknown", "malformed_success"},
        {"invented_201_cut_by_reset", "connection_reset", 201,
         "application/json", NULL,
         "{\"id\":\"cr_000000000000000000000006\",\"status\":\"succ",
         "unknown", "connection_reset"},
        {"invented_422_unknown_code", "ok", 422, "application/json", NULL,
         "{\"error\":\"insufficient_funds\",\"message\":\"m\"}", "unknown",
         "undocumented_error_422"},
        {"invented_422_no_body", "ok", 422, NULL, NULL, "", "unknown",
         "undocumented_error_422"},
        {"invented_422_error_not_a_string", "ok", 422, "application/json",
         NULL, "{\"error\":{\"code\":\"account_closed\"}}", "unknown",
         "undocumented_error_422"},
        {"invented_429_gateway_html", "ok", 429, "text/html", "5",
         "<html>Too Many Requests</html>", "unknown",
         "undocumented_error_429"},
        {"invented_429_http_date_retry_after", "ok", 429, "application/json",
         "Wed, 21 Oct 2026 07:28:00 GMT",
         "{\"error\":\"rate_limited\",\"message\":\"m\"}", "transient",
         "rate_limited"},
        {"invented_500_html", "ok", 500, "text/html", NULL,
         "<html>Internal Server Error</html>", "unknown",
         "undocumented_error_500"},
        {"invented_400_unknown_code", "ok", 400, "application/json", NULL,
         "{\"error\":\"invalid_currency_for_account\"}", "unknown",
         "undocumented_error_400"},
        {"invented_connection_reset", "connection_reset", 0, NULL, NULL, "",
         "unknown", "connection_reset"},
        {"invented_response_too_large", "response_too_large", 201, NULL, NULL,
         "", "unknown", "transport_response_too_large"},
        {"invented_transport_error", "error", 0, NULL, NULL, "", "unknown",
         "transport_error"},
    };
    char name[96], body[512];

    for (size_t i = 0; i < sizeof inv / sizeof inv[0]; i++) {
        raw r = {0};

        r.body = (char *)adapt(rec, inv[i].body, body, sizeof body);
        r.len = strlen(r.body);
        if (inv[i].ctype)
            snprintf(r.content_type, sizeof r.content_type, "%s",
                     inv[i].ctype);
        if (inv[i].retry_after)
            snprintf(r.retry_after, sizeof r.retry_after, "%s",
                     inv[i].retry_after);
        vector(rec, adapt(rec, inv[i].name, name, sizeof name), "invented",
               NULL, NULL, inv[i].transport, inv[i].status, &r, inv[i].cls,
               inv[i].reason, false, NULL);
    }
    if (rec->api->returns) {
        /* A create answer never shows a return: a 201 saying returned is
         * not the documented answer. */
        raw r = {0};
        r.body = "{\"id\":\"po_000000000000000000000008\",\"status\":"
                 "\"returned\"}";
        r.len = strlen(r.body);
        snprintf(r.content_type, sizeof r.content_type, "application/json");
        vector(rec, "invented_201_status_returned", "invented", NULL, NULL,
               "ok", 201, &r, "unknown", "malformed_success", false, NULL);
    }
    {
        /* A lookup answer listing a stranger: the filter was ignored. */
        raw r = {0};
        r.body = (char *)adapt(
            rec,
            "{\"credits\":[{\"id\":\"cr_000000000000000000000007\","
            "\"reference\":\"someone-else\",\"status\":\"succeeded\"}]}",
            body, sizeof body);
        r.len = strlen(r.body);
        snprintf(r.content_type, sizeof r.content_type, "application/json");
        vector(rec, "invented_lookup_lists_a_stranger", "invented", "lookup",
               "vec-ref-1", "ok", 200, &r, "unknown", "", false,
               "provider_unavailable");
    }
}

/* Records the vectors of API name (credits, payouts) into path. */
static int record(const char *name, const char *path)
{
    recorder rec = {0};

    for (size_t i = 0; i < sizeof rec_apis / sizeof rec_apis[0]; i++)
        if (strcmp(name, rec_apis[i].name) == 0)
            rec.api = &rec_apis[i];
    if (!rec.api) {
        fprintf(stderr, "provider_test: --record credits|payouts PATH\n");
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    rec.out = fopen(path, "w");
    if (!rec.out) {
        perror(path);
        return 1;
    }
    record_sandbox(&rec);
    record_invented(&rec);
    fclose(rec.out);
    curl_global_cleanup();
    fprintf(stderr, "provider_test: %d vectors written to %s\n", rec.n, path);
    return 0;
}

/* ===========================================================================
 * The token exchange (RFC 6749 4.1.3) against the sandbox's /oauth/token
 * ========================================================================= */

/* POST /_control/codes: a fresh code into out. */
static void mint_code(const sbx *s, char out[64])
{
    char url[256];
    json_t *j;
    raw r;

    snprintf(url, sizeof url, "%s/_control/codes", s->url);
    r = http("POST", url, NULL, NULL, 10000);
    assert_int_equal(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(json_string_value(json_object_get(j, "code")));
    snprintf(out, 64, "%s", json_string_value(json_object_get(j, "code")));
    json_decref(j);
    free(r.body);
}

/* A client for the fixture's sandbox as a token endpoint. */
static og_provider *exchanger(const fx *f)
{
    og_provider *p = NULL;

    assert_int_equal(og_provider_open_exchange(f->s.url, NULL, &p), 0);
    return p;
}

static void assert_exchange(const og_exchange_outcome *o, og_exchange_class c,
                            const char *reason)
{
    if (o->cls != c || strcmp(o->reason, reason) != 0)
        fail_msg("exchange %s %s, expected %s %s",
                 og_exchange_class_name(o->cls), o->reason,
                 og_exchange_class_name(c), reason);
}

static void a_code_is_exchanged_once_and_then_already_used(void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_exchange_outcome a, b;
    json_t *t;
    char code[64];

    mint_code(&f->s, code);
    assert_int_equal(og_provider_exchange_code(p, code, CALL_US, &a), 0);
    assert_exchange(&a, OG_EXCHANGE_SUCCEEDED, "exchanged");
    t = json_loads(a.result, 0, NULL);
    assert_non_null(json_string_value(json_object_get(t, "access_token")));
    assert_string_equal(json_string_value(json_object_get(t, "token_type")),
                        "Bearer");
    json_decref(t);
    assert_int_equal(og_provider_exchange_code(p, code, CALL_US, &b), 0);
    assert_exchange(&b, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_null(b.result);
    assert_int_equal(stat_of(&f->s, "code_exchanges"), 1);
    assert_int_equal(stat_of(&f->s, "token_requests"), 2);
    og_exchange_outcome_clear(&a);
    og_exchange_outcome_clear(&b);
    og_provider_free(p);
}

/* The answer is lost, or comes after the call gave up: UNKNOWN, and the
 * code is spent all the same — nothing can fetch its result again. */
static void a_lost_or_late_exchange_is_unknown_and_the_code_is_spent(
    void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_exchange_outcome o;
    char c1[64], c2[64];

    mint_code(&f->s, c1);
    mint_code(&f->s, c2);
    arm(&f->s, "drop_response_after_effect", -1);
    assert_int_equal(og_provider_exchange_code(p, c1, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_UNKNOWN, "transport_no_response");
    arm(&f->s, "delay_after_effect", 1500);
    assert_int_equal(og_provider_exchange_code(p, c2, 300000, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_UNKNOWN, "transport_timeout");
    assert_int_equal(stat_of(&f->s, "code_exchanges"), 2);
    assert_int_equal(og_provider_exchange_code(p, c1, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    og_provider_free(p);
}

/* A code is %-encoded: '&', '=', '+' and '%' cannot add or change a
 * parameter (the sandbox would answer invalid_request); bad codes, bad
 * timeouts and credit calls on an exchange-only client send nothing. */
static void codes_are_form_encoded_and_bad_ones_send_nothing(void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_provider_outcome po;
    og_exchange_outcome o;
    char long_code[OG_PROVIDER_CODE_MAX + 2];

    assert_int_equal(og_provider_exchange_code(p, "ac_x&code=ac_y+%41=",
                                               CALL_US, &o),
                     0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_int_equal(stat_of(&f->s, "token_requests"), 1);
    memset(long_code, 'c', sizeof long_code - 1);
    long_code[sizeof long_code - 1] = '\0';
    assert_int_equal(og_provider_exchange_code(p, NULL, CALL_US, &o), OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "", CALL_US, &o), OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "a\r\nb", CALL_US, &o),
                     OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "\xc3\xa9", CALL_US, &o),
                     OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, long_code, CALL_US, &o),
                     OG_ECODE);
    long_code[OG_PROVIDER_CODE_MAX] = '\0'; /* exactly the limit: sent */
    assert_int_equal(og_provider_exchange_code(p, long_code, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_int_equal(og_provider_exchange_code(p, "c", 0, &o), OG_EINVAL);
    assert_int_equal(og_provider_exchange_code(NULL, "c", CALL_US, &o),
                     OG_EINVAL);
    assert_int_equal(og_provider_create_credit(p, "k", "a", "1", "EUR", "r",
                                               wall_us() + 3600000000, CALL_US,
                                               &po),
                     OG_EINVAL);
    assert_int_equal(og_provider_lookup(p, "r", CALL_US, &po), OG_EINVAL);
    assert_int_equal(stat_of(&f->s, "token_requests"), 2);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
    og_provider_free(p);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(create_succeeds_with_the_credit_id,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            the_same_key_again_replays_the_same_credit, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(closed_account_fails_and_stays_failed,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            busy_account_is_transient_with_retry_after, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            async_account_is_pending_until_a_lookup_finds_it, fx_up_async,
            fx_down),
        cmocka_unit_test_setup_teardown(a_late_request_fails_expired, fx_up,
                                        fx_down),
        cmocka_unit_test_setup_teardown(
            a_key_reused_with_other_parameters_is_unknown, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            dropped_response_is_unknown_and_the_credit_exists, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(error_500_after_effect_is_unknown,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(error_500_before_effect_is_unknown_too,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_delay_after_effect_beyond_the_timeout_is_unknown, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_delay_before_effect_creates_after_the_client_gave_up, fx_up,
            fx_down),
        cmocka_unit_test_setup_teardown(exit_after_effect_is_unknown_and_durable,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_missing_reference_is_not_found_never_failed, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(connection_refused_is_connect_failed,
                                        fx_up, fx_down),
        cmocka_unit_test(a_broken_established_exchange_is_unknown),
        cmocka_unit_test(a_connect_timeout_is_connect_failed),
        cmocka_unit_test_setup_teardown(bad_arguments_send_nothing, fx_up,
                                        fx_down),
        cmocka_unit_test(the_api_key_is_a_bearer_token),
        cmocka_unit_test_setup_teardown(threads_share_one_client, fx_up,
                                        fx_down),
        cmocka_unit_test_setup_teardown(
            a_code_is_exchanged_once_and_then_already_used, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_lost_or_late_exchange_is_unknown_and_the_code_is_spent, fx_up,
            fx_down),
        cmocka_unit_test_setup_teardown(
            codes_are_form_encoded_and_bad_ones_send_nothing, fx_up, fx_down),
        /* Payouts: the same claims through the same request builder. */
        cmocka_unit_test_setup_teardown(
            payout_create_succeeds_with_the_payout_id, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            the_same_key_again_replays_the_same_payout, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            closed_destination_fails_and_stays_failed, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            busy_destination_is_transient_with_retry_after, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            async_payout_is_pending_until_a_lookup_finds_it_completed,
            fx_up_payouts_async, fx_down),
        cmocka_unit_test_setup_teardown(a_late_payout_fails_expired,
                                        fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            dropped_payout_response_is_unknown_and_a_lookup_finds_the_payout,
            fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            a_returned_payout_is_found_succeeded_and_its_key_still_replays_created,
            fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            a_payout_listed_with_other_terms_is_terms_mismatch, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            not_found_after_expiry_skew_and_visibility_delay_is_final,
            fx_up_payouts_window, fx_down),
        cmocka_unit_test_setup_teardown(
            bad_payout_arguments_send_nothing_and_never_echo_the_destination,
            fx_up_payouts, fx_down),
    };

    signal(SIGPIPE, SIG_IGN);
    if (argc == 3 && strcmp(argv[1], "--record") == 0)
        return record("credits", argv[2]);
    if (argc == 4 && strcmp(argv[1], "--record") == 0)
        return record(argv[2], argv[3]);
    return cmocka_run_group_tests(tests, load_table, free_table);
}
