/*
 * provider.h — talking to a billing provider and classifying what it
 * answered (seed 000, "Where Admission Belongs"; seed 002, "Delayed
 * Financial Payout and Ambiguous External Commit").
 *
 * Every create call (a credit, a payout) ends in exactly one class:
 *
 *   SUCCEEDED  the provider documents the answer as "the effect exists";
 *              the outcome carries the provider's reference (credit id,
 *              payout id).
 *   FAILED     a definite refusal the provider documents as "no effect, and
 *              none will follow for this key" (account_closed,
 *              destination_closed...).
 *   TRANSIENT  the provider documents "nothing was done" and a retry with
 *              the same key is allowed (rate_limited...).
 *   UNKNOWN    everything else: timeouts, resets, 5xx, a 2xx whose body does
 *              not prove success, any status or error code the table does
 *              not name. Anything undocumented is UNKNOWN; the effect may
 *              exist, so spent authority is never released on it.
 *
 * What an answer means is DATA, not code: a versioned classification table
 * per provider API (providers/<provider>-<api>.v<N>.json), loaded and checked
 * strictly by og_provider_table_load(). The classifier (lib/core/classify.c)
 * is pure — no I/O, no clock — and is tested by replaying answers recorded
 * from the real provider (tests/vectors/). The client (lib/provider/
 * client.c) is the only code that does network I/O.
 *
 * Conventions as in oncegate.h: 0 or a documented non-negative outcome, or a
 * negative OG_E* code; out-parameters are written only on success;
 * og_x_free(NULL) is a no-op. Secrets (the API key, a payout's
 * destination token) never reach an error, a reason or an outcome: reasons
 * come from the table or from fixed formats, never from the provider's
 * text.
 */
#ifndef ONCEGATE_PROVIDER_H
#define ONCEGATE_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/oncegate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Classes, transports, limits.
 * ------------------------------------------------------------------------- */

/* X(NAME, text). UNKNOWN is 0, so a zeroed outcome is the safe one. */
#define OG_OUTCOME_CLASS_MAP(X)                                                \
    X(UNKNOWN, "unknown")                                                      \
    X(SUCCEEDED, "succeeded")                                                  \
    X(FAILED, "failed")                                                        \
    X(TRANSIENT, "transient")

typedef enum og_outcome_class {
#define OG__CLS_ENUM(name, text) OG_CLASS_##name,
    OG_OUTCOME_CLASS_MAP(OG__CLS_ENUM)
#undef OG__CLS_ENUM
} og_outcome_class;

/* The class's text ("succeeded"); "?" for a bad value. */
const char *og_outcome_class_name(og_outcome_class c);
/* The class named text; -1 when none. */
int og_outcome_class_parse(const char *text);

/* How the exchange ended below HTTP. X(NAME, text). Only OK carries a
 * status the table may read; every other kind is classified by the table's
 * transport rules, and UNKNOWN ("transport_<text>") when it has none. */
#define OG_TRANSPORT_MAP(X)                                                    \
    X(OK, "ok")                       /* a complete response */                \
    X(TIMEOUT, "timeout")             /* the call's own timeout, connected */  \
    X(CONNECT_FAILED, "connect_failed") /* no connection: not one byte of   \
                                           the request was sent */             \
    X(RESET, "connection_reset")      /* send/receive failed mid-exchange,  \
                                         or the response was cut short */      \
    X(NO_RESPONSE, "no_response")     /* closed without any response */        \
    X(TOO_LARGE, "response_too_large") /* response body over the cap */        \
    X(ERROR, "error")                 /* any other client-side failure */

typedef enum og_provider_transport {
#define OG__TR_ENUM(name, text) OG_TRANSPORT_##name,
    OG_TRANSPORT_MAP(OG__TR_ENUM)
#undef OG__TR_ENUM
} og_provider_transport;

/* The transport kind's text ("timeout"); "?" for a bad value. */
const char *og_provider_transport_name(og_provider_transport t);
/* The kind named text; -1 when none. */
int og_provider_transport_parse(const char *text);

#define OG_PROVIDER_REASON_MAX 63     /* reason bytes */
#define OG_PROVIDER_REF_MAX 128       /* provider reference (credit id) bytes */
#define OG_PROVIDER_BODY_MAX 65536    /* response bytes the client reads */
#define OG_PROVIDER_KEY_MAX 255       /* Idempotency-Key bytes */
#define OG_PROVIDER_TABLE_MAX 1048576 /* table file bytes */
#define OG_PROVIDER_RULES_MAX 64      /* rules in one table */
#define OG_PROVIDER_TERMS_MAX 8       /* terms one lookup verifies */

/* ---------------------------------------------------------------------------
 * The classification table.
 * ------------------------------------------------------------------------- */

/* Lookups a provider documents (bits of og_provider_properties.lookup). */
#define OG_PROVIDER_LOOKUP_REFERENCE 1u       /* by the request's reference */
#define OG_PROVIDER_LOOKUP_IDEMPOTENCY_KEY 2u /* by the idempotency key */

/* What the provider documents about its idempotency contract: the inputs
 * of the timing checks (seed 000, "The timing values in one place"). */
typedef struct og_provider_properties {
    char provider[65];          /* "oncegate-sandbox" */
    char api[65];               /* "credits" */
    int version;                /* the table's version */
    int64_t key_retention_s;    /* a key is honoured this long after its
                                   first use; submit_by must stay inside */
    bool atomic_same_key;       /* concurrent requests with one key are
                                   handled atomically: recovery may resend
                                   a create; false: recovery only looks up */
    unsigned lookup;            /* OG_PROVIDER_LOOKUP_* bits; 0: none */
    bool request_expiry;        /* the provider refuses a request that
                                   arrives after its expires_at */
    int64_t request_expiry_skew_s; /* lateness it tolerates (0 when
                                      !request_expiry) */
} og_provider_properties;

/* Why a table was refused. X(NAME, stable text). The text is API. */
#define OG_PROVIDER_TABLE_ERR_MAP(X)                                           \
    X(NONE, "none")                                                            \
    X(IO, "table.io_error")                /* file unreadable */               \
    X(TOO_LARGE, "table.too_large")        /* over OG_PROVIDER_TABLE_MAX */    \
    X(JSON, "table.json_invalid")          /* not one JSON object, or a     \
                                              member repeated */               \
    X(FORMAT, "table.format_unknown")      /* "format" is not ours */          \
    X(VERSION, "table.version_unsupported") /* "version" is not 1 */           \
    X(UNKNOWN_MEMBER, "table.unknown_member")                                  \
    X(MISSING_MEMBER, "table.missing_member")                                  \
    X(TYPE, "table.value_invalid")         /* wrong type or out of range */    \
    X(CLASS, "table.class_unknown")                                            \
    X(DUPLICATE_RULE, "table.duplicate_rule") /* same status+error, or same \
                                                 transport, twice */           \
    X(RULE, "table.rule_invalid")          /* a rule that claims more than  \
                                              its answer can prove */

typedef enum og_provider_table_err {
#define OG__TE_ENUM(name, text) OG_PROVIDER_TABLE_E_##name,
    OG_PROVIDER_TABLE_ERR_MAP(OG__TE_ENUM)
#undef OG__TE_ENUM
} og_provider_table_err;

/* The stable text of a table error ("table.duplicate_rule"). */
const char *og_provider_table_err_name(og_provider_table_err e);

/* Where and why a load failed (like jansson's json_error_t). */
typedef struct og_provider_table_error {
    og_provider_table_err code;
    char where[64];   /* a path into the table: "create[3].class" */
    char text[192];   /* one line: "<stable text> at <where>: <detail>" */
} og_provider_table_error;

typedef struct og_provider_table og_provider_table;

/* Loads a table from len bytes of JSON text (borrowed). The loader is
 * strict: unknown or repeated members, a format other than
 * "oncegate-provider-classification", a version other than 1, an unknown
 * class, two rules for one (status, error) or one transport, and any rule
 * that claims more than its answer can prove are refused. The format is
 * specified at the top of lib/core/classify.c.
 * Returns 0 and *out (free with og_provider_table_free), or OG_EINVAL with
 * *err filled (err may be NULL), or OG_ENOMEM. */
OG_MUST_CHECK int og_provider_table_load(const char *json, size_t len,
                                         og_provider_table **out,
                                         og_provider_table_error *err);

/* og_provider_table_load() of the file at path (at most
 * OG_PROVIDER_TABLE_MAX bytes). OG_EINVAL with code IO or TOO_LARGE when it
 * cannot be read. */
OG_MUST_CHECK int og_provider_table_load_file(const char *path,
                                              og_provider_table **out,
                                              og_provider_table_error *err);

/* Frees t. NULL is a no-op. */
void og_provider_table_free(og_provider_table *t);

/* The table's declared properties; valid while t lives. */
const og_provider_properties *
og_provider_table_properties(const og_provider_table *t);

/* ---------------------------------------------------------------------------
 * Classification (pure: lib/core/classify.c).
 * ------------------------------------------------------------------------- */

/* One answer as the client received it. Every pointer is borrowed. */
typedef struct og_provider_response {
    og_provider_transport transport;
    int status;              /* the final HTTP status; 0: none received.
                                Read only when transport is OK */
    const char *body;        /* body_len bytes, need not be terminated;
                                may be NULL when body_len is 0 */
    size_t body_len;
    const char *retry_after; /* the Retry-After header; NULL: absent */
} og_provider_response;

/* What an answer means. */
typedef struct og_provider_outcome {
    og_outcome_class cls;
    /* The rule's reason ("account_closed"), or a fixed form:
     * "undocumented_status_418", "undocumented_error_422" (the status has
     * rules, none for this error code), "malformed_success" (a succeeded
     * rule matched but the body does not prove it), "transport_<kind>".
     * Never text taken from the provider's answer. */
    char reason[OG_PROVIDER_REASON_MAX + 1];
    /* The provider's id for the effect: set for SUCCEEDED, and for
     * UNKNOWN when a rule names one (202 pending); else "". 1..128
     * printable ASCII without spaces, or it is not taken. */
    char reference[OG_PROVIDER_REF_MAX + 1];
    int rule;               /* index into the table's "create" rules of the
                               rule that matched; -1: none */
    int64_t retry_after_s;  /* TRANSIENT: Retry-After in seconds when it is
                               delta-seconds; -1: none */
} og_provider_outcome;

/* Classifies the answer to a create request. Never fails: whatever no rule
 * documents is UNKNOWN. Writes *out. */
void og_provider_classify(const og_provider_table *t,
                          const og_provider_response *r,
                          og_provider_outcome *out);

/* Classifies the answer to a lookup for query (the reference looked up).
 * Every listed effect must carry the table's match member equal to query
 * and a valid reference, or the answer is undocumented. An effect is
 * final when it satisfies one of the table's succeeded_if conditions.
 * Returns
 *   1  found: *out is SUCCEEDED (reason "found", or "found_multiple" when
 *      the provider lists more than one effect for the reference — evidence
 *      of a duplicate) with the effect's reference, or UNKNOWN (reason
 *      "pending", or "undocumented_state") when the effect exists but is not
 *      final;
 *   0  the provider lists nothing: *out is UNKNOWN, reason "not_found".
 *      Never a failure — a lookup that finds nothing does not prove that
 *      nothing exists (seed 000);
 *   OG_EPROVIDER_UNAVAILABLE for a transport failure or any answer the
 *      table does not document (nothing written);
 *   OG_EINVAL when the table has no lookup (or an argument is NULL). */
OG_MUST_CHECK int og_provider_classify_lookup(const og_provider_table *t,
                                              const og_provider_response *r,
                                              const char *query,
                                              og_provider_outcome *out);

/* A member a listed effect must carry with exactly this value, besides the
 * match (the reference): a term of the attempt being reconciled — its
 * destination, amount (in the provider's canonical form), currency. Both
 * strings borrowed. */
typedef struct og_provider_term {
    const char *member;
    const char *value;
} og_provider_term;

/* og_provider_classify_lookup() that also verifies n_terms terms (at most
 * OG_PROVIDER_TERMS_MAX; 0 is og_provider_classify_lookup()). An effect
 * listed under the reference whose terms differ is not this attempt's and
 * proves nothing about it: the answer is 1 with *out UNKNOWN, reason
 * "terms_mismatch" and that effect's reference — escalate, never resolve —
 * whatever else is listed. A term's value never reaches *out. OG_EINVAL
 * also for more than OG_PROVIDER_TERMS_MAX terms or a NULL member or
 * value. */
OG_MUST_CHECK int og_provider_classify_lookup_terms(
    const og_provider_table *t, const og_provider_response *r,
    const char *query, const og_provider_term *terms, size_t n_terms,
    og_provider_outcome *out);

/* ---------------------------------------------------------------------------
 * The client (lib/provider/client.c): libcurl, thread-safe.
 *
 * Each call uses its own fresh connection (no reuse, so libcurl never
 * resends a request on a stale connection by itself), no proxy, no
 * redirects, http and https only, its own timeout (never the caller's
 * request's), and reads at most OG_PROVIDER_BODY_MAX bytes.
 * ------------------------------------------------------------------------- */
typedef struct og_provider og_provider;

/* Opens a client for base_url ("http://127.0.0.1:8080", no query) using
 * table t, which is borrowed and must outlive the client. api_key: NULL for
 * none, else sent as "Authorization: Bearer <key>"; copied, never logged,
 * wiped when freed. Returns 0 and *out, OG_EINVAL (bad URL or key,
 * t NULL), or OG_ENOMEM. */
OG_MUST_CHECK int og_provider_open(const char *base_url, const char *api_key,
                                   const og_provider_table *t,
                                   og_provider **out);

/* Frees p, wiping the API key. NULL is a no-op. */
void og_provider_free(og_provider *p);

/* POST /v1/credits with Idempotency-Key: idempotency_key and the JSON body
 * {account, amount (canonical), currency, reference, expires_at (RFC 3339,
 * from expires_at_us)}, bounded by timeout_us, then og_provider_classify().
 * Every parameter is part of what the provider compares under the key:
 * every attempt of one operation must pass the same values (a fixed
 * expires_at, never "now + x"), or the retry is idempotency_mismatch.
 * Returns 0 with *out whenever a
 * request was attempted — including UNKNOWN for timeouts and resets. A
 * negative return means NO request was sent: OG_EINVAL (key not 1..255
 * visible ASCII, reference not an id, timeout_us <= 0), OG_EACCOUNT,
 * OG_EAMOUNT, OG_ECURRENCY, OG_EEXPIRES_AT, or OG_ENOMEM. */
OG_MUST_CHECK int og_provider_create_credit(
    og_provider *p, const char *idempotency_key, const char *account,
    const char *amount, const char *currency, const char *reference,
    int64_t expires_at_us, int64_t timeout_us, og_provider_outcome *out);

/* GET /v1/credits?reference=R bounded by timeout_us, then
 * og_provider_classify_lookup(): 1 found, 0 not found (never a failure),
 * OG_EPROVIDER_UNAVAILABLE (unreachable, timed out, or an undocumented
 * answer: nothing is known), OG_EINVAL (bad reference or timeout, or the
 * table documents no lookup by reference), OG_ENOMEM. */
OG_MUST_CHECK int og_provider_lookup(og_provider *p, const char *reference,
                                     int64_t timeout_us,
                                     og_provider_outcome *out);

/* POST /v1/payouts: og_provider_create_credit() for a payout — the same
 * request built by the same code, with {destination, amount, currency,
 * reference, expires_at}; p's table must classify the payouts API
 * (providers/sandbox-payouts.v1.json). destination is the provider's
 * token for the beneficiary's account, a SECRET: validated (1..128
 * printable ASCII without spaces, else OG_EDESTINATION, nothing sent),
 * never put in an error, reason or outcome, and the request text and the
 * answer this call owns are wiped (libcurl's and jansson's own copies are
 * freed unwiped). expires_at_us is the attempt's send deadline: a provider
 * with request_expiry refuses, with no effect, a request it receives after
 * expires_at + its skew — the bound that later lets a lookup's "not found"
 * be final (docs/sandbox.md, "The processing window"). Returns as
 * og_provider_create_credit(). */
OG_MUST_CHECK int og_provider_create_payout(
    og_provider *p, const char *idempotency_key, const char *destination,
    const char *amount, const char *currency, const char *reference,
    int64_t expires_at_us, int64_t timeout_us, og_provider_outcome *out);

/* GET /v1/payouts?reference=R bounded by timeout_us, then
 * og_provider_classify_lookup_terms() with the attempt's terms
 * (destination, canonical amount, currency): a payout listed under the
 * reference with other terms is 1, UNKNOWN "terms_mismatch" (escalate). A
 * returned payout is SUCCEEDED: it completed, and the return is a later
 * event, not a failure of the attempt. 0 "not found" is UNKNOWN and says
 * nothing about the future unless the lookup ran after expires_at + skew +
 * the visibility delay — the caller's judgement, with the times it knows.
 * Returns as og_provider_lookup(), and OG_EDESTINATION, OG_EAMOUNT,
 * OG_ECURRENCY for a bad term (nothing sent). */
OG_MUST_CHECK int og_provider_lookup_payout(og_provider *p,
                                            const char *reference,
                                            const char *destination,
                                            const char *amount,
                                            const char *currency,
                                            int64_t timeout_us,
                                            og_provider_outcome *out);

/* ---------------------------------------------------------------------------
 * Token exchange: the OAuth 2.0 authorization-code grant (RFC 6749 4.1.3),
 * a single-use token that the provider itself refuses to redeem twice
 * (seed 003). What oncegate does with the answer is og_redeem
 * (oncegate/redeem.h); here is the call and what its answer means.
 *
 * Every exchange ends in exactly one class:
 *
 *   SUCCEEDED     200 with a token response (RFC 6749 5.1): a JSON object
 *                 with non-empty access_token and token_type, expires_in
 *                 (when present) a non-negative integer, refresh_token and
 *                 scope (when present) strings. This call spent the code.
 *   ALREADY_USED  400 invalid_grant (RFC 6749 5.2): the code is spent —
 *                 by someone, perhaps this very operation — or was never
 *                 valid; the provider does not say which.
 *   REJECTED      400 or 401 with invalid_request, invalid_client,
 *                 unauthorized_client, unsupported_grant_type or
 *                 invalid_scope: the provider refused the request itself,
 *                 so the code was not exchanged.
 *   UNKNOWN       everything else: timeouts, resets, a dropped answer, 5xx,
 *                 a 200 whose body is not a token response, any status or
 *                 error code not named above. The code may have been spent
 *                 by this request, and if so its result is gone: the
 *                 provider never gives it twice.
 * ------------------------------------------------------------------------- */
#define OG_EXCHANGE_CLASS_MAP(X)                                               \
    X(UNKNOWN, "unknown")                                                      \
    X(SUCCEEDED, "succeeded")                                                  \
    X(ALREADY_USED, "already_used")                                            \
    X(REJECTED, "rejected")

typedef enum og_exchange_class {
#define OG__XC_ENUM(name, text) OG_EXCHANGE_##name,
    OG_EXCHANGE_CLASS_MAP(OG__XC_ENUM)
#undef OG__XC_ENUM
} og_exchange_class;

/* The class's text ("already_used"); "?" for a bad value. */
const char *og_exchange_class_name(og_exchange_class c);

#define OG_PROVIDER_CODE_MAX 1024 /* bytes of a code: 1*VSCHAR (0x20-0x7e) */

/* What an exchange's answer means. */
typedef struct og_exchange_outcome {
    og_exchange_class cls;
    /* "exchanged", "invalid_grant", the rejection's RFC 6749 error code,
     * or a fixed form: "malformed_success", "undocumented_status_418",
     * "undocumented_error_400", "transport_<kind>", "out_of_memory".
     * Never text taken from the provider's answer. */
    char reason[OG_PROVIDER_REASON_MAX + 1];
    /* SUCCEEDED only: the token response as compact JSON text (at most
     * OG_REDEMPTION_RESULT_MAX bytes), NUL-terminated, malloc'd. A
     * credential: og_exchange_outcome_clear wipes and frees it. */
    char *result;
    size_t result_len;
} og_exchange_outcome;

/* Classifies the answer to a token exchange. Pure; never fails: what it
 * cannot keep (out of memory) is UNKNOWN "out_of_memory". Writes *out. */
void og_exchange_classify(const og_provider_response *r,
                          og_exchange_outcome *out);

/* Wipes and frees o->result and zeroes *o. NULL is a no-op. */
void og_exchange_outcome_clear(og_exchange_outcome *o);

/* Opens a client for a token endpoint at base_url: as og_provider_open,
 * without a classification table (the exchange's classes are fixed, above).
 * og_provider_create_credit, og_provider_lookup and their payout
 * counterparts refuse such a client (OG_EINVAL). */
OG_MUST_CHECK int og_provider_open_exchange(const char *base_url,
                                            const char *api_key,
                                            og_provider **out);

/* POST /oauth/token, Content-Type application/x-www-form-urlencoded,
 * grant_type=authorization_code&code=CODE (the code %-encoded), bounded by
 * timeout_us, on a fresh connection that is never reused (libcurl resends
 * nothing by itself), no redirects; then og_exchange_classify(). Returns 0
 * with *out whenever a request was attempted — including UNKNOWN. A
 * negative return means NO request was sent: OG_ECODE (not 1..
 * OG_PROVIDER_CODE_MAX bytes of 0x20-0x7e), OG_EINVAL (timeout, p), or
 * OG_ENOMEM. The code and the answer are secrets: never logged, and the
 * buffers this call owns are wiped. */
OG_MUST_CHECK int og_provider_exchange_code(og_provider *p, const char *code,
                                            int64_t timeout_us,
                                            og_exchange_outcome *out);

#ifdef __cplusplus
}
#endif

#endif /* ONCEGATE_PROVIDER_H */
