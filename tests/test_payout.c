/*
 * test_payout.c — the decision side of a delayed payout
 * (lib/core/payout.c; docs/payouts.md, docs/design.md "Delayed payouts: the
 * decision side"): money in minor units, the terms' fingerprint, the
 * policy (the policy table of docs/payouts.md, section 4, the paths of
 * section 8 it decides, the order of checks, the boundaries) and the
 * execution recheck. Pure: no store, no clock. One table per question; each
 * row is named after the claim it proves.
 *
 * The running example (docs/payouts.md, "The running example") is the
 * scenario every file uses (test_payout.h): tenant T-0417 (daily
 * limit 50,000.00 EUR), requester limit 10,000.00 EUR, beneficiary
 * BEN-2208 verified and Active, destination DST-77 version 3, payout
 * PAY-3107 in Draft at version 6, 4,250.00 EUR, purpose "supplier-invoice
 * INV-9031". This file builds it and lists the tests in the order they
 * run; they are in test_payout_terms.c, test_payout_policy.c and
 * test_payout_recheck.c.
 */
#include "test_payout.h"

og_payout_terms base_terms(void)
{
    og_payout_terms t = {"T-0417", "BEN-2208", "DST-77", 3,
                         "4250.00", "EUR", "supplier-invoice INV-9031"};
    return t;
}

og_payout_context base_context(void)
{
    og_payout_context c;

    memset(&c, 0, sizeof c);
    c.tenant.payouts_suspended = false;
    c.tenant.daily_limit = 5000000;
    c.tenant.paid_today = 0;
    c.tenant.reserved_today = 0;
    c.tenant.settings_version = 12;
    c.beneficiary.verified = true;
    c.beneficiary.status = OG_PAYOUT_BENEFICIARY_ACTIVE;
    c.beneficiary.version = 4;
    c.destination.beneficiary_id = "BEN-2208";
    c.destination.version = 3;
    c.destination.changed_at_us = NOW - 30 * DAY;
    c.payout.state = OG_PAYOUT_STATE_DRAFT;
    c.payout.version = 6;
    c.payout.terms = base_terms();
    c.intent.terms = base_terms();
    c.intent.payout_version = 6;
    c.requester.approval_limit = 1000000;
    c.observed_at_us = NOW;
    return c;
}

og_payout_context exec_context(void)
{
    og_payout_context c = base_context();

    c.payout.state = OG_PAYOUT_STATE_APPROVED;
    c.payout.version = 7;
    c.tenant.reserved_today = 425000;
    c.observed_at_us = LATER;
    memset(&c.intent, 0, sizeof c.intent); /* not read by the recheck */
    return c;
}

og_payout_grant_binding grant_19c(void)
{
    og_payout_grant_binding g = {FP_PAY3107, 7};
    return g;
}

og_payout_verdict evaluate_ok(const og_payout_context *c)
{
    og_payout_verdict v;

    assert_int_equal(og_payout_evaluate(c, &v), 0);
    return v;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(currencies_have_their_iso_4217_scales),
        cmocka_unit_test(amounts_parse_at_the_currency_scale),
        cmocka_unit_test(amounts_format_at_the_currency_scale),
        cmocka_unit_test(amounts_round_trip),
        cmocka_unit_test(purposes_are_trimmed_collapsed_and_capped),
        cmocka_unit_test(fingerprint_known_answer),
        cmocka_unit_test(fingerprint_ignores_spelling),
        cmocka_unit_test(fingerprint_changes_with_every_field),
        cmocka_unit_test(absent_purpose_differs_from_every_present_one),
        cmocka_unit_test(length_prefixes_prevent_collisions),
        cmocka_unit_test(bad_terms_are_refused_with_their_field),
        cmocka_unit_test(canonical_cap_holds_the_largest_terms),
        cmocka_unit_test(policy_table_of_section_4),
        cmocka_unit_test(paths_of_section_8_decided_by_the_policy),
        cmocka_unit_test(policy_reports_the_first_rule_in_the_tables_order),
        cmocka_unit_test(unavailable_context_reads_nothing_else),
        cmocka_unit_test(daily_limit_boundary_and_overflow),
        cmocka_unit_test(recently_changed_boundary),
        cmocka_unit_test(requester_limit_boundary),
        cmocka_unit_test(verdict_carries_fingerprint_policy_and_versions),
        cmocka_unit_test(acknowledgment_covers_the_destination_version),
        cmocka_unit_test(inconsistent_contexts_are_errors),
        cmocka_unit_test(execution_recheck),
        cmocka_unit_test(decision_fingerprint_is_what_the_recheck_compares),
        cmocka_unit_test(execution_recheck_errors),
        cmocka_unit_test(
            reauthorization_expects_approved_without_an_active_attempt),
        cmocka_unit_test(release_day_is_the_local_date_in_the_settlement_time_zone),
        cmocka_unit_test(names_are_stable),
        cmocka_unit_test(error_codes_were_appended),
    };
    return t_run_tests("payout", tests, NULL, NULL);
}
