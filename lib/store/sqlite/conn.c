/*
 * conn.c — the SQLite backend's connections: what a store failure means,
 * the og_consumption_key() SQL function, deadlines and the busy handler,
 * opening and configuring connections, the per-connection statement cache,
 * running one statement, reading rows, transactions, the clock, opening
 * and closing the store, and the method table.
 *
 * Invariants (internal.h and grants.c state them): Q2 (synchronous=FULL,
 * WAL; a failed commit is unavailable; a connection whose ROLLBACK failed
 * is closed, M4), Q4 (every wait ends at the call's deadline: sq_busy), Q11
 * (one BEGIN IMMEDIATE per write: og__sq_begin/og__sq_end, and the payout
 * transactions' txn_begin/txn_end, M28), Q6 (og_consumption_key() on every
 * connection) and M7 (nothing is logged but a full statement cache:
 * sq_cache_full).
 *
 *   Q30 The database file is created mode 0600, whatever the umask: this
 *       file creates it (sq_create_file) before SQLite opens it, since
 *       SQLite would create it 0644 less the umask. SQLite gives the -wal
 *       and -shm files it creates the database file's own permission bits
 *       (os_unix.c: robust_open fchmods a new, empty file to them), so the
 *       three are 0600: the store holds grants, operations and sealed
 *       redemption results, none of them for other users' eyes. An
 *       existing file keeps its mode.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "store/batcher.h"

/* ===========================================================================
 * What a store failure means (lib/core/storeerr.c's SE2, SE3 for SQLite)
 * ========================================================================= */

int og__sqlite_classify(int extended_rc)
{
    switch (extended_rc & 0xff) {
    case SQLITE_BUSY:      /* busy_timeout elapsed */
    case SQLITE_LOCKED:
    case SQLITE_IOERR:     /* includes a failed fsync at commit */
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
    case SQLITE_INTERRUPT: /* cancelled */
    case SQLITE_READONLY:
    case SQLITE_SCHEMA:
        return OG_ESTORE_UNAVAILABLE;
    case SQLITE_NOMEM:
        return OG_ENOMEM;
    default:               /* CONSTRAINT, CORRUPT, NOTADB, ERROR, MISUSE... */
        return OG_EINTERNAL;
    }
}

/* ===========================================================================
 * og_consumption_key() in SQL (Q6)
 * ========================================================================= */

/* og_consumption_key(issuer, grant_id) in SQL (Q6): the C function of
 * lib/core/consumption_key.c over the arguments' bytes. NULL for a NULL
 * argument, as a strict SQL function. */
static void sq_key_function(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    unsigned char key[OG_CONSUMPTION_KEY_LEN];
    const unsigned char *issuer, *grant_id;
    int issuer_len, grant_id_len;

    (void)argc;
    if (sqlite3_value_type(v[0]) == SQLITE_NULL ||
        sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    /* text first, then its length: the documented order of the calls */
    issuer = sqlite3_value_text(v[0]);
    issuer_len = sqlite3_value_bytes(v[0]);
    grant_id = sqlite3_value_text(v[1]);
    grant_id_len = sqlite3_value_bytes(v[1]);
    if (!issuer || !grant_id) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    if (og__consumption_key((const char *)issuer, (size_t)issuer_len,
                            (const char *)grant_id, (size_t)grant_id_len,
                            key) != 0) {
        sqlite3_result_error(ctx, "og_consumption_key: argument too long", -1);
        return;
    }
    sqlite3_result_blob(ctx, key, sizeof key, SQLITE_TRANSIENT);
}

int og__sqlite_register_key_function(sqlite3 *db)
{
    return sqlite3_create_function_v2(
        db, "og_consumption_key", 2,
        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
        sq_key_function, NULL, NULL, NULL);
}

/* ===========================================================================
 * Deadlines (Q4)
 * ========================================================================= */

int64_t og__sq_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* SQLite's busy handler: 0 gives up (SQLITE_BUSY, i.e. unavailable), 1 asks
 * SQLite to try again. Sleeps 50 us .. ~2 ms, growing with the attempt count,
 * jittered so that processes polling the same lock do not move in step (Q4). */
static int sq_busy(void *arg, int count)
{
    og__sq_conn *c = arg;
    int64_t left = c->deadline_us - og__sq_mono_us();
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

void og__sq_arm(og__sq_conn *c, int64_t deadline_us)
{
    c->deadline_us = deadline_us;
}

/* ===========================================================================
 * Connections
 * ========================================================================= */

/* Applies the per-connection settings every store call relies on (Q2). */
static int sq_configure(sqlite3 *db, const og_store_options *o)
{
    int ms = (int)(o->timings.store_timeout_us / 1000);
    int rc;

    sqlite3_busy_timeout(db, ms > 0 ? ms : 1);
    /* foreign_keys: the schema's references hold here as in PostgreSQL. */
    rc = sqlite3_exec(db,
                      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                      " PRAGMA foreign_keys=ON;",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return og__sqlite_classify(sqlite3_extended_errcode(db));
    return 0;
}

/* Q30: creates the database file at path, empty and exactly 0600, unless
 * something is there already (then nothing changes) or path is not a plain
 * file name (":memory:", a "file:" URI). Where it cannot be created,
 * SQLite's own open reports why. 0, or OG_EINTERNAL when the mode could
 * not be set (the file is removed again). */
static int sq_create_file(const char *path)
{
    int fd;

    if (path[0] == '\0' || strcmp(path, ":memory:") == 0 ||
        strncmp(path, "file:", 5) == 0)
        return 0;
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
              0600);
    if (fd < 0)
        return 0; /* EEXIST: keep it; anything else: SQLite says */
    if (fchmod(fd, 0600) != 0) {
        close(fd);
        unlink(path);
        return OG_EINTERNAL;
    }
    close(fd);
    return 0;
}

int og__sq_open_db(const og__sq_store *s, bool create, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                (create ? SQLITE_OPEN_CREATE : 0);
    int rc;

    if (create && (rc = sq_create_file(s->path)) != 0)
        return rc;
    rc = sqlite3_open_v2(s->path, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = db ? og__sqlite_classify(sqlite3_extended_errcode(db))
                : OG_ENOMEM;
        sqlite3_close(db);
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    if (og__sqlite_register_key_function(db) != SQLITE_OK) { /* Q6 */
        rc = og__sqlite_classify(sqlite3_extended_errcode(db));
        sqlite3_close(db);
        return rc;
    }
    if ((rc = sq_configure(db, &s->opts)) < 0) {
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

static int sq_connect(void *ctx, void **conn)
{
    og__sq_conn *c = calloc(1, sizeof *c);
    int rc;

    if (!c)
        return OG_ENOMEM;
    if ((rc = og__sq_open_db(ctx, false, &c->db)) < 0) {
        free(c);
        return rc;
    }
    /* Replaces sq_configure's busy_timeout: the deadline is per call. */
    c->jitter = ((uint32_t)(uintptr_t)c ^ (uint32_t)getpid() ^
                 (uint32_t)og__sq_mono_us()) | 1u;
    c->deadline_us = og__sq_mono_us() +
                     ((og__sq_store *)ctx)->opts.timings.store_timeout_us;
    sqlite3_busy_handler(c->db, sq_busy, c);
    *conn = c;
    return 0;
}

static void sq_disconnect(void *ctx, void *conn)
{
    og__sq_conn *c = conn;

    for (int i = 0; i < c->nstmt; i++)
        sqlite3_finalize(c->stmt[i].st);
    sqlite3_close(c->db);
    free(c);
}

static const og__pool_ops sq_pool_ops = {.connect = sq_connect,
                                         .disconnect = sq_disconnect};

int og__sq_acquire(og__sq_store *s, og__sq_conn **out)
{
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    og__sq_arm(conn, og__sq_mono_us() + s->opts.timings.store_timeout_us);
    *out = conn;
    return 0;
}

void og__sq_release(og__sq_store *s, og__sq_conn *c, bool broken)
{
    og__pool_put(s->pool, c, broken);
}

/* ===========================================================================
 * The statement cache (internal.h, og__sq_conn)
 * ========================================================================= */

/* The first slot to probe for the text at sql: Fibonacci hashing of its
 * address. */
static unsigned sq_slot_of(const char *sql)
{
    uint64_t h = (uint64_t)(uintptr_t)sql * UINT64_C(0x9E3779B97F4A7C15);

    return (unsigned)(h >> (64 - SQ_STMT_SLOT_BITS));
}

/* A full cache means a statement text the cap did not count: a defect. It
 * fails every call that needs a new statement, and is written to stderr
 * once per process so that it is seen even where the error is not. */
static int sq_cache_full(void)
{
    static atomic_flag reported = ATOMIC_FLAG_INIT;

    if (!atomic_flag_test_and_set(&reported))
        fputs("oncegate: the SQLite statement cache is full (SQ_STMT_MAX, "
              "lib/store/sqlite/internal.h): a defect\n",
              stderr);
    return OG_EINTERNAL;
}

int og__sq_stmt(og__sq_conn *c, const char *sql, sqlite3_stmt **out)
{
    unsigned i = sq_slot_of(sql);
    sqlite3_stmt *st;

    /* At most SQ_STMT_MAX of SQ_STMT_SLOTS slots are taken: a probe meets
     * a free one. */
    for (; c->slot[i] != 0; i = (i + 1) & (SQ_STMT_SLOTS - 1)) {
        if (c->stmt[c->slot[i] - 1].sql == sql) {
            st = c->stmt[c->slot[i] - 1].st;
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
            *out = st;
            return 0;
        }
    }
    if (c->nstmt == SQ_STMT_MAX)
        return sq_cache_full();
    if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st,
                           NULL) != SQLITE_OK)
        return og__sq_err(c);
    c->stmt[c->nstmt].sql = sql;
    c->stmt[c->nstmt].st = st;
    c->slot[i] = (uint8_t)++c->nstmt;
    *out = st;
    return 0;
}

void og__sq_reset_all(og__sq_conn *c)
{
    for (int i = 0; i < c->nstmt; i++)
        sqlite3_reset(c->stmt[i].st);
}

/* ===========================================================================
 * Running one statement
 * ========================================================================= */

int og__sq_err(og__sq_conn *c)
{
    return og__sqlite_classify(sqlite3_extended_errcode(c->db));
}

int og__sq_exec(og__sq_conn *c, const char *sql)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sql, &st)) < 0)
        return rc;
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : og__sq_err(c);
}

int og__sq_step(og__sq_conn *c, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : og__sq_err(c);
}

int og__sq_done(og__sq_conn *c, sqlite3_stmt *st)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    rc = rc == SQLITE_DONE ? 0 : og__sq_err(c);
    sqlite3_reset(st);
    return rc;
}

int og__sq_one_i64(og__sq_conn *c, sqlite3_stmt *st, int64_t *v)
{
    enum { ONE_VALUE }; /* the statement's one column */
    int rc = og__sq_step(c, st);

    if (rc != 1) {
        sqlite3_reset(st);
        return rc;
    }
    *v = sqlite3_column_int64(st, ONE_VALUE);
    return (rc = og__sq_done(c, st)) < 0 ? rc : 1;
}

static const char sq_rollback_sql[] = "ROLLBACK";

bool og__sq_rollback(og__sq_conn *c)
{
    og__sq_reset_all(c);
    if (sqlite3_get_autocommit(c->db))
        return true; /* SQLite already rolled back (e.g. after an I/O error) */
    return og__sq_exec(c, sq_rollback_sql) == 0;
}

/* ===========================================================================
 * Rows
 * ========================================================================= */

int og__sq_text(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return og__copy(dst, n, (const char *)t) < 0 ? OG_EINTERNAL : 0;
}

int og__sq_text_opt(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL) {
        dst[0] = '\0';
        return 0;
    }
    return og__sq_text(st, col, dst, n);
}

void og__sq_bind_opt(sqlite3_stmt *st, int i, const char *text)
{
    if (text && text[0])
        sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* The accessors of rows.h over the current row of a stepped statement.
 * sqlite3_column_type is asked before any other accessor of a column: a
 * conversion would make its answer undefined. */
static bool sq_row_null(const og__row *r, int col)
{
    return sqlite3_column_type((sqlite3_stmt *)r->result, col) ==
           SQLITE_NULL;
}

static const char *sq_row_text(const og__row *r, int col)
{
    return (const char *)sqlite3_column_text((sqlite3_stmt *)r->result, col);
}

static int sq_row_i64(const og__row *r, int col, int64_t *out)
{
    if (sq_row_null(r, col))
        return OG_EINTERNAL;
    *out = sqlite3_column_int64((sqlite3_stmt *)r->result, col);
    return 0;
}

static bool sq_row_flag(const og__row *r, int col)
{
    return sqlite3_column_int((sqlite3_stmt *)r->result, col) != 0;
}

/* A BLOB column. */
static int sq_row_bytes(const og__row *r, int col, unsigned char *dst,
                        size_t cap, size_t *len)
{
    sqlite3_stmt *st = (sqlite3_stmt *)r->result;
    const void *b;
    int n;

    if (sqlite3_column_type(st, col) != SQLITE_BLOB)
        return OG_EINTERNAL;
    b = sqlite3_column_blob(st, col);
    n = sqlite3_column_bytes(st, col);
    if (n < 0 || (n > 0 && b == NULL) || (dst && (size_t)n > cap))
        return OG_EINTERNAL;
    if (dst && n > 0)
        memcpy(dst, b, (size_t)n);
    *len = (size_t)n;
    return 0;
}

static const og__row_ops sq_row_ops = {
    .null = sq_row_null,
    .text = sq_row_text,
    .i64 = sq_row_i64,
    .flag = sq_row_flag,
    .bytes = sq_row_bytes,
};

og__row og__sq_row(sqlite3_stmt *st)
{
    og__row r = {&sq_row_ops, st, 0};
    return r;
}

int og__sq_read_row(og__sq_store *s, const char *sql, const char *key,
                    int64_t n,
                    int (*read)(og__sq_store *, sqlite3_stmt *, void *),
                    void *out)
{
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sql, &st)) == 0) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(st) >= 2)
            sqlite3_bind_int64(st, 2, n);
        if ((rc = og__sq_step(c, st)) == 1 && read(s, st, out) < 0)
            rc = OG_EINTERNAL;
        sqlite3_reset(st);
    }
    og__sq_release(s, c, false);
    return rc;
}

/* ===========================================================================
 * Transactions (Q11): og__sq_begin() takes a pool connection, arms the
 * call's deadline and runs BEGIN IMMEDIATE; og__sq_end() commits when the
 * call wrote something to keep, rolls back otherwise, and gives the
 * connection back.
 * ========================================================================= */

static const char sq_begin_sql[] = "BEGIN IMMEDIATE";
static const char sq_begin_read_sql[] = "BEGIN";
static const char sq_commit_sql[] = "COMMIT";

/* og__sq_begin with the BEGIN statement sql: IMMEDIATE (the write lock
 * first) or deferred (one snapshot for several reads). */
static int sq_begin_as(og__sq_store *s, const char *sql, og__sq_conn **out)
{
    int64_t deadline = og__sq_mono_us() + s->opts.timings.store_timeout_us;
    void *conn;
    og__sq_conn *c;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    c = conn;
    og__sq_arm(c, deadline); /* the lock wait ends here (Q4) */
    if ((rc = og__sq_exec(c, sql)) < 0) {
        og__sq_release(s, c, !og__sq_rollback(c));
        return rc;
    }
    *out = c;
    return 0;
}

int og__sq_begin_on(og__sq_conn *c)
{
    return og__sq_exec(c, sq_begin_sql);
}

int og__sq_commit(og__sq_conn *c)
{
    return og__sq_exec(c, sq_commit_sql);
}

int og__sq_begin(og__sq_store *s, og__sq_conn **out)
{
    return sq_begin_as(s, sq_begin_sql, out);
}

/* A read transaction: one snapshot for several reads. */
static int sq_begin_read(og__sq_store *s, og__sq_conn **out)
{
    return sq_begin_as(s, sq_begin_read_sql, out);
}

int og__sq_end(og__sq_store *s, og__sq_conn *c, int rc, bool keep)
{
    if (rc == 0 && keep)
        rc = og__sq_commit(c);
    og__sq_release(s, c, !og__sq_rollback(c)); /* no-op after COMMIT (M4) */
    return rc;
}

/* The payout store's transactions (store_int.h, txn_begin): the write
 * lock first, or one snapshot; tx is the connection. */
static int sq_txn_begin(void *impl, og__txn_mode mode, void **tx)
{
    og__sq_conn *c;
    int rc = mode == OG__TXN_WRITE ? og__sq_begin(impl, &c)
                                   : sq_begin_read(impl, &c);

    if (rc < 0)
        return rc;
    c->txn_at_us = 0;
    *tx = c;
    return 0;
}

static int sq_txn_end(void *impl, void *tx, int rc, bool commit)
{
    return og__sq_end(impl, tx, rc, commit);
}

/* ===========================================================================
 * The clock
 * ========================================================================= */

static const char sq_clock_sql[] = "SELECT " SQ_NOW;

int og__sq_clock(og__sq_conn *c, int64_t *now)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_clock_sql, &st)) < 0)
        return rc;
    if ((rc = og__sq_one_i64(c, st, now)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    return 0;
}

/* ===========================================================================
 * Open / close
 * ========================================================================= */

static int sq_open(const char *target, const og_store_options *opts,
                   void **impl)
{
    og__sq_store *s = calloc(1, sizeof *s);

    if (!s)
        return OG_ENOMEM;
    s->path = strdup(target);
    s->opts = *opts;
    s->keys = OG_KEYS_READABLE; /* until og__sq_read_keys */
    s->pool = og__pool_new(&sq_pool_ops, s, opts->pool_size,
                           opts->timings.store_timeout_us);
    /* one writer: one batch at a time, each kind up to its own cap (G7) */
    s->writes = og__batcher_new(&og__sq_write_ops, s, 1,
                                opts->admit_batch_max + opts->outcome_batch_max +
                                    opts->rotate_batch_max);
    if (!s->path || !s->pool || !s->writes) {
        og__batcher_free(s->writes);
        og__pool_free(s->pool);
        free(s->path);
        free(s);
        return OG_ENOMEM;
    }
    pthread_mutex_init(&s->stats_mu, NULL);
    *impl = s;
    return 0;
}

static void sq_close(void *impl)
{
    og__sq_store *s = impl;

    og__batcher_free(s->writes);
    og__pool_free(s->pool);
    pthread_mutex_destroy(&s->stats_mu);
    free(s->path);
    free(s);
}

/* ===========================================================================
 * The method table
 * ========================================================================= */

const og__store_methods og__sqlite_methods = {
    .name = "sqlite",
    /* the store */
    .open = sq_open,
    .close = sq_close,
    .schema_version = og__sq_schema_version,
    .migrate = og__sq_migrate,
    .read_keys = og__sq_read_keys,
    .explain = og__sq_explain,
    /* the admission */
    .admit = og__sq_admit,
    .admit_batch = og__sq_admit_batch,
    .admit_stats = og__sq_admit_stats,
    .operation_get = og__sq_operation_get,
    /* the grant lifecycle */
    .issuance_record = og__sq_issuance_record,
    .revoke = og__sq_revoke,
    .family_revoke = og__sq_family_revoke,
    .consume = og__sq_consume,
    .consume_batch = og__sq_consume_batch,
    .consume_stats = og__sq_consume_stats,
    .ticket_create = og__sq_ticket_create,
    .ticket_rotate = og__sq_ticket_rotate,
    .rotate_batch = og__sq_rotate_batch,
    .rotate_stats = og__sq_rotate_stats,
    /* execution */
    .op_may_submit = og__sq_op_may_submit,
    .op_start = og__sq_op_start,
    .op_record = og__sq_op_record,
    .outcome_batch = og__sq_outcome_batch,
    .outcome_stats = og__sq_outcome_stats,
    .op_takeover = og__sq_op_takeover,
    .op_resolve = og__sq_op_resolve,
    .op_list = og__sq_op_list,
    .op_insert = og__sq_op_insert,
    .op_history = og__sq_op_history,
    /* retention */
    .cleanup_batch = og__sq_cleanup_batch,
    .archive_batch = og__sq_archive_batch,
    /* redemption recovery points */
    .redemption_put = og__sq_redemption_put,
    .redemption_get = og__sq_redemption_get,
    /* the payout store's records */
    .payout_tenant_put = og__sq_payout_tenant_put,
    .payout_beneficiary_put = og__sq_payout_beneficiary_put,
    .payout_destination_put = og__sq_payout_destination_put,
    .payout_destination_token = og__sq_payout_destination_token,
    .payout_draft = og__sq_payout_draft,
    .payout_cancel = og__sq_payout_cancel,
    .payout_edit = og__sq_payout_edit,
    .payout_get = og__sq_payout_get,
    .payout_decision_get = og__sq_payout_decision_get,
    .payout_history = og__sq_payout_history,
    .payout_policy_release_set = og__sq_payout_policy_release_set,
    /* the payout store's transactions and their steps */
    .txn_begin = sq_txn_begin,
    .txn_end = sq_txn_end,
    .payout_facts = og__sq_payout_facts,
    .payout_policy_release = og__sq_payout_policy_release,
    .payout_reserve = og__sq_payout_reserve,
    .payout_decision_write = og__sq_payout_decision_write,
    .payout_settle_read = og__sq_payout_settle_read,
    .payout_decision_issue = og__sq_payout_decision_issue,
    .payout_claim_facts = og__sq_payout_claim_facts,
    .payout_claim_write = og__sq_payout_claim_write,
    .payout_resolve_record = og__sq_payout_resolve_record,
    .payout_resolve_facts = og__sq_payout_resolve_facts,
    .payout_resolve_write = og__sq_payout_resolve_write,
    /* the payout store's jobs and grants */
    .payout_job_take = og__sq_payout_job_take,
    .payout_job_ack = og__sq_payout_job_ack,
    .payout_job_postpone = og__sq_payout_job_postpone,
    .payout_job_resubmit = og__sq_payout_job_resubmit,
    .payout_grant_get = og__sq_payout_grant_get,
    .payout_grant_revoke = og__sq_payout_grant_revoke,
    .payout_expire_batch = og__sq_payout_expire_batch,
    .payout_stats = og__sq_payout_stats,
    .payout_reconcile_later = og__sq_payout_reconcile_later,
    .payout_attempt_read = og__sq_payout_attempt_read,
    .payout_operator_record = og__sq_payout_operator_record,
    .payout_return = og__sq_payout_return,
};
