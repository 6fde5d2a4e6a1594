/*
 * sandbox_test.c — oncegate-sandbox over real HTTP on loopback: one test
 * per claim of docs/sandbox.md.
 *
 * Every test starts its own sandbox (OG_TEST_SANDBOX) with
 * `--listen 127.0.0.1:0 --state DIR/state.db --control` plus the flags the
 * claim needs, in a directory under one mkdtemp root; stdout goes to a
 * file (the ready line gives the port), stderr to a log file. The per-test
 * teardown stops whatever the test started with SIGTERM (and records any
 * exit other than 0), an atexit handler kills anything left, and
 * PR_SET_PDEATHSIG kills a sandbox whose test process died. The last tests
 * check that every SIGTERM ended in exit 0 and scan every log line for
 * JSON shape and for the API key.
 *
 * "Changes nothing" is checked through /_control/stats: credits_created is
 * the number of credit rows in the state file, create_requests counts the
 * create requests that passed validation (payouts_created and
 * payout_requests likewise for payouts).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sqlite3.h>

extern char **environ;

#define READY_MS 30000    /* a sandbox under ASan prints its ready line */
#define EXIT_MS 30000     /* a drained sandbox exits */
#define HTTP_MS 60000     /* one HTTP exchange */
#define RACERS 20
#define RACE_ROUNDS 5
#define BODY_MAX 65536    /* the sandbox's body cap */
#define PATHLEN 1024
#define API_KEY "sbx-test-key-6f1c2e0b9d4a4e7f8a3b5c1d2e9f0a7b"

/* ===========================================================================
 * Small helpers
 * ========================================================================= */
static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The whole file, NUL-terminated, malloc'd; NULL when unreadable. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL, *nb;
    size_t n = 0, cap = 0, got;

    if (!f)
        return NULL;
    do {
        if (cap - n < 4096) {
            if (!(nb = realloc(buf, cap + 65536))) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
            cap += 65536;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* An RFC 3339 UTC time offset_s seconds from now. */
static void rfc3339_in(int offset_s, char out[40])
{
    time_t t = time(NULL) + offset_s;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* An RFC 3339 UTC time with milliseconds, offset_ms from now. */
static void rfc3339_ms(int64_t offset_ms, char out[40])
{
    struct timespec ts;
    int64_t ms;
    time_t t;
    struct tm tm;
    char whole[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + offset_ms;
    t = (time_t)(ms / 1000);
    gmtime_r(&t, &tm);
    strftime(whole, sizeof whole, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, 40, "%s.%03dZ", whole, (int)(ms % 1000));
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

#define assert_str(a, b)                                                       \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                 \
            fail_msg("%s: \"%s\" != \"%s\"", #a, a_ ? a_ : "(null)",           \
                     b_ ? b_ : "(null)");                                      \
    } while (0)

/* ===========================================================================
 * Sandboxes: real processes
 * ========================================================================= */
static const char *g_bin;
static char g_tmp[256];
static char g_later[40];         /* the default expires_at: one fixed value,
                                    as a retrying client sends */
static char g_bad_exits[8192];   /* SIGTERMs that did not end in exit 0 */
static char g_logs[256][PATHLEN];/* every log file, for the final scans */
static size_t g_n_logs;
static unsigned g_seq;

typedef struct sbx {
    bool used;
    pid_t pid;                   /* 0: not running */
    int port;
    char base[64];               /* http://127.0.0.1:PORT */
    char dir[512];               /* under g_tmp (256 bytes) */
    char state[PATHLEN];
    char out[PATHLEN], log[PATHLEN];
    char *argv[32];              /* argv[0] is the binary; owned */
    const char *api_key;         /* sent on every request when set */
} sbx;

static sbx g_sbx[16];

/* A sandbox description in a fresh directory: the default flags, then the
 * NULL-terminated extra arguments. Not started. */
static sbx *sbx_new(const char *arg, ...)
{
    sbx *s = NULL;
    va_list ap;
    int n = 0;

    for (size_t i = 0; i < sizeof g_sbx / sizeof g_sbx[0]; i++)
        if (!g_sbx[i].used) {
            s = &g_sbx[i];
            break;
        }
    assert_non_null(s);
    memset(s, 0, sizeof *s);
    s->used = true;
    snprintf(s->dir, sizeof s->dir, "%s/sbx-%03u", g_tmp, ++g_seq);
    assert_int_equal(mkdir(s->dir, 0700), 0);
    {   /* via a local: s->dir and s->state share one object (restrict) */
        char state[sizeof s->state];

        snprintf(state, sizeof state, "%s/state.db", s->dir);
        memcpy(s->state, state, sizeof state);
    }
    s->argv[n++] = strdup(g_bin);
    s->argv[n++] = strdup("--listen");
    s->argv[n++] = strdup("127.0.0.1:0");
    s->argv[n++] = strdup("--state");
    s->argv[n++] = strdup(s->state);
    va_start(ap, arg);
    for (const char *a = arg; a; a = va_arg(ap, const char *)) {
        assert_true(n < 30);
        s->argv[n++] = strdup(a);
    }
    va_end(ap);
    s->argv[n] = NULL;
    return s;
}

/* Ends sbx_new's argument list. */
#define END ((const char *)NULL)

/* In the child between fork and exec: async-signal-safe calls only. */
static void child_exec(char *const argv[], int out, int err, pid_t parent)
{
    sigset_t none;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    dup2(out, 1);
    dup2(err, 2);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    execve(argv[0], argv, environ);
    _exit(127);
}

/* Starts argv with stdout and stderr in files; the pid or -1. */
static pid_t spawn(char *const argv[], const char *out_path,
                   const char *err_path)
{
    pid_t parent = getpid(), pid = -1;
    int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int err = open(err_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

    if (out >= 0 && err >= 0 && (pid = fork()) == 0)
        child_exec(argv, out, err, parent);
    if (out >= 0)
        close(out);
    if (err >= 0)
        close(err);
    return pid;
}

/* Waits up to timeout_ms for pid: its wait status, or -1 on timeout. */
static int wait_for(pid_t pid, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int st;

    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);

        if (r == pid)
            return st;
        if ((r < 0 && errno != EINTR) || now_ms() > deadline)
            return -1;
        sleep_ms(10);
    }
}

/* The exit code of a wait status (128 + signal when killed), -1 else. */
static int exit_code(int st)
{
    if (st < 0)
        return -1;
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

static void sbx_print_output(const sbx *s)
{
    char *out = slurp(s->out), *log = slurp(s->log);
    size_t n = log ? strlen(log) : 0;

    fprintf(stderr, "---- %s ----\n%s\n---- %s (last 4 KB) ----\n%s\n----\n",
            s->out, out ? out : "", s->log,
            log ? log + (n > 4096 ? n - 4096 : 0) : "");
    free(out);
    free(log);
}

#define READY_PREFIX "oncegate-sandbox: listening on http://"

/* Starts s and waits for its ready line; the test fails when it does not
 * come. Each start gets fresh output files. */
static void sbx_start(sbx *s)
{
    int64_t deadline = now_ms() + READY_MS;
    unsigned n = ++g_seq;

    snprintf(s->out, sizeof s->out, "%s/run-%03u.out", s->dir, n);
    snprintf(s->log, sizeof s->log, "%s/run-%03u.log", s->dir, n);
    if (g_n_logs < sizeof g_logs / sizeof g_logs[0])
        snprintf(g_logs[g_n_logs++], PATHLEN, "%s", s->log);
    s->pid = spawn(s->argv, s->out, s->log);
    assert_true(s->pid > 0);
    for (;;) {
        char *out = slurp(s->out), *p, *nl;
        int st;

        if (out && (p = strstr(out, READY_PREFIX)) && (nl = strchr(p, '\n'))) {
            *nl = '\0';
            s->port = atoi(strrchr(p, ':') + 1);
            snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
            free(out);
            assert_true(s->port > 0);
            return;
        }
        free(out);
        if (waitpid(s->pid, &st, WNOHANG) == s->pid || now_ms() > deadline) {
            sbx_print_output(s);
            fail_msg("sandbox did not become ready");
        }
        sleep_ms(20);
    }
}

/* Sends sig and waits for the exit (SIGKILL after EXIT_MS); the exit
 * code. A SIGTERM that does not end in exit 0 is recorded. */
static int sbx_stop(sbx *s, int sig)
{
    int st, code;
    size_t n;

    if (s->pid <= 0)
        return -1;
    kill(s->pid, sig);
    if ((st = wait_for(s->pid, EXIT_MS)) < 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &st, 0);
        st = -1;
    }
    code = exit_code(st);
    if (sig == SIGTERM && code != 0) {
        n = strlen(g_bad_exits);
        snprintf(g_bad_exits + n, sizeof g_bad_exits - n,
                 "  %s: SIGTERM ended in %d\n", s->log, code);
        sbx_print_output(s);
    }
    s->pid = 0;
    return code;
}

/* A clean restart on the same state and flags (SIGTERM must exit 0). */
static void sbx_restart(sbx *s)
{
    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    sbx_start(s);
}

static void sbx_free(sbx *s)
{
    for (int i = 0; s->argv[i]; i++)
        free(s->argv[i]);
    memset(s, 0, sizeof *s);
}

static int test_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_sbx / sizeof g_sbx[0]; i++) {
        if (!g_sbx[i].used)
            continue;
        sbx_stop(&g_sbx[i], SIGTERM);
        sbx_free(&g_sbx[i]);
    }
    return 0;
}

static void kill_all_at_exit(void)
{
    for (size_t i = 0; i < sizeof g_sbx / sizeof g_sbx[0]; i++)
        if (g_sbx[i].used && g_sbx[i].pid > 0) {
            kill(g_sbx[i].pid, SIGKILL);
            waitpid(g_sbx[i].pid, NULL, 0);
            g_sbx[i].pid = 0;
        }
}

/* ===========================================================================
 * HTTP
 * ========================================================================= */
typedef struct hres {
    long status;        /* 0: no HTTP answer (see cc) */
    CURLcode cc;
    char *body;
    size_t len;
    char *hdr;
    size_t hlen;
    json_t *json;       /* the body, when it is JSON */
    int64_t elapsed_ms;
} hres;

typedef struct buf {
    char **p;
    size_t *n;
    size_t cap;
} buf;

static size_t buf_write(char *data, size_t size, size_t nmemb, void *ud)
{
    buf *b = ud;
    size_t n = size * nmemb;
    char *p;

    if (*b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;

        while (cap < *b->n + n + 1)
            cap *= 2;
        if (!(p = realloc(*b->p, cap)))
            return 0;
        *b->p = p;
        b->cap = cap;
    }
    memcpy(*b->p + *b->n, data, n);
    *b->n += n;
    (*b->p)[*b->n] = '\0';
    return n;
}

static void hres_free(hres *r)
{
    free(r->body);
    free(r->hdr);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* The value of response header name into out; false when absent. */
static bool hdr_value(const hres *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);

    for (const char *p = r->hdr; p && *p;) {
        const char *e = strstr(p, "\r\n");
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;

            while (*v == ' ')
                v++;
            snprintf(out, n, "%.*s", (int)(len - (size_t)(v - p)), v);
            return true;
        }
        p = e ? e + 2 : p + len;
    }
    return false;
}

/* One exchange on a fresh connection: method, path, extra headers
 * (NULL-terminated "Name: value"), a body (NULL: none). The sandbox's API
 * key is added when it has one. */
static void http(const sbx *s, const char *method, const char *path,
                 const char *const *headers, const char *body, size_t len,
                 hres *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[PATHLEN], auth[256];
    buf bb = {&out->body, &out->len, 0}, hb = {&out->hdr, &out->hlen, 0};
    int64_t t0 = now_ms();

    memset(out, 0, sizeof *out);
    assert_non_null(c);
    snprintf(url, sizeof url, "%s%s", s->base, path);
    h = curl_slist_append(h, "Expect:");
    if (s->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", s->api_key);
        h = curl_slist_append(h, auth);
    }
    for (size_t i = 0; headers && headers[i]; i++)
        h = curl_slist_append(h, headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &bb);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hb);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HTTP_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    out->cc = curl_easy_perform(c);
    if (out->cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    if (out->body)
        out->json = json_loads(out->body, 0, NULL);
    out->elapsed_ms = now_ms() - t0;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

static void get(const sbx *s, const char *path, hres *out)
{
    http(s, "GET", path, NULL, NULL, 0, out);
}

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static void post_json(const sbx *s, const char *path, const char *body,
                      hres *out)
{
    http(s, "POST", path, json_ct, body, strlen(body), out);
}

/* The two resources, as the tests see them (docs/sandbox.md): the path,
 * the target member, the lookup's array, the id prefix, the complete
 * status, the closed code, and the counters of /_control/stats. A claim
 * both make is ONE body taking an api, run once for each. */
typedef struct api {
    const char *path, *target, *list, *id_prefix, *completed, *closed_code;
    const char *c_rows, *c_requests, *c_replays, *c_mismatches, *c_lookups;
} api;

static const api CREDITS = {
    "/v1/credits", "account", "credits", "cr_", "succeeded",
    "account_closed", "credits_created", "create_requests",
    "idempotent_replays", "mismatches", "lookups",
};
static const api PAYOUTS = {
    "/v1/payouts", "destination", "payouts", "po_", "completed",
    "destination_closed", "payouts_created", "payout_requests",
    "payout_replays", "payout_mismatches", "payout_lookups",
};

/* A named test of one claim for one resource; the claim's body is shared
 * by the resources and takes the api. */
#define CLAIM(name, call)                                                      \
    static void name(void **state)                                             \
    {                                                                          \
        (void)state;                                                           \
        call;                                                                  \
    }

/* The resource that is not a. */
static const api *other_api(const api *a)
{
    return a == &CREDITS ? &PAYOUTS : &CREDITS;
}

/* Every destination a test sent: none may appear in a log. */
static char *g_dests[256];
static size_t g_n_dests;

/* A create body for a's target (a new string). */
static char *effect_body(const api *a, const char *target, const char *amount,
                         const char *currency, const char *reference,
                         const char *expires_at)
{
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:s}", a->target, target,
                          "amount", amount, "currency", currency, "reference",
                          reference, "expires_at", expires_at);
    char *t = json_dumps(b, JSON_COMPACT);

    json_decref(b);
    assert_non_null(t);
    return t;
}

/* The credit create body (a new string). */
static char *create_body(const char *account, const char *amount,
                         const char *reference, const char *expires_at)
{
    return effect_body(&CREDITS, account, amount, "USD", reference,
                       expires_at);
}

/* POST a->path with Idempotency-Key key and the given parameters
 * (expires_at NULL: g_later). */
static void create_in(const sbx *s, const api *a, const char *key,
                      const char *target, const char *amount,
                      const char *currency, const char *reference,
                      const char *expires_at, hres *out)
{
    char kh[512];
    const char *headers[] = {"Content-Type: application/json", kh, NULL};
    char *body = effect_body(a, target, amount, currency, reference,
                             expires_at ? expires_at : g_later);

    if (a == &PAYOUTS && g_n_dests < sizeof g_dests / sizeof g_dests[0])
        g_dests[g_n_dests++] = strdup(target);
    snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
    http(s, "POST", a->path, headers, body, strlen(body), out);
    free(body);
}

/* create_in() in USD. */
static void create_at(const sbx *s, const api *a, const char *key,
                      const char *target, const char *amount,
                      const char *reference, const char *expires_at,
                      hres *out)
{
    create_in(s, a, key, target, amount, "USD", reference, expires_at, out);
}

/* POST /v1/credits. */
static void create(const sbx *s, const char *key, const char *account,
                   const char *amount, const char *reference,
                   const char *expires_at, hres *out)
{
    create_at(s, &CREDITS, key, account, amount, reference, expires_at, out);
}

/* An error answer: status and code. */
static void assert_error(const hres *r, long status, const char *code)
{
    if (r->status != status || !r->json || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), code) != 0 ||
        !jstr(r->json, "message"))
        fail_msg("expected %ld %s, got %ld (curl %d): %s", status, code,
                 r->status, (int)r->cc, r->body ? r->body : "");
}

/* A 201 of a's with every documented member, complete. */
static void assert_effect(const api *a, const hres *r, const char *target,
                          const char *reference)
{
    if (r->status != 201 || !r->json)
        fail_msg("expected 201, got %ld (curl %d): %s", r->status, (int)r->cc,
                 r->body ? r->body : "");
    assert_int_equal(json_object_size(r->json), 7);
    assert_true(strncmp(jstr(r->json, "id"), a->id_prefix, 3) == 0);
    assert_int_equal(strlen(jstr(r->json, "id")), 27);
    assert_str(jstr(r->json, a->target), target);
    assert_str(jstr(r->json, "currency"), "USD");
    assert_str(jstr(r->json, "reference"), reference);
    assert_str(jstr(r->json, "status"), a->completed);
    assert_non_null(jstr(r->json, "amount"));
    assert_non_null(jstr(r->json, "created_at"));
}

/* A 201 credit with every documented member. */
static void assert_credit(const hres *r, const char *account,
                          const char *reference)
{
    assert_effect(&CREDITS, r, account, reference);
}

/* One counter of /_control/stats. */
static json_int_t counter(const sbx *s, const char *name)
{
    hres r;
    json_int_t v;

    get(s, "/_control/stats", &r);
    assert_int_equal(r.status, 200);
    assert_true(json_is_integer(json_object_get(r.json, name)));
    v = json_integer_value(json_object_get(r.json, name));
    hres_free(&r);
    return v;
}

/* GET a->path?param=value (URL-encoded): the records array (a new
 * reference), after checking the answer is 200. */
static json_t *lookup_at(const sbx *s, const api *ap, const char *param,
                         const char *value)
{
    CURL *c = curl_easy_init();
    char *enc = curl_easy_escape(c, value, 0);
    char path[PATHLEN];
    json_t *a;
    hres r;

    snprintf(path, sizeof path, "%s?%s=%s", ap->path, param, enc);
    curl_free(enc);
    curl_easy_cleanup(c);
    get(s, path, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_object_size(r.json), 1);
    a = json_incref(json_object_get(r.json, ap->list));
    assert_true(json_is_array(a));
    hres_free(&r);
    return a;
}

/* The number of records a lookup finds. */
static size_t lookup_at_n(const sbx *s, const api *ap, const char *param,
                          const char *value)
{
    json_t *a = lookup_at(s, ap, param, value);
    size_t n = json_array_size(a);

    json_decref(a);
    return n;
}

static json_t *lookup(const sbx *s, const char *param, const char *value)
{
    return lookup_at(s, &CREDITS, param, value);
}

static size_t lookup_n(const sbx *s, const char *param, const char *value)
{
    return lookup_at_n(s, &CREDITS, param, value);
}

/* Arms fault for count creates (ms < 0: no "ms" member). */
static void arm(const sbx *s, const char *fault, int count, int ms)
{
    json_t *b = json_pack("{s:s, s:i}", "fault", fault, "count", count);
    char *t;
    hres r;

    if (ms >= 0)
        json_object_set_new(b, "ms", json_integer(ms));
    t = json_dumps(b, JSON_COMPACT);
    post_json(s, "/_control/faults", t, &r);
    if (r.status != 200)
        fail_msg("arming %s: %ld %s", fault, r.status, r.body ? r.body : "");
    free(t);
    json_decref(b);
    hres_free(&r);
}

/* Counts credit rows in a state file directly (no sandbox involved). */
static int state_credit_rows(const char *path)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    int n = -1;

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM credits", -1, &q,
                           NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

/* A create is 201 and a retry with its key replays the saved body byte for
 * byte, counted in ap's counters and no other resource's. */
static void create_then_replay(const api *ap, const char *key,
                               const char *target, const char *amount,
                               const char *canonical, const char *reference)
{
    sbx *s = sbx_new("--control", END);
    const api *other = other_api(ap);
    char h[64];
    hres a, b;

    sbx_start(s);
    create_at(s, ap, key, target, amount, reference, NULL, &a);
    assert_effect(ap, &a, target, reference);
    assert_str(jstr(a.json, "amount"), canonical);
    assert_false(hdr_value(&a, "Idempotent-Replayed", h, sizeof h));
    create_at(s, ap, key, target, amount, reference, NULL, &b);
    assert_int_equal(b.status, 201);
    assert_str(b.body, a.body); /* byte for byte */
    assert_true(hdr_value(&b, "Idempotent-Replayed", h, sizeof h));
    assert_str(h, "true");
    assert_int_equal(counter(s, ap->c_rows), 1);
    assert_int_equal(counter(s, ap->c_requests), 2);
    assert_int_equal(counter(s, ap->c_replays), 1);
    assert_int_equal(counter(s, other->c_rows), 0);
    assert_int_equal(counter(s, other->c_requests), 0);
    assert_int_equal(counter(s, other->c_replays), 0);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(create_is_201_and_a_same_key_retry_replays_the_identical_saved_body,
      create_then_replay(&CREDITS, "key-1", "A-1187", "250.00", "250", "invoice-1"))

CLAIM(payout_create_is_201_completed_with_a_po_id_and_a_same_key_retry_replays_the_identical_body,
      create_then_replay(&PAYOUTS, "payout-PAY-3107-a1", "dst_tok_a1b2c3d4", "4250.00", "4250", "PAY-3107-a1"))

/* The same amount and expires_at instant spelled differently are the same
 * request. */
static void compared_canonically(const api *ap, const char *target)
{
    sbx *s = sbx_new("--control", END);
    char z[40], off[40];
    hres a, b;

    sbx_start(s);
    rfc3339_in(3600, z);
    /* The same instant with a +00:00 offset and a fraction of zeros. */
    snprintf(off, sizeof off, "%.19s.000+00:00", z);
    create_at(s, ap, "key-c", target, "0250.50", "ref-c", z, &a);
    assert_effect(ap, &a, target, "ref-c");
    assert_str(jstr(a.json, "amount"), "250.5");
    create_at(s, ap, "key-c", target, "250.500", "ref-c", off, &b);
    assert_int_equal(b.status, 201);
    assert_str(b.body, a.body);
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(parameters_are_compared_canonically_amount_and_expiry_instant,
      compared_canonically(&CREDITS, "A-1"))

CLAIM(payout_parameters_are_compared_canonically_amount_and_expiry_instant,
      compared_canonically(&PAYOUTS, "dst_tok_canon"))

/* The key of ap's create with target, sent again with any one parameter
 * other (other_target for the target), is 422 idempotency_mismatch. */
static void mismatches_change_nothing(const api *ap, const char *target,
                                      const char *other_target)
{
    const struct {
        const char *target, *amount, *currency, *reference;
        int expires_in;
    } other[] = {
        {other_target, "10", "USD", "ref-m", 3600}, /* target */
        {target, "10.01", "USD", "ref-m", 3600},    /* amount */
        {target, "10", "EUR", "ref-m", 3600},       /* currency */
        {target, "10", "USD", "ref-n", 3600},       /* reference */
        {target, "10", "USD", "ref-m", 7200},       /* expires_at */
    };
    sbx *s = sbx_new("--control", END);
    char exp[40];
    hres a, r;

    sbx_start(s);
    rfc3339_in(3600, exp);
    create_at(s, ap, "key-m", target, "10", "ref-m", exp, &a);
    assert_effect(ap, &a, target, "ref-m");
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char e[40];

        rfc3339_in(other[i].expires_in, e);
        create_in(s, ap, "key-m", other[i].target, other[i].amount,
                  other[i].currency, other[i].reference,
                  other[i].expires_in == 3600 ? exp : e, &r);
        assert_error(&r, 422, "idempotency_mismatch");
        hres_free(&r);
    }
    assert_int_equal(counter(s, ap->c_rows), 1);
    assert_int_equal(counter(s, ap->c_mismatches), 5);
    assert_int_equal(counter(s, other_api(ap)->c_mismatches), 0);
    /* The key still answers its saved result. */
    create_at(s, ap, "key-m", target, "10", "ref-m", exp, &r);
    assert_str(r.body, a.body);
    hres_free(&r);
    hres_free(&a);
}

CLAIM(same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing,
      mismatches_change_nothing(&CREDITS, "A-1", "A-2"))

CLAIM(payout_same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing,
      mismatches_change_nothing(&PAYOUTS, "dst_tok_pm", "dst_tok_other"))

/* ===========================================================================
 * Concurrency
 * ========================================================================= */
typedef struct racer {
    pthread_barrier_t *start;
    const sbx *s;
    const api *a;
    char key[64];
    hres r;
} racer;

static void *racer_main(void *arg)
{
    racer *me = arg;

    pthread_barrier_wait(me->start);
    create_at(me->s, me->a, me->key,
              me->a == &PAYOUTS ? "dst_race" : "A-race", "99.99", me->key,
              NULL, &me->r);
    return NULL;
}

/* RACERS concurrent creates of a with one key, released by a barrier. */
static void race_at(const sbx *s, const api *a, const char *key,
                    racer rs[RACERS])
{
    pthread_barrier_t start;
    pthread_t th[RACERS];

    assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
    for (int i = 0; i < RACERS; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].start = &start;
        rs[i].s = s;
        rs[i].a = a;
        snprintf(rs[i].key, sizeof rs[i].key, "%s", key);
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
}

/* RACE_ROUNDS rounds of RACERS concurrent creates of ap, one key a round:
 * one record a round, every racer the same answer. */
static void races_make_one_record_a_round(const api *ap)
{
    sbx *s = sbx_new("--control", END);
    racer rs[RACERS];
    char key[64];

    sbx_start(s);
    for (int round = 1; round <= RACE_ROUNDS; round++) {
        snprintf(key, sizeof key, "race-%d", round);
        race_at(s, ap, key, rs);
        for (int i = 0; i < RACERS; i++) {
            /* One created, the rest replayed: all the same answer. */
            assert_int_equal(rs[i].r.status, 201);
            assert_str(rs[i].r.body, rs[0].r.body);
        }
        for (int i = 0; i < RACERS; i++)
            hres_free(&rs[i].r);
        assert_int_equal(counter(s, ap->c_rows), round);
        assert_int_equal(lookup_at_n(s, ap, "idempotency_key", key), 1);
    }
    assert_int_equal(counter(s, ap->c_requests), RACE_ROUNDS * RACERS);
    assert_int_equal(counter(s, ap->c_replays), RACE_ROUNDS * (RACERS - 1));
}

CLAIM(twenty_concurrent_same_key_creates_make_exactly_one_credit,
      races_make_one_record_a_round(&CREDITS))

CLAIM(twenty_concurrent_same_key_payouts_make_exactly_one_payout,
      races_make_one_record_a_round(&PAYOUTS))

/* With --no-atomic-same-key, concurrent first uses of one key of ap can
 * each create a record, all carrying the key. */
static void races_can_duplicate_without_atomic_same_key(const api *ap)
{
    sbx *s = sbx_new("--control", "--no-atomic-same-key", "--race-gap-ms", "200", END);
    racer rs[RACERS];
    json_int_t before = 0, most = 0;
    char key[64];

    sbx_start(s);
    for (int round = 1; round <= RACE_ROUNDS && most < 2; round++) {
        json_int_t made;

        snprintf(key, sizeof key, "race-%d", round);
        race_at(s, ap, key, rs);
        for (int i = 0; i < RACERS; i++) {
            assert_int_equal(rs[i].r.status, 201);
            hres_free(&rs[i].r);
        }
        made = counter(s, ap->c_rows) - before;
        before += made;
        assert_true(made >= 1);
        /* Every duplicate carries the key: lookups see them all. */
        assert_int_equal(lookup_at_n(s, ap, "idempotency_key", key),
                         (size_t)made);
        if (made > most)
            most = made;
    }
    if (most < 2)
        fail_msg("no round of %d racers made a duplicate", RACERS);
}

CLAIM(without_atomic_same_key_concurrent_creates_can_make_duplicates,
      races_can_duplicate_without_atomic_same_key(&CREDITS))
CLAIM(without_atomic_same_key_concurrent_payouts_can_make_duplicates,
      races_can_duplicate_without_atomic_same_key(&PAYOUTS))

/* A closed target is refused with ap's closed code, and the key keeps
 * that refusal: no record will ever follow for it. */
static void closed_target_is_refused_and_recorded(const api *ap,
                                                  const char *closed,
                                                  const char *open)
{
    sbx *s = sbx_new("--control", END);
    char h[16];
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-closed", closed, "5", "ref-closed", NULL, &a);
    assert_error(&a, 422, ap->closed_code);
    create_at(s, ap, "key-closed", closed, "5", "ref-closed", NULL, &b);
    assert_int_equal(b.status, 422);
    assert_str(b.body, a.body);
    assert_true(hdr_value(&b, "Idempotent-Replayed", h, sizeof h));
    /* The key is recorded with that result: other parameters mismatch. */
    create_at(s, ap, "key-closed", open, "5", "ref-closed", NULL, &c);
    assert_error(&c, 422, "idempotency_mismatch");
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(counter(s, ap->c_replays), 1);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-closed"), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(closed_account_is_422_account_closed_and_a_replay_is_the_same_422,
      closed_target_is_refused_and_recorded(&CREDITS, "closed-77", "A-1"))

CLAIM(closed_destination_is_422_destination_closed_and_a_replay_is_the_same_422,
      closed_target_is_refused_and_recorded(&PAYOUTS, "dst_closed_77", "dst_tok_open"))

/* A busy target is 429 rate_limited with Retry-After and records
 * nothing: the key stays new for any parameters. */
static void busy_target_records_nothing(const api *ap, const char *busy,
                                        const char *open)
{
    sbx *s = sbx_new("--control", END);
    char ra[16];
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-busy", busy, "5", "ref-busy", NULL, &a);
    assert_error(&a, 429, "rate_limited");
    assert_non_null(strstr(jstr(a.json, "message"), ap->target));
    assert_true(hdr_value(&a, "Retry-After", ra, sizeof ra));
    assert_str(ra, "1");
    create_at(s, ap, "key-busy", busy, "5", "ref-busy", NULL, &b);
    assert_error(&b, 429, "rate_limited");
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(counter(s, ap->c_replays), 0);
    /* Nothing was recorded: the key is still new for any parameters. */
    create_at(s, ap, "key-busy", open, "5", "ref-busy", NULL, &c);
    assert_effect(ap, &c, open, "ref-busy");
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(busy_account_is_429_with_retry_after_and_records_nothing,
      busy_target_records_nothing(&CREDITS, "busy-3", "A-9"))

CLAIM(busy_destination_is_429_with_retry_after_and_records_nothing,
      busy_target_records_nothing(&PAYOUTS, "dst_busy_3", "dst_tok_9"))

/* An async target is 202 pending, listed pending, replayed pending, and
 * complete --async-complete-ms after creation: then listed and replayed
 * complete, the same record. */
static void async_target_completes_later(const api *ap, const char *async)
{
    sbx *s = sbx_new("--control", "--async-complete-ms", "700", END);
    json_t *found;
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &a);
    assert_int_equal(a.status, 202);
    assert_int_equal(json_object_size(a.json), 2);
    assert_str(jstr(a.json, "status"), "pending");
    assert_true(strncmp(jstr(a.json, "id"), ap->id_prefix, 3) == 0);
    found = lookup_at(s, ap, "reference", "ref-async");
    assert_int_equal(json_array_size(found), 1);
    assert_str(jstr(json_array_get(found, 0), "status"), "pending");
    json_decref(found);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &b);
    assert_int_equal(b.status, 202); /* the saved result, still pending */
    assert_str(b.body, a.body);
    sleep_ms(900);
    found = lookup_at(s, ap, "reference", "ref-async");
    assert_int_equal(json_array_size(found), 1);
    assert_str(jstr(json_array_get(found, 0), "status"), ap->completed);
    assert_str(jstr(json_array_get(found, 0), "id"), jstr(a.json, "id"));
    json_decref(found);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &c);
    assert_effect(ap, &c, async, "ref-async"); /* now the complete record */
    assert_str(jstr(c.json, "id"), jstr(a.json, "id"));
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(async_account_is_202_pending_then_succeeded_after_the_delay,
      async_target_completes_later(&CREDITS, "async-5"))

CLAIM(async_destination_is_202_pending_then_completed_after_the_delay,
      async_target_completes_later(&PAYOUTS, "dst_async_5"))

/* ===========================================================================
 * Time: expiry, retention, visibility
 * ========================================================================= */
/* A request of ap decided after expires_at + skew is 422 request_expired
 * (its message naming noun) and records nothing; a retained key still
 * answers its saved result after expires_at. */
static void expired_request_records_nothing(const api *ap,
                                            const char *target,
                                            const char *noun)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "2", END);
    char late[40], within[40];
    hres a, b, c;

    sbx_start(s);
    rfc3339_in(-60, late);
    rfc3339_ms(-500, within); /* past, but 1.5 s inside the skew */
    create_at(s, ap, "key-exp", target, "3", "ref-exp", late, &a);
    assert_error(&a, 422, "request_expired");
    assert_non_null(strstr(jstr(a.json, "message"), noun));
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-exp"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-exp"), 0);
    create_at(s, ap, "key-exp", target, "3", "ref-exp", within, &b);
    assert_effect(ap, &b, target, "ref-exp"); /* the key was not recorded */
    hres_free(&a);
    sleep_ms(2000); /* now past expires_at + skew */
    create_at(s, ap, "key-exp-2", target, "3", "ref-exp-2", within, &a);
    assert_error(&a, 422, "request_expired");
    /* A retained key still answers its saved result. */
    create_at(s, ap, "key-exp", target, "3", "ref-exp", within, &c);
    assert_str(c.body, b.body);
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(request_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing,
      expired_request_records_nothing(&CREDITS, "A-1", "no credit"))
CLAIM(payout_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing,
      expired_request_records_nothing(&PAYOUTS, "dst_tok_exp", "no payout"))

/* A key is forgotten --retention-seconds after its first use: the same
 * request then creates a second record, and both carry the key. */
static void forgotten_key_creates_again(const api *ap, const char *target)
{
    sbx *s = sbx_new("--control", "--retention-seconds", "1", END);
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &a);
    assert_effect(ap, &a, target, "ref-ret");
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &b);
    assert_str(b.body, a.body); /* retained */
    sleep_ms(2000);
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &c);
    assert_effect(ap, &c, target, "ref-ret");
    assert_string_not_equal(jstr(c.json, "id"), jstr(a.json, "id"));
    assert_int_equal(counter(s, ap->c_rows), 2);
    /* Both records carry the key: the duplicate is visible. */
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-ret"), 2);
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-ret"), 2);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(key_older_than_retention_is_forgotten_and_the_same_key_creates_again,
      forgotten_key_creates_again(&CREDITS, "A-1"))

CLAIM(payout_key_older_than_retention_is_forgotten_and_the_same_key_creates_a_second_payout,
      forgotten_key_creates_again(&PAYOUTS, "dst_tok_ret"))

/* A new record is hidden from lookups for --visibility-delay-ms, and
 * listed from then on; a replay by key sees it at once. */
static void hidden_until_the_visibility_delay(const api *ap,
                                              const char *target)
{
    sbx *s = sbx_new("--control", "--visibility-delay-ms", "1500", END);
    hres a, b;
    int64_t t0;

    sbx_start(s);
    t0 = now_ms();
    create_at(s, ap, "key-vis", target, "4", "ref-vis", NULL, &a);
    assert_effect(ap, &a, target, "ref-vis");
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-vis"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-vis"), 0);
    /* A replay by key is not a lookup: it sees its own record at once. */
    create_at(s, ap, "key-vis", target, "4", "ref-vis", NULL, &b);
    assert_str(b.body, a.body);
    assert_true(now_ms() - t0 < 1400);
    assert_int_equal(counter(s, ap->c_rows), 1);
    if (now_ms() - t0 < 1700)
        sleep_ms((int)(1700 - (now_ms() - t0)));
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-vis"), 1);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-vis"), 1);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(visibility_delay_hides_a_new_credit_from_lookups_until_it_passes,
      hidden_until_the_visibility_delay(&CREDITS, "A-1"))

/* The processing window, second half: an accepted payout is hidden from
 * lookups for the visibility delay, and listed from then on. */
CLAIM(accepted_payout_is_invisible_to_lookups_before_the_visibility_delay_and_visible_after,
      hidden_until_the_visibility_delay(&PAYOUTS, "dst_tok_vis"))

/* Lookups by reference and by key list ap's records, oldest first, as
 * the creates answered them; targets t1..t3 distinct. */
static void lookups_list_oldest_first(const api *ap, const char *t1,
                                      const char *t2, const char *t3)
{
    /* A key that needs URL encoding: '+' '&' '=' '%' '/' '?'. */
    static const char odd_key[] = "k+1&x=y%2F/?z";
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-l1", t1, "1", "shared ref", NULL, &a);
    create_at(s, ap, odd_key, t2, "2", "shared ref", NULL, &b);
    create_at(s, ap, "key-l3", t3, "3", "other", NULL, &c);
    assert_int_equal(a.status, 201);
    assert_int_equal(b.status, 201);
    assert_int_equal(c.status, 201);
    found = lookup_at(s, ap, "reference", "shared ref");
    assert_int_equal(json_array_size(found), 2);
    assert_true(json_equal(json_array_get(found, 0), a.json));
    assert_true(json_equal(json_array_get(found, 1), b.json));
    json_decref(found);
    found = lookup_at(s, ap, "idempotency_key", odd_key);
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(lookup_at_n(s, ap, "reference", "nothing here"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "never-used"), 0);
    assert_int_equal(counter(s, ap->c_lookups), 4);
    assert_int_equal(counter(s, other_api(ap)->c_lookups), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(lookups_by_reference_and_by_key_find_credits_oldest_first,
      lookups_list_oldest_first(&CREDITS, "A-1", "A-2", "A-3"))

CLAIM(payout_lookups_by_reference_and_by_key_find_payouts_oldest_first,
      lookups_list_oldest_first(&PAYOUTS, "dst_tok_l1", "dst_tok_l2", "dst_tok_l3"))

/* A lookup of ap without exactly one valid parameter is 400
 * invalid_request naming it (unknown: the target member), uncounted. */
static void bad_lookups_are_400(const api *ap)
{
    const struct {
        const char *query, *field;
    } bad[] = {
        {"", "query"},
        {"?reference=a&idempotency_key=b", "query"},
        {ap == &CREDITS ? "?account=A-1" : "?destination=dst_tok_q",
         ap->target},
        {"?reference=", "reference"},
        {"?reference=a&reference=b", "reference"},
        {"?idempotency_key=", "idempotency_key"},
        {"?idempotency_key=a%20b", "idempotency_key"},
        {"?reference=a%00b", "reference"},
        {"?reference=a%0Ab", "reference"},
    };
    sbx *s = sbx_new("--control", END);
    char path[256];
    hres r;

    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s%s", ap->path, bad[i].query);
        get(s, path, &r);
        assert_error(&r, 400, "invalid_request");
        if (strcmp(jstr(r.json, "field"), bad[i].field) != 0)
            fail_msg("%s: field %s, expected %s", bad[i].query,
                     jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    assert_int_equal(counter(s, ap->c_lookups), 0);
}

CLAIM(lookup_without_exactly_one_valid_parameter_is_400_invalid_request,
      bad_lookups_are_400(&CREDITS))
CLAIM(payout_lookup_without_exactly_one_valid_parameter_is_400_invalid_request,
      bad_lookups_are_400(&PAYOUTS))

/* ===========================================================================
 * Faults
 * ========================================================================= */
static void drop_response_after_effect_gives_no_http_answer_but_the_credit_exists_and_a_retry_replays_it(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "drop_response_after_effect", 1, -1);
    create(s, "key-drop", "A-1", "20", "ref-drop", NULL, &a);
    assert_int_equal(a.status, 0);       /* no status line at all */
    assert_int_not_equal(a.cc, CURLE_OK);
    assert_null(a.body);
    assert_int_equal(counter(s, "credits_created"), 1);
    create(s, "key-drop", "A-1", "20", "ref-drop", NULL, &b);
    assert_credit(&b, "A-1", "ref-drop");
    found = lookup(s, "idempotency_key", "key-drop");
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "idempotent_replays"), 1);
    hres_free(&a);
    hres_free(&b);
}

static void exchange(const sbx *s, const char *code, hres *out);

/* A request in the background: a create with key, or (exchange) the
 * exchange of the code in key. */
typedef struct bg_create {
    const sbx *s;
    const char *key;
    hres r;
    bool exchange;
} bg_create;

static void *bg_create_main(void *arg)
{
    bg_create *b = arg;

    if (b->exchange)
        exchange(b->s, b->key, &b->r);
    else
        create(b->s, b->key, "A-1", "6", b->key, NULL, &b->r);
    return NULL;
}

static void delay_before_effect_creates_nothing_until_the_delay_has_passed(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-db", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_before_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    sleep_ms(600);
    assert_int_equal(counter(s, "credits_created"), 0);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-db");
    assert_true(bg.r.elapsed_ms >= 1500);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&bg.r);
}

static void delay_after_effect_commits_the_credit_before_the_delayed_answer(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-da", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    sleep_ms(600);
    /* Answered later; the effect is already there. */
    assert_int_equal(lookup_n(s, "idempotency_key", "key-da"), 1);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-da");
    assert_true(bg.r.elapsed_ms >= 1500);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&bg.r);
}

static void error_500_after_effect_answers_500_internal_but_the_credit_exists(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_after_effect", 1, -1);
    create(s, "key-500a", "A-1", "7", "ref-500a", NULL, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "credits_created"), 1);
    found = lookup(s, "idempotency_key", "key-500a");
    assert_int_equal(json_array_size(found), 1);
    create(s, "key-500a", "A-1", "7", "ref-500a", NULL, &b);
    assert_credit(&b, "A-1", "ref-500a");
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&a);
    hres_free(&b);
}

static void error_500_before_effect_answers_500_internal_and_creates_nothing(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_before_effect", 1, -1);
    create(s, "key-500b", "A-1", "7", "ref-500b", NULL, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "credits_created"), 0);
    assert_int_equal(counter(s, "create_requests"), 1);
    assert_int_equal(lookup_n(s, "idempotency_key", "key-500b"), 0);
    create(s, "key-500b", "A-1", "7", "ref-500b", NULL, &b);
    assert_credit(&b, "A-1", "ref-500b"); /* the key was never recorded */
    assert_int_equal(counter(s, "idempotent_replays"), 0);
    hres_free(&a);
    hres_free(&b);
}

static void exit_after_effect_kills_the_process_and_after_a_restart_the_key_replays_the_durable_credit(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;
    int st;

    (void)state;
    sbx_start(s);
    arm(s, "exit_after_effect", 1, -1);
    create(s, "key-exit", "A-1", "30", "ref-exit", NULL, &a);
    assert_int_equal(a.status, 0);
    assert_int_not_equal(a.cc, CURLE_OK);
    st = wait_for(s->pid, EXIT_MS);
    assert_int_equal(exit_code(st), 137);
    s->pid = 0;
    /* Durable before the process died: read the file itself. */
    assert_int_equal(state_credit_rows(s->state), 1);
    sbx_start(s);
    assert_int_equal(counter(s, "credits_created"), 1);
    create(s, "key-exit", "A-1", "30", "ref-exit", NULL, &b);
    assert_credit(&b, "A-1", "ref-exit");
    found = lookup(s, "reference", "ref-exit");
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "idempotent_replays"), 1);
    assert_int_equal(counter(s, "create_requests"), 2);
    hres_free(&a);
    hres_free(&b);
}

static void faults_fire_in_arming_order_for_their_count_and_delete_clears_them(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_before_effect", 2, -1);
    arm(s, "error_500_after_effect", 1, -1);
    get(s, "/_control/faults", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 2);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r.json, "faults"), 0),
                         "count")),
                     2);
    hres_free(&r);
    create(s, "key-f1", "A-1", "1", "ref-f1", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    create(s, "key-f2", "A-1", "1", "ref-f2", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 0);
    create(s, "key-f3", "A-1", "1", "ref-f3", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1); /* after the effect */
    create(s, "key-f4", "A-1", "1", "ref-f4", NULL, &r);
    assert_int_equal(r.status, 201); /* the queue is empty */
    hres_free(&r);
    arm(s, "error_500_before_effect", 5, -1);
    http(s, "DELETE", "/_control/faults", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 0);
    hres_free(&r);
    create(s, "key-f5", "A-1", "1", "ref-f5", NULL, &r);
    assert_int_equal(r.status, 201);
    hres_free(&r);
}

static void invalid_fault_requests_are_400_and_arm_nothing(void **state)
{
    static const struct {
        const char *body, *code, *field;
    } bad[] = {
        {"{\"fault\":\"explode\"}", "invalid_request", "fault"},
        {"{\"count\":1}", "invalid_request", "fault"},
        {"{\"fault\":\"delay_after_effect\"}", "invalid_request", "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"ms\":5}", "invalid_request",
         "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"count\":0}",
         "invalid_request", "count"},
        {"{\"fault\":\"error_500_after_effect\",\"count\":\"1\"}",
         "invalid_request", "count"},
        {"{\"fault\":\"delay_before_effect\",\"ms\":60001}", "invalid_request",
         "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"when\":1}",
         "invalid_request", "when"},
        {"[\"error_500_after_effect\"]", "invalid_json", NULL},
        {"{", "invalid_json", NULL},
    };
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        post_json(s, "/_control/faults", bad[i].body, &r);
        assert_error(&r, 400, bad[i].code);
        if (bad[i].field)
            assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    get(s, "/_control/faults", &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 0);
    hres_free(&r);
}

/* ===========================================================================
 * Durability, control, auth, drain
 * ========================================================================= */
static void state_survives_a_clean_restart(void **state)
{
    sbx *s = sbx_new("--control", END);
    hres a, c, a2, c2, st1, st2;

    (void)state;
    sbx_start(s);
    create(s, "key-d1", "A-1", "11", "ref-d", NULL, &a);
    assert_credit(&a, "A-1", "ref-d");
    create(s, "key-d2", "closed-1", "11", "ref-d", NULL, &c);
    assert_error(&c, 422, "account_closed");
    assert_int_equal(lookup_n(s, "reference", "ref-d"), 1);
    get(s, "/_control/stats", &st1);
    sbx_restart(s);
    get(s, "/_control/stats", &st2);
    assert_true(json_equal(st1.json, st2.json)); /* counters are durable */
    create(s, "key-d1", "A-1", "11", "ref-d", NULL, &a2);
    assert_str(a2.body, a.body);
    create(s, "key-d2", "closed-1", "11", "ref-d", NULL, &c2);
    assert_str(c2.body, c.body);
    assert_int_equal(lookup_n(s, "reference", "ref-d"), 1);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&a);
    hres_free(&c);
    hres_free(&a2);
    hres_free(&c2);
    hres_free(&st1);
    hres_free(&st2);
}

static void control_routes_are_404_without_control(void **state)
{
    sbx *s = sbx_new(END);
    hres r;

    (void)state;
    sbx_start(s);
    get(s, "/_control/stats", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    get(s, "/_control/faults", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/faults", "{\"fault\":\"exit_after_effect\"}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/reset", "{}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/codes", "{}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    create(s, "key-nc", "A-1", "1", "ref-nc", NULL, &r);
    assert_credit(&r, "A-1", "ref-nc"); /* nothing was armed */
    hres_free(&r);
}

static void bearer_key_from_api_key_file_is_required_and_refusals_have_no_effect(
    void **state)
{
    static const char *const wrong[] = {
        NULL, "Bearer wrong-key", "Basic " API_KEY, "Bearer " API_KEY "x",
    };
    char path[PATHLEN], auth[256], wa[64];
    sbx *s;
    FILE *f;
    hres r;

    (void)state;
    snprintf(path, sizeof path, "%s/api-key", g_tmp);
    assert_non_null(f = fopen(path, "w"));
    fputs("  " API_KEY "\n\n", f); /* trimmed */
    fclose(f);
    s = sbx_new("--control", "--api-key-file", path, END);
    sbx_start(s);
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char kh[] = "Idempotency-Key: key-auth";
        const char *headers[] = {"Content-Type: application/json", kh,
                                 wrong[i] ? auth : NULL, NULL};
        char *body = create_body("A-1", "1", "ref-auth", "2999-01-01T00:00:00Z");

        snprintf(auth, sizeof auth, "Authorization: %s",
                 wrong[i] ? wrong[i] : "");
        http(s, "POST", "/v1/credits", headers, body, strlen(body), &r);
        assert_error(&r, 401, "unauthorized");
        assert_true(hdr_value(&r, "WWW-Authenticate", wa, sizeof wa));
        hres_free(&r);
        free(body);
    }
    get(s, "/v1/credits?reference=ref-auth", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    get(s, "/_control/stats", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    create(s, "key-auth", "A-1", "1", "ref-auth", NULL, &r);
    assert_credit(&r, "A-1", "ref-auth");
    hres_free(&r);
    assert_int_equal(lookup_n(s, "reference", "ref-auth"), 1);
}

/* One row of the bad-input table: how the key header is sent, the body,
 * and the expected answer. */
enum { K_OK, K_NONE, K_EMPTY, K_TWO, K_LONG, K_SPACE, K_NON_ASCII };

static void bad_create(const sbx *s, int kmode, const char *ctype,
                       const char *body, size_t len, hres *r)
{
    char kh[400], kh2[64] = "Idempotency-Key: second";
    char ct[128];
    const char *headers[4] = {NULL, NULL, NULL, NULL};
    int n = 0;

    snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
    headers[n++] = ct;
    switch (kmode) {
    case K_OK: snprintf(kh, sizeof kh, "Idempotency-Key: key-bad"); break;
    case K_NONE: kh[0] = '\0'; break;
    case K_EMPTY: snprintf(kh, sizeof kh, "Idempotency-Key;"); break;
    case K_TWO: snprintf(kh, sizeof kh, "Idempotency-Key: first"); break;
    case K_LONG:
        snprintf(kh, sizeof kh, "Idempotency-Key: %0256d", 7);
        break;
    case K_SPACE: snprintf(kh, sizeof kh, "Idempotency-Key: a b"); break;
    case K_NON_ASCII:
        snprintf(kh, sizeof kh, "Idempotency-Key: k\xc3\xa9y");
        break;
    }
    if (kh[0])
        headers[n++] = kh;
    if (kmode == K_TWO)
        headers[n++] = kh2;
    http(s, "POST", "/v1/credits", headers, body, len, r);
}

#define GOOD_REST                                                              \
    "\"currency\":\"USD\",\"reference\":\"r\",\"expires_at\":"                 \
    "\"2999-01-01T00:00:00Z\""
#define GOOD "{\"account\":\"A-1\",\"amount\":\"1\"," GOOD_REST "}"
/* Ten "é" (20 bytes). */
#define E10 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9"

static void malformed_or_invalid_create_requests_are_400_naming_the_field_and_change_nothing(
    void **state)
{
    static const struct {
        int kmode;
        const char *body, *code, *field;
    } bad[] = {
        {K_NONE, GOOD, "idempotency_key_required", NULL},
        {K_EMPTY, GOOD, "idempotency_key_required", NULL},
        {K_TWO, GOOD, "idempotency_key_required", NULL},
        {K_LONG, GOOD, "idempotency_key_required", NULL},
        {K_SPACE, GOOD, "idempotency_key_required", NULL},
        {K_NON_ASCII, GOOD, "idempotency_key_required", NULL},
        {K_OK, "not json", "invalid_json", NULL},
        {K_OK, "", "invalid_json", NULL},
        {K_OK, "[1,2]", "invalid_json", NULL},
        {K_OK, "\"text\"", "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-1\",\"account\":\"A-2\",\"amount\":\"1\","
               GOOD_REST "}", "invalid_json", "account"},
        {K_OK, "{\"account\":\"A\\u0000B\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-\xff\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"memo\":\"x\","
               GOOD_REST "}", "invalid_request", "memo"},
        /* A 100-byte non-ASCII member name: named, cut to 39 characters
         * (78 bytes) so the answer stays valid UTF-8. */
        {K_OK, "{\"" E10 E10 E10 E10 E10 "\":1," GOOD_REST "}",
         "invalid_request", E10 E10 E10 "\xc3\xa9\xc3\xa9\xc3\xa9"
                            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                            "\xc3\xa9"},
        {K_OK, "{\"amount\":\"1\"," GOOD_REST "}", "invalid_request",
         "account"},
        {K_OK, "{\"account\":\"A-1\"," GOOD_REST "}", "invalid_request",
         "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"reference\":\"r\","
               "\"expires_at\":\"2999-01-01T00:00:00Z\"}", "invalid_request",
         "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"expires_at\":\"2999-01-01T00:00:00Z\"}", "invalid_request",
         "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\"}", "invalid_request", "expires_at"},
        {K_OK, "{\"account\":7,\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"A 1\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":1," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"0.00\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"-1\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1e3\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\".5\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"5.\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"0.0000000000000000001\","
               GOOD_REST "}", "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"usd\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USDX\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"a\\nb\",\"expires_at\":"
               "\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-02-30T00:00:00Z\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":1893456000}",
         "invalid_request", "expires_at"},
    };
    char long_ref[200], long_acct[200], body[512], key255[300];
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bad_create(s, bad[i].kmode, "application/json", bad[i].body,
                   strlen(bad[i].body), &r);
        if (r.status != 400 || !r.json ||
            strcmp(jstr(r.json, "error") ? jstr(r.json, "error") : "",
                   bad[i].code) != 0 ||
            (bad[i].field &&
             strcmp(jstr(r.json, "field") ? jstr(r.json, "field") : "",
                    bad[i].field) != 0))
            fail_msg("row %zu: expected 400 %s %s, got %ld %s", i,
                     bad[i].code, bad[i].field ? bad[i].field : "", r.status,
                     r.body ? r.body : "");
        hres_free(&r);
    }
    /* Lengths: a reference and an account of 129 bytes. */
    memset(long_ref, 'r', 129);
    long_ref[129] = '\0';
    memset(long_acct, 'a', 129);
    long_acct[129] = '\0';
    create(s, "key-long", "A-1", "1", long_ref, NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "reference");
    hres_free(&r);
    create(s, "key-long", long_acct, "1", "r", NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "account");
    hres_free(&r);
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    /* The edges that are valid: 255-byte key, 128-byte reference. */
    memset(key255, 'k', 255);
    key255[255] = '\0';
    long_ref[128] = '\0';
    snprintf(body, sizeof body, "%s", long_ref);
    create(s, key255, "A-1", "1", body, NULL, &r);
    assert_credit(&r, "A-1", body);
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
}

static void body_over_64_kib_is_413_and_a_body_of_exactly_64_kib_is_accepted(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char *big = malloc(BODY_MAX + 2);
    size_t good = strlen(GOOD);
    hres r;

    (void)state;
    assert_non_null(big);
    sbx_start(s);
    /* GOOD padded with white space to exactly BODY_MAX, then one more. */
    memcpy(big, GOOD, good);
    memset(big + good, ' ', BODY_MAX + 1 - good);
    big[BODY_MAX + 1] = '\0';
    bad_create(s, K_OK, "application/json", big, BODY_MAX + 1, &r);
    assert_error(&r, 413, "body_too_large");
    hres_free(&r);
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    bad_create(s, K_OK, "application/json", big, BODY_MAX, &r);
    assert_int_equal(r.status, 201);
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
    free(big);
}

static void create_without_a_json_content_type_is_415_and_changes_nothing(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    bad_create(s, K_OK, "text/plain", GOOD, strlen(GOOD), &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    bad_create(s, K_OK, "application/json; charset=utf-8", GOOD, strlen(GOOD),
               &r);
    assert_int_equal(r.status, 201); /* parameters are fine */
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
}

static void unknown_route_is_404_and_a_wrong_method_is_405_with_allow(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char allow[64];
    hres r;

    (void)state;
    sbx_start(s);
    get(s, "/v1/payments", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    get(s, "/v1/credits/cr_1", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    http(s, "PUT", "/v1/credits", NULL, NULL, 0, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
    assert_str(allow, "POST, GET");
    hres_free(&r);
    http(s, "PUT", "/_control/faults", NULL, NULL, 0, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
    assert_str(allow, "POST, GET, DELETE");
    hres_free(&r);
}

static void mint(const sbx *s, char out[64]);
static void assert_token(const hres *r);

static void reset_deletes_every_credit_key_code_counter_and_fault(void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *zero;
    hres a, r;

    (void)state;
    sbx_start(s);
    create(s, "key-r", "A-1", "1", "ref-r", NULL, &a);
    assert_credit(&a, "A-1", "ref-r");
    {
        char code[64];

        mint(s, code);
        exchange(s, code, &r);
        assert_token(&r);
        hres_free(&r);
    }
    arm(s, "error_500_before_effect", 3, -1);
    post_json(s, "/_control/reset", "{\"all\":true}", &r);
    assert_error(&r, 400, "invalid_request"); /* reset takes no members */
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
    http(s, "POST", "/_control/reset", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    zero = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i,"
                     " s:i, s:i, s:i, s:i}",
                     "create_requests", 0, "credits_created", 0, "lookups", 0,
                     "idempotent_replays", 0, "mismatches", 0, "codes_minted",
                     0, "code_exchanges", 0, "token_requests", 0,
                     "invalid_grants", 0, "payout_requests", 0,
                     "payouts_created", 0, "payouts_returned", 0,
                     "payout_lookups", 0, "payout_replays", 0,
                     "payout_mismatches", 0);
    get(s, "/_control/stats", &r);
    assert_int_equal(r.status, 200);
    assert_true(json_equal(r.json, zero));
    json_decref(zero);
    hres_free(&r);
    /* The key is new again and no fault fires. */
    create(s, "key-r", "A-1", "1", "ref-r", NULL, &r);
    assert_credit(&r, "A-1", "ref-r");
    assert_string_not_equal(jstr(r.json, "id"), jstr(a.json, "id"));
    hres_free(&r);
    hres_free(&a);
}

static void sigterm_lets_a_request_in_flight_finish_and_exits_0(void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-term", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    sleep_ms(500);
    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-term");
    hres_free(&bg.r);
    assert_int_equal(state_credit_rows(s->state), 1);
}

static void bad_flags_exit_2_and_an_unreadable_api_key_file_exits_78(
    void **state)
{
    static const char *const bad[][4] = {
        {"--retention-seconds", "0", NULL, NULL},
        {"--skew-seconds", "-1", NULL, NULL},
        {"--visibility-delay-ms", "ten", NULL, NULL},
        {"--listen", "localhost", NULL, NULL},
        {"--frobnicate", NULL, NULL, NULL},
        {"--state", "", NULL, NULL},
    };
    char out[PATHLEN], err[PATHLEN], state_path[PATHLEN], missing[PATHLEN];
    pid_t pid;

    (void)state;
    snprintf(out, sizeof out, "%s/refused.out", g_tmp);
    snprintf(err, sizeof err, "%s/refused.err", g_tmp);
    snprintf(state_path, sizeof state_path, "%s/refused.db", g_tmp);
    snprintf(missing, sizeof missing, "%s/no-such-key-file", g_tmp);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", "--state",
                        state_path, (char *)bad[i][0], (char *)bad[i][1],
                        NULL};

        pid = spawn(argv, out, err);
        assert_int_equal(exit_code(wait_for(pid, EXIT_MS)), 2);
    }
    {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", NULL};

        pid = spawn(argv, out, err); /* --state missing */
        assert_int_equal(exit_code(wait_for(pid, EXIT_MS)), 2);
    }
    {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", "--state",
                        state_path, "--api-key-file", missing, NULL};

        pid = spawn(argv, out, err);
        assert_int_equal(exit_code(wait_for(pid, EXIT_MS)), 78);
    }
}

/* ===========================================================================
 * Authorization codes: POST /oauth/token (RFC 6749 4.1.3), once per code
 * ========================================================================= */

/* Every code minted and every token answered: none may appear in a log. */
static char *g_secrets[512];
static size_t g_n_secrets;

static void secret_add(const char *s)
{
    if (s && g_n_secrets < sizeof g_secrets / sizeof g_secrets[0])
        g_secrets[g_n_secrets++] = strdup(s);
}

/* POST /_control/codes: a fresh code into out. */
static void mint(const sbx *s, char out[64])
{
    hres r;

    http(s, "POST", "/_control/codes", NULL, NULL, 0, &r);
    if (r.status != 200 || !jstr(r.json, "code"))
        fail_msg("minting a code: %ld %s", r.status, r.body ? r.body : "");
    assert_int_equal(json_object_size(r.json), 1);
    assert_int_equal(strlen(jstr(r.json, "code")), 35);
    assert_true(strncmp(jstr(r.json, "code"), "ac_", 3) == 0);
    snprintf(out, 64, "%s", jstr(r.json, "code"));
    secret_add(out);
    hres_free(&r);
}

static const char *const form_ct[] = {
    "Content-Type: application/x-www-form-urlencoded", NULL};

/* POST /oauth/token with a form body as given (already encoded). */
static void token_raw(const sbx *s, const char *form, hres *out)
{
    http(s, "POST", "/oauth/token", form_ct, form, strlen(form), out);
    secret_add(jstr(out->json, "access_token"));
    secret_add(jstr(out->json, "refresh_token"));
}

/* The exchange of code, as oncegate sends it. */
static void exchange(const sbx *s, const char *code, hres *out)
{
    char form[256];

    snprintf(form, sizeof form, "grant_type=authorization_code&code=%s", code);
    token_raw(s, form, out);
}

/* A 200 token response with every documented member. */
static void assert_token(const hres *r)
{
    char cc[64];

    if (r->status != 200 || !r->json)
        fail_msg("expected 200, got %ld (curl %d): %s", r->status, (int)r->cc,
                 r->body ? r->body : "");
    assert_int_equal(json_object_size(r->json), 4);
    assert_true(strncmp(jstr(r->json, "access_token"), "at_", 3) == 0);
    assert_int_equal(strlen(jstr(r->json, "access_token")), 67);
    assert_true(strncmp(jstr(r->json, "refresh_token"), "rt_", 3) == 0);
    assert_str(jstr(r->json, "token_type"), "Bearer");
    assert_int_equal(json_integer_value(json_object_get(r->json, "expires_in")),
                     3600);
    assert_true(hdr_value(r, "Cache-Control", cc, sizeof cc));
    assert_str(cc, "no-store");
}

/* An RFC 6749 5.2 error: 400, error, error_description. */
static void assert_oauth_error(const hres *r, const char *code)
{
    if (r->status != 400 || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), code) != 0 ||
        !jstr(r->json, "error_description"))
        fail_msg("expected 400 %s, got %ld (curl %d): %s", code, r->status,
                 (int)r->cc, r->body ? r->body : "");
}

static void code_is_exchanged_once_and_every_later_exchange_is_400_invalid_grant(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64], other[64];
    hres a, b, c, d;

    (void)state;
    sbx_start(s);
    mint(s, code);
    mint(s, other);
    exchange(s, code, &a);
    assert_token(&a);
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    exchange(s, "ac_0123456789abcdef0123456789abcdef", &c); /* never minted */
    assert_oauth_error(&c, "invalid_grant");
    /* Another code is unaffected, and each exchange has its own tokens. */
    exchange(s, other, &d);
    assert_token(&d);
    assert_string_not_equal(jstr(a.json, "access_token"),
                            jstr(d.json, "access_token"));
    assert_int_equal(counter(s, "codes_minted"), 2);
    assert_int_equal(counter(s, "code_exchanges"), 2);
    assert_int_equal(counter(s, "token_requests"), 4);
    assert_int_equal(counter(s, "invalid_grants"), 2);
    assert_int_equal(counter(s, "credits_created"), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
    hres_free(&d);
}

typedef struct xracer {
    pthread_barrier_t *start;
    const sbx *s;
    const char *code;
    hres r;
} xracer;

static void *xracer_main(void *arg)
{
    xracer *x = arg;

    pthread_barrier_wait(x->start);
    exchange(x->s, x->code, &x->r);
    return NULL;
}

static void twenty_concurrent_exchanges_of_one_code_succeed_exactly_once(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    pthread_barrier_t start;
    pthread_t th[RACERS];
    xracer xs[RACERS];
    char code[64];
    int ok = 0, spent = 0;

    (void)state;
    sbx_start(s);
    mint(s, code);
    pthread_barrier_init(&start, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        xs[i] = (xracer){&start, s, code, {0}};
        assert_int_equal(pthread_create(&th[i], NULL, xracer_main, &xs[i]), 0);
    }
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        ok += xs[i].r.status == 200;
        spent += xs[i].r.status == 400 &&
                 strcmp(jstr(xs[i].r.json, "error"), "invalid_grant") == 0;
        hres_free(&xs[i].r);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(ok, 1);
    assert_int_equal(spent, RACERS - 1);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    assert_int_equal(counter(s, "token_requests"), RACERS);
}

static void malformed_token_requests_are_400_in_rfc_6749_shape_and_spend_nothing(
    void **state)
{
    static const struct {
        const char *form, *error;
    } bad[] = {
        {"code=CODE", "invalid_request"},                 /* no grant_type */
        {"grant_type=&code=CODE", "invalid_request"},     /* empty = absent */
        {"grant_type=password&code=CODE", "unsupported_grant_type"},
        {"grant_type=authorization_code", "invalid_request"}, /* no code */
        {"grant_type=authorization_code&code=", "invalid_request"},
        {"grant_type=authorization_code&code=CODE&code=CODE",
         "invalid_request"},                              /* repeated */
        {"grant_type=authorization_code&code=CODE%2", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%zz", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%00", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%ff", "invalid_request"},
    };
    sbx *s = sbx_new("--control", END);
    char code[64], form[256], *p;
    hres r;

    (void)state;
    sbx_start(s);
    mint(s, code);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* CODE stands for the real code. */
        snprintf(form, sizeof form, "%s", bad[i].form);
        while ((p = strstr(form, "CODE"))) {
            char rest[256];

            snprintf(rest, sizeof rest, "%s", p + 4);
            snprintf(p, sizeof form - (size_t)(p - form), "%s%s", code, rest);
        }
        token_raw(s, form, &r);
        print_message("%s\n", bad[i].form);
        assert_oauth_error(&r, bad[i].error);
        hres_free(&r);
    }
    /* JSON is not the token endpoint's media type. */
    snprintf(form, sizeof form, "{\"grant_type\":\"authorization_code\","
                                "\"code\":\"%s\"}", code);
    post_json(s, "/oauth/token", form, &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    assert_int_equal(counter(s, "token_requests"), 0);
    assert_int_equal(counter(s, "code_exchanges"), 0);
    /* The code is still good; unknown parameters are ignored (RFC 6749
     * 3.2), %-escapes and '+' decode. */
    snprintf(form, sizeof form,
             "redirect_uri=https%%3A%%2F%%2Fapp.example%%2Fcb&client_id=a+b&"
             "grant_type=authorization%%5Fcode&code=%s&&",
             code);
    token_raw(s, form, &r);
    assert_token(&r);
    hres_free(&r);
    assert_int_equal(counter(s, "code_exchanges"), 1);
}

/* The fault queue acts on exchanges as on creates: the effect is the
 * code's exchange. */
static void dropped_answer_after_an_exchange_leaves_the_code_spent(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "drop_response_after_effect", 1, -1);
    exchange(s, code, &a);
    assert_int_equal(a.status, 0); /* no status line at all */
    assert_int_not_equal(a.cc, CURLE_OK);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    /* The result is gone: the provider never gives it twice. */
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
}

static void delay_faults_hold_an_exchange_before_or_after_the_code_is_spent(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char c1[64], c2[64];
    bg_create b1 = {NULL, c1, {0}, true}, b2 = {NULL, c2, {0}, true};
    pthread_t th;

    (void)state;
    sbx_start(s);
    b1.s = b2.s = s;
    mint(s, c1);
    mint(s, c2);
    /* Before: nothing is spent during the delay. */
    arm(s, "delay_before_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &b1), 0);
    sleep_ms(600);
    assert_int_equal(counter(s, "code_exchanges"), 0);
    pthread_join(th, NULL);
    assert_token(&b1.r);
    assert_true(b1.r.elapsed_ms >= 1500);
    /* After: the code is spent, the answer still to come. */
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &b2), 0);
    for (int64_t until = now_ms() + 1200;
         counter(s, "code_exchanges") < 2 && now_ms() < until;)
        sleep_ms(20);
    assert_int_equal(counter(s, "code_exchanges"), 2);
    pthread_join(th, NULL);
    assert_token(&b2.r);
    assert_true(b2.r.elapsed_ms >= 1500);
    hres_free(&b1.r);
    hres_free(&b2.r);
}

static void error_500_before_an_exchange_spends_nothing_and_after_it_spends_the_code(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b, c;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "error_500_before_effect", 1, -1);
    exchange(s, code, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "code_exchanges"), 0);
    assert_int_equal(counter(s, "token_requests"), 1);
    arm(s, "error_500_after_effect", 1, -1);
    exchange(s, code, &b);
    assert_error(&b, 500, "internal");
    assert_int_equal(counter(s, "code_exchanges"), 1);
    exchange(s, code, &c);
    assert_oauth_error(&c, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

static void exit_after_an_exchange_leaves_the_code_durably_spent(void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "exit_after_effect", 1, -1);
    exchange(s, code, &a);
    assert_int_equal(a.status, 0);
    assert_int_equal(exit_code(wait_for(s->pid, EXIT_MS)), 137);
    s->pid = 0;
    sbx_start(s);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
}

static void minting_takes_no_members_and_codes_survive_a_restart(void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    post_json(s, "/_control/codes", "{\"client_id\":\"x\"}", &r);
    assert_error(&r, 400, "invalid_request");
    hres_free(&r);
    post_json(s, "/_control/codes", "{}", &r);
    assert_int_equal(r.status, 200);
    secret_add(jstr(r.json, "code"));
    hres_free(&r);
    mint(s, code);
    sbx_restart(s);
    assert_int_equal(counter(s, "codes_minted"), 2);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
}

/* Stops s, runs sql on its state file (a schema set back by hand, as an
 * older sandbox left it), and starts s again on that file. */
static void restart_after(sbx *s, const char *sql)
{
    sqlite3 *db = NULL;

    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    assert_int_equal(sqlite3_open(s->state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sbx_start(s);
}

/* A state file of schema version 1 (credits only) gains the codes table
 * and keeps its credits. */
static void version_1_state_file_gains_codes_and_keeps_its_credits(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    create(s, "key-v1", "A-1", "5", "ref-v1", NULL, &r);
    assert_credit(&r, "A-1", "ref-v1");
    hres_free(&r);
    restart_after(s, "DROP TABLE codes; PRAGMA user_version = 1");
    assert_int_equal(counter(s, "credits_created"), 1);
    mint(s, code);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
}

/* ===========================================================================
 * Payouts: POST /v1/payouts, GET /v1/payouts, the processing window,
 * returns. The same contract as credits, through the same code.
 * ========================================================================= */

/* POST /v1/payouts with Idempotency-Key key (expires_at NULL: g_later). */
static void payout(const sbx *s, const char *key, const char *dest,
                   const char *amount, const char *reference,
                   const char *expires_at, hres *out)
{
    create_at(s, &PAYOUTS, key, dest, amount, reference, expires_at, out);
}

/* A 201 payout with every documented member, completed. */
static void assert_payout(const hres *r, const char *dest,
                          const char *reference)
{
    assert_effect(&PAYOUTS, r, dest, reference);
}

static json_t *plookup(const sbx *s, const char *param, const char *value)
{
    return lookup_at(s, &PAYOUTS, param, value);
}

static size_t plookup_n(const sbx *s, const char *param, const char *value)
{
    return lookup_at_n(s, &PAYOUTS, param, value);
}

/* POST /_control/payouts/{id}/return with body (NULL: none). */
static void return_payout(const sbx *s, const char *id, const char *body,
                          hres *out)
{
    char path[256];

    snprintf(path, sizeof path, "/_control/payouts/%s/return", id);
    if (body)
        post_json(s, path, body, out);
    else
        http(s, "POST", path, NULL, NULL, 0, out);
}

static void a_key_names_one_request_of_one_resource_credit_and_payout_keys_are_separate(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres c, p, c2, p2;

    (void)state;
    sbx_start(s);
    create(s, "shared-key", "A-1", "5", "ref-shared", NULL, &c);
    assert_credit(&c, "A-1", "ref-shared");
    payout(s, "shared-key", "dst_tok_shared", "5", "ref-shared", NULL, &p);
    assert_payout(&p, "dst_tok_shared", "ref-shared");
    create(s, "shared-key", "A-1", "5", "ref-shared", NULL, &c2);
    assert_str(c2.body, c.body);
    payout(s, "shared-key", "dst_tok_shared", "5", "ref-shared", NULL, &p2);
    assert_str(p2.body, p.body);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "payouts_created"), 1);
    /* Lookups of one resource never list the other's. */
    assert_int_equal(lookup_n(s, "reference", "ref-shared"), 1);
    assert_int_equal(plookup_n(s, "reference", "ref-shared"), 1);
    hres_free(&c);
    hres_free(&p);
    hres_free(&c2);
    hres_free(&p2);
}

/* The processing window, first half: a request that would take effect
 * after expires_at + skew has none — also one that arrived in time and
 * was held (delay_before_effect stands for a paused worker's request
 * still in flight). */
static void payout_decided_after_expires_at_plus_skew_is_refused_with_no_effect_even_when_it_arrived_in_time(
    void **state)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "1", END);
    char soon[40];
    hres b, c;

    (void)state;
    sbx_start(s);
    /* In time, then held 2.5 s: decided after expires_at + 1 s. */
    rfc3339_ms(500, soon);
    arm(s, "delay_before_effect", 1, 2500);
    payout(s, "key-pheld", "dst_tok_held", "3", "ref-pheld", soon, &b);
    assert_error(&b, 422, "request_expired");
    assert_true(b.elapsed_ms >= 2500);
    assert_int_equal(plookup_n(s, "reference", "ref-pheld"), 0);
    assert_int_equal(plookup_n(s, "idempotency_key", "key-pheld"), 0);
    assert_int_equal(counter(s, "payouts_created"), 0);
    assert_int_equal(counter(s, "payout_requests"), 1);
    /* Nothing recorded: the key is new for a request still in time. */
    payout(s, "key-pheld", "dst_tok_held", "3", "ref-pheld", NULL, &c);
    assert_payout(&c, "dst_tok_held", "ref-pheld");
    hres_free(&b);
    hres_free(&c);
}

/* Both halves together: a lookup made after expires_at + skew +
 * visibility delay lists the payout accepted at the last moment, and one
 * that finds nothing stays right — the request is refused when it comes. */
static void lookup_after_expires_at_plus_skew_plus_visibility_delay_that_finds_nothing_is_final(
    void **state)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "1",
                     "--visibility-delay-ms", "1000", END);
    char expires[40];
    int64_t cutoff;
    hres a, b;

    (void)state;
    sbx_start(s);
    rfc3339_ms(1000, expires);
    cutoff = now_ms() + 1000 + 1000 + 1000; /* expires + skew + delay */
    payout(s, "key-pw-a", "dst_tok_window", "7", "ref-pw-a", expires, &a);
    assert_payout(&a, "dst_tok_window", "ref-pw-a");
    /* Not visible yet: this "not found" would prove nothing. */
    assert_int_equal(plookup_n(s, "reference", "ref-pw-a"), 0);
    sleep_ms((int)(cutoff - now_ms()) + 200);
    assert_int_equal(plookup_n(s, "reference", "ref-pw-a"), 1);
    assert_int_equal(plookup_n(s, "reference", "ref-pw-b"), 0);
    /* ref-pw-b's request, sent only now, can never take effect. */
    payout(s, "key-pw-b", "dst_tok_window", "7", "ref-pw-b", expires, &b);
    assert_error(&b, 422, "request_expired");
    assert_int_equal(plookup_n(s, "reference", "ref-pw-b"), 0);
    assert_int_equal(counter(s, "payouts_created"), 1);
    hres_free(&a);
    hres_free(&b);
}

static void every_fault_acts_on_payout_creates_as_on_credit_creates_from_one_queue(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r, again;
    int st;

    (void)state;
    sbx_start(s);
    /* One queue: a credit and a payout each take one firing. */
    arm(s, "error_500_before_effect", 2, -1);
    create(s, "key-fq", "A-1", "1", "ref-fq", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    payout(s, "key-fb", "dst_tok_f", "1", "ref-fb", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 0);
    assert_int_equal(counter(s, "payout_requests"), 1);
    payout(s, "key-fb", "dst_tok_f", "1", "ref-fb", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fb"); /* the key was never recorded */
    hres_free(&r);

    arm(s, "error_500_after_effect", 1, -1);
    payout(s, "key-fa", "dst_tok_f", "1", "ref-fa", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(plookup_n(s, "idempotency_key", "key-fa"), 1);

    arm(s, "drop_response_after_effect", 1, -1);
    payout(s, "key-fd", "dst_tok_f", "1", "ref-fd", NULL, &r);
    assert_int_equal(r.status, 0);
    assert_int_not_equal(r.cc, CURLE_OK);
    hres_free(&r);
    payout(s, "key-fd", "dst_tok_f", "1", "ref-fd", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fd"); /* replayed */
    hres_free(&r);

    arm(s, "delay_before_effect", 1, 700);
    payout(s, "key-fdb", "dst_tok_f", "1", "ref-fdb", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fdb");
    assert_true(r.elapsed_ms >= 700);
    hres_free(&r);
    arm(s, "delay_after_effect", 1, 700);
    payout(s, "key-fda", "dst_tok_f", "1", "ref-fda", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fda");
    assert_true(r.elapsed_ms >= 700);
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 5);

    arm(s, "exit_after_effect", 1, -1);
    payout(s, "key-fx", "dst_tok_f", "1", "ref-fx", NULL, &r);
    assert_int_equal(r.status, 0);
    hres_free(&r);
    st = wait_for(s->pid, EXIT_MS);
    assert_int_equal(exit_code(st), 137);
    s->pid = 0;
    sbx_start(s);
    assert_int_equal(counter(s, "payouts_created"), 6); /* durable */
    payout(s, "key-fx", "dst_tok_f", "1", "ref-fx", NULL, &again);
    assert_payout(&again, "dst_tok_f", "ref-fx");
    assert_int_equal(counter(s, "payouts_created"), 6);
    hres_free(&again);
}

static void returned_payout_is_listed_returned_and_a_same_key_create_still_replays_its_original_answer(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    const char *id;
    json_t *found, *p;
    char h[16];
    hres a, r, again;

    (void)state;
    sbx_start(s);
    payout(s, "key-pr", "dst_tok_pr", "4250", "PAY-3107-a1", NULL, &a);
    assert_payout(&a, "dst_tok_pr", "PAY-3107-a1");
    id = jstr(a.json, "id");
    return_payout(s, id, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_object_size(r.json), 8);
    assert_str(jstr(r.json, "id"), id);
    assert_str(jstr(r.json, "status"), "returned");
    assert_str(jstr(r.json, "created_at"), jstr(a.json, "created_at"));
    assert_true(strcmp(jstr(r.json, "returned_at"),
                       jstr(a.json, "created_at")) >= 0);
    found = plookup(s, "reference", "PAY-3107-a1");
    assert_int_equal(json_array_size(found), 1);
    p = json_array_get(found, 0);
    assert_true(json_equal(p, r.json));
    json_decref(found);
    /* A return does not undo the create: its key replays the answer the
     * create gave, byte for byte. */
    payout(s, "key-pr", "dst_tok_pr", "4250", "PAY-3107-a1", NULL, &again);
    assert_int_equal(again.status, 201);
    assert_str(again.body, a.body);
    assert_true(hdr_value(&again, "Idempotent-Replayed", h, sizeof h));
    assert_int_equal(counter(s, "payouts_returned"), 1);
    assert_int_equal(counter(s, "payouts_created"), 1);
    hres_free(&a);
    hres_free(&r);
    hres_free(&again);
}

static void return_refuses_what_is_not_a_completed_unreturned_payout_and_changes_nothing(
    void **state)
{
    static const char *const malformed[] = {
        "po_x", "cr_000000000000000000000000", "PO_000000000000000000000000",
        "po_00000000000000000000000g", "po_0000000000000000000000000",
    };
    sbx *s = sbx_new("--control", "--async-complete-ms", "60000", END);
    char allow[64], first[40];
    json_t *found;
    hres a, p, r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        return_payout(s, malformed[i], NULL, &r);
        assert_error(&r, 400, "invalid_request");
        assert_str(jstr(r.json, "field"), "id");
        hres_free(&r);
    }
    return_payout(s, "po_000000000000000000000000", NULL, &r);
    assert_error(&r, 404, "payout_not_found");
    hres_free(&r);
    /* Pending: it has not completed, so it cannot be returned. */
    payout(s, "key-rp", "dst_async_r", "1", "ref-rp", NULL, &p);
    assert_int_equal(p.status, 202);
    return_payout(s, jstr(p.json, "id"), NULL, &r);
    assert_error(&r, 409, "payout_not_returnable");
    hres_free(&r);
    found = plookup(s, "reference", "ref-rp");
    assert_str(jstr(json_array_get(found, 0), "status"), "pending");
    json_decref(found);
    /* Returned once: not again, and its returned_at stays. */
    payout(s, "key-ra", "dst_tok_ra", "1", "ref-ra", NULL, &a);
    return_payout(s, jstr(a.json, "id"), "{\"reason\":\"R01\"}", &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "reason");
    hres_free(&r);
    return_payout(s, jstr(a.json, "id"), "{}", &r);
    assert_int_equal(r.status, 200);
    snprintf(first, sizeof first, "%s", jstr(r.json, "returned_at"));
    hres_free(&r);
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_error(&r, 409, "payout_not_returnable");
    hres_free(&r);
    found = plookup(s, "reference", "ref-ra");
    assert_str(jstr(json_array_get(found, 0), "returned_at"), first);
    json_decref(found);
    {
        char path[128];

        snprintf(path, sizeof path, "/_control/payouts/%s/return",
                 jstr(a.json, "id"));
        get(s, path, &r);
        assert_error(&r, 405, "method_not_allowed");
        assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
        assert_str(allow, "POST");
        hres_free(&r);
    }
    assert_int_equal(counter(s, "payouts_returned"), 1);
    hres_free(&a);
    hres_free(&p);
}

static void return_route_is_404_without_control(void **state)
{
    sbx *s = sbx_new(END);
    json_t *found;
    hres a, r;

    (void)state;
    sbx_start(s);
    payout(s, "key-nc", "dst_tok_nc", "1", "ref-nc", NULL, &a);
    assert_payout(&a, "dst_tok_nc", "ref-nc");
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    found = plookup(s, "reference", "ref-nc");
    assert_str(jstr(json_array_get(found, 0), "status"), "completed");
    json_decref(found);
    hres_free(&a);
}

#define PGOOD_REST                                                             \
    "\"amount\":\"1\",\"currency\":\"USD\",\"reference\":\"r\","               \
    "\"expires_at\":\"2999-01-01T00:00:00Z\""

static void malformed_payout_requests_are_400_naming_the_field_and_change_nothing(
    void **state)
{
    static const struct {
        const char *body, *code, *field;
    } bad[] = {
        {"{" PGOOD_REST "}", "invalid_request", "destination"},
        {"{\"account\":\"A-1\"," PGOOD_REST "}", "invalid_request", "account"},
        {"{\"destination\":\"dst a\"," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":\"\"," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":7," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":\"dst_tok_x\",\"amount\":\"0\",\"currency\":"
         "\"USD\",\"reference\":\"r\",\"expires_at\":"
         "\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "amount"},
        {"{\"destination\":\"dst_tok_x\",\"destination\":\"dst_tok_y\","
         PGOOD_REST "}", "invalid_json", "destination"},
    };
    const char *const headers[] = {"Content-Type: application/json",
                                   "Idempotency-Key: key-pbad", NULL};
    const char *const nokey[] = {"Content-Type: application/json", NULL};
    const char *const text[] = {"Content-Type: text/plain",
                                "Idempotency-Key: key-pbad", NULL};
    char long_dest[200], good[256];
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http(s, "POST", "/v1/payouts", headers, bad[i].body,
             strlen(bad[i].body), &r);
        assert_error(&r, 400, bad[i].code);
        assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    snprintf(good, sizeof good, "{\"destination\":\"dst_tok_x\"," PGOOD_REST
                                "}");
    http(s, "POST", "/v1/payouts", nokey, good, strlen(good), &r);
    assert_error(&r, 400, "idempotency_key_required");
    hres_free(&r);
    http(s, "POST", "/v1/payouts", text, good, strlen(good), &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    {
        char *big = malloc(BODY_MAX + 2);

        assert_non_null(big);
        memset(big, ' ', BODY_MAX + 1);
        memcpy(big, good, strlen(good));
        big[BODY_MAX + 1] = '\0';
        http(s, "POST", "/v1/payouts", headers, big, BODY_MAX + 1, &r);
        assert_error(&r, 413, "body_too_large");
        hres_free(&r);
        free(big);
    }
    memset(long_dest, 'd', 129);
    long_dest[129] = '\0';
    payout(s, "key-pbad", long_dest, "1", "r", NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "destination");
    hres_free(&r);
    assert_int_equal(counter(s, "payout_requests"), 0);
    assert_int_equal(counter(s, "payouts_created"), 0);
    long_dest[128] = '\0'; /* the longest valid destination */
    payout(s, "key-pbad", long_dest, "1", "r", NULL, &r);
    assert_payout(&r, long_dest, "r");
    hres_free(&r);
}

static void payout_routes_need_the_bearer_key_and_a_refusal_changes_nothing(
    void **state)
{
    char path[PATHLEN], id[64];
    sbx *s;
    FILE *f;
    hres r;

    (void)state;
    snprintf(path, sizeof path, "%s/api-key-payouts", g_tmp);
    assert_non_null(f = fopen(path, "w"));
    fputs(API_KEY "\n", f);
    fclose(f);
    s = sbx_new("--control", "--api-key-file", path, END);
    sbx_start(s);
    payout(s, "key-pauth", "dst_tok_auth", "1", "ref-pauth", NULL, &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    get(s, "/v1/payouts?reference=ref-pauth", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "payout_requests"), 0);
    payout(s, "key-pauth", "dst_tok_auth", "1", "ref-pauth", NULL, &r);
    assert_payout(&r, "dst_tok_auth", "ref-pauth");
    snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
    hres_free(&r);
    s->api_key = NULL;
    return_payout(s, id, NULL, &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "payouts_returned"), 0);
}

static void payouts_and_their_counters_survive_a_restart_and_reset_deletes_them(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, c, r, a2, st1, st2;

    (void)state;
    sbx_start(s);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a);
    assert_payout(&a, "dst_tok_d", "ref-pd");
    payout(s, "key-pd2", "dst_closed_d", "11", "ref-pd", NULL, &c);
    assert_error(&c, 422, "destination_closed");
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    get(s, "/_control/stats", &st1);
    sbx_restart(s);
    get(s, "/_control/stats", &st2);
    assert_true(json_equal(st1.json, st2.json));
    assert_int_equal(json_integer_value(json_object_get(st2.json,
                                                        "payouts_returned")),
                     1);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a2);
    assert_str(a2.body, a.body);
    hres_free(&a2);
    payout(s, "key-pd2", "dst_closed_d", "11", "ref-pd", NULL, &a2);
    assert_str(a2.body, c.body);
    hres_free(&a2);
    found = plookup(s, "reference", "ref-pd");
    assert_str(jstr(json_array_get(found, 0), "status"), "returned");
    json_decref(found);
    http(s, "POST", "/_control/reset", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    for (const char *const *n = (const char *const[]){
             "payout_requests", "payouts_created", "payouts_returned",
             "payout_lookups", "payout_replays", "payout_mismatches", NULL};
         *n; n++)
        assert_int_equal(counter(s, *n), 0);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a2);
    assert_payout(&a2, "dst_tok_d", "ref-pd"); /* the key is new again */
    assert_string_not_equal(jstr(a2.json, "id"), jstr(a.json, "id"));
    hres_free(&a2);
    hres_free(&a);
    hres_free(&c);
    hres_free(&st1);
    hres_free(&st2);
}

/* A state file of schema version 2 (credits and codes) gains the payout
 * tables and keeps its credits and codes. */
static void version_2_state_file_gains_payouts_and_keeps_its_credits_and_codes(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    create(s, "key-v2", "A-1", "5", "ref-v2", NULL, &r);
    assert_credit(&r, "A-1", "ref-v2");
    hres_free(&r);
    mint(s, code);
    restart_after(s, "DROP TABLE payout_keys; DROP TABLE payouts;"
                     " PRAGMA user_version = 2");
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "codes_minted"), 1);
    payout(s, "key-v2", "dst_tok_v2", "5", "ref-v2", NULL, &r);
    assert_payout(&r, "dst_tok_v2", "ref-v2");
    hres_free(&r);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    assert_int_equal(sqlite3_open_v2(s->state, &db, SQLITE_OPEN_READONLY,
                                     NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q,
                                        NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 3);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Every destination sent in this run is absent from every log; a payout
 * request names it by the first 12 hex digits of its SHA-256. */
static void logs_name_a_destination_only_by_a_sha256_prefix(void **state)
{
    bool named = false;

    (void)state;
    assert_true(g_n_dests > 0);
    for (size_t i = 0; i < g_n_logs; i++) {
        char *log = slurp(g_logs[i]);

        assert_non_null(log);
        for (size_t k = 0; k < g_n_dests; k++)
            if (strstr(log, g_dests[k]))
                fail_msg("%s contains the destination %s", g_logs[i],
                         g_dests[k]);
        /* SHA-256("dst_tok_a1b2c3d4") begins 5ba6f29f88e1. */
        named = named ||
                strstr(log, "\"destination_sha256\":\"5ba6f29f88e1\"") != NULL;
        free(log);
    }
    assert_true(named);
}

/* ===========================================================================
 * Whole-suite checks
 * ========================================================================= */
static void every_sandbox_stopped_by_sigterm_exited_0(void **state)
{
    (void)state;
    if (g_bad_exits[0])
        fail_msg("sandboxes that did not exit 0 after SIGTERM:\n%s",
                 g_bad_exits);
}

/* Every line a sandbox wrote to stderr is a JSON object with ts, level
 * and event; none contains the API key, a code or a token. */
static void logs_are_json_lines_without_the_api_key_codes_or_tokens(
    void **state)
{
    size_t lines = 0;

    (void)state;
    assert_true(g_n_logs > 0);
    assert_true(g_n_secrets > 0);
    for (size_t i = 0; i < g_n_logs; i++) {
        char *log = slurp(g_logs[i]), *save = NULL;

        assert_non_null(log);
        if (strstr(log, API_KEY))
            fail_msg("%s contains the API key", g_logs[i]);
        for (size_t k = 0; k < g_n_secrets; k++)
            if (strstr(log, g_secrets[k]))
                fail_msg("%s contains a code or token", g_logs[i]);
        for (char *l = strtok_r(log, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save)) {
            json_t *j = json_loads(l, 0, NULL);

            if (!json_is_object(j) || !jstr(j, "ts") || !jstr(j, "level") ||
                !jstr(j, "event"))
                fail_msg("%s: not a log line: %s", g_logs[i], l);
            json_decref(j);
            lines++;
        }
        free(log);
    }
    assert_true(lines > 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
    const struct CMUnitTest tests[] = {
        T(create_is_201_and_a_same_key_retry_replays_the_identical_saved_body),
        T(parameters_are_compared_canonically_amount_and_expiry_instant),
        T(same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing),
        T(twenty_concurrent_same_key_creates_make_exactly_one_credit),
        T(without_atomic_same_key_concurrent_creates_can_make_duplicates),
        T(closed_account_is_422_account_closed_and_a_replay_is_the_same_422),
        T(busy_account_is_429_with_retry_after_and_records_nothing),
        T(async_account_is_202_pending_then_succeeded_after_the_delay),
        T(request_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing),
        T(key_older_than_retention_is_forgotten_and_the_same_key_creates_again),
        T(visibility_delay_hides_a_new_credit_from_lookups_until_it_passes),
        T(lookups_by_reference_and_by_key_find_credits_oldest_first),
        T(lookup_without_exactly_one_valid_parameter_is_400_invalid_request),
        T(drop_response_after_effect_gives_no_http_answer_but_the_credit_exists_and_a_retry_replays_it),
        T(delay_before_effect_creates_nothing_until_the_delay_has_passed),
        T(delay_after_effect_commits_the_credit_before_the_delayed_answer),
        T(error_500_after_effect_answers_500_internal_but_the_credit_exists),
        T(error_500_before_effect_answers_500_internal_and_creates_nothing),
        T(exit_after_effect_kills_the_process_and_after_a_restart_the_key_replays_the_durable_credit),
        T(faults_fire_in_arming_order_for_their_count_and_delete_clears_them),
        T(invalid_fault_requests_are_400_and_arm_nothing),
        T(state_survives_a_clean_restart),
        T(control_routes_are_404_without_control),
        T(bearer_key_from_api_key_file_is_required_and_refusals_have_no_effect),
        T(malformed_or_invalid_create_requests_are_400_naming_the_field_and_change_nothing),
        T(body_over_64_kib_is_413_and_a_body_of_exactly_64_kib_is_accepted),
        T(create_without_a_json_content_type_is_415_and_changes_nothing),
        T(unknown_route_is_404_and_a_wrong_method_is_405_with_allow),
        T(reset_deletes_every_credit_key_code_counter_and_fault),
        T(sigterm_lets_a_request_in_flight_finish_and_exits_0),
        T(bad_flags_exit_2_and_an_unreadable_api_key_file_exits_78),
        T(code_is_exchanged_once_and_every_later_exchange_is_400_invalid_grant),
        T(twenty_concurrent_exchanges_of_one_code_succeed_exactly_once),
        T(malformed_token_requests_are_400_in_rfc_6749_shape_and_spend_nothing),
        T(dropped_answer_after_an_exchange_leaves_the_code_spent),
        T(delay_faults_hold_an_exchange_before_or_after_the_code_is_spent),
        T(error_500_before_an_exchange_spends_nothing_and_after_it_spends_the_code),
        T(exit_after_an_exchange_leaves_the_code_durably_spent),
        T(minting_takes_no_members_and_codes_survive_a_restart),
        T(version_1_state_file_gains_codes_and_keeps_its_credits),
        T(payout_create_is_201_completed_with_a_po_id_and_a_same_key_retry_replays_the_identical_body),
        T(payout_parameters_are_compared_canonically_amount_and_expiry_instant),
        T(payout_same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing),
        T(a_key_names_one_request_of_one_resource_credit_and_payout_keys_are_separate),
        T(twenty_concurrent_same_key_payouts_make_exactly_one_payout),
        T(without_atomic_same_key_concurrent_payouts_can_make_duplicates),
        T(closed_destination_is_422_destination_closed_and_a_replay_is_the_same_422),
        T(busy_destination_is_429_with_retry_after_and_records_nothing),
        T(async_destination_is_202_pending_then_completed_after_the_delay),
        T(payout_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing),
        T(payout_decided_after_expires_at_plus_skew_is_refused_with_no_effect_even_when_it_arrived_in_time),
        T(accepted_payout_is_invisible_to_lookups_before_the_visibility_delay_and_visible_after),
        T(lookup_after_expires_at_plus_skew_plus_visibility_delay_that_finds_nothing_is_final),
        T(payout_key_older_than_retention_is_forgotten_and_the_same_key_creates_a_second_payout),
        T(every_fault_acts_on_payout_creates_as_on_credit_creates_from_one_queue),
        T(payout_lookups_by_reference_and_by_key_find_payouts_oldest_first),
        T(payout_lookup_without_exactly_one_valid_parameter_is_400_invalid_request),
        T(returned_payout_is_listed_returned_and_a_same_key_create_still_replays_its_original_answer),
        T(return_refuses_what_is_not_a_completed_unreturned_payout_and_changes_nothing),
        T(return_route_is_404_without_control),
        T(malformed_payout_requests_are_400_naming_the_field_and_change_nothing),
        T(payout_routes_need_the_bearer_key_and_a_refusal_changes_nothing),
        T(payouts_and_their_counters_survive_a_restart_and_reset_deletes_them),
        T(version_2_state_file_gains_payouts_and_keeps_its_credits_and_codes),
        T(every_sandbox_stopped_by_sigterm_exited_0),
        T(logs_are_json_lines_without_the_api_key_codes_or_tokens),
        T(logs_name_a_destination_only_by_a_sha256_prefix),
    };
#undef T
    int rc;

    g_bin = getenv("OG_TEST_SANDBOX");
    if (!g_bin || !*g_bin || access(g_bin, X_OK) != 0) {
        fprintf(stderr, "OG_TEST_SANDBOX must name the oncegate-sandbox "
                        "binary\n");
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_ALL) != 0)
        return 1;
    rfc3339_in(86400, g_later);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/og-sandbox-XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    atexit(kill_all_at_exit);
    signal(SIGPIPE, SIG_IGN);
    rc = cmocka_run_group_tests_name("sandbox", tests, NULL, NULL);
    kill_all_at_exit();
    curl_global_cleanup();
    for (size_t i = 0; i < g_n_secrets; i++)
        free(g_secrets[i]);
    for (size_t i = 0; i < g_n_dests; i++)
        free(g_dests[i]);
    if (rc == 0) {
        char cmd[512];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_tmp);
        return 0;
    }
    fprintf(stderr, "kept %s (sandbox logs) for inspection\n", g_tmp);
    /* A failed assertion longjmps past its test's frees; LeakSanitizer
     * would report only those. A passing run is still leak-checked. */
    fflush(NULL);
    _exit(rc);
}
