/*
 * metrics.c — process-global counters and histograms, rendered in the
 * Prometheus text exposition format, version 0.0.4.
 *
 * Invariants:
 *   1. Every metric is a C11 atomic updated with one relaxed read-modify-
 *      write: no lock, and no increment is ever lost (the counts are exact;
 *      only the order in which a concurrent render sees them is loose).
 *   2. Series are stable: every outcome, every refusal reason but "none",
 *      every store op, both consume verdicts, every cleanup kind, both
 *      archive modes and every redemption outcome are rendered from the
 *      start, at zero, so dashboards and alerts see them before the first
 *      event. Only response codes, which are open-ended, appear once seen.
 *   3. A histogram keeps one non-cumulative count per bucket; the render
 *      accumulates them and takes _count from the +Inf total, so within
 *      one render the buckets are cumulative and +Inf equals _count even
 *      while other threads observe.
 *   4. Latency sums are integer microseconds, printed exactly as seconds
 *      with six decimals: no floating-point drift however long it runs.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "oncegate/redeem.h"
#include "serve.h"

/* ===========================================================================
 * The counters.
 * ========================================================================= */
#define COUNT_ONE(name, text) +1
enum {
    N_OUTCOMES = 0 OG_OUTCOME_MAP(COUNT_ONE),
    N_REFUSALS = 0 OG_REFUSAL_MAP(COUNT_ONE),
    N_REDEEM = 0 OG_REDEEM_OUTCOME_MAP(COUNT_ONE),
};
#undef COUNT_ONE

/* Bucket upper bounds (inclusive, "le"), as microseconds to compare with
 * and as the text Prometheus sees. The +Inf bucket follows them. */
static const int64_t bucket_us[] = {
    500,    1000,   2500,    5000,    10000,   25000,   50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};
static const char *const bucket_le[] = {
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1",    "0.25",  "0.5",    "1",     "2.5",   "5",     "10",
};
#define N_BOUNDS (sizeof bucket_us / sizeof bucket_us[0])
_Static_assert(sizeof bucket_le / sizeof bucket_le[0] == N_BOUNDS,
               "one text per bucket bound");

static const char *const op_names[] = {
#define MOP_NAME(name, text) text,
    OG_METRIC_OP_MAP(MOP_NAME)
#undef MOP_NAME
};

#define STATUS_MIN 100
#define STATUS_MAX 599

typedef struct histogram {
    atomic_uint_fast64_t bucket[N_BOUNDS + 1]; /* non-cumulative; last: +Inf */
    atomic_uint_fast64_t sum_us;
} histogram;

static atomic_uint_fast64_t admissions[N_OUTCOMES];
static atomic_uint_fast64_t refusals[N_REFUSALS];
static histogram store_latency[OG_MOP_COUNT];
static atomic_uint_fast64_t store_unavailable[OG_MOP_COUNT];
static atomic_uint_fast64_t consumes[2]; /* [0] false, [1] true */
static atomic_int_fast64_t in_flight;
static atomic_uint_fast64_t responses[STATUS_MAX - STATUS_MIN + 1];

static void bump(atomic_uint_fast64_t *c, uint_fast64_t by)
{
    atomic_fetch_add_explicit(c, by, memory_order_relaxed);
}

static uint64_t get(atomic_uint_fast64_t *c)
{
    return (uint64_t)atomic_load_explicit(c, memory_order_relaxed);
}

/* Values outside the enums are ignored: a bad caller must not corrupt
 * memory next to the arrays. */
void og_metrics_admission(og_outcome outcome, og_refusal refusal)
{
    if ((unsigned)outcome >= N_OUTCOMES)
        return;
    bump(&admissions[outcome], 1);
    if (outcome == OG_OUTCOME_REFUSED && refusal != OG_REFUSAL_NONE &&
        (unsigned)refusal < N_REFUSALS)
        bump(&refusals[refusal], 1);
}

/* A negative elapsed time (a clock step) counts as zero. */
void og_metrics_store_call(og_metric_op op, int64_t elapsed_us, int err)
{
    histogram *h;
    size_t b = 0;

    if ((unsigned)op >= OG_MOP_COUNT)
        return;
    h = &store_latency[op];
    if (elapsed_us < 0)
        elapsed_us = 0;
    while (b < N_BOUNDS && elapsed_us > bucket_us[b])
        b++;
    bump(&h->bucket[b], 1);
    bump(&h->sum_us, (uint_fast64_t)elapsed_us);
    if (err == OG_ESTORE_UNAVAILABLE)
        bump(&store_unavailable[op], 1);
}

void og_metrics_consume(bool consumed)
{
    bump(&consumes[consumed ? 1 : 0], 1);
}

/* Outcomes recorded, by status (5) x source (3). */
static atomic_uint_fast64_t outcomes[5][3];
static atomic_uint_fast64_t takeovers;
static const char *const source_names[3] = {"handler", "recovery",
                                            "operator"};
/* The API's lower-case status names, as in answers. */
static const char *const status_names[5] = {"admitted", "succeeded", "failed",
                                            "unknown",
                                            "needs_reconciliation"};

void og_metrics_outcome(og_op_status st, og_metric_source src)
{
    if ((unsigned)st < 5 && (unsigned)src < 3)
        bump(&outcomes[st][src], 1);
}

void og_metrics_takeovers(unsigned n)
{
    bump(&takeovers, n);
}

/* Retention: rows deleted by kind (admission, revocation, consume), the
 * last pass's duration, operations archived by mode (move, delete). */
static atomic_uint_fast64_t cleanup_deleted[3];
static atomic_uint_fast64_t cleanup_last_us;
static atomic_uint_fast64_t archived[2];
static const char *const cleanup_kinds[3] = {"admission", "revocation",
                                             "consume"};
static const char *const archive_modes[2] = {"archive", "delete"};

void og_metrics_cleanup(const og_cleanup_stats *st, int64_t elapsed_us)
{
    const int64_t n[3] = {st->admissions, st->revocations, st->consumes};

    for (int i = 0; i < 3; i++)
        if (n[i] > 0)
            bump(&cleanup_deleted[i], (uint_fast64_t)n[i]);
    atomic_store_explicit(&cleanup_last_us,
                          (uint_fast64_t)(elapsed_us > 0 ? elapsed_us : 0),
                          memory_order_relaxed);
}

void og_metrics_archived(og_archive_mode mode, int64_t operations)
{
    if ((unsigned)mode < 2 && operations > 0)
        bump(&archived[mode], (uint_fast64_t)operations);
}

/* Redemptions by outcome; the last slot counts errors. */
static atomic_uint_fast64_t redemptions[N_REDEEM + 1];

void og_metrics_redemption(int outcome)
{
    if (outcome < 0)
        bump(&redemptions[N_REDEEM], 1);
    else if (outcome < N_REDEEM)
        bump(&redemptions[outcome], 1);
}

void og_metrics_inflight(int delta)
{
    atomic_fetch_add_explicit(&in_flight, delta, memory_order_relaxed);
}

/* Statuses outside 100..599 are not HTTP statuses and are not counted. */
void og_metrics_response(unsigned status)
{
    if (status < STATUS_MIN || status > STATUS_MAX)
        return;
    bump(&responses[status - STATUS_MIN], 1);
}

static atomic_uint_fast64_t rate_limited[2][2];
static atomic_uint_fast64_t conn_refused[2];

void og_metrics_rate_limited(int limit, int by)
{
    if (limit >= 0 && limit < 2 && by >= 0 && by < 2)
        bump(&rate_limited[limit][by], 1);
}

static atomic_uint_fast64_t refusal_cache[2]; /* miss, hit */

void og_metrics_refusal_cache(bool hit)
{
    bump(&refusal_cache[hit ? 1 : 0], 1);
}

void og_metrics_connection_refused(int reason)
{
    if (reason >= 0 && reason < 2)
        bump(&conn_refused[reason], 1);
}

/* ===========================================================================
 * The exposition. Every writer appends to f; stream errors are checked
 * once, in og_metrics_render.
 * ========================================================================= */

/* The family's # HELP and # TYPE lines. help is a constant without "\\" or
 * newlines, so it needs no escaping. */
static void family(FILE *f, const char *name, const char *type,
                   const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value escaped as the format requires: \\, \" and \n. */
static void label_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

/* `name{label="value"} count` */
static void sample1(FILE *f, const char *name, const char *label,
                    const char *value, uint64_t count)
{
    fprintf(f, "%s{%s=\"", name, label);
    label_value(f, value);
    fprintf(f, "\"} %" PRIu64 "\n", count);
}

static void render_admissions(FILE *f)
{
    static const char *const n = "oncegate_admissions_total";

    family(f, n, "counter",
           "Admissions decided by the store, by outcome.");
    for (unsigned i = 0; i < N_OUTCOMES; i++)
        sample1(f, n, "outcome", og_outcome_name((og_outcome)i),
                get(&admissions[i]));
}

static void render_refusals(FILE *f)
{
    static const char *const n = "oncegate_refusals_total";

    family(f, n, "counter", "Refused admissions, by reason.");
    for (unsigned i = 0; i < N_REFUSALS; i++)
        if (i != OG_REFUSAL_NONE)
            sample1(f, n, "reason", og_refusal_name((og_refusal)i),
                    get(&refusals[i]));
}

/* One op's _bucket (cumulative), _sum and _count lines. */
static void render_histogram(FILE *f, const char *n, const char *op,
                             histogram *h)
{
    uint64_t acc = 0, sum = get(&h->sum_us);

    for (size_t b = 0; b <= N_BOUNDS; b++) {
        acc += get(&h->bucket[b]);
        fprintf(f, "%s_bucket{op=\"", n);
        label_value(f, op);
        fprintf(f, "\",le=\"%s\"} %" PRIu64 "\n",
                b < N_BOUNDS ? bucket_le[b] : "+Inf", acc);
    }
    fprintf(f, "%s_sum{op=\"", n);
    label_value(f, op);
    fprintf(f, "\"} %" PRIu64 ".%06" PRIu64 "\n", sum / 1000000,
            sum % 1000000);
    fprintf(f, "%s_count{op=\"", n);
    label_value(f, op);
    fprintf(f, "\"} %" PRIu64 "\n", acc);
}

static void render_store(FILE *f)
{
    static const char *const lat = "oncegate_store_latency_seconds";
    static const char *const un = "oncegate_store_unavailable_total";

    family(f, lat, "histogram", "Latency of store calls, by operation.");
    for (unsigned op = 0; op < OG_MOP_COUNT; op++)
        render_histogram(f, lat, op_names[op], &store_latency[op]);
    family(f, un, "counter",
           "Store calls that found the store unavailable, by operation.");
    for (unsigned op = 0; op < OG_MOP_COUNT; op++)
        sample1(f, un, "op", op_names[op], get(&store_unavailable[op]));
}

static void render_edge(FILE *f)
{
    static const char *const rl = "oncegate_rate_limited_total";
    static const char *const cr = "oncegate_http_connections_refused_total";
    static const char *const rc = "oncegate_refusal_cache_total";
    static const char *const limits[2] = {"auth_failures", "revocations"};
    static const char *const by[2] = {"principal", "source"};
    static const char *const reasons[2] = {"max_connections",
                                           "unauthenticated_per_source"};

    family(f, rl, "counter", "Requests refused 429 by a rate limit, by "
                             "limit and by what it is kept per.");
    for (int l = 0; l < 2; l++)
        for (int b = 0; b < 2; b++)
            fprintf(f, "%s{limit=\"%s\",by=\"%s\"} %" PRIu64 "\n", rl,
                    limits[l], by[b], get(&rate_limited[l][b]));
    family(f, cr, "counter", "Connections answered and closed when "
                             "accepted, by reason.");
    for (int i = 0; i < 2; i++)
        sample1(f, cr, "reason", reasons[i], get(&conn_refused[i]));
    family(f, rc, "counter", "Admission requests looked up in the refusal "
                             "cache: answered from it (hit) or not (miss).");
    sample1(f, rc, "result", "hit", get(&refusal_cache[1]));
    sample1(f, rc, "result", "miss", get(&refusal_cache[0]));
}

static void render_http(FILE *f)
{
    static const char *const c = "oncegate_consumes_total";
    static const char *const fl = "oncegate_http_requests_in_flight";
    static const char *const r = "oncegate_http_responses_total";
    char code[8];

    family(f, c, "counter", "Consume verdicts, by whether the grant was "
                            "consumed.");
    sample1(f, c, "consumed", "true", get(&consumes[1]));
    sample1(f, c, "consumed", "false", get(&consumes[0]));
    family(f, fl, "gauge", "HTTP requests being served.");
    fprintf(f, "%s %" PRIdFAST64 "\n", fl,
            atomic_load_explicit(&in_flight, memory_order_relaxed));
    family(f, r, "counter", "HTTP responses sent, by status code.");
    for (unsigned s = STATUS_MIN; s <= STATUS_MAX; s++) {
        uint64_t v = get(&responses[s - STATUS_MIN]);

        if (v == 0)
            continue;
        snprintf(code, sizeof code, "%u", s);
        sample1(f, r, "code", code, v);
    }
    render_edge(f);
}

static void render_execution(FILE *f)
{
    static const char *const o = "oncegate_outcomes_total";
    static const char *const t = "oncegate_recovery_takeovers_total";

    family(f, o, "counter", "Operation outcomes recorded, by status and by "
                            "who recorded them.");
    for (unsigned st = 0; st < 5; st++)
        for (unsigned src = 0; src < 3; src++) {
            if (st == OG_OP_ADMITTED)
                continue; /* never a recorded outcome */
            fprintf(f, "%s{status=\"%s\",source=\"%s\"} %" PRIu64 "\n",
                    o, status_names[st],
                    source_names[src], get(&outcomes[st][src]));
        }
    family(f, t, "counter", "Stalled operations recovery took over.");
    fprintf(f, "%s %" PRIu64 "\n", t, get(&takeovers));
}

static void render_retention(FILE *f)
{
    static const char *const d = "oncegate_cleanup_deleted_total";
    static const char *const l = "oncegate_cleanup_last_duration_seconds";
    static const char *const a = "oncegate_operations_archived_total";
    uint64_t us = get(&cleanup_last_us);

    family(f, d, "counter", "Consumption rows cleanup deleted (past "
                            "retain_until + cleanup_margin), by what held "
                            "them.");
    for (unsigned i = 0; i < 3; i++)
        sample1(f, d, "kind", cleanup_kinds[i], get(&cleanup_deleted[i]));
    family(f, l, "gauge", "Duration of the last finished cleanup pass.");
    fprintf(f, "%s %" PRIu64 ".%06" PRIu64 "\n", l, us / 1000000,
            us % 1000000);
    family(f, a, "counter", "Finished operations moved to the archive or "
                            "deleted, by mode.");
    for (unsigned i = 0; i < 2; i++)
        sample1(f, a, "mode", archive_modes[i], get(&archived[i]));
}

static void render_redemptions(FILE *f)
{
    static const char *const n = "oncegate_redemptions_total";

    family(f, n, "counter", "Redemptions of single-use tokens, by outcome "
                            "(error: the call failed).");
    for (unsigned i = 0; i < N_REDEEM; i++)
        sample1(f, n, "outcome", og_redeem_outcome_name((og_redeem_outcome)i),
                get(&redemptions[i]));
    sample1(f, n, "outcome", "error", get(&redemptions[N_REDEEM]));
}

/* ===========================================================================
 * The payout pipeline (payout_runner.c): the runner's own counters,
 * read whole at render time (og_payout_runner_counts_get is consistent),
 * so nothing here double-counts. Every series from the start, at zero,
 * once a runner is registered; none without one.
 * ========================================================================= */
static _Atomic(og_payout_runner *) payout_runner;

void og_metrics_payout_runner(og_payout_runner *r)
{
    atomic_store(&payout_runner, r);
}

static void render_payouts(FILE *f)
{
    static const char *const j = "oncegate_payout_jobs_total",
                             *const rs = "oncegate_payout_job_reasons_total",
                             *const sd = "oncegate_payout_sends_total",
                             *const sg =
                                 "oncegate_payout_security_signals_total",
                             *const sw = "oncegate_payout_sweeper_total",
                             *const rc = "oncegate_payout_reconciler_total",
                             *const ex =
                                 "oncegate_payout_grants_expired_total",
                             *const er = "oncegate_payout_errors_total";
    og_payout_runner *r = atomic_load(&payout_runner);
    og_payout_runner_counts c;

    if (!r)
        return;
    og_payout_runner_counts_get(r, &c);
    family(f, j, "counter",
           "Payout jobs a worker took, by end (refused: validation or the "
           "claim refused; duplicate: a redelivery; claim_unconfirmed and "
           "start_unconfirmed: a commit not confirmed).");
    for (int i = 0; i < OG_PAYOUT_WORK_END_COUNT; i++)
        if (i != OG_PAYOUT_WORK_IDLE)
            sample1(f, j, "end", og_payout_work_end_name((og_payout_work_end)i),
                    (uint64_t)c.ends[i]);
    family(f, rs, "counter",
           "Refused and postponed payout jobs, by stable reason code "
           "(validation refusals, claims lost, context changed).");
    for (int i = 0; i < OG_PAYOUT_WORKER_REASON_COUNT; i++)
        if (i != OG_PAYOUT_WORKER_NONE)
            sample1(f, rs, "reason",
                    og_payout_worker_reason_name((og_payout_worker_reason)i),
                    (uint64_t)c.reasons[i]);
    family(f, sd, "counter", "Payout create calls sent to the provider.");
    fprintf(f, "%s %" PRId64 "\n", sd, c.sends);
    family(f, sg, "counter",
           "Payout jobs that presented what was not issued to this worker "
           "(binding mismatch, another audience, another binding's grant).");
    fprintf(f, "%s %" PRId64 "\n", sg, c.security_signals);
    family(f, sw, "counter",
           "Payout attempts the sweeper handled, by result (not_started: "
           "was Admitted; unknown: was Started).");
    sample1(f, sw, "result", "taken", (uint64_t)c.sweep.taken);
    sample1(f, sw, "result", "not_started", (uint64_t)c.sweep.not_started);
    sample1(f, sw, "result", "unknown", (uint64_t)c.sweep.unknown);
    sample1(f, sw, "result", "later", (uint64_t)c.sweep.later);
    sample1(f, sw, "result", "error", (uint64_t)c.sweep.errors);
    family(f, rc, "counter",
           "Reconciliation of Unknown payout attempts, by outcome "
           "(looked_up: lookups sent).");
    sample1(f, rc, "outcome", "looked_up", (uint64_t)c.reconcile.looked_up);
    sample1(f, rc, "outcome", "succeeded", (uint64_t)c.reconcile.succeeded);
    sample1(f, rc, "outcome", "failed", (uint64_t)c.reconcile.failed);
    sample1(f, rc, "outcome", "not_applied",
            (uint64_t)c.reconcile.not_applied);
    sample1(f, rc, "outcome", "escalated", (uint64_t)c.reconcile.escalated);
    sample1(f, rc, "outcome", "later", (uint64_t)c.reconcile.later);
    sample1(f, rc, "outcome", "returned", (uint64_t)c.reconcile.returned);
    sample1(f, rc, "outcome", "error", (uint64_t)c.reconcile.errors);
    family(f, ex, "counter",
           "Payout grants that expired never consumed: their reservations "
           "released.");
    fprintf(f, "%s %" PRId64 "\n", ex, c.expired_grants);
    family(f, er, "counter",
           "Payout pipeline failures: a worker's job take, or a whole "
           "sweeper, reconciler or expiry pass.");
    sample1(f, er, "where", "worker", (uint64_t)c.worker_errors);
    sample1(f, er, "where", "pass", (uint64_t)c.pass_errors);
}

/* ===========================================================================
 * The payout store's statistics (docs/http.md, payout store statistics:
 * reservations held per tenant, grants issued but never consumed), read
 * at scrape time like the backlog gauges, whether or not the pipeline runs
 * here. The
 * tenants' label set is bounded: the OG_PAYOUT_STATS_TENANTS largest
 * holders by amount, then one series for all the others, whose label value
 * has a space that no tenant id can have (og_id_valid), so it never
 * collides with a tenant's and the series still sum to the total.
 * ========================================================================= */
#define OTHER_TENANTS "other tenants"

/* One family by tenant: the listed holders, then OTHER_TENANTS; amount:
 * the reserved minor units, else the reservations' count. */
static void render_held(FILE *f, const char *name, const char *help,
                        const og_payout_stats *st, bool amount)
{
#define HELD(h) ((uint64_t)(amount ? (h).reserved_minor : (h).reservations))
    family(f, name, "gauge", help);
    for (int i = 0; i < st->n_tenants; i++)
        sample1(f, name, "tenant", st->tenants[i].tenant_id,
                HELD(st->tenants[i].held));
    sample1(f, name, "tenant", OTHER_TENANTS, HELD(st->other));
#undef HELD
}

static void render_payout_stats(FILE *f, const og_payout_stats *st)
{
    static const char *const g = "oncegate_payout_grants_unconsumed";

    render_held(f, "oncegate_payout_reservations_held",
                "Payout reservations held now (decided, not yet paid or "
                "released), by tenant: the largest holders, then \"other "
                "tenants\".",
                st, false);
    render_held(f, "oncegate_payout_reserved_minor",
                "Amount of the payout reservations held now, in minor units "
                "of the tenant's currency, by tenant as "
                "oncegate_payout_reservations_held.",
                st, true);
    family(f, g, "gauge",
           "Payout grants issued and neither consumed nor revoked, their "
           "reservations held, by window (pending: before not_before; open: "
           "claimable, not claimed yet; expired: the window missed, awaiting "
           "the janitor and a fresh decision).");
    sample1(f, g, "window", "pending", (uint64_t)st->grants_pending);
    sample1(f, g, "window", "open", (uint64_t)st->grants_open);
    sample1(f, g, "window", "expired", (uint64_t)st->grants_expired);
}

void og_metrics_payout_stats(og_store *s, char **text)
{
    og_payout_stats st;
    char *out = NULL;
    size_t n = 0;
    FILE *f;
    int bad;

    if (og_payout_stats_read(s, &st) != 0)
        return; /* the store is down: no statistics, counters stay */
    if (!(f = open_memstream(&out, &n)))
        return;
    fputs(*text, f);
    render_payout_stats(f, &st);
    bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(out);
        return;
    }
    free(*text);
    *text = out;
}

/* One group commit's three counters (og_admit_stats) as three families:
 * names[i] and helps[i] for batches, rows and fallbacks. */
static void render_batch_stats(FILE *f, const og_admit_stats *st,
                               const char *const names[3],
                               const char *const helps[3])
{
    const uint64_t v[3] = {st->batches, st->rows, st->fallbacks};

    for (int i = 0; i < 3; i++) {
        family(f, names[i], "counter", helps[i]);
        fprintf(f, "%s %" PRIu64 "\n", names[i], v[i]);
    }
}

void og_metrics_admit_batches(og_store *s, char **text)
{
    static const char *const admit[3] = {
        "oncegate_admit_batches_total",
        "oncegate_admit_batched_admissions_total",
        "oncegate_admit_batch_fallbacks_total"};
    static const char *const admit_help[3] = {
        "Group commit batches this instance's store object ran (a lone "
        "admission is a batch of one).",
        "Admissions those batches held: divided by the batches, the mean "
        "batch size.",
        "Batches whose one statement aborted (a unique violation on "
        "operations) and that were admitted one statement per admission."};
    /* the consume verdicts' group commit (consume_batch.c, CB1) */
    static const char *const consume[3] = {
        "oncegate_consume_batches_total",
        "oncegate_consume_batched_verdicts_total",
        "oncegate_consume_batch_fallbacks_total"};
    static const char *const consume_help[3] = {
        "Group commit batches of consume verdicts this instance's store "
        "object ran (a lone verdict is a batch of one).",
        "Consume verdicts those batches held: divided by the batches, the "
        "mean batch size.",
        "Batches of verdicts whose one statement aborted and that were "
        "answered one statement per verdict."};
    /* ticket rotations' group commit (rotate_batch.c, RB1; SQLite's G8) */
    static const char *const rotate[3] = {
        "oncegate_rotate_batches_total",
        "oncegate_rotate_batched_rotations_total",
        "oncegate_rotate_batch_fallbacks_total"};
    static const char *const rotate_help[3] = {
        "Group commit batches of ticket rotations this instance's store "
        "object ran (a lone rotation is a batch of one).",
        "Ticket rotations those batches held: divided by the batches, the "
        "mean batch size.",
        "Batches of rotations whose one statement aborted and that were "
        "answered one rotation at a time (PostgreSQL)."};
    og_admit_stats st, cst, oc, rst;
    char *out = NULL;
    size_t n = 0;
    FILE *f;
    int bad;

    og_store_admit_stats(s, &st);
    og_store_consume_stats(s, &cst);
    og_store_outcome_stats(s, &oc);
    og_store_rotate_stats(s, &rst);
    if (!(f = open_memstream(&out, &n)))
        return;
    fputs(*text, f);
    render_batch_stats(f, &st, admit, admit_help);
    render_batch_stats(f, &cst, consume, consume_help);
    render_batch_stats(f, &rst, rotate, rotate_help);
    family(f, "oncegate_outcome_batches_total", "counter",
           "Group commit batches of outcome writes (og_op_start, "
           "og_op_record) this instance's store object ran; a lone write is "
           "a batch of one.");
    fprintf(f, "oncegate_outcome_batches_total %" PRIu64 "\n", oc.batches);
    family(f, "oncegate_outcome_batched_writes_total", "counter",
           "Outcome writes those batches held: divided by the batches, the "
           "mean batch size.");
    fprintf(f, "oncegate_outcome_batched_writes_total %" PRIu64 "\n",
            oc.rows);
    bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(out);
        return;
    }
    free(*text);
    *text = out;
}

/* Renders every family into a malloc'd buffer (*out, *len bytes, NUL
 * terminated; the caller frees it). 0 or OG_ENOMEM, with nothing written
 * to *out on failure. */
int og_metrics_render(char **out, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    int bad;

    if (!f)
        return OG_ENOMEM;
    render_admissions(f);
    render_refusals(f);
    render_store(f);
    render_http(f);
    render_execution(f);
    render_retention(f);
    render_redemptions(f);
    render_payouts(f);
    bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(buf);
        return OG_ENOMEM;
    }
    *out = buf;
    if (len)
        *len = n;
    return 0;
}
