/*
 * redeem.c — og_redeem: the I/O around the pure decisions of
 * lib/core/redeem.c (the diagram there, RD1-RD4), and the sealing key's file.
 * Store calls are the recovery-point methods (oncegate.h, schema 6); the
 * exchange goes through the client (lib/provider/client.c). This file logs
 * nothing: the caller logs identifiers and the outcome, never the token or
 * the result.
 *
 * Invariants (beyond RD1-RD4):
 *   RX1 The exchange is sent at most once per call, and only after a look
 *       at the key's recovery point answered "absent". A look that failed
 *       stops the call before anything is sent (RD1).
 *   RX2 A successful exchange is persisted before anything else happens:
 *       the very next step is the sealed put. What the put cannot persist
 *       is still returned to this caller (persisted = false): it is the
 *       only copy there will ever be.
 *   RX3 The catch-up ends on a look, never on a sleep: the last look
 *       happens at or after the bound, and only a look that answered
 *       "absent" lets the call say LOST or UNKNOWN; a failed last look is
 *       OG_ESTORE_UNAVAILABLE.
 *   RX4 Plaintext results live in buffers this file wipes before freeing
 *       them; the key lives in guarded memory (sodium_malloc).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "core/core_int.h"
#include "oncegate/grant.h"
#include "oncegate/redeem.h"
#include "oncegate/store.h"

struct og_redeem_key {
    unsigned char k[OG__REDEEM_KEY_LEN];
};

/* ===========================================================================
 * The key (RX4)
 * ========================================================================= */

int og_redeem_key_from_bytes(const unsigned char bytes[32],
                             og_redeem_key **out)
{
    og_redeem_key *k;

    if (!bytes || !out)
        return OG_EINVAL;
    if (sodium_init() < 0 || !(k = sodium_malloc(sizeof *k)))
        return OG_ENOMEM;
    memcpy(k->k, bytes, sizeof k->k);
    *out = k;
    return 0;
}

void og_redeem_key_free(og_redeem_key *k)
{
    if (k)
        sodium_free(k); /* wipes */
}

int og_redeem_key_load_file(const char *path, og_redeem_key **out)
{
    unsigned char key[OG__REDEEM_KEY_LEN];
    int rc;

    if (!path || !out)
        return OG_EINVAL;
    rc = og_secret_key_file_read(path, OG_KEY_HEX_OR_BASE64, key);
    if (rc == 0)
        rc = og_redeem_key_from_bytes(key, out);
    else if (rc == OG_EKEY_INVALID)
        rc = OG_EREDEMPTION_KEY; /* this key's own code, as documented */
    sodium_memzero(key, sizeof key);
    return rc;
}

/* ===========================================================================
 * Clocks
 * ========================================================================= */
static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

    while (us > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ===========================================================================
 * Sealing and opening results (RD3, RX4)
 * ========================================================================= */

/* Opens p (the key's own point) into r->result. 0,
 * OG_EREDEMPTION_UNDECRYPTABLE or OG_ENOMEM. */
static int point_open(const og_redeem_key *k, const og_redeem_request *q,
                      const og_redemption_point *p, og_redeem_result *r)
{
    size_t n = p->sealed_len - OG_REDEMPTION_TAG_LEN;
    char *plain = malloc(n + 1);

    if (!plain)
        return OG_ENOMEM;
    if (og__redeem_open(k->k, p->nonce, q->caller, q->idempotency_key,
                        p->code_hash, p->sealed, p->sealed_len,
                        (unsigned char *)plain) != 0) {
        sodium_memzero(plain, n);
        free(plain);
        return OG_EREDEMPTION_UNDECRYPTABLE;
    }
    plain[n] = '\0';
    r->result = plain;
    r->result_len = n;
    r->persisted = true;
    r->created_at_us = p->created_at_us;
    return 0;
}

/* Seals x's result and writes it as the key's point (RX2). Sets
 * r->persisted and r->persist_error; 0, or OG_ENOMEM / OG_EINTERNAL when
 * it could not even be sealed (nothing written). */
static int persist(og_store *s, const og_redeem_key *k,
                   const og_redeem_request *q, const char *code_hash,
                   const og_exchange_outcome *x, og_redeem_result *r)
{
    unsigned char nonce[OG_REDEMPTION_NONCE_LEN];
    size_t len = x->result_len + OG_REDEMPTION_TAG_LEN;
    unsigned char *sealed = malloc(len);
    og_redemption_record rec;
    bool inserted = false;
    int rc;

    if (!sealed)
        return OG_ENOMEM;
    randombytes_buf(nonce, sizeof nonce);
    rc = og__redeem_seal(k->k, nonce, q->caller, q->idempotency_key,
                         code_hash, (const unsigned char *)x->result,
                         x->result_len, sealed);
    if (rc == 0) {
        rec = (og_redemption_record){q->caller, q->idempotency_key,
                                     code_hash, nonce, sealed, len};
        r->persist_error = og_redemption_put(s, &rec, &inserted);
        /* Not inserted: the key already held a point. Only another token's
         * can be there (this one's exchange succeeded just now), and it is
         * never overwritten: this result stays the caller's alone. */
        r->persisted = r->persist_error == 0 && inserted;
    }
    free(sealed);
    return rc;
}

/* ===========================================================================
 * The call
 * ========================================================================= */

static int request_check(const og_redeem_request *q)
{
    if (og__id_check(q->caller) != 0)
        return OG_ECALLER;
    if (og__id_check(q->idempotency_key) != 0)
        return OG_EIDEMPOTENCY_KEY;
    if (!q->code || !q->code[0] || strnlen(q->code, OG_PROVIDER_CODE_MAX + 1) >
                                       OG_PROVIDER_CODE_MAX)
        return OG_ECODE;
    for (const char *c = q->code; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            return OG_ECODE;
    if (q->exchange_timeout_us <= 0 || q->catch_up_us < 0)
        return OG_EINVAL;
    return 0;
}

/* One look at the recovery points: the key's own, else the code under
 * another key (with_code). Sets *decided to an outcome, or -1. */
static int look(og_store *s, const og_redeem_key *k,
                const og_redeem_request *q, const char *code_hash,
                bool with_code, int *decided, og_redeem_result *r)
{
    og_redemption_found f = OG_REDEMPTION_ABSENT;
    og_redemption_point p;
    int rc = og_redemption_get(s, q->caller, q->idempotency_key,
                               with_code ? code_hash : NULL, &f, &p);

    if (rc != 0)
        return rc;
    *decided = og__redeem_after_look(
        f, f == OG_REDEMPTION_OWN && strcmp(p.code_hash, code_hash) == 0);
    if (*decided == OG_REDEEM_CAUGHT_UP)
        rc = point_open(k, q, &p, r);
    if (f == OG_REDEMPTION_OWN)
        og_redemption_point_clear(&p);
    return rc;
}

/* Step 4: looks with backoff until the bound after the exchange answered
 * x (RD2: never exchanging again). 0 with r->outcome set, or the last
 * look's error (RX3). */
static int catch_up(og_store *s, const og_redeem_key *k,
                    const og_redeem_request *q, const char *code_hash,
                    const og_exchange_outcome *x, og_redeem_result *r)
{
    int64_t deadline = mono_us() + og__redeem_catch_up_us(x, q->catch_up_us);
    int decided = -1, rc;

    for (int attempt = 0;; attempt++) {
        int64_t left;

        rc = look(s, k, q, code_hash, true, &decided, r);
        r->looks++;
        if (rc == 0 && decided >= 0) {
            r->outcome = (og_redeem_outcome)decided;
            return 0;
        }
        if (rc != 0 && rc != OG_ESTORE_UNAVAILABLE)
            return rc; /* a defect or a key that does not open: no waiting */
        if ((left = deadline - mono_us()) <= 0)
            break;
        if (q->stopping && q->stopping(q->stopping_arg))
            return OG_ESTOPPED; /* undecided: the retry looks again */
        sleep_us(left < og__redeem_backoff_us(attempt)
                     ? left
                     : og__redeem_backoff_us(attempt));
    }
    if (rc != 0)
        return rc; /* the last look failed: not known (RX3, RD1) */
    r->outcome = og__redeem_at_bound(x->cls);
    return 0;
}

int og_redeem(og_store *s, og_provider *p, const og_redeem_key *k,
              const og_redeem_request *q, og_redeem_result *out)
{
    char code_hash[OG_CODE_HASH_LEN + 1];
    og_exchange_outcome x;
    og_redeem_result r;
    int decided = -1, rc;

    if (!s || !p || !k || !q || !out)
        return OG_EINVAL;
    if ((rc = request_check(q)) != 0)
        return rc;
    memset(&r, 0, sizeof r);
    memset(&x, 0, sizeof x);
    og__redeem_code_hash(q->code, code_hash);

    /* Step 1: the key's own point (RX1). */
    if ((rc = look(s, k, q, code_hash, false, &decided, &r)) != 0)
        goto fail;
    if (decided >= 0) {
        r.outcome = decided == OG_REDEEM_CAUGHT_UP ? OG_REDEEM_RECOVERED
                                                   : (og_redeem_outcome)decided;
        goto done;
    }
    /* Step 2: the exchange, once (RD2). */
    if ((rc = og_provider_exchange_code(p, q->code, q->exchange_timeout_us,
                                        &x)) != 0)
        goto fail; /* nothing was sent */
    r.exchanged = true;
    snprintf(r.reason, sizeof r.reason, "%s", x.reason);
    switch (x.cls) {
    case OG_EXCHANGE_SUCCEEDED:
        /* Step 3: persist at once (RX2), then answer with it. */
        if ((rc = persist(s, k, q, code_hash, &x, &r)) != 0)
            goto fail;
        r.outcome = OG_REDEEM_REDEEMED;
        r.result = x.result; /* moved: wiped by og_redeem_result_clear */
        r.result_len = x.result_len;
        x.result = NULL;
        break;
    case OG_EXCHANGE_REJECTED:
        r.outcome = OG_REDEEM_REJECTED;
        break;
    case OG_EXCHANGE_ALREADY_USED:
    case OG_EXCHANGE_UNKNOWN:
        /* Step 4: someone spent it — maybe us: catch up. */
        if ((rc = catch_up(s, k, q, code_hash, &x, &r)) != 0)
            goto fail;
        break;
    }
done:
    og_exchange_outcome_clear(&x);
    *out = r;
    return 0;
fail:
    og_exchange_outcome_clear(&x);
    og_redeem_result_clear(&r);
    return rc;
}

void og_redeem_result_clear(og_redeem_result *r)
{
    if (!r)
        return;
    if (r->result) {
        sodium_memzero(r->result, r->result_len);
        free(r->result);
    }
    memset(r, 0, sizeof *r);
}
