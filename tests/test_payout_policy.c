/*
 * test_payout_policy.c — the policy (og_payout_evaluate): the
 * representative matrix, the decision rows, the order of checks, the
 * boundaries, inconsistent contexts.
 * (The decision side of a delayed payout, pure; test_payout.c has the
 * scenario and the list.)
 */
#include "test_payout.h"

/* ===========================================================================
 * The policy
 * ========================================================================= */

static void m_none(og_payout_context *c) { (void)c; }
static void m_unavailable(og_payout_context *c) { c->unavailable = true; }
static void m_tenant_suspended(og_payout_context *c)
{
    c->tenant.payouts_suspended = true;
}
static void m_not_verified(og_payout_context *c)
{
    c->beneficiary.verified = false;
}
static void m_beneficiary_suspended(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_SUSPENDED;
}
static void m_beneficiary_closed(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_CLOSED;
}
static void m_destination_other_beneficiary(og_payout_context *c)
{
    c->destination.beneficiary_id = "BEN-9999";
}
static void m_destination_other_version(og_payout_context *c)
{
    c->destination.version = 4;
}
static void m_payout_approved(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_APPROVED;
}
static void m_payout_cancelled(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_CANCELLED;
}
static void m_payout_version_moved(og_payout_context *c)
{
    c->payout.version = 7;
}
/* 45,750.01 paid + 4,250.00 = 50,000.01 > 50,000.00 */
static void m_daily_limit_over(og_payout_context *c)
{
    c->tenant.paid_today = 4575001;
}
/* Another payout of 46,000.00 is reserved: with this one's 4,250.00 the
 * total is 50,250.00; without the reservation it would pass. */
static void m_first_payout_reserved(og_payout_context *c)
{
    c->tenant.reserved_today = 4600000;
}
static void m_destination_recent(og_payout_context *c)
{
    c->destination.changed_at_us = c->observed_at_us - 2 * DAY;
}
static void m_above_requester(og_payout_context *c)
{
    c->requester.approval_limit = 400000; /* 4,000.00 < 4,250.00 */
}

typedef struct policy_row {
    const char *name;
    mutation m;
    og_payout_outcome outcome;
    og_payout_reason reason;
    const char *reason_text;
} policy_row;

static void run_policy_rows(const policy_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        og_payout_context c = base_context();
        rows[i].m(&c);
        print_message("%s\n", rows[i].name);
        og_payout_verdict v = evaluate_ok(&c);
        assert_int_equal(v.outcome, rows[i].outcome);
        assert_int_equal(v.reason, rows[i].reason);
        assert_string_equal(og_payout_reason_name(v.reason),
                            rows[i].reason_text);
        assert_string_equal(v.policy_version, OG_PAYOUT_POLICY_VERSION);
    }
}

/* The policy table (docs/payouts.md, section 4): one row per condition the
 * policy decides on (OG_PAYOUT_REASON_MAP, include/oncegate/payout.h),
 * named after it. */
void policy_table_of_section_4(void **state)
{
    static const policy_row rows[] = {
        {"Tenant payouts suspended", m_tenant_suspended, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_TENANT_SUSPENDED, "tenant.payouts-suspended"},
        {"Beneficiary not verified", m_not_verified, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE, "beneficiary.not-eligible"},
        {"Beneficiary not active: Suspended", m_beneficiary_suspended,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE,
         "beneficiary.not-eligible"},
        {"Beneficiary not active: Closed", m_beneficiary_closed,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE,
         "beneficiary.not-eligible"},
        {"Destination not registered to the beneficiary",
         m_destination_other_beneficiary, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED,
         "destination.not-registered"},
        {"Destination registered at another version than the intent's",
         m_destination_other_version, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED,
         "destination.not-registered"},
        {"Payout not in Draft: Approved", m_payout_approved, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE, "payout.not-submittable"},
        {"Payout not in Draft: Cancelled", m_payout_cancelled,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE,
         "payout.not-submittable"},
        {"Payout version differs from the intent", m_payout_version_moved,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE,
         "payout.not-submittable"},
        {"Paid plus reserved plus this payout exceed the daily limit",
         m_daily_limit_over, OG_PAYOUT_DENIED, OG_PAYOUT_REASON_DAILY_LIMIT,
         "tenant.daily-limit"},
        {"Tenant, beneficiary or payout record unavailable", m_unavailable,
         OG_PAYOUT_DEFERRED, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE,
         "context.unavailable"},
        {"Destination changed in the last 7 days", m_destination_recent,
         OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         "destination.recently-changed"},
        {"Amount above the requester's approval limit", m_above_requester,
         OG_PAYOUT_ESCALATION_RECOMMENDED,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT,
         "amount.above-requester-limit"},
        {"Otherwise", m_none, OG_PAYOUT_ALLOWED, OG_PAYOUT_REASON_ALLOWED,
         "payout.allowed"},
    };

    (void)state;
    run_policy_rows(rows, N(rows));

    /* Every state but Draft is not submittable. */
    for (int s = 0; s <= OG_PAYOUT_STATE_CANCELLED; s++) {
        og_payout_context c = base_context();
        c.payout.state = (og_payout_state)s;
        og_payout_verdict v = evaluate_ok(&c);
        print_message("state %s\n", og_payout_state_name(c.payout.state));
        assert_int_equal(v.reason,
                         s == OG_PAYOUT_STATE_DRAFT
                             ? OG_PAYOUT_REASON_ALLOWED
                             : OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    }
}

/* The paths of docs/payouts.md, section 8, that stop at the decision: the
 * outcomes the policy itself decides. */
void paths_of_section_8_decided_by_the_policy(void **state)
{
    static const policy_row rows[] = {
        {"Valid payout", m_none, OG_PAYOUT_ALLOWED, OG_PAYOUT_REASON_ALLOWED,
         "payout.allowed"},
        {"Tenant payouts suspended", m_tenant_suspended, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_TENANT_SUSPENDED, "tenant.payouts-suspended"},
        {"Beneficiary not verified", m_not_verified, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE, "beneficiary.not-eligible"},
        {"Context unavailable", m_unavailable, OG_PAYOUT_DEFERRED,
         OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE, "context.unavailable"},
        {"Second payout would exceed the daily limit once the first one's "
         "reservation is counted",
         m_first_payout_reserved, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DAILY_LIMIT, "tenant.daily-limit"},
        {"Destination recently changed", m_destination_recent,
         OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         "destination.recently-changed"},
        {"Amount above requester's limit", m_above_requester,
         OG_PAYOUT_ESCALATION_RECOMMENDED,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT,
         "amount.above-requester-limit"},
    };

    (void)state;
    run_policy_rows(rows, N(rows));
}

/* PC6: the rules in OG_PAYOUT_REASON_MAP's order, the order of the policy
 * table (docs/payouts.md, section 4). Every pair of failing rules reports
 * the earlier one; an unavailable context reports context.unavailable
 * whatever else fails. */
void policy_reports_the_first_rule_in_the_tables_order(void **state)
{
    static const struct {
        mutation m;
        og_payout_reason reason;
    } order[] = {
        {m_tenant_suspended, OG_PAYOUT_REASON_TENANT_SUSPENDED},
        {m_not_verified, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE},
        {m_destination_other_beneficiary,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED},
        {m_payout_version_moved, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE},
        {m_daily_limit_over, OG_PAYOUT_REASON_DAILY_LIMIT},
        {m_destination_recent, OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {m_above_requester, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
    };

    (void)state;
    /* The list above is OG_PAYOUT_REASON_MAP's order. */
    for (size_t i = 0; i < N(order); i++)
        assert_int_equal(order[i].reason,
                         OG_PAYOUT_REASON_TENANT_SUSPENDED + i);
    for (size_t i = 0; i < N(order); i++) {
        for (size_t j = i + 1; j < N(order); j++) {
            og_payout_context c = base_context();
            order[j].m(&c);
            order[i].m(&c);
            print_message("%s before %s\n",
                          og_payout_reason_name(order[i].reason),
                          og_payout_reason_name(order[j].reason));
            assert_int_equal(evaluate_ok(&c).reason, order[i].reason);
        }
        og_payout_context c = base_context();
        order[i].m(&c);
        m_unavailable(&c);
        assert_int_equal(evaluate_ok(&c).reason,
                         OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    }
    /* Everything at once: the first. */
    og_payout_context c = base_context();
    for (size_t i = 0; i < N(order); i++)
        order[i].m(&c);
    assert_int_equal(evaluate_ok(&c).reason,
                     OG_PAYOUT_REASON_TENANT_SUSPENDED);
}

/* PC5: an unavailable context is answered without reading anything else —
 * here, everything else is garbage that would be an error if read. */
void unavailable_context_reads_nothing_else(void **state)
{
    og_payout_context c;
    og_payout_verdict v;

    (void)state;
    memset(&c, 0xff, sizeof c);
    c.unavailable = true;
    c.intent.terms.tenant_id = NULL;
    c.destination.beneficiary_id = NULL;
    c.payout.terms.amount = NULL;
    memset(&v, 0xa5, sizeof v);
    assert_int_equal(og_payout_evaluate(&c, &v), 0);
    assert_int_equal(v.outcome, OG_PAYOUT_DEFERRED);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    assert_string_equal(v.terms_fingerprint, "");
    assert_int_equal(v.evaluated.payout, 0);
    assert_int_equal(v.evaluated.tenant_settings, 0);
    assert_string_equal(v.policy_version, OG_PAYOUT_POLICY_VERSION);
}

/* paid + reserved + amount > limit denies; equal allows; a sum that
 * would overflow int64 denies. Amount 425,000 cents throughout. */
void daily_limit_boundary_and_overflow(void **state)
{
    static const struct {
        const char *name;
        int64_t paid, reserved, limit;
        og_payout_reason reason;
    } rows[] = {
        {"equal to the limit is allowed", 4000000, 575000, 5000000,
         OG_PAYOUT_REASON_ALLOWED},
        {"one minor unit over is denied", 4000000, 575001, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"one minor unit over through paid alone", 4575001, 0, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"one minor unit over through reserved alone", 0, 4575001, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"the amount alone is the limit", 0, 0, 425000,
         OG_PAYOUT_REASON_ALLOWED},
        {"the amount alone exceeds the limit", 0, 0, 424999,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"a zero limit", 0, 0, 0, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"sum exactly INT64_MAX is allowed under INT64_MAX",
         INT64_MAX - 425000, 0, INT64_MAX, OG_PAYOUT_REASON_ALLOWED},
        {"sum one past INT64_MAX overflows: denied",
         INT64_MAX - 424999, 0, INT64_MAX, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"paid + reserved overflows: denied", INT64_MAX, 1, INT64_MAX,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"paid and reserved at INT64_MAX: denied", INT64_MAX, INT64_MAX,
         INT64_MAX, OG_PAYOUT_REASON_DAILY_LIMIT},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.tenant.paid_today = rows[i].paid;
        c.tenant.reserved_today = rows[i].reserved;
        c.tenant.daily_limit = rows[i].limit;
        print_message("%s\n", rows[i].name);
        og_payout_verdict v = evaluate_ok(&c);
        assert_int_equal(v.reason, rows[i].reason);
        assert_int_equal(v.outcome, og_payout_reason_outcome(rows[i].reason));
    }
}

/* "Changed in the last 7 days" = observed - changed < 7 days, exact at
 * the boundary and for any int64 pair. */
void recently_changed_boundary(void **state)
{
    static const struct {
        const char *name;
        int64_t observed, changed;
        og_payout_reason reason;
    } rows[] = {
        {"exactly 7 days ago is not recent", NOW, NOW - 7 * DAY,
         OG_PAYOUT_REASON_ALLOWED},
        {"7 days less 1 us ago is recent", NOW, NOW - 7 * DAY + 1,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"changed at the observation", NOW, NOW,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"changed after the observation (skew) is recent", NOW, NOW + SEC,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"the widest gap does not overflow", INT64_MAX, INT64_MIN,
         OG_PAYOUT_REASON_ALLOWED},
        {"the widest negative gap does not overflow", INT64_MIN, INT64_MAX,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"epoch origin, 7 days later", 7 * DAY, 0, OG_PAYOUT_REASON_ALLOWED},
    };

    (void)state;
    assert_int_equal(OG_PAYOUT_RECENT_CHANGE_US, 7 * DAY);
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.observed_at_us = rows[i].observed;
        c.destination.changed_at_us = rows[i].changed;
        print_message("%s\n", rows[i].name);
        assert_int_equal(evaluate_ok(&c).reason, rows[i].reason);
    }
}

void requester_limit_boundary(void **state)
{
    static const struct {
        const char *name;
        int64_t limit;
        og_payout_reason reason;
    } rows[] = {
        {"amount equal to the limit is allowed", 425000,
         OG_PAYOUT_REASON_ALLOWED},
        {"one minor unit above the limit escalates", 424999,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"a zero limit escalates", 0, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"the scenario's 10,000.00", 1000000, OG_PAYOUT_REASON_ALLOWED},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.requester.approval_limit = rows[i].limit;
        print_message("%s\n", rows[i].name);
        assert_int_equal(evaluate_ok(&c).reason, rows[i].reason);
    }
}

/* The verdict names the policy, the intent's fingerprint and the versions
 * it evaluated; the fingerprint follows the intent's terms, not the
 * payout version. */
void verdict_carries_fingerprint_policy_and_versions(void **state)
{
    (void)state;
    og_payout_context c = base_context();
    og_payout_verdict v = evaluate_ok(&c);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);
    assert_string_equal(v.policy_version, "oncegate-payout-policy/1");
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.tenant_settings, 12);
    assert_int_equal(v.evaluated.beneficiary, 4);
    assert_int_equal(v.evaluated.destination, 3);
    assert_int_equal(v.evaluated.payout, 6);

    /* A denial carries them too. */
    m_tenant_suspended(&c);
    v = evaluate_ok(&c);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.payout, 6);

    /* Intent and record spelled differently are the same terms. */
    c = base_context();
    c.intent.terms.amount = "4250";
    c.payout.terms.purpose = "  supplier-invoice   INV-9031 ";
    v = evaluate_ok(&c);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_ALLOWED);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
}

static void m_x_negative_limit(og_payout_context *c)
{
    c->tenant.daily_limit = -1;
}
static void m_x_negative_paid(og_payout_context *c)
{
    c->tenant.paid_today = -1;
}
static void m_x_negative_reserved(og_payout_context *c)
{
    c->tenant.reserved_today = INT64_MIN;
}
static void m_x_settings_version(og_payout_context *c)
{
    c->tenant.settings_version = 0;
}
static void m_x_negative_approval(og_payout_context *c)
{
    c->requester.approval_limit = -425000;
}
static void m_x_status(og_payout_context *c)
{
    c->beneficiary.status = (og_payout_beneficiary_status)3;
}
static void m_x_status_negative(og_payout_context *c)
{
    c->beneficiary.status = (og_payout_beneficiary_status)-1;
}
static void m_x_beneficiary_version(og_payout_context *c)
{
    c->beneficiary.version = 0;
}
static void m_x_destination_beneficiary_null(og_payout_context *c)
{
    c->destination.beneficiary_id = NULL;
}
static void m_x_destination_beneficiary_space(og_payout_context *c)
{
    c->destination.beneficiary_id = "BEN 2208";
}
static void m_x_destination_version(og_payout_context *c)
{
    c->destination.version = -3;
}
static void m_x_state(og_payout_context *c)
{
    c->payout.state = (og_payout_state)7;
}
static void m_x_payout_version(og_payout_context *c)
{
    c->payout.version = 0;
}
static void m_x_intent_version(og_payout_context *c)
{
    c->intent.payout_version = 0;
}
static void m_x_intent_tenant(og_payout_context *c)
{
    c->intent.terms.tenant_id = "";
}
static void m_x_intent_amount(og_payout_context *c)
{
    c->intent.terms.amount = "4250.001";
}
static void m_x_record_purpose(og_payout_context *c)
{
    c->payout.terms.purpose = "\t";
}
static void m_x_record_amount(og_payout_context *c)
{
    c->payout.terms.amount = "4300.00";
}
static void m_x_record_destination_version(og_payout_context *c)
{
    c->payout.terms.destination_version = 4;
}
static void m_x_record_purpose_absent(og_payout_context *c)
{
    c->payout.terms.purpose = NULL;
}

/* Errors, not outcomes: an inconsistent context, bad terms, or an intent
 * that is not the record's. Nothing is written. */
void inconsistent_contexts_are_errors(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        int rc;
    } rows[] = {
        {"negative daily limit", m_x_negative_limit, OG_EPAYOUT_CONTEXT},
        {"negative paid today", m_x_negative_paid, OG_EPAYOUT_CONTEXT},
        {"negative reserved today", m_x_negative_reserved,
         OG_EPAYOUT_CONTEXT},
        {"settings version 0", m_x_settings_version, OG_EPAYOUT_CONTEXT},
        {"negative approval limit", m_x_negative_approval,
         OG_EPAYOUT_CONTEXT},
        {"beneficiary status past the list", m_x_status, OG_EPAYOUT_CONTEXT},
        {"beneficiary status negative", m_x_status_negative,
         OG_EPAYOUT_CONTEXT},
        {"beneficiary version 0", m_x_beneficiary_version,
         OG_EPAYOUT_CONTEXT},
        {"destination without a beneficiary",
         m_x_destination_beneficiary_null, OG_EPAYOUT_CONTEXT},
        {"destination beneficiary not an id",
         m_x_destination_beneficiary_space, OG_EPAYOUT_CONTEXT},
        {"destination version negative", m_x_destination_version,
         OG_EPAYOUT_CONTEXT},
        {"payout state past the list", m_x_state, OG_EPAYOUT_CONTEXT},
        {"payout version 0", m_x_payout_version, OG_EPAYOUT_CONTEXT},
        {"intent payout version 0", m_x_intent_version, OG_EPAYOUT_CONTEXT},
        {"intent tenant empty", m_x_intent_tenant, OG_EPAYOUT_TENANT},
        {"intent amount finer than EUR", m_x_intent_amount,
         OG_EAMOUNT_MINOR_UNITS},
        {"record purpose with a tab", m_x_record_purpose,
         OG_EPAYOUT_PURPOSE},
        {"record amount differs from the intent's", m_x_record_amount,
         OG_EPAYOUT_INTENT_MISMATCH},
        {"record destination version differs from the intent's",
         m_x_record_destination_version, OG_EPAYOUT_INTENT_MISMATCH},
        {"record without the intent's purpose", m_x_record_purpose_absent,
         OG_EPAYOUT_INTENT_MISMATCH},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        og_payout_verdict v, before;
        rows[i].m(&c);
        memset(&v, 0xa5, sizeof v);
        before = v;
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate(&c, &v), rows[i].rc);
        assert_memory_equal(&v, &before, sizeof v);
    }
    og_payout_context c = base_context();
    og_payout_verdict v;
    assert_int_equal(og_payout_evaluate(NULL, &v), OG_EINVAL);
    assert_int_equal(og_payout_evaluate(&c, NULL), OG_EINVAL);
}

/* An approver's acknowledgment (PC7; docs/payouts.md, section 4,
 * "Acknowledgment and escalation") covers the destination at exactly the
 * version the pending decision evaluated, in the decision and in the
 * worker's recheck alike; the rules before and after rule 7 still run. */
void acknowledgment_covers_the_destination_version(void **state)
{
    static const struct {
        const char *name;
        int64_t acked;          /* the context's acknowledged version */
        int64_t limit;          /* the approver's approval limit */
        og_payout_reason reason;
        og_payout_exec_outcome exec;
    } rows[] = {
        {"no acknowledgment: rule 7 asks for one", 0, 1000000,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         OG_PAYOUT_EXEC_REFUSED},
        {"acknowledged at the destination's version: allowed", 3, 1000000,
         OG_PAYOUT_REASON_ALLOWED, OG_PAYOUT_EXEC_VALID},
        {"acknowledged at an earlier version: asked again", 2, 1000000,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         OG_PAYOUT_EXEC_REFUSED},
        {"acknowledged, above the approver's limit: escalated", 3, 400000,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT, OG_PAYOUT_EXEC_REFUSED},
    };
    og_payout_verdict v;
    og_payout_exec_verdict x;
    og_payout_grant_binding g = grant_19c();

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context(), e = exec_context();

        print_message("%s\n", rows[i].name);
        c.destination.changed_at_us = c.observed_at_us - 2 * DAY;
        c.acknowledged_destination_version = rows[i].acked;
        c.requester.approval_limit = rows[i].limit;
        v = evaluate_ok(&c);
        assert_int_equal(v.reason, rows[i].reason);
        assert_int_equal(v.outcome, og_payout_reason_outcome(rows[i].reason));

        e.destination.changed_at_us = e.observed_at_us - 2 * DAY;
        e.acknowledged_destination_version = rows[i].acked;
        e.requester.approval_limit = rows[i].limit;
        assert_int_equal(og_payout_evaluate_for_execution(&e, &g, &x), 0);
        assert_int_equal(x.outcome, rows[i].exec);
        assert_int_equal(x.recheck.reason, rows[i].reason);
    }
    /* An acknowledgment changes nothing where rule 7 passes anyway, and
     * never lets an earlier rule by. */
    {
        og_payout_context c = base_context();

        c.acknowledged_destination_version = 3;
        assert_int_equal(evaluate_ok(&c).reason, OG_PAYOUT_REASON_ALLOWED);
        c.tenant.payouts_suspended = true;
        assert_int_equal(evaluate_ok(&c).reason,
                         OG_PAYOUT_REASON_TENANT_SUSPENDED);
        c = base_context();
        c.acknowledged_destination_version = -1;
        assert_int_equal(og_payout_evaluate(&c, &v), OG_EPAYOUT_CONTEXT);
    }
}
