/*
 * exchange.c — the token exchange (RFC 6749 4.1.3) against the sandbox's
 * /oauth/token: a code is exchanged once and then already used, a lost or
 * late exchange is UNKNOWN and the code spent, codes are form-encoded and
 * bad ones send nothing.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * The token exchange (RFC 6749 4.1.3) against the sandbox's /oauth/token
 * ========================================================================= */

/* POST /_control/codes: a fresh code into out. */
static void mint_code(const sbx *s, char out[64])
{
    char url[256];
    json_t *j;
    raw r;

    snprintf(url, sizeof url, "%s/_control/codes", s->url);
    r = http("POST", url, NULL, NULL, 10000);
    assert_int_equal(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    assert_non_null(json_string_value(json_object_get(j, "code")));
    snprintf(out, 64, "%s", json_string_value(json_object_get(j, "code")));
    json_decref(j);
    free(r.body);
}

/* A client for the fixture's sandbox as a token endpoint. */
static og_provider *exchanger(const fx *f)
{
    og_provider *p = NULL;

    assert_int_equal(og_provider_open_exchange(f->s.url, NULL, &p), 0);
    return p;
}

static void assert_exchange(const og_exchange_outcome *o, og_exchange_class c,
                            const char *reason)
{
    if (o->cls != c || strcmp(o->reason, reason) != 0)
        fail_msg("exchange %s %s, expected %s %s",
                 og_exchange_class_name(o->cls), o->reason,
                 og_exchange_class_name(c), reason);
}

void a_code_is_exchanged_once_and_then_already_used(void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_exchange_outcome a, b;
    json_t *t;
    char code[64];

    mint_code(&f->s, code);
    assert_int_equal(og_provider_exchange_code(p, code, CALL_US, &a), 0);
    assert_exchange(&a, OG_EXCHANGE_SUCCEEDED, "exchanged");
    t = json_loads(a.result, 0, NULL);
    assert_non_null(json_string_value(json_object_get(t, "access_token")));
    assert_string_equal(json_string_value(json_object_get(t, "token_type")),
                        "Bearer");
    json_decref(t);
    assert_int_equal(og_provider_exchange_code(p, code, CALL_US, &b), 0);
    assert_exchange(&b, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_null(b.result);
    assert_int_equal(stat_of(&f->s, "code_exchanges"), 1);
    assert_int_equal(stat_of(&f->s, "token_requests"), 2);
    og_exchange_outcome_clear(&a);
    og_exchange_outcome_clear(&b);
    og_provider_free(p);
}

/* The answer is lost, or comes after the call gave up: UNKNOWN, and the
 * code is spent all the same — nothing can fetch its result again. */
void a_lost_or_late_exchange_is_unknown_and_the_code_is_spent(
    void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_exchange_outcome o;
    char c1[64], c2[64];

    mint_code(&f->s, c1);
    mint_code(&f->s, c2);
    arm(&f->s, "drop_response_after_effect", -1);
    assert_int_equal(og_provider_exchange_code(p, c1, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_UNKNOWN, "transport_no_response");
    arm(&f->s, "delay_after_effect", 1500);
    assert_int_equal(og_provider_exchange_code(p, c2, 300000, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_UNKNOWN, "transport_timeout");
    assert_int_equal(stat_of(&f->s, "code_exchanges"), 2);
    assert_int_equal(og_provider_exchange_code(p, c1, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    og_provider_free(p);
}

/* A code is %-encoded: '&', '=', '+' and '%' cannot add or change a
 * parameter (the sandbox would answer invalid_request); bad codes, bad
 * timeouts and credit calls on an exchange-only client send nothing. */
void codes_are_form_encoded_and_bad_ones_send_nothing(void **state)
{
    fx *f = *state;
    og_provider *p = exchanger(f);
    og_provider_outcome po;
    og_exchange_outcome o;
    char long_code[OG_PROVIDER_CODE_MAX + 2];

    assert_int_equal(og_provider_exchange_code(p, "ac_x&code=ac_y+%41=",
                                               CALL_US, &o),
                     0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_int_equal(stat_of(&f->s, "token_requests"), 1);
    memset(long_code, 'c', sizeof long_code - 1);
    long_code[sizeof long_code - 1] = '\0';
    assert_int_equal(og_provider_exchange_code(p, NULL, CALL_US, &o), OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "", CALL_US, &o), OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "a\r\nb", CALL_US, &o),
                     OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, "\xc3\xa9", CALL_US, &o),
                     OG_ECODE);
    assert_int_equal(og_provider_exchange_code(p, long_code, CALL_US, &o),
                     OG_ECODE);
    long_code[OG_PROVIDER_CODE_MAX] = '\0'; /* exactly the limit: sent */
    assert_int_equal(og_provider_exchange_code(p, long_code, CALL_US, &o), 0);
    assert_exchange(&o, OG_EXCHANGE_ALREADY_USED, "invalid_grant");
    assert_int_equal(og_provider_exchange_code(p, "c", 0, &o), OG_EINVAL);
    assert_int_equal(og_provider_exchange_code(NULL, "c", CALL_US, &o),
                     OG_EINVAL);
    assert_int_equal(og_provider_create_credit(p, "k", "a", "1", "EUR", "r",
                                               wall_us() + 3600000000, CALL_US,
                                               &po),
                     OG_EINVAL);
    assert_int_equal(og_provider_lookup(p, "r", CALL_US, &po), OG_EINVAL);
    assert_int_equal(stat_of(&f->s, "token_requests"), 2);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
    og_provider_free(p);
}
