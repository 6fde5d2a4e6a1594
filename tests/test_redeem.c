/*
 * test_redeem.c — the pure part of redeeming a single-use token
 * (lib/core/redeem.c): what a token exchange's answer means (RFC 6749 5.1
 * and 5.2, one table), sealing and opening results (RD3), the catch-up
 * loop's decisions (RD1, RD2) and the key file. No store, no provider.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>

#include "core/core_int.h"
#include "oncegate/redeem.h"
#include "support.h"

#define TOKEN_OK                                                               \
    "{\"access_token\":\"at_1\",\"token_type\":\"Bearer\","                    \
    "\"expires_in\":3600,\"refresh_token\":\"rt_1\"}"

static og_exchange_outcome classify(og_provider_transport t, int status,
                                    const char *body)
{
    og_provider_response r = {t, status, body, body ? strlen(body) : 0, NULL};
    og_exchange_outcome o;

    og_exchange_classify(&r, &o);
    return o;
}

/* One row per documented answer and per way of not being one. */
static void exchange_answers_map_to_their_classes(void **state)
{
    static const struct {
        const char *name;
        og_provider_transport t;
        int status;
        const char *body;
        og_exchange_class cls;
        const char *reason;
    } cases[] = {
        {"token response", OG_TRANSPORT_OK, 200, TOKEN_OK,
         OG_EXCHANGE_SUCCEEDED, "exchanged"},
        {"minimal token response", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"token_type\":\"Bearer\"}",
         OG_EXCHANGE_SUCCEEDED, "exchanged"},
        {"extension members are kept", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"token_type\":\"b\",\"id_token\":\"x.y.z\","
         "\"scope\":\"read write\"}",
         OG_EXCHANGE_SUCCEEDED, "exchanged"},
        {"invalid_grant: spent", OG_TRANSPORT_OK, 400,
         "{\"error\":\"invalid_grant\",\"error_description\":\"x\"}",
         OG_EXCHANGE_ALREADY_USED, "invalid_grant"},
        {"invalid_grant needs 400", OG_TRANSPORT_OK, 401,
         "{\"error\":\"invalid_grant\"}", OG_EXCHANGE_UNKNOWN,
         "undocumented_error_401"},
        {"invalid_request is a rejection", OG_TRANSPORT_OK, 400,
         "{\"error\":\"invalid_request\"}", OG_EXCHANGE_REJECTED,
         "invalid_request"},
        {"invalid_client 401", OG_TRANSPORT_OK, 401,
         "{\"error\":\"invalid_client\"}", OG_EXCHANGE_REJECTED,
         "invalid_client"},
        {"unauthorized_client", OG_TRANSPORT_OK, 400,
         "{\"error\":\"unauthorized_client\"}", OG_EXCHANGE_REJECTED,
         "unauthorized_client"},
        {"unsupported_grant_type", OG_TRANSPORT_OK, 400,
         "{\"error\":\"unsupported_grant_type\"}", OG_EXCHANGE_REJECTED,
         "unsupported_grant_type"},
        {"invalid_scope", OG_TRANSPORT_OK, 400, "{\"error\":\"invalid_scope\"}",
         OG_EXCHANGE_REJECTED, "invalid_scope"},
        {"an undocumented error code", OG_TRANSPORT_OK, 400,
         "{\"error\":\"slow_down\"}", OG_EXCHANGE_UNKNOWN,
         "undocumented_error_400"},
        {"a 400 without a body", OG_TRANSPORT_OK, 400, NULL,
         OG_EXCHANGE_UNKNOWN, "undocumented_error_400"},
        {"error is not a string", OG_TRANSPORT_OK, 400, "{\"error\":1}",
         OG_EXCHANGE_UNKNOWN, "undocumented_error_400"},
        {"500", OG_TRANSPORT_OK, 500, "{\"error\":\"internal\"}",
         OG_EXCHANGE_UNKNOWN, "undocumented_status_500"},
        {"429", OG_TRANSPORT_OK, 429, NULL, OG_EXCHANGE_UNKNOWN,
         "undocumented_status_429"},
        {"a redirect", OG_TRANSPORT_OK, 302, NULL, OG_EXCHANGE_UNKNOWN,
         "undocumented_status_302"},
        {"201 is not 200", OG_TRANSPORT_OK, 201, TOKEN_OK, OG_EXCHANGE_UNKNOWN,
         "undocumented_status_201"},
        {"200 without a body", OG_TRANSPORT_OK, 200, NULL, OG_EXCHANGE_UNKNOWN,
         "malformed_success"},
        {"200 not JSON", OG_TRANSPORT_OK, 200, "ok", OG_EXCHANGE_UNKNOWN,
         "malformed_success"},
        {"200 an array", OG_TRANSPORT_OK, 200, "[]", OG_EXCHANGE_UNKNOWN,
         "malformed_success"},
        {"no access_token", OG_TRANSPORT_OK, 200, "{\"token_type\":\"Bearer\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"empty access_token", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"\",\"token_type\":\"Bearer\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"access_token with a control byte", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\\nb\",\"token_type\":\"Bearer\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"no token_type", OG_TRANSPORT_OK, 200, "{\"access_token\":\"a\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"expires_in negative", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"token_type\":\"b\",\"expires_in\":-1}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"expires_in a string", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"token_type\":\"b\",\"expires_in\":\"1\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"refresh_token not a string", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"token_type\":\"b\",\"refresh_token\":1}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"a repeated member", OG_TRANSPORT_OK, 200,
         "{\"access_token\":\"a\",\"access_token\":\"b\",\"token_type\":\"c\"}",
         OG_EXCHANGE_UNKNOWN, "malformed_success"},
        {"timeout", OG_TRANSPORT_TIMEOUT, 0, NULL, OG_EXCHANGE_UNKNOWN,
         "transport_timeout"},
        {"dropped answer", OG_TRANSPORT_NO_RESPONSE, 0, NULL,
         OG_EXCHANGE_UNKNOWN, "transport_no_response"},
        {"nothing sent", OG_TRANSPORT_CONNECT_FAILED, 0, NULL,
         OG_EXCHANGE_UNKNOWN, "transport_connect_failed"},
        {"a 200 cut short", OG_TRANSPORT_RESET, 200, TOKEN_OK,
         OG_EXCHANGE_UNKNOWN, "transport_connection_reset"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_exchange_outcome o =
            classify(cases[i].t, cases[i].status, cases[i].body);

        print_message("%s\n", cases[i].name);
        assert_string_equal(og_exchange_class_name(o.cls),
                            og_exchange_class_name(cases[i].cls));
        assert_string_equal(o.reason, cases[i].reason);
        /* A result exactly when the code was exchanged by this call. */
        assert_int_equal(o.result != NULL, cases[i].cls == OG_EXCHANGE_SUCCEEDED);
        og_exchange_outcome_clear(&o);
        assert_null(o.result);
    }
}

/* SUCCEEDED carries the token response as compact JSON, itself a token
 * response: classifying it again gives the same text. */
static void token_response_is_kept_as_compact_json(void **state)
{
    og_exchange_outcome a = classify(OG_TRANSPORT_OK, 200,
                                     "{ \"access_token\" : \"at_1\",\n"
                                     "  \"token_type\": \"Bearer\" }"),
                        b;

    (void)state;
    assert_int_equal(a.cls, OG_EXCHANGE_SUCCEEDED);
    assert_string_equal(a.result,
                        "{\"access_token\":\"at_1\",\"token_type\":\"Bearer\"}");
    assert_int_equal(a.result_len, strlen(a.result));
    b = classify(OG_TRANSPORT_OK, 200, a.result);
    assert_string_equal(b.result, a.result);
    og_exchange_outcome_clear(&a);
    og_exchange_outcome_clear(&b);
    og_exchange_outcome_clear(NULL);
    assert_string_equal(og_exchange_class_name((og_exchange_class)9), "?");
}

/* A body over OG_REDEMPTION_RESULT_MAX cannot be kept: not a success. */
static void token_response_over_the_result_cap_is_unknown(void **state)
{
    size_t pad = OG_REDEMPTION_RESULT_MAX;
    char *body = malloc(pad + 100);
    og_exchange_outcome o;

    (void)state;
    assert_non_null(body);
    snprintf(body, pad + 100, "{\"access_token\":\"a\",\"token_type\":\"b\","
                              "\"x\":\"%0*d\"}",
             (int)(pad - 40), 0);
    o = classify(OG_TRANSPORT_OK, 200, body);
    assert_int_equal(o.cls, OG_EXCHANGE_UNKNOWN);
    assert_string_equal(o.reason, "malformed_success");
    free(body);
}

/* ===========================================================================
 * Sealing (RD3)
 * ========================================================================= */
#define HASH_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HASH_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* True when needle occurs in the n bytes at hay. */
static bool contains(const unsigned char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);

    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            return true;
    return false;
}

static void sealed_result_opens_only_under_its_key_and_its_record(
    void **state)
{
    static const char plain[] = TOKEN_OK;
    unsigned char key[32], other[32], nonce[24];
    unsigned char sealed[sizeof plain - 1 + OG_REDEMPTION_TAG_LEN];
    unsigned char out[sizeof plain];
    size_t n = sizeof plain - 1;

    (void)state;
    assert_true(sodium_init() >= 0);
    randombytes_buf(key, sizeof key);
    randombytes_buf(other, sizeof other);
    randombytes_buf(nonce, sizeof nonce);
    assert_int_equal(og__redeem_seal(key, nonce, "agent-1", "k-1", HASH_A,
                                     (const unsigned char *)plain, n, sealed),
                     0);
    /* The ciphertext does not show the plaintext. */
    assert_false(contains(sealed, sizeof sealed, "at_1"));
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     0);
    assert_memory_equal(out, plain, n);
    /* Another key, caller, idempotency key, code hash or nonce: no. */
    assert_int_equal(og__redeem_open(other, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    assert_int_equal(og__redeem_open(key, nonce, "agent-2", "k-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-2", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_B,
                                     sealed, sizeof sealed, out),
                     -1);
    /* Field boundaries are part of the binding: "agent-1"+"k-1" is not
     * "agent-1k"+"-1". */
    assert_int_equal(og__redeem_open(key, nonce, "agent-1k", "-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    nonce[0] ^= 1;
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    nonce[0] ^= 1;
    /* A flipped bit or a cut tag: no. */
    sealed[3] ^= 0x40;
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, sizeof sealed, out),
                     -1);
    sealed[3] ^= 0x40;
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, sizeof sealed - 1, out),
                     -1);
    assert_int_equal(og__redeem_open(key, nonce, "agent-1", "k-1", HASH_A,
                                     sealed, OG_REDEMPTION_TAG_LEN, out),
                     -1);
    /* Nothing, or too much, is not sealed. */
    assert_int_equal(og__redeem_seal(key, nonce, "agent-1", "k-1", HASH_A,
                                     (const unsigned char *)plain, 0, sealed),
                     OG_EINVAL);
}

static void code_hash_is_sha256_hex_of_the_code(void **state)
{
    char h[OG_CODE_HASH_LEN + 1];

    (void)state;
    /* SHA-256("abc"), FIPS 180-2 appendix B.1. */
    og__redeem_code_hash("abc", h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223"
                           "b00361a396177a9cb410ff61f20015ad");
}

/* ===========================================================================
 * The catch-up loop's decisions (RD1, RD2)
 * ========================================================================= */
static void backoff_doubles_from_20_ms_to_500_ms(void **state)
{
    static const int64_t want[] = {20000,  40000,  80000, 160000,
                                   320000, 500000, 500000};

    (void)state;
    for (int i = 0; i < (int)(sizeof want / sizeof want[0]); i++)
        assert_int_equal(og__redeem_backoff_us(i), want[i]);
    assert_int_equal(og__redeem_backoff_us(1000), 500000);
}

static void only_a_spent_or_lost_exchange_catches_up(void **state)
{
    static const struct {
        og_exchange_class cls;
        const char *reason;
        int64_t want;
    } cases[] = {
        {OG_EXCHANGE_SUCCEEDED, "exchanged", -1},
        {OG_EXCHANGE_REJECTED, "invalid_client", -1},
        {OG_EXCHANGE_ALREADY_USED, "invalid_grant", 9000},
        {OG_EXCHANGE_UNKNOWN, "transport_timeout", 9000},
        {OG_EXCHANGE_UNKNOWN, "transport_no_response", 9000},
        {OG_EXCHANGE_UNKNOWN, "undocumented_status_500", 9000},
        {OG_EXCHANGE_UNKNOWN, "malformed_success", 9000},
        /* Not one byte reached the provider: one look, no wait. */
        {OG_EXCHANGE_UNKNOWN, "transport_connect_failed", 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_exchange_outcome x;

        memset(&x, 0, sizeof x);
        x.cls = cases[i].cls;
        snprintf(x.reason, sizeof x.reason, "%s", cases[i].reason);
        print_message("%s\n", cases[i].reason);
        assert_int_equal(og__redeem_catch_up_us(&x, 9000), cases[i].want);
    }
}

static void one_look_decides_or_waits(void **state)
{
    (void)state;
    assert_int_equal(og__redeem_after_look(OG_REDEMPTION_OWN, true),
                     OG_REDEEM_CAUGHT_UP);
    assert_int_equal(og__redeem_after_look(OG_REDEMPTION_OWN, false),
                     OG_REDEEM_KEY_REUSED);
    assert_int_equal(og__redeem_after_look(OG_REDEMPTION_CODE_ELSEWHERE, false),
                     OG_REDEEM_CODE_SPENT);
    assert_int_equal(og__redeem_after_look(OG_REDEMPTION_ABSENT, false), -1);
    /* At the bound: spent and nothing persisted is lost; an answer we never
     * understood is unknown, never lost. */
    assert_int_equal(og__redeem_at_bound(OG_EXCHANGE_ALREADY_USED),
                     OG_REDEEM_LOST);
    assert_int_equal(og__redeem_at_bound(OG_EXCHANGE_UNKNOWN),
                     OG_REDEEM_UNKNOWN);
}

static void outcome_names_are_the_stable_codes(void **state)
{
    (void)state;
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_REDEEMED), "redeemed");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_RECOVERED),
                        "recovered");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_CAUGHT_UP),
                        "caught_up");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_CODE_SPENT),
                        "code_spent");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_KEY_REUSED),
                        "idempotency_key_reused");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_LOST),
                        "redemption_lost");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_UNKNOWN),
                        "redemption_unknown");
    assert_string_equal(og_redeem_outcome_name(OG_REDEEM_REJECTED),
                        "provider_rejected");
    assert_string_equal(og_redeem_outcome_name((og_redeem_outcome)99), "?");
}

/* ===========================================================================
 * The key file
 * ========================================================================= */
static char g_dir[] = "/tmp/og-test-redeem-XXXXXX";

static int key_file(const char *name, const char *text, mode_t mode,
                    char *path, size_t n)
{
    int fd;

    snprintf(path, n, "%s/%s", g_dir, name);
    unlink(path);
    fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    close(fd);
    return chmod(path, mode);
}

static void key_files_hold_32_bytes_readable_by_their_owner_only(void **state)
{
    static const struct {
        const char *name, *text;
        mode_t mode;
        int want;
    } cases[] = {
        {"hex", "000102030405060708090a0b0c0d0e0f"
                "101112131415161718191a1b1c1d1e1f\n",
         0600, 0},
        {"HEX", "000102030405060708090A0B0C0D0E0F"
                "101112131415161718191A1B1C1D1E1F",
         0400, 0},
        {"base64", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", 0600, 0},
        {"base64 unpadded", "  AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8 ",
         0600, 0},
        {"base64url", "-_8AAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0", 0600, 0},
        {"group readable", "000102030405060708090a0b0c0d0e0f"
                           "101112131415161718191a1b1c1d1e1f",
         0640, OG_EKEY_MODE},
        {"world readable", "000102030405060708090a0b0c0d0e0f"
                           "101112131415161718191a1b1c1d1e1f",
         0604, OG_EKEY_MODE},
        {"31 bytes", "000102030405060708090a0b0c0d0e0f"
                     "101112131415161718191a1b1c1d1e",
         0600, OG_EREDEMPTION_KEY},
        {"33 bytes", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", 0600,
         OG_EREDEMPTION_KEY},
        {"not a key", "correct horse battery staple", 0600, OG_EREDEMPTION_KEY},
        {"empty", "", 0600, OG_EREDEMPTION_KEY},
    };
    char path[256];
    og_redeem_key *k = NULL;

    (void)state;
    assert_non_null(mkdtemp(g_dir));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        print_message("%s\n", cases[i].name);
        assert_int_equal(key_file("key", cases[i].text, cases[i].mode, path,
                                  sizeof path),
                         0);
        assert_int_equal(og_redeem_key_load_file(path, &k), cases[i].want);
        og_redeem_key_free(k);
        k = NULL;
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/missing", g_dir);
    assert_int_equal(og_redeem_key_load_file(path, &k), OG_EKEY_IO);
    /* A directory is not a key file. */
    assert_int_equal(og_redeem_key_load_file(g_dir, &k), OG_EREDEMPTION_KEY);
    assert_null(k);
    og_redeem_key_free(NULL);
    rmdir(g_dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exchange_answers_map_to_their_classes),
        cmocka_unit_test(token_response_is_kept_as_compact_json),
        cmocka_unit_test(token_response_over_the_result_cap_is_unknown),
        cmocka_unit_test(sealed_result_opens_only_under_its_key_and_its_record),
        cmocka_unit_test(code_hash_is_sha256_hex_of_the_code),
        cmocka_unit_test(backoff_doubles_from_20_ms_to_500_ms),
        cmocka_unit_test(only_a_spent_or_lost_exchange_catches_up),
        cmocka_unit_test(one_look_decides_or_waits),
        cmocka_unit_test(outcome_names_are_the_stable_codes),
        cmocka_unit_test(key_files_hold_32_bytes_readable_by_their_owner_only),
    };
    return t_run_tests("redeem", tests, NULL, NULL);
}
