/*
 * http.c — serve_test's client side: HTTP exchanges with a server (every
 * answer's shape checked for the final test), with the sandbox, grants,
 * admissions, tickets, the tokens a test signs itself, and races of many
 * clients at once. See harness.h.
 */
#include "harness.h"

/* ===========================================================================
 * HTTP
 * ========================================================================= */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static size_t buf_write(char *data, size_t size, size_t nmemb, void *ud)
{
    buf *b = ud;
    size_t n = size * nmemb;

    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *p;
        while (cap < b->n + n + 1)
            cap *= 2;
        if (cap > ((size_t)64 << 20) || !(p = realloc(b->p, cap)))
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

typedef struct upload {
    const char *p;
    size_t left;
} upload;

static size_t upload_read(char *dst, size_t size, size_t nmemb, void *ud)
{
    upload *u = ud;
    size_t n = size * nmemb;

    if (n > 1000) /* several chunks */
        n = 1000;
    if (n > u->left)
        n = u->left;
    memcpy(dst, u->p, n);
    u->p += n;
    u->left -= n;
    return n;
}

/* Every answer must carry X-Request-Id and every error body an error code
 * and a message (docs/http.md, "Requests and errors"; the verdict bodies
 * of consume, revoke and readyz have their own documented shapes);
 * violations are collected here and checked by one test at the end. */
static pthread_mutex_t g_shape_mu = PTHREAD_MUTEX_INITIALIZER;
char g_shape_bad[8192];
unsigned g_shape_checked;

static void check_shape(const hreq *q, const hres *r)
{
    char rid[256], why[256] = "";

    if (r->status == 0)
        return;
    if (!hdr_value(r, "X-Request-Id", rid, sizeof rid) || !rid[0])
        snprintf(why, sizeof why, "no X-Request-Id");
    else if (r->status >= 400 &&
             (!json_is_object(r->json) || !jstr(r->json, "error") ||
              (!jstr(r->json, "message") &&
               /* openapi.json gives verdicts their own shapes, where message
                * is optional: ConsumeDenied, RevokeRefused, NotReady. */
               !json_is_false(json_object_get(r->json, "consumed")) &&
               !json_is_false(json_object_get(r->json, "revoked")) &&
               !json_is_false(json_object_get(r->json, "ready")))))
        snprintf(why, sizeof why, "error body without error and message");
    pthread_mutex_lock(&g_shape_mu);
    g_shape_checked++;
    if (why[0]) {
        size_t n = strlen(g_shape_bad);
        snprintf(g_shape_bad + n, sizeof g_shape_bad - n,
                 "  %s %s -> %ld: %s: %.120s\n", q->method, q->path, r->status,
                 why, r->body ? r->body : "");
    }
    pthread_mutex_unlock(&g_shape_mu);
}

void hres_free(hres *r)
{
    free(r->body);
    free(r->hdr);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

void http_do(const hreq *q, hres *r)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hl = NULL;
    char url[8192], line[8192];
    buf body = {0}, hdr = {0};
    upload up = {q->body, q->body_len};

    memset(r, 0, sizeof *r);
    if (!c)
        abort();
    snprintf(url, sizeof url, "%s%s", q->base, q->path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HTTP_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hdr);
    hl = curl_slist_append(hl, "Expect:");
    if (q->auth) {
        snprintf(line, sizeof line, "Authorization: %s", q->auth);
        hl = curl_slist_append(hl, line);
    } else if (q->key) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", q->key);
        hl = curl_slist_append(hl, line);
    }
    if (q->ctype) {
        snprintf(line, sizeof line, "Content-Type: %s", q->ctype);
        hl = curl_slist_append(hl, line);
    } else {
        hl = curl_slist_append(hl, "Content-Type:"); /* none at all */
    }
    if (q->request_id) {
        snprintf(line, sizeof line, "X-Request-Id: %s", q->request_id);
        hl = curl_slist_append(hl, line);
    }
    if (strcmp(q->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(q->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        if (q->chunked) {
            hl = curl_slist_append(hl, "Transfer-Encoding: chunked");
            curl_easy_setopt(c, CURLOPT_READFUNCTION, upload_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &up);
        } else {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body ? q->body : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)(q->body ? q->body_len : 0));
        }
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
        if (q->body) {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)q->body_len);
        }
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    r->cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    r->body = body.p;
    r->len = body.n;
    r->hdr = hdr.p;
    r->hlen = hdr.n;
    if (r->body && r->len)
        r->json = json_loadb(r->body, r->len, 0, NULL);
    check_shape(q, r);
}

bool hdr_value(const hres *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    bool found = false;

    for (const char *p = r->hdr; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            size_t vl = len - nl - 1;
            while (vl && (*v == ' ' || *v == '\t'))
                v++, vl--;
            while (vl && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            snprintf(out, n, "%.*s", (int)vl, v);
            found = true;
        }
        p = eol ? eol + 1 : p + len;
    }
    return found;
}

void dump(const char *what, const hres *r, int line)
{
    fprintf(stderr, "line %d: %s: HTTP %ld (curl %d: %s)\n  body: %.*s\n", line,
            what, r->status, (int)r->cc, curl_easy_strerror(r->cc),
            (int)(r->len > 2000 ? 2000 : r->len), r->body ? r->body : "");
}

void req(hres *r, const char *method, const srv *s, const char *path,
         const char *key, const char *ctype, const char *body)
{
    hreq q = {method, s->base, path, key, NULL, ctype, body,
              body ? strlen(body) : 0, false, NULL};
    http_do(&q, r);
}

void post(hres *r, const srv *s, const char *path, const char *key,
          json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");

    json_decref(body);
    if (!text)
        abort();
    req(r, "POST", s, path, key, "application/json", text);
    free(text);
}

void get(hres *r, const srv *s, const char *path, const char *key)
{
    req(r, "GET", s, path, key, NULL, NULL);
}

void sbx_http(hres *r, const srv *x, const char *method,
              const char *path, const char *key, const char *body)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hl = NULL;
    char url[1024], line[512];
    buf b = {0}, h = {0};

    memset(r, 0, sizeof *r);
    if (!c)
        abort();
    snprintf(url, sizeof url, "%s%s", x->base, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HTTP_MS);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    hl = curl_slist_append(hl, "Expect:");
    if (key) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", key);
        hl = curl_slist_append(hl, line);
    }
    if (body) {
        hl = curl_slist_append(hl, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    r->cc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    r->body = b.p;
    r->len = b.n;
    r->hdr = h.p;
    r->hlen = h.n;
    if (r->body && r->len)
        r->json = json_loadb(r->body, r->len, 0, NULL);
}

void assert_retry_later(const hres *r, int line)
{
    char ra[64];

    if (r->status != 503 || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), "retry_later") != 0) {
        dump("while the store is down", r, line);
        fail_msg("line %d: expected 503 retry_later", line);
    }
    if (!hdr_value(r, "Retry-After", ra, sizeof ra))
        fail_msg("line %d: 503 without Retry-After", line);
    assert_int_equal(atoi(ra), RETRY_AFTER);
}

int post_patient(hres *r, const srv *s, const char *path,
                 const char *key, json_t *body)
{
    int64_t deadline = t_now_ms() + 20000;
    int n = 0;

    for (;;) {
        post(r, s, path, key, json_incref(body));
        if (r->status != 503 || t_now_ms() > deadline)
            break;
        assert_retry_later(r, __LINE__);
        hres_free(r);
        n++;
        t_sleep_ms(250);
    }
    json_decref(body);
    return n;
}

double metric_value(const char *text, const char *series)
{
    size_t sl = strlen(series);

    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        if (strncmp(p, series, sl) == 0 && p[sl] == ' ')
            return strtod(p + sl + 1, NULL);
        p = eol ? eol + 1 : NULL;
    }
    return -1;
}

json_int_t jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);

    if (!json_is_integer(v))
        fail_msg("%s is not an integer", k);
    return json_integer_value(v);
}

/* ===========================================================================
 * Grants, admissions, tickets
 * ========================================================================= */

json_t *grant_request(const char *subject, const char *family, int ttl)
{
    json_t *b = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:i}", "subject",
                          subject, "action", ACTION, "params", "account",
                          ACCOUNT, "amount", AMOUNT, "currency", CURRENCY,
                          "ttl_seconds", ttl);
    if (family)
        json_object_set_new(b, "family", json_string(family));
    return b;
}

void issue_grant_ex(const srv *s, grant *g, const char *subject,
                    const char *family)
{
    hres r;

    memset(g, 0, sizeof *g);
    /* Issuance is not what these tests are about: a 503 (a loaded machine,
     * the outage test's short store timeout) is retried. */
    for (int64_t deadline = t_now_ms() + 30000;;) {
        post(&r, s, "/v1/grants", KEY(P_ISSUER),
             grant_request(subject, family, 900));
        if (r.status != 503 || t_now_ms() > deadline)
            break;
        fprintf(stderr, "note: POST /v1/grants answered 503; retrying\n");
        hres_free(&r);
        t_sleep_ms(200);
    }
    assert_http(&r, 201);
    assert_non_null(jstr(r.json, "token"));
    assert_non_null(jstr(r.json, "grant_id"));
    snprintf(g->token, sizeof g->token, "%s", jstr(r.json, "token"));
    snprintf(g->grant_id, sizeof g->grant_id, "%s", jstr(r.json, "grant_id"));
    if (jstr(r.json, "family"))
        snprintf(g->family, sizeof g->family, "%s", jstr(r.json, "family"));
    if (jstr(r.json, "expires_at"))
        snprintf(g->expires_at, sizeof g->expires_at, "%s",
                 jstr(r.json, "expires_at"));
    secret_add_token(g->token);
    hres_free(&r);
}

void issue_grant(const srv *s, grant *g)
{
    issue_grant_ex(s, g, "agent-1", NULL);
}

json_t *admit_body(const char *op, const char *token)
{
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s}}", "operation_id", op,
                     "token", token, "action", ACTION, "params", "account",
                     ACCOUNT, "amount", AMOUNT, "currency", CURRENCY);
}

void admit(hres *r, const srv *s, const char *key, const char *op,
           const char *token)
{
    post(r, s, "/v1/operations", key, admit_body(op, token));
}

void admit_rid(hres *r, const srv *s, const char *op, const char *token,
               const char *rid)
{
    json_t *b = admit_body(op, token);
    char *text = json_dumps(b, JSON_COMPACT);
    hreq q = {"POST", s->base, "/v1/operations", KEY(P_AGENT), NULL,
              "application/json", text, strlen(text), false, rid};

    http_do(&q, r);
    free(text);
    json_decref(b);
}

void assert_admits(const srv *s, const char *op, const char *token)
{
    hres r;

    admit(&r, s, KEY(P_AGENT), op, token);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "status"), "admitted");
    assert_str(jstr(r.json, "outcome"), "admitted");
    hres_free(&r);
}

void assert_refused(const srv *s, const char *token)
{
    hres r;
    char op[OG_UUID_LEN + 1];

    uuid4(op);
    admit(&r, s, KEY(P_AGENT), op, token);
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
}

void consume(hres *r, const srv *s, const char *token)
{
    post(r, s, "/v1/grants/consume", KEY(P_ENFORCER),
         json_pack("{s:s}", "token", token));
}

void ticket_new(const srv *s, ticket *t)
{
    hres r;

    post(&r, s, "/v1/tickets", KEY(P_ISSUER), NULL);
    assert_http(&r, 201);
    assert_non_null(jstr(r.json, "ticket"));
    assert_non_null(jstr(r.json, "family"));
    snprintf(t->ticket, sizeof t->ticket, "%s", jstr(r.json, "ticket"));
    snprintf(t->family, sizeof t->family, "%s", jstr(r.json, "family"));
    assert_true(strncmp(t->family, "fam-", 4) == 0); /* a new family */
    secret_add(t->ticket);
    hres_free(&r);
}

void rotate(hres *r, const srv *s, const char *tk)
{
    post(r, s, "/v1/tickets/rotate", KEY(P_AGENT),
         json_pack("{s:s}", "ticket", tk));
    if (r->status == 200 && jstr(r->json, "ticket"))
        secret_add(jstr(r->json, "ticket"));
}

/* ---------------------------------------------------------------------------
 * Tokens the test makes itself.
 * ------------------------------------------------------------------------- */

void claims_default(og_grant_claims *c, char jti[OG_GRANT_ID_LEN + 1])
{
    if (og_grant_new_id(jti) != 0)
        abort();
    memset(c, 0, sizeof *c);
    c->iss = ISSUER;
    c->jti = jti;
    c->iat = (int64_t)time(NULL);
    c->exp = c->iat + 900;
    c->sub = "agent-1";
    c->aud = AUDIENCE;
    c->act = ACTION;
    c->prm = (og_grant_params){ACCOUNT, AMOUNT, CURRENCY};
}

char *sign(const og_grant_claims *c)
{
    char *tok = NULL;

    if (og_grant_token_sign(g_signer, c, &tok) != 0)
        abort();
    secret_add_token(tok);
    return tok;
}

void b64url(const void *bin, size_t n, char *out, size_t outcap)
{
    sodium_bin2base64(out, outcap, bin, n,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

void jws_split(const char *tok, char *h, char *p, char *s)
{
    const char *d1 = strchr(tok, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;

    assert_non_null(d2);
    snprintf(h, OG_TOKEN_MAX + 1, "%.*s", (int)(d1 - tok), tok);
    snprintf(p, OG_TOKEN_MAX + 1, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
    snprintf(s, OG_TOKEN_MAX + 1, "%s", d2 + 1);
}

json_t *b64url_json(const char *seg)
{
    unsigned char bin[OG_TOKEN_MAX];
    size_t n = 0;

    if (sodium_base642bin(bin, sizeof bin, seg, strlen(seg), NULL, &n, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0)
        return NULL;
    return json_loadb((const char *)bin, n, 0, NULL);
}

void json_b64url(const json_t *j, char *out, size_t outcap)
{
    char *text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);

    if (!text)
        abort();
    b64url(text, strlen(text), out, outcap);
    free(text);
}

void expect_not_valid_on(const srv *s, const char *tok, const char *op,
                         const char *key, const char *reason, int line)
{
    hres r;

    admit(&r, s, key, op, tok);
    if (r.status != 403 || !jstr(r.json, "error") ||
        strcmp(jstr(r.json, "error"), "grant_not_valid") != 0 ||
        !jstr(r.json, "reason") || strcmp(jstr(r.json, "reason"), reason) != 0) {
        dump("grant_not_valid", &r, line);
        fail_msg("line %d: expected 403 grant_not_valid %s", line, reason);
    }
    hres_free(&r);
}

/* ---------------------------------------------------------------------------
 * Races: many clients at once.
 * ------------------------------------------------------------------------- */

static void *racer_main(void *arg)
{
    racer *me = arg;
    hreq q = {"POST", me->base, me->path, me->key, NULL, "application/json",
              me->body, strlen(me->body), false, NULL};

    pthread_barrier_wait(me->start);
    http_do(&q, &me->r);
    return NULL;
}

void race(racer *rs, int n, const srv *a, const srv *b,
          const char *path, const char *key,
          char *(*body_for)(racer *, const void *), const void *arg)
{
    pthread_barrier_t start;
    pthread_t th[RACERS];

    assert_true(n >= 1 && n <= RACERS);
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        rs[i].start = &start;
        rs[i].base = (i % 2 ? b : a)->base;
        rs[i].path = path;
        rs[i].key = key;
        uuid4(rs[i].op);
        rs[i].body = body_for(&rs[i], arg);
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
}

void race_free(racer *rs, int n)
{
    for (int i = 0; i < n; i++) {
        free(rs[i].body);
        hres_free(&rs[i].r);
    }
}

void race_report(const char *what, int round, racer *rs, int n)
{
    fprintf(stderr, "%s round %d:\n", what, round);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  racer %2d (%s): HTTP %ld curl %d %.*s\n", i,
                rs[i].base, rs[i].r.status, (int)rs[i].r.cc,
                (int)(rs[i].r.len > 200 ? 200 : rs[i].r.len),
                rs[i].r.body ? rs[i].r.body : "");
}
