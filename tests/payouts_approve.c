/*
 * payouts_approve.c — an approver's fresh decision settling a pending
 * AcknowledgmentRequired or EscalationRecommended decision (og_payout_decide
 * with settles_decision_id; schema 14; docs/payouts.md, section 4,
 * "Acknowledgment and escalation"), on every backend.
 */
#include "payouts.h"

/* A payout of amount in a world of its own whose destination changed
 * `days` ago (30: long ago), decided by clerk-22 with approval_limit: the
 * pending decision into *d. */
static void a_pending(og_store *s, t_raw *raw, p_world *w, const char *tag,
                      char id[64], const char *amount, int days,
                      int64_t approval_limit, og_payout_decision *d)
{
    og_payout_decide_req q;

    p_world_new(s, raw, w, tag, INT64_C(100000000));
    p_id(id, w, "PAY", 1);
    p_draft(s, w, id, amount);
    p_age_destination(raw, w->dst, days);
    q = p_req(id);
    q.requester_approval_limit = approval_limit;
    *d = p_decide(s, &q);
}

/* approver's request settling pending (its limit in EUR cents). */
static og_payout_decide_req a_req(const char *id, const char *approver,
                                  int64_t limit, const char *pending)
{
    og_payout_decide_req q = p_req(id);

    q.requester_id = approver;
    q.requester_role = "approver";
    q.requester_approval_limit = limit;
    q.settles_decision_id = pending;
    return q;
}

static int64_t a_decisions(t_raw *raw, const char *id)
{
    return p_count_payout(raw, "payout_decisions", id);
}

void approval_settles_an_acknowledgment_with_a_fresh_decision(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision pending, fresh, again;
    og_payout_decision_view dv, pv;
    og_payout_decide_req q;
    char id[64];
    p_world w;

    (void)state;
    a_pending(s, raw, &w, "ack", id, "4250.00", 2, 1000000, &pending);
    assert_int_equal(pending.verdict.outcome,
                     OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED);
    assert_false(pending.issued);

    /* Four eyes: the clerk cannot acknowledge its own decision. */
    q = a_req(id, "clerk-22", 1000000, pending.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &fresh),
                     OG_EPAYOUT_APPROVER_IS_REQUESTER);
    assert_int_equal(a_decisions(raw, id), 1);

    /* Another approver's acknowledgment: a FRESH Allowed decision that
     * issues; the pending one stays as it was written. */
    q = a_req(id, "approver-5", 1000000, pending.decision_id);
    fresh = p_decide(s, &q);
    assert_int_equal(fresh.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_true(fresh.issued);
    assert_string_not_equal(fresh.decision_id, pending.decision_id);
    assert_string_equal(fresh.settles_decision_id, pending.decision_id);
    assert_int_equal(fresh.acknowledged_destination_version, 1);
    assert_int_equal(og_payout_decision_get(s, fresh.decision_id, &dv), 1);
    assert_string_equal(dv.settles_decision_id, pending.decision_id);
    assert_int_equal(dv.acknowledged_destination_version, 1);
    assert_string_equal(dv.requester_id, "approver-5");
    assert_string_equal(dv.requester_role, "approver");
    assert_int_equal(og_payout_decision_get(s, pending.decision_id, &pv), 1);
    assert_int_equal(pv.outcome, OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED);
    assert_string_equal(pv.settles_decision_id, "");
    assert_int_equal(p_get(s, id).state, OG_PAYOUT_STATE_APPROVED);

    /* A retry, by the same approver or another: settled, nothing more. */
    assert_int_equal(og_payout_decide(s, &q, &again),
                     OG_EPAYOUT_ALREADY_SETTLED);
    q = a_req(id, "approver-6", 1000000, pending.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &again),
                     OG_EPAYOUT_ALREADY_SETTLED);
    assert_int_equal(a_decisions(raw, id), 2);
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    t_raw_close(raw);
    og_store_free(s);
}

void approval_of_an_escalation_uses_the_approvers_limit(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision pending, low, high;
    og_payout_decide_req q;
    char id[64];
    p_world w;

    (void)state;
    /* 4,250.00 above clerk-22's 4,000.00 */
    a_pending(s, raw, &w, "esc", id, "4250.00", 30, 400000, &pending);
    assert_int_equal(pending.verdict.outcome,
                     OG_PAYOUT_ESCALATION_RECOMMENDED);

    /* An approver whose limit does not cover it: escalated again, as a
     * fresh decision that settles the first. */
    q = a_req(id, "approver-5", 300000, pending.decision_id);
    low = p_decide(s, &q);
    assert_int_equal(low.verdict.outcome, OG_PAYOUT_ESCALATION_RECOMMENDED);
    assert_string_equal(low.settles_decision_id, pending.decision_id);
    assert_false(low.issued);

    /* The first is settled; the fresh escalation is the one to settle. */
    q = a_req(id, "approver-6", 1000000, pending.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &high),
                     OG_EPAYOUT_ALREADY_SETTLED);
    /* ... and its own requester cannot settle it (four eyes) */
    q = a_req(id, "approver-5", 1000000, low.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &high),
                     OG_EPAYOUT_APPROVER_IS_REQUESTER);
    q = a_req(id, "approver-6", 1000000, low.decision_id);
    high = p_decide(s, &q);
    assert_int_equal(high.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_true(high.issued);
    assert_int_equal(high.acknowledged_destination_version, 0);
    assert_int_equal(a_decisions(raw, id), 3);
    t_raw_close(raw);
    og_store_free(s);
}

void approval_refuses_what_it_cannot_settle_and_writes_nothing(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision pending, other, allowed, d;
    og_payout_decide_req q;
    char id[64], id2[64], id3[64];
    p_world w, w2;

    (void)state;
    a_pending(s, raw, &w, "refuse", id, "4250.00", 2, 1000000, &pending);
    a_pending(s, raw, &w2, "refuse2", id2, "100.00", 2, 1000000, &other);
    p_id(id3, &w, "PAY", 3);
    p_draft(s, &w, id3, "10.00");
    p_age_destination(raw, w.dst, 30);
    allowed = p_decide_allowed(s, id3);
    p_age_destination(raw, w.dst, 2);

    /* another payout's decision; an Allowed one; none at all */
    q = a_req(id, "approver-5", 1000000, other.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_NOT_SETTLEABLE);
    q = a_req(id3, "approver-5", 1000000, allowed.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_NOT_SETTLEABLE);
    q = a_req(id, "approver-5", 1000000,
              "0b9e7c4e-6f7d-4a44-9c1e-3f2a9d8b7c6d");
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_NOT_SETTLEABLE);
    q = a_req(id, "approver-5", 1000000, "not-a-uuid");
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_DECISION);
    /* a payout version other than the one the pending decision evaluated */
    q = a_req(id, "approver-5", 1000000, pending.decision_id);
    q.payout_version = 2;
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_SETTLE_STALE);
    /* the payout moved since (cancelled): stale */
    {
        og_payout_put_result r;

        assert_int_equal(og_payout_cancel(s, id, 1, "admin-1", &r), 0);
        assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    }
    q = a_req(id, "approver-5", 1000000, pending.decision_id);
    assert_int_equal(og_payout_decide(s, &q, &d), OG_EPAYOUT_SETTLE_STALE);
    assert_int_equal(a_decisions(raw, id), 1);
    assert_int_equal(a_decisions(raw, id3), 1);
    assert_int_equal(a_decisions(raw, id2), 1);
    t_raw_close(raw);
    og_store_free(s);
}

/* The acknowledgment covers the destination version the pending decision
 * evaluated: a destination changed again since is another destination
 * version, which the payout's terms no longer name (Denied
 * destination.not-registered); and the worker's recheck of the grant an
 * approval issued honours the acknowledgment (payout_exec.c runs it to
 * Paid). */
void acknowledgment_is_for_the_destination_version_evaluated(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision pending, d;
    og_payout_decide_req q;
    og_payout_destination_record dr;
    og_payout_put_result r;
    char id[64];
    p_world w;

    (void)state;
    a_pending(s, raw, &w, "ackver", id, "4250.00", 2, 1000000, &pending);
    assert_int_equal(pending.verdict.outcome,
                     OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED);
    dr = (og_payout_destination_record){w.dst, w.ben, "tok_rotated_9"};
    assert_int_equal(og_payout_destination_put(s, &dr, 1, &r), 0);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    q = a_req(id, "approver-5", 1000000, pending.decision_id);
    d = p_decide(s, &q);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_DENIED);
    assert_int_equal(d.verdict.reason,
                     OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED);
    assert_false(d.issued);
    t_raw_close(raw);
    og_store_free(s);
}

/* Two approvers settle one decision at once, from two store objects:
 * exactly one fresh decision, one grant; the other is refused settled. */
#define APPROVE_RACERS 4
#define APPROVE_ROUNDS 3

typedef struct approve_race {
    og_store *stores[2];
    pthread_barrier_t start;
    char payout[64];
    char pending[OG_UUID_LEN + 1];
    int64_t limit; /* the approvers' approval limit */
    og_payout_decision d[APPROVE_RACERS];
    int rc[APPROVE_RACERS];
} approve_race;

typedef struct approve_racer {
    approve_race *r;
    int i;
    char who[32];
} approve_racer;

static void *approve_racer_main(void *arg)
{
    approve_racer *me = arg;
    approve_race *r = me->r;
    og_payout_decide_req q = a_req(r->payout, me->who, r->limit, r->pending);

    pthread_barrier_wait(&r->start);
    r->rc[me->i] = og_payout_decide(r->stores[me->i % 2], &q, &r->d[me->i]);
    return NULL;
}

void concurrent_approvals_of_one_decision_settle_it_once(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    approve_race *r = calloc(1, sizeof *r);

    (void)state;
    assert_non_null(r);
    r->stores[0] = t_store(APPROVE_RACERS, P_RACE_TIMEOUT_MS);
    r->stores[1] = t_store(APPROVE_RACERS, P_RACE_TIMEOUT_MS);
    for (int round = 0; round < APPROVE_ROUNDS; round++) {
        /* round 0 and 2: an acknowledgment (the winner is Allowed and
         * moves the payout); round 1: an escalation the approvers' limit
         * does not cover (the winner escalates again, moving nothing) */
        bool esc = round == 1;
        pthread_t th[APPROVE_RACERS];
        approve_racer rs[APPROVE_RACERS];
        og_payout_decision pending;
        int won = 0;
        p_world w;

        a_pending(s, raw, &w, "apprace", r->payout, "4250.00", esc ? 30 : 2,
                  esc ? 400000 : 1000000, &pending);
        memcpy(r->pending, pending.decision_id, sizeof r->pending);
        r->limit = esc ? 300000 : 1000000;
        pthread_barrier_init(&r->start, NULL, APPROVE_RACERS);
        for (int i = 0; i < APPROVE_RACERS; i++) {
            rs[i].r = r;
            rs[i].i = i;
            snprintf(rs[i].who, sizeof rs[i].who, "approver-%d", i);
            assert_int_equal(
                pthread_create(&th[i], NULL, approve_racer_main, &rs[i]), 0);
        }
        for (int i = 0; i < APPROVE_RACERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&r->start);
        for (int i = 0; i < APPROVE_RACERS; i++) {
            if (r->rc[i] == 0) {
                won++;
                assert_string_equal(r->d[i].settles_decision_id, r->pending);
            } else if (r->rc[i] != OG_EPAYOUT_ALREADY_SETTLED) {
                fail_msg("racer %d: %s", i, og_err_name(r->rc[i]));
            }
        }
        assert_int_equal(won, 1);
        assert_int_equal(a_decisions(raw, r->payout), 2);
        assert_int_equal(p_count_payout(raw, "payout_grants", r->payout),
                         esc ? 0 : 1);
        assert_int_equal(p_count_payout(raw, "payout_jobs", r->payout),
                         esc ? 0 : 1);
    }
    og_store_free(r->stores[0]);
    og_store_free(r->stores[1]);
    free(r);
    t_raw_close(raw);
    og_store_free(s);
}
