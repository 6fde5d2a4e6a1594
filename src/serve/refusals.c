/*
 * refusals.c — the refusal cache (refusals.h: RF1-RF6). One table of
 * direct-mapped slots behind striped mutexes: a lookup or a fill holds one
 * stripe for a copy of one entry.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "refusals.h"

#define STRIPES 64

typedef struct entry {
    bool used;
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

static size_t slot_of(const og_refusals *c, const og_refusals_key *k)
{
    uint64_t h;

    memcpy(&h, k->token, sizeof h);
    return (size_t)(h % c->n);
}

int og_refusals_find(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t now_us,
                     const char *operation_id, og_refusals_hit *out)
{
    size_t i = slot_of(c, k);
    pthread_mutex_t *mu = &c->mu[i % STRIPES];
    entry *e = &c->slots[i];
    int hit = 0;

    pthread_mutex_lock(mu);
    if (e->used && sodium_memcmp(&e->key, k, sizeof *k) == 0 && /* RF2 */
        e->generation == generation &&                           /* RF3 */
        now_us < e->until_us &&                                  /* RF4 */
        strcmp(e->held_by, operation_id) != 0) {                 /* RF5 */
        out->refusal = e->refusal;
        memcpy(out->issuer, e->issuer, sizeof out->issuer);
        memcpy(out->grant_id, e->grant_id, sizeof out->grant_id);
        hit = 1;
    } else if (e->used && now_us >= e->until_us) {
        e->used = false; /* past its grant's expiry: never answers again */
    }
    pthread_mutex_unlock(mu);
    return hit;
}

void og_refusals_put(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t until_us,
                     const og_admission *a, const char *issuer,
                     const char *grant_id)
{
    entry n;
    size_t i;

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
    i = slot_of(c, k);
    pthread_mutex_lock(&c->mu[i % STRIPES]);
    c->slots[i] = n; /* replaces what was there: the table stays bounded */
    pthread_mutex_unlock(&c->mu[i % STRIPES]);
}
