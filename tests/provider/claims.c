/*
 * claims.c — what a create and a lookup come to, for both APIs (one body
 * per claim, a CLAIM per API): created, replayed under the same key,
 * closed FAILED, busy TRANSIENT with Retry-After, async UNKNOWN until a
 * lookup finds it, late FAILED, a key reused with other parameters
 * UNKNOWN; every fault that may follow the effect is UNKNOWN and the
 * record is there; a missing reference is not found, never failed; a
 * refused connection is connect_failed.
 */
#include "harness.h"
#include "cases.h"

/* A create is SUCCEEDED with the new record's id as its reference. */
static void create_succeeds(fx *f, const capi *a)
{
    og_provider_outcome o;

    assert_int_equal(create_in(a, f->p, "op-0001", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(strncmp(o.reference, a->id_prefix, 3), 0);
    assert_int_equal(strlen(o.reference), 27);
    assert_int_equal(o.rule, 0);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
}

CLAIM(create_succeeds_with_the_credit_id, create_succeeds(*state, &CREDITS))
CLAIM(payout_create_succeeds_with_the_payout_id,
      create_succeeds(*state, &PAYOUTS))

/* The same key again is SUCCEEDED with the same reference, one record. */
static void same_key_replays(fx *f, const capi *a)
{
    og_provider_outcome o1, o2;

    assert_int_equal(create_in(a, f->p, "op-0002", a->open, CALL_US, &o1), 0);
    assert_outcome(&o1, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(create_in(a, f->p, "op-0002", a->open, CALL_US, &o2), 0);
    assert_outcome(&o2, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o1.reference, o2.reference);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
    assert_int_equal(stat_of(&f->s, a->c_replays), 1);
    assert_int_equal(stat_of(&f->s, a->c_requests), 2);
}

CLAIM(the_same_key_again_replays_the_same_credit,
      same_key_replays(*state, &CREDITS))
CLAIM(the_same_key_again_replays_the_same_payout,
      same_key_replays(*state, &PAYOUTS))

/* A closed target is FAILED with the closed code, and stays so. */
static void closed_fails(fx *f, const capi *a)
{
    og_provider_outcome o;

    for (int i = 0; i < 2; i++) {
        assert_int_equal(create_in(a, f->p, "op-0003", a->closed, CALL_US, &o),
                         0);
        assert_outcome(&o, OG_CLASS_FAILED, a->closed_code);
        assert_string_equal(o.reference, "");
    }
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(closed_account_fails_and_stays_failed, closed_fails(*state, &CREDITS))
CLAIM(closed_destination_fails_and_stays_failed,
      closed_fails(*state, &PAYOUTS))

/* A busy target is TRANSIENT rate_limited with Retry-After. */
static void busy_is_transient(fx *f, const capi *a)
{
    og_provider_outcome o;

    assert_int_equal(create_in(a, f->p, "op-0004", a->busy, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "rate_limited");
    assert_int_equal(o.retry_after_s, 1);
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(busy_account_is_transient_with_retry_after,
      busy_is_transient(*state, &CREDITS))
CLAIM(busy_destination_is_transient_with_retry_after,
      busy_is_transient(*state, &PAYOUTS))

/* An async target is UNKNOWN pending (accepted is not completed) until a
 * lookup finds it final; then its key answers the complete record. */
static void async_is_pending_until_found(fx *f, const capi *a)
{
    og_provider_outcome o, l;
    int rc = -1;

    assert_int_equal(create_in(a, f->p, "op-0005", a->async, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "pending");
    assert_int_equal(strncmp(o.reference, a->id_prefix, 3), 0);
    /* Found, but not final: still UNKNOWN. */
    rc = lookup_in(a, f->p, "op-0005", a->async, &l);
    if (rc == 1 && l.cls == OG_CLASS_UNKNOWN) {
        assert_string_equal(l.reason, "pending");
        assert_string_equal(l.reference, o.reference);
    }
    /* Completes after --async-complete-ms 300. */
    for (int i = 0; i < 100; i++) {
        rc = lookup_in(a, f->p, "op-0005", a->async, &l);
        assert_int_equal(rc, 1);
        if (l.cls == OG_CLASS_SUCCEEDED)
            break;
        t_sleep_ms(50);
    }
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "found");
    assert_string_equal(l.reference, o.reference);
    /* And the same key now answers the complete record. */
    assert_int_equal(create_in(a, f->p, "op-0005", a->async, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, l.reference);
}

CLAIM(async_account_is_pending_until_a_lookup_finds_it,
      async_is_pending_until_found(*state, &CREDITS))
CLAIM(async_payout_is_pending_until_a_lookup_finds_it_completed,
      async_is_pending_until_found(*state, &PAYOUTS))

/* A request whose expires_at is past the sandbox's skew is FAILED
 * request_expired, and nothing was created. */
static void late_fails_expired(fx *f, const capi *a)
{
    og_provider_outcome o;

    /* expires_at a minute ago: past the sandbox's 5 s skew. */
    assert_int_equal(a->create(f->p, "op-0006", a->open, "1", "EUR",
                               "op-0006", wall_us() - INT64_C(60000000),
                               CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_FAILED, "request_expired");
    assert_int_equal(stat_of(&f->s, a->c_rows), 0);
}

CLAIM(a_late_request_fails_expired, late_fails_expired(*state, &CREDITS))
CLAIM(a_late_payout_fails_expired, late_fails_expired(*state, &PAYOUTS))

void a_key_reused_with_other_parameters_is_unknown(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    assert_int_equal(create(f->p, "op-0007", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    /* This request creates nothing, but the key's first use did. */
    assert_int_equal(og_provider_create_credit(f->p, "op-0007", "acct-1", "26",
                                               "EUR", "op-0007",
                                               g_expires_us, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "idempotency_mismatch");
    assert_int_equal(stat_of(&f->s, "credits_created"), 1);
}

/* ===========================================================================
 * Faults after (or around) the effect: UNKNOWN, and the credit exists
 * ========================================================================= */

static void dropped_is_unknown_and_found(fx *f, const capi *a)
{
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;

    arm(&f->s, "drop_response_after_effect", -1);
    assert_int_equal(create_in(a, f->p, "op-0010", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "no_response");
    must_find_in(f, a, "op-0010", a->open, id);
    /* Resending with the same key replays that record; still one. */
    assert_int_equal(create_in(a, f->p, "op-0010", a->open, CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, id);
    assert_int_equal(stat_of(&f->s, a->c_rows), 1);
}

CLAIM(dropped_response_is_unknown_and_the_credit_exists,
      dropped_is_unknown_and_found(*state, &CREDITS))
CLAIM(dropped_payout_response_is_unknown_and_a_lookup_finds_the_payout,
      dropped_is_unknown_and_found(*state, &PAYOUTS))

void error_500_after_effect_is_unknown(void **state)
{
    fx *f = *state;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;

    arm(&f->s, "error_500_after_effect", -1);
    assert_int_equal(create(f->p, "op-0011", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "internal");
    must_find(f, "op-0011", id);
    assert_int_equal(stat_of(&f->s, "credits_created"), 1);
}

void error_500_before_effect_is_unknown_too(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    /* The same answer as after the effect: the client cannot tell, so it
     * must not guess. */
    arm(&f->s, "error_500_before_effect", -1);
    assert_int_equal(create(f->p, "op-0012", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "internal");
    assert_int_equal(og_provider_lookup(f->p, "op-0012", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "not_found");
}

void a_delay_after_effect_beyond_the_timeout_is_unknown(void **state)
{
    fx *f = *state;
    const int64_t timeout_us = 1000000;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;
    int64_t t0, took;

    arm(&f->s, "delay_after_effect", 4000);
    t0 = mono_us();
    assert_int_equal(create(f->p, "op-0013", "acct-1", timeout_us, &o), 0);
    took = mono_us() - t0;
    assert_outcome(&o, OG_CLASS_UNKNOWN, "timeout");
    /* The call returns on its own timeout: not before it, and within 2x. */
    assert_true(took >= timeout_us * 9 / 10);
    assert_true(took < 2 * timeout_us);
    must_find(f, "op-0013", id);
}

void a_delay_before_effect_creates_after_the_client_gave_up(void **state)
{
    fx *f = *state;
    const int64_t timeout_us = 500000;
    og_provider_outcome o;
    int rc = 0;

    arm(&f->s, "delay_before_effect", 1500);
    assert_int_equal(create(f->p, "op-0014", "acct-1", timeout_us, &o), 0);
    assert_outcome(&o, OG_CLASS_UNKNOWN, "timeout");
    /* Nothing yet — and "not found" proves nothing: the credit appears
     * once the sandbox wakes up. */
    for (int i = 0; i < 100 && rc == 0; i++) {
        rc = og_provider_lookup(f->p, "op-0014", CALL_US, &o);
        assert_true(rc == 0 || rc == 1);
        if (rc == 0)
            t_sleep_ms(50);
    }
    assert_int_equal(rc, 1);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "found");
}

void exit_after_effect_is_unknown_and_durable(void **state)
{
    fx *f = *state;
    char id[OG_PROVIDER_REF_MAX + 1];
    og_provider_outcome o;
    int status;

    arm(&f->s, "exit_after_effect", -1);
    assert_int_equal(create(f->p, "op-0015", "acct-1", CALL_US, &o), 0);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_true(strcmp(o.reason, "no_response") == 0 ||
                strcmp(o.reason, "connection_reset") == 0);
    status = sbx_reap(&f->s);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 137);

    /* Down: a lookup cannot tell anything. */
    assert_int_equal(og_provider_lookup(f->p, "op-0015", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);
    /* Restarted on the same state: the credit was committed. */
    assert_int_equal(sbx_start(&f->s, NULL), 0);
    og_provider_free(f->p);
    assert_int_equal(og_provider_open(f->s.url, NULL, g_table, &f->p), 0);
    must_find(f, "op-0015", id);
    assert_int_equal(create(f->p, "op-0015", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(o.reference, id);
}

/* ===========================================================================
 * Lookups and an unreachable provider
 * ========================================================================= */
void a_missing_reference_is_not_found_never_failed(void **state)
{
    fx *f = *state;
    og_provider_outcome o;

    memset(&o, 0x5a, sizeof o);
    assert_int_equal(og_provider_lookup(f->p, "never-sent", CALL_US, &o), 0);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_string_equal(o.reason, "not_found");
    assert_string_equal(o.reference, "");
    assert_int_equal(stat_of(&f->s, "lookups"), 1);
}

void connection_refused_is_connect_failed(void **state)
{
    fx *f = *state;
    og_provider_outcome o;
    int64_t t0;

    sbx_stop(&f->s);
    t0 = mono_us();
    assert_int_equal(create(f->p, "op-0020", "acct-1", CALL_US, &o), 0);
    /* Refused at connect: no byte was sent, so the table may call it
     * TRANSIENT (no effect, retry allowed) — see its "why". */
    assert_outcome(&o, OG_CLASS_TRANSIENT, "connect_failed");
    assert_true(mono_us() - t0 < CALL_US);
    assert_int_equal(og_provider_lookup(f->p, "op-0020", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);

    /* Back on the same state: the sandbox never saw a request. */
    assert_int_equal(sbx_start(&f->s, NULL), 0);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
}
