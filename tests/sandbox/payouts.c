/*
 * payouts.c — what payouts add to the claims both resources make
 * (docs/sandbox.md): separate keys per resource, the processing window
 * after expires_at, faults from one queue, returns, payout requests
 * refused, restarts and reset, a version 2 state file, destinations
 * logged only by a hash prefix.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Payouts: POST /v1/payouts, GET /v1/payouts, the processing window,
 * returns. The same contract as credits, through the same code.
 * ========================================================================= */

/* POST /v1/payouts with Idempotency-Key key (expires_at NULL: g_later). */
static void payout(const sbx *s, const char *key, const char *dest,
                   const char *amount, const char *reference,
                   const char *expires_at, hres *out)
{
    create_at(s, &PAYOUTS, key, dest, amount, reference, expires_at, out);
}

/* A 201 payout with every documented member, completed. */
static void assert_payout(const hres *r, const char *dest,
                          const char *reference)
{
    assert_effect(&PAYOUTS, r, dest, reference);
}

static json_t *plookup(const sbx *s, const char *param, const char *value)
{
    return lookup_at(s, &PAYOUTS, param, value);
}

static size_t plookup_n(const sbx *s, const char *param, const char *value)
{
    return lookup_at_n(s, &PAYOUTS, param, value);
}

/* POST /_control/payouts/{id}/return with body (NULL: none). */
static void return_payout(const sbx *s, const char *id, const char *body,
                          hres *out)
{
    char path[256];

    snprintf(path, sizeof path, "/_control/payouts/%s/return", id);
    if (body)
        post_json(s, path, body, out);
    else
        http(s, "POST", path, NULL, NULL, 0, out);
}

void a_key_names_one_request_of_one_resource_credit_and_payout_keys_are_separate(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres c, p, c2, p2;

    (void)state;
    sbx_start(s);
    create(s, "shared-key", "A-1", "5", "ref-shared", NULL, &c);
    assert_credit(&c, "A-1", "ref-shared");
    payout(s, "shared-key", "dst_tok_shared", "5", "ref-shared", NULL, &p);
    assert_payout(&p, "dst_tok_shared", "ref-shared");
    create(s, "shared-key", "A-1", "5", "ref-shared", NULL, &c2);
    assert_str(c2.body, c.body);
    payout(s, "shared-key", "dst_tok_shared", "5", "ref-shared", NULL, &p2);
    assert_str(p2.body, p.body);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "payouts_created"), 1);
    /* Lookups of one resource never list the other's. */
    assert_int_equal(lookup_n(s, "reference", "ref-shared"), 1);
    assert_int_equal(plookup_n(s, "reference", "ref-shared"), 1);
    hres_free(&c);
    hres_free(&p);
    hres_free(&c2);
    hres_free(&p2);
}

/* The processing window, first half: a request that would take effect
 * after expires_at + skew has none — also one that arrived in time and
 * was held (delay_before_effect stands for a paused worker's request
 * still in flight). */
void payout_decided_after_expires_at_plus_skew_is_refused_with_no_effect_even_when_it_arrived_in_time(
    void **state)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "1", END);
    char soon[40];
    hres b, c;

    (void)state;
    sbx_start(s);
    /* In time, then held 2.5 s: decided after expires_at + 1 s. */
    rfc3339_ms(500, soon);
    arm(s, "delay_before_effect", 1, 2500);
    payout(s, "key-pheld", "dst_tok_held", "3", "ref-pheld", soon, &b);
    assert_error(&b, 422, "request_expired");
    assert_true(b.elapsed_ms >= 2500);
    assert_int_equal(plookup_n(s, "reference", "ref-pheld"), 0);
    assert_int_equal(plookup_n(s, "idempotency_key", "key-pheld"), 0);
    assert_int_equal(counter(s, "payouts_created"), 0);
    assert_int_equal(counter(s, "payout_requests"), 1);
    /* Nothing recorded: the key is new for a request still in time. */
    payout(s, "key-pheld", "dst_tok_held", "3", "ref-pheld", NULL, &c);
    assert_payout(&c, "dst_tok_held", "ref-pheld");
    hres_free(&b);
    hres_free(&c);
}

/* Both halves together: a lookup made after expires_at + skew +
 * visibility delay lists the payout accepted at the last moment, and one
 * that finds nothing stays right — the request is refused when it comes. */
void lookup_after_expires_at_plus_skew_plus_visibility_delay_that_finds_nothing_is_final(
    void **state)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "1",
                     "--visibility-delay-ms", "1000", END);
    char expires[40];
    int64_t cutoff;
    hres a, b;

    (void)state;
    sbx_start(s);
    rfc3339_ms(1000, expires);
    cutoff = t_now_ms() + 1000 + 1000 + 1000; /* expires + skew + delay */
    payout(s, "key-pw-a", "dst_tok_window", "7", "ref-pw-a", expires, &a);
    assert_payout(&a, "dst_tok_window", "ref-pw-a");
    /* Not visible yet: this "not found" would prove nothing. */
    assert_int_equal(plookup_n(s, "reference", "ref-pw-a"), 0);
    t_sleep_ms((int)(cutoff - t_now_ms()) + 200);
    assert_int_equal(plookup_n(s, "reference", "ref-pw-a"), 1);
    assert_int_equal(plookup_n(s, "reference", "ref-pw-b"), 0);
    /* ref-pw-b's request, sent only now, can never take effect. */
    payout(s, "key-pw-b", "dst_tok_window", "7", "ref-pw-b", expires, &b);
    assert_error(&b, 422, "request_expired");
    assert_int_equal(plookup_n(s, "reference", "ref-pw-b"), 0);
    assert_int_equal(counter(s, "payouts_created"), 1);
    hres_free(&a);
    hres_free(&b);
}

void every_fault_acts_on_payout_creates_as_on_credit_creates_from_one_queue(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r, again;
    int st;

    (void)state;
    sbx_start(s);
    /* One queue: a credit and a payout each take one firing. */
    arm(s, "error_500_before_effect", 2, -1);
    create(s, "key-fq", "A-1", "1", "ref-fq", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    payout(s, "key-fb", "dst_tok_f", "1", "ref-fb", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 0);
    assert_int_equal(counter(s, "payout_requests"), 1);
    payout(s, "key-fb", "dst_tok_f", "1", "ref-fb", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fb"); /* the key was never recorded */
    hres_free(&r);

    arm(s, "error_500_after_effect", 1, -1);
    payout(s, "key-fa", "dst_tok_f", "1", "ref-fa", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(plookup_n(s, "idempotency_key", "key-fa"), 1);

    arm(s, "drop_response_after_effect", 1, -1);
    payout(s, "key-fd", "dst_tok_f", "1", "ref-fd", NULL, &r);
    assert_int_equal(r.status, 0);
    assert_int_not_equal(r.cc, CURLE_OK);
    hres_free(&r);
    payout(s, "key-fd", "dst_tok_f", "1", "ref-fd", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fd"); /* replayed */
    hres_free(&r);

    arm(s, "delay_before_effect", 1, 700);
    payout(s, "key-fdb", "dst_tok_f", "1", "ref-fdb", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fdb");
    assert_true(r.elapsed_ms >= 700);
    hres_free(&r);
    arm(s, "delay_after_effect", 1, 700);
    payout(s, "key-fda", "dst_tok_f", "1", "ref-fda", NULL, &r);
    assert_payout(&r, "dst_tok_f", "ref-fda");
    assert_true(r.elapsed_ms >= 700);
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 5);

    arm(s, "exit_after_effect", 1, -1);
    payout(s, "key-fx", "dst_tok_f", "1", "ref-fx", NULL, &r);
    assert_int_equal(r.status, 0);
    hres_free(&r);
    st = t_proc_wait(s->pid, EXIT_MS);
    assert_int_equal(t_proc_exit_code(st), 137);
    s->pid = 0;
    sbx_start(s);
    assert_int_equal(counter(s, "payouts_created"), 6); /* durable */
    payout(s, "key-fx", "dst_tok_f", "1", "ref-fx", NULL, &again);
    assert_payout(&again, "dst_tok_f", "ref-fx");
    assert_int_equal(counter(s, "payouts_created"), 6);
    hres_free(&again);
}

void returned_payout_is_listed_returned_and_a_same_key_create_still_replays_its_original_answer(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    const char *id;
    json_t *found, *p;
    char h[16];
    hres a, r, again;

    (void)state;
    sbx_start(s);
    payout(s, "key-pr", "dst_tok_pr", "4250", "PAY-3107-a1", NULL, &a);
    assert_payout(&a, "dst_tok_pr", "PAY-3107-a1");
    id = jstr(a.json, "id");
    return_payout(s, id, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_object_size(r.json), 8);
    assert_str(jstr(r.json, "id"), id);
    assert_str(jstr(r.json, "status"), "returned");
    assert_str(jstr(r.json, "created_at"), jstr(a.json, "created_at"));
    assert_true(strcmp(jstr(r.json, "returned_at"),
                       jstr(a.json, "created_at")) >= 0);
    found = plookup(s, "reference", "PAY-3107-a1");
    assert_int_equal(json_array_size(found), 1);
    p = json_array_get(found, 0);
    assert_true(json_equal(p, r.json));
    json_decref(found);
    /* A return does not undo the create: its key replays the answer the
     * create gave, byte for byte. */
    payout(s, "key-pr", "dst_tok_pr", "4250", "PAY-3107-a1", NULL, &again);
    assert_int_equal(again.status, 201);
    assert_str(again.body, a.body);
    assert_true(hdr_value(&again, "Idempotent-Replayed", h, sizeof h));
    assert_int_equal(counter(s, "payouts_returned"), 1);
    assert_int_equal(counter(s, "payouts_created"), 1);
    hres_free(&a);
    hres_free(&r);
    hres_free(&again);
}

void return_refuses_what_is_not_a_completed_unreturned_payout_and_changes_nothing(
    void **state)
{
    static const char *const malformed[] = {
        "po_x", "cr_000000000000000000000000", "PO_000000000000000000000000",
        "po_00000000000000000000000g", "po_0000000000000000000000000",
    };
    sbx *s = sbx_new("--control", "--async-complete-ms", "60000", END);
    char allow[64], first[40];
    json_t *found;
    hres a, p, r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        return_payout(s, malformed[i], NULL, &r);
        assert_error(&r, 400, "invalid_request");
        assert_str(jstr(r.json, "field"), "id");
        hres_free(&r);
    }
    return_payout(s, "po_000000000000000000000000", NULL, &r);
    assert_error(&r, 404, "payout_not_found");
    hres_free(&r);
    /* Pending: it has not completed, so it cannot be returned. */
    payout(s, "key-rp", "dst_async_r", "1", "ref-rp", NULL, &p);
    assert_int_equal(p.status, 202);
    return_payout(s, jstr(p.json, "id"), NULL, &r);
    assert_error(&r, 409, "payout_not_returnable");
    hres_free(&r);
    found = plookup(s, "reference", "ref-rp");
    assert_str(jstr(json_array_get(found, 0), "status"), "pending");
    json_decref(found);
    /* Returned once: not again, and its returned_at stays. */
    payout(s, "key-ra", "dst_tok_ra", "1", "ref-ra", NULL, &a);
    return_payout(s, jstr(a.json, "id"), "{\"reason\":\"R01\"}", &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "reason");
    hres_free(&r);
    return_payout(s, jstr(a.json, "id"), "{}", &r);
    assert_int_equal(r.status, 200);
    snprintf(first, sizeof first, "%s", jstr(r.json, "returned_at"));
    hres_free(&r);
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_error(&r, 409, "payout_not_returnable");
    hres_free(&r);
    found = plookup(s, "reference", "ref-ra");
    assert_str(jstr(json_array_get(found, 0), "returned_at"), first);
    json_decref(found);
    {
        char path[128];

        snprintf(path, sizeof path, "/_control/payouts/%s/return",
                 jstr(a.json, "id"));
        get(s, path, &r);
        assert_error(&r, 405, "method_not_allowed");
        assert_true(hdr_value(&r, "Allow", allow, sizeof allow));
        assert_str(allow, "POST");
        hres_free(&r);
    }
    assert_int_equal(counter(s, "payouts_returned"), 1);
    hres_free(&a);
    hres_free(&p);
}

void return_route_is_404_without_control(void **state)
{
    sbx *s = sbx_new(END);
    json_t *found;
    hres a, r;

    (void)state;
    sbx_start(s);
    payout(s, "key-nc", "dst_tok_nc", "1", "ref-nc", NULL, &a);
    assert_payout(&a, "dst_tok_nc", "ref-nc");
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    found = plookup(s, "reference", "ref-nc");
    assert_str(jstr(json_array_get(found, 0), "status"), "completed");
    json_decref(found);
    hres_free(&a);
}

#define PGOOD_REST                                                             \
    "\"amount\":\"1\",\"currency\":\"USD\",\"reference\":\"r\","               \
    "\"expires_at\":\"2999-01-01T00:00:00Z\""

void malformed_payout_requests_are_400_naming_the_field_and_change_nothing(
    void **state)
{
    static const struct {
        const char *body, *code, *field;
    } bad[] = {
        {"{" PGOOD_REST "}", "invalid_request", "destination"},
        {"{\"account\":\"A-1\"," PGOOD_REST "}", "invalid_request", "account"},
        {"{\"destination\":\"dst a\"," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":\"\"," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":7," PGOOD_REST "}", "invalid_request",
         "destination"},
        {"{\"destination\":\"dst_tok_x\",\"amount\":\"0\",\"currency\":"
         "\"USD\",\"reference\":\"r\",\"expires_at\":"
         "\"2999-01-01T00:00:00Z\"}",
         "invalid_request", "amount"},
        {"{\"destination\":\"dst_tok_x\",\"destination\":\"dst_tok_y\","
         PGOOD_REST "}", "invalid_json", "destination"},
    };
    const char *const headers[] = {"Content-Type: application/json",
                                   "Idempotency-Key: key-pbad", NULL};
    const char *const nokey[] = {"Content-Type: application/json", NULL};
    const char *const text[] = {"Content-Type: text/plain",
                                "Idempotency-Key: key-pbad", NULL};
    char long_dest[200], good[256];
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        http(s, "POST", "/v1/payouts", headers, bad[i].body,
             strlen(bad[i].body), &r);
        assert_error(&r, 400, bad[i].code);
        assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    snprintf(good, sizeof good, "{\"destination\":\"dst_tok_x\"," PGOOD_REST
                                "}");
    http(s, "POST", "/v1/payouts", nokey, good, strlen(good), &r);
    assert_error(&r, 400, "idempotency_key_required");
    hres_free(&r);
    http(s, "POST", "/v1/payouts", text, good, strlen(good), &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    {
        char *big = malloc(BODY_MAX + 2);

        assert_non_null(big);
        memset(big, ' ', BODY_MAX + 1);
        memcpy(big, good, strlen(good));
        big[BODY_MAX + 1] = '\0';
        http(s, "POST", "/v1/payouts", headers, big, BODY_MAX + 1, &r);
        assert_error(&r, 413, "body_too_large");
        hres_free(&r);
        free(big);
    }
    memset(long_dest, 'd', 129);
    long_dest[129] = '\0';
    payout(s, "key-pbad", long_dest, "1", "r", NULL, &r);
    assert_error(&r, 400, "invalid_request");
    assert_str(jstr(r.json, "field"), "destination");
    hres_free(&r);
    assert_int_equal(counter(s, "payout_requests"), 0);
    assert_int_equal(counter(s, "payouts_created"), 0);
    long_dest[128] = '\0'; /* the longest valid destination */
    payout(s, "key-pbad", long_dest, "1", "r", NULL, &r);
    assert_payout(&r, long_dest, "r");
    hres_free(&r);
}

void payout_routes_need_the_bearer_key_and_a_refusal_changes_nothing(
    void **state)
{
    char path[PATHLEN], id[64];
    sbx *s;
    FILE *f;
    hres r;

    (void)state;
    snprintf(path, sizeof path, "%s/api-key-payouts", g_tmp);
    assert_non_null(f = fopen(path, "w"));
    fputs(API_KEY "\n", f);
    fclose(f);
    s = sbx_new("--control", "--api-key-file", path, END);
    sbx_start(s);
    payout(s, "key-pauth", "dst_tok_auth", "1", "ref-pauth", NULL, &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    get(s, "/v1/payouts?reference=ref-pauth", &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "payout_requests"), 0);
    payout(s, "key-pauth", "dst_tok_auth", "1", "ref-pauth", NULL, &r);
    assert_payout(&r, "dst_tok_auth", "ref-pauth");
    snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
    hres_free(&r);
    s->api_key = NULL;
    return_payout(s, id, NULL, &r);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    s->api_key = API_KEY;
    assert_int_equal(counter(s, "payouts_returned"), 0);
}

void payouts_and_their_counters_survive_a_restart_and_reset_deletes_them(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, c, r, a2, st1, st2;

    (void)state;
    sbx_start(s);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a);
    assert_payout(&a, "dst_tok_d", "ref-pd");
    payout(s, "key-pd2", "dst_closed_d", "11", "ref-pd", NULL, &c);
    assert_error(&c, 422, "destination_closed");
    return_payout(s, jstr(a.json, "id"), NULL, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    get(s, "/_control/stats", &st1);
    sbx_restart(s);
    get(s, "/_control/stats", &st2);
    assert_true(json_equal(st1.json, st2.json));
    assert_int_equal(json_integer_value(json_object_get(st2.json,
                                                        "payouts_returned")),
                     1);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a2);
    assert_str(a2.body, a.body);
    hres_free(&a2);
    payout(s, "key-pd2", "dst_closed_d", "11", "ref-pd", NULL, &a2);
    assert_str(a2.body, c.body);
    hres_free(&a2);
    found = plookup(s, "reference", "ref-pd");
    assert_str(jstr(json_array_get(found, 0), "status"), "returned");
    json_decref(found);
    http(s, "POST", "/_control/reset", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    hres_free(&r);
    for (const char *const *n = (const char *const[]){
             "payout_requests", "payouts_created", "payouts_returned",
             "payout_lookups", "payout_replays", "payout_mismatches", NULL};
         *n; n++)
        assert_int_equal(counter(s, *n), 0);
    payout(s, "key-pd1", "dst_tok_d", "11", "ref-pd", NULL, &a2);
    assert_payout(&a2, "dst_tok_d", "ref-pd"); /* the key is new again */
    assert_string_not_equal(jstr(a2.json, "id"), jstr(a.json, "id"));
    hres_free(&a2);
    hres_free(&a);
    hres_free(&c);
    hres_free(&st1);
    hres_free(&st2);
}

/* A state file of schema version 2 (credits and codes) gains the payout
 * tables and keeps its credits and codes. */
void version_2_state_file_gains_payouts_and_keeps_its_credits_and_codes(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    create(s, "key-v2", "A-1", "5", "ref-v2", NULL, &r);
    assert_credit(&r, "A-1", "ref-v2");
    hres_free(&r);
    mint(s, code);
    restart_after(s, "DROP TABLE payout_keys; DROP TABLE payouts;"
                     " PRAGMA user_version = 2");
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "codes_minted"), 1);
    payout(s, "key-v2", "dst_tok_v2", "5", "ref-v2", NULL, &r);
    assert_payout(&r, "dst_tok_v2", "ref-v2");
    hres_free(&r);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
    assert_int_equal(sbx_stop(s, SIGTERM), 0);
    assert_int_equal(sqlite3_open_v2(s->state, &db, SQLITE_OPEN_READONLY,
                                     NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q,
                                        NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 3);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Every destination sent in this run is absent from every log; a payout
 * request names it by the first 12 hex digits of its SHA-256. */
void logs_name_a_destination_only_by_a_sha256_prefix(void **state)
{
    bool named = false;

    (void)state;
    assert_true(g_n_dests > 0);
    for (size_t i = 0; i < g_n_logs; i++) {
        char *log = t_slurp(g_logs[i], NULL);

        assert_non_null(log);
        for (size_t k = 0; k < g_n_dests; k++)
            if (strstr(log, g_dests[k]))
                fail_msg("%s contains the destination %s", g_logs[i],
                         g_dests[k]);
        /* SHA-256("dst_tok_a1b2c3d4") begins 5ba6f29f88e1. */
        named = named ||
                strstr(log, "\"destination_sha256\":\"5ba6f29f88e1\"") != NULL;
        free(log);
    }
    assert_true(named);
}
