/*
 * redeem.h — redeeming an external single-use token safely (docs/design.md,
 * "Redeeming an external single-use token").
 *
 * Some external systems enforce single use themselves: an OAuth
 * authorization code can be exchanged exactly once. A duplicate callback, a
 * browser retry or our own retry after a timeout then meets "already
 * used". That is not a failure of the operation — someone redeemed the
 * token, maybe this very operation — so og_redeem catches up instead:
 *
 *   1. a recovery point under the caller's idempotency key exists: return
 *      its result;
 *   2. otherwise exchange the token (once: og_provider_exchange_code);
 *   3. on success persist the result at once, sealed (it is a credential),
 *      with ONE conditional insert — the first writer of a key wins;
 *   4. on "already used" look for the recovery point again, with backoff,
 *      until a bound; found: return it; never found: REDEMPTION_LOST — the
 *      token was spent and no result was persisted.
 *
 * Concurrent duplicates need no lock: the provider lets exactly one
 * exchange succeed, that one persists, every other meets "already used"
 * and catches up to the persisted point.
 *
 * What this does NOT cover: a crash (or a lost store) between a successful
 * exchange and persisting its result loses that result for good, because
 * the provider will not give it twice. Every other caller then ends
 * REDEMPTION_LOST after the bound. docs/design.md, "Redeeming an external
 * single-use token", says more.
 *
 * Conventions as in oncegate.h: 0 or a negative OG_E* code; outcomes are
 * values (og_redeem_outcome), never errors; out-parameters are written only
 * on success; og_x_free(NULL) is a no-op.
 */
#ifndef ONCEGATE_REDEEM_H
#define ONCEGATE_REDEEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/core.h"
#include "oncegate/provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * The sealing key: 32 bytes, held in guarded memory (sodium_malloc) and
 * wiped when freed. Results are sealed with XChaCha20-Poly1305 under a
 * random 24-byte nonce per record, the caller, the idempotency key and the
 * token's hash as associated data, so a sealed value opens only under its
 * own record and the right key.
 * ------------------------------------------------------------------------- */
typedef struct og_redeem_key og_redeem_key;

/* Loads a key file: 32 bytes written as 64 hex digits, or as base64
 * (standard or URL-safe alphabet, padded or not), surrounding white space
 * ignored. The file must be a regular file that neither group nor others
 * may read, write or execute (chmod 600), read by og_secret_key_file_read
 * (oncegate/grant.h). Returns 0 and *out, OG_EKEY_IO (cannot be read),
 * OG_EKEY_MODE (group or others have access), OG_EREDEMPTION_KEY (file
 * type or content), OG_ENOMEM. The file's text is
 * wiped from memory once read. */
OG_MUST_CHECK int og_redeem_key_load_file(const char *path,
                                          og_redeem_key **out);

/* A key from 32 bytes (tests, tools). 0 and *out, or OG_ENOMEM. */
OG_MUST_CHECK int og_redeem_key_from_bytes(const unsigned char bytes[32],
                                           og_redeem_key **out);

/* Wipes and frees k. NULL is a no-op. */
void og_redeem_key_free(og_redeem_key *k);

/* ---------------------------------------------------------------------------
 * Redeeming.
 * ------------------------------------------------------------------------- */

/* How a redemption ends, og_redeem_outcome, is oncegate/core.h's: the pure
 * core (lib/core/redeem.c) decides it. */

/* One redemption. Every pointer is borrowed for the call. */
typedef struct og_redeem_request {
    const char *caller;          /* the authenticated principal: keys are
                                    scoped to it */
    const char *idempotency_key; /* og_id_valid() */
    const char *code;            /* the single-use token: 1..
                                    OG_PROVIDER_CODE_MAX bytes of 0x20-0x7e;
                                    a secret, never stored or logged (the
                                    store keeps its SHA-256) */
    int64_t exchange_timeout_us; /* the exchange call's own timeout */
    int64_t catch_up_us;         /* the bound on looking for a point after
                                    "already used"; should exceed the
                                    exchange timeout plus a store call, the
                                    longest a winner still in flight needs
                                    to persist */
    /* NULL, or asked between catch-up looks (step 4): true ends the wait
     * early with OG_ESTOPPED, e.g. when the service drains. Nothing is
     * decided then: a retry with the same key and token looks again and
     * never exchanges what the provider already counted. */
    bool (*stopping)(void *arg);
    void *stopping_arg;
} og_redeem_request;

/* What og_redeem did. */
typedef struct og_redeem_result {
    og_redeem_outcome outcome;
    /* The exchange's reason ("exchanged", "invalid_grant",
     * "transport_timeout", ...; og_exchange_outcome), "" when this call
     * did not exchange. */
    char reason[OG_PROVIDER_REASON_MAX + 1];
    bool exchanged;      /* this call sent an exchange request */
    bool persisted;      /* a recovery point holds the result: REDEEMED when
                            this call wrote it; always for RECOVERED and
                            CAUGHT_UP */
    int persist_error;   /* REDEEMED and !persisted: the put's error, or 0
                            when the key held another token's point. The
                            result then exists only here: give it to the
                            caller, log the key (never the result) */
    int looks;           /* looks at the recovery point after the exchange */
    int64_t created_at_us; /* when the point was written (store clock); 0
                              when not persisted */
    /* REDEEMED, RECOVERED, CAUGHT_UP: the token response (RFC 6749 5.1) as
     * compact JSON text, NUL-terminated, result_len bytes. A credential:
     * og_redeem_result_clear wipes and frees it. NULL otherwise. */
    char *result;
    size_t result_len;
} og_redeem_result;

/* Redeems req->code for req->caller under req->idempotency_key at the token
 * endpoint p (og_provider_open_exchange), sealing results with k, as drawn
 * at the top of lib/core/redeem.c. Blocks up to about exchange_timeout +
 * catch_up + a few store calls. Thread-safe.
 *
 * Returns 0 and *out with exactly one outcome (see og_redeem_outcome), or
 * an error (nothing in *out):
 *   OG_ECALLER, OG_EIDEMPOTENCY_KEY, OG_ECODE, OG_EINVAL  bad input,
 *       checked before anything else: nothing sent, nothing written;
 *   OG_ESTORE_UNAVAILABLE  the store did not answer. Before the exchange:
 *       nothing was sent. After it: the last look failed, so whether a
 *       point exists is NOT known — never read as "absent"; retry with the
 *       same key and token;
 *   OG_EREDEMPTION_UNDECRYPTABLE  the key's point does not open with k;
 *   OG_ESTOPPED  q->stopping said so during the catch-up: undecided, as
 *       above; retry with the same key and token;
 *   OG_ENOMEM, OG_EINTERNAL. */
OG_MUST_CHECK int og_redeem(og_store *s, og_provider *p,
                            const og_redeem_key *k,
                            const og_redeem_request *req,
                            og_redeem_result *out);

/* Wipes and frees r->result and zeroes *r. NULL is a no-op. */
void og_redeem_result_clear(og_redeem_result *r);

#ifdef __cplusplus
}
#endif

#endif /* ONCEGATE_REDEEM_H */
