/*
 * demo_payout.c — `oncegate demo`, incident 3: a payout on two instances,
 * docs/payouts.md's running example over HTTP against the same two
 * `oncegate serve --dev` processes and sandbox as the credit incidents
 * (src/cli/demo.c). Each serve runs the payout pipeline inside itself
 * (payouts.runner, on in dev mode): a worker, a sweeper, a reconciler.
 *
 * A payout is decided Allowed (grant, reservation and job in one
 * transaction); A's worker claims the grant and sends the attempt; the
 * sandbox completes the payout and drops its answer
 * (drop_response_after_effect), so the attempt is Unknown; the job comes
 * again (an operator's resubmission: a delivery retry) and B's worker finds
 * the grant consumed by that very attempt — a duplicate, acknowledged, no
 * provider call; B's reconciler looks the attempt up by its reference and
 * records Succeeded: the payout is Paid. The sandbox counts one payout
 * request and one completed payout.
 *
 * Which worker takes a job is up to the workers: with A and B both up
 * either may. So B is stopped while A's worker sends, and A before B's
 * worker takes the redelivery — a rolling deployment, told as one.
 *
 * Printed: ids (payout, decision, grant, job, attempt, references). Never
 * printed: API keys, the destination's provider token (write-only: the
 * demo makes one up, sends it once and wipes it). Payout grants are rows,
 * with no token to print.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "cli.h"
#include "demo.h"

#define DEMO_PAYOUT_MS 30000 /* A's worker's send, B's worker's refusal */
/* The reconciler settling the lost answer: in dev mode it looks an Unknown
 * attempt up once the attempt's 20 s lease lapsed, then backs off 2 s, 5 s
 * (og_srv_dev_payouts). */
#define DEMO_PAID_MS 90000
#define DEMO_AGE_US (INT64_C(30) * 24 * 3600 * 1000000)

typedef struct demo_payout {
    char tenant[48], ben[48], dst[48], payout[48];
    char decision[48], grant[160], job[48], attempt[48], reference[160];
} demo_payout;

static void demo_payout_clear(demo_payout *p)
{
    sodium_memzero(p, sizeof *p);
}

/* A numbered step's head: "  N. [serve A pid 123] story". */
static int demo_n;

static void demo_head(const demo_proc *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void demo_head(const demo_proc *p, const char *fmt, ...)
{
    va_list ap;

    printf("  %2d. ", ++demo_n);
    if (p)
        printf("[%s pid %ld] ", p->name, (long)p->pid);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

/* POST base+path as key with body (consumed); ok when the status is want.
 * Prints the status or the error code after the current line's text. */
static bool demo_post(const demo_proc *p, const char *path, const char *key,
                      json_t *body, long want, json_t **out)
{
    json_t *a = NULL;
    long code = body ? demo_http("POST", p->url, path, key, body, &a) : 0;

    json_decref(body);
    if (code != want)
        printf(" [%s %ld %s]", path, code, demo_str(a, "error"));
    if (out)
        *out = a;
    else
        json_decref(a);
    return code == want;
}

/* The tenant, beneficiary and (once the destination exists) the draft over
 * HTTP as the payout-admin, on A: draft false writes the first two, true
 * the draft. */
static bool demo_payout_context(demo *d, demo_payout *p, bool draft)
{
    bool ok = true;
    char path[160];

    if (draft)
        goto draft;
    snprintf(path, sizeof path, "/v1/payout-admin/tenants/%s", p->tenant);
    ok = demo_post(&d->a, path, d->payout_admin_key,
                   json_pack("{s:I, s:s, s:I, s:b}", "expected_version",
                             (json_int_t)0, "currency", "EUR",
                             "daily_limit_minor", (json_int_t)5000000,
                             "payouts_suspended", 0),
                   201, NULL);
    snprintf(path, sizeof path, "/v1/payout-admin/beneficiaries/%s", p->ben);
    ok = ok && demo_post(&d->a, path, d->payout_admin_key,
                         json_pack("{s:I, s:s, s:b, s:s}", "expected_version",
                                   (json_int_t)0, "tenant_id", p->tenant,
                                   "verified", 1, "status", "Active"),
                         201, NULL);
    return ok;
draft:
    snprintf(path, sizeof path, "/v1/payout-admin/payouts/%s", p->payout);
    ok = ok && demo_post(&d->a, path, d->payout_admin_key,
                         json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s}",
                                   "tenant_id", p->tenant, "beneficiary_id",
                                   p->ben, "destination_id", p->dst,
                                   "destination_version", (json_int_t)1,
                                   "amount", "4250.00", "currency", "EUR",
                                   "purpose", "supplier-invoice INV-9031"),
                         201, NULL);
    return ok;
}

/* docs/payouts.md's DST-77 was registered long before PAY-3107 (its last
 * change more than 7 days back, so the policy needs no acknowledgment):
 * the demo imports it into the store as a registry being moved in would,
 * with its last change 30 days ago (og_payout_destination_import: never
 * later than the store's clock, never over an existing destination). The
 * provider token is random, written once, wiped. 0, or -1. */
static int demo_payout_import(const demo *d, const demo_payout *p)
{
    char url[PATH_MAX + 32];
    unsigned char raw[12];
    char token[32];
    og_store *s = NULL;
    og_payout_put_result r = {0};
    struct timespec now;
    int rc;

    randombytes_buf(raw, sizeof raw);
    memcpy(token, "tok_", 4);
    sodium_bin2hex(token + 4, sizeof token - 4, raw, sizeof raw);
    if (d->store)
        snprintf(url, sizeof url, "%s", d->store);
    else
        snprintf(url, sizeof url, "sqlite:%s/oncegate.db", d->dir);
    clock_gettime(CLOCK_REALTIME, &now);
    if ((rc = og_store_open(url, NULL, &s)) == 0) {
        og_payout_destination_record dr = {p->dst, p->ben, token};
        int64_t now_us =
            (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;

        rc = og_payout_destination_import(s, &dr, now_us - DEMO_AGE_US, &r);
        og_store_free(s);
    }
    sodium_memzero(token, sizeof token);
    if (rc != 0 || r.outcome != OG_PAYOUT_WRITTEN) {
        fprintf(stderr, "oncegate demo: cannot import destination %s: %s\n",
                p->dst, rc < 0 ? og_strerror(rc)
                               : og_payout_write_name(r.outcome));
        return -1;
    }
    return 0;
}

/* The number after `name ` on its own line of a Prometheus text, or -1. */
static long long demo_metric(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : l)
        if (strncmp(l, name, n) == 0 && l[n] == ' ')
            return strtoll(l + n + 1, NULL, 10);
    return -1;
}

typedef struct demo_counts {
    long long sent, duplicate, refused, sends;
} demo_counts;

/* p's /metrics: its runner's job ends and create calls. */
static bool demo_counts_get(const demo_proc *p, demo_counts *c)
{
    char *text = NULL;
    long code = demo_http_text(p->url, "/metrics", &text);

    if (code == 200 && text) {
        c->sent = demo_metric(text, "oncegate_payout_jobs_total{end=\"sent\"}");
        c->duplicate = demo_metric(
            text, "oncegate_payout_jobs_total{end=\"duplicate\"}");
        c->refused = demo_metric(text,
                                 "oncegate_payout_jobs_total{end=\"refused\"}");
        c->sends = demo_metric(text, "oncegate_payout_sends_total");
    }
    free(text);
    return code == 200 && c->sent >= 0 && c->duplicate >= 0 &&
           c->refused >= 0 && c->sends >= 0;
}

/* GET /v1/admin/payouts/ID as the operator on p: the answer, or NULL. */
static json_t *demo_payout_get(const demo *d, const demo_proc *p,
                               const demo_payout *dp)
{
    char path[160];
    json_t *a = NULL;

    snprintf(path, sizeof path, "/v1/admin/payouts/%s", dp->payout);
    if (demo_http("GET", p->url, path, d->operator_key, NULL, &a) != 200) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static const char *demo_state(const json_t *v)
{
    return demo_str(json_object_get(v, "payout"), "state");
}

/* The payout's only attempt, or NULL. */
static const json_t *demo_attempt(const json_t *v)
{
    const json_t *at = json_object_get(v, "attempts");

    return json_array_size(at) == 1 ? json_array_get(at, 0) : NULL;
}

/* Polls the payout on p until done(v) or ms. The last answer, or NULL. */
static json_t *demo_payout_await(const demo *d, const demo_proc *p,
                                 const demo_payout *dp,
                                 bool (*done)(const json_t *), int ms)
{
    struct timespec t0;
    json_t *v = NULL;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        json_decref(v);
        v = demo_payout_get(d, p, dp);
        if ((v && done(v)) || demo_since(&t0) * 1000 > ms)
            return v;
        nanosleep(&(struct timespec){0, 250 * 1000000}, NULL);
    }
}

static bool demo_left_executing(const json_t *v)
{
    const json_t *a = demo_attempt(v);
    const char *st = demo_str(a, "status");

    return a && strcmp(st, "Admitted") != 0 && strcmp(st, "Started") != 0;
}

static bool demo_paid(const json_t *v)
{
    return strcmp(demo_state(v), "Paid") == 0 ||
           strcmp(demo_state(v), "Failed") == 0;
}

/* The attempt's history, one line an entry. */
static void demo_history(const json_t *a)
{
    const json_t *h = json_object_get(a, "history");

    for (size_t k = 0; k < json_array_size(h); k++)
        demo_history_line(json_array_get(h, k), "        ");
}

/* Steps 5-6: the clerk's submission on A, then A's worker's send. */
static int demo_payout_decide_and_send(demo *d, demo_payout *p)
{
    char path[160];
    char release[40];
    json_t *a = NULL, *v;
    const json_t *at;
    demo_counts c = {-1, -1, -1, -1};
    struct timespec now;
    bool ok;

    clock_gettime(CLOCK_REALTIME, &now);
    /* a second back: the grant's window is open on the store's clock */
    og_time_format_rfc3339((int64_t)(now.tv_sec - 1) * 1000000, release,
                           sizeof release);
    snprintf(path, sizeof path, "/v1/payouts/%s/submit", p->payout);
    demo_head(&d->a, "the clerk submits %s v1 for the batch released now\n",
              p->payout);
    ok = demo_post(&d->a, path, d->clerk_key,
                   json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}",
                             "beneficiary_id", p->ben, "destination_id",
                             p->dst, "amount", "4250.00", "currency", "EUR",
                             "purpose", "supplier-invoice INV-9031",
                             "payout_version", (json_int_t)1, "release_at",
                             release),
                   200, &a);
    ok = ok && strcmp(demo_str(a, "outcome"), "Allowed") == 0 &&
         json_is_true(json_object_get(a, "issued"));
    snprintf(p->decision, sizeof p->decision, "%s", demo_str(a, "decision_id"));
    snprintf(p->grant, sizeof p->grant, "%s", demo_str(a, "grant_id"));
    snprintf(p->job, sizeof p->job, "%s", demo_str(a, "job_id"));
    printf("        → %s %s: decision %s, grant %s, job %s, attempt %lld",
           demo_str(a, "outcome"), demo_str(a, "reason"), p->decision,
           p->grant, p->job,
           (long long)json_integer_value(json_object_get(a, "attempt_number")));
    demo_verdict(&d->t, ok, false, "grant, reservation and job in ONE "
                 "transaction", "expected 200 Allowed with a grant");
    json_decref(a);
    if (!ok)
        return -1;

    v = demo_payout_await(d, &d->a, p, demo_left_executing, DEMO_PAYOUT_MS);
    at = demo_attempt(v);
    snprintf(p->attempt, sizeof p->attempt, "%s",
             demo_str(at, "operation_id"));
    snprintf(p->reference, sizeof p->reference, "%s",
             demo_str(at, "client_reference"));
    ok = demo_counts_get(&d->a, &c);
    demo_head(&d->a, "A's worker claims grant %s (consumed), attempt %s "
              "Started, sends under reference %s;\n"
              "        the provider completes it, the answer is lost → "
              "attempt %s, payout %s; A's /metrics: sent %lld, sends %lld",
              p->grant, p->attempt[0] ? p->attempt : "(none)",
              p->reference[0] ? p->reference : "?",
              at ? demo_str(at, "status") : "?", v ? demo_state(v) : "?",
              c.sent, c.sends);
    ok = ok && at && strcmp(demo_str(at, "status"), "Unknown") == 0 &&
         strcmp(demo_state(v), "Unknown") == 0 && c.sent == 1 &&
         c.sends == 1 && p->attempt[0];
    demo_verdict(&d->t, ok, false, "sent once; Unknown, nothing resent",
                 "expected one send and the attempt Unknown");
    json_decref(v);
    /* A failed verdict is tallied; only an attempt that never appeared
     * leaves nothing to go on with. */
    return p->attempt[0] ? 0 : -1;
}

/* Steps 8-9: the job again, on B; B's worker refuses it. */
static void demo_payout_redeliver(demo *d, demo_payout *p)
{
    char path[160], key[1][OG_UUID_LEN + 1], job[48] = "";
    demo_counts c = {-1, -1, -1, -1};
    struct timespec t0;
    json_t *a = NULL;
    bool ok;

    demo_uuids(key, 1);
    snprintf(path, sizeof path, "/v1/admin/payout-jobs/%s/resubmit", p->job);
    demo_head(&d->b, "no answer reached anyone: the operator resubmits job "
              "%s (a delivery retry)", p->job);
    ok = demo_post(&d->b, path, d->operator_key,
                   json_pack("{s:s}", "idempotency_key", key[0]), 201, &a);
    snprintf(job, sizeof job, "%s", demo_str(a, "job_id"));
    json_decref(a);
    printf("\n        → job %s, naming the same grant %s", job, p->grant);
    demo_verdict(&d->t, ok && job[0], false, "redelivered",
                 "expected 201 resubmitted");

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while ((!demo_counts_get(&d->b, &c) ||
            c.duplicate + c.refused + c.sent < 1) &&
           demo_since(&t0) * 1000 < DEMO_PAYOUT_MS)
        nanosleep(&(struct timespec){0, 250 * 1000000}, NULL);
    demo_head(&d->b, "B's worker takes job %s: grant %s is consumed by "
              "attempt %s —\n"
              "        a duplicate, acknowledged; B's /metrics: duplicate "
              "%lld, sent %lld, sends %lld",
              job, p->grant, p->attempt, c.duplicate, c.sent, c.sends);
    ok = c.duplicate == 1 && c.sent == 0 && c.refused == 0 && c.sends == 0;
    demo_verdict(&d->t, ok, true, "second worker refused, nothing sent",
                 "SECOND WORKER NOT REFUSED (expected duplicate, no send)");
}

/* Step 10: B's reconciler settles the attempt. */
static void demo_payout_reconciled(demo *d, demo_payout *p,
                                   const struct timespec *lost_at)
{
    json_t *v = demo_payout_await(d, &d->b, p, demo_paid, DEMO_PAID_MS);
    const json_t *at = demo_attempt(v);
    bool ok = at && strcmp(demo_state(v), "Paid") == 0 &&
              strcmp(demo_str(at, "status"), "Succeeded") == 0 &&
              strcmp(demo_str(at, "operation_id"), p->attempt) == 0;

    demo_head(&d->b, "B's reconciler looks attempt %s up by %s → %s%s%s, "
              "payout %s %.1f s after the lost answer\n",
              p->attempt, p->reference, at ? demo_str(at, "status") : "?",
              at && demo_str(at, "provider_reference")[0] ? " " : "",
              at ? demo_str(at, "provider_reference") : "",
              v ? demo_state(v) : "no answer", demo_since(lost_at));
    if (at)
        demo_history(at);
    printf("        payout %s", p->payout);
    demo_verdict(&d->t, ok, false, "reconciled: Paid",
                 "NOT RECONCILED (expected Paid, attempt succeeded)");
    json_decref(v);
}

/* Step 11: the sandbox's counters. */
static void demo_payout_stats(demo *d)
{
    json_t *a = NULL;
    long code = demo_http("GET", d->sb.url, "/_control/stats", NULL, NULL, &a);
    json_int_t req = json_integer_value(json_object_get(a, "payout_requests"));
    json_int_t made = json_integer_value(json_object_get(a, "payouts_created"));
    json_int_t look = json_integer_value(json_object_get(a, "payout_lookups"));
    bool ok = code == 200 && req == 1 && made == 1 && look >= 1;

    demo_head(&d->sb, "GET /_control/stats  →  payout_requests %lld, "
              "payouts_created %lld, payout_lookups %lld",
              (long long)req, (long long)made, (long long)look);
    demo_verdict(&d->t, ok, false,
                 "exactly one completed payout; nothing sent twice",
                 "expected 1 payout request, 1 payout created, a lookup");
    json_decref(a);
}

int demo_payout_incident(demo *d)
{
    demo_payout p;
    unsigned char raw[4];
    char tag[9];
    struct timespec lost_at;
    long old;
    int rc = -1;

    memset(&p, 0, sizeof p);
    demo_n = 0;
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(tag, sizeof tag, raw, sizeof raw);
    snprintf(p.tenant, sizeof p.tenant, "T-0417-%s", tag);
    snprintf(p.ben, sizeof p.ben, "BEN-2208-%s", tag);
    snprintf(p.dst, sizeof p.dst, "DST-77-%s", tag);
    snprintf(p.payout, sizeof p.payout, "PAY-3107-%s", tag);
    printf("\nIncident 3 — payout %s: 4,250.00 EUR to %s at %s, on two "
           "instances\n", p.payout, p.ben, p.dst);

    demo_head(&d->a, "the payout-admin registers tenant %s, beneficiary "
              "%s", p.tenant, p.ben);
    if (!demo_payout_context(d, &p, false)) {
        demo_verdict(&d->t, false, false, "", "context not written");
        goto out;
    }
    demo_verdict(&d->t, true, false, "context written", "");
    demo_head(NULL, "[store] destination %s imported, registered to %s 30 "
              "days ago as docs/payouts.md's\n"
              "        DST-77 (its provider token is write-only: never "
              "printed)", p.dst, p.ben);
    if (demo_payout_import(d, &p) != 0) {
        demo_verdict(&d->t, false, false, "", "not imported");
        goto out;
    }
    demo_verdict(&d->t, true, false, "no acknowledgment needed", "");
    demo_head(&d->a, "the payout-admin drafts %s v1", p.payout);
    if (!demo_payout_context(d, &p, true)) {
        demo_verdict(&d->t, false, false, "", "draft not written");
        goto out;
    }
    demo_verdict(&d->t, true, false, "draft written", "");

    old = (long)d->b.pid;
    if (!demo_reap(&d->b, SIGTERM))
        goto out;
    demo_head(NULL, "-- serve B (pid %ld) stopped for a deployment, so the "
              "job goes to A's worker\n"
              "        (with both up, either worker may take it) --\n", old);
    if (demo_arm_drop(d) != 0)
        goto out;
    demo_head(&d->sb, "fault armed: drop_response_after_effect — the next "
              "payout is completed, its answer lost\n");
    clock_gettime(CLOCK_MONOTONIC, &lost_at);
    if (demo_payout_decide_and_send(d, &p) != 0)
        goto out;

    old = (long)d->a.pid;
    if (!demo_reap(&d->a, SIGTERM) || demo_start_serve(d, &d->b) != 0)
        goto out;
    demo_head(NULL, "-- serve A (pid %ld) stopped in its turn; serve B "
              "started again as pid %ld --\n", old, (long)d->b.pid);
    demo_payout_redeliver(d, &p);
    demo_payout_reconciled(d, &p, &lost_at);
    demo_payout_stats(d);
    rc = 0;
out:
    demo_payout_clear(&p);
    return rc;
}
