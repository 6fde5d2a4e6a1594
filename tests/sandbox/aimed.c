/*
 * aimed.c — faults aimed at one request (POST /_control/faults with
 * "match"): an aimed fault fires only on a create it matches, wins over the
 * unaimed head, leaves the unaimed queue to the rest, reaches payouts by
 * key and reference, never fires on an exchange, and a malformed match is
 * refused arming nothing.
 */
#include "harness.h"
#include "cases.h"

/* Arms fault (ms < 0: no "ms") for count firings aimed by match, a JSON
 * object text. */
static void arm_aimed(const sbx *s, const char *fault, int count, int ms,
                      const char *match)
{
    char body[1024];
    hres r;

    if (ms >= 0)
        snprintf(body, sizeof body,
                 "{\"fault\":\"%s\",\"count\":%d,\"ms\":%d,\"match\":%s}",
                 fault, count, ms, match);
    else
        snprintf(body, sizeof body,
                 "{\"fault\":\"%s\",\"count\":%d,\"match\":%s}", fault, count,
                 match);
    post_json(s, "/_control/faults", body, &r);
    if (r.status != 200)
        fail_msg("arming %s at %s: %ld %s", fault, match, r.status,
                 r.body ? r.body : "");
    hres_free(&r);
}

/* The armed list (a new reference). */
static json_t *armed(const sbx *s)
{
    json_t *list;
    hres r;

    get(s, "/_control/faults", &r);
    assert_int_equal(r.status, 200);
    list = json_incref(json_object_get(r.json, "faults"));
    hres_free(&r);
    return list;
}

static size_t n_armed(const sbx *s)
{
    json_t *list = armed(s);
    size_t n = json_array_size(list);

    json_decref(list);
    return n;
}

void a_fault_aimed_at_the_second_of_two_concurrent_creates_fires_on_the_second_only(
    void **state)
{
    sbx *s = sbx_new("--control", END);

    (void)state;
    sbx_start(s);
    /* Several rounds: the first create usually reaches the queue first,
     * which is where a FIFO fault would have fired. */
    for (int round = 0; round < 5; round++) {
        char ka[32], kb[32], match[64];
        bg_create a = {NULL, ka, {0}, false}, b = {NULL, kb, {0}, false};
        pthread_t ta, tb;

        snprintf(ka, sizeof ka, "aim-first-%d", round);
        snprintf(kb, sizeof kb, "aim-second-%d", round);
        snprintf(match, sizeof match, "{\"idempotency_key\":\"%s\"}", kb);
        a.s = b.s = s;
        arm_aimed(s, "error_500_after_effect", 1, -1, match);
        assert_int_equal(pthread_create(&ta, NULL, bg_create_main, &a), 0);
        assert_int_equal(pthread_create(&tb, NULL, bg_create_main, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        assert_credit(&a.r, "A-1", ka);
        assert_error(&b.r, 500, "internal");
        /* After the effect: the second's credit exists all the same. */
        assert_int_equal(lookup_n(s, "idempotency_key", kb), 1);
        assert_int_equal(n_armed(s), 0);
        hres_free(&a.r);
        hres_free(&b.r);
    }
    assert_int_equal(counter(s, "credits_created"), 10);
}

void an_aimed_fault_wins_over_the_queue_head_and_leaves_it_for_the_rest(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *list, *m;
    hres r;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_before_effect", 1, -1);
    arm_aimed(s, "error_500_after_effect", 1, -1,
              "{\"idempotency_key\":\"aim-x\"}");
    arm_aimed(s, "error_500_before_effect", 1, -1,
              "{\"idempotency_key\":\"aim-never\"}");
    list = armed(s);
    assert_int_equal(json_array_size(list), 3);
    m = json_object_get(json_array_get(list, 1), "match");
    assert_str(jstr(m, "idempotency_key"), "aim-x");
    assert_null(json_object_get(json_array_get(list, 0), "match"));
    json_decref(list);
    /* The aimed entry, though second, is this request's. */
    create(s, "aim-x", "A-1", "3", "ref-aim-x", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1); /* after effect */
    /* The head is still there for the next request that no fault names. */
    create(s, "aim-y", "A-1", "3", "ref-aim-y", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(lookup_n(s, "idempotency_key", "aim-y"), 0);
    /* Only the fault aimed at a key nobody sends is left: it never fires
     * on another request. */
    create(s, "aim-z", "A-1", "3", "ref-aim-z", NULL, &r);
    assert_credit(&r, "A-1", "ref-aim-z");
    hres_free(&r);
    assert_int_equal(n_armed(s), 1);
    /* A replay of the aimed request matches it too. */
    arm_aimed(s, "error_500_after_effect", 2, -1,
              "{\"idempotency_key\":\"aim-z\"}");
    create(s, "aim-z", "A-1", "3", "ref-aim-z", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    list = armed(s);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(list, 1), "count")),
                     1);
    json_decref(list);
    assert_int_equal(counter(s, "credits_created"), 2);
}

void aimed_faults_match_reference_account_or_both_and_reach_payouts_from_the_same_queue(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    /* By reference, on a payout; a credit with another reference and a
     * token exchange pass untouched. */
    arm_aimed(s, "error_500_before_effect", 1, -1,
              "{\"reference\":\"ref-pay aimed\"}");
    create(s, "ak-1", "A-1", "1", "ref-credit", NULL, &r);
    assert_credit(&r, "A-1", "ref-credit");
    hres_free(&r);
    mint(s, code);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
    create_at(s, &PAYOUTS, "pk-1", "dst_tok_aim", "4", "ref-pay aimed", NULL,
              &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 0);
    assert_int_equal(counter(s, "payout_requests"), 1);
    /* By key, on a payout. */
    arm_aimed(s, "error_500_after_effect", 1, -1,
              "{\"idempotency_key\":\"pk-2\"}");
    create_at(s, &PAYOUTS, "pk-3", "dst_tok_aim", "4", "ref-p3", NULL, &r);
    assert_effect(&PAYOUTS, &r, "dst_tok_aim", "ref-p3");
    hres_free(&r);
    create_at(s, &PAYOUTS, "pk-2", "dst_tok_aim", "4", "ref-p2", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "payouts_created"), 2);
    /* By account: credits only — a payout names no account, and a
     * destination equal to the value is no match. */
    arm_aimed(s, "error_500_before_effect", 1, -1,
              "{\"account\":\"dst_tok_acct\"}");
    create_at(s, &PAYOUTS, "pk-4", "dst_tok_acct", "4", "ref-p4", NULL, &r);
    assert_effect(&PAYOUTS, &r, "dst_tok_acct", "ref-p4");
    hres_free(&r);
    assert_int_equal(n_armed(s), 1);
    http(s, "DELETE", "/_control/faults", NULL, NULL, 0, &r);
    hres_free(&r);
    arm_aimed(s, "error_500_before_effect", 1, -1, "{\"account\":\"A-2\"}");
    create(s, "ak-2", "A-1", "1", "ref-a2", NULL, &r);
    assert_credit(&r, "A-1", "ref-a2");
    hres_free(&r);
    create(s, "ak-3", "A-2", "1", "ref-a3", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    /* Both members: a request must match both. */
    arm_aimed(s, "error_500_before_effect", 1, -1,
              "{\"account\":\"A-3\",\"reference\":\"ref-both\"}");
    create(s, "ak-4", "A-3", "1", "ref-other", NULL, &r);
    assert_credit(&r, "A-3", "ref-other");
    hres_free(&r);
    create(s, "ak-5", "A-4", "1", "ref-both", NULL, &r);
    assert_credit(&r, "A-4", "ref-both");
    hres_free(&r);
    create(s, "ak-6", "A-3", "1", "ref-both", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(n_armed(s), 0);
    assert_int_equal(counter(s, "credits_created"), 4);
}

void invalid_aimed_faults_are_400_naming_the_match_member_and_arm_nothing(
    void **state)
{
    static const struct {
        const char *match, *field;
    } bad[] = {
        {"\"aim-x\"", "match"},
        {"{}", "match"},
        {"null", "match"},
        {"{\"destination\":\"dst_tok_1\"}", "match.destination"},
        {"{\"idempotency_key\":\"k\",\"when\":1}", "match.when"},
        {"{\"idempotency_key\":\"\"}", "match.idempotency_key"},
        {"{\"idempotency_key\":\"a key\"}", "match.idempotency_key"},
        {"{\"idempotency_key\":7}", "match.idempotency_key"},
        {"{\"reference\":\"\"}", "match.reference"},
        {"{\"reference\":\"tab\\there\"}", "match.reference"},
        {"{\"account\":\"A 1\"}", "match.account"},
    };
    char big[600], body[1024];
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"fault\":\"error_500_after_effect\",\"match\":%s}",
                 bad[i].match);
        post_json(s, "/_control/faults", body, &r);
        assert_error(&r, 400, "invalid_request");
        assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    /* One byte over each member's size. */
    static const struct {
        const char *member;
        size_t max;
    } sized[] = {
        {"idempotency_key", 255}, {"reference", 128}, {"account", 128}};
    for (size_t i = 0; i < sizeof sized / sizeof sized[0]; i++) {
        char field[40];

        memset(big, 'k', sized[i].max + 1);
        big[sized[i].max + 1] = '\0';
        snprintf(body, sizeof body,
                 "{\"fault\":\"error_500_after_effect\",\"match\":{\"%s\":"
                 "\"%s\"}}",
                 sized[i].member, big);
        post_json(s, "/_control/faults", body, &r);
        assert_error(&r, 400, "invalid_request");
        snprintf(field, sizeof field, "match.%s", sized[i].member);
        assert_str(jstr(r.json, "field"), field);
        hres_free(&r);
        big[sized[i].max] = '\0'; /* the largest allowed arms */
        snprintf(body, sizeof body,
                 "{\"fault\":\"error_500_after_effect\",\"match\":{\"%s\":"
                 "\"%s\"}}",
                 sized[i].member, big);
        post_json(s, "/_control/faults", body, &r);
        assert_int_equal(r.status, 200);
        hres_free(&r);
    }
    /* An unknown member's long name is cut on a character boundary: the
     * answer stays JSON ("é" is 2 bytes; the cut lands inside one). */
    {
        char name[2 * 60 + 1] = "", *field;

        for (int i = 0; i < 60; i++)
            strcat(name, "\xc3\xa9");
        snprintf(body, sizeof body,
                 "{\"fault\":\"error_500_after_effect\",\"match\":{\"xy%s\":"
                 "\"k\"}}",
                 name);
        post_json(s, "/_control/faults", body, &r);
        assert_error(&r, 400, "invalid_request");
        field = (char *)jstr(r.json, "field");
        assert_non_null(field);
        assert_true(strncmp(field, "match.xy\xc3\xa9", 10) == 0);
        assert_true(strlen(field) < 80);
        hres_free(&r);
    }
    assert_int_equal(n_armed(s), 3);
}
