/*
 * traces.c — the running example's invariant traces, A to G, each a path
 * of docs/payouts.md section 8 told as what the records hold afterwards:
 * which decision, whether a grant, a job or a claim exists, the attempt
 * and the payout, and the provider's calls. And: no secret anywhere.
 *
 *   A  a non-Allowed decision issues nothing: no grant, no job, 0 calls
 *   B  an expired, revoked, replayed or mismatched grant is refused at
 *      validation: no claim attempted, 0 calls
 *   C  a payout no longer executable (cancelled) is refused; its decision
 *      stays Allowed
 *   D  a lost claim (two workers, one grant) makes 0 calls for the loser,
 *      1 in total
 *   E  a deterministic provider rejection: Failed, the decision Allowed,
 *      no automatic resend
 *   F  an ambiguous timeout: Unknown, a new attempt blocked, 1 call
 *   G  reconciliation confirms success: Succeeded, Paid, 1 submit in all
 */
#include "pipeline.h"

/* What the store holds of a payout's authority: grants, jobs, claims. */
static int64_t count_where(pl_world *w, const char *table, const char *id)
{
    return t_raw_int(w->raw, "SELECT count(*) FROM %s WHERE payout_id = '%s'",
                     table, id);
}

void trace_a_non_allowed_decision_issues_nothing(void **state)
{
    static const og_payout_outcome want[] = {
        OG_PAYOUT_ESCALATION_RECOMMENDED, OG_PAYOUT_DENIED,
        OG_PAYOUT_DEFERRED};
    pl_world w;
    pl_cred c;
    og_payout_worker_cfg cfg;

    (void)state;
    pl_world_up(&w, "tracea", PL_DST_OPEN, 5);
    cfg = pl_cfg(&w, &c);
    for (int k = 0; k < 3; k++) {
        char id[64];
        og_payout_decide_req r;
        og_payout_decision d;

        if (k < 2)
            pl_draft(&w, id, k, k == 0 ? "12000.00" : "60000.00");
        else
            snprintf(id, sizeof id, "PAY-%s-missing", w.tag);
        r = pl_decide_req(id);
        d = pl_decide(&w, &r);
        assert_int_equal(d.verdict.outcome, want[k]);
        assert_false(d.issued);
        assert_int_equal(count_where(&w, "payout_grants", id), 0);
        assert_int_equal(count_where(&w, "payout_jobs", id), 0);
        assert_int_equal(count_where(&w, "payout_decisions", id), 1);
        assert_int_equal(pl_work(&w, &cfg).end, OG_PAYOUT_WORK_IDLE);
    }
    assert_int_equal(pl_reserved(&w), 0);
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 0);
    pl_world_down(&w);
}

void trace_b_refused_grants_make_zero_provider_calls(void **state)
{
    static const char *const want[] = {"grant.expired", "grant.revoked",
                                       "binding.mismatch",
                                       "presenter.not-audience"};
    pl_world w;

    (void)state;
    pl_world_up(&w, "traceb", PL_DST_OPEN, 5);
    for (int k = 0; k < 4; k++) {
        char id[64], other[64];
        pl_cred c;
        og_payout_worker_cfg cfg = pl_cfg(&w, &c);
        og_payout_decision d;
        og_payout_work wk;

        pl_draft(&w, id, k, "10.00");
        if (k == 0) { /* delivered after a broker outage, past the window */
            og_payout_decide_req r = pl_decide_req(id);

            r.expires_at_us = t_now_us() - 10 * PL_MINUTE;
            r.not_before_us = r.expires_at_us - 30 * PL_MINUTE;
            d = pl_decide(&w, &r);
        } else {
            d = pl_decide_allowed(&w, id);
        }
        if (k == 1) {
            og_revoke_outcome ro;

            assert_int_equal(og_payout_grant_revoke(w.s, d.grant_id,
                                                    "finance-hold", &ro),
                             0);
        } else if (k == 2) {
            char sql[512];

            snprintf(other, sizeof other, "PAY-%s-other", w.tag);
            snprintf(sql, sizeof sql,
                     "UPDATE payout_jobs SET payout_id = '%s'"
                     " WHERE job_id = '%s'",
                     other, d.job_id);
            assert_int_equal(t_raw_exec(w.raw, sql), 0);
        } else if (k == 3) {
            cfg.audience = "reporting-service";
        }
        wk = pl_work(&w, &cfg);
        assert_int_equal(wk.end, OG_PAYOUT_WORK_REFUSED);
        assert_string_equal(og_payout_worker_reason_name(wk.reason), want[k]);
        assert_int_equal(wk.sends, 0);
        assert_int_equal(c.calls, 0);
        /* the claim was not attempted: no attempt, no "claimed" entry */
        assert_int_equal(pl_attempts(&w, id), 0);
        assert_int_equal(pl_events(&w, id, "claimed"), 0);
        assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_APPROVED);
    }
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 0);
    pl_world_down(&w);
}

void trace_c_payout_no_longer_executable(void **state)
{
    char id[64], reason[96];
    pl_world w;
    pl_cred c;
    og_payout_worker_cfg cfg;
    og_payout_decision d;
    og_payout_put_result r;
    og_payout_work wk;
    og_payout_view v;

    (void)state;
    pl_world_up(&w, "tracec", PL_DST_OPEN, 5);
    cfg = pl_cfg(&w, &c);
    d = pl_example(&w, id, 1);
    assert_int_equal(og_payout_cancel(w.s, id, d.executable_payout_version,
                                      "clerk-22", &r),
                     0);
    assert_int_equal(r.outcome, OG_PAYOUT_WRITTEN);
    v = pl_payout(&w, id);
    assert_int_equal(v.state, OG_PAYOUT_STATE_CANCELLED);
    assert_int_equal(v.version, d.executable_payout_version + 1);
    wk = pl_work(&w, &cfg);
    assert_int_equal(wk.end, OG_PAYOUT_WORK_REFUSED);
    assert_string_equal(og_payout_worker_reason_name(wk.reason),
                        "payout.not-executable");
    pl_decision_reason(&w, d.decision_id, reason);
    assert_string_equal(reason, "Allowed payout.allowed");
    assert_int_equal(pl_attempts(&w, id), 0);
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 0);
    pl_world_down(&w);
}

/* Two workers validate one grant; one claims; the other's claim (or its
 * validation, when it came after) finds the grant consumed by this
 * binding's attempt: a duplicate, 0 calls. */
typedef struct tw {
    og_store *s;
    og_payout_worker_cfg cfg;
    pl_cred c;
    pthread_barrier_t *b;
    og_payout_work wk;
} tw;

static void *tw_main(void *arg)
{
    tw *t = arg;

    pthread_barrier_wait(t->b);
    memset(&t->wk, 0, sizeof t->wk);
    if (og_payout_work_once(t->s, &t->cfg, &t->wk) != 0)
        t->wk.end = (og_payout_work_end)-1;
    return NULL;
}

void trace_d_claim_lost(void **state)
{
    char id[64], job[OG_UUID_LEN + 1];
    pl_world w;
    og_payout_decision d;
    pthread_barrier_t b;
    pthread_t th[2];
    tw t[2];
    int sent = 0;

    (void)state;
    pl_world_up(&w, "traced", PL_DST_OPEN, 5);
    d = pl_example(&w, id, 1);
    assert_int_equal(og_payout_job_resubmit(w.s, d.job_id, "ops-7", job), 1);
    pthread_barrier_init(&b, NULL, 2);
    for (int i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].s = t_store_url(w.url, 2, 30000);
        t[i].cfg = pl_cfg(&w, &t[i].c);
        t[i].b = &b;
        assert_int_equal(pthread_create(&th[i], NULL, tw_main, &t[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        og_store_free(t[i].s);
    }
    pthread_barrier_destroy(&b);
    for (int i = 0; i < 2; i++) {
        if (t[i].wk.end == OG_PAYOUT_WORK_SENT) {
            sent++;
            assert_int_equal(t[i].wk.sends, 1);
        } else {
            assert_int_equal(t[i].wk.end, OG_PAYOUT_WORK_DUPLICATE);
            assert_int_equal(t[i].wk.sends, 0);
            assert_int_equal(t[i].c.calls, 0);
        }
    }
    assert_int_equal(sent, 1);
    assert_int_equal(pl_attempts(&w, id), 1);
    assert_int_equal(pl_events(&w, id, "claimed"), 1);
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 1);
    pl_world_down(&w);
}

void trace_e_deterministic_provider_rejection(void **state)
{
    char id[64], reason[96];
    pl_world w;
    pl_cred c;
    og_payout_worker_cfg cfg;
    og_payout_decision d;
    og_payout_work wk;

    (void)state;
    pl_world_up(&w, "tracee", PL_DST_CLOSED, 5);
    cfg = pl_cfg(&w, &c);
    d = pl_example(&w, id, 1);
    wk = pl_work(&w, &cfg);
    assert_string_equal(wk.answer.reason, "destination_closed");
    assert_int_equal(pl_attempt(&w, wk.attempt_id).status, OG_OP_FAILED);
    assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_FAILED);
    pl_decision_reason(&w, d.decision_id, reason);
    assert_string_equal(reason, "Allowed payout.allowed");
    /* automatic resend: none, by the worker or the recovery loops */
    assert_int_equal(pl_work(&w, &cfg).end, OG_PAYOUT_WORK_IDLE);
    pl_age_attempt(&w, wk.attempt_id, -1000, false);
    assert_int_equal(pl_sweep(&w).taken, 0);
    {
        pl_cred rc;
        og_payout_reconciler_cfg r = pl_rcfg(&w, &rc);

        assert_int_equal(pl_reconcile(&w, &r).looked_up, 0);
    }
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 1);
    pl_world_down(&w);
}

void trace_f_ambiguous_timeout(void **state)
{
    char id[64];
    pl_world w;
    pl_cred c;
    og_payout_worker_cfg cfg;
    og_payout_decide_req r;
    og_payout_decision d;
    og_payout_work wk;
    og_operation op;

    (void)state;
    pl_world_up(&w, "tracef", PL_DST_OPEN, 5);
    cfg = pl_cfg(&w, &c);
    cfg.provider_timeout_us = PL_SEC;
    pl_example(&w, id, 1);
    pl_arm(&w.sbx, "delay_after_effect", 1, 2500);
    wk = pl_work(&w, &cfg);
    op = pl_attempt(&w, wk.attempt_id);
    assert_int_equal(op.status, OG_OP_UNKNOWN);
    assert_string_equal(op.reason, "timeout");
    {
        char key[128];

        snprintf(key, sizeof key, "payout-%s-a1", id);
        assert_string_equal(op.idempotency_key, key);
    }
    assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_UNKNOWN);
    /* new attempt: blocked; new grant: none */
    r = pl_decide_req(id);
    r.reauthorize = true;
    d = pl_decide(&w, &r);
    assert_false(d.issued);
    assert_int_equal(count_where(&w, "payout_grants", id), 1);
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 1);
    pl_world_down(&w);
}

void trace_g_reconciliation_confirms_success(void **state)
{
    char id[64];
    pl_world w;
    pl_cred c, rcred;
    og_payout_worker_cfg cfg;
    og_payout_reconciler_cfg rc;
    og_payout_work wk;
    og_operation op;
    pl_stats st;

    (void)state;
    pl_world_up(&w, "traceg", PL_DST_OPEN, 5);
    cfg = pl_cfg(&w, &c);
    rc = pl_rcfg(&w, &rcred);
    cfg.provider_timeout_us = PL_SEC;
    pl_example(&w, id, 1);
    pl_arm(&w.sbx, "delay_after_effect", 1, 2500);
    wk = pl_work(&w, &cfg);
    pl_age_attempt(&w, wk.attempt_id, -1000, false);
    assert_int_equal(pl_reconcile(&w, &rc).succeeded, 1);
    op = pl_attempt(&w, wk.attempt_id);
    assert_int_equal(op.status, OG_OP_SUCCEEDED);
    assert_true(strncmp(op.provider_reference, "po_", 3) == 0);
    assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_PAID);
    st = pl_stats_of(&w.sbx);
    assert_int_equal(st.payout_requests, 1);
    assert_int_equal(st.payouts_created, 1);
    pl_world_down(&w);
}

/* ---- no secret anywhere ----------------------------------------------------- */

/* Whether the n bytes at p hold secret anywhere. */
static bool holds(const void *p, size_t n, const char *secret)
{
    size_t k = strlen(secret);
    const unsigned char *b = p;

    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(b + i, secret, k) == 0)
            return true;
    return false;
}

static void no_secret_in(const char *where, const char *text,
                         const char *secret)
{
    if (text && strstr(text, secret))
        fail_msg("%s holds a secret", where);
}

/* Every row of every table the pipeline writes, as text. */
static void no_secret_in_the_store(pl_world *w, const char *secret)
{
    static const char *const tables[] = {
        "grants", "payout_grants", "payout_jobs", "payout_decisions",
        "payout_events", "operations", "operation_events", "tenant_days",
        "payouts"};

    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char sql[4096], *rows;

        if (t_kind == T_POSTGRES) {
            snprintf(sql, sizeof sql, "SELECT x::text FROM %s x", tables[i]);
        } else {
            char q[256], *cols;
            size_t n;

            snprintf(q, sizeof q, "SELECT name FROM pragma_table_info('%s')",
                     tables[i]);
            cols = t_raw_lines(w->raw, q);
            assert_non_null(cols);
            n = (size_t)snprintf(sql, sizeof sql, "SELECT ''");
            for (char *l = strtok(cols, "\n"); l; l = strtok(NULL, "\n"))
                n += (size_t)snprintf(sql + n, sizeof sql - n,
                                      " || coalesce(quote(\"%s\"), '') || '|'",
                                      l);
            snprintf(sql + n, sizeof sql - n, " FROM %s", tables[i]);
            free(cols);
        }
        rows = t_raw_lines(w->raw, sql);
        assert_non_null(rows);
        no_secret_in(tables[i], rows, secret);
        free(rows);
    }
}

void no_secret_anywhere(void **state)
{
    char id[64];
    pl_world w;
    pl_cred c, rcred;
    og_payout_worker_cfg cfg;
    og_payout_reconciler_cfg rc;
    og_payout_work wk[4];
    char *log;

    (void)state;
    pl_world_up(&w, "secrets", PL_DST_OPEN, 5);
    cfg = pl_cfg(&w, &c);
    rc = pl_rcfg(&w, &rcred);
    cfg.provider_timeout_us = PL_SEC;
    /* a success, a lost answer reconciled, a refusal, a resubmission */
    pl_example(&w, id, 1);
    wk[0] = pl_work(&w, &cfg);
    pl_example(&w, id, 2);
    pl_arm(&w.sbx, "delay_after_effect", 1, 2500);
    wk[1] = pl_work(&w, &cfg);
    pl_age_attempt(&w, wk[1].attempt_id, -1000, false);
    pl_reconcile(&w, &rc);
    {
        og_payout_decision d = pl_example(&w, id, 3);
        og_revoke_outcome ro;
        char job[OG_UUID_LEN + 1];

        assert_int_equal(og_payout_grant_revoke(w.s, d.grant_id, "ops-7", &ro),
                         0);
        wk[2] = pl_work(&w, &cfg);
        assert_int_equal(og_payout_job_resubmit(w.s, d.job_id, "ops-7", job),
                         1);
        wk[3] = pl_work(&w, &cfg);
    }
    for (int i = 0; i < 4; i++) {
        /* what the worker hands back holds neither */
        assert_false(holds(&wk[i], sizeof wk[i], w.token));
        assert_false(holds(&wk[i], sizeof wk[i], PL_CREDENTIAL));
    }
    no_secret_in_the_store(&w, PL_CREDENTIAL);
    /* the token lives in its destination's row (not read here) alone */
    no_secret_in_the_store(&w, w.token);
    log = pl_sbx_log(&w.sbx);
    no_secret_in("the sandbox's log", log, w.token);
    no_secret_in("the sandbox's log", log, PL_CREDENTIAL);
    free(log);
    pl_world_down(&w);
}

/* The same through the real command, a process of its own:
 * `oncegate payouts run --until-idle` sends the example, and neither its
 * log lines (stderr: one per job) nor its counts (stdout) hold the
 * destination token or the credential; they name the payout. */
void cli_run_leaves_no_secret_in_its_output(void **state)
{
    char id[64], out[PATH_MAX + 16], err[PATH_MAX + 16], key[PATH_MAX + 16],
        table[PATH_MAX];
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    const char *bin = getenv("OG_TEST_ONCEGATE");
    pl_world w;
    char *text;
    int code;

    (void)state;
    if (!bin)
        skip();
    pl_world_up(&w, "cli", PL_DST_OPEN, 5);
    pl_example(&w, id, 1);
    snprintf(out, sizeof out, "%s/cli.out", w.sbx.dir);
    snprintf(err, sizeof err, "%s/cli.err", w.sbx.dir);
    snprintf(key, sizeof key, "%s/key", w.sbx.dir);
    snprintf(table, sizeof table, "%s/providers/sandbox-payouts.v1.json",
             root ? root : ".");
    {
        const char *argv[] = {bin, "payouts", "run", "--store", w.url,
                              "--provider", w.sbx.url, "--provider-table",
                              table, "--credential-file", key,
                              "--worker-id", "svc-payout-worker",
                              "--until-idle", "--seconds", "60", NULL};

        code = t_proc_run((char *const *)argv, out, err, 90000);
    }
    if (code != 0) {
        t_proc_print_output(out, err);
        fail_msg("oncegate payouts run: exit %d", code);
    }
    assert_int_equal(pl_payout(&w, id).state, OG_PAYOUT_STATE_PAID);
    assert_int_equal(pl_stats_of(&w.sbx).payout_requests, 1);
    text = t_slurp(err, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, id)); /* identifiers are logged */
    no_secret_in("the command's log", text, w.token);
    no_secret_in("the command's log", text, PL_CREDENTIAL);
    free(text);
    text = t_slurp(out, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"sent\":1"));
    no_secret_in("the command's counts", text, w.token);
    no_secret_in("the command's counts", text, PL_CREDENTIAL);
    free(text);
    unlink(out);
    unlink(err);
    pl_world_down(&w);
}
