/*
 * internal.h — the SQLite backend's one private header: the store and
 * connection structs, the SQL fragments several files' statements are
 * written from, and the functions the folder's files share. Only the .c
 * files of lib/store/sqlite/ include it.
 *
 * The embedded store: SQLite in WAL mode, one host, any number of threads
 * and processes on one file. It keeps the method contract (M1-M36,
 * lib/store/store_int.h) with the database's one write lock: SQLite has no
 * data-modifying CTEs, so the admission is ONE write transaction (BEGIN
 * IMMEDIATE … COMMIT) holding the claim and the operation insert —
 * admit.c — and so is every other write (Q11). Q1-Q28 below and in each
 * file's header say how; each file's header names the M it keeps:
 *
 *   conn.c        connections, the statement cache, transactions, the
 *                 clock, error classification, the method table
 *   schema.c      migrations, the schema version, the consumption keys
 *                 mode (Q7)
 *   admit.c       the admission and the group commit of writes (Q8-Q10, G1-G7)
 *   grants.c      issuance, revocation, families, the consume verdict,
 *                 tickets (Q11-Q13)
 *   exec.c        the ownership protocol (Q14-Q18)
 *   retention.c   cleanup and archiving (Q19-Q21)
 *   redeem.c      redemption recovery points (M26)
 *   payout.c      the payout store's records and the decision's steps
 *                 (Q22-Q24)
 *   payout_run.c  jobs, the claim's and the resolution's steps, payout
 *                 grants (Q25-Q28)
 *   explain.c     og_store_explain's plans
 *
 * What every file relies on:
 *
 *   Q1  One writer at a time (M8): BEGIN IMMEDIATE takes the database's
 *       write lock before the claim reads anything, so two connections —
 *       in one process or two — can never both see the key as free. The
 *       PRIMARY KEY on grant_consumptions is the atomic check inside that
 *       lock. Every write transaction of this backend takes it first, so
 *       what one reads no other changes before it commits (M28).
 *   Q2  Durable before reported (M2): WAL with synchronous=FULL fsyncs the
 *       WAL at every commit, and a write is reported only after COMMIT
 *       returned SQLITE_OK. A busy database past the deadline, an I/O error
 *       or a commit that fails is OG_ESTORE_UNAVAILABLE
 *       (og__sqlite_classify, conn.c), never REFUSED; a connection whose
 *       ROLLBACK failed is closed (M4: og__sq_end).
 *   Q3  Amounts are canonical decimal TEXT — never REAL — so equality is
 *       exact.
 *   Q4  Every wait is bounded by the store timeout, measured from the start
 *       of the call (M3): the admissions of one store object queue for
 *       group commit (admit.c, "Group commit"; a waiting thread is woken, it
 *       does not poll), and the cross-process wait for SQLite's write lock
 *       polls with short jittered sleeps (sq_busy, conn.c) until the same
 *       deadline. SQLite's default handler sleeps up to 100 ms between
 *       polls, which starved waiters past their timeout under 16+
 *       concurrent callers.
 *   Q5  Family ordering (M13). An admission, consume, issuance, ticket
 *       creation or rotation in a family reads the family's row inside its
 *       write transaction and claims or writes only when the row exists
 *       with revoked_at NULL; a family revocation marks that row and
 *       revokes the family's live grants in its own write transaction. The
 *       write lock orders them: an admission committed first holds its key
 *       and is not in the revocation's list; one that runs after is refused
 *       (family_blocked).
 *   Q6  Consumption keys (M11). A hashed store's key_hash is the PRIMARY KEY
 *       and ON CONFLICT target of grant_consumptions; operations keep the
 *       identifiers. The mode is read from og_store_settings once per store
 *       object (og__sq_read_keys, schema.c) and picks one of two variants of
 *       each statement that touches the table (SQ_KEYED); both variants come
 *       from ONE template (SQ_CLAIM_SQL(K), SQ_READ_CONSUMPTION_SQL(K),
 *       SQ_REVOKE_TOKEN_SQL(K), SQ_CLEANUP_SQL(K)), so Q1, Q5, Q8, Q9, Q13
 *       and the retention invariants Q19, Q20 and Q10 (the claim's
 *       archived-id condition is in the template) hold for both
 *       unchanged; the operation archives keep identifiers, as operations
 *       do, and are the same in both modes. A family's revocation, whose
 *       readable statement RETURNs the grant ids a hashed table does not
 *       have, lists the family's grants and claims each key in the same
 *       write transaction (sq_family_claim_hashed, grants.c). Every key
 *       SQLite stores or looks up is computed by SQL through
 *       og_consumption_key(), which is the C function of
 *       lib/core/consumption_key.c registered on every connection
 *       (og__sq_open_db, conn.c): one implementation, for bound parameters,
 *       the issuance log's ids and migration 5's rewrite alike.
 *
 * Timestamps are INTEGER microseconds since the Unix epoch at the
 * millisecond resolution of SQLite's clock (M6).
 */
#ifndef OG_STORE_SQLITE_INTERNAL_H
#define OG_STORE_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/rows.h"
#include "store/store_int.h"

/* ===========================================================================
 * SQL fragments several files' statements are written from
 * ========================================================================= */

/* SQLite's clock in microseconds (millisecond resolution, exact). */
#define SQ_NOW \
    "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)"

#define SQ_STR_(x) #x
#define SQ_STR(x) SQ_STR_(x)

/* The columns admission writes, in the order og__row_operation() reads
 * them (OP_*, rows.h). */
#define SQ_OP_INSERT_COLS                                                     \
    "operation_id, issuer, grant_id, caller_id, account_id, amount, "         \
    "currency, status, owner_version, lease_until, submit_by, created_at"

/* Every read of an operation (og__row_operation(), OP_*: rows.h): the
 * admitted columns, then migration 3's, then migration 7's. updated_at is
 * NULL until the first status change (M20); a NULL idempotency key or
 * client reference is the operation id (M22). */
#define SQ_OP_COLS                                                            \
    SQ_OP_INSERT_COLS ", coalesce(updated_at, created_at),"                   \
    " provider_reference, outcome_reason, kind,"                              \
    " coalesce(idempotency_key, operation_id),"                               \
    " coalesce(client_reference, operation_id),"                             \
    " taken_at, lookups, final_absence_after"

/* Every stored column of operations and operation_events up to schema 6
 * (what migration 7 copies), and from schema 7 (what the archives repeat). */
#define SQ_V6_OP_COLS                                                         \
    SQ_OP_INSERT_COLS ", updated_at, provider_reference, outcome_reason"
#define SQ_OP_STORED_COLS                                                     \
    SQ_V6_OP_COLS ", kind, idempotency_key, client_reference,"               \
    " taken_at, lookups, final_absence_after"
#define SQ_V7_EVENT_COLS                                                      \
    "seq, operation_id, at, kind, from_status, to_status, owner_version,"     \
    " reason, provider_reference, actor, evidence"
#define SQ_EVENT_COLS SQ_V7_EVENT_COLS ", source" /* schema 11 */

/* Status sets as migration 7 leaves them in the schema; each partial
 * index's predicate is repeated verbatim by the statements that use the
 * index (Q17, Q21). */
#define SQ_OWNED "('Admitted', 'Started', 'Unknown')"

/* When "not found" is final for a payout attempt (Q29, docs/payouts.md P6):
 * its final_absence_after is set and lies at or before the takeover that
 * began this lookup and the statement's clock. NULL (a credit, a provider
 * that never declares absence final) is never. */
#define SQ_FINAL_ABSENCE                                                      \
    "(final_absence_after IS NOT NULL AND taken_at >= final_absence_after"    \
    " AND " SQ_NOW " >= final_absence_after)"
#define SQ_TERMINAL "('Succeeded', 'Failed', 'NotStarted', 'NotApplied')"
/* The statuses operations_backlog_idx holds from migration 15: all but
 * Admitted and Started, which operations_recovery_scan_idx holds (schema.c,
 * Q17). OG__OP_BACKLOG is the same set as bits. */
#define SQ_BACKLOG                                                            \
    "('Unknown', 'NeedsReconciliation', 'Succeeded', 'Failed', 'NotStarted'," \
    " 'NotApplied')"

/* The statements that claim, read or delete a consumption key are written
 * once each as a template of K, READABLE or HASHED (Q6), and declared in
 * both variants (name_sql and name_hashed_sql) beside the function that runs
 * them. A readable store runs exactly the statements schema 4 ran. */
#define SQ_KCOLS_READABLE "issuer, grant_id"
#define SQ_KCOLS_HASHED "key_hash"
#define SQ_KVALS_READABLE(i, g) i ", " g
#define SQ_KVALS_HASHED(i, g) "og_consumption_key(" i ", " g ")"
#define SQ_KEQ_READABLE(i, g) "issuer = " i " AND grant_id = " g
#define SQ_KEQ_HASHED(i, g) "key_hash = og_consumption_key(" i ", " g ")"
#define SQ_KRET_READABLE "grant_id"
#define SQ_KRET_HASHED "key_hash"
/* "INSERT INTO grant_consumptions (key columns, ...) SELECT <key>, " and
 * the conflict clause every claim ends with: a row only when it took the
 * key. */
#define SQ_CLAIM_INTO(K, i, g)                                                 \
    "INSERT INTO grant_consumptions"                                           \
    " (" SQ_KCOLS_##K ", operation_id, consumed_at, retain_until, kind)"       \
    " SELECT " SQ_KVALS_##K(i, g) ", "
#define SQ_CLAIM_END(K)                                                        \
    " ON CONFLICT (" SQ_KCOLS_##K ") DO NOTHING"                               \
    " RETURNING " SQ_KRET_##K

/* The variant of statement name (name_sql, name_hashed_sql) in the store's
 * consumption keys (Q6). */
#define SQ_KEYED(s, name)                                                      \
    ((s)->keys == OG_KEYS_HASHED ? name##_hashed_sql : name##_sql)

/* ===========================================================================
 * The store and its connections
 * ========================================================================= */

typedef struct og__sq_store {
    char *path;
    og_store_options opts;
    og__pool *pool;
    /* Group commit: the one queue (lib/store/batcher.c) of admissions and
     * consume verdicts (admit.c, G6) and outcome writes (exec.c, G7), and
     * each kind's counters (with stats_mu). */
    struct og__batcher *writes;
    pthread_mutex_t stats_mu;
    og_admit_stats admit_stats, consume_stats, outcome_stats, rotate_stats;
    og_consumption_keys keys; /* Q6: read by og__sq_read_keys at open */
} og__sq_store;

/* The per-connection statement cache. A statement is identified by its
 * text's address — each is a `static const char name_sql[]` beside the
 * function that runs it — and prepared once per connection on first use.
 * Fixed size: SQ_STMT_MAX distinct statements (the backend has about a
 * hundred; a full cache is a defect, OG_EINTERNAL), found in O(1) through
 * an open-addressed table of SQ_STMT_SLOTS slots, which is never more than
 * three quarters full, so a probe always ends. */
#define SQ_STMT_MAX 192
#define SQ_STMT_SLOT_BITS 8
#define SQ_STMT_SLOTS (1 << SQ_STMT_SLOT_BITS)
_Static_assert(SQ_STMT_MAX <= 255 && SQ_STMT_MAX * 4 <= SQ_STMT_SLOTS * 3,
               "a slot holds an index + 1 in a byte, and one slot stays free");

typedef struct og__sq_conn {
    sqlite3 *db;
    struct {
        const char *sql; /* the key: the text's address */
        sqlite3_stmt *st;
    } stmt[SQ_STMT_MAX]; /* [0, nstmt) prepared, in preparation order */
    int nstmt;
    uint8_t slot[SQ_STMT_SLOTS]; /* 0: free; else index + 1 into stmt */
    int64_t deadline_us; /* CLOCK_MONOTONIC; the busy handler gives up here */
    uint32_t jitter;     /* xorshift state for the busy handler's sleeps */
    /* The instant an open payout resolution's writes share: its outcome's,
     * set by og__sq_payout_resolve_record (payout_run.c). */
    int64_t txn_at_us;
} og__sq_conn;

/* ---- conn.c: connections ------------------------------------------------ */

/* CLOCK_MONOTONIC in microseconds. */
int64_t og__sq_mono_us(void);
/* Arms the deadline for one store call on c (Q4). */
void og__sq_arm(og__sq_conn *c, int64_t deadline_us);
/* Opens a configured connection to s's file; create=true only for
 * migrations, so opening a store that was never migrated does not leave an
 * empty file behind. */
int og__sq_open_db(const og__sq_store *s, bool create, sqlite3 **out);
/* A pool connection armed with the store timeout from now (Q4), and its
 * return; broken closes it (M4). */
int og__sq_acquire(og__sq_store *s, og__sq_conn **out);
void og__sq_release(og__sq_store *s, og__sq_conn *c, bool broken);

/* ---- conn.c: statements ------------------------------------------------- */

/* The prepared statement of text sql (its address is its identity), reset
 * and with bindings cleared, in *out. 0 or the error. */
int og__sq_stmt(og__sq_conn *c, const char *sql, sqlite3_stmt **out);
/* Resets every prepared statement of c: none stays active. */
void og__sq_reset_all(og__sq_conn *c);
/* The error for the connection's last failure. */
int og__sq_err(og__sq_conn *c);
/* Runs a statement that returns no row. 0 or the error. */
int og__sq_exec(og__sq_conn *c, const char *sql);
/* Steps st once: 1 when it yields a row (its columns readable until the
 * next step or reset), 0 when it is done, or the error. */
int og__sq_step(og__sq_conn *c, sqlite3_stmt *st);
/* Runs st to completion — from its start, or after a row og__sq_step()
 * returned, never after it returned 0 (stepping a finished statement runs
 * it again) — and resets it. 0 or the error. */
int og__sq_done(og__sq_conn *c, sqlite3_stmt *st);
/* Steps st (a write RETURNING at most one integer, or a one-row read): 1
 * and *v = its one column when it yields a row, 0 when none, or the error.
 * Runs it to completion and resets it. */
int og__sq_one_i64(og__sq_conn *c, sqlite3_stmt *st, int64_t *v);
/* Ends a failed transaction. false when the connection's state is unknown
 * and it must be closed (M4). */
bool og__sq_rollback(og__sq_conn *c);

/* ---- conn.c: rows ------------------------------------------------------- */

/* Copies column col into dst (n bytes). 0, or OG_EINTERNAL when it does
 * not fit or is NULL. */
int og__sq_text(sqlite3_stmt *st, int col, char *dst, size_t n);
/* The same for a column that may be NULL ("" then). */
int og__sq_text_opt(sqlite3_stmt *st, int col, char *dst, size_t n);
/* Binds text, or NULL for NULL or "" (no family, no operation). */
void og__sq_bind_opt(sqlite3_stmt *st, int i, const char *text);
/* The current row of st, for the readers of rows.h. */
og__row og__sq_row(sqlite3_stmt *st);
/* A one-row read on a pool connection, outside a transaction (one SELECT
 * is one WAL snapshot): statement sql with ?1 key (and ?2 n when the
 * statement has it); on a row, read(s, st, out). 1 read, 0 no row, or the
 * error. */
int og__sq_read_row(og__sq_store *s, const char *sql, const char *key,
                    int64_t n,
                    int (*read)(og__sq_store *, sqlite3_stmt *, void *),
                    void *out);

/* ---- conn.c: transactions and the clock --------------------------------- */

/* ONE write transaction on a pool connection (Q11): takes the connection,
 * arms the call's deadline and runs BEGIN IMMEDIATE, the write lock first
 * (Q1). */
int og__sq_begin(og__sq_store *s, og__sq_conn **out);
/* BEGIN IMMEDIATE and COMMIT on a connection the caller holds (the group
 * commit's batch, admit.c). 0 or the error. */
int og__sq_begin_on(og__sq_conn *c);
int og__sq_commit(og__sq_conn *c);
/* Ends the transaction og__sq_begin() opened: COMMIT when rc is 0 and
 * keep, else ROLLBACK, and gives the connection back. Returns rc, or the
 * commit's error (the write is then not confirmed: OG_ESTORE_UNAVAILABLE,
 * Q2). */
int og__sq_end(og__sq_store *s, og__sq_conn *c, int rc, bool keep);
/* SQLite's clock now (SQ_NOW), in *now. 0 or the error. */
int og__sq_clock(og__sq_conn *c, int64_t *now);

/* ---- admit.c: what the grant-lifecycle calls share with the admission --- */

typedef enum og__sq_family {
    SQ_FAM_UNNAMED = 0, /* the grant names no family: nothing to order */
    SQ_FAM_LIVE,
    SQ_FAM_MISSING, /* never created: nothing was issued into it */
    SQ_FAM_REVOKED,
} og__sq_family;

/* The family's row, read inside the caller's write transaction (Q5). */
int og__sq_family_state(og__sq_conn *c, const char *issuer,
                        const char *family, og__sq_family *state);
/* The claim for req in its form, on SQLite's clock (Q9): by op_id, or by
 * the consume verdict when op_id is NULL. 1 when this statement took the
 * grant (row form: the row's family copied into row_family, "" for none),
 * 0 when it took nothing, or the error. The caller has checked the family
 * (Q5). */
int og__sq_claim(og__sq_store *s, og__sq_conn *c, const og__admit_req *req,
                 const char *op_id, char row_family[OG_ID_MAX + 1]);
/* After a claim that took nothing, inside the same transaction: what holds
 * req's grant, in the shape both forms share, and whether its family
 * blocked the claim (fam: og__sq_family_state() of the same transaction). */
int og__sq_consumption(const og__sq_store *s, og__sq_conn *c,
                       const og__admit_req *req, og__sq_family fam,
                       og__consumption *cons);
/* Whether anything holds (issuer, grant_id) in form: a consumption row
 * (token form) or the grant's row (row form). 1, 0, or the error. */
int og__sq_holder_exists(const og__sq_store *s, og__sq_conn *c,
                         og_grant_form form, const char *issuer,
                         const char *grant_id);
/* A claim kind as grant_consumptions stores it. 0 or OG_EINTERNAL. */
int og__sq_claim_kind_parse(const char *text, og__claim_kind *kind);
/* The consume verdict inside the open write transaction on c (grants.c):
 * the family's state, the claim with no operation, or the read of what
 * holds the key. 0 and *out (*keep: a claim to commit), or the error. */
int og__sq_consume_in(og__sq_store *s, og__sq_conn *c,
                      const og__admit_req *req, og_consume_result *out,
                      bool *keep);
/* A ticket's rotation inside the open write transaction on c (grants.c,
 * Q12): row's answer (*keep: a write to commit), or the error. */
int og__sq_rotate_in(og__sq_store *s, og__sq_conn *c, og__rotate_row *row,
                     bool *keep);
/* Binds ?1..?10 of a new operation's insert (admission's, og__op_insert's):
 * req's binding, the initial owner version, the lease and the window. */
void og__sq_bind_new_op(sqlite3_stmt *st, const og__admit_req *req,
                        const og_timings *t);

/* ---- grants.c ----------------------------------------------------------- */

/* Inserts the grant's row (row form): ?1 issuer, ?2 grant id, family ("":
 * none), expires_at, in the caller's transaction. 0 or the error. */
int og__sq_grant_insert(og__sq_conn *c, const char *issuer,
                        const char *grant_id, const char *family,
                        int64_t expires_at_us);

/* ---- exec.c ------------------------------------------------------------- */

/* An outcome's write and its event (og_op_record) inside c's transaction
 * (Q14): *recorded and, when at_out is not NULL, the event's time. source:
 * the event's (late evidence), NULL for none. */
int og__sq_op_record_in(og__sq_conn *c, const char *id, unsigned expected,
                        int64_t owner_version, const og_op_outcome *o,
                        const char *source, bool *recorded, int64_t *at_out);

/* Appends an operation_events row in c's transaction (Q14). */
int og__sq_op_event(og__sq_conn *c, const char *id, int64_t at,
                    const char *kind, og_op_status from, og_op_status to,
                    int64_t owner_version, const char *reason,
                    const char *provider_reference, const char *actor,
                    const char *evidence, const char *source);

/* ---- payout.c ----------------------------------------------------------- */

/* One payout history entry (Q22): NULL (or 0) fields are absent. */
typedef struct og__sq_payout_event {
    const char *payout_id;
    int64_t at;
    const char *kind, *actor, *correlation_id, *decision_id, *grant_id,
        *job_id, *from_state, *to_state;
    int64_t payout_version, amount;
    const char *release_day, *reason;
} og__sq_payout_event;

/* Appends e to payout_events in c's transaction. 0 or the error. */
int og__sq_payout_event_add(og__sq_conn *c, const og__sq_payout_event *e);

/* ===========================================================================
 * The methods (og__sqlite_methods, conn.c), each of its slot's type
 * (store_int.h), in the order of the files that define them
 * ========================================================================= */

/* schema.c */
og__store_schema_version_fn og__sq_schema_version;
og__store_migrate_fn og__sq_migrate;
og__store_read_keys_fn og__sq_read_keys;
/* admit.c */
og__store_admit_fn og__sq_admit;
og__store_admit_batch_fn og__sq_admit_batch;
og__store_admit_stats_fn og__sq_admit_stats;
og__store_consume_fn og__sq_consume;
og__store_consume_batch_fn og__sq_consume_batch;
og__store_consume_stats_fn og__sq_consume_stats;
og__store_operation_get_fn og__sq_operation_get;
/* grants.c */
og__store_issuance_record_fn og__sq_issuance_record;
og__store_revoke_fn og__sq_revoke;
og__store_family_revoke_fn og__sq_family_revoke;
og__store_ticket_create_fn og__sq_ticket_create;
og__store_ticket_rotate_fn og__sq_ticket_rotate;
og__store_rotate_batch_fn og__sq_rotate_batch;
og__store_rotate_stats_fn og__sq_rotate_stats;
/* exec.c */
og__store_op_may_submit_fn og__sq_op_may_submit;
og__store_op_start_fn og__sq_op_start;
og__store_op_record_fn og__sq_op_record;
og__store_outcome_batch_fn og__sq_outcome_batch;
og__store_outcome_stats_fn og__sq_outcome_stats;
/* The one queue's run (admit.c, G1-G7), for conn.c. */
extern const struct og__batch_ops og__sq_write_ops;

/* A row of the store's one queue of writes (admit.c, G6, G7): an
 * admission (req; its answer in res), a consume verdict (req and consume;
 * its answer in cres) or an outcome write (outcome; its answer in
 * outcome->hit). */
typedef struct og__sq_write {
    const og__admit_req *req;
    bool consume;
    og_admission res;
    og_consume_result cres;
    og__outcome_row *outcome;
    og__rotate_row *rotate; /* a ticket's rotation (G8) */
} og__sq_write;
/* Queues w and waits for its batch (GQ1-GQ4): its return code. */
int og__sq_write_submit(og__sq_store *s, og__sq_write *w, int64_t deadline_us);
/* What the rows of og__sq_write_direct are. */
typedef enum {
    SQ_WRITE_ADMIT,   /* og__admit_req, admissions */
    SQ_WRITE_CONSUME, /* og__admit_req, consume verdicts */
    SQ_WRITE_OUTCOME, /* og__outcome_row */
    SQ_WRITE_ROTATE   /* og__rotate_row */
} og__sq_kind;
/* rows[0..n), of kind, as ONE batch of their own past the queue, bounded
 * by the store timeout (the test hooks). 0 with rcs and, when out is not
 * NULL, *out (the writes, each with its answer; the caller frees them),
 * or OG_EINVAL / OG_ENOMEM. */
int og__sq_write_direct(og__sq_store *s, og__sq_kind kind, void *rows,
                        int n, og__sq_write **out, int *rcs);
/* exec.c: one outcome write inside c's transaction (Q31), and alone in a
 * transaction of its own bounded by deadline_us; counting a batch of n
 * outcome writes. */
int og__sq_outcome_in(og__sq_conn *c, og__outcome_row *r);
int og__sq_outcome_one(og__sq_store *s, og__outcome_row *r,
                       int64_t deadline_us);
void og__sq_outcome_count(og__sq_store *s, int n);
og__store_op_takeover_fn og__sq_op_takeover;
og__store_op_resolve_fn og__sq_op_resolve;
og__store_op_list_fn og__sq_op_list;
og__store_op_insert_fn og__sq_op_insert;
og__store_op_history_fn og__sq_op_history;
/* retention.c */
og__store_cleanup_batch_fn og__sq_cleanup_batch;
og__store_archive_batch_fn og__sq_archive_batch;
/* explain.c */
og__store_explain_fn og__sq_explain;
/* redeem.c */
og__store_redemption_put_fn og__sq_redemption_put;
og__store_redemption_get_fn og__sq_redemption_get;
/* payout.c */
og__store_payout_tenant_put_fn og__sq_payout_tenant_put;
og__store_payout_beneficiary_put_fn og__sq_payout_beneficiary_put;
og__store_payout_destination_put_fn og__sq_payout_destination_put;
og__store_payout_destination_token_fn og__sq_payout_destination_token;
og__store_payout_draft_fn og__sq_payout_draft;
og__store_payout_cancel_fn og__sq_payout_cancel;
og__store_payout_edit_fn og__sq_payout_edit;
og__store_payout_get_fn og__sq_payout_get;
og__store_payout_decision_get_fn og__sq_payout_decision_get;
og__store_payout_history_fn og__sq_payout_history;
og__store_payout_facts_fn og__sq_payout_facts;
og__store_payout_policy_release_fn og__sq_payout_policy_release;
og__store_payout_policy_release_set_fn og__sq_payout_policy_release_set;
og__store_payout_reserve_fn og__sq_payout_reserve;
og__store_payout_decision_write_fn og__sq_payout_decision_write;
og__store_payout_settle_read_fn og__sq_payout_settle_read;
og__store_payout_decision_issue_fn og__sq_payout_decision_issue;
/* payout_run.c */
og__store_payout_job_take_fn og__sq_payout_job_take;
og__store_payout_job_ack_fn og__sq_payout_job_ack;
og__store_payout_job_postpone_fn og__sq_payout_job_postpone;
og__store_payout_claim_facts_fn og__sq_payout_claim_facts;
og__store_payout_claim_write_fn og__sq_payout_claim_write;
og__store_payout_resolve_record_fn og__sq_payout_resolve_record;
og__store_payout_resolve_facts_fn og__sq_payout_resolve_facts;
og__store_payout_resolve_write_fn og__sq_payout_resolve_write;
og__store_payout_job_resubmit_fn og__sq_payout_job_resubmit;
og__store_payout_grant_get_fn og__sq_payout_grant_get;
og__store_payout_grant_revoke_fn og__sq_payout_grant_revoke;
og__store_payout_expire_batch_fn og__sq_payout_expire_batch;
og__store_payout_stats_fn og__sq_payout_stats;
/* ---- payout_after.c (schema 11) ---- */
og__store_payout_reconcile_later_fn og__sq_payout_reconcile_later;
og__store_payout_attempt_read_fn og__sq_payout_attempt_read;
og__store_payout_operator_record_fn og__sq_payout_operator_record;
og__store_payout_return_fn og__sq_payout_return;

/* ===========================================================================
 * The statements explain.c plans, declared beside the functions that run
 * them (the readable variant and, where the keys matter, the hashed one)
 * ========================================================================= */
extern const char og__sq_family_state_sql[];      /* admit.c */
extern const char og__sq_claim_sql[];             /* admit.c */
extern const char og__sq_claim_hashed_sql[];      /* admit.c */
extern const char og__sq_row_claim_sql[];         /* admit.c */
extern const char og__sq_insert_op_sql[];         /* admit.c */
extern const char og__sq_read_consumption_sql[];  /* admit.c */
extern const char og__sq_read_consumption_hashed_sql[];
extern const char og__sq_cleanup_sql[];           /* retention.c */
extern const char og__sq_cleanup_hashed_sql[];
extern const char og__sq_payout_reserve_sql[];    /* payout.c */
extern const char og__sq_payout_job_take_sql[];   /* payout_run.c */
extern const char og__sq_payout_expire_mark_sql[]; /* payout_run.c */
/* The payout pipeline's statements, per payout and per loop pass
 * (docs/payouts.md section 7 step 4) */
extern const char og__sq_payout_policy_release_sql[]; /* payout.c */
extern const char og__sq_payout_facts_sql[];
extern const char og__sq_payout_day_sql[];
extern const char og__sq_payout_decision_sql[];
extern const char og__sq_payout_approve_sql[];
extern const char og__sq_payout_bind_sql[];
extern const char og__sq_payout_job_sql[];
extern const char og__sq_payout_event_sql[];
extern const char og__sq_payout_job_ack_sql[];        /* payout_run.c */
extern const char og__sq_payout_claim_facts_sql[];
extern const char og__sq_payout_claim_grant_sql[];
extern const char og__sq_payout_claim_payout_sql[];
extern const char og__sq_payout_claim_op_sql[];
extern const char og__sq_payout_resolve_facts_sql[];
extern const char og__sq_payout_resolve_payout_sql[];
extern const char og__sq_payout_release_sql[];
extern const char og__sq_payout_pay_sql[];
extern const char og__sq_payout_unreserve_sql[];
extern const char og__sq_payout_expire_days_sql[];
extern const char og__sq_payout_expire_events_sql[];
extern const char og__sq_op_start_sql[];              /* exec.c */
extern const char og__sq_op_record_sql[];
extern const char og__sq_op_takeover_sql[];
extern const char og__sq_op_event_sql[];
extern const char og__sq_payout_reconcile_later_sql[]; /* payout_after.c */
extern const char og__sq_payout_attempt_read_sql[];
extern const char og__sq_payout_return_sql[];
/* og_op_scan's text for filter f into sql (size n), as exec.c runs it
 * (Q17): 0, or OG_EINTERNAL when it does not fit. */
int og__sq_op_list_sql(const og_op_filter *f, char *sql, size_t n);

#endif
