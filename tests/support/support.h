/*
 * support.h — what every test program shares, written once:
 *
 *   - choosing the tests to run: OG_TEST_FILTER, a glob on the test name
 *     ('*' any run of characters, '?' one character: cmocka's own
 *     matching), read by t_run_group() in every cmocka program. A filter
 *     that matches no test of the group is an error, not a pass with zero
 *     tests;
 *   - real processes (oncegate, oncegate-sandbox): starting one with its
 *     output in files, waiting for its ready line and reading the port from
 *     it, stopping it, running a command to completion, reading its logs.
 *
 * Every process is started with PR_SET_PDEATHSIG, so a test program that
 * dies (a crash, a timeout's SIGKILL) takes its processes with it.
 */
#ifndef OG_TEST_SUPPORT_H
#define OG_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stdarg.h>
#include <setjmp.h>
#include <cmocka.h>

/* ---------------------------------------------------------------------------
 * Running a group
 * ------------------------------------------------------------------------- */

/* Runs the n tests of group through cmocka (group setup and teardown as
 * cmocka_run_group_tests takes them). With OG_TEST_FILTER set (and not
 * empty) only the tests whose name matches it run; when none does, it says
 * so on stderr, lists the group's test names, runs nothing (no group setup)
 * and returns 1. Returns cmocka's result otherwise: 0 when every test that
 * ran passed. */
int t_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                CMFixtureFunction setup, CMFixtureFunction teardown);

/* t_run_group over a whole array. */
#define t_run_tests(group, tests, setup, teardown)                             \
    t_run_group((group), (tests), sizeof(tests) / sizeof((tests)[0]),          \
                (setup), (teardown))

/* OG_TEST_FILTER when set and not empty, else NULL. A program whose last
 * tests check the whole run (enough requests seen, every log scanned)
 * relaxes those minimums when a filter runs a few tests only. */
const char *t_filter(void);

/* Whether name matches the glob pattern, exactly as cmocka's filter
 * decides it. */
bool t_glob_match(const char *name, const char *pattern);

/* ---------------------------------------------------------------------------
 * Time and files
 * ------------------------------------------------------------------------- */

/* Milliseconds on the monotonic clock. */
int64_t t_now_ms(void);
/* Sleeps ms milliseconds (through EINTR). */
void t_sleep_ms(int ms);
/* The whole file, NUL-terminated, malloc'd (the caller frees it); *len
 * (when len is not NULL) gets its length. NULL when unreadable. */
char *t_slurp(const char *path, size_t *len);
/* Polls the file at path until it contains needle: true, or false after
 * timeout_ms (it looks at least once). */
bool t_file_wait_for(const char *path, const char *needle, int timeout_ms);
/* Removes dir and the files directly in it (not deeper trees); quietly
 * does nothing when dir is missing. */
void t_rm_dir_files(const char *dir);

/* ---------------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------------- */

/* Starts argv (argv[0] the binary's path) with stdin from /dev/null,
 * stdout truncated into out_path and stderr appended to err_path (both
 * created 0600), every other descriptor closed, the signal mask cleared,
 * SIGPIPE at its default; envp NULL: this process's environment. The child
 * is killed when this process dies. Returns its pid, or -1 (nothing
 * started). */
pid_t t_proc_spawn(char *const argv[], char *const envp[], const char *out_path,
                   const char *err_path);

/* Waits up to timeout_ms for pid to exit: its wait status, or -1 on timeout
 * (the child still runs) or when pid is not a child. */
int t_proc_wait(pid_t pid, int timeout_ms);

/* The exit code of a wait status: the code, 128 + the signal when a signal
 * ended it, -1 for -1 or anything else. */
int t_proc_exit_code(int status);

/* Sends SIGCONT (a test's SIGSTOP cannot outlive it) and then sig to pid, and
 * waits up to timeout_ms for the exit; SIGKILL after that. *status (when not
 * NULL) gets the wait status, -1 when it had to be killed. Returns the exit
 * code (t_proc_exit_code), -1 when it had to be killed. */
int t_proc_stop(pid_t pid, int sig, int timeout_ms, int *status);

/* Runs argv to completion (t_proc_spawn with this environment), at most
 * timeout_ms: its exit code, or -1 when it could not start or had to be
 * killed at the timeout. */
int t_proc_run(char *const argv[], const char *out_path, const char *err_path,
               int timeout_ms);

/* Waits up to timeout_ms for the line "PREFIX...:PORT\n" in the file
 * out_path, where pid writes its stdout (oncegate serve and
 * oncegate-sandbox announce "...: listening on http://HOST:PORT"). Returns
 * 0 with *port set; -1 when pid exited first (*status gets its wait status
 * and pid is reaped); -2 on timeout or a line without a port. */
int t_proc_wait_ready(pid_t pid, const char *out_path, const char *prefix,
                      int timeout_ms, int *port, int *status);

/* Prints a process's output to stderr for a failing test: the whole of
 * out_path and the last 4 KB of log_path. */
void t_proc_print_output(const char *out_path, const char *log_path);

/* ---------------------------------------------------------------------------
 * The sandbox (tests/support/sandbox.c): oncegate-sandbox (docs/sandbox.md)
 * beside a test, for the programs that drive the provider through the
 * library. OG_TEST_SANDBOX names the binary.
 * ------------------------------------------------------------------------- */
typedef struct t_sbx {
    pid_t pid;
    char url[128];   /* http://127.0.0.1:PORT */
    char dir[96];    /* its state and output, removed by t_sbx_stop */
} t_sbx;

typedef struct json_t json_t;

/* Starts the sandbox on a free port with a fresh state in a new directory
 * /tmp/PREFIX-XXXXXX and its control API on; waits for its ready line.
 * Fails the test when it cannot. */
void t_sbx_start(t_sbx *sb, const char *prefix);

/* Stops it (SIGTERM, then SIGKILL after 30 s) and removes its directory. */
void t_sbx_stop(t_sbx *sb);

/* One control request (POST with body when body is not NULL, else GET):
 * the JSON answer, a new reference. Fails the test on a transport error or
 * an answer that is not JSON. */
json_t *t_sbx_control(const t_sbx *sb, const char *path, const char *body);

/* One counter of GET /_control/stats (0 when absent). */
int64_t t_sbx_stat(const t_sbx *sb, const char *name);

#endif
