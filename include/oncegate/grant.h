/*
 * grant.h — keys, grant tokens and the grant validator (lib/token/). Part
 * of the public API; oncegate.h includes it with the rest. Issuing a grant
 * into the store (og_grant_issue) is oncegate/store.h's.
 *
 * A grant token is a compact JWS (RFC 7515) signed with EdDSA over Ed25519
 * (RFC 8037) whose payload is a JWT claim set (RFC 7519). The validator,
 * og_grant_verify(), is pure: time and keys are arguments, it does no I/O,
 * and everything og_admit() needs comes out of it (og_validated_grant_
 * admission()), never from request fields. docs/design.md, "Grant tokens",
 * gives the format, what is refused and why, and the order of the checks.
 *
 * Conventions as in oncegate.h: 0 or a negative OG_E* code; out-parameters
 * written only on success; og_x_free(NULL) is a no-op; strings the API takes
 * are borrowed for the call.
 */
#ifndef ONCEGATE_GRANT_H
#define ONCEGATE_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Limits.
 * ------------------------------------------------------------------------- */
#define OG_TOKEN_MAX 4096   /* bytes of a whole token, checked before any
                               decoding: larger is OG_EGRANT_TOO_LARGE */
#define OG_KID_MAX 64       /* a key id: 1-64 printable ASCII, no '.' or '/';
                               keygen uses the RFC 7638 thumbprint (43) */
#define OG_JWK_MAX 4096     /* bytes of one JWK document or file */
#define OG_KEYSET_MAX 256   /* verification keys in one keyset */
#define OG_GRANT_ID_LEN 22  /* og_grant_new_id(): 128 bits as base64url */
#define OG_PATH_MAX 4096    /* key file paths */

/* ---------------------------------------------------------------------------
 * Keys (Ed25519, RFC 8037 OKP JWKs).
 *
 * Files `oncegate keygen` and og_keygen() write, in DIR:
 *   ISSUER.KID.private.jwk  mode 0600: {"kty":"OKP","crv":"Ed25519","x":…,
 *                           "d":…,"kid":…,"alg":"EdDSA","use":"sig"}
 *   ISSUER.KID.public.jwk   mode 0644: the same without "d"
 * KID is the RFC 7638 JWK thumbprint (SHA-256, base64url, 43 characters).
 * The issuer is carried by the file name, not by a JWK member, so a key file
 * can be moved to another issuer only by renaming it on purpose. Issuers
 * that name files: 1-128 characters of [A-Za-z0-9._~-], not starting with
 * '.'.
 * ------------------------------------------------------------------------- */
#define OG_KEY_PUBLIC_SUFFIX ".public.jwk"
#define OG_KEY_PRIVATE_SUFFIX ".private.jwk"

/* 1 when issuer can name key files (the rule above); else 0. */
bool og_issuer_file_valid(const char *issuer);

typedef struct og_keygen_result {
    char kid[OG_KID_MAX + 1];
    char private_path[OG_PATH_MAX]; /* DIR/ISSUER.KID.private.jwk */
    char public_path[OG_PATH_MAX];  /* DIR/ISSUER.KID.public.jwk */
} og_keygen_result;

/* Generates an Ed25519 key pair for issuer and writes both files into the
 * existing directory dir. The private file is created with O_EXCL and mode
 * 0600 and fsync'd, so an existing key is never overwritten; the private key
 * is wiped from memory before returning. Returns 0 and fills *out (paths and
 * kid only, never key material); OG_EISSUER for an issuer that cannot name a
 * file; OG_EKEY_EXISTS if either file exists (nothing is changed);
 * OG_EKEY_IO when dir is missing or a write fails (anything written by this
 * call is removed); OG_ENOMEM, OG_EINTERNAL. */
OG_MUST_CHECK int og_keygen(const char *issuer, const char *dir,
                            og_keygen_result *out);

/* A set of verification keys: issuer -> several (kid, Ed25519 public key),
 * so an issuer can rotate keys. Read-only after loading: any number of
 * threads may verify against one keyset while nobody adds to it. */
typedef struct og_keyset og_keyset;

/* Creates an empty keyset into *out (free with og_keyset_free()). Returns 0,
 * OG_ENOMEM, or OG_EINTERNAL when libsodium cannot initialize. */
OG_MUST_CHECK int og_keyset_new(og_keyset **out);

/* Frees ks. NULL is a no-op. */
void og_keyset_free(og_keyset *ks);

/* The number of keys in ks (0 for NULL). */
size_t og_keyset_count(const og_keyset *ks);

/* Adds one public key for issuer from an OKP JWK text: kty "OKP", crv
 * "Ed25519", x (32 bytes, canonical base64url, a valid Ed25519 point);
 * optional kid (default: the RFC 7638 thumbprint), alg (must be "EdDSA"),
 * use (must be "sig"); other members are ignored (RFC 7517 4). A JWK with a
 * private part "d" is refused, so a private key never sits in a
 * verification set. When kid_out is non-NULL the key's kid is written there.
 * Returns 0; OG_EISSUER; OG_EKEY_INVALID (nothing added; also when ks
 * already holds OG_KEYSET_MAX keys); OG_EKEY_DUPLICATE when issuer already
 * has that kid; OG_ENOMEM. */
OG_MUST_CHECK int og_keyset_add(og_keyset *ks, const char *issuer,
                                const char *public_jwk,
                                char kid_out[OG_KID_MAX + 1]);

/* og_keyset_add() with the JWK read from the file at path (at most
 * OG_JWK_MAX bytes). OG_EKEY_IO when it cannot be read. */
OG_MUST_CHECK int og_keyset_add_file(og_keyset *ks, const char *issuer,
                                     const char *path);

/* Adds every DIR/ISSUER.KID.public.jwk, the issuer taken from the file name;
 * the JWK's kid must equal KID. Other files (private keys included) are
 * skipped. All or nothing: on any error ks is left as it was. Returns 0 and,
 * when added is non-NULL, the number of keys added; errors as
 * og_keyset_add_file(), OG_EKEY_INVALID for a badly named key file. */
OG_MUST_CHECK int og_keyset_load_dir(og_keyset *ks, const char *dir,
                                     size_t *added);

/* One private signing key. Its secret bytes live in sodium_malloc'd memory,
 * read-only after loading, and are wiped by og_signer_free(). Signing is
 * thread-safe. */
typedef struct og_signer og_signer;

/* Loads a private OKP JWK (kty "OKP", crv "Ed25519", d, and x, which must be
 * the public key of d; kid optional, default the thumbprint) into *out.
 * Every copy of the key this call makes is wiped (see docs/design.md for
 * the one jansson keeps). Returns 0, OG_EKEY_INVALID, OG_ENOMEM,
 * OG_EINTERNAL. */
OG_MUST_CHECK int og_signer_load(const char *private_jwk, og_signer **out);

/* og_signer_load() from a file (at most OG_JWK_MAX bytes); OG_EKEY_IO when it
 * cannot be read, OG_EKEY_MODE when group or others have any access to it
 * (checked before it is read). */
OG_MUST_CHECK int og_signer_load_file(const char *path, og_signer **out);

/* Wipes and frees s. NULL is a no-op. */
void og_signer_free(og_signer *s);

/* The signer's kid (owned by s). */
const char *og_signer_kid(const og_signer *s);

/* The signer's public key as an OKP JWK text (kty, crv, x, kid, alg, use),
 * malloc'd into *json; the caller frees it with free(). 0 or OG_ENOMEM. */
OG_MUST_CHECK int og_signer_public_jwk(const og_signer *s, char **json);

/* ---------------------------------------------------------------------------
 * Grant tokens.
 *
 *   header  {"alg":"EdDSA","kid":KID,"typ":"oncegate-grant+jwt"}
 *   claims  {"iss","jti","iat","nbf"?,"exp","sub","aud","act",
 *            "prm":{"account","amount","currency"},"fam"?}
 * typ is explicit (RFC 8725 3.11) and compared case-insensitively, with or
 * without "application/" (RFC 7515 4.1.9); any other type is
 * OG_EGRANT_TYPE, and the legacy "JWT" (or no typ) is accepted only under
 * og_grant_policy.accept_legacy_typ. iat, nbf and exp are JWT
 * NumericDates: integer seconds, 0 .. 253402300799 (9999-12-31T23:59:59Z).
 * Every string is 1-128 printable ASCII without spaces (the store's
 * identifier rule); amount is a decimal string no finer than the minor
 * units of currency, an upper-case ISO 4217 code with minor units
 * (og_amount_check()). Unknown claims are refused.
 * ------------------------------------------------------------------------- */

/* The typ every grant is issued with. */
#define OG_GRANT_TYP "oncegate-grant+jwt"

/* The operation parameters a grant binds. */
typedef struct og_grant_params {
    const char *account;
    const char *amount;   /* decimal text; signed in canonical form */
    const char *currency; /* ISO 4217, upper case */
} og_grant_params;

/* What an issuer signs. */
typedef struct og_grant_claims {
    const char *iss;     /* issuer */
    const char *jti;     /* grant id: og_grant_new_id() */
    int64_t iat;         /* issued at, seconds */
    int has_nbf;         /* 0: no nbf claim */
    int64_t nbf;         /* not before, seconds */
    int64_t exp;         /* expires (the admission deadline), seconds */
    const char *sub;     /* the one principal allowed to present it */
    const char *aud;     /* the executing service */
    const char *act;     /* the operation name */
    og_grant_params prm; /* the bound parameters */
    const char *fam;     /* grant family; NULL: none */
} og_grant_claims;

/* Writes a fresh grant id, 128 bits from the system CSPRNG as unpadded
 * base64url, into out. Returns 0 or OG_EINTERNAL. */
OG_MUST_CHECK int og_grant_new_id(char out[OG_GRANT_ID_LEN + 1]);

/* Signs claims with s as a compact JWS, malloc'd into *token (the caller
 * frees it with free()). The amount is written canonically. Returns 0;
 * OG_EGRANT_MALFORMED when the claims break a rule above (exactly what
 * og_grant_verify() would refuse as malformed, or exp <= iat);
 * OG_EGRANT_TOO_LARGE when the token would exceed OG_TOKEN_MAX; OG_ENOMEM. */
OG_MUST_CHECK int og_grant_token_sign(const og_signer *s,
                                      const og_grant_claims *claims,
                                      char **token);

/* ---------------------------------------------------------------------------
 * The validator.
 * ------------------------------------------------------------------------- */

/* What this service accepts. admission_leeway_us MUST be the
 * og_timings.admission_leeway_us the store was opened with: validation is an
 * early filter that must never be stricter than admission. */
typedef struct og_grant_policy {
    const char *audience;        /* this service: aud must equal it */
    int64_t admission_leeway_us; /* 0 .. 1 h */
    int64_t max_lifetime_us;     /* exp - iat may not exceed it; > 0 */
    int64_t issue_skew_us;       /* iat may lead now by at most this; 0..1 h */
    bool accept_legacy_typ;      /* typ "JWT" or none: a grant issued before
                                    explicit typing, accepted while true
                                    (the rollout, docs/design.md); false:
                                    OG_EGRANT_TYPE */
} og_grant_policy;

/* Fills *p: audience, the leeway of t (og_timings_default()'s when t is
 * NULL), the maximum lifetime and issue-time skew from t (defaults 1 h,
 * 30 s), and accept_legacy_typ true (this release's default).
 * Shortening either limit while grants issued under it are outstanding
 * breaks revocation retention (docs/design.md). */
void og_grant_policy_init(og_grant_policy *p, const char *audience,
                          const og_timings *t);

/* The request as the caller's framework knows it. caller is the
 * authenticated principal, never a request field. */
typedef struct og_grant_request {
    const char *caller;
    const char *action;
    const char *account;
    const char *amount;   /* compared canonically: "250.0" = "250.00" */
    const char *currency; /* compared exactly: "usd" != "USD" */
} og_grant_request;

/* A grant that passed every check. Plain data the caller owns. */
typedef struct og_validated_grant {
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char kid[OG_KID_MAX + 1];
    int64_t issued_at_us;
    int64_t not_before_us;  /* = issued_at_us when the token has no nbf */
    int64_t expires_at_us;
    char subject[OG_ID_MAX + 1];
    char audience[OG_ID_MAX + 1];
    char action[OG_ID_MAX + 1];
    char account[OG_ID_MAX + 1];
    char amount[OG_AMOUNT_MAX + 1]; /* canonical */
    char currency[OG_CURRENCY_LEN + 1];
    char family[OG_ID_MAX + 1];     /* "" when the token has no fam */
} og_validated_grant;

/* Verifies token against ks and validates it for req at now_us
 * (microseconds since the epoch; pass a real clock, tests pass a fixed one).
 * Pure: no I/O, no clock, no global state. Checks, in this order, and
 * returns the first failure:
 *   size (OG_EGRANT_TOO_LARGE) -> three base64url parts, header JSON, alg
 *   (OG_EGRANT_UNSUPPORTED_ALG: before any key is touched) -> header members
 *   and payload JSON (OG_EGRANT_MALFORMED) -> the issuer's key for kid
 *   (OG_EGRANT_UNKNOWN_ISSUER, OG_EGRANT_UNKNOWN_KEY) -> signature
 *   (OG_EGRANT_BAD_SIGNATURE) -> claim types (OG_EGRANT_MALFORMED) -> aud
 *   (OG_EGRANT_WRONG_AUDIENCE) -> nbf - leeway <= now (NOT_YET_VALID) ->
 *   exp + leeway > now, the store's inequality (EXPIRED) -> exp - iat <=
 *   max lifetime (LIFETIME_EXCEEDED) -> iat <= now + skew
 *   (ISSUED_IN_FUTURE) -> sub == req->caller (SUBJECT_MISMATCH) -> act ==
 *   req->action (ACTION_MISMATCH) -> account, amount, currency
 *   (BINDING_MISMATCH).
 * Nothing from the payload is trusted before the signature verifies; the
 * claimed issuer only selects the key. Returns 0 and fills *out, or one of
 * those codes; OG_EINVAL for a NULL argument, a bad policy or now_us outside
 * 1970..9999; OG_ENOMEM. */
OG_MUST_CHECK int og_grant_verify(const og_keyset *ks,
                                  const og_grant_policy *policy,
                                  const char *token,
                                  const og_grant_request *req, int64_t now_us,
                                  og_validated_grant *out);

/* og_grant_verify() without the request binding: every check up to and
 * including ISSUED_IN_FUTURE, none of subject, action or parameters. For
 * presenters that are not the grant's subject and bind nothing themselves:
 * an enforcement point asking the consume verdict, a revoker proving
 * issuance with the signed grant. Never for admission at the execution
 * boundary. Same returns as og_grant_verify(). */
OG_MUST_CHECK int og_grant_verify_unbound(const og_keyset *ks,
                                          const og_grant_policy *policy,
                                          const char *token, int64_t now_us,
                                          og_validated_grant *out);

/* Fills *g and *in for og_admit() from v ONLY (issuer, grant id, expiry,
 * subject as caller, account, amount, currency) plus operation_id. Both
 * borrow v's buffers: v must outlive them. Returns 0 or OG_EINVAL. */
OG_MUST_CHECK int og_validated_grant_admission(const og_validated_grant *v,
                                               const char *operation_id,
                                               og_grant *g, og_intent *in);

/* ---------------------------------------------------------------------------
 * Secret key files (lib/token/keyfile.c): the one loader of the 32-byte
 * symmetric keys the service holds (the operation-id MAC key below, the
 * redemption sealing key of oncegate/redeem.h). One loader, so that every
 * such key is refused on the same grounds (F5, F6 there).
 * ------------------------------------------------------------------------- */
#define OG_SECRET_KEY_LEN 32        /* bytes of a symmetric key */
#define OG_SECRET_KEY_FILE_MAX 256  /* bytes of its file */

/* The encodings a key file may use: OG_KEY_HEX is 64 hex digits;
 * OG_KEY_HEX_OR_BASE64 also takes base64 of the 32 bytes (standard or
 * URL-safe alphabet, padded or not). */
typedef enum og_key_encoding { OG_KEY_HEX, OG_KEY_HEX_OR_BASE64 } og_key_encoding;

/* Reads the key file at path into key: a regular file (never followed
 * through a symlink) that neither group nor others may read, write or
 * execute (chmod 600), of at most OG_SECRET_KEY_FILE_MAX bytes, holding the
 * key in encoding enc with surrounding white space ignored. Returns 0 and
 * key, OG_EKEY_IO (cannot be opened or read), OG_EKEY_MODE (a wider mode),
 * OG_EKEY_INVALID (a symlink, another file type, too large, or not exactly
 * 32 bytes in enc), OG_EINVAL (NULL). The file's text is wiped before this returns; on
 * an error key is wiped too. */
OG_MUST_CHECK int og_secret_key_file_read(const char *path, og_key_encoding enc,
                                          unsigned char key[OG_SECRET_KEY_LEN]);

/* ---------------------------------------------------------------------------
 * Server-issued operation ids (lib/token/opid.c; docs/design.md,
 * "Server-issued operation ids"). The party that renders the approval form
 * takes a fresh operation id from the issuer, optionally with a MAC over
 * (issuer, grant id, operation id) under a key only the service holds, and
 * admission can require that MAC: an operation id the service did not hand
 * out for this grant is then refused. The MAC is HMAC-SHA-256 over a
 * domain-separated, length-prefixed encoding of the three, written as
 * unpadded base64url.
 * ------------------------------------------------------------------------- */
#define OG_OPID_MAC_LEN 43          /* base64url of 32 bytes */

typedef struct og_opid_key og_opid_key;

/* Writes a fresh operation id, a version 4 UUID in lower case from the
 * system CSPRNG, into out. Returns 0 or OG_EINTERNAL. */
OG_MUST_CHECK int og_operation_id_new(char out[OG_UUID_LEN + 1]);

/* Loads the MAC key file: 32 bytes written as 64 hex digits, surrounding
 * white space ignored. The file must be a regular file (not a symlink) that
 * neither group nor others may read, write or execute (chmod 600). Returns 0
 * and *out (free with og_opid_key_free()), OG_EKEY_IO (cannot be read),
 * OG_EKEY_MODE (group or others have access), OG_EKEY_INVALID (file type
 * or content), OG_EINVAL, OG_ENOMEM. The key lives in
 * guarded memory; the file's text is wiped once read. */
OG_MUST_CHECK int og_opid_key_load_file(const char *path, og_opid_key **out);

/* A key from 32 bytes (tests, tools). 0 and *out, OG_EINVAL or OG_ENOMEM. */
OG_MUST_CHECK int og_opid_key_from_bytes(const unsigned char bytes[32],
                                         og_opid_key **out);

/* Wipes and frees k. NULL is a no-op. */
void og_opid_key_free(og_opid_key *k);

/* Writes the MAC of (issuer, grant_id, operation_id) under k into out.
 * operation_id must be canonical (og_operation_id_canonical()). Pure.
 * Returns 0, or OG_EINVAL for a NULL argument or a non-canonical operation
 * id. */
OG_MUST_CHECK int og_opid_mac(const og_opid_key *k, const char *issuer,
                              const char *grant_id, const char *operation_id,
                              char out[OG_OPID_MAC_LEN + 1]);

/* true when mac is the MAC og_opid_mac() writes for these three under k;
 * the comparison is constant-time. false for anything else, including a
 * NULL argument, a mac of the wrong length or outside the alphabet. */
OG_MUST_CHECK bool og_opid_mac_valid(const og_opid_key *k, const char *issuer,
                                     const char *grant_id,
                                     const char *operation_id,
                                     const char *mac);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_GRANT_H */
