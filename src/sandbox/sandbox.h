/*
 * sandbox.h — oncegate-sandbox: a stand-in billing provider with a
 * documented, configurable and durable idempotency contract
 * (docs/sandbox.md). Private to src/sandbox/.
 *
 *   core.c      PURE: the resource table (credits, payouts), request
 *               validation, parameter comparison, the create decision,
 *               answers, the fault queue, time and amount text, the
 *               form-encoded token request. No I/O, no clock: time
 *               arrives as an argument.
 *   store.c     the state: SQLite (WAL, synchronous=FULL) holding credits,
 *               payouts, their idempotency keys, authorization codes and
 *               counters; one transaction per request
 *   log.c       one JSON object per line on stderr; identifiers only
 *   clock.c     the wall clock and sleeping: below store.c and log.c, so
 *               neither needs the other for the time
 *   http.c      the libmicrohttpd edge: two-call pattern, routing, body
 *               cap, bearer authentication, dropping a connection
 *   handlers.c  one function per endpoint, and the route table
 *   main.c      the flag table, startup, signals (SIGTERM drains)
 *
 * It links none of liboncegate on purpose, and keeps its own validators,
 * HTTP edge and log: it stands in for another company's API, so a bug in
 * oncegate's amount canonicalization or request handling must not be
 * mirrored here, where it would hide the mismatch a test should catch.
 *
 * Conventions as in the rest of oncegate: 0 or a negative OG_SBX_E* code,
 * or a documented non-negative result; out-parameters are written only on
 * success; x_free(NULL) is a no-op.
 */
#ifndef OG_SANDBOX_H
#define OG_SANDBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ===========================================================================
 * Errors of the sandbox itself (not outcomes: those are og_sbx_decision).
 * ========================================================================= */
enum {
    OG_SBX_ESTORE = -1,  /* SQLite failed; the transaction was rolled back */
    OG_SBX_ENOMEM = -2,
    OG_SBX_EINTERNAL = -3,
};

/* ===========================================================================
 * Limits (docs/sandbox.md, "Requests").
 * ========================================================================= */
#define OG_SBX_KEY_MAX 255        /* Idempotency-Key bytes */
#define OG_SBX_TARGET_MAX 128    /* account, destination */
#define OG_SBX_REFERENCE_MAX 128
#define OG_SBX_AMOUNT_MAX 40      /* canonical: 38 digits and a point */
#define OG_SBX_AMOUNT_DIGITS 38   /* significant digits */
#define OG_SBX_AMOUNT_SCALE 18    /* fraction digits */
#define OG_SBX_TIME_MAX 64        /* RFC 3339 input bytes */
#define OG_SBX_ID_LEN 27          /* "cr_"/"po_" + 24 hex digits */
#define OG_SBX_PATH_ARG_MAX 64    /* the {id} segment of a route */
#define OG_SBX_BODY_MAX 65536     /* request bodies above it: 413 */
#define OG_SBX_LOOKUP_MAX 1000    /* records one lookup returns */
#define OG_SBX_FAULTS_MAX 64      /* armed fault entries */
#define OG_SBX_FAULT_COUNT_MAX 1000
#define OG_SBX_FAULT_MS_MAX 60000
#define OG_SBX_RETRY_AFTER_S 1    /* Retry-After of 429 rate_limited */
#define OG_SBX_CODE_LEN 35        /* "ac_" + 32 hex digits (128 bits) */
#define OG_SBX_TOKEN_LEN 67       /* "at_"/"rt_" + 64 hex digits (256 bits) */
#define OG_SBX_FORM_PARAMS_MAX 16 /* parameters of one form body */
#define OG_SBX_TOKEN_EXPIRES_S 3600 /* expires_in of an access token */

/* ===========================================================================
 * Error codes answered to clients: ONE list gives the code string, the
 * HTTP status and the message (docs/sandbox.md, "Errors", is this list).
 * ========================================================================= */
#define OG_SBX_CODE_MAP(X)                                                     \
    X(INVALID_JSON, 400, "invalid_json",                                       \
      "the body is not a JSON object (or repeats a member)")                   \
    X(INVALID_REQUEST, 400, "invalid_request",                                 \
      "a member or query parameter is unknown, missing or invalid: see field") \
    X(IDEMPOTENCY_KEY_REQUIRED, 400, "idempotency_key_required",               \
      "exactly one Idempotency-Key header of 1-255 visible ASCII characters "  \
      "is required")                                                           \
    X(UNAUTHORIZED, 401, "unauthorized",                                       \
      "Authorization: Bearer <api key> is required")                           \
    X(NOT_FOUND, 404, "not_found", "no such route")                            \
    X(METHOD_NOT_ALLOWED, 405, "method_not_allowed",                           \
      "this path is served with other methods: see Allow")                     \
    X(FAULT_QUEUE_FULL, 409, "fault_queue_full",                               \
      "64 fault entries are already armed")                                    \
    X(BODY_TOO_LARGE, 413, "body_too_large",                                   \
      "the request body exceeds 65536 bytes")                                  \
    X(UNSUPPORTED_MEDIA_TYPE, 415, "unsupported_media_type",                   \
      "Content-Type must be application/json (/oauth/token: "                  \
      "application/x-www-form-urlencoded)")                                    \
    X(ACCOUNT_CLOSED, 422, "account_closed",                                   \
      "the account is closed: no credit was created")                          \
    X(DESTINATION_CLOSED, 422, "destination_closed",                           \
      "the destination is closed: no payout was created, and none will be "   \
      "for this key")                                                          \
    X(PAYOUT_NOT_FOUND, 404, "payout_not_found", "no payout has this id")      \
    X(PAYOUT_NOT_RETURNABLE, 409, "payout_not_returnable",                     \
      "only a completed payout that was not returned yet can be returned")    \
    X(IDEMPOTENCY_MISMATCH, 422, "idempotency_mismatch",                       \
      "this Idempotency-Key was used with other parameters")                   \
    X(REQUEST_EXPIRED, 422, "request_expired",                                 \
      "the request arrived after expires_at plus the allowed skew: no "        \
      "credit was created")                                                    \
    X(RATE_LIMITED, 429, "rate_limited",                                       \
      "too many requests for this account: nothing was done, retry later")     \
    X(INVALID_GRANT, 400, "invalid_grant",                                     \
      "the authorization code is unknown or was already exchanged")            \
    X(UNSUPPORTED_GRANT_TYPE, 400, "unsupported_grant_type",                   \
      "grant_type must be authorization_code")                                 \
    X(INTERNAL, 500, "internal", "internal error")

typedef enum og_sbx_code {
#define OG__SBX_CODE_ENUM(name, status, text, msg) OG_SBX_C_##name,
    OG_SBX_CODE_MAP(OG__SBX_CODE_ENUM)
#undef OG__SBX_CODE_ENUM
    OG_SBX_C_COUNT
} og_sbx_code;

/* The stable code string ("account_closed"), its HTTP status and message;
 * out-of-range codes give "internal", 500. */
const char *og_sbx_code_name(og_sbx_code c);
unsigned og_sbx_code_status(og_sbx_code c);
const char *og_sbx_code_message(og_sbx_code c);
/* The code whose name is text; -1 when none. */
int og_sbx_code_parse(const char *text);

/* {"error": name, "message": message} (+ "field" when field is non-NULL).
 * New reference; NULL on out of memory. */
json_t *og_sbx_error_json(og_sbx_code c, const char *field);
/* The same with another message text (NULL: the code's own). */
json_t *og_sbx_error_json_text(og_sbx_code c, const char *field,
                               const char *message);

/* ===========================================================================
 * Text: identifiers, amounts, time (core.c, pure).
 * ========================================================================= */

/* 1 when key is 1..OG_SBX_KEY_MAX bytes of visible ASCII (0x21-0x7e). */
bool og_sbx_key_valid(const char *key);

/* Canonical decimal ("0250.50" -> "250.5", "250.00" -> "250") into out
 * (outlen >= OG_SBX_AMOUNT_MAX + 1). Grammar digits[.digits], > 0, at most
 * 18 fraction and 38 significant digits. 0, or -1 with out untouched. */
int og_sbx_amount_canonical(const char *in, char *out, size_t outlen);

/* RFC 3339 with a zone ("Z" or +-HH:MM), years 1970..9999, fractions
 * truncated to microseconds, no leap second. 0 and *us, or -1. */
int og_sbx_time_parse(const char *s, int64_t *us);

/* "YYYY-MM-DDTHH:MM:SS.ffffffZ" (len >= 28) for us in 1970..9999, else
 * "invalid". Returns buf. */
char *og_sbx_time_format(int64_t us, char *buf, size_t len);

/* "HOST:PORT" or "[IPV6]:PORT" into host (hostlen) and *port (0..65535).
 * 0 or -1 with the outputs untouched. */
int og_sbx_listen_parse(const char *hostport, char *host, size_t hostlen,
                        int *port);

/* ===========================================================================
 * Resources (core.c, pure data): what a create makes. Credits
 * (POST /v1/credits) and payouts (POST /v1/payouts) share ONE contract —
 * validation, idempotency with saved results and retention, expiry with
 * skew, the visibility delay, atomic same-key handling, the fault queue —
 * and differ only in their row of og_sbx_resources. Every function below
 * that takes a resource is the one implementation for both: a new kind of
 * resource is a new row (and its tables in store.c's schema), never a copy
 * of a handler, a statement or a rule.
 * ========================================================================= */
typedef enum og_sbx_kind {
    OG_SBX_CREDIT,
    OG_SBX_PAYOUT,
    OG_SBX_N_KINDS
} og_sbx_kind;

/* The documented test targets (accounts, destinations), by prefix. */
typedef enum og_sbx_target_class {
    OG_SBX_TARGET_OPEN,
    OG_SBX_TARGET_CLOSED, /* 422 the resource's closed code, key recorded */
    OG_SBX_TARGET_BUSY,   /* 429 rate_limited, key not recorded */
    OG_SBX_TARGET_ASYNC,  /* 202 pending, completes later */
    OG_SBX_N_TARGET_CLASSES
} og_sbx_target_class;

typedef struct og_sbx_resource {
    og_sbx_kind kind;
    const char *path;        /* create (POST) and lookups (GET) */
    const char *list;        /* the lookup answer's array member */
    const char *id_prefix;   /* 3 bytes, then 24 lower-case hex digits */
    const char *id_log;      /* the log field of an id ("credit_id") */
    const char *target;      /* the member naming where the money goes */
    bool target_secret;      /* never logged: only a SHA-256 prefix is */
    const char *prefix[OG_SBX_N_TARGET_CLASSES]; /* [OPEN] is NULL */
    og_sbx_code closed;      /* the refusal of a closed target */
    const char *completed;   /* the status of a complete effect */
    bool returns;            /* a complete effect may be returned later */
    /* Messages of the two shared refusals that name the resource; NULL:
     * the code's own (which the credits API has always answered). */
    const char *msg_expired, *msg_rate_limited;
    /* store.c: the rows, the keys, the key's column naming its row. */
    const char *table, *keys_table, *key_ref;
    /* Stats members (og_sbx_stats): counters the requests update, and
     * the row counts (c_returned NULL without returns). */
    const char *c_requests, *c_replays, *c_mismatches, *c_lookups;
    const char *c_rows, *c_returned;
} og_sbx_resource;

extern const og_sbx_resource og_sbx_resources[OG_SBX_N_KINDS];

/* 1 when id is res's prefix and 24 lower-case hex digits. */
bool og_sbx_id_valid(const og_sbx_resource *res, const char *id);

/* ===========================================================================
 * Create requests (core.c, pure).
 * ========================================================================= */

/* The parameters a key is compared on, all validated and canonical. */
typedef struct og_sbx_params {
    char target[OG_SBX_TARGET_MAX + 1];      /* account or destination */
    char amount[OG_SBX_AMOUNT_MAX + 1];      /* canonical */
    char currency[4];
    char reference[OG_SBX_REFERENCE_MAX + 1];
    int64_t expires_at_us;                   /* compared as an instant */
} og_sbx_params;

/* Why a request was refused before anything ran: a code and the member or
 * parameter it is about (field may be "" when it names nothing). */
typedef struct og_sbx_problem {
    og_sbx_code code;
    char field[80];
} og_sbx_problem;

/* Reads the create body {<res->target>, amount, currency, reference,
 * expires_at} (body borrowed). 0 and *out; or -1 and *why (invalid_request
 * naming the first unknown, missing, mistyped or invalid member). */
int og_sbx_params_parse(const og_sbx_resource *res, json_t *body,
                        og_sbx_params *out, og_sbx_problem *why);

/* 1 when a and b are the same request: target, canonical amount,
 * currency, reference and the expires_at instant all equal. */
bool og_sbx_params_equal(const og_sbx_params *a, const og_sbx_params *b);

/* The class of a target by res's documented prefixes. */
og_sbx_target_class og_sbx_target_classify(const og_sbx_resource *res,
                                           const char *target);

/* ===========================================================================
 * Time rules (core.c, pure). Every bound is half-open and uses one clock:
 * the sandbox host's wall clock in microseconds.
 * ========================================================================= */

/* The configuration the rules below read. */
typedef struct og_sbx_policy {
    int64_t retention_us;        /* a key is retained this long */
    int64_t skew_us;             /* tolerated lateness after expires_at */
    int64_t visibility_delay_us; /* a new effect is hidden from lookups */
    int64_t async_complete_us;   /* an async effect is pending so long */
    int64_t race_gap_us;         /* non-atomic: lookup-to-insert gap */
    bool atomic_same_key;        /* false: --no-atomic-same-key */
} og_sbx_policy;

/* A key recorded at recorded_us is retained while now < recorded + ret. */
bool og_sbx_key_retained(const og_sbx_policy *p, int64_t recorded_us,
                         int64_t now_us);
/* A request may take effect while now <= expires_at + skew. */
bool og_sbx_request_expired(const og_sbx_policy *p, int64_t expires_at_us,
                            int64_t now_us);
/* An effect is visible to lookups once now >= created + visibility delay.
 * With the rule above this is the processing-window guarantee of
 * docs/sandbox.md: nothing is created after expires_at + skew, so a lookup
 * at or after expires_at + skew + visibility delay lists every effect its
 * request ever had, or will have. */
bool og_sbx_effect_visible(const og_sbx_policy *p, int64_t created_us,
                           int64_t now_us);

/* ===========================================================================
 * Effects, saved results and the create decision (core.c, pure).
 *
 * A key's life (one row in the resource's keys table):
 *
 *             new key, open target              same parameters
 *   (absent) ---------------------> [effect] --------------------> replay
 *      |  |   new key, async           |  pending -> complete at
 *      |  +----------------------------+  created + async_complete
 *      |      new key, closed target            other parameters
 *      +----------------------------> [refusal] -----------------> 422
 *   busy, expired, error_500_before:         idempotency_mismatch
 *   nothing is recorded (absent stays absent)
 *   [effect] / [refusal] --- now >= recorded + retention ---> (absent)
 *
 * A return (payouts) is a later event on the effect, not on the key: the
 * key keeps replaying the answer the create gave.
 * ========================================================================= */

/* One credit or payout. */
typedef struct og_sbx_record {
    char id[OG_SBX_ID_LEN + 1];
    og_sbx_params params;
    int64_t created_us;
    int64_t completes_us;   /* == created_us unless async */
    bool returned;          /* returns only */
    int64_t returned_us;    /* when returned */
} og_sbx_record;

/* A retained key's saved result: an effect, or a refusal code. */
typedef struct og_sbx_saved {
    og_sbx_params params;   /* what the key was first used with */
    int64_t recorded_us;
    bool refused;           /* true: refusal; false: record */
    og_sbx_code refusal;    /* the resource's closed code when refused */
    og_sbx_record record;   /* when !refused */
} og_sbx_saved;

typedef enum og_sbx_decision {
    OG_SBX_DO_REPLAY,        /* the saved result, nothing new */
    OG_SBX_DO_MISMATCH,      /* 422 idempotency_mismatch, nothing new */
    OG_SBX_DO_RATE_LIMIT,    /* 429, nothing recorded */
    OG_SBX_DO_EXPIRE,        /* 422 request_expired, nothing recorded */
    OG_SBX_DO_REFUSE_CLOSED, /* record the key with the closed refusal */
    OG_SBX_DO_CREATE,        /* record an effect and the key */
    OG_SBX_DO_CREATE_ASYNC,  /* record a pending effect and the key */
} og_sbx_decision;

/* What a create request for res does, given the key's retained saved
 * result (NULL: none) and the time of the decision. Pure; the store calls
 * it inside the transaction that acts on it. */
og_sbx_decision og_sbx_create_decide(const og_sbx_resource *res,
                                     const og_sbx_policy *p,
                                     const og_sbx_params *req,
                                     const og_sbx_saved *saved,
                                     int64_t now_us);

/* True when the decision records something (an effect or a refusal). */
bool og_sbx_decision_writes(og_sbx_decision d);

/* The outcome of one create: the decision, its time, and the key's saved
 * result (for REPLAY, REFUSE_CLOSED, CREATE, CREATE_ASYNC). */
typedef struct og_sbx_result {
    og_sbx_decision decision;
    int64_t now_us;
    og_sbx_saved saved;
} og_sbx_result;

/* A record as lookups show it: {"id", <target>, "amount", "currency",
 * "reference", "status", "created_at"} and, once returned, "returned_at";
 * status "pending" before completes_us, then res->completed, "returned"
 * once returned. New reference; NULL on out of memory. */
json_t *og_sbx_record_json(const og_sbx_resource *res,
                           const og_sbx_record *c, int64_t now_us);

/* The answer to a create: *status and *body (a new reference). An effect
 * that is still pending answers 202 {"id","status":"pending"}, a complete
 * one 201 with the record as the create made it — a later return never
 * shows here. 0, or OG_SBX_ENOMEM. */
int og_sbx_result_answer(const og_sbx_resource *res, const og_sbx_result *r,
                         unsigned *status, json_t **body);

/* ===========================================================================
 * Authorization codes and the token request (core.c, pure): RFC 6749
 * section 4.1.3, form-encoded. A code is exchanged at most once; every
 * later exchange is 400 invalid_grant.
 * ========================================================================= */

/* Parses an application/x-www-form-urlencoded body of len bytes (need not
 * be terminated): name=value pairs joined by '&', '+' a space, %XX a byte;
 * an empty pair is skipped, a pair without '=' has the value "". 0 and
 * *out (a new object name -> string), or -1 and *why: invalid_request
 * naming the parameter that repeats, holds a bad %-escape, a NUL or bytes
 * that are not UTF-8 (field "form" when no name can be shown), or when
 * there are more than OG_SBX_FORM_PARAMS_MAX parameters. OG_SBX_ENOMEM. */
int og_sbx_form_parse(const char *body, size_t len, json_t **out,
                      og_sbx_problem *why);

/* Reads the token request from a parsed form (borrowed): grant_type must
 * be "authorization_code" (absent: invalid_request; another value:
 * unsupported_grant_type), code must be present and non-empty
 * (invalid_request). Other parameters (redirect_uri, client_id) are
 * ignored, as RFC 6749 section 3.2 asks. 0 and *code (borrowed from form),
 * or -1 and *why. */
int og_sbx_token_request_parse(json_t *form, const char **code,
                               og_sbx_problem *why);

/* The token response of RFC 6749 section 5.1 for a fresh access and
 * refresh token: {"access_token","token_type":"Bearer","expires_in",
 * "refresh_token"}. New reference; NULL on out of memory. */
json_t *og_sbx_token_json(const char *access_token, const char *refresh_token);

/* An error answer in RFC 6749 section 5.2's shape: {"error": name,
 * "error_description": text}; for invalid_request the text names field
 * (the parameter at fault). New reference; NULL on out of memory. */
json_t *og_sbx_oauth_error_json(og_sbx_code c, const char *field);

/* ===========================================================================
 * Faults (core.c, pure): armed entries in arming order. An entry is
 * unaimed (the FIFO: any create or exchange takes a firing from the first
 * unaimed entry) or aimed (a match naming an idempotency key, a reference
 * and/or a credit's account: only a request matching every named member
 * takes its firing). A request takes the first aimed entry it matches,
 * else the first unaimed one. The caller serializes access.
 * ========================================================================= */
#define OG_SBX_FAULT_MAP(X)                                                    \
    X(DROP_RESPONSE_AFTER_EFFECT, "drop_response_after_effect", false)         \
    X(DELAY_BEFORE_EFFECT, "delay_before_effect", true)                        \
    X(DELAY_AFTER_EFFECT, "delay_after_effect", true)                          \
    X(ERROR_500_AFTER_EFFECT, "error_500_after_effect", false)                 \
    X(EXIT_AFTER_EFFECT, "exit_after_effect", false)                           \
    X(ERROR_500_BEFORE_EFFECT, "error_500_before_effect", false)              \
    X(CLOSE_BEFORE_EFFECT, "close_before_effect", false)

typedef enum og_sbx_fault_kind {
    OG_SBX_FAULT_NONE = 0,
#define OG__SBX_FAULT_ENUM(name, text, delay) OG_SBX_FAULT_##name,
    OG_SBX_FAULT_MAP(OG__SBX_FAULT_ENUM)
#undef OG__SBX_FAULT_ENUM
} og_sbx_fault_kind;

/* What an aimed fault names; "" members name nothing. At least one
 * member is set on an aimed fault. */
typedef struct og_sbx_fault_match {
    char key[OG_SBX_KEY_MAX + 1];
    char reference[OG_SBX_REFERENCE_MAX + 1];
    char account[OG_SBX_TARGET_MAX + 1];
} og_sbx_fault_match;

typedef struct og_sbx_fault {
    og_sbx_fault_kind kind;
    int count;          /* firings left */
    int64_t ms;         /* delay faults only */
    bool aimed;         /* match applies */
    og_sbx_fault_match match;
} og_sbx_fault;

typedef struct og_sbx_faults {
    og_sbx_fault q[OG_SBX_FAULTS_MAX]; /* q[0] armed first */
    size_t n;
} og_sbx_faults;

/* What a request offers to aimed faults: its validated key, reference
 * and account (NULL: the request has none — a payout has no account, a
 * token exchange none of the three, so only unaimed faults reach it). */
typedef struct og_sbx_fault_subject {
    const char *key, *reference, *account;
} og_sbx_fault_subject;

/* The fault's name ("delay_after_effect"); "none" for NONE. */
const char *og_sbx_fault_name(og_sbx_fault_kind k);

/* Reads {"fault", "count"?, "ms"?, "match"?} (body borrowed). 0 and
 * *out, or -1 and *why. count defaults to 1 (1..1000); ms is required by
 * the delay faults (0..60000) and refused by the others; match is an
 * object of one or more of "idempotency_key" (1..255 visible ASCII),
 * "reference" (1..128 printable ASCII) and "account" (1..128 visible
 * ASCII) — any other member, type or size is refused naming
 * "match.<member>" (or "match"). */
int og_sbx_fault_parse(json_t *body, og_sbx_fault *out, og_sbx_problem *why);

/* Appends f. 0, or -1 when OG_SBX_FAULTS_MAX entries are armed. */
int og_sbx_faults_arm(og_sbx_faults *q, const og_sbx_fault *f);
/* One firing for a request: of the first aimed entry that subject
 * matches, else of the first unaimed entry; kind NONE when there is
 * neither. An entry leaves the queue after its last firing; aimed entries
 * that do not match stay as they were. */
og_sbx_fault og_sbx_faults_take(og_sbx_faults *q,
                                const og_sbx_fault_subject *subject);
void og_sbx_faults_clear(og_sbx_faults *q);
/* [{"fault","count","ms"?,"match"?}, …] in arming order. New reference
 * or NULL. */
json_t *og_sbx_faults_json(const og_sbx_faults *q);

/* ===========================================================================
 * The store (store.c). One SQLite connection guarded by a mutex; every
 * call is ONE transaction, BEGIN IMMEDIATE when it writes.
 * ========================================================================= */
typedef struct og_sbx_store og_sbx_store;

/* Opens (creating when absent) the state database at path: WAL,
 * synchronous=FULL, foreign keys, schema version 3 (older versions are
 * upgraded in place). 0, or OG_SBX_ESTORE with one line in err. */
int og_sbx_store_open(const char *path, og_sbx_store **out, char *err,
                      size_t errlen);
void og_sbx_store_free(og_sbx_store *s);

/* Runs one create request of res for key with req: prunes keys past
 * retention, reads the key, decides (og_sbx_create_decide) and acts,
 * counting the request, in one transaction — or, without atomic_same_key,
 * in two transactions with race_gap between the read and the write. 0 and
 * *out after COMMIT returned; a negative code with nothing changed. */
int og_sbx_store_create(og_sbx_store *s, const og_sbx_resource *res,
                        const og_sbx_policy *p, const char *key,
                        const og_sbx_params *req, og_sbx_result *out);

/* Adds one to the counter named counter (a member of og_sbx_stats that
 * requests update: res->c_requests, "token_requests") for a request
 * answered before it reached the state (the error_500_before_effect
 * fault). 0 or a negative code. */
int og_sbx_store_count_request(og_sbx_store *s, const char *counter);

/* Mints a new authorization code ("ac_" and 128 random bits in hex) and
 * records it, in one transaction. 0 and out, or a negative code. */
int og_sbx_store_code_mint(og_sbx_store *s,
                           char out[OG_SBX_CODE_LEN + 1]);

/* Exchanges code: in ONE write transaction, marks the code exchanged IF it
 * exists and was never exchanged, counting the request (and, when it was
 * refused, invalid_grants). 0 and *exchanged (false: unknown or already
 * exchanged), or a negative code with nothing changed. */
int og_sbx_store_code_exchange(og_sbx_store *s, const char *code,
                               bool *exchanged);

typedef enum og_sbx_lookup_by {
    OG_SBX_BY_REFERENCE,
    OG_SBX_BY_KEY,
} og_sbx_lookup_by;

/* The records of res visible now whose reference (or creating key) is
 * value, oldest first, at most OG_SBX_LOOKUP_MAX; counts the lookup. *out
 * is malloc'd (the caller frees; NULL when *n is 0); *now_us is the time
 * the lookup saw. 0 or a negative code. */
int og_sbx_store_lookup(og_sbx_store *s, const og_sbx_resource *res,
                        const og_sbx_policy *p, og_sbx_lookup_by by,
                        const char *value, og_sbx_record **out, size_t *n,
                        int64_t *now_us);

/* What og_sbx_store_return found. */
typedef enum og_sbx_return_outcome {
    OG_SBX_RETURNED,         /* marked returned now */
    OG_SBX_RETURN_NOT_FOUND, /* no record has the id */
    OG_SBX_RETURN_REFUSED,   /* pending, or returned already */
} og_sbx_return_outcome;

/* Marks the record id of res (res->returns) returned, in ONE write
 * transaction: a conditional UPDATE that changes only a complete record
 * not yet returned. 0 with *outcome, and *out and *now_us (the record as
 * it now is, whatever the outcome but NOT_FOUND), or a negative code with
 * nothing changed. */
int og_sbx_store_return(og_sbx_store *s, const og_sbx_resource *res,
                        const char *id, og_sbx_return_outcome *outcome,
                        og_sbx_record *out, int64_t *now_us);

/* GET /_control/stats, in answer order. The counters are rows of the
 * counters table, each updated in the transaction of the request it
 * counts; *_created, payouts_returned, codes_minted and code_exchanges
 * are counted from the state's own rows. */
#define OG_SBX_STATS_MAP(X)                                                    \
    X(create_requests)                                                         \
    X(credits_created)                                                         \
    X(lookups)                                                                 \
    X(idempotent_replays)                                                      \
    X(mismatches)                                                              \
    X(codes_minted)                                                            \
    X(code_exchanges)                                                          \
    X(token_requests)                                                          \
    X(invalid_grants)                                                          \
    X(payout_requests)                                                         \
    X(payouts_created)                                                         \
    X(payouts_returned)                                                        \
    X(payout_lookups)                                                          \
    X(payout_replays)                                                          \
    X(payout_mismatches)

typedef struct og_sbx_stats {
#define OG__SBX_STAT_FIELD(name) int64_t name;
    OG_SBX_STATS_MAP(OG__SBX_STAT_FIELD)
#undef OG__SBX_STAT_FIELD
} og_sbx_stats;

/* The member of *s named name, or NULL (core.c). */
int64_t *og_sbx_stat(og_sbx_stats *s, const char *name);
/* {name: value, …} in OG_SBX_STATS_MAP order. New reference or NULL. */
json_t *og_sbx_stats_json(const og_sbx_stats *s);

/* The counters and the row counts, from one snapshot. */
int og_sbx_store_stats(og_sbx_store *s, og_sbx_stats *out);

/* Deletes every record, key, code and counter in one transaction. */
int og_sbx_store_reset(og_sbx_store *s);

/* ===========================================================================
 * The clock (clock.c): the one place the sandbox reads the time, for the
 * store, the rules (as an argument) and the log lines alike.
 * ========================================================================= */

/* The wall clock in microseconds (the store's and the rules' clock). */
int64_t og_sbx_now_us(void);
/* Sleeps us microseconds (restarting after signals). */
void og_sbx_sleep_us(int64_t us);

/* ===========================================================================
 * Logs (log.c): {"ts","level","event",…fields}, ONE write(2) per line.
 * Fields are identifiers and outcomes; never the API key or a body.
 * ========================================================================= */
typedef enum og_sbx_log_level {
    OG_SBX_LOG_INFO,
    OG_SBX_LOG_WARN,
    OG_SBX_LOG_ERROR,
} og_sbx_log_level;

/* Writes one line to stderr; fields (an object, may be NULL) is stolen. */
void og_sbx_log(og_sbx_log_level level, const char *event, json_t *fields);

/* ===========================================================================
 * The running sandbox (main.c, http.c, handlers.c).
 * ========================================================================= */
typedef struct og_sbx_config {
    char listen_host[256];
    int listen_port;
    const char *state_path;
    const char *api_key_file;   /* NULL: no authentication */
    bool control;               /* serve the /_control/ routes */
    og_sbx_policy policy;
} og_sbx_config;

#define OG_SBX_API_KEY_HASH 32  /* SHA-256 of the API key */

typedef struct og_sbx_srv {
    og_sbx_config cfg;
    og_sbx_store *store;
    bool auth_required;
    unsigned char api_key_hash[OG_SBX_API_KEY_HASH];
    pthread_mutex_t faults_mu;  /* guards faults */
    og_sbx_faults faults;       /* in memory only: a restart clears them */
    atomic_int inflight;        /* requests begun and not yet completed */
    atomic_bool draining;       /* SIGTERM seen: answers carry close */
    pthread_mutex_t drain_mu;   /* with drain_cv: inflight reached 0 */
    pthread_cond_t drain_cv;
    const struct og_sbx_route *routes; /* handlers.c's table, set by main.c:
                                   http.c routes through it and names no
                                   handler, so the edge stands below the
                                   handlers that answer through it */
    size_t n_routes;
} og_sbx_srv;

/* One request as handlers see it. Owned by http.c; handlers set the
 * answer (og_sbx_answer / og_sbx_fail) and the log fields only. */
typedef struct og_sbx_req {
    og_sbx_srv *srv;
    const char *method;
    char path[256];
    const struct og_sbx_route *route;
    char path_id[OG_SBX_PATH_ARG_MAX + 1]; /* the route's {id}, if any */
    int64_t start_us;                 /* monotonic */

    /* Headers and query, captured on the first call. */
    char idem_key[OG_SBX_KEY_MAX + 1];
    int idem_key_count;               /* Idempotency-Key headers seen */
    bool idem_key_bad;                /* too long or with a NUL */
    bool json_content_type;
    bool form_content_type;           /* application/x-www-form-urlencoded */
    json_t *args;                     /* query parameters, name -> value */
    bool args_bad;                    /* repeated, too many, or a NUL */
    char args_bad_name[64];

    /* The body, up to OG_SBX_BODY_MAX bytes. */
    char *body;
    size_t body_len, body_cap;
    bool body_too_large;
    json_t *json;                     /* the parsed object, when a body */

    /* The answer. */
    unsigned status;
    json_t *answer;
    bool replayed;                    /* Idempotent-Replayed: true */
    int retry_after;                  /* > 0: a Retry-After header */
    char allow[64];                   /* 405: the Allow header */
    bool drop;                        /* close without any response */
    bool responded;
    json_t *log;                      /* the request's log line fields */
} og_sbx_req;

typedef void (*og_sbx_handler)(og_sbx_req *r);

/* One route. path may hold one "{id}" segment, which matches a segment of
 * 1..OG_SBX_PATH_ARG_MAX bytes (into r->path_id). body: takes a JSON
 * object (optional_body: or nothing); form: takes an
 * application/x-www-form-urlencoded body instead, which the handler
 * parses itself from r->body (r->json stays NULL). res: the resource a
 * generic handler serves (NULL for the others). */
typedef struct og_sbx_route {
    const char *method;
    const char *path;
    bool control;        /* only with --control */
    bool body;
    bool optional_body;
    bool form;
    og_sbx_handler fn;
    const og_sbx_resource *res;
} og_sbx_route;

extern const og_sbx_route og_sbx_routes[];
extern const size_t og_sbx_n_routes;

/* Answers (each replaces an earlier answer). body is stolen. */
void og_sbx_answer(og_sbx_req *r, unsigned status, json_t *body);
/* The code's status and error body (+ field); logs the code. */
void og_sbx_fail(og_sbx_req *r, og_sbx_code c, const char *field);
/* Adds a log field (value NULL: skipped). */
void og_sbx_log_str(og_sbx_req *r, const char *key, const char *value);
void og_sbx_log_int(og_sbx_req *r, const char *key, int64_t value);

/* Starts the daemon on cfg's address; *port gets the bound port. 0, or -1
 * with one line in err. */
struct MHD_Daemon;
int og_sbx_http_start(og_sbx_srv *srv, struct MHD_Daemon **out, int *port,
                      char *err, size_t errlen);
/* Stops accepting; open connections stay until og_sbx_http_stop. */
void og_sbx_http_quiesce(struct MHD_Daemon *d);
void og_sbx_http_stop(struct MHD_Daemon *d);

#endif /* OG_SANDBOX_H */
