/*
 * payouts.c — `oncegate payouts run`: the payout runner
 * (oncegate/payout_exec.h) as a process — workers, the sweeper, the
 * reconciler and the grant-expiry janitor on one store, until SIGTERM or
 * SIGINT, until there is nothing left to do (--until-idle), or for a time
 * (--seconds). One JSON line per job a worker took goes to stderr, with
 * identifiers and reason codes only; the counts go to stdout at the end.
 * Never a destination token, never the credential: the credential file is
 * read by the library's callback only when an attempt is about to be sent
 * or looked up, and wiped after.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "cli.h"
#include "secret.h"

const char og_usage_payouts[] =
    "usage: oncegate payouts run --provider URL --provider-table FILE\n"
    "                            --credential-file FILE [--store URL]\n"
    "         [--worker-id ID] [--workers N] [--audience A]\n"
    "         [--no-sweeper] [--no-reconciler] [--no-janitor]\n"
    "         [--until-idle] [--seconds S]\n"
    "         [--backoff 1m,2m,5m,15m] [--escalate-after 60m]\n"
    "         [--max-per-pass N] [--send-window 5m] [--attempt-lease 2m]\n"
    "         [--job-lease 1m] [--provider-timeout 10s]\n"
    "         [--record-timeout 10s] [--postpone 30s] [--max-sends N]\n"
    "         [--clock-error 0s] [--poll 200ms] [--interval 1s]\n"
    "         [--sweep-limit N] [--janitor-batch N] [--janitor-max-batches N]\n"
    "         [--recovery-lease D] [--store-timeout D]\n"
    "\n"
    "Runs the payout pipeline (docs/payouts.md, sections 5 and 6): N worker\n"
    "threads take jobs, validate, claim, start and send each attempt with\n"
    "its key, reference and expires_at = submit_by; the sweeper takes over\n"
    "attempts whose lease lapsed (Admitted -> NotStarted, Started ->\n"
    "Unknown); the reconciler looks Unknown attempts up by their client\n"
    "reference, oldest first, at most --max-per-pass per --interval, each on\n"
    "its own --backoff, and records what the lookup proves (NotApplied only\n"
    "after the provider's processing window; NeedsReconciliation at the\n"
    "--escalate-after deadline past submit_by); the janitor releases the\n"
    "reservations of expired, unused grants. The reconciler never sends.\n"
    "\n"
    "--audience is the audience this runner's workers present: a grant\n"
    "naming another is refused. A serve issues payout grants to its worker\n"
    "principal (payouts.worker_id): name it here. Default payout-executor,\n"
    "what library callers name (OG_PAYOUT_AUDIENCE).\n"
    "\n"
    "--provider-table is the payouts classification table\n"
    "(providers/sandbox-payouts.v1.json). --credential-file holds the\n"
    "provider's API key (surrounding white space trimmed; empty: none); it\n"
    "is read only when an attempt is about to be sent or looked up, so a\n"
    "missing file sends nothing. Durations take a unit: ms, s, m, h.\n"
    "--recovery-lease is how long a takeover (the sweeper's, the\n"
    "reconciler's) owns an attempt; default: the least the timing relations\n"
    "allow, 2 x --provider-timeout + --store-timeout (default 5s).\n"
    "\n"
    "Stops on SIGTERM or SIGINT after what each thread is doing; with\n"
    "--until-idle once no job is available and no payout attempt is\n"
    "Admitted, Started or Unknown (NeedsReconciliation waits for a person;\n"
    "a job postponed to later is not seen); with --seconds after S seconds\n"
    "(both: whichever comes first). stderr: one JSON line per job taken\n"
    "(identifiers and reason codes). stdout at the end: one JSON object of\n"
    "counts: ends, reasons, sends, security_signals, sweeper, reconciler,\n"
    "expired_grants, errors.\n"
    "\n"
    "exit: 0 stopped as asked, 2 bad usage, 75 store unavailable, 78 bad\n"
    "store URL, schema mismatch or unreadable table, 70 internal error.\n";

/* ===========================================================================
 * Parsing
 * ========================================================================= */

/* A duration with a unit (ms, s, m, h) into *us: 0, or -1. */
static int parse_duration(const char *s, int64_t *us)
{
    char *end;
    long long v;
    int64_t unit;

    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || v < 0 || v > 100LL * 24 * 3600 * 1000)
        return -1;
    if (strcmp(end, "ms") == 0)
        unit = 1000;
    else if (strcmp(end, "s") == 0)
        unit = 1000000;
    else if (strcmp(end, "m") == 0)
        unit = 60 * INT64_C(1000000);
    else if (strcmp(end, "h") == 0)
        unit = 3600 * INT64_C(1000000);
    else
        return -1;
    if (v > INT64_MAX / unit)
        return -1;
    *us = (int64_t)v * unit;
    return 0;
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v;

    if (!s || !*s)
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* "1s,2s,5s" into b (at most max): the count, or -1. */
static int parse_backoff(const char *s, int64_t *b, int max)
{
    char buf[512], *save = NULL, *tok;
    int n = 0;

    if (!s || strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == max || parse_duration(tok, &b[n]) != 0 || b[n] < 1000)
            return -1;
        n++;
    }
    return n >= 1 ? n : -1;
}

/* ===========================================================================
 * The credential: read at the moment it is needed
 * ========================================================================= */

/* og_payout_credential_fn over a file: its content with surrounding white
 * space trimmed (1..OG_PAYOUT_CREDENTIAL_MAX bytes, or empty: no key). */
static int credential_from_file(void *arg, char *out, size_t outlen)
{
    return og_secret_text_file_read(arg, OG_PAYOUT_CREDENTIAL_MAX, out,
                                    outlen);
}

/* ===========================================================================
 * Output
 * ========================================================================= */

/* One line per job taken: identifiers and codes only. */
static void log_work(void *arg, const og_payout_work *w)
{
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:i, s:s, s:s, s:b, s:b}",
        "event", "payout_work", "end", og_payout_work_end_name(w->end),
        "reason", og_payout_worker_reason_name(w->reason), "job",
        w->job.job_id, "payout", w->job.payout_id, "delivery",
        (json_int_t)w->job.delivery, "grant", w->job.grant_id, "attempt",
        w->attempt_id, "sends", w->sends, "answer",
        w->sends ? w->answer.reason : "", "attempt_status",
        og_op_status_name(w->attempt_status), "acknowledged",
        w->acknowledged, "security_signal", w->security_signal);
    char *s;

    (void)arg;
    if (j && w->error)
        json_object_set_new(j, "error", json_string(og_err_name(w->error)));
    if (j && (s = json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII))) {
        fprintf(stderr, "%s\n", s);
        free(s);
    }
    json_decref(j);
}

static json_t *counts_json(const og_payout_runner_counts *c)
{
    json_t *ends = json_object(), *reasons = json_object();

    for (int i = 0; i < OG_PAYOUT_WORK_END_COUNT; i++)
        json_object_set_new(ends,
                            og_payout_work_end_name((og_payout_work_end)i),
                            json_integer(c->ends[i]));
    for (int i = 0; i < OG_PAYOUT_WORKER_REASON_COUNT; i++)
        if (c->reasons[i])
            json_object_set_new(
                reasons,
                og_payout_worker_reason_name((og_payout_worker_reason)i),
                json_integer(c->reasons[i]));
    return json_pack(
        "{s:o, s:o, s:I, s:I, s:{s:i, s:i, s:i, s:i, s:i, s:i},"
        " s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:I, s:I, s:I}",
        "ends", ends, "reasons", reasons, "sends", (json_int_t)c->sends,
        "security_signals", (json_int_t)c->security_signals, "sweeper",
        "scanned", c->sweep.scanned, "taken", c->sweep.taken, "not_started",
        c->sweep.not_started, "unknown", c->sweep.unknown, "later",
        c->sweep.later, "errors", c->sweep.errors, "reconciler", "scanned",
        c->reconcile.scanned, "looked_up", c->reconcile.looked_up,
        "succeeded", c->reconcile.succeeded, "failed", c->reconcile.failed,
        "not_applied", c->reconcile.not_applied, "escalated",
        c->reconcile.escalated, "later", c->reconcile.later, "returned",
        c->reconcile.returned, "errors", c->reconcile.errors,
        "expired_grants", (json_int_t)c->expired_grants, "worker_errors",
        (json_int_t)c->worker_errors, "pass_errors",
        (json_int_t)c->pass_errors);
}

/* ===========================================================================
 * run
 * ========================================================================= */

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int usage_error(const char *what)
{
    fprintf(stderr, "oncegate: payouts run: %s\n", what);
    fputs(og_usage_payouts, stderr);
    return OG_EXIT_USAGE;
}

static int payouts_run(int argc, char **argv)
{
    enum { O_STORE = 256, O_PROVIDER, O_TABLE, O_CRED, O_WORKER_ID,
           O_WORKERS, O_AUDIENCE, O_NO_SWEEPER, O_NO_RECONCILER,
           O_NO_JANITOR, O_UNTIL_IDLE, O_SECONDS, O_BACKOFF, O_ESCALATE,
           O_MAX_PER_PASS, O_SEND_WINDOW, O_ATTEMPT_LEASE, O_JOB_LEASE,
           O_PROVIDER_TIMEOUT, O_RECORD_TIMEOUT, O_POSTPONE, O_MAX_SENDS,
           O_CLOCK_ERROR, O_POLL, O_INTERVAL, O_SWEEP_LIMIT, O_JBATCH,
           O_JMAX, O_RECOVERY_LEASE, O_STORE_TIMEOUT };
    static const struct option longopts[] = {
        {"store", required_argument, NULL, O_STORE},
        {"provider", required_argument, NULL, O_PROVIDER},
        {"provider-table", required_argument, NULL, O_TABLE},
        {"credential-file", required_argument, NULL, O_CRED},
        {"worker-id", required_argument, NULL, O_WORKER_ID},
        {"workers", required_argument, NULL, O_WORKERS},
        {"audience", required_argument, NULL, O_AUDIENCE},
        {"no-sweeper", no_argument, NULL, O_NO_SWEEPER},
        {"no-reconciler", no_argument, NULL, O_NO_RECONCILER},
        {"no-janitor", no_argument, NULL, O_NO_JANITOR},
        {"until-idle", no_argument, NULL, O_UNTIL_IDLE},
        {"seconds", required_argument, NULL, O_SECONDS},
        {"backoff", required_argument, NULL, O_BACKOFF},
        {"escalate-after", required_argument, NULL, O_ESCALATE},
        {"max-per-pass", required_argument, NULL, O_MAX_PER_PASS},
        {"send-window", required_argument, NULL, O_SEND_WINDOW},
        {"attempt-lease", required_argument, NULL, O_ATTEMPT_LEASE},
        {"job-lease", required_argument, NULL, O_JOB_LEASE},
        {"provider-timeout", required_argument, NULL, O_PROVIDER_TIMEOUT},
        {"record-timeout", required_argument, NULL, O_RECORD_TIMEOUT},
        {"postpone", required_argument, NULL, O_POSTPONE},
        {"max-sends", required_argument, NULL, O_MAX_SENDS},
        {"clock-error", required_argument, NULL, O_CLOCK_ERROR},
        {"poll", required_argument, NULL, O_POLL},
        {"interval", required_argument, NULL, O_INTERVAL},
        {"sweep-limit", required_argument, NULL, O_SWEEP_LIMIT},
        {"janitor-batch", required_argument, NULL, O_JBATCH},
        {"janitor-max-batches", required_argument, NULL, O_JMAX},
        {"recovery-lease", required_argument, NULL, O_RECOVERY_LEASE},
        {"store-timeout", required_argument, NULL, O_STORE_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    static const int64_t MIN = 60 * INT64_C(1000000);
    const char *url = OG_DEFAULT_STORE_URL, *table_path = NULL,
               *cred_path = NULL;
    int64_t backoff[16] = {1 * MIN, 2 * MIN, 5 * MIN, 15 * MIN};
    int64_t seconds_us = 0, d, recovery_lease = 0, store_timeout = 0;
    og_payout_runner_cfg rc_cfg;
    og_payout_runner_counts counts;
    og_payout_runner *runner = NULL;
    og_provider_table *table = NULL;
    og_provider_table_error terr;
    og_store_options opts;
    og_store *s = NULL;
    bool until_idle = false;
    sigset_t set;
    int c, rc, exit_code = OG_EXIT_OK, n;
    int64_t start, idle_since = 0;
    json_t *out;

    memset(&rc_cfg, 0, sizeof rc_cfg);
    rc_cfg.worker.worker_id = "svc-payout-worker";
    rc_cfg.worker.audience = OG_PAYOUT_AUDIENCE;
    rc_cfg.worker.job_lease_us = 1 * MIN;
    rc_cfg.worker.attempt_lease_us = 2 * MIN;
    rc_cfg.worker.send_window_us = 5 * MIN;
    rc_cfg.worker.provider_timeout_us = 10 * INT64_C(1000000);
    rc_cfg.worker.record_timeout_us = 10 * INT64_C(1000000);
    rc_cfg.worker.postpone_us = 30 * INT64_C(1000000);
    rc_cfg.worker.max_sends = 3;
    rc_cfg.workers = 1;
    rc_cfg.sweeper = rc_cfg.reconciler = rc_cfg.janitor = true;
    rc_cfg.sweeper_actor = "payout-sweeper";
    rc_cfg.sweep_limit = 100;
    rc_cfg.janitor_batch = 1000;
    rc_cfg.janitor_max_batches = 10;
    rc_cfg.idle_wait_us = 200 * INT64_C(1000);
    rc_cfg.interval_us = 1000 * INT64_C(1000);
    rc_cfg.reconcile.actor = "payout-reconciler";
    rc_cfg.reconcile.backoff_us = backoff;
    rc_cfg.reconcile.backoff_n = 4;
    rc_cfg.reconcile.escalate_after_us = 60 * MIN;
    rc_cfg.reconcile.max_per_pass = 100;
    rc_cfg.reconcile.provider_timeout_us = 10 * INT64_C(1000000);

#define DUR(field)                                                             \
    do {                                                                       \
        if (parse_duration(optarg, &d) != 0)                                   \
            return usage_error("a duration is N with a unit: ms, s, m, h");  \
        field = d;                                                             \
    } while (0)
#define INT(field, lo, hi, what)                                               \
    do {                                                                       \
        if (parse_int(optarg, lo, hi, &n) != 0)                                \
            return usage_error(what);                                          \
        field = n;                                                             \
    } while (0)
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_STORE: url = optarg; break;
        case O_PROVIDER:
            rc_cfg.worker.provider_url = rc_cfg.reconcile.provider_url =
                optarg;
            break;
        case O_TABLE: table_path = optarg; break;
        case O_CRED: cred_path = optarg; break;
        case O_WORKER_ID: rc_cfg.worker.worker_id = optarg; break;
        case O_WORKERS: INT(rc_cfg.workers, 0, 64, "--workers is 0..64"); break;
        case O_AUDIENCE: rc_cfg.worker.audience = optarg; break;
        case O_NO_SWEEPER: rc_cfg.sweeper = false; break;
        case O_NO_RECONCILER: rc_cfg.reconciler = false; break;
        case O_NO_JANITOR: rc_cfg.janitor = false; break;
        case O_UNTIL_IDLE: until_idle = true; break;
        case O_SECONDS:
            INT(n, 1, 86400 * 365, "--seconds is 1..31536000");
            seconds_us = (int64_t)n * 1000000;
            break;
        case O_BACKOFF:
            if ((n = parse_backoff(optarg, backoff, 16)) < 0)
                return usage_error("--backoff is 1..16 durations of at "
                                   "least 1ms, comma-separated");
            rc_cfg.reconcile.backoff_n = n;
            break;
        case O_ESCALATE: DUR(rc_cfg.reconcile.escalate_after_us); break;
        case O_MAX_PER_PASS:
            INT(rc_cfg.reconcile.max_per_pass, 1, 1000,
                "--max-per-pass is 1..1000");
            break;
        case O_SEND_WINDOW: DUR(rc_cfg.worker.send_window_us); break;
        case O_ATTEMPT_LEASE: DUR(rc_cfg.worker.attempt_lease_us); break;
        case O_JOB_LEASE: DUR(rc_cfg.worker.job_lease_us); break;
        case O_PROVIDER_TIMEOUT:
            DUR(rc_cfg.worker.provider_timeout_us);
            rc_cfg.reconcile.provider_timeout_us =
                rc_cfg.worker.provider_timeout_us;
            break;
        case O_RECORD_TIMEOUT: DUR(rc_cfg.worker.record_timeout_us); break;
        case O_POSTPONE: DUR(rc_cfg.worker.postpone_us); break;
        case O_MAX_SENDS:
            INT(rc_cfg.worker.max_sends, 1, 100, "--max-sends is 1..100");
            break;
        case O_CLOCK_ERROR: DUR(rc_cfg.worker.clock_error_us); break;
        case O_POLL: DUR(rc_cfg.idle_wait_us); break;
        case O_INTERVAL: DUR(rc_cfg.interval_us); break;
        case O_SWEEP_LIMIT:
            INT(rc_cfg.sweep_limit, 1, 1000, "--sweep-limit is 1..1000");
            break;
        case O_JBATCH:
            INT(rc_cfg.janitor_batch, 1, OG_RETENTION_BATCH_MAX,
                "--janitor-batch is 1..100000");
            break;
        case O_JMAX:
            INT(rc_cfg.janitor_max_batches, 1, 1000000,
                "--janitor-max-batches is 1..1000000");
            break;
        case O_RECOVERY_LEASE: DUR(recovery_lease); break;
        case O_STORE_TIMEOUT: DUR(store_timeout); break;
        case 'h':
            fputs(og_usage_payouts, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_payouts, stderr);
            return OG_EXIT_USAGE;
        }
    }
#undef DUR
#undef INT
    if (optind != argc)
        return usage_error("unexpected argument");
    if (!rc_cfg.worker.provider_url || !table_path || !cred_path)
        return usage_error("--provider, --provider-table and "
                           "--credential-file are required");
    rc_cfg.worker.credential = rc_cfg.reconcile.credential =
        credential_from_file;
    rc_cfg.worker.credential_arg = rc_cfg.reconcile.credential_arg =
        (void *)cred_path;

    if (og_provider_table_load_file(table_path, &table, &terr) != 0) {
        fprintf(stderr, "oncegate: payouts run: %s: %s\n", table_path,
                terr.text);
        return OG_EXIT_CONFIG;
    }
    rc_cfg.worker.table = rc_cfg.reconcile.table = table;

    og_store_options_default(&opts);
    opts.pool_size = rc_cfg.workers + 4;
    if (store_timeout > 0)
        opts.timings.store_timeout_us = store_timeout;
    /* The takeover's lease (the sweeper's and the reconciler's) covers a
     * lookup and its record, no more: by default the least the timing
     * relations allow for these timeouts, so an attempt the sweeper made
     * Unknown reaches the reconciler that much later, not a minute. */
    opts.timings.provider_timeout_us = rc_cfg.worker.provider_timeout_us;
    opts.timings.recovery_lease_us = recovery_lease;
    og_timings_fit(&opts.timings);

    /* Signals are taken by this thread alone (sigtimedwait below): block
     * them before any thread exists. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    if ((rc = og_store_open(url, &opts, &s)) < 0) {
        fprintf(stderr, "oncegate: payouts run: cannot open store: %s: %s\n",
                og_err_name(rc), og_strerror(rc));
        og_provider_table_free(table);
        return og_exit_for_error(rc);
    }
    rc_cfg.on_work = log_work;
    if ((rc = og_payout_runner_start(s, &rc_cfg, &runner)) < 0) {
        fprintf(stderr, "oncegate: payouts run: %s: %s\n", og_err_name(rc),
                rc == OG_EINVAL ? "a setting is out of its bounds (leases "
                                  "and windows 1ms..24h, ids 1-124 bytes)"
                                : og_strerror(rc));
        og_store_free(s);
        og_provider_table_free(table);
        return rc == OG_EINVAL ? OG_EXIT_USAGE : og_exit_for_error(rc);
    }
    start = mono_us();
    for (;;) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &tick);

        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (seconds_us > 0 && mono_us() - start >= seconds_us)
            break;
        if (until_idle) {
            /* Idle for two worker polls in a row: a job made available
             * since a worker's last take is taken by its next one, and a
             * worker between its take and its claim holds an attempt the
             * scan cannot see yet. */
            rc = og_payout_runner_idle(runner);
            if (rc != 1)
                idle_since = 0;
            else if (idle_since == 0)
                idle_since = mono_us();
            else if (mono_us() - idle_since >
                     2 * rc_cfg.idle_wait_us + 100000)
                break;
        }
    }
    og_payout_runner_stop(runner);
    og_payout_runner_counts_get(runner, &counts);
    out = counts_json(&counts);
    og_cli_print_json(out);
    json_decref(out);
    og_payout_runner_free(runner);
    og_store_free(s);
    og_provider_table_free(table);
    return exit_code;
}

int og_cli_payouts(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return payouts_run(argc - 1, argv + 1);
    if (argc >= 2 &&
        (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(og_usage_payouts, stdout);
        return OG_EXIT_OK;
    }
    fputs(og_usage_payouts, stderr);
    return OG_EXIT_USAGE;
}
