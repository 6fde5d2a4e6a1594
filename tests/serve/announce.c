/*
 * announce.c — what a server says about itself (docs/http.md): the one
 * ready line and the ready event, the routes against docs/openapi.json,
 * 404 and 405 for what is not a route, healthz and readyz, the metrics,
 * request ids, and the background retention loops.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * The server announces itself; routes; OpenAPI
 * ========================================================================= */

void server_announces_readiness_with_one_stdout_line_and_a_ready_event(
    void **state)
{
    char want[128];
    char *out = t_slurp(g_a->out_path, NULL);

    snprintf(want, sizeof want, READY_PREFIX "127.0.0.1:%d\n", g_a->port);
    assert_non_null(out);
    assert_str(out, want);
    free(out);
    assert_true(log_wait_for(g_a, "\"event\":\"ready\"", 5000) ||
                log_wait_for(g_a, "\"event\": \"ready\"", 10));
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "METHOD /path" lines of docs/openapi.json, sorted; the count in *n. */
static char **openapi_routes(size_t *n)
{
    static const char *const methods[] = {"get", "put", "post", "delete",
                                          "patch", "head", "options", "trace"};
    char path[PATHLEN];
    json_t *doc, *paths, *item;
    const char *p;
    char **v = NULL;
    size_t cnt = 0;

    snprintf(path, sizeof path, "%s/docs/openapi.json", g_src);
    doc = json_load_file(path, 0, NULL);
    if (!doc) {
        fprintf(stderr, "cannot read %s\n", path);
        return NULL;
    }
    paths = json_object_get(doc, "paths");
    json_object_foreach(paths, p, item) {
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            char line[1024], upper[16];
            if (!json_object_get(item, methods[m]))
                continue;
            for (size_t i = 0; i <= strlen(methods[m]); i++)
                upper[i] = (char)toupper((unsigned char)methods[m][i]);
            snprintf(line, sizeof line, "%s %s", upper, p);
            v = realloc(v, (cnt + 1) * sizeof *v);
            v[cnt++] = strdup(line);
        }
    }
    json_decref(doc);
    qsort(v, cnt, sizeof *v, str_cmp);
    *n = cnt;
    return v;
}

/* `oncegate serve --routes`, one "METHOD /path" per line, sorted. */
static char **served_routes(size_t *n)
{
    char out[PATHLEN], err[PATHLEN];
    char *argv[] = {(char *)g_bin, "serve", "--routes", NULL};
    char *text, *save = NULL;
    char **v = NULL;
    size_t cnt = 0;
    int code;

    snprintf(out, sizeof out, "%s/routes.out", g_tmp);
    snprintf(err, sizeof err, "%s/routes.err", g_tmp);
    code = t_proc_run(argv, out, err, 30000);
    if (code != 0) {
        fprintf(stderr, "serve --routes exited %d\n", code);
        return NULL;
    }
    text = t_slurp(out, NULL);
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' '))
            line[--l] = '\0';
        if (!l)
            continue;
        v = realloc(v, (cnt + 1) * sizeof *v);
        v[cnt++] = strdup(line);
    }
    free(text);
    qsort(v, cnt, sizeof *v, str_cmp);
    *n = cnt;
    return v;
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void openapi_paths_and_methods_equal_serve_routes(void **state)
{
    size_t nd = 0, ns = 0, i = 0, j = 0;
    char **doc = openapi_routes(&nd), **served = served_routes(&ns);
    int diffs = 0;

    assert_non_null(doc);
    assert_non_null(served);
    assert_true(ns > 0);
    while (i < nd || j < ns) {
        int c = i == nd ? 1 : j == ns ? -1 : strcmp(doc[i], served[j]);
        if (c == 0) {
            i++, j++;
        } else if (c < 0) {
            fprintf(stderr, "documented, not served: %s\n", doc[i++]);
            diffs++;
        } else {
            fprintf(stderr, "served, not documented: %s\n", served[j++]);
            diffs++;
        }
    }
    strv_free(doc, nd);
    strv_free(served, ns);
    assert_int_equal(diffs, 0);
}

void every_documented_route_answers_other_than_route_not_found_or_405(
    void **state)
{
    size_t n = 0;
    char **doc = openapi_routes(&n);
    int bad = 0;

    assert_non_null(doc);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        char method[16], path[1024], real[1200], *o = real;
        hres r;
        hreq q;

        if (sscanf(doc[i], "%15s %1023s", method, path) != 2)
            fail();
        /* {param} segments get a well-formed value. */
        for (const char *p = path; *p && o < real + sizeof real - 64;) {
            if (*p == '{') {
                const char *end = strchr(p, '}');
                char u[OG_UUID_LEN + 1];
                if (!end)
                    fail();
                if (strstr(p, "operation") && strstr(p, "operation") < end) {
                    uuid4(u);
                    o += sprintf(o, "%s", u);
                } else {
                    o += sprintf(o, "fam-route-check");
                }
                p = end + 1;
            } else {
                *o++ = *p++;
            }
        }
        *o = '\0';
        q = (hreq){method, g_a->base, real, NULL, NULL,
                   strcmp(method, "GET") ? "application/json" : NULL,
                   strcmp(method, "GET") ? "{}" : NULL,
                   strcmp(method, "GET") ? 2 : 0, false, NULL};
        http_do(&q, &r);
        if (r.status == 0 || r.status == 405 ||
            (r.status == 404 && jstr(r.json, "error") &&
             strcmp(jstr(r.json, "error"), "route_not_found") == 0)) {
            dump(doc[i], &r, __LINE__);
            bad++;
        }
        hres_free(&r);
    }
    strv_free(doc, n);
    assert_int_equal(bad, 0);
}

void unknown_path_is_404_route_not_found_and_wrong_method_is_405_with_allow(
    void **state)
{
    static const struct {
        const char *method, *path, *allow;
    } wrong[] = {
        {"GET", "/v1/operations", "POST"},
        {"DELETE", "/v1/grants", "POST"},
        {"GET", "/v1/grants/consume", "POST"},
        {"POST", "/healthz", "GET"},
        {"PUT", "/metrics", "GET"},
    };
    char allow[256];
    hres r;

    get(&r, g_a, "/v1/no-such-route", KEY(P_AGENT));
    assert_error(&r, 404, "route_not_found");
    hres_free(&r);
    get(&r, g_a, "/nope", NULL);
    assert_error(&r, 404, "route_not_found");
    hres_free(&r);
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        req(&r, wrong[i].method, g_a, wrong[i].path, KEY(P_AGENT),
            strcmp(wrong[i].method, "GET") ? "application/json" : NULL,
            strcmp(wrong[i].method, "GET") ? "{}" : NULL);
        assert_error(&r, 405, "method_not_allowed");
        assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
        assert_non_null(strstr(allow, wrong[i].allow));
        hres_free(&r);
    }
}

/* ===========================================================================
 * healthz, readyz, metrics, request ids
 * ========================================================================= */
void healthz_and_readyz_answer_without_a_key_on_every_instance(
    void **state)
{
    srv *s[2] = {g_a, g_b};

    for (int i = 0; i < 2; i++) {
        hres r;
        get(&r, s[i], "/healthz", NULL);
        assert_http(&r, 200);
        assert_true(json_is_true(json_object_get(r.json, "ok")));
        hres_free(&r);
        get(&r, s[i], "/readyz", NULL);
        assert_http(&r, 200);
        assert_true(json_is_true(json_object_get(r.json, "ready")));
        hres_free(&r);
    }
}

void metrics_count_admissions_refusals_consumes_and_responses(
    void **state)
{
    static const char *const families[] = {
        "oncegate_admissions_total{",      "oncegate_refusals_total{",
        "oncegate_store_latency_seconds_bucket{",
        "oncegate_consumes_total{",        "oncegate_http_requests_in_flight",
        "oncegate_http_responses_total{",
    };
    const char *series = "oncegate_admissions_total{outcome=\"admitted\"}";
    /* the group commit's counters: every admission is in one batch */
    const char *batched = "oncegate_admit_batched_admissions_total";
    /* and the consume verdicts': the verdict below is in one batch */
    const char *verdicts = "oncegate_consume_batched_verdicts_total";
    const char *vbatches = "oncegate_consume_batches_total";
    double before, after, rows_before, rows_after, batches;
    double v_before, vb_before, v_after, vb_after;
    char ctype[256], op[OG_UUID_LEN + 1];
    grant g, g2;
    hres r;

    get(&r, g_a, "/metrics", NULL);
    assert_http(&r, 200);
    assert_true(hdr_value(&r, "Content-Type", ctype, sizeof ctype));
    assert_non_null(strstr(ctype, "text/plain"));
    before = metric_value(r.body, series);
    rows_before = metric_value(r.body, batched);
    v_before = metric_value(r.body, verdicts);
    vb_before = metric_value(r.body, vbatches);
    hres_free(&r);
    assert_true(v_before >= 0 && vb_before >= 0);
    if (before < 0)
        before = 0;
    assert_true(rows_before >= 0);

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    assert_refused(g_a, g.token);
    issue_grant(g_a, &g2);
    consume(&r, g_a, g2.token);
    assert_http(&r, 200);
    hres_free(&r);

    get(&r, g_a, "/metrics", NULL);
    assert_http(&r, 200);
    after = metric_value(r.body, series);
    if (after < before + 1)
        fprintf(stderr, "%s: before %g, after %g\n%s\n", series, before, after,
                r.body);
    assert_true(after >= before + 1);
    /* the admission and its replay, each in a batch */
    rows_after = metric_value(r.body, batched);
    batches = metric_value(r.body, "oncegate_admit_batches_total");
    assert_true(rows_after >= rows_before + 2);
    assert_true(batches >= 1 && batches <= rows_after);
    v_after = metric_value(r.body, verdicts);
    vb_after = metric_value(r.body, vbatches);
    assert_true(v_after >= v_before + 1);
    assert_true(vb_after >= vb_before + 1 && vb_after <= v_after);
    assert_true(metric_value(r.body, "oncegate_consume_batch_fallbacks_total") >= 0);
    /* the ticket rotations' counters, from the start */
    assert_true(metric_value(r.body, "oncegate_rotate_batches_total") >= 0);
    assert_true(metric_value(r.body,
                             "oncegate_rotate_batched_rotations_total") >= 0);
    assert_true(metric_value(r.body, "oncegate_rotate_batch_fallbacks_total") >=
                0);
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strstr(r.body, families[i]))
            fail_msg("metrics lack %s", families[i]);
    hres_free(&r);
}

void request_id_is_echoed_and_logged_as_correlation_id(void **state)
{
    char id[64], got[256], longid[201], needle[128], u[OG_UUID_LEN + 1];
    hreq q;
    hres r;

    uuid4(u);
    snprintf(id, sizeof id, "corr-%s", u);
    q = (hreq){"GET", g_a->base, "/healthz", NULL, NULL, NULL, NULL, 0, false,
               id};
    http_do(&q, &r);
    assert_http(&r, 200);
    assert_true(hdr_value(&r, "X-Request-Id", got, sizeof got));
    assert_str(got, id);
    hres_free(&r);

    /* An authenticated /v1 request too. */
    q = (hreq){"GET", g_a->base, "/v1/operations/00000000-0000-4000-8000-000000000001",
               KEY(P_AGENT), NULL, NULL, NULL, 0, false, id};
    http_do(&q, &r);
    assert_error(&r, 404, "not_found");
    assert_true(hdr_value(&r, "X-Request-Id", got, sizeof got));
    assert_str(got, id);
    hres_free(&r);

    /* Too long: a generated id instead. */
    memset(longid, 'a', 200);
    longid[200] = '\0';
    q.request_id = longid;
    q.path = "/healthz";
    q.key = NULL;
    http_do(&q, &r);
    assert_http(&r, 200);
    assert_true(hdr_value(&r, "X-Request-Id", got, sizeof got));
    assert_true(strlen(got) >= 1 && strlen(got) <= 128);
    assert_true(strcmp(got, longid) != 0);
    hres_free(&r);

    /* None sent: one is generated. */
    get(&r, g_a, "/healthz", NULL);
    assert_true(hdr_value(&r, "X-Request-Id", got, sizeof got));
    assert_true(strlen(got) >= 1);
    hres_free(&r);

    snprintf(needle, sizeof needle, "\"correlation_id\":\"%s\"", id);
    if (!log_wait_for(g_a, needle, 5000)) {
        snprintf(needle, sizeof needle, "\"correlation_id\": \"%s\"", id);
        if (!log_wait_for(g_a, needle, 10))
            fail_msg("no log line with correlation_id %s in %s", id,
                     g_a->log_path);
    }
}

/* Runs sql (PostgreSQL) or sqlite_sql on st's store directly. 0 or -1. */
static int site_sql(const site *st, const char *pg_sql, const char *sqlite_sql)
{
    int ok;

    if (!g_pg) {
        sqlite3 *db = NULL;

        ok = sqlite3_open_v2(st->direct_url + strlen("sqlite:"), &db,
                             SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
             sqlite3_busy_timeout(db, 10000) == SQLITE_OK &&
             sqlite3_exec(db, sqlite_sql, NULL, NULL, NULL) == SQLITE_OK;
        if (!ok)
            fprintf(stderr, "site_sql: %s\n", db ? sqlite3_errmsg(db) : "");
        sqlite3_close(db);
        return ok ? 0 : -1;
    }
    {
        PGconn *c = PQconnectdb(st->direct_url);
        PGresult *r = PQexec(c, pg_sql);

        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            fprintf(stderr, "site_sql: %s", PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
        return ok ? 0 : -1;
    }
}

/* The background retention loops: the janitor deletes a consumption row past
 * retain_until + cleanup_margin (and not a live one), the archive loop moves
 * a finished operation past its audit retention; both are logged and
 * counted, and stop on the drain. */
void janitor_and_archive_loops_run_in_the_background(void **state)
{
    site *st = site_new("janitor", false, 0, true);
    double v;
    srv *s;
    hres r;

    assert_non_null(st);
    json_object_set_new(st->conf, "janitor",
                        json_pack("{s:i}", "interval_ms", 1000));
    json_object_set_new(st->conf, "operations",
                        json_pack("{s:s, s:i}", "retention_mode", "archive",
                                  "audit_retention_days", 30));
    assert_int_equal(site_write(st), 0);
    assert_int_equal(
        site_sql(st,
                 "INSERT INTO grant_consumptions (issuer, grant_id,"
                 " operation_id, consumed_at, retain_until, kind) VALUES"
                 " ('i', 'due', NULL, now(), now() - interval '1 day',"
                 "  'consume'),"
                 " ('i', 'live', NULL, now(), now() + interval '1 day',"
                 "  'consume');"
                 "INSERT INTO operations (operation_id, issuer, grant_id,"
                 " caller_id, account_id, amount, currency, status,"
                 " owner_version, lease_until, submit_by, created_at,"
                 " updated_at) VALUES ('6f1c2a8e-3b4d-4c5e-8f90-123456789abc',"
                 " 'i', 'due', 'c', 'a', 1, 'USD', 'Succeeded', 1, now(),"
                 " now(), now() - interval '90 days',"
                 " now() - interval '60 days')",
                 "INSERT INTO grant_consumptions (issuer, grant_id,"
                 " operation_id, consumed_at, retain_until, kind) VALUES"
                 " ('i', 'due', NULL, 0, 0, 'consume'),"
                 " ('i', 'live', NULL, 0, 9000000000000000, 'consume');"
                 "INSERT INTO operations (operation_id, issuer, grant_id,"
                 " caller_id, account_id, amount, currency, status,"
                 " owner_version, lease_until, submit_by, created_at,"
                 " updated_at) VALUES ('6f1c2a8e-3b4d-4c5e-8f90-123456789abc',"
                 " 'i', 'due', 'c', 'a', '1', 'USD', 'Succeeded', 1, 0, 0, 0,"
                 " 0)"),
        0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    assert_true(log_wait_for(s, "\"event\":\"cleanup\"", 20000));
    assert_true(log_wait_for(s, "\"event\":\"archive\"", 20000));
    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    v = metric_value(r.body, "oncegate_cleanup_deleted_total{kind=\"consume\"}");
    assert_true(v == 1);
    assert_true(metric_value(r.body, "oncegate_cleanup_deleted_total{kind="
                                     "\"admission\"}") == 0);
    assert_true(metric_value(r.body, "oncegate_cleanup_last_duration_seconds") >=
                0);
    assert_true(metric_value(r.body, "oncegate_operations_archived_total{mode="
                                     "\"archive\"}") == 1);
    hres_free(&r);
    /* The drain stops both loops: the server exits 0 in time. */
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}
