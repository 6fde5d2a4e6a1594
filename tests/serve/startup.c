/*
 * startup.c — what a server refuses at startup (a configuration, a
 * command line, a store it cannot reach), naming what is wrong and exiting
 * with its documented code (docs/http.md, docs/design.md "Timing values"),
 * and what auto_migrate prepares.
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Configuration refused at startup
 * ========================================================================= */
void billing_timeout_not_shorter_than_lease_minus_margin_refuses_to_start_naming_T4(
    void **state)
{
    /* execution_lease 60 s, margin 5 s (the defaults): the billing call must
     * be shorter than 55 s. Equal is refused, and so is longer. */
    static const json_int_t provider_ms[] = {55000, 70000};

    for (size_t i = 0; i < sizeof provider_ms / sizeof provider_ms[0]; i++) {
        site *st = site_new("t4", false, 0, true);
        char *log = NULL;
        int code;

        assert_non_null(st);
        site_timing(st, "execution_lease_ms", 60000);
        site_timing(st, "lease_margin_ms", 5000);
        site_timing(st, "provider_timeout_ms", provider_ms[i]);
        assert_int_equal(site_write(st), 0);
        code = run_refused(st, &log);
        if (code != 78 || !log || !strstr(log, "T4"))
            fprintf(stderr, "provider_timeout_ms %lld: exit %d, stderr:\n%s\n",
                    (long long)provider_ms[i], code, log ? log : "");
        assert_int_equal(code, 78);
        assert_non_null(log);
        assert_non_null(strstr(log, "T4"));
        free(log);
    }
}

void unknown_configuration_key_refuses_to_start_naming_it(void **state)
{
    site *st = site_new("unknown-key", false, 0, true);
    char *log = NULL;
    int code;

    assert_non_null(st);
    json_object_set_new(st->conf, "no_such_setting", json_integer(1));
    assert_int_equal(site_write(st), 0);
    code = run_refused(st, &log);
    if (code != 78)
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "no_such_setting"));
    free(log);
}

void unreachable_store_at_startup_exits_75(void **state)
{
    site *st;
    char *log = NULL;
    int code;

    if (!g_pg) {
        skip(); /* an embedded file has no server to be unreachable */
        return;
    }
    st = site_new("unreachable", true, 1000, true);
    assert_non_null(st);
    relay_set(st->relay, true, false);
    code = run_refused(st, &log);
    if (code != 75)
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 75);
    free(log);
}

void auto_migrate_prepares_an_empty_store(void **state)
{
    site *st = site_new("auto-migrate", false, 0, false);
    char op[OG_UUID_LEN + 1];
    srv *s;
    grant g;
    hres r;

    assert_non_null(st);
    json_object_set_new(st->conf, "auto_migrate", json_true());
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    get(&r, s, "/readyz", NULL);
    assert_http(&r, 200);
    hres_free(&r);
    issue_grant(s, &g);
    uuid4(op);
    assert_admits(s, op, g.token);
}

/* consumption_keys with auto_migrate: an empty store is created hashed
 * (the store records it: a library open reads hashed back), and the server
 * admits once and refuses the replay. Started again asking for readable
 * keys on that store, the server refuses to start (78, naming the store's
 * keys); as_stored starts and still refuses the replay. */
void auto_migrate_with_hashed_consumption_keys_creates_a_hashed_store(
    void **state)
{
    site *st = site_new("auto-hashed", false, 0, false);
    char op[OG_UUID_LEN + 1], *log = NULL;
    og_store_options o;
    og_store *direct = NULL;
    srv *s;
    grant g;
    int code;

    assert_non_null(st);
    json_object_set_new(st->conf, "auto_migrate", json_true());
    json_object_set_new(st->conf, "consumption_keys", json_string("hashed"));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    issue_grant(s, &g);
    uuid4(op);
    assert_admits(s, op, g.token);
    assert_refused(s, g.token);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);

    og_store_options_default(&o);
    o.pool_size = 1;
    assert_int_equal(og_store_open(st->direct_url, &o, &direct), 0);
    assert_int_equal(og_store_consumption_keys(direct), OG_KEYS_HASHED);
    og_store_free(direct);

    json_object_set_new(st->conf, "consumption_keys", json_string("readable"));
    assert_int_equal(site_write(st), 0);
    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "keys"))
        fprintf(stderr, "readable keys on a hashed store: exit %d, stderr:\n%s\n",
                code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "keys"));
    free(log);

    json_object_set_new(st->conf, "consumption_keys", json_string("as_stored"));
    assert_int_equal(site_write(st), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    assert_refused(s, g.token);
}

void serve_with_an_unknown_option_exits_2(void **state)
{
    char out[PATHLEN], err[PATHLEN];
    char *argv[] = {(char *)g_bin, "serve", "--no-such-option", NULL};

    snprintf(out, sizeof out, "%s/usage.out", g_tmp);
    snprintf(err, sizeof err, "%s/usage.err", g_tmp);
    assert_int_equal(t_proc_run(argv, out, err, 30000), 2);
}

void provider_url_without_table_refuses_to_start(void **state)
{
    site *st = site_new("exec-no-table", false, 0, true);
    char *log = NULL;
    int code;

    assert_non_null(st);
    json_object_set_new(st->conf, "provider",
                        json_pack("{s:s}", "url", "http://127.0.0.1:9"));
    assert_int_equal(site_write(st), 0);
    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "provider.table"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "provider.table"));
    free(log);
}

void table_retention_shorter_than_config_refuses_to_start(void **state)
{
    site *st = site_new("exec-short-table", false, 0, true);
    char table[PATHLEN], copy[PATHLEN + 32];
    json_t *t;
    char *log = NULL;
    int code;

    assert_non_null(st);
    table_path(table, sizeof table);
    t = json_load_file(table, 0, NULL);
    assert_non_null(t);
    assert_non_null(json_object_get(t, "properties"));
    json_object_set_new(json_object_get(t, "properties"),
                        "key_retention_seconds", json_integer(60));
    snprintf(copy, sizeof copy, "%s/short-retention.v1.json", st->dir);
    assert_int_equal(json_dump_file(t, copy, JSON_INDENT(2)), 0);
    json_decref(t);
    /* timings.provider_key_retention_ms keeps its default, 24 h (T8 holds
     * with the default submission window); the table documents 60 s. */
    json_object_set_new(st->conf, "provider",
                        json_pack("{s:s, s:s}", "url", "http://127.0.0.1:9",
                                  "table", copy));
    assert_int_equal(site_write(st), 0);
    code = run_refused(st, &log);
    if (code != 78 || !log || !strstr(log, "retention"))
        fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
    assert_int_equal(code, 78);
    assert_non_null(log);
    assert_non_null(strstr(log, "retention"));
    assert_non_null(strstr(log, "provider"));
    free(log);
}

/* ===========================================================================
 * A signing key that group or others can read refuses to start,
 * naming the setting, the file and its mode (never a byte of the key); the
 * same file at 0600 starts.
 * ========================================================================= */
void signing_key_readable_by_others_refuses_to_start_naming_file_and_mode(
    void **state)
{
    static const mode_t modes[] = {0640, 0604, 0660};
    site *st = site_new("signing-key-mode", false, 0, true);
    char path[PATHLEN + 32], want[64], *text, *log = NULL;
    json_error_t je;
    json_t *jwk;
    srv *s;
    int code;

    (void)state;
    assert_non_null(st);
    snprintf(path, sizeof path, "%s/issuer.private.jwk", st->dir);
    assert_non_null(text = t_slurp(g_priv_path, NULL));
    assert_int_equal(write_file(path, text), 0);
    free(text);
    assert_non_null(jwk = json_load_file(path, 0, &je));
    json_object_set_new(st->conf, "signing_key", json_string(path));
    assert_int_equal(site_write(st), 0);
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(path, modes[i]), 0);
        code = run_refused(st, &log);
        if (code != 78 || !log || !strstr(log, "key.mode_too_open"))
            fprintf(stderr, "exit %d, stderr:\n%s\n", code, log ? log : "");
        assert_int_equal(code, 78);
        assert_non_null(strstr(log, "signing_key"));
        assert_non_null(strstr(log, path));
        assert_non_null(strstr(log, "key.mode_too_open"));
        snprintf(want, sizeof want, "mode %04o", (unsigned)modes[i]);
        assert_non_null(strstr(log, want));
        assert_null(strstr(log, jstr(jwk, "d"))); /* never the key */
        free(log);
        log = NULL;
    }
    json_decref(jwk);
    assert_int_equal(chmod(path, 0600), 0);
    s = site_server(st);
    assert_int_equal(srv_start(s), 0);
    assert_int_equal(srv_stop(s, SIGTERM, EXIT_MS), 0);
}
