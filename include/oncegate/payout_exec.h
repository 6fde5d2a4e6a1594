/*
 * payout_exec.h — the payout pipeline's moving parts (lib/exec/payout.c,
 * lib/exec/payout_run.c): the WORKER that takes a job, validates, claims,
 * starts and sends one attempt; the SWEEPER that takes over attempts whose
 * owner's lease lapsed; the RECONCILER that settles Unknown attempts from
 * the provider's records; and a RUNNER that loops them on threads.
 * docs/payouts.md, sections 5 and 6, is the design; PX1-PX9 in
 * lib/exec/payout.c are the invariants the code keeps.
 *
 * These log nothing: each call returns what happened — an end, a stable
 * reason code, identifiers, counts — and the caller logs identifiers. No
 * destination token and no provider credential is ever in a result, an
 * error or a store write: the worker and the reconciler fetch them only
 * when they are about to use them, and wipe their buffers after.
 *
 * Layer: exec (store + provider). Conventions as in oncegate/core.h: 0 or
 * a negative OG_E* code; an outcome is a value; out-parameters are written
 * only on success; every pointer is borrowed for the call. Part of the
 * public API (oncegate/oncegate.h includes it).
 */
#ifndef ONCEGATE_PAYOUT_EXEC_H
#define ONCEGATE_PAYOUT_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/execute.h"
#include "oncegate/payout.h"
#include "oncegate/payout_store.h"
#include "oncegate/provider.h"
#include "oncegate/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fetches the provider credential (the API key) into out (outlen bytes),
 * NUL-terminated: 0, or < 0 when there is none (nothing is sent then). It
 * is called only after the worker's claim committed — before its Started
 * write, so a worker without a credential leaves its attempt Admitted and
 * the sweeper ends it NotStarted — or after the reconciler's takeover,
 * never earlier; the caller wipes out. */
typedef int (*og_payout_credential_fn)(void *arg, char *out, size_t outlen);

/* The most bytes of a provider credential. */
#define OG_PAYOUT_CREDENTIAL_MAX 4095

/* ---------------------------------------------------------------------------
 * The worker (docs/payouts.md, section 5).
 * ------------------------------------------------------------------------- */

typedef struct og_payout_worker_cfg {
    const char *worker_id;       /* the presenting principal (og_id_valid):
                                    the attempt's caller, every write's
                                    actor ("svc-payout-worker") */
    const char *audience;        /* the audience this worker presents: its
                                    principal, the one the deciding side
                                    issues grants to (serve: payouts.
                                    worker_id; library callers and tests:
                                    OG_PAYOUT_AUDIENCE); a grant naming
                                    another is refused */
    const char *provider_url;    /* the client is opened per attempt, with
                                    the credential fetched only after the
                                    claim committed */
    const og_provider_table *table; /* the payouts classification table:
                                    classifies answers, and its processing
                                    window gives the claim's
                                    final_absence_margin_us */
    og_payout_credential_fn credential;
    void *credential_arg;
    int64_t job_lease_us;        /* the job's delivery lease (1 ms ..
                                    OG_PAYOUT_LEASE_MAX_US) */
    int64_t attempt_lease_us;    /* the attempt's owner lease (idem): past
                                    it the sweeper takes the attempt over */
    int64_t send_window_us;      /* submit_by = claim + this (idem) */
    int64_t provider_timeout_us; /* each create call's own timeout (> 0) */
    int64_t record_timeout_us;   /* how long an outcome's record is retried
                                    after a store failure, reading the
                                    attempt between tries (>= 0) */
    int64_t postpone_us;         /* a postponed job comes again after this
                                    (0 .. OG_PAYOUT_LEASE_MAX_US) */
    int max_sends;               /* same-key sends of one attempt, >= 1 */
    int64_t clock_error_us;      /* added to the table's processing window
                                    for the attempt's final-absence cutoff:
                                    the store's clock may run behind the
                                    provider's by this much (>= 0) */
    /* Told once per attempt, on the worker's thread, after its Started
     * write was confirmed and before the first create is sent (NULL:
     * nobody): what a host logs or counts as "attempt started". It must
     * not call back into the worker. */
    void (*on_started)(void *arg, const char *attempt_id);
    void *on_started_arg;
} og_payout_worker_cfg;

/* X(NAME, stable text) — what one job came to. Counted by the runner. */
#define OG_PAYOUT_WORK_END_MAP(X)                                              \
    X(IDLE, "idle")           /* no job was available */                      \
    X(REFUSED, "refused")     /* validation or the claim refused: reason    \
                                 says why; acknowledged; nothing sent */       \
    X(POSTPONED, "postponed") /* the context (or the grant) could not be    \
                                 read, or the grant's window has not opened \
                                 yet: the job comes again; nothing sent */    \
    X(DUPLICATE, "duplicate") /* a redelivery: the grant is consumed by this\
                                 payout's attempt for this binding;         \
                                 acknowledged, nothing changed or sent */     \
    X(CLAIM_UNCONFIRMED, "claim_unconfirmed") /* the claim's commit was not \
                                 confirmed: nothing sent, nothing           \
                                 acknowledged; a redelivery or the sweeper  \
                                 finds out */                                  \
    X(NOT_SENT, "not_sent")   /* claimed, but the start was refused, or the \
                                 destination token, the credential or the   \
                                 client was unavailable: nothing sent; the  \
                                 sweeper settles the attempt */              \
    X(START_UNCONFIRMED, "start_unconfirmed") /* og_op_start failed: it may \
                                 or may not have committed; nothing sent */  \
    X(SENT, "sent")           /* at least one create was sent: answer and  \
                                 attempt_status say what came of it */

typedef enum og_payout_work_end {
#define OG__PWE_ENUM(name, text) OG_PAYOUT_WORK_##name,
    OG_PAYOUT_WORK_END_MAP(OG__PWE_ENUM)
#undef OG__PWE_ENUM
    OG_PAYOUT_WORK_END_COUNT
} og_payout_work_end;

/* The number of worker reason codes (OG_PAYOUT_WORKER_REASON_MAP). */
#define OG__PWR_ONE(name, code) +1
enum { OG_PAYOUT_WORKER_REASON_COUNT =
           0 OG_PAYOUT_WORKER_REASON_MAP(OG__PWR_ONE) };
#undef OG__PWR_ONE

/* The end's stable text; "?" outside the list. */
const char *og_payout_work_end_name(og_payout_work_end e);

/* What one og_payout_work_once did. Plain data. */
typedef struct og_payout_work {
    og_payout_work_end end;
    og_payout_worker_reason reason; /* REFUSED: the stable code (the claim's
                                    outcomes map to the same codes);
                                    POSTPONED: context.unavailable, or none
                                    for a window not yet open; else none */
    int error;                   /* the store's or client's error behind
                                    POSTPONED, CLAIM_UNCONFIRMED,
                                    START_UNCONFIRMED, NOT_SENT, or a
                                    record that failed after a send; else 0 */
    og_payout_job job;           /* the job taken (zeroed when IDLE) */
    bool acknowledged;           /* the job was acknowledged by this call */
    int sends;                   /* create calls made (0 unless SENT) */
    og_provider_outcome answer;  /* SENT: the last answer's classification
                                    (reason and reference, never a token) */
    og_op_status attempt_status; /* the attempt as this worker leaves it:
                                    what it recorded, Started (transient
                                    answers exhausted, or 202 pending: the
                                    sweeper and the reconciler go on), or as
                                    read (DUPLICATE); ADMITTED otherwise */
    bool recorded;               /* SENT: this worker's record committed */
    bool late_evidence;          /* SENT: the record found the attempt taken
                                    over, and the answer resolved it through
                                    og_payout_evidence ("late-response") */
    char attempt_id[OG_UUID_LEN + 1]; /* "" when no attempt is known */
    char decision_id[OG_UUID_LEN + 1]; /* the decision that issued the
                                          job's grant, once the grant was
                                          read and is this payout's; ""
                                          before (logs: docs/http.md) */
    bool security_signal;        /* binding.mismatch, presenter.not-audience,
                                    or a consumed grant that is not this
                                    binding's: someone presents what was not
                                    issued to them */
} og_payout_work;

/* Takes one job and carries it as far as it may go: validate (the order of
 * docs/payouts.md, section 5, step 2; the recheck with the requester's
 * facts the grant's decision captured, og_payout_decision_get), claim,
 * fetch the token and the credential, og_op_start, send with the attempt's
 * key, reference and expires_at = submit_by, classify, record
 * (og_payout_resolve). The ends above say where it stopped; every refusal
 * acknowledges the job, a postponement or an unconfirmed claim does not. A
 * grant whose decision is missing, not Allowed or another payout's is
 * POSTPONED context.unavailable with error OG_EINTERNAL: a broken store,
 * never a send.
 *
 * Returns 0 and *out for every end, or an error before any job was taken:
 * OG_EINVAL (c incomplete or out of bounds, checked before any I/O), or
 * og_payout_job_take's store error. Thread-safe as the store and the client
 * are: any number of workers may run at once, on one store object or
 * several. */
OG_MUST_CHECK int og_payout_work_once(og_store *s, const og_payout_worker_cfg *c,
                                      og_payout_work *out);

/* ---------------------------------------------------------------------------
 * The sweeper (docs/payouts.md, section 6; SW1-SW4).
 * ------------------------------------------------------------------------- */

typedef struct og_payout_sweep_stats {
    int scanned;     /* Admitted or Started payout attempts past their lease */
    int taken;       /* taken over (owner version + 1) */
    int not_started; /* recorded NotStarted (were Admitted: sent nothing) */
    int unknown;     /* recorded Unknown (were Started) */
    int later;       /* someone else got there first: nothing done */
    int errors;      /* a store error on one attempt: left for a later pass */
} og_payout_sweep_stats;

/* One sweeper pass: up to limit (1..1000) Admitted or Started payout
 * attempts whose lease lapsed, oldest first: og_op_takeover, then
 * og_payout_after_takeover's decision recorded with og_payout_resolve
 * expecting exactly the status taken over at the new owner version
 * (NotStarted releases the reservation and makes the payout Approved
 * again; Unknown holds both). Never sends. Returns 0 and *out, or OG_EINVAL
 * (actor not an id, limit out of range) or the scan's store error. */
OG_MUST_CHECK int og_payout_sweep_once(og_store *s, const char *actor,
                                       int limit, og_payout_sweep_stats *out);

/* ---------------------------------------------------------------------------
 * The reconciler (docs/payouts.md, section 6; RC1-RC8).
 * ------------------------------------------------------------------------- */

typedef struct og_payout_reconciler_cfg {
    const char *actor;           /* og_id_valid: the history's actor */
    const char *provider_url;
    const og_provider_table *table; /* the payouts table (a lookup by
                                    reference documented) */
    og_payout_credential_fn credential;
    void *credential_arg;
    const int64_t *backoff_us;   /* 1..16 steps, each 1 ms ..
                                    OG_PAYOUT_LEASE_MAX_US: the wait after
                                    the Nth lookup (the last one repeats) */
    int backoff_n;
    int64_t escalate_after_us;   /* the deadline is submit_by + this (and
                                    never before the attempt's final-absence
                                    cutoff); >= 0 — the design's 60 minutes,
                                    or the provider's processing window if
                                    longer */
    int max_per_pass;            /* the bounded rate: lookups per pass,
                                    1..1000 */
    int64_t provider_timeout_us; /* each lookup's own timeout, > 0 */
} og_payout_reconciler_cfg;

typedef struct og_payout_reconcile_stats {
    int scanned;     /* Unknown payout attempts past their lease */
    int looked_up;   /* lookups sent */
    int succeeded, failed, not_applied, escalated; /* recorded */
    int later;       /* backed off (og_payout_reconcile_later), or someone
                        else got there first */
    int returned;    /* return events recorded (P8) */
    int errors;      /* a store or client error on one attempt */
} og_payout_reconcile_stats;

/* One reconciler pass: up to c->max_per_pass Unknown payout attempts whose
 * lease (the last takeover's, or the last backoff's) lapsed, oldest first:
 * og_op_takeover (its taken_at is the lookup's instant), the destination
 * token at the payout's destination version and the credential, then
 * og_provider_lookup_payout by the attempt's client reference with its
 * terms, og_payout_after_lookup, and either og_payout_resolve (RECORD; and
 * og_payout_return_record when the payout was found returned) or
 * og_payout_reconcile_later with the backoff (LATER). Never sends a create
 * (RC8). Returns 0 and *out, or OG_EINVAL (c incomplete or out of bounds,
 * before any I/O) or the scan's store error. */
OG_MUST_CHECK int og_payout_reconcile_once(og_store *s,
                                           const og_payout_reconciler_cfg *c,
                                           og_payout_reconcile_stats *out);

/* ---------------------------------------------------------------------------
 * The runner (lib/exec/payout_run.c): workers, a sweeper, a reconciler and
 * a janitor (og_payout_expire_grants) looping on threads until stopped, with
 * counters readable while it runs. Used by `oncegate payouts run`.
 * ------------------------------------------------------------------------- */

typedef struct og_payout_runner og_payout_runner;

typedef struct og_payout_runner_cfg {
    og_payout_worker_cfg worker;   /* every worker's; worker_id is suffixed
                                      "-1", "-2", ... when workers > 1 */
    int workers;                   /* 0..64 worker threads */
    bool sweeper;                  /* run the sweeper */
    bool reconciler;               /* run the reconciler (with .reconcile) */
    bool janitor;                  /* run og_payout_expire_grants */
    og_payout_reconciler_cfg reconcile;
    const char *sweeper_actor;     /* og_id_valid */
    int sweep_limit;               /* 1..1000 */
    int janitor_batch, janitor_max_batches; /* og_payout_expire_grants' */
    int64_t idle_wait_us;          /* a worker that found no job waits this
                                      (1 ms .. 60 s) */
    int64_t interval_us;           /* between the sweeper's, reconciler's
                                      and janitor's passes (1 ms .. 1 h) */
    /* Told of every job a worker took (not IDLE), on the worker's thread;
     * it must not call back into the runner. NULL: nobody is told. */
    void (*on_work)(void *arg, const og_payout_work *w);
    void *on_work_arg;
} og_payout_runner_cfg;

typedef struct og_payout_runner_counts {
    int64_t ends[OG_PAYOUT_WORK_END_COUNT];         /* by og_payout_work_end */
    int64_t reasons[OG_PAYOUT_WORKER_REASON_COUNT]; /* REFUSED and POSTPONED
                                                       jobs by reason */
    int64_t sends;            /* create calls */
    int64_t security_signals;
    int64_t worker_errors;    /* og_payout_work_once errors (job take) */
    og_payout_reconcile_stats reconcile;  /* summed over passes */
    og_payout_sweep_stats sweep;          /* summed over passes */
    int64_t expired_grants;   /* reservations released by the janitor */
    int64_t pass_errors;      /* sweeper, reconciler or janitor passes that
                                 failed as a whole */
    int64_t idle_passes;      /* og_payout_runner_idle's checks that found
                                 nothing to do */
} og_payout_runner_counts;

/* Starts the runner's threads on s (borrowed: it must outlive the runner;
 * the configuration's strings and table too). Returns 0 and *out, or
 * OG_EINVAL (a configuration out of bounds, checked before any thread
 * starts), OG_ENOMEM, OG_EINTERNAL (a thread could not be created: the
 * ones started are stopped). */
OG_MUST_CHECK int og_payout_runner_start(og_store *s,
                                         const og_payout_runner_cfg *c,
                                         og_payout_runner **out);

/* A consistent copy of the counters so far. */
void og_payout_runner_counts_get(og_payout_runner *r,
                                 og_payout_runner_counts *out);

/* Whether there is nothing left to do: every worker's last take found no
 * job, and the store holds no payout attempt Admitted, Started or Unknown
 * (a NeedsReconciliation attempt waits for a person). Reads the store:
 * 1 idle, 0 not, or a store error. A job postponed to a later time is not
 * seen until it is available again. */
OG_MUST_CHECK int og_payout_runner_idle(og_payout_runner *r);

/* Asks every thread to stop after what it is doing, and waits for them.
 * Idempotent. NULL is a no-op. */
void og_payout_runner_stop(og_payout_runner *r);

/* Stops (og_payout_runner_stop) and frees the runner. NULL is a no-op. */
void og_payout_runner_free(og_payout_runner *r);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_PAYOUT_EXEC_H */
