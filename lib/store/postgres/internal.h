/*
 * internal.h — the PostgreSQL backend's one private header (libpq 15): the
 * store and connection structs, the statement descriptor, the SQL fragments
 * several files' statements are written from, and the functions the
 * folder's files share. Nothing but the .c files of lib/store/postgres/
 * includes it.
 *
 * It keeps the method contract (M1-M36, lib/store/store_int.h) under Read
 * Committed: every write is ONE statement in its own implicit transaction —
 * data-modifying CTEs let the claim and the operation insert be one
 * statement (admit.c) — except the payout store's decision, claim and
 * resolution, each ONE explicit transaction (txn_begin, conn.c) whose steps
 * lock the rows they read. I1-I28 below and in each file's header say how;
 * each file's header names the M it keeps:
 *
 *   conn.c        connections, session settings, notices, deadlines, the
 *                 prepared-statement set, running one statement, reading
 *                 errors and rows, transactions, the method table
 *   schema.c      migrations, the schema version, the session bounds (I8),
 *                 the consumption keys mode (I9)
 *   admit.c       the admission and its follow-up read (I10-I12)
 *   grants.c      issuance, revocation, families, the consume verdict,
 *                 tickets (I13, I14)
 *   exec.c        the ownership protocol (I15-I17)
 *   retention.c   cleanup and archiving (I18-I20)
 *   redeem.c      redemption recovery points (I21)
 *   payout.c      the payout store's records and the decision's steps
 *                 (I22-I24)
 *   payout_run.c  jobs, the claim's and the resolution's steps, payout
 *                 grants (I25-I28)
 *   explain.c     og_store_explain's plans
 *
 * What every file relies on:
 *
 *  I1  A commit is confirmed only at ReadyForQuery (M2). With the extended
 *      protocol the server sends the RETURNING rows and CommandComplete
 *      BEFORE the implicit transaction commits at Sync, so an ErrorResponse
 *      (a failed commit, a terminated backend) can still follow the rows.
 *      A statement succeeds only when PQgetResult() returned NULL, no error
 *      result came at all, PQstatus() is CONNECTION_OK and
 *      PQtransactionStatus() is the expected one (PQTRANS_IDLE for every
 *      statement outside a transaction).
 *  I2  The client deadline (M3) is store_timeout_us per statement, or per
 *      explicit transaction; at the deadline the statement is cancelled and
 *      the connection discarded, its state unknown (M4). A timeout, a
 *      cancellation or a lost connection is OG_ESTORE_UNAVAILABLE (M2).
 *  I3  A WARNING "canceling (the) wait for synchronous replication" means
 *      the commit happened locally but is not known to be on the standby:
 *      the statement reports OG_ESTORE_UNAVAILABLE, never a success (M2).
 *  I4  og__pg_classify() (lib/core/storeerr.c) reads SQLSTATE and the
 *      constraint's name: only a unique violation on operations_pkey or
 *      operations_grant_key can refuse (OG__PG_REFUSE), and only the
 *      admission turns that into a refusal (M5).
 *  I5  Every deadline (expires_at + leeway) is compared with the store's
 *      statement_timestamp() inside the statement that claims (M6), and
 *      every microsecond value crosses the wire as an exact bigint (PG_US,
 *      PG_TS, PG_EPOCH_US below).
 *  I6  The family's row orders its grants (M13). Admission and the consume
 *      verdict of a grant that names a family claim only while they hold a
 *      FOR SHARE lock on the family's row with revoked_at IS NULL; issuance
 *      and ticket creation lock it with ON CONFLICT DO UPDATE ... WHERE
 *      revoked_at IS NULL; family revocation UPDATEs it. Under Read
 *      Committed the later locker waits for the earlier one to commit and
 *      then re-checks the row's newest version, so whichever commits first
 *      wins.
 *  I7  The family's advisory lock queues fairly (PG_FAMILY_KEY): taken
 *      shared by admissions and consumes, exclusive by revocation, issuance
 *      and ticket creation, always before the family's row lock, so steady
 *      admissions cannot starve a revocation.
 *  I8  The server-side bound on an admission (docs/design.md, "The
 *      server-side bound on an admission"): every connection carries
 *      statement_timeout = lock_timeout = store_timeout, and on servers 17+
 *      transaction_timeout too — set on the connection, or
 *      (session_bounds_from_role) by the deployment on the role, and then
 *      only checked. A lock wait before the claim is covered (lock_timeout,
 *      statement_timeout); the commit is NOT: PostgreSQL disables
 *      statement_timeout (and transaction_timeout) before it commits, and a
 *      synchronous-replication wait at commit has no timeout at all.
 *      og_store_session_bounds() reports the settings and whether commits
 *      wait for a synchronous standby, so the service can refuse a cleanup
 *      margin that does not cover them (M23).
 *  I9  Consumption keys (M11). A hashed store's key_hash is grant_consumptions'
 *      primary key, the ON CONFLICT target of every claim and the column
 *      every lookup matches; the operation record keeps the identifiers.
 *      Every statement that names the table's key is ONE template of the
 *      mode ("Consumption keys" below), so I10 and I11 read the same for
 *      both with "the key" for (issuer, grant_id), and so does I12: both
 *      instances of each admission carry PG_OP_ID_NOT_ARCHIVED and read the
 *      operation live or archived. Cleanup (I18, I19) names no key: it
 *      picks rows by ctid over grant_consumptions_retain_until_idx, which
 *      migration 5 gives the hashed table too, so one statement serves
 *      both. The admission stays one statement and one round trip. The key
 *      is computed by the store, in the statement, by the SQL function
 *      migration 5 creates, whether it comes from the statement's
 *      parameters or from grant_issuance rows (family revocation): within
 *      one store there is one implementation. The mode is read from
 *      og_store_settings when the store object opens (og__pg_read_keys,
 *      schema.c) and decides which instances its connections prepare and
 *      run (og__pg_keyed).
 */
#ifndef OG_STORE_POSTGRES_INTERNAL_H
#define OG_STORE_POSTGRES_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

#include "store/rows.h"
#include "store/store_int.h"

/* ===========================================================================
 * SQL fragments several files' statements are written from
 * ========================================================================= */

/* Exact microseconds (I5).
 *
 * PG_US(p) is the interval of p microseconds, PG_TS(p) the timestamp p
 * microseconds after the epoch; p is a bigint parameter, and SQL NULL stays
 * NULL. bigint * interval goes through float8, which is exact only below
 * 2^53 µs (year 2255). Splitting into whole seconds (1e6 * s stays exact up
 * to year ~20000) and a sub-second remainder keeps every step an exact
 * integer; an interval without day or month parts adds without any time-zone
 * dependence. PG_EPOCH_US(c) is timestamp c as bigint microseconds. */
#define PG_US(p)                                                               \
    "((" p "::bigint / 1000000) * interval '1 second'"                         \
    " + (" p "::bigint % 1000000) * interval '1 microsecond')"
#define PG_TS(p) "('epoch'::timestamptz + " PG_US(p) ")"
#define PG_EPOCH_US(c) "(extract(epoch FROM " c ") * 1000000)::bigint"

#define PG_STR_(x) #x
#define PG_STR(x) PG_STR_(x)

/* Status sets as migration 7 leaves them in the schema: the terminal ones
 * (archiving, I20) and the ones an owner holds (takeover, recovery's
 * index). */
#define PG_V7_TERMINAL "('Succeeded','Failed','NotStarted','NotApplied')"
#define PG_V7_OWNED "('Admitted','Started','Unknown')"
/* The statuses operations_backlog_idx holds from migration 15: all but
 * the two an owner holds in flight (Admitted, Started), which
 * operations_recovery_idx holds — so an admission inserts into one of the
 * two indexes, not both (schema.c). */
#define PG_V15_BACKLOG                                                         \
    "('Unknown','NeedsReconciliation','Succeeded','Failed','NotStarted',"     \
    "'NotApplied')"

/* When "not found" is final for a payout attempt (I29, docs/payouts.md
 * P6): its final_absence_after (t: the row's alias prefix) is set and lies
 * at or before the takeover that began this lookup and the instant now
 * the statement read after its lock. NULL (a credit, a provider that never
 * declares absence final) is never. */
#define PG_FINAL_ABSENCE(t, now)                                               \
    "(" t "final_absence_after IS NOT NULL AND " t "taken_at >= "              \
    t "final_absence_after AND " now " >= " t "final_absence_after)"

/* The operation columns, in the order og__row_operation() reads them
 * (OP_*, rows.h).
 * Timestamps come back as exact bigint microseconds (extract() is numeric
 * since 14); a NULL updated_at reads as created_at (M20); a NULL
 * idempotency key or client reference reads as the operation id (M22). */
#define PG_OP_COLUMNS(t)                                                       \
    PG_OP_COLUMNS_V7(t) ", "                                                   \
    "(extract(epoch FROM " t "taken_at) * 1000000)::bigint, "                  \
    t "lookups, "                                                              \
    "(extract(epoch FROM " t "final_absence_after) * 1000000)::bigint"
/* The admission's statement (admit.c) in one literal ISO C takes: the row
 * it inserts has schema 11's columns as every new credit has them (NULL,
 * 0, NULL), and its report of a claim that did not happen gives them so
 * too (the UNION's first branch types them). A credit never uses them: the
 * admission compares the binding, and the reconciler's columns are a
 * payout attempt's, which no admission creates or reports. */
#define PG_OP_COLUMNS_NEW(t)                                                   \
    PG_OP_COLUMNS_V7(t) ", NULL::int8, 0::int8, NULL::int8"
#define PG_OP_COLUMNS_REPORT(t) PG_OP_COLUMNS_V7(t) ", NULL, 0, NULL"
#define PG_OP_COLUMNS_V7(t)                                                    \
    t "operation_id::text, " t "issuer, " t "grant_id, " t "caller_id, "       \
    t "account_id, " t "amount::text, " t "currency, " t "status, "            \
    t "owner_version, "                                                        \
    "(extract(epoch FROM " t "lease_until) * 1000000)::bigint, "               \
    "(extract(epoch FROM " t "submit_by) * 1000000)::bigint, "                 \
    "(extract(epoch FROM " t "created_at) * 1000000)::bigint, "                \
    "(extract(epoch FROM coalesce(" t "updated_at, " t "created_at))"          \
    " * 1000000)::bigint, "                                                    \
    t "provider_reference, " t "outcome_reason, " t "kind, "                   \
    "coalesce(" t "idempotency_key, " t "operation_id::text), "                \
    "coalesce(" t "client_reference, " t "operation_id::text)"

/* Every stored column of operations, as the archive repeats them (I20,
 * I12), up to schema 7 and from schema 11. */
#define PG_OP_STORED_COLS_V7                                                   \
    "operation_id, issuer, grant_id, caller_id, account_id, amount, currency, " \
    "status, owner_version, lease_until, submit_by, created_at, updated_at, "  \
    "provider_reference, outcome_reason, kind, idempotency_key, "              \
    "client_reference"
#define PG_OP_STORED_COLS                                                      \
    PG_OP_STORED_COLS_V7 ", taken_at, lookups, final_absence_after"

/* The family's fair queue (I7): a transaction-scoped advisory lock keyed on
 * (issuer, family), length-prefixed so that no two pairs share a text.
 * Row locks alone starve a revocation: new FOR SHARE lockers do not queue
 * behind a waiting UPDATE, so under steady admissions of one family its
 * revocation waited past the store timeout. The heavyweight lock manager
 * queues fairly — a shared request waits behind a queued exclusive one — so
 * admissions and consumes take it shared, and revocation, issuance and
 * ticket creation take it exclusive, ALWAYS before the family's row lock
 * (no cycle: whoever holds a row lock on the family already holds a
 * compatible advisory lock). A hash collision between two families only
 * serializes them more than needed. */
#define PG_FAMILY_KEY(i, f)                                                    \
    "hashtextextended(length(" i "::text)::text || ':' || " i "::text || "    \
    f "::text, 0)"
#define PG_FAMILY_XLOCK_CTE(i, f)                                              \
    "flk AS (\n"                                                               \
    "  SELECT pg_advisory_xact_lock(" PG_FAMILY_KEY(i, f) ") AS held\n"         \
    "  WHERE " f "::text IS NOT NULL)"

/* The family lock of an admission or a consume (I6): the family's row, live,
 * under FOR SHARE, which a concurrent revocation's UPDATE of that row waits
 * for (and which waits for it: Read Committed then re-checks revoked_at on
 * the row's newest version and the row drops out). Many admissions of one
 * family share the lock; only the revocation is exclusive. f is the family
 * parameter, SQL NULL when the grant has none. The claim's WHERE carries
 * PG_FAMILY_LIVE(f), so without the locked live row nothing is claimed. It
 * is not a snapshot NOT EXISTS on a revocation: a snapshot taken before a
 * revocation committed would still say "live" after it. */
#define PG_FAMILY_CTE(f)                                                       \
    "flk AS (\n"                                                               \
    "  SELECT pg_advisory_xact_lock_shared(" PG_FAMILY_KEY("$1", f) ") AS held\n" \
    "  WHERE " f "::text IS NOT NULL),\n"                                       \
    "fam AS (\n"                                                               \
    "  SELECT 1 FROM families\n"                                               \
    "  WHERE issuer = $1::text AND family = " f "::text AND revoked_at IS NULL\n" \
    "    AND EXISTS (SELECT 1 FROM flk)\n"                                      \
    "  FOR SHARE OF families)"
#define PG_FAMILY_LIVE(f) "(" f "::text IS NULL OR EXISTS (SELECT 1 FROM fam))"

/* ---------------------------------------------------------------------------
 * Consumption keys (I9).
 *
 * Each statement that touches grant_consumptions is written ONCE, as a
 * macro of K — READABLE or HASHED — and instantiated for both (NAME_sql and
 * NAME_hashed_sql, each with its descriptor beside the function that runs
 * it); a store object runs the ones of its store's keys (og__pg_keyed).
 * The readable instances are the statements of schema 4, byte for byte.
 * Two families side by side rather than one shape keyed by key_hash with
 * optional readable columns: one shape would rewrite every readable store
 * and change its statements, index and benchmark, and a hashed table with
 * readable columns (even NULL ones) invites putting ids back; here each
 * mode's table has exactly its key, and the template keeps the two
 * statement families from drifting apart.
 *   PG_KCOLS_K          the key columns: the conflict target
 *   PG_KVALS_K(i, g)    the key of the text expressions i and g
 *   PG_KEQ_K(t, i, g)   "the key of row t is (i, g)": every lookup
 *   PG_KHELD_K(t)       "row t exists", after a LEFT JOIN
 *   PG_KRET_K(i, g)     a claim's RETURNING issuer, grant_id: the row's own,
 *                       or (hashed: the row has none) the statement's i, g
 *   PG_KRETID_K(g)      the same for grant_id alone
 * ------------------------------------------------------------------------- */
#define PG_KCOLS_READABLE "issuer, grant_id"
#define PG_KCOLS_HASHED "key_hash"
#define PG_KVALS_READABLE(i, g) i ", " g
#define PG_KVALS_HASHED(i, g) "og_consumption_key(" i ", " g ")"
#define PG_KEQ_READABLE(t, i, g) t "issuer = " i " AND " t "grant_id = " g
#define PG_KEQ_HASHED(t, i, g) t "key_hash = og_consumption_key(" i ", " g ")"
#define PG_KHELD_READABLE(t) t "issuer IS NOT NULL"
#define PG_KHELD_HASHED(t) t "key_hash IS NOT NULL"
#define PG_KRET_READABLE(i, g) "issuer, grant_id"
#define PG_KRET_HASHED(i, g) i " AS issuer, " g " AS grant_id"
#define PG_KRETID_READABLE(g) "grant_id"
#define PG_KRETID_HASHED(g) g " AS grant_id"
/* The head and the conflict clause of every claim of a key. */
#define PG_CLAIM_INTO(K)                                                       \
    "INSERT INTO grant_consumptions (" PG_KCOLS_##K                            \
    ", operation_id, consumed_at, retain_until, kind)"
#define PG_ON_KEY_CONFLICT(K) "ON CONFLICT (" PG_KCOLS_##K ") DO NOTHING"

/* ---------------------------------------------------------------------------
 * The admission's pieces admit.c and admit_batch.c share (I10-I12)
 * ------------------------------------------------------------------------- */

/* The operation with id p, live or archived (I12): one snapshot sees it in
 * exactly one of the two tables. */
#define PG_OP_LIVE_OR_ARCHIVED(p, cols)                                        \
    "SELECT " cols " FROM operations WHERE operation_id = " p "::uuid\n"       \
    "  UNION ALL\n"                                                            \
    "  SELECT " cols " FROM operations_archive WHERE operation_id = " p "::uuid\n" \
    "  LIMIT 1"
/* The claim's condition that an archived operation keeps its id (I12). */
#define PG_OP_ID_NOT_ARCHIVED(p)                                               \
    "NOT EXISTS (SELECT 1 FROM operations_archive a WHERE a.operation_id = " p "::uuid)"

/* PG_OP_ID_NOT_ARCHIVED for the batched admission's rows (admit_batch.c):
 * OFFSET 0 keeps the planner from turning the NOT EXISTS into an anti join
 * (it never flattens a sublink with an OFFSET), so each row probes
 * operations_archive_pkey. As an anti join, the generic plan of the row
 * form, made on a new store's empty tables, hashed a sequential scan of
 * operations_archive, which only grows (docs/performance.md, "VERDICT2"). */
#define PG_BATCH_OP_ID_NOT_ARCHIVED(p)                                         \
    "NOT EXISTS (SELECT 1 FROM operations_archive a WHERE a.operation_id = " p "::uuid OFFSET 0)"

/* What holds a key that was not claimed, as columns (UNCLAIMED_*), read
 * after LEFT JOINs that alias the key's row c, the grant's row g, the
 * family's row fm and the operation o; f the family (NULL: none), K the
 * store's consumption keys (I9). Shared by pg_unclaimed_sql, the admission
 * statements' tail (admit.c) and the batched admission's (admit_batch.c). */
#define PG_UNCLAIMED_COLUMNS(f, K)                                             \
    PG_KHELD_##K("c.") ", c.kind, c.operation_id::text,\n"                     \
    "       g.issuer IS NOT NULL, g.consumed_at IS NOT NULL, g.consumed_by_operation::text,\n" \
    "       g.revoked_at IS NOT NULL,\n"                                       \
    "       " f "::text IS NOT NULL AND (fm.issuer IS NULL OR fm.revoked_at IS NOT NULL),\n" \
    "       o.operation_id IS NOT NULL"

enum {
    UNCLAIMED_KEY_HELD,       /* token form: the consumption row exists, */
    UNCLAIMED_KIND,           /* its kind */
    UNCLAIMED_HOLDER,         /* and its operation */
    UNCLAIMED_ROW_EXISTS,     /* row form: the grant's row exists, */
    UNCLAIMED_ROW_CONSUMED,   /* consumed, */
    UNCLAIMED_ROW_CONSUMER,   /* by this operation, */
    UNCLAIMED_ROW_REVOKED,    /* or revoked */
    UNCLAIMED_FAMILY_BLOCKED, /* the family's row missing or revoked */
    UNCLAIMED_OP_EXISTS,      /* an operation holds the request's id */
    UNCLAIMED_NCOLS
};

/* ===========================================================================
 * Statements
 * ========================================================================= */

/* A statement the store prepares: its server-side name (docs/plans.md and
 * og_store_explain show it), its text, its parameter count, and which
 * consumption keys it is written for (I9: READABLE or HASHED for the two
 * instances of a statement that names grant_consumptions' key, AS_STORED
 * for one every store runs). Each is a `static const` beside the function
 * that runs it, with its text just above; its address is its identity on
 * a connection (og__pg_conn). */
typedef struct og__pg_stmt {
    const char *name;
    const char *sql;
    int nparams;
    og_consumption_keys keys;
} og__pg_stmt;

/* ===========================================================================
 * The store and its connections
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

typedef struct og__pg_store {
    og__pool *pool;
    char *target;                          /* owned copy of the conninfo */
    const char *values[PG_KW_COUNT + 1];   /* point into this struct */
    int64_t timeout_us;                    /* client deadline per statement */
    char connect_timeout[24];              /* seconds */
    char tcp_user_timeout[24];             /* milliseconds */
    char statement_timeout[32];            /* "Nms", server side */
    bool role_bounds;                      /* the deployment sets the bounds
                                              (ALTER ROLE): only checked */
    char leeway[24], lease[24], window[24]; /* microseconds, admission params */
    char recovery_lease[24]; /* microseconds: a takeover's lease (M17) */
    char fallback[24]; /* microseconds: max grant lifetime + issue-time skew
                          + leeway, the retention of a revocation whose
                          issuance records no expiry (I13) */
    char cleanup_margin[24]; /* microseconds: cleanup's margin (I18) */
    char expiry_margin[24]; /* microseconds: the cleanup margin, past
                               which (after expires_at, no leeway: PP7) an
                               unconsumed payout grant's reservation is
                               released (I25) */
    og_consumption_keys keys; /* I9: AS_STORED until og__pg_read_keys, then
                                 the store's; never changes after */
    /* Group commit (batch_run.c), each on the shared queue
     * (lib/store/batcher.c) with its counters: admissions (admit_batch.c),
     * consume verdicts (consume_batch.c), outcomes (outcome_batch.c),
     * ticket rotations (rotate_batch.c). */
    struct og__pg_batch *admit_batch;
    struct og__pg_batch *consume_batch;
    struct og__pg_batch *outcome_batch;
    struct og__pg_batch *rotate_batch;
} og__pg_store;

/* The statements prepared on one connection: a set of descriptors, keyed by
 * their address, each prepared once per connection on first use (the
 * extended protocol with a named statement skips parse and plan on every
 * call: about 1.75x the simple protocol). Fixed size: PG_STMT_MAX distinct
 * statements (the backend has about fifty, and a store runs the instances
 * of one consumption keys mode only; a full set is a defect, OG_EINTERNAL),
 * found in O(1) through an open-addressed table of PG_STMT_SLOTS slots,
 * which is never more than three quarters full, so a probe always ends. */
#define PG_STMT_MAX 96
#define PG_STMT_SLOT_BITS 7
#define PG_STMT_SLOTS (1 << PG_STMT_SLOT_BITS)
_Static_assert(PG_STMT_MAX * 4 <= PG_STMT_SLOTS * 3,
               "the set is at most three quarters full: one slot stays free");

/* Connections come from og__pool. Each PGconn is used by one thread at a
 * time (the pool guarantees it) and carries this wrapper, which holds the
 * notice-receiver state (I3) and the statements prepared on it. */
typedef struct og__pg_conn {
    PGconn *conn;
    const og__pg_stmt *prepared[PG_STMT_SLOTS]; /* NULL: a free slot */
    int nprepared;
    bool syncrep_cancelled; /* set by the notice receiver (I3) */
    bool broken;            /* discard on release: state unknown */
    /* CLOCK_MONOTONIC: the end of the explicit transaction open on it
     * (txn_begin, conn.c), which bounds each of its statements. */
    int64_t txn_deadline_us;
} og__pg_conn;

/* ---- conn.c: the clock, numbers ----------------------------------------- */

/* CLOCK_MONOTONIC in microseconds. */
int64_t og__pg_mono_us(void);
/* Strict base-10 int64: the whole string, no overflow. 0 or -1. */
int og__pg_parse_i64(const char *s, int64_t *out);
/* v in base 10 into buf (n bytes): a statement's parameter. */
void og__pg_fmt_i64(char *buf, size_t n, int64_t v);

/* ---- conn.c: connections ------------------------------------------------ */

/* A pool connection, marked healthy, and its return: a connection inside a
 * transaction, broken or in a state we could not confirm is closed. */
int og__pg_acquire(og__pg_store *pg, og__pg_conn **out);
void og__pg_release(og__pg_store *pg, og__pg_conn *c);

/* ---- conn.c: statements ------------------------------------------------- */

/* s in the store's consumption keys (I9): readable or hashed, the two
 * instances of one statement. */
const og__pg_stmt *og__pg_keyed(const og__pg_store *pg,
                                const og__pg_stmt *readable,
                                const og__pg_stmt *hashed);
/* Prepares s on c unless it is already, before deadline_us, in the
 * connection's transaction status (idle, or inside an explicit
 * transaction, which it leaves as it found it). 0 or the error. */
int og__pg_prepare(og__pg_store *pg, og__pg_conn *c, const og__pg_stmt *s,
                   int64_t deadline_us);
/* Runs s in its own implicit transaction on the idle connection c, with the
 * store timeout from now (I10, I1). 0 and *rows (the caller clears it),
 * OG__PG_REFUSE with the violated constraint's name in constraint (conlen
 * bytes; only the admission passes one, I4), or the error. */
int og__pg_exec_prepared(og__pg_store *pg, og__pg_conn *c,
                         const og__pg_stmt *s, const char *const *params,
                         PGresult **rows, char *constraint, size_t conlen);
/* The same with the client deadline deadline_us (CLOCK_MONOTONIC) instead
 * of the store timeout from now: a batched admission's, the earliest of its
 * callers' (admit_batch.c, B4). */
int og__pg_exec_prepared_until(og__pg_store *pg, og__pg_conn *c,
                               const og__pg_stmt *s,
                               const char *const *params, PGresult **rows,
                               char *constraint, size_t conlen,
                               int64_t deadline_us);
/* og__pg_exec_prepared for a statement whose failures are never an outcome:
 * a refusal is OG_EINTERNAL (I4). */
int og__pg_run(og__pg_store *pg, og__pg_conn *c, const og__pg_stmt *s,
               const char *const *params, PGresult **rows);
/* The same inside the explicit transaction open on c, before the call's
 * deadline (the transaction's, M28). The caller ends the transaction. */
int og__pg_run_in(og__pg_store *pg, og__pg_conn *c, const og__pg_stmt *s,
                  const char *const *params, PGresult **rows,
                  int64_t deadline_us);
/* One unnamed statement (setup, schema, migrations, planned-per-call
 * reads): the extended protocol with n parameters; expect is the
 * transaction status that confirms it. *rows only when rows is not NULL. */
int og__pg_exec_params(og__pg_store *pg, og__pg_conn *c, const char *sql,
                       int n, const char *const *params,
                       PGTransactionStatusType expect, PGresult **rows);
/* A script of several statements (a migration body): the simple protocol,
 * the only one that accepts more than one statement per string. */
int og__pg_exec_script(og__pg_store *pg, og__pg_conn *c, const char *sql,
                       PGTransactionStatusType expect);
/* A result of exactly `cols` columns and at most `maxrows` rows, or
 * OG_EINTERNAL: a statement this backend wrote returned something else. */
int og__pg_shape(const PGresult *res, int cols, int maxrows);

/* ---- conn.c: rows ------------------------------------------------------- */

/* Column col of row into dst (n bytes); NULL or too long: OG_EINTERNAL. */
int og__pg_get_text(const PGresult *r, int row, int col, char *dst, size_t n);
/* A bigint column; NULL or malformed: OG_EINTERNAL. */
int og__pg_get_i64(const PGresult *r, int row, int col, int64_t *out);
/* A bool column: true only for a non-NULL 't'. */
bool og__pg_get_bool(const PGresult *r, int row, int col);
/* Row `row` of r, for the readers of rows.h. */
og__row og__pg_row(const PGresult *r, int row);
/* The PG_OP_COLUMNS of row starting at column col (OP_*) into *out:
 * og__row_operation, once r is known to have them. */
int og__pg_op_parse(const PGresult *r, int row, int col, og_operation *out);

/* ---- admit.c: what the consume verdict shares with the admission -------- */

/* The read fence (I30, admit.c): ends a call whose answer was read from a
 * key it did not claim; 0, or OG_ESTORE_UNAVAILABLE when the wait for a
 * synchronous standby was cancelled (I3) or the store failed. */
int og__pg_read_fence(og__pg_store *pg, og__pg_conn *c);
/* The read fence as an expression (I30, admit.c), for a statement that
 * reads in its own implicit transaction and folds the fence in: evaluated,
 * it emits a transactional logical message where commits wait for a
 * synchronous standby (NULL elsewhere), so that statement's own commit
 * waits. Type pg_lsn. */
#define PG_READ_FENCE_EXPR                                                     \
    "CASE WHEN current_setting('synchronous_standby_names') <> ''"             \
    " AND current_setting('synchronous_commit')"                               \
    " IN ('on', 'remote_write', 'remote_apply')"                               \
    " THEN pg_logical_emit_message(true, 'oncegate', 'read-fence') END"
/* After a claim that did not happen: what holds req's grant, whether its
 * family blocked the claim and (with_op) the operation row for req's
 * operation id, read by a fresh statement that carries the read fence
 * (I30) in its own commit, in the shape og__classify_unclaimed() /
 * og__classify_consume() read. */
int og__pg_consumption(og__pg_store *pg, og__pg_conn *c,
                            const og__admit_req *req, bool with_op,
                            og__consumption *cons, og_operation *op,
                            bool *have_op);

/* PG_FAMILY_CTE for every family of a batch (I6, I7, B6; the admissions'
 * batch, admit_batch.c, and the consume verdicts', consume_batch.c), whose
 * requests are the CTE req with columns issuer and family: the advisory
 * locks shared in the order of their keys (count() reads them all, and a
 * volatile call is never dropped from a subquery), then the live families'
 * rows FOR SHARE in their order; famn reads fam to its end, so every family
 * lock is held before the first grant row or key is touched.
 * fam locks each family's row by its key in a LATERAL subquery (LIMIT 1:
 * the key is unique), the inner side of a nested loop over the batch's
 * families sorted (a subquery with ORDER BY and DISTINCT is never
 * flattened): every plan probes families_pkey per family and locks in the
 * keys' order (B6, CB6). As a join, the generic plan PostgreSQL keeps for
 * the prepared statement, made on a new store's empty tables, hashed a
 * sequential scan of families on every batch, families or none
 * (docs/performance.md, "VERDICT2"); PG_BATCH_GRANTS_LCK likewise. */
#define PG_BATCH_FAMILY_CTES                                                   \
    "flk AS (\n"                                                               \
    "  SELECT count(*) AS held FROM (\n"                                       \
    "    SELECT pg_advisory_xact_lock_shared(s.k) FROM (\n"                    \
    "      SELECT DISTINCT " PG_FAMILY_KEY("r.issuer", "r.family") " AS k\n"    \
    "      FROM req r WHERE r.family IS NOT NULL ORDER BY 1) s) l),\n"          \
    "fam AS (\n"                                                               \
    "  SELECT f.issuer, f.family FROM (\n"                                     \
    "    SELECT DISTINCT r.issuer, r.family FROM req r\n"                      \
    "    WHERE r.family IS NOT NULL AND (SELECT held FROM flk) >= 0\n"         \
    "    ORDER BY r.issuer, r.family) q\n"                                     \
    "  CROSS JOIN LATERAL (SELECT f.issuer, f.family FROM families f\n"        \
    "    WHERE f.issuer = q.issuer AND f.family = q.family\n"                  \
    "      AND f.revoked_at IS NULL\n"                                         \
    "    LIMIT 1 FOR SHARE OF f) f),\n"                                        \
    "famn AS (SELECT count(*) AS locked FROM fam)"
/* The batch's grants' rows locked FOR NO KEY UPDATE in the order of their
 * keys, after every family lock (famn), row form (B6, CB6): each by its
 * key in a LATERAL subquery, the inner side of a nested loop over the
 * requests sorted, as fam above (the keys are unique in a batch: B2,
 * CB2). */
#define PG_BATCH_GRANTS_LCK                                                    \
    "lck AS (\n"                                                               \
    "  SELECT g.issuer FROM (\n"                                               \
    "    SELECT r.issuer, r.grant_id FROM req r\n"                             \
    "    WHERE (SELECT locked FROM famn) >= 0\n"                               \
    "    ORDER BY r.issuer, r.grant_id) q\n"                                   \
    "  CROSS JOIN LATERAL (SELECT g.issuer FROM grants g\n"                    \
    "    WHERE g.issuer = q.issuer AND g.grant_id = q.grant_id\n"              \
    "    LIMIT 1 FOR NO KEY UPDATE OF g) g)"
/* The batched statements' report (admit_batch.c, consume_batch.c): for
 * request r, its key's row c, its grant's row g and its family's row fm
 * (none: NULLs), as PG_UNCLAIMED_COLUMNS reads them, K the consumption
 * keys (I9). Each read by the request's key in a LATERAL subquery with
 * LIMIT 1 (the keys are unique: the same row, or none), which the planner
 * cannot flatten into a join: every plan, custom or generic, probes the
 * key's index per row whatever the tables' statistics say (FENCE and
 * VERDICT2 in docs/performance.md). */
#define PG_BATCH_REPORT_JOINS(K)                                               \
    "LEFT JOIN LATERAL (SELECT * FROM grant_consumptions c\n"                  \
    "  WHERE " PG_KEQ_##K("c.", "r.issuer", "r.grant_id") " LIMIT 1) c ON true\n" \
    "LEFT JOIN LATERAL (SELECT * FROM grants g\n"                              \
    "  WHERE g.issuer = r.issuer AND g.grant_id = r.grant_id LIMIT 1) g ON true\n" \
    "LEFT JOIN LATERAL (SELECT * FROM families fm\n"                           \
    "  WHERE fm.issuer = r.issuer AND fm.family = r.family LIMIT 1) fm ON true\n"
/* PG_FAMILY_LIVE for row r. */
#define PG_BATCH_FAMILY_LIVE                                                   \
    "(r.family IS NULL OR EXISTS (SELECT 1 FROM fam\n"                         \
    "       WHERE fam.issuer = r.issuer AND fam.family = r.family))"


/* Parses the PG_UNCLAIMED_COLUMNS of row `row` of res starting at column u
 * and (with_op) the operation's columns starting at column o, into the
 * shape og__classify_unclaimed() reads (admit.c). */
int og__pg_unclaimed_parse(const PGresult *res, int row, int u, int o,
                           const og__admit_req *req, bool with_op,
                           og__consumption *cons, og_operation *op,
                           bool *have_op);
/* dst = parts[0..n) joined (a statement longer than one ISO C literal);
 * aborts when cap is too small: the statements are fixed text. */
void og__pg_sql_join(char *dst, size_t cap, const char *const *parts, int n);
/* Joins the one-row admission statements once (pthread_once); before the
 * first store object opens (og__pg_admit_open). */
void og__pg_admit_sql_join(void);
/* The one-row admission (I10-I12, I30) on a connection of its own, with
 * the client deadline deadline_us: a batch of one, and each row of a
 * batch that falls back (admit_batch.c, B3). 0 and *out, or the error. */
int og__pg_admit_one(og__pg_store *pg, const og__admit_req *req,
                     int64_t deadline_us, og_admission *out);

/* ---- admit_batch.c, consume_batch.c, outcome_batch.c, rotate_batch.c -- */

/* Each opens its group commit of pg (batch_run.c) with at most in_flight
 * batches of at most max_rows rows (0, or OG_ENOMEM); pg_close frees it
 * (og__pg_batch_free). */
int og__pg_admit_open(og__pg_store *pg, int in_flight, int max_rows);
int og__pg_consume_open(og__pg_store *pg, int in_flight, int max_rows);
int og__pg_outcome_open(og__pg_store *pg, int in_flight, int max_rows);
int og__pg_rotate_open(og__pg_store *pg, int in_flight, int max_rows);
/* admit_batch.c: whether row may not join rows[0..n) of a batch of
 * requests, each row a struct whose first member is its
 * const og__admit_req *: another form than theirs, or a grant key (and,
 * by_operation, an operation id) one of them holds (B2, CB2). */
bool og__pg_req_conflicts(void *const *rows, int n, const void *row,
                          bool by_operation);
/* grants.c: the one-row consume verdict on a connection of its own, with
 * the client deadline deadline_us. 0 and *out, or the error. */
int og__pg_consume_one(og__pg_store *pg, const og__admit_req *req,
                       int64_t deadline_us, og_consume_result *out);

/* ---- grants.c: a ticket's rotation, alone and its parts (RB3, RB5) ------ */

/* What the state read of a ticket that did not rotate saw. */
typedef struct og__pg_ticket_seen {
    bool found, rotated, family_revoked;
    char issuer[OG_ID_MAX + 1], family[OG_ID_MAX + 1]; /* "" unless found */
} og__pg_ticket_seen;
/* The one-row rotation of row (the statement, then the state read, the
 * reuse's family revocation, the read fence: I14, I30) on a connection of
 * its own, with the client deadline deadline_us: a batch of one, and each
 * row of a batch that falls back. 0 and row's answer, or the error. */
int og__pg_ticket_rotate_one(og__pg_store *pg, og__rotate_row *row,
                             int64_t deadline_us);
/* The state read of the ticket hashed hash on c, in a statement of its
 * own (a snapshot newer than any earlier statement's). 0 or the error. */
int og__pg_ticket_state(og__pg_store *pg, og__pg_conn *c, const char *hash,
                        og__pg_ticket_seen *seen);
/* The answer to a rotation that rotated nothing, from what was seen:
 * NOT_FOUND or FAMILY_REVOKED (*fence set: the caller owes a read fence
 * before answering, I30), or REUSED once the family's revocation ran on c
 * (M15, I14). OG_EINTERNAL for a live, unrotated ticket in a live family:
 * it would have rotated. */
int og__pg_ticket_refused(og__pg_store *pg, og__pg_conn *c,
                          const og__pg_ticket_seen *seen,
                          og_ticket_outcome *out, bool *fence);

/* ---- exec.c ------------------------------------------------------------- */

/* An outcome's write and its event (og_op_record's own statement) inside
 * the explicit transaction open on c (I15, M17, I28): *recorded. source:
 * the event's (late evidence), NULL for none. */
int og__pg_op_record_in(og__pg_store *pg, og__pg_conn *c, const char *id,
                        unsigned expected, int64_t owner_version,
                        const og_op_outcome *o, const char *source,
                        bool *recorded, int64_t deadline_us);

/* ---- retention.c -------------------------------------------------------- */

/* Runs a keyset batch statement s — $1 a margin (µs), $2 the batch, $3 the
 * pass's cursor (µs) — and reads its PG_BATCH_NCOLS bigints (three counts,
 * then the new cursor) into v: cleanup and the payout grants' expiry (I19,
 * I25). */
#define PG_BATCH_NCOLS 4
int og__pg_run_batch(og__pg_store *pg, const og__pg_stmt *s,
                     const char *margin, int batch, int64_t from_us,
                     int64_t v[PG_BATCH_NCOLS]);

/* ===========================================================================
 * The methods (og__postgres_methods, conn.c), each of its slot's type
 * (store_int.h), in the order of the files that define them
 * ========================================================================= */

/* schema.c */
og__store_schema_version_fn og__pg_schema_version;
og__store_session_bounds_fn og__pg_session_bounds;
og__store_migrate_fn og__pg_migrate;
og__store_read_keys_fn og__pg_read_keys;
/* admit.c */
og__store_operation_get_fn og__pg_operation_get;
/* admit_batch.c */
og__store_admit_fn og__pg_admit;
og__store_admit_batch_fn og__pg_admit_batch;
og__store_admit_stats_fn og__pg_admit_stats;
/* grants.c */
og__store_issuance_record_fn og__pg_issuance_record;
og__store_revoke_fn og__pg_revoke;
og__store_family_revoke_fn og__pg_family_revoke;
og__store_ticket_create_fn og__pg_ticket_create;
/* rotate_batch.c: group commit of ticket rotations (RB1-RB6). */
og__store_ticket_rotate_fn og__pg_ticket_rotate;
og__store_rotate_batch_fn og__pg_rotate_batch;
og__store_rotate_stats_fn og__pg_rotate_stats;
/* outcome_batch.c: group commit of outcomes (OB1-OB6): one write through
 * its queue (0 and *hit, or the error). */
int og__pg_outcome_submit(og__pg_store *pg, og__outcome_row *row, bool *hit);
og__store_outcome_batch_fn og__pg_outcome_batch;
og__store_outcome_stats_fn og__pg_outcome_stats;

/* consume_batch.c */
og__store_consume_fn og__pg_consume;
og__store_consume_batch_fn og__pg_consume_batch;
og__store_consume_stats_fn og__pg_consume_stats;
/* exec.c */
og__store_op_may_submit_fn og__pg_op_may_submit;
og__store_op_start_fn og__pg_op_start;
og__store_op_record_fn og__pg_op_record;
og__store_op_takeover_fn og__pg_op_takeover;
og__store_op_resolve_fn og__pg_op_resolve;
og__store_op_list_fn og__pg_op_list;
og__store_op_insert_fn og__pg_op_insert;
og__store_op_history_fn og__pg_op_history;
/* retention.c */
og__store_cleanup_batch_fn og__pg_cleanup_batch;
og__store_archive_batch_fn og__pg_archive_batch;
/* explain.c */
og__store_explain_fn og__pg_explain;
/* redeem.c */
og__store_redemption_put_fn og__pg_redemption_put;
og__store_redemption_get_fn og__pg_redemption_get;
/* payout.c */
og__store_payout_tenant_put_fn og__pg_payout_tenant_put;
og__store_payout_beneficiary_put_fn og__pg_payout_beneficiary_put;
og__store_payout_destination_put_fn og__pg_payout_destination_put;
og__store_payout_destination_token_fn og__pg_payout_destination_token;
og__store_payout_draft_fn og__pg_payout_draft;
og__store_payout_cancel_fn og__pg_payout_cancel;
og__store_payout_edit_fn og__pg_payout_edit;
og__store_payout_get_fn og__pg_payout_get;
og__store_payout_decision_get_fn og__pg_payout_decision_get;
og__store_payout_history_fn og__pg_payout_history;
og__store_payout_facts_fn og__pg_payout_facts;
og__store_payout_policy_release_fn og__pg_payout_policy_release;
og__store_payout_policy_release_set_fn og__pg_payout_policy_release_set;
og__store_payout_reserve_fn og__pg_payout_reserve;
og__store_payout_decision_write_fn og__pg_payout_decision_write;
og__store_payout_settle_read_fn og__pg_payout_settle_read;
og__store_payout_decision_issue_fn og__pg_payout_decision_issue;
/* payout_run.c */
og__store_payout_job_take_fn og__pg_payout_job_take;
og__store_payout_job_ack_fn og__pg_payout_job_ack;
og__store_payout_job_postpone_fn og__pg_payout_job_postpone;
og__store_payout_claim_facts_fn og__pg_payout_claim_facts;
og__store_payout_claim_write_fn og__pg_payout_claim_write;
og__store_payout_resolve_record_fn og__pg_payout_resolve_record;
og__store_payout_resolve_facts_fn og__pg_payout_resolve_facts;
og__store_payout_resolve_write_fn og__pg_payout_resolve_write;
og__store_payout_job_resubmit_fn og__pg_payout_job_resubmit;
og__store_payout_grant_get_fn og__pg_payout_grant_get;
og__store_payout_grant_revoke_fn og__pg_payout_grant_revoke;
og__store_payout_expire_batch_fn og__pg_payout_expire_batch;
og__store_payout_stats_fn og__pg_payout_stats;
/* ---- payout_after.c (schema 11) ---- */
og__store_payout_reconcile_later_fn og__pg_payout_reconcile_later;
og__store_payout_attempt_read_fn og__pg_payout_attempt_read;
og__store_payout_operator_record_fn og__pg_payout_operator_record;
og__store_payout_return_fn og__pg_payout_return;

/* ===========================================================================
 * The statements explain.c plans, declared beside the functions that run
 * them (the readable instance and, where the keys matter, the hashed one)
 * ========================================================================= */
extern const og__pg_stmt og__pg_admit_stmt;            /* admit.c */
extern const og__pg_stmt og__pg_admit_hashed_stmt;
extern const og__pg_stmt og__pg_admit_row_stmt;
extern const og__pg_stmt og__pg_admit_row_hashed_stmt;
extern const og__pg_stmt og__pg_unclaimed_stmt;
extern const og__pg_stmt og__pg_unclaimed_hashed_stmt;
extern const og__pg_stmt og__pg_admit_batch_stmt;      /* admit_batch.c */
extern const og__pg_stmt og__pg_admit_batch_hashed_stmt;
extern const og__pg_stmt og__pg_admit_batch_row_stmt;
extern const og__pg_stmt og__pg_admit_batch_row_hashed_stmt;
extern const og__pg_stmt og__pg_consume_batch_stmt;    /* consume_batch.c */
extern const og__pg_stmt og__pg_consume_batch_hashed_stmt;
extern const og__pg_stmt og__pg_consume_batch_row_stmt;
extern const og__pg_stmt og__pg_consume_batch_row_hashed_stmt;
extern const og__pg_stmt og__pg_rotate_batch_stmt;     /* rotate_batch.c */
extern const og__pg_stmt og__pg_outcome_batch_stmt;    /* outcome_batch.c */
extern const og__pg_stmt og__pg_cleanup_stmt;          /* retention.c */
extern const og__pg_stmt og__pg_payout_reserve_stmt;   /* payout.c */
extern const og__pg_stmt og__pg_payout_job_take_stmt;  /* payout_run.c */
extern const og__pg_stmt og__pg_payout_expire_stmt;    /* payout_run.c */
/* The payout pipeline's statements, per payout and per loop pass
 * (docs/payouts.md section 7 step 4) */
/* payout.c */
extern const og__pg_stmt og__pg_payout_policy_release_locked_stmt;
extern const og__pg_stmt og__pg_payout_facts_stmt;
extern const og__pg_stmt og__pg_payout_facts_locked_stmt;
extern const og__pg_stmt og__pg_payout_day_stmt;
extern const og__pg_stmt og__pg_payout_decision_stmt;
extern const og__pg_stmt og__pg_payout_approve_stmt;
extern const og__pg_stmt og__pg_payout_job_ack_stmt;   /* payout_run.c */
extern const og__pg_stmt og__pg_payout_claim_facts_stmt;
extern const og__pg_stmt og__pg_payout_claim_consumer_stmt;
extern const og__pg_stmt og__pg_payout_claim_stmt;
extern const og__pg_stmt og__pg_payout_resolve_facts_stmt;
extern const og__pg_stmt og__pg_payout_resolve_stmt;
extern const og__pg_stmt og__pg_op_start_stmt;         /* exec.c */
extern const og__pg_stmt og__pg_op_record_stmt;
extern const og__pg_stmt og__pg_op_takeover_stmt;
extern const og__pg_stmt og__pg_op_scan_stmt;
/* payout_after.c */
extern const og__pg_stmt og__pg_payout_reconcile_later_stmt;
extern const og__pg_stmt og__pg_payout_attempt_read_stmt;
extern const og__pg_stmt og__pg_payout_return_stmt;
/* A text[] literal of statuses: room for every status. */
#define PG_STATUSES_MAX 160
/* og_op_scan's six values of og__pg_op_scan_stmt for filter f, in the
 * buffers given (exec.c): 0, or OG_EINTERNAL for a status set store.c
 * refuses. */
int og__pg_op_list_params(const og_op_filter *f,
                          char statuses[PG_STATUSES_MAX], char before[24],
                          char limit[16], const char *params[6]);
/* pg_op_record_sql's nine values (exec.c): version and statuses are the
 * caller's buffers (24 and PG_STATUSES_MAX bytes). 0, or OG_EINTERNAL for
 * an expected set or a status store.c refuses. */
int og__pg_op_record_params(const char *operation_id, unsigned expected,
                            int64_t owner_version, const og_op_outcome *o,
                            const char *source, char *version,
                            char *statuses, const char *params[9]);

#endif
