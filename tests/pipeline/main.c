/*
 * main.c — pipeline_test: the payout pipeline end to end against the real
 * sandbox and a real store engine (pipeline.h says how). Every test, in
 * the order it runs.
 *
 *   pipeline_test sqlite | postgres [readable | hashed]
 *
 * OG_TEST_FILTER (tests/support/support.h) runs the tests whose names match
 * a glob; OG_TEST_ROW runs the rows of the matrix whose path contains it.
 */
#include <curl/curl.h>

#include "pipeline.h"

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(every_blocked_path_makes_zero_provider_calls),
    cmocka_unit_test(deterministic_rejection_leaves_the_decision_allowed),
    cmocka_unit_test(
        timeout_after_acceptance_is_unknown_and_blocks_a_second_payout),
    cmocka_unit_test(
        reconciliation_confirms_success_without_a_duplicate_payout),
    cmocka_unit_test(started_write_refused_sends_nothing),
    cmocka_unit_test(started_write_unconfirmed_sends_nothing),
    cmocka_unit_test(
        nothing_resends_after_a_timeout_and_nothing_is_sent_after_submit_by),
    cmocka_unit_test(
        reconciliation_resolves_each_of_two_attempts_from_its_own_record),
    cmocka_unit_test(
        returned_payout_stays_succeeded_and_the_return_is_an_event),
    cmocka_unit_test(late_response_resolves_an_unknown_attempt_as_evidence),
    cmocka_unit_test(
        reconciliation_never_records_not_applied_before_the_cutoff),
    cmocka_unit_test(claim_ack_lost_sends_nothing_and_the_sweeper_resolves_it),
    cmocka_unit_test(
        sweeper_fences_admitted_as_not_started_and_started_as_unknown),
    cmocka_unit_test(
        worker_that_lost_its_lease_cannot_write_a_state_transition),
    cmocka_unit_test(
        concurrent_workers_on_one_grant_make_one_attempt_and_one_provider_call),
    cmocka_unit_test(
        context_change_between_validation_and_claim_makes_zero_provider_calls),
    cmocka_unit_test(
        two_payouts_run_concurrently_cannot_exceed_the_daily_limit),
    cmocka_unit_test(
        paused_worker_past_its_lease_has_its_late_request_refused),
    cmocka_unit_test(trace_a_non_allowed_decision_issues_nothing),
    cmocka_unit_test(trace_b_refused_grants_make_zero_provider_calls),
    cmocka_unit_test(trace_c_payout_no_longer_executable),
    cmocka_unit_test(trace_d_claim_lost),
    cmocka_unit_test(trace_e_deterministic_provider_rejection),
    cmocka_unit_test(trace_f_ambiguous_timeout),
    cmocka_unit_test(trace_g_reconciliation_confirms_success),
    cmocka_unit_test(no_secret_anywhere),
    cmocka_unit_test(cli_run_leaves_no_secret_in_its_output),
};

int main(int argc, char **argv)
{
    int rc;

    if (argc < 2) {
        fprintf(stderr, "usage: pipeline_test sqlite|postgres"
                        " [readable|hashed]\n");
        return 1;
    }
    /* argv[2]: the consumption keys, as t_suite_args reads argv[4] */
    if (argc > 2) {
        char *args[5] = {argv[0], argv[1], "pipeline", "token", argv[2]};

        if (t_suite_args(5, args) != 0) {
            fprintf(stderr, "unknown keys mode %s\n", argv[2]);
            return 1;
        }
    }
    rc = t_setup_backend(argv[1]);
    if (rc != 0)
        return rc; /* 77: PostgreSQL not configured, a skip */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    rc = t_run_tests("pipeline", tests, NULL, NULL);
    curl_global_cleanup();
    t_teardown_backend();
    return rc;
}
