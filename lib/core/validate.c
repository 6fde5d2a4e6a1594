/*
 * validate.c — input validation and canonicalization. Pure: no I/O, no
 * allocation, no locale, no time zone, no global state.
 *
 * Everything a backend writes passes through og__admit_req_build(), so the
 * rules here are the rules of the store: an id that is accepted here is what
 * the store keys on, an amount is compared in the canonical form produced
 * here, and a timestamp is the UTC microsecond value computed here.
 *
 * Invariants this file guarantees (the fuzz target fuzz/fuzz_input.c asserts
 * them):
 *   1. Every scan is bounded: no function reads past a fixed cap of its
 *      input, however long the string, and no output buffer is overrun.
 *   2. Canonical forms are fixed points: canonicalizing the output of
 *      og_amount_canonical() or og__uuid_normalize() yields it unchanged.
 *   3. For every accepted timestamp, og_time_parse_rfc3339() of
 *      og_time_format_rfc3339() of its value gives the same value back.
 *   4. Out-parameters are written only on success.
 */
#include <stdint.h>
#include <string.h>

#include "core/core_int.h"
#include "oncegate/payout.h"

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

/* strnlen without relying on POSIX: length of s, or max + 1 when s is longer
 * than max. Every check below measures with this first, so an unterminated
 * or hostile-length input costs at most max + 1 reads. */
static size_t bounded_len(const char *s, size_t max)
{
    size_t n = 0;
    while (n <= max && s[n] != '\0')
        n++;
    return n;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int og_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* ===========================================================================
 * Identifiers
 * ========================================================================= */

int og__id_check(const char *s)
{
    if (s == NULL)
        return -1;
    size_t n = bounded_len(s, OG_ID_MAX);
    if (n == 0 || n > OG_ID_MAX)
        return -1;
    /* Printable ASCII without space: ids end up in logs, URLs and SQL
     * parameters, and a space, control byte or non-ASCII byte would let two
     * ids that look alike be different keys. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e)
            return -1;
    }
    return 0;
}

int og__uuid_normalize(const char *in, char out[OG_UUID_LEN + 1])
{
    if (in == NULL || out == NULL)
        return -1;
    if (bounded_len(in, OG_UUID_LEN) != OG_UUID_LEN)
        return -1;

    char buf[OG_UUID_LEN + 1];
    int nonzero = 0;
    for (size_t i = 0; i < OG_UUID_LEN; i++) {
        char c = in[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return -1;
            buf[i] = '-';
            continue;
        }
        int v = og_hex_digit((unsigned char)c);
        if (v < 0)
            return -1;
        nonzero |= v;
        buf[i] = "0123456789abcdef"[v];
    }
    buf[OG_UUID_LEN] = '\0';
    /* The nil UUID is what an uninitialized or defaulted field looks like;
     * admitting under it would let unrelated callers collide on one id. */
    if (!nonzero)
        return -1;
    memcpy(out, buf, sizeof buf);
    return 0;
}

int og__currency_check(const char *s)
{
    int scale;

    /* The payout core's ISO 4217 table (lib/core/payout_currencies.inc):
     * a code without minor units cannot say how fine an amount may be, so
     * it is no currency an amount is checked against. */
    return og_payout_currency_scale(s, &scale) == 0 ? 0 : -1;
}

int og__amount_minor_units_check(const char *canonical, const char *currency)
{
    const char *point;
    int scale;

    if (canonical == NULL || og_payout_currency_scale(currency, &scale) != 0)
        return OG_ECURRENCY;
    /* Canonical: no trailing fraction zeros, so the digits after the point
     * are the significant ones ("250.000" is "250" and fits JPY). */
    point = strchr(canonical, '.');
    if (point != NULL && strlen(point + 1) > (size_t)scale)
        return OG_EAMOUNT_MINOR_UNITS;
    return 0;
}

int og_amount_check(const char *amount, const char *currency)
{
    char canon[OG_AMOUNT_MAX + 1];

    if (og_amount_canonical(amount, canon, sizeof canon) != 0)
        return OG_EAMOUNT;
    return og__amount_minor_units_check(canon, currency);
}

/* ===========================================================================
 * Amounts
 *
 * Grammar: digits [ '.' digits ] — one or more digits before the point and,
 * when a point is present, one or more after it. ".5" and "5." are refused:
 * both are legal in some languages and not in others, and a single spelling
 * per number keeps callers from depending on a lenient parser. No sign
 * (amounts are positive; the operation says which way money moves), no
 * exponent, no white space, no "0x", "NaN" or "Infinity".
 *
 * Canonical form: leading zeros of the integer part stripped (one "0" kept
 * before a fraction), trailing zeros of the fraction stripped, and the point
 * dropped when the fraction becomes empty. So "0250", "250.0" and "250.00"
 * are all "250", and two requests for the same amount compare equal as text.
 *
 * Limits, applied to the canonical digits (so "1.50000000000000000000" is
 * fine: its zeros carry no value): at most OG_AMOUNT_SCALE fraction digits
 * and at most OG_AMOUNT_DIGITS significant digits (integer digits plus
 * fraction digits) — NUMERIC(38, 18)-sized. Zero is refused: a zero-value
 * operation spending a single-use grant is always a mistake.
 * ========================================================================= */

/* Raw input cap. Far above any valid amount (which may legitimately carry
 * many trailing zeros) and small enough that scanning it is free. */
#define AMOUNT_INPUT_MAX 256

int og_amount_canonical(const char *in, char *out, size_t outlen)
{
    if (in == NULL || out == NULL)
        return OG_EAMOUNT;
    size_t n = bounded_len(in, AMOUNT_INPUT_MAX);
    if (n == 0 || n > AMOUNT_INPUT_MAX)
        return OG_EAMOUNT;

    /* Split into integer digits [0, int_end) and fraction digits
     * [frac_start, n), validating the grammar as we go. */
    size_t i = 0;
    while (i < n && is_digit(in[i]))
        i++;
    size_t int_end = i;
    if (int_end == 0)
        return OG_EAMOUNT; /* "", ".5", "-1", "+1", " 1", "NaN" ... */
    size_t frac_start = n, frac_end = n;
    if (i < n) {
        if (in[i] != '.')
            return OG_EAMOUNT; /* "1e5", "0x10", "1 " ... */
        frac_start = ++i;
        while (i < n && is_digit(in[i]))
            i++;
        if (i != n || frac_start == n)
            return OG_EAMOUNT; /* "1.2.3", "1." */
    }

    size_t int_start = 0;
    while (int_start < int_end && in[int_start] == '0')
        int_start++;
    while (frac_end > frac_start && in[frac_end - 1] == '0')
        frac_end--;

    size_t int_digits = int_end - int_start;
    size_t frac_digits = frac_end - frac_start;
    if (int_digits == 0 && frac_digits == 0)
        return OG_EAMOUNT; /* zero in any spelling */
    if (frac_digits > OG_AMOUNT_SCALE ||
        int_digits + frac_digits > OG_AMOUNT_DIGITS)
        return OG_EAMOUNT;

    /* "0" before a pure fraction, then the digits, then ".fraction". */
    size_t need = (int_digits ? int_digits : 1) +
                  (frac_digits ? 1 + frac_digits : 0);
    if (outlen < need + 1)
        return OG_EAMOUNT;

    size_t o = 0;
    if (int_digits == 0)
        out[o++] = '0';
    else {
        memcpy(out + o, in + int_start, int_digits);
        o += int_digits;
    }
    if (frac_digits) {
        out[o++] = '.';
        memcpy(out + o, in + frac_start, frac_digits);
        o += frac_digits;
    }
    out[o] = '\0';
    return 0;
}

/* ===========================================================================
 * Time
 *
 * Civil-date arithmetic is done by hand (Howard Hinnant's days_from_civil /
 * civil_from_days, proleptic Gregorian) rather than with timegm()/mktime():
 * those consult the process time zone and locale, are not in C17, and
 * differ across libcs at the edges. These are exact for every date here.
 * ========================================================================= */

#define US_PER_SEC INT64_C(1000000)
#define SEC_PER_DAY INT64_C(86400)

/* RFC 3339 text is at most "YYYY-MM-DDTHH:MM:SS.fffffffff+HH:MM" = 35
 * bytes; 64 leaves room without letting a caller make us scan megabytes. */
#define TIME_INPUT_MAX 64

static int is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30,
                                31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Days since 1970-01-01 of the civil date y-m-d. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;                                  /* 0..399 */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0..365 */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;        /* 0..146096 */
    return era * 146097 + doe - 719468;
}

/* Civil date of day z since 1970-01-01. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Reads exactly n decimal digits at s into *v. 0 or -1. */
static int read_digits(const char *s, int n, int *v)
{
    int acc = 0;
    for (int i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -1;
        acc = acc * 10 + (s[i] - '0');
    }
    *v = acc;
    return 0;
}

int og_time_parse_rfc3339(const char *s, int64_t *out_us)
{
    if (s == NULL || out_us == NULL)
        return OG_EEXPIRES_AT;
    size_t n = bounded_len(s, TIME_INPUT_MAX);
    if (n > TIME_INPUT_MAX || n < 20) /* "YYYY-MM-DDTHH:MM:SSZ" is 20 */
        return OG_EEXPIRES_AT;

    int year, mon, day, hour, min, sec;
    if (read_digits(s, 4, &year) || s[4] != '-' ||
        read_digits(s + 5, 2, &mon) || s[7] != '-' ||
        read_digits(s + 8, 2, &day) || (s[10] != 'T' && s[10] != 't') ||
        read_digits(s + 11, 2, &hour) || s[13] != ':' ||
        read_digits(s + 14, 2, &min) || s[16] != ':' ||
        read_digits(s + 17, 2, &sec))
        return OG_EEXPIRES_AT;

    if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) ||
        hour > 23 || min > 59)
        return OG_EEXPIRES_AT;
    /* RFC 3339 allows second 60 for a leap second. We refuse it: without a
     * leap-second table it has no exact UTC microsecond value, folding it
     * into the next second would make two texts map to one instant (and
     * break format(parse(x)) == x), and grant issuers stamp expiries from
     * POSIX clocks, which never produce it. */
    if (sec > 59)
        return OG_EEXPIRES_AT;

    size_t i = 19;
    int64_t frac_us = 0;
    if (s[i] == '.') {
        size_t start = ++i;
        while (i < n && is_digit(s[i]))
            i++;
        size_t nd = i - start;
        if (nd < 1 || nd > 9)
            return OG_EEXPIRES_AT;
        /* Truncate beyond microseconds: the store's resolution. Truncation,
         * not rounding, so a deadline never moves later than written. */
        for (size_t k = 0; k < 6; k++)
            frac_us = frac_us * 10 + (k < nd ? s[start + k] - '0' : 0);
    }

    int64_t offset_sec = 0;
    if (s[i] == 'Z' || s[i] == 'z') {
        i++;
    } else if (s[i] == '+' || s[i] == '-') {
        int oh, om;
        if (n - i != 6 || read_digits(s + i + 1, 2, &oh) ||
            s[i + 3] != ':' || read_digits(s + i + 4, 2, &om) || oh > 23 ||
            om > 59)
            return OG_EEXPIRES_AT;
        offset_sec = (int64_t)oh * 3600 + (int64_t)om * 60;
        if (s[i] == '-')
            offset_sec = -offset_sec; /* "-00:00" is UTC, per RFC 3339 */
        i += 6;
    } else {
        return OG_EEXPIRES_AT; /* no zone: a local time is not an instant */
    }
    if (i != n)
        return OG_EEXPIRES_AT; /* trailing bytes */

    /* year <= 9999, so every term stays far inside int64. Local time minus
     * its offset is UTC. */
    int64_t secs = days_from_civil(year, mon, day) * SEC_PER_DAY +
                   (int64_t)hour * 3600 + (int64_t)min * 60 + sec - offset_sec;
    int64_t us = secs * US_PER_SEC + frac_us;
    if (us < OG__TIME_MIN_US || us > OG__TIME_MAX_US)
        return OG_EEXPIRES_AT;
    *out_us = us;
    return 0;
}

/* Writes v as exactly width decimal digits at p (v >= 0, fits width). */
static void put_digits(char *p, int64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

char *og_time_format_rfc3339(int64_t us, char *buf, size_t len)
{
    /* "YYYY-MM-DDTHH:MM:SS.ffffffZ" is 27 bytes + NUL. */
    char tmp[28];
    if (buf == NULL || len == 0)
        return buf;

    if (us < OG__TIME_MIN_US || us > OG__TIME_MAX_US) {
        /* Outside 1970..9999 there is no 4-digit year to print. Clamping
         * would show a wrong but plausible time in a log; "invalid" is
         * obviously not a time, and og_time_parse_rfc3339() refuses it. */
        memcpy(tmp, "invalid", sizeof "invalid");
    } else {
        int64_t days = us / (SEC_PER_DAY * US_PER_SEC); /* us >= 0 here */
        int64_t rem = us % (SEC_PER_DAY * US_PER_SEC);
        int64_t y;
        int m, d;
        civil_from_days(days, &y, &m, &d);
        int64_t sod = rem / US_PER_SEC;
        memcpy(tmp, "0000-00-00T00:00:00.000000Z", 28);
        put_digits(tmp, y, 4);
        put_digits(tmp + 5, m, 2);
        put_digits(tmp + 8, d, 2);
        put_digits(tmp + 11, sod / 3600, 2);
        put_digits(tmp + 14, sod / 60 % 60, 2);
        put_digits(tmp + 17, sod % 60, 2);
        put_digits(tmp + 20, rem % US_PER_SEC, 6);
    }

    /* Respect len: a short buffer gets a truncated, terminated string. */
    size_t tl = strlen(tmp);
    size_t c = tl < len - 1 ? tl : len - 1;
    memcpy(buf, tmp, c);
    buf[c] = '\0';
    return buf;
}

/* ===========================================================================
 * Admission request
 * ========================================================================= */

/* Copies a string already proven to fit (og__id_check: <= OG_ID_MAX). */
static void copy_checked(char *dst, const char *src)
{
    memcpy(dst, src, strlen(src) + 1);
}

int og__grant_req_build(const og_grant *g, og__admit_req *req)
{
    og__admit_req r;

    if (g == NULL || req == NULL)
        return OG_EINVAL;
    memset(&r, 0, sizeof r);
    if (og__id_check(g->issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(g->grant_id) != 0)
        return OG_EGRANT_ID;
    if (g->expires_at_us < OG__TIME_MIN_US ||
        g->expires_at_us > OG__TIME_MAX_US)
        return OG_EEXPIRES_AT;
    if (g->family != NULL && og__id_check(g->family) != 0)
        return OG_EFAMILY;
    if (g->form != OG_FORM_TOKEN && g->form != OG_FORM_ROW)
        return OG_EFORM;
    copy_checked(r.issuer, g->issuer);
    copy_checked(r.grant_id, g->grant_id);
    r.expires_at_us = g->expires_at_us;
    if (g->family != NULL)
        copy_checked(r.family, g->family);
    r.form = g->form;
    memcpy(req, &r, sizeof r);
    return 0;
}

int og__admit_req_build(const og_grant *g, const og_intent *in,
                        og__admit_req *req)
{
    og__admit_req r;
    int rc;

    if (g == NULL || in == NULL || req == NULL)
        return OG_EINVAL;

    /* Build into a local so *req is written only on success. The order of
     * checks is part of the contract: the grant's fields first (as
     * og__grant_req_build checks them), then the intent's. */
    if ((rc = og__grant_req_build(g, &r)) != 0)
        return rc;
    if (og__uuid_normalize(in->operation_id, r.operation_id) != 0)
        return OG_EOPERATION_ID;
    if (og__id_check(in->caller_id) != 0)
        return OG_ECALLER;
    if (og__id_check(in->account_id) != 0)
        return OG_EACCOUNT;
    if (og_amount_canonical(in->amount, r.amount, sizeof r.amount) != 0)
        return OG_EAMOUNT;
    if ((rc = og__amount_minor_units_check(r.amount, in->currency)) != 0)
        return rc; /* OG_ECURRENCY, OG_EAMOUNT_MINOR_UNITS */
    copy_checked(r.caller_id, in->caller_id);
    copy_checked(r.account_id, in->account_id);
    memcpy(r.currency, in->currency, OG_CURRENCY_LEN + 1);

    memcpy(req, &r, sizeof r); /* padding included: zeroed, never stale */
    return 0;
}

bool og_id_valid(const char *s)
{
    return s != NULL && og__id_check(s) == 0;
}

int og_operation_id_canonical(const char *in, char out[OG_UUID_LEN + 1])
{
    if (in == NULL || out == NULL)
        return OG_EOPERATION_ID;
    return og__uuid_normalize(in, out) == 0 ? 0 : OG_EOPERATION_ID;
}
