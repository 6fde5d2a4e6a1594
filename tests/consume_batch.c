/*
 * consume_batch.c — the group commit of the consume verdict
 * (docs/design.md, "The consume verdict in batches"), on both engines, in
 * both grant forms and both consumption keys:
 *
 *   conformance sqlite|postgres consume-batch [token|row] [hashed]
 *
 * A batch is built deterministically with og__consume_batch (the test
 * hook: the given verdicts as ONE batch, lib/store/store_int.h); the queue
 * that coalesces og_consume callers is exercised by many callers on one
 * store object. Every claim compares a batched answer with what the
 * one-row path answers (og_consume on a store object whose batches hold
 * one verdict), or with the store's rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "batch_harness.h"
#include "store/store_int.h" /* og__consume_batch: a batch built by the test */

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static const char *const v_revokers[] = {"supervisor-3"};
static const og_revoke_policy v_policy = {v_revokers, 1};

/* A store object on the suite's store whose batches hold at most batch_max
 * verdicts (1: the one-row path). */
static og_store *v_store(int batch_max, int pool)
{
    og_store_options o;

    t_batch_options(&o, pool);
    o.admit_batch_max = batch_max;   /* SQLite's verdicts: its batches */
    o.consume_batch_max = batch_max; /* PostgreSQL's */
    return t_batch_store(&o);
}

/* The same verdicts, compared (two twins' families differ in name: each
 * answer's own is checked against its case by v_mix_expect). */
static void v_same(const og_consume_result *a, const og_consume_result *b)
{
    assert_int_equal(a->consumed, b->consumed);
    assert_int_equal(a->refusal, b->refusal);
    assert_int_equal(a->family[0] != '\0', b->family[0] != '\0');
}

/* ===========================================================================
 * A mixed batch answers as the one-row path does
 * ========================================================================= */
enum {
    MIX_FRESH,
    MIX_CONSUMED,       /* consumed before by the verdict */
    MIX_ADMITTED,       /* admitted before */
    MIX_REVOKED,
    MIX_EXPIRED,
    MIX_FAMILY_REVOKED,
    MIX_FAMILY_LIVE,
    MIX_NOT_ISSUED,     /* row form: no row; token form: fresh, never logged */
    MIX_FRESH2,
    MIX_N
};

typedef struct v_mix {
    t_case c[MIX_N];
    og_grant g[MIX_N];
    char fam[2][32]; /* the revoked family, the live one */
    og_consume_result out[MIX_N]; /* the batch's answers */
} v_mix;

/* Builds the state of every case on s: what the batch then meets. */
static void v_mix_new(og_store *s, void *mix)
{
    v_mix *m = mix;
    int64_t later = t_now_us() + 15 * 60 * SEC;
    og_revoke_outcome ro;
    og_strv list = {0};
    og_revocation rv;
    og_consume_result cr;
    og_admission a;

    memset(m, 0, sizeof *m);
    t_batch_family(m->fam[0], sizeof m->fam[0]);
    t_batch_family(m->fam[1], sizeof m->fam[1]);
    for (int i = 0; i < MIX_N; i++) {
        int64_t exp = i == MIX_EXPIRED ? t_now_us() - 3600 * SEC : later;

        memset(&m->c[i], 0, sizeof m->c[i]);
        t_grant_id(m->c[i].grant_id, sizeof m->c[i].grant_id);
        t_uuid(m->c[i].op);
        m->c[i].g = (og_grant){ISSUER, m->c[i].grant_id, exp,
                               i == MIX_FAMILY_REVOKED ? m->fam[0]
                               : i == MIX_FAMILY_LIVE  ? m->fam[1]
                                                       : NULL,
                               t_form};
        m->c[i].in = (og_intent){m->c[i].op, "agent-17", "A-1187", "250.00",
                                 "USD"};
        /* In token form the revoked family's case itself is not issued:
         * its family, not a revocation of its logged key, blocks it. */
        if (i != MIX_NOT_ISSUED &&
            (i != MIX_FAMILY_REVOKED || t_form == OG_FORM_ROW))
            t_batch_issue(s, ISSUER, &m->c[i]); /* families exist from here */
        m->g[i] = m->c[i].g;
    }
    if (t_form == OG_FORM_TOKEN) { /* the revoked family exists */
        t_case other;

        memset(&other, 0, sizeof other);
        t_grant_id(other.grant_id, sizeof other.grant_id);
        t_uuid(other.op);
        other.g = (og_grant){ISSUER, other.grant_id, later, m->fam[0], t_form};
        other.in = (og_intent){other.op, "agent-17", "A-1187", "250.00", "USD"};
        t_batch_issue(s, ISSUER, &other);
    }
    assert_int_equal(og_family_revoke(s, &v_policy, ISSUER, m->fam[0],
                                      "supervisor-3", &ro, &list), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    og_strv_free(&list);
    assert_int_equal(og_consume(s, &m->g[MIX_CONSUMED], &cr), 0);
    assert_true(cr.consumed);
    assert_int_equal(og_admit(s, &m->g[MIX_ADMITTED], &m->c[MIX_ADMITTED].in,
                              &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    rv = (og_revocation){ISSUER, m->c[MIX_REVOKED].grant_id, "supervisor-3",
                         m->c[MIX_REVOKED].g.expires_at_us, t_form};
    assert_int_equal(og_revoke(s, &v_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
}

/* What the one-row path answers for each case, explicitly. */
static void v_mix_expect(const v_mix *m, int i, const og_consume_result *r)
{
    switch (i) {
    case MIX_FRESH:
    case MIX_FRESH2:
        assert_true(r->consumed);
        assert_string_equal(r->family, "");
        break;
    case MIX_FAMILY_LIVE:
        assert_true(r->consumed);
        assert_string_equal(r->family, m->fam[1]);
        break;
    case MIX_NOT_ISSUED:
        if (t_form == OG_FORM_ROW) {
            assert_false(r->consumed);
            assert_int_equal(r->refusal, OG_REFUSAL_NOT_ISSUED);
        } else {
            assert_true(r->consumed); /* a verified token is the proof */
        }
        break;
    case MIX_CONSUMED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_CONSUMED);
        break;
    case MIX_ADMITTED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_SPENT);
        break;
    case MIX_REVOKED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_GRANT_REVOKED);
        break;
    case MIX_EXPIRED:
        assert_false(r->consumed);
        assert_int_equal(r->refusal, OG_REFUSAL_DEADLINE_PASSED);
        break;
    case MIX_FAMILY_REVOKED:
        /* token form: the family blocks the claim; row form: the family's
         * revocation revoked the issued row */
        assert_false(r->consumed);
        assert_int_equal(r->refusal, t_form == OG_FORM_ROW
                                         ? OG_REFUSAL_GRANT_REVOKED
                                         : OG_REFUSAL_FAMILY_REVOKED);
        break;
    default:
        fail();
    }
}

/* The whole mix as ONE batch on s. */
static int v_mix_batch(og_store *s, void *mix, int *rcs)
{
    v_mix *m = mix;

    return og__consume_batch(s, MIX_N, m->g, m->out, rcs);
}

/* Row i answered as expected, and as the twin's through the one-row
 * path. */
static void v_mix_row(void *mix, og_store *one, void *twin_mix, int i)
{
    v_mix *m = mix, *twin = twin_mix;
    og_consume_result alone;

    v_mix_expect(m, i, &m->out[i]);
    assert_int_equal(og_consume(one, &twin->g[i], &alone), 0);
    v_same(&m->out[i], &alone);
}

/* What the batch consumed stays consumed: asked again, denied. */
static void v_mix_after(og_store *s, void *mix, void *twin_mix)
{
    v_mix *m = mix;
    og_consume_result again;

    (void)twin_mix;
    for (int i = 0; i < MIX_N; i++) {
        if (!m->out[i].consumed)
            continue;
        assert_int_equal(og_consume(s, &m->g[i], &again), 0);
        assert_false(again.consumed);
        assert_int_equal(again.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
}

/* The mix as one batch against the one-row path (t_mix_def). */
static t_mix_def v_mix_def = {sizeof(v_mix), MIX_N, v_store, og__consume_stats,
                              v_mix_new, v_mix_batch, v_mix_row, v_mix_after,
                              "consume_batch_abort"};

/* ===========================================================================
 * An unconfirmed commit answers every row unavailable
 * ========================================================================= */
static void unconfirmed_verdict_batch_is_unavailable_for_every_row(void **state)
{
    og_store *s;
    t_case c[4];
    og_grant g[4];
    og_consume_result out[4], r;
    int rcs[4];

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip();
    s = v_store(64, 4);
    for (int i = 0; i < 4; i++) {
        t_case_new(&c[i]);
        g[i] = c[i].g;
    }
    /* Row 3 was consumed before: its denial is read from a key the batch
     * did not claim. */
    assert_int_equal(og_consume(s, &g[3], &r), 0);
    assert_true(r.consumed);

    setenv("OG_FAULT", "consume_batch_ack_lost", 1);
    assert_int_equal(og__consume_batch(s, 4, g, out, rcs), 0);
    unsetenv("OG_FAULT");
    for (int i = 0; i < 4; i++)
        assert_int_equal(rcs[i], OG_ESTORE_UNAVAILABLE);
    /* The commit stayed: each grant is spent, by the verdict. */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(og_consume(s, &g[i], &r), 0);
        assert_false(r.consumed);
        assert_int_equal(r.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
    og_store_free(s);
}

/* ===========================================================================
 * Batches of two instances race on the same keys
 * ========================================================================= */
#define RACE_ROWS 16
#define RACE_ROUNDS 24

typedef struct v_race {
    char grant_id[RACE_ROUNDS][RACE_ROWS][64];
    int64_t expires_at_us;
    int rc[RACE_ROUNDS][2][RACE_ROWS];
    int consumed[RACE_ROUNDS][2][RACE_ROWS];
    int refusal[RACE_ROUNDS][2][RACE_ROWS];
    volatile int arrived[RACE_ROUNDS]; /* the start line of each round */
} v_race;

static void v_race_new(void *ctx)
{
    v_race *r = ctx;

    memset(r, 0, sizeof *r);
    r->expires_at_us = t_now_us() + 15 * 60 * SEC;
    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            t_case c;

            t_case_new_exp(&c, r->expires_at_us);
            memcpy(r->grant_id[k][i], c.grant_id, sizeof r->grant_id[k][i]);
        }
}

/* Racer who (0 or 1) runs every round on s, each round starting when both
 * arrived; the other racer lists the rows backwards (CB6). */
static void v_race_run(void *ctx, int who, og_store *s)
{
    v_race *r = ctx;
    og_grant g[RACE_ROWS];
    og_consume_result out[RACE_ROWS];
    int rcs[RACE_ROWS];

    for (int k = 0; k < RACE_ROUNDS; k++) {
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            g[i] = (og_grant){ISSUER, r->grant_id[k][j], r->expires_at_us,
                              NULL, t_form};
        }
        t_race_start(&r->arrived[k]);
        if (og__consume_batch(s, RACE_ROWS, g, out, rcs) != 0)
            abort();
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            r->rc[k][who][j] = rcs[i];
            r->consumed[k][who][j] = rcs[i] == 0 && out[i].consumed;
            r->refusal[k][who][j] = rcs[i] == 0 ? (int)out[i].refusal : -1;
        }
    }
}

/* Each grant consumed exactly once; the loser told grant_consumed; the
 * store holds one claim per grant. */
static void v_race_check(const void *ctx)
{
    const v_race *r = ctx;
    t_raw *raw = t_raw_open();

    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            int loser;

            assert_int_equal(r->rc[k][0][i], 0);
            assert_int_equal(r->rc[k][1][i], 0);
            assert_int_equal(r->consumed[k][0][i] + r->consumed[k][1][i], 1);
            loser = r->consumed[k][0][i] ? 1 : 0;
            assert_int_equal(r->refusal[k][loser][i],
                             OG_REFUSAL_GRANT_CONSUMED);
            assert_true(t_raw_consumptions(raw, ISSUER, r->grant_id[k][i]) ==
                        1);
        }
    t_raw_close(raw);
}

static t_race_def v_race_def = {sizeof(v_race), v_store, v_race_new, v_race_run,
                                v_race_check};

/* ===========================================================================
 * The queue: many callers on two store objects, the same grants
 * ========================================================================= */
#define QUEUE_CALLERS 8
#define QUEUE_GRANTS 24

typedef struct v_queue {
    t_case c[QUEUE_GRANTS];
} v_queue;

static void v_queue_new(void *ctx, og_store *s)
{
    v_queue *q = ctx;

    (void)s;
    for (int i = 0; i < QUEUE_GRANTS; i++)
        t_case_new(&q->c[i]);
}

/* A grant is consumed once: the caller that consumed it won it; the
 * others are told grant_consumed. */
static int v_queue_call(void *ctx, og_store *s, int i)
{
    v_queue *q = ctx;
    og_consume_result r;

    if (og_consume(s, &q->c[i].g, &r) != 0)
        return -1;
    if (r.consumed)
        return 1;
    return r.refusal == OG_REFUSAL_GRANT_CONSUMED ? 0 : -1;
}

/* One claim per grant. */
static void v_queue_check(void *ctx, t_raw *raw, int i)
{
    v_queue *q = ctx;

    assert_true(t_raw_consumptions(raw, ISSUER, q->c[i].grant_id) == 1);
}

static t_queue_def v_queue_def = {sizeof(v_queue), QUEUE_CALLERS, QUEUE_GRANTS,
                                  v_store, og__consume_stats, v_queue_new,
                                  v_queue_call, v_queue_check};

/* ===========================================================================
 * kill -9 in the middle of batches
 * ========================================================================= */
#define KILL_ROWS 8
#define KILL_MAX 2048

typedef struct v_killed {
    char prefix[32];
    int64_t expires_at_us;
    char grant_id[KILL_MAX][64];
    volatile int answered[KILL_MAX]; /* 1 + consumed, once told */
    volatile int batches;
} v_killed;

/* Grants base.. as ONE batch; answered: 1 + consumed. */
static int v_killed_batch(void *ctx, og_store *s, int base)
{
    v_killed *k = ctx;
    og_grant g[KILL_ROWS];
    og_consume_result out[KILL_ROWS];
    int rcs[KILL_ROWS];

    for (int i = 0; i < KILL_ROWS; i++)
        g[i] = (og_grant){ISSUER, k->grant_id[base + i], k->expires_at_us,
                          NULL, t_form};
    if (og__consume_batch(s, KILL_ROWS, g, out, rcs) != 0)
        return -1;
    for (int i = 0; i < KILL_ROWS; i++)
        if (rcs[i] == 0)
            k->answered[base + i] = 1 + out[i].consumed;
    return 0;
}

static void v_killed_child(void *ctx)
{
    v_killed *k = ctx;

    t_batches_until_killed(v_store(64, 2), KILL_MAX, KILL_ROWS,
                           v_killed_batch, k, &k->batches);
}

static void killed_verdict_batches_keep_every_answer(void **state)
{
    v_killed *k = t_shared_zeroed(sizeof *k);
    og_store *s;
    t_raw *raw;
    int told = 0;

    (void)state;
    snprintf(k->prefix, sizeof k->prefix, "kv%d", (int)getpid());
    k->expires_at_us = t_now_us() + 15 * 60 * SEC;
    for (int i = 0; i < KILL_MAX; i++) {
        snprintf(k->grant_id[i], sizeof k->grant_id[i], "%s-%d", k->prefix, i);
        if (t_form == OG_FORM_ROW) {
            og_grant g = {ISSUER, k->grant_id[i], k->expires_at_us, NULL,
                          t_form};
            og_intent in = {"00000000-0000-4000-8000-000000000000",
                            "agent-17", "A-1187", "250.00", "USD"};
            t_issue(&g, &in);
        }
    }
    t_kill_midway(v_killed_child, k, &k->batches, 3, 7000);

    /* Every verdict the child was told holds; every grant holds at most
     * one claim, and one by the verdict only (no operation). */
    raw = t_raw_open();
    for (int i = 0; i < KILL_MAX; i++) {
        if (!k->answered[i])
            continue;
        told++;
        assert_int_equal(k->answered[i], 2); /* consumed */
        assert_true(t_raw_consumptions(raw, ISSUER, k->grant_id[i]) == 1);
    }
    assert_true(told >= 3 * KILL_ROWS);
    if (t_form == OG_FORM_ROW)
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grants WHERE grant_id"
                              " LIKE '%s-%%' AND consumed_by_operation IS NOT"
                              " NULL",
                              k->prefix) == 0);
    else if (t_keys != OG_KEYS_HASHED)
        assert_true(t_raw_int(raw,
                              "SELECT count(*) FROM grant_consumptions WHERE"
                              " grant_id LIKE '%s-%%' AND (kind <> 'consume'"
                              " OR operation_id IS NOT NULL)",
                              k->prefix) == 0);
    t_raw_close(raw);
    /* Whatever the kill cut, each grant's verdict is decided once: asked
     * again, consumed now, or denied because the killed batch consumed
     * it. */
    s = v_store(64, 2);
    for (int i = 0; i < KILL_MAX; i += 37) {
        og_grant g = {ISSUER, k->grant_id[i], k->expires_at_us, NULL, t_form};
        og_consume_result r;

        assert_int_equal(og_consume(s, &g, &r), 0);
        if (k->answered[i])
            assert_false(r.consumed);
        if (!r.consumed)
            assert_int_equal(r.refusal, OG_REFUSAL_GRANT_CONSUMED);
    }
    og_store_free(s);
    munmap(k, sizeof *k);
}

/* How many times needle occurs in hay. */
static int v_count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* docs/performance.md, "VERDICT2": PostgreSQL keeps a prepared
 * statement's generic plan, and a store's first batches plan it on tables
 * that are empty and never analysed. On such a store every plan of every
 * batched statement (the admissions', the consume verdicts', both forms,
 * and the ticket rotations', docs/performance.md "ROTATE",
 * custom and generic, as og_store_explain shows them) reads every table by
 * key — no sequential scan of any table — and the report probes
 * grant_consumptions_pkey, the families' locks families_pkey and (row
 * form) the grants' locks and claims grants_pkey. As plain joins, the
 * generic plans hashed sequential scans of grant_consumptions, grants,
 * families and (row form) operations_archive on every batch. */
static void batched_plans_probe_by_key_on_a_new_store(void **state)
{
    static const char *const batched[4] = {
        "### Admission, batched (group commit), token form",
        "### Admission, batched (group commit), row form",
        "### Consume verdict, batched (group commit), token form",
        "### Consume verdict, batched (group commit), row form"};
    char *plan = NULL, url[4200];
    og_store *s;

    (void)state;
    if (t_kind != T_POSTGRES)
        skip(); /* SQLite has no batched statement (og_store_explain) */
    s = t_fresh_store("cb_new_plans", url, sizeof url);
    assert_int_equal(og_store_explain(s, 1000, &plan), 0);
    assert_non_null(plan);
    for (int f = 0; f < 4; f++) {
        const char *p = strstr(plan, batched[f]), *q;
        char *b;

        assert_non_null(p);
        q = strstr(p + 4, "\n### "); /* the section ends at the next */
        b = strndup(p, q ? (size_t)(q - p) : strlen(p));
        assert_non_null(b);
        if (b != NULL && strstr(b, "Seq Scan") != NULL)
            fprintf(stderr, "plans:\n%s\n", b);
        assert_null(strstr(b, "Seq Scan"));
        /* custom and generic: the report, and the families' locks */
        assert_true(v_count_of(b, "using grant_consumptions_pkey on "
                                  "grant_consumptions c") >= 2);
        assert_true(v_count_of(b, "using families_pkey on families") >= 4);
        if (f % 2 == 1) /* row form: the grants' locks and claims */
            assert_true(v_count_of(b, "using grants_pkey on grants") >= 6);
        free(b);
    }
    /* Ticket rotation's batch (rotate_batch.c, RB3): the tickets' locks,
     * the rotation's UPDATE and the report probe tickets_pkey, the
     * families' liveness families_pkey, custom and generic. */
    {
        const char *p = strstr(plan, "### Ticket rotation, batched"), *q;
        char *b;

        assert_non_null(p);
        q = strstr(p + 4, "\n### ");
        b = strndup(p, q ? (size_t)(q - p) : strlen(p));
        assert_non_null(b);
        if (b != NULL && strstr(b, "Seq Scan") != NULL)
            fprintf(stderr, "plans:\n%s\n", b);
        assert_null(strstr(b, "Seq Scan"));
        assert_true(v_count_of(b, "tickets_pkey") >= 6);
        assert_true(v_count_of(b, "using families_pkey on families") >= 4);
        free(b);
    }
    free(plan);
    og_store_free(s);
}

/* The cases the shared harness runs (batch_harness.h) carry this file's
 * description as their initial state. */
const struct CMUnitTest t_consume_batch_tests[] = {
    {"mixed_verdict_batch_answers_as_the_one_row_path",
     t_mix_takes_no_fallback, NULL, NULL, &v_mix_def},
    {"aborted_verdict_batch_falls_back_row_by_row",
     t_mix_falls_back_once, NULL, NULL, &v_mix_def},
    cmocka_unit_test(unconfirmed_verdict_batch_is_unavailable_for_every_row),
    {"verdict_batches_of_two_store_objects_race",
     t_race_in_threads, NULL, NULL, &v_race_def},
    {"verdict_batches_of_two_processes_race",
     t_race_in_processes, NULL, NULL, &v_race_def},
    {"queued_verdicts_consume_each_grant_once",
     t_queue_in_batches_and_alone, NULL, NULL, &v_queue_def},
    cmocka_unit_test(killed_verdict_batches_keep_every_answer),
    cmocka_unit_test(batched_plans_probe_by_key_on_a_new_store),
};
const size_t t_consume_batch_tests_count =
    sizeof t_consume_batch_tests / sizeof t_consume_batch_tests[0];
