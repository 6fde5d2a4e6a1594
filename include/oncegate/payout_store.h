/*
 * payout_store.h — the decision side of a delayed payout in the store
 * (schemas 8-12; docs/payouts.md, sections 4-6): the authoritative
 * context records, the decision transaction, the jobs, the payout grants'
 * reads, revocation and expiry. The pure rules are oncegate/payout.h; this
 * header is the part that reads and writes.
 *
 *   context    tenants (settings, versioned), tenant_days (the paid and
 *              reserved counters of one release day), beneficiaries,
 *              destinations (with the provider token: a SECRET), payouts.
 *              Every change moves the record's version.
 *   decision   og_payout_decide: the context read and the decision written
 *              in ONE transaction; an Allowed decision also reserves the
 *              amount against the day's limit, approves the payout,
 *              allocates the attempt number, issues a row-form grant
 *              (issuer OG_PAYOUT_ISSUER, the `grants` table) with its
 *              bindings, and queues a job — all of it or nothing.
 *   jobs       the outbox IS the queue: taken with a delivery lease,
 *              acknowledged once, postponed, redelivered when the lease
 *              lapses, resubmitted by an operator. Delivery is at least
 *              once; a job carries references only.
 *   grants     read with their derived state, revoked (a finance hold),
 *              expired by a janitor; the reservation of an unconsumed grant
 *              is released exactly once, by whichever comes first.
 *
 *   claim      og_payout_claim: the grant consumed, the context fenced, the
 *              payout Executing and its attempt (an operation of kind
 *              payout) inserted — all of it or nothing (schema 9).
 *   resolution og_payout_resolve: the attempt's outcome recorded with
 *              og_op_record's conditional write, and in the same
 *              transaction the payout and the consumed grant's reservation
 *              moved to follow it (paid, released or held; schema 10).
 *   after      (schema 11) the reconciler's backoff, late evidence,
 *              returns, an operator's resolution of an escalated attempt.
 *
 * Conventions as in oncegate.h: 0 (or a documented non-negative answer) or
 * a negative OG_E* code; an outcome is a value, never an error; every input
 * is validated before anything reaches the store, and a bad one writes
 * nothing; out-parameters are written only on success; every pointer is
 * borrowed for the call. OG_ESTORE_UNAVAILABLE from a write means it may or
 * may not have happened: read before retrying. Times are the store's clock,
 * microseconds since the epoch.
 *
 * The provider token of a destination never leaves the store except through
 * og_payout_destination_token (the executor's read): no decision, grant,
 * job, event, snapshot or error carries it, and the store logs nothing.
 */
#ifndef ONCEGATE_PAYOUT_STORE_H
#define ONCEGATE_PAYOUT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"
#include "oncegate/payout.h"
#include "oncegate/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a payout grant is, in the grants table and its bindings. */
#define OG_PAYOUT_ISSUER "payouts"          /* grants.issuer */
#define OG_PAYOUT_OPERATION "payout.submit" /* the one operation */
/* The audience a library caller or a test names when it has no worker
 * principal of its own: a grant's audience is og_payout_decide_req's
 * (serve passes its worker principal, payouts.worker_id), and a worker
 * presents its own (og_payout_worker_cfg.audience). */
#define OG_PAYOUT_AUDIENCE "payout-executor"

/* Limits, checked before the store. */
#define OG_PAYOUT_LIMIT_MAX INT64_C(999999999999999999) /* daily and
                                                          approval limits */
#define OG_PAYOUT_TOKEN_MAX 512 /* a provider token's bytes */
#define OG_PAYOUT_LEASE_MAX_US (INT64_C(86400) * 1000000) /* job lease,
                                                             postponement */

/* ---------------------------------------------------------------------------
 * Writes of the context records: one conditional write each.
 * ------------------------------------------------------------------------- */

/* X(NAME, stable text) — what a conditional write did. */
#define OG_PAYOUT_WRITE_MAP(X)                                                 \
    X(WRITTEN, "written")     /* created or changed: version is the new one */ \
    X(VERSION_CONFLICT, "version_conflict") /* the record is not at the       \
                                 expected version (it exists when 0 = create  \
                                 was expected): nothing written */             \
    X(NOT_FOUND, "not_found") /* the record, or one it names, does not exist: \
                                 nothing written */                            \
    X(REFUSED, "refused")     /* the change is not allowed (each function     \
                                 says when): nothing written */

typedef enum og_payout_write {
#define OG__PW_ENUM(name, text) OG_PAYOUT_##name,
    OG_PAYOUT_WRITE_MAP(OG__PW_ENUM)
#undef OG__PW_ENUM
} og_payout_write;

typedef struct og_payout_put_result {
    og_payout_write outcome;
    int64_t version; /* WRITTEN: the record's version now; else 0 */
} og_payout_put_result;

/* A tenant's payout settings. */
typedef struct og_payout_tenant_settings {
    const char *tenant_id;      /* og_id_valid() */
    bool payouts_suspended;
    int64_t daily_limit;        /* minor units of currency,
                                   0..OG_PAYOUT_LIMIT_MAX */
    const char *currency;       /* og_payout_currency_scale(); fixed when the
                                   tenant is created: every payout, limit and
                                   counter of the tenant is in it */
    const char *settlement_time_zone; /* the settlement time zone, an IANA
                                   name (og_payout_time_zone_check:
                                   "Europe/Berlin", "UTC"); NULL: "UTC".
                                   The release day of a payout is its
                                   date there (og_payout_release_day) */
} og_payout_tenant_settings;

/* Creates the tenant (expected_version 0) or changes its settings
 * (expected_version: its settings_version now), moving settings_version:
 * ONE conditional write. Outcomes: WRITTEN; VERSION_CONFLICT; NOT_FOUND (a
 * change of a tenant that does not exist); REFUSED (a change of its
 * currency). Errors: OG_EPAYOUT_TENANT, OG_EPAYOUT_LIMIT,
 * OG_EPAYOUT_CURRENCY, OG_EPAYOUT_TIMEZONE, OG_EPAYOUT_VERSION, OG_EINVAL,
 * store errors. */
OG_MUST_CHECK int og_payout_tenant_put(og_store *s,
                                       const og_payout_tenant_settings *t,
                                       int64_t expected_version,
                                       og_payout_put_result *out);

typedef struct og_payout_beneficiary_record {
    const char *beneficiary_id; /* og_id_valid(); unique across tenants */
    const char *tenant_id;      /* fixed when created */
    bool verified;
    og_payout_beneficiary_status status;
} og_payout_beneficiary_record;

/* Creates (expected_version 0) or changes a beneficiary, moving its
 * version: ONE conditional write. NOT_FOUND: its tenant does not exist (or,
 * for a change, the beneficiary); REFUSED: a change of its tenant. Errors:
 * OG_EPAYOUT_BENEFICIARY, OG_EPAYOUT_TENANT, OG_EPAYOUT_VERSION, OG_EINVAL
 * (a status outside the list), store errors. */
OG_MUST_CHECK int og_payout_beneficiary_put(
    og_store *s, const og_payout_beneficiary_record *b,
    int64_t expected_version, og_payout_put_result *out);

typedef struct og_payout_destination_record {
    const char *destination_id; /* og_id_valid(); unique across tenants */
    const char *beneficiary_id; /* whom it is registered to; may change (the
                                   policy then denies destination.not-
                                   registered for payouts naming the old) */
    const char *provider_token; /* SECRET: 1..OG_PAYOUT_TOKEN_MAX printable
                                   ASCII without spaces */
} og_payout_destination_record;

/* Creates (expected_version 0) or changes a destination: ONE conditional
 * write that moves its version and sets changed_at to the store's clock
 * (a token rotation is a change: the policy's "destination changed in the
 * last 7 days"). NOT_FOUND: the beneficiary (or, for a change, the destination)
 * does not exist. Errors: OG_EPAYOUT_DESTINATION, OG_EPAYOUT_BENEFICIARY,
 * OG_EPAYOUT_TOKEN, OG_EPAYOUT_VERSION, OG_EINVAL, store errors. The token
 * appears in no error and no log. */
OG_MUST_CHECK int og_payout_destination_put(
    og_store *s, const og_payout_destination_record *d,
    int64_t expected_version, og_payout_put_result *out);

/* Creates a destination that was registered before this store knew it
 * (dev mode's section-1 scenario, docs/payouts.md: DST-77 registered long
 * before PAY-3107): as og_payout_destination_put with expected_version 0,
 * except that changed_at is the EARLIER of changed_at_us and the store's
 * clock — never a time ahead of the store, so it can only make the
 * "destination changed in the last 7 days" check see an older change, as
 * the registry being imported says. Never changes an existing destination
 * (VERSION_CONFLICT). Errors: as og_payout_destination_put, and OG_EINVAL
 * for changed_at_us outside 2000-01-01 .. 9999-12-31. */
OG_MUST_CHECK int og_payout_destination_import(
    og_store *s, const og_payout_destination_record *d, int64_t changed_at_us,
    og_payout_put_result *out);

/* The executor's read, and the only read of a provider token: the token of
 * destination_id if the destination is at version (the one the claim
 * fenced), NUL-terminated into out (outlen >= OG_PAYOUT_TOKEN_MAX + 1;
 * wipe it after use). Returns 1 and out, 0 (no such destination at that
 * version; out untouched), or an error. */
OG_MUST_CHECK int og_payout_destination_token(og_store *s,
                                              const char *destination_id,
                                              int64_t version, char *out,
                                              size_t outlen);

/* A clerk's draft: the exact payout, as terms. */
typedef struct og_payout_draft_req {
    const char *payout_id;    /* og_id_valid(): unique across tenants */
    og_payout_terms terms;    /* validated by the pure core: its input.*
                                 codes (OG_EPAYOUT_TENANT, _AMOUNT, ...) */
    const char *requester_id; /* the authenticated clerk */
} og_payout_draft_req;

/* Creates the payout in Draft at version 1 (attempt_count 0, no active
 * attempt), with a "drafted" history entry: ONE conditional write. The
 * amount is stored in minor units and the purpose normalized. Outcomes:
 * WRITTEN; VERSION_CONFLICT (the payout id exists); NOT_FOUND (the tenant,
 * the beneficiary within that tenant, or the destination); REFUSED (the
 * currency is not the tenant's). */
OG_MUST_CHECK int og_payout_draft(og_store *s, const og_payout_draft_req *r,
                                  og_payout_put_result *out);

/* Edits a Draft (docs/payouts.md, section 4: a payout's terms change only
 * while it is a Draft, and every change moves its version): r->terms
 * replace the payout's beneficiary, destination and its version, amount,
 * currency and purpose (validated as for og_payout_draft, the purpose
 * normalized), conditionally on expected_version (>= 1), moving the
 * version by one, with an "edited" history entry whose actor is
 * r->requester_id (the payout's own requester, who drafted it, is kept):
 * ONE conditional write. A decision made before the edit names the old
 * version, so it can be neither executed nor settled afterwards.
 * Outcomes: WRITTEN; VERSION_CONFLICT (a retried edit, or another change
 * first); NOT_FOUND (the payout, the beneficiary within its tenant, or the
 * destination); REFUSED (not a Draft, another tenant than the payout's, or
 * a currency not the tenant's). Errors: og_payout_draft's input errors,
 * OG_EPAYOUT_VERSION, store errors. */
OG_MUST_CHECK int og_payout_edit(og_store *s, const og_payout_draft_req *r,
                                 int64_t expected_version,
                                 og_payout_put_result *out);

/* Cancels the payout at expected_version (>= 1): Draft, or Approved with no
 * active attempt, -> Cancelled at version + 1, with a "cancelled" history
 * entry: ONE conditional write. An issued grant is left as it is: the
 * worker refuses it (payout.not-executable) and its reservation is released
 * when it expires unused (og_payout_expire_grants) or is revoked.
 * VERSION_CONFLICT; NOT_FOUND; REFUSED (another state, or an attempt is
 * active). */
OG_MUST_CHECK int og_payout_cancel(og_store *s, const char *payout_id,
                                   int64_t expected_version,
                                   const char *actor,
                                   og_payout_put_result *out);

/* A payout as stored. */
typedef struct og_payout_view {
    char payout_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];
    char beneficiary_id[OG_ID_MAX + 1];
    char destination_id[OG_ID_MAX + 1];
    int64_t destination_version;
    int64_t amount_minor;
    char amount[OG_PAYOUT_MONEY_TEXT_MAX + 1]; /* canonical text */
    char currency[OG_CURRENCY_LEN + 1];
    bool has_purpose;
    char purpose[OG_PAYOUT_PURPOSE_MAX + 1];   /* "" when absent */
    og_payout_state state;
    int64_t version;
    int64_t attempt_count;                      /* attempts allocated */
    char active_attempt[OG_UUID_LEN + 1];       /* "" when none */
    char release_day[OG_PAYOUT_DAY_LEN + 1];    /* of the last Allowed
                                                   decision; "" before */
    char requester_id[OG_ID_MAX + 1];           /* who drafted it */
    int64_t created_at_us, updated_at_us;
} og_payout_view;

/* Reads a payout: 1 and *out, 0 when there is none, or an error. */
OG_MUST_CHECK int og_payout_get(og_store *s, const char *payout_id,
                                og_payout_view *out);

/* ---------------------------------------------------------------------------
 * A payout's history (what an operator's `oncegate payout show`
 * reads): the payout_events rows the writes above append, one per step.
 * ------------------------------------------------------------------------- */

/* One entry of a payout's history. Identifiers and codes only: no entry
 * carries a destination token or a credential. */
typedef struct og_payout_event {
    int64_t seq;                          /* increasing per store */
    int64_t at_us;                        /* store clock */
    char kind[24];                        /* drafted | decided | reserved |
                                             approved | grant-issued |
                                             job-queued | cancelled |
                                             edited (schema 14) |
                                             grant-revoked |
                                             reservation-released |
                                             job-resubmitted | claimed |
                                             resolved | returned */
    char actor[OG_ID_MAX + 1];
    char correlation_id[OG_ID_MAX + 1];   /* "" when none, as below */
    char decision_id[OG_UUID_LEN + 1];
    char grant_id[OG_ID_MAX + 1];
    char job_id[OG_UUID_LEN + 1];
    char from_state[24], to_state[24];    /* og_payout_state names */
    int64_t payout_version;               /* 0 when none */
    bool has_amount;
    int64_t amount_minor;                 /* when has_amount */
    char release_day[OG_PAYOUT_DAY_LEN + 1];
    char reason[OG_ID_MAX + 1];           /* a reason code, an attempt's
                                             status, or (returned) the
                                             provider reference */
    char evidence[OG_EVIDENCE_MAX + 1];   /* schema 11 */
} og_payout_event;

typedef struct og_payout_events {
    og_payout_event *v;
    size_t n;
} og_payout_events;

/* The history of payout_id, oldest first: ONE read. Returns 0 and *out
 * (free with og_payout_events_free; n = 0 when there is no such payout),
 * or an error: OG_EPAYOUT_ID (checked before any I/O), OG_EINVAL, OG_ENOMEM
 * (also past 4,096 entries, far beyond what the protocol writes for one
 * payout), OG_EINTERNAL (a row the schema forbids), store errors. */
OG_MUST_CHECK int og_payout_history(og_store *s, const char *payout_id,
                                    og_payout_events *out);
void og_payout_events_free(og_payout_events *e);

/* ---------------------------------------------------------------------------
 * The context, read as one consistent state.
 * ------------------------------------------------------------------------- */

/* Why a context is unavailable. */
#define OG_PAYOUT_UNAVAILABLE_MAP(X)                                           \
    X(NONE, "none")                                                            \
    X(MISSING, "missing")  /* the payout (or a record it names) is not there */\
    X(STORE, "store")      /* the store could not be read (unreachable,       \
                              timed out, busy past its deadline) */

typedef enum og_payout_unavailable {
#define OG__PU_ENUM(name, text) OG_PAYOUT_UNAVAILABLE_##name,
    OG_PAYOUT_UNAVAILABLE_MAP(OG__PU_ENUM)
#undef OG__PU_ENUM
} og_payout_unavailable;

/* A context with the storage its pointers point into. ctx.payout.terms,
 * ctx.intent.terms and ctx.destination.beneficiary_id point into this
 * struct: a copy keeps pointing at the original until
 * og_payout_snapshot_bind() re-points it. */
typedef struct og_payout_snapshot {
    og_payout_context ctx;      /* unavailable, the facts, observed_at (the
                                   store's clock at the read); intent = the
                                   record's terms at the record's version;
                                   requester zeroed: the caller passes the
                                   facts a decision captured
                                   (og_payout_decision_get) */
    og_payout_unavailable why;  /* NONE exactly when !ctx.unavailable */
    char payout_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];
    char beneficiary_id[OG_ID_MAX + 1];
    char destination_id[OG_ID_MAX + 1];
    char destination_beneficiary_id[OG_ID_MAX + 1];
    char amount[OG_PAYOUT_MONEY_TEXT_MAX + 1];
    char currency[OG_CURRENCY_LEN + 1];
    bool has_purpose;
    char purpose[OG_PAYOUT_PURPOSE_MAX + 1];
    int64_t amount_minor;
    char release_day[OG_PAYOUT_DAY_LEN + 1]; /* the day whose counters are
                                                in ctx.tenant */
    char settlement_time_zone[OG_PAYOUT_TIME_ZONE_MAX + 1];
    int64_t day_version;        /* the day row's version; 0: no row yet */
    int64_t attempt_count;
    char active_attempt[OG_UUID_LEN + 1]; /* "" when none */
} og_payout_snapshot;

/* Re-points s->ctx's strings at s's own buffers (after a copy). */
void og_payout_snapshot_bind(og_payout_snapshot *s);

/* Reads, as ONE consistent state (SQLite: one read transaction; PostgreSQL:
 * one REPEATABLE READ, READ ONLY transaction), the payout, its tenant's
 * settings, the counters of the release day of release_at_us in the
 * tenant's settlement time zone (a worker passes its grant's not_before:
 * the day the decision reserved on, unless the zone changed since, which
 * moves settings_version), its beneficiary and its destination.
 *
 * "Unavailable" (0, ctx.unavailable, and why) means the facts cannot be had
 * right now, and the answer is to wait, never to allow: MISSING when the
 * payout is not there (the schema's foreign keys keep every record a payout
 * names), STORE when the store could not answer (OG_ESTORE_UNAVAILABLE:
 * unreachable, timed out, busy). Errors stay errors: input (OG_EPAYOUT_ID,
 * OG_EINVAL: release_at_us out of range), OG_EINTERNAL (a row that breaks
 * the schema's rules: a defect to see, not a wait), OG_ENOMEM. */
OG_MUST_CHECK int og_payout_context_read(og_store *s, const char *payout_id,
                                         int64_t release_at_us,
                                         og_payout_snapshot *out);

/* ---------------------------------------------------------------------------
 * The decision (docs/payouts.md, section 4): one persistence sequence.
 * ------------------------------------------------------------------------- */

typedef struct og_payout_decide_req {
    const char *payout_id;
    int64_t payout_version;     /* the version the requester acted on (the
                                   intent's); 0: the version read */
    bool reauthorize;           /* docs/payouts.md, P5: Approved with no
                                   active attempt is expected instead of
                                   Draft */
    const char *requester_id;   /* the authenticated principal: captured */
    const char *requester_role; /* captured */
    int64_t requester_approval_limit; /* minor units of the payout's
                                   currency, 0..OG_PAYOUT_LIMIT_MAX: captured */
    int64_t not_before_us;      /* the grant's window: the release batch */
    int64_t expires_at_us;      /* <= not_before + max_grant_lifetime */
    const char *correlation_id; /* groups records; never authorizes */
    const char *audience;       /* the grant's audience: the principal of
                                   the worker that may present it
                                   (og_id_valid; required: OG_EINVAL) */
    const char *settles_decision_id; /* NULL: a decision of its own. Else
                                   an approver's FRESH decision settling
                                   this payout's pending
                                   AcknowledgmentRequired or
                                   EscalationRecommended decision (a
                                   non-nil UUID); see og_payout_decide */
} og_payout_decide_req;

/* A decision as written. */
typedef struct og_payout_decision {
    char decision_id[OG_UUID_LEN + 1];
    og_payout_verdict verdict;  /* outcome, reason, policy version, terms
                                   fingerprint, evaluated versions */
    int64_t observed_at_us;     /* the facts' read (store clock) */
    int64_t decided_at_us;      /* the decision's write (store clock) */
    bool issued;                /* Allowed: everything below was written */
    char grant_id[OG_ID_MAX + 1];
    char job_id[OG_UUID_LEN + 1];
    int64_t attempt_number;
    int64_t executable_payout_version;
    int64_t reserved_minor;
    char release_day[OG_PAYOUT_DAY_LEN + 1];
    char settles_decision_id[OG_UUID_LEN + 1]; /* "" unless it settled one */
    int64_t acknowledged_destination_version;  /* 0: none acknowledged */
} og_payout_decision;

/* Decides on a payout. In ONE transaction (SQLite: BEGIN IMMEDIATE;
 * PostgreSQL: the policy's current release, then the payout's row FOR
 * UPDATE and its tenant, beneficiary and destination rows FOR SHARE, so
 * none of the facts can change before the decision commits) it reads the
 * policy's current release — when it is not this build's
 * OG_PAYOUT_POLICY_VERSION nothing is decided and nothing written
 * (OG_EPAYOUT_POLICY_RELEASE: a decision names the policy that made it,
 * and only the current one decides) — then the context, evaluates it with
 * og_payout_evaluate (og_payout_evaluate_reauthorization when reauthorize),
 * and writes:
 *   - Allowed: the reservation — ONE conditional update of the tenant's
 *     day row (paid + reserved + amount <= daily limit); when it fails the
 *     decision written is Denied tenant.daily-limit, alone — then the
 *     decision (append-only), the payout's move to Approved at version + 1
 *     with attempt_count + 1 (the attempt number), the row-form grant
 *     (issuer OG_PAYOUT_ISSUER, expires_at = the window's end), its
 *     bindings, the job, and a history entry per step;
 *   - anything else: the decision and its history entry, alone.
 * A missing payout is Deferred context.unavailable (written). Any failure
 * rolls everything back and is returned: nothing of the decision exists.
 *
 * Settling (settles_decision_id set; docs/payouts.md, section 4,
 * "Acknowledgment and escalation"): in the same transaction, after the
 * payout's row is held, the pending decision is read and the approval
 * refused with nothing written when it is not this payout's
 * AcknowledgmentRequired or EscalationRecommended decision
 * (OG_EPAYOUT_NOT_SETTLEABLE), a decision settled it already
 * (OG_EPAYOUT_ALREADY_SETTLED; the schema's unique settles_decision_id
 * backs it), its requester is this requester (OG_EPAYOUT_APPROVER_IS_
 * REQUESTER: four eyes), or the payout is no longer at the version it
 * evaluated (OG_EPAYOUT_SETTLE_STALE). Otherwise the policy runs afresh,
 * in the pending decision's mode, with this requester's (the approver's)
 * approval limit for rule 8 and, when the pending decision asked for an
 * acknowledgment (or itself carried one), the destination version it
 * evaluated acknowledged for rule 7; the fresh decision records both.
 * The pending decision is never changed.
 *
 * Returns 0 and *out, or an input error (OG_EPAYOUT_ID, OG_EPAYOUT_VERSION,
 * OG_EPAYOUT_REQUESTER, OG_EPAYOUT_LIMIT, OG_EPAYOUT_WINDOW,
 * OG_EPAYOUT_CORRELATION, OG_EPAYOUT_DECISION, OG_EINVAL), a settling
 * refusal above, OG_EPAYOUT_POLICY_RELEASE,
 * OG_ESTORE_UNAVAILABLE (not known to have committed: read the payout
 * before deciding again), OG_EINTERNAL. */
OG_MUST_CHECK int og_payout_decide(og_store *s, const og_payout_decide_req *r,
                                   og_payout_decision *out);

/* A decision as stored: every column of its row. Decisions are append-only
 * (the schema refuses UPDATE and DELETE), so this is what the decision
 * wrote — in particular the requester's facts it captured, which the
 * worker's recheck uses (docs/payouts.md, section 5). */
typedef struct og_payout_decision_view {
    char decision_id[OG_UUID_LEN + 1];
    char payout_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];       /* "" when the payout was missing */
    bool reauthorize;                    /* decided as a re-authorization
                                            (og_payout_decide_req) */
    og_payout_outcome outcome;
    og_payout_reason reason;             /* its outcome is outcome */
    char policy_version[OG_ID_MAX + 1];  /* the policy that decided */
    char terms_fingerprint[OG_PAYOUT_FINGERPRINT_HEX + 1]; /* of the terms
                                            evaluated; "" when nothing was
                                            read (context.unavailable) */
    og_payout_versions evaluated;        /* all 0 when nothing was read */
    char requester_id[OG_ID_MAX + 1];    /* captured */
    char requester_role[OG_ID_MAX + 1];  /* captured */
    int64_t requester_approval_limit;    /* captured: minor units of the
                                            payout's currency */
    int64_t observed_at_us;              /* the facts' read (store clock) */
    int64_t decided_at_us;               /* the decision's write */
    char correlation_id[OG_ID_MAX + 1];
    char settles_decision_id[OG_UUID_LEN + 1]; /* schema 14: the pending
                                            decision this one settled; ""
                                            when none */
    int64_t acknowledged_destination_version; /* schema 14: the destination
                                            version an approver acknowledged
                                            (the recheck honours it); 0 */
} og_payout_decision_view;

/* Reads decision decision_id (a non-nil UUID, any case; checked before any
 * I/O): 1 and *out, 0 when there is none, or an error (OG_EINVAL: s or out
 * NULL; OG_EPAYOUT_DECISION; OG_EINTERNAL: a row the schema's rules forbid;
 * store errors). ONE read; it never blocks on a decision in flight, which
 * it does not see until it committed. */
OG_MUST_CHECK int og_payout_decision_get(og_store *s, const char *decision_id,
                                         og_payout_decision_view *out);

/* ---------------------------------------------------------------------------
 * Jobs: the outbox is the durable queue (docs/payouts.md, section 1). A job
 * is available from its available_at on; taking it starts a delivery (its
 * number, and a lease: the job is available again when the lease ends), so
 * a taker that dies leaves it to be redelivered. Delivery is at least once.
 * ------------------------------------------------------------------------- */

typedef struct og_payout_job {
    char job_id[OG_UUID_LEN + 1];
    char payout_id[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char correlation_id[OG_ID_MAX + 1];
    char resubmitted_from[OG_UUID_LEN + 1]; /* "" unless an operator's copy */
    int64_t delivery;           /* this delivery's number (1, 2, ...) */
    int64_t lease_until_us;     /* available again from then */
} og_payout_job;

/* Takes the oldest available job (not acknowledged, available_at <= now:
 * new, postponed, or whose last delivery lease lapsed) for lease_us (1 ms ..
 * OG_PAYOUT_LEASE_MAX_US): deliveries + 1, available_at = now + lease. ONE
 * conditional write; PostgreSQL skips jobs another taker holds (FOR UPDATE
 * SKIP LOCKED), SQLite takes it under its write lock. Returns 1 and *out, 0
 * when none is available, or an error (OG_EINVAL, store errors). */
OG_MUST_CHECK int og_payout_job_take(og_store *s, int64_t lease_us,
                                     og_payout_job *out);

/* Acknowledges delivery `delivery` of job_id: done, never delivered again.
 * ONE conditional write on (not acknowledged, deliveries = delivery), so a
 * delivery that was superseded by a redelivery changes nothing. *acked
 * false: superseded, already acknowledged, or no such job. */
OG_MUST_CHECK int og_payout_job_ack(og_store *s, const char *job_id,
                                    int64_t delivery, bool *acked);

/* Makes delivery `delivery` of job_id available again delay_us (0 ..
 * OG_PAYOUT_LEASE_MAX_US) from now — the worker's context.unavailable path:
 * the grant is not consumed. ONE conditional write on the same condition as
 * og_payout_job_ack. */
OG_MUST_CHECK int og_payout_job_postpone(og_store *s, const char *job_id,
                                         int64_t delivery, int64_t delay_us,
                                         bool *postponed);

/* An operator republishes job_id: a new job (new id, available now, no
 * delivery yet) for the same payout, grant and correlation id, recording
 * which it copies, and a "job-resubmitted" history entry: ONE write. It
 * changes nothing about authority: the grant decides. Returns 1 and
 * new_job_id, 0 when job_id does not exist, or an error (OG_EPAYOUT_JOB,
 * OG_EACTOR, store errors). */
OG_MUST_CHECK int og_payout_job_resubmit(og_store *s, const char *job_id,
                                         const char *actor,
                                         char new_job_id[OG_UUID_LEN + 1]);

/* The same with the caller's idempotency key (a UUID) as the new job's id:
 * the key is remembered as the job's primary key, so a retried request
 * writes nothing twice, even concurrently. Returns 1 (written) or 2 (a job
 * with that id exists already: nothing written) with new_job_id = the
 * key, 0 when job_id does not exist, or an error (OG_EPAYOUT_JOB for
 * either id, OG_EACTOR, store errors). */
OG_MUST_CHECK int og_payout_job_resubmit_keyed(og_store *s,
                                               const char *job_id,
                                               const char *key,
                                               const char *actor,
                                               char new_job_id[OG_UUID_LEN +
                                                               1]);

/* ---------------------------------------------------------------------------
 * Payout grants: reads, revocation, expiry.
 * ------------------------------------------------------------------------- */

/* X(NAME, stable text) — a payout grant's state, derived from its grants
 * row at the store's clock, in this order: Consumed (consumed_at set: an
 * attempt claimed it; never reset), Revoked (revoked_at set), Expired (now
 * >= expires_at, with no admission leeway — the claim's own edge: no claim
 * can succeed any more), else Issued. */
#define OG_PAYOUT_GRANT_STATE_MAP(X)                                           \
    X(ISSUED, "Issued")                                                        \
    X(CONSUMED, "Consumed")                                                    \
    X(REVOKED, "Revoked")                                                      \
    X(EXPIRED, "Expired")

typedef enum og_payout_grant_state {
#define OG__PG_ENUM(name, text) OG_PAYOUT_GRANT_##name,
    OG_PAYOUT_GRANT_STATE_MAP(OG__PG_ENUM)
#undef OG__PG_ENUM
} og_payout_grant_state;

/* A payout grant: its bindings (everything from the decision and the
 * intent, nothing from a request, no credential) and its row's state. */
typedef struct og_payout_grant_view {
    char grant_id[OG_ID_MAX + 1];
    char decision_id[OG_UUID_LEN + 1];
    char payout_id[OG_ID_MAX + 1];
    char tenant_id[OG_ID_MAX + 1];
    char operation[OG_ID_MAX + 1];        /* OG_PAYOUT_OPERATION */
    char audience[OG_ID_MAX + 1];         /* the decision's audience: the worker
                                             principal that may present it */
    char terms_fingerprint[OG_PAYOUT_FINGERPRINT_HEX + 1];
    char policy_version[OG_ID_MAX + 1];
    int64_t executable_payout_version;
    int64_t attempt_number;
    int64_t reserved_minor;               /* what the decision reserved */
    char release_day[OG_PAYOUT_DAY_LEN + 1];
    int64_t not_before_us, expires_at_us, created_at_us;
    og_payout_grant_state state;
    int64_t consumed_at_us;               /* 0: not consumed */
    char consumed_by_operation[OG_UUID_LEN + 1]; /* "" when none */
    int64_t revoked_at_us;                /* 0: not revoked */
    int64_t released_at_us;               /* 0: the reservation is held */
    int64_t read_at_us;                   /* the clock state is derived at */
} og_payout_grant_view;

/* Reads a payout grant: 1 and *out, 0 when grant_id is not a payout
 * grant, or an error (OG_EGRANT_ID, store errors). */
OG_MUST_CHECK int og_payout_grant_get(og_store *s, const char *grant_id,
                                      og_payout_grant_view *out);

/* A finance hold: revokes the payout grant if it is neither consumed nor
 * revoked — ONE conditional write of its grants row — and, in the same
 * transaction, releases its reservation unless an expiry released it
 * already (the binding's released_at, set once), with history entries.
 * *out: OG_REVOKE_REVOKED, OG_REVOKE_ALREADY_USED_OR_REVOKED (consumed or
 * revoked before: nothing changed), OG_REVOKE_NOT_ISSUED (not a payout
 * grant). Errors: OG_EGRANT_ID, OG_EACTOR, store errors. */
OG_MUST_CHECK int og_payout_grant_revoke(og_store *s, const char *grant_id,
                                         const char *actor,
                                         og_revoke_outcome *out);

typedef struct og_payout_expiry_stats {
    int64_t grants;  /* reservations released (bindings marked released) */
    int batches;     /* transactions run, the last one included */
} og_payout_expiry_stats;

/* The janitor: releases the reservation of every payout grant that is
 * unconsumed, not released yet, and past expires_at + cleanup margin on the
 * store's clock (the claim admits while now < expires_at, no leeway; the
 * margin is the one cleanup keeps against clock steps), and
 * marks its binding released — at most batch (1..OG_RETENTION_BATCH_MAX)
 * grants per transaction, oldest expiry first, until a batch takes fewer
 * or max_batches (1..OG_RETENTION_BATCHES_MAX) have run. ONE conditional
 * write per batch. A consumed grant's reservation is never released here:
 * it follows its attempt. Revoked and expired alike, a reservation is
 * released once. Returns 0 and *out, or an error; committed batches stay. */
OG_MUST_CHECK int og_payout_expire_grants(og_store *s, int batch,
                                          int max_batches,
                                          og_payout_expiry_stats *out);

/* ---------------------------------------------------------------------------
 * The policy's current release (docs/payouts.md, sections 4 and 5; schema
 * 12): which policy version decides and claims payouts, kept in the store
 * so that two builds of a rolling deploy agree through it. A build whose
 * OG_PAYOUT_POLICY_VERSION is not the current release decides nothing
 * (og_payout_decide: OG_EPAYOUT_POLICY_RELEASE) and claims nothing (the
 * claim fences on the release: CONTEXT_CHANGED).
 * ------------------------------------------------------------------------- */

/* The current release of the payout policy (OG_PAYOUT_OPERATION's), NUL-
 * terminated into out. Returns 0, or an error (OG_EINVAL; OG_EINTERNAL when
 * the store has no release row, which migration 12 writes; store errors). */
OG_MUST_CHECK int og_payout_policy_release_get(og_store *s,
                                               char out[OG_ID_MAX + 1]);

/* Moves the current release from expected_current to version (both
 * og_id_valid; an operator's step of a rolling deploy, once every build
 * that still runs knows version): ONE conditional write, recording when
 * and by whom (actor). *out: WRITTEN, or VERSION_CONFLICT (the current
 * release is not expected_current: nothing written). A decision or a claim
 * in flight either committed before the move, or runs after it on the new
 * release (PostgreSQL: they hold the release's row FOR SHARE; SQLite: the
 * write lock). Errors: OG_EINVAL (s, out, version or expected_current),
 * OG_EACTOR, store errors. */
OG_MUST_CHECK int og_payout_policy_release_set(og_store *s,
                                               const char *version,
                                               const char *expected_current,
                                               const char *actor,
                                               og_payout_write *out);

/* ---------------------------------------------------------------------------
 * The claim (docs/payouts.md, section 5, step 3): the one
 * write that turns a VALID payout grant into an attempt.
 * ------------------------------------------------------------------------- */

/* X(NAME, stable text) — what a claim did. Only CLAIMED wrote anything.
 * Each refusal has its own outcome, so a worker reports the reason the
 * store saw (the codes are OG_PAYOUT_WORKER_REASON_MAP's); binding.mismatch
 * and presenter.not-audience are security signals: someone presented a
 * grant that is not theirs to present. New outcomes go at the END: callers
 * switch on the values. */
#define OG_PAYOUT_CLAIM_MAP(X)                                                 \
    X(CLAIMED, "claimed")     /* the grant consumed, the payout Executing,   \
                                 the attempt Admitted: the caller owns it */  \
    X(LOST, "claim.lost")     /* the grant was consumed by another binding's \
                                 attempt, or by no attempt: nothing written */\
    X(CONTEXT_CHANGED, "claim.context-changed") /* a fenced fact moved since \
                                 validation (tenant settings or suspension,  \
                                 beneficiary version or status, destination  \
                                 version, payout state/version/attempt, or   \
                                 the store's current policy release): nothing\
                                 written */                                   \
    X(DUPLICATE, "duplicate") /* the grant is consumed by this payout's     \
                                 attempt for this binding: a redelivery;     \
                                 acknowledge the job, change nothing */       \
    X(MISMATCH, "binding.mismatch") /* grant_id is not a payout grant:       \
                                 nothing written */                           \
    X(REVOKED, "grant.revoked") /* the grant was revoked (a finance hold)    \
                                 before the claim: nothing written */         \
    X(EXPIRED, "grant.expired") /* the claim's instant is outside the grant's\
                                 window: not yet valid (now < not_before) or \
                                 expired (now >= expires_at): nothing        \
                                 written */                                   \
    X(NOT_AUDIENCE, "presenter.not-audience") /* the grant's audience is not \
                                 the presenter's: nothing written */

typedef enum og_payout_claim_outcome {
#define OG__PC_ENUM(name, text) OG_PAYOUT_CLAIM_##name,
    OG_PAYOUT_CLAIM_MAP(OG__PC_ENUM)
#undef OG__PC_ENUM
} og_payout_claim_outcome;

typedef struct og_payout_claim_req {
    const char *grant_id;       /* the job's grant */
    const char *worker_id;      /* the presenting principal: the attempt's
                                   caller (og_id_valid) */
    const char *audience;       /* the presenter's audience: must be the
                                   grant's (OG_PAYOUT_AUDIENCE) */
    og_payout_versions relied;  /* what the VALID recheck relied on
                                   (og_payout_exec_verdict.relied), each >= 1 */
    const char *policy_version; /* the policy the recheck ran (the worker
                                   passes its build's OG_PAYOUT_POLICY_VERSION):
                                   fenced against the store's current release
                                   (og_payout_policy_release_get), and must be
                                   this build's */
    int64_t send_window_us;     /* submit_by = the claim's instant + this
                                   (1 ms .. OG_PAYOUT_LEASE_MAX_US) */
    int64_t lease_us;           /* lease_until = the claim's instant + this
                                   (1 ms .. OG_PAYOUT_LEASE_MAX_US) */
    int64_t final_absence_margin_us; /* schema 11: the provider's documented
                                   skew + visibility delay when its table
                                   declares "not found" final after the
                                   request's expiry (0..
                                   OG_PAYOUT_LEASE_MAX_US): the attempt's
                                   final_absence_after = submit_by + this;
                                   -1 when it does not (then NULL: no lookup
                                   can ever make the attempt NotApplied,
                                   docs/payouts.md P6) */
} og_payout_claim_req;

typedef struct og_payout_claim_result {
    og_payout_claim_outcome outcome;
    char payout_id[OG_ID_MAX + 1];      /* "" for MISMATCH */
    int64_t attempt_number;             /* the binding's; 0 for MISMATCH */
    bool has_attempt;                   /* CLAIMED, and DUPLICATE when the
                                           consuming attempt is readable */
    og_operation attempt;               /* CLAIMED: the new attempt (kind
                                           payout, Admitted, owner version 1,
                                           key "payout-<payout>-a<N>",
                                           reference "<payout>-a<N>");
                                           DUPLICATE: the attempt as it is */
} og_payout_claim_result;

/* Claims payout grant r->grant_id for r->worker_id. ONE transaction
 * (SQLite: BEGIN IMMEDIATE; PostgreSQL: one explicit Read Committed
 * transaction whose first statement locks the grant's and the payout's
 * rows FOR UPDATE and the tenant's, beneficiary's, destination's and the
 * policy's current release's FOR SHARE — so a change to a fenced fact
 * either committed before and is read, or waits for the claim — and whose
 * second statement writes it all, re-asserting every condition): the
 * grant's `grants` row consumed (consumed_at IS NULL AND revoked_at IS
 * NULL AND not_before <= now AND now < expires_at, the store's clock, no
 * admission leeway: a grant is valid in its window and not a microsecond
 * after), the context fenced (tenant settings_version and not suspended,
 * beneficiary version and Active, destination version, payout Approved at
 * the grant's executable version = r->relied.payout with no active
 * attempt, the store's current policy release = r->policy_version), the
 * payout moved to Executing at version + 1 with
 * active_attempt = the new attempt, the attempt inserted (kind payout,
 * Admitted, owner version 1, lease_until = now + lease, submit_by = now +
 * send window, final_absence_after = submit_by + the margin or NULL, the
 * key and reference above, amount, currency and account = destination id
 * from the payout, caller the worker, issuer OG_PAYOUT_ISSUER and the
 * grant id), and a "claimed" history entry.
 * The daily limit is not checked: the decision reserved the amount.
 *
 * The outcome is decided in the worker's order (docs/payouts.md, section
 * 5): MISMATCH (not a payout grant), NOT_AUDIENCE, REVOKED, DUPLICATE or
 * LOST (consumed), EXPIRED (outside the window), CONTEXT_CHANGED, CLAIMED.
 *
 * Returns 0 and *out (the outcome is a value: nothing is written unless
 * CLAIMED), or an error: OG_EGRANT_ID, OG_EACTOR (worker), OG_EINVAL
 * (audience, versions, policy version, windows), OG_EINTERNAL, or
 * OG_ESTORE_UNAVAILABLE — which means UNKNOWN: the claim may have
 * committed. The caller MUST NOT send; it acknowledges nothing and lets
 * the job be redelivered (a later delivery reports DUPLICATE if it did
 * commit) or the sweeper find the Admitted attempt, which provably sent
 * nothing (P2). The fault point payout_claim_ack_lost makes exactly that
 * happen: the claim commits, then OG_ESTORE_UNAVAILABLE. */
OG_MUST_CHECK int og_payout_claim(og_store *s, const og_payout_claim_req *r,
                                  og_payout_claim_result *out);

/* ---------------------------------------------------------------------------
 * The resolution (docs/payouts.md, section 5, step 5, and P5): an
 * attempt's outcome, and what follows from it for its payout and its
 * reservation, in ONE transaction.
 * ------------------------------------------------------------------------- */

/* X(NAME, stable text) — what a resolution did. Only RESOLVED wrote. */
#define OG_PAYOUT_RESOLVE_MAP(X)                                               \
    X(RESOLVED, "resolved")   /* the outcome recorded, the payout and the   \
                                 reservation moved, one history entry */     \
    X(NOT_RECORDED, "not-recorded") /* og_op_record's conditional write took \
                                 nothing (another owner version — a         \
                                 takeover fenced this owner —, a status not \
                                 expected, no such operation): nothing      \
                                 changed anywhere */                         \
    X(NOT_ACTIVE, "not-active") /* the operation is not its payout's active \
                                 attempt (a credit, or a payout that moved  \
                                 on): the outcome rolled back, nothing      \
                                 changed */

typedef enum og_payout_resolve_outcome {
#define OG__PR_ENUM(name, text) OG_PAYOUT_RESOLVE_##name,
    OG_PAYOUT_RESOLVE_MAP(OG__PR_ENUM)
#undef OG__PR_ENUM
} og_payout_resolve_outcome;

/* X(NAME, stable text) — what became of the binding's reservation. */
#define OG_PAYOUT_RESERVATION_MAP(X)                                           \
    X(HELD, "held")         /* Unknown, NeedsReconciliation: still reserved */ \
    X(PAID, "paid")         /* Succeeded: moved from reserved to paid */       \
    X(RELEASED, "released") /* Failed, NotStarted, NotApplied: unreserved */

typedef enum og_payout_reservation {
#define OG__PRS_ENUM(name, text) OG_PAYOUT_RESERVATION_##name,
    OG_PAYOUT_RESERVATION_MAP(OG__PRS_ENUM)
#undef OG__PRS_ENUM
} og_payout_reservation;

typedef struct og_payout_resolution {
    og_payout_resolve_outcome outcome;
    /* RESOLVED only (zeroed otherwise): */
    char payout_id[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];      /* the consumed grant's binding */
    og_payout_state state;             /* the payout's new state */
    int64_t payout_version;            /* its new version */
    bool attempt_cleared;              /* active_attempt is NULL now */
    og_payout_reservation reservation;
    int64_t amount_minor;              /* the binding's reserved amount */
    char release_day[OG_PAYOUT_DAY_LEN + 1]; /* the day it was reserved on */
} og_payout_resolution;

/* Records outcome o of payout attempt operation_id and applies it to the
 * payout and the reservation, in ONE transaction (SQLite: BEGIN IMMEDIATE;
 * PostgreSQL: one explicit Read Committed transaction):
 *   1. og_op_record's own conditional write (status in expected AND
 *      owner_version = expected_owner_version, the same statement, with its
 *      "outcome" event); when it takes nothing: NOT_RECORDED, nothing
 *      changed;
 *   2. the attempt's payout and binding read (PostgreSQL: FOR UPDATE); the
 *      payout must be Executing or Unknown with this attempt active, else
 *      NOT_ACTIVE and everything rolls back;
 *   3. the consequence (og_payout_reservation), conditional on the version
 *      read and the active attempt:
 *        Succeeded            -> payout Paid, the binding's amount moved
 *                                from reserved to paid on its release day;
 *        Failed               -> payout Failed, released;
 *        NotStarted, NotApplied -> payout Approved (awaiting fresh
 *                                authority: og_payout_decide's
 *                                reauthorization, a new grant, attempt
 *                                N + 1), released;
 *        Unknown, NeedsReconciliation -> payout Unknown, held, the active
 *                                attempt kept (P5: no re-authorization);
 *      each at version + 1; in the terminal cases active_attempt is
 *      cleared and the binding's released_at and release_cause ('paid',
 *      'failed', 'not-started', 'not-applied') set, once — so a
 *      reservation is never released while its attempt lives;
 *   4. one "resolved" history entry (from/to state, version, the attempt's
 *      status as reason, amount and day when the reservation moved).
 * Input is og_op_record's, checked the same way before any I/O (the
 * transition table: OG_ETRANSITION; OG_EOPERATION_ID, OG_EREASON,
 * OG_EPROVIDER_REFERENCE, OG_EACTOR, OG_EINVAL). Returns 0 and *out, or an
 * error: OG_EINTERNAL (rolled back), OG_ESTORE_UNAVAILABLE — unknown
 * whether it committed: read the attempt and the payout, then resolve
 * again with the owner version and status they show. */
OG_MUST_CHECK int og_payout_resolve(og_store *s, const char *operation_id,
                                    unsigned expected,
                                    int64_t expected_owner_version,
                                    const og_op_outcome *o,
                                    og_payout_resolution *out);

/* ---------------------------------------------------------------------------
 * After the send (schema 11; docs/payouts.md, section 6): the reconciler's
 * backoff, late evidence, returns and an operator's resolution. Each keeps
 * og_payout_resolve's rule: the attempt's outcome, its payout and its
 * reservation move together or not at all.
 * ------------------------------------------------------------------------- */

/* The reconciler's backoff after a lookup that settled nothing ("not
 * found" not yet final, pending, the provider could not be asked): ONE
 * conditional write of the attempt — kind payout, status Unknown, owner
 * version expected_owner_version — setting lease_until = now + delay_us
 * (1 ms .. OG_PAYOUT_LEASE_MAX_US; the attempt cannot be taken over again
 * before it ends) and lookups = lookups + 1, with a "lookup" event (reason,
 * actor; the status unchanged) in its history. Returns 0 and *deferred
 * (false: nothing changed — not Unknown, another owner version, not a
 * payout attempt), or an error: OG_EOPERATION_ID, OG_EREASON, OG_EACTOR,
 * OG_EINVAL (delay, owner version), store errors (OG_ESTORE_UNAVAILABLE:
 * may or may not have happened). */
OG_MUST_CHECK int og_payout_reconcile_later(og_store *s,
                                            const char *operation_id,
                                            int64_t expected_owner_version,
                                            int64_t delay_us,
                                            const char *reason,
                                            const char *actor,
                                            bool *deferred);

/* Where late evidence came from. */
#define OG_PAYOUT_EVIDENCE_LATE_RESPONSE "late-response"
#define OG_PAYOUT_EVIDENCE_NOTIFICATION "notification"

typedef struct og_payout_evidence_req {
    const char *operation_id;       /* the payout attempt */
    og_op_status status;            /* SUCCEEDED, FAILED or
                                       NEEDS_RECONCILIATION (OG_ETRANSITION
                                       otherwise) */
    const char *reason;             /* NULL: none (og_op_record's rules) */
    const char *provider_reference; /* NULL: none */
    const char *source;             /* OG_PAYOUT_EVIDENCE_LATE_RESPONSE or
                                       _NOTIFICATION (OG_EINVAL otherwise) */
    const char *evidence;           /* NULL: none (og_op_outcome's rules) */
    const char *actor;              /* who records it */
} og_payout_evidence_req;

/* Late evidence — a response that came back after a takeover, a provider
 * notification — resolving an attempt that is STILL Unknown, whatever its
 * owner version: in ONE transaction (as og_payout_resolve's) the attempt
 * is read, under its lock, and, when it is Unknown, og_payout_resolve's
 * conditional write runs expecting Unknown at the version read, the payout
 * and the reservation following; the outcome event carries source and
 * evidence (append-only, og_op_history). It restores no one's ownership
 * (the owner version is left as it is). out->outcome: RESOLVED;
 * NOT_RECORDED when the attempt is not Unknown (any more), or there is no
 * such operation — nothing changed; NOT_ACTIVE as og_payout_resolve's.
 * Errors as og_payout_resolve's. */
OG_MUST_CHECK int og_payout_evidence(og_store *s,
                                     const og_payout_evidence_req *r,
                                     og_payout_resolution *out);

/* A return after completion (docs/payouts.md, P8): the payout must be Paid
 * and its last attempt (the highest attempt number's operation) Succeeded
 * with provider_reference as its provider reference. ONE write of a
 * payout_events entry of kind "returned" (actor, the reference as its
 * reason) — once per payout: a second call records nothing. The payout
 * stays Paid, the attempt Succeeded, the day's paid total unchanged (the
 * money moved; its return is handled by people). evidence: NULL or
 * og_op_outcome's rules, kept in the entry's evidence column. Returns 0 and
 * *recorded (false: not Paid, the last attempt not Succeeded with that
 * reference, or the return recorded before), or an error: OG_EPAYOUT_ID,
 * OG_EPROVIDER_REFERENCE, OG_EACTOR, OG_EEVIDENCE, store errors. */
OG_MUST_CHECK int og_payout_return_record(og_store *s, const char *payout_id,
                                          const char *provider_reference,
                                          const char *actor,
                                          const char *evidence,
                                          bool *recorded);

/* An operator's resolution of a NeedsReconciliation payout attempt: to
 * SUCCEEDED, FAILED or NOT_APPLIED (OG_ETRANSITION otherwise). In ONE
 * transaction: og_op_resolve's conditional write (NeedsReconciliation ->
 * to, owner version + 1 fencing any late writer, a "resolved" event with
 * the operator, reason and evidence) and the payout and reservation moved
 * as og_payout_resolve moves them (Succeeded: Paid, paid; Failed: Failed,
 * released; NotApplied: Approved, released). NotApplied additionally needs
 * now >= final_absence_after, or now > submit_by when it is NULL, on the
 * store's clock in the same statement (never before the request expired).
 * out->outcome: RESOLVED; NOT_RECORDED (not NeedsReconciliation, no such
 * operation, or NotApplied too early: nothing changed); NOT_ACTIVE (a
 * credit — route it to og_op_resolve — or a payout that moved on: nothing
 * changed). Errors as og_op_resolve's input errors (OG_EOPERATION_ID,
 * OG_EACTOR, OG_EREASON, OG_EEVIDENCE, OG_EPROVIDER_REFERENCE), then
 * og_payout_resolve's. */
OG_MUST_CHECK int og_payout_operator_resolve(
    og_store *s, const char *operation_id, og_op_status to,
    const char *operator_id, const char *reason, const char *evidence,
    const char *provider_reference, og_payout_resolution *out);

/* ---------------------------------------------------------------------------
 * Statistics for operators (docs/http.md, payout metrics): what the store
 * holds now, read at a scrape: the signals "reservations held per tenant"
 * and "grants issued but never consumed" (docs/http.md maps each signal to
 * its series).
 * ------------------------------------------------------------------------- */

/* The tenants og_payout_stats names one by one: the largest holders; the
 * rest are summed into `other`, so a metric's label count stays bounded
 * however many tenants there are. */
#define OG_PAYOUT_STATS_TENANTS 10

typedef struct og_payout_stats_held {
    int64_t reservations;   /* bindings whose reservation is held */
    int64_t reserved_minor; /* their amounts, minor units of the tenant's
                             * currency (a tenant has one) */
} og_payout_stats_held;

typedef struct og_payout_stats_tenant {
    char tenant_id[OG_ID_MAX + 1];
    og_payout_stats_held held;
} og_payout_stats_tenant;

typedef struct og_payout_stats {
    /* Held reservations (a binding not released: its grant unconsumed and
     * not yet expired by the janitor, or consumed by an attempt still
     * Admitted, Started, Unknown or NeedsReconciliation). */
    og_payout_stats_held total;
    int n_tenants; /* 0..OG_PAYOUT_STATS_TENANTS, largest amount first
                    * (ties by tenant id) */
    og_payout_stats_tenant tenants[OG_PAYOUT_STATS_TENANTS];
    og_payout_stats_held other; /* total minus the tenants listed */
    /* Payout grants issued and never consumed nor revoked whose
     * reservation is held, by window on the store's clock: */
    int64_t grants_pending; /* now < not_before: the release not reached */
    int64_t grants_open;    /* not_before <= now < expires_at: claimable,
                             * not claimed yet */
    int64_t grants_expired; /* expires_at <= now: the window missed, the
                             * payout waits for a fresh decision and the
                             * janitor has not released it yet */
} og_payout_stats;

/* Reads the statistics above in ONE statement (one snapshot: the parts add
 * up). Returns 0 and *out, or an error (OG_EINVAL, store errors); *out is
 * written only on success. A read: it writes nothing. */
OG_MUST_CHECK int og_payout_stats_read(og_store *s, og_payout_stats *out);

/* ---------------------------------------------------------------------------
 * Names: the stable text of each list above, "?" outside it.
 * ------------------------------------------------------------------------- */
const char *og_payout_write_name(og_payout_write w);
const char *og_payout_unavailable_name(og_payout_unavailable u);
const char *og_payout_grant_state_name(og_payout_grant_state g);
const char *og_payout_claim_outcome_name(og_payout_claim_outcome o);
const char *og_payout_resolve_outcome_name(og_payout_resolve_outcome o);
const char *og_payout_reservation_name(og_payout_reservation r);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_PAYOUT_STORE_H */
