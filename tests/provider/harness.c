/*
 * harness.c — provider_test's harness: the sandbox as a real process
 * (tests/support/proc.c), plain HTTP for control calls and the recorder,
 * the fixtures, and the two APIs as the claims use them. See harness.h.
 */
#include "harness.h"

og_provider_table *g_table;
og_provider_table *g_payouts_table;
int64_t g_expires_us;

int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ===========================================================================
 * The sandbox process
 * ========================================================================= */

#define READY_PREFIX "oncegate-sandbox: listening on http://"

int sbx_start(sbx *s, const char *const *extra)
{
    const char *bin = getenv("OG_TEST_SANDBOX");
    char state[PATH_MAX + 8], out[PATH_MAX + 8], err[PATH_MAX + 8];
    const char *argv[32];
    int n = 0, port = 0, status = 0, rc;

    if (!bin) {
        fprintf(stderr, "OG_TEST_SANDBOX is not set\n");
        return -1;
    }
    snprintf(state, sizeof state, "%s/s.db", s->dir);
    snprintf(out, sizeof out, "%s/stdout", s->dir);
    snprintf(err, sizeof err, "%s/stderr", s->dir);
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--state";
    argv[n++] = state;
    argv[n++] = "--control";
    for (; extra && *extra && n < 30; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;

    s->pid = t_proc_spawn((char *const *)argv, NULL, out, err);
    if (s->pid < 0)
        return -1;
    /* Up to 20 s for the ready line. */
    rc = t_proc_wait_ready(s->pid, out, READY_PREFIX, 20000, &port, &status);
    if (rc == -1) {
        fprintf(stderr, "oncegate-sandbox exited early (%d); see %s\n",
                status, err);
        s->pid = 0;
        return -1;
    }
    if (rc != 0) {
        fprintf(stderr, "oncegate-sandbox did not become ready\n");
        return -1;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", port);
    return 0;
}

int sbx_stop(sbx *s)
{
    int status;

    if (s->pid <= 0)
        return -1;
    t_proc_stop(s->pid, SIGTERM, 10000, &status);
    s->pid = 0;
    return status;
}

int sbx_reap(sbx *s)
{
    int status = s->pid > 0 ? t_proc_wait(s->pid, 10000) : -1;

    if (status != -1)
        s->pid = 0;
    return status;
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

int sbx_new(sbx *s, const char *const *extra)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/og-provider-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    return sbx_start(s, extra);
}

void sbx_free(sbx *s)
{
    sbx_stop(s);
    rm_rf(s->dir);
}

/* ===========================================================================
 * Plain HTTP (control calls and the recorder): a raw libcurl exchange.
 * ========================================================================= */

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

raw http(const char *method, const char *url,
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

void arm(const sbx *s, const char *fault, int ms)
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

long long stat_of(const sbx *s, const char *name)
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

int load_table(void **state)
{
    if (load_one(TABLE_PATH, &g_table) != 0 ||
        load_one(PAYOUTS_TABLE_PATH, &g_payouts_table) != 0)
        return -1;
    g_expires_us = wall_us() + INT64_C(3600) * 1000000;
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

int free_table(void **state)
{
    og_provider_table_free(g_table);
    og_provider_table_free(g_payouts_table);
    curl_global_cleanup();
    return 0;
}

int fx_up_table(void **state, const char *const *extra,
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

int fx_up_with(void **state, const char *const *extra)
{
    return fx_up_table(state, extra, g_table);
}

int fx_up(void **state)
{
    return fx_up_with(state, NULL);
}

const char *const async_fast[] = {"--async-complete-ms", "300", NULL};

int fx_up_async(void **state)
{
    return fx_up_with(state, async_fast);
}

int fx_up_payouts(void **state)
{
    return fx_up_table(state, NULL, g_payouts_table);
}

int fx_up_payouts_async(void **state)
{
    return fx_up_table(state, async_fast, g_payouts_table);
}

int fx_down(void **state)
{
    fx *f = *state;

    if (f) {
        og_provider_free(f->p);
        sbx_free(&f->s);
        free(f);
    }
    return 0;
}

const capi CREDITS = {og_provider_create_credit, false, "cr_",
                      "acct-1", "closed-7", "busy-7", "async-7",
                      "account_closed", "credits_created",
                      "idempotent_replays", "create_requests"};
const capi PAYOUTS = {og_provider_create_payout, true, "po_",
                      "dst_tok_7f3a", "dst_closed_7", "dst_busy_7",
                      "dst_async_7", "destination_closed",
                      "payouts_created", "payout_replays",
                      "payout_requests"};

int create_in(const capi *a, og_provider *p, const char *key,
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

int create(og_provider *p, const char *key, const char *account,
           int64_t timeout_us, og_provider_outcome *o)
{
    return create_in(&CREDITS, p, key, account, timeout_us, o);
}

int lookup_in(const capi *a, og_provider *p, const char *reference,
              const char *target, og_provider_outcome *o)
{
    memset(o, 0x5a, sizeof *o);
    return a->payouts ? og_provider_lookup_payout(p, reference, target,
                                                  "25.00", "EUR", CALL_US, o)
                      : og_provider_lookup(p, reference, CALL_US, o);
}

void assert_outcome(const og_provider_outcome *o, og_outcome_class cls,
                    const char *reason)
{
    if (o->cls != cls || strcmp(o->reason, reason) != 0)
        fail_msg("outcome %s %s, expected %s %s",
                 og_outcome_class_name(o->cls), o->reason,
                 og_outcome_class_name(cls), reason);
}

void must_find_in(fx *f, const capi *a, const char *reference,
                  const char *target,
                  char id[OG_PROVIDER_REF_MAX + 1])
{
    og_provider_outcome l;

    assert_int_equal(lookup_in(a, f->p, reference, target, &l), 1);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "found");
    snprintf(id, OG_PROVIDER_REF_MAX + 1, "%s", l.reference);
}

void must_find(fx *f, const char *reference, char id[OG_PROVIDER_REF_MAX + 1])
{
    must_find_in(f, &CREDITS, reference, NULL, id);
}
