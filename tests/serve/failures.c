/*
 * failures.c — failures around execution (docs/design.md, "Which failures
 * the guarantee survives" and "Execution: one owner at a time"): an
 * admission whose acknowledgment is lost, an outcome that cannot be
 * recorded, a handler paused past its lease, recovery while the original
 * call is still in flight, an operation id reused. Each checks the
 * sandbox's counters and what the store holds, through the API and over a
 * store connection of its own.
 */
#include "harness.h"
#include "cases.h"

/* Polls the sandbox until its fault queue is empty: the create request
 * that took the last firing has arrived (20 s). */
static void sbx_wait_faults_taken(const xenv *x)
{
    for (int64_t deadline = t_now_ms() + 20000;;) {
        hres r;
        size_t n;

        sbx_http(&r, x->sbx, "GET", "/_control/faults", sbx_key(x), NULL);
        assert_http(&r, 200);
        n = json_array_size(json_object_get(r.json, "faults"));
        hres_free(&r);
        if (n == 0)
            return;
        if (t_now_ms() > deadline)
            fail_msg("no create request took the armed fault within 20 s");
        t_sleep_ms(20);
    }
}

/* The operation as the store holds it, read over a store connection of the
 * test's own (none of the servers'). 1 and *out, or 0 when absent. */
static int store_read_op(const site *st, const char *op, og_operation *out)
{
    og_store_options o;
    og_store *s = NULL;
    int rc;

    og_store_options_default(&o);
    o.pool_size = 1;
    if ((rc = og_store_open(st->direct_url, &o, &s)) != 0)
        fail_msg("open the store %s: %s", st->direct_url, og_err_name(rc));
    rc = og_operation_get(s, op, out);
    og_store_free(s);
    if (rc < 0)
        fail_msg("read operation %s: %s", op, og_err_name(rc));
    return rc;
}

/* The store itself holds op with this status (as the API names it) and
 * owner_version. */
static void assert_stored(const site *st, const char *op, const char *status,
                          int64_t owner_version, int line)
{
    static const char *const api[] = {"admitted", "succeeded", "failed",
                                      "unknown", "needs_reconciliation"};
    og_operation o;

    if (store_read_op(st, op, &o) != 1)
        fail_msg("line %d: operation %s is not in the store", line, op);
    if ((unsigned)o.status >= sizeof api / sizeof api[0] ||
        strcmp(api[o.status], status) != 0 || o.owner_version != owner_version)
        fail_msg("line %d: the store holds %s at owner_version %lld; expected "
                 "%s at %lld", line, og_op_status_name(o.status),
                 (long long)o.owner_version, status, (long long)owner_version);
}

/* One recovery pass by another process on x's configuration, `oncegate
 * recover --config FILE --once`; it must exit 0. Its counts (a new
 * reference). */
static json_t *recover_once(const xenv *x)
{
    char out[PATHLEN], err[PATHLEN], *text;
    char *argv[] = {(char *)g_bin, "recover", "--config", x->st->config,
                    "--once", NULL};
    unsigned n = ++g_srv_seq;
    json_t *j;
    int code;

    snprintf(out, sizeof out, "%s/recover-%03u.out", g_tmp, n);
    snprintf(err, sizeof err, "%s/recover-%03u.log", g_tmp, n);
    outfile_add(out, OUT_STDOUT);
    outfile_add(err, OUT_LOG_JSON);
    code = t_proc_run(argv, out, err, READY_MS);
    text = t_slurp(out, NULL);
    j = text ? json_loads(text, 0, NULL) : NULL;
    if (code != 0 || !json_is_object(j)) {
        char *log = t_slurp(err, NULL);
        fprintf(stderr, "oncegate recover --once: exit %d\nstdout: %s\n"
                "stderr: %s\n", code, text ? text : "", log ? log : "");
        free(log);
        free(text);
        json_decref(j);
        fail_msg("oncegate recover --once did not complete a pass");
    }
    free(text);
    return j;
}

/* Ends op's execution lease (lease_until moved an hour back: its owner has
 * been away that long) and runs one recovery pass, which must take op over
 * and record `recorded` ("succeeded", "needs_reconciliation"; never
 * "failed"), resubmitting `resubmitted` times. */
static void recover_after_lease(xenv *x, const char *op, const char *recorded,
                                int resubmitted)
{
    json_t *c;

    op_shift_time(x, op, "lease_until", -3600);
    c = recover_once(x);
    if (jint(c, "taken") != 1 || jint(c, recorded) != 1 ||
        jint(c, "resubmitted") != resubmitted || jint(c, "failed") != 0 ||
        jint(c, "errors") != 0) {
        char *text = json_dumps(c, JSON_COMPACT);
        fprintf(stderr, "recovery pass: %s\n", text ? text : "");
        free(text);
        json_decref(c);
        fail_msg("recovery did not take %s over and record %s once with %d "
                 "resubmission(s)", op, recorded, resubmitted);
    }
    json_decref(c);
}

/* op as recovery left it after ONE takeover (owner_version 2) that
 * recorded `to` (with reason, when not NULL): the caller's GET on s (body
 * kept in *r) and the store's own record agree, and the history is
 * admitted (v1) -> takeover (recovery, v2) -> outcome `to` (recovery, v2):
 * nothing the original handler tried after its admission was recorded. */
static void assert_recovered(hres *r, const xenv *x, const srv *s,
                             const char *op, const char *to,
                             const char *reason, int line)
{
    json_t *h, *e;

    assert_op_status(r, s, op, to);
    h = history_of(r, false, line);
    if (json_array_size(h) != 3 || jint(r->json, "owner_version") != 2) {
        dump("operation", r, line);
        fail_msg("line %d: expected owner_version 2 and 3 history entries",
                 line);
    }
    e = json_array_get(h, 1);
    assert_str(jstr(e, "kind"), "takeover");
    assert_str(jstr(e, "actor"), "recovery");
    assert_int_equal(jint(e, "owner_version"), 2);
    e = json_array_get(h, 2);
    assert_str(jstr(e, "kind"), "outcome");
    assert_str(jstr(e, "to"), to);
    assert_str(jstr(e, "actor"), "recovery");
    assert_int_equal(jint(e, "owner_version"), 2);
    if (reason)
        assert_str(jstr(e, "reason"), reason);
    assert_stored(x->st, op, to, 2, line);
}

/* What s's handler logged about executing op: the provider's answer class
 * and what became of it ("record_superseded", "record_failed", ...). */
static void assert_handler_logged(const srv *s, const char *op,
                                  const char *provider_class,
                                  const char *execution, int line)
{
    json_t *ev = log_request_find(s, "operation_id", op, "execution", 10000);

    if (!ev || !jstr(ev, "provider_class") || !jstr(ev, "execution") ||
        strcmp(jstr(ev, "provider_class"), provider_class) != 0 ||
        strcmp(jstr(ev, "execution"), execution) != 0) {
        char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
        fprintf(stderr, "line %d: execution event: %s\n", line,
                text ? text : "(none)");
        free(text);
        json_decref(ev);
        fail_msg("line %d: expected provider_class %s and execution %s",
                 line, provider_class, execution);
    }
    json_decref(ev);
}

/* The id of the one credit the sandbox holds under key op. */
static void sbx_only_credit(const xenv *x, const char *op, char *id, size_t n)
{
    char path[128];
    json_t *credits;
    hres r;

    snprintf(path, sizeof path, "/v1/credits?idempotency_key=%s", op);
    sbx_http(&r, x->sbx, "GET", path, sbx_key(x), NULL);
    assert_http(&r, 200);
    credits = json_object_get(r.json, "credits");
    if (json_array_size(credits) != 1) {
        dump("credits", &r, __LINE__);
        fail_msg("expected exactly one credit under key %s", op);
    }
    snprintf(id, n, "%s", jstr(json_array_get(credits, 0), "id"));
    hres_free(&r);
}

/* An admission committed with its acknowledgment lost (docs/design.md,
 * "Which failures the guarantee survives"). PostgreSQL: the
 * relay passes the admission to the server, which commits it, and drops
 * every reply, so the server's client deadline cancels and discards the
 * connection. SQLite has no connection between the commit and its caller:
 * the admit_ack_lost fault point (lib/core/fault.c) answers
 * OG_ESTORE_UNAVAILABLE after the COMMIT succeeded, so the SQLite run
 * needs a build with -Dfault_injection=true and skips without one. */
void admission_committed_with_its_acknowledgment_lost_bills_nothing_and_the_retry_gets_the_status(
    void **state)
{
    char op[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1], jti[OG_GRANT_ID_LEN + 1];
    og_grant_claims c;
    og_operation o;
    char *tok;
    grant warm;
    xenv x;
    hres r;

    if (!g_pg && !OG_TEST_FAULT_INJECTION) {
        fprintf(stderr, "skipped: SQLite needs the admit_ack_lost fault "
                        "point (meson configure -Dfault_injection=true)\n");
        skip();
    }
    /* Validation without leeway, so the grant expires within the test; one
     * store connection, so the admission runs on the one that already ran
     * the admission statement (PostgreSQL prepares it on first use, and a
     * muted relay would drop that reply instead); recovery only when the
     * test runs it. */
    xenv_prepare(&x, "exec-ack-lost", true, 1000, 0, false);
    site_timing(x.st, "admission_leeway_ms", 0);
    json_object_set_new(x.st->conf, "pool_size", json_integer(1));
    json_object_set_new(x.st->conf, "recovery_loop", json_false());
    assert_int_equal(site_write(x.st), 0);
    if (!g_pg)
        srv_setenv(x.s, "OG_FAULT=admit_ack_lost");
    assert_int_equal(srv_start(x.s), 0);
    issue_grant_account(x.s, &warm, ACCOUNT);
    post(&r, x.s, "/v1/grants/revoke", KEY(P_REVOKER),
         json_pack("{s:s}", "token", warm.token));
    assert_http(&r, 200);
    hres_free(&r);
    uuid4(op);
    execute(&r, x.s, op, warm.token, ACCOUNT); /* refused: nothing commits */
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);

    /* A grant valid for 3 to 4 more seconds. */
    claims_default(&c, jti);
    c.exp = c.iat + 4;
    tok = sign(&c);
    uuid4(op);
    if (g_pg)
        relay_mode(x.st->relay, false, false, true);
    execute(&r, x.s, op, tok, ACCOUNT);
    if (g_pg)
        relay_mode(x.st->relay, false, false, false);
    assert_retry_later(&r, __LINE__);
    hres_free(&r);
    /* Committed all the same, and billing was not called. */
    assert_stored(x.st, op, "admitted", 1, __LINE__);
    assert_int_equal(store_read_op(x.st, op, &o), 1);
    assert_str(o.grant_id, jti);
    assert_str(o.caller_id, "agent-1");
    assert_sbx_stat(&x, "create_requests", 0);

    /* The same operation: the admitted operation, no second claim, no
     * billing call (only recovery calls the provider for it now). */
    execute(&r, x.s, op, tok, ACCOUNT);
    assert_pending(&r, op, "admitted", "already_admitted", __LINE__);
    hres_free(&r);
    /* Another operation id: refused, and nothing of it is stored. */
    uuid4(op2);
    execute(&r, x.s, op2, tok, ACCOUNT);
    assert_error(&r, 409, "grant_not_available");
    hres_free(&r);
    assert_int_equal(store_read_op(x.st, op2, &o), 0);
    assert_sbx_stat(&x, "create_requests", 0);

    /* Past the grant's expiry: validation refuses the retry, and the caller
     * still reads its operation. */
    while ((int64_t)time(NULL) < c.exp)
        t_sleep_ms(50);
    execute(&r, x.s, op, tok, ACCOUNT);
    assert_error(&r, 403, "grant_not_valid");
    assert_str(jstr(r.json, "reason"), "grant.expired");
    hres_free(&r);
    assert_op_status(&r, x.s, op, "admitted");
    assert_int_equal(jint(r.json, "owner_version"), 1);
    assert_int_equal(json_array_size(history_of(&r, false, __LINE__)), 1);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 0);
    assert_sbx_stat(&x, "credits_created", 0);
    free(tok);

    /* Recovery, not a retry, takes it from there: its lookup finds nothing,
     * and the default table declares atomic same-key handling, so it sends
     * the create (the operation id as key) once, before submit_by. */
    recover_after_lease(&x, op, "succeeded", 1);
    assert_recovered(&r, &x, x.s, op, "succeeded", NULL, __LINE__);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "lookups", 1);
}

void billing_success_then_failure_to_record_it_is_pending_and_recovery_makes_it_succeeded_with_one_credit(
    void **state)
{
    char op[OG_UUID_LEN + 1], ref[128];
    xinflight *a;
    xenv x;
    grant g;
    hres r;

    xenv_prepare(&x, "exec-record-lost", true, 1000, 0, false);
    json_object_set_new(x.st->conf, "recovery_loop", json_false());
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(srv_start(x.s), 0);
    issue_grant_account(x.s, &g, ACCOUNT);
    /* The credit is created at once; its answer comes 1.5 s later, by which
     * time the store is gone. */
    sbx_arm(&x, "delay_after_effect", 1500);
    uuid4(op);
    a = xinflight_start(x.s, op, g.token);
    sbx_wait_stat(&x, "credits_created", 1);
    store_down(x.st);
    xinflight_join(a);
    store_up(x.st);
    assert_pending(&a->r, op, "admitted", "admitted", __LINE__);
    xinflight_free(a);
    assert_handler_logged(x.s, op, "succeeded", "record_failed", __LINE__);
    assert_stored(x.st, op, "admitted", 1, __LINE__);
    assert_op_status(&r, x.s, op, "admitted");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "lookups", 0);

    /* Recovery finds the credit by lookup: Succeeded, no second create. */
    recover_after_lease(&x, op, "succeeded", 0);
    assert_recovered(&r, &x, x.s, op, "succeeded", NULL, __LINE__);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "lookups", 1);
    sbx_only_credit(&x, op, ref, sizeof ref); /* a lookup of the test's */
    assert_str(jstr(r.json, "provider_reference"), ref);
    hres_free(&r);
    /* The caller's retry now gets the recorded verdict, with no call. */
    execute(&r, x.s, op, g.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "succeeded");
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
}

/* The original handler's execution a, answered after recovery recorded
 * `to` (reason, when not NULL) at owner_version 2: its late write, of the
 * provider answer class provider_class, was refused (record_superseded),
 * the caller got 202 pending (status admitted, as at admission), and the
 * operation is as recovery left it. Frees a. */
static void assert_late_write_lost(xinflight *a, const xenv *x, const char *op,
                                   const char *provider_class, const char *to,
                                   const char *reason, int line)
{
    hres r;

    xinflight_join(a);
    assert_pending(&a->r, op, "admitted", "admitted", line);
    xinflight_free(a);
    assert_handler_logged(x->s, op, provider_class, "record_superseded",
                          line);
    assert_recovered(&r, x, x->s, op, to, reason, line);
    hres_free(&r);
}

/* Handler A really paused (SIGSTOP) while its create call is in flight (the
 * sandbox holds its answer back after the effect); its lease ends; B's
 * recovery loop takes the operation over (owner_version 2), finds the
 * credit and records Succeeded; then A resumes and tries to record what its
 * call produced, at owner_version 1. Store timeout 1 s, provider timeout
 * P; end_lease_now moves lease_until back instead of waiting the lease
 * (3 x 1 s + P + 0.5 s) out. */
static void paused_handler_resumes_after_recovery(json_int_t P,
                                                  bool end_lease_now,
                                                  const char *late_class)
{
    char op[OG_UUID_LEN + 1];
    int64_t t0;
    xinflight *a;
    xenv x;
    grant g;
    hres r;
    srv *b;

    xenv_prepare(&x, "exec-paused", false, 1000, P, false);
    site_exec_timings(x.st, 1000, P);
    assert_int_equal(site_write(x.st), 0);
    assert_int_equal(srv_start(x.s), 0);
    b = site_server(x.st);
    assert_int_equal(srv_start(b), 0);
    issue_grant_account(x.s, &g, ACCOUNT);
    sbx_arm(&x, "delay_after_effect", 2000);
    uuid4(op);
    t0 = t_now_ms();
    a = xinflight_start(x.s, op, g.token);
    sbx_wait_stat(&x, "create_requests", 1);
    assert_int_equal(kill(x.s->pid, SIGSTOP), 0);
    if (end_lease_now)
        op_shift_time(&x, op, "lease_until", -3600);
    wait_op_status(b, op, "succeeded");
    assert_recovered(&r, &x, b, op, "succeeded", NULL, __LINE__);
    hres_free(&r);
    if (end_lease_now && t_now_ms() - t0 > P - 1000)
        fail_msg("recovery took %lld ms: A would resume past its provider "
                 "timeout (%lld ms)", (long long)(t_now_ms() - t0),
                 (long long)P);
    assert_int_equal(kill(x.s->pid, SIGCONT), 0);
    assert_late_write_lost(a, &x, op, late_class, "succeeded", NULL, __LINE__);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "lookups", 1);
}

/* The pause with the lease ended at once: A resumes before its own provider
 * timeout (5 s from the call), reads the SUCCEEDED answer that arrived
 * while it was stopped, and its late Succeeded write changes nothing. */
void original_handler_paused_past_its_lease_loses_its_late_write(
    void **state)
{
    paused_handler_resumes_after_recovery(5000, true, "succeeded");
}

/* The pause waited out: A stays stopped until its lease (4.5 s) ends by
 * itself. When it resumes, its call is past its own timeout (1 s, shorter
 * than the lease: T4), so what it tries to record is Unknown: refused over
 * the recovered Succeeded. */
void late_unknown_from_a_paused_handler_cannot_overwrite_a_recovered_succeeded(
    void **state)
{
    paused_handler_resumes_after_recovery(1000, false, "unknown");
}

/* The original create call is in flight at the sandbox (delay_before_effect
 * 3 s: nothing is done yet) when its lease ends and one recovery pass runs
 * (recording `recorded` with `resubmitted` creates); its lookup finds
 * nothing. The handler is held (SIGSTOP) during the pass only so that,
 * however slow the machine, it cannot record an answer before recovery's
 * takeover; it resumes well inside its 5 s provider timeout, gets the
 * sandbox's SUCCEEDED answer when the delay ends, and loses that write. */
static void recover_while_in_flight(xenv *x, const char *recorded,
                                    int resubmitted, const char *reason)
{
    char op[OG_UUID_LEN + 1];
    xinflight *a;
    grant g;
    hres r;

    issue_grant_account(x->s, &g, ACCOUNT);
    uuid4(op);
    sbx_arm(x, "delay_before_effect", 3000);
    a = xinflight_start(x->s, op, g.token);
    sbx_wait_faults_taken(x);
    assert_int_equal(kill(x->s->pid, SIGSTOP), 0);
    recover_after_lease(x, op, recorded, resubmitted);
    assert_int_equal(kill(x->s->pid, SIGCONT), 0);
    assert_recovered(&r, x, x->s, op, recorded, reason, __LINE__);
    hres_free(&r);
    assert_sbx_stat(x, "lookups", 1);
    assert_late_write_lost(a, x, op, "succeeded", recorded, reason, __LINE__);
}

/* A server with recovery left to the test, store_timeout 1 s and a 5 s
 * provider timeout (longer than the sandbox's 3 s delay: the original call
 * gets its answer). The sandbox hides new credits from lookups for a
 * minute (--visibility-delay-ms, an eventually consistent search), so
 * recovery's lookup finds nothing even on a machine so slow that the
 * original's delay ends first. */
static void xenv_start_in_flight(xenv *x, const char *name, bool atomic)
{
    static const char *const hidden[] = {"--visibility-delay-ms", "60000",
                                         NULL};
    static const char *const hidden_nonatomic[] = {
        "--visibility-delay-ms", "60000", "--no-atomic-same-key", NULL};

    xenv_prepare_sbx(x, name, false, 1000, 5000, false,
                     atomic ? hidden : hidden_nonatomic);
    if (!atomic)
        xenv_table_nonatomic(x);
    site_exec_timings(x->st, 1000, 5000);
    json_object_set_new(x->st->conf, "recovery_loop", json_false());
    assert_int_equal(site_write(x->st), 0);
    assert_int_equal(srv_start(x->s), 0);
}

/* A provider that does not document atomic handling of concurrent
 * same-key requests (sandbox --no-atomic-same-key, table atomic_same_key
 * false): recovery's lookup finds nothing while the original call is in
 * flight, and it records NeedsReconciliation — not Failed, and no create
 * request. The original call then takes effect (one credit), which is why:
 * Failed would have been false, a resubmission could have made two. */
void recovery_finds_nothing_while_the_original_call_may_be_in_flight_never_fails_it(
    void **state)
{
    xenv x;

    xenv_start_in_flight(&x, "exec-inflight-nonatomic", false);
    recover_while_in_flight(&x, "needs_reconciliation", 0,
                            "not_found_no_atomic_same_key");
    assert_sbx_stat(&x, "create_requests", 1); /* the original's only */
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "lookups", 1);
}

/* The same, with atomic same-key handling declared (the default sandbox and
 * table): recovery resubmits with the same key while the original call is
 * in flight; the sandbox creates one credit and answers the original from
 * its key (a replay), and recovery's Succeeded stands. */
void recovery_finds_nothing_with_atomic_same_key_resubmits_the_same_key_and_one_credit_results(
    void **state)
{
    xenv x;

    xenv_start_in_flight(&x, "exec-inflight-atomic", true);
    recover_while_in_flight(&x, "succeeded", 1, NULL);
    assert_sbx_stat(&x, "create_requests", 2);
    assert_sbx_stat(&x, "credits_created", 1);
    assert_sbx_stat(&x, "idempotent_replays", 1);
    assert_sbx_stat(&x, "lookups", 1);
}

/* A 409 grant_not_available that says nothing about the operation. */
static void assert_reveals_nothing(const hres *r, int line)
{
    const char *k;
    json_t *v;

    if (r->status != 409 || !jstr(r->json, "error") ||
        strcmp(jstr(r->json, "error"), "grant_not_available") != 0) {
        dump("reused operation id", r, line);
        fail_msg("line %d: expected 409 grant_not_available", line);
    }
    json_object_foreach(r->json, k, v) {
        (void)v;
        if (strcmp(k, "error") != 0 && strcmp(k, "message") != 0) {
            dump("reused operation id", r, line);
            fail_msg("line %d: the refusal carries \"%s\"", line, k);
        }
    }
}

void operation_id_reused_by_another_caller_or_with_other_details_is_409_reveals_nothing_and_bills_nothing(
    void **state)
{
    char op[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1], path[128], ref[128];
    og_operation o;
    grant g1, g2, g3;
    xenv x;
    hres r;

    xenv_start(&x, "exec-op-reused", false, LOADED_STORE_TIMEOUT_MS, 0, false);
    issue_grant_account(x.s, &g1, ACCOUNT);
    uuid4(op);
    execute(&r, x.s, op, g1.token, ACCOUNT);
    assert_http(&r, 200);
    assert_str(jstr(r.json, "status"), "succeeded");
    snprintf(ref, sizeof ref, "%s", jstr(r.json, "provider_reference"));
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);

    /* Another caller, with its own grant, names the same operation id. */
    issue_grant_for(x.s, &g2, "agent-2", ACCOUNT);
    execute_as(&r, x.s, KEY(P_AGENT2), op, g2.token, ACCOUNT);
    assert_reveals_nothing(&r, __LINE__);
    hres_free(&r);
    /* The same caller, with another grant for other details. */
    issue_grant_account(x.s, &g3, "A-2000");
    execute(&r, x.s, op, g3.token, "A-2000");
    assert_reveals_nothing(&r, __LINE__);
    hres_free(&r);
    /* The other caller cannot read it either: 404 like a missing one. */
    snprintf(path, sizeof path, "/v1/operations/%s", op);
    get(&r, x.s, path, KEY(P_AGENT2));
    assert_error(&r, 404, "not_found");
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 1);
    assert_sbx_stat(&x, "credits_created", 1);

    /* The operation is as it was. */
    assert_op_status(&r, x.s, op, "succeeded");
    assert_str(jstr(r.json, "provider_reference"), ref);
    assert_str(jstr(r.json, "account"), ACCOUNT);
    assert_str(jstr(r.json, "grant_id"), g1.grant_id);
    assert_int_equal(jint(r.json, "owner_version"), 1);
    assert_int_equal(json_array_size(history_of(&r, false, __LINE__)), 2);
    hres_free(&r);
    assert_stored(x.st, op, "succeeded", 1, __LINE__);
    assert_int_equal(store_read_op(x.st, op, &o), 1);
    assert_str(o.caller_id, "agent-1");
    assert_str(o.grant_id, g1.grant_id);

    /* Neither refusal spent its grant: each executes under a new id. */
    uuid4(op2);
    execute_as(&r, x.s, KEY(P_AGENT2), op2, g2.token, ACCOUNT);
    assert_http(&r, 200);
    hres_free(&r);
    uuid4(op2);
    execute(&r, x.s, op2, g3.token, "A-2000");
    assert_http(&r, 200);
    hres_free(&r);
    assert_sbx_stat(&x, "create_requests", 3);
    assert_sbx_stat(&x, "credits_created", 3);
}
