/*
 * store.h — the store: opening and migrating one, the admission, the
 * ownership protocol of execution, retention, redemption recovery points and
 * the grant lifecycle (issuance, revocation, families, the consume verdict,
 * tickets). lib/store/ checks every input and dispatches to a backend
 * (lib/store/sqlite/, lib/store/postgres/), whose methods keep one
 * contract (lib/store/store_int.h, M1-M36); the payout store is
 * oncegate/payout_store.h.
 *
 * Part of the public API; oncegate/oncegate.h includes it with the rest,
 * and states the conventions every header follows.
 */
#ifndef ONCEGATE_STORE_H
#define ONCEGATE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"
#include "oncegate/grant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Store.
 * ------------------------------------------------------------------------- */

#define OG_DEFAULT_STORE_URL "sqlite:./oncegate.db"

typedef struct og_store_options {
    og_timings timings;
    int pool_size;    /* max connections held by this store object (>=1);
                         concurrent callers beyond it wait for one */
    bool session_bounds_from_role; /* PostgreSQL: false (default) sets
                         statement_timeout, lock_timeout (and on 17+
                         transaction_timeout) to store_timeout on every
                         connection; true leaves them to the deployment
                         (ALTER ROLE ... SET, e.g. behind a pooler that
                         drops session settings) and only
                         og_store_session_bounds() checks them */
    og_consumption_keys consumption_keys; /* og_store_migrate: the mode a
                         store gets when migration 5 runs; og_store_open and
                         og_store_migrate refuse a store recorded otherwise
                         (OG_ESTORE_KEYS). AS_STORED accepts either. */
    int admit_batch_max; /* group commit: the most admissions of this store
                         object one batch holds, 1..OG_ADMIT_BATCH_MAX;
                         concurrent og_admit calls are coalesced into one
                         statement (PostgreSQL) or one transaction
                         (SQLite) of at most this many; 1 admits each
                         alone (PostgreSQL: no queue at all, every
                         caller's statement at once, as many as the pool
                         holds) (docs/design.md, "Group commit") */
    int admit_batches_in_flight; /* PostgreSQL: the most batches of this
                         store object running at once, 1..64; a caller
                         that finds fewer running leads a batch at once,
                         so a lone admission never waits. SQLite runs one
                         (one writer). */
    int outcome_batch_max; /* group commit of outcomes: the most
                         og_op_start / og_op_record writes of this store
                         object one transaction holds (SQLite: savepoints;
                         PostgreSQL: one statement, no two writes of one
                         operation, admit_batches_in_flight batches at
                         once), 1..OG_ADMIT_BATCH_MAX; 1 writes each alone,
                         in a transaction of its own, as before
                         (docs/design.md, "Group commit of outcomes"). */
    int consume_batch_max; /* PostgreSQL: the most consume verdicts
                         (og_consume) of this store object one batch of
                         their own group commit holds, one statement and
                         one commit, 1..OG_ADMIT_BATCH_MAX, with
                         admit_batches_in_flight batches at once; 64 by
                         default (docs/performance.md, "VERDICT2"); 1
                         gives each its one-row statement at once, with
                         no queue. SQLite's verdicts always share the
                         admissions' batches (admit_batch_max). */
    int rotate_batch_max; /* ticket rotations (og_ticket_rotate) of this
                         store object one batch holds, 1..OG_ADMIT_BATCH_MAX:
                         PostgreSQL: one statement and one commit, no two
                         rotations of one ticket, admit_batches_in_flight
                         batches at once; SQLite: savepoints of the one
                         queue of writes. 64 by default; 1 rotates each
                         alone at once, with no queue (docs/design.md,
                         "Ticket rotation in batches"; docs/performance.md,
                         "ROTATE"). */
} og_store_options;

/* The largest og_store_options.admit_batch_max. */
#define OG_ADMIT_BATCH_MAX 256

/* Fills *o with defaults: og_timings_default(), a pool of 16,
 * OG_KEYS_AS_STORED, batches of at most 64 admissions and 2 batches in
 * flight, batches of at most 64 consume verdicts on PostgreSQL
 * (consume_batch_max), batches of at most 64 outcome writes, and
 * batches of at most 64 ticket rotations (rotate_batch_max). */
void og_store_options_default(og_store_options *o);

/* Opens a store from a URL:
 *   sqlite:PATH                 embedded SQLite (the default)
 *   postgres://..., postgresql://...  a libpq URI, including multi-host
 *                               URIs with target_session_attrs=read-write
 *   "host=... dbname=..."       a libpq key=value connection string
 * opts may be NULL for defaults. Connects once and checks that the schema
 * version equals OG_SCHEMA_VERSION (OG_ESCHEMA otherwise: run migrations),
 * then reads the store's consumption keys, which every statement of this
 * store object follows (OG_ESTORE_KEYS when opts asks for the other mode).
 * On success *out owns the store; free it with og_store_free().
 * Errors: OG_EBAD_URL, OG_ETIMINGS, OG_ESCHEMA, OG_ESTORE_KEYS,
 * OG_ESTORE_UNAVAILABLE, OG_ENOMEM, OG_EINTERNAL. */
OG_MUST_CHECK int og_store_open(const char *url, const og_store_options *opts,
                                og_store **out);

/* Closes every connection and frees the store. NULL is a no-op. */
void og_store_free(og_store *s);

/* The timings s was opened with (checked: og_timings_check), owned by s;
 * NULL for NULL. */
const og_timings *og_store_timings(const og_store *s);

/* The backend's name: "sqlite" or "postgres". */
const char *og_store_backend(const og_store *s);

/* The consumption keys the store records (read by og_store_open):
 * OG_KEYS_READABLE or OG_KEYS_HASHED. */
og_consumption_keys og_store_consumption_keys(const og_store *s);

/* Checks that the store answers and its schema is the one this build needs:
 * 0, OG_ESCHEMA, OG_ESTORE_UNAVAILABLE or OG_EINTERNAL. For readiness
 * probes; one round trip. */
OG_MUST_CHECK int og_store_check(og_store *s);

/* The server-side bounds on an admission, as the store's own admission
 * connections carry them (docs/design.md, "The server-side bound on an
 * admission, and what it does not cover"). */
typedef struct og_session_bounds {
    bool applicable;                /* false: the backend has no such
                                       settings (SQLite: its bound is the
                                       client's busy deadline) */
    int64_t statement_timeout_ms;   /* 0 = none */
    int64_t lock_timeout_ms;        /* 0 = none */
    bool has_transaction_timeout;   /* the server knows the setting (17+) */
    int64_t transaction_timeout_ms; /* 0 = none */
    int server_version_num;         /* e.g. 150018 */
    bool sync_commit_waits;         /* a commit waits for a synchronous
                                       standby (synchronous_standby_names
                                       set, synchronous_commit on,
                                       remote_write or remote_apply): a wait
                                       no server setting bounds */
} og_session_bounds;

/* Reads the bounds from one of the store's own pooled connections, so what
 * is checked is what admissions run with. 0 and *out, or
 * OG_ESTORE_UNAVAILABLE / OG_EINTERNAL. */
OG_MUST_CHECK int og_store_session_bounds(og_store *s,
                                          og_session_bounds *out);

/* The schema version this build needs: 4 operation archive (retention), 5
 * consumption keys (hashed keys), 6 redemption recovery points, 7 operation
 * kinds, idempotency keys and client references, and the statuses Started,
 * NotStarted and NotApplied (payout attempts), 8 the payout decision side
 * (oncegate/payout_store.h), 9 the claim's history entry, 10 the
 * resolution's release causes and history entry, 11 a payout attempt's
 * reconciliation (the takeover's instant, lookups and their backoff, when
 * "not found" may be final, late evidence and returns), 12 settlement time
 * zones and the payout policy's current release, 13 an index of the
 * archive's payout attempts by grant (a return's read), 14 approvals that
 * settle acknowledgments and escalations and drafts' edits, 15 fewer index
 * entries per admission (the backlog index without the statuses in
 * flight; SQLite: one recovery index). */
#define OG_SCHEMA_VERSION 15

/* Applies every migration the store at url lacks, each in its own
 * transaction, serialized against concurrent migrators. On success writes the
 * version found before and after to *from / *to (either may be NULL).
 * Migration 5 records opts->consumption_keys (AS_STORED: READABLE); a store
 * that reaches 5 hashed has its existing consumption records rewritten
 * under their hashed keys in the same transaction. Migration 7 reads every
 * existing operation as a credit whose idempotency key and client
 * reference are its id (PostgreSQL: without rewriting operations; it then
 * validates the widened constraints in a transaction of their own, which
 * does not block writes — docs/design.md "Schema"). Errors as og_store_open,
 * plus OG_ESCHEMA when the store is newer than this build and
 * OG_ESTORE_KEYS when it records other consumption keys than
 * opts->consumption_keys (nothing is changed then: a store's keys are never
 * converted once recorded). */
OG_MUST_CHECK int og_store_migrate(const char *url,
                                   const og_store_options *opts, int *from,
                                   int *to);

/* ---------------------------------------------------------------------------
 * Admission.
 * ------------------------------------------------------------------------- */

/* Admits grant for intent with ONE atomic write: claims (issuer, grant_id)
 * and records the operation (kind credit, its idempotency key and client
 * reference the operation id, status Admitted, owner version 1, lease_until
 * and submit_by from the store's clock) together, checking the deadline
 * expires_at + leeway against the store's clock in the same statement.
 *
 * Returns 0 and fills *result with exactly one outcome:
 *   ADMITTED          this call claimed the grant; result->operation is the
 *                     new record;
 *   ALREADY_ADMITTED  this operation id claimed it earlier with the same
 *                     caller, account, amount and currency, as a credit;
 *                     the stored record comes back (the archived one when
 *                     the operation was archived:
 *                     og_store_archive_operations);
 *   REFUSED           anything else (result->refusal says why, for logs).
 * Errors (nothing in *result): OG_E{ISSUER,GRANT_ID,OPERATION_ID,CALLER,
 * ACCOUNT,AMOUNT,CURRENCY,EXPIRES_AT} for bad input, checked before the store;
 * OG_ESTORE_UNAVAILABLE when the store is unreachable, timed out, cancelled
 * the statement or could not confirm the commit — the admission may or may
 * not have happened, a retry with the same operation id finds out, and
 * og_admit never retries by itself; OG_EINTERNAL for any other store failure.
 * Thread-safe: any number of threads may call it on one store. */
OG_MUST_CHECK int og_admit(og_store *s, const og_grant *grant,
                           const og_intent *intent, og_admission *result);

/* What the group commit of one store object did since it opened: batches
 * run (a lone admission is a batch of one), the admissions they held, and
 * the rounds that fell back to one statement per admission (a unique
 * violation on operations aborted the batch's statement). rows / batches
 * is the mean batch size. */
typedef struct og_admit_stats {
    uint64_t batches;
    uint64_t rows;
    uint64_t fallbacks;
} og_admit_stats;

/* Fills *out (zeros for NULL s). */
void og_store_admit_stats(og_store *s, og_admit_stats *out);
/* The same counters for the consume verdicts' group commit (og_consume;
 * PostgreSQL: consume_batch_max, a lone verdict a batch of one; SQLite:
 * the admissions' batches that held verdicts, and the verdicts in them).
 * Fills *out (zeros for NULL s). */
void og_store_consume_stats(og_store *s, og_admit_stats *out);
/* The same counters for ticket rotations (og_ticket_rotate;
 * rotate_batch_max): batches, the rotations they held, fallbacks
 * (PostgreSQL: a batch whose statement aborted and whose rotations ran one
 * by one; always 0 on SQLite). Zeros for NULL s. */
void og_store_rotate_stats(og_store *s, og_admit_stats *out);

/* The same counters for the group commit of outcomes (og_op_start,
 * og_op_record; og_store_options.outcome_batch_max): batches, the writes
 * they held, fallbacks (always 0 on SQLite, whose rows are savepoints; on
 * PostgreSQL a batch whose statement aborted and whose writes ran one by
 * one). Zeros for NULL s. */
void og_store_outcome_stats(og_store *s, og_admit_stats *out);

/* Reads the operation with this id. Returns 1 and fills *out when it exists,
 * 0 when it does not, or a negative error (OG_EOPERATION_ID,
 * OG_ESTORE_UNAVAILABLE, OG_EINTERNAL). This is the store's view: the caller
 * authorizes who may see it. */
OG_MUST_CHECK int og_operation_get(og_store *s, const char *operation_id,
                                   og_operation *out);

/* ---------------------------------------------------------------------------
 * Execution: one owner at a time moves an admitted operation forward
 * (docs/design.md, "Execution: one owner at a time").
 * The operation's creator owns it at owner version 1 until lease_until;
 * recovery (a payout's sweeper) takes it over with owner_version + 1 and a
 * recovery lease. Every write below is ONE conditional write on (status,
 * owner_version), recorded with an event in the operation's history in the
 * same transaction, so a stale writer changes nothing and a terminal status
 * is never overwritten. The same protocol serves both kinds: credits
 * (admitted by og_admit) and payout attempts (docs/payouts.md).
 *
 * Transitions (og_op_start / og_op_record / og_op_takeover / og_op_resolve):
 *   Admitted            -> Started                              (og_op_start,
 *                                                                payouts only)
 *   Admitted            -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Admitted            -> NotStarted   (payouts only, and only at an owner
 *                                        version above 1: after a takeover
 *                                        fenced the claimer, P2)
 *   Started             -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Unknown             -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Unknown             -> NotApplied
 *   NeedsReconciliation -> Succeeded | Failed | NotApplied   (operators only)
 *   Succeeded, Failed, NotStarted, NotApplied -> (terminal)
 * A takeover keeps the status (Admitted, Started or Unknown) and raises the
 * owner version. Any other change is OG_ETRANSITION, reported before the
 * store is asked.
 *
 * Why a payout is Started before it is sent (P1-P3 in docs/payouts.md): a
 * payout attempt found Admitted after a takeover provably sent nothing —
 * its owner could only send after og_op_start confirmed, and the takeover's
 * new owner version fences that write — so it may end NotStarted. A
 * Started one may have been sent, or may still be: it ends Unknown at best,
 * never NotStarted. The credit path never writes Started, NotStarted or
 * NotApplied: it asks og_op_may_submit before each create.
 * ------------------------------------------------------------------------- */

/* A status as a bit, for sets of expected statuses. */
#define OG_OP_BIT(st) (1u << (st))

/* May the owner at owner_version send a create request now? Reads, with the
 * store's clock: owner_version equal AND now < least(lease_until,
 * submit_by) AND, for a credit, status Admitted or Unknown; for a payout,
 * status Started (P1: never before og_op_start, never after an ambiguous
 * outcome). Returns 0 and *may, or an input/store error. A store error
 * means "no": send nothing. */
OG_MUST_CHECK int og_op_may_submit(og_store *s, const char *operation_id,
                                   int64_t owner_version, bool *may);

/* Marks a payout attempt Started before its first send (P1, P2): ONE
 * conditional write, Admitted -> Started, where the operation is a payout
 * AND owner_version = owner_version AND lease_until > now AND submit_by >
 * now (the store's clock, read once after the row lock), appending a
 * "started" event by actor in the same statement (PostgreSQL) or
 * transaction (SQLite). Returns 0 and *started: true when this call made
 * the change; false when nothing changed (not Admitted any more, another
 * owner version — a takeover fenced this owner —, the lease or submit_by
 * passed, or a credit, which is never started).
 *
 * The caller MUST NOT send unless this returned 0 with *started true. An
 * error (OG_ESTORE_UNAVAILABLE: timed out, connection lost, commit not
 * confirmed) means the write may or may not have committed: do not send
 * either; the sweeper reads the durable state, and a Started attempt whose
 * lease lapsed becomes Unknown, never NotStarted (P3). Input errors
 * (OG_EOPERATION_ID, OG_EACTOR, OG_EINVAL for an owner version below 1)
 * are reported before any I/O. */
OG_MUST_CHECK int og_op_start(og_store *s, const char *operation_id,
                              int64_t owner_version, const char *actor,
                              bool *started);

/* An outcome to record. */
typedef struct og_op_outcome {
    og_op_status status;            /* the new status */
    const char *reason;             /* reason code (provider's, or the
                                       classification's); NULL: none */
    const char *provider_reference; /* the provider's id; NULL: none */
    const char *actor;              /* who records: "handler", "recovery",
                                       or an operator's principal id */
    const char *evidence;           /* what the outcome rests on (schema
                                       11), kept in the outcome event's
                                       evidence; NULL: none. 1..
                                       OG_EVIDENCE_MAX bytes of UTF-8
                                       without control characters but
                                       newline and tab (OG_EEVIDENCE) */
} og_op_outcome;

/* Records o for the operation IF its status is in expected (a set of
 * OG_OP_BIT(...) of ADMITTED, STARTED and UNKNOWN) and its owner_version
 * equals expected_owner_version; appends an "outcome" event. ONE
 * conditional write. The table above decides what may be recorded: from
 * any expected set Succeeded, Failed, Unknown or NeedsReconciliation;
 * NotStarted only with expected exactly ADMITTED and expected_owner_version
 * above 1 — and the store records it only for a payout still at that
 * version (P2); NotApplied only with expected exactly UNKNOWN — and the
 * store records it (schema 11, docs/payouts.md P6) only for a payout
 * attempt whose final_absence_after is set and lies at or before both the
 * instant of the takeover that began this lookup (taken_at) and the
 * store's clock now, in the same conditional statement; a credit never
 * reaches NotApplied this way. o->evidence goes into the outcome event
 * (OG_EEVIDENCE when it breaks og_op_resolve's evidence rules). Returns 0
 * and *recorded (false: nothing changed — another owner moved on, the
 * status was not expected, or the store refused NotStarted), or an error
 * (input errors; OG_ETRANSITION for a transition the table forbids, before
 * any I/O; OG_ESTORE_UNAVAILABLE: may or may not have happened). */
OG_MUST_CHECK int og_op_record(og_store *s, const char *operation_id,
                               unsigned expected, int64_t expected_owner_version,
                               const og_op_outcome *o, bool *recorded);

/* Takes an operation over for recovery IF it is Admitted, Started or
 * Unknown, its lease has ended (store clock) and its owner_version equals
 * expected_owner_version: owner_version + 1, lease_until = now + the
 * store's recovery_lease, taken_at = now (schema 11: the instant a
 * reconciler's lookup begins at, P6), the status unchanged; appends a
 * "takeover" event.
 * ONE conditional write. Returns 0 and *taken; when taken, *out is the
 * record after the takeover (its owner_version is the one every later
 * write must expect, and the one that fences the previous owner's
 * og_op_start and og_op_record). */
OG_MUST_CHECK int og_op_takeover(og_store *s, const char *operation_id,
                                 int64_t expected_owner_version,
                                 const char *actor, og_operation *out,
                                 bool *taken);

/* Resolves a NeedsReconciliation operation by hand: to Succeeded, Failed or
 * NotApplied (OG_ETRANSITION otherwise), owner_version + 1 (fencing any
 * late writer), with the operator's id, a reason and evidence recorded in a
 * "resolved" event. The grant stays spent. Returns 0 and *resolved (false:
 * not NeedsReconciliation any more). It moves the operation only: a payout
 * attempt's payout and reservation follow with og_payout_operator_resolve
 * (oncegate/payout_store.h), which is the call for a payout attempt. */
OG_MUST_CHECK int og_op_resolve(og_store *s, const char *operation_id,
                                og_op_status to, const char *operator_id,
                                const char *reason, const char *evidence,
                                const char *provider_reference,
                                bool *resolved);

/* Which operations to list. */
typedef struct og_op_filter {
    unsigned statuses;       /* set of OG_OP_BIT(...); 0: all */
    bool lease_expired;      /* only those whose lease_until < store now */
    int64_t created_before_us; /* 0: no bound */
    int limit;               /* 1..1000 */
    unsigned kinds;          /* set of OG_OP_KIND_BIT(...); 0: all */
} og_op_filter;

typedef struct og_op_list {
    og_operation *v;
    size_t n;
} og_op_list;

/* Lists operations matching f, oldest first (recovery's scan, operators'
 * backlog). Returns 0 and *out (free with og_op_list_free), or an error. */
OG_MUST_CHECK int og_op_scan(og_store *s, const og_op_filter *f,
                             og_op_list *out);
void og_op_list_free(og_op_list *l);

/* One entry of an operation's history. */
typedef struct og_op_event {
    int64_t seq;                      /* increasing per store */
    int64_t at_us;                    /* store clock */
    char kind[16];                    /* admitted | started | outcome |
                                         takeover | resolved | lookup */
    og_op_status from_status, to_status;
    int64_t owner_version;            /* the version after the event */
    char reason[OG_REASON_MAX + 1];
    char provider_reference[OG_ID_MAX + 1];
    char actor[OG_ID_MAX + 1];
    char evidence[OG_EVIDENCE_MAX + 1];
    char source[16];                  /* an outcome taken from late
                                         evidence (og_payout_evidence):
                                         "late-response" | "notification";
                                         "" otherwise (schema 11) */
} og_op_event;

typedef struct og_op_events {
    og_op_event *v;
    size_t n;
} og_op_events;

/* The history of one operation, oldest first. The first event, kind
 * "admitted", is read from the operation record itself (admission writes no
 * second row: it stays ONE insert); the others are stored by the writes
 * above. 0 and *out (free with og_op_events_free), or an error (OG_ENOMEM
 * also for more than 4,096 stored events, far beyond what the protocol
 * writes for one operation). */
OG_MUST_CHECK int og_op_history(og_store *s, const char *operation_id,
                                og_op_events *out);
void og_op_events_free(og_op_events *e);

/* ---------------------------------------------------------------------------
 * Retention (docs/design.md, "Retention: refusal records and operation
 * records"). Two questions, two jobs:
 *  - refusal retention: how long a consumption row must exist to keep
 *    refusing its grant. A row outlives every admission that could still
 *    commit: it may go only once retain_until + cleanup_margin has passed on
 *    the store's clock (T9). og_store_cleanup() deletes such rows and
 *    nothing else.
 *  - audit retention: how long operation records and their history must
 *    exist, for recovery, reconciliation and audit. Much longer, and on its
 *    own schedule: og_store_archive_operations() moves (or deletes) finished
 *    operations only, never one that recovery may still need.
 * Both work in bounded batches, each batch its own short transaction, so
 * admissions are never held behind a long delete.
 * ------------------------------------------------------------------------- */

/* Bounds of the batch arguments below. */
#define OG_RETENTION_BATCH_MAX 100000
#define OG_RETENTION_BATCHES_MAX 1000000

/* What one og_store_cleanup() call deleted. */
typedef struct og_cleanup_stats {
    int64_t admissions;  /* consumption rows deleted, by kind */
    int64_t revocations;
    int64_t consumes;
    int batches;         /* delete statements run (each its own
                            transaction), the last one included */
} og_cleanup_stats;

/* Deletes grant_consumptions rows (admissions, revocations and consumes
 * alike) whose retain_until + the store's cleanup_margin lies before the
 * store's clock at the statement, at most batch (1..OG_RETENTION_BATCH_MAX)
 * rows per statement, oldest retain_until first, until a statement deletes
 * fewer than batch or max_batches (1..OG_RETENTION_BATCHES_MAX) statements
 * have run. Never touches operations, their history, grant rows (row
 * form), families, tickets or the issuance log. Returns 0 and *out, or an
 * error (OG_EINVAL, OG_ESTORE_UNAVAILABLE, OG_EINTERNAL); batches committed
 * before an error stay committed (each is complete on its own), and the
 * next call carries on. Safe to run from any number of processes at once. */
OG_MUST_CHECK int og_store_cleanup(og_store *s, int batch, int max_batches,
                                   og_cleanup_stats *out);

/* The query plans the store's engine picks, on its tables as they are now
 * and in its consumption-keys mode, for the admission statements (token and
 * row form, and the follow-up read of a claim that did not happen), for
 * one cleanup batch of batch (1..OG_RETENTION_BATCH_MAX) rows, and for the
 * payout pipeline's statements that run per payout or per loop pass
 * (oncegate/payout_store.h; docs/payouts.md section 7 step 4): the
 * decision's and the context read's, the claim's, og_op_start, the job's
 * take and ack, the resolution's, the sweeper's and the reconciler's
 * og_op_scan and takeover, og_payout_reconcile_later, og_payout_evidence's
 * read, og_payout_return_record and the expiry batch, as Markdown:
 * each statement's text exactly as the store prepares it, the values it is
 * planned with, then the plan. PostgreSQL: EXPLAIN EXECUTE of the store's
 * own prepared statements, the custom plan and the generic plan PostgreSQL
 * may keep after five executions (og_op_scan, which runs unnamed: its
 * custom plan only); SQLite: EXPLAIN QUERY PLAN of each statement.
 * Executes none of them (no ANALYZE): nothing is claimed or deleted.
 * Returns 0 and *text (malloc'd; the caller frees it), or OG_EINVAL,
 * OG_ENOMEM, OG_ESTORE_UNAVAILABLE, OG_EINTERNAL. */
OG_MUST_CHECK int og_store_explain(og_store *s, int batch, char **text);

/* What og_store_archive_operations() does with a finished operation. */
typedef enum og_archive_mode {
    OG_ARCHIVE_MOVE = 0,   /* into operations_archive and
                              operation_events_archive (same columns plus
                              archived_at, store clock) */
    OG_ARCHIVE_DELETE = 1, /* delete it and its history outright */
} og_archive_mode;

typedef struct og_archive_stats {
    int64_t operations;  /* operations moved or deleted */
    int64_t events;      /* their history entries moved or deleted */
    int batches;         /* statements (transactions) run */
} og_archive_stats;

/* Moves or deletes, per mode, terminal operations (Succeeded, Failed,
 * NotStarted, NotApplied) whose last status change (updated_at) lies more
 * than older_than_us (0 .. 9999 years) before the store's clock, with their
 * history, at most batch
 * operations per transaction, until a transaction takes fewer than batch or
 * max_batches have run (bounds as og_store_cleanup). Admitted, Started,
 * Unknown and NeedsReconciliation operations are never touched: recovery
 * and operators need them. An archived operation is still found by a same-operation retry
 * (ALREADY_ADMITTED with the archived record) and still blocks its id, but
 * og_operation_get() and og_op_history() no longer see it. The library
 * does not bound older_than_us from below; a deployment keeps operations at
 * least as long as their grants' refusal records (`oncegate serve` refuses
 * an audit retention shorter than max_grant_lifetime + issue_time_skew +
 * admission_leeway + cleanup_margin). Returns 0 and *out, or an error as
 * og_store_cleanup (committed batches stay). */
OG_MUST_CHECK int og_store_archive_operations(og_store *s,
                                              int64_t older_than_us,
                                              og_archive_mode mode, int batch,
                                              int max_batches,
                                              og_archive_stats *out);

/* ---------------------------------------------------------------------------
 * Redemption recovery points (schema 6): the persisted result of redeeming
 * an external single-use token (docs/design.md, "Redeeming an external
 * single-use token"), keyed by the caller's idempotency key. The store
 * keeps the result sealed — it never sees the plaintext, the key that opens
 * it or the token itself (only its SHA-256); sealing is og_redeem's
 * business (oncegate/redeem.h). Keys are scoped to the caller: (caller,
 * idempotency_key) is the primary key, so a principal can neither read nor
 * block another principal's key. The limits and og_redemption_found are
 * oncegate/core.h's.
 * ------------------------------------------------------------------------- */

/* A recovery point to write. Every pointer is borrowed. */
typedef struct og_redemption_record {
    const char *caller;           /* the authenticated principal */
    const char *idempotency_key;  /* og_id_valid() */
    const char *code_hash;        /* 64 lower-case hex: SHA-256 of the token */
    const unsigned char *nonce;   /* OG_REDEMPTION_NONCE_LEN bytes */
    const unsigned char *sealed;  /* the sealed result with its tag */
    size_t sealed_len;            /* 17 .. OG_REDEMPTION_SEALED_MAX */
} og_redemption_record;

/* Writes r with ONE conditional insert: the first writer of (caller,
 * idempotency_key) wins and a later one changes nothing — a point is never
 * overwritten. Returns 0 and *inserted (false: a point existed already;
 * read it with og_redemption_get), or an error: OG_ECALLER,
 * OG_EIDEMPOTENCY_KEY, OG_ECODE_HASH, OG_ESEALED, OG_EINVAL for bad input
 * (nothing written); OG_ESTORE_UNAVAILABLE when the write may or may not
 * have happened; OG_EINTERNAL. */
OG_MUST_CHECK int og_redemption_put(og_store *s, const og_redemption_record *r,
                                    bool *inserted);

/* A recovery point as read. sealed is malloc'd: free it with
 * og_redemption_point_clear. */
typedef struct og_redemption_point {
    char code_hash[OG_CODE_HASH_LEN + 1];
    unsigned char nonce[OG_REDEMPTION_NONCE_LEN];
    unsigned char *sealed;
    size_t sealed_len;
    int64_t created_at_us;        /* store clock */
} og_redemption_point;

/* Reads the point of (caller, idempotency_key) and, when there is none and
 * code_hash is non-NULL, whether a point of another key holds code_hash —
 * in ONE read, so the two answers come from one state. Returns 0 and
 * *found (*out filled only for OG_REDEMPTION_OWN), or an error: input
 * errors as og_redemption_put; OG_ESTORE_UNAVAILABLE means "not known",
 * NEVER "absent"; OG_EINTERNAL; OG_ENOMEM. */
OG_MUST_CHECK int og_redemption_get(og_store *s, const char *caller,
                                    const char *idempotency_key,
                                    const char *code_hash,
                                    og_redemption_found *found,
                                    og_redemption_point *out);

/* Wipes and frees p's sealed bytes and zeroes *p. NULL is a no-op. */
void og_redemption_point_clear(og_redemption_point *p);

/* ---------------------------------------------------------------------------
 * Issuance, revocation, families, the consume verdict, tickets.
 * Each is ONE conditional write (one statement in PostgreSQL, one
 * transaction in SQLite) that the store orders against the others: a
 * revocation and an admission of one grant contend for the same key or row;
 * a family's revocation and the admission or issuance of its grants contend
 * for the family's row.
 * ------------------------------------------------------------------------- */

/* An issuance-log entry: the proof that a grant was issued and its trusted
 * expiry, which revocation needs. */
typedef struct og_issuance {
    const char *issuer;
    const char *grant_id;
    const char *family;       /* NULL: none */
    const char *subject;      /* the one principal allowed to present it */
    const char *action;       /* the operation name */
    const char *params_digest;/* 64 lower-case hex: SHA-256 of the bound
                                 parameters (og_params_digest) */
    int64_t issued_at_us;
    int64_t expires_at_us;    /* 0: the issuer records no expiry (revocation
                                 then uses the fallback retention) */
    og_grant_form form;       /* OG_FORM_ROW also creates the grant's row */
} og_issuance;

typedef enum og_issue_outcome {
    OG_ISSUE_RECORDED = 0,
    OG_ISSUE_FAMILY_REVOKED, /* refused: ordered after the family's revocation */
    OG_ISSUE_DUPLICATE_ID,   /* refused: (issuer, grant_id) was issued before */
} og_issue_outcome;

/* Records an issued grant in the issuance log; creates its family's row on
 * first use. Returns 0 and *out, or an input/store error. */
OG_MUST_CHECK int og_issuance_record(og_store *s, const og_issuance *iss,
                                     og_issue_outcome *out);

/* Who may revoke an issuer's grants, and the fallback retention inputs. */
typedef struct og_revoke_policy {
    const char *const *revokers; /* principals allowed to revoke */
    size_t n_revokers;
} og_revoke_policy;

typedef struct og_revocation {
    const char *issuer;
    const char *grant_id;
    const char *revoker;          /* the authenticated principal */
    int64_t trusted_expires_at_us;/* from a VERIFIED token; 0: prove issuance
                                     from the issuance log instead */
    og_grant_form form;
} og_revocation;

typedef enum og_revoke_outcome {
    OG_REVOKE_REVOKED = 0,
    OG_REVOKE_ALREADY_USED_OR_REVOKED, /* changes nothing; an operation
                                          admitted earlier stays reachable */
    OG_REVOKE_NOT_ISSUED,              /* no proof of issuance: refused */
    OG_REVOKE_NOT_PERMITTED,           /* revoker not in the policy */
} og_revoke_outcome;

/* Revokes one grant. Token form: claims the grant's key with no operation,
 * retained until the trusted expiry + leeway (from the verified token or the
 * issuance log), or else clock_timestamp() + max lifetime + issue skew +
 * leeway. Row form: updates the grant's row. Returns 0 and *out, or an
 * input/store error. */
OG_MUST_CHECK int og_revoke(og_store *s, const og_revoke_policy *policy,
                            const og_revocation *r, og_revoke_outcome *out);

/* A list of grant ids returned by the store (at most 2^20 of them: the
 * library builds no longer one, OG_ENOMEM); free with og_strv_free. */
typedef struct og_strv {
    char **v;
    size_t n;
} og_strv;
void og_strv_free(og_strv *sv);

/* Revokes a family: marks it revoked and revokes every live grant issued
 * into it (both forms) in ONE statement; admissions, consumes and issuance
 * of its grants are ordered against it by the family's row. Returns 0 and
 * *outcome: REVOKED with *revoked listing the grants this call revoked
 * (empty when the family was already revoked or had none; a family never
 * seen is created revoked, so nothing can be issued into it), or
 * NOT_PERMITTED (nothing changed, *revoked empty). Or an input/store error.
 * Free *revoked with og_strv_free. */
OG_MUST_CHECK int og_family_revoke(og_store *s, const og_revoke_policy *policy,
                                   const char *issuer, const char *family,
                                   const char *revoker,
                                   og_revoke_outcome *outcome,
                                   og_strv *revoked);

/* The digest an issuance records for the bound parameters: SHA-256 over
 * the length-prefixed account, canonical amount and currency, as 64
 * lower-case hex characters into out. Returns 0 or an input error. */
OG_MUST_CHECK int og_params_digest(const char *account, const char *amount,
                                   const char *currency, char out[65]);

/* The consume verdict (docs/design.md, "The grant lifecycle") for
 * enforcement points that run the effect themselves: ONE conditional
 * write. consumed=true means this call spent the grant; false is a denial,
 * without exception. */
typedef struct og_consume_result {
    bool consumed;
    og_refusal refusal;           /* for logs, when !consumed */
    char family[OG_ID_MAX + 1];   /* the grant's family ("" if none) */
} og_consume_result;

OG_MUST_CHECK int og_consume(og_store *s, const og_grant *grant,
                             og_consume_result *out);

/* Tickets (docs/design.md, "The grant lifecycle"): a held approval
 * request, bound to a family, stored hashed. The ticket text is a secret:
 * 256 random bits, base64url. */
#define OG_TICKET_LEN 43

typedef enum og_ticket_outcome {
    OG_TICKET_ISSUED = 0,        /* create: a new ticket; rotate: rotated */
    OG_TICKET_NOT_FOUND,         /* unknown ticket: refused */
    OG_TICKET_REUSED,            /* already rotated: refused, family revoked */
    OG_TICKET_FAMILY_REVOKED,    /* the family is revoked: refused */
} og_ticket_outcome;

typedef struct og_ticket_result {
    og_ticket_outcome outcome;
    char ticket[OG_TICKET_LEN + 1];  /* the new ticket when ISSUED */
    char issuer[OG_ID_MAX + 1];
    char family[OG_ID_MAX + 1];
} og_ticket_result;

/* Creates a ticket in a live family. Returns 0 and *out, or an error. */
OG_MUST_CHECK int og_ticket_create(og_store *s, const char *issuer,
                                   const char *family, og_ticket_result *out);

/* Presents a ticket: in ONE statement the old ticket is marked rotated and a
 * new one is created in its family; a concurrent replay gets NOT_FOUND or
 * REUSED. Presenting an already-rotated ticket is reuse: refused, and the
 * family is revoked (as OAuth refresh-token rotation does). */
OG_MUST_CHECK int og_ticket_rotate(og_store *s, const char *ticket,
                                   og_ticket_result *out);

/* Issues a grant: signs claims and records the issuance (the proof of
 * issuance and the trusted expiry revocation needs) in the store, in the
 * issuer's form (OG_FORM_ROW also creates the grant's row). Returns 0 and
 * *out; *token (malloc'd, the caller frees it) only when *out is
 * OG_ISSUE_RECORDED, else NULL — a grant into a revoked family is refused,
 * ordered against the family's revocation by the store. Errors as
 * og_grant_token_sign and og_issuance_record. */
OG_MUST_CHECK int og_grant_issue(og_store *s, const og_signer *signer,
                                 const og_grant_claims *claims,
                                 og_grant_form form, char **token,
                                 og_issue_outcome *out);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_STORE_H */
