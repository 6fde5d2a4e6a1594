/*
 * postgres.c — the PostgreSQL backend (libpq 15).
 *
 * Invariants this file protects. Comments below cite them as (I1)...(I7).
 *
 *  I1  One statement admits. The claim on grant_consumptions and the insert
 *      into operations are ONE statement, og__pg_admit_sql, run alone in its
 *      own implicit Read Committed transaction. Both rows commit together or
 *      neither does, and the unique key (issuer, grant_id) lets at most one
 *      statement ever claim a grant.
 *  I2  A commit is confirmed only at ReadyForQuery. With the extended
 *      protocol the server sends the RETURNING rows and CommandComplete
 *      BEFORE the implicit transaction commits at Sync, so an ErrorResponse
 *      (a failed commit, a terminated backend) can still follow the rows.
 *      A statement succeeds only when PQgetResult() returned NULL, no error
 *      result came at all, PQstatus() is CONNECTION_OK and
 *      PQtransactionStatus() is the expected one (PQTRANS_IDLE for admission).
 *  I3  A timeout, a cancellation or a lost connection is
 *      OG_ESTORE_UNAVAILABLE — never a refusal and never "unused": the write
 *      may have committed. The client deadline is store_timeout_us per
 *      statement; at the deadline the statement is cancelled and the
 *      connection discarded, since its state is unknown.
 *  I4  A WARNING "canceling (the) wait for synchronous replication" means the
 *      commit happened locally but is not known to be on the standby: the
 *      statement reports OG_ESTORE_UNAVAILABLE, never ADMITTED.
 *  I5  Only a unique violation on operations_pkey or operations_grant_key
 *      refuses (og__pg_classify() decides). Every other constraint failure is
 *      a defect and surfaces as OG_EINTERNAL, never as REFUSED and never as
 *      UNAVAILABLE (which would invite a retry of a statement that can only
 *      fail again).
 *  I6  The deadline (expires_at + leeway) is compared with the store's
 *      statement_timestamp() inside the claiming statement, and every
 *      microsecond value crosses the wire as an exact bigint.
 *  I7  This file logs nothing; statement parameters go to the server only.
 *
 * Connections come from og__pool. Each PGconn is used by one thread at a
 * time (the pool guarantees it) and carries a pg_conn wrapper that holds the
 * notice-receiver state (I4) and which statements are prepared on it.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "og_internal.h"

/* ===========================================================================
 * Schema: versioned migrations.
 *
 * Each migration runs in its own transaction under a transaction-scoped
 * advisory lock, re-reads the version after taking the lock, and records
 * itself in og_schema_migrations in the same transaction — so concurrent
 * migrators serialize and each migration is applied exactly once.
 * ========================================================================= */

/* "oncegate" in ASCII as a bigint: the advisory lock key every migrator
 * takes. A constant, so migrators of every build contend for the same lock. */
#define PG_MIGRATE_LOCK_SQL "SELECT pg_advisory_xact_lock(8029759185026510181)"

static const char pg_migrations_table_sql[] =
    "CREATE TABLE IF NOT EXISTS og_schema_migrations ("
    " version     integer     PRIMARY KEY,"
    " description text        NOT NULL,"
    " applied_at  timestamptz NOT NULL DEFAULT clock_timestamp())";

static const char pg_migration_1_sql[] =
    "CREATE TABLE grant_consumptions (\n"
    "  issuer       text        NOT NULL CHECK (octet_length(issuer) BETWEEN 1 AND 128),\n"
    "  grant_id     text        NOT NULL CHECK (octet_length(grant_id) BETWEEN 1 AND 128),\n"
    "  operation_id uuid,                    -- NULL only for a revocation holding this key\n"
    "  consumed_at  timestamptz NOT NULL,    -- when the key was claimed\n"
    "  retain_until timestamptz NOT NULL,    -- expires_at + admission leeway\n"
    "  CONSTRAINT grant_consumptions_pkey PRIMARY KEY (issuer, grant_id));\n"
    "CREATE INDEX grant_consumptions_retain_until_idx ON grant_consumptions (retain_until);\n"
    "CREATE TABLE operations (\n"
    "  operation_id  uuid        NOT NULL,\n"
    "  issuer        text        NOT NULL,\n"
    "  grant_id      text        NOT NULL,\n"
    "  caller_id     text        NOT NULL CHECK (octet_length(caller_id) BETWEEN 1 AND 128),\n"
    "  account_id    text        NOT NULL CHECK (octet_length(account_id) BETWEEN 1 AND 128),\n"
    "  amount        numeric     NOT NULL CHECK (amount > 0),\n"
    "  currency      text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),\n"
    "  status        text        NOT NULL CHECK (status IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation')),\n"
    "  owner_version bigint      NOT NULL CHECK (owner_version >= 1),\n"
    "  lease_until   timestamptz NOT NULL,\n"
    "  submit_by     timestamptz NOT NULL,\n"
    "  created_at    timestamptz NOT NULL,\n"
    "  CONSTRAINT operations_pkey PRIMARY KEY (operation_id),\n"
    "  CONSTRAINT operations_grant_key UNIQUE (issuer, grant_id));   -- defense in depth: one operation per grant\n"
    "CREATE INDEX operations_recovery_idx ON operations (lease_until) WHERE status IN ('Admitted','Unknown');\n";

typedef struct pg_migration {
    int version;
    const char *description;
    const char *sql; /* may hold several statements: sent with PQsendQuery */
} pg_migration;

static const pg_migration pg_migrations[] = {
    {1, "grant consumptions and operations", pg_migration_1_sql},
};
#define PG_MIGRATION_COUNT ((int)(sizeof pg_migrations / sizeof pg_migrations[0]))

_Static_assert(sizeof pg_migrations / sizeof pg_migrations[0] ==
                   OG_SCHEMA_VERSION,
               "one migration per schema version, numbered 1..N");

/* ===========================================================================
 * The admission statement (I1, I2, I6).
 *
 * Parameters (text format; every time value is bigint microseconds):
 *   $1 issuer   $2 grant_id   $3 operation_id   $4 expires_at (since epoch)
 *   $5 caller   $6 account    $7 amount (canonical decimal)   $8 currency
 *   $9 admission leeway   $10 execution lease   $11 submission window
 *   $12 initial owner version (OG__INITIAL_OWNER_VERSION)
 *
 * Why each part carries the guarantee:
 *  - claim: INSERT ... ON CONFLICT (issuer, grant_id) DO NOTHING. The primary
 *    key is the atomic check. Under Read Committed a competing insert of the
 *    same key waits for the holder to commit or abort; if it commits, the
 *    waiter DOES NOTHING and returns no row. Exactly one statement can claim
 *    a key, and a revocation claims the very same key, so whichever commits
 *    first wins.
 *  - WHERE admit_until > statement_timestamp(): the deadline is decided in
 *    the claiming statement against the store's clock (I6), and
 *    statement_timestamp() stays fixed however long the statement waits on a
 *    lock. Past the deadline nothing is claimed and nothing is recorded.
 *  - The operation insert reads only `claim`. Data-modifying CTEs share one
 *    snapshot and RETURNING is the only way the claim's row reaches the outer
 *    INSERT: no claim, no operation.
 *  - operations_pkey / operations_grant_key: if the operation id is already
 *    taken, or an operation already holds this grant, the unique violation
 *    aborts the WHOLE statement, claim included; og__pg_classify() maps
 *    exactly those two constraint names to a refusal (I5).
 *  - clock_timestamp() for lease_until, submit_by and created_at, evaluated
 *    once in a LATERAL subquery (a volatile target list is never flattened,
 *    so all three share one instant): a lock wait must not eat the lease.
 *  - Microseconds become timestamps exactly: bigint * interval goes through
 *    float8, which is exact only below 2^53 µs (year 2255). Splitting into
 *    whole seconds (1e6 * s stays below 2^53 up to year ~20000) and a
 *    sub-second remainder keeps every step an exact integer; an interval
 *    without day or month parts adds without any time-zone dependence.
 *  - It is ONE statement in an implicit transaction, so nothing can run
 *    between the claim and the insert, and the commit happens at Sync: the
 *    caller learns ADMITTED only after ReadyForQuery (I2).
 * ========================================================================= */

/* The operation columns, in the order pg_op_parse() reads them. Timestamps
 * come back as exact bigint microseconds (extract() is numeric since 14). */
#define PG_OP_NCOLS 12
#define PG_OP_COLUMNS(t)                                                       \
    t "operation_id::text, " t "issuer, " t "grant_id, " t "caller_id, "       \
    t "account_id, " t "amount::text, " t "currency, " t "status, "            \
    t "owner_version, "                                                        \
    "(extract(epoch FROM " t "lease_until) * 1000000)::bigint, "               \
    "(extract(epoch FROM " t "submit_by) * 1000000)::bigint, "                 \
    "(extract(epoch FROM " t "created_at) * 1000000)::bigint"

static const char og__pg_admit_sql[] =
    "WITH claim AS (\n"
    "  INSERT INTO grant_consumptions (issuer, grant_id, operation_id, consumed_at, retain_until)\n"
    "  SELECT $1::text, $2::text, $3::uuid, statement_timestamp(), d.admit_until\n"
    "  FROM (SELECT 'epoch'::timestamptz\n"
    "               + ($4::bigint / 1000000) * interval '1 second'\n"
    "               + ($4::bigint % 1000000) * interval '1 microsecond'\n"
    "               + ($9::bigint / 1000000) * interval '1 second'\n"
    "               + ($9::bigint % 1000000) * interval '1 microsecond' AS admit_until) d\n"
    "  WHERE d.admit_until > statement_timestamp()\n"
    "  ON CONFLICT (issuer, grant_id) DO NOTHING\n"
    "  RETURNING issuer, grant_id)\n"
    "INSERT INTO operations (operation_id, issuer, grant_id, caller_id, account_id, amount, currency,\n"
    "                        status, owner_version, lease_until, submit_by, created_at)\n"
    "SELECT $3::uuid, c.issuer, c.grant_id, $5::text, $6::text, $7::numeric, $8::text,\n"
    "       'Admitted', $12::bigint,\n"
    "       t.now + ($10::bigint / 1000000) * interval '1 second'\n"
    "             + ($10::bigint % 1000000) * interval '1 microsecond',\n"
    "       t.now + ($11::bigint / 1000000) * interval '1 second'\n"
    "             + ($11::bigint % 1000000) * interval '1 microsecond',\n"
    "       t.now\n"
    "FROM claim c CROSS JOIN LATERAL (SELECT clock_timestamp() AS now) t\n"
    "RETURNING " PG_OP_COLUMNS("");

/* After a claim that returned nothing: the consumption row for the key and
 * the operation row for the id, in one statement with a fresh snapshot. Only
 * for reporting — the claim already decided, so nothing read here can turn
 * a refusal into an admission. Always exactly one row. */
static const char pg_unclaimed_sql[] =
    "SELECT c.issuer IS NOT NULL, c.operation_id::text,\n"
    "       o.operation_id IS NOT NULL, " PG_OP_COLUMNS("o.") "\n"
    "FROM (VALUES (1)) AS v (one)\n"
    "LEFT JOIN grant_consumptions c ON c.issuer = $1::text AND c.grant_id = $2::text\n"
    "LEFT JOIN operations o ON o.operation_id = $3::uuid";

static const char pg_operation_get_sql[] =
    "SELECT " PG_OP_COLUMNS("") " FROM operations WHERE operation_id = $1::uuid";

/* Prepared once per connection: the extended protocol with a named statement
 * skips parse and plan on every call (about 1.75x the simple protocol). */
enum { PG_STMT_ADMIT, PG_STMT_UNCLAIMED, PG_STMT_OPERATION_GET, PG_STMT_COUNT };

typedef struct pg_stmt {
    const char *name;
    const char *sql;
    int nparams;
} pg_stmt;

static const pg_stmt pg_stmts[PG_STMT_COUNT] = {
    [PG_STMT_ADMIT] = {"og_admit", og__pg_admit_sql, 12},
    [PG_STMT_UNCLAIMED] = {"og_unclaimed", pg_unclaimed_sql, 3},
    [PG_STMT_OPERATION_GET] = {"og_operation_get", pg_operation_get_sql, 1},
};

/* ===========================================================================
 * Store and connection state.
 * ========================================================================= */

/* Connection keywords, in libpq's processing order: our defaults come BEFORE
 * "dbname", whose value (the user's URI or key=value string) is expanded
 * (expand_dbname=1) and so overrides any of them the user wrote. */
enum {
    PG_KW_APPNAME,
    PG_KW_CONNECT_TIMEOUT,
    PG_KW_KEEPALIVES,
    PG_KW_TCP_USER_TIMEOUT,
    PG_KW_DBNAME,
    PG_KW_COUNT
};
static const char *const pg_keywords[PG_KW_COUNT + 1] = {
    /* fallback_: an application_name in the string or PGAPPNAME still wins */
    [PG_KW_APPNAME] = "fallback_application_name",
    [PG_KW_CONNECT_TIMEOUT] = "connect_timeout",
    [PG_KW_KEEPALIVES] = "keepalives",
    [PG_KW_TCP_USER_TIMEOUT] = "tcp_user_timeout",
    [PG_KW_DBNAME] = "dbname",
    [PG_KW_COUNT] = NULL,
};

typedef struct og_pg {
    og__pool *pool;
    char *target;                          /* owned copy of the conninfo */
    const char *values[PG_KW_COUNT + 1];   /* point into this struct */
    int64_t timeout_us;                    /* client deadline per statement */
    char connect_timeout[24];              /* seconds */
    char tcp_user_timeout[24];             /* milliseconds */
    char statement_timeout[32];            /* "Nms", server side */
    char leeway[24], lease[24], window[24]; /* microseconds, admission params */
} og_pg;

typedef struct pg_conn {
    PGconn *conn;
    unsigned prepared;     /* bit i set: pg_stmts[i] is prepared here */
    bool syncrep_cancelled; /* set by the notice receiver (I4) */
    bool broken;           /* discard on release: state unknown */
    char sqlstate[6];      /* of the last error result, "" if none */
} pg_conn;

/* ===========================================================================
 * Small helpers.
 * ========================================================================= */

static int64_t pg_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Strict base-10 int64: the whole string, no overflow. */
static int pg_parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (int64_t)v;
    return 0;
}

static void pg_fmt_i64(char *buf, size_t n, int64_t v)
{
    snprintf(buf, n, "%" PRId64, v);
}

/* ===========================================================================
 * Notices (I4).
 *
 * The server emits this WARNING when a commit stopped waiting for the
 * synchronous standby (cancel, statement_timeout, or shutdown) and then
 * reports success: the transaction committed locally but a failover may lose
 * it. The two English texts are PostgreSQL's (syncrep.c); the detail is
 * checked too so that a variant of the primary text is still caught. The
 * texts are localized: a server with synchronous replication must run with
 * an English lc_messages (e.g. C) for this check to see them.
 * ========================================================================= */
static void pg_notice(void *arg, const PGresult *res)
{
    pg_conn *c = arg;
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);

    if (sev == NULL)
        sev = PQresultErrorField(res, PG_DIAG_SEVERITY);
    if (sev == NULL || strcmp(sev, "WARNING") != 0)
        return;
    if ((msg != NULL &&
         (strstr(msg, "canceling wait for synchronous replication") != NULL ||
          strstr(msg, "canceling the wait for synchronous replication") !=
              NULL)) ||
        (detail != NULL &&
         strstr(detail, "might not have been replicated to the standby") !=
             NULL))
        c->syncrep_cancelled = true;
}

/* ===========================================================================
 * Running one statement with a deadline (I2, I3, I4).
 * ========================================================================= */

/* Waits until the socket is readable. 1 readable, 0 deadline passed, -1
 * socket error. */
static int pg_wait_readable(pg_conn *c, int64_t deadline_us)
{
    int fd = PQsocket(c->conn);

    if (fd < 0)
        return -1;
    for (;;) {
        int64_t left = deadline_us - pg_mono_us();
        struct pollfd pfd = {.fd = fd, .events = POLLIN, .revents = 0};
        int ms, r;

        if (left <= 0)
            return 0;
        ms = left / 1000 + (left % 1000 != 0);
        r = poll(&pfd, 1, ms);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Asks the server to stop the statement so it does not run on after we gave
 * up. The connection is discarded either way, so the outcome is not needed. */
static void pg_cancel(pg_conn *c)
{
    char errbuf[256];
    PGcancel *cancel = PQgetCancel(c->conn);

    if (cancel == NULL)
        return;
    (void)PQcancel(cancel, errbuf, (int)sizeof errbuf);
    PQfreeCancel(cancel);
}

/* SQLSTATEs after which the connection must not be reused even when it looks
 * healthy: a connection exception (08), operator intervention (57P: admin
 * shutdown and friends), or a read-only target (25006: we reached a standby,
 * and a fresh connection with target_session_attrs=read-write finds the new
 * primary). */
static bool pg_state_poisons(const char *st)
{
    return strncmp(st, "08", 2) == 0 || strncmp(st, "57P", 3) == 0 ||
           strcmp(st, "25006") == 0;
}

/* Classifies one error result. OG__PG_REFUSE copies the constraint name. */
static int pg_error(pg_conn *c, const PGresult *res, char *constraint,
                    size_t conlen)
{
    const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *cons = PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);
    int rc;

    if (st == NULL) {
        /* Generated by libpq itself (connection lost, out of memory, protocol
         * trouble): we do not know what the server did (I3). */
        c->broken = true;
        return OG_ESTORE_UNAVAILABLE;
    }
    if (og__copy(c->sqlstate, sizeof c->sqlstate, st) != 0)
        c->sqlstate[0] = '\0';
    if (pg_state_poisons(st))
        c->broken = true;
    rc = og__pg_classify(st, cons);
    if (rc == OG__PG_REFUSE) {
        if (cons == NULL || constraint == NULL ||
            og__copy(constraint, conlen, cons) != 0)
            return OG_EINTERNAL;
    }
    return rc;
}

/* Collects every result of the statement just sent until PQgetResult()
 * returns NULL, i.e. until ReadyForQuery (I2). Returns 0 and *rows (the last
 * non-error result; the caller clears it), OG__PG_REFUSE, or a negative
 * code. expect is the transaction status that confirms success. Sets
 * c->broken whenever the connection's state is not known to be clean. */
static int pg_collect(pg_conn *c, int64_t deadline_us,
                      PGTransactionStatusType expect, PGresult **rows,
                      char *constraint, size_t conlen)
{
    PGresult *keep = NULL;
    PGresult *res = NULL;
    bool have_error = false;
    int rc = 0;

    for (;;) {
        while (PQisBusy(c->conn)) {
            int w = pg_wait_readable(c, deadline_us);

            if (w == 0) {
                /* Deadline: the commit may or may not happen (I3). */
                pg_cancel(c);
                c->broken = true;
                rc = OG_ESTORE_UNAVAILABLE;
                goto out;
            }
            if (w < 0 || !PQconsumeInput(c->conn)) {
                c->broken = true;
                rc = OG_ESTORE_UNAVAILABLE;
                goto out;
            }
        }
        res = PQgetResult(c->conn);
        if (res == NULL)
            break;
        switch (PQresultStatus(res)) {
        case PGRES_TUPLES_OK:
        case PGRES_COMMAND_OK:
            if (!have_error) {
                PQclear(keep);
                keep = res;
                res = NULL;
            }
            break;
        case PGRES_FATAL_ERROR:
        case PGRES_NONFATAL_ERROR:
            /* The first error decides; an error after the rows means the
             * commit failed (I2). Keep draining to ReadyForQuery. */
            if (!have_error) {
                have_error = true;
                rc = pg_error(c, res, constraint, conlen);
            }
            break;
        default:
            /* COPY, empty query, pipeline states: this file never asks for
             * them, and in COPY libpq would hand back the same state forever,
             * so stop here and drop the connection. */
            if (!have_error)
                rc = OG_EINTERNAL;
            c->broken = true;
            goto out;
        }
        PQclear(res);
        res = NULL;
    }

    if (c->syncrep_cancelled) {
        /* Committed locally, not known to be on the standby (I4). */
        c->broken = true;
        rc = OG_ESTORE_UNAVAILABLE;
        goto out;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        c->broken = true;
        if (rc == 0)
            rc = OG_ESTORE_UNAVAILABLE;
        goto out;
    }
    if (have_error) {
        /* Keep the connection only when it is demonstrably healthy and idle;
         * pg_error() already condemned poisoning SQLSTATEs. */
        if (PQtransactionStatus(c->conn) != PQTRANS_IDLE)
            c->broken = true;
        goto out;
    }
    if (PQtransactionStatus(c->conn) != expect) {
        c->broken = true;
        rc = OG_ESTORE_UNAVAILABLE;
        goto out;
    }
    if (keep == NULL) {
        c->broken = true;
        rc = OG_EINTERNAL;
        goto out;
    }
out:
    PQclear(res);
    if (rc == 0)
        *rows = keep;
    else
        PQclear(keep);
    return rc;
}

/* Resets per-statement state before sending. */
static void pg_begin_statement(pg_conn *c)
{
    c->syncrep_cancelled = false;
    c->sqlstate[0] = '\0';
}

/* A statement that could not even be sent: nothing reached the server, but
 * the connection is unusable. */
static int pg_send_failed(pg_conn *c)
{
    c->broken = true;
    return OG_ESTORE_UNAVAILABLE;
}

/* Prepares pg_stmts[i] on c if it is not yet. */
static int pg_prepare(og_pg *pg, pg_conn *c, int i)
{
    PGresult *res = NULL;
    int rc;

    if (c->prepared & (1u << i))
        return 0;
    pg_begin_statement(c);
    if (!PQsendPrepare(c->conn, pg_stmts[i].name, pg_stmts[i].sql,
                       pg_stmts[i].nparams, NULL))
        return pg_send_failed(c);
    rc = pg_collect(c, pg_mono_us() + pg->timeout_us, PQTRANS_IDLE, &res,
                    NULL, 0);
    PQclear(res);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL;
    if (rc == 0)
        c->prepared |= 1u << i;
    return rc;
}

/* Runs prepared statement i in its own implicit transaction. The connection
 * must be idle: the admission's reasoning rests on a transaction that holds
 * nothing but this statement (I1). */
static int pg_exec_prepared(og_pg *pg, pg_conn *c, int i,
                            const char *const *params, PGresult **rows,
                            char *constraint, size_t conlen)
{
    int rc;

    if (PQstatus(c->conn) != CONNECTION_OK ||
        PQtransactionStatus(c->conn) != PQTRANS_IDLE)
        return pg_send_failed(c);
    rc = pg_prepare(pg, c, i);
    if (rc != 0)
        return rc;
    pg_begin_statement(c);
    if (!PQsendQueryPrepared(c->conn, pg_stmts[i].name, pg_stmts[i].nparams,
                             params, NULL, NULL, 0))
        return pg_send_failed(c);
    return pg_collect(c, pg_mono_us() + pg->timeout_us, PQTRANS_IDLE, rows,
                      constraint, conlen);
}

/* Runs one unnamed statement (setup, schema, migrations): extended protocol
 * with parameters. */
static int pg_exec_params(og_pg *pg, pg_conn *c, const char *sql, int n,
                          const char *const *params,
                          PGTransactionStatusType expect, PGresult **rows)
{
    PGresult *res = NULL;
    int rc;

    pg_begin_statement(c);
    if (!PQsendQueryParams(c->conn, sql, n, NULL, params, NULL, NULL, 0))
        return pg_send_failed(c);
    rc = pg_collect(c, pg_mono_us() + pg->timeout_us, expect, &res, NULL, 0);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL;
    if (rc == 0 && rows != NULL)
        *rows = res;
    else
        PQclear(res);
    return rc;
}

/* Runs a script of several statements (a migration body): the simple
 * protocol, the only one that accepts more than one statement per string. */
static int pg_exec_script(og_pg *pg, pg_conn *c, const char *sql,
                          PGTransactionStatusType expect)
{
    PGresult *res = NULL;
    int rc;

    pg_begin_statement(c);
    if (!PQsendQuery(c->conn, sql))
        return pg_send_failed(c);
    rc = pg_collect(c, pg_mono_us() + pg->timeout_us, expect, &res, NULL, 0);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL;
    PQclear(res);
    return rc;
}

/* ===========================================================================
 * Pool callbacks and connection lifetime.
 * ========================================================================= */

static void pg_disconnect(void *ctx, void *conn)
{
    pg_conn *c = conn;

    (void)ctx;
    if (c == NULL)
        return;
    PQfinish(c->conn);
    free(c);
}

/* Session settings every statement relies on: the server-side bound on a
 * statement (the client deadline alone lets the server run on), a bound on a
 * transaction left open by a dead client (it would hold the advisory lock or
 * a claimed key), and Read Committed, the isolation the admission statement
 * is reasoned under (I1). SET after connecting rather than "options" in the
 * conninfo, so a user's own options= cannot silently drop them. */
static int pg_session_setup(og_pg *pg, pg_conn *c)
{
    static const char sql[] =
        "SELECT set_config('statement_timeout', $1, false),"
        " set_config('idle_in_transaction_session_timeout', $1, false),"
        " set_config('default_transaction_isolation', 'read committed', false)";
    const char *params[1] = {pg->statement_timeout};

    return pg_exec_params(pg, c, sql, 1, params, PQTRANS_IDLE, NULL);
}

static int pg_connect(void *ctx, void **conn)
{
    og_pg *pg = ctx;
    pg_conn *c = calloc(1, sizeof *c);
    int rc = 0;
    int i;

    if (c == NULL)
        return OG_ENOMEM;
    c->conn = PQconnectdbParams(pg_keywords, pg->values, 1);
    if (c->conn == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        rc = OG_ESTORE_UNAVAILABLE;
        goto out;
    }
    /* Before the first statement, so no notice escapes the check (I4) and
     * none goes to libpq's default stderr printer. */
    PQsetNoticeReceiver(c->conn, pg_notice, c);
    rc = pg_session_setup(pg, c);
    if (rc != 0)
        goto out;
    for (i = 0; i < PG_STMT_COUNT; i++) {
        rc = pg_prepare(pg, c, i);
        /* An unmigrated database has no tables yet (undefined_table): the
         * connection is still good for schema_version and migrate, and every
         * statement is prepared on first use instead. */
        if (rc != 0 && strcmp(c->sqlstate, "42P01") == 0 && !c->broken) {
            rc = 0;
            break;
        }
        if (rc != 0)
            goto out;
    }
out:
    if (rc != 0) {
        pg_disconnect(pg, c);
        return rc;
    }
    *conn = c;
    return 0;
}

static const og__pool_ops pg_pool_ops = {
    .connect = pg_connect,
    .disconnect = pg_disconnect,
};

static int pg_acquire(og_pg *pg, pg_conn **out)
{
    void *v = NULL;
    int rc = og__pool_get(pg->pool, &v);
    pg_conn *c;

    if (rc < 0)
        return rc;
    c = v;
    c->broken = false;
    *out = c;
    return 0;
}

/* Never hands a connection back to the pool inside a transaction or in a
 * state we could not confirm. */
static void pg_release(og_pg *pg, pg_conn *c)
{
    bool broken = c->broken || PQstatus(c->conn) != CONNECTION_OK ||
                  PQtransactionStatus(c->conn) != PQTRANS_IDLE;

    og__pool_put(pg->pool, c, broken);
}

/* ===========================================================================
 * Open / close.
 * ========================================================================= */

static void pg_close(void *impl)
{
    og_pg *pg = impl;

    if (pg == NULL)
        return;
    og__pool_free(pg->pool);
    free(pg->target);
    free(pg);
}

static int pg_open(const char *target, const og_store_options *opts,
                   void **impl)
{
    og_store_options defaults;
    og_pg *pg = NULL;
    PQconninfoOption *parsed = NULL;
    char *errmsg = NULL;
    pg_conn *c = NULL;
    int64_t timeout_ms, connect_s;
    int rc = 0;

    if (target == NULL)
        return OG_EBAD_URL;
    if (opts == NULL) {
        og_store_options_default(&defaults);
        opts = &defaults;
    }
    if (opts->pool_size < 1)
        return OG_EINVAL;
    if (opts->timings.store_timeout_us <= 0)
        return OG_ETIMINGS;

    /* Reject what libpq cannot parse before trying to connect. */
    parsed = PQconninfoParse(target, &errmsg);
    if (parsed == NULL) {
        rc = errmsg != NULL ? OG_EBAD_URL : OG_ENOMEM;
        goto out;
    }

    pg = calloc(1, sizeof *pg);
    if (pg == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    pg->target = strdup(target);
    if (pg->target == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    pg->timeout_us = opts->timings.store_timeout_us;
    timeout_ms = pg->timeout_us / 1000 + (pg->timeout_us % 1000 != 0);
    connect_s = pg->timeout_us / 1000000 + (pg->timeout_us % 1000000 != 0);
    if (connect_s < 2) /* libpq treats 1 as 2 anyway; say what happens */
        connect_s = 2;
    pg_fmt_i64(pg->connect_timeout, sizeof pg->connect_timeout, connect_s);
    pg_fmt_i64(pg->tcp_user_timeout, sizeof pg->tcp_user_timeout, timeout_ms);
    snprintf(pg->statement_timeout, sizeof pg->statement_timeout,
             "%" PRId64 "ms", timeout_ms);
    pg_fmt_i64(pg->leeway, sizeof pg->leeway,
               opts->timings.admission_leeway_us);
    pg_fmt_i64(pg->lease, sizeof pg->lease, opts->timings.execution_lease_us);
    pg_fmt_i64(pg->window, sizeof pg->window,
               opts->timings.submission_window_us);

    pg->values[PG_KW_APPNAME] = "oncegate";
    pg->values[PG_KW_CONNECT_TIMEOUT] = pg->connect_timeout;
    pg->values[PG_KW_KEEPALIVES] = "1";
    pg->values[PG_KW_TCP_USER_TIMEOUT] = pg->tcp_user_timeout;
    pg->values[PG_KW_DBNAME] = pg->target;
    pg->values[PG_KW_COUNT] = NULL;

    pg->pool = og__pool_new(&pg_pool_ops, pg, opts->pool_size,
                            opts->timings.store_timeout_us);
    if (pg->pool == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }

    /* Connect once now, so an unreachable store fails here and not at the
     * first admission. */
    rc = pg_acquire(pg, &c);
    if (rc != 0)
        goto out;
    pg_release(pg, c);

out:
    PQconninfoFree(parsed);
    PQfreemem(errmsg);
    if (rc != 0) {
        pg_close(pg);
        return rc;
    }
    *impl = pg;
    return 0;
}

/* ===========================================================================
 * Schema version and migrations.
 * ========================================================================= */

/* Reads one integer from the single cell of a one-row result. */
static int pg_result_int(const PGresult *res, int *out)
{
    int64_t v;

    if (PQntuples(res) != 1 || PQnfields(res) != 1 || PQgetisnull(res, 0, 0))
        return OG_EINTERNAL;
    if (pg_parse_i64(PQgetvalue(res, 0, 0), &v) != 0 || v < 0 || v > INT32_MAX)
        return OG_EINTERNAL;
    *out = (int)v;
    return 0;
}

/* The current version on c: 0 without a migrations table. */
static int pg_version_on(og_pg *pg, pg_conn *c, PGTransactionStatusType expect,
                         int *version)
{
    PGresult *res = NULL;
    int exists = 0, v = 0;
    int rc;

    rc = pg_exec_params(pg, c,
                        "SELECT (to_regclass('og_schema_migrations') "
                        "IS NOT NULL)::int",
                        0, NULL, expect, &res);
    if (rc != 0)
        goto out;
    rc = pg_result_int(res, &exists);
    if (rc != 0 || !exists)
        goto out;
    PQclear(res);
    res = NULL;
    rc = pg_exec_params(pg, c,
                        "SELECT coalesce(max(version), 0) "
                        "FROM og_schema_migrations",
                        0, NULL, expect, &res);
    if (rc != 0)
        goto out;
    rc = pg_result_int(res, &v);
out:
    PQclear(res);
    if (rc == 0)
        *version = v;
    return rc;
}

static int pg_schema_version(void *impl, int *version)
{
    og_pg *pg = impl;
    pg_conn *c = NULL;
    int rc;

    rc = pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_version_on(pg, c, PQTRANS_IDLE, version);
    pg_release(pg, c);
    return rc;
}

/* Applies migration m unless another migrator got there first. Any failure
 * leaves the transaction open; the caller discards the connection, which
 * rolls it back. */
static int pg_apply(og_pg *pg, pg_conn *c, const pg_migration *m, int *seen)
{
    char version[16];
    const char *params[2];
    int cur = 0;
    int rc;

    rc = pg_exec_params(pg, c, "BEGIN", 0, NULL, PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    rc = pg_exec_params(pg, c, PG_MIGRATE_LOCK_SQL, 0, NULL, PQTRANS_INTRANS,
                        NULL);
    if (rc != 0)
        return rc;
    rc = pg_exec_params(pg, c, pg_migrations_table_sql, 0, NULL,
                        PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    /* Re-read under the lock: the version seen before it may be stale. */
    rc = pg_version_on(pg, c, PQTRANS_INTRANS, &cur);
    if (rc != 0)
        return rc;
    *seen = cur;
    if (cur > OG_SCHEMA_VERSION) {
        c->broken = true;
        return OG_ESCHEMA;
    }
    if (cur >= m->version)
        return pg_exec_params(pg, c, "ROLLBACK", 0, NULL, PQTRANS_IDLE, NULL);
    rc = pg_exec_script(pg, c, m->sql, PQTRANS_INTRANS);
    if (rc != 0)
        return rc;
    snprintf(version, sizeof version, "%d", m->version);
    params[0] = version;
    params[1] = m->description;
    rc = pg_exec_params(pg, c,
                        "INSERT INTO og_schema_migrations (version, description)"
                        " VALUES ($1::integer, $2::text)",
                        2, params, PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    return pg_exec_params(pg, c, "COMMIT", 0, NULL, PQTRANS_IDLE, NULL);
}

static int pg_migrate(void *impl, int *from, int *to)
{
    og_pg *pg = impl;
    pg_conn *c = NULL;
    int before = 0, after = 0, seen = 0;
    bool first = true;
    int rc, i;

    rc = pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_version_on(pg, c, PQTRANS_IDLE, &before);
    if (rc != 0)
        goto out;
    if (before > OG_SCHEMA_VERSION) {
        rc = OG_ESCHEMA;
        goto out;
    }
    for (i = 0; i < PG_MIGRATION_COUNT; i++) {
        if (pg_migrations[i].version <= before)
            continue;
        rc = pg_apply(pg, c, &pg_migrations[i], &seen);
        if (rc != 0) {
            c->broken = true;
            goto out;
        }
        /* "from" is what this migrator found under the lock: a concurrent
         * migrator may have applied everything since the first read. */
        if (first)
            before = seen;
        first = false;
    }
    rc = pg_version_on(pg, c, PQTRANS_IDLE, &after);
    if (rc == 0 && after != OG_SCHEMA_VERSION)
        rc = OG_ESCHEMA;
out:
    pg_release(pg, c);
    if (rc == 0) {
        *from = before;
        *to = after;
    }
    return rc;
}

/* ===========================================================================
 * Reading rows.
 * ========================================================================= */

static int pg_get_text(const PGresult *r, int row, int col, char *dst,
                       size_t n)
{
    if (PQgetisnull(r, row, col))
        return OG_EINTERNAL;
    return og__copy(dst, n, PQgetvalue(r, row, col)) == 0 ? 0 : OG_EINTERNAL;
}

static int pg_get_i64(const PGresult *r, int row, int col, int64_t *out)
{
    if (PQgetisnull(r, row, col))
        return OG_EINTERNAL;
    return pg_parse_i64(PQgetvalue(r, row, col), out) == 0 ? 0 : OG_EINTERNAL;
}

/* Reads the PG_OP_COLUMNS starting at column col of row into *out. */
static int pg_op_parse(const PGresult *r, int row, int col, og_operation *out)
{
    og_operation op;
    int st;

    memset(&op, 0, sizeof op);
    if (PQnfields(r) < col + PG_OP_NCOLS)
        return OG_EINTERNAL;
    if (pg_get_text(r, row, col + 0, op.operation_id, sizeof op.operation_id) ||
        pg_get_text(r, row, col + 1, op.issuer, sizeof op.issuer) ||
        pg_get_text(r, row, col + 2, op.grant_id, sizeof op.grant_id) ||
        pg_get_text(r, row, col + 3, op.caller_id, sizeof op.caller_id) ||
        pg_get_text(r, row, col + 4, op.account_id, sizeof op.account_id) ||
        PQgetisnull(r, row, col + 5) ||
        og_amount_canonical(PQgetvalue(r, row, col + 5), op.amount,
                            sizeof op.amount) != 0 ||
        pg_get_text(r, row, col + 6, op.currency, sizeof op.currency) ||
        PQgetisnull(r, row, col + 7) ||
        pg_get_i64(r, row, col + 8, &op.owner_version) ||
        pg_get_i64(r, row, col + 9, &op.lease_until_us) ||
        pg_get_i64(r, row, col + 10, &op.submit_by_us) ||
        pg_get_i64(r, row, col + 11, &op.created_at_us))
        return OG_EINTERNAL;
    st = og__op_status_parse(PQgetvalue(r, row, col + 7));
    if (st < 0)
        return OG_EINTERNAL;
    op.status = (og_op_status)st;
    *out = op;
    return 0;
}

static bool pg_get_bool(const PGresult *r, int row, int col)
{
    return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] == 't';
}

/* ===========================================================================
 * Admission.
 * ========================================================================= */

/* The claim returned nothing: read what holds the key and the id, then let
 * the shared core say what that means. */
static int pg_unclaimed(og_pg *pg, pg_conn *c, const og__admit_req *req,
                        og_admission *out)
{
    const char *params[3] = {req->issuer, req->grant_id, req->operation_id};
    PGresult *res = NULL;
    og__consumption cons;
    og_operation op;
    bool have_op;
    int rc;

    memset(&cons, 0, sizeof cons);
    memset(&op, 0, sizeof op);
    rc = pg_exec_prepared(pg, c, PG_STMT_UNCLAIMED, params, &res, NULL, 0);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL;
    if (rc != 0)
        goto out;
    if (PQntuples(res) != 1 || PQnfields(res) != 3 + PG_OP_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    cons.present = pg_get_bool(res, 0, 0);
    cons.has_operation = cons.present && !PQgetisnull(res, 0, 1);
    if (cons.has_operation &&
        og__copy(cons.operation_id, sizeof cons.operation_id,
                 PQgetvalue(res, 0, 1)) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    have_op = pg_get_bool(res, 0, 2);
    if (have_op) {
        rc = pg_op_parse(res, 0, 3, &op);
        if (rc != 0)
            goto out;
    }
    og__classify_unclaimed(req, &cons, have_op ? &op : NULL, out);
out:
    PQclear(res);
    return rc;
}

static int pg_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    og_pg *pg = impl;
    pg_conn *c = NULL;
    PGresult *res = NULL;
    og_admission result;
    char expires[24], owner[24], constraint[64];
    const char *params[12];
    int rc;

    memset(&result, 0, sizeof result);
    constraint[0] = '\0';
    pg_fmt_i64(expires, sizeof expires, req->expires_at_us);
    pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    params[0] = req->issuer;
    params[1] = req->grant_id;
    params[2] = req->operation_id;
    params[3] = expires;
    params[4] = req->caller_id;
    params[5] = req->account_id;
    params[6] = req->amount;
    params[7] = req->currency;
    params[8] = pg->leeway;
    params[9] = pg->lease;
    params[10] = pg->window;
    params[11] = owner;

    rc = pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_exec_prepared(pg, c, PG_STMT_ADMIT, params, &res, constraint,
                          sizeof constraint);
    if (rc == OG__PG_REFUSE) {
        /* The statement aborted whole (I1, I5): nothing was claimed. */
        rc = 0;
        result.outcome = OG_OUTCOME_REFUSED;
        if (strcmp(constraint, "operations_pkey") == 0)
            result.refusal = OG_REFUSAL_OPERATION_ID_TAKEN;
        else if (strcmp(constraint, "operations_grant_key") == 0)
            result.refusal = OG_REFUSAL_GRANT_SPENT;
        else
            rc = OG_EINTERNAL; /* classify and this file disagree: a defect */
        goto out;
    }
    if (rc != 0)
        goto out;
    if (PQntuples(res) == 1) {
        /* Confirmed at ReadyForQuery by pg_collect() (I2). */
        rc = pg_op_parse(res, 0, 0, &result.operation);
        if (rc == 0) {
            result.outcome = OG_OUTCOME_ADMITTED;
            result.refusal = OG_REFUSAL_NONE;
        }
        goto out;
    }
    if (PQntuples(res) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    /* Zero rows: this call did not admit. A fresh statement says why. */
    rc = pg_unclaimed(pg, c, req, &result);
out:
    PQclear(res);
    if (c != NULL)
        pg_release(pg, c);
    if (rc == 0)
        *out = result;
    return rc;
}

static int pg_operation_get(void *impl, const char *operation_id,
                            og_operation *out)
{
    og_pg *pg = impl;
    pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {operation_id};
    og_operation op;
    int rc;

    rc = pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_exec_prepared(pg, c, PG_STMT_OPERATION_GET, params, &res, NULL,
                          0);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL;
    if (rc != 0)
        goto out;
    if (PQntuples(res) == 0) {
        rc = 0;
        goto out;
    }
    if (PQntuples(res) != 1 || PQnfields(res) != PG_OP_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    rc = pg_op_parse(res, 0, 0, &op);
    if (rc == 0) {
        *out = op;
        rc = 1;
    }
out:
    PQclear(res);
    pg_release(pg, c);
    return rc;
}

/* ===========================================================================
 * The method table.
 * ========================================================================= */
const og__store_methods og__postgres_methods = {
    .name = "postgres",
    .open = pg_open,
    .close = pg_close,
    .schema_version = pg_schema_version,
    .migrate = pg_migrate,
    .admit = pg_admit,
    .operation_get = pg_operation_get,
};
