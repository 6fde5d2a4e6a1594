/*
 * harness.h — what the store tests share: the backend under test, raw access
 * to the real engine (to hold locks, inspect rows, terminate backends), ids,
 * and asserts that never compile out.
 */
#ifndef OG_TEST_HARNESS_H
#define OG_TEST_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "oncegate/oncegate.h"

typedef enum { T_SQLITE, T_POSTGRES } t_backend;

/* The backend under test and its store URL (set by t_setup_backend), and
 * the grant form the suite runs in (argv[3]: "token", the default, or
 * "row": every test case's grant is then issued as a row first). */
extern t_backend t_kind;
extern char t_url[4096];
extern og_grant_form t_form;
/* The consumption keys of the suite's stores (argv[4]: "readable", the
 * default, or "hashed"). A hashed PostgreSQL suite runs on a database of
 * its own, created by t_setup_backend and dropped by t_teardown_backend:
 * a store's keys are the store's. */
extern og_consumption_keys t_keys;

/* Reads the suite's grant form (argv[3]) and keys (argv[4]) into t_form and
 * t_keys. 0, or 1 for an argument it does not know. */
int t_suite_args(int argc, char **argv);

/* Chooses the backend from argv ("sqlite" or "postgres"). SQLite gets a
 * fresh temp file; PostgreSQL reads OG_TEST_PG_URL. Returns 0, or 77 (skip)
 * when PostgreSQL is not configured and OG_TEST_REQUIRE_PG is not 1, or 1 on
 * a setup failure. Migrates the store. */
int t_setup_backend(const char *name);
/* Removes temp files. */
void t_teardown_backend(void);

/* A fresh store object on t_url with its own connections. Aborts on failure.
 * timeout_ms 0 keeps the default; pool 0 keeps the default. A store object
 * on t_url must report the suite's keys (aborts otherwise). */
og_store *t_store(int pool, int timeout_ms);
og_store *t_store_url(const char *url, int pool, int timeout_ms);

/* A fresh v4 UUID. */
void t_uuid(char out[OG_UUID_LEN + 1]);
/* A grant id unique to this process and call: "t-<pid>-<n>-<rand>". */
void t_grant_id(char *out, size_t n);
/* Microseconds since the epoch on this host's clock. */
int64_t t_now_us(void);

/* A valid grant and a matching intent with fresh ids (issuer
 * "support-approvals", expiry in 15 minutes, 250.00 USD to A-1187). */
typedef struct t_case {
    char grant_id[64];
    char op[OG_UUID_LEN + 1];
    og_grant g;
    og_intent in;
} t_case;
void t_case_new(t_case *c);
/* The same with a chosen expiry (the row form's row carries it). */
void t_case_new_exp(t_case *c, int64_t expires_at_us);

/* Records the issuance of (g, in's caller and parameters) in t_form (row
 * form: the grant's row), through a harness store; aborts on failure. */
void t_issue(const og_grant *g, const og_intent *in);

/* Raw access to the engine behind t_url, outside oncegate. */
typedef struct t_raw t_raw;
t_raw *t_raw_open(void);
/* The same for another store URL of the backend under test. */
t_raw *t_raw_open_url(const char *url);
void t_raw_close(t_raw *r);
/* Runs SQL (no result rows needed); returns 0 or -1. */
int t_raw_exec(t_raw *r, const char *sql);
/* Runs a query returning one integer in row 0 col 0; INT64_MIN on error or
 * no row. fmt is a printf format (checked: clang's -Wformat-nonliteral
 * otherwise refuses the vsnprintf in harness.c). */
int64_t t_raw_int(t_raw *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Runs a query and returns the first column of every row, joined by
 * newlines, in a malloc'd string (the caller frees it); NULL on error. */
char *t_raw_lines(t_raw *r, const char *sql);
/* Counts claims of (issuer, grant_id): token form, its grant_consumptions
 * row; row form, its grants row once consumed or revoked. */
int64_t t_raw_consumptions(t_raw *r, const char *issuer, const char *grant_id);

/* SQL naming (issuer, grant_id)'s row of grant_consumptions in the suite's
 * keys, for raw statements (test ids: plain ASCII, no quotes):
 *   t_key_match   the WHERE condition: "issuer = '..' AND grant_id = '..'",
 *                 or hashed "key_hash = <literal>" with the key computed by
 *                 og_consumption_key() in C — so a hit also proves the
 *                 store's SQL wrote the key the C function computes;
 *   t_key_columns the key columns of an INSERT ("issuer, grant_id" or
 *                 "key_hash"), t_key_values their values.
 * Each returns buf (n >= 512). */
const char *t_key_match(const char *issuer, const char *grant_id, char *buf,
                        size_t n);
const char *t_key_columns(void);
const char *t_key_values(const char *issuer, const char *grant_id, char *buf,
                         size_t n);
/* The literal of the 32-byte key in the backend's SQL (bytea or blob). */
const char *t_key_literal(const unsigned char key[OG_CONSUMPTION_KEY_LEN],
                          char *buf, size_t n);

/* A brand-new, migrated store of the backend under test (SQLite: a file
 * beside t_url; PostgreSQL: a new database) in the suite's keys, its URL
 * written to url (at least 4200 bytes); tag names it. For tests whose scans
 * must see only their own operations. */
og_store *t_fresh_store(const char *tag, char *url, size_t n);
/* The same in the given keys. */
og_store *t_migrated_store(const char *tag, og_consumption_keys keys,
                           char *url, size_t n);
/* The URL of a brand-new store that nothing has migrated yet. */
void t_new_store_url(const char *tag, char *url, size_t n);

/* Moves column (lease_until or submit_by) of operation op_id to `seconds`
 * from the store's now, outside oncegate, in the store at url (NULL: the
 * suite's store): tests decide when a lease ends rather than sleeping. */
/* Makes "not found" final for payout attempt op_id (docs/payouts.md, P6):
 * its final_absence_after a minute ago and its lease lapsed, then a
 * takeover by "reconciler" at owner_version (which must succeed), whose
 * taken_at is now past it. Returns the new owner version. url as
 * t_set_op_time's. */
int64_t t_absence_final(og_store *s, const char *url, const char *op_id,
                        int64_t owner_version);
void t_set_op_time(const char *url, const char *op_id, const char *column,
                   int seconds);
/* The same in milliseconds. */
void t_set_op_time_ms(const char *url, const char *op_id, const char *column,
                      int ms);

/* A payout attempt on s (og__op_insert: kind payout, Admitted at owner
 * version 1 with the store's lease and submission window, no claim),
 * issuer "payouts", a fresh grant id and operation id, idempotency key
 * "payout-PAY-<n>-a1" and client reference "PAY-<n>-a1". Aborts on
 * failure. */
og_operation t_payout_op(og_store *s);

/* Undoes migration 7 of the store behind r by hand, for tests that take a
 * store back to an older schema with its data: the three columns of
 * operations and operations_archive, the constraints and index predicates
 * (PostgreSQL: as schema 6 had them; SQLite cannot narrow a CHECK without a
 * rebuild, so its status CHECKs stay widened, which old data meets anyway),
 * and the version row. The store must hold credits only. Aborts on
 * failure. */
void t_undo_migration_7(t_raw *r);

/* Two racers at once, run(ctx, 0) and run(ctx, 1), each opening its own
 * store object inside run: in two threads of this process
 * (t_race_threads), or in two forked children (t_race_processes: ctx must
 * be in MAP_SHARED memory for the children's answers to reach the parent).
 * Returns once both finished; a child that did not exit 0 (an abort in
 * run) fails the test. */
void t_race_threads(void (*run)(void *ctx, int who), void *ctx);
void t_race_processes(void (*run)(void *ctx, int who), void *ctx);
/* Runs run(ctx, who) for who 0..n-1 (n at most 64) in n threads at once;
 * returns once every one finished (t_race_threads: n 2). */
void t_callers(int n, void (*run)(void *ctx, int who), void *ctx);

/* Runs n (1..16) og_store_migrate() calls on url at once, each on its own
 * thread and store object, asking for the suite's keys (t_keys) with the
 * races' 30 s store timeout; asserts that every one succeeded and left the
 * store at OG_SCHEMA_VERSION. Returns how many found it at version from —
 * exactly one, when migrations serialize. */
int t_concurrent_migrations(const char *url, int n, int from);

/* Puts back what migration 15 (the admission's per-row work) changed —
 * the backlog index over every status; on PostgreSQL the table CHECKs in
 * place of the domains, on a readable store; on SQLite the lease index of
 * the owned statuses — and drops its version row, in one transaction, so a
 * test can take a store back below schema 15 (then t_undo_migration_13).
 * Aborts on failure. */
void t_undo_migration_15(t_raw *r);

/* Drops what migration 13 (the archive's payout attempts by grant) adds
 * and its version row, in one transaction, so a test can take a store
 * back below schema 13 (then t_undo_migration_11; 12's and 14's objects go with
 * t_undo_migration_8). Aborts on failure. */
void t_undo_migration_13(t_raw *r);

/* Drops what migration 11 (a payout attempt's reconciliation) adds, in the
 * backend under test, and its version row, in one transaction, so a test
 * can take a store back below schema 11 (then t_undo_migration_8).
 * Aborts on failure. */
void t_undo_migration_11(t_raw *r);

/* Drops what migration 8 (the payout store) creates, in the backend under
 * test, and its version row, in one transaction, so a test can take a
 * store back below schema 8 (then t_undo_migration_7). Aborts on failure. */
void t_undo_migration_8(t_raw *r);

/* Path of the oncegate binary (OG_TEST_ONCEGATE). */
const char *t_oncegate_bin(void);

#endif
