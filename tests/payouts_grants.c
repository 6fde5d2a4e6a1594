/*
 * payouts_grants.c — the payout store, what a decision issues: grants whose expiry or revocation releases
 * the reservation exactly once, jobs (the outbox is the queue), and the
 * provider token, a secret no decision, grant, job or event holds.
 * The conformance group payouts (payouts.c has the list).
 */
#include "payouts.h"

/* ===========================================================================
 * Grants: expiry and revocation release a reservation exactly once
 * ========================================================================= */

static int64_t p_released_events(t_raw *raw, const char *grant_id)
{
    return t_raw_int(raw,
                     "SELECT count(*) FROM payout_events WHERE grant_id = '%s'"
                     " AND kind = 'reservation-released'",
                     grant_id);
}

#define EXPIRY_JANITORS 4
#define EXPIRY_GRANTS 12

typedef struct janitor_run {
    og_store *s;
    pthread_barrier_t *start;
    og_payout_expiry_stats st;
    int rc;
} janitor_run;

static void *janitor_main(void *arg)
{
    janitor_run *j = arg;

    pthread_barrier_wait(j->start);
    j->rc = og_payout_expire_grants(j->s, 2, 100, &j->st);
    return NULL;
}

void unused_grant_expiry_releases_its_reservation_once(void **state)
{
    char url[4200], id[64], gone[EXPIRY_GRANTS][OG_ID_MAX + 1];
    og_store *s = t_fresh_store("pexpiry", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision expired, live, consumed;
    og_payout_expiry_stats st;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_store *js[2];
    janitor_run runs[EXPIRY_JANITORS];
    pthread_t th[EXPIRY_JANITORS];
    pthread_barrier_t start;
    int64_t released = 0;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "exp", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "100.00");
    expired = p_decide_window_past(s, id, 10); /* past leeway + margin */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "200.00");
    live = p_decide_allowed(s, id); /* its window lies ahead */
    p_id(id, &w, "PAY", 3);
    p_draft(s, &w, id, "400.00");
    consumed = p_decide_window_past(s, id, 10);
    p_consume(raw, consumed.grant_id); /* its reservation follows its attempt */
    assert_int_equal(p_reserved(raw, w.tenant), 70000);
    assert_int_equal(og_payout_grant_get(s, expired.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_EXPIRED);
    assert_int_equal(g.released_at_us, 0);

    /* One pass releases the unused expired grant's reservation, and only
     * it; a second pass finds nothing. */
    assert_int_equal(og_payout_expire_grants(s, 1, 10, &st), 0);
    assert_int_equal(st.grants, 1);
    assert_int_equal(st.batches, 2); /* a full batch of 1, then an empty */
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(og_payout_grant_get(s, expired.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_EXPIRED);
    assert_true(g.released_at_us > 0);
    assert_int_equal(p_count(raw, "payout_grants",
                             "release_cause = 'expired'"),
                     1);
    assert_int_equal(p_released_events(raw, expired.grant_id), 1);
    assert_int_equal(og_payout_expire_grants(s, 100, 10, &st), 0);
    assert_int_equal(st.grants, 0);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(og_payout_grant_get(s, consumed.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_int_equal(g.released_at_us, 0);
    assert_int_equal(og_payout_grant_get(s, live.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_ISSUED);

    /* Revoking it afterwards (unconsumed, so still revocable) releases
     * nothing again. */
    assert_int_equal(og_payout_grant_revoke(s, expired.grant_id, "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    assert_int_equal(p_released_events(raw, expired.grant_id), 1);

    /* Janitors in parallel, on two store objects: each expired grant's
     * reservation is released once. */
    for (int i = 0; i < EXPIRY_GRANTS; i++) {
        p_id(id, &w, "PAYX", i);
        p_draft(s, &w, id, "1.00");
        memcpy(gone[i], p_decide_window_past(s, id, 10).grant_id,
               sizeof gone[i]);
    }
    assert_int_equal(p_reserved(raw, w.tenant), 60000 + EXPIRY_GRANTS * 100);
    js[0] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
    js[1] = t_store_url(url, 4, P_RACE_TIMEOUT_MS);
    pthread_barrier_init(&start, NULL, EXPIRY_JANITORS);
    for (int i = 0; i < EXPIRY_JANITORS; i++) {
        runs[i] = (janitor_run){js[i % 2], &start, {0, 0}, 1};
        assert_int_equal(pthread_create(&th[i], NULL, janitor_main, &runs[i]),
                         0);
    }
    for (int i = 0; i < EXPIRY_JANITORS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(runs[i].rc, 0);
        released += runs[i].st.grants;
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(released, EXPIRY_GRANTS);
    assert_int_equal(p_reserved(raw, w.tenant), 60000);
    for (int i = 0; i < EXPIRY_GRANTS; i++)
        assert_int_equal(p_released_events(raw, gone[i]), 1);
    og_store_free(js[0]);
    og_store_free(js[1]);
    t_raw_close(raw);
    og_store_free(s);
}

void revoked_grant_releases_its_reservation_and_cannot_be_presented(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_decision d, other;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_consume_result cr;
    og_admission a;
    char id[64], op[OG_UUID_LEN + 1], where[1024];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "revoke", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(p_reserved(raw, w.tenant), 425000);

    /* A finance hold: revoked, and its reservation released with it. */
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1", &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_REVOKED);
    assert_true(g.revoked_at_us > 0 && g.released_at_us == g.revoked_at_us);
    snprintf(where, sizeof where,
             "grant_id = '%s' AND release_cause = 'revoked'", d.grant_id);
    assert_int_equal(p_count(raw, "payout_grants", where), 1);
    snprintf(where, sizeof where,
             "grant_id = '%s' AND kind = 'grant-revoked' AND actor = 'finance-1'",
             d.grant_id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    assert_int_equal(p_released_events(raw, d.grant_id), 1);

    /* It cannot be presented: the row-form admission and the consume
     * verdict refuse it as revoked. */
    {
        og_grant gr = {OG_PAYOUT_ISSUER, d.grant_id, g.expires_at_us, NULL,
                       OG_FORM_ROW};
        og_intent in = {op, "payout-executor", id, "4250.00", "EUR"};

        t_uuid(op);
        assert_int_equal(og_admit(s, &gr, &in, &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
        assert_int_equal(og_consume(s, &gr, &cr), 0);
        assert_false(cr.consumed);
        assert_int_equal(cr.refusal, OG_REFUSAL_GRANT_REVOKED);
    }

    /* Once: a second hold changes nothing and releases nothing. */
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-2", &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 0);
    assert_int_equal(p_released_events(raw, d.grant_id), 1);

    /* A consumed grant is not revoked here, and its reservation stays with
     * its attempt. Not a payout grant: NOT_ISSUED. */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    other = p_decide_allowed(s, id);
    p_consume(raw, other.grant_id);
    assert_int_equal(og_payout_grant_revoke(s, other.grant_id, "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    assert_int_equal(p_reserved(raw, w.tenant), 1000);
    assert_int_equal(og_payout_grant_get(s, other.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_CONSUMED);
    assert_int_not_equal(g.consumed_by_operation[0], '\0');
    assert_int_equal(og_payout_grant_revoke(s, "no-such-grant", "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_NOT_ISSUED);
    assert_int_equal(og_payout_grant_get(s, "no-such-grant", &g), 0);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Jobs: the outbox is the queue
 * ========================================================================= */

static void p_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#define TAKERS 4

typedef struct taker {
    og_store *s;
    pthread_barrier_t *start;
    og_payout_job job;
    int rc;
} taker;

static void *taker_main(void *arg)
{
    taker *t = arg;

    pthread_barrier_wait(t->start);
    t->rc = og_payout_job_take(t->s, 60 * SEC, &t->job);
    return NULL;
}

void job_is_redelivered_after_its_delivery_lease_and_acknowledged_once(
    void **state)
{
    char url[4200], id[64];
    og_store *s = t_fresh_store("pjobs", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_job j, again;
    bool done = true;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "jobs", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);

    /* A delivery holds the job for its lease. */
    assert_int_equal(og_payout_job_take(s, 50000, &j), 1);
    assert_string_equal(j.job_id, d.job_id);
    assert_string_equal(j.payout_id, id);
    assert_string_equal(j.grant_id, d.grant_id);
    assert_string_equal(j.correlation_id, "COR-8812");
    assert_string_equal(j.resubmitted_from, "");
    assert_int_equal(j.delivery, 1);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 0);

    /* Its taker went quiet: the lease lapses and the job comes again. */
    p_sleep_ms(150);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 1);
    assert_string_equal(again.job_id, j.job_id);
    assert_int_equal(again.delivery, 2);

    /* The superseded delivery cannot acknowledge; the current one does,
     * once; an acknowledged job is never delivered again. */
    assert_int_equal(og_payout_job_ack(s, j.job_id, 1, &done), 0);
    assert_false(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_true(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_false(done);
    p_sleep_ms(150);
    assert_int_equal(og_payout_job_take(s, 50000, &again), 0);

    /* Postponed (context.unavailable): available again after the delay,
     * with a new delivery; the postponed delivery can no longer ack. */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &j), 1);
    assert_string_equal(j.job_id, d.job_id);
    assert_int_equal(og_payout_job_postpone(s, j.job_id, j.delivery, 0, &done),
                     0);
    assert_true(done);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &again), 1);
    assert_string_equal(again.job_id, j.job_id);
    assert_int_equal(again.delivery, 2);
    assert_int_equal(og_payout_job_postpone(s, j.job_id, 1, 0, &done), 0);
    assert_false(done);
    assert_int_equal(og_payout_job_ack(s, j.job_id, 2, &done), 0);
    assert_true(done);

    /* Concurrent takers on two store objects take different jobs. */
    {
        og_store *ts[2] = {t_store_url(url, 4, P_RACE_TIMEOUT_MS),
                           t_store_url(url, 4, P_RACE_TIMEOUT_MS)};
        pthread_barrier_t start;
        pthread_t th[TAKERS];
        taker tk[TAKERS];

        for (int i = 0; i < TAKERS; i++) {
            p_id(id, &w, "PAYT", i);
            p_draft(s, &w, id, "1.00");
            p_decide_allowed(s, id);
        }
        pthread_barrier_init(&start, NULL, TAKERS);
        for (int i = 0; i < TAKERS; i++) {
            memset(&tk[i], 0, sizeof tk[i]);
            tk[i].s = ts[i % 2];
            tk[i].start = &start;
            tk[i].rc = -1;
            assert_int_equal(pthread_create(&th[i], NULL, taker_main, &tk[i]),
                             0);
        }
        for (int i = 0; i < TAKERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        for (int i = 0; i < TAKERS; i++) {
            assert_int_equal(tk[i].rc, 1);
            assert_int_equal(tk[i].job.delivery, 1);
            for (int k = 0; k < i; k++)
                assert_string_not_equal(tk[i].job.job_id, tk[k].job.job_id);
        }
        assert_int_equal(og_payout_job_take(s, 60 * SEC, &again), 0);
        og_store_free(ts[0]);
        og_store_free(ts[1]);
    }
    t_raw_close(raw);
    og_store_free(s);
}

void resubmitted_job_points_at_the_same_grant(void **state)
{
    char url[4200], id[64], fresh[OG_UUID_LEN + 1], where[1024];
    og_store *s = t_fresh_store("presub", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_job j, copy;
    bool done = false;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "resub", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &j), 1);
    assert_int_equal(og_payout_job_ack(s, j.job_id, j.delivery, &done), 0);
    assert_true(done);

    /* An operator republishes it: a new job id, the same grant, payout and
     * correlation — a duplicate delivery for the worker to meet. */
    assert_int_equal(og_payout_job_resubmit(s, j.job_id, "ops-7", fresh), 1);
    assert_string_not_equal(fresh, j.job_id);
    assert_int_equal(og_payout_job_take(s, 60 * SEC, &copy), 1);
    assert_string_equal(copy.job_id, fresh);
    assert_string_equal(copy.grant_id, d.grant_id);
    assert_string_equal(copy.payout_id, id);
    assert_string_equal(copy.correlation_id, j.correlation_id);
    assert_string_equal(copy.resubmitted_from, j.job_id);
    assert_int_equal(copy.delivery, 1);
    /* authority did not change: one grant, still Issued */
    assert_int_equal(p_count_payout(raw, "payout_grants", id), 1);
    assert_int_equal(p_count_payout(raw, "payout_jobs", id), 2);
    snprintf(where, sizeof where,
             "payout_id = '%s' AND kind = 'job-resubmitted' AND job_id = '%s'"
             " AND grant_id = '%s' AND actor = 'ops-7'",
             id, fresh, d.grant_id);
    assert_int_equal(p_count(raw, "payout_events", where), 1);
    /* A job that does not exist: nothing. */
    t_uuid(fresh);
    assert_int_equal(og_payout_job_resubmit(s, fresh, "ops-7", fresh), 0);

    /* Keyed: the key is the new job's id; the same key again writes
     * nothing (2), whichever job it names. */
    {
        char key[OG_UUID_LEN + 1], got[OG_UUID_LEN + 1];

        t_uuid(key);
        assert_int_equal(
            og_payout_job_resubmit_keyed(s, j.job_id, key, "ops-7", got), 1);
        assert_string_equal(got, key);
        assert_int_equal(
            og_payout_job_resubmit_keyed(s, j.job_id, key, "ops-7", got), 2);
        assert_int_equal(
            og_payout_job_resubmit_keyed(s, copy.job_id, key, "ops-7", got),
            2);
        assert_int_equal(p_count_payout(raw, "payout_jobs", id), 3);
        snprintf(where, sizeof where,
                 "payout_id = '%s' AND kind = 'job-resubmitted'", id);
        assert_int_equal(p_count(raw, "payout_events", where), 2);
        assert_int_equal(
            og_payout_job_resubmit_keyed(s, fresh, key, "ops-7", got), 0);
        assert_int_equal(
            og_payout_job_resubmit_keyed(s, j.job_id, "nope", "ops-7", got),
            OG_EPAYOUT_JOB);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The provider token is a secret
 * ========================================================================= */

/* Whether needle's bytes occur anywhere in the n bytes at mem. */
static bool p_has(const void *mem, size_t n, const char *needle)
{
    const unsigned char *m = mem;
    size_t k = strlen(needle);

    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (memcmp(m + i, needle, k) == 0)
            return true;
    return false;
}

void no_destination_token_in_decisions_grants_jobs_or_events(
    void **state)
{
    static const char *const tables[] = {
        "payout_decisions", "payout_grants", "grants",        "payout_jobs",
        "payout_events",    "payouts",       "tenants",       "tenant_days",
        "beneficiaries",    "operations",    "grant_issuance",
        "operation_events"};
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    char id[64], fresh[OG_UUID_LEN + 1], token[OG_PAYOUT_TOKEN_MAX + 1];
    og_payout_put_result pr = {0, 0};
    og_payout_decide_req r;
    og_payout_decision d, denied;
    og_payout_snapshot snap;
    og_payout_grant_view g;
    og_revoke_outcome ro;
    og_payout_view v;
    og_payout_job j;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "secret", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_allowed(s, id);
    while (og_payout_job_take(s, 60 * SEC, &j) == 1) /* the store's queue */
        assert_false(p_has(&j, sizeof j, w.token));
    assert_int_equal(og_payout_job_resubmit(s, d.job_id, "ops-7", fresh), 1);
    assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1", &ro),
                     0);
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    r = p_req(id);
    r.requester_approval_limit = 1;
    denied = p_decide(s, &r);
    assert_int_equal(denied.verdict.outcome, OG_PAYOUT_ESCALATION_RECOMMENDED);
    assert_int_equal(og_payout_cancel(s, id, 1, "clerk-22", &pr), 0);
    /* an attempt: claimed, started and resolved, so the operations and
     * their events hold a payout's rows */
    {
        og_payout_decision dc;
        og_payout_claim_req cr;
        og_payout_claim_result c;
        og_op_outcome o = {OG_OP_SUCCEEDED, "provider.completed", "prv-81",
                           "worker-7", NULL};
        og_payout_resolution res;
        bool started = false;
        char id3[64];

        p_id(id3, &w, "PAY", 3);
        p_draft(s, &w, id3, "12.00");
        dc = p_decide_now(s, id3);
        cr = p_claim_req(&dc, "worker-7");
        c = p_claim(s, &cr);
        assert_int_equal(c.outcome, OG_PAYOUT_CLAIM_CLAIMED);
        assert_false(p_has(&c, sizeof c, w.token));
        assert_int_equal(og_op_start(s, c.attempt.operation_id, 1, "worker-7",
                                     &started),
                         0);
        assert_true(started);
        assert_int_equal(og_payout_resolve(s, c.attempt.operation_id,
                                           OG_OP_BIT(OG_OP_STARTED), 1, &o,
                                           &res),
                         0);
        assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);
        assert_false(p_has(&res, sizeof res, w.token));
        {
            char where[256];

            snprintf(where, sizeof where,
                     "operation_id = '%s' AND kind = 'payout'",
                     c.attempt.operation_id);
            assert_int_equal(p_count(raw, "operations", where), 1);
            snprintf(where, sizeof where, "operation_id = '%s'",
                     c.attempt.operation_id);
            assert_true(p_count(raw, "operation_events", where) >= 2);
        }
    }
    /* a rotation: the old and the new token */
    {
        char rotated[160];
        og_payout_destination_record dst = {w.dst, w.ben, rotated};

        snprintf(rotated, sizeof rotated, "%s-rotated", w.token);
        p_put_ok(og_payout_destination_put(s, &dst, 1, &pr), pr, "rotate");
    }

    /* No row of any other table holds it (the destination's does). */
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char *rows = p_rows_text(raw, tables[i], "1 = 1");

        assert_non_null(rows);
        if (strstr(rows, w.token))
            fail_msg("%s holds the provider token", tables[i]);
        free(rows);
    }
    {
        char where[1024], *rows;

        snprintf(where, sizeof where, "destination_id = '%s'", w.dst);
        rows = p_rows_text(raw, "destinations", where);
        assert_non_null(rows);
        assert_non_null(strstr(rows, w.token)); /* the scan sees it there */
        free(rows);
    }
    /* Nor does anything the API returns but the executor's read. */
    assert_false(p_has(&d, sizeof d, w.token));
    assert_false(p_has(&denied, sizeof denied, w.token));
    v = p_get(s, id);
    assert_false(p_has(&v, sizeof v, w.token));
    assert_int_equal(og_payout_context_read(s, id, t_now_us(), &snap), 0);
    assert_false(snap.ctx.unavailable);
    assert_false(p_has(&snap, sizeof snap, w.token));
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_false(p_has(&g, sizeof g, w.token));
    assert_int_equal(og_payout_destination_token(s, w.dst, 2, token,
                                                 sizeof token),
                     1);
    assert_non_null(strstr(token, w.token));
    assert_non_null(strstr(token, "-rotated"));
    /* only at the version the claim fenced */
    assert_int_equal(og_payout_destination_token(s, w.dst, 1, token,
                                                 sizeof token),
                     0);
    assert_int_equal(og_payout_destination_token(s, w.dst, 2, token, 8),
                     OG_EINVAL);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A payout's history, read back (og_payout_history)
 * ========================================================================= */

/* The index of the first entry of kind at or after from, or -1. */
static int p_event_at(const og_payout_events *e, size_t from, const char *kind)
{
    for (size_t i = from; i < e->n; i++)
        if (strcmp(e->v[i].kind, kind) == 0)
            return (int)i;
    return -1;
}

void payout_history_lists_every_step_in_order(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_events e = {NULL, 0};
    og_payout_decision d;
    og_payout_claim_req cr;
    og_payout_claim_result c;
    og_op_outcome o = {OG_OP_SUCCEEDED, "provider.completed", "prv-82",
                       "worker-7", NULL};
    og_payout_resolution res;
    char id[64];
    int k;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "history", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    d = p_decide_now(s, id);
    cr = p_claim_req(&d, "worker-7");
    c = p_claim(s, &cr);
    assert_int_equal(c.outcome, OG_PAYOUT_CLAIM_CLAIMED);
    assert_int_equal(og_payout_resolve(s, c.attempt.operation_id,
                                       OG_OP_BIT(OG_OP_ADMITTED), 1, &o, &res),
                     0);
    assert_int_equal(res.outcome, OG_PAYOUT_RESOLVE_RESOLVED);

    assert_int_equal(og_payout_history(s, id, &e), 0);
    /* as many entries as the store holds for it, oldest first */
    assert_int_equal((int64_t)e.n, p_count_payout(raw, "payout_events", id));
    assert_true(e.n >= 6);
    for (size_t i = 1; i < e.n; i++)
        assert_true(e.v[i].seq > e.v[i - 1].seq);
    assert_string_equal(e.v[0].kind, "drafted");
    assert_string_equal(e.v[0].actor, "clerk-22");
    assert_string_equal(e.v[0].to_state, "Draft");
    assert_true((k = p_event_at(&e, 0, "decided")) > 0);
    assert_string_equal(e.v[k].decision_id, d.decision_id);
    assert_string_equal(e.v[k].correlation_id, "COR-8812");
    assert_true((k = p_event_at(&e, 0, "reserved")) > 0);
    assert_true(e.v[k].has_amount);
    assert_int_equal(e.v[k].amount_minor, 425000);
    assert_string_equal(e.v[k].release_day, d.release_day);
    assert_true((k = p_event_at(&e, 0, "grant-issued")) > 0);
    assert_string_equal(e.v[k].grant_id, d.grant_id);
    assert_true((k = p_event_at(&e, 0, "job-queued")) > 0);
    assert_string_equal(e.v[k].job_id, d.job_id);
    assert_true((k = p_event_at(&e, (size_t)k, "claimed")) > 0);
    assert_string_equal(e.v[k].grant_id, d.grant_id);
    assert_string_equal(e.v[k].to_state, "Executing");
    assert_int_equal(p_event_at(&e, (size_t)k, "resolved"), (int)e.n - 1);
    assert_string_equal(e.v[e.n - 1].from_state, "Executing");
    assert_string_equal(e.v[e.n - 1].to_state, "Paid");
    assert_int_equal(e.v[e.n - 1].payout_version, res.payout_version);
    for (size_t i = 0; i < e.n; i++)
        assert_false(p_has(&e.v[i], sizeof e.v[i], w.token));
    og_payout_events_free(&e);
    og_payout_events_free(&e); /* freed twice: a no-op */

    /* no such payout: an empty history; a bad id: refused before I/O */
    assert_int_equal(og_payout_history(s, "PAY-none-at-all", &e), 0);
    assert_int_equal((int)e.n, 0);
    assert_null(e.v);
    assert_int_equal(og_payout_history(s, "bad id", &e), OG_EPAYOUT_ID);
    assert_int_equal(og_payout_history(s, id, NULL), OG_EINVAL);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Operators' statistics (og_payout_stats_read): held reservations per
 * tenant, the largest OG_PAYOUT_STATS_TENANTS named and the rest summed,
 * and the unconsumed grants by window — one snapshot that adds up.
 * ========================================================================= */

void payout_stats_count_held_reservations_and_unconsumed_grants(void **state)
{
    char url[4200], id[64], tag[32];
    og_store *s = t_fresh_store("pstats", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision consumed;
    og_payout_expiry_stats ex;
    og_payout_stats st;
    og_revoke_outcome ro;
    og_payout_decision open;
    p_world w, small;

    (void)state;
    assert_int_equal(og_payout_stats_read(NULL, &st), OG_EINVAL);
    assert_int_equal(og_payout_stats_read(s, NULL), OG_EINVAL);
    assert_int_equal(og_payout_stats_read(s, &st), 0); /* nothing yet */
    assert_int_equal(st.total.reservations, 0);
    assert_int_equal(st.total.reserved_minor, 0);
    assert_int_equal(st.n_tenants, 0);
    assert_int_equal(st.grants_pending + st.grants_open + st.grants_expired,
                     0);

    /* The big tenant: one grant of each window, and one consumed (its
     * reservation follows its attempt: held, not an unconsumed grant). */
    p_world_new(s, raw, &w, "stats", INT64_C(100000000));
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "1000.00");
    (void)p_decide_allowed(s, id); /* its window lies ahead */
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "2000.00");
    open = p_decide_now(s, id);
    p_id(id, &w, "PAY", 3);
    p_draft(s, &w, id, "4000.00");
    (void)p_decide_window_past(s, id, 10);
    p_id(id, &w, "PAY", 4);
    p_draft(s, &w, id, "8000.00");
    consumed = p_decide_window_past(s, id, 10);
    p_consume(raw, consumed.grant_id);
    /* More tenants than are named: the two smallest go to `other`. */
    for (int i = 0; i < OG_PAYOUT_STATS_TENANTS + 1; i++) {
        snprintf(tag, sizeof tag, "stats-%d", i);
        p_world_new(s, raw, &small, tag, INT64_C(100000000));
        p_id(id, &small, "PAY", 1);
        p_draft(s, &small, id, i < 2 ? "0.01" : "10.00");
        (void)p_decide_allowed(s, id);
    }

    assert_int_equal(og_payout_stats_read(s, &st), 0);
    assert_int_equal(st.total.reservations, 4 + OG_PAYOUT_STATS_TENANTS + 1);
    assert_int_equal(st.total.reserved_minor,
                     1500000 + (OG_PAYOUT_STATS_TENANTS - 1) * 1000 + 2);
    assert_int_equal(st.n_tenants, OG_PAYOUT_STATS_TENANTS);
    assert_string_equal(st.tenants[0].tenant_id, w.tenant);
    assert_int_equal(st.tenants[0].held.reservations, 4);
    assert_int_equal(st.tenants[0].held.reserved_minor, 1500000);
    for (int i = 1; i < st.n_tenants; i++)
        assert_int_equal(st.tenants[i].held.reserved_minor, 1000);
    assert_int_equal(st.other.reservations, 2);
    assert_int_equal(st.other.reserved_minor, 2);
    assert_int_equal(st.grants_pending, 1 + OG_PAYOUT_STATS_TENANTS + 1);
    assert_int_equal(st.grants_open, 1);
    assert_int_equal(st.grants_expired, 1);
    assert_int_equal(p_reserved(raw, w.tenant), 1500000);

    /* The janitor releases the expired grant, a hold the open one: each
     * leaves the statistics with its reservation. */
    assert_int_equal(og_payout_expire_grants(s, 10, 10, &ex), 0);
    assert_int_equal(ex.grants, 1);
    assert_int_equal(og_payout_grant_revoke(s, open.grant_id, "finance-1",
                                            &ro),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(og_payout_stats_read(s, &st), 0);
    assert_string_equal(st.tenants[0].tenant_id, w.tenant);
    assert_int_equal(st.tenants[0].held.reservations, 2);
    assert_int_equal(st.tenants[0].held.reserved_minor, 900000);
    assert_int_equal(st.grants_open, 0);
    assert_int_equal(st.grants_expired, 0);
    assert_int_equal(st.total.reserved_minor,
                     900000 + (OG_PAYOUT_STATS_TENANTS - 1) * 1000 + 2);
    t_raw_close(raw);
    og_store_free(s);
}
