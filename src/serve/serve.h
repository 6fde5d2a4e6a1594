/*
 * serve.h — the internal interfaces of `oncegate serve`, the HTTP service.
 *
 * The service is a thin I/O edge over the library (include/oncegate/): it
 * authenticates the caller, parses and bounds the request, calls ONE library
 * function (og_admit, og_consume, ...) and maps the outcome to HTTP. All
 * single-use decisions stay in the store; nothing here caches a verdict.
 *
 *   config.c    the configuration table (name, type, bounds, default, doc)
 *               and docs/config.md, generated from it (config_table.h)
 *   config_load.c  the JSON config loader driven by the table, the
 *               setters and the checks across keys
 *   dev.c       `serve --dev`: data directory, issuer keys, one principal
 *               per role, dev-credentials.json, the ready banner
 *   auth.c      principals: hashed API keys, constant-time lookup, roles;
 *               the reloadable snapshot of keys and principals
 *   log.c       one JSON object per line; never a token, key or credential
 *   metrics.c   counters and histograms, Prometheus text format
 *   wire.c      HTTP/1.1 request framing (RFC 9112), a pure core
 *   edge.c      connections: a thread each, early refusals, deadlines,
 *               caps (wire.h, edge.c: why not libmicrohttpd)
 *   http.c      the request core: routing, authentication, rate limits
 *               (ratelimit.c), body cap, content type, correlation ids,
 *               the answer's bytes
 *   handlers.c  one function per endpoint
 *   janitor.c   the retention passes: cleanup (refusal records) and
 *               archiving (operation records)
 *   server.c    `oncegate serve`: arguments, startup checks, signals
 *               (SIGTERM drains, SIGHUP reloads keys and principals), the
 *               background loops (recovery, cleanup, archiving) and the
 *               commands that run one of them on its own (`recover`,
 *               `cleanup`, `archive-operations`)
 *   commands.h  what src/cli/ may see of all this: the subcommands above
 *               and the sandbox's path
 *
 * Conventions as in the library: 0 or a negative OG_E* code, or a documented
 * non-negative result; out-parameters written only on success; x_free(NULL)
 * is a no-op.
 */
#ifndef OG_SERVE_H
#define OG_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "commands.h"
#include "oncegate/oncegate.h"

/* ===========================================================================
 * Roles and principals.
 * ========================================================================= */
#define OG_ROLE_MAP(X)                                                         \
    X(ISSUER, "issuer")     /* POST /v1/grants, POST /v1/tickets */            \
    X(AGENT, "agent")       /* operations, ticket rotation */                  \
    X(ENFORCER, "enforcer") /* the consume verdict */                          \
    X(REVOKER, "revoker")   /* grant and family revocation */                  \
    X(OPERATOR, "operator") /* operators' endpoints (issue 5) */           \
    X(PAYOUT_ADMIN, "payout-admin") /* payouts' context administration */   \
    X(CLERK, "clerk")       /* POST /v1/payouts/{id}/submit */              \
    X(PAYOUT_WORKER, "payout-worker") /* the payout pipeline's principal  \
                               (payouts.worker_id); no HTTP route */        \
    X(APPROVER, "approver") /* POST /v1/payouts/{id}/approve: settles an    \
                               acknowledgment or an escalation */

enum {
#define OG__ROLE_IDX(name, text) OG_ROLE_IDX_##name,
    OG_ROLE_MAP(OG__ROLE_IDX)
#undef OG__ROLE_IDX
    OG_ROLE_COUNT
};
#define OG__ROLE_BIT(name, text) OG_ROLE_##name = 1u << OG_ROLE_IDX_##name,
enum og_role { OG_ROLE_MAP(OG__ROLE_BIT) };
#undef OG__ROLE_BIT

/* The role's name ("issuer", ...) for a single bit; NULL otherwise. */
const char *og_role_name(unsigned role_bit);
/* The bit for a role name; 0 when unknown. */
unsigned og_role_parse(const char *name);

#define OG_API_KEY_MAX 256      /* bytes of a presented bearer key */
#define OG_API_KEY_HASH_LEN 32  /* SHA-256 */

/* A principal as configured: the API key is never held, only its SHA-256
 * (API keys are 256-bit random strings, so a fast hash is enough: there is
 * nothing to brute-force). */
typedef struct og_principal {
    char id[OG_ID_MAX + 1];
    unsigned roles;                                /* OR of OG_ROLE_* */
    unsigned char key_hash[OG_API_KEY_HASH_LEN];
    int64_t approval_limit_minor; /* a clerk's or an approver's: the
                                     largest payout it may submit or approve
                                     without escalation, in minor units of
                                     the payout's currency; 0 (the
                                     default): every payout escalates */
} og_principal;

/* ===========================================================================
 * Configuration (config.c, config_load.c).
 * ========================================================================= */
/* What the background retention loop does with finished operations
 * (operations.retention_mode). */
typedef enum og_srv_retention {
    OG_RETAIN_KEEP = 0,  /* never removed */
    OG_RETAIN_ARCHIVE,   /* moved to the archive tables */
    OG_RETAIN_DELETE,    /* deleted */
} og_srv_retention;

typedef struct og_srv_config {
    char listen_host[256];      /* "127.0.0.1"; IPv4 or IPv6 literal */
    int listen_port;            /* 0: any free port (printed when ready) */
    char *store_url;            /* og_store_open URL */
    char *audience;             /* grants must be addressed to it (aud) */
    char *issuer;               /* the issuer this service signs grants as */
    char *keys_dir;             /* ISSUER.KID.public.jwk files (verification)
                                   and this issuer's private key */
    char *signing_key;          /* private JWK path; NULL: the first
                                   ISSUER.*.private.jwk in keys_dir, by name;
                                   none found: POST /v1/grants answers 501 */
    og_grant_form grant_form;   /* how this issuer's grants are stored */
    og_consumption_keys consumption_keys; /* what auto_migrate creates and
                                   the store must record; AS_STORED: any */
    char *provider_url;         /* NULL: no execution (admission only) */
    char *provider_table;       /* the classification table's path */
    char *provider_api_key_file;/* NULL: no provider key */
    int provider_keep_alive;    /* pooled provider connections; 0: a fresh
                                   connection per call (KA1) */
    int64_t provider_keep_alive_idle_us; /* a pooled one idle longer is
                                   closed, not reused */
    char *redemption_url;       /* the token endpoint's base URL; NULL:
                                   provider_url */
    char *redemption_key_file;  /* NULL: redemption off (501) */
    char *redemption_api_key_file; /* NULL: no key at the token endpoint */
    int64_t redemption_catch_up_us; /* og_redeem's catch-up bound */
    char *opid_mac_key_file;    /* NULL: operation ids without a MAC */
    bool opid_require_mac;      /* admission refuses an operation id
                                   without a valid MAC */
    bool tokens_accept_legacy_typ; /* grants typed "JWT" or untyped
                                   (issued before explicit typing) are
                                   accepted: og_grant_policy */
    og_timings timings;         /* every timing value, one object */
    int pool_size;              /* store connections per instance */
    int admit_batch_max;        /* group commit: admissions per batch */
    int admit_batches_in_flight; /* group commit: batches at once (pg) */
    int outcome_batch_max;      /* group commit of outcomes */
    int consume_batch_max;      /* group commit: verdicts per batch (pg) */
    int rotate_batch_max;       /* group commit: ticket rotations per batch */
    size_t max_body_bytes;      /* request bodies above it: 413 */
    int max_connections;        /* concurrent HTTP connections */
    int64_t drain_timeout_us;   /* SIGTERM: in-flight requests get this long */
    int retry_after_s;          /* Retry-After on 503 retry_later */
    /* http.* (edge.c, wire.c): the connection's limits and deadlines. */
    size_t http_max_header_bytes; /* request line + fields: else 431 */
    size_t http_max_url_bytes;  /* request target: else 414 */
    int64_t http_header_timeout_us; /* first byte to the head's end */
    int64_t http_body_timeout_us;   /* the head's end to the body's end */
    int64_t http_idle_timeout_us;   /* a kept-alive connection's wait */
    int http_unauth_per_source; /* unauthenticated connections per source
                                   address */
    size_t http_refusal_cache;  /* refusal cache entries (refusals.h); 0 off */
    /* rate_limit.* (http.c): token buckets, per minute and burst. */
    int rl_auth_per_minute, rl_auth_burst;
    int rl_revoke_per_minute, rl_revoke_burst;
    char *log_file;             /* "-": stderr */
    bool auto_migrate;          /* apply migrations at startup */
    bool store_bounds_from_role;/* PostgreSQL: the deployment sets the
                                   admission bound on the role; checked */
    bool recovery_loop;         /* with a provider: recover in the
                                   background */
    bool janitor_enabled;       /* cleanup passes in the background */
    int64_t janitor_interval_us;/* between the starts of two passes */
    int janitor_batch;          /* rows (operations) per statement */
    int janitor_max_batches;    /* statements per pass */
    og_srv_retention retention_mode; /* finished operations: keep,
                                   archive or delete in the background */
    int audit_retention_days;   /* age of a finished operation's last
                                   status change before it goes (R1) */
    /* payouts.* (payout_runner.c): the payout pipeline inside serve and
     * in `oncegate payout-worker` (docs/payouts.md, sections 5 and 6). */
    bool payouts_runner;        /* run workers, sweeper, reconciler */
    char *payouts_provider_url; /* NULL: provider.url */
    char *payouts_table;        /* the payouts classification table */
    char *payouts_api_key_file; /* NULL: provider.api_key_file */
    char *payouts_worker_id;    /* the worker's principal: every write's
                                   actor, and the payout grants' audience
                                   (issued to it, presented by it) */
    int payouts_workers;        /* worker threads */
    int64_t payouts_send_window_us;
    int64_t payouts_attempt_lease_us;
    int64_t payouts_job_lease_us;
    int64_t payouts_record_timeout_us;
    int64_t payouts_postpone_us;
    int payouts_max_sends;
    int64_t payouts_clock_error_us;
    int64_t payouts_poll_us;    /* an idle worker's wait */
    int64_t payouts_interval_us;/* sweeper, reconciler, expiry passes */
    char *payouts_backoff;      /* "MS,MS,...": the reconciler's steps */
    int64_t payouts_escalate_after_us;
    int payouts_max_per_pass;
    int payouts_sweep_limit;
    og_principal *principals;   /* n_principals entries */
    size_t n_principals;
    char *config_path;          /* the file loaded (NULL in plain --dev);
                                   SIGHUP re-reads its principals */
} og_srv_config;

/* Writes "PREFIX: " and the formatted message to err (NULL or errlen 0:
 * nothing) and returns rc: how config_load.c and dev.c report one failure in
 * one statement. */
__attribute__((format(printf, 5, 0))) int
og_srv_vfail(char *err, size_t errlen, int rc, const char *prefix,
             const char *fmt, va_list ap);

/* og_srv_vfail with a variable argument list. */
__attribute__((format(printf, 5, 6))) int
og_srv_fail(char *err, size_t errlen, int rc, const char *prefix,
            const char *fmt, ...);

/* Fills *c with every default from the table (no principals). Strings are
 * malloc'd. Returns 0 or OG_ENOMEM. */
int og_srv_config_defaults(og_srv_config *c);

/* Loads the JSON file at path over the defaults already in *c. Unknown
 * keys, wrong types and values outside a key's bounds are refused; so is a
 * timing relation that fails (og_timings_check). On failure writes one line
 * naming the key or relation to err (errlen bytes) and returns OG_EINVAL
 * (bad value), OG_ETIMINGS or OG_EKEY_IO (unreadable file); *c may then be
 * partly updated and must be freed. */
int og_srv_config_load(og_srv_config *c, const char *path, char *err,
                       size_t errlen);

/* Re-reads only the principals of the file at path into *out / *n (malloc'd,
 * the caller frees with free()). Same errors as og_srv_config_load. */
int og_srv_config_load_principals(const char *path, og_principal **out,
                                  size_t *n, char *err, size_t errlen);

/* Parses "HOST:PORT" / "[IPV6]:PORT" into c->listen_host/listen_port. 0 or
 * OG_EINVAL. */
int og_srv_config_set_listen(og_srv_config *c, const char *hostport);

/* Sets key name (a row of the configuration table, not an object) to the
 * value in JSON text through the row's setter, exactly as a configuration
 * file would. 0, or OG_EINVAL / OG_ENOMEM with err. */
int og_srv_config_set(og_srv_config *c, const char *name, const char *json,
                      char *err, size_t errlen);

/* Writes key name's default as JSON text into buf (timings: from
 * og_timings_default()). 0, or -1 when there is no such row or no default,
 * or it does not fit. */
int og_srv_config_default_text(const char *name, char *buf, size_t len);

/* The token endpoint POST /v1/redemptions redeems at: redemption.url, else
 * provider.url; NULL when redemption is off (no redemption.key_file). */
const char *og_srv_config_redemption_url(const og_srv_config *c);

/* Checks relations across keys (timings, the audit retention R1, pool size
 * vs. connections, the redemption keys and R2, ...). 0, or OG_ETIMINGS /
 * OG_EINVAL with one line naming the relation in err. */
int og_srv_config_check(const og_srv_config *c, char *err, size_t errlen);

/* Checks the store's server-side bound on admissions (docs/design.md, "The
 * server-side bound on an admission, and what it does not cover") against
 * c: on a backend that has such settings, both statement_timeout and
 * lock_timeout must be finite (non-zero) and no longer than
 * timings.store_timeout, the admission bound relation T9 relies on. 0, or OG_ETIMINGS with one line in err. Pure. */
int og_srv_config_check_bounds(const og_srv_config *c,
                               const og_session_bounds *b, char *err,
                               size_t errlen);

/* payouts.backoff_ms ("MS,MS,..."; each 1..86400000) into out (at most
 * max steps, in microseconds): the number of steps, or -1. Pure. */
#define OG_SRV_PAYOUTS_BACKOFF_MAX 16
int og_srv_payouts_backoff(const char *s, int64_t *out, int max);

/* The payout pipeline's relations R3-R7 (docs/config.md) on c; part of
 * og_srv_config_check when payouts.runner is on. 0, or OG_ETIMINGS /
 * OG_EINVAL with one line naming the relation in err. Pure. */
int og_srv_config_check_payouts(const og_srv_config *c, char *err,
                                size_t errlen);

/* Frees every owned member and zeroes *c. */
void og_srv_config_free(og_srv_config *c);

/* Writes docs/config.md's text (a Markdown table generated from the one
 * configuration table) to f. */
void og_srv_config_doc(FILE *f);

/* ===========================================================================
 * Dev mode (dev.c).
 * ========================================================================= */
#define OG_DEV_ISSUER "oncegate-dev"
#define OG_DEV_AUDIENCE "oncegate-dev"
#define OG_DEV_CREDENTIALS "dev-credentials.json"
#define OG_DEV_REDEMPTION_KEY "redemption.key"
#define OG_DEV_OPID_KEY "operation-id.key" /* operation_ids.mac_key_file */

/* Prepares data directory dir for `serve --dev` under an exclusive lock
 * (DIR/.lock), so instances started together agree: creates dir (0700)
 * and DIR/keys, generates the issuer key when none exists, creates
 * DIR/dev-credentials.json (0600) with one principal per role and
 * DIR/redemption.key (0600, the redemption sealing key) and
 * DIR/operation-id.key (0600, the operation-id MAC key) when absent, else
 * reuses them (a credentials file lacking a role is completed). Fills c:
 * store (sqlite:DIR/oncegate.db unless store_url is non-NULL), keys_dir,
 * issuer, audience, principals, auto_migrate, and redemption.key_file and
 * operation_ids.mac_key_file unless the configuration names them. 0, or a
 * negative code with one line in err. */
int og_srv_dev_prepare(og_srv_config *c, const char *dir,
                       const char *store_url, char *err, size_t errlen);

/* What dev mode changes (dev.c, D5): one row per configuration key, its
 * value as JSON text, set through the table's setter. */
typedef struct og_srv_dev_override {
    const char *key;   /* a row of the configuration table */
    const char *value; /* JSON text, as a configuration file writes it */
} og_srv_dev_override;
extern const og_srv_dev_override og_srv_dev_overrides[];
extern const size_t og_srv_dev_n_overrides;

/* Sets every dev override in *c (short timings that satisfy T1..T12 and
 * R3-R7, a janitor pass every 5 s, the payout pipeline on as
 * dev-payout-worker). 0, or an error with err (a row that is not in the
 * table: a defect). */
int og_srv_dev_apply(og_srv_config *c, char *err, size_t errlen);

/* Prints the dev overrides as a table: key, dev value, default (markdown:
 * docs/config.md's; else `oncegate help serve`'s columns). */
void og_srv_dev_overrides_print(FILE *f, bool markdown);

/* The sandbox provider a dev instance runs beside itself (dev.c, D4). */
typedef struct og_srv_dev_sandbox {
    pid_t pid;                  /* 0: none running */
    char url[256];              /* its base URL, http://127.0.0.1:PORT */
    char state[OG_PATH_MAX];    /* its state file, DIR/sandbox.db */
} og_srv_dev_sandbox;

/* Starts `oncegate-sandbox` (beside this executable, else from PATH) on a
 * loopback port with its control endpoint, state in DIR/sandbox.db; waits
 * for its ready line and sets c->provider_url to its URL. Call before any
 * thread exists. 0, or OG_EPROVIDER_UNAVAILABLE / OG_EINTERNAL /
 * OG_ENOMEM with err (nothing left running). */
int og_srv_dev_sandbox_start(og_srv_config *c, const char *dir,
                             og_srv_dev_sandbox *sb, char *err,
                             size_t errlen);

/* Stops a sandbox started by og_srv_dev_sandbox_start (SIGTERM, then
 * SIGKILL after 10 s) and reaps it. No-op when none runs. */
void og_srv_dev_sandbox_stop(og_srv_dev_sandbox *sb);

/* Prints the ready banner: the URL, the data directory, the provider, how
 * to load the API keys into the shell without printing them, and
 * ready-to-paste curl commands that issue a grant, present it (applied at
 * the provider), replay it and read the operation; with sb (a sandbox
 * started here, control endpoint on) also a lost provider answer that
 * recovery settles, and the payout path (og_srv_dev_banner_payouts). */
void og_srv_dev_banner(FILE *f, const og_srv_config *c, const char *dir,
                       const char *url, const char *argv0,
                       const og_srv_dev_sandbox *sb);

/* Creates dev mode's payout scenario in s (dev_payouts.c: tenant T-0417,
 * beneficiary BEN-2208, destination DST-77 changed 30 days ago, payout
 * PAY-3107 in Draft drafted by c's clerk), each record unless it exists,
 * so a restart or a second instance creates nothing twice. 0, or a
 * negative code with one line in err (never the destination token). */
int og_srv_dev_scenario(og_store *s, const og_srv_config *c, char *err,
                        size_t errlen);

/* The id of c's principal whose only role is role, or fallback. */
const char *og_srv_dev_principal_id(const og_srv_config *c, unsigned role,
                                    const char *fallback);

/* The banner line that starts the payout steps (after "  # "). */
#define OG_DEV_PAYOUT_STEPS "The payout path"

/* Writes the banner's payout steps (dev_payouts.c): read PAY-3107, lose
 * the sandbox's next answer (sandbox_url: its control endpoint), the
 * clerk's submission, the wait for Paid through reconciliation, the
 * history, the sandbox's counters. */
void og_srv_dev_banner_payouts(FILE *f, const og_srv_config *c,
                               const char *url, const char *sandbox_url);

/* ===========================================================================
 * Authentication snapshot (auth.c): immutable once built, swapped whole on
 * SIGHUP, reference-counted so a request keeps the snapshot it started
 * with.
 * ========================================================================= */
typedef struct og_srv_auth og_srv_auth;

/* Builds a snapshot from c: its principals, the keyset loaded from
 * c->keys_dir, and the signer (c->signing_key, or the issuer's first
 * private key in keys_dir; none is not an error). 0, or an error with one
 * line in err. The snapshot starts with one reference. */
int og_srv_auth_build(const og_srv_config *c, const og_principal *principals,
                      size_t n_principals, og_srv_auth **out, char *err,
                      size_t errlen);
void og_srv_auth_ref(og_srv_auth *a);
void og_srv_auth_unref(og_srv_auth *a);

/* The principal whose key is `key` (the bearer token's bytes), comparing
 * SHA-256(key) with every principal's hash in constant time and without
 * early exit; NULL when none. */
const og_principal *og_srv_auth_lookup(const og_srv_auth *a, const char *key,
                                       size_t keylen);

const og_keyset *og_srv_auth_keyset(const og_srv_auth *a);
const og_signer *og_srv_auth_signer(const og_srv_auth *a); /* may be NULL */
/* The snapshot's generation: unique among the snapshots of this process. */
uint64_t og_srv_auth_generation(const og_srv_auth *a);
/* Revocation policy: the ids of principals with the revoker role. */
const og_revoke_policy *og_srv_auth_revokers(const og_srv_auth *a);

/* ===========================================================================
 * Logs (log.c): one JSON object per line, written with ONE write(2) so
 * lines from threads (and processes appending to one file) never
 * interleave. Fields are identifiers only — never a token, key, ticket or
 * credential (a test scans every line for them).
 * ========================================================================= */
typedef enum og_log_level {
    OG_LOG_DEBUG,
    OG_LOG_INFO,
    OG_LOG_WARN,
    OG_LOG_ERROR
} og_log_level;

/* Opens the log sink: "-" is stderr, else a file opened O_APPEND|O_CREAT
 * (0640). min is the least level written. 0 or OG_EKEY_IO. */
int og_log_open(const char *path, og_log_level min);
void og_log_close(void);

/* Writes {"ts":RFC3339 µs,"level":…,"event":event, …fields}. fields may be
 * NULL; the reference is stolen. Thread-safe. */
void og_log(og_log_level level, const char *event, json_t *fields);

/* ===========================================================================
 * Metrics (metrics.c): process-global, lock-free counters.
 * ========================================================================= */
#define OG_METRIC_OP_MAP(X)                                                    \
    X(ADMIT, "admit")                                                          \
    X(OPERATION_GET, "operation_get")                                          \
    X(ISSUE, "issue")                                                          \
    X(REVOKE, "revoke")                                                        \
    X(FAMILY_REVOKE, "family_revoke")                                          \
    X(CONSUME, "consume")                                                      \
    X(TICKET_CREATE, "ticket_create")                                          \
    X(TICKET_ROTATE, "ticket_rotate")                                          \
    X(CHECK, "check")                                                          \
    X(MAY_SUBMIT, "may_submit")                                                \
    X(RECORD, "record")

typedef enum og_metric_op {
#define OG__MOP_ENUM(name, text) OG_MOP_##name,
    OG_METRIC_OP_MAP(OG__MOP_ENUM)
#undef OG__MOP_ENUM
    OG_MOP_COUNT
} og_metric_op;

/* oncegate_admissions_total{outcome}, and for REFUSED also
 * oncegate_refusals_total{reason}. */
void og_metrics_admission(og_outcome outcome, og_refusal refusal);
/* oncegate_store_latency_seconds{op} histogram; err < 0 with
 * OG_ESTORE_UNAVAILABLE also counts oncegate_store_unavailable_total{op}. */
void og_metrics_store_call(og_metric_op op, int64_t elapsed_us, int err);
/* oncegate_consumes_total{consumed="true|false"} */
void og_metrics_consume(bool consumed);
/* Who recorded an outcome. */
typedef enum og_metric_source {
    OG_SOURCE_HANDLER,
    OG_SOURCE_RECOVERY,
    OG_SOURCE_OPERATOR,
} og_metric_source;
/* oncegate_outcomes_total{status,source}. */
void og_metrics_outcome(og_op_status st, og_metric_source src);
/* oncegate_recovery_takeovers_total. */
void og_metrics_takeovers(unsigned n);
/* oncegate_cleanup_deleted_total{kind}, by what held each deleted
 * consumption row, and oncegate_cleanup_last_duration_seconds: one
 * finished cleanup pass. */
void og_metrics_cleanup(const og_cleanup_stats *st, int64_t elapsed_us);
/* oncegate_operations_archived_total{mode}: finished operations moved to
 * the archive ("archive") or deleted ("delete"). */
void og_metrics_archived(og_archive_mode mode, int64_t operations);
/* oncegate_redemptions_total{outcome}: outcome an og_redeem_outcome, or
 * a negative OG_E* code, counted as "error". */
void og_metrics_redemption(int outcome);
/* oncegate_http_requests_in_flight gauge. */
void og_metrics_inflight(int delta);
/* oncegate_http_responses_total{code}, one series per status code seen. */
void og_metrics_response(unsigned status);
/* oncegate_rate_limited_total{limit,by}: a request refused 429 by a token
 * bucket. limit: 0 failed authentication, 1 revocation; by: 0 principal,
 * 1 source address. */
void og_metrics_rate_limited(int limit, int by);
/* oncegate_http_connections_refused_total{reason}: a connection answered
 * and closed when accepted. reason: 0 max_connections, 1 the per-source
 * cap on unauthenticated connections. */
void og_metrics_connection_refused(int reason);
/* oncegate_refusal_cache_total{result}: a lookup of the refusal cache
 * (refusals.h) that answered the request (hit) or did not (miss). */
void og_metrics_refusal_cache(bool hit);
/* The payout runner whose counters /metrics renders (the oncegate_payout_*
 * families; NULL: none, and they are left out). Borrowed: unregister
 * (NULL) before freeing it. */
void og_metrics_payout_runner(og_payout_runner *r);
/* The Prometheus text exposition (version 0.0.4), malloc'd into *out. 0 or
 * OG_ENOMEM. */
int og_metrics_render(char **out, size_t *len);
/* Appends to *text (og_metrics_render's, replaced by a longer malloc'd
 * copy) the payout store's statistics read now (og_payout_stats_read):
 * oncegate_payout_reservations_held, oncegate_payout_reserved_minor and
 * oncegate_payout_grants_unconsumed. Nothing when the store cannot be read
 * or memory runs out: the scrape keeps its counters. */
void og_metrics_payout_stats(og_store *s, char **text);
/* Appends the store object's group commit counters (og_store_admit_stats)
 * to the exposition in *text: oncegate_admit_batches_total,
 * oncegate_admit_batched_admissions_total and
 * oncegate_admit_batch_fallbacks_total, then the consume verdicts'
 * (og_store_consume_stats): oncegate_consume_batches_total,
 * oncegate_consume_batched_verdicts_total and
 * oncegate_consume_batch_fallbacks_total; the ticket rotations'
 * (og_store_rotate_stats): oncegate_rotate_batches_total,
 * oncegate_rotate_batched_rotations_total and
 * oncegate_rotate_batch_fallbacks_total; and the group commit of outcomes'
 * (og_store_outcome_stats): oncegate_outcome_batches_total and
 * oncegate_outcome_batched_writes_total. Nothing when memory runs out. */
void og_metrics_admit_batches(og_store *s, char **text);

#endif /* OG_SERVE_H */
