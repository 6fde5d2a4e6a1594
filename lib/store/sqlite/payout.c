/*
 * payout.c — the SQLite payout store's records and decision steps (schema
 * 8): tenant, beneficiary and destination puts, the executor's read of a
 * destination token, drafts, cancellations, og_payout_get,
 * og_payout_decision_get, the facts, and the decision's steps (the
 * reservation, the decision's row, what an Allowed decision enables), which
 * lib/store/payout.c runs in one transaction (S6). What runs a decided
 * payout is payout_run.c.
 *
 * These keep M27-M31 (lib/store/store_int.h). Every write is ONE BEGIN
 * IMMEDIATE transaction (og__sq_begin/og__sq_end, as Q11) holding its
 * history entries; a write that changed nothing rolls back and reports the
 * records from a read of the same transaction. How:
 *
 *   Q22 The decision's transaction is BEGIN IMMEDIATE (og__sq_begin through
 *       txn_begin): the facts — the payout, its tenant's settings,
 *       beneficiary and destination, the release day's counters — are read
 *       under the write lock (Q1), so none can change before it commits
 *       (M28), and everything it writes shares one instant of SQLite's
 *       clock, read once (M29). Decisions and history entries are never
 *       changed or removed: triggers abort every UPDATE and DELETE of
 *       payout_decisions and payout_events (M27).
 *   Q23 The reservation (M30) is og__sq_payout_reserve_sql: INSERT ... ON
 *       CONFLICT DO UPDATE ... WHERE paid + reserved + amount <=
 *       daily_limit. Under the write lock it checks the very counters the
 *       decision read, so it takes whatever the core allowed.
 *   Q24 The attempt number (M31) is allocated by the approval's conditional
 *       UPDATE (og__sq_payout_approve_sql: the version read, the state the mode
 *       expects, no active attempt); re-authorizations are serialized by the
 *       write lock.
 */
#include <string.h>

#include "internal.h"

/* Binds v, or NULL for 0 (no version, no amount). */
static void sq_bind_i64_opt(sqlite3_stmt *st, int i, int64_t v)
{
    if (v != 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* ===========================================================================
 * History (Q22)
 * ========================================================================= */

/* ?1 payout, ?2 at, ?3 kind, ?4 actor, ?5 correlation, ?6 decision,
 * ?7 grant, ?8 job, ?9 from state, ?10 to state, ?11 payout version,
 * ?12 amount, ?13 release day, ?14 reason. */
const char og__sq_payout_event_sql[] =
    "INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id,"
    "   decision_id, grant_id, job_id, from_state, to_state, payout_version,"
    "   amount, release_day, reason)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)";

int og__sq_payout_event_add(og__sq_conn *c, const og__sq_payout_event *e)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_payout_event_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, e->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, e->at);
    sqlite3_bind_text(st, 3, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, e->actor, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 5, e->correlation_id);
    og__sq_bind_opt(st, 6, e->decision_id);
    og__sq_bind_opt(st, 7, e->grant_id);
    og__sq_bind_opt(st, 8, e->job_id);
    og__sq_bind_opt(st, 9, e->from_state);
    og__sq_bind_opt(st, 10, e->to_state);
    sq_bind_i64_opt(st, 11, e->payout_version);
    sq_bind_i64_opt(st, 12, e->amount);
    og__sq_bind_opt(st, 13, e->release_day);
    og__sq_bind_opt(st, 14, e->reason);
    return og__sq_done(c, st);
}

/* ===========================================================================
 * Puts
 * ========================================================================= */

/* Every put's report (sq_payout_*_state_sql), one row: PUT_REPORT_*
 * (rows.h), the fixed field matched against ?2. */

/* Finishes a put whose write statement w and report statement state are
 * bound: written with the version w returned, else the report. */
static int sq_put_finish(og__sq_conn *c, sqlite3_stmt *w, sqlite3_stmt *state,
                         og__payout_put_report *out)
{
    int64_t v = 0;
    int rc = og__sq_one_i64(c, w, &v);

    if (rc != 0) {
        sqlite3_reset(state);
        if (rc < 0)
            return rc;
        out->written = true;
        out->version = v;
        return 0;
    }
    if ((rc = og__sq_step(c, state)) == 1)
        rc = og__row_put_report(og__sq_row(state), 0, out) < 0 ? OG_EINTERNAL
                                                               : 1;
    sqlite3_reset(state);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL; /* the report is a row */
}

/* Runs a put: the write (create when expected is 0, else update) and its
 * report, both bound by bind(write, state, arg), in ONE transaction. */
static int sq_put(og__sq_store *s, const char *create, const char *update,
                  const char *report, int64_t expected,
                  void (*bind)(sqlite3_stmt *, sqlite3_stmt *, const void *),
                  const void *arg, og__payout_put_report *out)
{
    og__payout_put_report rep = {0};
    sqlite3_stmt *w, *state;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, expected == 0 ? create : update, &w)) == 0 &&
        (rc = og__sq_stmt(c, report, &state)) == 0) {
        bind(w, state, arg);
        rc = sq_put_finish(c, w, state, &rep);
        /* No binding outlives the call: the caller's buffers (a provider
         * token, S7) are wiped or gone once it returns. */
        sqlite3_clear_bindings(w);
        sqlite3_clear_bindings(state);
    }
    rc = og__sq_end(s, c, rc, rep.written);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* ---- tenants ------------------------------------------------------------ */

/* ?1 id, ?2 suspended, ?3 limit, ?4 currency, ?5 time zone, ?6 expected
 * settings_version. A row only when written. */
static const char sq_payout_tenant_create_sql[] =
    "INSERT INTO tenants (tenant_id, payouts_suspended, daily_limit,"
    "   currency, settlement_time_zone, settings_version, updated_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, 1, " SQ_NOW ")"
    " ON CONFLICT DO NOTHING RETURNING settings_version";
static const char sq_payout_tenant_update_sql[] =
    "UPDATE tenants SET payouts_suspended = ?2, daily_limit = ?3,"
    "   settlement_time_zone = ?5,"
    "   settings_version = settings_version + 1, updated_at = " SQ_NOW
    " WHERE tenant_id = ?1 AND settings_version = ?6 AND currency = ?4"
    " RETURNING settings_version";
/* The put's report (PUT_REPORT_*): ?1 id, ?2 currency. */
static const char sq_payout_tenant_state_sql[] =
    "SELECT t.settings_version, t.currency = ?2, 1"
    " FROM (SELECT 1) LEFT JOIN tenants t ON t.tenant_id = ?1";

/* The tenant's: ?1 id, ?2 suspended, ?3 limit, ?4 currency, ?5 zone,
 * ?6 expected (the create has no ?6); report ?1 id, ?2 currency. */
static void sq_bind_tenant(sqlite3_stmt *w, sqlite3_stmt *state,
                           const void *arg)
{
    const og__payout_tenant_req *r = arg;

    sqlite3_bind_text(w, 1, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(w, 2, r->payouts_suspended);
    sqlite3_bind_int64(w, 3, r->daily_limit);
    sqlite3_bind_text(w, 4, r->currency, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 5, r->time_zone, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(w) >= 6)
        sqlite3_bind_int64(w, 6, r->expected_version);
    sqlite3_bind_text(state, 1, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->currency, -1, SQLITE_STATIC);
}

int og__sq_payout_tenant_put(void *impl, const og__payout_tenant_req *r,
                             og__payout_put_report *out)
{
    return sq_put(impl, sq_payout_tenant_create_sql,
                  sq_payout_tenant_update_sql, sq_payout_tenant_state_sql,
                  r->expected_version, sq_bind_tenant, r, out);
}

/* ---- beneficiaries ------------------------------------------------------ */

/* ?1 id, ?2 tenant, ?3 verified, ?4 status, ?5 expected. A create names a
 * tenant that exists (no foreign-key error). */
static const char sq_payout_beneficiary_create_sql[] =
    "INSERT INTO beneficiaries (beneficiary_id, tenant_id, verified, status,"
    "   version, updated_at)"
    " SELECT ?1, ?2, ?3, ?4, 1, " SQ_NOW " FROM tenants WHERE tenant_id = ?2"
    " ON CONFLICT DO NOTHING RETURNING version";
static const char sq_payout_beneficiary_update_sql[] =
    "UPDATE beneficiaries SET verified = ?3, status = ?4,"
    "   version = version + 1, updated_at = " SQ_NOW
    " WHERE beneficiary_id = ?1 AND version = ?5 AND tenant_id = ?2"
    " RETURNING version";
/* The put's report (PUT_REPORT_*): ?1 id, ?2 tenant. */
static const char sq_payout_beneficiary_state_sql[] =
    "SELECT b.version, b.tenant_id = ?2,"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2)"
    " FROM (SELECT 1) LEFT JOIN beneficiaries b ON b.beneficiary_id = ?1";

/* ?1 id, ?2 tenant, ?3 verified, ?4 status, ?5 expected (update only);
 * report ?1 id, ?2 tenant. */
static void sq_bind_beneficiary(sqlite3_stmt *w, sqlite3_stmt *state,
                                const void *arg)
{
    const og__payout_beneficiary_req *r = arg;

    sqlite3_bind_text(w, 1, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 2, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(w, 3, r->verified);
    sqlite3_bind_text(w, 4, r->status, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(w) >= 5)
        sqlite3_bind_int64(w, 5, r->expected_version);
    sqlite3_bind_text(state, 1, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->tenant_id, -1, SQLITE_STATIC);
}

int og__sq_payout_beneficiary_put(void *impl,
                                  const og__payout_beneficiary_req *r,
                                  og__payout_put_report *out)
{
    return sq_put(impl, sq_payout_beneficiary_create_sql,
                  sq_payout_beneficiary_update_sql,
                  sq_payout_beneficiary_state_sql, r->expected_version,
                  sq_bind_beneficiary, r, out);
}

/* ---- destinations ------------------------------------------------------- */

/* ?1 id, ?2 beneficiary, ?3 token, ?4 expected, ?5 an import's changed_at
 * (0: none). Every write moves changed_at (a token rotation is a change);
 * an import's is never ahead of the store's clock. */
static const char sq_payout_destination_create_sql[] =
    "INSERT INTO destinations (destination_id, beneficiary_id,"
    "   provider_token, version, changed_at)"
    " SELECT ?1, ?2, ?3, 1,"
    "   CASE WHEN ?5 > 0 THEN MIN(?5, " SQ_NOW ") ELSE " SQ_NOW " END"
    " FROM beneficiaries"
    " WHERE beneficiary_id = ?2"
    " ON CONFLICT DO NOTHING RETURNING version";
static const char sq_payout_destination_update_sql[] =
    "UPDATE destinations SET beneficiary_id = ?2, provider_token = ?3,"
    "   version = version + 1, changed_at = " SQ_NOW
    " WHERE destination_id = ?1 AND version = ?4"
    "   AND EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = ?2)"
    " RETURNING version";
/* The put's report (PUT_REPORT_*): ?1 id, ?2 beneficiary. */
static const char sq_payout_destination_state_sql[] =
    "SELECT d.version, 1,"
    "       EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = ?2)"
    " FROM (SELECT 1) LEFT JOIN destinations d ON d.destination_id = ?1";

/* ?1 id, ?2 beneficiary, ?3 token (bound, never copied: S7), ?4 expected,
 * ?5 an import's changed_at (create only); report ?1 id, ?2 beneficiary. */
static void sq_bind_destination(sqlite3_stmt *w, sqlite3_stmt *state,
                                const void *arg)
{
    const og__payout_destination_req *r = arg;

    sqlite3_bind_text(w, 1, r->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 2, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 3, r->provider_token, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(w) >= 4)
        sqlite3_bind_int64(w, 4, r->expected_version);
    if (sqlite3_bind_parameter_count(w) >= 5) /* the create's */
        sqlite3_bind_int64(w, 5, r->changed_at_us);
    sqlite3_bind_text(state, 1, r->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->beneficiary_id, -1, SQLITE_STATIC);
}

int og__sq_payout_destination_put(void *impl,
                                  const og__payout_destination_req *r,
                                  og__payout_put_report *out)
{
    return sq_put(impl, sq_payout_destination_create_sql,
                  sq_payout_destination_update_sql,
                  sq_payout_destination_state_sql, r->expected_version,
                  sq_bind_destination, r, out);
}

/* ===========================================================================
 * The executor's read of a token (S7)
 * ========================================================================= */

/* ?1 id, ?2 version. */
static const char sq_payout_destination_token_sql[] =
    "SELECT provider_token FROM destinations"
    " WHERE destination_id = ?1 AND version = ?2";
enum { DESTINATION_TOKEN_TOKEN, DESTINATION_TOKEN_NCOLS };

/* The token's reader: out is OG_PAYOUT_TOKEN_MAX + 1 bytes. */
static int sq_token_row(og__sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return og__sq_text(st, DESTINATION_TOKEN_TOKEN, out,
                       OG_PAYOUT_TOKEN_MAX + 1);
}

int og__sq_payout_destination_token(void *impl, const char *id,
                                    int64_t version, char *out,
                                    size_t outlen)
{
    if (outlen < OG_PAYOUT_TOKEN_MAX + 1)
        return OG_EINTERNAL; /* store.c passes its own buffer */
    return og__sq_read_row(impl, sq_payout_destination_token_sql, id,
                           version, sq_token_row, out);
}

/* ===========================================================================
 * Drafts and cancellations
 * ========================================================================= */

/* A draft: ?1 payout, ?2 tenant, ?3 beneficiary, ?4 destination,
 * ?5 destination version, ?6 amount, ?7 currency, ?8 purpose or NULL,
 * ?9 requester. Only into a tenant of that currency, with the beneficiary
 * of that tenant and an existing destination. */
static const char sq_payout_draft_sql[] =
    "INSERT INTO payouts (payout_id, tenant_id, beneficiary_id,"
    "   destination_id, destination_version, amount, currency, purpose,"
    "   state, version, attempt_count, requester_id, created_at, updated_at)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'Draft', 1, 0, ?9, t.now, t.now"
    " FROM (SELECT " SQ_NOW " AS now) t"
    " WHERE EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2"
    "                 AND currency = ?7)"
    "   AND EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?2"
    "                 AND beneficiary_id = ?3)"
    "   AND EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)"
    " ON CONFLICT DO NOTHING RETURNING created_at";
/* Why a draft wrote nothing: payout, tenant, currency, beneficiary of the
 * tenant, destination. */
static const char sq_payout_draft_state_sql[] =
    "SELECT EXISTS (SELECT 1 FROM payouts WHERE payout_id = ?1),"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2),"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2"
    "                 AND currency = ?7),"
    "       EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?2"
    "                 AND beneficiary_id = ?3),"
    "       EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)";
/* Its columns: DRAFT_REPORT_* (rows.h). */

static int sq_payout_draft_in(og__sq_conn *c, const og__payout_draft_req *r,
                              og__payout_draft_report *out)
{
    og_payout_put_result why;
    sqlite3_stmt *st;
    int64_t at = 0;
    int rc, i;

    for (i = 0; i < 2; i++) { /* the draft, then (nothing written) why */
        if ((rc = og__sq_stmt(c,
                              i == 0 ? sq_payout_draft_sql
                                     : sq_payout_draft_state_sql,
                              &st)) < 0)
            return rc;
        sqlite3_bind_text(st, 1, r->payout_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->tenant_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->beneficiary_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, r->destination_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, r->destination_version);
        sqlite3_bind_int64(st, 6, r->amount_minor);
        sqlite3_bind_text(st, 7, r->currency, -1, SQLITE_STATIC);
        if (i == 1)
            break;
        og__sq_bind_opt(st, 8, r->has_purpose ? r->purpose : NULL);
        sqlite3_bind_text(st, 9, r->requester_id, -1, SQLITE_STATIC);
        if ((rc = og__sq_one_i64(c, st, &at)) != 0) {
            og__sq_payout_event ev = {
                .payout_id = r->payout_id, .at = at, .kind = "drafted",
                .actor = r->requester_id, .to_state = "Draft",
                .payout_version = 1, .amount = r->amount_minor};

            if (rc < 0 || (rc = og__sq_payout_event_add(c, &ev)) < 0)
                return rc;
            out->written = true;
            return 0;
        }
    }
    /* Under the write lock the report explains every draft that wrote
     * nothing: no draft of the id can be in flight. */
    if ((rc = og__sq_step(c, st)) == 1 &&
        (og__row_draft_report(og__sq_row(st), 0, out) < 0 ||
         !og__payout_draft_outcome(out, &why)))
        rc = OG_EINTERNAL;
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

int og__sq_payout_draft(void *impl, const og__payout_draft_req *r,
                        og__payout_draft_report *out)
{
    og__sq_store *s = impl;
    og__payout_draft_report rep = {0};
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_draft_in(c, r, &rep);
    rc = og__sq_end(s, c, rc, rep.written);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* A cancellation: the state it replaces, read under the write lock, then
 * ?1 payout, ?2 expected version. */
static const char sq_payout_state_sql[] =
    "SELECT state, version FROM payouts WHERE payout_id = ?1";
enum { PAYOUT_STATE_STATE, PAYOUT_STATE_VERSION, PAYOUT_STATE_NCOLS };
static const char sq_payout_cancel_sql[] =
    "UPDATE payouts SET state = 'Cancelled', version = version + 1,"
    "   updated_at = " SQ_NOW
    " WHERE payout_id = ?1 AND version = ?2"
    "   AND (state = 'Draft' OR"
    "        (state = 'Approved' AND active_attempt IS NULL))"
    " RETURNING version, updated_at";
enum { CANCEL_VERSION, CANCEL_UPDATED_AT, CANCEL_NCOLS };

static int sq_payout_cancel_in(og__sq_conn *c, const char *id,
                               int64_t expected, const char *actor,
                               og__payout_cancel_report *out)
{
    char from[16];
    int64_t version, at;
    sqlite3_stmt *st;
    int rc;

    /* The state it replaces, read under the write lock (Q1). */
    if ((rc = og__sq_stmt(c, sq_payout_state_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1) {
        out->seen_version = sqlite3_column_int64(st, PAYOUT_STATE_VERSION);
        rc = og__sq_text(st, PAYOUT_STATE_STATE, from, sizeof from) < 0
                 ? OG_EINTERNAL
                 : 1;
    }
    sqlite3_reset(st);
    if (rc <= 0)
        return rc; /* 0: no such payout */
    out->found = true;
    if ((rc = og__sq_stmt(c, sq_payout_cancel_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, expected);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: the version or the state does not allow it */
    }
    version = sqlite3_column_int64(st, CANCEL_VERSION);
    at = sqlite3_column_int64(st, CANCEL_UPDATED_AT);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    {
        og__sq_payout_event ev = {.payout_id = id, .at = at,
                                  .kind = "cancelled", .actor = actor,
                                  .from_state = from,
                                  .to_state = "Cancelled",
                                  .payout_version = version};
        if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    out->written = true;
    out->version = version;
    return 0;
}

int og__sq_payout_cancel(void *impl, const char *id, int64_t expected,
                         const char *actor, og__payout_cancel_report *out)
{
    og__sq_store *s = impl;
    og__payout_cancel_report rep = {0};
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_cancel_in(c, id, expected, actor, &rep);
    rc = og__sq_end(s, c, rc, rep.written);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* An edit (schema 14): the payout as it stands, read under the write lock,
 * then ?1 payout, ?2 expected version, ?3 beneficiary, ?4 destination,
 * ?5 destination version, ?6 amount, ?7 currency, ?8 purpose or NULL,
 * ?9 tenant: only a Draft of that tenant, in its currency, naming that
 * tenant's beneficiary and an existing destination. */
static const char sq_payout_edit_state_sql[] =
    "SELECT p.state, p.version, p.tenant_id = ?9,"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?9"
    "                 AND currency = ?7),"
    "       EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?9"
    "                 AND beneficiary_id = ?3),"
    "       EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)"
    " FROM payouts p WHERE p.payout_id = ?1";
enum {
    EDIT_STATE_STATE,
    EDIT_STATE_VERSION,
    EDIT_STATE_TENANT_SAME,
    EDIT_STATE_CURRENCY,
    EDIT_STATE_BENEFICIARY,
    EDIT_STATE_DESTINATION,
    EDIT_STATE_NCOLS
};
static const char sq_payout_edit_sql[] =
    "UPDATE payouts SET beneficiary_id = ?3, destination_id = ?4,"
    "   destination_version = ?5, amount = ?6, currency = ?7, purpose = ?8,"
    "   version = version + 1, updated_at = " SQ_NOW
    " WHERE payout_id = ?1 AND version = ?2 AND state = 'Draft'"
    "   AND tenant_id = ?9"
    "   AND EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?9"
    "                 AND currency = ?7)"
    "   AND EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?9"
    "                 AND beneficiary_id = ?3)"
    "   AND EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)"
    " RETURNING version, updated_at";

static void sq_bind_edit(sqlite3_stmt *st, const og__payout_draft_req *r,
                         int64_t expected)
{
    sqlite3_bind_text(st, 1, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, expected);
    sqlite3_bind_text(st, 3, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, r->destination_version);
    sqlite3_bind_int64(st, 6, r->amount_minor);
    sqlite3_bind_text(st, 7, r->currency, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 8, r->has_purpose ? r->purpose : NULL);
    sqlite3_bind_text(st, 9, r->tenant_id, -1, SQLITE_STATIC);
}

static int sq_payout_edit_in(og__sq_conn *c, const og__payout_draft_req *r,
                             int64_t expected, og__payout_edit_report *out)
{
    char state[16];
    int64_t version, at;
    sqlite3_stmt *st;
    int rc;

    /* What it replaces, read under the write lock (Q1): the report. */
    if ((rc = og__sq_stmt(c, sq_payout_edit_state_sql, &st)) < 0)
        return rc;
    sq_bind_edit(st, r, expected);
    if ((rc = og__sq_step(c, st)) == 1) {
        out->seen_version = sqlite3_column_int64(st, EDIT_STATE_VERSION);
        out->tenant_same = sqlite3_column_int64(st, EDIT_STATE_TENANT_SAME);
        out->currency_matches = sqlite3_column_int64(st, EDIT_STATE_CURRENCY);
        out->beneficiary_exists =
            sqlite3_column_int64(st, EDIT_STATE_BENEFICIARY);
        out->destination_exists =
            sqlite3_column_int64(st, EDIT_STATE_DESTINATION);
        rc = og__sq_text(st, EDIT_STATE_STATE, state, sizeof state) < 0
                 ? OG_EINTERNAL
                 : 1;
    }
    sqlite3_reset(st);
    if (rc <= 0)
        return rc; /* 0: no such payout */
    out->found = true;
    out->draft = strcmp(state, "Draft") == 0;
    if ((rc = og__sq_stmt(c, sq_payout_edit_sql, &st)) < 0)
        return rc;
    sq_bind_edit(st, r, expected);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: the report says why */
    }
    version = sqlite3_column_int64(st, 0);
    at = sqlite3_column_int64(st, 1);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    {
        og__sq_payout_event ev = {.payout_id = r->payout_id, .at = at,
                                  .kind = "edited", .actor = r->requester_id,
                                  .from_state = "Draft", .to_state = "Draft",
                                  .payout_version = version,
                                  .amount = r->amount_minor};
        if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    out->written = true;
    out->version = version;
    return 0;
}

int og__sq_payout_edit(void *impl, const og__payout_draft_req *r,
                       int64_t expected, og__payout_edit_report *out)
{
    og__sq_store *s = impl;
    og__payout_edit_report rep = {0};
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_edit_in(c, r, expected, &rep);
    rc = og__sq_end(s, c, rc, rep.written);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* ===========================================================================
 * og_payout_get
 * ========================================================================= */

/* ?1 payout. */
static const char sq_payout_get_sql[] =
    "SELECT payout_id, tenant_id, beneficiary_id, destination_id,"
    " destination_version, amount, currency, purpose, state, version,"
    " attempt_count, active_attempt, release_day, requester_id, created_at,"
    " updated_at FROM payouts WHERE payout_id = ?1";
/* Its columns: PAYOUT_VIEW_* (rows.h). */

static int sq_payout_view_row(og__sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return og__row_payout_view(og__sq_row(st), out);
}

int og__sq_payout_get(void *impl, const char *id, og_payout_view *out)
{
    return og__sq_read_row(impl, sq_payout_get_sql, id, 0,
                           sq_payout_view_row, out);
}

/* ===========================================================================
 * og_payout_decision_get
 * ========================================================================= */

/* A decision as stored: ?1 decision (normalized: the case og__uuid_new
 * writes). Its primary key: one row or none. */
static const char sq_payout_decision_get_sql[] =
    "SELECT decision_id, payout_id, tenant_id, mode, outcome, reason,"
    " policy_version, terms_fingerprint, tenant_settings_version,"
    " beneficiary_version, destination_version, payout_version,"
    " requester_id, requester_role, requester_approval_limit, observed_at,"
    " decided_at, correlation_id, settles_decision_id,"
    " acknowledged_destination_version"
    " FROM payout_decisions WHERE decision_id = ?1";
/* Its columns: PAYOUT_DECISION_* (rows.h). */

static int sq_payout_decision_row(og__sq_store *s, sqlite3_stmt *st,
                                  void *out)
{
    (void)s;
    return og__row_payout_decision(og__sq_row(st), out);
}

int og__sq_payout_decision_get(void *impl, const char *id,
                               og_payout_decision_view *out)
{
    return og__sq_read_row(impl, sq_payout_decision_get_sql, id, 0,
                           sq_payout_decision_row, out);
}

/* An approval's read of the decision it settles (schema 14), in the
 * decision's transaction: the row, and whether a decision settles it
 * already (payout_decisions_settles_idx). ?1 decision. */
static const char sq_payout_settle_read_sql[] =
    "SELECT d.decision_id, d.payout_id, d.tenant_id, d.mode, d.outcome,"
    " d.reason, d.policy_version, d.terms_fingerprint,"
    " d.tenant_settings_version, d.beneficiary_version,"
    " d.destination_version, d.payout_version, d.requester_id,"
    " d.requester_role, d.requester_approval_limit, d.observed_at,"
    " d.decided_at, d.correlation_id, d.settles_decision_id,"
    " d.acknowledged_destination_version,"
    " EXISTS (SELECT 1 FROM payout_decisions x"
    "         WHERE x.settles_decision_id = d.decision_id)"
    " FROM payout_decisions d WHERE d.decision_id = ?1";

int og__sq_payout_settle_read(void *impl, void *tx, const char *id,
                              og_payout_decision_view *out, bool *settled)
{
    og__sq_conn *c = tx;
    og_payout_decision_view v;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, sq_payout_settle_read_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: none, or the error */
    }
    rc = og__row_payout_decision(og__sq_row(st), &v);
    *settled = sqlite3_column_int64(st, PAYOUT_DECISION_NCOLS) != 0;
    sqlite3_reset(st);
    if (rc != 0)
        return OG_EINTERNAL;
    *out = v;
    return 1;
}

/* ===========================================================================
 * og_payout_history
 * ========================================================================= */

/* The payout's history, in seq order: the payout_events_payout_idx range. */
static const char sq_payout_history_sql[] =
    "SELECT seq, at, kind, actor, correlation_id, decision_id, grant_id,"
    " job_id, from_state, to_state, payout_version, amount, release_day,"
    " reason, evidence FROM payout_events WHERE payout_id = ?1 ORDER BY seq";
/* Its columns: PAYOUT_EVENT_* (rows.h). */

int og__sq_payout_history(void *impl, const char *payout_id,
                          og_payout_events *out)
{
    og__sq_store *s = impl;
    og_payout_events l = {NULL, 0};
    size_t cap = 0;
    og__sq_conn *c;
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_payout_history_sql, &st)) < 0) {
        og__sq_release(s, c, false);
        return rc;
    }
    sqlite3_bind_text(st, 1, payout_id, -1, SQLITE_STATIC);
    while ((rc = og__sq_step(c, st)) == 1) {
        if (l.n == cap) {
            og_payout_event *v = og__grow(l.v, sizeof *v, &cap, 8,
                                          OG__OP_HISTORY_MAX);

            if (!v) {
                rc = OG_ENOMEM;
                break;
            }
            l.v = v;
        }
        if ((rc = og__row_payout_event(og__sq_row(st), &l.v[l.n])) < 0)
            break;
        l.n++;
    }
    sqlite3_reset(st);
    og__sq_release(s, c, false);
    if (rc < 0) {
        og_payout_events_free(&l);
        return rc;
    }
    *out = l;
    return 0;
}

/* ===========================================================================
 * The policy's current release (schema 12)
 * ========================================================================= */

/* The release row. In a decision's BEGIN IMMEDIATE the write lock holds it
 * until the commit (Q22): no move of the release commits in between. */
const char og__sq_payout_policy_release_sql[] =
    "SELECT current_version FROM payout_policy_releases"
    " WHERE operation = '" OG_PAYOUT_OPERATION "'";
/* ?1 version, ?2 expected, ?3 actor: ONE conditional write. */
static const char sq_payout_policy_release_set_sql[] =
    "UPDATE payout_policy_releases SET current_version = ?1,"
    "   updated_at = " SQ_NOW ", updated_by = ?3"
    " WHERE operation = '" OG_PAYOUT_OPERATION "' AND current_version = ?2"
    " RETURNING 1";

int og__sq_payout_policy_release(void *impl, void *tx, bool lock,
                                 char out[OG_ID_MAX + 1])
{
    og__sq_conn *c = tx;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    (void)lock; /* a WRITE transaction holds the write lock */
    if ((rc = og__sq_stmt(c, og__sq_payout_policy_release_sql, &st)) < 0)
        return rc;
    if ((rc = og__sq_step(c, st)) == 1)
        rc = og__sq_text(st, 0, out, OG_ID_MAX + 1) < 0 ? OG_EINTERNAL : 1;
    sqlite3_reset(st);
    return rc;
}

int og__sq_payout_policy_release_set(void *impl, const char *version,
                                     const char *expected, const char *actor,
                                     bool *written)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    sqlite3_stmt *st;
    int64_t one = 0;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_payout_policy_release_set_sql, &st)) == 0) {
        sqlite3_bind_text(st, 1, version, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, expected, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, actor, -1, SQLITE_STATIC);
        rc = og__sq_one_i64(c, st, &one);
    }
    if ((rc = og__sq_end(s, c, rc < 0 ? rc : 0, rc == 1)) == 0)
        *written = one == 1;
    return rc;
}

/* ===========================================================================
 * The facts (Q22)
 * ========================================================================= */

/* Every fact a decision reads: the payout, its tenant's settings, its
 * beneficiary, its destination (never the token), and the store's clock;
 * ?1 payout. The foreign keys make the joins total. */
const char og__sq_payout_facts_sql[] =
    "SELECT p.state, p.version, p.attempt_count, p.active_attempt,"
    "       p.tenant_id, p.beneficiary_id, p.destination_id,"
    "       p.destination_version, p.amount, p.currency, p.purpose,"
    "       t.payouts_suspended, t.daily_limit, t.currency,"
    "       t.settlement_time_zone, t.settings_version,"
    "       b.verified, b.status, b.version,"
    "       d.beneficiary_id, d.version, d.changed_at, " SQ_NOW
    " FROM payouts p"
    " JOIN tenants t ON t.tenant_id = p.tenant_id"
    " JOIN beneficiaries b ON b.beneficiary_id = p.beneficiary_id"
    " JOIN destinations d ON d.destination_id = p.destination_id"
    " WHERE p.payout_id = ?1";
/* Its columns: PAYOUT_FACTS_* (rows.h), then the clock. */
enum { SQ_PAYOUT_FACTS_NOW = PAYOUT_FACTS_NCOLS };
/* The day's counters: ?1 tenant, ?2 day. */
const char og__sq_payout_day_sql[] =
    "SELECT paid, reserved, version FROM tenant_days"
    " WHERE tenant_id = ?1 AND day = ?2";
/* Its columns: PAYOUT_DAY_* (rows.h). */

/* The facts of payout id in tx: the payout with its tenant, beneficiary
 * and destination, then the counters of the release day of release_at_us
 * in the tenant's time zone. A missing payout is found = false at the store's
 * clock. tx's snapshot, or for the decision the write lock (Q1, Q22),
 * holds every row read until it ends, so lock asks nothing more. */
int og__sq_payout_facts(void *impl, void *tx, const char *id,
                        int64_t release_at_us, bool lock,
                        og__payout_facts *out)
{
    og__sq_conn *c = tx;
    og__payout_facts f;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    (void)lock;
    memset(&f, 0, sizeof f);
    if ((rc = og__sq_stmt(c, og__sq_payout_facts_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1 &&
        (rc = og__row_payout_facts(og__sq_row(st), &f)) == 0)
        f.observed_at_us = sqlite3_column_int64(st, SQ_PAYOUT_FACTS_NOW);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (!f.found) {
        if ((rc = og__sq_clock(c, &f.observed_at_us)) == 0)
            *out = f;
        return rc;
    }
    if (og__copy(f.payout_id, sizeof f.payout_id, id) < 0 ||
        og_payout_release_day(release_at_us, f.time_zone,
                              f.release_day) != 0)
        return OG_EINTERNAL; /* both checked before the store */
    if ((rc = og__sq_stmt(c, og__sq_payout_day_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, f.tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, f.release_day, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1)
        rc = og__row_payout_day(og__sq_row(st), &f); /* no row: 0, 0, 0 */
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    *out = f;
    return 0;
}

/* ===========================================================================
 * The decision (Q22-Q24)
 * ========================================================================= */

/* The reservation (Q23): ONE conditional write of the day's row, ?1 tenant,
 * ?2 day, ?3 amount. The first of a day inserts it within the limit; later
 * ones add to it while paid + reserved + amount stays within the limit. A
 * row (the new reserved total) only when it reserved. */
const char og__sq_payout_reserve_sql[] =
    "INSERT INTO tenant_days (tenant_id, day, paid, reserved, version)"
    " SELECT ?1, ?2, 0, ?3, 1 FROM tenants"
    " WHERE tenant_id = ?1 AND ?3 <= daily_limit"
    " ON CONFLICT (tenant_id, day) DO UPDATE"
    "   SET reserved = tenant_days.reserved + excluded.reserved,"
    "       version = tenant_days.version + 1"
    "   WHERE tenant_days.paid + tenant_days.reserved + excluded.reserved"
    "         <= (SELECT t.daily_limit FROM tenants t"
    "             WHERE t.tenant_id = excluded.tenant_id)"
    " RETURNING reserved";

/* Under the write lock the counters the facts read are the ones the
 * reservation checks, so it takes whatever the core allowed; it still
 * decides on its own. */
int og__sq_payout_reserve(void *impl, void *tx, const og__payout_facts *f,
                          bool *reserved)
{
    og__sq_conn *c = tx;
    sqlite3_stmt *st;
    int64_t total = 0;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, og__sq_payout_reserve_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, f->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, f->release_day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, f->amount_minor);
    if ((rc = og__sq_one_i64(c, st, &total)) < 0)
        return rc;
    *reserved = rc == 1;
    return 0;
}

/* The decision (append-only): ?1 id, ?2 payout, ?3 tenant or NULL, ?4 mode,
 * ?5 outcome, ?6 reason, ?7 policy, ?8 fingerprint or NULL, ?9..?12 the
 * versions evaluated or NULL, ?13 requester, ?14 role, ?15 approval limit,
 * ?16 observed_at, ?17 decided_at, ?18 correlation, ?19 the decision it
 * settles or NULL, ?20 the destination version acknowledged or NULL. */
const char og__sq_payout_decision_sql[] =
    "INSERT INTO payout_decisions (decision_id, payout_id, tenant_id, mode,"
    "   outcome, reason, policy_version, terms_fingerprint,"
    "   tenant_settings_version, beneficiary_version, destination_version,"
    "   payout_version, requester_id, requester_role,"
    "   requester_approval_limit, observed_at, decided_at, correlation_id,"
    "   settles_decision_id, acknowledged_destination_version)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
    "         ?15, ?16, ?17, ?18, ?19, ?20)";

/* The decision row and its history entry, at one instant of SQLite's
 * clock, read once: the one everything the decision writes shares. */
int og__sq_payout_decision_write(void *impl, void *tx,
                                 const og__payout_decide_req *r,
                                 const og__payout_facts *f,
                                 const og__payout_plan *p,
                                 int64_t *decided_at_us)
{
    const og_payout_verdict *v = &p->verdict;
    const char *reason = og_payout_reason_name(v->reason);
    bool read = v->terms_fingerprint[0] != '\0'; /* the facts were there */
    og__sq_conn *c = tx;
    sqlite3_stmt *st;
    int64_t now = 0;
    int rc;

    (void)impl;
    if ((rc = og__sq_clock(c, &now)) < 0 ||
        (rc = og__sq_stmt(c, og__sq_payout_decision_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->payout_id, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 3, f->found ? f->tenant_id : NULL);
    sqlite3_bind_text(st, 4, p->mode, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, og_payout_outcome_name(v->outcome), -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(st, 6, reason, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, v->policy_version, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 8, read ? v->terms_fingerprint : NULL);
    sq_bind_i64_opt(st, 9, read ? v->evaluated.tenant_settings : 0);
    sq_bind_i64_opt(st, 10, read ? v->evaluated.beneficiary : 0);
    sq_bind_i64_opt(st, 11, read ? v->evaluated.destination : 0);
    sq_bind_i64_opt(st, 12, read ? v->evaluated.payout : 0);
    sqlite3_bind_text(st, 13, r->requester_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 14, r->requester_role, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, r->approval_limit);
    sqlite3_bind_int64(st, 16, f->observed_at_us);
    sqlite3_bind_int64(st, 17, now);
    sqlite3_bind_text(st, 18, r->correlation_id, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 19, r->settles_decision_id[0] != '\0'
                                ? r->settles_decision_id
                                : NULL);
    sq_bind_i64_opt(st, 20, r->acknowledged_destination_version);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    {
        og__sq_payout_event ev = {.payout_id = r->payout_id, .at = now,
                                  .kind = "decided", .actor = r->requester_id,
                                  .correlation_id = r->correlation_id,
                                  .decision_id = r->decision_id,
                                  .reason = reason};
        if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    *decided_at_us = now;
    return 0;
}

/* The approval: ?1 payout, ?2 the version read, ?3 the state expected
 * (Draft; Approved for a re-authorization), ?4 release day, ?5 now. The
 * attempt number is attempt_count + 1, allocated here (Q24). */
const char og__sq_payout_approve_sql[] =
    "UPDATE payouts SET state = 'Approved', version = version + 1,"
    "   attempt_count = attempt_count + 1, release_day = ?4, updated_at = ?5"
    " WHERE payout_id = ?1 AND version = ?2 AND state = ?3"
    "   AND active_attempt IS NULL"
    " RETURNING version, attempt_count, amount, tenant_id";
enum {
    APPROVE_VERSION,
    APPROVE_ATTEMPT,
    APPROVE_AMOUNT,
    APPROVE_TENANT_ID,
    APPROVE_NCOLS
};
/* The grant's bindings: ?1 grant, ?2 decision, ?3 payout, ?4 tenant,
 * ?5 fingerprint, ?6 executable version, ?7 attempt, ?8 policy, ?9 amount,
 * ?10 day, ?11 not_before, ?12 expires_at, ?13 now, ?14 audience (the
 * worker principal that may present it). */
const char og__sq_payout_bind_sql[] =
    "INSERT INTO payout_grants (grant_id, issuer, decision_id, payout_id,"
    "   tenant_id, operation, audience, terms_fingerprint,"
    "   executable_payout_version, attempt_number, policy_version, amount,"
    "   release_day, not_before, expires_at, created_at)"
    " VALUES (?1, '" OG_PAYOUT_ISSUER "', ?2, ?3, ?4,"
    "         '" OG_PAYOUT_OPERATION "', ?14,"
    "         ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)";
/* The job (Q26): ?1 job, ?2 payout, ?3 grant, ?4 correlation, ?5 now. */
const char og__sq_payout_job_sql[] =
    "INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id,"
    "   created_at, available_at, deliveries)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?5, 0)";

/* What an Allowed decision enables, after the reservation and the
 * decision: the approval with the attempt number (Q24), the grant's row
 * and bindings, the job, a history entry per step. */
int og__sq_payout_decision_issue(void *impl, void *tx,
                                 const og__payout_decide_req *r,
                                 const og__payout_facts *f,
                                 const og__payout_plan *p, int64_t now)
{
    og__sq_conn *c = tx;
    sqlite3_stmt *st;
    int64_t version, attempt;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, og__sq_payout_approve_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f->version);
    sqlite3_bind_text(st, 3, p->from_state, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->release_day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        /* read in this transaction, under the write lock: it cannot have
         * moved */
        return rc < 0 ? rc : OG_EINTERNAL;
    }
    version = sqlite3_column_int64(st, APPROVE_VERSION);
    attempt = sqlite3_column_int64(st, APPROVE_ATTEMPT);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if (version != p->new_version || attempt != p->attempt_number)
        return OG_EINTERNAL;

    /* The grant's row: row form, no family, the window's end trusted. */
    if ((rc = og__sq_grant_insert(c, OG_PAYOUT_ISSUER, r->grant_id, NULL,
                                  r->expires_at_us)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, og__sq_payout_bind_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, p->verdict.terms_fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, version);
    sqlite3_bind_int64(st, 7, attempt);
    sqlite3_bind_text(st, 8, p->verdict.policy_version, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, f->amount_minor);
    sqlite3_bind_text(st, 10, f->release_day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, r->not_before_us);
    sqlite3_bind_int64(st, 12, r->expires_at_us);
    sqlite3_bind_int64(st, 13, now);
    sqlite3_bind_text(st, 14, r->audience, -1, SQLITE_STATIC);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, og__sq_payout_job_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, r->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->correlation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    {
        const og__sq_payout_event evs[] = {
            {.kind = "reserved", .amount = f->amount_minor,
             .release_day = f->release_day},
            {.kind = "approved", .from_state = p->from_state,
             .to_state = "Approved", .payout_version = version},
            {.kind = "grant-issued", .grant_id = r->grant_id},
            {.kind = "job-queued", .grant_id = r->grant_id,
             .job_id = r->job_id},
        };
        for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
            og__sq_payout_event ev = evs[i];

            ev.payout_id = r->payout_id;
            ev.at = now;
            ev.actor = r->requester_id;
            ev.correlation_id = r->correlation_id;
            ev.decision_id = r->decision_id;
            if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
                return rc;
        }
    }
    return 0;
}
