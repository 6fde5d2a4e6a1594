/*
 * demo.c — `oncegate demo`: the two incidents of seed 000, replayed against
 * the embedded store by two separate OS processes.
 *
 * "Instance A" and "instance B" are long-lived `oncegate instance` child
 * processes, each with its own store object and connections, sharing only
 * the store file — as two application instances behind a load balancer
 * share only their database. Restarting A kills its process and starts a
 * new one: nothing in memory survives, only the store.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define DEMO_ISSUER "support-approvals"
#define DEMO_LINE_MAX 4096

/* ===========================================================================
 * The instance process: reads one request per line, answers one JSON line.
 *   admit ISSUER GRANT_ID EXPIRES_AT_US OPERATION_ID CALLER ACCOUNT AMOUNT CUR
 * ========================================================================= */
int og_cli_instance(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL;
    char line[DEMO_LINE_MAX];
    og_store *s = NULL;
    int c, rc;

    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c != 's')
            return OG_EXIT_USAGE;
        url = optarg;
    }
    if ((rc = og_store_open(url, NULL, &s)) < 0) {
        fprintf(stderr, "oncegate instance: cannot open store: %s\n",
                og_err_name(rc));
        return og_cli_exit_for_error(rc);
    }
    printf("{\"ready\":true,\"pid\":%ld}\n", (long)getpid());
    fflush(stdout);

    while (fgets(line, sizeof line, stdin)) {
        char *f[9], *save = NULL, *tok;
        int n = 0;
        og_grant g = {0};
        og_intent in;
        json_t *answer = NULL;

        for (tok = strtok_r(line, " \n", &save); tok && n < 9;
             tok = strtok_r(NULL, " \n", &save))
            f[n++] = tok;
        if (n != 9 || strcmp(f[0], "admit") != 0) {
            puts("{\"error\":\"bad_request\"}");
            fflush(stdout);
            continue;
        }
        g.issuer = f[1];
        g.grant_id = f[2];
        g.expires_at_us = strtoll(f[3], NULL, 10);
        in.operation_id = f[4];
        in.caller_id = f[5];
        in.account_id = f[6];
        in.amount = f[7];
        in.currency = f[8];
        og_cli_admit(s, &g, &in, &answer);
        og_cli_print_json(answer);
        json_decref(answer);
    }
    og_store_free(s);
    return OG_EXIT_OK;
}

/* ===========================================================================
 * The demo driver
 * ========================================================================= */
typedef struct demo_instance {
    const char *name;
    pid_t pid;
    FILE *to;   /* its stdin */
    FILE *from; /* its stdout */
} demo_instance;

static int demo_start(demo_instance *in, const char *url)
{
    int up[2], down[2];
    char line[256];
    pid_t pid;

    if (pipe(up) < 0 || pipe(down) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(down[0], STDIN_FILENO);
        dup2(up[1], STDOUT_FILENO);
        close(up[0]);
        close(up[1]);
        close(down[0]);
        close(down[1]);
        execl("/proc/self/exe", "oncegate", "instance", "--store", url,
              (char *)NULL);
        _exit(127);
    }
    close(up[1]);
    close(down[0]);
    in->pid = pid;
    in->to = fdopen(down[1], "w");
    in->from = fdopen(up[0], "r");
    if (!in->to || !in->from || !fgets(line, sizeof line, in->from) ||
        !strstr(line, "\"ready\":true"))
        return -1;
    return 0;
}

/* Ends the instance: abruptly (SIGKILL, a crash or a redeploy) or by EOF. */
static void demo_stop(demo_instance *in, bool kill_it)
{
    if (in->pid <= 0)
        return;
    if (kill_it)
        kill(in->pid, SIGKILL);
    if (in->to)
        fclose(in->to);
    if (in->from)
        fclose(in->from);
    waitpid(in->pid, NULL, 0);
    in->pid = 0;
    in->to = in->from = NULL;
}

static void demo_uuid(char out[OG_UUID_LEN + 1])
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;

    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof b) { /* never expected; still unique enough */
        struct timeval tv;
        gettimeofday(&tv, NULL);
        srandom((unsigned)(tv.tv_usec ^ getpid()));
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)random();
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, OG_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
}

typedef struct demo_grant {
    char grant_id[64];
    int64_t expires_at_us;
    const char *caller, *account, *amount, *currency;
} demo_grant;

/* Sends one admission to instance in; returns the outcome string ("admitted",
 * "already_admitted", "refused", "store_unavailable", or "error") and copies
 * the status into status (when an operation came back). */
static const char *demo_admit(demo_instance *in, const demo_grant *g,
                              const char *op, char *status, size_t n)
{
    static char outcome[32];
    char line[DEMO_LINE_MAX];
    json_t *root;
    const char *o, *st;

    snprintf(outcome, sizeof outcome, "error");
    status[0] = '\0';
    fprintf(in->to, "admit %s %s %lld %s %s %s %s %s\n", DEMO_ISSUER,
            g->grant_id, (long long)g->expires_at_us, op, g->caller,
            g->account, g->amount, g->currency);
    fflush(in->to);
    if (!fgets(line, sizeof line, in->from))
        return outcome;
    root = json_loads(line, 0, NULL);
    if (!root)
        return outcome;
    if ((o = json_string_value(json_object_get(root, "outcome"))))
        snprintf(outcome, sizeof outcome, "%s", o);
    st = json_string_value(
        json_object_get(json_object_get(root, "operation"), "status"));
    if (st)
        snprintf(status, n, "%s", st);
    json_decref(root);
    return outcome;
}

typedef struct demo_tally {
    int steps, failed, replays, replays_refused;
} demo_tally;

/* Runs one step, prints it with its verdict, and tallies it. */
static void demo_step(demo_tally *t, demo_instance *in, const demo_grant *g,
                      const char *op, const char *story, const char *expect,
                      bool replay)
{
    char status[32];
    const char *got = demo_admit(in, g, op, status, sizeof status);
    bool ok = strcmp(got, expect) == 0;

    t->steps++;
    if (!ok)
        t->failed++;
    if (replay) {
        t->replays++;
        if (strcmp(got, "refused") == 0)
            t->replays_refused++;
    }
    printf("  [%s pid %ld] %s\n", in->name, (long)in->pid, story);
    printf("      operation %.8s…  →  %s", op, got);
    if (status[0] && strcmp(got, "admitted") == 0)
        printf(" (operation recorded: %s, owner version 1)", status);
    else if (status[0])
        printf(" (answered with the operation's status, %s; nothing runs again)",
               status);
    if (replay)
        printf("%s", ok ? "   ✔ replay refused" : "   ✘ REPLAY NOT REFUSED");
    else if (!ok)
        printf("   ✘ expected %s", expect);
    printf("\n");
}

int og_cli_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL;
    demo_instance a = {.name = "instance A"}, b = {.name = "instance B"};
    demo_tally t = {0};
    demo_grant g1, g2;
    char run[OG_UUID_LEN + 1], op1[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1];
    char op3[OG_UUID_LEN + 1], op4[OG_UUID_LEN + 1];
    struct timespec now;
    int64_t expires;
    long old_pid;
    int rc, c;

    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 's') {
            url = optarg;
        } else if (c == 'h') {
            printf("see: oncegate help demo\n");
            return OG_EXIT_OK;
        } else {
            return OG_EXIT_USAGE;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);

    rc = og_store_migrate(url, NULL, NULL, NULL);
    if (rc < 0) {
        fprintf(stderr, "oncegate demo: cannot migrate %s: %s\n", url,
                og_strerror(rc));
        return og_cli_exit_for_error(rc);
    }
    demo_uuid(run);
    run[8] = '\0';
    clock_gettime(CLOCK_REALTIME, &now);
    /* Issued now, admission deadline 15 minutes later, as in the seed. */
    expires = (int64_t)now.tv_sec * 1000000 + 15 * 60 * INT64_C(1000000);

    g1 = (demo_grant){.expires_at_us = expires, .caller = "agent-17",
                      .account = "A-1187", .amount = "250.00",
                      .currency = "USD"};
    snprintf(g1.grant_id, sizeof g1.grant_id, "g-41c9.%s", run);
    g2 = g1;
    snprintf(g2.grant_id, sizeof g2.grant_id, "g-52d0.%s", run);
    demo_uuid(op1);
    demo_uuid(op2);
    demo_uuid(op3);
    demo_uuid(op4);

    printf("oncegate demo: one store (%s), two instance processes, run %s\n\n",
           url, run);
    if (demo_start(&a, url) < 0 || demo_start(&b, url) < 0) {
        fprintf(stderr, "oncegate demo: cannot start the instances\n");
        demo_stop(&a, true);
        demo_stop(&b, true);
        return OG_EXIT_INTERNAL;
    }
    printf("instance A is pid %ld, instance B is pid %ld; they share only the "
           "store.\n\n", (long)a.pid, (long)b.pid);

    printf("Incident 1 — grant %s allows ONE credit of 250.00 USD to A-1187\n",
           g1.grant_id);
    demo_step(&t, &a, &g1, op1,
              "agent-17 applies the credit; the gateway times out", "admitted",
              false);
    demo_step(&t, &b, &g1, op1,
              "the same operation is retried and lands on B",
              "already_admitted", false);
    demo_step(&t, &b, &g1, op2,
              "the agent clicks Apply again: a new operation presents the "
              "spent grant on B", "refused", true);

    printf("\nIncident 2 — grant %s, admitted on A, then A restarts\n",
           g2.grant_id);
    demo_step(&t, &a, &g2, op3, "agent-17 applies the credit", "admitted",
              false);
    old_pid = (long)a.pid;
    demo_stop(&a, true);
    if (demo_start(&a, url) < 0) {
        fprintf(stderr, "oncegate demo: cannot restart instance A\n");
        demo_stop(&b, true);
        return OG_EXIT_INTERNAL;
    }
    printf("  -- rolling deployment: instance A (pid %ld) killed, restarted "
           "as pid %ld with empty memory --\n", old_pid, (long)a.pid);
    demo_step(&t, &a, &g2, op4,
              "a stale browser tab resubmits the grant as a new operation",
              "refused", true);
    demo_step(&t, &a, &g2, op3,
              "the original operation is retried after the restart",
              "already_admitted", false);

    demo_stop(&a, false);
    demo_stop(&b, false);

    printf("\n%d of %d replays refused; %d of %d steps as expected.\n",
           t.replays_refused, t.replays, t.steps - t.failed, t.steps);
    if (t.failed || t.replays_refused != t.replays) {
        printf("FAIL: the guarantee did not hold.\n");
        return OG_EXIT_REFUSED;
    }
    printf("Every replay was refused: each grant was admitted once, across "
           "instances and a restart.\n");
    return OG_EXIT_OK;
}
