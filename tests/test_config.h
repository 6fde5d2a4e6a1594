/*
 * test_config.h — what the files of test_config share: the scratch
 * directory and its helpers, and dev mode's tests (test_config_dev.c).
 */
#ifndef OG_TEST_CONFIG_H
#define OG_TEST_CONFIG_H

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
#include "support.h"

/* snprintf into an array, failing the test when the text does not fit. */
#define FMT(buf, ...)                                                          \
    assert_true(snprintf(buf, sizeof buf, __VA_ARGS__) < (int)sizeof buf)

/* This run's scratch directory (mkdtemp, removed after the run). */
extern char g_dir[PATH_MAX];

/* g_dir/name into buf. */
void scratch(char buf[PATH_MAX], const char *name);

/* Writes text to path, replacing it. */
void write_text(const char *path, const char *text);

/* The whole file at path, malloc'd (caller frees), or NULL when missing. */
char *read_text(const char *path);

/* SHA-256 of s. */
void sha256(const char *s, unsigned char out[OG_API_KEY_HASH_LEN]);

/* The number of oncegate-dev.*.private.jwk files in keys_dir. */
int count_private_keys(const char *keys_dir);

/* The api_key of role in DIR/dev-credentials.json, into key. */
void cred_key(const char *dir, const char *role,
              char key[OG_API_KEY_MAX + 1]);

/* test_config_dev.c */
void dev_prepare_creates_credentials_and_one_key(void **state);
void dev_prepare_reuses_keys_and_credentials(void **state);
void dev_prepare_writes_the_sandbox_table_and_dev_timings_hold(void **state);
void dev_prepare_completes_an_old_credentials_file_and_refuses_a_broken_one(void **state);
void dev_banner_shows_no_key_and_its_commands_work(void **state);
void dev_banner_quotes_ipv6_urls_for_the_shell(void **state);
void two_processes_preparing_one_dir_agree(void **state);
void dev_env_prints_exports_and_refuses_a_missing_file(void **state);

#endif
