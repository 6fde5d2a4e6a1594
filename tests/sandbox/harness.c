/*
 * harness.c — sandbox_test's harness: sandboxes as real processes
 * (started, waited for and stopped through tests/support), HTTP, the two
 * resources (credits and payouts) as the tests see them, and the codes
 * and tokens of /oauth/token. See harness.h.
 */
#include <stdarg.h>

#include "harness.h"

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

void rfc3339_in(int offset_s, char out[40])
{
    time_t t = time(NULL) + offset_s;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(out, 40, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void rfc3339_ms(int64_t offset_ms, char out[40])
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

const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ===========================================================================
 * Sandboxes: real processes
 * ========================================================================= */

const char *g_bin;
char g_tmp[256];
char g_later[40];
char g_bad_exits[8192];
char g_logs[256][PATHLEN];
size_t g_n_logs;
static unsigned g_seq;

static sbx g_sbx[16];

sbx *sbx_new(const char *arg, ...)
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

void sbx_print_output(const sbx *s)
{
    t_proc_print_output(s->out, s->log);
}

#define READY_PREFIX "oncegate-sandbox: listening on http://"

void sbx_start(sbx *s)
{
    unsigned n = ++g_seq;
    int rc;

    snprintf(s->out, sizeof s->out, "%s/run-%03u.out", s->dir, n);
    snprintf(s->log, sizeof s->log, "%s/run-%03u.log", s->dir, n);
    if (g_n_logs < sizeof g_logs / sizeof g_logs[0])
        snprintf(g_logs[g_n_logs++], PATHLEN, "%s", s->log);
    s->pid = t_proc_spawn(s->argv, NULL, s->out, s->log);
    assert_true(s->pid > 0);
    rc = t_proc_wait_ready(s->pid, s->out, READY_PREFIX, READY_MS, &s->port,
                           NULL);
    if (rc != 0) {
        sbx_print_output(s);
        fail_msg("sandbox did not become ready");
    }
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
}

int sbx_stop(sbx *s, int sig)
{
    int code;
    size_t n;

    if (s->pid <= 0)
        return -1;
    code = t_proc_stop(s->pid, sig, EXIT_MS, NULL);
    if (sig == SIGTERM && code != 0) {
        n = strlen(g_bad_exits);
        snprintf(g_bad_exits + n, sizeof g_bad_exits - n,
                 "  %s: SIGTERM ended in %d\n", s->log, code);
        sbx_print_output(s);
    }
    s->pid = 0;
    return code;
}

void sbx_restart(sbx *s)
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

int test_teardown(void **state)
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

void kill_all_at_exit(void)
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

void hres_free(hres *r)
{
    free(r->body);
    free(r->hdr);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

bool hdr_value(const hres *r, const char *name, char *out, size_t n)
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

void http(const sbx *s, const char *method, const char *path,
          const char *const *headers, const char *body, size_t len,
          hres *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url[PATHLEN], auth[256];
    buf bb = {&out->body, &out->len, 0}, hb = {&out->hdr, &out->hlen, 0};
    int64_t t0 = t_now_ms();

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
    out->elapsed_ms = t_now_ms() - t0;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

void get(const sbx *s, const char *path, hres *out)
{
    http(s, "GET", path, NULL, NULL, 0, out);
}

const char *const json_ct[] = {"Content-Type: application/json", NULL};

void post_json(const sbx *s, const char *path, const char *body,
               hres *out)
{
    http(s, "POST", path, json_ct, body, strlen(body), out);
}

/* ===========================================================================
 * The two resources
 * ========================================================================= */

const api CREDITS = {
    "/v1/credits", "account", "credits", "cr_", "succeeded",
    "account_closed", "credits_created", "create_requests",
    "idempotent_replays", "mismatches", "lookups",
};
const api PAYOUTS = {
    "/v1/payouts", "destination", "payouts", "po_", "completed",
    "destination_closed", "payouts_created", "payout_requests",
    "payout_replays", "payout_mismatches", "payout_lookups",
};

const api *other_api(const api *a)
{
    return a == &CREDITS ? &PAYOUTS : &CREDITS;
}

char *g_dests[256];
size_t g_n_dests;
/* Guards the appends to g_dests and g_secrets. */
static pthread_mutex_t g_record_mu = PTHREAD_MUTEX_INITIALIZER;

char *effect_body(const api *a, const char *target, const char *amount,
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

char *create_body(const char *account, const char *amount,
                  const char *reference, const char *expires_at)
{
    return effect_body(&CREDITS, account, amount, "USD", reference,
                       expires_at);
}

void create_in(const sbx *s, const api *a, const char *key,
               const char *target, const char *amount,
               const char *currency, const char *reference,
               const char *expires_at, hres *out)
{
    char kh[512];
    const char *headers[] = {"Content-Type: application/json", kh, NULL};
    char *body = effect_body(a, target, amount, currency, reference,
                             expires_at ? expires_at : g_later);

    if (a == &PAYOUTS) {
        /* Racers create from threads of their own: one append at a time,
         * or two take one slot and a string is lost. */
        pthread_mutex_lock(&g_record_mu);
        if (g_n_dests < sizeof g_dests / sizeof g_dests[0])
            g_dests[g_n_dests++] = strdup(target);
        pthread_mutex_unlock(&g_record_mu);
    }
    snprintf(kh, sizeof kh, "Idempotency-Key: %s", key);
    http(s, "POST", a->path, headers, body, strlen(body), out);
    free(body);
}

void create_at(const sbx *s, const api *a, const char *key,
               const char *target, const char *amount,
               const char *reference, const char *expires_at,
               hres *out)
{
    create_in(s, a, key, target, amount, "USD", reference, expires_at, out);
}

void create(const sbx *s, const char *key, const char *account,
            const char *amount, const char *reference,
            const char *expires_at, hres *out)
{
    create_at(s, &CREDITS, key, account, amount, reference, expires_at, out);
}

void assert_error(const hres *r, long status, const char *code)
{
    if (r->status != status || !r->json || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), code) != 0 ||
        !jstr(r->json, "message"))
        fail_msg("expected %ld %s, got %ld (curl %d): %s", status, code,
                 r->status, (int)r->cc, r->body ? r->body : "");
}

void assert_effect(const api *a, const hres *r, const char *target,
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

void assert_credit(const hres *r, const char *account,
                   const char *reference)
{
    assert_effect(&CREDITS, r, account, reference);
}

json_int_t counter(const sbx *s, const char *name)
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

json_t *lookup_at(const sbx *s, const api *ap, const char *param,
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

size_t lookup_at_n(const sbx *s, const api *ap, const char *param,
                   const char *value)
{
    json_t *a = lookup_at(s, ap, param, value);
    size_t n = json_array_size(a);

    json_decref(a);
    return n;
}

json_t *lookup(const sbx *s, const char *param, const char *value)
{
    return lookup_at(s, &CREDITS, param, value);
}

size_t lookup_n(const sbx *s, const char *param, const char *value)
{
    return lookup_at_n(s, &CREDITS, param, value);
}

void arm(const sbx *s, const char *fault, int count, int ms)
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

int state_credit_rows(const char *path)
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

/* ===========================================================================
 * Authorization codes: POST /oauth/token (RFC 6749 4.1.3)
 * ========================================================================= */

char *g_secrets[512];
size_t g_n_secrets;

void secret_add(const char *s)
{
    /* Concurrent exchanges answer from threads of their own (codes.c). */
    pthread_mutex_lock(&g_record_mu);
    if (s && g_n_secrets < sizeof g_secrets / sizeof g_secrets[0])
        g_secrets[g_n_secrets++] = strdup(s);
    pthread_mutex_unlock(&g_record_mu);
}

void mint(const sbx *s, char out[64])
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

void token_raw(const sbx *s, const char *form, hres *out)
{
    http(s, "POST", "/oauth/token", form_ct, form, strlen(form), out);
    secret_add(jstr(out->json, "access_token"));
    secret_add(jstr(out->json, "refresh_token"));
}

void exchange(const sbx *s, const char *code, hres *out)
{
    char form[256];

    snprintf(form, sizeof form, "grant_type=authorization_code&code=%s", code);
    token_raw(s, form, out);
}

void assert_token(const hres *r)
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

/* ===========================================================================
 * Requests in the background; restarts on an older state file
 * ========================================================================= */

void *bg_create_main(void *arg)
{
    bg_create *b = arg;

    if (b->exchange)
        exchange(b->s, b->key, &b->r);
    else
        create(b->s, b->key, "A-1", "6", b->key, NULL, &b->r);
    return NULL;
}

void restart_after(sbx *s, const char *sql)
{
    sqlite3 *db = NULL;

    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    assert_int_equal(sqlite3_open(s->state, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    sbx_start(s);
}
