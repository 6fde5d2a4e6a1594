/*
 * store_int.h — the store layer's private interface: what lib/store's files
 * share with each other, and the method table every backend implements,
 * with its contract (M1-M36, "Backends, and the method contract" below).
 * Not API.
 *
 *   store.c       opening, migrating and checking a store; the admission;
 *                 og_store_explain's dispatch
 *   grants.c      issuance, revocation, families, consume, tickets
 *   exec.c        the ownership protocol of execution
 *   retention.c   cleanup (refusal records) and archiving (operations)
 *   redeem.c      redemption recovery points
 *   payout.c, payout_run.c   the payout store's decision and run sides,
 *                 and its orchestrations (the context read, the decision,
 *                 the claim, the resolution): one transaction each, the
 *                 backend's steps and the pure plan between them
 *   payout_after.c after the send (schema 11): the reconciler's backoff,
 *                 late evidence and an operator's resolution (the
 *                 resolution's steps after their own record step), returns
 *   payout_plan.c the pure pieces both backends share: what the facts they
 *                 read mean, what a decision, a claim or a resolution
 *                 writes, and what a write that wrote nothing reports
 *   rows.c, rows.h  the rows both backends return alike, read once
 *   pool.c        the connection pool both backends use
 *   sqlite/, postgres/  the backends: one og__store_methods table each
 *                 (conn.c), the SQL beside the code that runs it, the same
 *                 file names in both folders
 *
 * The files above the backends (store.c ... payout_run.c) check every
 * input and build the validated requests below (so a backend never sees
 * raw input), then call through the method table; lib/store/dispatch.h is
 * what they share besides, with their invariants (S1-S8). This header also
 * makes lib/core's private interface (core_int.h) visible, as the backends
 * use it.
 *
 * Included by lib/store/ and the layers above it only
 * (tools/check_layers.py).
 */
#ifndef OG_STORE_INT_H
#define OG_STORE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#include "core/core_int.h"
#include "oncegate/payout_store.h"
#include "oncegate/store.h"

/* The statuses an owner holds an operation in: what og_op_record may
 * expect and what a takeover takes over (store.h, "Execution"). */
#define OG__OP_OWNED                                                           \
    (OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED) |                    \
     OG_OP_BIT(OG_OP_UNKNOWN))
/* The statuses the backlog indexes hold from schema 15 (both backends'
 * schema.c): every status but the two an owner holds in flight. */
#define OG__OP_BACKLOG                                                         \
    (OG_OP_BIT(OG_OP_UNKNOWN) | OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION) |        \
     OG_OP_BIT(OG_OP_SUCCEEDED) | OG_OP_BIT(OG_OP_FAILED) |                    \
     OG_OP_BIT(OG_OP_NOT_STARTED) | OG_OP_BIT(OG_OP_NOT_APPLIED))

/* ===========================================================================
 * Connection pool (lib/store/pool.c). Thread-safe. Connections are created
 * lazily up to max; a caller beyond max waits for one to be put back.
 * ========================================================================= */
typedef struct og__pool og__pool;

typedef struct og__pool_ops {
    /* Opens a connection into *conn. 0 or a negative OG_E* code. */
    int (*connect)(void *ctx, void **conn);
    /* Closes conn. */
    void (*disconnect)(void *ctx, void *conn);
    /* Optional (NULL: always alive). Whether an idle conn may be handed out:
     * false when the peer is known to have closed it, so it is closed and
     * replaced instead of failing its next caller's statement. Must not
     * block. */
    bool (*alive)(void *ctx, void *conn);
} og__pool_ops;

/* Creates a pool of at most max connections; a caller waits at most wait_us
 * for one when all are in use. NULL on out of memory. */
og__pool *og__pool_new(const og__pool_ops *ops, void *ctx, int max,
                       int64_t wait_us);
/* Closes every idle connection and frees the pool. All connections must have
 * been put back. NULL is a no-op. */
void og__pool_free(og__pool *p);
/* Takes a connection, connecting a new one if none is idle and fewer than
 * max exist; idle ones ops->alive rejects are closed on the way (PL6). 0
 * and *conn, the connect error, or OG_ESTORE_UNAVAILABLE when none came
 * free within the pool's wait. */
int og__pool_get(og__pool *p, void **conn);
/* Returns conn. broken=true closes it instead of keeping it (connection lost,
 * state unknown), so the next caller gets a fresh one. */
void og__pool_put(og__pool *p, void *conn, bool broken);

/* ===========================================================================
 * Validated requests for the grant-lifecycle methods (grants.c builds them).
 * ========================================================================= */
typedef struct og__issuance_req {
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char family[OG_ID_MAX + 1];   /* "" when none */
    char subject[OG_ID_MAX + 1];
    char action[OG_ID_MAX + 1];
    char params_digest[65];
    int64_t issued_at_us;
    int64_t expires_at_us;        /* 0: no trusted expiry recorded */
    og_grant_form form;
} og__issuance_req;

typedef struct og__revoke_req {
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    int64_t trusted_expires_at_us; /* 0: prove issuance from the log */
    og_grant_form form;
} og__revoke_req;

/* The most ids one og_strv holds: a family revocation's list of the grants
 * it revoked (2^20 ids of at most OG_ID_MAX bytes: ~140 MB at worst). A
 * power of two, so the doubling array ends exactly at it. */
#define OG__STRV_MAX ((size_t)1 << 20)

/* Appends a copy of id to sv (which starts as {NULL, 0} and is only ever
 * grown here), doubling its array from 8 slots: amortized O(1) per id.
 * 0, or OG_ENOMEM — out of memory, or sv already holds OG__STRV_MAX ids
 * (sv is unchanged then). */
int og__strv_push(og_strv *sv, const char *id);

/* The most stored events og_op_history reads for one operation (the
 * "admitted" one it derives aside): far beyond what the protocol writes
 * for one (a start, a few outcomes and takeovers, a resolution), so a
 * longer history is a store no caller should page through by accident:
 * OG_ENOMEM, never an unbounded array. A power of two, so the doubling
 * array ends exactly at it. */
#define OG__OP_HISTORY_MAX ((size_t)1 << 12)

/* ===========================================================================
 * The payout store (schemas 8-10): validated requests (payout.c and
 * payout_run.c build them, so a backend never sees raw input) and the pure
 * pieces both backends share (lib/store/payout_plan.c): what the facts
 * they read mean, and what a decision writes. Ids are checked, money is in
 * minor units, times are in range.
 * ========================================================================= */
typedef struct og__payout_tenant_req {
    char tenant_id[OG_ID_MAX + 1];
    bool payouts_suspended;
    int64_t daily_limit;
    char currency[OG_CURRENCY_LEN + 1];
    char time_zone[OG_PAYOUT_TIME_ZONE_MAX + 1]; /* og_payout_time_zone_check */
    int64_t expected_version; /* 0: create */
} og__payout_tenant_req;

typedef struct og__payout_beneficiary_req {
    char beneficiary_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];
    bool verified;
    const char *status; /* og_payout_beneficiary_status_name(): static */
    int64_t expected_version;
} og__payout_beneficiary_req;

typedef struct og__payout_destination_req {
    char destination_id[OG_ID_MAX + 1];
    char beneficiary_id[OG_ID_MAX + 1];
    char provider_token[OG_PAYOUT_TOKEN_MAX + 1]; /* SECRET: payout.c wipes
                                                     it after the call */
    int64_t expected_version;
    int64_t changed_at_us; /* 0: the store's clock; else a create only, with
                              changed_at the earlier of this and the store's
                              clock (og_payout_destination_import) */
} og__payout_destination_req;

typedef struct og__payout_draft_req {
    char payout_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];
    char beneficiary_id[OG_ID_MAX + 1];
    char destination_id[OG_ID_MAX + 1];
    int64_t destination_version;
    int64_t amount_minor;
    char currency[OG_CURRENCY_LEN + 1];
    bool has_purpose;
    char purpose[OG_PAYOUT_PURPOSE_MAX + 1]; /* normalized */
    char requester_id[OG_ID_MAX + 1];
} og__payout_draft_req;

typedef struct og__payout_decide_req {
    char payout_id[OG_ID_MAX + 1];
    int64_t payout_version; /* 0: as read */
    bool reauthorize;
    char requester_id[OG_ID_MAX + 1];
    char requester_role[OG_ID_MAX + 1];
    int64_t approval_limit;
    int64_t not_before_us, expires_at_us;
    char correlation_id[OG_ID_MAX + 1];
    char audience[OG_ID_MAX + 1]; /* the grant's, when Allowed */
    /* fresh identifiers (payout.c), used only when the decision writes
     * them: the decision's always, the grant's and the job's if Allowed */
    char decision_id[OG_UUID_LEN + 1];
    char grant_id[OG_ID_MAX + 1];
    char job_id[OG_UUID_LEN + 1];
    /* an approval (schema 14): the pending decision it settles ("" none),
     * normalized, and the destination version acknowledged (0 none), which
     * the decision's step sets from the pending decision it read */
    char settles_decision_id[OG_UUID_LEN + 1];
    int64_t acknowledged_destination_version;
} og__payout_decide_req;

/* Everything a decision reads, as the backend's payout_facts step returns
 * it (the payout with its tenant, beneficiary and destination; then the
 * counters of the release day; rows.h reads the first). */
typedef struct og__payout_facts {
    bool found;                   /* false: no payout; nothing else is set
                                     but observed_at_us */
    char payout_id[OG_ID_MAX + 1];
    og_payout_state state;
    int64_t version, attempt_count;
    char active_attempt[OG_UUID_LEN + 1]; /* "" when NULL */
    char tenant_id[OG_ID_MAX + 1];
    char beneficiary_id[OG_ID_MAX + 1];
    char destination_id[OG_ID_MAX + 1];
    int64_t destination_version;  /* the payout's terms */
    int64_t amount_minor;
    char currency[OG_CURRENCY_LEN + 1];
    bool has_purpose;
    char purpose[OG_PAYOUT_PURPOSE_MAX + 1];
    /* tenants */
    bool payouts_suspended;
    int64_t daily_limit;
    char tenant_currency[OG_CURRENCY_LEN + 1];
    char time_zone[OG_PAYOUT_TIME_ZONE_MAX + 1]; /* the settlement zone */
    int64_t settings_version;
    /* beneficiaries */
    bool verified;
    og_payout_beneficiary_status beneficiary_status;
    int64_t beneficiary_version;
    /* destinations (never the token) */
    char destination_beneficiary_id[OG_ID_MAX + 1];
    int64_t destination_record_version;
    int64_t destination_changed_at_us;
    /* tenant_days of release_day: 0, 0, 0 when there is no row yet */
    char release_day[OG_PAYOUT_DAY_LEN + 1];
    int64_t paid, reserved, day_version;
    int64_t observed_at_us;       /* the store's clock at the read */
} og__payout_facts;

/* What a decision writes, computed from the facts (og__payout_plan_decide). */
typedef struct og__payout_plan {
    og_payout_verdict verdict;
    bool allowed;                 /* the verdict is Allowed: reserve,
                                     approve, grant, job */
    const char *mode;             /* "submit" | "reauthorize" */
    const char *from_state;       /* the payout's state as read (Allowed) */
    int64_t new_version;          /* Allowed: version + 1 */
    int64_t attempt_number;       /* Allowed: attempt_count + 1 */
} og__payout_plan;

/* Text -> enum for the stored state, status, outcome and reason: -1 when
 * not one. */
int og__payout_state_parse(const char *text);
int og__payout_bstatus_parse(const char *text);
int og__payout_outcome_parse(const char *text);
int og__payout_reason_parse(const char *text);

/* The public snapshot of f (amount formatted, pointers bound). 0, or
 * OG_EINTERNAL for facts the schema forbids (a currency the core refuses,
 * a tenant currency other than the payout's). */
int og__payout_snapshot_build(const og__payout_facts *f,
                              og_payout_snapshot *out);

/* The decision on f for r: the pure core's verdict (og_payout_evaluate,
 * or og_payout_evaluate_reauthorization with the active attempt) over the
 * snapshot of f with r's intent version and requester facts; a missing
 * payout is the core's Deferred context.unavailable. 0, or OG_EINTERNAL
 * when the core refuses the stored facts (they break the schema's rules). */
int og__payout_plan_decide(const og__payout_facts *f,
                           const og__payout_decide_req *r,
                           og__payout_plan *out);

/* The reservation's conditional update took nothing — another decision's
 * reservation committed first: the decision written is Denied
 * tenant.daily-limit, alone (the evaluated versions and fingerprint stay). */
void og__payout_plan_limit_taken(og__payout_plan *p);

/* The decision as written, for og_payout_decide's caller: r's ids, p's
 * verdict, f's observation, the instant decided_at_us; Allowed also the
 * grant, job, attempt, version, reservation and day. */
void og__payout_decision_fill(const og__payout_decide_req *r,
                              const og__payout_facts *f,
                              const og__payout_plan *p, int64_t decided_at_us,
                              og_payout_decision *out);

/* What a write of the payout store that may write nothing did: the
 * backend's write, and when it wrote nothing its report — a read of the
 * same transaction (SQLite) or statement (PostgreSQL) — of the records as
 * they are. What a report means is decided once (payout_plan.c), so both
 * engines answer alike. */

/* A put (tenant, beneficiary, destination). */
typedef struct og__payout_put_report {
    bool written;
    int64_t version;        /* written: the version it wrote */
    bool exists;            /* not written: the record exists, */
    int64_t stored_version; /*   at this version, */
    bool fixed_same;        /*   its fixed field (a tenant's currency, a
                               beneficiary's tenant) is the request's, */
    bool refs_exist;        /*   and what the request names exists */
} og__payout_put_report;

/* A put's answer: WRITTEN and the version written, or why it wrote
 * nothing for a request that expected expected_version (0: a create). */
og_payout_put_result og__payout_put_outcome(int64_t expected_version,
                                            const og__payout_put_report *r);

/* A draft (written at version 1, or why not). */
typedef struct og__payout_draft_report {
    bool written;
    bool payout_exists;      /* the payout id is taken */
    bool tenant_exists;
    bool currency_matches;   /* the tenant's currency is the draft's */
    bool beneficiary_exists; /* a beneficiary of that tenant */
    bool destination_exists;
} og__payout_draft_report;

/* A draft's answer into *out. false when the report explains nothing the
 * draft could not write: the id was taken by a draft the report's read did
 * not see (PostgreSQL: its INSERT waited for one in flight), *out then
 * VERSION_CONFLICT. */
bool og__payout_draft_outcome(const og__payout_draft_report *r,
                              og_payout_put_result *out);

/* A cancellation. */
typedef struct og__payout_cancel_report {
    bool written;
    int64_t version;      /* written: the new version */
    bool found;           /* not written: the payout exists, */
    int64_t seen_version; /*   at this version */
} og__payout_cancel_report;

/* A cancellation's answer, for a request that expected expected_version. */
og_payout_put_result og__payout_cancel_outcome(
    int64_t expected_version, const og__payout_cancel_report *r);

/* A draft's edit (written at version + 1, or why not). */
typedef struct og__payout_edit_report {
    bool written;
    int64_t version;         /* written: the new version */
    bool found;              /* not written: the payout exists, */
    int64_t seen_version;    /*   at this version, */
    bool draft;              /*   in Draft, */
    bool tenant_same;        /*   of the request's tenant; */
    bool currency_matches;   /* the tenant's currency is the request's */
    bool beneficiary_exists; /* a beneficiary of that tenant */
    bool destination_exists;
} og__payout_edit_report;

/* An edit's answer, for a request that expected expected_version. */
og_payout_put_result og__payout_edit_outcome(int64_t expected_version,
                                             const og__payout_edit_report *r);

/* A payout grant's revocation (a finance hold). */
typedef struct og__payout_revoke_report {
    bool revoked;      /* this call revoked it */
    bool payout_grant; /* grant_id is a payout grant */
} og__payout_revoke_report;

og_revoke_outcome og__payout_revoke_outcome(const og__payout_revoke_report *r);

/* A payout grant's state from its row at the store's clock now_us. */
og_payout_grant_state og__payout_grant_state(bool consumed, bool revoked,
                                             int64_t expires_at_us,
                                             int64_t now_us);

/* A validated claim (og_payout_claim): the caller's inputs, the attempt's
 * fresh id (payout_run.c), windows in microseconds. */
typedef struct og__payout_claim_req {
    char grant_id[OG_ID_MAX + 1];
    char worker_id[OG_ID_MAX + 1];
    char audience[OG_ID_MAX + 1];
    og_payout_versions relied;
    char policy_version[OG_ID_MAX + 1];
    int64_t send_window_us, lease_us;
    int64_t final_absence_margin_us; /* -1: final_absence_after NULL */
    char operation_id[OG_UUID_LEN + 1];
} og__payout_claim_req;

/* What a claim reads, in its own transaction, with the rows locked
 * (PostgreSQL) or under the write lock (SQLite): the grant's row and
 * bindings, the operation that consumed it (if any), the payout and its
 * context, the store's clock. */
typedef struct og__payout_claim_facts {
    bool found;                    /* a payout grant: binding + grants row */
    char payout_id[OG_ID_MAX + 1];
    char audience[OG_ID_MAX + 1];
    int64_t executable_version, attempt_number;
    int64_t not_before_us, expires_at_us;
    bool consumed, revoked;
    char consumed_by[OG_UUID_LEN + 1]; /* "" when none */
    bool consumer_found;           /* the consuming operation's row */
    bool consumer_payout;          /* it is kind payout */
    char consumer_reference[OG_ID_MAX + 1];
    /* the payout */
    og_payout_state state;
    int64_t payout_version;
    bool active_attempt;
    int64_t amount_minor;
    char currency[OG_CURRENCY_LEN + 1];
    char destination_id[OG_ID_MAX + 1];
    /* its context */
    bool payouts_suspended;
    int64_t settings_version;
    og_payout_beneficiary_status beneficiary_status;
    int64_t beneficiary_version;
    int64_t destination_version;   /* the destination record's */
    char policy_release[OG_ID_MAX + 1]; /* the store's current release of
                                   the payout policy (schema 12), held */
    int64_t now_us;
} og__payout_claim_facts;

/* What the claim writes, computed from the facts (og__payout_plan_claim). */
typedef struct og__payout_claim_plan {
    og_payout_claim_outcome outcome;
    char idempotency_key[OG_ID_MAX + 1]; /* "payout-<payout>-a<N>" */
    char client_reference[OG_ID_MAX + 1]; /* "<payout>-a<N>" */
    char amount[OG_AMOUNT_MAX + 1];      /* canonical decimal of the
                                            payout's minor units */
    int64_t new_version;                 /* CLAIMED: payout version + 1 */
} og__payout_claim_plan;

/* The attempt's key and reference for (payout_id, attempt): 0, or -1 when
 * they would not be ids (longer than OG_ID_MAX). */
int og__payout_attempt_names(const char *payout_id, int64_t attempt,
                             char key[OG_ID_MAX + 1],
                             char reference[OG_ID_MAX + 1]);

/* The claim's verdict on f for r (PP4, PP7), in this order: MISMATCH (not
 * a payout grant), NOT_AUDIENCE (another audience), REVOKED, DUPLICATE
 * (consumed by a payout operation carrying this binding's reference), LOST
 * (consumed otherwise), EXPIRED (now < not_before or now >= expires_at: no
 * leeway), CONTEXT_CHANGED (any fence, the store's current policy release
 * included), else CLAIMED with the key, reference, amount and new version.
 * 0, or OG_EINTERNAL for facts the schema forbids. */
int og__payout_plan_claim(const og__payout_claim_facts *f,
                          const og__payout_claim_req *r,
                          og__payout_claim_plan *out);

/* What a resolution reads, in its own transaction after the outcome's
 * conditional write: the attempt's binding (through the operation's grant)
 * and its payout, locked (PostgreSQL) or under the write lock (SQLite). */
typedef struct og__payout_resolve_facts {
    bool found;                    /* a payout attempt with a binding */
    char payout_id[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char release_day[OG_PAYOUT_DAY_LEN + 1];
    int64_t amount_minor;          /* the binding's reservation */
    bool released;                 /* the binding's released_at is set */
    og_payout_state state;
    int64_t payout_version;
    bool active;                   /* payouts.active_attempt = the attempt */
} og__payout_resolve_facts;

/* What a resolution writes (og__payout_plan_resolve). */
typedef struct og__payout_resolve_plan {
    og_payout_resolve_outcome outcome; /* RESOLVED or NOT_ACTIVE */
    og_payout_state to;
    const char *from_state, *to_state; /* stored texts */
    int64_t new_version;           /* payout version + 1 */
    bool clear_attempt;            /* terminal outcomes */
    og_payout_reservation reservation;
    const char *release_cause;     /* NULL when HELD; else 'paid', 'failed',
                                      'not-started', 'not-applied' */
} og__payout_resolve_plan;

/* The consequence of an attempt recorded at status st for f: NOT_ACTIVE
 * unless f is an Executing or Unknown payout whose active attempt it is;
 * else RESOLVED with the state, the reservation's move and its cause
 * (payout_store.h, og_payout_resolve). 0, or OG_EINTERNAL for facts the
 * schema forbids (an active attempt whose reservation is released) or a
 * status the owner cannot record. */
int og__payout_plan_resolve(const og__payout_resolve_facts *f, og_op_status st,
                            og__payout_resolve_plan *out);

/* Fault points of the payout transactions (lib/core/fault.c), asked by the
 * orchestrations above the backends (payout.c, payout_run.c; S6), so they
 * fire at the same step on both: each acts as if the store failed there,
 * so everything before it rolls back. The decision's: */
#define OG__FAULT_DECIDE_AFTER_RESERVATION "payout_decide_after_reservation"
#define OG__FAULT_DECIDE_AFTER_DECISION "payout_decide_after_decision"
#define OG__FAULT_DECIDE_BEFORE_COMMIT "payout_decide_before_commit"
/* The claim's writes done, not committed: rolled back (nothing claimed). */
#define OG__FAULT_CLAIM_BEFORE_COMMIT "payout_claim_before_commit"
/* The resolution's writes done, not committed: rolled back (the outcome
 * too). */
#define OG__FAULT_RESOLVE_BEFORE_COMMIT "payout_resolve_before_commit"
/* Acknowledgments lost after a commit (schema 11): the claim's COMMIT
 * succeeded (og_payout_claim), a payout attempt's Started write committed
 * (og_op_start); the call returns OG_ESTORE_UNAVAILABLE and the write
 * stays — the worker must send nothing, the sweeper settles it. */
#define OG__FAULT_CLAIM_ACK_LOST "payout_claim_ack_lost"
#define OG__FAULT_START_ACK_LOST "payout_start_ack_lost"
/* A claim that waits OG__FAULT_CLAIM_PAUSE_MS before its transaction
 * begins (og_payout_claim), then runs as usual: the window between a
 * worker's validation and its claim held open, so a test can consume the
 * grant in it and the claim is LOST every time, not by a race. 1500 ms:
 * room for a test polling the job's deliveries every 20 ms to see the job
 * taken, let the worker's validation finish (a few reads; 600 ms allowed
 * under sanitizers on a loaded machine) and consume the grant, with as
 * much again to spare before the claim reads it; and far below the job
 * lease (payouts.job_lease_ms, 60 s by default), so the job is not
 * redelivered meanwhile. */
#define OG__FAULT_CLAIM_PAUSE "payout_claim_pause"
#define OG__FAULT_CLAIM_PAUSE_MS 1500

/* ===========================================================================
 * Backends, and the method contract
 *
 * A backend is ONE const og__store_methods table (og__sqlite_methods in
 * lib/store/sqlite/conn.c, og__postgres_methods in lib/store/postgres/
 * conn.c); the files above call through it and through nothing else of a
 * backend. Each slot's type below says what the method takes, returns and
 * writes. M1-M36 are what EVERY backend's methods guarantee, whatever the
 * engine: each backend's own list (Q in lib/store/sqlite/, I in
 * lib/store/postgres/) says how it keeps them, and cites them. The
 * dispatch above the backends has its own list (S, lib/store/dispatch.h).
 *
 * Every method:
 *   M1  writes its out-parameters on success only; a method that fails
 *       leaves them as they were (a batch's cursor included).
 *   M2  reports nothing done before it is durable. A write is reported
 *       (admitted, written, claimed, ...) only once its commit is
 *       confirmed; a commit not confirmed, a timeout, a cancellation or a
 *       lost connection is OG_ESTORE_UNAVAILABLE — never a refusal and
 *       never "nothing was written": the write may have committed, and a
 *       retry with the same ids finds out.
 *   M3  waits at most the store timeout (og_timings.store_timeout_us) for
 *       anything — a lock, a connection, a statement; past it the call is
 *       OG_ESTORE_UNAVAILABLE. A transaction of several statements has one
 *       deadline for all of them.
 *   M4  discards a connection whose transaction state is unknown (a
 *       ROLLBACK that failed, a statement cut off at its deadline): it is
 *       never handed out again.
 *   M5  turns no constraint failure into an outcome but the admission's
 *       unique violation on operations (its primary key, or its
 *       one-operation-per-grant key), which refuses. Any other, in any
 *       statement, is a defect: OG_EINTERNAL, never a refusal and never
 *       OG_ESTORE_UNAVAILABLE (which would invite a retry of a statement
 *       that can only fail again).
 *   M6  decides on the store's clock: every deadline, lease and retention a
 *       write depends on is compared with the store's clock inside the
 *       statement that writes on it, read after any lock wait (a wait
 *       never eats a lease nor shortens a retention). Times are integer
 *       microseconds since the epoch, exact both ways.
 *   M7  logs nothing but the one line naming a defect (a full statement
 *       cache): no parameter — a provider token, a sealed result — ever
 *       reaches a log.
 *
 * The admission (admit, operation_get):
 *   M8  At most one call ever claims a grant: the claim (the key's row in
 *       grant_consumptions in token form, the consumed mark on the grant's
 *       row in row form) and the operation's insert are ONE atomic write,
 *       kept whole or not at all; a refusal (M5) rolls the claim back.
 *   M9  A claim that took nothing is reported from a read that only
 *       reports (og__classify_unclaimed): it never writes and never turns
 *       into an admission; the claim decided.
 *   M10 An archived operation still answers for its id: the admission
 *       claims nothing while operations_archive holds the request's
 *       operation id, and every report reads the operation live or
 *       archived — a same-operation retry is ALREADY_ADMITTED with the
 *       archived record, another grant under the id OPERATION_ID_TAKEN.
 *   M11 Consumption keys (schema 5): a readable store keys
 *       grant_consumptions by (issuer, grant_id), a hashed one by
 *       og_consumption_key(issuer, grant_id) alone, with no identifier in
 *       the table. The mode is the store's (read_keys); every key is
 *       computed by the store from ONE implementation; every invariant here
 *       holds in both modes unchanged.
 *
 * The grant lifecycle (issuance_record ... ticket_rotate):
 *   M12 Each call is ONE atomic conditional write; a read after a write
 *       that changed nothing only reports why and never writes — but a
 *       ticket's reuse, which then revokes the family (M15).
 *   M13 A family orders its grants: an admission, a consume, an issuance or
 *       a ticket in a family claims or writes only while the family's row
 *       is live, ordered against the family's revocation, so whichever
 *       commits first wins — nothing is claimed or issued after the
 *       revocation, and a revocation ordered after an admission finds that
 *       grant taken and does not list it.
 *   M14 A revocation never outlives its proof: a token-form revocation
 *       holds the grant's key until the trusted expiry + leeway (the
 *       token's, or the issuance log's), or when the log records none
 *       until the store's clock (read after any lock wait, M6) + max grant
 *       lifetime + issue-time skew + leeway; without either proof nothing
 *       is written (NOT_ISSUED).
 *   M15 A ticket is stored as its hash only, and a rotated ticket is kept:
 *       presenting it again is reuse, taken for theft — the family is
 *       revoked before the reuse is answered.
 *
 * Execution (op_may_submit ... op_history):
 *   M16 Each execution write (start, record, takeover, resolution) is ONE
 *       atomic conditional write of the operation with its event: the
 *       event exists exactly when the row changed; a stale owner, an
 *       unexpected status, an unexpired lease (takeover) or an expired one
 *       (start) changes nothing and records nothing. Terminal statuses are
 *       never expected, so never overwritten.
 *   M17 The owner version fences: a start and a record require
 *       owner_version = v and keep it; a takeover (an owned status whose
 *       lease lapsed) and a resolution (NeedsReconciliation) raise it, so
 *       every later write of the previous owner — its start included —
 *       changes nothing. A takeover's lease is now + the store's
 *       recovery_lease.
 *   M18 One instant per execution write, read after the row's lock: its
 *       updated_at, a new lease and its event's time are one value.
 *   M19 op_may_submit only reads: owner_version = v and now <
 *       min(lease_until, submit_by) on the store's clock, and Admitted or
 *       Unknown for a credit, Started for a payout (M22). A failure is an
 *       error, which the caller reads as "do not send", never as yes.
 *   M20 updated_at is NULL until the first status change and reads as
 *       created_at: the admission stays ONE insert and writes no event
 *       (og_op_history derives the "admitted" one); a takeover leaves it.
 *   M21 op_list and op_history only read. op_list's statement is built from
 *       fixed fragments and status names, never from caller text, and can
 *       use the recovery scan's index.
 *   M22 Operation kinds (schema 7): a credit or a payout attempt; a NULL
 *       idempotency key or client reference reads as the operation id. A
 *       payout is sent only once Started: op_start is the one write to
 *       Started (Admitted, the owner's version, lease and submit_by still
 *       ahead), op_may_submit says yes for a payout only in Started, and
 *       NotStarted is recorded only for a payout whose owner version a
 *       takeover raised (docs/payouts.md, P1, P2). The schema holds both
 *       rules too.
 *
 * Retention (cleanup_batch, archive_batch):
 *   M23 A refusal record outlives every admission that could still commit:
 *       cleanup deletes a grant_consumptions row only where retain_until +
 *       cleanup_margin lies before the store's clock at the delete,
 *       re-checked on the row it deletes; the margin (T9) covers what an
 *       admission may still take between its deadline check and its
 *       commit.
 *   M24 Cleanup deletes grant_consumptions rows and nothing else, at most
 *       `batch` per transaction, oldest first over the retain_until index
 *       from the pass's keyset cursor: admissions wait for one short batch
 *       at most.
 *   M25 Archiving takes terminal operations only (Succeeded, Failed,
 *       NotStarted, NotApplied: no writer expects them) and moves or
 *       deletes each with its events in one atomic write; Admitted,
 *       Started, Unknown and NeedsReconciliation stay.
 *
 * Redemption recovery points (redemption_put, redemption_get):
 *   M26 A point is written by ONE insert that does nothing when (caller,
 *       key) holds one: the first writer wins, nothing overwrites it, and
 *       "inserted" is reported once committed (M2). The read is ONE read
 *       of one state answering both "the key's own point" and "the same
 *       code under another key". The store keeps sealed bytes and the
 *       token's SHA-256 only.
 *
 * The payout store (payout_tenant_put ... payout_expire_batch):
 *   M27 Each write outside the orchestrations — a put, a draft, a
 *       cancellation, a job's take, acknowledgment, postponement or
 *       resubmission, a grant's revocation, an expiry batch — is ONE atomic
 *       write holding its history entries; one that changed nothing reports
 *       the records as they are, from a read of the same transaction or
 *       statement, for payout_plan.c to say why. Decisions and history
 *       entries are never changed nor removed: the schema refuses it.
 *   M28 A payout transaction (txn_begin ... txn_end) is one connection and
 *       one deadline (M3), and ends once: committed and reported only once
 *       confirmed (M2), or rolled back. A WRITE transaction holds every row
 *       its facts' steps read until it ends — a change in flight is waited
 *       for and its result read; a READ transaction is one snapshot. A step
 *       never ends it.
 *   M29 The decision's writes: its row and "decided" entry at one instant
 *       of the store's clock; for Allowed, at that instant, the approval
 *       (conditional on the version read, the state expected and no active
 *       attempt), the grant's row, its bindings, the job and an entry per
 *       step — each taking its one row, or the step is OG_EINTERNAL.
 *   M30 The reservation is ONE conditional write of the release day's row
 *       that takes the amount only while paid + reserved + amount stays
 *       within the tenant's daily limit, evaluated on the newest committed
 *       counters: two decisions never both pass on the same headroom. The
 *       day (the release day of the grant's not_before in the tenant's
 *       time zone) is kept on the binding, so a release goes back to it.
 *   M31 The attempt number is attempt_count + 1, allocated by the
 *       approval's conditional write on the payout's row the decision
 *       holds: re-authorizations are ordered, and payout_grants' UNIQUE
 *       (payout_id, attempt_number) is the schema's own guard.
 *   M32 A binding's reservation is released exactly once: released_at is
 *       set only where it is NULL on the newest version, by a revocation
 *       (the grant's row live; with the binding and the day's counter) or
 *       an expiry batch (unconsumed grants past expires_at + leeway +
 *       cleanup margin on the store's clock). A consumed grant's
 *       reservation follows its attempt (M35), never an expiry.
 *   M33 The outbox is the queue: a take is ONE conditional write of the
 *       oldest job not done with available_at <= now — deliveries + 1,
 *       available_at = now + lease, so a quiet taker's job is delivered
 *       again; an acknowledgment or a postponement is conditional on
 *       (deliveries = the delivery held, not done). A job holds references
 *       only; a resubmission copies them under a new id.
 *   M34 The claim: its facts' step holds the grant's and the payout's rows
 *       and the fenced context (tenant, beneficiary, destination) until the
 *       transaction ends and reads the store's clock after the locks; the
 *       operation that consumed the grant, committed by a claim it waited
 *       for, is read too. Its write step, at the facts' instant,
 *       re-asserts every condition (the grant unconsumed, unrevoked, in its
 *       window; the payout Approved at the executable version with no
 *       active attempt) and takes each row, or is OG_EINTERNAL. The daily
 *       limit is not checked again: the decision reserved.
 *   M35 The resolution: its record step is og_op_record's own write (the
 *       backend's statement, not a copy) in the transaction; its facts'
 *       step holds the attempt's binding and payout; its write step moves
 *       the payout conditionally on the version read and this attempt
 *       active, releases the binding once for a terminal outcome with its
 *       day's counters (reserved -> paid, or unreserved) and writes one
 *       "resolved" entry — anything that does not take what the plan says
 *       is OG_EINTERNAL.
 *
 * After the send (schema 11: payout_reconcile_later ... payout_return):
 *   M36 A payout attempt's NotApplied is decided by the store too: the
 *       outcome's own conditional write (op_record, payout_resolve_record)
 *       takes NotApplied only where final_absence_after is set and lies at
 *       or before both taken_at (the takeover that began this lookup:
 *       op_takeover sets it to the instant it takes over) and the
 *       statement's clock; an operator's NotApplied (payout_operator_record)
 *       only at or after final_absence_after, or after submit_by when it is
 *       NULL. The claim sets final_absence_after = submit_by + the margin
 *       (or NULL) in the attempt's insert. A backoff (payout_reconcile_later)
 *       is ONE conditional write on (kind payout, Unknown, owner version)
 *       moving lease_until and lookups with its "lookup" event; late
 *       evidence reads the attempt under its lock in the transaction
 *       (payout_attempt_read) before the outcome's write; a return is ONE
 *       write of a "returned" entry that takes nothing unless the payout is
 *       Paid and its last attempt Succeeded with the reference, and a
 *       unique index on the returned entries keeps it once per payout (a
 *       second is nothing written, never an error).
 * ========================================================================= */

/* ---- the store ---------------------------------------------------------- */

/* Opens the backend for target (the URL without "sqlite:" for SQLite, the
 * whole libpq string for PostgreSQL). Does not check the schema. */
typedef int og__store_open_fn(const char *target, const og_store_options *opts,
                              void **impl);
typedef void og__store_close_fn(void *impl);
/* Current schema version into *version: 0 when the store has no
 * migrations table. */
typedef int og__store_schema_version_fn(void *impl, int *version);
/* The server-side bounds an admission connection carries; a backend
 * without any leaves the slot NULL (SQLite: og_store_session_bounds
 * reports applicable = false). */
typedef int og__store_session_bounds_fn(void *impl, og_session_bounds *out);
/* Applies migrations up to target (1..OG_SCHEMA_VERSION; the library
 * always asks for OG_SCHEMA_VERSION, tests for less), each in one
 * transaction, concurrent migrators serialized; *from / *to as in
 * og_store_migrate (neither NULL here); OG_ESCHEMA when the store ends at
 * another version than target. keys: what migration 5 records (AS_STORED:
 * readable). Does not compare keys with a store already at 5: store.c
 * reads them back (read_keys) and does (S5). */
typedef int og__store_migrate_fn(void *impl, og_consumption_keys keys,
                                 int target, int *from, int *to);
/* Reads the consumption keys the store records (schema 5, M11) into *keys
 * (READABLE or HASHED) and from then on runs that mode's statements.
 * Called once, right after the schema check, before the store object is
 * shared between threads. */
typedef int og__store_read_keys_fn(void *impl, og_consumption_keys *keys);
/* Writes to out, as Markdown sections (og__explain_statement, then a plan
 * block each), the plans of this backend's admission statements, of a
 * cleanup batch of batch rows, in the store's keys, and of the payout
 * store's reservation, job take and expiry batch. Executes none of them; a
 * connection it changed a setting on is closed. */
typedef int og__store_explain_fn(void *impl, int batch, FILE *out);

/* ---- the admission (M8-M11) --------------------------------------------- */

/* The claim and the operation's insert as one atomic write (M8), then on
 * zero rows the follow-up read and og__classify_unclaimed() (M9, M10). */
typedef int og__store_admit_fn(void *impl, const og__admit_req *req,
                               og_admission *out);
/* reqs[0..n) (1..OG_ADMIT_BATCH_MAX, of one form, no two sharing a grant
 * key or an operation id: store.c checks) admitted as ONE batch of the
 * group commit, bypassing the queue: the test hook og__admit_batch. rcs[i]
 * is what og__store_admit_fn would return for row i, outs[i] its answer.
 * 0, or OG_EINVAL. */
typedef int og__store_admit_batch_fn(void *impl, const og__admit_req *reqs,
                                     int n, og_admission *outs, int *rcs);
/* The group commit's counters (og_store_admit_stats). */
typedef void og__store_admit_stats_fn(void *impl, og_admit_stats *out);
/* An operation by canonical id: 1 found, 0 not, negative error. */
typedef int og__store_operation_get_fn(void *impl, const char *operation_id,
                                       og_operation *out);

/* ---- the grant lifecycle (M12-M15) --------------------------------------
 * Inputs are validated and canonical (grants.c). */

/* The issuance log's entry (+ the grants row in row form) in a live
 * family. */
typedef int og__store_issuance_record_fn(void *impl,
                                         const og__issuance_req *req,
                                         og_issue_outcome *out);
/* One grant's revocation, its proof of issuance checked by the store. */
typedef int og__store_revoke_fn(void *impl, const og__revoke_req *req,
                                og_revoke_outcome *out);
/* A family's revocation; *out lists the grants this call revoked. */
typedef int og__store_family_revoke_fn(void *impl, const char *issuer,
                                       const char *family, og_strv *out);
/* The consume verdict for req's grant (operation fields unused); the
 * calls of one store object share a group commit as admissions do
 * (docs/design.md, "The consume verdict in batches"). */
typedef int og__store_consume_fn(void *impl, const og__admit_req *req,
                                 og_consume_result *out);
/* reqs[0..n) (1..OG_ADMIT_BATCH_MAX, of one form, no two sharing a grant
 * key: store.c checks) given the verdict as ONE batch of that group
 * commit, bypassing the queue: the test hook og__consume_batch. rcs[i] is
 * what og__store_consume_fn would return for row i, outs[i] its answer.
 * 0, or OG_EINVAL. */
typedef int og__store_consume_batch_fn(void *impl, const og__admit_req *reqs,
                                       int n, og_consume_result *outs,
                                       int *rcs);
/* The verdicts' group commit's counters (og__consume_stats). */
typedef void og__store_consume_stats_fn(void *impl, og_admit_stats *out);
/* A ticket (stored by hash) in a live family. */
typedef int og__store_ticket_create_fn(void *impl, const char *issuer,
                                       const char *family, const char *hash,
                                       og_ticket_outcome *out);
/* Rotation old_hash -> new_hash; on reuse the backend also revokes the
 * family. Fills issuer/family (OG_ID_MAX + 1 each) when known. */
typedef int og__store_ticket_rotate_fn(void *impl, const char *old_hash,
                                       const char *new_hash,
                                       og_ticket_outcome *out, char *issuer,
                                       char *family);
/* One rotation of a batch: the hashes in, the answer out (issuer and
 * family "" when the ticket is unknown). */
typedef struct og__rotate_row {
    char old_hash[65], new_hash[65];
    og_ticket_outcome outcome;
    char issuer[OG_ID_MAX + 1], family[OG_ID_MAX + 1];
} og__rotate_row;
/* rows[0..n) (1..OG_ADMIT_BATCH_MAX, no two sharing an old ticket:
 * store.c checks) rotated as ONE batch of the rotations' group commit,
 * bypassing the queue: the test hook og__rotate_batch. rcs[i] is what
 * og__store_ticket_rotate_fn would return for row i, rows[i] its answer.
 * 0, or OG_EINVAL. */
typedef int og__store_rotate_batch_fn(void *impl, og__rotate_row *rows, int n,
                                      int *rcs);
/* The rotations' group commit's counters (og_store_rotate_stats). */
typedef void og__store_rotate_stats_fn(void *impl, og_admit_stats *out);

/* ---- execution (M16-M22) ------------------------------------------------
 * Inputs are validated and canonical (exec.c); the transition is one the
 * table in store.h ("Execution") allows. Times are the store's clock. */

typedef int og__store_op_may_submit_fn(void *impl, const char *operation_id,
                                       int64_t owner_version, bool *may);
/* ONE conditional write: kind payout AND status Admitted AND
 * owner_version = v AND lease_until > now AND submit_by > now -> Started,
 * updated_at = now, + a "started" event at the same instant. */
typedef int og__store_op_start_fn(void *impl, const char *operation_id,
                                  int64_t owner_version, const char *actor,
                                  bool *started);
/* ONE conditional write: status IN expected AND owner_version = v -> the
 * outcome, updated_at = now, + an "outcome" event. NotStarted additionally
 * requires kind payout and owner_version above the initial one (M22),
 * re-checked here whatever exec.c checked. */
typedef int og__store_op_record_fn(void *impl, const char *operation_id,
                                   unsigned expected, int64_t owner_version,
                                   const og_op_outcome *o, bool *recorded);
/* One outcome write of the group commit of outcomes (lib/store/sqlite/
 * exec.c, lib/store/postgres/outcome_batch.c): an op_start (actor) or an
 * op_record (expected, o) of operation_id at owner_version, its input
 * checked as og_op_start's or og_op_record's; hit is its answer (started,
 * recorded), read only when its rc is 0. */
typedef enum { OG__OUTCOME_START, OG__OUTCOME_RECORD } og__outcome_kind;
typedef struct og__outcome_row {
    og__outcome_kind kind;
    const char *operation_id; /* canonical */
    int64_t owner_version;
    const char *actor;        /* OG__OUTCOME_START */
    unsigned expected;        /* OG__OUTCOME_RECORD */
    const og_op_outcome *o;   /* OG__OUTCOME_RECORD */
    bool hit;
} og__outcome_row;
/* rows[0..n) (1..OG_ADMIT_BATCH_MAX) written as ONE batch of the group
 * commit of outcomes, bypassing its queue: the test hook
 * og__op_outcome_batch (PostgreSQL: as rounds naming no operation twice).
 * rcs[i] is what op_start or op_record would return for row i alone,
 * rows[i].hit its answer. 0, or OG_EINVAL. NULL in a backend that writes
 * each outcome alone. */
typedef int og__store_outcome_batch_fn(void *impl, og__outcome_row *rows,
                                       int n, int *rcs);
/* The group commit of outcomes' counters (og_store_outcome_stats); NULL
 * in a backend that writes each outcome alone (zeros). */
typedef void og__store_outcome_stats_fn(void *impl, og_admit_stats *out);
/* ONE conditional write: status IN (Admitted, Started, Unknown) AND
 * lease_until < now AND owner_version = v -> owner_version + 1,
 * lease_until = now + recovery_lease, + a "takeover" event; *out the new
 * record. */
typedef int og__store_op_takeover_fn(void *impl, const char *operation_id,
                                     int64_t owner_version, const char *actor,
                                     og_operation *out, bool *taken);
/* ONE conditional write: status = NeedsReconciliation -> to (Succeeded,
 * Failed or NotApplied), owner_version + 1, + a "resolved" event with
 * evidence. */
typedef int og__store_op_resolve_fn(void *impl, const char *operation_id,
                                    og_op_status to, const char *operator_id,
                                    const char *reason, const char *evidence,
                                    const char *provider_reference,
                                    bool *resolved);
typedef int og__store_op_list_fn(void *impl, const og_op_filter *f,
                                 og_op_list *out);
/* og__op_insert's write (tests only): ONE insert of req's operation as
 * kind k, Admitted at the initial owner version, lease and submit_by from
 * the store's clock; key and reference NULL for the operation id. No
 * claim. *out the new record. */
typedef int og__store_op_insert_fn(void *impl, const og__admit_req *req,
                                   og_op_kind k, const char *idempotency_key,
                                   const char *client_reference,
                                   og_operation *out);
/* Stored events only (exec.c prepends the "admitted" one), at most
 * OG__OP_HISTORY_MAX of them (more: OG_ENOMEM). */
typedef int og__store_op_history_fn(void *impl, const char *operation_id,
                                    og_op_events *out);

/* ---- retention (M23-M25) ------------------------------------------------
 * ONE batch each, in its own short transaction; retention.c loops and
 * decides when to stop (S4). *out is this batch's counts only (its
 * batches member untouched); a batch never takes more than batch rows.
 * *from_us is a keyset cursor over the index the batch walks: the batch
 * looks only at rows whose key (retain_until; an operation's last change)
 * is >= *from_us, and on success raises *from_us to the greatest key it
 * took. So a pass never walks again the entries its earlier batches
 * deleted (PostgreSQL keeps them in the index until a vacuum). Keys equal
 * to the cursor are looked at again, so a run of equal keys split across
 * batches is not skipped; a row the cursor passed (locked by another
 * janitor, inserted later with an older key) waits for the next pass: the
 * cursor only ever makes a pass delete less. */

/* Deletes at most batch grant_consumptions rows whose retain_until + the
 * store's cleanup_margin lies before the store's clock at the statement,
 * oldest first. */
typedef int og__store_cleanup_batch_fn(void *impl, int batch,
                                       int64_t *from_us,
                                       og_cleanup_stats *out);
/* Moves (OG_ARCHIVE_MOVE) or deletes at most batch terminal operations
 * whose last status change lies more than older_than_us before the store's
 * clock, each with its events, in one transaction. */
typedef int og__store_archive_batch_fn(void *impl, int64_t older_than_us,
                                       og_archive_mode mode, int batch,
                                       int64_t *from_us,
                                       og_archive_stats *out);

/* ---- redemption recovery points (M26) -----------------------------------
 * Inputs are validated (redeem.c). */

/* ONE conditional insert: *inserted false when the key already held a
 * point. */
typedef int og__store_redemption_put_fn(void *impl,
                                        const og_redemption_record *r,
                                        bool *inserted);
/* ONE read: the point of (caller, key), else (code_hash non-NULL) whether
 * another key's point holds code_hash. *out only for OWN; its sealed bytes
 * malloc'd. */
typedef int og__store_redemption_get_fn(void *impl, const char *caller,
                                        const char *key,
                                        const char *code_hash,
                                        og_redemption_found *found,
                                        og_redemption_point *out);

/* ---- the payout store's records (M27) -----------------------------------
 * Inputs are validated (payout.c, payout_run.c). Each write is ONE
 * transaction holding its history entries and reports what it did in
 * *out, for payout_plan.c to say what it means. */

typedef int og__store_payout_tenant_put_fn(void *impl,
                                           const og__payout_tenant_req *r,
                                           og__payout_put_report *out);
typedef int og__store_payout_beneficiary_put_fn(
    void *impl, const og__payout_beneficiary_req *r,
    og__payout_put_report *out);
/* The provider token is a parameter only, never copied (S7). */
typedef int og__store_payout_destination_put_fn(
    void *impl, const og__payout_destination_req *r,
    og__payout_put_report *out);
/* The executor's read of the secret (S7): 1 and the token in out (outlen >=
 * OG_PAYOUT_TOKEN_MAX + 1), 0 no such version, <0 an error. The backend's
 * own copies of it are wiped. */
typedef int og__store_payout_destination_token_fn(void *impl,
                                                  const char *destination_id,
                                                  int64_t version, char *out,
                                                  size_t outlen);
typedef int og__store_payout_draft_fn(void *impl,
                                      const og__payout_draft_req *r,
                                      og__payout_draft_report *out);
/* r's terms (its requester the actor) onto the Draft payout r->payout_id
 * at expected_version: ONE conditional write and its "edited" entry. */
typedef int og__store_payout_edit_fn(void *impl,
                                     const og__payout_draft_req *r,
                                     int64_t expected_version,
                                     og__payout_edit_report *out);
typedef int og__store_payout_cancel_fn(void *impl, const char *payout_id,
                                       int64_t expected_version,
                                       const char *actor,
                                       og__payout_cancel_report *out);
/* 1 found, 0 not, negative error. */
typedef int og__store_payout_get_fn(void *impl, const char *payout_id,
                                    og_payout_view *out);
/* Decision decision_id (normalized) as its row stands: 1 and *out, 0 none,
 * <0 an error. ONE read; a decision is never changed (M27), so this is the
 * row its decision wrote. */
/* The history of payout_id (checked), oldest first: 0 and *out (at most
 * OG__OP_HISTORY_MAX entries, else OG_ENOMEM), or <0. ONE read. */
typedef int og__store_payout_history_fn(void *impl, const char *payout_id,
                                        og_payout_events *out);

typedef int og__store_payout_decision_get_fn(void *impl,
                                             const char *decision_id,
                                             og_payout_decision_view *out);

/* ---- the payout store's transactions (M28-M35) --------------------------
 * The context read, the decision, the claim and the resolution are
 * orchestrated above the backends (payout.c, payout_run.c; S6): ONE
 * transaction, the steps below run on it in their order — the facts, the
 * pure plan (payout_plan.c), the writes, the fault point — then it ends. */

/* What a transaction of the payout store's orchestrations is for. */
typedef enum og__txn_mode {
    OG__TXN_READ,  /* one snapshot for several reads */
    OG__TXN_WRITE, /* reads whose rows it holds, then writes */
} og__txn_mode;

/* Opens a transaction on a connection of its own (M28): OG__TXN_WRITE for
 * the decision, the claim and the resolution; OG__TXN_READ for the context
 * read. One deadline, the store timeout from now, bounds every statement
 * of it. *tx until txn_end. */
typedef int og__store_txn_begin_fn(void *impl, og__txn_mode mode, void **tx);
/* Ends tx and gives its connection back: COMMIT when rc is 0 and commit,
 * else ROLLBACK. Returns rc, or the COMMIT's error (the write then not
 * confirmed: OG_ESTORE_UNAVAILABLE, M2). A connection whose state is
 * unknown after it (a ROLLBACK that failed) is discarded (M4). */
typedef int og__store_txn_end_fn(void *impl, void *tx, int rc, bool commit);
/* The payout policy's current release (schema 12) read in tx into out:
 * 1, 0 when its row is missing (the migration writes it: a defect to the
 * callers), or an error. lock (the decision's read, in a WRITE
 * transaction): the row does not change before tx ends (PostgreSQL: FOR
 * SHARE; SQLite: the write lock), so a decision is written on the release
 * it read. */
typedef int og__store_payout_policy_release_fn(void *impl, void *tx,
                                               bool lock,
                                               char out[OG_ID_MAX + 1]);
/* The release moved from expected to version by actor: ONE conditional
 * write (current_version = expected), *written. */
typedef int og__store_payout_policy_release_set_fn(void *impl,
                                                   const char *version,
                                                   const char *expected,
                                                   const char *actor,
                                                   bool *written);
/* The facts of payout_id (og__payout_facts): the payout with its tenant's
 * settings, beneficiary and destination (never the token), the counters of
 * the release day of release_at_us in the tenant's time zone, and the store's
 * clock (observed_at). lock (the decision's read, in a WRITE transaction):
 * none of the payout, tenant, beneficiary and destination rows changes
 * before tx ends (M28); the day's counters are the reservation's to decide
 * on (M30). A missing payout is found = false at the store's clock. */
typedef int og__store_payout_facts_fn(void *impl, void *tx,
                                      const char *payout_id,
                                      int64_t release_at_us, bool lock,
                                      og__payout_facts *out);
/* The decision's reservation of f's amount on its release day (M30):
 * *reserved false when it took nothing. */
typedef int og__store_payout_reserve_fn(void *impl, void *tx,
                                        const og__payout_facts *f,
                                        bool *reserved);
/* The decision's row (r's ids, p's verdict, f's observation) and its
 * "decided" entry, at one instant of the store's clock: *decided_at_us
 * (M29). */
typedef int og__store_payout_decision_write_fn(void *impl, void *tx,
                                               const og__payout_decide_req *r,
                                               const og__payout_facts *f,
                                               const og__payout_plan *p,
                                               int64_t *decided_at_us);
/* An approval's read of the pending decision decision_id (normalized) in
 * tx, after the facts' step held the payout's row (schema 14): 1 and *out
 * with *settled (a decision settling it exists), 0 when there is none, or
 * an error. Two approvals of one decision are ordered by the payout's row
 * (PostgreSQL: FOR UPDATE; SQLite: the write lock), so the second reads
 * the first one's decision. */
typedef int og__store_payout_settle_read_fn(void *impl, void *tx,
                                            const char *decision_id,
                                            og_payout_decision_view *out,
                                            bool *settled);
/* What an Allowed decision enables, at decided_at_us (M29, M31): the
 * approval, the grant's row (row form, issuer 'payouts', no family, the
 * window's end its expiry), its bindings, the job, a history entry per
 * step, with p's version and attempt. */
typedef int og__store_payout_decision_issue_fn(void *impl, void *tx,
                                               const og__payout_decide_req *r,
                                               const og__payout_facts *f,
                                               const og__payout_plan *p,
                                               int64_t decided_at_us);
/* The claim's facts for grant_id (og__payout_claim_facts; M34). found =
 * false: not a payout grant. */
typedef int og__store_payout_claim_facts_fn(void *impl, void *tx,
                                            const char *grant_id,
                                            og__payout_claim_facts *out);
/* CLAIMED's writes at f->now_us (M34): the grant's row consumed, the payout
 * Approved -> Executing, the attempt (kind payout, Admitted at the initial
 * owner version, p's key and reference; *attempt as stored) and the
 * "claimed" entry. */
typedef int og__store_payout_claim_write_fn(void *impl, void *tx,
                                            const og__payout_claim_req *r,
                                            const og__payout_claim_facts *f,
                                            const og__payout_claim_plan *p,
                                            og_operation *attempt);
/* The resolution's outcome (M35): og_op_record's own write (status in
 * expected AND owner version, with its "outcome" event) in tx. *recorded
 * false: it took nothing. */
typedef int og__store_payout_resolve_record_fn(void *impl, void *tx,
                                               const char *operation_id,
                                               unsigned expected,
                                               int64_t owner_version,
                                               const og_op_outcome *o,
                                               const char *source,
                                               bool *recorded);
/* The attempt's binding (through the operation's grant) and payout, each by
 * its key (M35). found = false: not a payout attempt with a binding. */
typedef int og__store_payout_resolve_facts_fn(void *impl, void *tx,
                                              const char *operation_id,
                                              og__payout_resolve_facts *out);
/* RESOLVED's writes (M35): the payout to p->to, for a terminal outcome the
 * binding released once and its day's counters, one "resolved" entry. */
typedef int og__store_payout_resolve_write_fn(
    void *impl, void *tx, const char *operation_id, const og_op_outcome *o,
    const og__payout_resolve_facts *f, const og__payout_resolve_plan *p);

/* ---- after the send (schema 11; M36) ------------------------------------ */

/* og_payout_reconcile_later's ONE conditional write: *deferred false when
 * it took nothing. */
typedef int og__store_payout_reconcile_later_fn(void *impl,
                                                const char *operation_id,
                                                int64_t owner_version,
                                                int64_t delay_us,
                                                const char *reason,
                                                const char *actor,
                                                bool *deferred);
/* The operation's row in tx, held until it ends (late evidence): 1 and
 * *out, 0 none, <0 an error. */
typedef int og__store_payout_attempt_read_fn(void *impl, void *tx,
                                             const char *operation_id,
                                             og_operation *out);
/* An operator's resolution's record step in tx (M36): og_op_resolve's
 * conditional write (NeedsReconciliation -> to, owner version + 1, the
 * "resolved" event) with the NotApplied guard; its instant is the one the
 * resolution's writes share. *recorded false: it took nothing. */
typedef int og__store_payout_operator_record_fn(
    void *impl, void *tx, const char *operation_id, og_op_status to,
    const char *operator_id, const char *reason, const char *evidence,
    const char *provider_reference, bool *recorded);
/* og_payout_return_record's ONE write (M36): *recorded false when it took
 * nothing. */
typedef int og__store_payout_return_fn(void *impl, const char *payout_id,
                                       const char *provider_reference,
                                       const char *actor,
                                       const char *evidence, bool *recorded);

/* ---- the payout store's jobs and grants (M27, M32, M33) ----------------- */

/* 1 taken, 0 none available, negative error. */
typedef int og__store_payout_job_take_fn(void *impl, int64_t lease_us,
                                         og_payout_job *out);
typedef int og__store_payout_job_ack_fn(void *impl, const char *job_id,
                                        int64_t delivery, bool *acked);
typedef int og__store_payout_job_postpone_fn(void *impl, const char *job_id,
                                             int64_t delivery,
                                             int64_t delay_us,
                                             bool *postponed);
/* 1 and new_id written (payout_run.c generated it, or the caller's key),
 * 0 no such job, 2 a job with new_id exists already (nothing written). */
typedef int og__store_payout_job_resubmit_fn(void *impl, const char *job_id,
                                             const char *actor,
                                             const char *new_id);
/* 1 found (state derived with og__payout_grant_state), 0, <0. */
typedef int og__store_payout_grant_get_fn(void *impl, const char *grant_id,
                                          og_payout_grant_view *out);
/* The grant's row, live (unconsumed, unrevoked), revoked: ONE conditional
 * write; its reservation released once with it (M32). */
typedef int og__store_payout_grant_revoke_fn(void *impl,
                                             const char *grant_id,
                                             const char *actor,
                                             og__payout_revoke_report *out);
/* ONE batch of og_payout_expire_grants (M32), with a keyset cursor on
 * expires_at as cleanup_batch's: *taken the grants released (at most
 * batch), *from_us raised to the greatest expires_at taken. */
typedef int og__store_payout_expire_batch_fn(void *impl, int batch,
                                             int64_t *from_us,
                                             int64_t *taken);

/* og_payout_stats_read (payout_run.c): ONE read statement, one snapshot;
 * out zeroed by the caller; 0 or the error. */
typedef int og__store_payout_stats_fn(void *impl, og_payout_stats *out);

/* A backend: its name and its methods, in the order of the sections
 * above. */
typedef struct og__store_methods {
    const char *name; /* "sqlite", "postgres" */
    /* the store */
    og__store_open_fn *open;
    og__store_close_fn *close;
    og__store_schema_version_fn *schema_version;
    og__store_session_bounds_fn *session_bounds; /* NULL: none */
    og__store_migrate_fn *migrate;
    og__store_read_keys_fn *read_keys;
    og__store_explain_fn *explain;
    /* the admission */
    og__store_admit_fn *admit;
    og__store_admit_batch_fn *admit_batch;
    og__store_admit_stats_fn *admit_stats;
    og__store_operation_get_fn *operation_get;
    /* the grant lifecycle */
    og__store_issuance_record_fn *issuance_record;
    og__store_revoke_fn *revoke;
    og__store_family_revoke_fn *family_revoke;
    og__store_consume_fn *consume;
    og__store_consume_batch_fn *consume_batch;
    og__store_consume_stats_fn *consume_stats;
    og__store_ticket_create_fn *ticket_create;
    og__store_ticket_rotate_fn *ticket_rotate;
    og__store_rotate_batch_fn *rotate_batch;
    og__store_rotate_stats_fn *rotate_stats;
    /* execution */
    og__store_op_may_submit_fn *op_may_submit;
    og__store_op_start_fn *op_start;
    og__store_op_record_fn *op_record;
    og__store_outcome_batch_fn *outcome_batch;
    og__store_outcome_stats_fn *outcome_stats;
    og__store_op_takeover_fn *op_takeover;
    og__store_op_resolve_fn *op_resolve;
    og__store_op_list_fn *op_list;
    og__store_op_insert_fn *op_insert;
    og__store_op_history_fn *op_history;
    /* retention */
    og__store_cleanup_batch_fn *cleanup_batch;
    og__store_archive_batch_fn *archive_batch;
    /* redemption recovery points */
    og__store_redemption_put_fn *redemption_put;
    og__store_redemption_get_fn *redemption_get;
    /* the payout store's records */
    og__store_payout_tenant_put_fn *payout_tenant_put;
    og__store_payout_beneficiary_put_fn *payout_beneficiary_put;
    og__store_payout_destination_put_fn *payout_destination_put;
    og__store_payout_destination_token_fn *payout_destination_token;
    og__store_payout_draft_fn *payout_draft;
    og__store_payout_cancel_fn *payout_cancel;
    og__store_payout_edit_fn *payout_edit;
    og__store_payout_get_fn *payout_get;
    og__store_payout_decision_get_fn *payout_decision_get;
    og__store_payout_history_fn *payout_history;
    og__store_payout_policy_release_set_fn *payout_policy_release_set;
    /* the payout store's transactions and their steps */
    og__store_txn_begin_fn *txn_begin;
    og__store_txn_end_fn *txn_end;
    og__store_payout_facts_fn *payout_facts;
    og__store_payout_policy_release_fn *payout_policy_release;
    og__store_payout_reserve_fn *payout_reserve;
    og__store_payout_decision_write_fn *payout_decision_write;
    og__store_payout_decision_issue_fn *payout_decision_issue;
    og__store_payout_settle_read_fn *payout_settle_read;
    og__store_payout_claim_facts_fn *payout_claim_facts;
    og__store_payout_claim_write_fn *payout_claim_write;
    og__store_payout_resolve_record_fn *payout_resolve_record;
    og__store_payout_resolve_facts_fn *payout_resolve_facts;
    og__store_payout_resolve_write_fn *payout_resolve_write;
    /* the payout store's jobs and grants */
    og__store_payout_job_take_fn *payout_job_take;
    og__store_payout_job_ack_fn *payout_job_ack;
    og__store_payout_job_postpone_fn *payout_job_postpone;
    og__store_payout_job_resubmit_fn *payout_job_resubmit;
    og__store_payout_grant_get_fn *payout_grant_get;
    og__store_payout_grant_revoke_fn *payout_grant_revoke;
    og__store_payout_expire_batch_fn *payout_expire_batch;
    og__store_payout_stats_fn *payout_stats; /* operators' statistics */
    /* after the send (schema 11) */
    og__store_payout_reconcile_later_fn *payout_reconcile_later;
    og__store_payout_attempt_read_fn *payout_attempt_read;
    og__store_payout_operator_record_fn *payout_operator_record;
    og__store_payout_return_fn *payout_return;
} og__store_methods;

/* og_store_explain's Markdown: a statement's heading, its text as the
 * store prepares it (a ```sql block, which docs/plans.md must repeat
 * verbatim) and the values it is planned with (n of them, NULL: SQL NULL).
 * Errors of out are the caller's to check (ferror/fclose). */
void og__explain_statement(FILE *out, const char *title, const char *name,
                           const char *sql, const char *const *values, int n);
/* A plan: an optional caption line, then the lines in a ```text block. */
void og__explain_plan(FILE *out, const char *caption,
                      const char *const *lines, int n);

extern const og__store_methods og__sqlite_methods;
extern const og__store_methods og__postgres_methods;

/* ===========================================================================
 * Test hooks (store.c, exec.c). Not used by the library itself.
 * ========================================================================= */

/* og_store_migrate, stopping at schema `version` (1..OG_SCHEMA_VERSION), so
 * tests can build a store as an older build left it and migrate it on.
 * OG_ESCHEMA when the store is already beyond version. */
int og__store_migrate_to(const char *url, const og_store_options *opts,
                         int version, int *from, int *to);

/* Admits (g[i], in[i]) for i in 0..n) as ONE batch of the store's group
 * commit, whatever else is queued (lib/store/postgres/admit_batch.c,
 * lib/store/sqlite/admit.c): so tests build a batch deterministically.
 * n is 1..OG_ADMIT_BATCH_MAX, the grants of one form, no two sharing a
 * grant key or an operation id (OG_EINVAL otherwise). Returns 0 with
 * rcs[i] and out[i] as og_admit(g[i], in[i]) would return and fill them,
 * or an input error (the first bad row's) before anything runs. */
int og__admit_batch(og_store *s, int n, const og_grant *g,
                    const og_intent *in, og_admission *out, int *rcs);

/* Writes rows[0..n) (1..OG_ADMIT_BATCH_MAX) as ONE batch of the store's
 * group commit of outcomes, whatever else is queued (lib/store/sqlite/
 * exec.c): so tests build a batch deterministically. Each row is checked as
 * og_op_start or og_op_record checks its input — except the transition
 * table (og__op_outcome_check's first test), which a test may break to
 * hand the store a row the schema's CHECK refuses (a row-level error).
 * Returns 0 with rcs[i] and rows[i].hit as the one-row call would return
 * and fill them; an input error (the first bad row's) before anything
 * runs; OG_EINVAL on a backend that does not batch outcomes. */
int og__op_outcome_batch(og_store *s, og__outcome_row *rows, int n,
                         int *rcs);
/* The consume verdict of g[i] for i in 0..n) as ONE batch of the store's
 * group commit (lib/store/postgres/consume_batch.c,
 * lib/store/sqlite/admit.c), as og__admit_batch: n is
 * 1..OG_ADMIT_BATCH_MAX, the grants of one form, no two sharing a grant
 * key (OG_EINVAL otherwise). Returns 0 with rcs[i] and out[i] as
 * og_consume(g[i]) would return and fill them, or an input error. */
int og__consume_batch(og_store *s, int n, const og_grant *g,
                      og_consume_result *out, int *rcs);
/* What the consume verdicts' group commit of s did (batches, rows,
 * fallbacks), as og_store_admit_stats for admissions; zeros for NULL s. */
void og__consume_stats(og_store *s, og_admit_stats *out);
/* The rotation of tickets[i] for i in 0..n) as ONE batch of the store's
 * group commit of rotations (lib/store/postgres/rotate_batch.c,
 * lib/store/sqlite/admit.c), as og__consume_batch: n is
 * 1..OG_ADMIT_BATCH_MAX, no two tickets alike (OG_EINVAL otherwise).
 * Returns 0 with rcs[i] and out[i] as og_ticket_rotate(tickets[i]) would
 * return and fill them, or an input error. */
int og__rotate_batch(og_store *s, int n, const char *const *tickets,
                     og_ticket_result *out, int *rcs);

/* Inserts an operation of kind k with grant g's issuer and id and in's
 * binding — status Admitted, owner version 1, lease_until and submit_by
 * from the store's clock as an admission sets them — WITHOUT claiming the
 * grant, so that tests can hold payout attempts before the payout claim
 * (docs/payouts.md, step 4) creates them. idempotency_key and
 * client_reference: NULL for the operation id, else og_id_valid() (checked
 * here, OG_EIDEMPOTENCY_KEY / OG_ECLIENT_REFERENCE). Returns 0 and *out,
 * an input error, or a store error (OG_EINTERNAL when the id or the grant
 * already has an operation). */
int og__op_insert(og_store *s, og_op_kind k, const og_grant *g,
                  const og_intent *in, const char *idempotency_key,
                  const char *client_reference, og_operation *out);

/* ===========================================================================
 * SQLite's pieces that tests and lib/core share.
 * ========================================================================= */

/* Registers og_consumption_key(issuer, grant_id) on db: the function above,
 * deterministic and innocuous. lib/store/sqlite/conn.c does it on every
 * connection; tests call it on their raw ones. SQLITE_OK or an error code. */
struct sqlite3;
int og__sqlite_register_key_function(struct sqlite3 *db);

/* Maps an SQLite extended result code to OG_ESTORE_UNAVAILABLE (busy,
 * locked, I/O, full, cantopen, interrupt, protocol...) or OG_EINTERNAL
 * (lib/store/sqlite/conn.c; tests/test_core.c checks its table). The
 * SQLite extended codes for the two unique keys that mean "refused",
 * SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE on operations,
 * are the admission's to read (lib/store/sqlite/admit.c). */
int og__sqlite_classify(int extended_rc);

#endif /* OG_STORE_INT_H */
