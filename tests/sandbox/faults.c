/*
 * faults.c — the armed faults (POST /_control/faults): a dropped answer,
 * delays and 500s before and after the effect, an exit after it, the
 * order and count of faults, and refused fault requests.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Faults
 * ========================================================================= */
void drop_response_after_effect_gives_no_http_answer_but_the_credit_exists_and_a_retry_replays_it(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "drop_response_after_effect", 1, -1);
    create(s, "key-drop", "A-1", "20", "ref-drop", NULL, &a);
    assert_int_equal(a.status, 0);       /* no status line at all */
    assert_int_not_equal(a.cc, CURLE_OK);
    assert_null(a.body);
    assert_int_equal(counter(s, "credits_created"), 1);
    create(s, "key-drop", "A-1", "20", "ref-drop", NULL, &b);
    assert_credit(&b, "A-1", "ref-drop");
    found = lookup(s, "idempotency_key", "key-drop");
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "idempotent_replays"), 1);
    hres_free(&a);
    hres_free(&b);
}

void delay_before_effect_creates_nothing_until_the_delay_has_passed(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-db", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_before_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    t_sleep_ms(600);
    assert_int_equal(counter(s, "credits_created"), 0);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-db");
    assert_true(bg.r.elapsed_ms >= 1500);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&bg.r);
}

void delay_after_effect_commits_the_credit_before_the_delayed_answer(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    bg_create bg = {NULL, "key-da", {0}, false};
    pthread_t th;

    (void)state;
    sbx_start(s);
    bg.s = s;
    arm(s, "delay_after_effect", 1, 1500);
    assert_int_equal(pthread_create(&th, NULL, bg_create_main, &bg), 0);
    t_sleep_ms(600);
    /* Answered later; the effect is already there. */
    assert_int_equal(lookup_n(s, "idempotency_key", "key-da"), 1);
    pthread_join(th, NULL);
    assert_credit(&bg.r, "A-1", "key-da");
    assert_true(bg.r.elapsed_ms >= 1500);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&bg.r);
}

void error_500_after_effect_answers_500_internal_but_the_credit_exists(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_after_effect", 1, -1);
    create(s, "key-500a", "A-1", "7", "ref-500a", NULL, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "credits_created"), 1);
    found = lookup(s, "idempotency_key", "key-500a");
    assert_int_equal(json_array_size(found), 1);
    create(s, "key-500a", "A-1", "7", "ref-500a", NULL, &b);
    assert_credit(&b, "A-1", "ref-500a");
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    hres_free(&a);
    hres_free(&b);
}

void error_500_before_effect_answers_500_internal_and_creates_nothing(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres a, b;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_before_effect", 1, -1);
    create(s, "key-500b", "A-1", "7", "ref-500b", NULL, &a);
    assert_error(&a, 500, "internal");
    assert_int_equal(counter(s, "credits_created"), 0);
    assert_int_equal(counter(s, "create_requests"), 1);
    assert_int_equal(lookup_n(s, "idempotency_key", "key-500b"), 0);
    create(s, "key-500b", "A-1", "7", "ref-500b", NULL, &b);
    assert_credit(&b, "A-1", "ref-500b"); /* the key was never recorded */
    assert_int_equal(counter(s, "idempotent_replays"), 0);
    hres_free(&a);
    hres_free(&b);
}

void exit_after_effect_kills_the_process_and_after_a_restart_the_key_replays_the_durable_credit(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b;
    int st;

    (void)state;
    sbx_start(s);
    arm(s, "exit_after_effect", 1, -1);
    create(s, "key-exit", "A-1", "30", "ref-exit", NULL, &a);
    assert_int_equal(a.status, 0);
    assert_int_not_equal(a.cc, CURLE_OK);
    st = t_proc_wait(s->pid, EXIT_MS);
    assert_int_equal(t_proc_exit_code(st), 137);
    s->pid = 0;
    /* Durable before the process died: read the file itself. */
    assert_int_equal(state_credit_rows(s->state), 1);
    sbx_start(s);
    assert_int_equal(counter(s, "credits_created"), 1);
    create(s, "key-exit", "A-1", "30", "ref-exit", NULL, &b);
    assert_credit(&b, "A-1", "ref-exit");
    found = lookup(s, "reference", "ref-exit");
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(counter(s, "credits_created"), 1);
    assert_int_equal(counter(s, "idempotent_replays"), 1);
    assert_int_equal(counter(s, "create_requests"), 2);
    hres_free(&a);
    hres_free(&b);
}

void faults_fire_in_arming_order_for_their_count_and_delete_clears_them(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    arm(s, "error_500_before_effect", 2, -1);
    arm(s, "error_500_after_effect", 1, -1);
    get(s, "/_control/faults", &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 2);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(r.json, "faults"), 0),
                         "count")),
                     2);
    hres_free(&r);
    create(s, "key-f1", "A-1", "1", "ref-f1", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    create(s, "key-f2", "A-1", "1", "ref-f2", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 0);
    create(s, "key-f3", "A-1", "1", "ref-f3", NULL, &r);
    assert_error(&r, 500, "internal");
    hres_free(&r);
    assert_int_equal(counter(s, "credits_created"), 1); /* after the effect */
    create(s, "key-f4", "A-1", "1", "ref-f4", NULL, &r);
    assert_int_equal(r.status, 201); /* the queue is empty */
    hres_free(&r);
    arm(s, "error_500_before_effect", 5, -1);
    http(s, "DELETE", "/_control/faults", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 0);
    hres_free(&r);
    create(s, "key-f5", "A-1", "1", "ref-f5", NULL, &r);
    assert_int_equal(r.status, 201);
    hres_free(&r);
}

void invalid_fault_requests_are_400_and_arm_nothing(void **state)
{
    static const struct {
        const char *body, *code, *field;
    } bad[] = {
        {"{\"fault\":\"explode\"}", "invalid_request", "fault"},
        {"{\"count\":1}", "invalid_request", "fault"},
        {"{\"fault\":\"delay_after_effect\"}", "invalid_request", "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"ms\":5}", "invalid_request",
         "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"count\":0}",
         "invalid_request", "count"},
        {"{\"fault\":\"error_500_after_effect\",\"count\":\"1\"}",
         "invalid_request", "count"},
        {"{\"fault\":\"delay_before_effect\",\"ms\":60001}", "invalid_request",
         "ms"},
        {"{\"fault\":\"error_500_after_effect\",\"when\":1}",
         "invalid_request", "when"},
        {"[\"error_500_after_effect\"]", "invalid_json", NULL},
        {"{", "invalid_json", NULL},
    };
    sbx *s = sbx_new("--control", END);
    hres r;

    (void)state;
    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        post_json(s, "/_control/faults", bad[i].body, &r);
        assert_error(&r, 400, bad[i].code);
        if (bad[i].field)
            assert_str(jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    get(s, "/_control/faults", &r);
    assert_int_equal(json_array_size(json_object_get(r.json, "faults")), 0);
    hres_free(&r);
}
