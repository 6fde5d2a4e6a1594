/*
 * redeem.c — POST /v1/redemptions over real HTTP: real `oncegate serve`
 * processes on one store (SQLite or PostgreSQL), two instances where a
 * claim is about concurrency, against a real oncegate-sandbox whose
 * /oauth/token lets each code be exchanged once. The claims of
 * docs/http.md ("POST /v1/redemptions") and docs/design.md ("Redeeming an
 * external single-use token") that a client and the sandbox's counters can
 * observe:
 *   - twenty concurrent redemptions of one code under one key, over two
 *     instances, make exactly one exchange and all get the same result;
 *   - a duplicate arriving while the winner is still inside the exchange
 *     waits and catches up;
 *   - when the winner dies between the exchange and persisting, the others
 *     end redemption_lost after the bound, and no second exchange happens;
 *   - another key presenting a spent code is refused code_spent;
 *   - the stored result is not readable without the key, and another key
 *     does not open it;
 *   - a result the store cannot persist is still answered (persisted:
 *     false), and the duplicates then end redemption_lost.
 *
 * These tests use serve_test's harness (harness.h) and run as their own
 * group, `serve_test BACKEND redeem` (main.c lists them).
 */
#include "harness.h"
#include "cases.h"

/* Timings of every redemption site: the exchange's own timeout
 * (timings.provider_timeout_ms), the store's, and the catch-up bound, which
 * R2 wants above their sum. Generous: the full suite loads the machine. */
#define R_PROVIDER_MS 8000
#define R_STORE_MS 8000
#define R_CATCH_UP_MS 17000
#define R_RACERS 20

/* A store, a sandbox, and instances A and B on both, with redemption on. */
typedef struct renv {
    xenv x;               /* x.s is A */
    srv *b;
    char key_file[PATHLEN];
} renv;

/* dir/name into out (PATHLEN bytes); the test fails when it does not fit. */
static void path_in(char out[PATHLEN], const char *dir, const char *name)
{
    if (snprintf(out, PATHLEN, "%s/%s", dir, name) >= PATHLEN)
        fail_msg("path too long: %s/%s", dir, name);
}

/* Writes 32 random bytes as hex to path, mode `mode`. */
static void redeem_key_write(const char *path, mode_t mode)
{
    unsigned char k[32];
    char hex[65];

    randombytes_buf(k, sizeof k);
    sodium_bin2hex(hex, sizeof hex, k, sizeof k);
    assert_int_equal(write_file(path, hex), 0);
    assert_int_equal(chmod(path, mode), 0);
    sodium_memzero(k, sizeof k);
}

/* renv without starting the instances: the configuration can still be
 * changed (then site_write). */
static void renv_prepare(renv *e, const char *name)
{
    memset(e, 0, sizeof *e);
    xenv_prepare(&e->x, name, false, R_STORE_MS, R_PROVIDER_MS, false);
    path_in(e->key_file, e->x.st->dir, "redemption.key");
    redeem_key_write(e->key_file, 0600);
    json_object_set_new(e->x.st->conf, "redemption",
                        json_pack("{s:s, s:i}", "key_file", e->key_file,
                                  "catch_up_timeout_ms", R_CATCH_UP_MS));
    assert_int_equal(site_write(e->x.st), 0);
}

static void renv_start(renv *e, const char *name)
{
    renv_prepare(e, name);
    assert_int_equal(srv_start(e->x.s), 0);
    e->b = site_server(e->x.st);
    assert_int_equal(srv_start(e->b), 0);
}

/* POST /_control/codes at the sandbox: a fresh code (a secret). */
static void mint_code(const xenv *x, char out[64])
{
    hres r;

    sbx_http(&r, x->sbx, "POST", "/_control/codes", sbx_key(x), NULL);
    assert_http(&r, 200);
    assert_non_null(jstr(r.json, "code"));
    snprintf(out, 64, "%s", jstr(r.json, "code"));
    secret_add(out);
    hres_free(&r);
}

/* The result's tokens are credentials: none may reach a log. */
static void redeem_secrets(const hres *r)
{
    json_t *res = json_object_get(r->json, "result");

    secret_add(jstr(res, "access_token"));
    secret_add(jstr(res, "refresh_token"));
}

static char *redeem_body(const char *key, const char *code)
{
    json_t *b = json_pack("{s:s, s:s}", "idempotency_key", key, "code", code);
    char *t = json_dumps(b, JSON_COMPACT);

    json_decref(b);
    assert_non_null(t);
    return t;
}

/* POST /v1/redemptions on s as principal p; *ms gets the time it took. */
static void redeem_as(hres *r, const srv *s, int p, const char *key,
                      const char *code, int64_t *ms)
{
    int64_t t0 = t_now_ms();

    post(r, s, "/v1/redemptions", KEY(p),
         json_pack("{s:s, s:s}", "idempotency_key", key, "code", code));
    if (ms)
        *ms = t_now_ms() - t0;
    redeem_secrets(r);
}

static void redeem(hres *r, const srv *s, const char *key, const char *code,
                   int64_t *ms)
{
    redeem_as(r, s, P_AGENT, key, code, ms);
}

/* A 200 with outcome and the documented members; the result in *result (a
 * new reference, may be NULL). */
static void assert_redeemed(const hres *r, const char *key,
                            const char *outcome, json_t **result, int line)
{
    json_t *res = json_object_get(r->json, "result");

    if (r->status != 200 || !jstr(r->json, "outcome") ||
        strcmp(jstr(r->json, "outcome"), outcome) != 0 ||
        !json_is_true(json_object_get(r->json, "persisted")) ||
        !jstr(r->json, "idempotency_key") ||
        strcmp(jstr(r->json, "idempotency_key"), key) != 0 ||
        !jstr(res, "access_token") || !jstr(res, "token_type") ||
        json_object_size(r->json) != 4) {
        dump("redemption", r, line);
        fail_msg("line %d: expected 200 %s with the token response", line,
                 outcome);
    }
    if (result)
        *result = json_incref(res);
}

/* True when needle occurs in the n bytes at hay. */
static bool bytes_contain(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);

    for (size_t i = 0; hay && i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            return true;
    return false;
}

/* A redemption in the background. */
typedef struct bg_redeem {
    const srv *s;
    const char *key, *code;
    hres r;
    int64_t ms;
} bg_redeem;

static void *bg_redeem_main(void *arg)
{
    bg_redeem *b = arg;

    redeem(&b->r, b->s, b->key, b->code, &b->ms);
    return NULL;
}

/* ===========================================================================
 * Concurrency: one exchange, one result
 * ========================================================================= */

typedef struct redeem_arg {
    const char *key, *code;
} redeem_arg;

static char *redeem_body_for(racer *me, const void *arg)
{
    const redeem_arg *a = arg;

    (void)me;
    return redeem_body(a->key, a->code);
}

void twenty_concurrent_redemptions_over_two_instances_exchange_once_and_agree(void **state)
{
    racer rs[R_RACERS];
    char code[64], key[OG_UUID_LEN + 1];
    redeem_arg arg = {key, code};
    json_t *first = NULL;
    int redeemed = 0;
    renv e;

    renv_start(&e, "redeem-race");
    mint_code(&e.x, code);
    uuid4(key);
    race(rs, R_RACERS, e.x.s, e.b, "/v1/redemptions", KEY(P_AGENT),
         redeem_body_for, &arg);
    for (int i = 0; i < R_RACERS; i++) {
        const hres *r = &rs[i].r;
        const char *o = jstr(r->json, "outcome");
        json_t *res = NULL;

        redeem_secrets(r);
        if (r->status != 200)
            race_report("redemption", 0, rs, R_RACERS);
        /* Every caller: 200, persisted, one of the three ways to a result. */
        assert_redeemed(r, key, o ? o : "(none)", &res, __LINE__);
        assert_true(strcmp(o, "redeemed") == 0 ||
                    strcmp(o, "caught_up") == 0 ||
                    strcmp(o, "recovered") == 0);
        redeemed += strcmp(o, "redeemed") == 0;
        /* ... and the same result, byte for byte. */
        if (!first)
            first = json_incref(res);
        else if (!json_equal(first, res))
            fail_msg("racer %d got another result: %s", i, r->body);
        json_decref(res);
    }
    assert_int_equal(redeemed, 1);
    /* Exactly one exchange reached the code; the rest met invalid_grant. */
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    assert_int_equal(sbx_stat(&e.x, "token_requests"),
                     1 + sbx_stat(&e.x, "invalid_grants"));
    json_decref(first);
    race_free(rs, R_RACERS);
}

void duplicate_during_a_slow_exchange_waits_and_catches_up(void **state)
{
    char code[64], key[OG_UUID_LEN + 1];
    bg_redeem win;
    json_t *a, *b;
    pthread_t th;
    int64_t ms;
    hres dup;
    renv e;

    renv_start(&e, "redeem-slow");
    mint_code(&e.x, code);
    uuid4(key);
    /* The winner's exchange spends the code, then the answer takes 3 s. */
    sbx_arm(&e.x, "delay_after_effect", 3000);
    win = (bg_redeem){e.x.s, key, code, {0}, 0};
    assert_int_equal(pthread_create(&th, NULL, bg_redeem_main, &win), 0);
    sbx_wait_stat(&e.x, "code_exchanges", 1); /* in flight, code spent */
    redeem(&dup, e.b, key, code, &ms);
    pthread_join(th, NULL);
    assert_redeemed(&win.r, key, "redeemed", &a, __LINE__);
    /* The duplicate met invalid_grant, waited, and caught up. */
    assert_redeemed(&dup, key, "caught_up", &b, __LINE__);
    assert_true(json_equal(a, b));
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    assert_sbx_stat(&e.x, "invalid_grants", 1);
    assert_true(ms < R_CATCH_UP_MS); /* it ended on the result, not the bound */
    json_decref(a);
    json_decref(b);
    hres_free(&win.r);
    hres_free(&dup);
}

/* ===========================================================================
 * The window the pattern does not cover
 * ========================================================================= */

void winner_killed_after_the_exchange_leaves_the_others_redemption_lost_and_never_exchanges_twice(void **state)
{
    enum { OTHERS = 3 };
    char code[64], key[OG_UUID_LEN + 1];
    bg_redeem win, others[OTHERS];
    pthread_t th, oth[OTHERS];
    hres again;
    renv e;

    renv_start(&e, "redeem-killed");
    mint_code(&e.x, code);
    uuid4(key);
    /* A's exchange spends the code and is held inside the call... */
    sbx_arm(&e.x, "delay_after_effect", 10000);
    win = (bg_redeem){e.x.s, key, code, {0}, 0};
    assert_int_equal(pthread_create(&th, NULL, bg_redeem_main, &win), 0);
    sbx_wait_stat(&e.x, "code_exchanges", 1);
    /* ... when A dies: after the exchange, before persisting. */
    assert_int_equal(srv_stop(e.x.s, SIGKILL, EXIT_MS), 128 + SIGKILL);
    pthread_join(th, NULL);
    assert_int_equal(win.r.status, 0); /* no answer: the process is gone */
    /* The others, on B: the code is spent, no result ever appears. */
    for (int i = 0; i < OTHERS; i++) {
        others[i] = (bg_redeem){e.b, key, code, {0}, 0};
        assert_int_equal(
            pthread_create(&oth[i], NULL, bg_redeem_main, &others[i]), 0);
    }
    for (int i = 0; i < OTHERS; i++) {
        pthread_join(oth[i], NULL);
        assert_error(&others[i].r, 409, "redemption_lost");
        assert_null(json_object_get(others[i].r.json, "result"));
        /* It gave up only at the bound (the loop ends on a look). */
        assert_true(others[i].ms >= R_CATCH_UP_MS - 500);
        hres_free(&others[i].r);
    }
    /* A later retry of the same key ends the same way: never a second
     * exchange that succeeds. */
    redeem(&again, e.b, key, code, NULL);
    assert_error(&again, 409, "redemption_lost");
    hres_free(&again);
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    assert_sbx_stat(&e.x, "invalid_grants", OTHERS + 1);
    assert_sbx_stat(&e.x, "token_requests", OTHERS + 2);
    hres_free(&win.r);
}

/* A duplicate catching up (the winner is held inside its exchange on A)
 * when B begins to drain: it stops waiting at its next look and is
 * answered 503 retry_later — undecided, never redemption_lost — well
 * before the catch-up bound, and B exits 0 without its stop watchdog
 * firing. The winner then persists, and the key recovers its result on A:
 * one exchange in all. */
void redemption_catching_up_when_the_drain_begins_is_503_and_the_server_exits_0(void **state)
{
    char code[64], key[OG_UUID_LEN + 1];
    bg_redeem win, dup;
    pthread_t th, dth;
    json_t *a, *b;
    char *log;
    hres r;
    renv e;

    renv_start(&e, "redeem-drain");
    mint_code(&e.x, code);
    uuid4(key);
    sbx_arm(&e.x, "delay_after_effect", R_PROVIDER_MS - 3000);
    win = (bg_redeem){e.x.s, key, code, {0}, 0};
    assert_int_equal(pthread_create(&th, NULL, bg_redeem_main, &win), 0);
    sbx_wait_stat(&e.x, "code_exchanges", 1);
    dup = (bg_redeem){e.b, key, code, {0}, 0};
    assert_int_equal(pthread_create(&dth, NULL, bg_redeem_main, &dup), 0);
    sbx_wait_stat(&e.x, "invalid_grants", 1); /* B is catching up */
    t_sleep_ms(300);
    assert_int_equal(srv_stop(e.b, SIGTERM, EXIT_MS), 0);
    pthread_join(dth, NULL);
    assert_error(&dup.r, 503, "retry_later");
    assert_null(json_object_get(dup.r.json, "result"));
    assert_true(dup.ms < R_CATCH_UP_MS / 2);
    log = t_slurp(e.b->log_path, NULL);
    assert_non_null(log);
    assert_null(strstr(log, "stop_stuck"));
    free(log);
    hres_free(&dup.r);

    pthread_join(th, NULL);
    assert_redeemed(&win.r, key, "redeemed", &a, __LINE__);
    hres_free(&win.r);
    redeem(&r, e.x.s, key, code, NULL);
    assert_redeemed(&r, key, "recovered", &b, __LINE__);
    assert_true(json_equal(a, b));
    hres_free(&r);
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    json_decref(a);
    json_decref(b);
}

/* The store takes no writes: the winner's result cannot be persisted. It
 * is still answered, once, to the caller that holds it (persisted:
 * false); a duplicate of the key then ends redemption_lost. */
void result_the_store_cannot_persist_is_still_answered_and_duplicates_end_lost(void **state)
{
    char code[64], key[OG_UUID_LEN + 1];
    hres r, dup;
    renv e;

    renv_start(&e, "redeem-unpersisted");
    mint_code(&e.x, code);
    uuid4(key);
    /* Writes to redemptions wait (and time out); reads go on. */
    if (!g_pg) {
        assert_int_equal(store_lock(e.x.st), 0);
    } else {
        PGresult *q;

        g_lock.pg = PQconnectdb(e.x.st->direct_url);
        assert_int_equal(PQstatus(g_lock.pg), CONNECTION_OK);
        q = PQexec(g_lock.pg, "BEGIN; LOCK TABLE redemptions IN EXCLUSIVE MODE");
        assert_int_equal(PQresultStatus(q), PGRES_COMMAND_OK);
        PQclear(q);
    }
    redeem(&r, e.x.s, key, code, NULL);
    store_unlock();
    if (r.status != 200 || !json_is_false(json_object_get(r.json, "persisted")) ||
        !jstr(json_object_get(r.json, "result"), "access_token")) {
        dump("unpersisted", &r, __LINE__);
        fail_msg("expected 200 with persisted false and the result");
    }
    assert_str(jstr(r.json, "outcome"), "redeemed");
    assert_true(log_wait_for(e.x.s, "\"event\":\"redemption_not_persisted\"",
                             5000));
    redeem(&dup, e.b, key, code, NULL);
    assert_error(&dup, 409, "redemption_lost");
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    hres_free(&r);
    hres_free(&dup);
}

/* ===========================================================================
 * Refusals
 * ========================================================================= */

void spent_code_under_another_key_is_refused_as_code_spent(void **state)
{
    char code[64], k1[OG_UUID_LEN + 1], k2[OG_UUID_LEN + 1],
        k3[OG_UUID_LEN + 1];
    json_t *a, *b;
    int64_t ms;
    hres r;
    renv e;

    renv_start(&e, "redeem-spent");
    mint_code(&e.x, code);
    uuid4(k1);
    uuid4(k2);
    uuid4(k3);
    redeem(&r, e.x.s, k1, code, NULL);
    assert_redeemed(&r, k1, "redeemed", &a, __LINE__);
    hres_free(&r);
    /* Another key of the same caller, on the other instance: the provider
     * says invalid_grant, and the code's result is under k1 — refused at
     * once, without waiting for the bound and without that result. */
    redeem(&r, e.b, k2, code, &ms);
    assert_error(&r, 409, "code_spent");
    assert_null(json_object_get(r.json, "result"));
    assert_false(bytes_contain(r.body, r.len, jstr(a, "access_token")));
    assert_true(ms < R_CATCH_UP_MS / 2);
    hres_free(&r);
    /* Another caller presenting the code: the same refusal. */
    redeem_as(&r, e.b, P_AGENT2, k3, code, NULL);
    assert_error(&r, 409, "code_spent");
    hres_free(&r);
    /* The first key still recovers its result; agent-2 has no k1. */
    redeem(&r, e.b, k1, code, NULL);
    assert_redeemed(&r, k1, "recovered", &b, __LINE__);
    assert_true(json_equal(a, b));
    hres_free(&r);
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    assert_sbx_stat(&e.x, "invalid_grants", 2);
    /* k1 with another code is a reused key, refused before any exchange. */
    {
        char other[64];

        mint_code(&e.x, other);
        redeem(&r, e.x.s, k1, other, NULL);
        assert_error(&r, 422, "idempotency_key_reused");
        hres_free(&r);
        assert_sbx_stat(&e.x, "token_requests", 3);
    }
    json_decref(a);
    json_decref(b);
}

void bad_redemption_requests_are_400_and_send_nothing(void **state)
{
    static const struct {
        const char *body, *error, *field;
    } bad[] = {
        {"{\"code\":\"ac_1\"}", "malformed_request", "idempotency_key"},
        {"{\"idempotency_key\":\"k-1\"}", "malformed_request", "code"},
        {"{\"idempotency_key\":\"k-1\",\"code\":7}", "malformed_request",
         "code"},
        {"{\"idempotency_key\":\"k-1\",\"code\":\"c\",\"scope\":\"x\"}",
         "malformed_request", "scope"},
        {"{\"idempotency_key\":\"k 1\",\"code\":\"c\"}",
         "input.idempotency_key_invalid", NULL},
        {"{\"idempotency_key\":\"k-1\",\"code\":\"\"}", "input.code_invalid",
         NULL},
        {"{\"idempotency_key\":\"k-1\",\"code\":\"a\\nb\"}",
         "input.code_invalid", NULL},
        {"{\"idempotency_key\":\"k-1\",\"code\":\"\\u00e9\"}",
         "input.code_invalid", NULL},
    };
    renv e;
    hres r;

    renv_start(&e, "redeem-bad");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        req(&r, "POST", e.x.s, "/v1/redemptions", KEY(P_AGENT),
            "application/json", bad[i].body);
        assert_error(&r, 400, bad[i].error);
        if (bad[i].field)
            assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    /* Other roles may not redeem. */
    post(&r, e.x.s, "/v1/redemptions", KEY(P_ISSUER),
         json_pack("{s:s, s:s}", "idempotency_key", "k-1", "code", "c"));
    assert_error(&r, 403, "forbidden");
    hres_free(&r);
    assert_sbx_stat(&e.x, "token_requests", 0);
}

/* ===========================================================================
 * The stored result is a credential
 * ========================================================================= */

/* The redemptions rows as text (PostgreSQL): every column, the sealed bytes
 * both as hex and with printable bytes as they are. */
static char *pg_redemption_rows(const site *st)
{
    PGconn *c = PQconnectdb(st->direct_url);
    PGresult *q;
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);

    assert_int_equal(PQstatus(c), CONNECTION_OK);
    q = PQexec(c, "SELECT row_to_json(r)::text, encode(r.sealed, 'escape'),"
                  " encode(r.nonce, 'escape') FROM redemptions r");
    assert_int_equal(PQresultStatus(q), PGRES_TUPLES_OK);
    assert_true(PQntuples(q) >= 1);
    for (int i = 0; i < PQntuples(q); i++)
        for (int j = 0; j < PQnfields(q); j++)
            fprintf(f, "%s\n", PQgetvalue(q, i, j));
    PQclear(q);
    PQfinish(c);
    fclose(f);
    return text;
}

/* Whether the store holds needle anywhere we can read it without the key:
 * SQLite, the bytes of the database and its WAL; PostgreSQL, the row. */
static bool store_shows(const site *st, const char *needle)
{
    bool found = false;

    if (g_pg) {
        char *rows = pg_redemption_rows(st);

        found = strstr(rows, needle) != NULL;
        free(rows);
        return found;
    }
    for (int i = 0; i < 2; i++) {
        char path[PATHLEN + 8];
        size_t n = 0;
        char *bytes;

        snprintf(path, sizeof path, "%s%s", st->direct_url + strlen("sqlite:"),
                 i ? "-wal" : "");
        bytes = t_slurp(path, &n);
        found |= bytes_contain(bytes, n, needle);
        free(bytes);
    }
    return found;
}

void stored_result_is_unreadable_without_the_key(void **state)
{
    char code[64], key[OG_UUID_LEN + 1], hash[65], other_key[PATHLEN],
        other_conf[PATHLEN];
    json_t *res, *conf;
    srv *c;
    hres r;
    renv e;

    renv_start(&e, "redeem-sealed");
    mint_code(&e.x, code);
    uuid4(key);
    redeem(&r, e.x.s, key, code, NULL);
    assert_redeemed(&r, key, "redeemed", &res, __LINE__);
    hres_free(&r);
    /* Neither the tokens nor the code are in the store; the code's SHA-256
     * is (what code_spent is decided on). */
    assert_false(store_shows(e.x.st, jstr(res, "access_token")));
    assert_false(store_shows(e.x.st, jstr(res, "refresh_token")));
    assert_false(store_shows(e.x.st, code));
    sha256_hex(code, hash);
    assert_true(store_shows(e.x.st, hash));
    assert_true(store_shows(e.x.st, key)); /* the row is there */

    /* An instance with another key on the same store cannot open it. */
    path_in(other_key, e.x.st->dir, "other.key");
    redeem_key_write(other_key, 0600);
    conf = json_deep_copy(e.x.st->conf);
    json_object_set_new(json_object_get(conf, "redemption"), "key_file",
                        json_string(other_key));
    path_in(other_conf, e.x.st->dir, "other.json");
    {
        char *text = json_dumps(conf, JSON_INDENT(2));

        assert_int_equal(write_file(other_conf, text), 0);
        free(text);
    }
    json_decref(conf);
    c = srv_new(OUT_LOG_JSON, "serve", "--config", other_conf, "--listen",
                "127.0.0.1:0", (const char *)NULL);
    assert_int_equal(srv_start(c), 0);
    redeem(&r, c, key, code, NULL);
    assert_error(&r, 500, "redemption_undecryptable");
    assert_false(bytes_contain(r.body, r.len, jstr(res, "access_token")));
    hres_free(&r);
    /* The right key still does, and nothing was exchanged again. */
    redeem(&r, e.b, key, code, NULL);
    assert_redeemed(&r, key, "recovered", NULL, __LINE__);
    assert_true(json_equal(json_object_get(r.json, "result"), res));
    hres_free(&r);
    assert_sbx_stat(&e.x, "code_exchanges", 1);
    assert_sbx_stat(&e.x, "token_requests", 1);
    json_decref(res);
}

void key_file_readable_by_others_refuses_to_start(void **state)
{
    char *log = NULL;
    renv e;
    int code;

    renv_prepare(&e, "redeem-mode");
    assert_int_equal(chmod(e.key_file, 0644), 0);
    code = run_refused(e.x.st, &log);
    if (code != 78 || !log || !strstr(log, "redemption.key_file"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(strstr(log, "redemption.key_file"));
    free(log);
}

/* ===========================================================================
 * Dev mode
 * ========================================================================= */

/* serve --dev seals with DIR/redemption.key (0600, generated) and redeems
 * at the sandbox it started (named in its "redemption" log event). */
void dev_mode_redeems_at_its_sandbox_with_a_generated_key(void **state)
{
    char dir[512], path[PATHLEN], code[64], url[64];
    const char *at, *end;
    site *pgsite = NULL;
    struct stat sb;
    json_t *doc;
    srv *d, fake;
    xenv x;
    hres r;
    char *log, *creds;

    if (g_pg)
        assert_non_null(pgsite = site_new("dev-redeem-pg", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-redeem", g_tmp);
    d = dev_server(dir, pgsite);
    assert_int_equal(srv_start(d), 0);
    /* Its sandbox logs to DIR/sandbox.log: scanned for codes and tokens. */
    path_in(path, dir, "sandbox.log");
    outfile_add(path, OUT_LOG_TEXT);
    creds = dev_credentials(dir, &doc);
    path_in(path, dir, "redemption.key");
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);
    assert_true(log_wait_for(d, "\"event\":\"redemption\"", 10000));
    log = t_slurp(d->log_path, NULL);
    at = strstr(log, "\"token_endpoint\":\"");
    assert_non_null(at);
    at += strlen("\"token_endpoint\":\"");
    end = strchr(at, '"');
    assert_non_null(end);
    assert_true((size_t)(end - at) < sizeof url);
    snprintf(url, sizeof url, "%.*s", (int)(end - at), at);
    free(log);
    /* The sandbox as an xenv, for the helpers. */
    memset(&fake, 0, sizeof fake);
    _Static_assert(sizeof url == sizeof fake.base, "a base URL");
    memcpy(fake.base, url, sizeof url);
    memset(&x, 0, sizeof x);
    x.sbx = &fake;
    mint_code(&x, code);
    post(&r, d, "/v1/redemptions", dev_key(doc, "agent"),
         json_pack("{s:s, s:s}", "idempotency_key", "dev-signin-1", "code",
                   code));
    redeem_secrets(&r);
    assert_redeemed(&r, "dev-signin-1", "redeemed", NULL, __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "code_exchanges", 1);
    assert_int_equal(srv_stop(d, SIGTERM, EXIT_MS), 0);
    json_decref(doc);
    free(creds);
}
