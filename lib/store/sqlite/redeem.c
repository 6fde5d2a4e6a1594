/*
 * redeem.c — the SQLite store's redemption recovery points (schema 6).
 *
 * Invariant:
 *
 *   Q24 A redemption recovery point is written by ONE autocommit INSERT ...
 *       ON CONFLICT (caller, idempotency_key) DO NOTHING: the first writer
 *       of a key wins and nothing ever overwrites it; "inserted" is
 *       reported only after the statement completed, i.e. committed (Q4).
 *       The read is ONE SELECT (one WAL snapshot) answering both "the key's
 *       own point" and "the same code under another key", so the two can
 *       never come from different states. The store holds only sealed
 *       bytes and the token's SHA-256.
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
     * answer waits for og__sq_done (Q4), not for the RETURNING row. */
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
enum {
    REDEMPTION_GET_OWN,
    REDEMPTION_GET_CODE_HASH,
    REDEMPTION_GET_NONCE,
    REDEMPTION_GET_SEALED,
    REDEMPTION_GET_CREATED_AT,
    REDEMPTION_GET_NCOLS
};

/* Copies the OWN row of sq_redemption_get_sql into *out (sealed
 * malloc'd). */
static int sq_read_point(sqlite3_stmt *st, og_redemption_point *out)
{
    int nlen = sqlite3_column_bytes(st, REDEMPTION_GET_NONCE);
    int slen = sqlite3_column_bytes(st, REDEMPTION_GET_SEALED);
    const void *nonce = sqlite3_column_blob(st, REDEMPTION_GET_NONCE);
    const void *sealed = sqlite3_column_blob(st, REDEMPTION_GET_SEALED);

    if (og__sq_text(st, REDEMPTION_GET_CODE_HASH, out->code_hash,
                    sizeof out->code_hash) < 0 ||
        nlen != OG_REDEMPTION_NONCE_LEN || !nonce || !sealed ||
        slen <= OG_REDEMPTION_TAG_LEN || slen > OG_REDEMPTION_SEALED_MAX)
        return OG_EINTERNAL; /* the schema's CHECKs forbid it */
    if (!(out->sealed = malloc((size_t)slen)))
        return OG_ENOMEM;
    memcpy(out->nonce, nonce, OG_REDEMPTION_NONCE_LEN);
    memcpy(out->sealed, sealed, (size_t)slen);
    out->sealed_len = (size_t)slen;
    out->created_at_us = sqlite3_column_int64(st, REDEMPTION_GET_CREATED_AT);
    return 0;
}

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
    if (rc == 0) {
        *found = OG_REDEMPTION_ABSENT;
    } else if (rc == 1 && sqlite3_column_int(st, REDEMPTION_GET_OWN) == 0) {
        *found = OG_REDEMPTION_CODE_ELSEWHERE; /* nothing of it is read */
        rc = 0;
    } else if (rc == 1 && (rc = sq_read_point(st, out)) == 0) {
        *found = OG_REDEMPTION_OWN;
    }
    sqlite3_reset(st);
out:
    og__sq_release(s, c, false);
    return rc;
}
