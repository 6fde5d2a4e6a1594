/*
 * control.c — durability, the control routes, the bearer key, bad
 * requests (400, 413, 415, 404, 405), reset, the drain on SIGTERM, and
 * bad flags.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Durability, control, auth, drain
 * ========================================================================= */
void state_survives_a_clean_restart(void **state)
{
    sbx *s = sbx_new("--control", END);
    hres a, c, a2, c2, st1, st2;

    (void)state;
    sbx_start(s);
    create(s, "key-d1", "A-1", "11", "ref-d", NULL, &a);
    assert_credit(&a, "A-1", "ref-d");
    create(s, "key-d2", "closed-1", "11", "ref-d", NULL, &c);
    assert_error(&c, 422, "account_closed");
    assert_int_equal(lookup_n(s, "reference", "ref-d"), 1);
    get(s, "/_control/stats", &st1);
    sbx_restart(s);
    get(s, "/_control/stats", &st2);
    assert_true(json_equal(st1.json, st2.json)); /* counters are durable */
    create(s, "key-d1", "A-1", "11", "ref-d", NULL, &a2);
    assert_str(a2.body, a.body);
    create(s, "key-d2", "closed-1", "11", "ref-d", NULL, &c2);
    assert_str(c2.body, c.body);
    assert_int_equal(lookup_n(s, "reference", "ref-d"), 1);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&a);
    hres_free(&c);
    hres_free(&a2);
    hres_free(&c2);
    hres_free(&st1);
    hres_free(&st2);
}

void control_routes_are_404_without_control(void **state)
{
    sbx *s = sbx_new(END);
    hres r;

    (void)state;
    sbx_start(s);
    get(s, "/_control/stats", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    get(s, "/_control/faults", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/faults", "{\"fault\":\"exit_after_effect\"}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/reset", "{}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    post_json(s, "/_control/codes", "{}", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    create(s, "key-nc", "A-1", "1", "ref-nc", NULL, &r);
    assert_credit(&r, "A-1", "ref-nc"); /* nothing was armed */
    hres_free(&r);
}

void bearer_key_from_api_key_file_is_required_and_refusals_have_no_effect(
    void **state)
{
    static const char *const wrong[] = {
        NULL, "Bearer wrong-key", "Basic " API_KEY, "Bearer " API_KEY "x",
    };
    char path[PATHLEN], auth[256], wa[64];
    sbx *s;
    FILE *f;
    hres r;

    (void)state;
    snprintf(path, sizeof path, "%s/api-key", g_tmp);
    assert_non_null(f = fopen(path, "w"));
    fputs("  " API_KEY "\n\n", f); /* trimmed */
    fclose(f);
    s = sbx_new("--control", "--api-key-file", path, END);
    sbx_start(s);
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char kh[] = "Idempotency-Key: key-auth";
        const char *headers[] = {"Content-Type: application/json", kh,
                                 wrong[i] ? auth : NULL, NULL};
        char *body = create_body("A-1", "1", "ref-auth", "2999-01-01T00:00:00Z");

        snprintf(auth, sizeof auth, "Authorization: %s",
                 wrong[i] ? wrong[i] : "");
        http(s, "POST", "/v1/credits", headers, body, strlen(body), &r);
        assert_error(&r, 401, "unauthorized");
        assert_true(hdr_value(&r, "WWW-Authenticate", wa, sizeof wa));
        hres_free(&r);
        free(body);
    }
    get(s, "/v1/credits?reference=ref-auth", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    get(s, "/_control/stats", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    create(s, "key-auth", "A-1", "1", "ref-auth", NULL, &r);
    assert_credit(&r, "A-1", "ref-auth");
    hres_free(&r);
    assert_int_equal(lookup_n(s, "reference", "ref-auth"), 1);
}

/* One row of the bad-input table: how the key header is sent, the body,
 * and the expected answer. */
enum { K_OK, K_NONE, K_EMPTY, K_TWO, K_LONG, K_SPACE, K_NON_ASCII };

static void bad_create(const sbx *s, int kmode, const char *ctype,
                       const char *body, size_t len, hres *r)
{
    char kh[400], kh2[64] = "Idempotency-Key: second";
    char ct[128];
    const char *headers[4] = {NULL, NULL, NULL, NULL};
    int n = 0;

    snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
    headers[n++] = ct;
    switch (kmode) {
    case K_OK: snprintf(kh, sizeof kh, "Idempotency-Key: key-bad"); break;
    case K_NONE: kh[0] = '\0'; break;
    case K_EMPTY: snprintf(kh, sizeof kh, "Idempotency-Key;"); break;
    case K_TWO: snprintf(kh, sizeof kh, "Idempotency-Key: first"); break;
    case K_LONG:
        snprintf(kh, sizeof kh, "Idempotency-Key: %0256d", 7);
        break;
    case K_SPACE: snprintf(kh, sizeof kh, "Idempotency-Key: a b"); break;
    case K_NON_ASCII:
        snprintf(kh, sizeof kh, "Idempotency-Key: k\xc3\xa9y");
        break;
    }
    if (kh[0])
        headers[n++] = kh;
    if (kmode == K_TWO)
        headers[n++] = kh2;
    http(s, "POST", "/v1/credits", headers, body, len, r);
}

#define GOOD_REST                                                              \
    "\"currency\":\"USD\",\"reference\":\"r\",\"expires_at\":"                 \
    "\"2999-01-01T00:00:00Z\""
#define GOOD "{\"account\":\"A-1\",\"amount\":\"1\"," GOOD_REST "}"
/* Ten "é" (20 bytes). */
#define E10 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9"

void malformed_or_invalid_create_requests_are_400_naming_the_field_and_change_nothing(
    void **state)
{
    static const struct {
        int kmode;
        const char *body, *code, *field;
    } bad[] = {
        {K_NONE, GOOD, "idempotency_key_required", NULL},
        {K_EMPTY, GOOD, "idempotency_key_required", NULL},
        {K_TWO, GOOD, "idempotency_key_required", NULL},
        {K_LONG, GOOD, "idempotency_key_required", NULL},
        {K_SPACE, GOOD, "idempotency_key_required", NULL},
        {K_NON_ASCII, GOOD, "idempotency_key_required", NULL},
        {K_OK, "not json", "invalid_json", NULL},
        {K_OK, "", "invalid_json", NULL},
        {K_OK, "[1,2]", "invalid_json", NULL},
        {K_OK, "\"text\"", "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-1\",\"account\":\"A-2\",\"amount\":\"1\","
               GOOD_REST "}", "invalid_json", "account"},
        {K_OK, "{\"account\":\"A\\u0000B\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-\xff\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_json", NULL},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"memo\":\"x\","
               GOOD_REST "}", "invalid_request", "memo"},
        /* A 100-byte non-ASCII member name: named, cut to 39 characters
         * (78 bytes) so the answer stays valid UTF-8. */
        {K_OK, "{\"" E10 E10 E10 E10 E10 "\":1," GOOD_REST "}",
         "invalid_request", E10 E10 E10 "\xc3\xa9\xc3\xa9\xc3\xa9"
                            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                            "\xc3\xa9"},
        {K_OK, "{\"amount\":\"1\"," GOOD_REST "}", "invalid_request",
         "account"},
        {K_OK, "{\"account\":\"A-1\"," GOOD_REST "}", "invalid_request",
         "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"reference\":\"r\","
               "\"expires_at\":\"2999-01-01T00:00:00Z\"}", "invalid_request",
         "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"expires_at\":\"2999-01-01T00:00:00Z\"}", "invalid_request",
         "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\"}", "invalid_request", "expires_at"},
        {K_OK, "{\"account\":7,\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"A 1\",\"amount\":\"1\"," GOOD_REST "}",
         "invalid_request", "account"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":1," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"0.00\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"-1\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1e3\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\".5\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"5.\"," GOOD_REST "}",
         "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"0.0000000000000000001\","
               GOOD_REST "}", "invalid_request", "amount"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"usd\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USDX\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "currency"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"\",\"expires_at\":\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"a\\nb\",\"expires_at\":"
               "\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "reference"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-01-01T00:00:00\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":\"2999-02-30T00:00:00Z\"}",
         "invalid_request", "expires_at"},
        {K_OK, "{\"account\":\"A-1\",\"amount\":\"1\",\"currency\":\"USD\","
               "\"reference\":\"r\",\"expires_at\":1893456000}",
         "invalid_request", "expires_at"},
    };
    char long_ref[200], long_acct[200], body[512], key255[300];
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bad_create(s, bad[i].kmode, "application/json", bad[i].body,
                   strlen(bad[i].body), &r);
        if (r.status != 400 || !r.json ||
            strcmp(jstr(r.json, "error") ? jstr(r.json, "error") : "",
                   bad[i].code) != 0 ||
            (bad[i].field &&
             strcmp(jstr(r.json, "field") ? jstr(r.json, "field") : "",
                    bad[i].field) != 0))
            fail_msg("row %zu: expected 400 %s %s, got %ld %s", i,
                     bad[i].code, bad[i].field ? bad[i].field : "", r.status,
                     r.body ? r.body : "");
        hres_free(&r);
    }
    /* Lengths: a reference and an account of 129 bytes. */
    memset(long_ref, 'r', 129);
    long_ref[129] = '\0';
    memset(long_acct, 'a', 129);
    long_acct[129] = '\0';
    create(s, "key-long", "A-1", "1", long_ref, NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "reference");
    hres_free(&r);
    create(s, "key-long", long_acct, "1", "r", NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "account");
    hres_free(&r);
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    /* The edges that are valid: 255-byte key, 128-byte reference. */
    memset(key255, 'k', 255);
    key255[255] = '\0';
    long_ref[128] = '\0';
    snprintf(body, sizeof body, "%s", long_ref);
    create(s, key255, "A-1", "1", body, NULL, &r);
    assert_credit(&r, "A-1", body);
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
}

void body_over_64_kib_is_413_and_a_body_of_exactly_64_kib_is_accepted(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char *big = malloc(BODY_MAX + 2);
    size_t good = strlen(GOOD);
    hres r;

    (void)state;
    assert_non_null(big);
    sbx_start(s);
    /* GOOD padded with white space to exactly BODY_MAX, then one more. */
    memcpy(big, GOOD, good);
    memset(big + good, ' ', BODY_MAX + 1 - good);
    big[BODY_MAX + 1] = '\0';
    bad_create(s, K_OK, "application/json", big, BODY_MAX + 1, &r);
    assert_error(&r, 413, "body_too_large");
    hres_free(&r);
    assert_int_equal(counter(s, "create_requests"), 0);
    assert_int_equal(counter(s, "credits_created"), 0);
    bad_create(s, K_OK, "application/json", big, BODY_MAX, &r);
    assert_int_equal(r.status, 201);
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
    free(big);
}

void create_without_a_json_content_type_is_415_and_changes_nothing(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    bad_create(s, K_OK, "text/plain", GOOD, strlen(GOOD), &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    bad_create(s, K_OK, "application/json; charset=utf-8", GOOD, strlen(GOOD),
               &r);
    assert_int_equal(r.status, 201); /* parameters are fine */
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
}

void unknown_route_is_404_and_a_wrong_method_is_405_with_allow(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char allow[64];
    hres r;

    (void)state;
    sbx_start(s);
    get(s, "/v1/payments", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    get(s, "/v1/credits/cr_1", &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    http(s, "PUT", "/v1/credits", NULL, NULL, 0, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
    assert_str(allow, "POST, GET");
    hres_free(&r);
    http(s, "PUT", "/_control/faults", NULL, NULL, 0, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
    assert_str(allow, "POST, GET, DELETE");
    hres_free(&r);
}

void reset_deletes_every_credit_key_code_counter_and_fault(void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *zero;
    hres a, r;

    (void)state;
    sbx_start(s);
    create(s, "key-r", "A-1", "1", "ref-r", NULL, &a);
    assert_credit(&a, "A-1", "ref-r");
    {
        char code[64];

        mint(s, code);
        exchange(s, code, &r);
        assert_token(&r);
        hres_free(&r);
    }
    arm(s, "error_500_before_effect", 3, -1);
    post_json(s, "/_control/reset", "{\"all\":true}", &r);
    assert_error(&r, 400, "invalid_request"); /* reset takes no members */
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1);
    http(s, "POST", "/_control/reset", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    zero = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i,"
                     " s:i, s:i, s:i, s:i}",
                     "create_requests", 0, "credits_created", 0, "lookups", 0,
                     "idempotent_replays", 0, "mismatches", 0, "codes_minted",
                     0, "code_exchanges", 0, "token_requests", 0,
                     "invalid_grants", 0, "payout_requests", 0,
                     "payouts_created", 0, "payouts_returned", 0,
                     "payout_lookups", 0, "payout_replays", 0,
                     "payout_mismatches", 0);
    get(s, "/_control/stats", &r);
    assert_int_equal(r.status, 200);
    assert_true(json_equal(r.json, zero));
    json_decref(zero);
    hres_free(&r);
    /* The key is new again and no fault fires. */
    create(s, "key-r", "A-1", "1", "ref-r", NULL, &r);
    assert_credit(&r, "A-1", "ref-r");
    assert_string_not_equal(jstr(r.json, "id"), jstr(a.json, "id"));
    hres_free(&r);
    hres_free(&a);
}

void sigterm_lets_a_request_in_flight_finish_and_exits_0(void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-term", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    t_sleep_ms(500);
    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-term");
    hres_free(&bg.r);
    assert_int_equal(state_credit_rows(s->state), 1);
}

void bad_flags_exit_2_and_an_unreadable_api_key_file_exits_78(
    void **state)
{
    static const char *const bad[][4] = {
        {"--retention-seconds", "0", NULL, NULL},
        {"--skew-seconds", "-1", NULL, NULL},
        {"--visibility-delay-ms", "ten", NULL, NULL},
        {"--listen", "localhost", NULL, NULL},
        {"--frobnicate", NULL, NULL, NULL},
        {"--state", "", NULL, NULL},
    };
    char out[PATHLEN], err[PATHLEN], state_path[PATHLEN], missing[PATHLEN];
    pid_t pid;

    (void)state;
    snprintf(out, sizeof out, "%s/refused.out", g_tmp);
    snprintf(err, sizeof err, "%s/refused.err", g_tmp);
    snprintf(state_path, sizeof state_path, "%s/refused.db", g_tmp);
    snprintf(missing, sizeof missing, "%s/no-such-key-file", g_tmp);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", "--state",
                        state_path, (char *)bad[i][0], (char *)bad[i][1],
                        NULL};

        pid = t_proc_spawn(argv, NULL, out, err);
        assert_int_equal(t_proc_exit_code(t_proc_wait(pid, EXIT_MS)), 2);
    }
    {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", NULL};

        pid = t_proc_spawn(argv, NULL, out, err); /* --state missing */
        assert_int_equal(t_proc_exit_code(t_proc_wait(pid, EXIT_MS)), 2);
    }
    {
        char *argv[] = {(char *)g_bin, "--listen", "127.0.0.1:0", "--state",
                        state_path, "--api-key-file", missing, NULL};

        pid = t_proc_spawn(argv, NULL, out, err);
        assert_int_equal(t_proc_exit_code(t_proc_wait(pid, EXIT_MS)), 78);
    }
}
