/*
 * cases.h — the test cases of provider_test, file by file, and the fixture
 * the payouts' window test needs. main.c lists them in the order they
 * run; each file defines its own (a claim both APIs make is one CLAIM per
 * API, harness.h).
 */
#ifndef OG_TEST_PROVIDER_CASES_H
#define OG_TEST_PROVIDER_CASES_H


/* claims.c */
void create_succeeds_with_the_credit_id(void **state);
void the_same_key_again_replays_the_same_credit(void **state);
void closed_account_fails_and_stays_failed(void **state);
void busy_account_is_transient_with_retry_after(void **state);
void async_account_is_pending_until_a_lookup_finds_it(void **state);
void a_late_request_fails_expired(void **state);
void a_key_reused_with_other_parameters_is_unknown(void **state);
void dropped_response_is_unknown_and_the_credit_exists(void **state);
void error_500_after_effect_is_unknown(void **state);
void error_500_before_effect_is_unknown_too(void **state);
void a_delay_after_effect_beyond_the_timeout_is_unknown(void **state);
void a_delay_before_effect_creates_after_the_client_gave_up(void **state);
void exit_after_effect_is_unknown_and_durable(void **state);
void a_missing_reference_is_not_found_never_failed(void **state);
void connection_refused_is_connect_failed(void **state);
void payout_create_succeeds_with_the_payout_id(void **state);
void the_same_key_again_replays_the_same_payout(void **state);
void closed_destination_fails_and_stays_failed(void **state);
void busy_destination_is_transient_with_retry_after(void **state);
void async_payout_is_pending_until_a_lookup_finds_it_completed(void **state);
void a_late_payout_fails_expired(void **state);
void dropped_payout_response_is_unknown_and_a_lookup_finds_the_payout(
    void **state);

/* connections.c */
void a_broken_established_exchange_is_unknown(void **state);
void a_connect_timeout_is_connect_failed(void **state);

/* arguments.c */
void bad_arguments_send_nothing(void **state);
void the_api_key_is_a_bearer_token(void **state);
void threads_share_one_client(void **state);

/* payouts.c */
void a_returned_payout_is_found_succeeded_and_its_key_still_replays_created(
    void **state);
void a_payout_listed_with_other_terms_is_terms_mismatch(void **state);
void not_found_after_expiry_skew_and_visibility_delay_is_final(void **state);
void bad_payout_arguments_send_nothing_and_never_echo_the_destination(
    void **state);

/* exchange.c */
void a_code_is_exchanged_once_and_then_already_used(void **state);
void a_lost_or_late_exchange_is_unknown_and_the_code_is_spent(void **state);
void codes_are_form_encoded_and_bad_ones_send_nothing(void **state);

/* payouts.c: the sandbox for the processing window test. */
int fx_up_payouts_window(void **state);

/* reuse.c */
void reuse_bounds_are_checked_and_a_table_without_atomic_keys_keeps_it_off(
    void **state);
void a_closed_connection_on_a_fresh_call_is_unknown(void **state);
void kept_alive_connections_closed_by_the_provider_make_every_credit_once(
    void **state);

#endif
