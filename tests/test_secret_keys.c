/*
 * test_secret_keys.c — the service's secret keys and the files that hold
 * them: the one key file loader (og_secret_key_file_read,
 * lib/token/keyfile.c, F5-F6), the modes of key and store files whatever
 * the umask, and the server-issued operation ids with their MAC
 * (lib/token/opid.c, OI1-OI3).
 *
 * Each refusal is its own file, so the code each row expects comes from the
 * rule it names: a symlink, a mode others can read, a size over the cap, an
 * encoding the key does not take.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "oncegate/grant.h"
#include "oncegate/redeem.h"
#include "oncegate/store.h"
#include "token/token_int.h"
#include "support.h"

/* ===========================================================================
 * Server-issued operation ids and their MAC (lib/token/opid.c)
 * ========================================================================= */

/* The MAC as docs/design.md ("Server-issued operation ids") spells it out,
 * computed here independently of opid.c: HMAC-SHA-256 over each of the
 * domain, issuer, grant id and operation id as a 4-byte big-endian length
 * and its bytes, in unpadded base64url. */
static void opid_mac_by_hand(const unsigned char key[32], const char *iss,
                             const char *gid, const char *op, char *out)
{
    const char *parts[4] = {"oncegate operation id mac v1", iss, gid, op};
    unsigned char msg[512], mac[32];
    size_t n = 0;

    for (int i = 0; i < 4; i++) {
        size_t len = strlen(parts[i]);

        msg[n++] = (unsigned char)(len >> 24);
        msg[n++] = (unsigned char)(len >> 16);
        msg[n++] = (unsigned char)(len >> 8);
        msg[n++] = (unsigned char)len;
        memcpy(msg + n, parts[i], len);
        n += len;
    }
    crypto_auth_hmacsha256(mac, msg, n, key);
    sodium_bin2base64(out, OG_OPID_MAC_LEN + 1, mac, sizeof mac,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

static void operation_id_mac(void **state)
{
    static const char op[] = "0b6c1e52-3f0e-4c1a-9a55-3f1d2b7c9e10";
    unsigned char kb[32], kb2[32];
    char id1[OG_UUID_LEN + 1], id2[OG_UUID_LEN + 1], canon[OG_UUID_LEN + 1];
    char mac[OG_OPID_MAC_LEN + 1], want[OG_OPID_MAC_LEN + 1], bad[64];
    og_opid_key *k = NULL, *k2 = NULL;

    (void)state;
    /* Fresh ids: canonical version 4 UUIDs, never the same twice. */
    assert_int_equal(og_operation_id_new(id1), 0);
    assert_int_equal(og_operation_id_new(id2), 0);
    assert_int_equal(og_operation_id_canonical(id1, canon), 0);
    assert_string_equal(canon, id1);
    assert_int_equal(id1[14], '4');
    assert_string_not_equal(id1, id2);

    for (int i = 0; i < 32; i++) {
        kb[i] = (unsigned char)i;
        kb2[i] = (unsigned char)(i + 1);
    }
    assert_int_equal(og_opid_key_from_bytes(kb, &k), 0);
    assert_int_equal(og_opid_key_from_bytes(kb2, &k2), 0);

    /* The documented construction, and it verifies. */
    assert_int_equal(og_opid_mac(k, "iss", "gid-1", op, mac), 0);
    opid_mac_by_hand(kb, "iss", "gid-1", op, want);
    assert_string_equal(mac, want);
    assert_int_equal(strlen(mac), OG_OPID_MAC_LEN);
    assert_true(og_opid_mac_valid(k, "iss", "gid-1", op, mac));

    /* Bound to each of the three and to the key (OI1). */
    assert_false(og_opid_mac_valid(k2, "iss", "gid-1", op, mac));
    assert_false(og_opid_mac_valid(k, "iss2", "gid-1", op, mac));
    assert_false(og_opid_mac_valid(k, "iss", "gid-2", op, mac));
    assert_false(og_opid_mac_valid(k, "iss", "gid-1", id1, mac));
    /* Length prefixes: moving a byte between issuer and grant id changes
     * the MAC. */
    assert_false(og_opid_mac_valid(k, "is", "sgid-1", op, mac));

    /* Every single-character change, a wrong length, a character outside
     * the alphabet, NULLs: refused (OI2). */
    for (size_t i = 0; i < OG_OPID_MAC_LEN; i++) {
        strcpy(bad, mac);
        bad[i] = bad[i] == 'A' ? 'B' : 'A';
        assert_false(og_opid_mac_valid(k, "iss", "gid-1", op, bad));
    }
    strcpy(bad, mac);
    bad[OG_OPID_MAC_LEN - 1] = '\0';
    assert_false(og_opid_mac_valid(k, "iss", "gid-1", op, bad));
    snprintf(bad, sizeof bad, "%sA", mac);
    assert_false(og_opid_mac_valid(k, "iss", "gid-1", op, bad));
    strcpy(bad, mac);
    bad[5] = '+';
    assert_false(og_opid_mac_valid(k, "iss", "gid-1", op, bad));
    assert_false(og_opid_mac_valid(k, "iss", "gid-1", op, NULL));
    assert_false(og_opid_mac_valid(NULL, "iss", "gid-1", op, mac));
    assert_false(og_opid_mac_valid(k, NULL, "gid-1", op, mac));

    /* Only the canonical operation id is MACed. */
    assert_int_equal(og_opid_mac(k, "iss", "gid-1",
                                 "0B6C1E52-3F0E-4C1A-9A55-3F1D2B7C9E10", mac),
                     OG_EINVAL);
    assert_int_equal(og_opid_mac(k, "iss", "gid-1", "not-a-uuid", mac),
                     OG_EINVAL);
    assert_int_equal(og_opid_mac(NULL, "iss", "gid-1", op, mac), OG_EINVAL);
    og_opid_key_free(k);
    og_opid_key_free(k2);
    og_opid_key_free(NULL);
}

/* Writes text to dir/name with mode; returns the path (static buffer). */
static const char *opid_key_file(const char *dir, const char *name,
                                 const char *text, mode_t mode)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
    return path;
}

static void operation_id_mac_key_file(void **state)
{
    static const char hex[] =
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    static const char op[] = "0b6c1e52-3f0e-4c1a-9a55-3f1d2b7c9e10";
    char dir[] = "/tmp/og-opid-XXXXXX", link_path[600], text[200];
    char mac[OG_OPID_MAC_LEN + 1], want[OG_OPID_MAC_LEN + 1];
    unsigned char kb[32];
    og_opid_key *k = NULL;
    const char *p;

    (void)state;
    for (int i = 0; i < 32; i++)
        kb[i] = (unsigned char)i;
    assert_non_null(mkdtemp(dir));

    /* 64 hex digits, white space around them, owner-only: the key. */
    snprintf(text, sizeof text, "  %s\n", hex);
    p = opid_key_file(dir, "good.key", text, 0600);
    assert_int_equal(og_opid_key_load_file(p, &k), 0);
    assert_int_equal(og_opid_mac(k, "iss", "gid", op, mac), 0);
    opid_mac_by_hand(kb, "iss", "gid", op, want);
    assert_string_equal(mac, want);
    og_opid_key_free(k);

    /* A symlink to it is not followed. */
    snprintf(link_path, sizeof link_path, "%s/link.key", dir);
    assert_int_equal(symlink(p, link_path), 0);
    k = NULL;
    assert_int_equal(og_opid_key_load_file(link_path, &k), OG_EKEY_INVALID);
    assert_null(k);
    unlink(link_path);

    /* Readable by others; not hex; too short; missing. */
    p = opid_key_file(dir, "open.key", hex, 0644);
    assert_int_equal(og_opid_key_load_file(p, &k), OG_EKEY_MODE);
    unlink(p);
    p = opid_key_file(dir, "text.key", "not a key at all", 0600);
    assert_int_equal(og_opid_key_load_file(p, &k), OG_EKEY_INVALID);
    unlink(p);
    p = opid_key_file(dir, "short.key", "0001", 0600);
    assert_int_equal(og_opid_key_load_file(p, &k), OG_EKEY_INVALID);
    unlink(p);
    snprintf(link_path, sizeof link_path, "%s/missing.key", dir);
    assert_int_equal(og_opid_key_load_file(link_path, &k), OG_EKEY_IO);
    assert_int_equal(og_opid_key_load_file(NULL, &k), OG_EINVAL);
    assert_null(k);

    snprintf(link_path, sizeof link_path, "%s/good.key", dir);
    unlink(link_path);
    assert_int_equal(rmdir(dir), 0);
}

/* ===========================================================================
 * The key file loader (F5, F6)
 * ========================================================================= */

/* Writes a key file of mode mode holding text under dir; its path (static). */
static const char *key_file(const char *dir, const char *name,
                            const char *text, mode_t mode)
{
    return opid_key_file(dir, name, text, mode);
}

static void secret_key_file_table(void **state)
{
    static const char hex[] =
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    unsigned char want[OG_SECRET_KEY_LEN], key[OG_SECRET_KEY_LEN], zero[32];
    char b64[sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_ORIGINAL)];
    char b64url[sodium_base64_ENCODED_LEN(
        32, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
    char dir[] = "/tmp/og-skey-XXXXXX", path[600], big[OG_SECRET_KEY_FILE_MAX + 8];
    const char *p;

    (void)state;
    memset(zero, 0, sizeof zero);
    for (int i = 0; i < 32; i++)
        want[i] = (unsigned char)(i + 0xc0); /* '+' and '/' in base64 */
    sodium_bin2base64(b64, sizeof b64, want, 32, sodium_base64_VARIANT_ORIGINAL);
    sodium_bin2base64(b64url, sizeof b64url, want, 32,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    assert_non_null(mkdtemp(dir));

    /* Hex, with white space around it, under either encoding. */
    p = key_file(dir, "hex.key", "\n  " "000102030405060708090a0b0c0d0e0f"
                 "101112131415161718191a1b1c1d1e1f\t\n", 0600);
    for (int enc = OG_KEY_HEX; enc <= OG_KEY_HEX_OR_BASE64; enc++) {
        memset(key, 0xaa, sizeof key);
        assert_int_equal(og_secret_key_file_read(p, (og_key_encoding)enc, key),
                         0);
        for (int i = 0; i < 32; i++)
            assert_int_equal(key[i], i);
    }
    unlink(p);

    /* Base64 in both alphabets: only where the key takes it. */
    p = key_file(dir, "b64.key", b64, 0600);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX_OR_BASE64, key), 0);
    assert_memory_equal(key, want, 32);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX, key),
                     OG_EKEY_INVALID);
    assert_memory_equal(key, zero, 32); /* F6: a key that failed is wiped */
    unlink(p);
    p = key_file(dir, "b64url.key", b64url, 0400);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX_OR_BASE64, key), 0);
    assert_memory_equal(key, want, 32);
    unlink(p);

    /* F5: others may read it; group may write it; a symlink to a good one. */
    p = key_file(dir, "open.key", hex, 0604);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX, key),
                     OG_EKEY_MODE);
    unlink(p);
    p = key_file(dir, "group.key", hex, 0620);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX, key),
                     OG_EKEY_MODE);
    unlink(p);
    p = key_file(dir, "good.key", hex, 0600);
    snprintf(path, sizeof path, "%s/link.key", dir);
    assert_int_equal(symlink(p, path), 0);
    assert_int_equal(og_secret_key_file_read(path, OG_KEY_HEX, key),
                     OG_EKEY_INVALID);
    unlink(path);
    unlink(p);

    /* A directory is not a key file. */
    snprintf(path, sizeof path, "%s/sub", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(og_secret_key_file_read(path, OG_KEY_HEX, key),
                     OG_EKEY_INVALID);
    assert_int_equal(rmdir(path), 0);

    /* Longer than the cap, even when all of it is white space around a key;
     * 31 bytes; 33 bytes; nothing. */
    memset(big, ' ', sizeof big);
    memcpy(big, hex, 64);
    big[sizeof big - 1] = '\0';
    p = key_file(dir, "big.key", big, 0600);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX, key),
                     OG_EKEY_INVALID);
    unlink(p);
    p = key_file(dir, "short.key", "000102030405060708090a0b0c0d0e0f"
                 "101112131415161718191a1b1c1d1e", 0600);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX_OR_BASE64, key),
                     OG_EKEY_INVALID);
    unlink(p);
    p = key_file(dir, "long.key", "000102030405060708090a0b0c0d0e0f"
                 "101112131415161718191a1b1c1d1e1f20", 0600);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX_OR_BASE64, key),
                     OG_EKEY_INVALID);
    unlink(p);
    p = key_file(dir, "empty.key", "", 0600);
    assert_int_equal(og_secret_key_file_read(p, OG_KEY_HEX_OR_BASE64, key),
                     OG_EKEY_INVALID);
    unlink(p);

    /* Missing: an I/O error, not a bad key; bad arguments. */
    snprintf(path, sizeof path, "%s/missing.key", dir);
    assert_int_equal(og_secret_key_file_read(path, OG_KEY_HEX, key),
                     OG_EKEY_IO);
    assert_int_equal(og_secret_key_file_read(NULL, OG_KEY_HEX, key), OG_EINVAL);
    assert_int_equal(og_secret_key_file_read(path, OG_KEY_HEX, NULL),
                     OG_EINVAL);
    assert_int_equal(og_secret_key_file_read(path, (og_key_encoding)7, key),
                     OG_EINVAL);
    assert_int_equal(rmdir(dir), 0);
}

/* The redemption key loader reads through the same loader and keeps its
 * own code for a bad key (oncegate/redeem.h). */
static void redemption_key_file_codes(void **state)
{
    static const char hex[] =
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    char dir[] = "/tmp/og-rkey-XXXXXX", path[600];
    og_redeem_key *k = NULL;
    const char *p;

    (void)state;
    assert_non_null(mkdtemp(dir));
    p = key_file(dir, "good.key", hex, 0600);
    assert_int_equal(og_redeem_key_load_file(p, &k), 0);
    assert_non_null(k);
    og_redeem_key_free(k);
    k = NULL;
    unlink(p);
    p = key_file(dir, "open.key", hex, 0644);
    assert_int_equal(og_redeem_key_load_file(p, &k), OG_EKEY_MODE);
    assert_null(k);
    unlink(p);
    snprintf(path, sizeof path, "%s/missing.key", dir);
    assert_int_equal(og_redeem_key_load_file(path, &k), OG_EKEY_IO);
    assert_int_equal(rmdir(dir), 0);
}

/* ===========================================================================
 * Files that hold secrets are their owner's only, whatever the umask, and a
 * signing key others can read is refused before it is read (docs/design.md,
 * "Keys, key files and rotation").
 * ========================================================================= */
static mode_t mode_of(const char *path)
{
    struct stat st;

    if (lstat(path, &st) != 0)
        fail_msg("%s: missing", path);
    return st.st_mode & 07777;
}

static void key_and_store_files_are_0600_whatever_the_umask(void **state)
{
    char dir[] = "/tmp/og-modes-XXXXXX", db[64], url[80], side[80];
    unsigned char seed[OG__ED25519_SEED];
    og_keygen_result r;
    og_store *s = NULL;
    sqlite3 *h;
    mode_t old;

    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(seed, 0x6d, sizeof seed);
    old = umask(0); /* the widest: only explicit modes protect anything */
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r), 0);
    snprintf(db, sizeof db, "%s/store.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", db);
    assert_int_equal(og_store_migrate(url, NULL, NULL, NULL), 0);
    assert_int_equal(og_store_open(url, NULL, &s), 0);
    /* A writer holds the WAL and the shared-memory index open. */
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "PRAGMA journal_mode=WAL;"
                                     "CREATE TABLE t_modes(x);"
                                     "INSERT INTO t_modes VALUES (1);",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    umask(old);
    assert_int_equal(mode_of(r.private_path), 0600);
    assert_int_equal(mode_of(r.public_path), 0644); /* public, by design */
    assert_int_equal(mode_of(db), 0600);
    snprintf(side, sizeof side, "%s-wal", db);
    assert_int_equal(mode_of(side), 0600);
    snprintf(side, sizeof side, "%s-shm", db);
    assert_int_equal(mode_of(side), 0600);
    sqlite3_close(h);
    og_store_free(s);

    /* An existing store file keeps the mode it has. */
    assert_int_equal(chmod(db, 0640), 0);
    assert_int_equal(og_store_migrate(url, NULL, NULL, NULL), 0);
    assert_int_equal(mode_of(db), 0640);
    t_rm_dir_files(dir);
}

static void signing_key_readable_by_others_is_refused(void **state)
{
    static const mode_t open_modes[] = {0640, 0604, 0620, 0602, 0660, 0644,
                                        0610};
    char dir[] = "/tmp/og-keymode-XXXXXX";
    unsigned char seed[OG__ED25519_SEED];
    og_keygen_result r;
    og_signer *sg = NULL;

    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(seed, 0x5f, sizeof seed);
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r), 0);
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        assert_int_equal(chmod(r.private_path, open_modes[i]), 0);
        if (og_signer_load_file(r.private_path, &sg) != OG_EKEY_MODE)
            fail_msg("mode %04o: not refused as key.mode_too_open",
                     (unsigned)open_modes[i]);
        assert_null(sg);
    }
    assert_string_equal(og_err_name(OG_EKEY_MODE), "key.mode_too_open");
    /* 0600 and 0400 load; the public key needs no such care. */
    assert_int_equal(chmod(r.private_path, 0400), 0);
    assert_int_equal(og_signer_load_file(r.private_path, &sg), 0);
    og_signer_free(sg);
    sg = NULL;
    assert_int_equal(chmod(r.private_path, 0600), 0);
    assert_int_equal(og_signer_load_file(r.private_path, &sg), 0);
    og_signer_free(sg);
    t_rm_dir_files(dir);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(secret_key_file_table),
        cmocka_unit_test(key_and_store_files_are_0600_whatever_the_umask),
        cmocka_unit_test(signing_key_readable_by_others_is_refused),
        cmocka_unit_test(redemption_key_file_codes),
        cmocka_unit_test(operation_id_mac),
        cmocka_unit_test(operation_id_mac_key_file),
    };
    return t_run_tests("secret-keys", tests, NULL, NULL);
}
