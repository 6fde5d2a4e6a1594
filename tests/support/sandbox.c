/*
 * sandbox.c — an oncegate-sandbox process beside a test (support.h,
 * "The sandbox"): started on a free port with a fresh state and its control
 * API, asked over that API, stopped and removed. Written once for the test
 * programs that drive the provider through the library.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "support.h"

#define T_SBX_READY "oncegate-sandbox: listening on http://"

void t_sbx_start(t_sbx *sb, const char *prefix)
{
    const char *bin = getenv("OG_TEST_SANDBOX");
    char state[160], out[160], err[160];
    char *argv[] = {(char *)bin, (char *)"--listen", (char *)"127.0.0.1:0",
                    (char *)"--state", state, (char *)"--control", NULL};
    int port = 0;

    if (!bin || !*bin)
        fail_msg("OG_TEST_SANDBOX must name the oncegate-sandbox binary");
    memset(sb, 0, sizeof *sb);
    if (snprintf(sb->dir, sizeof sb->dir, "/tmp/%s-XXXXXX", prefix) >=
        (int)sizeof sb->dir)
        fail_msg("sandbox directory prefix too long: %s", prefix);
    assert_non_null(mkdtemp(sb->dir));
    snprintf(state, sizeof state, "%s/sandbox.db", sb->dir);
    snprintf(out, sizeof out, "%s/stdout", sb->dir);
    snprintf(err, sizeof err, "%s/stderr", sb->dir);
    sb->pid = t_proc_spawn(argv, NULL, out, err);
    assert_true(sb->pid > 0);
    if (t_proc_wait_ready(sb->pid, out, T_SBX_READY, 30000, &port, NULL) !=
        0) {
        t_proc_print_output(out, err);
        fail_msg("oncegate-sandbox did not become ready");
    }
    snprintf(sb->url, sizeof sb->url, "http://127.0.0.1:%d", port);
}

void t_sbx_stop(t_sbx *sb)
{
    char cmd[160];

    t_proc_stop(sb->pid, SIGTERM, 30000, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sb->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", sb->dir);
}

/* Keeps the last chunk parsed as JSON: control answers are small and come
 * in one piece; anything else fails the caller's assert_non_null. */
static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    json_t **out = ud;

    json_decref(*out);
    *out = json_loadb(p, sz * n, 0, NULL);
    return sz * n;
}

json_t *t_sbx_control(const t_sbx *sb, const char *path, const char *body)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h =
        curl_slist_append(NULL, "Content-Type: application/json");
    char url[256];
    json_t *out = NULL;

    assert_non_null(c);
    snprintf(url, sizeof url, "%s%s", sb->url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    if (body) {
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    assert_non_null(out);
    return out;
}

int64_t t_sbx_stat(const t_sbx *sb, const char *name)
{
    json_t *j = t_sbx_control(sb, "/_control/stats", NULL);
    int64_t v = json_integer_value(json_object_get(j, name));

    json_decref(j);
    return v;
}
