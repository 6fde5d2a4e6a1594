/*
 * lifecycle.c — issuance, revocation, families, the consume verdict and
 * tickets, against the real engine, in the suite's grant form (argv[3]:
 * token or row — the same tests for both forms). The claims under test
 * (docs/design.md, "The grant lifecycle: issuance, revocation, families,
 * consume, tickets"; A-T15, A-T16): each operation is ONE conditional write,
 * and the store orders the ones that contend — a revocation and an
 * admission of one grant, a family's revocation and the admissions of its
 * grants, the presentations of one ticket or one consume verdict.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static const char *const l_revokers[] = {"supervisor-3"};
static const og_revoke_policy l_policy = {l_revokers, 1};

/* A grant case with an optional family, NOT yet issued. */
static void l_case(t_case *c, const char *family)
{
    memset(c, 0, sizeof *c);
    t_grant_id(c->grant_id, sizeof c->grant_id);
    t_uuid(c->op);
    c->g = (og_grant){ISSUER, c->grant_id, t_now_us() + 15 * 60 * SEC, family,
                      t_form};
    c->in = (og_intent){c->op, "agent-17", "A-1187", "250.00", "USD"};
}

/* Records c's issuance in the suite's form; returns the outcome. */
static og_issue_outcome l_issue_exp(og_store *s, const t_case *c,
                                    int64_t expires_at_us)
{
    char digest[65];
    og_issuance iss;
    og_issue_outcome o;

    assert_int_equal(og_params_digest(c->in.account_id, c->in.amount,
                                      c->in.currency, digest), 0);
    int64_t issued = t_now_us() - SEC;

    /* Issued before it expires, also for a grant already past its deadline. */
    if (expires_at_us != 0 && issued >= expires_at_us)
        issued = expires_at_us - 60 * SEC;
    iss = (og_issuance){ISSUER, c->grant_id, c->g.family, c->in.caller_id,
                        "credit.apply", digest, issued, expires_at_us, t_form};
    assert_int_equal(og_issuance_record(s, &iss, &o), 0);
    return o;
}

static og_issue_outcome l_issue(og_store *s, const t_case *c)
{
    return l_issue_exp(s, c, c->g.expires_at_us);
}

static void l_family(char *out, size_t n)
{
    char u[OG_UUID_LEN + 1];
    t_uuid(u);
    snprintf(out, n, "fam-%.12s", u);
}

/* A stored time in microseconds: PostgreSQL timestamptz or SQLite INTEGER. */
static int64_t l_retain_until(t_raw *raw, const char *grant_id)
{
    char match[512];

    return t_raw_int(raw,
                     t_kind == T_POSTGRES
                         ? "SELECT (extract(epoch FROM retain_until) * 1000000)::bigint"
                           " FROM grant_consumptions WHERE %s"
                         : "SELECT retain_until FROM grant_consumptions"
                           " WHERE %s",
                     t_key_match(ISSUER, grant_id, match, sizeof match));
}

/* ===========================================================================
 * Issuance
 * ========================================================================= */
static void issuance_is_recorded_once_and_refused_into_a_revoked_family(void **state)
{
    og_store *s = t_store(0, 0);
    char fam[32];
    t_case c, d;
    og_revoke_outcome ro;
    og_strv list = {0};
    og_admission a;

    l_family(fam, sizeof fam);
    l_case(&c, fam);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_DUPLICATE_ID); /* never reused */

    assert_int_equal(og_family_revoke(s, &l_policy, ISSUER, fam, "supervisor-3",
                                      &ro, &list), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(list.n, 1);
    assert_string_equal(list.v[0], c.grant_id);
    og_strv_free(&list);

    /* Issuance into the revoked family is refused... */
    l_case(&d, fam);
    assert_int_equal(l_issue(s, &d), OG_ISSUE_FAMILY_REVOKED);
    /* ...and the revoked grant cannot be admitted. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    og_store_free(s);
}

static void bad_lifecycle_input_gets_a_clear_error(void **state)
{
    og_store *s = t_store(0, 0);
    og_issuance iss = {ISSUER, "g-1", NULL, "agent-17", "credit.apply",
                       "00", 1, 2, t_form};
    og_revocation rv = {ISSUER, "bad id", "supervisor-3", 0, t_form};
    og_issue_outcome io;
    og_revoke_outcome ro;
    og_ticket_result tr;
    og_strv list = {0};
    char big[200];

    memset(big, 'f', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(og_issuance_record(s, &iss, &io), OG_EDIGEST);
    iss.params_digest = "0000000000000000000000000000000000000000000000000000000000000000";
    iss.expires_at_us = 1; /* not after issued_at */
    assert_int_equal(og_issuance_record(s, &iss, &io), OG_EEXPIRES_AT);
    iss.family = "fam ily";
    assert_int_equal(og_issuance_record(s, &iss, &io), OG_EFAMILY);
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), OG_EGRANT_ID);
    rv.grant_id = big;
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), OG_EGRANT_ID);
    assert_int_equal(og_family_revoke(s, &l_policy, ISSUER, big, "supervisor-3",
                                      &ro, &list), OG_EFAMILY);
    assert_int_equal(og_ticket_rotate(s, "short", &tr), OG_ETICKET);
    assert_int_equal(og_ticket_rotate(s, "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!", &tr),
                     OG_ETICKET);
    assert_int_equal(og_ticket_create(s, ISSUER, "", &tr), OG_EFAMILY);
    og_store_free(s);
}

/* ===========================================================================
 * Revocation
 * ========================================================================= */
static void revocation_requires_privilege_and_proof_of_issuance(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_revoke_outcome ro;
    og_revocation rv;
    og_admission a;
    t_case c;

    l_case(&c, NULL);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);

    /* Not in the issuer's list of revokers: refused, nothing written. */
    rv = (og_revocation){ISSUER, c.grant_id, "agent-17", 0, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_NOT_PERMITTED);
    assert_int_equal(og_revoke(s, NULL, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_NOT_PERMITTED);
    assert_int_equal(t_raw_consumptions(raw, ISSUER, c.grant_id), 0);

    /* A grant id that was never issued: no proof, refused, so a revoker
     * cannot block a future grant that happens to get that id. */
    rv = (og_revocation){ISSUER, "never-issued-id", "supervisor-3", 0, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_NOT_ISSUED);
    assert_int_equal(t_raw_consumptions(raw, ISSUER, "never-issued-id"), 0);

    /* The grant itself is still admittable. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    t_raw_close(raw);
    og_store_free(s);
}

static void revocation_row_is_retained_until_trusted_expiry_plus_leeway(void **state)
{
    og_store_options o;
    og_store *s;
    t_raw *raw;
    og_revoke_outcome ro;
    og_revocation rv;
    t_case c;
    int64_t exp, before, got;

    if (t_form == OG_FORM_ROW) { /* row form keeps the grant's row instead */
        skip();
        return;
    }
    og_store_options_default(&o);
    s = t_store(0, 0);
    raw = t_raw_open();

    /* (a) Proof by a verified token: its exp is the trusted expiry. */
    l_case(&c, NULL);
    exp = (t_now_us() / SEC + 600) * SEC;
    rv = (og_revocation){ISSUER, c.grant_id, "supervisor-3", exp, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_true(l_retain_until(raw, c.grant_id) == exp + o.timings.admission_leeway_us);

    /* (b) Proof by the issuance log. */
    l_case(&c, NULL);
    assert_int_equal(l_issue_exp(s, &c, exp + 7 * SEC), OG_ISSUE_RECORDED);
    rv = (og_revocation){ISSUER, c.grant_id, "supervisor-3", 0, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_true(l_retain_until(raw, c.grant_id) ==
                exp + 7 * SEC + o.timings.admission_leeway_us);

    /* (c) A log entry without an expiry: the fallback retention. */
    l_case(&c, NULL);
    assert_int_equal(l_issue_exp(s, &c, 0), OG_ISSUE_RECORDED);
    before = t_now_us();
    rv = (og_revocation){ISSUER, c.grant_id, "supervisor-3", 0, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    got = l_retain_until(raw, c.grant_id);
    {
        int64_t want = before + o.timings.max_grant_lifetime_us +
                       o.timings.issue_time_skew_us + o.timings.admission_leeway_us;
        assert_true(got >= want - 5 * SEC && got <= want + 5 * SEC);
    }
    t_raw_close(raw);
    og_store_free(s);
}

static void revocation_after_admission_changes_nothing(void **state)
{
    og_store *s = t_store(0, 0);
    og_revoke_outcome ro;
    og_revocation rv;
    og_admission a, b;
    t_case c;

    l_case(&c, NULL);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    rv = (og_revocation){ISSUER, c.grant_id, "supervisor-3", 0, t_form};
    assert_int_equal(og_revoke(s, &l_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    /* The operation stays reachable by its same-operation retry. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &b), 0);
    assert_int_equal(b.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_string_equal(b.operation.operation_id, a.operation.operation_id);
    og_store_free(s);
}

/* Concurrent revocation and admission of one grant: exactly one wins. */
#define RV_ROUNDS 200

typedef struct rv_race {
    og_store *sa, *sr;
    pthread_barrier_t go;
    t_case c;
    int admit_rc, revoke_rc;
    og_admission a;
    og_revoke_outcome ro;
} rv_race;

static void *rv_admitter(void *arg)
{
    rv_race *r = arg;
    pthread_barrier_wait(&r->go);
    r->admit_rc = og_admit(r->sa, &r->c.g, &r->c.in, &r->a);
    return NULL;
}

static void *rv_revoker(void *arg)
{
    rv_race *r = arg;
    og_revocation rv = {ISSUER, r->c.grant_id, "supervisor-3", 0, t_form};
    pthread_barrier_wait(&r->go);
    r->revoke_rc = og_revoke(r->sr, &l_policy, &rv, &r->ro);
    return NULL;
}

static void concurrent_revocation_and_admission_one_wins(void **state)
{
    rv_race r;
    int admitted = 0, revoked = 0;

    memset(&r, 0, sizeof r);
    r.sa = t_store(1, 30000); /* separate store objects: separate connections */
    r.sr = t_store(1, 30000);
    for (int round = 0; round < RV_ROUNDS; round++) {
        pthread_t ta, tr;

        l_case(&r.c, NULL);
        assert_int_equal(l_issue(r.sr, &r.c), OG_ISSUE_RECORDED);
        pthread_barrier_init(&r.go, NULL, 2);
        assert_int_equal(pthread_create(&ta, NULL, rv_admitter, &r), 0);
        assert_int_equal(pthread_create(&tr, NULL, rv_revoker, &r), 0);
        pthread_join(ta, NULL);
        pthread_join(tr, NULL);
        pthread_barrier_destroy(&r.go);
        assert_int_equal(r.admit_rc, 0);
        assert_int_equal(r.revoke_rc, 0);
        if (r.a.outcome == OG_OUTCOME_ADMITTED) {
            assert_int_equal(r.ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
            admitted++;
        } else {
            assert_int_equal(r.a.outcome, OG_OUTCOME_REFUSED);
            assert_int_equal(r.a.refusal, OG_REFUSAL_GRANT_REVOKED);
            assert_int_equal(r.ro, OG_REVOKE_REVOKED);
            revoked++;
        }
    }
    fprintf(stderr, "revocation vs admission: %d admitted first, %d revoked first\n",
            admitted, revoked);
    og_store_free(r.sa);
    og_store_free(r.sr);
}

/* ===========================================================================
 * Families
 * ========================================================================= */
#define FAM_GRANTS 20
#define FAM_ROUNDS 10

typedef struct fam_race {
    og_store *stores[2];
    pthread_barrier_t go;
    t_case c[FAM_GRANTS];
    int rc[FAM_GRANTS];
    og_admission a[FAM_GRANTS];
    char family[32];
    og_strv revoked;
    og_revoke_outcome ro;
    int revoke_rc;
} fam_race;

typedef struct fam_racer {
    fam_race *r;
    int i; /* -1: the revoker */
} fam_racer;

static void *fam_main(void *arg)
{
    fam_racer *me = arg;
    fam_race *r = me->r;

    pthread_barrier_wait(&r->go);
    if (me->i < 0)
        r->revoke_rc = og_family_revoke(r->stores[0], &l_policy, ISSUER,
                                        r->family, "supervisor-3", &r->ro,
                                        &r->revoked);
    else
        r->rc[me->i] = og_admit(r->stores[me->i % 2], &r->c[me->i].g,
                                &r->c[me->i].in, &r->a[me->i]);
    return NULL;
}

static bool l_in(const og_strv *sv, const char *id)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], id) == 0)
            return true;
    return false;
}

static void family_revocation_racing_admissions_orders_every_grant(void **state)
{
    t_raw *raw = t_raw_open();

    for (int round = 0; round < FAM_ROUNDS; round++) {
        fam_race r;
        fam_racer rs[FAM_GRANTS + 1];
        pthread_t th[FAM_GRANTS + 1];
        int admitted = 0;

        memset(&r, 0, sizeof r);
        r.stores[0] = t_store(FAM_GRANTS, 30000);
        r.stores[1] = t_store(FAM_GRANTS, 30000);
        l_family(r.family, sizeof r.family);
        for (int i = 0; i < FAM_GRANTS; i++) {
            l_case(&r.c[i], r.family);
            assert_int_equal(l_issue(r.stores[1], &r.c[i]), OG_ISSUE_RECORDED);
        }
        pthread_barrier_init(&r.go, NULL, FAM_GRANTS + 1);
        for (int i = 0; i <= FAM_GRANTS; i++) {
            rs[i] = (fam_racer){&r, i == FAM_GRANTS ? -1 : i};
            assert_int_equal(pthread_create(&th[i], NULL, fam_main, &rs[i]), 0);
        }
        for (int i = 0; i <= FAM_GRANTS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&r.go);
        assert_int_equal(r.revoke_rc, 0);
        assert_int_equal(r.ro, OG_REVOKE_REVOKED);

        for (int i = 0; i < FAM_GRANTS; i++) {
            assert_int_equal(r.rc[i], 0);
            if (r.a[i].outcome == OG_OUTCOME_ADMITTED) {
                /* Admitted before the revocation: not in its list, and the
                 * revocation left its claim alone. */
                admitted++;
                assert_false(l_in(&r.revoked, r.c[i].grant_id));
            } else {
                /* Refused after it: the family blocked it, or the
                 * revocation's claim holds the key. */
                assert_int_equal(r.a[i].outcome, OG_OUTCOME_REFUSED);
                assert_true(r.a[i].refusal == OG_REFUSAL_FAMILY_REVOKED ||
                            r.a[i].refusal == OG_REFUSAL_GRANT_REVOKED);
                assert_true(l_in(&r.revoked, r.c[i].grant_id));
            }
            /* Exactly one claim per grant, whoever won. */
            assert_int_equal(t_raw_consumptions(raw, ISSUER, r.c[i].grant_id), 1);
        }
        assert_int_equal((size_t)admitted + r.revoked.n, FAM_GRANTS);
        /* After the revocation's commit nothing of the family is admitted. */
        for (int i = 0; i < FAM_GRANTS; i++) {
            og_admission late;
            og_intent in = r.c[i].in;
            char op[OG_UUID_LEN + 1];
            t_uuid(op);
            in.operation_id = op;
            assert_int_equal(og_admit(r.stores[0], &r.c[i].g, &in, &late), 0);
            assert_int_equal(late.outcome, OG_OUTCOME_REFUSED);
        }
        og_strv_free(&r.revoked);
        og_store_free(r.stores[0]);
        og_store_free(r.stores[1]);
    }
    t_raw_close(raw);
}

/* ===========================================================================
 * The consume verdict
 * ========================================================================= */
#define CONSUMERS 20
#define CONSUME_ROUNDS 20

typedef struct cs_race {
    og_store *stores[2];
    pthread_barrier_t go;
    t_case c;
    int rc[CONSUMERS];
    og_consume_result res[CONSUMERS];
} cs_race;

typedef struct cs_racer {
    cs_race *r;
    int i;
} cs_racer;

static void *cs_main(void *arg)
{
    cs_racer *me = arg;
    pthread_barrier_wait(&me->r->go);
    me->r->rc[me->i] = og_consume(me->r->stores[me->i % 2], &me->r->c.g,
                                  &me->r->res[me->i]);
    return NULL;
}

static void consume_verdict_under_20_concurrent_threads_consumes_once(void **state)
{
    cs_race r;
    char fam[32];

    memset(&r, 0, sizeof r);
    r.stores[0] = t_store(CONSUMERS / 2, 30000);
    r.stores[1] = t_store(CONSUMERS / 2, 30000);
    l_family(fam, sizeof fam);
    for (int round = 0; round < CONSUME_ROUNDS; round++) {
        cs_racer rs[CONSUMERS];
        pthread_t th[CONSUMERS];
        int won = 0;

        l_case(&r.c, fam);
        assert_int_equal(l_issue(r.stores[0], &r.c), OG_ISSUE_RECORDED);
        pthread_barrier_init(&r.go, NULL, CONSUMERS);
        for (int i = 0; i < CONSUMERS; i++) {
            rs[i] = (cs_racer){&r, i};
            assert_int_equal(pthread_create(&th[i], NULL, cs_main, &rs[i]), 0);
        }
        for (int i = 0; i < CONSUMERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&r.go);
        for (int i = 0; i < CONSUMERS; i++) {
            assert_int_equal(r.rc[i], 0);
            if (r.res[i].consumed) {
                won++;
                assert_string_equal(r.res[i].family, fam);
            } else {
                assert_int_equal(r.res[i].refusal, OG_REFUSAL_GRANT_CONSUMED);
            }
        }
        assert_int_equal(won, 1);
    }
    og_store_free(r.stores[0]);
    og_store_free(r.stores[1]);
}

static void consume_verdict_under_20_concurrent_processes_consumes_once(void **state)
{
    int *wins = mmap(NULL, sizeof(int) * 2, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t kids[CONSUMERS];
    og_store *s = t_store(1, 0);
    t_case c;
    int p[2];

    assert_true(wins != MAP_FAILED);
    wins[0] = wins[1] = 0;
    l_case(&c, NULL);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);
    og_store_free(s);
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    for (int k = 0; k < CONSUMERS; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            og_store *mine = t_store(1, 30000); /* its own store object */
            og_consume_result res;
            char go;
            close(p[1]);
            if (read(p[0], &go, 1) != 0) /* released when the pipe closes */
                _exit(3);
            if (og_consume(mine, &c.g, &res) != 0)
                _exit(2);
            __atomic_add_fetch(&wins[res.consumed ? 0 : 1], 1, __ATOMIC_SEQ_CST);
            og_store_free(mine);
            _exit(0);
        }
    }
    close(p[0]);
    close(p[1]); /* all children start together */
    for (int k = 0; k < CONSUMERS; k++) {
        int st;
        assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(wins[0], 1);
    assert_int_equal(wins[1], CONSUMERS - 1);
    munmap(wins, sizeof(int) * 2);
}

static void consume_and_admission_exclude_each_other(void **state)
{
    og_store *s = t_store(0, 0);
    og_consume_result res;
    og_admission a;
    t_case c;

    l_case(&c, NULL);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);
    assert_int_equal(og_consume(s, &c.g, &res), 0);
    assert_true(res.consumed);
    assert_string_equal(res.family, "");
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_CONSUMED);

    l_case(&c, NULL);
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    assert_int_equal(og_consume(s, &c.g, &res), 0);
    assert_false(res.consumed);
    assert_int_equal(res.refusal, OG_REFUSAL_GRANT_SPENT);

    /* Past the deadline on the store's clock: not consumed. */
    l_case(&c, NULL);
    c.g.expires_at_us = t_now_us() - 3600 * SEC;
    if (t_form == OG_FORM_ROW)
        assert_int_equal(l_issue_exp(s, &c, c.g.expires_at_us), OG_ISSUE_RECORDED);
    assert_int_equal(og_consume(s, &c.g, &res), 0);
    assert_false(res.consumed);
    assert_int_equal(res.refusal, OG_REFUSAL_DEADLINE_PASSED);
    og_store_free(s);
}

/* ===========================================================================
 * Tickets
 * ========================================================================= */
#define PRESENTERS 20

typedef struct tk_race {
    og_store *stores[2];
    pthread_barrier_t go;
    char ticket[OG_TICKET_LEN + 1];
    int rc[PRESENTERS];
    og_ticket_result res[PRESENTERS];
} tk_race;

typedef struct tk_racer {
    tk_race *r;
    int i;
} tk_racer;

static void *tk_main(void *arg)
{
    tk_racer *me = arg;
    pthread_barrier_wait(&me->r->go);
    me->r->rc[me->i] = og_ticket_rotate(me->r->stores[me->i % 2], me->r->ticket,
                                        &me->r->res[me->i]);
    return NULL;
}

static void ticket_rotation_under_20_concurrent_presentations_rotates_once(void **state)
{
    t_raw *raw = t_raw_open();
    tk_race r;
    tk_racer rs[PRESENTERS];
    pthread_t th[PRESENTERS];
    og_ticket_result t;
    char fam[32];
    int issued = 0;

    memset(&r, 0, sizeof r);
    r.stores[0] = t_store(PRESENTERS / 2, 30000);
    r.stores[1] = t_store(PRESENTERS / 2, 30000);
    l_family(fam, sizeof fam);
    assert_int_equal(og_ticket_create(r.stores[0], ISSUER, fam, &t), 0);
    assert_int_equal(t.outcome, OG_TICKET_ISSUED);
    memcpy(r.ticket, t.ticket, sizeof r.ticket);
    pthread_barrier_init(&r.go, NULL, PRESENTERS);
    for (int i = 0; i < PRESENTERS; i++) {
        rs[i] = (tk_racer){&r, i};
        assert_int_equal(pthread_create(&th[i], NULL, tk_main, &rs[i]), 0);
    }
    for (int i = 0; i < PRESENTERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r.go);
    for (int i = 0; i < PRESENTERS; i++) {
        assert_int_equal(r.rc[i], 0);
        if (r.res[i].outcome == OG_TICKET_ISSUED) {
            issued++;
            assert_string_equal(r.res[i].family, fam);
            assert_int_equal(strlen(r.res[i].ticket), OG_TICKET_LEN);
        } else {
            /* A concurrent replay gets nothing. */
            assert_true(r.res[i].outcome == OG_TICKET_REUSED ||
                        r.res[i].outcome == OG_TICKET_NOT_FOUND);
            assert_string_equal(r.res[i].ticket, "");
        }
    }
    assert_int_equal(issued, 1);
    /* Exactly one new ticket exists beside the rotated one. */
    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM tickets WHERE family = '%s'",
                               fam), 2);
    /* The store holds hashes, never the ticket text. */
    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM tickets WHERE ticket_hash = '%s'",
                               r.ticket), 0);
    og_store_free(r.stores[0]);
    og_store_free(r.stores[1]);
    t_raw_close(raw);
}

static void replayed_ticket_is_refused_and_revokes_the_family(void **state)
{
    og_store *s = t_store(0, 0);
    og_ticket_result t1, t2, again, next;
    og_admission a;
    char fam[32];
    t_case c, d;

    l_family(fam, sizeof fam);
    assert_int_equal(og_ticket_create(s, ISSUER, fam, &t1), 0);
    assert_int_equal(t1.outcome, OG_TICKET_ISSUED);
    l_case(&c, fam); /* a grant issued into the family before the reuse */
    assert_int_equal(l_issue(s, &c), OG_ISSUE_RECORDED);

    assert_int_equal(og_ticket_rotate(s, t1.ticket, &t2), 0);
    assert_int_equal(t2.outcome, OG_TICKET_ISSUED);
    assert_string_equal(t2.family, fam);
    assert_string_not_equal(t2.ticket, t1.ticket);

    /* Presenting the rotated ticket again is reuse: refused, and the whole
     * family goes. */
    assert_int_equal(og_ticket_rotate(s, t1.ticket, &again), 0);
    assert_int_equal(again.outcome, OG_TICKET_REUSED);
    assert_string_equal(again.ticket, "");
    assert_int_equal(og_ticket_rotate(s, t2.ticket, &next), 0);
    assert_int_equal(next.outcome, OG_TICKET_FAMILY_REVOKED);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    l_case(&d, fam);
    assert_int_equal(l_issue(s, &d), OG_ISSUE_FAMILY_REVOKED);
    assert_int_equal(og_ticket_create(s, ISSUER, fam, &next), 0);
    assert_int_equal(next.outcome, OG_TICKET_FAMILY_REVOKED);

    /* An unknown ticket is simply not found. */
    {
        og_ticket_result u;
        assert_int_equal(og_ticket_create(s, ISSUER, "fam-other", &u), 0);
        u.ticket[0] = u.ticket[0] == 'A' ? 'B' : 'A';
        assert_int_equal(og_ticket_rotate(s, u.ticket, &next), 0);
        assert_int_equal(next.outcome, OG_TICKET_NOT_FOUND);
    }
    og_store_free(s);
}

static void ticket_survives_a_store_reopen(void **state)
{
    og_store *s = t_store(0, 0);
    og_ticket_result t, r2;
    char fam[32];

    l_family(fam, sizeof fam);
    assert_int_equal(og_ticket_create(s, ISSUER, fam, &t), 0);
    og_store_free(s); /* the process holding the request restarts */
    s = t_store(0, 0);
    assert_int_equal(og_ticket_rotate(s, t.ticket, &r2), 0);
    assert_int_equal(r2.outcome, OG_TICKET_ISSUED);
    assert_string_equal(r2.family, fam);
    og_store_free(s);
}

const struct CMUnitTest t_lifecycle_tests[] = {
    cmocka_unit_test(issuance_is_recorded_once_and_refused_into_a_revoked_family),
    cmocka_unit_test(bad_lifecycle_input_gets_a_clear_error),
    cmocka_unit_test(revocation_requires_privilege_and_proof_of_issuance),
    cmocka_unit_test(revocation_row_is_retained_until_trusted_expiry_plus_leeway),
    cmocka_unit_test(revocation_after_admission_changes_nothing),
    cmocka_unit_test(concurrent_revocation_and_admission_one_wins),
    cmocka_unit_test(family_revocation_racing_admissions_orders_every_grant),
    cmocka_unit_test(consume_verdict_under_20_concurrent_threads_consumes_once),
    cmocka_unit_test(consume_verdict_under_20_concurrent_processes_consumes_once),
    cmocka_unit_test(consume_and_admission_exclude_each_other),
    cmocka_unit_test(ticket_rotation_under_20_concurrent_presentations_rotates_once),
    cmocka_unit_test(replayed_ticket_is_refused_and_revokes_the_family),
    cmocka_unit_test(ticket_survives_a_store_reopen),
};
const size_t t_lifecycle_tests_count =
    sizeof t_lifecycle_tests / sizeof t_lifecycle_tests[0];
