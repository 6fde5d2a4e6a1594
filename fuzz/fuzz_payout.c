/*
 * fuzz_payout.c — libFuzzer target for lib/core/payout.c: the amount
 * parser and formatter, purpose normalization, the terms' canonical
 * serialization and fingerprint, and the policy and execution recheck over
 * the fuzzed terms.
 *
 * Input: seven '\n'-separated fields — amount, currency, tenant id,
 * beneficiary id, destination id, destination version (decimal), purpose —
 * then, after a seventh '\n', raw bytes for the context (six big-endian
 * int64s: paid, reserved, daily limit, approval limit, observed_at,
 * changed_at; a flags byte; a variant byte that makes the record's terms
 * or the grant differ from the intent's). A missing purpose field is an absent
 * purpose (NULL); other missing fields are NULL, which must be refused,
 * never crash.
 *
 * Invariants asserted with abort() (the sanitizers catch the rest):
 *   1. money: an accepted amount is 1..OG_PAYOUT_MINOR_MAX minor units;
 *      its formatted text parses back to the same value (PC2), is a fixed
 *      point, carries exactly the currency's scale, begins with the input
 *      (canonicalization only pads), and is written whole into a buffer of
 *      exactly its size and refused, untouched, by one byte less; any int64
 *      formats within OG_PAYOUT_MONEY_TEXT_MAX or is refused (negative);
 *   2. purpose: a normalized purpose is 1..140 printable bytes without
 *      surrounding or doubled spaces, a fixed point, and the input's
 *      non-space bytes in order;
 *   3. terms: canonicalize and fingerprint fail alike with a documented
 *      code, writing nothing; on success the bytes decode as the tag and
 *      seven length-prefixed fields (the last the absent marker exactly when
 *      the purpose is NULL), the fingerprint is SHA-256 of those bytes, and
 *      terms rebuilt from the canonical fields serialize identically (PC3);
 *   4. policy: the verdict's outcome is its reason's (PC4); Allowed implies
 *      every rule holds, computed here in 128-bit arithmetic; an intent
 *      whose terms are not the record's is never evaluated; a VALID
 *      recheck implies Approved at the grant's version, the grant's
 *      fingerprint, and paid + reserved within the limit;
 *   5. release day: the tenant id field read as a settlement time zone
 *      (and "Europe/Berlin"), at the instant of the input's first eight
 *      bytes: a zone og_payout_time_zone_check refuses is refused by
 *      og_payout_release_day with out untouched; an accepted one gives
 *      "YYYY-MM-DD" with a real month and day, or OG_EINVAL for an instant
 *      out of range.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "oncegate/payout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NFIELDS 7
#define INPUT_MAX 4096 /* longer inputs add nothing the caps don't cover */

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            abort();                                                           \
    } while (0)

static const char *const currencies[] = {"JPY", "EUR", "BHD", "CLF"};

static bool is_term_error(int rc)
{
    return rc == OG_EPAYOUT_TENANT || rc == OG_EPAYOUT_BENEFICIARY ||
           rc == OG_EPAYOUT_DESTINATION ||
           rc == OG_EPAYOUT_DESTINATION_VERSION ||
           rc == OG_EPAYOUT_CURRENCY || rc == OG_EPAYOUT_AMOUNT ||
           rc == OG_EAMOUNT_MINOR_UNITS || rc == OG_EPAYOUT_PURPOSE;
}

/* 1. */
static void check_amount(const char *text, const char *currency)
{
    int64_t minor = -1, back = -1;
    int scale;
    int rc = og_payout_amount_parse(text, currency, &minor);

    if (og_payout_currency_scale(currency, &scale) != 0) {
        CHECK(rc == OG_EPAYOUT_CURRENCY && minor == -1);
        return;
    }
    CHECK(scale >= 0 && scale <= 4);
    if (rc == OG_EAMOUNT_MINOR_UNITS) {
        /* Finer than the currency: digits, a point, more than scale
         * digits (issue 17: the code every route gives it). */
        const char *point = strchr(text, '.');
        CHECK(minor == -1 && point && strlen(point + 1) > (size_t)scale);
        for (const char *p = point + 1; *p; p++)
            CHECK(*p >= '0' && *p <= '9');
        return;
    }
    if (rc != 0) {
        CHECK(rc == OG_EPAYOUT_AMOUNT && minor == -1);
        return;
    }
    CHECK(minor >= 1 && minor <= OG_PAYOUT_MINOR_MAX);

    char out[OG_PAYOUT_MONEY_TEXT_MAX + 1], again[OG_PAYOUT_MONEY_TEXT_MAX + 1];
    CHECK(og_payout_amount_format(minor, currency, out, sizeof out) == 0);
    size_t n = strlen(out);
    CHECK(n >= 1 && n <= 16);
    CHECK(og_payout_amount_parse(out, currency, &back) == 0 && back == minor);
    CHECK(og_payout_amount_format(back, currency, again, sizeof again) == 0);
    CHECK(strcmp(out, again) == 0);
    const char *dot = strchr(out, '.');
    CHECK(scale == 0 ? dot == NULL : (dot && strlen(dot + 1) == (size_t)scale));
    CHECK(strncmp(out, text, strlen(text)) == 0); /* only padded */

    /* The heap copy lets ASan see any overrun of an exactly-sized buffer. */
    char *exact = malloc(n + 1);
    CHECK(exact != NULL);
    memset(exact, 'u', n + 1);
    CHECK(og_payout_amount_format(minor, currency, exact, n) == OG_EINVAL);
    CHECK(exact[0] == 'u');
    CHECK(og_payout_amount_format(minor, currency, exact, n + 1) == 0);
    CHECK(strcmp(exact, out) == 0);
    free(exact);
}

static void check_format_any(int64_t v)
{
    char out[OG_PAYOUT_MONEY_TEXT_MAX + 1];
    int64_t back;

    for (size_t c = 0; c < sizeof currencies / sizeof currencies[0]; c++) {
        int rc = og_payout_amount_format(v, currencies[c], out, sizeof out);
        if (v < 0) {
            CHECK(rc == OG_EPAYOUT_AMOUNT);
            continue;
        }
        CHECK(rc == 0 && strlen(out) <= OG_PAYOUT_MONEY_TEXT_MAX);
        rc = og_payout_amount_parse(out, currencies[c], &back);
        if (v >= 1 && v <= OG_PAYOUT_MINOR_MAX)
            CHECK(rc == 0 && back == v);
        else
            CHECK(rc == OG_EPAYOUT_AMOUNT);
    }
}

/* 2. */
static void check_purpose(const char *in)
{
    char out[OG_PAYOUT_PURPOSE_MAX + 1], again[OG_PAYOUT_PURPOSE_MAX + 1];

    memset(out, 'u', sizeof out);
    int rc = og_payout_purpose_normalize(in, out, sizeof out);
    if (rc != 0) {
        CHECK(rc == OG_EPAYOUT_PURPOSE && out[0] == 'u');
        return;
    }
    size_t n = strlen(out);
    CHECK(n >= 1 && n <= OG_PAYOUT_PURPOSE_MAX);
    CHECK(out[0] != ' ' && out[n - 1] != ' ' && strstr(out, "  ") == NULL);
    for (size_t i = 0; i < n; i++)
        CHECK(out[i] >= 0x20 && out[i] <= 0x7e);
    CHECK(og_payout_purpose_normalize(out, again, sizeof again) == 0);
    CHECK(strcmp(out, again) == 0);
    const char *p = in, *q = out;
    for (;; p++, q++) {
        while (*p == ' ')
            p++;
        while (*q == ' ')
            q++;
        CHECK(*p == *q);
        if (*p == '\0')
            break;
    }
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

/* 3. Returns true when t is valid, with its fingerprint in fp. */
static bool check_terms(const og_payout_terms *t,
                        char fp[OG_PAYOUT_FINGERPRINT_HEX + 1])
{
    unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
    size_t n = 0;
    char f[OG_PAYOUT_FINGERPRINT_HEX + 1] = "u";

    int rc = og_payout_terms_canonicalize(t, buf, sizeof buf, &n);
    int rf = og_payout_terms_fingerprint(t, f);
    CHECK(rc == rf);
    if (rc != 0) {
        CHECK(is_term_error(rc) && n == 0 && strcmp(f, "u") == 0);
        return false;
    }
    CHECK(n > 0 && n <= OG_PAYOUT_TERMS_CANONICAL_MAX);

    unsigned char digest[crypto_hash_sha256_BYTES];
    char hex[OG_PAYOUT_FINGERPRINT_HEX + 1];
    crypto_hash_sha256(digest, buf, n);
    sodium_bin2hex(hex, sizeof hex, digest, sizeof digest);
    CHECK(strcmp(hex, f) == 0);

    /* Decode: tag, then seven fields. */
    char field[8][OG_PAYOUT_PURPOSE_MAX + OG_ID_MAX + 1];
    size_t o = 0;
    bool absent = false;
    for (int i = 0; i < 8; i++) {
        CHECK(o + 4 <= n);
        uint32_t len = get_u32(buf + o);
        o += 4;
        if (i == 7 && len == OG_PAYOUT_ABSENT_LEN) {
            absent = true;
            break;
        }
        CHECK(len >= 1 && len < sizeof field[i] && o + len <= n);
        memcpy(field[i], buf + o, len);
        field[i][len] = '\0';
        o += len;
    }
    CHECK(o == n);
    CHECK(absent == (t->purpose == NULL));
    CHECK(strcmp(field[0], OG_PAYOUT_TERMS_TAG) == 0);
    CHECK(strcmp(field[1], t->tenant_id) == 0);
    CHECK(strcmp(field[2], t->beneficiary_id) == 0);
    CHECK(strcmp(field[3], t->destination_id) == 0);
    CHECK(strcmp(field[6], t->currency) == 0);

    /* Fixed point: the canonical spellings serialize identically. */
    og_payout_terms c = *t;
    c.amount = field[5];
    c.purpose = absent ? NULL : field[7];
    unsigned char buf2[OG_PAYOUT_TERMS_CANONICAL_MAX];
    size_t n2 = 0;
    CHECK(og_payout_terms_canonicalize(&c, buf2, sizeof buf2, &n2) == 0);
    CHECK(n2 == n && memcmp(buf, buf2, n) == 0);

    memcpy(fp, f, sizeof f);
    return true;
}

static int64_t get_i64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* 4. */
static void check_policy(const og_payout_terms *t, const char *fp,
                         const unsigned char *raw, size_t rawlen)
{
    unsigned char r[6 * 8 + 2];
    og_payout_context c;
    og_payout_verdict v;
    int64_t amount;

    memset(r, 0, sizeof r);
    memcpy(r, raw, rawlen < sizeof r ? rawlen : sizeof r);
    CHECK(og_payout_amount_parse(t->amount, t->currency, &amount) == 0);

    memset(&c, 0, sizeof c);
    c.tenant.paid_today = get_i64(r);
    c.tenant.reserved_today = get_i64(r + 8);
    c.tenant.daily_limit = get_i64(r + 16);
    c.requester.approval_limit = get_i64(r + 24);
    c.observed_at_us = get_i64(r + 32);
    c.destination.changed_at_us = get_i64(r + 40);
    unsigned flags = r[48];
    c.tenant.payouts_suspended = flags & 1;
    c.beneficiary.verified = flags & 2;
    c.beneficiary.status = (og_payout_beneficiary_status)((flags >> 2) & 3);
    c.payout.state = (og_payout_state)((flags >> 4) & 7);
    c.unavailable = (flags & 0x80) && (flags & 0x7f) == 0x7f;
    c.tenant.settings_version = 1;
    c.beneficiary.version = 1;
    c.destination.beneficiary_id = (flags & 0x40) ? "someone-else"
                                                  : t->beneficiary_id;
    c.destination.version = t->destination_version;
    c.payout.version = 2;
    c.payout.terms = *t;
    c.intent.terms = *t;
    c.intent.payout_version = 2;
    unsigned variant = r[49];
    bool changed = variant & 2; /* the record's purpose differs */
    if (changed)
        c.payout.terms.purpose = t->purpose ? NULL : "x";

    int rc = og_payout_evaluate(&c, &v);
    if (changed && !c.unavailable)
        CHECK(rc == OG_EPAYOUT_INTENT_MISMATCH || rc == OG_EPAYOUT_CONTEXT);
    else
        CHECK(rc == 0 || rc == OG_EPAYOUT_CONTEXT);
    if (rc == 0) {
        CHECK(v.outcome == og_payout_reason_outcome(v.reason));
        CHECK(strcmp(v.policy_version, OG_PAYOUT_POLICY_VERSION) == 0);
        if (c.unavailable) {
            CHECK(v.reason == OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
        } else {
            CHECK(strcmp(v.terms_fingerprint, fp) == 0);
        }
        if (v.outcome == OG_PAYOUT_ALLOWED) {
            __int128 sum = (__int128)c.tenant.paid_today +
                           c.tenant.reserved_today + amount;
            __int128 gap = (__int128)c.observed_at_us -
                           c.destination.changed_at_us;
            CHECK(!c.tenant.payouts_suspended && c.beneficiary.verified);
            CHECK(c.beneficiary.status == OG_PAYOUT_BENEFICIARY_ACTIVE);
            CHECK(c.payout.state == OG_PAYOUT_STATE_DRAFT);
            CHECK(strcmp(c.destination.beneficiary_id, t->beneficiary_id) ==
                  0);
            CHECK(sum <= c.tenant.daily_limit);
            CHECK(gap >= OG_PAYOUT_RECENT_CHANGE_US);
            CHECK(amount <= c.requester.approval_limit);
        }
    }

    /* The recheck of the current record: the grant binds the intent's
     * fingerprint, or (variant) one a character off, at version 2 or
     * (variant) 3. */
    char other[OG_PAYOUT_FINGERPRINT_HEX + 1];
    memcpy(other, fp, sizeof other);
    other[0] = other[0] == '0' ? '1' : '0';
    og_payout_grant_binding g = {(variant & 1) ? other : fp,
                                 (variant & 4) ? 3 : 2};
    og_payout_exec_verdict x;
    rc = og_payout_evaluate_for_execution(&c, &g, &x);
    CHECK(rc == 0 || rc == OG_EPAYOUT_CONTEXT);
    if (rc != 0)
        return;
    CHECK((x.outcome == OG_PAYOUT_EXEC_VALID) ==
          (x.reason == OG_PAYOUT_WORKER_NONE));
    CHECK((x.outcome == OG_PAYOUT_EXEC_POSTPONED) == c.unavailable);
    if (x.rechecked)
        CHECK(x.recheck.outcome == og_payout_reason_outcome(x.recheck.reason));
    if (x.outcome == OG_PAYOUT_EXEC_VALID) {
        __int128 sum = (__int128)c.tenant.paid_today + c.tenant.reserved_today;
        CHECK(c.payout.state == OG_PAYOUT_STATE_APPROVED);
        CHECK(g.terms_fingerprint == fp && !changed);
        CHECK(g.executable_payout_version == c.payout.version);
        CHECK(c.tenant.reserved_today >= amount);
        CHECK(sum <= c.tenant.daily_limit);
        CHECK(x.rechecked && x.recheck.reason == OG_PAYOUT_REASON_ALLOWED);
        CHECK(x.relied.payout == 2);
    }
}

/* 5. */
static void check_release_day(const char *zone, int64_t at_us)
{
    char day[OG_PAYOUT_DAY_LEN + 1] = "untouched!";
    int zrc = og_payout_time_zone_check(zone);
    int rc = og_payout_release_day(at_us, zone, day);

    CHECK(zrc == 0 || zrc == OG_EPAYOUT_TIMEZONE);
    if (zrc != 0 || rc != 0) {
        CHECK(rc == (zrc != 0 ? OG_EPAYOUT_TIMEZONE : OG_EINVAL));
        CHECK(strcmp(day, "untouched!") == 0);
        return;
    }
    CHECK(strlen(day) == OG_PAYOUT_DAY_LEN && day[4] == '-' && day[7] == '-');
    int month = (day[5] - '0') * 10 + (day[6] - '0');
    int mday = (day[8] - '0') * 10 + (day[9] - '0');
    CHECK(month >= 1 && month <= 12 && mday >= 1 && mday <= 31);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char buf[INPUT_MAX + 1];
    char *field[NFIELDS] = {0};
    const unsigned char *raw = NULL;
    size_t rawlen = 0;

    if (size > INPUT_MAX)
        size = INPUT_MAX;
    memcpy(buf, data, size);
    buf[size] = '\0';

    /* Split into the seven text fields; the rest is raw. Fields may hold
     * NUL bytes: they end there, as a C caller's string would. */
    char *p = buf;
    int nf = 0;
    while (nf < NFIELDS) {
        field[nf++] = p;
        char *nl = memchr(p, '\n', (size_t)(buf + size - p));
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
        if (nf == NFIELDS) {
            raw = (const unsigned char *)p;
            rawlen = (size_t)(buf + size - p);
        }
    }

    const char *amount = field[0], *currency = field[1];
    if (amount) {
        check_amount(amount, currency);
        for (size_t c = 0; c < sizeof currencies / sizeof currencies[0]; c++)
            check_amount(amount, currencies[c]);
    }
    if (size >= 8)
        check_format_any(get_i64(data));
    if (field[2]) {
        int64_t at = size >= 8 ? get_i64(data) : 0;

        check_release_day(field[2], at);
        check_release_day("Europe/Berlin", at);
    }
    if (field[6])
        check_purpose(field[6]);

    /* The destination version: decimal digits, else a value the rules
     * must refuse (0). */
    int64_t version = 0;
    if (field[5]) {
        const char *s = field[5];
        size_t k = 0;
        while (s[k] >= '0' && s[k] <= '9' && k < 18)
            version = version * 10 + (s[k++] - '0');
        if (s[k] != '\0' && k == 0)
            version = s[0] == '-' ? -1 : 0;
    }
    og_payout_terms t = {field[2], field[3], field[4], version,
                         amount,   currency, field[6]};
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];
    if (check_terms(&t, fp)) {
        /* Absent and present purposes never share a fingerprint. */
        og_payout_terms u = t;
        char fu[OG_PAYOUT_FINGERPRINT_HEX + 1];
        u.purpose = t.purpose ? NULL : "x";
        CHECK(og_payout_terms_fingerprint(&u, fu) == 0);
        CHECK(strcmp(fu, fp) != 0);
        check_policy(&t, fp, raw ? raw : (const unsigned char *)"", rawlen);
    }
    return 0;
}
