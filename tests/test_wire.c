/*
 * test_wire.c — the pure cores of the HTTP edge, table-driven: request
 * heads (src/serve/wire.h, W1-W10), chunked bodies (W4), targets and
 * queries, and the token buckets (src/serve/ratelimit.h, RL1-RL2). The
 * same rules over a real socket: tests/serve/edge.c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "support.h"
#include "wire.h"

static const og_wire_limits lim = {8192, 2048};

static void heads_are_parsed_or_refused_by_rule(void **state)
{
    static const struct {
        const char *head;
        long want; /* > 0: parsed; 0: incomplete; < 0: refused */
        unsigned status;
        const char *code;
    } rows[] = {
        {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0, NULL},
        {"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, 0, NULL},
        {"GET / HTTP/1.0\r\n\r\n", 1, 0, NULL},
        {"GET / HTTP/1.1\r\nHost: x\r\n", 0, 0, NULL},
        {"GET / HTTP/1.1\r\nHo", 0, 0, NULL},
        /* W1 */
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
         "Content-Length: 1\r\n\r\n", -1, 400, "bad_framing"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", -1, 400,
         "bad_framing"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1,1\r\n\r\n", -1, 400,
         "bad_framing"},
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9999999999999999999"
         "\r\n\r\n", -1, 400, "bad_framing"},
        /* W2 */
        {"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
         "Transfer-Encoding: chunked\r\n\r\n", -1, 400, "bad_framing"},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -1, 400,
         "bad_framing"},
        /* W3 */
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", -1,
         501, "unsupported_transfer_encoding"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked"
         "\r\n\r\n", -1, 400, "bad_framing"},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n", 1,
         0, NULL},
        /* W5 */
        {"GET / HTTP/1.1\r\n\r\n", -1, 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", -1, 400,
         "malformed_request"},
        /* W6 */
        {"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n", -1, 400,
         "malformed_request"},
        {"GET / HTTP/1.1\nHost: x\r\n\r\n", -1, 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n", -1, 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost : x\r\n\r\n", -1, 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nA: \x01\r\n\r\n", -1, 400,
         "malformed_request"},
        /* W8 */
        {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", -1, 505,
         "http_version_not_supported"},
        {"GET / HTTP/1.1x\r\nHost: x\r\n\r\n", -1, 400, "malformed_request"},
        /* W9 */
        {"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: a\r\n"
         "authorization: b\r\n\r\n", -1, 400, "malformed_request"},
        {"GET / HTTP/1.1\r\nHost: x\r\nExpect: nothing\r\n\r\n", -1, 417,
         "expectation_failed"},
    };
    og_wire_head *h = malloc(sizeof *h);

    (void)state;
    assert_non_null(h);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        og_wire_error e = {0};
        long got = og_wire_head_parse(rows[i].head, strlen(rows[i].head),
                                      &lim, h, &e);

        if ((rows[i].want > 0) != (got > 0) || (rows[i].want < 0) != (got < 0) ||
            (got < 0 && (e.status != rows[i].status ||
                         strcmp(e.code, rows[i].code) != 0)))
            fail_msg("row %zu (%s): got %ld %u %s", i, rows[i].head, got,
                     e.status, e.code ? e.code : "");
        if (rows[i].want > 0 && (size_t)got != strlen(rows[i].head))
            fail_msg("row %zu: head length %ld", i, got);
    }
    free(h);
}

/* W10: the absolute-form is accepted, its path becomes the target; an
 * authority with userinfo, or no path, is refused. */
static void absolute_form_targets_are_accepted_as_their_path(void **state)
{
    static const struct {
        const char *head;
        const char *target; /* NULL: refused 400 malformed_request */
    } rows[] = {
        {"GET http://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", "/healthz"},
        {"GET HTTPS://x:8080/v1/operations/a?b=c HTTP/1.1\r\nHost: y\r\n\r\n",
         "/v1/operations/a?b=c"},
        {"GET http://user@x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        {"GET http:///healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        {"GET http://x HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        {"GET ftp://x/healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        {"GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        {"GET * HTTP/1.1\r\nHost: x\r\n\r\n", NULL},
        /* W5 still holds: the absolute-form does not stand in for Host */
        {"GET http://x/healthz HTTP/1.1\r\n\r\n", NULL},
    };
    og_wire_head *h = malloc(sizeof *h);

    (void)state;
    assert_non_null(h);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        og_wire_error e = {0};
        long got = og_wire_head_parse(rows[i].head, strlen(rows[i].head),
                                      &lim, h, &e);

        if (rows[i].target == NULL) {
            if (got >= 0 || e.status != 400 ||
                strcmp(e.code, "malformed_request") != 0)
                fail_msg("row %zu (%s): got %ld %u", i, rows[i].head, got,
                         e.status);
        } else if (got <= 0 || strcmp(h->target, rows[i].target) != 0) {
            fail_msg("row %zu (%s): got %ld %s", i, rows[i].head, got,
                     got > 0 ? h->target : e.code);
        }
    }
    free(h);
}

static void head_fields_framing_and_limits(void **state)
{
    og_wire_head *h = malloc(sizeof *h);
    og_wire_limits small = {64, 16};
    og_wire_error e = {0};
    const char *req = "POST /a?b=c%20d HTTP/1.1\r\nHost: x\r\n"
                      "Authorization: Bearer k \r\nContent-Type: "
                      "application/json\r\nContent-Length: 12\r\n"
                      "Connection: keep-alive, close\r\n\r\nBODY";
    char path[64];
    const char *q;

    (void)state;
    assert_non_null(h);
    assert_int_equal(og_wire_head_parse(req, strlen(req), &lim, h, &e),
                     (long)(strlen(req) - 4));
    assert_string_equal(h->method, "POST");
    assert_string_equal(h->target, "/a?b=c%20d");
    assert_string_equal(h->authorization, "Bearer k");
    assert_int_equal(h->framing, OG_WIRE_LENGTH);
    assert_int_equal(h->length, 12);
    assert_true(h->close);
    assert_int_equal(og_wire_target(h->target, path, sizeof path, &q), 0);
    assert_string_equal(path, "/a");
    assert_string_equal(q, "b=c%20d");
    /* W7 */
    assert_int_equal(og_wire_head_parse("GET /0123456789abcdefg HTTP/1.1\r\n",
                                        33, &small, h, &e),
                     -1);
    assert_int_equal(e.status, 414);
    {
        const char *line = "GET /0123456789012345678901234567890123456789"
                           "012345678901";
        const char *big = "GET / HTTP/1.1\r\nA: 01234567890123456789012345"
                          "678901234567890123456789012345678901234567\r\n"
                          "\r\n";

        /* the line alone, not yet ended, is too long for any target */
        assert_int_equal(og_wire_head_parse(line, strlen(line), &small, h, &e),
                         -1);
        assert_int_equal(e.status, 414);
        assert_int_equal(og_wire_head_parse(big, strlen(big), &small, h, &e),
                         -1);
        assert_int_equal(e.status, 431);
    }
    free(h);
}

typedef struct sink_buf {
    char b[256];
    size_t n;
} sink_buf;

static void sink(void *ctx, const char *d, size_t n)
{
    sink_buf *s = ctx;

    assert_true(s->n + n < sizeof s->b);
    memcpy(s->b + s->n, d, n);
    s->n += n;
}

static void chunked_bodies_decode_whole_or_split_and_refuse_bad_sizes(
    void **state)
{
    static const char good[] = "3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n"
                               "0\r\nT: 1\r\n\r\nNEXT";
    static const struct {
        const char *in;
        unsigned status;
    } bad[] = {
        {"fffffffff\r\n", 400}, {"zz\r\n", 400},      {" 1\r\n", 400},
        {"1\n", 400},           {"1\r\nab\r\n", 400}, {"1\r\na\n", 400},
        {"0\r\n x\r\n\r\n", 400}, {"80\r\n", 413},
    };
    (void)state;
    /* Whole, then one byte at a time: the same body, the same end. */
    for (size_t step = sizeof good; step >= 1; step = step == 1 ? 0 : 1) {
        og_wire_chunks c = {0};
        sink_buf s = {{0}, 0};
        og_wire_error e;
        bool done = false;
        size_t at = 0;

        while (!done && at < sizeof good - 1) {
            size_t n = step < sizeof good - 1 - at ? step : sizeof good - 1 - at;
            long k = og_wire_chunks_feed(&c, good + at, n, 100, sink, &s,
                                         &done, &e);

            assert_true(k >= 0);
            at += (size_t)k;
        }
        assert_true(done);
        assert_string_equal(good + at, "NEXT");
        assert_int_equal(s.n, 19);
        assert_memory_equal(s.b, "abc0123456789abcdef", 19);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        og_wire_chunks c = {0};
        sink_buf s = {{0}, 0};
        og_wire_error e = {0};
        bool done;

        if (og_wire_chunks_feed(&c, bad[i].in, strlen(bad[i].in), 100, sink,
                                &s, &done, &e) != -1 ||
            e.status != bad[i].status)
            fail_msg("bad chunked #%zu: status %u", i, e.status);
    }
}

static void queries_decode_and_refuse_malformed_escapes(void **state)
{
    char out[32], path[16];
    const char *q;

    (void)state;
    assert_int_equal(og_wire_query_get("a=1&status=needs+rec%41&x", "status",
                                       out, sizeof out),
                     1);
    assert_string_equal(out, "needs recA");
    assert_int_equal(og_wire_query_get("x", "x", out, sizeof out), 1);
    assert_string_equal(out, "");
    assert_int_equal(og_wire_query_get("a=1", "b", out, sizeof out), 0);
    assert_int_equal(og_wire_query_get("a=%4", "a", out, sizeof out), -1);
    assert_int_equal(og_wire_query_get("a=%00", "a", out, sizeof out), -1);
    assert_int_equal(og_wire_target("/a%2", path, sizeof path, &q), -1);
    assert_int_equal(og_wire_target("/a#f", path, sizeof path, &q), -1);
    assert_int_equal(og_wire_target("/0123456789abcdefg", path, sizeof path,
                                    &q),
                     -1);
}

static void token_buckets_refill_and_collisions_never_reset(void **state)
{
    og_ratelimit *rl = og_ratelimit_new(1); /* one slot: every key collides */
    og_rate r = {60, 2};                   /* one a second, two at once */

    (void)state;
    assert_non_null(rl);
    assert_int_equal(og_ratelimit_use(rl, 0, "a", r, 0, true), 0);
    assert_int_equal(og_ratelimit_use(rl, 0, "a", r, 0, true), 0);
    assert_int_equal(og_ratelimit_use(rl, 0, "a", r, 0, false), 1);
    /* RL2: "b" shares the drained slot rather than getting it fresh. */
    assert_int_equal(og_ratelimit_use(rl, 0, "b", r, 0, true), 1);
    /* Refilled after a second: one token. */
    assert_int_equal(og_ratelimit_use(rl, 0, "a", r, 1000000, true), 0);
    assert_true(og_ratelimit_use(rl, 0, "a", r, 1000000, true) >= 1);
    /* Full again after two more seconds: "b" takes the slot over. */
    assert_int_equal(og_ratelimit_use(rl, 0, "b", r, 4000000, true), 0);
    og_ratelimit_free(rl);
    og_ratelimit_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(heads_are_parsed_or_refused_by_rule),
        cmocka_unit_test(absolute_form_targets_are_accepted_as_their_path),
        cmocka_unit_test(head_fields_framing_and_limits),
        cmocka_unit_test(
            chunked_bodies_decode_whole_or_split_and_refuse_bad_sizes),
        cmocka_unit_test(queries_decode_and_refuse_malformed_escapes),
        cmocka_unit_test(token_buckets_refill_and_collisions_never_reset),
    };

    return t_run_tests("wire", tests, NULL, NULL);
}
