/*
 * opid.c — server-issued operation ids and their MAC (docs/design.md,
 * "Server-issued operation ids"): a fresh id, the MAC key's file, and the
 * MAC over (issuer, grant id, operation id). Everything but the key file is
 * pure.
 *
 * Invariants:
 *   OI1 The MAC input is domain-separated and length-prefixed: no two
 *       distinct (issuer, grant id, operation id) triples share it, and no
 *       other use of the key could produce it.
 *   OI2 Verification recomputes and compares in constant time
 *       (sodium_memcmp); a MAC of the wrong shape is refused before that.
 *   OI3 The key lives in guarded memory (sodium_malloc) and is wiped when
 *       freed; the key file's text and the decoded bytes are wiped on every
 *       path.
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "token/token_int.h"

#define OPID_KEY_LEN OG_SECRET_KEY_LEN
#define OPID_DOMAIN "oncegate operation id mac v1"

struct og_opid_key {
    unsigned char k[OPID_KEY_LEN];
};

int og_operation_id_new(char out[OG_UUID_LEN + 1])
{
    if (!out)
        return OG_EINVAL;
    return og__uuid_new(out);
}

/* ===========================================================================
 * The key (OI3)
 * ========================================================================= */

int og_opid_key_from_bytes(const unsigned char bytes[32], og_opid_key **out)
{
    og_opid_key *k;

    if (!bytes || !out)
        return OG_EINVAL;
    if (sodium_init() < 0 || !(k = sodium_malloc(sizeof *k)))
        return OG_ENOMEM;
    memcpy(k->k, bytes, sizeof k->k);
    *out = k;
    return 0;
}

void og_opid_key_free(og_opid_key *k)
{
    if (k)
        sodium_free(k); /* wipes */
}

int og_opid_key_load_file(const char *path, og_opid_key **out)
{
    unsigned char key[OG_SECRET_KEY_LEN];
    int rc;

    if (!path || !out)
        return OG_EINVAL;
    if ((rc = og_secret_key_file_read(path, OG_KEY_HEX, key)) == 0)
        rc = og_opid_key_from_bytes(key, out);
    sodium_memzero(key, sizeof key);
    return rc;
}

/* ===========================================================================
 * The MAC (OI1, OI2). Pure.
 * ========================================================================= */

/* Feeds s to st as a 4-byte big-endian length and its bytes (OI1). */
static void mac_part(crypto_auth_hmacsha256_state *st, const char *s)
{
    size_t n = strlen(s);
    unsigned char len[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 8), (unsigned char)n};

    crypto_auth_hmacsha256_update(st, len, sizeof len);
    crypto_auth_hmacsha256_update(st, (const unsigned char *)s, n);
}

/* The raw MAC into mac. 0, or OG_EINVAL for a bad argument. */
static int mac_raw(const og_opid_key *k, const char *issuer,
                   const char *grant_id, const char *operation_id,
                   unsigned char mac[crypto_auth_hmacsha256_BYTES])
{
    crypto_auth_hmacsha256_state st;
    char canon[OG_UUID_LEN + 1];

    if (!k || !issuer || !grant_id || !operation_id)
        return OG_EINVAL;
    /* Only the canonical spelling is MACed, so the id the service handed
     * out and the one admission stores are the same bytes. */
    if (og_operation_id_canonical(operation_id, canon) != 0 ||
        strcmp(canon, operation_id) != 0)
        return OG_EINVAL;
    crypto_auth_hmacsha256_init(&st, k->k, sizeof k->k);
    mac_part(&st, OPID_DOMAIN);
    mac_part(&st, issuer);
    mac_part(&st, grant_id);
    mac_part(&st, operation_id);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof st);
    return 0;
}

int og_opid_mac(const og_opid_key *k, const char *issuer,
                const char *grant_id, const char *operation_id,
                char out[OG_OPID_MAC_LEN + 1])
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    int rc;

    if (!out)
        return OG_EINVAL;
    if ((rc = mac_raw(k, issuer, grant_id, operation_id, mac)) != 0)
        return rc;
    og__b64url_encode(mac, sizeof mac, out);
    return 0;
}

bool og_opid_mac_valid(const og_opid_key *k, const char *issuer,
                       const char *grant_id, const char *operation_id,
                       const char *mac)
{
    unsigned char want[crypto_auth_hmacsha256_BYTES];
    unsigned char got[crypto_auth_hmacsha256_BYTES];
    size_t len = 0;
    bool ok;

    if (!mac || strlen(mac) != OG_OPID_MAC_LEN ||
        og__b64url_decode(mac, OG_OPID_MAC_LEN, got, sizeof got, &len) != 0 ||
        len != sizeof got)
        return false;
    if (mac_raw(k, issuer, grant_id, operation_id, want) != 0)
        return false;
    ok = sodium_memcmp(want, got, sizeof want) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}
