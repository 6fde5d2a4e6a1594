/*
 * redeem.c — the SQLite store's redemption recovery points (schema 6).
 *
 * It keeps M26 (lib/store/store_int.h) with ONE autocommit INSERT ... ON
 * CONFLICT (caller, idempotency_key) DO NOTHING, whose "inserted" is
 * reported only after the statement completed, i.e. committed (Q2), and
 * ONE SELECT (one WAL snapshot) for the read. Nonce and sealed bytes are
 * BLOBs.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ?1 caller, ?2 idempotency key, ?3 code hash, ?4 nonce, ?5 sealed. A row
 * only when this statement wrote the point; an existing one is never
 * overwritten. */
static const char sq_redemption_put_sql[] =
    "INSERT INTO redemptions (caller, idempotency_key, code_hash, nonce,"
    "   sealed, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, " SQ_NOW ")"
    " ON CONFLICT (caller, idempotency_key) DO NOTHING RETURNING 1";

int og__sq_redemption_put(void *impl, const og_redemption_record *r,
                          bool *inserted)
{
    og__sq_store *s = impl;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc, row;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_redemption_put_sql, &st)) < 0)
        goto out;
    sqlite3_bind_text(st, 1, r->caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->idempotency_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->code_hash, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, r->nonce, OG_REDEMPTION_NONCE_LEN, SQLITE_STATIC);
    sqlite3_bind_blob(st, 5, r->sealed, (int)r->sealed_len, SQLITE_STATIC);
    /* Autocommit: the write commits when the statement completes, so the
     * answer waits for og__sq_done (Q2), not for the RETURNING row. */
    if ((row = og__sq_step(c, st)) < 0) {
        rc = row;
        sqlite3_reset(st);
        goto out;
    }
    if ((rc = og__sq_done(c, st)) == 0)
        *inserted = row == 1;
out:
    og__sq_release(s, c, !og__sq_rollback(c));
    return rc;
}

/* The key's own point first, else another point of the same code (?3
 * NULL: none asked for); one statement, one snapshot. ?1 caller, ?2
 * idempotency key. */
static const char sq_redemption_get_sql[] =
    "SELECT caller = ?1 AND idempotency_key = ?2, code_hash, nonce, sealed,"
    "       created_at"
    " FROM redemptions"
    " WHERE (caller = ?1 AND idempotency_key = ?2) OR code_hash = ?3"
    " ORDER BY 1 DESC LIMIT 1";
/* Its columns: REDEMPTION_GET_* (rows.h). */

int og__sq_redemption_get(void *impl, const char *caller, const char *key,
                          const char *code_hash, og_redemption_found *found,
                          og_redemption_point *out)
{
    og__sq_store *s = impl;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_redemption_get_sql, &st)) < 0)
        goto out;
    sqlite3_bind_text(st, 1, caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 3, code_hash);
    rc = og__sq_step(c, st);
    if (rc == 0)
        *found = OG_REDEMPTION_ABSENT;
    else if (rc == 1)
        rc = og__row_redemption(og__sq_row(st), found, out);
    sqlite3_reset(st);
out:
    og__sq_release(s, c, false);
    return rc;
}
