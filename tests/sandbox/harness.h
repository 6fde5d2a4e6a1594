/*
 * harness.h — what the files of sandbox_test share: oncegate-sandbox over
 * real HTTP on loopback, one test per claim of docs/sandbox.md.
 *
 * Every test starts its own sandbox (OG_TEST_SANDBOX) with
 * `--listen 127.0.0.1:0 --state DIR/state.db --control` plus the flags the
 * claim needs, in a directory under one mkdtemp root; stdout goes to a
 * file (the ready line gives the port), stderr to a log file. The per-test
 * teardown stops whatever the test started with SIGTERM (and records any
 * exit other than 0), an atexit handler kills anything left, and
 * PR_SET_PDEATHSIG kills a sandbox whose test process died. The last tests
 * check that every SIGTERM ended in exit 0 and scan every log line for
 * JSON shape and for the API key.
 *
 * "Changes nothing" is checked through /_control/stats: credits_created is
 * the number of credit rows in the state file, create_requests counts the
 * create requests that passed validation (payouts_created and
 * payout_requests likewise for payouts).
 *
 * harness.c holds the sandboxes, HTTP and the two resources; the tests are
 * in the other files of tests/sandbox/, by topic; main.c lists them in the
 * order they run (cases.h declares them).
 */
#ifndef OG_TEST_SANDBOX_HARNESS_H
#define OG_TEST_SANDBOX_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
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
#include <sqlite3.h>

#include "support.h"

#define READY_MS 30000    /* a sandbox under ASan prints its ready line */
#define EXIT_MS 30000     /* a drained sandbox exits */
#define HTTP_MS 60000     /* one HTTP exchange */
#define RACERS 20
#define RACE_ROUNDS 5
#define BODY_MAX 65536    /* the sandbox's body cap */
#define PATHLEN 1024
#define API_KEY "sbx-test-key-6f1c2e0b9d4a4e7f8a3b5c1d2e9f0a7b"

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

/* An RFC 3339 UTC time offset_s seconds from now. */
void rfc3339_in(int offset_s, char out[40]);

/* An RFC 3339 UTC time with milliseconds, offset_ms from now. */
void rfc3339_ms(int64_t offset_ms, char out[40]);

const char *jstr(const json_t *o, const char *k);

#define assert_str(a, b)                                                       \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                 \
            fail_msg("%s: \"%s\" != \"%s\"", #a, a_ ? a_ : "(null)",           \
                     b_ ? b_ : "(null)");                                      \
    } while (0)

/* ===========================================================================
 * Sandboxes: real processes
 * ========================================================================= */
extern const char *g_bin;        /* OG_TEST_SANDBOX */
extern char g_tmp[256];          /* everything this run writes */
extern char g_later[40];         /* the default expires_at: one fixed value,
                                    as a retrying client sends */
extern char g_bad_exits[8192];   /* SIGTERMs that did not end in exit 0 */
extern char g_logs[256][PATHLEN];/* every log file, for the final scans */
extern size_t g_n_logs;

typedef struct sbx {
    bool used;
    pid_t pid;                   /* 0: not running */
    int port;
    char base[64];               /* http://127.0.0.1:PORT */
    char dir[512];               /* under g_tmp (256 bytes) */
    char state[PATHLEN];
    char out[PATHLEN], log[PATHLEN];
    char *argv[32];              /* argv[0] is the binary; owned */
    const char *api_key;         /* sent on every request when set */
} sbx;

/* A sandbox description in a fresh directory: the default flags, then the
 * NULL-terminated extra arguments. Not started. */
sbx *sbx_new(const char *arg, ...);

/* Ends sbx_new's argument list. */
#define END ((const char *)NULL)

/* Prints s's stdout and the end of its log to stderr. */
void sbx_print_output(const sbx *s);

/* Starts s and waits for its ready line; the test fails when it does not
 * come. Each start gets fresh output files. */
void sbx_start(sbx *s);

/* Sends sig and waits for the exit (SIGKILL after EXIT_MS); the exit
 * code. A SIGTERM that does not end in exit 0 is recorded. */
int sbx_stop(sbx *s, int sig);

/* A clean restart on the same state and flags (SIGTERM must exit 0). */
void sbx_restart(sbx *s);

/* Every test's teardown: stops (SIGTERM) and forgets every sandbox. */
int test_teardown(void **state);

/* Kills every sandbox still running (atexit, and the end of the run). */
void kill_all_at_exit(void);

/* ===========================================================================
 * HTTP
 * ========================================================================= */
typedef struct hres {
    long status;        /* 0: no HTTP answer (see cc) */
    CURLcode cc;
    char *body;
    size_t len;
    char *hdr;
    size_t hlen;
    json_t *json;       /* the body, when it is JSON */
    int64_t elapsed_ms;
} hres;

void hres_free(hres *r);

/* The value of response header name into out; false when absent. */
bool hdr_value(const hres *r, const char *name, char *out, size_t n);

/* One exchange on a fresh connection: method, path, extra headers
 * (NULL-terminated "Name: value"), a body (NULL: none). The sandbox's API
 * key is added when it has one. */
void http(const sbx *s, const char *method, const char *path,
          const char *const *headers, const char *body, size_t len,
          hres *out);

void get(const sbx *s, const char *path, hres *out);

extern const char *const json_ct[];

void post_json(const sbx *s, const char *path, const char *body, hres *out);

/* ===========================================================================
 * The two resources
 * ========================================================================= */

/* The two resources, as the tests see them (docs/sandbox.md): the path,
 * the target member, the lookup's array, the id prefix, the complete
 * status, the closed code, and the counters of /_control/stats. A claim
 * both make is ONE body taking an api, run once for each. */
typedef struct api {
    const char *path, *target, *list, *id_prefix, *completed, *closed_code;
    const char *c_rows, *c_requests, *c_replays, *c_mismatches, *c_lookups;
} api;

extern const api CREDITS;
extern const api PAYOUTS;

/* A named test of one claim for one resource; the claim's body is shared
 * by the resources and takes the api. (cases.h declares name.) */
#define CLAIM(name, call)                                                      \
    void name(void **state)                                                    \
    {                                                                          \
        (void)state;                                                           \
        call;                                                                  \
    }

/* The resource that is not a. */
const api *other_api(const api *a);

/* Every destination a test sent: none may appear in a log. */
extern char *g_dests[256];
extern size_t g_n_dests;

/* A create body for a's target (a new string). */
char *effect_body(const api *a, const char *target, const char *amount,
                  const char *currency, const char *reference,
                  const char *expires_at);

/* The credit create body (a new string). */
char *create_body(const char *account, const char *amount,
                  const char *reference, const char *expires_at);

/* POST a->path with Idempotency-Key key and the given parameters
 * (expires_at NULL: g_later). */
void create_in(const sbx *s, const api *a, const char *key,
               const char *target, const char *amount, const char *currency,
               const char *reference, const char *expires_at, hres *out);

/* create_in() in USD. */
void create_at(const sbx *s, const api *a, const char *key,
               const char *target, const char *amount,
               const char *reference, const char *expires_at, hres *out);

/* POST /v1/credits. */
void create(const sbx *s, const char *key, const char *account,
            const char *amount, const char *reference,
            const char *expires_at, hres *out);

/* An error answer: status and code. */
void assert_error(const hres *r, long status, const char *code);

/* A 201 of a's with every documented member, complete. */
void assert_effect(const api *a, const hres *r, const char *target,
                   const char *reference);

/* A 201 credit with every documented member. */
void assert_credit(const hres *r, const char *account, const char *reference);

/* One counter of /_control/stats. */
json_int_t counter(const sbx *s, const char *name);

/* GET a->path?param=value (URL-encoded): the records array (a new
 * reference), after checking the answer is 200. */
json_t *lookup_at(const sbx *s, const api *ap, const char *param,
                  const char *value);

/* The number of records a lookup finds. */
size_t lookup_at_n(const sbx *s, const api *ap, const char *param,
                   const char *value);

/* lookup_at and lookup_at_n of credits. */
json_t *lookup(const sbx *s, const char *param, const char *value);
size_t lookup_n(const sbx *s, const char *param, const char *value);

/* Arms fault for count creates (ms < 0: no "ms" member). */
void arm(const sbx *s, const char *fault, int count, int ms);

/* Counts credit rows in a state file directly (no sandbox involved). */
int state_credit_rows(const char *path);

/* ===========================================================================
 * Authorization codes (codes.c tests them; others mint and exchange)
 * ========================================================================= */

/* Every code minted and every token answered: none may appear in a log. */
extern char *g_secrets[512];
extern size_t g_n_secrets;

void secret_add(const char *s);

/* POST /_control/codes: a fresh code into out. */
void mint(const sbx *s, char out[64]);

/* POST /oauth/token with a form body as given (already encoded). */
void token_raw(const sbx *s, const char *form, hres *out);

/* The exchange of code, as oncegate sends it. */
void exchange(const sbx *s, const char *code, hres *out);

/* A 200 token response with every documented member. */
void assert_token(const hres *r);

/* ===========================================================================
 * Requests in the background; restarts on an older state file
 * ========================================================================= */

/* A request in the background: a create with key, or (exchange) the
 * exchange of the code in key. */
typedef struct bg_create {
    const sbx *s;
    const char *key;
    hres r;
    bool exchange;
} bg_create;

/* A thread's body: the request b describes, its answer in b->r. */
void *bg_create_main(void *arg);

/* Stops s, runs sql on its state file (a schema set back by hand, as an
 * older sandbox left it), and starts s again on that file. */
void restart_after(sbx *s, const char *sql);

#endif
