/*
 * pipeline.h — what the files of pipeline_test share: the payout pipeline
 * end to end (docs/payouts.md, sections 5 to 8): the worker, the sweeper
 * and the reconciler of lib/exec/payout.c (oncegate/payout_exec.h) against
 * the REAL sandbox provider (oncegate-sandbox --control, OG_TEST_SANDBOX)
 * and a real store engine:
 *
 *   pipeline_test sqlite | postgres      (postgres skips without
 *                                          OG_TEST_PG_URL, tests/harness.c)
 *
 * Every test builds its own world in a store of its own (t_fresh_store: the
 * sweeper and the reconciler scan the whole store) and a sandbox of its own
 * (so its counters are the test's), seeds the running example of
 * docs/payouts.md, runs the pipeline's steps, and asserts BOTH what the
 * provider saw (GET /_control/stats: payout_requests, payouts_created,
 * payout_lookups) and what the store holds (read through the store and,
 * behind its back, through tests/harness.c's raw access).
 *
 * harness.c holds the sandbox process, the world, the pipeline's
 * configurations and the reads; the tests are in the other files by topic;
 * main.c lists them in the order they run.
 */
#ifndef OG_TEST_PIPELINE_H
#define OG_TEST_PIPELINE_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../harness.h"
#include "oncegate/payout_exec.h"
#include "oncegate/payout_store.h"
#include "oncegate/provider.h"
#include "support.h"

#ifndef OG_TEST_FAULT_INJECTION
#define OG_TEST_FAULT_INJECTION 0
#endif

#define PL_SEC INT64_C(1000000)
#define PL_MS INT64_C(1000)
#define PL_MINUTE (60 * PL_SEC)
#define PL_DAY (86400 * PL_SEC)

/* The sandbox's credential: the file its --api-key-file reads, and what
 * the pipeline's credential callback hands the worker. A secret: the
 * secrets test looks for it everywhere. */
#define PL_CREDENTIAL "sbx-cred-SECRET-5e1b9d04c2"

/* ===========================================================================
 * The sandbox process
 * ========================================================================= */

typedef struct pl_sbx {
    pid_t pid;
    char dir[PATH_MAX];  /* s.db, stdout, stderr, key */
    char url[128];       /* http://127.0.0.1:PORT */
    int skew_s;          /* --skew-seconds */
} pl_sbx;

/* Starts a sandbox in a fresh /tmp directory with --control, --api-key-file
 * (PL_CREDENTIAL) and --skew-seconds skew_s (the table the tests load
 * says the same: pl_table). Aborts the test on failure. */
void pl_sbx_up(pl_sbx *x, int skew_s);
/* Starts it again on the same state and port-0 (a new URL). */
void pl_sbx_restart(pl_sbx *x);
/* SIGTERM, wait; removes the directory when remove. */
void pl_sbx_stop(pl_sbx *x, bool remove);

/* The sandbox's counters (GET /_control/stats). */
typedef struct pl_stats {
    long long payout_requests, payouts_created, payout_lookups,
        payout_replays, payout_mismatches, payouts_returned;
} pl_stats;
pl_stats pl_stats_of(const pl_sbx *x);

/* POST /_control/faults {"fault": f, "count": n[, "ms": ms]} (ms < 0: none). */
void pl_arm(const pl_sbx *x, const char *fault, int count, int ms);
/* POST /_control/payouts/{id}/return: 1 returned, 0 otherwise. */
int pl_sbx_return(const pl_sbx *x, const char *provider_id);
/* A payout created at the sandbox directly, not through the pipeline (a
 * record under a reference that the pipeline did not make). Its HTTP
 * status. */
long pl_sbx_create(const pl_sbx *x, const char *key, const char *destination,
                   const char *amount, const char *reference,
                   int64_t expires_at_us);
/* GET /v1/payouts?reference=R (a lookup: payout_lookups counts it): how
 * many are listed, the first one's id into id. */
int pl_sbx_find(const pl_sbx *x, const char *reference, char *id,
                size_t idlen);
/* The sandbox's stderr log, malloc'd. */
char *pl_sbx_log(const pl_sbx *x);

/* ===========================================================================
 * A world: one store, one sandbox, the running example's records.
 * ========================================================================= */

/* The class of a world's destination: the sandbox's documented test
 * destinations (docs/sandbox.md, POST /v1/payouts). */
typedef enum pl_dst { PL_DST_OPEN, PL_DST_CLOSED, PL_DST_BUSY, PL_DST_ASYNC }
    pl_dst;

typedef struct pl_world {
    char tag[48];
    char url[4200];                 /* the store's */
    og_store *s;                    /* the test's own store object */
    t_raw *raw;                     /* behind its back */
    pl_sbx sbx;
    og_provider_table *table;       /* the payouts table, the sandbox's skew */
    char tenant[64], ben[64], dst[64];
    char token[96];                 /* the destination's provider token */
    int64_t tenant_v, ben_v, dst_v; /* versions, for later changes */
} pl_world;

/* Creates a world: a fresh store, a sandbox (skew_s), T-<tag> with a daily
 * limit of 50,000.00 EUR, its verified Active beneficiary, a destination
 * of class dst changed 30 days ago. */
void pl_world_up(pl_world *w, const char *tag, pl_dst dst, int skew_s);
void pl_world_down(pl_world *w);

/* Drafts payout id (an id "PAY-<tag>-<n>" written into id, 64 bytes) of
 * amount EUR. */
void pl_draft(pl_world *w, char *id, int n, const char *amount);

/* The clerk's request for payout id: clerk-22, approval limit 10,000.00,
 * a window open now (not_before 1 s ago, 30 minutes). */
og_payout_decide_req pl_decide_req(const char *id);
og_payout_decision pl_decide(pl_world *w, const og_payout_decide_req *r);
/* An Allowed decision with the window open now. */
og_payout_decision pl_decide_allowed(pl_world *w, const char *id);

/* ===========================================================================
 * The pipeline's configurations, as a test's deployment would set them.
 * ========================================================================= */

/* The worker: worker id "svc-payout-worker", audience OG_PAYOUT_AUDIENCE,
 * the world's sandbox and table, the credential callback below (arg: a
 * pl_cred), job lease 30 s, attempt lease 2 min, send window 5 min,
 * provider timeout 2 s, record timeout 5 s, postpone 100 ms, 3 sends. */
typedef struct pl_cred {
    bool missing;       /* the callback fails: no credential */
    int calls;          /* how often it was asked */
    int pipe_fd;        /* >= 0: pl_on_started writes one byte there, then
                           sleeps pause_ms (a paused worker, races.c) */
    int pause_ms;
} pl_cred;
/* og_payout_worker_cfg.on_started for a pl_cred: the pause point of a
 * worker stopped between its confirmed Started write and its send. */
void pl_on_started(void *arg, const char *attempt_id);
int pl_credential(void *arg, char *out, size_t outlen);
og_payout_worker_cfg pl_worker_cfg(const pl_world *w, pl_cred *c);

/* The reconciler: actor "svc-reconciler", backoff 50, 100, 200 ms,
 * escalation 2 minutes after submit_by, 10 lookups a pass. */
og_payout_reconciler_cfg pl_reconciler_cfg(const pl_world *w, pl_cred *c);
extern const int64_t pl_backoff[3];

/* The same with a fresh pl_cred c (no pause, a credential). */
og_payout_worker_cfg pl_cfg(const pl_world *w, pl_cred *c);
og_payout_reconciler_cfg pl_rcfg(const pl_world *w, pl_cred *c);

/* The running example's payout n: drafted (PL_AMOUNT EUR) and decided
 * Allowed with its window open now; its id into id (64 bytes). */
#define PL_AMOUNT "4250.00"
#define PL_AMOUNT_MINOR INT64_C(425000)
og_payout_decision pl_example(pl_world *w, char *id, int n);

/* Sleeps until the wall clock is at_us. */
void pl_wait_until_us(int64_t at_us);

/* One job through the worker; fails the test on an error. */
og_payout_work pl_work(pl_world *w, const og_payout_worker_cfg *c);
/* One sweeper pass / reconciler pass; fail on an error. */
og_payout_sweep_stats pl_sweep(pl_world *w);
og_payout_reconcile_stats pl_reconcile(pl_world *w,
                                       const og_payout_reconciler_cfg *c);

/* ===========================================================================
 * Reads
 * ========================================================================= */

og_payout_view pl_payout(pl_world *w, const char *id);
og_operation pl_attempt(pl_world *w, const char *op_id);
/* The payout's attempts (operations of its grants), 0.. */
int64_t pl_attempts(pl_world *w, const char *id);
/* The tenant's reserved and paid totals over all its days. */
int64_t pl_reserved(pl_world *w);
int64_t pl_paid(pl_world *w);
/* The decision's outcome now (payout_decisions, append-only): its
 * reason text into reason (64 bytes). */
void pl_decision_reason(pl_world *w, const char *decision_id, char *reason);
/* payout_events of the payout with kind, counted. */
int64_t pl_events(pl_world *w, const char *id, const char *kind);
/* The job is acknowledged (done_at set). */
bool pl_job_done(pl_world *w, const char *job_id);
/* Moves an attempt's lease (and, when submit_by_too, its submit_by and
 * final_absence_after) ms from now, behind the store's back. */
void pl_age_attempt(pl_world *w, const char *op_id, int lease_ms,
                    bool submit_by_too);
/* Makes job_id deliverable again now, as a broker's redelivery does (not
 * acknowledged, available now). */
void pl_redeliver(pl_world *w, const char *job_id);

/* Commits change_sql between the validation and the claim of the worker
 * that runs cfg's next job (job_id) on w's store: PostgreSQL holds the row
 * (table, key_col = key) the claim locks FOR SHARE, FOR UPDATE, while the
 * worker validates (its reads take no lock); SQLite holds the write lock
 * between the job's take and the claim (both writes; the validation's
 * reads are not), checked inside the lock. Returns true and *out (the
 * worker's result) when the change landed there; false when the claim came
 * first (the caller tries again on a fresh world). */
bool pl_between_validation_and_claim(pl_world *w, const char *job_id,
                                     const char *table, const char *key_col,
                                     const char *key, const char *change_sql,
                                     const og_payout_worker_cfg *cfg,
                                     og_payout_work *out);


/* Sets / clears OG_FAULT (lib/core/fault.c) in this process. */
void pl_fault(const char *name);

/* The state names, for messages. */
const char *pl_status_name(og_op_status st);

/* ===========================================================================
 * The tests, file by file (main.c lists them in the order they run)
 * ========================================================================= */

/* matrix.c */
void every_blocked_path_makes_zero_provider_calls(void **state);

/* claims.c */
void deterministic_rejection_leaves_the_decision_allowed(void **state);
void timeout_after_acceptance_is_unknown_and_blocks_a_second_payout(
    void **state);
void reconciliation_confirms_success_without_a_duplicate_payout(void **state);
void started_write_refused_sends_nothing(void **state);
void started_write_unconfirmed_sends_nothing(void **state);
void nothing_resends_after_a_timeout_and_nothing_is_sent_after_submit_by(
    void **state);
void reconciliation_resolves_each_of_two_attempts_from_its_own_record(
    void **state);
void returned_payout_stays_succeeded_and_the_return_is_an_event(void **state);
void late_response_resolves_an_unknown_attempt_as_evidence(void **state);
void reconciliation_never_records_not_applied_before_the_cutoff(void **state);
void claim_ack_lost_sends_nothing_and_the_sweeper_resolves_it(void **state);
void sweeper_fences_admitted_as_not_started_and_started_as_unknown(
    void **state);
void worker_that_lost_its_lease_cannot_write_a_state_transition(void **state);

/* races.c */
void concurrent_workers_on_one_grant_make_one_attempt_and_one_provider_call(
    void **state);
void context_change_between_validation_and_claim_makes_zero_provider_calls(
    void **state);
void two_payouts_run_concurrently_cannot_exceed_the_daily_limit(void **state);
void paused_worker_past_its_lease_has_its_late_request_refused(void **state);

/* traces.c */
void trace_a_non_allowed_decision_issues_nothing(void **state);
void trace_b_refused_grants_make_zero_provider_calls(void **state);
void trace_c_payout_no_longer_executable(void **state);
void trace_d_claim_lost(void **state);
void trace_e_deterministic_provider_rejection(void **state);
void trace_f_ambiguous_timeout(void **state);
void trace_g_reconciliation_confirms_success(void **state);
void no_secret_anywhere(void **state);
void cli_run_leaves_no_secret_in_its_output(void **state);

#endif
