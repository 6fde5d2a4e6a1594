/*
 * resources.c — what a create of either resource does (docs/sandbox.md):
 * 201 and a same-key retry that replays the saved body, parameters
 * compared canonically, 422 for a key reused with other parameters, one
 * record for twenty concurrent same-key creates (and duplicates without
 * atomic same-key handling), closed, busy and async targets.
 */
#include "harness.h"
#include "cases.h"

/* A create is 201 and a retry with its key replays the saved body byte for
 * byte, counted in ap's counters and no other resource's. */
static void create_then_replay(const api *ap, const char *key,
                               const char *target, const char *amount,
                               const char *canonical, const char *reference)
{
    sbx *s = sbx_new("--control", END);
    const api *other = other_api(ap);
    char h[64];
    hres a, b;

    sbx_start(s);
    create_at(s, ap, key, target, amount, reference, NULL, &a);
    assert_effect(ap, &a, target, reference);
    assert_str(jstr(a.json, "amount"), canonical);
    assert_false(hdr_value(&a, "Idempotent-Replayed", h, sizeof h));
    create_at(s, ap, key, target, amount, reference, NULL, &b);
    assert_int_equal(b.status, 201);
    assert_str(b.body, a.body); /* byte for byte */
    assert_true(hdr_value(&b, "Idempotent-Replayed", h, sizeof h));
    assert_str(h, "true");
    assert_int_equal(counter(s, ap->c_rows), 1);
    assert_int_equal(counter(s, ap->c_requests), 2);
    assert_int_equal(counter(s, ap->c_replays), 1);
    assert_int_equal(counter(s, other->c_rows), 0);
    assert_int_equal(counter(s, other->c_requests), 0);
    assert_int_equal(counter(s, other->c_replays), 0);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(create_is_201_and_a_same_key_retry_replays_the_identical_saved_body,
      create_then_replay(&CREDITS, "key-1", "A-1187", "250.00", "250", "invoice-1"))

CLAIM(payout_create_is_201_completed_with_a_po_id_and_a_same_key_retry_replays_the_identical_body,
      create_then_replay(&PAYOUTS, "payout-PAY-3107-a1", "dst_tok_a1b2c3d4", "4250.00", "4250", "PAY-3107-a1"))

/* The same amount and expires_at instant spelled differently are the same
 * request. */
static void compared_canonically(const api *ap, const char *target)
{
    sbx *s = sbx_new("--control", END);
    char z[40], off[40];
    hres a, b;

    sbx_start(s);
    rfc3339_in(3600, z);
    /* The same instant with a +00:00 offset and a fraction of zeros. */
    snprintf(off, sizeof off, "%.19s.000+00:00", z);
    create_at(s, ap, "key-c", target, "0250.50", "ref-c", z, &a);
    assert_effect(ap, &a, target, "ref-c");
    assert_str(jstr(a.json, "amount"), "250.5");
    create_at(s, ap, "key-c", target, "250.500", "ref-c", off, &b);
    assert_int_equal(b.status, 201);
    assert_str(b.body, a.body);
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
}

CLAIM(parameters_are_compared_canonically_amount_and_expiry_instant,
      compared_canonically(&CREDITS, "A-1"))

CLAIM(payout_parameters_are_compared_canonically_amount_and_expiry_instant,
      compared_canonically(&PAYOUTS, "dst_tok_canon"))

/* The key of ap's create with target, sent again with any one parameter
 * other (other_target for the target), is 422 idempotency_mismatch. */
static void mismatches_change_nothing(const api *ap, const char *target,
                                      const char *other_target)
{
    const struct {
        const char *target, *amount, *currency, *reference;
        int expires_in;
    } other[] = {
        {other_target, "10", "USD", "ref-m", 3600}, /* target */
        {target, "10.01", "USD", "ref-m", 3600},    /* amount */
        {target, "10", "EUR", "ref-m", 3600},       /* currency */
        {target, "10", "USD", "ref-n", 3600},       /* reference */
        {target, "10", "USD", "ref-m", 7200},       /* expires_at */
    };
    sbx *s = sbx_new("--control", END);
    char exp[40];
    hres a, r;

    sbx_start(s);
    rfc3339_in(3600, exp);
    create_at(s, ap, "key-m", target, "10", "ref-m", exp, &a);
    assert_effect(ap, &a, target, "ref-m");
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char e[40];

        rfc3339_in(other[i].expires_in, e);
        create_in(s, ap, "key-m", other[i].target, other[i].amount,
                  other[i].currency, other[i].reference,
                  other[i].expires_in == 3600 ? exp : e, &r);
        assert_error(&r, 422, "idempotency_mismatch");
        hres_free(&r);
    }
    assert_int_equal(counter(s, ap->c_rows), 1);
    assert_int_equal(counter(s, ap->c_mismatches), 5);
    assert_int_equal(counter(s, other_api(ap)->c_mismatches), 0);
    /* The key still answers its saved result. */
    create_at(s, ap, "key-m", target, "10", "ref-m", exp, &r);
    assert_str(r.body, a.body);
    hres_free(&r);
    hres_free(&a);
}

CLAIM(same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing,
      mismatches_change_nothing(&CREDITS, "A-1", "A-2"))

CLAIM(payout_same_key_with_other_parameters_is_422_idempotency_mismatch_and_changes_nothing,
      mismatches_change_nothing(&PAYOUTS, "dst_tok_pm", "dst_tok_other"))

/* ===========================================================================
 * Concurrency
 * ========================================================================= */
typedef struct racer {
    pthread_barrier_t *start;
    const sbx *s;
    const api *a;
    char key[64];
    hres r;
} racer;

static void *racer_main(void *arg)
{
    racer *me = arg;

    pthread_barrier_wait(me->start);
    create_at(me->s, me->a, me->key,
              me->a == &PAYOUTS ? "dst_race" : "A-race", "99.99", me->key,
              NULL, &me->r);
    return NULL;
}

/* RACERS concurrent creates of a with one key, released by a barrier. */
static void race_at(const sbx *s, const api *a, const char *key,
                    racer rs[RACERS])
{
    pthread_barrier_t start;
    pthread_t th[RACERS];

    assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
    for (int i = 0; i < RACERS; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].start = &start;
        rs[i].s = s;
        rs[i].a = a;
        snprintf(rs[i].key, sizeof rs[i].key, "%s", key);
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
}

/* RACE_ROUNDS rounds of RACERS concurrent creates of ap, one key a round:
 * one record a round, every racer the same answer. */
static void races_make_one_record_a_round(const api *ap)
{
    sbx *s = sbx_new("--control", END);
    racer rs[RACERS];
    char key[64];

    sbx_start(s);
    for (int round = 1; round <= RACE_ROUNDS; round++) {
        snprintf(key, sizeof key, "race-%d", round);
        race_at(s, ap, key, rs);
        for (int i = 0; i < RACERS; i++) {
            /* One created, the rest replayed: all the same answer. */
            assert_int_equal(rs[i].r.status, 201);
            assert_str(rs[i].r.body, rs[0].r.body);
        }
        for (int i = 0; i < RACERS; i++)
            hres_free(&rs[i].r);
        assert_int_equal(counter(s, ap->c_rows), round);
        assert_int_equal(lookup_at_n(s, ap, "idempotency_key", key), 1);
    }
    assert_int_equal(counter(s, ap->c_requests), RACE_ROUNDS * RACERS);
    assert_int_equal(counter(s, ap->c_replays), RACE_ROUNDS * (RACERS - 1));
}

CLAIM(twenty_concurrent_same_key_creates_make_exactly_one_credit,
      races_make_one_record_a_round(&CREDITS))

CLAIM(twenty_concurrent_same_key_payouts_make_exactly_one_payout,
      races_make_one_record_a_round(&PAYOUTS))

/* ===========================================================================
 * Group commit (store.c SB12): creates arriving together share one
 * transaction, and each answers what it would have answered alone.
 * ========================================================================= */
#define MIXED 24 /* concurrent creates of one round */

typedef struct mixed {
    pthread_barrier_t *start;
    const sbx *s;
    char key[64], target[32], amount[16];
    hres r;
} mixed;

static void *mixed_main(void *arg)
{
    mixed *me = arg;

    pthread_barrier_wait(me->start);
    create_at(me->s, &CREDITS, me->key, me->target, me->amount, me->key,
              NULL, &me->r);
    return NULL;
}

/* Member i of a round: fresh keys (i % 4 == 0 or 1), one shared key with
 * equal parameters (2), the same shared key with another amount (3); every
 * eighth fresh one names a closed account. */
static void mixed_member(mixed *m, int i)
{
    switch (i % 4) {
    case 0:
    case 1:
        snprintf(m->key, sizeof m->key, "gc-fresh-%d", i);
        snprintf(m->target, sizeof m->target, "%s",
                 i % 8 == 0 ? "closed-gc" : "A-gc");
        snprintf(m->amount, sizeof m->amount, "1.%02d", i);
        break;
    case 2:
        snprintf(m->key, sizeof m->key, "gc-shared");
        snprintf(m->target, sizeof m->target, "A-gc");
        snprintf(m->amount, sizeof m->amount, "7.00");
        break;
    default:
        snprintf(m->key, sizeof m->key, "gc-shared");
        snprintf(m->target, sizeof m->target, "A-gc");
        snprintf(m->amount, sizeof m->amount, "8.00");
        break;
    }
}

void concurrent_creates_of_mixed_keys_each_answer_as_alone_and_survive_a_restart(
    void **state)
{
    sbx *s = sbx_new("--control", END);
    pthread_barrier_t start;
    pthread_t th[MIXED];
    mixed ms[MIXED];
    int fresh = 0, closed = 0, shared_ok = 0, shared_mismatch = 0;
    int i, winner_amount = 0;
    hres again;

    (void)state;
    sbx_start(s);
    assert_int_equal(pthread_barrier_init(&start, NULL, MIXED), 0);
    for (i = 0; i < MIXED; i++) {
        memset(&ms[i], 0, sizeof ms[i]);
        ms[i].start = &start;
        ms[i].s = s;
        mixed_member(&ms[i], i);
        assert_int_equal(pthread_create(&th[i], NULL, mixed_main, &ms[i]), 0);
    }
    for (i = 0; i < MIXED; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);

    /* The shared key belongs to whichever of its two parameter sets came
     * first: that set is 201 for every member carrying it, the other 422. */
    for (i = 0; i < MIXED; i++)
        if (i % 4 >= 2 && ms[i].r.status == 201)
            winner_amount = i % 4;
    assert_true(winner_amount == 2 || winner_amount == 3);
    for (i = 0; i < MIXED; i++) {
        if (i % 4 <= 1 && i % 8 == 0) {
            assert_error(&ms[i].r, 422, "account_closed");
            closed++;
        } else if (i % 4 <= 1) {
            assert_credit(&ms[i].r, "A-gc", ms[i].key);
            fresh++;
        } else if (i % 4 == winner_amount) {
            assert_int_equal(ms[i].r.status, 201);
            shared_ok++;
        } else {
            assert_error(&ms[i].r, 422, "idempotency_mismatch");
            shared_mismatch++;
        }
    }
    assert_int_equal(fresh + closed + shared_ok + shared_mismatch, MIXED);
    assert_int_equal(counter(s, "credits_created"), fresh + 1);
    assert_int_equal(counter(s, "create_requests"), MIXED);
    assert_int_equal(counter(s, "idempotent_replays"), shared_ok - 1);
    assert_int_equal(counter(s, "mismatches"), shared_mismatch);

    /* Every answer was committed before it was given (SB1): after a
     * restart each key replays the body it answered. */
    sbx_restart(s);
    for (i = 0; i < MIXED; i++) {
        if (ms[i].r.status == 422 && i % 4 >= 2)
            continue; /* a mismatch recorded nothing */
        create_at(s, &CREDITS, ms[i].key, ms[i].target, ms[i].amount,
                  ms[i].key, NULL, &again);
        assert_int_equal(again.status, ms[i].r.status);
        assert_str(again.body, ms[i].r.body);
        hres_free(&again);
    }
    assert_int_equal(counter(s, "credits_created"), fresh + 1);
    for (i = 0; i < MIXED; i++)
        hres_free(&ms[i].r);
}

/* With --no-atomic-same-key, concurrent first uses of one key of ap can
 * each create a record, all carrying the key. */
static void races_can_duplicate_without_atomic_same_key(const api *ap)
{
    sbx *s = sbx_new("--control", "--no-atomic-same-key", "--race-gap-ms", "200", END);
    racer rs[RACERS];
    json_int_t before = 0, most = 0;
    char key[64];

    sbx_start(s);
    for (int round = 1; round <= RACE_ROUNDS && most < 2; round++) {
        json_int_t made;

        snprintf(key, sizeof key, "race-%d", round);
        race_at(s, ap, key, rs);
        for (int i = 0; i < RACERS; i++) {
            assert_int_equal(rs[i].r.status, 201);
            hres_free(&rs[i].r);
        }
        made = counter(s, ap->c_rows) - before;
        before += made;
        assert_true(made >= 1);
        /* Every duplicate carries the key: lookups see them all. */
        assert_int_equal(lookup_at_n(s, ap, "idempotency_key", key),
                         (size_t)made);
        if (made > most)
            most = made;
    }
    if (most < 2)
        fail_msg("no round of %d racers made a duplicate", RACERS);
}

CLAIM(without_atomic_same_key_concurrent_creates_can_make_duplicates,
      races_can_duplicate_without_atomic_same_key(&CREDITS))
CLAIM(without_atomic_same_key_concurrent_payouts_can_make_duplicates,
      races_can_duplicate_without_atomic_same_key(&PAYOUTS))

/* A closed target is refused with ap's closed code, and the key keeps
 * that refusal: no record will ever follow for it. */
static void closed_target_is_refused_and_recorded(const api *ap,
                                                  const char *closed,
                                                  const char *open)
{
    sbx *s = sbx_new("--control", END);
    char h[16];
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-closed", closed, "5", "ref-closed", NULL, &a);
    assert_error(&a, 422, ap->closed_code);
    create_at(s, ap, "key-closed", closed, "5", "ref-closed", NULL, &b);
    assert_int_equal(b.status, 422);
    assert_str(b.body, a.body);
    assert_true(hdr_value(&b, "Idempotent-Replayed", h, sizeof h));
    /* The key is recorded with that result: other parameters mismatch. */
    create_at(s, ap, "key-closed", open, "5", "ref-closed", NULL, &c);
    assert_error(&c, 422, "idempotency_mismatch");
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(counter(s, ap->c_replays), 1);
    assert_int_equal(lookup_at_n(s, ap, "idempotency_key", "key-closed"), 0);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(closed_account_is_422_account_closed_and_a_replay_is_the_same_422,
      closed_target_is_refused_and_recorded(&CREDITS, "closed-77", "A-1"))

CLAIM(closed_destination_is_422_destination_closed_and_a_replay_is_the_same_422,
      closed_target_is_refused_and_recorded(&PAYOUTS, "dst_closed_77", "dst_tok_open"))

/* A busy target is 429 rate_limited with Retry-After and records
 * nothing: the key stays new for any parameters. */
static void busy_target_records_nothing(const api *ap, const char *busy,
                                        const char *open)
{
    sbx *s = sbx_new("--control", END);
    char ra[16];
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-busy", busy, "5", "ref-busy", NULL, &a);
    assert_error(&a, 429, "rate_limited");
    assert_non_null(strstr(jstr(a.json, "message"), ap->target));
    assert_true(hdr_value(&a, "Retry-After", ra, sizeof ra));
    assert_str(ra, "1");
    create_at(s, ap, "key-busy", busy, "5", "ref-busy", NULL, &b);
    assert_error(&b, 429, "rate_limited");
    assert_int_equal(counter(s, ap->c_rows), 0);
    assert_int_equal(counter(s, ap->c_replays), 0);
    /* Nothing was recorded: the key is still new for any parameters. */
    create_at(s, ap, "key-busy", open, "5", "ref-busy", NULL, &c);
    assert_effect(ap, &c, open, "ref-busy");
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(busy_account_is_429_with_retry_after_and_records_nothing,
      busy_target_records_nothing(&CREDITS, "busy-3", "A-9"))

CLAIM(busy_destination_is_429_with_retry_after_and_records_nothing,
      busy_target_records_nothing(&PAYOUTS, "dst_busy_3", "dst_tok_9"))

/* An async target is 202 pending, listed pending, replayed pending, and
 * complete --async-complete-ms after creation: then listed and replayed
 * complete, the same record. */
static void async_target_completes_later(const api *ap, const char *async)
{
    sbx *s = sbx_new("--control", "--async-complete-ms", "700", END);
    json_t *found;
    hres a, b, c;

    sbx_start(s);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &a);
    assert_int_equal(a.status, 202);
    assert_int_equal(json_object_size(a.json), 2);
    assert_str(jstr(a.json, "status"), "pending");
    assert_true(strncmp(jstr(a.json, "id"), ap->id_prefix, 3) == 0);
    found = lookup_at(s, ap, "reference", "ref-async");
    assert_int_equal(json_array_size(found), 1);
    assert_str(jstr(json_array_get(found, 0), "status"), "pending");
    json_decref(found);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &b);
    assert_int_equal(b.status, 202); /* the saved result, still pending */
    assert_str(b.body, a.body);
    t_sleep_ms(900);
    found = lookup_at(s, ap, "reference", "ref-async");
    assert_int_equal(json_array_size(found), 1);
    assert_str(jstr(json_array_get(found, 0), "status"), ap->completed);
    assert_str(jstr(json_array_get(found, 0), "id"), jstr(a.json, "id"));
    json_decref(found);
    create_at(s, ap, "key-async", async, "12", "ref-async", NULL, &c);
    assert_effect(ap, &c, async, "ref-async"); /* now the complete record */
    assert_str(jstr(c.json, "id"), jstr(a.json, "id"));
    assert_int_equal(counter(s, ap->c_rows), 1);
    hres_free(&a);
    hres_free(&b);
    hres_free(&c);
}

CLAIM(async_account_is_202_pending_then_succeeded_after_the_delay,
      async_target_completes_later(&CREDITS, "async-5"))

CLAIM(async_destination_is_202_pending_then_completed_after_the_delay,
      async_target_completes_later(&PAYOUTS, "dst_async_5"))
