/*
 * core.h — the vocabulary every layer of oncegate shares, and the pure
 * functions of lib/core that go with it: errors, limits, timings, the
 * records (grants, intents, operations, admissions, their statuses and
 * names), consumption keys, redemption outcomes and small helpers. No
 * function declared here does I/O.
 *
 * Part of the public API; oncegate/oncegate.h includes it with the rest,
 * and states the conventions every header follows.
 */
#ifndef ONCEGATE_CORE_H
#define ONCEGATE_CORE_H

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
      "currency must be an upper-case ISO 4217 code with minor units "         \
      "(funds, precious metals and testing codes are refused)")                \
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
    X(PAYOUT_TIMEZONE, "input.settlement_time_zone_invalid",                   \
      "a settlement time zone must be an IANA time zone name the time-zone "   \
      "database knows (\"Europe/Berlin\", \"America/New_York\", \"UTC\"), at "  \
      "most 64 printable ASCII characters")                                    \
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
      "(create; the version as read)")                                         \
    X(PAYOUT_POLICY_RELEASE, "policy.release-mismatch",                        \
      "this build's payout policy is not the store's current policy release "  \
      "(og_payout_policy_release_get): nothing was decided; a build of the "   \
      "current release decides, or an operator moves the release")             \
    X(PAYOUT_DECISION, "input.decision_id_invalid",                            \
      "decision id must be a non-nil UUID (8-4-4-4-12 hex)")                   \
    /* An approval that settles a pending decision (docs/payouts.md,         \
     * section 4, "Acknowledgment and escalation"): each writes nothing. */  \
    X(PAYOUT_NOT_SETTLEABLE, "decision_not_settleable",                        \
      "the decision to settle is not this payout's AcknowledgmentRequired "    \
      "or EscalationRecommended decision")                                     \
    X(PAYOUT_ALREADY_SETTLED, "decision_already_settled",                      \
      "a fresh decision settled that decision already: nothing was written")   \
    X(PAYOUT_APPROVER_IS_REQUESTER, "approver_is_requester",                   \
      "the approver requested the decision to settle: four eyes, another "     \
      "approver settles it")                                                   \
    X(PAYOUT_SETTLE_STALE, "decision_stale",                                   \
      "the payout moved past the version the decision to settle evaluated: "   \
      "submit it again")                                                       \
    /* The input rules: an amount finer than its currency, a token  \
     * of another type. */                                                   \
    X(AMOUNT_MINOR_UNITS, "input.amount_minor_units",                          \
      "amount has more fraction digits than its currency's ISO 4217 minor "    \
      "units allow (USD 2: 0.01 is the finest; JPY 0: whole yen; BHD 3)")      \
    X(GRANT_TYPE, "grant.wrong_type",                                          \
      "token typ is not oncegate-grant+jwt (compared case-insensitively): a "  \
      "token of another kind, or a legacy grant (typ JWT or none) where "      \
      "tokens.accept_legacy_typ is off")                                       \
    X(KEY_MODE, "key.mode_too_open",                                           \
      "a secret key file (signing key, operation-id MAC key, redemption key) " \
      "gives group or others access: chmod 600, in a directory only its "      \
      "owner can enter")

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

/* Checks every relation between the values (docs/design.md, "Timing
 * values"; lib/core/timings.c lists them as T1..T12). Returns 0, or
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
 * Handles. The store (oncegate/store.h) and the provider client
 * (oncegate/provider.h) are opaque; they are named here so that a header of
 * any layer can take one without including the layer that implements it.
 * ------------------------------------------------------------------------- */
typedef struct og_store og_store;
typedef struct og_provider og_provider;

/* ---------------------------------------------------------------------------
 * Consumption keys.
 * ------------------------------------------------------------------------- */

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

/* ---------------------------------------------------------------------------
 * Records: grants, intents, operations, admissions.
 * ------------------------------------------------------------------------- */

/* How an issuer's grants are stored (its configuration decides):
 *   OG_FORM_TOKEN  self-contained signed tokens; admission claims the key
 *                  (issuer, grant_id) in grant_consumptions;
 *   OG_FORM_ROW    issued grants are rows in `grants`; admission is the
 *                  conditional UPDATE of that row (consumed_at IS NULL AND
 *                  revoked_at IS NULL AND deadline), and the row's own
 *                  expires_at is the trusted deadline.
 * Both forms give the same results for the same history. */
typedef enum og_grant_form { OG_FORM_TOKEN = 0, OG_FORM_ROW = 1 } og_grant_form;

/* A grant as token validation produced it: every field comes from the
 * verified grant, never from request fields. */
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
    /* schema 11 (payout attempts' reconciliation; 0 when NULL): */
    int64_t taken_at_us;                    /* the store's clock at the last
                                               takeover (og_op_takeover) */
    int64_t lookups;                        /* provider lookups recorded
                                               (og_payout_reconcile_later) */
    int64_t final_absence_after_us;         /* from when "not found" may be
                                               final (submit_by + the
                                               provider's skew and visibility
                                               delay, set by the claim); 0:
                                               never (docs/payouts.md, P6) */
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
    /* REFUSED because the grant's key is held (GRANT_SPENT, GRANT_REVOKED,
     * GRANT_CONSUMED) and the store read that holder as final (on
     * PostgreSQL after the read fence, I30): the key stays held until
     * cleanup, which comes only after the grant's admission deadline.
     * held_by is the operation id holding it (GRANT_SPENT), "" for a
     * revocation or the consume verdict. For the caller's own process (the
     * service's refusal cache, docs/http.md); never told to a client. */
    bool key_held;
    char held_by[OG_UUID_LEN + 1];
} og_admission;

/* ---------------------------------------------------------------------------
 * Redemption (docs/design.md, "Redeeming an external single-use token"):
 * the limits of a recovery point, what a look for one finds, and how a
 * redemption ends. The points are the store's (oncegate/store.h), the
 * redemption itself og_redeem's (oncegate/redeem.h).
 * ------------------------------------------------------------------------- */
#define OG_REDEMPTION_NONCE_LEN 24     /* XChaCha20-Poly1305 nonce bytes */
#define OG_REDEMPTION_TAG_LEN 16       /* its authentication tag */
#define OG_REDEMPTION_RESULT_MAX 65536 /* plaintext result bytes */
#define OG_REDEMPTION_SEALED_MAX (OG_REDEMPTION_RESULT_MAX + OG_REDEMPTION_TAG_LEN)
#define OG_CODE_HASH_LEN 64            /* SHA-256 of a token, hex */

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

/* How a redemption ended. X(NAME, stable text); the text is API (logs and
 * HTTP answers use it). */
#define OG_REDEEM_OUTCOME_MAP(X)                                               \
    /* this call exchanged the token; result set (persisted or not) */         \
    X(REDEEMED, "redeemed")                                                    \
    /* the key's point existed when the call began: its result */              \
    X(RECOVERED, "recovered")                                                  \
    /* "already used" (or an unknown answer), and the key's point appeared     \
     * within the bound: its result */                                         \
    X(CAUGHT_UP, "caught_up")                                                  \
    /* the token's point is under another idempotency key: it was redeemed     \
     * by another operation, whose result is not this one's */                 \
    X(CODE_SPENT, "code_spent")                                                \
    /* the key's point holds another token: the key was reused */              \
    X(KEY_REUSED, "idempotency_key_reused")                                    \
    /* "already used" and no point appeared within the bound: the token was   \
     * spent and no result was persisted */                                    \
    X(LOST, "redemption_lost")                                                 \
    /* the exchange's answer was lost or undocumented and no point appeared    \
     * within the bound: the token may or may not be spent; a retry with the   \
     * same key and token finds out (it never exchanges twice what the         \
     * provider counts once) */                                                \
    X(UNKNOWN, "redemption_unknown")                                           \
    /* the provider refused the request itself (invalid_client, ...): the      \
     * token was not exchanged */                                              \
    X(REJECTED, "provider_rejected")

typedef enum og_redeem_outcome {
#define OG__RO_ENUM(name, text) OG_REDEEM_##name,
    OG_REDEEM_OUTCOME_MAP(OG__RO_ENUM)
#undef OG__RO_ENUM
} og_redeem_outcome;

/* The outcome's stable text ("redemption_lost"); "?" for a bad value. */
const char *og_redeem_outcome_name(og_redeem_outcome o);

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

/* The value of hex digit c (0-9, a-f, A-F), or -1 for any other byte.
 * Written out rather than isxdigit() so the answer never depends on the
 * locale; the one hex decoder of the core, the HTTP edge and the sandbox. */
int og_hex_digit(int c);

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

/* Checks an amount of a currency the way everything that takes one does
 * (grants, operations, the payout terms): in the grammar of
 * og_amount_canonical(), currency an upper-case ISO 4217 code with minor
 * units (og_payout_currency_scale()), and no more significant fraction
 * digits than those minor units ("0.001" USD and "1.5" JPY are refused,
 * "0.01" USD, "250.000" USD and "15" JPY pass). Returns 0, OG_EAMOUNT,
 * OG_ECURRENCY or OG_EAMOUNT_MINOR_UNITS, in that order of checks. */
OG_MUST_CHECK int og_amount_check(const char *amount, const char *currency);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_CORE_H */
