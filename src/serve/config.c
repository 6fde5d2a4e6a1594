/*
 * config.c — the configuration of `oncegate serve` as ONE table of keys
 * (name, type, bounds, default, doc, where the value lands in og_srv_config),
 * the timing relations and an example, and docs/config.md, generated from
 * the same table so the documentation cannot drift from what the loader
 * accepts. The loader, the setters and the checks across keys are
 * config_load.c's (invariants CF1-CF3 there); what both files share is
 * config_table.h.
 *
 * Defaults are JSON text in the table and go through the same setters as
 * the file (CF2); the timings' come from og_timings_default(), the one place
 * the library keeps them.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config_table.h"

#define CFG_STR_MAX 4095                 /* paths and URLs, bytes */
#define CFG_YEAR_MS INT64_C(31622400000) /* 366 days: og_timings' bound */

/* ===========================================================================
 * The table.
 * ========================================================================= */
#define AT(member) offsetof(og_srv_config, member)

/* The accepted strings of each OG_CFG_ENUM row (by where its value lands), in
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
    {"timings." name, OG_CFG_MS, 0, CFG_YEAR_MS, NULL, AT_T(member), doc}

const og_srv_cfg_key og_srv_cfg_keys[] = {
    {"listen", OG_CFG_LISTEN, 0, 65535, "\"127.0.0.1:8080\"", AT(listen_host),
     "Address to listen on: an IPv4 literal, or an IPv6 literal in brackets "
     "(`[::1]:8080`). Port 0 picks a free port, printed when ready. "
     "`--listen` overrides it."},
    {"store", OG_CFG_STRING, 1, CFG_STR_MAX, "\"" OG_DEFAULT_STORE_URL "\"",
     AT(store_url),
     "The store: `sqlite:PATH`, or PostgreSQL as `postgres://...` or a "
     "`key=value` string. Every instance of one deployment uses the same "
     "store; it makes every single-use decision. `--store` overrides it. A "
     "SQLite file is created mode 0600 (its -wal and -shm follow it)."},
    {"audience", OG_CFG_ID, 1, OG_ID_MAX, "\"oncegate\"", AT(audience),
     "This service's name: grants must be addressed to it (`aud`), and "
     "`POST /v1/grants` issues grants for it."},
    {"issuer", OG_CFG_ISSUER, 1, OG_ID_MAX, "\"oncegate\"", AT(issuer),
     "The issuer this service signs grants as (`iss`). Its key files are "
     "named after it, so it must also be a safe file name."},
    {"keys_dir", OG_CFG_STRING, 1, CFG_STR_MAX, "\"./keys\"", AT(keys_dir),
     "Directory of verification keys (`ISSUER.KID.public.jwk`, for every "
     "issuer whose grants are admitted) and of this issuer's private key. "
     "Reloaded on SIGHUP."},
    {"signing_key", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"", AT(signing_key),
     "Private JWK file to sign grants with. Empty: the first "
     "`ISSUER.*.private.jwk` in `keys_dir` by name; when there is none, "
     "`POST /v1/grants` answers 501. Reloaded on SIGHUP. It must be "
     "readable by its owner only (chmod 600): one group or others can "
     "access refuses startup (`key.mode_too_open`, naming the file and its "
     "mode)."},
    {"grant_form", OG_CFG_ENUM, 0, 0, "\"token\"", AT(grant_form),
     "How this issuer's grants are stored: `token` (self-contained tokens; "
     "admission claims the key (issuer, grant_id)) or `row` (issued grants "
     "are rows; admission is a conditional update of the row)."},
    {"pool_size", OG_CFG_INT, 1, 1024, "32", AT(pool_size),
     "Store connections this instance holds; requests beyond it wait for "
     "one. At most `max_connections`, since a request uses one at a time."},
    {"admit_batch_max", OG_CFG_INT, 1, OG_ADMIT_BATCH_MAX, "64",
     AT(admit_batch_max),
     "Group commit: the most admissions this instance's store object "
     "coalesces into one batch — one statement and one commit on "
     "PostgreSQL, one transaction on SQLite (docs/design.md, \"Group "
     "commit\"). A batch closes when it is full or when no more requests "
     "are waiting, never on a timer; every admission still gets the answer "
     "it would get alone. 1 admits each request on its own (PostgreSQL: "
     "no queue, every request's statement at once, up to `pool_size`)."},
    {"admit_batches_in_flight", OG_CFG_INT, 1, 64, "2",
     AT(admit_batches_in_flight),
     "Group commit on PostgreSQL: the most batches of this instance running "
     "at once, each on a store connection of its own. A request that finds "
     "fewer running starts one at once, alone, so a lone admission never "
     "waits for company; the others queue and go together in the next "
     "batch. About the number of CPU cores of the database is a good start; "
     "SQLite runs one (one writer)."},
    {"outcome_batch_max", OG_CFG_INT, 1, OG_ADMIT_BATCH_MAX, "64",
     AT(outcome_batch_max),
     "Group commit of outcomes: the most execution writes (a credit's "
     "recorded outcome, a payout attempt's start) this instance's store "
     "object coalesces into one transaction and one commit: on SQLite one "
     "transaction of savepoints, on PostgreSQL one statement, two writes "
     "of one operation never in one batch (docs/design.md, \"Group commit "
     "of outcomes\"). A batch closes when it is full or when no more "
     "writes are waiting, never on a timer; every write still gets the "
     "answer it would get alone. 1 writes each in a transaction of its "
     "own."},
    {"consume_batch_max", OG_CFG_INT, 1, OG_ADMIT_BATCH_MAX, "64",
     AT(consume_batch_max),
     "Group commit of consume verdicts (`POST /v1/grants/consume`) on "
     "PostgreSQL: the most verdicts one batch holds, one statement and one "
     "commit, `admit_batches_in_flight` batches at once; every verdict "
     "still gets the answer it would get alone (docs/design.md, \"The "
     "consume verdict in batches\"); a lone verdict runs at once, alone. "
     "1 gives each verdict its own statement at once, with no queue "
     "(docs/performance.md, \"VERDICT2\": batches of 64 ran a median "
     "0.98x that at 16 callers and 1.7x at 64). SQLite's verdicts always "
     "share the admissions' batches (`admit_batch_max`)."},
    {"rotate_batch_max", OG_CFG_INT, 1, OG_ADMIT_BATCH_MAX, "64",
     AT(rotate_batch_max),
     "Group commit of ticket rotations (`POST /v1/tickets/rotate`): the "
     "most rotations one batch holds, one commit: on PostgreSQL one "
     "statement, two rotations of one ticket never in one batch, "
     "`admit_batches_in_flight` batches at once; on SQLite savepoints of "
     "the one queue of writes. Every rotation still gets the answer it "
     "would get alone, a reuse still revokes its family before it is "
     "answered (docs/design.md, \"Ticket rotation in batches\"); a lone "
     "rotation runs at once, alone. 1 gives each rotation its own "
     "statement at once, with no queue (docs/performance.md, \"ROTATE\": "
     "batches of 64 ran a median 4.9-10.9x that on SQLite, 1.10-1.42x at "
     "64 clients and 0.86-0.88x at 16 on PostgreSQL)."},
    {"max_body_bytes", OG_CFG_SIZE, 1024, 1048576, "16384", AT(max_body_bytes),
     "Largest request body accepted; a larger one is 413 `body_too_large` "
     "before any of it is parsed."},
    {"max_connections", OG_CFG_INT, 1, 65536, "1024", AT(max_connections),
     "Concurrent HTTP connections (a thread each); one more is answered "
     "503 `retry_later` and closed when accepted."},
    {"drain_timeout_ms", OG_CFG_MS, 0, 600000, "10000", AT(drain_timeout_us),
     "On SIGTERM, how long requests in flight get to finish after the "
     "listening socket closes; then the process exits."},
    {"retry_after_seconds", OG_CFG_INT, 1, 3600, "1", AT(retry_after_s),
     "`Retry-After` on 503 `retry_later` (store unavailable, timed out or "
     "cancelled)."},
    {"http", OG_CFG_OBJECT, 0, 0, NULL, AT(http_max_header_bytes),
     "The HTTP edge's limits and deadlines (the `http.` rows below; "
     "docs/http.md, \"Framing and early refusals\"). Every refusal is a "
     "JSON error and closes the connection."},
    {"http.max_header_bytes", OG_CFG_SIZE, 1024, 65536, "8192",
     AT(http_max_header_bytes),
     "Largest request head (request line and header fields); a larger one "
     "is 431 `headers_too_large`."},
    {"http.max_url_bytes", OG_CFG_SIZE, 64, 8192, "2048",
     AT(http_max_url_bytes),
     "Longest request target; a longer one is 414 `uri_too_long`."},
    {"http.header_timeout_ms", OG_CFG_MS, 100, 600000, "10000",
     AT(http_header_timeout_us),
     "From a request's first byte to the end of its head; past it the "
     "connection is answered 408 `request_timeout` and closed."},
    {"http.body_timeout_ms", OG_CFG_MS, 100, 600000, "30000",
     AT(http_body_timeout_us),
     "From the end of a request's head to the end of its body; past it 408 "
     "`request_timeout` and closed."},
    {"http.idle_timeout_ms", OG_CFG_MS, 100, 3600000, "60000",
     AT(http_idle_timeout_us),
     "How long a kept-alive connection waits for its next request."},
    {"http.max_unauthenticated_per_source", OG_CFG_INT, 1, 65536, "256",
     AT(http_unauth_per_source),
     "Concurrent connections from one source address that have not yet "
     "authenticated a request; one more is answered 429 "
     "`too_many_connections` and closed when accepted. A connection counts "
     "until a request on it authenticates."},
    {"http.refusal_cache_entries", OG_CFG_SIZE, 0, 1048576, "16384",
     AT(http_refusal_cache),
     "Entries of the refusal cache (docs/http.md, \"The refusal cache\"): "
     "grant tokens the store refused as spent or revoked, replays of which "
     "are refused again without the signature check or a store round trip "
     "(about 400 bytes each). 0 turns the cache off."},
    {"rate_limit", OG_CFG_OBJECT, 0, 0, NULL, AT(rl_auth_per_minute),
     "Token buckets (the `rate_limit.` rows below), each kept per principal "
     "and per source address: a request finding its bucket empty is 429 "
     "`rate_limited` with `Retry-After`, counted in "
     "`oncegate_rate_limited_total`."},
    {"rate_limit.auth_failures_per_minute", OG_CFG_INT, 1, 1000000, "600",
     AT(rl_auth_per_minute),
     "Failed authentications (401, and 403 for a principal) refilled per "
     "minute. While a source's bucket is empty its requests to "
     "authenticated routes are 429 before the key is looked at."},
    {"rate_limit.auth_failures_burst", OG_CFG_INT, 1, 1000000, "100",
     AT(rl_auth_burst), "Failed authentications in a burst."},
    {"rate_limit.revocations_per_minute", OG_CFG_INT, 1, 1000000, "6000",
     AT(rl_revoke_per_minute),
     "Revocations (grants and families) refilled per minute, per principal "
     "and per source."},
    {"rate_limit.revocations_burst", OG_CFG_INT, 1, 1000000, "1000",
     AT(rl_revoke_burst), "Revocations in a burst."},
    {"log_file", OG_CFG_STRING, 1, CFG_STR_MAX, "\"-\"", AT(log_file),
     "Where the JSON log lines go: `-` is stderr, else a file opened for "
     "appending (created 0640)."},
    {"recovery_loop", OG_CFG_BOOL, 0, 0, "true", AT(recovery_loop),
     "With a provider: run recovery in the background every half "
     "`timings.recovery_delay_ms` (stalled operations are taken over, "
     "looked up, recorded, or resubmitted with the same key only when the "
     "provider declares atomic same-key handling and before `submit_by`). "
     "Off: run `oncegate recover` instead."},
    {"store_bounds_from_role", OG_CFG_BOOL, 0, 0, "false",
     AT(store_bounds_from_role),
     "PostgreSQL: false sets `statement_timeout` and `lock_timeout` (and "
     "on 17+ `transaction_timeout`) to `timings.store_timeout_ms` on every "
     "store connection. true leaves them to the deployment — `ALTER ROLE "
     "... SET` on a role that runs admissions only, e.g. behind a pooler "
     "that drops session settings — and only checks them: the server "
     "refuses to start when one is missing or longer than "
     "`store_timeout_ms`."},
    {"auto_migrate", OG_CFG_BOOL, 0, 0, "false", AT(auto_migrate),
     "Apply missing store migrations at startup (serialized across "
     "instances). Off: a store whose schema is not current stops startup; "
     "run `oncegate migrate`."},
    {"consumption_keys", OG_CFG_ENUM, 0, 0, "\"as_stored\"",
     AT(consumption_keys),
     "How the store keys its refusal records (docs/design.md, \"Hashed "
     "consumption keys\"): `readable` by (issuer, grant id), `hashed` by "
     "SHA-256 over the length-prefixed pair. Chosen once per store, when "
     "schema 5 is applied: `auto_migrate` creates the store this way. "
     "`readable` or `hashed` also refuse to start on a store that records "
     "the other keys; `as_stored` takes what the store records (a store "
     "migrated without a choice is readable)."},
    {"timings", OG_CFG_OBJECT, 0, 0, NULL, AT(timings),
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
    {"janitor", OG_CFG_OBJECT, 0, 0, NULL, AT(janitor_enabled),
     "Refusal retention (the `janitor.` rows below): the background job that "
     "deletes consumption rows once `retain_until` + "
     "`timings.cleanup_margin_ms` has passed on the store's clock, and "
     "nothing else. `oncegate cleanup` runs the same passes on its own."},
    {"janitor.enabled", OG_CFG_BOOL, 0, 0, "true", AT(janitor_enabled),
     "Run cleanup passes in the background. Off: consumption rows are kept "
     "(the safe direction) unless `oncegate cleanup` runs."},
    {"janitor.interval_ms", OG_CFG_MS, 1000, 86400000, "60000",
     AT(janitor_interval_us),
     "Between the starts of two passes (cleanup, and archiving when "
     "`operations.retention_mode` is not `keep`); the first runs at "
     "startup."},
    {"janitor.batch", OG_CFG_INT, 1, OG_RETENTION_BATCH_MAX, "1000",
     AT(janitor_batch),
     "Rows one statement deletes (operations one statement archives), each "
     "batch its own short transaction: admissions wait for one batch at "
     "most. Keep one batch well inside `timings.store_timeout_ms`."},
    {"janitor.max_batches", OG_CFG_INT, 1, OG_RETENTION_BATCHES_MAX, "100",
     AT(janitor_max_batches),
     "Batches in one pass at most; a pass also ends at the first batch that "
     "takes fewer than `janitor.batch` rows."},
    {"operations", OG_CFG_OBJECT, 0, 0, NULL, AT(retention_mode),
     "Audit retention of operation records (the `operations.` rows below), "
     "separate from refusal retention and much longer."},
    {"operations.retention_mode", OG_CFG_ENUM, 0, 0, "\"keep\"",
     AT(retention_mode),
     "`keep`: operations are never removed. `archive`: a background loop "
     "moves finished operations (succeeded, failed) older than "
     "`operations.audit_retention_days`, with their history, into "
     "`operations_archive` and `operation_events_archive`. `delete`: it "
     "deletes them. Admitted, unknown and needs-reconciliation operations "
     "are never touched. `oncegate archive-operations` runs one pass by "
     "hand."},
    {"operations.audit_retention_days", OG_CFG_INT, 1, 36600, "365",
     AT(audit_retention_days),
     "How long a finished operation stays after its last status change. R1: "
     "at least `max_grant_lifetime` + `issue_time_skew` + "
     "`admission_leeway` + `cleanup_margin`, so an operation record "
     "outlives its grant's refusal record."},
    {"provider", OG_CFG_OBJECT, 0, 0, NULL, AT(provider_url),
     "The billing provider `POST /v1/operations` executes against (the "
     "`provider.` rows below). Without `provider.url` the service admits "
     "only: an admitted operation is answered 202 and nothing executes."},
    {"provider.url", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"", AT(provider_url),
     "The provider's base URL (`http://` or `https://`), e.g. an "
     "`oncegate-sandbox`. Empty: no execution."},
    {"provider.table", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(provider_table),
     "The provider's classification table (a versioned JSON data file, e.g. "
     "`providers/sandbox-credits.v1.json`): every documented answer's "
     "class, and the provider's declared properties. Required with "
     "`provider.url`; its key retention must cover "
     "`timings.provider_key_retention_ms`."},
    {"provider.api_key_file", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(provider_api_key_file),
     "File holding the provider's API key (a secret: read at startup, sent "
     "as a bearer token, never logged). Empty: none."},
    {"provider.keep_alive", OG_CFG_INT, 0, 1024, /* OG_PROVIDER_REUSE_CONNECTIONS_MAX */
     "16", AT(provider_keep_alive),
     "Provider connections kept alive between calls (credit creates and "
     "lookups), shared by every request and recovery. 0: a fresh "
     "connection per call. Used only with a table declaring atomic "
     "same-key handling: libcurl re-sends a request by itself when a kept "
     "connection turns out closed, and only such a provider answers the "
     "re-send, which carries the same key and body, as one request "
     "(docs/design.md, KA1)."},
    {"provider.keep_alive_idle_ms", OG_CFG_MS, 1000, 3600000, "30000",
     AT(provider_keep_alive_idle_us),
     "A kept connection idle this long is closed instead of reused (whole "
     "seconds): keep it below the provider's own idle timeout, so that a "
     "request rarely meets a connection the provider is closing."},
    {"redemption", OG_CFG_OBJECT, 0, 0, NULL, AT(redemption_url),
     "Redeeming external single-use tokens (`POST /v1/redemptions`; the "
     "`redemption.` rows below). Off until `redemption.key_file` is set: "
     "results are credentials and are stored sealed."},
    {"redemption.url", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_url),
     "The token endpoint's base URL (`POST URL/oauth/token`, RFC 6749 "
     "4.1.3), e.g. an `oncegate-sandbox`. Empty: `provider.url`."},
    {"redemption.key_file", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_key_file),
     "File holding the 32-byte key results are sealed with (64 hex digits "
     "or base64; XChaCha20-Poly1305, bound to caller, idempotency key and "
     "token hash). It must be readable by its owner only (chmod 600). Every "
     "instance on one store needs the same key; losing it makes every "
     "stored result unreadable. Empty: redemption off (501). Dev mode "
     "generates `DIR/redemption.key`."},
    {"redemption.api_key_file", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(redemption_api_key_file),
     "File holding the token endpoint's API key, sent as a bearer token "
     "(a secret, never logged). Empty: none."},
    {"redemption.catch_up_timeout_ms", OG_CFG_MS, 1, 600000, "20000",
     AT(redemption_catch_up_us),
     "After the token endpoint answered \"already used\" (or an answer was "
     "lost), how long a redemption keeps looking for the result another "
     "request of the same idempotency key is persisting, backing off from "
     "20 ms to 500 ms; then `redemption_lost`. R2: more than "
     "`timings.provider_timeout_ms` + `timings.store_timeout_ms`, the "
     "longest a winner still in flight needs to persist."},
    /* Server-issued operation ids (docs/design.md, "Server-issued
     * operation ids"). */
    {"operation_ids", OG_CFG_OBJECT, 0, 0, NULL, AT(opid_mac_key_file),
     "Operation ids the service hands out with each grant it issues "
     "(`POST /v1/grants` answers `operation_id`, and `operation_mac` when "
     "a key is set), and whether admission requires their MAC (the "
     "`operation_ids.` rows below)."},
    {"operation_ids.mac_key_file", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(opid_mac_key_file),
     "File holding the 32-byte key of the operation-id MAC, as 64 hex "
     "digits (HMAC-SHA-256 over issuer, grant id and operation id). It must "
     "be readable by its owner only (chmod 600), and every instance that "
     "issues or admits needs the same key; it is read at startup and never "
     "logged. Empty: no MAC is issued, and one sent to `POST /v1/operations` "
     "is refused (422 `operation_mac_unverifiable`)."},
    {"operation_ids.require_mac", OG_CFG_BOOL, 0, 0, "false",
     AT(opid_require_mac),
     "true: `POST /v1/operations` refuses an operation id without a valid "
     "`operation_mac` for its grant (403 `operation_mac_required` or "
     "`operation_mac_invalid`), so only ids this service handed out are "
     "admitted. Requires `operation_ids.mac_key_file`."},
    /* ---- tokens: the grant token's explicit type ---- */
    {"tokens", OG_CFG_OBJECT, 0, 0, NULL, AT(tokens_accept_legacy_typ),
     "Grant tokens (docs/design.md, \"Explicit token type\"; the `tokens.` "
     "row below). Grants are issued with `typ` `oncegate-grant+jwt`, "
     "compared case-insensitively; a token of any other type is refused "
     "(403 `grant_not_valid`, reason `grant.wrong_type`)."},
    {"tokens.accept_legacy_typ", OG_CFG_BOOL, 0, 0, "true",
     AT(tokens_accept_legacy_typ),
     "true: a grant typed `JWT` (or untyped), as the previous release "
     "issued them, is still accepted, with every other check unchanged, so "
     "a rolling upgrade refuses no outstanding grant. Set it to false once "
     "every instance that issues grants runs this release and "
     "`timings.max_grant_lifetime_ms` has passed since the last one was "
     "upgraded: from then on only `oncegate-grant+jwt` passes. The next "
     "release makes false the default."},
    /* ---- payouts: the payout pipeline (payout_runner.c) ---- */
    {"payouts", OG_CFG_OBJECT, 0, 0, NULL, AT(payouts_runner),
     "The payout pipeline (docs/payouts.md, sections 5 and 6; the "
     "`payouts.` rows below): workers, the sweeper, the reconciler and the "
     "expiry of unused grants, inside `serve` when `payouts.runner` is on "
     "and in `oncegate payout-worker --config FILE`. The relations R3-R7 "
     "between these timings and `timings.` are checked at startup wherever "
     "the pipeline runs."},
    {"payouts.runner", OG_CFG_BOOL, 0, 0, "false", AT(payouts_runner),
     "Run the payout pipeline inside `serve` (dev mode: on, with short "
     "timings: the dev mode section below). Off: run "
     "`oncegate payout-worker --config FILE` instead."},
    {"payouts.provider_url", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(payouts_provider_url),
     "The payout provider's base URL. Empty: `provider.url`."},
    {"payouts.provider_table", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(payouts_table),
     "The payouts classification table (e.g. "
     "`providers/sandbox-payouts.v1.json`). Required when the pipeline "
     "runs."},
    {"payouts.api_key_file", OG_CFG_PATH_OPT, 0, CFG_STR_MAX, "\"\"",
     AT(payouts_api_key_file),
     "File holding the payout provider's API key (a secret: read only when "
     "an attempt is about to be sent or looked up, wiped after, never "
     "logged). Empty: `provider.api_key_file`."},
    {"payouts.worker_id", OG_CFG_ID, 1, OG_ID_MAX, "\"payout-worker\"",
     AT(payouts_worker_id),
     "The worker's principal: a configured principal with the "
     "`payout-worker` role (checked when the pipeline starts; dev mode: "
     "`dev-payout-worker`), the attempt's caller and every write's actor "
     "(suffixed `-1`, `-2`, ... with several workers). It is also the "
     "payout grants' audience, the one source of it: the decisions of this "
     "instance issue grants to it, and its workers present it (a grant "
     "naming another is refused `presenter.not-audience`, a security "
     "signal). Instances that decide and a separate `oncegate "
     "payout-worker` fleet name the same principal."},
    {"payouts.workers", OG_CFG_INT, 0, 64, "1", AT(payouts_workers),
     "Worker threads (0: none; the sweeper and reconciler still run)."},
    {"payouts.send_window_ms", OG_CFG_MS, 1, 86400000, "300000",
     AT(payouts_send_window_us),
     "From a claim to `submit_by`, the last moment a create may be sent "
     "(also the provider's `expires_at`). R4: more than `max_sends` x "
     "`timings.provider_timeout_ms`."},
    {"payouts.attempt_lease_ms", OG_CFG_MS, 1, 86400000, "120000",
     AT(payouts_attempt_lease_us),
     "How long the claiming worker owns its attempt; past it the sweeper "
     "takes it over. R3: more than `max_sends` x "
     "`timings.provider_timeout_ms` + `record_timeout_ms` + "
     "`timings.store_timeout_ms`."},
    {"payouts.job_lease_ms", OG_CFG_MS, 1, 86400000, "60000",
     AT(payouts_job_lease_us),
     "A job's delivery lease: past it the job is delivered again (a "
     "redelivery of a claimed job is a harmless duplicate). R5: more than "
     "3 x `timings.store_timeout_ms` (take, validation, claim)."},
    {"payouts.record_timeout_ms", OG_CFG_MS, 0, 86400000, "10000",
     AT(payouts_record_timeout_us),
     "How long a worker retries recording an outcome after a store "
     "failure. R3."},
    {"payouts.postpone_ms", OG_CFG_MS, 0, 86400000, "30000",
     AT(payouts_postpone_us),
     "A postponed job (context unreadable, window not open) comes again "
     "after this."},
    {"payouts.max_sends", OG_CFG_INT, 1, 100, "3", AT(payouts_max_sends),
     "Same-key sends of one attempt at most. R3, R4."},
    {"payouts.clock_error_ms", OG_CFG_MS, 0, 3600000, "0",
     AT(payouts_clock_error_us),
     "How far the store's clock may run behind the provider's: added to "
     "the provider's processing window for an attempt's final-absence "
     "cutoff."},
    {"payouts.poll_ms", OG_CFG_MS, 1, 60000, "200", AT(payouts_poll_us),
     "An idle worker waits this long before taking again."},
    {"payouts.interval_ms", OG_CFG_MS, 1, 3600000, "1000",
     AT(payouts_interval_us),
     "Between two passes of the sweeper, of the reconciler and of the "
     "expiry of unused grants. R6."},
    {"payouts.backoff_ms", OG_CFG_STRING, 1, 256,
     "\"60000,120000,300000,900000\"", AT(payouts_backoff),
     "The reconciler's waits after the Nth lookup of an Unknown attempt, "
     "milliseconds, comma-separated, 1-16 steps (the last repeats). R6: "
     "each at least `interval_ms`; R7."},
    {"payouts.escalate_after_ms", OG_CFG_MS, 0, 31622400000, "3600000",
     AT(payouts_escalate_after_us),
     "An Unknown attempt still unresolved this long past `submit_by` (and "
     "never before its final-absence cutoff) becomes NeedsReconciliation. "
     "R7: at least the first backoff step."},
    {"payouts.max_per_pass", OG_CFG_INT, 1, 1000, "100",
     AT(payouts_max_per_pass),
     "The reconciler's bounded rate: lookups per pass."},
    {"payouts.sweep_limit", OG_CFG_INT, 1, 1000, "100",
     AT(payouts_sweep_limit),
     "Attempts one sweeper pass takes over at most."},
    /* ---- end of payouts ---- */
    {"principals", OG_CFG_PRINCIPALS, 0, OG_CFG_PRINCIPALS_MAX, "[]",
     AT(principals),
     "Who may call: objects `{\"id\", \"roles\", \"api_key_sha256\"}`. `id` "
     "follows the identifier rule and is unique; `roles` is a non-empty "
     "list of `issuer`, `agent`, `enforcer`, `revoker`, `operator`, "
     "`payout-admin`, `clerk`, `approver`; optional `approval_limit_minor` "
     "(a clerk's or an approver's approval limit in minor units of a "
     "payout's currency, default 0: every payout escalates); "
     "`payout-worker` (the payout pipeline's principal, "
     "`payouts.worker_id`); "
     "`api_key_sha256` is the SHA-256 of the API key as 64 lower-case hex "
     "characters, unique (the key itself is never configured). Reloaded on "
     "SIGHUP."},
};
const size_t og_srv_cfg_n_keys =
    sizeof og_srv_cfg_keys / sizeof og_srv_cfg_keys[0];

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
    /* ---- payouts (payout_runner.c) ---- */
    "R3: `payouts.attempt_lease` > `payouts.max_sends` x `provider_timeout` "
    "+ `payouts.record_timeout` + `store_timeout`: the sweeper never takes "
    "over an attempt whose worker may still be sending or recording.",
    "R4: `payouts.send_window` > `payouts.max_sends` x `provider_timeout`: "
    "every same-key send fits before `submit_by`.",
    "R5: `payouts.job_lease` > 3 x `store_timeout`: a job's take, "
    "validation and claim fit in one delivery lease.",
    "R6: every `payouts.backoff` step >= `payouts.interval`: a reconciler "
    "pass comes often enough to honour the shortest wait.",
    "R7: `payouts.escalate_after` >= the first `payouts.backoff` step: an "
    "Unknown attempt is looked up at least once before it is escalated.",
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
 * Reading the table (config_table.h).
 * ========================================================================= */

const void *og_srv_cfg_at_const(const og_srv_cfg_key *k,
                                const og_srv_config *c)
{
    return (const char *)c + k->off;
}

/* The names of enum row k (cfg_enums): never NULL for a row of the table
 * (a test renders every row). */
const char *const *og_srv_cfg_names(const og_srv_cfg_key *k)
{
    static const char *const none[] = {NULL};

    for (size_t i = 0; i < sizeof cfg_enums / sizeof cfg_enums[0]; i++)
        if (cfg_enums[i].off == k->off)
            return cfg_enums[i].names;
    return none;
}

/* The number of names of enum row k. */
int og_srv_cfg_enum_count(const og_srv_cfg_key *k)
{
    const char *const *names = og_srv_cfg_names(k);
    int n = 0;

    while (names[n])
        n++;
    return n;
}

/* Writes the names of enum row k as `"a", "b" or "c"` (quote: the
 * character around each name) into buf. Returns buf. */
const char *og_srv_cfg_enum_list(const og_srv_cfg_key *k, char quote,
                                 char *buf, size_t len)
{
    const char *const *names = og_srv_cfg_names(k);
    int n = og_srv_cfg_enum_count(k);
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
static const char *doc_type(const og_srv_cfg_key *k)
{
    switch (k->type) {
    case OG_CFG_OBJECT:
        return "object";
    case OG_CFG_STRING:
    case OG_CFG_PATH_OPT:
        return "string";
    case OG_CFG_ID:
        return "string (identifier)";
    case OG_CFG_ISSUER:
        return "string (identifier, file name)";
    case OG_CFG_LISTEN:
        return "string (`HOST:PORT`)";
    case OG_CFG_ENUM:
        return "string"; /* the caller lists the names */
    case OG_CFG_INT:
    case OG_CFG_SIZE:
        return "integer";
    case OG_CFG_MS:
        return "integer (ms)";
    case OG_CFG_BOOL:
        return "boolean";
    case OG_CFG_PRINCIPALS:
        return "array of objects";
    }
    return "?";
}

/* Row k's default as JSON text into buf: its def, or for a timing
 * og_timings_default()'s. 0, or -1 when it has none or it does not fit. */
static int cfg_default_text(const og_srv_cfg_key *k, char *buf, size_t len)
{
    og_srv_config d;
    int n;

    if (k->def)
        n = snprintf(buf, len, "%s", k->def);
    else if (k->type == OG_CFG_MS) {
        memset(&d, 0, sizeof d);
        og_timings_default(&d.timings);
        n = snprintf(buf, len, "%" PRId64,
                     *(const int64_t *)og_srv_cfg_at_const(k, &d) / 1000);
    } else
        return -1;
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

int og_srv_config_default_text(const char *name, char *buf, size_t len)
{
    for (size_t i = 0; name && i < og_srv_cfg_n_keys; i++)
        if (strcmp(og_srv_cfg_keys[i].name, name) == 0)
            return cfg_default_text(&og_srv_cfg_keys[i], buf, len);
    return -1;
}

/* Writes the default column of row k; timings show og_timings_default(). */
static void doc_default(FILE *f, const og_srv_cfg_key *k)
{
    char buf[4200];

    if (k->def) {
        fprintf(f, " `%s` |", k->def);
        return;
    }
    if (cfg_default_text(k, buf + 1, sizeof buf - 2) != 0) {
        doc_cell(f, "-");
        return;
    }
    buf[0] = '`';
    strcat(buf, "`");
    doc_cell(f, buf);
}

/* Writes the bounds column of row k. */
static void doc_bounds(FILE *f, const og_srv_cfg_key *k)
{
    char buf[96];

    switch (k->type) {
    case OG_CFG_INT:
    case OG_CFG_SIZE:
    case OG_CFG_MS:
        snprintf(buf, sizeof buf, "%" PRId64 " ... %" PRId64, k->min, k->max);
        break;
    case OG_CFG_STRING:
    case OG_CFG_PATH_OPT:
        snprintf(buf, sizeof buf, "%" PRId64 " ... %" PRId64 " bytes", k->min,
                 k->max);
        break;
    case OG_CFG_ID:
        snprintf(buf, sizeof buf, "1 ... %d printable ASCII, no spaces",
                 OG_ID_MAX);
        break;
    case OG_CFG_ISSUER:
        snprintf(buf, sizeof buf,
                 "1 ... %d of `[A-Za-z0-9._~-]`, not starting with `.`",
                 OG_ID_MAX);
        break;
    case OG_CFG_LISTEN:
        snprintf(buf, sizeof buf, "IP literal; port %" PRId64 " ... %" PRId64,
                 k->min, k->max);
        break;
    case OG_CFG_PRINCIPALS:
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
    for (size_t i = 0; i < og_srv_cfg_n_keys; i++) {
        const og_srv_cfg_key *k = &og_srv_cfg_keys[i];
        char name[OG_CFG_NAME_MAX + 3];

        snprintf(name, sizeof name, "`%s`", k->name);
        fputc('|', f);
        doc_cell(f, name);
        if (k->type == OG_CFG_ENUM) {
            char list[128], type[160];

            snprintf(type, sizeof type, "string (%s)",
                     og_srv_cfg_enum_list(k, '`', list, sizeof list));
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
    fputs("\n"
          "## Dev mode\n"
          "\n"
          "`oncegate serve --dev` sets these keys before it reads `--config "
          "FILE` (a file's values win), so recovery, cleanup and the payout "
          "pipeline are seen within seconds; the relations above hold with "
          "them. `oncegate help serve` prints the same table (both come from "
          "`og_srv_dev_overrides` in src/serve/dev.c, the values dev mode "
          "applies). It also generates the issuer key, the principals "
          "(`DIR/dev-credentials.json`), `redemption.key_file` "
          "(`DIR/redemption.key`) and `operation_ids.mac_key_file` "
          "(`DIR/operation-id.key`) unless the configuration names them.\n"
          "\n",
          f);
    og_srv_dev_overrides_print(f, true);
}

