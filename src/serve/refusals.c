/*
 * refusals.c — the refusal cache (refusals.h: RF1-RF6). One table of
 * 4-way sets behind striped mutexes: a lookup or a fill holds one stripe
 * for a scan of one set. A fill takes the set's free way (an entry past
 * its grant's expiry is freed when it is looked up), else replaces its
 * oldest entry: a table filled to 40 % keeps nearly every
 * entry (a direct-mapped one lost about a fifth to collisions).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "refusals.h"

#define STRIPES 64
#define WAYS 4

typedef struct entry {
    bool used;
    uint64_t stamp;                /* fill order: the oldest is replaced */
    og_refusals_key key;
    uint64_t generation;
    int64_t until_us;
    og_refusal refusal;
    char held_by[OG_UUID_LEN + 1]; /* "" for a revocation or a consume */
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
} entry;

struct og_refusals {
    size_t n;
    size_t ways, sets;             /* n = ways * sets (what fits of it) */
    atomic_uint_fast64_t fills;    /* stamps */
    entry *slots;
    /* The hash key: slots cannot be aimed at from outside (one token's
     * entry evicting another's on purpose). */
    unsigned char secret[crypto_generichash_KEYBYTES];
    pthread_mutex_t mu[STRIPES];
};

og_refusals *og_refusals_new(size_t entries)
{
    og_refusals *c;

    if (entries == 0 || !(c = calloc(1, sizeof *c)))
        return NULL;
    if (!(c->slots = calloc(entries, sizeof *c->slots))) {
        free(c);
        return NULL;
    }
    c->n = entries;
    c->ways = entries < WAYS ? entries : WAYS;
    c->sets = entries / c->ways;
    randombytes_buf(c->secret, sizeof c->secret);
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&c->mu[i], NULL);
    return c;
}

void og_refusals_free(og_refusals *c)
{
    if (!c)
        return;
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_destroy(&c->mu[i]);
    sodium_memzero(c->secret, sizeof c->secret);
    free(c->slots);
    free(c);
}

/* Each string with its NUL: no two different tuples hash alike. */
static void add_str(crypto_generichash_state *st, const char *s)
{
    s = s ? s : "";
    crypto_generichash_update(st, (const unsigned char *)s, strlen(s) + 1);
}

void og_refusals_key_of(const og_refusals *c, const char *token,
                        const char *caller, const char *action,
                        const char *account, const char *amount,
                        const char *currency, og_refusals_key *k)
{
    crypto_generichash_state st;

    crypto_generichash(k->token, sizeof k->token,
                       (const unsigned char *)token, strlen(token), c->secret,
                       sizeof c->secret);
    crypto_generichash_init(&st, c->secret, sizeof c->secret,
                            sizeof k->binding);
    add_str(&st, caller);
    add_str(&st, action);
    add_str(&st, account);
    add_str(&st, amount);
    add_str(&st, currency);
    crypto_generichash_final(&st, k->binding, sizeof k->binding);
}

/* The set of k: its first slot. */
static size_t set_of(const og_refusals *c, const og_refusals_key *k)
{
    uint64_t h;

    memcpy(&h, k->token, sizeof h);
    return (size_t)(h % c->sets);
}

int og_refusals_find(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t now_us,
                     const char *operation_id, og_refusals_hit *out)
{
    size_t set = set_of(c, k);
    pthread_mutex_t *mu = &c->mu[set % STRIPES];
    int hit = 0;

    pthread_mutex_lock(mu);
    for (size_t w = 0; w < c->ways; w++) {
        entry *e = &c->slots[set * c->ways + w];

        if (!e->used || sodium_memcmp(&e->key, k, sizeof *k) != 0) /* RF2 */
            continue;
        if (now_us >= e->until_us) {
            e->used = false; /* past its grant's expiry: never again */
        } else if (e->generation == generation &&               /* RF3 */
                   strcmp(e->held_by, operation_id) != 0) {     /* RF5 */
            out->refusal = e->refusal;
            memcpy(out->issuer, e->issuer, sizeof out->issuer);
            memcpy(out->grant_id, e->grant_id, sizeof out->grant_id);
            hit = 1;
        }
        break;
    }
    pthread_mutex_unlock(mu);
    return hit;
}

void og_refusals_put(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t until_us,
                     const og_admission *a, const char *issuer,
                     const char *grant_id)
{
    entry n, *victim = NULL;
    size_t set;

    /* RF1: only a key the store read as held for good, by one of the
     * holders that keep it until cleanup. */
    if (a->outcome != OG_OUTCOME_REFUSED || !a->key_held ||
        (a->refusal != OG_REFUSAL_GRANT_SPENT &&
         a->refusal != OG_REFUSAL_GRANT_REVOKED &&
         a->refusal != OG_REFUSAL_GRANT_CONSUMED) ||
        (a->refusal == OG_REFUSAL_GRANT_SPENT && !a->held_by[0]) ||
        strlen(issuer) > OG_ID_MAX || strlen(grant_id) > OG_ID_MAX)
        return;
    memset(&n, 0, sizeof n);
    n.used = true;
    n.key = *k;
    n.generation = generation;
    n.until_us = until_us;
    n.refusal = a->refusal;
    memcpy(n.held_by, a->held_by, sizeof n.held_by);
    n.held_by[OG_UUID_LEN] = '\0';
    memcpy(n.issuer, issuer, strlen(issuer) + 1);
    memcpy(n.grant_id, grant_id, strlen(grant_id) + 1);
    set = set_of(c, k);
    pthread_mutex_lock(&c->mu[set % STRIPES]);
    /* The same key's way, else a free one, else the oldest:
     * the table stays bounded. */
    for (size_t w = 0; w < c->ways; w++) {
        entry *e = &c->slots[set * c->ways + w];

        if (e->used && sodium_memcmp(&e->key, k, sizeof *k) == 0) {
            victim = e;
            break;
        }
        if (!e->used) {
            if (!victim || victim->used)
                victim = e;
        } else if (!victim || (victim->used && e->stamp < victim->stamp)) {
            victim = e;
        }
    }
    n.stamp = atomic_fetch_add(&c->fills, 1) + 1;
    *victim = n;
    pthread_mutex_unlock(&c->mu[set % STRIPES]);
}
