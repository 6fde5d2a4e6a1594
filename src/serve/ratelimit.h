/*
 * ratelimit.h — token buckets kept per key (a principal id or a source
 * address) in a fixed table, for the rate limits of the HTTP edge:
 * failed authentication and revocation (docs/http.md, "Rate limits").
 * The clock is an argument: the buckets are a pure core over time. Private
 * to src/serve/.
 *
 *   RL1 memory is bounded: a table of slots fixed at creation, one mutex;
 *   RL2 a key never gets a fresh bucket by colliding: a slot holding a
 *      bucket that has not refilled to its burst is shared by the keys
 *      that hash to it (they are limited together, more strictly), and is
 *      taken over only once it is full again (the state a fresh bucket
 *      would have).
 */
#ifndef OG_SERVE_RATELIMIT_H
#define OG_SERVE_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct og_ratelimit og_ratelimit;

/* A bucket's rate: per_minute tokens refill each minute, up to burst. */
typedef struct og_rate {
    int per_minute;
    int burst;
} og_rate;

/* A table of slots buckets; NULL on OOM. og_ratelimit_free(NULL) is a
 * no-op. */
og_ratelimit *og_ratelimit_new(unsigned slots);
void og_ratelimit_free(og_ratelimit *rl);

/* The bucket of (kind, key) at monotonic time now_us: with take, one
 * token is taken when there is one. Returns 0 when a token was there
 * (taken with take), else the whole seconds until there is one (>= 1, for
 * Retry-After). */
int og_ratelimit_use(og_ratelimit *rl, int kind, const char *key,
                     og_rate rate, int64_t now_us, bool take);

#endif /* OG_SERVE_RATELIMIT_H */
