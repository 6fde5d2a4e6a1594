/*
 * outage.c — the store stopped while serving (the relay cut on PostgreSQL,
 * the write lock held on SQLite): 503 retry_later with Retry-After, then
 * the same operation's retry gets the status.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * The store stopped while serving
 * ========================================================================= */
void store_stopped_while_serving_is_503_then_the_same_operation_retry_gets_the_status(
    void **state)
{
    site *st = site_new("outage", true, OUTAGE_STORE_TIMEOUT_MS, true);
    char op[OG_UUID_LEN + 1], op0[OG_UUID_LEN + 1], path[128];
    int retries;
    grant g, g2, g0;
    srv *s;
    hres r;

    assert_non_null(st);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    issue_grant(s, &g);
    issue_grant(s, &g2);
    issue_grant(s, &g0);
    uuid4(op);
    uuid4(op0);
    /* Serving, with live store connections. */
    post_patient(&r, s, "/v1/operations", KEY(P_AGENT), admit_body(op0, g0.token));
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "admitted");
    hres_free(&r);

    store_down(st);
    for (int i = 0; i < 3; i++) {
        admit(&r, s, KEY(P_AGENT), op, g.token);
        assert_retry_later(&r, __LINE__);
        hres_free(&r);
    }
    consume(&r, s, g2.token);
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    /* The same-operation retry of an admitted operation: nothing to say but
     * 503 either, never "refused". */
    admit(&r, s, KEY(P_AGENT), op0, g0.token);
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    if (g_pg) {
        get(&r, s, "/readyz", NULL);
        assert_http(&r, 503);
        assert_true(json_is_false(json_object_get(r.json, "ready")));
        assert_str(jstr(r.json, "error"), "store_unavailable");
        hres_free(&r);
        snprintf(path, sizeof path, "/v1/operations/%s", op0);
        get(&r, s, path, KEY(P_AGENT));
        assert_retry_later(&r, __LINE__);
        hres_free(&r);
    }
    get(&r, s, "/healthz", NULL);
    assert_http(&r, 200);
    hres_free(&r);
    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    if (metric_value(r.body, "oncegate_store_unavailable_total{op=\"admit\"}") < 4)
        fail_msg("oncegate_store_unavailable_total{op=\"admit\"} did not count "
                 "the 503s:\n%s", r.body);
    hres_free(&r);

    store_up(st);
    retries = post_patient(&r, s, "/v1/operations", KEY(P_AGENT),
                           admit_body(op, g.token));
    if (retries)
        fprintf(stderr, "note: %d more 503 after the store came back\n", retries);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "admitted");
    assert_true(strcmp(jstr(r.json, "outcome"), "admitted") == 0 ||
                strcmp(jstr(r.json, "outcome"), "already_admitted") == 0);
    hres_free(&r);
    post_patient(&r, s, "/v1/operations", KEY(P_AGENT), admit_body(op0, g0.token));
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
    post_patient(&r, s, "/v1/grants/consume", KEY(P_ENFORCER),
                 json_pack("{s:s}", "token", g2.token));
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "consumed")));
    hres_free(&r);
    uuid4(op0);
    post_patient(&r, s, "/v1/operations", KEY(P_AGENT), admit_body(op0, g.token));
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
    get(&r, s, "/readyz", NULL);
    assert_http(&r, 200);
    hres_free(&r);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}
