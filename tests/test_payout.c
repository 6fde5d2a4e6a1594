/*
 * test_payout.c — the decision side of a delayed payout
 * (lib/core/payout.c, seed 002): money in minor units, the terms'
 * fingerprint, the policy (every row of the seed's matrix in section 1 and
 * the decision rows of section 18, the order of checks, the boundaries) and
 * the execution recheck (section 9). Pure: no store, no clock. One table
 * per question; each row is named after the claim it proves.
 *
 * The scenario is the seed's: tenant T-0417 (daily limit 50,000.00 EUR),
 * requester limit 10,000.00 EUR, beneficiary BEN-2208 verified and Active,
 * destination DST-77 version 3, payout PAY-3107 in Draft at version 6,
 * 4,250.00 EUR, purpose "supplier-invoice INV-9031".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "oncegate/payout.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

#define SEC INT64_C(1000000)
#define DAY (INT64_C(86400) * SEC)
#define NOW (INT64_C(1800000000) * SEC) /* the decision, 09:58 */
#define LATER (NOW + 6 * 3600 * SEC)     /* the worker, 16:00 */

/* The fingerprint of the seed's PAY-3107 terms, computed once,
 * independently of this code (Python: hashlib.sha256 over the
 * serialization spelled out in payout.h), and fixed here: a change to the
 * serialization, the tag or the canonical forms changes it. */
#define FP_PAY3107                                                             \
    "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22a"
/* The same terms without a purpose. */
#define FP_PAY3107_NO_PURPOSE                                                  \
    "f56749940e66ec531a9ff7c326af699153c979f8352383d48a57dafbbd799a1f"
/* T-0417, BEN-2208, DST-77 v3, 4250 JPY, no purpose. */
#define FP_JPY_4250                                                            \
    "2579115312ecb196700862576d8806f782da753a8c654ffe7073df0754c7180e"

static og_payout_terms base_terms(void)
{
    og_payout_terms t = {"T-0417", "BEN-2208", "DST-77", 3,
                         "4250.00", "EUR", "supplier-invoice INV-9031"};
    return t;
}

/* The context of the 09:58 decision: every rule passes. Money in EUR
 * cents. */
static og_payout_context base_context(void)
{
    og_payout_context c;

    memset(&c, 0, sizeof c);
    c.tenant.payouts_suspended = false;
    c.tenant.daily_limit = 5000000;
    c.tenant.paid_today = 0;
    c.tenant.reserved_today = 0;
    c.tenant.settings_version = 12;
    c.beneficiary.verified = true;
    c.beneficiary.status = OG_PAYOUT_BENEFICIARY_ACTIVE;
    c.beneficiary.version = 4;
    c.destination.beneficiary_id = "BEN-2208";
    c.destination.version = 3;
    c.destination.changed_at_us = NOW - 30 * DAY;
    c.payout.state = OG_PAYOUT_STATE_DRAFT;
    c.payout.version = 6;
    c.payout.terms = base_terms();
    c.intent.terms = base_terms();
    c.intent.payout_version = 6;
    c.requester.approval_limit = 1000000;
    c.observed_at_us = NOW;
    return c;
}

/* The context the worker reads at 16:00 after the Allowed decision: the
 * payout Approved at version 7, this payout's 4,250.00 reserved. The
 * requester's facts are the captured ones. */
static og_payout_context exec_context(void)
{
    og_payout_context c = base_context();

    c.payout.state = OG_PAYOUT_STATE_APPROVED;
    c.payout.version = 7;
    c.tenant.reserved_today = 425000;
    c.observed_at_us = LATER;
    memset(&c.intent, 0, sizeof c.intent); /* not read by the recheck */
    return c;
}

static og_payout_grant_binding grant_19c(void)
{
    og_payout_grant_binding g = {FP_PAY3107, 7};
    return g;
}

static og_payout_verdict evaluate_ok(const og_payout_context *c)
{
    og_payout_verdict v;

    assert_int_equal(og_payout_evaluate(c, &v), 0);
    return v;
}

/* ===========================================================================
 * Money
 * ========================================================================= */

/* Every exception of ISO 4217 List One, a sample of the 2-digit rule, and
 * every code without minor units. */
static void currencies_have_their_iso_4217_scales(void **state)
{
    static const struct {
        const char *codes;
        int scale; /* -1: refused */
    } rows[] = {
        {"BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF "
         "XPF",
         0},
        {"BHD IQD JOD KWD LYD OMR TND", 3},
        {"CLF UYW", 4},
        {"EUR USD GBP CHF SEK AED ZAR ZMW BOV CHE CHW COU MXV USN XCD", 2},
        {"XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU XTS XUA XXX", -1},
        /* not codes of the list, or not in its spelling */
        {"ZZZ EUX AAA eur Eur EU EURO E1R", -1},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        char codes[128];
        snprintf(codes, sizeof codes, "%s", rows[i].codes);
        for (char *c = strtok(codes, " "); c; c = strtok(NULL, " ")) {
            int scale = 99;
            int rc = og_payout_currency_scale(c, &scale);
            print_message("%s\n", c);
            if (rows[i].scale < 0) {
                assert_int_equal(rc, OG_EPAYOUT_CURRENCY);
                assert_int_equal(scale, 99); /* untouched */
            } else {
                assert_int_equal(rc, 0);
                assert_int_equal(scale, rows[i].scale);
            }
        }
    }
    int scale;
    assert_int_equal(og_payout_currency_scale(NULL, &scale),
                     OG_EPAYOUT_CURRENCY);
    assert_int_equal(og_payout_currency_scale("", &scale),
                     OG_EPAYOUT_CURRENCY);
    assert_int_equal(og_payout_currency_scale("EUR ", &scale),
                     OG_EPAYOUT_CURRENCY);
    assert_int_equal(og_payout_currency_scale("EUR", NULL), OG_EINVAL);
}

static void amounts_parse_at_the_currency_scale(void **state)
{
    static const struct {
        const char *name, *text, *currency;
        int rc;
        int64_t minor;
    } rows[] = {
        {"the seed's amount", "4250.00", "EUR", 0, 425000},
        {"fewer decimals are padded: none", "4250", "EUR", 0, 425000},
        {"fewer decimals are padded: one", "4250.5", "EUR", 0, 425050},
        {"one cent", "0.01", "EUR", 0, 1},
        {"a zero integer part before a fraction", "0.5", "EUR", 0, 50},
        {"scale 0", "4250", "JPY", 0, 4250},
        {"scale 3", "1.234", "BHD", 0, 1234},
        {"scale 3 padded", "1.2", "KWD", 0, 1200},
        {"scale 3 smallest", "0.001", "TND", 0, 1},
        {"scale 4", "1.2345", "CLF", 0, 12345},
        {"scale 4 padded", "7", "UYW", 0, 70000},
        {"the documented max", "9999999999999.99", "EUR", 0,
         OG_PAYOUT_MINOR_MAX},
        {"the documented max at scale 0", "999999999999999", "JPY", 0,
         OG_PAYOUT_MINOR_MAX},
        {"the documented max at scale 4", "99999999999.9999", "CLF", 0,
         OG_PAYOUT_MINOR_MAX},
        {"more decimals than the scale", "4250.000", "EUR", OG_EPAYOUT_AMOUNT,
         0},
        {"more decimals than the scale, non-zero", "0.001", "EUR",
         OG_EPAYOUT_AMOUNT, 0},
        {"a point at scale 0", "4250.0", "JPY", OG_EPAYOUT_AMOUNT, 0},
        {"a bare point at scale 0", "4250.", "JPY", OG_EPAYOUT_AMOUNT, 0},
        {"scale 3 with four decimals", "1.2345", "BHD", OG_EPAYOUT_AMOUNT, 0},
        {"a trailing point", "4250.", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a leading point", ".50", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a plus sign", "+4250.00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a minus sign", "-4250.00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"an exponent", "4.25e3", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"an upper-case exponent", "425E1", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a leading zero", "04", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"leading zeros before a point", "00.50", "EUR", OG_EPAYOUT_AMOUNT,
         0},
        {"zero", "0", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"zero with decimals", "0.00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"zero at scale 0", "0", "JPY", OG_EPAYOUT_AMOUNT, 0},
        {"empty", "", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a leading space", " 4250.00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a trailing space", "4250.00 ", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a trailing newline", "4250.00\n", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a thousands separator", "4,250.00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a decimal comma", "4250,00", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"an underscore", "4_250", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"two points", "1.2.3", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"hex", "0x10", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"not a number", "NaN", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"infinity", "Infinity", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"a non-ASCII digit", "\xd9\xa1", "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"one over the documented max", "10000000000000.00", "EUR",
         OG_EPAYOUT_AMOUNT, 0},
        {"one over the max at scale 0", "1000000000000000", "JPY",
         OG_EPAYOUT_AMOUNT, 0},
        {"INT64_MAX in minor units", "92233720368547758.07", "EUR",
         OG_EPAYOUT_AMOUNT, 0},
        {"INT64_MAX + 1 in minor units", "92233720368547758.08", "EUR",
         OG_EPAYOUT_AMOUNT, 0},
        {"beyond uint64", "99999999999999999999999", "JPY",
         OG_EPAYOUT_AMOUNT, 0},
        {"NULL amount", NULL, "EUR", OG_EPAYOUT_AMOUNT, 0},
        {"currency is checked first", "x", "XAU", OG_EPAYOUT_CURRENCY, 0},
        {"a currency without minor units", "1", "XXX", OG_EPAYOUT_CURRENCY,
         0},
        {"a lower-case currency", "1.00", "eur", OG_EPAYOUT_CURRENCY, 0},
        {"a NULL currency", "1.00", NULL, OG_EPAYOUT_CURRENCY, 0},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        int64_t minor = -7;
        print_message("%s\n", rows[i].name);
        assert_int_equal(
            og_payout_amount_parse(rows[i].text, rows[i].currency, &minor),
            rows[i].rc);
        assert_int_equal(minor, rows[i].rc == 0 ? rows[i].minor : -7);
    }

    /* A hostile length is refused after a bounded scan. */
    char longer[4096];
    memset(longer, '1', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    int64_t minor;
    assert_int_equal(og_payout_amount_parse(longer, "EUR", &minor),
                     OG_EPAYOUT_AMOUNT);
    assert_int_equal(og_payout_amount_parse("1", "EUR", NULL), OG_EINVAL);
}

static void amounts_format_at_the_currency_scale(void **state)
{
    static const struct {
        int64_t minor;
        const char *currency, *text;
    } rows[] = {
        {425000, "EUR", "4250.00"},
        {1, "EUR", "0.01"},
        {10, "EUR", "0.10"},
        {0, "EUR", "0.00"},
        {4250, "JPY", "4250"},
        {0, "JPY", "0"},
        {1, "BHD", "0.001"},
        {1234, "BHD", "1.234"},
        {12345, "CLF", "1.2345"},
        {1, "UYW", "0.0001"},
        {OG_PAYOUT_MINOR_MAX, "EUR", "9999999999999.99"},
        {INT64_MAX, "EUR", "92233720368547758.07"},
        {INT64_MAX, "JPY", "9223372036854775807"},
        {INT64_MAX, "CLF", "922337203685477.5807"},
    };
    char out[OG_PAYOUT_MONEY_TEXT_MAX + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        print_message("%s %lld\n", rows[i].currency,
                      (long long)rows[i].minor);
        assert_int_equal(og_payout_amount_format(rows[i].minor,
                                                 rows[i].currency, out,
                                                 sizeof out),
                         0);
        assert_string_equal(out, rows[i].text);
        assert_true(strlen(out) <= OG_PAYOUT_MONEY_TEXT_MAX);
    }

    /* Refusals leave the buffer alone. */
    memcpy(out, "untouched", 10);
    assert_int_equal(og_payout_amount_format(-1, "EUR", out, sizeof out),
                     OG_EPAYOUT_AMOUNT);
    assert_int_equal(og_payout_amount_format(1, "XAU", out, sizeof out),
                     OG_EPAYOUT_CURRENCY);
    assert_int_equal(og_payout_amount_format(425000, "EUR", out, 7),
                     OG_EINVAL); /* "4250.00" needs 8 */
    assert_string_equal(out, "untouched");
    assert_int_equal(og_payout_amount_format(425000, "EUR", out, 8), 0);
    assert_string_equal(out, "4250.00");
    assert_int_equal(og_payout_amount_format(1, "EUR", NULL, 8), OG_EINVAL);
}

/* P2: parse(format(x)) == x for every scale and a spread of values, and
 * format(parse(text)) is the canonical spelling. */
static void amounts_round_trip(void **state)
{
    static const char *const currencies[] = {"JPY", "EUR", "BHD", "CLF",
                                             "ISK", "KWD", "UYW", "USD"};
    static const int64_t values[] = {1,          9,         10,
                                     99,         100,       101,
                                     12345,      425000,    1000000007,
                                     999999999999998, OG_PAYOUT_MINOR_MAX};
    static const struct {
        const char *in, *currency, *canonical;
    } spellings[] = {
        {"4250", "EUR", "4250.00"},    {"4250.5", "EUR", "4250.50"},
        {"0.5", "EUR", "0.50"},        {"1.2", "BHD", "1.200"},
        {"7", "CLF", "7.0000"},        {"4250", "JPY", "4250"},
        {"4250.00", "EUR", "4250.00"},
    };
    char text[OG_PAYOUT_MONEY_TEXT_MAX + 1];

    (void)state;
    for (size_t c = 0; c < N(currencies); c++)
        for (size_t v = 0; v < N(values); v++) {
            int64_t back = 0;
            assert_int_equal(og_payout_amount_format(values[v], currencies[c],
                                                     text, sizeof text),
                             0);
            assert_int_equal(
                og_payout_amount_parse(text, currencies[c], &back), 0);
            assert_int_equal(back, values[v]);
        }
    for (size_t i = 0; i < N(spellings); i++) {
        int64_t minor;
        assert_int_equal(og_payout_amount_parse(spellings[i].in,
                                                spellings[i].currency, &minor),
                         0);
        assert_int_equal(og_payout_amount_format(minor, spellings[i].currency,
                                                 text, sizeof text),
                         0);
        assert_string_equal(text, spellings[i].canonical);
    }
}

/* ===========================================================================
 * Purpose
 * ========================================================================= */

static void purposes_are_trimmed_collapsed_and_capped(void **state)
{
    static char at_max[OG_PAYOUT_PURPOSE_MAX + 1];
    static char over_max[OG_PAYOUT_PURPOSE_MAX + 2];
    static char padded_max[OG_PAYOUT_PURPOSE_INPUT_MAX + 1];
    static char input_over[OG_PAYOUT_PURPOSE_INPUT_MAX + 2];
    memset(at_max, 'p', OG_PAYOUT_PURPOSE_MAX);
    memset(over_max, 'p', OG_PAYOUT_PURPOSE_MAX + 1);
    /* 140 bytes of text in 1024 bytes of input: refused only by the output
     * cap, never by the padding. */
    memset(padded_max, ' ', OG_PAYOUT_PURPOSE_INPUT_MAX);
    memcpy(padded_max + 400, at_max, OG_PAYOUT_PURPOSE_MAX);
    memset(input_over, ' ', OG_PAYOUT_PURPOSE_INPUT_MAX + 1);
    input_over[500] = 'x';

    const struct {
        const char *name, *in;
        int rc;
        const char *out;
    } rows[] = {
        {"already normal", "supplier-invoice INV-9031", 0,
         "supplier-invoice INV-9031"},
        {"surrounding spaces trimmed", "  supplier-invoice INV-9031   ", 0,
         "supplier-invoice INV-9031"},
        {"inner runs collapsed", "supplier-invoice     INV-9031", 0,
         "supplier-invoice INV-9031"},
        {"both", "   a   b  c   ", 0, "a b c"},
        {"one byte", "x", 0, "x"},
        {"case is kept", "Invoice INV-9031", 0, "Invoice INV-9031"},
        {"every printable byte", " !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~",
         0, "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"},
        {"140 bytes", at_max, 0, at_max},
        {"140 bytes inside 1024 bytes of spaces", padded_max, 0, at_max},
        {"141 bytes", over_max, OG_EPAYOUT_PURPOSE, NULL},
        {"input over 1024 bytes", input_over, OG_EPAYOUT_PURPOSE, NULL},
        {"empty: absent is NULL", "", OG_EPAYOUT_PURPOSE, NULL},
        {"only spaces", "     ", OG_EPAYOUT_PURPOSE, NULL},
        {"a tab", "a\tb", OG_EPAYOUT_PURPOSE, NULL},
        {"a newline", "a\nb", OG_EPAYOUT_PURPOSE, NULL},
        {"DEL", "a\x7f", OG_EPAYOUT_PURPOSE, NULL},
        {"non-ASCII (UTF-8 e acute)", "caf\xc3\xa9", OG_EPAYOUT_PURPOSE,
         NULL},
        {"a non-breaking space (UTF-8)", "a\xc2\xa0"
                                         "b",
         OG_EPAYOUT_PURPOSE, NULL},
        {"NULL", NULL, OG_EPAYOUT_PURPOSE, NULL},
    };
    char out[OG_PAYOUT_PURPOSE_MAX + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        print_message("%s\n", rows[i].name);
        memcpy(out, "untouched", 10);
        assert_int_equal(og_payout_purpose_normalize(rows[i].in, out,
                                                     sizeof out),
                         rows[i].rc);
        assert_string_equal(out, rows[i].rc == 0 ? rows[i].out : "untouched");
    }
    memcpy(out, "untouched", 10);
    assert_int_equal(og_payout_purpose_normalize("  abc  ", out, 3),
                     OG_EINVAL);
    assert_string_equal(out, "untouched");
    assert_int_equal(og_payout_purpose_normalize("  abc  ", out, 4), 0);
    assert_string_equal(out, "abc");
    assert_int_equal(og_payout_purpose_normalize("abc", NULL, 4), OG_EINVAL);
}

/* ===========================================================================
 * Terms and fingerprint
 * ========================================================================= */

static char *fingerprint(const og_payout_terms *t, char *out)
{
    assert_int_equal(og_payout_terms_fingerprint(t, out), 0);
    return out;
}

/* The serialization, rebuilt here byte by byte from payout.h's
 * description, and the digest of the seed's payout. */
static void fingerprint_known_answer(void **state)
{
    static const char *const fields[] = {
        "oncegate/payout-terms/v1", "T-0417", "BEN-2208", "DST-77", "3",
        "4250.00", "EUR", "supplier-invoice INV-9031"};
    unsigned char want[OG_PAYOUT_TERMS_CANONICAL_MAX], got[1024];
    size_t wn = 0, gn = 0;
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];

    (void)state;
    for (size_t i = 0; i < N(fields); i++) {
        size_t n = strlen(fields[i]);
        want[wn++] = 0;
        want[wn++] = 0;
        want[wn++] = 0;
        want[wn++] = (unsigned char)n;
        memcpy(want + wn, fields[i], n);
        wn += n;
    }
    og_payout_terms t = base_terms();
    assert_int_equal(og_payout_terms_canonicalize(&t, got, sizeof got, &gn),
                     0);
    assert_int_equal(gn, 112);
    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, wn);
    assert_string_equal(fingerprint(&t, fp), FP_PAY3107);

    t.purpose = NULL;
    assert_string_equal(fingerprint(&t, fp), FP_PAY3107_NO_PURPOSE);
    t.currency = "JPY";
    t.amount = "4250";
    assert_string_equal(fingerprint(&t, fp), FP_JPY_4250);
}

/* P3: the same payout, spelled differently, is one fingerprint. */
static void fingerprint_ignores_spelling(void **state)
{
    static const struct {
        const char *name, *amount, *purpose;
    } rows[] = {
        {"amount without decimals", "4250", "supplier-invoice INV-9031"},
        {"amount with one decimal", "4250.0", "supplier-invoice INV-9031"},
        {"purpose with surrounding spaces", "4250.00",
         "  supplier-invoice INV-9031  "},
        {"purpose with an inner run of spaces", "4250.00",
         "supplier-invoice     INV-9031"},
        {"both at once", "4250", "   supplier-invoice   INV-9031 "},
    };
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_terms t = base_terms();
        t.amount = rows[i].amount;
        t.purpose = rows[i].purpose;
        print_message("%s\n", rows[i].name);
        assert_string_equal(fingerprint(&t, fp), FP_PAY3107);
    }
}

/* P3: change any one field and the fingerprint changes; no two of these
 * payouts share one. */
static void fingerprint_changes_with_every_field(void **state)
{
    struct row {
        const char *name;
        og_payout_terms t;
    } rows[] = {
        {"tenant", {"T-0418", "BEN-2208", "DST-77", 3, "4250.00", "EUR",
                    "supplier-invoice INV-9031"}},
        {"beneficiary", {"T-0417", "BEN-2209", "DST-77", 3, "4250.00", "EUR",
                         "supplier-invoice INV-9031"}},
        {"destination", {"T-0417", "BEN-2208", "DST-78", 3, "4250.00", "EUR",
                         "supplier-invoice INV-9031"}},
        {"destination version", {"T-0417", "BEN-2208", "DST-77", 4,
                                 "4250.00", "EUR",
                                 "supplier-invoice INV-9031"}},
        {"amount by one cent", {"T-0417", "BEN-2208", "DST-77", 3, "4250.01",
                                "EUR", "supplier-invoice INV-9031"}},
        {"amount by a factor of ten", {"T-0417", "BEN-2208", "DST-77", 3,
                                       "425.00", "EUR",
                                       "supplier-invoice INV-9031"}},
        {"currency at the same scale", {"T-0417", "BEN-2208", "DST-77", 3,
                                        "4250.00", "USD",
                                        "supplier-invoice INV-9031"}},
        {"currency with the same minor units", {"T-0417", "BEN-2208",
                                                "DST-77", 3, "425000", "JPY",
                                                "supplier-invoice INV-9031"}},
        {"purpose text", {"T-0417", "BEN-2208", "DST-77", 3, "4250.00", "EUR",
                          "supplier-invoice INV-9032"}},
        {"purpose letter case", {"T-0417", "BEN-2208", "DST-77", 3,
                                 "4250.00", "EUR",
                                 "Supplier-invoice INV-9031"}},
        {"purpose inner space removed", {"T-0417", "BEN-2208", "DST-77", 3,
                                         "4250.00", "EUR",
                                         "supplier-invoiceINV-9031"}},
        {"purpose absent", {"T-0417", "BEN-2208", "DST-77", 3, "4250.00",
                            "EUR", NULL}},
    };
    char base[OG_PAYOUT_FINGERPRINT_HEX + 1];
    char fps[N(rows)][OG_PAYOUT_FINGERPRINT_HEX + 1];

    (void)state;
    og_payout_terms b = base_terms();
    fingerprint(&b, base);
    for (size_t i = 0; i < N(rows); i++) {
        print_message("%s\n", rows[i].name);
        fingerprint(&rows[i].t, fps[i]);
        assert_string_not_equal(fps[i], base);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(fps[i], fps[j]);
    }
}

/* The absent marker is not any present value, and it is the last four
 * bytes 0xFFFFFFFF. */
static void absent_purpose_differs_from_every_present_one(void **state)
{
    static const char *const present[] = {"x", " x ", "-", "0", "NULL",
                                          "absent", "~~~~"};
    unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
    size_t n;
    char absent[OG_PAYOUT_FINGERPRINT_HEX + 1];
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];

    (void)state;
    og_payout_terms t = base_terms();
    t.purpose = NULL;
    fingerprint(&t, absent);
    assert_int_equal(og_payout_terms_canonicalize(&t, buf, sizeof buf, &n),
                     0);
    assert_true(n > 4);
    assert_memory_equal(buf + n - 4, "\xff\xff\xff\xff", 4);
    for (size_t i = 0; i < N(present); i++) {
        t.purpose = present[i];
        print_message("%s\n", present[i]);
        assert_string_not_equal(fingerprint(&t, fp), absent);
        assert_int_equal(
            og_payout_terms_canonicalize(&t, buf, sizeof buf, &n), 0);
        assert_memory_not_equal(buf + n - 4, "\xff\xff\xff\xff", 4);
    }
}

/* Pairs whose plain concatenation is the same bytes: the length prefixes
 * keep their fingerprints apart. */
static void length_prefixes_prevent_collisions(void **state)
{
    static const struct {
        const char *name;
        og_payout_terms a, b;
    } rows[] = {
        {"tenant|beneficiary: ab|c vs a|bc",
         {"ab", "c", "DST-77", 3, "4250.00", "EUR", NULL},
         {"a", "bc", "DST-77", 3, "4250.00", "EUR", NULL}},
        {"beneficiary|destination: BEN-22|08DST vs BEN-2208|DST",
         {"T-0417", "BEN-22", "08DST", 3, "4250.00", "EUR", NULL},
         {"T-0417", "BEN-2208", "DST", 3, "4250.00", "EUR", NULL}},
        {"destination|version: DST-7|73 vs DST-77|3",
         {"T-0417", "BEN-2208", "DST-7", 73, "4250.00", "EUR", NULL},
         {"T-0417", "BEN-2208", "DST-77", 3, "4250.00", "EUR", NULL}},
        {"version|amount: 31|1.00 vs 3|11.00",
         {"T-0417", "BEN-2208", "DST-77", 31, "1.00", "EUR", NULL},
         {"T-0417", "BEN-2208", "DST-77", 3, "11.00", "EUR", NULL}},
        {"currency|purpose: EUR|x vs EURx (absent)",
         {"T-0417", "BEN-2208", "DST-77", 3, "4250.00", "EUR", "x"},
         {"T-0417", "BEN-2208", "DST-77", 3, "4250.00", "EUR", NULL}},
    };
    char fa[OG_PAYOUT_FINGERPRINT_HEX + 1], fb[OG_PAYOUT_FINGERPRINT_HEX + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        const og_payout_terms *a = &rows[i].a, *b = &rows[i].b;
        char ca[512], cb[512];
        print_message("%s\n", rows[i].name);
        /* Without prefixes these would collide (the first four rows). */
        snprintf(ca, sizeof ca, "%s%s%s%lld", a->tenant_id, a->beneficiary_id,
                 a->destination_id, (long long)a->destination_version);
        snprintf(cb, sizeof cb, "%s%s%s%lld", b->tenant_id, b->beneficiary_id,
                 b->destination_id, (long long)b->destination_version);
        if (i < 3)
            assert_string_equal(ca, cb);
        assert_string_not_equal(fingerprint(a, fa), fingerprint(b, fb));
    }
}

/* Each bad field has its code; the first bad one in the documented order
 * is reported; nothing is written on failure. */
static void bad_terms_are_refused_with_their_field(void **state)
{
    static char id_129[OG_ID_MAX + 2];
    memset(id_129, 'i', OG_ID_MAX + 1);
    struct row {
        const char *name;
        og_payout_terms t;
        int rc;
    } rows[] = {
        {"tenant NULL", {NULL, "B", "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_TENANT},
        {"tenant empty", {"", "B", "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_TENANT},
        {"tenant with a space", {"T 1", "B", "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_TENANT},
        {"tenant of 129 bytes", {id_129, "B", "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_TENANT},
        {"tenant non-ASCII", {"T\xc3\xa9", "B", "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_TENANT},
        {"beneficiary NULL", {"T", NULL, "D", 1, "1", "EUR", NULL},
         OG_EPAYOUT_BENEFICIARY},
        {"beneficiary with a surrounding space",
         {"T", " B", "D", 1, "1", "EUR", NULL}, OG_EPAYOUT_BENEFICIARY},
        {"destination NULL", {"T", "B", NULL, 1, "1", "EUR", NULL},
         OG_EPAYOUT_DESTINATION},
        {"destination with a tab", {"T", "B", "D\t", 1, "1", "EUR", NULL},
         OG_EPAYOUT_DESTINATION},
        {"destination version 0", {"T", "B", "D", 0, "1", "EUR", NULL},
         OG_EPAYOUT_DESTINATION_VERSION},
        {"destination version negative",
         {"T", "B", "D", INT64_MIN, "1", "EUR", NULL},
         OG_EPAYOUT_DESTINATION_VERSION},
        {"currency lower case", {"T", "B", "D", 1, "1", "eur", NULL},
         OG_EPAYOUT_CURRENCY},
        {"currency without minor units", {"T", "B", "D", 1, "1", "XAU", NULL},
         OG_EPAYOUT_CURRENCY},
        {"currency before amount", {"T", "B", "D", 1, "bad", "XTS", NULL},
         OG_EPAYOUT_CURRENCY},
        {"amount finer than the currency",
         {"T", "B", "D", 1, "1.001", "EUR", NULL}, OG_EPAYOUT_AMOUNT},
        {"amount NULL", {"T", "B", "D", 1, NULL, "EUR", NULL},
         OG_EPAYOUT_AMOUNT},
        {"purpose empty", {"T", "B", "D", 1, "1", "EUR", ""},
         OG_EPAYOUT_PURPOSE},
        {"purpose non-ASCII", {"T", "B", "D", 1, "1", "EUR", "\xe2\x82\xac"},
         OG_EPAYOUT_PURPOSE},
        {"tenant reported before amount",
         {"", "B", "D", 1, "x", "EUR", NULL}, OG_EPAYOUT_TENANT},
        {"destination version reported before currency",
         {"T", "B", "D", 0, "1", "eur", NULL},
         OG_EPAYOUT_DESTINATION_VERSION},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
        char fp[OG_PAYOUT_FINGERPRINT_HEX + 1] = "untouched";
        size_t n = 12345;
        print_message("%s\n", rows[i].name);
        memset(buf, 0xa5, sizeof buf);
        assert_int_equal(
            og_payout_terms_canonicalize(&rows[i].t, buf, sizeof buf, &n),
            rows[i].rc);
        assert_int_equal(n, 12345);
        assert_int_equal(buf[0], 0xa5);
        assert_int_equal(og_payout_terms_fingerprint(&rows[i].t, fp),
                         rows[i].rc);
        assert_string_equal(fp, "untouched");
    }

    /* The output cap: refused one byte short, untouched; exact fits. */
    og_payout_terms t = base_terms();
    unsigned char buf[112];
    size_t n = 0;
    memset(buf, 0xa5, sizeof buf);
    assert_int_equal(og_payout_terms_canonicalize(&t, buf, 111, &n),
                     OG_EINVAL);
    assert_int_equal(n, 0);
    assert_int_equal(buf[0], 0xa5);
    assert_int_equal(og_payout_terms_canonicalize(&t, buf, 112, &n), 0);
    assert_int_equal(n, 112);
    assert_int_equal(og_payout_terms_canonicalize(NULL, buf, 112, &n),
                     OG_EINVAL);
    assert_int_equal(og_payout_terms_canonicalize(&t, NULL, 112, &n),
                     OG_EINVAL);
    assert_int_equal(og_payout_terms_canonicalize(&t, buf, 112, NULL),
                     OG_EINVAL);
    assert_int_equal(og_payout_terms_fingerprint(&t, NULL), OG_EINVAL);
    assert_int_equal(og_payout_terms_fingerprint(NULL, (char[65]){0}),
                     OG_EINVAL);
}

/* The documented cap holds the largest terms there can be. */
static void canonical_cap_holds_the_largest_terms(void **state)
{
    static char id[OG_ID_MAX + 1], purpose[OG_PAYOUT_PURPOSE_MAX + 1];
    unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
    size_t n;

    (void)state;
    memset(id, '~', OG_ID_MAX);
    memset(purpose, 'p', OG_PAYOUT_PURPOSE_MAX);
    og_payout_terms t = {id, id, id, INT64_MAX, "99999999999.9999", "CLF",
                         purpose};
    assert_int_equal(og_payout_terms_canonicalize(&t, buf, sizeof buf, &n),
                     0);
    assert_true(n <= OG_PAYOUT_TERMS_CANONICAL_MAX);
    /* 8 prefixes, tag 24, ids 3 * 128, version 19, amount 16, currency 3,
     * purpose 140. */
    assert_int_equal(n, 32 + 24 + 384 + 19 + 16 + 3 + 140);
}

/* ===========================================================================
 * The policy
 * ========================================================================= */

/* One change to the base context each. */
typedef void (*mutation)(og_payout_context *);

static void m_none(og_payout_context *c) { (void)c; }
static void m_unavailable(og_payout_context *c) { c->unavailable = true; }
static void m_tenant_suspended(og_payout_context *c)
{
    c->tenant.payouts_suspended = true;
}
static void m_not_verified(og_payout_context *c)
{
    c->beneficiary.verified = false;
}
static void m_beneficiary_suspended(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_SUSPENDED;
}
static void m_beneficiary_closed(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_CLOSED;
}
static void m_destination_other_beneficiary(og_payout_context *c)
{
    c->destination.beneficiary_id = "BEN-9999";
}
static void m_destination_other_version(og_payout_context *c)
{
    c->destination.version = 4;
}
static void m_payout_approved(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_APPROVED;
}
static void m_payout_cancelled(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_CANCELLED;
}
static void m_payout_version_moved(og_payout_context *c)
{
    c->payout.version = 7;
}
/* 45,750.01 paid + 4,250.00 = 50,000.01 > 50,000.00 */
static void m_daily_limit_over(og_payout_context *c)
{
    c->tenant.paid_today = 4575001;
}
/* Another payout of 46,000.00 is reserved: with this one's 4,250.00 the
 * total is 50,250.00; without the reservation it would pass. */
static void m_first_payout_reserved(og_payout_context *c)
{
    c->tenant.reserved_today = 4600000;
}
static void m_destination_recent(og_payout_context *c)
{
    c->destination.changed_at_us = c->observed_at_us - 2 * DAY;
}
static void m_above_requester(og_payout_context *c)
{
    c->requester.approval_limit = 400000; /* 4,000.00 < 4,250.00 */
}

typedef struct policy_row {
    const char *name;
    mutation m;
    og_payout_outcome outcome;
    og_payout_reason reason;
    const char *reason_text;
} policy_row;

static void run_policy_rows(const policy_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        og_payout_context c = base_context();
        rows[i].m(&c);
        print_message("%s\n", rows[i].name);
        og_payout_verdict v = evaluate_ok(&c);
        assert_int_equal(v.outcome, rows[i].outcome);
        assert_int_equal(v.reason, rows[i].reason);
        assert_string_equal(og_payout_reason_name(v.reason),
                            rows[i].reason_text);
        assert_string_equal(v.policy_version, OG_PAYOUT_POLICY_VERSION);
    }
}

/* Seed section 1, "Representative policy matrix": one row each, named
 * after the seed's condition. */
static void policy_matrix_of_section_1(void **state)
{
    static const policy_row rows[] = {
        {"Tenant payouts suspended", m_tenant_suspended, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_TENANT_SUSPENDED, "tenant.payouts-suspended"},
        {"Beneficiary not verified", m_not_verified, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE, "beneficiary.not-eligible"},
        {"Beneficiary not active: Suspended", m_beneficiary_suspended,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE,
         "beneficiary.not-eligible"},
        {"Beneficiary not active: Closed", m_beneficiary_closed,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE,
         "beneficiary.not-eligible"},
        {"Destination not registered to the beneficiary",
         m_destination_other_beneficiary, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED,
         "destination.not-registered"},
        {"Destination registered at another version than the intent's",
         m_destination_other_version, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED,
         "destination.not-registered"},
        {"Payout not in Draft: Approved", m_payout_approved, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE, "payout.not-submittable"},
        {"Payout not in Draft: Cancelled", m_payout_cancelled,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE,
         "payout.not-submittable"},
        {"Payout version differs from the intent", m_payout_version_moved,
         OG_PAYOUT_DENIED, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE,
         "payout.not-submittable"},
        {"Paid plus reserved plus this payout exceed the daily limit",
         m_daily_limit_over, OG_PAYOUT_DENIED, OG_PAYOUT_REASON_DAILY_LIMIT,
         "tenant.daily-limit"},
        {"Tenant, beneficiary or payout record unavailable", m_unavailable,
         OG_PAYOUT_DEFERRED, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE,
         "context.unavailable"},
        {"Destination changed in the last 7 days", m_destination_recent,
         OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         "destination.recently-changed"},
        {"Amount above the requester's approval limit", m_above_requester,
         OG_PAYOUT_ESCALATION_RECOMMENDED,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT,
         "amount.above-requester-limit"},
        {"Otherwise", m_none, OG_PAYOUT_ALLOWED, OG_PAYOUT_REASON_ALLOWED,
         "payout.allowed"},
    };

    (void)state;
    run_policy_rows(rows, N(rows));

    /* Every state but Draft is not submittable. */
    for (int s = 0; s <= OG_PAYOUT_STATE_CANCELLED; s++) {
        og_payout_context c = base_context();
        c.payout.state = (og_payout_state)s;
        og_payout_verdict v = evaluate_ok(&c);
        print_message("state %s\n", og_payout_state_name(c.payout.state));
        assert_int_equal(v.reason,
                         s == OG_PAYOUT_STATE_DRAFT
                             ? OG_PAYOUT_REASON_ALLOWED
                             : OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    }
}

/* Seed section 18, the rows decided by the policy. */
static void decision_rows_of_section_18(void **state)
{
    static const policy_row rows[] = {
        {"Valid payout", m_none, OG_PAYOUT_ALLOWED, OG_PAYOUT_REASON_ALLOWED,
         "payout.allowed"},
        {"Tenant payouts suspended", m_tenant_suspended, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_TENANT_SUSPENDED, "tenant.payouts-suspended"},
        {"Beneficiary not verified", m_not_verified, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE, "beneficiary.not-eligible"},
        {"Context unavailable", m_unavailable, OG_PAYOUT_DEFERRED,
         OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE, "context.unavailable"},
        {"Second payout would exceed the daily limit once the first one's "
         "reservation is counted",
         m_first_payout_reserved, OG_PAYOUT_DENIED,
         OG_PAYOUT_REASON_DAILY_LIMIT, "tenant.daily-limit"},
        {"Destination recently changed", m_destination_recent,
         OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
         "destination.recently-changed"},
        {"Amount above requester's limit", m_above_requester,
         OG_PAYOUT_ESCALATION_RECOMMENDED,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT,
         "amount.above-requester-limit"},
    };

    (void)state;
    run_policy_rows(rows, N(rows));
}

/* P6: the rules in the seed's order. Every pair of failing rules reports
 * the earlier one; an unavailable context reports context.unavailable
 * whatever else fails. */
static void policy_reports_the_first_rule_in_the_seeds_order(void **state)
{
    static const struct {
        mutation m;
        og_payout_reason reason;
    } order[] = {
        {m_tenant_suspended, OG_PAYOUT_REASON_TENANT_SUSPENDED},
        {m_not_verified, OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE},
        {m_destination_other_beneficiary,
         OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED},
        {m_payout_version_moved, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE},
        {m_daily_limit_over, OG_PAYOUT_REASON_DAILY_LIMIT},
        {m_destination_recent, OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {m_above_requester, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
    };

    (void)state;
    /* The list above is OG_PAYOUT_REASON_MAP's order. */
    for (size_t i = 0; i < N(order); i++)
        assert_int_equal(order[i].reason,
                         OG_PAYOUT_REASON_TENANT_SUSPENDED + i);
    for (size_t i = 0; i < N(order); i++) {
        for (size_t j = i + 1; j < N(order); j++) {
            og_payout_context c = base_context();
            order[j].m(&c);
            order[i].m(&c);
            print_message("%s before %s\n",
                          og_payout_reason_name(order[i].reason),
                          og_payout_reason_name(order[j].reason));
            assert_int_equal(evaluate_ok(&c).reason, order[i].reason);
        }
        og_payout_context c = base_context();
        order[i].m(&c);
        m_unavailable(&c);
        assert_int_equal(evaluate_ok(&c).reason,
                         OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    }
    /* Everything at once: the first. */
    og_payout_context c = base_context();
    for (size_t i = 0; i < N(order); i++)
        order[i].m(&c);
    assert_int_equal(evaluate_ok(&c).reason,
                     OG_PAYOUT_REASON_TENANT_SUSPENDED);
}

/* P5: an unavailable context is answered without reading anything else —
 * here, everything else is garbage that would be an error if read. */
static void unavailable_context_reads_nothing_else(void **state)
{
    og_payout_context c;
    og_payout_verdict v;

    (void)state;
    memset(&c, 0xff, sizeof c);
    c.unavailable = true;
    c.intent.terms.tenant_id = NULL;
    c.destination.beneficiary_id = NULL;
    c.payout.terms.amount = NULL;
    memset(&v, 0xa5, sizeof v);
    assert_int_equal(og_payout_evaluate(&c, &v), 0);
    assert_int_equal(v.outcome, OG_PAYOUT_DEFERRED);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    assert_string_equal(v.terms_fingerprint, "");
    assert_int_equal(v.evaluated.payout, 0);
    assert_int_equal(v.evaluated.tenant_settings, 0);
    assert_string_equal(v.policy_version, OG_PAYOUT_POLICY_VERSION);
}

/* paid + reserved + amount > limit denies; equal allows; a sum that
 * would overflow int64 denies. Amount 425,000 cents throughout. */
static void daily_limit_boundary_and_overflow(void **state)
{
    static const struct {
        const char *name;
        int64_t paid, reserved, limit;
        og_payout_reason reason;
    } rows[] = {
        {"equal to the limit is allowed", 4000000, 575000, 5000000,
         OG_PAYOUT_REASON_ALLOWED},
        {"one minor unit over is denied", 4000000, 575001, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"one minor unit over through paid alone", 4575001, 0, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"one minor unit over through reserved alone", 0, 4575001, 5000000,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"the amount alone is the limit", 0, 0, 425000,
         OG_PAYOUT_REASON_ALLOWED},
        {"the amount alone exceeds the limit", 0, 0, 424999,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"a zero limit", 0, 0, 0, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"sum exactly INT64_MAX is allowed under INT64_MAX",
         INT64_MAX - 425000, 0, INT64_MAX, OG_PAYOUT_REASON_ALLOWED},
        {"sum one past INT64_MAX overflows: denied",
         INT64_MAX - 424999, 0, INT64_MAX, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"paid + reserved overflows: denied", INT64_MAX, 1, INT64_MAX,
         OG_PAYOUT_REASON_DAILY_LIMIT},
        {"paid and reserved at INT64_MAX: denied", INT64_MAX, INT64_MAX,
         INT64_MAX, OG_PAYOUT_REASON_DAILY_LIMIT},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.tenant.paid_today = rows[i].paid;
        c.tenant.reserved_today = rows[i].reserved;
        c.tenant.daily_limit = rows[i].limit;
        print_message("%s\n", rows[i].name);
        og_payout_verdict v = evaluate_ok(&c);
        assert_int_equal(v.reason, rows[i].reason);
        assert_int_equal(v.outcome, og_payout_reason_outcome(rows[i].reason));
    }
}

/* "Changed in the last 7 days" = observed - changed < 7 days, exact at
 * the boundary and for any int64 pair. */
static void recently_changed_boundary(void **state)
{
    static const struct {
        const char *name;
        int64_t observed, changed;
        og_payout_reason reason;
    } rows[] = {
        {"exactly 7 days ago is not recent", NOW, NOW - 7 * DAY,
         OG_PAYOUT_REASON_ALLOWED},
        {"7 days less 1 us ago is recent", NOW, NOW - 7 * DAY + 1,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"changed at the observation", NOW, NOW,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"changed after the observation (skew) is recent", NOW, NOW + SEC,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"the widest gap does not overflow", INT64_MAX, INT64_MIN,
         OG_PAYOUT_REASON_ALLOWED},
        {"the widest negative gap does not overflow", INT64_MIN, INT64_MAX,
         OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"epoch origin, 7 days later", 7 * DAY, 0, OG_PAYOUT_REASON_ALLOWED},
    };

    (void)state;
    assert_int_equal(OG_PAYOUT_RECENT_CHANGE_US, 7 * DAY);
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.observed_at_us = rows[i].observed;
        c.destination.changed_at_us = rows[i].changed;
        print_message("%s\n", rows[i].name);
        assert_int_equal(evaluate_ok(&c).reason, rows[i].reason);
    }
}

static void requester_limit_boundary(void **state)
{
    static const struct {
        const char *name;
        int64_t limit;
        og_payout_reason reason;
    } rows[] = {
        {"amount equal to the limit is allowed", 425000,
         OG_PAYOUT_REASON_ALLOWED},
        {"one minor unit above the limit escalates", 424999,
         OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"a zero limit escalates", 0, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"the seed's 10,000.00", 1000000, OG_PAYOUT_REASON_ALLOWED},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        c.requester.approval_limit = rows[i].limit;
        print_message("%s\n", rows[i].name);
        assert_int_equal(evaluate_ok(&c).reason, rows[i].reason);
    }
}

/* The verdict names the policy, the intent's fingerprint and the versions
 * it evaluated; the fingerprint follows the intent's terms, not the
 * payout version. */
static void verdict_carries_fingerprint_policy_and_versions(void **state)
{
    (void)state;
    og_payout_context c = base_context();
    og_payout_verdict v = evaluate_ok(&c);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);
    assert_string_equal(v.policy_version, "oncegate-payout-policy/1");
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.tenant_settings, 12);
    assert_int_equal(v.evaluated.beneficiary, 4);
    assert_int_equal(v.evaluated.destination, 3);
    assert_int_equal(v.evaluated.payout, 6);

    /* A denial carries them too. */
    m_tenant_suspended(&c);
    v = evaluate_ok(&c);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.payout, 6);

    /* Intent and record spelled differently are the same terms. */
    c = base_context();
    c.intent.terms.amount = "4250";
    c.payout.terms.purpose = "  supplier-invoice   INV-9031 ";
    v = evaluate_ok(&c);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_ALLOWED);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
}

static void m_x_negative_limit(og_payout_context *c)
{
    c->tenant.daily_limit = -1;
}
static void m_x_negative_paid(og_payout_context *c)
{
    c->tenant.paid_today = -1;
}
static void m_x_negative_reserved(og_payout_context *c)
{
    c->tenant.reserved_today = INT64_MIN;
}
static void m_x_settings_version(og_payout_context *c)
{
    c->tenant.settings_version = 0;
}
static void m_x_negative_approval(og_payout_context *c)
{
    c->requester.approval_limit = -425000;
}
static void m_x_status(og_payout_context *c)
{
    c->beneficiary.status = (og_payout_beneficiary_status)3;
}
static void m_x_status_negative(og_payout_context *c)
{
    c->beneficiary.status = (og_payout_beneficiary_status)-1;
}
static void m_x_beneficiary_version(og_payout_context *c)
{
    c->beneficiary.version = 0;
}
static void m_x_destination_beneficiary_null(og_payout_context *c)
{
    c->destination.beneficiary_id = NULL;
}
static void m_x_destination_beneficiary_space(og_payout_context *c)
{
    c->destination.beneficiary_id = "BEN 2208";
}
static void m_x_destination_version(og_payout_context *c)
{
    c->destination.version = -3;
}
static void m_x_state(og_payout_context *c)
{
    c->payout.state = (og_payout_state)7;
}
static void m_x_payout_version(og_payout_context *c)
{
    c->payout.version = 0;
}
static void m_x_intent_version(og_payout_context *c)
{
    c->intent.payout_version = 0;
}
static void m_x_intent_tenant(og_payout_context *c)
{
    c->intent.terms.tenant_id = "";
}
static void m_x_intent_amount(og_payout_context *c)
{
    c->intent.terms.amount = "4250.001";
}
static void m_x_record_purpose(og_payout_context *c)
{
    c->payout.terms.purpose = "\t";
}
static void m_x_record_amount(og_payout_context *c)
{
    c->payout.terms.amount = "4300.00";
}
static void m_x_record_destination_version(og_payout_context *c)
{
    c->payout.terms.destination_version = 4;
}
static void m_x_record_purpose_absent(og_payout_context *c)
{
    c->payout.terms.purpose = NULL;
}

/* Errors, not outcomes: an inconsistent context, bad terms, or an intent
 * that is not the record's. Nothing is written. */
static void inconsistent_contexts_are_errors(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        int rc;
    } rows[] = {
        {"negative daily limit", m_x_negative_limit, OG_EPAYOUT_CONTEXT},
        {"negative paid today", m_x_negative_paid, OG_EPAYOUT_CONTEXT},
        {"negative reserved today", m_x_negative_reserved,
         OG_EPAYOUT_CONTEXT},
        {"settings version 0", m_x_settings_version, OG_EPAYOUT_CONTEXT},
        {"negative approval limit", m_x_negative_approval,
         OG_EPAYOUT_CONTEXT},
        {"beneficiary status past the list", m_x_status, OG_EPAYOUT_CONTEXT},
        {"beneficiary status negative", m_x_status_negative,
         OG_EPAYOUT_CONTEXT},
        {"beneficiary version 0", m_x_beneficiary_version,
         OG_EPAYOUT_CONTEXT},
        {"destination without a beneficiary",
         m_x_destination_beneficiary_null, OG_EPAYOUT_CONTEXT},
        {"destination beneficiary not an id",
         m_x_destination_beneficiary_space, OG_EPAYOUT_CONTEXT},
        {"destination version negative", m_x_destination_version,
         OG_EPAYOUT_CONTEXT},
        {"payout state past the list", m_x_state, OG_EPAYOUT_CONTEXT},
        {"payout version 0", m_x_payout_version, OG_EPAYOUT_CONTEXT},
        {"intent payout version 0", m_x_intent_version, OG_EPAYOUT_CONTEXT},
        {"intent tenant empty", m_x_intent_tenant, OG_EPAYOUT_TENANT},
        {"intent amount finer than EUR", m_x_intent_amount,
         OG_EPAYOUT_AMOUNT},
        {"record purpose with a tab", m_x_record_purpose,
         OG_EPAYOUT_PURPOSE},
        {"record amount differs from the intent's", m_x_record_amount,
         OG_EPAYOUT_INTENT_MISMATCH},
        {"record destination version differs from the intent's",
         m_x_record_destination_version, OG_EPAYOUT_INTENT_MISMATCH},
        {"record without the intent's purpose", m_x_record_purpose_absent,
         OG_EPAYOUT_INTENT_MISMATCH},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = base_context();
        og_payout_verdict v, before;
        rows[i].m(&c);
        memset(&v, 0xa5, sizeof v);
        before = v;
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate(&c, &v), rows[i].rc);
        assert_memory_equal(&v, &before, sizeof v);
    }
    og_payout_context c = base_context();
    og_payout_verdict v;
    assert_int_equal(og_payout_evaluate(NULL, &v), OG_EINVAL);
    assert_int_equal(og_payout_evaluate(&c, NULL), OG_EINVAL);
}

/* ===========================================================================
 * The execution recheck (seed section 9)
 * ========================================================================= */

static void x_none(og_payout_context *c) { (void)c; }
static void x_unavailable(og_payout_context *c) { c->unavailable = true; }
static void x_cancelled(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_CANCELLED;
    c->payout.version = 8;
}
static void x_still_draft(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_DRAFT;
}
static void x_executing(og_payout_context *c)
{
    c->payout.state = OG_PAYOUT_STATE_EXECUTING;
}
static void x_version_moved(og_payout_context *c)
{
    c->payout.version = 8;
}
/* The host moves the payout's version when its destination changes. */
static void x_destination_changed_version_moved(og_payout_context *c)
{
    c->destination.version = 4;
    c->destination.changed_at_us = c->observed_at_us - 3600 * SEC;
    c->payout.terms.destination_version = 4;
    c->payout.version = 8;
}
/* ... and if it does not, the changed terms are caught. */
static void x_destination_changed_same_version(og_payout_context *c)
{
    c->destination.version = 4;
    c->payout.terms.destination_version = 4;
}
/* ... and a destination re-registered while the record still names v3. */
static void x_destination_reregistered(og_payout_context *c)
{
    c->destination.version = 4;
}
static void x_amount_changed(og_payout_context *c)
{
    c->payout.terms.amount = "4300.00";
    c->tenant.reserved_today = 430000;
}
static void x_purpose_changed(og_payout_context *c)
{
    c->payout.terms.purpose = "supplier-invoice INV-9032";
}
static void x_purpose_respelled(og_payout_context *c)
{
    c->payout.terms.purpose = "  supplier-invoice    INV-9031 ";
    c->payout.terms.amount = "4250";
}
static void x_tenant_suspended(og_payout_context *c)
{
    c->tenant.payouts_suspended = true;
    c->tenant.settings_version = 13;
}
static void x_beneficiary_suspended(og_payout_context *c)
{
    c->beneficiary.status = OG_PAYOUT_BENEFICIARY_SUSPENDED;
    c->beneficiary.version = 5;
}
static void x_destination_now_recent(og_payout_context *c)
{
    /* Same version (a change the host does not version), changed an hour
     * ago: acknowledgment would be needed now, so the grant is refused. */
    c->destination.changed_at_us = c->observed_at_us - 3600 * SEC;
}
/* 45,750.00 paid + this payout's own 4,250.00 reserved = 50,000.00: at
 * the limit, allowed — counting the reservation again would deny. */
static void x_own_reservation_at_limit(og_payout_context *c)
{
    c->tenant.paid_today = 4575000;
}
/* Another payout's reservation of one cent on top: over. */
static void x_other_reservation_over(og_payout_context *c)
{
    c->tenant.paid_today = 4575000;
    c->tenant.reserved_today = 425001;
}
static void x_limit_lowered(og_payout_context *c)
{
    c->tenant.daily_limit = 424999;
}
static void x_captured_limit_equal(og_payout_context *c)
{
    c->requester.approval_limit = 425000;
}
static void x_captured_limit_below(og_payout_context *c)
{
    c->requester.approval_limit = 424999;
}
static void x_cancelled_and_changed(og_payout_context *c)
{
    x_cancelled(c);
    x_amount_changed(c);
}
static void x_changed_and_suspended(og_payout_context *c)
{
    x_purpose_changed(c);
    x_tenant_suspended(c);
}

static void execution_recheck(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        og_payout_exec_outcome outcome;
        og_payout_worker_reason reason;
        const char *reason_text;
        bool rechecked;
        og_payout_reason inner; /* when rechecked */
    } rows[] = {
        {"valid: Approved at the grant's version, terms unchanged", x_none,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Context unavailable at the worker: postponed", x_unavailable,
         OG_PAYOUT_EXEC_POSTPONED, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE,
         "context.unavailable", false, 0},
        {"Payout cancelled after the decision", x_cancelled,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Payout still in Draft", x_still_draft, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Payout already Executing", x_executing, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Payout version moved past the grant's", x_version_moved,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Destination changed after the decision (payout version moved)",
         x_destination_changed_version_moved, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE, "payout.not-executable",
         false, 0},
        {"Destination changed in the record at the same version: terms "
         "differ",
         x_destination_changed_same_version, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_BINDING_MISMATCH, "binding.mismatch", false, 0},
        {"Amount changed in the record at the same version",
         x_amount_changed, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_BINDING_MISMATCH, "binding.mismatch", false, 0},
        {"Purpose changed in the record", x_purpose_changed,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_BINDING_MISMATCH,
         "binding.mismatch", false, 0},
        {"Terms only respelled: still the grant's", x_purpose_respelled,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Tenant suspended after the decision", x_tenant_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true, OG_PAYOUT_REASON_TENANT_SUSPENDED},
        {"Beneficiary suspended after the decision", x_beneficiary_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true,
         OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE},
        {"Destination re-registered at another version",
         x_destination_reregistered, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED},
        {"Destination now recently changed: acknowledgment refuses too",
         x_destination_now_recent, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED},
        {"Own reservation counted once: at the limit is valid",
         x_own_reservation_at_limit, OG_PAYOUT_EXEC_VALID,
         OG_PAYOUT_WORKER_NONE, "none", true, OG_PAYOUT_REASON_ALLOWED},
        {"Another reservation of one cent on top: over the limit",
         x_other_reservation_over, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"Daily limit lowered below this payout", x_limit_lowered,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS,
         "policy.no-longer-allows", true, OG_PAYOUT_REASON_DAILY_LIMIT},
        {"Captured requester limit equal to the amount", x_captured_limit_equal,
         OG_PAYOUT_EXEC_VALID, OG_PAYOUT_WORKER_NONE, "none", true,
         OG_PAYOUT_REASON_ALLOWED},
        {"Captured requester limit below the amount: escalation refuses",
         x_captured_limit_below, OG_PAYOUT_EXEC_REFUSED,
         OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows",
         true, OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT},
        {"Order: not executable before binding", x_cancelled_and_changed,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE,
         "payout.not-executable", false, 0},
        {"Order: binding before the policy", x_changed_and_suspended,
         OG_PAYOUT_EXEC_REFUSED, OG_PAYOUT_WORKER_BINDING_MISMATCH,
         "binding.mismatch", false, 0},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = exec_context();
        og_payout_grant_binding g = grant_19c();
        og_payout_exec_verdict x;
        rows[i].m(&c);
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
        assert_int_equal(x.outcome, rows[i].outcome);
        assert_int_equal(x.reason, rows[i].reason);
        assert_string_equal(og_payout_worker_reason_name(x.reason),
                            rows[i].reason_text);
        assert_int_equal(x.rechecked, rows[i].rechecked);
        if (rows[i].rechecked) {
            assert_int_equal(x.recheck.reason, rows[i].inner);
            assert_int_equal(x.recheck.outcome,
                             og_payout_reason_outcome(rows[i].inner));
            assert_string_equal(x.recheck.terms_fingerprint, FP_PAY3107);
            assert_string_equal(x.recheck.policy_version,
                                OG_PAYOUT_POLICY_VERSION);
        } else {
            assert_string_equal(x.recheck.terms_fingerprint, "");
        }
        if (x.outcome == OG_PAYOUT_EXEC_VALID) {
            /* What the claim fences. */
            assert_int_equal(x.relied.tenant_settings,
                             c.tenant.settings_version);
            assert_int_equal(x.relied.beneficiary, 4);
            assert_int_equal(x.relied.destination, 3);
            assert_int_equal(x.relied.payout, 7);
        } else {
            assert_int_equal(x.relied.payout, 0);
        }
    }
}

/* The decision and the recheck agree on the seed's day: the 09:58 intent
 * is Allowed, its fingerprint is what the grant carries, and the 16:00
 * recheck of that grant is valid. */
static void decision_fingerprint_is_what_the_recheck_compares(void **state)
{
    (void)state;
    og_payout_context d = base_context();
    og_payout_verdict v = evaluate_ok(&d);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);

    og_payout_context c = exec_context();
    og_payout_grant_binding g = {v.terms_fingerprint, d.payout.version + 1};
    og_payout_exec_verdict x;
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
    assert_int_equal(x.outcome, OG_PAYOUT_EXEC_VALID);
}

static void x_e_reserved_missing(og_payout_context *c)
{
    c->tenant.reserved_today = 424999;
}
static void x_e_record_amount(og_payout_context *c)
{
    c->payout.terms.amount = "four thousand";
}
static void x_e_negative_limit(og_payout_context *c)
{
    c->tenant.daily_limit = -1;
}

static void execution_recheck_errors(void **state)
{
    static const struct {
        const char *name;
        mutation m;
        const char *fp;
        int64_t version;
        int rc;
    } rows[] = {
        {"grant fingerprint upper case", x_none,
         "394B6257BB0F937EB3C7591E9CF1D6F873668FCC0D4D760A6456ABB91670A22A",
         7, OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint of 63 characters", x_none,
         "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22", 7,
         OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint of 65 characters", x_none, FP_PAY3107 "0", 7,
         OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint not hex", x_none,
         "394b6257bb0f937eb3c7591e9cf1d6f873668fcc0d4d760a6456abb91670a22g",
         7, OG_EPAYOUT_FINGERPRINT},
        {"grant fingerprint NULL", x_none, NULL, 7, OG_EPAYOUT_FINGERPRINT},
        {"grant executable version 0", x_none, FP_PAY3107, 0,
         OG_EPAYOUT_CONTEXT},
        {"reserved today without this payout's reservation",
         x_e_reserved_missing, FP_PAY3107, 7, OG_EPAYOUT_CONTEXT},
        {"record amount not an amount", x_e_record_amount, FP_PAY3107, 7,
         OG_EPAYOUT_AMOUNT},
        {"negative daily limit", x_e_negative_limit, FP_PAY3107, 7,
         OG_EPAYOUT_CONTEXT},
    };

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        og_payout_context c = exec_context();
        og_payout_grant_binding g = {rows[i].fp, rows[i].version};
        og_payout_exec_verdict x, before;
        rows[i].m(&c);
        memset(&x, 0xa5, sizeof x);
        before = x;
        print_message("%s\n", rows[i].name);
        assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x),
                         rows[i].rc);
        assert_memory_equal(&x, &before, sizeof x);
    }

    /* P5: unavailable reads neither the context nor the grant. */
    og_payout_context c;
    memset(&c, 0xff, sizeof c);
    c.unavailable = true;
    c.payout.terms.tenant_id = NULL;
    og_payout_grant_binding g = {NULL, -1};
    og_payout_exec_verdict x;
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, &x), 0);
    assert_int_equal(x.outcome, OG_PAYOUT_EXEC_POSTPONED);
    assert_int_equal(x.reason, OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE);
    assert_false(x.rechecked);

    c = exec_context();
    g = grant_19c();
    assert_int_equal(og_payout_evaluate_for_execution(NULL, &g, &x),
                     OG_EINVAL);
    assert_int_equal(og_payout_evaluate_for_execution(&c, NULL, &x),
                     OG_EINVAL);
    assert_int_equal(og_payout_evaluate_for_execution(&c, &g, NULL),
                     OG_EINVAL);
}

/* ===========================================================================
 * Names and error codes
 * ========================================================================= */

static void names_are_the_seeds_and_stable(void **state)
{
    static const char *const outcomes[] = {
        "Allowed", "Denied", "Deferred", "AcknowledgmentRequired",
        "EscalationRecommended"};
    static const struct {
        const char *code;
        og_payout_outcome outcome;
    } reasons[] = {
        {"context.unavailable", OG_PAYOUT_DEFERRED},
        {"tenant.payouts-suspended", OG_PAYOUT_DENIED},
        {"beneficiary.not-eligible", OG_PAYOUT_DENIED},
        {"destination.not-registered", OG_PAYOUT_DENIED},
        {"payout.not-submittable", OG_PAYOUT_DENIED},
        {"tenant.daily-limit", OG_PAYOUT_DENIED},
        {"destination.recently-changed", OG_PAYOUT_ACKNOWLEDGMENT_REQUIRED},
        {"amount.above-requester-limit", OG_PAYOUT_ESCALATION_RECOMMENDED},
        {"payout.allowed", OG_PAYOUT_ALLOWED},
    };
    static const char *const workers[] = {
        "none",          "grant.unknown",          "binding.mismatch",
        "presenter.not-audience", "grant.revoked", "grant.consumed",
        "grant.expired", "context.unavailable",    "payout.not-executable",
        "policy.no-longer-allows", "claim.lost",   "claim.context-changed"};
    static const char *const states[] = {"Draft",  "Approved", "Executing",
                                         "Paid",   "Failed",   "Unknown",
                                         "Cancelled"};
    static const char *const statuses[] = {"Active", "Suspended", "Closed"};
    static const char *const exec[] = {"valid", "refused", "postponed"};

    (void)state;
    for (size_t i = 0; i < N(outcomes); i++)
        assert_string_equal(og_payout_outcome_name((og_payout_outcome)i),
                            outcomes[i]);
    assert_string_equal(og_payout_outcome_name((og_payout_outcome)N(outcomes)),
                        "?");
    for (size_t i = 0; i < N(reasons); i++) {
        assert_string_equal(og_payout_reason_name((og_payout_reason)i),
                            reasons[i].code);
        assert_int_equal(og_payout_reason_outcome((og_payout_reason)i),
                         reasons[i].outcome);
    }
    assert_string_equal(og_payout_reason_name((og_payout_reason)N(reasons)),
                        "?");
    assert_string_equal(og_payout_reason_name((og_payout_reason)-1), "?");
    /* A corrupted reason never reads as Allowed. */
    assert_int_equal(og_payout_reason_outcome((og_payout_reason)N(reasons)),
                     OG_PAYOUT_DENIED);
    assert_int_equal(og_payout_reason_outcome((og_payout_reason)-1),
                     OG_PAYOUT_DENIED);
    for (size_t i = 0; i < N(workers); i++)
        assert_string_equal(
            og_payout_worker_reason_name((og_payout_worker_reason)i),
            workers[i]);
    assert_string_equal(
        og_payout_worker_reason_name((og_payout_worker_reason)N(workers)),
        "?");
    for (size_t i = 0; i < N(states); i++)
        assert_string_equal(og_payout_state_name((og_payout_state)i),
                            states[i]);
    assert_string_equal(og_payout_state_name((og_payout_state)N(states)), "?");
    for (size_t i = 0; i < N(statuses); i++)
        assert_string_equal(og_payout_beneficiary_status_name(
                                (og_payout_beneficiary_status)i),
                            statuses[i]);
    assert_string_equal(og_payout_beneficiary_status_name(
                            (og_payout_beneficiary_status)N(statuses)),
                        "?");
    for (size_t i = 0; i < N(exec); i++)
        assert_string_equal(
            og_payout_exec_outcome_name((og_payout_exec_outcome)i), exec[i]);
    assert_string_equal(
        og_payout_exec_outcome_name((og_payout_exec_outcome)N(exec)), "?");
}

/* ===========================================================================
 * Re-authorization (seed section 16) and the release day
 * ========================================================================= */

/* A re-authorization runs the same rules in the same order; only rule 4
 * expects Approved with no active attempt instead of Draft. */
static void reauthorization_expects_approved_without_an_active_attempt(
    void **state)
{
    og_payout_context c = base_context();
    og_payout_verdict v;

    (void)state;
    c.payout.state = OG_PAYOUT_STATE_APPROVED;
    c.payout.version = 9;
    c.intent.payout_version = 9;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_ALLOWED);
    assert_string_equal(v.terms_fingerprint, FP_PAY3107);
    assert_int_equal(v.evaluated.payout, 9);
    /* an attempt still Claimed, Started or Unknown */
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    assert_int_equal(v.outcome, OG_PAYOUT_DENIED);
    /* a first submission of an Approved payout, and a re-authorization of
     * a Draft, a Cancelled or an Executing one, or at another version */
    assert_int_equal(og_payout_evaluate(&c, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    c.intent.payout_version = 8;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
    c.intent.payout_version = 9;
    {
        static const og_payout_state others[] = {
            OG_PAYOUT_STATE_DRAFT, OG_PAYOUT_STATE_EXECUTING,
            OG_PAYOUT_STATE_PAID, OG_PAYOUT_STATE_CANCELLED};
        for (size_t i = 0; i < N(others); i++) {
            og_payout_context o = c;
            o.payout.state = others[i];
            assert_int_equal(og_payout_evaluate_reauthorization(&o, false, &v),
                             0);
            assert_int_equal(v.reason,
                             OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE);
        }
    }
    /* the order of checks is the policy's: an earlier rule reports first */
    c.tenant.payouts_suspended = true;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_TENANT_SUSPENDED);
    c.tenant.payouts_suspended = false;
    c.tenant.reserved_today = c.tenant.daily_limit;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, false, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_DAILY_LIMIT);
    /* unavailable: Deferred, nothing read */
    c.unavailable = true;
    assert_int_equal(og_payout_evaluate_reauthorization(&c, true, &v), 0);
    assert_int_equal(v.reason, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
    assert_int_equal(og_payout_evaluate_reauthorization(NULL, false, &v),
                     OG_EINVAL);
}

/* The local date at the tenant's offset: midnights, leap days, the ends of
 * the range, both extreme offsets. */
static void release_day_is_the_local_date_at_the_settlement_offset(
    void **state)
{
    static const struct {
        const char *what;
        int64_t at_us;
        int offset;
        const char *day;
    } rows[] = {
        {"the epoch", 0, 0, "1970-01-01"},
        {"one minute west of the epoch", 0, -1, "1969-12-31"},
        {"UTC midnight", INT64_C(1772323200000000), 0, "2026-03-01"},
        {"the microsecond before", INT64_C(1772323199999999), 0,
         "2026-02-28"},
        {"UTC midnight seen from UTC-05:00", INT64_C(1772323200000000), -300,
         "2026-02-28"},
        {"2024 is a leap year", INT64_C(1709208000000000), 0, "2024-02-29"},
        {"2000 is a leap year", INT64_C(951782400000000), 0, "2000-02-29"},
        {"2100 is not: 23:30Z at UTC+01:00", INT64_C(4107540600000000), 60,
         "2100-03-01"},
        {"the seed's 09:58 batch day, UTC+14:00", NOW, 840, "2027-01-15"},
        {"16:00Z at UTC+14:00 is the next day", NOW + 8 * 3600 * SEC, 840,
         "2027-01-16"},
        {"08:00Z at UTC-14:00 is the day before", NOW, -840, "2027-01-14"},
        {"the last instant", INT64_C(253402300799999999), 0, "9999-12-31"},
    };
    char day[OG_PAYOUT_DAY_LEN + 1];

    (void)state;
    for (size_t i = 0; i < N(rows); i++) {
        memset(day, 0, sizeof day);
        assert_int_equal(og_payout_release_day(rows[i].at_us, rows[i].offset,
                                               day),
                         0);
        if (strcmp(day, rows[i].day) != 0)
            fprintf(stderr, "%s: %s\n", rows[i].what, day);
        assert_string_equal(day, rows[i].day);
    }
    strcpy(day, "untouched!");
    assert_int_equal(og_payout_release_day(0, 841, day), OG_EPAYOUT_OFFSET);
    assert_int_equal(og_payout_release_day(0, -841, day), OG_EPAYOUT_OFFSET);
    assert_int_equal(og_payout_release_day(-1, 0, day), OG_EINVAL);
    /* 9999-12-31T23:59Z at UTC+00:01 is in year 10000 */
    assert_int_equal(og_payout_release_day(INT64_C(253402300799999999), 1,
                                           day),
                     OG_EINVAL);
    assert_string_equal(day, "untouched!");
    assert_int_equal(og_payout_release_day(0, 0, NULL), OG_EINVAL);
}

/* The new codes were appended: the existing ones keep their values. */
static void error_codes_were_appended(void **state)
{
    static const struct {
        int err;
        const char *name;
    } rows[] = {
        {OG_EPAYOUT_TENANT, "input.tenant_id_invalid"},
        {OG_EPAYOUT_BENEFICIARY, "input.beneficiary_id_invalid"},
        {OG_EPAYOUT_DESTINATION, "input.destination_id_invalid"},
        {OG_EPAYOUT_DESTINATION_VERSION, "input.destination_version_invalid"},
        {OG_EPAYOUT_CURRENCY, "input.payout_currency_invalid"},
        {OG_EPAYOUT_AMOUNT, "input.payout_amount_invalid"},
        {OG_EPAYOUT_PURPOSE, "input.purpose_invalid"},
        {OG_EPAYOUT_FINGERPRINT, "input.terms_fingerprint_invalid"},
        {OG_EPAYOUT_CONTEXT, "input.payout_context_invalid"},
        {OG_EPAYOUT_INTENT_MISMATCH, "input.payout_intent_mismatch"},
        /* the provider client's payout destination */
        {OG_EDESTINATION, "input.destination_invalid"},
        /* the payout store's (schema 8) */
        {OG_EPAYOUT_ID, "input.payout_id_invalid"},
        {OG_EPAYOUT_OFFSET, "input.settlement_offset_invalid"},
        {OG_EPAYOUT_LIMIT, "input.payout_limit_invalid"},
        {OG_EPAYOUT_WINDOW, "input.grant_window_invalid"},
        {OG_EPAYOUT_REQUESTER, "input.requester_invalid"},
        {OG_EPAYOUT_CORRELATION, "input.correlation_id_invalid"},
        {OG_EPAYOUT_TOKEN, "input.provider_token_invalid"},
        {OG_EPAYOUT_JOB, "input.job_id_invalid"},
        {OG_EPAYOUT_VERSION, "input.record_version_invalid"},
    };

    (void)state;
    assert_int_equal(OG_ENOMEM, -1);
    assert_int_equal(OG_ESTOPPED, -54);
    assert_int_equal(OG_ECLIENT_REFERENCE, -55); /* the last before these */
    for (size_t i = 0; i < N(rows); i++) {
        assert_int_equal(rows[i].err, OG_ECLIENT_REFERENCE - 1 - (int)i);
        assert_string_equal(og_err_name(rows[i].err), rows[i].name);
        assert_string_not_equal(og_strerror(rows[i].err), "unknown error");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(currencies_have_their_iso_4217_scales),
        cmocka_unit_test(amounts_parse_at_the_currency_scale),
        cmocka_unit_test(amounts_format_at_the_currency_scale),
        cmocka_unit_test(amounts_round_trip),
        cmocka_unit_test(purposes_are_trimmed_collapsed_and_capped),
        cmocka_unit_test(fingerprint_known_answer),
        cmocka_unit_test(fingerprint_ignores_spelling),
        cmocka_unit_test(fingerprint_changes_with_every_field),
        cmocka_unit_test(absent_purpose_differs_from_every_present_one),
        cmocka_unit_test(length_prefixes_prevent_collisions),
        cmocka_unit_test(bad_terms_are_refused_with_their_field),
        cmocka_unit_test(canonical_cap_holds_the_largest_terms),
        cmocka_unit_test(policy_matrix_of_section_1),
        cmocka_unit_test(decision_rows_of_section_18),
        cmocka_unit_test(policy_reports_the_first_rule_in_the_seeds_order),
        cmocka_unit_test(unavailable_context_reads_nothing_else),
        cmocka_unit_test(daily_limit_boundary_and_overflow),
        cmocka_unit_test(recently_changed_boundary),
        cmocka_unit_test(requester_limit_boundary),
        cmocka_unit_test(verdict_carries_fingerprint_policy_and_versions),
        cmocka_unit_test(inconsistent_contexts_are_errors),
        cmocka_unit_test(execution_recheck),
        cmocka_unit_test(decision_fingerprint_is_what_the_recheck_compares),
        cmocka_unit_test(execution_recheck_errors),
        cmocka_unit_test(
            reauthorization_expects_approved_without_an_active_attempt),
        cmocka_unit_test(release_day_is_the_local_date_at_the_settlement_offset),
        cmocka_unit_test(names_are_the_seeds_and_stable),
        cmocka_unit_test(error_codes_were_appended),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
