/*
 * reuse.c — kept-alive provider connections (lib/provider/client.c CL9,
 * docs/design.md KA1): the bounds og_provider_set_reuse takes, reuse
 * staying off for a table without atomic same-key handling, and the
 * re-send libcurl makes on its own when a reused connection turns out
 * closed, answered by the sandbox as one request — every credit exactly
 * once — where the same fault on a fresh connection is an UNKNOWN.
 */
#include "harness.h"
#include "cases.h"

#define IDLE_US (INT64_C(30) * 1000000)
#define ROUNDS 30

void reuse_bounds_are_checked_and_a_table_without_atomic_keys_keeps_it_off(
    void **state)
{
    static const char from[] = "\"atomic_same_key\": true";
    static const char to[] = "\"atomic_same_key\": false";
    og_provider_table_error err;
    og_provider_table *racy = NULL;
    og_provider *p = NULL, *q = NULL;
    char path[1024], *text, *at, *edited;
    size_t len = 0;
    int n;

    (void)state;
    assert_int_equal(og_provider_open("http://127.0.0.1:9", NULL, g_table, &p),
                     0);
    assert_int_equal(og_provider_set_reuse(NULL, 4, IDLE_US), OG_EINVAL);
    assert_int_equal(og_provider_set_reuse(p, -1, IDLE_US), OG_EINVAL);
    assert_int_equal(og_provider_set_reuse(
                         p, OG_PROVIDER_REUSE_CONNECTIONS_MAX + 1, IDLE_US),
                     OG_EINVAL);
    assert_int_equal(og_provider_set_reuse(p, 4, 999999), OG_EINVAL);
    assert_int_equal(og_provider_set_reuse(
                         p, 4, OG_PROVIDER_REUSE_IDLE_MAX_US + 1),
                     OG_EINVAL);
    assert_false(og_provider_reuses(p));
    assert_int_equal(og_provider_set_reuse(p, 0, 0), 0); /* off: fine */
    assert_false(og_provider_reuses(p));
    assert_int_equal(og_provider_set_reuse(p, 4, IDLE_US), 0);
    assert_true(og_provider_reuses(p));
    assert_int_equal(og_provider_set_reuse(p, 4, IDLE_US), OG_EINVAL);
    og_provider_free(p);

    /* The same table declaring no atomic same-key handling: stays off. */
    snprintf(path, sizeof path, "%s/%s",
             getenv("OG_TEST_SOURCE_ROOT") ? getenv("OG_TEST_SOURCE_ROOT")
                                           : ".",
             TABLE_PATH);
    text = t_slurp(path, &len);
    assert_non_null(text);
    at = strstr(text, from);
    assert_non_null(at);
    edited = malloc(len + sizeof to);
    assert_non_null(edited);
    n = snprintf(edited, len + sizeof to, "%.*s%s%s", (int)(at - text), text,
                 to, at + strlen(from));
    assert_true(n > 0);
    assert_int_equal(og_provider_table_load(edited, (size_t)n, &racy, &err),
                     0);
    free(edited);
    free(text);
    assert_false(og_provider_table_properties(racy)->atomic_same_key);
    assert_int_equal(og_provider_open("http://127.0.0.1:9", NULL, racy, &q), 0);
    assert_int_equal(og_provider_set_reuse(q, 4, IDLE_US), 0);
    assert_false(og_provider_reuses(q));
    og_provider_free(q);
    og_provider_table_free(racy);
}

void a_closed_connection_on_a_fresh_call_is_unknown(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    /* Reuse off (the default): the close is no_response, nothing made. */
    assert_int_equal(create(f->p, "ka-0000", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    arm(&f->s, "close_before_effect", -1);
    assert_int_equal(create(f->p, "ka-0001", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "no_response");
    assert_int_equal(stat_of(&f->s, "credits_created"), 1);
    assert_int_equal(stat_of(&f->s, "create_requests"), 1);
}

void kept_alive_connections_closed_by_the_provider_make_every_credit_once(
    void **state)
{
    fx *f = *state;
    og_provider_outcome o;
    char key[32], id[OG_PROVIDER_REF_MAX + 1];
    int i, drops = 0, closes = 0;

    assert_int_equal(og_provider_set_reuse(f->p, 4, IDLE_US), 0);
    assert_true(og_provider_reuses(f->p));
    for (i = 0; i < ROUNDS; i++) {
        /* Round 0 opens the connection the others reuse; then each round
         * the provider closes the kept connection: before the effect (an
         * idle close meeting the request) or after it (answer lost). */
        if (i > 0 && i % 3 == 1) {
            arm(&f->s, "close_before_effect", -1);
            closes++;
        } else if (i > 0 && i % 3 == 2) {
            arm(&f->s, "drop_response_after_effect", -1);
            drops++;
        }
        snprintf(key, sizeof key, "ka-%04d", i);
        assert_int_equal(create(f->p, key, "acct-1", CALL_US, &o), 0);
        /* libcurl re-sent it on a fresh connection, same key and body:
         * created, or the replay of the credit the lost answer made. */
        assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
        must_find(f, key, id);
        assert_string_equal(o.reference, id);
    }
    assert_true(closes > 0 && drops > 0);
    /* Exactly once each; a dropped answer's re-send was a replay. */
    assert_int_equal(stat_of(&f->s, "credits_created"), ROUNDS);
    assert_int_equal(stat_of(&f->s, "idempotent_replays"), drops);
    assert_int_equal(stat_of(&f->s, "create_requests"), ROUNDS + drops);
}
