/*
 * store.c — the sandbox's state in one SQLite file: credits, idempotency
 * keys with their saved results, and the request counters. The decisions
 * come from core.c; this file carries them out, and its statements sit
 * next to the code that runs them.
 *
 * Invariants:
 *   S1  Durable before answered: WAL with synchronous=FULL fsyncs the log
 *       at every COMMIT, and a result is returned only after COMMIT
 *       returned SQLITE_OK. A credit that was answered survives a crash or
 *       _exit of the process (exit_after_effect relies on it).
 *   S2  One key, one credit (atomic mode): the key is read, the decision
 *       taken and the credit and key rows written in ONE BEGIN IMMEDIATE
 *       transaction. BEGIN IMMEDIATE takes the database's write lock
 *       before the read, so two requests — two threads, or two processes
 *       on one file — can never both see the key as free; the PRIMARY KEY
 *       on idempotency_keys backs it (an insert that changes nothing is a
 *       defect, OG_SBX_EINTERNAL).
 *   S3  Without atomic_same_key the read and the write are two
 *       transactions with race_gap between them and the key insert is ON
 *       CONFLICT DO NOTHING: concurrent first uses of a key each create a
 *       credit and the first to commit owns the key. This models a
 *       provider that does not document atomic handling (docs/sandbox.md).
 *   S4  The decision's time is read after the write lock is held, so a
 *       wait for the lock never lets a request create after its expiry
 *       (core.c C4), and created_at orders like the commits.
 *   S5  Counters change in the transaction of the request they count, so
 *       stats and credits agree after any crash.
 *   S6  A failed call changes nothing: any error rolls the transaction
 *       back. A connection whose ROLLBACK failed is marked broken and
 *       every later call fails (its transaction state is unknown).
 *   S7  Amounts are canonical decimal TEXT, never REAL: equality is exact.
 *   S8  A code is exchanged at most once: the exchange is ONE conditional
 *       UPDATE (exchanged_us IS NULL) inside a BEGIN IMMEDIATE transaction,
 *       so of any number of concurrent exchanges of one code — threads or
 *       processes on one file — exactly one changes the row. The tokens it
 *       answers are not stored: like a real authorization server, the
 *       sandbox never hands out the same exchange result twice.
 *
 * One connection serves every thread; the mutex makes each call's
 * transaction exclusive on it. Throughput is not the point of a sandbox;
 * S2 is, and it rests on the transaction, not on the mutex.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>
#include <sqlite3.h>

#include "sandbox.h"

#define SCHEMA_VERSION 2
#define BUSY_TIMEOUT_MS 10000  /* another process holding the file */

static const char schema_v1[] =
    "CREATE TABLE credits ("
    "  seq           INTEGER PRIMARY KEY," /* creation order */
    "  id            TEXT    NOT NULL UNIQUE,"
    "  idempotency_key TEXT  NOT NULL," /* the key that created it */
    "  account       TEXT    NOT NULL,"
    "  amount        TEXT    NOT NULL," /* canonical decimal (S7) */
    "  currency      TEXT    NOT NULL,"
    "  reference     TEXT    NOT NULL,"
    "  expires_at_us INTEGER NOT NULL,"
    "  created_us    INTEGER NOT NULL,"
    "  completes_us  INTEGER NOT NULL CHECK (completes_us >= created_us)"
    ");"
    "CREATE INDEX credits_reference ON credits (reference, seq);"
    "CREATE INDEX credits_key ON credits (idempotency_key, seq);"
    "CREATE TABLE idempotency_keys ("
    "  key           TEXT    PRIMARY KEY,"
    "  account       TEXT    NOT NULL,"
    "  amount        TEXT    NOT NULL,"
    "  currency      TEXT    NOT NULL,"
    "  reference     TEXT    NOT NULL,"
    "  expires_at_us INTEGER NOT NULL,"
    "  recorded_us   INTEGER NOT NULL,"
    "  credit_id     TEXT    REFERENCES credits (id)," /* a credit, or */
    "  error         TEXT,"                            /* a refusal */
    "  CHECK ((credit_id IS NULL) <> (error IS NULL))"
    ") WITHOUT ROWID;"
    "CREATE INDEX idempotency_keys_recorded ON idempotency_keys (recorded_us);"
    "CREATE TABLE counters ("
    "  name  TEXT    PRIMARY KEY,"
    "  value INTEGER NOT NULL"
    ") WITHOUT ROWID;"
    "PRAGMA user_version = 1;";

/* Version 2: authorization codes for POST /oauth/token (S8). */
static const char schema_v2[] =
    "CREATE TABLE codes ("
    "  code          TEXT    PRIMARY KEY,"
    "  minted_us     INTEGER NOT NULL,"
    "  exchanged_us  INTEGER"              /* NULL: never exchanged */
    ") WITHOUT ROWID;"
    "PRAGMA user_version = 2;";

#define CREDIT_COLS                                                            \
    "id, account, amount, currency, reference, expires_at_us, created_us,"    \
    " completes_us"

/* ===========================================================================
 * Statements, prepared once at open.
 * ========================================================================= */
#define ST_MAP(X)                                                              \
    X(BEGIN_WRITE, "BEGIN IMMEDIATE")                                          \
    X(BEGIN_READ, "BEGIN")                                                     \
    X(COMMIT, "COMMIT")                                                        \
    X(ROLLBACK, "ROLLBACK")                                                    \
    /* Keys past retention (og_sbx_key_retained is false): ?1 retention,     \
     * ?2 now. */                                                              \
    X(PRUNE_KEYS,                                                              \
      "DELETE FROM idempotency_keys WHERE recorded_us + ?1 <= ?2")             \
    /* A key's saved result with its credit, if it has one: ?1 key. */         \
    X(KEY_GET,                                                                 \
      "SELECT k.account, k.amount, k.currency, k.reference,"                   \
      "       k.expires_at_us, k.recorded_us, k.error,"                        \
      "       c.id, c.account, c.amount, c.currency, c.reference,"             \
      "       c.expires_at_us, c.created_us, c.completes_us"                   \
      " FROM idempotency_keys k LEFT JOIN credits c ON c.id = k.credit_id"     \
      " WHERE k.key = ?1")                                                     \
    X(CREDIT_INSERT,                                                           \
      "INSERT INTO credits (idempotency_key, " CREDIT_COLS ")"                 \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")                          \
    /* The first to commit owns the key (S2: never conflicts; S3: may). */    \
    X(KEY_INSERT,                                                              \
      "INSERT INTO idempotency_keys (key, account, amount, currency,"          \
      "  reference, expires_at_us, recorded_us, credit_id, error)"             \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"                           \
      " ON CONFLICT (key) DO NOTHING")                                         \
    X(COUNT_ADD,                                                               \
      "INSERT INTO counters (name, value) VALUES (?1, 1)"                      \
      " ON CONFLICT (name) DO UPDATE SET value = value + 1")                   \
    X(BY_REFERENCE,                                                            \
      "SELECT " CREDIT_COLS " FROM credits WHERE reference = ?1"               \
      " ORDER BY seq")                                                         \
    X(BY_KEY,                                                                  \
      "SELECT " CREDIT_COLS " FROM credits WHERE idempotency_key = ?1"         \
      " ORDER BY seq")                                                         \
    X(COUNTERS, "SELECT name, value FROM counters")                            \
    X(CREDIT_COUNT, "SELECT count(*) FROM credits")                            \
    X(RESET_KEYS, "DELETE FROM idempotency_keys")                              \
    X(RESET_CREDITS, "DELETE FROM credits")                                    \
    X(RESET_COUNTERS, "DELETE FROM counters")                                  \
    X(RESET_CODES, "DELETE FROM codes")                                        \
    /* ?1 code, ?2 now. */                                                     \
    X(CODE_INSERT, "INSERT INTO codes (code, minted_us) VALUES (?1, ?2)")      \
    /* S8: a row only when this statement spent the code. ?1 code, ?2 now. */ \
    X(CODE_EXCHANGE,                                                           \
      "UPDATE codes SET exchanged_us = ?2"                                     \
      " WHERE code = ?1 AND exchanged_us IS NULL RETURNING 1")                 \
    X(CODE_COUNTS,                                                             \
      "SELECT count(*), count(exchanged_us) FROM codes")

enum {
#define ST_ENUM(name, sql) ST_##name,
    ST_MAP(ST_ENUM)
#undef ST_ENUM
    ST_N
};

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

struct og_sbx_store {
    pthread_mutex_t mu;    /* one transaction at a time on db */
    sqlite3 *db;
    sqlite3_stmt *st[ST_N];
    bool broken;           /* S6: a ROLLBACK failed */
};

/* Counter names (stats members). */
#define C_CREATE_REQUESTS "create_requests"
#define C_LOOKUPS "lookups"
#define C_REPLAYS "idempotent_replays"
#define C_MISMATCHES "mismatches"
#define C_TOKEN_REQUESTS "token_requests"
#define C_INVALID_GRANTS "invalid_grants"

/* ===========================================================================
 * Clock
 * ========================================================================= */
int64_t og_sbx_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void og_sbx_sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    while (us > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
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

/* 0, OG_SBX_ESTORE on a failed bind, or OG_SBX_EINTERNAL when the number
 * of values differs from the statement's parameters (a defect). */
static int b_done(binder *b)
{
    if (b->rc != SQLITE_OK)
        return sq_fail(b->s, st_names[b->i]);
    if (b->next - 1 != sqlite3_bind_parameter_count(b->s->st[b->i]))
        return OG_SBX_EINTERNAL;
    return 0;
}

/* Runs statement i to completion (no rows expected). */
static int run(og_sbx_store *s, int i)
{
    int rc = sqlite3_step(s->st[i]);

    sqlite3_reset(s->st[i]);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, st_names[i]);
}

/* Steps statement i: 1 a row, 0 done, or OG_SBX_ESTORE. */
static int next_row(og_sbx_store *s, int i)
{
    int rc = sqlite3_step(s->st[i]);

    if (rc == SQLITE_ROW)
        return 1;
    sqlite3_reset(s->st[i]);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, st_names[i]);
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

/* Reads parameters from columns first.. of statement i (account, amount,
 * currency, reference, expires_at_us). */
static int col_params(og_sbx_store *s, int i, int first, og_sbx_params *p)
{
    int rc;

    if ((rc = col_text(s, i, first, p->account, sizeof p->account)) ||
        (rc = col_text(s, i, first + 1, p->amount, sizeof p->amount)) ||
        (rc = col_text(s, i, first + 2, p->currency, sizeof p->currency)) ||
        (rc = col_text(s, i, first + 3, p->reference, sizeof p->reference)))
        return rc;
    p->expires_at_us = sqlite3_column_int64(s->st[i], first + 4);
    return 0;
}

/* A credit from CREDIT_COLS starting at column first of statement i. */
static int col_credit(og_sbx_store *s, int i, int first, og_sbx_credit *c)
{
    int rc;

    if ((rc = col_text(s, i, first, c->id, sizeof c->id)) ||
        (rc = col_params(s, i, first + 1, &c->params)))
        return rc;
    c->created_us = sqlite3_column_int64(s->st[i], first + 6);
    c->completes_us = sqlite3_column_int64(s->st[i], first + 7);
    return 0;
}

/* ===========================================================================
 * Transactions (S1, S6)
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
    for (int i = 0; i < ST_N; i++)
        sqlite3_reset(s->st[i]); /* no statement keeps a read open */
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

/* Adds one to counter name (S5). */
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

/* WAL is only in force when journal_mode answers "wal" (S1). */
static int set_wal(sqlite3 *db, char *err, size_t errlen)
{
    sqlite3_stmt *q = NULL;
    int rc = OG_SBX_ESTORE;

    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &q, NULL) ==
            SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW && sqlite3_column_text(q, 0) &&
        strcmp((const char *)sqlite3_column_text(q, 0), "wal") == 0)
        rc = 0;
    else
        snprintf(err, errlen, "state: cannot use WAL: %s", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    return rc;
}

/* Creates the schema in a new file; refuses a version it does not know. */
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
    /* Each version's script from the one found: a version 1 file (credits
     * only) gains the codes table and keeps its credits. */
    if (version == 0)
        rc = exec_or_fail(db, schema_v1, err, errlen);
    if (rc == 0 && (version == 0 || version == 1))
        rc = exec_or_fail(db, schema_v2, err, errlen);
    else if (rc == 0 && version != SCHEMA_VERSION) {
        snprintf(err, errlen, "state: schema version %d is not %d", version,
                 SCHEMA_VERSION);
        rc = OG_SBX_ESTORE;
    }
    if (rc == 0)
        return exec_or_fail(db, "COMMIT", err, errlen);
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL); /* closing anyway */
    return rc;
}

/* Opens the file and applies the pragmas S1 rests on. */
static int open_db(const char *path, sqlite3 **out, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db,
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
    if (open_db(path, &s->db, err, errlen) != 0)
        goto fail;
    for (int i = 0; i < ST_N; i++)
        if (sqlite3_prepare_v2(s->db, st_sql[i], -1, &s->st[i], NULL) !=
            SQLITE_OK) {
            snprintf(err, errlen, "state: preparing %s: %s", st_names[i],
                     sqlite3_errmsg(s->db));
            goto fail;
        }
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
    for (int i = 0; i < ST_N; i++)
        sqlite3_finalize(s->st[i]); /* NULL is a no-op */
    sqlite3_close(s->db);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ===========================================================================
 * Creates (S2, S3, S4)
 * ========================================================================= */

/* Deletes keys past retention, so the PRIMARY KEY only ever holds
 * retained keys. */
static int prune(og_sbx_store *s, const og_sbx_policy *p, int64_t now)
{
    int rc;

    binder b = b_start(s, ST_PRUNE_KEYS);

    st(s, ST_PRUNE_KEYS);
    b_int(&b, p->retention_us);
    b_int(&b, now);
    if ((rc = b_done(&b)) != 0)
        return rc;
    return run(s, ST_PRUNE_KEYS);
}

/* The key's retained saved result into *out: 1 found, 0 none, or < 0. */
static int key_get(og_sbx_store *s, const og_sbx_policy *p, const char *key,
                   int64_t now, og_sbx_saved *out)
{
    char error[64];
    int rc, code;

    binder b = b_start(s, ST_KEY_GET);

    st(s, ST_KEY_GET);
    b_text(&b, key);
    if ((rc = b_done(&b)) != 0 || (rc = next_row(s, ST_KEY_GET)) <= 0)
        return rc;
    memset(out, 0, sizeof *out);
    if ((rc = col_params(s, ST_KEY_GET, 0, &out->params)) != 0 ||
        (rc = col_text(s, ST_KEY_GET, 6, error, sizeof error)) != 0)
        return rc;
    out->recorded_us = sqlite3_column_int64(s->st[ST_KEY_GET], 5);
    out->refused = error[0] != '\0';
    if (out->refused) {
        if ((code = og_sbx_code_parse(error)) < 0)
            return OG_SBX_EINTERNAL; /* only the sandbox writes codes */
        out->refusal = (og_sbx_code)code;
    } else if ((rc = col_credit(s, ST_KEY_GET, 7, &out->credit)) != 0) {
        return rc;
    }
    return og_sbx_key_retained(p, out->recorded_us, now) ? 1 : 0;
}

/* A new credit id: "cr_" and 96 random bits in hex. */
static void credit_id_new(char out[OG_SBX_CREDIT_ID_LEN + 1])
{
    unsigned char b[12];
    char hex[2 * sizeof b + 1];

    randombytes_buf(b, sizeof b);
    sodium_bin2hex(hex, sizeof hex, b, sizeof b);
    snprintf(out, OG_SBX_CREDIT_ID_LEN + 1, "cr_%s", hex);
}

/* Writes the credit and, in atomic mode, checks the key row was written. */
static int insert_credit(og_sbx_store *s, const char *key,
                         const og_sbx_credit *c)
{
    const og_sbx_params *q = &c->params;
    int rc;

    binder b = b_start(s, ST_CREDIT_INSERT);

    st(s, ST_CREDIT_INSERT);
    b_text(&b, key);
    b_text(&b, c->id);
    b_text(&b, q->account);
    b_text(&b, q->amount);
    b_text(&b, q->currency);
    b_text(&b, q->reference);
    b_int(&b, q->expires_at_us);
    b_int(&b, c->created_us);
    b_int(&b, c->completes_us);
    if ((rc = b_done(&b)) != 0)
        return rc;
    return run(s, ST_CREDIT_INSERT);
}

/* Records key with saved's result; 1 when this call took the key, 0 when
 * another had (S3). */
static int insert_key(og_sbx_store *s, const char *key,
                      const og_sbx_saved *v)
{
    const og_sbx_params *q = &v->params;
    int rc;

    binder b = b_start(s, ST_KEY_INSERT);

    st(s, ST_KEY_INSERT);
    b_text(&b, key);
    b_text(&b, q->account);
    b_text(&b, q->amount);
    b_text(&b, q->currency);
    b_text(&b, q->reference);
    b_int(&b, q->expires_at_us);
    b_int(&b, v->recorded_us);
    b_text(&b, v->refused ? NULL : v->credit.id);
    b_text(&b, v->refused ? og_sbx_code_name(v->refusal) : NULL);
    if ((rc = b_done(&b)) != 0 || (rc = run(s, ST_KEY_INSERT)) != 0)
        return rc;
    return sqlite3_changes(s->db) == 1;
}

/* Carries out a decision that writes: the saved result it records goes to
 * res->saved. */
static int record(og_sbx_store *s, const og_sbx_policy *p, const char *key,
                  const og_sbx_params *req, og_sbx_result *res)
{
    og_sbx_saved *v = &res->saved;
    int rc;

    memset(v, 0, sizeof *v);
    v->params = *req;
    v->recorded_us = res->now_us;
    if (res->decision == OG_SBX_DO_REFUSE_CLOSED) {
        v->refused = true;
        v->refusal = OG_SBX_C_ACCOUNT_CLOSED;
    } else {
        credit_id_new(v->credit.id);
        v->credit.params = *req;
        v->credit.created_us = res->now_us;
        v->credit.completes_us =
            res->now_us + (res->decision == OG_SBX_DO_CREATE_ASYNC
                               ? p->async_complete_us
                               : 0);
        if ((rc = insert_credit(s, key, &v->credit)) != 0)
            return rc;
    }
    if ((rc = insert_key(s, key, v)) < 0)
        return rc;
    /* S2: in one transaction the key was absent, so the insert took it. */
    return rc == 0 && p->atomic_same_key ? OG_SBX_EINTERNAL : 0;
}

/* Acts on res->decision (saved: the key's retained result, or NULL) and
 * counts the request; runs inside the caller's write transaction. */
static int act(og_sbx_store *s, const og_sbx_policy *p, const char *key,
               const og_sbx_params *req, const og_sbx_saved *saved,
               og_sbx_result *res)
{
    int rc = 0;

    switch (res->decision) {
    case OG_SBX_DO_REPLAY:
        res->saved = *saved;
        rc = count(s, C_REPLAYS);
        break;
    case OG_SBX_DO_MISMATCH:
        rc = count(s, C_MISMATCHES);
        break;
    case OG_SBX_DO_RATE_LIMIT:
    case OG_SBX_DO_EXPIRE:
        break; /* nothing recorded: a retry meets the same state */
    case OG_SBX_DO_REFUSE_CLOSED:
    case OG_SBX_DO_CREATE:
    case OG_SBX_DO_CREATE_ASYNC:
        rc = record(s, p, key, req, res);
        break;
    }
    return rc != 0 ? rc : count(s, C_CREATE_REQUESTS);
}

/* Reads the key and decides at the current time, inside a write
 * transaction (S4). */
static int decide(og_sbx_store *s, const og_sbx_policy *p, const char *key,
                  const og_sbx_params *req, og_sbx_saved *saved, bool *found,
                  og_sbx_result *res)
{
    int rc;

    res->now_us = og_sbx_now_us();
    if ((rc = prune(s, p, res->now_us)) != 0 ||
        (rc = key_get(s, p, key, res->now_us, saved)) < 0)
        return rc;
    *found = rc == 1;
    res->decision = og_sbx_create_decide(p, req, *found ? saved : NULL,
                                         res->now_us);
    return 0;
}

/* S2: read, decide and write in one transaction. */
static int create_atomic(og_sbx_store *s, const og_sbx_policy *p,
                         const char *key, const og_sbx_params *req,
                         og_sbx_result *res)
{
    og_sbx_saved saved;
    bool found;
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    rc = decide(s, p, key, req, &saved, &found, res);
    if (rc == 0)
        rc = act(s, p, key, req, found ? &saved : NULL, res);
    return txn_end(s, rc);
}

/* S3: check, wait race_gap with no lock held, then act without checking
 * again — the hazard a provider without atomic handling has. */
static int create_racy(og_sbx_store *s, const og_sbx_policy *p,
                       const char *key, const og_sbx_params *req,
                       og_sbx_result *res)
{
    og_sbx_saved saved;
    bool found;
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    rc = decide(s, p, key, req, &saved, &found, res);
    if (rc == 0 && !og_sbx_decision_writes(res->decision))
        return txn_end(s, act(s, p, key, req, found ? &saved : NULL, res));
    if ((rc = txn_end(s, rc)) != 0)
        return rc;
    og_sbx_sleep_us(p->race_gap_us);
    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    /* Decided again as a new key only for the time rules (C4): a request
     * never creates after its expiry, even in the gap. */
    res->now_us = og_sbx_now_us();
    if ((rc = prune(s, p, res->now_us)) == 0) {
        res->decision = og_sbx_create_decide(p, req, NULL, res->now_us);
        rc = act(s, p, key, req, NULL, res);
    }
    return txn_end(s, rc);
}

int og_sbx_store_create(og_sbx_store *s, const og_sbx_policy *p,
                        const char *key, const og_sbx_params *req,
                        og_sbx_result *out)
{
    og_sbx_result res;
    int rc;

    memset(&res, 0, sizeof res);
    rc = p->atomic_same_key ? create_atomic(s, p, key, req, &res)
                            : create_racy(s, p, key, req, &res);
    if (rc == 0)
        *out = res;
    return rc;
}

int og_sbx_store_count_request(og_sbx_store *s, og_sbx_request_kind kind)
{
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    return txn_end(s, count(s, kind == OG_SBX_REQ_TOKEN ? C_TOKEN_REQUESTS
                                                        : C_CREATE_REQUESTS));
}

/* ===========================================================================
 * Authorization codes (S8)
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
    b_int(&bd, og_sbx_now_us()); /* after the write lock (S4) */
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
 * Lookups, stats, reset
 * ========================================================================= */

/* Appends the row of statement i to *v (grown by doubling; *cap slots). */
static int push_credit(og_sbx_store *s, int i, og_sbx_credit **v, size_t *n,
                       size_t *cap)
{
    if (*n == *cap) {
        size_t want = *cap ? 2 * *cap : 8;
        og_sbx_credit *g = realloc(*v, want * sizeof **v);

        if (!g)
            return OG_SBX_ENOMEM;
        *v = g;
        *cap = want;
    }
    return col_credit(s, i, 0, &(*v)[(*n)++]);
}

/* The visible credits of statement i (bound), oldest first, capped. */
static int collect(og_sbx_store *s, const og_sbx_policy *p, int i,
                   int64_t now, og_sbx_credit **out, size_t *n)
{
    og_sbx_credit *v = NULL;
    size_t k = 0, cap = 0;
    int rc = 0;

    while (k < OG_SBX_LOOKUP_MAX && (rc = next_row(s, i)) == 1) {
        if (!og_sbx_credit_visible(p, sqlite3_column_int64(s->st[i], 6), now))
            continue;
        if ((rc = push_credit(s, i, &v, &k, &cap)) != 0)
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

int og_sbx_store_lookup(og_sbx_store *s, const og_sbx_policy *p,
                        og_sbx_lookup_by by, const char *value,
                        og_sbx_credit **out, size_t *n, int64_t *now_us)
{
    int i = by == OG_SBX_BY_KEY ? ST_BY_KEY : ST_BY_REFERENCE;
    binder b = b_start(s, i);
    og_sbx_credit *v = NULL;
    size_t k = 0;
    int64_t now;
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    now = og_sbx_now_us();
    st(s, i);
    b_text(&b, value);
    if ((rc = b_done(&b)) == 0 &&
        (rc = collect(s, p, i, now, &v, &k)) == 0)
        rc = count(s, C_LOOKUPS);
    if ((rc = txn_end(s, rc)) != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *n = k;
    *now_us = now;
    return 0;
}

/* Reads the counters into *o (absent counters stay 0). */
static int read_counters(og_sbx_store *s, og_sbx_stats *o)
{
    char name[64];
    int rc;

    st(s, ST_COUNTERS);
    while ((rc = next_row(s, ST_COUNTERS)) == 1) {
        int64_t v = sqlite3_column_int64(s->st[ST_COUNTERS], 1);

        if ((rc = col_text(s, ST_COUNTERS, 0, name, sizeof name)) != 0)
            return rc;
        if (strcmp(name, C_CREATE_REQUESTS) == 0)
            o->create_requests = v;
        else if (strcmp(name, C_LOOKUPS) == 0)
            o->lookups = v;
        else if (strcmp(name, C_REPLAYS) == 0)
            o->idempotent_replays = v;
        else if (strcmp(name, C_MISMATCHES) == 0)
            o->mismatches = v;
        else if (strcmp(name, C_TOKEN_REQUESTS) == 0)
            o->token_requests = v;
        else if (strcmp(name, C_INVALID_GRANTS) == 0)
            o->invalid_grants = v;
    }
    return rc;
}

int og_sbx_store_stats(og_sbx_store *s, og_sbx_stats *out)
{
    og_sbx_stats o;
    int rc;

    memset(&o, 0, sizeof o);
    if ((rc = txn_begin(s, false)) != 0)
        return rc;
    if ((rc = read_counters(s, &o)) == 0) {
        st(s, ST_CREDIT_COUNT);
        rc = next_row(s, ST_CREDIT_COUNT);
        if (rc == 1) {
            o.credits_created =
                sqlite3_column_int64(s->st[ST_CREDIT_COUNT], 0);
            rc = 0;
        } else if (rc == 0) {
            rc = OG_SBX_EINTERNAL; /* count(*) always answers a row */
        }
    }
    if (rc == 0) {
        st(s, ST_CODE_COUNTS);
        rc = next_row(s, ST_CODE_COUNTS);
        if (rc == 1) {
            o.codes_minted = sqlite3_column_int64(s->st[ST_CODE_COUNTS], 0);
            o.code_exchanges = sqlite3_column_int64(s->st[ST_CODE_COUNTS], 1);
            rc = 0;
        } else if (rc == 0) {
            rc = OG_SBX_EINTERNAL;
        }
    }
    if ((rc = txn_end(s, rc)) == 0)
        *out = o;
    return rc;
}

int og_sbx_store_reset(og_sbx_store *s)
{
    int rc;

    if ((rc = txn_begin(s, true)) != 0)
        return rc;
    /* Keys first: they reference credits. */
    st(s, ST_RESET_KEYS);
    if ((rc = run(s, ST_RESET_KEYS)) == 0) {
        st(s, ST_RESET_CREDITS);
        rc = run(s, ST_RESET_CREDITS);
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
