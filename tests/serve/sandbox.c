/*
 * sandbox.c — a server executing against its own oncegate-sandbox
 * (docs/sandbox.md): each test that executes starts a sandbox (fresh
 * --state, --control) and a server whose provider.url names it, and checks
 * both the sandbox's counters and the operation the store holds (GET
 * /v1/operations/{id} as its caller, or the store itself). See harness.h.
 */
#include "harness.h"

/* ===========================================================================
 * The sandbox beside a server
 * ========================================================================= */

const char *g_sbx_bin;     /* OG_TEST_SANDBOX */

#define SBX_READY_PREFIX "oncegate-sandbox: listening on http://"

const char *sbx_key(const xenv *x)
{
    return x->sbx_key[0] ? x->sbx_key : NULL;
}

json_int_t sbx_stat(const xenv *x, const char *name)
{
    hres r;
    json_int_t v;

    sbx_http(&r, x->sbx, "GET", "/_control/stats", sbx_key(x), NULL);
    assert_http(&r, 200);
    if (!json_is_integer(json_object_get(r.json, name))) {
        dump("sandbox stats", &r, __LINE__);
        fail_msg("sandbox stats lack %s", name);
    }
    v = json_integer_value(json_object_get(r.json, name));
    hres_free(&r);
    return v;
}

void sbx_arm(const xenv *x, const char *fault, int ms)
{
    json_t *b = json_pack("{s:s}", "fault", fault);
    char *text;
    hres r;

    if (ms >= 0)
        json_object_set_new(b, "ms", json_integer(ms));
    text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    sbx_http(&r, x->sbx, "POST", "/_control/faults", sbx_key(x), text);
    free(text);
    assert_http(&r, 200);
    hres_free(&r);
}

void sbx_wait_stat(const xenv *x, const char *name, json_int_t min)
{
    json_int_t v;

    for (int64_t deadline = t_now_ms() + 20000; (v = sbx_stat(x, name)) < min;) {
        if (t_now_ms() > deadline)
            fail_msg("sandbox %s stayed at %lld (< %lld) for 20 s", name,
                     (long long)v, (long long)min);
        t_sleep_ms(20);
    }
}

static const char *sbx_require(void)
{
    if (!g_sbx_bin || !*g_sbx_bin || access(g_sbx_bin, X_OK) != 0)
        fail_msg("OG_TEST_SANDBOX must name the oncegate-sandbox binary "
                 "(e.g. OG_TEST_SANDBOX=$PWD/build/oncegate-sandbox); got %s",
                 g_sbx_bin ? g_sbx_bin : "(unset)");
    return g_sbx_bin;
}

void table_path(char *out, size_t n)
{
    snprintf(out, n, "%s/providers/sandbox-credits.v1.json", g_src);
}

void xenv_start(xenv *x, const char *name, bool with_relay,
                int store_timeout_ms, json_int_t provider_timeout_ms,
                bool with_key)
{
    xenv_prepare(x, name, with_relay, store_timeout_ms, provider_timeout_ms,
                 with_key);
    assert_int_equal(srv_start(x->s), 0);
}

void xenv_prepare(xenv *x, const char *name, bool with_relay,
                  int store_timeout_ms, json_int_t provider_timeout_ms,
                  bool with_key)
{
    xenv_prepare_sbx(x, name, with_relay, store_timeout_ms,
                     provider_timeout_ms, with_key, NULL);
}

void xenv_prepare_sbx(xenv *x, const char *name, bool with_relay,
                      int store_timeout_ms,
                      json_int_t provider_timeout_ms, bool with_key,
                      const char *const *sbx_args)
{
    const char *bin = sbx_require();
    char state[PATHLEN + 32], keyfile[PATHLEN + 32], table[PATHLEN];
    json_t *prov;
    int rc;

    memset(x, 0, sizeof *x);
    x->st = site_new(name, with_relay, store_timeout_ms, true);
    assert_non_null(x->st);
    /* The server first: teardown stops servers in slot order, so the server
     * drains before its provider does. */
    x->s = site_server(x->st);
    snprintf(state, sizeof state, "%s/sandbox.db", x->st->dir);
    if (with_key) {
        api_key_new(x->sbx_key);
        secret_add(x->sbx_key);
        snprintf(keyfile, sizeof keyfile, "%s/sandbox.key", x->st->dir);
        assert_int_equal(write_file(keyfile, x->sbx_key), 0);
        chmod(keyfile, 0600);
        x->sbx = srv_new(OUT_LOG_TEXT, "--listen", "127.0.0.1:0", "--state",
                         state, "--control", "--api-key-file", keyfile,
                         (const char *)NULL);
    } else {
        keyfile[0] = '\0';
        x->sbx = srv_new(OUT_LOG_TEXT, "--listen", "127.0.0.1:0", "--state",
                         state, "--control", (const char *)NULL);
    }
    for (size_t i = 0; sbx_args && sbx_args[i]; i++)
        srv_add_arg(x->sbx, sbx_args[i]);
    free(x->sbx->argv[0]);
    x->sbx->argv[0] = strdup(bin);
    assert_int_equal(srv_exec(x->sbx), 0);
    rc = srv_wait_ready_as(x->sbx, SBX_READY_PREFIX, READY_MS);
    if (rc != 0) {
        srv_print_log(x->sbx);
        fail_msg("oncegate-sandbox did not become ready (%s)",
                 rc == -1 ? "exited" : "timeout");
    }
    table_path(table, sizeof table);
    prov = json_pack("{s:s, s:s, s:s}", "url", x->sbx->base, "table", table,
                     "api_key_file", keyfile);
    json_object_set_new(x->st->conf, "provider", prov);
    if (provider_timeout_ms > 0)
        site_timing(x->st, "provider_timeout_ms", provider_timeout_ms);
    assert_int_equal(site_write(x->st), 0);
}

void xenv_table_nonatomic(xenv *x)
{
    char table[PATHLEN], copy[PATHLEN + 64];
    json_t *t;

    table_path(table, sizeof table);
    t = json_load_file(table, 0, NULL);
    assert_non_null(t);
    assert_non_null(json_object_get(t, "properties"));
    json_object_set_new(json_object_get(t, "properties"), "atomic_same_key",
                        json_false());
    snprintf(copy, sizeof copy, "%s/sandbox-credits-nonatomic.v1.json",
             x->st->dir);
    assert_int_equal(json_dump_file(t, copy, JSON_INDENT(2)), 0);
    json_decref(t);
    json_object_set_new(json_object_get(x->st->conf, "provider"), "table",
                        json_string(copy));
}

void site_exec_timings(site *st, json_int_t S, json_int_t P)
{
    site_timing(st, "store_timeout_ms", S);
    site_timing(st, "provider_timeout_ms", P);
    site_timing(st, "lease_margin_ms", 500);
    site_timing(st, "execution_lease_ms", 3 * S + P + 500);
    site_timing(st, "recovery_lease_ms", 2 * P + S);
    site_timing(st, "recovery_delay_ms", 1000);
    site_timing(st, "cleanup_margin_ms", 20000);
}

/* ===========================================================================
 * Executing
 * ========================================================================= */

void issue_grant_for(const srv *s, grant *g, const char *subject,
                     const char *account)
{
    hres r;

    memset(g, 0, sizeof *g);
    for (int64_t deadline = t_now_ms() + 30000;;) {
        post(&r, s, "/v1/grants", KEY(P_ISSUER),
             json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:i}", "subject",
                       subject, "action", ACTION, "params", "account",
                       account, "amount", AMOUNT, "currency", CURRENCY,
                       "ttl_seconds", 900));
        if (r.status != 503 || t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(200);
    }
    assert_http(&r, 201);
    assert_non_null(jstr(r.json, "token"));
    snprintf(g->token, sizeof g->token, "%s", jstr(r.json, "token"));
    snprintf(g->grant_id, sizeof g->grant_id, "%s", jstr(r.json, "grant_id"));
    secret_add_token(g->token);
    hres_free(&r);
}

void issue_grant_account(const srv *s, grant *g, const char *account)
{
    issue_grant_for(s, g, "agent-1", account);
}

json_t *exec_body(const char *op, const char *token, const char *account)
{
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s}}", "operation_id", op,
                     "token", token, "action", ACTION, "params", "account",
                     account, "amount", AMOUNT, "currency", CURRENCY);
}

void execute_as(hres *r, const srv *s, const char *key, const char *op,
                const char *token, const char *account)
{
    post(r, s, "/v1/operations", key, exec_body(op, token, account));
}

void execute(hres *r, const srv *s, const char *op, const char *token,
             const char *account)
{
    execute_as(r, s, KEY(P_AGENT), op, token, account);
}

void assert_op_status(hres *r, const srv *s, const char *op,
                      const char *want)
{
    char path[128];

    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(r, s, path, KEY(P_AGENT));
    assert_http(r, 200);
    assert_str(jstr(r->json, "operation_id"), op);
    if (!jstr(r->json, "status") || strcmp(jstr(r->json, "status"), want) != 0) {
        dump("GET operation", r, __LINE__);
        fail_msg("stored status: expected %s, got %s", want,
                 jstr(r->json, "status") ? jstr(r->json, "status") : "(none)");
    }
}

void assert_pending(const hres *r, const char *op, const char *status,
                    const char *outcome, int line)
{
    if (r->status != 202 || !jstr(r->json, "result") ||
        strcmp(jstr(r->json, "result"), "pending") != 0 ||
        !jstr(r->json, "status") || strcmp(jstr(r->json, "status"), status) != 0 ||
        !jstr(r->json, "outcome") ||
        strcmp(jstr(r->json, "outcome"), outcome) != 0 ||
        !jstr(r->json, "operation_id") ||
        strcmp(jstr(r->json, "operation_id"), op) != 0) {
        dump("execution", r, line);
        fail_msg("line %d: expected 202 {status %s, result pending, outcome %s}",
                 line, status, outcome);
    }
}

void wait_op_status(const srv *s, const char *op, const char *want)
{
    char path[128];
    const char *st = NULL;
    hres r;

    snprintf(path, sizeof path, "/v1/operations/%s", op);
    for (int64_t deadline = t_now_ms() + 30000;;) {
        get(&r, s, path, KEY(P_AGENT));
        if (r.status != 503) {
            assert_http(&r, 200);
            st = jstr(r.json, "status");
            if (st && strcmp(st, want) == 0) {
                hres_free(&r);
                return;
            }
        }
        if (t_now_ms() > deadline) {
            dump("GET operation", &r, __LINE__);
            hres_free(&r);
            fail_msg("operation %s did not become %s within 30 s", op, want);
        }
        hres_free(&r);
        t_sleep_ms(200);
    }
}

json_t *history_of(const hres *r, bool evidence_allowed, int line)
{
    json_t *h = json_object_get(r->json, "history"), *e;
    json_int_t prev = -1;
    size_t i;

    if (!json_is_array(h) || json_array_size(h) < 1) {
        dump("operation", r, line);
        fail_msg("line %d: no history", line);
    }
    json_array_foreach(h, i, e) {
        int64_t at;

        if (!json_is_integer(json_object_get(e, "seq")) || !jstr(e, "at") ||
            og_time_parse_rfc3339(jstr(e, "at"), &at) != 0 || !jstr(e, "kind") ||
            !jstr(e, "to") || !json_object_get(e, "from") ||
            !json_is_integer(json_object_get(e, "owner_version")) ||
            !jstr(e, "actor") || !*jstr(e, "actor")) {
            dump("operation", r, line);
            fail_msg("line %d: history entry %zu lacks a field", line, i);
        }
        if (jint(e, "seq") <= prev) {
            dump("operation", r, line);
            fail_msg("line %d: history seq not increasing at %zu", line, i);
        }
        prev = jint(e, "seq");
        if (!evidence_allowed && json_object_get(e, "evidence")) {
            dump("operation", r, line);
            fail_msg("line %d: the caller's history shows evidence", line);
        }
    }
    assert_str(jstr(json_array_get(h, 0), "kind"), "admitted");
    assert_str(jstr(json_array_get(h, 0), "to"), "admitted");
    assert_int_equal(jint(json_array_get(h, 0), "owner_version"), 1);
    return h;
}

/* ---------------------------------------------------------------------------
 * The store, behind the servers' backs.
 * ------------------------------------------------------------------------- */

void store_sql(const site *st, const char *sql)
{
    if (!g_pg) {
        sqlite3 *db = NULL;
        char *err = NULL;

        if (sqlite3_open_v2(st->direct_url + strlen("sqlite:"), &db,
                            SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
            sqlite3_close(db);
            fail_msg("sqlite open %s", st->direct_url);
        }
        sqlite3_busy_timeout(db, 20000);
        if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK ||
            sqlite3_changes(db) != 1) {
            fprintf(stderr, "%s: %s (%d rows)\n", sql, err ? err : "ok",
                    sqlite3_changes(db));
            sqlite3_free(err);
            sqlite3_close(db);
            fail_msg("store statement failed");
        }
        sqlite3_close(db);
        return;
    }
    {
        PGconn *c = PQconnectdb(st->direct_url);
        PGresult *r;
        bool ok;

        if (PQstatus(c) != CONNECTION_OK) {
            fprintf(stderr, "connect: %s", PQerrorMessage(c));
            PQfinish(c);
            fail_msg("store connect failed");
        }
        r = PQexec(c, sql);
        ok = PQresultStatus(r) == PGRES_COMMAND_OK &&
             strcmp(PQcmdTuples(r), "1") == 0;
        if (!ok)
            fprintf(stderr, "%s: %s (%s rows)\n", sql, PQerrorMessage(c),
                    PQcmdTuples(r));
        PQclear(r);
        PQfinish(c);
        if (!ok)
            fail_msg("store statement failed");
    }
}

void op_shift_time(const xenv *x, const char *op, const char *column,
                   long seconds)
{
    char sql[512];

    if (g_pg)
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET %s = %s + interval '%ld seconds' "
                 "WHERE operation_id = '%s'", column, column, seconds, op);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET %s = %s + (%ld * 1000000) "
                 "WHERE operation_id = '%s'", column, column, seconds, op);
    store_sql(x->st, sql);
}

/* ---------------------------------------------------------------------------
 * Executions in threads of their own.
 * ------------------------------------------------------------------------- */

static xinflight *g_inflight[4]; /* started, not yet joined */

static void *xinflight_main(void *arg)
{
    xinflight *f = arg;

    execute(&f->r, f->s, f->op, f->token, ACCOUNT);
    f->done_ms = t_now_ms();
    return NULL;
}

xinflight *xinflight_start(const srv *s, const char *op,
                           const char *token)
{
    xinflight *f = calloc(1, sizeof *f);
    size_t i = 0;

    assert_non_null(f);
    while (i < sizeof g_inflight / sizeof g_inflight[0] && g_inflight[i])
        i++;
    assert_true(i < sizeof g_inflight / sizeof g_inflight[0]);
    f->s = s;
    snprintf(f->op, sizeof f->op, "%s", op);
    snprintf(f->token, sizeof f->token, "%s", token);
    assert_int_equal(pthread_create(&f->th, NULL, xinflight_main, f), 0);
    g_inflight[i] = f;
    return f;
}

void xinflight_join(xinflight *f)
{
    for (size_t i = 0; i < sizeof g_inflight / sizeof g_inflight[0]; i++)
        if (g_inflight[i] == f) {
            pthread_join(f->th, NULL);
            g_inflight[i] = NULL;
        }
}

void xinflight_free(xinflight *f)
{
    xinflight_join(f);
    hres_free(&f->r);
    free(f);
}

void xinflight_reap(void)
{
    for (size_t i = 0; i < sizeof g_inflight / sizeof g_inflight[0]; i++)
        if (g_inflight[i])
            xinflight_free(g_inflight[i]);
}
