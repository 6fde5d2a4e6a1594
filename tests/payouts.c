/*
 * payouts.c — the payout store (schemas 8-10: decision, claim, resolution,
 * oncegate/payout_store.h; docs/payouts.md sections 3 to 5 and
 * docs/design.md "Delayed payouts: the decision side"), run unchanged on
 * both engines and both consumption-keys modes:
 *
 *   conformance BACKEND payouts [token [readable|hashed]]
 *
 * Each test is named after the claim it proves. The concurrency claims
 * race real callers — threads on two store objects, and separate OS
 * processes with their own — against the real engine, and repeat. Rows are
 * read behind the store's back (tests/harness.c's raw access), so what is
 * checked is what the store holds, not what it says.
 *
 * This file: the world every test builds (payouts.h), the claim's helpers,
 * and the group's list, in the order it runs. The tests are in
 * payouts_decide.c, payouts_grants.c, payouts_context.c, payouts_claim.c
 * and payouts_resolve.c.
 */
#include "payouts.h"

/* ===========================================================================
 * A world: a tenant, a verified Active beneficiary, a destination changed
 * long ago (so destination.recently-changed does not decide), payouts.
 * ========================================================================= */

void p_id(char *out, const p_world *w, const char *prefix, int n)
{
    snprintf(out, 64, "%s-%s-%d", prefix, w->tag, n);
}

void p_raw_exec(t_raw *raw, const char *sql)
{
    if (t_raw_exec(raw, sql) != 0)
        fail_msg("raw: %s", sql);
}

void p_age_destination(t_raw *raw, const char *dst, int days)
{
    char sql[512];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = clock_timestamp() -"
                 " interval '%d days' WHERE destination_id = '%s'",
                 days, dst);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE destinations SET changed_at = %lld"
                 " WHERE destination_id = '%s'",
                 (long long)(t_now_us() - days * DAY), dst);
    p_raw_exec(raw, sql);
}

og_payout_put_result p_put_ok(int rc, og_payout_put_result r,
                              const char *what)
{
    if (rc != 0 || r.outcome != OG_PAYOUT_WRITTEN)
        fail_msg("%s: %s / %s", what, og_err_name(rc),
                 og_payout_write_name(r.outcome));
    return r;
}

void p_world_new(og_store *s, t_raw *raw, p_world *w, const char *tag,
                 int64_t limit)
{
    char u[OG_UUID_LEN + 1];
    og_payout_put_result r = {0, 0};
    int rc;

    memset(w, 0, sizeof *w);
    t_uuid(u);
    snprintf(w->tag, sizeof w->tag, "%s-%.8s", tag, u);
    p_id(w->tenant, w, "T", 0);
    p_id(w->ben, w, "BEN", 0);
    p_id(w->dst, w, "DST", 0);
    snprintf(w->token, sizeof w->token, "tok_SECRET_%.8s%.4s", u, u + 9);
    {
        og_payout_tenant_settings t = {w->tenant, false, limit, "EUR", 0};
        rc = og_payout_tenant_put(s, &t, 0, &r);
        p_put_ok(rc, r, "tenant");
    }
    {
        og_payout_beneficiary_record b = {w->ben, w->tenant, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};
        rc = og_payout_beneficiary_put(s, &b, 0, &r);
        p_put_ok(rc, r, "beneficiary");
    }
    {
        og_payout_destination_record d = {w->dst, w->ben, w->token};
        rc = og_payout_destination_put(s, &d, 0, &r);
        p_put_ok(rc, r, "destination");
    }
    p_age_destination(raw, w->dst, 30);
}

void p_draft(og_store *s, const p_world *w, const char *id,
             const char *amount)
{
    og_payout_draft_req d = {
        id, {w->tenant, w->ben, w->dst, 1, amount, "EUR", "invoice INV-9031"},
        "clerk-22"};
    og_payout_put_result r = {0, 0};
    int rc = og_payout_draft(s, &d, &r);

    p_put_ok(rc, r, "draft");
    assert_int_equal(r.version, 1);
}

void p_window(og_payout_decide_req *r, int start_min)
{
    r->not_before_us = t_now_us() + start_min * MINUTE;
    r->expires_at_us = r->not_before_us + 30 * MINUTE;
}

og_payout_decide_req p_req(const char *payout_id)
{
    og_payout_decide_req r;

    memset(&r, 0, sizeof r);
    r.payout_id = payout_id;
    r.requester_id = "clerk-22";
    r.requester_role = "accounts-payable";
    r.requester_approval_limit = 1000000; /* 10,000.00 EUR */
    r.correlation_id = "COR-8812";
    r.audience = OG_PAYOUT_AUDIENCE;
    p_window(&r, 5);
    return r;
}

og_payout_decision p_decide(og_store *s, const og_payout_decide_req *r)
{
    og_payout_decision d;
    int rc = og_payout_decide(s, r, &d);

    if (rc != 0)
        fail_msg("og_payout_decide(%s): %s", r->payout_id, og_err_name(rc));
    return d;
}

og_payout_decision p_decide_allowed(og_store *s, const char *id)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d = p_decide(s, &r);

    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

int64_t p_count(t_raw *raw, const char *table, const char *where)
{
    return t_raw_int(raw, "SELECT count(*) FROM %s WHERE %s", table, where);
}

int64_t p_count_payout(t_raw *raw, const char *table, const char *id)
{
    char where[1024];

    snprintf(where, sizeof where, "payout_id = '%s'", id);
    return p_count(raw, table, where);
}

int64_t p_reserved(t_raw *raw, const char *tenant)
{
    return t_raw_int(raw,
                     "SELECT coalesce(sum(reserved), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     tenant);
}

og_payout_view p_get(og_store *s, const char *id)
{
    og_payout_view v;

    assert_int_equal(og_payout_get(s, id, &v), 1);
    return v;
}

char *p_rows_text(t_raw *raw, const char *table, const char *where)
{
    char sql[8192];

    if (t_kind == T_POSTGRES) {
        snprintf(sql, sizeof sql, "SELECT x::text FROM %s x WHERE %s", table,
                 where);
    } else {
        char q[256], *cols;
        size_t n = 0;

        snprintf(q, sizeof q, "SELECT name FROM pragma_table_info('%s')",
                 table);
        cols = t_raw_lines(raw, q);
        assert_non_null(cols);
        n = (size_t)snprintf(sql, sizeof sql, "SELECT ''");
        for (char *line = strtok(cols, "\n"); line; line = strtok(NULL, "\n"))
            n += (size_t)snprintf(sql + n, sizeof sql - n,
                                  " || quote(\"%s\") || '|'", line);
        snprintf(sql + n, sizeof sql - n, " FROM %s WHERE %s", table, where);
        free(cols);
    }
    return t_raw_lines(raw, sql);
}

/* ===========================================================================
 * Grants and claims, as the tests of several files use them
 * ========================================================================= */

void p_consume(t_raw *raw, const char *grant_id)
{
    char sql[512], op[OG_UUID_LEN + 1];

    t_uuid(op);
    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE grants SET consumed_at = clock_timestamp(),"
                 " consumed_by_operation = '%s'"
                 " WHERE issuer = 'payouts' AND grant_id = '%s'",
                 op, grant_id);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE grants SET consumed_at = %lld,"
                 " consumed_by_operation = '%s'"
                 " WHERE issuer = 'payouts' AND grant_id = '%s'",
                 (long long)t_now_us(), op, grant_id);
    p_raw_exec(raw, sql);
}

og_payout_decision p_decide_window_past(og_store *s, const char *id,
                                        int ago_min)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d;

    r.expires_at_us = t_now_us() - ago_min * MINUTE;
    r.not_before_us = r.expires_at_us - 20 * MINUTE;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    return d;
}

og_payout_decision p_decide_now(og_store *s, const char *id)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d;

    r.not_before_us = t_now_us() - SEC;
    r.expires_at_us = r.not_before_us + 30 * MINUTE;
    d = p_decide(s, &r);
    if (d.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("%s: %s", id, og_payout_reason_name(d.verdict.reason));
    return d;
}

og_payout_claim_req p_claim_req(const og_payout_decision *d,
                                const char *worker)
{
    og_payout_claim_req c;

    memset(&c, 0, sizeof c);
    c.grant_id = d->grant_id;
    c.worker_id = worker;
    c.audience = OG_PAYOUT_AUDIENCE;
    c.relied = d->verdict.evaluated;
    c.relied.payout = d->executable_payout_version;
    c.policy_version = OG_PAYOUT_POLICY_VERSION;
    c.send_window_us = 5 * MINUTE;
    c.lease_us = 2 * MINUTE;
    return c;
}

og_payout_claim_result p_claim(og_store *s,
                               const og_payout_claim_req *c)
{
    og_payout_claim_result r;
    int rc = og_payout_claim(s, c, &r);

    if (rc != 0)
        fail_msg("og_payout_claim(%s): %s", c->grant_id, og_err_name(rc));
    return r;
}

/* The rows a claim writes, for "nothing written" checks. */
const char *const p_claim_tables[P_CLAIM_TABLES] = {
    "operations", "payout_events", "payout_decisions", "payout_grants",
    "tenant_days"};

void p_counts(t_raw *raw, int64_t out[P_CLAIM_TABLES])
{
    for (size_t i = 0; i < P_CLAIM_TABLES; i++)
        out[i] = p_count(raw, p_claim_tables[i], "1 = 1");
}

void p_assert_unclaimed(og_store *s, t_raw *raw, const int64_t *before,
                        const char *id, const og_payout_view *was,
                        const char *grant_id)
{
    int64_t now[P_CLAIM_TABLES];
    og_payout_view v = p_get(s, id);
    og_payout_grant_view g;

    p_counts(raw, now);
    for (size_t i = 0; i < P_CLAIM_TABLES; i++)
        if (now[i] != before[i])
            fail_msg("%s: %lld rows, %lld before", p_claim_tables[i],
                     (long long)now[i], (long long)before[i]);
    assert_int_equal(v.version, was->version);
    assert_int_equal(v.state, was->state);
    assert_string_equal(v.active_attempt, was->active_attempt);
    assert_int_equal(og_payout_grant_get(s, grant_id, &g), 1);
    assert_int_equal(g.consumed_at_us, 0);
}

/* ===========================================================================
 * The group, in the order it runs
 * ========================================================================= */

const struct CMUnitTest t_payout_tests[] = {
    cmocka_unit_test(
        claim_sets_the_attempt_key_and_reference_from_the_payout_and_attempt_number),
    cmocka_unit_test(
        redelivery_after_the_claim_is_a_duplicate_with_no_state_change),
    cmocka_unit_test(
        context_change_between_validation_and_claim_rolls_the_claim_back),
    cmocka_unit_test(redelivery_after_the_attempt_was_archived_is_a_duplicate),
    cmocka_unit_test(claim_failing_before_its_commit_writes_nothing),
    cmocka_unit_test(resolution_failing_before_its_commit_writes_nothing),
    cmocka_unit_test(resolution_moves_the_reservation_with_the_outcome),
    cmocka_unit_test(stale_owner_cannot_resolve),
    cmocka_unit_test(unknown_holds_the_reservation_and_blocks_reauthorization),
    cmocka_unit_test(
        reauthorization_after_not_applied_gets_attempt_2_with_its_own_key),
    cmocka_unit_test(claim_sets_when_not_found_may_be_final),
    cmocka_unit_test(not_applied_needs_a_lookup_begun_past_the_cutoff),
    cmocka_unit_test(reconcile_later_defers_the_attempt_and_counts_the_lookup),
    cmocka_unit_test(late_evidence_resolves_a_still_unknown_attempt),
    cmocka_unit_test(return_is_recorded_once_and_changes_nothing_else),
    cmocka_unit_test(operator_resolution_moves_payout_and_reservation),
    cmocka_unit_test(
        claim_ack_lost_leaves_a_committed_claim_the_sweeper_settles),
    cmocka_unit_test(
        start_ack_lost_leaves_a_started_attempt_the_sweeper_makes_unknown),
    cmocka_unit_test(
        late_evidence_and_the_reconciler_race_and_exactly_one_resolves),
    cmocka_unit_test(expired_or_revoked_grant_is_not_claimed),
    cmocka_unit_test(grant_is_valid_until_expires_at_with_no_leeway),
    cmocka_unit_test(
        policy_release_is_the_stores_and_fences_decisions_and_claims),
    cmocka_unit_test(release_day_is_the_date_in_the_tenants_time_zone),
    cmocka_unit_test(migration_12_turns_offsets_into_zones),
    cmocka_unit_test(concurrent_claims_of_one_grant_make_exactly_one_attempt),
    cmocka_unit_test(context_versions_move_with_every_change),
    cmocka_unit_test(
        destination_import_keeps_an_earlier_changed_at_and_never_a_later),
    cmocka_unit_test(bad_payout_input_gets_the_cores_error_and_writes_nothing),
    cmocka_unit_test(
        allowed_decision_writes_decision_grant_reservation_approval_and_job_in_one_transaction),
    cmocka_unit_test(
        allowed_decision_failing_at_any_step_of_its_transaction_writes_nothing),
    cmocka_unit_test(non_allowed_decision_is_written_alone_and_issues_nothing),
    cmocka_unit_test(decision_is_never_rewritten),
    cmocka_unit_test(decision_read_returns_what_the_decision_captured),
    cmocka_unit_test(reauthorization_is_refused_while_an_attempt_is_active),
    cmocka_unit_test(
        concurrent_reauthorizations_allocate_distinct_attempt_numbers),
    cmocka_unit_test(approval_settles_an_acknowledgment_with_a_fresh_decision),
    cmocka_unit_test(approval_of_an_escalation_uses_the_approvers_limit),
    cmocka_unit_test(approval_refuses_what_it_cannot_settle_and_writes_nothing),
    cmocka_unit_test(acknowledgment_is_for_the_destination_version_evaluated),
    cmocka_unit_test(concurrent_approvals_of_one_decision_settle_it_once),
    cmocka_unit_test(draft_edit_replaces_the_terms_under_a_version_precondition),
    cmocka_unit_test(
        two_payouts_decided_concurrently_cannot_exceed_the_daily_limit),
    cmocka_unit_test(unused_grant_expiry_releases_its_reservation_once),
    cmocka_unit_test(
        revoked_grant_releases_its_reservation_and_cannot_be_presented),
    cmocka_unit_test(
        job_is_redelivered_after_its_delivery_lease_and_acknowledged_once),
    cmocka_unit_test(resubmitted_job_points_at_the_same_grant),
    cmocka_unit_test(no_destination_token_in_decisions_grants_jobs_or_events),
    cmocka_unit_test(payout_history_lists_every_step_in_order),
    cmocka_unit_test(
        payout_stats_count_held_reservations_and_unconsumed_grants),
    cmocka_unit_test(
        context_that_cannot_be_read_is_unavailable_and_nothing_is_decided),
};
const size_t t_payout_tests_count =
    sizeof t_payout_tests / sizeof t_payout_tests[0];
