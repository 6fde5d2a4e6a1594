/*
 * operators.c — the operator's side (docs/http.md): the reconciliation
 * backlog, one operation with its evidence, resolution by hand; the
 * caller's history without evidence; the execution metrics.
 */
#include "harness.h"
#include "cases.h"

/* Makes op look created `seconds` ago (its age, as the backlog sees it). */
static void op_age(const xenv *x, const char *op, long seconds)
{
    op_shift_time(x, op, "created_at", -seconds);
}

/* Keeps an Unknown operation away from recovery: its lease ends in an
 * hour. */
static void op_pin_lease(const xenv *x, const char *op)
{
    op_shift_time(x, op, "lease_until", 3600);
}

/* xenv_start with a provider table that says atomic_same_key false, and
 * short timings: recovery takes an Unknown operation over within seconds,
 * finds nothing by lookup and records needs_reconciliation. */
static void xenv_start_reconciling(xenv *x, const char *name)
{
    xenv_prepare(x, name, false, 1000, 1000, false);
    xenv_table_nonatomic(x);
    site_exec_timings(x->st, 1000, 1000);
    assert_int_equal(site_write(x->st), 0);
    assert_int_equal(srv_start(x->s), 0);
}

/* A fresh grant, and an execution the sandbox answers 500 before any
 * effect: 202 pending unknown, no credit. */
static void execute_unknown(const xenv *x, char op[OG_UUID_LEN + 1], grant *g)
{
    hres r;

    issue_grant_account(x->s, g, ACCOUNT);
    sbx_arm(x, "error_500_before_effect", -1);
    uuid4(op);
    execute(&r, x->s, op, g->token, ACCOUNT);
    assert_pending(&r, op, "unknown", "admitted", __LINE__);
    hres_free(&r);
}

static void admin_get(hres *r, const srv *s, const char *key, const char *op)
{
    char path[128];

    snprintf(path, sizeof path, "/v1/admin/operations/%s", op);
    get(r, s, path, key);
}

/* POST /v1/admin/operations/{op}/resolve with body (stolen). */
static void admin_resolve(hres *r, const srv *s, const char *key,
                          const char *op, json_t *body)
{
    char path[160];

    snprintf(path, sizeof path, "/v1/admin/operations/%s/resolve", op);
    post(r, s, path, key, body);
}

static void admin_list(hres *r, const srv *s, const char *query)
{
    char path[512];

    snprintf(path, sizeof path, "/v1/admin/operations%s", query);
    get(r, s, path, KEY(P_OPERATOR));
}

/* GET /v1/admin/operations`query` lists exactly the operations in want
 * (NULL-terminated), in that order. */
static void assert_backlog(const srv *s, const char *query,
                           const char *const *want, int line)
{
    json_t *ops, *o;
    size_t n = 0, i;
    hres r;

    while (want[n])
        n++;
    admin_list(&r, s, query);
    if (r.status != 200)
        dump("backlog", &r, line);
    assert_http(&r, 200);
    ops = json_object_get(r.json, "operations");
    if (!json_is_array(ops) || json_array_size(ops) != n) {
        dump("backlog", &r, line);
        fail_msg("line %d: %s: expected %zu operations, got %zu", line, query,
                 n, json_array_size(ops));
    }
    json_array_foreach(ops, i, o) {
        if (!jstr(o, "operation_id") ||
            strcmp(jstr(o, "operation_id"), want[i]) != 0) {
            dump("backlog", &r, line);
            fail_msg("line %d: %s: operation %zu is %s, expected %s", line,
                     query, i, jstr(o, "operation_id") ? jstr(o, "operation_id")
                                                       : "(none)",
                     want[i]);
        }
    }
    hres_free(&r);
}

#define BACKLOG(s, query, ...)                                                 \
    do {                                                                       \
        const char *const w_[] = {__VA_ARGS__, NULL};                         \
        assert_backlog((s), (query), w_, __LINE__);                            \
    } while (0)

void operator_lists_the_reconciliation_backlog_oldest_first(
    void **state)
{
    static const char *const fields[] = {
        "operation_id", "status", "issuer", "grant_id", "account", "amount",
        "currency", "owner_version", "created_at", "lease_until", "submit_by",
        "updated_at", "caller", "age_seconds"};
    char ok[OG_UUID_LEN + 1], op1[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1],
        op3[OG_UUID_LEN + 1];
    xenv x;
    grant g0, g1, g2, g3;
    json_t *ops, *o;
    json_int_t prev_age = -1;
    int64_t prev_created = 0;
    size_t i;
    hres r;

    xenv_start_reconciling(&x, "op-backlog");
    /* Settled: never in the backlog. */
    issue_grant_account(x.s, &g0, ACCOUNT);
    uuid4(ok);
    execute(&r, x.s, ok, g0.token, ACCOUNT);
    assert_http(&r, 200);
    hres_free(&r);
    /* op1: Unknown, then recovery's needs_reconciliation. */
    execute_unknown(&x, op1, &g1);
    wait_op_status(x.s, op1, "needs_reconciliation");
    /* op2 and op3: Unknown, kept away from recovery; op3 made the oldest
     * of all, so insertion order is not the answer. */
    execute_unknown(&x, op2, &g2);
    op_pin_lease(&x, op2);
    execute_unknown(&x, op3, &g3);
    op_pin_lease(&x, op3);
    op_age(&x, op3, 3 * 3600);
    assert_op_status(&r, x.s, op2, "unknown");
    hres_free(&r);
    assert_op_status(&r, x.s, op3, "unknown");
    hres_free(&r);

    /* The default: unknown and needs_reconciliation, oldest first. */
    admin_list(&r, x.s, "");
    assert_http(&r, 200);
    ops = json_object_get(r.json, "operations");
    if (!json_is_array(ops) || json_array_size(ops) != 3) {
        dump("backlog", &r, __LINE__);
        fail_msg("expected 3 operations in the default backlog");
    }
    json_array_foreach(ops, i, o) {
        const char *want[] = {op3, op1, op2};
        const char *wst[] = {"unknown", "needs_reconciliation", "unknown"};
        int64_t created;

        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            if (!json_object_get(o, fields[f])) {
                dump("backlog", &r, __LINE__);
                fail_msg("backlog entry %zu lacks %s", i, fields[f]);
            }
        if (json_object_get(o, "history"))
            fail_msg("backlog entries carry no history");
        assert_str(jstr(o, "operation_id"), want[i]);
        assert_str(jstr(o, "status"), wst[i]);
        assert_str(jstr(o, "caller"), "agent-1");
        assert_str(jstr(o, "issuer"), ISSUER);
        assert_str(jstr(o, "account"), ACCOUNT);
        assert_int_equal(og_time_parse_rfc3339(jstr(o, "created_at"), &created),
                         0);
        assert_true(jint(o, "age_seconds") >= 0);
        if (i > 0) {
            assert_true(created >= prev_created);
            assert_true(jint(o, "age_seconds") <= prev_age);
        }
        prev_created = created;
        prev_age = jint(o, "age_seconds");
    }
    assert_true(jint(json_array_get(ops, 0), "age_seconds") >= 3 * 3600 - 5);
    assert_true(jint(json_array_get(ops, 0), "age_seconds") < 3 * 3600 + 600);
    assert_true(jint(json_array_get(ops, 2), "age_seconds") < 600);
    assert_str(jstr(json_array_get(ops, 0), "grant_id"), g3.grant_id);
    hres_free(&r);
    BACKLOG(x.s, "?status=unknown,needs_reconciliation", op3, op1, op2);

    /* Each status on its own, and others. */
    BACKLOG(x.s, "?status=needs_reconciliation", op1);
    BACKLOG(x.s, "?status=unknown", op3, op2);
    BACKLOG(x.s, "?status=succeeded", ok);
    BACKLOG(x.s, "?status=succeeded,unknown", op3, ok, op2);
    BACKLOG(x.s, "?status=admitted,failed", NULL);
    /* Age and limit. */
    BACKLOG(x.s, "?older_than_seconds=600", op3);
    BACKLOG(x.s, "?older_than_seconds=0", op3, op1, op2);
    BACKLOG(x.s, "?older_than_seconds=86400", NULL);
    BACKLOG(x.s, "?limit=2", op3, op1);
    BACKLOG(x.s, "?limit=1", op3);
    BACKLOG(x.s, "?status=unknown&limit=1&older_than_seconds=60", op3);
    BACKLOG(x.s, "?limit=1000", op3, op1, op2);
    /* Listing changes nothing. */
    assert_op_status(&r, x.s, op1, "needs_reconciliation");
    hres_free(&r);
}

/* The history of an operation that went Unknown (handler), was taken over
 * and reconciled-needed by recovery, then resolved by operator-1 to `to`. */
static void assert_resolved_history(const hres *r, bool operator_view,
                                    const char *to, const char *reason,
                                    const char *evidence, const char *ref,
                                    int line)
{
    json_t *h = history_of(r, operator_view, line), *e;
    size_t n = json_array_size(h), takeovers = 0;

    if (n < 5) {
        dump("operation", r, line);
        fail_msg("line %d: expected at least 5 history entries", line);
    }
    e = json_array_get(h, 1);
    assert_str(jstr(e, "kind"), "outcome");
    assert_str(jstr(e, "from"), "admitted");
    assert_str(jstr(e, "to"), "unknown");
    assert_str(jstr(e, "actor"), "handler");
    assert_str(jstr(e, "reason"), "internal");
    assert_int_equal(jint(e, "owner_version"), 1);
    for (size_t i = 2; i + 2 < n; i++) {
        e = json_array_get(h, i);
        assert_str(jstr(e, "kind"), "takeover");
        assert_str(jstr(e, "actor"), "recovery");
        assert_int_equal(jint(e, "owner_version"), (json_int_t)i);
        takeovers++;
    }
    assert_true(takeovers >= 1);
    e = json_array_get(h, n - 2);
    assert_str(jstr(e, "kind"), "outcome");
    assert_str(jstr(e, "from"), "unknown");
    assert_str(jstr(e, "to"), "needs_reconciliation");
    assert_str(jstr(e, "actor"), "recovery");
    assert_str(jstr(e, "reason"), "not_found_no_atomic_same_key");
    assert_int_equal(jint(e, "owner_version"), (json_int_t)(n - 3));
    e = json_array_get(h, n - 1);
    assert_str(jstr(e, "kind"), "resolved");
    assert_str(jstr(e, "from"), "needs_reconciliation");
    assert_str(jstr(e, "to"), to);
    assert_str(jstr(e, "actor"), "operator-1");
    assert_str(jstr(e, "reason"), reason);
    assert_int_equal(jint(e, "owner_version"), (json_int_t)(n - 2));
    assert_int_equal(jint(r->json, "owner_version"), (json_int_t)(n - 2));
    if (ref)
        assert_str(jstr(e, "provider_reference"), ref);
    if (operator_view)
        assert_str(jstr(e, "evidence"), evidence);
    else
        assert_null(json_object_get(e, "evidence"));
}

#define EVIDENCE_1 "support ticket 4411: provider confirms credit made by hand\n\tref cr_manual_77"

/* One operator's resolution of op, sent from its own thread. */
#define RESOLVERS 8

typedef struct resolver {
    const srv *s;
    const char *op;
    hres r;
} resolver;

static void *resolver_main(void *arg)
{
    resolver *z = arg;

    admin_resolve(&z->r, z->s, KEY(P_OPERATOR), z->op,
                  json_pack("{s:s, s:s, s:s, s:s}", "status", "succeeded",
                            "reason", "confirmed_by_provider_support",
                            "evidence", EVIDENCE_1, "provider_reference",
                            "cr_manual_77"));
    return NULL;
}

void operator_resolves_needs_reconciliation_with_evidence_and_the_grant_stays_spent(
    void **state)
{
    char op[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1], big[1100];
    xenv x;
    grant g;
    hres r;
    json_int_t v;

    xenv_start_reconciling(&x, "op-resolve");
    execute_unknown(&x, op, &g);
    wait_op_status(x.s, op, "needs_reconciliation");
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 0);

    /* The operator's view before: the caller, the history, no evidence yet. */
    admin_get(&r, x.s, KEY(P_OPERATOR), op);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "needs_reconciliation");
    assert_str(jstr(r.json, "caller"), "agent-1");
    assert_str(jstr(r.json, "grant_id"), g.grant_id);
    v = jint(r.json, "owner_version");
    {
        json_t *h = history_of(&r, true, __LINE__);
        size_t n = json_array_size(h);
        assert_true(n >= 4);
        assert_str(jstr(json_array_get(h, 1), "to"), "unknown");
        assert_str(jstr(json_array_get(h, 2), "kind"), "takeover");
        assert_str(jstr(json_array_get(h, n - 1), "to"), "needs_reconciliation");
        assert_int_equal(jint(json_array_get(h, n - 1), "owner_version"), v);
    }
    hres_free(&r);

    /* Bad resolutions are 400 and change nothing. */
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "unknown", "reason",
                            "x", "evidence", "y"));
    assert_error(&r, 400, "malformed_request");
    assert_str(jstr(r.json, "field"), "status");
    hres_free(&r);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s}", "status", "succeeded", "reason",
                            "confirmed"));
    assert_error(&r, 400, "malformed_request");
    assert_str(jstr(r.json, "field"), "evidence");
    hres_free(&r);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s}", "status", "succeeded", "evidence",
                            "seen"));
    assert_error(&r, 400, "malformed_request");
    assert_str(jstr(r.json, "field"), "reason");
    hres_free(&r);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s, s:s}", "status", "succeeded",
                            "reason", "ok", "evidence", "seen", "extra", "1"));
    assert_error(&r, 400, "malformed_request");
    assert_str(jstr(r.json, "field"), "extra");
    hres_free(&r);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "succeeded", "reason",
                            "has a space", "evidence", "seen"));
    assert_http(&r, 400);
    hres_free(&r);
    memset(big, 'e', 1025);
    big[1025] = '\0';
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "succeeded", "reason",
                            "confirmed", "evidence", big));
    assert_http(&r, 400);
    hres_free(&r);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "succeeded", "reason",
                            "confirmed", "evidence", ""));
    assert_http(&r, 400);
    hres_free(&r);
    assert_op_status(&r, x.s, op, "needs_reconciliation");
    assert_int_equal(jint(r.json, "owner_version"), v);
    hres_free(&r);

    /* The resolution, sent by RESOLVERS operators at once: exactly one
     * resolves it, the others get 409 not_needs_reconciliation. */
    {
        resolver rs[RESOLVERS];
        pthread_t th[RESOLVERS];
        int won = -1, lost = 0;

        for (int i = 0; i < RESOLVERS; i++) {
            memset(&rs[i], 0, sizeof rs[i]);
            rs[i].s = x.s;
            rs[i].op = op;
            assert_int_equal(pthread_create(&th[i], NULL, resolver_main,
                                            &rs[i]), 0);
        }
        for (int i = 0; i < RESOLVERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < RESOLVERS; i++) {
            if (rs[i].r.status == 200 &&
                json_is_true(json_object_get(rs[i].r.json, "resolved")) &&
                won < 0)
                won = i;
            else if (rs[i].r.status == 409 &&
                     jstr(rs[i].r.json, "error") &&
                     strcmp(jstr(rs[i].r.json, "error"),
                            "not_needs_reconciliation") == 0)
                lost++;
            else
                dump("concurrent resolve", &rs[i].r, __LINE__);
        }
        if (won < 0 || lost != RESOLVERS - 1) {
            for (int i = 0; i < RESOLVERS; i++)
                hres_free(&rs[i].r);
            fail_msg("%d concurrent resolutions: expected one 200 and %d "
                     "409, got %s and %d", RESOLVERS, RESOLVERS - 1,
                     won < 0 ? "no 200" : "one 200", lost);
        }
        r = rs[won].r;
        memset(&rs[won].r, 0, sizeof rs[won].r);
        for (int i = 0; i < RESOLVERS; i++)
            hres_free(&rs[i].r);
    }
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "resolved")));
    {
        json_t *o = json_object_get(r.json, "operation");
        if (!json_is_object(o)) {
            dump("resolve", &r, __LINE__);
            fail_msg("resolve answer lacks operation");
        }
        assert_str(jstr(o, "operation_id"), op);
        assert_str(jstr(o, "status"), "succeeded");
        assert_str(jstr(o, "provider_reference"), "cr_manual_77");
        assert_int_equal(jint(o, "owner_version"), v + 1);
    }
    hres_free(&r);

    /* The operator sees the whole history with the evidence. */
    admin_get(&r, x.s, KEY(P_OPERATOR), op);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "succeeded");
    assert_str(jstr(r.json, "caller"), "agent-1");
    assert_resolved_history(&r, true, "succeeded",
                            "confirmed_by_provider_support", EVIDENCE_1,
                            "cr_manual_77", __LINE__);
    hres_free(&r);

    /* The caller sees the new status and the resolved entry, no evidence. */
    assert_op_status(&r, x.s, op, "succeeded");
    assert_int_equal(jint(r.json, "owner_version"), v + 1);
    assert_str(jstr(r.json, "provider_reference"), "cr_manual_77");
    assert_resolved_history(&r, false, "succeeded",
                            "confirmed_by_provider_support", EVIDENCE_1,
                            "cr_manual_77", __LINE__);
    if (strstr(r.body, "support ticket 4411"))
        fail_msg("the caller's answer carries the evidence text");
    hres_free(&r);

    /* A second resolution: 409, nothing changes. */
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "changed_mind", "evidence", "no"));
    assert_error(&r, 409, "not_needs_reconciliation");
    assert_true(json_is_false(json_object_get(r.json, "resolved")));
    hres_free(&r);
    assert_op_status(&r, x.s, op, "succeeded");
    assert_int_equal(jint(r.json, "owner_version"), v + 1);
    hres_free(&r);

    /* The grant stays spent; the same operation gets its settled status;
     * no provider call was made by any of it. */
    uuid4(op2);
    execute(&r, x.s, op2, g.token, ACCOUNT);
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "succeeded");
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 0);
    /* Out of the backlog. */
    BACKLOG(x.s, "", NULL);
}

/* Resolving anything but NeedsReconciliation: 409 not_needs_reconciliation
 * and nothing changes; an absent operation: 404. */
static void assert_resolve_409(const srv *s, const char *op, const char *st)
{
    json_int_t v;
    size_t n;
    hres r;

    assert_op_status(&r, s, op, st);
    v = jint(r.json, "owner_version");
    n = json_array_size(json_object_get(r.json, "history"));
    hres_free(&r);
    admin_resolve(&r, s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "no_credit_found", "evidence", "checked by hand"));
    if (r.status != 409)
        fprintf(stderr, "resolving a %s operation\n", st);
    assert_error(&r, 409, "not_needs_reconciliation");
    assert_true(json_is_false(json_object_get(r.json, "resolved")));
    assert_non_null(jstr(r.json, "message"));
    hres_free(&r);
    assert_op_status(&r, s, op, st);
    assert_int_equal(jint(r.json, "owner_version"), v);
    assert_int_equal(json_array_size(json_object_get(r.json, "history")), n);
    hres_free(&r);
}

void resolving_an_operation_not_awaiting_reconciliation_is_409(
    void **state)
{
    char op[OG_UUID_LEN + 1], ok[OG_UUID_LEN + 1], bad[OG_UUID_LEN + 1],
        unk[OG_UUID_LEN + 1], absent[OG_UUID_LEN + 1];
    xenv x;
    grant g, g1, g2, g3;
    hres r;

    /* Admitted (no provider). */
    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    assert_resolve_409(g_a, op, "admitted");

    /* Succeeded, failed, unknown (default timings: recovery leaves it). */
    xenv_start(&x, "op-409", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g1, ACCOUNT);
    uuid4(ok);
    execute(&r, x.s, ok, g1.token, ACCOUNT);
    assert_http(&r, 200);
    hres_free(&r);
    issue_grant_account(x.s, &g2, "closed-9");
    uuid4(bad);
    execute(&r, x.s, bad, g2.token, "closed-9");
    assert_http(&r, 422);
    hres_free(&r);
    execute_unknown(&x, unk, &g3);
    assert_resolve_409(x.s, ok, "succeeded");
    assert_resolve_409(x.s, bad, "failed");
    assert_resolve_409(x.s, unk, "unknown");

    /* Absent: 404 not_found, for the read too. */
    uuid4(absent);
    admin_resolve(&r, x.s, KEY(P_OPERATOR), absent,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "no_credit_found", "evidence", "checked"));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    admin_get(&r, x.s, KEY(P_OPERATOR), absent);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    /* Not a UUID: 400. */
    admin_get(&r, x.s, KEY(P_OPERATOR), "not-a-uuid");
    assert_error(&r, 400, "input.operation_id_invalid");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 3);
}

void operator_endpoints_refuse_other_roles_and_missing_keys(
    void **state)
{
    char op[OG_UUID_LEN + 1], unknown[API_KEY_LEN], paths[3][192], www[256];
    const char *methods[3] = {"GET", "GET", "POST"};
    const char *body = "{\"status\":\"failed\",\"reason\":\"no_credit_found\","
                       "\"evidence\":\"checked\"}";
    grant g;
    hres r;

    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    api_key_new(unknown);
    secret_add(unknown);
    snprintf(paths[0], sizeof paths[0], "/v1/admin/operations");
    snprintf(paths[1], sizeof paths[1], "/v1/admin/operations/%s", op);
    snprintf(paths[2], sizeof paths[2], "/v1/admin/operations/%s/resolve", op);
    for (int i = 0; i < 3; i++) {
        const char *b = strcmp(methods[i], "POST") == 0 ? body : NULL;
        const char *ct = b ? "application/json" : NULL;

        for (int p = 0; p < P_COUNT; p++) {
            if (p == P_OPERATOR)
                continue;
            req(&r, methods[i], g_a, paths[i], KEY(p), ct, b);
            if (r.status != 403)
                fprintf(stderr, "%s %s as %s\n", methods[i], paths[i],
                        g_p[p].id);
            assert_error(&r, 403, "forbidden");
            hres_free(&r);
        }
        for (int v = 0; v < 2; v++) {
            req(&r, methods[i], g_a, paths[i], v ? unknown : NULL, ct, b);
            if (r.status != 401)
                fprintf(stderr, "%s %s %s\n", methods[i], paths[i],
                        v ? "unknown key" : "no key");
            assert_error(&r, 401, "unauthorized");
            assert_true(hdr_value(&r, "WWW-Authenticate", www, sizeof www));
            assert_true(strncasecmp(www, "Bearer", 6) == 0);
            hres_free(&r);
        }
    }
    /* The operator itself is let in, on both instances. */
    admin_get(&r, g_b, KEY(P_OPERATOR), op);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "caller"), "agent-1");
    assert_str(jstr(r.json, "status"), "admitted");
    hres_free(&r);
    admin_list(&r, g_a, "?status=admitted&limit=1");
    assert_http(&r, 200);
    assert_true(json_is_array(json_object_get(r.json, "operations")));
    hres_free(&r);
    /* ... but not into the caller's own endpoint. */
    {
        char path[128];
        snprintf(path, sizeof path, "/v1/operations/%s", op);
        get(&r, g_a, path, KEY(P_OPERATOR));
        assert_error(&r, 403, "forbidden");
        hres_free(&r);
    }
    /* Nothing changed. */
    assert_op_status(&r, g_a, op, "admitted");
    assert_int_equal(jint(r.json, "owner_version"), 1);
    hres_free(&r);
}

#define EVIDENCE_2 "provider export 2026-11-29 shows no credit for this key"

void caller_sees_the_history_without_evidence(void **state)
{
    char fresh[OG_UUID_LEN + 1], ok[OG_UUID_LEN + 1], op[OG_UUID_LEN + 1],
        path[128];
    xenv x;
    grant g0, g1, g2;
    json_t *h, *e;
    hres r;

    /* Admitted: one entry. */
    issue_grant(g_a, &g0);
    uuid4(fresh);
    assert_admits(g_a, fresh, g0.token);
    assert_op_status(&r, g_b, fresh, "admitted");
    h = history_of(&r, false, __LINE__);
    assert_int_equal(json_array_size(h), 1);
    hres_free(&r);
    /* Another caller still gets 404. */
    snprintf(path, sizeof path, "/v1/operations/%s", fresh);
    get(&r, g_a, path, KEY(P_AGENT2));
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    xenv_start_reconciling(&x, "op-history");
    /* Applied: admitted, then the handler's outcome with the reference. */
    issue_grant_account(x.s, &g1, ACCOUNT);
    uuid4(ok);
    execute(&r, x.s, ok, g1.token, ACCOUNT);
    assert_http(&r, 200);
    hres_free(&r);
    assert_op_status(&r, x.s, ok, "succeeded");
    h = history_of(&r, false, __LINE__);
    assert_int_equal(json_array_size(h), 2);
    e = json_array_get(h, 1);
    assert_str(jstr(e, "kind"), "outcome");
    assert_str(jstr(e, "from"), "admitted");
    assert_str(jstr(e, "to"), "succeeded");
    assert_str(jstr(e, "actor"), "handler");
    assert_str(jstr(e, "provider_reference"), jstr(r.json, "provider_reference"));
    assert_int_equal(jint(e, "owner_version"), 1);
    hres_free(&r);

    /* Resolved by an operator with evidence: the caller sees the entry,
     * never the evidence; the operator sees both. */
    execute_unknown(&x, op, &g2);
    wait_op_status(x.s, op, "needs_reconciliation");
    admin_resolve(&r, x.s, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "no_credit_at_provider", "evidence", EVIDENCE_2));
    assert_http(&r, 200);
    hres_free(&r);
    assert_op_status(&r, x.s, op, "failed");
    assert_resolved_history(&r, false, "failed", "no_credit_at_provider",
                            EVIDENCE_2, NULL, __LINE__);
    assert_str(jstr(r.json, "reason"), "no_credit_at_provider");
    if (strstr(r.body, "provider export"))
        fail_msg("the caller's answer carries the evidence text");
    hres_free(&r);
    admin_get(&r, x.s, KEY(P_OPERATOR), op);
    assert_http(&r, 200);
    assert_resolved_history(&r, true, "failed", "no_credit_at_provider",
                            EVIDENCE_2, NULL, __LINE__);
    hres_free(&r);
    /* The failed resolution leaves the grant spent too. */
    {
        char op2[OG_UUID_LEN + 1];
        uuid4(op2);
        execute(&r, x.s, op2, g2.token, ACCOUNT);
        assert_error(&r, 409, "grant_not_available");
        hres_free(&r);
    }
}

/* The value of a sample of family name whose labels are exactly k1=v1 and
 * (when k2) k2=v2, in any order; -1 when absent. */
static double metric_labeled(const char *text, const char *name,
                             const char *k1, const char *v1, const char *k2,
                             const char *v2)
{
    size_t nl = strlen(name);
    char a[128], b[128];

    snprintf(a, sizeof a, "%s=\"%s\"", k1, v1);
    snprintf(b, sizeof b, "%s=\"%s\"", k2 ? k2 : "", v2 ? v2 : "");
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n'), *close;
        if (strncmp(p, name, nl) == 0 && p[nl] == '{' &&
            (close = strchr(p, '}')) && (!eol || close < eol)) {
            char labels[512];
            size_t ll = (size_t)(close - (p + nl + 1));
            if (ll < sizeof labels) {
                int commas = 0;
                memcpy(labels, p + nl + 1, ll);
                labels[ll] = '\0';
                for (size_t i = 0; i < ll; i++)
                    commas += labels[i] == ',';
                if (strstr(labels, a) && (!k2 || strstr(labels, b)) &&
                    commas == (k2 ? 1 : 0))
                    return strtod(close + 2, NULL);
            }
        }
        p = eol ? eol + 1 : NULL;
    }
    return -1;
}

static char *scrape(const srv *s)
{
    char *text;
    hres r;

    get(&r, s, "/metrics", NULL);
    assert_http(&r, 200);
    text = r.body;
    r.body = NULL;
    hres_free(&r);
    return text;
}

static const char *const g_ages[] = {"lt_1m", "lt_10m", "lt_1h", "lt_1d",
                                     "ge_1d"};

/* The backlog gauges equal want[status][age] (status 0 unknown, 1
 * needs_reconciliation). want is not const: before C23 a pointer to an array
 * of int does not convert to a pointer to an array of const int. */
static void assert_backlog_gauges(const srv *s, int want[2][5], int line)
{
    char *text = scrape(s);

    for (int st = 0; st < 2; st++)
        for (int a = 0; a < 5; a++) {
            const char *sn = st ? "needs_reconciliation" : "unknown";
            double got = metric_labeled(text, "oncegate_operations_backlog",
                                        "status", sn, "age", g_ages[a]);
            if (got != want[st][a]) {
                fprintf(stderr, "%s\n", text);
                free(text);
                fail_msg("line %d: oncegate_operations_backlog{status=%s,"
                         "age=%s}: expected %d, got %g", line, sn, g_ages[a],
                         want[st][a], got);
            }
        }
    free(text);
}

static double outcomes(const char *text, const char *status, const char *src)
{
    return metric_labeled(text, "oncegate_outcomes_total", "status", status,
                          "source", src);
}

void metrics_show_the_backlog_by_age_and_outcomes_by_source(
    void **state)
{
    static const long age_s[4] = {0, 5 * 60, 30 * 60, 2 * 3600};
    int want[2][5] = {{0}};
    char ok[OG_UUID_LEN + 1], nr[OG_UUID_LEN + 1], unk[4][OG_UUID_LEN + 1];
    xenv x;
    grant g0, g1, gu[4];
    char *text;
    hres r;

    xenv_start_reconciling(&x, "op-metrics");
    /* A fresh process: every series there, at 0. */
    text = scrape(x.s);
    for (int st = 0; st < 2; st++)
        for (int a = 0; a < 5; a++)
            if (metric_labeled(text, "oncegate_operations_backlog", "status",
                               st ? "needs_reconciliation" : "unknown", "age",
                               g_ages[a]) != 0)
                fail_msg("backlog gauge %d/%s not 0 at start", st, g_ages[a]);
    {
        static const char *const sts[] = {"succeeded", "failed", "unknown",
                                          "needs_reconciliation"};
        static const char *const srcs[] = {"handler", "recovery", "operator"};
        for (size_t i = 0; i < 4; i++)
            for (size_t j = 0; j < 3; j++)
                if (outcomes(text, sts[i], srcs[j]) != 0) {
                    fprintf(stderr, "%s\n", text);
                    fail_msg("oncegate_outcomes_total{status=%s,source=%s} "
                             "absent or not 0 at start", sts[i], srcs[j]);
                }
    }
    assert_true(metric_value(text, "oncegate_recovery_takeovers_total") == 0);
    free(text);

    /* The handler records a success and an unknown; recovery takes the
     * unknown over and records needs_reconciliation. */
    issue_grant_account(x.s, &g0, ACCOUNT);
    uuid4(ok);
    execute(&r, x.s, ok, g0.token, ACCOUNT);
    assert_http(&r, 200);
    hres_free(&r);
    execute_unknown(&x, nr, &g1);
    wait_op_status(x.s, nr, "needs_reconciliation");
    want[1][0] = 1;
    assert_backlog_gauges(x.s, want, __LINE__);
    text = scrape(x.s);
    assert_true(outcomes(text, "succeeded", "handler") == 1);
    assert_true(outcomes(text, "unknown", "handler") == 1);
    assert_true(outcomes(text, "needs_reconciliation", "recovery") == 1);
    assert_true(outcomes(text, "needs_reconciliation", "handler") == 0);
    assert_true(metric_value(text, "oncegate_recovery_takeovers_total") >= 1);
    free(text);

    /* Ages: the reconciliation case two days old, four unknowns (kept from
     * recovery) fresh, 5 min, 30 min and 2 h old. */
    op_age(&x, nr, 2 * 86400);
    want[1][0] = 0;
    want[1][4] = 1;
    for (int i = 0; i < 4; i++) {
        execute_unknown(&x, unk[i], &gu[i]);
        op_pin_lease(&x, unk[i]);
        if (age_s[i])
            op_age(&x, unk[i], age_s[i]);
        want[0][i] = 1;
    }
    for (int i = 0; i < 4; i++) {
        assert_op_status(&r, x.s, unk[i], "unknown");
        hres_free(&r);
    }
    assert_backlog_gauges(x.s, want, __LINE__);
    text = scrape(x.s);
    assert_true(outcomes(text, "unknown", "handler") == 5);
    free(text);

    /* The operator resolves the old one: counted, and out of the gauges. */
    admin_resolve(&r, x.s, KEY(P_OPERATOR), nr,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "no_credit_at_provider", "evidence", "checked"));
    assert_http(&r, 200);
    hres_free(&r);
    want[1][4] = 0;
    assert_backlog_gauges(x.s, want, __LINE__);
    text = scrape(x.s);
    assert_true(outcomes(text, "failed", "operator") == 1);
    assert_true(outcomes(text, "succeeded", "operator") == 0);
    assert_true(outcomes(text, "failed", "handler") == 0);
    assert_true(outcomes(text, "needs_reconciliation", "recovery") == 1);
    free(text);
}

void bad_operator_queries_are_400_naming_the_parameter(void **state)
{
    static const struct {
        const char *query, *field;
    } bad[] = {
        {"?status=bogus", "status"},
        {"?status=", "status"},
        {"?status=unknown,bogus", "status"},
        {"?status=NeedsReconciliation", "status"},
        {"?status=unknown,,failed", "status"},
        {"?older_than_seconds=-1", "older_than_seconds"},
        {"?older_than_seconds=abc", "older_than_seconds"},
        {"?older_than_seconds=1.5", "older_than_seconds"},
        {"?older_than_seconds=", "older_than_seconds"},
        {"?older_than_seconds=99999999999999999999999", "older_than_seconds"},
        {"?limit=0", "limit"},
        {"?limit=1001", "limit"},
        {"?limit=-5", "limit"},
        {"?limit=ten", "limit"},
        {"?limit=", "limit"},
        {"?limit=10x", "limit"},
        {"?status=unknown&limit=0", "limit"},
        {"?limit=10&older_than_seconds=x", "older_than_seconds"},
    };
    static const char *const good[] = {
        "", "?status=unknown", ("?status=admitted,succeeded,failed,unknown,"
                                "needs_reconciliation"),
        "?limit=1", "?limit=1000",
        "?older_than_seconds=0", "?older_than_seconds=86400&limit=5"};
    hres r;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        admin_list(&r, g_a, bad[i].query);
        if (r.status != 400 || !jstr(r.json, "field") ||
            strcmp(jstr(r.json, "field"), bad[i].field) != 0) {
            dump(bad[i].query, &r, __LINE__);
            fail_msg("GET /v1/admin/operations%s: expected 400 "
                     "malformed_request naming %s", bad[i].query,
                     bad[i].field);
        }
        assert_error(&r, 400, "malformed_request");
        hres_free(&r);
    }
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        admin_list(&r, g_a, good[i]);
        if (r.status != 200)
            fprintf(stderr, "query %s\n", good[i]);
        assert_http(&r, 200);
        assert_true(json_is_array(json_object_get(r.json, "operations")));
        hres_free(&r);
    }
}

/* ===========================================================================
 * A payout attempt resolved by hand (og_payout_operator_resolve through
 * POST /v1/admin/operations/{id}/resolve): the payout and the reservation
 * follow the attempt.
 * ========================================================================= */

#define PX_SEC INT64_C(1000000)

/* A payout of 4250.00 EUR in g_main's store, decided Allowed with its
 * window open, claimed (send window send_window_us, cutoff margin
 * margin_us) and, when start, Started — then escalated to
 * NeedsReconciliation as the reconciler escalates one. Everything through
 * the library, on a store object of the test's own. */
static void payout_escalated(og_store *s, bool start, int64_t send_window_us,
                             int64_t margin_us, char payout[64],
                             char attempt[OG_UUID_LEN + 1])
{
    char u[OG_UUID_LEN + 1], tenant[64], ben[64], dst[64], token[64],
        sql[256];
    og_payout_put_result pr;
    og_payout_decide_req dr;
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result cr;
    og_payout_resolution res;
    og_op_outcome o;
    bool started = false;

    uuid4(u);
    snprintf(tenant, sizeof tenant, "T-%.8s", u);
    snprintf(ben, sizeof ben, "BEN-%.8s", u);
    snprintf(dst, sizeof dst, "DST-%.8s", u);
    snprintf(token, sizeof token, "tok_%.8s", u);
    snprintf(payout, 64, "PAY-%.8s", u);
    {
        og_payout_tenant_settings t;

        memset(&t, 0, sizeof t);
        t.tenant_id = tenant;
        t.daily_limit = 5000000;
        t.currency = "EUR";
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    {
        og_payout_beneficiary_record b = {ben, tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    {
        og_payout_destination_record dd = {dst, ben, token};
        assert_int_equal(og_payout_destination_put(s, &dd, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    /* changed long ago: destination.recently-changed does not decide */
    if (g_pg)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = clock_timestamp() -"
                 " interval '30 days' WHERE destination_id = '%s'", dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = %lld"
                 " WHERE destination_id = '%s'",
                 (long long)(time(NULL) - 30 * 86400) * 1000000, dst);
    store_sql(g_main, sql);
    {
        og_payout_draft_req dq = {payout,
                                  {tenant, ben, dst, 1, "4250", "EUR", NULL},
                                  "clerk-22"};
        assert_int_equal(og_payout_draft(s, &dq, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    memset(&dr, 0, sizeof dr);
    dr.payout_id = payout;
    dr.requester_id = "clerk-22";
    dr.requester_role = "accounts-payable";
    dr.requester_approval_limit = 1000000;
    dr.not_before_us = (int64_t)time(NULL) * PX_SEC - 2 * PX_SEC;
    dr.expires_at_us = dr.not_before_us + 1800 * PX_SEC;
    dr.correlation_id = "COR-op";
    dr.audience = OG_PAYOUT_AUDIENCE;
    assert_int_equal(og_payout_decide(s, &dr, &d), 0);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    memset(&c, 0, sizeof c);
    c.grant_id = d.grant_id;
    c.worker_id = "svc-payout-worker";
    c.audience = OG_PAYOUT_AUDIENCE;
    c.relied = d.verdict.evaluated;
    c.relied.payout = d.executable_payout_version;
    c.policy_version = d.verdict.policy_version;
    c.send_window_us = send_window_us;
    c.lease_us = 60 * PX_SEC;
    c.final_absence_margin_us = margin_us;
    assert_int_equal(og_payout_claim(s, &c, &cr), 0);
    assert_int_equal(cr.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    snprintf(attempt, OG_UUID_LEN + 1, "%s", cr.attempt.operation_id);
    if (start) {
        assert_int_equal(og_op_start(s, attempt, 1, "svc-payout-worker",
                                     &started),
                         0);
        assert_true(started);
    }
    memset(&o, 0, sizeof o);
    o.status = OG_OP_NEEDS_RECONCILIATION;
    o.reason = "escalation_deadline";
    o.actor = "payout-reconciler";
    assert_int_equal(
        og_payout_resolve(s, attempt,
                          OG_OP_BIT(start ? OG_OP_STARTED : OG_OP_ADMITTED),
                          1, &o, &res),
        0);
    assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(res.state, OG_PAYOUT_STATE_UNKNOWN);
}

/* The payout as the store holds it. */
static og_payout_view payout_now(og_store *s, const char *id)
{
    og_payout_view v;

    assert_int_equal(og_payout_get(s, id, &v), 1);
    return v;
}

/* POST /v1/admin/payouts/{id}/reauthorize as the operator at version. */
static void reauthorize(hres *r, const char *id, json_int_t version)
{
    char path[160], release[40];

    snprintf(path, sizeof path, "/v1/admin/payouts/%s/reauthorize", id);
    og_time_format_rfc3339((int64_t)time(NULL) * PX_SEC, release,
                           sizeof release);
    post(r, g_a, path, KEY(P_OPERATOR),
         json_pack("{s:I, s:s}", "payout_version", version, "release_at",
                   release));
}

/* Finance on a payout Approved again after NotApplied (its attempt att):
 * re-authorization under its version precondition, once; a hold of the
 * fresh grant, once; and the payout read back with both grants and the
 * attempt with its history. */
static void payout_reauthorize_then_hold(og_store *s, const char *id,
                                         const char *att)
{
    og_payout_view v = payout_now(s, id);
    char grant_id[OG_ID_MAX + 1], path[160], job[OG_UUID_LEN + 1],
        key[OG_UUID_LEN + 1];
    json_t *a;
    hres r;

    reauthorize(&r, id, v.version - 1);
    assert_error(&r, 409, "payout_version_mismatch");
    hres_free(&r);
    reauthorize(&r, id, v.version);
    if (r.status != 200 || !json_is_true(json_object_get(r.json, "issued")))
        dump("reauthorize", &r, __LINE__);
    assert_str(jstr(r.json, "outcome"), "Allowed");
    assert_true(json_is_true(json_object_get(r.json, "issued")));
    snprintf(grant_id, sizeof grant_id, "%s", jstr(r.json, "grant_id"));
    snprintf(job, sizeof job, "%s", jstr(r.json, "job_id"));
    hres_free(&r);
    /* Retried: the version moved — no second decision's grant or job. */
    reauthorize(&r, id, v.version);
    assert_error(&r, 409, "payout_version_mismatch");
    hres_free(&r);
    assert_int_equal(payout_now(s, id).version, v.version + 1);

    /* The job resubmitted under an idempotency key, which becomes the new
     * job's id: retried, nothing is written twice. */
    uuid4(key);
    snprintf(path, sizeof path, "/v1/admin/payout-jobs/%s/resubmit", job);
    post(&r, g_a, path, KEY(P_OPERATOR),
         json_pack("{s:s}", "idempotency_key", key));
    assert_http(&r, 201);
    assert_str(jstr(r.json, "job_id"), key);
    assert_str(jstr(r.json, "from"), job);
    hres_free(&r);
    post(&r, g_a, path, KEY(P_OPERATOR),
         json_pack("{s:s}", "idempotency_key", key));
    assert_error(&r, 409, "idempotency_key_used");
    assert_str(jstr(r.json, "job_id"), key);
    hres_free(&r);
    post(&r, g_a, path, KEY(P_OPERATOR),
         json_pack("{s:s}", "idempotency_key", "not-a-uuid"));
    assert_http(&r, 400);
    hres_free(&r);
    uuid4(key);
    snprintf(path, sizeof path, "/v1/admin/payout-jobs/%s/resubmit", key);
    post(&r, g_a, path, KEY(P_OPERATOR),
         json_pack("{s:s}", "idempotency_key", job));
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    /* The hold revokes the unused grant; retried, it changes nothing. */
    snprintf(path, sizeof path, "/v1/admin/payout-grants/%s/hold", grant_id);
    post(&r, g_a, path, KEY(P_OPERATOR), NULL);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "outcome"), "revoked");
    hres_free(&r);
    post(&r, g_a, path, KEY(P_OPERATOR), NULL);
    assert_error(&r, 409, "already_used_or_revoked");
    hres_free(&r);
    post(&r, g_a, "/v1/admin/payout-grants/NO-SUCH-GRANT/hold",
         KEY(P_OPERATOR), NULL);
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    /* Read back: two grants (the first consumed by att, the second
     * revoked), the attempt with its history. */
    snprintf(path, sizeof path, "/v1/admin/payouts/%s", id);
    get(&r, g_a, path, KEY(P_OPERATOR));
    assert_http(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "grants")), 2);
    assert_str(jstr(json_array_get(json_object_get(r.json, "grants"), 1),
                    "state"),
               "Revoked");
    a = json_array_get(json_object_get(r.json, "attempts"), 0);
    assert_str(jstr(a, "operation_id"), att);
    assert_true(json_array_size(json_object_get(a, "history")) >= 1);
    hres_free(&r);
}

void operator_resolves_a_payout_attempt_and_its_payout_follows(void **state)
{
    char paid[64], att[OG_UUID_LEN + 1], back[64], att2[OG_UUID_LEN + 1],
        op[OG_UUID_LEN + 1];
    og_store *s = NULL;
    json_t *p;
    grant g;
    hres r;

    (void)state;
    assert_int_equal(og_store_open(g_main->direct_url, NULL, &s), 0);

    /* Started, then escalated: NotApplied before its cutoff is refused
     * (the request may still take effect), and changes nothing. */
    payout_escalated(s, true, 300 * PX_SEC, 5 * PX_SEC, paid, att);
    admin_resolve(&r, g_a, KEY(P_OPERATOR), att,
                  json_pack("{s:s, s:s, s:s}", "status", "not_applied",
                            "reason", "provider_says_absent", "evidence",
                            "provider support ticket 77"));
    assert_error(&r, 409, "not_applied_before_cutoff");
    assert_true(json_is_false(json_object_get(r.json, "resolved")));
    hres_free(&r);
    assert_int_equal(payout_now(s, paid).state, OG_PAYOUT_STATE_UNKNOWN);

    /* Succeeded by hand: the payout is Paid, the reservation paid. */
    admin_resolve(&r, g_a, KEY(P_OPERATOR), att,
                  json_pack("{s:s, s:s, s:s, s:s}", "status", "succeeded",
                            "reason", "confirmed_by_provider_support",
                            "evidence", "statement line 2026-03-01 #4411",
                            "provider_reference", "po_manual_4411"));
    if (r.status != 200)
        dump("resolve", &r, __LINE__);
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "resolved")));
    p = json_object_get(r.json, "payout");
    assert_str(jstr(p, "payout_id"), paid);
    assert_str(jstr(p, "state"), "Paid");
    assert_str(jstr(p, "reservation"), "paid");
    assert_str(jstr(json_object_get(r.json, "operation"), "status"),
               "succeeded");
    hres_free(&r);
    assert_int_equal(payout_now(s, paid).state, OG_PAYOUT_STATE_PAID);
    assert_string_equal(payout_now(s, paid).active_attempt, "");
    /* Once: a second resolution is 409 and changes nothing. */
    admin_resolve(&r, g_a, KEY(P_OPERATOR), att,
                  json_pack("{s:s, s:s, s:s}", "status", "failed", "reason",
                            "x", "evidence", "y"));
    assert_error(&r, 409, "not_needs_reconciliation");
    hres_free(&r);
    assert_int_equal(payout_now(s, paid).state, OG_PAYOUT_STATE_PAID);

    /* Never started, its send window and cutoff past: NotApplied by hand
     * makes the payout Approved again (awaiting a fresh decision) and
     * releases the reservation. */
    payout_escalated(s, false, 1000, 0, back, att2);
    usleep(20 * 1000);
    admin_resolve(&r, g_a, KEY(P_OPERATOR), att2,
                  json_pack("{s:s, s:s, s:s}", "status", "not_applied",
                            "reason", "never_sent", "evidence",
                            "worker log: no start"));
    if (r.status != 200)
        dump("resolve", &r, __LINE__);
    assert_http(&r, 200);
    p = json_object_get(r.json, "payout");
    assert_str(jstr(p, "state"), "Approved");
    assert_str(jstr(p, "reservation"), "released");
    assert_str(jstr(json_object_get(r.json, "operation"), "status"),
               "not_applied");
    hres_free(&r);
    assert_int_equal(payout_now(s, back).state, OG_PAYOUT_STATE_APPROVED);
    payout_reauthorize_then_hold(s, back, att2);

    /* A credit is never NotApplied: 400, and it stays as it was. */
    issue_grant(g_a, &g);
    uuid4(op);
    assert_admits(g_a, op, g.token);
    admin_resolve(&r, g_a, KEY(P_OPERATOR), op,
                  json_pack("{s:s, s:s, s:s}", "status", "not_applied",
                            "reason", "x", "evidence", "y"));
    assert_error(&r, 400, "malformed_request");
    assert_str(jstr(r.json, "field"), "status");
    hres_free(&r);
    og_store_free(s);
}
