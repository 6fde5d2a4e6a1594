/*
 * payout.h — the decision side of a delayed payout (docs/payouts.md), as
 * pure functions (lib/core/payout.c).
 *
 * The artifacts, kept apart (docs/payouts.md, section 1):
 *
 *   Terms         WHAT is paid: tenant, beneficiary, destination and its
 *                 version, amount, currency, purpose (og_payout_terms).
 *   Fingerprint   SHA-256 over the terms' canonical serialization, as 64
 *                 lower-case hex characters. The same payout gives the same
 *                 fingerprint however its fields were spelled ("4250" and
 *                 "4250.00" EUR, "a  b" and " a b"); any change to a term
 *                 gives another. Record VERSIONS are not terms: approving a
 *                 payout moves its version and keeps its fingerprint.
 *   Decision      What the policy (OG_PAYOUT_POLICY_VERSION) concludes about
 *                 an intent — the terms plus the payout version the caller
 *                 evaluated — over a context of authoritative facts: an
 *                 outcome (Allowed, Denied, Deferred, AcknowledgmentRequired,
 *                 EscalationRecommended) and ONE reason code, the first rule
 *                 that failed in the policy's order of checks
 *                 (og_payout_evaluate). Only Allowed may lead to a grant.
 *   Execution     What a worker holding a grant re-establishes before it may
 *   recheck       claim (docs/payouts.md, section 5, step 2): the payout is
 *                 Approved at the grant's version, its current terms still
 *                 have the grant's fingerprint, and the same rules still
 *                 allow it now — with this payout's own reservation counted
 *                 once and the requester's facts as the decision captured
 *                 them (og_payout_evaluate_for_execution).
 *
 * What this module does NOT do: no store, no clock, no randomness, no I/O.
 * The caller reads the facts (one consistent read, or "unavailable"), passes
 * the observation time (observed_at_us), writes the decision, the grant and
 * the reservation in one transaction, and fences the versions a VALID
 * recheck relied on in the claim. Identifiers (DecisionId, GrantId), the
 * grant's own checks (unknown, audience, revoked, consumed, expired) and
 * currency conversion are the caller's: every amount in a context is in
 * minor units of the payout's own currency: converting between
 * currencies is outside this design.
 *
 * Conventions as in oncegate.h: 0 or a negative OG_E* code; an outcome is a
 * value, never an error; out-parameters are written only on success; every
 * pointer is borrowed for the call; every buffer has a fixed cap.
 */
#ifndef ONCEGATE_PAYOUT_H
#define ONCEGATE_PAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Constants. Each is part of the contract: changing one changes decisions
 * or fingerprints, so it comes with a new policy version or terms tag.
 * ------------------------------------------------------------------------- */

/* The policy's version: every verdict names it. */
#define OG_PAYOUT_POLICY_VERSION "oncegate-payout-policy/1"

/* The domain tag that opens every canonical serialization, so a terms
 * digest can never equal a digest of another kind of record. */
#define OG_PAYOUT_TERMS_TAG "oncegate/payout-terms/v1"

/* The largest payout amount, in minor units: 15 decimal digits
 * (9,999,999,999,999.99 EUR). Below 2^53, so the value survives any JSON
 * reader that turns numbers into doubles, and far enough below INT64_MAX
 * that parsing never needs to detect an int64 overflow separately. */
#define OG_PAYOUT_MINOR_MAX INT64_C(999999999999999)

/* Text of any non-negative int64 in minor units at any scale:
 * 19 digits and a '.' ("92233720368547758.07"). */
#define OG_PAYOUT_MONEY_TEXT_MAX 20

/* A purpose after normalization: 1..140 bytes (a common cap of remittance
 * information on payment rails). Raw input may be longer by surrounding or
 * repeated spaces, up to OG_PAYOUT_PURPOSE_INPUT_MAX bytes. */
#define OG_PAYOUT_PURPOSE_MAX 140
#define OG_PAYOUT_PURPOSE_INPUT_MAX 1024

#define OG_PAYOUT_FINGERPRINT_HEX 64 /* SHA-256 as lower-case hex */

/* The length prefix that marks an absent field (the purpose): no present
 * value can have it, since every field is capped far below it. */
#define OG_PAYOUT_ABSENT_LEN UINT32_C(0xFFFFFFFF)

/* The largest canonical serialization: eight u32 length prefixes (tag and
 * seven fields), the tag, three ids, a version (19 digits), an amount, a
 * currency and a purpose. */
#define OG_PAYOUT_TERMS_CANONICAL_MAX                                          \
    (8 * 4 + (sizeof OG_PAYOUT_TERMS_TAG - 1) + 3 * OG_ID_MAX + 19 +           \
     OG_PAYOUT_MONEY_TEXT_MAX + OG_CURRENCY_LEN + OG_PAYOUT_PURPOSE_MAX)

/* A destination changed less than this before the observation is "recently
 * changed": the policy's "destination changed in the last 7 days". */
#define OG_PAYOUT_RECENT_CHANGE_US (INT64_C(7) * 24 * 3600 * 1000000)

/* ---------------------------------------------------------------------------
 * Money: canonical decimal text <-> int64 minor units.
 *
 * Currencies are the upper-case ISO 4217 alphabetic codes of Debian's
 * iso-codes list, compiled in (lib/core/payout_currencies.inc, generated by
 * tools/gen_currencies.py, which names the sources). Minor units follow ISO
 * 4217 List One: 2, except 0 (BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX
 * UYI VND VUV XAF XOF XPF), 3 (BHD IQD JOD KWD LYD OMR TND) and 4 (CLF
 * UYW). Codes without a minor unit (XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU
 * XTS XUA XXX: funds, metals, testing) are refused for payouts.
 * ------------------------------------------------------------------------- */

/* The minor-unit scale (0..4) of currency. Returns 0 and *scale, or
 * OG_EPAYOUT_CURRENCY (not three upper-case letters, not in the list, or
 * without minor units), OG_EINVAL (scale NULL). */
OG_MUST_CHECK int og_payout_currency_scale(const char *currency, int *scale);

/* Parses a payout amount of currency into minor units.
 * Grammar: an integer part ("0", or a non-zero digit then digits) and,
 * when the currency has minor units, optionally '.' and 1..scale digits.
 * Fewer fraction digits than the scale are padded ("4250" and "4250.5" EUR
 * are 425000 and 425050); more are refused even when they are zeros
 * ("4250.000" EUR), with OG_EAMOUNT_MINOR_UNITS (the code every route
 * that takes an amount uses for it): an amount written at a finer scale
 * than its currency suggests the writer had another currency in mind, and
 * one that is finer cannot be paid. Refused: empty text,
 * signs, exponents, spaces, leading zeros ("04"), "5." and ".5", zero (a
 * payout of nothing is a mistake), more than OG_PAYOUT_MINOR_MAX minor
 * units (this includes everything beyond int64). Returns 0 and *minor, or
 * OG_EPAYOUT_CURRENCY (checked first), OG_EPAYOUT_AMOUNT,
 * OG_EAMOUNT_MINOR_UNITS, OG_EINVAL (minor NULL). */
OG_MUST_CHECK int og_payout_amount_parse(const char *text,
                                         const char *currency,
                                         int64_t *minor);

/* Formats minor (0..INT64_MAX: also limits and totals, which may exceed a
 * single payout) as the canonical text of currency: exactly scale fraction
 * digits, a "0" before a pure fraction ("0.01"), no point at scale 0. For
 * every amount og_payout_amount_parse accepts, parsing the text gives minor
 * back. Writes out (NUL-terminated) only when it fits in outlen bytes
 * (OG_PAYOUT_MONEY_TEXT_MAX + 1 always does). Returns 0, or
 * OG_EPAYOUT_CURRENCY, OG_EPAYOUT_AMOUNT (minor < 0), OG_EINVAL (out NULL
 * or too short). */
OG_MUST_CHECK int og_payout_amount_format(int64_t minor, const char *currency,
                                          char *out, size_t outlen);

/* ---------------------------------------------------------------------------
 * Terms and their fingerprint (docs/payouts.md, section 1).
 * ------------------------------------------------------------------------- */

/* The material terms of one payout. Every pointer is borrowed. */
typedef struct og_payout_terms {
    const char *tenant_id;       /* og_id_valid() */
    const char *beneficiary_id;  /* og_id_valid() */
    const char *destination_id;  /* og_id_valid() */
    int64_t destination_version; /* >= 1 */
    const char *amount;          /* og_payout_amount_parse() in currency */
    const char *currency;        /* og_payout_currency_scale() */
    const char *purpose;         /* NULL: absent; else
                                    og_payout_purpose_normalize() */
} og_payout_terms;

/* Normalizes a purpose: surrounding spaces trimmed, each inner run of
 * spaces collapsed to one. The input must be at most
 * OG_PAYOUT_PURPOSE_INPUT_MAX bytes of printable ASCII (0x20..0x7e; tabs,
 * line breaks and non-ASCII bytes are refused, not replaced) and the result
 * 1..OG_PAYOUT_PURPOSE_MAX bytes: an empty or all-space purpose is refused,
 * so "no purpose" has one spelling, NULL. ASCII only because remittance
 * fields on payment rails commonly accept only a basic Latin set, and
 * because it needs no Unicode normalization: two services cannot disagree
 * about which bytes a purpose is. Writes out (NUL-terminated) only on
 * success and when it fits in outlen bytes. Returns 0, OG_EPAYOUT_PURPOSE,
 * or OG_EINVAL (out NULL or too short). */
OG_MUST_CHECK int og_payout_purpose_normalize(const char *in, char *out,
                                              size_t outlen);

/* The canonical serialization of t:
 *
 *   field(OG_PAYOUT_TERMS_TAG) field(tenant_id) field(beneficiary_id)
 *   field(destination_id) field(destination_version as decimal)
 *   field(amount as canonical text at the currency's scale)
 *   field(currency) field(normalized purpose) | u32be(0xFFFFFFFF)
 *
 * where field(x) = u32be(byte length of x) || x. Length prefixes make
 * ("ab","c") and ("a","bc") differ; the absent marker differs from every
 * present purpose. Fields are checked in the order tenant, beneficiary,
 * destination, destination version, currency, amount (its scale depends on
 * the currency), purpose; the first bad one is reported. Ids are refused,
 * not trimmed: an id is a key, and og_id_valid() already excludes spaces.
 * Writes out[0..*len) only on success and when it fits in outlen bytes
 * (OG_PAYOUT_TERMS_CANONICAL_MAX always does). Returns 0 and *len, or
 * OG_EPAYOUT_TENANT, OG_EPAYOUT_BENEFICIARY, OG_EPAYOUT_DESTINATION,
 * OG_EPAYOUT_DESTINATION_VERSION, OG_EPAYOUT_CURRENCY, OG_EPAYOUT_AMOUNT,
 * OG_EPAYOUT_PURPOSE, OG_EINVAL (t, out or len NULL, or outlen short). */
OG_MUST_CHECK int og_payout_terms_canonicalize(const og_payout_terms *t,
                                               unsigned char *out,
                                               size_t outlen, size_t *len);

/* SHA-256 of og_payout_terms_canonicalize(t) as 64 lower-case hex
 * characters and a NUL into out, written only on success. Returns 0 or the
 * errors of og_payout_terms_canonicalize (OG_EINVAL when out is NULL). */
OG_MUST_CHECK int og_payout_terms_fingerprint(
    const og_payout_terms *t, char out[OG_PAYOUT_FINGERPRINT_HEX + 1]);

/* ---------------------------------------------------------------------------
 * Records and the context the policy reads.
 * ------------------------------------------------------------------------- */

/* The payout record's state. X(NAME, stable text). */
#define OG_PAYOUT_STATE_MAP(X)                                                 \
    X(DRAFT, "Draft")                                                          \
    X(APPROVED, "Approved")                                                    \
    X(EXECUTING, "Executing")                                                  \
    X(PAID, "Paid")                                                            \
    X(FAILED, "Failed")                                                        \
    X(UNKNOWN, "Unknown")                                                      \
    X(CANCELLED, "Cancelled")

typedef enum og_payout_state {
#define OG__PS_ENUM(name, text) OG_PAYOUT_STATE_##name,
    OG_PAYOUT_STATE_MAP(OG__PS_ENUM)
#undef OG__PS_ENUM
} og_payout_state;

#define OG_PAYOUT_BENEFICIARY_STATUS_MAP(X)                                    \
    X(ACTIVE, "Active")                                                        \
    X(SUSPENDED, "Suspended")                                                  \
    X(CLOSED, "Closed")

typedef enum og_payout_beneficiary_status {
#define OG__BS_ENUM(name, text) OG_PAYOUT_BENEFICIARY_##name,
    OG_PAYOUT_BENEFICIARY_STATUS_MAP(OG__BS_ENUM)
#undef OG__BS_ENUM
} og_payout_beneficiary_status;

/* Money below is in minor units of the payout's currency (conversion is
 * the caller's, and out of scope); every amount and total is >= 0 and
 * every version >= 1, or the context is refused (OG_EPAYOUT_CONTEXT). */
typedef struct og_payout_tenant {
    bool payouts_suspended;
    int64_t daily_limit;
    int64_t paid_today;       /* completed payouts of the release day */
    int64_t reserved_today;   /* held by issued grants and by attempts not
                                 yet resolved (Claimed, Started, Unknown) */
    int64_t settings_version; /* moves with policy-relevant settings, not
                                 with the counters */
} og_payout_tenant;

typedef struct og_payout_beneficiary {
    bool verified;
    og_payout_beneficiary_status status;
    int64_t version;
} og_payout_beneficiary;

/* The destination the terms name, as registered now. */
typedef struct og_payout_destination {
    const char *beneficiary_id; /* whom it is registered to: og_id_valid() */
    int64_t version;
    int64_t changed_at_us;      /* last change, microseconds since the epoch */
} og_payout_destination;

/* The authoritative payout record. */
typedef struct og_payout_record {
    og_payout_state state;
    int64_t version;
    og_payout_terms terms;
} og_payout_record;

/* What the decision is about: the terms, bound from the record (never from
 * a request body), and the record version the caller evaluated. */
typedef struct og_payout_intent {
    og_payout_terms terms;
    int64_t payout_version;
} og_payout_intent;

/* The requester's facts at decision time (a recheck passes the ones the
 * decision captured: the requester is not acting at execution time). */
typedef struct og_payout_requester {
    int64_t approval_limit; /* single-payout approval limit */
} og_payout_requester;

typedef struct og_payout_context {
    bool unavailable;  /* the tenant, beneficiary, destination or payout
                          record could not be read: nothing else here is
                          read, and the answer is to wait, never to allow */
    og_payout_tenant tenant;
    og_payout_beneficiary beneficiary;
    og_payout_destination destination;
    og_payout_record payout;
    og_payout_intent intent;       /* og_payout_evaluate only */
    og_payout_requester requester;
    int64_t observed_at_us;        /* when the facts were read: the caller's
                                      clock, never read here */
    int64_t acknowledged_destination_version; /* 0: nothing acknowledged.
                                      Else an authorized approver
                                      acknowledged the recent change of the
                                      destination at exactly this version
                                      (docs/payouts.md, section 4,
                                      "Acknowledgment and escalation"): rule
                                      7 is skipped while the destination is
                                      at it, and applies again once it
                                      moved. A recheck passes the one the
                                      issuing decision recorded */
} og_payout_context;

/* The record versions a verdict relied on: a decision records them, and a
 * claim fences them (docs/payouts.md, section 5, step 3). */
typedef struct og_payout_versions {
    int64_t tenant_settings;
    int64_t beneficiary;
    int64_t destination;
    int64_t payout;
} og_payout_versions;

/* ---------------------------------------------------------------------------
 * The decision (docs/payouts.md, sections 1 and 4).
 * ------------------------------------------------------------------------- */

/* X(NAME, stable text) — the policy's outcome names. */
#define OG_PAYOUT_OUTCOME_MAP(X)                                               \
    X(ALLOWED, "Allowed")                                                      \
    X(DENIED, "Denied")                                                        \
    X(DEFERRED, "Deferred")                                                    \
    X(ACKNOWLEDGMENT_REQUIRED, "AcknowledgmentRequired")                       \
    X(ESCALATION_RECOMMENDED, "EscalationRecommended")

typedef enum og_payout_outcome {
#define OG__PO_ENUM(name, text) OG_PAYOUT_##name,
    OG_PAYOUT_OUTCOME_MAP(OG__PO_ENUM)
#undef OG__PO_ENUM
} og_payout_outcome;

/* X(NAME, stable code, outcome) — the policy's reason codes, IN THE ORDER
 * THE POLICY CHECKS THEM: a context that fails several rules reports the
 * first. Each reason has exactly one outcome. */
#define OG_PAYOUT_REASON_MAP(X)                                                \
    /* the context could not be read: checked before any field */              \
    X(CONTEXT_UNAVAILABLE, "context.unavailable", DEFERRED)                    \
    X(TENANT_SUSPENDED, "tenant.payouts-suspended", DENIED)                    \
    /* not verified, or status not Active */                                   \
    X(BENEFICIARY_NOT_ELIGIBLE, "beneficiary.not-eligible", DENIED)            \
    /* registered to another beneficiary, or at another version */             \
    X(DESTINATION_NOT_REGISTERED, "destination.not-registered", DENIED)        \
    /* not in the expected state (Draft; for a re-authorization Approved     \
     * with no active attempt; Approved for a recheck), or the record's       \
     * version is not the one evaluated */                                    \
    X(PAYOUT_NOT_SUBMITTABLE, "payout.not-submittable", DENIED)                \
    /* paid + reserved + amount > daily limit, or the sum overflows */         \
    X(DAILY_LIMIT, "tenant.daily-limit", DENIED)                               \
    /* observed_at - changed_at < OG_PAYOUT_RECENT_CHANGE_US, unless the   \
     * context's acknowledged_destination_version is the destination's */     \
    X(DESTINATION_RECENTLY_CHANGED, "destination.recently-changed",            \
      ACKNOWLEDGMENT_REQUIRED)                                                 \
    X(ABOVE_REQUESTER_LIMIT, "amount.above-requester-limit",                   \
      ESCALATION_RECOMMENDED)                                                  \
    /* otherwise */                                                            \
    X(ALLOWED, "payout.allowed", ALLOWED)

typedef enum og_payout_reason {
#define OG__PR_ENUM(name, code, outcome) OG_PAYOUT_REASON_##name,
    OG_PAYOUT_REASON_MAP(OG__PR_ENUM)
#undef OG__PR_ENUM
} og_payout_reason;

/* A verdict. Plain data; the caller wraps it in a decision record with its
 * own DecisionId and evaluation time. */
typedef struct og_payout_verdict {
    og_payout_outcome outcome;     /* = og_payout_reason_outcome(reason) */
    og_payout_reason reason;
    const char *policy_version;    /* OG_PAYOUT_POLICY_VERSION (static) */
    char terms_fingerprint[OG_PAYOUT_FINGERPRINT_HEX + 1]; /* of the terms
                                      evaluated; "" when the context was
                                      unavailable (nothing was read) */
    og_payout_versions evaluated;  /* all 0 when unavailable */
} og_payout_verdict;

/* Evaluates ctx->intent against the facts in ctx (docs/payouts.md,
 * section 4): pure, deterministic, and reading neither clock nor store. The
 * order:
 *   1. ctx->unavailable: DEFERRED context.unavailable, nothing else read;
 *   2. the intent's terms are validated, then the context
 *      (OG_EPAYOUT_CONTEXT: an amount or total < 0, a version < 1, a state
 *      or status outside its enum, a bad destination beneficiary_id), then
 *      the record's terms;
 *   3. the intent's terms must be the record's terms (same fingerprint):
 *      otherwise OG_EPAYOUT_INTENT_MISMATCH — such a request is rejected
 *      before policy runs;
 *   4. the rules of OG_PAYOUT_REASON_MAP in order, the payout expected in
 *      Draft at ctx->intent.payout_version; the first that fails decides.
 * Arithmetic is checked: a daily-limit sum that would overflow int64 is
 * Denied, never wrapped. Returns 0 and *out, or OG_EINVAL (NULL), a terms
 * error (og_payout_terms_canonicalize's codes), OG_EPAYOUT_CONTEXT or
 * OG_EPAYOUT_INTENT_MISMATCH, with *out untouched. */
OG_MUST_CHECK int og_payout_evaluate(const og_payout_context *ctx,
                                     og_payout_verdict *out);

/* The same for a re-authorization (docs/payouts.md, P5: a materially new
 * attempt of a payout whose earlier attempt reached a terminal state): the
 * rules of og_payout_evaluate in the same order, except that rule 4
 * (payout.not-submittable) expects the payout Approved at
 * ctx->intent.payout_version with no active attempt (active_attempt false:
 * no attempt is Claimed, Started or Unknown) instead of Draft. Returns as
 * og_payout_evaluate. */
OG_MUST_CHECK int og_payout_evaluate_reauthorization(
    const og_payout_context *ctx, bool active_attempt, og_payout_verdict *out);

/* ---------------------------------------------------------------------------
 * The release day (docs/payouts.md, section 4): a reservation belongs to
 * the payout's release date in the tenant's settlement time zone.
 *
 * A tenant's settlement time zone is an IANA time-zone name
 * ("Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC"), and the day
 * is read with ICU's calendar (libicu) and its own copy of the time-zone
 * database, daylight saving time included: the release batch at 23:30 in
 * Berlin belongs to that Berlin date in winter and in summer alike, with no
 * operator changing an offset twice a year. A zone change is a settings
 * change like any other (it moves the tenant's settings version, which the
 * claim fences). A reservation keeps the day it was made for.
 * ------------------------------------------------------------------------- */
#define OG_PAYOUT_DAY_LEN 10     /* "YYYY-MM-DD" */
#define OG_PAYOUT_TIME_ZONE_MAX 64 /* an IANA name's bytes (the longest
                                      known today is 32) */

/* Whether zone is a time zone og_payout_release_day accepts: 1..
 * OG_PAYOUT_TIME_ZONE_MAX printable ASCII characters without spaces that
 * ICU's time-zone database knows as a zone id (a canonical name or one of
 * its aliases: "UTC", "Etc/GMT-1", "Asia/Calcutta"); custom ids
 * ("GMT+01:00") and unknown names are refused. Returns 0, or
 * OG_EPAYOUT_TIMEZONE (NULL included). */
OG_MUST_CHECK int og_payout_time_zone_check(const char *zone);

/* The calendar date (proleptic Gregorian) of the instant at_us
 * (microseconds since the epoch, 1970-01-01 .. 9999-12-31T23:59:59.999999Z)
 * in time zone zone (og_payout_time_zone_check), with the offset in force
 * at that instant (daylight saving time included), as "YYYY-MM-DD" into
 * out. A day runs from local midnight inclusive to the next midnight
 * exclusive (a day that skips or repeats an hour is still one date).
 * Returns 0, or OG_EPAYOUT_TIMEZONE, OG_EINVAL (at_us out of range, a
 * date after 9999-12-31, out NULL), OG_EINTERNAL (the calendar failed),
 * with out untouched. */
OG_MUST_CHECK int og_payout_release_day(int64_t at_us, const char *zone,
                                        char out[OG_PAYOUT_DAY_LEN + 1]);

/* ---------------------------------------------------------------------------
 * The execution recheck (docs/payouts.md, section 5, step 2).
 * ------------------------------------------------------------------------- */

#define OG_PAYOUT_EXEC_OUTCOME_MAP(X)                                          \
    X(VALID, "valid")         /* the worker may go on to claim */              \
    X(REFUSED, "refused")     /* the grant is not used: no claim, no call */   \
    X(POSTPONED, "postponed") /* the context could not be read: the grant is   \
                                 not consumed; validate again on redelivery */

typedef enum og_payout_exec_outcome {
#define OG__EO_ENUM(name, text) OG_PAYOUT_EXEC_##name,
    OG_PAYOUT_EXEC_OUTCOME_MAP(OG__EO_ENUM)
#undef OG__EO_ENUM
} og_payout_exec_outcome;

/* The worker pipeline's reason codes (docs/payouts.md, section 5), in the
 * order the pipeline meets them. og_payout_evaluate_for_execution reports
 * NONE, CONTEXT_UNAVAILABLE, PAYOUT_NOT_EXECUTABLE, BINDING_MISMATCH and
 * POLICY_NO_LONGER_ALLOWS; the grant's own checks and the claim are the
 * caller's and report the others with these same codes. */
#define OG_PAYOUT_WORKER_REASON_MAP(X)                                         \
    X(NONE, "none") /* VALID: nothing refused */                               \
    X(GRANT_UNKNOWN, "grant.unknown")                                          \
    /* the grant is for another payout, or the current terms' fingerprint is   \
     * not the grant's */                                                      \
    X(BINDING_MISMATCH, "binding.mismatch")                                    \
    X(PRESENTER_NOT_AUDIENCE, "presenter.not-audience")                        \
    X(GRANT_REVOKED, "grant.revoked")                                          \
    X(GRANT_CONSUMED, "grant.consumed")                                        \
    X(GRANT_EXPIRED, "grant.expired")                                          \
    X(CONTEXT_UNAVAILABLE, "context.unavailable")                              \
    /* not Approved, or not at the grant's executable version */               \
    X(PAYOUT_NOT_EXECUTABLE, "payout.not-executable")                          \
    /* the policy recheck did not allow: its verdict says why */               \
    X(POLICY_NO_LONGER_ALLOWS, "policy.no-longer-allows")                      \
    X(CLAIM_LOST, "claim.lost")                                                \
    X(CLAIM_CONTEXT_CHANGED, "claim.context-changed")

typedef enum og_payout_worker_reason {
#define OG__WR_ENUM(name, code) OG_PAYOUT_WORKER_##name,
    OG_PAYOUT_WORKER_REASON_MAP(OG__WR_ENUM)
#undef OG__WR_ENUM
} og_payout_worker_reason;

/* What the grant binds, as the grant store holds it. */
typedef struct og_payout_grant_binding {
    const char *terms_fingerprint;     /* 64 lower-case hex */
    int64_t executable_payout_version; /* the Approved version the claim
                                          expects; >= 1 */
} og_payout_grant_binding;

typedef struct og_payout_exec_verdict {
    og_payout_exec_outcome outcome;
    og_payout_worker_reason reason;   /* NONE exactly when VALID */
    bool rechecked;                   /* the policy recheck ran: recheck is
                                         set (VALID and
                                         POLICY_NO_LONGER_ALLOWS) */
    og_payout_verdict recheck;        /* zeroed unless rechecked */
    og_payout_versions relied;        /* VALID: what the claim must fence;
                                         all 0 otherwise */
} og_payout_exec_verdict;

/* Rechecks, at execution time, a payout whose grant passed its own checks.
 * ctx holds the CURRENT facts; ctx->intent is not read — the current terms
 * are ctx->payout.terms and the expected version is the grant's — and
 * ctx->requester holds the requester facts the decision captured (a later
 * entitlement change is for the host to fence or revoke).
 * The order:
 *   1. ctx->unavailable: POSTPONED context.unavailable, nothing else read;
 *   2. the grant binding, the record's terms and the context are validated
 *      (errors as og_payout_evaluate, OG_EPAYOUT_FINGERPRINT for a grant
 *      fingerprint that is not 64 lower-case hex);
 *   3. not Approved, or not at grant->executable_payout_version: REFUSED
 *      payout.not-executable;
 *   4. the current terms' fingerprint differs from the grant's: REFUSED
 *      binding.mismatch;
 *   5. the policy's rules again, expecting Approved at the grant's version,
 *      with the daily limit counting this payout's reservation once:
 *      ctx->tenant.reserved_today must include it (reserved_today below
 *      the amount is OG_EPAYOUT_CONTEXT), and paid + (reserved - amount) +
 *      amount > limit is checked. Anything but Allowed — Denied,
 *      AcknowledgmentRequired or EscalationRecommended alike — is REFUSED
 *      policy.no-longer-allows, with the recheck's verdict;
 *   6. otherwise VALID, with the versions relied on.
 * Returns 0 and *out, or an error with *out untouched. */
OG_MUST_CHECK int og_payout_evaluate_for_execution(
    const og_payout_context *ctx, const og_payout_grant_binding *grant,
    og_payout_exec_verdict *out);

/* ---------------------------------------------------------------------------
 * Names. Each returns the stable text of its X-macro list, or "?" for a
 * value outside it.
 * ------------------------------------------------------------------------- */
const char *og_payout_state_name(og_payout_state s);
const char *og_payout_beneficiary_status_name(og_payout_beneficiary_status s);
const char *og_payout_outcome_name(og_payout_outcome o);
const char *og_payout_reason_name(og_payout_reason r);
const char *og_payout_exec_outcome_name(og_payout_exec_outcome o);
const char *og_payout_worker_reason_name(og_payout_worker_reason r);

/* The outcome a reason carries (OG_PAYOUT_REASON_MAP's third column);
 * DENIED for a value outside the list, so a corrupted reason never reads
 * as Allowed. */
og_payout_outcome og_payout_reason_outcome(og_payout_reason r);

#ifdef __cplusplus
}
#endif
#endif /* ONCEGATE_PAYOUT_H */
