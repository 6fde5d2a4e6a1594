/*
 * failures.c — the store failing under an admission. The claim under test
 * everywhere: a store that is unreachable, times out, is cancelled, loses
 * its connection or cannot confirm the commit gives OG_ESTORE_UNAVAILABLE —
 * never REFUSED, never ADMITTED — and a retry with the same operation id
 * then gets a defined answer.
 *
 *   failures group: safe to run beside other tests.
 *   outage group:   stops the PostgreSQL server or changes its replication
 *                   settings; meson runs it alone (is_parallel: false).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)

static void f_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* t_url with an application_name, so a test can find the store's backend in
 * pg_stat_activity. */
static void f_pg_url_named(char *out, size_t n, const char *app)
{
    snprintf(out, n, "%s%sapplication_name=%s", t_url,
             strchr(t_url, '?') ? "&" : "?", app);
}

/* Polls until the named store backend waits on wait_event_type `type`
 * (e.g. 'Lock', 'IPC' for SyncRep); its pid, or -1 after 15 s. */
static long f_pg_wait_for_backend(t_raw *raw, const char *app,
                                  const char *event)
{
    for (int i = 0; i < 1500; i++) {
        int64_t pid = t_raw_int(raw,
                                "SELECT pid FROM pg_stat_activity"
                                " WHERE application_name = '%s'"
                                "   AND wait_event = '%s'",
                                app, event);
        if (pid != INT64_MIN)
            return (long)pid;
        f_sleep_ms(10);
    }
    return -1;
}

typedef struct f_bg {
    og_store *s;
    t_case *c;
    int rc;
    og_admission a;
} f_bg;

static void *f_bg_admit(void *arg)
{
    f_bg *b = arg;
    b->rc = og_admit(b->s, &b->c->g, &b->c->in, &b->a);
    return NULL;
}

/* Holds the grant key in an uncommitted transaction on a raw connection:
 * a conflicting claim that is not yet decided. */
static void f_hold_key(t_raw *holder, const t_case *c)
{
    char sql[1024], key[512];

    assert_int_equal(t_raw_exec(holder, t_kind == T_POSTGRES ? "BEGIN"
                                                             : "BEGIN IMMEDIATE"),
                     0);
    snprintf(sql, sizeof sql,
             t_kind == T_POSTGRES
                 ? "INSERT INTO grant_consumptions (%s,"
                   " operation_id, consumed_at, retain_until, kind) VALUES"
                   " (%s, NULL, now(), now() + interval '1 hour',"
                   " 'revocation')"
                 : "INSERT INTO grant_consumptions (%s,"
                   " operation_id, consumed_at, retain_until, kind) VALUES"
                   " (%s, NULL, 0, 0, 'revocation')",
             t_key_columns(),
             t_key_values(ISSUER, c->grant_id, key, sizeof key));
    assert_int_equal(t_raw_exec(holder, sql), 0);
}

/* Forks a process that opens its own raw connection, runs hold() on it to
 * take a lock (and maybe write inside a transaction), says so, and waits to
 * be killed mid-transaction. Returns its pid once it holds the lock. */
static pid_t f_spawn_holder(void (*hold)(t_raw *, const t_case *),
                            const t_case *c)
{
    int p[2];
    char ready;
    pid_t kid;

    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        t_raw *holder = t_raw_open();
        hold(holder, c);
        if (write(p[1], "r", 1) != 1)
            _exit(2);
        pause();
        _exit(0);
    }
    assert_int_equal(read(p[0], &ready, 1), 1);
    close(p[0]);
    close(p[1]);
    return kid;
}

static void f_kill(pid_t kid)
{
    int st;

    kill(kid, SIGKILL);
    assert_int_equal(waitpid(kid, &st, 0), kid);
}

/* The whole database, exclusively (SQLite). */
static void f_hold_database(t_raw *holder, const t_case *c)
{
    if (t_raw_exec(holder, "BEGIN EXCLUSIVE") != 0)
        _exit(2);
}

/* ===========================================================================
 * failures group
 * ========================================================================= */

/* An admission waiting behind an undecided conflicting claim past the store
 * timeout (PostgreSQL: statement_timeout and the client deadline; SQLite:
 * busy_timeout on the write lock) is unavailable, not refused; after the
 * other transaction rolls back, the retry admits. */
static void admission_waiting_past_the_store_timeout_is_unavailable(void **state)
{
    og_store *s = t_store(1, 400);
    t_raw *holder = t_raw_open();
    t_case c;
    og_admission a;

    t_case_new(&c);
    f_hold_key(holder, &c);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(t_raw_exec(holder, "ROLLBACK"), 0);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    t_raw_close(holder);
    og_store_free(s);
}

/* PostgreSQL: pg_terminate_backend while the admission waits behind a
 * conflicting uncommitted claim. SQLite: the process that holds the write
 * transaction with a claim in it is killed. Either way the admission in
 * flight is unavailable or never happened, and a retry with the same
 * operation id gets a defined answer. */
static void backend_terminated_mid_admission_is_unavailable(void **state)
{
    t_raw *raw = t_raw_open();
    t_case c;
    og_admission a;

    t_case_new(&c);
    if (t_kind == T_POSTGRES) {
        for (int committed = 0; committed <= 1; committed++) {
            char url[4200], app[64];
            t_raw *holder = t_raw_open();
            pthread_t th;
            f_bg bg;
            long pid;
            og_store *s;

            t_case_new(&c);
            snprintf(app, sizeof app, "og-term-%.8s", c.op);
            f_pg_url_named(url, sizeof url, app);
            s = t_store_url(url, 1, 20000);
            f_hold_key(holder, &c);
            bg = (f_bg){s, &c, 1, {0}};
            assert_int_equal(pthread_create(&th, NULL, f_bg_admit, &bg), 0);
            pid = f_pg_wait_for_backend(raw, app, "transactionid");
            assert_true(pid > 0); /* it waits on the other transaction */
            assert_int_equal(t_raw_int(raw, "SELECT pg_terminate_backend(%ld)::int",
                                       pid), 1);
            pthread_join(th, NULL);
            assert_int_equal(bg.rc, OG_ESTORE_UNAVAILABLE);

            /* The holder decides; the retry reports accordingly. */
            assert_int_equal(t_raw_exec(holder, committed ? "COMMIT" : "ROLLBACK"), 0);
            assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
            if (committed) {
                assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
                assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
            } else {
                assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
            }
            og_store_free(s);
            t_raw_close(holder);
        }
    } else {
        og_store *s;

        f_kill(f_spawn_holder(f_hold_key, &c)); /* killed mid-transaction */
        /* The killed writer's claim never committed. */
        assert_int_equal(t_raw_consumptions(raw, ISSUER, c.grant_id), 0);
        s = t_store(1, 0);
        assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
        og_store_free(s);
    }
    t_raw_close(raw);
}

/* PostgreSQL: nothing listens on the port. SQLite: the store is locked by
 * another process for longer than busy_timeout. */
static void unreachable_store_is_unavailable(void **state)
{
    t_case c;
    og_admission a;
    og_store *s = NULL;

    t_case_new(&c);
    if (t_kind == T_POSTGRES) {
        /* Port 1 on loopback: connection refused. */
        assert_int_equal(og_store_open("postgresql://postgres@127.0.0.1:1/oncegate"
                                       "?connect_timeout=2",
                                       NULL, &s),
                         OG_ESTORE_UNAVAILABLE);
        assert_null(s);
        assert_int_equal(og_store_migrate("host=127.0.0.1 port=1 dbname=x "
                                          "connect_timeout=2",
                                          NULL, NULL, NULL),
                         OG_ESTORE_UNAVAILABLE);
    } else {
        pid_t kid = f_spawn_holder(f_hold_database, &c);
        t_raw *raw;

        s = t_store(4, 300);
        assert_int_equal(og_admit(s, &c.g, &c.in, &a), OG_ESTORE_UNAVAILABLE);
        {
            /* Eight callers queued together on the locked store: each gives
             * up at its own deadline, none is admitted. */
            pthread_t th[8];
            t_case cs[8];
            f_bg bgs[8];
            for (int i = 0; i < 8; i++) {
                t_case_new(&cs[i]);
                bgs[i] = (f_bg){s, &cs[i], 1, {0}};
                assert_int_equal(pthread_create(&th[i], NULL, f_bg_admit, &bgs[i]), 0);
            }
            for (int i = 0; i < 8; i++) {
                pthread_join(th[i], NULL);
                assert_int_equal(bgs[i].rc, OG_ESTORE_UNAVAILABLE);
            }
        }
        f_kill(kid);
        raw = t_raw_open();
        assert_int_equal(t_raw_consumptions(raw, ISSUER, c.grant_id), 0);
        t_raw_close(raw);
        assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
        og_store_free(s);
    }
}

/* PostgreSQL: a multi-host URI whose first host is down, with
 * target_session_attrs=read-write, reaches the writable primary and admits.
 * SQLite has no hosts: the test is PostgreSQL's alone. */
static void multi_host_url_reaches_the_writable_primary(void **state)
{
    const char *port = getenv("OG_TEST_PG_PORT");
    char url[512];
    og_store *s;
    t_case c;
    og_admission a;

    if (t_kind != T_POSTGRES || !port) {
        skip();
        return;
    }
    snprintf(url, sizeof url,
             "postgresql://postgres@127.0.0.1:1,127.0.0.1:%s/oncegate"
             "?target_session_attrs=read-write&connect_timeout=2",
             port);
    s = t_store_url(url, 2, 0);
    t_case_new(&c);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    og_store_free(s);
}

const struct CMUnitTest t_failure_tests[] = {
    cmocka_unit_test(multi_host_url_reaches_the_writable_primary),
    cmocka_unit_test(admission_waiting_past_the_store_timeout_is_unavailable),
    cmocka_unit_test(backend_terminated_mid_admission_is_unavailable),
    cmocka_unit_test(unreachable_store_is_unavailable),
};
const size_t t_failure_tests_count =
    sizeof t_failure_tests / sizeof t_failure_tests[0];

/* ===========================================================================
 * outage group (PostgreSQL server-wide effects; run alone)
 * ========================================================================= */

static int f_pg_cluster(const char *verb)
{
    const char *ctl = getenv("OG_TEST_PG_CTL"), *dir = getenv("OG_TEST_PG_DIR");
    char cmd[1024];

    if (!ctl || !dir)
        return -1;
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' >/dev/null", ctl, verb, dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* PostgreSQL stopped under an open store: admissions are unavailable, a new
 * store cannot be opened, and after the restart the same operation is
 * admitted — nothing was admitted meanwhile. SQLite has no server to stop;
 * its equivalent is the locked store in the failures group. */
static void stopped_postgres_is_unavailable(void **state)
{
    og_store *s, *s2 = NULL;
    t_case c;
    og_admission a;

    if (t_kind != T_POSTGRES) {
        skip();
        return;
    }
    if (!getenv("OG_TEST_PG_CTL")) {
        fprintf(stderr, "OG_TEST_PG_CTL unset: cannot stop the server\n");
        fail();
    }
    t_case_new(&c);
    s = t_store(2, 2000);
    {
        t_case warm;
        t_case_new(&warm);
        assert_int_equal(og_admit(s, &warm.g, &warm.in, &a), 0);
    }
    assert_int_equal(f_pg_cluster("pause"), 0);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(og_store_open(t_url, NULL, &s2), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(f_pg_cluster("resume"), 0);
    /* Broken connections were dropped; the pool reconnects. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    og_store_free(s);
}

/* A commit whose synchronous-replication wait is cancelled is committed
 * locally but NOT durable on a standby: the admission must report
 * unavailable, never admitted. A retry with the same operation id then
 * finds the operation. */
static void cancelled_synchronous_replication_wait_is_unavailable(void **state)
{
    t_raw *raw;
    og_store *s;
    char url[4200], app[64];
    pthread_t th;
    t_case c;
    f_bg bg;
    long pid;
    og_admission a;

    if (t_kind != T_POSTGRES) {
        skip();
        return;
    }
    raw = t_raw_open();
    /* A standby that never connects: every commit waits for it. */
    assert_int_equal(t_raw_exec(raw, "ALTER SYSTEM SET synchronous_standby_names"
                                     " = 'og_phantom_standby'"),
                     0);
    assert_int_equal(t_raw_exec(raw, "SELECT pg_reload_conf()"), 0);
    f_sleep_ms(300);

    t_case_new(&c);
    snprintf(app, sizeof app, "og-syncrep-%.8s", c.op);
    f_pg_url_named(url, sizeof url, app);
    s = t_store_url(url, 1, 20000);
    bg = (f_bg){s, &c, 1, {0}};
    assert_int_equal(pthread_create(&th, NULL, f_bg_admit, &bg), 0);
    pid = f_pg_wait_for_backend(raw, app, "SyncRep");
    if (pid > 0)
        t_raw_int(raw, "SELECT pg_cancel_backend(%ld)::int", pid);
    pthread_join(th, NULL);

    assert_int_equal(t_raw_exec(raw, "ALTER SYSTEM RESET synchronous_standby_names"), 0);
    assert_int_equal(t_raw_exec(raw, "SELECT pg_reload_conf()"), 0);
    f_sleep_ms(300);

    assert_true(pid > 0);
    assert_int_equal(bg.rc, OG_ESTORE_UNAVAILABLE);
    /* The local commit happened: the retry finds this operation. */
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    og_store_free(s);
    t_raw_close(raw);
}

const struct CMUnitTest t_outage_tests[] = {
    cmocka_unit_test(stopped_postgres_is_unavailable),
    cmocka_unit_test(cancelled_synchronous_replication_wait_is_unavailable),
};
const size_t t_outage_tests_count =
    sizeof t_outage_tests / sizeof t_outage_tests[0];
