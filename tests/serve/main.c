/*
 * main.c — serve_test: `oncegate serve` over real HTTP on loopback
 * (harness.h says how), as two groups:
 *
 *   serve_test sqlite|postgres          the serve group (meson: serve-*)
 *   serve_test sqlite|postgres redeem   POST /v1/redemptions (redeem-*)
 *
 * Every test of both groups is listed here in the order it runs, with its
 * fixture; the files of tests/serve/ hold them by topic (cases.h). The
 * last three tests of each group check the whole run: every answer's
 * shape, every SIGTERM's exit, every line every server wrote.
 *
 * OG_TEST_FILTER='glob' runs only the tests whose names match
 * (tests/support/support.h), e.g.
 *   OG_TEST_FILTER='sigint_*' meson test -C build-test serve-sqlite
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Last: every server stopped; exits and logs checked
 * ========================================================================= */
/* What the whole-suite checks expect at least: the serve group's numbers
 * (the redeem group, a few tests, lowers them). */
static unsigned g_min_responses = 500;
static size_t g_min_requests = 100;

static void every_response_carried_a_request_id_and_every_error_a_code_and_message(
    void **state)
{
    fprintf(stderr, "checked %u responses\n", g_shape_checked);
    assert_true(g_shape_checked > g_min_responses);
    if (g_shape_bad[0])
        fail_msg("responses that broke the shape:\n%s", g_shape_bad);
}

static void every_server_stopped_by_sigterm_exited_0(void **state)
{
    srv_stop_all(true);
    if (g_bad_exits[0])
        fail_msg("servers that did not exit 0 after SIGTERM:\n%s", g_bad_exits);
}

static void logs_are_json_lines_without_tokens_keys_or_credentials(void **state)
{
    size_t lines = 0, leaks = 0, malformed = 0, requests = 0;

    srv_stop_all(true);
    assert_true(g_n_secrets > 10);
    for (size_t f = 0; f < g_n_files; f++) {
        char *text = t_slurp(g_files[f].path, NULL), *save = NULL;
        if (!text)
            continue;
        for (char *line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            lines++;
            for (size_t i = 0; i < g_n_secrets; i++)
                if (strstr(line, g_secrets[i])) {
                    if (leaks++ < 20)
                        fprintf(stderr, "LEAK in %s: %.300s\n", g_files[f].path,
                                line);
                    break;
                }
            if (g_files[f].kind == OUT_LOG_JSON) {
                json_t *j = json_loads(line, 0, NULL);
                const char *ev = jstr(j, "event");
                bool ok = json_is_object(j) && ev && jstr(j, "ts") &&
                          jstr(j, "level");
                /* A dev instance's sandbox (serve --dev starts one beside
                 * itself) logs its own requests to the same stderr: they
                 * are the provider's, without a correlation id of ours. */
                bool sandbox = jstr(j, "route") &&
                               (strncmp(jstr(j, "route"), "/v1/credits", 11) ==
                                    0 ||
                                strncmp(jstr(j, "route"), "/_control/", 10) ==
                                    0);
                if (ok && strcmp(ev, "request") == 0 && !sandbox) {
                    const char *cid = jstr(j, "correlation_id");
                    requests++;
                    ok = cid && *cid;
                }
                if (!ok && malformed++ < 20)
                    fprintf(stderr, "NOT A LOG EVENT in %s: %.300s\n",
                            g_files[f].path, line);
                json_decref(j);
            }
        }
        free(text);
    }
    fprintf(stderr, "scanned %zu lines of %zu files for %zu secrets; %zu request "
            "events\n", lines, g_n_files, g_n_secrets, requests);
    assert_true(requests > g_min_requests);
    assert_int_equal(leaks, 0);
    assert_int_equal(malformed, 0);
}

/* ===========================================================================
 * The groups
 * ========================================================================= */

/* POST /v1/redemptions: `serve_test BACKEND redeem` (redeem.c). Last in
 * the group, as in the serve group: every server stopped, exits and logs
 * checked (codes and tokens are among the secrets). */
static const struct CMUnitTest g_redeem_tests[] = {
    cmocka_unit_test_teardown(
        twenty_concurrent_redemptions_over_two_instances_exchange_once_and_agree,
        test_teardown),
    cmocka_unit_test_teardown(
        duplicate_during_a_slow_exchange_waits_and_catches_up, test_teardown),
    cmocka_unit_test_teardown(
        winner_killed_after_the_exchange_leaves_the_others_redemption_lost_and_never_exchanges_twice,
        test_teardown),
    cmocka_unit_test_teardown(
        result_the_store_cannot_persist_is_still_answered_and_duplicates_end_lost,
        test_teardown),
    cmocka_unit_test_teardown(
        spent_code_under_another_key_is_refused_as_code_spent, test_teardown),
    cmocka_unit_test_teardown(
        redemption_catching_up_when_the_drain_begins_is_503_and_the_server_exits_0,
        test_teardown),
    cmocka_unit_test_teardown(bad_redemption_requests_are_400_and_send_nothing,
                              test_teardown),
    cmocka_unit_test_teardown(stored_result_is_unreadable_without_the_key,
                              test_teardown),
    cmocka_unit_test_teardown(key_file_readable_by_others_refuses_to_start,
                              test_teardown),
    cmocka_unit_test_teardown(
        dev_mode_redeems_at_its_sandbox_with_a_generated_key, test_teardown),
    cmocka_unit_test_teardown(
        every_response_carried_a_request_id_and_every_error_a_code_and_message,
        test_teardown),
    cmocka_unit_test_teardown(every_server_stopped_by_sigterm_exited_0,
                              test_teardown),
    cmocka_unit_test_teardown(
        logs_are_json_lines_without_tokens_keys_or_credentials, test_teardown),
};

/* The edge group (meson: edge-*): the HTTP edge over raw sockets
 * (edge.c), on the group's instance A and on servers of their own for the
 * limits a test tightens. */
static const struct CMUnitTest g_edge_tests[] = {
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
    T(repeated_content_length_is_400_and_the_smuggled_request_is_not_served),
    T(content_length_minus_5_is_one_json_400_sent_once),
    T(chunked_with_content_length_is_400_and_the_pipelined_request_is_not_served),
    T(unknown_transfer_encoding_is_501_at_once_and_closes),
    T(invalid_chunk_size_is_400_at_once_and_closes),
    T(obfuscated_transfer_encoding_names_are_refused_and_close),
    T(transfer_encoding_in_http10_is_400_and_closes),
    T(http11_without_host_or_with_two_is_400),
    T(absolute_form_target_is_served_as_its_path),
    T(obs_fold_and_malformed_field_lines_are_400),
    T(library_level_errors_are_json_with_one_status_line),
    T(early_refusals_are_answered_on_the_head_and_close_without_the_body),
    T(slow_headers_and_slow_bodies_get_408_after_their_deadlines),
    T(unauthenticated_connections_per_source_are_capped_with_429),
    T(connection_past_max_connections_is_503_retry_later_and_closed),
    T(expect_100_continue_is_answered_only_when_the_head_passes),
    T(pipelined_requests_are_answered_in_order_on_one_connection),
    T(half_closed_connection_gets_its_answer_then_closes),
    T(chunked_body_is_accepted_and_the_connection_kept),
    T(repeated_authorization_is_400),
    T(failed_authentication_is_rate_limited_per_source_with_429),
    T(failed_authentication_is_rate_limited_per_principal_and_per_source),
    T(revocations_are_rate_limited_per_principal_and_per_source),
    T(every_server_stopped_by_sigterm_exited_0),
    T(logs_are_json_lines_without_tokens_keys_or_credentials),
#undef T
};

int main(int argc, char **argv)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
#define TP(f) cmocka_unit_test_setup_teardown(f, pair_setup, test_teardown)
    const struct CMUnitTest tests[] = {
        T(server_announces_readiness_with_one_stdout_line_and_a_ready_event),
        T(openapi_paths_and_methods_equal_serve_routes),
        T(every_documented_route_answers_other_than_route_not_found_or_405),
        T(unknown_path_is_404_route_not_found_and_wrong_method_is_405_with_allow),
        T(healthz_and_readyz_answer_without_a_key_on_every_instance),
        T(metrics_count_admissions_refusals_consumes_and_responses),
        T(janitor_and_archive_loops_run_in_the_background),
        T(request_id_is_echoed_and_logged_as_correlation_id),
        T(every_endpoint_without_a_known_bearer_key_is_401),
        T(every_endpoint_with_a_key_lacking_its_role_is_403),
        T(payout_admin_writes_the_context_under_version_preconditions),
        T(clerk_submission_compares_the_intent_then_answers_the_decision),
        T(approver_settles_an_acknowledgment_or_an_escalation_afresh),
        T(payout_admin_edits_a_draft_under_its_version),
        T(payout_amount_finer_than_its_currency_is_400_amount_minor_units),
        T(operator_reads_a_payout_with_its_decisions_grants_and_history),
        T(payout_writes_are_503_retry_later_while_the_store_is_down),
        T(another_callers_operation_is_404_like_a_missing_one),
        T(issued_grant_is_201_with_the_documented_fields),
        T(fresh_grant_is_admitted_with_202),
        T(same_operation_retry_is_202_already_admitted_on_every_instance),
        T(operation_id_reused_for_another_grant_is_409),
        T(operation_mac_required_admits_the_issued_id_and_refuses_it_without_or_with_a_wrong_mac),
        T(operation_mac_not_required_admits_without_one_and_still_refuses_a_wrong_one),
        T(without_a_mac_key_grants_carry_an_operation_id_and_a_mac_is_unverifiable),
        T(operation_mac_required_without_a_key_or_with_an_open_key_file_refuses_to_start),
        T(operation_read_by_its_caller_is_200_with_fields),
        T(consume_verdict_is_200_once_then_409_and_the_grant_cannot_be_admitted),
        T(revoked_grant_is_refused_and_a_second_revocation_is_409),
        T(revocation_never_recalls_an_operation_admitted_before_it),
        T(revoked_family_refuses_its_grants_tickets_and_new_issuance),
        T(malformed_json_is_400_malformed_request_and_changes_nothing),
        T(duplicated_member_is_400_naming_it_and_changes_nothing),
        T(wrong_content_type_is_415_and_changes_nothing),
        T(body_over_max_body_bytes_is_413_and_changes_nothing),
        T(invalid_operation_id_is_400_operation_id_invalid_and_changes_nothing),
        T(operation_id_breaking_its_rule_in_the_get_path_is_400),
        T(unknown_missing_or_mistyped_member_is_400_naming_it_and_changes_nothing),
        T(tampered_token_is_403_bad_signature_and_changes_nothing),
        T(alg_none_token_is_403_unsupported_alg_and_changes_nothing),
        T(token_signed_with_another_key_is_403_and_changes_nothing),
        T(grant_refused_by_validation_is_403_with_its_reason_and_changes_nothing),
        T(amount_finer_than_its_currency_is_400_amount_minor_units),
        T(grant_typ_is_explicit_and_another_type_is_403_wrong_type),
        T(legacy_typ_is_refused_when_tokens_accept_legacy_typ_is_false),
        TP(fifty_concurrent_admissions_on_two_instances_admit_exactly_one),
        TP(grant_admitted_on_one_instance_is_409_on_the_other),
        TP(grant_admitted_before_a_restart_is_409_after_it),
        TP(fifty_concurrent_consumes_on_two_instances_consume_exactly_one),
        TP(grant_consumed_on_one_instance_is_409_on_the_other),
        TP(grant_consumed_before_a_restart_is_409_after_it),
        TP(fifty_concurrent_rotations_of_one_ticket_rotate_exactly_one),
        TP(ticket_rotated_on_one_instance_is_409_on_the_other),
        TP(ticket_rotated_before_a_restart_is_409_after_it),
        T(refusal_reason_is_logged_for_operators_but_not_told_to_the_caller),
        T(replay_refused_from_the_cache_answers_as_the_store_and_the_holder_retries_past_it),
        T(token_one_byte_off_or_another_caller_misses_the_refusal_cache),
        T(revoked_grant_is_refused_from_the_cache_for_every_operation),
        T(refusal_cache_of_one_entry_evicts_and_a_disabled_one_is_never_read),
        T(grant_issuing_without_a_signing_key_is_501),
        T(auto_migrate_prepares_an_empty_store),
        T(auto_migrate_with_hashed_consumption_keys_creates_a_hashed_store),
        T(billing_timeout_not_shorter_than_lease_minus_margin_refuses_to_start_naming_T4),
        T(unknown_configuration_key_refuses_to_start_naming_it),
        T(signing_key_readable_by_others_refuses_to_start_naming_file_and_mode),
        T(unreachable_store_at_startup_exits_75),
        T(serve_with_an_unknown_option_exits_2),
        T(sighup_after_adding_a_principal_accepts_its_key_without_restart),
        T(sighup_after_adding_a_verification_key_accepts_its_grants),
        T(sighup_after_removing_a_principal_refuses_its_key),
        T(failed_reload_keeps_the_old_principals_and_logs_reload_failed),
        T(sigterm_lets_requests_in_flight_complete_and_exits_0),
        T(sigint_drains_and_exits_0_like_sigterm),
        T(dev_mode_credentials_are_0600_and_reused_by_a_second_instance),
        T(dev_mode_files_are_owner_only_whatever_the_umask),
        T(dev_instances_started_together_agree_on_credentials),
        T(dev_banner_commands_admit_then_refuse),
        T(dev_mode_adds_missing_roles_to_an_old_data_directory),
        T(dev_banner_payout_steps_run_as_printed_and_pay_once),
        T(store_stopped_while_serving_is_503_then_the_same_operation_retry_gets_the_status),
        /* payouts.c: the payout pipeline inside serve */
        T(serve_runner_pays_an_allowed_payout_once),
        T(serve_refuses_a_payout_timing_relation_that_fails),
        T(payout_worker_command_pays_an_allowed_payout_once),
        T(dev_mode_runs_the_payout_pipeline_and_pays),
        T(payout_pipeline_without_its_principal_refuses_to_start),
        T(metrics_show_reservations_held_and_grants_not_consumed),
        T(payout_failures_are_counted_on_metrics),
        T(payout_backlog_lists_unknown_attempts_by_age),
        T(payout_finance_is_503_retry_later_while_the_store_is_down),
        T(payout_fence_rollback_is_counted_on_metrics),
        T(payout_claim_lost_is_counted_on_metrics),
        T(serve_runner_reconciles_a_lost_answer_to_paid_once),
        T(executed_operation_is_applied_once_with_the_operation_id_as_key),
        T(concurrent_executions_each_record_once_through_the_outcome_batches),
        T(kept_alive_provider_connections_closed_by_the_sandbox_execute_every_credit_once),
        T(admission_answers_may_submit_only_when_its_lease_leaves_the_margin),
        T(definite_refusal_is_failed_and_the_grant_stays_spent),
        T(action_other_than_credit_apply_is_422_and_changes_nothing),
        T(deployment_without_the_server_side_bound_is_refused_at_startup),
        T(dropped_response_is_pending_unknown_and_one_credit_exists),
        T(recovery_loop_settles_a_lost_answer_by_lookup),
        T(same_operation_retry_while_the_first_is_in_flight_gets_pending_without_a_billing_call),
        T(provider_timeout_is_pending_unknown),
        T(transient_refusal_leaves_the_operation_admitted),
        T(store_unavailable_at_admission_makes_no_billing_call),
        T(admission_committed_with_its_acknowledgment_lost_bills_nothing_and_the_retry_gets_the_status),
        T(billing_success_then_failure_to_record_it_is_pending_and_recovery_makes_it_succeeded_with_one_credit),
        T(original_handler_paused_past_its_lease_loses_its_late_write),
        T(late_unknown_from_a_paused_handler_cannot_overwrite_a_recovered_succeeded),
        T(recovery_finds_nothing_while_the_original_call_may_be_in_flight_never_fails_it),
        T(recovery_finds_nothing_with_atomic_same_key_resubmits_the_same_key_and_one_credit_results),
        T(operation_id_reused_by_another_caller_or_with_other_details_is_409_reveals_nothing_and_bills_nothing),
        T(operator_lists_the_reconciliation_backlog_oldest_first),
        T(operator_resolves_needs_reconciliation_with_evidence_and_the_grant_stays_spent),
        T(resolving_an_operation_not_awaiting_reconciliation_is_409),
        T(operator_resolves_a_payout_attempt_and_its_payout_follows),
        T(operator_endpoints_refuse_other_roles_and_missing_keys),
        T(caller_sees_the_history_without_evidence),
        T(metrics_show_the_backlog_by_age_and_outcomes_by_source),
        T(bad_operator_queries_are_400_naming_the_parameter),
        T(provider_url_without_table_refuses_to_start),
        T(table_retention_shorter_than_config_refuses_to_start),
        T(every_response_carried_a_request_id_and_every_error_a_code_and_message),
        T(every_server_stopped_by_sigterm_exited_0),
        T(logs_are_json_lines_without_tokens_keys_or_credentials),
    };
#undef T
#undef TP
    const char *backend = argc > 1 ? argv[1] : "";
    const char *group = argc > 2 ? argv[2] : "serve";
    int rc;

    if (strcmp(group, "serve") != 0 && strcmp(group, "redeem") != 0 &&
        strcmp(group, "edge") != 0) {
        fprintf(stderr,
                "usage: serve_test sqlite|postgres [serve|redeem|edge]\n");
        return 1;
    }
    if ((rc = suite_setup(backend)) != 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    /* OG_TEST_FILTER=PATTERN (cmocka's glob, tests/support/run.c) runs the
     * matching tests only, to repeat one; the suite-wide minimums then do
     * not apply. */
    if (t_filter()) {
        g_min_responses = 0;
        g_min_requests = 0;
    }
    if (strcmp(group, "edge") == 0) {
        g_min_responses = 0;
        g_min_requests = g_min_requests > 0 ? 10 : 0;
        rc = t_run_tests(g_pg ? "edge-postgres" : "edge-sqlite",
                         g_edge_tests, group_setup, group_teardown);
    } else if (strcmp(group, "redeem") == 0) {
        if (g_min_requests > 0) {
            g_min_responses = 30;
            g_min_requests = 30;
        }
        rc = t_run_tests(g_pg ? "redeem-postgres" : "redeem-sqlite",
                         g_redeem_tests, NULL, group_teardown);
    } else {
        rc = t_run_tests(g_pg ? "serve-postgres" : "serve-sqlite", tests,
                         group_setup, group_teardown);
    }
    return suite_end(rc);
}
