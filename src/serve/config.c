/*
 * config.c — the configuration of `oncegate serve`: ONE table of keys (name,
 * type, bounds, default, doc, where the value lands in og_srv_config), the
 * JSON loader driven by it, the checks across keys, and docs/config.md,
 * generated from the same table so the documentation cannot drift from what
 * the loader accepts.
 *
 * Why JSON: the service already parses JSON with jansson for tokens and its
 * API, so the configuration needs no second parser. Why strict: an unknown or
 * duplicated key is refused, because a typo that silently keeps a default
 * (a 60 s lease where 6 s was meant) is worse than a server that refuses to
 * start and names the key.
 *
 * Invariants:
 *   C1  Every value a loaded configuration holds passed its row's setter,
 *       and og_srv_config_check re-checks every row's bounds, so values set
 *       by flags or dev mode are held to the same rules as the file's.
 *   C2  Defaults are JSON text in the table and go through the same setters
 *       as the file (the timings' come from og_timings_default(), the one
 *       place the library keeps them).
 *   C3  Every error is ONE line naming the key ("principals[2].roles") or
 *       the timing relation ("T4: ..."), never a value that could be secret.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "serve.h"

#define CFG_FILE_MAX (4 * 1024 * 1024) /* a config file: 4096 principals
                                          fit many times over */
#define CFG_PRINCIPALS_MAX 4096
#define CFG_STR_MAX 4095               /* paths and URLs, bytes */
#define CFG_NAME_MAX 128               /* a dotted key name */
#define CFG_YEAR_MS INT64_C(31622400000) /* 366 days: og_timings' bound */
#define CFG_HEX_LEN (2 * OG_API_KEY_HASH_LEN)

/* ===========================================================================
 * The table.
 * ========================================================================= */
typedef enum cfg_type {
    CFG_OBJECT,     /* a JSON object whose members are "NAME.member" rows */
    CFG_STRING,     /* min..max bytes, no control characters: char * */
    CFG_PATH_OPT,   /* as CFG_STRING; "" lands as NULL (automatic) */
    CFG_ID,         /* the identifier rule: char * */
    CFG_ISSUER,     /* the identifier and key-file-name rules: char * */
    CFG_LISTEN,     /* "HOST:PORT" / "[V6]:PORT": listen_host, listen_port */
    CFG_ENUM,       /* one of the row's names: its index, an enum */
    CFG_INT,        /* integer min..max: int */
    CFG_SIZE,       /* integer min..max: size_t */
    CFG_MS,         /* integer milliseconds min..max: int64_t microseconds */
    CFG_BOOL,       /* true | false: bool */
    CFG_PRINCIPALS, /* array of at most max principal objects */
} cfg_type;

typedef struct cfg_key {
    const char *name; /* dotted path: "timings.execution_lease_ms" */
    cfg_type type;
    int64_t min, max; /* numbers: the value; strings: the length; listen:
                         the port; principals: the count */
    const char *def;  /* the default as JSON text; NULL: og_timings_default()
                         (timings) or none (objects) */
    size_t off;       /* where the value lands in og_srv_config */
    const char *doc;  /* one sentence or two for docs/config.md */
} cfg_key;

#define AT(member) offsetof(og_srv_config, member)

/* The accepted strings of each CFG_ENUM row (by where its value lands), in
 * the order of the enum's values, NULL-ended. */
static const char *const cfg_form_names[] = {"token", "row", NULL};
_Static_assert(OG_FORM_TOKEN == 0 && OG_FORM_ROW == 1,
               "cfg_form_names follows og_grant_form");
static const char *const cfg_retention_names[] = {"keep", "archive", "delete",
                                                  NULL};
_Static_assert(OG_RETAIN_KEEP == 0 && OG_RETAIN_ARCHIVE == 1 &&
                   OG_RETAIN_DELETE == 2,
               "cfg_retention_names follows og_srv_retention");
static const char *const cfg_keys_names[] = {"as_stored", "readable",
                                             "hashed", NULL};
_Static_assert(OG_KEYS_AS_STORED == 0 && OG_KEYS_READABLE == 1 &&
                   OG_KEYS_HASHED == 2,
               "cfg_keys_names follows og_consumption_keys");
static const struct {
    size_t off;
    const char *const *names;
} cfg_enums[] = {
    {AT(grant_form), cfg_form_names},
    {AT(retention_mode), cfg_retention_names},
    {AT(consumption_keys), cfg_keys_names},
};

#define AT_T(member) (offsetof(og_srv_config, timings) + offsetof(og_timings, member))
#define TIMING(name, member, doc)                                              \
    {"timings." name, CFG_MS, 0, CFG_YEAR_MS, NULL, AT_T(member), doc}

static const cfg_key cfg_keys[] = {
    {"listen", CFG_LISTEN, 0, 65535, "\"127.0.0.1:8080\"", AT(listen_host),
     "Address to listen on: an IPv4 literal, or an IPv6 literal in brackets "
     "(`[::1]:8080`). Port 0 picks a free port, printed when ready. "
     "`--listen` overrides it."},
    {"store", CFG_STRING, 1, CFG_STR_MAX, "\"" OG_DEFAULT_STORE_URL "\"",
     AT(store_url),
     "The store: `sqlite:PATH`, or PostgreSQL as `postgres://...` or a "
     "`key=value` string. Every instance of one deployment uses the same "
     "store; it makes every single-use decision. `--store` overrides it."},
    {"audience", CFG_ID, 1, OG_ID_MAX, "\"oncegate\"", AT(audience),
     "This service's name: grants must be addressed to it (`aud`), and "
     "`POST /v1/grants` issues grants for it."},
    {"issuer", CFG_ISSUER, 1, OG_ID_MAX, "\"oncegate\"", AT(issuer),
     "The issuer this service signs grants as (`iss`). Its key files are "
     "named after it, so it must also be a safe file name."},
    {"keys_dir", CFG_STRING, 1, CFG_STR_MAX, "\"./keys\"", AT(keys_dir),
     "Directory of verification keys (`ISSUER.KID.public.jwk`, for every "
     "issuer whose grants are admitted) and of this issuer's private key. "
     "Reloaded on SIGHUP."},
    {"signing_key", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"", AT(signing_key),
     "Private JWK file to sign grants with. Empty: the first "
     "`ISSUER.*.private.jwk` in `keys_dir` by name; when there is none, "
     "`POST /v1/grants` answers 501. Reloaded on SIGHUP."},
    {"grant_form", CFG_ENUM, 0, 0, "\"token\"", AT(grant_form),
     "How this issuer's grants are stored: `token` (self-contained tokens; "
     "admission claims the key (issuer, grant_id)) or `row` (issued grants "
     "are rows; admission is a conditional update of the row)."},
    {"pool_size", CFG_INT, 1, 1024, "32", AT(pool_size),
     "Store connections this instance holds; requests beyond it wait for "
     "one. At most `max_connections`, since a request uses one at a time."},
    {"max_body_bytes", CFG_SIZE, 1024, 1048576, "16384", AT(max_body_bytes),
     "Largest request body accepted; a larger one is 413 `body_too_large` "
     "before any of it is parsed."},
    {"max_connections", CFG_INT, 1, 65536, "1024", AT(max_connections),
     "Concurrent HTTP connections; more wait in the listen backlog."},
    {"drain_timeout_ms", CFG_MS, 0, 600000, "10000", AT(drain_timeout_us),
     "On SIGTERM, how long requests in flight get to finish after the "
     "listening socket closes; then the process exits."},
    {"retry_after_seconds", CFG_INT, 1, 3600, "1", AT(retry_after_s),
     "`Retry-After` on 503 `retry_later` (store unavailable, timed out or "
     "cancelled)."},
    {"log_file", CFG_STRING, 1, CFG_STR_MAX, "\"-\"", AT(log_file),
     "Where the JSON log lines go: `-` is stderr, else a file opened for "
     "appending (created 0640)."},
    {"recovery_loop", CFG_BOOL, 0, 0, "true", AT(recovery_loop),
     "With a provider: run recovery in the background every half "
     "`timings.recovery_delay_ms` (stalled operations are taken over, "
     "looked up, recorded, or resubmitted with the same key only when the "
     "provider declares atomic same-key handling and before `submit_by`). "
     "Off: run `oncegate recover` instead."},
    {"store_bounds_from_role", CFG_BOOL, 0, 0, "false",
     AT(store_bounds_from_role),
     "PostgreSQL: false sets `statement_timeout` and `lock_timeout` (and "
     "on 17+ `transaction_timeout`) to `timings.store_timeout_ms` on every "
     "store connection. true leaves them to the deployment — `ALTER ROLE "
     "... SET` on a role that runs admissions only, e.g. behind a pooler "
     "that drops session settings — and only checks them: the server "
     "refuses to start when one is missing or longer than "
     "`store_timeout_ms`."},
    {"auto_migrate", CFG_BOOL, 0, 0, "false", AT(auto_migrate),
     "Apply missing store migrations at startup (serialized across "
     "instances). Off: a store whose schema is not current stops startup; "
     "run `oncegate migrate`."},
    {"consumption_keys", CFG_ENUM, 0, 0, "\"as_stored\"",
     AT(consumption_keys),
     "How the store keys its refusal records (docs/design.md, \"Hashed "
     "consumption keys\"): `readable` by (issuer, grant id), `hashed` by "
     "SHA-256 over the length-prefixed pair. Chosen once per store, when "
     "schema 5 is applied: `auto_migrate` creates the store this way. "
     "`readable` or `hashed` also refuse to start on a store that records "
     "the other keys; `as_stored` takes what the store records (a store "
     "migrated without a choice is readable)."},
    {"timings", CFG_OBJECT, 0, 0, NULL, AT(timings),
     "Every timing value, in milliseconds (the `timings.` rows below); a "
     "member left out keeps its default. Each is at most 31622400000 "
     "(366 days); the relations T1-T12 between them are checked at "
     "startup."},
    TIMING("admission_leeway_ms", admission_leeway_us,
           "Clock tolerance on the admission deadline (`exp` + leeway): the "
           "one value validation, admission and retention share. T1: at most "
           "1 hour."),
    TIMING("execution_lease_ms", execution_lease_us,
           "How long the admitting handler owns an operation. T3, T4: longer "
           "than `store_timeout` and `provider_timeout` plus `lease_margin`; "
           "T5: at least 3 x `store_timeout` + `provider_timeout` + "
           "`lease_margin`; T7."),
    TIMING("lease_margin_ms", lease_margin_us,
           "Slack the execution lease keeps beyond everything it must cover. "
           "T2: positive; T3-T5."),
    TIMING("submission_window_ms", submission_window_us,
           "From admission to `submit_by`, the last moment a create call may "
           "be sent. T7: more than `execution_lease` + `recovery_delay` + "
           "`recovery_lease`; T8: at most `provider_key_retention` - "
           "`provider_clock_margin`."),
    TIMING("store_timeout_ms", store_timeout_us,
           "Longest a store call may take (client side, and PostgreSQL's "
           "`statement_timeout` and `lock_timeout` on admission connections): "
           "the admission bound. T2: positive, at most 1 hour; T3, T5, T6, "
           "T9."),
    TIMING("provider_timeout_ms", provider_timeout_us,
           "The billing/provider call's own timeout (not the request's). T2: "
           "positive, at most 1 hour; T4: shorter than `execution_lease` - "
           "`lease_margin`; T5, T6."),
    TIMING("recovery_lease_ms", recovery_lease_us,
           "Recovery's ownership of an operation after a takeover. T6: at "
           "least 2 x `provider_timeout` + `store_timeout`; T7."),
    TIMING("recovery_delay_ms", recovery_delay_us,
           "Longest before recovery picks up an operation whose lease ended. "
           "T12: positive; T7."),
    TIMING("provider_key_retention_ms", provider_key_retention_us,
           "How long the provider documents that it keeps an idempotency "
           "key. T8: at least `submission_window` + "
           "`provider_clock_margin`."),
    TIMING("provider_clock_margin_ms", provider_clock_margin_us,
           "Safety margin against the provider's key retention, clock "
           "differences included. T8."),
    TIMING("cleanup_margin_ms", cleanup_margin_us,
           "Extra time before cleanup deletes refusal records. T9: more than "
           "`store_timeout` + `commit_bound` + `max_clock_step`, so a refusal "
           "outlives every admission that could still commit."),
    TIMING("commit_bound_ms", commit_bound_us,
           "Your bound on an admission's commit, which no server timeout "
           "covers: PostgreSQL switches `statement_timeout` off before the "
           "commit, and a synchronous-replication wait has no timeout (bound "
           "it by failover policy and put that bound here). 0: commits never "
           "wait for a standby; the server then refuses to start on a "
           "PostgreSQL whose commits do. T9."),
    TIMING("max_clock_step_ms", max_clock_step_us,
           "Largest clock step allowed on the store host. T12: at most "
           "1 hour; T9."),
    TIMING("max_grant_lifetime_ms", max_grant_lifetime_us,
           "Grants with `exp` - `iat` above it are refused, and "
           "`ttl_seconds` may not exceed it; also the fallback revocation "
           "retention. T10: positive; never shrink it while grants issued "
           "under it are outstanding."),
    TIMING("issue_time_skew_ms", issue_time_skew_us,
           "Grants whose `iat` is ahead of this clock by more are refused; "
           "also the fallback revocation retention. T11: at most 1 hour; "
           "never shrink it while grants are outstanding."),
    {"janitor", CFG_OBJECT, 0, 0, NULL, AT(janitor_enabled),
     "Refusal retention (the `janitor.` rows below): the background job that "
     "deletes consumption rows once `retain_until` + "
     "`timings.cleanup_margin_ms` has passed on the store's clock, and "
     "nothing else. `oncegate cleanup` runs the same passes on its own."},
    {"janitor.enabled", CFG_BOOL, 0, 0, "true", AT(janitor_enabled),
     "Run cleanup passes in the background. Off: consumption rows are kept "
     "(the safe direction) unless `oncegate cleanup` runs."},
    {"janitor.interval_ms", CFG_MS, 1000, 86400000, "60000",
     AT(janitor_interval_us),
     "Between the starts of two passes (cleanup, and archiving when "
     "`operations.retention_mode` is not `keep`); the first runs at "
     "startup."},
    {"janitor.batch", CFG_INT, 1, OG_RETENTION_BATCH_MAX, "1000",
     AT(janitor_batch),
     "Rows one statement deletes (operations one statement archives), each "
     "batch its own short transaction: admissions wait for one batch at "
     "most. Keep one batch well inside `timings.store_timeout_ms`."},
    {"janitor.max_batches", CFG_INT, 1, OG_RETENTION_BATCHES_MAX, "100",
     AT(janitor_max_batches),
     "Batches in one pass at most; a pass also ends at the first batch that "
     "takes fewer than `janitor.batch` rows."},
    {"operations", CFG_OBJECT, 0, 0, NULL, AT(retention_mode),
     "Audit retention of operation records (the `operations.` rows below), "
     "separate from refusal retention and much longer."},
    {"operations.retention_mode", CFG_ENUM, 0, 0, "\"keep\"",
     AT(retention_mode),
     "`keep`: operations are never removed. `archive`: a background loop "
     "moves finished operations (succeeded, failed) older than "
     "`operations.audit_retention_days`, with their history, into "
     "`operations_archive` and `operation_events_archive`. `delete`: it "
     "deletes them. Admitted, unknown and needs-reconciliation operations "
     "are never touched. `oncegate archive-operations` runs one pass by "
     "hand."},
    {"operations.audit_retention_days", CFG_INT, 1, 36600, "365",
     AT(audit_retention_days),
     "How long a finished operation stays after its last status change. R1: "
     "at least `max_grant_lifetime` + `issue_time_skew` + "
     "`admission_leeway` + `cleanup_margin`, so an operation record "
     "outlives its grant's refusal record."},
    {"provider", CFG_OBJECT, 0, 0, NULL, AT(provider_url),
     "The billing provider `POST /v1/operations` executes against (the "
     "`provider.` rows below). Without `provider.url` the service admits "
     "only: an admitted operation is answered 202 and nothing executes."},
    {"provider.url", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"", AT(provider_url),
     "The provider's base URL (`http://` or `https://`), e.g. an "
     "`oncegate-sandbox`. Empty: no execution."},
    {"provider.table", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(provider_table),
     "The provider's classification table (a versioned JSON data file, e.g. "
     "`providers/sandbox-credits.v1.json`): every documented answer's "
     "class, and the provider's declared properties. Required with "
     "`provider.url`; its key retention must cover "
     "`timings.provider_key_retention_ms`."},
    {"provider.api_key_file", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(provider_api_key_file),
     "File holding the provider's API key (a secret: read at startup, sent "
     "as a bearer token, never logged). Empty: none."},
    {"redemption", CFG_OBJECT, 0, 0, NULL, AT(redemption_url),
     "Redeeming external single-use tokens (`POST /v1/redemptions`; the "
     "`redemption.` rows below). Off until `redemption.key_file` is set: "
     "results are credentials and are stored sealed."},
    {"redemption.url", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_url),
     "The token endpoint's base URL (`POST URL/oauth/token`, RFC 6749 "
     "4.1.3), e.g. an `oncegate-sandbox`. Empty: `provider.url`."},
    {"redemption.key_file", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_key_file),
     "File holding the 32-byte key results are sealed with (64 hex digits "
     "or base64; XChaCha20-Poly1305, bound to caller, idempotency key and "
     "token hash). It must be readable by its owner only (chmod 600). Every "
     "instance on one store needs the same key; losing it makes every "
     "stored result unreadable. Empty: redemption off (501). Dev mode "
     "generates `DIR/redemption.key`."},
    {"redemption.api_key_file", CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_api_key_file),
     "File holding the token endpoint's API key, sent as a bearer token "
     "(a secret, never logged). Empty: none."},
    {"redemption.catch_up_timeout_ms", CFG_MS, 1, 600000, "20000",
     AT(redemption_catch_up_us),
     "After the token endpoint answered \"already used\" (or an answer was "
     "lost), how long a redemption keeps looking for the result another "
     "request of the same idempotency key is persisting, backing off from "
     "20 ms to 500 ms; then `redemption_lost`. R2: more than "
     "`timings.provider_timeout_ms` + `timings.store_timeout_ms`, the "
     "longest a winner still in flight needs to persist."},
    {"principals", CFG_PRINCIPALS, 0, CFG_PRINCIPALS_MAX, "[]",
     AT(principals),
     "Who may call: objects `{\"id\", \"roles\", \"api_key_sha256\"}`. `id` "
     "follows the identifier rule and is unique; `roles` is a non-empty "
     "list of `issuer`, `agent`, `enforcer`, `revoker`, `operator`; "
     "`api_key_sha256` is the SHA-256 of the API key as 64 lower-case hex "
     "characters, unique (the key itself is never configured). Reloaded on "
     "SIGHUP."},
};
#define CFG_N_KEYS (sizeof cfg_keys / sizeof cfg_keys[0])

/* The timing relations, as lib/core/timings.c states and checks them;
 * og_timings_check names the first that fails. */
static const char *const cfg_relations[] = {
    "T1: 0 <= `admission_leeway` <= 1 hour: one bounded clock tolerance.",
    "T2: 0 < `store_timeout` <= 1 hour, 0 < `provider_timeout` <= 1 hour, "
    "0 < `lease_margin`.",
    "T3: `store_timeout` < `execution_lease` - `lease_margin`: a store call "
    "ends well inside the lease.",
    "T4: `provider_timeout` < `execution_lease` - `lease_margin`: the billing "
    "call ends well inside the lease.",
    "T5: `execution_lease` >= 3 x `store_timeout` + `provider_timeout` + "
    "`lease_margin`: the lease covers the admission commit, the MaySubmit "
    "read, the billing call, the outcome write and a margin.",
    "T6: `recovery_lease` >= 2 x `provider_timeout` + `store_timeout`: "
    "recovery's lease covers a lookup, a create call and recording.",
    "T7: `submission_window` > `execution_lease` + `recovery_delay` + "
    "`recovery_lease`: otherwise recovery could never resubmit.",
    "T8: `submission_window` <= `provider_key_retention` - "
    "`provider_clock_margin`: a create is never sent after the provider may "
    "have forgotten its idempotency key.",
    "T9: `cleanup_margin` > `store_timeout` + `max_clock_step`: a refusal "
    "record outlives every admission that could still commit.",
    "T10: 0 < `max_grant_lifetime` <= 1 year; it bounds the fallback "
    "revocation retention, so it may never shrink while grants are "
    "outstanding.",
    "T11: 0 <= `issue_time_skew` <= 1 hour; the same retention argument.",
    "T12: 0 <= `max_clock_step` <= 1 hour, `recovery_delay` > 0, and every "
    "value at most 1 year, so sums cannot overflow.",
    "R1: `operations.audit_retention_days` >= `max_grant_lifetime` + "
    "`issue_time_skew` + `admission_leeway` + `cleanup_margin`: an operation "
    "record stays live at least as long as its grant's refusal record may, "
    "so every operation whose grant is still refused is still in "
    "`operations`. Refusal does not rest on it: an archived operation still "
    "refuses its grant and its id.",
};

/* An example that loads (a test loads it from docs/config.md). The hashes
 * are the SHA-256 of "og_example-issuer-key-replace-me" and
 * "og_example-agent-key-replace-me". */
static const char cfg_example[] =
    "{\n"
    "  \"listen\": \"0.0.0.0:8080\",\n"
    "  \"store\": \"postgres://oncegate@db.internal/oncegate\",\n"
    "  \"issuer\": \"approvals\",\n"
    "  \"audience\": \"payments\",\n"
    "  \"keys_dir\": \"/etc/oncegate/keys\",\n"
    "  \"log_file\": \"/var/log/oncegate/serve.log\",\n"
    "  \"timings\": {\"store_timeout_ms\": 2000, \"provider_timeout_ms\": "
    "15000},\n"
    "  \"principals\": [\n"
    "    {\"id\": \"approvals-ui\", \"roles\": [\"issuer\", \"revoker\"],\n"
    "     \"api_key_sha256\": "
    "\"ce19679d47b59f243ec7dc671520a59b71ea8662073c71d2d0f908a0da953523\"},\n"
    "    {\"id\": \"payments-agent\", \"roles\": [\"agent\"],\n"
    "     \"api_key_sha256\": "
    "\"5f9ea8e3893d3515ea5c5fb8fad6e79a7ad71829b16c05864060f624317165b3\"}\n"
    "  ]\n"
    "}\n";

/* ===========================================================================
 * Small helpers.
 * ========================================================================= */

int og_srv_vfail(char *err, size_t errlen, int rc, const char *prefix,
                 const char *fmt, va_list ap)
{
    int n;

    if (!err || errlen == 0)
        return rc;
    n = snprintf(err, errlen, "%s: ", prefix);
    if (n < 0 || (size_t)n >= errlen)
        return rc;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    return rc;
}

int og_srv_fail(char *err, size_t errlen, int rc, const char *prefix,
                const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = og_srv_vfail(err, errlen, rc, prefix, fmt, ap);
    va_end(ap);
    return rc;
}

/* Writes one "config: ..." line to err and returns rc, so a failure is one
 * statement. */
__attribute__((format(printf, 4, 5))) static int
cfg_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = og_srv_vfail(err, errlen, rc, "config", fmt, ap);
    va_end(ap);
    return rc;
}

/* Copies untrusted text into buf for an error line: at most 64 characters,
 * non-printable bytes and quotes as '?', so a hostile key name cannot break
 * the one-line rule or forge a second message. Returns buf. */
static const char *cfg_show(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s && *s && i + 4 < len && i < 64; s++)
        buf[i++] = (*s > 0x20 && *s < 0x7f && *s != '"') ? *s : '?';
    if (s && *s && i + 4 <= len) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* 1 when s has no control characters (they would break log lines and
 * error messages); else 0. */
static int cfg_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

/* The row named name, or NULL. */
static const cfg_key *cfg_find(const char *name)
{
    for (size_t i = 0; i < CFG_N_KEYS; i++)
        if (strcmp(cfg_keys[i].name, name) == 0)
            return &cfg_keys[i];
    return NULL;
}

/* Edit distance between a and b, capped at 3 (all a suggestion needs). */
static int cfg_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[CFG_NAME_MAX + 1];

    if (la > CFG_NAME_MAX || lb > CFG_NAME_MAX ||
        (la > lb ? la - lb : lb - la) > 2)
        return 3;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

/* The known key name probably meant (a unit left off, or at most two
 * edits away), or NULL: a typo is refused, and the refusal says what was
 * probably meant. */
static const char *cfg_suggest(const char *name)
{
    const char *best = NULL;
    int bd = 3;

    for (size_t i = 0; i < CFG_N_KEYS; i++) {
        const char *k = cfg_keys[i].name;
        size_t n = strlen(name);
        int d = strncmp(k, name, n) == 0 && strcmp(k + n, "_ms") == 0
                    ? 0
                    : cfg_distance(name, k);
        if (d < bd) {
            bd = d;
            best = k;
        }
    }
    return best;
}

/* The error for an unknown key (full dotted name). Returns OG_EINVAL. */
static int cfg_unknown(const char *name, char *err, size_t errlen)
{
    char shown[80];
    const char *s = cfg_suggest(name);

    cfg_show(name, shown, sizeof shown);
    if (s)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "unknown key \"%s\" (did you mean \"%s\"?)", shown, s);
    return cfg_fail(err, errlen, OG_EINVAL, "unknown key \"%s\"", shown);
}

/* A pointer to row k's landing place in c. */
static void *cfg_at(const cfg_key *k, og_srv_config *c)
{
    return (char *)c + k->off;
}

/* The same, read-only. */
static const void *cfg_at_const(const cfg_key *k, const og_srv_config *c)
{
    return (const char *)c + k->off;
}

/* ===========================================================================
 * Listen addresses.
 * ========================================================================= */

/* Parses "HOST:PORT" / "[V6]:PORT" into host (hostlen bytes) and *port.
 * 0 or -1; nothing written on failure. */
static int cfg_parse_listen(const char *s, char *host, size_t hostlen,
                            int *port)
{
    char h[INET6_ADDRSTRLEN + 1];
    unsigned char addr[sizeof(struct in6_addr)];
    const char *start, *end, *p;
    long v = 0;
    int v6;

    if (!s)
        return -1;
    v6 = s[0] == '[';
    start = s + v6;
    end = v6 ? strchr(s, ']') : strrchr(s, ':');
    if (!end || (v6 && end[1] != ':'))
        return -1;
    p = v6 ? end + 2 : end + 1; /* the port */
    if (end == start || (size_t)(end - start) >= sizeof h ||
        (size_t)(end - start) >= hostlen)
        return -1;
    memcpy(h, start, (size_t)(end - start));
    h[end - start] = '\0';
    /* Literals only: a name would be resolved at bind time, and the
     * address a service listens on should not depend on DNS. */
    if (inet_pton(v6 ? AF_INET6 : AF_INET, h, addr) != 1)
        return -1;
    if (!*p || strlen(p) > 5)
        return -1;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return -1;
        v = v * 10 + (*q - '0');
    }
    if (v > 65535)
        return -1;
    memcpy(host, h, strlen(h) + 1);
    *port = (int)v;
    return 0;
}

int og_srv_config_set_listen(og_srv_config *c, const char *hostport)
{
    if (!c)
        return OG_EINVAL;
    return cfg_parse_listen(hostport, c->listen_host, sizeof c->listen_host,
                            &c->listen_port) == 0
               ? 0
               : OG_EINVAL;
}

/* ===========================================================================
 * Principals.
 * ========================================================================= */

/* Decodes 64 lower-case hex characters into out. 0 or -1: upper case is
 * refused so that one key has exactly one spelling, and duplicates cannot
 * hide behind case. */
static int cfg_hex32(const char *s, unsigned char out[OG_API_KEY_HASH_LEN])
{
    unsigned char tmp[OG_API_KEY_HASH_LEN];

    if (strlen(s) != CFG_HEX_LEN)
        return -1;
    for (size_t i = 0; i < CFG_HEX_LEN; i++) {
        char ch = s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                         : -1;
        if (v < 0)
            return -1;
        if (i % 2 == 0)
            tmp[i / 2] = (unsigned char)(v << 4);
        else
            tmp[i / 2] |= (unsigned char)v;
    }
    memcpy(out, tmp, sizeof tmp);
    return 0;
}

/* Parses principals[i].roles into *roles. 0 or OG_EINVAL with err. */
static int cfg_roles(json_t *v, size_t i, unsigned *roles, char *err,
                     size_t errlen)
{
    unsigned acc = 0;
    size_t j;
    json_t *r;
    char shown[80];

    if (!json_is_array(v) || json_array_size(v) == 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].roles: must be a non-empty array of "
                        "role names (issuer, agent, enforcer, revoker, "
                        "operator)",
                        i);
    json_array_foreach(v, j, r) {
        unsigned bit = json_is_string(r) ? og_role_parse(json_string_value(r))
                                         : 0;
        if (!json_is_string(r))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles[%zu]: must be a string", i,
                            j);
        if (bit == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles: unknown role \"%s\"", i,
                            cfg_show(json_string_value(r), shown,
                                     sizeof shown));
        if (acc & bit)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles: duplicate role \"%s\"", i,
                            og_role_name(bit));
        acc |= bit;
    }
    *roles = acc;
    return 0;
}

/* Parses principals[i] (an object) into *p. 0 or OG_EINVAL with err. */
static int cfg_principal(json_t *o, size_t i, og_principal *p, char *err,
                         size_t errlen)
{
    static const char *const members[] = {"id", "roles", "api_key_sha256"};
    const char *key;
    json_t *v, *id, *hash;
    char shown[80];
    int rc;

    if (!json_is_object(o))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu]: must be an object {\"id\", "
                        "\"roles\", \"api_key_sha256\"}",
                        i);
    json_object_foreach(o, key, v) {
        if (strcmp(key, "id") && strcmp(key, "roles") &&
            strcmp(key, "api_key_sha256"))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu]: unknown key \"%s\"", i,
                            cfg_show(key, shown, sizeof shown));
    }
    for (size_t m = 0; m < sizeof members / sizeof members[0]; m++)
        if (!json_object_get(o, members[m]))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu]: missing \"%s\"", i, members[m]);
    id = json_object_get(o, "id");
    if (!json_is_string(id) || !og_id_valid(json_string_value(id)))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].id: must be 1-128 printable ASCII "
                        "characters without spaces",
                        i);
    if ((rc = cfg_roles(json_object_get(o, "roles"), i, &p->roles, err,
                        errlen)) != 0)
        return rc;
    hash = json_object_get(o, "api_key_sha256");
    if (!json_is_string(hash) ||
        cfg_hex32(json_string_value(hash), p->key_hash) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].api_key_sha256: must be 64 "
                        "lower-case hex characters (the SHA-256 of the API "
                        "key)",
                        i);
    memcpy(p->id, json_string_value(id), strlen(json_string_value(id)) + 1);
    return 0;
}

/* Refuses a principal whose id or key hash repeats an earlier one: two
 * principals with one key would make the lookup's answer depend on order.
 * 0 or OG_EINVAL with err. */
static int cfg_principal_unique(const og_principal *ps, size_t i, char *err,
                                size_t errlen)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(ps[j].id, ps[i].id) == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].id: duplicate id \"%s\" (also "
                            "principals[%zu])",
                            i, ps[i].id, j);
        if (memcmp(ps[j].key_hash, ps[i].key_hash, OG_API_KEY_HASH_LEN) == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].api_key_sha256: duplicate key "
                            "hash (also principals[%zu])",
                            i, j);
    }
    return 0;
}

/* Parses the principals array into *out / *n (malloc'd, NULL when empty;
 * written only on success). 0, OG_EINVAL or OG_ENOMEM with err. */
static int cfg_principals(json_t *arr, og_principal **out, size_t *n,
                          char *err, size_t errlen)
{
    og_principal *ps = NULL;
    size_t count, i;
    json_t *o;
    int rc = 0;

    if (!json_is_array(arr))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals: must be an array of objects");
    count = json_array_size(arr);
    if (count > CFG_PRINCIPALS_MAX)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals: at most %d principals", CFG_PRINCIPALS_MAX);
    if (count && !(ps = calloc(count, sizeof *ps)))
        return cfg_fail(err, errlen, OG_ENOMEM, "principals: out of memory");
    json_array_foreach(arr, i, o) {
        if ((rc = cfg_principal(o, i, &ps[i], err, errlen)) != 0 ||
            (rc = cfg_principal_unique(ps, i, err, errlen)) != 0)
            break;
    }
    if (rc != 0) {
        free(ps);
        return rc;
    }
    *out = ps;
    *n = count;
    return 0;
}

/* ===========================================================================
 * Setters: one per type, each validating before it writes (C1).
 * ========================================================================= */

/* Checks s against string row k (CFG_STRING, CFG_PATH_OPT, CFG_ID,
 * CFG_ISSUER): the one rule the setter and og_srv_config_check share. 0 or
 * OG_EINVAL with err. */
static int cfg_string_ok(const cfg_key *k, const char *s, char *err,
                         size_t errlen)
{
    size_t len = strlen(s);

    if (k->type == CFG_ID && !og_id_valid(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be 1-128 printable ASCII characters "
                        "without spaces",
                        k->name);
    if (k->type == CFG_ISSUER && !og_issuer_file_valid(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be 1-128 characters of [A-Za-z0-9._~-], "
                        "not starting with '.' (it names key files)",
                        k->name);
    if ((int64_t)len < k->min || (int64_t)len > k->max || !cfg_printable(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be %" PRId64 " to %" PRId64
                        " bytes without control characters",
                        k->name, k->min, k->max);
    return 0;
}

/* The names of enum row k (cfg_enums): never NULL for a row of the table
 * (a test renders every row). */
static const char *const *cfg_names(const cfg_key *k)
{
    static const char *const none[] = {NULL};

    for (size_t i = 0; i < sizeof cfg_enums / sizeof cfg_enums[0]; i++)
        if (cfg_enums[i].off == k->off)
            return cfg_enums[i].names;
    return none;
}

/* The number of names of enum row k. */
static int cfg_enum_count(const cfg_key *k)
{
    const char *const *names = cfg_names(k);
    int n = 0;

    while (names[n])
        n++;
    return n;
}

/* Writes the names of enum row k as `"a", "b" or "c"` (quote: the
 * character around each name) into buf. Returns buf. */
static const char *cfg_enum_list(const cfg_key *k, char quote, char *buf,
                                 size_t len)
{
    const char *const *names = cfg_names(k);
    int n = cfg_enum_count(k);
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s%c%s%c",
                         i == 0 ? "" : i == n - 1 ? " or " : ", ", quote,
                         names[i], quote);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return buf;
}

/* The error for a value enum row k does not name. Returns OG_EINVAL. */
static int cfg_enum_fail(const cfg_key *k, char *err, size_t errlen)
{
    char list[128];

    return cfg_fail(err, errlen, OG_EINVAL, "%s: must be %s", k->name,
                    cfg_enum_list(k, '"', list, sizeof list));
}

/* Sets a string row; CFG_PATH_OPT's "" lands as NULL. */
static int cfg_set_string(const cfg_key *k, json_t *v, og_srv_config *c,
                          char *err, size_t errlen)
{
    char **slot = cfg_at(k, c);
    char *copy = NULL;
    int rc;

    if (!json_is_string(v))
        return cfg_fail(err, errlen, OG_EINVAL, "%s: must be a string",
                        k->name);
    if ((rc = cfg_string_ok(k, json_string_value(v), err, errlen)) != 0)
        return rc;
    if (json_string_length(v) > 0 && !(copy = strdup(json_string_value(v))))
        return cfg_fail(err, errlen, OG_ENOMEM, "%s: out of memory", k->name);
    free(*slot);
    *slot = copy;
    return 0;
}

/* Sets a number row (CFG_INT, CFG_SIZE, CFG_MS). */
static int cfg_set_number(const cfg_key *k, json_t *v, og_srv_config *c,
                          char *err, size_t errlen)
{
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;

    if (!json_is_integer(v) || x < k->min || x > k->max)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be an integer between %" PRId64
                        " and %" PRId64,
                        k->name, k->min, k->max);
    if (k->type == CFG_INT)
        *(int *)cfg_at(k, c) = (int)x;
    else if (k->type == CFG_SIZE)
        *(size_t *)cfg_at(k, c) = (size_t)x;
    else
        *(int64_t *)cfg_at(k, c) = (int64_t)x * 1000;
    return 0;
}

/* Sets the principals row: the new list replaces the old one whole. */
static int cfg_set_principals(json_t *v, og_srv_config *c, char *err,
                              size_t errlen)
{
    og_principal *ps = NULL;
    size_t n = 0;
    int rc = cfg_principals(v, &ps, &n, err, errlen);

    if (rc != 0)
        return rc;
    if (c->principals)
        sodium_memzero(c->principals, c->n_principals * sizeof *c->principals);
    free(c->principals);
    c->principals = ps;
    c->n_principals = n;
    return 0;
}

/* Validates v for row k and writes it into c. 0, OG_EINVAL or OG_ENOMEM
 * with err. */
static int cfg_set(const cfg_key *k, json_t *v, og_srv_config *c, char *err,
                   size_t errlen)
{
    switch (k->type) {
    case CFG_STRING:
    case CFG_PATH_OPT:
    case CFG_ID:
    case CFG_ISSUER:
        return cfg_set_string(k, v, c, err, errlen);
    case CFG_INT:
    case CFG_SIZE:
    case CFG_MS:
        return cfg_set_number(k, v, c, err, errlen);
    case CFG_LISTEN:
        if (!json_is_string(v) ||
            og_srv_config_set_listen(c, json_string_value(v)) != 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be \"HOST:PORT\" or \"[IPV6]:PORT\" "
                            "with an IP address literal and a port between "
                            "0 and 65535",
                            k->name);
        return 0;
    case CFG_ENUM:
        for (int i = 0; json_is_string(v) && cfg_names(k)[i]; i++)
            if (strcmp(json_string_value(v), cfg_names(k)[i]) == 0) {
                *(int *)cfg_at(k, c) = i;
                return 0;
            }
        return cfg_enum_fail(k, err, errlen);
    case CFG_BOOL:
        if (!json_is_boolean(v))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be true or false", k->name);
        *(bool *)cfg_at(k, c) = json_is_true(v);
        return 0;
    case CFG_PRINCIPALS:
        return cfg_set_principals(v, c, err, errlen);
    case CFG_OBJECT:
        break;
    }
    return cfg_fail(err, errlen, OG_EINVAL, "%s: must be an object", k->name);
}

/* Applies every member of obj, whose rows are named prefix + member, to c.
 * Unknown members are refused; object rows recurse. 0 or an error. */
static int cfg_apply(json_t *obj, const char *prefix, og_srv_config *c,
                     char *err, size_t errlen)
{
    const char *member;
    json_t *v;
    int rc;

    json_object_foreach(obj, member, v) {
        char name[CFG_NAME_MAX + 1];
        const cfg_key *k = NULL;
        int n = snprintf(name, sizeof name, "%s%s", prefix, member);

        /* A member never contains '.': "timings.x" is reached only through
         * the timings object, so each value has one spelling. */
        if (n >= 0 && (size_t)n < sizeof name && !strchr(member, '.'))
            k = cfg_find(name);
        if (!k)
            return cfg_unknown(n >= 0 && (size_t)n < sizeof name ? name
                                                                 : member,
                               err, errlen);
        if (k->type == CFG_OBJECT) {
            char sub[CFG_NAME_MAX + 1];
            if (!json_is_object(v))
                return cfg_fail(err, errlen, OG_EINVAL,
                                "%s: must be an object", k->name);
            snprintf(sub, sizeof sub, "%s.", k->name);
            rc = cfg_apply(v, sub, c, err, errlen);
        } else {
            rc = cfg_set(k, v, c, err, errlen);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ===========================================================================
 * Reading the file.
 * ========================================================================= */

/* Reads the whole file at path (at most CFG_FILE_MAX bytes) into a
 * malloc'd, NUL-terminated *buf. 0 or OG_EKEY_IO / OG_ENOMEM with err. */
static int cfg_read(const char *path, char **buf, size_t *len, char *err,
                    size_t errlen)
{
    struct stat st;
    size_t got = 0;
    char *b = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return cfg_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s", path,
                        strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > CFG_FILE_MAX) {
        rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: larger than %d bytes",
                      path, CFG_FILE_MAX);
        goto out;
    }
    if (!(b = malloc((size_t)st.st_size + 1))) {
        rc = cfg_fail(err, errlen, OG_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    /* Read up to the size fstat saw: a file growing meanwhile is cut
     * there, and JSON parsing then refuses the truncated text. */
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s",
                          path, r < 0 ? strerror(errno) : "file shrank");
            goto out;
        }
        got += (size_t)r;
    }
    b[got] = '\0';
    *buf = b;
    *len = got;
    b = NULL;
out:
    free(b);
    close(fd);
    return rc;
}

/* Parses the file at path into a new JSON object *root. Duplicate members
 * are refused by the parser itself (JSON_REJECT_DUPLICATES), at any depth.
 * 0; OG_EKEY_IO (unreadable, not JSON); OG_EINVAL (a duplicate key, or not
 * an object); OG_ENOMEM. */
static int cfg_parse_file(const char *path, json_t **root, char *err,
                          size_t errlen)
{
    json_error_t je;
    char *text = NULL, shown[80];
    size_t len = 0;
    json_t *j;
    int rc = cfg_read(path, &text, &len, err, errlen);

    if (rc != 0)
        return rc;
    j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!j && json_error_code(&je) == json_error_duplicate_key) {
        /* jansson says: duplicate object key near '"KEY"' */
        char key[sizeof je.text] = "?";
        const char *near = strstr(je.text, "near '\"");
        const char *end = near ? strrchr(je.text, '"') : NULL;

        if (near && end > near + 7) {
            memcpy(key, near + 7, (size_t)(end - near - 7));
            key[end - near - 7] = '\0';
        }
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: line %d, column %d: duplicate key \"%s\" (each "
                        "key may appear once)",
                        path, je.line, je.column,
                        cfg_show(key, shown, sizeof shown));
    }
    if (!j)
        return cfg_fail(err, errlen, OG_EKEY_IO,
                        "%s: not JSON: line %d, column %d: %s", path, je.line,
                        je.column, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must hold one JSON object", path);
    }
    *root = j;
    return 0;
}

/* ===========================================================================
 * The public functions.
 * ========================================================================= */

int og_srv_config_defaults(og_srv_config *c)
{
    char err[256];
    int rc;

    memset(c, 0, sizeof *c);
    og_timings_default(&c->timings);
    for (size_t i = 0; i < CFG_N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        json_t *v;

        if (!k->def)
            continue;
        if (!(v = json_loads(k->def, JSON_DECODE_ANY, NULL))) {
            og_srv_config_free(c);
            return OG_ENOMEM;
        }
        rc = cfg_set(k, v, c, err, sizeof err);
        json_decref(v);
        if (rc != 0) {
            og_srv_config_free(c);
            return rc;
        }
    }
    return 0;
}

int og_srv_config_load(og_srv_config *c, const char *path, char *err,
                       size_t errlen)
{
    json_t *root = NULL;
    char *copy;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (!c || !path)
        return cfg_fail(err, errlen, OG_EINVAL, "no configuration file");
    if ((rc = cfg_parse_file(path, &root, err, errlen)) != 0)
        return rc;
    rc = cfg_apply(root, "", c, err, errlen);
    json_decref(root);
    if (rc != 0)
        return rc;
    if (!(copy = strdup(path)))
        return cfg_fail(err, errlen, OG_ENOMEM, "out of memory");
    free(c->config_path);
    c->config_path = copy;
    return og_srv_config_check(c, err, errlen);
}

int og_srv_config_load_principals(const char *path, og_principal **out,
                                  size_t *n, char *err, size_t errlen)
{
    og_srv_config tmp;
    int rc;

    /* The whole file is validated, not just its principals: a reload must
     * not accept a file that a restart would refuse. */
    if ((rc = og_srv_config_defaults(&tmp)) != 0)
        return cfg_fail(err, errlen, rc, "out of memory");
    if ((rc = og_srv_config_load(&tmp, path, err, errlen)) == 0) {
        *out = tmp.principals;
        *n = tmp.n_principals;
        tmp.principals = NULL;
        tmp.n_principals = 0;
    }
    og_srv_config_free(&tmp);
    return rc;
}

/* Re-checks row k's value in c against its bounds (C1). 0 or OG_EINVAL. */
static int cfg_check_key(const cfg_key *k, const og_srv_config *c, char *err,
                         size_t errlen)
{
    const void *at = cfg_at_const(k, c);
    int64_t v = 0;

    switch (k->type) {
    case CFG_STRING:
    case CFG_ID:
    case CFG_ISSUER:
    case CFG_PATH_OPT: {
        const char *s = *(char *const *)at;

        if (!s && k->type == CFG_PATH_OPT)
            return 0; /* automatic */
        if (!s)
            return cfg_fail(err, errlen, OG_EINVAL, "%s: missing", k->name);
        return cfg_string_ok(k, s, err, errlen);
    }
    case CFG_INT:
        v = *(const int *)at;
        break;
    case CFG_SIZE:
        v = (int64_t)*(const size_t *)at;
        break;
    case CFG_MS:
        v = *(const int64_t *)at;
        if (v % 1000 == 0)
            v /= 1000;
        else
            v = -1; /* not whole milliseconds: not expressible here */
        break;
    case CFG_LISTEN:
        if (!c->listen_host[0] || c->listen_port < 0 ||
            c->listen_port > 65535)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be \"HOST:PORT\" or \"[IPV6]:PORT\" "
                            "with a port between 0 and 65535",
                            k->name);
        return 0;
    case CFG_ENUM:
        v = *(const int *)at;
        if (v < 0 || v >= cfg_enum_count(k))
            return cfg_enum_fail(k, err, errlen);
        return 0;
    case CFG_PRINCIPALS:
        if (c->n_principals > (size_t)k->max ||
            (c->n_principals && !c->principals))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals: at most %d principals",
                            CFG_PRINCIPALS_MAX);
        return 0;
    case CFG_BOOL:
    case CFG_OBJECT:
        return 0;
    }
    if (v < k->min || v > k->max)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be an integer between %" PRId64
                        " and %" PRId64,
                        k->name, k->min, k->max);
    return 0;
}

/* R1: an operation record outlives its grant's refusal record. The
 * timings are checked (T12: each at most a year), so the sum cannot
 * overflow. 0 or OG_ETIMINGS naming the relation. */
static int cfg_check_audit_retention(const og_srv_config *c, char *err,
                                     size_t errlen)
{
    const og_timings *t = &c->timings;
    int64_t need = t->max_grant_lifetime_us + t->issue_time_skew_us +
                   t->admission_leeway_us + t->cleanup_margin_us;

    if ((int64_t)c->audit_retention_days * 86400 * INT64_C(1000000) >= need)
        return 0;
    return cfg_fail(err, errlen, OG_ETIMINGS,
                    "operations.audit_retention_days: R1: the audit "
                    "retention (%d days) must be at least max_grant_lifetime "
                    "+ issue_time_skew + admission_leeway + cleanup_margin "
                    "(%" PRId64 " s), so an operation record outlives its "
                    "grant's refusal record",
                    c->audit_retention_days, need / 1000000);
}

/* The redemption keys together, and R2. 0, or OG_EINVAL / OG_ETIMINGS. */
static int cfg_check_redemption(const og_srv_config *c, char *err,
                                size_t errlen)
{
    const char *url = og_srv_config_redemption_url(c);

    if (c->redemption_url && !c->redemption_key_file)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "redemption.key_file: required with redemption.url "
                        "(results are credentials: they are stored sealed)");
    /* No URL yet is refused at startup, not here: dev mode sets
     * provider.url once its sandbox runs, after this check. */
    if (!url)
        return 0;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "redemption.url: must start with http:// or https://");
    /* R2: a duplicate must be able to wait out the winner's exchange and
     * its write, or it answers redemption_lost for a result that was about
     * to be persisted. */
    if (c->redemption_catch_up_us <=
        c->timings.provider_timeout_us + c->timings.store_timeout_us)
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "redemption.catch_up_timeout_ms: R2: must be more "
                        "than timings.provider_timeout_ms + "
                        "timings.store_timeout_ms (%lld ms), the longest a "
                        "redemption still in flight needs to persist its "
                        "result",
                        (long long)((c->timings.provider_timeout_us +
                                     c->timings.store_timeout_us) /
                                    1000));
    return 0;
}

int og_srv_config_check(const og_srv_config *c, char *err, size_t errlen)
{
    const char *why = NULL;
    int rc;

    if (!c)
        return cfg_fail(err, errlen, OG_EINVAL, "no configuration");
    for (size_t i = 0; i < CFG_N_KEYS; i++)
        if ((rc = cfg_check_key(&cfg_keys[i], c, err, errlen)) != 0)
            return rc;
    if (og_timings_check(&c->timings, &why) != 0)
        return cfg_fail(err, errlen, OG_ETIMINGS, "timings: %s",
                        why ? why : "a timing relation fails");
    if ((rc = cfg_check_audit_retention(c, err, errlen)) != 0)
        return rc;
    if (c->provider_url && !c->provider_table)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "provider.table: required with provider.url (how "
                        "else would an answer be classified?)");
    if (c->provider_url && strncmp(c->provider_url, "http://", 7) != 0 &&
        strncmp(c->provider_url, "https://", 8) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "provider.url: must start with http:// or https://");
    if (c->pool_size > c->max_connections)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "pool_size: must not exceed max_connections (%d): a "
                        "request uses one store connection at a time, so "
                        "the rest could never be used",
                        c->max_connections);
    return cfg_check_redemption(c, err, errlen);
}

const char *og_srv_config_redemption_url(const og_srv_config *c)
{
    if (!c->redemption_key_file)
        return NULL;
    return c->redemption_url ? c->redemption_url : c->provider_url;
}

void og_srv_config_free(og_srv_config *c)
{
    if (!c)
        return;
    free(c->store_url);
    free(c->audience);
    free(c->issuer);
    free(c->keys_dir);
    free(c->signing_key);
    free(c->provider_url);
    free(c->provider_table);
    free(c->provider_api_key_file);
    free(c->redemption_url);
    free(c->redemption_key_file);
    free(c->redemption_api_key_file);
    free(c->log_file);
    free(c->config_path);
    if (c->principals)
        sodium_memzero(c->principals, c->n_principals * sizeof *c->principals);
    free(c->principals);
    memset(c, 0, sizeof *c);
}

/* ===========================================================================
 * docs/config.md.
 * ========================================================================= */

/* Writes s as one Markdown table cell: '|' escaped so it cannot split the
 * row. */
static void doc_cell(FILE *f, const char *s)
{
    fputc(' ', f);
    for (; *s; s++) {
        if (*s == '|')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputs(" |", f);
}

/* The type column of row k. */
static const char *doc_type(const cfg_key *k)
{
    switch (k->type) {
    case CFG_OBJECT:
        return "object";
    case CFG_STRING:
    case CFG_PATH_OPT:
        return "string";
    case CFG_ID:
        return "string (identifier)";
    case CFG_ISSUER:
        return "string (identifier, file name)";
    case CFG_LISTEN:
        return "string (`HOST:PORT`)";
    case CFG_ENUM:
        return "string"; /* the caller lists the names */
    case CFG_INT:
    case CFG_SIZE:
        return "integer";
    case CFG_MS:
        return "integer (ms)";
    case CFG_BOOL:
        return "boolean";
    case CFG_PRINCIPALS:
        return "array of objects";
    }
    return "?";
}

/* Writes the default column of row k; timings show og_timings_default(). */
static void doc_default(FILE *f, const cfg_key *k)
{
    og_srv_config d;
    char buf[64];

    if (k->def) {
        fprintf(f, " `%s` |", k->def);
        return;
    }
    if (k->type != CFG_MS) {
        doc_cell(f, "-");
        return;
    }
    memset(&d, 0, sizeof d);
    og_timings_default(&d.timings);
    snprintf(buf, sizeof buf, "`%" PRId64 "`",
             *(const int64_t *)cfg_at_const(k, &d) / 1000);
    doc_cell(f, buf);
}

/* Writes the bounds column of row k. */
static void doc_bounds(FILE *f, const cfg_key *k)
{
    char buf[96];

    switch (k->type) {
    case CFG_INT:
    case CFG_SIZE:
    case CFG_MS:
        snprintf(buf, sizeof buf, "%" PRId64 " ... %" PRId64, k->min, k->max);
        break;
    case CFG_STRING:
    case CFG_PATH_OPT:
        snprintf(buf, sizeof buf, "%" PRId64 " ... %" PRId64 " bytes", k->min,
                 k->max);
        break;
    case CFG_ID:
        snprintf(buf, sizeof buf, "1 ... %d printable ASCII, no spaces",
                 OG_ID_MAX);
        break;
    case CFG_ISSUER:
        snprintf(buf, sizeof buf,
                 "1 ... %d of `[A-Za-z0-9._~-]`, not starting with `.`",
                 OG_ID_MAX);
        break;
    case CFG_LISTEN:
        snprintf(buf, sizeof buf, "IP literal; port %" PRId64 " ... %" PRId64,
                 k->min, k->max);
        break;
    case CFG_PRINCIPALS:
        snprintf(buf, sizeof buf, "%" PRId64 " ... %" PRId64 " entries",
                 k->min, k->max);
        break;
    default:
        snprintf(buf, sizeof buf, "-");
        break;
    }
    doc_cell(f, buf);
}

/* The text before the table: what the file is and why it is strict. */
static void doc_intro(FILE *f)
{
    fputs(
        "<!-- Generated by `oncegate serve --config-doc` from the table in "
        "src/serve/config.c. Do not edit: change the table and regenerate "
        "(a test compares the two). -->\n"
        "\n"
        "# Configuration of `oncegate serve`\n"
        "\n"
        "*This file is generated by `oncegate serve --config-doc`.*\n"
        "\n"
        "`oncegate serve --config FILE` reads one JSON object. JSON because "
        "the service already parses JSON with jansson for its tokens and its "
        "API, so the configuration needs no second parser. The loader is "
        "strict: an unknown key or a key given twice is refused, so a typo "
        "cannot silently keep a default; so is a value of the wrong type or "
        "outside its bounds. Every key is optional; one left out keeps "
        "the default below. Durations are integers in milliseconds. An error "
        "is one line naming the key (`config: principals[2].roles: unknown "
        "role \"admin\"`) or the timing relation that fails, and the server "
        "exits 78. `--listen` and `--store` override the file's `listen` "
        "and `store`; SIGHUP re-reads the file's `principals` (the whole "
        "file is validated again, and a file that fails keeps the old "
        "principals).\n"
        "\n"
        "```json\n",
        f);
    fputs(cfg_example, f);
    fputs("```\n"
          "\n"
          "An API key is a random string the caller presents as `Authorization: "
          "Bearer KEY`; the configuration holds only its SHA-256. To make "
          "one:\n"
          "\n"
          "```sh\n"
          "KEY=\"og_$(head -c 32 /dev/urandom | basenc --base64url | tr -d "
          "'=\\n')\"\n"
          "printf '%s' \"$KEY\" | sha256sum | cut -d' ' -f1   # api_key_sha256\n"
          "```\n"
          "\n",
          f);
}

void og_srv_config_doc(FILE *f)
{
    doc_intro(f);
    fputs("## Keys\n"
          "\n"
          "| key | type | default | bounds | description |\n"
          "|---|---|---|---|---|\n",
          f);
    for (size_t i = 0; i < CFG_N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        char name[CFG_NAME_MAX + 3];

        snprintf(name, sizeof name, "`%s`", k->name);
        fputc('|', f);
        doc_cell(f, name);
        if (k->type == CFG_ENUM) {
            char list[128], type[160];

            snprintf(type, sizeof type, "string (%s)",
                     cfg_enum_list(k, '`', list, sizeof list));
            doc_cell(f, type);
        } else {
            doc_cell(f, doc_type(k));
        }
        doc_default(f, k);
        doc_bounds(f, k);
        doc_cell(f, k->doc);
        fputc('\n', f);
    }
    fputs("\n"
          "## Timing relations\n"
          "\n"
          "Checked at startup, in this order; the first that fails is named "
          "in the error (`config: timings: T4: provider_timeout (the billing "
          "call timeout) must be shorter than execution_lease minus "
          "lease_margin`). Names are the `timings` members without `_ms`.\n"
          "\n",
          f);
    for (size_t i = 0; i < sizeof cfg_relations / sizeof cfg_relations[0];
         i++)
        fprintf(f, "- %s\n", cfg_relations[i]);
    fputs("\n"
          "Beyond the timings, `pool_size` may not exceed "
          "`max_connections`, and with redemption on (`redemption.key_file` "
          "set):\n"
          "\n"
          "- R2: `redemption.catch_up_timeout` > `provider_timeout` + "
          "`store_timeout`: a duplicate redemption waits out the exchange "
          "and the write of the request that is redeeming the same token.\n",
          f);
}

int og_srv_config_check_bounds(const og_srv_config *c,
                               const og_session_bounds *b, char *err,
                               size_t errlen)
{
    int64_t bound_ms = c->timings.store_timeout_us / 1000;

    if (!b->applicable)
        return 0;
    if (b->statement_timeout_ms <= 0 || b->lock_timeout_ms <= 0)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections carry statement_timeout="
                           "%lldms and lock_timeout=%lldms; both must be "
                           "finite (non-zero), or an admission could "
                           "outlive cleanup_margin (T9)",
                           (long long)b->statement_timeout_ms,
                           (long long)b->lock_timeout_ms);
    if (b->statement_timeout_ms > bound_ms || b->lock_timeout_ms > bound_ms)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections' statement_timeout "
                           "(%lldms) or lock_timeout (%lldms) exceeds "
                           "store_timeout (%lldms), the admission bound "
                           "relation T9 relies on",
                           (long long)b->statement_timeout_ms,
                           (long long)b->lock_timeout_ms,
                           (long long)bound_ms);
    /* From 17 the whole implicit transaction can be bounded: require it. */
    if (b->has_transaction_timeout &&
        (b->transaction_timeout_ms <= 0 ||
         b->transaction_timeout_ms > bound_ms))
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections carry transaction_timeout="
                           "%lldms; on PostgreSQL 17+ it must be finite and "
                           "at most store_timeout (%lldms) (T9)",
                           (long long)b->transaction_timeout_ms,
                           (long long)bound_ms);
    /* No server setting bounds a synchronous-replication wait at commit:
     * only the deployment can, and T9 must count it. */
    if (b->sync_commit_waits && c->timings.commit_bound_us <= 0)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "commits wait for a synchronous standby "
                           "(synchronous_standby_names, synchronous_commit) "
                           "and no server timeout bounds that wait: set "
                           "timings.commit_bound_ms to the bound your "
                           "failover policy guarantees, so cleanup_margin "
                           "covers it (T9)");
    return 0;
}
