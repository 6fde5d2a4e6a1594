/*
 * test_payout.h — what the files of test_payout share: the scenario
 * (test_payout.c builds it) and the tests, file by file.
 */
#ifndef OG_TEST_PAYOUT_H
#define OG_TEST_PAYOUT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "oncegate/payout.h"
#include "support.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define SEC INT64_C(1000000)
#define DAY (INT64_C(86400) * SEC)
#define NOW (INT64_C(1800000000) * SEC) /* the decision, 09:58 */
#define LATER (NOW + 6 * 3600 * SEC)     /* the worker, 16:00 */

/* The fingerprint of the scenario's PAY-3107 terms, computed once,
 * independently of this code (Python: hashlib.sha256 over the
 * serialization spelled out in payout.h), and fixed here: a change to the
 * serialization, the tag or the canonical forms changes it. */
#define FP_PAY3107                                                             \
    "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22a"
/* The same terms without a purpose. */
#define FP_PAY3107_NO_PURPOSE                                                  \
    "f56749940e66ec531a9ff7c326af699153c979f8352383d48a57dafbbd799a1f"
/* T-0417, BEN-2208, DST-77 v3, 4250 JPY, no purpose. */
#define FP_JPY_4250                                                            \
    "2579115312ecb196700862576d8806f782da753a8c654ffe7073df0754c7180e"

og_payout_terms base_terms(void);

/* The context of the 09:58 decision: every rule passes. Money in EUR
 * cents. */
og_payout_context base_context(void);

/* The context the worker reads at 16:00 after the Allowed decision: the
 * payout Approved at version 7, this payout's 4,250.00 reserved. The
 * requester's facts are the captured ones. */
og_payout_context exec_context(void);

og_payout_grant_binding grant_19c(void);

og_payout_verdict evaluate_ok(const og_payout_context *c);

/* One change to the base context each (a row of a table). */
typedef void (*mutation)(og_payout_context *);

/* test_payout_terms.c */
void currencies_have_their_iso_4217_scales(void **state);
void amounts_parse_at_the_currency_scale(void **state);
void amounts_format_at_the_currency_scale(void **state);
void amounts_round_trip(void **state);
void purposes_are_trimmed_collapsed_and_capped(void **state);
void fingerprint_known_answer(void **state);
void fingerprint_ignores_spelling(void **state);
void fingerprint_changes_with_every_field(void **state);
void absent_purpose_differs_from_every_present_one(void **state);
void length_prefixes_prevent_collisions(void **state);
void bad_terms_are_refused_with_their_field(void **state);
void canonical_cap_holds_the_largest_terms(void **state);

/* test_payout_policy.c */
void policy_table_of_section_4(void **state);
void paths_of_section_8_decided_by_the_policy(void **state);
void policy_reports_the_first_rule_in_the_tables_order(void **state);
void unavailable_context_reads_nothing_else(void **state);
void daily_limit_boundary_and_overflow(void **state);
void recently_changed_boundary(void **state);
void requester_limit_boundary(void **state);
void verdict_carries_fingerprint_policy_and_versions(void **state);
void acknowledgment_covers_the_destination_version(void **state);
void inconsistent_contexts_are_errors(void **state);

/* test_payout_recheck.c */
void execution_recheck(void **state);
void decision_fingerprint_is_what_the_recheck_compares(void **state);
void execution_recheck_errors(void **state);
void reauthorization_expects_approved_without_an_active_attempt(void **state);
void release_day_is_the_local_date_in_the_settlement_time_zone(void **state);
void names_are_stable(void **state);
void error_codes_were_appended(void **state);

#endif
