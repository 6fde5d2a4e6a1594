/*
 * provider.h — the provider client (lib/provider/client.c): the calls to a
 * billing provider's API (credits, payouts) and to a token endpoint, over
 * libcurl, and loading a classification table from a file. What an answer
 * means is oncegate/classify.h, which each call applies before it returns.
 *
 * Conventions as in oncegate.h: 0 or a documented non-negative outcome, or a
 * negative OG_E* code; out-parameters are written only on success;
 * og_x_free(NULL) is a no-op. Secrets (the API key, a payout's
 * destination token, a code and the token response) never reach an error,
 * a reason or an outcome.
 */
#ifndef ONCEGATE_PROVIDER_H
#define ONCEGATE_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/classify.h"
#include "oncegate/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * A classification table from a file.
 * ------------------------------------------------------------------------- */

/* og_provider_table_load() of the file at path (at most
 * OG_PROVIDER_TABLE_MAX bytes). OG_EINVAL with code IO or TOO_LARGE when it
 * cannot be read. */
OG_MUST_CHECK int og_provider_table_load_file(const char *path,
                                              og_provider_table **out,
                                              og_provider_table_error *err);

/* ---------------------------------------------------------------------------
 * The client (lib/provider/client.c): libcurl, thread-safe.
 *
 * By default each call uses its own fresh connection (no reuse, so
 * libcurl never resends a request on a stale connection by itself);
 * og_provider_set_reuse() turns on a shared pool of kept-alive connections
 * for a provider declaring atomic same-key handling (docs/design.md,
 * KA1). No proxy, no redirects, http and https only, its own timeout
 * (never the caller's request's), and at most OG_PROVIDER_BODY_MAX bytes
 * read. The client, og_provider, is opaque (named in oncegate/core.h).
 * ------------------------------------------------------------------------- */

/* Opens a client for base_url ("http://127.0.0.1:8080", no query) using
 * table t, which is borrowed and must outlive the client. api_key: NULL for
 * none, else sent as "Authorization: Bearer <key>"; copied, never logged,
 * wiped when freed. Returns 0 and *out, OG_EINVAL (bad URL or key,
 * t NULL), or OG_ENOMEM. */
OG_MUST_CHECK int og_provider_open(const char *base_url, const char *api_key,
                                   const og_provider_table *t,
                                   og_provider **out);

#define OG_PROVIDER_REUSE_CONNECTIONS_MAX 1024
#define OG_PROVIDER_REUSE_IDLE_MAX_US (INT64_C(3600) * 1000000)

/* Keeps up to max_connections connections to the provider alive between
 * calls (0: none, a fresh connection per call, the default), each reused
 * only while it has been idle less than idle_us (1 s .. 1 h, whole
 * seconds: libcurl's granularity). Only credit and payout creates and
 * lookups reuse; a token exchange never does. Silently stays off when the
 * table does not declare atomic same-key handling: libcurl re-sends a
 * request on its own when a reused connection turns out dead, and only
 * such a provider answers the re-send as the same request (KA1). Call
 * once, before the first call. Returns 0, OG_EINVAL (bad bounds, called
 * twice) or OG_ENOMEM. */
OG_MUST_CHECK int og_provider_set_reuse(og_provider *p, int max_connections,
                                        int64_t idle_us);

/* Whether og_provider_set_reuse() turned reuse on. */
bool og_provider_reuses(const og_provider *p);

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
 * Token exchange (og_exchange_classify in oncegate/classify.h says what the
 * answer means).
 * ------------------------------------------------------------------------- */

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
