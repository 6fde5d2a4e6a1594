/*
 * oncegate.h — the public C API of oncegate. Anything not declared here is
 * not API.
 *
 * oncegate admits a signed single-use grant at most once across every
 * instance, retry and restart: ONE atomic conditional write in a shared,
 * durable store claims the grant key (issuer, grant_id) and records the
 * operation intent in the same statement. See docs/design.md for the
 * guarantee and its boundaries.
 *
 * Conventions (see STYLE.md):
 *  - Functions return 0 (or a documented non-negative outcome) on success and
 *    a negative OG_E* code on error. og_strerror() and og_err_name() describe
 *    a code; both are generated from the one list OG_ERRNO_MAP.
 *  - An expected outcome (admitted, already admitted, refused) is a value the
 *    caller must handle, never an error.
 *  - Out-parameters are written only on success.
 *  - og_x_free(NULL) is a no-op.
 *  - Every string the API takes is borrowed for the duration of the call;
 *    every record it returns is a plain struct with fixed-size buffers the
 *    caller owns.
 */
#ifndef ONCEGATE_H
#define ONCEGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define OG_MUST_CHECK __attribute__((warn_unused_result))
#else
#define OG_MUST_CHECK
#endif

#define OG_VERSION "0.1.0"

/* ---------------------------------------------------------------------------
 * Errors. X(NAME, stable_code, message). Codes are OG_E<NAME> = -(index+1).
 * The stable code string is part of the API: logs, CLIs and HTTP bodies use
 * it, and it never changes meaning.
 * ------------------------------------------------------------------------- */
#define OG_ERRNO_MAP(X)                                                        \
    X(NOMEM, "out_of_memory", "out of memory")                                 \
    X(INVAL, "invalid_argument", "invalid argument")                           \
    X(STORE_UNAVAILABLE, "store_unavailable",                                  \
      "store unavailable, timed out, cancelled or commit unconfirmed: the "    \
      "write may or may not have happened; retry with the same operation id")  \
    X(INTERNAL, "internal_error",                                              \
      "internal error: the store reported an unexpected failure")              \
    X(SCHEMA, "schema_mismatch",                                               \
      "store schema version does not match this build; run oncegate migrate")  \
    X(BAD_URL, "store_url_invalid",                                            \
      "store URL not understood (use sqlite:PATH or postgres://...)")          \
    X(ISSUER, "input.issuer_invalid",                                          \
      "issuer must be 1-128 printable ASCII characters without spaces")        \
    X(GRANT_ID, "input.grant_id_invalid",                                      \
      "grant id must be 1-128 printable ASCII characters without spaces")      \
    X(OPERATION_ID, "input.operation_id_invalid",                              \
      "operation id must be a non-nil UUID (8-4-4-4-12 hex)")                  \
    X(CALLER, "input.caller_invalid",                                          \
      "caller id must be 1-128 printable ASCII characters without spaces")     \
    X(ACCOUNT, "input.account_invalid",                                        \
      "account id must be 1-128 printable ASCII characters without spaces")    \
    X(AMOUNT, "input.amount_invalid",                                          \
      "amount must be a positive decimal (digits, optional '.' and up to 18 "  \
      "fraction digits, at most 38 significant digits), no sign or exponent")  \
    X(CURRENCY, "input.currency_invalid",                                      \
      "currency must be an ISO 4217 code: three upper-case letters")           \
    X(EXPIRES_AT, "input.expires_at_invalid",                                  \
      "expires_at must be an RFC 3339 timestamp with a time zone, "            \
      "between 1970 and 9999")                                                 \
    X(TIMINGS, "config.timings_invalid",                                       \
      "timing values violate a required relation")                             \
    X(GRANT_MALFORMED, "grant.malformed",                                      \
      "grant token malformed: not a compact JWS of the accepted form, a "      \
      "header member or claim missing, unknown, duplicated or of the wrong "   \
      "type, or base64url that is not canonical")                              \
    X(GRANT_TOO_LARGE, "grant.too_large",                                      \
      "grant token longer than OG_TOKEN_MAX bytes")                            \
    X(GRANT_UNSUPPORTED_ALG, "grant.unsupported_alg",                          \
      "grant token alg is not EdDSA; none, HMAC and every other algorithm "    \
      "are refused")                                                           \
    X(GRANT_UNKNOWN_ISSUER, "grant.unknown_issuer",                            \
      "no verification key is configured for the grant's issuer")              \
    X(GRANT_UNKNOWN_KEY, "grant.unknown_key",                                  \
      "the grant's kid is not a configured key of its issuer")                 \
    X(GRANT_BAD_SIGNATURE, "grant.bad_signature",                              \
      "grant signature does not verify")                                       \
    X(GRANT_WRONG_AUDIENCE, "grant.wrong_audience",                            \
      "grant is addressed to another service (aud)")                           \
    X(GRANT_NOT_YET_VALID, "grant.not_yet_valid",                              \
      "grant not valid yet: nbf is later than now plus the admission leeway")  \
    X(GRANT_EXPIRED, "grant.expired",                                          \
      "grant expired: exp plus the admission leeway has passed")               \
    X(GRANT_LIFETIME_EXCEEDED, "grant.lifetime_exceeded",                      \
      "grant lifetime (exp - iat) exceeds the configured maximum")             \
    X(GRANT_ISSUED_IN_FUTURE, "grant.issued_in_future",                        \
      "grant iat is ahead of this clock by more than the allowed skew")        \
    X(GRANT_SUBJECT_MISMATCH, "grant.subject_mismatch",                        \
      "grant names another principal: sub is not the authenticated caller")    \
    X(GRANT_ACTION_MISMATCH, "grant.action_mismatch",                          \
      "grant is for another operation (act)")                                  \
    X(GRANT_BINDING_MISMATCH, "grant.binding_mismatch",                        \
      "request account, amount or currency differs from the grant's bound "    \
      "parameters")                                                            \
    X(KEY_INVALID, "key.invalid",                                              \
      "key is not an Ed25519 OKP JWK (RFC 8037) of the accepted form")         \
    X(KEY_DUPLICATE, "key.duplicate",                                          \
      "a key with this kid is already configured for this issuer")             \
    X(KEY_EXISTS, "key.exists",                                                \
      "a key file of that name already exists; keys are never overwritten")    \
    X(KEY_IO, "key.io_error",                                                  \
      "a key file or directory could not be read or written")                  \
    X(FAMILY, "input.family_invalid",                                          \
      "family must be 1-128 printable ASCII characters without spaces")        \
    X(SUBJECT, "input.subject_invalid",                                        \
      "subject must be 1-128 printable ASCII characters without spaces")       \
    X(ACTION, "input.action_invalid",                                          \
      "action must be 1-128 printable ASCII characters without spaces")        \
    X(DIGEST, "input.params_digest_invalid",                                   \
      "params digest must be 64 lower-case hex characters (SHA-256)")          \
    X(REVOKER, "input.revoker_invalid",                                        \
      "revoker must be 1-128 printable ASCII characters without spaces")       \
    X(TICKET, "input.ticket_invalid",                                          \
      "ticket must be 43 base64url characters")                                \
    X(REASON, "input.reason_invalid",                                          \
      "reason must be 1-64 printable ASCII characters without spaces")         \
    X(EVIDENCE, "input.evidence_invalid",                                      \
      "evidence must be 1-1024 bytes of UTF-8 text without control "           \
      "characters other than newline and tab")                                 \
    X(ACTOR, "input.actor_invalid",                                            \
      "actor must be 1-128 printable ASCII characters without spaces")         \
    X(PROVIDER_REFERENCE, "input.provider_reference_invalid",                  \
      "provider reference must be 1-128 printable ASCII characters without "   \
      "spaces")                                                                \
    X(TRANSITION, "input.transition_invalid",                                  \
      "that status change is not allowed (see the transition table)")          \
    X(FORM, "input.form_invalid", "grant form must be token or row")          \
    X(PROVIDER_UNAVAILABLE, "provider_unavailable",                            \
      "billing provider unreachable, timed out or answered outside its "       \
      "documented contract: nothing is known about the effect")                \
    X(STORE_KEYS, "store.consumption_keys_mismatch",                           \
      "the store's consumption keys (readable or hashed) were fixed when its " \
      "schema reached version 5 and differ from the ones asked for")           \
    X(IDEMPOTENCY_KEY, "input.idempotency_key_invalid",                        \
      "idempotency key must be 1-128 printable ASCII characters without "      \
      "spaces")                                                                \
    X(CODE, "input.code_invalid",                                              \
      "code must be 1-1024 printable ASCII characters (RFC 6749 VSCHAR)")      \
    X(CODE_HASH, "input.code_hash_invalid",                                    \
      "code hash must be 64 lower-case hex characters (SHA-256)")              \
    X(SEALED, "input.sealed_invalid",                                          \
      "a sealed redemption result must be 17 to OG_REDEMPTION_SEALED_MAX "     \
      "bytes with a 24-byte nonce")                                            \
    X(REDEMPTION_KEY, "redemption.key_invalid",                                \
      "the redemption key file must be a regular file readable by its owner "  \
      "only, holding 32 bytes as 64 hex digits or as base64")                  \
    X(REDEMPTION_UNDECRYPTABLE, "redemption.undecryptable",                    \
      "a stored redemption result does not decrypt with the configured "       \
      "redemption key: another key, or the record was altered")                \
    X(STOPPED, "stopped",                                                      \
      "stopped before deciding (the service is shutting down): nothing was "   \
      "decided and nothing is lost; retry the same request")                   \
    X(CLIENT_REFERENCE, "input.client_reference_invalid",                      \
      "client reference must be 1-128 printable ASCII characters without "     \
      "spaces")                                                                \
    X(PAYOUT_TENANT, "input.tenant_id_invalid",                                \
      "tenant id must be 1-128 printable ASCII characters without spaces")     \
    X(PAYOUT_BENEFICIARY, "input.beneficiary_id_invalid",                      \
      "beneficiary id must be 1-128 printable ASCII characters without "       \
      "spaces")                                                                \
    X(PAYOUT_DESTINATION, "input.destination_id_invalid",                      \
      "destination id must be 1-128 printable ASCII characters without "       \
      "spaces")                                                                \
    X(PAYOUT_DESTINATION_VERSION, "input.destination_version_invalid",         \
      "destination version must be an integer >= 1")                           \
    X(PAYOUT_CURRENCY, "input.payout_currency_invalid",                        \
      "payout currency must be an upper-case ISO 4217 code with minor units "  \
      "(funds, precious metals and testing codes are refused)")                \
    X(PAYOUT_AMOUNT, "input.payout_amount_invalid",                            \
      "payout amount must be a positive decimal at most at its currency's "    \
      "minor-unit scale (fewer fraction digits are padded), without sign, "    \
      "exponent, spaces or leading zeros, and at most 999999999999999 minor "  \
      "units")                                                                 \
    X(PAYOUT_PURPOSE, "input.purpose_invalid",                                 \
      "purpose must be printable ASCII (0x20-0x7e), at most 1024 bytes, and "  \
      "1-140 bytes once surrounding spaces are trimmed and inner runs of "     \
      "spaces collapsed; an absent purpose is NULL, not empty")                \
    X(PAYOUT_FINGERPRINT, "input.terms_fingerprint_invalid",                   \
      "terms fingerprint must be 64 lower-case hex characters (SHA-256)")      \
    X(PAYOUT_CONTEXT, "input.payout_context_invalid",                          \
      "payout context inconsistent: an amount or total below 0, a version "    \
      "below 1, a state or status outside its list, a bad destination "        \
      "beneficiary id, or reserved_today without this payout's reservation")   \
    X(PAYOUT_INTENT_MISMATCH, "input.payout_intent_mismatch",                  \
      "the intent's terms differ from the payout record's: an intent is "      \
      "bound from the authoritative record, never from a request body")        \
    X(DESTINATION, "input.destination_invalid",                                \
      "payout destination must be 1-128 printable ASCII characters without "   \
      "spaces")                                                                \
    X(PAYOUT_ID, "input.payout_id_invalid",                                    \
      "payout id must be 1-128 printable ASCII characters without spaces")     \
    X(PAYOUT_OFFSET, "input.settlement_offset_invalid",                        \
      "a settlement offset must be whole minutes from -840 to 840 "            \
      "(UTC-14:00 to UTC+14:00)")                                              \
    X(PAYOUT_LIMIT, "input.payout_limit_invalid",                              \
      "a daily limit or an approval limit must be 0 to 999999999999999999 "    \
      "minor units of its currency")                                           \
    X(PAYOUT_WINDOW, "input.grant_window_invalid",                             \
      "a payout grant's window must have 1970 <= not_before < expires_at <= "  \
      "9999-12-31 and last at most the store's max_grant_lifetime")            \
    X(PAYOUT_REQUESTER, "input.requester_invalid",                             \
      "requester id and role must be 1-128 printable ASCII characters "        \
      "without spaces")                                                        \
    X(PAYOUT_CORRELATION, "input.correlation_id_invalid",                      \
      "correlation id must be 1-128 printable ASCII characters without "       \
      "spaces")                                                                \
    X(PAYOUT_TOKEN, "input.provider_token_invalid",                            \
      "provider token must be 1-512 printable ASCII characters without "       \
      "spaces")                                                                \
    X(PAYOUT_JOB, "input.job_id_invalid",                                      \
      "job id must be a non-nil UUID (8-4-4-4-12 hex)")                        \
    X(PAYOUT_VERSION, "input.record_version_invalid",                          \
      "a record version must be >= 1, or 0 where the call gives 0 a meaning "  \
      "(create; the version as read)")

enum {
#define OG__ERR_ENUM(name, code, msg) OG__ERR_IDX_##name,
    OG_ERRNO_MAP(OG__ERR_ENUM)
#undef OG__ERR_ENUM
    OG__ERR_COUNT
};
#define OG__ERR_DEFINE(name, code, msg) OG_E##name = -(OG__ERR_IDX_##name + 1),
enum og_errno { OG_ERRNO_MAP(OG__ERR_DEFINE) };
#undef OG__ERR_DEFINE

/* A human-readable message for err (an OG_E* code); "unknown error" else. */
const char *og_strerror(int err);
/* The stable code string for err, e.g. "store_unavailable". */
const char *og_err_name(int err);

/* ---------------------------------------------------------------------------
 * Limits, checked before anything reaches the store.
 * ------------------------------------------------------------------------- */
#define OG_ID_MAX 128          /* issuer, grant id, caller id, account id */
#define OG_UUID_LEN 36         /* canonical lower-case 8-4-4-4-12 */
#define OG_AMOUNT_MAX 40       /* canonical decimal text (38 digits + '.') */
#define OG_AMOUNT_DIGITS 38    /* significant digits */
#define OG_AMOUNT_SCALE 18     /* fraction digits */
#define OG_CURRENCY_LEN 3
#define OG_REASON_MAX 64       /* a reason code: 1-64 printable ASCII */
#define OG_EVIDENCE_MAX 1024   /* an operator's evidence text, UTF-8 */

/* ---------------------------------------------------------------------------
 * Timing values. One object; relations are checked by og_timings_check().
 * All durations are in microseconds.
 * ------------------------------------------------------------------------- */
typedef struct og_timings {
    int64_t admission_leeway_us;  /* clock tolerance on the admission deadline;
                                     the ONE value validation, admission and
                                     retention use */
    int64_t execution_lease_us;   /* the admitting handler's ownership */
    int64_t lease_margin_us;      /* slack the execution lease keeps beyond
                                     everything it must cover */
    int64_t submission_window_us; /* admission -> submit_by */
    int64_t store_timeout_us;     /* longest a store call may take, client
                                     side, and (PostgreSQL) the admission
                                     connections' statement_timeout and
                                     lock_timeout: the admission bound */
    int64_t provider_timeout_us;  /* the provider (billing) call's own
                                     timeout, not the request's */
    int64_t recovery_lease_us;    /* recovery's ownership after a takeover */
    int64_t recovery_delay_us;    /* longest before recovery picks up an
                                     operation whose lease ended */
    int64_t provider_key_retention_us; /* how long the provider documents
                                     that it keeps an idempotency key */
    int64_t provider_clock_margin_us;  /* safety margin against the key
                                     retention, incl. clock differences */
    int64_t cleanup_margin_us;    /* extra time before cleanup deletes
                                     refusal records */
    int64_t max_clock_step_us;    /* largest clock step allowed on the store
                                     host */
    int64_t commit_bound_us;      /* the deployment's bound on an admission's
                                     commit, which no server timeout covers
                                     (a synchronous-replication wait: bounded
                                     by failover policy); 0 = commits never
                                     wait for a standby */
    int64_t max_grant_lifetime_us;/* validators refuse exp - iat above it;
                                     fallback revocation retention */
    int64_t issue_time_skew_us;   /* validators refuse iat ahead of now by
                                     more; fallback revocation retention */
} og_timings;

/* Fills *t with the defaults: leeway 30 s, execution lease 60 s, lease
 * margin 5 s, submission window 1 h, store timeout 5 s, provider timeout
 * 10 s, recovery lease 60 s, recovery delay 10 s, provider key retention
 * 24 h, provider clock margin 5 min, cleanup margin 5 min, clock step 10 s,
 * max grant lifetime 1 h, issue-time skew 30 s, commit bound 0. */
void og_timings_default(og_timings *t);

/* Checks every relation between the values (seed 000, "The timing values in
 * one place"; lib/core/timings.c lists them as T1..T12). Returns 0, or
 * OG_ETIMINGS and, when why is non-NULL, a static sentence naming the
 * relation that failed. */
OG_MUST_CHECK int og_timings_check(const og_timings *t, const char **why);

/* Raises execution_lease, recovery_lease and submission_window (and
 * cleanup_margin) to the smallest values the relations allow for t's
 * timeouts, leaving larger values alone. For tools and tests that set a
 * short or long store timeout; a server configuration is checked, never
 * fitted. */
void og_timings_fit(og_timings *t);

/* ---------------------------------------------------------------------------
 * Store.
 * ------------------------------------------------------------------------- */
typedef struct og_store og_store;

#define OG_DEFAULT_STORE_URL "sqlite:./oncegate.db"

/* How a store keys its consumption records (docs/design.md, "Hashed
 * consumption keys"). Chosen once per store, by the migration that brings
 * it to schema 5, and recorded in the store (og_store_settings), so every
 * store object and process that opens it agrees:
 *   OG_KEYS_READABLE  grant_consumptions is keyed by (issuer, grant_id);
 *   OG_KEYS_HASHED    it is keyed by og_consumption_key(issuer, grant_id)
 *                     alone: fixed-size keys, and no readable identifier in
 *                     the table (the operation record keeps them).
 * OG_KEYS_AS_STORED is for options only: whatever the store records, and
 * READABLE for a store that schema 5 creates. */
typedef enum og_consumption_keys {
    OG_KEYS_AS_STORED = 0,
    OG_KEYS_READABLE = 1,
    OG_KEYS_HASHED = 2,
} og_consumption_keys;

typedef struct og_store_options {
    og_timings timings;
    int pool_size;    /* max connections held by this store object (>=1);
                         concurrent callers beyond it wait for one */
    bool session_bounds_from_role; /* PostgreSQL: false (default) sets
                         statement_timeout, lock_timeout (and on 17+
                         transaction_timeout) to store_timeout on every
                         connection; true leaves them to the deployment
                         (ALTER ROLE ... SET, e.g. behind a pooler that
                         drops session settings) and only
                         og_store_session_bounds() checks them */
    og_consumption_keys consumption_keys; /* og_store_migrate: the mode a
                         store gets when migration 5 runs; og_store_open and
                         og_store_migrate refuse a store recorded otherwise
                         (OG_ESTORE_KEYS). AS_STORED accepts either. */
} og_store_options;

/* Fills *o with defaults: og_timings_default(), a pool of 16 and
 * OG_KEYS_AS_STORED. */
void og_store_options_default(og_store_options *o);

/* "readable", "hashed" (or "as_stored"); "?" for a bad value. */
const char *og_consumption_keys_name(og_consumption_keys k);
/* Parses "readable" or "hashed". 0, or OG_EINVAL. */
OG_MUST_CHECK int og_consumption_keys_parse(const char *text,
                                            og_consumption_keys *out);

/* The key a hashed store claims (issuer, grant_id) under:
 *   SHA-256( u32be(len(issuer)) || issuer || u32be(len(grant_id)) ||
 *            grant_id )
 * lengths in bytes, so ("ab","c") and ("a","bc") differ. Both engines
 * compute the same bytes in SQL as og_consumption_key(issuer, grant_id).
 * Returns 0 and out, OG_EISSUER or OG_EGRANT_ID (og_id_valid), OG_EINVAL. */
#define OG_CONSUMPTION_KEY_LEN 32
OG_MUST_CHECK int og_consumption_key(const char *issuer, const char *grant_id,
                                     unsigned char out[OG_CONSUMPTION_KEY_LEN]);

/* Opens a store from a URL:
 *   sqlite:PATH                 embedded SQLite (the default)
 *   postgres://..., postgresql://...  a libpq URI, including multi-host
 *                               URIs with target_session_attrs=read-write
 *   "host=... dbname=..."       a libpq key=value connection string
 * opts may be NULL for defaults. Connects once and checks that the schema
 * version equals OG_SCHEMA_VERSION (OG_ESCHEMA otherwise: run migrations),
 * then reads the store's consumption keys, which every statement of this
 * store object follows (OG_ESTORE_KEYS when opts asks for the other mode).
 * On success *out owns the store; free it with og_store_free().
 * Errors: OG_EBAD_URL, OG_ETIMINGS, OG_ESCHEMA, OG_ESTORE_KEYS,
 * OG_ESTORE_UNAVAILABLE, OG_ENOMEM, OG_EINTERNAL. */
OG_MUST_CHECK int og_store_open(const char *url, const og_store_options *opts,
                                og_store **out);

/* Closes every connection and frees the store. NULL is a no-op. */
void og_store_free(og_store *s);

/* The backend's name: "sqlite" or "postgres". */
const char *og_store_backend(const og_store *s);

/* The consumption keys the store records (read by og_store_open):
 * OG_KEYS_READABLE or OG_KEYS_HASHED. */
og_consumption_keys og_store_consumption_keys(const og_store *s);

/* Checks that the store answers and its schema is the one this build needs:
 * 0, OG_ESCHEMA, OG_ESTORE_UNAVAILABLE or OG_EINTERNAL. For readiness
 * probes; one round trip. */
OG_MUST_CHECK int og_store_check(og_store *s);

/* The server-side bounds on an admission, as the store's own admission
 * connections carry them (seed 000, "Retention and Cleanup"). */
typedef struct og_session_bounds {
    bool applicable;                /* false: the backend has no such
                                       settings (SQLite: its bound is the
                                       client's busy deadline) */
    int64_t statement_timeout_ms;   /* 0 = none */
    int64_t lock_timeout_ms;        /* 0 = none */
    bool has_transaction_timeout;   /* the server knows the setting (17+) */
    int64_t transaction_timeout_ms; /* 0 = none */
    int server_version_num;         /* e.g. 150018 */
    bool sync_commit_waits;         /* a commit waits for a synchronous
                                       standby (synchronous_standby_names
                                       set, synchronous_commit on,
                                       remote_write or remote_apply): a wait
                                       no server setting bounds */
} og_session_bounds;

/* Reads the bounds from one of the store's own pooled connections, so what
 * is checked is what admissions run with. 0 and *out, or
 * OG_ESTORE_UNAVAILABLE / OG_EINTERNAL. */
OG_MUST_CHECK int og_store_session_bounds(og_store *s,
                                          og_session_bounds *out);

/* The schema version this build needs: 4 operation archive (retention), 5
 * consumption keys (hashed keys), 6 redemption recovery points, 7 operation
 * kinds, idempotency keys and client references, and the statuses Started,
 * NotStarted and NotApplied (payout attempts), 8 the payout decision side
 * (oncegate/payout_store.h), 9 the claim's history entry, 10 the
 * resolution's release causes and history entry. */
#define OG_SCHEMA_VERSION 10

/* Applies every migration the store at url lacks, each in its own
 * transaction, serialized against concurrent migrators. On success writes the
 * version found before and after to *from / *to (either may be NULL).
 * Migration 5 records opts->consumption_keys (AS_STORED: READABLE); a store
 * that reaches 5 hashed has its existing consumption records rewritten
 * under their hashed keys in the same transaction. Migration 7 reads every
 * existing operation as a credit whose idempotency key and client
 * reference are its id (PostgreSQL: without rewriting operations; it then
 * validates the widened constraints in a transaction of their own, which
 * does not block writes — docs/design.md "Schema"). Errors as og_store_open,
 * plus OG_ESCHEMA when the store is newer than this build and
 * OG_ESTORE_KEYS when it records other consumption keys than
 * opts->consumption_keys (nothing is changed then: a store's keys are never
 * converted once recorded). */
OG_MUST_CHECK int og_store_migrate(const char *url,
                                   const og_store_options *opts, int *from,
                                   int *to);

/* ---------------------------------------------------------------------------
 * Admission.
 * ------------------------------------------------------------------------- */

/* A grant as token validation produced it: every field comes from the
 * verified grant, never from request fields. */
/* How an issuer's grants are stored (its configuration decides):
 *   OG_FORM_TOKEN  self-contained signed tokens; admission claims the key
 *                  (issuer, grant_id) in grant_consumptions;
 *   OG_FORM_ROW    issued grants are rows in `grants`; admission is the
 *                  conditional UPDATE of that row (consumed_at IS NULL AND
 *                  revoked_at IS NULL AND deadline), and the row's own
 *                  expires_at is the trusted deadline.
 * Both forms give the same results for the same history. */
typedef enum og_grant_form { OG_FORM_TOKEN = 0, OG_FORM_ROW = 1 } og_grant_form;

typedef struct og_grant {
    const char *issuer;
    const char *grant_id;
    int64_t expires_at_us; /* microseconds since the Unix epoch, UTC */
    const char *family;    /* NULL: none. Admission of a family's grant is
                              ordered against the family's revocation */
    og_grant_form form;
} og_grant;

/* One immutable intended operation; admission binds it to the grant. */
typedef struct og_intent {
    const char *operation_id; /* UUID; any case, normalized to lower case */
    const char *caller_id;    /* the authenticated caller */
    const char *account_id;
    const char *amount;       /* decimal text; compared canonically */
    const char *currency;     /* ISO 4217 */
} og_intent;

/* An operation's status: X(NAME, stored text). Values are stable: new
 * statuses are appended (schema 7 appended the last three, which only
 * payout attempts take; see "Execution" below). */
#define OG_OP_STATUS_MAP(X)                                                    \
    X(ADMITTED, "Admitted")                                                    \
    X(SUCCEEDED, "Succeeded")                                                  \
    X(FAILED, "Failed")                                                        \
    X(UNKNOWN, "Unknown")                                                      \
    X(NEEDS_RECONCILIATION, "NeedsReconciliation")                             \
    X(STARTED, "Started")                                                      \
    X(NOT_STARTED, "NotStarted")                                               \
    X(NOT_APPLIED, "NotApplied")

typedef enum og_op_status {
#define OG__ST_ENUM(name, text) OG_OP_##name,
    OG_OP_STATUS_MAP(OG__ST_ENUM)
#undef OG__ST_ENUM
} og_op_status;

/* How many statuses there are (a separate enum, so that switches over
 * og_op_status need no case for it). */
#define OG__ST_ONE(name, text) +1
enum { OG_OP_STATUS_COUNT = 0 OG_OP_STATUS_MAP(OG__ST_ONE) };
#undef OG__ST_ONE

/* The stored text of a status ("Admitted", ...); "?" for a bad value. */
const char *og_op_status_name(og_op_status st);

/* What an operation does: X(NAME, stored text). Admission (og_admit)
 * creates credits; a payout attempt (docs/payouts.md) is an operation of
 * kind payout, created by its claim. The text is stored and never changes
 * meaning. */
#define OG_OP_KIND_MAP(X)                                                      \
    X(CREDIT, "credit")                                                        \
    X(PAYOUT, "payout")

typedef enum og_op_kind {
#define OG__KIND_ENUM(name, text) OG_OP_KIND_##name,
    OG_OP_KIND_MAP(OG__KIND_ENUM)
#undef OG__KIND_ENUM
} og_op_kind;

#define OG__KIND_ONE(name, text) +1
enum { OG_OP_KIND_COUNT = 0 OG_OP_KIND_MAP(OG__KIND_ONE) };
#undef OG__KIND_ONE

/* A kind as a bit, for sets of kinds (og_op_filter.kinds). */
#define OG_OP_KIND_BIT(k) (1u << (k))

/* The stored text of a kind ("credit", "payout"); "?" for a bad value. */
const char *og_op_kind_name(og_op_kind k);

/* An operation record as stored. Timestamps are store-clock microseconds
 * since the Unix epoch. */
typedef struct og_operation {
    char operation_id[OG_UUID_LEN + 1];
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char caller_id[OG_ID_MAX + 1];
    char account_id[OG_ID_MAX + 1];
    char amount[OG_AMOUNT_MAX + 1]; /* canonical decimal */
    char currency[OG_CURRENCY_LEN + 1];
    og_op_status status;
    int64_t owner_version;
    int64_t lease_until_us;
    int64_t submit_by_us;
    int64_t created_at_us;
    int64_t updated_at_us;       /* last status change (= created_at until
                                    the first outcome) */
    char provider_reference[OG_ID_MAX + 1]; /* "" until recorded */
    char reason[OG_REASON_MAX + 1];         /* last outcome's reason, or "" */
    og_op_kind kind;                        /* credit (every admission) or
                                               payout (schema 7) */
    char idempotency_key[OG_ID_MAX + 1];    /* what the provider create is
                                               sent under: the operation id
                                               unless the creator fixed
                                               another (a payout attempt:
                                               "payout-<payout>-a<N>") */
    char client_reference[OG_ID_MAX + 1];   /* the reference sent with the
                                               request and looked up by: the
                                               operation id unless fixed
                                               ("<payout>-a<N>") */
} og_operation;

#define OG_OUTCOME_MAP(X)                                                      \
    X(ADMITTED, "admitted")                                                    \
    X(ALREADY_ADMITTED, "already_admitted")                                    \
    X(REFUSED, "refused")

typedef enum og_outcome {
#define OG__OC_ENUM(name, text) OG_OUTCOME_##name,
    OG_OUTCOME_MAP(OG__OC_ENUM)
#undef OG__OC_ENUM
} og_outcome;

/* Why a refusal happened. For logs only: nothing returned to a caller may
 * reveal another operation, so callers see just "refused". */
#define OG_REFUSAL_MAP(X)                                                      \
    X(NONE, "none")                                                            \
    X(GRANT_SPENT, "grant_spent_by_other_operation")                           \
    X(GRANT_REVOKED, "grant_revoked")                                          \
    X(OPERATION_MISMATCH, "operation_id_reused_with_other_details")            \
    X(OPERATION_ID_TAKEN, "operation_id_bound_to_other_grant")                 \
    X(DEADLINE_PASSED, "admission_deadline_passed")                            \
    X(FAMILY_REVOKED, "family_revoked")                                        \
    X(GRANT_CONSUMED, "grant_consumed_by_verdict")                             \
    X(NOT_ISSUED, "grant_not_issued")

typedef enum og_refusal {
#define OG__RF_ENUM(name, text) OG_REFUSAL_##name,
    OG_REFUSAL_MAP(OG__RF_ENUM)
#undef OG__RF_ENUM
} og_refusal;

const char *og_outcome_name(og_outcome o);
const char *og_refusal_name(og_refusal r);

typedef struct og_admission {
    og_outcome outcome;
    og_refusal refusal;     /* OG_REFUSAL_NONE unless outcome is REFUSED */
    og_operation operation; /* valid for ADMITTED and ALREADY_ADMITTED;
                               zeroed for REFUSED */
} og_admission;

/* Admits grant for intent with ONE atomic write: claims (issuer, grant_id)
 * and records the operation (kind credit, its idempotency key and client
 * reference the operation id, status Admitted, owner version 1, lease_until
 * and submit_by from the store's clock) together, checking the deadline
 * expires_at + leeway against the store's clock in the same statement.
 *
 * Returns 0 and fills *result with exactly one outcome:
 *   ADMITTED          this call claimed the grant; result->operation is the
 *                     new record;
 *   ALREADY_ADMITTED  this operation id claimed it earlier with the same
 *                     caller, account, amount and currency, as a credit;
 *                     the stored record comes back (the archived one when
 *                     the operation was archived:
 *                     og_store_archive_operations);
 *   REFUSED           anything else (result->refusal says why, for logs).
 * Errors (nothing in *result): OG_E{ISSUER,GRANT_ID,OPERATION_ID,CALLER,
 * ACCOUNT,AMOUNT,CURRENCY,EXPIRES_AT} for bad input, checked before the store;
 * OG_ESTORE_UNAVAILABLE when the store is unreachable, timed out, cancelled
 * the statement or could not confirm the commit — the admission may or may
 * not have happened, a retry with the same operation id finds out, and
 * og_admit never retries by itself; OG_EINTERNAL for any other store failure.
 * Thread-safe: any number of threads may call it on one store. */
OG_MUST_CHECK int og_admit(og_store *s, const og_grant *grant,
                           const og_intent *intent, og_admission *result);

/* Reads the operation with this id. Returns 1 and fills *out when it exists,
 * 0 when it does not, or a negative error (OG_EOPERATION_ID,
 * OG_ESTORE_UNAVAILABLE, OG_EINTERNAL). This is the store's view: the caller
 * authorizes who may see it. */
OG_MUST_CHECK int og_operation_get(og_store *s, const char *operation_id,
                                   og_operation *out);

/* ---------------------------------------------------------------------------
 * Execution: one owner at a time moves an admitted operation forward (seed
 * 000, "Recovery and the original executor share one ownership protocol").
 * The operation's creator owns it at owner version 1 until lease_until;
 * recovery (a payout's sweeper) takes it over with owner_version + 1 and a
 * recovery lease. Every write below is ONE conditional write on (status,
 * owner_version), recorded with an event in the operation's history in the
 * same transaction, so a stale writer changes nothing and a terminal status
 * is never overwritten. The same protocol serves both kinds: credits
 * (admitted by og_admit) and payout attempts (docs/payouts.md).
 *
 * Transitions (og_op_start / og_op_record / og_op_takeover / og_op_resolve):
 *   Admitted            -> Started                              (og_op_start,
 *                                                                payouts only)
 *   Admitted            -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Admitted            -> NotStarted   (payouts only, and only at an owner
 *                                        version above 1: after a takeover
 *                                        fenced the claimer, P2)
 *   Started             -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Unknown             -> Succeeded | Failed | Unknown | NeedsReconciliation
 *   Unknown             -> NotApplied
 *   NeedsReconciliation -> Succeeded | Failed | NotApplied   (operators only)
 *   Succeeded, Failed, NotStarted, NotApplied -> (terminal)
 * A takeover keeps the status (Admitted, Started or Unknown) and raises the
 * owner version. Any other change is OG_ETRANSITION, reported before the
 * store is asked.
 *
 * Why a payout is Started before it is sent (P1-P3 in docs/payouts.md): a
 * payout attempt found Admitted after a takeover provably sent nothing —
 * its owner could only send after og_op_start confirmed, and the takeover's
 * new owner version fences that write — so it may end NotStarted. A
 * Started one may have been sent, or may still be: it ends Unknown at best,
 * never NotStarted. The credit path never writes Started, NotStarted or
 * NotApplied: it asks og_op_may_submit before each create.
 * ------------------------------------------------------------------------- */

/* A status as a bit, for sets of expected statuses. */
#define OG_OP_BIT(st) (1u << (st))

/* May the owner at owner_version send a create request now? Reads, with the
 * store's clock: owner_version equal AND now < least(lease_until,
 * submit_by) AND, for a credit, status Admitted or Unknown; for a payout,
 * status Started (P1: never before og_op_start, never after an ambiguous
 * outcome). Returns 0 and *may, or an input/store error. A store error
 * means "no": send nothing. */
OG_MUST_CHECK int og_op_may_submit(og_store *s, const char *operation_id,
                                   int64_t owner_version, bool *may);

/* Marks a payout attempt Started before its first send (P1, P2): ONE
 * conditional write, Admitted -> Started, where the operation is a payout
 * AND owner_version = owner_version AND lease_until > now AND submit_by >
 * now (the store's clock, read once after the row lock), appending a
 * "started" event by actor in the same statement (PostgreSQL) or
 * transaction (SQLite). Returns 0 and *started: true when this call made
 * the change; false when nothing changed (not Admitted any more, another
 * owner version — a takeover fenced this owner —, the lease or submit_by
 * passed, or a credit, which is never started).
 *
 * The caller MUST NOT send unless this returned 0 with *started true. An
 * error (OG_ESTORE_UNAVAILABLE: timed out, connection lost, commit not
 * confirmed) means the write may or may not have committed: do not send
 * either; the sweeper reads the durable state, and a Started attempt whose
 * lease lapsed becomes Unknown, never NotStarted (P3). Input errors
 * (OG_EOPERATION_ID, OG_EACTOR, OG_EINVAL for an owner version below 1)
 * are reported before any I/O. */
OG_MUST_CHECK int og_op_start(og_store *s, const char *operation_id,
                              int64_t owner_version, const char *actor,
                              bool *started);

/* An outcome to record. */
typedef struct og_op_outcome {
    og_op_status status;            /* the new status */
    const char *reason;             /* reason code (provider's, or the
                                       classification's); NULL: none */
    const char *provider_reference; /* the provider's id; NULL: none */
    const char *actor;              /* who records: "handler", "recovery",
                                       or an operator's principal id */
} og_op_outcome;

/* Records o for the operation IF its status is in expected (a set of
 * OG_OP_BIT(...) of ADMITTED, STARTED and UNKNOWN) and its owner_version
 * equals expected_owner_version; appends an "outcome" event. ONE
 * conditional write. The table above decides what may be recorded: from
 * any expected set Succeeded, Failed, Unknown or NeedsReconciliation;
 * NotStarted only with expected exactly ADMITTED and expected_owner_version
 * above 1 — and the store records it only for a payout still at that
 * version (P2); NotApplied only with expected exactly UNKNOWN. Returns 0
 * and *recorded (false: nothing changed — another owner moved on, the
 * status was not expected, or the store refused NotStarted), or an error
 * (input errors; OG_ETRANSITION for a transition the table forbids, before
 * any I/O; OG_ESTORE_UNAVAILABLE: may or may not have happened). */
OG_MUST_CHECK int og_op_record(og_store *s, const char *operation_id,
                               unsigned expected, int64_t expected_owner_version,
                               const og_op_outcome *o, bool *recorded);

/* Takes an operation over for recovery IF it is Admitted, Started or
 * Unknown, its lease has ended (store clock) and its owner_version equals
 * expected_owner_version: owner_version + 1, lease_until = now + the
 * store's recovery_lease, the status unchanged; appends a "takeover" event.
 * ONE conditional write. Returns 0 and *taken; when taken, *out is the
 * record after the takeover (its owner_version is the one every later
 * write must expect, and the one that fences the previous owner's
 * og_op_start and og_op_record). */
OG_MUST_CHECK int og_op_takeover(og_store *s, const char *operation_id,
                                 int64_t expected_owner_version,
                                 const char *actor, og_operation *out,
                                 bool *taken);

/* Resolves a NeedsReconciliation operation by hand: to Succeeded, Failed or
 * NotApplied (OG_ETRANSITION otherwise), owner_version + 1 (fencing any
 * late writer), with the operator's id, a reason and evidence recorded in a
 * "resolved" event. The grant stays spent. Returns 0 and *resolved (false:
 * not NeedsReconciliation any more). */
OG_MUST_CHECK int og_op_resolve(og_store *s, const char *operation_id,
                                og_op_status to, const char *operator_id,
                                const char *reason, const char *evidence,
                                const char *provider_reference,
                                bool *resolved);

/* Which operations to list. */
typedef struct og_op_filter {
    unsigned statuses;       /* set of OG_OP_BIT(...); 0: all */
    bool lease_expired;      /* only those whose lease_until < store now */
    int64_t created_before_us; /* 0: no bound */
    int limit;               /* 1..1000 */
    unsigned kinds;          /* set of OG_OP_KIND_BIT(...); 0: all */
} og_op_filter;

typedef struct og_op_list {
    og_operation *v;
    size_t n;
} og_op_list;

/* Lists operations matching f, oldest first (recovery's scan, operators'
 * backlog). Returns 0 and *out (free with og_op_list_free), or an error. */
OG_MUST_CHECK int og_op_scan(og_store *s, const og_op_filter *f,
                             og_op_list *out);
void og_op_list_free(og_op_list *l);

/* One entry of an operation's history. */
typedef struct og_op_event {
    int64_t seq;                      /* increasing per store */
    int64_t at_us;                    /* store clock */
    char kind[16];                    /* admitted | started | outcome |
                                         takeover | resolved */
    og_op_status from_status, to_status;
    int64_t owner_version;            /* the version after the event */
    char reason[OG_REASON_MAX + 1];
    char provider_reference[OG_ID_MAX + 1];
    char actor[OG_ID_MAX + 1];
    char evidence[OG_EVIDENCE_MAX + 1];
} og_op_event;

typedef struct og_op_events {
    og_op_event *v;
    size_t n;
} og_op_events;

/* The history of one operation, oldest first. The first event, kind
 * "admitted", is read from the operation record itself (admission writes no
 * second row: it stays ONE insert); the others are stored by the writes
 * above. 0 and *out (free with og_op_events_free), or an error. */
OG_MUST_CHECK int og_op_history(og_store *s, const char *operation_id,
                                og_op_events *out);
void og_op_events_free(og_op_events *e);

/* ---------------------------------------------------------------------------
 * Retention (seed 000, "Retention and Cleanup"). Two questions, two jobs:
 *  - refusal retention: how long a consumption row must exist to keep
 *    refusing its grant. A row outlives every admission that could still
 *    commit: it may go only once retain_until + cleanup_margin has passed on
 *    the store's clock (T9). og_store_cleanup() deletes such rows and
 *    nothing else.
 *  - audit retention: how long operation records and their history must
 *    exist, for recovery, reconciliation and audit. Much longer, and on its
 *    own schedule: og_store_archive_operations() moves (or deletes) finished
 *    operations only, never one that recovery may still need.
 * Both work in bounded batches, each batch its own short transaction, so
 * admissions are never held behind a long delete.
 * ------------------------------------------------------------------------- */

/* Bounds of the batch arguments below. */
#define OG_RETENTION_BATCH_MAX 100000
#define OG_RETENTION_BATCHES_MAX 1000000

/* What one og_store_cleanup() call deleted. */
typedef struct og_cleanup_stats {
    int64_t admissions;  /* consumption rows deleted, by kind */
    int64_t revocations;
    int64_t consumes;
    int batches;         /* delete statements run (each its own
                            transaction), the last one included */
} og_cleanup_stats;

/* Deletes grant_consumptions rows (admissions, revocations and consumes
 * alike) whose retain_until + the store's cleanup_margin lies before the
 * store's clock at the statement, at most batch (1..OG_RETENTION_BATCH_MAX)
 * rows per statement, oldest retain_until first, until a statement deletes
 * fewer than batch or max_batches (1..OG_RETENTION_BATCHES_MAX) statements
 * have run. Never touches operations, their history, grant rows (row
 * form), families, tickets or the issuance log. Returns 0 and *out, or an
 * error (OG_EINVAL, OG_ESTORE_UNAVAILABLE, OG_EINTERNAL); batches committed
 * before an error stay committed (each is complete on its own), and the
 * next call carries on. Safe to run from any number of processes at once. */
OG_MUST_CHECK int og_store_cleanup(og_store *s, int batch, int max_batches,
                                   og_cleanup_stats *out);

/* The query plans the store's engine picks, on its tables as they are now
 * and in its consumption-keys mode, for the admission statements (token and
 * row form, and the follow-up read of a claim that did not happen), for
 * one cleanup batch of batch (1..OG_RETENTION_BATCH_MAX) rows, and for the
 * payout store's daily-limit reservation, job take and expiry batch
 * (oncegate/payout_store.h), as Markdown:
 * each statement's text exactly as the store prepares it, the values it is
 * planned with, then the plan. PostgreSQL: EXPLAIN EXECUTE of the store's
 * own prepared statements, the custom plan and the generic plan PostgreSQL
 * may keep after five executions; SQLite: EXPLAIN QUERY PLAN of each
 * statement of the admission transaction and of the cleanup batch.
 * Executes none of them (no ANALYZE): nothing is claimed or deleted.
 * Returns 0 and *text (malloc'd; the caller frees it), or OG_EINVAL,
 * OG_ENOMEM, OG_ESTORE_UNAVAILABLE, OG_EINTERNAL. */
OG_MUST_CHECK int og_store_explain(og_store *s, int batch, char **text);

/* What og_store_archive_operations() does with a finished operation. */
typedef enum og_archive_mode {
    OG_ARCHIVE_MOVE = 0,   /* into operations_archive and
                              operation_events_archive (same columns plus
                              archived_at, store clock) */
    OG_ARCHIVE_DELETE = 1, /* delete it and its history outright */
} og_archive_mode;

typedef struct og_archive_stats {
    int64_t operations;  /* operations moved or deleted */
    int64_t events;      /* their history entries moved or deleted */
    int batches;         /* statements (transactions) run */
} og_archive_stats;

/* Moves or deletes, per mode, terminal operations (Succeeded, Failed,
 * NotStarted, NotApplied) whose last status change (updated_at) lies more
 * than older_than_us (0 .. 9999 years) before the store's clock, with their
 * history, at most batch
 * operations per transaction, until a transaction takes fewer than batch or
 * max_batches have run (bounds as og_store_cleanup). Admitted, Started,
 * Unknown and NeedsReconciliation operations are never touched: recovery
 * and operators need them. An archived operation is still found by a same-operation retry
 * (ALREADY_ADMITTED with the archived record) and still blocks its id, but
 * og_operation_get() and og_op_history() no longer see it. The library
 * does not bound older_than_us from below; a deployment keeps operations at
 * least as long as their grants' refusal records (`oncegate serve` refuses
 * an audit retention shorter than max_grant_lifetime + issue_time_skew +
 * admission_leeway + cleanup_margin). Returns 0 and *out, or an error as
 * og_store_cleanup (committed batches stay). */
OG_MUST_CHECK int og_store_archive_operations(og_store *s,
                                              int64_t older_than_us,
                                              og_archive_mode mode, int batch,
                                              int max_batches,
                                              og_archive_stats *out);

/* ---------------------------------------------------------------------------
 * Redemption recovery points (schema 6): the persisted result of redeeming
 * an external single-use token (seed 003), keyed by the caller's
 * idempotency key. The store keeps the result sealed — it never sees the
 * plaintext, the key that opens it or the token itself (only its SHA-256);
 * sealing is og_redeem's business (oncegate/redeem.h). Keys are scoped to
 * the caller: (caller, idempotency_key) is the primary key, so a principal
 * can neither read nor block another principal's key.
 * ------------------------------------------------------------------------- */
#define OG_REDEMPTION_NONCE_LEN 24     /* XChaCha20-Poly1305 nonce bytes */
#define OG_REDEMPTION_TAG_LEN 16       /* its authentication tag */
#define OG_REDEMPTION_RESULT_MAX 65536 /* plaintext result bytes */
#define OG_REDEMPTION_SEALED_MAX (OG_REDEMPTION_RESULT_MAX + OG_REDEMPTION_TAG_LEN)
#define OG_CODE_HASH_LEN 64            /* SHA-256 of a token, hex */

/* A recovery point to write. Every pointer is borrowed. */
typedef struct og_redemption_record {
    const char *caller;           /* the authenticated principal */
    const char *idempotency_key;  /* og_id_valid() */
    const char *code_hash;        /* 64 lower-case hex: SHA-256 of the token */
    const unsigned char *nonce;   /* OG_REDEMPTION_NONCE_LEN bytes */
    const unsigned char *sealed;  /* the sealed result with its tag */
    size_t sealed_len;            /* 17 .. OG_REDEMPTION_SEALED_MAX */
} og_redemption_record;

/* Writes r with ONE conditional insert: the first writer of (caller,
 * idempotency_key) wins and a later one changes nothing — a point is never
 * overwritten. Returns 0 and *inserted (false: a point existed already;
 * read it with og_redemption_get), or an error: OG_ECALLER,
 * OG_EIDEMPOTENCY_KEY, OG_ECODE_HASH, OG_ESEALED, OG_EINVAL for bad input
 * (nothing written); OG_ESTORE_UNAVAILABLE when the write may or may not
 * have happened; OG_EINTERNAL. */
OG_MUST_CHECK int og_redemption_put(og_store *s, const og_redemption_record *r,
                                    bool *inserted);

/* What og_redemption_get found. */
typedef enum og_redemption_found {
    OG_REDEMPTION_ABSENT = 0,        /* no point for the key, and no point
                                        for the code under another key */
    OG_REDEMPTION_OWN = 1,           /* the key's own point (*out filled) */
    OG_REDEMPTION_CODE_ELSEWHERE = 2 /* no point for the key, but one for
                                        the same code under another key
                                        (of any caller): the token was
                                        redeemed by another operation */
} og_redemption_found;

/* A recovery point as read. sealed is malloc'd: free it with
 * og_redemption_point_clear. */
typedef struct og_redemption_point {
    char code_hash[OG_CODE_HASH_LEN + 1];
    unsigned char nonce[OG_REDEMPTION_NONCE_LEN];
    unsigned char *sealed;
    size_t sealed_len;
    int64_t created_at_us;        /* store clock */
} og_redemption_point;

/* Reads the point of (caller, idempotency_key) and, when there is none and
 * code_hash is non-NULL, whether a point of another key holds code_hash —
 * in ONE read, so the two answers come from one state. Returns 0 and
 * *found (*out filled only for OG_REDEMPTION_OWN), or an error: input
 * errors as og_redemption_put; OG_ESTORE_UNAVAILABLE means "not known",
 * NEVER "absent"; OG_EINTERNAL; OG_ENOMEM. */
OG_MUST_CHECK int og_redemption_get(og_store *s, const char *caller,
                                    const char *idempotency_key,
                                    const char *code_hash,
                                    og_redemption_found *found,
                                    og_redemption_point *out);

/* Wipes and frees p's sealed bytes and zeroes *p. NULL is a no-op. */
void og_redemption_point_clear(og_redemption_point *p);

/* ---------------------------------------------------------------------------
 * Small pure helpers the CLI and tests share.
 * ------------------------------------------------------------------------- */

/* Parses an RFC 3339 timestamp ("2026-11-29T10:45:00Z", offsets and
 * fractional seconds up to microseconds allowed) into microseconds since the
 * epoch. Returns 0 or OG_EEXPIRES_AT. */
OG_MUST_CHECK int og_time_parse_rfc3339(const char *s, int64_t *out_us);

/* Formats us as "YYYY-MM-DDTHH:MM:SS.ffffffZ" into buf (at least 28 bytes).
 * Returns buf. */
char *og_time_format_rfc3339(int64_t us, char *buf, size_t len);

/* 1 when s is a valid identifier (issuer, grant id, caller, account,
 * family, subject, action): 1-OG_ID_MAX bytes of printable ASCII without
 * spaces; else 0. */
bool og_id_valid(const char *s);

/* Writes the canonical lower-case form of operation id in (a non-nil UUID in
 * any case) into out. Returns 0 or OG_EOPERATION_ID. */
OG_MUST_CHECK int og_operation_id_canonical(const char *in,
                                            char out[OG_UUID_LEN + 1]);

/* Canonicalizes a decimal amount ("250.00" -> "250", "0250.50" -> "250.5")
 * into out (at least OG_AMOUNT_MAX + 1 bytes). Returns 0 or OG_EAMOUNT. */
OG_MUST_CHECK int og_amount_canonical(const char *in, char *out,
                                      size_t outlen);

#ifdef __cplusplus
}
#endif

/* ---------------------------------------------------------------------------
 * Issuance, revocation, families, the consume verdict, tickets.
 * Each is ONE conditional write (one statement in PostgreSQL, one
 * transaction in SQLite) that the store orders against the others: a
 * revocation and an admission of one grant contend for the same key or row;
 * a family's revocation and the admission or issuance of its grants contend
 * for the family's row.
 * ------------------------------------------------------------------------- */

/* An issuance-log entry: the proof that a grant was issued and its trusted
 * expiry, which revocation needs. */
typedef struct og_issuance {
    const char *issuer;
    const char *grant_id;
    const char *family;       /* NULL: none */
    const char *subject;      /* the one principal allowed to present it */
    const char *action;       /* the operation name */
    const char *params_digest;/* 64 lower-case hex: SHA-256 of the bound
                                 parameters (og_params_digest) */
    int64_t issued_at_us;
    int64_t expires_at_us;    /* 0: the issuer records no expiry (revocation
                                 then uses the fallback retention) */
    og_grant_form form;       /* OG_FORM_ROW also creates the grant's row */
} og_issuance;

typedef enum og_issue_outcome {
    OG_ISSUE_RECORDED = 0,
    OG_ISSUE_FAMILY_REVOKED, /* refused: ordered after the family's revocation */
    OG_ISSUE_DUPLICATE_ID,   /* refused: (issuer, grant_id) was issued before */
} og_issue_outcome;

/* Records an issued grant in the issuance log; creates its family's row on
 * first use. Returns 0 and *out, or an input/store error. */
OG_MUST_CHECK int og_issuance_record(og_store *s, const og_issuance *iss,
                                     og_issue_outcome *out);

/* Who may revoke an issuer's grants, and the fallback retention inputs. */
typedef struct og_revoke_policy {
    const char *const *revokers; /* principals allowed to revoke */
    size_t n_revokers;
} og_revoke_policy;

typedef struct og_revocation {
    const char *issuer;
    const char *grant_id;
    const char *revoker;          /* the authenticated principal */
    int64_t trusted_expires_at_us;/* from a VERIFIED token; 0: prove issuance
                                     from the issuance log instead */
    og_grant_form form;
} og_revocation;

typedef enum og_revoke_outcome {
    OG_REVOKE_REVOKED = 0,
    OG_REVOKE_ALREADY_USED_OR_REVOKED, /* changes nothing; an operation
                                          admitted earlier stays reachable */
    OG_REVOKE_NOT_ISSUED,              /* no proof of issuance: refused */
    OG_REVOKE_NOT_PERMITTED,           /* revoker not in the policy */
} og_revoke_outcome;

/* Revokes one grant. Token form: claims the grant's key with no operation,
 * retained until the trusted expiry + leeway (from the verified token or the
 * issuance log), or else clock_timestamp() + max lifetime + issue skew +
 * leeway. Row form: updates the grant's row. Returns 0 and *out, or an
 * input/store error. */
OG_MUST_CHECK int og_revoke(og_store *s, const og_revoke_policy *policy,
                            const og_revocation *r, og_revoke_outcome *out);

/* A list of grant ids returned by the store; free with og_strv_free. */
typedef struct og_strv {
    char **v;
    size_t n;
} og_strv;
void og_strv_free(og_strv *sv);

/* Revokes a family: marks it revoked and revokes every live grant issued
 * into it (both forms) in ONE statement; admissions, consumes and issuance
 * of its grants are ordered against it by the family's row. Returns 0 and
 * *outcome: REVOKED with *revoked listing the grants this call revoked
 * (empty when the family was already revoked or had none; a family never
 * seen is created revoked, so nothing can be issued into it), or
 * NOT_PERMITTED (nothing changed, *revoked empty). Or an input/store error.
 * Free *revoked with og_strv_free. */
OG_MUST_CHECK int og_family_revoke(og_store *s, const og_revoke_policy *policy,
                                   const char *issuer, const char *family,
                                   const char *revoker,
                                   og_revoke_outcome *outcome,
                                   og_strv *revoked);

/* The digest an issuance records for the bound parameters: SHA-256 over
 * the length-prefixed account, canonical amount and currency, as 64
 * lower-case hex characters into out. Returns 0 or an input error. */
OG_MUST_CHECK int og_params_digest(const char *account, const char *amount,
                                   const char *currency, char out[65]);

/* The consume verdict (seed 001) for enforcement points that run the effect
 * themselves: ONE conditional write. consumed=true means this call spent the
 * grant; false is a denial, without exception. */
typedef struct og_consume_result {
    bool consumed;
    og_refusal refusal;           /* for logs, when !consumed */
    char family[OG_ID_MAX + 1];   /* the grant's family ("" if none) */
} og_consume_result;

OG_MUST_CHECK int og_consume(og_store *s, const og_grant *grant,
                             og_consume_result *out);

/* Tickets (seed 001): a held approval request, bound to a family, stored
 * hashed. The ticket text is a secret: 256 random bits, base64url. */
#define OG_TICKET_LEN 43

typedef enum og_ticket_outcome {
    OG_TICKET_ISSUED = 0,        /* create: a new ticket; rotate: rotated */
    OG_TICKET_NOT_FOUND,         /* unknown ticket: refused */
    OG_TICKET_REUSED,            /* already rotated: refused, family revoked */
    OG_TICKET_FAMILY_REVOKED,    /* the family is revoked: refused */
} og_ticket_outcome;

typedef struct og_ticket_result {
    og_ticket_outcome outcome;
    char ticket[OG_TICKET_LEN + 1];  /* the new ticket when ISSUED */
    char issuer[OG_ID_MAX + 1];
    char family[OG_ID_MAX + 1];
} og_ticket_result;

/* Creates a ticket in a live family. Returns 0 and *out, or an error. */
OG_MUST_CHECK int og_ticket_create(og_store *s, const char *issuer,
                                   const char *family, og_ticket_result *out);

/* Presents a ticket: in ONE statement the old ticket is marked rotated and a
 * new one is created in its family; a concurrent replay gets NOT_FOUND or
 * REUSED. Presenting an already-rotated ticket is reuse: refused, and the
 * family is revoked (as OAuth refresh-token rotation does). */
OG_MUST_CHECK int og_ticket_rotate(og_store *s, const char *ticket,
                                   og_ticket_result *out);

/* Keys, grant tokens and the validator that produces og_grant/og_intent. */
#include "oncegate/grant.h"

#endif /* ONCEGATE_H */
