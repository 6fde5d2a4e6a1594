/*
 * payouts_edit.c — a Draft's edit (og_payout_edit; docs/payouts.md,
 * section 4): its terms replaced under a version precondition, its version
 * moved, an "edited" entry; a retry, a payout past Draft, another tenant
 * or currency, and what the terms name but does not exist write nothing —
 * on every backend.
 */
#include "payouts.h"

static og_payout_put_result e_edit(og_store *s, const p_world *w,
                                   const char *id, const char *dst,
                                   int64_t dv, const char *amount,
                                   const char *currency, int64_t expected)
{
    og_payout_draft_req d = {
        id, {w->tenant, w->ben, dst, dv, amount, currency, "  invoice  9032 "},
        "payout-admin-1"};
    og_payout_put_result r = {0, 0};

    assert_int_equal(og_payout_edit(s, &d, expected, &r), 0);
    return r;
}

void draft_edit_replaces_the_terms_under_a_version_precondition(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_destination_record dr;
    og_payout_put_result r;
    og_payout_decision d;
    og_payout_events ev;
    og_payout_view v;
    char id[64], dst2[64], where[256];
    p_world w, other;

    (void)state;
    p_world_new(s, raw, &w, "edit", INT64_C(100000000));
    p_world_new(s, raw, &other, "edit2", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    p_id(dst2, &w, "DST", 2);
    dr = (og_payout_destination_record){dst2, w.ben, "tok_SECRET_edit2"};
    assert_int_equal(og_payout_destination_put(s, &dr, 0, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);

    /* Written: the terms replaced, the version moved, the drafter kept. */
    r = e_edit(s, &w, id, dst2, 1, "4300", "EUR", 1);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    assert_int_equal(r.version, 2);
    v = p_get(s, id);
    assert_int_equal(v.version, 2);
    assert_int_equal(v.state, OG_PAYOUT_STATE_DRAFT);
    assert_string_equal(v.destination_id, dst2);
    assert_int_equal(v.amount_minor, 430000);
    assert_string_equal(v.purpose, "invoice 9032");
    assert_string_equal(v.requester_id, "clerk-22");
    assert_int_equal(og_payout_history(s, id, &ev), 0);
    assert_int_equal(ev.n, 2);
    assert_string_equal(ev.v[1].kind, "edited");
    assert_string_equal(ev.v[1].actor, "payout-admin-1");
    assert_int_equal(ev.v[1].payout_version, 2);
    og_payout_events_free(&ev);

    /* Retried: version_conflict, nothing more. */
    r = e_edit(s, &w, id, dst2, 1, "4300", "EUR", 1);
    assert_int_equal(r.outcome, OG_PAYOUT_VERSION_CONFLICT);
    assert_int_equal(p_get(s, id).version, 2);
    /* Another currency than the tenant's; a destination or a beneficiary
     * that is not there; another tenant: nothing written. */
    r = e_edit(s, &w, id, dst2, 1, "4300", "USD", 2);
    assert_int_equal(r.outcome, OG_PAYOUT_REFUSED);
    r = e_edit(s, &w, id, "DST-nowhere", 1, "4300", "EUR", 2);
    assert_int_equal(r.outcome, OG_PAYOUT_NOT_FOUND);
    {
        og_payout_draft_req x = {
            id, {w.tenant, other.ben, w.dst, 1, "1", "EUR", NULL}, "a-1"};
        assert_int_equal(og_payout_edit(s, &x, 2, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_NOT_FOUND);
        x.terms.tenant_id = other.tenant;
        x.terms.beneficiary_id = other.ben;
        assert_int_equal(og_payout_edit(s, &x, 2, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_REFUSED);
        x.payout_id = "PAY-nobody-edit";
        assert_int_equal(og_payout_edit(s, &x, 1, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_NOT_FOUND);
        /* input errors, before any I/O */
        x.payout_id = id;
        assert_int_equal(og_payout_edit(s, &x, 0, &r), OG_EPAYOUT_VERSION);
        x.terms.amount = "-1";
        assert_int_equal(og_payout_edit(s, &x, 2, &r), OG_EPAYOUT_AMOUNT);
    }
    assert_int_equal(p_get(s, id).version, 2);
    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'edited'", id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);

    /* Past Draft its terms are history: refused. */
    r = e_edit(s, &w, id, w.dst, 1, "4250.00", "EUR", 2);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    d = p_decide_allowed(s, id);
    assert_int_equal(d.executable_payout_version, 4);
    r = e_edit(s, &w, id, w.dst, 1, "1.00", "EUR", 4);
    assert_int_equal(r.outcome, OG_PAYOUT_REFUSED);
    v = p_get(s, id);
    assert_int_equal(v.version, 4);
    assert_int_equal(v.amount_minor, 425000);
    t_raw_close(raw);
    og_store_free(s);
}
