/*
 * test_validate.c — table-driven tests for lib/core/validate.c: identifiers,
 * UUIDs, currencies, amounts, RFC 3339 timestamps and the admission request
 * builder. Each table row is a claim from the contract in lib/core/core_int.h and
 * include/oncegate/core.h; a failing row names its input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/core_int.h"
#include "support.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Table-row assertions: a failure names the row and its input, so the
 * passing run stays quiet and a failing one says which claim broke. */
#define EXPECT_INT(got, want, row, input)                                      \
    do {                                                                       \
        intmax_t got_ = (got), want_ = (want);                                 \
        if (got_ != want_)                                                     \
            fail_msg("row %zu \"%s\": %s = %jd, want %jd", (size_t)(row),      \
                     (input), #got, got_, want_);                              \
    } while (0)
#define EXPECT_STR(got, want, row, input)                                      \
    do {                                                                       \
        if (strcmp((got), (want)) != 0)                                        \
            fail_msg("row %zu \"%s\": %s = \"%s\", want \"%s\"",             \
                     (size_t)(row), (input), #got, (got), (want));             \
    } while (0)

/* Repeats c n times into buf (n < size). */
static const char *rep(char *buf, size_t size, char c, size_t n)
{
    assert_true(n < size);
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

/* ===========================================================================
 * Identifiers
 * ========================================================================= */

static void test_id_valid(void **state)
{
    static const char *const ok[] = {
        "a", "issuer-1", "https://issuer.example/", "A_b.c~d!#$%&'()*+,/:;<=>?@[]^`{|}",
        "\x21", "\x7e", "0",
    };
    for (size_t i = 0; i < N_ELEMS(ok); i++) {
        EXPECT_INT(og__id_check(ok[i]), 0, i, ok[i]);
    }
    char buf[256];
    assert_int_equal(og__id_check(rep(buf, sizeof buf, 'x', OG_ID_MAX)), 0);
}

static void test_id_invalid(void **state)
{
    static const char *const bad[] = {
        "",          /* empty */
        " ",         /* space */
        "a b",       /* inner space */
        "a\tb",      /* control: tab */
        "a\x01",     /* control */
        "\x1f",      /* last control below space */
        "a\x7f",     /* DEL */
        "caf\xc3\xa9", /* UTF-8 e-acute */
        "\x80",      /* high byte */
        "\xff",
        "a\n",
    };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        EXPECT_INT(og__id_check(bad[i]), -1, i, bad[i]);
    }
    assert_int_equal(og__id_check(NULL), -1);
    char buf[512];
    assert_int_equal(og__id_check(rep(buf, sizeof buf, 'x', OG_ID_MAX + 1)), -1);
    assert_int_equal(og__id_check(rep(buf, sizeof buf, 'x', 500)), -1);
}

/* ===========================================================================
 * UUIDs
 * ========================================================================= */

static void test_uuid_valid(void **state)
{
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"123e4567-e89b-12d3-a456-426614174000",
         "123e4567-e89b-12d3-a456-426614174000"},
        {"123E4567-E89B-12D3-A456-426614174000",
         "123e4567-e89b-12d3-a456-426614174000"},
        {"AbCdEf01-2345-6789-aBcD-eF0123456789",
         "abcdef01-2345-6789-abcd-ef0123456789"},
        {"00000000-0000-0000-0000-000000000001",
         "00000000-0000-0000-0000-000000000001"},
        {"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
         "ffffffff-ffff-ffff-ffff-ffffffffffff"},
    };
    for (size_t i = 0; i < N_ELEMS(rows); i++) {
        char out[OG_UUID_LEN + 1], again[OG_UUID_LEN + 1];
        EXPECT_INT(og__uuid_normalize(rows[i].in, out), 0, i, rows[i].in);
        EXPECT_STR(out, rows[i].want, i, rows[i].in);
        /* Canonical is a fixed point. */
        assert_int_equal(og__uuid_normalize(out, again), 0);
        assert_string_equal(again, out);
    }
}

static void test_uuid_invalid(void **state)
{
    static const char *const bad[] = {
        "",
        "00000000-0000-0000-0000-000000000000",  /* nil */
        "123e4567-e89b-12d3-a456-42661417400",   /* 35 chars */
        "123e4567-e89b-12d3-a456-4266141740000", /* 37 chars */
        "123e4567e-89b-12d3-a456-426614174000",  /* dash moved */
        "123e4567-e89b12d3--a456-426614174000",  /* dash moved */
        "123e4567_e89b_12d3_a456_426614174000",  /* wrong separator */
        "123e4567e89b12d3a456426614174000",      /* no dashes */
        "123e4567-e89b-12d3-a456-42661417400g",  /* non-hex */
        "123e4567-e89b-12d3-a456-42661417400 ",  /* space */
        " 123e4567-e89b-12d3-a456-42661417400",
        "{23e4567-e89b-12d3-a456-42661417400}",
        "123e4567-e89b-12d3-a456-4266141740\xc3\xa9",
        "123e4567-e89b-12d3-a456-426614174000\n",
    };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        char out[OG_UUID_LEN + 1];
        memset(out, 'Q', sizeof out);
        EXPECT_INT(og__uuid_normalize(bad[i], out), -1, i, bad[i]);
        /* Out-parameters are written only on success. */
        for (size_t k = 0; k < sizeof out; k++)
            assert_int_equal(out[k], 'Q');
    }
    char out[OG_UUID_LEN + 1];
    assert_int_equal(og__uuid_normalize(NULL, out), -1);
}

/* ===========================================================================
 * Currency
 * ========================================================================= */

static void test_currency(void **state)
{
    static const char *const ok[] = {"EUR", "USD", "JPY", "BHD", "CLF"};
    /* Well-formed codes outside the ISO 4217 table, and codes without minor
     * units (metals, funds, testing), are refused too: an amount can only
     * be checked against a currency whose minor units are known. */
    static const char *const bad[] = {
        "", "E", "EU", "EURO", "eur", "Eur", "EU1", "E R", "EUR ", " EUR",
        "\xc3\x89UR", "@AA", "[AA", "AAA", "ZZZ", "XAU", "XTS", "XXX",
    };
    for (size_t i = 0; i < N_ELEMS(ok); i++)
        assert_int_equal(og__currency_check(ok[i]), 0);
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        EXPECT_INT(og__currency_check(bad[i]), -1, i, bad[i]);
    }
    assert_int_equal(og__currency_check(NULL), -1);
}

/* ===========================================================================
 * Amounts
 * ========================================================================= */

/* An amount finer than its currency's ISO 4217 minor units is
 * refused with one code, whatever the route (og_amount_check is what the
 * grant, operation and CLI paths call; the payout terms give the same code,
 * tests/test_payout_terms.c). */
static void amounts_fit_the_currency_minor_units(void **state)
{
    static const struct {
        const char *amount, *currency;
        int rc;
    } rows[] = {
        {"0.01", "USD", 0},
        {"15", "JPY", 0},
        {"250.000", "USD", 0},  /* canonical "250": its zeros carry nothing */
        {"15.0", "JPY", 0},     /* canonical "15" */
        {"0.001", "BHD", 0},
        {"1.2345", "CLF", 0},
        {"0.001", "USD", OG_EAMOUNT_MINOR_UNITS},
        {"1.5", "JPY", OG_EAMOUNT_MINOR_UNITS},
        {"250.001", "EUR", OG_EAMOUNT_MINOR_UNITS},
        {"0.0001", "BHD", OG_EAMOUNT_MINOR_UNITS},
        {"1.23456", "CLF", OG_EAMOUNT_MINOR_UNITS},
        {"0.000000000000000001", "USD", OG_EAMOUNT_MINOR_UNITS},
        {"1e5", "USD", OG_EAMOUNT},  /* the grammar first */
        {"0", "USD", OG_EAMOUNT},
        {"1", "ZZZ", OG_ECURRENCY},  /* not in ISO 4217 */
        {"1", "XAU", OG_ECURRENCY},  /* no minor units */
        {"1", "usd", OG_ECURRENCY},
        {"1", NULL, OG_ECURRENCY},
        {NULL, "USD", OG_EAMOUNT},
    };
    (void)state;
    for (size_t i = 0; i < N_ELEMS(rows); i++)
        EXPECT_INT(og_amount_check(rows[i].amount, rows[i].currency),
                   rows[i].rc, i, rows[i].amount ? rows[i].amount : "NULL");
    assert_string_equal(og_err_name(OG_EAMOUNT_MINOR_UNITS),
                        "input.amount_minor_units");

    /* What the store writes passes the same rule (og__admit_req_build). */
    og_grant g = {"issuer.example", "grant-1",
                  INT64_C(1795949100) * 1000000, NULL, OG_FORM_TOKEN};
    og_intent in = {"123e4567-e89b-12d3-a456-426614174000", "caller-7",
                    "acct-42", "0.001", "USD"};
    og__admit_req req;
    assert_int_equal(og__admit_req_build(&g, &in, &req),
                     OG_EAMOUNT_MINOR_UNITS);
    in.amount = "1.5";
    in.currency = "JPY";
    assert_int_equal(og__admit_req_build(&g, &in, &req),
                     OG_EAMOUNT_MINOR_UNITS);
    in.amount = "15";
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
    in.amount = "0.01";
    in.currency = "USD";
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
}

static void test_amount_valid(void **state)
{
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"250", "250"},
        {"250.0", "250"},
        {"250.00", "250"},
        {"0250", "250"},
        {"0250.50", "250.5"},
        {"0.50", "0.5"},
        {"000.1", "0.1"},
        {"1", "1"},
        {"10", "10"},
        {"100.000", "100"},
        {"0.000001", "0.000001"},
        {"1.5000000000000000000000", "1.5"}, /* zeros past 18 digits */
        {"0.123456789012345678", "0.123456789012345678"}, /* 18 fraction */
        {"0.000000000000000001", "0.000000000000000001"},
        {"12345678901234567890123456789012345678",
         "12345678901234567890123456789012345678"}, /* 38 digits */
        {"12345678901234567890.123456789012345678",
         "12345678901234567890.123456789012345678"}, /* 20 + 18 */
        {"99999999999999999999999999999999999999",
         "99999999999999999999999999999999999999"},
        {"000000000000000000000000000000000000000000001", "1"},
        {"00000000000000000000000000000000000000000000.5", "0.5"},
    };
    for (size_t i = 0; i < N_ELEMS(rows); i++) {
        char out[OG_AMOUNT_MAX + 1], again[OG_AMOUNT_MAX + 1];
        EXPECT_INT(og_amount_canonical(rows[i].in, out, sizeof out), 0, i,
                   rows[i].in);
        EXPECT_STR(out, rows[i].want, i, rows[i].in);
        assert_int_equal(og_amount_canonical(out, again, sizeof again), 0);
        assert_string_equal(again, out);
    }
}

static void test_amount_equalities(void **state)
{
    static const char *const same250[] = {"250", "250.0", "250.00", "0250",
                                          "00250.000"};
    for (size_t i = 0; i < N_ELEMS(same250); i++) {
        char out[OG_AMOUNT_MAX + 1];
        assert_int_equal(og_amount_canonical(same250[i], out, sizeof out), 0);
        assert_string_equal(out, "250");
    }
    char a[OG_AMOUNT_MAX + 1], b[OG_AMOUNT_MAX + 1];
    assert_int_equal(og_amount_canonical("0.50", a, sizeof a), 0);
    assert_int_equal(og_amount_canonical("00.5000", b, sizeof b), 0);
    assert_string_equal(a, b);
    /* Different values stay different. */
    assert_int_equal(og_amount_canonical("25", a, sizeof a), 0);
    assert_int_equal(og_amount_canonical("2.5", b, sizeof b), 0);
    assert_string_not_equal(a, b);
}

static void test_amount_invalid(void **state)
{
    static const char *const bad[] = {
        "", "0", "00", "0.0", "0.00", "000.000", "-1", "+1", "1e5", "1E5",
        "1.", ".5", ".", "1.2.3", " 1", "1 ", "1\t", "1\n", "1,5", "1_000",
        "NaN", "nan", "Infinity", "inf", "0x10", "0b1", "\xef\xbc\x91",
        "1.-5", "--1", "1..5", "1.5.", "\xd9\xa3", /* Arabic-Indic 3 */
        "0.0000000000000000001",                    /* 19 fraction digits */
        "1.1234567890123456789",                    /* 19 fraction digits */
        "123456789012345678901234567890123456789",  /* 39 digits */
        "1000000000000000000000000000000000000000", /* 40 digits */
        "123456789012345678901.123456789012345678", /* 21 + 18 = 39 */
    };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        char out[OG_AMOUNT_MAX + 1];
        memset(out, 'Q', sizeof out);
        EXPECT_INT(og_amount_canonical(bad[i], out, sizeof out), OG_EAMOUNT,
                   i, bad[i]);
        for (size_t k = 0; k < sizeof out; k++)
            assert_int_equal(out[k], 'Q');
    }
    char out[OG_AMOUNT_MAX + 1];
    assert_int_equal(og_amount_canonical(NULL, out, sizeof out), OG_EAMOUNT);
    assert_int_equal(og_amount_canonical("1", NULL, 8), OG_EAMOUNT);
}

static void test_amount_input_cap(void **state)
{
    /* "1." followed by zeros: valid by grammar, so only the 256-byte raw
     * input cap decides. */
    char in[512], out[OG_AMOUNT_MAX + 1];
    for (size_t len = 250; len <= 300; len++) {
        memset(in, '0', len);
        in[0] = '1';
        in[1] = '.';
        in[len] = '\0';
        int want = len <= 256 ? 0 : OG_EAMOUNT;
        EXPECT_INT(og_amount_canonical(in, out, sizeof out), want, len,
                   "1.000...");
        if (want == 0)
            assert_string_equal(out, "1");
    }
    /* A 300-byte string of leading zeros: still over the cap. */
    memset(in, '0', 299);
    in[299] = '7';
    in[300] = '\0';
    assert_int_equal(og_amount_canonical(in, out, sizeof out), OG_EAMOUNT);
}

static void test_amount_outlen(void **state)
{
    char out[OG_AMOUNT_MAX + 1];
    /* "250.5" needs 6 bytes with the terminator. */
    memset(out, 'Q', sizeof out);
    assert_int_equal(og_amount_canonical("0250.50", out, 5), OG_EAMOUNT);
    for (size_t k = 0; k < sizeof out; k++)
        assert_int_equal(out[k], 'Q');
    assert_int_equal(og_amount_canonical("0250.50", out, 6), 0);
    assert_string_equal(out, "250.5");
    assert_int_equal(og_amount_canonical("1", out, 0), OG_EAMOUNT);
    assert_int_equal(og_amount_canonical("1", out, 1), OG_EAMOUNT);
    assert_int_equal(og_amount_canonical("1", out, 2), 0);
    /* The longest canonical amount fits OG_AMOUNT_MAX + 1. */
    const char *longest = "12345678901234567890.123456789012345678";
    assert_true(strlen(longest) <= OG_AMOUNT_MAX);
    assert_int_equal(og_amount_canonical(longest, out, OG_AMOUNT_MAX + 1), 0);
}

/* ===========================================================================
 * RFC 3339
 * ========================================================================= */

#define S(x) (INT64_C(x) * 1000000)

static void test_time_valid(void **state)
{
    static const struct {
        const char *in;
        int64_t want;
    } rows[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"1970-01-01T00:00:00.000001Z", 1},
        {"1970-01-01T00:00:00.5Z", 500000},
        {"1970-01-01T00:00:00.1234567Z", 123456},   /* truncated */
        {"1970-01-01T00:00:00.123456789Z", 123456}, /* truncated */
        {"1970-01-01T00:00:00.999999999Z", 999999}, /* never rounds up */
        {"1970-01-01T01:00:00+01:00", 0},
        {"2026-11-29T10:45:00Z", S(1795949100)},
        {"2026-11-29t10:45:00z", S(1795949100)},
        {"2026-11-29T11:45:00+01:00", S(1795949100)},
        {"2026-11-29T05:15:00-05:30", S(1795949100)},
        {"2026-11-29T10:45:00-00:00", S(1795949100)},
        {"2026-11-29T10:45:00+00:00", S(1795949100)},
        {"2026-11-30T10:44:00+23:59", S(1795949100)},
        {"2024-02-29T12:00:00Z", S(1709208000)},
        {"2000-02-29T00:00:00Z", S(951782400)}, /* divisible by 400: leap */
        {"1999-12-31T23:59:59Z", S(946684799)},
        {"2000-01-01T00:00:00Z", S(946684800)},
        {"2100-03-01T00:00:00Z", S(4107542400)},
        {"9999-12-31T23:59:59.999999Z", OG__TIME_MAX_US},
        {"9999-12-31T23:59:59.999999999Z", OG__TIME_MAX_US},
        {"9999-12-31T23:59:59Z", S(253402300799)},
    };
    for (size_t i = 0; i < N_ELEMS(rows); i++) {
        int64_t us = -42;
        EXPECT_INT(og_time_parse_rfc3339(rows[i].in, &us), 0, i, rows[i].in);
        EXPECT_INT(us, rows[i].want, i, rows[i].in);
    }
}

static void test_time_invalid(void **state)
{
    static const char *const bad[] = {
        "",
        "2023-02-29T00:00:00Z", /* not a leap year */
        "1900-02-29T00:00:00Z", /* divisible by 100, not 400 */
        "2026-13-01T00:00:00Z", /* month 13 */
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-32T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-01-01T24:00:00Z", /* hour 24 */
        "2026-01-01T23:60:00Z",
        "2026-12-31T23:59:60Z", /* leap second: refused by design */
        "2026-01-01T00:00:00",  /* missing zone */
        "2026-01-01 00:00:00Z", /* space separator */
        "2026-01-01x00:00:00Z",
        "2026-01-01T00:00:00Z ",
        "2026-01-01T00:00:00Zx",
        "2026-01-01T00:00:00ZZ",
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00+01:00Z",
        "2026-01-01T00:00:00.Z",           /* empty fraction */
        "2026-01-01T00:00:00.1234567890Z", /* 10 fraction digits */
        "2026-01-01T00:00:00,5Z",
        "2026-01-01T00:00:00.5",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+01:60",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+01",
        "2026-01-01T00:00:00+01:00:00",
        "2026-01-01T00:00:00+1:00",
        "2026-01-01T00:00:00 +01:00",
        "2026-1-01T00:00:00Z",
        "2026-01-01T0:00:00Z",
        "20260101T000000Z",
        "10000-01-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "-001-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",        /* before 1970 */
        "1969-12-31T23:59:59.999999Z",
        "1970-01-01T00:00:00+00:01",   /* 1969 in UTC */
        "9999-12-31T23:59:59-00:01",   /* 10000 in UTC */
        "2026-01-01T00:00:00\xef\xbc\xba",
        "2026-01-01T00:00:00.5\0Z",
        "2026-01-01T00:00:00.5 Z",
        "2026-01-01T00:00:00.+5Z",
        "2026-01-01T00:00:00.-5Z",
        "2026-01-01T00:00:00z+01:00",
    };
    for (size_t i = 0; i < N_ELEMS(bad); i++) {
        int64_t us = -42;
        EXPECT_INT(og_time_parse_rfc3339(bad[i], &us), OG_EEXPIRES_AT, i,
                   bad[i]);
        EXPECT_INT(us, -42, i, bad[i]); /* written only on success */
    }
    int64_t us = -42;
    assert_int_equal(og_time_parse_rfc3339(NULL, &us), OG_EEXPIRES_AT);
    assert_int_equal(og_time_parse_rfc3339("1970-01-01T00:00:00Z", NULL),
                     OG_EEXPIRES_AT);
}

static void test_time_input_cap(void **state)
{
    /* 65 bytes: a valid prefix plus padding is refused at the cap, and a
     * 64-byte string is scanned (and refused for its trailing bytes). */
    char in[128];
    int64_t us = -42;
    strcpy(in, "2026-01-01T00:00:00.123456789Z");
    size_t l = strlen(in);
    memset(in + l, ' ', 65 - l);
    in[65] = '\0';
    assert_int_equal(strlen(in), 65);
    assert_int_equal(og_time_parse_rfc3339(in, &us), OG_EEXPIRES_AT);
    in[64] = '\0';
    assert_int_equal(og_time_parse_rfc3339(in, &us), OG_EEXPIRES_AT);
    char big[4096];
    memset(big, '9', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(og_time_parse_rfc3339(big, &us), OG_EEXPIRES_AT);
    assert_int_equal(us, -42);
}

static void test_time_format(void **state)
{
    static const struct {
        int64_t us;
        const char *want;
    } rows[] = {
        {0, "1970-01-01T00:00:00.000000Z"},
        {1, "1970-01-01T00:00:00.000001Z"},
        {S(1795949100), "2026-11-29T10:45:00.000000Z"},
        {S(1709208000) + 250000, "2024-02-29T12:00:00.250000Z"},
        {S(946684799) + 999999, "1999-12-31T23:59:59.999999Z"},
        {S(4107542400) - 1, "2100-02-28T23:59:59.999999Z"},
        {OG__TIME_MAX_US, "9999-12-31T23:59:59.999999Z"},
        {-1, "invalid"},
        {OG__TIME_MAX_US + 1, "invalid"},
        {INT64_MIN, "invalid"},
        {INT64_MAX, "invalid"},
    };
    for (size_t i = 0; i < N_ELEMS(rows); i++) {
        char buf[28];
        assert_ptr_equal(og_time_format_rfc3339(rows[i].us, buf, sizeof buf),
                         buf);
        EXPECT_STR(buf, rows[i].want, i, rows[i].want);
    }
}

static void test_time_format_short_buffer(void **state)
{
    char buf[40];
    for (size_t len = 0; len <= 28; len++) {
        memset(buf, 'Q', sizeof buf);
        og_time_format_rfc3339(S(1795949100), buf, len);
        if (len == 0) {
            assert_int_equal(buf[0], 'Q');
        } else {
            assert_int_equal(strlen(buf), len - 1 < 27 ? len - 1 : 27);
            assert_memory_equal(buf, "2026-11-29T10:45:00.000000Z",
                                strlen(buf));
        }
        for (size_t k = len; k < sizeof buf; k++)
            assert_int_equal(buf[k], 'Q'); /* nothing past len */
    }
    assert_null(og_time_format_rfc3339(0, NULL, 28));
}

static void test_time_roundtrip_text(void **state)
{
    /* Canonical texts are fixed points of format(parse(x)). */
    static const char *const canon[] = {
        "1970-01-01T00:00:00.000000Z", "1970-01-01T23:59:59.999999Z",
        "1972-02-29T00:00:00.000000Z", "2000-02-29T12:34:56.789012Z",
        "2024-02-29T23:59:59.999999Z", "2026-11-29T10:45:00.000000Z",
        "2038-01-19T03:14:08.000000Z", "2100-02-28T12:00:00.000001Z",
        "2400-02-29T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z",
    };
    for (size_t i = 0; i < N_ELEMS(canon); i++) {
        int64_t us;
        char buf[28];
        assert_int_equal(og_time_parse_rfc3339(canon[i], &us), 0);
        assert_string_equal(og_time_format_rfc3339(us, buf, sizeof buf),
                            canon[i]);
    }
    /* Non-canonical spellings normalize to UTC with six fraction digits. */
    static const struct {
        const char *in, *want;
    } rows[] = {
        {"2026-11-29T11:45:00+01:00", "2026-11-29T10:45:00.000000Z"},
        {"2026-11-29t05:15:00.5-05:30", "2026-11-29T10:45:00.500000Z"},
        {"2026-12-31T23:30:00-01:00", "2027-01-01T00:30:00.000000Z"},
        {"2024-03-01T00:30:00+01:00", "2024-02-29T23:30:00.000000Z"},
    };
    for (size_t i = 0; i < N_ELEMS(rows); i++) {
        int64_t us;
        char buf[28];
        assert_int_equal(og_time_parse_rfc3339(rows[i].in, &us), 0);
        assert_string_equal(og_time_format_rfc3339(us, buf, sizeof buf),
                            rows[i].want);
    }
}

/* xorshift64*: deterministic, so a failure reproduces. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

static void test_time_roundtrip_random(void **state)
{
    uint64_t seed = UINT64_C(0x9e3779b97f4a7c15);
    const uint64_t span = (uint64_t)OG__TIME_MAX_US + 1;
    for (int i = 0; i < 200000; i++) {
        int64_t us = (int64_t)(rng_next(&seed) % span), back = -1;
        char buf[28];
        og_time_format_rfc3339(us, buf, sizeof buf);
        if (og_time_parse_rfc3339(buf, &back) != 0 || back != us)
            fail_msg("round trip %" PRId64 " -> %s -> %" PRId64, us, buf,
                     back);
    }
}

/* Every day from 1970-01-01 to 9999-12-31, against a calendar counted one
 * day at a time: civil_from_days and days_from_civil agree with it
 * everywhere, not just at sampled points. */
static void test_time_every_day(void **state)
{
    int y = 1970, m = 1, d = 1;
    static const int dim[12] = {31, 28, 31, 30, 31, 30,
                                31, 31, 30, 31, 30, 31};
    for (int64_t day = 0;; day++) {
        char want[64], buf[28];
        int64_t us = day * 86400 * INT64_C(1000000) + S(43199) + 999999;
        snprintf(want, sizeof want, "%04d-%02d-%02dT11:59:59.999999Z", y, m,
                 d);
        og_time_format_rfc3339(us, buf, sizeof buf);
        if (strcmp(buf, want) != 0)
            fail_msg("day %" PRId64 ": got %s want %s", day, buf, want);
        int64_t back;
        if (og_time_parse_rfc3339(want, &back) != 0 || back != us)
            fail_msg("day %" PRId64 ": parse %s", day, want);
        if (y == 9999 && m == 12 && d == 31)
            break;
        int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        int last = dim[m - 1] + (m == 2 && leap);
        if (++d > last) {
            d = 1;
            if (++m > 12) {
                m = 1;
                y++;
            }
        }
    }
}

/* ===========================================================================
 * Admission request
 * ========================================================================= */

static og_grant good_grant(void)
{
    og_grant g = {"issuer.example", "grant-1", S(1795949100), NULL, OG_FORM_TOKEN};
    return g;
}

static og_intent good_intent(void)
{
    og_intent in = {"123E4567-E89B-12D3-A456-426614174000", "caller-7",
                    "acct-42", "0250.50", "EUR"};
    return in;
}

static void test_req_build_ok(void **state)
{
    og_grant g = good_grant();
    og_intent in = good_intent();
    og__admit_req req;
    memset(&req, 'Q', sizeof req);
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
    assert_string_equal(req.issuer, "issuer.example");
    assert_string_equal(req.grant_id, "grant-1");
    assert_int_equal(req.expires_at_us, S(1795949100));
    assert_string_equal(req.operation_id,
                        "123e4567-e89b-12d3-a456-426614174000");
    assert_string_equal(req.caller_id, "caller-7");
    assert_string_equal(req.account_id, "acct-42");
    assert_string_equal(req.amount, "250.5");
    assert_string_equal(req.currency, "EUR");
    /* memset first: no stale bytes after the terminators. */
    assert_int_equal(req.issuer[OG_ID_MAX], '\0');
    assert_int_equal(req.amount[OG_AMOUNT_MAX], '\0');

    /* Maximum-length ids and the expiry bounds are accepted. */
    char longid[OG_ID_MAX + 1];
    rep(longid, sizeof longid, 'z', OG_ID_MAX);
    g.issuer = g.grant_id = longid;
    in.caller_id = in.account_id = longid;
    g.expires_at_us = OG__TIME_MIN_US;
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
    assert_string_equal(req.account_id, longid);
    g.expires_at_us = OG__TIME_MAX_US;
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
}

/* Starting from every field bad, fixing fields one at a time in contract
 * order must report each next field in turn. */
static void test_req_build_order(void **state)
{
    og_grant g = {"bad issuer", "", -1, NULL, OG_FORM_TOKEN};
    og_intent in = {"00000000-0000-0000-0000-000000000000", "bad caller",
                    "", "0", "eur"};
    const og_grant gg = good_grant();
    const og_intent gi = good_intent();
    static const int order[] = {
        OG_EISSUER,  OG_EGRANT_ID, OG_EEXPIRES_AT, OG_EOPERATION_ID,
        OG_ECALLER,  OG_EACCOUNT,  OG_EAMOUNT,     OG_ECURRENCY,
    };
    og__admit_req req, untouched;
    memset(&req, 'Q', sizeof req);
    memcpy(&untouched, &req, sizeof req);
    for (size_t i = 0; i < N_ELEMS(order); i++) {
        EXPECT_INT(og__admit_req_build(&g, &in, &req), order[i], i,
                   "fields fixed so far");
        assert_memory_equal(&req, &untouched, sizeof req);
        switch (i) {
        case 0: g.issuer = gg.issuer; break;
        case 1: g.grant_id = gg.grant_id; break;
        case 2: g.expires_at_us = gg.expires_at_us; break;
        case 3: in.operation_id = gi.operation_id; break;
        case 4: in.caller_id = gi.caller_id; break;
        case 5: in.account_id = gi.account_id; break;
        case 6: in.amount = gi.amount; break;
        case 7: in.currency = gi.currency; break;
        }
    }
    assert_int_equal(og__admit_req_build(&g, &in, &req), 0);
}

static void test_req_build_each_field(void **state)
{
    /* Each field alone bad (NULL included) reports exactly that field. */
    og__admit_req req;
    og_grant g;
    og_intent in;
#define ONE_BAD(stmt, code)                                                    \
    do {                                                                       \
        g = good_grant();                                                      \
        in = good_intent();                                                    \
        stmt;                                                                  \
        assert_int_equal(og__admit_req_build(&g, &in, &req), code);           \
    } while (0)
    ONE_BAD(g.issuer = NULL, OG_EISSUER);
    ONE_BAD(g.grant_id = NULL, OG_EGRANT_ID);
    ONE_BAD(g.grant_id = "a\x7f", OG_EGRANT_ID);
    ONE_BAD(g.expires_at_us = -1, OG_EEXPIRES_AT);
    ONE_BAD(g.expires_at_us = OG__TIME_MAX_US + 1, OG_EEXPIRES_AT);
    ONE_BAD(g.expires_at_us = INT64_MIN, OG_EEXPIRES_AT);
    ONE_BAD(in.operation_id = NULL, OG_EOPERATION_ID);
    ONE_BAD(in.operation_id = "not-a-uuid", OG_EOPERATION_ID);
    ONE_BAD(in.caller_id = NULL, OG_ECALLER);
    ONE_BAD(in.account_id = NULL, OG_EACCOUNT);
    ONE_BAD(in.amount = NULL, OG_EAMOUNT);
    ONE_BAD(in.amount = "1e5", OG_EAMOUNT);
    ONE_BAD(in.currency = NULL, OG_ECURRENCY);
    ONE_BAD(in.currency = "EURO", OG_ECURRENCY);
    ONE_BAD(in.currency = "ZZZ", OG_ECURRENCY);
    ONE_BAD(in.amount = "250.505", OG_EAMOUNT_MINOR_UNITS);
#undef ONE_BAD
}

static void test_req_build_null(void **state)
{
    og_grant g = good_grant();
    og_intent in = good_intent();
    og__admit_req req;
    assert_int_equal(og__admit_req_build(NULL, &in, &req), OG_EINVAL);
    assert_int_equal(og__admit_req_build(&g, NULL, &req), OG_EINVAL);
    assert_int_equal(og__admit_req_build(&g, &in, NULL), OG_EINVAL);
}

/* Two spellings of one intent build byte-identical requests: that is what
 * lets a retry be recognized as the same operation. */
static void test_req_build_canonical(void **state)
{
    og_grant g = good_grant();
    og_intent a = good_intent(), b = good_intent();
    a.operation_id = "123e4567-e89b-12d3-a456-426614174000";
    a.amount = "250.5";
    b.operation_id = "123E4567-e89B-12D3-a456-426614174000";
    b.amount = "000250.5000000";
    og__admit_req ra, rb;
    assert_int_equal(og__admit_req_build(&g, &a, &ra), 0);
    assert_int_equal(og__admit_req_build(&g, &b, &rb), 0);
    assert_memory_equal(&ra, &rb, sizeof ra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_valid),
        cmocka_unit_test(test_id_invalid),
        cmocka_unit_test(test_uuid_valid),
        cmocka_unit_test(test_uuid_invalid),
        cmocka_unit_test(test_currency),
        cmocka_unit_test(amounts_fit_the_currency_minor_units),
        cmocka_unit_test(test_amount_valid),
        cmocka_unit_test(test_amount_equalities),
        cmocka_unit_test(test_amount_invalid),
        cmocka_unit_test(test_amount_input_cap),
        cmocka_unit_test(test_amount_outlen),
        cmocka_unit_test(test_time_valid),
        cmocka_unit_test(test_time_invalid),
        cmocka_unit_test(test_time_input_cap),
        cmocka_unit_test(test_time_format),
        cmocka_unit_test(test_time_format_short_buffer),
        cmocka_unit_test(test_time_roundtrip_text),
        cmocka_unit_test(test_time_roundtrip_random),
        cmocka_unit_test(test_time_every_day),
        cmocka_unit_test(test_req_build_ok),
        cmocka_unit_test(test_req_build_order),
        cmocka_unit_test(test_req_build_each_field),
        cmocka_unit_test(test_req_build_null),
        cmocka_unit_test(test_req_build_canonical),
    };
    return t_run_tests("validate", tests, NULL, NULL);
}
