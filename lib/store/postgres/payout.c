/*
 * payout.c — the payout store's records and the decision's steps: tenants,
 * beneficiaries and destinations (puts, and the executor's read of a
 * destination's token), drafts, cancellations, the payout and a decision
 * as stored, the facts, and the decision's steps (the reservation, the
 * decision's row, what an Allowed decision enables), which
 * lib/store/payout.c runs in one transaction (S6).
 *
 * These keep M27-M31 (lib/store/store_int.h). Each put, draft and
 * cancellation is ONE statement in its own implicit transaction, confirmed
 * at ReadyForQuery (I1), whose CTEs write the record and its history
 * together and whose last SELECT reports, from the statement's snapshot,
 * what the record was. How:
 *
 *  I22 The decision's transaction is BEGIN (Read Committed) with one client
 *      deadline: the facts' statement (pg_payout_facts_locked_sql) locks
 *      the payout's row FOR UPDATE and its tenant's, beneficiary's and
 *      destination's rows FOR SHARE, so a change to any of them either
 *      committed before (and is read: a locker that waited reads the newest
 *      version) or waits until the decision commits (M28); the context
 *      read's instance locks nothing, in one REPEATABLE READ, READ ONLY
 *      transaction. The decision's row and its entry are one statement
 *      (pg_payout_decision_sql) whose clock_timestamp() is the decision's
 *      instant; what Allowed enables is one statement too
 *      (pg_payout_approve_sql). A trigger refuses every UPDATE, DELETE and
 *      TRUNCATE of payout_decisions and payout_events (M27).
 *  I23 The reservation (M30) is INSERT ... ON CONFLICT DO UPDATE ... WHERE
 *      paid + reserved + amount <= daily_limit. The day's counters are read
 *      without a lock (locking them FOR SHARE would deadlock two
 *      reservations); ON CONFLICT DO UPDATE locks the row and evaluates its
 *      WHERE on the newest committed version after waiting for a concurrent
 *      reservation.
 *  I24 The attempt number (M31) is allocated by the approval's UPDATE on a
 *      row the decision holds FOR UPDATE: two re-authorizations are ordered
 *      by that lock and the second reads the first's result;
 *      payout_grants_attempt_key (payout_id, attempt_number) is the
 *      schema's guard.
 */
#include <string.h>

#include <sodium.h>

#include "internal.h"

/* ===========================================================================
 * Puts
 * ========================================================================= */

/* A put's row: the version written (NULL: nothing), then the record as
 * the statement's snapshot shows it (PUT_REPORT_*, rows.h). */
enum {
    PUT_WRITTEN,
    PUT_REPORT,
    PUT_NCOLS = PUT_REPORT + PUT_REPORT_NCOLS
};

/* The single row of a put's statement (PUT_*) into *out. */
static int pg_put_parse(const PGresult *res, og__payout_put_report *out)
{
    og__payout_put_report r = {0};

    if (PQntuples(res) != 1 || og__pg_shape(res, PUT_NCOLS, 1) != 0)
        return OG_EINTERNAL;
    r.written = !PQgetisnull(res, 0, PUT_WRITTEN);
    if ((r.written &&
         og__pg_get_i64(res, 0, PUT_WRITTEN, &r.version) != 0) ||
        og__row_put_report(og__pg_row(res, 0), PUT_REPORT, &r) != 0)
        return OG_EINTERNAL;
    *out = r;
    return 0;
}

/* Runs the put statement stmt with params and reads its report. */
static int pg_put(og__pg_store *pg, const og__pg_stmt *stmt,
                  const char *const *params, og__payout_put_report *out)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og__payout_put_report r;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, stmt, params, &res);
    if (rc == 0)
        rc = pg_put_parse(res, &r);
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = r;
    return rc;
}

/* Tenants: $1 id  $2 suspended  $3 daily limit  $4 currency  $5 time zone
 * $6 expected settings_version (0: create). The currency is fixed: an
 * update names it in its condition. */
static const char pg_payout_tenant_put_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO tenants (tenant_id, payouts_suspended, daily_limit, currency,\n"
    "                       settlement_time_zone, settings_version, updated_at)\n"
    "  SELECT $1::text, $2::bool, $3::bigint, $4::text, $5::text, 1, clock_timestamp()\n"
    "  WHERE $6::bigint = 0\n"
    "  ON CONFLICT (tenant_id) DO NOTHING\n"
    "  RETURNING settings_version),\n"
    "upd AS (\n"
    "  UPDATE tenants SET payouts_suspended = $2::bool, daily_limit = $3::bigint,\n"
    "         settlement_time_zone = $5::text,\n"
    "         settings_version = settings_version + 1, updated_at = clock_timestamp()\n"
    "  WHERE $6::bigint > 0 AND tenant_id = $1::text AND settings_version = $6::bigint\n"
    "    AND currency = $4::text\n"
    "  RETURNING settings_version)\n"
    "SELECT (SELECT settings_version FROM ins UNION ALL SELECT settings_version FROM upd),\n"
    "       t.settings_version, t.currency = $4::text, true\n"
    "FROM (SELECT 1) x LEFT JOIN tenants t ON t.tenant_id = $1::text";
static const og__pg_stmt pg_payout_tenant_put_stmt = {
    "og_payout_tenant_put", pg_payout_tenant_put_sql, 6, OG_KEYS_AS_STORED};

int og__pg_payout_tenant_put(void *impl, const og__payout_tenant_req *r,
                             og__payout_put_report *out)
{
    char limit[24], expected[24];
    const char *params[6] = {
        r->tenant_id, r->payouts_suspended ? "true" : "false",
        limit,        r->currency,
        r->time_zone, expected};

    og__pg_fmt_i64(limit, sizeof limit, r->daily_limit);
    og__pg_fmt_i64(expected, sizeof expected, r->expected_version);
    return pg_put(impl, &pg_payout_tenant_put_stmt, params, out);
}

/* Beneficiaries: $1 id  $2 tenant (fixed)  $3 verified  $4 status
 * $5 expected (0: create, into a tenant that exists). */
static const char pg_payout_beneficiary_put_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO beneficiaries (beneficiary_id, tenant_id, verified, status, version, updated_at)\n"
    "  SELECT $1::text, t.tenant_id, $3::bool, $4::text, 1, clock_timestamp()\n"
    "  FROM tenants t WHERE $5::bigint = 0 AND t.tenant_id = $2::text\n"
    "  ON CONFLICT DO NOTHING\n"
    "  RETURNING version),\n"
    "upd AS (\n"
    "  UPDATE beneficiaries SET verified = $3::bool, status = $4::text,\n"
    "         version = version + 1, updated_at = clock_timestamp()\n"
    "  WHERE $5::bigint > 0 AND beneficiary_id = $1::text AND version = $5::bigint\n"
    "    AND tenant_id = $2::text\n"
    "  RETURNING version)\n"
    "SELECT (SELECT version FROM ins UNION ALL SELECT version FROM upd),\n"
    "       b.version, b.tenant_id = $2::text,\n"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = $2::text)\n"
    "FROM (SELECT 1) x LEFT JOIN beneficiaries b ON b.beneficiary_id = $1::text";
static const og__pg_stmt pg_payout_beneficiary_put_stmt = {
    "og_payout_beneficiary_put", pg_payout_beneficiary_put_sql, 5,
    OG_KEYS_AS_STORED};

int og__pg_payout_beneficiary_put(void *impl,
                                  const og__payout_beneficiary_req *r,
                                  og__payout_put_report *out)
{
    char expected[24];
    const char *params[5] = {r->beneficiary_id, r->tenant_id,
                             r->verified ? "true" : "false", r->status,
                             expected};

    og__pg_fmt_i64(expected, sizeof expected, r->expected_version);
    return pg_put(impl, &pg_payout_beneficiary_put_stmt, params, out);
}

/* Destinations: $1 id  $2 beneficiary  $3 provider token (SECRET: a
 * parameter only, S7)  $4 expected  $5 an import's changed_at in
 * microseconds (0: none). Every write moves changed_at; an import's is
 * never ahead of the store's clock. */
static const char pg_payout_destination_put_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO destinations (destination_id, beneficiary_id, provider_token, version, changed_at)\n"
    "  SELECT $1::text, b.beneficiary_id, $3::text, 1,\n"
    "         CASE WHEN $5::bigint > 0 THEN LEAST(timestamptz 'epoch' +\n"
    "              $5::bigint * interval '1 microsecond', clock_timestamp())\n"
    "         ELSE clock_timestamp() END\n"
    "  FROM beneficiaries b WHERE $4::bigint = 0 AND b.beneficiary_id = $2::text\n"
    "  ON CONFLICT DO NOTHING\n"
    "  RETURNING version),\n"
    "upd AS (\n"
    "  UPDATE destinations SET beneficiary_id = $2::text, provider_token = $3::text,\n"
    "         version = version + 1, changed_at = clock_timestamp()\n"
    "  WHERE $4::bigint > 0 AND destination_id = $1::text AND version = $4::bigint\n"
    "    AND EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = $2::text)\n"
    "  RETURNING version)\n"
    "SELECT (SELECT version FROM ins UNION ALL SELECT version FROM upd),\n"
    "       d.version, true, EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = $2::text)\n"
    "FROM (SELECT 1) x LEFT JOIN destinations d ON d.destination_id = $1::text";
static const og__pg_stmt pg_payout_destination_put_stmt = {
    "og_payout_destination_put", pg_payout_destination_put_sql, 5,
    OG_KEYS_AS_STORED};

int og__pg_payout_destination_put(void *impl,
                                  const og__payout_destination_req *r,
                                  og__payout_put_report *out)
{
    char expected[24], changed[24];
    /* The token is a parameter only: this backend logs nothing (M7), and
     * libpq keeps no copy once the call returns (S7). */
    const char *params[5] = {r->destination_id, r->beneficiary_id,
                             r->provider_token, expected, changed};

    og__pg_fmt_i64(expected, sizeof expected, r->expected_version);
    og__pg_fmt_i64(changed, sizeof changed, r->changed_at_us);
    return pg_put(impl, &pg_payout_destination_put_stmt, params, out);
}

/* ===========================================================================
 * The executor's read of a token (S7)
 * ========================================================================= */

/* The executor's read of the secret (S7): $1 id  $2 version. */
static const char pg_payout_destination_token_sql[] =
    "SELECT provider_token FROM destinations\n"
    "WHERE destination_id = $1::text AND version = $2::bigint";
static const og__pg_stmt pg_payout_destination_token_stmt = {
    "og_payout_destination_token", pg_payout_destination_token_sql, 2,
    OG_KEYS_AS_STORED};
enum { DESTINATION_TOKEN_TOKEN, DESTINATION_TOKEN_NCOLS };

int og__pg_payout_destination_token(void *impl, const char *id, int64_t version,
                                    char *out, size_t outlen)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char v[24];
    const char *params[2] = {id, v};
    int rc;

    og__pg_fmt_i64(v, sizeof v, version);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_destination_token_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, DESTINATION_TOKEN_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__pg_get_text(res, 0, DESTINATION_TOKEN_TOKEN, out, outlen) == 0
                 ? 1
                 : OG_EINTERNAL;
    /* The token's only other copy: libpq's result (S7). */
    if (res != NULL && PQntuples(res) == 1 &&
        PQnfields(res) == DESTINATION_TOKEN_NCOLS &&
        !PQgetisnull(res, 0, DESTINATION_TOKEN_TOKEN)) {
        char *t = PQgetvalue(res, 0, DESTINATION_TOKEN_TOKEN);

        sodium_memzero(t, strlen(t));
    }
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* ===========================================================================
 * Drafts and cancellations
 * ========================================================================= */

/* A draft: $1 payout  $2 tenant  $3 beneficiary  $4 destination
 * $5 destination version  $6 amount  $7 currency  $8 purpose (NULL: none)
 * $9 requester. Only into a tenant of that currency, with that tenant's
 * beneficiary and an existing destination; with its "drafted" entry. One
 * row: written, then why not (payout, tenant, currency, beneficiary,
 * destination). */
static const char pg_payout_draft_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO payouts (payout_id, tenant_id, beneficiary_id, destination_id, destination_version,\n"
    "                       amount, currency, purpose, state, version, attempt_count, requester_id,\n"
    "                       created_at, updated_at)\n"
    "  SELECT $1::text, $2::text, $3::text, $4::text, $5::bigint, $6::bigint, $7::text, $8::text,\n"
    "         'Draft', 1, 0, $9::text, t.now, t.now\n"
    "  FROM (SELECT clock_timestamp() AS now) t\n"
    "  WHERE EXISTS (SELECT 1 FROM tenants WHERE tenant_id = $2::text AND currency = $7::text)\n"
    "    AND EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = $2::text AND beneficiary_id = $3::text)\n"
    "    AND EXISTS (SELECT 1 FROM destinations WHERE destination_id = $4::text)\n"
    "  ON CONFLICT (payout_id) DO NOTHING\n"
    "  RETURNING payout_id, created_at, amount),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, to_state, payout_version, amount)\n"
    "  SELECT payout_id, created_at, 'drafted', $9::text, 'Draft', 1, amount FROM ins\n"
    "  RETURNING 1)\n"
    "SELECT EXISTS (SELECT 1 FROM ins),\n"
    "       EXISTS (SELECT 1 FROM payouts WHERE payout_id = $1::text),\n"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = $2::text),\n"
    "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = $2::text AND currency = $7::text),\n"
    "       EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = $2::text AND beneficiary_id = $3::text),\n"
    "       EXISTS (SELECT 1 FROM destinations WHERE destination_id = $4::text)";
static const og__pg_stmt pg_payout_draft_stmt = {
    "og_payout_draft", pg_payout_draft_sql, 9, OG_KEYS_AS_STORED};
/* Its row: written, then why not (DRAFT_REPORT_*, rows.h). */
enum {
    DRAFT_WRITTEN,
    DRAFT_REPORT,
    DRAFT_NCOLS = DRAFT_REPORT + DRAFT_REPORT_NCOLS
};

int og__pg_payout_draft(void *impl, const og__payout_draft_req *r,
                        og__payout_draft_report *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og__payout_draft_report rep = {0};
    char dv[24], amount[24];
    const char *params[9] = {r->payout_id,
                             r->tenant_id,
                             r->beneficiary_id,
                             r->destination_id,
                             dv,
                             amount,
                             r->currency,
                             r->has_purpose ? r->purpose : NULL,
                             r->requester_id};
    int rc;

    og__pg_fmt_i64(dv, sizeof dv, r->destination_version);
    og__pg_fmt_i64(amount, sizeof amount, r->amount_minor);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_draft_stmt, params, &res);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, DRAFT_NCOLS, 1) != 0))
        rc = OG_EINTERNAL;
    if (rc == 0) {
        /* The statement's snapshot does not show a draft of the id that
         * committed while its INSERT waited: og__payout_draft_outcome
         * reads a report that explains nothing as that. */
        rep.written = og__pg_get_bool(res, 0, DRAFT_WRITTEN);
        rc = og__row_draft_report(og__pg_row(res, 0), DRAFT_REPORT, &rep);
    }
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* A cancellation: $1 payout  $2 expected version  $3 actor. cur locks the
 * row (a waiter re-reads its newest version) and gives the state replaced;
 * upd re-checks the version and the state; ev records it. One row: the new
 * version (NULL: not cancelled), the version cur saw (NULL: no payout). */
static const char pg_payout_cancel_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT payout_id, state, version FROM payouts WHERE payout_id = $1::text FOR UPDATE),\n"
    "upd AS (\n"
    "  UPDATE payouts p SET state = 'Cancelled', version = p.version + 1, updated_at = clock_timestamp()\n"
    "  FROM cur\n"
    "  WHERE p.payout_id = cur.payout_id AND p.version = $2::bigint\n"
    "    AND (p.state = 'Draft' OR (p.state = 'Approved' AND p.active_attempt IS NULL))\n"
    "  RETURNING p.payout_id, cur.state AS from_state, p.version, p.updated_at),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, from_state, to_state, payout_version)\n"
    "  SELECT payout_id, updated_at, 'cancelled', $3::text, from_state, 'Cancelled', version FROM upd\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT version FROM upd), (SELECT version FROM cur)";
static const og__pg_stmt pg_payout_cancel_stmt = {
    "og_payout_cancel", pg_payout_cancel_sql, 3, OG_KEYS_AS_STORED};
enum { CANCEL_VERSION, CANCEL_SEEN, CANCEL_NCOLS };

int og__pg_payout_cancel(void *impl, const char *id, int64_t expected,
                         const char *actor, og__payout_cancel_report *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og__payout_cancel_report rep = {0};
    char ev[24];
    const char *params[3] = {id, ev, actor};
    int rc;

    og__pg_fmt_i64(ev, sizeof ev, expected);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_cancel_stmt, params, &res);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, CANCEL_NCOLS, 1) != 0))
        rc = OG_EINTERNAL;
    if (rc == 0) {
        rep.written = !PQgetisnull(res, 0, CANCEL_VERSION);
        rep.found = !PQgetisnull(res, 0, CANCEL_SEEN);
        if ((rep.written &&
             og__pg_get_i64(res, 0, CANCEL_VERSION, &rep.version) != 0) ||
            (rep.found &&
             og__pg_get_i64(res, 0, CANCEL_SEEN, &rep.seen_version) != 0))
            rc = OG_EINTERNAL;
    }
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* An edit (schema 14): $1 payout  $2 expected version  $3 beneficiary
 * $4 destination  $5 destination version  $6 amount  $7 currency  $8 purpose
 * (NULL: none)  $9 tenant  $10 actor. cur locks the row (a waiter re-reads
 * its newest version) and gives what it replaces; chk what the new terms
 * name; upd re-checks the version, the state (Draft), the tenant and chk;
 * ev records it. One row: the new version (NULL: not edited), then the
 * report (the version, state and tenant cur saw; chk's three). */
static const char pg_payout_edit_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT payout_id, state, version, tenant_id FROM payouts WHERE payout_id = $1::text FOR UPDATE),\n"
    "chk AS MATERIALIZED (\n"
    "  SELECT EXISTS (SELECT 1 FROM tenants WHERE tenant_id = $9::text AND currency = $7::text) AS cur_ok,\n"
    "         EXISTS (SELECT 1 FROM beneficiaries\n"
    "                 WHERE tenant_id = $9::text AND beneficiary_id = $3::text) AS ben_ok,\n"
    "         EXISTS (SELECT 1 FROM destinations WHERE destination_id = $4::text) AS dst_ok),\n"
    "upd AS (\n"
    "  UPDATE payouts p SET beneficiary_id = $3::text, destination_id = $4::text,\n"
    "         destination_version = $5::bigint, amount = $6::bigint, currency = $7::text,\n"
    "         purpose = $8::text, version = p.version + 1, updated_at = clock_timestamp()\n"
    "  FROM cur, chk\n"
    "  WHERE p.payout_id = cur.payout_id AND p.version = $2::bigint AND p.state = 'Draft'\n"
    "    AND p.tenant_id = $9::text AND chk.cur_ok AND chk.ben_ok AND chk.dst_ok\n"
    "  RETURNING p.payout_id, p.version, p.updated_at, p.amount),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, from_state, to_state, payout_version,\n"
    "                             amount)\n"
    "  SELECT payout_id, updated_at, 'edited', $10::text, 'Draft', 'Draft', version, amount FROM upd\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT version FROM upd), (SELECT version FROM cur), (SELECT state FROM cur),\n"
    "       coalesce((SELECT tenant_id = $9::text FROM cur), false), chk.cur_ok, chk.ben_ok,\n"
    "       chk.dst_ok\n"
    "FROM chk";
static const og__pg_stmt pg_payout_edit_stmt = {
    "og_payout_edit", pg_payout_edit_sql, 10, OG_KEYS_AS_STORED};
enum {
    EDIT_VERSION,
    EDIT_SEEN,
    EDIT_STATE,
    EDIT_TENANT_SAME,
    EDIT_CURRENCY,
    EDIT_BENEFICIARY,
    EDIT_DESTINATION,
    EDIT_NCOLS
};

int og__pg_payout_edit(void *impl, const og__payout_draft_req *r,
                       int64_t expected, og__payout_edit_report *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og__payout_edit_report rep = {0};
    char ev[24], dv[24], amount[24];
    const char *params[10] = {r->payout_id,
                              ev,
                              r->beneficiary_id,
                              r->destination_id,
                              dv,
                              amount,
                              r->currency,
                              r->has_purpose ? r->purpose : NULL,
                              r->tenant_id,
                              r->requester_id};
    int rc;

    og__pg_fmt_i64(ev, sizeof ev, expected);
    og__pg_fmt_i64(dv, sizeof dv, r->destination_version);
    og__pg_fmt_i64(amount, sizeof amount, r->amount_minor);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_edit_stmt, params, &res);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, EDIT_NCOLS, 1) != 0))
        rc = OG_EINTERNAL;
    if (rc == 0) {
        rep.written = !PQgetisnull(res, 0, EDIT_VERSION);
        rep.found = !PQgetisnull(res, 0, EDIT_SEEN);
        if ((rep.written &&
             og__pg_get_i64(res, 0, EDIT_VERSION, &rep.version) != 0) ||
            (rep.found &&
             og__pg_get_i64(res, 0, EDIT_SEEN, &rep.seen_version) != 0))
            rc = OG_EINTERNAL;
        rep.draft = rep.found &&
                    strcmp(PQgetvalue(res, 0, EDIT_STATE), "Draft") == 0;
        rep.tenant_same = og__pg_get_bool(res, 0, EDIT_TENANT_SAME);
        rep.currency_matches = og__pg_get_bool(res, 0, EDIT_CURRENCY);
        rep.beneficiary_exists = og__pg_get_bool(res, 0, EDIT_BENEFICIARY);
        rep.destination_exists = og__pg_get_bool(res, 0, EDIT_DESTINATION);
    }
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = rep;
    return rc;
}

/* ===========================================================================
 * og_payout_get
 * ========================================================================= */

/* A payout as stored: $1 payout. */
static const char pg_payout_get_sql[] =
    "SELECT payout_id, tenant_id, beneficiary_id, destination_id, destination_version, amount,\n"
    "       currency, purpose, state, version, attempt_count, active_attempt::text,\n"
    "       to_char(release_day, 'YYYY-MM-DD'), requester_id,\n"
    "       " PG_EPOCH_US("created_at") ", " PG_EPOCH_US("updated_at") "\n"
    "FROM payouts WHERE payout_id = $1::text";
static const og__pg_stmt pg_payout_get_stmt = {
    "og_payout_get", pg_payout_get_sql, 1, OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_VIEW_* (rows.h). */

int og__pg_payout_get(void *impl, const char *id, og_payout_view *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {id};
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_get_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, PAYOUT_VIEW_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_payout_view(og__pg_row(res, 0), out) == 0 ? 1
                                                                : OG_EINTERNAL;
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* ===========================================================================
 * og_payout_decision_get
 * ========================================================================= */

/* A decision as stored: $1 decision. Its primary key: one row or none. */
static const char pg_payout_decision_get_sql[] =
    "SELECT decision_id::text, payout_id, tenant_id, mode, outcome, reason, policy_version,\n"
    "       terms_fingerprint, tenant_settings_version, beneficiary_version,\n"
    "       destination_version, payout_version, requester_id, requester_role,\n"
    "       requester_approval_limit, " PG_EPOCH_US("observed_at") ",\n"
    "       " PG_EPOCH_US("decided_at") ", correlation_id,\n"
    "       settles_decision_id::text, acknowledged_destination_version\n"
    "FROM payout_decisions WHERE decision_id = $1::uuid";
static const og__pg_stmt pg_payout_decision_get_stmt = {
    "og_payout_decision_get", pg_payout_decision_get_sql, 1,
    OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_DECISION_* (rows.h). */

/* The payout's history, in seq order (payout_events_payout_idx). $1
 * payout_id. */
static const char pg_payout_history_sql[] =
    "SELECT seq, (extract(epoch FROM at) * 1000000)::bigint, kind, actor,\n"
    "       correlation_id, decision_id::text, grant_id, job_id::text,\n"
    "       from_state, to_state, payout_version, amount,\n"
    "       to_char(release_day, 'YYYY-MM-DD'), reason, evidence\n"
    "FROM payout_events WHERE payout_id = $1 ORDER BY seq";
static const og__pg_stmt pg_payout_history_stmt = {
    "og_payout_history", pg_payout_history_sql, 1, OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_EVENT_* (rows.h). */

int og__pg_payout_history(void *impl, const char *payout_id,
                          og_payout_events *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {payout_id};
    og_payout_events e = {NULL, 0};
    int rc, i, n;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    if ((rc = og__pg_run(pg, c, &pg_payout_history_stmt, params, &res)) != 0)
        goto out;
    n = PQntuples(res);
    if (PQnfields(res) != PAYOUT_EVENT_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if ((size_t)n > OG__OP_HISTORY_MAX) {
        rc = OG_ENOMEM; /* as SQLite's array stops there */
        goto out;
    }
    if (n > 0 && !(e.v = calloc((size_t)n, sizeof *e.v))) {
        rc = OG_ENOMEM;
        goto out;
    }
    for (i = 0; i < n && rc == 0; i++)
        rc = og__row_payout_event(og__pg_row(res, i), &e.v[i]);
    e.n = (size_t)n;
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc != 0) {
        free(e.v);
        return rc;
    }
    *out = e;
    return 0;
}

int og__pg_payout_decision_get(void *impl, const char *id,
                               og_payout_decision_view *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {id};
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_decision_get_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, PAYOUT_DECISION_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_payout_decision(og__pg_row(res, 0), out) == 0
                 ? 1
                 : OG_EINTERNAL;
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* An approval's read of the decision it settles (schema 14), in the
 * decision's transaction after the payout's row was locked: the row, and
 * whether a decision settles it already (payout_decisions_settles_idx).
 * READ COMMITTED: a second approval waits on the row lock and this
 * statement then sees the first one's committed decision. $1 decision. */
static const char pg_payout_settle_read_sql[] =
    "SELECT d.decision_id::text, d.payout_id, d.tenant_id, d.mode, d.outcome, d.reason,\n"
    "       d.policy_version, d.terms_fingerprint, d.tenant_settings_version,\n"
    "       d.beneficiary_version, d.destination_version, d.payout_version, d.requester_id,\n"
    "       d.requester_role, d.requester_approval_limit, " PG_EPOCH_US("d.observed_at") ",\n"
    "       " PG_EPOCH_US("d.decided_at") ", d.correlation_id, d.settles_decision_id::text,\n"
    "       d.acknowledged_destination_version,\n"
    "       EXISTS (SELECT 1 FROM payout_decisions x WHERE x.settles_decision_id = d.decision_id)\n"
    "FROM payout_decisions d WHERE d.decision_id = $1::uuid";
static const og__pg_stmt pg_payout_settle_read_stmt = {
    "og_payout_settle_read", pg_payout_settle_read_sql, 1,
    OG_KEYS_AS_STORED};

int og__pg_payout_settle_read(void *impl, void *tx, const char *id,
                              og_payout_decision_view *out, bool *settled)
{
    og__pg_conn *c = tx;
    og_payout_decision_view v;
    PGresult *res = NULL;
    const char *params[1] = {id};
    const char *x;
    int rc;

    rc = og__pg_run_in(impl, c, &pg_payout_settle_read_stmt, params, &res,
                       c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, PAYOUT_DECISION_NCOLS + 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1) {
        memset(&v, 0, sizeof v);
        x = PQgetisnull(res, 0, PAYOUT_DECISION_NCOLS)
                ? NULL
                : PQgetvalue(res, 0, PAYOUT_DECISION_NCOLS);
        if (og__row_payout_decision(og__pg_row(res, 0), &v) != 0 || !x) {
            rc = OG_EINTERNAL;
        } else {
            *settled = strcmp(x, "t") == 0;
            *out = v;
            rc = 1;
        }
    }
    PQclear(res);
    return rc;
}

/* ===========================================================================
 * The policy's current release (schema 12)
 * ========================================================================= */

/* The release row; a decision's read locks it FOR SHARE, so a move of the
 * release waits for the decision's commit, and a decision that waited for
 * a move reads the newest row (Read Committed). */
#define PG_PAYOUT_POLICY_RELEASE_SQL(lock)                                     \
    "SELECT current_version FROM payout_policy_releases\n"                    \
    "WHERE operation = '" OG_PAYOUT_OPERATION "'" lock
static const char pg_payout_policy_release_sql[] =
    PG_PAYOUT_POLICY_RELEASE_SQL("");
static const char pg_payout_policy_release_locked_sql[] =
    PG_PAYOUT_POLICY_RELEASE_SQL("\nFOR SHARE");
static const og__pg_stmt pg_payout_policy_release_stmt = {
    "og_payout_policy_release", pg_payout_policy_release_sql, 0,
    OG_KEYS_AS_STORED};
const og__pg_stmt og__pg_payout_policy_release_locked_stmt = {
    "og_payout_policy_release_locked", pg_payout_policy_release_locked_sql, 0,
    OG_KEYS_AS_STORED};
/* $1 version  $2 expected  $3 actor: ONE conditional write. */
static const char pg_payout_policy_release_set_sql[] =
    "UPDATE payout_policy_releases SET current_version = $1::text,\n"
    "       updated_at = clock_timestamp(), updated_by = $3::text\n"
    "WHERE operation = '" OG_PAYOUT_OPERATION "' AND current_version = $2::text\n"
    "RETURNING 1";
static const og__pg_stmt pg_payout_policy_release_set_stmt = {
    "og_payout_policy_release_set", pg_payout_policy_release_set_sql, 3,
    OG_KEYS_AS_STORED};

int og__pg_payout_policy_release(void *impl, void *tx, bool lock,
                                 char out[OG_ID_MAX + 1])
{
    og__pg_conn *c = tx;
    PGresult *res = NULL;
    int rc;

    rc = og__pg_run_in(impl, c,
                       lock ? &og__pg_payout_policy_release_locked_stmt
                            : &pg_payout_policy_release_stmt,
                       NULL, &res, c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__pg_get_text(res, 0, 0, out, OG_ID_MAX + 1) == 0 ? 1
                                                                 : OG_EINTERNAL;
    PQclear(res);
    return rc;
}

int og__pg_payout_policy_release_set(void *impl, const char *version,
                                     const char *expected, const char *actor,
                                     bool *written)
{
    og__pg_store *pg = impl;
    const char *params[3] = {version, expected, actor};
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_policy_release_set_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0)
        *written = PQntuples(res) == 1;
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* ===========================================================================
 * The facts (I22)
 * ========================================================================= */

/* The facts a decision reads (I22), PAYOUT_FACTS_* (rows.h): $1 payout.
 * The foreign keys make the joins total. The decision's instance locks the
 * payout's row FOR UPDATE (it will write it) and the tenant's, the
 * beneficiary's and the destination's FOR SHARE, so none of them can
 * change until the decision commits; a change in flight is waited for and
 * its result read (Read Committed re-reads the newest version of a row it
 * waited for). The context read's instance locks nothing: it runs in a
 * REPEATABLE READ, READ ONLY transaction with the day's read, one
 * snapshot. */
#define PG_PAYOUT_FACTS_SQL(lock)                                              \
    "SELECT p.state, p.version, p.attempt_count, p.active_attempt::text,\n"    \
    "       p.tenant_id, p.beneficiary_id, p.destination_id, p.destination_version,\n" \
    "       p.amount, p.currency, p.purpose,\n"                                \
    "       t.payouts_suspended, t.daily_limit, t.currency, t.settlement_time_zone,\n" \
    "       t.settings_version, b.verified, b.status, b.version,\n"            \
    "       d.beneficiary_id, d.version, " PG_EPOCH_US("d.changed_at") "\n"    \
    "FROM payouts p\n"                                                         \
    "JOIN tenants t ON t.tenant_id = p.tenant_id\n"                            \
    "JOIN beneficiaries b ON b.beneficiary_id = p.beneficiary_id\n"            \
    "JOIN destinations d ON d.destination_id = p.destination_id\n"             \
    "WHERE p.payout_id = $1::text" lock
static const char pg_payout_facts_sql[] = PG_PAYOUT_FACTS_SQL("");
static const char pg_payout_facts_locked_sql[] =
    PG_PAYOUT_FACTS_SQL("\nFOR UPDATE OF p FOR SHARE OF t, b, d");
const og__pg_stmt og__pg_payout_facts_stmt = {
    "og_payout_facts", pg_payout_facts_sql, 1, OG_KEYS_AS_STORED};
const og__pg_stmt og__pg_payout_facts_locked_stmt = {
    "og_payout_facts_locked", pg_payout_facts_locked_sql, 1,
    OG_KEYS_AS_STORED};

/* The counters of a release day and the store's clock (the observation):
 * $1 tenant  $2 day (NULL, NULL: only the clock). Not locked: the
 * reservation decides on the newest counters itself (I23). */
static const char pg_payout_day_sql[] =
    "SELECT d.paid, d.reserved, d.version, " PG_EPOCH_US("clock_timestamp()") "\n"
    "FROM (SELECT 1) x LEFT JOIN tenant_days d ON d.tenant_id = $1::text AND d.day = $2::date";
const og__pg_stmt og__pg_payout_day_stmt = {
    "og_payout_day", pg_payout_day_sql, 2, OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_DAY_* (rows.h), then the clock. */
enum { PG_PAYOUT_DAY_NOW = PAYOUT_DAY_NCOLS, PG_PAYOUT_DAY_NCOLS };

/* The facts of payout id in tx, with the facts statement the read asks
 * for: the decision's locks the rows it reads (lock, I22); the context
 * read's runs in a REPEATABLE READ, READ ONLY transaction, one snapshot
 * with the day's read. Then the counters of the release day of
 * release_at_us and the store's clock. */
int og__pg_payout_facts(void *impl, void *tx, const char *id,
                        int64_t release_at_us, bool lock,
                        og__payout_facts *out)
{
    og__pg_conn *c = tx;
    const char *fparams[1] = {id};
    const char *dparams[2] = {NULL, NULL};
    og__payout_facts f;
    PGresult *res = NULL;
    int rc;

    memset(&f, 0, sizeof f);
    rc = og__pg_run_in(impl, c,
                       lock ? &og__pg_payout_facts_locked_stmt
                            : &og__pg_payout_facts_stmt,
                       fparams, &res, c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, PAYOUT_FACTS_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_payout_facts(og__pg_row(res, 0), &f);
    PQclear(res);
    res = NULL;
    if (rc != 0)
        return rc;
    if (f.found) {
        if (og__copy(f.payout_id, sizeof f.payout_id, id) != 0 ||
            og_payout_release_day(release_at_us, f.time_zone,
                                  f.release_day) != 0)
            return OG_EINTERNAL; /* both checked before the store */
        dparams[0] = f.tenant_id;
        dparams[1] = f.release_day;
    }
    rc = og__pg_run_in(impl, c, &og__pg_payout_day_stmt, dparams, &res,
                       c->txn_deadline_us);
    if (rc == 0 &&
        (PQntuples(res) != 1 ||
         og__pg_shape(res, PG_PAYOUT_DAY_NCOLS, 1) != 0 ||
         og__pg_get_i64(res, 0, PG_PAYOUT_DAY_NOW, &f.observed_at_us) != 0 ||
         og__row_payout_day(og__pg_row(res, 0), &f) != 0))
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc == 0)
        *out = f;
    return rc;
}

/* ===========================================================================
 * The decision (I22-I24)
 * ========================================================================= */

/* The reservation (I23): ONE conditional write of the day's row. $1 tenant
 * $2 day  $3 amount. The day's first reservation inserts the row within
 * the limit; any later one adds to it only while paid + reserved + amount
 * stays within it. ON CONFLICT DO UPDATE locks the row and evaluates its
 * WHERE on the newest committed version, after waiting for a concurrent
 * reservation: two decisions can never both pass on the same headroom. The
 * limit is read from the tenant's row, which the decision holds FOR SHARE.
 * One row (the new reserved total) only when it reserved. */
static const char pg_payout_reserve_sql[] =
    "INSERT INTO tenant_days AS d (tenant_id, day, paid, reserved, version)\n"
    "SELECT $1::text, $2::date, 0, $3::bigint, 1 FROM tenants t\n"
    "WHERE t.tenant_id = $1::text AND $3::bigint <= t.daily_limit\n"
    "ON CONFLICT (tenant_id, day) DO UPDATE\n"
    "  SET reserved = d.reserved + excluded.reserved, version = d.version + 1\n"
    "  WHERE d.paid + d.reserved + excluded.reserved\n"
    "        <= (SELECT t.daily_limit FROM tenants t WHERE t.tenant_id = excluded.tenant_id)\n"
    "RETURNING d.reserved";
const og__pg_stmt og__pg_payout_reserve_stmt = {
    "og_payout_reserve", pg_payout_reserve_sql, 3, OG_KEYS_AS_STORED};
enum { RESERVE_RESERVED, RESERVE_NCOLS };

/* The counters the facts read were not locked, so a concurrent decision
 * may have reserved since: this write decides on the newest ones. */
int og__pg_payout_reserve(void *impl, void *tx, const og__payout_facts *f,
                          bool *reserved)
{
    og__pg_conn *c = tx;
    PGresult *res = NULL;
    char amount[24];
    const char *params[3] = {f->tenant_id, f->release_day, amount};
    int rc;

    og__pg_fmt_i64(amount, sizeof amount, f->amount_minor);
    rc = og__pg_run_in(impl, c, &og__pg_payout_reserve_stmt, params, &res,
                       c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, RESERVE_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0)
        *reserved = PQntuples(res) == 1;
    PQclear(res);
    return rc;
}

/* The decision (append-only) and its "decided" entry, at one instant:
 * $1 id  $2 payout  $3 tenant (NULL: missing)  $4 mode  $5 outcome
 * $6 reason  $7 policy  $8 fingerprint  $9-$12 the versions evaluated
 * (NULL: nothing read)  $13 requester  $14 role  $15 approval limit
 * $16 observed_at (µs)  $17 correlation. One row: decided_at (µs). */
static const char pg_payout_decision_sql[] =
    "WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),\n"
    "dec AS (\n"
    "  INSERT INTO payout_decisions (decision_id, payout_id, tenant_id, mode, outcome, reason,\n"
    "      policy_version, terms_fingerprint, tenant_settings_version, beneficiary_version,\n"
    "      destination_version, payout_version, requester_id, requester_role,\n"
    "      requester_approval_limit, observed_at, decided_at, correlation_id,\n"
    "      settles_decision_id, acknowledged_destination_version)\n"
    "  SELECT $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text,\n"
    "         $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::text, $14::text,\n"
    "         $15::bigint, " PG_TS("$16") ", t.now, $17::text, $18::uuid, $19::bigint\n"
    "  FROM t\n"
    "  RETURNING decision_id, payout_id, decided_at),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id, decision_id, reason)\n"
    "  SELECT payout_id, decided_at, 'decided', $13::text, $17::text, decision_id, $6::text FROM dec\n"
    "  RETURNING 1)\n"
    "SELECT " PG_EPOCH_US("decided_at") " FROM dec";
const og__pg_stmt og__pg_payout_decision_stmt = {
    "og_payout_decision", pg_payout_decision_sql, 19, OG_KEYS_AS_STORED};
enum { DECISION_DECIDED_AT, DECISION_NCOLS };

/* The decision row and its "decided" entry; *decided_at_us its instant. */
int og__pg_payout_decision_write(void *impl, void *tx,
                                 const og__payout_decide_req *r,
                                 const og__payout_facts *f,
                                 const og__payout_plan *p,
                                 int64_t *decided_at_us)
{
    og__pg_conn *c = tx;
    int64_t decided_at = 0;
    const og_payout_verdict *v = &p->verdict;
    bool read = v->terms_fingerprint[0] != '\0'; /* the facts were there */
    char ver[4][24], limit[24], observed[24], acked[24];
    const char *params[19];
    PGresult *res = NULL;
    int rc;

    og__pg_fmt_i64(ver[0], sizeof ver[0], v->evaluated.tenant_settings);
    og__pg_fmt_i64(ver[1], sizeof ver[1], v->evaluated.beneficiary);
    og__pg_fmt_i64(ver[2], sizeof ver[2], v->evaluated.destination);
    og__pg_fmt_i64(ver[3], sizeof ver[3], v->evaluated.payout);
    og__pg_fmt_i64(limit, sizeof limit, r->approval_limit);
    og__pg_fmt_i64(observed, sizeof observed, f->observed_at_us);
    params[0] = r->decision_id;
    params[1] = r->payout_id;
    params[2] = f->found ? f->tenant_id : NULL;
    params[3] = p->mode;
    params[4] = og_payout_outcome_name(v->outcome);
    params[5] = og_payout_reason_name(v->reason);
    params[6] = v->policy_version;
    params[7] = read ? v->terms_fingerprint : NULL;
    for (int i = 0; i < 4; i++)
        params[8 + i] = read ? ver[i] : NULL;
    params[12] = r->requester_id;
    params[13] = r->requester_role;
    params[14] = limit;
    params[15] = observed;
    params[16] = r->correlation_id;
    og__pg_fmt_i64(acked, sizeof acked, r->acknowledged_destination_version);
    params[17] =
        r->settles_decision_id[0] != '\0' ? r->settles_decision_id : NULL;
    params[18] = r->acknowledged_destination_version != 0 ? acked : NULL;
    rc = og__pg_run_in(impl, c, &og__pg_payout_decision_stmt, params, &res,
                       c->txn_deadline_us);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, DECISION_NCOLS, 1) != 0 ||
         og__pg_get_i64(res, 0, DECISION_DECIDED_AT, &decided_at) != 0))
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc == 0)
        *decided_at_us = decided_at;
    return rc;
}

/* What an Allowed decision enables, after its reservation and its row
 * (I24): $1 payout  $2 the version read  $3 the state expected (Draft;
 * Approved for a re-authorization)  $4 release day  $5 the decision's
 * instant (µs)  $6 grant id  $7 not_before  $8 expires_at  $9 decision
 * $10 fingerprint  $11 policy  $12 job id  $13 correlation  $14 requester
 * $15 audience (the worker principal that may present the grant).
 *  - upd: the payout -> Approved at version + 1, attempt_count + 1 (the
 *    attempt number, allocated by this write: two re-authorizations are
 *    ordered by the payout's row lock and get two numbers), conditional
 *    on the version and state read and no active attempt;
 *  - gr: the grant's row (row form, issuer 'payouts', no family, the
 *    window's end as its trusted expiry), from upd only;
 *  - bind: its bindings; job: the outbox row, references only;
 *  - ev: the history, a row per step.
 * One row (none when upd changed nothing): version, attempt, jobs,
 * entries. */
static const char pg_payout_approve_sql[] =
    "WITH upd AS (\n"
    "  UPDATE payouts p SET state = 'Approved', version = p.version + 1,\n"
    "         attempt_count = p.attempt_count + 1, release_day = $4::date,\n"
    "         updated_at = " PG_TS("$5") "\n"
    "  WHERE p.payout_id = $1::text AND p.version = $2::bigint AND p.state = $3::text\n"
    "    AND p.active_attempt IS NULL\n"
    "  RETURNING p.payout_id, p.tenant_id, p.version, p.attempt_count, p.amount),\n"
    "gr AS (\n"
    "  INSERT INTO grants (issuer, grant_id, family, expires_at)\n"
    "  SELECT '" OG_PAYOUT_ISSUER "', $6::text, NULL, " PG_TS("$8") " FROM upd\n"
    "  RETURNING issuer, grant_id),\n"
    "bind AS (\n"
    "  INSERT INTO payout_grants (grant_id, issuer, decision_id, payout_id, tenant_id, operation,\n"
    "      audience, terms_fingerprint, executable_payout_version, attempt_number,\n"
    "      policy_version, amount, release_day, not_before, expires_at, created_at)\n"
    "  SELECT gr.grant_id, gr.issuer, $9::uuid, upd.payout_id, upd.tenant_id,\n"
    "         '" OG_PAYOUT_OPERATION "', $15::text, $10::text,\n"
    "         upd.version, upd.attempt_count, $11::text, upd.amount, $4::date,\n"
    "         " PG_TS("$7") ", " PG_TS("$8") ", " PG_TS("$5") "\n"
    "  FROM gr, upd\n"
    "  RETURNING grant_id, payout_id, executable_payout_version, amount),\n"
    "job AS (\n"
    "  INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id, created_at,\n"
    "                           available_at, deliveries)\n"
    "  SELECT $12::uuid, payout_id, grant_id, $13::text, " PG_TS("$5") ", " PG_TS("$5") ", 0\n"
    "  FROM bind\n"
    "  RETURNING job_id),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id, decision_id, grant_id,\n"
    "                             job_id, from_state, to_state, payout_version, amount, release_day)\n"
    "  SELECT b.payout_id, " PG_TS("$5") ", k.kind, $14::text, $13::text, $9::uuid,\n"
    "         CASE WHEN k.kind IN ('grant-issued', 'job-queued') THEN b.grant_id END,\n"
    "         CASE WHEN k.kind = 'job-queued' THEN j.job_id END,\n"
    "         CASE WHEN k.kind = 'approved' THEN $3::text END,\n"
    "         CASE WHEN k.kind = 'approved' THEN 'Approved' END,\n"
    "         CASE WHEN k.kind = 'approved' THEN b.executable_payout_version END,\n"
    "         CASE WHEN k.kind = 'reserved' THEN b.amount END,\n"
    "         CASE WHEN k.kind = 'reserved' THEN $4::date END\n"
    "  FROM bind b, job j,\n"
    "       (VALUES (1, 'reserved'), (2, 'approved'), (3, 'grant-issued'), (4, 'job-queued')) k (n, kind)\n"
    "  ORDER BY k.n\n"
    "  RETURNING 1)\n"
    "SELECT upd.version, upd.attempt_count, (SELECT count(*) FROM job), (SELECT count(*) FROM ev)\n"
    "FROM upd";
const og__pg_stmt og__pg_payout_approve_stmt = {
    "og_payout_approve", pg_payout_approve_sql, 15, OG_KEYS_AS_STORED};
enum {
    APPROVE_VERSION,
    APPROVE_ATTEMPT,
    APPROVE_JOBS,
    APPROVE_EVENTS,
    APPROVE_NCOLS
};

/* What an Allowed decision enables (pg_payout_approve_sql). */
int og__pg_payout_decision_issue(void *impl, void *tx,
                                 const og__payout_decide_req *r,
                                 const og__payout_facts *f,
                                 const og__payout_plan *p, int64_t now)
{
    og__pg_conn *c = tx;
    char version[24], at[24], nb[24], exp[24];
    const char *params[15] = {r->payout_id,
                              version,
                              p->from_state,
                              f->release_day,
                              at,
                              r->grant_id,
                              nb,
                              exp,
                              r->decision_id,
                              p->verdict.terms_fingerprint,
                              p->verdict.policy_version,
                              r->job_id,
                              r->correlation_id,
                              r->requester_id,
                              r->audience};
    int64_t v = 0, attempt = 0, jobs = 0, events = 0;
    PGresult *res = NULL;
    int rc;

    og__pg_fmt_i64(version, sizeof version, f->version);
    og__pg_fmt_i64(at, sizeof at, now);
    og__pg_fmt_i64(nb, sizeof nb, r->not_before_us);
    og__pg_fmt_i64(exp, sizeof exp, r->expires_at_us);
    rc = og__pg_run_in(impl, c, &og__pg_payout_approve_stmt, params, &res,
                       c->txn_deadline_us);
    /* The row is ours (FOR UPDATE since the facts' read): it cannot have
     * moved, and every step wrote its one row. */
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, APPROVE_NCOLS, 1) != 0 ||
         og__pg_get_i64(res, 0, APPROVE_VERSION, &v) != 0 ||
         og__pg_get_i64(res, 0, APPROVE_ATTEMPT, &attempt) != 0 ||
         og__pg_get_i64(res, 0, APPROVE_JOBS, &jobs) != 0 ||
         og__pg_get_i64(res, 0, APPROVE_EVENTS, &events) != 0 ||
         v != p->new_version || attempt != p->attempt_number || jobs != 1 ||
         events != 4))
        rc = OG_EINTERNAL;
    PQclear(res);
    return rc;
}
