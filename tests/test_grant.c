/*
 * test_grant.c — keys, grant tokens and the validator.
 *
 * The refusal table forges every token itself: header and payload JSON
 * written out, signed with the right key unless the case is about the
 * signature, so each row's refusal comes from the check it names and from
 * no other. Every row also proves that a refused grant writes nothing:
 * *out stays untouched, and (refusals_admit_nothing) a handler that admits
 * only validated grants leaves an SQLite store empty.
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
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>
#include <sqlite3.h>

#include "oncegate/store.h"
#include "token/token_int.h"
#include "support.h"

/* A fixed clock: 2027-01-15T08:00:00Z. */
#define NOW INT64_C(1800000000)
#define NOW_US (NOW * INT64_C(1000000))
#define SEC INT64_C(1000000)

#define ISSUER "support-approvals"
#define OTHER_ISSUER "other-issuer"
#define AUDIENCE "billing-credits"
#define OP_ID "6f1c2a8e-3b4d-4c5e-8f90-123456789abc"

/* ===========================================================================
 * Fixture: three configured keys (two of ISSUER: rotation; one of
 * OTHER_ISSUER) and one key nobody configured.
 * ========================================================================= */
typedef struct tkey {
    unsigned char seed[32], pk[32], sk[64];
    char x[44];
    char kid[OG_KID_MAX + 1];
} tkey;

enum { K_A1, K_A2, K_C, K_X, K_COUNT };
static tkey keys[K_COUNT];
static og_keyset *ks;
static og_grant_policy policy;

static void tkey_make(tkey *k, unsigned char fill)
{
    memset(k->seed, fill, sizeof k->seed);
    crypto_sign_seed_keypair(k->pk, k->sk, k->seed);
    og__b64url_encode(k->pk, 32, k->x);
    assert_int_equal(og__jwk_thumbprint(k->pk, k->kid), 0);
}

static char *public_jwk(const tkey *k)
{
    static char buf[256];
    snprintf(buf, sizeof buf,
             "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\",\"kid\":\"%s\"}",
             k->x, k->kid);
    return buf;
}

static int setup(void **state)
{
    if (sodium_init() < 0)
        return -1;
    tkey_make(&keys[K_A1], 0x11);
    tkey_make(&keys[K_A2], 0x22);
    tkey_make(&keys[K_C], 0x33);
    tkey_make(&keys[K_X], 0x44);
    if (og_keyset_new(&ks) != 0 ||
        og_keyset_add(ks, ISSUER, public_jwk(&keys[K_A1]), NULL) != 0 ||
        og_keyset_add(ks, ISSUER, public_jwk(&keys[K_A2]), NULL) != 0 ||
        og_keyset_add(ks, OTHER_ISSUER, public_jwk(&keys[K_C]), NULL) != 0)
        return -1;
    og_grant_policy_init(&policy, AUDIENCE, NULL); /* leeway 30 s, 1 h, 30 s */
    return 0;
}

static int teardown(void **state)
{
    og_keyset_free(ks);
    return 0;
}

/* ===========================================================================
 * Forging tokens
 * ========================================================================= */

/* Replaces every "@A" with A1's kid and "@C" with C's kid. */
static char *subst(const char *in)
{
    static char buf[2][1024];
    static int which;
    char *out = buf[which ^= 1];
    size_t o = 0;

    for (const char *p = in; *p && o < sizeof buf[0] - 64; p++) {
        if (p[0] == '@' && (p[1] == 'A' || p[1] == 'C')) {
            const char *kid = keys[p[1] == 'A' ? K_A1 : K_C].kid;
            memcpy(out + o, kid, strlen(kid));
            o += strlen(kid);
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return out;
}

static char *b64(const void *data, size_t n)
{
    char *s = malloc(OG__B64URL_LEN(n) + 1);
    assert_non_null(s);
    return og__b64url_encode(data, n, s);
}

enum { SIG_ED25519, SIG_NONE, SIG_HS256_PK, SIG_HS256_X };
enum {
    T_NONE,
    T_SWAP_PAYLOAD,  /* payload replaced after signing (tamper_patch) */
    T_FLIP_SIG,      /* one signature character changed */
    T_SIG_NONCANON,  /* last signature char with non-zero trailing bits */
    T_SIG_PLUS,      /* a '+' (standard alphabet) in the signature */
    T_PAD,           /* "=" appended */
    T_NEWLINE,       /* "\n" appended */
    T_SPACE,         /* " " appended */
    T_DOT,           /* ".x" appended: four parts */
    T_TWO_PARTS,     /* signature and its dot removed */
    T_EMPTY_PAYLOAD, /* header..signature */
    T_OVERSIZE,      /* padded to OG_TOKEN_MAX + 1 bytes */
    T_AT_CAP,        /* padded to exactly OG_TOKEN_MAX bytes */
    T_EMPTY,         /* "" */
};

typedef struct gcase {
    const char *name;
    int key;               /* K_*: who signs */
    int sig;               /* SIG_* */
    const char *header;    /* raw header JSON (@A/@C substituted) */
    int64_t iat, exp;      /* offsets from NOW; both 0: -60 and +840 */
    int has_nbf;
    int64_t nbf;
    const char *patch;     /* JSON merged into the claims; null deletes */
    const char *raw;       /* the whole payload text instead */
    int tamper;
    const char *tamper_patch;
    og_grant_request req;  /* NULL members: the default request */
    int64_t now_off_us;
    int want;
} gcase;

static json_t *claims_json(const gcase *c, const char *extra_patch)
{
    int64_t iat = c->iat || c->exp ? c->iat : -60;
    int64_t exp = c->iat || c->exp ? c->exp : 840;
    json_t *o = json_pack(
        "{s:s, s:s, s:I, s:I, s:s, s:s, s:s, s:{s:s, s:s, s:s}}", "iss", ISSUER,
        "jti", "g-41c9-7Qm2xYk3", "iat", (json_int_t)(NOW + iat), "exp",
        (json_int_t)(NOW + exp), "sub", "agent-17", "aud", AUDIENCE, "act",
        "credit.apply", "prm", "account", "A-1187", "amount", "250.00",
        "currency", "USD");
    const char *patches[2] = {c->patch, extra_patch};

    assert_non_null(o);
    if (c->has_nbf)
        json_object_set_new(o, "nbf", json_integer((json_int_t)(NOW + c->nbf)));
    for (int i = 0; i < 2; i++) {
        json_error_t err;
        const char *k;
        json_t *v, *p;
        if (!patches[i])
            continue;
        p = json_loads(patches[i], 0, &err);
        if (!p)
            fail_msg("bad patch in test '%s': %s", c->name, err.text);
        json_object_foreach(p, k, v) {
            if (json_is_null(v))
                json_object_del(o, k);
            else
                json_object_set(o, k, v);
        }
        json_decref(p);
    }
    return o;
}

static char *payload_text(const gcase *c, const char *extra_patch)
{
    json_t *o;
    char *t;

    if (c->raw && !extra_patch)
        return strdup(c->raw);
    o = claims_json(c, extra_patch);
    t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return t;
}

/* Builds the token a case describes. malloc'd. */
static char *forge(const gcase *c)
{
    char hdr_std[256], *hdr, *pay, *h64, *p64, *s64, *tok;
    const tkey *k = &keys[c->key];
    unsigned char sig[64];
    size_t siglen = 0, n;

    snprintf(hdr_std, sizeof hdr_std,
             "{\"alg\":\"EdDSA\",\"kid\":\"%s\",\"typ\":\"" OG_GRANT_TYP "\"}",
             k->kid);
    hdr = c->header ? subst(c->header) : hdr_std;
    pay = payload_text(c, NULL);
    assert_non_null(pay);
    h64 = b64(hdr, strlen(hdr));
    p64 = b64(pay, strlen(pay));
    n = strlen(h64) + 1 + strlen(p64);
    tok = malloc(OG_TOKEN_MAX + 512);
    assert_non_null(tok);
    snprintf(tok, OG_TOKEN_MAX + 512, "%s.%s", h64, p64);

    switch (c->sig) {
    case SIG_ED25519:
        crypto_sign_detached(sig, NULL, (unsigned char *)tok, n, k->sk);
        siglen = 64;
        break;
    case SIG_HS256_PK: /* the classic confusion: the public key as secret */
        crypto_auth_hmacsha256(sig, (unsigned char *)tok, n, k->pk);
        siglen = 32;
        break;
    case SIG_HS256_X: { /* ... or the JWK's x text as secret */
        crypto_auth_hmacsha256_state st;
        crypto_auth_hmacsha256_init(&st, (unsigned char *)k->x, strlen(k->x));
        crypto_auth_hmacsha256_update(&st, (unsigned char *)tok, n);
        crypto_auth_hmacsha256_final(&st, sig);
        siglen = 32;
        break;
    }
    case SIG_NONE:
    default:
        break;
    }
    s64 = b64(sig, siglen);
    snprintf(tok + n, OG_TOKEN_MAX + 512 - n, ".%s", s64);

    size_t len = strlen(tok);
    char *dot2 = strrchr(tok, '.');
    switch (c->tamper) {
    case T_SWAP_PAYLOAD: {
        char *other = payload_text(c, c->tamper_patch);
        char *o64 = b64(other, strlen(other));
        char *t2 = malloc(OG_TOKEN_MAX + 512);
        snprintf(t2, OG_TOKEN_MAX + 512, "%s.%s%s", h64, o64, dot2);
        free(other);
        free(o64);
        free(tok);
        tok = t2;
        break;
    }
    case T_FLIP_SIG:
        dot2[10] = dot2[10] == 'A' ? 'B' : 'A';
        break;
    case T_SIG_NONCANON: {
        /* 64 bytes = 86 chars; the last one carries 2 bits and 4 zero bits.
         * Setting its lowest bit keeps the alphabet, breaks canonicality. */
        static const char alpha[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        int v = (int)(strchr(alpha, tok[len - 1]) - alpha);
        tok[len - 1] = alpha[v | 1];
        break;
    }
    case T_SIG_PLUS: dot2[5] = '+'; break;
    case T_PAD: strcat(tok, "="); break;
    case T_NEWLINE: strcat(tok, "\n"); break;
    case T_SPACE: strcat(tok, " "); break;
    case T_DOT: strcat(tok, ".x"); break;
    case T_TWO_PARTS: *dot2 = '\0'; break;
    case T_EMPTY_PAYLOAD: {
        char *t2 = malloc(OG_TOKEN_MAX + 512);
        snprintf(t2, OG_TOKEN_MAX + 512, "%s.%s", h64, dot2);
        free(tok);
        tok = t2;
        break;
    }
    case T_OVERSIZE:
    case T_AT_CAP: {
        size_t want = c->tamper == T_OVERSIZE ? OG_TOKEN_MAX + 1 : OG_TOKEN_MAX;
        while (len < want)
            tok[len++] = 'A';
        tok[len] = '\0';
        break;
    }
    case T_EMPTY: tok[0] = '\0'; break;
    default: break;
    }
    free(h64);
    free(p64);
    free(s64);
    free(pay);
    return tok;
}

static og_grant_request request_for(const gcase *c)
{
    og_grant_request r = {"agent-17", "credit.apply", "A-1187", "250.00", "USD"};
    if (c->req.caller) r.caller = c->req.caller;
    if (c->req.action) r.action = c->req.action;
    if (c->req.account) r.account = c->req.account;
    if (c->req.amount) r.amount = c->req.amount;
    if (c->req.currency) r.currency = c->req.currency;
    return r;
}

/* ===========================================================================
 * The table: every refusal the issue lists, and the valid edges beside them.
 * ========================================================================= */
#define HDR_A "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"JWT\"}"
/* The default claims as text, for rows that must spell the payload out. */
#define RAW_HEAD "{\"iss\":\"support-approvals\",\"jti\":\"g-1\","          \
                 "\"iat\":1799999940,\"exp\":1800000840,"
#define RAW_PRM "\"prm\":{\"account\":\"A-1187\",\"amount\":\"250.00\","   \
                "\"currency\":\"USD\"}"
#define RAW_TAIL "\"sub\":\"agent-17\",\"aud\":\"billing-credits\","         \
                 "\"act\":\"credit.apply\"," RAW_PRM "}"

static const gcase cases[] = {
    /* --- accepted ------------------------------------------------------ */
    {.name = "valid", .want = 0},
    {.name = "valid: the issuer's second key (rotation)", .key = K_A2, .want = 0},
    {.name = "valid: another issuer with its own key", .key = K_C,
     .patch = "{\"iss\":\"" OTHER_ISSUER "\"}", .want = 0},
    {.name = "valid: no typ (legacy, accepted by default)",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\"}", .want = 0},
    {.name = "valid: typ JWT (legacy, accepted by default)", .header = HDR_A,
     .want = 0},
    {.name = "valid: typ jwt, compared case-insensitively (legacy)",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"jwt\"}",
     .want = 0},
    {.name = "valid: typ in another case",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"OnceGate-Grant+JWT\"}",
     .want = 0},
    {.name = "valid: typ with application/ (RFC 7515 4.1.9)",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"Application/oncegate-grant+jwt\"}",
     .want = 0},
    {.name = "valid: nbf and fam", .has_nbf = 1, .nbf = -10,
     .patch = "{\"fam\":\"fam-7\"}", .want = 0},
    {.name = "valid: request 250.0 = grant 250.00",
     .req = {.amount = "250.0"}, .want = 0},
    {.name = "valid: request 0250 = grant 250.00", .req = {.amount = "0250"},
     .want = 0},
    {.name = "valid: raw payload spelled out", .raw = RAW_HEAD RAW_TAIL,
     .want = 0},
    {.name = "edge: exp + leeway one microsecond ahead", .iat = -60, .exp = 10,
     .now_off_us = 40 * SEC - 1, .want = 0},
    {.name = "edge: nbf - leeway == now", .has_nbf = 1, .nbf = 100,
     .now_off_us = 70 * SEC, .want = 0},
    {.name = "edge: lifetime == maximum", .iat = -60, .exp = 3540, .want = 0},
    {.name = "edge: iat == now + skew", .iat = 30, .exp = 840, .want = 0},

    /* --- alg ------------------------------------------------------------ */
    {.name = "alg none, empty signature", .sig = SIG_NONE,
     .header = "{\"alg\":\"none\",\"typ\":\"JWT\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg none with kid and a valid Ed25519 signature",
     .header = "{\"alg\":\"none\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "HS256 keyed with the public key bytes", .sig = SIG_HS256_PK,
     .header = "{\"alg\":\"HS256\",\"kid\":\"@A\",\"typ\":\"JWT\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "HS256 keyed with the JWK x text", .sig = SIG_HS256_X,
     .header = "{\"alg\":\"HS256\",\"kid\":\"@A\",\"typ\":\"JWT\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg NONE", .sig = SIG_NONE, .header = "{\"alg\":\"NONE\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg eddsa (case)", .header = "{\"alg\":\"eddsa\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg Ed25519", .header = "{\"alg\":\"Ed25519\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg ES256", .header = "{\"alg\":\"ES256\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg RS256", .header = "{\"alg\":\"RS256\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_UNSUPPORTED_ALG},
    {.name = "alg missing", .header = "{\"kid\":\"@A\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "alg not a string", .header = "{\"alg\":[\"EdDSA\"],\"kid\":\"@A\"}",
     .want = OG_EGRANT_MALFORMED},

    /* --- header members ------------------------------------------------- */
    {.name = "crit", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"crit\":[\"exp\"],\"exp\":1}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "crit empty", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"crit\":[]}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "embedded jwk", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"jwk\":{}}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "jku", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"jku\":\"https://x\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "b64 false", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"b64\":false}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "typ other", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"at+jwt\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ of a ticket", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"oncegate-ticket+jwt\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ a prefix of ours", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"oncegate-grant\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ ours with a suffix", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"oncegate-grant+jwtx\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ application/ alone", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"application/\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ empty", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"\"}",
     .want = OG_EGRANT_TYPE},
    {.name = "typ not a string", .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":1}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "kid missing", .header = "{\"alg\":\"EdDSA\",\"typ\":\"JWT\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "kid not a string", .header = "{\"alg\":\"EdDSA\",\"kid\":7}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "duplicate header member",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"kid\":\"@A\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "duplicate alg (second one none)",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"alg\":\"none\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "header with trailing data",
     .header = "{\"alg\":\"EdDSA\",\"kid\":\"@A\"} x", .want = OG_EGRANT_MALFORMED},
    {.name = "header not an object", .header = "[\"EdDSA\"]",
     .want = OG_EGRANT_MALFORMED},

    /* --- keys ----------------------------------------------------------- */
    {.name = "unknown kid", .header = "{\"alg\":\"EdDSA\",\"kid\":\"nope\"}",
     .want = OG_EGRANT_UNKNOWN_KEY},
    {.name = "kid of another issuer's key", .key = K_C,
     .want = OG_EGRANT_UNKNOWN_KEY},
    {.name = "unknown issuer", .patch = "{\"iss\":\"stranger\"}",
     .want = OG_EGRANT_UNKNOWN_ISSUER},
    {.name = "issuer not a string", .patch = "{\"iss\":5}",
     .want = OG_EGRANT_MALFORMED},

    /* --- signature ------------------------------------------------------ */
    {.name = "signed by an unconfigured key under a configured kid",
     .key = K_X, .header = HDR_A, .want = OG_EGRANT_BAD_SIGNATURE},
    {.name = "tampered payload (amount)", .tamper = T_SWAP_PAYLOAD,
     .tamper_patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"25000.00\",\"currency\":\"USD\"}}",
     .want = OG_EGRANT_BAD_SIGNATURE},
    {.name = "tampered payload (exp)", .tamper = T_SWAP_PAYLOAD,
     .tamper_patch = "{\"exp\":1800086400}", .want = OG_EGRANT_BAD_SIGNATURE},
    {.name = "tampered signature", .tamper = T_FLIP_SIG,
     .want = OG_EGRANT_BAD_SIGNATURE},

    /* --- encoding and structure ----------------------------------------- */
    {.name = "signature with non-canonical trailing bits",
     .tamper = T_SIG_NONCANON, .want = OG_EGRANT_MALFORMED},
    {.name = "standard-alphabet '+'", .tamper = T_SIG_PLUS,
     .want = OG_EGRANT_MALFORMED},
    {.name = "padding", .tamper = T_PAD, .want = OG_EGRANT_MALFORMED},
    {.name = "trailing newline", .tamper = T_NEWLINE, .want = OG_EGRANT_MALFORMED},
    {.name = "trailing space", .tamper = T_SPACE, .want = OG_EGRANT_MALFORMED},
    {.name = "four parts", .tamper = T_DOT, .want = OG_EGRANT_MALFORMED},
    {.name = "two parts", .tamper = T_TWO_PARTS, .want = OG_EGRANT_MALFORMED},
    {.name = "empty payload part", .tamper = T_EMPTY_PAYLOAD,
     .want = OG_EGRANT_MALFORMED},
    {.name = "empty token", .tamper = T_EMPTY, .want = OG_EGRANT_MALFORMED},
    {.name = "oversize token", .tamper = T_OVERSIZE,
     .want = OG_EGRANT_TOO_LARGE},
    {.name = "exactly OG_TOKEN_MAX bytes is parsed, not too large",
     .tamper = T_AT_CAP, .want = OG_EGRANT_MALFORMED},
    {.name = "signature too short (alg EdDSA, HMAC-sized)", .sig = SIG_HS256_PK,
     .want = OG_EGRANT_MALFORMED},

    /* --- claims --------------------------------------------------------- */
    {.name = "duplicate claim sub",
     .raw = RAW_HEAD "\"sub\":\"agent-17\"," RAW_TAIL,
     .want = OG_EGRANT_MALFORMED},
    {.name = "duplicate claim exp (later one far away)",
     .raw = RAW_HEAD "\"exp\":1900000000," RAW_TAIL, .want = OG_EGRANT_MALFORMED},
    {.name = "duplicate member in prm",
     .raw = RAW_HEAD "\"sub\":\"agent-17\",\"aud\":\"billing-credits\","
            "\"act\":\"credit.apply\",\"prm\":{\"account\":\"A-1187\","
            "\"amount\":\"250.00\",\"amount\":\"1.00\",\"currency\":\"USD\"}}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "payload not an object", .raw = "[1,2,3]",
     .want = OG_EGRANT_MALFORMED},
    {.name = "payload with trailing data", .raw = RAW_HEAD RAW_TAIL " {}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "payload with a NUL escape",
     .raw = RAW_HEAD "\"sub\":\"agent-17\\u0000x\",\"aud\":\"billing-credits\","
            "\"act\":\"credit.apply\"," RAW_PRM "}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "payload not UTF-8",
     .raw = RAW_HEAD "\"sub\":\"agent-\xff\",\"aud\":\"billing-credits\","
            "\"act\":\"credit.apply\"," RAW_PRM "}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp as a string", .patch = "{\"exp\":\"1800000840\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp as a real", .patch = "{\"exp\":1800000840.0}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp with an exponent", .patch = "{\"exp\":1.8e9}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp negative", .patch = "{\"exp\":-1}", .want = OG_EGRANT_MALFORMED},
    {.name = "exp after 9999", .patch = "{\"exp\":253402300800}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp beyond int64",
     .raw = "{\"iss\":\"support-approvals\",\"jti\":\"g-1\",\"iat\":1799999940,"
            "\"exp\":100000000000000000000000000000," RAW_TAIL,
     .want = OG_EGRANT_MALFORMED},
    {.name = "exp not after iat", .iat = -60, .exp = -60,
     .want = OG_EGRANT_MALFORMED},
    {.name = "iat missing", .patch = "{\"iat\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "exp missing", .patch = "{\"exp\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "jti missing", .patch = "{\"jti\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "sub missing", .patch = "{\"sub\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "act missing", .patch = "{\"act\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "prm missing", .patch = "{\"prm\":null}", .want = OG_EGRANT_MALFORMED},
    {.name = "sub empty", .patch = "{\"sub\":\"\"}", .want = OG_EGRANT_MALFORMED},
    {.name = "sub with a space", .patch = "{\"sub\":\"agent 17\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "jti over 128 bytes",
     .patch = "{\"jti\":\"" "0123456789012345678901234567890123456789"
              "0123456789012345678901234567890123456789"
              "0123456789012345678901234567890123456789" "012345678\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "aud as an array", .patch = "{\"aud\":[\"billing-credits\"]}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "nbf as a string", .patch = "{\"nbf\":\"0\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "fam not a string", .patch = "{\"fam\":1}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "unknown claim", .patch = "{\"scope\":\"all\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "prm not an object", .patch = "{\"prm\":\"A-1187 250 USD\"}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "prm amount as a number",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":250.00,\"currency\":\"USD\"}}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "prm amount with exponent",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"2.5e2\",\"currency\":\"USD\"}}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "prm currency lower case",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"250\",\"currency\":\"usd\"}}",
     .want = OG_EGRANT_MALFORMED},
    /* A grant's amount fits its currency's minor units. */
    {.name = "prm amount finer than USD",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"0.001\",\"currency\":\"USD\"}}",
     .req = {.amount = "0.001"}, .want = OG_EGRANT_MALFORMED},
    {.name = "prm amount finer than JPY",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"1.5\",\"currency\":\"JPY\"}}",
     .req = {.amount = "1.5", .currency = "JPY"}, .want = OG_EGRANT_MALFORMED},
    {.name = "prm currency not in ISO 4217",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"250\",\"currency\":\"ZZZ\"}}",
     .req = {.currency = "ZZZ"}, .want = OG_EGRANT_MALFORMED},
    {.name = "prm extra member",
     .patch = "{\"prm\":{\"account\":\"A-1187\",\"amount\":\"250\",\"currency\":\"USD\",\"memo\":\"x\"}}",
     .want = OG_EGRANT_MALFORMED},
    {.name = "prm without account",
     .patch = "{\"prm\":{\"amount\":\"250\",\"currency\":\"USD\"}}",
     .want = OG_EGRANT_MALFORMED},

    /* --- audience and time ---------------------------------------------- */
    {.name = "wrong audience", .patch = "{\"aud\":\"refunds\"}",
     .want = OG_EGRANT_WRONG_AUDIENCE},
    {.name = "expired", .iat = -600, .exp = -31, .want = OG_EGRANT_EXPIRED},
    {.name = "expired: exp + leeway == now (the store's inequality)",
     .iat = -60, .exp = 10, .now_off_us = 40 * SEC, .want = OG_EGRANT_EXPIRED},
    {.name = "not yet valid", .has_nbf = 1, .nbf = 31,
     .want = OG_EGRANT_NOT_YET_VALID},
    {.name = "not yet valid by one microsecond", .has_nbf = 1, .nbf = 100,
     .now_off_us = 70 * SEC - 1, .want = OG_EGRANT_NOT_YET_VALID},
    {.name = "lifetime over the maximum", .iat = -60, .exp = 3541,
     .want = OG_EGRANT_LIFETIME_EXCEEDED},
    {.name = "issued in the future beyond the skew", .iat = 31, .exp = 900,
     .want = OG_EGRANT_ISSUED_IN_FUTURE},

    /* --- the caller and the binding ------------------------------------- */
    {.name = "wrong subject", .req = {.caller = "agent-99"},
     .want = OG_EGRANT_SUBJECT_MISMATCH},
    {.name = "no authenticated caller", .req = {.caller = ""},
     .want = OG_EGRANT_SUBJECT_MISMATCH},
    {.name = "wrong action", .req = {.action = "credit.reverse"},
     .want = OG_EGRANT_ACTION_MISMATCH},
    {.name = "binding: 250.00 vs 250.01", .req = {.amount = "250.01"},
     .want = OG_EGRANT_BINDING_MISMATCH},
    {.name = "binding: another account", .req = {.account = "A-9999"},
     .want = OG_EGRANT_BINDING_MISMATCH},
    {.name = "binding: another currency", .req = {.currency = "EUR"},
     .want = OG_EGRANT_BINDING_MISMATCH},
    {.name = "binding: currency lower case", .req = {.currency = "usd"},
     .want = OG_EGRANT_BINDING_MISMATCH},
    {.name = "binding: request amount not a decimal", .req = {.amount = "250,00"},
     .want = OG_EGRANT_BINDING_MISMATCH},
};

static void verify_table(void **state)
{
    int failures = 0;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gcase *c = &cases[i];
        char *tok = forge(c);
        og_grant_request req = request_for(c);
        og_validated_grant out, before;
        int rc;

        memset(&out, 0x5a, sizeof out);
        memcpy(&before, &out, sizeof out);
        rc = og_grant_verify(ks, &policy, tok, &req, NOW_US + c->now_off_us,
                             &out);
        if (rc != c->want) {
            print_error("case '%s': got %s, want %s\n", c->name,
                        rc ? og_err_name(rc) : "ok",
                        c->want ? og_err_name(c->want) : "ok");
            failures++;
        } else if (rc != 0 && memcmp(&out, &before, sizeof out) != 0) {
            print_error("case '%s': refused but wrote *out\n", c->name);
            failures++;
        } else if (rc == 0 && (strcmp(out.subject, "agent-17") != 0 ||
                               strcmp(out.amount, "250") != 0 ||
                               strcmp(out.currency, "USD") != 0)) {
            print_error("case '%s': validated fields wrong\n", c->name);
            failures++;
        }
        free(tok);
    }
    assert_int_equal(failures, 0);
}

/* A handler as docs/design.md ("Tests and fuzzing") draws it: validate,
 * then admit using the validated grant only. Every refused row must leave
 * the store empty. */
static int handle(og_store *s, const char *tok, const og_grant_request *req,
                  int64_t now_us, og_admission *res)
{
    og_validated_grant v;
    og_grant g;
    og_intent in;
    int rc = og_grant_verify(ks, &policy, tok, req, now_us, &v);

    if (rc != 0)
        return rc;
    assert_int_equal(og_validated_grant_admission(&v, OP_ID, &g, &in), 0);
    return og_admit(s, &g, &in, res);
}

static long long count_rows(const char *db, const char *table)
{
    sqlite3 *h;
    sqlite3_stmt *st;
    char sql[128];
    long long n = -1;

    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return n;
}

static void refusals_admit_nothing(void **state)
{
    char dir[] = "/tmp/og-grant-XXXXXX", db[64], url[80];
    og_store *s = NULL;
    og_admission res;
    int64_t real_now = 0;

    assert_non_null(mkdtemp(dir));
    snprintf(db, sizeof db, "%s/store.db", dir);
    snprintf(url, sizeof url, "sqlite:%s", db);
    assert_int_equal(og_store_migrate(url, NULL, NULL, NULL), 0);
    assert_int_equal(og_store_open(url, NULL, &s), 0);

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].want == 0)
            continue;
        char *tok = forge(&cases[i]);
        og_grant_request req = request_for(&cases[i]);
        assert_int_equal(handle(s, tok, &req, NOW_US + cases[i].now_off_us,
                                &res),
                         cases[i].want);
        free(tok);
    }
    assert_int_equal(count_rows(db, "grant_consumptions"), 0);
    assert_int_equal(count_rows(db, "operations"), 0);

    /* And a valid grant, issued now on the real clock (the store checks the
     * deadline on its own clock), is admitted with the grant's fields. */
    {
        og_signer *sg = NULL;
        char *priv = NULL, kid[OG_KID_MAX + 1], *tok = NULL;
        og_grant_claims gc = {0};
        og_grant_request req = {"agent-17", "credit.apply", "A-1187", "250.0",
                                "USD"};
        og_operation op;

        assert_int_equal(og__jwk_private_text(keys[K_A1].seed, &priv, kid), 0);
        assert_int_equal(og_signer_load(priv, &sg), 0);
        sodium_memzero(priv, strlen(priv));
        free(priv);
        real_now = (int64_t)time(NULL);
        gc = (og_grant_claims){.iss = ISSUER, .jti = "g-real-1",
                               .iat = real_now - 5, .exp = real_now + 900,
                               .sub = "agent-17", .aud = AUDIENCE,
                               .act = "credit.apply",
                               .prm = {"A-1187", "250.00", "USD"}};
        assert_int_equal(og_grant_token_sign(sg, &gc, &tok), 0);
        assert_int_equal(handle(s, tok, &req, real_now * SEC, &res), 0);
        assert_int_equal(res.outcome, OG_OUTCOME_ADMITTED);
        assert_int_equal(og_operation_get(s, OP_ID, &op), 1);
        assert_string_equal(op.grant_id, "g-real-1");
        assert_string_equal(op.caller_id, "agent-17");
        assert_string_equal(op.amount, "250");
        free(tok);
        og_signer_free(sg);
    }
    assert_int_equal(count_rows(db, "grant_consumptions"), 1);
    assert_int_equal(count_rows(db, "operations"), 1);

    og_store_free(s);
    unlink(db);
    {
        char p[96];
        snprintf(p, sizeof p, "%s-wal", db);
        unlink(p);
        snprintf(p, sizeof p, "%s-shm", db);
        unlink(p);
    }
    rmdir(dir);
}

/* ===========================================================================
 * Admission takes the grant's fields, never the request's
 * ========================================================================= */
static void admission_uses_the_grant_only(void **state)
{
    gcase c = {.name = "valid"};
    char *tok = forge(&c);
    char amount[] = "250.000", account[] = "A-1187";
    og_grant_request req = {"agent-17", "credit.apply", account, amount, "USD"};
    og_validated_grant v;
    og_grant g;
    og_intent in;

    assert_int_equal(og_grant_verify(ks, &policy, tok, &req, NOW_US, &v), 0);
    /* The request's buffers change after validation: nothing follows. */
    strcpy(amount, "999.99");
    strcpy(account, "A-6666");
    assert_int_equal(og_validated_grant_admission(&v, OP_ID, &g, &in), 0);
    assert_ptr_equal(g.issuer, v.issuer);
    assert_ptr_equal(g.grant_id, v.grant_id);
    assert_true(g.expires_at_us == (NOW + 840) * SEC);
    assert_ptr_equal(in.caller_id, v.subject);
    assert_ptr_equal(in.account_id, v.account);
    assert_ptr_equal(in.amount, v.amount);
    assert_ptr_equal(in.currency, v.currency);
    assert_string_equal(in.amount, "250");
    assert_string_equal(in.account_id, "A-1187");
    assert_string_equal(in.operation_id, OP_ID);
    assert_string_equal(v.issuer, ISSUER);
    assert_string_equal(v.kid, keys[K_A1].kid);
    assert_true(v.issued_at_us == (NOW - 60) * SEC);
    assert_true(v.not_before_us == v.issued_at_us);
    assert_string_equal(v.family, "");
    assert_int_equal(og_validated_grant_admission(NULL, OP_ID, &g, &in),
                     OG_EINVAL);
    free(tok);
}

static void verify_arguments_and_policy(void **state)
{
    gcase c = {.name = "valid"};
    char *tok = forge(&c);
    og_grant_request req = request_for(&c);
    og_grant_policy p = policy;
    og_validated_grant v;
    og_timings t;

    assert_int_equal(og_grant_verify(NULL, &policy, tok, &req, NOW_US, &v), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, NULL, tok, &req, NOW_US, &v), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, &policy, NULL, &req, NOW_US, &v), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, &policy, tok, NULL, NOW_US, &v), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, &policy, tok, &req, NOW_US, NULL), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, &policy, tok, &req, -1, &v), OG_EINVAL);
    assert_int_equal(og_grant_verify(ks, &policy, tok, &req, INT64_MAX, &v), OG_EINVAL);
    p.audience = "has space";
    assert_int_equal(og_grant_verify(ks, &p, tok, &req, NOW_US, &v), OG_EINVAL);
    p = policy;
    p.admission_leeway_us = -1;
    assert_int_equal(og_grant_verify(ks, &p, tok, &req, NOW_US, &v), OG_EINVAL);
    p = policy;
    p.max_lifetime_us = 0;
    assert_int_equal(og_grant_verify(ks, &p, tok, &req, NOW_US, &v), OG_EINVAL);

    /* The leeway is the store's: init copies it from the timings. */
    og_timings_default(&t);
    t.admission_leeway_us = 5 * SEC;
    og_grant_policy_init(&p, AUDIENCE, &t);
    assert_true(p.admission_leeway_us == 5 * SEC);
    assert_true(p.max_lifetime_us == 3600 * SEC);
    assert_true(p.issue_skew_us == 30 * SEC);
    /* exp + 5 s, not + 30 s, with that policy. */
    assert_int_equal(og_grant_verify(ks, &p, tok, &req, (NOW + 845) * SEC, &v),
                     OG_EGRANT_EXPIRED);
    assert_int_equal(og_grant_verify(ks, &p, tok, &req, (NOW + 845) * SEC - 1, &v),
                     0);
    free(tok);
}

/* ===========================================================================
 * Signing
 * ========================================================================= */
static og_signer *signer_for(const tkey *k)
{
    og_signer *s = NULL;
    char *priv = NULL, kid[OG_KID_MAX + 1];

    assert_int_equal(og__jwk_private_text(k->seed, &priv, kid), 0);
    assert_int_equal(og_signer_load(priv, &s), 0);
    sodium_memzero(priv, strlen(priv));
    free(priv);
    return s;
}

static void sign_round_trip(void **state)
{
    og_signer *s = signer_for(&keys[K_A2]);
    char id[OG_GRANT_ID_LEN + 1], *tok = NULL;
    og_grant_claims gc = {.iss = ISSUER, .iat = NOW - 1, .has_nbf = 1,
                          .nbf = NOW, .exp = NOW + 600, .sub = "agent-17",
                          .aud = AUDIENCE, .act = "credit.apply",
                          .prm = {"A-1187", "0250.50", "USD"},
                          .fam = "family-1"};
    og_grant_request req = {"agent-17", "credit.apply", "A-1187", "250.5", "USD"};
    og_validated_grant v;
    og__jws j;

    assert_int_equal(og_grant_new_id(id), 0);
    gc.jti = id;
    assert_string_equal(og_signer_kid(s), keys[K_A2].kid);
    assert_int_equal(og_grant_token_sign(s, &gc, &tok), 0);
    assert_true(strlen(tok) <= OG_TOKEN_MAX);
    assert_int_equal(og_grant_verify(ks, &policy, tok, &req, NOW_US, &v), 0);
    assert_string_equal(v.grant_id, id);
    assert_string_equal(v.amount, "250.5");
    assert_string_equal(v.family, "family-1");
    assert_string_equal(v.kid, keys[K_A2].kid);
    assert_true(v.not_before_us == NOW * SEC);
    assert_true(v.expires_at_us == (NOW + 600) * SEC);

    /* The header is exactly what the format says. */
    memset(&j, 0, sizeof j);
    assert_int_equal(og__jws_decode(tok, &j), 0);
    assert_string_equal(j.kid, keys[K_A2].kid);
    {
        json_t *amount = json_object_get(json_object_get(j.payload, "prm"), "amount");
        assert_true(json_is_string(amount));
        assert_string_equal(json_string_value(amount), "250.5"); /* canonical */
    }
    og__jws_clear(&j);
    {
        char hdr[128];
        size_t n;
        const char *dot = strchr(tok, '.');
        assert_int_equal(og__b64url_decode(tok, (size_t)(dot - tok),
                                           (unsigned char *)hdr, sizeof hdr - 1, &n), 0);
        hdr[n] = '\0';
        char want[128];
        snprintf(want, sizeof want,
                 "{\"alg\":\"EdDSA\",\"kid\":\"%s\",\"typ\":\"" OG_GRANT_TYP
                 "\"}",
                 keys[K_A2].kid);
        assert_string_equal(hdr, want);
    }
    free(tok);

    /* What the validator would refuse as malformed is never signed. */
    static const struct {
        const char *what;
        og_grant_claims c;
    } bad[] = {
        {"currency lower case", {.iss = ISSUER, .jti = "g", .iat = NOW, .exp = NOW + 1,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1", "usd"}}},
        {"amount exponent", {.iss = ISSUER, .jti = "g", .iat = NOW, .exp = NOW + 1,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1e5", "USD"}}},
        {"sub missing", {.iss = ISSUER, .jti = "g", .iat = NOW, .exp = NOW + 1,
          .aud = "a", .act = "x", .prm = {"A", "1", "USD"}}},
        {"exp == iat", {.iss = ISSUER, .jti = "g", .iat = NOW, .exp = NOW,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1", "USD"}}},
        {"iss with a space", {.iss = "a b", .jti = "g", .iat = NOW, .exp = NOW + 1,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1", "USD"}}},
        {"negative iat", {.iss = ISSUER, .jti = "g", .iat = -5, .exp = NOW,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1", "USD"}}},
        {"fam empty", {.iss = ISSUER, .jti = "g", .iat = NOW, .exp = NOW + 1,
          .sub = "s", .aud = "a", .act = "x", .prm = {"A", "1", "USD"}, .fam = ""}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *t = NULL;
        int rc = og_grant_token_sign(s, &bad[i].c, &t);
        if (rc != OG_EGRANT_MALFORMED)
            fail_msg("signing '%s': got %s", bad[i].what, og_err_name(rc));
        assert_null(t);
    }
    /* An amount finer than its currency is never signed, and the issuer
     * is told why; whole yen and a cent are. */
    {
        og_grant_claims fine = {.iss = ISSUER, .jti = "g", .iat = NOW,
                                .exp = NOW + 1, .sub = "s", .aud = "a",
                                .act = "x", .prm = {"A", "0.001", "USD"}};
        char *t = NULL;

        assert_int_equal(og_grant_token_sign(s, &fine, &t),
                         OG_EAMOUNT_MINOR_UNITS);
        assert_null(t);
        fine.prm = (og_grant_params){"A", "1.5", "JPY"};
        assert_int_equal(og_grant_token_sign(s, &fine, &t),
                         OG_EAMOUNT_MINOR_UNITS);
        assert_null(t);
        fine.prm = (og_grant_params){"A", "15", "JPY"};
        assert_int_equal(og_grant_token_sign(s, &fine, &t), 0);
        free(t);
        t = NULL;
        fine.prm = (og_grant_params){"A", "0.01", "USD"};
        assert_int_equal(og_grant_token_sign(s, &fine, &t), 0);
        free(t);
    }
    assert_int_equal(og_grant_token_sign(NULL, &gc, &tok), OG_EINVAL);
    og_signer_free(s);
    og_signer_free(NULL);
}

/* Grants are typed explicitly. A legacy grant (typ "JWT", any
 * case, or none) passes only while the policy accepts legacy types (the
 * rollout, docs/design.md "Explicit token type"); with it off, it is
 * grant.wrong_type and admits nothing, while oncegate-grant+jwt passes
 * either way. Another type never passes. */
static void legacy_typ_follows_the_policy(void **state)
{
    static const struct {
        const char *header;
        int legacy_on, legacy_off;
    } rows[] = {
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"" OG_GRANT_TYP "\"}", 0, 0},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"ONCEGATE-GRANT+JWT\"}", 0,
         0},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"JWT\"}", 0,
         OG_EGRANT_TYPE},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"jwt\"}", 0,
         OG_EGRANT_TYPE},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"application/jwt\"}", 0,
         OG_EGRANT_TYPE},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\"}", 0, OG_EGRANT_TYPE},
        {"{\"alg\":\"EdDSA\",\"kid\":\"@A\",\"typ\":\"at+jwt\"}",
         OG_EGRANT_TYPE, OG_EGRANT_TYPE},
    };
    og_grant_policy off = policy;
    og_validated_grant v;

    (void)state;
    assert_true(policy.accept_legacy_typ); /* og_grant_policy_init's default */
    off.accept_legacy_typ = false;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gcase c = {.name = "typ", .header = rows[i].header};
        char *tok = forge(&c);
        og_grant_request req = request_for(&c);
        int on = og_grant_verify(ks, &policy, tok, &req, NOW_US, &v);
        int no = og_grant_verify(ks, &off, tok, &req, NOW_US, &v);

        if (on != rows[i].legacy_on || no != rows[i].legacy_off)
            fail_msg("row %zu %s: legacy on %s, off %s", i, rows[i].header,
                     og_err_name(on), og_err_name(no));
        /* The unbound verdict (consume, revoke) follows the same rule. */
        assert_int_equal(og_grant_verify_unbound(ks, &off, tok, NOW_US, &v),
                         rows[i].legacy_off);
        free(tok);
    }
}

static void grant_ids_are_128_random_bits(void **state)
{
    char a[OG_GRANT_ID_LEN + 1], b[OG_GRANT_ID_LEN + 1];
    unsigned char raw[32];
    size_t n;

    for (int i = 0; i < 1000; i++) {
        assert_int_equal(og_grant_new_id(a), 0);
        assert_int_equal(og_grant_new_id(b), 0);
        assert_int_equal(strlen(a), OG_GRANT_ID_LEN);
        assert_string_not_equal(a, b);
        assert_int_equal(og__b64url_decode(a, strlen(a), raw, sizeof raw, &n), 0);
        assert_int_equal(n, 16);
        assert_int_equal(og__id_check(a), 0); /* usable as a store grant id */
    }
}

/* ===========================================================================
 * base64url
 * ========================================================================= */
static void base64url_table(void **state)
{
    static const struct {
        const char *in;
        int ok;
        size_t n;
        const char *bytes;
    } b64cases[] = {
        {"", 1, 0, ""},
        {"AA", 1, 1, "\x00"},
        {"AAA", 1, 2, "\x00\x00"},
        {"AAAA", 1, 3, "\x00\x00\x00"},
        {"-_-_", 1, 3, "\xfb\xff\xbf"},
        {"_w", 1, 1, "\xff"},
        {"Zm9v", 1, 3, "foo"},
        {"Zm9vYg", 1, 4, "foob"},
        {"A", 0, 0, NULL},          /* 6 bits: no byte */
        {"AAAAA", 0, 0, NULL},
        {"AB", 0, 0, NULL},         /* trailing bits set */
        {"_x", 0, 0, NULL},
        {"AAB", 0, 0, NULL},
        {"Zm9vYh", 0, 0, NULL},
        {"AA==", 0, 0, NULL},       /* padding */
        {"AA=", 0, 0, NULL},
        {"AAA=", 0, 0, NULL},
        {"A+/A", 0, 0, NULL},       /* standard alphabet */
        {"AA AA", 0, 0, NULL},
        {" AAAA", 0, 0, NULL},
        {"AAAA\n", 0, 0, NULL},
        {"AAAA.", 0, 0, NULL},
        {"AA\x80", 0, 0, NULL},
    };
    for (size_t i = 0; i < sizeof b64cases / sizeof b64cases[0]; i++) {
        unsigned char out[16];
        size_t n = 99;
        int rc = og__b64url_decode(b64cases[i].in, strlen(b64cases[i].in), out,
                                   sizeof out, &n);
        if ((rc == 0) != b64cases[i].ok)
            fail_msg("base64url '%s': got %d", b64cases[i].in, rc);
        if (b64cases[i].ok) {
            assert_int_equal(n, b64cases[i].n);
            assert_memory_equal(out, b64cases[i].bytes, n);
        }
    }
    /* Too small an output buffer is a refusal, not an overrun. */
    {
        unsigned char out[2];
        size_t n;
        assert_int_equal(og__b64url_decode("AAAA", 4, out, sizeof out, &n), -1);
    }
    /* Round trip of every length up to 200 bytes. */
    for (size_t len = 0; len <= 200; len++) {
        unsigned char in[200], back[200];
        char enc[OG__B64URL_LEN(200) + 1];
        size_t n;
        randombytes_buf(in, len);
        og__b64url_encode(in, len, enc);
        assert_int_equal(strlen(enc), OG__B64URL_LEN(len));
        assert_int_equal(og__b64url_decode(enc, strlen(enc), back, sizeof back, &n), 0);
        assert_int_equal(n, len);
        assert_memory_equal(in, back, len);
    }
}

/* ===========================================================================
 * JWKs: RFC 8037 Appendix A vectors, import and export, refusals
 * ========================================================================= */
#define RFC_D "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
#define RFC_X "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
#define RFC_KID "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k" /* A.3 */
#define RFC_INPUT "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc"
#define RFC_SIG "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"

static void rfc8037_vectors(void **state)
{
    og_keyset *k = NULL, *k2 = NULL;
    og_signer *s = NULL;
    char kid[OG_KID_MAX + 1], kid2[OG_KID_MAX + 1], *pub = NULL;
    unsigned char sig[64];
    char sig64[OG__B64URL_LEN(64) + 1];
    unsigned char pk[32];

    assert_int_equal(og_keyset_new(&k), 0);
    /* A.2 public key, no kid: the kid is the A.3 thumbprint. */
    assert_int_equal(og_keyset_add(k, "rfc8037",
                                   "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}",
                                   kid), 0);
    assert_string_equal(kid, RFC_KID);
    /* A.1 private key; A.4 signature. */
    assert_int_equal(og_signer_load("{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" RFC_D
                                    "\",\"x\":\"" RFC_X "\"}", &s), 0);
    assert_string_equal(og_signer_kid(s), RFC_KID);
    og__signer_sign(s, (const unsigned char *)RFC_INPUT, strlen(RFC_INPUT), sig);
    og__b64url_encode(sig, 64, sig64);
    assert_string_equal(sig64, RFC_SIG);
    assert_int_equal(og__keyset_find(k, "rfc8037", RFC_KID, pk), 0);
    assert_int_equal(crypto_sign_verify_detached(sig, (const unsigned char *)RFC_INPUT,
                                                 strlen(RFC_INPUT), pk), 0);

    /* Export, re-import: the same key under the same kid, no "d". */
    assert_int_equal(og_signer_public_jwk(s, &pub), 0);
    assert_null(strstr(pub, "\"d\""));
    assert_non_null(strstr(pub, "\"alg\": \"EdDSA\""));
    assert_non_null(strstr(pub, "\"use\": \"sig\""));
    assert_int_equal(og_keyset_new(&k2), 0);
    assert_int_equal(og_keyset_add(k2, "rfc8037", pub, kid2), 0);
    assert_string_equal(kid2, RFC_KID);
    assert_int_equal(og_keyset_count(k2), 1);
    free(pub);
    og_signer_free(s);
    og_keyset_free(k);
    og_keyset_free(k2);
}

static void jwk_refusals(void **state)
{
    static const struct {
        const char *jwk;
        int want;
    } pub[] = {
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}", 0},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"ext\":true}", 0},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"d\":\"" RFC_D "\"}",
         OG_EKEY_INVALID}, /* a private key in a verification set */
        {"{\"kty\":\"RSA\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"" RFC_X "\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed448\",\"x\":\"" RFC_X "\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"x\":\"" RFC_X "\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "A\"}", OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURp\"}",
         OG_EKEY_INVALID}, /* non-canonical trailing bits */
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo=\"}",
         OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}",
         OG_EKEY_INVALID}, /* the identity: small order */
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}",
         OG_EKEY_INVALID}, /* small order */
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"alg\":\"HS256\"}",
         OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"use\":\"enc\"}",
         OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"kid\":\"a.b\"}",
         OG_EKEY_INVALID}, /* a kid names files */
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"kid\":\"\"}",
         OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\",\"kid\":5}",
         OG_EKEY_INVALID},
        {"{\"kty\":\"OKP\",\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}",
         OG_EKEY_INVALID}, /* duplicate member */
        {"{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"} {}", OG_EKEY_INVALID},
        {"[]", OG_EKEY_INVALID},
        {"", OG_EKEY_INVALID},
        {NULL, OG_EKEY_INVALID},
    };
    for (size_t i = 0; i < sizeof pub / sizeof pub[0]; i++) {
        og_keyset *k = NULL;
        char kid[OG_KID_MAX + 1] = "untouched";
        assert_int_equal(og_keyset_new(&k), 0);
        int rc = og_keyset_add(k, "iss", pub[i].jwk, kid);
        if (rc != pub[i].want)
            fail_msg("public JWK #%zu: got %s", i, og_err_name(rc));
        assert_int_equal(og_keyset_count(k), rc == 0 ? 1 : 0);
        if (rc != 0)
            assert_string_equal(kid, "untouched");
        og_keyset_free(k);
    }

    /* Duplicates and issuers. */
    {
        og_keyset *k = NULL;
        const char *j = "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}";
        assert_int_equal(og_keyset_new(&k), 0);
        assert_int_equal(og_keyset_add(k, "iss", j, NULL), 0);
        assert_int_equal(og_keyset_add(k, "iss", j, NULL), OG_EKEY_DUPLICATE);
        assert_int_equal(og_keyset_add(k, "iss2", j, NULL), 0); /* another issuer */
        assert_int_equal(og_keyset_add(k, "has space", j, NULL), OG_EISSUER);
        assert_int_equal(og_keyset_add(k, NULL, j, NULL), OG_EISSUER);
        assert_int_equal(og_keyset_count(k), 2);
        og_keyset_free(k);
        og_keyset_free(NULL);
    }

    static const char *const priv[] = {
        /* x is not d's public key */
        "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" RFC_D "\",\"x\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}",
        "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" RFC_X "\"}", /* no d */
        "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" RFC_D "AA\",\"x\":\"" RFC_X "\"}",
        "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" RFC_D "\"}", /* no x */
        "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"d\":\"" RFC_D "\",\"d\":\"" RFC_D "\",\"x\":\"" RFC_X "\"}",
        "not json",
    };
    for (size_t i = 0; i < sizeof priv / sizeof priv[0]; i++) {
        og_signer *s = (og_signer *)0x1;
        int rc = og_signer_load(priv[i], &s);
        if (rc != OG_EKEY_INVALID)
            fail_msg("private JWK #%zu: got %s", i, og_err_name(rc));
        assert_ptr_equal(s, (og_signer *)0x1); /* untouched */
    }
}

/* ===========================================================================
 * Key files
 * ========================================================================= */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    static char buf[2][8192];
    static int which;
    char *b = buf[which ^= 1];
    size_t n;

    assert_non_null(f);
    n = fread(b, 1, sizeof buf[0] - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static void keygen_files_and_rotation(void **state)
{
    char dir[] = "/tmp/og-keys-XXXXXX";
    og_keygen_result r1, r2;
    og_signer *s1 = NULL, *s2 = NULL;
    og_keyset *k = NULL;
    struct stat st;
    size_t added = 0;
    mode_t old = umask(022);

    assert_non_null(mkdtemp(dir));
    assert_int_equal(og_keygen("approvals.example", dir, &r1), 0);
    assert_int_equal(og_keygen("approvals.example", dir, &r2), 0); /* rotation */
    assert_string_not_equal(r1.kid, r2.kid);
    assert_int_equal(strlen(r1.kid), 43);

    assert_int_equal(stat(r1.private_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(stat(r1.public_path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_non_null(strstr(r1.private_path, "/approvals.example."));
    assert_non_null(strstr(r1.private_path, r1.kid));
    assert_non_null(strstr(read_all(r1.private_path), "\"d\""));
    assert_null(strstr(read_all(r1.public_path), "\"d\""));

    /* The verifier loads the directory: issuer from the names, both keys. */
    assert_int_equal(og_keyset_new(&k), 0);
    assert_int_equal(og_keyset_load_dir(k, dir, &added), 0);
    assert_int_equal(added, 2);
    assert_int_equal(og_signer_load_file(r1.private_path, &s1), 0);
    assert_int_equal(og_signer_load_file(r2.private_path, &s2), 0);
    assert_string_equal(og_signer_kid(s1), r1.kid);

    og_grant_claims gc = {.iss = "approvals.example", .jti = "g-1", .iat = NOW,
                          .exp = NOW + 60, .sub = "agent-17", .aud = AUDIENCE,
                          .act = "credit.apply", .prm = {"A-1", "1", "USD"}};
    og_grant_request req = {"agent-17", "credit.apply", "A-1", "1.00", "USD"};
    og_validated_grant v;
    char *t1 = NULL, *t2 = NULL;
    assert_int_equal(og_grant_token_sign(s1, &gc, &t1), 0);
    assert_int_equal(og_grant_token_sign(s2, &gc, &t2), 0);
    assert_int_equal(og_grant_verify(k, &policy, t1, &req, NOW_US, &v), 0);
    assert_string_equal(v.kid, r1.kid);
    assert_int_equal(og_grant_verify(k, &policy, t2, &req, NOW_US, &v), 0);
    assert_string_equal(v.kid, r2.kid);
    /* The fixture keyset does not know this issuer. */
    assert_int_equal(og_grant_verify(ks, &policy, t1, &req, NOW_US, &v),
                     OG_EGRANT_UNKNOWN_ISSUER);
    free(t1);
    free(t2);
    og_signer_free(s1);
    og_signer_free(s2);
    og_keyset_free(k);

    /* A public key file whose name and kid disagree fails the whole load,
     * and the keyset is as before (all or nothing). */
    {
        char bad[OG_PATH_MAX];
        FILE *f;
        assert_int_equal(og_keyset_new(&k), 0);
        assert_int_equal(og_keyset_add(k, "x", public_jwk(&keys[K_A1]), NULL), 0);
        snprintf(bad, sizeof bad, "%s/approvals.example.wrongkid.public.jwk", dir);
        f = fopen(bad, "w");
        assert_non_null(f);
        fputs(public_jwk(&keys[K_X]), f);
        fclose(f);
        added = 77;
        assert_int_equal(og_keyset_load_dir(k, dir, &added), OG_EKEY_INVALID);
        assert_int_equal(added, 77);
        assert_int_equal(og_keyset_count(k), 1);
        unlink(bad);
        /* A private key renamed as public is refused (K1). */
        snprintf(bad, sizeof bad, "%s/approvals.example.%s.public.jwk", dir,
                 keys[K_X].kid);
        {
            char *priv = NULL, kid[OG_KID_MAX + 1];
            assert_int_equal(og__jwk_private_text(keys[K_X].seed, &priv, kid), 0);
            f = fopen(bad, "w");
            fputs(priv, f);
            fclose(f);
            sodium_memzero(priv, strlen(priv));
            free(priv);
        }
        assert_int_equal(og_keyset_load_dir(k, dir, NULL), OG_EKEY_INVALID);
        assert_int_equal(og_keyset_count(k), 1);
        unlink(bad);
        assert_int_equal(og_keyset_load_dir(k, "/nonexistent/og", NULL), OG_EKEY_IO);
        assert_int_equal(og_keyset_add_file(k, "x", "/nonexistent/og.jwk"), OG_EKEY_IO);
        og_keyset_free(k);
    }
    umask(old);
    t_rm_dir_files(dir);
}

static void keygen_never_overwrites(void **state)
{
    char dir[] = "/tmp/og-keys-XXXXXX", before[8192];
    unsigned char seed[32];
    og_keygen_result r, r2;
    struct stat st;

    memset(seed, 0x5e, sizeof seed);
    assert_non_null(mkdtemp(dir));
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r), 0);
    strcpy(before, read_all(r.private_path));

    /* The same key again: the same names. Refused; nothing changed. */
    memset(&r2, 0x5a, sizeof r2);
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r2), OG_EKEY_EXISTS);
    assert_string_equal(read_all(r.private_path), before);
    assert_int_equal(stat(r.private_path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    /* Only the public file exists: still refused, and the private file this
     * call created is removed again. */
    assert_int_equal(unlink(r.private_path), 0);
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r2), OG_EKEY_EXISTS);
    assert_int_equal(stat(r.private_path, &st), -1);

    /* A symlink where the private file would go is not written through. */
    assert_int_equal(unlink(r.public_path), 0);
    assert_int_equal(symlink("/tmp/og-should-not-exist", r.private_path), 0);
    assert_int_equal(og__keygen_seed("iss", dir, seed, &r2), OG_EKEY_EXISTS);
    assert_int_equal(stat("/tmp/og-should-not-exist", &st), -1);
    unlink(r.private_path);

    /* Issuers that cannot name a file, and directories that are not there. */
    static const char *const bad[] = {"", ".hidden", "a/b", "../up", "a b",
                                      "caf\xc3\xa9", "https://x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(og__keygen_seed(bad[i], dir, seed, &r2), OG_EISSUER);
    assert_int_equal(og__keygen_seed(NULL, dir, seed, &r2), OG_EISSUER);
    assert_int_equal(og_keygen("iss", "/nonexistent/og", &r2), OG_EKEY_IO);
    assert_int_equal(og_keygen("iss", "/dev/null", &r2), OG_EKEY_IO);
    t_rm_dir_files(dir);
}

/* ===========================================================================
 * The committed TEST key (tests/fixtures/, RFC 8037 Appendix A) and the fuzz
 * seed tokens signed with it: the seeds must keep meaning what their names
 * say, or the fuzzer starts from nowhere.
 * ========================================================================= */
static void fixture_key_and_fuzz_seeds(void **state)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char dir[OG_PATH_MAX], path[OG_PATH_MAX + 256];
    og_keyset *k = NULL;
    og_signer *s = NULL;
    size_t added = 0;
    static const struct {
        const char *seed;
        int want;
    } seeds[] = {
        {"token_valid", 0},
        {"token_valid_nbf_fam", 0},
        {"token_valid_other_binding", OG_EGRANT_BINDING_MISMATCH},
        {"token_alg_none", OG_EGRANT_UNSUPPORTED_ALG},
        {"token_hs256_pubkey", OG_EGRANT_UNSUPPORTED_ALG},
        {"token_crit", OG_EGRANT_MALFORMED},
        {"token_typ_grant", 0},
        {"token_typ_other", OG_EGRANT_TYPE},
    };

    if (root == NULL)
        skip(); /* run outside meson */
    snprintf(dir, sizeof dir, "%s/tests/fixtures", root);
    assert_int_equal(og_keyset_new(&k), 0);
    assert_int_equal(og_keyset_load_dir(k, dir, &added), 0);
    assert_int_equal(added, 1); /* the private file is skipped */
    snprintf(path, sizeof path,
             "%s/rfc8037-test." RFC_KID OG_KEY_PRIVATE_SUFFIX, dir);
    /* A checkout gives the committed file its default mode: a signing key
     * others may read, refused as one; a 0600 copy loads. */
    {
        struct stat st;
        char copy[] = "/tmp/og-fixture-XXXXXX";
        const char *text = read_all(path);
        int fd;

        assert_int_equal(stat(path, &st), 0);
        if (st.st_mode & 077)
            assert_int_equal(og_signer_load_file(path, &s), OG_EKEY_MODE);
        assert_true((fd = mkstemp(copy)) >= 0); /* 0600 */
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        assert_int_equal(og_signer_load_file(copy, &s), 0);
        unlink(copy);
    }
    assert_string_equal(og_signer_kid(s), RFC_KID);
    og_signer_free(s);

    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        og_grant_request req = {"agent-17", "credit.apply", "A-1187", "250.00",
                                "USD"};
        og_validated_grant v;
        snprintf(path, sizeof path, "%s/fuzz/corpus/token/%s", root,
                 seeds[i].seed);
        int rc = og_grant_verify(k, &policy, read_all(path), &req, NOW_US, &v);
        if (rc != seeds[i].want)
            fail_msg("seed %s: got %s", seeds[i].seed, og_err_name(rc));
    }
    og_keyset_free(k);
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(verify_table),
        cmocka_unit_test(refusals_admit_nothing),
        cmocka_unit_test(admission_uses_the_grant_only),
        cmocka_unit_test(verify_arguments_and_policy),
        cmocka_unit_test(sign_round_trip),
        cmocka_unit_test(legacy_typ_follows_the_policy),
        cmocka_unit_test(grant_ids_are_128_random_bits),
        cmocka_unit_test(base64url_table),
        cmocka_unit_test(rfc8037_vectors),
        cmocka_unit_test(jwk_refusals),
        cmocka_unit_test(keygen_files_and_rotation),
        cmocka_unit_test(keygen_never_overwrites),
        cmocka_unit_test(fixture_key_and_fuzz_seeds),
    };
    return t_run_tests("grant", tests, setup, teardown);
}
