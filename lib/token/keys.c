/*
 * keys.c — Ed25519 keys as RFC 8037 OKP JWKs: keysets for verification,
 * signers for issuing. No I/O (keyfile.c reads and writes the files).
 *
 * Invariants:
 *   K1  A keyset holds only public keys. A JWK with "d" is refused, so a
 *       misplaced private key cannot end up in a verification set.
 *   K2  Every key in a keyset is a canonical, valid Ed25519 point that is
 *       not of small order (libsodium's pk_to_curve25519 checks exactly
 *       that), and (issuer, kid) is unique in the set.
 *   K3  A signer's secret key lives only in sodium_malloc'd memory, read-only
 *       once set, wiped and unmapped by og_signer_free(). Every transient
 *       copy this file makes of a private key (the decoded seed, the
 *       base64url "d" text jansson decoded) is wiped before it is freed.
 *       What jansson's lexer buffered while parsing is freed without wiping:
 *       docs/design.md names that limit.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "token/token_int.h"

/* ===========================================================================
 * Names
 * ========================================================================= */

int og__kid_check(const char *kid)
{
    size_t n = 0;

    if (kid == NULL)
        return -1;
    for (; n <= OG_KID_MAX && kid[n] != '\0'; n++) {
        unsigned char c = (unsigned char)kid[n];
        if (c < 0x21 || c > 0x7e || c == '.' || c == '/' || c == '\\')
            return -1;
    }
    return n >= 1 && n <= OG_KID_MAX ? 0 : -1;
}

int og__issuer_file_check(const char *issuer)
{
    if (og__id_check(issuer) != 0 || issuer[0] == '.')
        return -1;
    for (const char *p = issuer; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '~' ||
              c == '-'))
            return -1;
    }
    return 0;
}

int og__jwk_thumbprint(const unsigned char pk[OG__ED25519_PK],
                       char kid[OG_KID_MAX + 1])
{
    char x[OG__B64URL_LEN(OG__ED25519_PK) + 1];
    unsigned char h[crypto_hash_sha256_BYTES];
    char buf[128];
    json_t *o;
    size_t n;

    /* RFC 7638 3.2: the required members in lexicographic order, no white
     * space. JSON_SORT_KEYS | JSON_COMPACT produce exactly that. */
    og__b64url_encode(pk, OG__ED25519_PK, x);
    o = json_pack("{s:s, s:s, s:s}", "crv", "Ed25519", "kty", "OKP", "x", x);
    if (o == NULL)
        return OG_ENOMEM;
    n = json_dumpb(o, buf, sizeof buf, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    if (n == 0 || n > sizeof buf)
        return OG_ENOMEM;
    crypto_hash_sha256(h, (const unsigned char *)buf, n);
    og__b64url_encode(h, sizeof h, kid);
    return 0;
}

/* ===========================================================================
 * JWK parsing (shared by public and private keys)
 * ========================================================================= */

/* Decodes a base64url JWK member of exactly want bytes. 0 or -1. */
static int jwk_bytes(json_t *o, const char *name, unsigned char *out,
                     size_t want)
{
    json_t *v = json_object_get(o, name);
    size_t n;

    if (!json_is_string(v))
        return -1;
    if (og__b64url_decode(json_string_value(v), json_string_length(v), out,
                          want, &n) != 0 || n != want)
        return -1;
    return 0;
}

/* Optional string member: absent, or a string equal to want. */
static int jwk_optional_is(json_t *o, const char *name, const char *want)
{
    json_t *v = json_object_get(o, name);

    if (v == NULL)
        return 0;
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0 ? 0
                                                                        : -1;
}

/* Parses the parts every Ed25519 OKP JWK shares: kty, crv, x, kid, alg,
 * use. *o is the parsed object (caller decrefs). OG_EKEY_INVALID or 0. */
static int jwk_parse_common(const char *text, json_t **o,
                            unsigned char pk[OG__ED25519_PK],
                            char kid[OG_KID_MAX + 1])
{
    unsigned char curve[crypto_scalarmult_curve25519_BYTES];
    json_error_t err;
    json_t *j, *k;
    size_t len;

    if (text == NULL)
        return OG_EKEY_INVALID;
    len = strnlen(text, OG_JWK_MAX + 1);
    if (len > OG_JWK_MAX)
        return OG_EKEY_INVALID;
    j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (j == NULL)
        return OG_EKEY_INVALID;
    if (!json_is_object(j) ||
        !json_is_string(json_object_get(j, "kty")) ||
        strcmp(json_string_value(json_object_get(j, "kty")), "OKP") != 0 ||
        !json_is_string(json_object_get(j, "crv")) ||
        strcmp(json_string_value(json_object_get(j, "crv")), "Ed25519") != 0 ||
        jwk_bytes(j, "x", pk, OG__ED25519_PK) != 0 ||
        jwk_optional_is(j, "alg", "EdDSA") != 0 ||
        jwk_optional_is(j, "use", "sig") != 0 ||
        /* K2: on the curve, canonical, not of small order. */
        crypto_sign_ed25519_pk_to_curve25519(curve, pk) != 0)
        goto bad;
    k = json_object_get(j, "kid");
    if (k == NULL) {
        if (og__jwk_thumbprint(pk, kid) != 0)
            goto bad;
    } else if (!json_is_string(k) || og__kid_check(json_string_value(k)) != 0) {
        goto bad;
    } else {
        memcpy(kid, json_string_value(k), json_string_length(k) + 1);
    }
    *o = j;
    return 0;
bad:
    json_decref(j);
    return OG_EKEY_INVALID;
}

/* ===========================================================================
 * Keysets
 * ========================================================================= */

typedef struct key_entry {
    char issuer[OG_ID_MAX + 1];
    char kid[OG_KID_MAX + 1];
    unsigned char pk[OG__ED25519_PK];
} key_entry;

struct og_keyset {
    size_t n, cap;
    key_entry *keys;
};

int og_keyset_new(og_keyset **out)
{
    og_keyset *ks;

    if (out == NULL)
        return OG_EINVAL;
    if (sodium_init() < 0)
        return OG_EINTERNAL;
    ks = calloc(1, sizeof *ks);
    if (ks == NULL)
        return OG_ENOMEM;
    *out = ks;
    return 0;
}

void og_keyset_free(og_keyset *ks)
{
    if (ks == NULL)
        return;
    free(ks->keys);
    free(ks);
}

size_t og_keyset_count(const og_keyset *ks)
{
    return ks ? ks->n : 0;
}

void og__keyset_truncate(og_keyset *ks, size_t n)
{
    if (ks && n < ks->n)
        ks->n = n;
}

int og__keyset_find(const og_keyset *ks, const char *issuer, const char *kid,
                    unsigned char pk[OG__ED25519_PK])
{
    int issuer_known = 0;

    for (size_t i = 0; i < ks->n; i++) {
        if (strcmp(ks->keys[i].issuer, issuer) != 0)
            continue;
        issuer_known = 1;
        if (strcmp(ks->keys[i].kid, kid) == 0) {
            memcpy(pk, ks->keys[i].pk, OG__ED25519_PK);
            return 0;
        }
    }
    return issuer_known ? OG_EGRANT_UNKNOWN_KEY : OG_EGRANT_UNKNOWN_ISSUER;
}

int og_keyset_add(og_keyset *ks, const char *issuer, const char *public_jwk,
                  char kid_out[OG_KID_MAX + 1])
{
    key_entry k;
    json_t *o = NULL;
    int rc;

    if (ks == NULL)
        return OG_EINVAL;
    if (og__id_check(issuer) != 0)
        return OG_EISSUER;
    memset(&k, 0, sizeof k);
    if ((rc = jwk_parse_common(public_jwk, &o, k.pk, k.kid)) != 0)
        return rc;
    /* K1 */
    rc = json_object_get(o, "d") != NULL ? OG_EKEY_INVALID : 0;
    json_decref(o);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < ks->n; i++)
        if (strcmp(ks->keys[i].issuer, issuer) == 0 &&
            strcmp(ks->keys[i].kid, k.kid) == 0)
            return OG_EKEY_DUPLICATE;
    if (ks->n == OG_KEYSET_MAX)
        return OG_EKEY_INVALID;
    if (ks->n == ks->cap) {
        key_entry *nk = og__grow(ks->keys, sizeof *nk, &ks->cap, 4,
                                 OG_KEYSET_MAX);
        if (nk == NULL)
            return OG_ENOMEM;
        ks->keys = nk;
    }
    memcpy(k.issuer, issuer, strlen(issuer) + 1);
    ks->keys[ks->n++] = k;
    if (kid_out)
        memcpy(kid_out, k.kid, strlen(k.kid) + 1);
    return 0;
}

/* ===========================================================================
 * Signers
 * ========================================================================= */

struct og_signer {
    char kid[OG_KID_MAX + 1];
    unsigned char pk[OG__ED25519_PK];
    unsigned char *sk; /* crypto_sign_SECRETKEYBYTES, sodium_malloc'd, RO */
};

/* Wipes the text of a jansson string in place. The buffer is jansson's own
 * heap copy, so writing to it is defined; after this the object is only
 * ever freed. */
static void wipe_json_string(json_t *v)
{
    if (json_is_string(v))
        sodium_memzero((void *)(uintptr_t)json_string_value(v),
                       json_string_length(v));
}

int og_signer_load(const char *private_jwk, og_signer **out)
{
    unsigned char pk[OG__ED25519_PK];
    unsigned char *seed = NULL;
    og_signer *s = NULL;
    json_t *o = NULL;
    int rc;

    if (out == NULL)
        return OG_EINVAL;
    if (sodium_init() < 0)
        return OG_EINTERNAL;
    s = calloc(1, sizeof *s);
    seed = sodium_malloc(OG__ED25519_SEED);
    if (s == NULL || seed == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    s->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    if (s->sk == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    if ((rc = jwk_parse_common(private_jwk, &o, s->pk, s->kid)) != 0)
        goto out;
    rc = OG_EKEY_INVALID;
    if (jwk_bytes(o, "d", seed, OG__ED25519_SEED) != 0)
        goto out;
    crypto_sign_seed_keypair(pk, s->sk, seed);
    /* x must be d's public key: a JWK whose halves disagree would sign with
     * one key while every tool that reads x trusts another. */
    if (sodium_memcmp(pk, s->pk, sizeof pk) != 0)
        goto out;
    sodium_mprotect_readonly(s->sk);
    *out = s;
    s = NULL;
    rc = 0;
out:
    if (o) {
        wipe_json_string(json_object_get(o, "d"));
        json_decref(o);
    }
    sodium_free(seed); /* wipes */
    og_signer_free(s);
    return rc;
}

void og_signer_free(og_signer *s)
{
    if (s == NULL)
        return;
    sodium_free(s->sk); /* wipes, unmaps; NULL is a no-op */
    free(s);
}

const char *og_signer_kid(const og_signer *s)
{
    return s ? s->kid : NULL;
}

void og__signer_sign(const og_signer *s, const unsigned char *msg, size_t len,
                     unsigned char sig[OG__ED25519_SIG])
{
    crypto_sign_detached(sig, NULL, msg, len, s->sk);
}

/* A JWK object for pk, with the private member d when d is non-NULL. */
static json_t *jwk_object(const unsigned char pk[OG__ED25519_PK],
                          const char *kid, const char *d)
{
    char x[OG__B64URL_LEN(OG__ED25519_PK) + 1];
    json_t *o;

    og__b64url_encode(pk, OG__ED25519_PK, x);
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv",
                  "Ed25519", "x", x, "kid", kid, "alg", "EdDSA", "use", "sig");
    if (o && d && json_object_set_new(o, "d", json_string(d)) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

int og_signer_public_jwk(const og_signer *s, char **json)
{
    json_t *o;
    char *t;

    if (s == NULL || json == NULL)
        return OG_EINVAL;
    o = jwk_object(s->pk, s->kid, NULL);
    t = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (t == NULL)
        return OG_ENOMEM;
    *json = t;
    return 0;
}

int og__jwk_private_text(const unsigned char seed[OG__ED25519_SEED],
                         char **text, char kid[OG_KID_MAX + 1])
{
    unsigned char pk[OG__ED25519_PK];
    unsigned char *sk = NULL;
    char *d = NULL, *buf = NULL;
    json_t *o = NULL;
    size_t n;
    int rc = OG_ENOMEM;

    sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
    d = sodium_malloc(OG__B64URL_LEN(OG__ED25519_SEED) + 1);
    if (sk == NULL || d == NULL)
        goto out;
    crypto_sign_seed_keypair(pk, sk, seed);
    if ((rc = og__jwk_thumbprint(pk, kid)) != 0)
        goto out;
    og__b64url_encode(seed, OG__ED25519_SEED, d);
    rc = OG_ENOMEM;
    if ((o = jwk_object(pk, kid, d)) == NULL)
        goto out;
    /* json_dumpb writes straight into our buffer: no intermediate copy of
     * the text to leave behind. One call sizes it, one fills it. */
    n = json_dumpb(o, NULL, 0, JSON_INDENT(2));
    if (n == 0 || (buf = malloc(n + 2)) == NULL)
        goto out;
    if (json_dumpb(o, buf, n, JSON_INDENT(2)) != n) {
        sodium_memzero(buf, n + 2);
        free(buf);
        buf = NULL;
        goto out;
    }
    buf[n] = '\n';
    buf[n + 1] = '\0';
    *text = buf;
    rc = 0;
out:
    if (o) {
        wipe_json_string(json_object_get(o, "d"));
        json_decref(o);
    }
    sodium_free(d);
    sodium_free(sk);
    return rc;
}

bool og_issuer_file_valid(const char *issuer)
{
    return issuer != NULL && og__issuer_file_check(issuer) == 0;
}
