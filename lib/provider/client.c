/*
 * client.c — the billing provider client: the only code in oncegate that
 * talks to a provider over the network (libcurl). It sends one request,
 * reports how the exchange ended, and leaves what the answer MEANS to the
 * pure classifier (lib/core/classify.c) and the provider's table.
 *
 * Invariants:
 *   CL1 A negative return from a call means no request was sent. Once
 *       curl_easy_perform() has begun, every failure — including libcurl's
 *       own out-of-memory — is a transport kind and the call returns a
 *       classification (UNKNOWN unless the table proves otherwise).
 *   CL2 connect_failed means not one byte of the request reached the
 *       provider: only connect-phase errors (or the timeout) on a connection
 *       that never completed — TCP for http, the TLS handshake for https —
 *       in a call that never began a request on any connection (the
 *       CURLOPT_PREREQFUNCTION count is 0: libcurl calls it before each
 *       request it sends, on a new or a reused connection). So it holds
 *       with connection reuse too (CL9): a call that began on a pooled
 *       connection, or that libcurl re-sent on a fresh one after a pooled
 *       one died, is never connect_failed. No proxy (whose own connection
 *       would complete first).
 *   CL3 Every call has its own timeout (timeout_us), never the caller's
 *       request's: a client disconnect does not abandon a create halfway.
 *   CL4 A response is read up to OG_PROVIDER_BODY_MAX bytes; beyond that
 *       the transfer is aborted and reported response_too_large. No content
 *       decoding is requested, so the cap is on the bytes received.
 *   CL5 The API key is sent only in the Authorization header; it is copied
 *       at open, never logged or put in an error or outcome, and wiped at
 *       free, as is each call's header list. (libcurl's own request buffer
 *       is freed unwiped: out of our reach.) This file logs nothing.
 *   CL6 No redirects (a 3xx is an answer like any other: undocumented,
 *       UNKNOWN), http and https only.
 *   CL7 A token exchange (og_provider_exchange_code) follows CL1-CL6 and
 *       wipes the buffers it owns that held the code or the token
 *       response; it is sent once and never resent by this file — after an
 *       unknown outcome the code may be spent, and only the caller's
 *       recovery point can tell (og_redeem).
 *   CL8 Credits and payouts are one request builder (create_effect,
 *       lookup_effect) read through a resource row (credits_api,
 *       payouts_api): the path, the target member, its error code and
 *       whether it is a secret. A payout's destination is one: it is refused with a fixed
 *       error, never copied into an outcome, and the request text and the
 *       answer that held it are wiped (jansson's and libcurl's own copies
 *       are freed unwiped, as in CL5).
 *   CL9 Connection reuse (og_provider_set_reuse; docs/design.md, KA1):
 *       off by default — every call on a FRESH connection, closed after
 *       it. On, credit and payout creates and lookups take an easy handle
 *       from the client's pool of idle ones, each keeping its one
 *       connection alive between calls (libcurl keeps a handle's live
 *       connections across curl_easy_reset), idle at most idle_s, at most
 *       max_connections handles kept. A handle, and so its connection, is
 *       used by one call at a time: libcurl's shared connection cache
 *       (CURLSH with CURL_LOCK_DATA_CONNECT) is documented as unsupported
 *       across concurrent threads, so it is not used. A kept handle may
 *       hold libcurl's own buffers of its last call until it is freed
 *       (unwiped, as in CL5). It is on only for a table declaring atomic
 *       same-key handling: libcurl re-sends a request by itself when a
 *       pooled connection yields no byte of an answer (the peer had closed
 *       it), and that re-send is the same request — same Idempotency-Key,
 *       same body (EX3) — which such a provider answers as one. A token
 *       exchange never reuses a connection (CL7: sent once).
 *
 * Thread-safe: an og_provider is immutable after og_provider_open() and
 * og_provider_set_reuse() but for its pool of idle handles, guarded by
 * pool_mu; each call has an easy handle of its own while it runs.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "core/core_int.h" /* OG__TIME_MAX_US: the last instant RFC 3339
                               text can name, 9999-12-31T23:59:59.999999Z */
#include "oncegate/provider.h"

#define URL_MAX 2048          /* base URL bytes */
#define API_KEY_MAX 4096      /* API key bytes */
#define RETRY_AFTER_MAX 63    /* Retry-After header value bytes kept */
#define TIMEOUT_MAX_US (INT64_C(3600) * 1000000) /* one hour */

struct og_provider {
    char base_url[URL_MAX + 1]; /* no trailing '/' */
    bool https;
    char *auth_header;              /* "Authorization: Bearer <key>" or
                                       NULL; a secret (CL5) */
    size_t auth_len;
    const og_provider_table *t;     /* borrowed */
    CURL **pool;                    /* CL9: max_connections slots, idle
                                       handles in [0, n_idle); NULL: a
                                       fresh connection per call */
    int n_idle;
    pthread_mutex_t pool_mu;        /* guards pool and n_idle */
    long max_connections, idle_s;   /* CL9 */
};

/* ===========================================================================
 * The table file (file I/O kept out of the pure classifier)
 * ========================================================================= */

/* Fills *e (may be NULL) for a file that could not be read; OG_EINVAL. */
static int table_file_error(og_provider_table_error *e,
                            og_provider_table_err code, const char *detail)
{
    if (e) {
        memset(e, 0, sizeof *e);
        e->code = code;
        snprintf(e->where, sizeof e->where, "$");
        snprintf(e->text, sizeof e->text, "%s at $: %s",
                 og_provider_table_err_name(code), detail);
    }
    return OG_EINVAL;
}

int og_provider_table_load_file(const char *path, og_provider_table **out,
                                og_provider_table_error *err)
{
    char *buf = NULL;
    size_t len = 0, n;
    FILE *f;
    int rc;

    if (!path || !out)
        return table_file_error(err, OG_PROVIDER_TABLE_E_IO, "no path");
    f = fopen(path, "rb");
    if (!f)
        return table_file_error(err, OG_PROVIDER_TABLE_E_IO, strerror(errno));
    buf = malloc(OG_PROVIDER_TABLE_MAX + 1);
    if (!buf) {
        fclose(f);
        return OG_ENOMEM;
    }
    /* One byte past the cap tells "exactly the cap" from "over it". */
    while (len <= OG_PROVIDER_TABLE_MAX &&
           (n = fread(buf + len, 1, OG_PROVIDER_TABLE_MAX + 1 - len, f)) > 0)
        len += n;
    if (ferror(f))
        rc = table_file_error(err, OG_PROVIDER_TABLE_E_IO, "read error");
    else if (len > OG_PROVIDER_TABLE_MAX)
        rc = table_file_error(err, OG_PROVIDER_TABLE_E_TOO_LARGE,
                              "over OG_PROVIDER_TABLE_MAX bytes");
    else
        rc = og_provider_table_load(buf, len, out, err);
    fclose(f);
    free(buf);
    return rc;
}

/* ===========================================================================
 * Opening
 * ========================================================================= */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* len bytes of s are all in [lo, hi]. */
static bool bytes_in(const char *s, size_t len, unsigned char lo,
                     unsigned char hi)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < lo || (unsigned char)s[i] > hi)
            return false;
    return true;
}

/* og_provider_open for a table t, or NULL for a token endpoint only. */
static int open_client(const char *base_url, const char *api_key,
                       const og_provider_table *t, og_provider **out)
{
    og_provider *p;
    size_t n, klen = 0;

    if (!base_url || !out)
        return OG_EINVAL;
    n = strlen(base_url);
    /* An absolute http(s) URL without query, fragment, spaces or controls:
     * paths are appended to it. */
    if (n > URL_MAX || !bytes_in(base_url, n, 0x21, 0x7e) ||
        strpbrk(base_url, "?#") ||
        !((n > 7 && strncmp(base_url, "http://", 7) == 0) ||
          (n > 8 && strncmp(base_url, "https://", 8) == 0)))
        return OG_EINVAL;
    if (api_key) {
        klen = strlen(api_key);
        /* Visible ASCII only: no CR/LF can split the header. */
        if (klen < 1 || klen > API_KEY_MAX ||
            !bytes_in(api_key, klen, 0x21, 0x7e))
            return OG_EINVAL;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_rc != CURLE_OK)
        return OG_ENOMEM;

    p = calloc(1, sizeof *p);
    if (!p)
        return OG_ENOMEM;
    memcpy(p->base_url, base_url, n + 1);
    while (n > 0 && p->base_url[n - 1] == '/')
        p->base_url[--n] = '\0';
    p->https = strncmp(p->base_url, "https://", 8) == 0;
    if (api_key) {
        static const char prefix[] = "Authorization: Bearer ";
        p->auth_len = sizeof prefix - 1 + klen + 1;
        p->auth_header = malloc(p->auth_len);
        if (!p->auth_header) {
            free(p);
            return OG_ENOMEM;
        }
        memcpy(p->auth_header, prefix, sizeof prefix - 1);
        memcpy(p->auth_header + sizeof prefix - 1, api_key, klen + 1);
    }
    p->t = t;
    *out = p;
    return 0;
}

int og_provider_open(const char *base_url, const char *api_key,
                     const og_provider_table *t, og_provider **out)
{
    return t ? open_client(base_url, api_key, t, out) : OG_EINVAL;
}

int og_provider_open_exchange(const char *base_url, const char *api_key,
                              og_provider **out)
{
    return open_client(base_url, api_key, NULL, out);
}

int og_provider_set_reuse(og_provider *p, int max_connections,
                          int64_t idle_us)
{
    if (!p || p->pool || max_connections < 0 ||
        max_connections > OG_PROVIDER_REUSE_CONNECTIONS_MAX ||
        (max_connections > 0 &&
         (idle_us < 1000000 || idle_us > OG_PROVIDER_REUSE_IDLE_MAX_US)))
        return OG_EINVAL;
    /* CL9: only where a re-send is one request to the provider. */
    if (max_connections == 0 || !p->t ||
        !og_provider_table_properties(p->t)->atomic_same_key)
        return 0;
    if (pthread_mutex_init(&p->pool_mu, NULL) != 0)
        return OG_ENOMEM;
    if (!(p->pool = calloc((size_t)max_connections, sizeof *p->pool))) {
        pthread_mutex_destroy(&p->pool_mu);
        return OG_ENOMEM;
    }
    p->n_idle = 0;
    p->max_connections = max_connections;
    p->idle_s = (long)(idle_us / 1000000);
    return 0;
}

/* CL9: an idle handle (its connection, if still open, comes with it),
 * reset to no options, or a new one; NULL when out of memory. */
static CURL *handle_take(og_provider *p)
{
    CURL *c = NULL;

    pthread_mutex_lock(&p->pool_mu);
    if (p->n_idle > 0)
        c = p->pool[--p->n_idle];
    pthread_mutex_unlock(&p->pool_mu);
    if (!c)
        return curl_easy_init();
    curl_easy_reset(c); /* the options go; the live connection stays */
    return c;
}

/* CL9: back to the pool, or freed (closing its connection) when the pool
 * is full. */
static void handle_give(og_provider *p, CURL *c)
{
    pthread_mutex_lock(&p->pool_mu);
    if (p->n_idle < p->max_connections) {
        p->pool[p->n_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&p->pool_mu);
    curl_easy_cleanup(c); /* NULL is a no-op */
}

bool og_provider_reuses(const og_provider *p)
{
    return p && p->pool;
}

void og_provider_free(og_provider *p)
{
    if (!p)
        return;
    if (p->pool) {
        /* Closes the kept connections; every call has returned. */
        for (int i = 0; i < p->n_idle; i++)
            curl_easy_cleanup(p->pool[i]);
        free(p->pool);
        pthread_mutex_destroy(&p->pool_mu);
    }
    if (p->auth_header) {
        sodium_memzero(p->auth_header, p->auth_len);
        free(p->auth_header);
    }
    free(p);
}

/* ===========================================================================
 * One exchange
 * ========================================================================= */
typedef struct http_exchange {
    unsigned begun;     /* requests libcurl began to send (CL2) */
    char *body;         /* OG_PROVIDER_BODY_MAX bytes */
    size_t body_len;
    bool over;          /* the body exceeded the cap (CL4) */
    char retry_after[RETRY_AFTER_MAX + 1];
    bool has_retry_after;
} http_exchange;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    http_exchange *x = ud;
    size_t n = size * nmemb;

    if (n > OG_PROVIDER_BODY_MAX - x->body_len) {
        x->over = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    memcpy(x->body + x->body_len, ptr, n);
    x->body_len += n;
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    static const char name[] = "Retry-After:";
    http_exchange *x = ud;
    size_t n = size * nmemb, i = sizeof name - 1, end;

    /* A status line starts a new response (after a 1xx): forget the last. */
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0)
        x->has_retry_after = false;
    if (n < i || strncasecmp(ptr, name, i) != 0)
        return n;
    while (i < n && (ptr[i] == ' ' || ptr[i] == '\t'))
        i++;
    end = n;
    while (end > i && (ptr[end - 1] == '\r' || ptr[end - 1] == '\n' ||
                       ptr[end - 1] == ' ' || ptr[end - 1] == '\t'))
        end--;
    /* A value over the cap is no delta-seconds we would honour: dropped. */
    if (end - i <= RETRY_AFTER_MAX && bytes_in(ptr + i, end - i, 0x20, 0x7e)) {
        memcpy(x->retry_after, ptr + i, end - i);
        x->retry_after[end - i] = '\0';
        x->has_retry_after = true;
    }
    return n;
}

/* libcurl is about to send a request, on a new or a reused connection
 * (CL2). */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip,
                     int conn_primary_port, int conn_local_port)
{
    http_exchange *x = ud;

    (void)conn_primary_ip;
    (void)conn_local_ip;
    (void)conn_primary_port;
    (void)conn_local_port;
    x->begun++;
    return CURL_PREREQFUNC_OK;
}

/* How the exchange ended (CL2). */
static og_provider_transport transport_of(const og_provider *p, CURL *c,
                                          CURLcode rc, const http_exchange *x)
{
    curl_off_t connect_us = 0, appconnect_us = 0;
    bool established;

    if (rc == CURLE_OK)
        return OG_TRANSPORT_OK;
    if (curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us) != CURLE_OK ||
        curl_easy_getinfo(c, CURLINFO_APPCONNECT_TIME_T, &appconnect_us) !=
            CURLE_OK)
        return OG_TRANSPORT_ERROR; /* cannot prove anything */
    /* libcurl records a completed phase as at least 1 us; 0 = never. A
     * request begun on any connection counts as established (CL2). */
    established = (p->https ? appconnect_us > 0 : connect_us > 0) ||
                  x->begun > 0;
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_OPERATION_TIMEDOUT:
        if (!established)
            return OG_TRANSPORT_CONNECT_FAILED;
        return rc == CURLE_OPERATION_TIMEDOUT ? OG_TRANSPORT_TIMEOUT
                                              : OG_TRANSPORT_ERROR;
    case CURLE_GOT_NOTHING:
        return OG_TRANSPORT_NO_RESPONSE;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
        return OG_TRANSPORT_RESET;
    case CURLE_FILESIZE_EXCEEDED:
        return OG_TRANSPORT_TOO_LARGE;
    case CURLE_WRITE_ERROR:
        return x->over ? OG_TRANSPORT_TOO_LARGE : OG_TRANSPORT_ERROR;
    default:
        return OG_TRANSPORT_ERROR;
    }
}

/* Sends one request to url (post_body NULL: GET; content_type its whole
 * "Content-Type: ..." header) with extra headers, and
 * fills *resp (pointing into *x). A negative return (OG_ENOMEM) means
 * nothing was sent (CL1); otherwise *resp describes what happened. */
static int exchange(og_provider *p, const char *url,
                    const char *post_body, const char *content_type,
                    const char *idempotency_key, int64_t timeout_us,
                    bool reuse, http_exchange *x, og_provider_response *resp)
{
    char key_header[32 + OG_PROVIDER_KEY_MAX];
    struct curl_slist *h = NULL, *h2;
    long timeout_ms, status = 0;
    CURL *c = NULL;
    CURLcode rc;
    int ret = OG_ENOMEM;

    memset(x, 0, sizeof *x);
    x->body = malloc(OG_PROVIDER_BODY_MAX);
    /* CL9: a pooled handle and its kept connection, or a fresh one. */
    reuse = reuse && p->pool;
    c = reuse ? handle_take(p) : curl_easy_init();
    if (!x->body || !c)
        goto out;

#define ADD_HEADER(text)                                                       \
    do {                                                                       \
        if (!(h2 = curl_slist_append(h, (text))))                              \
            goto out;                                                          \
        h = h2;                                                                \
    } while (0)
    ADD_HEADER("Accept: application/json");
    ADD_HEADER("Expect:"); /* no 100-continue round trip */
    if (post_body)
        ADD_HEADER(content_type);
    if (idempotency_key) {
        snprintf(key_header, sizeof key_header, "Idempotency-Key: %s",
                 idempotency_key);
        ADD_HEADER(key_header);
    }
    if (p->auth_header)
        ADD_HEADER(p->auth_header);
#undef ADD_HEADER

    timeout_ms = (long)((timeout_us + 999) / 1000);
    /* Any setopt failing means nothing was sent: OG_ENOMEM (libcurl fails
     * these only for memory, or for options this libcurl lacks). */
    if (curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms) !=
            CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, on_prereq) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_PREREQDATA, x) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                         (curl_off_t)OG_PROVIDER_BODY_MAX) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_USERAGENT, "oncegate/" OG_VERSION) !=
            CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_WRITEDATA, x) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HEADERDATA, x) != CURLE_OK)
        goto out;
    /* CL9: one kept connection per handle, or a fresh one closed after
     * the call. */
    if (reuse ? curl_easy_setopt(c, CURLOPT_MAXCONNECTS, 1L) != CURLE_OK ||
                    curl_easy_setopt(c, CURLOPT_MAXAGE_CONN, p->idle_s) !=
                        CURLE_OK
              : curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
                    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK)
        goto out;
    if (post_body) {
        if (curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_body) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)strlen(post_body)) != CURLE_OK)
            goto out;
    } else if (curl_easy_setopt(c, CURLOPT_HTTPGET, 1L) != CURLE_OK) {
        goto out;
    }

    /* From here on something may have been sent (CL1). */
    rc = curl_easy_perform(c);
    memset(resp, 0, sizeof *resp);
    resp->transport = transport_of(p, c, rc, x);
    if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
        status >= 0 && status <= 999)
        resp->status = (int)status;
    resp->body = x->body;
    resp->body_len = x->body_len;
    resp->retry_after = x->has_retry_after ? x->retry_after : NULL;
    ret = 0;
out:
    if (reuse && c)
        handle_give(p, c);
    else
        curl_easy_cleanup(c);
    /* The list holds a copy of the Authorization header (CL5). */
    for (h2 = h; h2; h2 = h2->next)
        sodium_memzero(h2->data, strlen(h2->data));
    curl_slist_free_all(h);
    if (ret < 0) {
        free(x->body);
        x->body = NULL;
    }
    return ret;
}

/* ===========================================================================
 * The calls
 * ========================================================================= */

/* 1..OG_PROVIDER_KEY_MAX visible ASCII: the header cannot be split. */
static bool key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    return n >= 1 && n <= OG_PROVIDER_KEY_MAX && bytes_in(key, n, 0x21, 0x7e);
}

static bool timeout_valid(int64_t timeout_us)
{
    return timeout_us > 0 && timeout_us <= TIMEOUT_MAX_US;
}

/* What a provider API's calls differ in (CL8). */
typedef struct api_resource {
    const char *path;    /* create (POST) and lookup (GET) */
    const char *target;  /* the body member naming where money goes */
    int target_err;      /* the error for a bad target */
    bool secret;         /* the target is a secret */
} api_resource;

static const api_resource credits_api = {"/v1/credits", "account",
                                         OG_EACCOUNT, false};
static const api_resource payouts_api = {"/v1/payouts", "destination",
                                         OG_EDESTINATION, true};

/* Frees x's body, wiped first when it may hold a secret (CL8). */
static void exchange_free(http_exchange *x, bool secret)
{
    if (x->body && secret)
        sodium_memzero(x->body, x->body_len);
    free(x->body);
    x->body = NULL;
}

/* POST res->path: the one create request (CL8). */
static int create_effect(og_provider *p, const api_resource *res,
                         const char *idempotency_key, const char *target,
                         const char *amount, const char *currency,
                         const char *reference, int64_t expires_at_us,
                         int64_t timeout_us, og_provider_outcome *out)
{
    char canon[OG_AMOUNT_MAX + 1], expires[40], url[URL_MAX + 32];
    og_provider_response resp;
    http_exchange x = {0};
    json_t *body = NULL;
    char *text = NULL;
    int rc;

    if (!p || !p->t || !out || !key_valid(idempotency_key) ||
        !og_id_valid(reference) || !timeout_valid(timeout_us))
        return OG_EINVAL;
    if (!target || !og_id_valid(target))
        return res->target_err;
    if (!amount || og_amount_canonical(amount, canon, sizeof canon) != 0)
        return OG_EAMOUNT;
    if (!currency || strlen(currency) != 3 || !bytes_in(currency, 3, 'A', 'Z'))
        return OG_ECURRENCY;
    if (expires_at_us < 0 || expires_at_us > OG__TIME_MAX_US)
        return OG_EEXPIRES_AT;
    og_time_format_rfc3339(expires_at_us, expires, sizeof expires);
    snprintf(url, sizeof url, "%s%s", p->base_url, res->path);

    body = json_pack("{s:s, s:s, s:s, s:s, s:s}", res->target, target,
                     "amount", canon, "currency", currency, "reference",
                     reference, "expires_at", expires);
    text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (!text) {
        rc = OG_ENOMEM;
        goto out;
    }
    if ((rc = exchange(p, url, text, "Content-Type: application/json",
                       idempotency_key, timeout_us, true, &x, &resp)) < 0)
        goto out;
    og_provider_classify(p->t, &resp, out);
out:
    exchange_free(&x, res->secret);
    if (text && res->secret)
        sodium_memzero(text, strlen(text));
    free(text);
    json_decref(body);
    return rc;
}

/* GET res->path?reference=R, classified with terms (CL8). */
static int lookup_effect(og_provider *p, const api_resource *res,
                         const char *reference, const og_provider_term *terms,
                         size_t n_terms, int64_t timeout_us,
                         og_provider_outcome *out)
{
    char url[URL_MAX + 32 + 3 * OG_ID_MAX];
    og_provider_response resp;
    http_exchange x = {0};
    char *esc = NULL;
    CURL *c = NULL;
    int rc;

    if (!p || !p->t || !out || !og_id_valid(reference) ||
        !timeout_valid(timeout_us) ||
        !(og_provider_table_properties(p->t)->lookup &
          OG_PROVIDER_LOOKUP_REFERENCE))
        return OG_EINVAL;
    /* curl_easy_escape wants a handle only for historical reasons. */
    c = curl_easy_init();
    esc = c ? curl_easy_escape(c, reference, 0) : NULL;
    curl_easy_cleanup(c);
    if (!esc)
        return OG_ENOMEM;
    snprintf(url, sizeof url, "%s%s?reference=%s", p->base_url, res->path,
             esc);
    curl_free(esc);

    if ((rc = exchange(p, url, NULL, NULL, NULL, timeout_us, true, &x, &resp)) < 0)
        goto out;
    rc = og_provider_classify_lookup_terms(p->t, &resp, reference, terms,
                                           n_terms, out);
out:
    exchange_free(&x, res->secret);
    return rc;
}

int og_provider_create_credit(og_provider *p, const char *idempotency_key,
                              const char *account, const char *amount,
                              const char *currency, const char *reference,
                              int64_t expires_at_us, int64_t timeout_us,
                              og_provider_outcome *out)
{
    return create_effect(p, &credits_api, idempotency_key, account, amount,
                         currency, reference, expires_at_us, timeout_us, out);
}

int og_provider_lookup(og_provider *p, const char *reference,
                       int64_t timeout_us, og_provider_outcome *out)
{
    return lookup_effect(p, &credits_api, reference, NULL, 0, timeout_us,
                         out);
}

int og_provider_create_payout(og_provider *p, const char *idempotency_key,
                              const char *destination, const char *amount,
                              const char *currency, const char *reference,
                              int64_t expires_at_us, int64_t timeout_us,
                              og_provider_outcome *out)
{
    return create_effect(p, &payouts_api, idempotency_key, destination,
                         amount, currency, reference, expires_at_us,
                         timeout_us, out);
}

int og_provider_lookup_payout(og_provider *p, const char *reference,
                              const char *destination, const char *amount,
                              const char *currency, int64_t timeout_us,
                              og_provider_outcome *out)
{
    char canon[OG_AMOUNT_MAX + 1];
    const og_provider_term terms[] = {
        {payouts_api.target, destination},
        {"amount", canon},
        {"currency", currency},
    };

    if (!destination || !og_id_valid(destination))
        return OG_EDESTINATION;
    if (!amount || og_amount_canonical(amount, canon, sizeof canon) != 0)
        return OG_EAMOUNT;
    if (!currency || strlen(currency) != 3 || !bytes_in(currency, 3, 'A', 'Z'))
        return OG_ECURRENCY;
    return lookup_effect(p, &payouts_api, reference, terms,
                         sizeof terms / sizeof terms[0], timeout_us, out);
}

/* 1..OG_PROVIDER_CODE_MAX bytes of VSCHAR (RFC 6749 A.11: 0x20-0x7e). */
static bool code_valid(const char *code)
{
    size_t n = code ? strnlen(code, OG_PROVIDER_CODE_MAX + 1) : 0;

    return n >= 1 && n <= OG_PROVIDER_CODE_MAX && bytes_in(code, n, 0x20, 0x7e);
}

int og_provider_exchange_code(og_provider *p, const char *code,
                              int64_t timeout_us, og_exchange_outcome *out)
{
    static const char prefix[] = "grant_type=authorization_code&code=";
    char url[URL_MAX + 32];
    og_provider_response resp;
    http_exchange x = {0};
    char *esc = NULL, *form = NULL;
    size_t n = 0;
    CURL *c;
    int rc;

    if (!p || !out || !timeout_valid(timeout_us))
        return OG_EINVAL;
    if (!code_valid(code))
        return OG_ECODE;
    /* curl_easy_escape keeps only RFC 3986's unreserved characters. */
    c = curl_easy_init();
    esc = c ? curl_easy_escape(c, code, 0) : NULL;
    curl_easy_cleanup(c);
    if (esc && (form = malloc(sizeof prefix + strlen(esc))))
        n = (size_t)snprintf(form, sizeof prefix + strlen(esc), "%s%s", prefix,
                             esc);
    if (esc) {
        sodium_memzero(esc, strlen(esc));
        curl_free(esc);
    }
    if (!form)
        return OG_ENOMEM;
    snprintf(url, sizeof url, "%s/oauth/token", p->base_url);
    rc = exchange(p, url, form,
                  "Content-Type: application/x-www-form-urlencoded", NULL,
                  timeout_us, false, &x, &resp); /* CL7, CL9 */
    if (rc == 0)
        og_exchange_classify(&resp, out);
    /* The form holds the code, the body the token response (CL5). */
    sodium_memzero(form, n);
    free(form);
    if (x.body) {
        sodium_memzero(x.body, x.body_len);
        free(x.body);
    }
    return rc;
}
