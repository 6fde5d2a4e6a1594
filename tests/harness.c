/*
 * harness.c — backend selection, raw engine access and ids for the store
 * tests. Raw access uses the engines' own client libraries (libpq, sqlite3),
 * never oncegate, so a test can hold a lock or read a row behind the store's
 * back.
 */
#include <fcntl.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "harness.h"
#include "store/store_int.h" /* og__sqlite_register_key_function */

t_backend t_kind;
char t_url[4096];
og_grant_form t_form = OG_FORM_TOKEN;
og_consumption_keys t_keys = OG_KEYS_READABLE;
static og_store *t_issuer_store;
static char t_tmpdir[256];
static char t_own_db[64]; /* a hashed PostgreSQL suite's database */

int t_suite_args(int argc, char **argv)
{
    if (argc > 3 && strcmp(argv[3], "row") == 0)
        t_form = OG_FORM_ROW;
    else if (argc > 3 && strcmp(argv[3], "token") != 0)
        return 1;
    if (argc > 4 && og_consumption_keys_parse(argv[4], &t_keys) != 0)
        return 1;
    return 0;
}

/* A new, empty PostgreSQL database og_TAG_<random> in the test cluster;
 * its name into db (64 bytes) and a URI for it into url. */
static void t_pg_new_db(const char *tag, char *db, char *url, size_t n)
{
    const char *base = getenv("OG_TEST_PG_URL"), *slash, *query;
    char u[OG_UUID_LEN + 1], sql[128];
    PGconn *pg = PQconnectdb(base);
    PGresult *res;

    t_uuid(u);
    snprintf(db, 64, "og_%s_%.8s", tag, u);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
    res = PQexec(pg, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(pg));
        abort();
    }
    PQclear(res);
    PQfinish(pg);
    /* postgresql://user@host:port/DB?query: the same server, database db */
    slash = strrchr(base, '/');
    query = strchr(slash, '?');
    snprintf(url, n, "%.*s/%s%s", (int)(slash - base), base, db,
             query ? query : "");
}

int64_t t_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void t_uuid(char out[OG_UUID_LEN + 1])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY);

    if (fd < 0 || read(fd, b, sizeof b) != (ssize_t)sizeof b)
        abort();
    close(fd);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, OG_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

void t_grant_id(char *out, size_t n)
{
    static unsigned counter;
    char u[OG_UUID_LEN + 1];

    t_uuid(u);
    snprintf(out, n, "t-%ld-%u-%.8s", (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), u);
}

void t_issue(const og_grant *g, const og_intent *in)
{
    char digest[65];
    og_issue_outcome o;
    og_issuance iss;
    int rc;

    if (t_form != OG_FORM_ROW)
        return;
    if (!t_issuer_store)
        t_issuer_store = t_store(2, 0);
    if (og_params_digest(in->account_id, in->amount, in->currency, digest) != 0)
        abort();
    iss = (og_issuance){g->issuer, g->grant_id, g->family, in->caller_id,
                        "credit.apply", digest,
                        g->expires_at_us - 60 * INT64_C(1000000),
                        g->expires_at_us, OG_FORM_ROW};
    rc = og_issuance_record(t_issuer_store, &iss, &o);
    if (rc != 0 || o != OG_ISSUE_RECORDED) {
        fprintf(stderr, "t_issue: %s / outcome %d\n", og_err_name(rc), (int)o);
        abort();
    }
}

void t_case_new_exp(t_case *c, int64_t expires_at_us)
{
    memset(c, 0, sizeof *c);
    t_grant_id(c->grant_id, sizeof c->grant_id);
    t_uuid(c->op);
    c->g = (og_grant){"support-approvals", c->grant_id, expires_at_us, NULL,
                      t_form};
    c->in = (og_intent){c->op, "agent-17", "A-1187", "250.00", "USD"};
    t_issue(&c->g, &c->in);
}

void t_case_new(t_case *c)
{
    t_case_new_exp(c, t_now_us() + 15 * 60 * INT64_C(1000000));
}

const char *t_oncegate_bin(void)
{
    const char *p = getenv("OG_TEST_ONCEGATE");
    return p && *p ? p : "oncegate";
}

int t_setup_backend(const char *name)
{
    int rc;

    if (name && strcmp(name, "sqlite") == 0) {
        snprintf(t_tmpdir, sizeof t_tmpdir, "/tmp/og-test-XXXXXX");
        if (!mkdtemp(t_tmpdir))
            return 1;
        t_kind = T_SQLITE;
        snprintf(t_url, sizeof t_url, "sqlite:%s/store.db", t_tmpdir);
    } else if (name && strcmp(name, "postgres") == 0) {
        const char *url = getenv("OG_TEST_PG_URL");
        const char *req = getenv("OG_TEST_REQUIRE_PG");
        if (!url || !*url) {
            if (req && strcmp(req, "1") == 0) {
                fprintf(stderr, "OG_TEST_PG_URL unset but OG_TEST_REQUIRE_PG=1\n");
                return 1;
            }
            fprintf(stderr, "skipping: OG_TEST_PG_URL unset (run scripts/test)\n");
            return 77;
        }
        t_kind = T_POSTGRES;
        snprintf(t_url, sizeof t_url, "%s", url);
    } else {
        fprintf(stderr, "usage: TEST sqlite|postgres [group]\n");
        return 1;
    }
    if (t_kind == T_POSTGRES && t_keys == OG_KEYS_HASHED)
        t_pg_new_db("hashed", t_own_db, t_url, sizeof t_url);
    {
        og_store_options o;

        og_store_options_default(&o);
        o.consumption_keys = t_keys;
        if ((rc = og_store_migrate(t_url, &o, NULL, NULL)) < 0) {
            fprintf(stderr, "migrate %s failed: %s\n", t_url, og_err_name(rc));
            return 1;
        }
    }
    return 0;
}

void t_teardown_backend(void)
{
    char cmd[512];

    og_store_free(t_issuer_store);
    t_issuer_store = NULL;
    if (t_own_db[0]) {
        PGconn *pg = PQconnectdb(getenv("OG_TEST_PG_URL"));

        snprintf(cmd, sizeof cmd, "DROP DATABASE %s WITH (FORCE)", t_own_db);
        PQclear(PQexec(pg, cmd));
        PQfinish(pg);
        t_own_db[0] = '\0';
    }
    if (t_kind == T_SQLITE && t_tmpdir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", t_tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", t_tmpdir);
    }
}

og_store *t_store_url(const char *url, int pool, int timeout_ms)
{
    og_store_options o;
    og_store *s = NULL;
    int rc;

    og_store_options_default(&o);
    if (pool > 0)
        o.pool_size = pool;
    if (timeout_ms > 0) {
        o.timings.store_timeout_us = (int64_t)timeout_ms * 1000;
        og_timings_fit(&o.timings);
    }
    rc = og_store_open(url, &o, &s);
    if (rc < 0) {
        fprintf(stderr, "og_store_open(%s): %s\n", url, og_err_name(rc));
        abort();
    }
    if (strcmp(url, t_url) == 0 && og_store_consumption_keys(s) != t_keys) {
        fprintf(stderr, "%s: %s keys, the suite runs %s\n", url,
                og_consumption_keys_name(og_store_consumption_keys(s)),
                og_consumption_keys_name(t_keys));
        abort();
    }
    return s;
}

og_store *t_store(int pool, int timeout_ms)
{
    return t_store_url(t_url, pool, timeout_ms);
}

/* ===========================================================================
 * Raw engine access
 * ========================================================================= */
struct t_raw {
    PGconn *pg;
    sqlite3 *db;
};

t_raw *t_raw_open(void)
{
    return t_raw_open_url(t_url);
}

t_raw *t_raw_open_url(const char *url)
{
    t_raw *r = calloc(1, sizeof *r);

    if (!r)
        abort();
    if (t_kind == T_POSTGRES) {
        r->pg = PQconnectdb(url);
        if (PQstatus(r->pg) != CONNECTION_OK) {
            fprintf(stderr, "raw connect: %s", PQerrorMessage(r->pg));
            abort();
        }
    } else {
        if (sqlite3_open_v2(url + 7, &r->db, SQLITE_OPEN_READWRITE, NULL) !=
            SQLITE_OK)
            abort();
        sqlite3_busy_timeout(r->db, 10000);
        /* the SQL function the store's own connections have */
        if (og__sqlite_register_key_function(r->db) != SQLITE_OK)
            abort();
    }
    return r;
}

void t_raw_close(t_raw *r)
{
    if (!r)
        return;
    if (r->pg)
        PQfinish(r->pg);
    if (r->db)
        sqlite3_close(r->db);
    free(r);
}

int t_raw_exec(t_raw *r, const char *sql)
{
    if (r->pg) {
        PGresult *res = PQexec(r->pg, sql);
        ExecStatusType st = PQresultStatus(res);
        int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
        if (!ok)
            fprintf(stderr, "raw exec: %s", PQerrorMessage(r->pg));
        PQclear(res);
        return ok ? 0 : -1;
    }
    if (sqlite3_exec(r->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "raw exec: %s\n", sqlite3_errmsg(r->db));
        return -1;
    }
    return 0;
}

int64_t t_raw_int(t_raw *r, const char *fmt, ...)
{
    char sql[2048];
    int64_t v = INT64_MIN;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    if (r->pg) {
        PGresult *res = PQexec(r->pg, sql);
        if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0 &&
            !PQgetisnull(res, 0, 0))
            v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        else if (PQresultStatus(res) != PGRES_TUPLES_OK)
            fprintf(stderr, "raw int: %s", PQerrorMessage(r->pg));
        PQclear(res);
    } else {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW &&
                sqlite3_column_type(st, 0) != SQLITE_NULL)
                v = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
        } else {
            fprintf(stderr, "raw int: %s\n", sqlite3_errmsg(r->db));
        }
    }
    return v;
}

char *t_raw_lines(t_raw *r, const char *sql)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    bool ok = false;

    if (!f)
        return NULL;
    if (r->pg) {
        PGresult *res = PQexec(r->pg, sql);

        if ((ok = PQresultStatus(res) == PGRES_TUPLES_OK))
            for (int i = 0; i < PQntuples(res); i++)
                fprintf(f, "%s\n", PQgetvalue(res, i, 0));
        else
            fprintf(stderr, "raw lines: %s", PQerrorMessage(r->pg));
        PQclear(res);
    } else {
        sqlite3_stmt *st;
        int rc = SQLITE_ERROR;

        if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) == SQLITE_OK) {
            while ((rc = sqlite3_step(st)) == SQLITE_ROW)
                fprintf(f, "%s\n", (const char *)sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
        ok = rc == SQLITE_DONE;
    }
    if (fclose(f) != 0 || !ok) {
        free(out);
        return NULL;
    }
    return out;
}

int64_t t_raw_consumptions(t_raw *r, const char *issuer, const char *grant_id)
{
    char match[512];

    /* Test ids are plain ASCII without quotes (validated by the callers). */
    if (t_form == OG_FORM_ROW)
        return t_raw_int(r,
                         "SELECT count(*) FROM grants WHERE issuer = '%s'"
                         " AND grant_id = '%s' AND (consumed_at IS NOT NULL"
                         " OR revoked_at IS NOT NULL)",
                         issuer, grant_id);
    return t_raw_int(r, "SELECT count(*) FROM grant_consumptions WHERE %s",
                     t_key_match(issuer, grant_id, match, sizeof match));
}

const char *t_key_literal(const unsigned char key[OG_CONSUMPTION_KEY_LEN],
                          char *buf, size_t n)
{
    char hex[2 * OG_CONSUMPTION_KEY_LEN + 1];

    for (int i = 0; i < OG_CONSUMPTION_KEY_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    if (t_kind == T_POSTGRES)
        snprintf(buf, n, "'\\x%s'::bytea", hex);
    else
        snprintf(buf, n, "X'%s'", hex);
    return buf;
}

/* The key of (issuer, grant_id) as a literal; aborts on a bad id. */
static const char *t_key_of(const char *issuer, const char *grant_id,
                            char *buf, size_t n)
{
    unsigned char key[OG_CONSUMPTION_KEY_LEN];

    if (og_consumption_key(issuer, grant_id, key) != 0)
        abort();
    return t_key_literal(key, buf, n);
}

const char *t_key_match(const char *issuer, const char *grant_id, char *buf,
                        size_t n)
{
    char lit[128];

    if (t_keys == OG_KEYS_HASHED)
        snprintf(buf, n, "key_hash = %s", t_key_of(issuer, grant_id, lit,
                                                   sizeof lit));
    else
        snprintf(buf, n, "issuer = '%s' AND grant_id = '%s'", issuer,
                 grant_id);
    return buf;
}

const char *t_key_columns(void)
{
    return t_keys == OG_KEYS_HASHED ? "key_hash" : "issuer, grant_id";
}

const char *t_key_values(const char *issuer, const char *grant_id, char *buf,
                         size_t n)
{
    if (t_keys == OG_KEYS_HASHED)
        return t_key_of(issuer, grant_id, buf, n);
    snprintf(buf, n, "'%s', '%s'", issuer, grant_id);
    return buf;
}

void t_new_store_url(const char *tag, char *url, size_t n)
{
    char u[OG_UUID_LEN + 1], db[64];

    if (t_kind == T_SQLITE) {
        t_uuid(u);
        snprintf(url, n, "%.*s-%s-%.8s.db", (int)(strlen(t_url) - 3), t_url,
                 tag, u);
    } else {
        t_pg_new_db(tag, db, url, n);
    }
}

og_store *t_migrated_store(const char *tag, og_consumption_keys keys,
                           char *url, size_t n)
{
    og_store_options o;

    t_new_store_url(tag, url, n);
    og_store_options_default(&o);
    o.consumption_keys = keys;
    assert_int_equal(og_store_migrate(url, &o, NULL, NULL), 0);
    return t_store_url(url, 0, 0);
}

og_store *t_fresh_store(const char *tag, char *url, size_t n)
{
    return t_migrated_store(tag, t_keys, url, n);
}

void t_set_op_time_ms(const char *url, const char *op_id, const char *column,
                      int ms)
{
    t_raw *r = url ? t_raw_open_url(url) : t_raw_open();
    char sql[512];

    if (t_kind == T_POSTGRES)
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET %s = clock_timestamp() + "
                 "interval '%d milliseconds' WHERE operation_id = '%s'",
                 column, ms, op_id);
    else
        snprintf(sql, sizeof sql,
                 "UPDATE operations SET %s = %lld WHERE operation_id = '%s'",
                 column, (long long)(t_now_us() + (int64_t)ms * 1000), op_id);
    assert_int_equal(t_raw_exec(r, sql), 0);
    t_raw_close(r);
}

void t_set_op_time(const char *url, const char *op_id, const char *column,
                   int seconds)
{
    t_set_op_time_ms(url, op_id, column, seconds * 1000);
}

int64_t t_absence_final(og_store *s, const char *url, const char *op_id,
                        int64_t owner_version)
{
    og_operation op;
    bool taken = false;

    t_set_op_time(url, op_id, "final_absence_after", -60);
    t_set_op_time(url, op_id, "lease_until", -1);
    assert_int_equal(og_op_takeover(s, op_id, owner_version, "reconciler",
                                    &op, &taken),
                     0);
    assert_true(taken);
    assert_true(op.taken_at_us >= op.final_absence_after_us);
    return op.owner_version;
}

og_operation t_payout_op(og_store *s)
{
    char gid[64], op[OG_UUID_LEN + 1], key[128], ref[96];
    og_operation out;
    og_grant g;
    og_intent in;
    int rc;

    t_grant_id(gid, sizeof gid);
    t_uuid(op);
    /* PAY-<n>: the payout id, unique per call as the grant id is */
    snprintf(ref, sizeof ref, "PAY-%s-a1", gid + 2);
    snprintf(key, sizeof key, "payout-%s", ref);
    g = (og_grant){"payouts", gid, t_now_us() + 15 * 60 * INT64_C(1000000),
                   NULL, OG_FORM_ROW};
    in = (og_intent){op, "payout-worker-1", "BEN-7", "1250.00", "EUR"};
    rc = og__op_insert(s, OG_OP_KIND_PAYOUT, &g, &in, key, ref, &out);
    if (rc != 0) {
        fprintf(stderr, "og__op_insert: %s\n", og_err_name(rc));
        abort();
    }
    return out;
}

void t_undo_migration_7(t_raw *r)
{
    static const char pg[] =
        "BEGIN;"
        " DROP INDEX operations_recovery_idx;"
        " CREATE INDEX operations_recovery_idx ON operations (status, lease_until)"
        "   WHERE status IN ('Admitted','Unknown');"
        " DROP INDEX operations_terminal_idx;"
        " CREATE INDEX operations_terminal_idx"
        "   ON operations ((coalesce(updated_at, created_at)))"
        "   WHERE status IN ('Succeeded','Failed');"
        " ALTER TABLE operations DROP COLUMN kind, DROP COLUMN idempotency_key,"
        "   DROP COLUMN client_reference,"
        "   DROP CONSTRAINT operations_not_started_check,"
        "   DROP CONSTRAINT operations_status_check,"
        "   ADD CONSTRAINT operations_status_check CHECK (status IN"
        "     ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation'));"
        " ALTER TABLE operation_events"
        "   DROP CONSTRAINT operation_events_kind_check,"
        "   ADD CONSTRAINT operation_events_kind_check"
        "     CHECK (kind IN ('outcome','takeover','resolved')),"
        "   DROP CONSTRAINT operation_events_from_status_check,"
        "   ADD CONSTRAINT operation_events_from_status_check CHECK (from_status"
        "     IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation')),"
        "   DROP CONSTRAINT operation_events_to_status_check,"
        "   ADD CONSTRAINT operation_events_to_status_check CHECK (to_status"
        "     IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation'));"
        " ALTER TABLE operations_archive DROP COLUMN kind,"
        "   DROP COLUMN idempotency_key, DROP COLUMN client_reference,"
        "   DROP CONSTRAINT operations_archive_status_check,"
        "   ADD CONSTRAINT operations_archive_status_check"
        "     CHECK (status IN ('Succeeded','Failed'));"
        " DELETE FROM og_schema_migrations WHERE version = 7;"
        " COMMIT";
    static const char sq[] =
        "BEGIN;"
        " DROP INDEX operations_recovery_idx;"
        " CREATE INDEX operations_recovery_idx ON operations (lease_until)"
        "   WHERE status IN ('Admitted', 'Unknown');"
        " DROP INDEX operations_recovery_scan_idx;"
        " CREATE INDEX operations_recovery_scan_idx"
        "   ON operations (status, lease_until)"
        "   WHERE status IN ('Admitted', 'Unknown');"
        " DROP INDEX operations_terminal_idx;"
        " CREATE INDEX operations_terminal_idx"
        "   ON operations (coalesce(updated_at, created_at), operation_id)"
        "   WHERE status IN ('Succeeded', 'Failed');"
        " ALTER TABLE operations DROP COLUMN kind;"
        " ALTER TABLE operations DROP COLUMN idempotency_key;"
        " ALTER TABLE operations DROP COLUMN client_reference;"
        " ALTER TABLE operations_archive DROP COLUMN kind;"
        " ALTER TABLE operations_archive DROP COLUMN idempotency_key;"
        " ALTER TABLE operations_archive DROP COLUMN client_reference;"
        " DELETE FROM og_schema_migrations WHERE version = 7;"
        " COMMIT";

    assert_int_equal(t_raw_exec(r, t_kind == T_POSTGRES ? pg : sq), 0);
}

void t_undo_migration_15(t_raw *r)
{
    static const char pg[] =
        "BEGIN;"
        " DROP INDEX operations_backlog_idx;"
        " CREATE INDEX operations_backlog_idx"
        "   ON operations (status, created_at, operation_id);"
        " ALTER TABLE operations"
        "   DROP CONSTRAINT operations_payout_status_check,"
        "   DROP CONSTRAINT operations_not_started_check,"
        "   ALTER COLUMN caller_id TYPE text, ALTER COLUMN account_id TYPE text,"
        "   ALTER COLUMN amount TYPE numeric, ALTER COLUMN currency TYPE text,"
        "   ALTER COLUMN status TYPE text, ALTER COLUMN owner_version TYPE bigint,"
        "   ALTER COLUMN provider_reference TYPE text,"
        "   ALTER COLUMN outcome_reason TYPE text, ALTER COLUMN kind TYPE text,"
        "   ALTER COLUMN idempotency_key TYPE text,"
        "   ALTER COLUMN client_reference TYPE text,"
        "   ALTER COLUMN lookups TYPE bigint,"
        "   ADD CONSTRAINT operations_caller_id_check"
        "     CHECK (octet_length(caller_id) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT operations_account_id_check"
        "     CHECK (octet_length(account_id) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT operations_amount_check CHECK (amount > 0),"
        "   ADD CONSTRAINT operations_currency_check"
        "     CHECK (currency ~ '^[A-Z]{3}$'),"
        "   ADD CONSTRAINT operations_status_check CHECK (status IN"
        "     ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation',"
        "      'Started','NotStarted','NotApplied')),"
        "   ADD CONSTRAINT operations_owner_version_check"
        "     CHECK (owner_version >= 1),"
        "   ADD CONSTRAINT operations_provider_reference_check"
        "     CHECK (octet_length(provider_reference) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT operations_outcome_reason_check"
        "     CHECK (octet_length(outcome_reason) BETWEEN 1 AND 64),"
        "   ADD CONSTRAINT operations_kind_check"
        "     CHECK (kind IN ('credit','payout')),"
        "   ADD CONSTRAINT operations_idempotency_key_check"
        "     CHECK (octet_length(idempotency_key) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT operations_client_reference_check"
        "     CHECK (octet_length(client_reference) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT operations_lookups_check CHECK (lookups >= 0),"
        "   ADD CONSTRAINT operations_payout_status_check"
        "     CHECK (kind = 'payout' OR status NOT IN ('Started','NotStarted')),"
        "   ADD CONSTRAINT operations_not_started_check"
        "     CHECK (status <> 'NotStarted' OR owner_version > 1);"
        " ALTER TABLE grant_consumptions"
        "   DROP CONSTRAINT grant_consumptions_kind_check2,"
        "   ALTER COLUMN issuer TYPE text, ALTER COLUMN grant_id TYPE text,"
        "   ALTER COLUMN kind TYPE text,"
        "   ADD CONSTRAINT grant_consumptions_issuer_check"
        "     CHECK (octet_length(issuer) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT grant_consumptions_grant_id_check"
        "     CHECK (octet_length(grant_id) BETWEEN 1 AND 128),"
        "   ADD CONSTRAINT grant_consumptions_kind_check"
        "     CHECK (kind IN ('admission', 'revocation', 'consume')),"
        "   ADD CONSTRAINT grant_consumptions_kind_check2"
        "     CHECK ((kind = 'admission') = (operation_id IS NOT NULL));"
        " DROP DOMAIN og_text128, og_text64, og_amount, og_currency, og_op_status,"
        "   og_owner_version, og_count, og_op_kind, og_claim_kind;"
        " DELETE FROM og_schema_migrations WHERE version = 15;"
        " COMMIT";
    static const char sq[] =
        "BEGIN;"
        " DROP INDEX operations_backlog_idx;"
        " CREATE INDEX operations_backlog_idx ON operations (status, created_at);"
        " CREATE INDEX operations_recovery_idx ON operations (lease_until)"
        "   WHERE status IN ('Admitted', 'Started', 'Unknown');"
        " DELETE FROM og_schema_migrations WHERE version = 15;"
        " COMMIT";

    assert_int_equal(t_raw_exec(r, t_kind == T_POSTGRES ? pg : sq), 0);
}

void t_undo_migration_13(t_raw *r)
{
    assert_int_equal(
        t_raw_exec(r, "BEGIN;"
                      " DROP INDEX operations_archive_payout_grant_idx;"
                      " DELETE FROM og_schema_migrations WHERE version = 13;"
                      " COMMIT"),
        0);
}

void t_undo_migration_11(t_raw *r)
{
    static const char pg[] =
        "BEGIN;"
        " DROP INDEX payout_events_returned_key;"
        " ALTER TABLE payout_events DROP COLUMN evidence;"
        " ALTER TABLE operations DROP COLUMN taken_at, DROP COLUMN lookups,"
        "   DROP COLUMN final_absence_after;"
        " ALTER TABLE operations_archive DROP COLUMN taken_at,"
        "   DROP COLUMN lookups, DROP COLUMN final_absence_after;"
        " ALTER TABLE operation_events DROP COLUMN source;"
        " ALTER TABLE operation_events_archive DROP COLUMN source;"
        " DELETE FROM og_schema_migrations WHERE version = 11;"
        " COMMIT";
    static const char sq[] =
        "BEGIN;"
        " DROP INDEX payout_events_returned_key;"
        " ALTER TABLE payout_events DROP COLUMN evidence;"
        " ALTER TABLE operations DROP COLUMN taken_at;"
        " ALTER TABLE operations DROP COLUMN lookups;"
        " ALTER TABLE operations DROP COLUMN final_absence_after;"
        " ALTER TABLE operations_archive DROP COLUMN taken_at;"
        " ALTER TABLE operations_archive DROP COLUMN lookups;"
        " ALTER TABLE operations_archive DROP COLUMN final_absence_after;"
        " ALTER TABLE operation_events DROP COLUMN source;"
        " ALTER TABLE operation_events_archive DROP COLUMN source;"
        " DELETE FROM og_schema_migrations WHERE version = 11;"
        " COMMIT";

    assert_int_equal(t_raw_exec(r, t_kind == T_POSTGRES ? pg : sq), 0);
}

void t_undo_migration_8(t_raw *r)
{
    /* Migrations 9 and 10 only widened CHECKs of tables dropped here, and
     * 12 changed tenants and added payout_policy_releases: undoing 8 (and
     * dropping that table) undoes them as well. */
    char sql[1024];

    /* the tables that reference others first; their triggers go with them */
#define T_PAYOUT_TABLES                                                        \
    " DROP TABLE payout_policy_releases;"                                      \
    " DROP TABLE payout_events; DROP TABLE payout_jobs;"                       \
    " DROP TABLE payout_grants; DROP TABLE payout_decisions;"                  \
    " DROP TABLE payouts; DROP TABLE destinations; DROP TABLE beneficiaries;"  \
    " DROP TABLE tenant_days; DROP TABLE tenants;"
    snprintf(sql, sizeof sql, "BEGIN;%s%s"
             " DELETE FROM og_schema_migrations WHERE version >= 8; COMMIT",
             T_PAYOUT_TABLES,
             t_kind == T_POSTGRES ? " DROP FUNCTION og_append_only();" : "");
#undef T_PAYOUT_TABLES
    assert_int_equal(t_raw_exec(r, sql), 0);
}

typedef struct t_migrator {
    const char *url;
    int rc, from, to;
} t_migrator;

/* The races' store timeout (conformance.c's RACE_TIMEOUT_MS). */
#define T_MIGRATOR_TIMEOUT_MS 30000

static void *t_migrator_main(void *arg)
{
    t_migrator *m = arg;
    og_store_options o;

    /* The claim is that migrators serialize, not how fast: on a loaded
     * machine a migrator may wait for the others' fsyncs longer than the
     * default store timeout (as in the races). */
    og_store_options_default(&o);
    o.timings.store_timeout_us = (int64_t)T_MIGRATOR_TIMEOUT_MS * 1000;
    og_timings_fit(&o.timings);
    o.consumption_keys = t_keys; /* what migration 5 records */
    m->rc = og_store_migrate(m->url, &o, &m->from, &m->to);
    if (m->rc != 0)
        fprintf(stderr, "migrator: %s\n", og_err_name(m->rc));
    return NULL;
}

int t_concurrent_migrations(const char *url, int n, int from)
{
    pthread_t th[16];
    t_migrator m[16];
    int found = 0;

    assert_true(n >= 1 && n <= 16);
    for (int i = 0; i < n; i++) {
        m[i] = (t_migrator){url, 1, -1, -1};
        assert_int_equal(pthread_create(&th[i], NULL, t_migrator_main, &m[i]),
                         0);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].rc, 0);
        assert_int_equal(m[i].to, OG_SCHEMA_VERSION);
        found += m[i].from == from;
    }
    return found;
}

/* ===========================================================================
 * Two racers (harness.h)
 * ========================================================================= */

typedef struct t_racer {
    void (*run)(void *ctx, int who);
    void *ctx;
    int who;
} t_racer;

static void *t_racer_thread(void *arg)
{
    t_racer *r = arg;

    r->run(r->ctx, r->who);
    return NULL;
}

void t_callers(int n, void (*run)(void *ctx, int who), void *ctx)
{
    t_racer r[64];
    pthread_t th[64];

    assert_true(n >= 1 && n <= 64);
    for (int w = 0; w < n; w++) {
        r[w] = (t_racer){run, ctx, w};
        assert_int_equal(pthread_create(&th[w], NULL, t_racer_thread, &r[w]),
                         0);
    }
    for (int w = 0; w < n; w++)
        pthread_join(th[w], NULL);
}

void t_race_threads(void (*run)(void *ctx, int who), void *ctx)
{
    t_callers(2, run, ctx);
}

void t_race_processes(void (*run)(void *ctx, int who), void *ctx)
{
    pid_t pid[2];
    int status;

    for (int w = 0; w < 2; w++) {
        pid[w] = fork();
        assert_true(pid[w] >= 0);
        if (pid[w] == 0) {
            run(ctx, w);
            _exit(0);
        }
    }
    for (int w = 0; w < 2; w++) {
        assert_int_equal(waitpid(pid[w], &status, 0), pid[w]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}
