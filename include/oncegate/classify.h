/*
 * classify.h — what a billing provider's answer means (docs/design.md,
 * "Execution: one owner at a time"; docs/payouts.md, sections 5 and 6).
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
 * from the real provider (tests/vectors/). The client that asks and hands
 * the answer here is oncegate/provider.h (lib/provider/client.c), the only
 * code that does network I/O.
 *
 * Conventions as in oncegate.h: 0 or a documented non-negative outcome, or a
 * negative OG_E* code; out-parameters are written only on success;
 * og_x_free(NULL) is a no-op. Secrets (the API key, a payout's
 * destination token) never reach an error, a reason or an outcome: reasons
 * come from the table or from fixed formats, never from the provider's
 * text.
 */
#ifndef ONCEGATE_CLASSIFY_H
#define ONCEGATE_CLASSIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"

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
 * of the timing checks (docs/design.md, "Timing values"). */
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
    bool not_found_final;       /* a lookup by reference made at or after
                                   expires_at + skew + visibility_delay that
                                   lists nothing proves that no request
                                   carrying that expires_at ever took effect,
                                   nor ever will (docs/sandbox.md, "The
                                   processing window"); false: "not found"
                                   is never final */
    int64_t visibility_delay_ms; /* how long an accepted effect may stay
                                    hidden from lookups (0 when
                                    !not_found_final) */
} og_provider_properties;

/* The margin after a request's expires_at past which a lookup that finds
 * nothing is final, in microseconds: the skew plus the visibility delay
 * when p declares not_found_final, else -1 (never final). Pure. */
int64_t og_provider_final_absence_margin_us(const og_provider_properties *p);

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
 *   1  found: *out is SUCCEEDED (reason "found", "returned" when the one
 *      effect listed also satisfies the table's returned_if — it completed,
 *      and was returned later —, or "found_multiple" when the provider
 *      lists more than one effect for the reference — evidence of a
 *      duplicate) with the effect's reference, or UNKNOWN (reason
 *      "pending", or "undocumented_state") when the effect exists but is not
 *      final;
 *   0  the provider lists nothing: *out is UNKNOWN, reason "not_found".
 *      Never a failure — a lookup that finds nothing does not prove that
 *      nothing exists;
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
 * Token exchange: the OAuth 2.0 authorization-code grant (RFC 6749 4.1.3),
 * a single-use token that the provider itself refuses to redeem twice
 * (docs/design.md, "Redeeming an external single-use token"). What
 * oncegate does with the answer is og_redeem (oncegate/redeem.h); the call
 * is og_provider_exchange_code (oncegate/provider.h); here is what its
 * answer means.
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

/* Classifies the answer to a token exchange (lib/core/redeem.c). Pure;
 * never fails: what it
 * cannot keep (out of memory) is UNKNOWN "out_of_memory". Writes *out. */
void og_exchange_classify(const og_provider_response *r,
                          og_exchange_outcome *out);

/* Wipes and frees o->result and zeroes *o. NULL is a no-op. */
void og_exchange_outcome_clear(og_exchange_outcome *o);

#ifdef __cplusplus
}
#endif

#endif /* ONCEGATE_CLASSIFY_H */
