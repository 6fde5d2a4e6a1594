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
 * Files live in a mkdtemp directory removed after the run.
 * OG_CONFIG_DOC_WRITE=1 rewrites docs/config.md from the table instead of
 * comparing it.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <sodium.h>

#include "oncegate/redeem.h"
#include "serve.h"

#define H1 "9b346041bc9a49574eb2665b2ad2a0a3f9f9cce4e42f5d1f26deb8a256b5966a"
#define H2 "c8df51469c308a59bfbd48a3e0bdd228ca922d6032035f5ef6e4ad45f473a9f3"

/* snprintf into an array, failing the test when the text does not fit. */
#define FMT(buf, ...)                                                          \
    assert_true(snprintf(buf, sizeof buf, __VA_ARGS__) < (int)sizeof buf)

static char g_dir[PATH_MAX]; /* this run's scratch directory */

/* ===========================================================================
 * Helpers.
 * ========================================================================= */

/* g_dir/name into buf. */
static void scratch(char buf[PATH_MAX], const char *name)
{
    int n = snprintf(buf, PATH_MAX, "%s/%s", g_dir, name);
    assert_true(n > 0 && n < PATH_MAX);
}

/* Writes text to path, replacing it. */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* The whole file at path, malloc'd (caller frees), or NULL when missing. */
static char *read_text(const char *path)
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

/* SHA-256 of s. */
static void sha256(const char *s, unsigned char out[OG_API_KEY_HASH_LEN])
{
    crypto_hash_sha256(out, (const unsigned char *)s, strlen(s));
}

/* The number of oncegate-dev.*.private.jwk files in keys_dir. */
static int count_private_keys(const char *keys_dir)
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

/* The api_key of role in DIR/dev-credentials.json, into key. */
static void cred_key(const char *dir, const char *role,
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
    /* Held to it outside the file too (C1). */
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
}

static void dev_prepare_creates_credentials_and_one_key(void **state)
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
static void dev_prepare_writes_the_sandbox_table_and_dev_timings_hold(
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
    og_srv_dev_timings(&c.timings);
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
    og_srv_config_free(&c);
}

static void dev_prepare_reuses_keys_and_credentials(void **state)
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

static void dev_prepare_refuses_a_broken_credentials_file(void **state)
{
    og_srv_config c;
    char dir[PATH_MAX], path[PATH_MAX], key[OG_API_KEY_MAX + 1], err[512];

    (void)state;
    scratch(dir, "dev-broken");
    assert_int_equal(og_srv_config_defaults(&c), 0);
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err), 0);
    cred_key(dir, "agent", key);
    og_srv_config_free(&c);

    /* A credentials file without the operator role, keeping a real key. */
    FMT(path, "%s/%s", dir, OG_DEV_CREDENTIALS);
    {
        char text[1024];
        FMT(text, "{\"issuer\": \"oncegate-dev\", \"principals\": {"
                 "\"issuer\": {\"id\": \"i\", \"api_key\": \"k1\"}, "
                 "\"agent\": {\"id\": \"a\", \"api_key\": \"%s\"}, "
                 "\"enforcer\": {\"id\": \"e\", \"api_key\": \"k3\"}, "
                 "\"revoker\": {\"id\": \"r\", \"api_key\": \"k4\"}}}",
                 key);
        write_text(path, text);
    }
    assert_int_equal(og_srv_config_defaults(&c), 0);
    err[0] = '\0';
    assert_int_equal(og_srv_dev_prepare(&c, dir, NULL, err, sizeof err),
                     OG_EINVAL);
    assert_non_null(strstr(err, "missing role \"operator\""));
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

static void dev_banner_shows_no_key_and_its_commands_work(void **state)
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
             "OG_AGENT_KEY=ak bash -eu '%s' >/dev/null 2>&1",
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
    free(buf);
    og_srv_config_free(&c);
}

static void dev_banner_quotes_ipv6_urls_for_the_shell(void **state)
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

static void two_processes_preparing_one_dir_agree(void **state)
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

static void dev_env_prints_exports_and_refuses_a_missing_file(void **state)
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
        const char *upper[] = {"ISSUER", "AGENT", "ENFORCER", "REVOKER",
                               "OPERATOR"};
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
        cmocka_unit_test(dev_prepare_refuses_a_broken_credentials_file),
        cmocka_unit_test(dev_banner_shows_no_key_and_its_commands_work),
        cmocka_unit_test(dev_banner_quotes_ipv6_urls_for_the_shell),
        cmocka_unit_test(two_processes_preparing_one_dir_agree),
        cmocka_unit_test(dev_env_prints_exports_and_refuses_a_missing_file),
        cmocka_unit_test(admission_bound_missing_or_too_long_is_refused),
        cmocka_unit_test(
            missing_transaction_timeout_or_undeclared_sync_commit_wait_is_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
