/*
 * payouts_after.c — the payout store after the send (schema 11;
 * docs/payouts.md, section 6): when "not found" may be final and the
 * store's own NotApplied guard (P6), the reconciler's backoff, late
 * evidence, a return after completion (P8), an operator's resolution of an
 * escalated attempt, and the two lost acknowledgments (a committed claim, a
 * committed start) the sweeper settles, and late evidence racing the
 * reconciler. The conformance group payouts
 * (payouts.c has the list), both engines, both consumption keys.
 */
#include "payouts.h"
#include "store/store_int.h" /* og__op_insert: a credit to route away */

#define STARTED_BIT OG_OP_BIT(OG_OP_STARTED)
#define UNKNOWN_BIT OG_OP_BIT(OG_OP_UNKNOWN)
#define ADMITTED_BIT OG_OP_BIT(OG_OP_ADMITTED)

/* A payout claimed with final-absence margin `margin_us` (-1: none),
 * started, and recorded Unknown by its worker: the claim's result. */
static og_payout_claim_result a_unknown(og_store *s, t_raw *raw, p_world *w,
                                        const char *tag, char id[64],
                                        og_payout_decision *d,
                                        int64_t margin_us)
{
    og_payout_claim_req c;
    og_payout_claim_result r;

    p_world_new(s, raw, w, tag, 5000000);
    p_id(id, w, "PAY", 1);
    p_draft(s, w, id, "100.00");
    *d = p_decide_now(s, id);
    c = p_claim_req(d, "worker-7");
    c.final_absence_margin_us = margin_us;
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    p_start(s, &r);
    assert_int_equal(p_resolve(s, r.attempt.operation_id, STARTED_BIT, 1,
                               OG_OP_UNKNOWN, "worker-7")
                         .outcome,
                     OG_PAYOUT_RESOLVE_RESOLVED);
    return r;
}

static og_operation a_get(og_store *s, const char *op)
{
    og_operation o;

    assert_int_equal(og_operation_get(s, op, &o), 1);
    return o;
}

/* The last event of op's history into *out. */
static void a_last_event(og_store *s, const char *op, og_op_event *out)
{
    og_op_events h = {NULL, 0};

    assert_int_equal(og_op_history(s, op, &h), 0);
    assert_true(h.n >= 1);
    *out = h.v[h.n - 1];
    og_op_events_free(&h);
}

/* Takes op over (its lease made to lapse): the new owner version. */
static int64_t a_takeover(og_store *s, const char *url, const char *op,
                          int64_t v)
{
    t_set_op_time(url, op, "lease_until", -1);
    return p_takeover(s, op, v);
}

/* ===========================================================================
 * When "not found" may be final (P6), and the store's own guard (M36)
 * ========================================================================= */

/* The claim writes final_absence_after = submit_by + the margin, or NULL
 * for -1; taken_at is NULL until a takeover, which sets it to its own
 * instant; lookups start at 0. A margin outside -1..OG_PAYOUT_LEASE_MAX_US
 * is refused before the store. */
void claim_sets_when_not_found_may_be_final(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pafinal", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_operation op;
    p_world w;
    int64_t v;

    (void)state;
    p_world_new(s, raw, &w, "afinal", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    c.final_absence_margin_us = -2;
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EINVAL);
    c.final_absence_margin_us = OG_PAYOUT_LEASE_MAX_US + 1;
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EINVAL);
    c.final_absence_margin_us = 7 * SEC;
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_int_equal(r.attempt.final_absence_after_us,
                     r.attempt.submit_by_us + 7 * SEC);
    assert_int_equal(r.attempt.taken_at_us, 0);
    assert_int_equal(r.attempt.lookups, 0);
    op = a_get(s, r.attempt.operation_id);
    assert_int_equal(op.final_absence_after_us, r.attempt.submit_by_us + 7 * SEC);
    /* a takeover records its instant */
    v = a_takeover(s, url, op.operation_id, 1);
    op = a_get(s, r.attempt.operation_id);
    assert_int_equal(op.owner_version, v);
    assert_true(op.taken_at_us >= op.created_at_us);
    assert_true(op.taken_at_us <= t_now_us() + SEC);
    assert_true(op.lease_until_us > op.taken_at_us); /* the recovery lease */

    /* -1: "not found" is never final for this attempt */
    {
        p_world w2;
        char id2[64];
        og_payout_decision d2;
        og_payout_claim_result r2 = a_unknown(s, raw, &w2, "afinal2", id2,
                                              &d2, -1);

        assert_int_equal(a_get(s, r2.attempt.operation_id)
                             .final_absence_after_us,
                         0);
        assert_int_equal(p_count(raw, "operations",
                                 "final_absence_after IS NULL"
                                 " AND kind = 'payout'"),
                         1);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* NotApplied is the store's to refuse too (P6, M36): not before the cutoff,
 * not on a lookup whose takeover came before the cutoff (even once now is
 * past it), never for an attempt with no cutoff — by og_payout_resolve and
 * og_op_record alike, changing nothing — and taken once a lookup began
 * past it, the payout and the reservation following. */
void not_applied_needs_a_lookup_begun_past_the_cutoff(void **state)
{
    char url[4200], id[64], id2[64];
    og_store *s = t_fresh_store("panotapp", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_claim_result c, c2;
    og_payout_resolution r;
    og_op_outcome o = {OG_OP_NOT_APPLIED, "not_found_final", NULL,
                       "reconciler", NULL};
    p_resolve_state before, after;
    p_world w, w2;
    const char *op;
    bool rec = true;
    int64_t v;

    (void)state;
    c = a_unknown(s, raw, &w, "anotapp", id, &d, 0);
    op = c.attempt.operation_id;

    /* 1. before the cutoff (submit_by is minutes ahead), a fresh lookup */
    v = a_takeover(s, url, op, 1);
    before = p_resolve_snap(s, raw, &w, id, op);
    r = p_resolve(s, op, UNKNOWN_BIT, v, OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    assert_int_equal(og_op_record(s, op, UNKNOWN_BIT, v, &o, &rec), 0);
    assert_false(rec);
    after = p_resolve_snap(s, raw, &w, id, op);
    p_assert_unchanged(&before, &after);

    /* 2. now past the cutoff, but the lookup's takeover came before it */
    t_set_op_time(url, op, "final_absence_after", -10);
    t_set_op_time(url, op, "taken_at", -20);
    r = p_resolve(s, op, UNKNOWN_BIT, v, OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    assert_int_equal(og_op_record(s, op, UNKNOWN_BIT, v, &o, &rec), 0);
    assert_false(rec);
    after = p_resolve_snap(s, raw, &w, id, op);
    p_assert_unchanged(&before, &after);

    /* 3. a lookup begun past the cutoff: NotApplied, the payout Approved
     * again, the reservation released */
    v = t_absence_final(s, url, op, v);
    r = p_resolve(s, op, UNKNOWN_BIT, v, OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_RELEASED);
    assert_int_equal(a_get(s, op).status, OG_OP_NOT_APPLIED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, "not-applied");

    /* 4. no cutoff at all: never, whenever the lookup began */
    c2 = a_unknown(s, raw, &w2, "anotapp2", id2, &d2, -1);
    op = c2.attempt.operation_id;
    t_set_op_time(url, op, "submit_by", -3600);
    v = a_takeover(s, url, op, 1);
    before = p_resolve_snap(s, raw, &w2, id2, op);
    r = p_resolve(s, op, UNKNOWN_BIT, v, OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    assert_int_equal(og_op_record(s, op, UNKNOWN_BIT, v, &o, &rec), 0);
    assert_false(rec);
    after = p_resolve_snap(s, raw, &w2, id2, op);
    p_assert_unchanged(&before, &after);
    /* the attempt can still end otherwise (escalated, for a person) */
    r = p_resolve(s, op, UNKNOWN_BIT, v, OG_OP_NEEDS_RECONCILIATION,
                  "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The reconciler's backoff
 * ========================================================================= */

/* og_payout_reconcile_later on an Unknown attempt at its owner version:
 * the lease moves to now + delay (no takeover before it ends), lookups
 * counts up, a "lookup" event with the reason; anything else — another
 * version, a Started attempt, a credit — changes nothing; bad input is
 * refused before the store. */
void reconcile_later_defers_the_attempt_and_counts_the_lookup(void **state)
{
    char url[4200], id[64], id2[64];
    og_store *s = t_fresh_store("palater", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_claim_result c, c2;
    og_operation op, taken;
    og_op_event ev;
    p_world w, w2;
    bool b = false;
    int64_t v;

    (void)state;
    c = a_unknown(s, raw, &w, "alater", id, &d, 0);
    v = a_takeover(s, url, c.attempt.operation_id, 1);
    assert_int_equal(og_payout_reconcile_later(s, c.attempt.operation_id, v,
                                               30 * SEC, "not_found",
                                               "reconciler", &b),
                     0);
    assert_true(b);
    op = a_get(s, c.attempt.operation_id);
    assert_int_equal(op.status, OG_OP_UNKNOWN);
    assert_int_equal(op.owner_version, v);
    assert_int_equal(op.lookups, 1);
    assert_true(op.lease_until_us >= op.taken_at_us + 30 * SEC);
    assert_true(op.lease_until_us <= t_now_us() + 31 * SEC);
    a_last_event(s, op.operation_id, &ev);
    assert_string_equal(ev.kind, "lookup");
    assert_int_equal(ev.from_status, OG_OP_UNKNOWN);
    assert_int_equal(ev.to_status, OG_OP_UNKNOWN);
    assert_int_equal(ev.owner_version, v);
    assert_string_equal(ev.reason, "not_found");
    assert_string_equal(ev.actor, "reconciler");
    /* the backoff holds: no takeover before the lease ends */
    assert_int_equal(og_op_takeover(s, op.operation_id, v, "reconciler",
                                    &taken, &b),
                     0);
    assert_false(b);
    /* again: the next backoff index */
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v, SEC,
                                               "pending", "reconciler", &b),
                     0);
    assert_true(b);
    assert_int_equal(a_get(s, op.operation_id).lookups, 2);
    /* another owner version: nothing */
    b = true;
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v + 1,
                                               SEC, "pending", "reconciler",
                                               &b),
                     0);
    assert_false(b);
    assert_int_equal(a_get(s, op.operation_id).lookups, 2);
    /* a Started attempt: nothing */
    p_world_new(s, raw, &w2, "alater2", 5000000);
    p_id(id2, &w2, "PAY", 1);
    p_draft(s, &w2, id2, "100.00");
    d2 = p_decide_now(s, id2);
    {
        og_payout_claim_req cr = p_claim_req(&d2, "worker-7");

        c2 = p_claim(s, &cr);
    }
    p_start(s, &c2);
    b = true;
    assert_int_equal(og_payout_reconcile_later(s, c2.attempt.operation_id, 1,
                                               SEC, "pending", "reconciler",
                                               &b),
                     0);
    assert_false(b);
    /* a credit Unknown: nothing (the reconciler's backoff is a payout's) */
    {
        char gid[64], oid[OG_UUID_LEN + 1];
        og_grant g;
        og_intent in;
        og_operation credit;
        og_op_outcome o = {OG_OP_UNKNOWN, "timeout", NULL, "handler", NULL};

        t_grant_id(gid, sizeof gid);
        t_uuid(oid);
        g = (og_grant){"support-approvals", gid, t_now_us() + 15 * MINUTE,
                       NULL, OG_FORM_ROW};
        in = (og_intent){oid, "agent-1", "acct-1", "10.00", "EUR"};
        assert_int_equal(og__op_insert(s, OG_OP_KIND_CREDIT, &g, &in, NULL,
                                       NULL, &credit),
                         0);
        assert_int_equal(og_op_record(s, oid, ADMITTED_BIT, 1, &o, &b), 0);
        assert_true(b);
        assert_int_equal(og_payout_reconcile_later(s, oid, 1, SEC, "pending",
                                                   "reconciler", &b),
                         0);
        assert_false(b);
    }
    /* input, before the store */
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v, 999,
                                               "pending", "reconciler", &b),
                     OG_EINVAL);
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v,
                                               OG_PAYOUT_LEASE_MAX_US + 1,
                                               "pending", "reconciler", &b),
                     OG_EINVAL);
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, 0, SEC,
                                               "pending", "reconciler", &b),
                     OG_EINVAL);
    assert_int_equal(og_payout_reconcile_later(s, "nope", v, SEC, "pending",
                                               "reconciler", &b),
                     OG_EOPERATION_ID);
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v, SEC, "",
                                               "reconciler", &b),
                     OG_EREASON);
    assert_int_equal(og_payout_reconcile_later(s, op.operation_id, v, SEC,
                                               "pending", "", &b),
                     OG_EACTOR);
    assert_int_equal(a_get(s, op.operation_id).lookups, 2);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Late evidence
 * ========================================================================= */

/* A late response resolves an attempt still Unknown whatever its owner
 * version (a reconciler took it over): the payout Paid, the reservation
 * paid, the outcome event carrying source and evidence, the owner version
 * left as it is. Evidence for an attempt that is not Unknown (settled, or
 * still Started) changes nothing. og_op_record keeps an outcome's evidence
 * too. */
void late_evidence_resolves_a_still_unknown_attempt(void **state)
{
    char url[4200], id[64], id2[64];
    og_store *s = t_fresh_store("paevid", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_claim_result c, c2;
    og_payout_resolution r;
    og_payout_evidence_req e;
    p_resolve_state before, after;
    og_operation op;
    og_op_event ev;
    p_world w, w2;
    int64_t v;

    (void)state;
    c = a_unknown(s, raw, &w, "aevid", id, &d, 0);
    /* the worker's Unknown carried its own evidence */
    a_last_event(s, c.attempt.operation_id, &ev);
    assert_string_equal(ev.kind, "outcome");
    assert_string_equal(ev.source, "");
    v = a_takeover(s, url, c.attempt.operation_id, 1);
    e = (og_payout_evidence_req){
        .operation_id = c.attempt.operation_id,
        .status = OG_OP_SUCCEEDED,
        .reason = "completed",
        .provider_reference = "po_late_1",
        .source = OG_PAYOUT_EVIDENCE_LATE_RESPONSE,
        .evidence = "HTTP 200 after the takeover: status completed",
        .actor = "worker-7"};
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(og_payout_evidence(s, &e, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_PAID);
    op = a_get(s, c.attempt.operation_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_int_equal(op.owner_version, v); /* nobody's ownership restored */
    assert_string_equal(op.provider_reference, "po_late_1");
    a_last_event(s, op.operation_id, &ev);
    assert_string_equal(ev.kind, "outcome");
    assert_string_equal(ev.source, "late-response");
    assert_string_equal(ev.evidence,
                        "HTTP 200 after the takeover: status completed");
    assert_string_equal(ev.actor, "worker-7");
    assert_int_equal(ev.from_status, OG_OP_UNKNOWN);
    assert_int_equal(p_paid(raw, w.tenant), 10000);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, "paid");

    /* settled: more evidence changes nothing */
    before = p_resolve_snap(s, raw, &w, id, op.operation_id);
    e.status = OG_OP_FAILED;
    e.source = OG_PAYOUT_EVIDENCE_NOTIFICATION;
    assert_int_equal(og_payout_evidence(s, &e, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    after = p_resolve_snap(s, raw, &w, id, op.operation_id);
    p_assert_unchanged(&before, &after);

    /* still Started (not Unknown): nothing either */
    p_world_new(s, raw, &w2, "aevid2", 5000000);
    p_id(id2, &w2, "PAY", 1);
    p_draft(s, &w2, id2, "100.00");
    d2 = p_decide_now(s, id2);
    {
        og_payout_claim_req cr = p_claim_req(&d2, "worker-7");

        c2 = p_claim(s, &cr);
    }
    p_start(s, &c2);
    before = p_resolve_snap(s, raw, &w2, id2, c2.attempt.operation_id);
    e.operation_id = c2.attempt.operation_id;
    assert_int_equal(og_payout_evidence(s, &e, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    after = p_resolve_snap(s, raw, &w2, id2, c2.attempt.operation_id);
    p_assert_unchanged(&before, &after);
    /* no such operation: nothing */
    {
        char u[OG_UUID_LEN + 1];

        t_uuid(u);
        e.operation_id = u;
        assert_int_equal(og_payout_evidence(s, &e, &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    }

    /* input, before the store */
    e.operation_id = c2.attempt.operation_id;
    e.source = "rumour";
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_EINVAL);
    e.source = NULL;
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_EINVAL);
    e.source = OG_PAYOUT_EVIDENCE_NOTIFICATION;
    e.status = OG_OP_NOT_APPLIED;
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_ETRANSITION);
    e.status = OG_OP_UNKNOWN;
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_ETRANSITION);
    e.status = OG_OP_FAILED;
    e.evidence = "bad\x01control";
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_EEVIDENCE);
    e.evidence = NULL;
    e.actor = "";
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_EACTOR);
    e.actor = "worker-7";
    e.operation_id = "not-a-uuid";
    assert_int_equal(og_payout_evidence(s, &e, &r), OG_EOPERATION_ID);
    /* og_op_record refuses bad evidence the same way */
    {
        og_op_outcome o = {OG_OP_UNKNOWN, "timeout", NULL, "worker-7",
                           "bad\x01"};
        bool b = false;

        assert_int_equal(og_op_record(s, c2.attempt.operation_id, STARTED_BIT,
                                      1, &o, &b),
                         OG_EEVIDENCE);
        o.evidence = "socket closed after 10 s";
        assert_int_equal(og_op_record(s, c2.attempt.operation_id, STARTED_BIT,
                                      1, &o, &b),
                         0);
        assert_true(b);
        a_last_event(s, c2.attempt.operation_id, &ev);
        assert_string_equal(ev.evidence, "socket closed after 10 s");
        assert_string_equal(ev.source, "");
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Returns (P8)
 * ========================================================================= */

static int64_t a_returns(t_raw *raw, const char *id)
{
    char where[256];

    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'returned'",
             id);
    return p_count(raw, "payout_events", where);
}

/* A return after completion is one "returned" entry, once: the payout
 * stays Paid at its version, the attempt Succeeded, the day's paid total
 * as it was. Another reference, a payout not Paid, a second return: nothing
 * written. */
void return_is_recorded_once_and_changes_nothing_else(void **state)
{
    char url[4200], id[64], id2[64];
    og_store *s = t_fresh_store("pareturn", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_claim_result c, c2;
    og_op_outcome o = {OG_OP_SUCCEEDED, "completed", "po_ret_1", "worker-7",
                       NULL};
    og_payout_resolution r;
    p_resolve_state before, after;
    p_world w, w2;
    bool b = false;

    (void)state;
    p_world_new(s, raw, &w, "areturn", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    {
        og_payout_claim_req cr = p_claim_req(&d, "worker-7");

        c = p_claim(s, &cr);
    }
    p_start(s, &c);
    /* not Paid yet: nothing */
    assert_int_equal(og_payout_return_record(s, id, "po_ret_1", "reconciler",
                                             NULL, &b),
                     0);
    assert_false(b);
    assert_int_equal(og_payout_resolve(s, c.attempt.operation_id, STARTED_BIT,
                                       1, &o, &r),
                     0);
    assert_int_equal(r.state, OG_PAYOUT_STATE_PAID);
    before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    /* another reference: nothing */
    assert_int_equal(og_payout_return_record(s, id, "po_other", "reconciler",
                                             NULL, &b),
                     0);
    assert_false(b);
    /* the return */
    assert_int_equal(og_payout_return_record(s, id, "po_ret_1", "reconciler",
                                             "provider lookup: returned", &b),
                     0);
    assert_true(b);
    assert_int_equal(a_returns(raw, id), 1);
    {
        char where[512];

        snprintf(where, sizeof where,
                 "payout_id = '%s' AND kind = 'returned'"
                 " AND evidence = 'provider lookup: returned'"
                 " AND reason = 'po_ret_1' AND actor = 'reconciler'",
                 id);
        assert_int_equal(p_count(raw, "payout_events", where), 1);
    }
    /* once */
    b = true;
    assert_int_equal(og_payout_return_record(s, id, "po_ret_1", "reconciler",
                                             NULL, &b),
                     0);
    assert_false(b);
    assert_int_equal(a_returns(raw, id), 1);
    after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    before.payout_events++; /* the one entry, and nothing else */
    p_assert_unchanged(&before, &after);
    assert_int_equal(after.v.state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(after.op.status, OG_OP_SUCCEEDED);
    assert_int_equal(p_paid(raw, w.tenant), 10000);

    /* a payout still Unknown: nothing */
    c2 = a_unknown(s, raw, &w2, "areturn2", id2, &d2, 0);
    (void)c2;
    assert_int_equal(og_payout_return_record(s, id2, "po_ret_1", "reconciler",
                                             NULL, &b),
                     0);
    assert_false(b);
    assert_int_equal(a_returns(raw, id2), 0);
    /* no such payout: nothing */
    assert_int_equal(og_payout_return_record(s, "PAY-none", "po_ret_1",
                                             "reconciler", NULL, &b),
                     0);
    assert_false(b);
    /* input, before the store */
    assert_int_equal(og_payout_return_record(s, "", "po", "r", NULL, &b),
                     OG_EPAYOUT_ID);
    assert_int_equal(og_payout_return_record(s, id, "", "r", NULL, &b),
                     OG_EPROVIDER_REFERENCE);
    assert_int_equal(og_payout_return_record(s, id, "po", "", NULL, &b),
                     OG_EACTOR);
    assert_int_equal(og_payout_return_record(s, id, "po", "r", "\x02", &b),
                     OG_EEVIDENCE);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * An operator's resolution
 * ========================================================================= */

/* An escalated attempt (NeedsReconciliation) resolved by an operator moves
 * its payout and reservation with it: Succeeded -> Paid/paid, Failed ->
 * Failed/released, NotApplied -> Approved/released, the owner version + 1,
 * a "resolved" event with the operator's reason and evidence. NotApplied
 * waits for final_absence_after, or for submit_by when there is none. A
 * credit is not this function's (NOT_ACTIVE); an attempt not escalated is
 * NOT_RECORDED; both change nothing. */
void operator_resolution_moves_payout_and_reservation(void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("paoper", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    static const struct {
        og_op_status to;
        int64_t margin_us;
        og_payout_state state;
        og_payout_reservation res;
        const char *cause;
    } cases[] = {
        {OG_OP_SUCCEEDED, 0, OG_PAYOUT_STATE_PAID, OG_PAYOUT_RESERVATION_PAID,
         "paid"},
        {OG_OP_FAILED, 0, OG_PAYOUT_STATE_FAILED,
         OG_PAYOUT_RESERVATION_RELEASED, "failed"},
        {OG_OP_NOT_APPLIED, 0, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-applied"},
        {OG_OP_NOT_APPLIED, -1, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-applied"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char id[64], tag[32];
        og_payout_decision d;
        og_payout_claim_result c;
        og_payout_resolution r;
        p_resolve_state before, after;
        og_operation op;
        og_op_event ev;
        p_world w;
        const char *oid;

        snprintf(tag, sizeof tag, "aoper%zu", k);
        c = a_unknown(s, raw, &w, tag, id, &d, cases[k].margin_us);
        oid = c.attempt.operation_id;
        /* Unknown is not escalated: nothing */
        before = p_resolve_snap(s, raw, &w, id, oid);
        assert_int_equal(og_payout_operator_resolve(s, oid, cases[k].to,
                                                    "operator-1", "export",
                                                    "provider export", NULL,
                                                    &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        after = p_resolve_snap(s, raw, &w, id, oid);
        p_assert_unchanged(&before, &after);
        /* escalated */
        assert_int_equal(p_resolve(s, oid, UNKNOWN_BIT, 1,
                                   OG_OP_NEEDS_RECONCILIATION, "reconciler")
                             .outcome,
                         OG_PAYOUT_RESOLVE_RESOLVED);
        if (cases[k].to == OG_OP_NOT_APPLIED) {
            /* never before the request expired (+ the margin) */
            before = p_resolve_snap(s, raw, &w, id, oid);
            assert_int_equal(og_payout_operator_resolve(
                                 s, oid, OG_OP_NOT_APPLIED, "operator-1",
                                 "not_in_export", "export: no reference",
                                 NULL, &r),
                             0);
            assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
            after = p_resolve_snap(s, raw, &w, id, oid);
            p_assert_unchanged(&before, &after);
            if (cases[k].margin_us < 0)
                t_set_op_time(url, oid, "submit_by", -1);
            else
                t_set_op_time(url, oid, "final_absence_after", -1);
        }
        op = a_get(s, oid);
        assert_int_equal(og_payout_operator_resolve(
                             s, oid, cases[k].to, "operator-1", "by_hand",
                             "provider export 2026-12-01, line 17",
                             cases[k].to == OG_OP_SUCCEEDED ? "po_hand_1"
                                                            : NULL,
                             &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
        assert_string_equal(r.payout_id, id);
        assert_int_equal(r.state, cases[k].state);
        assert_int_equal(r.reservation, cases[k].res);
        assert_true(r.attempt_cleared);
        assert_int_equal(p_get(s, id).state, cases[k].state);
        assert_string_equal(p_get(s, id).active_attempt, "");
        assert_int_equal(a_get(s, oid).status, cases[k].to);
        assert_int_equal(a_get(s, oid).owner_version, op.owner_version + 1);
        assert_int_equal(p_reserved(raw, w.tenant), 0);
        assert_int_equal(p_paid(raw, w.tenant),
                         cases[k].to == OG_OP_SUCCEEDED ? 10000 : 0);
        p_assert_release(raw, d.grant_id, cases[k].cause);
        a_last_event(s, oid, &ev);
        assert_string_equal(ev.kind, "resolved");
        assert_string_equal(ev.actor, "operator-1");
        assert_string_equal(ev.reason, "by_hand");
        assert_string_equal(ev.evidence,
                            "provider export 2026-12-01, line 17");
        assert_int_equal(ev.from_status, OG_OP_NEEDS_RECONCILIATION);
        /* once */
        before = p_resolve_snap(s, raw, &w, id, oid);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED,
                                                    "operator-2", "again",
                                                    "again", NULL, &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        after = p_resolve_snap(s, raw, &w, id, oid);
        p_assert_unchanged(&before, &after);
    }
    /* a credit: route it to og_op_resolve */
    {
        char gid[64], oid[OG_UUID_LEN + 1];
        og_grant g;
        og_intent in;
        og_operation credit;
        og_op_outcome o = {OG_OP_NEEDS_RECONCILIATION, "escalated", NULL,
                           "handler", NULL};
        og_payout_resolution r;
        bool b = false;

        t_grant_id(gid, sizeof gid);
        t_uuid(oid);
        g = (og_grant){"support-approvals", gid, t_now_us() + 15 * MINUTE,
                       NULL, OG_FORM_ROW};
        in = (og_intent){oid, "agent-1", "acct-1", "10.00", "EUR"};
        assert_int_equal(og__op_insert(s, OG_OP_KIND_CREDIT, &g, &in, NULL,
                                       NULL, &credit),
                         0);
        assert_int_equal(og_op_record(s, oid, ADMITTED_BIT, 1, &o, &b), 0);
        assert_true(b);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED,
                                                    "operator-1", "by_hand",
                                                    "export", NULL, &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_ACTIVE);
        assert_int_equal(a_get(s, oid).status, OG_OP_NEEDS_RECONCILIATION);
        assert_int_equal(og_op_resolve(s, oid, OG_OP_FAILED, "operator-1",
                                       "by_hand", "export", NULL, &b),
                         0);
        assert_true(b);
        /* input, as og_op_resolve's, before the store */
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_UNKNOWN,
                                                    "operator-1", "r", "e",
                                                    NULL, &r),
                         OG_ETRANSITION);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_NOT_STARTED,
                                                    "operator-1", "r", "e",
                                                    NULL, &r),
                         OG_ETRANSITION);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED, "",
                                                    "r", "e", NULL, &r),
                         OG_EACTOR);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED,
                                                    "operator-1", "", "e",
                                                    NULL, &r),
                         OG_EREASON);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED,
                                                    "operator-1", "r", NULL,
                                                    NULL, &r),
                         OG_EEVIDENCE);
        assert_int_equal(og_payout_operator_resolve(s, oid, OG_OP_FAILED,
                                                    "operator-1", "r", "e",
                                                    "", &r),
                         OG_EPROVIDER_REFERENCE);
        assert_int_equal(og_payout_operator_resolve(s, "x", OG_OP_FAILED,
                                                    "operator-1", "r", "e",
                                                    NULL, &r),
                         OG_EOPERATION_ID);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Lost acknowledgments (fault points)
 * ========================================================================= */

/* A claim whose commit succeeded and whose acknowledgment was lost: the
 * caller hears OG_ESTORE_UNAVAILABLE and the claim stays — the grant
 * consumed, the payout Executing, the attempt Admitted. A redelivery finds
 * DUPLICATE; the sweeper's takeover and NotStarted settle it: the payout
 * Approved again, the reservation released (docs/payouts.md, section 8). */
void claim_ack_lost_leaves_a_committed_claim_the_sweeper_settles(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("paclack", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_resolution res;
    og_payout_grant_view g;
    og_op_outcome o = {OG_OP_NOT_STARTED, "not_started", NULL, "sweeper",
                       NULL};
    p_world w;
    int64_t v;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        t_raw_close(raw);
        og_store_free(s);
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    }
    p_world_new(s, raw, &w, "aclack", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    c.lease_us = 1000;
    assert_int_equal(setenv("OG_FAULT", "payout_claim_ack_lost", 1), 0);
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(og_payout_claim(s, &c, &r), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(unsetenv("OG_FAULT"), 0);
    assert_int_equal(r.payout_id[0], 0x5a); /* out untouched */
    /* committed */
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_int_equal(p_get(s, id).state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    /* a redelivery: the claim's own attempt, Admitted */
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_DUPLICATE);
    assert_true(r.has_attempt);
    assert_int_equal(r.attempt.status, OG_OP_ADMITTED);
    assert_string_equal(p_get(s, id).active_attempt, r.attempt.operation_id);
    /* the sweeper: takeover, then NotStarted (P2) */
    v = p_takeover(s, r.attempt.operation_id, 1);
    assert_int_equal(og_payout_resolve(s, r.attempt.operation_id,
                                       ADMITTED_BIT, v, &o, &res),
                     0);
    assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(res.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(res.reservation, OG_PAYOUT_RESERVATION_RELEASED);
    assert_int_equal(a_get(s, r.attempt.operation_id).status,
                     OG_OP_NOT_STARTED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, "not-started");
    /* the claimer's start is fenced */
    {
        bool started = true;

        assert_int_equal(og_op_start(s, r.attempt.operation_id, 1, "worker-7",
                                     &started),
                         0);
        assert_false(started);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* A start whose write committed and whose acknowledgment was lost: the
 * worker hears OG_ESTORE_UNAVAILABLE (and sends nothing, P1); the attempt
 * is Started, so the sweeper makes it Unknown once its lease lapsed — never
 * NotStarted (P3) — and the reservation stays held. */
void start_ack_lost_leaves_a_started_attempt_the_sweeper_makes_unknown(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pastack", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_result c;
    og_payout_resolution res;
    og_op_outcome o = {OG_OP_NOT_STARTED, "not_started", NULL, "sweeper",
                       NULL};
    p_world w;
    bool started = false;
    int64_t v;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        t_raw_close(raw);
        og_store_free(s);
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    }
    c = p_claimed(s, raw, &w, "astack", id, &d, 2 * MINUTE);
    assert_int_equal(setenv("OG_FAULT", "payout_start_ack_lost", 1), 0);
    assert_int_equal(og_op_start(s, c.attempt.operation_id, 1, "worker-7",
                                 &started),
                     OG_ESTORE_UNAVAILABLE);
    assert_int_equal(unsetenv("OG_FAULT"), 0);
    assert_false(started); /* out untouched */
    assert_int_equal(a_get(s, c.attempt.operation_id).status,
                     OG_OP_STARTED);
    v = a_takeover(s, url, c.attempt.operation_id, 1);
    /* NotStarted is not the sweeper's for a Started attempt */
    assert_int_equal(og_payout_resolve(s, c.attempt.operation_id,
                                       ADMITTED_BIT, v, &o, &res),
                     0);
    assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    res = p_resolve(s, c.attempt.operation_id, STARTED_BIT, v, OG_OP_UNKNOWN,
                    "sweeper");
    assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(res.state, OG_PAYOUT_STATE_UNKNOWN);
    assert_int_equal(res.reservation, OG_PAYOUT_RESERVATION_HELD);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Late evidence racing the reconciler
 * ========================================================================= */
#define EVIDENCE_RACERS 3
#define EVIDENCE_ROUNDS 6

typedef struct evidence_race {
    og_store *stores[EVIDENCE_RACERS];
    pthread_barrier_t start;
    const char *op;
    int64_t v;
    og_payout_resolution r[EVIDENCE_RACERS];
    int rc[EVIDENCE_RACERS], next;
    pthread_mutex_t mu;
} evidence_race;

/* Racer 0: a late response (Succeeded); racer 1: a notification (Failed);
 * racer 2: the reconciler's NotApplied at the version it holds. */
static void *evidence_racer_main(void *arg)
{
    evidence_race *er = arg;
    int i;

    pthread_mutex_lock(&er->mu);
    i = er->next++;
    pthread_mutex_unlock(&er->mu);
    pthread_barrier_wait(&er->start);
    if (i < 2) {
        og_payout_evidence_req e = {
            .operation_id = er->op,
            .status = i == 0 ? OG_OP_SUCCEEDED : OG_OP_FAILED,
            .reason = i == 0 ? "completed" : "rejected",
            .provider_reference = i == 0 ? "po_race" : NULL,
            .source = i == 0 ? OG_PAYOUT_EVIDENCE_LATE_RESPONSE
                             : OG_PAYOUT_EVIDENCE_NOTIFICATION,
            .evidence = "raced",
            .actor = i == 0 ? "worker-7" : "notifier"};

        er->rc[i] = og_payout_evidence(er->stores[i], &e, &er->r[i]);
    } else {
        og_op_outcome o = {OG_OP_NOT_APPLIED, "not_found_final", NULL,
                           "reconciler", NULL};

        er->rc[i] = og_payout_resolve(er->stores[i], er->op, UNKNOWN_BIT,
                                      er->v, &o, &er->r[i]);
    }
    return NULL;
}

/* Two pieces of late evidence and the reconciler's NotApplied, on three
 * store objects at once, for one Unknown attempt: exactly one resolves it,
 * the others change nothing, and the payout and the reservation follow the
 * one that did (one final "resolved" entry, the reservation paid or
 * released once). */
void late_evidence_and_the_reconciler_race_and_exactly_one_resolves(
    void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("paevrace", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "aevrace", 500000000);
    for (int round = 0; round < EVIDENCE_ROUNDS; round++) {
        char id[64], where[256];
        pthread_t th[EVIDENCE_RACERS];
        evidence_race er;
        og_payout_decision d;
        og_payout_claim_req cr;
        og_payout_claim_result c;
        og_payout_view v;
        int won = -1;

        p_id(id, &w, "PAYR", round);
        p_draft(s, &w, id, "10.00");
        d = p_decide_now(s, id);
        cr = p_claim_req(&d, "worker-7");
        c = p_claim(s, &cr);
        p_start(s, &c);
        assert_int_equal(p_resolve(s, c.attempt.operation_id, STARTED_BIT, 1,
                                   OG_OP_UNKNOWN, "worker-7")
                             .outcome,
                         OG_PAYOUT_RESOLVE_RESOLVED);
        memset(&er, 0, sizeof er);
        er.op = c.attempt.operation_id;
        er.v = t_absence_final(s, url, er.op, 1);
        for (int i = 0; i < EVIDENCE_RACERS; i++)
            er.stores[i] = t_store_url(url, 2, P_RACE_TIMEOUT_MS);
        pthread_mutex_init(&er.mu, NULL);
        pthread_barrier_init(&er.start, NULL, EVIDENCE_RACERS);
        for (int i = 0; i < EVIDENCE_RACERS; i++)
            assert_int_equal(
                pthread_create(&th[i], NULL, evidence_racer_main, &er), 0);
        for (int i = 0; i < EVIDENCE_RACERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < EVIDENCE_RACERS; i++) {
            if (er.rc[i] != 0)
                fail_msg("round %d racer %d: %s", round, i,
                         og_err_name(er.rc[i]));
            if (er.r[i].outcome == OG_PAYOUT_RESOLVE_RESOLVED) {
                assert_int_equal(won, -1);
                won = i;
            } else {
                assert_int_equal(er.r[i].outcome,
                                 OG_PAYOUT_RESOLVE_NOT_RECORDED);
            }
        }
        assert_true(won >= 0);
        v = p_get(s, id);
        assert_int_equal(v.state, won == 0   ? OG_PAYOUT_STATE_PAID
                                  : won == 1 ? OG_PAYOUT_STATE_FAILED
                                             : OG_PAYOUT_STATE_APPROVED);
        assert_string_equal(v.active_attempt, "");
        assert_int_equal(a_get(s, er.op).status,
                         won == 0   ? OG_OP_SUCCEEDED
                         : won == 1 ? OG_OP_FAILED
                                    : OG_OP_NOT_APPLIED);
        snprintf(where, sizeof where,
                 "payout_id = '%s' AND kind = 'resolved'", id);
        assert_int_equal(p_count(raw, "payout_events", where), 2);
        p_assert_release(raw, d.grant_id,
                         won == 0   ? "paid"
                         : won == 1 ? "failed"
                                    : "not-applied");
        pthread_barrier_destroy(&er.start);
        pthread_mutex_destroy(&er.mu);
        for (int i = 0; i < EVIDENCE_RACERS; i++)
            og_store_free(er.stores[i]);
    }
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    t_raw_close(raw);
    og_store_free(s);
}
