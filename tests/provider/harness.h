/*
 * harness.h — what the files of provider_test share: the provider client
 * (lib/provider/client.c) against the REAL sandbox (oncegate-sandbox,
 * OG_TEST_SANDBOX), classified by providers/sandbox-credits.v1.json and
 * providers/sandbox-payouts.v1.json.
 *
 * Each test starts its own sandbox: `--listen 127.0.0.1:0 --state DIR/s.db
 * --control`, reading `oncegate-sandbox: listening on http://HOST:PORT`
 * (tests/support/proc.c). OG_TEST_SOURCE_ROOT: the repository root (for
 * the tables).
 *
 * harness.c holds the sandbox process, plain HTTP, the fixtures and the
 * two APIs as the claims use them; the tests are in the other files of
 * tests/provider/, by topic, and main.c lists them in the order they run
 * (cases.h declares them). record.c is the recording mode.
 */
#ifndef OG_TEST_PROVIDER_HARNESS_H
#define OG_TEST_PROVIDER_HARNESS_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "oncegate/provider.h"
#include "support.h"

#define TABLE_PATH "providers/sandbox-credits.v1.json"
#define PAYOUTS_TABLE_PATH "providers/sandbox-payouts.v1.json"
#define CALL_US (INT64_C(10) * 1000000) /* a call that should not time out */
#define API_KEY "sbx-test-key-7f3a9c"

extern og_provider_table *g_table;          /* credits */
extern og_provider_table *g_payouts_table;  /* payouts */
/* The expires_at every create of this run sends: fixed, because it is
 * part of the request the sandbox compares under a key (a retry computing
 * "now + 1 h" afresh would be a different request: idempotency_mismatch). */
extern int64_t g_expires_us;

/* Microseconds on the monotonic clock, and on the wall clock. */
int64_t mono_us(void);
int64_t wall_us(void);

/* ===========================================================================
 * The sandbox process
 * ========================================================================= */
typedef struct sbx {
    pid_t pid;
    char dir[PATH_MAX];   /* scratch: s.db, stdout, stderr, key */
    char url[128];        /* http://127.0.0.1:PORT */
} sbx;

/* Starts the sandbox on dir's state with extra flags (NULL-terminated).
 * Returns 0 or -1 (message on stderr). */
int sbx_start(sbx *s, const char *const *extra);

/* Stops the sandbox (SIGTERM, then SIGKILL after 10 s); returns its wait
 * status, or -1 when it was not running. */
int sbx_stop(sbx *s);

/* Waits for a sandbox that is exiting by itself; its wait status. */
int sbx_reap(sbx *s);

/* A sandbox in a fresh /tmp directory, started with extra flags. 0 or -1. */
int sbx_new(sbx *s, const char *const *extra);

/* Stops the sandbox and removes its directory. */
void sbx_free(sbx *s);

/* ===========================================================================
 * Plain HTTP (control calls and the recorder): a raw libcurl exchange.
 * ========================================================================= */
typedef struct raw {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
    char content_type[128], retry_after[64], replayed[16];
} raw;

/* One request. headers: NULL-terminated list of "Name: value". body NULL:
 * no body. */
raw http(const char *method, const char *url, const char *const *headers,
         const char *body, long timeout_ms);

/* POST /_control/faults {"fault":f,"count":1[,"ms":ms]}. */
void arm(const sbx *s, const char *fault, int ms);

/* One counter of GET /_control/stats. */
long long stat_of(const sbx *s, const char *name);

/* ===========================================================================
 * Fixtures
 * ========================================================================= */
typedef struct fx {
    sbx s;
    og_provider *p;
} fx;

/* The group's: both tables loaded, libcurl initialized, and freed. */
int load_table(void **state);
int free_table(void **state);

/* A sandbox with extra flags and a client classifying by table t. */
int fx_up_table(void **state, const char *const *extra,
                const og_provider_table *t);

/* A sandbox with extra flags and a credits client. */
int fx_up_with(void **state, const char *const *extra);

/* async- credits (dst_async_ payouts) complete after 300 ms, not 1 s. */
extern const char *const async_fast[];

/* The tests' setups: credits, credits completing async- after 300 ms, a
 * client of the payouts API (providers/sandbox-payouts.v1.json), the same
 * completing dst_async_ after 300 ms; and the teardown of every one. */
int fx_up(void **state);
int fx_up_async(void **state);
int fx_up_payouts(void **state);
int fx_up_payouts_async(void **state);
int fx_down(void **state);

/* One API of the client as the claims use it: its create call, a lookup
 * by reference, its id prefix and test targets, and the sandbox's
 * counters. A claim both APIs make is ONE body taking a capi. */
typedef struct capi {
    int (*create)(og_provider *, const char *, const char *, const char *,
                  const char *, const char *, int64_t, int64_t,
                  og_provider_outcome *);
    bool payouts;            /* lookups verify the terms of open */
    const char *id_prefix, *open, *closed, *busy, *async, *closed_code;
    const char *c_rows, *c_replays, *c_requests;
} capi;

extern const capi CREDITS;
extern const capi PAYOUTS;

/* A create of a for key on target (amount 25.00 EUR, reference = key,
 * expiry g_expires_us), bounded by timeout_us. Returns the call's rc; the
 * outcome never carries the target. */
int create_in(const capi *a, og_provider *p, const char *key,
              const char *target, int64_t timeout_us,
              og_provider_outcome *o);

/* A credit create: create_in(&CREDITS, ...). */
int create(og_provider *p, const char *key, const char *account,
           int64_t timeout_us, og_provider_outcome *o);

/* A lookup of a by reference; a payout lookup verifies the terms a
 * create_in of target sent. */
int lookup_in(const capi *a, og_provider *p, const char *reference,
              const char *target, og_provider_outcome *o);

/* A named test of one claim for one API: the body is shared. (cases.h
 * declares name.) */
#define CLAIM(name, call)                                                      \
    void name(void **state)                                                    \
    {                                                                          \
        call;                                                                  \
    }

void assert_outcome(const og_provider_outcome *o, og_outcome_class cls,
                    const char *reason);

/* A lookup of a's reference (terms: target) that must find a final
 * record; its id. */
void must_find_in(fx *f, const capi *a, const char *reference,
                  const char *target, char id[OG_PROVIDER_REF_MAX + 1]);

/* A lookup of a credit's reference that must find it final; its id. */
void must_find(fx *f, const char *reference,
               char id[OG_PROVIDER_REF_MAX + 1]);

/* ===========================================================================
 * Recording mode (record.c)
 * ========================================================================= */

/* Records the vectors of API name (credits, payouts) into path:
 * `provider_test --record credits|payouts PATH`. The exit code. */
int record(const char *name, const char *path);

#endif
