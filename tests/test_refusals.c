/*
 * test_refusals.c — the refusal cache's pure core (src/serve/refusals.h;
 * docs/design.md, RF1-RF6): what it keeps, what it answers, what it
 * forgets. The HTTP behaviour on both engines is tests/serve/refusals.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "refusals.h"
#include "support.h"

#define HOLDER "0b6c1e52-3f0e-4c1a-9a55-3f1d2b7c9e10"
#define OTHER "7d0e8f3a-1b2c-4d5e-8f90-a1b2c3d4e5f6"
#define NOW 1000000000000LL
#define UNTIL (NOW + 60000000LL)

static og_admission spent(void)
{
    og_admission a;

    memset(&a, 0, sizeof a);
    a.outcome = OG_OUTCOME_REFUSED;
    a.refusal = OG_REFUSAL_GRANT_SPENT;
    a.key_held = true;
    memcpy(a.held_by, HOLDER, sizeof HOLDER);
    return a;
}

static void key(const og_refusals *c, const char *token, og_refusals_key *k)
{
    og_refusals_key_of(c, token, "agent-1", "credit.apply", "A-1", "1.00",
                       "USD", k);
}

static void hits_only_the_same_bytes_binding_snapshot_and_another_operation(
    void **state)
{
    og_refusals *c = og_refusals_new(64);
    og_admission a = spent();
    og_refusals_key k, k2;
    og_refusals_hit hit;

    (void)state;
    assert_non_null(c);
    key(c, "tok.en.A", &k);
    og_refusals_put(c, &k, 7, UNTIL, &a, "iss", "g-1");
    assert_int_equal(og_refusals_find(c, &k, 7, NOW, OTHER, &hit), 1);
    assert_int_equal(hit.refusal, OG_REFUSAL_GRANT_SPENT);
    assert_string_equal(hit.issuer, "iss");
    assert_string_equal(hit.grant_id, "g-1");
    /* RF5: the holder's own retry is not answered. */
    assert_int_equal(og_refusals_find(c, &k, 7, NOW, HOLDER, &hit), 0);
    /* RF3: another snapshot of keys. */
    assert_int_equal(og_refusals_find(c, &k, 8, NOW, OTHER, &hit), 0);
    /* RF2: one byte off; another binding. */
    key(c, "tok.en.B", &k2);
    assert_int_equal(og_refusals_find(c, &k2, 7, NOW, OTHER, &hit), 0);
    og_refusals_key_of(c, "tok.en.A", "agent-2", "credit.apply", "A-1",
                       "1.00", "USD", &k2);
    assert_int_equal(og_refusals_find(c, &k2, 7, NOW, OTHER, &hit), 0);
    /* RF4: from the grant's expiry on, never again (the entry is freed). */
    assert_int_equal(og_refusals_find(c, &k, 7, UNTIL, OTHER, &hit), 0);
    assert_int_equal(og_refusals_find(c, &k, 7, NOW, OTHER, &hit), 0);
    og_refusals_free(c);
}

static void keeps_only_refusals_of_a_held_key(void **state)
{
    og_refusals *c = og_refusals_new(64);
    og_refusals_key k;
    og_refusals_hit hit;
    og_admission a;

    (void)state;
    assert_non_null(c);
    key(c, "tok.en.C", &k);
    /* RF1: not held (a deadline, an operation id taken), or no outcome
     * that refused: nothing is kept. */
    a = spent();
    a.key_held = false;
    og_refusals_put(c, &k, 1, UNTIL, &a, "iss", "g");
    a = spent();
    a.refusal = OG_REFUSAL_OPERATION_ID_TAKEN;
    og_refusals_put(c, &k, 1, UNTIL, &a, "iss", "g");
    a = spent();
    a.held_by[0] = '\0'; /* spent, but by whom? */
    og_refusals_put(c, &k, 1, UNTIL, &a, "iss", "g");
    a = spent();
    a.outcome = OG_OUTCOME_ALREADY_ADMITTED;
    og_refusals_put(c, &k, 1, UNTIL, &a, "iss", "g");
    assert_int_equal(og_refusals_find(c, &k, 1, NOW, OTHER, &hit), 0);
    /* A revocation holds the key without an operation: every id. */
    a = spent();
    a.refusal = OG_REFUSAL_GRANT_REVOKED;
    a.held_by[0] = '\0';
    og_refusals_put(c, &k, 1, UNTIL, &a, "iss", "g");
    assert_int_equal(og_refusals_find(c, &k, 1, NOW, HOLDER, &hit), 1);
    assert_int_equal(hit.refusal, OG_REFUSAL_GRANT_REVOKED);
    og_refusals_free(c);
}

static void a_full_set_replaces_its_oldest_entry(void **state)
{
    og_refusals *c = og_refusals_new(4); /* one set of four ways */
    og_admission a = spent();
    og_refusals_key k[5];
    og_refusals_hit hit;
    char tok[32];

    (void)state;
    assert_non_null(c);
    for (int i = 0; i < 5; i++) {
        snprintf(tok, sizeof tok, "tok.en.%d", i);
        key(c, tok, &k[i]);
    }
    for (int i = 0; i < 4; i++)
        og_refusals_put(c, &k[i], 1, UNTIL, &a, "iss", "g");
    for (int i = 0; i < 4; i++)
        assert_int_equal(og_refusals_find(c, &k[i], 1, NOW, OTHER, &hit), 1);
    og_refusals_put(c, &k[4], 1, UNTIL, &a, "iss", "g");
    assert_int_equal(og_refusals_find(c, &k[0], 1, NOW, OTHER, &hit), 0);
    for (int i = 1; i < 5; i++)
        assert_int_equal(og_refusals_find(c, &k[i], 1, NOW, OTHER, &hit), 1);
    /* Filling a key again keeps one entry for it. */
    og_refusals_put(c, &k[4], 1, UNTIL, &a, "iss", "g");
    for (int i = 1; i < 5; i++)
        assert_int_equal(og_refusals_find(c, &k[i], 1, NOW, OTHER, &hit), 1);
    og_refusals_free(c);
    assert_null(og_refusals_new(0)); /* 0 entries: off */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            hits_only_the_same_bytes_binding_snapshot_and_another_operation),
        cmocka_unit_test(keeps_only_refusals_of_a_held_key),
        cmocka_unit_test(a_full_set_replaces_its_oldest_entry),
    };

    if (sodium_init() < 0)
        return 1;
    return t_run_tests("refusals", tests, NULL, NULL);
}
