/*
 * ratelimit.c — token buckets per key in a fixed table (RL1, RL2 in
 * ratelimit.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

#define KEY_MAX 128

typedef struct bucket {
    int kind;              /* -1: empty slot */
    char key[KEY_MAX + 1];
    double tokens;
    int64_t at_us;         /* when tokens was last brought up to date */
} bucket;

struct og_ratelimit {
    pthread_mutex_t mu;
    unsigned n;
    bucket *b;
};

og_ratelimit *og_ratelimit_new(unsigned slots)
{
    og_ratelimit *rl = calloc(1, sizeof *rl);

    if (!rl || slots == 0 || !(rl->b = calloc(slots, sizeof *rl->b))) {
        free(rl);
        return NULL;
    }
    rl->n = slots;
    for (unsigned i = 0; i < slots; i++)
        rl->b[i].kind = -1;
    pthread_mutex_init(&rl->mu, NULL);
    return rl;
}

void og_ratelimit_free(og_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_mutex_destroy(&rl->mu);
    free(rl->b);
    free(rl);
}

/* FNV-1a over kind and key. */
static uint32_t slot_hash(int kind, const char *key)
{
    uint32_t h = 2166136261u ^ (uint32_t)kind;

    for (; *key; key++)
        h = (h ^ (unsigned char)*key) * 16777619u;
    return h;
}

static void refill(bucket *b, og_rate rate, int64_t now_us)
{
    if (now_us > b->at_us) {
        b->tokens += (double)(now_us - b->at_us) * rate.per_minute / 60e6;
        if (b->tokens > rate.burst)
            b->tokens = rate.burst;
        b->at_us = now_us;
    }
}

int og_ratelimit_use(og_ratelimit *rl, int kind, const char *key,
                     og_rate rate, int64_t now_us, bool take)
{
    bucket *b;
    int wait = 0;

    if (!rl || rate.per_minute <= 0 || rate.burst <= 0)
        return 0;
    pthread_mutex_lock(&rl->mu);
    b = &rl->b[slot_hash(kind, key) % rl->n];
    if (b->kind != kind || strncmp(b->key, key, KEY_MAX) != 0) {
        if (b->kind != -1)
            refill(b, rate, now_us);
        /* RL2: only an empty or a full slot is taken over; a draining one
         * is shared. */
        if (b->kind == -1 || b->tokens >= rate.burst) {
            b->kind = kind;
            snprintf(b->key, sizeof b->key, "%s", key);
            b->tokens = rate.burst;
            b->at_us = now_us;
        }
    }
    refill(b, rate, now_us);
    if (b->tokens >= 1.0) {
        if (take)
            b->tokens -= 1.0;
    } else {
        double need_s = (1.0 - b->tokens) * 60.0 / rate.per_minute;

        wait = (int)need_s; /* rounded up, at least 1 */
        if (wait < need_s)
            wait++;
        if (wait < 1)
            wait = 1;
    }
    pthread_mutex_unlock(&rl->mu);
    return wait;
}
