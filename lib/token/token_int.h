/*
 * token_int.h — what lib/token's files share with each other and with the
 * layers above (store). Not API.
 *
 *   base64url.c  the strict base64url codec
 *   jws.c        compact JWS: header rules, signing input, signature
 *   keys.c       JWKs, keysets, signers; no I/O
 *   keyfile.c    key files: keygen, loading — with opid.c's one loader, the
 *                only token code that touches the disk
 *   grant.c      the grant validator and the claim rules; pure: keys and
 *                time are arguments
 *   issue.c      fresh grant ids and UUIDs, signed grant tokens
 *   opid.c       server-issued operation ids, their MAC and its key file
 *
 * Included by lib/token/ and the layers above it only
 * (tools/check_layers.py).
 */
#ifndef OG_TOKEN_INT_H
#define OG_TOKEN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_int.h"
#include "oncegate/grant.h"

/* ===========================================================================
 * Grant claims (lib/token/grant.c) and fresh identifiers (issue.c).
 * ========================================================================= */

/* Builds the compact JSON claim set for gc (amount canonical) into a
 * malloc'd *text of *len bytes, after checking it with the validator's own
 * claim rules. 0, OG_EGRANT_MALFORMED or OG_ENOMEM. */
int og__grant_claims_json(const og_grant_claims *gc, char **text, size_t *len);

/* A fresh version 4 UUID (libsodium's CSPRNG), lower case. 0, or
 * OG_EINTERNAL when libsodium cannot start. */
int og__uuid_new(char out[OG_UUID_LEN + 1]);

/* ===========================================================================
 * base64url (lib/token/base64url.c). Pure.
 * ========================================================================= */

/* Decodes unpadded base64url (RFC 4648 5) of exactly len bytes into out
 * (room for outmax bytes; out non-NULL even when len is 0). Refuses padding,
 * any byte outside the alphabet, a length of 1 mod 4 and non-zero trailing
 * bits — so every byte string has exactly one accepted spelling. Returns 0
 * and *outlen, or -1 (out may be partly written). */
int og__b64url_decode(const char *in, size_t len, unsigned char *out,
                      size_t outmax, size_t *outlen);

/* Encoded length of n bytes, without the terminator. */
#define OG__B64URL_LEN(n) (((n) / 3) * 4 + ((n) % 3 ? (n) % 3 + 1 : 0))

/* Encodes n bytes into out (room for OG__B64URL_LEN(n) + 1) and terminates
 * it. Returns out. */
char *og__b64url_encode(const unsigned char *in, size_t n, char *out);

/* ===========================================================================
 * Keys (lib/token/keys.c). No I/O.
 * ========================================================================= */
#define OG__ED25519_PK 32
#define OG__ED25519_SEED 32
#define OG__ED25519_SIG 64

/* 0 when kid is 1..OG_KID_MAX printable ASCII without '.', '/' or '\\'
 * (a kid names files); else -1. */
int og__kid_check(const char *kid);

/* 0 when issuer can name a key file: og__id_check() and only
 * [A-Za-z0-9._~-], not starting with '.'; else -1. */
int og__issuer_file_check(const char *issuer);

/* The RFC 7638 thumbprint of an Ed25519 public key: base64url(SHA-256(
 * {"crv":"Ed25519","kty":"OKP","x":X})), 43 characters. 0 or OG_ENOMEM. */
int og__jwk_thumbprint(const unsigned char pk[OG__ED25519_PK],
                       char kid[OG_KID_MAX + 1]);

/* The public key of (issuer, kid) into pk: 0, OG_EGRANT_UNKNOWN_ISSUER when
 * ks has no key for issuer, OG_EGRANT_UNKNOWN_KEY when it has keys for
 * issuer but not kid. */
int og__keyset_find(const og_keyset *ks, const char *issuer, const char *kid,
                    unsigned char pk[OG__ED25519_PK]);

/* Truncates ks back to its first n keys (undo for all-or-nothing loads). */
void og__keyset_truncate(og_keyset *ks, size_t n);

/* A private JWK text for seed, with kid (the thumbprint), into a malloc'd
 * string the caller must wipe (sodium_memzero) and free. 0 or OG_ENOMEM. */
int og__jwk_private_text(const unsigned char seed[OG__ED25519_SEED],
                         char **text, char kid[OG_KID_MAX + 1]);

/* Signs msg with s: a detached Ed25519 signature. */
void og__signer_sign(const og_signer *s, const unsigned char *msg, size_t len,
                     unsigned char sig[OG__ED25519_SIG]);

/* og_keygen() from a given seed (tests: deterministic names). */
int og__keygen_seed(const char *issuer, const char *dir,
                    const unsigned char seed[OG__ED25519_SEED],
                    og_keygen_result *out);

/* ===========================================================================
 * Compact JWS (lib/token/jws.c). Pure.
 * ========================================================================= */
struct json_t;

/* The header's typ, as og__jws_decode() classified it. */
typedef enum og__jws_typ {
    OG__TYP_GRANT = 0, /* OG_GRANT_TYP, "application/" prefix or not */
    OG__TYP_LEGACY,    /* "JWT" or no typ: grants issued before explicit
                          typing; the policy decides (og_grant_policy) */
} og__jws_typ;

/* A token split and parsed, nothing verified yet. */
typedef struct og__jws {
    char kid[OG_KID_MAX + 1];
    og__jws_typ typ;
    struct json_t *payload;   /* a JSON object; owned: og__jws_clear() */
    size_t signing_input_len; /* "header.payload": token[0, len) */
    unsigned char sig[OG__ED25519_SIG];
} og__jws;

/* Splits and parses token, in this order: length (OG_EGRANT_TOO_LARGE over
 * OG_TOKEN_MAX, measured before anything else), three base64url parts
 * (OG_EGRANT_MALFORMED), the header object (OG_EGRANT_MALFORMED), alg
 * (OG_EGRANT_UNSUPPORTED_ALG unless exactly "EdDSA"), the other header
 * members — kid required; typ a string, compared case-insensitively (RFC
 * 7515 4.1.9), OG_GRANT_TYP or the legacy "JWT" or absent (out->typ), any
 * other type OG_EGRANT_TYPE; anything else including crit refused
 * (OG_EGRANT_MALFORMED) — the 64-byte signature and the payload object
 * (OG_EGRANT_MALFORMED). Duplicate member names are refused in both
 * objects. Returns 0 and fills *out, or the code; OG_ENOMEM. */
int og__jws_decode(const char *token, og__jws *out);

/* 0 when out's signature verifies over token's signing input with pk;
 * OG_EGRANT_BAD_SIGNATURE otherwise. */
int og__jws_verify(const char *token, const og__jws *j,
                   const unsigned char pk[OG__ED25519_PK]);

/* Releases what og__jws_decode() allocated. */
void og__jws_clear(og__jws *j);

/* Signs payload (compact JSON text) as a compact JWS under s, typ
 * OG_GRANT_TYP, into a malloc'd *token. OG_EGRANT_TOO_LARGE when the result
 * would exceed OG_TOKEN_MAX; OG_ENOMEM. */
int og__jws_sign(const og_signer *s, const char *payload, size_t len,
                 char **token);

#endif /* OG_TOKEN_INT_H */
