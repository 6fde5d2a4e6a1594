/*
 * payouts.c — what payouts add: a returned payout is still SUCCEEDED and
 * its key still replays created, a payout listed with other terms is
 * terms_mismatch, not found after expiry + skew + visibility delay is
 * final, and a bad destination is refused with nothing sent and never
 * echoed.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Payouts only: returns, terms, the processing window, the secret
 * destination
 * ========================================================================= */

/* POST /_control/payouts/{id}/return on s. */
static void return_payout(const sbx *s, const char *id)
{
    char url[512];
    raw r;

    snprintf(url, sizeof url, "%s/_control/payouts/%s/return", s->url, id);
    r = http("POST", url, NULL, NULL, 10000);
    if (r.rc != CURLE_OK || r.status != 200)
        fail_msg("returning %s: %d %ld %s", id, r.rc, r.status, r.body);
    free(r.body);
}

void a_returned_payout_is_found_succeeded_and_its_key_still_replays_created(
    void **state)
{
    fx *f = *state;
    og_provider_outcome o, l;

    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open,
                               CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    return_payout(&f->s, o.reference);
    /* It completed: the return is a later event, not a failure. */
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open, &l),
                     1);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "returned");
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0030", PAYOUTS.open,
                               CALL_US, &l),
                     0);
    assert_outcome(&l, OG_CLASS_SUCCEEDED, "created");
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(stat_of(&f->s, "payouts_created"), 1);
    assert_int_equal(stat_of(&f->s, "payouts_returned"), 1);
}

void a_payout_listed_with_other_terms_is_terms_mismatch(void **state)
{
    static const struct {
        const char *dest, *amount, *currency, *reason;
    } cases[] = {
        {"dst_tok_7f3a", "26.00", "EUR", "terms_mismatch"},
        {"dst_tok_other", "25", "EUR", "terms_mismatch"},
        {"dst_tok_7f3a", "25", "USD", "terms_mismatch"},
        {"dst_tok_7f3a", "25.000", "EUR", "found"}, /* canonical amounts */
    };
    fx *f = *state;
    og_provider_outcome o, l;

    assert_int_equal(create_in(&PAYOUTS, f->p, "op-0031", PAYOUTS.open,
                               CALL_US, &o),
                     0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&l, 0x5a, sizeof l);
        assert_int_equal(og_provider_lookup_payout(
                             f->p, "op-0031", cases[i].dest, cases[i].amount,
                             cases[i].currency, CALL_US, &l),
                         1);
        assert_outcome(&l,
                       strcmp(cases[i].reason, "found") == 0
                           ? OG_CLASS_SUCCEEDED
                           : OG_CLASS_UNKNOWN,
                       cases[i].reason);
        assert_string_equal(l.reference, o.reference);
        assert_null(strstr(l.reason, "dst_"));
    }
}

/* A lookup after expires_at + skew + visibility delay lists the payout
 * accepted before the expiry, and one that finds nothing is final: the
 * request sent afterwards is FAILED request_expired and never appears. */
void not_found_after_expiry_skew_and_visibility_delay_is_final(
    void **state)
{
    fx *f = *state;
    const int64_t expires = wall_us() + 500000;
    og_provider_outcome o, l;
    int64_t cutoff = expires + 1000000 + 500000; /* + skew + delay */

    assert_int_equal(PAYOUTS.create(f->p, "op-0033", PAYOUTS.open, "25.00",
                                    "EUR", "op-0033", expires, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    t_sleep_ms((int)((cutoff - wall_us()) / 1000) + 200);
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0033", PAYOUTS.open, &l),
                     1);
    assert_string_equal(l.reference, o.reference);
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0032", PAYOUTS.open, &l),
                     0);
    assert_outcome(&l, OG_CLASS_UNKNOWN, "not_found");
    assert_int_equal(PAYOUTS.create(f->p, "op-0032", PAYOUTS.open, "25.00",
                                    "EUR", "op-0032", expires, CALL_US, &o),
                     0);
    assert_outcome(&o, OG_CLASS_FAILED, "request_expired");
    assert_int_equal(lookup_in(&PAYOUTS, f->p, "op-0032", PAYOUTS.open, &l),
                     0);
    assert_int_equal(stat_of(&f->s, "payouts_created"), 1);
}

int fx_up_payouts_window(void **state)
{
    static const char *const extra[] = {"--skew-seconds", "1",
                                        "--visibility-delay-ms", "500", NULL};
    return fx_up_table(state, extra, g_payouts_table);
}

void bad_payout_arguments_send_nothing_and_never_echo_the_destination(
    void **state)
{
    static const struct {
        const char *key, *dest, *amount, *currency, *reference;
        int rc;
    } bad[] = {
        {"k", NULL, "1", "EUR", "r", OG_EDESTINATION},
        {"k", "", "1", "EUR", "r", OG_EDESTINATION},
        {"k", "dst a", "1", "EUR", "r", OG_EDESTINATION},
        {"k", "dst\r\nX-Evil: 1", "1", "EUR", "r", OG_EDESTINATION},
        {"k y", "dst_1", "1", "EUR", "r", OG_EINVAL},
        {"k", "dst_1", "1", "EUR", "r r", OG_EINVAL},
        {"k", "dst_1", "-1", "EUR", "r", OG_EAMOUNT},
        {"k", "dst_1", "1", "eur", "r", OG_ECURRENCY},
    };
    fx *f = *state;
    const int64_t exp = wall_us() + INT64_C(3600000000);
    char long_dest[200];
    og_provider *x = NULL;
    og_provider_outcome o;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(og_provider_create_payout(
                             f->p, bad[i].key, bad[i].dest, bad[i].amount,
                             bad[i].currency, bad[i].reference, exp, CALL_US,
                             &o),
                         bad[i].rc);
        assert_int_equal(og_provider_lookup_payout(
                             f->p, bad[i].reference, bad[i].dest,
                             bad[i].amount, bad[i].currency, CALL_US, &o),
                         bad[i].rc == OG_EINVAL && strcmp(bad[i].key, "k")
                             ? 0 /* the key is no lookup's business */
                             : bad[i].rc);
    }
    memset(long_dest, 'd', 129);
    long_dest[129] = '\0';
    assert_int_equal(og_provider_create_payout(f->p, "k", long_dest, "1",
                                               "EUR", "r", exp, CALL_US, &o),
                     OG_EDESTINATION);
    assert_int_equal(og_provider_create_payout(f->p, "k", "dst_1", "1", "EUR",
                                               "r", -1, CALL_US, &o),
                     OG_EEXPIRES_AT);
    /* The error names the rule, never the value. */
    assert_string_equal(og_err_name(OG_EDESTINATION),
                        "input.destination_invalid");
    assert_null(strstr(og_strerror(OG_EDESTINATION), "dst"));
    assert_int_equal(stat_of(&f->s, "payout_requests"), 0);
    assert_int_equal(stat_of(&f->s, "payout_lookups"), 1); /* "k y" only */
    /* A token-endpoint client has no table: no payout call. */
    assert_int_equal(og_provider_open_exchange(f->s.url, NULL, &x), 0);
    assert_int_equal(og_provider_create_payout(x, "k", "dst_1", "1", "EUR",
                                               "r", exp, CALL_US, &o),
                     OG_EINVAL);
    assert_int_equal(og_provider_lookup_payout(x, "r", "dst_1", "1", "EUR",
                                               CALL_US, &o),
                     OG_EINVAL);
    og_provider_free(x);
}
