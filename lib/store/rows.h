/*
 * rows.h — the rows both backends return in the same column order, and the
 * one reader of each (rows.c). A backend runs its statement (its dialect)
 * and hands the row it got to an og__row_* reader through og__row, its own
 * column accessors: SQLite's current row of a stepped statement,
 * PostgreSQL's row of a PGresult. What each column means, which may be
 * NULL and which values are a defect (OG_EINTERNAL: the schema's checks
 * forbid them) is decided here once, so the two engines cannot read a row
 * differently.
 *
 * Each enum below is the order of the columns a statement of both backends
 * returns; the statement's comment names its enum. A backend may return
 * more columns after them (its _NCOLS is where they start).
 *
 * Included by the backends' internal.h and rows.c only.
 */
#ifndef OG_STORE_ROWS_H
#define OG_STORE_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store_int.h"

/* ===========================================================================
 * A backend's row
 * ========================================================================= */

typedef struct og__row og__row;

/* A backend's column accessors. col is a column index of the row. */
typedef struct og__row_ops {
    /* Whether the column is SQL NULL. */
    bool (*null)(const og__row *r, int col);
    /* The column as text, valid until the row moves; NULL for SQL NULL. */
    const char *(*text)(const og__row *r, int col);
    /* The column as an integer: 0 and *out, or OG_EINTERNAL for SQL NULL
     * or a value that is not one. */
    int (*i64)(const og__row *r, int col, int64_t *out);
    /* Whether a boolean column is true; SQL NULL is false. */
    bool (*flag)(const og__row *r, int col);
    /* The column's bytes: 0 and their count in *len, copied to dst when dst
     * is not NULL (cap bytes); OG_EINTERNAL for SQL NULL, a value that is
     * not bytes, or more than cap of them. */
    int (*bytes)(const og__row *r, int col, unsigned char *dst, size_t cap,
                 size_t *len);
} og__row_ops;

struct og__row {
    const og__row_ops *ops;
    const void *result; /* a stepped sqlite3_stmt, a PGresult */
    int row;            /* the PGresult's row */
};

/* ===========================================================================
 * An operation (og_operation): every read of one, from a column on (SQLite
 * SQ_OP_COLS, PostgreSQL PG_OP_COLUMNS). A NULL updated_at reads as
 * created_at, a NULL idempotency key or client reference as the operation
 * id: the statements say so, so these columns are never NULL.
 * ========================================================================= */
enum {
    OP_OPERATION_ID,
    OP_ISSUER,
    OP_GRANT_ID,
    OP_CALLER_ID,
    OP_ACCOUNT_ID,
    OP_AMOUNT,
    OP_CURRENCY,
    OP_STATUS,
    OP_OWNER_VERSION,
    OP_LEASE_UNTIL,
    OP_SUBMIT_BY,
    OP_CREATED_AT,
    OP_UPDATED_AT,
    OP_PROVIDER_REFERENCE,
    OP_OUTCOME_REASON,
    OP_KIND,
    OP_IDEMPOTENCY_KEY,
    OP_CLIENT_REFERENCE,
    OP_TAKEN_AT,             /* schema 11: NULL before a takeover */
    OP_LOOKUPS,
    OP_FINAL_ABSENCE_AFTER,  /* NULL: "not found" is never final */
    OP_NCOLS
};

/* The operation whose OP_* columns start at column col of r into *out.
 * The amount is read back in its canonical spelling. 0 or OG_EINTERNAL. */
int og__row_operation(og__row r, int col, og_operation *out);

/* One stored event of an operation's history (og_op_history). */
enum {
    OP_HISTORY_SEQ,
    OP_HISTORY_AT,
    OP_HISTORY_KIND,
    OP_HISTORY_FROM_STATUS,
    OP_HISTORY_TO_STATUS,
    OP_HISTORY_OWNER_VERSION,
    OP_HISTORY_REASON,
    OP_HISTORY_PROVIDER_REFERENCE,
    OP_HISTORY_ACTOR,
    OP_HISTORY_EVIDENCE,
    OP_HISTORY_SOURCE, /* schema 11: NULL but for late evidence */
    OP_HISTORY_NCOLS
};
int og__row_op_event(og__row r, og_op_event *out);

/* ===========================================================================
 * A redemption read (og_redemption_get): the key's own point first, else
 * another key's point of the same code, else no row.
 * ========================================================================= */
enum {
    REDEMPTION_GET_OWN, /* the row is the key's own point */
    REDEMPTION_GET_CODE_HASH,
    REDEMPTION_GET_NONCE,
    REDEMPTION_GET_SEALED,
    REDEMPTION_GET_CREATED_AT,
    REDEMPTION_GET_NCOLS
};

/* The read's one row: OWN and *out (its sealed bytes malloc'd), or
 * CODE_ELSEWHERE with nothing of the row read. 0, OG_ENOMEM or
 * OG_EINTERNAL (*out then holds nothing to free). */
int og__row_redemption(og__row r, og_redemption_found *found,
                       og_redemption_point *out);

/* ===========================================================================
 * The payout store's rows
 * ========================================================================= */

/* A put's report (og__payout_put_report) of the record as it is, from a
 * column on: its version (NULL: none), whether its fixed field matches the
 * request (NULL: no record), whether what it names exists. */
enum {
    PUT_REPORT_STORED,
    PUT_REPORT_FIXED_MATCHES,
    PUT_REPORT_NAMED_EXISTS,
    PUT_REPORT_NCOLS
};
/* out->exists, stored_version, fixed_same, refs_exist from the report
 * starting at column col of r. 0 or OG_EINTERNAL. */
int og__row_put_report(og__row r, int col, og__payout_put_report *out);

/* Why a draft wrote nothing (og__payout_draft_report), from a column on. */
enum {
    DRAFT_REPORT_PAYOUT_EXISTS,
    DRAFT_REPORT_TENANT_EXISTS,
    DRAFT_REPORT_CURRENCY_MATCHES,
    DRAFT_REPORT_BENEFICIARY_EXISTS,
    DRAFT_REPORT_DESTINATION_EXISTS,
    DRAFT_REPORT_NCOLS
};
/* Every member of *out but written, from the report starting at column
 * col of r. 0 or OG_EINTERNAL. */
int og__row_draft_report(og__row r, int col, og__payout_draft_report *out);

/* The facts a decision reads (og__payout_facts): the payout, its tenant's
 * settings, its beneficiary, its destination (never the token). */
enum {
    PAYOUT_FACTS_STATE,
    PAYOUT_FACTS_VERSION,
    PAYOUT_FACTS_ATTEMPT_COUNT,
    PAYOUT_FACTS_ACTIVE_ATTEMPT,
    PAYOUT_FACTS_TENANT_ID,
    PAYOUT_FACTS_BENEFICIARY_ID,
    PAYOUT_FACTS_DESTINATION_ID,
    PAYOUT_FACTS_DESTINATION_VERSION,
    PAYOUT_FACTS_AMOUNT,
    PAYOUT_FACTS_CURRENCY,
    PAYOUT_FACTS_PURPOSE,
    PAYOUT_FACTS_PAYOUTS_SUSPENDED,
    PAYOUT_FACTS_DAILY_LIMIT,
    PAYOUT_FACTS_TENANT_CURRENCY,
    PAYOUT_FACTS_TIME_ZONE,
    PAYOUT_FACTS_SETTINGS_VERSION,
    PAYOUT_FACTS_VERIFIED,
    PAYOUT_FACTS_BENEFICIARY_STATUS,
    PAYOUT_FACTS_BENEFICIARY_VERSION,
    PAYOUT_FACTS_DESTINATION_BENEFICIARY_ID,
    PAYOUT_FACTS_DESTINATION_RECORD_VERSION,
    PAYOUT_FACTS_DESTINATION_CHANGED_AT,
    PAYOUT_FACTS_NCOLS
};
/* Fills *f's payout, tenant, beneficiary and destination facts from r and
 * sets f->found; the rest of *f is the caller's. 0 or OG_EINTERNAL. */
int og__row_payout_facts(og__row r, og__payout_facts *f);

/* The counters of a tenant's day; all three NULL when it has no row yet. */
enum {
    PAYOUT_DAY_PAID,
    PAYOUT_DAY_RESERVED,
    PAYOUT_DAY_VERSION,
    PAYOUT_DAY_NCOLS
};
/* f->paid, reserved, day_version from r (0 each for no row yet). */
int og__row_payout_day(og__row r, og__payout_facts *f);

/* The claim's facts (og__payout_claim_facts) of a payout grant. */
enum {
    CLAIM_FACTS_PAYOUT_ID,
    CLAIM_FACTS_AUDIENCE,
    CLAIM_FACTS_EXECUTABLE_VERSION,
    CLAIM_FACTS_ATTEMPT_NUMBER,
    CLAIM_FACTS_NOT_BEFORE,
    CLAIM_FACTS_EXPIRES_AT,
    CLAIM_FACTS_CONSUMED,
    CLAIM_FACTS_CONSUMED_BY,
    CLAIM_FACTS_REVOKED,
    CLAIM_FACTS_CONSUMER_FOUND,
    CLAIM_FACTS_CONSUMER_PAYOUT,
    CLAIM_FACTS_CONSUMER_REFERENCE,
    CLAIM_FACTS_STATE,
    CLAIM_FACTS_PAYOUT_VERSION,
    CLAIM_FACTS_ACTIVE_ATTEMPT,
    CLAIM_FACTS_AMOUNT,
    CLAIM_FACTS_CURRENCY,
    CLAIM_FACTS_DESTINATION_ID,
    CLAIM_FACTS_PAYOUTS_SUSPENDED,
    CLAIM_FACTS_SETTINGS_VERSION,
    CLAIM_FACTS_BENEFICIARY_STATUS,
    CLAIM_FACTS_BENEFICIARY_VERSION,
    CLAIM_FACTS_DESTINATION_VERSION,
    CLAIM_FACTS_POLICY_RELEASE,
    CLAIM_FACTS_NOW,
    CLAIM_FACTS_NCOLS
};
/* *f from r, found. 0 or OG_EINTERNAL. */
int og__row_claim_facts(og__row r, og__payout_claim_facts *f);

/* The resolution's facts (og__payout_resolve_facts) of an attempt. */
enum {
    RESOLVE_FACTS_PAYOUT_ID,
    RESOLVE_FACTS_GRANT_ID,
    RESOLVE_FACTS_RELEASE_DAY,
    RESOLVE_FACTS_AMOUNT,
    RESOLVE_FACTS_RELEASED,
    RESOLVE_FACTS_STATE,
    RESOLVE_FACTS_VERSION,
    RESOLVE_FACTS_ACTIVE,
    RESOLVE_FACTS_NCOLS
};
/* *f from r, found. 0 or OG_EINTERNAL. */
int og__row_resolve_facts(og__row r, og__payout_resolve_facts *f);

/* A payout as stored (og_payout_get). */
enum {
    PAYOUT_VIEW_PAYOUT_ID,
    PAYOUT_VIEW_TENANT_ID,
    PAYOUT_VIEW_BENEFICIARY_ID,
    PAYOUT_VIEW_DESTINATION_ID,
    PAYOUT_VIEW_DESTINATION_VERSION,
    PAYOUT_VIEW_AMOUNT,
    PAYOUT_VIEW_CURRENCY,
    PAYOUT_VIEW_PURPOSE,
    PAYOUT_VIEW_STATE,
    PAYOUT_VIEW_VERSION,
    PAYOUT_VIEW_ATTEMPT_COUNT,
    PAYOUT_VIEW_ACTIVE_ATTEMPT,
    PAYOUT_VIEW_RELEASE_DAY,
    PAYOUT_VIEW_REQUESTER_ID,
    PAYOUT_VIEW_CREATED_AT,
    PAYOUT_VIEW_UPDATED_AT,
    PAYOUT_VIEW_NCOLS
};
/* *out from r, its amount formatted. 0 or OG_EINTERNAL. */
int og__row_payout_view(og__row r, og_payout_view *out);

/* A decision as stored (og_payout_decision_get): every column of its
 * payout_decisions row. */
enum {
    PAYOUT_DECISION_DECISION_ID,
    PAYOUT_DECISION_PAYOUT_ID,
    PAYOUT_DECISION_TENANT_ID,          /* NULL: the payout was missing */
    PAYOUT_DECISION_MODE,
    PAYOUT_DECISION_OUTCOME,
    PAYOUT_DECISION_REASON,
    PAYOUT_DECISION_POLICY_VERSION,
    PAYOUT_DECISION_TERMS_FINGERPRINT,  /* NULL: nothing was read */
    PAYOUT_DECISION_TENANT_SETTINGS_VERSION, /* these four likewise */
    PAYOUT_DECISION_BENEFICIARY_VERSION,
    PAYOUT_DECISION_DESTINATION_VERSION,
    PAYOUT_DECISION_PAYOUT_VERSION,
    PAYOUT_DECISION_REQUESTER_ID,
    PAYOUT_DECISION_REQUESTER_ROLE,
    PAYOUT_DECISION_REQUESTER_APPROVAL_LIMIT,
    PAYOUT_DECISION_OBSERVED_AT,
    PAYOUT_DECISION_DECIDED_AT,
    PAYOUT_DECISION_CORRELATION_ID,
    PAYOUT_DECISION_SETTLES_DECISION_ID, /* schema 14; NULL: none */
    PAYOUT_DECISION_ACKNOWLEDGED_DESTINATION_VERSION, /* NULL: none */
    PAYOUT_DECISION_NCOLS
};
/* *out from r. 0 or OG_EINTERNAL (also for a mode, outcome or reason that
 * is not one, or a reason whose outcome is not the row's). */
int og__row_payout_decision(og__row r, og_payout_decision_view *out);

/* One payout_events row (og_payout_history), in this column order:
 * seq, at (microseconds), kind, actor, correlation_id, decision_id,
 * grant_id, job_id, from_state, to_state, payout_version, amount,
 * release_day (text), reason, evidence. */
enum {
    PAYOUT_EVENT_SEQ,
    PAYOUT_EVENT_AT,
    PAYOUT_EVENT_KIND,
    PAYOUT_EVENT_ACTOR,
    PAYOUT_EVENT_CORRELATION,
    PAYOUT_EVENT_DECISION,
    PAYOUT_EVENT_GRANT,
    PAYOUT_EVENT_JOB,
    PAYOUT_EVENT_FROM,
    PAYOUT_EVENT_TO,
    PAYOUT_EVENT_VERSION,
    PAYOUT_EVENT_AMOUNT,
    PAYOUT_EVENT_DAY,
    PAYOUT_EVENT_REASON,
    PAYOUT_EVENT_EVIDENCE,
    PAYOUT_EVENT_NCOLS
};
int og__row_payout_event(og__row r, og_payout_event *out);

/* A payout grant, its binding and its grants row, and the store's clock. */
enum {
    PAYOUT_GRANT_GRANT_ID,
    PAYOUT_GRANT_DECISION_ID,
    PAYOUT_GRANT_PAYOUT_ID,
    PAYOUT_GRANT_TENANT_ID,
    PAYOUT_GRANT_OPERATION,
    PAYOUT_GRANT_AUDIENCE,
    PAYOUT_GRANT_TERMS_FINGERPRINT,
    PAYOUT_GRANT_POLICY_VERSION,
    PAYOUT_GRANT_EXECUTABLE_VERSION,
    PAYOUT_GRANT_ATTEMPT_NUMBER,
    PAYOUT_GRANT_AMOUNT,
    PAYOUT_GRANT_RELEASE_DAY,
    PAYOUT_GRANT_NOT_BEFORE,
    PAYOUT_GRANT_EXPIRES_AT,
    PAYOUT_GRANT_CREATED_AT,
    PAYOUT_GRANT_CONSUMED_AT,   /* NULL: unconsumed */
    PAYOUT_GRANT_CONSUMED_BY,
    PAYOUT_GRANT_REVOKED_AT,    /* NULL: not revoked */
    PAYOUT_GRANT_RELEASED_AT,   /* NULL: its reservation not released */
    PAYOUT_GRANT_NOW,
    PAYOUT_GRANT_NCOLS
};
/* *out from r, its state derived at the row's clock with leeway_us (the
 * store's admission leeway). 0 or OG_EINTERNAL. */
int og__row_payout_grant(og__row r,
                         og_payout_grant_view *out);

/* A job as a take returns it. */
enum {
    PAYOUT_JOB_JOB_ID,
    PAYOUT_JOB_PAYOUT_ID,
    PAYOUT_JOB_GRANT_ID,
    PAYOUT_JOB_CORRELATION_ID,
    PAYOUT_JOB_RESUBMITTED_FROM,
    PAYOUT_JOB_DELIVERY,
    PAYOUT_JOB_LEASE_UNTIL,
    PAYOUT_JOB_NCOLS
};
/* *out from r. 0 or OG_EINTERNAL. */
int og__row_payout_job(og__row r, og_payout_job *out);

#endif /* OG_STORE_ROWS_H */
