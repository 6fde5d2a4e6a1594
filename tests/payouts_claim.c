/*
 * payouts_claim.c — the payout store, the claim (og_payout_claim): one grant, one attempt — the attempt's
 * key and reference, redelivery, a context change between validation and
 * claim, expired or revoked grants, concurrent claims.
 * The conformance group payouts (payouts.c has the list).
 */
#include "payouts.h"

/* ===========================================================================
 * The claim (og_payout_claim): one grant, one attempt
 * ========================================================================= */

void claim_sets_the_attempt_key_and_reference_from_the_payout_and_attempt_number(
    void **state)
{
    char url[4200], id[64], key[OG_ID_MAX + 1], ref[OG_ID_MAX + 1],
        where[1024];
    og_store *s = t_fresh_store("pclaim", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_claim_req c;
    og_payout_claim_result r;
    og_payout_decision d;
    og_payout_grant_view g;
    og_payout_view v;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "claim", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    r = p_claim(s, &c);
    assert_int_equal(r.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_true(r.has_attempt);
    assert_string_equal(r.payout_id, id);
    assert_int_equal(r.attempt_number, 1);
    snprintf(key, sizeof key, "payout-%s-a1", id);
    snprintf(ref, sizeof ref, "%s-a1", id);
    assert_string_equal(r.attempt.idempotency_key, key);
    assert_string_equal(r.attempt.client_reference, ref);
    assert_int_equal(r.attempt.kind, OG_OP_KIND_PAYOUT);
    assert_int_equal(r.attempt.status, OG_OP_ADMITTED);
    assert_int_equal(r.attempt.owner_version, 1);
    assert_string_equal(r.attempt.issuer, OG_PAYOUT_ISSUER);
    assert_string_equal(r.attempt.grant_id, d.grant_id);
    assert_string_equal(r.attempt.caller_id, "worker-7");
    assert_string_equal(r.attempt.account_id, w.dst);
    assert_string_equal(r.attempt.amount, "4250");
    assert_string_equal(r.attempt.currency, "EUR");
    assert_int_equal(r.attempt.submit_by_us - r.attempt.created_at_us,
                     5 * MINUTE);
    assert_int_equal(r.attempt.lease_until_us - r.attempt.created_at_us,
                     2 * MINUTE);
    /* what the store holds: the key and reference with the attempt, before
     * any send; the payout Executing with this attempt; the grant consumed
     * by it; one "claimed" entry */
    snprintf(where, sizeof where,
             "operation_id = '%s' AND idempotency_key = '%s'"
             " AND client_reference = '%s' AND kind = 'payout'",
             r.attempt.operation_id, key, ref);
    assert_int_equal(p_count(raw, "operations", where), 1);
    v = p_get(s, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_EXECUTING);
    assert_int_equal(v.version, d.executable_payout_version + 1);
    assert_string_equal(v.active_attempt, r.attempt.operation_id);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_string_equal(g.consumed_by_operation, r.attempt.operation_id);
    assert_int_equal(g.released_at_us, 0); /* held while the attempt lives */
    snprintf(where, sizeof where,
             "payout_id = '%s' AND kind = 'claimed' AND actor = 'worker-7'"
             " AND grant_id = '%s' AND from_state = 'Approved'"
             " AND to_state = 'Executing' AND reason = '%s'",
             id, d.grant_id, ref);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    /* the attempt goes on as any payout attempt: Started by its owner */
    {
        bool started = false;

        assert_int_equal(og_op_start(s, r.attempt.operation_id, 1, "worker-7",
                                     &started),
                         0);
        assert_true(started);
    }
    /* bad input writes nothing and is an error */
    c.worker_id = "";
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EACTOR);
    c = p_claim_req(&d, "worker-7");
    c.relied.beneficiary = 0;
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EINVAL);
    c = p_claim_req(&d, "worker-7");
    c.grant_id = "";
    assert_int_equal(og_payout_claim(s, &c, &r), OG_EGRANT_ID);
    /* not a payout grant: binding.mismatch; another audience:
     * presenter.not-audience — each its own outcome */
    c = p_claim_req(&d, "worker-7");
    c.grant_id = "no-such-grant";
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_MISMATCH);
    c = p_claim_req(&d, "worker-7");
    c.audience = "billing-executor";
    {
        og_payout_claim_result na = p_claim(s, &c);

        assert_int_equal(na.outcome, OG_PAYOUT_CLAIM_NOT_AUDIENCE);
        assert_string_equal(na.payout_id, id);
        assert_false(na.has_attempt);
        assert_string_equal(og_payout_claim_outcome_name(na.outcome),
                            "presenter.not-audience");
    }
    t_raw_close(raw);
    og_store_free(s);
}

void redelivery_after_the_claim_is_a_duplicate_with_no_state_change(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pdup", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_claim_req c;
    og_payout_claim_result first, again;
    og_payout_decision d;
    og_payout_view was;
    int64_t before[P_CLAIM_TABLES];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "dup", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    d = p_decide_now(s, id);
    c = p_claim_req(&d, "worker-7");
    first = p_claim(s, &c);
    assert_int_equal(first.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    was = p_get(s, id);
    p_counts(raw, before);
    /* the same delivery again, and another worker with the same job: a
     * duplicate, the winner's attempt reported, nothing written */
    for (int i = 0; i < 2; i++) {
        c = p_claim_req(&d, i == 0 ? "worker-7" : "worker-8");
        /* the validation it would have run read the versions before */
        again = p_claim(s, &c);
        assert_int_equal(again.outcome, OG_PAYOUT_CLAIM_DUPLICATE);
        assert_true(again.has_attempt);
        assert_string_equal(again.attempt.operation_id,
                            first.attempt.operation_id);
        assert_string_equal(again.payout_id, id);
        assert_int_equal(again.attempt_number, 1);
        {
            int64_t now[P_CLAIM_TABLES];
            og_payout_view v = p_get(s, id);

            p_counts(raw, now);
            for (size_t k = 0; k < P_CLAIM_TABLES; k++)
                assert_int_equal(now[k], before[k]);
            assert_int_equal(v.version, was.version);
            assert_string_equal(v.active_attempt, was.active_attempt);
        }
    }
    /* a grant consumed by something that is not this binding's attempt
     * is lost, not a duplicate */
    {
        char id2[64];
        og_payout_decision d2;

        p_id(id2, &w, "PAY", 2);
        p_draft(s, &w, id2, "100.00");
        d2 = p_decide_now(s, id2);
        p_consume(raw, d2.grant_id);
        c = p_claim_req(&d2, "worker-7");
        assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_LOST);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* The four fenced changes of the claim (docs/payouts.md, section 5, step
 * 3), each landing between the validation (the versions of the decision)
 * and the claim. */
void context_change_between_validation_and_claim_rolls_the_claim_back(
    void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pfence", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);

    (void)state;
    for (int k = 0; k < 4; k++) {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        og_payout_put_result pr = {0, 0};
        og_payout_view was;
        og_payout_grant_view g;
        int64_t before[P_CLAIM_TABLES];
        p_world w;

        p_world_new(s, raw, &w, "fence", 5000000);
        p_id(id, &w, "PAY", k);
        p_draft(s, &w, id, "100.00");
        d = p_decide_now(s, id);
        c = p_claim_req(&d, "worker-7");
        switch (k) {
        case 0: { /* beneficiary suspended */
            og_payout_beneficiary_record b = {
                w.ben, w.tenant, true, OG_PAYOUT_BENEFICIARY_SUSPENDED};
            p_put_ok(og_payout_beneficiary_put(s, &b, 1, &pr), pr, "ben");
            break;
        }
        case 1: { /* destination changed */
            og_payout_destination_record dr = {w.dst, w.ben, "tok_ROTATED_1"};
            p_put_ok(og_payout_destination_put(s, &dr, 1, &pr), pr, "dst");
            break;
        }
        case 2: { /* tenant suspended */
            og_payout_tenant_settings t = {w.tenant, true, 5000000, "EUR", 0};
            p_put_ok(og_payout_tenant_put(s, &t, 1, &pr), pr, "tenant");
            break;
        }
        default: /* payout cancelled */
            assert_int_equal(og_payout_cancel(s, id,
                                              d.executable_payout_version,
                                              "clerk-22", &pr),
                             0);
            assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
            break;
        }
        was = p_get(s, id);
        p_counts(raw, before);
        assert_int_equal(p_claim(s, &c).outcome,
                         OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
        p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
        assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
        assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);
    }
    /* a policy other than the current one is a changed context too */
    {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        p_world w;

        p_world_new(s, raw, &w, "fencep", 5000000);
        p_id(id, &w, "PAY", 9);
        p_draft(s, &w, id, "100.00");
        d = p_decide_now(s, id);
        c = p_claim_req(&d, "worker-7");
        c.policy_version = "oncegate-payout-policy/0";
        assert_int_equal(p_claim(s, &c).outcome,
                         OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
        c = p_claim_req(&d, "worker-7");
        assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CLAIMED);
    }
    t_raw_close(raw);
    og_store_free(s);
}

void expired_or_revoked_grant_is_not_claimed(void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pexp", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "exp", 5000000);
    for (int k = 0; k < 3; k++) {
        char id[64];
        og_payout_claim_req c;
        og_payout_decision d;
        og_payout_view was;
        int64_t before[P_CLAIM_TABLES];

        p_id(id, &w, "PAY", k);
        p_draft(s, &w, id, "10.00");
        og_payout_claim_outcome want = OG_PAYOUT_CLAIM_EXPIRED;

        if (k == 0) { /* expired */
            d = p_decide_window_past(s, id, 60);
        } else if (k == 1) { /* revoked: a finance hold */
            og_revoke_outcome ro;

            d = p_decide_now(s, id);
            assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "ops-7",
                                                    &ro),
                             0);
            assert_int_equal(ro, OG_REVOKE_REVOKED);
            want = OG_PAYOUT_CLAIM_REVOKED;
        } else { /* not yet valid: the release batch is later */
            og_payout_decide_req r = p_req(id);

            d = p_decide(s, &r);
            assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
        }
        c = p_claim_req(&d, "worker-7");
        was = p_get(s, id);
        p_counts(raw, before);
        assert_int_equal(p_claim(s, &c).outcome, want);
        p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ---- concurrent claims ---------------------------------------------------- */
#define CLAIM_RACERS 6
#define CLAIM_THREAD_ROUNDS 6
#define CLAIM_PROC_ROUNDS 3

typedef struct claim_race {
    og_store *stores[2];
    pthread_barrier_t start;
    og_payout_claim_req req;
    og_payout_claim_result r[CLAIM_RACERS];
    int rc[CLAIM_RACERS], next;
    pthread_mutex_t mu;
} claim_race;

static void *claim_racer_main(void *arg)
{
    claim_race *cr = arg;
    int i;

    pthread_mutex_lock(&cr->mu);
    i = cr->next++;
    pthread_mutex_unlock(&cr->mu);
    pthread_barrier_wait(&cr->start);
    cr->rc[i] = og_payout_claim(cr->stores[i % 2], &cr->req, &cr->r[i]);
    return NULL;
}

/* What a round proves, from the store's rows: exactly one attempt for the
 * grant, the payout Executing with it, one "claimed" entry. */
static void claim_round_check(t_raw *raw, const char *id,
                              const og_payout_decision *d, int claimed)
{
    char where[1024];

    assert_int_equal(claimed, 1);
    snprintf(where, sizeof where, "issuer = 'payouts' AND grant_id = '%s'",
             d->grant_id);
    assert_int_equal(p_count(raw, "operations", where), 1);
    snprintf(where, sizeof where, "payout_id = '%s' AND kind = 'claimed'", id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND state = 'Executing' AND active_attempt = "
             "(SELECT operation_id FROM operations WHERE grant_id = '%s')",
             id, d->grant_id);
    assert_int_equal(p_count(raw, "payouts", where), 1);
}

void concurrent_claims_of_one_grant_make_exactly_one_attempt(
    void **state)
{
    char url[4200];
    og_store *s = t_fresh_store("pclrace", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "clrace", 500000000);
    /* threads, two store objects */
    for (int round = 0; round < CLAIM_THREAD_ROUNDS; round++) {
        char id[64];
        pthread_t th[CLAIM_RACERS];
        claim_race cr;
        og_payout_decision d;
        int claimed = 0;

        memset(&cr, 0, sizeof cr);
        p_id(id, &w, "PAYT", round);
        p_draft(s, &w, id, "10.00");
        d = p_decide_now(s, id);
        cr.req = p_claim_req(&d, "worker-race");
        cr.stores[0] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
        cr.stores[1] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
        pthread_mutex_init(&cr.mu, NULL);
        pthread_barrier_init(&cr.start, NULL, CLAIM_RACERS);
        for (int i = 0; i < CLAIM_RACERS; i++)
            assert_int_equal(
                pthread_create(&th[i], NULL, claim_racer_main, &cr), 0);
        for (int i = 0; i < CLAIM_RACERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < CLAIM_RACERS; i++) {
            if (cr.rc[i] != 0)
                fail_msg("round %d racer %d: %s", round, i,
                         og_err_name(cr.rc[i]));
            if (cr.r[i].outcome == OG_PAYOUT_CLAIM_CLAIMED)
                claimed++;
            else /* the loser's delivery is a duplicate of the winner's */
                assert_int_equal(cr.r[i].outcome, OG_PAYOUT_CLAIM_DUPLICATE);
        }
        claim_round_check(raw, id, &d, claimed);
        pthread_barrier_destroy(&cr.start);
        pthread_mutex_destroy(&cr.mu);
        og_store_free(cr.stores[0]);
        og_store_free(cr.stores[1]);
    }
    /* separate processes, each with its own store object */
    for (int round = 0; round < CLAIM_PROC_ROUNDS; round++) {
        char id[64];
        og_payout_decision d;
        og_payout_claim_req req;
        int *outcomes, claimed = 0;
        pid_t pid[CLAIM_RACERS];

        p_id(id, &w, "PAYP", round);
        p_draft(s, &w, id, "10.00");
        d = p_decide_now(s, id);
        req = p_claim_req(&d, "worker-proc");
        outcomes = mmap(NULL, sizeof(int) * CLAIM_RACERS,
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
        assert_true(outcomes != MAP_FAILED);
        for (int i = 0; i < CLAIM_RACERS; i++) {
            outcomes[i] = -1000;
            pid[i] = fork();
            assert_true(pid[i] >= 0);
            if (pid[i] == 0) {
                og_store *cs = t_store_url(url, 1, P_RACE_TIMEOUT_MS);
                og_payout_claim_result r;
                int rc = og_payout_claim(cs, &req, &r);

                outcomes[i] = rc != 0 ? rc : (int)r.outcome;
                og_store_free(cs);
                _exit(0);
            }
        }
        for (int i = 0; i < CLAIM_RACERS; i++) {
            int st = 0;

            assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
            assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            if (outcomes[i] < 0)
                fail_msg("process %d: %s", i, og_err_name(outcomes[i]));
            if (outcomes[i] == OG_PAYOUT_CLAIM_CLAIMED)
                claimed++;
            else
                assert_int_equal(outcomes[i], OG_PAYOUT_CLAIM_DUPLICATE);
        }
        claim_round_check(raw, id, &d, claimed);
        munmap(outcomes, sizeof(int) * CLAIM_RACERS);
    }
    t_raw_close(raw);
    og_store_free(s);
}
