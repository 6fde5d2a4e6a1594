/*
 * http.h — what http.c (the request core), edge.c (connections), handlers.c
 * (one function per endpoint) and server.c (startup, signals) share.
 * Private to src/serve/.
 */
#ifndef OG_SERVE_HTTP_H
#define OG_SERVE_HTTP_H

#include <pthread.h>
#include <stdatomic.h>

#include "oncegate/exec.h"
#include "oncegate/provider.h"
#include "oncegate/redeem.h"
#include "serve.h"

/* The running service: everything a request may use. The store and the
 * configuration are fixed for the process's life; the auth snapshot is
 * swapped whole on SIGHUP (og_srv_auth_current). */
typedef struct og_srv {
    og_srv_config cfg;
    og_store *store;
    og_grant_policy policy;   /* the validator's policy, from cfg.timings */
    og_provider_table *ptable;/* NULL: no execution (admission only) */
    og_provider *provider;    /* the provider client, with ptable */
    og_provider *redeemer;    /* the token endpoint; NULL: redemption off */
    og_redeem_key *redeem_key;/* seals redemption results (with redeemer) */
    og_opid_key *opid_key;    /* operation-id MACs; NULL: none issued */
    pthread_mutex_t auth_mu;  /* guards auth (the pointer, not the data) */
    og_srv_auth *auth;
    atomic_int inflight;      /* requests accepted and not yet completed */
    atomic_bool draining;     /* SIGTERM seen: answer with Connection: close */
    pthread_mutex_t drain_mu; /* with drain_cv: inflight reached 0 */
    pthread_cond_t drain_cv;  /* also wakes the background loops */
    struct og_ratelimit *limits; /* the edge's token buckets; NULL: none */
    struct og_refusals *refusals; /* the refusal cache (refusals.h); NULL:
                                     off */
} og_srv;

/* The retention passes (janitor.c): ONE library call each with the
 * configuration's batches (a pass in flight when the drain begins runs to
 * its end: at most janitor.max_batches short transactions, as a recovery
 * pass runs to its end), then its log line and metrics; when print, its
 * JSON summary line on stdout. 0, or the store error (logged, and printed
 * as {"job":…,"error":…}).
 *   cleanup  og_store_cleanup: consumption rows past retain_until +
 *            cleanup_margin; then og_payout_expire_grants: the
 *            reservations of payout grants that expired unused (its own
 *            log line "payout_expiry" and summary {"job":"payout-expiry"});
 *   archive  og_store_archive_operations: finished operations older than
 *            operations.audit_retention_days, deleted when
 *            cfg.retention_mode is OG_RETAIN_DELETE, else moved. */
int og_srv_cleanup_pass(og_srv *srv, bool print);
int og_srv_archive_pass(og_srv *srv, bool print);

/* The current snapshot with a reference the caller must drop
 * (og_srv_auth_unref). */
og_srv_auth *og_srv_auth_current(og_srv *srv);

/* One request as the handlers see it: the matched route's path parameter,
 * the authenticated principal, the parsed body, and the answer being built.
 * Owned by http.c; handlers fill status/body/log fields only. */
typedef struct og_http_req {
    og_srv *srv;
    char method[32];
    char path[512];              /* the URL path, percent-decoded (bounded) */
    char *query;                 /* the raw query string, or NULL */
    char qvals[4][256];          /* og_http_query's answers */
    int n_qvals;
    char source[64];             /* the client's address (rate limits) */
    bool checked;                /* og_http_req_check ran */
    const struct og_route *route;
    char param[OG_ID_MAX + 1];   /* the route's {param}, when it has one */
    bool param_too_long;         /* the segment exceeded OG_ID_MAX */
    og_srv_auth *auth;           /* referenced for the request's life */
    const og_principal *principal;
    char correlation_id[OG_ID_MAX + 1];
    int64_t start_us;            /* monotonic */

    /* Body: accumulated up to cfg.max_body_bytes. */
    char *body;
    size_t body_len, body_cap;
    bool body_too_large;
    bool has_content_type;
    bool json_content_type;
    json_t *json;                /* the parsed body object; NULL if empty */

    /* The answer. */
    unsigned status;
    json_t *answer;              /* JSON body, or NULL when text is used */
    char *text;                  /* a non-JSON body (metrics), malloc'd */
    const char *text_type;
    int retry_after;             /* > 0: a Retry-After header */
    const char *allow;           /* 405: the Allow header */
    const char *extra_headers;   /* static header lines ("Name: v\r\n"...),
                                    the console's (console.c, OC2) */
    bool responded;
    json_t *log;                 /* fields for the request's log line */
} og_http_req;

typedef int (*og_http_handler)(og_http_req *r);

/* One served route. roles == 0: public. body: a POST that takes a JSON
 * object (optional_body: an empty body is {}). */
typedef struct og_route {
    const char *method;
    const char *pattern;   /* "/v1/operations/{operation_id}" */
    unsigned roles;        /* any of these roles may call it */
    bool body;
    bool optional_body;
    og_http_handler fn;
} og_route;

/* The route table (handlers.c) and its length. */
extern const og_route og_routes[];
extern const size_t og_n_routes;

/* The payout API's context administration (payout_http.c; role
 * payout-admin), listed in og_routes. */
int og_h_payout_tenant_put(og_http_req *r);
int og_h_payout_beneficiary_put(og_http_req *r);
int og_h_payout_destination_put(og_http_req *r);
int og_h_payout_draft(og_http_req *r);
int og_h_payout_cancel(og_http_req *r);
/* The clerk's submission (role clerk). */
int og_h_payout_submit(og_http_req *r);
/* An approver's fresh decision settling an acknowledgment or an escalation
 * (role approver). */
int og_h_payout_approve(og_http_req *r);
/* payouts: reading (role operator) */
int og_h_payout_get(og_http_req *r);
/* The operator console (console.c). */
int og_h_console(og_http_req *r);
int og_h_console_asset(og_http_req *r);
int og_h_payout_backlog(og_http_req *r);
/* payouts: finance (role operator) */
int og_h_payout_hold(og_http_req *r);
int og_h_payout_reauthorize(og_http_req *r);
int og_h_payout_resubmit(og_http_req *r);

/* Answer helpers (http.c). Each replaces any answer set before. */
void og_http_json(og_http_req *r, unsigned status, json_t *body /* stolen */);
/* {"error": code, "message": message} (+ "field" when field is non-NULL). */
void og_http_error(og_http_req *r, unsigned status, const char *code,
                   const char *message, const char *field);
/* Maps a library error: input codes 400, store unavailable 503 retry_later
 * (Retry-After), OG_ENOMEM/OG_EINTERNAL/other 500. */
void og_http_lib_error(og_http_req *r, int err);

#define OG_HTTP_QVALS 4
/* The query parameter name's value (URL-decoded), or NULL; a malformed one
 * is "%", which no parameter's check accepts. At most OG_HTTP_QVALS
 * lookups per request. */
const char *og_http_query(og_http_req *r, const char *name);

/* Adds a string field to the request's log line (value may be NULL: skip). */
void og_http_log_str(og_http_req *r, const char *key, const char *value);

/* Body member access. Each returns 0, or -1 after answering 400
 * malformed_request naming the member. */
int og_http_members_only(og_http_req *r, json_t *obj,
                         const char *const *allowed, const char *where);
int og_http_str(og_http_req *r, json_t *obj, const char *name, bool required,
                const char **out);
int og_http_int(og_http_req *r, json_t *obj, const char *name, bool required,
                int64_t lo, int64_t hi, int64_t *out);
int og_http_obj(og_http_req *r, json_t *obj, const char *name, bool required,
                json_t **out);

/* Microseconds: wall clock (validation), monotonic (durations). */
int64_t og_http_now_us(void);
int64_t og_http_mono_us(void);

/* The request core (edge.c drives it from a connection; fuzz/fuzz_http.c
 * from fuzzed bytes through the same parser):
 *   begin   routes method + target (the request target as received: the
 *           path is percent-decoded, the query kept), takes the client's
 *           source address and the X-Request-Id and Content-Type values
 *           (any may be NULL); NULL on OOM;
 *   check   the early refusals, on the head alone, before any body byte
 *           is read: route and method (from begin), authentication and
 *           its rate limit, the revocation rate limit, the declared
 *           length (declared; 0 for chunked), Content-Type when a body is
 *           coming (has_body) or required, the path parameter. 0: read
 *           the body; 1: the answer is set (the body is not read);
 *   body    appends body bytes (capped at cfg.max_body_bytes);
 *   run     check (when not yet run), parses the body and runs the
 *           handler: the answer is then in r->status / r->answer / r->text;
 *   render  the whole answer's bytes (status line, headers with
 *           Connection: close when close, body), malloc'd into the return
 *           with its length in *len; logs the request line and counts the
 *           status; NULL on OOM. Free with og_http_answer_free (it wipes:
 *           an answer may carry a credential);
 *   end     frees r and its references. */
og_http_req *og_http_req_begin(og_srv *srv, const char *method,
                               const char *target, const char *source,
                               const char *request_id,
                               const char *content_type);
int og_http_req_check(og_http_req *r, const char *authorization,
                      bool has_body, uint64_t declared);
void og_http_req_body(og_http_req *r, const char *data, size_t n);
void og_http_req_run(og_http_req *r, const char *authorization);
char *og_http_req_render(og_http_req *r, bool close, size_t *len);
void og_http_answer_free(char *text, size_t len);
void og_http_req_end(og_http_req *r);

/* The HTTP edge (edge.c): a listening socket, one thread per connection
 * (at most cfg.max_connections), strict framing (wire.c) and deadlines. */
typedef struct og_edge og_edge;

/* Starts listening on cfg.listen_host:listen_port; *port gets the bound
 * port. 0 or -1 with one line in err. */
int og_http_start(og_srv *srv, og_edge **out, int *port, char *err,
                  size_t errlen);
/* Stops accepting (closes the listening socket); connections stay, and
 * answer with Connection: close once srv->draining is set. */
void og_http_quiesce(og_edge *e);
/* Closes every connection, waits for their threads, frees e (NULL: a
 * no-op). */
void og_http_stop(og_edge *e);

/* One connection's byte stream, for og_edge_serve: recv returns > 0
 * bytes, 0 at the end of the stream, -1 on an error, -2 when timeout_ms
 * passed first; send returns 0 or -1. */
typedef struct og_edge_io {
    void *ctx;
    long (*recv)(void *ctx, char *buf, size_t n, int timeout_ms);
    int (*send)(void *ctx, const char *buf, size_t n);
} og_edge_io;

/* Serves requests on io until it closes or a request asks for, or an
 * error forces, the close. authenticated (may be NULL) is called once,
 * with ctx, when a request on it first authenticates. */
void og_edge_serve(og_srv *srv, const og_edge_io *io, const char *source,
                   void (*authenticated)(void *ctx), void *ctx);

#endif /* OG_SERVE_HTTP_H */
