/*
 * redeem.c — redemption recovery points: the sealed result of redeeming an
 * external single-use token, kept per (caller, idempotency key).
 *
 * They keep M26 (lib/store/store_int.h); how:
 *
 *  I21 A point is written by ONE statement, INSERT ... ON CONFLICT
 *      (caller, idempotency_key) DO NOTHING, in its own implicit
 *      transaction: a concurrent insert of the key waits for the holder and
 *      then does nothing; "inserted" is reported only after ReadyForQuery
 *      (I1). The read is ONE statement, one snapshot. Binary values cross
 *      the wire as hex text (encode(x, 'hex'); og__pg_row's bytes decode
 *      them).
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "internal.h"

/* $1 caller  $2 idempotency key  $3 code hash  $4 nonce (hex)  $5 sealed
 * (hex). One row only when this statement wrote the point: the primary key
 * is the atomic check, and ON CONFLICT DO NOTHING never overwrites. */
static const char pg_redemption_put_sql[] =
    "INSERT INTO redemptions (caller, idempotency_key, code_hash, nonce, sealed, created_at)\n"
    "VALUES ($1::text, $2::text, $3::text, decode($4::text, 'hex'), decode($5::text, 'hex'),\n"
    "        clock_timestamp())\n"
    "ON CONFLICT (caller, idempotency_key) DO NOTHING\n"
    "RETURNING 1";
static const og__pg_stmt pg_redemption_put_stmt = {
    "og_redemption_put", pg_redemption_put_sql, 5, OG_KEYS_AS_STORED};

int og__pg_redemption_put(void *impl, const og_redemption_record *r,
                          bool *inserted)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char nonce[2 * OG_REDEMPTION_NONCE_LEN + 1], *sealed;
    const char *params[5];
    int rc;

    if (!(sealed = malloc(2 * r->sealed_len + 1)))
        return OG_ENOMEM;
    sodium_bin2hex(nonce, sizeof nonce, r->nonce, OG_REDEMPTION_NONCE_LEN);
    sodium_bin2hex(sealed, 2 * r->sealed_len + 1, r->sealed, r->sealed_len);
    params[0] = r->caller;
    params[1] = r->idempotency_key;
    params[2] = r->code_hash;
    params[3] = nonce;
    params[4] = sealed;
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        goto out;
    rc = og__pg_run(pg, c, &pg_redemption_put_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0) /* committed: og__pg_run confirmed ReadyForQuery (I1) */
        *inserted = PQntuples(res) == 1;
    PQclear(res);
    og__pg_release(pg, c);
out:
    free(sealed);
    return rc;
}

/* $1 caller  $2 idempotency key  $3 code hash (NULL: not asked). The key's
 * own point first, else another point holding the same code: one
 * statement, one snapshot. */
static const char pg_redemption_get_sql[] =
    "SELECT caller = $1::text AND idempotency_key = $2::text AS own, code_hash,\n"
    "       encode(nonce, 'hex'), encode(sealed, 'hex'),\n"
    "       (extract(epoch FROM created_at) * 1000000)::bigint\n"
    "FROM redemptions\n"
    "WHERE (caller = $1::text AND idempotency_key = $2::text) OR code_hash = $3::text\n"
    "ORDER BY own DESC LIMIT 1";
static const og__pg_stmt pg_redemption_get_stmt = {
    "og_redemption_get", pg_redemption_get_sql, 3, OG_KEYS_AS_STORED};
/* Its columns: REDEMPTION_GET_* (rows.h); nonce and sealed hex-encoded. */

int og__pg_redemption_get(void *impl, const char *caller, const char *key,
                          const char *code_hash, og_redemption_found *found,
                          og_redemption_point *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[3] = {caller, key, code_hash};
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_redemption_get_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, REDEMPTION_GET_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 0)
        *found = OG_REDEMPTION_ABSENT;
    else if (rc == 0)
        rc = og__row_redemption(og__pg_row(res, 0), found, out);
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}
