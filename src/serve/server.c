/*
 * server.c — `oncegate serve`: arguments, configuration, the startup checks
 * that refuse a deployment which cannot keep the guarantee, and the signal
 * loop (SIGTERM drains, SIGHUP reloads keys and principals).
 *
 * Startup refuses (exit 78), naming the problem:
 *   - a configuration key out of its bounds, or a broken timing relation
 *     (og_timings_check names it: "T4: provider_timeout ...");
 *   - on PostgreSQL, admission connections without a finite
 *     statement_timeout and lock_timeout, or with a bound longer than
 *     store_timeout (the admission bound cleanup_margin is checked against).
 * A store that does not answer at startup exits 75: start again later.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "exit.h" /* the exit codes every subcommand shares */
#include "http.h"
#include "payout_runner.h"
#include "secret.h" /* og_key_file_refusal */

const char og_usage_serve[] =
    "usage: oncegate serve --config FILE [--listen HOST:PORT] [--store URL]\n"
    "       oncegate serve --dev [--data-dir DIR] [--listen HOST:PORT]\n"
    "                      [--store URL] [--provider URL]\n"
    "       oncegate serve --routes | --config-doc\n"
    "\n"
    "The HTTP service (docs/http.md): admits grants at the execution\n"
    "boundary, the consume verdict, revocation, families, tickets, and\n"
    "redeems external single-use tokens with catch-up. Any number of\n"
    "instances may share one store.\n"
    "\n"
    "  --config FILE    JSON configuration (docs/config.md)\n"
    "  --dev            development instance: SQLite in DIR, generated issuer\n"
    "                   keys and one principal per role in\n"
    "                   DIR/dev-credentials.json (reused when present);\n"
    "                   executes credit.apply and redeems codes at an\n"
    "                   oncegate-sandbox it starts beside itself (state\n"
    "                   DIR/sandbox.db; results sealed with\n"
    "                   DIR/redemption.key); operation ids with a MAC\n"
    "                   (DIR/operation-id.key); the payout pipeline and\n"
    "                   the payout scenario of docs/payouts.md (PAY-3107);\n"
    "                   short timings (the dev mode block below);\n"
    "                   listens on 127.0.0.1:8080 unless --listen\n"
    "  --data-dir DIR   dev data directory (default ./oncegate-dev)\n"
    "  --provider URL   dev: use the sandbox provider at URL instead of\n"
    "                   starting one\n"
    "  --listen H:P     overrides the configuration (port 0: any free port)\n"
    "  --store URL      overrides the configuration's store\n"
    "  --routes         prints the served routes (METHOD PATH) and exits\n"
    "  --config-doc     prints docs/config.md and exits\n"
    "\n"
    "When ready, prints `oncegate: listening on http://HOST:PORT`.\n"
    "SIGTERM drains (in-flight requests finish within drain_timeout_ms),\n"
    "then exits 0; SIGHUP reloads keys and principals.\n"
    "\n"
    "exit: 0 drained, 2 usage, 70 internal, 75 store unavailable at startup,\n"
    "78 configuration refused.\n";

#define DEV_DIR_DEFAULT "./oncegate-dev"

typedef struct serve_args {
    const char *config;
    const char *data_dir;
    const char *listen;
    const char *store;
    const char *provider;
    bool dev;
} serve_args;

/* Refuses to start: the message names the key or relation. */
static int refuse(const char *what)
{
    fprintf(stderr, "oncegate: serve: %s\n", what);
    og_log(OG_LOG_ERROR, "startup_refused", json_pack("{s:s}", "reason",
                                                      what));
    return OG_EXIT_CONFIG;
}

/* Loads configuration per the arguments into srv->cfg. Exit code. */
static int load_config(og_srv *srv, const serve_args *a)
{
    char err[512] = "";
    int rc;

    if ((rc = og_srv_config_defaults(&srv->cfg)) != 0)
        return OG_EXIT_INTERNAL;
    if (a->dev && !a->listen)
        og_srv_config_set_listen(&srv->cfg, "127.0.0.1:8080");
    /* before the file: a configuration's values win */
    if (a->dev && og_srv_dev_apply(&srv->cfg, err, sizeof err) != 0)
        return refuse(err);
    if (a->config &&
        og_srv_config_load(&srv->cfg, a->config, err, sizeof err) != 0)
        return refuse(err);
    if (a->dev && og_srv_dev_prepare(&srv->cfg, a->data_dir, a->store, err,
                                     sizeof err) != 0)
        return refuse(err);
    if (a->listen && og_srv_config_set_listen(&srv->cfg, a->listen) != 0)
        return refuse("--listen: expected HOST:PORT");
    if (a->store) {
        char *dup = strdup(a->store);

        if (!dup)
            return OG_EXIT_INTERNAL;
        free(srv->cfg.store_url);
        srv->cfg.store_url = dup;
    }
    if (a->provider) {
        char *dup = strdup(a->provider);

        if (!dup)
            return OG_EXIT_INTERNAL;
        free(srv->cfg.provider_url);
        srv->cfg.provider_url = dup;
    }
    if (og_srv_config_check(&srv->cfg, err, sizeof err) != 0)
        return refuse(err);
    return OG_EXIT_OK;
}

/* Checks the server-side bound on admissions (docs/design.md, "The
 * server-side bound on an admission, and what it does not cover"): a client
 * deadline alone lets the server keep working after the client stopped
 * waiting. Exit code. */
static int check_admission_bound(og_srv *srv)
{
    og_session_bounds b;
    char msg[512] = "";
    int rc = og_store_session_bounds(srv->store, &b);

    if (rc != 0) {
        fprintf(stderr, "oncegate: serve: reading the admission bound: %s\n",
                og_err_name(rc));
        return og_exit_for_error(rc);
    }
    if (og_srv_config_check_bounds(&srv->cfg, &b, msg, sizeof msg) != 0)
        return refuse(msg);
    if (!b.applicable)
        return OG_EXIT_OK;
    og_log(OG_LOG_INFO, "admission_bound",
           json_pack("{s:I, s:I, s:b, s:I, s:i, s:b, s:I}",
                     "statement_timeout_ms",
                     (json_int_t)b.statement_timeout_ms, "lock_timeout_ms",
                     (json_int_t)b.lock_timeout_ms, "has_transaction_timeout",
                     b.has_transaction_timeout, "transaction_timeout_ms",
                     (json_int_t)b.transaction_timeout_ms,
                     "server_version_num", b.server_version_num,
                     "sync_commit_waits", b.sync_commit_waits,
                     "commit_bound_ms",
                     (json_int_t)(srv->cfg.timings.commit_bound_us / 1000)));
    return OG_EXIT_OK;
}

/* How long a starting instance keeps asking for the migration while
 * another migrator holds the store: instances started together on one
 * store (dev mode's shared data directory, a fleet's rollout) serialize
 * their migrations, and a waiter's store timeout is sized for requests,
 * not for a whole migration run by someone else. */
#define MIGRATE_WAIT_S 60

/* og_store_migrate, asked again while it answers OG_ESTORE_UNAVAILABLE and
 * MIGRATE_WAIT_S has not passed: every migration is idempotent and runs in
 * its own transaction, so a run whose commit was not confirmed is simply
 * run again, and the next one finds the store at its latest version. */
static int migrate_store(const char *url, const og_store_options *o)
{
    struct timespec start, now, pause = {0, 200 * 1000 * 1000};
    bool said = false;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        rc = og_store_migrate(url, o, NULL, NULL);
        if (rc != OG_ESTORE_UNAVAILABLE)
            return rc;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= MIGRATE_WAIT_S)
            return rc;
        if (!said) { /* once: a JSON event like every other log line */
            og_log(OG_LOG_WARN, "store_migrate_wait",
                   json_pack("{s:s,s:i}", "error", og_err_name(rc),
                             "wait_s", MIGRATE_WAIT_S));
            said = true;
        }
        nanosleep(&pause, NULL);
    }
}

/* Opens (and in dev mode or with auto_migrate, migrates) the store. */
static int open_store(og_srv *srv)
{
    og_store_options o;
    int rc;

    og_store_options_default(&o);
    o.timings = srv->cfg.timings;
    o.pool_size = srv->cfg.pool_size;
    o.admit_batch_max = srv->cfg.admit_batch_max;
    o.admit_batches_in_flight = srv->cfg.admit_batches_in_flight;
    o.outcome_batch_max = srv->cfg.outcome_batch_max;
    o.consume_batch_max = srv->cfg.consume_batch_max;
    o.rotate_batch_max = srv->cfg.rotate_batch_max;
    o.session_bounds_from_role = srv->cfg.store_bounds_from_role;
    o.consumption_keys = srv->cfg.consumption_keys; /* S5: agreed or 78 */
    if (srv->cfg.auto_migrate &&
        (rc = migrate_store(srv->cfg.store_url, &o)) != 0) {
        fprintf(stderr, "oncegate: serve: migrating the store: %s: %s\n",
                og_err_name(rc), og_strerror(rc));
        return og_exit_for_error(rc);
    }
    if ((rc = og_store_open(srv->cfg.store_url, &o, &srv->store)) != 0) {
        fprintf(stderr, "oncegate: serve: opening the store: %s: %s\n",
                og_err_name(rc), og_strerror(rc));
        og_log(OG_LOG_ERROR, "store_open_failed",
               json_pack("{s:s}", "error", og_err_name(rc)));
        return og_exit_for_error(rc);
    }
    return check_admission_bound(srv);
}

/* Reads an API key file (a secret; what names it, for the refusal) into a
 * malloc'd string with surrounding white space trimmed; *out NULL when
 * path is NULL. Exit code. */
static int read_api_key(const char *what, const char *path, char **out)
{
    char msg[160];
    char buf[1024];
    FILE *f;
    size_t n;
    char *b, *e;

    *out = NULL;
    if (!path)
        return OG_EXIT_OK;
    if (!(f = fopen(path, "re"))) {
        snprintf(msg, sizeof msg, "%s: cannot be read", what);
        return refuse(msg);
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (b = buf; *b == ' ' || *b == '\t' || *b == '\n' || *b == '\r'; b++)
        ;
    for (e = b + strlen(b); e > b && (e[-1] == ' ' || e[-1] == '\t' ||
                                      e[-1] == '\n' || e[-1] == '\r');
         e--)
        ;
    *e = '\0';
    if (n == sizeof buf - 1 || !*b) {
        sodium_memzero(buf, sizeof buf);
        snprintf(msg, sizeof msg, "%s: empty, or longer than 1 KiB", what);
        return refuse(msg);
    }
    *out = strdup(b);
    sodium_memzero(buf, sizeof buf);
    return *out ? OG_EXIT_OK : OG_EXIT_INTERNAL;
}

/* Opens the provider's classification table and client when provider.url is
 * set, and checks that the configuration claims no more than the provider
 * documents: timings.provider_key_retention within the table's declared
 * key retention (the submission window, T8, is measured against it).
 * Exit code. */
static int open_provider(og_srv *srv)
{
    og_provider_table_error terr;
    const og_provider_properties *p;
    char msg[512], *key = NULL;
    int rc;

    if (!srv->cfg.provider_url)
        return OG_EXIT_OK;
    if (og_provider_table_load_file(srv->cfg.provider_table, &srv->ptable,
                                    &terr) != 0) {
        snprintf(msg, sizeof msg, "provider.table: %s", terr.text);
        return refuse(msg);
    }
    p = og_provider_table_properties(srv->ptable);
    if (srv->cfg.timings.provider_key_retention_us >
        p->key_retention_s * INT64_C(1000000)) {
        snprintf(msg, sizeof msg,
                 "timings.provider_key_retention_ms (%lld) exceeds the key "
                 "retention the provider documents in provider.table (%lld "
                 "s): T8 would let submit_by outlive the provider's memory "
                 "of a key",
                 (long long)(srv->cfg.timings.provider_key_retention_us /
                             1000),
                 (long long)p->key_retention_s);
        return refuse(msg);
    }
    if ((rc = read_api_key("provider.api_key_file",
                           srv->cfg.provider_api_key_file, &key)) !=
        OG_EXIT_OK)
        return rc;
    rc = og_provider_open(srv->cfg.provider_url, key, srv->ptable,
                          &srv->provider);
    if (key) {
        sodium_memzero(key, strlen(key));
        free(key);
    }
    if (rc != 0)
        return refuse("provider.url: not a usable http(s) base URL");
    /* KA1: on only where the table declares atomic same-key handling
     * (og_provider_set_reuse decides); the bounds were checked at load. */
    if (og_provider_set_reuse(srv->provider, srv->cfg.provider_keep_alive,
                              srv->cfg.provider_keep_alive_idle_us) != 0)
        return refuse("provider.keep_alive: cannot set up the connection "
                      "pool");
    og_log(OG_LOG_INFO, "provider",
           json_pack("{s:s, s:s, s:i, s:I, s:b, s:i}", "provider",
                     p->provider, "api", p->api, "table_version", p->version,
                     "key_retention_s", (json_int_t)p->key_retention_s,
                     "atomic_same_key", p->atomic_same_key, "keep_alive",
                     og_provider_reuses(srv->provider)
                         ? srv->cfg.provider_keep_alive
                         : 0));
    return OG_EXIT_OK;
}

/* Opens the token endpoint client and loads the sealing key when
 * redemption is on (redemption.key_file set). Exit code: a key file that
 * is unreadable, readable by others or not 32 bytes refuses to start. */
static int open_redemption(og_srv *srv)
{
    const char *url = og_srv_config_redemption_url(&srv->cfg);
    char msg[512], *key = NULL;
    int rc;

    if (!srv->cfg.redemption_key_file)
        return OG_EXIT_OK;
    if (!url)
        return refuse("redemption.url: required with redemption.key_file when "
                      "provider.url is empty (where else would a token be "
                      "redeemed?)");
    if ((rc = og_redeem_key_load_file(srv->cfg.redemption_key_file,
                                      &srv->redeem_key)) != 0) {
        return refuse(og_key_file_refusal(msg, sizeof msg,
                                          "redemption.key_file",
                                          srv->cfg.redemption_key_file, rc));
    }
    if ((rc = read_api_key("redemption.api_key_file",
                           srv->cfg.redemption_api_key_file, &key)) !=
        OG_EXIT_OK)
        return rc;
    rc = og_provider_open_exchange(url, key, &srv->redeemer);
    if (key) {
        sodium_memzero(key, strlen(key));
        free(key);
    }
    if (rc != 0)
        return refuse("redemption.url: not a usable http(s) base URL");
    og_log(OG_LOG_INFO, "redemption",
           json_pack("{s:s, s:I}", "token_endpoint", url,
                     "catch_up_timeout_ms",
                     (json_int_t)(srv->cfg.redemption_catch_up_us / 1000)));
    return OG_EXIT_OK;
}

/* Loads the operation-id MAC key when operation_ids.mac_key_file is set
 * (docs/design.md, "Server-issued operation ids"). Exit code: a key file
 * that is unreadable, readable by others or not 64 hex digits refuses to
 * start. The log line says whether MACs are issued and required, never the
 * key. */
static int open_opid(og_srv *srv)
{
    char msg[512];
    int rc;

    if (!srv->cfg.opid_mac_key_file)
        return OG_EXIT_OK;
    if ((rc = og_opid_key_load_file(srv->cfg.opid_mac_key_file,
                                    &srv->opid_key)) != 0) {
        return refuse(og_key_file_refusal(msg, sizeof msg,
                                          "operation_ids.mac_key_file",
                                          srv->cfg.opid_mac_key_file, rc));
    }
    og_log(OG_LOG_INFO, "operation_ids",
           json_pack("{s:b, s:b}", "mac", 1, "require_mac",
                     srv->cfg.opid_require_mac));
    return OG_EXIT_OK;
}

/* One recovery pass, logged when it did anything; when print, its counts
 * as one JSON line on stdout. 0 or the scan's error. */
static int recovery_pass(og_srv *srv, bool print)
{
    og_recovery_stats stats, *st = &stats;
    int rc = og_recover_once(srv->store, srv->provider, srv->ptable,
                             srv->cfg.timings.provider_timeout_us, 100, st);

    if (rc == 0) {
        const struct { og_op_status st; int n; } recorded[] = {
            {OG_OP_SUCCEEDED, st->succeeded}, {OG_OP_FAILED, st->failed},
            {OG_OP_UNKNOWN, st->unknown},
            {OG_OP_NEEDS_RECONCILIATION, st->reconcile},
        };

        og_metrics_takeovers((unsigned)st->taken);
        for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++)
            for (int k = 0; k < recorded[i].n; k++)
                og_metrics_outcome(recorded[i].st, OG_SOURCE_RECOVERY);
    }
    if (rc != 0)
        og_log(OG_LOG_WARN, "recovery_failed",
               json_pack("{s:s}", "store_error", og_err_name(rc)));
    else if (st->scanned > 0)
        og_log(OG_LOG_INFO, "recovery",
               json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
                         "scanned", st->scanned, "taken", st->taken,
                         "succeeded", st->succeeded, "failed", st->failed,
                         "unknown", st->unknown, "needs_reconciliation",
                         st->reconcile, "resubmitted", st->resubmitted,
                         "later", st->later, "errors", st->errors));
    if (rc == 0 && print) {
        printf("{\"scanned\":%d,\"taken\":%d,\"succeeded\":%d,"
               "\"failed\":%d,\"unknown\":%d,\"needs_reconciliation\":%d,"
               "\"resubmitted\":%d,\"later\":%d,\"errors\":%d}\n",
               st->scanned, st->taken, st->succeeded, st->failed, st->unknown,
               st->reconcile, st->resubmitted, st->later, st->errors);
        fflush(stdout);
    }
    return rc;
}

/* The CLOCK_REALTIME instant us microseconds from now (pthread condition
 * variables wait until one). */
static struct timespec deadline_after(int64_t us)
{
    struct timespec t;

    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += us / 1000000;
    t.tv_nsec += (us % 1000000) * 1000;
    if (t.tv_nsec >= 1000000000) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000;
    }
    return t;
}

/* Waits up to us microseconds, or until draining starts. 1 when draining. */
static int drain_wait(og_srv *srv, int64_t us)
{
    struct timespec deadline = deadline_after(us);

    pthread_mutex_lock(&srv->drain_mu);
    while (!atomic_load(&srv->draining))
        if (pthread_cond_timedwait(&srv->drain_cv, &srv->drain_mu,
                                   &deadline) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&srv->drain_mu);
    return atomic_load(&srv->draining);
}

/* Starts draining: every background loop wakes and stops, and serve's
 * drain wait wakes to count what is in flight. */
static void drain_begin(og_srv *srv)
{
    atomic_store(&srv->draining, true);
    pthread_mutex_lock(&srv->drain_mu);
    pthread_cond_broadcast(&srv->drain_cv);
    pthread_mutex_unlock(&srv->drain_mu);
}

/* ===========================================================================
 * Background jobs: recovery, cleanup, archiving. Each is a pass function
 * run by a dedicated thread every interval until the drain, in serve or in
 * its own command (`oncegate recover`, `cleanup`, `archive-operations`).
 * ========================================================================= */

typedef struct og_job {
    const char *name;                     /* the command */
    const char *usage;
    int (*pass)(og_srv *srv, bool print); /* 0 or the store error */
    int64_t (*interval_us)(const og_srv *srv);
    bool first_at_once;  /* a pass when the loop starts, then every
                            interval; else the first after one interval */
    bool print_in_loop;  /* the command prints every pass, not only --once */
    bool loops;          /* the command loops without --once; else it runs
                            exactly one pass */
    bool needs_provider;
} og_job;

/* Recovery: a pass every half recovery_delay, so a stalled operation is
 * picked up within recovery_delay of its lease's end (T7). */
static int64_t recovery_interval(const og_srv *srv)
{
    return srv->cfg.timings.recovery_delay_us / 2;
}

static int64_t janitor_interval(const og_srv *srv)
{
    return srv->cfg.janitor_interval_us;
}

static const og_job job_recover = {
    "recover", og_usage_recover, recovery_pass, recovery_interval,
    false, false, true, true,
};
static const og_job job_cleanup = {
    "cleanup", og_usage_cleanup, og_srv_cleanup_pass, janitor_interval,
    true, true, true, false,
};
static const og_job job_archive = {
    "archive-operations", og_usage_archive_operations, og_srv_archive_pass,
    janitor_interval, true, true, false, false,
};

/* One job's thread. */
typedef struct og_job_run {
    og_srv *srv;
    const og_job *job;
    bool print;
    bool running;
    pthread_t thread;
} og_job_run;

static void *job_loop(void *arg)
{
    og_job_run *r = arg;

    if (r->job->first_at_once)
        (void)r->job->pass(r->srv, r->print);
    while (!drain_wait(r->srv, r->job->interval_us(r->srv)))
        (void)r->job->pass(r->srv, r->print);
    return NULL;
}

/* Starts r's thread for job. 0, or -1 when no thread could be made. */
static int job_start(og_job_run *r, og_srv *srv, const og_job *job,
                     bool print)
{
    r->srv = srv;
    r->job = job;
    r->print = print;
    r->running = pthread_create(&r->thread, NULL, job_loop, r) == 0;
    return r->running ? 0 : -1;
}

/* Waits for r's thread, after the drain began. */
static void job_join(og_job_run *r)
{
    if (r->running)
        pthread_join(r->thread, NULL);
    r->running = false;
}

/* SIGHUP: a new snapshot of keys and principals; the old one stays until
 * the last request holding it completes. A failed reload keeps the old. */
static void reload(og_srv *srv, const serve_args *a)
{
    og_principal *principals = NULL;
    size_t n = 0;
    og_srv_auth *fresh = NULL, *old;
    og_srv_config scratch;
    char err[512] = "";
    int rc;

    memset(&scratch, 0, sizeof scratch);
    if (a->config) {
        rc = og_srv_config_load_principals(a->config, &principals, &n, err,
                                           sizeof err);
    } else {
        /* Dev mode: the credentials file is the source of principals. */
        rc = og_srv_config_defaults(&scratch);
        if (rc == 0)
            rc = og_srv_dev_prepare(&scratch, a->data_dir, a->store, err,
                                    sizeof err);
        if (rc == 0) {
            principals = scratch.principals;
            n = scratch.n_principals;
            scratch.principals = NULL;
            scratch.n_principals = 0;
        }
    }
    og_srv_config_free(&scratch);
    if (rc == 0)
        rc = og_srv_auth_build(&srv->cfg, principals, n, &fresh, err,
                               sizeof err);
    free(principals);
    if (rc != 0) {
        og_log(OG_LOG_ERROR, "reload_failed",
               json_pack("{s:s}", "reason", err[0] ? err : og_err_name(rc)));
        return;
    }
    pthread_mutex_lock(&srv->auth_mu);
    old = srv->auth;
    srv->auth = fresh;
    pthread_mutex_unlock(&srv->auth_mu);
    og_srv_auth_unref(old);
    og_log(OG_LOG_INFO, "reloaded",
           json_pack("{s:I}", "principals", (json_int_t)n));
}

/* The stop watchdog. Stopping waits for every connection thread
 * (og_http_stop); a thread inside a store or provider call ends when the
 * call's own deadline passes, and the watchdog bounds the wait should one
 * not (under libmicrohttpd, which this edge replaced, a stop once in about
 * twenty suite runs never returned). The watchdog bounds it: 5 s when nothing was
 * in flight at the drain's end, else the longest a request can still run
 * (a store call and a provider call) plus 5 s. Past it the process ends itself: with nothing in flight
 * every answer given is already in the store, so that is a drained exit
 * (0); otherwise 70. */
typedef struct stop_watch {
    og_srv *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} stop_watch;

static void *stop_watchdog(void *arg)
{
    stop_watch *w = arg;
    int64_t limit_us = atomic_load(&w->srv->inflight) == 0
                           ? 5000000
                           : w->srv->cfg.timings.store_timeout_us +
                                 w->srv->cfg.timings.provider_timeout_us +
                                 5000000;
    struct timespec at;
    int left;

    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += limit_us / 1000000;
    at.tv_nsec += (limit_us % 1000000) * 1000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &at) == ETIMEDOUT)
            break;
    if (w->done) {
        pthread_mutex_unlock(&w->mu);
        return NULL;
    }
    pthread_mutex_unlock(&w->mu);
    left = atomic_load(&w->srv->inflight);
    og_log(OG_LOG_ERROR, "stop_stuck",
           json_pack("{s:i, s:I}", "in_flight", left, "waited_ms",
                     (json_int_t)(limit_us / 1000)));
    /* Each log line is one write(2): nothing to flush. */
    _exit(left == 0 ? OG_EXIT_OK : OG_EXIT_INTERNAL);
}

/* Stops the HTTP server under the watchdog above. The background loops
 * are joined afterwards: a pass running at the drain finishes first (each
 * of its store calls has its own deadline). */
static void stop_guarded(og_srv *srv, og_edge *d)
{
    stop_watch w = {.srv = srv, .done = false};
    pthread_t th;
    bool watched;

    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    watched = pthread_create(&th, NULL, stop_watchdog, &w) == 0;
    og_http_stop(d);
    if (watched) {
        pthread_mutex_lock(&w.mu);
        w.done = true;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(th, NULL);
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}

/* SIGTERM: stop accepting, let in-flight requests finish within the
 * drain bound, then stop. */
static void drain(og_srv *srv, og_edge *d)
{
    struct timespec deadline;
    int left;

    drain_begin(srv); /* wakes the background loops */
    og_http_quiesce(d);
    deadline = deadline_after(srv->cfg.drain_timeout_us);
    pthread_mutex_lock(&srv->drain_mu);
    while ((left = atomic_load(&srv->inflight)) > 0)
        if (pthread_cond_timedwait(&srv->drain_cv, &srv->drain_mu,
                                   &deadline) == ETIMEDOUT)
            break;
    left = atomic_load(&srv->inflight);
    pthread_mutex_unlock(&srv->drain_mu);
    og_log(OG_LOG_INFO, "drained",
           json_pack("{s:i}", "in_flight_at_deadline", left));
    /* Requests still running past the bound are inside a store call with
     * its own deadline; stopping waits for them to return. */
    stop_guarded(srv, d);
}

static int parse_args(int argc, char **argv, serve_args *a, int *done)
{
    enum { O_CONFIG = 256, O_DEV, O_DIR, O_LISTEN, O_STORE, O_PROVIDER,
           O_ROUTES, O_DOC };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, O_CONFIG},
        {"dev", no_argument, NULL, O_DEV},
        {"data-dir", required_argument, NULL, O_DIR},
        {"listen", required_argument, NULL, O_LISTEN},
        {"store", required_argument, NULL, O_STORE},
        {"provider", required_argument, NULL, O_PROVIDER},
        {"routes", no_argument, NULL, O_ROUTES},
        {"config-doc", no_argument, NULL, O_DOC},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *done = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: a->config = optarg; break;
        case O_DEV: a->dev = true; break;
        case O_DIR: a->data_dir = optarg; break;
        case O_LISTEN: a->listen = optarg; break;
        case O_STORE: a->store = optarg; break;
        case O_PROVIDER: a->provider = optarg; break;
        case O_ROUTES:
            for (size_t i = 0; i < og_n_routes; i++)
                printf("%s %s\n", og_routes[i].method, og_routes[i].pattern);
            *done = 1;
            return OG_EXIT_OK;
        case O_DOC:
            og_srv_config_doc(stdout);
            *done = 1;
            return OG_EXIT_OK;
        case 'h':
            fputs(og_usage_serve, stdout);
            og_srv_dev_help(stdout);
            *done = 1;
            return OG_EXIT_OK;
        default:
            fputs(og_usage_serve, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || (!a->config && !a->dev) ||
        ((a->data_dir || a->provider) && !a->dev)) {
        fputs(og_usage_serve, stderr);
        return OG_EXIT_USAGE;
    }
    if (!a->data_dir)
        a->data_dir = DEV_DIR_DEFAULT;
    return OG_EXIT_OK;
}

/* Runs the signal loop until SIGTERM or SIGINT. */
static void signal_loop(og_srv *srv, const serve_args *a, sigset_t *set,
                        og_edge *d)
{
    for (;;) {
        int sig = 0;

        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            reload(srv, a);
            continue;
        }
        if (sig == SIGTERM || sig == SIGINT) {
            og_log(OG_LOG_INFO, "draining",
                   json_pack("{s:s, s:i}", "signal",
                             sig == SIGTERM ? "SIGTERM" : "SIGINT",
                             "in_flight", atomic_load(&srv->inflight)));
            drain(srv, d);
            return;
        }
    }
}

int og_cli_serve(int argc, char **argv)
{
    serve_args a = {0};
    og_srv_dev_sandbox sandbox = {0};
    og_job_run loops[3];
    og_srv_payouts *payouts = NULL;
    og_srv srv;
    og_edge *d = NULL;
    sigset_t set;
    char err[512] = "", url[320];
    int done, rc, port = 0;

    rc = parse_args(argc, argv, &a, &done);
    if (rc != OG_EXIT_OK || done)
        return rc;
    memset(&srv, 0, sizeof srv);
    memset(loops, 0, sizeof loops);
    pthread_mutex_init(&srv.auth_mu, NULL);
    pthread_mutex_init(&srv.drain_mu, NULL);
    pthread_cond_init(&srv.drain_cv, NULL);

    /* Block the signals the loop waits for before any thread exists, so
     * every thread inherits the mask and only sigwait sees them. SIGPIPE:
     * a client that hangs up must not kill the process. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if ((rc = load_config(&srv, &a)) != OG_EXIT_OK)
        goto out;
    if (og_log_open(srv.cfg.log_file, OG_LOG_INFO) != 0) {
        rc = refuse("log_file: cannot be opened for appending");
        goto out;
    }
    /* Dev mode executes (D4 in dev.c): a sandbox beside this instance
     * unless a provider was given. Started before any thread exists. */
    if (a.dev && !srv.cfg.provider_url &&
        og_srv_dev_sandbox_start(&srv.cfg, a.data_dir, &sandbox, err,
                                 sizeof err) != 0) {
        rc = refuse(err);
        goto out;
    }
    if ((rc = open_store(&srv)) != OG_EXIT_OK ||
        (rc = open_provider(&srv)) != OG_EXIT_OK ||
        (rc = open_redemption(&srv)) != OG_EXIT_OK ||
        (rc = open_opid(&srv)) != OG_EXIT_OK)
        goto out;
    /* Dev mode's payout scenario (dev_payouts.c), created once (DS1). */
    if (a.dev &&
        (rc = og_srv_dev_scenario(srv.store, &srv.cfg, err, sizeof err)) !=
            0) {
        fprintf(stderr, "oncegate: serve: %s\n", err);
        rc = og_exit_for_error(rc);
        goto out;
    }
    og_grant_policy_init(&srv.policy, srv.cfg.audience, &srv.cfg.timings);
    srv.policy.accept_legacy_typ = srv.cfg.tokens_accept_legacy_typ;
    if (og_srv_auth_build(&srv.cfg, srv.cfg.principals,
                          srv.cfg.n_principals, &srv.auth, err,
                          sizeof err) != 0) {
        rc = refuse(err);
        goto out;
    }
    /* The payout pipeline (payout_runner.c) when payouts.runner is on:
     * before the ready line, so a refusal is a refusal to start. */
    if (srv.cfg.payouts_runner &&
        og_srv_payouts_start(&srv, &payouts, err, sizeof err) != 0) {
        rc = refuse(err);
        goto out;
    }
    if (og_http_start(&srv, &d, &port, err, sizeof err) != 0) {
        rc = refuse(err);
        goto out;
    }
    snprintf(url, sizeof url,
             strchr(srv.cfg.listen_host, ':') ? "http://[%s]:%d"
                                              : "http://%s:%d",
             srv.cfg.listen_host, port);
    og_log(OG_LOG_INFO, "ready",
           json_pack("{s:s, s:s, s:s, s:s, s:i}", "url", url, "store",
                     og_store_backend(srv.store), "issuer", srv.cfg.issuer,
                     "audience", srv.cfg.audience, "principals",
                     (int)srv.cfg.n_principals));
    printf("oncegate: listening on %s\n", url);
    if (a.dev)
        /* argv[-1]: main() passes the arguments after the program name,
         * so the program's own path is the slot before "serve". */
        og_srv_dev_banner(stdout, &srv.cfg, a.data_dir, url, argv[-1],
                          &sandbox);
    fflush(stdout);

    /* The background loops: recovery with a provider; cleanup unless the
     * janitor is off; archiving when operations are not kept forever. */
    if ((srv.provider && srv.cfg.recovery_loop &&
         job_start(&loops[0], &srv, &job_recover, false) != 0) ||
        (srv.cfg.janitor_enabled &&
         job_start(&loops[1], &srv, &job_cleanup, false) != 0) ||
        (srv.cfg.retention_mode != OG_RETAIN_KEEP &&
         job_start(&loops[2], &srv, &job_archive, false) != 0)) {
        rc = OG_EXIT_INTERNAL;
        drain_begin(&srv);
        og_http_stop(d);
        goto out;
    }
    signal_loop(&srv, &a, &set, d); /* drains and stops HTTP */
    rc = OG_EXIT_OK;
out:
    for (size_t i = 0; i < sizeof loops / sizeof loops[0]; i++)
        job_join(&loops[i]); /* after the drain began: every loop stops */
    og_srv_payouts_free(payouts); /* before the store it runs on */
    og_srv_auth_unref(srv.auth);
    og_provider_free(srv.provider);
    og_provider_free(srv.redeemer);
    og_redeem_key_free(srv.redeem_key);
    og_opid_key_free(srv.opid_key);
    og_provider_table_free(srv.ptable);
    og_store_free(srv.store);
    og_srv_dev_sandbox_stop(&sandbox); /* after the last provider call */
    og_srv_config_free(&srv.cfg);
    og_log_close();
    pthread_cond_destroy(&srv.drain_cv);
    pthread_mutex_destroy(&srv.drain_mu);
    pthread_mutex_destroy(&srv.auth_mu);
    return rc;
}

/* ===========================================================================
 * `oncegate recover`, `oncegate cleanup`, `oncegate archive-operations`:
 * serve's background passes as their own process (for deployments that run
 * them apart, from cron, or by hand). Same configuration, same startup
 * checks (cleanup relies on the admission bound checked in open_store).
 * ========================================================================= */

const char og_usage_recover[] =
    "usage: oncegate recover --config FILE [--once] [--store URL]\n"
    "\n"
    "Recovery (docs/design.md, \"Execution\"): finds Admitted or Unknown\n"
    "operations whose lease ended, takes each over (owner_version + 1),\n"
    "looks its effect up at the provider, and records Succeeded, or resends\n"
    "the same create (same idempotency key) only when the provider declares\n"
    "atomic same-key handling and before submit_by; otherwise\n"
    "NeedsReconciliation. Never records Failed on a lookup that found\n"
    "nothing. Uses the configuration's store, provider and timings.\n"
    "\n"
    "  --once   one pass; prints its counts as one JSON object and exits\n"
    "           (default: a pass every half timings.recovery_delay_ms until\n"
    "           SIGTERM or SIGINT)\n"
    "\n"
    "exit: 0 done, 2 usage, 75 store unavailable, 78 configuration refused\n"
    "(no provider configured, broken timings), 70 internal error.\n";

const char og_usage_cleanup[] =
    "usage: oncegate cleanup --config FILE [--once] [--store URL]\n"
    "\n"
    "Refusal retention (docs/design.md, \"Retention\"): deletes consumption\n"
    "rows (admissions, revocations, consumes) whose retain_until +\n"
    "timings.cleanup_margin_ms has passed on the store's clock, in batches of\n"
    "janitor.batch rows, each its own short transaction, at most\n"
    "janitor.max_batches per pass. Never deletes operations, their history,\n"
    "grant rows, families, tickets or the issuance log. Each pass then\n"
    "releases the reservations of payout grants that expired unused\n"
    "(docs/payouts.md, section 4). Refuses to start, as\n"
    "serve does, when the store's admission connections lack the server-side\n"
    "bound cleanup_margin is measured against.\n"
    "\n"
    "Prints one JSON line per pass:\n"
    "  {\"job\":\"cleanup\",\"deleted\":N,\"admissions\":N,\"revocations\":N,\n"
    "   \"consumes\":N,\"batches\":N,\"elapsed_ms\":N}\n"
    "  {\"job\":\"cleanup\",\"error\":CODE,\"elapsed_ms\":N}  (a failed pass)\n"
    "  {\"job\":\"payout-expiry\",\"grants\":N,\"batches\":N,\"elapsed_ms\":N}\n"
    "\n"
    "  --once   one pass, then exit (default: a pass at once, then one every\n"
    "           janitor.interval_ms until SIGTERM or SIGINT)\n"
    "\n"
    "exit: 0 done, 2 usage, 75 store unavailable, 78 configuration refused\n"
    "(broken timings, no admission bound), 70 internal error.\n";

const char og_usage_archive_operations[] =
    "usage: oncegate archive-operations --config FILE [--delete] [--store URL]\n"
    "\n"
    "Audit retention (docs/design.md, \"Retention\"): one pass that moves\n"
    "finished operations (succeeded, failed) whose last status change is\n"
    "older than operations.audit_retention_days, with their history, into\n"
    "operations_archive and operation_events_archive, in batches of\n"
    "janitor.batch operations, at most janitor.max_batches. Never touches\n"
    "admitted, unknown or needs-reconciliation operations, nor any\n"
    "consumption row: an archived operation's grant stays refused, and a\n"
    "retry of the archived operation is answered with its archived record.\n"
    "operations.retention_mode governs only serve's background loop.\n"
    "\n"
    "Prints one JSON line:\n"
    "  {\"job\":\"archive\",\"mode\":\"archive\"|\"delete\",\"operations\":N,\n"
    "   \"events\":N,\"batches\":N,\"older_than_days\":N,\"elapsed_ms\":N}\n"
    "\n"
    "  --delete   delete them and their history instead of archiving\n"
    "\n"
    "exit: 0 done, 2 usage, 75 store unavailable, 78 configuration refused,\n"
    "70 internal error.\n";

/* Runs job as a command: its options, the configuration and startup checks
 * serve makes, then one pass (--once, or a job that does not loop) or the
 * loop on its own thread until SIGTERM or SIGINT. Exit code. */
static int run_job(const og_job *job, int argc, char **argv)
{
    enum { O_CONFIG = 256, O_ONCE, O_STORE, O_DELETE };
    const struct option longopts[] = {
        {"config", required_argument, NULL, O_CONFIG},
        {job->loops ? "once" : "delete", no_argument, NULL,
         job->loops ? O_ONCE : O_DELETE},
        {"store", required_argument, NULL, O_STORE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    serve_args a = {0};
    bool once = !job->loops, del = false;
    og_job_run loop;
    og_srv srv;
    sigset_t set;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: a.config = optarg; break;
        case O_ONCE: once = true; break;
        case O_DELETE: del = true; break;
        case O_STORE: a.store = optarg; break;
        case 'h': fputs(job->usage, stdout); return OG_EXIT_OK;
        default: fputs(job->usage, stderr); return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !a.config) {
        fputs(job->usage, stderr);
        return OG_EXIT_USAGE;
    }
    memset(&srv, 0, sizeof srv);
    memset(&loop, 0, sizeof loop);
    pthread_mutex_init(&srv.drain_mu, NULL);
    pthread_cond_init(&srv.drain_cv, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if ((rc = load_config(&srv, &a)) != OG_EXIT_OK)
        goto out;
    if (job == &job_archive) /* the command's mode, not serve's loop's */
        srv.cfg.retention_mode = del ? OG_RETAIN_DELETE : OG_RETAIN_ARCHIVE;
    if (og_log_open(srv.cfg.log_file, OG_LOG_INFO) != 0) {
        rc = refuse("log_file: cannot be opened for appending");
        goto out;
    }
    if (job->needs_provider && !srv.cfg.provider_url) {
        rc = refuse("provider.url: recovery needs a provider to look up");
        goto out;
    }
    if ((rc = open_store(&srv)) != OG_EXIT_OK ||
        (job->needs_provider && (rc = open_provider(&srv)) != OG_EXIT_OK))
        goto out;
    if (once) {
        /* Nothing waits for a signal here: let SIGTERM and SIGINT end the
         * process (a batch cut short rolls back; the ones before stay). */
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        rc = job->pass(&srv, true);
        rc = rc != 0 ? og_exit_for_error(rc) : OG_EXIT_OK;
        goto out;
    }
    /* A dedicated thread runs the passes; this one waits for a signal. */
    if (job_start(&loop, &srv, job, job->print_in_loop) != 0) {
        rc = OG_EXIT_INTERNAL;
        goto out;
    }
    for (;;) {
        int sig = 0;

        if (sigwait(&set, &sig) == 0 && (sig == SIGTERM || sig == SIGINT))
            break;
    }
    og_log(OG_LOG_INFO, "stopping", json_pack("{s:s}", "job", job->name));
    drain_begin(&srv);
    job_join(&loop);
    rc = OG_EXIT_OK;
out:
    og_provider_free(srv.provider);
    og_provider_table_free(srv.ptable);
    og_store_free(srv.store);
    og_srv_config_free(&srv.cfg);
    og_log_close();
    pthread_cond_destroy(&srv.drain_cv);
    pthread_mutex_destroy(&srv.drain_mu);
    return rc;
}

int og_cli_recover(int argc, char **argv)
{
    return run_job(&job_recover, argc, argv);
}

int og_cli_cleanup(int argc, char **argv)
{
    return run_job(&job_cleanup, argc, argv);
}

int og_cli_archive_operations(int argc, char **argv)
{
    return run_job(&job_archive, argc, argv);
}

/* ===========================================================================
 * `oncegate payout-worker --config FILE`: the payout pipeline
 * (payout_runner.c) as its own process, for a fleet apart from serve. The
 * configuration's payouts.* rows and timings, the store's startup checks
 * as serve makes them; no HTTP.
 * ========================================================================= */

const char og_usage_payout_worker[] =
    "usage: oncegate payout-worker --config FILE [--store URL] [--until-idle]\n"
    "\n"
    "Runs the payout pipeline (docs/payouts.md, sections 5 and 6) on the\n"
    "configuration's store: payouts.workers worker threads take jobs,\n"
    "validate, claim, start and send each attempt; the sweeper takes over\n"
    "attempts whose lease lapsed; the reconciler looks Unknown attempts up;\n"
    "unused expired grants release their reservations. The payouts.* rows\n"
    "and timings of the configuration (docs/config.md) set every timing, and\n"
    "R3-R7 are checked at startup whatever payouts.runner says. The worker\n"
    "is its own principal: payouts.worker_id names a configured principal\n"
    "with the payout-worker role, the actor of every write. One JSON\n"
    "log line per job (payout_job: correlation, payout, job, grant and\n"
    "attempt ids; never a token or the credential).\n"
    "\n"
    "Stops on SIGTERM or SIGINT after what each thread is doing; with\n"
    "--until-idle once no job is available and no payout attempt is\n"
    "Admitted, Started or Unknown. Prints its counts at the end:\n"
    "  {\"job\":\"payout-worker\",\"ends\":{...},\"sends\":N,\n"
    "   \"security_signals\":N,\"expired_grants\":N,\"errors\":N}\n"
    "\n"
    "exit: 0 stopped as asked, 2 usage, 75 store unavailable, 78\n"
    "configuration refused (no payouts.provider_table, a relation fails),\n"
    "70 internal error.\n";

static int64_t pw_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The counts line at the end. */
static void pw_print(og_payout_runner *r)
{
    og_payout_runner_counts c;
    json_t *ends = json_object(), *j;
    char *s;

    og_payout_runner_counts_get(r, &c);
    for (int i = 0; i < OG_PAYOUT_WORK_END_COUNT; i++)
        json_object_set_new(ends,
                            og_payout_work_end_name((og_payout_work_end)i),
                            json_integer(c.ends[i]));
    j = json_pack("{s:s, s:o, s:I, s:I, s:I, s:I}", "job", "payout-worker",
                  "ends", ends, "sends", (json_int_t)c.sends,
                  "security_signals", (json_int_t)c.security_signals,
                  "expired_grants", (json_int_t)c.expired_grants, "errors",
                  (json_int_t)(c.worker_errors + c.pass_errors));
    if (j && (s = json_dumps(j, JSON_COMPACT))) {
        printf("%s\n", s);
        free(s);
    }
    json_decref(j);
    fflush(stdout);
}

int og_cli_payout_worker(int argc, char **argv)
{
    enum { O_CONFIG = 256, O_STORE, O_UNTIL_IDLE };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, O_CONFIG},
        {"store", required_argument, NULL, O_STORE},
        {"until-idle", no_argument, NULL, O_UNTIL_IDLE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    serve_args a = {0};
    og_srv_payouts *p = NULL;
    bool until_idle = false;
    char err[512] = "";
    int64_t idle_since = 0;
    og_srv srv;
    sigset_t set;
    int c, rc;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: a.config = optarg; break;
        case O_STORE: a.store = optarg; break;
        case O_UNTIL_IDLE: until_idle = true; break;
        case 'h': fputs(og_usage_payout_worker, stdout); return OG_EXIT_OK;
        default: fputs(og_usage_payout_worker, stderr); return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !a.config) {
        fputs(og_usage_payout_worker, stderr);
        return OG_EXIT_USAGE;
    }
    memset(&srv, 0, sizeof srv);
    pthread_mutex_init(&srv.drain_mu, NULL);
    pthread_cond_init(&srv.drain_cv, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if ((rc = load_config(&srv, &a)) != OG_EXIT_OK)
        goto out;
    if (og_srv_config_check_payouts(&srv.cfg, err, sizeof err) != 0) {
        rc = refuse(err); /* err says "config: KEY: RELATION ..." */
        goto out;
    }
    if (og_log_open(srv.cfg.log_file, OG_LOG_INFO) != 0) {
        rc = refuse("log_file: cannot be opened for appending");
        goto out;
    }
    if ((rc = open_store(&srv)) != OG_EXIT_OK)
        goto out;
    if (og_srv_payouts_start(&srv, &p, err, sizeof err) != 0) {
        rc = refuse(err);
        goto out;
    }
    for (;;) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &tick);

        if (sig == SIGTERM || sig == SIGINT)
            break;
        if (!until_idle)
            continue;
        /* Idle for two worker polls in a row: a job made available since a
         * worker's last take is taken by its next one. */
        if (og_payout_runner_idle(og_srv_payouts_runner(p)) != 1)
            idle_since = 0;
        else if (idle_since == 0)
            idle_since = pw_mono_us();
        else if (pw_mono_us() - idle_since >
                 2 * srv.cfg.payouts_poll_us + 100000)
            break;
    }
    og_log(OG_LOG_INFO, "stopping", json_pack("{s:s}", "job",
                                              "payout-worker"));
    og_srv_payouts_stop(p);
    pw_print(og_srv_payouts_runner(p));
    rc = OG_EXIT_OK;
out:
    og_srv_payouts_free(p);
    og_store_free(srv.store);
    og_srv_config_free(&srv.cfg);
    og_log_close();
    pthread_cond_destroy(&srv.drain_cv);
    pthread_mutex_destroy(&srv.drain_mu);
    return rc;
}
