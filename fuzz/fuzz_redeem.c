/*
 * fuzz_redeem.c — libFuzzer target for lib/core/redeem.c: what a token
 * endpoint's answer means (og_exchange_classify, RFC 6749 5.1/5.2) — bytes
 * another system sends us — and the sealing of the result that is kept.
 *
 * Input: the first byte picks how the answer ended (a status or a
 * transport failure, from `answers` below); the rest is the body.
 *
 * Invariants checked on every input:
 *   - the class is one of the four; the reason is 1..63 bytes of
 *     [a-z0-9_] (fixed strings, never the provider's text);
 *   - a result exactly when SUCCEEDED, and only from a 200; ALREADY_USED
 *     only from a 400; nothing but UNKNOWN from a transport failure;
 *   - a result is NUL-terminated, result_len bytes, at most
 *     OG_REDEMPTION_RESULT_MAX, and a fixed point: classified again as a
 *     200 body it is SUCCEEDED with the identical text;
 *   - a sealed result opens under its key and record to the same bytes,
 *     and not with one bit of the tag flipped.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "core/core_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct {
    og_provider_transport t;
    int status;
} answers[] = {
    {OG_TRANSPORT_OK, 200},          {OG_TRANSPORT_OK, 400},
    {OG_TRANSPORT_OK, 401},          {OG_TRANSPORT_OK, 500},
    {OG_TRANSPORT_OK, 302},          {OG_TRANSPORT_OK, 201},
    {OG_TRANSPORT_TIMEOUT, 0},       {OG_TRANSPORT_RESET, 200},
    {OG_TRANSPORT_NO_RESPONSE, 0},   {OG_TRANSPORT_CONNECT_FAILED, 0},
    {OG_TRANSPORT_TOO_LARGE, 200},   {OG_TRANSPORT_ERROR, 0},
};

#define N_ANSWERS (sizeof answers / sizeof answers[0])
#define HASH "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void check_reason(const char *reason)
{
    size_t n = strlen(reason);

    if (n == 0 || n > OG_PROVIDER_REASON_MAX)
        abort();
    for (size_t i = 0; i < n; i++)
        if (!((reason[i] >= 'a' && reason[i] <= 'z') ||
              (reason[i] >= '0' && reason[i] <= '9') || reason[i] == '_'))
            abort();
}

/* Seals text and opens it again; a flipped tag bit must not open. */
static void check_sealing(const char *text, size_t len)
{
    static const unsigned char key[32] = {1, 2, 3, 4, 5, 6, 7, 8};
    static const unsigned char nonce[OG_REDEMPTION_NONCE_LEN] = {9};
    unsigned char *sealed = malloc(len + OG_REDEMPTION_TAG_LEN);
    unsigned char *plain = malloc(len + 1);

    if (!sealed || !plain)
        abort();
    if (og__redeem_seal(key, nonce, "fuzz-caller", "fuzz-key", HASH,
                        (const unsigned char *)text, len, sealed) != 0 ||
        og__redeem_open(key, nonce, "fuzz-caller", "fuzz-key", HASH, sealed,
                        len + OG_REDEMPTION_TAG_LEN, plain) != 0 ||
        memcmp(plain, text, len) != 0)
        abort();
    sealed[len] ^= 1;
    if (og__redeem_open(key, nonce, "fuzz-caller", "fuzz-key", HASH, sealed,
                        len + OG_REDEMPTION_TAG_LEN, plain) == 0)
        abort();
    free(sealed);
    free(plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    og_provider_response r;
    og_exchange_outcome o, again;

    if (size < 1)
        return 0;
    if (sodium_init() < 0)
        abort();
    r.transport = answers[data[0] % N_ANSWERS].t;
    r.status = answers[data[0] % N_ANSWERS].status;
    r.body = (const char *)data + 1;
    r.body_len = size - 1;
    r.retry_after = NULL;
    og_exchange_classify(&r, &o);
    check_reason(o.reason);
    if ((unsigned)o.cls > OG_EXCHANGE_REJECTED)
        abort();
    if ((o.result != NULL) != (o.cls == OG_EXCHANGE_SUCCEEDED))
        abort();
    if (o.cls == OG_EXCHANGE_SUCCEEDED &&
        (r.transport != OG_TRANSPORT_OK || r.status != 200))
        abort();
    if (o.cls == OG_EXCHANGE_ALREADY_USED && r.status != 400)
        abort();
    if (r.transport != OG_TRANSPORT_OK && o.cls != OG_EXCHANGE_UNKNOWN)
        abort();
    if (o.result) {
        og_provider_response r2 = {OG_TRANSPORT_OK, 200, o.result,
                                   o.result_len, NULL};

        if (strlen(o.result) != o.result_len ||
            o.result_len > OG_REDEMPTION_RESULT_MAX || o.result_len == 0)
            abort();
        og_exchange_classify(&r2, &again);
        if (again.cls != OG_EXCHANGE_SUCCEEDED ||
            strcmp(again.result, o.result) != 0)
            abort();
        og_exchange_outcome_clear(&again);
        check_sealing(o.result, o.result_len);
    }
    og_exchange_outcome_clear(&o);
    return 0;
}
