/*
 * main.c — sandbox_test: oncegate-sandbox over real HTTP on loopback, one
 * test per claim of docs/sandbox.md (harness.h says how). Every test is
 * listed here in the order it runs; the files of tests/sandbox/ hold them
 * by topic (cases.h). The last tests check the whole run: every SIGTERM's
 * exit, every log line's shape, no secret in any log.
 *
 * OG_TEST_FILTER='glob' runs only the tests whose names match
 * (tests/support/support.h), e.g.
 *   OG_TEST_FILTER='*payout*' meson test -C build-test sandbox
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Whole-suite checks
 * ========================================================================= */
static void every_sandbox_stopped_by_sigterm_exited_0(void **state)
{
    (void)state;
    if (g_bad_exits[0])
        fail_msg("sandboxes that did not exit 0 after SIGTERM:\n%s",
                 g_bad_exits);
}

/* Every line a sandbox wrote to stderr is a JSON object with ts, level
 * and event; none contains the API key, a code or a token. */
static void logs_are_json_lines_without_the_api_key_codes_or_tokens(
    void **state)
{
    size_t lines = 0;

    (void)state;
    assert_true(g_n_logs > 0);
    assert_true(g_n_secrets > 0);
    for (size_t i = 0; i < g_n_logs; i++) {
        char *log = t_slurp(g_logs[i], NULL), *save = NULL;

        assert_non_null(log);
        if (strstr(log, API_KEY))
            fail_msg("%s contains the API key", g_logs[i]);
        for (size_t k = 0; k < g_n_secrets; k++)
            if (strstr(log, g_secrets[k]))
                fail_msg("%s contains a code or token", g_logs[i]);
        for (char *l = strtok_r(log, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save)) {
            json_t *j = json_loads(l, 0, NULL);

            if (!json_is_object(j) || !jstr(j, "ts") || !jstr(j, "level") ||
                !jstr(j, "event"))
                fail_msg("%s: not a log line: %s", g_logs[i], l);
            json_decref(j);
            lines++;
        }
        free(log);
    }
    assert_true(lines > 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
    const struct CMUnitTest tests[] = {
        T(create_is_201_and_a_same_key_retry_replays_the_identical_saved_body),
        T(parameters_are_compared_canonically_amount_and_expiry_instant),
        T(same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing),
        T(twenty_concurrent_same_key_creates_make_exactly_one_credit),
        T(without_atomic_same_key_concurrent_creates_can_make_duplicates),
        T(concurrent_creates_of_mixed_keys_each_answer_as_alone_and_survive_a_restart),
        T(closed_account_is_422_account_closed_and_a_replay_is_the_same_422),
        T(busy_account_is_429_with_retry_after_and_records_nothing),
        T(async_account_is_202_pending_then_succeeded_after_the_delay),
        T(request_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing),
        T(key_older_than_retention_is_forgotten_and_the_same_key_creates_again),
        T(visibility_delay_hides_a_new_credit_from_lookups_until_it_passes),
        T(lookups_by_reference_and_by_key_find_credits_oldest_first),
        T(lookup_without_exactly_one_valid_parameter_is_400_invalid_request),
        T(drop_response_after_effect_gives_no_http_answer_but_the_credit_exists_and_a_retry_replays_it),
        T(delay_before_effect_creates_nothing_until_the_delay_has_passed),
        T(delay_after_effect_commits_the_credit_before_the_delayed_answer),
        T(error_500_after_effect_answers_500_internal_but_the_credit_exists),
        T(error_500_before_effect_answers_500_internal_and_creates_nothing),
        T(exit_after_effect_kills_the_process_and_after_a_restart_the_key_replays_the_durable_credit),
        T(faults_fire_in_arming_order_for_their_count_and_delete_clears_them),
        T(invalid_fault_requests_are_400_and_arm_nothing),
        T(state_survives_a_clean_restart),
        T(control_routes_are_404_without_control),
        T(bearer_key_from_api_key_file_is_required_and_refusals_have_no_effect),
        T(malformed_or_invalid_create_requests_are_400_naming_the_field_and_change_nothing),
        T(body_over_64_kib_is_413_and_a_body_of_exactly_64_kib_is_accepted),
        T(create_without_a_json_content_type_is_415_and_changes_nothing),
        T(unknown_route_is_404_and_a_wrong_method_is_405_with_allow),
        T(reset_deletes_every_credit_key_code_counter_and_fault),
        T(sigterm_lets_a_request_in_flight_finish_and_exits_0),
        T(bad_flags_exit_2_and_an_unreadable_api_key_file_exits_78),
        T(code_is_exchanged_once_and_every_later_exchange_is_400_invalid_grant),
        T(twenty_concurrent_exchanges_of_one_code_succeed_exactly_once),
        T(malformed_token_requests_are_400_in_rfc_6749_shape_and_spend_nothing),
        T(dropped_answer_after_an_exchange_leaves_the_code_spent),
        T(delay_faults_hold_an_exchange_before_or_after_the_code_is_spent),
        T(error_500_before_an_exchange_spends_nothing_and_after_it_spends_the_code),
        T(exit_after_an_exchange_leaves_the_code_durably_spent),
        T(minting_takes_no_members_and_codes_survive_a_restart),
        T(version_1_state_file_gains_codes_and_keeps_its_credits),
        T(payout_create_is_201_completed_with_a_po_id_and_a_same_key_retry_replays_the_identical_body),
        T(payout_parameters_are_compared_canonically_amount_and_expiry_instant),
        T(payout_same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing),
        T(a_key_names_one_request_of_one_resource_credit_and_payout_keys_are_separate),
        T(twenty_concurrent_same_key_payouts_make_exactly_one_payout),
        T(without_atomic_same_key_concurrent_payouts_can_make_duplicates),
        T(closed_destination_is_422_destination_closed_and_a_replay_is_the_same_422),
        T(busy_destination_is_429_with_retry_after_and_records_nothing),
        T(async_destination_is_202_pending_then_completed_after_the_delay),
        T(payout_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing),
        T(payout_decided_after_expires_at_plus_skew_is_refused_with_no_effect_even_when_it_arrived_in_time),
        T(accepted_payout_is_invisible_to_lookups_before_the_visibility_delay_and_visible_after),
        T(lookup_after_expires_at_plus_skew_plus_visibility_delay_that_finds_nothing_is_final),
        T(payout_key_older_than_retention_is_forgotten_and_the_same_key_creates_a_second_payout),
        T(every_fault_acts_on_payout_creates_as_on_credit_creates_from_one_queue),
        T(a_fault_aimed_at_the_second_of_two_concurrent_creates_fires_on_the_second_only),
        T(an_aimed_fault_wins_over_the_queue_head_and_leaves_it_for_the_rest),
        T(aimed_faults_match_reference_account_or_both_and_reach_payouts_from_the_same_queue),
        T(invalid_aimed_faults_are_400_naming_the_match_member_and_arm_nothing),
        T(payout_lookups_by_reference_and_by_key_find_payouts_oldest_first),
        T(payout_lookup_without_exactly_one_valid_parameter_is_400_invalid_request),
        T(returned_payout_is_listed_returned_and_a_same_key_create_still_replays_its_original_answer),
        T(return_refuses_what_is_not_a_completed_unreturned_payout_and_changes_nothing),
        T(return_route_is_404_without_control),
        T(malformed_payout_requests_are_400_naming_the_field_and_change_nothing),
        T(payout_routes_need_the_bearer_key_and_a_refusal_changes_nothing),
        T(payouts_and_their_counters_survive_a_restart_and_reset_deletes_them),
        T(version_2_state_file_gains_payouts_and_keeps_its_credits_and_codes),
        T(every_sandbox_stopped_by_sigterm_exited_0),
        T(logs_are_json_lines_without_the_api_key_codes_or_tokens),
        T(logs_name_a_destination_only_by_a_sha256_prefix),
    };
#undef T
    int rc;

    g_bin = getenv("OG_TEST_SANDBOX");
    if (!g_bin || !*g_bin || access(g_bin, X_OK) != 0) {
        fprintf(stderr, "OG_TEST_SANDBOX must name the oncegate-sandbox "
                        "binary\n");
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_ALL) != 0)
        return 1;
    rfc3339_in(86400, g_later);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/og-sandbox-XXXXXX");
    if (!mkdtemp(g_tmp))
        return 1;
    atexit(kill_all_at_exit);
    signal(SIGPIPE, SIG_IGN);
    rc = t_run_tests("sandbox", tests, NULL, NULL);
    kill_all_at_exit();
    curl_global_cleanup();
    for (size_t i = 0; i < g_n_secrets; i++)
        free(g_secrets[i]);
    for (size_t i = 0; i < g_n_dests; i++)
        free(g_dests[i]);
    /* A failed run keeps the sandboxes' logs; a run that started none (a
     * filter that matched no test) has none to keep. */
    if (rc == 0 || g_n_logs == 0) {
        char cmd[512];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_tmp);
        return rc;
    }
    fprintf(stderr, "kept %s (sandbox logs) for inspection\n", g_tmp);
    /* A failed assertion longjmps past its test's frees; LeakSanitizer
     * would report only those. A passing run is still leak-checked. */
    fflush(NULL);
    _exit(rc);
}
