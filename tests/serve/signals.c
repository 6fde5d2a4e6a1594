/*
 * signals.c — SIGHUP reloads principals and verification keys without a
 * restart (and a failed reload keeps the old ones); SIGTERM and SIGINT
 * drain: requests in flight complete and the server exits 0.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Signals
 * ========================================================================= */
void sighup_after_adding_a_principal_accepts_its_key_without_restart(
    void **state)
{
    site *st = site_new("sighup", false, 0, true);
    char key[API_KEY_LEN], hash[65], op[OG_UUID_LEN + 1], path[128];
    int64_t deadline;
    pid_t pid;
    srv *s;
    grant g;
    hres r;

    assert_non_null(st);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    pid = s->pid;
    api_key_new(key);
    secret_add(key);
    sha256_hex(key, hash);
    uuid4(op);
    snprintf(path, sizeof path, "/v1/operations/%s", op);

    get(&r, s, path, key);
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);

    json_array_append_new(json_object_get(st->conf, "principals"),
                          json_pack("{s:s, s:[s], s:s}", "id", "agent-hup",
                                    "roles", "agent", "api_key_sha256", hash));
    assert_int_equal(site_write(st), 0);
    assert_int_equal(kill(s->pid, SIGHUP), 0);

    deadline = t_now_ms() + 15000;
    for (;;) {
        get(&r, s, path, key);
        if (r.status != 401 || t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(100);
    }
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    /* The new principal works end to end, the old ones still do, and it is
     * the same process. */
    issue_grant_ex(s, &g, "agent-hup", NULL);
    admit(&r, s, key, op, g.token);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "admitted");
    hres_free(&r);
    get(&r, s, path, KEY(P_AGENT2));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    assert_int_equal(s->pid, pid);
    assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}

void sighup_after_removing_a_principal_refuses_its_key(void **state)
{
    site *st = site_new("sighup-remove", false, 0, true);
    char path[128], u[OG_UUID_LEN + 1];
    json_t *ps;
    int64_t deadline;
    srv *s;
    hres r;

    assert_non_null(st);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    uuid4(u);
    snprintf(path, sizeof path, "/v1/operations/%s", u);
    get(&r, s, path, KEY(P_AGENT2));
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    ps = json_object_get(st->conf, "principals");
    for (size_t i = 0; i < json_array_size(ps); i++)
        if (strcmp(jstr(json_array_get(ps, i), "id"), "agent-2") == 0)
            json_array_remove(ps, i);
    assert_int_equal(site_write(st), 0);
    assert_int_equal(kill(s->pid, SIGHUP), 0);
    deadline = t_now_ms() + 15000;
    for (;;) {
        get(&r, s, path, KEY(P_AGENT2));
        if (r.status == 401 || t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(100);
    }
    assert_error(&r, 401, "unauthorized");
    hres_free(&r);
    get(&r, s, path, KEY(P_AGENT));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}

void failed_reload_keeps_the_old_principals_and_logs_reload_failed(
    void **state)
{
    site *st = site_new("sighup-bad", false, 0, true);
    char path[128], u[OG_UUID_LEN + 1];
    srv *s;
    grant g;
    hres r;

    assert_non_null(st);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    assert_int_equal(write_file(st->config, "{\"principals\": [ broken"), 0);
    assert_int_equal(kill(s->pid, SIGHUP), 0);
    if (!log_wait_for(s, "reload_failed", 15000))
        fail_msg("no reload_failed event in %s", s->log_path);

    uuid4(u);
    snprintf(path, sizeof path, "/v1/operations/%s", u);
    get(&r, s, path, KEY(P_AGENT));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    issue_grant(s, &g);
    assert_admits(s, u, g.token);
    assert_int_equal(waitpid(s->pid, NULL, WNOHANG), 0);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}

typedef struct inflight {
    const srv *s;
    char op[OG_UUID_LEN + 1];
    const char *token;
    hres r;
    int64_t done_ms;
} inflight;

static void *inflight_main(void *arg)
{
    inflight *f = arg;
    admit(&f->r, f->s, KEY(P_AGENT), f->op, f->token);
    f->done_ms = t_now_ms();
    return NULL;
}

#define INFLIGHT 4

void sigterm_lets_requests_in_flight_complete_and_exits_0(void **state)
{
    site *st = site_new("sigterm", false, LOADED_STORE_TIMEOUT_MS, true);
    inflight f[INFLIGHT];
    pthread_t th[INFLIGHT];
    grant g[INFLIGHT];
    int64_t t0, unlocked;
    srv *s;
    int st_;
    hres r;

    assert_non_null(st);
    /* The store timeout (15 s) bounds how long the requests wait for the
     * lock; the drain timeout (20 s) is longer still. */
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    for (int i = 0; i < INFLIGHT; i++)
        issue_grant(s, &g[i]);

    /* Requests stuck in the store: in flight for as long as the test holds
     * its lock. */
    assert_int_equal(store_lock(st), 0);
    t0 = t_now_ms();
    for (int i = 0; i < INFLIGHT; i++) {
        memset(&f[i], 0, sizeof f[i]);
        f[i].s = s;
        f[i].token = g[i].token;
        uuid4(f[i].op);
        assert_int_equal(pthread_create(&th[i], NULL, inflight_main, &f[i]), 0);
    }
    t_sleep_ms(1000);
    assert_int_equal(kill(s->pid, SIGTERM), 0);

    /* The listening socket is closed at once: a new connection soon fails
     * (polled, since the signal is handled asynchronously; the drain cannot
     * end meanwhile, the test still holds the store). */
    for (int64_t deadline = t_now_ms() + 5000;;) {
        get(&r, s, "/healthz", NULL);
        if (r.status == 0 || t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(50);
    }
    if (r.status != 0)
        dump("new request 5 s after SIGTERM", &r, __LINE__);
    assert_int_equal(r.status, 0);
    hres_free(&r);
    /* The process is still draining. */
    assert_int_equal(waitpid(s->pid, NULL, WNOHANG), 0);

    unlocked = t_now_ms();
    store_unlock();
    if (unlocked - t0 > 10000)
        fprintf(stderr, "warning: lock held %lld ms, near the store timeout\n",
                (long long)(unlocked - t0));
    for (int i = 0; i < INFLIGHT; i++) {
        pthread_join(th[i], NULL);
        assert_http(&f[i].r, 202);
        assert_str(jstr(f[i].r.json, "outcome"), "admitted");
        /* It was in flight across the SIGTERM: it finished only once the
         * store let it. */
        assert_true(f[i].done_ms >= unlocked);
        hres_free(&f[i].r);
    }
    st_ = t_proc_wait(s->pid, EXIT_MS);
    if (st_ < 0) {
        srv_stop(s, SIGKILL, EXIT_MS);
        fail_msg("the server did not exit after draining");
    }
    s->pid = 0;
    if (t_proc_exit_code(st_) != 0)
        srv_print_log(s);
    assert_int_equal(t_proc_exit_code(st_), 0);
}

void sigint_drains_and_exits_0_like_sigterm(void **state)
{
    srv *s = site_server(g_main);
    hres r;

    assert_int_equal(srv_start(s), 0);
    get(&r, s, "/healthz", NULL);
    assert_http(&r, 200);
    hres_free(&r);
    assert_int_equal(srv_stop(s, SIGINT, EXIT_MS), 0);
    assert_true(log_wait_for(s, "drained", 10));
}

void sighup_after_adding_a_verification_key_accepts_its_grants(
    void **state)
{
    site *st = site_new("sighup-keys", false, 0, true);
    char dir[PATHLEN + 32], other[PATHLEN + 32], op[OG_UUID_LEN + 1];
    char jti[OG_GRANT_ID_LEN + 1];
    og_keygen_result kr;
    og_signer *signer = NULL;
    og_grant_claims c;
    int64_t deadline;
    char *tok = NULL;
    srv *s;
    hres r;

    assert_non_null(st);
    snprintf(dir, sizeof dir, "%s/keys", st->dir);
    snprintf(other, sizeof other, "%s/other-issuer-keys", st->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(mkdir(other, 0700), 0);
    assert_int_equal(copy_file(g_pub_path, dir), 0);
    assert_int_equal(copy_file(g_priv_path, dir), 0);
    json_object_set_new(st->conf, "keys_dir", json_string(dir));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);

    /* A second issuer this service does not know yet. */
    assert_int_equal(og_keygen("second-issuer", other, &kr), 0);
    secret_add_private_jwk(kr.private_path);
    assert_int_equal(og_signer_load_file(kr.private_path, &signer), 0);
    claims_default(&c, jti);
    c.iss = "second-issuer";
    assert_int_equal(og_grant_token_sign(signer, &c, &tok), 0);
    og_signer_free(signer);
    secret_add_token(tok);
    uuid4(op);
    assert_not_valid_on(s, tok, op, "grant.unknown_issuer");

    assert_int_equal(copy_file(kr.public_path, dir), 0);
    assert_int_equal(kill(s->pid, SIGHUP), 0);
    deadline = t_now_ms() + 15000;
    for (;;) {
        admit(&r, s, KEY(P_AGENT), op, tok);
        if (r.status != 403 || t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(100);
    }
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "admitted");
    hres_free(&r);
    free(tok);
}
