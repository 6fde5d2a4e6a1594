/*
 * refusals.c — the refusal cache (docs/http.md, "The refusal cache";
 * docs/design.md, RF1-RF6), on both engines: a replay refused from the
 * cache answers exactly what the store's refusal answered; the holder's
 * own retry, a token one byte off, an evicted entry and a disabled cache
 * all take the normal path.
 */
#include "harness.h"
#include "cases.h"

/* oncegate_refusal_cache_total{result=...} on s (0 when absent). */
static double cache_count(const srv *s, const char *result)
{
    char series[128];
    double v;
    hres r;

    snprintf(series, sizeof series,
             "oncegate_refusal_cache_total{result=\"%s\"}", result);
    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    v = metric_value(r.body, series);
    hres_free(&r);
    return v < 0 ? 0 : v;
}

/* A server on a fresh site with http.refusal_cache_entries n (< 0: the
 * default). */
static srv *cache_server(int n)
{
    site *st = site_new("refusals", false, 0, true);
    srv *s;

    assert_non_null(st);
    if (n >= 0)
        json_object_set_new(st->conf, "http",
                            json_pack("{s:i}", "refusal_cache_entries", n));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    return s;
}

/* The request event of rid on s, with its status and refusal checked. */
static json_t *refusal_event(const srv *s, const char *rid,
                             const char *refusal)
{
    json_t *ev = log_request_event(s, rid, 5000);

    if (!ev)
        fail_msg("no request event for %s in %s", rid, s->log_path);
    assert_int_equal(json_integer_value(json_object_get(ev, "status")), 409);
    assert_str(jstr(ev, "outcome"), "refused");
    assert_str(jstr(ev, "refusal"), refusal);
    return ev;
}

/* A replay refused; its answer (status, body) and log line. */
static void replay(hres *r, const srv *s, const char *token, char *rid,
                   size_t ridlen, const char *tag)
{
    char op[OG_UUID_LEN + 1];

    uuid4(op);
    snprintf(rid, ridlen, "%s-%.30s", tag, op);
    admit_rid(r, s, op, token, rid);
    assert_error(r, 409, "grant_not_available");
}

void replay_refused_from_the_cache_answers_as_the_store_and_the_holder_retries_past_it(
    void **state)
{
    char op[OG_UUID_LEN + 1], rid1[64], rid2[64];
    double hits0, miss0;
    json_t *ev, *b1, *b2;
    grant g;
    hres r, r1, r2;

    (void)state;
    hits0 = cache_count(g_a, "hit");
    miss0 = cache_count(g_a, "miss");
    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);

    /* The first replay is the store's refusal (a miss that fills the
     * entry); the second is the cache's: the same status and body. */
    replay(&r1, g_a, g.token, rid1, sizeof rid1, "store");
    assert_true(cache_count(g_a, "miss") >= miss0 + 2); /* admit, replay */
    assert_true(cache_count(g_a, "hit") == hits0);
    replay(&r2, g_a, g.token, rid2, sizeof rid2, "cache");
    assert_true(cache_count(g_a, "hit") == hits0 + 1);
    assert_int_equal(r1.status, r2.status);
    b1 = json_deep_copy(r1.json);
    b2 = json_deep_copy(r2.json);
    assert_non_null(b1);
    assert_true(json_equal(b1, b2));
    assert_null(strstr(r2.body, op)); /* nothing about the holder */
    json_decref(b1);
    json_decref(b2);
    hres_free(&r1);
    hres_free(&r2);
    ev = refusal_event(g_a, rid1, "grant_spent_by_other_operation");
    assert_null(json_object_get(ev, "refusal_cache"));
    assert_str(jstr(ev, "grant_id"), g.grant_id);
    json_decref(ev);
    ev = refusal_event(g_a, rid2, "grant_spent_by_other_operation");
    assert_str(jstr(ev, "refusal_cache"), "hit");
    assert_str(jstr(ev, "grant_id"), g.grant_id);
    assert_str(jstr(ev, "issuer"), ISSUER);
    json_decref(ev);

    /* The holder's own retry is never answered from the cache (RF5): it
     * gets its operation's status. */
    hits0 = cache_count(g_a, "hit");
    admit(&r, g_a, KEY(P_AGENT), op, g.token);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
    assert_true(cache_count(g_a, "hit") == hits0);

    /* The other instance has its own cache: its first replay is the
     * store's, its answer the same. */
    assert_refused(g_b, g.token);
}

void token_one_byte_off_or_another_caller_misses_the_refusal_cache(
    void **state)
{
    char op[OG_UUID_LEN + 1], rid[64], *tok, *dot;
    double hits0;
    grant g;
    hres r;

    (void)state;
    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    replay(&r, g_a, g.token, rid, sizeof rid, "fill");
    hres_free(&r);
    hits0 = cache_count(g_a, "hit");

    /* One byte of the signature changed: not the cached token, and the
     * normal path's signature check refuses it (RF2). */
    tok = strdup(g.token);
    assert_non_null(tok);
    dot = strrchr(tok, '.');
    assert_non_null(dot);
    assert_true(strlen(dot) > 10);
    dot[5] = dot[5] == 'A' ? 'B' : 'A';
    uuid4(op);
    admit(&r, g_a, KEY(P_AGENT), op, tok);
    assert_error(&r, 403, "grant_not_valid");
    hres_free(&r);
    free(tok);

    /* The same token from a caller it is not bound to: the normal path's
     * binding check answers, not the cache (RF2). */
    uuid4(op);
    admit(&r, g_a, KEY(P_AGENT2), op, g.token);
    assert_error(&r, 403, "grant_not_valid");
    hres_free(&r);
    assert_true(cache_count(g_a, "hit") == hits0);

    /* The exact token still hits. */
    replay(&r, g_a, g.token, rid, sizeof rid, "hit");
    hres_free(&r);
    assert_true(cache_count(g_a, "hit") == hits0 + 1);
}

void revoked_grant_is_refused_from_the_cache_for_every_operation(
    void **state)
{
    char rid[64];
    double hits0;
    json_t *ev;
    grant g;
    hres r;

    (void)state;
    issue_grant(g_a, &g);
    post(&r, g_a, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s}", "token", g.token));
    assert_http(&r, 200);
    hres_free(&r);
    hits0 = cache_count(g_a, "hit");
    replay(&r, g_a, g.token, rid, sizeof rid, "rstore");
    hres_free(&r);
    json_decref(refusal_event(g_a, rid, "grant_revoked"));
    replay(&r, g_a, g.token, rid, sizeof rid, "rcache");
    hres_free(&r);
    ev = refusal_event(g_a, rid, "grant_revoked");
    assert_str(jstr(ev, "refusal_cache"), "hit");
    json_decref(ev);
    assert_true(cache_count(g_a, "hit") == hits0 + 1);
}

void refusal_cache_of_one_entry_evicts_and_a_disabled_one_is_never_read(
    void **state)
{
    char op[OG_UUID_LEN + 1], rid[64];
    srv *s = cache_server(1), *off;
    grant g1, g2;
    json_t *ev;
    hres r;

    (void)state;
    issue_grant(s, &g1);
    issue_grant(s, &g2);
    uuid4(op);
    assert_admits(s, op, g1.token);
    uuid4(op);
    assert_admits(s, op, g2.token);

    replay(&r, s, g1.token, rid, sizeof rid, "g1-fill");
    hres_free(&r);
    replay(&r, s, g1.token, rid, sizeof rid, "g1-hit");
    hres_free(&r);
    assert_true(cache_count(s, "hit") == 1);
    /* g2's refusal takes the one slot: g1 is evicted and misses (the
     * store answers it the same), then g1 is back and g2 misses. */
    replay(&r, s, g2.token, rid, sizeof rid, "g2-fill");
    hres_free(&r);
    replay(&r, s, g1.token, rid, sizeof rid, "g1-evicted");
    hres_free(&r);
    ev = refusal_event(s, rid, "grant_spent_by_other_operation");
    assert_null(json_object_get(ev, "refusal_cache"));
    json_decref(ev);
    assert_true(cache_count(s, "hit") == 1);
    replay(&r, s, g1.token, rid, sizeof rid, "g1-hit-again");
    hres_free(&r);
    assert_true(cache_count(s, "hit") == 2);

    /* Off (0 entries): every replay is the store's, nothing is looked up. */
    off = cache_server(0);
    issue_grant(off, &g1);
    uuid4(op);
    assert_admits(off, op, g1.token);
    for (int i = 0; i < 3; i++) {
        replay(&r, off, g1.token, rid, sizeof rid, "off");
        hres_free(&r);
        ev = refusal_event(off, rid, "grant_spent_by_other_operation");
        assert_null(json_object_get(ev, "refusal_cache"));
        json_decref(ev);
    }
    assert_true(cache_count(off, "hit") == 0);
    assert_true(cache_count(off, "miss") == 0);
}
