/*
 * payouts.h — what the files of the payout store's conformance group share
 * (payouts.c and payouts_*.c): the world every test builds, rows read
 * behind the store's back, the claim's helpers, and the tests, file by
 * file (payouts.c lists them in the order they run).
 */
#ifndef OG_TEST_PAYOUTS_H
#define OG_TEST_PAYOUTS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "oncegate/payout_store.h"

#ifndef OG_TEST_FAULT_INJECTION
#define OG_TEST_FAULT_INJECTION 0
#endif

#define SEC INT64_C(1000000)
#define MINUTE (60 * SEC)
#define DAY (86400 * SEC)
/* The claim under test is atomicity, not latency (conformance.c). */
#define P_RACE_TIMEOUT_MS 30000


/* ===========================================================================
 * A world: a tenant, a verified Active beneficiary, a destination changed
 * long ago (so destination.recently-changed does not decide), payouts.
 * ========================================================================= */

typedef struct p_world {
    char tag[48];
    char tenant[64], ben[64], dst[64];
    char token[96];
} p_world;

/* A unique id "<prefix>-<tag>-<n>" into out (64 bytes). */
void p_id(char *out, const p_world *w, const char *prefix, int n);

void p_raw_exec(t_raw *raw, const char *sql);

/* Moves destination dst's changed_at `days` into the past, behind the
 * store's back: tests decide when it changed rather than wait a week. */
void p_age_destination(t_raw *raw, const char *dst, int days);

og_payout_put_result p_put_ok(int rc, og_payout_put_result r,
                              const char *what);

/* Creates w's records in s: tenant (limit in EUR cents, offset 0), its
 * beneficiary, a destination aged 30 days. */
void p_world_new(og_store *s, t_raw *raw, p_world *w, const char *tag,
                 int64_t limit);

/* Drafts payout id of amount (EUR text) in w. */
void p_draft(og_store *s, const p_world *w, const char *id,
             const char *amount);

/* A window from now + start_min for 30 minutes. */
void p_window(og_payout_decide_req *r, int start_min);

og_payout_decide_req p_req(const char *payout_id);

og_payout_decision p_decide(og_store *s, const og_payout_decide_req *r);

og_payout_decision p_decide_allowed(og_store *s, const char *id);

/* Counts rows of table where the condition holds (printf-formatted). */
int64_t p_count(t_raw *raw, const char *table, const char *where);

int64_t p_count_payout(t_raw *raw, const char *table, const char *id);

/* The tenant's reserved total over all its days (0 without a day row). */
int64_t p_reserved(t_raw *raw, const char *tenant);

og_payout_view p_get(og_store *s, const char *id);

/* Every row of table matching where, every column as text, one line a row
 * (SQLite: quote() of each column; PostgreSQL: the row as text), into a
 * malloc'd string. */
char *p_rows_text(t_raw *raw, const char *table, const char *where);

/* ===========================================================================
 * Grants and claims
 * ========================================================================= */

/* Marks the grant consumed by an attempt, behind the store's back: the
 * claim that consumes it is another branch's. */
void p_consume(t_raw *raw, const char *grant_id);

/* A decision whose window ended `ago_min` minutes ago (20 minutes long):
 * the policy does not read the window, the janitor does. */
og_payout_decision p_decide_window_past(og_store *s, const char *id,
                                        int ago_min);

/* An Allowed decision whose window is open now (not_before 1 s ago). */
og_payout_decision p_decide_now(og_store *s, const char *id);

/* The claim request a VALID recheck of d would hand over. */
og_payout_claim_req p_claim_req(const og_payout_decision *d,
                                const char *worker);

og_payout_claim_result p_claim(og_store *s,
                               const og_payout_claim_req *c);

/* The rows a claim writes, for "nothing written" checks. */
#define P_CLAIM_TABLES 5
extern const char *const p_claim_tables[P_CLAIM_TABLES];

void p_counts(t_raw *raw, int64_t out[P_CLAIM_TABLES]);

/* Nothing changed: the same row counts, the payout as it was, the grant
 * unconsumed. */
void p_assert_unclaimed(og_store *s, t_raw *raw, const int64_t *before,
                        const char *id, const og_payout_view *was,
                        const char *grant_id);

/* ===========================================================================
 * The resolution's helpers (payouts_resolve.c)
 * ========================================================================= */

/* A payout of 100.00 EUR in a world of its own, decided now and claimed by
 * worker-7 with lease_us: *d and the claim's result. */
og_payout_claim_result p_claimed(og_store *s, t_raw *raw, p_world *w,
                                 const char *tag, char id[64],
                                 og_payout_decision *d, int64_t lease_us);
/* worker-7 starts the claimed attempt (owner version 1). */
void p_start(og_store *s, const og_payout_claim_result *r);
/* og_payout_resolve with reason "test.outcome"; fails the test on error. */
og_payout_resolution p_resolve(og_store *s, const char *op,
                               unsigned expected, int64_t v, og_op_status to,
                               const char *actor);
/* The tenant's paid total over all its days. */
int64_t p_paid(t_raw *raw, const char *tenant);
/* The binding released for cause (NULL: held). */
void p_assert_release(t_raw *raw, const char *grant_id, const char *cause);
/* Everything a resolution could change, for "nothing changed" checks. */
typedef struct p_resolve_state {
    int64_t payout_events, operation_events, reserved, paid, released;
    og_payout_view v;
    og_operation op;
} p_resolve_state;

p_resolve_state p_resolve_snap(og_store *s, t_raw *raw, const p_world *w,
                               const char *id, const char *op);
void p_assert_unchanged(const p_resolve_state *a, const p_resolve_state *b);
/* Takes op over once its lease lapsed: the new owner version. */
int64_t p_takeover(og_store *s, const char *op, int64_t v);

/* ===========================================================================
 * The tests, file by file
 * ========================================================================= */

/* payouts_decide.c */
void allowed_decision_failing_at_any_step_of_its_transaction_writes_nothing(
    void **state);
void allowed_decision_writes_decision_grant_reservation_approval_and_job_in_one_transaction(
    void **state);
void non_allowed_decision_is_written_alone_and_issues_nothing(void **state);
void decision_is_never_rewritten(void **state);
void decision_read_returns_what_the_decision_captured(void **state);
void reauthorization_is_refused_while_an_attempt_is_active(void **state);
void concurrent_reauthorizations_allocate_distinct_attempt_numbers(
    void **state);
void two_payouts_decided_concurrently_cannot_exceed_the_daily_limit(
    void **state);

/* payouts_grants.c */
void unused_grant_expiry_releases_its_reservation_once(void **state);
void revoked_grant_releases_its_reservation_and_cannot_be_presented(
    void **state);
void job_is_redelivered_after_its_delivery_lease_and_acknowledged_once(
    void **state);
void resubmitted_job_points_at_the_same_grant(void **state);
void no_destination_token_in_decisions_grants_jobs_or_events(void **state);
void payout_history_lists_every_step_in_order(void **state);
void payout_stats_count_held_reservations_and_unconsumed_grants(void **state);

/* payouts_context.c */
void context_versions_move_with_every_change(void **state);
void destination_import_keeps_an_earlier_changed_at_and_never_a_later(
    void **state);
void bad_payout_input_gets_the_cores_error_and_writes_nothing(void **state);
void context_that_cannot_be_read_is_unavailable_and_nothing_is_decided(
    void **state);

/* payouts_claim.c */
void claim_sets_the_attempt_key_and_reference_from_the_payout_and_attempt_number(
    void **state);
void redelivery_after_the_claim_is_a_duplicate_with_no_state_change(
    void **state);
void context_change_between_validation_and_claim_rolls_the_claim_back(
    void **state);
void expired_or_revoked_grant_is_not_claimed(void **state);

/* payouts_fidelity.c (schema 12) */
void grant_is_valid_until_expires_at_with_no_leeway(void **state);
void policy_release_is_the_stores_and_fences_decisions_and_claims(
    void **state);
void release_day_is_the_date_in_the_tenants_time_zone(void **state);
void migration_12_turns_offsets_into_zones(void **state);
void concurrent_claims_of_one_grant_make_exactly_one_attempt(void **state);

/* payouts_resolve.c */
void redelivery_after_the_attempt_was_archived_is_a_duplicate(void **state);
void claim_failing_before_its_commit_writes_nothing(void **state);
void resolution_failing_before_its_commit_writes_nothing(void **state);
void resolution_moves_the_reservation_with_the_outcome(void **state);
void stale_owner_cannot_resolve(void **state);
void unknown_holds_the_reservation_and_blocks_reauthorization(void **state);
void reauthorization_after_not_applied_gets_attempt_2_with_its_own_key(
    void **state);

/* payouts_after.c */
void claim_sets_when_not_found_may_be_final(void **state);
void not_applied_needs_a_lookup_begun_past_the_cutoff(void **state);
void reconcile_later_defers_the_attempt_and_counts_the_lookup(void **state);
void late_evidence_resolves_a_still_unknown_attempt(void **state);
void return_is_recorded_once_and_changes_nothing_else(void **state);
void operator_resolution_moves_payout_and_reservation(void **state);
void claim_ack_lost_leaves_a_committed_claim_the_sweeper_settles(
    void **state);
void start_ack_lost_leaves_a_started_attempt_the_sweeper_makes_unknown(
    void **state);
void late_evidence_and_the_reconciler_race_and_exactly_one_resolves(
    void **state);

/* payouts_approve.c */
void approval_settles_an_acknowledgment_with_a_fresh_decision(void **state);
void approval_of_an_escalation_uses_the_approvers_limit(void **state);
void approval_refuses_what_it_cannot_settle_and_writes_nothing(void **state);
void acknowledgment_is_for_the_destination_version_evaluated(void **state);
void concurrent_approvals_of_one_decision_settle_it_once(void **state);

/* payouts_edit.c */
void draft_edit_replaces_the_terms_under_a_version_precondition(void **state);

#endif
