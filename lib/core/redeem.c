/*
 * redeem.c — the pure part of redeeming an external single-use token
 * (docs/design.md, "Redeeming an external single-use token"): what a token
 * exchange's answer means, how a result is sealed
 * for the store, and the decisions of the catch-up loop. No I/O, no clock:
 * time, randomness (the nonce) and what the store holds arrive as
 * arguments. lib/exec/redeem.c runs the loop; lib/provider/client.c sends
 * the exchange.
 *
 * The decisions, in the order og_redeem meets them:
 *
 *   look at the key's point ──> own, same code ───────────> RECOVERED
 *        │ absent               own, other code ──────────> KEY_REUSED
 *        v
 *   exchange ──> SUCCEEDED ──> seal, put ─────────────────> REDEEMED
 *        │       REJECTED ────────────────────────────────> REJECTED
 *        │       ALREADY_USED, UNKNOWN (sent): catch up until the bound
 *        │       UNKNOWN (connect_failed): one look, no wait
 *        v
 *   look (key's point, else the code elsewhere), back off, look again:
 *        own, same code ──> CAUGHT_UP      own, other code ──> KEY_REUSED
 *        code under another key ──> CODE_SPENT
 *        absent at the bound ──> ALREADY_USED: LOST; UNKNOWN: UNKNOWN
 *
 * Invariants:
 *   RD1 Nothing here turns "not known" into "absent": a look that failed
 *       is the caller's to report (lib/exec/redeem.c), never a decision.
 *   RD2 An exchange is never repeated: no decision leads back to the
 *       provider. After ALREADY_USED or an unknown answer the code may be
 *       spent by this very operation; only a recovery point can tell.
 *   RD3 A sealed result is bound to its record: the associated data is
 *       the caller, the idempotency key and the code's hash, so a sealed
 *       value copied to another row (another caller, key or code) does not
 *       open.
 *   RD4 The classification reads only status, transport and the body's
 *       shape; reasons are fixed strings, never the provider's text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "core/core_int.h"

/* ===========================================================================
 * What an exchange's answer means (RFC 6749 5.1, 5.2)
 * ========================================================================= */

static const char *const xc_names[] = {
#define X(name, text) text,
    OG_EXCHANGE_CLASS_MAP(X)
#undef X
};

static const char *const ro_names[] = {
#define X(name, text) text,
    OG_REDEEM_OUTCOME_MAP(X)
#undef X
};

/* names[i], or "?" when i is not below n. */
static const char *name_of(const char *const *names, size_t n, unsigned i)
{
    return i < n ? names[i] : "?";
}

const char *og_exchange_class_name(og_exchange_class c)
{
    return name_of(xc_names, sizeof xc_names / sizeof xc_names[0],
                    (unsigned)c);
}

const char *og_redeem_outcome_name(og_redeem_outcome o)
{
    return name_of(ro_names, sizeof ro_names / sizeof ro_names[0],
                    (unsigned)o);
}

/* The error codes RFC 6749 5.2 uses for a request refused as such: the
 * code was not exchanged. */
static const char *const rejections[] = {
    "invalid_request", "invalid_client", "unauthorized_client",
    "unsupported_grant_type", "invalid_scope",
};

/* A non-empty string of VSCHAR (0x20-0x7e), RFC 6749 A.12/A.17. */
static bool vschar_string(json_t *v)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);

    if (!s || n == 0 || strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

/* True when body is a token response (RFC 6749 5.1). Other members are
 * allowed (id_token, extensions) and kept. */
static bool token_response_ok(json_t *body)
{
    json_t *v;

    if (!json_is_object(body) ||
        !vschar_string(json_object_get(body, "access_token")) ||
        !vschar_string(json_object_get(body, "token_type")))
        return false;
    v = json_object_get(body, "expires_in");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0))
        return false;
    v = json_object_get(body, "refresh_token");
    if (v && !vschar_string(v))
        return false;
    v = json_object_get(body, "scope");
    return !v || json_is_string(v);
}

static void xc_set(og_exchange_outcome *out, og_exchange_class c,
                       const char *reason)
{
    out->cls = c;
    snprintf(out->reason, sizeof out->reason, "%s", reason);
}

/* A 200's body: SUCCEEDED with the compact text, or UNKNOWN. */
static void classify_success(json_t *body, og_exchange_outcome *out)
{
    char *text;
    size_t n;

    if (!token_response_ok(body)) {
        xc_set(out, OG_EXCHANGE_UNKNOWN, "malformed_success");
        return;
    }
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        xc_set(out, OG_EXCHANGE_UNKNOWN, "out_of_memory");
        return;
    }
    n = strlen(text);
    if (n > OG_REDEMPTION_RESULT_MAX) {
        sodium_memzero(text, n);
        free(text);
        xc_set(out, OG_EXCHANGE_UNKNOWN, "malformed_success");
        return;
    }
    out->result = text;
    out->result_len = n;
    xc_set(out, OG_EXCHANGE_SUCCEEDED, "exchanged");
}

/* A 400 or 401's body: ALREADY_USED, REJECTED or UNKNOWN. */
static void classify_error(int status, json_t *body,
                               og_exchange_outcome *out)
{
    const char *e = json_is_object(body)
                        ? json_string_value(json_object_get(body, "error"))
                        : NULL;
    char reason[OG_PROVIDER_REASON_MAX + 1];

    if (e && status == 400 && strcmp(e, "invalid_grant") == 0) {
        xc_set(out, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
        return;
    }
    for (size_t i = 0; e && i < sizeof rejections / sizeof rejections[0];
         i++)
        if (strcmp(e, rejections[i]) == 0) {
            xc_set(out, OG_EXCHANGE_REJECTED, rejections[i]); /* RD4 */
            return;
        }
    snprintf(reason, sizeof reason, "undocumented_error_%d", status);
    xc_set(out, OG_EXCHANGE_UNKNOWN, reason);
}

void og_exchange_classify(const og_provider_response *r,
                          og_exchange_outcome *out)
{
    char reason[OG_PROVIDER_REASON_MAX + 1];
    json_t *body = NULL;

    memset(out, 0, sizeof *out);
    if (r->transport != OG_TRANSPORT_OK) {
        snprintf(reason, sizeof reason, "transport_%s",
                 og_provider_transport_name(r->transport));
        xc_set(out, OG_EXCHANGE_UNKNOWN, reason);
        return;
    }
    if (r->body && r->body_len > 0)
        body = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, NULL);
    if (r->status == 200) {
        classify_success(body, out);
    } else if (r->status == 400 || r->status == 401) {
        classify_error(r->status, body, out);
    } else {
        snprintf(reason, sizeof reason, "undocumented_status_%d", r->status);
        xc_set(out, OG_EXCHANGE_UNKNOWN, reason);
    }
    json_decref(body); /* jansson frees its copies unwiped (design.md) */
}

void og_exchange_outcome_clear(og_exchange_outcome *o)
{
    if (!o)
        return;
    if (o->result) {
        sodium_memzero(o->result, o->result_len);
        free(o->result);
    }
    memset(o, 0, sizeof *o);
}

/* ===========================================================================
 * Sealing (RD3): XChaCha20-Poly1305 with a random nonce per record.
 * ========================================================================= */

#define AD_TAG "oncegate/redemption/v1"
#define AD_MAX (sizeof AD_TAG + 2 * (OG_ID_MAX + 1) + OG_CODE_HASH_LEN)

void og__redeem_code_hash(const char *code, char out[OG_CODE_HASH_LEN + 1])
{
    unsigned char h[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(h, (const unsigned char *)code, strlen(code));
    sodium_bin2hex(out, OG_CODE_HASH_LEN + 1, h, sizeof h);
}

/* The associated data: tag, caller, key and code hash, each followed by a
 * NUL (none of them holds one), so no two records share it. Its length, or
 * 0 when a field is too long. */
static size_t ad_build(const char *caller, const char *key,
                     const char *code_hash, unsigned char ad[AD_MAX])
{
    const char *parts[4] = {AD_TAG, caller, key, code_hash};
    size_t n = 0;

    for (int i = 0; i < 4; i++) {
        size_t len = strlen(parts[i]);

        if (n + len + 1 > AD_MAX)
            return 0;
        memcpy(ad + n, parts[i], len + 1);
        n += len + 1;
    }
    return n;
}

int og__redeem_seal(const unsigned char key[OG__REDEEM_KEY_LEN],
                    const unsigned char nonce[OG_REDEMPTION_NONCE_LEN],
                    const char *caller, const char *ikey,
                    const char *code_hash, const unsigned char *plain,
                    size_t len, unsigned char *sealed)
{
    unsigned char ad[AD_MAX];
    unsigned long long clen = 0;
    size_t adlen = ad_build(caller, ikey, code_hash, ad);

    if (adlen == 0 || len == 0 || len > OG_REDEMPTION_RESULT_MAX)
        return OG_EINVAL;
    crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &clen, plain, len, ad,
                                               adlen, NULL, nonce, key);
    return clen == len + OG_REDEMPTION_TAG_LEN ? 0 : OG_EINTERNAL;
}

int og__redeem_open(const unsigned char key[OG__REDEEM_KEY_LEN],
                    const unsigned char nonce[OG_REDEMPTION_NONCE_LEN],
                    const char *caller, const char *ikey,
                    const char *code_hash, const unsigned char *sealed,
                    size_t sealed_len, unsigned char *plain)
{
    unsigned char ad[AD_MAX];
    unsigned long long plen = 0;
    size_t adlen = ad_build(caller, ikey, code_hash, ad);

    if (adlen == 0 || sealed_len <= OG_REDEMPTION_TAG_LEN ||
        sealed_len > OG_REDEMPTION_SEALED_MAX)
        return -1;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, sealed,
                                                   sealed_len, ad, adlen,
                                                   nonce, key) != 0)
        return -1;
    return plen == sealed_len - OG_REDEMPTION_TAG_LEN ? 0 : -1;
}

/* ===========================================================================
 * The catch-up loop's decisions (RD1, RD2)
 * ========================================================================= */

int64_t og__redeem_backoff_us(int attempt)
{
    int64_t us = OG__REDEEM_BACKOFF_FIRST_US;

    for (int i = 0; i < attempt && us < OG__REDEEM_BACKOFF_MAX_US; i++)
        us *= 2;
    return us < OG__REDEEM_BACKOFF_MAX_US ? us : OG__REDEEM_BACKOFF_MAX_US;
}

int64_t og__redeem_catch_up_us(const og_exchange_outcome *x, int64_t bound_us)
{
    switch (x->cls) {
    case OG_EXCHANGE_SUCCEEDED:
    case OG_EXCHANGE_REJECTED:
        return -1; /* settled by the answer itself */
    case OG_EXCHANGE_ALREADY_USED:
        return bound_us;
    case OG_EXCHANGE_UNKNOWN:
        break;
    }
    /* Not one byte reached the provider: nothing of ours is in flight, so
     * one look decides (a duplicate's point, if one is already there). */
    return strcmp(x->reason, "transport_connect_failed") == 0 ? 0 : bound_us;
}

int og__redeem_after_look(og_redemption_found found, bool same_code)
{
    switch (found) {
    case OG_REDEMPTION_OWN:
        return same_code ? OG_REDEEM_CAUGHT_UP : OG_REDEEM_KEY_REUSED;
    case OG_REDEMPTION_CODE_ELSEWHERE:
        /* One exchange of a code succeeds, and its point is under another
         * key: whatever ours did, the result is not this operation's. */
        return OG_REDEEM_CODE_SPENT;
    case OG_REDEMPTION_ABSENT:
        break;
    }
    return -1;
}

og_redeem_outcome og__redeem_at_bound(og_exchange_class c)
{
    /* Spent (the provider says so) and nobody persisted a result: lost,
     * as far as anything can tell. After an unknown answer we cannot even
     * say the code is spent: a retry with the same key finds out. */
    return c == OG_EXCHANGE_ALREADY_USED ? OG_REDEEM_LOST : OG_REDEEM_UNKNOWN;
}
