/*
 * harness.h — what the files of serve_test share: `oncegate serve` over
 * real HTTP on loopback, against SQLite (argv[1] "sqlite") or PostgreSQL
 * ("postgres": OG_TEST_PG_URL, a superuser URL to a throwaway cluster;
 * OG_TEST_REQUIRE_PG=1 turns its absence into a failure).
 *
 * Every server is a real process (OG_TEST_ONCEGATE) with stdout in a file
 * (the one ready line) and stderr in a log file; the last tests stop every
 * server, check that each SIGTERM ended in exit 0, and scan every line any
 * server wrote for every token, ticket, API key and private key the suite
 * used. Servers are always reaped: the per-test teardown stops what a test
 * started (also after a failed assertion), the group teardown and an atexit
 * handler stop the rest, and PR_SET_PDEATHSIG kills a server whose test
 * process died.
 *
 * A store outage is modelled without touching the PostgreSQL cluster that
 * other suites use at the same time: on SQLite by an exclusive write lock
 * held on the database file (admissions wait out the busy deadline); on
 * PostgreSQL by a TCP relay between the servers and the cluster, which the
 * test cuts (every connection dropped, new ones closed at once) and
 * restores. The cluster itself is never stopped, so this suite may run in
 * parallel with the others.
 *
 * Each race and restart claim gets its own store (a fresh SQLite file or a
 * fresh PostgreSQL database) and its own pair of instances.
 *
 * The harness is three files: harness.c (the suite's state, servers, the
 * outage relay, sites, the group fixtures), http.c (HTTP exchanges, grants,
 * admissions, tickets, tokens the tests sign, races) and sandbox.c (a
 * server executing against its own oncegate-sandbox). The tests are in the
 * other files of tests/serve/, by topic; main.c lists them in the order
 * they run (cases.h declares them).
 */
#ifndef OG_TEST_SERVE_HARNESS_H
#define OG_TEST_SERVE_HARNESS_H

#include <ctype.h>
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
#include <libpq-fe.h>
#include <sodium.h>
#include <sqlite3.h>

#include "oncegate/oncegate.h"
#include "support.h"

/* 1 when the library carries the fault points of lib/core/fault.c
 * (tests/meson.build, from -Dfault_injection). */
#ifndef OG_TEST_FAULT_INJECTION
#define OG_TEST_FAULT_INJECTION 0
#endif

#define ISSUER "serve-test-issuer"
#define AUDIENCE "serve-test"
#define ACTION "credit.apply"
#define ACCOUNT "A-1187"
#define AMOUNT "250.00"
#define CURRENCY "USD"

#define READY_MS 30000   /* a server under ASan prints its ready line */
#define EXIT_MS 30000    /* a drained server exits */
#define HTTP_MS 60000    /* one HTTP exchange */
#define RACERS 50
#define RACE_ROUNDS 3
#define MAX_BODY 16384   /* max_body_bytes of every configuration here */
#define RETRY_AFTER 1    /* retry_after_seconds */
#define OUTAGE_STORE_TIMEOUT_MS 2000 /* 503s come quickly */
#define LOADED_STORE_TIMEOUT_MS 15000 /* the full suite loads the machine:
                                          a race must not time out */
#define PATHLEN 4096

/* ===========================================================================
 * Small helpers (harness.c)
 * ========================================================================= */
void uuid4(char out[OG_UUID_LEN + 1]);

/* An API key as an operator would make one: 256 random bits. */
#define API_KEY_LEN 80
void api_key_new(char out[API_KEY_LEN]);

void sha256_hex(const char *s, char out[65]);

/* Written beside and renamed: a reload never sees half a file. 0 or -1. */
int write_file(const char *path, const char *text);

/* Copies the file from into directory dir (a new file, 0600). 0 or -1. */
int copy_file(const char *from, const char *dir);

const char *jstr(const json_t *o, const char *k);

#define assert_str(a, b)                                                       \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                 \
            fail_msg("%s: \"%s\" != \"%s\"", #a, a_ ? a_ : "(null)",           \
                     b_ ? b_ : "(null)");                                      \
    } while (0)

/* ===========================================================================
 * Suite state (harness.c)
 * ========================================================================= */
extern bool g_pg;                 /* the backend under test */
extern char g_tmp[256];           /* everything this run writes */
extern const char *g_bin;         /* the oncegate binary */
extern const char *g_src;         /* the source tree */
extern og_signer *g_signer;       /* the issuer's private key, for tokens
                                     the test signs itself */
extern char g_kid[OG_KID_MAX + 1];
extern char g_pub_path[PATHLEN], g_priv_path[PATHLEN];

enum {
    P_ISSUER, P_AGENT, P_AGENT2, P_ENFORCER, P_REVOKER, P_OPERATOR,
    P_PAYOUT_ADMIN, P_CLERK,
    P_APPROVER, P_APPROVER_LOW, P_CLERK_APPROVER,
    P_COUNT
};
enum {
    R_ISSUER = 1,
    R_AGENT = 2,
    R_ENFORCER = 4,
    R_REVOKER = 8,
    R_OPERATOR = 16,
    R_PAYOUT_ADMIN = 32,
    R_CLERK = 64,
    R_APPROVER = 128,
};
/* The approvers' approval limits: 10,000.00 (P_APPROVER) and 1,000.00
 * (P_APPROVER_LOW); P_CLERK_APPROVER is a clerk and an approver, with the
 * clerk's limit. */
#define APPROVER_APPROVAL_LIMIT 1000000
#define APPROVER_LOW_APPROVAL_LIMIT 100000
/* The clerk's approval limit (approval_limit_minor): 5,000.00 at scale 2. */
#define CLERK_APPROVAL_LIMIT 500000
struct principal {
    const char *id;
    const char *role;
    unsigned bit;
    char key[API_KEY_LEN];
    char hash[65];
};
extern struct principal g_p[P_COUNT];
#define KEY(p) (g_p[p].key)

/* Prepares the run for backend ("sqlite" or "postgres"): the binaries from
 * the environment, the temp directory, the principals' keys, the issuer's
 * key pair. 0; 77 (skip) when PostgreSQL is not configured and
 * OG_TEST_REQUIRE_PG is not 1; 1 on a failure. */
int suite_setup(const char *backend);

/* Ends the run that returned rc: every server killed, and the temp
 * directory removed when rc is 0 or no server was started, else kept (its
 * server logs) for inspection and the process ends here. Returns rc. */
int suite_end(int rc);

/* ---------------------------------------------------------------------------
 * Every secret the suite used, for the log scan.
 * ------------------------------------------------------------------------- */
extern char **g_secrets;
extern size_t g_n_secrets;

void secret_add(const char *s);

/* A token, and separately its payload and signature segments: a line that
 * carries either is a leak even when the whole token is not in it. */
void secret_add_token(const char *tok);

/* The private part "d" of a JWK file. */
void secret_add_private_jwk(const char *path);

/* ---------------------------------------------------------------------------
 * Every file a server wrote, for the log scan.
 * ------------------------------------------------------------------------- */
enum { OUT_LOG_JSON, OUT_LOG_TEXT, OUT_STDOUT };
struct outfile {
    char path[PATHLEN];
    int kind; /* OUT_LOG_JSON: every line must be a JSON object */
};
extern struct outfile g_files[512];
extern size_t g_n_files;

void outfile_add(const char *path, int kind);

/* Servers stopped by SIGTERM that did not exit 0. */
extern char g_bad_exits[8192];

/* ===========================================================================
 * Servers (harness.c)
 * ========================================================================= */
typedef struct srv {
    bool used;
    bool group;               /* lives for the whole group */
    pid_t pid;                /* 0: not running */
    int port;
    char base[64];            /* http://127.0.0.1:PORT */
    char out_path[PATHLEN];   /* stdout of the current run */
    char log_path[PATHLEN];   /* stderr of the current run */
    char *argv[32];           /* argv[0] is the binary; owned */
    char *env[4];             /* NAME=VALUE added to the environment; owned */
    int log_kind;
    int last_status;          /* wait status once it exited */
} srv;

/* How many times a server was started: names each run's output files. */
extern unsigned g_srv_seq;

/* A server description: the arguments after the binary, NULL-terminated.
 * Not started. */
srv *srv_new(int log_kind, const char *arg, ...);

/* Appends one argument to s's (not yet started) command line. */
void srv_add_arg(srv *s, const char *arg);

/* Adds NAME=VALUE to the environment s starts with (only s's). */
void srv_setenv(srv *s, const char *kv);

/* Starts s with fresh output files; does not wait. 0 or -1. */
int srv_exec(srv *s);

/* Prints s's stdout and the end of its log to stderr. */
void srv_print_log(const srv *s);

#define READY_PREFIX "oncegate: listening on http://"

/* Waits for the ready line. 0 ready; -1 the process exited (last_status
 * set); -2 timeout. */
int srv_wait_ready(srv *s, int timeout_ms);

/* The same for a process whose ready line begins with prefix (the
 * sandbox's, sandbox.c). */
int srv_wait_ready_as(srv *s, const char *prefix, int timeout_ms);

/* Starts s and waits until it serves. 0, or -1 with its output printed. */
int srv_start(srv *s);

/* Sends sig and waits for the exit; SIGKILL after timeout_ms. Returns the
 * exit code (128 + signal when killed), -1 when it had to be killed. A
 * SIGTERM that does not end in exit 0 is recorded for the final check. */
int srv_stop(srv *s, int sig, int timeout_ms);

/* Stops with SIGTERM (must exit 0) and starts again with the same
 * arguments. 0 or -1. */
int srv_restart(srv *s);

/* Stops (SIGTERM) and forgets every server a test started, and with
 * include_group the group's too. */
void srv_stop_all(bool include_group);

/* Kills every server still running (atexit, and the end of the run). */
void kill_all_at_exit(void);

/* Polls the server's log for a line containing needle. */
bool log_wait_for(const srv *s, const char *needle, int timeout_ms);

/* The first request event s logged whose member key is value and which
 * has the member need (NULL: any), as a new reference; NULL after
 * timeout_ms. */
json_t *log_request_find(const srv *s, const char *key, const char *value,
                         const char *need, int timeout_ms);

/* The request event logged for correlation id cid (a new reference), or
 * NULL after timeout_ms. */
json_t *log_request_event(const srv *s, const char *cid, int timeout_ms);

/* ===========================================================================
 * PostgreSQL, and the outage relay (harness.c)
 * ========================================================================= */

/* The cluster's host and port, from OG_TEST_PG_URL. */
extern char g_pg_host[256];
extern int g_pg_port;

/* Runs one statement as the cluster's superuser. 0 or -1. */
int pg_admin(const char *sql);

/* A TCP relay 127.0.0.1:port -> the cluster. Cut: every relayed connection
 * is closed and new ones are closed as soon as they are accepted — what a
 * client sees of a stopped server. Muted: what clients send still reaches
 * the server, which runs and commits it, but every byte the server sends
 * back is discarded — a connection that fails after the commit and before
 * the client reads the result. */
typedef struct relay relay;

/* Sets the relay's state (cut or not, muted or not, ending) and wakes it. */
void relay_mode(relay *r, bool down, bool quit, bool mute);

/* relay_mode, not muted. */
void relay_set(relay *r, bool down, bool quit);

/* ===========================================================================
 * Sites: one store, one configuration file (harness.c)
 * ========================================================================= */
typedef struct site {
    bool used, group;
    char dir[PATHLEN];
    char db[64];               /* PostgreSQL database; "" for SQLite */
    char direct_url[1024];     /* the store, reached directly */
    char url[1024];            /* the store as servers reach it */
    char config[PATHLEN];
    relay *relay;              /* PostgreSQL behind a relay, else NULL */
    json_t *conf;              /* what config holds */
} site;

/* Writes st->conf to st->config (beside and renamed). 0 or -1. */
int site_write(site *st);

/* Sets timings.NAME in the site's configuration (not yet written). */
void site_timing(site *st, const char *name, json_int_t ms);

/* A fresh store (migrated), a configuration file for it, no server.
 * with_relay: PostgreSQL servers reach the store through a relay the test
 * can cut. store_timeout_ms 0 keeps the default. migrate false leaves the
 * store empty. NULL on failure. */
site *site_new(const char *name, bool with_relay, int store_timeout_ms,
               bool migrate);

/* A server on st's configuration, listening on a free loopback port. */
srv *site_server(const site *st);

/* Starts a server on conf and expects it to exit without serving. Returns
 * the exit code; *log gets its stderr (malloc'd). */
int run_refused(site *st, char **log);

/* ---------------------------------------------------------------------------
 * Holding the store's write lock from outside (SQLite: an exclusive
 * transaction on the file; PostgreSQL: the admission tables locked).
 * Released by store_unlock() and by every test's teardown.
 * ------------------------------------------------------------------------- */
struct storelock {
    sqlite3 *db;
    PGconn *pg;
};
extern struct storelock g_lock;

int store_lock(const site *st);
void store_unlock(void);

/* The store stopped while serving: st's relay cut (PostgreSQL) or its
 * write lock held (SQLite); store_up() ends it. */
void store_down(site *st);
void store_up(site *st);

/* ---------------------------------------------------------------------------
 * Dev mode
 * ------------------------------------------------------------------------- */
extern const char *const g_dev_roles[9];

/* A dev server on dir; in the PostgreSQL run its store is a fresh database
 * (--store), else the data directory's SQLite file. */
srv *dev_server(const char *dir, const site *pgsite);

/* Reads DIR/dev-credentials.json: checks its mode and shape, registers the
 * keys as secrets, returns the text (malloc'd) and the parsed document. */
char *dev_credentials(const char *dir, json_t **doc);

/* The API key of the dev principal with role in the credentials doc. */
const char *dev_key(json_t *doc, const char *role);

/* ===========================================================================
 * Group state: one store with two instances A and B for the stateless
 * claims; each race and restart claim makes its own (harness.c).
 * ========================================================================= */
extern site *g_main;
extern srv *g_a, *g_b;

int group_setup(void **state);
int group_teardown(void **state);

/* Whatever a test started: servers stopped, execution threads joined,
 * sites closed, locks released — also after a failed assertion. */
int test_teardown(void **state);

/* A fresh store with its own instances A and B: *state of a test with
 * pair_setup. */
typedef struct pair {
    site *st;
    srv *a, *b;
} pair;

int pair_setup(void **state);

/* ===========================================================================
 * HTTP (http.c)
 * ========================================================================= */
typedef struct hres {
    long status;              /* 0: no HTTP answer (see cc) */
    CURLcode cc;
    char *body;
    size_t len;
    char *hdr;
    size_t hlen;
    json_t *json;             /* the body when it is JSON */
} hres;

typedef struct hreq {
    const char *method;
    const char *base;         /* http://127.0.0.1:PORT */
    const char *path;
    const char *key;          /* Authorization: Bearer KEY */
    const char *auth;         /* a whole Authorization value instead */
    const char *ctype;        /* Content-Type; NULL: none */
    const char *body;
    size_t body_len;
    bool chunked;             /* send body with chunked encoding */
    const char *request_id;   /* X-Request-Id */
} hreq;

/* Every answer must carry X-Request-Id and every error body an error code
 * and a message (docs/http.md, "Requests and errors"); violations are
 * collected here by http_do() and checked by one test at the end. */
extern char g_shape_bad[8192];
extern unsigned g_shape_checked;

void hres_free(hres *r);

/* One exchange with a server, its answer's shape checked (above). */
void http_do(const hreq *q, hres *r);

/* The value of the last header called name, into out; false when absent. */
bool hdr_value(const hres *r, const char *name, char *out, size_t n);

/* Prints an answer for a failing assertion at line. */
void dump(const char *what, const hres *r, int line);

#define assert_http(r, code)                                                   \
    do {                                                                       \
        if ((r)->status != (code)) {                                           \
            dump(#r, (r), __LINE__);                                           \
            fail_msg("expected HTTP %d, got %ld", (int)(code), (r)->status);   \
        }                                                                      \
    } while (0)

#define assert_error(r, code, err)                                             \
    do {                                                                       \
        const char *e_ = jstr((r)->json, "error");                             \
        if ((r)->status != (code) || !e_ || strcmp(e_, (err)) != 0) {          \
            dump(#r, (r), __LINE__);                                           \
            fail_msg("expected HTTP %d %s, got %ld %s", (int)(code), (err),    \
                     (r)->status, e_ ? e_ : "(no error member)");              \
        }                                                                      \
    } while (0)

void req(hres *r, const char *method, const srv *s, const char *path,
         const char *key, const char *ctype, const char *body);

/* POSTs body (stolen; NULL sends {}) as application/json. */
void post(hres *r, const srv *s, const char *path, const char *key,
          json_t *body);

void get(hres *r, const srv *s, const char *path, const char *key);

/* One exchange with the sandbox, outside check_shape (the sandbox sends no
 * X-Request-Id: its answers are not the server's). */
void sbx_http(hres *r, const srv *x, const char *method, const char *path,
              const char *key, const char *body);

/* A 503 retry_later with Retry-After: RETRY_AFTER (line: the caller's). */
void assert_retry_later(const hres *r, int line);

/* POSTs until the answer is not 503 (each 503 must be retry_later), for at
 * most 20 s; returns the number of 503s. */
int post_patient(hres *r, const srv *s, const char *path, const char *key,
                 json_t *body);

/* The value of the sample whose name-and-labels is exactly `series`; -1
 * when absent. */
double metric_value(const char *text, const char *series);

/* The integer member k of o; the test fails when it is not one. */
json_int_t jint(const json_t *o, const char *k);

/* ===========================================================================
 * Grants, admissions, tickets (http.c)
 * ========================================================================= */
typedef struct grant {
    char token[OG_TOKEN_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char family[OG_ID_MAX + 1];
    char expires_at[64];
} grant;

/* The body of POST /v1/grants (a new reference). */
json_t *grant_request(const char *subject, const char *family, int ttl);

/* Issues a grant through POST /v1/grants on s. */
void issue_grant_ex(const srv *s, grant *g, const char *subject,
                    const char *family);

/* issue_grant_ex for agent-1, no family. */
void issue_grant(const srv *s, grant *g);

/* The body of POST /v1/operations (a new reference). */
json_t *admit_body(const char *op, const char *token);

void admit(hres *r, const srv *s, const char *key, const char *op,
           const char *token);

/* admit as agent-1 with X-Request-Id rid (its log line is found by it). */
void admit_rid(hres *r, const srv *s, const char *op, const char *token,
               const char *rid);

/* The grant admits operation op now: 202 admitted/admitted. */
void assert_admits(const srv *s, const char *op, const char *token);

/* A fresh operation with this grant is refused: 409 grant_not_available. */
void assert_refused(const srv *s, const char *token);

void consume(hres *r, const srv *s, const char *token);

typedef struct ticket {
    char ticket[128];
    char family[OG_ID_MAX + 1];
} ticket;

/* POST /v1/tickets: a ticket of a new family. */
void ticket_new(const srv *s, ticket *t);

void rotate(hres *r, const srv *s, const char *tk);

/* ---------------------------------------------------------------------------
 * Tokens the test makes itself.
 * ------------------------------------------------------------------------- */

/* The claims of a valid grant of the issuer: agent-1, AUDIENCE, ACTION,
 * ACCOUNT, AMOUNT, CURRENCY, 15 minutes from now; jti a fresh grant id. */
void claims_default(og_grant_claims *c, char jti[OG_GRANT_ID_LEN + 1]);

/* Signs c with the issuer's key; malloc'd. */
char *sign(const og_grant_claims *c);

void b64url(const void *bin, size_t n, char *out, size_t outcap);

/* Splits a compact JWS into its three segments (each OG_TOKEN_MAX + 1). */
void jws_split(const char *tok, char *h, char *p, char *s);

json_t *b64url_json(const char *seg);

void json_b64url(const json_t *j, char *out, size_t outcap);

/* Admitting op with tok as the principal with key is refused on s: 403
 * grant_not_valid with this reason (line: the caller's). */
void expect_not_valid_on(const srv *s, const char *tok, const char *op,
                         const char *key, const char *reason, int line);

#define assert_not_valid(tok, op, key, reason)                                 \
    expect_not_valid_on(g_a, (tok), (op), (key), (reason), __LINE__)
#define assert_not_valid_on(s, tok, op, reason)                                \
    expect_not_valid_on((s), (tok), (op), KEY(P_AGENT), (reason), __LINE__)

/* ---------------------------------------------------------------------------
 * Races: many clients at once.
 * ------------------------------------------------------------------------- */
typedef struct racer {
    pthread_barrier_t *start;
    const char *base;
    const char *path;
    const char *key;
    char *body;              /* owned */
    char op[OG_UUID_LEN + 1];
    hres r;
} racer;

/* n (at most RACERS) concurrent POSTs of path, alternating between a and
 * b; body_for makes racer i's body. Results in rs[i].r. */
void race(racer *rs, int n, const srv *a, const srv *b, const char *path,
          const char *key, char *(*body_for)(racer *, const void *),
          const void *arg);

void race_free(racer *rs, int n);

/* Prints every racer's answer of one round. */
void race_report(const char *what, int round, racer *rs, int n);

/* ===========================================================================
 * Execution against the sandbox provider (sandbox.c, docs/sandbox.md): a
 * test starts its own oncegate-sandbox (fresh --state, --control) and a
 * server whose provider.url names it, and checks both the sandbox's
 * counters and the operation the store holds.
 * ========================================================================= */
extern const char *g_sbx_bin;     /* OG_TEST_SANDBOX */

typedef struct xenv {
    site *st;
    srv *s;                       /* the oncegate server */
    srv *sbx;                     /* the sandbox */
    char sbx_key[API_KEY_LEN];    /* "" without --api-key-file */
} xenv;

/* The sandbox's API key, NULL without one. */
const char *sbx_key(const xenv *x);

/* One counter of the sandbox's GET /_control/stats. */
json_int_t sbx_stat(const xenv *x, const char *name);

#define assert_sbx_stat(x, name, want)                                         \
    do {                                                                       \
        json_int_t got_ = sbx_stat((x), (name));                               \
        if (got_ != (json_int_t)(want))                                        \
            fail_msg("sandbox %s: expected %lld, got %lld", (name),            \
                     (long long)(want), (long long)got_);                      \
    } while (0)

/* Arms one fault; ms < 0 sends none. */
void sbx_arm(const xenv *x, const char *fault, int ms);

/* Polls the sandbox until counter name reaches at least min (20 s). */
void sbx_wait_stat(const xenv *x, const char *name, json_int_t min);

/* The path of providers/sandbox-credits.v1.json. */
void table_path(char *out, size_t n);

/* A fresh store, a sandbox on a fresh state file with --control, and a
 * server on the store whose provider is that sandbox. provider_timeout_ms 0
 * keeps the default. with_key: the sandbox requires an API key, which the
 * server reads from provider.api_key_file. */
void xenv_start(xenv *x, const char *name, bool with_relay,
                int store_timeout_ms, json_int_t provider_timeout_ms,
                bool with_key);

/* xenv_start without starting the server, so a test can change the
 * configuration first (then site_write + srv_start). */
void xenv_prepare(xenv *x, const char *name, bool with_relay,
                  int store_timeout_ms, json_int_t provider_timeout_ms,
                  bool with_key);

/* xenv_prepare with more sandbox arguments (a NULL-terminated list; NULL:
 * none), such as --no-atomic-same-key. */
void xenv_prepare_sbx(xenv *x, const char *name, bool with_relay,
                      int store_timeout_ms, json_int_t provider_timeout_ms,
                      bool with_key, const char *const *sbx_args);

/* Points x's configuration (not yet written) at a copy of the provider
 * table that says atomic_same_key false: recovery that finds nothing by
 * lookup never resubmits. */
void xenv_table_nonatomic(xenv *x);

/* Short execution timings (ms) for st, written by the next site_write:
 * store_timeout S and provider_timeout P, a lease margin of 500, the
 * shortest execution lease T5 allows (3 S + P + margin; T3 and T4 follow),
 * the shortest recovery lease T6 allows (2 P + S), recovery within a second
 * of a lease's end (a pass every half second), and a cleanup margin T9
 * accepts (S < 10 s). The submission window keeps its default (T7, T8). */
void site_exec_timings(site *st, json_int_t S, json_int_t P);

/* A grant for subject (an agent's principal id) binding account. */
void issue_grant_for(const srv *s, grant *g, const char *subject,
                     const char *account);

/* A grant for agent-1 binding account. */
void issue_grant_account(const srv *s, grant *g, const char *account);

/* The body of an execution of op (a new reference). */
json_t *exec_body(const char *op, const char *token, const char *account);

/* POST /v1/operations as the agent whose API key is key. */
void execute_as(hres *r, const srv *s, const char *key, const char *op,
                const char *token, const char *account);

/* execute_as as agent-1. */
void execute(hres *r, const srv *s, const char *op, const char *token,
             const char *account);

/* GET /v1/operations/{op} as its caller: 200, status want; the body kept
 * in *r for further checks. */
void assert_op_status(hres *r, const srv *s, const char *op,
                      const char *want);

/* A 202 pending answer with status want and outcome. */
void assert_pending(const hres *r, const char *op, const char *status,
                    const char *outcome, int line);

/* Polls the caller's GET until the operation's status is want (30 s). */
void wait_op_status(const srv *s, const char *op, const char *want);

/* The history's entries, checked for shape; returns the array (borrowed). */
json_t *history_of(const hres *r, bool evidence_allowed, int line);

/* Runs one statement on st's store directly (behind the servers' backs):
 * the tests age operations and pin leases with it. */
void store_sql(const site *st, const char *sql);

/* Moves column (a time) of operation op by seconds (negative: earlier). */
void op_shift_time(const xenv *x, const char *op, const char *column,
                   long seconds);

/* An execution in its own thread (heap-allocated, so a failed assertion
 * that leaves the test's frame leaves nothing the thread writes to; the
 * per-test teardown joins it once the servers are stopped). */
typedef struct xinflight {
    const srv *s;
    char op[OG_UUID_LEN + 1];
    char token[OG_TOKEN_MAX + 1];
    hres r;                   /* the answer, after xinflight_join */
    int64_t done_ms;
    pthread_t th;
} xinflight;

/* Starts POST /v1/operations for op with token (account ACCOUNT) on s. */
xinflight *xinflight_start(const srv *s, const char *op, const char *token);

/* Waits for f's answer (then in f->r). */
void xinflight_join(xinflight *f);

void xinflight_free(xinflight *f);

/* Joins and frees every execution thread a failed test left behind. */
void xinflight_reap(void);

#endif
