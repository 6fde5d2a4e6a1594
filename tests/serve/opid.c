/*
 * opid.c — server-issued operation ids over real HTTP (docs/design.md,
 * "Server-issued operation ids"; docs/http.md, "POST /v1/grants" and
 * "POST /v1/operations"):
 *   - every issued grant carries a fresh operation id, and its MAC when
 *     operation_ids.mac_key_file is set;
 *   - with operation_ids.require_mac, admission takes the issued id with
 *     its MAC (and its retry), and refuses it without the MAC, with a
 *     tampered MAC, and with the MAC under another operation id or grant —
 *     before the store, so the grant stays available;
 *   - without require_mac, an id without a MAC is admitted and a wrong MAC
 *     is still refused;
 *   - an instance without a key refuses a MAC it cannot verify;
 *   - require_mac without a key file, or a key file others can read, refuse
 *     to start.
 * The MACs and the key are registered as secrets: the suite's final log
 * scan proves neither reached a log line.
 */
#include "harness.h"
#include "cases.h"

/* A site with the operation-id MAC key (and require_mac as given); its
 * key file's path into key_path. Not started. */
static site *opid_site(const char *name, bool require, char *key_path)
{
    unsigned char k[32];
    char hex[65];
    site *st = site_new(name, false, 0, true);

    assert_non_null(st);
    if (snprintf(key_path, PATHLEN, "%s/opid.key", st->dir) >= PATHLEN)
        fail_msg("path too long");
    randombytes_buf(k, sizeof k);
    sodium_bin2hex(hex, sizeof hex, k, sizeof k);
    secret_add(hex);
    assert_int_equal(write_file(key_path, hex), 0);
    assert_int_equal(chmod(key_path, 0600), 0);
    sodium_memzero(k, sizeof k);
    json_object_set_new(st->conf, "operation_ids",
                        json_pack("{s:s, s:b}", "mac_key_file", key_path,
                                  "require_mac", require));
    assert_int_equal(site_write(st), 0);
    return st;
}

/* A grant issued on s with its operation id and MAC ("" when the answer's
 * operation_mac is null: no key). */
typedef struct opgrant {
    char token[OG_TOKEN_MAX + 1];
    char grant_id[OG_ID_MAX + 1];
    char op[OG_UUID_LEN + 1];
    char mac[OG_OPID_MAC_LEN + 1];
} opgrant;

static void issue_opgrant(const srv *s, opgrant *g)
{
    char canon[OG_UUID_LEN + 1];
    const char *mac;
    hres r;

    memset(g, 0, sizeof *g);
    post(&r, s, "/v1/grants", KEY(P_ISSUER), grant_request("agent-1", NULL, 900));
    assert_http(&r, 201);
    secret_add_token(jstr(r.json, "token"));
    snprintf(g->token, sizeof g->token, "%s", jstr(r.json, "token"));
    snprintf(g->grant_id, sizeof g->grant_id, "%s", jstr(r.json, "grant_id"));
    assert_non_null(jstr(r.json, "operation_id"));
    snprintf(g->op, sizeof g->op, "%s", jstr(r.json, "operation_id"));
    /* A canonical (lower-case, non-nil) UUID. */
    assert_int_equal(og_operation_id_canonical(g->op, canon), 0);
    assert_str(canon, g->op);
    if ((mac = jstr(r.json, "operation_mac")) != NULL) {
        assert_int_equal(strlen(mac), OG_OPID_MAC_LEN);
        snprintf(g->mac, sizeof g->mac, "%s", mac);
        secret_add(g->mac);
    } else {
        assert_true(json_is_null(json_object_get(r.json, "operation_mac")));
    }
    hres_free(&r);
}

/* POST /v1/operations as the agent with op, the grant's token and mac
 * (NULL: no operation_mac member). */
static void admit_mac(hres *r, const srv *s, const char *op, const char *token,
                      const char *mac)
{
    json_t *b = admit_body(op, token);

    if (mac)
        json_object_set_new(b, "operation_mac", json_string(mac));
    post(r, s, "/v1/operations", KEY(P_AGENT), b);
}

static void expect_admit(const srv *s, const char *op, const char *token,
                         const char *mac, const char *outcome)
{
    hres r;

    admit_mac(&r, s, op, token, mac);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "operation_id"), op);
    assert_str(jstr(r.json, "outcome"), outcome);
    hres_free(&r);
}

static void expect_refusal(const srv *s, const char *op, const char *token,
                           const char *mac, int status, const char *code)
{
    hres r;

    admit_mac(&r, s, op, token, mac);
    assert_error(&r, status, code);
    hres_free(&r);
}

/* The MAC with its first character changed: still 43 characters of the
 * alphabet, no longer the issued MAC. */
static void tamper(const char *mac, char out[OG_OPID_MAC_LEN + 1])
{
    snprintf(out, OG_OPID_MAC_LEN + 1, "%s", mac);
    out[0] = out[0] == 'A' ? 'B' : 'A';
}

void operation_mac_required_admits_the_issued_id_and_refuses_it_without_or_with_a_wrong_mac(
    void **state)
{
    char key_path[PATHLEN], bad[OG_OPID_MAC_LEN + 1], other[OG_UUID_LEN + 1];
    site *st = opid_site("opid-required", true, key_path);
    srv *a = site_server(st), *b = site_server(st);
    opgrant g, h;
    json_t *ev;

    (void)state;
    assert_int_equal(srv_start(a), 0);
    assert_int_equal(srv_start(b), 0);
    issue_opgrant(a, &g);
    issue_opgrant(a, &h);
    assert_true(g.mac[0] && h.mac[0]);
    assert_true(strcmp(g.op, h.op) != 0); /* fresh per grant */

    /* Refused before the store: none of these spends the grant. */
    expect_refusal(b, g.op, g.token, NULL, 403, "operation_mac_required");
    tamper(g.mac, bad);
    expect_refusal(b, g.op, g.token, bad, 403, "operation_mac_invalid");
    expect_refusal(b, g.op, g.token, "short", 403, "operation_mac_invalid");
    /* The MAC binds the operation id... */
    uuid4(other);
    expect_refusal(b, other, g.token, g.mac, 403, "operation_mac_invalid");
    /* ... and the grant: h's id and MAC do not admit g. */
    expect_refusal(b, h.op, g.token, h.mac, 403, "operation_mac_invalid");

    /* The log says why, never the MAC (the final scan checks every line). */
    ev = log_request_find(b, "operation_mac", "invalid", NULL, 5000);
    assert_non_null(ev);
    assert_str(jstr(ev, "grant_id"), g.grant_id);
    json_decref(ev);

    /* The issued id with its MAC, on another instance than the issuer;
     * its retry with the same MAC is the same operation. */
    expect_admit(b, g.op, g.token, g.mac, "admitted");
    expect_admit(a, g.op, g.token, g.mac, "already_admitted");
    /* A retry without the MAC is refused like a first request. */
    expect_refusal(a, g.op, g.token, NULL, 403, "operation_mac_required");
    expect_admit(a, h.op, h.token, h.mac, "admitted");
}

void operation_mac_not_required_admits_without_one_and_still_refuses_a_wrong_one(
    void **state)
{
    char key_path[PATHLEN], bad[OG_OPID_MAC_LEN + 1], own[OG_UUID_LEN + 1];
    site *st = opid_site("opid-optional", false, key_path);
    srv *a = site_server(st);
    opgrant g, h, k;

    (void)state;
    assert_int_equal(srv_start(a), 0);
    issue_opgrant(a, &g);
    issue_opgrant(a, &h);
    issue_opgrant(a, &k);
    assert_true(g.mac[0]);
    /* Without a MAC, with the issued id or the caller's own. */
    expect_admit(a, g.op, g.token, NULL, "admitted");
    uuid4(own);
    expect_admit(a, own, h.token, NULL, "admitted");
    /* A MAC that is sent is verified. */
    tamper(k.mac, bad);
    expect_refusal(a, k.op, k.token, bad, 403, "operation_mac_invalid");
    expect_admit(a, k.op, k.token, k.mac, "admitted");
}

void without_a_mac_key_grants_carry_an_operation_id_and_a_mac_is_unverifiable(
    void **state)
{
    opgrant g, h;

    (void)state;
    issue_opgrant(g_a, &g);
    assert_string_equal(g.mac, "");
    expect_admit(g_b, g.op, g.token, NULL, "admitted");
    issue_opgrant(g_a, &h);
    expect_refusal(g_b, h.op, h.token,
                   "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 422,
                   "operation_mac_unverifiable");
    expect_admit(g_b, h.op, h.token, NULL, "admitted");
}

void operation_mac_required_without_a_key_or_with_an_open_key_file_refuses_to_start(
    void **state)
{
    char key_path[PATHLEN], *log = NULL;
    site *st = opid_site("opid-refused", true, key_path);
    int code;

    (void)state;
    assert_int_equal(chmod(key_path, 0644), 0);
    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "operation_ids.mac_key_file"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(strstr(log, "operation_ids.mac_key_file"));
    free(log);
    log = NULL;

    json_object_set_new(st->conf, "operation_ids",
                        json_pack("{s:b}", "require_mac", 1));
    assert_int_equal(site_write(st), 0);
    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "operation_ids.require_mac"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(strstr(log, "operation_ids.require_mac"));
    free(log);
}
