/*
 * consumption_key.c — the key a hashed store claims a grant under. Pure.
 *
 *   key = SHA-256( u32be(len(issuer)) || issuer || u32be(len(grant_id)) ||
 *                  grant_id )                                  32 bytes
 *
 * Length-prefixed so that no two (issuer, grant_id) pairs share an encoding:
 * with plain concatenation ("ab", "c") and ("a", "bc") would hash alike and
 * one grant's claim would refuse the other (docs/design.md, "Hashed
 * consumption keys"). Lengths are in bytes of the identifiers as stored (printable
 * ASCII, og__id_check), i.e. their UTF-8 bytes.
 *
 * This is the one C implementation. SQLite runs it as the SQL function
 * og_consumption_key() (lib/store/sqlite/conn.c registers it on every
 * connection); PostgreSQL has the same encoding as an SQL function over its
 * builtin sha256() (lib/store/postgres/schema.c, migration 5). tests/test_core.c
 * holds known vectors; the store suites check that each engine's SQL and this
 * function agree.
 */
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "core/core_int.h"

int og__consumption_key(const char *issuer, size_t issuer_len,
                        const char *grant_id, size_t grant_id_len,
                        unsigned char out[OG_CONSUMPTION_KEY_LEN])
{
    const char *field[2] = {issuer, grant_id};
    const size_t len[2] = {issuer_len, grant_id_len};
    crypto_hash_sha256_state st;

    if (issuer_len > UINT32_MAX || grant_id_len > UINT32_MAX)
        return -1;
    crypto_hash_sha256_init(&st);
    for (int i = 0; i < 2; i++) {
        uint32_t n = (uint32_t)len[i];
        unsigned char be[4] = {(unsigned char)(n >> 24),
                               (unsigned char)(n >> 16),
                               (unsigned char)(n >> 8), (unsigned char)n};

        crypto_hash_sha256_update(&st, be, sizeof be);
        crypto_hash_sha256_update(&st, (const unsigned char *)field[i], n);
    }
    crypto_hash_sha256_final(&st, out);
    return 0;
}

int og_consumption_key(const char *issuer, const char *grant_id,
                       unsigned char out[OG_CONSUMPTION_KEY_LEN])
{
    if (out == NULL)
        return OG_EINVAL;
    if (og__id_check(issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(grant_id) != 0)
        return OG_EGRANT_ID;
    return og__consumption_key(issuer, strlen(issuer), grant_id,
                               strlen(grant_id), out) == 0
               ? 0
               : OG_EINTERNAL;
}

const char *og_consumption_keys_name(og_consumption_keys k)
{
    switch (k) {
    case OG_KEYS_AS_STORED:
        return "as_stored";
    case OG_KEYS_READABLE:
        return "readable";
    case OG_KEYS_HASHED:
        return "hashed";
    }
    return "?";
}

int og_consumption_keys_parse(const char *text, og_consumption_keys *out)
{
    if (text != NULL && strcmp(text, "readable") == 0)
        *out = OG_KEYS_READABLE;
    else if (text != NULL && strcmp(text, "hashed") == 0)
        *out = OG_KEYS_HASHED;
    else
        return OG_EINVAL;
    return 0;
}
