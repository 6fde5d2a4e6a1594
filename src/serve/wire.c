/*
 * wire.c — HTTP/1.1 request framing (RFC 9112) as a pure core; the rules
 * W1-W10 it enforces are listed in wire.h. No allocation, no I/O: a head is
 * parsed into the caller's og_wire_head, a chunked body is decoded into
 * the caller's sink.
 */
#include <string.h>
#include <strings.h>

#include "oncegate/core.h" /* og_hex_digit */
#include "wire.h"

#define E(e_, st, cd, msg)                                                     \
    ((e_)->status = (st), (e_)->code = (cd), (e_)->message = (msg), -1)

#define BAD_FRAMING "bad_framing"
#define MALFORMED "malformed_request"

/* RFC 9110 §5.6.2 tchar. */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
        (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A field value byte (RFC 9110 §5.5): VCHAR, obs-text, SP, HTAB. */
static bool is_vbyte(unsigned char c)
{
    return c == ' ' || c == '\t' || (c >= 0x21 && c != 0x7f);
}

/* The end of the line starting at p (the index of its '\n'); -1 when the
 * line is not complete in buf; -2 for a bare CR or LF (W6). */
static long line_end(const char *buf, size_t len, size_t p)
{
    for (size_t i = p; i < len; i++) {
        if (buf[i] == '\n')
            return i > p && buf[i - 1] == '\r' ? (long)i : -2;
        if (buf[i] == '\r' && i + 1 < len && buf[i + 1] != '\n')
            return -2;
    }
    return -1;
}

/* Appends s[0..n) and a NUL to the head's store at *at. */
static const char *keep(og_wire_head *h, size_t *at, const char *s, size_t n)
{
    char *d = h->store + *at;

    memcpy(d, s, n);
    d[n] = '\0';
    *at += n + 1;
    return d;
}

/* The request line buf[0..n) (without CRLF): W7, W8. */
static int request_line(og_wire_head *h, size_t *at, const char *l, size_t n,
                        const og_wire_limits *lim, og_wire_error *e)
{
    const char *sp1 = memchr(l, ' ', n), *sp2, *v;
    size_t tn, vn;

    if (!sp1 || sp1 == l || sp1 - l > 16)
        return E(e, 400, MALFORMED, "request line: METHOD SP TARGET SP "
                                    "HTTP/1.1 expected");
    for (const char *c = l; c < sp1; c++)
        if (!is_tchar((unsigned char)*c))
            return E(e, 400, MALFORMED, "request line: method is not a "
                                        "token");
    sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - l));
    if (!sp2)
        return E(e, 400, MALFORMED, "request line: METHOD SP TARGET SP "
                                    "HTTP/1.1 expected");
    tn = (size_t)(sp2 - sp1 - 1);
    if (tn > lim->max_target)
        return E(e, 414, "uri_too_long",
                 "the request target exceeds http.max_url_bytes");
    v = sp2 + 1;
    vn = n - (size_t)(v - l);
    if (vn == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' &&
        v[5] <= '9' && v[6] == '.' && v[7] >= '0' && v[7] <= '9') {
        if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
            return E(e, 505, "http_version_not_supported",
                     "only HTTP/1.1 and HTTP/1.0 are served");
    } else {
        return E(e, 400, MALFORMED, "request line: HTTP version expected");
    }
    for (const char *c = sp1 + 1; c < sp2; c++)
        if ((unsigned char)*c < 0x21 || (unsigned char)*c > 0x7e)
            return E(e, 400, MALFORMED, "request target: a byte outside "
                                        "visible ASCII");
    const char *path = sp1 + 1;
    size_t pn = tn;
    if (tn > 0 && path[0] != '/') {
        /* W10: the absolute-form (http://host/path), which a server must
         * accept (RFC 9112 section 3.2.2); the authority is only
         * checked, since nothing here is routed by host, and the path
         * from its first '/' is the target. No userinfo ('@'): RFC 9110
         * forbids it in an http URI, and it is how a target is made to
         * look like another host. */
        size_t sn = tn >= 7 && strncasecmp(path, "http://", 7) == 0 ? 7
                    : tn >= 8 && strncasecmp(path, "https://", 8) == 0 ? 8
                                                                      : 0;
        const char *auth = path + sn, *end = path + tn, *slash;

        if (sn == 0)
            return E(e, 400, MALFORMED, "request target: an absolute path "
                                        "or an http(s) URI expected");
        slash = memchr(auth, '/', (size_t)(end - auth));
        if (slash == NULL || slash == auth ||
            memchr(auth, '@', (size_t)(slash - auth)) != NULL ||
            memchr(auth, '?', (size_t)(slash - auth)) != NULL ||
            memchr(auth, '#', (size_t)(slash - auth)) != NULL)
            return E(e, 400, MALFORMED, "request target: an absolute URI "
                                        "needs a host without userinfo, "
                                        "then a path");
        path = slash;
        pn = (size_t)(end - slash);
    }
    if (pn == 0)
        return E(e, 400, MALFORMED, "request target: an absolute path "
                                    "expected");
    h->method = keep(h, at, l, (size_t)(sp1 - l));
    h->target = keep(h, at, path, pn);
    h->minor = v[7] - '0';
    return 0;
}

/* One field line l[0..n) (without CRLF): W6. */
static int field_line(og_wire_head *h, size_t *at, const char *l, size_t n,
                      og_wire_error *e)
{
    const char *colon = memchr(l, ':', n), *v, *ve;

    if (l[0] == ' ' || l[0] == '\t')
        return E(e, 400, MALFORMED, "obs-fold (a field line continued on "
                                    "the next) is not accepted");
    if (!colon || colon == l)
        return E(e, 400, MALFORMED, "field line: NAME: VALUE expected");
    for (const char *c = l; c < colon; c++)
        if (!is_tchar((unsigned char)*c))
            return E(e, 400, MALFORMED, "field name is not a token (white "
                                        "space before the colon?)");
    v = colon + 1;
    ve = l + n;
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    for (const char *c = v; c < ve; c++)
        if (!is_vbyte((unsigned char)*c))
            return E(e, 400, MALFORMED, "field value: a control character");
    if (h->n_fields == OG_WIRE_FIELDS_MAX)
        return E(e, 431, "headers_too_large", "too many header fields");
    h->fields[h->n_fields].name = keep(h, at, l, (size_t)(colon - l));
    h->fields[h->n_fields].value = keep(h, at, v, (size_t)(ve - v));
    h->n_fields++;
    return 0;
}

/* The next element of the comma-separated list at *v (RFC 9110 §5.6.1:
 * empty elements skipped, OWS trimmed) into *el; its length, 0 at the
 * list's end. */
static size_t list_next(const char **v, const char **el)
{
    size_t n;

    for (;;) {
        while (**v == ' ' || **v == '\t' || **v == ',')
            (*v)++;
        if (!**v)
            return 0;
        n = strcspn(*v, ",");
        *el = *v;
        *v += n;
        while (n > 0 && ((*el)[n - 1] == ' ' || (*el)[n - 1] == '\t'))
            n--;
        if (n > 0)
            return n;
    }
}

/* True when the list v has element tok (case-insensitive). */
static bool list_has(const char *v, const char *tok)
{
    const char *el;
    size_t n;

    while ((n = list_next(&v, &el)) > 0)
        if (n == strlen(tok) && strncasecmp(el, tok, n) == 0)
            return true;
    return false;
}

/* Transfer-Encoding value v: adds its codings to *chunked and *other. */
static void te_codings(const char *v, unsigned *chunked, unsigned *other)
{
    const char *el;
    size_t n;

    while ((n = list_next(&v, &el)) > 0) {
        if (n == 7 && strncasecmp(el, "chunked", 7) == 0)
            (*chunked)++;
        else
            (*other)++;
    }
}

/* The framing and the fields the edge reads: W1-W3, W5, W9. */
static int head_semantics(og_wire_head *h, og_wire_error *e)
{
    unsigned n_cl = 0, n_te = 0, n_host = 0, n_auth = 0, n_ct = 0;
    unsigned chunked = 0, other = 0;
    const char *cl = NULL;

    for (size_t i = 0; i < h->n_fields; i++) {
        const char *n = h->fields[i].name, *v = h->fields[i].value;

        if (strcasecmp(n, "Content-Length") == 0) {
            n_cl++;
            cl = v;
        } else if (strcasecmp(n, "Transfer-Encoding") == 0) {
            n_te++;
            te_codings(v, &chunked, &other);
        } else if (strcasecmp(n, "Host") == 0) {
            n_host++;
        } else if (strcasecmp(n, "Authorization") == 0) {
            n_auth++;
            h->authorization = v;
        } else if (strcasecmp(n, "Content-Type") == 0) {
            n_ct++;
            h->content_type = v;
        } else if (strcasecmp(n, "X-Request-Id") == 0) {
            if (!h->request_id)
                h->request_id = v;
        } else if (strcasecmp(n, "Connection") == 0) {
            if (list_has(v, "close"))
                h->close = true;
        } else if (strcasecmp(n, "Expect") == 0) {
            if (strcasecmp(v, "100-continue") != 0)
                return E(e, 417, "expectation_failed",
                         "only Expect: 100-continue is understood");
            h->expect_continue = true;
        }
    }
    if (n_cl > 1)
        return E(e, 400, BAD_FRAMING, "Content-Length is repeated");
    if (n_te > 0 && n_cl > 0)
        return E(e, 400, BAD_FRAMING, "Transfer-Encoding together with "
                                      "Content-Length");
    if (n_te > 0 && h->minor == 0)
        return E(e, 400, BAD_FRAMING, "Transfer-Encoding in an HTTP/1.0 "
                                      "request");
    if (n_te > 0 && other > 0)
        return E(e, 501, "unsupported_transfer_encoding",
                 "the only transfer coding served is chunked");
    if (n_te > 0 && chunked != 1)
        return E(e, 400, BAD_FRAMING, "chunked must be applied exactly "
                                      "once");
    if (cl) {
        size_t digits = strspn(cl, "0123456789");

        if (digits == 0 || cl[digits] != '\0' || digits > 18)
            return E(e, 400, BAD_FRAMING, "Content-Length is not a decimal "
                                          "number of bytes");
        h->framing = OG_WIRE_LENGTH;
        h->length = 0;
        for (size_t i = 0; i < digits; i++)
            h->length = h->length * 10 + (uint64_t)(cl[i] - '0');
    } else if (n_te > 0) {
        h->framing = OG_WIRE_CHUNKED;
    }
    if (h->minor == 1 && n_host != 1)
        return E(e, 400, MALFORMED, n_host == 0 ? "Host is required in "
                                                  "HTTP/1.1"
                                                : "Host is repeated");
    if (h->minor == 0 && n_host > 1)
        return E(e, 400, MALFORMED, "Host is repeated");
    if (n_auth > 1)
        return E(e, 400, MALFORMED, "Authorization is repeated");
    if (n_ct > 1)
        return E(e, 400, MALFORMED, "Content-Type is repeated");
    if (h->minor == 0)
        h->close = true;
    return 0;
}

long og_wire_head_parse(const char *buf, size_t len, const og_wire_limits *lim,
                        og_wire_head *h, og_wire_error *e)
{
    size_t p = 0, at = 0, lines = 0;
    long end;

    memset(h, 0, offsetof(og_wire_head, store));
    /* RFC 9112 §2.2: empty lines before the request line are ignored. */
    while (p + 1 < len && buf[p] == '\r' && buf[p + 1] == '\n' && p < 8)
        p += 2;
    for (;;) {
        end = line_end(buf, len, p);
        if (end == -2)
            return E(e, 400, MALFORMED, "a bare CR or LF (lines end in "
                                        "CRLF)");
        if (end == -1) {
            if (lines == 0 && len - p > lim->max_target + 32)
                return E(e, 414, "uri_too_long",
                         "the request target exceeds http.max_url_bytes");
            if (len >= lim->max_head)
                return E(e, 431, "headers_too_large",
                         "the request head exceeds http.max_header_bytes");
            return 0;
        }
        if ((size_t)end + 1 > lim->max_head)
            return E(e, 431, "headers_too_large",
                     "the request head exceeds http.max_header_bytes");
        if (lines == 0) {
            if (request_line(h, &at, buf + p, (size_t)end - 1 - p, lim, e))
                return -1;
        } else if ((size_t)end - 1 == p) {
            break; /* the empty line: the head ends */
        } else if (field_line(h, &at, buf + p, (size_t)end - 1 - p, e)) {
            return -1;
        }
        lines++;
        p = (size_t)end + 1;
    }
    if (head_semantics(h, e) != 0)
        return -1;
    return (long)end + 1;
}

/* ===========================================================================
 * Chunked bodies (W4).
 * ========================================================================= */
enum {
    C_SIZE,       /* hex digits of a chunk size */
    C_EXT,        /* a chunk extension, ignored */
    C_SIZE_LF,    /* the LF of a size line */
    C_DATA,       /* chunk data */
    C_DATA_CR,    /* the CRLF after chunk data */
    C_DATA_LF,
    C_TRAILER0,   /* the start of a trailer line or the final CRLF */
    C_TRAILER,    /* a trailer field, ignored */
    C_TRAILER_LF,
    C_END_LF,     /* the final LF */
};

#define CHUNK_LINE_MAX 256
#define TRAILERS_MAX 32

long og_wire_chunks_feed(og_wire_chunks *c, const char *in, size_t n,
                         uint64_t max_body,
                         void (*sink)(void *ctx, const char *data, size_t len),
                         void *ctx, bool *done, og_wire_error *e)
{
    size_t i = 0;

    *done = false;
    while (i < n) {
        unsigned char b = (unsigned char)in[i];

        switch (c->state) {
        case C_SIZE:
            if (og_hex_digit(b) >= 0) {
                if (++c->digits > 8)
                    return E(e, 400, BAD_FRAMING, "chunk size: more than 8 "
                                                  "hex digits");
                c->left = c->left * 16 + (uint64_t)og_hex_digit(b);
            } else if (c->digits == 0) {
                return E(e, 400, BAD_FRAMING, "chunk size: hex digits "
                                              "expected");
            } else if (b == ';') {
                c->state = C_EXT;
                c->line = 0;
            } else if (b == '\r') {
                c->state = C_SIZE_LF;
            } else {
                return E(e, 400, BAD_FRAMING, "chunk size: CRLF expected "
                                              "after the digits");
            }
            break;
        case C_EXT:
            if (b == '\r')
                c->state = C_SIZE_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f ||
                     ++c->line > CHUNK_LINE_MAX)
                return E(e, 400, BAD_FRAMING, "chunk extension: a control "
                                              "character or too long");
            break;
        case C_SIZE_LF:
            if (b != '\n')
                return E(e, 400, BAD_FRAMING, "chunk size line: a bare CR");
            c->digits = 0;
            if (c->left == 0) {
                c->state = C_TRAILER0;
            } else if (c->total + c->left > max_body) {
                return E(e, 413, "body_too_large",
                         "request body exceeds max_body_bytes");
            } else {
                c->state = C_DATA;
            }
            break;
        case C_DATA: {
            size_t take = n - i;

            if (take > c->left)
                take = (size_t)c->left;
            sink(ctx, in + i, take);
            c->left -= take;
            c->total += take;
            i += take;
            if (c->left == 0)
                c->state = C_DATA_CR;
            continue;
        }
        case C_DATA_CR:
            if (b != '\r')
                return E(e, 400, BAD_FRAMING, "chunk data longer than its "
                                              "size");
            c->state = C_DATA_LF;
            break;
        case C_DATA_LF:
            if (b != '\n')
                return E(e, 400, BAD_FRAMING, "chunk data: CRLF expected");
            c->state = C_SIZE;
            break;
        case C_TRAILER0:
            if (b == '\r') {
                c->state = C_END_LF;
            } else if (b == ' ' || b == '\t' || b == '\n') {
                return E(e, 400, BAD_FRAMING, "trailer: obs-fold or a bare "
                                              "LF");
            } else if (++c->trailers > TRAILERS_MAX) {
                return E(e, 400, BAD_FRAMING, "too many trailer fields");
            } else {
                c->state = C_TRAILER;
                c->line = 1;
            }
            break;
        case C_TRAILER:
            if (b == '\r')
                c->state = C_TRAILER_LF;
            else if ((b < 0x20 && b != '\t') || b == 0x7f ||
                     ++c->line > CHUNK_LINE_MAX * 4)
                return E(e, 400, BAD_FRAMING, "trailer: a control character "
                                              "or too long");
            break;
        case C_TRAILER_LF:
            if (b != '\n')
                return E(e, 400, BAD_FRAMING, "trailer: a bare CR");
            c->state = C_TRAILER0;
            break;
        case C_END_LF:
            if (b != '\n')
                return E(e, 400, BAD_FRAMING, "chunked body: a bare CR at "
                                              "its end");
            *done = true;
            return (long)i + 1;
        default:
            return E(e, 400, BAD_FRAMING, "chunked body: decoder state");
        }
        i++;
    }
    return (long)i;
}

/* ===========================================================================
 * Targets and queries.
 * ========================================================================= */

/* Percent-decodes s[0..n) into out (NUL-terminated); plus: '+' is a
 * space. 0, or -1 on a malformed escape, a NUL, or no room. */
static int pct_decode(const char *s, size_t n, bool plus, char *out,
                      size_t outlen)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];

        if (ch == '%') {
            if (i + 2 >= n)
                return -1;
            if (og_hex_digit((unsigned char)s[i + 1]) < 0 ||
                og_hex_digit((unsigned char)s[i + 2]) < 0)
                return -1;
            ch = og_hex_digit((unsigned char)s[i + 1]) * 16 +
                 og_hex_digit((unsigned char)s[i + 2]);
            i += 2;
            if (ch == 0)
                return -1;
        } else if (plus && ch == '+') {
            ch = ' ';
        }
        if (o + 1 >= outlen)
            return -1;
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    return 0;
}

int og_wire_target(const char *target, char *path, size_t pathlen,
                   const char **query)
{
    size_t pn = strcspn(target, "?#");

    if (target[0] != '/' || target[pn] == '#')
        return -1;
    if (target[pn] == '?') {
        if (strchr(target + pn, '#'))
            return -1;
        *query = target + pn + 1;
    } else {
        *query = NULL;
    }
    return pct_decode(target, pn, false, path, pathlen);
}

int og_wire_query_get(const char *query, const char *name, char *out,
                      size_t outlen)
{
    char key[128];

    while (query && *query) {
        size_t n = strcspn(query, "&"), kn = strcspn(query, "=&");

        if (kn < sizeof key &&
            pct_decode(query, kn, true, key, sizeof key) == 0 &&
            strcmp(key, name) == 0) {
            if (kn == n) {
                if (outlen == 0)
                    return -1;
                out[0] = '\0';
                return 1;
            }
            return pct_decode(query + kn + 1, n - kn - 1, true, out,
                              outlen) == 0
                       ? 1
                       : -1;
        }
        query += n;
        if (*query == '&')
            query++;
    }
    return 0;
}
