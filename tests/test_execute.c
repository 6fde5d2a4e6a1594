/*
 * test_execute.c — the operation state machine's decisions
 * (lib/core/execute.c), one table per question, every invariant E2-E5,
 * RV1-RV8, SW1-SW4 (the payout sweeper) and RC1-RC8 (the payout
 * reconciler) by name; and what og_exec_drive
 * decides before any I/O (lib/exec/execute.c). Pure: no store, no
 * provider.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "oncegate/exec.h"
#include "support.h"

#define SEC INT64_C(1000000)
#define NOW (INT64_C(1800000000) * SEC)

static og_provider_outcome outcome(og_outcome_class cls, const char *reason,
                                   const char *ref, int64_t retry_after_s)
{
    og_provider_outcome o;

    memset(&o, 0, sizeof o);
    o.cls = cls;
    snprintf(o.reason, sizeof o.reason, "%s", reason);
    snprintf(o.reference, sizeof o.reference, "%s", ref);
    o.rule = -1;
    o.retry_after_s = retry_after_s;
    return o;
}

/* E2-E5: what a create call's classified answer means. */
static void create_answers_map_to_their_records(void **state)
{
    static const struct {
        const char *name;
        og_outcome_class cls;
        const char *reason, *ref;
        int64_t retry_after_s;
        og_exec_action action;
        og_op_status status;
        const char *want_ref;
        int64_t want_retry_us;
    } cases[] = {
        {"E2 succeeded keeps the reference", OG_CLASS_SUCCEEDED, "created",
         "cr_1", -1, OG_EXEC_RECORD, OG_OP_SUCCEEDED, "cr_1", 0},
        {"E3 documented refusal is Failed", OG_CLASS_FAILED,
         "account_closed", "", -1, OG_EXEC_RECORD, OG_OP_FAILED, NULL, 0},
        {"E3 a refusal never carries a reference", OG_CLASS_FAILED,
         "request_expired", "cr_x", -1, OG_EXEC_RECORD, OG_OP_FAILED, NULL,
         0},
        {"E4 timeout is Unknown", OG_CLASS_UNKNOWN, "transport_timeout", "",
         -1, OG_EXEC_RECORD, OG_OP_UNKNOWN, NULL, 0},
        {"E4 pending keeps its reference", OG_CLASS_UNKNOWN, "pending",
         "cr_p", -1, OG_EXEC_RECORD, OG_OP_UNKNOWN, "cr_p", 0},
        {"E4 undocumented is Unknown", OG_CLASS_UNKNOWN,
         "undocumented_status_418", "", -1, OG_EXEC_RECORD, OG_OP_UNKNOWN,
         NULL, 0},
        {"E5 transient records nothing", OG_CLASS_TRANSIENT, "rate_limited",
         "", 2, OG_EXEC_RETRY_LATER, OG_OP_ADMITTED, NULL, 2 * SEC},
        {"E5 transient without a hint", OG_CLASS_TRANSIENT, "connect_failed",
         "", -1, OG_EXEC_RETRY_LATER, OG_OP_ADMITTED, NULL, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_provider_outcome o = outcome(cases[i].cls, cases[i].reason,
                                        cases[i].ref, cases[i].retry_after_s);
        og_exec_decision d;

        og_exec_after_create(&o, &d);
        print_message("%s\n", cases[i].name);
        assert_int_equal(d.action, cases[i].action);
        if (d.action == OG_EXEC_RECORD) {
            assert_int_equal(d.status, cases[i].status);
            assert_string_equal(d.reason, cases[i].reason);
            if (cases[i].want_ref)
                assert_string_equal(d.reference, cases[i].want_ref);
            else
                assert_null(d.reference);
        } else {
            assert_int_equal(d.retry_after_us, cases[i].want_retry_us);
        }
    }
}

/* E4: no answer at all is Unknown, never Failed. */
static void missing_answer_is_unknown(void **state)
{
    og_exec_decision d;

    (void)state;
    og_exec_after_create(NULL, &d);
    assert_int_equal(d.action, OG_EXEC_RECORD);
    assert_int_equal(d.status, OG_OP_UNKNOWN);
}

static og_operation op_in(og_op_status st, int64_t submit_by_us)
{
    og_operation op;

    memset(&op, 0, sizeof op);
    op.status = st;
    op.owner_version = 2;
    op.submit_by_us = submit_by_us;
    return op;
}

static og_provider_properties props(bool atomic, unsigned lookup)
{
    og_provider_properties p;

    memset(&p, 0, sizeof p);
    p.key_retention_s = 86400;
    p.atomic_same_key = atomic;
    p.lookup = lookup;
    return p;
}

/* RV1-RV7: recovery after its lookup. */
static void recovery_decides_from_the_lookup(void **state)
{
    const unsigned REF = OG_PROVIDER_LOOKUP_REFERENCE;
    static const struct {
        const char *name;
        og_op_status st;
        int64_t submit_by;
        bool atomic;
        unsigned lookup;
        int rc;
        og_outcome_class cls;
        const char *reason, *ref;
        og_exec_action action;
        og_op_status want;
    } cases[] = {
        {"RV1 found is Succeeded", OG_OP_UNKNOWN, NOW + SEC, false, 1, 1,
         OG_CLASS_SUCCEEDED, "found", "cr_1", OG_EXEC_RECORD,
         OG_OP_SUCCEEDED},
        {"RV1 found after submit_by is still Succeeded", OG_OP_ADMITTED,
         NOW - SEC, false, 1, 1, OG_CLASS_SUCCEEDED, "found", "cr_1",
         OG_EXEC_RECORD, OG_OP_SUCCEEDED},
        {"RV2 pending while Admitted is Unknown", OG_OP_ADMITTED, NOW + SEC,
         true, 1, 1, OG_CLASS_UNKNOWN, "pending", "cr_p", OG_EXEC_RECORD,
         OG_OP_UNKNOWN},
        {"RV2 pending while Unknown waits", OG_OP_UNKNOWN, NOW + SEC, true, 1,
         1, OG_CLASS_UNKNOWN, "pending", "cr_p", OG_EXEC_RETRY_LATER, 0},
        {"RV4 not found, atomic, before submit_by: resubmit", OG_OP_UNKNOWN,
         NOW + SEC, true, 1, 0, OG_CLASS_UNKNOWN, "not_found", "",
         OG_EXEC_SUBMIT, 0},
        {"RV4 not found, atomic, at submit_by: reconcile", OG_OP_UNKNOWN, NOW,
         true, 1, 0, OG_CLASS_UNKNOWN, "not_found", "", OG_EXEC_RECORD,
         OG_OP_NEEDS_RECONCILIATION},
        {"RV3/RV4 not found, not atomic: reconcile, never Failed",
         OG_OP_ADMITTED, NOW + 3600 * SEC, false, 1, 0, OG_CLASS_UNKNOWN,
         "not_found", "", OG_EXEC_RECORD, OG_OP_NEEDS_RECONCILIATION},
        {"RV5 no lookup documented: reconcile", OG_OP_UNKNOWN, NOW + SEC,
         true, 0, OG_EINVAL, OG_CLASS_UNKNOWN, "", "", OG_EXEC_RECORD,
         OG_OP_NEEDS_RECONCILIATION},
        {"RV6 lookup unavailable: later", OG_OP_UNKNOWN, NOW + SEC, true, 1,
         OG_EPROVIDER_UNAVAILABLE, OG_CLASS_UNKNOWN, "", "",
         OG_EXEC_RETRY_LATER, 0},
        {"RV7 terminal is never decided on", OG_OP_SUCCEEDED, NOW + SEC, true,
         1, 0, OG_CLASS_UNKNOWN, "not_found", "", OG_EXEC_RETRY_LATER, 0},
        {"RV7 reconciliation waits for an operator",
         OG_OP_NEEDS_RECONCILIATION, NOW + SEC, true, 1, 0,
         OG_CLASS_UNKNOWN, "not_found", "", OG_EXEC_RETRY_LATER, 0},
        {"RV7 a Started payout attempt is not recovery's", OG_OP_STARTED,
         NOW + SEC, true, 1, 0, OG_CLASS_UNKNOWN, "not_found", "",
         OG_EXEC_RETRY_LATER, 0},
        {"RV7 NotApplied is terminal", OG_OP_NOT_APPLIED, NOW + SEC, true, 1,
         1, OG_CLASS_SUCCEEDED, "found", "cr_1", OG_EXEC_RETRY_LATER, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_operation op = op_in(cases[i].st, cases[i].submit_by);
        og_provider_properties p =
            props(cases[i].atomic, cases[i].lookup ? REF : 0);
        og_provider_outcome lo =
            outcome(cases[i].cls, cases[i].reason, cases[i].ref, -1);
        og_exec_decision d;

        print_message("%s\n", cases[i].name);
        og_recovery_after_lookup(&op, &p, cases[i].rc, &lo, NOW, &d);
        assert_int_equal(d.action, cases[i].action);
        if (d.action == OG_EXEC_RECORD) {
            assert_int_equal(d.status, cases[i].want);
            assert_non_null(d.reason);
            assert_int_not_equal(d.status, OG_OP_FAILED); /* RV3 */
        }
    }
}

/* RV8: MaySubmit refused recovery's resubmit. Only a closed window is
 * "submit_window_passed"; before submit_by the refusal was the owner's
 * lapsed lease (or a newer owner): nothing recorded, a later pass decides. */
static void a_refused_resubmit_names_the_reason_that_is_true(void **state)
{
    static const struct {
        const char *name;
        int64_t submit_by;
        og_exec_action action;
    } cases[] = {
        {"RV8 lease lapsed, submit_by an hour away: later", NOW + 3600 * SEC,
         OG_EXEC_RETRY_LATER},
        {"RV8 lease lapsed, submit_by a microsecond away: later", NOW + 1,
         OG_EXEC_RETRY_LATER},
        {"RV8 at submit_by: submit_window_passed", NOW, OG_EXEC_RECORD},
        {"RV8 after submit_by: submit_window_passed", NOW - SEC,
         OG_EXEC_RECORD},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_operation op = op_in(OG_OP_ADMITTED, cases[i].submit_by);
        og_exec_decision d;

        print_message("%s\n", cases[i].name);
        og_recovery_after_refusal(&op, NOW, &d);
        assert_int_equal(d.action, cases[i].action);
        if (d.action == OG_EXEC_RECORD) {
            assert_int_equal(d.status, OG_OP_NEEDS_RECONCILIATION);
            assert_string_equal(d.reason, "submit_window_passed");
        }
    }
}

/* RV3 across every lookup result and property: recovery never records
 * Failed, and submits only when atomic and before submit_by. */
static void recovery_never_records_failed_and_submits_only_when_safe(
    void **state)
{
    const og_op_status sts[] = {OG_OP_ADMITTED, OG_OP_UNKNOWN};
    const int rcs[] = {1, 0, OG_EPROVIDER_UNAVAILABLE, OG_EINVAL};
    const og_outcome_class clss[] = {OG_CLASS_UNKNOWN, OG_CLASS_SUCCEEDED,
                                     OG_CLASS_FAILED, OG_CLASS_TRANSIENT};

    (void)state;
    for (size_t a = 0; a < 2; a++)
        for (size_t s = 0; s < 2; s++)
            for (size_t r = 0; r < 4; r++)
                for (size_t c = 0; c < 4; c++)
                    for (int before = 0; before < 2; before++)
                        for (unsigned lk = 0; lk < 4; lk++) {
                            og_operation op = op_in(
                                sts[s], before ? NOW + SEC : NOW - SEC);
                            og_provider_properties p = props(a == 1, lk);
                            og_provider_outcome lo =
                                outcome(clss[c], "x", "cr_1", -1);
                            og_exec_decision d;

                            og_recovery_after_lookup(&op, &p, rcs[r], &lo,
                                                     NOW, &d);
                            if (d.action == OG_EXEC_RECORD)
                                assert_int_not_equal(d.status, OG_OP_FAILED);
                            if (d.action == OG_EXEC_SUBMIT) {
                                assert_true(p.atomic_same_key);
                                assert_true(NOW < op.submit_by_us);
                                assert_int_equal(rcs[r], 0);
                                assert_true(lk != 0);
                            }
                        }
}

/* SW1-SW4: the payout sweeper after a takeover, for every status, kind and
 * owner version. */
static void payout_sweeper_decides_not_started_only_for_admitted_after_a_takeover(
    void **state)
{
    static const struct {
        const char *name;
        og_op_kind kind;
        og_op_status st;
        int64_t version;
        og_exec_action action;
        og_op_status want;
        const char *reason;
    } cases[] = {
        {"SW1 Admitted after a takeover sent nothing: NotStarted",
         OG_OP_KIND_PAYOUT, OG_OP_ADMITTED, 2, OG_EXEC_RECORD,
         OG_OP_NOT_STARTED, "not_started"},
        {"SW1 after a second takeover too", OG_OP_KIND_PAYOUT, OG_OP_ADMITTED,
         5, OG_EXEC_RECORD, OG_OP_NOT_STARTED, "not_started"},
        {"SW1 no takeover (initial version): the claimer may still start",
         OG_OP_KIND_PAYOUT, OG_OP_ADMITTED, 1, OG_EXEC_RETRY_LATER, 0, NULL},
        {"SW2 Started: Unknown, never NotStarted", OG_OP_KIND_PAYOUT,
         OG_OP_STARTED, 2, OG_EXEC_RECORD, OG_OP_UNKNOWN,
         "lease_lapsed_after_start"},
        {"SW2 Started at the initial version: nothing (no takeover)",
         OG_OP_KIND_PAYOUT, OG_OP_STARTED, 1, OG_EXEC_RETRY_LATER, 0, NULL},
        {"SW3 Unknown is the reconciler's", OG_OP_KIND_PAYOUT, OG_OP_UNKNOWN,
         2, OG_EXEC_RETRY_LATER, 0, NULL},
        {"SW3 NeedsReconciliation is an operator's", OG_OP_KIND_PAYOUT,
         OG_OP_NEEDS_RECONCILIATION, 2, OG_EXEC_RETRY_LATER, 0, NULL},
        {"terminal Succeeded", OG_OP_KIND_PAYOUT, OG_OP_SUCCEEDED, 2,
         OG_EXEC_RETRY_LATER, 0, NULL},
        {"terminal Failed", OG_OP_KIND_PAYOUT, OG_OP_FAILED, 2,
         OG_EXEC_RETRY_LATER, 0, NULL},
        {"terminal NotStarted", OG_OP_KIND_PAYOUT, OG_OP_NOT_STARTED, 3,
         OG_EXEC_RETRY_LATER, 0, NULL},
        {"terminal NotApplied", OG_OP_KIND_PAYOUT, OG_OP_NOT_APPLIED, 3,
         OG_EXEC_RETRY_LATER, 0, NULL},
        {"SW4 a credit Admitted after a takeover is recovery's (RV1-RV7)",
         OG_OP_KIND_CREDIT, OG_OP_ADMITTED, 2, OG_EXEC_RETRY_LATER, 0, NULL},
        {"SW4 a credit Unknown", OG_OP_KIND_CREDIT, OG_OP_UNKNOWN, 2,
         OG_EXEC_RETRY_LATER, 0, NULL},
    };
    og_exec_decision d;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_operation op = op_in(cases[i].st, NOW + SEC);

        op.kind = cases[i].kind;
        op.owner_version = cases[i].version;
        print_message("%s\n", cases[i].name);
        og_payout_after_takeover(&op, &d);
        assert_int_equal(d.action, cases[i].action);
        if (d.action == OG_EXEC_RECORD) {
            assert_int_equal(d.status, cases[i].want);
            assert_string_equal(d.reason, cases[i].reason);
            assert_null(d.reference);
        } else {
            assert_int_equal(d.retry_after_us, 0);
        }
    }
    og_payout_after_takeover(NULL, &d);
    assert_int_equal(d.action, OG_EXEC_RETRY_LATER);
}

/* P3 across every status, kind and version: the sweeper never records
 * NotStarted for anything but an Admitted payout above the initial owner
 * version, and never anything for a credit. */
static void payout_sweeper_never_records_not_started_for_a_started_attempt(
    void **state)
{
    (void)state;
    for (int st = 0; st < OG_OP_STATUS_COUNT; st++)
        for (int k = 0; k < OG_OP_KIND_COUNT; k++)
            for (int64_t v = 1; v <= 4; v++) {
                og_operation op = op_in((og_op_status)st, NOW + SEC);
                og_exec_decision d;

                op.kind = (og_op_kind)k;
                op.owner_version = v;
                og_payout_after_takeover(&op, &d);
                if (d.action != OG_EXEC_RECORD)
                    continue;
                assert_int_equal(op.kind, OG_OP_KIND_PAYOUT);
                assert_true(v > 1);
                if (d.status == OG_OP_NOT_STARTED)
                    assert_int_equal(st, OG_OP_ADMITTED);
                else
                    assert_true(st == OG_OP_STARTED &&
                                d.status == OG_OP_UNKNOWN);
            }
}

/* RC1-RC8: the payout reconciler after one lookup. The attempt's cutoff
 * is CUT, its escalation deadline ESC; the lookup began at `now`. */
#define CUT (NOW + 10 * SEC)
#define ESC (NOW + 3600 * SEC)
static void payout_reconciler_decides_from_the_lookup(void **state)
{
    static const struct {
        const char *name;
        int lookup;
        og_outcome_class cls;
        const char *reason;
        bool final;          /* the table declares absence final */
        int64_t now, cutoff; /* cutoff 0: never final for this attempt */
        og_payout_lookup_action action;
        og_op_status want;
        const char *want_reason;
        bool returned;
    } cases[] = {
        {"RC1 terms differ: escalate at once", 1, OG_CLASS_UNKNOWN,
         "terms_mismatch", true, NOW, CUT, OG_PAYOUT_LOOKUP_RECORD,
         OG_OP_NEEDS_RECONCILIATION, "terms_mismatch", false},
        {"RC1 terms differ, whatever the class", 1, OG_CLASS_SUCCEEDED,
         "terms_mismatch", true, CUT + SEC, CUT, OG_PAYOUT_LOOKUP_RECORD,
         OG_OP_NEEDS_RECONCILIATION, "terms_mismatch", false},
        {"RC2 found completed: Succeeded", 1, OG_CLASS_SUCCEEDED, "found",
         true, NOW, CUT, OG_PAYOUT_LOOKUP_RECORD, OG_OP_SUCCEEDED, "found",
         false},
        {"RC2 found completed past the deadline: still Succeeded", 1,
         OG_CLASS_SUCCEEDED, "found", false, ESC + SEC, 0,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_SUCCEEDED, "found", false},
        {"RC2 found returned: Succeeded and a return event", 1,
         OG_CLASS_SUCCEEDED, "returned", true, NOW, CUT,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_SUCCEEDED, "returned", true},
        {"RC2 found twice: Succeeded, the duplicate named", 1,
         OG_CLASS_SUCCEEDED, "found_multiple", true, NOW, CUT,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_SUCCEEDED, "found_multiple", false},
        {"RC3 found rejected: Failed", 1, OG_CLASS_FAILED, "rejected", true,
         NOW, CUT, OG_PAYOUT_LOOKUP_RECORD, OG_OP_FAILED, "rejected", false},
        {"RC4 found pending: later", 1, OG_CLASS_UNKNOWN, "pending", true,
         CUT + SEC, CUT, OG_PAYOUT_LOOKUP_LATER, OG_OP_UNKNOWN, "pending",
         false},
        {"RC4 undocumented state: later", 1, OG_CLASS_UNKNOWN,
         "undocumented_state", true, NOW, CUT, OG_PAYOUT_LOOKUP_LATER,
         OG_OP_UNKNOWN, "pending", false},
        {"RC4+RC7 pending at the deadline: escalate", 1, OG_CLASS_UNKNOWN,
         "pending", true, ESC, CUT, OG_PAYOUT_LOOKUP_RECORD,
         OG_OP_NEEDS_RECONCILIATION, "escalation_deadline", false},
        {"RC5 not found at the cutoff: NotApplied", 0, OG_CLASS_UNKNOWN,
         "not_found", true, CUT, CUT, OG_PAYOUT_LOOKUP_RECORD,
         OG_OP_NOT_APPLIED, "not_found_final", false},
        {"RC5 not found after the cutoff: NotApplied", 0, OG_CLASS_UNKNOWN,
         "not_found", true, CUT + SEC, CUT, OG_PAYOUT_LOOKUP_RECORD,
         OG_OP_NOT_APPLIED, "not_found_final", false},
        {"RC5 before RC7: final absence past the deadline is NotApplied", 0,
         OG_CLASS_UNKNOWN, "not_found", true, ESC + SEC, CUT,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_NOT_APPLIED, "not_found_final",
         false},
        {"RC5 a microsecond before the cutoff: later", 0, OG_CLASS_UNKNOWN,
         "not_found", true, CUT - 1, CUT, OG_PAYOUT_LOOKUP_LATER,
         OG_OP_UNKNOWN, "not_found", false},
        {"RC5 the table does not declare absence final: later", 0,
         OG_CLASS_UNKNOWN, "not_found", false, CUT + SEC, CUT,
         OG_PAYOUT_LOOKUP_LATER, OG_OP_UNKNOWN, "not_found", false},
        {"RC5 the attempt has no cutoff: later", 0, OG_CLASS_UNKNOWN,
         "not_found", true, CUT + SEC, 0, OG_PAYOUT_LOOKUP_LATER,
         OG_OP_UNKNOWN, "not_found", false},
        {"RC6+RC7 not found, never final, at the deadline: escalate", 0,
         OG_CLASS_UNKNOWN, "not_found", false, ESC, CUT,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_NEEDS_RECONCILIATION,
         "escalation_deadline", false},
        {"RC6 provider unavailable: later", OG_EPROVIDER_UNAVAILABLE,
         OG_CLASS_UNKNOWN, "", true, CUT + SEC, CUT, OG_PAYOUT_LOOKUP_LATER,
         OG_OP_UNKNOWN, "provider_unavailable", false},
        {"RC6+RC7 provider unavailable at the deadline: escalate",
         OG_EPROVIDER_UNAVAILABLE, OG_CLASS_UNKNOWN, "", true, ESC, CUT,
         OG_PAYOUT_LOOKUP_RECORD, OG_OP_NEEDS_RECONCILIATION,
         "escalation_deadline", false},
    };
    og_payout_lookup_decision d;

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_payout_lookup_facts f = {cases[i].lookup, cases[i].cls,
                                    cases[i].reason, cases[i].final,
                                    cases[i].now, cases[i].cutoff, ESC, 2};

        print_message("%s\n", cases[i].name);
        memset(&d, 0x5a, sizeof d);
        og_payout_after_lookup(&f, &d);
        assert_int_equal(d.action, cases[i].action);
        assert_int_equal(d.status, cases[i].want);
        assert_string_equal(d.reason, cases[i].want_reason);
        assert_int_equal(d.returned, cases[i].returned);
    }
    og_payout_after_lookup(NULL, &d);
    assert_int_equal(d.action, OG_PAYOUT_LOOKUP_LATER);
    assert_string_equal(d.reason, "provider_unavailable");
}

/* RC5, RC8 across every combination: NotApplied only with all three
 * conditions, nothing ever before the cutoff, and no decision sends
 * (there is no such action: every one is a record or a wait). */
static void payout_reconciler_never_records_not_applied_before_the_cutoff(
    void **state)
{
    const int lookups[] = {1, 0, OG_EPROVIDER_UNAVAILABLE};
    const og_outcome_class clss[] = {OG_CLASS_UNKNOWN, OG_CLASS_SUCCEEDED,
                                     OG_CLASS_FAILED, OG_CLASS_TRANSIENT};
    const char *const reasons[] = {"found", "returned", "pending",
                                   "terms_mismatch", "not_found", NULL};
    const int64_t nows[] = {NOW, CUT - 1, CUT, CUT + 1, ESC - 1, ESC,
                            ESC + SEC};
    const int64_t cuts[] = {0, CUT};

    (void)state;
    for (size_t l = 0; l < 3; l++)
        for (size_t c = 0; c < 4; c++)
            for (size_t r = 0; r < 6; r++)
                for (int fin = 0; fin < 2; fin++)
                    for (size_t n = 0; n < 7; n++)
                        for (size_t k = 0; k < 2; k++) {
                            og_payout_lookup_facts f = {
                                lookups[l], clss[c], reasons[r], fin == 1,
                                nows[n], cuts[k], ESC, 0};
                            og_payout_lookup_decision d;

                            og_payout_after_lookup(&f, &d);
                            assert_true(d.action == OG_PAYOUT_LOOKUP_RECORD ||
                                        d.action == OG_PAYOUT_LOOKUP_LATER);
                            assert_non_null(d.reason);
                            if (d.action == OG_PAYOUT_LOOKUP_LATER) {
                                assert_int_equal(d.status, OG_OP_UNKNOWN);
                                assert_true(nows[n] < ESC);
                                continue;
                            }
                            if (d.status == OG_OP_NOT_APPLIED) {
                                assert_int_equal(lookups[l], 0);
                                assert_true(fin == 1);
                                assert_true(cuts[k] != 0);
                                assert_true(nows[n] >= cuts[k]);
                            }
                            if (d.status == OG_OP_SUCCEEDED ||
                                d.status == OG_OP_FAILED)
                                assert_int_equal(lookups[l], 1);
                            assert_true(d.status == OG_OP_SUCCEEDED ||
                                        d.status == OG_OP_FAILED ||
                                        d.status == OG_OP_NOT_APPLIED ||
                                        d.status ==
                                            OG_OP_NEEDS_RECONCILIATION);
                        }
}

/* The backoff: by the number of lookups made, the last step repeated,
 * never past the cutoff nor the deadline while they are ahead, within
 * 1 ms .. max. */
static void payout_reconciler_backoff_steps_and_stops_at_the_cutoff(
    void **state)
{
    static const int64_t steps[] = {1 * SEC, 2 * SEC, 5 * SEC, 15 * SEC};
    og_payout_lookup_facts f = {0, OG_CLASS_UNKNOWN, "not_found", false,
                                NOW, CUT, ESC, 0};

    (void)state;
    for (int64_t k = 0; k < 6; k++) {
        f.lookups = k;
        assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 3600 * SEC),
                         steps[k < 3 ? k : 3]);
    }
    /* not found, the cutoff 10 s ahead: wait for it, not 15 s */
    f.not_found_final = true;
    assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 3600 * SEC),
                     10 * SEC);
    /* found pending: the cutoff does not matter */
    f.lookup = 1;
    assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 3600 * SEC),
                     15 * SEC);
    /* the deadline 3 s ahead */
    f.now_us = ESC - 3 * SEC;
    assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 3600 * SEC),
                     3 * SEC);
    /* bounds: a max, a floor of 1 ms, no backoff at all (1 s) */
    f.now_us = NOW;
    assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 2 * SEC), 2 * SEC);
    f.escalate_at_us = NOW + 10;
    assert_int_equal(og_payout_lookup_delay(&f, steps, 4, 3600 * SEC), 1000);
    f.escalate_at_us = ESC;
    assert_int_equal(og_payout_lookup_delay(&f, NULL, 0, 3600 * SEC), SEC);
    assert_int_equal(og_payout_lookup_delay(NULL, steps, 4, 3600 * SEC), SEC);
}

static void answers_and_names(void **state)
{
    (void)state;
    assert_string_equal(og_exec_answer(OG_OP_SUCCEEDED), "applied");
    assert_string_equal(og_exec_answer(OG_OP_FAILED), "rejected");
    assert_string_equal(og_exec_answer(OG_OP_ADMITTED), "pending");
    assert_string_equal(og_exec_answer(OG_OP_UNKNOWN), "pending");
    assert_string_equal(og_exec_answer(OG_OP_NEEDS_RECONCILIATION),
                        "pending");
    assert_string_equal(og_exec_action_name(OG_EXEC_RECORD), "record");
    assert_string_equal(og_exec_action_name(OG_EXEC_SUBMIT), "submit");
    assert_string_equal(og_exec_action_name(OG_EXEC_RETRY_LATER),
                        "retry_later");
    assert_string_equal(og_exec_action_name((og_exec_action)99), "?");
}

/* og_exec_drive and og_exec_admit (lib/exec/execute.c): the ends' names
 * are stable (the service logs them), and bad input is refused before any
 * I/O — the handles below are not a store or a client, and touching either
 * would crash the test. */
static void drive_ends_and_refusals_before_io(void **state)
{
    static const struct {
        og_exec_end end;
        const char *name;
    } ends[] = {
        {OG_EXEC_END_MAY_SUBMIT_FAILED, "may_submit_failed"},
        {OG_EXEC_END_MAY_SUBMIT_REFUSED, "may_submit_refused"},
        {OG_EXEC_END_NOT_SENT, "not_sent"},
        {OG_EXEC_END_TRANSIENT, "transient"},
        {OG_EXEC_END_RECORD_FAILED, "record_failed"},
        {OG_EXEC_END_RECORD_SUPERSEDED, "record_superseded"},
        {OG_EXEC_END_RECORDED, "recorded"},
    };
    static char not_a_handle[64];
    og_store *s = (og_store *)(void *)not_a_handle;
    og_provider *p = (og_provider *)(void *)not_a_handle;
    const unsigned admitted = OG_OP_BIT(OG_OP_ADMITTED);
    const og_exec_drive_req good = {"handler", admitted, SEC, NULL};
    const og_exec_drive_req bad[] = {
        {NULL, admitted, SEC, NULL},                   /* no actor */
        {"handler", admitted, 0, NULL},                /* no timeout */
        {"handler", 0, SEC, NULL},                     /* expects nothing */
        {"handler", admitted | OG_OP_BIT(OG_OP_STARTED), SEC, NULL},
        {"handler", OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION), SEC, NULL},
    };
    og_operation op = op_in(OG_OP_ADMITTED, NOW + SEC);
    og_validated_grant v;
    og_exec_admit_req aq;
    og_exec_admitted ares;
    og_exec_run run;

    (void)state;
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
        assert_string_equal(og_exec_end_name(ends[i].end), ends[i].name);
    assert_string_equal(og_exec_end_name((og_exec_end)99), "?");

    op.kind = OG_OP_KIND_CREDIT;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(og_exec_drive(s, p, &op, &bad[i], &run), OG_EINVAL);
    assert_int_equal(og_exec_drive(NULL, p, &op, &good, &run), OG_EINVAL);
    assert_int_equal(og_exec_drive(s, NULL, &op, &good, &run), OG_EINVAL);
    assert_int_equal(og_exec_drive(s, p, NULL, &good, &run), OG_EINVAL);
    assert_int_equal(og_exec_drive(s, p, &op, NULL, &run), OG_EINVAL);
    assert_int_equal(og_exec_drive(s, p, &op, &good, NULL), OG_EINVAL);
    /* A payout attempt is sent by its worker after og_op_start, never
     * driven here. */
    op.kind = OG_OP_KIND_PAYOUT;
    assert_int_equal(og_exec_drive(s, p, &op, &good, &run), OG_EINVAL);

    /* With a provider, what the drive needs is checked before admission:
     * nothing may fail for want of an argument once admitted. */
    memset(&v, 0, sizeof v);
    aq = (og_exec_admit_req){&v, "0b6c1e52-3f0e-4c1a-9a55-3f1d2b7c9e10",
                             OG_FORM_TOKEN, "handler", SEC, NULL};
    aq.actor = NULL;
    assert_int_equal(og_exec_admit(s, p, &aq, &ares), OG_EINVAL);
    aq.actor = "handler";
    aq.timeout_us = 0;
    assert_int_equal(og_exec_admit(s, p, &aq, &ares), OG_EINVAL);
    aq.timeout_us = SEC;
    aq.grant = NULL;
    assert_int_equal(og_exec_admit(s, p, &aq, &ares), OG_EINVAL);
    assert_int_equal(og_exec_admit(NULL, p, &aq, &ares), OG_EINVAL);
}

/* E6: the admission answers MaySubmit for its own first create only while
 * the time since it was sent, plus the margin, is inside its lease and its
 * submission window; every other case asks the store. */
static void admission_answers_may_submit_only_inside_its_window(void **state)
{
    const int64_t lease = 60 * SEC, window = 3600 * SEC, margin = 15 * SEC;
    og_operation fresh, op;
    static const struct {
        const char *name;
        int64_t elapsed, margin;
        bool want;
    } grid[] = {
        {"just admitted", 0, 15 * SEC, true},
        {"a slow admission reply", 2 * SEC, 15 * SEC, true},
        {"the last instant the margin allows", 45 * SEC - 1, 15 * SEC, true},
        {"lease lost: the margin reaches its end", 45 * SEC, 15 * SEC, false},
        {"lease lost: past its end", 61 * SEC, 15 * SEC, false},
        {"margin 0: always ask the store", 0, 0, false},
        {"a margin as long as the lease", 0, 60 * SEC, false},
        {"a clock that went backwards", -1, 15 * SEC, false},
    };

    (void)state;
    memset(&fresh, 0, sizeof fresh);
    fresh.kind = OG_OP_KIND_CREDIT;
    fresh.status = OG_OP_ADMITTED;
    fresh.owner_version = 1;
    fresh.created_at_us = NOW;
    fresh.lease_until_us = NOW + lease;
    fresh.submit_by_us = NOW + window;
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
        print_message("%s\n", grid[i].name);
        assert_int_equal(og_exec_admission_may_submit(
                             &fresh, grid[i].elapsed, grid[i].margin),
                         grid[i].want);
    }
    /* submit_by passed: a window shorter than the lease bounds it. */
    op = fresh;
    op.submit_by_us = NOW + 20 * SEC;
    assert_true(og_exec_admission_may_submit(&op, 4 * SEC, margin));
    assert_false(og_exec_admission_may_submit(&op, 5 * SEC, margin));
    assert_false(og_exec_admission_may_submit(&op, 21 * SEC, margin));
    /* Owner version stale: not the admission's own version. */
    op = fresh;
    op.owner_version = 2;
    assert_false(og_exec_admission_may_submit(&op, 0, margin));
    /* Not Admitted (recorded, or Unknown): not the admission's answer. */
    op = fresh;
    op.status = OG_OP_UNKNOWN;
    assert_false(og_exec_admission_may_submit(&op, 0, margin));
    op.status = OG_OP_SUCCEEDED;
    assert_false(og_exec_admission_may_submit(&op, 0, margin));
    /* A payout attempt is Started first (P1), never sent on this. */
    op = fresh;
    op.kind = OG_OP_KIND_PAYOUT;
    assert_false(og_exec_admission_may_submit(&op, 0, margin));
    assert_false(og_exec_admission_may_submit(NULL, 0, margin));
}

/* Every NeedsReconciliation reason the decisions can record is listed, as
 * `reason`, in docs/reconciliation.md (with its meaning and the
 * operator's next step): driven over every input grid above, credits
 * (RV1-RV8) and payout attempts (RC1-RC8), so a new reason cannot ship
 * without its row. */
static void every_needs_reconciliation_reason_is_documented(void **state)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    const og_op_status sts[] = {OG_OP_ADMITTED, OG_OP_UNKNOWN};
    const int lrcs[] = {1, 0, OG_EINVAL, OG_EPROVIDER_UNAVAILABLE};
    const og_outcome_class clss[] = {OG_CLASS_UNKNOWN, OG_CLASS_SUCCEEDED,
                                     OG_CLASS_FAILED, OG_CLASS_TRANSIENT};
    const char *const reasons[] = {"found", "returned", "pending",
                                   "terms_mismatch", "not_found", NULL};
    const int64_t times[] = {NOW - SEC, NOW, NOW + SEC, CUT, ESC, ESC + SEC};
    const char *seen[32];
    size_t n_seen = 0;
    char path[4200], want[96];
    char *doc;

    (void)state;
    assert_non_null(root);
    snprintf(path, sizeof path, "%s/docs/reconciliation.md", root);
    doc = t_slurp(path, NULL);
    assert_non_null(doc);
#define SEEN(r)                                                                \
    do {                                                                       \
        size_t k_ = 0;                                                         \
        while (k_ < n_seen && strcmp(seen[k_], (r)) != 0)                      \
            k_++;                                                              \
        if (k_ == n_seen && n_seen < 32)                                       \
            seen[n_seen++] = (r);                                              \
    } while (0)
    for (size_t a = 0; a < 2; a++)
        for (int atomic = 0; atomic < 2; atomic++)
            for (unsigned lk = 0; lk < 2; lk++)
                for (size_t l = 0; l < 4; l++)
                    for (size_t c = 0; c < 4; c++)
                        for (size_t t = 0; t < 6; t++) {
                            og_operation op = op_in(sts[a], times[t]);
                            og_provider_properties p = props(
                                atomic, lk ? OG_PROVIDER_LOOKUP_REFERENCE : 0);
                            og_provider_outcome lo =
                                outcome(clss[c], "found", "cr_1", -1);
                            og_exec_decision d;

                            og_recovery_after_lookup(&op, &p, lrcs[l], &lo,
                                                     NOW, &d);
                            if (d.action == OG_EXEC_RECORD &&
                                d.status == OG_OP_NEEDS_RECONCILIATION)
                                SEEN(d.reason);
                            og_recovery_after_refusal(&op, NOW, &d);
                            if (d.action == OG_EXEC_RECORD &&
                                d.status == OG_OP_NEEDS_RECONCILIATION)
                                SEEN(d.reason);
                        }
    for (size_t l = 0; l < 4; l++)
        for (size_t c = 0; c < 4; c++)
            for (size_t r = 0; r < 6; r++)
                for (int fin = 0; fin < 2; fin++)
                    for (size_t t = 0; t < 6; t++) {
                        og_payout_lookup_facts f = {
                            lrcs[l], clss[c], reasons[r], fin == 1, times[t],
                            CUT, ESC, 0};
                        og_payout_lookup_decision d;

                        og_payout_after_lookup(&f, &d);
                        if (d.action == OG_PAYOUT_LOOKUP_RECORD &&
                            d.status == OG_OP_NEEDS_RECONCILIATION)
                            SEEN(d.reason);
                    }
#undef SEEN
    /* the six this version records; a new one adds its row */
    assert_int_equal(n_seen, 6);
    for (size_t k = 0; k < n_seen; k++) {
        snprintf(want, sizeof want, "| `%s` |", seen[k]);
        print_message("%s\n", seen[k]);
        if (!strstr(doc, want))
            fail_msg("docs/reconciliation.md has no row for \"%s\"",
                     seen[k]);
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_answers_map_to_their_records),
        cmocka_unit_test(missing_answer_is_unknown),
        cmocka_unit_test(recovery_decides_from_the_lookup),
        cmocka_unit_test(a_refused_resubmit_names_the_reason_that_is_true),
        cmocka_unit_test(every_needs_reconciliation_reason_is_documented),
        cmocka_unit_test(
            recovery_never_records_failed_and_submits_only_when_safe),
        cmocka_unit_test(answers_and_names),
        cmocka_unit_test(
            payout_sweeper_decides_not_started_only_for_admitted_after_a_takeover),
        cmocka_unit_test(
            payout_sweeper_never_records_not_started_for_a_started_attempt),
        cmocka_unit_test(drive_ends_and_refusals_before_io),
        cmocka_unit_test(admission_answers_may_submit_only_inside_its_window),
        cmocka_unit_test(payout_reconciler_decides_from_the_lookup),
        cmocka_unit_test(
            payout_reconciler_never_records_not_applied_before_the_cutoff),
        cmocka_unit_test(
            payout_reconciler_backoff_steps_and_stops_at_the_cutoff),
    };
    return t_run_tests("execute", tests, NULL, NULL);
}
