/*
 * jws.c — compact JWS (RFC 7515) with EdDSA over Ed25519 (RFC 8037), and
 * nothing else. Pure.
 *
 * What this accepts is a closed list, not "whatever RFC 7515 allows":
 *   - at most OG_TOKEN_MAX bytes, measured before anything is decoded;
 *   - exactly three parts, each strict unpadded base64url (base64url.c), so
 *     one token has one spelling and nothing trails it;
 *   - a header object with exactly: alg = "EdDSA" (case-sensitive, checked
 *     first, before any key is looked at), kid (required), typ (explicit
 *     typing, RFC 8725 3.11: OG_GRANT_TYP, compared case-insensitively with
 *     or without "application/" as RFC 7515 4.1.9 says; the legacy "JWT" or
 *     no typ is reported to the validator, whose policy decides; any other
 *     type is grant.wrong_type, so a token of another kind never passes as
 *     a grant). crit, jku, jwk, x5u, x5c, b64, zip, cty and every other
 *     member are refused: a header member we do not act on is one we cannot
 *     have checked, and RFC 7515 4.1.11 requires refusing a crit we do not
 *     understand;
 *   - duplicate member names refused (JSON_REJECT_DUPLICATES) in the header
 *     and in the payload, so no two parsers can read different claims out
 *     of one signed text;
 *   - a 64-byte signature, verified over the ASCII "header.payload" exactly
 *     as received.
 * The key is chosen by the verifier (kid within the claimed issuer), never
 * by the token: there is no jwk or jku, and an HMAC "alg" can never meet
 * key bytes, because alg is refused before a key is touched.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "token/token_int.h"

void og__jws_clear(og__jws *j)
{
    if (j) {
        json_decref(j->payload);
        j->payload = NULL;
    }
}

/* Parses JSON text that must be an object: no duplicate names, nothing
 * after it (jansson's default EOF check), no NUL inside strings. */
static json_t *load_object(const unsigned char *buf, size_t len)
{
    json_error_t err;
    json_t *v = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES,
                           &err);

    if (v && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

/* ASCII case-insensitive equality of the n bytes a and the string b. */
static int ascii_ieq(const char *a, size_t n, const char *b)
{
    if (strlen(b) != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char)(y - 'A' + 'a');
        if (x != y)
            return 0;
    }
    return 1;
}

/* typ as a media type (RFC 7515 4.1.9): compared case-insensitively, and
 * "application/" may be left out. 0 and *typ, or OG_EGRANT_TYPE. */
static int classify_typ(const char *t, size_t n, og__jws_typ *typ)
{
    static const char app[] = "application/";

    if (n > sizeof app - 1 && ascii_ieq(t, sizeof app - 1, app)) {
        t += sizeof app - 1;
        n -= sizeof app - 1;
    }
    if (ascii_ieq(t, n, OG_GRANT_TYP)) {
        *typ = OG__TYP_GRANT;
        return 0;
    }
    if (ascii_ieq(t, n, "JWT")) {
        *typ = OG__TYP_LEGACY;
        return 0;
    }
    return OG_EGRANT_TYPE; /* a ticket, an access token, another system's */
}

/* Header members after alg. 0, OG_EGRANT_MALFORMED or OG_EGRANT_TYPE. */
static int check_header(json_t *h, char kid[OG_KID_MAX + 1],
                        og__jws_typ *typ)
{
    const char *key;
    json_t *v;
    int have_kid = 0;

    *typ = OG__TYP_LEGACY; /* no typ: as issued before explicit typing */
    json_object_foreach(h, key, v) {
        if (strcmp(key, "alg") == 0)
            continue; /* already checked */
        if (strcmp(key, "kid") == 0) {
            if (!json_is_string(v) || og__kid_check(json_string_value(v)) != 0)
                return OG_EGRANT_MALFORMED;
            memcpy(kid, json_string_value(v), json_string_length(v) + 1);
            have_kid = 1;
        } else if (strcmp(key, "typ") == 0) {
            int rc;

            if (!json_is_string(v))
                return OG_EGRANT_MALFORMED;
            if ((rc = classify_typ(json_string_value(v), json_string_length(v),
                                   typ)) != 0)
                return rc;
        } else {
            return OG_EGRANT_MALFORMED; /* crit, jwk, jku, x5u, b64, ... */
        }
    }
    return have_kid ? 0 : OG_EGRANT_MALFORMED;
}

int og__jws_decode(const char *token, og__jws *out)
{
    const char *d1, *d2;
    unsigned char *buf = NULL, *hdr, *pay, *sig;
    size_t len, hn, pn, sn, off;
    json_t *h = NULL, *p = NULL;
    json_t *alg;
    og__jws j;
    int rc = OG_EGRANT_MALFORMED;

    if (token == NULL || out == NULL)
        return OG_EINVAL;
    /* 1. Size, before anything else reads the token. */
    len = strnlen(token, OG_TOKEN_MAX + 1);
    if (len > OG_TOKEN_MAX)
        return OG_EGRANT_TOO_LARGE;

    /* 2. Structure: header.payload.signature, each strict base64url. */
    d1 = memchr(token, '.', len);
    d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (d2 == NULL || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)) ||
        d1 == token || d2 == d1 + 1)
        return OG_EGRANT_MALFORMED;
    /* Decoded sizes are below the encoded ones: one buffer of len holds all
     * three parts. */
    if ((buf = malloc(len + 1)) == NULL)
        return OG_ENOMEM;
    hdr = buf;
    if (og__b64url_decode(token, (size_t)(d1 - token), hdr, len, &hn) != 0)
        goto out;
    pay = hdr + hn;
    if (og__b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), pay, len - hn,
                          &pn) != 0)
        goto out;
    sig = pay + pn;
    off = (size_t)(d2 + 1 - token);
    if (og__b64url_decode(d2 + 1, len - off, sig, len - hn - pn, &sn) != 0)
        goto out;

    /* 3. Header; alg before anything else in it. */
    if ((h = load_object(hdr, hn)) == NULL)
        goto out;
    alg = json_object_get(h, "alg");
    if (!json_is_string(alg))
        goto out;
    if (strcmp(json_string_value(alg), "EdDSA") != 0) {
        rc = OG_EGRANT_UNSUPPORTED_ALG;
        goto out;
    }
    memset(&j, 0, sizeof j);
    if ((rc = check_header(h, j.kid, &j.typ)) != 0)
        goto out;
    rc = OG_EGRANT_MALFORMED;
    if (sn != OG__ED25519_SIG)
        goto out;
    memcpy(j.sig, sig, OG__ED25519_SIG);

    /* 4. Payload: an object. Parsed, not trusted: the caller verifies the
     * signature before using anything but the claimed issuer. */
    if ((p = load_object(pay, pn)) == NULL)
        goto out;
    j.payload = p;
    j.signing_input_len = (size_t)(d2 - token);
    *out = j;
    p = NULL;
    rc = 0;
out:
    json_decref(p);
    json_decref(h);
    free(buf);
    return rc;
}

int og__jws_verify(const char *token, const og__jws *j,
                   const unsigned char pk[OG__ED25519_PK])
{
    /* libsodium refuses non-canonical S and small-order R and A, so a valid
     * signature cannot be mauled into a second valid one. */
    return crypto_sign_verify_detached(j->sig, (const unsigned char *)token,
                                       j->signing_input_len, pk) == 0
               ? 0
               : OG_EGRANT_BAD_SIGNATURE;
}

int og__jws_sign(const og_signer *s, const char *payload, size_t len,
                 char **token)
{
    unsigned char sig[OG__ED25519_SIG];
    char *htext = NULL, *t = NULL;
    size_t hl, pl, total;
    json_t *h;
    int rc = OG_ENOMEM;

    h = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "kid", og_signer_kid(s),
                  "typ", OG_GRANT_TYP);
    if (h == NULL || (htext = json_dumps(h, JSON_COMPACT)) == NULL)
        goto out;
    hl = OG__B64URL_LEN(strlen(htext));
    pl = OG__B64URL_LEN(len);
    total = hl + 1 + pl + 1 + OG__B64URL_LEN(OG__ED25519_SIG);
    if (total > OG_TOKEN_MAX) {
        rc = OG_EGRANT_TOO_LARGE; /* verification would refuse it */
        goto out;
    }
    if ((t = malloc(total + 1)) == NULL)
        goto out;
    og__b64url_encode((const unsigned char *)htext, strlen(htext), t);
    t[hl] = '.';
    og__b64url_encode((const unsigned char *)payload, len, t + hl + 1);
    og__signer_sign(s, (const unsigned char *)t, hl + 1 + pl, sig);
    t[hl + 1 + pl] = '.';
    og__b64url_encode(sig, sizeof sig, t + hl + 1 + pl + 1);
    *token = t;
    t = NULL;
    rc = 0;
out:
    free(t);
    free(htext);
    json_decref(h);
    return rc;
}
