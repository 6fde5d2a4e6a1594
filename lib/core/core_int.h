/*
 * core_int.h — what lib/core's files share with each other and with the
 * layers above (token, store, provider, exec). Not API. Everything here is
 * pure: no I/O, no clock, no backend header.
 *
 *   validate.c         identifiers, UUIDs, currencies, times, amounts; the
 *                      validated admission request (og__admit_req)
 *   admission.c        what a claim that admitted nothing means, for both
 *                      backends
 *   consumption_key.c  the hashed consumption key
 *   storeerr.c         what a PostgreSQL error means (SQLSTATE, constraint)
 *   redeem.c           sealing, the catch-up decisions of og_redeem
 *   error.c            names of errors, statuses and kinds; og__copy,
 *                      og__grow
 *   fault.c            named fault points for tests
 *
 * Included by lib/core/ and the layers above it only
 * (tools/check_layers.py).
 */
#ifndef OG_CORE_INT_H
#define OG_CORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oncegate/classify.h"
#include "oncegate/core.h"

/* Admission writes the operation at this owner version. One constant, so the
 * statement and every later ownership check cannot drift apart. */
#define OG__INITIAL_OWNER_VERSION 1

/* ===========================================================================
 * Input validation (lib/core/validate.c). Pure.
 * ========================================================================= */

/* 0 when s is 1..OG_ID_MAX bytes of printable ASCII 0x21..0x7e; else -1. */
int og__id_check(const char *s);

/* Validates a UUID in any case and writes the canonical lower-case form to
 * out (OG_UUID_LEN + 1 bytes). The nil UUID is refused. 0 or -1. */
int og__uuid_normalize(const char *in, char out[OG_UUID_LEN + 1]);

/* 0 when s is an upper-case ISO 4217 code with minor units (the payout
 * currency table, og_payout_currency_scale()); else -1. */
int og__currency_check(const char *s);

/* 0 when canonical (og_amount_canonical()'s output) has at most the minor
 * units of currency as fraction digits; OG_ECURRENCY for a currency
 * og__currency_check() refuses; else OG_EAMOUNT_MINOR_UNITS. */
int og__amount_minor_units_check(const char *canonical, const char *currency);

/* Expires-at bounds: 1970-01-01 .. 9999-12-31T23:59:59.999999Z. */
#define OG__TIME_MIN_US INT64_C(0)
#define OG__TIME_MAX_US INT64_C(253402300799999999)

/* A validated, canonical admission request: everything the backends write.
 * Built only by og__admit_req_build(), so a backend never sees raw input. */
typedef struct og__admit_req {
    char issuer[OG_ID_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    int64_t expires_at_us;
    char operation_id[OG_UUID_LEN + 1];
    char caller_id[OG_ID_MAX + 1];
    char account_id[OG_ID_MAX + 1];
    char amount[OG_AMOUNT_MAX + 1]; /* canonical */
    char currency[OG_CURRENCY_LEN + 1];
    char family[OG_ID_MAX + 1];     /* "" when the grant has none */
    og_grant_form form;
} og__admit_req;

/* Builds the grant part only (issuer, grant id, expires_at, family, form),
 * for og_consume. Returns 0 or the OG_E* input code. */
int og__grant_req_build(const og_grant *g, og__admit_req *req);

/* Checks every field and fills *req. Returns 0 or the OG_E* input code of the
 * first bad field (issuer, grant id, expires_at, family, form, operation id,
 * caller, account, amount, currency — in that order). */
int og__admit_req_build(const og_grant *g, const og_intent *in,
                        og__admit_req *req);

/* ===========================================================================
 * What a zero-row admission means (lib/core/admission.c). Pure.
 *
 * The claim already decided; this only reports. Both backends read the
 * consumption row for the grant key and the operation row for the operation
 * id after a claim that returned nothing, and hand them here.
 * ========================================================================= */
typedef enum og__claim_kind {
    OG__CLAIM_ADMISSION = 0, /* operation_id set */
    OG__CLAIM_REVOCATION,    /* no operation */
    OG__CLAIM_CONSUME,       /* the consume verdict; no operation */
} og__claim_kind;

/* What holds a grant after a claim that took nothing. Row form maps its
 * grants row onto the same shape: consumed by an operation = ADMISSION,
 * revoked_at set = REVOCATION, consumed with no operation = CONSUME. */
typedef struct og__consumption {
    bool present;
    bool has_operation;                  /* kind == ADMISSION */
    og__claim_kind kind;
    char operation_id[OG_UUID_LEN + 1];  /* when has_operation */
    bool family_blocked;  /* the grant names a family whose row is missing
                             or revoked: the claim could not happen */
    bool not_issued;      /* row form: no grants row for the key */
} og__consumption;

/* Classifies a claim that admitted nothing. op may be NULL (no operation row
 * with the request's id). Fills *out: ALREADY_ADMITTED with op copied into
 * out->operation only when the key is held by this operation id and the
 * stored issuer, grant id, caller, account, amount and currency all equal
 * the request's; otherwise REFUSED with the reason. */
void og__classify_unclaimed(const og__admit_req *req,
                            const og__consumption *c, const og_operation *op,
                            og_admission *out);

/* The refusal reason for a consume verdict that claimed nothing. */
og_refusal og__classify_consume(const og__consumption *c);

/* True when the stored operation carries exactly the request's binding. */
bool og__operation_matches(const og__admit_req *req, const og_operation *op);

/* ===========================================================================
 * The hashed consumption key (lib/core/consumption_key.c). Pure.
 * ========================================================================= */

/* SHA-256 over u32be(issuer_len) || issuer || u32be(grant_id_len) ||
 * grant_id into out: og_consumption_key() without the identifier checks,
 * for the SQL function SQLite runs over stored rows. 0, or -1 when a length
 * does not fit 32 bits. */
int og__consumption_key(const char *issuer, size_t issuer_len,
                        const char *grant_id, size_t grant_id_len,
                        unsigned char out[OG_CONSUMPTION_KEY_LEN]);

/* ===========================================================================
 * What a store failure means (lib/core/storeerr.c). Pure.
 * ========================================================================= */

/* Maps a PostgreSQL SQLSTATE (5 chars) and, for unique violations, the
 * violated constraint's name to an outcome of the admission:
 *   OG__PG_REFUSE   a unique violation on operations_pkey or
 *                   operations_grant_key: the admission is refused;
 *   otherwise a negative OG_E* code — OG_ESTORE_UNAVAILABLE for connection
 *   loss, cancellation, timeouts, shutdown, resource exhaustion,
 *   serialization failures and read-only (standby) targets; OG_EINTERNAL for
 *   everything else, including any other constraint failure. */
#define OG__PG_REFUSE 1
int og__pg_classify(const char *sqlstate, const char *constraint);

/* ===========================================================================
 * Redeeming a single-use token (lib/core/redeem.c). Pure: the nonce
 * and every record arrive as arguments.
 * ========================================================================= */
#define OG__REDEEM_KEY_LEN 32
#define OG__REDEEM_BACKOFF_FIRST_US 20000  /* the first wait between looks */
#define OG__REDEEM_BACKOFF_MAX_US 500000   /* the longest */

/* SHA-256 of code as 64 lower-case hex: all the store keeps of a token. */
void og__redeem_code_hash(const char *code, char out[OG_CODE_HASH_LEN + 1]);

/* Seals len (1..OG_REDEMPTION_RESULT_MAX) bytes of plain into sealed (len
 * + OG_REDEMPTION_TAG_LEN bytes) under key and nonce, bound to caller, ikey
 * and code_hash (RD3). 0, or OG_EINVAL. */
int og__redeem_seal(const unsigned char key[OG__REDEEM_KEY_LEN],
                    const unsigned char nonce[OG_REDEMPTION_NONCE_LEN],
                    const char *caller, const char *ikey,
                    const char *code_hash, const unsigned char *plain,
                    size_t len, unsigned char *sealed);

/* Opens sealed (sealed_len bytes) into plain (sealed_len -
 * OG_REDEMPTION_TAG_LEN bytes). 0, or -1 when it does not open under this
 * key and record (plain's content is then unspecified: wipe it). */
int og__redeem_open(const unsigned char key[OG__REDEEM_KEY_LEN],
                    const unsigned char nonce[OG_REDEMPTION_NONCE_LEN],
                    const char *caller, const char *ikey,
                    const char *code_hash, const unsigned char *sealed,
                    size_t sealed_len, unsigned char *plain);

/* The wait before look number attempt + 1: 20 ms doubling to 500 ms. */
int64_t og__redeem_backoff_us(int attempt);

/* How long to look for a recovery point after exchange answer x: -1 not at
 * all (SUCCEEDED, REJECTED settle it), 0 one look (nothing was sent),
 * else bound_us. */
int64_t og__redeem_catch_up_us(const og_exchange_outcome *x, int64_t bound_us);

/* The outcome one look decides (an og_redeem_outcome), or -1: nothing
 * yet, look again until the bound. same_code: the key's own point holds
 * this token's hash. */
int og__redeem_after_look(og_redemption_found found, bool same_code);

/* The outcome at the bound when no look found anything. */
og_redeem_outcome og__redeem_at_bound(og_exchange_class c);

/* ===========================================================================
 * Names and copies (lib/core/error.c); fault points (lib/core/fault.c).
 * ========================================================================= */

/* Status text <-> enum for the backends: -1 when text is not a status. */
int og__op_status_parse(const char *text);
/* Kind text <-> enum: -1 when text is not a kind. */
int og__op_kind_parse(const char *text);

/* Copies src into a fixed buffer of size n; -1 (and dst untouched) when it
 * does not fit. */
int og__copy(char *dst, size_t n, const char *src);

/* The one way an array of the library grows (every growable array has a
 * cap): v holds *cap elements of size bytes, all in use; returns v grown to
 * twice as many (first when *cap is 0), never more than max, and sets *cap.
 * NULL — v and *cap untouched, still the caller's — when *cap already is
 * max or realloc fails; the caller says which error that is at its cap. */
void *og__grow(void *v, size_t size, size_t *cap, size_t first, size_t max);

/* Fault injection for tests (lib/core/fault.c): 1 when the build has
 * OG_FAULT_INJECTION (-Dfault_injection=true) and the environment variable
 * OG_FAULT names this point; always 0 in a build without it. */
int og__fault(const char *name);

#endif /* OG_CORE_INT_H */
