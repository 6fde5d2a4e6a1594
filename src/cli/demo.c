/*
 * demo.c — `oncegate demo`: three incidents of replay protection (a lost
 * answer, a restart with empty memory, a payout whose answer is lost),
 * replayed through two real `oncegate serve --dev` processes and the
 * sandbox provider.
 *
 * The demo starts ONE `oncegate-sandbox` (control endpoint on) and TWO
 * `oncegate serve --dev` processes, "serve A" and "serve B", that share a
 * throwaway data directory (issuer key, API keys) and one store — as two
 * application instances behind a load balancer share only their database —
 * and both execute against the sandbox, each with its own recovery loop.
 * It talks to them over HTTP, as the agent and the issuer would:
 *
 *   Incident 1  billing creates the credit but its answer is lost (the
 *               sandbox fault drop_response_after_effect); the agent's
 *               retry of the same operation lands on B and is told
 *               "pending", never billed again; a new operation presenting
 *               the spent grant is refused; recovery finds the credit; the
 *               sandbox counts exactly one.
 *   Incident 2  a credit applied on A, then A is killed and restarted with
 *               empty memory; a stale resubmission is refused and the
 *               original operation is answered with its status.
 *   Incident 3  a payout decided Allowed is sent by A's worker, completed
 *               and its answer lost; the job comes again and B's worker is
 *               refused (a duplicate: the grant is consumed); B's
 *               reconciler finds it: Paid; the sandbox counts one payout
 *               (src/cli/demo_payout.c).
 *
 * Every child dies with the demo (PR_SET_PDEATHSIG) and is stopped and
 * reaped on every path. API keys, grant tokens and destination tokens are
 * never printed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <sodium.h>

#include "cli.h"
#include "commands.h" /* og_srv_sandbox_path */
#include "demo.h"


/* ===========================================================================
 * The demo driver: child processes
 * ========================================================================= */
#define DEMO_SANDBOX_READY "oncegate-sandbox: listening on "
#define DEMO_SERVE_READY "oncegate: listening on "
#define DEMO_START_MS 30000    /* a child's ready line, at most */
#define DEMO_STOP_MS 15000     /* a child's drain after SIGTERM, at most */
#define DEMO_RECOVERY_MS 30000 /* recovery settling the lost answer */
#define DEMO_HTTP_MS 20000     /* one request of the demo's */
#define DEMO_BODY_MAX (1 << 20)

/* Reads lines from fd until one starts with prefix, and copies the rest of
 * that line into url. 0, or -1 on EOF (the child exited), a deadline of
 * DEMO_START_MS or an overlong line. */
static int demo_read_ready(int fd, const char *prefix, char *url, size_t n)
{
    char line[1024];
    size_t used = 0;
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char *nl;
        ssize_t r;
        long waited;
        int ready;

        clock_gettime(CLOCK_MONOTONIC, &t1);
        waited = (t1.tv_sec - t0.tv_sec) * 1000 +
                 (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (waited >= DEMO_START_MS)
            return -1;
        ready = poll(&p, 1, (int)(DEMO_START_MS - waited));
        if (ready < 0 && errno != EINTR)
            return -1;
        if (ready <= 0)
            continue;
        r = read(fd, line + used, sizeof line - 1 - used);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        used += (size_t)r;
        line[used] = '\0';
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            if (strncmp(line, prefix, strlen(prefix)) == 0)
                return (size_t)snprintf(url, n, "%s", line + strlen(prefix)) <
                               n ? 0 : -1;
            used -= (size_t)(nl + 1 - line);
            memmove(line, nl + 1, used + 1);
        }
        if (used == sizeof line - 1)
            return -1;
    }
}

/* Starts argv (path, or argv[0] looked up in PATH when path is NULL) with
 * stdin from /dev/null, stdout to a pipe read until the ready line, stderr
 * appended to DIR/p->log. 0, or -1 (the child, if any, killed and reaped). */
static int demo_spawn(demo_proc *p, const char *dir, const char *path,
                      char *const argv[], const char *ready)
{
    char log[PATH_MAX];
    pid_t parent = getpid(), pid;
    int fds[2], rc;

    if ((size_t)snprintf(log, sizeof log, "%s/%s", dir, p->log) >= sizeof log ||
        pipe(fds) != 0)
        return -1;
    if (fcntl(fds[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(fds[1], F_SETFD, FD_CLOEXEC) != 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    fflush(NULL); /* nothing buffered is written twice */
    if ((pid = fork()) < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        sigset_t none;
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int err = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

        /* The demo ignores SIGPIPE; an ignored signal survives exec. */
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        /* Dies with the demo, even when the demo is killed. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            _exit(127);
        if (in < 0 || err < 0 || dup2(in, STDIN_FILENO) < 0 ||
            dup2(fds[1], STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
            _exit(127);
        if (path)
            execv(path, argv);
        else
            execvp(argv[0], argv);
        fprintf(stderr, "oncegate demo: cannot run %s: %s\n",
                path ? path : argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    p->pid = pid;
    rc = demo_read_ready(fds[0], ready, p->url, sizeof p->url);
    /* Nothing more is read; both children ignore SIGPIPE themselves. */
    close(fds[0]);
    if (rc != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        p->pid = 0;
        fprintf(stderr, "oncegate demo: %s did not start; its log: %s\n",
                p->name, log);
    }
    return rc;
}

/* Stops p with sig (SIGTERM: drain; SIGKILL: a crash) and reaps it, within
 * DEMO_STOP_MS (then SIGKILL). Returns true when it exited as expected
 * (0 after SIGTERM, killed by SIGKILL after SIGKILL). */
bool demo_reap(demo_proc *p, int sig)
{
    int status = 0, waited = 0;
    pid_t r;

    if (p->pid <= 0)
        return true;
    kill(p->pid, sig);
    while ((r = waitpid(p->pid, &status, WNOHANG)) == 0 &&
           waited < DEMO_STOP_MS) {
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
        waited += 20;
    }
    if (r == 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &status, 0);
        fprintf(stderr, "oncegate demo: %s (pid %ld) did not exit within "
                "%d ms; killed\n", p->name, (long)p->pid, DEMO_STOP_MS);
        p->pid = 0;
        return false;
    }
    p->pid = 0;
    if (r < 0)
        return false;
    if (sig == SIGKILL)
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return true;
    fprintf(stderr, "oncegate demo: %s exited with %s %d after SIGTERM\n",
            p->name, WIFEXITED(status) ? "status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return false;
}

/* Removes the directory name (relative to the directory fd parent),
 * everything in it first. Never follows a symbolic link. 0 or -1. */
static int demo_rmtree_at(int parent, const char *name)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                      O_CLOEXEC);
    DIR *d;
    struct dirent *e;
    int rc = 0;

    if (fd < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while ((e = readdir(d))) {
        struct stat st;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            rc = -1;
        else if (S_ISDIR(st.st_mode))
            rc |= demo_rmtree_at(fd, e->d_name);
        else if (unlinkat(fd, e->d_name, 0) != 0)
            rc = -1;
    }
    closedir(d);
    if (unlinkat(parent, name, AT_REMOVEDIR) != 0)
        rc = -1;
    return rc;
}

/* ===========================================================================
 * The demo driver: HTTP
 * ========================================================================= */
typedef struct demo_buf {
    char *p;
    size_t n;
} demo_buf;

static size_t demo_on_body(char *d, size_t size, size_t nmemb, void *u)
{
    demo_buf *b = u;
    size_t len = size * nmemb;
    char *p;

    if (b->n + len > DEMO_BODY_MAX || !(p = realloc(b->p, b->n + len + 1)))
        return 0;
    memcpy(p + b->n, d, len);
    b->n += len;
    p[b->n] = '\0';
    b->p = p;
    return len;
}

/* One request: method base+path, with Authorization: Bearer key when key,
 * and body (JSON) when body. Returns the HTTP status and the answer's
 * bytes in *out (the caller frees out->p), or 0 when no answer came. A fresh
 * connection each time, and no proxy from the environment. */
static long demo_request(const char *method, const char *base,
                         const char *path, const char *key, json_t *body,
                         demo_buf *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL, *more;
    demo_buf b = {0};
    char url[512], *auth = NULL, *text = NULL;
    size_t authlen = 0;
    long code = 0;

    if (!c || (size_t)snprintf(url, sizeof url, "%s%s", base, path) >=
                  sizeof url)
        goto done;
    if (key) {
        authlen = strlen(key) + sizeof "Authorization: Bearer ";
        if (!(auth = malloc(authlen)))
            goto done;
        snprintf(auth, authlen, "Authorization: Bearer %s", key);
        if (!(more = curl_slist_append(h, auth)))
            goto done;
        h = more;
    }
    if (body) {
        if (!(text = json_dumps(body, JSON_COMPACT)) ||
            !(more = curl_slist_append(h, "Content-Type: application/json")))
            goto done;
        h = more;
    }
    if (curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)DEMO_HTTP_MS) !=
            CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h) != CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, demo_on_body) !=
            CURLE_OK ||
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b) != CURLE_OK ||
        (text && curl_easy_setopt(c, CURLOPT_POSTFIELDS, text) != CURLE_OK))
        goto done;
    if (curl_easy_perform(c) != CURLE_OK ||
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
        code = 0;
done:
    if (auth) {
        sodium_memzero(auth, authlen);
        free(auth);
    }
    if (text) {
        sodium_memzero(text, strlen(text)); /* it may hold a grant token */
        free(text);
    }
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    if (code == 0) {
        free(b.p);
        b = (demo_buf){0};
    }
    *out = b;
    return code;
}

/* demo_request, the answer parsed: *out (or NULL). */
long demo_http(const char *method, const char *base, const char *path,
               const char *key, json_t *body, json_t **out)
{
    demo_buf b;
    long code = demo_request(method, base, path, key, body, &b);

    *out = b.p ? json_loadb(b.p, b.n, 0, NULL) : NULL;
    free(b.p);
    return code;
}

long demo_http_text(const char *base, const char *path, char **text)
{
    demo_buf b;
    long code = demo_request("GET", base, path, NULL, NULL, &b);

    *text = b.p;
    return code;
}

/* o[k] as a string, or "" when absent or not a string. */
const char *demo_str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ===========================================================================
 * The demo driver: the incidents
 * ========================================================================= */
typedef struct demo_grant {
    char id[160];
    char *token; /* a secret: never printed; wiped and freed */
} demo_grant;

static void demo_grant_clear(demo_grant *g)
{
    if (g->token) {
        sodium_memzero(g->token, strlen(g->token));
        free(g->token);
    }
    memset(g, 0, sizeof *g);
}

/* Starts serve p on the shared data dir and store, against the sandbox. */
int demo_start_serve(demo *d, demo_proc *p)
{
    char *argv[] = {(char *)"oncegate", (char *)"serve", (char *)"--dev",
                    (char *)"--data-dir", d->dir, (char *)"--listen",
                    (char *)"127.0.0.1:0", (char *)"--provider", d->sb.url,
                    d->store ? (char *)"--store" : NULL, (char *)d->store,
                    NULL};

    return demo_spawn(p, d->dir, "/proc/self/exe", argv, DEMO_SERVE_READY);
}

static int demo_start_sandbox(demo *d)
{
    char state[PATH_MAX + 16];
    char *argv[] = {(char *)OG_SANDBOX_BIN, (char *)"--listen",
                    (char *)"127.0.0.1:0", (char *)"--state", state,
                    (char *)"--control", NULL};

    snprintf(state, sizeof state, "%s/sandbox.db", d->dir);
    return demo_spawn(&d->sb, d->dir, d->sandbox_path, argv,
                      DEMO_SANDBOX_READY);
}

/* Copies principals.ROLE.FIELD of the credentials into out. */
static int demo_cred(json_t *cr, const char *role, const char *field,
                     char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(
        json_object_get(json_object_get(cr, "principals"), role), field));

    return s && (size_t)snprintf(out, n, "%s", s) < n ? 0 : -1;
}

/* Reads the issuer's and the agent's API keys, the agent's id and the keys
 * of the payout-admin, clerk and operator from DIR/dev-credentials.json
 * (written by the first serve --dev, one principal per role). */
static int demo_read_credentials(demo *d)
{
    char path[PATH_MAX + 32];
    json_t *cr;
    int rc;

    snprintf(path, sizeof path, "%s/dev-credentials.json", d->dir);
    if (!(cr = json_load_file(path, 0, NULL)))
        return -1;
    rc = demo_cred(cr, "issuer", "api_key", d->issuer_key,
                   sizeof d->issuer_key) |
         demo_cred(cr, "agent", "api_key", d->agent_key,
                   sizeof d->agent_key) |
         demo_cred(cr, "agent", "id", d->agent_id, sizeof d->agent_id) |
         demo_cred(cr, "payout-admin", "api_key", d->payout_admin_key,
                   sizeof d->payout_admin_key) |
         demo_cred(cr, "clerk", "api_key", d->clerk_key,
                   sizeof d->clerk_key) |
         demo_cred(cr, "operator", "api_key", d->operator_key,
                   sizeof d->operator_key);
    json_decref(cr);
    return rc;
}

/* POST /v1/grants as the issuer: one credit of 250.00 USD to A-1187 for the
 * agent, 15 minutes to live. */
static int demo_issue(demo *d, demo_grant *g)
{
    json_t *req = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:s}, s:i}", "subject", d->agent_id,
        "action", "credit.apply", "params", "account", "A-1187", "amount",
        "250.00", "currency", "USD", "ttl_seconds", 900);
    json_t *ans = NULL;
    const char *tok;
    long code;

    memset(g, 0, sizeof *g);
    code = req ? demo_http("POST", d->a.url, "/v1/grants", d->issuer_key,
                           req, &ans)
               : 0;
    json_decref(req);
    tok = json_string_value(json_object_get(ans, "token"));
    if (code == 201 && tok && demo_str(ans, "grant_id")[0])
        snprintf(g->id, sizeof g->id, "%s", demo_str(ans, "grant_id"));
    if (code == 201 && tok && g->id[0])
        g->token = strdup(tok);
    json_decref(ans);
    if (!g->token) {
        fprintf(stderr, "oncegate demo: POST /v1/grants answered %ld\n",
                code);
        return -1;
    }
    return 0;
}

/* POST /v1/operations as the agent on p: grant g for operation op. */
static long demo_present(demo *d, const demo_proc *p, const demo_grant *g,
                         const char *op, json_t **ans)
{
    json_t *req = json_pack(
        "{s:s, s:s, s:s, s:{s:s, s:s, s:s}}", "operation_id", op, "token",
        g->token, "action", "credit.apply", "params", "account", "A-1187",
        "amount", "250.00", "currency", "USD");
    long code;

    if (!req) {
        *ans = NULL;
        return 0;
    }
    code = demo_http("POST", p->url, "/v1/operations", d->agent_key, req, ans);
    json_decref(req);
    return code;
}

/* The answer, as the demo prints it: "202 unknown, result pending, outcome
 * admitted", "409 grant_not_available", "no answer". */
static void demo_answer(long code, const json_t *a, char *out, size_t n)
{
    if (code == 0)
        snprintf(out, n, "no answer");
    else if (demo_str(a, "status")[0])
        snprintf(out, n, "%ld %s, result %s, outcome %s", code,
                 demo_str(a, "status"), demo_str(a, "result"),
                 demo_str(a, "outcome"));
    else
        snprintf(out, n, "%ld %s", code,
                 demo_str(a, "error")[0] ? demo_str(a, "error") : "?");
}

/* Tallies a step and prints its verdict at the end of the current line. */
void demo_verdict(demo_tally *t, bool ok, bool replay, const char *yes,
                  const char *no)
{
    t->steps++;
    if (!ok)
        t->failed++;
    if (replay) {
        t->replays++;
        if (ok)
            t->replays_refused++;
    }
    printf("   %s %s\n", ok ? "✔" : "✘", ok ? yes : no);
}

static void demo_story(const demo_proc *p, const char *story, const char *op)
{
    printf("  [%s pid %ld] %s\n", p->name, (long)p->pid, story);
    printf("      operation %.8s…  →  ", op);
}

/* A step presenting g for op on p; ok when the answer is what check says. */
typedef bool (*demo_check)(long code, const json_t *a);

static void demo_step(demo *d, const demo_proc *p, const demo_grant *g,
                      const char *op, const char *story, demo_check check,
                      bool replay, const char *yes, const char *no,
                      char *ref, size_t reflen)
{
    json_t *a = NULL;
    long code = demo_present(d, p, g, op, &a);
    char line[256];
    bool ok = check(code, a);

    demo_answer(code, a, line, sizeof line);
    demo_story(p, story, op);
    printf("%s", line);
    if (ref && reflen)
        snprintf(ref, reflen, "%s", demo_str(a, "provider_reference"));
    demo_verdict(&d->t, ok, replay, yes, no);
    json_decref(a);
}

/* No final answer: the outcome is not known, recovery takes it from here. */
static bool demo_lost(long code, const json_t *a)
{
    return code == 202 && strcmp(demo_str(a, "result"), "pending") == 0 &&
           strcmp(demo_str(a, "outcome"), "admitted") == 0;
}

/* The same operation again: answered with its status, never executed again
 * (202 pending; 200 succeeded should recovery already have settled it). */
static bool demo_same(long code, const json_t *a)
{
    return strcmp(demo_str(a, "outcome"), "already_admitted") == 0 &&
           ((code == 202 && strcmp(demo_str(a, "result"), "pending") == 0) ||
            (code == 200 && strcmp(demo_str(a, "status"), "succeeded") == 0));
}

static bool demo_refused(long code, const json_t *a)
{
    return code == 409 &&
           strcmp(demo_str(a, "error"), "grant_not_available") == 0;
}

static bool demo_applied(long code, const json_t *a)
{
    return code == 200 && strcmp(demo_str(a, "status"), "succeeded") == 0 &&
           strcmp(demo_str(a, "result"), "applied") == 0 &&
           strcmp(demo_str(a, "outcome"), "admitted") == 0 &&
           demo_str(a, "provider_reference")[0];
}

static bool demo_applied_before(long code, const json_t *a)
{
    return code == 200 && strcmp(demo_str(a, "status"), "succeeded") == 0 &&
           strcmp(demo_str(a, "outcome"), "already_admitted") == 0;
}

double demo_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) +
           (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

void demo_history_line(const json_t *e, const char *indent)
{
    const char *r = demo_str(e, "provider_reference");
    const char *why = demo_str(e, "reason");

    printf("%shistory: %-8s  %-9s → %-9s  by %s%s%s%s%s%s\n", indent,
           demo_str(e, "kind"), demo_str(e, "from"), demo_str(e, "to"),
           demo_str(e, "actor"), why[0] ? " (" : "", why, why[0] ? ")" : "",
           r[0] ? ", " : "", r);
}

/* Polls GET /v1/operations/op as the agent, on B and A in turn, until the
 * operation leaves Admitted and Unknown (DEMO_RECOVERY_MS at most); then
 * prints its history and checks that recovery recorded Succeeded with the
 * provider's reference. */
static void demo_await_recovery(demo *d, const char *op,
                                const struct timespec *lost_at)
{
    char path[128], status[32] = "";
    json_t *a = NULL, *h;
    const char *ref = "", *found_by = "";
    char yes[128];
    bool ok = false;
    int i = 0;

    snprintf(path, sizeof path, "/v1/operations/%s", op);
    printf("  [recovery] A's and B's recovery loops take over operations whose "
           "lease ended and\n"
           "             look them up at billing; the agent polls "
           "GET /v1/operations/%.8s…\n", op);
    for (;;) {
        const demo_proc *p = i++ % 2 ? &d->a : &d->b;
        long code;

        json_decref(a);
        code = demo_http("GET", p->url, path, d->agent_key, NULL, &a);
        snprintf(status, sizeof status, "%s",
                 code == 200 ? demo_str(a, "status") : "");
        if (code == 200 && strcmp(status, "admitted") != 0 &&
            strcmp(status, "unknown") != 0)
            break;
        if (demo_since(lost_at) * 1000 > DEMO_RECOVERY_MS)
            break;
        nanosleep(&(struct timespec){0, 250 * 1000000}, NULL);
    }
    h = json_object_get(a, "history");
    for (size_t k = 0; k < json_array_size(h); k++) {
        const json_t *e = json_array_get(h, k);
        const char *r = demo_str(e, "provider_reference");

        demo_history_line(e, "      ");
        if (strcmp(demo_str(e, "kind"), "outcome") == 0 &&
            strcmp(demo_str(e, "actor"), "recovery") == 0 &&
            strcmp(demo_str(e, "to"), "succeeded") == 0 && r[0]) {
            ok = true;
            ref = r;
            found_by = demo_str(e, "reason");
        }
    }
    ok = ok && strcmp(status, "succeeded") == 0;
    printf("      operation %.8s…  →  %s %.1f s after the lost answer%s%s",
           op, status[0] ? status : "no answer", demo_since(lost_at),
           ok ? ", credit " : "", ref);
    if (strcmp(found_by, "found") == 0)
        snprintf(yes, sizeof yes, "recovered: the lookup found billing's "
                 "credit");
    else
        snprintf(yes, sizeof yes, "recovered (%s)", found_by);
    demo_verdict(&d->t, ok, false, yes,
                 "NOT RECOVERED (expected succeeded, recorded by recovery)");
    json_decref(a);
}

/* GET /_control/stats; ok when the sandbox received exactly n create
 * requests and holds exactly n credits. */
static void demo_stats(demo *d, int n, const char *yes)
{
    json_t *a = NULL;
    long code = demo_http("GET", d->sb.url, "/_control/stats", NULL, NULL, &a);
    json_int_t creates = json_integer_value(json_object_get(a, "create_requests"));
    json_int_t credits = json_integer_value(json_object_get(a, "credits_created"));
    bool ok = code == 200 && creates == n && credits == n;
    char no[96];

    snprintf(no, sizeof no, "expected %d create request%s and %d credit%s",
             n, n == 1 ? "" : "s", n, n == 1 ? "" : "s");

    printf("  [sandbox pid %ld] GET /_control/stats  →  ", (long)d->sb.pid);
    if (code == 200)
        printf("create_requests %lld, credits_created %lld, lookups %lld",
               (long long)creates, (long long)credits,
               (long long)json_integer_value(json_object_get(a, "lookups")));
    else
        printf("%ld", code);
    demo_verdict(&d->t, ok, false, yes, no);
    json_decref(a);
}

/* Arms drop_response_after_effect once: the next create takes effect and
 * its answer is lost. */
int demo_arm_drop(demo *d)
{
    json_t *req = json_pack("{s:s, s:i}", "fault",
                            "drop_response_after_effect", "count", 1);
    json_t *a = NULL;
    long code = req ? demo_http("POST", d->sb.url, "/_control/faults", NULL,
                                req, &a)
                    : 0;

    json_decref(req);
    json_decref(a);
    if (code != 200) {
        fprintf(stderr, "oncegate demo: POST /_control/faults answered %ld\n",
                code);
        return -1;
    }
    return 0;
}

/* n random (version 4) UUIDs, for operation ids. */
void demo_uuids(char op[][OG_UUID_LEN + 1], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char b[16];

        randombytes_buf(b, sizeof b);
        b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
        b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
        snprintf(op[i], OG_UUID_LEN + 1,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                 "%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
                 b[10], b[11], b[12], b[13], b[14], b[15]);
    }
}

/* Incident 1: the lost answer. -1 when the demo cannot go on. */
static int demo_incident1(demo *d)
{
    char op[2][OG_UUID_LEN + 1];
    struct timespec lost_at;
    demo_grant g;

    if (demo_issue(d, &g) != 0)
        return -1;
    demo_uuids(op, 2);
    printf("Incident 1 — grant %s allows ONE credit of 250.00 USD to "
           "A-1187\n", g.id);
    if (demo_arm_drop(d) != 0) {
        demo_grant_clear(&g);
        return -1;
    }
    printf("  [sandbox pid %ld] fault armed: drop_response_after_effect — the "
           "next credit is created, its answer lost\n", (long)d->sb.pid);
    clock_gettime(CLOCK_MONOTONIC, &lost_at);
    demo_step(d, &d->a, &g, op[0],
              "the agent applies the credit; billing creates it, its answer "
              "is lost",
              demo_lost, false, "no final answer reached the agent",
              "expected 202 with result pending", NULL, 0);
    demo_step(d, &d->b, &g, op[0],
              "the agent retries the same operation; the retry lands on B",
              demo_same, false, "its status; billing is not called again",
              "expected outcome already_admitted", NULL, 0);
    demo_step(d, &d->b, &g, op[1],
              "the agent clicks Apply again: a new operation presents the "
              "spent grant on B",
              demo_refused, true, "replay refused", "REPLAY NOT REFUSED",
              NULL, 0);
    demo_await_recovery(d, op[0], &lost_at);
    demo_stats(d, 1, "the sandbox counts exactly one credit");
    demo_grant_clear(&g);
    return 0;
}

/* Incident 2: applied on A, A killed and restarted with empty memory. -1
 * when the demo cannot go on. */
static int demo_incident2(demo *d)
{
    char op[2][OG_UUID_LEN + 1], ref[160] = "";
    demo_grant g;
    long old_pid;

    if (demo_issue(d, &g) != 0)
        return -1;
    demo_uuids(op, 2);
    printf("\nIncident 2 — grant %s, applied on A, then A restarts\n", g.id);
    demo_step(d, &d->a, &g, op[0], "the agent applies the credit",
              demo_applied, false, "applied once", "expected 200 applied",
              ref, sizeof ref);
    if (ref[0])
        printf("      (billing's credit: %s)\n", ref);
    old_pid = (long)d->a.pid;
    demo_reap(&d->a, SIGKILL);
    if (demo_start_serve(d, &d->a) != 0) {
        demo_grant_clear(&g);
        return -1;
    }
    printf("  -- rolling deployment: serve A (pid %ld) killed, restarted as "
           "pid %ld with empty memory --\n", old_pid, (long)d->a.pid);
    demo_step(d, &d->a, &g, op[1],
              "a stale browser tab resubmits the grant as a new operation",
              demo_refused, true, "replay refused", "REPLAY NOT REFUSED",
              NULL, 0);
    demo_step(d, &d->a, &g, op[0],
              "the original operation is retried after the restart",
              demo_applied_before, false,
              "answered with its status; nothing runs again",
              "expected 200 succeeded, outcome already_admitted", NULL, 0);
    demo_stats(d, 2, "still one credit per grant: two grants, two credits");
    demo_grant_clear(&g);
    return 0;
}

/* With --store: the demo's recovery loops and reconcilers would settle any
 * operation or payout attempt the store already holds in Admitted, Started
 * or Unknown against the demo's sandbox.
 * Refuses such a store. 0, or an exit code. */
static int demo_check_store(const char *url)
{
    og_op_filter f = {OG_OP_BIT(OG_OP_ADMITTED) | OG_OP_BIT(OG_OP_STARTED) |
                          OG_OP_BIT(OG_OP_UNKNOWN),
                      false, 0, 1, 0};
    og_op_list l = {0};
    og_store *s = NULL;
    int rc;

    if ((rc = og_store_migrate(url, NULL, NULL, NULL)) < 0 ||
        (rc = og_store_open(url, NULL, &s)) < 0) {
        fprintf(stderr, "oncegate demo: cannot use %s: %s\n", url,
                og_strerror(rc));
        return og_exit_for_error(rc);
    }
    rc = og_op_scan(s, &f, &l);
    og_store_free(s);
    if (rc < 0) {
        fprintf(stderr, "oncegate demo: cannot read %s: %s\n", url,
                og_strerror(rc));
        return og_exit_for_error(rc);
    }
    if (l.n > 0) {
        fprintf(stderr,
                "oncegate demo: %s holds operations awaiting an outcome "
                "(admitted, started or unknown); the demo's recovery would "
                "settle "
                "them against its sandbox. Give the demo a store of its own, "
                "or no --store.\n", url);
        og_op_list_free(&l);
        return OG_EXIT_CONFIG;
    }
    og_op_list_free(&l);
    return 0;
}

int og_cli_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    demo *d;
    const char *tmp = getenv("TMPDIR");
    bool clean = true;
    int rc = OG_EXIT_INTERNAL, c;

    if (!(d = calloc(1, sizeof *d)))
        return OG_EXIT_INTERNAL;
    d->sb = (demo_proc){.name = "sandbox", .log = "sandbox.log"};
    d->a = (demo_proc){.name = "serve A", .log = "serve-a.log"};
    d->b = (demo_proc){.name = "serve B", .log = "serve-b.log"};
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 's') {
            d->store = optarg;
        } else if (c == 'h') {
            printf("see: oncegate help demo\n");
            free(d);
            return OG_EXIT_OK;
        } else {
            free(d);
            return OG_EXIT_USAGE;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    if (d->store && (rc = demo_check_store(d->store)) != 0) {
        free(d);
        return rc;
    }
    rc = OG_EXIT_INTERNAL;
    if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        free(d);
        return OG_EXIT_INTERNAL;
    }
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    if ((size_t)snprintf(d->dir, sizeof d->dir, "%s/oncegate-demo-XXXXXX",
                         tmp) >= sizeof d->dir ||
        !mkdtemp(d->dir)) {
        fprintf(stderr, "oncegate demo: cannot create a directory in %s: "
                "%s\n", tmp, strerror(errno));
        curl_global_cleanup();
        free(d);
        return OG_EXIT_INTERNAL;
    }
    d->sandbox_path = og_srv_sandbox_path();

    /* A first: it creates the keys and credentials B then reuses. */
    if (demo_start_sandbox(d) != 0 || demo_start_serve(d, &d->a) != 0 ||
        demo_start_serve(d, &d->b) != 0) {
        fprintf(stderr, "oncegate demo: cannot start the processes\n");
        clean = false;
        goto out;
    }
    if (demo_read_credentials(d) != 0) {
        fprintf(stderr, "oncegate demo: cannot read the API keys from "
                "%s/dev-credentials.json\n", d->dir);
        clean = false;
        goto out;
    }
    printf("oncegate demo: two `oncegate serve --dev` instances and the "
           "sandbox billing provider\n");
    printf("  sandbox  pid %-7ld %s  (oncegate-sandbox, control endpoint "
           "on)\n", (long)d->sb.pid, d->sb.url);
    printf("  serve A  pid %-7ld %s\n", (long)d->a.pid, d->a.url);
    printf("  serve B  pid %-7ld %s\n", (long)d->b.pid, d->b.url);
    printf("A and B share only the store (%s) and the data\n"
           "directory %s (keys; removed at the end). Each executes\n"
           "against the sandbox and runs its own recovery loop. The agent is "
           "%s.\n\n",
           d->store ? d->store : "SQLite, in the data directory", d->dir,
           d->agent_id);

    if (demo_incident1(d) != 0 || demo_incident2(d) != 0 ||
        demo_payout_incident(d) != 0) {
        fprintf(stderr, "oncegate demo: cannot go on\n");
        clean = false;
        goto out;
    }

    printf("\n%d of %d replays refused; %d of %d steps as expected.\n",
           d->t.replays_refused, d->t.replays, d->t.steps - d->t.failed,
           d->t.steps);
    if (d->t.failed || d->t.replays_refused != d->t.replays) {
        printf("FAIL: the guarantee did not hold.\n");
        rc = OG_EXIT_REFUSED;
        clean = false;
    } else {
        printf("Every replay was refused, billing counted one credit per "
               "grant and the payout\nprovider one completed payout: across "
               "instances, lost answers, recovery,\nreconciliation and "
               "restarts.\n");
        rc = OG_EXIT_OK;
    }
out:
    /* Every child, on every path: drained, then reaped. */
    clean &= demo_reap(&d->b, SIGTERM);
    clean &= demo_reap(&d->a, SIGTERM);
    clean &= demo_reap(&d->sb, SIGTERM); /* after the last provider call */
    curl_global_cleanup();
    if (clean && demo_rmtree_at(AT_FDCWD, d->dir) != 0)
        fprintf(stderr, "oncegate demo: could not remove %s\n", d->dir);
    else if (!clean)
        fprintf(stderr, "oncegate demo: kept %s (the processes' logs are "
                "there: sandbox.log, serve-a.log, serve-b.log)\n", d->dir);
    free(d->sandbox_path);
    sodium_memzero(d, sizeof *d);
    free(d);
    return rc;
}
