/*
 * time.c — time in the sandbox (docs/sandbox.md): a request decided after
 * expires_at + skew is refused and records nothing, a key older than the
 * retention is forgotten, the visibility delay hides a new record from
 * lookups, lookups list oldest first and refuse bad parameters.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Time: expiry, retention, visibility
 * ========================================================================= */
/* A request of ap decided after expires_at + skew is 422 request_expired
 * (its message naming noun) and records nothing; a retained key still
 * answers its saved result after expires_at. */
static void expired_request_records_nothing(const api *ap,
                                            const char *target,
                                            const char *noun)
{
    sbx *s = sbx_new("--control", "--skew-seconds", "2", END);
    char late[40], within[40];
    hres a, b, c;

    sbx_start(s);
    rfc3339_in(-60, late);
    rfc3339_ms(-500, within); /* past, but 1.5 s inside the skew */
    create_at(s, ap, "key-exp", target, "3", "ref-exp", late, &a);
    assert_error(&a, 422, "request_expired");
    assert_non_null(strstr(jstr(a.json, "message"), noun));
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-exp"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-exp"), 0);
    create_at(s, ap, "key-exp", target, "3", "ref-exp", within, &b);
    assert_effect(ap, &b, target, "ref-exp"); /* the key was not recorded */
    hres_free(&a);
    t_sleep_ms(2000); /* now past expires_at + skew */
    create_at(s, ap, "key-exp-2", target, "3", "ref-exp-2", within, &a);
    assert_error(&a, 422, "request_expired");
    /* A retained key still answers its saved result. */
    create_at(s, ap, "key-exp", target, "3", "ref-exp", within, &c);
    assert_str(c.body, b.body);
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(request_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing,
      expired_request_records_nothing(&CREDITS, "A-1", "no credit"))
CLAIM(payout_after_expires_at_plus_skew_is_422_request_expired_and_records_nothing,
      expired_request_records_nothing(&PAYOUTS, "dst_tok_exp", "no payout"))

/* A key is forgotten --retention-seconds after its first use: the same
 * request then creates a second record, and both carry the key. */
static void forgotten_key_creates_again(const api *ap, const char *target)
{
    sbx *s = sbx_new("--control", "--retention-seconds", "1", END);
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &a);
    assert_effect(ap, &a, target, "ref-ret");
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &b);
    assert_str(b.body, a.body); /* retained */
    t_sleep_ms(2000);
    create_at(s, ap, "key-ret", target, "8", "ref-ret", NULL, &c);
    assert_effect(ap, &c, target, "ref-ret");
    assert_string_not_equal(jstr(c.json, "id"), jstr(a.json, "id"));
    assert_int_equal(counter(s, ap->c_rows), 2);
    /* Both records carry the key: the duplicate is visible. */
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-ret"), 2);
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-ret"), 2);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(key_older_than_retention_is_forgotten_and_the_same_key_creates_again,
      forgotten_key_creates_again(&CREDITS, "A-1"))

CLAIM(payout_key_older_than_retention_is_forgotten_and_the_same_key_creates_a_second_payout,
      forgotten_key_creates_again(&PAYOUTS, "dst_tok_ret"))

/* A new record is hidden from lookups for --visibility-delay-ms, and
 * listed from then on; a replay by key sees it at once. */
static void hidden_until_the_visibility_delay(const api *ap,
                                              const char *target)
{
    sbx *s = sbx_new("--control", "--visibility-delay-ms", "1500", END);
    hres a, b;
    int64_t t0;

    sbx_start(s);
    t0 = t_now_ms();
    create_at(s, ap, "key-vis", target, "4", "ref-vis", NULL, &a);
    assert_effect(ap, &a, target, "ref-vis");
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-vis"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-vis"), 0);
    /* A replay by key is not a lookup: it sees its own record at once. */
    create_at(s, ap, "key-vis", target, "4", "ref-vis", NULL, &b);
    assert_str(b.body, a.body);
    assert_true(t_now_ms() - t0 < 1400);
    assert_int_equal(counter(s, ap->c_rows), 1);
    if (t_now_ms() - t0 < 1700)
        t_sleep_ms((int)(1700 - (t_now_ms() - t0)));
    assert_int_equal(lookup_at_n(s, ap, "reference", "ref-vis"), 1);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-vis"), 1);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(visibility_delay_hides_a_new_credit_from_lookups_until_it_passes,
      hidden_until_the_visibility_delay(&CREDITS, "A-1"))

/* The processing window, second half: an accepted payout is hidden from
 * lookups for the visibility delay, and listed from then on. */
CLAIM(accepted_payout_is_invisible_to_lookups_before_the_visibility_delay_and_visible_after,
      hidden_until_the_visibility_delay(&PAYOUTS, "dst_tok_vis"))

/* Lookups by reference and by key list ap's records, oldest first, as
 * the creates answered them; targets t1..t3 distinct. */
static void lookups_list_oldest_first(const api *ap, const char *t1,
                                      const char *t2, const char *t3)
{
    /* A key that needs URL encoding: '+' '&' '=' '%' '/' '?'. */
    static const char odd_key[] = "k+1&x=y%2F/?z";
    sbx *s = sbx_new("--control", END);
    json_t *found;
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-l1", t1, "1", "shared ref", NULL, &a);
    create_at(s, ap, odd_key, t2, "2", "shared ref", NULL, &b);
    create_at(s, ap, "key-l3", t3, "3", "other", NULL, &c);
    assert_int_equal(a.status, 201);
    assert_int_equal(b.status, 201);
    assert_int_equal(c.status, 201);
    found = lookup_at(s, ap, "reference", "shared ref");
    assert_int_equal(json_array_size(found), 2);
    assert_true(json_equal(json_array_get(found, 0), a.json));
    assert_true(json_equal(json_array_get(found, 1), b.json));
    json_decref(found);
    found = lookup_at(s, ap, "idempotency_key", odd_key);
    assert_int_equal(json_array_size(found), 1);
    assert_true(json_equal(json_array_get(found, 0), b.json));
    json_decref(found);
    assert_int_equal(lookup_at_n(s, ap, "reference", "nothing here"), 0);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "never-used"), 0);
    assert_int_equal(counter(s, ap->c_lookups), 4);
    assert_int_equal(counter(s, other_api(ap)->c_lookups), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(lookups_by_reference_and_by_key_find_credits_oldest_first,
      lookups_list_oldest_first(&CREDITS, "A-1", "A-2", "A-3"))

CLAIM(payout_lookups_by_reference_and_by_key_find_payouts_oldest_first,
      lookups_list_oldest_first(&PAYOUTS, "dst_tok_l1", "dst_tok_l2", "dst_tok_l3"))

/* A lookup of ap without exactly one valid parameter is 400
 * invalid_request naming it (unknown: the target member), uncounted. */
static void bad_lookups_are_400(const api *ap)
{
    const struct {
        const char *query, *field;
    } bad[] = {
        {"", "query"},
        {"?reference=a&idempotency_key=b", "query"},
        {ap == &CREDITS ? "?account=A-1" : "?destination=dst_tok_q",
         ap->target},
        {"?reference=", "reference"},
        {"?reference=a&reference=b", "reference"},
        {"?idempotency_key=", "idempotency_key"},
        {"?idempotency_key=a%20b", "idempotency_key"},
        {"?reference=a%00b", "reference"},
        {"?reference=a%0Ab", "reference"},
    };
    sbx *s = sbx_new("--control", END);
    char path[256];
    hres r;

    sbx_start(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s%s", ap->path, bad[i].query);
        get(s, path, &r);
        assert_error(&r, 400, "invalid_request");
        if (strcmp(jstr(r.json, "field"), bad[i].field) != 0)
            fail_msg("%s: field %s, expected %s", bad[i].query,
                     jstr(r.json, "field"), bad[i].field);
        hres_free(&r);
    }
    assert_int_equal(counter(s, ap->c_lookups), 0);
}

CLAIM(lookup_without_exactly_one_valid_parameter_is_400_invalid_request,
      bad_lookups_are_400(&CREDITS))
CLAIM(payout_lookup_without_exactly_one_valid_parameter_is_400_invalid_request,
      bad_lookups_are_400(&PAYOUTS))
