/*
 * soak.c — og-soak-payouts, the seeding and the checking half of
 * scripts/soak-payouts (the script runs the sandbox, the worker processes
 * and the faults in between):
 *
 *   og-soak-payouts seed  STORE_URL TENANTS PAYOUTS
 *   og-soak-payouts check STORE_URL SANDBOX_URL KEY_FILE
 *
 * seed: TENANTS tenants (SOAK-T<t>), each with a verified Active
 * beneficiary and a destination whose provider token is of one of the
 * sandbox's documented classes (docs/sandbox.md, POST /v1/payouts): most
 * open, every 10th closed, every 10th busy (rate-limited), every 10th
 * async (202 pending); PAYOUTS payouts each (SOAK-P<t>-<n>, 100.00 to
 * 500.00 EUR), all decided at once with their window open now, against a
 * daily limit of three quarters of the tenant's total, so that some are
 * Denied tenant.daily-limit by their reservations.
 *
 * check: after the run, every payout must have an end with a reason that
 * is true of it, the provider must hold at most one completed payout per
 * payout, and no tenant day may exceed its limit:
 *   Paid          exactly one completed (or returned) payout at the
 *                 provider under its attempts' references;
 *   Failed        none, its last attempt Failed;
 *   Approved      none, no active attempt (its attempt NotStarted or
 *                 NotApplied, or its grant unused): awaiting a new
 *                 decision;
 *   Draft         its decision was not Allowed;
 *   Unknown       its attempt NeedsReconciliation (terms_mismatch or the
 *                 escalation deadline): a person decides;
 *   anything else (Executing, Unknown with an Unknown attempt) is unsettled.
 * It prints the figures and exits 1 on any violation. The store is read
 * with the engines' own clients, the provider with plain HTTP lookups
 * (GET /v1/payouts?reference=R, the bearer key of KEY_FILE).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "oncegate/oncegate.h"

/* ===========================================================================
 * Raw reads and writes, behind the store's back
 * ========================================================================= */

typedef struct raw {
    PGconn *pg;
    sqlite3 *db;
} raw;

static int raw_open(raw *r, const char *url)
{
    memset(r, 0, sizeof *r);
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (sqlite3_open_v2(url + 7, &r->db, SQLITE_OPEN_READWRITE, NULL) !=
            SQLITE_OK)
            return -1;
        sqlite3_busy_timeout(r->db, 30000);
        return 0;
    }
    r->pg = PQconnectdb(url);
    return PQstatus(r->pg) == CONNECTION_OK ? 0 : -1;
}

static void raw_close(raw *r)
{
    if (r->pg)
        PQfinish(r->pg);
    if (r->db)
        sqlite3_close(r->db);
}

/* Runs sql; calls row(arg, ncols, values) for every row. 0 or -1. */
static int raw_query(raw *r, const char *sql,
                     void (*row)(void *, int, const char *const *), void *arg)
{
    if (r->pg) {
        PGresult *res = PQexec(r->pg, sql);
        ExecStatusType st = PQresultStatus(res);
        int rows, cols;

        if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
            fprintf(stderr, "%s: %s", sql, PQerrorMessage(r->pg));
            PQclear(res);
            return -1;
        }
        rows = PQntuples(res);
        cols = PQnfields(res);
        for (int i = 0; i < rows && row; i++) {
            const char *v[16];

            for (int k = 0; k < cols && k < 16; k++)
                v[k] = PQgetisnull(res, i, k) ? NULL : PQgetvalue(res, i, k);
            row(arg, cols, v);
        }
        PQclear(res);
        return 0;
    }
    {
        sqlite3_stmt *st;
        int rc;

        if (sqlite3_prepare_v2(r->db, sql, -1, &st, NULL) != SQLITE_OK) {
            fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(r->db));
            return -1;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *v[16];
            int cols = sqlite3_column_count(st);

            for (int k = 0; k < cols && k < 16; k++)
                v[k] = (const char *)sqlite3_column_text(st, k);
            if (row)
                row(arg, cols, v);
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(r->db));
            return -1;
        }
        return 0;
    }
}

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ===========================================================================
 * seed
 * ========================================================================= */

static const char *token_class(int t)
{
    switch (t % 10) {
    case 7:
        return "dst_closed_";
    case 8:
        return "dst_busy_";
    case 9:
        return "dst_async_";
    default:
        return "dst_tok_";
    }
}

static int put_ok(int rc, og_payout_put_result r, const char *what)
{
    if (rc != 0 || r.outcome != OG_PAYOUT_WRITTEN) {
        fprintf(stderr, "%s: %s / %s\n", what, og_err_name(rc),
                og_payout_write_name(r.outcome));
        return -1;
    }
    return 0;
}

static int seed(const char *url, int tenants, int payouts)
{
    og_store *s = NULL;
    raw r;
    int counts[8] = {0};
    int rc;

    if ((rc = og_store_open(url, NULL, &s)) != 0 || raw_open(&r, url) != 0) {
        fprintf(stderr, "cannot open %s: %s\n", url, og_err_name(rc));
        return 1;
    }
    for (int t = 0; t < tenants; t++) {
        char tenant[64], ben[64], dst[64], token[96], sql[512];
        og_payout_put_result pr = {0, 0};
        int64_t total = 0;

        snprintf(tenant, sizeof tenant, "SOAK-T%d", t);
        snprintf(ben, sizeof ben, "SOAK-B%d", t);
        snprintf(dst, sizeof dst, "SOAK-D%d", t);
        snprintf(token, sizeof token, "%ssoak%d%08lx", token_class(t), t,
                 (unsigned long)(now_us() & 0xffffffff));
        for (int n = 0; n < payouts; n++)
            total += (n % 5 + 1) * 10000;
        {
            og_payout_tenant_settings ts;

            memset(&ts, 0, sizeof ts);
            ts.tenant_id = tenant;
            ts.daily_limit = total * 3 / 4;
            ts.currency = "EUR";
            if (put_ok(og_payout_tenant_put(s, &ts, 0, &pr), pr, tenant))
                return 1;
        }
        {
            og_payout_beneficiary_record b = {ben, tenant, true,
                                              OG_PAYOUT_BENEFICIARY_ACTIVE};
            if (put_ok(og_payout_beneficiary_put(s, &b, 0, &pr), pr, ben))
                return 1;
        }
        {
            og_payout_destination_record d = {dst, ben, token};
            if (put_ok(og_payout_destination_put(s, &d, 0, &pr), pr, dst))
                return 1;
        }
        /* changed long ago: the policy's 7-day rule does not decide */
        if (r.pg)
            snprintf(sql, sizeof sql,
                     "UPDATE destinations SET changed_at = clock_timestamp()"
                     " - interval '30 days' WHERE destination_id = '%s'",
                     dst);
        else
            snprintf(sql, sizeof sql,
                     "UPDATE destinations SET changed_at = %lld WHERE"
                     " destination_id = '%s'",
                     (long long)(now_us() - INT64_C(30) * 86400 * 1000000),
                     dst);
        if (raw_query(&r, sql, NULL, NULL) != 0)
            return 1;
        for (int n = 0; n < payouts; n++) {
            char id[64], amount[32];
            og_payout_draft_req dr;
            og_payout_decide_req q;
            og_payout_decision dec;

            snprintf(id, sizeof id, "SOAK-P%d-%d", t, n);
            snprintf(amount, sizeof amount, "%d.00", (n % 5 + 1) * 100);
            dr = (og_payout_draft_req){
                id,
                {tenant, ben, dst, 1, amount, "EUR", "soak invoice"},
                "clerk-22"};
            if (put_ok(og_payout_draft(s, &dr, &pr), pr, id))
                return 1;
            memset(&q, 0, sizeof q);
            q.payout_id = id;
            q.requester_id = "clerk-22";
            q.requester_role = "accounts-payable";
            q.requester_approval_limit = 1000000;
            q.correlation_id = "SOAK";
            q.audience = OG_PAYOUT_AUDIENCE;
            q.not_before_us = now_us() - 1000000;
            q.expires_at_us = q.not_before_us + INT64_C(30) * 60 * 1000000;
            if ((rc = og_payout_decide(s, &q, &dec)) != 0) {
                fprintf(stderr, "decide %s: %s\n", id, og_err_name(rc));
                return 1;
            }
            counts[dec.verdict.outcome]++;
        }
    }
    printf("seeded: %d tenants, %d payouts: %d allowed, %d denied\n", tenants,
           tenants * payouts, counts[OG_PAYOUT_ALLOWED],
           tenants * payouts - counts[OG_PAYOUT_ALLOWED]);
    raw_close(&r);
    og_store_free(s);
    return 0;
}

/* ===========================================================================
 * check
 * ========================================================================= */

typedef struct body {
    char *p;
    size_t n;
} body;

static size_t body_add(char *p, size_t sz, size_t n, void *ud)
{
    body *b = ud;
    char *nb = realloc(b->p, b->n + sz * n + 1);

    if (!nb)
        return 0;
    b->p = nb;
    memcpy(b->p + b->n, p, sz * n);
    b->n += sz * n;
    b->p[b->n] = '\0';
    return sz * n;
}

/* GET base+path with the bearer key: the parsed body, or NULL. */
static json_t *get_json(const char *base, const char *path, const char *key)
{
    char url[512], auth[4200];
    struct curl_slist *h = NULL;
    body b = {0};
    long status = 0;
    json_t *j = NULL;
    CURL *c = curl_easy_init();

    if (!c)
        return NULL;
    snprintf(url, sizeof url, "%s%s", base, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    h = curl_slist_append(h, auth);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_add);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200 && b.p)
            j = json_loads(b.p, 0, NULL);
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    free(b.p);
    return j;
}

typedef struct payout_row {
    char id[64], state[32], active[64];
    int attempts;
    char last_status[32], last_reason[80];
} payout_row;

typedef struct rows {
    payout_row *v;
    int n, cap;
} rows;

static void add_payout(void *arg, int cols, const char *const *v)
{
    rows *r = arg;

    if (cols < 6)
        return;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 256;
        payout_row *nv = realloc(r->v, sizeof *nv * (size_t)cap);

        if (!nv)
            abort();
        r->v = nv;
        r->cap = cap;
    }
    memset(&r->v[r->n], 0, sizeof r->v[r->n]);
    snprintf(r->v[r->n].id, sizeof r->v[r->n].id, "%s", v[0]);
    snprintf(r->v[r->n].state, sizeof r->v[r->n].state, "%s", v[1]);
    snprintf(r->v[r->n].active, sizeof r->v[r->n].active, "%s",
             v[2] ? v[2] : "");
    r->v[r->n].attempts = v[3] ? atoi(v[3]) : 0;
    snprintf(r->v[r->n].last_status, sizeof r->v[r->n].last_status, "%s",
             v[4] ? v[4] : "");
    snprintf(r->v[r->n].last_reason, sizeof r->v[r->n].last_reason, "%s",
             v[5] ? v[5] : "");
    r->n++;
}

typedef struct tally {
    char name[128]; /* holds any reason or state name whole */
    int n;
} tally;

static void count(tally *t, int max, const char *name)
{
    for (int i = 0; i < max; i++) {
        if (t[i].name[0] == '\0') {
            snprintf(t[i].name, sizeof t[i].name, "%s", name);
            t[i].n = 1;
            return;
        }
        if (strcmp(t[i].name, name) == 0) {
            t[i].n++;
            return;
        }
    }
}

static void print_tally(const char *what, const tally *t, int max)
{
    printf("%s:", what);
    for (int i = 0; i < max && t[i].name[0]; i++)
        printf(" %s %d", t[i].name, t[i].n);
    printf("\n");
}

static void add_status(void *arg, int cols, const char *const *v)
{
    tally *t = arg;

    if (cols >= 2)
        for (int i = 0; i < 16; i++)
            if (t[i].name[0] == '\0') {
                snprintf(t[i].name, sizeof t[i].name, "%s", v[0]);
                t[i].n = atoi(v[1]);
                break;
            }
}

static void over_limit(void *arg, int cols, const char *const *v)
{
    int *bad = arg;

    if (cols >= 4) {
        fprintf(stderr, "VIOLATION: %s on %s: paid %s + reserved %s over"
                        " its limit\n",
                v[0], v[1], v[2], v[3]);
        (*bad)++;
    }
}

static void one_int(void *arg, int cols, const char *const *v)
{
    if (cols >= 1 && v[0])
        *(long long *)arg = atoll(v[0]);
}

static int check(const char *url, const char *sbx, const char *key_file)
{
    raw r;
    rows p = {0};
    tally states[16] = {{{0}, 0}}, statuses[16] = {{{0}, 0}},
          ends[16] = {{{0}, 0}};
    char key[4096] = "";
    int bad = 0, completed_total = 0;
    long long days = 0;
    FILE *f = fopen(key_file, "r");
    json_t *stats;

    if (!f || !fgets(key, sizeof key, f)) {
        fprintf(stderr, "cannot read %s\n", key_file);
        return 1;
    }
    fclose(f);
    key[strcspn(key, "\r\n")] = '\0';
    if (raw_open(&r, url) != 0) {
        fprintf(stderr, "cannot open %s\n", url);
        return 1;
    }
    /* every payout with its last attempt (by creation) */
    if (raw_query(&r,
                  "SELECT p.payout_id, p.state, p.active_attempt,"
                  " p.attempt_count,"
                  " (SELECT o.status FROM operations o JOIN payout_grants g"
                  "   ON g.grant_id = o.grant_id WHERE g.payout_id ="
                  "   p.payout_id ORDER BY o.created_at DESC LIMIT 1),"
                  " (SELECT o.outcome_reason FROM operations o JOIN payout_grants g"
                  "   ON g.grant_id = o.grant_id WHERE g.payout_id ="
                  "   p.payout_id ORDER BY o.created_at DESC LIMIT 1)"
                  " FROM payouts p WHERE p.payout_id LIKE 'SOAK-%'"
                  " ORDER BY p.payout_id",
                  add_payout, &p) != 0) {
        raw_close(&r);
        return 1;
    }
    raw_query(&r,
              "SELECT status, count(*) FROM operations WHERE kind = 'payout'"
              " GROUP BY status ORDER BY status",
              add_status, statuses);
    /* no tenant day over its limit */
    raw_query(&r,
              "SELECT d.tenant_id, d.day, d.paid, d.reserved FROM tenant_days"
              " d JOIN tenants t ON t.tenant_id = d.tenant_id"
              " WHERE d.paid + d.reserved > t.daily_limit",
              over_limit, &bad);
    raw_query(&r, "SELECT count(*) FROM tenant_days", one_int, &days);
    for (int i = 0; i < p.n; i++) {
        payout_row *x = &p.v[i];
        int completed = 0, listed = 0;
        char end[96];

        for (int a = 1; a <= x->attempts; a++) {
            char path[160];
            json_t *j, *list;
            size_t k;
            json_t *it;

            snprintf(path, sizeof path, "/v1/payouts?reference=%s-a%d", x->id,
                     a);
            j = get_json(sbx, path, key);
            if (!j) {
                fprintf(stderr, "lookup %s failed\n", path);
                bad++;
                continue;
            }
            list = json_object_get(j, "payouts");
            json_array_foreach(list, k, it)
            {
                const char *st = json_string_value(json_object_get(it, "status"));

                listed++;
                if (st && (strcmp(st, "completed") == 0 ||
                           strcmp(st, "returned") == 0))
                    completed++;
            }
            json_decref(j);
        }
        completed_total += completed;
        count(states, 16, x->state);
        snprintf(end, sizeof end, "%s/%s", x->state,
                 x->last_status[0] ? x->last_status : "none");
        count(ends, 16, end);
        if (completed > 1) {
            fprintf(stderr, "VIOLATION: %s: %d completed payouts at the"
                            " provider\n",
                    x->id, completed);
            bad++;
        }
        if (strcmp(x->state, "Paid") == 0) {
            if (completed != 1 || strcmp(x->last_status, "Succeeded") != 0) {
                fprintf(stderr, "VIOLATION: %s Paid, %d completed, last"
                                " attempt %s\n",
                        x->id, completed, x->last_status);
                bad++;
            }
        } else if (strcmp(x->state, "Failed") == 0) {
            if (completed != 0 || strcmp(x->last_status, "Failed") != 0) {
                fprintf(stderr, "VIOLATION: %s Failed, %d completed, last"
                                " attempt %s\n",
                        x->id, completed, x->last_status);
                bad++;
            }
        } else if (strcmp(x->state, "Approved") == 0) {
            if (completed != 0 || x->active[0] ||
                (x->last_status[0] &&
                 strcmp(x->last_status, "NotStarted") != 0 &&
                 strcmp(x->last_status, "NotApplied") != 0)) {
                fprintf(stderr, "VIOLATION: %s Approved, %d completed, last"
                                " attempt %s\n",
                        x->id, completed, x->last_status);
                bad++;
            }
        } else if (strcmp(x->state, "Draft") == 0) {
            if (x->attempts != 0 || listed != 0) {
                fprintf(stderr, "VIOLATION: %s Draft with attempts\n", x->id);
                bad++;
            }
        } else if (strcmp(x->state, "Unknown") == 0 &&
                   strcmp(x->last_status, "NeedsReconciliation") == 0 &&
                   (strcmp(x->last_reason, "terms_mismatch") == 0 ||
                    strcmp(x->last_reason, "escalation_deadline") == 0)) {
            /* escalated with a true reason: a person decides */
        } else {
            fprintf(stderr, "VIOLATION: %s unsettled: %s, last attempt %s"
                            " (%s)\n",
                    x->id, x->state, x->last_status, x->last_reason);
            bad++;
        }
    }
    stats = get_json(sbx, "/_control/stats", key);
    printf("payouts: %d\n", p.n);
    print_tally("payout states", states, 16);
    print_tally("attempts by status", statuses, 16);
    print_tally("payout/last attempt", ends, 16);
    printf("tenant days: %lld, none over its limit: %s\n", days,
           bad ? "see violations" : "yes");
    if (stats) {
        printf("provider: payout_requests %lld, payouts_created %lld,"
               " payout_replays %lld, payout_lookups %lld, completed under"
               " the payouts' references %d\n",
               (long long)json_integer_value(
                   json_object_get(stats, "payout_requests")),
               (long long)json_integer_value(
                   json_object_get(stats, "payouts_created")),
               (long long)json_integer_value(
                   json_object_get(stats, "payout_replays")),
               (long long)json_integer_value(
                   json_object_get(stats, "payout_lookups")),
               completed_total);
        json_decref(stats);
    }
    printf("violations: %d\n", bad);
    free(p.v);
    raw_close(&r);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = 2;

    if (argc == 5 && strcmp(argv[1], "seed") == 0) {
        rc = seed(argv[2], atoi(argv[3]), atoi(argv[4]));
    } else if (argc == 5 && strcmp(argv[1], "check") == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rc = check(argv[2], argv[3], argv[4]);
        curl_global_cleanup();
    } else {
        fprintf(stderr, "usage: og-soak-payouts seed STORE_URL TENANTS"
                        " PAYOUTS\n"
                        "       og-soak-payouts check STORE_URL SANDBOX_URL"
                        " KEY_FILE\n");
    }
    return rc;
}
