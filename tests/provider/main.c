/*
 * main.c — provider_test: claims about the provider client
 * (lib/provider/client.c) against the REAL sandbox (oncegate-sandbox,
 * OG_TEST_SANDBOX), classified by providers/sandbox-credits.v1.json:
 *
 *   - a create with an idempotency key is SUCCEEDED with the credit id as
 *     its reference; the same key again is SUCCEEDED with the same
 *     reference and the sandbox still counts one credit — also when eight
 *     threads send it at once through one client;
 *   - closed- is FAILED account_closed (and stays so), busy- is TRANSIENT
 *     with Retry-After, async- is UNKNOWN pending until a lookup finds it
 *     final, a late request is FAILED request_expired, a key reused with
 *     other parameters is UNKNOWN;
 *   - every fault that may follow the effect is UNKNOWN, and the credit is
 *     there: drop_response_after_effect, error_500_after_effect,
 *     delay_after_effect beyond the client's timeout (which returns within
 *     2x its timeout), exit_after_effect (found after a restart on the same
 *     state); delay_before_effect beyond the timeout is UNKNOWN too, and the
 *     credit appears AFTER the client gave up;
 *   - a lookup of a missing reference is "not found", never a failure; an
 *     unreachable provider is OG_EPROVIDER_UNAVAILABLE;
 *   - connection refused (the sandbox stopped) is connect_failed, which the
 *     table classifies TRANSIENT: not one byte was sent. An established
 *     connection that fails is never that: closed without an answer, reset,
 *     silent, cut short, oversized or redirected (a small in-test TCP peer
 *     plays each) are all UNKNOWN;
 *   - bad arguments are refused before anything is sent (the sandbox counts
 *     no request); the API key is sent as a bearer token and a wrong or
 *     missing one is TRANSIENT unauthorized;
 *   - payouts (og_provider_create_payout, og_provider_lookup_payout,
 *     classified by providers/sandbox-payouts.v1.json) make the same claims
 *     from the same test bodies (a capi row per API) — created, replayed,
 *     destination_closed FAILED, busy TRANSIENT, accepted-for-processing
 *     UNKNOWN until a lookup finds it completed, late FAILED, a lost answer
 *     UNKNOWN and found — and: a returned payout is still SUCCEEDED; a
 *     payout listed with other terms is terms_mismatch; a lookup after
 *     expires_at + skew + visibility delay that finds nothing stays so (the
 *     request sent then is refused); a bad destination is
 *     OG_EDESTINATION with nothing sent, and no outcome carries it.
 *
 * Every test is listed here in the order it runs, with its fixture; the
 * files of tests/provider/ hold them by topic (cases.h). `provider_test
 * --record ...` is the recording mode (record.c).
 *
 * OG_TEST_FILTER='glob' runs only the tests whose names match
 * (tests/support/support.h), e.g.
 *   OG_TEST_FILTER='*payout*' meson test -C build-test provider
 */
#include "harness.h"
#include "cases.h"

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(create_succeeds_with_the_credit_id,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            the_same_key_again_replays_the_same_credit, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(closed_account_fails_and_stays_failed,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            busy_account_is_transient_with_retry_after, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            async_account_is_pending_until_a_lookup_finds_it, fx_up_async,
            fx_down),
        cmocka_unit_test_setup_teardown(a_late_request_fails_expired, fx_up,
                                        fx_down),
        cmocka_unit_test_setup_teardown(
            a_key_reused_with_other_parameters_is_unknown, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            dropped_response_is_unknown_and_the_credit_exists, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(error_500_after_effect_is_unknown,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(error_500_before_effect_is_unknown_too,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_delay_after_effect_beyond_the_timeout_is_unknown, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_delay_before_effect_creates_after_the_client_gave_up, fx_up,
            fx_down),
        cmocka_unit_test_setup_teardown(exit_after_effect_is_unknown_and_durable,
                                        fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_missing_reference_is_not_found_never_failed, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(connection_refused_is_connect_failed,
                                        fx_up, fx_down),
        cmocka_unit_test(a_broken_established_exchange_is_unknown),
        cmocka_unit_test(a_connect_timeout_is_connect_failed),
        cmocka_unit_test_setup_teardown(bad_arguments_send_nothing, fx_up,
                                        fx_down),
        cmocka_unit_test(the_api_key_is_a_bearer_token),
        cmocka_unit_test_setup_teardown(threads_share_one_client, fx_up,
                                        fx_down),
        cmocka_unit_test_setup_teardown(
            a_code_is_exchanged_once_and_then_already_used, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            a_lost_or_late_exchange_is_unknown_and_the_code_is_spent, fx_up,
            fx_down),
        cmocka_unit_test_setup_teardown(
            codes_are_form_encoded_and_bad_ones_send_nothing, fx_up, fx_down),
        /* Payouts: the same claims through the same request builder. */
        cmocka_unit_test_setup_teardown(
            payout_create_succeeds_with_the_payout_id, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            the_same_key_again_replays_the_same_payout, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            closed_destination_fails_and_stays_failed, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            busy_destination_is_transient_with_retry_after, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            async_payout_is_pending_until_a_lookup_finds_it_completed,
            fx_up_payouts_async, fx_down),
        cmocka_unit_test_setup_teardown(a_late_payout_fails_expired,
                                        fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            dropped_payout_response_is_unknown_and_a_lookup_finds_the_payout,
            fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            a_returned_payout_is_found_succeeded_and_its_key_still_replays_created,
            fx_up_payouts, fx_down),
        cmocka_unit_test_setup_teardown(
            a_payout_listed_with_other_terms_is_terms_mismatch, fx_up_payouts,
            fx_down),
        cmocka_unit_test_setup_teardown(
            not_found_after_expiry_skew_and_visibility_delay_is_final,
            fx_up_payouts_window, fx_down),
        cmocka_unit_test_setup_teardown(
            bad_payout_arguments_send_nothing_and_never_echo_the_destination,
            fx_up_payouts, fx_down),
        cmocka_unit_test(
            reuse_bounds_are_checked_and_a_table_without_atomic_keys_keeps_it_off),
        cmocka_unit_test_setup_teardown(
            a_closed_connection_on_a_fresh_call_is_unknown, fx_up, fx_down),
        cmocka_unit_test_setup_teardown(
            kept_alive_connections_closed_by_the_provider_make_every_credit_once,
            fx_up, fx_down),
    };

    signal(SIGPIPE, SIG_IGN);
    if (argc == 3 && strcmp(argv[1], "--record") == 0)
        return record("credits", argv[2]);
    if (argc == 4 && strcmp(argv[1], "--record") == 0)
        return record(argv[2], argv[3]);
    return t_run_tests("provider", tests, load_table, free_table);
}
