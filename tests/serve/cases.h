/*
 * cases.h — the test cases of serve_test, file by file. main.c lists them
 * in the order they run, each with its fixture; each file defines its own.
 */
#ifndef OG_TEST_SERVE_CASES_H
#define OG_TEST_SERVE_CASES_H

/* announce.c */
void server_announces_readiness_with_one_stdout_line_and_a_ready_event(
    void **state);
void openapi_paths_and_methods_equal_serve_routes(void **state);
void every_documented_route_answers_other_than_route_not_found_or_405(
    void **state);
void unknown_path_is_404_route_not_found_and_wrong_method_is_405_with_allow(
    void **state);
void healthz_and_readyz_answer_without_a_key_on_every_instance(void **state);
void metrics_count_admissions_refusals_consumes_and_responses(void **state);
void request_id_is_echoed_and_logged_as_correlation_id(void **state);
void janitor_and_archive_loops_run_in_the_background(void **state);

/* payout_api.c */
void payout_admin_writes_the_context_under_version_preconditions(
    void **state);
void approver_settles_an_acknowledgment_or_an_escalation_afresh(void **state);
void payout_admin_edits_a_draft_under_its_version(void **state);
void payout_amount_finer_than_its_currency_is_400_amount_minor_units(
    void **state);
void clerk_submission_compares_the_intent_then_answers_the_decision(
    void **state);
void operator_reads_a_payout_with_its_decisions_grants_and_history(
    void **state);
void payout_writes_are_503_retry_later_while_the_store_is_down(void **state);

/* authorization.c */
void every_endpoint_without_a_known_bearer_key_is_401(void **state);
void every_endpoint_with_a_key_lacking_its_role_is_403(void **state);
void another_callers_operation_is_404_like_a_missing_one(void **state);

/* endpoints.c */
void issued_grant_is_201_with_the_documented_fields(void **state);
/* opid.c: server-issued operation ids and their MAC */
void operation_mac_required_admits_the_issued_id_and_refuses_it_without_or_with_a_wrong_mac(void **state);
void operation_mac_not_required_admits_without_one_and_still_refuses_a_wrong_one(void **state);
void without_a_mac_key_grants_carry_an_operation_id_and_a_mac_is_unverifiable(void **state);
void operation_mac_required_without_a_key_or_with_an_open_key_file_refuses_to_start(void **state);
void fresh_grant_is_admitted_with_202(void **state);
void same_operation_retry_is_202_already_admitted_on_every_instance(
    void **state);
void operation_id_reused_for_another_grant_is_409(void **state);
void operation_read_by_its_caller_is_200_with_fields(void **state);
void consume_verdict_is_200_once_then_409_and_the_grant_cannot_be_admitted(
    void **state);
void revoked_grant_is_refused_and_a_second_revocation_is_409(void **state);
void revocation_never_recalls_an_operation_admitted_before_it(void **state);
void revoked_family_refuses_its_grants_tickets_and_new_issuance(void **state);
void refusal_reason_is_logged_for_operators_but_not_told_to_the_caller(
    void **state);
void grant_issuing_without_a_signing_key_is_501(void **state);

/* refusals.c: the refusal cache */
void replay_refused_from_the_cache_answers_as_the_store_and_the_holder_retries_past_it(
    void **state);
void token_one_byte_off_or_another_caller_misses_the_refusal_cache(
    void **state);
void revoked_grant_is_refused_from_the_cache_for_every_operation(
    void **state);
void refusal_cache_of_one_entry_evicts_and_a_disabled_one_is_never_read(
    void **state);

/* bad_input.c */
void malformed_json_is_400_malformed_request_and_changes_nothing(void **state);
void duplicated_member_is_400_naming_it_and_changes_nothing(void **state);
void wrong_content_type_is_415_and_changes_nothing(void **state);
void body_over_max_body_bytes_is_413_and_changes_nothing(void **state);
void invalid_operation_id_is_400_operation_id_invalid_and_changes_nothing(
    void **state);
void operation_id_breaking_its_rule_in_the_get_path_is_400(void **state);
void unknown_missing_or_mistyped_member_is_400_naming_it_and_changes_nothing(
    void **state);
void tampered_token_is_403_bad_signature_and_changes_nothing(void **state);
void alg_none_token_is_403_unsupported_alg_and_changes_nothing(void **state);
void amount_finer_than_its_currency_is_400_amount_minor_units(void **state);
void grant_typ_is_explicit_and_another_type_is_403_wrong_type(void **state);
void legacy_typ_is_refused_when_tokens_accept_legacy_typ_is_false(
    void **state);
void token_signed_with_another_key_is_403_and_changes_nothing(void **state);
void grant_refused_by_validation_is_403_with_its_reason_and_changes_nothing(
    void **state);

/* races.c */
void fifty_concurrent_admissions_on_two_instances_admit_exactly_one(
    void **state);
void grant_admitted_on_one_instance_is_409_on_the_other(void **state);
void grant_admitted_before_a_restart_is_409_after_it(void **state);
void fifty_concurrent_consumes_on_two_instances_consume_exactly_one(
    void **state);
void grant_consumed_on_one_instance_is_409_on_the_other(void **state);
void grant_consumed_before_a_restart_is_409_after_it(void **state);
void fifty_concurrent_rotations_of_one_ticket_rotate_exactly_one(void **state);
void ticket_rotated_on_one_instance_is_409_on_the_other(void **state);
void ticket_rotated_before_a_restart_is_409_after_it(void **state);

/* startup.c */
void billing_timeout_not_shorter_than_lease_minus_margin_refuses_to_start_naming_T4(
    void **state);
void unknown_configuration_key_refuses_to_start_naming_it(void **state);
void signing_key_readable_by_others_refuses_to_start_naming_file_and_mode(
    void **state);
void unreachable_store_at_startup_exits_75(void **state);
void auto_migrate_prepares_an_empty_store(void **state);
void auto_migrate_with_hashed_consumption_keys_creates_a_hashed_store(
    void **state);
void serve_with_an_unknown_option_exits_2(void **state);
void provider_url_without_table_refuses_to_start(void **state);
void table_retention_shorter_than_config_refuses_to_start(void **state);

/* signals.c */
void sighup_after_adding_a_principal_accepts_its_key_without_restart(
    void **state);
void sighup_after_removing_a_principal_refuses_its_key(void **state);
void failed_reload_keeps_the_old_principals_and_logs_reload_failed(
    void **state);
void sigterm_lets_requests_in_flight_complete_and_exits_0(void **state);
void sigint_drains_and_exits_0_like_sigterm(void **state);
void sighup_after_adding_a_verification_key_accepts_its_grants(void **state);

/* outage.c */
void store_stopped_while_serving_is_503_then_the_same_operation_retry_gets_the_status(
    void **state);

/* dev.c */
void dev_mode_files_are_owner_only_whatever_the_umask(void **state);
void dev_mode_credentials_are_0600_and_reused_by_a_second_instance(
    void **state);
void dev_instances_started_together_agree_on_credentials(void **state);
void dev_banner_commands_admit_then_refuse(void **state);
void dev_mode_adds_missing_roles_to_an_old_data_directory(void **state);
void dev_banner_payout_steps_run_as_printed_and_pay_once(void **state);

/* payouts.c */
void serve_runner_pays_an_allowed_payout_once(void **state);
void serve_refuses_a_payout_timing_relation_that_fails(void **state);
void payout_worker_command_pays_an_allowed_payout_once(void **state);
void dev_mode_runs_the_payout_pipeline_and_pays(void **state);
void payout_pipeline_without_its_principal_refuses_to_start(void **state);
void metrics_show_reservations_held_and_grants_not_consumed(void **state);
void payout_failures_are_counted_on_metrics(void **state);
void payout_backlog_lists_unknown_attempts_by_age(void **state);
void payout_finance_is_503_retry_later_while_the_store_is_down(void **state);
void payout_fence_rollback_is_counted_on_metrics(void **state);
void payout_claim_lost_is_counted_on_metrics(void **state);
void serve_runner_reconciles_a_lost_answer_to_paid_once(void **state);

/* execution.c */
void kept_alive_provider_connections_closed_by_the_sandbox_execute_every_credit_once(
    void **state);
void admission_answers_may_submit_only_when_its_lease_leaves_the_margin(
    void **state);
void concurrent_executions_each_record_once_through_the_outcome_batches(
    void **state);
void executed_operation_is_applied_once_with_the_operation_id_as_key(
    void **state);
void action_other_than_credit_apply_is_422_and_changes_nothing(void **state);
void deployment_without_the_server_side_bound_is_refused_at_startup(
    void **state);
void definite_refusal_is_failed_and_the_grant_stays_spent(void **state);
void dropped_response_is_pending_unknown_and_one_credit_exists(void **state);
void recovery_loop_settles_a_lost_answer_by_lookup(void **state);
void same_operation_retry_while_the_first_is_in_flight_gets_pending_without_a_billing_call(
    void **state);
void provider_timeout_is_pending_unknown(void **state);
void transient_refusal_leaves_the_operation_admitted(void **state);
void store_unavailable_at_admission_makes_no_billing_call(void **state);

/* operators.c */
void operator_lists_the_reconciliation_backlog_oldest_first(void **state);
void operator_resolves_needs_reconciliation_with_evidence_and_the_grant_stays_spent(
    void **state);
void resolving_an_operation_not_awaiting_reconciliation_is_409(void **state);
void operator_resolves_a_payout_attempt_and_its_payout_follows(void **state);
void operator_endpoints_refuse_other_roles_and_missing_keys(void **state);
void caller_sees_the_history_without_evidence(void **state);
void metrics_show_the_backlog_by_age_and_outcomes_by_source(void **state);
void bad_operator_queries_are_400_naming_the_parameter(void **state);

/* failures.c */
void admission_committed_with_its_acknowledgment_lost_bills_nothing_and_the_retry_gets_the_status(
    void **state);
void billing_success_then_failure_to_record_it_is_pending_and_recovery_makes_it_succeeded_with_one_credit(
    void **state);
void original_handler_paused_past_its_lease_loses_its_late_write(void **state);
void late_unknown_from_a_paused_handler_cannot_overwrite_a_recovered_succeeded(
    void **state);
void recovery_finds_nothing_while_the_original_call_may_be_in_flight_never_fails_it(
    void **state);
void recovery_finds_nothing_with_atomic_same_key_resubmits_the_same_key_and_one_credit_results(
    void **state);
void operation_id_reused_by_another_caller_or_with_other_details_is_409_reveals_nothing_and_bills_nothing(
    void **state);

/* redeem.c */
void twenty_concurrent_redemptions_over_two_instances_exchange_once_and_agree(
    void **state);
void duplicate_during_a_slow_exchange_waits_and_catches_up(void **state);
void winner_killed_after_the_exchange_leaves_the_others_redemption_lost_and_never_exchanges_twice(
    void **state);
void redemption_catching_up_when_the_drain_begins_is_503_and_the_server_exits_0(
    void **state);
void result_the_store_cannot_persist_is_still_answered_and_duplicates_end_lost(
    void **state);
void spent_code_under_another_key_is_refused_as_code_spent(void **state);
void bad_redemption_requests_are_400_and_send_nothing(void **state);
void stored_result_is_unreadable_without_the_key(void **state);
void key_file_readable_by_others_refuses_to_start(void **state);
void dev_mode_redeems_at_its_sandbox_with_a_generated_key(void **state);

/* edge.c: the HTTP edge over raw sockets (the edge group) */
void repeated_content_length_is_400_and_the_smuggled_request_is_not_served(
    void **state);
void content_length_minus_5_is_one_json_400_sent_once(void **state);
void chunked_with_content_length_is_400_and_the_pipelined_request_is_not_served(
    void **state);
void unknown_transfer_encoding_is_501_at_once_and_closes(void **state);
void invalid_chunk_size_is_400_at_once_and_closes(void **state);
void obfuscated_transfer_encoding_names_are_refused_and_close(void **state);
void transfer_encoding_in_http10_is_400_and_closes(void **state);
void http11_without_host_or_with_two_is_400(void **state);
void absolute_form_target_is_served_as_its_path(void **state);
void obs_fold_and_malformed_field_lines_are_400(void **state);
void library_level_errors_are_json_with_one_status_line(void **state);
void early_refusals_are_answered_on_the_head_and_close_without_the_body(
    void **state);
void slow_headers_and_slow_bodies_get_408_after_their_deadlines(void **state);
void unauthenticated_connections_per_source_are_capped_with_429(void **state);
void connection_past_max_connections_is_503_retry_later_and_closed(
    void **state);
void expect_100_continue_is_answered_only_when_the_head_passes(void **state);
void pipelined_requests_are_answered_in_order_on_one_connection(void **state);
void half_closed_connection_gets_its_answer_then_closes(void **state);
void chunked_body_is_accepted_and_the_connection_kept(void **state);
void repeated_authorization_is_400(void **state);
void failed_authentication_is_rate_limited_per_source_with_429(void **state);
void failed_authentication_is_rate_limited_per_principal_and_per_source(
    void **state);
void revocations_are_rate_limited_per_principal_and_per_source(void **state);

#endif
