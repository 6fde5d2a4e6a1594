/*
 * cases.h — the test cases of sandbox_test, file by file. main.c lists them
 * in the order they run; each file defines its own (a claim both
 * resources make is one CLAIM per resource, harness.h).
 */
#ifndef OG_TEST_SANDBOX_CASES_H
#define OG_TEST_SANDBOX_CASES_H


/* resources.c */
void create_is_201_and_a_same_key_retry_replays_the_identical_saved_body(
    void **state);
void parameters_are_compared_canonically_amount_and_expiry_instant(
    void **state);
void same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing(
    void **state);
void twenty_concurrent_same_key_creates_make_exactly_one_credit(void **state);
void without_atomic_same_key_concurrent_creates_can_make_duplicates(
    void **state);
void concurrent_creates_of_mixed_keys_each_answer_as_alone_and_survive_a_restart(
    void **state);
void closed_account_is_422_account_closed_and_a_replay_is_the_same_422(
    void **state);
void busy_account_is_429_with_retry_after_and_records_nothing(void **state);
void async_account_is_202_pending_then_succeeded_after_the_delay(void **state);
void payout_create_is_201_completed_with_a_po_id_and_a_same_key_retry_replays_the_identical_body(
    void **state);
void payout_parameters_are_compared_canonically_amount_and_expiry_instant(
    void **state);
void payout_same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing(
    void **state);
void twenty_concurrent_same_key_payouts_make_exactly_one_payout(void **state);
void without_atomic_same_key_concurrent_payouts_can_make_duplicates(
    void **state);
void closed_destination_is_422_destination_closed_and_a_replay_is_the_same_422(
    void **state);
void busy_destination_is_429_with_retry_after_and_records_nothing(void **state);
void async_destination_is_202_pending_then_completed_after_the_delay(
    void **state);

/* time.c */
void request_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing(
    void **state);
void key_older_than_retention_is_forgotten_and_the_same_key_creates_again(
    void **state);
void visibility_delay_hides_a_new_credit_from_lookups_until_it_passes(
    void **state);
void lookups_by_reference_and_by_key_find_credits_oldest_first(void **state);
void lookup_without_exactly_one_valid_parameter_is_400_invalid_request(
    void **state);
void payout_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing(
    void **state);
void accepted_payout_is_invisible_to_lookups_before_the_visibility_delay_and_visible_after(
    void **state);
void payout_key_older_than_retention_is_forgotten_and_the_same_key_creates_a_second_payout(
    void **state);
void payout_lookups_by_reference_and_by_key_find_payouts_oldest_first(
    void **state);
void payout_lookup_without_exactly_one_valid_parameter_is_400_invalid_request(
    void **state);

/* faults.c */
void drop_response_after_effect_gives_no_http_answer_but_the_credit_exists_and_a_retry_replays_it(
    void **state);
void delay_before_effect_creates_nothing_until_the_delay_has_passed(
    void **state);
void delay_after_effect_commits_the_credit_before_the_delayed_answer(
    void **state);
void error_500_after_effect_answers_500_internal_but_the_credit_exists(
    void **state);
void error_500_before_effect_answers_500_internal_and_creates_nothing(
    void **state);
void exit_after_effect_kills_the_process_and_after_a_restart_the_key_replays_the_durable_credit(
    void **state);
void faults_fire_in_arming_order_for_their_count_and_delete_clears_them(
    void **state);
void invalid_fault_requests_are_400_and_arm_nothing(void **state);

/* control.c */
void state_survives_a_clean_restart(void **state);
void control_routes_are_404_without_control(void **state);
void bearer_key_from_api_key_file_is_required_and_refusals_have_no_effect(
    void **state);
void malformed_or_invalid_create_requests_are_400_naming_the_field_and_change_nothing(
    void **state);
void body_over_64_kib_is_413_and_a_body_of_exactly_64_kib_is_accepted(
    void **state);
void create_without_a_json_content_type_is_415_and_changes_nothing(
    void **state);
void unknown_route_is_404_and_a_wrong_method_is_405_with_allow(void **state);
void reset_deletes_every_credit_key_code_counter_and_fault(void **state);
void sigterm_lets_a_request_in_flight_finish_and_exits_0(void **state);
void bad_flags_exit_2_and_an_unreadable_api_key_file_exits_78(void **state);

/* codes.c */
void code_is_exchanged_once_and_every_later_exchange_is_400_invalid_grant(
    void **state);
void twenty_concurrent_exchanges_of_one_code_succeed_exactly_once(void **state);
void malformed_token_requests_are_400_in_rfc_6749_shape_and_spend_nothing(
    void **state);
void dropped_answer_after_an_exchange_leaves_the_code_spent(void **state);
void delay_faults_hold_an_exchange_before_or_after_the_code_is_spent(
    void **state);
void error_500_before_an_exchange_spends_nothing_and_after_it_spends_the_code(
    void **state);
void exit_after_an_exchange_leaves_the_code_durably_spent(void **state);
void minting_takes_no_members_and_codes_survive_a_restart(void **state);
void version_1_state_file_gains_codes_and_keeps_its_credits(void **state);

/* payouts.c */
void a_key_names_one_request_of_one_resource_credit_and_payout_keys_are_separate(
    void **state);
void payout_decided_after_expires_at_plus_skew_is_refused_with_no_effect_even_when_it_arrived_in_time(
    void **state);
void lookup_after_expires_at_plus_skew_plus_visibility_delay_that_finds_nothing_is_final(
    void **state);
void every_fault_acts_on_payout_creates_as_on_credit_creates_from_one_queue(
    void **state);
void returned_payout_is_listed_returned_and_a_same_key_create_still_replays_its_original_answer(
    void **state);
void return_refuses_what_is_not_a_completed_unreturned_payout_and_changes_nothing(
    void **state);
void return_route_is_404_without_control(void **state);
void malformed_payout_requests_are_400_naming_the_field_and_change_nothing(
    void **state);
void payout_routes_need_the_bearer_key_and_a_refusal_changes_nothing(
    void **state);
void payouts_and_their_counters_survive_a_restart_and_reset_deletes_them(
    void **state);
void version_2_state_file_gains_payouts_and_keeps_its_credits_and_codes(
    void **state);
void logs_name_a_destination_only_by_a_sha256_prefix(void **state);

/* aimed.c */
void a_fault_aimed_at_the_second_of_two_concurrent_creates_fires_on_the_second_only(
    void **state);
void an_aimed_fault_wins_over_the_queue_head_and_leaves_it_for_the_rest(
    void **state);
void aimed_faults_match_reference_account_or_both_and_reach_payouts_from_the_same_queue(
    void **state);
void invalid_aimed_faults_are_400_naming_the_match_member_and_arm_nothing(
    void **state);

#endif
