/*
 * console.c — the operator console: GET /console and its assets, a page
 * compiled into the binary (src/serve/console/, embedded by tools/embed.py)
 * that reads and acts only through the JSON routes any client calls
 * (docs/console.md).
 *
 * Invariants:
 *   OC1 The console has no powers of its own. Its routes are public and
 *       answer only the fixed assets compiled in, the same bytes to
 *       everyone; every datum the page shows and every change it makes goes
 *       through a /v1/ route with the API key the operator typed, checked
 *       there (authentication, role, rate limits) exactly like a client's.
 *   OC2 Nothing is fetched at run time from anywhere but this server: the
 *       assets are in the binary, and the Content-Security-Policy below
 *       allows scripts, styles, images and connections from 'self' only —
 *       no inline script or style, no eval, no framing (frame-ancestors
 *       'none'), no form posting elsewhere, no <base>.
 *   OC3 The key lives only in the tab's memory: the page keeps it in a
 *       module variable, never in a cookie, web storage, a URL or a log,
 *       and sends it only in the Authorization header of same-origin
 *       fetches (src/serve/console/console.js). The server never sets a
 *       cookie, and Referrer-Policy no-referrer keeps the URL (which holds
 *       no key anyway) to this origin.
 *   OC4 Escaped output everywhere: the page writes every value it received
 *       with textContent / createElement, never innerHTML, so an account
 *       id or a reason holding markup is shown, never run (and OC2's policy
 *       would refuse an injected inline script regardless).
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"

/* The assets (generated from src/serve/console/ by tools/embed.py). */
extern const char og_console_index_html[];
extern const size_t og_console_index_html_len;
extern const char og_console_css[];
extern const size_t og_console_css_len;
extern const char og_console_js[];
extern const size_t og_console_js_len;

/* OC2: every console answer carries these. */
static const char console_headers[] =
    "Content-Security-Policy: default-src 'none'; script-src 'self'; "
    "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'none'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Cross-Origin-Opener-Policy: same-origin\r\n"
    "Cross-Origin-Resource-Policy: same-origin\r\n";

typedef struct {
    const char *name;
    const char *type;
    const char *bytes;
    const size_t *len;
} console_asset;

static const console_asset console_assets[] = {
    {"console.css", "text/css; charset=utf-8", og_console_css,
     &og_console_css_len},
    {"console.js", "text/javascript; charset=utf-8", og_console_js,
     &og_console_js_len},
};

/* Answers one asset (a copy: the renderer owns and frees r->text). */
static int console_answer(og_http_req *r, const char *type, const char *bytes,
                          size_t len)
{
    char *copy = malloc(len + 1);

    if (!copy) {
        og_http_error(r, 500, "internal_error", "out of memory", NULL);
        return 0;
    }
    memcpy(copy, bytes, len + 1); /* the embedded bytes end in NUL */
    og_http_json(r, 200, NULL);
    r->text = copy;
    r->text_type = type;
    r->extra_headers = console_headers;
    return 0;
}

/* GET /console */
int og_h_console(og_http_req *r)
{
    return console_answer(r, "text/html; charset=utf-8", og_console_index_html,
                          og_console_index_html_len);
}

/* GET /console/{asset} */
int og_h_console_asset(og_http_req *r)
{
    for (size_t i = 0; i < sizeof console_assets / sizeof console_assets[0];
         i++)
        if (strcmp(r->param, console_assets[i].name) == 0)
            return console_answer(r, console_assets[i].type,
                                  console_assets[i].bytes,
                                  *console_assets[i].len);
    og_http_error(r, 404, "not_found", "no such console asset", NULL);
    r->extra_headers = console_headers;
    return 0;
}
