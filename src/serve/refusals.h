/*
 * refusals.h — the refusal cache of `oncegate serve` (docs/http.md, "The
 * refusal cache"): a bounded table of grant
 * tokens the store refused because their key is held for good, so that a
 * replay of the same token bytes is refused again without the signature
 * check and without a store round trip. Pure but for its locks: the clock
 * and the snapshot's generation are arguments. Private to src/serve/.
 *
 * Its rules are docs/design.md's, "The refusal cache" (RF1-RF6): an entry
 * is made only from a store refusal whose key is held for good (RF1); a
 * hit needs the token's exact bytes and the same request binding (RF2),
 * the same auth snapshot (RF3), a clock before the grant's expiry (RF4)
 * and an operation id that is not the holder's (RF5); it never admits and
 * never says "unused" (RF6).
 *
 * Memory is bounded: entries slots fixed at creation, in sets of 4 (a new
 * entry takes a free way of its set or replaces the set's oldest; an
 * evicted token only misses).
 */
#ifndef OG_SERVE_REFUSALS_H
#define OG_SERVE_REFUSALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/oncegate.h"

typedef struct og_refusals og_refusals;

/* A table of entries slots (>= 1); NULL on OOM. og_refusals_free(NULL) is
 * a no-op. */
og_refusals *og_refusals_new(size_t entries);
void og_refusals_free(og_refusals *c);

/* What a request is looked up by (RF2). */
typedef struct og_refusals_key {
    unsigned char token[32];
    unsigned char binding[32];
} og_refusals_key;

/* The key of a token and the request's binding (the strings as sent). */
void og_refusals_key_of(const og_refusals *c, const char *token,
                        const char *caller, const char *action,
                        const char *account, const char *amount,
                        const char *currency, og_refusals_key *k);

/* What an entry answers with. */
typedef struct og_refusals_hit {
    og_refusal refusal;
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
} og_refusals_hit;

/* 1 and *out when the entry for k answers a request of operation_id under
 * snapshot generation at wall-clock now_us (RF2-RF5); 0 otherwise. */
int og_refusals_find(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t now_us,
                     const char *operation_id, og_refusals_hit *out);

/* Keeps a's refusal for k until until_us (the grant's expiry) when a's key
 * is held (RF1); anything else is ignored. */
void og_refusals_put(og_refusals *c, const og_refusals_key *k,
                     uint64_t generation, int64_t until_us,
                     const og_admission *a, const char *issuer,
                     const char *grant_id);

#endif /* OG_SERVE_REFUSALS_H */
