/*
 * bench/admit.c — og-bench-admit: admissions per second through the C API,
 * and the SQLite engine's own floor to compare them with.
 *
 *   og-bench-admit --store URL --callers N --seconds S [--mode MODE]
 *                  [--consumption-keys readable|hashed] [--batch-max B]
 *
 *   --mode api           (default) migrates the store, opens ONE og_store with
 *                        pool_size = N and runs N threads, each admitting
 *                        fresh grants in a loop for S seconds. Prints
 *                          api backend=B callers=N seconds=S admitted=K rate=R/s errors=E
 *                              batches=N rows_per_batch=M fallbacks=F
 *                        the last three from og_store_admit_stats over the
 *                        timed run: the store object's group commit
 *                        coalesces the N callers' admissions, M is the mean
 *                        batch size (1.00: every admission alone).
 *   --mode sqlite-floor  the cheapest durable write SQLite can do: N threads,
 *                        one connection each to the file of URL (sqlite:PATH;
 *                        WAL, synchronous=FULL, busy_timeout 5000), each
 *                        transaction BEGIN IMMEDIATE; one INSERT; COMMIT.
 *                        Prints
 *                          floor backend=sqlite callers=N seconds=S committed=K rate=R/s errors=E
 *   --mode consume       as api, each caller asking the consume verdict
 *                        (og_consume) of fresh grants (token form) instead
 *                        of admitting them; every verdict must be
 *                        consumed. Prints
 *                          consume backend=B callers=N seconds=S consumed=K rate=R/s errors=E
 *                        (--batch-max sets consume_batch_max too: the
 *                        verdicts' batches on PostgreSQL, off by default;
 *                        docs/performance.md, "VERDICT").
 *   --mode rotate        as api, each caller rotating its own chain of
 *                        tickets (og_ticket_rotate): a ticket of a family
 *                        of its own created in the warm-up, then each
 *                        rotation presents the ticket the previous one
 *                        returned, as a well-behaved agent does; every
 *                        rotation must rotate. Prints
 *                          rotate backend=B callers=N seconds=S rotated=K rate=R/s errors=E
 *                              batches=N rows_per_batch=M fallbacks=F
 *                        (--batch-max sets rotate_batch_max too: the
 *                        rotations' group commit; docs/performance.md,
 *                        "ROTATE").
 *   --mode migrate       only applies the migrations to URL (used by
 *                        bench/admit before the pgbench floor runs).
 *   --consumption-keys   the keys a store gets when migrated (docs/design.md,
 *                        "Hashed consumption keys"); the api line names the
 *                        keys the store records.
 *   --batch-max B        og_store_options.admit_batch_max (1..256; default
 *                        the library's): 1 admits each alone, one statement
 *                        per admission — the A/B reference of group
 *                        commit.
 *   --in-flight K        og_store_options.admit_batches_in_flight (1..64;
 *                        default the library's).
 *
 * Every admission must come back ADMITTED (grant ids are unique per run,
 * thread and iteration; operation ids are fresh random UUIDs). Anything else
 * — an error such as store_unavailable, or another outcome — is counted in
 * errors (the first few are described on stderr), the thread goes on with
 * the next grant, and the program exits 1. After BENCH_MAX_ERRORS errors the
 * run stops early: the store is down, and spinning on it measures nothing.
 * The figures are for humans; speed is not judged here.
 *
 * Timing: every thread does one untimed warm-up write first (the pool
 * connects lazily; connection setup is not what we measure), then all start
 * together at a start gate. The rate is writes finished / wall time from the
 * gate to the last thread's exit, so the write in flight at the deadline
 * counts on both sides of the division.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "oncegate/oncegate.h"

#define BENCH_MAX_CALLERS 1024
#define BENCH_MAX_ERRORS 1000  /* in one run, over all threads */
#define BENCH_ERRORS_SHOWN 5   /* described on stderr; the rest only counted */
#define BENCH_EXPIRES_IN_US (INT64_C(15) * 60 * 1000000)

#define BENCH_ISSUER "bench-issuer"
#define BENCH_CALLER "bench-caller"
#define BENCH_ACCOUNT "acct-0001"
#define BENCH_AMOUNT "250.00"
#define BENCH_CURRENCY "EUR"

typedef enum bench_mode {
    MODE_API,
    MODE_CONSUME,
    MODE_ROTATE,
    MODE_SQLITE_FLOOR,
    MODE_MIGRATE
} bench_mode;

/* ===========================================================================
 * Shared run state
 * ========================================================================= */
typedef struct bench_run {
    const char *url;
    int callers;
    char run_id[17];           /* hex; makes grant ids unique across runs */
    og_store *store;           /* api mode */
    const char *sqlite_path;   /* sqlite-floor mode */
    /* The start gate: each thread reports warm-up done (ready++) and waits
     * for go; main waits for every started thread, then opens it. A gate
     * rather than a barrier, because the number of threads that really
     * started is only known after pthread_create. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
    bool go;
    atomic_bool stop;
    atomic_int errors;         /* over all threads, for the cap and stderr */
} bench_run;

typedef struct bench_thread {
    bench_run *run;
    int index;
    pthread_t tid;
    uint64_t rng;
    uint64_t done;             /* timed writes that succeeded */
    uint64_t errors;
    bool reported_ready;
    char ticket[OG_TICKET_LEN + 1]; /* rotate mode: the chain's live one */
} bench_thread;

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t now_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* 8 bytes from /dev/urandom; falls back to time and pid (the ids must only
 * be unique within one run, which the run id and counters already ensure). */
static uint64_t urandom64(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, &v, sizeof v);
        close(fd);
        if (n == (ssize_t)sizeof v && v != 0)
            return v;
    }
    v = (uint64_t)now_wall_us() ^ ((uint64_t)getpid() << 32);
    return v ? v : UINT64_C(0x9e3779b97f4a7c15);
}

/* xorshift64*: fast, per thread, good enough for ids that need only be
 * distinct. */
static uint64_t xorshift64s(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* A random version-4 UUID in canonical lower-case form. */
static void uuid_v4(uint64_t *rng, char out[OG_UUID_LEN + 1])
{
    unsigned char b[16];
    uint64_t hi = xorshift64s(rng), lo = xorshift64s(rng);
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(hi >> (8 * i));
        b[8 + i] = (unsigned char)(lo >> (8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 0x0f];
    }
    out[o] = '\0';
}

/* Reports warm-up done and waits for the start, exactly once, also on the
 * error path, so main never waits for a thread that failed its warm-up. */
static void thread_ready(bench_thread *t)
{
    bench_run *r = t->run;
    if (t->reported_ready)
        return;
    t->reported_ready = true;
    pthread_mutex_lock(&r->mu);
    r->ready++;
    pthread_cond_broadcast(&r->cv);
    while (!r->go)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

/* Main: waits for every started thread's warm-up, then opens the gate. */
static void start_gate_open(bench_run *r, int started)
{
    pthread_mutex_lock(&r->mu);
    while (r->ready < started)
        pthread_cond_wait(&r->cv, &r->mu);
    r->go = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Counts one failed write. Returns true when this error is among the first
 * BENCH_ERRORS_SHOWN of the run, i.e. the caller should describe it. */
static bool thread_fail(bench_thread *t)
{
    t->errors++;
    int n = atomic_fetch_add(&t->run->errors, 1) + 1;
    if (n >= BENCH_MAX_ERRORS)
        atomic_store(&t->run->stop, true);
    return n <= BENCH_ERRORS_SHOWN;
}

/* ===========================================================================
 * api mode
 * ========================================================================= */

/* One admission with a fresh grant id and operation id. 0 when ADMITTED. */
static int api_admit_one(bench_thread *t, uint64_t i)
{
    bench_run *r = t->run;
    char grant_id[OG_ID_MAX + 1];
    char op_id[OG_UUID_LEN + 1];
    snprintf(grant_id, sizeof grant_id, "b-%s-%d-%" PRIu64, r->run_id,
             t->index, i);
    uuid_v4(&t->rng, op_id);

    og_grant g = {
        .issuer = BENCH_ISSUER,
        .grant_id = grant_id,
        .expires_at_us = now_wall_us() + BENCH_EXPIRES_IN_US,
    };
    og_intent in = {
        .operation_id = op_id,
        .caller_id = BENCH_CALLER,
        .account_id = BENCH_ACCOUNT,
        .amount = BENCH_AMOUNT,
        .currency = BENCH_CURRENCY,
    };
    og_admission res;
    int rc = og_admit(r->store, &g, &in, &res);
    if (rc < 0) {
        if (thread_fail(t))
            fprintf(stderr, "og-bench-admit: thread %d: og_admit: %s (%s)\n",
                    t->index, og_err_name(rc), og_strerror(rc));
        return -1;
    }
    if (res.outcome != OG_OUTCOME_ADMITTED) {
        if (thread_fail(t))
            fprintf(stderr,
                    "og-bench-admit: thread %d: grant %s: outcome %s (%s), "
                    "expected admitted\n",
                    t->index, grant_id, og_outcome_name(res.outcome),
                    og_refusal_name(res.refusal));
        return -1;
    }
    return 0;
}

/* One consume verdict of a fresh grant. 0 when consumed. */
static int api_consume_one(bench_thread *t, uint64_t i)
{
    bench_run *r = t->run;
    char grant_id[OG_ID_MAX + 1];
    og_consume_result res;
    int rc;

    snprintf(grant_id, sizeof grant_id, "c-%s-%d-%" PRIu64, r->run_id,
             t->index, i);
    og_grant g = {
        .issuer = BENCH_ISSUER,
        .grant_id = grant_id,
        .expires_at_us = now_wall_us() + BENCH_EXPIRES_IN_US,
    };
    rc = og_consume(r->store, &g, &res);
    if (rc < 0 || !res.consumed) {
        if (thread_fail(t))
            fprintf(stderr, "og-bench-admit: thread %d: og_consume: %s\n",
                    t->index,
                    rc < 0 ? og_err_name(rc) : og_refusal_name(res.refusal));
        return -1;
    }
    return 0;
}

static void *consume_thread(void *arg)
{
    bench_thread *t = arg;
    uint64_t i = 0;

    (void)api_consume_one(t, i++); /* warm-up: connects; failures count */
    thread_ready(t);
    while (!atomic_load_explicit(&t->run->stop, memory_order_relaxed)) {
        if (api_consume_one(t, i++) == 0)
            t->done++;
    }
    return NULL;
}

/* One rotation of the thread's live ticket: the successor becomes the live
 * one. 0 when rotated. */
static int api_rotate_one(bench_thread *t)
{
    og_ticket_result res;
    int rc = og_ticket_rotate(t->run->store, t->ticket, &res);

    if (rc < 0 || res.outcome != OG_TICKET_ISSUED) {
        if (thread_fail(t))
            fprintf(stderr, "og-bench-admit: thread %d: og_ticket_rotate: %s\n",
                    t->index, rc < 0 ? og_err_name(rc) : "not rotated");
        return -1;
    }
    memcpy(t->ticket, res.ticket, sizeof t->ticket);
    return 0;
}

static void *rotate_thread(void *arg)
{
    bench_thread *t = arg;
    char family[OG_ID_MAX + 1];
    og_ticket_result res;
    int rc;

    snprintf(family, sizeof family, "r-%s-%d", t->run->run_id, t->index);
    rc = og_ticket_create(t->run->store, BENCH_ISSUER, family, &res);
    if (rc < 0 || res.outcome != OG_TICKET_ISSUED) {
        if (thread_fail(t))
            fprintf(stderr, "og-bench-admit: thread %d: og_ticket_create: %s\n",
                    t->index, rc < 0 ? og_err_name(rc) : "refused");
        atomic_store(&t->run->stop, true);
        thread_ready(t);
        return NULL;
    }
    memcpy(t->ticket, res.ticket, sizeof t->ticket);
    (void)api_rotate_one(t); /* warm-up: connects; failures count */
    thread_ready(t);
    while (!atomic_load_explicit(&t->run->stop, memory_order_relaxed)) {
        if (api_rotate_one(t) == 0)
            t->done++;
    }
    return NULL;
}

static void *api_thread(void *arg)
{
    bench_thread *t = arg;
    uint64_t i = 0;

    (void)api_admit_one(t, i++); /* warm-up: connects; failures count */
    thread_ready(t);
    while (!atomic_load_explicit(&t->run->stop, memory_order_relaxed)) {
        if (api_admit_one(t, i++) == 0)
            t->done++;
    }
    return NULL;
}

/* ===========================================================================
 * sqlite-floor mode
 * ========================================================================= */
typedef struct floor_conn {
    sqlite3 *db;
    sqlite3_stmt *begin, *insert, *commit, *rollback;
} floor_conn;

static void floor_close(floor_conn *c)
{
    sqlite3_finalize(c->begin);
    sqlite3_finalize(c->insert);
    sqlite3_finalize(c->commit);
    sqlite3_finalize(c->rollback);
    sqlite3_close(c->db);
    memset(c, 0, sizeof *c);
}

static int floor_exec(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "og-bench-admit: %s: %s\n", sql,
                msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

/* Opens a connection configured like a durable store would be. */
static int floor_open(const char *path, floor_conn *c)
{
    memset(c, 0, sizeof *c);
    int rc = sqlite3_open_v2(path, &c->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                 SQLITE_OPEN_NOMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "og-bench-admit: open %s: %s\n", path,
                c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_busy_timeout(c->db, 5000);
    /* journal_mode=WAL is a no-op once the file is in WAL (the setup open
     * in main() did it); synchronous is per connection. */
    if (floor_exec(c->db, "PRAGMA journal_mode=WAL") != 0 ||
        floor_exec(c->db, "PRAGMA synchronous=FULL") != 0 ||
        floor_exec(c->db, "CREATE TABLE IF NOT EXISTS floor("
                          "k TEXT PRIMARY KEY, v INTEGER)") != 0)
        goto fail;
    if (sqlite3_prepare_v2(c->db, "BEGIN IMMEDIATE", -1, &c->begin, NULL) ||
        sqlite3_prepare_v2(c->db, "INSERT INTO floor(k, v) VALUES(?1, ?2)",
                           -1, &c->insert, NULL) ||
        sqlite3_prepare_v2(c->db, "COMMIT", -1, &c->commit, NULL) ||
        sqlite3_prepare_v2(c->db, "ROLLBACK", -1, &c->rollback, NULL)) {
        fprintf(stderr, "og-bench-admit: prepare: %s\n",
                sqlite3_errmsg(c->db));
        goto fail;
    }
    return 0;
fail:
    floor_close(c);
    return -1;
}

static int floor_step(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : rc;
}

/* One transaction holding one single-row insert. 0 on commit. */
static int floor_write_one(bench_thread *t, floor_conn *c, uint64_t i)
{
    char key[96];
    int rc;
    snprintf(key, sizeof key, "f-%s-%d-%" PRIu64, t->run->run_id, t->index,
             i);
    if ((rc = floor_step(c->begin)) != 0)
        goto fail;
    sqlite3_bind_text(c->insert, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(c->insert, 2, (sqlite3_int64)i);
    rc = floor_step(c->insert);
    sqlite3_clear_bindings(c->insert);
    if (rc != 0) {
        floor_step(c->rollback);
        goto fail;
    }
    if ((rc = floor_step(c->commit)) != 0) {
        if (!sqlite3_get_autocommit(c->db))
            floor_step(c->rollback);
        goto fail;
    }
    return 0;
fail:
    if (thread_fail(t))
        fprintf(stderr, "og-bench-admit: thread %d: %s\n", t->index,
                sqlite3_errstr(rc));
    return -1;
}

static void *floor_thread(void *arg)
{
    bench_thread *t = arg;
    floor_conn c;
    uint64_t i = 0;

    if (floor_open(t->run->sqlite_path, &c) != 0) {
        /* Nothing to measure with: fail the run. */
        (void)thread_fail(t);
        atomic_store(&t->run->stop, true);
        thread_ready(t);
        return NULL;
    }
    (void)floor_write_one(t, &c, i++); /* warm-up, like the api's */
    thread_ready(t);
    while (!atomic_load_explicit(&t->run->stop, memory_order_relaxed)) {
        if (floor_write_one(t, &c, i++) == 0)
            t->done++;
    }
    floor_close(&c);
    return NULL;
}

/* ===========================================================================
 * main
 * ========================================================================= */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: og-bench-admit --store URL --callers N --seconds S\n"
            "                      [--mode api|consume|rotate|sqlite-floor|migrate]\n"
            "                      [--consumption-keys readable|hashed]\n"
            "                      [--batch-max B] [--in-flight K]\n");
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int do_migrate(const char *url, const og_store_options *opts)
{
    int from = 0, to = 0;
    int rc = og_store_migrate(url, opts, &from, &to);
    if (rc < 0) {
        fprintf(stderr, "og-bench-admit: migrate %s: %s (%s)\n", url,
                og_err_name(rc), og_strerror(rc));
        return -1;
    }
    if (from != to)
        fprintf(stderr, "og-bench-admit: migrated schema %d -> %d\n", from,
                to);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 'u'},
        {"callers", required_argument, NULL, 'c'},
        {"seconds", required_argument, NULL, 's'},
        {"mode", required_argument, NULL, 'm'},
        {"consumption-keys", required_argument, NULL, 'k'},
        {"batch-max", required_argument, NULL, 'b'},
        {"in-flight", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_run run;
    memset(&run, 0, sizeof run);
    bench_thread *threads = NULL;
    bench_mode mode = MODE_API;
    const char *url = NULL;
    int callers = 0, seconds = 0, opt, status = 1, started = 0;
    int batch_max = 0, in_flight = 0; /* 0: the library's defaults */
    og_admit_stats st0, st1;
    bool sync_init = false;
    og_consumption_keys keys = OG_KEYS_AS_STORED;

    while ((opt = getopt_long(argc, argv, "u:c:s:m:k:b:f:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'f':
            if (parse_int(optarg, 1, 64, &in_flight) != 0) {
                fprintf(stderr, "og-bench-admit: --in-flight: 1..64\n");
                return 2;
            }
            break;
        case 'b':
            if (parse_int(optarg, 1, OG_ADMIT_BATCH_MAX, &batch_max) != 0) {
                fprintf(stderr, "og-bench-admit: --batch-max: 1..%d\n",
                        OG_ADMIT_BATCH_MAX);
                return 2;
            }
            break;
        case 'k':
            if (og_consumption_keys_parse(optarg, &keys) != 0) {
                fprintf(stderr, "og-bench-admit: --consumption-keys: "
                                "readable or hashed\n");
                return 2;
            }
            break;
        case 'u':
            url = optarg;
            break;
        case 'c':
            if (parse_int(optarg, 1, BENCH_MAX_CALLERS, &callers) != 0) {
                fprintf(stderr, "og-bench-admit: --callers: 1..%d\n",
                        BENCH_MAX_CALLERS);
                return 2;
            }
            break;
        case 's':
            if (parse_int(optarg, 1, 86400, &seconds) != 0) {
                fprintf(stderr, "og-bench-admit: --seconds: 1..86400\n");
                return 2;
            }
            break;
        case 'm':
            if (strcmp(optarg, "api") == 0)
                mode = MODE_API;
            else if (strcmp(optarg, "consume") == 0)
                mode = MODE_CONSUME;
            else if (strcmp(optarg, "rotate") == 0)
                mode = MODE_ROTATE;
            else if (strcmp(optarg, "sqlite-floor") == 0)
                mode = MODE_SQLITE_FLOOR;
            else if (strcmp(optarg, "migrate") == 0)
                mode = MODE_MIGRATE;
            else {
                usage(stderr);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!url || optind != argc ||
        (mode != MODE_MIGRATE && (callers == 0 || seconds == 0))) {
        usage(stderr);
        return 2;
    }

    og_store_options opts;
    og_store_options_default(&opts);
    if (callers > 0)
        opts.pool_size = callers;
    opts.consumption_keys = keys;
    if (batch_max > 0) /* consume, rotate: their batches on both */
        opts.admit_batch_max = opts.consume_batch_max =
            opts.rotate_batch_max = batch_max;
    if (in_flight > 0)
        opts.admit_batches_in_flight = in_flight;

    if (mode == MODE_MIGRATE)
        return do_migrate(url, &opts) == 0 ? 0 : 1;

    run.url = url;
    run.callers = callers;
    snprintf(run.run_id, sizeof run.run_id, "%016" PRIx64, urandom64());
    atomic_init(&run.stop, false);
    atomic_init(&run.errors, 0);

    if (mode == MODE_API || mode == MODE_CONSUME || mode == MODE_ROTATE) {
        if (do_migrate(url, &opts) != 0)
            return 1;
        int rc = og_store_open(url, &opts, &run.store);
        if (rc < 0) {
            fprintf(stderr, "og-bench-admit: open %s: %s (%s)\n", url,
                    og_err_name(rc), og_strerror(rc));
            return 1;
        }
    } else {
        if (strncmp(url, "sqlite:", 7) != 0 || url[7] == '\0') {
            fprintf(stderr, "og-bench-admit: sqlite-floor needs "
                            "--store sqlite:PATH\n");
            return 2;
        }
        run.sqlite_path = url + 7;
        /* Create the table and switch to WAL once, before the callers
         * start: those two need the database to themselves, and N threads
         * doing them at once would measure lock trouble, not the floor. */
        floor_conn setup;
        if (floor_open(run.sqlite_path, &setup) != 0)
            return 1;
        floor_close(&setup);
    }

    threads = calloc((size_t)callers, sizeof *threads);
    if (!threads) {
        fprintf(stderr, "og-bench-admit: out of memory\n");
        goto out;
    }
    if (pthread_mutex_init(&run.mu, NULL) != 0)
        goto out;
    if (pthread_cond_init(&run.cv, NULL) != 0) {
        pthread_mutex_destroy(&run.mu);
        goto out;
    }
    sync_init = true;

    uint64_t seed = urandom64();
    for (int i = 0; i < callers; i++) {
        bench_thread *t = &threads[i];
        t->run = &run;
        t->index = i;
        /* Distinct nonzero streams per thread from one urandom seed. */
        t->rng = seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(i + 1));
        if (t->rng == 0)
            t->rng = 1;
        int rc = pthread_create(&t->tid, NULL,
                                mode == MODE_API       ? api_thread
                                : mode == MODE_CONSUME ? consume_thread
                                : mode == MODE_ROTATE  ? rotate_thread
                                                       : floor_thread,
                                t);
        if (rc != 0) {
            fprintf(stderr, "og-bench-admit: pthread_create: %s\n",
                    strerror(rc));
            atomic_store(&run.stop, true);
            break;
        }
        started++;
    }

    start_gate_open(&run, started);
    if (mode == MODE_ROTATE)
        og_store_rotate_stats(run.store, &st0);
    else
        og_store_admit_stats(run.store, &st0); /* after the warm-ups */
    double t0 = now_mono();
    if (started == callers && !atomic_load(&run.stop)) {
        /* Sleep in short steps so a failing thread ends the run early. */
        double deadline = t0 + seconds;
        while (!atomic_load(&run.stop) && now_mono() < deadline) {
            struct timespec step = {0, 20 * 1000 * 1000};
            nanosleep(&step, NULL);
        }
    }
    atomic_store(&run.stop, true);

    uint64_t done = 0, errors = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(threads[i].tid, NULL);
        done += threads[i].done;
        errors += threads[i].errors;
    }
    double elapsed = now_mono() - t0;
    if (mode == MODE_ROTATE)
        og_store_rotate_stats(run.store, &st1);
    else
        og_store_admit_stats(run.store, &st1);
    if (errors > BENCH_ERRORS_SHOWN)
        fprintf(stderr, "og-bench-admit: ... and %" PRIu64 " more errors\n",
                errors - BENCH_ERRORS_SHOWN);
    if (atomic_load(&run.errors) >= BENCH_MAX_ERRORS)
        fprintf(stderr, "og-bench-admit: stopped early after %d errors\n",
                BENCH_MAX_ERRORS);
    if (started != callers)
        errors++;
    double rate = elapsed > 0 ? (double)done / elapsed : 0.0;

    if (mode == MODE_API) {
        uint64_t nb = st1.batches - st0.batches, nr = st1.rows - st0.rows;
        printf("api backend=%s keys=%s callers=%d seconds=%d admitted=%" PRIu64
               " rate=%.1f/s errors=%" PRIu64 " batches=%" PRIu64
               " rows_per_batch=%.2f fallbacks=%" PRIu64 "\n",
               og_store_backend(run.store),
               og_consumption_keys_name(og_store_consumption_keys(run.store)),
               callers, seconds, done, rate, errors, nb,
               nb ? (double)nr / (double)nb : 0.0,
               st1.fallbacks - st0.fallbacks);
    } else if (mode == MODE_ROTATE) {
        uint64_t nb = st1.batches - st0.batches, nr = st1.rows - st0.rows;
        printf("rotate backend=%s callers=%d seconds=%d rotated=%" PRIu64
               " rate=%.1f/s errors=%" PRIu64 " batches=%" PRIu64
               " rows_per_batch=%.2f fallbacks=%" PRIu64 "\n",
               og_store_backend(run.store), callers, seconds, done, rate,
               errors, nb, nb ? (double)nr / (double)nb : 0.0,
               st1.fallbacks - st0.fallbacks);
    } else if (mode == MODE_CONSUME) {
        printf("consume backend=%s callers=%d seconds=%d consumed=%" PRIu64
               " rate=%.1f/s errors=%" PRIu64 "\n",
               og_store_backend(run.store), callers, seconds, done, rate,
               errors);
    } else
        printf("floor backend=sqlite callers=%d seconds=%d committed=%" PRIu64
               " rate=%.1f/s errors=%" PRIu64 "\n",
               callers, seconds, done, rate, errors);
    fflush(stdout);
    status = errors == 0 ? 0 : 1;

out:
    if (sync_init) {
        pthread_cond_destroy(&run.cv);
        pthread_mutex_destroy(&run.mu);
    }
    free(threads);
    og_store_free(run.store);
    return status;
}
