/*
 * retention.c — refusal retention and audit retention (docs/design.md,
 * "Retention: refusal records and operation records"; A-T14), against the
 * real engine:
 *   - og_store_cleanup deletes a consumption row — admission, revocation or
 *     consume — only once retain_until + cleanup_margin has passed on the
 *     store's clock, in bounded batches, and touches nothing else;
 *   - a grant within its retention stays refused after cleanup;
 *   - og_store_archive_operations moves or deletes finished operations with
 *     their history, never an open one, and an archived operation still
 *     answers for its grant and its id: refused, or the archived record,
 *     never a second admission;
 *   - a store at schema 3, 4 or 6 with data migrates to the current schema
 *     (8), once, under concurrent migrators, in the suite's keys, and
 *     cleanup, archiving, redemption recovery points and the payout store
 *     work on it; from 6, every old operation is a credit whose key and
 *     reference are its id, its history and event numbering carry on, and
 *     PostgreSQL does not rewrite operations;
 *   - archiving takes every terminal status (NotStarted and NotApplied
 *     too), never a Started operation.
 * Every test works in its own fresh store: cleanup and archiving act on the
 * whole store, and the counts they report are the claims under test. Times
 * are moved with SQL relative to the store's own clock; nothing sleeps.
 * The suite runs on readable and on hashed stores (argv[4]): raw SQL names
 * a consumption row by the suite's key (t_key_match, r_key_sql).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "store/store_int.h" /* og__store_migrate_to: a store as schema 6 left it */
#include "oncegate/payout_store.h"

#define SEC INT64_C(1000000)
#define ISSUER "support-approvals"
#define ADMITTED OG_OP_BIT(OG_OP_ADMITTED)

/* The store clock plus `seconds`, as an SQL expression of each engine
 * (SQLite: the backend's own SQ_NOW, microseconds). */
static void r_now_sql(char *buf, size_t n, int seconds)
{
    if (t_kind == T_POSTGRES)
        snprintf(buf, n, "(clock_timestamp() + interval '%d seconds')",
                 seconds);
    else
        snprintf(buf, n,
                 "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0)"
                 " AS INTEGER) * 1000 + %lld)",
                 (long long)seconds * SEC);
}

/* A fresh store of the backend under test, its raw connection and URL. */
typedef struct r_env {
    char url[4200];
    og_store *s;
    t_raw *raw;
    og_timings t; /* the store's timings (the defaults) */
} r_env;

static void r_open(r_env *e, const char *tag)
{
    og_store_options o;

    e->s = t_fresh_store(tag, e->url, sizeof e->url);
    e->raw = t_raw_open_url(e->url);
    og_store_options_default(&o);
    e->t = o.timings;
}

static void r_close(r_env *e)
{
    t_raw_close(e->raw);
    og_store_free(e->s);
}

static int64_t r_count(r_env *e, const char *table)
{
    return t_raw_int(e->raw, "SELECT count(*) FROM %s", table);
}

/* Moves grant_id's retain_until to `seconds` from the store's now. */
static void r_set_retain(r_env *e, const char *grant_id, int seconds)
{
    char now[160], match[512], sql[1024];

    r_now_sql(now, sizeof now, seconds);
    snprintf(sql, sizeof sql,
             "UPDATE grant_consumptions SET retain_until = %s WHERE %s", now,
             t_key_match(ISSUER, grant_id, match, sizeof match));
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

/* The values of the key columns (t_key_columns()) of the row of the SQL
 * expressions issuer and grant_id, in the suite's keys: hashed, computed
 * by the engine's og_consumption_key() (PostgreSQL: migration 5's; SQLite:
 * the store's C function, which t_raw registers too). */
static const char *r_key_sql(const char *issuer, const char *grant_id,
                             char *buf, size_t n)
{
    if (t_keys == OG_KEYS_HASHED)
        snprintf(buf, n, "og_consumption_key(%s, %s)", issuer, grant_id);
    else
        snprintf(buf, n, "%s, %s", issuer, grant_id);
    return buf;
}

/* Inserts n consumption rows of kind (admission rows get an operation id
 * of their own) named PREFIX-1..n, retained until `seconds` from now, with
 * SQL, not through the API. */
static void r_bulk(r_env *e, const char *prefix, const char *kind, int n,
                   int seconds)
{
    char now[160], gid[64], key[256], sql[1024];
    bool adm = strcmp(kind, "admission") == 0;

    r_now_sql(now, sizeof now, seconds);
    snprintf(gid, sizeof gid, "'%s-' || %s", prefix,
             t_kind == T_POSTGRES ? "g" : "n");
    r_key_sql("'bulk'", gid, key, sizeof key);
    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "INSERT INTO grant_consumptions (%s,"
                 " operation_id, consumed_at, retain_until, kind)"
                 " SELECT %s, %s, clock_timestamp(), %s, '%s'"
                 " FROM generate_series(1, %d) g",
                 t_key_columns(), key, adm ? "gen_random_uuid()" : "NULL",
                 now, kind, n);
    else
        snprintf(sql, sizeof sql,
                 "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL"
                 " SELECT n + 1 FROM g WHERE n < %d)"
                 " INSERT INTO grant_consumptions (%s,"
                 " operation_id, consumed_at, retain_until, kind)"
                 " SELECT %s, %s, %s, %s, '%s' FROM g",
                 n, t_key_columns(), key,
                 adm ? "printf('%08d-0000-4000-8000-000000000000', n)"
                     : "NULL",
                 now, now, kind);
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

static bool r_held(r_env *e, const char *issuer, const char *grant_id)
{
    char match[512];

    return t_raw_int(e->raw, "SELECT count(*) FROM grant_consumptions WHERE %s",
                     t_key_match(issuer, grant_id, match, sizeof match)) == 1;
}

static og_cleanup_stats r_cleanup(r_env *e, int batch, int max_batches)
{
    og_cleanup_stats st;

    assert_int_equal(og_store_cleanup(e->s, batch, max_batches, &st), 0);
    return st;
}

static og_archive_stats r_archive(r_env *e, int64_t older_than_us,
                                  og_archive_mode mode)
{
    og_archive_stats st;

    /* An operation is archived when its last change lies STRICTLY more
     * than older_than before the store's clock. With 0, a status recorded
     * in the same clock tick (SQLite's clock has millisecond resolution)
     * is not yet older than now: let the clock move past it first. */
    if (older_than_us == 0) {
        struct timespec ts = {0, 3 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(og_store_archive_operations(e->s, older_than_us, mode,
                                                 100, 100, &st),
                     0);
    return st;
}

/* Admits a fresh grant (expiring in 15 minutes) on e's store. */
static og_operation r_admit(r_env *e, t_case *c)
{
    og_admission a;

    t_case_new(c);
    assert_int_equal(og_admit(e->s, &c->g, &c->in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    return a.operation;
}

/* c's grant presented by a new operation: the answer. */
static og_admission r_other_op(r_env *e, const t_case *c)
{
    t_case again = *c;
    og_admission a;

    t_uuid(again.op);
    again.in.operation_id = again.op;
    assert_int_equal(og_admit(e->s, &again.g, &again.in, &a), 0);
    return a;
}

static og_admission r_same_op(r_env *e, const t_case *c)
{
    og_admission a;

    assert_int_equal(og_admit(e->s, &c->g, &c->in, &a), 0);
    return a;
}

static void r_record(r_env *e, const char *op, unsigned expected,
                     og_op_status to)
{
    og_op_outcome o = {to, "test", NULL, "handler", NULL};
    bool rec = false;

    assert_int_equal(og_op_record(e->s, op, expected, 1, &o, &rec), 0);
    assert_true(rec);
}

/* c's grant is spent for any other operation (the consumption row names
 * c's), and c's own retry is answered with its record, in status st. */
static void r_assert_spent_and_retry_reported(r_env *e, const t_case *c,
                                              og_op_status st)
{
    og_admission a = r_other_op(e, c);

    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    a = r_same_op(e, c);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_string_equal(a.operation.operation_id, c->op);
    assert_int_equal(a.operation.status, st);
    assert_int_equal(a.operation.owner_version, 1);
}

static const char *const r_revokers[] = {"supervisor-3"};
static const og_revoke_policy r_policy = {r_revokers, 1};

/* Revokes c's grant (never admitted) with a trusted expiry 15 minutes out. */
static void r_revoke(r_env *e, const t_case *c)
{
    og_revocation rv = {ISSUER, c->grant_id, "supervisor-3",
                        t_now_us() + 15 * 60 * SEC, OG_FORM_TOKEN};
    og_revoke_outcome ro;

    assert_int_equal(og_revoke(e->s, &r_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
}

/* ===========================================================================
 * Refusal retention: cleanup
 * ========================================================================= */

static void cleanup_never_deletes_a_row_before_retain_until_plus_margin(
    void **state)
{
    int margin = 0;
    og_cleanup_stats st;
    t_case live, past, inside, outside;
    r_env e;

    (void)state;
    r_open(&e, "ret_bound");
    margin = (int)(e.t.cleanup_margin_us / SEC); /* 300 s by default */
    r_admit(&e, &live);
    r_admit(&e, &past);
    r_admit(&e, &inside);
    r_admit(&e, &outside);
    /* retain_until relative to the store's clock: still retained; past it
     * but within the margin (twice); past it by more than the margin. The
     * 30 s either side of the boundary leave room for a slow machine. */
    r_set_retain(&e, past.grant_id, -10);
    r_set_retain(&e, inside.grant_id, -(margin - 30));
    r_set_retain(&e, outside.grant_id, -(margin + 30));

    st = r_cleanup(&e, 1000, 10);
    assert_int_equal(st.admissions, 1);
    assert_int_equal(st.revocations, 0);
    assert_int_equal(st.consumes, 0);
    assert_int_equal(st.batches, 1);
    assert_true(r_held(&e, ISSUER, live.grant_id));
    assert_true(r_held(&e, ISSUER, past.grant_id));
    assert_true(r_held(&e, ISSUER, inside.grant_id));
    assert_false(r_held(&e, ISSUER, outside.grant_id));

    /* Again: nothing more is due. */
    st = r_cleanup(&e, 1000, 10);
    assert_int_equal(st.admissions + st.revocations + st.consumes, 0);
    assert_int_equal(st.batches, 1);
    assert_int_equal(r_count(&e, "grant_consumptions"), 3);
    /* The operations all stay. */
    assert_int_equal(r_count(&e, "operations"), 4);
    r_close(&e);
}

static void grant_still_within_retain_until_is_refused_after_cleanup(
    void **state)
{
    og_operation op;
    t_case c, old;
    r_env e;

    (void)state;
    r_open(&e, "ret_refused");
    op = r_admit(&e, &c);
    r_admit(&e, &old);
    r_set_retain(&e, old.grant_id, -3600); /* due long ago */
    r_bulk(&e, "due", "consume", 20, -3600);

    assert_int_equal(r_cleanup(&e, 1000, 10).consumes, 20);
    assert_false(r_held(&e, ISSUER, old.grant_id));
    assert_true(r_held(&e, ISSUER, c.grant_id));

    /* The grant is still within its retention: spent for anyone else, and
     * its own operation's retry gets the record. */
    r_assert_spent_and_retry_reported(&e, &c, OG_OP_ADMITTED);
    assert_string_equal(op.operation_id, c.op);
    assert_int_equal(r_count(&e, "operations"), 2);
    r_close(&e);
}

static void revocation_row_survives_until_its_retain_until_plus_margin(
    void **state)
{
    int margin;
    og_cleanup_stats st;
    og_admission a;
    t_case kept, due;
    r_env e;

    (void)state;
    r_open(&e, "ret_revoked");
    margin = (int)(e.t.cleanup_margin_us / SEC);
    t_case_new(&kept);
    t_case_new(&due);
    r_revoke(&e, &kept);
    r_revoke(&e, &due);

    /* Past retain_until, within the margin: kept, and still refusing. */
    r_set_retain(&e, kept.grant_id, -(margin - 30));
    r_set_retain(&e, due.grant_id, -(margin - 30));
    st = r_cleanup(&e, 1000, 10);
    assert_int_equal(st.revocations, 0);
    assert_true(r_held(&e, ISSUER, kept.grant_id));
    a = r_other_op(&e, &kept);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);

    /* Past retain_until + margin: it goes, and only it. */
    r_set_retain(&e, due.grant_id, -(margin + 30));
    st = r_cleanup(&e, 1000, 10);
    assert_int_equal(st.revocations, 1);
    assert_int_equal(st.admissions + st.consumes, 0);
    assert_true(r_held(&e, ISSUER, kept.grant_id));
    assert_false(r_held(&e, ISSUER, due.grant_id));
    r_close(&e);
}

static void cleanup_deletes_in_bounded_batches(void **state)
{
    og_cleanup_stats st;
    t_case live[5];
    r_env e;

    (void)state;
    r_open(&e, "ret_batches");
    for (int i = 0; i < 5; i++)
        r_admit(&e, &live[i]);
    r_bulk(&e, "rv", "revocation", 40, -7200);
    r_bulk(&e, "cs", "consume", 30, -7200);
    r_bulk(&e, "ad", "admission", 25, -7200);
    r_bulk(&e, "lv", "consume", 7, 3600); /* live, not yet due */
    assert_int_equal(r_count(&e, "grant_consumptions"), 5 + 95 + 7);

    /* 95 due rows, 10 a batch: nine full batches and one of 5. */
    st = r_cleanup(&e, 10, 100);
    assert_int_equal(st.batches, 10);
    assert_int_equal(st.revocations, 40);
    assert_int_equal(st.consumes, 30);
    assert_int_equal(st.admissions, 25);
    assert_int_equal(r_count(&e, "grant_consumptions"), 5 + 7);
    for (int i = 0; i < 5; i++)
        assert_true(r_held(&e, ISSUER, live[i].grant_id));

    /* A call's cursor starts afresh: a due row older than everything the
     * last call deleted is still found. */
    r_bulk(&e, "older", "revocation", 3, -30 * 86400);
    st = r_cleanup(&e, 10, 100);
    assert_int_equal(st.revocations, 3);
    assert_int_equal(st.batches, 1);

    /* max_batches bounds one call; the next one carries on. */
    r_bulk(&e, "more", "consume", 30, -7200);
    st = r_cleanup(&e, 10, 2);
    assert_int_equal(st.batches, 2);
    assert_int_equal(st.consumes, 20);
    st = r_cleanup(&e, 10, 2);
    assert_int_equal(st.consumes, 10);
    assert_int_equal(st.batches, 2); /* 10, then 0 */
    assert_int_equal(r_count(&e, "grant_consumptions"), 5 + 7);

    /* Bad bounds are refused before the store. */
    assert_int_equal(og_store_cleanup(e.s, 0, 1, &st), OG_EINVAL);
    assert_int_equal(og_store_cleanup(e.s, OG_RETENTION_BATCH_MAX + 1, 1, &st),
                     OG_EINVAL);
    assert_int_equal(og_store_cleanup(e.s, 10, 0, &st), OG_EINVAL);
    assert_int_equal(og_store_cleanup(NULL, 10, 1, &st), OG_EINVAL);
    assert_int_equal(og_store_cleanup(e.s, 10, 1, NULL), OG_EINVAL);
    r_close(&e);
}

#define MANY 60

static void after_many_grants_expire_cleanup_leaves_only_live_rows(
    void **state)
{
    og_cleanup_stats st;
    t_case c[MANY];
    og_consume_result cr;
    int expired_adm = 0, expired_rev = 0, expired_con = 0, live = 0;
    r_env e;

    (void)state;
    r_open(&e, "ret_many");
    /* Every third grant admitted, revoked or consumed, through the API; two
     * of every three then expire (beyond the margin), the rest stay. */
    for (int i = 0; i < MANY; i++) {
        bool expire = i % 3 != 0;

        if (i % 3 == 0 || i % 5 == 0) {
            r_admit(&e, &c[i]);
            expired_adm += expire;
        } else if (i % 2 == 0) {
            t_case_new(&c[i]);
            r_revoke(&e, &c[i]);
            expired_rev += expire;
        } else {
            t_case_new(&c[i]);
            assert_int_equal(og_consume(e.s, &c[i].g, &cr), 0);
            assert_true(cr.consumed);
            expired_con += expire;
        }
        if (expire)
            r_set_retain(&e, c[i].grant_id,
                         -(int)(e.t.cleanup_margin_us / SEC) - 60);
        else
            live++;
    }
    st = r_cleanup(&e, 7, 1000);
    assert_int_equal(st.admissions, expired_adm);
    assert_int_equal(st.revocations, expired_rev);
    assert_int_equal(st.consumes, expired_con);
    assert_int_equal(r_count(&e, "grant_consumptions"), live);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(r_held(&e, ISSUER, c[i].grant_id), i % 3 == 0);
    /* The live ones still refuse. */
    for (int i = 0; i < MANY; i += 3)
        assert_int_equal(r_other_op(&e, &c[i]).outcome, OG_OUTCOME_REFUSED);
    r_close(&e);
}

/* ===========================================================================
 * Audit retention: archiving operations
 * ========================================================================= */

/* Moves op's last status change `seconds` into the past (store clock). */
static void r_age_op(r_env *e, const char *op, int seconds)
{
    char now[160], sql[512];

    r_now_sql(now, sizeof now, -seconds);
    snprintf(sql, sizeof sql,
             "UPDATE operations SET updated_at = %s WHERE operation_id = '%s'",
             now, op);
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

static int64_t r_events_of(r_env *e, const char *table, const char *op)
{
    return t_raw_int(e->raw,
                     "SELECT count(*) FROM %s WHERE operation_id = '%s'",
                     table, op);
}

static void cleanup_never_touches_operations_and_archive_never_touches_open_operations(
    void **state)
{
    static const char *const untouched[] = {
        "operations", "operation_events", "grant_issuance", "grants",
        "families", "tickets"};
    int64_t before[sizeof untouched / sizeof untouched[0]];
    t_case adm, unk, rec, suc, fai, recent, row;
    og_ticket_result tk;
    og_issue_outcome io;
    og_archive_stats as;
    og_operation op;
    char digest[65];
    r_env e;

    (void)state;
    r_open(&e, "ret_ops");
    /* One operation in every status, with history. */
    r_admit(&e, &adm);
    r_admit(&e, &unk);
    r_record(&e, unk.op, ADMITTED, OG_OP_UNKNOWN);
    r_admit(&e, &rec);
    r_record(&e, rec.op, ADMITTED, OG_OP_NEEDS_RECONCILIATION);
    r_admit(&e, &suc);
    r_record(&e, suc.op, ADMITTED, OG_OP_SUCCEEDED);
    r_admit(&e, &fai);
    r_record(&e, fai.op, ADMITTED, OG_OP_FAILED);
    r_admit(&e, &recent);
    r_record(&e, recent.op, ADMITTED, OG_OP_SUCCEEDED);
    /* And every other kind of row: an issued row-form grant, admitted, in
     * a family, and a ticket in it. */
    t_case_new(&row);
    assert_int_equal(og_params_digest(row.in.account_id, row.in.amount,
                                      row.in.currency, digest),
                     0);
    {
        og_issuance iss = {ISSUER, row.grant_id, "fam-ret", row.in.caller_id,
                           "credit.apply", digest, t_now_us() - 60 * SEC,
                           row.g.expires_at_us, OG_FORM_ROW};
        og_admission a;

        assert_int_equal(og_issuance_record(e.s, &iss, &io), 0);
        assert_int_equal(io, OG_ISSUE_RECORDED);
        row.g.form = OG_FORM_ROW;
        row.g.family = "fam-ret";
        assert_int_equal(og_admit(e.s, &row.g, &row.in, &a), 0);
        assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    }
    assert_int_equal(og_ticket_create(e.s, ISSUER, "fam-ret", &tk), 0);
    assert_int_equal(tk.outcome, OG_TICKET_ISSUED);
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++)
        before[i] = r_count(&e, untouched[i]);

    /* Every consumption row due: cleanup takes them all, and only them. */
    assert_int_equal(t_raw_exec(e.raw, t_kind == T_POSTGRES
                                           ? "UPDATE grant_consumptions SET"
                                             " retain_until = now() - interval"
                                             " '30 days'"
                                           : "UPDATE grant_consumptions SET"
                                             " retain_until = 0"),
                     0);
    assert_int_equal(r_cleanup(&e, 1000, 10).admissions, 6);
    assert_int_equal(r_count(&e, "grant_consumptions"), 0);
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++)
        assert_int_equal(r_count(&e, untouched[i]), before[i]);

    /* Archiving finished operations older than an hour: none yet. */
    as = r_archive(&e, 3600 * SEC, OG_ARCHIVE_MOVE);
    assert_int_equal(as.operations, 0);
    assert_int_equal(as.batches, 1);
    /* Age all but `recent` by two hours: only Succeeded and Failed move,
     * each with its history. */
    r_age_op(&e, adm.op, 7200);
    r_age_op(&e, unk.op, 7200);
    r_age_op(&e, rec.op, 7200);
    r_age_op(&e, suc.op, 7200);
    r_age_op(&e, fai.op, 7200);
    r_age_op(&e, row.op, 7200);
    as = r_archive(&e, 3600 * SEC, OG_ARCHIVE_MOVE);
    assert_int_equal(as.operations, 2);
    assert_int_equal(as.events, 2);
    assert_int_equal(og_operation_get(e.s, suc.op, &op), 0);
    assert_int_equal(og_operation_get(e.s, fai.op, &op), 0);
    assert_int_equal(r_count(&e, "operations_archive"), 2);
    assert_int_equal(r_events_of(&e, "operation_events_archive", suc.op), 1);
    assert_int_equal(r_events_of(&e, "operation_events", suc.op), 0);
    assert_int_equal(t_raw_int(e.raw,
                               "SELECT count(*) FROM operations_archive"
                               " WHERE operation_id = '%s' AND status ="
                               " 'Succeeded' AND caller_id = 'agent-17'",
                               suc.op),
                     1);
    /* Admitted, Unknown, NeedsReconciliation stay, with their history. */
    assert_int_equal(og_operation_get(e.s, adm.op, &op), 1);
    assert_int_equal(og_operation_get(e.s, unk.op, &op), 1);
    assert_int_equal(op.status, OG_OP_UNKNOWN);
    assert_int_equal(r_events_of(&e, "operation_events", unk.op), 1);
    assert_int_equal(og_operation_get(e.s, rec.op, &op), 1);
    assert_int_equal(r_events_of(&e, "operation_events", rec.op), 1);
    assert_int_equal(og_operation_get(e.s, recent.op, &op), 1);

    /* Delete mode: `recent`, now with no age bound, goes from both. */
    as = r_archive(&e, 0, OG_ARCHIVE_DELETE);
    assert_int_equal(as.operations, 1);
    assert_int_equal(og_operation_get(e.s, recent.op, &op), 0);
    assert_int_equal(r_events_of(&e, "operation_events", recent.op), 0);
    assert_int_equal(r_events_of(&e, "operations_archive", recent.op), 0);
    assert_int_equal(r_events_of(&e, "operation_events_archive", recent.op),
                     0);
    assert_int_equal(r_count(&e, "operations"), 4); /* 3 open + row form's */
    /* The row-form grant's row and the issuance log are never archived. */
    assert_int_equal(r_count(&e, "grants"), before[3]);
    assert_int_equal(r_count(&e, "grant_issuance"), before[2]);

    assert_int_equal(og_store_archive_operations(e.s, -1, OG_ARCHIVE_MOVE, 10,
                                                 1, &as),
                     OG_EINVAL);
    assert_int_equal(og_store_archive_operations(e.s, 0, (og_archive_mode)7,
                                                 10, 1, &as),
                     OG_EINVAL);
    r_close(&e);
}

static void archived_operation_keeps_its_grant_refused_and_same_operation_retry_is_not_readmitted(
    void **state)
{
    og_operation op;
    og_admission a;
    t_case c, other, gone;
    r_env e;

    (void)state;
    r_open(&e, "ret_arch");
    r_admit(&e, &c);
    r_record(&e, c.op, ADMITTED, OG_OP_SUCCEEDED);
    assert_int_equal(r_archive(&e, 0, OG_ARCHIVE_MOVE).operations, 1);
    assert_int_equal(og_operation_get(e.s, c.op, &op), 0);
    assert_true(r_held(&e, ISSUER, c.grant_id)); /* the claim stays */

    /* Another operation: the consumption row still names the archived one.
     * Nothing behind it in operations any more (the incidental second
     * barrier is gone), and still refused. The same operation's retry: the
     * archived record, never an admission, and nothing written. */
    r_assert_spent_and_retry_reported(&e, &c, OG_OP_SUCCEEDED);
    assert_int_equal(og_operation_get(e.s, c.op, &op), 0);

    /* The same retry once its consumption row is gone too (past retention):
     * its deadline has long passed, so the claim cannot happen; the answer
     * is still the archived record. */
    r_set_retain(&e, c.grant_id, -3600);
    assert_true(r_cleanup(&e, 100, 10).admissions == 1);
    c.g.expires_at_us = t_now_us() - 3600 * SEC;
    a = r_same_op(&e, &c);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_int_equal(a.operation.status, OG_OP_SUCCEEDED);
    assert_false(r_held(&e, ISSUER, c.grant_id));

    /* The archived operation's id keeps its meaning: reused for another
     * (valid, unspent) grant it is refused, and that grant stays unspent. */
    t_case_new(&other);
    other.in.operation_id = c.op;
    a.outcome = OG_OUTCOME_ADMITTED;
    assert_int_equal(og_admit(e.s, &other.g, &other.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_OPERATION_ID_TAKEN);
    assert_false(r_held(&e, ISSUER, other.grant_id));
    other.in.operation_id = other.op;
    assert_int_equal(og_admit(e.s, &other.g, &other.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    assert_int_equal(r_count(&e, "operations_archive"), 1);
    assert_int_equal(t_raw_int(e.raw,
                               "SELECT count(*) FROM operations"
                               " WHERE operation_id = '%s'",
                               c.op),
                     0);

    /* Deleted rather than archived: no record anywhere, the consumption
     * row still holds the grant. Refused for both, never admitted. */
    r_admit(&e, &gone);
    r_record(&e, gone.op, ADMITTED, OG_OP_FAILED);
    assert_int_equal(r_archive(&e, 0, OG_ARCHIVE_DELETE).operations, 1);
    a = r_same_op(&e, &gone);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    a = r_other_op(&e, &gone);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    assert_true(r_held(&e, ISSUER, gone.grant_id));
    assert_int_equal(og_operation_get(e.s, gone.op, &op), 0);
    r_close(&e);
}

/* ===========================================================================
 * The plans of admission and cleanup (og_store_explain, docs/plans.md)
 * ========================================================================= */

/* The whole file at path, NUL-terminated (malloc'd), or NULL. */
static char *r_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

/* How many times needle occurs in hay. */
static int r_count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* The section of plan under the heading that begins with heading, up to
 * the next heading, copied (malloc'd); fails the test when there is none. */
static char *r_section(const char *plan, const char *heading)
{
    const char *p = strstr(plan, heading), *q;
    char *out;

    if (!p) {
        fprintf(stderr, "og_store_explain lacks \"%s\"\n", heading);
        fail();
        return NULL;
    }
    q = strstr(p + strlen(heading), "\n### ");
    out = strndup(p, q ? (size_t)(q - p) : strlen(p));
    assert_non_null(out);
    return out;
}

/* docs/payouts.md section 7 step 4: each statement the payout pipeline
 * runs per payout or per loop pass is in og_store_explain, and reads by
 * the index docs/plans.md names for it (SQLite: the EXPLAIN QUERY PLAN
 * line; PostgreSQL: the index in its custom plan, and no sequential scan
 * of the table the index is on). The payout tables are empty here, so only
 * reads by a key or by a partial index of the loops are checked; the
 * plans on loaded tables are scripts/plans'. */
static void r_payout_pipeline_plans(const char *plan)
{
    static const struct {
        const char *heading;
        const char *sqlite;   /* a line of its EQP */
        const char *postgres; /* an index its custom plan uses */
        const char *table;    /* PostgreSQL: never scanned whole */
    } want[] = {
        /* one row (its CHECK): PostgreSQL may read it whole */
        {"### Payout decision: the policy's current release",
         "SEARCH payout_policy_releases USING PRIMARY KEY (operation=?)", NULL,
         NULL},
        {"### Payout decision and context read: the facts",
         "SEARCH p USING PRIMARY KEY (payout_id=?)", NULL, NULL},
        {"### Payout context read: the facts", NULL,
         "using payouts_pkey on payouts p", "payouts"},
        {"### Payout decision: the facts, locked", NULL,
         "using payouts_pkey on payouts p", "payouts"},
        {"### Payout decision and context read: the day's counters",
         "SEARCH tenant_days USING PRIMARY KEY (tenant_id=? AND day=?)",
         "tenant_days_pkey", "tenant_days"},
        {"### Payout claim: the facts",
         "SEARCH b USING PRIMARY KEY (grant_id=?)",
         "using payout_grants_pkey on payout_grants b", "payout_grants"},
        {"### Payout claim: the grant consumed",
         "SEARCH grants USING PRIMARY KEY (issuer=? AND grant_id=?)", NULL,
         NULL},
        {"### Payout claim: its writes", NULL, "using grants_pkey on grants g",
         "grants"},
        {"### Payout claim: the payout executing",
         "SEARCH payouts USING PRIMARY KEY (payout_id=?)", NULL, NULL},
        {"### Payout attempt: og_op_start",
         "SEARCH operations USING PRIMARY KEY (operation_id=?)",
         "using operations_pkey on operations", "operations"},
        {"### Payout jobs: the ack",
         "SEARCH payout_jobs USING PRIMARY KEY (job_id=?)", NULL, NULL},
        {"### Payout resolution: the outcome",
         "SEARCH operations USING PRIMARY KEY (operation_id=?)", NULL,
         "operations"},
        {"### Payout resolution: the binding and the payout",
         "SEARCH b USING PRIMARY KEY (grant_id=?)", "payout_grants_pkey",
         "payout_grants"},
        {"### Payout resolution: the day, reserved to paid",
         "SEARCH tenant_days USING PRIMARY KEY (tenant_id=? AND day=?)", NULL,
         NULL},
        {"### Payout sweeper: the lapsed Admitted and Started attempts",
         "SEARCH operations USING INDEX operations_recovery_scan_idx "
         "(status=? AND lease_until<?)",
         "operations_recovery_idx", "operations"},
        {"### Payout reconciler: the lapsed Unknown attempts",
         "SEARCH operations USING INDEX operations_recovery_scan_idx "
         "(status=? AND lease_until<?)",
         NULL, "operations"},
        /* schema 15: the backlog index holds no Admitted row, and the
         * operators' backlog still reads it */
        {"### Operators' backlog: Unknown and NeedsReconciliation",
         "SEARCH operations USING INDEX operations_backlog_idx (status=?)",
         "using operations_backlog_idx on operations", "operations"},
        {"### Payout sweeper and reconciler: the takeover",
         "SEARCH operations USING PRIMARY KEY (operation_id=?)",
         "using operations_pkey on operations", "operations"},
        {"### Payout reconciler: later",
         "SEARCH operations USING PRIMARY KEY (operation_id=?)", NULL,
         "operations"},
        {"### Payout evidence: the attempt",
         "SEARCH operations USING PRIMARY KEY (operation_id=?)",
         "using operations_pkey on operations", "operations"},
        {"### Payout return: the entry",
         "SEARCH a USING INDEX operations_archive_payout_grant_idx "
         "(issuer=? AND grant_id=?)",
         "operations_archive_payout_grant_idx", "operations_archive"},
    };

    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const char *line = t_kind == T_POSTGRES ? want[k].postgres
                                                : want[k].sqlite;
        char seq[128], *sec;
        bool bad;

        if (!line && (t_kind != T_POSTGRES || !want[k].table))
            continue;
        sec = r_section(plan, want[k].heading);
        snprintf(seq, sizeof seq, "Seq Scan on %s ",
                 want[k].table ? want[k].table : "-");
        bad = (line && !strstr(sec, line)) ||
              (t_kind == T_POSTGRES && want[k].table && strstr(sec, seq));
        if (bad)
            fprintf(stderr, "want \"%s\" in:\n%s\n", line ? line : "-",
                    sec);
        assert_false(bad);
        free(sec);
    }
}

/* Issue 6, "Plans": on a table of realistic shape (20000 live rows, 500
 * due; PostgreSQL: analyzed, enable_seqscan on), the plans og_store_explain
 * shows — of the very statements the store prepares, PostgreSQL's custom
 * and generic plan each — never scan grant_consumptions: the admission's
 * claim arbitrates on its primary key and its report reads by it, and
 * cleanup walks grant_consumptions_retain_until_idx; the payout store's
 * daily-limit reservation arbitrates on tenant_days_pkey, a job take walks
 * payout_jobs_available_idx and an expiry batch
 * payout_grants_unreleased_idx. Explaining claims and deletes nothing.
 * Every ```sql block of the output is in docs/plans.md
 * verbatim, so the document shows the statements this build runs (its
 * plans are scripts/plans' run on a loaded store). */
static void admission_and_cleanup_plans_use_indexes(void **state)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char *plan = NULL, *doc, *cleanup, *reserve, *take, *expire, path[4096];
    int64_t rows, ops;
    r_env e;

    (void)state;
    r_open(&e, "ret_explain");
    r_bulk(&e, "live", "admission", 20000, 3600);
    r_bulk(&e, "due", "consume", 500, -3600);
    if (t_kind == T_POSTGRES) {
        /* operations of realistic shape too (the pipeline's statements
         * read it by key or by a recovery index), one in ten open */
        assert_int_equal(
            t_raw_exec(e.raw,
                       "INSERT INTO operations (operation_id, issuer,"
                       " grant_id, caller_id, account_id, amount, currency,"
                       " status, owner_version, lease_until, submit_by,"
                       " created_at)"
                       " SELECT gen_random_uuid(), 'bulk', 'op-' || g,"
                       " 'agent-1', 'acct-1', 10.00, 'EUR',"
                       " CASE WHEN g % 10 = 0 THEN 'Admitted'"
                       " ELSE 'Succeeded' END, 1,"
                       " now() + interval '1 minute',"
                       " now() + interval '1 hour', now()"
                       " FROM generate_series(1, 20000) g"),
            0);
        assert_int_equal(t_raw_exec(e.raw, "ANALYZE grant_consumptions, "
                                           "operations"),
                         0);
    }
    rows = r_count(&e, "grant_consumptions");
    ops = r_count(&e, "operations");
    assert_int_equal(og_store_explain(e.s, 1000, &plan), 0);
    assert_non_null(plan);
    assert_int_equal(og_store_explain(e.s, 0, &plan), OG_EINVAL);
    /* nothing claimed, nothing deleted */
    assert_int_equal(r_count(&e, "grant_consumptions"), rows);
    assert_int_equal(r_count(&e, "operations"), ops);

    cleanup = strstr(plan, "### Cleanup");
    assert_non_null(cleanup);
    /* each section alone: the pipeline's follow them */
    reserve = r_section(plan, "### Payout decision: the daily-limit "
                              "reservation");
    take = r_section(plan, "### Payout jobs: take");
    expire = r_section(plan, "### Payout grants: one expiry batch");
    /* the payout store's: the reservation arbitrates on the day's key and
     * reads the tenant by its key, a take walks the available jobs' index,
     * an expiry batch the unreleased bindings' (each plan of each) */
    if (t_kind == T_POSTGRES) {
        if (strstr(reserve, "Seq Scan") || strstr(take, "Seq Scan on payout") ||
            strstr(expire, "Seq Scan on payout_grants"))
            fprintf(stderr, "plans:\n%s\n", reserve);
        assert_null(strstr(reserve, "Seq Scan"));
        assert_null(strstr(take, "Seq Scan on payout"));
        assert_null(strstr(expire, "Seq Scan on payout_grants"));
        assert_int_equal(r_count_of(reserve, "Conflict Arbiter Indexes: "
                                             "tenant_days_pkey"),
                         2);
        assert_true(r_count_of(reserve, "using tenants_pkey") >= 2);
        assert_true(r_count_of(take, "payout_jobs_available_idx") >= 2);
        assert_true(r_count_of(expire, "payout_grants_unreleased_idx") >= 2);
    } else {
        if (strstr(reserve, "SCAN ") || strstr(take, "SCAN payout_jobs") ||
            strstr(expire, "SCAN "))
            fprintf(stderr, "plans:\n%s\n", reserve);
        assert_null(strstr(reserve, "SCAN "));
        assert_non_null(strstr(reserve, "SEARCH tenants USING PRIMARY KEY"));
        assert_null(strstr(take, "SCAN payout_jobs"));
        assert_non_null(strstr(take, "USING INDEX payout_jobs_available_idx"));
        assert_null(strstr(expire, "SCAN "));
        assert_non_null(strstr(expire,
                               "USING INDEX payout_grants_unreleased_idx"));
    }
    free(reserve);
    free(take);
    free(expire);
    r_payout_pipeline_plans(plan);
    if (t_kind == T_POSTGRES) {
        if (strstr(plan, "Seq Scan on grant_consumptions") ||
            r_count_of(cleanup, "grant_consumptions_retain_until_idx") < 2)
            fprintf(stderr, "plans:\n%s\n", plan);
        assert_null(strstr(plan, "Seq Scan on grant_consumptions"));
        /* token form, custom and generic, one-row, batched and the
         * consume verdicts' batch: the claim's atomic check */
        assert_int_equal(r_count_of(plan, "Conflict Arbiter Indexes: "
                                          "grant_consumptions_pkey"),
                         6);
        /* the report of what holds the key, in both admission forms and
         * the follow-up read, each plan */
        assert_true(r_count_of(plan, "using grant_consumptions_pkey on "
                                     "grant_consumptions c") >= 6);
        /* and in each form of each batched statement, each plan */
        for (int f = 0; f < 4; f++) {
            static const char *const batched[4] = {
                "### Admission, batched (group commit), token form",
                "### Admission, batched (group commit), row form",
                "### Consume verdict, batched (group commit), token form",
                "### Consume verdict, batched (group commit), row form"};
            char *b = r_section(plan, batched[f]);
            assert_true(r_count_of(b, "using grant_consumptions_pkey on "
                                      "grant_consumptions c") >= 2);
            free(b);
        }
        /* cleanup picks due rows over the retain_until index (custom and
         * generic plan) */
        assert_true(r_count_of(cleanup, "grant_consumptions_retain_until_idx") >=
                    2);
    } else {
        if (strstr(plan, "SCAN grant_consumptions") ||
            !strstr(cleanup, "grant_consumptions_retain_until_idx"))
            fprintf(stderr, "plans:\n%s\n", plan);
        assert_null(strstr(plan, "SCAN grant_consumptions"));
        /* the claim's report and cleanup's delete search by the key */
        assert_true(r_count_of(plan, "SEARCH grant_consumptions USING PRIMARY "
                                     "KEY") >= 2);
        assert_non_null(strstr(cleanup, "grant_consumptions_retain_until_idx"));
    }

    /* docs/plans.md repeats every statement verbatim */
    assert_non_null(root);
    snprintf(path, sizeof path, "%s/docs/plans.md", root);
    doc = r_read_file(path);
    assert_non_null(doc);
    for (char *p = plan; (p = strstr(p, "```sql\n")) != NULL;) {
        char *q = strstr(p + 7, "\n```\n");
        assert_non_null(q);
        q[1] = '\0';
        if (!strstr(doc, p)) {
            fprintf(stderr, "docs/plans.md lacks this statement (run "
                            "scripts/plans):\n%s\n", p);
            fail();
        }
        q[1] = '`';
        p = q + 1;
    }
    free(doc);
    free(plan);
    r_close(&e);
}

/* ===========================================================================
 * Schema 3 or 4 with data -> the current schema, under concurrent migrators
 * ========================================================================= */

/* Takes e's store, at the current schema (8) and readable, back to schema
 * `version` (3 or 4) with its data: the objects of the later migrations and
 * their records dropped by hand (migrations 15, 13, 11, 8 and 7 by
 * t_undo_migration_15, t_undo_migration_13, t_undo_migration_11, t_undo_migration_8 and
 * t_undo_migration_7).
 * Every store below 5 is readable (5 records the keys). */
static void r_back_to(r_env *e, int version)
{
    char sql[2048];

    t_undo_migration_15(e->raw);
    t_undo_migration_13(e->raw);
    t_undo_migration_11(e->raw);
    t_undo_migration_8(e->raw);
    t_undo_migration_7(e->raw);
    snprintf(sql, sizeof sql,
             "BEGIN;"
             " DROP TABLE redemptions;"
             " DROP TABLE og_store_settings;"
             "%s%s"
             " DELETE FROM og_schema_migrations WHERE version > %d;"
             " COMMIT",
             t_kind == T_POSTGRES
                 ? " DROP FUNCTION og_consumption_key(text, text);"
                 : "",
             version < 4 ? " DROP INDEX operations_terminal_idx;"
                           " DROP TABLE operation_events_archive;"
                           " DROP TABLE operations_archive;"
                         : "",
             version);
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

/* Does grant_consumptions have the index cleanup walks, on retain_until? */
static bool r_has_retain_until_index(r_env *e)
{
    if (t_kind == T_POSTGRES)
        return t_raw_int(e->raw,
                         "SELECT count(*) FROM pg_indexes"
                         " WHERE tablename = 'grant_consumptions'"
                         "   AND indexname ="
                         "       'grant_consumptions_retain_until_idx'"
                         "   AND indexdef LIKE '%%(retain_until)'") == 1;
    return t_raw_int(e->raw,
                     "SELECT count(*) FROM pragma_index_info("
                     "'grant_consumptions_retain_until_idx') i,"
                     " sqlite_schema m"
                     " WHERE m.type = 'index'"
                     "   AND m.name = 'grant_consumptions_retain_until_idx'"
                     "   AND m.tbl_name = 'grant_consumptions'"
                     "   AND i.name = 'retain_until'") == 1;
}

/* A readable store at schema `version` with data — a finished operation
 * (c), an open one (d), a revoked grant, and an admission past retention
 * (due) — migrated to 7 by four migrators at once asking for the suite's
 * keys: exactly one finds it at `version`; the store is then in the suite's
 * keys (a hashed suite's store has its claims rewritten under their keys),
 * keeps the index cleanup walks, and its data works under 7 — refusals,
 * cleanup, archiving, the archived operation's answers — beside the
 * redemption recovery points migration 6 adds. */
static void r_migrates_to_current_once(int version)
{
    char tag[32];
    og_store *s = NULL;
    og_admission a;
    og_operation op;
    t_case c, d, rev, due, other;
    r_env e;

    snprintf(tag, sizeof tag, "ret_mig%d", version);
    e.s = t_migrated_store(tag, OG_KEYS_READABLE, e.url, sizeof e.url);
    e.raw = t_raw_open_url(e.url);
    {
        og_store_options o;

        og_store_options_default(&o);
        e.t = o.timings;
    }
    r_admit(&e, &c);
    r_record(&e, c.op, ADMITTED, OG_OP_SUCCEEDED);
    r_admit(&e, &d);
    t_case_new(&rev);
    r_revoke(&e, &rev);
    r_admit(&e, &due);
    og_store_free(e.s);
    e.s = NULL;
    {
        /* readable until migrated: set by (issuer, grant_id) */
        char now[160], sql[1024];

        r_now_sql(now, sizeof now,
                  -(int)(e.t.cleanup_margin_us / SEC) - 60);
        snprintf(sql, sizeof sql,
                 "UPDATE grant_consumptions SET retain_until = %s"
                 " WHERE issuer = '" ISSUER "' AND grant_id = '%s'",
                 now, due.grant_id);
        assert_int_equal(t_raw_exec(e.raw, sql), 0);
    }
    r_back_to(&e, version);
    assert_int_equal(og_store_open(e.url, NULL, &s), OG_ESCHEMA);
    assert_null(s);

    /* Four at once: exactly one finds schema `version` and applies the
     * rest. */
    assert_int_equal(t_concurrent_migrations(e.url, 4, version), 1);
    e.s = t_store_url(e.url, 0, 0);
    assert_int_equal(og_store_consumption_keys(e.s), t_keys);
    assert_true(r_has_retain_until_index(&e));
    assert_int_equal(r_count(&e, "grant_consumptions"), 4);
    assert_true(r_held(&e, ISSUER, c.grant_id)); /* by the suite's key */
    assert_true(r_held(&e, ISSUER, rev.grant_id));

    /* The data of schema `version` works under 7. */
    assert_int_equal(og_operation_get(e.s, c.op, &op), 1);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    a = r_other_op(&e, &d);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    a = r_other_op(&e, &rev);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
    /* Cleanup takes the due row, and only it. */
    {
        og_cleanup_stats st = r_cleanup(&e, 100, 10);

        assert_int_equal(st.admissions, 1);
        assert_int_equal(st.revocations + st.consumes, 0);
    }
    assert_false(r_held(&e, ISSUER, due.grant_id));
    assert_int_equal(r_count(&e, "grant_consumptions"), 3);
    /* Archiving takes the finished operation; it still answers for its
     * grant and its id. */
    assert_int_equal(r_archive(&e, 0, OG_ARCHIVE_MOVE).operations, 1);
    r_assert_spent_and_retry_reported(&e, &c, OG_OP_SUCCEEDED);
    t_case_new(&other);
    other.in.operation_id = c.op;
    assert_int_equal(og_admit(e.s, &other.g, &other.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_OPERATION_ID_TAKEN);
    assert_false(r_held(&e, ISSUER, other.grant_id));
    /* And migration 6 gave it the redemption recovery points. */
    {
        static const unsigned char nonce[OG_REDEMPTION_NONCE_LEN] = {1};
        static const unsigned char sealed[OG_REDEMPTION_TAG_LEN + 1] = {2};
        const og_redemption_record rr = {
            "agent-1", c.op,
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            nonce, sealed, sizeof sealed};
        og_redemption_found f = OG_REDEMPTION_ABSENT;
        og_redemption_point p;
        bool inserted = false;

        assert_int_equal(og_redemption_put(e.s, &rr, &inserted), 0);
        assert_true(inserted);
        assert_int_equal(og_redemption_get(e.s, "agent-1", c.op, NULL, &f, &p),
                         0);
        assert_int_equal(f, OG_REDEMPTION_OWN);
        assert_int_equal(p.sealed_len, sizeof sealed);
        og_redemption_point_clear(&p);
    }
    /* And migration 7 the payout store. */
    {
        og_payout_tenant_settings t = {"T-migrated", false, 100, "EUR", 0};
        og_payout_put_result pr = {OG_PAYOUT_REFUSED, 0};

        assert_int_equal(og_payout_tenant_put(e.s, &t, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    r_close(&e);
}

static void version_3_store_with_data_migrates_to_the_current_schema_once(
    void **state)
{
    (void)state;
    r_migrates_to_current_once(3);
}

static void version_4_store_with_data_migrates_to_the_current_schema_once(
    void **state)
{
    (void)state;
    r_migrates_to_current_once(4);
}

/* ===========================================================================
 * Schema 6 with data -> 7 (operation kinds; Started, NotStarted, NotApplied)
 * ========================================================================= */

/* Inserts, with SQL as schema 6 has it, operation op_id of c's binding in
 * status, its lease `lease_s` from the store's now, updated (and its reason
 * set) unless Admitted, with the consumption row of its grant. */
static void r_v6_operation(r_env *e, const t_case *c, const char *status,
                           int lease_s)
{
    char lease[160], now[160], later[160], keyv[512], sql[2048];
    bool changed = strcmp(status, "Admitted") != 0;

    r_now_sql(lease, sizeof lease, lease_s);
    r_now_sql(now, sizeof now, 0);
    r_now_sql(later, sizeof later, 3600);
    snprintf(sql, sizeof sql,
             "INSERT INTO operations (operation_id, issuer, grant_id,"
             " caller_id, account_id, amount, currency, status, owner_version,"
             " lease_until, submit_by, created_at, updated_at, outcome_reason)"
             " VALUES ('%s', '" ISSUER "', '%s', 'agent-17', 'A-1187', '250',"
             " 'USD', '%s', 1, %s, %s, %s, %s, %s);"
             "INSERT INTO grant_consumptions (%s, operation_id, consumed_at,"
             " retain_until, kind) VALUES (%s, '%s', %s, %s, 'admission')",
             c->op, c->grant_id, status, lease, later, now,
             changed ? now : "NULL", changed ? "'timeout'" : "NULL",
             t_key_columns(), t_key_values(ISSUER, c->grant_id, keyv,
                                           sizeof keyv),
             c->op, now, later);
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

/* Appends an outcome event Admitted -> to of op_id at owner version 1, as
 * schema 6's og_op_record wrote it. */
static void r_v6_event(r_env *e, const char *op_id, const char *to)
{
    char now[160], sql[512];

    r_now_sql(now, sizeof now, 0);
    snprintf(sql, sizeof sql,
             "INSERT INTO operation_events (operation_id, at, kind,"
             " from_status, to_status, owner_version, reason, actor)"
             " VALUES ('%s', %s, 'outcome', 'Admitted', '%s', 1, 'timeout',"
             " 'handler')",
             op_id, now, to);
    assert_int_equal(t_raw_exec(e->raw, sql), 0);
}

static void r_assert_credit_of_its_own_id(const og_operation *op)
{
    assert_int_equal(op->kind, OG_OP_KIND_CREDIT);
    assert_string_equal(op->idempotency_key, op->operation_id);
    assert_string_equal(op->client_reference, op->operation_id);
}

/* A store that migrations 1-6 made (og__store_migrate_to), holding what
 * schema 6 writes — a stalled Admitted credit (a), an Unknown one with its
 * history (u), a Succeeded one archived with its history (done), their
 * claims — migrated to 7 by four migrators at once: exactly one finds it
 * at 6. Then every old operation, live or archived, reads back as a credit
 * whose idempotency key and client reference are its id, with its status
 * and history; PostgreSQL kept the operations table's file (no rewrite)
 * and validated every constraint; SQLite's rebuilt tables pass its own
 * checks and keep counting events past the archived ones; admissions,
 * recovery's scan, outcomes and archiving work on the old data; and a
 * payout attempt can be started on it. */
static void version_6_store_with_data_migrates_to_the_current_schema_once(
    void **state)
{
    og_store_options o;
    og_store *s = NULL;
    og_operation op;
    og_op_events h;
    og_op_list l;
    og_op_filter f = {OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_UNKNOWN),
                      true, 0, 1000, OG_OP_KIND_BIT(OG_OP_KIND_CREDIT)};
    og_admission a;
    t_case ca, cu, cd;
    int64_t filenode = 0, archived_seq, u_seq;
    bool found_a = false, found_u = false, b = false;
    int from = -1, to = -1;
    char now[160], sql[1024];
    r_env e;

    (void)state;
    t_new_store_url("ret_mig6", e.url, sizeof e.url);
    og_store_options_default(&o);
    o.consumption_keys = t_keys;
    e.t = o.timings;
    assert_int_equal(og__store_migrate_to(e.url, &o, 6, &from, &to), 0);
    assert_int_equal(from, 0);
    assert_int_equal(to, 6);
    e.raw = t_raw_open_url(e.url);
    assert_int_equal(og_store_open(e.url, NULL, &s), OG_ESCHEMA);

    t_case_new(&ca);
    t_case_new(&cu);
    t_case_new(&cd);
    r_v6_operation(&e, &ca, "Admitted", -5);
    r_v6_operation(&e, &cu, "Unknown", -5);
    r_v6_event(&e, cu.op, "Unknown");
    r_v6_operation(&e, &cd, "Succeeded", 60);
    r_v6_event(&e, cd.op, "Succeeded");
    /* done's history and record archived as schema 6 archived them: its
     * event holds the highest event number. */
    r_now_sql(now, sizeof now, 0);
    snprintf(sql, sizeof sql,
             "INSERT INTO operation_events_archive"
             "  SELECT ev.*, %s FROM operation_events ev"
             "  WHERE operation_id = '%s';"
             "DELETE FROM operation_events WHERE operation_id = '%s';"
             "INSERT INTO operations_archive"
             "  SELECT op.*, %s FROM operations op WHERE operation_id = '%s';"
             "DELETE FROM operations WHERE operation_id = '%s'",
             now, cd.op, cd.op, now, cd.op, cd.op);
    assert_int_equal(t_raw_exec(e.raw, sql), 0);
    archived_seq = t_raw_int(e.raw, "SELECT max(seq) FROM"
                                    " operation_events_archive");
    u_seq = t_raw_int(e.raw, "SELECT max(seq) FROM operation_events");
    assert_true(archived_seq > u_seq);
    if (t_kind == T_POSTGRES)
        filenode = t_raw_int(e.raw,
                             "SELECT pg_relation_filenode('operations')");

    /* Four at once: exactly one finds schema 6 and applies 7. */
    assert_int_equal(t_concurrent_migrations(e.url, 4, 6), 1);
    if (t_kind == T_POSTGRES) {
        assert_int_equal(t_raw_int(e.raw, "SELECT pg_relation_filenode("
                                          "'operations')"),
                         filenode);
        assert_int_equal(t_raw_int(e.raw,
                                   "SELECT count(*) FROM pg_constraint"
                                   " WHERE NOT convalidated"),
                         0);
    } else {
        char *ok = t_raw_lines(e.raw, "PRAGMA integrity_check");
        char *fk = t_raw_lines(e.raw, "PRAGMA foreign_key_check");

        assert_non_null(ok);
        assert_string_equal(ok, "ok\n");
        assert_non_null(fk);
        assert_string_equal(fk, "");
        free(ok);
        free(fk);
    }
    e.s = t_store_url(e.url, 0, 0);
    assert_int_equal(og_store_consumption_keys(e.s), t_keys);

    /* Every old operation: a credit of its own id, status and history as
     * they were. */
    assert_int_equal(og_operation_get(e.s, ca.op, &op), 1);
    r_assert_credit_of_its_own_id(&op);
    assert_int_equal(op.status, OG_OP_ADMITTED);
    assert_int_equal(og_operation_get(e.s, cu.op, &op), 1);
    r_assert_credit_of_its_own_id(&op);
    assert_int_equal(op.status, OG_OP_UNKNOWN);
    assert_string_equal(op.reason, "timeout");
    assert_int_equal(og_op_history(e.s, cu.op, &h), 0);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.v[1].seq, u_seq);
    assert_int_equal(h.v[1].to_status, OG_OP_UNKNOWN);
    og_op_events_free(&h);
    assert_int_equal(t_raw_int(e.raw,
                               "SELECT count(*) FROM operations_archive"
                               " WHERE operation_id = '%s' AND kind = 'credit'"
                               " AND idempotency_key IS NULL"
                               " AND client_reference IS NULL",
                               cd.op),
                     1);
    /* The archived one still answers for its grant, as a credit. */
    a = r_same_op(&e, &cd);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_int_equal(a.operation.status, OG_OP_SUCCEEDED);
    r_assert_credit_of_its_own_id(&a.operation);
    /* Admission over the old claims. */
    r_assert_spent_and_retry_reported(&e, &ca, OG_OP_ADMITTED);
    a = r_same_op(&e, &ca);
    r_assert_credit_of_its_own_id(&a.operation);
    /* Recovery's scan of credits finds both stalled ones. */
    assert_int_equal(og_op_scan(e.s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++) {
        found_a |= strcmp(l.v[i].operation_id, ca.op) == 0;
        found_u |= strcmp(l.v[i].operation_id, cu.op) == 0;
    }
    og_op_list_free(&l);
    assert_true(found_a && found_u);
    /* New writes on old rows; event numbers go on past the archived one
     * (the archive is keyed by them). */
    r_record(&e, cu.op, OG_OP_BIT(OG_OP_UNKNOWN), OG_OP_SUCCEEDED);
    assert_int_equal(og_op_history(e.s, cu.op, &h), 0);
    assert_int_equal(h.n, 3);
    assert_true(h.v[2].seq > archived_seq);
    og_op_events_free(&h);
    assert_int_equal(r_archive(&e, 0, OG_ARCHIVE_MOVE).operations, 1);
    assert_int_equal(og_operation_get(e.s, cu.op, &op), 0);
    assert_int_equal(r_count(&e, "operation_events_archive"), 3);
    /* And the new statuses fit the migrated schema. */
    op = t_payout_op(e.s);
    assert_int_equal(og_op_start(e.s, op.operation_id, 1, "payout-worker-1",
                                 &b),
                     0);
    assert_true(b);
    assert_int_equal(og_operation_get(e.s, op.operation_id, &op), 1);
    assert_int_equal(op.status, OG_OP_STARTED);
    r_close(&e);
}

/* The archive's terminal set (schema 7): NotStarted and NotApplied leave
 * with their history, as Succeeded and Failed do; a Started attempt, however
 * old, stays (it may still have been sent). An archived payout keeps its
 * kind, key and reference. */
static void archive_takes_every_terminal_status_and_never_a_started_operation(
    void **state)
{
    og_operation ns, na, nr, st, taken;
    og_op_outcome o;
    og_archive_stats as;
    bool b = false;
    r_env e;

    (void)state;
    r_open(&e, "ret_term");
    ns = t_payout_op(e.s);
    t_set_op_time(e.url, ns.operation_id, "lease_until", -1);
    assert_int_equal(og_op_takeover(e.s, ns.operation_id, 1, "sweeper",
                                    &taken, &b),
                     0);
    assert_true(b);
    o = (og_op_outcome){OG_OP_NOT_STARTED, "not_started", NULL, "sweeper", NULL};
    assert_int_equal(og_op_record(e.s, ns.operation_id, ADMITTED, 2, &o, &b),
                     0);
    assert_true(b);
    na = t_payout_op(e.s);
    nr = t_payout_op(e.s);
    st = t_payout_op(e.s);
    for (int i = 0; i < 3; i++) {
        const char *id = i == 0 ? na.operation_id
                         : i == 1 ? nr.operation_id
                                  : st.operation_id;

        assert_int_equal(og_op_start(e.s, id, 1, "payout-worker-1", &b), 0);
        assert_true(b);
    }
    o = (og_op_outcome){OG_OP_UNKNOWN, "provider_timeout", NULL, "w", NULL};
    assert_int_equal(og_op_record(e.s, na.operation_id,
                                  OG_OP_BIT(OG_OP_STARTED), 1, &o, &b),
                     0);
    o = (og_op_outcome){OG_OP_NOT_APPLIED, "not_found_after_window", NULL,
                        "reconciler", NULL};
    assert_int_equal(og_op_record(e.s, na.operation_id,
                                  OG_OP_BIT(OG_OP_UNKNOWN),
                                  t_absence_final(e.s, e.url, na.operation_id,
                                                  1),
                                  &o, &b),
                     0);
    assert_true(b);
    o = (og_op_outcome){OG_OP_NEEDS_RECONCILIATION, "escalated", NULL, "r", NULL};
    assert_int_equal(og_op_record(e.s, nr.operation_id,
                                  OG_OP_BIT(OG_OP_STARTED), 1, &o, &b),
                     0);
    assert_int_equal(og_op_resolve(e.s, nr.operation_id, OG_OP_NOT_APPLIED,
                                   "operator-1", "not_in_export",
                                   "provider export: no such reference", NULL,
                                   &b),
                     0);
    assert_true(b);
    r_age_op(&e, ns.operation_id, 7200);
    r_age_op(&e, na.operation_id, 7200);
    r_age_op(&e, nr.operation_id, 7200);
    r_age_op(&e, st.operation_id, 7200);

    as = r_archive(&e, 3600 * SEC, OG_ARCHIVE_MOVE);
    assert_int_equal(as.operations, 3);
    assert_int_equal(as.events, 2 + 4 + 3); /* takeover+outcome; start,
                                               outcome x2 and the
                                               reconciler's takeover /
                                               resolved */
    assert_int_equal(og_operation_get(e.s, ns.operation_id, &taken), 0);
    assert_int_equal(og_operation_get(e.s, na.operation_id, &taken), 0);
    assert_int_equal(og_operation_get(e.s, nr.operation_id, &taken), 0);
    assert_int_equal(og_operation_get(e.s, st.operation_id, &taken), 1);
    assert_int_equal(taken.status, OG_OP_STARTED);
    assert_int_equal(t_raw_int(e.raw,
                               "SELECT count(*) FROM operations_archive"
                               " WHERE kind = 'payout'"
                               " AND client_reference LIKE 'PAY-%%-a1'"
                               " AND idempotency_key = 'payout-' ||"
                               " client_reference"),
                     3);
    assert_int_equal(t_raw_int(e.raw,
                               "SELECT count(*) FROM operations_archive"
                               " WHERE status IN ('NotStarted',"
                               " 'NotApplied')"),
                     3);
    r_close(&e);
}

const struct CMUnitTest t_retention_tests[] = {
    cmocka_unit_test(cleanup_never_deletes_a_row_before_retain_until_plus_margin),
    cmocka_unit_test(grant_still_within_retain_until_is_refused_after_cleanup),
    cmocka_unit_test(revocation_row_survives_until_its_retain_until_plus_margin),
    cmocka_unit_test(cleanup_deletes_in_bounded_batches),
    cmocka_unit_test(after_many_grants_expire_cleanup_leaves_only_live_rows),
    cmocka_unit_test(
        cleanup_never_touches_operations_and_archive_never_touches_open_operations),
    cmocka_unit_test(
        archived_operation_keeps_its_grant_refused_and_same_operation_retry_is_not_readmitted),
    cmocka_unit_test(admission_and_cleanup_plans_use_indexes),
    cmocka_unit_test(
        version_3_store_with_data_migrates_to_the_current_schema_once),
    cmocka_unit_test(
        version_4_store_with_data_migrates_to_the_current_schema_once),
    cmocka_unit_test(
        version_6_store_with_data_migrates_to_the_current_schema_once),
    cmocka_unit_test(
        archive_takes_every_terminal_status_and_never_a_started_operation),
};
const size_t t_retention_tests_count =
    sizeof t_retention_tests / sizeof t_retention_tests[0];
