/*
 * payouts_resolve.c — the payout store, the resolution (og_payout_resolve): the payout and the reservation
 * move with the outcome, a stale owner cannot resolve, Unknown holds the
 * reservation, re-authorization after NotApplied, redelivery after
 * archiving, a claim and a resolution failing before their commit.
 * The conformance group payouts (payouts.c has the list).
 */
#include "payouts.h"

/* ===========================================================================
 * The resolution (og_payout_resolve): the payout and the reservation
 * follow the attempt
 * ========================================================================= */

/* A payout of 100.00 EUR in a world of its own, decided now and claimed by
 * worker-7 with lease_us: *d and the claim's result. */
og_payout_claim_result p_claimed(og_store *s, t_raw *raw, p_world *w,
                                        const char *tag, char id[64],
                                        og_payout_decision *d,
                                        int64_t lease_us)
{
    og_payout_claim_req c;
    og_payout_claim_result r;

    p_world_new(s, raw, w, tag, 5000000);
    p_id(id, w, "PAY", 1);
    p_draft(s, w, id, "100.00");
    *d = p_decide_now(s, id);
    c = p_claim_req(d, "worker-7");
    c.lease_us = lease_us;
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    return r;
}

void p_start(og_store *s, const og_payout_claim_result *r)
{
    bool started = false;

    assert_int_equal(og_op_start(s, r->attempt.operation_id, 1, "worker-7",
                                 &started),
                     0);
    assert_true(started);
}

og_payout_resolution p_resolve(og_store *s, const char *op,
                                      unsigned expected, int64_t v,
                                      og_op_status to, const char *actor)
{
    og_op_outcome o = {to, "test.outcome", NULL, actor, NULL};
    og_payout_resolution r;
    int rc;

    memset(&r, 0x5a, sizeof r);
    rc = og_payout_resolve(s, op, expected, v, &o, &r);
    if (rc != 0)
        fail_msg("og_payout_resolve(%s): %s", og_op_status_name(to),
                 og_err_name(rc));
    return r;
}

/* The tenant's paid total over all its days. */
int64_t p_paid(t_raw *raw, const char *tenant)
{
    return t_raw_int(raw,
                     "SELECT coalesce(sum(paid), 0) FROM tenant_days"
                     " WHERE tenant_id = '%s'",
                     tenant);
}

/* The binding's release: 1 when released for cause, 0 when held (cause
 * NULL: asserts it is held). */
void p_assert_release(t_raw *raw, const char *grant_id,
                             const char *cause)
{
    char where[512];

    if (cause)
        snprintf(where, sizeof where,
                 "grant_id = '%s' AND released_at IS NOT NULL"
                 " AND release_cause = '%s'",
                 grant_id, cause);
    else
        snprintf(where, sizeof where,
                 "grant_id = '%s' AND released_at IS NULL"
                 " AND release_cause IS NULL",
                 grant_id);
    assert_int_equal(p_count(raw, "payout_grants", where), 1);
}

static int64_t p_resolved_events(t_raw *raw, const char *id)
{
    char where[512];

    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'resolved'",
             id);
    return p_count(raw, "payout_events", where);
}


p_resolve_state p_resolve_snap(og_store *s, t_raw *raw,
                                      const p_world *w, const char *id,
                                      const char *op)
{
    p_resolve_state st;
    char where[512];

    memset(&st, 0, sizeof st);
    st.payout_events = p_count_payout(raw, "payout_events", id);
    snprintf(where, sizeof where, "operation_id = '%s'", op);
    st.operation_events = p_count(raw, "operation_events", where);
    st.reserved = p_reserved(raw, w->tenant);
    st.paid = p_paid(raw, w->tenant);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND released_at IS NOT NULL", id);
    st.released = p_count(raw, "payout_grants", where);
    st.v = p_get(s, id);
    assert_int_equal(og_operation_get(s, op, &st.op), 1);
    return st;
}

void p_assert_unchanged(const p_resolve_state *a,
                               const p_resolve_state *b)
{
    assert_int_equal(a->payout_events, b->payout_events);
    assert_int_equal(a->operation_events, b->operation_events);
    assert_int_equal(a->reserved, b->reserved);
    assert_int_equal(a->paid, b->paid);
    assert_int_equal(a->released, b->released);
    assert_int_equal(a->v.state, b->v.state);
    assert_int_equal(a->v.version, b->v.version);
    assert_string_equal(a->v.active_attempt, b->v.active_attempt);
    assert_int_equal(a->op.status, b->op.status);
    assert_int_equal(a->op.owner_version, b->op.owner_version);
    assert_int_equal(a->op.updated_at_us, b->op.updated_at_us);
}

/* Takes op over once its lease lapsed: the new owner version. */
int64_t p_takeover(og_store *s, const char *op, int64_t v)
{
    og_operation after;
    bool taken = false;

    for (int i = 0; i < 200 && !taken; i++) {
        assert_int_equal(og_op_takeover(s, op, v, "sweeper", &after, &taken),
                         0);
        if (!taken)
            usleep(5000);
    }
    assert_true(taken);
    assert_int_equal(after.owner_version, v + 1);
    return after.owner_version;
}

void resolution_moves_the_reservation_with_the_outcome(void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("presolve", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    static const struct {
        og_op_status to;
        og_payout_state state;
        og_payout_reservation res;
        const char *cause;
    } cases[] = {
        {OG_OP_SUCCEEDED, OG_PAYOUT_STATE_PAID, OG_PAYOUT_RESERVATION_PAID,
         "paid"},
        {OG_OP_FAILED, OG_PAYOUT_STATE_FAILED, OG_PAYOUT_RESERVATION_RELEASED,
         "failed"},
        {OG_OP_NOT_STARTED, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-started"},
        {OG_OP_NOT_APPLIED, OG_PAYOUT_STATE_APPROVED,
         OG_PAYOUT_RESERVATION_RELEASED, "not-applied"},
    };

    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char id[64];
        og_payout_decision d;
        og_payout_claim_result c;
        og_payout_resolution r;
        p_resolve_state before, after;
        og_operation op;
        og_payout_view v;
        unsigned expected = OG_OP_BIT(OG_OP_STARTED);
        int64_t owner = 1, claimed_version;
        p_world w;

        c = p_claimed(s, raw, &w, "resolve",  id, &d,
                      cases[k].to == OG_OP_NOT_STARTED ? 1000 : 2 * MINUTE);
        claimed_version = p_get(s, id).version;
        assert_int_equal(p_reserved(raw, w.tenant), 10000);
        if (cases[k].to == OG_OP_NOT_STARTED) {
            /* P2: the claimer fenced by a takeover, the attempt Admitted */
            owner = p_takeover(s, c.attempt.operation_id, 1);
            expected = OG_OP_BIT(OG_OP_ADMITTED);
        } else {
            p_start(s, &c);
        }
        if (cases[k].to == OG_OP_NOT_APPLIED) {
            /* Unknown first: the payout Unknown, everything held */
            r = p_resolve(s, c.attempt.operation_id, expected, owner,
                          OG_OP_UNKNOWN, "worker-7");
            assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
            assert_int_equal(r.state, OG_PAYOUT_STATE_UNKNOWN);
            assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
            assert_false(r.attempt_cleared);
            v = p_get(s, id);
            assert_int_equal(v.state, OG_PAYOUT_STATE_UNKNOWN);
            assert_string_equal(v.active_attempt, c.attempt.operation_id);
            assert_int_equal(p_reserved(raw, w.tenant), 10000);
            p_assert_release(raw, d.grant_id, NULL);
            claimed_version = v.version;
            expected = OG_OP_BIT(OG_OP_UNKNOWN);
            /* P6 in the store (M36): a lookup begun past the cutoff */
            owner = t_absence_final(s, url, c.attempt.operation_id, owner);
        }
        r = p_resolve(s, c.attempt.operation_id, expected, owner, cases[k].to,
                      "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
        assert_string_equal(r.payout_id, id);
        assert_string_equal(r.grant_id, d.grant_id);
        assert_int_equal(r.state, cases[k].state);
        assert_int_equal(r.payout_version, claimed_version + 1);
        assert_true(r.attempt_cleared);
        assert_int_equal(r.reservation, cases[k].res);
        assert_int_equal(r.amount_minor, 10000);
        assert_string_equal(r.release_day, d.release_day);
        /* what the store holds */
        v = p_get(s, id);
        assert_int_equal(v.state, cases[k].state);
        assert_int_equal(v.version, claimed_version + 1);
        assert_string_equal(v.active_attempt, "");
        assert_int_equal(og_operation_get(s, c.attempt.operation_id, &op), 1);
        assert_int_equal(op.status, cases[k].to);
        assert_int_equal(p_reserved(raw, w.tenant), 0);
        assert_int_equal(p_paid(raw, w.tenant),
                         cases[k].to == OG_OP_SUCCEEDED ? 10000 : 0);
        p_assert_release(raw, d.grant_id, cases[k].cause);
        assert_int_equal(p_resolved_events(raw, id),
                         cases[k].to == OG_OP_NOT_APPLIED ? 2 : 1);
        /* released once: the same resolution again changes nothing */
        before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
        r = p_resolve(s, c.attempt.operation_id, expected, owner, cases[k].to,
                      "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        assert_string_equal(r.payout_id, ""); /* zeroed */
        r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN),
                      owner, OG_OP_FAILED, "reconciler");
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
        p_assert_unchanged(&before, &after);
    }
    /* input is og_op_record's: checked before any I/O */
    {
        og_op_outcome o = {OG_OP_STARTED, NULL, NULL, "w", NULL};
        og_payout_resolution r;
        char u[OG_UUID_LEN + 1];

        t_uuid(u);
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_ADMITTED), 1,
                                           &o, &r),
                         OG_ETRANSITION);
        o.status = OG_OP_NOT_APPLIED;
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         OG_ETRANSITION);
        o.status = OG_OP_FAILED;
        assert_int_equal(og_payout_resolve(s, "not-a-uuid",
                                           OG_OP_BIT(OG_OP_STARTED), 1, &o,
                                           &r),
                         OG_EOPERATION_ID);
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 0,
                                           &o, &r),
                         OG_EINVAL);
        o.actor = "";
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         OG_EACTOR);
        /* no such operation: not recorded */
        o.actor = "w";
        assert_int_equal(og_payout_resolve(s, u, OG_OP_BIT(OG_OP_STARTED), 1,
                                           &o, &r),
                         0);
        assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
    }
    t_raw_close(raw);
    og_store_free(s);
}

void stale_owner_cannot_resolve(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pstale", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_result c;
    og_payout_resolution r;
    p_resolve_state before, after;
    int64_t owner;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "stale", id, &d, 1000);
    owner = p_takeover(s, c.attempt.operation_id, 1);
    before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    /* the fenced claimer, with every outcome it could report */
    {
        static const og_op_status tos[] = {OG_OP_SUCCEEDED, OG_OP_FAILED,
                                           OG_OP_UNKNOWN};

        for (size_t i = 0; i < sizeof tos / sizeof tos[0]; i++) {
            r = p_resolve(s, c.attempt.operation_id,
                          OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED),
                          1, tos[i], "worker-7");
            assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_NOT_RECORDED);
        }
    }
    after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    p_assert_unchanged(&before, &after);
    assert_int_equal(after.v.state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(after.reserved, 10000);
    p_assert_release(raw, d.grant_id, NULL);
    /* the new owner resolves it */
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_ADMITTED), owner,
                  OG_OP_NOT_STARTED, "sweeper");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, "not-started");
    t_raw_close(raw);
    og_store_free(s);
}

void unknown_holds_the_reservation_and_blocks_reauthorization(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("punknown", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, again;
    og_payout_decide_req rq;
    og_payout_claim_result c;
    og_payout_resolution r;
    og_payout_view v;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "unknown", id, &d, 2 * MINUTE);
    p_start(s, &c);
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_STARTED), 1,
                  OG_OP_UNKNOWN, "worker-7");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_UNKNOWN);
    assert_string_equal(v.active_attempt, c.attempt.operation_id);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    assert_int_equal(p_paid(raw, w.tenant), 0);
    p_assert_release(raw, d.grant_id, NULL);
    /* escalated, still held */
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN), 1,
                  OG_OP_NEEDS_RECONCILIATION, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_UNKNOWN);
    assert_int_equal(r.reservation, OG_PAYOUT_RESERVATION_HELD);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    /* P5: no re-authorization while the attempt may still take effect */
    v = p_get(s, id);
    rq = p_req(id);
    rq.reauthorize = true;
    rq.payout_version = v.version;
    rq.not_before_us = t_now_us() - SEC;
    rq.expires_at_us = rq.not_before_us + 30 * MINUTE;
    again = p_decide(s, &rq);
    assert_int_not_equal(again.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_false(again.issued);
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    assert_int_equal(p_get(s, id).attempt_count, 1);
    t_raw_close(raw);
    og_store_free(s);
}

void reauthorization_after_not_applied_gets_attempt_2_with_its_own_key(
    void **state)
{
    char url[4200], id[64], key[OG_ID_MAX + 1], ref[OG_ID_MAX + 1];
    og_store *s = t_fresh_store("preauth", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, d2;
    og_payout_decide_req rq;
    og_payout_claim_req cr;
    og_payout_claim_result c, c2;
    og_payout_resolution r;
    og_payout_view v;
    p_world w;

    (void)state;
    c = p_claimed(s, raw, &w, "reauth", id, &d, 2 * MINUTE);
    p_start(s, &c);
    assert_int_equal(p_resolve(s, c.attempt.operation_id,
                               OG_OP_BIT(OG_OP_STARTED), 1, OG_OP_UNKNOWN,
                               "worker-7")
                         .outcome,
                     OG_PAYOUT_RESOLVE_RESOLVED);
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_UNKNOWN),
                  t_absence_final(s, url, c.attempt.operation_id, 1),
                  OG_OP_NOT_APPLIED, "reconciler");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(v.version, r.payout_version);
    assert_string_equal(v.active_attempt, "");
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    /* a materially new attempt: a new decision and grant, attempt 2 */
    rq = p_req(id);
    rq.reauthorize = true;
    rq.payout_version = v.version;
    rq.not_before_us = t_now_us() - SEC;
    rq.expires_at_us = rq.not_before_us + 30 * MINUTE;
    d2 = p_decide(s, &rq);
    if (d2.verdict.outcome != OG_PAYOUT_ALLOWED)
        fail_msg("reauthorize: %s", og_payout_reason_name(d2.verdict.reason));
    assert_int_equal(d2.attempt_number, 2);
    assert_int_equal(d2.executable_payout_version, v.version + 1);
    assert_string_not_equal(d2.grant_id, d.grant_id);
    assert_int_equal(p_reserved(raw, w.tenant), 10000);
    cr = p_claim_req(&d2, "worker-9");
    c2 = p_claim(s, &cr);
    assert_int_equal(c2.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_int_equal(c2.attempt_number, 2);
    snprintf(key, sizeof key, "payout-%s-a2", id);
    snprintf(ref, sizeof ref, "%s-a2", id);
    assert_string_equal(c2.attempt.idempotency_key, key);
    assert_string_equal(c2.attempt.client_reference, ref);
    assert_string_not_equal(c2.attempt.operation_id, c.attempt.operation_id);
    /* the first grant stays consumed by attempt 1, its release once */
    {
        og_payout_grant_view g;

        assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
        assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
        assert_string_equal(g.consumed_by_operation, c.attempt.operation_id);
        p_assert_release(raw, d.grant_id, "not-applied");
        p_assert_release(raw, d2.grant_id, NULL);
    }
    /* and attempt 2 resolves on its own binding */
    {
        bool started = false;

        assert_int_equal(og_op_start(s, c2.attempt.operation_id, 1,
                                     "worker-9", &started),
                         0);
        assert_true(started);
    }
    r = p_resolve(s, c2.attempt.operation_id, OG_OP_BIT(OG_OP_STARTED), 1,
                  OG_OP_SUCCEEDED, "worker-9");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_string_equal(r.grant_id, d2.grant_id);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(p_paid(raw, w.tenant), 10000);
    p_assert_release(raw, d2.grant_id, "paid");
    t_raw_close(raw);
    og_store_free(s);
}

/* A redelivery after the consuming attempt was archived (retention) is
 * still a duplicate: the claim reads operations_archive too. */
void redelivery_after_the_attempt_was_archived_is_a_duplicate(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("parch", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result first, again;
    og_payout_view was;
    og_archive_stats st;
    int64_t before[P_CLAIM_TABLES];
    char where[256];
    p_world w;

    (void)state;
    first = p_claimed(s, raw, &w, "arch", id, &d, 2 * MINUTE);
    p_start(s, &first);
    assert_int_equal(p_resolve(s, first.attempt.operation_id,
                               OG_OP_BIT(OG_OP_STARTED), 1, OG_OP_SUCCEEDED,
                               "worker-7")
                         .outcome,
                     OG_PAYOUT_RESOLVE_RESOLVED);
    usleep(20000); /* its last change lies before the archive's clock */
    memset(&st, 0, sizeof st);
    assert_int_equal(og_store_archive_operations(s, 0, OG_ARCHIVE_MOVE, 10, 1,
                                                 &st),
                     0);
    assert_int_equal(st.operations, 1);
    snprintf(where, sizeof where, "operation_id = '%s'",
             first.attempt.operation_id);
    assert_int_equal(p_count(raw, "operations", where), 0);
    assert_int_equal(p_count(raw, "operations_archive", where), 1);
    was = p_get(s, id);
    p_counts(raw, before);
    c = p_claim_req(&d, "worker-8");
    c.relied.payout = d.executable_payout_version;
    again = p_claim(s, &c);
    assert_int_equal(again.outcome, OG_PAYOUT_CLAIM_DUPLICATE);
    assert_string_equal(again.payout_id, id);
    assert_int_equal(again.attempt_number, 1);
    assert_false(again.has_attempt); /* og_operation_get no longer sees it */
    {
        int64_t now[P_CLAIM_TABLES];
        og_payout_view v = p_get(s, id);

        p_counts(raw, now);
        for (size_t k = 0; k < P_CLAIM_TABLES; k++)
            assert_int_equal(now[k], before[k]);
        assert_int_equal(v.version, was.version);
        assert_int_equal(v.state, OG_PAYOUT_STATE_PAID);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* A claim that fails before its commit wrote nothing: the grant is still
 * Issued and the same claim then succeeds. */
void claim_failing_before_its_commit_writes_nothing(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pcfault", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_grant_view g;
    og_payout_view was;
    int64_t before[P_CLAIM_TABLES];
    p_world w;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        t_raw_close(raw);
        og_store_free(s);
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    }
    p_world_new(s, raw, &w, "cfault", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    was = p_get(s, id);
    p_counts(raw, before);
    assert_int_equal(setenv("OG_FAULT", "payout_claim_before_commit", 1), 0);
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(og_payout_claim(s, &c, &r), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(unsetenv("OG_FAULT"), 0);
    assert_int_equal(r.payout_id[0], 0x5a); /* out untouched */
    p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);
    {
        char where[256];

        snprintf(where, sizeof where, "grant_id = '%s'", d.grant_id);
        assert_int_equal(p_count(raw, "operations", where), 0);
    }
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CLAIMED);
    t_raw_close(raw);
    og_store_free(s);
}

/* A resolution that fails before its commit wrote nothing: the outcome is
 * not recorded, the payout is still Executing with its attempt, the
 * reservation still held; the same resolution then succeeds. The orchestration
 * (lib/store/payout_run.c) runs the backend's record, facts and writes in one
 * transaction and rolls all of it back (M35). */
void resolution_failing_before_its_commit_writes_nothing(void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("prfault", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_result c;
    og_payout_resolution r;
    og_op_outcome o = {OG_OP_SUCCEEDED, "test.outcome", NULL, "worker-7", NULL};
    p_resolve_state before, after;
    p_world w;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION) {
        t_raw_close(raw);
        og_store_free(s);
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    }
    c = p_claimed(s, raw, &w, "rfault", id, &d, 60000000);
    p_start(s, &c);
    before = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    assert_int_equal(setenv("OG_FAULT", "payout_resolve_before_commit", 1), 0);
    memset(&r, 0x5a, sizeof r);
    assert_int_equal(og_payout_resolve(s, c.attempt.operation_id,
                                       OG_OP_BIT(OG_OP_STARTED), 1, &o, &r),
                     OG_ESTORE_UNAVAILABLE);
    assert_int_equal(unsetenv("OG_FAULT"), 0);
    assert_int_equal(((unsigned char *)&r)[0], 0x5a); /* out untouched */
    after = p_resolve_snap(s, raw, &w, id, c.attempt.operation_id);
    p_assert_unchanged(&before, &after);
    assert_int_equal(after.op.status, OG_OP_STARTED);
    assert_int_equal(after.v.state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(after.reserved, 10000);
    assert_int_equal(p_resolved_events(raw, id), 0);
    p_assert_release(raw, d.grant_id, NULL);
    /* nothing of it stayed: the same resolution now commits */
    r = p_resolve(s, c.attempt.operation_id, OG_OP_BIT(OG_OP_STARTED), 1,
                  OG_OP_SUCCEEDED, "worker-7");
    assert_int_equal(r.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
    assert_int_equal(r.state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(p_paid(raw, w.tenant), 10000);
    assert_int_equal(p_resolved_events(raw, id), 1);
    p_assert_release(raw, d.grant_id, "paid");
    t_raw_close(raw);
    og_store_free(s);
}
