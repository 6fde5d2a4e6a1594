/*
 * sqlite.c — the embedded store: SQLite in WAL mode, one host, any number of
 * threads and processes on one file.
 *
 * SQLite has no data-modifying CTEs, so the admission is ONE write
 * transaction (BEGIN IMMEDIATE … COMMIT) holding the claim and the operation
 * insert — see sq_admit(). Invariants this file protects:
 *
 *   Q1  One writer at a time: BEGIN IMMEDIATE takes the database's write lock
 *       before the claim reads anything, so two connections — in one process
 *       or two — can never both see the key as free. The PRIMARY KEY on
 *       grant_consumptions is the atomic check inside that lock.
 *   Q2  The claim and the operation insert commit together or not at all: a
 *       unique violation on operations rolls the claim back (REFUSED).
 *   Q3  The deadline is checked in the claim itself against SQLite's clock
 *       ('now' is fixed for the duration of one sqlite3_step, like
 *       statement_timestamp()); lease_until, submit_by and created_at come
 *       from a later 'now', when the operation row is written (like
 *       clock_timestamp()).
 *   Q4  Durable before ADMITTED: WAL with synchronous=FULL fsyncs the WAL at
 *       every commit, and ADMITTED is returned only after COMMIT returned
 *       SQLITE_OK. A busy database past busy_timeout, an I/O error or a
 *       commit that fails is OG_ESTORE_UNAVAILABLE, never REFUSED.
 *   Q5  Amounts are canonical decimal TEXT — never REAL — so equality is exact.
 *   Q6  A connection whose transaction state is unknown (ROLLBACK failed) is
 *       closed, never reused.
 *   Q7  Every wait is bounded by the store timeout, measured from the start
 *       of the call: the admissions of one store object queue for group
 *       commit (see "Group commit"; a waiting thread is woken, it does not
 *       poll), and the cross-process wait for SQLite's write lock polls with
 *       short jittered sleeps (sq_busy) until the same deadline. SQLite's default
 *       handler sleeps up to 100 ms between polls, which starved waiters past
 *       their timeout under 16+ concurrent callers.
 *
 * Timestamps are INTEGER microseconds since the Unix epoch at the
 * millisecond resolution of SQLite's clock.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "og_internal.h"

/* SQLite's clock in microseconds (millisecond resolution, exact). */
#define SQ_NOW \
    "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)"

#define SQ_OP_COLS                                                            \
    "operation_id, issuer, grant_id, caller_id, account_id, amount, "         \
    "currency, status, owner_version, lease_until, submit_by, created_at"

/* ===========================================================================
 * Schema: versioned migrations. Each runs inside the migrator's
 * BEGIN IMMEDIATE, so concurrent migrators serialize.
 * ========================================================================= */
typedef struct sq_migration {
    int version;
    const char *description;
    const char *sql;
} sq_migration;

static const sq_migration sq_migrations[] = {
    {1, "grant_consumptions and operations (token form)",
     /* One row per claimed grant key, by an admission or a revocation. */
     "CREATE TABLE grant_consumptions ("
     "  issuer       TEXT    NOT NULL"
     "               CHECK (length(CAST(issuer AS BLOB)) BETWEEN 1 AND 128),"
     "  grant_id     TEXT    NOT NULL"
     "               CHECK (length(CAST(grant_id AS BLOB)) BETWEEN 1 AND 128),"
     "  operation_id TEXT    CHECK (operation_id IS NULL OR length(operation_id) = 36),"
     "                       /* NULL only for a revocation holding this key */"
     "  consumed_at  INTEGER NOT NULL,  /* when the key was claimed */"
     "  retain_until INTEGER NOT NULL,  /* expires_at + admission leeway */"
     "  PRIMARY KEY (issuer, grant_id)  /* the atomic check */"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX grant_consumptions_retain_until_idx"
     "  ON grant_consumptions (retain_until);"
     "CREATE TABLE operations ("
     "  operation_id  TEXT    NOT NULL PRIMARY KEY CHECK (length(operation_id) = 36),"
     "  issuer        TEXT    NOT NULL,"
     "  grant_id      TEXT    NOT NULL,"
     "  caller_id     TEXT    NOT NULL"
     "                CHECK (length(CAST(caller_id AS BLOB)) BETWEEN 1 AND 128),"
     "  account_id    TEXT    NOT NULL"
     "                CHECK (length(CAST(account_id AS BLOB)) BETWEEN 1 AND 128),"
     "  amount        TEXT    NOT NULL  /* canonical decimal, never REAL */"
     "                CHECK (amount GLOB '[0-9]*' AND amount NOT GLOB '*[^0-9.]*'),"
     "  currency      TEXT    NOT NULL"
     "                CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),"
     "  status        TEXT    NOT NULL CHECK (status IN ('Admitted', 'Succeeded',"
     "                  'Failed', 'Unknown', 'NeedsReconciliation')),"
     "  owner_version INTEGER NOT NULL CHECK (owner_version >= 1),"
     "  lease_until   INTEGER NOT NULL,"
     "  submit_by     INTEGER NOT NULL,  /* latest time a create may be sent */"
     "  created_at    INTEGER NOT NULL,"
     "  CONSTRAINT operations_grant_key UNIQUE (issuer, grant_id)"
     "                                   /* one operation per grant */"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX operations_recovery_idx ON operations (lease_until)"
     "  WHERE status IN ('Admitted', 'Unknown');"},
};

/* ===========================================================================
 * Statements, prepared once per connection on first use.
 * ========================================================================= */
#define SQ_STATEMENTS(X)                                                       \
    X(BEGIN, "BEGIN IMMEDIATE")                                                \
    X(COMMIT, "COMMIT")                                                        \
    X(ROLLBACK, "ROLLBACK")                                                    \
    X(SAVEPOINT, "SAVEPOINT og_admit")                                         \
    X(RELEASE, "RELEASE og_admit")                                             \
    X(ROLLBACK_TO, "ROLLBACK TO og_admit")                                     \
    /* The claim: ?1 issuer, ?2 grant id, ?3 operation id, ?4 expires_at,     \
     * ?5 leeway. Returns a row only when this statement took the key. */     \
    X(CLAIM,                                                                   \
      "INSERT INTO grant_consumptions"                                         \
      " (issuer, grant_id, operation_id, consumed_at, retain_until)"           \
      " SELECT ?1, ?2, ?3, " SQ_NOW ", ?4 + ?5"                                \
      " WHERE ?4 + ?5 > " SQ_NOW                                               \
      " ON CONFLICT (issuer, grant_id) DO NOTHING"                             \
      " RETURNING grant_id")                                                   \
    /* The operation, in the same transaction: ?1..?7 the binding,            \
     * ?8 owner version, ?9 execution lease, ?10 submission window. */        \
    X(INSERT_OP,                                                               \
      "INSERT INTO operations (" SQ_OP_COLS ")"                                \
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'Admitted', ?8,"                    \
      "        t.now + ?9, t.now + ?10, t.now"                                 \
      " FROM (SELECT " SQ_NOW " AS now) t"                                     \
      " RETURNING " SQ_OP_COLS)                                                \
    X(READ_CONSUMPTION,                                                        \
      "SELECT operation_id FROM grant_consumptions"                            \
      " WHERE issuer = ?1 AND grant_id = ?2")                                  \
    X(READ_OP, "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1") \
    X(SCHEMA_TABLE,                                                            \
      "SELECT count(*) FROM sqlite_schema"                                     \
      " WHERE type = 'table' AND name = 'og_schema_migrations'")               \
    X(SCHEMA_VERSION, "SELECT coalesce(max(version), 0) FROM og_schema_migrations")

enum {
#define X(name, sql) SQ_##name,
    SQ_STATEMENTS(X)
#undef X
    SQ_N
};

static const char *const sq_sql[SQ_N] = {
#define X(name, sql) sql,
    SQ_STATEMENTS(X)
#undef X
};

typedef struct sq_store {
    char *path;
    og_store_options opts;
    og__pool *pool;
    /* Group commit (see "Group commit" below): the queue of admissions
     * waiting for a leader, and whether one is running a batch. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    struct sq_waiter *head, *tail;
    bool leading;
} sq_store;

typedef struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *st[SQ_N];
    int64_t deadline_us; /* CLOCK_MONOTONIC; the busy handler gives up here */
    uint32_t jitter;     /* xorshift state for the busy handler's sleeps */
} sq_conn;

static int64_t sq_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* SQLite's busy handler: 0 gives up (SQLITE_BUSY, i.e. unavailable), 1 asks
 * SQLite to try again. Sleeps 50 us .. ~2 ms, growing with the attempt count,
 * jittered so that processes polling the same lock do not move in step (Q7). */
static int sq_busy(void *arg, int count)
{
    sq_conn *c = arg;
    int64_t left = c->deadline_us - sq_mono_us();
    int64_t cap = count < 5 ? INT64_C(50) << count : 2000;
    struct timespec ts;
    int64_t us;

    if (left <= 0)
        return 0;
    c->jitter ^= c->jitter << 13;
    c->jitter ^= c->jitter >> 17;
    c->jitter ^= c->jitter << 5;
    us = cap / 2 + (int64_t)(c->jitter % (uint32_t)(cap / 2 + 1));
    if (us > left)
        us = left;
    ts.tv_sec = (time_t)(us / 1000000);
    ts.tv_nsec = (long)(us % 1000000) * 1000;
    nanosleep(&ts, NULL);
    return 1;
}

/* Arms the deadline for one store call on c. */
static void sq_arm(sq_conn *c, int64_t deadline_us)
{
    c->deadline_us = deadline_us;
}

/* ===========================================================================
 * Connections
 * ========================================================================= */

/* Applies the per-connection settings every admission relies on (Q4). */
static int sq_configure(sqlite3 *db, const og_store_options *o)
{
    int ms = (int)(o->timings.store_timeout_us / 1000);
    int rc;

    sqlite3_busy_timeout(db, ms > 0 ? ms : 1);
    rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return og__sqlite_classify(sqlite3_extended_errcode(db));
    return 0;
}

/* Opens a connection; create=true only for migrations, so opening a store
 * that was never migrated does not leave an empty file behind. */
static int sq_open_db(const sq_store *s, bool create, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(s->path, &db, flags, NULL);

    if (rc != SQLITE_OK) {
        rc = db ? og__sqlite_classify(sqlite3_extended_errcode(db))
                : OG_ENOMEM;
        sqlite3_close(db);
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    if ((rc = sq_configure(db, &s->opts)) < 0) {
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

static int sq_connect(void *ctx, void **conn)
{
    sq_conn *c = calloc(1, sizeof *c);
    int rc;

    if (!c)
        return OG_ENOMEM;
    if ((rc = sq_open_db(ctx, false, &c->db)) < 0) {
        free(c);
        return rc;
    }
    /* Replaces sq_configure's busy_timeout: the deadline is per call. */
    c->jitter = ((uint32_t)(uintptr_t)c ^ (uint32_t)getpid() ^
                 (uint32_t)sq_mono_us()) | 1u;
    c->deadline_us = sq_mono_us() + ((sq_store *)ctx)->opts.timings.store_timeout_us;
    sqlite3_busy_handler(c->db, sq_busy, c);
    *conn = c;
    return 0;
}

static void sq_disconnect(void *ctx, void *conn)
{
    sq_conn *c = conn;

    for (int i = 0; i < SQ_N; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    free(c);
}

static const og__pool_ops sq_pool_ops = {sq_connect, sq_disconnect};

/* The prepared statement i, reset and with bindings cleared, or NULL. */
static sqlite3_stmt *sq_stmt(sq_conn *c, int i)
{
    if (!c->st[i]) {
        if (sqlite3_prepare_v3(c->db, sq_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &c->st[i], NULL) != SQLITE_OK)
            return NULL;
    }
    sqlite3_reset(c->st[i]);
    sqlite3_clear_bindings(c->st[i]);
    return c->st[i];
}

/* The error for the connection's last failure. */
static int sq_err(sq_conn *c)
{
    return og__sqlite_classify(sqlite3_extended_errcode(c->db));
}

/* Runs a statement that returns no row. */
static int sq_exec(sq_conn *c, int i)
{
    sqlite3_stmt *st = sq_stmt(c, i);
    int rc;

    if (!st)
        return sq_err(c);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_err(c);
}

/* Ends a failed transaction. false when the connection's state is unknown
 * and it must be closed (Q6). */
static bool sq_rollback(sq_conn *c)
{
    for (int i = 0; i < SQ_N; i++)
        if (c->st[i])
            sqlite3_reset(c->st[i]);
    if (sqlite3_get_autocommit(c->db))
        return true; /* SQLite already rolled back (e.g. after an I/O error) */
    return sq_exec(c, SQ_ROLLBACK) == 0;
}

/* ===========================================================================
 * Rows
 * ========================================================================= */
static int sq_text(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return og__copy(dst, n, (const char *)t) < 0 ? OG_EINTERNAL : 0;
}

/* Fills *op from the SQ_OP_COLS columns of the current row. */
static int sq_read_op(sqlite3_stmt *st, og_operation *op)
{
    int status;

    memset(op, 0, sizeof *op);
    if (sq_text(st, 0, op->operation_id, sizeof op->operation_id) < 0 ||
        sq_text(st, 1, op->issuer, sizeof op->issuer) < 0 ||
        sq_text(st, 2, op->grant_id, sizeof op->grant_id) < 0 ||
        sq_text(st, 3, op->caller_id, sizeof op->caller_id) < 0 ||
        sq_text(st, 4, op->account_id, sizeof op->account_id) < 0 ||
        sq_text(st, 5, op->amount, sizeof op->amount) < 0 ||
        sq_text(st, 6, op->currency, sizeof op->currency) < 0)
        return OG_EINTERNAL;
    status = og__op_status_parse((const char *)sqlite3_column_text(st, 7));
    if (status < 0)
        return OG_EINTERNAL;
    op->status = (og_op_status)status;
    op->owner_version = sqlite3_column_int64(st, 8);
    op->lease_until_us = sqlite3_column_int64(st, 9);
    op->submit_by_us = sqlite3_column_int64(st, 10);
    op->created_at_us = sqlite3_column_int64(st, 11);
    return 0;
}

/* Reads the operation by id on c: 1 found, 0 not, negative error. */
static int sq_read_op_by_id(sq_conn *c, const char *id, og_operation *op)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_READ_OP);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = sq_read_op(st, op) < 0 ? OG_EINTERNAL : 1;
    else if (rc == SQLITE_DONE)
        rc = 0;
    else
        rc = sq_err(c);
    sqlite3_reset(st);
    return rc;
}

/* ===========================================================================
 * The admission
 * ========================================================================= */

/* After a claim that took nothing, inside the same transaction: read what
 * holds the key and what the operation id names, and classify. */
static int sq_followup(sq_conn *c, const og__admit_req *req, og_admission *out)
{
    og__consumption cons = {0};
    og_operation op;
    sqlite3_stmt *st = sq_stmt(c, SQ_READ_CONSUMPTION);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        cons.present = true;
        if (sqlite3_column_type(st, 0) != SQLITE_NULL) {
            cons.has_operation = true;
            if (sq_text(st, 0, cons.operation_id, sizeof cons.operation_id) < 0)
                rc = OG_EINTERNAL;
        }
    } else if (rc != SQLITE_DONE) {
        rc = sq_err(c);
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;

    rc = sq_read_op_by_id(c, req->operation_id, &op);
    if (rc < 0)
        return rc;
    og__classify_unclaimed(req, &cons, rc == 1 ? &op : NULL, out);
    return 0;
}

/* One admission inside the batch's write transaction, in its own savepoint:
 * the claim, then the operation insert (Q1, Q2). Returns 0 with *out, or a
 * negative error. *keep says whether the savepoint holds a write to keep
 * (ADMITTED); every other answer rolls the savepoint back. */
static int sq_admit_one(sq_store *s, sq_conn *c, const og__admit_req *req,
                        og_admission *out, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    og_admission res;
    sqlite3_stmt *st;
    bool claimed;
    int rc, step;

    *keep = false;
    /* 1. The claim: the key and the deadline, on SQLite's clock (Q3). */
    if (!(st = sq_stmt(c, SQ_CLAIM)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, req->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, req->expires_at_us);
    sqlite3_bind_int64(st, 5, t->admission_leeway_us);
    step = sqlite3_step(st);
    claimed = step == SQLITE_ROW; /* RETURNING: a row only if we took the key */
    if (claimed)
        step = sqlite3_step(st); /* run to completion */
    sqlite3_reset(st);
    if (step != SQLITE_DONE)
        return sq_err(c);
    if (!claimed)
        return sq_followup(c, req, out); /* nothing written; report */

    /* 2. The operation, bound to the grant, in the same transaction. */
    if (!(st = sq_stmt(c, SQ_INSERT_OP)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, req->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, req->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, req->caller_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, req->account_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, req->amount, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, req->currency, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, OG__INITIAL_OWNER_VERSION);
    sqlite3_bind_int64(st, 9, t->execution_lease_us);
    sqlite3_bind_int64(st, 10, t->submission_window_us);
    step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode(c->db);
        sqlite3_reset(st);
        /* Q2: a taken operation id or a grant already bound to an operation
         * refuses the whole admission; rolling back the savepoint undoes the
         * claim. */
        if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
            memset(out, 0, sizeof *out);
            out->outcome = OG_OUTCOME_REFUSED;
            out->refusal = ext == SQLITE_CONSTRAINT_PRIMARYKEY
                               ? OG_REFUSAL_OPERATION_ID_TAKEN
                               : OG_REFUSAL_GRANT_SPENT;
            return 0;
        }
        return og__sqlite_classify(ext);
    }
    memset(&res, 0, sizeof res);
    res.outcome = OG_OUTCOME_ADMITTED;
    rc = sq_read_op(st, &res.operation);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (step != SQLITE_DONE)
        return sq_err(c);
    *out = res;
    *keep = true;
    return 0;
}

/* ===========================================================================
 * Group commit
 *
 * SQLite has one writer at a time and every commit fsyncs the WAL (Q4), so
 * the obvious design — one transaction per admission — spends one fsync per
 * admission and makes concurrent callers poll for the lock. Instead, callers
 * of one store object queue; one of them, the leader, takes every queued
 * admission (up to SQ_BATCH_MAX), runs them in ONE BEGIN IMMEDIATE
 * transaction, each in its own SAVEPOINT, and commits once. Invariants:
 *
 *   G1  Each admission is still atomic on its own: its claim and its
 *       operation insert are one savepoint, released together or rolled
 *       back together.
 *   G2  No answer before the commit: every caller in a batch learns its
 *       outcome only after COMMIT returned SQLITE_OK. An admission refused
 *       because of a batch-mate's claim is therefore refused on committed
 *       state. A failed commit answers OG_ESTORE_UNAVAILABLE to every caller
 *       in the batch — true, since none of their writes is confirmed.
 *   G3  A caller whose deadline passes while it is still queued leaves the
 *       queue with OG_ESTORE_UNAVAILABLE; nothing of it has run. A caller
 *       taken into a batch waits for the batch, which is bounded by the
 *       earliest deadline in it.
 *   G4  An error confined to one admission (a defect such as a CHECK
 *       failure) rolls back that admission's savepoint only; an error that
 *       ends the transaction (I/O, full disk) fails the whole batch.
 * ========================================================================= */
#define SQ_BATCH_MAX 128

typedef struct sq_waiter {
    const og__admit_req *req;
    og_admission res;
    int rc;
    int64_t deadline_us;
    bool taken; /* in a batch: its result is coming */
    bool done;
    struct sq_waiter *next;
} sq_waiter;

/* Runs a savepoint statement; false when the transaction is gone. */
static bool sq_savepoint(sq_conn *c, int which)
{
    return sq_exec(c, which) == 0 && !sqlite3_get_autocommit(c->db);
}

/* Runs batch[0..n) in one write transaction on c; fills each rc/res. */
static void sq_run_batch(sq_store *s, sq_conn *c, sq_waiter **batch, int n)
{
    int64_t deadline = batch[0]->deadline_us;
    int rc, i;

    for (i = 1; i < n; i++)
        if (batch[i]->deadline_us < deadline)
            deadline = batch[i]->deadline_us;
    sq_arm(c, deadline);

    if ((rc = sq_exec(c, SQ_BEGIN)) < 0) /* lock wait past the deadline */
        goto fail_all;
    for (i = 0; i < n; i++) {
        bool keep = false;

        if (!sq_savepoint(c, SQ_SAVEPOINT)) {
            rc = sq_err(c);
            goto fail_all;
        }
        batch[i]->rc = sq_admit_one(s, c, batch[i]->req, &batch[i]->res, &keep);
        if (sqlite3_get_autocommit(c->db)) { /* G4: SQLite ended the txn */
            rc = batch[i]->rc < 0 ? batch[i]->rc : OG_ESTORE_UNAVAILABLE;
            goto fail_all;
        }
        for (int k = 0; k < SQ_N; k++) /* no statement may stay active */
            if (c->st[k])
                sqlite3_reset(c->st[k]);
        if (batch[i]->rc < 0 || !keep) {
            if (!sq_savepoint(c, SQ_ROLLBACK_TO)) { /* G1 */
                rc = OG_ESTORE_UNAVAILABLE;
                goto fail_all;
            }
        }
        if (sq_exec(c, SQ_RELEASE) < 0) {
            rc = sq_err(c);
            goto fail_all;
        }
    }
    if ((rc = sq_exec(c, SQ_COMMIT)) < 0) /* G2 */
        goto fail_all;
    return;

fail_all:
    if (rc >= 0)
        rc = OG_ESTORE_UNAVAILABLE;
    /* Not committed, or not confirmed: every caller in the batch gets the
     * error that ended the transaction, never an outcome (G2). */
    for (i = 0; i < n; i++)
        batch[i]->rc = rc;
}

/* Takes up to SQ_BATCH_MAX waiters off the queue (FIFO). Called with mu. */
static int sq_take_batch(sq_store *s, sq_waiter **batch)
{
    int n = 0;

    while (s->head && n < SQ_BATCH_MAX) {
        sq_waiter *w = s->head;
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        w->taken = true;
        batch[n++] = w;
    }
    return n;
}

/* Removes w from the queue (it gave up before being taken). With mu. */
static void sq_unqueue(sq_store *s, sq_waiter *w)
{
    sq_waiter **pp = &s->head, *prev = NULL;

    while (*pp && *pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp) {
        *pp = w->next;
        if (s->tail == w)
            s->tail = prev;
    }
}

static struct timespec sq_abs_mono(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    return ts;
}

static int sq_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    sq_store *s = impl;
    sq_waiter w = {.req = req, .rc = 0,
                   .deadline_us = sq_mono_us() + s->opts.timings.store_timeout_us};
    sq_waiter *batch[SQ_BATCH_MAX];

    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = &w;
    else
        s->head = &w;
    s->tail = &w;

    while (!w.done) {
        if (!s->leading) {
            /* Lead: run everything queued, then hand over. */
            void *conn = NULL;
            bool broken = false;
            int n, rc;

            s->leading = true;
            n = sq_take_batch(s, batch);
            pthread_mutex_unlock(&s->mu);

            rc = og__pool_get(s->pool, &conn);
            if (rc < 0) {
                for (int i = 0; i < n; i++)
                    batch[i]->rc = rc;
            } else {
                sq_run_batch(s, conn, batch, n);
                broken = !sq_rollback(conn); /* no-op after a commit */
                og__pool_put(s->pool, conn, broken);
            }

            pthread_mutex_lock(&s->mu);
            for (int i = 0; i < n; i++)
                batch[i]->done = true;
            s->leading = false;
            pthread_cond_broadcast(&s->cv);
            continue;
        }
        if (!w.taken && sq_mono_us() >= w.deadline_us) {
            sq_unqueue(s, &w); /* G3: never ran */
            w.rc = OG_ESTORE_UNAVAILABLE;
            break;
        }
        if (w.taken) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else {
            struct timespec until = sq_abs_mono(w.deadline_us);
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (w.rc == 0)
        *out = w.res;
    return w.rc;
}

static int sq_operation_get(void *impl, const char *id, og_operation *out)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_read_op_by_id(conn, id, out);
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ===========================================================================
 * Schema version and migrations
 * ========================================================================= */

/* Version on an open connection: 0 when never migrated. */
static int sq_version_on(sqlite3 *db, int *version)
{
    sqlite3_stmt *st = NULL;
    int rc, v = 0, present;

    rc = sqlite3_prepare_v2(db, sq_sql[SQ_SCHEMA_TABLE], -1, &st, NULL);
    if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
        goto fail;
    present = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (present) {
        rc = sqlite3_prepare_v2(db, sq_sql[SQ_SCHEMA_VERSION], -1, &st, NULL);
        if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
            goto fail;
        v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    *version = v;
    return 0;
fail:
    rc = og__sqlite_classify(sqlite3_extended_errcode(db));
    sqlite3_finalize(st);
    return rc;
}

static int sq_schema_version(void *impl, int *version)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    /* A store that does not exist yet has never been migrated. */
    if (access(s->path, F_OK) != 0) {
        *version = 0;
        return 0;
    }
    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_version_on(((sq_conn *)conn)->db, version);
    og__pool_put(s->pool, conn, rc < 0);
    return rc;
}

static int sq_migrate(void *impl, int *from, int *to)
{
    sq_store *s = impl;
    sqlite3 *db = NULL;
    int rc, v = 0;
    size_t i;

    if ((rc = sq_open_db(s, true, &db)) < 0)
        return rc;
    /* BEGIN IMMEDIATE serializes concurrent migrators; each re-reads the
     * version under the lock. */
    if (sqlite3_exec(db,
                     "BEGIN IMMEDIATE;"
                     "CREATE TABLE IF NOT EXISTS og_schema_migrations ("
                     "  version     INTEGER PRIMARY KEY,"
                     "  description TEXT    NOT NULL,"
                     "  applied_at  INTEGER NOT NULL) STRICT;",
                     NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    if ((rc = sq_version_on(db, &v)) < 0)
        goto out;
    *from = v;
    if (v > OG_SCHEMA_VERSION) {
        rc = OG_ESCHEMA; /* a newer build migrated this store */
        goto out;
    }
    for (i = 0; i < sizeof sq_migrations / sizeof sq_migrations[0]; i++) {
        const sq_migration *m = &sq_migrations[i];
        sqlite3_stmt *st = NULL;

        if (m->version <= v)
            continue;
        if (sqlite3_exec(db, m->sql, NULL, NULL, NULL) != SQLITE_OK)
            goto fail;
        if (sqlite3_prepare_v2(db,
                               "INSERT INTO og_schema_migrations"
                               " (version, description, applied_at)"
                               " VALUES (?1, ?2, " SQ_NOW ")",
                               -1, &st, NULL) != SQLITE_OK)
            goto fail;
        sqlite3_bind_int(st, 1, m->version);
        sqlite3_bind_text(st, 2, m->description, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            goto fail;
        v = m->version;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    *to = v;
    rc = 0;
    goto out;
fail:
    rc = og__sqlite_classify(sqlite3_extended_errcode(db));
out:
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* ===========================================================================
 * Open / close
 * ========================================================================= */
static int sq_open(const char *target, const og_store_options *opts,
                   void **impl)
{
    sq_store *s = calloc(1, sizeof *s);

    if (!s)
        return OG_ENOMEM;
    s->path = strdup(target);
    s->opts = *opts;
    s->pool = og__pool_new(&sq_pool_ops, s, opts->pool_size,
                           opts->timings.store_timeout_us);
    if (!s->path || !s->pool) {
        og__pool_free(s->pool);
        free(s->path);
        free(s);
        return OG_ENOMEM;
    }
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    pthread_mutex_init(&s->mu, NULL);
    *impl = s;
    return 0;
}

static void sq_close(void *impl)
{
    sq_store *s = impl;

    og__pool_free(s->pool);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

const og__store_methods og__sqlite_methods = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .schema_version = sq_schema_version,
    .migrate = sq_migrate,
    .admit = sq_admit,
    .operation_get = sq_operation_get,
};
