/*
 * store.c — the sandbox's state in one SQLite file: credits and payouts,
 * their idempotency keys with the saved results, authorization codes, and
 * the request counters. The decisions come from core.c; this file carries
 * them out, and its statements sit next to the code that runs them.
 *
 * Invariants:
 *   SB1  Durable before answered: WAL with synchronous=FULL fsyncs the log
 *        at every COMMIT, and a result is returned only after COMMIT
 *        returned SQLITE_OK. A credit that was answered survives a crash or
 *        _exit of the process (exit_after_effect relies on it).
 *   SB2  One key, one credit (atomic mode): the key is read, the decision
 *        taken and the credit and key rows written in ONE BEGIN IMMEDIATE
 *        transaction. BEGIN IMMEDIATE takes the database's write lock
 *        before the read, so two requests — two threads, or two processes
 *        on one file — can never both see the key as free; the PRIMARY KEY
 *        on idempotency_keys backs it (an insert that changes nothing is a
 *        defect, OG_SBX_EINTERNAL).
 *   SB3  Without atomic_same_key the read and the write are two
 *        transactions with race_gap between them and the key insert is ON
 *        CONFLICT DO NOTHING: concurrent first uses of a key each create a
 *        credit and the first to commit owns the key. This models a
 *        provider that does not document atomic handling (docs/sandbox.md).
 *   SB4  The decision's time is read after the write lock is held, so a
 *        wait for the lock never lets a request create after its expiry
 *        (core.c SC4), and created_at orders like the commits.
 *   SB5  Counters change in the transaction of the request they count, so
 *        stats and credits agree after any crash.
 *   SB6  A failed call changes nothing: any error rolls the transaction
 *        back. A connection whose ROLLBACK failed is marked broken and
 *        every later call fails (its transaction state is unknown).
 *   SB7  Amounts are canonical decimal TEXT, never REAL: equality is exact.
 *   SB8  A code is exchanged at most once: the exchange is ONE conditional
 *        UPDATE (exchanged_us IS NULL) inside a BEGIN IMMEDIATE transaction,
 *        so of any number of concurrent exchanges of one code — threads or
 *        processes on one file — exactly one changes the row. The tokens it
 *        answers are not stored: like a real authorization server, the
 *        sandbox never hands out the same exchange result twice.
 *   SB9  One resource, one set of statements: every table and statement of
 *        a credit or payout is a template instantiated per row of
 *        og_sbx_resources (expand()), so SB1-SB7 hold for payouts because
 *        they are the same code. Each resource has its own keys table: a
 *        key names one request of one resource.
 *   SB10 A return is ONE conditional UPDATE (returned_us IS NULL, complete
 *        by now) in a write transaction: it never undoes the create and
 *        never touches the key, whose saved result keeps replaying (core.c
 *        SC7).
 *   SB11 Nothing becomes visible late: a record is created at the time its
 *        transaction read after taking the write lock, and a lookup reads
 *        its time after taking the same lock, so a lookup at time L lists
 *        every record created at or before L - visibility delay. With SB4
 *        (nothing is created after expires_at + skew) a lookup made at or
 *        after expires_at + skew + visibility delay lists every record its
 *        request ever had or will have (docs/sandbox.md, "The processing
 *        window").
 *   SB12 Group commit (atomic mode): concurrent creates share ONE write
 *        transaction and one fsync. A create waits only while another
 *        batch is running; the first waiter then leads the next batch with
 *        every create waiting at that moment (never on a timer), up to
 *        BATCH_MAX. Inside it each create runs exactly as alone (SB2, SB4,
 *        SB5: read the key, decide at a time read now, write), in its own
 *        SAVEPOINT: a create that fails is rolled back to it and answers
 *        its error alone (SB6), the others go on; a later create of the
 *        same key sees the earlier one's key row (one transaction) and
 *        replays it, as it would after its commit. Every answer waits for
 *        the batch's COMMIT (SB1); when the COMMIT (or a savepoint's undo)
 *        fails, nothing of the batch is written and every create of it
 *        answers OG_SBX_ESTORE. Without atomic_same_key creates stay one
 *        at a time (SB3 models a provider that is not atomic).
 *
 * One connection serves every thread; the mutex makes each call's
 * transaction exclusive on it. SB2 rests on the transaction, not on the
 * mutex; SB12 only lets a benchmark's provider commit like a real one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "sandbox.h"

#define SCHEMA_VERSION 3
#define BUSY_TIMEOUT_MS 10000  /* another process holding the file */

/* ===========================================================================
 * SQL templates (SB9): every statement and table of a resource is written
 * ONCE, with these names, and instantiated for each row of
 * og_sbx_resources by expand():
 *   @T        the records' table ("credits", "payouts")
 *   @K        the keys' table ("idempotency_keys", "payout_keys")
 *   @target   the target column ("account", "destination")
 *   @ref      the key's column naming its record ("credit_id", "payout_id")
 *   @returned "returned_us" with returns, else the SQL NULL
 *   @retcol   the returned_us column's definition with returns, else ""
 * ========================================================================= */

/* A resource's tables (schema version 1 for credits, 3 for payouts). IF
 * NOT EXISTS: a step may meet the tables of a later one in a file whose
 * version was set back by hand; their rows stay. */
static const char resource_tables[] =
    "CREATE TABLE IF NOT EXISTS @T ("
    "  seq           INTEGER PRIMARY KEY," /* creation order */
    "  id            TEXT    NOT NULL UNIQUE,"
    "  idempotency_key TEXT  NOT NULL," /* the key that created it */
    "  @target       TEXT    NOT NULL,"
    "  amount        TEXT    NOT NULL," /* canonical decimal (SB7) */
    "  currency      TEXT    NOT NULL,"
    "  reference     TEXT    NOT NULL,"
    "  expires_at_us INTEGER NOT NULL,"
    "  created_us    INTEGER NOT NULL,"
    "  completes_us  INTEGER NOT NULL CHECK (completes_us >= created_us)"
    "  @retcol"
    ");"
    "CREATE INDEX IF NOT EXISTS @T_reference ON @T (reference, seq);"
    "CREATE INDEX IF NOT EXISTS @T_key ON @T (idempotency_key, seq);"
    "CREATE TABLE IF NOT EXISTS @K ("
    "  key           TEXT    PRIMARY KEY,"
    "  @target       TEXT    NOT NULL,"
    "  amount        TEXT    NOT NULL,"
    "  currency      TEXT    NOT NULL,"
    "  reference     TEXT    NOT NULL,"
    "  expires_at_us INTEGER NOT NULL,"
    "  recorded_us   INTEGER NOT NULL,"
    "  @ref          TEXT    REFERENCES @T (id)," /* a record, or */
    "  error         TEXT,"                       /* a refusal */
    "  CHECK ((@ref IS NULL) <> (error IS NULL))"
    ") WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS @K_recorded ON @K (recorded_us);";

/* Version 1: credits, their keys, the counters. */
static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS counters ("
    "  name  TEXT    PRIMARY KEY,"
    "  value INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "PRAGMA user_version = 1;";

/* Version 2: authorization codes for POST /oauth/token (SB8). */
static const char schema_v2[] =
    "CREATE TABLE codes ("
    "  code          TEXT    PRIMARY KEY,"
    "  minted_us     INTEGER NOT NULL,"
    "  exchanged_us  INTEGER"              /* NULL: never exchanged */
    ") WITHOUT ROWID;"
    "PRAGMA user_version = 2;";

/* Version 3: payouts (their tables come from resource_tables). */
static const char schema_v3[] = "PRAGMA user_version = 3;";

#define ROW_COLS                                                               \
    "id, @target, amount, currency, reference, expires_at_us, created_us,"    \
    " completes_us"

/* ===========================================================================
 * Statements, prepared once at open: the ones of the whole state, then
 * one block per resource (SB9).
 * ========================================================================= */
#define ST_MAP(X)                                                              \
    X(BEGIN_WRITE, "BEGIN IMMEDIATE")                                          \
    X(BEGIN_READ, "BEGIN")                                                     \
    X(COMMIT, "COMMIT")                                                        \
    X(ROLLBACK, "ROLLBACK")                                                    \
    /* SB12: one create of a batch, undone alone when it fails. */             \
    X(SAVEPOINT, "SAVEPOINT one_create")                                       \
    X(RELEASE, "RELEASE one_create")                                           \
    X(ROLLBACK_TO, "ROLLBACK TO one_create")                                   \
    X(COUNT_ADD,                                                               \
      "INSERT INTO counters (name, value) VALUES (?1, 1)"                      \
      " ON CONFLICT (name) DO UPDATE SET value = value + 1")                   \
    X(COUNTERS, "SELECT name, value FROM counters")                            \
    X(RESET_COUNTERS, "DELETE FROM counters")                                  \
    X(RESET_CODES, "DELETE FROM codes")                                        \
    /* ?1 code, ?2 now. */                                                     \
    X(CODE_INSERT, "INSERT INTO codes (code, minted_us) VALUES (?1, ?2)")      \
    /* SB8: a row only if this statement spent the code. ?1 code, ?2 now. */   \
    X(CODE_EXCHANGE,                                                           \
      "UPDATE codes SET exchanged_us = ?2"                                     \
      " WHERE code = ?1 AND exchanged_us IS NULL RETURNING 1")                 \
    X(CODE_COUNTS,                                                             \
      "SELECT count(*), count(exchanged_us) FROM codes")

/* X(name, returns only, template). */
#define RST_MAP(X)                                                             \
    /* Keys past retention (og_sbx_key_retained is false): ?1 retention,     \
     * ?2 now. */                                                              \
    X(PRUNE_KEYS, false, "DELETE FROM @K WHERE recorded_us + ?1 <= ?2")       \
    /* A key's saved result with its record, if it has one: ?1 key. */         \
    X(KEY_GET, false,                                                          \
      "SELECT k.@target, k.amount, k.currency, k.reference,"                   \
      "       k.expires_at_us, k.recorded_us, k.error,"                        \
      "       c.id, c.@target, c.amount, c.currency, c.reference,"             \
      "       c.expires_at_us, c.created_us, c.completes_us"                   \
      " FROM @K k LEFT JOIN @T c ON c.id = k.@ref"                             \
      " WHERE k.key = ?1")                                                     \
    X(INSERT, false,                                                           \
      "INSERT INTO @T (idempotency_key, " ROW_COLS ")"                         \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")                          \
    /* The first to commit owns the key (SB2: never conflicts; SB3: may). */   \
    X(KEY_INSERT, false,                                                       \
      "INSERT INTO @K (key, @target, amount, currency,"                        \
      "  reference, expires_at_us, recorded_us, @ref, error)"                  \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"                           \
      " ON CONFLICT (key) DO NOTHING")                                         \
    X(BY_REFERENCE, false,                                                     \
      "SELECT " ROW_COLS ", @returned FROM @T WHERE reference = ?1"            \
      " ORDER BY seq")                                                         \
    X(BY_KEY, false,                                                           \
      "SELECT " ROW_COLS ", @returned FROM @T WHERE idempotency_key = ?1"      \
      " ORDER BY seq")                                                         \
    X(ROW_COUNTS, false, "SELECT count(*), count(@returned) FROM @T")          \
    X(RESET_KEYS, false, "DELETE FROM @K")                                     \
    X(RESET_ROWS, false, "DELETE FROM @T")                                     \
    /* SB10: a row only when this statement returned a complete record. ?1     \
     * id, ?2 now. */                                                          \
    X(RETURN, true,                                                            \
      "UPDATE @T SET returned_us = ?2 WHERE id = ?1 AND returned_us IS NULL"   \
      " AND completes_us <= ?2 RETURNING 1")                                   \
    X(BY_ID, true, "SELECT " ROW_COLS ", @returned FROM @T WHERE id = ?1")

enum {
#define ST_ENUM(name, sql) ST_##name,
    ST_MAP(ST_ENUM)
#undef ST_ENUM
    ST_N
};

enum {
#define RST_ENUM(name, returns, sql) RST_##name,
    RST_MAP(RST_ENUM)
#undef RST_ENUM
    RST_N
};

#define ALL_ST (ST_N + OG_SBX_N_KINDS * RST_N)

static const char *const st_sql[ST_N] = {
#define ST_SQL(name, sql) sql,
    ST_MAP(ST_SQL)
#undef ST_SQL
};

static const char *const st_names[ST_N] = {
#define ST_NAME(name, sql) #name,
    ST_MAP(ST_NAME)
#undef ST_NAME
};

static const struct {
    const char *name;
    bool returns;   /* prepared only for a resource with returns */
    const char *sql;
} rst_table[RST_N] = {
#define RST_ROW(name, returns, sql) {#name, returns, sql},
    RST_MAP(RST_ROW)
#undef RST_ROW
};

/* Statement k of resource res, as an index of og_sbx_store.st. */
static int rst(const og_sbx_resource *res, int k)
{
    return ST_N + (int)res->kind * RST_N + k;
}

/* The name of statement i, for logs ("PRUNE_KEYS"). */
static const char *st_name(int i)
{
    return i < ST_N ? st_names[i] : rst_table[(i - ST_N) % RST_N].name;
}

struct gc_waiter;

struct og_sbx_store {
    pthread_mutex_t mu;    /* one transaction at a time on db */
    sqlite3 *db;
    sqlite3_stmt *st[ALL_ST]; /* NULL: not prepared (returns only) */
    bool broken;           /* SB6: a ROLLBACK failed */
    pthread_mutex_t gc_mu; /* SB12: guards the four below */
    pthread_cond_t gc_cv;  /* a batch ended */
    struct gc_waiter *gc_head, *gc_tail; /* creates waiting for a batch */
    bool gc_busy;          /* a batch is running */
};

/* Counter names (stats members) that no resource row carries. */
#define C_TOKEN_REQUESTS "token_requests"
#define C_INVALID_GRANTS "invalid_grants"

/* Expands template t for res into out (len). 0, or -1 when it does not
 * fit. */
static int expand(const og_sbx_resource *res, const char *t, char *out,
                  size_t len)
{
    const struct {
        const char *name, *value;
    } sub[] = {
        {"@target", res->target},
        {"@returned", res->returns ? "returned_us" : "NULL"},
        {"@retcol", res->returns ? ", returned_us INTEGER CHECK (returned_us"
                                   " >= completes_us)"
                                 : ""},
        {"@ref", res->key_ref},
        {"@T", res->table},
        {"@K", res->keys_table},
    };
    size_t o = 0;

    while (*t) {
        const char *v = NULL;
        size_t k, n = 1;

        for (k = 0; *t == '@' && k < sizeof sub / sizeof sub[0]; k++)
            if (strncmp(t, sub[k].name, strlen(sub[k].name)) == 0) {
                v = sub[k].value;
                n = strlen(sub[k].name);
                break;
            }
        if (!v) {
            if (o + 1 >= len)
                return -1;
            out[o++] = *t++;
            continue;
        }
        if (o + strlen(v) >= len)
            return -1;
        memcpy(out + o, v, strlen(v));
        o += strlen(v);
        t += n;
    }
    out[o] = '\0';
    return 0;
}

/* ===========================================================================
 * Statement helpers: every SQLite result is checked here.
 * ========================================================================= */

/* Logs a failed SQLite call (the operation and SQLite's own message, which
 * never contains bound values) and returns OG_SBX_ESTORE. */
static int sq_fail(og_sbx_store *s, const char *what)
{
    og_sbx_log(OG_SBX_LOG_ERROR, "store_error",
               json_pack("{s:s, s:i, s:s}", "op", what, "sqlite_code",
                         sqlite3_extended_errcode(s->db), "message",
                         sqlite3_errmsg(s->db)));
    return OG_SBX_ESTORE;
}

/* Statement i, reset and unbound: ready to bind. */
static sqlite3_stmt *st(og_sbx_store *s, int i)
{
    sqlite3_reset(s->st[i]); /* its result is the previous step's */
    sqlite3_clear_bindings(s->st[i]);
    return s->st[i];
}

/* Binding ?1, ?2, … in order with typed calls (the compiler checks each
 * value's type); b_done checks that every parameter got a value. */
typedef struct binder {
    og_sbx_store *s;
    int i;      /* the statement */
    int next;   /* the next parameter number */
    int rc;     /* the first SQLite failure */
} binder;

static binder b_start(og_sbx_store *s, int i)
{
    return (binder){s, i, 1, SQLITE_OK};
}

/* A string, or NULL for SQL NULL. */
static void b_text(binder *b, const char *v)
{
    sqlite3_stmt *q = b->s->st[b->i];

    if (b->rc == SQLITE_OK)
        b->rc = v ? sqlite3_bind_text(q, b->next, v, -1, SQLITE_TRANSIENT)
                  : sqlite3_bind_null(q, b->next);
    b->next++;
}

static void b_int(binder *b, int64_t v)
{
    if (b->rc == SQLITE_OK)
        b->rc = sqlite3_bind_int64(b->s->st[b->i], b->next, v);
    b->next++;
}

/* The parameters a key is compared on, in column order: target, amount,
 * currency, reference, expires_at_us. */
static void b_params(binder *b, const og_sbx_params *q)
{
    b_text(b, q->target);
    b_text(b, q->amount);
    b_text(b, q->currency);
    b_text(b, q->reference);
    b_int(b, q->expires_at_us);
}

/* 0, OG_SBX_ESTORE on a failed bind, or OG_SBX_EINTERNAL when the number
 * of values differs from the statement's parameters (a defect). */
static int b_done(binder *b)
{
    if (b->rc != SQLITE_OK)
        return sq_fail(b->s, st_name(b->i));
    if (b->next - 1 != sqlite3_bind_parameter_count(b->s->st[b->i]))
        return OG_SBX_EINTERNAL;
    return 0;
}

/* Runs statement i to completion (no rows expected). */
static int run(og_sbx_store *s, int i)
{
    int rc = sqlite3_step(s->st[i]);

    sqlite3_reset(s->st[i]);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, st_name(i));
}

/* Steps statement i: 1 a row, 0 done, or OG_SBX_ESTORE. */
static int next_row(og_sbx_store *s, int i)
{
    int rc = sqlite3_step(s->st[i]);

    if (rc == SQLITE_ROW)
        return 1;
    sqlite3_reset(s->st[i]);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, st_name(i));
}

/* Column col of statement i as text into buf (len); NULL is "". 0, or
 * OG_SBX_EINTERNAL when it does not fit (the file was edited by hand) or
 * OG_SBX_ENOMEM. */
static int col_text(og_sbx_store *s, int i, int col, char *buf, size_t len)
{
    const unsigned char *t = sqlite3_column_text(s->st[i], col);

    if (!t) {
        if (sqlite3_column_type(s->st[i], col) != SQLITE_NULL)
            return OG_SBX_ENOMEM;
        buf[0] = '\0';
        return 0;
    }
    if ((size_t)sqlite3_column_bytes(s->st[i], col) >= len)
        return OG_SBX_EINTERNAL;
    memcpy(buf, t, (size_t)sqlite3_column_bytes(s->st[i], col) + 1);
    return 0;
}

/* Reads parameters from columns first.. of statement i (target, amount,
 * currency, reference, expires_at_us). */
static int col_params(og_sbx_store *s, int i, int first, og_sbx_params *p)
{
    int rc;

    if ((rc = col_text(s, i, first, p->target, sizeof p->target)) ||
        (rc = col_text(s, i, first + 1, p->amount, sizeof p->amount)) ||
        (rc = col_text(s, i, first + 2, p->currency, sizeof p->currency)) ||
        (rc = col_text(s, i, first + 3, p->reference, sizeof p->reference)))
        return rc;
    p->expires_at_us = sqlite3_column_int64(s->st[i], first + 4);
    return 0;
}

/* A record from ROW_COLS starting at column first of statement i, and,
 * with_returned, the @returned column after them. */
static int col_record(og_sbx_store *s, int i, int first, bool with_returned,
                      og_sbx_record *c)
{
    int rc;

    memset(c, 0, sizeof *c);
    if ((rc = col_text(s, i, first, c->id, sizeof c->id)) ||
        (rc = col_params(s, i, first + 1, &c->params)))
        return rc;
    c->created_us = sqlite3_column_int64(s->st[i], first + 6);
    c->completes_us = sqlite3_column_int64(s->st[i], first + 7);
    if (with_returned &&
        sqlite3_column_type(s->st[i], first + 8) != SQLITE_NULL) {
        c->returned = true;
        c->returned_us = sqlite3_column_int64(s->st[i], first + 8);
    }
    return 0;
}

/* ===========================================================================
 * Transactions (SB1, SB6)
 * ========================================================================= */

/* Takes the mutex and begins (BEGIN IMMEDIATE when write). On failure the
 * mutex is released. */
static int txn_begin(og_sbx_store *s, bool write)
{
    pthread_mutex_lock(&s->mu);
    if (s->broken) {
        pthread_mutex_unlock(&s->mu);
        return OG_SBX_ESTORE;
    }
    st(s, write ? ST_BEGIN_WRITE : ST_BEGIN_READ);
    if (run(s, write ? ST_BEGIN_WRITE : ST_BEGIN_READ) != 0) {
        pthread_mutex_unlock(&s->mu);
        return OG_SBX_ESTORE;
    }
    return 0;
}

/* Commits when rc is 0, else rolls back; releases the mutex. Returns rc,
 * or OG_SBX_ESTORE when the COMMIT failed (then rolled back). */
static int txn_end(og_sbx_store *s, int rc)
{
    for (int i = 0; i < ALL_ST; i++)
        sqlite3_reset(s->st[i]); /* no statement keeps a read open; NULL is
                                    a no-op */
    if (rc == 0 && run(s, ST_COMMIT) != 0)
        rc = OG_SBX_ESTORE;
    if (rc != 0 && !sqlite3_get_autocommit(s->db) &&
        run(s, ST_ROLLBACK) != 0) {
        s->broken = true;
        og_sbx_log(OG_SBX_LOG_ERROR, "store_broken", NULL);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Adds one to counter name (SB5). */
static int count(og_sbx_store *s, const char *name)
{
    int rc;

    binder b = b_start(s, ST_COUNT_ADD);

    st(s, ST_COUNT_ADD);
    b_text(&b, name);
    if ((rc = b_done(&b)) != 0)
        return rc;
    return run(s, ST_COUNT_ADD);
}

/* ===========================================================================
 * Opening: pragmas, the schema, the statements.
 * ========================================================================= */

/* Runs sql (no rows) or writes the failure to err. */
static int exec_or_fail(sqlite3 *db, const char *sql, char *err,
                        size_t errlen)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK)
        return 0;
    snprintf(err, errlen, "state: %s: %s", sql, sqlite3_errmsg(db));
    return OG_SBX_ESTORE;
}

/* WAL is only in force when journal_mode answers "wal" (SB1). Turning a
 * new file to WAL takes an exclusive lock, and SQLite answers SQLITE_BUSY
 * at once, without its busy handler, while another process opening the
 * same state (two dev instances started together) holds a lock on it; so
 * the switch is asked again until BUSY_TIMEOUT_MS has passed. */
static int set_wal(sqlite3 *db, char *err, size_t errlen)
{
    struct timespec pause = {0, 20 * 1000000L};
    int waited_ms = 0;

    for (;;) {
        sqlite3_stmt *q = NULL;
        int step = SQLITE_ERROR;
        bool wal = false;

        if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &q, NULL) ==
            SQLITE_OK) {
            step = sqlite3_step(q);
            wal = step == SQLITE_ROW && sqlite3_column_text(q, 0) &&
                  strcmp((const char *)sqlite3_column_text(q, 0), "wal") == 0;
        }
        sqlite3_finalize(q);
        if (wal)
            return 0;
        if ((step != SQLITE_BUSY && step != SQLITE_LOCKED) ||
            waited_ms >= BUSY_TIMEOUT_MS) {
            snprintf(err, errlen, "state: cannot use WAL: %s",
                     sqlite3_errmsg(db));
            return OG_SBX_ESTORE;
        }
        nanosleep(&pause, NULL);
        waited_ms += 20;
    }
}

/* The step from version i to i + 1: the resource whose tables it
 * creates (-1: none), then its script. */
static const struct {
    int kind;
    const char *sql;
} steps[SCHEMA_VERSION] = {
    {OG_SBX_CREDIT, schema_v1},
    {-1, schema_v2},
    {OG_SBX_PAYOUT, schema_v3},
};

/* Runs the step from version v. */
static int migrate_step(sqlite3 *db, int v, char *err, size_t errlen)
{
    char sql[4096];
    int rc;

    if (steps[v].kind >= 0) {
        if (expand(&og_sbx_resources[steps[v].kind], resource_tables, sql,
                   sizeof sql) != 0) {
            snprintf(err, errlen, "state: schema template too long");
            return OG_SBX_EINTERNAL;
        }
        if ((rc = exec_or_fail(db, sql, err, errlen)) != 0)
            return rc;
    }
    return exec_or_fail(db, steps[v].sql, err, errlen);
}

/* Creates the schema in a new file and upgrades an older one in place,
 * step by step, in one transaction; refuses a version it does not know. */
static int migrate(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    int version = -1, rc;

    if ((rc = exec_or_fail(db, "BEGIN IMMEDIATE", err, errlen)) != 0)
        return rc;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
        version = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    /* Each version's step from the one found: a version 1 file (credits
     * only) gains the codes table, a version 2 file the payout tables; the
     * rows they hold stay. */
    if (version < 0 || version > SCHEMA_VERSION) {
        snprintf(err, errlen, "state: schema version %d is not %d", version,
                 SCHEMA_VERSION);
        rc = OG_SBX_ESTORE;
    }
    for (int v = version; rc == 0 && v < SCHEMA_VERSION; v++)
        rc = migrate_step(db, v, err, errlen);
    if (rc == 0)
        return exec_or_fail(db, "COMMIT", err, errlen);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL); /* closing anyway */
    return rc;
}

/* Creates the state file 0600, whatever the umask, unless something is
 * there (then nothing changes): SQLite would create it 0644 less the
 * umask, and it gives the -wal and -shm files it creates the database
 * file's own mode, so the three are 0600 (the oncegate store does the same,
 * lib/store/sqlite/conn.c). Where it cannot be created, SQLite says why. */
static void create_owner_only(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);

    if (fd < 0)
        return;
    (void)fchmod(fd, 0600); /* failing, it is 0600 less the umask: no wider */
    close(fd);
}

/* Opens the file and applies the pragmas SB1 rests on. */
static int open_db(const char *path, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int rc;

    if (strcmp(path, ":memory:") != 0 && strncmp(path, "file:", 5) != 0)
        create_owner_only(path);
    rc = sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                 SQLITE_OPEN_NOMUTEX,
                             NULL);

    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "state: cannot open %s: %s", path,
                 db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return OG_SBX_ESTORE;
    }
    sqlite3_extended_result_codes(db, 1);
    if (sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS) != SQLITE_OK ||
        set_wal(db, err, errlen) != 0 ||
        exec_or_fail(db, "PRAGMA synchronous=FULL", err, errlen) != 0 ||
        exec_or_fail(db, "PRAGMA foreign_keys=ON", err, errlen) != 0 ||
        migrate(db, err, errlen) != 0) {
        if (!err[0])
            snprintf(err, errlen, "state: %s", sqlite3_errmsg(db));
        sqlite3_close(db);
        return OG_SBX_ESTORE;
    }
    *out = db;
    return 0;
}

/* Prepares ST_MAP, then RST_MAP for each resource (SB9). */
static int prepare_all(og_sbx_store *s, char *err, size_t errlen)
{
    char sql[2048];

    for (int i = 0; i < ALL_ST; i++) {
        const og_sbx_resource *res =
            i < ST_N ? NULL : &og_sbx_resources[(i - ST_N) / RST_N];
        int k = i < ST_N ? 0 : (i - ST_N) % RST_N;

        if (res && rst_table[k].returns && !res->returns)
            continue; /* stays NULL */
        if (res && expand(res, rst_table[k].sql, sql, sizeof sql) != 0) {
            snprintf(err, errlen, "state: %s: template too long", st_name(i));
            return -1;
        }
        if (sqlite3_prepare_v2(s->db, res ? sql : st_sql[i], -1, &s->st[i],
                               NULL) != SQLITE_OK) {
            snprintf(err, errlen, "state: preparing %s: %s", st_name(i),
                     sqlite3_errmsg(s->db));
            return -1;
        }
    }
    return 0;
}

int og_sbx_store_open(const char *path, og_sbx_store **out, char *err,
                      size_t errlen)
{
    og_sbx_store *s = calloc(1, sizeof *s);

    if (errlen)
        err[0] = '\0';
    if (!s) {
        snprintf(err, errlen, "state: out of memory");
        return OG_SBX_ESTORE;
    }
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        snprintf(err, errlen, "state: cannot create a mutex");
        return OG_SBX_ESTORE;
    }
    if (pthread_mutex_init(&s->gc_mu, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        snprintf(err, errlen, "state: cannot create a mutex");
        return OG_SBX_ESTORE;
    }
    if (pthread_cond_init(&s->gc_cv, NULL) != 0) {
        pthread_mutex_destroy(&s->gc_mu);
        pthread_mutex_destroy(&s->mu);
        free(s);
        snprintf(err, errlen, "state: cannot create a condition variable");
        return OG_SBX_ESTORE;
    }
    if (open_db(path, &s->db, err, errlen) != 0 || prepare_all(s, err, errlen))
        goto fail;
    *out = s;
    return 0;
fail:
    og_sbx_store_free(s);
    return OG_SBX_ESTORE;
}

void og_sbx_store_free(og_sbx_store *s)
{
    if (!s)
        return;
    for (int i = 0; i < ALL_ST; i++)
        sqlite3_finalize(s->st[i]); /* NULL is a no-op */
    sqlite3_close(s->db);
    pthread_cond_destroy(&s->gc_cv);
    pthread_mutex_destroy(&s->gc_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ===========================================================================
 * Creates (SB2, SB3, SB4), for any resource (SB9)
 * ========================================================================= */

/* One create request: what every step below reads. */
typedef struct create_req {
    og_sbx_store *s;
    const og_sbx_resource *res;
    const og_sbx_policy *p;
    const char *key;
    const og_sbx_params *req;
} create_req;

/* Deletes keys past retention, so the PRIMARY KEY only ever holds
 * retained keys. */
static int prune(const create_req *c, int64_t now)
{
    int i = rst(c->res, RST_PRUNE_KEYS), rc;
    binder b = b_start(c->s, i);

    st(c->s, i);
    b_int(&b, c->p->retention_us);
    b_int(&b, now);
    if ((rc = b_done(&b)) != 0)
        return rc;
    return run(c->s, i);
}

/* The key's retained saved result into *out: 1 found, 0 none, or < 0. */
static int key_get(const create_req *c, int64_t now, og_sbx_saved *out)
{
    og_sbx_store *s = c->s;
    int i = rst(c->res, RST_KEY_GET), rc, code;
    binder b = b_start(s, i);
    char error[64];

    st(s, i);
    b_text(&b, c->key);
    if ((rc = b_done(&b)) != 0 || (rc = next_row(s, i)) <= 0)
        return rc;
    memset(out, 0, sizeof *out);
    if ((rc = col_params(s, i, 0, &out->params)) != 0 ||
        (rc = col_text(s, i, 6, error, sizeof error)) != 0)
        return rc;
    out->recorded_us = sqlite3_column_int64(s->st[i], 5);
    out->refused = error[0] != '\0';
    if (out->refused) {
        if ((code = og_sbx_code_parse(error)) < 0)
            return OG_SBX_EINTERNAL; /* only the sandbox writes codes */
        out->refusal = (og_sbx_code)code;
    } else if ((rc = col_record(s, i, 7, false, &out->record)) != 0) {
        return rc;
    }
    return og_sbx_key_retained(c->p, out->recorded_us, now) ? 1 : 0;
}

/* A new id: the resource's prefix and 96 random bits in hex. */
static void id_new(const og_sbx_resource *res, char out[OG_SBX_ID_LEN + 1])
{
    unsigned char b[12];
    char hex[2 * sizeof b + 1];

    randombytes_buf(b, sizeof b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    snprintf(out, OG_SBX_ID_LEN + 1, "%s%s", res->id_prefix, hex);
}

/* Writes the record. */
static int insert_record(const create_req *c, const og_sbx_record *r)
{
    const og_sbx_params *q = &r->params;
    int i = rst(c->res, RST_INSERT), rc;
    binder b = b_start(c->s, i);

    st(c->s, i);
    b_text(&b, c->key);
    b_text(&b, r->id);
    b_params(&b, q);
    b_int(&b, r->created_us);
    b_int(&b, r->completes_us);
    if ((rc = b_done(&b)) != 0)
        return rc;
    return run(c->s, i);
}

/* Records the key with saved's result; 1 when this call took the key, 0
 * when another had (SB3). */
static int insert_key(const create_req *c, const og_sbx_saved *v)
{
    const og_sbx_params *q = &v->params;
    int i = rst(c->res, RST_KEY_INSERT), rc;
    binder b = b_start(c->s, i);

    st(c->s, i);
    b_text(&b, c->key);
    b_params(&b, q);
    b_int(&b, v->recorded_us);
    b_text(&b, v->refused ? NULL : v->record.id);
    b_text(&b, v->refused ? og_sbx_code_name(v->refusal) : NULL);
    if ((rc = b_done(&b)) != 0 || (rc = run(c->s, i)) != 0)
        return rc;
    return sqlite3_changes(c->s->db) == 1;
}

/* Carries out a decision that writes: the saved result it records goes to
 * res->saved. */
static int record(const create_req *c, og_sbx_result *res)
{
    og_sbx_saved *v = &res->saved;
    int rc;

    memset(v, 0, sizeof *v);
    v->params = *c->req;
    v->recorded_us = res->now_us;
    if (res->decision == OG_SBX_DO_REFUSE_CLOSED) {
        v->refused = true;
        v->refusal = c->res->closed;
    } else {
        id_new(c->res, v->record.id);
        v->record.params = *c->req;
        v->record.created_us = res->now_us;
        v->record.completes_us =
            res->now_us + (res->decision == OG_SBX_DO_CREATE_ASYNC
                               ? c->p->async_complete_us
                               : 0);
        if ((rc = insert_record(c, &v->record)) != 0)
            return rc;
    }
    if ((rc = insert_key(c, v)) < 0)
        return rc;
    /* SB2: in one transaction the key was absent, so the insert took it. */
    return rc == 0 && c->p->atomic_same_key ? OG_SBX_EINTERNAL : 0;
}

/* Acts on res->decision (saved: the key's retained result, or NULL) and
 * counts the request; runs inside the caller's write transaction. */
static int act(const create_req *c, const og_sbx_saved *saved,
               og_sbx_result *res)
{
    int rc = 0;

    switch (res->decision) {
    case OG_SBX_DO_REPLAY:
        res->saved = *saved;
        rc = count(c->s, c->res->c_replays);
        break;
    case OG_SBX_DO_MISMATCH:
        rc = count(c->s, c->res->c_mismatches);
        break;
    case OG_SBX_DO_RATE_LIMIT:
    case OG_SBX_DO_EXPIRE:
        break; /* nothing recorded: a retry meets the same state */
    case OG_SBX_DO_REFUSE_CLOSED:
    case OG_SBX_DO_CREATE:
    case OG_SBX_DO_CREATE_ASYNC:
        rc = record(c, res);
        break;
    }
    return rc != 0 ? rc : count(c->s, c->res->c_requests);
}

/* Reads the key and decides at the current time, inside a write
 * transaction (SB4). */
static int decide(const create_req *c, og_sbx_saved *saved, bool *found,
                  og_sbx_result *res)
{
    int rc;

    res->now_us = og_sbx_now_us();
    if ((rc = prune(c, res->now_us)) != 0 ||
        (rc = key_get(c, res->now_us, saved)) < 0)
        return rc;
    *found = rc == 1;
    res->decision = og_sbx_create_decide(c->res, c->p, c->req,
                                         *found ? saved : NULL, res->now_us);
    return 0;
}

/* ===========================================================================
 * Group commit (SB12): creates waiting together share one transaction.
 * ========================================================================= */
#define BATCH_MAX 64 /* creates in one transaction */

typedef struct gc_waiter {
    const create_req *c;
    og_sbx_result res;
    int rc;
    bool done;               /* its batch ended: rc and res are final */
    struct gc_waiter *next;
} gc_waiter;

/* Resets every statement: none keeps a read open across a savepoint's
 * undo or the COMMIT. */
static void reset_all(og_sbx_store *s)
{
    for (int i = 0; i < ALL_ST; i++)
        sqlite3_reset(s->st[i]); /* NULL is a no-op */
}

/* One create of a batch inside the batch's write transaction, in its own
 * savepoint: read, decide, act as alone (SB2, SB4, SB5). 0 when the batch
 * goes on (w->rc is this create's own answer), or OG_SBX_ESTORE when the
 * savepoint could not be taken, released or undone: the transaction's
 * state is then the batch's problem. */
static int batch_member(og_sbx_store *s, gc_waiter *w)
{
    og_sbx_saved saved;
    bool found = false;
    int rc;

    memset(&w->res, 0, sizeof w->res);
    if (run(s, ST_SAVEPOINT) != 0)
        return OG_SBX_ESTORE;
    rc = decide(w->c, &saved, &found, &w->res);
    if (rc == 0)
        rc = act(w->c, found ? &saved : NULL, &w->res);
    reset_all(s);
    if (rc != 0 && run(s, ST_ROLLBACK_TO) != 0)
        return OG_SBX_ESTORE; /* SB6 for this create: not provable */
    if (run(s, ST_RELEASE) != 0)
        return OG_SBX_ESTORE;
    w->rc = rc;
    return 0;
}

/* Runs batch (a list) in one write transaction; every member's rc and res
 * are final after it. A failed BEGIN, savepoint or COMMIT fails every
 * member with nothing written (txn_end rolls back). */
static void batch_run(og_sbx_store *s, gc_waiter *batch)
{
    gc_waiter *w;
    int rc = txn_begin(s, true);

    if (rc == 0) {
        for (w = batch; rc == 0 && w; w = w->next)
            rc = batch_member(s, w);
        rc = txn_end(s, rc); /* COMMIT, or ROLLBACK of everything */
    }
    for (w = batch; w; w = w->next)
        if (rc != 0)
            w->rc = rc;
}

/* SB2 and SB12: read, decide and write in a write transaction shared with
 * the creates waiting at the same time. */
static int create_atomic(const create_req *c, og_sbx_result *res)
{
    og_sbx_store *s = c->s;
    gc_waiter me = {c, {0}, 0, false, NULL}, *batch, *w;
    size_t n;

    pthread_mutex_lock(&s->gc_mu);
    if (s->gc_tail)
        s->gc_tail->next = &me;
    else
        s->gc_head = &me;
    s->gc_tail = &me;
    while (!me.done && s->gc_busy)
        pthread_cond_wait(&s->gc_cv, &s->gc_mu);
    if (!me.done) {
        /* Lead: take every create waiting now (me among them), up to
         * BATCH_MAX, in arrival order. */
        batch = s->gc_head;
        for (w = batch, n = 1; w->next && n < BATCH_MAX; w = w->next, n++)
            ;
        s->gc_head = w->next;
        if (!s->gc_head)
            s->gc_tail = NULL;
        w->next = NULL;
        s->gc_busy = true;
        pthread_mutex_unlock(&s->gc_mu);

        batch_run(s, batch);

        pthread_mutex_lock(&s->gc_mu);
        for (w = batch; w; w = w->next)
            w->done = true;
        s->gc_busy = false;
        pthread_cond_broadcast(&s->gc_cv);
    }
    pthread_mutex_unlock(&s->gc_mu);
    if (me.rc == 0)
        *res = me.res;
    return me.rc;
}

/* SB3: check, wait race_gap with no lock held, then act without checking
 * again — the hazard a provider without atomic handling has. */
static int create_racy(const create_req *c, og_sbx_result *res)
{
    og_sbx_saved saved;
    bool found;
    int rc;

    if ((rc = txn_begin(c->s, true)) != 0)
        return rc;
    rc = decide(c, &saved, &found, res);
    if (rc == 0 && !og_sbx_decision_writes(res->decision))
        return txn_end(c->s, act(c, found ? &saved : NULL, res));
    if ((rc = txn_end(c->s, rc)) != 0)
        return rc;
    og_sbx_sleep_us(c->p->race_gap_us);
    if ((rc = txn_begin(c->s, true)) != 0)
        return rc;
    /* Decided again as a new key only for the time rules (SC4): a request
     * never creates after its expiry, even in the gap. */
    res->now_us = og_sbx_now_us();
    if ((rc = prune(c, res->now_us)) == 0) {
        res->decision =
            og_sbx_create_decide(c->res, c->p, c->req, NULL, res->now_us);
        rc = act(c, NULL, res);
    }
    return txn_end(c->s, rc);
}

int og_sbx_store_create(og_sbx_store *s, const og_sbx_resource *res,
                        const og_sbx_policy *p, const char *key,
                        const og_sbx_params *req, og_sbx_result *out)
{
    const create_req c = {s, res, p, key, req};
    og_sbx_result r;
    int rc;

    memset(&r, 0, sizeof r);
    rc = p->atomic_same_key ? create_atomic(&c, &r) : create_racy(&c, &r);
    if (rc == 0)
        *out = r;
    return rc;
}

int og_sbx_store_count_request(og_sbx_store *s, const char *counter)
{
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    return txn_end(s, count(s, counter));
}

/* ===========================================================================
 * Authorization codes (SB8)
 * ========================================================================= */

int og_sbx_store_code_mint(og_sbx_store *s, char out[OG_SBX_CODE_LEN + 1])
{
    unsigned char b[16];
    char code[OG_SBX_CODE_LEN + 1], hex[2 * sizeof b + 1];
    binder bd = b_start(s, ST_CODE_INSERT);
    int rc;

    randombytes_buf(b, sizeof b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    snprintf(code, sizeof code, "ac_%s", hex);
    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    st(s, ST_CODE_INSERT);
    b_text(&bd, code);
    b_int(&bd, og_sbx_now_us());
    if ((rc = b_done(&bd)) == 0)
        rc = run(s, ST_CODE_INSERT);
    if ((rc = txn_end(s, rc)) == 0)
        memcpy(out, code, sizeof code);
    return rc;
}

int og_sbx_store_code_exchange(og_sbx_store *s, const char *code,
                               bool *exchanged)
{
    binder bd = b_start(s, ST_CODE_EXCHANGE);
    bool spent = false;
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    st(s, ST_CODE_EXCHANGE);
    b_text(&bd, code);
    b_int(&bd, og_sbx_now_us()); /* after the write lock (SB4) */
    if ((rc = b_done(&bd)) == 0 &&
        (rc = next_row(s, ST_CODE_EXCHANGE)) == 1) {
        spent = true;
        /* Steps the UPDATE to its end; the code is the primary key. */
        if ((rc = next_row(s, ST_CODE_EXCHANGE)) == 1)
            rc = OG_SBX_EINTERNAL;
    }
    if (rc == 0 && !spent)
        rc = count(s, C_INVALID_GRANTS);
    if (rc == 0)
        rc = count(s, C_TOKEN_REQUESTS);
    if ((rc = txn_end(s, rc)) == 0)
        *exchanged = spent;
    return rc;
}

/* ===========================================================================
 * Lookups and returns (SB11, SB10)
 * ========================================================================= */

/* Appends the row of statement i to *v (grown by doubling; *cap slots). */
static int push_record(og_sbx_store *s, int i, og_sbx_record **v, size_t *n,
                       size_t *cap)
{
    if (*n == *cap) {
        size_t want = *cap ? 2 * *cap : 8;
        og_sbx_record *g = realloc(*v, want * sizeof **v);

        if (!g)
            return OG_SBX_ENOMEM;
        *v = g;
        *cap = want;
    }
    return col_record(s, i, 0, true, &(*v)[(*n)++]);
}

/* The visible records of statement i (bound), oldest first, capped. */
static int collect(og_sbx_store *s, const og_sbx_policy *p, int i,
                   int64_t now, og_sbx_record **out, size_t *n)
{
    og_sbx_record *v = NULL;
    size_t k = 0, cap = 0;
    int rc = 0;

    while (k < OG_SBX_LOOKUP_MAX && (rc = next_row(s, i)) == 1) {
        if (!og_sbx_effect_visible(p, sqlite3_column_int64(s->st[i], 6), now))
            continue;
        if ((rc = push_record(s, i, &v, &k, &cap)) != 0)
            break;
    }
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = k;
    return 0;
}

int og_sbx_store_lookup(og_sbx_store *s, const og_sbx_resource *res,
                        const og_sbx_policy *p, og_sbx_lookup_by by,
                        const char *value, og_sbx_record **out, size_t *n,
                        int64_t *now_us)
{
    int i = rst(res, by == OG_SBX_BY_KEY ? RST_BY_KEY : RST_BY_REFERENCE);
    binder b = b_start(s, i);
    og_sbx_record *v = NULL;
    size_t k = 0;
    int64_t now;
    int rc;

    /* A write transaction: the time is read after the write lock (SB11). */
    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    now = og_sbx_now_us();
    st(s, i);
    b_text(&b, value);
    if ((rc = b_done(&b)) == 0 &&
        (rc = collect(s, p, i, now, &v, &k)) == 0)
        rc = count(s, res->c_lookups);
    if ((rc = txn_end(s, rc)) != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = k;
    *now_us = now;
    return 0;
}

/* Reads the record id of res (statement BY_ID) into *out: 1, 0 when there
 * is none, or < 0. */
static int by_id(og_sbx_store *s, const og_sbx_resource *res, const char *id,
                 og_sbx_record *out)
{
    int i = rst(res, RST_BY_ID), rc;
    binder b = b_start(s, i);

    st(s, i);
    b_text(&b, id);
    if ((rc = b_done(&b)) != 0 || (rc = next_row(s, i)) <= 0)
        return rc;
    return (rc = col_record(s, i, 0, true, out)) != 0 ? rc : 1;
}

int og_sbx_store_return(og_sbx_store *s, const og_sbx_resource *res,
                        const char *id, og_sbx_return_outcome *outcome,
                        og_sbx_record *out, int64_t *now_us)
{
    int i = rst(res, RST_RETURN), rc;
    binder b = b_start(s, i);
    og_sbx_return_outcome o = OG_SBX_RETURN_NOT_FOUND;
    og_sbx_record r;
    int64_t now;

    memset(&r, 0, sizeof r);
    if (!res->returns)
        return OG_SBX_EINTERNAL; /* a route serves returns of returns only */
    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    now = og_sbx_now_us(); /* after the write lock (SB4) */
    st(s, i);
    b_text(&b, id);
    b_int(&b, now);
    if ((rc = b_done(&b)) == 0 && (rc = next_row(s, i)) == 1) {
        o = OG_SBX_RETURNED;
        /* Steps the UPDATE to its end; the id is unique. */
        if ((rc = next_row(s, i)) == 1)
            rc = OG_SBX_EINTERNAL;
    }
    if (rc == 0 && (rc = by_id(s, res, id, &r)) == 1) {
        if (o != OG_SBX_RETURNED)
            o = OG_SBX_RETURN_REFUSED;
        rc = 0;
    } else if (rc == 0 && o == OG_SBX_RETURNED) {
        rc = OG_SBX_EINTERNAL; /* returned a row it cannot read back */
    }
    if ((rc = txn_end(s, rc)) != 0)
        return rc;
    *outcome = o;
    if (o != OG_SBX_RETURN_NOT_FOUND)
        *out = r;
    *now_us = now;
    return 0;
}

/* ===========================================================================
 * Stats, reset
 * ========================================================================= */

/* Reads the counters into *o (absent counters stay 0). */
static int read_counters(og_sbx_store *s, og_sbx_stats *o)
{
    char name[64];
    int64_t *field;
    int rc;

    st(s, ST_COUNTERS);
    while ((rc = next_row(s, ST_COUNTERS)) == 1) {
        if ((rc = col_text(s, ST_COUNTERS, 0, name, sizeof name)) != 0)
            return rc;
        if ((field = og_sbx_stat(o, name)))
            *field = sqlite3_column_int64(s->st[ST_COUNTERS], 1);
    }
    return rc;
}

/* Runs statement i, which answers one row of two counts, into *a and *b
 * (b may be NULL). */
static int read_counts(og_sbx_store *s, int i, int64_t *a, int64_t *b)
{
    int rc;

    st(s, i);
    if ((rc = next_row(s, i)) == 0)
        return OG_SBX_EINTERNAL; /* count(*) always answers a row */
    if (rc < 0)
        return rc;
    *a = sqlite3_column_int64(s->st[i], 0);
    if (b)
        *b = sqlite3_column_int64(s->st[i], 1);
    return 0;
}

int og_sbx_store_stats(og_sbx_store *s, og_sbx_stats *out)
{
    og_sbx_stats o;
    int rc;

    memset(&o, 0, sizeof o);
    if ((rc = txn_begin(s, false)) != 0)
        return rc;
    rc = read_counters(s, &o);
    for (int k = 0; rc == 0 && k < OG_SBX_N_KINDS; k++) {
        const og_sbx_resource *res = &og_sbx_resources[k];
        int64_t *rows = og_sbx_stat(&o, res->c_rows), *returned = NULL;
        int64_t ignored;

        if (res->c_returned && !(returned = og_sbx_stat(&o, res->c_returned)))
            rows = NULL;
        rc = rows ? read_counts(s, rst(res, RST_ROW_COUNTS), rows,
                                returned ? returned : &ignored)
                  : OG_SBX_EINTERNAL; /* a row names no stats member */
    }
    if (rc == 0)
        rc = read_counts(s, ST_CODE_COUNTS, &o.codes_minted,
                         &o.code_exchanges);
    if ((rc = txn_end(s, rc)) == 0)
        *out = o;
    return rc;
}

int og_sbx_store_reset(og_sbx_store *s)
{
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    /* Keys first: they reference their records. */
    for (int k = 0; rc == 0 && k < OG_SBX_N_KINDS; k++) {
        const og_sbx_resource *res = &og_sbx_resources[k];

        st(s, rst(res, RST_RESET_KEYS));
        if ((rc = run(s, rst(res, RST_RESET_KEYS))) == 0) {
            st(s, rst(res, RST_RESET_ROWS));
            rc = run(s, rst(res, RST_RESET_ROWS));
        }
    }
    if (rc == 0) {
        st(s, ST_RESET_COUNTERS);
        rc = run(s, ST_RESET_COUNTERS);
    }
    if (rc == 0) {
        st(s, ST_RESET_CODES);
        rc = run(s, ST_RESET_CODES);
    }
    return txn_end(s, rc);
}
