/*
 * test_config.c — claims about the configuration of `oncegate serve`
 * (src/serve/config.c) and its dev mode (src/serve/dev.c):
 *
 *   - the defaults pass every check, and a full file lands every key;
 *   - the loader is strict: unknown keys, duplicates, wrong types, values
 *     outside their bounds and broken timing relations are refused, each
 *     with one line naming the key or relation;
 *   - principals are validated member by member;
 *   - docs/config.md is exactly what og_srv_config_doc() writes;
 *   - dev mode creates one issuer key and one credentials file (0600), the
 *     principals' hashes are the keys' SHA-256, a second run reuses both,
 *     two processes preparing one directory at once agree, and the banner
 *     never shows a key while its commands work when pasted.
 *
 * This file: the helpers (test_config.h), the loader's claims and the list
 * of every test in the order it runs; dev mode's are in test_config_dev.c.
 * Files live in a mkdtemp directory removed after the run.
 * OG_CONFIG_DOC_WRITE=1 rewrites docs/config.md from the table instead of
 * comparing it.
 */
#include <dirent.h>

#include "test_config.h"

#define H1 "9b346041bc9a49574eb2665b2ad2a0a3f9f9cce4e42f5d1f26deb8a256b5966a"
#define H2 "c8df51469c308a59bfbd48a3e0bdd228ca922d6032035f5ef6e4ad45f473a9f3"

char g_dir[PATH_MAX]; /* this run's scratch directory */

/* ===========================================================================
 * Helpers.
 * ========================================================================= */
void scratch(char buf[PATH_MAX], const char *name)
{
    int n = snprintf(buf, PATH_MAX, "%s/%s", g_dir, name);
    assert_true(n > 0 && n < PATH_MAX);
}

void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    FILE *m;

    if (!f)
        return NULL;
    m = open_memstream(&buf, &len);
    assert_non_null(m);
    for (int ch; (ch = fgetc(f)) != EOF;)
        fputc(ch, m);
    fclose(f);
    assert_int_equal(fclose(m), 0);
    return buf;
}

/* Loads json (written to a scratch file) over fresh defaults into *c.
 * Returns og_srv_config_load's code; the caller frees *c. */
static int load_json(const char *json, og_srv_config *c, char *err,
                     size_t errlen)
{
    char path[PATH_MAX];

    scratch(path, "config.json");
    write_text(path, json);
    assert_int_equal(og_srv_config_defaults(c), 0);
    return og_srv_config_load(c, path, err, errlen);
}

/* One refusal case: the file, the code and a text the error must hold. */
typedef struct refusal {
    const char *json;
    int rc;
    const char *needle;
} refusal;

/* Asserts every case is refused with its code and a one-line error that
 * starts with "config: " and holds its needle. */
static void expect_refusals(const refusal *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        og_srv_config c;
        char err[512] = "";
        int rc = load_json(cases[i].json, &c, err, sizeof err);

        if (rc != cases[i].rc || !strstr(err, cases[i].needle))
            fail_msg("case %zu: %s\n  rc %d (%s), want %d; err: %s\n"
                     "  want it to contain: %s",
                     i, cases[i].json, rc, og_err_name(rc), cases[i].rc, err,
                     cases[i].needle);
        assert_int_equal(strncmp(err, "config: ", 8), 0);
        assert_null(strchr(err, '\n'));
        og_srv_config_free(&c);
    }
}

void sha256(const char *s, unsigned char out[OG_API_KEY_HASH_LEN])
{
    crypto_hash_sha256(out, (const unsigned char *)s, strlen(s));
}

int count_private_keys(const char *keys_dir)
{
    DIR *d = opendir(keys_dir);
    struct dirent *e;
    int n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), sl = strlen(OG_KEY_PRIVATE_SUFFIX);
        if (strncmp(e->d_name, OG_DEV_ISSUER ".", strlen(OG_DEV_ISSUER) + 1) ==
                0 &&
            l > sl && strcmp(e->d_name + l - sl, OG_KEY_PRIVATE_SUFFIX) == 0)
            n++;
    }
    closedir(d);
    return n;
}

void cred_key(const char *dir, const char *role,
              char key[OG_API_KEY_MAX + 1])
{
    char path[PATH_MAX];
    json_error_t je;
    json_t *root, *k;

    FMT(path, "%s/%s", dir, OG_DEV_CREDENTIALS);
    root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    assert_non_null(root);
    k = json_object_get(json_object_get(json_object_get(root, "principals"),
                                        role),
                        "api_key");
    assert_true(json_is_string(k));
    assert_true(json_string_length(k) <= OG_API_KEY_MAX);
    strcpy(key, json_string_value(k));
    json_decref(root);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/og-test-config-XXXXXX");
    return mkdtemp(g_dir) && sodium_init() >= 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    char cmd[PATH_MAX + 16];

    (void)state;
    /* g_dir is mkdtemp's /tmp/og-test-config-XXXXXX: nothing to quote. */
    if (snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir) >= (int)sizeof cmd)
        return -1;
    return system(cmd) == 0 ? 0 : -1;
}

/* ===========================================================================
 * Defaults and a full file.
 * ========================================================================= */

static void defaults_pass_check(void **state)
{
    og_srv_config c;
    og_timings t;
    char err[256] = "";

    (void)state;
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 8080);
    assert_string_equal(c.store_url, OG_DEFAULT_STORE_URL);
    assert_string_equal(c.audience, "oncegate");
    assert_string_equal(c.issuer, "oncegate");
    assert_string_equal(c.keys_dir, "./keys");
    assert_null(c.signing_key);
    assert_int_equal(c.grant_form, OG_FORM_TOKEN);
    assert_int_equal(c.pool_size, 32);
    assert_int_equal(c.max_body_bytes, 16384);
    assert_int_equal(c.max_connections, 1024);
    assert_int_equal(c.drain_timeout_us, 10000 * INT64_C(1000));
    assert_int_equal(c.retry_after_s, 1);
    assert_string_equal(c.log_file, "-");
    assert_false(c.auto_migrate);
    assert_true(c.janitor_enabled);
    assert_int_equal(c.janitor_interval_us, 60000 * INT64_C(1000));
    assert_int_equal(c.janitor_batch, 1000);
    assert_int_equal(c.janitor_max_batches, 100);
    assert_int_equal(c.retention_mode, OG_RETAIN_KEEP);
    assert_int_equal(c.audit_retention_days, 365);
    assert_int_equal(c.n_principals, 0);
    assert_null(c.config_path);
    /* Redemption is off until a key file is configured. */
    assert_null(c.redemption_url);
    assert_null(c.redemption_key_file);
    assert_null(c.redemption_api_key_file);
    assert_int_equal(c.redemption_catch_up_us, 20000 * INT64_C(1000));
    assert_null(og_srv_config_redemption_url(&c));
    og_timings_default(&t);
    assert_memory_equal(&c.timings, &t, sizeof t);
    og_srv_config_free(&c);
    og_srv_config_free(&c); /* zeroed: a second free is harmless */
}

static void full_config_file_lands_every_key(void **state)
{
    static const char json[] =
        "{\"listen\": \"[::1]:9000\", \"store\": \"sqlite:/tmp/x.db\",\n"
        " \"audience\": \"payments\", \"issuer\": \"approvals-1\",\n"
        " \"keys_dir\": \"/etc/oncegate/keys\",\n"
        " \"signing_key\": \"/etc/oncegate/keys/approvals-1.k.private.jwk\",\n"
        " \"grant_form\": \"row\", \"pool_size\": 8, \"max_body_bytes\": 2048,\n"
        " \"max_connections\": 64, \"drain_timeout_ms\": 2500,\n"
        " \"retry_after_seconds\": 7, \"log_file\": \"/var/log/og.log\",\n"
        " \"auto_migrate\": true,\n"
        " \"janitor\": {\"enabled\": false, \"interval_ms\": 5000, \"batch\": 50,\n"
        "   \"max_batches\": 7},\n"
        " \"operations\": {\"retention_mode\": \"archive\",\n"
        "   \"audit_retention_days\": 30},\n"
        " \"timings\": {\"admission_leeway_ms\": 20000,\n"
        "   \"execution_lease_ms\": 90000, \"lease_margin_ms\": 6000,\n"
        "   \"submission_window_ms\": 7200000, \"store_timeout_ms\": 4000,\n"
        "   \"provider_timeout_ms\": 20000, \"recovery_lease_ms\": 70000,\n"
        "   \"recovery_delay_ms\": 15000,\n"
        "   \"provider_key_retention_ms\": 86400000,\n"
        "   \"provider_clock_margin_ms\": 600000, \"cleanup_margin_ms\": 400000,\n"
        "   \"max_clock_step_ms\": 5000, \"max_grant_lifetime_ms\": 1800000,\n"
        "   \"issue_time_skew_ms\": 10000},\n"
        " \"principals\": [\n"
        "   {\"id\": \"ui\", \"roles\": [\"issuer\", \"revoker\"],\n"
        "    \"api_key_sha256\": \"" H1 "\"},\n"
        "   {\"api_key_sha256\": \"" H2 "\", \"roles\": [\"agent\"], "
        "\"id\": \"agent-7\"}]}\n";
    og_srv_config c;
    unsigned char h[OG_API_KEY_HASH_LEN];
    char err[512] = "", path[PATH_MAX];

    (void)state;
    assert_int_equal(load_json(json, &c, err, sizeof err), 0);
    assert_string_equal(err, "");
    scratch(path, "config.json");
    assert_string_equal(c.config_path, path);
    assert_string_equal(c.listen_host, "::1");
    assert_int_equal(c.listen_port, 9000);
    assert_string_equal(c.store_url, "sqlite:/tmp/x.db");
    assert_string_equal(c.audience, "payments");
    assert_string_equal(c.issuer, "approvals-1");
    assert_string_equal(c.keys_dir, "/etc/oncegate/keys");
    assert_string_equal(c.signing_key,
                        "/etc/oncegate/keys/approvals-1.k.private.jwk");
    assert_int_equal(c.grant_form, OG_FORM_ROW);
    assert_int_equal(c.pool_size, 8);
    assert_int_equal(c.max_body_bytes, 2048);
    assert_int_equal(c.max_connections, 64);
    assert_int_equal(c.drain_timeout_us, 2500000);
    assert_int_equal(c.retry_after_s, 7);
    assert_string_equal(c.log_file, "/var/log/og.log");
    assert_true(c.auto_migrate);
    assert_false(c.janitor_enabled);
    assert_int_equal(c.janitor_interval_us, 5000000);
    assert_int_equal(c.janitor_batch, 50);
    assert_int_equal(c.janitor_max_batches, 7);
    assert_int_equal(c.retention_mode, OG_RETAIN_ARCHIVE);
    assert_int_equal(c.audit_retention_days, 30);
    assert_int_equal(c.timings.admission_leeway_us, 20000000);
    assert_int_equal(c.timings.execution_lease_us, 90000000);
    assert_int_equal(c.timings.lease_margin_us, 6000000);
    assert_int_equal(c.timings.submission_window_us, INT64_C(7200000000));
    assert_int_equal(c.timings.store_timeout_us, 4000000);
    assert_int_equal(c.timings.provider_timeout_us, 20000000);
    assert_int_equal(c.timings.recovery_lease_us, 70000000);
    assert_int_equal(c.timings.recovery_delay_us, 15000000);
    assert_int_equal(c.timings.provider_key_retention_us,
                     INT64_C(86400000000));
    assert_int_equal(c.timings.provider_clock_margin_us, 600000000);
    assert_int_equal(c.timings.cleanup_margin_us, 400000000);
    assert_int_equal(c.timings.max_clock_step_us, 5000000);
    assert_int_equal(c.timings.max_grant_lifetime_us, INT64_C(1800000000));
    assert_int_equal(c.timings.issue_time_skew_us, 10000000);
    assert_int_equal(c.n_principals, 2);
    assert_string_equal(c.principals[0].id, "ui");
    assert_int_equal(c.principals[0].roles, OG_ROLE_ISSUER | OG_ROLE_REVOKER);
    sha256("key-one", h);
    assert_memory_equal(c.principals[0].key_hash, h, sizeof h);
    assert_string_equal(c.principals[1].id, "agent-7");
    assert_int_equal(c.principals[1].roles, OG_ROLE_AGENT);
    sha256("key-two", h);
    assert_memory_equal(c.principals[1].key_hash, h, sizeof h);
    og_srv_config_free(&c);
}

static void partial_file_keeps_other_defaults(void **state)
{
    og_srv_config c;
    og_timings t;
    char err[256] = "";

    (void)state;
    assert_int_equal(load_json("{\"pool_size\": 4, \"signing_key\": \"\", "
                               "\"timings\": {\"store_timeout_ms\": 3000}}",
                               &c, err, sizeof err),
                     0);
    og_timings_default(&t);
    t.store_timeout_us = 3000000;
    assert_memory_equal(&c.timings, &t, sizeof t);
    assert_int_equal(c.pool_size, 4);
    assert_null(c.signing_key); /* "" means automatic */
    assert_int_equal(c.listen_port, 8080);
    assert_string_equal(c.issuer, "oncegate");
    og_srv_config_free(&c);
}

/* ===========================================================================
 * Strictness.
 * ========================================================================= */

static void unknown_top_level_key_is_refused_by_name(void **state)
{
    static const refusal cases[] = {
        {"{\"listn\": \"127.0.0.1:1\"}", OG_EINVAL,
         "config: unknown key \"listn\" (did you mean \"listen\"?)"},
        {"{\"verbose\": true}", OG_EINVAL, "unknown key \"verbose\""},
        {"{\"timings.store_timeout_ms\": 1}", OG_EINVAL,
         "unknown key \"timings.store_timeout_ms\""},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void unknown_timings_member_is_refused_by_name(void **state)
{
    static const refusal cases[] = {
        {"{\"timings\": {\"execution_lease\": 60000}}", OG_EINVAL,
         "unknown key \"timings.execution_lease\" (did you mean "
         "\"timings.execution_lease_ms\"?)"},
        {"{\"timings\": {\"bogus\": 1}}", OG_EINVAL,
         "unknown key \"timings.bogus\""},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void duplicate_key_is_refused(void **state)
{
    static const refusal cases[] = {
        {"{\"pool_size\": 4,\n \"pool_size\": 5}", OG_EINVAL,
         "line 2, column 12: duplicate key \"pool_size\""},
        {"{\"timings\": {\"store_timeout_ms\": 1000, \"store_timeout_ms\": "
         "2000}}",
         OG_EINVAL, "duplicate key \"store_timeout_ms\""},
        {"{\"principals\": [{\"id\": \"a\", \"id\": \"b\", \"roles\": "
         "[\"agent\"], \"api_key_sha256\": \"" H1 "\"}]}",
         OG_EINVAL, "duplicate key \"id\""},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void wrong_type_is_refused_by_name(void **state)
{
    static const refusal cases[] = {
        {"{\"pool_size\": \"32\"}", OG_EINVAL,
         "config: pool_size: must be an integer between 1 and 1024"},
        {"{\"pool_size\": 32.0}", OG_EINVAL, "pool_size: must be an integer"},
        {"{\"auto_migrate\": 1}", OG_EINVAL,
         "auto_migrate: must be true or false"},
        {"{\"store\": 5}", OG_EINVAL, "store: must be a string"},
        {"{\"timings\": 5}", OG_EINVAL, "timings: must be an object"},
        {"{\"listen\": 8080}", OG_EINVAL, "listen: must be \"HOST:PORT\""},
        {"{\"grant_form\": \"rows\"}", OG_EINVAL,
         "grant_form: must be \"token\" or \"row\""},
        {"{\"operations\": {\"retention_mode\": \"purge\"}}", OG_EINVAL,
         "operations.retention_mode: must be \"keep\", \"archive\" or "
         "\"delete\""},
        {"{\"operations\": {\"retention_mode\": 1}}", OG_EINVAL,
         "operations.retention_mode: must be"},
        {"{\"janitor\": {\"enabled\": \"yes\"}}", OG_EINVAL,
         "janitor.enabled: must be true or false"},
        {"{\"janitor\": true}", OG_EINVAL, "janitor: must be an object"},
        {"{\"principals\": {}}", OG_EINVAL,
         "principals: must be an array of objects"},
        {"[1, 2]", OG_EINVAL, "must hold one JSON object"},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void out_of_bounds_value_is_refused_by_name(void **state)
{
    static const refusal cases[] = {
        {"{\"timings\": {\"execution_lease_ms\": 31622400001}}", OG_EINVAL,
         "config: timings.execution_lease_ms: must be an integer between 0 "
         "and 31622400000"},
        {"{\"timings\": {\"store_timeout_ms\": -1}}", OG_EINVAL,
         "timings.store_timeout_ms: must be an integer between 0 and "
         "31622400000"},
        {"{\"pool_size\": 0}", OG_EINVAL,
         "pool_size: must be an integer between 1 and 1024"},
        {"{\"max_body_bytes\": 1048577}", OG_EINVAL,
         "max_body_bytes: must be an integer between 1024 and 1048576"},
        {"{\"max_connections\": 65537}", OG_EINVAL,
         "max_connections: must be an integer between 1 and 65536"},
        {"{\"drain_timeout_ms\": 600001}", OG_EINVAL,
         "drain_timeout_ms: must be an integer between 0 and 600000"},
        {"{\"retry_after_seconds\": 0}", OG_EINVAL,
         "retry_after_seconds: must be an integer between 1 and 3600"},
        {"{\"pool_size\": 99999999999999999999}", OG_EKEY_IO,
         "not JSON"}, /* jansson refuses integers it cannot hold */
        {"{\"store\": \"\"}", OG_EINVAL, "store: must be 1 to 4095 bytes"},
        {"{\"log_file\": \"a\\nb\"}", OG_EINVAL,
         "log_file: must be 1 to 4095 bytes without control characters"},
        {"{\"audience\": \"has space\"}", OG_EINVAL,
         "audience: must be 1-128 printable ASCII"},
        {"{\"issuer\": \"a/b\"}", OG_EINVAL,
         "issuer: must be 1-128 characters of [A-Za-z0-9._~-]"},
        {"{\"issuer\": \".hidden\"}", OG_EINVAL, "issuer: must be"},
        {"{\"pool_size\": 100, \"max_connections\": 50}", OG_EINVAL,
         "pool_size: must not exceed max_connections (50)"},
        {"{\"janitor\": {\"interval_ms\": 999}}", OG_EINVAL,
         "janitor.interval_ms: must be an integer between 1000 and 86400000"},
        {"{\"janitor\": {\"batch\": 0}}", OG_EINVAL,
         "janitor.batch: must be an integer between 1 and 100000"},
        {"{\"janitor\": {\"max_batches\": 1000001}}", OG_EINVAL,
         "janitor.max_batches: must be an integer between 1 and 1000000"},
        {"{\"operations\": {\"audit_retention_days\": 0}}", OG_EINVAL,
         "operations.audit_retention_days: must be an integer between 1 and "
         "36600"},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void provider_timeout_not_inside_lease_is_refused_as_T4(void **state)
{
    og_srv_config c;
    char err[512] = "";

    (void)state;
    /* execution_lease 60 s - lease_margin 5 s = 55 s: 55 s is not shorter. */
    assert_int_equal(load_json("{\"timings\": {\"provider_timeout_ms\": "
                               "55000}}",
                               &c, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "config: timings: T4"));
    assert_non_null(strstr(err, "provider_timeout"));
    og_srv_config_free(&c);

    err[0] = '\0';
    assert_int_equal(load_json("{\"timings\": {\"provider_timeout_ms\": "
                               "54999, \"execution_lease_ms\": 90000, "
                               "\"recovery_lease_ms\": 120000}}",
                               &c, err, sizeof err),
                     0);
    og_srv_config_free(&c);
}

static void audit_retention_shorter_than_refusal_retention_is_refused_as_R1(
    void **state)
{
    og_srv_config c;
    char err[512] = "";

    (void)state;
    /* max_grant_lifetime 2 days + skew 30 s + leeway 30 s + cleanup margin
     * 5 min: more than 2 days of audit retention are needed. */
    assert_int_equal(load_json("{\"timings\": {\"max_grant_lifetime_ms\": "
                               "172800000}, \"operations\": "
                               "{\"audit_retention_days\": 2}}",
                               &c, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "config: operations.audit_retention_days: "
                                "R1: "));
    assert_non_null(strstr(err, "(173160 s)"));
    og_srv_config_free(&c);

    err[0] = '\0';
    assert_int_equal(load_json("{\"timings\": {\"max_grant_lifetime_ms\": "
                               "172800000}, \"operations\": "
                               "{\"audit_retention_days\": 3}}",
                               &c, err, sizeof err),
                     0);
    /* Held to it outside the file too (CF1). */
    c.audit_retention_days = 1;
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), OG_ETIMINGS);
    assert_non_null(strstr(err, "R1"));
    og_srv_config_free(&c);
}

static void redemption_keys_land_and_its_url_defaults_to_the_provider(
    void **state)
{
    og_srv_config c;
    char err[512] = "";

    (void)state;
    assert_int_equal(
        load_json("{\"redemption\": {\"url\": \"https://auth.example/\","
                  " \"key_file\": \"/etc/oncegate/redemption.key\","
                  " \"api_key_file\": \"/etc/oncegate/auth.key\","
                  " \"catch_up_timeout_ms\": 45000}}",
                  &c, err, sizeof err),
        0);
    assert_string_equal(c.redemption_url, "https://auth.example/");
    assert_string_equal(c.redemption_key_file, "/etc/oncegate/redemption.key");
    assert_string_equal(c.redemption_api_key_file, "/etc/oncegate/auth.key");
    assert_int_equal(c.redemption_catch_up_us, 45000 * INT64_C(1000));
    assert_string_equal(og_srv_config_redemption_url(&c),
                        "https://auth.example/");
    og_srv_config_free(&c);
    /* Without its own URL the token endpoint is the provider. */
    assert_int_equal(
        load_json("{\"provider\": {\"url\": \"http://127.0.0.1:9\","
                  " \"table\": \"/t.json\"},"
                  " \"redemption\": {\"key_file\": \"/k\"}}",
                  &c, err, sizeof err),
        0);
    assert_string_equal(og_srv_config_redemption_url(&c), "http://127.0.0.1:9");
    og_srv_config_free(&c);
}

/* A token endpoint without a key file, one that is no http(s) URL, and a
 * catch-up bound a winner in flight could outlast (R2) are refused. */
static void redemption_relations_are_refused_by_name(void **state)
{
    static const refusal cases[] = {
        {"{\"redemption\": {\"url\": \"http://127.0.0.1:9\"}}", OG_EINVAL,
         "redemption.key_file: required with redemption.url"},
        {"{\"redemption\": {\"url\": \"ftp://h\", \"key_file\": \"/k\"}}",
         OG_EINVAL, "redemption.url: must start with http://"},
        /* provider 10 s + store 5 s = 15 s: 15 s is not more. */
        {"{\"redemption\": {\"url\": \"http://h\", \"key_file\": \"/k\","
         " \"catch_up_timeout_ms\": 15000}}",
         OG_ETIMINGS, "redemption.catch_up_timeout_ms: R2"},
        {"{\"redemption\": {\"url\": \"http://h\", \"key_file\": \"/k\"},"
         " \"timings\": {\"store_timeout_ms\": 12000,"
         " \"execution_lease_ms\": 60000}}",
         OG_ETIMINGS, "R2"},
        {"{\"redemption\": {\"catch_up_timeout_ms\": 0}}", OG_EINVAL,
         "redemption.catch_up_timeout_ms"},
        {"{\"redemption\": {\"catch_up_timeout_ms\": 600001}}", OG_EINVAL,
         "redemption.catch_up_timeout_ms"},
        {"{\"redemption\": {\"keyfile\": \"/k\"}}", OG_EINVAL,
         "did you mean \"redemption.key_file\""},
    };
    og_srv_config c;
    char err[512] = "";

    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
    /* R2 applies only when redemption is on. */
    assert_int_equal(load_json("{\"redemption\": {\"catch_up_timeout_ms\": "
                               "1000}}",
                               &c, err, sizeof err),
                     0);
    og_srv_config_free(&c);
}

static void unreadable_or_non_json_file_is_an_io_error(void **state)
{
    og_srv_config c;
    char err[512] = "", path[PATH_MAX];

    (void)state;
    assert_int_equal(load_json("{\"listen\": \"127.0.0.1:1\",\n \"store\" 5}",
                               &c, err, sizeof err),
                     OG_EKEY_IO);
    assert_non_null(strstr(err, "not JSON: line 2, column"));
    og_srv_config_free(&c);

    scratch(path, "missing.json");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_config_load(&c, path, err, sizeof err),
                     OG_EKEY_IO);
    assert_non_null(strstr(err, "missing.json: cannot read"));
    og_srv_config_free(&c);
}

static void check_holds_values_set_outside_the_file_to_the_table(void **state)
{
    og_srv_config c;
    char err[256] = "";

    (void)state;
    assert_int_equal(og_srv_config_defaults(&c), 0);
    c.pool_size = 0;
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), OG_EINVAL);
    assert_non_null(strstr(err, "pool_size"));
    c.pool_size = 32;
    free(c.issuer);
    c.issuer = strdup("../etc");
    assert_non_null(c.issuer);
    assert_int_equal(og_srv_config_check(&c, err, sizeof err), OG_EINVAL);
    assert_non_null(strstr(err, "config: issuer:"));
    og_srv_config_free(&c);
}

/* ===========================================================================
 * Principals.
 * ========================================================================= */

#define P_(members) "{\"principals\": [" members "]}"
#define OK_P(id, h) "{\"id\": \"" id "\", \"roles\": [\"agent\"], " \
                    "\"api_key_sha256\": \"" h "\"}"

static void bad_principals_are_refused_naming_the_member(void **state)
{
    static const refusal cases[] = {
        {P_(OK_P("a", H1) ", {\"id\": \"b\", \"roles\": [\"admin\"], "
                          "\"api_key_sha256\": \"" H2 "\"}"),
         OG_EINVAL, "config: principals[1].roles: unknown role \"admin\""},
        {P_("{\"id\": \"a\", \"roles\": [\"agent\", \"agent\"], "
            "\"api_key_sha256\": \"" H1 "\"}"),
         OG_EINVAL, "principals[0].roles: duplicate role \"agent\""},
        {P_("{\"id\": \"a\", \"roles\": [], \"api_key_sha256\": \"" H1 "\"}"),
         OG_EINVAL, "principals[0].roles: must be a non-empty array"},
        {P_("{\"id\": \"a\", \"roles\": [3], \"api_key_sha256\": \"" H1 "\"}"),
         OG_EINVAL, "principals[0].roles[0]: must be a string"},
        /* 63 characters */
        {P_(OK_P("a", "9b346041bc9a49574eb2665b2ad2a0a3f9f9cce4e42f5d1f26deb8a"
                      "256b5966")),
         OG_EINVAL, "principals[0].api_key_sha256: must be 64 lower-case hex"},
        /* upper case */
        {P_(OK_P("a", "9B346041BC9A49574EB2665B2AD2A0A3F9F9CCE4E42F5D1F26DEB8A"
                      "256B5966A")),
         OG_EINVAL, "principals[0].api_key_sha256: must be 64 lower-case hex"},
        /* not hex */
        {P_(OK_P("a", "9b346041bc9a49574eb2665b2ad2a0a3f9f9cce4e42f5d1f26deb8a"
                      "256b5966g")),
         OG_EINVAL, "principals[0].api_key_sha256: must be 64 lower-case hex"},
        {P_(OK_P("a", H1) ", " OK_P("a", H2)), OG_EINVAL,
         "principals[1].id: duplicate id \"a\" (also principals[0])"},
        {P_(OK_P("a", H1) ", " OK_P("b", H1)), OG_EINVAL,
         "principals[1].api_key_sha256: duplicate key hash (also "
         "principals[0])"},
        {P_("{\"id\": \"a\", \"roles\": [\"agent\"], \"api_key_sha256\": \"" H1
            "\", \"api_key\": \"secret\"}"),
         OG_EINVAL, "principals[0]: unknown key \"api_key\""},
        {P_("{\"id\": \"a\", \"roles\": [\"agent\"]}"), OG_EINVAL,
         "principals[0]: missing \"api_key_sha256\""},
        {P_("{\"id\": \"a b\", \"roles\": [\"agent\"], \"api_key_sha256\": \"" H1
            "\"}"),
         OG_EINVAL, "principals[0].id: must be 1-128 printable ASCII"},
        {P_("\"a\""), OG_EINVAL, "principals[0]: must be an object"},
    };
    (void)state;
    expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

static void more_than_4096_principals_are_refused(void **state)
{
    json_t *root = json_object(), *arr = json_array();
    og_srv_config c;
    char err[256] = "", *text;

    (void)state;
    assert_non_null(root);
    assert_non_null(arr);
    for (int i = 0; i <= 4096; i++) {
        unsigned char h[OG_API_KEY_HASH_LEN];
        char id[32], hex[2 * OG_API_KEY_HASH_LEN + 1];
        FMT(id, "p%d", i);
        sha256(id, h);
        sodium_bin2hex(hex, sizeof hex, h, sizeof h);
        assert_int_equal(json_array_append_new(arr, json_pack("{s:s, s:[s], s:s}",
                                                              "id", id, "roles",
                                                              "agent",
                                                              "api_key_sha256",
                                                              hex)),
                         0);
    }
    assert_int_equal(json_object_set_new(root, "principals", arr), 0);
    text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    assert_int_equal(load_json(text, &c, err, sizeof err), OG_EINVAL);
    assert_non_null(strstr(err, "principals: at most 4096 principals"));
    og_srv_config_free(&c);

    /* 4096 exactly loads. */
    assert_int_equal(json_array_remove(arr, 4096), 0);
    free(text);
    text = json_dumps(root, JSON_COMPACT);
    assert_non_null(text);
    assert_int_equal(load_json(text, &c, err, sizeof err), 0);
    assert_int_equal(c.n_principals, 4096);
    og_srv_config_free(&c);
    free(text);
    json_decref(root);
}

static void load_principals_rereads_only_the_principals(void **state)
{
    og_principal *ps = (og_principal *)1, *before = ps;
    size_t n = 99;
    unsigned char h[OG_API_KEY_HASH_LEN];
    char err[512] = "", path[PATH_MAX];

    (void)state;
    scratch(path, "reload.json");
    write_text(path, "{\"pool_size\": 4, \"principals\": [" OK_P("x", H2) "]}");
    assert_int_equal(og_srv_config_load_principals(path, &ps, &n, err,
                                                   sizeof err),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(ps[0].id, "x");
    assert_int_equal(ps[0].roles, OG_ROLE_AGENT);
    sha256("key-two", h);
    assert_memory_equal(ps[0].key_hash, h, sizeof h);
    free(ps);

    /* The same validation as a start: a broken file changes nothing. */
    ps = before;
    n = 99;
    write_text(path, "{\"principals\": [" OK_P("x", H2) ", " OK_P("x", H1) "]}");
    assert_int_equal(og_srv_config_load_principals(path, &ps, &n, err,
                                                   sizeof err),
                     OG_EINVAL);
    assert_non_null(strstr(err, "principals[1].id: duplicate id"));
    assert_ptr_equal(ps, before);
    assert_int_equal(n, 99);

    /* So does a typo elsewhere in the file that a restart would refuse. */
    write_text(path, "{\"pool_sise\": 4, \"principals\": []}");
    assert_int_equal(og_srv_config_load_principals(path, &ps, &n, err,
                                                   sizeof err),
                     OG_EINVAL);
    assert_non_null(strstr(err, "unknown key \"pool_sise\""));

    write_text(path, "{\"principals\": []}");
    assert_int_equal(og_srv_config_load_principals(path, &ps, &n, err,
                                                   sizeof err),
                     0);
    assert_int_equal(n, 0);
    free(ps);
}

/* ===========================================================================
 * Listen addresses.
 * ========================================================================= */

static void listen_accepts_ip_literals_with_a_port(void **state)
{
    static const struct {
        const char *in;
        int rc;
        const char *host;
        int port;
    } cases[] = {
        {"127.0.0.1:8080", 0, "127.0.0.1", 8080},
        {"0.0.0.0:65535", 0, "0.0.0.0", 65535},
        {"[::1]:0", 0, "::1", 0},
        {"[2001:db8::7]:443", 0, "2001:db8::7", 443},
        {"127.0.0.1", OG_EINVAL, NULL, 0},     /* missing port */
        {"127.0.0.1:", OG_EINVAL, NULL, 0},    /* empty port */
        {"127.0.0.1:70000", OG_EINVAL, NULL, 0},
        {"127.0.0.1:080a", OG_EINVAL, NULL, 0},
        {"127.0.0.1:-1", OG_EINVAL, NULL, 0},
        {"127.0.0.1:0000080", OG_EINVAL, NULL, 0},
        {":8080", OG_EINVAL, NULL, 0},
        {"::1:8080", OG_EINVAL, NULL, 0},      /* IPv6 needs brackets */
        {"[::1]8080", OG_EINVAL, NULL, 0},
        {"[::1]", OG_EINVAL, NULL, 0},
        {"[127.0.0.1]:80", OG_EINVAL, NULL, 0},
        {"localhost:8080", OG_EINVAL, NULL, 0}, /* literals only */
        {"256.0.0.1:80", OG_EINVAL, NULL, 0},
        {"", OG_EINVAL, NULL, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_srv_config c;

        assert_int_equal(og_srv_config_defaults(&c), 0);
        if (og_srv_config_set_listen(&c, cases[i].in) != cases[i].rc)
            fail_msg("listen \"%s\": want %d", cases[i].in, cases[i].rc);
        if (cases[i].rc == 0) {
            assert_string_equal(c.listen_host, cases[i].host);
            assert_int_equal(c.listen_port, cases[i].port);
        } else { /* unchanged on failure */
            assert_string_equal(c.listen_host, "127.0.0.1");
            assert_int_equal(c.listen_port, 8080);
        }
        og_srv_config_free(&c);
    }
}

/* ===========================================================================
 * docs/config.md.
 * ========================================================================= */

/* og_srv_config_doc's output, malloc'd (caller frees). */
static char *doc_text(void)
{
    char *buf = NULL, *copy;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    og_srv_config_doc(f);
    assert_int_equal(fclose(f), 0);
    /* A copy: GCC's -Wdangling-pointer mistakes pointers into a memstream
     * buffer for pointers to the local that held it. */
    copy = strdup(buf);
    free(buf);
    assert_non_null(copy);
    return copy;
}

static void docs_config_md_is_the_generated_text(void **state)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    char path[PATH_MAX], *want, *have;

    (void)state;
    if (!root)
        fail_msg("OG_TEST_SOURCE_ROOT is not set (run through meson test)");
    want = doc_text();
    FMT(path, "%s/docs/config.md", root);
    if (getenv("OG_CONFIG_DOC_WRITE") &&
        strcmp(getenv("OG_CONFIG_DOC_WRITE"), "1") == 0)
        write_text(path, want);
    have = read_text(path);
    if (!have || strcmp(have, want) != 0) {
        free(have);
        free(want);
        fail_msg("%s differs from og_srv_config_doc() (the table in "
                 "src/serve/config.c). Regenerate it: "
                 "`oncegate serve --config-doc > docs/config.md`, or "
                 "`OG_CONFIG_DOC_WRITE=1 meson test -C BUILDDIR config`",
                 path);
    }
    assert_non_null(strstr(want, "`oncegate serve --config-doc`"));
    assert_non_null(strstr(want, "| `timings.provider_timeout_ms` |"));
    assert_non_null(strstr(want, "T12:"));
    free(have);
    free(want);
}

static void the_documented_example_loads(void **state)
{
    char *doc = doc_text(), *start, *end, err[512] = "";
    og_srv_config c;

    (void)state;
    start = strstr(doc, "```json\n");
    assert_non_null(start);
    start += strlen("```json\n");
    end = strstr(start, "```\n");
    assert_non_null(end);
    *end = '\0';
    assert_int_equal(load_json(start, &c, err, sizeof err), 0);
    assert_string_equal(c.issuer, "approvals");
    assert_int_equal(c.n_principals, 2);
    og_srv_config_free(&c);
    free(doc);
}

/* A PostgreSQL deployment whose admission connections lack a finite
 * statement_timeout or lock_timeout, or carry one longer than the store
 * timeout, is refused at startup; SQLite (no such settings) passes. */
static void admission_bound_missing_or_too_long_is_refused(void **state)
{
    og_srv_config c;
    og_session_bounds b;
    char err[512];

    (void)state;
    assert_int_equal(og_srv_config_defaults(&c), 0);
    memset(&b, 0, sizeof b);
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err), 0);

    b.applicable = true;
    b.statement_timeout_ms = 5000;
    b.lock_timeout_ms = 5000;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err), 0);

    b.lock_timeout_ms = 0;
    err[0] = '\0';
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "lock_timeout=0ms"));

    b.lock_timeout_ms = 5000;
    b.statement_timeout_ms = 0;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "statement_timeout=0ms"));

    b.statement_timeout_ms = 5001;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "T9"));
    og_srv_config_free(&c);
}

/* PostgreSQL 17+: transaction_timeout must bound the admission too. A
 * server whose commits wait for a synchronous standby has a wait no
 * timeout bounds: refused until timings.commit_bound_ms declares one, and
 * T9 then makes cleanup_margin cover it. */
static void missing_transaction_timeout_or_undeclared_sync_commit_wait_is_refused(
    void **state)
{
    og_srv_config c;
    og_session_bounds b;
    const char *why = NULL;
    char err[512];

    (void)state;
    assert_int_equal(og_srv_config_defaults(&c), 0);
    memset(&b, 0, sizeof b);
    b.applicable = true;
    b.statement_timeout_ms = b.lock_timeout_ms = 5000;
    b.server_version_num = 170002;
    b.has_transaction_timeout = true;
    b.transaction_timeout_ms = 0;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "transaction_timeout=0ms"));
    b.transaction_timeout_ms = 6000;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    b.transaction_timeout_ms = 5000;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err), 0);

    b.sync_commit_waits = true;
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err),
                     OG_ETIMINGS);
    assert_non_null(strstr(err, "commit_bound_ms"));
    c.timings.commit_bound_us = 30 * INT64_C(1000000);
    assert_int_equal(og_srv_config_check_bounds(&c, &b, err, sizeof err), 0);
    /* ... and the declared bound counts in T9. */
    c.timings.commit_bound_us = 300 * INT64_C(1000000);
    assert_int_equal(og_timings_check(&c.timings, &why), OG_ETIMINGS);
    assert_non_null(strstr(why, "T9"));
    og_srv_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_pass_check),
        cmocka_unit_test(full_config_file_lands_every_key),
        cmocka_unit_test(partial_file_keeps_other_defaults),
        cmocka_unit_test(unknown_top_level_key_is_refused_by_name),
        cmocka_unit_test(unknown_timings_member_is_refused_by_name),
        cmocka_unit_test(duplicate_key_is_refused),
        cmocka_unit_test(wrong_type_is_refused_by_name),
        cmocka_unit_test(out_of_bounds_value_is_refused_by_name),
        cmocka_unit_test(provider_timeout_not_inside_lease_is_refused_as_T4),
        cmocka_unit_test(
            audit_retention_shorter_than_refusal_retention_is_refused_as_R1),
        cmocka_unit_test(
            redemption_keys_land_and_its_url_defaults_to_the_provider),
        cmocka_unit_test(redemption_relations_are_refused_by_name),
        cmocka_unit_test(unreadable_or_non_json_file_is_an_io_error),
        cmocka_unit_test(check_holds_values_set_outside_the_file_to_the_table),
        cmocka_unit_test(bad_principals_are_refused_naming_the_member),
        cmocka_unit_test(more_than_4096_principals_are_refused),
        cmocka_unit_test(load_principals_rereads_only_the_principals),
        cmocka_unit_test(listen_accepts_ip_literals_with_a_port),
        cmocka_unit_test(docs_config_md_is_the_generated_text),
        cmocka_unit_test(the_documented_example_loads),
        cmocka_unit_test(dev_prepare_creates_credentials_and_one_key),
        cmocka_unit_test(dev_prepare_reuses_keys_and_credentials),
        cmocka_unit_test(
            dev_prepare_writes_the_sandbox_table_and_dev_timings_hold),
        cmocka_unit_test(dev_prepare_completes_an_old_credentials_file_and_refuses_a_broken_one),
        cmocka_unit_test(dev_banner_shows_no_key_and_its_commands_work),
        cmocka_unit_test(dev_banner_quotes_ipv6_urls_for_the_shell),
        cmocka_unit_test(two_processes_preparing_one_dir_agree),
        cmocka_unit_test(dev_env_prints_exports_and_refuses_a_missing_file),
        cmocka_unit_test(admission_bound_missing_or_too_long_is_refused),
        cmocka_unit_test(
            missing_transaction_timeout_or_undeclared_sync_commit_wait_is_refused),
    };
    return t_run_tests("config", tests, group_setup, group_teardown);
}
