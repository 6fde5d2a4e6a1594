/*
 * arguments.c — bad arguments are refused before anything is sent, the
 * API key is sent as a bearer token (a wrong or missing one is TRANSIENT
 * unauthorized), and threads share one client.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Arguments, secrets, threads
 * ========================================================================= */
void bad_arguments_send_nothing(void **state)
{
    fx *f = *state;
    const int64_t exp = wall_us() + INT64_C(3600000000);
    char long_key[300];
    og_provider_outcome o;
    og_provider *p = NULL;

    memset(long_key, 'k', 256);
    long_key[256] = '\0';
#define CREATE(key, acct, amt, cur, ref, ex, to)                               \
    og_provider_create_credit(f->p, key, acct, amt, cur, ref, ex, to, &o)
    assert_int_equal(CREATE(NULL, "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("", "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k y", "a", "1", "EUR", "r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k\r\nX-Evil: 1", "a", "1", "EUR", "r", exp, CALL_US),
                     OG_EINVAL);
    assert_int_equal(CREATE(long_key, "a", "1", "EUR", "r", exp, CALL_US),
                     OG_EINVAL);
    assert_int_equal(CREATE("k", "a b", "1", "EUR", "r", exp, CALL_US),
                     OG_EACCOUNT);
    assert_int_equal(CREATE("k", NULL, "1", "EUR", "r", exp, CALL_US),
                     OG_EACCOUNT);
    assert_int_equal(CREATE("k", "a", "-1", "EUR", "r", exp, CALL_US), OG_EAMOUNT);
    assert_int_equal(CREATE("k", "a", "1e3", "EUR", "r", exp, CALL_US), OG_EAMOUNT);
    assert_int_equal(CREATE("k", "a", "1", "eur", "r", exp, CALL_US),
                     OG_ECURRENCY);
    assert_int_equal(CREATE("k", "a", "1", "EU", "r", exp, CALL_US), OG_ECURRENCY);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r r", exp, CALL_US), OG_EINVAL);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", -1, CALL_US),
                     OG_EEXPIRES_AT);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", exp, 0), OG_EINVAL);
    assert_int_equal(CREATE("k", "a", "1", "EUR", "r", exp, -5), OG_EINVAL);
#undef CREATE
    assert_int_equal(og_provider_lookup(f->p, "a b", CALL_US, &o), OG_EINVAL);
    assert_int_equal(og_provider_lookup(f->p, "r", 0, &o), OG_EINVAL);
    assert_int_equal(og_provider_lookup(NULL, "r", CALL_US, &o), OG_EINVAL);
    assert_int_equal(stat_of(&f->s, "create_requests"), 0);
    assert_int_equal(stat_of(&f->s, "lookups"), 0);

    assert_int_equal(og_provider_open("ftp://127.0.0.1", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://h/x?y=1", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://a b", NULL, g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open("http://", NULL, g_table, &p), OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, "key\r\nX-Evil: 1", g_table, &p),
                     OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, "", g_table, &p), OG_EINVAL);
    assert_int_equal(og_provider_open(f->s.url, NULL, NULL, &p), OG_EINVAL);
    assert_null(p);
    og_provider_free(NULL); /* a no-op */
}

void the_api_key_is_a_bearer_token(void **state)
{
    static const char *const extra[] = {"--api-key-file", NULL, NULL};
    char keyfile[PATH_MAX + 8];
    const char *args[3];
    og_provider *with = NULL, *without = NULL, *wrong = NULL;
    og_provider_outcome o;
    sbx s;
    FILE *kf;

    memset(&s, 0, sizeof s);
    snprintf(s.dir, sizeof s.dir, "/tmp/og-provider-XXXXXX");
    assert_non_null(mkdtemp(s.dir));
    snprintf(keyfile, sizeof keyfile, "%s/key", s.dir);
    kf = fopen(keyfile, "w");
    assert_non_null(kf);
    fputs(API_KEY "\n", kf);
    fclose(kf);
    args[0] = extra[0];
    args[1] = keyfile;
    args[2] = NULL;
    assert_int_equal(sbx_start(&s, args), 0);

    assert_int_equal(og_provider_open(s.url, NULL, g_table, &without), 0);
    assert_int_equal(og_provider_open(s.url, "not-the-key", g_table, &wrong), 0);
    assert_int_equal(og_provider_open(s.url, API_KEY, g_table, &with), 0);
    assert_int_equal(create(without, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "unauthorized");
    assert_int_equal(create(wrong, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_TRANSIENT, "unauthorized");
    assert_null(strstr(o.reason, "not-the-key"));
    assert_int_equal(create(with, "op-key", "acct-1", CALL_US, &o), 0);
    assert_outcome(&o, OG_CLASS_SUCCEEDED, "created");
    assert_int_equal(og_provider_lookup(with, "op-key", CALL_US, &o), 1);
    assert_int_equal(og_provider_lookup(without, "op-key", CALL_US, &o),
                     OG_EPROVIDER_UNAVAILABLE);
    og_provider_free(with);
    og_provider_free(without);
    og_provider_free(wrong);
    sbx_free(&s);
}

typedef struct racer {
    og_provider *p;
    const char *key;
    pthread_barrier_t *go;
    og_provider_outcome o;
    int rc;
} racer;

static void *race(void *arg)
{
    racer *r = arg;

    pthread_barrier_wait(r->go);
    r->rc = create(r->p, r->key, "acct-1", CALL_US, &r->o);
    return NULL;
}

void threads_share_one_client(void **state)
{
    enum { N = 8 };
    static const char *const keys[N] = {"op-t0", "op-t1", "op-t2", "op-t3",
                                        "op-t4", "op-t5", "op-t6", "op-t7"};
    fx *f = *state;
    pthread_barrier_t go;
    pthread_t th[N];
    racer r[N];

    /* Eight different keys at once: eight credits. */
    pthread_barrier_init(&go, NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.p = f->p, .key = keys[i], .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].rc, 0);
        assert_outcome(&r[i].o, OG_CLASS_SUCCEEDED, "created");
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(stat_of(&f->s, "credits_created"), N);

    /* One key eight times at once: one credit, one reference everywhere
     * (the sandbox handles concurrent same-key requests atomically). */
    pthread_barrier_init(&go, NULL, N);
    for (int i = 0; i < N; i++) {
        r[i] = (racer){.p = f->p, .key = "op-same", .go = &go};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].rc, 0);
        assert_outcome(&r[i].o, OG_CLASS_SUCCEEDED, "created");
        assert_string_equal(r[i].o.reference, r[0].o.reference);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(stat_of(&f->s, "credits_created"), N + 1);
}
