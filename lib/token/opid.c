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
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "token/token_int.h"

#define OPID_KEY_LEN 32
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

/* Reads at most OG_OPID_KEY_FILE_MAX bytes of the owner-only regular file
 * at path into buf (room for one more). Length, or a negative error. */
static int key_read(const char *path, char *buf)
{
    struct stat st;
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc = 0;

    if (fd < 0)
        return errno == ELOOP ? OG_EKEY_INVALID : OG_EKEY_IO;
    if (fstat(fd, &st) != 0) {
        rc = OG_EKEY_IO;
        goto out;
    }
    /* A secret the group or others can touch is no longer a secret. */
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
        rc = OG_EKEY_INVALID;
        goto out;
    }
    while (n <= OG_OPID_KEY_FILE_MAX) {
        ssize_t r = read(fd, buf + n, OG_OPID_KEY_FILE_MAX + 1 - n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = OG_EKEY_IO;
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    rc = n > OG_OPID_KEY_FILE_MAX ? OG_EKEY_INVALID : (int)n;
out:
    close(fd);
    return rc;
}

int og_opid_key_load_file(const char *path, og_opid_key **out)
{
    char buf[OG_OPID_KEY_FILE_MAX + 1];
    unsigned char key[OPID_KEY_LEN];
    size_t a = 0, b, len = 0;
    int n, rc;

    if (!path || !out)
        return OG_EINVAL;
    if ((n = key_read(path, buf)) < 0)
        return n;
    b = (size_t)n;
    while (a < b && strchr(" \t\r\n", buf[a]))
        a++;
    while (b > a && strchr(" \t\r\n", buf[b - 1]))
        b--;
    if (b - a == 2 * OPID_KEY_LEN &&
        sodium_hex2bin(key, sizeof key, buf + a, b - a, NULL, &len, NULL) ==
            0 &&
        len == OPID_KEY_LEN)
        rc = og_opid_key_from_bytes(key, out);
    else
        rc = OG_EKEY_INVALID;
    sodium_memzero(buf, sizeof buf);
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
