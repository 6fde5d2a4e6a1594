/*
 * grants.c — the SQLite store's grant lifecycle: issuance, the revocation
 * of one grant, family revocation, the consume verdict and tickets.
 *
 * These keep M12-M15 (lib/store/store_int.h). Besides Q1, Q5 and Q6
 * (internal.h):
 *
 *   Q11 Every write of this backend — here each grant-lifecycle call:
 *       issuance, revocation, family revocation, ticket creation and
 *       rotation — is ONE BEGIN IMMEDIATE transaction on a pool connection
 *       holding all its statements (og__sq_begin/og__sq_end), with the
 *       admission's deadline (Q4); the consume verdict is a savepoint of
 *       the group commit's transaction instead, as an admission is
 *       (admit.c, G6). What it reads and
 *       what it writes are one state: no other writer runs in between (Q1).
 *       An outcome that wrote nothing rolls back; any other is answered only
 *       after COMMIT returned SQLITE_OK (M12, Q2).
 *   Q12 Presenting a rotated ticket is theft (M15): the family is revoked in
 *       the same transaction that saw the reuse, before the reuse is
 *       answered.
 *   Q13 The fallback revocation retention (now + max grant lifetime + issue
 *       skew + leeway, M14) is computed by a statement that runs after the
 *       write lock was taken, so a lock wait never shortens it (M6).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The fallback retention beyond now (Q13). */
static int64_t sq_fallback_us(const og_timings *t)
{
    return t->max_grant_lifetime_us + t->issue_time_skew_us +
           t->admission_leeway_us;
}

/* ===========================================================================
 * Issuance
 * ========================================================================= */

/* A family never seen: ?1 issuer, ?2 family. */
static const char sq_family_create_sql[] =
    "INSERT INTO families (issuer, family, created_at)"
    " VALUES (?1, ?2, " SQ_NOW ")";

/* A live family for issuance and tickets: creates a missing one. 1 live
 * (now), 0 revoked, or the error. */
static int sq_family_ensure(og__sq_conn *c, const char *issuer,
                            const char *family)
{
    og__sq_family fam;
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_family_state(c, issuer, family, &fam)) < 0)
        return rc;
    if (fam == SQ_FAM_REVOKED)
        return 0;
    if (fam == SQ_FAM_LIVE || fam == SQ_FAM_UNNAMED)
        return 1;
    if ((rc = og__sq_stmt(c, sq_family_create_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    return (rc = og__sq_done(c, st)) < 0 ? rc : 1;
}

/* Issuance: ?1 issuer, ?2 grant id, ?3 family or NULL, ?4 subject,
 * ?5 action, ?6 params digest, ?7 issued_at, ?8 expires_at or NULL,
 * ?9 form. A row only when the key was new. */
static const char sq_issuance_insert_sql[] =
    "INSERT INTO grant_issuance (issuer, grant_id, family, subject, action,"
    "   params_digest, issued_at, expires_at, form, recorded_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " SQ_NOW ")"
    " ON CONFLICT (issuer, grant_id) DO NOTHING"
    " RETURNING grant_id";

/* The grant's row (row form, and a payout grant's, payout.c): ?1 issuer,
 * ?2 grant id, ?3 family or NULL, ?4 expires_at. */
static const char sq_grant_insert_sql[] =
    "INSERT INTO grants (issuer, grant_id, family, expires_at)"
    " VALUES (?1, ?2, ?3, ?4)";

int og__sq_grant_insert(og__sq_conn *c, const char *issuer,
                        const char *grant_id, const char *family,
                        int64_t expires_at_us)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_grant_insert_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, grant_id, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 3, family);
    sqlite3_bind_int64(st, 4, expires_at_us);
    return og__sq_done(c, st);
}

static int sq_issue_in(og__sq_conn *c, const og__issuance_req *req,
                       og_issue_outcome *out, bool *keep)
{
    sqlite3_stmt *st;
    int rc;

    /* The family first: ordered against its revocation (Q5). */
    if ((rc = sq_family_ensure(c, req->issuer, req->family)) <= 0) {
        *out = OG_ISSUE_FAMILY_REVOKED;
        return rc;
    }
    if ((rc = og__sq_stmt(c, sq_issuance_insert_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 3, req->family);
    sqlite3_bind_text(st, 4, req->subject, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, req->action, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, req->params_digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, req->issued_at_us);
    if (req->expires_at_us != 0)
        sqlite3_bind_int64(st, 8, req->expires_at_us);
    else
        sqlite3_bind_null(st, 8); /* no trusted expiry: fallback retention */
    sqlite3_bind_text(st, 9, req->form == OG_FORM_ROW ? "row" : "token", -1,
                      SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        /* The key was issued before. A family created above stays, as in
         * PostgreSQL's single statement, so both backends hold the same
         * families after the same history. */
        *out = OG_ISSUE_DUPLICATE_ID;
        *keep = true;
        return rc;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if (req->form == OG_FORM_ROW &&
        (rc = og__sq_grant_insert(c, req->issuer, req->grant_id, req->family,
                                  req->expires_at_us)) < 0)
        return rc;
    *out = OG_ISSUE_RECORDED;
    *keep = true;
    return 0;
}

int og__sq_issuance_record(void *impl, const og__issuance_req *req,
                           og_issue_outcome *out)
{
    og__sq_store *s = impl;
    og_issue_outcome o = OG_ISSUE_RECORDED;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_issue_in(c, req, &o, &keep);
    rc = og__sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

/* ===========================================================================
 * Revocation of one grant
 * ========================================================================= */

/* One grant's revocation, token form: ?1 issuer, ?2 grant id, ?3 trusted
 * expires_at (0: none), ?4 leeway, ?5 max lifetime + issue skew + leeway.
 * Retained until the trusted expiry + leeway, else the issuance log's, else
 * the fallback (Q13); nothing without proof of issuance. */
#define SQ_REVOKE_TOKEN_SQL(K)                                                 \
    SQ_CLAIM_INTO(K, "?1", "?2") "NULL, r.now, r.retain, 'revocation'"         \
    " FROM (SELECT t.now, CASE WHEN ?3 > 0 THEN ?3 + ?4 ELSE"                  \
    "         (SELECT coalesce(gi.expires_at + ?4, t.now + ?5)"                \
    "          FROM grant_issuance gi"                                         \
    "          WHERE gi.issuer = ?1 AND gi.grant_id = ?2) END AS retain"       \
    "       FROM (SELECT " SQ_NOW " AS now) t) r"                              \
    " WHERE r.retain IS NOT NULL"                                              \
    SQ_CLAIM_END(K)
static const char sq_revoke_token_sql[] = SQ_REVOKE_TOKEN_SQL(READABLE);
static const char sq_revoke_token_hashed_sql[] = SQ_REVOKE_TOKEN_SQL(HASHED);

/* ...row form: ?1 issuer, ?2 grant id; the row, live. */
static const char sq_revoke_row_sql[] =
    "UPDATE grants SET revoked_at = " SQ_NOW
    " WHERE issuer = ?1 AND grant_id = ?2"
    "   AND consumed_at IS NULL AND revoked_at IS NULL"
    " RETURNING grant_id";

static int sq_revoke_in(og__sq_store *s, og__sq_conn *c,
                        const og__revoke_req *req, og_revoke_outcome *out,
                        bool *keep)
{
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    int rc;

    if (req->form == OG_FORM_ROW) {
        if ((rc = og__sq_stmt(c, sq_revoke_row_sql, &st)) < 0)
            return rc;
    } else {
        if ((rc = og__sq_stmt(c, SQ_KEYED(s, sq_revoke_token), &st)) < 0)
            return rc;
        sqlite3_bind_int64(st, 3, req->trusted_expires_at_us);
        sqlite3_bind_int64(st, 4, t->admission_leeway_us);
        sqlite3_bind_int64(st, 5, sq_fallback_us(t));
    }
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if (rc == 1) {
        if ((rc = og__sq_done(c, st)) < 0)
            return rc;
        *out = OG_REVOKE_REVOKED;
        *keep = true;
        return 0;
    }
    sqlite3_reset(st);

    /* Nothing written: the key (row) is held already, or there is no proof
     * that the grant was ever issued. */
    rc = og__sq_holder_exists(s, c, req->form, req->issuer, req->grant_id);
    if (rc < 0)
        return rc;
    *out = rc == 1 ? OG_REVOKE_ALREADY_USED_OR_REVOKED : OG_REVOKE_NOT_ISSUED;
    return 0;
}

int og__sq_revoke(void *impl, const og__revoke_req *req,
                  og_revoke_outcome *out)
{
    og__sq_store *s = impl;
    og_revoke_outcome o = OG_REVOKE_REVOKED;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_revoke_in(s, c, req, &o, &keep);
    rc = og__sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

/* ===========================================================================
 * Family revocation (Q5)
 * ========================================================================= */

static int sq_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs a statement RETURNING grant_id (its one column), pushing each id
 * onto list (NULL: discarded). 0 or the error. */
static int sq_collect(og__sq_conn *c, sqlite3_stmt *st, og_strv *list)
{
    enum { RETURNED_GRANT_ID };
    int rc;

    while ((rc = og__sq_step(c, st)) == 1) {
        const char *id =
            (const char *)sqlite3_column_text(st, RETURNED_GRANT_ID);

        if (!id) {
            rc = OG_EINTERNAL;
            break;
        }
        if (list && (rc = og__strv_push(list, id)) < 0)
            break;
    }
    sqlite3_reset(st);
    return rc;
}

/* Marks the family revoked, creating it revoked when never seen; a row
 * only when this call revoked it. ?1 issuer, ?2 family. */
static const char sq_family_revoke_sql[] =
    "INSERT INTO families (issuer, family, created_at, revoked_at)"
    " VALUES (?1, ?2, " SQ_NOW ", " SQ_NOW ")"
    " ON CONFLICT (issuer, family) DO UPDATE"
    "   SET revoked_at = excluded.revoked_at"
    "   WHERE families.revoked_at IS NULL"
    " RETURNING 1";

/* The family's live token-form grants (readable: claimed as a set, their
 * ids RETURNED): ?1 issuer, ?2 family, ?3 leeway, ?4 max lifetime + issue
 * skew + leeway (the fallback, Q13). INDEXED BY: without ANALYZE statistics
 * the planner prefers the issuer's whole primary-key range, a scan of all
 * its grants under the write lock. A hashed table cannot RETURN a grant
 * id, so the hashed store lists the same rows with sq_family_tokens_sql
 * and claims each with sq_family_token_claim_hashed_sql, in the same
 * transaction. */
#define SQ_FAMILY_TOKENS_FROM                                                  \
    " FROM grant_issuance gi INDEXED BY grant_issuance_family_idx,"            \
    "      (SELECT " SQ_NOW " AS now) t"                                       \
    " WHERE gi.issuer = ?1 AND gi.family = ?2 AND gi.form = 'token'"           \
    "   AND (gi.expires_at IS NULL OR gi.expires_at + ?3 > t.now)"
#define SQ_FAMILY_RETAIN "coalesce(gi.expires_at + ?3, t.now + ?4)"
static const char sq_family_revoke_tokens_sql[] =
    SQ_CLAIM_INTO(READABLE, "gi.issuer", "gi.grant_id") "NULL, t.now,"
    "        " SQ_FAMILY_RETAIN ", 'revocation'"
    SQ_FAMILY_TOKENS_FROM
    SQ_CLAIM_END(READABLE);
/* Hashed: the same grants, listed with when and how long to hold them */
static const char sq_family_tokens_sql[] =
    "SELECT gi.grant_id, t.now, " SQ_FAMILY_RETAIN SQ_FAMILY_TOKENS_FROM;
enum {
    FAMILY_TOKENS_GRANT_ID,
    FAMILY_TOKENS_NOW,
    FAMILY_TOKENS_RETAIN,
    FAMILY_TOKENS_NCOLS
};
/* ...and each claimed: ?1 issuer, ?2 grant id, ?3 now, ?4 retain. */
static const char sq_family_token_claim_hashed_sql[] =
    SQ_CLAIM_INTO(HASHED, "?1", "?2") "NULL, ?3, ?4, 'revocation'"
    SQ_CLAIM_END(HASHED);

/* The family's live rows (row form): ?1 issuer, ?2 family. */
static const char sq_family_revoke_rows_sql[] =
    "UPDATE grants INDEXED BY grants_family_idx"
    " SET revoked_at = " SQ_NOW
    " WHERE issuer = ?1 AND family = ?2"
    "   AND consumed_at IS NULL AND revoked_at IS NULL"
    " RETURNING grant_id";

/* A hashed store's claims of the family's live token-form grants (Q6): the
 * table cannot RETURN a grant id, so the grants are listed
 * (sq_family_tokens_sql: the very rows and retention
 * sq_family_revoke_tokens_sql would claim, at one 'now') and each key is
 * claimed on its own, pushing the ids whose claim took the key. Under the
 * write lock (Q1) nothing else runs in between, so this claims what the
 * readable set-based statement claims. */
static int sq_family_claim_hashed(og__sq_conn *c, const og_timings *t,
                                  const char *issuer, const char *family,
                                  int64_t fallback_us, og_strv *list)
{
    sqlite3_stmt *grants, *claim;
    int rc, took;

    if ((rc = og__sq_stmt(c, sq_family_tokens_sql, &grants)) < 0)
        return rc;
    sqlite3_bind_text(grants, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(grants, 2, family, -1, SQLITE_STATIC);
    sqlite3_bind_int64(grants, 3, t->admission_leeway_us);
    sqlite3_bind_int64(grants, 4, fallback_us);
    while ((rc = og__sq_step(c, grants)) == 1) {
        const char *id = (const char *)sqlite3_column_text(
            grants, FAMILY_TOKENS_GRANT_ID);

        if (!id) {
            rc = OG_EINTERNAL;
            break;
        }
        /* grant_issuance is read, grant_consumptions written: the listing
         * statement may stay active across the claims. */
        if ((rc = og__sq_stmt(c, sq_family_token_claim_hashed_sql, &claim)) <
            0)
            break;
        sqlite3_bind_text(claim, 1, issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(claim, 2, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(claim, 3,
                           sqlite3_column_int64(grants, FAMILY_TOKENS_NOW));
        sqlite3_bind_int64(claim, 4,
                           sqlite3_column_int64(grants, FAMILY_TOKENS_RETAIN));
        took = og__sq_step(c, claim); /* 1: RETURNING, this claim took it */
        if (took != 1) {
            sqlite3_reset(claim);
            if ((rc = took) < 0)
                break;
            continue;
        }
        if ((rc = og__sq_done(c, claim)) < 0 ||
            (list && (rc = og__strv_push(list, id)) < 0))
            break;
    }
    sqlite3_reset(grants);
    return rc;
}

/* Revokes (issuer, family) inside c's transaction: marks the family's row
 * revoked (creating it revoked when never seen), then revokes its live
 * token-form grants (claims their keys as revocations) and its live rows.
 * Appends the grants this call revoked to *list (NULL: discarded), sorted
 * bytewise; none when the family was revoked already. *keep when anything
 * was written. */
static int sq_family_revoke_in(og__sq_store *s, og__sq_conn *c,
                               const char *issuer, const char *family,
                               og_strv *list, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    size_t first = list ? list->n : 0;
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_family_revoke_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: revoked before; its grants were revoked then */
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    *keep = true;

    if (s->keys == OG_KEYS_HASHED) {
        rc = sq_family_claim_hashed(c, t, issuer, family, sq_fallback_us(t),
                                    list);
    } else {
        if ((rc = og__sq_stmt(c, sq_family_revoke_tokens_sql, &st)) < 0)
            return rc;
        sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, t->admission_leeway_us);
        sqlite3_bind_int64(st, 4, sq_fallback_us(t));
        rc = sq_collect(c, st, list);
    }
    if (rc < 0)
        return rc;

    if ((rc = og__sq_stmt(c, sq_family_revoke_rows_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = sq_collect(c, st, list)) < 0)
        return rc;
    if (list && list->n > first)
        qsort(list->v + first, list->n - first, sizeof *list->v, sq_strcmp);
    return 0;
}

int og__sq_family_revoke(void *impl, const char *issuer, const char *family,
                         og_strv *out)
{
    og__sq_store *s = impl;
    og_strv list = {NULL, 0};
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_family_revoke_in(s, c, issuer, family, &list, &keep);
    rc = og__sq_end(s, c, rc, keep);
    if (rc < 0) {
        og_strv_free(&list); /* nothing committed: nothing to report */
        return rc;
    }
    *out = list;
    return 0;
}

/* ===========================================================================
 * The consume verdict: the admission's claim with no operation (admit.c),
 * run by the group commit's leader inside its batch's transaction
 * (og__sq_consume, admit.c, G6)
 * ========================================================================= */

int og__sq_consume_in(og__sq_store *s, og__sq_conn *c,
                      const og__admit_req *req, og_consume_result *out,
                      bool *keep)
{
    og__consumption cons;
    og__sq_family fam;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = og__sq_family_state(c, req->issuer, req->family, &fam)) < 0)
        return rc;
    if (fam != SQ_FAM_MISSING && fam != SQ_FAM_REVOKED) {
        /* The admission's claim with no operation (Q5, Q9). */
        if ((rc = og__sq_claim(s, c, req, NULL, out->family)) < 0)
            return rc;
        if (rc == 1) {
            if (req->form == OG_FORM_TOKEN)
                memcpy(out->family, req->family, sizeof out->family);
            out->consumed = true;
            out->refusal = OG_REFUSAL_NONE;
            *keep = true;
            return 0;
        }
    }
    if ((rc = og__sq_consumption(s, c, req, fam, &cons)) < 0)
        return rc;
    out->consumed = false; /* a denial, without exception */
    out->refusal = og__classify_consume(&cons);
    return 0;
}

/* ===========================================================================
 * Tickets (M15, Q12): hashes only; lib/store/grants.c hashes the text
 * ========================================================================= */

/* ?1 hash, ?2 issuer, ?3 family. */
static const char sq_ticket_insert_sql[] =
    "INSERT INTO tickets (ticket_hash, issuer, family, created_at)"
    " VALUES (?1, ?2, ?3, " SQ_NOW ")";

static int sq_ticket_insert(og__sq_conn *c, const char *hash,
                            const char *issuer, const char *family)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_ticket_insert_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, family, -1, SQLITE_STATIC);
    return og__sq_done(c, st);
}

int og__sq_ticket_create(void *impl, const char *issuer, const char *family,
                         const char *hash, og_ticket_outcome *out)
{
    og__sq_store *s = impl;
    og_ticket_outcome o = OG_TICKET_FAMILY_REVOKED;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    /* The family first, ordered against its revocation (Q5). */
    if ((rc = sq_family_ensure(c, issuer, family)) == 1 &&
        (rc = sq_ticket_insert(c, hash, issuer, family)) == 0) {
        o = OG_TICKET_ISSUED;
        keep = true;
    }
    rc = og__sq_end(s, c, rc < 0 ? rc : 0, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

/* Rotation's first half: ?1 the presented ticket's hash. */
static const char sq_ticket_rotate_sql[] =
    "UPDATE tickets SET rotated_at = " SQ_NOW
    " WHERE ticket_hash = ?1 AND rotated_at IS NULL"
    "   AND EXISTS (SELECT 1 FROM families f WHERE f.issuer = tickets.issuer"
    "               AND f.family = tickets.family AND f.revoked_at IS NULL)"
    " RETURNING issuer, family";
enum { TICKET_ROTATE_ISSUER, TICKET_ROTATE_FAMILY, TICKET_ROTATE_NCOLS };
/* Why nothing rotated: ?1 the presented ticket's hash. */
static const char sq_ticket_read_sql[] =
    "SELECT t.rotated_at IS NOT NULL, t.issuer, t.family,"
    "       coalesce(f.revoked_at IS NOT NULL, 1)"
    " FROM tickets t LEFT JOIN families f"
    "   ON f.issuer = t.issuer AND f.family = t.family"
    " WHERE t.ticket_hash = ?1";
enum {
    TICKET_READ_ROTATED,
    TICKET_READ_ISSUER,
    TICKET_READ_FAMILY,
    TICKET_READ_FAMILY_REVOKED,
    TICKET_READ_NCOLS
};

static int sq_ticket_rotate_in(og__sq_store *s, og__sq_conn *c,
                               const char *old_hash, const char *new_hash,
                               og_ticket_outcome *out, char *issuer,
                               char *family, bool *keep)
{
    sqlite3_stmt *st;
    bool rotated = false, revoked = false;
    int rc;

    /* The rotation: the old ticket, live and in a live family, is marked
     * rotated and the new one created in its family. */
    if ((rc = og__sq_stmt(c, sq_ticket_rotate_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, old_hash, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1) {
        if (og__sq_text(st, TICKET_ROTATE_ISSUER, issuer, OG_ID_MAX + 1) < 0 ||
            og__sq_text(st, TICKET_ROTATE_FAMILY, family, OG_ID_MAX + 1) < 0) {
            sqlite3_reset(st);
            return OG_EINTERNAL;
        }
        if ((rc = og__sq_done(c, st)) < 0 ||
            (rc = sq_ticket_insert(c, new_hash, issuer, family)) < 0)
            return rc;
        *out = OG_TICKET_ISSUED;
        *keep = true;
        return 0;
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;

    /* Nothing rotated: unknown, reused, or its family is revoked. */
    if ((rc = og__sq_stmt(c, sq_ticket_read_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, old_hash, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1) {
        rotated = sqlite3_column_int(st, TICKET_READ_ROTATED) != 0;
        revoked = sqlite3_column_int(st, TICKET_READ_FAMILY_REVOKED) != 0;
        if (og__sq_text(st, TICKET_READ_ISSUER, issuer, OG_ID_MAX + 1) < 0 ||
            og__sq_text(st, TICKET_READ_FAMILY, family, OG_ID_MAX + 1) < 0)
            rc = OG_EINTERNAL;
    }
    sqlite3_reset(st);
    if (rc <= 0) {
        *out = OG_TICKET_NOT_FOUND;
        return rc;
    }
    if (rotated) {
        /* Reuse, including a concurrent presentation that lost the race:
         * theft. The family goes in this same transaction (Q12). */
        *out = OG_TICKET_REUSED;
        return sq_family_revoke_in(s, c, issuer, family, NULL, keep);
    }
    if (!revoked) /* live, unrotated, family live: the UPDATE would have run */
        return OG_EINTERNAL;
    *out = OG_TICKET_FAMILY_REVOKED;
    return 0;
}

int og__sq_rotate_in(og__sq_store *s, og__sq_conn *c, og__rotate_row *row,
                     bool *keep)
{
    row->outcome = OG_TICKET_NOT_FOUND;
    row->issuer[0] = row->family[0] = '\0';
    *keep = false;
    return sq_ticket_rotate_in(s, c, row->old_hash, row->new_hash,
                               &row->outcome, row->issuer, row->family, keep);
}

/* rotate_batch_max = 1: the rotation alone, in a transaction of its own,
 * at once (G8); else a row of the store's one queue of writes (admit.c). */
int og__sq_ticket_rotate(void *impl, const char *old_hash,
                         const char *new_hash, og_ticket_outcome *out,
                         char *issuer, char *family)
{
    og__sq_store *s = impl;
    og__rotate_row row;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    memset(&row, 0, sizeof row);
    if (og__copy(row.old_hash, sizeof row.old_hash, old_hash) != 0 ||
        og__copy(row.new_hash, sizeof row.new_hash, new_hash) != 0)
        return OG_EINTERNAL; /* lib/store/grants.c hashed them: a defect */
    if (s->opts.rotate_batch_max > 1) {
        og__sq_write w = {.rotate = &row};

        rc = og__sq_write_submit(
            s, &w, og__sq_mono_us() + s->opts.timings.store_timeout_us);
    } else if ((rc = og__sq_begin(s, &c)) == 0) {
        rc = og__sq_rotate_in(s, c, &row, &keep);
        rc = og__sq_end(s, c, rc, keep);
        pthread_mutex_lock(&s->stats_mu);
        s->rotate_stats.batches++;
        s->rotate_stats.rows++;
        pthread_mutex_unlock(&s->stats_mu);
    }
    if (rc < 0)
        return rc;
    *out = row.outcome;
    if (row.issuer[0]) { /* known: the ticket exists */
        memcpy(issuer, row.issuer, sizeof row.issuer);
        memcpy(family, row.family, sizeof row.family);
    }
    return 0;
}
