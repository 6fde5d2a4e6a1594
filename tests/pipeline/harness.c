/*
 * harness.c — pipeline_test's harness: the sandbox as a real process
 * (tests/support/proc.c), its control routes, the world of the running
 * example (docs/payouts.md) in a store of its own, the pipeline's
 * configurations and the reads the tests assert on. See pipeline.h.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "pipeline.h"

/* ===========================================================================
 * Plain HTTP to the sandbox (control routes, a create of the test's own)
 * ========================================================================= */

typedef struct pl_http {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
} pl_http;

static size_t pl_http_body(char *p, size_t sz, size_t n, void *ud)
{
    pl_http *r = ud;
    char *nb = realloc(r->body, r->len + sz * n + 1);

    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

/* One request with the sandbox's bearer key; extra: one more header or
 * NULL. */
static pl_http pl_req(const pl_sbx *x, const char *method, const char *path,
                      const char *body, const char *extra)
{
    struct curl_slist *h = NULL;
    pl_http r = {0};
    char url[512];
    CURL *c = curl_easy_init();

    assert_non_null(c);
    snprintf(url, sizeof url, "%s%s", x->url, path);
    h = curl_slist_append(h, "Authorization: Bearer " PL_CREDENTIAL);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    if (extra)
        h = curl_slist_append(h, extra);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, pl_http_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
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

/* ===========================================================================
 * The sandbox process
 * ========================================================================= */

#define PL_READY "oncegate-sandbox: listening on http://"

static void pl_sbx_start(pl_sbx *x)
{
    const char *bin = getenv("OG_TEST_SANDBOX");
    char state[PATH_MAX + 8], out[PATH_MAX + 8], err[PATH_MAX + 8],
        key[PATH_MAX + 8], skew[16];
    const char *argv[16];
    int n = 0, port = 0, status = 0;

    if (!bin)
        fail_msg("OG_TEST_SANDBOX is not set");
    snprintf(state, sizeof state, "%s/s.db", x->dir);
    snprintf(out, sizeof out, "%s/stdout", x->dir);
    snprintf(err, sizeof err, "%s/stderr", x->dir);
    snprintf(key, sizeof key, "%s/key", x->dir);
    snprintf(skew, sizeof skew, "%d", x->skew_s);
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--state";
    argv[n++] = state;
    argv[n++] = "--control";
    argv[n++] = "--api-key-file";
    argv[n++] = key;
    argv[n++] = "--skew-seconds";
    argv[n++] = skew;
    argv[n] = NULL;
    x->pid = t_proc_spawn((char *const *)argv, NULL, out, err);
    if (x->pid < 0)
        fail_msg("could not start %s", bin);
    if (t_proc_wait_ready(x->pid, out, PL_READY, 20000, &port, &status) != 0) {
        t_proc_print_output(out, err);
        fail_msg("oncegate-sandbox did not become ready (%d)", status);
    }
    snprintf(x->url, sizeof x->url, "http://127.0.0.1:%d", port);
}

void pl_sbx_up(pl_sbx *x, int skew_s)
{
    char key[PATH_MAX + 8];
    FILE *f;

    memset(x, 0, sizeof *x);
    x->skew_s = skew_s;
    snprintf(x->dir, sizeof x->dir, "/tmp/og-pipeline-XXXXXX");
    if (!mkdtemp(x->dir))
        fail_msg("mkdtemp");
    snprintf(key, sizeof key, "%s/key", x->dir);
    f = fopen(key, "w");
    assert_non_null(f);
    fputs(PL_CREDENTIAL "\n", f);
    fclose(f);
    pl_sbx_start(x);
}

void pl_sbx_restart(pl_sbx *x)
{
    pl_sbx_stop(x, false);
    pl_sbx_start(x);
}

void pl_sbx_stop(pl_sbx *x, bool remove)
{
    static const char *const files[] = {"s.db", "s.db-wal", "s.db-shm",
                                        "stdout", "stderr", "key"};
    char p[PATH_MAX + 16];

    if (x->pid > 0)
        t_proc_stop(x->pid, SIGTERM, 10000, NULL);
    x->pid = 0;
    if (!remove || !x->dir[0])
        return;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", x->dir, files[i]);
        unlink(p);
    }
    rmdir(x->dir);
    x->dir[0] = '\0';
}

static long long pl_counter(json_t *j, const char *name)
{
    json_t *v = json_object_get(j, name);

    if (!json_is_integer(v))
        fail_msg("/_control/stats: no counter %s", name);
    return json_integer_value(v);
}

pl_stats pl_stats_of(const pl_sbx *x)
{
    pl_http r = pl_req(x, "GET", "/_control/stats", NULL, NULL);
    pl_stats st;
    json_t *j;

    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("/_control/stats: %d %ld", (int)r.rc, r.status);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    st.payout_requests = pl_counter(j, "payout_requests");
    st.payouts_created = pl_counter(j, "payouts_created");
    st.payout_lookups = pl_counter(j, "payout_lookups");
    st.payout_replays = pl_counter(j, "payout_replays");
    st.payout_mismatches = pl_counter(j, "payout_mismatches");
    st.payouts_returned = pl_counter(j, "payouts_returned");
    json_decref(j);
    free(r.body);
    return st;
}

void pl_arm(const pl_sbx *x, const char *fault, int count, int ms)
{
    char body[160];
    pl_http r;

    if (ms >= 0)
        snprintf(body, sizeof body,
                 "{\"fault\":\"%s\",\"count\":%d,\"ms\":%d}", fault, count, ms);
    else
        snprintf(body, sizeof body, "{\"fault\":\"%s\",\"count\":%d}", fault,
                 count);
    r = pl_req(x, "POST", "/_control/faults", body, NULL);
    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("arming %s: %d %ld %s", fault, (int)r.rc, r.status, r.body);
    free(r.body);
}

int pl_sbx_return(const pl_sbx *x, const char *provider_id)
{
    char path[256];
    pl_http r;
    int ok;

    snprintf(path, sizeof path, "/_control/payouts/%s/return", provider_id);
    r = pl_req(x, "POST", path, "{}", NULL);
    ok = r.rc == CURLE_OK && r.status == 200;
    free(r.body);
    return ok;
}

long pl_sbx_create(const pl_sbx *x, const char *key, const char *destination,
                   const char *amount, const char *reference,
                   int64_t expires_at_us)
{
    char body[512], hkey[300], when[64];
    time_t t = (time_t)(expires_at_us / PL_SEC);
    struct tm tm;
    pl_http r;
    long status;

    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(body, sizeof body,
             "{\"destination\":\"%s\",\"amount\":\"%s\",\"currency\":\"EUR\","
             "\"reference\":\"%s\",\"expires_at\":\"%s\"}",
             destination, amount, reference, when);
    snprintf(hkey, sizeof hkey, "Idempotency-Key: %s", key);
    r = pl_req(x, "POST", "/v1/payouts", body, hkey);
    status = r.rc == CURLE_OK ? r.status : -1;
    free(r.body);
    return status;
}

char *pl_sbx_log(const pl_sbx *x)
{
    char p[PATH_MAX + 16];
    char *s;

    snprintf(p, sizeof p, "%s/stderr", x->dir);
    s = t_slurp(p, NULL);
    return s ? s : calloc(1, 1);
}

/* ===========================================================================
 * The payouts table, with the skew the test's sandbox runs with
 * ========================================================================= */

static og_provider_table *pl_table(int skew_s)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char path[PATH_MAX];
    json_t *j, *props;
    json_error_t jerr;
    og_provider_table_error err;
    og_provider_table *t = NULL;
    char *text;

    snprintf(path, sizeof path, "%s/providers/sandbox-payouts.v1.json",
             root ? root : ".");
    j = json_load_file(path, 0, &jerr);
    if (!j)
        fail_msg("%s: %s", path, jerr.text);
    props = json_object_get(j, "properties");
    assert_non_null(props);
    json_object_set_new(props, "request_expiry_skew_seconds",
                        json_integer(skew_s));
    text = json_dumps(j, JSON_COMPACT);
    assert_non_null(text);
    if (og_provider_table_load(text, strlen(text), &t, &err) != 0)
        fail_msg("the payouts table: %s", err.text);
    free(text);
    json_decref(j);
    return t;
}

/* ===========================================================================
 * The world
 * ========================================================================= */

static void pl_put_ok(int rc, og_payout_put_result r, const char *what)
{
    if (rc != 0 || r.outcome != OG_PAYOUT_WRITTEN)
        fail_msg("%s: %s / %s", what, og_err_name(rc),
                 og_payout_write_name(r.outcome));
}

static void pl_age_destination(pl_world *w, int days)
{
    char sql[512];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = clock_timestamp() -"
                 " interval '%d days' WHERE destination_id = '%s'",
                 days, w->dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = %lld"
                 " WHERE destination_id = '%s'",
                 (long long)(t_now_us() - days * PL_DAY), w->dst);
    if (t_raw_exec(w->raw, sql) != 0)
        fail_msg("raw: %s", sql);
}

void pl_world_up(pl_world *w, const char *tag, pl_dst dst, int skew_s)
{
    static const char *const prefix[] = {"dst_tok_", "dst_closed_",
                                         "dst_busy_", "dst_async_"};
    char u[OG_UUID_LEN + 1];
    og_payout_put_result r = {0, 0};

    memset(w, 0, sizeof *w);
    t_uuid(u);
    snprintf(w->tag, sizeof w->tag, "%s-%.8s", tag, u);
    w->s = t_fresh_store("pl", w->url, sizeof w->url);
    w->raw = t_raw_open_url(w->url);
    pl_sbx_up(&w->sbx, skew_s);
    w->table = pl_table(skew_s);
    snprintf(w->tenant, sizeof w->tenant, "T-%s", w->tag);
    snprintf(w->ben, sizeof w->ben, "BEN-%s", w->tag);
    snprintf(w->dst, sizeof w->dst, "DST-%s", w->tag);
    /* the provider token: a secret, of the sandbox's class */
    snprintf(w->token, sizeof w->token, "%sSECRET%.8s%.4s", prefix[dst], u,
             u + 9);
    {
        og_payout_tenant_settings t = {w->tenant, false, 5000000, "EUR", 0};
        pl_put_ok(og_payout_tenant_put(w->s, &t, 0, &r), r, "tenant");
        w->tenant_v = r.version;
    }
    {
        og_payout_beneficiary_record b = {w->ben, w->tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        pl_put_ok(og_payout_beneficiary_put(w->s, &b, 0, &r), r, "ben");
        w->ben_v = r.version;
    }
    {
        og_payout_destination_record d = {w->dst, w->ben, w->token};
        pl_put_ok(og_payout_destination_put(w->s, &d, 0, &r), r, "dst");
        w->dst_v = r.version;
    }
    pl_age_destination(w, 30);
}

void pl_world_down(pl_world *w)
{
    pl_fault(NULL);
    pl_sbx_stop(&w->sbx, true);
    og_provider_table_free(w->table);
    t_raw_close(w->raw);
    og_store_free(w->s);
    memset(w, 0, sizeof *w);
}

void pl_draft(pl_world *w, char *id, int n, const char *amount)
{
    og_payout_put_result r = {0, 0};
    og_payout_draft_req d;

    snprintf(id, 64, "PAY-%s-%d", w->tag, n);
    d = (og_payout_draft_req){
        id,
        {w->tenant, w->ben, w->dst, w->dst_v, amount, "EUR",
         "supplier-invoice INV-9031"},
        "clerk-22"};
    pl_put_ok(og_payout_draft(w->s, &d, &r), r, "draft");
}

og_payout_decide_req pl_decide_req(const char *id)
{
    og_payout_decide_req r;

    memset(&r, 0, sizeof r);
    r.payout_id = id;
    r.requester_id = "clerk-22";
    r.requester_role = "accounts-payable";
    r.requester_approval_limit = 1000000; /* 10,000.00 EUR */
    r.correlation_id = "COR-8812";
    r.audience = OG_PAYOUT_AUDIENCE;
    r.not_before_us = t_now_us() - PL_SEC;
    r.expires_at_us = r.not_before_us + 30 * PL_MINUTE;
    return r;
}

og_payout_decision pl_decide(pl_world *w, const og_payout_decide_req *r)
{
    og_payout_decision d;
    int rc = og_payout_decide(w->s, r, &d);

    if (rc != 0)
        fail_msg("og_payout_decide(%s): %s", r->payout_id, og_err_name(rc));
    return d;
}

og_payout_decision pl_decide_allowed(pl_world *w, const char *id)
{
    og_payout_decide_req r = pl_decide_req(id);
    og_payout_decision d = pl_decide(w, &r);

    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

/* ===========================================================================
 * The pipeline's configurations
 * ========================================================================= */

int pl_credential(void *arg, char *out, size_t outlen)
{
    pl_cred *c = arg;

    c->calls++;
    if (c->missing || outlen < sizeof PL_CREDENTIAL)
        return -1;
    memcpy(out, PL_CREDENTIAL, sizeof PL_CREDENTIAL);
    return 0;
}

void pl_on_started(void *arg, const char *attempt_id)
{
    pl_cred *c = arg;

    (void)attempt_id;
    if (c->pipe_fd >= 0 && write(c->pipe_fd, "s", 1) == 1)
        t_sleep_ms(c->pause_ms);
}

og_payout_worker_cfg pl_worker_cfg(const pl_world *w, pl_cred *c)
{
    og_payout_worker_cfg cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.worker_id = "svc-payout-worker";
    cfg.audience = OG_PAYOUT_AUDIENCE;
    cfg.provider_url = w->sbx.url;
    cfg.table = w->table;
    cfg.credential = pl_credential;
    cfg.credential_arg = c;
    cfg.job_lease_us = 30 * PL_SEC;
    cfg.attempt_lease_us = 2 * PL_MINUTE;
    cfg.send_window_us = 5 * PL_MINUTE;
    cfg.provider_timeout_us = 2 * PL_SEC;
    cfg.record_timeout_us = 5 * PL_SEC;
    cfg.postpone_us = 100 * PL_MS;
    cfg.max_sends = 3;
    return cfg;
}

const int64_t pl_backoff[3] = {50 * PL_MS, 100 * PL_MS, 200 * PL_MS};

og_payout_reconciler_cfg pl_reconciler_cfg(const pl_world *w, pl_cred *c)
{
    og_payout_reconciler_cfg cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.actor = "svc-reconciler";
    cfg.provider_url = w->sbx.url;
    cfg.table = w->table;
    cfg.credential = pl_credential;
    cfg.credential_arg = c;
    cfg.backoff_us = pl_backoff;
    cfg.backoff_n = 3;
    cfg.escalate_after_us = 2 * PL_MINUTE;
    cfg.max_per_pass = 10;
    cfg.provider_timeout_us = 2 * PL_SEC;
    return cfg;
}

og_payout_work pl_work(pl_world *w, const og_payout_worker_cfg *c)
{
    og_payout_work out;
    int rc;

    memset(&out, 0, sizeof out);
    rc = og_payout_work_once(w->s, c, &out);
    if (rc != 0)
        fail_msg("og_payout_work_once: %s", og_err_name(rc));
    return out;
}

og_payout_sweep_stats pl_sweep(pl_world *w)
{
    og_payout_sweep_stats st;
    int rc;

    memset(&st, 0, sizeof st);
    rc = og_payout_sweep_once(w->s, "svc-sweeper", 100, &st);
    if (rc != 0)
        fail_msg("og_payout_sweep_once: %s", og_err_name(rc));
    return st;
}

og_payout_reconcile_stats pl_reconcile(pl_world *w,
                                       const og_payout_reconciler_cfg *c)
{
    og_payout_reconcile_stats st;
    int rc;

    memset(&st, 0, sizeof st);
    rc = og_payout_reconcile_once(w->s, c, &st);
    if (rc != 0)
        fail_msg("og_payout_reconcile_once: %s", og_err_name(rc));
    return st;
}

/* ===========================================================================
 * Reads
 * ========================================================================= */

og_payout_view pl_payout(pl_world *w, const char *id)
{
    og_payout_view v;

    if (og_payout_get(w->s, id, &v) != 1)
        fail_msg("payout %s: not there", id);
    return v;
}

og_operation pl_attempt(pl_world *w, const char *op_id)
{
    og_operation op;
    int rc = og_operation_get(w->s, op_id, &op);

    if (rc != 1)
        fail_msg("attempt %s: %s", op_id, rc == 0 ? "none" : og_err_name(rc));
    return op;
}

int64_t pl_attempts(pl_world *w, const char *id)
{
    return t_raw_int(w->raw,
                     "SELECT count(*) FROM operations WHERE kind = 'payout'"
                     " AND grant_id IN (SELECT grant_id FROM payout_grants"
                     " WHERE payout_id = '%s')",
                     id);
}

int64_t pl_reserved(pl_world *w)
{
    return t_raw_int(w->raw,
                     "SELECT coalesce(sum(reserved), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     w->tenant);
}

int64_t pl_paid(pl_world *w)
{
    return t_raw_int(w->raw,
                     "SELECT coalesce(sum(paid), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     w->tenant);
}

void pl_decision_reason(pl_world *w, const char *decision_id, char *reason)
{
    char sql[256], *lines;

    snprintf(sql, sizeof sql,
             "SELECT outcome || ' ' || reason FROM payout_decisions"
             " WHERE decision_id = '%s'",
             decision_id);
    lines = t_raw_lines(w->raw, sql);
    assert_non_null(lines);
    lines[strcspn(lines, "\n")] = '\0';
    snprintf(reason, 96, "%s", lines);
    free(lines);
}

int64_t pl_events(pl_world *w, const char *id, const char *kind)
{
    return t_raw_int(w->raw,
                     "SELECT count(*) FROM payout_events WHERE payout_id = '%s'"
                     " AND kind = '%s'",
                     id, kind);
}

bool pl_job_done(pl_world *w, const char *job_id)
{
    return t_raw_int(w->raw,
                     "SELECT count(*) FROM payout_jobs WHERE job_id = '%s'"
                     " AND done_at IS NOT NULL",
                     job_id) == 1;
}

void pl_age_attempt(pl_world *w, const char *op_id, int lease_ms,
                    bool submit_by_too)
{
    char sql[1024], when[128];

    if (t_kind == T_POSTGRES)
        snprintf(when, sizeof when,
                 "clock_timestamp() + interval '%d milliseconds'", lease_ms);
    else
        snprintf(when, sizeof when, "%lld",
                 (long long)(t_now_us() + (int64_t)lease_ms * 1000));
    if (submit_by_too)
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET lease_until = %s, submit_by = %s,"
                 " final_absence_after = CASE WHEN final_absence_after IS"
                 " NULL THEN NULL ELSE %s END WHERE operation_id = '%s'",
                 when, when, when, op_id);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET lease_until = %s"
                 " WHERE operation_id = '%s'",
                 when, op_id);
    if (t_raw_exec(w->raw, sql) != 0)
        fail_msg("raw: %s", sql);
}

void pl_redeliver(pl_world *w, const char *job_id)
{
    char sql[512];

    snprintf(sql, sizeof sql,
             "UPDATE payout_jobs SET done_at = NULL, available_at = %s"
             " WHERE job_id = '%s'",
             t_kind == T_POSTGRES ? "clock_timestamp() - interval '1 second'"
                                  : "0",
             job_id);
    if (t_raw_exec(w->raw, sql) != 0)
        fail_msg("raw: %s", sql);
}

void pl_fault(const char *name)
{
    if (name)
        setenv("OG_FAULT", name, 1);
    else
        unsetenv("OG_FAULT");
}

const char *pl_status_name(og_op_status st)
{
    return og_op_status_name(st);
}

/* ===========================================================================
 * A change committed between the worker's validation and its claim
 * ========================================================================= */

typedef struct pl_interpose {
    og_store *s;
    const og_payout_worker_cfg *cfg;
    og_payout_work wk;
    int rc;
} pl_interpose;

static void *pl_interposed_worker(void *arg)
{
    pl_interpose *ip = arg;

    /* the worker yields the CPU to the test's lock taker (on Linux nice()
     * is per thread): on a loaded machine the taker still gets in between
     * the job's take and the claim */
    if (t_kind == T_SQLITE && nice(19) == -1)
        (void)0;
    memset(&ip->wk, 0, sizeof ip->wk);
    ip->rc = og_payout_work_once(ip->s, ip->cfg, &ip->wk);
    return NULL;
}

/* The change lands in the window the fault point payout_claim_pause holds
 * open (OG__FAULT_CLAIM_PAUSE_MS, 1500 ms, after the validation and before
 * the claim's transaction): the job seen taken, 600 ms for the validation's
 * few reads, then the change commits with 900 ms to spare. No lock is
 * held, so it does not depend on who wins a lock race: under load the
 * worker's take, validation and claim used to run back to back and the
 * change never got in between. One thing can still defeat it: a
 * validation slower than 600 ms reads the change itself and refuses with
 * its own reason — that run did not test the claim, and the caller tries
 * another world (false). */
static bool between_paused(pl_world *w, const char *job_id,
                           const char *change_sql, pl_interpose *ip)
{
    pthread_t th;
    int64_t until = t_now_ms() + 10000;
    bool taken = false;

    pl_fault("payout_claim_pause");
    assert_int_equal(pthread_create(&th, NULL, pl_interposed_worker, ip), 0);
    while (t_now_ms() < until &&
           !(taken = t_raw_int(w->raw,
                               "SELECT deliveries FROM payout_jobs WHERE"
                               " job_id = '%s'",
                               job_id) >= 1))
        t_sleep_ms(20);
    if (taken) {
        t_sleep_ms(600);
        if (t_raw_exec(w->raw, change_sql) != 0)
            fail_msg("raw: %s", change_sql);
    }
    pthread_join(th, NULL);
    pl_fault(NULL);
    if (ip->rc != 0)
        fail_msg("og_payout_work_once: %s", og_err_name(ip->rc));
    if (!taken)
        fail_msg("the worker never took job %s", job_id);
    /* refused before the claim: the validation itself saw the change */
    return !(ip->wk.end == OG_PAYOUT_WORK_REFUSED &&
             ip->wk.reason != OG_PAYOUT_WORKER_CLAIM_LOST &&
             ip->wk.reason != OG_PAYOUT_WORKER_CLAIM_CONTEXT_CHANGED);
}

bool pl_between_validation_and_claim(pl_world *w, const char *job_id,
                                     const char *table, const char *key_col,
                                     const char *key, const char *change_sql,
                                     const og_payout_worker_cfg *cfg,
                                     og_payout_work *out)
{
    pl_interpose ip = {w->s, cfg, {0}, 0};
    pthread_t th;
    bool ok = false;

    if (OG_TEST_FAULT_INJECTION) {
        ok = between_paused(w, job_id, change_sql, &ip);
        *out = ip.wk;
        return ok;
    }
    /* Without the fault point: the lock race below, which a loaded
     * machine can lose every time (the callers try 8 worlds). */
    if (t_kind == T_POSTGRES) {
        PGconn *pg = PQconnectdb(w->url);
        char lock[512];

        assert_int_equal(PQstatus(pg), CONNECTION_OK);
        snprintf(lock, sizeof lock,
                 "BEGIN; SELECT 1 FROM %s WHERE %s = '%s' FOR UPDATE", table,
                 key_col, key);
        PQclear(PQexec(pg, lock));
        assert_int_equal(pthread_create(&th, NULL, pl_interposed_worker, &ip),
                         0);
        /* the job taken, the validation read without locks: the claim
         * waits on the row */
        while (t_raw_int(w->raw,
                         "SELECT deliveries FROM payout_jobs WHERE job_id ="
                         " '%s'",
                         job_id) < 1)
            t_sleep_ms(5);
        t_sleep_ms(700);
        PQclear(PQexec(pg, change_sql));
        PQclear(PQexec(pg, "COMMIT"));
        PQfinish(pg);
        ok = true;
    } else {
        sqlite3 *db;

        assert_int_equal(sqlite3_open_v2(w->url + 7, &db,
                                         SQLITE_OPEN_READWRITE, NULL),
                         SQLITE_OK);
        sqlite3_busy_timeout(db, 0);
        assert_int_equal(pthread_create(&th, NULL, pl_interposed_worker, &ip),
                         0);
        /* take the write lock over and over: while the job is not taken
         * let go at once (the take waits in its busy handler and gets in
         * between); once it is taken and not claimed, hold it — the
         * worker, reading without locks, validates and then waits in its
         * claim's BEGIN IMMEDIATE */
        for (int64_t until = t_now_ms() + 10000; t_now_ms() < until;) {
            sqlite3_stmt *st = NULL;
            int64_t deliveries = 0, ops = 0;
            char q[256];

            if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
                SQLITE_OK)
                continue;
            snprintf(q, sizeof q,
                     "SELECT (SELECT deliveries FROM payout_jobs WHERE job_id"
                     " = '%s'), (SELECT count(*) FROM operations)",
                     job_id);
            if (sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK &&
                sqlite3_step(st) == SQLITE_ROW) {
                deliveries = sqlite3_column_int64(st, 0);
                ops = sqlite3_column_int64(st, 1);
            }
            sqlite3_finalize(st);
            if (deliveries < 1) {
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
                continue;
            }
            if (ops == 0) { /* taken, not claimed: hold while it validates */
                t_sleep_ms(700);
                assert_int_equal(
                    sqlite3_exec(db, change_sql, NULL, NULL, NULL), SQLITE_OK);
                ok = true;
            }
            sqlite3_exec(db, ok ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
            break;
        }
        sqlite3_close(db);
    }
    pthread_join(th, NULL);
    if (ip.rc != 0)
        fail_msg("og_payout_work_once: %s", og_err_name(ip.rc));
    *out = ip.wk;
    return ok;
}

int pl_sbx_find(const pl_sbx *x, const char *reference, char *id,
                size_t idlen)
{
    char path[256];
    pl_http r;
    json_t *j, *list, *first;
    int n = 0;

    snprintf(path, sizeof path, "/v1/payouts?reference=%s", reference);
    r = pl_req(x, "GET", path, NULL, NULL);
    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("GET %s: %d %ld", path, (int)r.rc, r.status);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(j);
    list = json_object_get(j, "payouts");
    n = (int)json_array_size(list);
    first = json_array_get(list, 0);
    if (first && id)
        snprintf(id, idlen, "%s",
                 json_string_value(json_object_get(first, "id")));
    json_decref(j);
    free(r.body);
    return n;
}

og_payout_worker_cfg pl_cfg(const pl_world *w, pl_cred *c)
{
    memset(c, 0, sizeof *c);
    c->pipe_fd = -1;
    return pl_worker_cfg(w, c);
}

og_payout_reconciler_cfg pl_rcfg(const pl_world *w, pl_cred *c)
{
    memset(c, 0, sizeof *c);
    c->pipe_fd = -1;
    return pl_reconciler_cfg(w, c);
}

og_payout_decision pl_example(pl_world *w, char *id, int n)
{
    pl_draft(w, id, n, PL_AMOUNT);
    return pl_decide_allowed(w, id);
}

void pl_wait_until_us(int64_t at_us)
{
    while (t_now_us() < at_us)
        t_sleep_ms(20);
}
