/*
 * test_config_dev.c — dev mode (src/serve/dev.c): one issuer key and one
 * credentials file (0600) whose principals' hashes are the keys' SHA-256,
 * reused by a second run and agreed on by two processes preparing one
 * directory at once; the sandbox table and dev timings; a banner that
 * never shows a key while its commands work when pasted; dev-env.
 * test_config.c lists the tests in the order they run.
 */
#include "test_config.h"

/* ===========================================================================
 * Dev mode.
 * ========================================================================= */

/* Asserts DIR's credentials file: 0600, the five roles with ids dev-ROLE
 * and keys "og_" + 43 base64url characters; and that c's principals are
 * those ids with those keys' SHA-256. */
static void assert_dev_state(const char *dir, const og_srv_config *c)
{
    char path[PATH_MAX], key[OG_API_KEY_MAX + 1], id[64];
    struct stat st;
    unsigned char h[OG_API_KEY_HASH_LEN];

    FMT(path, "%s/%s", dir, OG_DEV_CREDENTIALS);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(c->n_principals, OG_ROLE_COUNT);
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        const char *role = og_role_name(1u << i);

        cred_key(dir, role, key);
        assert_int_equal(strncmp(key, "og_", 3), 0);
        assert_int_equal(strlen(key), 46);
        assert_int_equal(strspn(key + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
                                         "klmnopqrstuvwxyz0123456789-_"),
                         43);
        /* the clerk is the payout scenario's requester (dev_payouts.c) */
        if ((1u << i) == OG_ROLE_CLERK)
            FMT(id, "clerk-22");
        else
            FMT(id, "dev-%s", role);
        assert_string_equal(c->principals[i].id, id);
        assert_int_equal(c->principals[i].roles, 1u << i);
        sha256(key, h);
        assert_memory_equal(c->principals[i].key_hash, h, sizeof h);
    }
    FMT(path, "%s/keys", dir);
    assert_int_equal(count_private_keys(path), 1);
    /* The redemption sealing key: 0600, loadable, configured. */
    FMT(path, "%s/%s", dir, OG_DEV_REDEMPTION_KEY);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_string_equal(c->redemption_key_file, path);
    {
        og_redeem_key *k = NULL;

        assert_int_equal(og_redeem_key_load_file(path, &k), 0);
        og_redeem_key_free(k);
    }
    /* The operation-id MAC key: 0600, loadable, configured, so dev grants
     * carry operation_mac. */
    FMT(path, "%s/%s", dir, OG_DEV_OPID_KEY);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_string_equal(c->opid_mac_key_file, path);
    {
        og_opid_key *k = NULL;

        assert_int_equal(og_opid_key_load_file(path, &k), 0);
        og_opid_key_free(k);
    }
}

void dev_prepare_creates_credentials_and_one_key(void **state)
{
    og_srv_config c;
    char dir[PATH_MAX], want[PATH_MAX + 32], err[512] = "";

    (void)state;
    scratch(dir, "dev-fresh");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_config_set_listen(&c, "127.0.0.1:0"), 0);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_dev_state(dir, &c);
    FMT(want, "sqlite:%s/oncegate.db", dir);
    assert_string_equal(c.store_url, want);
    FMT(want, "%s/keys", dir);
    assert_string_equal(c.keys_dir, want);
    assert_string_equal(c.issuer, OG_DEV_ISSUER);
    assert_string_equal(c.audience, OG_DEV_AUDIENCE);
    assert_null(c.signing_key);
    assert_true(c.auto_migrate);
    assert_int_equal(c.listen_port, 0); /* left as it was */
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), 0);
    og_srv_config_free(&c);
}

/* The table dev mode hands the server is the repository's, byte for byte
 * (D4), and dev mode's short timings keep every relation T1..T12. */
void dev_prepare_writes_the_sandbox_table_and_dev_timings_hold(
    void **state)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    og_srv_config c;
    char dir[PATH_MAX], path[PATH_MAX + 64], err[512] = "";
    const char *why = NULL;
    char *want, *have;

    (void)state;
    if (!root)
        fail_msg("OG_TEST_SOURCE_ROOT is not set (run through meson test)");
    scratch(dir, "dev-table");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_dev_apply(&c, err, sizeof err), 0);
    assert_int_equal(og_timings_check(&c.timings, &why), 0);
    assert_true(c.timings.execution_lease_us <= 10 * 1000000);
    assert_true(c.timings.recovery_delay_us / 2 <= 1000000);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    FMT(path, "%s/sandbox-credits.v1.json", dir);
    assert_string_equal(c.provider_table, path);
    have = read_text(path);
    FMT(path, "%s/providers/sandbox-credits.v1.json", root);
    want = read_text(path);
    assert_non_null(have);
    assert_non_null(want);
    assert_string_equal(have, want);
    free(have);
    free(want);
    /* The payout pipeline's table too, and its dev timings keep R3-R7. */
    FMT(path, "%s/sandbox-payouts.v1.json", dir);
    assert_string_equal(c.payouts_table, path);
    have = read_text(path);
    FMT(path, "%s/providers/sandbox-payouts.v1.json", root);
    want = read_text(path);
    assert_non_null(have);
    assert_non_null(want);
    assert_string_equal(have, want);
    free(have);
    free(want);
    assert_true(c.payouts_runner);
    assert_string_equal(c.payouts_worker_id, "dev-payout-worker");
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), 0);
    assert_int_equal(og_srv_config_check_payouts(&c, err, sizeof err), 0);
    og_srv_config_free(&c);
}

void dev_prepare_reuses_keys_and_credentials(void **state)
{
    og_srv_config a, b;
    char dir[PATH_MAX], err[512] = "", *first, *second, path[PATH_MAX];

    (void)state;
    scratch(dir, "dev-reuse");
    assert_int_equal(og_srv_config_defaults(&a), 0);
    assert_int_equal(og_srv_dev_prepare(&a, dir, NULL, err, sizeof err), 0);
    FMT(path, "%s/%s", dir, OG_DEV_CREDENTIALS);
    first = read_text(path);
    assert_non_null(first);

    assert_int_equal(og_srv_config_defaults(&b), 0);
    assert_int_equal(og_srv_dev_prepare(&b, dir, "sqlite:/tmp/elsewhere.db",
                                        err, sizeof err),
                     0);
    second = read_text(path);
    assert_non_null(second);
    assert_string_equal(first, second);
    free(first);
    free(second);
    /* The redemption key too: a new one would unseal nothing stored. */
    FMT(path, "%s/%s", dir, OG_DEV_REDEMPTION_KEY);
    first = read_text(path);
    assert_non_null(first);
    assert_int_equal(og_srv_dev_prepare(&b, dir, "sqlite:/tmp/elsewhere.db",
                                        err, sizeof err),
                     0);
    second = read_text(path);
    assert_string_equal(first, second);
    assert_int_equal(a.n_principals, b.n_principals);
    assert_memory_equal(a.principals, b.principals,
                        a.n_principals * sizeof *a.principals);
    assert_string_equal(b.store_url, "sqlite:/tmp/elsewhere.db");
    assert_dev_state(dir, &b);
    og_srv_config_free(&a);
    og_srv_config_free(&b);
    free(first);
    free(second);
}

void dev_prepare_completes_an_old_credentials_file_and_refuses_a_broken_one(void **state)
{
    og_srv_config c;
    char dir[PATH_MAX], path[PATH_MAX], key[OG_API_KEY_MAX + 1], err[512];

    (void)state;
    scratch(dir, "dev-broken");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    cred_key(dir, "agent", key);
    og_srv_config_free(&c);

    /* A credentials file from before a role existed (no operator, no
     * payout roles): dev mode adds the missing roles' principals and keeps
     * the others' ids and keys (D3); dev-env then prints every role. */
    FMT(path, "%s/%s", dir, OG_DEV_CREDENTIALS);
    {
        char text[1024], k2[OG_API_KEY_MAX + 1];
        og_srv_config d;

        FMT(text, "{\"issuer\": \"oncegate-dev\", \"principals\": {"
                 "\"issuer\": {\"id\": \"i\", \"api_key\": \"k1\"}, "
                 "\"agent\": {\"id\": \"a\", \"api_key\": \"%s\"}, "
                 "\"enforcer\": {\"id\": \"e\", \"api_key\": \"k3\"}, "
                 "\"revoker\": {\"id\": \"r\", \"api_key\": \"k4\"}}}",
                 key);
        write_text(path, text);
        chmod(path, 0600);
        assert_int_equal(og_srv_config_defaults(&c), 0);
        err[0] = '\0';
        assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err),
                         0);
        assert_string_equal(err, "");
        assert_int_equal(c.n_principals, OG_ROLE_COUNT);
        assert_string_equal(c.principals[0].id, "i");
        assert_string_equal(c.principals[1].id, "a");
        cred_key(dir, "agent", k2);
        assert_string_equal(k2, key);
        cred_key(dir, "issuer", k2);
        assert_string_equal(k2, "k1");
        for (int i = 0; i < OG_ROLE_COUNT; i++) {
            unsigned char h[OG_API_KEY_HASH_LEN];

            cred_key(dir, og_role_name(1u << i), k2);
            sha256(k2, h);
            assert_memory_equal(c.principals[i].key_hash, h, sizeof h);
        }
        assert_string_equal(c.principals[OG_ROLE_IDX_OPERATOR].id,
                            "dev-operator");
        assert_string_equal(c.principals[OG_ROLE_IDX_PAYOUT_WORKER].id,
                            "dev-payout-worker");
        assert_string_equal(c.principals[OG_ROLE_IDX_CLERK].id, "clerk-22");
        {
            struct stat st;

            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_mode & 0777, 0600);
        }
        /* complete now: a second start changes nothing */
        {
            char *before = read_text(path), *after;

            assert_int_equal(og_srv_config_defaults(&d), 0);
            assert_int_equal(og_srv_dev_prepare(&d, dir, NULL, err,
                                                sizeof err),
                             0);
            after = read_text(path);
            assert_string_equal(before, after);
            free(before);
            free(after);
            og_srv_config_free(&d);
        }
        og_srv_config_free(&c);
    }

    /* Two roles sharing one key are still refused, naming no key. */
    {
        char text[1024];

        FMT(text, "{\"issuer\": \"oncegate-dev\", \"principals\": {"
                 "\"issuer\": {\"id\": \"i\", \"api_key\": \"%s\"}, "
                 "\"agent\": {\"id\": \"a\", \"api_key\": \"%s\"}}}",
                 key, key);
        write_text(path, text);
    }
    assert_int_equal(og_srv_config_defaults(&c), 0);
    err[0] = '\0';
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err),
                     OG_EINVAL);
    assert_non_null(strstr(err, "share one api_key"));
    assert_null(strstr(err, key)); /* never a key in an error */
    assert_null(c.principals);     /* c unchanged on failure */

    /* Not JSON, around a key: only line and column are reported. */
    {
        char text[1024];
        FMT(text, "{\"issuer\": \"oncegate-dev\", %s}", key);
        write_text(path, text);
    }
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err),
                     OG_EINVAL);
    assert_non_null(strstr(err, "not valid JSON (line 1, column"));
    assert_null(strstr(err, key));
    assert_null(strstr(err, "og_"));
    og_srv_config_free(&c);
}

/* Writes a fake `curl` into bin that records each call's URL, headers and
 * body in LOGDIR/N.{url,hdr,data} and answers POST /v1/grants with a
 * token. */
static void write_fake_curl(const char *bin)
{
    char path[PATH_MAX];

    FMT(path, "%s/curl", bin);
    write_text(path,
               "#!/bin/bash\n"
               "n=$(ls \"$LOGDIR\" | grep -c '\\.url$')\n"
               "url= hdr= data=\n"
               "while [ $# -gt 0 ]; do\n"
               "  case \"$1\" in\n"
               "    -H) hdr=\"$hdr$2|\"; shift;;\n"
               "    -d) data=$2; shift;;\n"
               "    -w|-X) shift;;\n"
               "    http*) url=$1;;\n"
               "  esac\n"
               "  shift\n"
               "done\n"
               "printf '%s' \"$hdr\" > \"$LOGDIR/$n.hdr\"\n"
               "printf '%s' \"$data\" > \"$LOGDIR/$n.data\"\n"
               "printf '%s' \"$url\" > \"$LOGDIR/$n.url\"\n"
               "case \"$url\" in */v1/grants) printf '%s\\n' "
               "'{\"grant_id\": \"g1\", \"issuer\": \"oncegate-dev\", "
               "\"token\": \"eyJhbGciOiJFZERTQSJ9.eyJ4IjoxfQ.c2ln-_\", "
               "\"family\": \"fam-1\"}';; esac\n");
    assert_int_equal(chmod(path, 0755), 0);
}

/* The text of LOGDIR/N.ext, malloc'd. */
static char *call_part(const char *logdir, int n, const char *ext)
{
    char path[PATH_MAX], *t;

    FMT(path, "%s/%d.%s", logdir, n, ext);
    t = read_text(path);
    if (!t)
        fail_msg("the banner's commands made no call %d (%s)", n, path);
    return t;
}

/* Asserts call n sent a JSON body whose member name is the string want
 * (want NULL: any UUID, returned in uuid). */
static void assert_body_member(const char *logdir, int n, const char *name,
                               const char *want, char uuid[OG_UUID_LEN + 1])
{
    char *data = call_part(logdir, n, "data");
    json_error_t je;
    json_t *j = json_loads(data, JSON_REJECT_DUPLICATES, &je), *v;

    if (!j)
        fail_msg("call %d: body is not JSON: %s (%s)", n, data, je.text);
    v = json_object_get(j, name);
    assert_true(json_is_string(v));
    if (want)
        assert_string_equal(json_string_value(v), want);
    else {
        assert_int_equal(json_string_length(v), OG_UUID_LEN);
        strcpy(uuid, json_string_value(v));
    }
    json_decref(j);
    free(data);
}

void dev_banner_shows_no_key_and_its_commands_work(void **state)
{
    og_srv_dev_sandbox sb = {.pid = 1, .url = "http://127.0.0.1:18081",
                             .state = "/tmp/x/sandbox.db"};
    og_srv_config c;
    char dir[PATH_MAX], bin[PATH_MAX], logdir[PATH_MAX], script[PATH_MAX];
    char key[OG_API_KEY_MAX + 1], err[512], cmd[4 * PATH_MAX];
    char op1[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1], *buf = NULL, *s;
    size_t len = 0;
    FILE *f;

    (void)state;
    scratch(dir, "dev-banner");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    c.provider_url = strdup("http://127.0.0.1:18081");
    og_srv_dev_banner(f, &c, dir, "http://127.0.0.1:18080",
                      "/opt/my oncegate/oncegate", &sb);
    assert_int_equal(fclose(f), 0);

    assert_non_null(strstr(buf, "http://127.0.0.1:18080"));
    assert_non_null(strstr(buf, "NOT FOR PRODUCTION"));
    assert_non_null(strstr(buf, "dev-env --data-dir "));
    assert_non_null(strstr(buf, "'/opt/my oncegate/oncegate' dev-env"));
    assert_non_null(strstr(buf, "OG_OPERATOR_KEY"));
    assert_non_null(strstr(buf, OG_DEV_CREDENTIALS));
    assert_non_null(strstr(buf, "provider     http://127.0.0.1:18081"));
    assert_non_null(strstr(buf, "200, applied"));
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        cred_key(dir, og_role_name(1u << i), key);
        assert_null(strstr(buf, key));
    }

    /* Paste the commands after "paste in order:" into bash, with a fake
     * curl that records what it was asked to send. */
    scratch(bin, "bin");
    scratch(logdir, "curl-log");
    scratch(script, "banner.sh");
    assert_int_equal(mkdir(bin, 0700), 0);
    assert_int_equal(mkdir(logdir, 0700), 0);
    write_fake_curl(bin);
    FMT(cmd, "%s/sleep", bin); /* step 5 waits for recovery: not here */
    write_text(cmd, "#!/bin/sh\nexit 0\n");
    assert_int_equal(chmod(cmd, 0755), 0);
    f = fopen(script, "w");
    assert_non_null(f);
    s = strstr(buf, "paste in order:\n");
    assert_non_null(s);
    fputs(s + strlen("paste in order:\n"), f);
    assert_int_equal(fclose(f), 0);
    FMT(cmd, "cd '%s' && PATH='%s':\"$PATH\" LOGDIR='%s' OG_ISSUER_KEY=ik "
             "OG_AGENT_KEY=ak OG_OPERATOR_KEY=ok OG_CLERK_KEY=ck "
             "bash -eu '%s' >/dev/null 2>&1",
             g_dir, bin, logdir, script);
    assert_int_equal(system(cmd), 0);

    s = call_part(logdir, 0, "url");
    assert_string_equal(s, "http://127.0.0.1:18080/v1/grants");
    free(s);
    s = call_part(logdir, 0, "hdr");
    assert_non_null(strstr(s, "Authorization: Bearer ik|"));
    assert_non_null(strstr(s, "Content-Type: application/json|"));
    free(s);
    assert_body_member(logdir, 0, "subject", "dev-agent", NULL);
    for (int n = 1; n <= 2; n++) {
        s = call_part(logdir, n, "url");
        assert_string_equal(s, "http://127.0.0.1:18080/v1/operations");
        free(s);
        s = call_part(logdir, n, "hdr");
        assert_non_null(strstr(s, "Authorization: Bearer ak|"));
        free(s);
        assert_body_member(logdir, n, "token",
                           "eyJhbGciOiJFZERTQSJ9.eyJ4IjoxfQ.c2ln-_", NULL);
    }
    assert_body_member(logdir, 1, "operation_id", NULL, op1);
    assert_body_member(logdir, 2, "operation_id", NULL, op2);
    assert_string_not_equal(op1, op2); /* the replay uses a new id */
    s = call_part(logdir, 3, "url");
    FMT(cmd, "http://127.0.0.1:18080/v1/operations/%s", op1);
    assert_string_equal(s, cmd);
    free(s);
    s = call_part(logdir, 3, "hdr");
    assert_non_null(strstr(s, "Authorization: Bearer ak|"));
    free(s);
    /* 5: arm the sandbox's lost answer, issue, present, read again. */
    s = call_part(logdir, 4, "url");
    assert_string_equal(s, "http://127.0.0.1:18081/_control/faults");
    free(s);
    assert_body_member(logdir, 4, "fault", "drop_response_after_effect",
                       NULL);
    s = call_part(logdir, 5, "url");
    assert_string_equal(s, "http://127.0.0.1:18080/v1/grants");
    free(s);
    s = call_part(logdir, 6, "url");
    assert_string_equal(s, "http://127.0.0.1:18080/v1/operations");
    free(s);
    assert_body_member(logdir, 6, "operation_id", NULL, op2);
    assert_string_not_equal(op1, op2);
    s = call_part(logdir, 7, "url");
    FMT(cmd, "http://127.0.0.1:18080/v1/operations/%s", op2);
    assert_string_equal(s, cmd);
    free(s);
    /* The payout path: read PAY-3107 as the operator, arm the lost
     * answer, the clerk's intent (the record's terms, version 1, a
     * release time), then reads (the fake never answers Paid). */
    s = call_part(logdir, 8, "url");
    assert_string_equal(s, "http://127.0.0.1:18080/v1/admin/payouts/PAY-3107");
    free(s);
    s = call_part(logdir, 8, "hdr");
    assert_non_null(strstr(s, "Authorization: Bearer ok|"));
    free(s);
    s = call_part(logdir, 9, "url");
    assert_string_equal(s, "http://127.0.0.1:18081/_control/faults");
    free(s);
    assert_body_member(logdir, 9, "fault", "drop_response_after_effect",
                       NULL);
    s = call_part(logdir, 10, "url");
    assert_string_equal(s,
                        "http://127.0.0.1:18080/v1/payouts/PAY-3107/submit");
    free(s);
    s = call_part(logdir, 10, "hdr");
    assert_non_null(strstr(s, "Authorization: Bearer ck|"));
    free(s);
    assert_body_member(logdir, 10, "beneficiary_id", "BEN-2208", NULL);
    assert_body_member(logdir, 10, "destination_id", "DST-77", NULL);
    assert_body_member(logdir, 10, "amount", "4250.00", NULL);
    assert_body_member(logdir, 10, "currency", "EUR", NULL);
    assert_body_member(logdir, 10, "purpose", "supplier-invoice INV-9031",
                       NULL);
    {
        char *data = call_part(logdir, 10, "data");
        json_t *j = json_loads(data, 0, NULL);
        int64_t at = 0;

        assert_non_null(j);
        assert_int_equal(json_integer_value(json_object_get(j,
                                                            "payout_version")),
                         1);
        assert_int_equal(og_time_parse_rfc3339(
                             json_string_value(json_object_get(j,
                                                               "release_at")),
                             &at),
                         0);
        json_decref(j);
        free(data);
    }
    s = call_part(logdir, 11, "url");
    assert_string_equal(s, "http://127.0.0.1:18080/v1/admin/payouts/PAY-3107");
    free(s);
    free(buf);
    og_srv_config_free(&c);
}

void dev_banner_quotes_ipv6_urls_for_the_shell(void **state)
{
    og_srv_config c;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    (void)state;
    assert_non_null(f);
    assert_int_equal(og_srv_config_defaults(&c), 0);
    og_srv_dev_banner(f, &c, "/nonexistent/dir", "http://[::1]:8080",
                      "oncegate", NULL);
    assert_int_equal(fclose(f), 0);
    assert_non_null(strstr(buf, "curl -sS -g -X POST 'http://[::1]:8080'"
                                "/v1/grants"));
    assert_non_null(strstr(buf, "eval \"$(oncegate dev-env --data-dir "
                                "/nonexistent/dir)\""));
    free(buf);
    og_srv_config_free(&c);
}

/* In a child: waits for the parent's go, prepares dir, writes the
 * principals' hashes to out and exits 0 (1 on failure). Never returns. */
static void dev_child(const char *dir, int go, int out)
{
    og_srv_config c;
    char err[512], b;
    int ok;

    if (read(go, &b, 1) < 0)
        _exit(2);
    ok = og_srv_config_defaults(&c) == 0 &&
         og_srv_dev_prepare(&c, dir, NULL, err, sizeof err) == 0;
    for (size_t i = 0; ok && i < c.n_principals; i++)
        ok = write(out, c.principals[i].key_hash, OG_API_KEY_HASH_LEN) ==
             OG_API_KEY_HASH_LEN;
    og_srv_config_free(&c);
    _exit(ok ? 0 : 1);
}

void two_processes_preparing_one_dir_agree(void **state)
{
    enum { N = 2 };
    unsigned char got[N][OG_ROLE_COUNT * OG_API_KEY_HASH_LEN];
    int go[2], out[N][2], status;
    pid_t pid[N];
    char dir[PATH_MAX];
    og_srv_config c;

    (void)state;
    scratch(dir, "dev-race");
    assert_int_equal(pipe(go), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(pipe(out[i]), 0);
        pid[i] = fork();
        assert_true(pid[i] >= 0);
        if (pid[i] == 0) {
            close(go[1]);
            close(out[i][0]);
            dev_child(dir, go[0], out[i][1]);
        }
        close(out[i][1]);
    }
    close(go[0]);
    close(go[1]); /* both children's reads return: go */
    for (int i = 0; i < N; i++) {
        size_t have = 0;
        ssize_t r;

        while (have < sizeof got[i] &&
               (r = read(out[i][0], got[i] + have, sizeof got[i] - have)) > 0)
            have += (size_t)r;
        close(out[i][0]);
        assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(have, sizeof got[i]);
    }
    assert_memory_equal(got[0], got[1], sizeof got[0]);

    /* And they match what is on disk: one key, one credentials file. */
    assert_int_equal(og_srv_config_defaults(&c), 0);
    {
        char err[512];
        assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    }
    assert_dev_state(dir, &c);
    for (int i = 0; i < OG_ROLE_COUNT; i++)
        assert_memory_equal(c.principals[i].key_hash,
                            got[0] + i * OG_API_KEY_HASH_LEN,
                            OG_API_KEY_HASH_LEN);
    og_srv_config_free(&c);
}

/* Runs og_cli_dev_env with args, stdout and stderr captured into out / errt
 * (malloc'd). Returns its exit code. */
static int run_dev_env(int argc, char **argv, char **out, char **errt)
{
    char po[PATH_MAX], pe[PATH_MAX];
    int so = dup(1), se = dup(2), fo, fe, rc;

    scratch(po, "dev-env.out");
    scratch(pe, "dev-env.err");
    fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(so >= 0 && se >= 0 && fo >= 0 && fe >= 0);
    fflush(stdout);
    fflush(stderr);
    dup2(fo, 1);
    dup2(fe, 2);
    rc = og_cli_dev_env(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so), close(se), close(fo), close(fe);
    *out = read_text(po);
    *errt = read_text(pe);
    assert_non_null(*out);
    assert_non_null(*errt);
    return rc;
}

void dev_env_prints_exports_and_refuses_a_missing_file(void **state)
{
    og_srv_config c;
    char dir[PATH_MAX], missing[PATH_MAX], key[OG_API_KEY_MAX + 1];
    char line[512], err[512], *out, *errt;

    (void)state;
    scratch(dir, "dev-env");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    og_srv_config_free(&c);
    {
        char *argv[] = {"dev-env", "--data-dir", dir, NULL};
        assert_int_equal(run_dev_env(3, argv, &out, &errt), 0);
    }
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        const char *upper[] = {"ISSUER",       "AGENT",    "ENFORCER",
                               "REVOKER",      "OPERATOR", "PAYOUT_ADMIN",
                               "CLERK",        "PAYOUT_WORKER", "APPROVER"};
        _Static_assert(sizeof upper / sizeof upper[0] == OG_ROLE_COUNT,
                       "one export name per role");
        cred_key(dir, og_role_name(1u << i), key);
        FMT(line, "export OG_%s_KEY='%s'\n", upper[i], key);
        assert_non_null(strstr(out, line));
    }
    assert_string_equal(errt, "");
    free(out);
    free(errt);

    scratch(missing, "no-such-dir");
    {
        char *argv[] = {"dev-env", "--data-dir", missing, NULL};
        assert_int_equal(run_dev_env(3, argv, &out, &errt), 78);
    }
    assert_string_equal(out, "");
    assert_non_null(strstr(errt, "no-such-dir/" OG_DEV_CREDENTIALS));
    free(out);
    free(errt);
    {
        char *argv[] = {"dev-env", "--bogus", NULL};
        assert_int_equal(run_dev_env(2, argv, &out, &errt), 2);
        free(out);
        free(errt);
    }
    {
        char *argv[] = {"dev-env", "--data-dir", NULL};
        assert_int_equal(run_dev_env(2, argv, &out, &errt), 2);
        free(out);
        free(errt);
    }
    {
        char *argv[] = {"dev-env", "--help", NULL};
        assert_int_equal(run_dev_env(2, argv, &out, &errt), 0);
        assert_non_null(strstr(out, "usage: oncegate dev-env"));
        free(out);
        free(errt);
    }
}
