/*
 * fuzz_token.c — libFuzzer target for the grant token parser and verifier
 * (lib/token/, the validator in grant.c included), the code between a
 * presented token and admission.
 *
 * The first byte picks a mode:
 *   'P'  the rest is a claim set (payload JSON). The target signs it with
 *        the TEST key, so the fuzzer reaches every check after the
 *        signature, which it could never reach by forging one;
 *   'B'  the rest is base64url for og__b64url_decode();
 *   'J'  the rest is a JWK for og_keyset_add() and og_signer_load();
 *   any other byte: the whole input is a token for og_grant_verify().
 *
 * The key is RFC 8037 Appendix A's published example key — a TEST key,
 * known to everyone, used here and in tests/fixtures/ only. The clock is
 * fixed at 2027-01-15T08:00:00Z so the seed tokens stay valid forever.
 *
 * Invariants asserted with abort() (the sanitizers catch the rest):
 *   1. og_grant_verify() returns 0 or a grant.* code (or out of memory);
 *      a refusal leaves *out untouched; anything over OG_TOKEN_MAX is
 *      grant.too_large;
 *   2. a token the target signed itself never fails on alg, kid or
 *      signature;
 *   3. an accepted grant's fields pass the store's own input checks, the
 *      admission request built from it is accepted by og__admit_req_build(),
 *      and re-signing its claims gives a token that validates to the same
 *      grant;
 *   4. base64url: whatever decodes re-encodes to the input, byte for byte;
 *   5. a JWK that loads yields a valid kid; a private JWK that loads exports
 *      a public JWK that imports under the same kid.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "token/token_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            abort();                                                           \
    } while (0)

#define NOW INT64_C(1800000000)
#define SEC INT64_C(1000000)
#define TEST_ISSUER "rfc8037-test"
/* RFC 8037 A.1: a TEST key. Never use it for anything real. */
#define TEST_PRIVATE_JWK                                                       \
    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\","                                    \
    "\"d\":\"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A\","                   \
    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}"
#define TEST_PUBLIC_JWK                                                        \
    "{\"kty\":\"OKP\",\"crv\":\"Ed25519\","                                    \
    "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}"

static og_keyset *ks;
static og_signer *signer;
static og_grant_policy policy;
static const og_grant_request std_req = {"agent-17", "credit.apply", "A-1187",
                                         "250.00", "USD"};

static void init_once(void)
{
    if (ks)
        return;
    CHECK(og_keyset_new(&ks) == 0);
    CHECK(og_keyset_add(ks, TEST_ISSUER, TEST_PUBLIC_JWK, NULL) == 0);
    CHECK(og_signer_load(TEST_PRIVATE_JWK, &signer) == 0);
    og_grant_policy_init(&policy, "billing-credits", NULL);
}

static int is_grant_code(int rc)
{
    return rc == 0 || rc == OG_ENOMEM ||
           (rc <= OG_EGRANT_MALFORMED && rc >= OG_EGRANT_BINDING_MISMATCH) ||
           rc == OG_EGRANT_TYPE;
}

/* Invariant 3. */
static void check_accepted(const og_validated_grant *v, int64_t now_us)
{
    og__admit_req ar;
    og_grant g;
    og_intent in;
    og_grant_claims c;
    og_grant_request req;
    og_validated_grant again;
    char *tok = NULL;

    CHECK(og__id_check(v->issuer) == 0 && og__id_check(v->grant_id) == 0);
    CHECK(og__id_check(v->subject) == 0 && og__id_check(v->account) == 0);
    CHECK(og__currency_check(v->currency) == 0);
    CHECK(v->expires_at_us > v->issued_at_us);
    CHECK(og_validated_grant_admission(
              v, "6f1c2a8e-3b4d-4c5e-8f90-123456789abc", &g, &in) == 0);
    CHECK(og__admit_req_build(&g, &in, &ar) == 0);
    CHECK(strcmp(ar.amount, v->amount) == 0); /* canonical already */

    memset(&c, 0, sizeof c);
    c.iss = v->issuer;
    c.jti = v->grant_id;
    c.iat = v->issued_at_us / SEC;
    c.has_nbf = v->not_before_us != v->issued_at_us;
    c.nbf = v->not_before_us / SEC;
    c.exp = v->expires_at_us / SEC;
    c.sub = v->subject;
    c.aud = v->audience;
    c.act = v->action;
    c.prm.account = v->account;
    c.prm.amount = v->amount;
    c.prm.currency = v->currency;
    c.fam = v->family[0] ? v->family : NULL;
    if (strcmp(v->issuer, TEST_ISSUER) != 0)
        return; /* only the test issuer's key can re-sign */
    int rc = og_grant_token_sign(signer, &c, &tok);
    if (rc == OG_ENOMEM)
        return;
    CHECK(rc == 0);
    req = (og_grant_request){v->subject, v->action, v->account, v->amount,
                             v->currency};
    CHECK(og_grant_verify(ks, &policy, tok, &req, now_us, &again) == 0);
    /* An nbf equal to iat is indistinguishable from none; all else equal. */
    CHECK(memcmp(&again, v, sizeof again) == 0);
    free(tok);
}

/* Verifies tok for req at now_us; checks invariant 1 and, on acceptance,
 * invariant 3. Returns the code. */
static int verify(const char *tok, const og_grant_request *req, int64_t now_us)
{
    og_validated_grant out, before;

    memset(&out, 0xA5, sizeof out);
    memcpy(&before, &out, sizeof out);
    int rc = og_grant_verify(ks, &policy, tok, req, now_us, &out);
    CHECK(is_grant_code(rc));
    if (strnlen(tok, OG_TOKEN_MAX + 1) > OG_TOKEN_MAX)
        CHECK(rc == OG_EGRANT_TOO_LARGE);
    if (rc != 0)
        CHECK(memcmp(&out, &before, sizeof out) == 0);
    else
        check_accepted(&out, now_us);
    return rc;
}

static const char *str_member(json_t *o, const char *k, const char *dflt)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

/* Mode 'P': sign the fuzzed claims, then validate them for a request
 * taken from the claims themselves, at their own issue time, so the
 * binding and clock checks pass often and the fuzzer sees acceptance. */
static void fuzz_payload(const char *p, size_t n)
{
    char *tok = NULL;
    int rc = og__jws_sign(signer, p, n, &tok);
    json_t *o, *prm;
    json_error_t err;
    og_grant_request req = std_req;
    int64_t now_us = NOW * SEC;

    if (rc != 0) {
        CHECK(rc == OG_EGRANT_TOO_LARGE || rc == OG_ENOMEM);
        return;
    }
    o = json_loadb(p, n, 0, &err);
    if (json_is_object(o)) {
        json_t *iat = json_object_get(o, "iat");
        prm = json_object_get(o, "prm");
        req.caller = str_member(o, "sub", req.caller);
        req.action = str_member(o, "act", req.action);
        req.account = str_member(prm, "account", req.account);
        req.amount = str_member(prm, "amount", req.amount);
        req.currency = str_member(prm, "currency", req.currency);
        /* now = nbf when there is one, else iat: inside the window. */
        json_t *t = json_object_get(o, "nbf") ? json_object_get(o, "nbf") : iat;
        if (json_is_integer(t) && json_integer_value(t) >= 0 &&
            json_integer_value(t) <= INT64_C(253402300799))
            now_us = json_integer_value(t) * SEC;
    }
    rc = verify(tok, &req, now_us);
    /* Invariant 2. */
    CHECK(rc != OG_EGRANT_UNSUPPORTED_ALG && rc != OG_EGRANT_UNKNOWN_KEY &&
          rc != OG_EGRANT_BAD_SIGNATURE && rc != OG_EGRANT_TOO_LARGE);
    json_decref(o);
    free(tok);
}

/* Mode 'B': invariant 4. */
static void fuzz_b64(const char *p, size_t n)
{
    unsigned char *out = malloc(n + 1);
    char *enc;
    size_t got = 0;

    CHECK(out != NULL);
    if (og__b64url_decode(p, n, out, n, &got) == 0) {
        CHECK(got <= n);
        enc = malloc(OG__B64URL_LEN(got) + 1);
        CHECK(enc != NULL);
        og__b64url_encode(out, got, enc);
        CHECK(strlen(enc) == n && memcmp(enc, p, n) == 0);
        free(enc);
    }
    free(out);
}

/* Mode 'J': invariant 5. */
static void fuzz_jwk(const char *p)
{
    og_keyset *k = NULL;
    og_signer *s = NULL;
    char kid[OG_KID_MAX + 1], kid2[OG_KID_MAX + 1], *pub = NULL;

    CHECK(og_keyset_new(&k) == 0);
    if (og_keyset_add(k, "i", p, kid) == 0)
        CHECK(og__kid_check(kid) == 0 && og_keyset_count(k) == 1);
    og_keyset_free(k);
    if (og_signer_load(p, &s) != 0)
        return;
    CHECK(og__kid_check(og_signer_kid(s)) == 0);
    if (og_signer_public_jwk(s, &pub) == 0) {
        CHECK(og_keyset_new(&k) == 0);
        CHECK(og_keyset_add(k, "i", pub, kid2) == 0);
        CHECK(strcmp(kid2, og_signer_kid(s)) == 0);
        og_keyset_free(k);
        free(pub);
    }
    og_signer_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf;

    /* Twice the token cap: enough to cross every size check. */
    if (size > 2 * OG_TOKEN_MAX)
        return 0;
    init_once();
    /* A heap copy, terminated, so ASan sees any read past the input. */
    if ((buf = malloc(size + 1)) == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';

    if (size >= 1 && buf[0] == 'P')
        fuzz_payload(buf + 1, size - 1);
    else if (size >= 1 && buf[0] == 'B')
        fuzz_b64(buf + 1, size - 1);
    else if (size >= 1 && buf[0] == 'J')
        fuzz_jwk(buf + 1);
    else
        verify(buf, &std_req, NOW * SEC);

    free(buf);
    return 0;
}
