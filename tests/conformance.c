/*
 * conformance.c — the ONE store conformance suite, run unchanged against
 * every backend on a real engine:
 *
 *   conformance sqlite            (a temp SQLite file)
 *   conformance postgres          (OG_TEST_PG_URL: a throwaway cluster)
 *
 * Each test is named for the claim it proves (docs/design.md, "The store
 * contract both backends meet" and "Which failures the guarantee
 * survives"). Concurrency claims race real concurrent callers — threads on
 * two separate store objects, and separate OS processes — against the real
 * engine, and repeat.
 *
 * argv[2] chooses the group (t_groups, at the end: one row per group);
 * OG_TEST_FILTER (tests/support/support.h) runs the tests of that group
 * whose names match a glob.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "support.h"

extern char **environ;

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static og_admission t_admit_ok(og_store *s, const og_grant *g,
                               const og_intent *in)
{
    og_admission a;
    int rc = og_admit(s, g, in, &a);

    if (rc != 0)
        fprintf(stderr, "og_admit: %s\n", og_err_name(rc));
    assert_int_equal(rc, 0);
    return a;
}

static void t_assert_same_operation(const og_operation *a,
                                    const og_operation *b)
{
    assert_string_equal(a->operation_id, b->operation_id);
    assert_string_equal(a->issuer, b->issuer);
    assert_string_equal(a->grant_id, b->grant_id);
    assert_string_equal(a->caller_id, b->caller_id);
    assert_string_equal(a->account_id, b->account_id);
    assert_string_equal(a->amount, b->amount);
    assert_string_equal(a->currency, b->currency);
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->owner_version, b->owner_version);
    assert_true(a->lease_until_us == b->lease_until_us);
    assert_true(a->submit_by_us == b->submit_by_us);
    assert_true(a->created_at_us == b->created_at_us);
    assert_int_equal(a->kind, b->kind);
    assert_string_equal(a->idempotency_key, b->idempotency_key);
    assert_string_equal(a->client_reference, b->client_reference);
}

/* ===========================================================================
 * Separate store instances cannot both admit (threads, two store objects)
 * ========================================================================= */
#define RACE_CALLERS 50
#define RACE_ROUNDS 200
/* The claim under test is atomicity, not latency: 50 callers queue on one
 * key (SQLite: on one write lock), so give the queue room on a loaded
 * 2-core CI machine rather than report a slow store as unavailable. */
#define RACE_TIMEOUT_MS 30000

typedef struct race {
    og_store *stores[2];
    pthread_barrier_t start, done;
    t_case round_case;
    int admitted, refused, errors;
    pthread_mutex_t mu;
    int rounds;
} race;

typedef struct racer {
    race *r;
    int index;
} racer;

static void *racer_main(void *arg)
{
    racer *me = arg;
    race *r = me->r;
    og_store *s = r->stores[me->index % 2]; /* alternate between instances */

    for (int round = 0; round < r->rounds; round++) {
        og_intent in;
        char op[OG_UUID_LEN + 1];
        og_admission a;
        int rc;

        pthread_barrier_wait(&r->start);
        in = r->round_case.in;
        t_uuid(op); /* every caller is a different operation */
        in.operation_id = op;
        rc = og_admit(s, &r->round_case.g, &in, &a);
        pthread_mutex_lock(&r->mu);
        if (rc < 0)
            r->errors++;
        else if (a.outcome == OG_OUTCOME_ADMITTED)
            r->admitted++;
        else if (a.outcome == OG_OUTCOME_REFUSED)
            r->refused++;
        else
            r->errors++;
        pthread_mutex_unlock(&r->mu);
        pthread_barrier_wait(&r->done);
    }
    return NULL;
}

static void separate_store_instances_cannot_both_admit(void **state)
{
    race r;
    pthread_t th[RACE_CALLERS];
    racer rs[RACE_CALLERS];
    t_raw *raw = t_raw_open();

    memset(&r, 0, sizeof r);
    r.rounds = RACE_ROUNDS;
    r.stores[0] = t_store(RACE_CALLERS / 2, RACE_TIMEOUT_MS);
    r.stores[1] = t_store(RACE_CALLERS / 2, RACE_TIMEOUT_MS);
    pthread_mutex_init(&r.mu, NULL);
    pthread_barrier_init(&r.start, NULL, RACE_CALLERS + 1);
    pthread_barrier_init(&r.done, NULL, RACE_CALLERS + 1);
    for (int i = 0; i < RACE_CALLERS; i++) {
        rs[i] = (racer){&r, i};
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int round = 0; round < RACE_ROUNDS; round++) {
        t_case_new(&r.round_case); /* a fresh grant every round */
        r.admitted = r.refused = r.errors = 0;
        pthread_barrier_wait(&r.start);
        pthread_barrier_wait(&r.done);
        if (r.admitted != 1 || r.refused != RACE_CALLERS - 1 || r.errors)
            fprintf(stderr, "round %d: admitted %d refused %d errors %d\n",
                    round, r.admitted, r.refused, r.errors);
        assert_int_equal(r.errors, 0);
        assert_int_equal(r.admitted, 1);
        assert_int_equal(r.refused, RACE_CALLERS - 1);
        /* Exactly one claim and one operation exist for the grant. */
        assert_int_equal(t_raw_consumptions(raw, ISSUER, r.round_case.grant_id), 1);
        assert_int_equal(t_raw_int(raw,
                                   "SELECT count(*) FROM operations WHERE "
                                   "issuer = '%s' AND grant_id = '%s'",
                                   ISSUER, r.round_case.grant_id),
                         1);
    }
    for (int i = 0; i < RACE_CALLERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r.start);
    pthread_barrier_destroy(&r.done);
    pthread_mutex_destroy(&r.mu);
    og_store_free(r.stores[0]);
    og_store_free(r.stores[1]);
    t_raw_close(raw);
}

/* ===========================================================================
 * One operation id raced across many grants: at most one grant is bound to
 * it, and every refused attempt's claim was undone with it (no grant is left
 * spent without an operation). With SQLite's group commit these attempts
 * share one transaction, each in its own savepoint.
 * ========================================================================= */
#define SAME_OP_CALLERS 16
#define SAME_OP_ROUNDS 20

typedef struct same_op_race {
    og_store *s;
    pthread_barrier_t start;
    t_case cases[SAME_OP_CALLERS];
    int rc[SAME_OP_CALLERS];
    og_admission a[SAME_OP_CALLERS];
} same_op_race;

typedef struct same_op_racer {
    same_op_race *r;
    int i;
} same_op_racer;

static void *same_op_main(void *arg)
{
    same_op_racer *me = arg;
    same_op_race *r = me->r;

    pthread_barrier_wait(&r->start);
    r->rc[me->i] = og_admit(r->s, &r->cases[me->i].g, &r->cases[me->i].in,
                            &r->a[me->i]);
    return NULL;
}

static void one_operation_id_raced_across_grants_binds_one(void **state)
{
    t_raw *raw = t_raw_open();

    for (int round = 0; round < SAME_OP_ROUNDS; round++) {
        same_op_race r;
        same_op_racer rs[SAME_OP_CALLERS];
        pthread_t th[SAME_OP_CALLERS];
        int admitted = 0, claimed = 0;

        memset(&r, 0, sizeof r);
        r.s = t_store(SAME_OP_CALLERS, RACE_TIMEOUT_MS);
        pthread_barrier_init(&r.start, NULL, SAME_OP_CALLERS);
        for (int i = 0; i < SAME_OP_CALLERS; i++) {
            t_case_new(&r.cases[i]);
            if (i > 0) { /* everyone presents the first caller's id */
                memcpy(r.cases[i].op, r.cases[0].op, sizeof r.cases[i].op);
            }
        }
        for (int i = 0; i < SAME_OP_CALLERS; i++) {
            rs[i] = (same_op_racer){&r, i};
            assert_int_equal(pthread_create(&th[i], NULL, same_op_main, &rs[i]), 0);
        }
        for (int i = 0; i < SAME_OP_CALLERS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < SAME_OP_CALLERS; i++) {
            assert_int_equal(r.rc[i], 0);
            if (r.a[i].outcome == OG_OUTCOME_ADMITTED)
                admitted++;
            else
                assert_int_equal(r.a[i].refusal, OG_REFUSAL_OPERATION_ID_TAKEN);
            claimed += (int)t_raw_consumptions(raw, "support-approvals",
                                               r.cases[i].grant_id);
        }
        assert_int_equal(admitted, 1);
        assert_int_equal(claimed, 1); /* the refused claims were undone */
        pthread_barrier_destroy(&r.start);
        og_store_free(r.s);
    }
    t_raw_close(raw);
}

/* ===========================================================================
 * Separate OS processes cannot both admit: two forked processes, each with
 * its own store object and 25 threads, race on one grant per round.
 * ========================================================================= */
#define PROC_ROUNDS 100
#define PROC_THREADS 25

typedef struct proc_shared {
    pthread_barrier_t start; /* process-shared: 2 x threads + parent */
    pthread_barrier_t done;
    char grant_id[PROC_ROUNDS][64];
    int64_t expires_at_us;
    int admitted[PROC_ROUNDS];
    int refused[PROC_ROUNDS];
    int errors[PROC_ROUNDS];
} proc_shared;

typedef struct proc_racer {
    proc_shared *sh;
    og_store *s;
} proc_racer;

static void *proc_racer_main(void *arg)
{
    proc_racer *me = arg;
    proc_shared *sh = me->sh;

    for (int round = 0; round < PROC_ROUNDS; round++) {
        char op[OG_UUID_LEN + 1];
        og_grant g = {ISSUER, sh->grant_id[round], sh->expires_at_us, NULL,
                      t_form};
        og_intent in = {op, "agent-17", "A-1187", "250.00", "USD"};
        og_admission a;
        int rc;

        t_uuid(op);
        pthread_barrier_wait(&sh->start);
        rc = og_admit(me->s, &g, &in, &a);
        if (rc < 0)
            __atomic_add_fetch(&sh->errors[round], 1, __ATOMIC_SEQ_CST);
        else if (a.outcome == OG_OUTCOME_ADMITTED)
            __atomic_add_fetch(&sh->admitted[round], 1, __ATOMIC_SEQ_CST);
        else if (a.outcome == OG_OUTCOME_REFUSED)
            __atomic_add_fetch(&sh->refused[round], 1, __ATOMIC_SEQ_CST);
        else
            __atomic_add_fetch(&sh->errors[round], 1, __ATOMIC_SEQ_CST);
        pthread_barrier_wait(&sh->done);
    }
    return NULL;
}

static void proc_child(proc_shared *sh)
{
    og_store *s = t_store(PROC_THREADS, RACE_TIMEOUT_MS); /* this process's own store */
    pthread_t th[PROC_THREADS];
    proc_racer me = {sh, s};

    for (int i = 0; i < PROC_THREADS; i++)
        if (pthread_create(&th[i], NULL, proc_racer_main, &me) != 0)
            _exit(3);
    for (int i = 0; i < PROC_THREADS; i++)
        pthread_join(th[i], NULL);
    og_store_free(s);
    _exit(0);
}

static void separate_processes_cannot_both_admit(void **state)
{
    proc_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_barrierattr_t ba;
    pid_t kids[2];
    int status;

    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&sh->start, &ba, 2 * PROC_THREADS + 1);
    pthread_barrier_init(&sh->done, &ba, 2 * PROC_THREADS + 1);
    sh->expires_at_us = t_now_us() + 15 * 60 * SEC;
    for (int i = 0; i < PROC_ROUNDS; i++) {
        og_grant g = {ISSUER, sh->grant_id[i], sh->expires_at_us, NULL, t_form};
        og_intent in = {"6f1c2a8e-3b4d-4c5e-8f90-123456789abc", "agent-17",
                        "A-1187", "250.00", "USD"};
        t_grant_id(sh->grant_id[i], sizeof sh->grant_id[i]);
        t_issue(&g, &in);
    }

    fflush(NULL);
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0)
            proc_child(sh);
    }
    for (int round = 0; round < PROC_ROUNDS; round++) {
        pthread_barrier_wait(&sh->start);
        pthread_barrier_wait(&sh->done);
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    for (int round = 0; round < PROC_ROUNDS; round++) {
        if (sh->admitted[round] != 1 || sh->errors[round])
            fprintf(stderr, "round %d: admitted %d refused %d errors %d\n",
                    round, sh->admitted[round], sh->refused[round],
                    sh->errors[round]);
        assert_int_equal(sh->errors[round], 0);
        assert_int_equal(sh->admitted[round], 1);
        assert_int_equal(sh->refused[round], 2 * PROC_THREADS - 1);
    }
    pthread_barrier_destroy(&sh->start);
    pthread_barrier_destroy(&sh->done);
    munmap(sh, sizeof *sh);
}

/* ===========================================================================
 * `oncegate admit` launched concurrently: separate processes through the
 * CLI, exit codes as documented (0 admitted, 1 refused).
 * ========================================================================= */
#define CLI_PROCS 16
#define CLI_ROUNDS 10

static void cli_processes_launched_concurrently_admit_once(void **state)
{
    char expires[40];

    if (t_form == OG_FORM_ROW) { /* `oncegate admit` admits token-form grants */
        skip();
        return;
    }
    og_time_format_rfc3339(t_now_us() + 15 * 60 * SEC, expires, sizeof expires);
    for (int round = 0; round < CLI_ROUNDS; round++) {
        char grant[64], ops[CLI_PROCS][OG_UUID_LEN + 1];
        pid_t pids[CLI_PROCS];
        int ok = 0, refused = 0, other = 0;
        posix_spawn_file_actions_t fa;

        t_grant_id(grant, sizeof grant);
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null",
                                         O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
                                         O_WRONLY, 0);
        for (int i = 0; i < CLI_PROCS; i++) {
            char *argv[] = {(char *)"oncegate", (char *)"admit",
                            (char *)"--store", t_url,
                            (char *)"--issuer", (char *)ISSUER,
                            (char *)"--grant-id", grant,
                            (char *)"--expires-at", expires,
                            (char *)"--operation-id", ops[i],
                            (char *)"--caller", (char *)"agent-17",
                            (char *)"--account", (char *)"A-1187",
                            (char *)"--amount", (char *)"250.00",
                            (char *)"--currency", (char *)"USD", NULL};
            t_uuid(ops[i]);
            assert_int_equal(posix_spawn(&pids[i], t_oncegate_bin(), &fa, NULL,
                                         argv, environ),
                             0);
        }
        posix_spawn_file_actions_destroy(&fa);
        for (int i = 0; i < CLI_PROCS; i++) {
            int st;
            assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                ok++;
            else if (WIFEXITED(st) && WEXITSTATUS(st) == 1)
                refused++;
            else {
                other++;
                fprintf(stderr, "round %d: oncegate admit %s %d\n", round,
                        WIFEXITED(st) ? "exited" : "killed by signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            }
        }
        assert_int_equal(other, 0);
        assert_int_equal(ok, 1);
        assert_int_equal(refused, CLI_PROCS - 1);
    }
}

/* ===========================================================================
 * Restarts and retries
 * ========================================================================= */
static void recreated_store_client_still_refuses(void **state)
{
    t_case c, other;
    og_admission a, b;
    og_store *s = t_store(0, 0);

    t_case_new(&c);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    og_store_free(s); /* the "process" restarts: nothing in memory survives */

    s = t_store(0, 0);
    other = c;
    t_uuid(other.op);
    other.in.operation_id = other.op;
    b = t_admit_ok(s, &other.g, &other.in);
    assert_int_equal(b.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(b.refusal, OG_REFUSAL_GRANT_SPENT);
    b = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(b.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    t_assert_same_operation(&a.operation, &b.operation);
    og_store_free(s);
}

static void admitted_operation_is_recorded_with_store_clock_fields(void **state)
{
    og_store_options o;
    og_store *s = t_store(0, 0);
    og_operation got;
    t_case c;
    og_admission a;
    int64_t before = t_now_us();

    og_store_options_default(&o);
    t_case_new(&c);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    assert_int_equal(a.refusal, OG_REFUSAL_NONE);
    assert_string_equal(a.operation.operation_id, c.op);
    assert_string_equal(a.operation.issuer, ISSUER);
    assert_string_equal(a.operation.grant_id, c.grant_id);
    assert_string_equal(a.operation.caller_id, "agent-17");
    assert_string_equal(a.operation.account_id, "A-1187");
    assert_string_equal(a.operation.amount, "250"); /* canonical */
    assert_string_equal(a.operation.currency, "USD");
    assert_int_equal(a.operation.status, OG_OP_ADMITTED);
    assert_int_equal(a.operation.owner_version, 1);
    /* Admission makes credits, sent under their own id (schema 7). */
    assert_int_equal(a.operation.kind, OG_OP_KIND_CREDIT);
    assert_string_equal(a.operation.idempotency_key, c.op);
    assert_string_equal(a.operation.client_reference, c.op);
    /* The lease and the submission deadline are measured from the moment
     * the operation row is written, on the store's clock. */
    assert_true(a.operation.lease_until_us - a.operation.created_at_us ==
                o.timings.execution_lease_us);
    assert_true(a.operation.submit_by_us - a.operation.created_at_us ==
                o.timings.submission_window_us);
    assert_true(a.operation.created_at_us > before - 60 * SEC);
    assert_true(a.operation.created_at_us < t_now_us() + 60 * SEC);
    assert_int_equal(og_operation_get(s, c.op, &got), 1);
    t_assert_same_operation(&a.operation, &got);
    og_store_free(s);
}

static void same_operation_retry_gets_the_stored_record(void **state)
{
    og_store *a_store = t_store(0, 0), *b_store = t_store(0, 0);
    t_case c;
    og_admission first, again;
    char upper[OG_UUID_LEN + 1];

    t_case_new(&c);
    first = t_admit_ok(a_store, &c.g, &c.in);
    assert_int_equal(first.outcome, OG_OUTCOME_ADMITTED);

    again = t_admit_ok(b_store, &c.g, &c.in); /* on another instance */
    assert_int_equal(again.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    t_assert_same_operation(&first.operation, &again.operation);

    /* "250.0" and "250.00" are the same amount; an upper-case UUID is the
     * same operation id. */
    c.in.amount = "250.0";
    for (size_t i = 0; i <= OG_UUID_LEN; i++)
        upper[i] = (char)(c.op[i] >= 'a' && c.op[i] <= 'f' ? c.op[i] - 32 : c.op[i]);
    c.in.operation_id = upper;
    again = t_admit_ok(b_store, &c.g, &c.in);
    assert_int_equal(again.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    t_assert_same_operation(&first.operation, &again.operation);
    og_store_free(a_store);
    og_store_free(b_store);
}

static void operation_id_reused_with_other_details_is_refused(void **state)
{
    static const struct {
        const char *what, *caller, *account, *amount, *currency;
    } variants[] = {
        {"amount", "agent-17", "A-1187", "250.01", "USD"},
        {"account", "agent-17", "A-9999", "250.00", "USD"},
        {"currency", "agent-17", "A-1187", "250.00", "EUR"},
        {"caller", "agent-99", "A-1187", "250.00", "USD"},
    };
    og_store *s = t_store(0, 0);
    t_case c;
    og_admission first, a;
    og_operation now;

    t_case_new(&c);
    first = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(first.outcome, OG_OUTCOME_ADMITTED);
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        og_intent in = c.in;
        in.caller_id = variants[i].caller;
        in.account_id = variants[i].account;
        in.amount = variants[i].amount;
        in.currency = variants[i].currency;
        a = t_admit_ok(s, &c.g, &in);
        if (a.outcome != OG_OUTCOME_REFUSED)
            fprintf(stderr, "variant %s not refused\n", variants[i].what);
        assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
        assert_int_equal(a.refusal, OG_REFUSAL_OPERATION_MISMATCH);
        /* A refusal reveals nothing of the other operation. */
        assert_string_equal(a.operation.operation_id, "");
        assert_string_equal(a.operation.account_id, "");
        /* The original operation is unchanged. */
        assert_int_equal(og_operation_get(s, c.op, &now), 1);
        t_assert_same_operation(&first.operation, &now);
    }
    og_store_free(s);
}

static void operation_id_reused_for_another_grant_is_refused(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    t_case c, d;
    og_admission a;
    og_operation now;

    t_case_new(&c);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);

    t_case_new(&d);
    d.in.operation_id = c.op; /* same operation id, another grant */
    a = t_admit_ok(s, &d.g, &d.in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_OPERATION_ID_TAKEN);
    /* The refusal rolled back the claim of the other grant... */
    assert_int_equal(t_raw_consumptions(raw, ISSUER, d.grant_id), 0);
    /* ...so that grant is still admittable by its own operation. */
    d.in.operation_id = d.op;
    a = t_admit_ok(s, &d.g, &d.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    assert_int_equal(og_operation_get(s, c.op, &now), 1);
    assert_string_equal(now.grant_id, c.grant_id);
    t_raw_close(raw);
    og_store_free(s);
}

static void another_operation_for_a_spent_grant_is_refused(void **state)
{
    og_store *s = t_store(0, 0);
    t_case c;
    char op2[OG_UUID_LEN + 1];
    og_intent in;
    og_admission a;
    og_operation none;

    t_case_new(&c);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    t_uuid(op2);
    in = c.in;
    in.operation_id = op2;
    a = t_admit_ok(s, &c.g, &in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    assert_int_equal(og_operation_get(s, op2, &none), 0);
    og_store_free(s);
}

static void grant_key_held_by_a_revocation_is_refused(void **state)
{
    static const char *const revokers[] = {"supervisor-3"};
    og_revoke_policy policy = {revokers, 1};
    og_store *s = t_store(0, 0);
    og_revoke_outcome ro;
    og_revocation rv;
    t_case c;
    og_admission a;

    /* A revocation claims the key (token form) or marks the row (row form)
     * with no operation: admission is refused, never reveals anything. */
    t_case_new(&c);
    rv = (og_revocation){ISSUER, c.grant_id, "supervisor-3", c.g.expires_at_us,
                         t_form};
    assert_int_equal(og_revoke(s, &policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
    og_store_free(s);
}

/* ===========================================================================
 * The deadline is the store's
 * ========================================================================= */
static void store_enforces_the_admission_deadline(void **state)
{
    og_store_options o;
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    t_case c;
    og_admission a;
    /* An application whose clock runs an hour slow believes the grant is
     * valid; the store's clock decides. */
    int64_t app_now = t_now_us() - 3600 * SEC;

    og_store_options_default(&o);
    t_case_new_exp(&c, t_now_us() - o.timings.admission_leeway_us - 5 * SEC);
    assert_true(c.g.expires_at_us + o.timings.admission_leeway_us > app_now);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_DEADLINE_PASSED);
    assert_int_equal(t_raw_consumptions(raw, ISSUER, c.grant_id), 0);
    {
        og_operation none;
        assert_int_equal(og_operation_get(s, c.op, &none), 0);
    }

    /* Past expires_at but inside the leeway: still admitted. */
    t_case_new_exp(&c, t_now_us() - o.timings.admission_leeway_us + 10 * SEC);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Bad input
 * ========================================================================= */
static void bad_input_gets_a_clear_error_and_writes_nothing(void **state)
{
    char big[OG_ID_MAX + 2];
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    t_case c;
    og_admission a;
    og_operation none;

    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0'; /* 129 bytes */
    t_case_new(&c);

    struct {
        const char *what;
        og_grant g;
        og_intent in;
        int want;
    } bad[] = {
        {"oversize issuer", {big, c.grant_id, c.g.expires_at_us, NULL, t_form}, c.in, OG_EISSUER},
        {"empty issuer", {"", c.grant_id, c.g.expires_at_us, NULL, t_form}, c.in, OG_EISSUER},
        {"oversize grant id", {ISSUER, big, c.g.expires_at_us, NULL, t_form}, c.in, OG_EGRANT_ID},
        {"grant id with space", {ISSUER, "g 1", c.g.expires_at_us, NULL, t_form}, c.in, OG_EGRANT_ID},
        {"grant id with newline", {ISSUER, "g\n1", c.g.expires_at_us, NULL, t_form}, c.in, OG_EGRANT_ID},
        {"expiry past 9999", {ISSUER, c.grant_id, INT64_MAX, NULL, t_form}, c.in, OG_EEXPIRES_AT},
        {"negative expiry", {ISSUER, c.grant_id, -1, NULL, t_form}, c.in, OG_EEXPIRES_AT},
        {"operation id not a uuid", c.g, {"not-a-uuid", "agent-17", "A-1187", "250.00", "USD"}, OG_EOPERATION_ID},
        {"nil operation id", c.g, {"00000000-0000-0000-0000-000000000000", "agent-17", "A-1187", "250.00", "USD"}, OG_EOPERATION_ID},
        {"oversize caller", c.g, {c.op, big, "A-1187", "250.00", "USD"}, OG_ECALLER},
        {"oversize account", c.g, {c.op, "agent-17", big, "250.00", "USD"}, OG_EACCOUNT},
        {"amount with exponent", c.g, {c.op, "agent-17", "A-1187", "2.5e2", "USD"}, OG_EAMOUNT},
        {"negative amount", c.g, {c.op, "agent-17", "A-1187", "-250.00", "USD"}, OG_EAMOUNT},
        {"zero amount", c.g, {c.op, "agent-17", "A-1187", "0.00", "USD"}, OG_EAMOUNT},
        {"amount not a number", c.g, {c.op, "agent-17", "A-1187", "NaN", "USD"}, OG_EAMOUNT},
        {"lower-case currency", c.g, {c.op, "agent-17", "A-1187", "250.00", "usd"}, OG_ECURRENCY},
        {"long currency", c.g, {c.op, "agent-17", "A-1187", "250.00", "USDX"}, OG_ECURRENCY},
        {"missing currency", c.g, {c.op, "agent-17", "A-1187", "250.00", NULL}, OG_ECURRENCY},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = og_admit(s, &bad[i].g, &bad[i].in, &a);
        if (rc != bad[i].want)
            fprintf(stderr, "%s: got %s want %s\n", bad[i].what,
                    og_err_name(rc), og_err_name(bad[i].want));
        assert_int_equal(rc, bad[i].want);
        assert_true(og_strerror(rc)[0] != '\0');
    }
    assert_int_equal(og_admit(s, NULL, &c.in, &a), OG_EINVAL);
    assert_int_equal(og_admit(s, &c.g, NULL, &a), OG_EINVAL);
    assert_int_equal(og_operation_get(s, "nope", &none), OG_EOPERATION_ID);

    /* Nothing was written: the grant is unclaimed and the operation absent,
     * and the valid request is admitted now. */
    assert_int_equal(t_raw_consumptions(raw, ISSUER, c.grant_id), 0);
    assert_int_equal(og_operation_get(s, c.op, &none), 0);
    a = t_admit_ok(s, &c.g, &c.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    t_raw_close(raw);
    og_store_free(s);
}

static void bad_store_urls_are_rejected(void **state)
{
    og_store *s = NULL;

    assert_int_equal(og_store_open("", NULL, &s), OG_EBAD_URL);
    assert_int_equal(og_store_open("sqlite:", NULL, &s), OG_EBAD_URL);
    assert_int_equal(og_store_open("mysql://x/y", NULL, &s), OG_EBAD_URL);
    assert_int_equal(og_store_open("/just/a/path", NULL, &s), OG_EBAD_URL);
    assert_int_equal(og_store_open("postgresql://[broken", NULL, &s),
                     OG_EBAD_URL);
    assert_null(s);
    og_store_free(NULL); /* a no-op */
}

/* ===========================================================================
 * Schema versions and migrations
 * ========================================================================= */

/* Removes a store made by t_empty_store_url(). */
static void t_empty_store_drop(const char *url, const char *dbname, t_raw *raw)
{
    char sql[128];

    if (t_kind == T_POSTGRES) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", dbname);
        assert_int_equal(t_raw_exec(raw, sql), 0);
    } else {
        unlink(url + 7);
    }
}

/* A URL for a brand-new, empty store of the backend under test. */
static void t_empty_store_url(char *out, size_t n, t_raw *raw, char *dbname)
{
    char u[OG_UUID_LEN + 1];

    t_uuid(u);
    if (t_kind == T_SQLITE) {
        snprintf(out, n, "%.*s-empty-%.8s.db", (int)(strlen(t_url) - 3), t_url, u);
        dbname[0] = '\0';
        return;
    }
    snprintf(dbname, 64, "og_empty_%.8s", u);
    {
        char sql[128];
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", dbname);
        assert_int_equal(t_raw_exec(raw, sql), 0);
    }
    /* A key=value string after the URI: the later dbname wins in libpq. */
    snprintf(out, n, "host=127.0.0.1 port=%s user=postgres dbname=%s",
             getenv("OG_TEST_PG_PORT") ? getenv("OG_TEST_PG_PORT") : "5432",
             dbname);
}

static void schema_version_is_checked_when_a_store_is_opened(void **state)
{
    t_raw *raw = t_raw_open();
    char url[4200], dbname[64];
    og_store *s = NULL;
    int from = -1, to = -1;

    t_empty_store_url(url, sizeof url, raw, dbname);
    assert_int_equal(og_store_open(url, NULL, &s), OG_ESCHEMA);
    assert_null(s);
    assert_int_equal(og_store_migrate(url, NULL, &from, &to), 0);
    assert_int_equal(from, 0);
    assert_int_equal(to, OG_SCHEMA_VERSION);
    assert_int_equal(og_store_migrate(url, NULL, &from, &to), 0);
    assert_int_equal(from, OG_SCHEMA_VERSION);
    assert_int_equal(to, OG_SCHEMA_VERSION);
    s = t_store_url(url, 1, 0);
    og_store_free(s);
    s = NULL;

    /* A store migrated by a newer build is refused, and not downgraded. */
    {
        og_store_options o;
        t_raw *r2 = t_raw_open_url(url);

        og_store_options_default(&o);
        o.pool_size = 1;
        assert_int_equal(t_raw_exec(r2, t_kind == T_SQLITE
                                            ? "INSERT INTO og_schema_migrations"
                                              " VALUES (99, 'future', 0)"
                                            : "INSERT INTO og_schema_migrations"
                                              " (version, description)"
                                              " VALUES (99, 'future')"),
                         0);
        t_raw_close(r2);
        assert_int_equal(og_store_open(url, &o, &s), OG_ESCHEMA);
        assert_int_equal(og_store_migrate(url, &o, &from, &to), OG_ESCHEMA);
    }
    t_empty_store_drop(url, dbname, raw);
    t_raw_close(raw);
}

#define MIGRATORS 4

static void concurrent_migrations_serialize(void **state)
{
    t_raw *raw = t_raw_open();
    char url[4200], dbname[64];

    t_empty_store_url(url, sizeof url, raw, dbname);
    /* Exactly one migrator found it empty and applied every migration. */
    assert_int_equal(t_concurrent_migrations(url, MIGRATORS, 0), 1);
    og_store_free(t_store_url(url, 1, 0));
    t_empty_store_drop(url, dbname, raw);
    t_raw_close(raw);
}

/* The store suite's own tests: argv[2] "main". */
static const struct CMUnitTest t_main_tests[] = {
    cmocka_unit_test(bad_store_urls_are_rejected),
    cmocka_unit_test(admitted_operation_is_recorded_with_store_clock_fields),
    cmocka_unit_test(same_operation_retry_gets_the_stored_record),
    cmocka_unit_test(operation_id_reused_with_other_details_is_refused),
    cmocka_unit_test(operation_id_reused_for_another_grant_is_refused),
    cmocka_unit_test(another_operation_for_a_spent_grant_is_refused),
    cmocka_unit_test(grant_key_held_by_a_revocation_is_refused),
    cmocka_unit_test(recreated_store_client_still_refuses),
    cmocka_unit_test(store_enforces_the_admission_deadline),
    cmocka_unit_test(bad_input_gets_a_clear_error_and_writes_nothing),
    cmocka_unit_test(schema_version_is_checked_when_a_store_is_opened),
    cmocka_unit_test(concurrent_migrations_serialize),
    cmocka_unit_test(separate_store_instances_cannot_both_admit),
    cmocka_unit_test(separate_processes_cannot_both_admit),
    cmocka_unit_test(one_operation_id_raced_across_grants_binds_one),
    cmocka_unit_test(cli_processes_launched_concurrently_admit_once),
};
static const size_t t_main_tests_count =
    sizeof t_main_tests / sizeof t_main_tests[0];

/* The groups of the other files, each an array and its length. */
/* Backend-specific store-failure tests: failures.c. */
extern const struct CMUnitTest t_batch_tests[];
extern const size_t t_batch_tests_count;
/* The group commit of outcomes: outcome_batch.c. */
extern const struct CMUnitTest t_outcome_batch_tests[];
extern const size_t t_outcome_batch_tests_count;
/* The consume verdict's group commit: consume_batch.c. */
extern const struct CMUnitTest t_consume_batch_tests[];
extern const size_t t_consume_batch_tests_count;
/* Ticket rotations' group commit: rotate_batch.c. */
extern const struct CMUnitTest t_rotate_batch_tests[];
extern const size_t t_rotate_batch_tests_count;
extern const struct CMUnitTest t_failure_tests[];
extern const size_t t_failure_tests_count;
extern const struct CMUnitTest t_outage_tests[];
extern const size_t t_outage_tests_count;
/* The execution ownership protocol: execution.c. */
extern const struct CMUnitTest t_execution_tests[];
extern const size_t t_execution_tests_count;
/* One recovery pass against the real sandbox: recovery.c. */
extern const struct CMUnitTest t_recovery_tests[];
extern const size_t t_recovery_tests_count;
/* Cleanup and archiving: retention.c. */
extern const struct CMUnitTest t_retention_tests[];
extern const size_t t_retention_tests_count;
/* Issuance, revocation, families, consume, tickets: lifecycle.c. */
extern const struct CMUnitTest t_lifecycle_tests[];
extern const size_t t_lifecycle_tests_count;
/* Hashed consumption keys: hashed.c. */
extern const struct CMUnitTest t_hashed_tests[];
extern const size_t t_hashed_tests_count;
/* Redemption recovery points: redemption.c. */
extern const struct CMUnitTest t_redemption_tests[];
extern const size_t t_redemption_tests_count;
/* The payout decision side (schema 7): payouts.c. */
extern const struct CMUnitTest t_payout_tests[];
extern const size_t t_payout_tests_count;
/* The payout worker, sweeper and reconciler against the sandbox:
 * payout_exec.c. */
extern const struct CMUnitTest t_payout_exec_tests[];
extern const size_t t_payout_exec_tests_count;

/* argv[2] chooses one group: its tests run as "<label>-<backend>", the
 * name cmocka prints (tests/meson.build runs each group as its own meson
 * test). */
static const struct t_group {
    const char *name;                /* argv[2] */
    const char *label;               /* cmocka's group name, before -BACKEND */
    const struct CMUnitTest *tests;
    const size_t *count;
} t_groups[] = {
    {"main", "conformance", t_main_tests, &t_main_tests_count},
    {"lifecycle", "lifecycle", t_lifecycle_tests, &t_lifecycle_tests_count},
    {"execution", "execution", t_execution_tests, &t_execution_tests_count},
    {"recovery", "recovery", t_recovery_tests, &t_recovery_tests_count},
    {"retention", "retention", t_retention_tests, &t_retention_tests_count},
    {"failures", "failures", t_failure_tests, &t_failure_tests_count},
    {"batch", "batch", t_batch_tests, &t_batch_tests_count},
    {"outcome-batch", "outcome-batch", t_outcome_batch_tests,
     &t_outcome_batch_tests_count},
    {"consume-batch", "consume-batch", t_consume_batch_tests,
     &t_consume_batch_tests_count},
    {"rotate-batch", "rotate-batch", t_rotate_batch_tests,
     &t_rotate_batch_tests_count},
    {"hashed", "hashed", t_hashed_tests, &t_hashed_tests_count},
    {"redemption", "redemption", t_redemption_tests,
     &t_redemption_tests_count},
    {"payouts", "payouts", t_payout_tests, &t_payout_tests_count},
    {"payout-exec", "payout-exec", t_payout_exec_tests,
     &t_payout_exec_tests_count},
    {"outage", "outage", t_outage_tests, &t_outage_tests_count},
};

int main(int argc, char **argv)
{
    const char *group = argc > 2 ? argv[2] : "main";
    const struct t_group *g = NULL;
    char name[64];
    int rc;

    for (size_t i = 0; i < sizeof t_groups / sizeof t_groups[0]; i++)
        if (strcmp(t_groups[i].name, group) == 0)
            g = &t_groups[i];
    /* form and keys first: the suite's store is migrated in its keys */
    if (!g || t_suite_args(argc, argv) != 0) {
        fprintf(stderr, "usage: conformance BACKEND [GROUP [token|row "
                        "[readable|hashed]]]\nGROUP:");
        for (size_t i = 0; i < sizeof t_groups / sizeof t_groups[0]; i++)
            fprintf(stderr, " %s", t_groups[i].name);
        fprintf(stderr, "\n");
        return 1;
    }
    rc = t_setup_backend(argc > 1 ? argv[1] : NULL);
    if (rc != 0)
        return rc;
    snprintf(name, sizeof name, "%s-%s", g->label,
             t_kind == T_SQLITE ? "sqlite" : "postgres");
    rc = t_run_group(name, g->tests, *g->count, NULL, NULL);
    t_teardown_backend();
    return rc;
}
