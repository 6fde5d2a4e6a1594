/*
 * codes.c — authorization codes: POST /oauth/token (RFC 6749 4.1.3)
 * exchanges each code once, under concurrency, faults and restarts; a
 * version 1 state file gains codes and keeps its credits.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Authorization codes: POST /oauth/token (RFC 6749 4.1.3), once per code
 * ========================================================================= */

/* An RFC 6749 5.2 error: 400, error, error_description. */
static void assert_oauth_error(const hres *r, const char *code)
{
    if (r->status != 400 || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), code) != 0 ||
        !jstr(r->json, "error_description"))
        fail_msg("expected 400 %s, got %ld (curl %d): %s", code, r->status,
                 (int)r->cc, r->body ? r->body : "");
}

void code_is_exchanged_once_and_every_later_exchange_is_400_invalid_grant(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64], other[64];
    hres a, b, c, d;

    (void)state;
    sbx_start(s);
    mint(s, code);
    mint(s, other);
    exchange(s, code, &a);
    assert_token(&a);
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    exchange(s, "ac_0123456789abcdef0123456789abcdef", &c); /* never minted */
    assert_oauth_error(&c, "invalid_grant");
    /* Another code is unaffected, and each exchange has its own tokens. */
    exchange(s, other, &d);
    assert_token(&d);
    assert_string_not_equal(jstr(a.json, "access_token"),
                            jstr(d.json, "access_token"));
    assert_int_equal(counter(s, "codes_minted"), 2);
    assert_int_equal(counter(s, "code_exchanges"), 2);
    assert_int_equal(counter(s, "token_requests"), 4);
    assert_int_equal(counter(s, "invalid_grants"), 2);
    assert_int_equal(counter(s, "credits_created"), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
    hres_free(&d);
}

typedef struct xracer {
    pthread_barrier_t *start;
    const sbx *s;
    const char *code;
    hres r;
} xracer;

static void *xracer_main(void *arg)
{
    xracer *x = arg;

    pthread_barrier_wait(x->start);
    exchange(x->s, x->code, &x->r);
    return NULL;
}

void twenty_concurrent_exchanges_of_one_code_succeed_exactly_once(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    pthread_barrier_t start;
    pthread_t th[RACERS];
    xracer xs[RACERS];
    char code[64];
    int ok = 0, spent = 0;

    (void)state;
    sbx_start(s);
    mint(s, code);
    pthread_barrier_init(&start, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
        xs[i] = (xracer){&start, s, code, {0}};
        assert_int_equal(pthread_create(&th[i], NULL, xracer_main, &xs[i]), 0);
    }
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        ok += xs[i].r.status == 200;
        spent += xs[i].r.status == 400 &&
                 strcmp(jstr(xs[i].r.json, "error"), "invalid_grant") == 0;
        hres_free(&xs[i].r);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(ok, 1);
    assert_int_equal(spent, RACERS - 1);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    assert_int_equal(counter(s, "token_requests"), RACERS);
}

void malformed_token_requests_are_400_in_rfc_6749_shape_and_spend_nothing(
    void **state)
{
    static const struct {
        const char *form, *error;
    } bad[] = {
        {"code=CODE", "invalid_request"},                 /* no grant_type */
        {"grant_type=&code=CODE", "invalid_request"},     /* empty = absent */
        {"grant_type=password&code=CODE", "unsupported_grant_type"},
        {"grant_type=authorization_code", "invalid_request"}, /* no code */
        {"grant_type=authorization_code&code=", "invalid_request"},
        {"grant_type=authorization_code&code=CODE&code=CODE",
         "invalid_request"},                              /* repeated */
        {"grant_type=authorization_code&code=CODE%2", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%zz", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%00", "invalid_request"},
        {"grant_type=authorization_code&code=CODE%ff", "invalid_request"},
    };
    sbx *s = sbx_new("--control", END);
    char code[64], form[256], *p;
    hres r;

    (void)state;
    sbx_start(s);
    mint(s, code);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* CODE stands for the real code. */
        snprintf(form, sizeof form, "%s", bad[i].form);
        while ((p = strstr(form, "CODE"))) {
            char rest[256];

            snprintf(rest, sizeof rest, "%s", p + 4);
            snprintf(p, sizeof form - (size_t)(p - form), "%s%s", code, rest);
        }
        token_raw(s, form, &r);
        print_message("%s\n", bad[i].form);
        assert_oauth_error(&r, bad[i].error);
        hres_free(&r);
    }
    /* JSON is not the token endpoint's media type. */
    snprintf(form, sizeof form, "{\"grant_type\":\"authorization_code\","
                                "\"code\":\"%s\"}", code);
    post_json(s, "/oauth/token", form, &r);
    assert_error(&r, 415, "unsupported_media_type");
    hres_free(&r);
    assert_int_equal(counter(s, "token_requests"), 0);
    assert_int_equal(counter(s, "code_exchanges"), 0);
    /* The code is still good; unknown parameters are ignored (RFC 6749
     * 3.2), %-escapes and '+' decode. */
    snprintf(form, sizeof form,
             "redirect_uri=https%%3A%%2F%%2Fapp.example%%2Fcb&client_id=a+b&"
             "grant_type=authorization%%5Fcode&code=%s&&",
             code);
    token_raw(s, form, &r);
    assert_token(&r);
    hres_free(&r);
    assert_int_equal(counter(s, "code_exchanges"), 1);
}

/* The fault queue acts on exchanges as on creates: the effect is the
 * code's exchange. */
void dropped_answer_after_an_exchange_leaves_the_code_spent(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "drop_response_after_effect", 1, -1);
    exchange(s, code, &a);
    assert_int_equal(a.status, 0); /* no status line at all */
    assert_int_not_equal(a.cc, CURLE_OK);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    /* The result is gone: the provider never gives it twice. */
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
}

void delay_faults_hold_an_exchange_before_or_after_the_code_is_spent(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char c1[64], c2[64];
    bg_create b1 = {NULL, c1, {0}, true}, b2 = {NULL, c2, {0}, true};
    pthread_t th;

    (void)state;
    sbx_start(s);
    b1.s = b2.s = s;
    mint(s, c1);
    mint(s, c2);
    /* Before: nothing is spent during the delay. */
    arm(s, "delay_before_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &b1), 0);
    t_sleep_ms(600);
    assert_int_equal(counter(s, "code_exchanges"), 0);
    pthread_join(th, NULL);
    assert_token(&b1.r);
    assert_true(b1.r.elapsed_ms >= 1500);
    /* After: the code is spent, the answer still to come. */
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &b2), 0);
    for (int64_t until = t_now_ms() + 1200;
         counter(s, "code_exchanges") < 2 && t_now_ms() < until;)
        t_sleep_ms(20);
    assert_int_equal(counter(s, "code_exchanges"), 2);
    pthread_join(th, NULL);
    assert_token(&b2.r);
    assert_true(b2.r.elapsed_ms >= 1500);
    hres_free(&b1.r);
    hres_free(&b2.r);
}

void error_500_before_an_exchange_spends_nothing_and_after_it_spends_the_code(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b, c;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "error_500_before_effect", 1, -1);
    exchange(s, code, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "code_exchanges"), 0);
    assert_int_equal(counter(s, "token_requests"), 1);
    arm(s, "error_500_after_effect", 1, -1);
    exchange(s, code, &b);
    assert_error(&b, 500, "internal");
    assert_int_equal(counter(s, "code_exchanges"), 1);
    exchange(s, code, &c);
    assert_oauth_error(&c, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

void exit_after_an_exchange_leaves_the_code_durably_spent(void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres a, b;

    (void)state;
    sbx_start(s);
    mint(s, code);
    arm(s, "exit_after_effect", 1, -1);
    exchange(s, code, &a);
    assert_int_equal(a.status, 0);
    assert_int_equal(t_proc_exit_code(t_proc_wait(s->pid, EXIT_MS)), 137);
    s->pid = 0;
    sbx_start(s);
    assert_int_equal(counter(s, "code_exchanges"), 1);
    exchange(s, code, &b);
    assert_oauth_error(&b, "invalid_grant");
    hres_free(&a);
    hres_free(&b);
}

void minting_takes_no_members_and_codes_survive_a_restart(void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    post_json(s, "/_control/codes", "{\"client_id\":\"x\"}", &r);
    assert_error(&r, 400, "invalid_request");
    hres_free(&r);
    post_json(s, "/_control/codes", "{}", &r);
    assert_int_equal(r.status, 200);
    secret_add(jstr(r.json, "code"));
    hres_free(&r);
    mint(s, code);
    sbx_restart(s);
    assert_int_equal(counter(s, "codes_minted"), 2);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
}

/* A state file of schema version 1 (credits only) gains the codes table
 * and keeps its credits. */
void version_1_state_file_gains_codes_and_keeps_its_credits(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    char code[64];
    hres r;

    (void)state;
    sbx_start(s);
    create(s, "key-v1", "A-1", "5", "ref-v1", NULL, &r);
    assert_credit(&r, "A-1", "ref-v1");
    hres_free(&r);
    restart_after(s, "DROP TABLE codes; PRAGMA user_version = 1");
    assert_int_equal(counter(s, "credits_created"), 1);
    mint(s, code);
    exchange(s, code, &r);
    assert_token(&r);
    hres_free(&r);
}
