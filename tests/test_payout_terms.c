/*
 * test_payout_terms.c — money in minor units at the
 * currency's scale, purposes, the terms and their fingerprint.
 * (The decision side of a delayed payout, pure; test_payout.c has the
 * scenario and the list.)
 */
#include "test_payout.h"

/* ===========================================================================
 * Money
 * ========================================================================= */

/* Every exception of ISO 4217 List One, a sample of the 2-digit rule, and
 * every code without minor units. */
void currencies_have_their_iso_4217_scales(void **state)
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

void amounts_parse_at_the_currency_scale(void **state)
{
    static const struct {
        const char *name, *text, *currency;
        int rc;
        int64_t minor;
    } rows[] = {
        {"the scenario's amount", "4250.00", "EUR", 0, 425000},
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
        {"more decimals than the scale", "4250.000", "EUR",
         OG_EAMOUNT_MINOR_UNITS, 0},
        {"more decimals than the scale, non-zero", "0.001", "EUR",
         OG_EAMOUNT_MINOR_UNITS, 0},
        {"a tenth of a cent", "0.001", "USD", OG_EAMOUNT_MINOR_UNITS, 0},
        {"a fraction at scale 0", "1.5", "JPY", OG_EAMOUNT_MINOR_UNITS, 0},
        {"whole yen", "15", "JPY", 0, 15},
        {"one cent of USD", "0.01", "USD", 0, 1},
        {"a malformed fraction is malformed, not finer", "1.5x", "JPY",
         OG_EPAYOUT_AMOUNT, 0},
        {"a point at scale 0", "4250.0", "JPY", OG_EAMOUNT_MINOR_UNITS, 0},
        {"a bare point at scale 0", "4250.", "JPY", OG_EPAYOUT_AMOUNT, 0},
        {"scale 3 with four decimals", "1.2345", "BHD", OG_EAMOUNT_MINOR_UNITS,
         0},
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

void amounts_format_at_the_currency_scale(void **state)
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

/* PC2: parse(format(x)) == x for every scale and a spread of values, and
 * format(parse(text)) is the canonical spelling. */
void amounts_round_trip(void **state)
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

void purposes_are_trimmed_collapsed_and_capped(void **state)
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
 * description, and the digest of the scenario's payout. */
void fingerprint_known_answer(void **state)
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

/* PC3: the same payout, spelled differently, is one fingerprint. */
void fingerprint_ignores_spelling(void **state)
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

/* PC3: change any one field and the fingerprint changes; no two of these
 * payouts share one. */
void fingerprint_changes_with_every_field(void **state)
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
void absent_purpose_differs_from_every_present_one(void **state)
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
void length_prefixes_prevent_collisions(void **state)
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
void bad_terms_are_refused_with_their_field(void **state)
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
         {"T", "B", "D", 1, "1.001", "EUR", NULL}, OG_EAMOUNT_MINOR_UNITS},
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
void canonical_cap_holds_the_largest_terms(void **state)
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
