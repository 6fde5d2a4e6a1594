/*
 * redemption.c — redemption recovery points (schema 6) against the real
 * engine: og_redemption_put / og_redemption_get, the store half of
 * redeeming an external single-use token (docs/design.md, "Redeeming an
 * external single-use token"). The claims:
 *   - the first writer of (caller, idempotency key) wins, and nothing ever
 *     overwrites its point — also when writers race from separate store
 *     objects;
 *   - keys are scoped to their caller: another caller's key reads as
 *     absent and never yields its point;
 *   - one read answers "the key's own point" and "the same token under
 *     another key", the own point first, and the other key's point is
 *     reported without any of its content;
 *   - sealed bytes round-trip exactly, up to OG_REDEMPTION_SEALED_MAX;
 *   - bad input is refused before the store and writes nothing;
 *   - all of it alike on readable and hashed stores (meson's
 *     redemption-*-hashed tests).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The suite's store outlives one run on PostgreSQL: every test uses
 * fresh keys, callers and token hashes. */

/* A fresh key: a UUID, which follows the identifier rule. */
static void r_key(char out[OG_UUID_LEN + 1])
{
    t_uuid(out);
}

/* A fresh token hash: 64 lower-case hex digits. */
static void r_hash(char out[OG_CODE_HASH_LEN + 1])
{
    char a[OG_UUID_LEN + 1], b[OG_UUID_LEN + 1];
    size_t n = 0;

    t_uuid(a);
    t_uuid(b);
    for (const char *p = a; *p && n < 32; p++)
        if (*p != '-')
            out[n++] = *p;
    for (const char *p = b; *p && n < 64; p++)
        if (*p != '-')
            out[n++] = *p;
    out[n] = '\0';
}

/* A point whose nonce and sealed bytes are all `fill`. sealed_len bytes are
 * malloc'd into *buf (the caller frees). */
static og_redemption_record r_record(const char *caller, const char *key,
                                     const char *hash, unsigned char fill,
                                     size_t sealed_len, unsigned char **buf,
                                     unsigned char nonce[OG_REDEMPTION_NONCE_LEN])
{
    *buf = malloc(sealed_len);
    assert_non_null(*buf);
    memset(*buf, fill, sealed_len);
    memset(nonce, fill, OG_REDEMPTION_NONCE_LEN);
    return (og_redemption_record){caller, key, hash, nonce, *buf, sealed_len};
}

static bool r_put(og_store *s, const og_redemption_record *rec)
{
    bool inserted = false;

    assert_int_equal(og_redemption_put(s, rec, &inserted), 0);
    return inserted;
}

static og_redemption_found r_get(og_store *s, const char *caller,
                                 const char *key, const char *hash,
                                 og_redemption_point *p)
{
    og_redemption_found f = (og_redemption_found)-1;

    memset(p, 0, sizeof *p);
    assert_int_equal(og_redemption_get(s, caller, key, hash, &f, p), 0);
    return f;
}

static void first_writer_of_a_key_wins_and_a_point_is_never_overwritten(
    void **state)
{
    og_store *s = t_store(4, 0);
    unsigned char *a_buf, *b_buf, a_nonce[24], b_nonce[24];
    char key[OG_UUID_LEN + 1];
    og_redemption_record a, b;
    og_redemption_point p;
    int64_t before = t_now_us();
    char ha[65], hb[65];

    (void)state;
    /* The suite runs on readable and on hashed stores (argv[4]): recovery
     * points are keyed by (caller, idempotency key) in both. */
    assert_int_equal(og_store_consumption_keys(s), t_keys);
    r_key(key);
    r_hash(ha);
    r_hash(hb);
    a = r_record("agent-1", key, ha, 0xa1, 300, &a_buf, a_nonce);
    b = r_record("agent-1", key, hb, 0xb2, 400, &b_buf, b_nonce);
    assert_true(r_put(s, &a));
    assert_false(r_put(s, &b));  /* another token, same key: nothing */
    assert_false(r_put(s, &a));  /* the same point again: nothing either */
    assert_int_equal(r_get(s, "agent-1", key, NULL, &p), OG_REDEMPTION_OWN);
    assert_string_equal(p.code_hash, ha);
    assert_memory_equal(p.nonce, a_nonce, sizeof a_nonce);
    assert_int_equal(p.sealed_len, 300);
    assert_memory_equal(p.sealed, a_buf, 300);
    /* Store clock, millisecond resolution on SQLite; hosts share a clock. */
    assert_true(p.created_at_us >= before - 1000000 &&
                p.created_at_us <= t_now_us() + 1000000);
    og_redemption_point_clear(&p);
    assert_null(p.sealed);
    og_redemption_point_clear(NULL);
    free(a_buf);
    free(b_buf);
    og_store_free(s);
}

static void keys_are_scoped_to_their_caller(void **state)
{
    og_store *s = t_store(4, 0);
    unsigned char *a_buf, *b_buf, a_nonce[24], b_nonce[24];
    char key[OG_UUID_LEN + 1];
    og_redemption_record a, b;
    og_redemption_point p;
    char ha[65], hb[65];

    (void)state;
    r_key(key);
    r_hash(ha);
    r_hash(hb);
    a = r_record("agent-1", key, ha, 0x11, 64, &a_buf, a_nonce);
    b = r_record("agent-2", key, hb, 0x22, 64, &b_buf, b_nonce);
    assert_true(r_put(s, &a));
    /* agent-2's key of the same name is another key: absent, and its own
     * to write. */
    assert_int_equal(r_get(s, "agent-2", key, NULL, &p), OG_REDEMPTION_ABSENT);
    assert_null(p.sealed);
    assert_true(r_put(s, &b));
    assert_int_equal(r_get(s, "agent-2", key, NULL, &p), OG_REDEMPTION_OWN);
    assert_string_equal(p.code_hash, hb);
    assert_memory_equal(p.sealed, b_buf, 64);
    og_redemption_point_clear(&p);
    assert_int_equal(r_get(s, "agent-1", key, NULL, &p), OG_REDEMPTION_OWN);
    assert_memory_equal(p.sealed, a_buf, 64);
    og_redemption_point_clear(&p);
    free(a_buf);
    free(b_buf);
    og_store_free(s);
}

static void the_same_token_under_another_key_is_reported_without_its_point(
    void **state)
{
    og_store *s = t_store(4, 0);
    unsigned char *a_buf, a_nonce[24];
    char k1[OG_UUID_LEN + 1], k2[OG_UUID_LEN + 1];
    og_redemption_record a;
    og_redemption_point p;
    char ha[65], hb[65];

    (void)state;
    r_key(k1);
    r_key(k2);
    r_hash(ha);
    r_hash(hb);
    a = r_record("agent-1", k1, ha, 0x5a, 80, &a_buf, a_nonce);
    assert_true(r_put(s, &a));
    /* Another key of the same caller, and a key of another caller. */
    assert_int_equal(r_get(s, "agent-1", k2, ha, &p),
                     OG_REDEMPTION_CODE_ELSEWHERE);
    assert_null(p.sealed);
    assert_int_equal(r_get(s, "agent-2", k2, ha, &p),
                     OG_REDEMPTION_CODE_ELSEWHERE);
    assert_null(p.sealed);
    /* Another token: nothing; the key alone: nothing. */
    assert_int_equal(r_get(s, "agent-1", k2, hb, &p), OG_REDEMPTION_ABSENT);
    assert_int_equal(r_get(s, "agent-1", k2, NULL, &p), OG_REDEMPTION_ABSENT);
    /* The key's own point comes first, whatever the hash asked about. */
    assert_int_equal(r_get(s, "agent-1", k1, ha, &p), OG_REDEMPTION_OWN);
    og_redemption_point_clear(&p);
    assert_int_equal(r_get(s, "agent-1", k1, hb, &p), OG_REDEMPTION_OWN);
    assert_string_equal(p.code_hash, ha);
    og_redemption_point_clear(&p);
    free(a_buf);
    og_store_free(s);
}

static void largest_sealed_result_round_trips_exactly(void **state)
{
    og_store *s = t_store(2, 0);
    unsigned char nonce[24], *buf = malloc(OG_REDEMPTION_SEALED_MAX);
    char key[OG_UUID_LEN + 1];
    og_redemption_record rec;
    og_redemption_point p;
    char ha[65];

    (void)state;
    assert_non_null(buf);
    r_key(key);
    r_hash(ha);
    for (size_t i = 0; i < OG_REDEMPTION_SEALED_MAX; i++)
        buf[i] = (unsigned char)(i * 7 + (i >> 8)); /* zeros included */
    for (size_t i = 0; i < sizeof nonce; i++)
        nonce[i] = (unsigned char)i;
    rec = (og_redemption_record){"agent-1", key, ha, nonce, buf,
                                 OG_REDEMPTION_SEALED_MAX};
    assert_true(r_put(s, &rec));
    assert_int_equal(r_get(s, "agent-1", key, NULL, &p), OG_REDEMPTION_OWN);
    assert_int_equal(p.sealed_len, OG_REDEMPTION_SEALED_MAX);
    assert_memory_equal(p.sealed, buf, OG_REDEMPTION_SEALED_MAX);
    assert_memory_equal(p.nonce, nonce, sizeof nonce);
    og_redemption_point_clear(&p);
    free(buf);
    og_store_free(s);
}

#define WRITERS 8
typedef struct writer {
    pthread_barrier_t *start;
    const char *key;
    const char *hash;
    unsigned char fill;
    int rc;
    bool inserted;
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    og_store *s = t_store(1, 0); /* its own connections */
    unsigned char nonce[24], *buf;
    og_redemption_record rec =
        r_record("agent-1", w->key, w->hash, w->fill, 100, &buf, nonce);

    pthread_barrier_wait(w->start);
    w->rc = og_redemption_put(s, &rec, &w->inserted);
    free(buf);
    og_store_free(s);
    return NULL;
}

static void concurrent_writers_of_one_key_insert_once(void **state)
{
    og_store *s = t_store(2, 0);
    char key[OG_UUID_LEN + 1];
    pthread_barrier_t start;
    pthread_t th[WRITERS];
    writer w[WRITERS];
    og_redemption_point p;
    int inserted = 0, winner = -1;
    char hash[65];

    (void)state;
    r_key(key);
    r_hash(hash);
    pthread_barrier_init(&start, NULL, WRITERS);
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){&start, key, hash, (unsigned char)(0x40 + i), -1,
                        false};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].rc, 0);
        if (w[i].inserted) {
            inserted++;
            winner = i;
        }
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(inserted, 1);
    /* The point is the winner's, byte for byte. */
    assert_int_equal(r_get(s, "agent-1", key, NULL, &p), OG_REDEMPTION_OWN);
    assert_int_equal(p.sealed[0], w[winner].fill);
    assert_int_equal(p.sealed[99], w[winner].fill);
    og_redemption_point_clear(&p);
    og_store_free(s);
}

#define HASH_A "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a"

static void bad_input_is_refused_before_the_store_and_writes_nothing(
    void **state)
{
    og_store *s = t_store(2, 0);
    unsigned char nonce[24] = {0}, sealed[64] = {0};
    char caller[OG_UUID_LEN + 1], long_id[OG_ID_MAX + 2];
    og_redemption_found f = OG_REDEMPTION_ABSENT;
    og_redemption_point p;
    bool ins = false;
    static const struct {
        const char *caller, *key, *hash;
        int nonce, len, want;
    } cases[] = {
        {"", "k", HASH_A, 1, 64, OG_ECALLER},
        {"agent 1", "k", HASH_A, 1, 64, OG_ECALLER},
        {"agent-1", "", HASH_A, 1, 64, OG_EIDEMPOTENCY_KEY},
        {"agent-1", "a key", HASH_A, 1, 64, OG_EIDEMPOTENCY_KEY},
        {"agent-1", "LONG", HASH_A, 1, 64, OG_EIDEMPOTENCY_KEY},
        {"agent-1", "k", NULL, 1, 64, OG_ECODE_HASH},
        {"agent-1", "k", "0A0A", 1, 64, OG_ECODE_HASH},
        {"agent-1", "k", HASH_A "0", 1, 64, OG_ECODE_HASH},
        {"agent-1", "k",
         "0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A", 1,
         64, OG_ECODE_HASH},
        {"agent-1", "k", HASH_A, 0, 64, OG_ESEALED},
        {"agent-1", "k", HASH_A, 1, 16, OG_ESEALED},
        {"agent-1", "k", HASH_A, 1, -1, OG_ESEALED},
    };

    (void)state;
    memset(long_id, 'x', OG_ID_MAX + 1);
    long_id[OG_ID_MAX + 1] = '\0';
    r_key(caller); /* "agent-1" below stands for it */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_redemption_record rec = {
            strcmp(cases[i].caller, "agent-1") == 0 ? caller
                                                   : cases[i].caller,
            strcmp(cases[i].key, "LONG") == 0 ? long_id : cases[i].key,
            cases[i].hash, cases[i].nonce ? nonce : NULL, sealed,
            cases[i].len < 0 ? OG_REDEMPTION_SEALED_MAX + 1
                             : (size_t)cases[i].len};

        print_message("case %zu\n", i);
        assert_int_equal(og_redemption_put(s, &rec, &ins), cases[i].want);
    }
    assert_int_equal(og_redemption_put(s, NULL, &ins), OG_EINVAL);
    /* Reads check the same rules. */
    assert_int_equal(og_redemption_get(s, "agent 1", "k", NULL, &f, &p),
                     OG_ECALLER);
    assert_int_equal(og_redemption_get(s, "agent-1", long_id, NULL, &f, &p),
                     OG_EIDEMPOTENCY_KEY);
    assert_int_equal(og_redemption_get(s, "agent-1", "k", "zz", &f, &p),
                     OG_ECODE_HASH);
    assert_int_equal(og_redemption_get(s, "agent-1", "k", NULL, NULL, &p),
                     OG_EINVAL);
    /* Nothing was written: "k" is still free, and the key limit holds. */
    assert_int_equal(r_get(s, caller, "k", NULL, &p), OG_REDEMPTION_ABSENT);
    long_id[OG_ID_MAX] = '\0'; /* exactly 128: allowed */
    {
        og_redemption_record rec = {caller, long_id, HASH_A, nonce, sealed,
                                    sizeof sealed};
        assert_true(r_put(s, &rec));
        assert_int_equal(r_get(s, caller, long_id, NULL, &p),
                         OG_REDEMPTION_OWN);
        og_redemption_point_clear(&p);
    }
    og_store_free(s);
}

const struct CMUnitTest t_redemption_tests[] = {
    cmocka_unit_test(
        first_writer_of_a_key_wins_and_a_point_is_never_overwritten),
    cmocka_unit_test(keys_are_scoped_to_their_caller),
    cmocka_unit_test(
        the_same_token_under_another_key_is_reported_without_its_point),
    cmocka_unit_test(largest_sealed_result_round_trips_exactly),
    cmocka_unit_test(concurrent_writers_of_one_key_insert_once),
    cmocka_unit_test(bad_input_is_refused_before_the_store_and_writes_nothing),
};
const size_t t_redemption_tests_count =
    sizeof t_redemption_tests / sizeof t_redemption_tests[0];
