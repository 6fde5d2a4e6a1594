/*
 * authorization.c — every endpoint refuses a missing or unknown bearer key
 * (401) and a key without the endpoint's role (403), and another caller's
 * operation reads as missing (404), and the refused requests change
 * nothing (docs/http.md).
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Authorization
 * ========================================================================= */
typedef struct route {
    const char *method;
    const char *path;   /* %s: an operation id or a family */
    unsigned roles;
} route;

static const route g_routes[] = {
    {"POST", "/v1/grants", R_ISSUER},
    {"POST", "/v1/tickets", R_ISSUER},
    {"POST", "/v1/operations", R_AGENT},
    {"GET", "/v1/operations/%s", R_AGENT},
    {"POST", "/v1/redemptions", R_AGENT},
    {"POST", "/v1/tickets/rotate", R_AGENT},
    {"POST", "/v1/grants/consume", R_ENFORCER},
    {"POST", "/v1/grants/revoke", R_REVOKER},
    {"POST", "/v1/families/%s/revoke", R_REVOKER},
    /* payouts: context administration */
    {"POST", "/v1/payout-admin/tenants/%s", R_PAYOUT_ADMIN},
    {"POST", "/v1/payout-admin/beneficiaries/%s", R_PAYOUT_ADMIN},
    {"POST", "/v1/payout-admin/destinations/%s", R_PAYOUT_ADMIN},
    {"POST", "/v1/payout-admin/payouts/%s", R_PAYOUT_ADMIN},
    {"POST", "/v1/payout-admin/payouts/%s/cancel", R_PAYOUT_ADMIN},
    /* payouts: the clerk's submission */
    {"POST", "/v1/payouts/%s/submit", R_CLERK},
    /* payouts: an approver settles an acknowledgment or an escalation */
    {"POST", "/v1/payouts/%s/approve", R_APPROVER},
    /* payouts: reading, for operators */
    {"GET", "/v1/admin/payouts/%s", R_OPERATOR},
    {"GET", "/v1/admin/payout-backlog", R_OPERATOR},
    /* payouts: finance, for operators */
    {"POST", "/v1/admin/payout-grants/%s/hold", R_OPERATOR},
    {"POST", "/v1/admin/payouts/%s/reauthorize", R_OPERATOR},
    {"POST", "/v1/admin/payout-jobs/%s/resubmit", R_OPERATOR},
};

#define N_ROUTES (sizeof g_routes / sizeof g_routes[0])

/* Live state the wrongly authorized requests aim at: a grant, a ticket and
 * its family. Afterwards all three must be untouched. */
typedef struct auth_fixture {
    grant g;
    ticket t;
    char op[OG_UUID_LEN + 1];
    char path[N_ROUTES][256];
    char *body[N_ROUTES];
} auth_fixture;

static void auth_fixture_new(auth_fixture *f)
{
    memset(f, 0, sizeof *f);
    issue_grant(g_a, &f->g);
    ticket_new(g_a, &f->t);
    uuid4(f->op);
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *rt = &g_routes[i];
        json_t *b = NULL;
        if (strstr(rt->path, "operations/%s"))
            snprintf(f->path[i], 256, "/v1/operations/%s", f->op);
        else if (strstr(rt->path, "families/%s"))
            snprintf(f->path[i], 256, "/v1/families/%s/revoke", f->t.family);
        else if (strstr(rt->path, "/v1/payout") ||
                 (strstr(rt->path, "/v1/admin/payout") &&
                  strstr(rt->path, "%s"))) {
            /* the pattern's %s is a record id */
            const char *pc = strstr(rt->path, "%s");
            snprintf(f->path[i], 256, "%.*sAUTH-CHECK-1%s",
                     (int)(pc - rt->path), rt->path, pc + 2);
        }
        else
            snprintf(f->path[i], 256, "%s", rt->path);
        if (strcmp(rt->path, "/v1/grants") == 0)
            b = grant_request("agent-1", NULL, 900);
        else if (strcmp(rt->path, "/v1/tickets") == 0)
            b = json_object();
        else if (strcmp(rt->path, "/v1/operations") == 0)
            b = admit_body(f->op, f->g.token);
        else if (strcmp(rt->path, "/v1/tickets/rotate") == 0)
            b = json_pack("{s:s}", "ticket", f->t.ticket);
        else if (strcmp(rt->path, "/v1/redemptions") == 0)
            b = json_pack("{s:s, s:s}", "idempotency_key", f->op, "code",
                          "ac_route_check_0123456789");
        else if (strcmp(rt->path, "/v1/grants/consume") == 0 ||
                 strcmp(rt->path, "/v1/grants/revoke") == 0)
            b = json_pack("{s:s}", "token", f->g.token);
        else if (strstr(rt->path, "/v1/payout-admin/tenants/"))
            b = json_pack("{s:i, s:s, s:i, s:b}", "expected_version", 0,
                          "currency", "EUR", "daily_limit_minor", 100,
                          "payouts_suspended", 0);
        else if (strstr(rt->path, "/v1/payout") ||
                 (strstr(rt->path, "/v1/admin/payout") &&
                  strcmp(rt->method, "POST") == 0))
            b = json_object();
        else if (strstr(rt->path, "families"))
            b = json_pack("{s:s}", "issuer", ISSUER);
        f->body[i] = b ? json_dumps(b, JSON_COMPACT) : NULL;
        json_decref(b);
    }
}

/* Nothing the refused requests carried took effect: the grant still admits
 * the very operation they named, the ticket still rotates (so its family
 * was not revoked). */
static void auth_fixture_check_untouched(auth_fixture *f)
{
    hres r;

    assert_admits(g_a, f->op, f->g.token);
    rotate(&r, g_a, f->t.ticket);
    assert_http(&r, 200);
    hres_free(&r);
    for (size_t i = 0; i < N_ROUTES; i++)
        free(f->body[i]);
}

static void auth_request(hres *r, const auth_fixture *f, size_t i,
                         const char *key, const char *auth)
{
    hreq q = {g_routes[i].method, g_a->base, f->path[i], key, auth,
              f->body[i] ? "application/json" : NULL, f->body[i],
              f->body[i] ? strlen(f->body[i]) : 0, false, NULL};
    http_do(&q, r);
}

void every_endpoint_without_a_known_bearer_key_is_401(void **state)
{
    char unknown[API_KEY_LEN], basic[128], www[256];
    auth_fixture f;

    api_key_new(unknown);
    secret_add(unknown);
    snprintf(basic, sizeof basic, "Basic %s", KEY(P_AGENT));
    auth_fixture_new(&f);
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *auths[3] = {NULL, NULL, basic};
        const char *keys[3] = {NULL, unknown, NULL};
        for (int v = 0; v < 3; v++) {
            hres r;
            auth_request(&r, &f, i, keys[v], auths[v]);
            if (r.status != 401)
                fprintf(stderr, "%s %s variant %d\n", g_routes[i].method,
                        f.path[i], v);
            assert_error(&r, 401, "unauthorized");
            assert_true(hdr_value(&r, "WWW-Authenticate", www, sizeof www));
            assert_true(strncasecmp(www, "Bearer", 6) == 0);
            hres_free(&r);
        }
    }
    auth_fixture_check_untouched(&f);
}

void every_endpoint_with_a_key_lacking_its_role_is_403(void **state)
{
    auth_fixture f;

    auth_fixture_new(&f);
    for (size_t i = 0; i < N_ROUTES; i++)
        for (int p = 0; p < P_COUNT; p++) {
            hres r;
            if (g_p[p].bit & g_routes[i].roles)
                continue;
            auth_request(&r, &f, i, KEY(p), NULL);
            if (r.status != 403)
                fprintf(stderr, "%s %s as %s\n", g_routes[i].method, f.path[i],
                        g_p[p].id);
            assert_error(&r, 403, "forbidden");
            hres_free(&r);
        }
    auth_fixture_check_untouched(&f);
}

void another_callers_operation_is_404_like_a_missing_one(void **state)
{
    char op[OG_UUID_LEN + 1], missing[OG_UUID_LEN + 1], path[128];
    grant g;
    hres mine, theirs, none;

    issue_grant(g_a, &g);
    uuid4(op);
    uuid4(missing);
    assert_admits(g_a, op, g.token);

    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(&mine, g_b, path, KEY(P_AGENT));
    assert_http(&mine, 200);
    get(&theirs, g_b, path, KEY(P_AGENT2));
    assert_error(&theirs, 404, "not_found");
    snprintf(path, sizeof path, "/v1/operations/%s", missing);
    get(&none, g_b, path, KEY(P_AGENT2));
    assert_error(&none, 404, "not_found");
    /* Indistinguishable: the same body apart from nothing. */
    assert_str(jstr(theirs.json, "message"), jstr(none.json, "message"));
    assert_int_equal(json_object_size(theirs.json), json_object_size(none.json));
    hres_free(&mine);
    hres_free(&theirs);
    hres_free(&none);

    /* Another caller presenting the grant: it names agent-1. */
    {
        hres r;
        char op2[OG_UUID_LEN + 1];
        uuid4(op2);
        admit(&r, g_a, KEY(P_AGENT2), op2, g.token);
        assert_error(&r, 403, "grant_not_valid");
        assert_str(jstr(r.json, "reason"), "grant.subject_mismatch");
        hres_free(&r);
    }
}
