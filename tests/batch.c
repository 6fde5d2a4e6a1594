/*
 * batch.c — the group commit of admissions (docs/design.md, "Group
 * commit"), on both engines and in both grant forms:
 *
 *   conformance sqlite|postgres batch [token|row]
 *
 * A batch is built deterministically with og__admit_batch (the test hook:
 * the given admissions as ONE batch, lib/store/store_int.h); the queue that
 * coalesces og_admit callers is exercised by many callers on one store
 * object. Every claim here compares a batched answer with what the one-row
 * path answers (an og_admit on a store object whose batches hold one
 * admission), or with the store's rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "batch_harness.h"
#include "store/store_int.h" /* og__admit_batch: a batch built by the test */

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static const char *const b_revokers[] = {"supervisor-3"};
static const og_revoke_policy b_policy = {b_revokers, 1};

/* A store object on the suite's store whose batches hold at most batch_max
 * admissions (1: the one-row path). */
static og_store *b_store(int batch_max, int pool)
{
    og_store_options o;

    t_batch_options(&o, pool);
    o.admit_batch_max = batch_max;
    return t_batch_store(&o);
}

/* A case with a family (NULL: none) and an expiry, NOT issued. */
static void b_case(t_case *c, const char *family, int64_t expires_at_us)
{
    memset(c, 0, sizeof *c);
    t_grant_id(c->grant_id, sizeof c->grant_id);
    t_uuid(c->op);
    c->g = (og_grant){ISSUER, c->grant_id, expires_at_us, family, t_form};
    c->in = (og_intent){c->op, "agent-17", "A-1187", "250.00", "USD"};
}

static og_admission b_admit(og_store *s, const t_case *c)
{
    og_admission a;

    assert_int_equal(og_admit(s, &c->g, &c->in, &a), 0);
    return a;
}

/* ===========================================================================
 * A mixed batch answers as the one-row path does
 * ========================================================================= */
enum {
    MIX_FRESH,
    MIX_REPLAYED,       /* admitted before by another operation */
    MIX_SAME_OPERATION, /* admitted before by this very operation */
    MIX_REVOKED,
    MIX_EXPIRED,
    MIX_FAMILY_REVOKED,
    MIX_FAMILY_LIVE,
    MIX_MISMATCH,       /* this operation id, another amount */
    MIX_FRESH2,
    MIX_OP_TAKEN,       /* its operation id holds another grant's operation */
    MIX_N
};

typedef struct b_mix {
    t_case c[MIX_N];
    og_grant g[MIX_N];
    og_intent in[MIX_N];
    char fam[2][32]; /* the revoked family, the live one */
} b_mix;

/* Builds the state of every case of the mix on s: what the batch then
 * meets. */
static void b_mix_new(og_store *s, b_mix *m)
{
    int64_t later = t_now_us() + 15 * 60 * SEC;
    og_revoke_outcome ro;
    og_strv list = {0};
    og_revocation rv;
    t_case other, prior;

    memset(m, 0, sizeof *m);
    t_batch_family(m->fam[0], sizeof m->fam[0]);
    t_batch_family(m->fam[1], sizeof m->fam[1]);
    for (int i = 0; i < MIX_N; i++)
        b_case(&m->c[i], NULL, later);
    b_case(&m->c[MIX_EXPIRED], NULL, t_now_us() - 3600 * SEC);
    m->c[MIX_FAMILY_REVOKED].g.family = m->fam[0];
    m->c[MIX_FAMILY_LIVE].g.family = m->fam[1];
    for (int i = 0; i < MIX_N; i++)
        if (t_form == OG_FORM_ROW && i != MIX_FAMILY_REVOKED &&
            i != MIX_FAMILY_LIVE)
            t_batch_issue(s, ISSUER, &m->c[i]);

    /* The family cases. A family exists once a grant is issued into it;
     * in token form the revoked family's case itself is not issued (its
     * family, not a revocation of its key, blocks it). */
    t_batch_issue(s, ISSUER, &m->c[MIX_FAMILY_LIVE]);
    if (t_form == OG_FORM_ROW) {
        t_batch_issue(s, ISSUER, &m->c[MIX_FAMILY_REVOKED]);
    } else {
        b_case(&other, m->fam[0], later);
        t_batch_issue(s, ISSUER, &other);
    }
    assert_int_equal(og_family_revoke(s, &b_policy, ISSUER, m->fam[0],
                                      "supervisor-3", &ro, &list), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    og_strv_free(&list);

    /* Replayed: admitted by another operation first. */
    prior = m->c[MIX_REPLAYED];
    t_uuid(prior.op);
    prior.in.operation_id = prior.op;
    assert_int_equal(b_admit(s, &prior).outcome, OG_OUTCOME_ADMITTED);
    /* Same operation, same binding: admitted first. */
    assert_int_equal(b_admit(s, &m->c[MIX_SAME_OPERATION]).outcome,
                     OG_OUTCOME_ADMITTED);
    /* Mismatch: admitted by this operation id for another amount. */
    prior = m->c[MIX_MISMATCH];
    prior.in.amount = "999.00";
    assert_int_equal(b_admit(s, &prior).outcome, OG_OUTCOME_ADMITTED);
    /* Revoked. */
    rv = (og_revocation){ISSUER, m->c[MIX_REVOKED].grant_id, "supervisor-3",
                         m->c[MIX_REVOKED].g.expires_at_us, t_form};
    assert_int_equal(og_revoke(s, &b_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    /* Operation id taken: another grant's operation holds it. */
    b_case(&other, NULL, later);
    t_issue(&other.g, &other.in);
    memcpy(other.op, m->c[MIX_OP_TAKEN].op, sizeof other.op);
    other.in.operation_id = other.op;
    assert_int_equal(b_admit(s, &other).outcome, OG_OUTCOME_ADMITTED);

    for (int i = 0; i < MIX_N; i++) {
        m->g[i] = m->c[i].g;
        m->in[i] = m->c[i].in;
        m->in[i].operation_id = m->c[i].op;
    }
}

/* What the one-row path answers for each case, explicitly. */
static void b_mix_expect(int i, const og_admission *a)
{
    switch (i) {
    case MIX_FRESH:
    case MIX_FRESH2:
    case MIX_FAMILY_LIVE:
        assert_int_equal(a->outcome, OG_OUTCOME_ADMITTED);
        break;
    case MIX_SAME_OPERATION:
        assert_int_equal(a->outcome, OG_OUTCOME_ALREADY_ADMITTED);
        break;
    case MIX_REPLAYED:
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, OG_REFUSAL_GRANT_SPENT);
        break;
    case MIX_REVOKED:
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, OG_REFUSAL_GRANT_REVOKED);
        break;
    case MIX_EXPIRED:
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, OG_REFUSAL_DEADLINE_PASSED);
        break;
    case MIX_FAMILY_REVOKED:
        /* token form: the family blocks the claim (AD4); row form: the
         * family's revocation revoked the issued row */
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, t_form == OG_FORM_ROW
                                         ? OG_REFUSAL_GRANT_REVOKED
                                         : OG_REFUSAL_FAMILY_REVOKED);
        break;
    case MIX_MISMATCH:
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, OG_REFUSAL_OPERATION_MISMATCH);
        break;
    case MIX_OP_TAKEN:
        assert_int_equal(a->outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a->refusal, OG_REFUSAL_OPERATION_ID_TAKEN);
        break;
    default:
        fail();
    }
}

/* The binding an answer carries, compared between two twins' answers
 * (their ids differ; everything the request bound must not). */
static void b_same_answer(const og_admission *a, const og_admission *b)
{
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->refusal, b->refusal);
    if (a->outcome == OG_OUTCOME_REFUSED)
        return;
    assert_string_equal(a->operation.caller_id, b->operation.caller_id);
    assert_string_equal(a->operation.account_id, b->operation.account_id);
    assert_string_equal(a->operation.amount, b->operation.amount);
    assert_string_equal(a->operation.currency, b->operation.currency);
    assert_int_equal(a->operation.status, b->operation.status);
    assert_int_equal(a->operation.owner_version, b->operation.owner_version);
    assert_int_equal(a->operation.kind, b->operation.kind);
}

/* Runs the mix (cases first..last-1 of it) as one batch and, on a twin
 * built alike, through the one-row path; compares every answer with the
 * twin's and with the explicit expectation. Returns the store's fallbacks
 * during the batch. */
static uint64_t b_mix_run(int first, int last)
{
    og_store *s = b_store(64, 4), *one = b_store(1, 2);
    b_mix *m = calloc(1, sizeof *m), *twin = calloc(1, sizeof *twin);
    og_admission out[MIX_N], alone;
    og_admit_stats before, after;
    int rcs[MIX_N], n = last - first;

    assert_non_null(m);
    assert_non_null(twin);
    b_mix_new(s, m);
    b_mix_new(one, twin);
    og_store_admit_stats(s, &before);
    assert_int_equal(og__admit_batch(s, n, &m->g[first], &m->in[first], out,
                                     rcs), 0);
    og_store_admit_stats(s, &after);
    assert_true(after.batches == before.batches + 1);
    assert_true(after.rows == before.rows + (uint64_t)n);
    for (int i = 0; i < n; i++) {
        if (rcs[i] != 0)
            fprintf(stderr, "row %d: %s\n", first + i, og_err_name(rcs[i]));
        assert_int_equal(rcs[i], 0);
        b_mix_expect(first + i, &out[i]);
        assert_int_equal(og_admit(one, &twin->g[first + i],
                                  &twin->in[first + i], &alone), 0);
        b_same_answer(&out[i], &alone);
        if (out[i].outcome != OG_OUTCOME_REFUSED) {
            assert_string_equal(out[i].operation.operation_id,
                                m->in[first + i].operation_id);
            assert_string_equal(out[i].operation.grant_id,
                                m->g[first + i].grant_id);
        }
    }
    /* Each admitted row's claim and operation hold: a replay of the same
     * request now answers ALREADY_ADMITTED with the same record. */
    for (int i = 0; i < n; i++) {
        if (out[i].outcome != OG_OUTCOME_ADMITTED)
            continue;
        alone = b_admit(s, &(t_case){.g = m->g[first + i],
                                     .in = m->in[first + i]});
        assert_int_equal(alone.outcome, OG_OUTCOME_ALREADY_ADMITTED);
        assert_true(alone.operation.created_at_us ==
                    out[i].operation.created_at_us);
    }
    free(m);
    free(twin);
    og_store_free(one);
    og_store_free(s);
    return after.fallbacks - before.fallbacks;
}

static void mixed_batch_answers_as_the_one_row_path(void **state)
{
    (void)state;
    /* Every case but the taken operation id: ONE statement, no fallback. */
    assert_true(b_mix_run(0, MIX_OP_TAKEN) == 0);
}

static void batch_with_a_taken_operation_id_falls_back_row_by_row(void **state)
{
    uint64_t fallbacks;

    (void)state;
    /* The whole mix: the taken id aborts PostgreSQL's statement (a unique
     * violation on operations), and the round falls back to one statement
     * per row: every row still answers as alone, the offending one refused
     * operation_id_taken. SQLite's savepoints keep it to its own row. */
    fallbacks = b_mix_run(0, MIX_N);
    assert_true(fallbacks == (t_kind == T_POSTGRES ? 1u : 0u));
}

/* ===========================================================================
 * An unconfirmed commit answers every row unavailable
 * ========================================================================= */
static void unconfirmed_batch_commit_is_unavailable_for_every_row(void **state)
{
    og_store *s;
    t_case c[4];
    og_grant g[4];
    og_intent in[4];
    og_admission out[4], a;
    int rcs[4];

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    s = b_store(64, 4);
    for (int i = 0; i < 4; i++) {
        t_case_new(&c[i]); /* issued in row form */
        g[i] = c[i].g;
        in[i] = c[i].in;
    }
    /* Row 3 is a replay: its answer would come from a key it did not
     * claim. */
    assert_int_equal(b_admit(s, &c[3]).outcome, OG_OUTCOME_ADMITTED);
    t_uuid(c[3].op);
    in[3].operation_id = c[3].op;

    setenv("OG_FAULT", "admit_batch_ack_lost", 1);
    assert_int_equal(og__admit_batch(s, 4, g, in, out, rcs), 0);
    unsetenv("OG_FAULT");
    for (int i = 0; i < 4; i++)
        assert_int_equal(rcs[i], OG_ESTORE_UNAVAILABLE);
    /* The commit stayed: a retry with the same operation id finds out. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(og_admit(s, &g[i], &in[i], &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    }
    assert_int_equal(og_admit(s, &g[3], &in[3], &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    og_store_free(s);
}

/* ===========================================================================
 * Batches of two instances race on the same keys
 * ========================================================================= */
#define RACE_ROWS 16
#define RACE_ROUNDS 24

/* One round's grants, the same for both racers; op ids per racer (the
 * same for both on even rounds: the loser is the same operation). */
typedef struct b_round {
    char grant_id[RACE_ROWS][64];
    char ops[2][RACE_ROWS][OG_UUID_LEN + 1];
    int64_t expires_at_us;
    /* results, per racer and row */
    int rc[2][RACE_ROWS];
    int outcome[2][RACE_ROWS];
    int refusal[2][RACE_ROWS];
} b_round;

typedef struct b_race {
    b_round rounds[RACE_ROUNDS];
    volatile int arrived[RACE_ROUNDS]; /* the start line of each round */
} b_race;

static void b_race_new(void *ctx)
{
    b_race *r = ctx;

    memset(r, 0, sizeof *r);
    for (int k = 0; k < RACE_ROUNDS; k++) {
        b_round *d = &r->rounds[k];

        d->expires_at_us = t_now_us() + 15 * 60 * SEC;
        for (int i = 0; i < RACE_ROWS; i++) {
            t_case c;

            t_case_new_exp(&c, d->expires_at_us); /* issued in row form */
            memcpy(d->grant_id[i], c.grant_id, sizeof d->grant_id[i]);
            memcpy(d->ops[0][i], c.op, sizeof c.op);
            if (k % 2 == 0)
                memcpy(d->ops[1][i], c.op, sizeof c.op);
            else
                t_uuid(d->ops[1][i]);
        }
    }
}

/* Racer `who` (0 or 1) runs every round on store s, each round starting
 * when both arrived. */
static void b_race_run(void *ctx, int who, og_store *s)
{
    b_race *r = ctx;
    og_grant g[RACE_ROWS];
    og_intent in[RACE_ROWS];
    og_admission out[RACE_ROWS];

    for (int k = 0; k < RACE_ROUNDS; k++) {
        b_round *d = &r->rounds[k];

        for (int i = 0; i < RACE_ROWS; i++) {
            /* the other racer lists the rows backwards: the keys are
             * claimed in one order whatever the batch's (B6) */
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            g[i] = (og_grant){ISSUER, d->grant_id[j], d->expires_at_us, NULL,
                              t_form};
            in[i] = (og_intent){d->ops[who][j], "agent-17", "A-1187",
                                "250.00", "USD"};
        }
        t_race_start(&r->arrived[k]);
        int rcs[RACE_ROWS];
        if (og__admit_batch(s, RACE_ROWS, g, in, out, rcs) != 0)
            abort();
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            d->rc[who][j] = rcs[i];
            d->outcome[who][j] = rcs[i] == 0 ? (int)out[i].outcome : -1;
            d->refusal[who][j] = rcs[i] == 0 ? (int)out[i].refusal : -1;
        }
    }
}

/* Each grant admitted exactly once; the loser told already_admitted (same
 * operation) or grant_spent (another), and the store holds one claim and
 * one operation per grant. */
static void b_race_check(const void *ctx)
{
    const b_race *r = ctx;
    t_raw *raw = t_raw_open();

    for (int k = 0; k < RACE_ROUNDS; k++) {
        const b_round *d = &r->rounds[k];

        for (int i = 0; i < RACE_ROWS; i++) {
            int admitted = 0, loser;

            assert_int_equal(d->rc[0][i], 0);
            assert_int_equal(d->rc[1][i], 0);
            for (int w = 0; w < 2; w++)
                admitted += d->outcome[w][i] == OG_OUTCOME_ADMITTED;
            assert_int_equal(admitted, 1);
            loser = d->outcome[0][i] == OG_OUTCOME_ADMITTED ? 1 : 0;
            if (k % 2 == 0) {
                assert_int_equal(d->outcome[loser][i],
                                 OG_OUTCOME_ALREADY_ADMITTED);
            } else {
                assert_int_equal(d->outcome[loser][i], OG_OUTCOME_REFUSED);
                assert_int_equal(d->refusal[loser][i],
                                 OG_REFUSAL_GRANT_SPENT);
            }
            assert_true(t_raw_consumptions(raw, ISSUER, d->grant_id[i]) == 1);
            assert_true(t_raw_int(raw,
                                  "SELECT count(*) FROM operations"
                                  " WHERE issuer = '%s' AND grant_id = '%s'",
                                  ISSUER, d->grant_id[i]) == 1);
        }
    }
    t_raw_close(raw);
}

static t_race_def b_race_def = {sizeof(b_race), b_store, b_race_new, b_race_run,
                                b_race_check};

/* ===========================================================================
 * kill -9 in the middle of batches
 * ========================================================================= */
#define KILL_ROWS 8
#define KILL_MAX 4096

typedef struct b_killed {
    char prefix[32];
    int64_t expires_at_us;
    char grant_id[KILL_MAX][64];
    char op[KILL_MAX][OG_UUID_LEN + 1];
    int n;                           /* grants to admit */
    volatile int answered[KILL_MAX]; /* 1 + the outcome, once told */
    volatile int batches;
} b_killed;

/* Grants base.. as ONE batch; answered: 1 + the outcome. */
static int b_killed_batch(void *ctx, og_store *s, int base)
{
    b_killed *k = ctx;
    og_grant g[KILL_ROWS];
    og_intent in[KILL_ROWS];
    og_admission out[KILL_ROWS];
    int rcs[KILL_ROWS];

    for (int i = 0; i < KILL_ROWS; i++) {
        g[i] = (og_grant){ISSUER, k->grant_id[base + i], k->expires_at_us,
                          NULL, t_form};
        in[i] = (og_intent){k->op[base + i], "agent-17", "A-1187", "250.00",
                            "USD"};
    }
    if (og__admit_batch(s, KILL_ROWS, g, in, out, rcs) != 0)
        return -1;
    for (int i = 0; i < KILL_ROWS; i++)
        if (rcs[i] == 0)
            k->answered[base + i] = 1 + (int)out[i].outcome;
    return 0;
}

static void b_killed_child(void *ctx)
{
    b_killed *k = ctx;

    t_batches_until_killed(b_store(64, 2), k->n, KILL_ROWS, b_killed_batch, k,
                           &k->batches);
}

static void killed_batches_leave_no_half_admission(void **state)
{
    b_killed *k = t_shared_zeroed(sizeof *k);
    int n = t_form == OG_FORM_ROW ? 1024 : KILL_MAX; /* row form: issued */
    t_raw *raw;
    int told = 0;

    (void)state;
    snprintf(k->prefix, sizeof k->prefix, "kb%d", (int)getpid());
    k->expires_at_us = t_now_us() + 15 * 60 * SEC;
    k->n = n;
    for (int i = 0; i < KILL_MAX; i++) {
        snprintf(k->grant_id[i], sizeof k->grant_id[i], "%s-%d", k->prefix, i);
        t_uuid(k->op[i]);
        if (i < n && t_form == OG_FORM_ROW) {
            og_grant g = {ISSUER, k->grant_id[i], k->expires_at_us, NULL,
                          t_form};
            og_intent in = {k->op[i], "agent-17", "A-1187", "250.00", "USD"};
            t_issue(&g, &in);
        }
    }
    /* Kill it once it is admitting, at some point in a batch. */
    t_kill_midway(b_killed_child, k, &k->batches, 3, 7000);

    raw = t_raw_open();
    /* No claim without its operation, no operation without its claim. */
    if (t_form == OG_FORM_ROW) {
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grants g WHERE g.grant_id"
                              " LIKE '%s-%%' AND g.consumed_by_operation IS NOT"
                              " NULL AND NOT EXISTS (SELECT 1 FROM operations o"
                              " WHERE o.operation_id = g.consumed_by_operation"
                              " AND o.grant_id = g.grant_id)",
                              k->prefix) == 0);
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM operations o WHERE"
                              " o.grant_id LIKE '%s-%%' AND NOT EXISTS (SELECT"
                              " 1 FROM grants g WHERE g.issuer = o.issuer AND"
                              " g.grant_id = o.grant_id AND"
                              " g.consumed_by_operation = o.operation_id)",
                              k->prefix) == 0);
    } else if (t_keys != OG_KEYS_HASHED) {
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grant_consumptions c WHERE"
                              " c.grant_id LIKE '%s-%%' AND NOT EXISTS (SELECT"
                              " 1 FROM operations o WHERE o.operation_id ="
                              " c.operation_id AND o.grant_id = c.grant_id)",
                              k->prefix) == 0);
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM operations o WHERE"
                              " o.grant_id LIKE '%s-%%' AND NOT EXISTS (SELECT"
                              " 1 FROM grant_consumptions c WHERE c.issuer ="
                              " o.issuer AND c.grant_id = o.grant_id AND"
                              " c.operation_id = o.operation_id)",
                              k->prefix) == 0);
    }
    /* Every answer the child was given before its death holds. */
    for (int i = 0; i < KILL_MAX; i++) {
        if (!k->answered[i])
            continue;
        told++;
        assert_int_equal(k->answered[i], 1 + OG_OUTCOME_ADMITTED);
        assert_true(t_raw_consumptions(raw, ISSUER, k->grant_id[i]) == 1);
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM operations WHERE"
                              " grant_id = '%s'",
                              k->grant_id[i]) == 1);
    }
    assert_true(told >= 3 * KILL_ROWS);
    t_raw_close(raw);
    munmap(k, sizeof *k);
}

/* ===========================================================================
 * The queue: many callers on one store object
 * ========================================================================= */
#define QUEUE_CALLERS 12
#define QUEUE_EACH 20

typedef struct b_queue_ctx {
    og_store *s;
    int admitted[QUEUE_CALLERS]; /* per caller */
} b_queue_ctx;

static void b_caller(void *ctx, int who)
{
    b_queue_ctx *q = ctx;

    for (int i = 0; i < QUEUE_EACH; i++) {
        t_case t;
        og_admission a;

        t_case_new(&t); /* issued in row form */
        if (og_admit(q->s, &t.g, &t.in, &a) == 0 &&
            a.outcome == OG_OUTCOME_ADMITTED)
            q->admitted[who]++;
    }
}

/* Many callers' admissions through one store object's queue: each is
 * admitted, every one counted in exactly one batch; with batches of one,
 * one batch per admission. */
static void b_queue(int batch_max)
{
    og_store *s = b_store(batch_max, 4);
    b_queue_ctx q = {s, {0}};
    og_admit_stats st;
    int total = 0;

    t_callers(QUEUE_CALLERS, b_caller, &q);
    for (int i = 0; i < QUEUE_CALLERS; i++)
        total += q.admitted[i];
    assert_int_equal(total, QUEUE_CALLERS * QUEUE_EACH);
    og_store_admit_stats(s, &st);
    assert_true(st.rows == (uint64_t)total);
    assert_true(st.batches >= 1 && st.batches <= st.rows);
    if (batch_max == 1)
        assert_true(st.batches == st.rows);
    assert_true(st.fallbacks == 0);
    og_store_free(s);
}

static void queued_callers_are_each_admitted_once(void **state)
{
    (void)state;
    b_queue(64);
    b_queue(1);
}

/* The cases the shared harness runs (batch_harness.h) carry this file's
 * description as their initial state. */
const struct CMUnitTest t_batch_tests[] = {
    cmocka_unit_test(mixed_batch_answers_as_the_one_row_path),
    cmocka_unit_test(batch_with_a_taken_operation_id_falls_back_row_by_row),
    cmocka_unit_test(unconfirmed_batch_commit_is_unavailable_for_every_row),
    {"batches_of_two_store_objects_race_on_the_same_keys",
     t_race_in_threads, NULL, NULL, &b_race_def},
    {"batches_of_two_processes_race_on_the_same_keys",
     t_race_in_processes, NULL, NULL, &b_race_def},
    cmocka_unit_test(killed_batches_leave_no_half_admission),
    cmocka_unit_test(queued_callers_are_each_admitted_once),
};
const size_t t_batch_tests_count =
    sizeof t_batch_tests / sizeof t_batch_tests[0];
