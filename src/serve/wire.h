/*
 * wire.h — the HTTP/1.1 request framing of `oncegate serve` (RFC 9112), as
 * a pure core: bytes in, a parsed head or a refusal out, no I/O. edge.c
 * drives it from a connection; fuzz_http drives it from fuzzed bytes;
 * test_serve_unit checks it case by case. Private to src/serve/.
 *
 * Why our own: libmicrohttpd 0.9.75 (Debian 12's) accepts repeated
 * Content-Length headers (the first wins), joins obs-folded lines, waits
 * for an unknown Transfer-Encoding's body until its idle timeout, and
 * answers its own errors (400, 413, 414, 431, 505) as HTML, sending the
 * status line twice for `Content-Length: -5`; none of it is reachable from
 * its options or callbacks (README.md, "Dependencies").
 *
 * Framing rules (each refusal closes the connection; edge.c):
 *   W1  exactly one Content-Length, 1*DIGIT, or none: a repeated, listed,
 *       signed or non-decimal one is 400 bad_framing;
 *   W2  Transfer-Encoding with Content-Length is 400 bad_framing
 *       (RFC 9112 §6.1); Transfer-Encoding in HTTP/1.0 is 400 bad_framing;
 *   W3  a Transfer-Encoding other than one `chunked` is 501
 *       unsupported_transfer_encoding; `chunked` twice is 400 bad_framing;
 *   W4  chunk sizes are 1..8 hex digits, chunk lines and data end in CRLF,
 *       else 400 bad_framing; a body past max_body is 413 body_too_large;
 *   W5  HTTP/1.1 without exactly one Host is 400 malformed_request;
 *   W6  obs-fold (a line starting with SP or HTAB), a bare CR or LF, white
 *       space before a colon, a control character in a value, a field name
 *       that is not a token: 400 malformed_request;
 *   W7  a request line longer than max_target + 32 is 414 uri_too_long; a
 *       head longer than max_head or with more than OG_WIRE_FIELDS_MAX
 *       fields is 431 headers_too_large;
 *   W8  HTTP/1.x other than 1.0 and 1.1, or HTTP/2+, is 505
 *       http_version_not_supported;
 *   W9  a repeated Authorization is 400 malformed_request (which one would
 *       be the caller's?);
 *   W10 the request target is an absolute path, or the absolute-form
 *       (http[s]://authority/path, RFC 9112 §3.2.2) whose path from its
 *       first '/' becomes the target; an authority with userinfo, an empty
 *       one or no path is 400 malformed_request, and so is any other form
 *       (asterisk, authority-form: nothing here is OPTIONS * or CONNECT).
 */
#ifndef OG_SERVE_WIRE_H
#define OG_SERVE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OG_WIRE_FIELDS_MAX 64
#define OG_WIRE_HEAD_MAX 65536 /* the largest max_head accepted */

typedef struct og_wire_limits {
    size_t max_head;   /* request line + fields + the empty line */
    size_t max_target; /* the request target */
} og_wire_limits;

typedef enum og_wire_framing {
    OG_WIRE_NONE,    /* no body */
    OG_WIRE_LENGTH,  /* Content-Length: length bytes */
    OG_WIRE_CHUNKED, /* Transfer-Encoding: chunked */
} og_wire_framing;

typedef struct og_wire_field {
    const char *name, *value; /* into the head's store, NUL-terminated */
} og_wire_field;

/* A parsed request head. Every string points into store. */
typedef struct og_wire_head {
    const char *method;
    const char *target;     /* as received: path and query */
    int minor;              /* HTTP/1.minor: 0 or 1 */
    og_wire_field fields[OG_WIRE_FIELDS_MAX];
    size_t n_fields;
    og_wire_framing framing;
    uint64_t length;        /* OG_WIRE_LENGTH */
    bool close;             /* Connection: close, or HTTP/1.0 */
    bool expect_continue;   /* Expect: 100-continue */
    const char *authorization, *content_type, *request_id; /* or NULL */
    char store[OG_WIRE_HEAD_MAX + OG_WIRE_FIELDS_MAX + 8];
} og_wire_head;

/* A refusal: status, stable code, message (static strings). */
typedef struct og_wire_error {
    unsigned status;
    const char *code;
    const char *message;
} og_wire_error;

/* Parses the head at the start of buf[0..len). Returns the head's length
 * (> 0) with *h filled; 0 when more bytes are needed and none of the
 * complete lines so far breaks a rule; -1 with *e set on a refusal. buf is
 * not modified; parsing again from the start after more bytes arrived is
 * how a caller continues. */
long og_wire_head_parse(const char *buf, size_t len, const og_wire_limits *lim,
                        og_wire_head *h, og_wire_error *e);

/* The chunked body decoder (W4). Zero it before the first byte. */
typedef struct og_wire_chunks {
    int state;
    uint64_t left;     /* bytes of the current chunk still to come */
    uint64_t total;    /* body bytes decoded so far */
    unsigned digits;   /* of the current size line */
    unsigned line;     /* bytes of the current size or trailer line */
    unsigned trailers; /* trailer fields seen */
} og_wire_chunks;

/* Decodes in[0..n): body bytes are passed to sink (ctx, data, len) as they
 * come. Returns the number of input bytes consumed; *done is set when the
 * last chunk and the trailers ended (the bytes after it belong to the next
 * request). -1 with *e set on a framing error or when the body exceeds
 * max_body (413). */
long og_wire_chunks_feed(og_wire_chunks *c, const char *in, size_t n,
                         uint64_t max_body,
                         void (*sink)(void *ctx, const char *data, size_t len),
                         void *ctx, bool *done, og_wire_error *e);

/* The request target split and decoded: the path percent-decoded into
 * path (NUL-terminated), the raw query (after '?', NULL when none). 0, or
 * -1 when the target is not an origin-form path, a percent escape is
 * malformed, decodes to NUL, or the path does not fit. */
int og_wire_target(const char *target, char *path, size_t pathlen,
                   const char **query);

/* The URL-decoded value of query parameter name in query ('+' is a space)
 * into out; 1 found, 0 absent, -1 malformed or too long. */
int og_wire_query_get(const char *query, const char *name, char *out,
                      size_t outlen);

#endif /* OG_SERVE_WIRE_H */
