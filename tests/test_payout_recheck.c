/*
 * test_payout_recheck.c — the execution recheck
 * (og_payout_evaluate_for_execution), names and error codes,
 * re-authorization and the release day.
 * (The decision side of a delayed payout, pure; test_payout.c has the
 * scenario and the list.)
 */
#include "test_payout.h"

/* ===========================================================================
 * The execution recheck (og_payout_evaluate_for_execution, docs/payouts.md
 * section 5, step 2)
 * ========================================================================= */

static void x_none(og_payout_context *c) { (void)c; }
static void x_unavailable(og_payout_context *c) { c->unavailable = true; }
static void x_cancelled(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_CANCELLED;
    c->payout.version = 8;
}
static void x_still_draft(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_DRAFT;
}
static void x_executing(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_EXECUTING;
}
static void x_version_moved(og_payout_context *c)
{
    c->payout.version = 8;
}
/* The host moves the payout's version when its destination changes. */
static void x_destination_changed_version_moved(og_payout_context *c)
{
    c->destination.version = 4;
    c->destination.changed_at_us = c->observed_at_us - 3600 * SEC;
    c->payout.terms.destination_version = 4;
    c->payout.version = 8;
}
/* ... and if it does not, the changed terms are caught. */
static void x_destination_changed_same_version(og_payout_context *c)
{
    c->destination.version = 4;
    c->payout.terms.destination_version = 4;
}
/* ... and a destination re-registered while the record still names v3. */
static void x_destination_reregistered(og_payout_context *c)
{
    c->destination.version = 4;
}
static void x_amount_changed(og_payout_context *c)
{
    c->payout.terms.amount = "4300.00";
    c->tenant.reserved_today = 430000;
}
static void x_purpose_changed(og_payout_context *c)
{
    c->payout.terms.purpose = "supplier-invoice INV-9032";
}
static void x_purpose_respelled(og_payout_context *c)
{
    c->payout.terms.purpose = "  supplier-invoice    INV-9031 ";
    c->payout.terms.amount = "4250";
}
static void x_tenant_suspended(og_payout_context *c)
{
    c->tenant.payouts_suspended = true;
    c->tenant.settings_version = 13;
}
static void x_beneficiary_suspended(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_SUSPENDED;
    c->beneficiary.version = 5;
}
static void x_destination_now_recent(og_payout_context *c)
{
    /* Same version (a change the host does not version), changed an hour
     * ago: acknowledgment would be needed now, so the grant is refused. */
    c->destination.changed_at_us = c->observed_at_us - 3600 * SEC;
}
/* 45,750.00 paid + this payout's own 4,250.00 reserved = 50,000.00: at
 * the limit, allowed — counting the reservation again would deny. */
static void x_own_reservation_at_limit(og_payout_context *c)
{
    c->tenant.paid_today = 4575000;
}
/* Another payout's reservation of one cent on top: over. */
static void x_other_reservation_over(og_payout_context *c)
{
    c->tenant.paid_today = 4575000;
    c->tenant.reserved_today = 425001;
}
static void x_limit_lowered(og_payout_context *c)
{
    c->tenant.daily_limit = 424999;
}
static void x_captured_limit_equal(og_payout_context *c)
{
    c->requester.approval_limit = 425000;
}
static void x_captured_limit_below(og_payout_context *c)
{
    c->requester.approval_limit = 424999;
}
static void x_cancelled_and_changed(og_payout_context *c)
{
    x_cancelled(c);
    x_amount_changed(c);
}
static void x_changed_and_suspended(og_payout_context *c)
{
    x_purpose_changed(c);
    x_tenant_suspended(c);
}

void execution_recheck(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        og_payout_exec_outcome outcome;
        og_payout_worker_reason reason;
        const char *reason_text;
        bool rechecked;
        og_payout_reason inner; /* when rechecked */
    } rows[] = {
        {"valid: Approved at the grant's version, terms unchanged", x_none,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Context unavailable at the worker: postponed", x_unavailable,
         OG_PAYOUT_EXEC_POSTPONED, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE,
         "context.unavailable", false, 0},
        {"Payout cancelled after the decision", x_cancelled,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Payout still in Draft", x_still_draft, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Payout already Executing", x_executing, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Payout version moved past the grant's", x_version_moved,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Destination changed after the decision (payout version moved)",
         x_destination_changed_version_moved, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Destination changed in the record at the same version: terms "
         "differ",
         x_destination_changed_same_version, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_BINDING_MISMATCH, "binding.mismatch", false, 0},
        {"Amount changed in the record at the same version",
         x_amount_changed, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_BINDING_MISMATCH, "binding.mismatch", false, 0},
        {"Purpose changed in the record", x_purpose_changed,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_BINDING_MISMATCH,
         "binding.mismatch", false, 0},
        {"Terms only respelled: still the grant's", x_purpose_respelled,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Tenant suspended after the decision", x_tenant_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true, OG_PAYOUT_REASON_TENANT_SUSPENDED},
        {"Beneficiary suspended after the decision", x_beneficiary_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE},
        {"Destination re-registered at another version",
         x_destination_reregistered, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED},
        {"Destination now recently changed: acknowledgment refuses too",
         x_destination_now_recent, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"Own reservation counted once: at the limit is valid",
         x_own_reservation_at_limit, OG_PAYOUT_EXEC_VALID,
         OG_PAYOUT_WORKER_NONE, "none", true, OG_PAYOUT_REASON_ALLOWED},
        {"Another reservation of one cent on top: over the limit",
         x_other_reservation_over, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"Daily limit lowered below this payout", x_limit_lowered,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"Captured requester limit equal to the amount", x_captured_limit_equal,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Captured requester limit below the amount: escalation refuses",
         x_captured_limit_below, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"Order: not executable before binding", x_cancelled_and_changed,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Order: binding before the policy", x_changed_and_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_BINDING_MISMATCH,
         "binding.mismatch", false, 0},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = exec_context();
        og_payout_grant_binding g = grant_19c();
        og_payout_exec_verdict x;
        rows[i].m(&c);
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
        assert_int_equal(x.outcome, rows[i].outcome);
        assert_int_equal(x.reason, rows[i].reason);
        assert_string_equal(og_payout_worker_reason_name(x.reason),
                            rows[i].reason_text);
        assert_int_equal(x.rechecked, rows[i].rechecked);
        if (rows[i].rechecked) {
            assert_int_equal(x.recheck.reason, rows[i].inner);
            assert_int_equal(x.recheck.outcome,
                             og_payout_reason_outcome(rows[i].inner));
            assert_string_equal(x.recheck.terms_fingerprint, FP_PAY3107);
            assert_string_equal(x.recheck.policy_version,
                                OG_PAYOUT_POLICY_VERSION);
        } else {
            assert_string_equal(x.recheck.terms_fingerprint, "");
        }
        if (x.outcome == OG_PAYOUT_EXEC_VALID) {
            /* What the claim fences. */
            assert_int_equal(x.relied.tenant_settings,
                             c.tenant.settings_version);
            assert_int_equal(x.relied.beneficiary, 4);
            assert_int_equal(x.relied.destination, 3);
            assert_int_equal(x.relied.payout, 7);
        } else {
            assert_int_equal(x.relied.payout, 0);
        }
    }
}

/* The decision and the recheck agree on the scenario's day: the 09:58 intent
 * is Allowed, its fingerprint is what the grant carries, and the 16:00
 * recheck of that grant is valid. */
void decision_fingerprint_is_what_the_recheck_compares(void **state)
{
    (void)state;
    og_payout_context d = base_context();
    og_payout_verdict v = evaluate_ok(&d);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);

    og_payout_context c = exec_context();
    og_payout_grant_binding g = {v.terms_fingerprint, d.payout.version + 1};
    og_payout_exec_verdict x;
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
    assert_int_equal(x.outcome, OG_PAYOUT_EXEC_VALID);
}

static void x_e_reserved_missing(og_payout_context *c)
{
    c->tenant.reserved_today = 424999;
}
static void x_e_record_amount(og_payout_context *c)
{
    c->payout.terms.amount = "four thousand";
}
static void x_e_negative_limit(og_payout_context *c)
{
    c->tenant.daily_limit = -1;
}

void execution_recheck_errors(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        const char *fp;
        int64_t version;
        int rc;
    } rows[] = {
        {"grant fingerprint upper case", x_none,
         "394B6257BB0F937EB3C7591E9CF1D6F873668FCC0D4D760A6456ABB91670A22A",
         7, OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint of 63 characters", x_none,
         "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22", 7,
         OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint of 65 characters", x_none, FP_PAY3107 "0", 7,
         OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint not hex", x_none,
         "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22g",
         7, OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint NULL", x_none, NULL, 7, OG_EPAYOUT_FINGERPRINT},
        {"grant executable version 0", x_none, FP_PAY3107, 0,
         OG_EPAYOUT_CONTEXT},
        {"reserved today without this payout's reservation",
         x_e_reserved_missing, FP_PAY3107, 7, OG_EPAYOUT_CONTEXT},
        {"record amount not an amount", x_e_record_amount, FP_PAY3107, 7,
         OG_EPAYOUT_AMOUNT},
        {"negative daily limit", x_e_negative_limit, FP_PAY3107, 7,
         OG_EPAYOUT_CONTEXT},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = exec_context();
        og_payout_grant_binding g = {rows[i].fp, rows[i].version};
        og_payout_exec_verdict x, before;
        rows[i].m(&c);
        memset(&x, 0xa5, sizeof x);
        before = x;
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x),
                         rows[i].rc);
        assert_memory_equal(&x, &before, sizeof x);
    }

    /* PC5: unavailable reads neither the context nor the grant. */
    og_payout_context c;
    memset(&c, 0xff, sizeof c);
    c.unavailable = true;
    c.payout.terms.tenant_id = NULL;
    og_payout_grant_binding g = {NULL, -1};
    og_payout_exec_verdict x;
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
    assert_int_equal(x.outcome, OG_PAYOUT_EXEC_POSTPONED);
    assert_int_equal(x.reason, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE);
    assert_false(x.rechecked);

    c = exec_context();
    g = grant_19c();
    assert_int_equal(og_payout_evaluate_for_execution(NULL, &g, &x),
                     OG_EINVAL);
    assert_int_equal(og_payout_evaluate_for_execution(&c, NULL, &x),
                     OG_EINVAL);
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, NULL),
                     OG_EINVAL);
}

/* ===========================================================================
 * Names and error codes
 * ========================================================================= */

void names_are_stable(void **state)
{
    static const char *const outcomes[] = {
        "Allowed", "Denied", "Deferred", "AcknowledgmentRequired",
        "EscalationRecommended"};
    static const struct {
        const char *code;
        og_payout_outcome outcome;
    } reasons[] = {
        {"context.unavailable", OG_PAYOUT_DEFERRED},
        {"tenant.payouts-suspended", OG_PAYOUT_DENIED},
        {"beneficiary.not-eligible", OG_PAYOUT_DENIED},
        {"destination.not-registered", OG_PAYOUT_DENIED},
        {"payout.not-submittable", OG_PAYOUT_DENIED},
        {"tenant.daily-limit", OG_PAYOUT_DENIED},
        {"destination.recently-changed", OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED},
        {"amount.above-requester-limit", OG_PAYOUT_ESCALATION_RECOMMENDED},
        {"payout.allowed", OG_PAYOUT_ALLOWED},
    };
    static const char *const workers[] = {
        "none",          "grant.unknown",          "binding.mismatch",
        "presenter.not-audience", "grant.revoked", "grant.consumed",
        "grant.expired", "context.unavailable",    "payout.not-executable",
        "policy.no-longer-allows", "claim.lost",   "claim.context-changed"};
    static const char *const states[] = {"Draft",  "Approved", "Executing",
                                         "Paid",   "Failed",   "Unknown",
                                         "Cancelled"};
    static const char *const statuses[] = {"Active", "Suspended", "Closed"};
    static const char *const exec[] = {"valid", "refused", "postponed"};

    (void)state;
    for (size_t i = 0; i < N(outcomes); i++)
        assert_string_equal(og_payout_outcome_name((og_payout_outcome)i),
                            outcomes[i]);
    assert_string_equal(og_payout_outcome_name((og_payout_outcome)N(outcomes)),
                        "?");
    for (size_t i = 0; i < N(reasons); i++) {
        assert_string_equal(og_payout_reason_name((og_payout_reason)i),
                            reasons[i].code);
        assert_int_equal(og_payout_reason_outcome((og_payout_reason)i),
                         reasons[i].outcome);
    }
    assert_string_equal(og_payout_reason_name((og_payout_reason)N(reasons)),
                        "?");
    assert_string_equal(og_payout_reason_name((og_payout_reason)-1), "?");
    /* A corrupted reason never reads as Allowed. */
    assert_int_equal(og_payout_reason_outcome((og_payout_reason)N(reasons)),
                     OG_PAYOUT_DENIED);
    assert_int_equal(og_payout_reason_outcome((og_payout_reason)-1),
                     OG_PAYOUT_DENIED);
    for (size_t i = 0; i < N(workers); i++)
        assert_string_equal(
            og_payout_worker_reason_name((og_payout_worker_reason)i),
            workers[i]);
    assert_string_equal(
        og_payout_worker_reason_name((og_payout_worker_reason)N(workers)),
        "?");
    for (size_t i = 0; i < N(states); i++)
        assert_string_equal(og_payout_state_name((og_payout_state)i),
                            states[i]);
    assert_string_equal(og_payout_state_name((og_payout_state)N(states)), "?");
    for (size_t i = 0; i < N(statuses); i++)
        assert_string_equal(og_payout_beneficiary_status_name(
                                (og_payout_beneficiary_status)i),
                            statuses[i]);
    assert_string_equal(og_payout_beneficiary_status_name(
                            (og_payout_beneficiary_status)N(statuses)),
                        "?");
    for (size_t i = 0; i < N(exec); i++)
        assert_string_equal(
            og_payout_exec_outcome_name((og_payout_exec_outcome)i), exec[i]);
    assert_string_equal(
        og_payout_exec_outcome_name((og_payout_exec_outcome)N(exec)), "?");
}

/* ===========================================================================
 * Re-authorization (docs/payouts.md, section 3, P5) and the release day
 * ========================================================================= */

/* A re-authorization runs the same rules in the same order; only rule 4
 * expects Approved with no active attempt instead of Draft. */
void reauthorization_expects_approved_without_an_active_attempt(
    void **state)
{
    og_payout_context c = base_context();
    og_payout_verdict v;

    (void)state;
    c.payout.state = OG_PAYOUT_STATE_APPROVED;
    c.payout.version = 9;
    c.intent.payout_version = 9;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_ALLOWED);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.payout, 9);
    /* an attempt still Claimed, Started or Unknown */
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    assert_int_equal(v.outcome, OG_PAYOUT_DENIED);
    /* a first submission of an Approved payout, and a re-authorization of
     * a Draft, a Cancelled or an Executing one, or at another version */
    assert_int_equal(og_payout_evaluate(&c, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    c.intent.payout_version = 8;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    c.intent.payout_version = 9;
    {
        static const og_payout_state others[] = {
            OG_PAYOUT_STATE_DRAFT, OG_PAYOUT_STATE_EXECUTING,
            OG_PAYOUT_STATE_PAID, OG_PAYOUT_STATE_CANCELLED};
        for (size_t i = 0; i < N(others); i++) {
            og_payout_context o = c;
            o.payout.state = others[i];
            assert_int_equal(og_payout_evaluate_reauthorization(&o, false, &v),
                             0);
            assert_int_equal(v.reason,
                             OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
        }
    }
    /* the order of checks is the policy's: an earlier rule reports first */
    c.tenant.payouts_suspended = true;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_TENANT_SUSPENDED);
    c.tenant.payouts_suspended = false;
    c.tenant.reserved_today = c.tenant.daily_limit;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_DAILY_LIMIT);
    /* unavailable: Deferred, nothing read */
    c.unavailable = true;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    assert_int_equal(og_payout_evaluate_reauthorization(NULL, false, &v),
                     OG_EINVAL);
}

/* The local date in the tenant's settlement time zone (ICU's calendar and
 * time-zone database): midnights, leap days, the ends of the range, both
 * days of Berlin's daylight-saving changes (the last Sundays of March and
 * October) with a release at 23:30 local before and after each, New York's,
 * a zone whose offset is not whole hours, the extreme fixed zones. */
void release_day_is_the_local_date_in_the_settlement_time_zone(
    void **state)
{
    static const struct {
        const char *what;
        int64_t at_us;
        const char *zone;
        const char *day;
    } rows[] = {
        {"the epoch", 0, "UTC", "1970-01-01"},
        {"the epoch in New York", 0, "America/New_York", "1969-12-31"},
        {"UTC midnight", INT64_C(1772323200000000), "UTC", "2026-03-01"},
        {"the microsecond before", INT64_C(1772323199999999), "UTC",
         "2026-02-28"},
        {"UTC midnight seen from New York (EST)", INT64_C(1772323200000000),
         "America/New_York", "2026-02-28"},
        {"2024 is a leap year", INT64_C(1709208000000000), "UTC",
         "2024-02-29"},
        {"2000 is a leap year", INT64_C(951782400000000), "Etc/UTC",
         "2000-02-29"},
        {"2100 is not: 23:30Z in Berlin (CET)", INT64_C(4107540600000000),
         "Europe/Berlin", "2100-03-01"},
        /* Berlin, Saturday 2026-03-28 and Sunday 2026-03-29 (02:00 CET ->
         * 03:00 CEST): 23:30 local each day is that day. */
        {"23:30 CET the day before spring forward", INT64_C(1774737000000000),
         "Europe/Berlin", "2026-03-28"},
        {"23:30 CEST on the spring-forward Sunday", INT64_C(1774819800000000),
         "Europe/Berlin", "2026-03-29"},
        /* 22:30Z that Sunday is 00:30 CEST Monday: a fixed UTC+1 would
         * still say Sunday. */
        {"00:30 CEST the Monday after", INT64_C(1774823400000000),
         "Europe/Berlin", "2026-03-30"},
        /* Berlin, Saturday 2026-10-24 and Sunday 2026-10-25 (03:00 CEST ->
         * 02:00 CET). */
        {"23:30 CEST the day before fall back", INT64_C(1792877400000000),
         "Europe/Berlin", "2026-10-24"},
        {"00:30 CEST on the fall-back Sunday (22:30Z Saturday)",
         INT64_C(1792881000000000), "Europe/Berlin", "2026-10-25"},
        {"23:30 CET on the fall-back Sunday", INT64_C(1792967400000000),
         "Europe/Berlin", "2026-10-25"},
        {"23:59:59 CET that Sunday", INT64_C(1792969199000000),
         "Europe/Berlin", "2026-10-25"},
        {"midnight CET the Monday after", INT64_C(1792969200000000),
         "Europe/Berlin", "2026-10-26"},
        {"New York, 23:30 EST before spring forward",
         INT64_C(1772944200000000), "America/New_York", "2026-03-07"},
        {"New York, 23:59:59 EDT", INT64_C(1782878399000000),
         "America/New_York", "2026-06-30"},
        {"New York, midnight EDT", INT64_C(1782878400000000),
         "America/New_York", "2026-07-01"},
        /* India: UTC+05:30, no daylight saving time. */
        {"Kolkata, the last microsecond of the day",
         INT64_C(1800037799999999), "Asia/Kolkata", "2027-01-15"},
        {"Kolkata, midnight", INT64_C(1800037800000000), "Asia/Kolkata",
         "2027-01-16"},
        {"an alias of it", INT64_C(1800037800000000), "Asia/Calcutta",
         "2027-01-16"},
        {"the scenario's 09:58 batch day, UTC+14:00", NOW, "Etc/GMT-14",
         "2027-01-15"},
        {"16:00Z at UTC+14:00 is the next day", NOW + 8 * 3600 * SEC,
         "Etc/GMT-14", "2027-01-16"},
        {"08:00Z at UTC-12:00 is the day before", NOW, "Etc/GMT+12",
         "2027-01-14"},
        {"the last instant", INT64_C(253402300799999999), "UTC",
         "9999-12-31"},
    };
    char day[OG_PAYOUT_DAY_LEN + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        memset(day, 0, sizeof day);
        assert_int_equal(og_payout_time_zone_check(rows[i].zone), 0);
        assert_int_equal(og_payout_release_day(rows[i].at_us, rows[i].zone,
                                               day),
                         0);
        if (strcmp(day, rows[i].day) != 0)
            fprintf(stderr, "%s: %s\n", rows[i].what, day);
        assert_string_equal(day, rows[i].day);
    }
    strcpy(day, "untouched!");
    /* Unknown zones, custom ids, ICU's own "unknown", non-names. */
    {
        static const char *const bad[] = {
            "Europe/Atlantis", "Mars/Olympus_Mons", "GMT+01:00", "+01:00",
            "UTC+1", "Etc/Unknown", "", " UTC", "UTC ", "Europe/Berl\xc3\xadn",
            "Etc/GMT-15",
            "America/Argentina/Buenos_Aires/And/A/Name/Far/Too/Long/For/Any/Zone",
        };
        for (size_t i = 0; i < N(bad); i++) {
            if (og_payout_time_zone_check(bad[i]) != OG_EPAYOUT_TIMEZONE)
                fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
            assert_int_equal(og_payout_time_zone_check(bad[i]),
                             OG_EPAYOUT_TIMEZONE);
            assert_int_equal(og_payout_release_day(0, bad[i], day),
                             OG_EPAYOUT_TIMEZONE);
        }
    }
    assert_int_equal(og_payout_time_zone_check(NULL), OG_EPAYOUT_TIMEZONE);
    assert_int_equal(og_payout_release_day(0, NULL, day), OG_EPAYOUT_TIMEZONE);
    assert_int_equal(og_payout_release_day(-1, "UTC", day), OG_EINVAL);
    /* 9999-12-31T23:59Z at UTC+01:00 is in year 10000 */
    assert_int_equal(og_payout_release_day(INT64_C(253402300799999999),
                                           "Etc/GMT-1", day),
                     OG_EINVAL);
    assert_string_equal(day, "untouched!");
    assert_int_equal(og_payout_release_day(0, "UTC", NULL), OG_EINVAL);
}

/* The new codes were appended: the existing ones keep their values. */
void error_codes_were_appended(void **state)
{
    static const struct {
        int err;
        const char *name;
    } rows[] = {
        {OG_EPAYOUT_TENANT, "input.tenant_id_invalid"},
        {OG_EPAYOUT_BENEFICIARY, "input.beneficiary_id_invalid"},
        {OG_EPAYOUT_DESTINATION, "input.destination_id_invalid"},
        {OG_EPAYOUT_DESTINATION_VERSION, "input.destination_version_invalid"},
        {OG_EPAYOUT_CURRENCY, "input.payout_currency_invalid"},
        {OG_EPAYOUT_AMOUNT, "input.payout_amount_invalid"},
        {OG_EPAYOUT_PURPOSE, "input.purpose_invalid"},
        {OG_EPAYOUT_FINGERPRINT, "input.terms_fingerprint_invalid"},
        {OG_EPAYOUT_CONTEXT, "input.payout_context_invalid"},
        {OG_EPAYOUT_INTENT_MISMATCH, "input.payout_intent_mismatch"},
        /* the provider client's payout destination */
        {OG_EDESTINATION, "input.destination_invalid"},
        /* the payout store's (schema 8) */
        {OG_EPAYOUT_ID, "input.payout_id_invalid"},
        /* schema 12 replaced the offset by a zone, at the same value */
        {OG_EPAYOUT_TIMEZONE, "input.settlement_time_zone_invalid"},
        {OG_EPAYOUT_LIMIT, "input.payout_limit_invalid"},
        {OG_EPAYOUT_WINDOW, "input.grant_window_invalid"},
        {OG_EPAYOUT_REQUESTER, "input.requester_invalid"},
        {OG_EPAYOUT_CORRELATION, "input.correlation_id_invalid"},
        {OG_EPAYOUT_TOKEN, "input.provider_token_invalid"},
        {OG_EPAYOUT_JOB, "input.job_id_invalid"},
        {OG_EPAYOUT_VERSION, "input.record_version_invalid"},
        /* the policy's current release (schema 12) */
        {OG_EPAYOUT_POLICY_RELEASE, "policy.release-mismatch"},
        /* the decision read (og_payout_decision_get) */
        {OG_EPAYOUT_DECISION, "input.decision_id_invalid"},
        /* an approval settling a pending decision (schema 14) */
        {OG_EPAYOUT_NOT_SETTLEABLE, "decision_not_settleable"},
        {OG_EPAYOUT_ALREADY_SETTLED, "decision_already_settled"},
        {OG_EPAYOUT_APPROVER_IS_REQUESTER, "approver_is_requester"},
        {OG_EPAYOUT_SETTLE_STALE, "decision_stale"},
        /* the input rules: an amount finer than its currency, a token's type */
        {OG_EAMOUNT_MINOR_UNITS, "input.amount_minor_units"},
        {OG_EGRANT_TYPE, "grant.wrong_type"},
    };

    (void)state;
    assert_int_equal(OG_ENOMEM, -1);
    assert_int_equal(OG_ESTOPPED, -54);
    assert_int_equal(OG_ECLIENT_REFERENCE, -55); /* the last before these */
    for (size_t i = 0; i < N(rows); i++) {
        assert_int_equal(rows[i].err, OG_ECLIENT_REFERENCE - 1 - (int)i);
        assert_string_equal(og_err_name(rows[i].err), rows[i].name);
        assert_string_not_equal(og_strerror(rows[i].err), "unknown error");
    }
}
