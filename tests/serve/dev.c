/*
 * dev.c — dev mode (`oncegate serve --dev`): its credentials file (0600,
 * reused by a second instance, agreed on by instances started together)
 * and the banner's commands, run as printed.
 */
#include "harness.h"
#include "cases.h"

#include "oncegate/payout_store.h"

/* The banner line that opens the payout path (OG_DEV_PAYOUT_STEPS in
 * src/serve/serve.h, after "  "). */
#define DEV_PAYOUT_STEPS "# The payout path"

/* ===========================================================================
 * Dev mode
 * ========================================================================= */
/* The dev instances a and b share principals and the issuer key: a grant
 * issued on one is admitted on the other with the agent key from the
 * credentials file, and executed there (dev mode starts a sandbox beside
 * each instance). */
static void assert_dev_pair_shares_credentials(const srv *a, const srv *b,
                                               json_t *doc)
{
    char op[OG_UUID_LEN + 1], path[128];
    const char *tok;
    hres r;

    uuid4(op);
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(&r, b, path, dev_key(doc, "agent"));
    assert_error(&r, 404, "not_found");
    hres_free(&r);

    post(&r, a, "/v1/grants", dev_key(doc, "issuer"),
         grant_request("dev-agent", NULL, 900));
    assert_http(&r, 201);
    assert_str(jstr(r.json, "issuer"), "oncegate-dev");
    /* dev mode keys operation ids (DIR/operation-id.key): the grant's
     * server-issued operation id carries its MAC */
    assert_non_null(jstr(r.json, "operation_id"));
    assert_non_null(jstr(r.json, "operation_mac"));
    tok = jstr(r.json, "token");
    assert_non_null(tok);
    secret_add_token(tok);
    {
        hres r2;
        post(&r2, b, "/v1/operations", dev_key(doc, "agent"), admit_body(op, tok));
        assert_http(&r2, 200);
        assert_str(jstr(r2.json, "outcome"), "admitted");
        assert_str(jstr(r2.json, "result"), "applied");
        hres_free(&r2);
    }
    hres_free(&r);
}

void dev_mode_credentials_are_0600_and_reused_by_a_second_instance(
    void **state)
{
    char dir[PATHLEN], envout[PATHLEN], enverr[PATHLEN];
    char *first, *second, *env;
    site *pgsite = NULL;
    json_t *doc, *doc2;
    srv *a, *b;

    if (g_pg)
        assert_non_null(pgsite = site_new("dev-pg", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-shared", g_tmp);
    a = dev_server(dir, pgsite);
    assert_int_equal(srv_start(a), 0);
    first = dev_credentials(dir, &doc);

    b = dev_server(dir, pgsite);
    assert_int_equal(srv_start(b), 0);
    assert_true(a->port != b->port);
    second = dev_credentials(dir, &doc2);
    assert_str(second, first);
    assert_dev_pair_shares_credentials(a, b, doc);
    assert_dev_pair_shares_credentials(b, a, doc);

    /* dev-env prints the same keys for a shell. */
    {
        char *argv[] = {(char *)g_bin, "dev-env", "--data-dir", dir, NULL};
        snprintf(envout, sizeof envout, "%s/dev-env.out", g_tmp);
        snprintf(enverr, sizeof enverr, "%s/dev-env.err", g_tmp);
        outfile_add(enverr, OUT_LOG_TEXT);
        assert_int_equal(t_proc_run(argv, envout, enverr, 30000), 0);
        env = t_slurp(envout, NULL);
        assert_non_null(env);
        for (size_t i = 0; i < sizeof g_dev_roles / sizeof g_dev_roles[0]; i++) {
            char var[64];
            snprintf(var, sizeof var, "OG_%s_KEY", g_dev_roles[i]);
            for (char *c = var; *c; c++)
                *c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
            if (!strstr(env, var) || !strstr(env, dev_key(doc, g_dev_roles[i])))
                fail_msg("dev-env lacks %s with the %s key", var, g_dev_roles[i]);
        }
        free(env);
    }
    free(first);
    free(second);
    json_decref(doc);
    json_decref(doc2);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
    assert_int_equal(srv_stop(b, SIGTERM, EXIT_MS), 0);
}

void dev_instances_started_together_agree_on_credentials(void **state)
{
    char dir[PATHLEN];
    site *pgsite = NULL;
    json_t *doc, *doc2;
    char *t1, *t2;
    srv *a, *b;

    if (g_pg)
        assert_non_null(pgsite = site_new("dev-pg-together", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-together", g_tmp);
    a = dev_server(dir, pgsite);
    b = dev_server(dir, pgsite);
    assert_int_equal(srv_exec(a), 0);
    assert_int_equal(srv_exec(b), 0);
    if (srv_wait_ready(a, READY_MS) != 0 || srv_wait_ready(b, READY_MS) != 0) {
        srv_print_log(a);
        srv_print_log(b);
        fail_msg("dev instances started together did not both serve");
    }
    t1 = dev_credentials(dir, &doc);
    t2 = dev_credentials(dir, &doc2);
    assert_str(t1, t2);
    assert_dev_pair_shares_credentials(a, b, doc);
    assert_dev_pair_shares_credentials(b, a, doc);
    free(t1);
    free(t2);
    json_decref(doc);
    json_decref(doc2);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
    assert_int_equal(srv_stop(b, SIGTERM, EXIT_MS), 0);
}

/* The banner's shell commands up to the payout path: every line (after an
 * optional "$ " prompt) that starts with "curl" or assigns a shell
 * variable, with backslash continuations joined. */
static char *banner_script(const char *banner)
{
    size_t cap = strlen(banner) + 1, n = 0;
    char *out = calloc(1, cap + 1);
    const char *p = banner;
    bool cont = false;

    if (!out)
        abort();
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        const char *s = p;
        size_t sl = len;
        bool take;

        while (sl && (*s == ' ' || *s == '\t'))
            s++, sl--;
        /* the payout path is a test of its own */
        if (!cont && strncmp(s, DEV_PAYOUT_STEPS,
                             strlen(DEV_PAYOUT_STEPS)) == 0)
            break;
        if (!cont && sl >= 2 && s[0] == '$' && s[1] == ' ')
            s += 2, sl -= 2;
        take = cont || (sl > 5 && strncmp(s, "curl ", 5) == 0);
        if (!take && !cont) {
            /* NAME=$(...) or NAME=value */
            size_t i = 0;
            while (i < sl && (isalnum((unsigned char)s[i]) || s[i] == '_'))
                i++;
            take = i > 0 && i < sl && s[i] == '=' && !isdigit((unsigned char)s[0]);
        }
        if (take) {
            memcpy(out + n, s, sl);
            n += sl;
            out[n++] = '\n';
            cont = sl > 0 && s[sl - 1] == '\\';
        }
        p = eol ? eol + 1 : p + len;
    }
    out[n] = '\0';
    return out;
}

/* After the banner's step 5 (the sandbox's answer lost after it made the
 * credit): the dev instance's own recovery loop settles the operation —
 * $OP, read from the shell's saved variables — as succeeded by lookup
 * within seconds, and the dev sandbox (URL from the banner) counts one
 * credit per presentation and one create request each. */
static void dev_banner_recovery_settles(const srv *a, const char *banner,
                                        const char *vars_path,
                                        const char *dir)
{
    char *vars = t_slurp(vars_path, NULL), *p, op[OG_UUID_LEN + 1] = "";
    char path[128];
    const char *status = NULL, *u;
    json_t *doc;
    int64_t deadline = t_now_ms() + 30000;
    srv sbx;
    hres r;

    assert_non_null(vars);
    p = strstr(vars, "\nOP=");
    assert_non_null(p);
    p += 4;
    if (*p == '\'')
        p++;
    snprintf(op, sizeof op, "%.36s", p);
    free(vars);
    free(dev_credentials(dir, &doc));
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    for (;;) {
        get(&r, a, path, dev_key(doc, "agent"));
        assert_http(&r, 200);
        status = jstr(r.json, "status");
        if ((status && strcmp(status, "succeeded") == 0) ||
            t_now_ms() > deadline)
            break;
        hres_free(&r);
        t_sleep_ms(200);
    }
    if (!status || strcmp(status, "succeeded") != 0)
        fail_msg("recovery did not settle %s within 30 s: %s", op, r.body);
    assert_str(jstr(r.json, "reason"), "found");
    hres_free(&r);
    json_decref(doc);

    /* The banner names the sandbox: "provider     http://127.0.0.1:PORT: ". */
    u = strstr(banner, "provider     http://");
    assert_non_null(u);
    memset(&sbx, 0, sizeof sbx);
    u += strlen("provider     ");
    assert_non_null(strstr(u, ": "));
    snprintf(sbx.base, sizeof sbx.base, "%.*s", (int)(strstr(u, ": ") - u),
             u);
    sbx_http(&r, &sbx, "GET", "/_control/stats", NULL, NULL);
    assert_http(&r, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json,
                                                        "credits_created")),
                     2);
    assert_int_equal(json_integer_value(json_object_get(r.json,
                                                        "create_requests")),
                     2);
    hres_free(&r);
}

void dev_banner_commands_admit_then_refuse(void **state)
{
    char dir[PATHLEN], script_path[PATHLEN], out_path[PATHLEN], err_path[PATHLEN];
    char vars_path[PATHLEN];
    char *banner, *cmds, *script, *out;
    json_t *doc;
    size_t sz;
    srv *a;
    char *first, *admitted, *refused, *pending;

    snprintf(dir, sizeof dir, "%s/dev-banner", g_tmp);
    a = dev_server(dir, NULL);
    assert_int_equal(srv_start(a), 0);
    free(dev_credentials(dir, &doc));
    json_decref(doc);

    /* The banner is on stdout, after (or before) the ready line. */
    {
        int64_t deadline = t_now_ms() + 10000;
        for (;;) {
            banner = t_slurp(a->out_path, NULL);
            assert_non_null(banner);
            cmds = banner_script(banner);
            if (strstr(cmds, "curl") || t_now_ms() > deadline)
                break;
            free(banner);
            free(cmds);
            t_sleep_ms(100);
        }
    }
    if (!strstr(cmds, "curl")) {
        fprintf(stderr, "banner:\n%s\n", banner);
        fail_msg("no curl command in the banner");
    }
    snprintf(vars_path, sizeof vars_path, "%s/banner.vars", g_tmp);
    sz = strlen(cmds) + 4 * PATHLEN + 256;
    script = malloc(sz);
    /* The shell's variables are saved afterwards: a token the commands
     * obtained joins the secrets the log scan looks for. */
    snprintf(script, sz,
             "set -e\n"
             "export PATH=\"$(dirname '%s'):$PATH\"\n"
             "eval \"$('%s' dev-env --data-dir '%s')\"\n"
             "%s"
             "set > '%s'\n",
             g_bin, g_bin, dir, cmds, vars_path);
    snprintf(script_path, sizeof script_path, "%s/banner.sh", g_tmp);
    snprintf(out_path, sizeof out_path, "%s/banner.out", g_tmp);
    snprintf(err_path, sizeof err_path, "%s/banner.err", g_tmp);
    assert_int_equal(write_file(script_path, script), 0);
    {
        char *argv[] = {"/bin/sh", script_path, NULL};
        int code = t_proc_run(argv, out_path, err_path, 60000);
        out = t_slurp(out_path, NULL);
        if (code != 0 || !out) {
            char *err = t_slurp(err_path, NULL);
            fprintf(stderr, "banner:\n%s\nscript:\n%s\nstdout:\n%s\nstderr:\n%s\n",
                    banner, script, out ? out : "", err ? err : "");
            free(err);
        }
        assert_int_equal(code, 0);
    }
    assert_non_null(out);
    {
        char *vars = t_slurp(vars_path, NULL), *save = NULL;
        for (char *w = strtok_r(vars, "\n'=", &save); w;
             w = strtok_r(NULL, "\n'=", &save))
            if (strlen(w) > 100 && strchr(w, '.'))
                secret_add_token(w);
        free(vars);
    }
    /* It applied (200: admitted and executed at the dev sandbox), then
     * refused the replay (409); step 5's presentation lost the provider's
     * answer (202 pending). */
    admitted = strstr(out, "\"result\":\"applied\"");
    first = admitted ? strstr(admitted, "\n200\n") : NULL;
    refused = first ? strstr(first, "grant_not_available") : NULL;
    pending = refused ? strstr(refused, "\"result\":\"pending\"") : NULL;
    if (!admitted || !first || !refused || !strstr(refused, "\n409\n") ||
        !pending || !strstr(pending, "\n202\n")) {
        fprintf(stderr, "banner:\n%s\nscript:\n%s\noutput:\n%s\n", banner,
                script, out);
        fail_msg("the banner's commands did not apply, refuse, then pend");
    }
    dev_banner_recovery_settles(a, banner, vars_path, dir);
    free(out);
    free(script);
    free(cmds);
    free(banner);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
}

/* ===========================================================================
 * Dev mode and payouts: an old data directory, the scenario, the banner's
 * payout path run as printed.
 * ========================================================================= */

/* A data directory from before the payout roles: serve --dev adds their
 * principals (keeping the old ones' keys) instead of refusing, creates the
 * scenario, and the new roles' keys work. */
void dev_mode_adds_missing_roles_to_an_old_data_directory(void **state)
{
    static const char *const old[] = {"issuer", "agent", "enforcer",
                                      "revoker", "operator"};
    char dir[PATHLEN], path[PATHLEN + 32], text[2048];
    site *pgsite = NULL;
    size_t n = 0;
    json_t *doc;
    srv *a;
    hres r;

    (void)state;
    if (g_pg)
        assert_non_null(pgsite = site_new("dev-old-pg", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-old", g_tmp);
    assert_int_equal(mkdir(dir, 0700), 0);
    n = (size_t)snprintf(text, sizeof text,
                         "{\"issuer\": \"oncegate-dev\", \"principals\": {");
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "%s\"%s\": {\"id\": \"dev-%s\", \"api_key\": "
                              "\"og_old_%s_key_0123456789abcdef\"}",
                              i ? ", " : "", old[i], old[i], old[i]);
    snprintf(text + n, sizeof text - n, "}}\n");
    snprintf(path, sizeof path, "%s/dev-credentials.json", dir);
    assert_int_equal(write_file(path, text), 0);
    assert_int_equal(chmod(path, 0600), 0);

    a = dev_server(dir, pgsite);
    if (srv_start(a) != 0) {
        srv_print_log(a);
        fail_msg("serve --dev refused a data directory without the payout "
                 "roles");
    }
    free(dev_credentials(dir, &doc)); /* every role now, 0600 */
    assert_str(dev_key(doc, "operator"), "og_old_operator_key_0123456789abcdef");
    assert_str(dev_key(doc, "agent"), "og_old_agent_key_0123456789abcdef");
    /* the new roles' keys work: the operator reads the scenario's payout,
     * the clerk's key is a principal (403 on an operator route) */
    get(&r, a, "/v1/admin/payouts/PAY-3107", dev_key(doc, "operator"));
    assert_http(&r, 200);
    assert_str(jstr(json_object_get(r.json, "payout"), "state"), "Draft");
    assert_str(jstr(json_object_get(r.json, "payout"), "requester_id"),
               "clerk-22");
    hres_free(&r);
    get(&r, a, "/v1/admin/payouts/PAY-3107", dev_key(doc, "clerk"));
    assert_http(&r, 403);
    hres_free(&r);
    json_decref(doc);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
}

/* The store's DST-77 token (a secret) joins those the log scan looks for;
 * the scenario's records are read back: PAY-3107 at state. */
static void dev_scenario_check(const char *dir, const site *pgsite,
                               og_payout_state want)
{
    char url[PATHLEN + 16], token[OG_PAYOUT_TOKEN_MAX + 1];
    og_payout_view v;
    og_store_options o;
    og_store *s = NULL;

    if (pgsite)
        snprintf(url, sizeof url, "%s", pgsite->direct_url);
    else
        snprintf(url, sizeof url, "sqlite:%s/oncegate.db", dir);
    og_store_options_default(&o);
    assert_int_equal(og_store_open(url, &o, &s), 0);
    assert_int_equal(og_payout_destination_token(s, "DST-77", 1, token,
                                                 sizeof token),
                     1);
    assert_int_equal(strncmp(token, "dst_dev_", 8), 0);
    secret_add(token);
    memset(&v, 0, sizeof v);
    assert_int_equal(og_payout_get(s, "PAY-3107", &v), 1);
    assert_int_equal(v.state, want);
    assert_str(v.tenant_id, "T-0417");
    assert_str(v.beneficiary_id, "BEN-2208");
    assert_str(v.destination_id, "DST-77");
    assert_int_equal(v.amount_minor, 425000);
    assert_str(v.currency, "EUR");
    og_store_free(s);
}

/* The text after needle in hay (from where), or fail naming what. */
static const char *dev_after(const char *hay, const char *needle,
                             const char *what, const char *out)
{
    const char *p = strstr(hay, needle);

    if (!p)
        fail_msg("the payout path: %s: no %s in\n%s", what, needle, out);
    return p + strlen(needle);
}

/* The banner's payout path, pasted as printed (no substitution: the
 * banner names the URLs, the keys come from dev-env as it says): read
 * PAY-3107 (Draft), the lost answer armed, the clerk's submission
 * (Allowed), the wait for Paid through reconciliation, the history, the
 * sandbox's counters (one payout, one request) — well within a minute;
 * then a restart of the same directory creates nothing twice. */
void dev_banner_payout_steps_run_as_printed_and_pay_once(void **state)
{
    char dir[PATHLEN], script_path[PATHLEN], out_path[PATHLEN];
    char err_path[PATHLEN];
    char *banner = NULL, *script, *out;
    const char *steps = NULL, *p;
    site *pgsite = NULL;
    int64_t started, took;
    json_t *doc;
    size_t sz;
    srv *a;
    hres r;

    (void)state;
    if (g_pg)
        assert_non_null(pgsite = site_new("dev-payout-steps-pg", false, 0,
                                          true));
    snprintf(dir, sizeof dir, "%s/dev-payout-steps", g_tmp);
    a = dev_server(dir, pgsite);
    assert_int_equal(srv_start(a), 0);
    free(dev_credentials(dir, &doc));
    dev_scenario_check(dir, pgsite, OG_PAYOUT_STATE_DRAFT);
    {
        int64_t deadline = t_now_ms() + 10000;

        for (;;) {
            banner = t_slurp(a->out_path, NULL);
            assert_non_null(banner);
            if ((steps = strstr(banner, DEV_PAYOUT_STEPS)) &&
                strstr(steps, "_control/stats"))
                break;
            if (t_now_ms() > deadline)
                fail_msg("no payout path in the banner:\n%s", banner);
            free(banner);
            t_sleep_ms(100);
        }
    }
    /* The banner names every variable dev-env exports, before its eval. */
    {
        const char *load = strstr(banner, "Load the API keys");
        const char *eval = load ? strstr(load, "eval \"$(") : NULL;

        assert_non_null(eval);
        for (size_t i = 0; i < sizeof g_dev_roles / sizeof g_dev_roles[0];
             i++) {
            char var[64];
            const char *at;

            snprintf(var, sizeof var, "OG_%s_KEY", g_dev_roles[i]);
            for (char *c = var; *c; c++)
                *c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
            at = strstr(load, var);
            if (!at || at > eval)
                fail_msg("the banner does not name %s before its eval", var);
        }
    }
    /* From the payout path's first line to the banner's end, as printed. */
    sz = strlen(steps) + 4 * PATHLEN + 256;
    script = malloc(sz);
    assert_non_null(script);
    snprintf(script, sz,
             "set -e\n"
             "eval \"$('%s' dev-env --data-dir '%s')\"\n"
             "  %s",
             g_bin, dir, steps);
    snprintf(script_path, sizeof script_path, "%s/payout-steps.sh", g_tmp);
    snprintf(out_path, sizeof out_path, "%s/payout-steps.out", g_tmp);
    snprintf(err_path, sizeof err_path, "%s/payout-steps.err", g_tmp);
    assert_int_equal(write_file(script_path, script), 0);
    started = t_now_ms();
    {
        char *argv[] = {"/bin/bash", script_path, NULL};
        int code = t_proc_run(argv, out_path, err_path, 120000);

        out = t_slurp(out_path, NULL);
        if (code != 0 || !out) {
            char *err = t_slurp(err_path, NULL);
            fprintf(stderr, "script:\n%s\nstdout:\n%s\nstderr:\n%s\n", script,
                    out ? out : "", err ? err : "");
            free(err);
        }
        assert_int_equal(code, 0);
    }
    took = t_now_ms() - started;
    assert_non_null(out);
    /* Each step's answer, in order. */
    p = dev_after(out, "\"state\":\"Draft\"", "P1 read", out);
    p = dev_after(p, "\n200\n", "P1 status", out);
    p = dev_after(p, "\"fault\":\"drop_response_after_effect\"", "P2", out);
    p = dev_after(p, "\"outcome\":\"Allowed\"", "P3 decision", out);
    p = dev_after(p, "\"reason\":\"payout.allowed\"", "P3 reason", out);
    p = dev_after(p, "\n200\n", "P3 status", out);
    p = dev_after(p, "\"state\":\"Paid\"", "P5 read", out);
    p = dev_after(p, "\"to_state\":\"Unknown\"", "P5 history: Unknown", out);
    p = dev_after(p, "\"to_state\":\"Paid\"", "P5 history: Paid", out);
    p = dev_after(p, "\n200\n", "P5 status", out);
    p = dev_after(p, "\"payout_requests\":1,", "P6: one payout request", out);
    (void)dev_after(p, "\"payouts_created\":1,", "P6: one payout", out);
    if (took > 60000)
        fail_msg("the payout path took %lld ms, not well under a minute",
                 (long long)took);
    print_message("the banner's payout path took %lld ms\n", (long long)took);

    /* The final state, read apart from the banner: Paid, one attempt,
     * Succeeded by reconciliation, and the sandbox's one payout. */
    get(&r, a, "/v1/admin/payouts/PAY-3107", dev_key(doc, "operator"));
    assert_http(&r, 200);
    assert_str(jstr(json_object_get(r.json, "payout"), "state"), "Paid");
    assert_int_equal(json_array_size(json_object_get(r.json, "attempts")), 1);
    assert_str(jstr(json_array_get(json_object_get(r.json, "attempts"), 0),
                    "status"),
               "Succeeded");
    hres_free(&r);
    dev_scenario_check(dir, pgsite, OG_PAYOUT_STATE_PAID);

    /* A restart of the same directory: the scenario exists, nothing is
     * created twice, PAY-3107 stays Paid. */
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
    a = dev_server(dir, pgsite);
    assert_int_equal(srv_start(a), 0);
    dev_scenario_check(dir, pgsite, OG_PAYOUT_STATE_PAID);
    get(&r, a, "/v1/admin/payouts/PAY-3107", dev_key(doc, "operator"));
    assert_http(&r, 200);
    assert_int_equal(json_array_size(json_object_get(r.json, "decisions")), 1);
    hres_free(&r);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
    json_decref(doc);
    free(out);
    free(script);
    free(banner);
}

/* ===========================================================================
 * What serve --dev creates is its owner's only, whatever the
 * umask: the directories 0700, every file 0600 — the store and its -wal and
 * -shm, the keys, the credentials, the sandbox's state.
 * ========================================================================= */
static void assert_mode(const char *dir, const char *name, mode_t want,
                        bool must_exist)
{
    char path[PATHLEN + 128];
    struct stat sb;

    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        fail_msg("%s/%s: path too long", dir, name);
    if (lstat(path, &sb) != 0) {
        if (must_exist)
            fail_msg("%s: missing", path);
        return;
    }
    if ((sb.st_mode & 07777) != want)
        fail_msg("%s: mode %04o, want %04o", path,
                 (unsigned)(sb.st_mode & 07777), (unsigned)want);
}

void dev_mode_files_are_owner_only_whatever_the_umask(void **state)
{
    char dir[PATHLEN], keys[PATHLEN + 8], line[PATHLEN + 64];
    site *pgsite = NULL;
    mode_t old;
    hres r;
    srv *a;
    int n = 0;
    FILE *ls;

    (void)state;
    if (g_pg)
        assert_non_null(pgsite = site_new("dev-modes-pg", false, 0, true));
    snprintf(dir, sizeof dir, "%s/dev-modes", g_tmp);
    a = dev_server(dir, pgsite);
    old = umask(0); /* the widest: only explicit modes protect anything */
    n = srv_start(a);
    umask(old);
    assert_int_equal(n, 0);
    /* a write, so the store's -wal and -shm exist (SQLite) */
    get(&r, a, "/readyz", NULL);
    assert_http(&r, 200);
    hres_free(&r);

    assert_mode(g_tmp, "dev-modes", 0700, true);
    assert_mode(dir, "keys", 0700, true);
    assert_mode(dir, "dev-credentials.json", 0600, true);
    assert_mode(dir, "redemption.key", 0600, true);
    assert_mode(dir, "operation-id.key", 0600, true);
    assert_mode(dir, ".lock", 0600, true);
    if (!g_pg) {
        assert_mode(dir, "oncegate.db", 0600, true);
        assert_mode(dir, "oncegate.db-wal", 0600, false);
        assert_mode(dir, "oncegate.db-shm", 0600, false);
    }
    assert_mode(dir, "sandbox.db", 0600, true);
    assert_mode(dir, "sandbox.log", 0600, true);
    assert_mode(dir, "sandbox.db-wal", 0600, false);
    assert_mode(dir, "sandbox.db-shm", 0600, false);
    /* the issuer's private key (its name carries the kid) */
    snprintf(keys, sizeof keys, "%s/keys", dir);
    snprintf(line, sizeof line, "ls '%s' | grep 'private.jwk$'", keys);
    assert_non_null(ls = popen(line, "r"));
    n = 0;
    while (fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        assert_mode(keys, line, 0600, true);
        n++;
    }
    pclose(ls);
    assert_int_equal(n, 1);
    assert_int_equal(srv_stop(a, SIGTERM, EXIT_MS), 0);
}
