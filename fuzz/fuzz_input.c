/*
 * fuzz_input.c — libFuzzer target for lib/core/validate.c, the code that
 * stands between untrusted request fields and the store.
 *
 * Input: up to eight '\n'-separated fields, in og__admit_req_build() order:
 *   issuer, grant id, expires_at (RFC 3339 text), operation id, caller,
 *   account, amount, currency.
 * Missing fields are NULL, which the validators must refuse, not crash on.
 *
 * Invariants asserted with abort() (the sanitizers catch the rest: reads
 * past a field, writes past an output buffer, signed overflow):
 *   1. amount: the canonical form is a fixed point, fits OG_AMOUNT_MAX, and
 *      is written whole into a buffer exactly its size and refused by one
 *      byte less;
 *   2. time: every accepted timestamp formats to a text that parses back to
 *      the same microsecond, and formatting any int64 never overruns;
 *   3. UUID: normalization is idempotent and only changes letter case;
 *   4. request: the result of og__admit_req_build() equals the first failing
 *      field's code computed independently, and a built request's fields
 *      pass their own checks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"
#include "oncegate/payout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NFIELDS 8
#define INPUT_MAX 4096 /* longer inputs add nothing the caps don't cover */

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            abort();                                                           \
    } while (0)

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static void check_amount(const char *s)
{
    char out[OG_AMOUNT_MAX + 1], again[OG_AMOUNT_MAX + 1];
    if (og_amount_canonical(s, out, sizeof out) != 0)
        return;
    size_t n = strlen(out);
    CHECK(n >= 1 && n <= OG_AMOUNT_MAX);
    CHECK(og_amount_canonical(out, again, sizeof again) == 0);
    CHECK(strcmp(out, again) == 0);
    /* No redundant zeros, no leading '.', no trailing '.'. */
    CHECK(out[0] != '.' && out[n - 1] != '.');
    CHECK(!(out[0] == '0' && n > 1 && out[1] != '.'));
    CHECK(!(strchr(out, '.') != NULL && out[n - 1] == '0'));

    /* outlen is honoured to the byte. The heap copy lets ASan see any
     * overrun of an exactly-sized buffer. */
    char *exact = malloc(n + 1);
    CHECK(exact != NULL);
    CHECK(og_amount_canonical(s, exact, n) == OG_EAMOUNT);
    CHECK(og_amount_canonical(s, exact, n + 1) == 0);
    CHECK(strcmp(exact, out) == 0);
    free(exact);
}

static void check_time_value(int64_t us)
{
    char buf[28];
    og_time_format_rfc3339(us, buf, sizeof buf);
    CHECK(memchr(buf, '\0', sizeof buf) != NULL);
    int64_t back = -1;
    if (us >= OG__TIME_MIN_US && us <= OG__TIME_MAX_US) {
        CHECK(strlen(buf) == 27);
        CHECK(og_time_parse_rfc3339(buf, &back) == 0 && back == us);
    } else {
        CHECK(og_time_parse_rfc3339(buf, &back) == OG_EEXPIRES_AT);
    }
    /* Short buffers: truncated, terminated, nothing written past len. */
    for (size_t len = 0; len < 28; len += 9) {
        char *small = malloc(len ? len : 1);
        CHECK(small != NULL);
        og_time_format_rfc3339(us, small, len);
        if (len)
            CHECK(strlen(small) < len && memcmp(small, buf, strlen(small)) == 0);
        free(small);
    }
}

static void check_time_text(const char *s)
{
    int64_t us = -1;
    if (og_time_parse_rfc3339(s, &us) != 0) {
        CHECK(us == -1); /* written only on success */
        return;
    }
    CHECK(us >= OG__TIME_MIN_US && us <= OG__TIME_MAX_US);
    check_time_value(us);
}

static void check_uuid(const char *s)
{
    char out[OG_UUID_LEN + 1], again[OG_UUID_LEN + 1];
    if (og__uuid_normalize(s, out) != 0)
        return;
    CHECK(strlen(out) == OG_UUID_LEN && strlen(s) == OG_UUID_LEN);
    for (size_t i = 0; i < OG_UUID_LEN; i++)
        CHECK(out[i] == lower((unsigned char)s[i]));
    CHECK(og__uuid_normalize(out, again) == 0);
    CHECK(strcmp(out, again) == 0);
}

/* The first failing field's code, computed from the individual checks. */
static int expected_build(const og_grant *g, const og_intent *in)
{
    char uuid[OG_UUID_LEN + 1], amt[OG_AMOUNT_MAX + 1];
    if (og__id_check(g->issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(g->grant_id) != 0)
        return OG_EGRANT_ID;
    if (g->expires_at_us < OG__TIME_MIN_US || g->expires_at_us > OG__TIME_MAX_US)
        return OG_EEXPIRES_AT;
    if (og__uuid_normalize(in->operation_id, uuid) != 0)
        return OG_EOPERATION_ID;
    if (og__id_check(in->caller_id) != 0)
        return OG_ECALLER;
    if (og__id_check(in->account_id) != 0)
        return OG_EACCOUNT;
    if (og_amount_canonical(in->amount, amt, sizeof amt) != 0)
        return OG_EAMOUNT;
    /* The currency's minor units (ISO 4217) bound the canonical fraction. */
    int scale;
    if (og_payout_currency_scale(in->currency, &scale) != 0)
        return OG_ECURRENCY;
    const char *point = strchr(amt, '.');
    if (point && (int)strlen(point + 1) > scale)
        return OG_EAMOUNT_MINOR_UNITS;
    return 0;
}

static void check_req(const og_grant *g, const og_intent *in)
{
    og__admit_req req, before;
    memset(&req, 0xA5, sizeof req);
    memcpy(&before, &req, sizeof req);
    int rc = og__admit_req_build(g, in, &req);
    CHECK(rc == expected_build(g, in));
    if (rc != 0) {
        CHECK(memcmp(&req, &before, sizeof req) == 0);
        return;
    }
    char uuid[OG_UUID_LEN + 1], amt[OG_AMOUNT_MAX + 1];
    CHECK(og__id_check(req.issuer) == 0 && strcmp(req.issuer, g->issuer) == 0);
    CHECK(og__id_check(req.grant_id) == 0 &&
          strcmp(req.grant_id, g->grant_id) == 0);
    CHECK(req.expires_at_us == g->expires_at_us);
    CHECK(og__uuid_normalize(req.operation_id, uuid) == 0 &&
          strcmp(uuid, req.operation_id) == 0);
    CHECK(og__id_check(req.caller_id) == 0 &&
          strcmp(req.caller_id, in->caller_id) == 0);
    CHECK(og__id_check(req.account_id) == 0 &&
          strcmp(req.account_id, in->account_id) == 0);
    CHECK(og_amount_canonical(req.amount, amt, sizeof amt) == 0 &&
          strcmp(amt, req.amount) == 0);
    CHECK(og__currency_check(req.currency) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX)
        return 0;
    /* One heap copy, each field NUL-terminated in place, so ASan flags any
     * read past a field's terminator that lands past the buffer end. */
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';

    const char *f[NFIELDS] = {0};
    size_t nf = 0;
    char *p = buf;
    while (nf < NFIELDS) {
        f[nf++] = p;
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (nl == NULL)
            break;
        *nl = '\0';
        p = nl + 1;
    }

    for (size_t i = 0; i < nf; i++) {
        check_amount(f[i]);
        check_time_text(f[i]);
        check_uuid(f[i]);
        (void)og__id_check(f[i]);
        (void)og__currency_check(f[i]);
    }

    /* An arbitrary int64 from the input's first bytes exercises format()
     * across and outside the valid range. */
    int64_t raw = 0;
    memcpy(&raw, data, size < sizeof raw ? size : sizeof raw);
    check_time_value(raw);

    /* expires_at: the parsed value when field 2 is a timestamp, else the raw
     * int64, so out-of-range expiries reach the builder too. */
    og_grant g = {f[0], f[1], raw, NULL, OG_FORM_TOKEN};
    int64_t us;
    if (f[2] != NULL && og_time_parse_rfc3339(f[2], &us) == 0)
        g.expires_at_us = us;
    og_intent in = {f[3], f[4], f[5], f[6], f[7]};
    check_req(&g, &in);

    free(buf);
    return 0;
}
