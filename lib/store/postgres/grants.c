/*
 * grants.c — the grant lifecycle: issuance, the revocation of one grant,
 * the revocation of a family, the consume verdict, and tickets: M12-M15
 * (lib/store/store_int.h). How:
 *
 *  I13 A token-form revocation's fallback retention (M14), when the
 *      issuance log records no expiry, is clock_timestamp() + max grant
 *      lifetime + issue-time skew + leeway: the statement's clock after any
 *      lock wait.
 *  I14 Each lifecycle method is ONE statement in its own implicit
 *      transaction (M12); a read after a write that changed nothing only
 *      reports why — except ticket reuse, which then revokes the family
 *      with the family revocation statement, a second, separate write
 *      before the reuse is answered (M15): if it fails the call fails, and a
 *      retry finds the ticket rotated again and revokes again.
 *
 * Also carried here: I10 (a revocation and the consume verdict claim the
 * admission's very key or row, so whichever commits first wins), I6 and
 * I7 (the family's row and its fair queue, internal.h), I9 (each
 * statement that names grant_consumptions' key in both consumption keys),
 * and I30 (admit.c): every answer read from a row this call did not write
 * waits for the synchronous standby before it is given — by the read
 * fence after a grant revocation that changed nothing, a consume's
 * denial, a rotation refused (unknown ticket, revoked family) and an
 * issuance refused; by the statement's own commit where it took a row
 * lock: INSERT ... ON CONFLICT DO UPDATE locks the conflicting row even
 * when its WHERE rejects it, and a row lock has an xid and writes WAL, so
 * a family revocation of a revoked family, a ticket created or a grant
 * issued into one wait at their commit like any write (a reused ticket
 * revokes its family by that statement too). tests/failures.c proves
 * each path with a standby that never confirms.
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Issuance (I6, I14).
 *   $1 issuer  $2 grant_id  $3 family (NULL: none)  $4 subject  $5 action
 *   $6 params digest  $7 issued_at  $8 expires_at (NULL: none recorded)
 *   $9 form ('token' | 'row')
 *  - fam: the family's row, created on first use, or locked by a no-op
 *    update while live. ON CONFLICT DO UPDATE takes the row lock a family
 *    revocation also takes, and its WHERE is re-checked on the newest
 *    version: a revoked family yields nothing (I6).
 *  - iss: the log entry, only when fam yielded (or there is no family).
 *    The primary key (issuer, grant_id) makes a second issuance of an id a
 *    no-op: DUPLICATE_ID.
 *  - grow: the row-form grant's row, from iss's RETURNING only, so it exists
 *    exactly when this call recorded the issuance.
 * One row: (recorded, family live).
 * ========================================================================= */
static const char pg_issuance_sql[] =
    "WITH " PG_FAMILY_XLOCK_CTE("$1", "$3") ",\n"
    "fam AS (\n"
    "  INSERT INTO families (issuer, family, created_at)\n"
    "  SELECT $1::text, $3::text, clock_timestamp() FROM flk\n"
    "  ON CONFLICT (issuer, family) DO UPDATE SET created_at = families.created_at\n"
    "     WHERE families.revoked_at IS NULL\n"
    "  RETURNING 1),\n"
    "iss AS (\n"
    "  INSERT INTO grant_issuance (issuer, grant_id, family, subject, action, params_digest,\n"
    "                              issued_at, expires_at, form, recorded_at)\n"
    "  SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text,\n"
    "         " PG_TS("$7") ", " PG_TS("$8") ", $9::text, clock_timestamp()\n"
    "  WHERE $3::text IS NULL OR EXISTS (SELECT 1 FROM fam)\n"
    "  ON CONFLICT (issuer, grant_id) DO NOTHING\n"
    "  RETURNING issuer, grant_id, family, expires_at, form),\n"
    "grow AS (\n"
    "  INSERT INTO grants (issuer, grant_id, family, expires_at)\n"
    "  SELECT issuer, grant_id, family, expires_at FROM iss WHERE form = 'row'\n"
    "  RETURNING 1)\n"
    "SELECT EXISTS (SELECT 1 FROM iss), $3::text IS NULL OR EXISTS (SELECT 1 FROM fam)";
static const og__pg_stmt pg_issuance_stmt = {"og_issuance", pg_issuance_sql,
                                             9, OG_KEYS_AS_STORED};
enum { ISSUANCE_RECORDED, ISSUANCE_FAMILY_LIVE, ISSUANCE_NCOLS };

int og__pg_issuance_record(void *impl, const og__issuance_req *req,
                           og_issue_outcome *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char issued[24], expires[24];
    const char *params[9];
    og_issue_outcome outcome = OG_ISSUE_RECORDED;
    int rc;

    og__pg_fmt_i64(issued, sizeof issued, req->issued_at_us);
    og__pg_fmt_i64(expires, sizeof expires, req->expires_at_us);
    params[0] = req->issuer;
    params[1] = req->grant_id;
    params[2] = req->family[0] ? req->family : NULL;
    params[3] = req->subject;
    params[4] = req->action;
    params[5] = req->params_digest;
    params[6] = issued;
    params[7] = req->expires_at_us != 0 ? expires : NULL; /* fallback (I13) */
    params[8] = req->form == OG_FORM_ROW ? "row" : "token";

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_issuance_stmt, params, &res);
    if (rc != 0)
        goto out;
    if (PQntuples(res) != 1 || og__pg_shape(res, ISSUANCE_NCOLS, 1) != 0 ||
        PQgetisnull(res, 0, ISSUANCE_RECORDED) ||
        PQgetisnull(res, 0, ISSUANCE_FAMILY_LIVE)) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (og__pg_get_bool(res, 0, ISSUANCE_RECORDED))
        outcome = OG_ISSUE_RECORDED;
    else if (!og__pg_get_bool(res, 0, ISSUANCE_FAMILY_LIVE))
        outcome = OG_ISSUE_FAMILY_REVOKED; /* ordered after its revocation */
    else
        outcome = OG_ISSUE_DUPLICATE_ID;
    /* A refusal read from a row this call did not write: I30. (Into a
     * revoked family the statement's row lock already waited at its
     * commit; a duplicate id without a family took none.) */
    if (outcome != OG_ISSUE_RECORDED)
        rc = og__pg_read_fence(pg, c);
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = outcome;
    return rc;
}

/* ===========================================================================
 * Revocation of one grant (I10, I13, I14).
 *
 * Token form: $1 issuer $2 grant_id $3 trusted expires_at (NULL: prove
 * issuance from the log) $4 leeway $5 fallback retention (max grant lifetime
 * + issue-time skew + leeway).
 *  - It claims the grant's own key, with no operation: an admission of the
 *    same grant contends for the same primary key, whichever commits first
 *    wins; ON CONFLICT DO NOTHING leaves an earlier admission untouched.
 *  - retain: the trusted expiry + leeway (a verified token is the proof);
 *    else the issuance log's, or clock_timestamp() + fallback when the log
 *    records no expiry (clock_timestamp so a lock wait does not shorten it);
 *    NULL without a log row, and then nothing is inserted (M14).
 *  - K: the store's consumption keys (I9).
 * ========================================================================= */
#define PG_REVOKE_SQL(K)                                                       \
    PG_CLAIM_INTO(K) "\n"                                                      \
    "SELECT " PG_KVALS_##K("$1::text", "$2::text") ", NULL, statement_timestamp(), r.retain, 'revocation'\n" \
    "FROM (SELECT CASE WHEN $3::bigint IS NOT NULL THEN " PG_TS("$3") " + " PG_US("$4") "\n" \
    "                  ELSE (SELECT coalesce(gi.expires_at + " PG_US("$4") ",\n" \
    "                                        clock_timestamp() + " PG_US("$5") ")\n" \
    "                        FROM grant_issuance gi\n"                        \
    "                        WHERE gi.issuer = $1::text AND gi.grant_id = $2::text)\n" \
    "             END AS retain) r\n"                                          \
    "WHERE r.retain IS NOT NULL\n"                                             \
    PG_ON_KEY_CONFLICT(K) "\n"                                                 \
    "RETURNING " PG_KRETID_##K("$2::text")
static const char pg_revoke_sql[] = PG_REVOKE_SQL(READABLE);
static const char pg_revoke_hashed_sql[] = PG_REVOKE_SQL(HASHED);

/* Row form: $1 issuer $2 grant_id. The grant's row, live and unconsumed,
 * row-locked like the admission's UPDATE of it: whichever commits first
 * wins, the other re-checks the newest version and changes nothing. */
static const char pg_revoke_row_sql[] =
    "UPDATE grants SET revoked_at = statement_timestamp()\n"
    "WHERE issuer = $1::text AND grant_id = $2::text\n"
    "  AND consumed_at IS NULL AND revoked_at IS NULL\n"
    "RETURNING grant_id";

/* After a revocation that changed nothing: is the key held (token form), is
 * there a row (row form)? Reporting only. $1 issuer $2 grant_id. */
#define PG_REVOKE_CHECK_SQL(K)                                                 \
    "SELECT EXISTS (SELECT 1 FROM grant_consumptions WHERE " PG_KEQ_##K("", "$1::text", "$2::text") "),\n" \
    "       EXISTS (SELECT 1 FROM grants WHERE issuer = $1::text AND grant_id = $2::text)"
static const char pg_revoke_check_sql[] = PG_REVOKE_CHECK_SQL(READABLE);
static const char pg_revoke_check_hashed_sql[] = PG_REVOKE_CHECK_SQL(HASHED);
static const og__pg_stmt pg_revoke_stmt = {"og_revoke", pg_revoke_sql, 5,
                                           OG_KEYS_READABLE};
static const og__pg_stmt pg_revoke_hashed_stmt = {
    "og_revoke_hashed", pg_revoke_hashed_sql, 5, OG_KEYS_HASHED};
static const og__pg_stmt pg_revoke_row_stmt = {
    "og_revoke_row", pg_revoke_row_sql, 2, OG_KEYS_AS_STORED};
/* Both forms return the grant id they revoked (unread: a row is the
 * answer). */
enum { REVOKE_GRANT_ID, REVOKE_NCOLS };
static const og__pg_stmt pg_revoke_check_stmt = {
    "og_revoke_check", pg_revoke_check_sql, 2, OG_KEYS_READABLE};
static const og__pg_stmt pg_revoke_check_hashed_stmt = {
    "og_revoke_check_hashed", pg_revoke_check_hashed_sql, 2, OG_KEYS_HASHED};
enum { REVOKE_CHECK_KEY_HELD, REVOKE_CHECK_ROW_EXISTS, REVOKE_CHECK_NCOLS };

int og__pg_revoke(void *impl, const og__revoke_req *req, og_revoke_outcome *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char trusted[24];
    const char *params[5];
    og_revoke_outcome outcome = OG_REVOKE_REVOKED;
    bool row = req->form == OG_FORM_ROW;
    int rc;

    og__pg_fmt_i64(trusted, sizeof trusted, req->trusted_expires_at_us);
    params[0] = req->issuer;
    params[1] = req->grant_id;
    params[2] = req->trusted_expires_at_us > 0 ? trusted : NULL;
    params[3] = pg->leeway;
    params[4] = pg->fallback;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(
        pg, c,
        row ? &pg_revoke_row_stmt
            : og__pg_keyed(pg, &pg_revoke_stmt, &pg_revoke_hashed_stmt),
        params, &res);
    if (rc != 0)
        goto out;
    if (og__pg_shape(res, REVOKE_NCOLS, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (PQntuples(res) == 1) {
        outcome = OG_REVOKE_REVOKED;
        goto out;
    }
    /* Nothing written: held already, or no proof of issuance. */
    PQclear(res);
    res = NULL;
    rc = og__pg_run(
        pg, c,
        og__pg_keyed(pg, &pg_revoke_check_stmt, &pg_revoke_check_hashed_stmt),
        params, &res);
    if (rc != 0)
        goto out;
    if (PQntuples(res) != 1 || og__pg_shape(res, REVOKE_CHECK_NCOLS, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    outcome = og__pg_get_bool(
                  res, 0, row ? REVOKE_CHECK_ROW_EXISTS : REVOKE_CHECK_KEY_HELD)
                  ? OG_REVOKE_ALREADY_USED_OR_REVOKED
                  : OG_REVOKE_NOT_ISSUED;
    /* Answered from a key or row an earlier call wrote, perhaps on this
     * server alone (a cancelled synchronous wait): I30. */
    rc = og__pg_read_fence(pg, c);
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = outcome;
    return rc;
}

/* ===========================================================================
 * Family revocation (I6, I13, I14): ONE statement.
 *   $1 issuer $2 family $3 leeway $4 fallback retention
 *  - f: the family's row marked revoked — inserted revoked when never seen
 *    (nothing can be issued into it later), updated when live, nothing when
 *    already revoked (then tok and rows revoke nothing: an empty list). The
 *    UPDATE waits for every admission holding the row FOR SHARE and blocks
 *    every later one until this commits (I6).
 *  - tok: every token-form grant the log records in the family, still
 *    admissible (no expiry, or expiry + leeway ahead), gets its key claimed
 *    by a revocation, retained as og_revoke retains it (I13). ON CONFLICT DO
 *    NOTHING checks the newest committed keys, not the snapshot: a grant an
 *    admission claimed while this waited for the family row is left alone
 *    and not listed.
 *  - rows: every live row-form grant in the family is marked revoked; a row
 *    an admission took meanwhile is re-checked and skipped.
 *  - tok and rows read only f's RETURNING, so they write only after f holds
 *    the family's row.
 *  - The keys are computed from the log's rows by og_consumption_key(), the
 *    function every other statement of a hashed store uses (I9). A hashed
 *    claim RETURNs only its key: the ids listed are the family's logged
 *    grants whose key tok claimed (PG_FAMILY_TOK_IDS).
 * ========================================================================= */
#define PG_FAMILY_TOK_RET_READABLE "grant_id"
#define PG_FAMILY_TOK_RET_HASHED "key_hash"
#define PG_FAMILY_TOK_IDS_READABLE "grant_id FROM tok"
#define PG_FAMILY_TOK_IDS_HASHED                                               \
    "gi.grant_id FROM tok JOIN grant_issuance gi\n"                            \
    "                        ON gi.issuer = $1::text AND gi.family = $2::text\n" \
    "                       AND " PG_KEQ_HASHED("tok.", "gi.issuer", "gi.grant_id")
#define PG_FAMILY_REVOKE_SQL(K)                                                \
    "WITH " PG_FAMILY_XLOCK_CTE("$1", "$2") ",\n"                              \
    "f AS (\n"                                                                 \
    "  INSERT INTO families (issuer, family, created_at, revoked_at)\n"        \
    "  SELECT $1::text, $2::text, clock_timestamp(), statement_timestamp() FROM flk\n" \
    "  ON CONFLICT (issuer, family) DO UPDATE SET revoked_at = statement_timestamp()\n" \
    "     WHERE families.revoked_at IS NULL\n"                                 \
    "  RETURNING issuer, family),\n"                                           \
    "tok AS (\n"                                                               \
    "  " PG_CLAIM_INTO(K) "\n"                                                 \
    "  SELECT " PG_KVALS_##K("gi.issuer", "gi.grant_id") ", NULL, statement_timestamp(),\n" \
    "         coalesce(gi.expires_at + " PG_US("$3") ", clock_timestamp() + " PG_US("$4") "),\n" \
    "         'revocation'\n"                                                  \
    "  FROM grant_issuance gi JOIN f ON gi.issuer = f.issuer AND gi.family = f.family\n" \
    "  WHERE gi.form = 'token'\n"                                              \
    "    AND (gi.expires_at IS NULL OR gi.expires_at + " PG_US("$3") " > statement_timestamp())\n" \
    "  " PG_ON_KEY_CONFLICT(K) "\n"                                            \
    "  RETURNING " PG_FAMILY_TOK_RET_##K "),\n"                                \
    "rows AS (\n"                                                              \
    "  UPDATE grants g SET revoked_at = statement_timestamp() FROM f\n"        \
    "  WHERE g.issuer = f.issuer AND g.family = f.family\n"                    \
    "    AND g.consumed_at IS NULL AND g.revoked_at IS NULL\n"                 \
    "  RETURNING g.grant_id)\n"                                                \
    "SELECT grant_id FROM (SELECT " PG_FAMILY_TOK_IDS_##K " UNION ALL\n"        \
    "                      SELECT grant_id FROM rows) u\n"                     \
    "ORDER BY grant_id COLLATE \"C\""
static const char pg_family_revoke_sql[] = PG_FAMILY_REVOKE_SQL(READABLE);
static const char pg_family_revoke_hashed_sql[] = PG_FAMILY_REVOKE_SQL(HASHED);
static const og__pg_stmt pg_family_revoke_stmt = {
    "og_family_revoke", pg_family_revoke_sql, 4, OG_KEYS_READABLE};
static const og__pg_stmt pg_family_revoke_hashed_stmt = {
    "og_family_revoke_hashed", pg_family_revoke_hashed_sql, 4,
    OG_KEYS_HASHED};
enum { FAMILY_REVOKE_GRANT_ID, FAMILY_REVOKE_NCOLS };

/* Runs the family revocation on c and appends what it revoked to *out
 * (which the caller owns and frees, on failure too). */
static int pg_family_revoke_on(og__pg_store *pg, og__pg_conn *c,
                               const char *issuer, const char *family,
                               og_strv *out)
{
    const char *params[4] = {issuer, family, pg->leeway, pg->fallback};
    PGresult *res = NULL;
    int rc, i;

    rc = og__pg_run(
        pg, c,
        og__pg_keyed(pg, &pg_family_revoke_stmt, &pg_family_revoke_hashed_stmt),
        params, &res);
    if (rc != 0)
        goto out;
    if (PQnfields(res) != FAMILY_REVOKE_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    for (i = 0; i < PQntuples(res) && rc == 0; i++) {
        if (PQgetisnull(res, i, FAMILY_REVOKE_GRANT_ID))
            rc = OG_EINTERNAL;
        else
            rc = og__strv_push(out, PQgetvalue(res, i, FAMILY_REVOKE_GRANT_ID));
    }
out:
    PQclear(res);
    return rc;
}

int og__pg_family_revoke(void *impl, const char *issuer, const char *family,
                         og_strv *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    og_strv list = {NULL, 0};
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_family_revoke_on(pg, c, issuer, family, &list);
    og__pg_release(pg, c);
    if (rc != 0) {
        og_strv_free(&list);
        return rc;
    }
    *out = list;
    return 0;
}

/* ===========================================================================
 * The consume verdict (docs/design.md, "The grant lifecycle"): the
 * admission's claim without an operation (I10, I5, I6, I14). A returned row
 * is the only "consumed". The store's method (og__pg_consume) is the group
 * commit's (consume_batch.c, CB1-CB6); og__pg_consume_one below is its batch
 * of one, and what each row of a batch that falls back runs.
 *
 * Token form: $1 issuer $2 grant_id $3 expires_at $4 leeway $5 family.
 * The same key, deadline and family conditions as pg_admit_sql; kind
 * 'consume' with operation_id NULL names the holder. K: I9.
 * ========================================================================= */
#define PG_CONSUME_SQL(K)                                                      \
    "WITH " PG_FAMILY_CTE("$5") "\n"                                           \
    PG_CLAIM_INTO(K) "\n"                                                      \
    "SELECT " PG_KVALS_##K("$1::text", "$2::text") ", NULL, statement_timestamp(), d.admit_until, 'consume'\n" \
    "FROM (SELECT " PG_TS("$3") " + " PG_US("$4") " AS admit_until) d\n"       \
    "WHERE d.admit_until > statement_timestamp()\n"                            \
    "  AND " PG_FAMILY_LIVE("$5") "\n"                                         \
    PG_ON_KEY_CONFLICT(K) "\n"                                                 \
    "RETURNING " PG_KRETID_##K("$2::text")
static const char pg_consume_sql[] = PG_CONSUME_SQL(READABLE);
static const char pg_consume_hashed_sql[] = PG_CONSUME_SQL(HASHED);

/* Row form: $1 issuer $2 grant_id $3 leeway $4 family. The same row
 * conditions as pg_admit_row_sql; consumed_at set with no operation is
 * the verdict's mark. Returns the row's family, the trusted one. */
static const char pg_consume_row_sql[] =
    "WITH " PG_FAMILY_CTE("$4") "\n"
    "UPDATE grants SET consumed_at = statement_timestamp()\n"
    "WHERE issuer = $1::text AND grant_id = $2::text\n"
    "  AND consumed_at IS NULL AND revoked_at IS NULL\n"
    "  AND expires_at + " PG_US("$3") " > statement_timestamp()\n"
    "  AND " PG_FAMILY_LIVE("$4") "\n"
    "RETURNING coalesce(family, '')";
static const og__pg_stmt pg_consume_stmt = {"og_consume", pg_consume_sql, 5,
                                            OG_KEYS_READABLE};
static const og__pg_stmt pg_consume_hashed_stmt = {
    "og_consume_hashed", pg_consume_hashed_sql, 5, OG_KEYS_HASHED};
static const og__pg_stmt pg_consume_row_stmt = {
    "og_consume_row", pg_consume_row_sql, 4, OG_KEYS_AS_STORED};
/* The row form returns the row's family; the token form its grant id
 * there, unread. */
enum { CONSUME_ROW_FAMILY, CONSUME_NCOLS };

int og__pg_consume_one(og__pg_store *pg, const og__admit_req *req,
                       int64_t deadline_us, og_consume_result *out)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og_consume_result result;
    og__consumption cons;
    char expires[24];
    const char *family = req->family[0] ? req->family : NULL;
    const char *params[5];
    int rc;

    memset(&result, 0, sizeof result);
    params[0] = req->issuer;
    params[1] = req->grant_id;
    if (req->form == OG_FORM_ROW) {
        params[2] = pg->leeway;
        params[3] = family;
        params[4] = NULL; /* not sent */
    } else {
        og__pg_fmt_i64(expires, sizeof expires, req->expires_at_us);
        params[2] = expires;
        params[3] = pg->leeway;
        params[4] = family;
    }

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_prepared_until(
        pg, c,
        req->form == OG_FORM_ROW
            ? &pg_consume_row_stmt
            : og__pg_keyed(pg, &pg_consume_stmt, &pg_consume_hashed_stmt),
        params, &res, NULL, 0, deadline_us);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL; /* only an admission's violation is an answer */
    if (rc != 0)
        goto out;
    if (og__pg_shape(res, CONSUME_NCOLS, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (PQntuples(res) == 1) {
        /* This call spent the grant; confirmed at ReadyForQuery (I1). The
         * family reported is the trusted one: the row's in row form. */
        result.consumed = true;
        result.refusal = OG_REFUSAL_NONE;
        if (req->form == OG_FORM_ROW)
            rc = og__pg_get_text(res, 0, CONSUME_ROW_FAMILY, result.family,
                                 sizeof result.family);
        else
            rc = og__copy(result.family, sizeof result.family, req->family) == 0
                     ? 0
                     : OG_EINTERNAL;
        goto out;
    }
    /* Zero rows: a denial, without exception. The read only says why,
     * and its statement carries the read fence (I30, admit.c). */
    rc = og__pg_consumption(pg, c, req, false, &cons, NULL, NULL);
    if (rc == 0) {
        result.consumed = false;
        result.refusal = og__classify_consume(&cons);
    }
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = result;
    return rc;
}

/* ===========================================================================
 * Tickets (I6, I14, M15). Hashes only; lib/store/grants.c hashes the text.
 *
 * Creation: $1 issuer $2 family $3 ticket hash. fam locks (or creates) the
 * family's row while live, as issuance does (I6); revoked: no row.
 * ========================================================================= */
static const char pg_ticket_create_sql[] =
    "WITH " PG_FAMILY_XLOCK_CTE("$1", "$2") ",\n"
    "fam AS (\n"
    "  INSERT INTO families (issuer, family, created_at)\n"
    "  SELECT $1::text, $2::text, clock_timestamp() FROM flk\n"
    "  ON CONFLICT (issuer, family) DO UPDATE SET created_at = families.created_at\n"
    "     WHERE families.revoked_at IS NULL\n"
    "  RETURNING issuer, family)\n"
    "INSERT INTO tickets (ticket_hash, issuer, family, created_at)\n"
    "SELECT $3::text, issuer, family, clock_timestamp() FROM fam\n"
    "RETURNING 1";
static const og__pg_stmt pg_ticket_create_stmt = {
    "og_ticket_create", pg_ticket_create_sql, 3, OG_KEYS_AS_STORED};

int og__pg_ticket_create(void *impl, const char *issuer, const char *family,
                         const char *hash, og_ticket_outcome *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[3] = {issuer, family, hash};
    og_ticket_outcome outcome = OG_TICKET_ISSUED;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_ticket_create_stmt, params, &res);
    if (rc != 0)
        goto out;
    if (og__pg_shape(res, 1, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    outcome = PQntuples(res) == 1 ? OG_TICKET_ISSUED : OG_TICKET_FAMILY_REVOKED;
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = outcome;
    return rc;
}

/* Rotation: $1 old hash $2 new hash. The store's method (og__pg_ticket_rotate)
 * is the group commit's (rotate_batch.c, RB1-RB6); og__pg_ticket_rotate_one
 * below is its batch of one, and what each row of a batch that falls back
 * runs. The old ticket's row is the unit: the
 * UPDATE row-locks it, so of two presentations of one ticket exactly one
 * rotates it; the other re-checks rotated_at IS NULL on the newest version,
 * rotates nothing, and the follow-up read sees it rotated (reuse). The new
 * ticket is created from old's RETURNING only, in the same statement. */
static const char pg_ticket_rotate_sql[] =
    "WITH old AS (\n"
    "  UPDATE tickets t SET rotated_at = statement_timestamp()\n"
    "  WHERE t.ticket_hash = $1::text AND t.rotated_at IS NULL\n"
    "    AND EXISTS (SELECT 1 FROM families f WHERE f.issuer = t.issuer AND f.family = t.family\n"
    "                AND f.revoked_at IS NULL)\n"
    "  RETURNING t.issuer, t.family)\n"
    "INSERT INTO tickets (ticket_hash, issuer, family, created_at)\n"
    "SELECT $2::text, issuer, family, clock_timestamp() FROM old\n"
    "RETURNING issuer, family";

/* After a rotation that rotated nothing: the old ticket's state. Reporting
 * only. $1 old hash. */
static const char pg_ticket_state_sql[] =
    "SELECT t.rotated_at IS NOT NULL, t.issuer, t.family,\n"
    "       f.issuer IS NULL OR f.revoked_at IS NOT NULL\n"
    "FROM tickets t LEFT JOIN families f ON f.issuer = t.issuer AND f.family = t.family\n"
    "WHERE t.ticket_hash = $1::text";
static const og__pg_stmt pg_ticket_rotate_stmt = {
    "og_ticket_rotate", pg_ticket_rotate_sql, 2, OG_KEYS_AS_STORED};
enum { TICKET_ROTATE_ISSUER, TICKET_ROTATE_FAMILY, TICKET_ROTATE_NCOLS };
static const og__pg_stmt pg_ticket_state_stmt = {
    "og_ticket_state", pg_ticket_state_sql, 1, OG_KEYS_AS_STORED};
enum {
    TICKET_READ_ROTATED,
    TICKET_READ_ISSUER,
    TICKET_READ_FAMILY,
    TICKET_READ_FAMILY_REVOKED,
    TICKET_READ_NCOLS
};

int og__pg_ticket_state(og__pg_store *pg, og__pg_conn *c, const char *hash,
                        og__pg_ticket_seen *seen)
{
    const char *params[1] = {hash};
    og__pg_ticket_seen r;
    PGresult *res = NULL;
    int rc;

    memset(&r, 0, sizeof r);
    rc = og__pg_run(pg, c, &pg_ticket_state_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, TICKET_READ_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1) {
        r.found = true;
        r.rotated = og__pg_get_bool(res, 0, TICKET_READ_ROTATED);
        r.family_revoked = og__pg_get_bool(res, 0, TICKET_READ_FAMILY_REVOKED);
        if (og__pg_get_text(res, 0, TICKET_READ_ISSUER, r.issuer,
                            sizeof r.issuer) != 0 ||
            og__pg_get_text(res, 0, TICKET_READ_FAMILY, r.family,
                            sizeof r.family) != 0)
            rc = OG_EINTERNAL;
    }
    PQclear(res);
    if (rc == 0)
        *seen = r;
    return rc;
}

int og__pg_ticket_refused(og__pg_store *pg, og__pg_conn *c,
                          const og__pg_ticket_seen *seen,
                          og_ticket_outcome *out, bool *fence)
{
    og_strv discarded = {NULL, 0};
    int rc;

    if (!seen->found) {
        *out = OG_TICKET_NOT_FOUND;
        *fence = true; /* I30 */
        return 0;
    }
    if (seen->rotated) {
        /* Reuse of a rotated ticket — a replay, or a concurrent duplicate
         * that lost the race — is treated as theft: the family goes, in a
         * second statement (I14). If it fails, the call fails and a retry
         * finds the ticket rotated again and revokes again. */
        *out = OG_TICKET_REUSED;
        rc = pg_family_revoke_on(pg, c, seen->issuer, seen->family,
                                 &discarded);
        og_strv_free(&discarded);
        return rc;
    }
    if (seen->family_revoked) {
        /* Read from the family's revocation, which may be this server's
         * alone (a cancelled synchronous wait): I30. */
        *out = OG_TICKET_FAMILY_REVOKED;
        *fence = true;
        return 0;
    }
    /* Not rotated, family live, yet the rotation's conditions failed:
     * both only ever move one way, so this cannot be. */
    return OG_EINTERNAL;
}

int og__pg_ticket_rotate_one(og__pg_store *pg, og__rotate_row *row,
                             int64_t deadline_us)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[2] = {row->old_hash, row->new_hash};
    og__pg_ticket_seen seen;
    bool fence = false;
    int rc;

    row->outcome = OG_TICKET_NOT_FOUND;
    row->issuer[0] = row->family[0] = '\0';
    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_prepared_until(pg, c, &pg_ticket_rotate_stmt, params,
                                    &res, NULL, 0, deadline_us);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL; /* only an admission's violation is an answer */
    if (rc != 0)
        goto out;
    if (og__pg_shape(res, TICKET_ROTATE_NCOLS, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (PQntuples(res) == 1) {
        row->outcome = OG_TICKET_ISSUED; /* confirmed at ReadyForQuery (I1) */
        if (og__pg_get_text(res, 0, TICKET_ROTATE_ISSUER, row->issuer,
                            sizeof row->issuer) != 0 ||
            og__pg_get_text(res, 0, TICKET_ROTATE_FAMILY, row->family,
                            sizeof row->family) != 0)
            rc = OG_EINTERNAL;
        goto out;
    }
    /* Rotated nothing: unknown, already rotated, or its family revoked. */
    if ((rc = og__pg_ticket_state(pg, c, row->old_hash, &seen)) != 0)
        goto out;
    memcpy(row->issuer, seen.issuer, sizeof row->issuer);
    memcpy(row->family, seen.family, sizeof row->family);
    rc = og__pg_ticket_refused(pg, c, &seen, &row->outcome, &fence);
    if (rc == 0 && fence)
        rc = og__pg_read_fence(pg, c);
out:
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}
