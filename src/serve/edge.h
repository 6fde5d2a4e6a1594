/*
 * edge.h — one HTTP connection as a state machine without I/O (edge.c),
 * driven by the event loop of `oncegate serve` (loop.c) and, through
 * og_edge_io, by fuzz_http (og_edge_serve). Private to src/serve/.
 *
 * The driver reads bytes into in/len, then calls og_conn_step until it
 * says what the connection needs next:
 *   WAIT   more bytes, by deadline_us (past it: og_conn_timeout);
 *   RUN    a whole request is in r: run the handler (og_http_req_run with
 *          h->authorization), then og_conn_answer;
 *   SEND   out[0..out_len) to send; then, unless out_close, step again;
 *   CLOSE  end the connection quietly (nothing to send).
 * The end of the client's stream is og_conn_eof; both it and
 * og_conn_timeout return SEND (an answer, then close) or CLOSE.
 */
#ifndef OG_SERVE_EDGE_H
#define OG_SERVE_EDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "wire.h"

enum { OG_CONN_WAIT, OG_CONN_RUN, OG_CONN_SEND, OG_CONN_CLOSE };

typedef struct og_conn {
    og_srv *srv;
    char source[64];
    char *in;            /* bytes received and not yet consumed */
    size_t len, cap;
    og_wire_head *h;     /* the current request's head */
    int state;           /* edge.c's CS_* */
    og_http_req *r;      /* the current request (body, run) */
    og_wire_chunks ch;   /* chunked body decoder */
    uint64_t left;       /* Content-Length bytes still to come */
    bool close;          /* the answer closes the connection */
    bool authed;         /* a request on it authenticated */
    void (*authenticated)(void *ctx); /* HE3; may be NULL */
    void *auth_ctx;
    int64_t deadline_us; /* WAIT: monotonic; past it og_conn_timeout */
    int64_t head_deadline_us; /* the head's, from its first byte; 0: none */
    char *out;           /* SEND: bytes to send (owned, wiped when freed) */
    size_t out_len;
    bool out_close;      /* close once out is sent */
} og_conn;

/* Prepares c for srv (buffers allocated). 0 or -1 (OOM: og_conn_free). */
int og_conn_init(og_conn *c, og_srv *srv, const char *source);
/* Frees what c holds (wiping: it may hold a key or a token). */
void og_conn_free(og_conn *c);

/* The next thing c needs, at monotonic now_us (above). */
int og_conn_step(og_conn *c, int64_t now_us);
/* After RUN's handler: the answer rendered into out (Connection: close
 * when the request asked, a refusal closed, or the server drains); SEND. */
int og_conn_answer(og_conn *c);
/* The client's stream ended (after every byte it sent was stepped). */
int og_conn_eof(og_conn *c);
/* deadline_us passed while waiting. */
int og_conn_timeout(og_conn *c);
/* Frees out once sent. */
void og_conn_sent(og_conn *c);

#endif /* OG_SERVE_EDGE_H */
