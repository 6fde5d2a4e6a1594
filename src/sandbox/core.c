/*
 * core.c — the sandbox's pure core: what a request means and what it does,
 * with no I/O and no clock (time is an argument). Everything a reader needs
 * to check the contract of docs/sandbox.md is decided here; store.c only
 * carries the decisions out inside a transaction.
 *
 * Credits and payouts are two rows of og_sbx_resources, not two code
 * paths: every rule below takes the resource and reads only its data (the
 * target member, the test prefixes, the closed code, the status words).
 *
 * Invariants:
 *   SC1 A request is valid or refused before anything runs: parsing writes
 *       its outputs only on success, and a refusal names the first member
 *       at fault, so a client can fix its request from the answer alone.
 *   SC2 Parameters are compared canonically: the amount as canonical
 *       decimal text ("250.00" = "250"), expires_at as an instant ("Z" =
 *       "+00:00"), the other members byte for byte.
 *   SC3 A retained key decides before anything else: its saved result (or a
 *       mismatch) is answered even for a busy- account or an expired
 *       request, because the key, not the request, owns the outcome.
 *   SC4 Nothing is created later than expires_at + skew: the decision that
 *       creates is taken at the time passed in, which the store reads
 *       inside the transaction that writes.
 *   SC5 Amount and time rules are the same as oncegate's own
 *       (lib/core/validate.c), so whatever oncegate sends is accepted here.
 *   SC6 A token request is read as RFC 6749 3.2 says: unknown parameters
 *       are ignored, a repeated one is refused, an empty one counts as
 *       absent. Whether its code is still good is the store's decision,
 *       taken inside the write transaction that spends it.
 *   SC7 A create's answer is fixed once its effect is complete: a later
 *       return (payouts) is shown by lookups, never by the create's saved
 *       result, so a replay after a return is byte for byte the answer
 *       the create gave.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"

/* ===========================================================================
 * Error codes
 * ========================================================================= */
static const struct {
    const char *name;
    unsigned status;
    const char *message;
} code_table[] = {
#define CODE_ROW(name, status, text, msg) {text, status, msg},
    OG_SBX_CODE_MAP(CODE_ROW)
#undef CODE_ROW
};

const char *og_sbx_code_name(og_sbx_code c)
{
    return (unsigned)c < OG_SBX_C_COUNT ? code_table[c].name : "internal";
}

unsigned og_sbx_code_status(og_sbx_code c)
{
    return (unsigned)c < OG_SBX_C_COUNT ? code_table[c].status : 500;
}

const char *og_sbx_code_message(og_sbx_code c)
{
    return (unsigned)c < OG_SBX_C_COUNT ? code_table[c].message
                                        : "internal error";
}

int og_sbx_code_parse(const char *text)
{
    for (int i = 0; i < OG_SBX_C_COUNT; i++)
        if (text && strcmp(text, code_table[i].name) == 0)
            return i;
    return -1;
}

json_t *og_sbx_error_json(og_sbx_code c, const char *field)
{
    return og_sbx_error_json_text(c, field, NULL);
}

json_t *og_sbx_error_json_text(og_sbx_code c, const char *field,
                               const char *message)
{
    json_t *e = json_pack("{s:s, s:s}", "error", og_sbx_code_name(c),
                          "message",
                          message ? message : og_sbx_code_message(c));

    if (e && field && field[0] &&
        json_object_set_new(e, "field", json_string(field)) != 0) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

/* Length of s, or max + 1 when longer: hostile input costs max + 1 reads. */
static size_t bounded_len(const char *s, size_t max)
{
    size_t n = 0;

    while (n <= max && s[n] != '\0')
        n++;
    return n;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* 1 when every byte of s[0..n) lies in lo..hi. */
static bool bytes_in(const char *s, size_t n, unsigned char lo,
                     unsigned char hi)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < lo || (unsigned char)s[i] > hi)
            return false;
    return true;
}

/* Records a refusal: the code and the member or parameter it names. A
 * long name is cut on a UTF-8 character boundary, so the answer that
 * carries it stays valid JSON text. */
static int refuse(og_sbx_problem *why, og_sbx_code c, const char *field)
{
    size_t n = field ? bounded_len(field, sizeof why->field - 1) : 0;

    if (n == sizeof why->field) /* longer than fits: cut */
        for (n = sizeof why->field - 1;
             n > 0 && ((unsigned char)field[n] & 0xC0) == 0x80; n--)
            ;
    why->code = c;
    memcpy(why->field, field ? field : "", n);
    why->field[n] = '\0';
    return -1;
}

/* ===========================================================================
 * Identifiers
 * ========================================================================= */

/* Visible ASCII only: HTTP strips surrounding white space from header
 * values, so a key with spaces could arrive as another key. */
bool og_sbx_key_valid(const char *key)
{
    size_t n;

    if (!key)
        return false;
    n = bounded_len(key, OG_SBX_KEY_MAX);
    return n >= 1 && n <= OG_SBX_KEY_MAX && bytes_in(key, n, 0x21, 0x7e);
}

bool og_sbx_id_valid(const og_sbx_resource *res, const char *id)
{
    size_t n = id ? bounded_len(id, OG_SBX_ID_LEN) : 0;

    if (n != OG_SBX_ID_LEN || strncmp(id, res->id_prefix, 3) != 0)
        return false;
    for (size_t i = 3; i < n; i++)
        if (!is_digit(id[i]) && (id[i] < 'a' || id[i] > 'f'))
            return false;
    return true;
}

/* ===========================================================================
 * The resources: one row each, read by every rule below.
 * ========================================================================= */
const og_sbx_resource og_sbx_resources[OG_SBX_N_KINDS] = {
    [OG_SBX_CREDIT] = {
        .kind = OG_SBX_CREDIT,
        .path = "/v1/credits",
        .list = "credits",
        .id_prefix = "cr_",
        .id_log = "credit_id",
        .target = "account",
        .target_secret = false,
        .prefix = {[OG_SBX_TARGET_CLOSED] = "closed-",
                   [OG_SBX_TARGET_BUSY] = "busy-",
                   [OG_SBX_TARGET_ASYNC] = "async-"},
        .closed = OG_SBX_C_ACCOUNT_CLOSED,
        .completed = "succeeded",
        .returns = false,
        .table = "credits",
        .keys_table = "idempotency_keys",
        .key_ref = "credit_id",
        .c_requests = "create_requests",
        .c_replays = "idempotent_replays",
        .c_mismatches = "mismatches",
        .c_lookups = "lookups",
        .c_rows = "credits_created",
    },
    [OG_SBX_PAYOUT] = {
        .kind = OG_SBX_PAYOUT,
        .path = "/v1/payouts",
        .list = "payouts",
        .id_prefix = "po_",
        .id_log = "payout_id",
        /* A provider-side token standing for a bank account: a secret. */
        .target = "destination",
        .target_secret = true,
        .prefix = {[OG_SBX_TARGET_CLOSED] = "dst_closed_",
                   [OG_SBX_TARGET_BUSY] = "dst_busy_",
                   [OG_SBX_TARGET_ASYNC] = "dst_async_"},
        .closed = OG_SBX_C_DESTINATION_CLOSED,
        .completed = "completed",
        .returns = true,
        .msg_expired = "the request arrived after expires_at plus the "
                       "allowed skew: no payout was created, and this "
                       "request never will create one",
        .msg_rate_limited = "too many requests for this destination: "
                            "nothing was done, retry later",
        .table = "payouts",
        .keys_table = "payout_keys",
        .key_ref = "payout_id",
        .c_requests = "payout_requests",
        .c_replays = "payout_replays",
        .c_mismatches = "payout_mismatches",
        .c_lookups = "payout_lookups",
        .c_rows = "payouts_created",
        .c_returned = "payouts_returned",
    },
};

/* ===========================================================================
 * Amounts: digits[.digits], positive, canonical (SC2, SC5).
 * ========================================================================= */
#define AMOUNT_INPUT_MAX 256

int og_sbx_amount_canonical(const char *in, char *out, size_t outlen)
{
    size_t n, i = 0, int_end, int_start = 0, frac_start, frac_end, o = 0;
    size_t int_digits, frac_digits;

    if (!in || !out)
        return -1;
    n = bounded_len(in, AMOUNT_INPUT_MAX);
    if (n == 0 || n > AMOUNT_INPUT_MAX)
        return -1;
    while (i < n && is_digit(in[i]))
        i++;
    int_end = i;
    if (int_end == 0)
        return -1; /* ".5", "-1", "+1", " 1" */
    frac_start = frac_end = n;
    if (i < n) {
        if (in[i] != '.')
            return -1; /* "1e5", "1 " */
        frac_start = ++i;
        while (i < n && is_digit(in[i]))
            i++;
        if (i != n || frac_start == n)
            return -1; /* "1.2.3", "1." */
    }
    while (int_start < int_end && in[int_start] == '0')
        int_start++;
    while (frac_end > frac_start && in[frac_end - 1] == '0')
        frac_end--;
    int_digits = int_end - int_start;
    frac_digits = frac_end - frac_start;
    if ((int_digits == 0 && frac_digits == 0) ||
        frac_digits > OG_SBX_AMOUNT_SCALE ||
        int_digits + frac_digits > OG_SBX_AMOUNT_DIGITS)
        return -1; /* zero, or beyond NUMERIC(38, 18) */
    if (outlen < (int_digits ? int_digits : 1) +
                     (frac_digits ? 1 + frac_digits : 0) + 1)
        return -1;
    if (int_digits == 0)
        out[o++] = '0';
    memcpy(out + o, in + int_start, int_digits);
    o += int_digits;
    if (frac_digits) {
        out[o++] = '.';
        memcpy(out + o, in + frac_start, frac_digits);
        o += frac_digits;
    }
    out[o] = '\0';
    return 0;
}

/* ===========================================================================
 * Time: RFC 3339 <-> microseconds since the epoch, by civil-date
 * arithmetic (no time zone, no locale, exact for 1970..9999).
 * ========================================================================= */
#define US_PER_S INT64_C(1000000)
#define S_PER_DAY INT64_C(86400)
#define TIME_MIN_US INT64_C(0)
/* 9999-12-31T23:59:59.999999Z */
#define TIME_MAX_US (INT64_C(253402300799) * US_PER_S + 999999)

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dim[12] = {31, 28, 31, 30, 31, 30,
                                31, 31, 30, 31, 30, 31};

    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Days since 1970-01-01 of y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The civil date of day z since 1970-01-01. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* Exactly n digits at s into *v. 0 or -1. */
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

/* The fraction ".d{1,9}" at s[*i] (optional) into *frac_us, truncated to
 * microseconds so a deadline never moves later than written. 0 or -1. */
static int read_fraction(const char *s, size_t n, size_t *i, int64_t *frac_us)
{
    size_t start, nd;

    *frac_us = 0;
    if (s[*i] != '.')
        return 0;
    start = ++*i;
    while (*i < n && is_digit(s[*i]))
        ++*i;
    nd = *i - start;
    if (nd < 1 || nd > 9)
        return -1;
    for (size_t k = 0; k < 6; k++)
        *frac_us = *frac_us * 10 + (k < nd ? s[start + k] - '0' : 0);
    return 0;
}

/* The zone "Z" or "+-HH:MM" ending the text at s[i]; *offset_s east of UTC.
 * 0 or -1 (a local time without zone is not an instant). */
static int read_zone(const char *s, size_t n, size_t i, int64_t *offset_s)
{
    int oh, om;

    if ((s[i] == 'Z' || s[i] == 'z') && i + 1 == n) {
        *offset_s = 0;
        return 0;
    }
    if ((s[i] != '+' && s[i] != '-') || n - i != 6 ||
        read_digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
        read_digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
        return -1;
    *offset_s = (int64_t)oh * 3600 + om * 60;
    if (s[i] == '-')
        *offset_s = -*offset_s;
    return 0;
}

int og_sbx_time_parse(const char *s, int64_t *us)
{
    int year, mon, day, hour, min, sec;
    int64_t frac_us, offset_s, v;
    size_t n, i = 19;

    if (!s || !us)
        return -1;
    n = bounded_len(s, OG_SBX_TIME_MAX);
    if (n > OG_SBX_TIME_MAX || n < 20)
        return -1;
    if (read_digits(s, 4, &year) || s[4] != '-' ||
        read_digits(s + 5, 2, &mon) || s[7] != '-' ||
        read_digits(s + 8, 2, &day) || (s[10] != 'T' && s[10] != 't') ||
        read_digits(s + 11, 2, &hour) || s[13] != ':' ||
        read_digits(s + 14, 2, &min) || s[16] != ':' ||
        read_digits(s + 17, 2, &sec))
        return -1;
    /* Second 60 is refused: without a leap-second table it has no exact
     * instant, and POSIX clocks never produce it. */
    if (mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) ||
        hour > 23 || min > 59 || sec > 59)
        return -1;
    if (read_fraction(s, n, &i, &frac_us) != 0 || i >= n ||
        read_zone(s, n, i, &offset_s) != 0)
        return -1;
    v = (days_from_civil(year, mon, day) * S_PER_DAY + (int64_t)hour * 3600 +
         (int64_t)min * 60 + sec - offset_s) * US_PER_S + frac_us;
    if (v < TIME_MIN_US || v > TIME_MAX_US)
        return -1;
    *us = v;
    return 0;
}

/* v as exactly width digits at p (0 <= v < 10^width). */
static void put_digits(char *p, int64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

char *og_sbx_time_format(int64_t us, char *buf, size_t len)
{
    char tmp[28] = "invalid";
    int64_t days, rem, y, sod;
    int m, d;

    if (!buf || len == 0)
        return buf;
    if (us >= TIME_MIN_US && us <= TIME_MAX_US) {
        days = us / (S_PER_DAY * US_PER_S);
        rem = us % (S_PER_DAY * US_PER_S);
        sod = rem / US_PER_S;
        civil_from_days(days, &y, &m, &d);
        memcpy(tmp, "0000-00-00T00:00:00.000000Z", 28);
        put_digits(tmp, y, 4);
        put_digits(tmp + 5, m, 2);
        put_digits(tmp + 8, d, 2);
        put_digits(tmp + 11, sod / 3600, 2);
        put_digits(tmp + 14, sod / 60 % 60, 2);
        put_digits(tmp + 17, sod % 60, 2);
        put_digits(tmp + 20, rem % US_PER_S, 6);
    }
    snprintf(buf, len, "%s", tmp);
    return buf;
}

/* ===========================================================================
 * --listen
 * ========================================================================= */
int og_sbx_listen_parse(const char *hostport, char *host, size_t hostlen,
                        int *port)
{
    const char *colon, *h = hostport;
    size_t hn;
    char *end;
    long p;

    if (!hostport || !(colon = strrchr(hostport, ':')))
        return -1;
    hn = (size_t)(colon - hostport);
    if (h[0] == '[') { /* "[::1]:8080" */
        if (hn < 2 || h[hn - 1] != ']')
            return -1;
        h++;
        hn -= 2;
    }
    if (hn == 0 || hn >= hostlen || !is_digit(colon[1]))
        return -1;
    p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p < 0 || p > 65535)
        return -1;
    memcpy(host, h, hn);
    host[hn] = '\0';
    *port = (int)p;
    return 0;
}

/* ===========================================================================
 * The create request (SC1, SC2)
 * ========================================================================= */

/* Unknown members, in body order: the first one found is named. */
static int members_only(json_t *body, const char *const *allowed,
                        og_sbx_problem *why)
{
    const char *key;
    json_t *v;

    json_object_foreach(body, key, v) {
        size_t i;

        (void)v;
        for (i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (!allowed[i])
            return refuse(why, OG_SBX_C_INVALID_REQUEST, key);
    }
    return 0;
}

/* A required string member of at most max bytes (NUL-free) into out. */
static int member_str(json_t *body, const char *name, size_t max,
                      const char **out, og_sbx_problem *why)
{
    json_t *v = json_object_get(body, name);

    if (!json_is_string(v) || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v))
        return refuse(why, OG_SBX_C_INVALID_REQUEST, name);
    *out = json_string_value(v);
    return 0;
}

int og_sbx_params_parse(const og_sbx_resource *res, json_t *body,
                        og_sbx_params *out, og_sbx_problem *why)
{
    const char *const allowed[] = {res->target, "amount", "currency",
                                   "reference", "expires_at", NULL};
    const char *target, *amount, *currency, *reference, *expires_at;
    og_sbx_params p;

    if (!json_is_object(body))
        return refuse(why, OG_SBX_C_INVALID_JSON, NULL);
    memset(&p, 0, sizeof p);
    if (members_only(body, allowed, why) != 0)
        return -1;
    if (member_str(body, res->target, OG_SBX_TARGET_MAX, &target, why) ||
        member_str(body, "amount", AMOUNT_INPUT_MAX, &amount, why) ||
        member_str(body, "currency", 3, &currency, why) ||
        member_str(body, "reference", OG_SBX_REFERENCE_MAX, &reference,
                   why) ||
        member_str(body, "expires_at", OG_SBX_TIME_MAX, &expires_at, why))
        return -1;
    /* Targets follow oncegate's identifier rule; references may hold
     * spaces (they are free text a client chooses). */
    if (!target[0] || !bytes_in(target, strlen(target), 0x21, 0x7e))
        return refuse(why, OG_SBX_C_INVALID_REQUEST, res->target);
    if (og_sbx_amount_canonical(amount, p.amount, sizeof p.amount) != 0)
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "amount");
    if (strlen(currency) != 3 || !bytes_in(currency, 3, 'A', 'Z'))
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "currency");
    if (!reference[0] || !bytes_in(reference, strlen(reference), 0x20, 0x7e))
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "reference");
    if (og_sbx_time_parse(expires_at, &p.expires_at_us) != 0)
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "expires_at");
    snprintf(p.target, sizeof p.target, "%s", target);
    memcpy(p.currency, currency, 4);
    snprintf(p.reference, sizeof p.reference, "%s", reference);
    *out = p;
    return 0;
}

bool og_sbx_params_equal(const og_sbx_params *a, const og_sbx_params *b)
{
    return strcmp(a->target, b->target) == 0 &&
           strcmp(a->amount, b->amount) == 0 &&
           strcmp(a->currency, b->currency) == 0 &&
           strcmp(a->reference, b->reference) == 0 &&
           a->expires_at_us == b->expires_at_us;
}

og_sbx_target_class og_sbx_target_classify(const og_sbx_resource *res,
                                           const char *target)
{
    for (int c = OG_SBX_TARGET_OPEN + 1; c < OG_SBX_N_TARGET_CLASSES; c++)
        if (res->prefix[c] &&
            strncmp(target, res->prefix[c], strlen(res->prefix[c])) == 0)
            return (og_sbx_target_class)c;
    return OG_SBX_TARGET_OPEN;
}

/* ===========================================================================
 * Time rules (half-open; one clock)
 * ========================================================================= */
bool og_sbx_key_retained(const og_sbx_policy *p, int64_t recorded_us,
                         int64_t now_us)
{
    return now_us < recorded_us + p->retention_us;
}

bool og_sbx_request_expired(const og_sbx_policy *p, int64_t expires_at_us,
                            int64_t now_us)
{
    return now_us > expires_at_us + p->skew_us;
}

bool og_sbx_effect_visible(const og_sbx_policy *p, int64_t created_us,
                           int64_t now_us)
{
    return now_us >= created_us + p->visibility_delay_us;
}

/* ===========================================================================
 * The create decision (SC3, SC4)
 * ========================================================================= */
og_sbx_decision og_sbx_create_decide(const og_sbx_resource *res,
                                     const og_sbx_policy *p,
                                     const og_sbx_params *req,
                                     const og_sbx_saved *saved,
                                     int64_t now_us)
{
    if (saved)
        return og_sbx_params_equal(req, &saved->params) ? OG_SBX_DO_REPLAY
                                                        : OG_SBX_DO_MISMATCH;
    /* Expiry first: a late request has no effect of any kind, not even a
     * recorded refusal. */
    if (og_sbx_request_expired(p, req->expires_at_us, now_us))
        return OG_SBX_DO_EXPIRE;
    switch (og_sbx_target_classify(res, req->target)) {
    case OG_SBX_TARGET_BUSY: return OG_SBX_DO_RATE_LIMIT;
    case OG_SBX_TARGET_CLOSED: return OG_SBX_DO_REFUSE_CLOSED;
    case OG_SBX_TARGET_ASYNC: return OG_SBX_DO_CREATE_ASYNC;
    default: break;
    }
    return OG_SBX_DO_CREATE;
}

bool og_sbx_decision_writes(og_sbx_decision d)
{
    return d == OG_SBX_DO_REFUSE_CLOSED || d == OG_SBX_DO_CREATE ||
           d == OG_SBX_DO_CREATE_ASYNC;
}

/* ===========================================================================
 * Answers
 * ========================================================================= */
/* The record at now; with_return: as lookups show it (a return and its
 * time), else as the create made it (SC7). */
static json_t *record_json(const og_sbx_resource *res, const og_sbx_record *c,
                           int64_t now_us, bool with_return)
{
    bool returned = with_return && c->returned;
    char created[32], returned_at[32];
    json_t *o;

    og_sbx_time_format(c->created_us, created, sizeof created);
    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", c->id,
                  res->target, c->params.target, "amount", c->params.amount,
                  "currency", c->params.currency, "reference",
                  c->params.reference, "status",
                  returned                   ? "returned"
                  : now_us < c->completes_us ? "pending"
                                             : res->completed,
                  "created_at", created);
    if (o && returned &&
        json_object_set_new(o, "returned_at",
                            json_string(og_sbx_time_format(
                                c->returned_us, returned_at,
                                sizeof returned_at))) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

json_t *og_sbx_record_json(const og_sbx_resource *res,
                           const og_sbx_record *c, int64_t now_us)
{
    return record_json(res, c, now_us, true);
}

/* The saved result's answer at now: the record (pending or not) or the
 * recorded refusal. */
static int saved_answer(const og_sbx_resource *res, const og_sbx_saved *s,
                        int64_t now_us, unsigned *status, json_t **body)
{
    json_t *b;

    if (s->refused) {
        b = og_sbx_error_json(s->refusal, NULL);
        *status = og_sbx_code_status(s->refusal);
    } else if (now_us < s->record.completes_us) {
        b = json_pack("{s:s, s:s}", "id", s->record.id, "status", "pending");
        *status = 202;
    } else {
        b = record_json(res, &s->record, now_us, false);
        *status = 201;
    }
    if (!b)
        return OG_SBX_ENOMEM;
    *body = b;
    return 0;
}

int og_sbx_result_answer(const og_sbx_resource *res, const og_sbx_result *r,
                         unsigned *status, json_t **body)
{
    const char *text = NULL;
    og_sbx_code c;
    json_t *b;

    switch (r->decision) {
    case OG_SBX_DO_MISMATCH: c = OG_SBX_C_IDEMPOTENCY_MISMATCH; break;
    case OG_SBX_DO_RATE_LIMIT:
        c = OG_SBX_C_RATE_LIMITED;
        text = res->msg_rate_limited;
        break;
    case OG_SBX_DO_EXPIRE:
        c = OG_SBX_C_REQUEST_EXPIRED;
        text = res->msg_expired;
        break;
    default: return saved_answer(res, &r->saved, r->now_us, status, body);
    }
    if (!(b = og_sbx_error_json_text(c, NULL, text)))
        return OG_SBX_ENOMEM;
    *status = og_sbx_code_status(c);
    *body = b;
    return 0;
}

/* ===========================================================================
 * Stats: the members of GET /_control/stats, in one list
 * ========================================================================= */
static const struct {
    const char *name;
    size_t off;
} stat_table[] = {
#define STAT_ROW(name) {#name, offsetof(og_sbx_stats, name)},
    OG_SBX_STATS_MAP(STAT_ROW)
#undef STAT_ROW
};
#define N_STATS (sizeof stat_table / sizeof stat_table[0])

int64_t *og_sbx_stat(og_sbx_stats *s, const char *name)
{
    for (size_t i = 0; name && i < N_STATS; i++)
        if (strcmp(name, stat_table[i].name) == 0)
            return (int64_t *)((char *)s + stat_table[i].off);
    return NULL;
}

json_t *og_sbx_stats_json(const og_sbx_stats *s)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < N_STATS; i++) {
        const int64_t *v =
            (const int64_t *)((const char *)s + stat_table[i].off);

        if (json_object_set_new(o, stat_table[i].name,
                                json_integer((json_int_t)*v)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* ===========================================================================
 * Authorization codes: the form-encoded token request (RFC 6749 4.1.3)
 * ========================================================================= */

/* The value of hex digit c, or -1. */
static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes n bytes of form text at s ('+' a space, %XX a byte) into out
 * (room for n + 1 bytes), terminated, and its length into *outlen. 0, or
 * -1 for a bad escape or a NUL byte (which a C string cannot carry). */
static int form_decode(const char *s, size_t n, char *out, size_t *outlen)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];

        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            /* Both digits must be inside the n bytes. */
            int hi = i + 2 < n ? hex_val(s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_val(s[i + 2]) : -1;

            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    *outlen = o;
    return 0;
}

int og_sbx_form_parse(const char *body, size_t len, json_t **out,
                      og_sbx_problem *why)
{
    json_t *form = json_object();
    char *name = malloc(len + 1), *value = malloc(len + 1);
    size_t i = 0;
    int rc = -1;

    if (!form || !name || !value) {
        rc = OG_SBX_ENOMEM;
        goto out;
    }
    while (i <= len) {
        size_t end = i, eq, nlen, vlen;
        json_t *v;

        while (end < len && body[end] != '&')
            end++;
        for (eq = i; eq < end && body[eq] != '='; eq++)
            ;
        if (end > i) {
            if (json_object_size(form) == OG_SBX_FORM_PARAMS_MAX ||
                form_decode(body + i, eq - i, name, &nlen) != 0 ||
                form_decode(body + eq + (eq < end), end - eq - (eq < end),
                            value, &vlen) != 0) {
                refuse(why, OG_SBX_C_INVALID_REQUEST, "form");
                goto out;
            }
            /* jansson refuses names and values that are not UTF-8. */
            v = json_stringn(value, vlen);
            if (v && json_object_get(form, name)) {
                json_decref(v);
                refuse(why, OG_SBX_C_INVALID_REQUEST, name); /* repeated */
                goto out;
            }
            if (!v || json_object_set_new(form, name, v) != 0) {
                refuse(why, OG_SBX_C_INVALID_REQUEST, "form");
                goto out;
            }
        }
        i = end + 1;
    }
    *out = form;
    form = NULL;
    rc = 0;
out:
    json_decref(form);
    free(name);
    free(value);
    return rc;
}

int og_sbx_token_request_parse(json_t *form, const char **code,
                               og_sbx_problem *why)
{
    const char *gt = json_string_value(json_object_get(form, "grant_type"));
    const char *c = json_string_value(json_object_get(form, "code"));

    /* "Parameters sent without a value MUST be treated as if they were
     * omitted" (RFC 6749 3.2). */
    if (!gt || !gt[0])
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "grant_type");
    if (strcmp(gt, "authorization_code") != 0)
        return refuse(why, OG_SBX_C_UNSUPPORTED_GRANT_TYPE, "grant_type");
    if (!c || !c[0])
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "code");
    *code = c;
    return 0;
}

json_t *og_sbx_token_json(const char *access_token, const char *refresh_token)
{
    return json_pack("{s:s, s:s, s:i, s:s}", "access_token", access_token,
                     "token_type", "Bearer", "expires_in",
                     OG_SBX_TOKEN_EXPIRES_S, "refresh_token", refresh_token);
}

json_t *og_sbx_oauth_error_json(og_sbx_code c, const char *field)
{
    char text[160];

    if (c == OG_SBX_C_INVALID_REQUEST)
        snprintf(text, sizeof text,
                 "a parameter is missing, repeated or malformed: %s",
                 field && field[0] ? field : "form");
    else
        snprintf(text, sizeof text, "%s", og_sbx_code_message(c));
    return json_pack("{s:s, s:s}", "error", og_sbx_code_name(c),
                     "error_description", text);
}

/* ===========================================================================
 * Faults
 * ========================================================================= */
static const struct {
    const char *name;
    bool delay;
} fault_table[] = {
    {"none", false},
#define FAULT_ROW(name, text, delay) {text, delay},
    OG_SBX_FAULT_MAP(FAULT_ROW)
#undef FAULT_ROW
};
#define N_FAULT_KINDS (sizeof fault_table / sizeof fault_table[0])

const char *og_sbx_fault_name(og_sbx_fault_kind k)
{
    return (size_t)k < N_FAULT_KINDS ? fault_table[k].name : "none";
}

/* An optional integer member in lo..hi into *out (left alone if absent). */
static int member_int(json_t *body, const char *name, int64_t lo, int64_t hi,
                      int64_t *out, og_sbx_problem *why)
{
    json_t *v = json_object_get(body, name);

    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo ||
        json_integer_value(v) > hi)
        return refuse(why, OG_SBX_C_INVALID_REQUEST, name);
    *out = json_integer_value(v);
    return 0;
}

/* One member of "match": a string of 1..max bytes, every byte in lo..hi,
 * into out (max + 1 bytes); refused naming "match.<name>". */
static int match_str(json_t *m, const char *name, size_t max, unsigned char lo,
                     char *out, og_sbx_problem *why)
{
    json_t *v = json_object_get(m, name);
    char field[32];
    size_t n;

    if (!v)
        return 0;
    n = json_is_string(v) ? json_string_length(v) : 0;
    if (n == 0 || n > max || strlen(json_string_value(v)) != n ||
        !bytes_in(json_string_value(v), n, lo, 0x7e)) {
        snprintf(field, sizeof field, "match.%s", name);
        return refuse(why, OG_SBX_C_INVALID_REQUEST, field);
    }
    memcpy(out, json_string_value(v), n + 1);
    return 0;
}

/* The optional "match" of an aimed fault. Its values follow the rules of
 * the request members they are compared with (an Idempotency-Key, a
 * reference, an account), so a fault that no valid request could match is
 * refused as the mistake it is, instead of staying armed for ever. */
static int match_parse(json_t *body, og_sbx_fault *out, og_sbx_problem *why)
{
    static const char *const allowed[] = {"idempotency_key", "reference",
                                          "account", NULL};
    json_t *m = json_object_get(body, "match");
    const char *key;
    json_t *v;

    if (!m)
        return 0;
    if (!json_is_object(m) || json_object_size(m) == 0)
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "match");
    json_object_foreach(m, key, v) {
        /* Longer than why->field holds when key is: refuse() then cuts
         * it on a character boundary (a cut here could split one). */
        char field[sizeof why->field + 8];
        size_t i;

        (void)v;
        for (i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (!allowed[i]) {
            snprintf(field, sizeof field, "match.%.*s",
                     (int)sizeof why->field, key);
            return refuse(why, OG_SBX_C_INVALID_REQUEST, field);
        }
    }
    if (match_str(m, "idempotency_key", OG_SBX_KEY_MAX, 0x21,
                  out->match.key, why) != 0 ||
        match_str(m, "reference", OG_SBX_REFERENCE_MAX, 0x20,
                  out->match.reference, why) != 0 ||
        match_str(m, "account", OG_SBX_TARGET_MAX, 0x21, out->match.account,
                  why) != 0)
        return -1;
    out->aimed = true;
    return 0;
}

int og_sbx_fault_parse(json_t *body, og_sbx_fault *out, og_sbx_problem *why)
{
    static const char *const allowed[] = {"fault", "count", "ms", "match",
                                          NULL};
    const char *name;
    int64_t count = 1, ms = -1;
    size_t k;

    if (!json_is_object(body))
        return refuse(why, OG_SBX_C_INVALID_JSON, NULL);
    memset(out, 0, sizeof *out);
    if (members_only(body, allowed, why) != 0 ||
        member_str(body, "fault", 64, &name, why) != 0 ||
        member_int(body, "count", 1, OG_SBX_FAULT_COUNT_MAX, &count, why) ||
        member_int(body, "ms", 0, OG_SBX_FAULT_MS_MAX, &ms, why))
        return -1;
    for (k = 1; k < N_FAULT_KINDS; k++)
        if (strcmp(name, fault_table[k].name) == 0)
            break;
    if (k == N_FAULT_KINDS)
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "fault");
    /* A delay without "ms", or "ms" on a fault that never waits, is a
     * mistake in the test that armed it: refuse rather than guess. */
    if (fault_table[k].delay != (ms >= 0))
        return refuse(why, OG_SBX_C_INVALID_REQUEST, "ms");
    if (match_parse(body, out, why) != 0)
        return -1;
    out->kind = (og_sbx_fault_kind)k;
    out->count = (int)count;
    out->ms = ms < 0 ? 0 : ms;
    return 0;
}

int og_sbx_faults_arm(og_sbx_faults *q, const og_sbx_fault *f)
{
    if (q->n == OG_SBX_FAULTS_MAX)
        return -1;
    q->q[q->n++] = *f;
    return 0;
}

/* 1 when want names nothing or exactly have. */
static bool match_one(const char *want, const char *have)
{
    return !want[0] || (have && strcmp(want, have) == 0);
}

static bool fault_matches(const og_sbx_fault *f, const og_sbx_fault_subject *s)
{
    return match_one(f->match.key, s ? s->key : NULL) &&
           match_one(f->match.reference, s ? s->reference : NULL) &&
           match_one(f->match.account, s ? s->account : NULL);
}

og_sbx_fault og_sbx_faults_take(og_sbx_faults *q,
                                const og_sbx_fault_subject *subject)
{
    og_sbx_fault one;
    size_t i, pick = q->n;

    memset(&one, 0, sizeof one);
    one.kind = OG_SBX_FAULT_NONE;
    /* An aimed fault the request matches wins over the unaimed head: it
     * was armed for this request, and the head can fire on any other. */
    for (i = 0; i < q->n && pick == q->n; i++)
        if (q->q[i].aimed && fault_matches(&q->q[i], subject))
            pick = i;
    for (i = 0; i < q->n && pick == q->n; i++)
        if (!q->q[i].aimed)
            pick = i;
    if (pick == q->n)
        return one;
    one = q->q[pick];
    one.count = 1;
    if (--q->q[pick].count == 0) {
        memmove(&q->q[pick], &q->q[pick + 1],
                (q->n - pick - 1) * sizeof q->q[0]);
        q->n--;
    }
    return one;
}

void og_sbx_faults_clear(og_sbx_faults *q)
{
    q->n = 0;
}

/* {"idempotency_key"?, "reference"?, "account"?} of an aimed fault. */
static json_t *match_json(const og_sbx_fault_match *m)
{
    json_t *o = json_object();

    if (o && ((m->key[0] && json_object_set_new(o, "idempotency_key",
                                                json_string(m->key)) != 0) ||
              (m->reference[0] &&
               json_object_set_new(o, "reference",
                                   json_string(m->reference)) != 0) ||
              (m->account[0] && json_object_set_new(
                                    o, "account", json_string(m->account)) !=
                                    0))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *og_sbx_faults_json(const og_sbx_faults *q)
{
    json_t *a = json_array();

    if (!a)
        return NULL;
    for (size_t i = 0; i < q->n; i++) {
        const og_sbx_fault *f = &q->q[i];
        json_t *o = json_pack("{s:s, s:i}", "fault", og_sbx_fault_name(f->kind),
                              "count", f->count);

        if (o && fault_table[f->kind].delay &&
            json_object_set_new(o, "ms", json_integer(f->ms)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (o && f->aimed &&
            json_object_set_new(o, "match", match_json(&f->match)) != 0) {
            json_decref(o);
            o = NULL;
        }
        if (json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
