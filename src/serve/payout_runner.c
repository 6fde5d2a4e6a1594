/*
 * payout_runner.c — the payout pipeline (oncegate/payout_exec.h: workers,
 * the sweeper, the reconciler, the expiry of unused grants) as `serve`
 * runs it beside its HTTP edge when payouts.runner is on, and as
 * `oncegate payout-worker --config FILE` runs it alone. Every setting comes
 * from the one configuration table (the `payouts.` rows, relations R3-R7
 * checked by og_srv_config_check); docs/payouts.md, sections 5 and 6, is
 * the design.
 *
 * One log line per job a worker took ("payout_job"): correlation id,
 * payout, job, grant and attempt ids, the decision id once the grant was
 * read, the end and its reason code — never
 * a destination token, a grant token or the provider credential. The
 * credential file is read only when an attempt is about to be sent or
 * looked up (the library's callback), and wiped after.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "http.h"
#include "payout_runner.h"
#include "secret.h"

struct og_srv_payouts {
    og_provider_table *table;
    og_payout_runner *runner;
    char *api_key_file;                       /* NULL: no credential */
    int64_t backoff[OG_SRV_PAYOUTS_BACKOFF_MAX];
};

/* og_payout_credential_fn over the key file: its content with surrounding
 * white space trimmed; no file configured is an empty credential (none). */
static int payouts_credential(void *arg, char *out, size_t outlen)
{
    const og_srv_payouts *p = arg;

    if (outlen < 1)
        return -1;
    if (!p->api_key_file) {
        out[0] = '\0';
        return 0;
    }
    return og_secret_text_file_read(p->api_key_file, OG_PAYOUT_CREDENTIAL_MAX,
                                    out, outlen);
}

/* The runner's on_work: one line per job taken, identifiers and codes. */
static void payouts_on_work(void *arg, const og_payout_work *w)
{
    json_t *f;

    (void)arg;
    f = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:s, s:b,"
                  " s:b}",
                  "correlation_id", w->job.correlation_id, "payout_id",
                  w->job.payout_id, "job_id", w->job.job_id, "grant_id",
                  w->job.grant_id, "attempt_id", w->attempt_id, "end",
                  og_payout_work_end_name(w->end), "reason",
                  og_payout_worker_reason_name(w->reason), "delivery",
                  (json_int_t)w->job.delivery, "sends", w->sends,
                  "attempt_status", og_op_status_name(w->attempt_status),
                  "acknowledged", w->acknowledged, "security_signal",
                  w->security_signal);
    if (f && w->decision_id[0])
        json_object_set_new(f, "decision_id", json_string(w->decision_id));
    if (f && w->sends)
        json_object_set_new(f, "answer", json_string(w->answer.reason));
    if (f && w->error)
        json_object_set_new(f, "error", json_string(og_err_name(w->error)));
    og_log(w->security_signal ? OG_LOG_WARN : OG_LOG_INFO, "payout_job", f);
}

int og_srv_payouts_start(og_srv *srv, og_srv_payouts **out, char *err,
                         size_t errlen)
{
    const og_srv_config *c = &srv->cfg;
    const char *url = c->payouts_provider_url ? c->payouts_provider_url
                                              : c->provider_url;
    const char *key = c->payouts_api_key_file ? c->payouts_api_key_file
                                              : c->provider_api_key_file;
    og_provider_table_error terr;
    og_payout_runner_cfg rc;
    og_srv_payouts *p;
    int n, e;

    if (!url)
        return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                           "payouts.provider_url (or provider.url) is "
                           "required when the payout pipeline runs");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                           "payouts.provider_url: must start with http:// "
                           "or https://");
    if (!c->payouts_table)
        return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                           "payouts.provider_table is required when the "
                           "payout pipeline runs");
    /* The worker is a principal of its own: the one the configuration
     * names, holding the payout-worker role. */
    {
        bool found = false;

        for (size_t i = 0; i < c->n_principals; i++)
            if (strcmp(c->principals[i].id, c->payouts_worker_id) == 0 &&
                (c->principals[i].roles & OG_ROLE_PAYOUT_WORKER))
                found = true;
        if (!found)
            return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                               "payouts.worker_id: no principal \"%s\" with "
                               "the payout-worker role",
                               c->payouts_worker_id);
    }
    if (!(p = calloc(1, sizeof *p)))
        return og_srv_fail(err, errlen, OG_ENOMEM, "payouts",
                           "out of memory");
    n = og_srv_payouts_backoff(c->payouts_backoff, p->backoff,
                               OG_SRV_PAYOUTS_BACKOFF_MAX);
    if (n < 1) { /* og_srv_config_check refused it already */
        free(p);
        return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                           "payouts.backoff_ms: not a list of steps");
    }
    if (key && !(p->api_key_file = strdup(key))) {
        free(p);
        return og_srv_fail(err, errlen, OG_ENOMEM, "payouts",
                           "out of memory");
    }
    if (og_provider_table_load_file(c->payouts_table, &p->table, &terr) !=
        0) {
        og_srv_payouts_free(p);
        return og_srv_fail(err, errlen, OG_EINVAL, "payouts",
                           "payouts.provider_table: %s", terr.text);
    }

    memset(&rc, 0, sizeof rc);
    rc.worker.worker_id = c->payouts_worker_id;
    /* The grants' audience is the worker principal (serve's decisions
     * issue them to it): one source, whatever suffix each thread's
     * worker_id gets. */
    rc.worker.audience = c->payouts_worker_id;
    rc.worker.provider_url = url;
    rc.worker.table = p->table;
    rc.worker.credential = payouts_credential;
    rc.worker.credential_arg = p;
    rc.worker.job_lease_us = c->payouts_job_lease_us;
    rc.worker.attempt_lease_us = c->payouts_attempt_lease_us;
    rc.worker.send_window_us = c->payouts_send_window_us;
    rc.worker.provider_timeout_us = c->timings.provider_timeout_us;
    rc.worker.record_timeout_us = c->payouts_record_timeout_us;
    rc.worker.postpone_us = c->payouts_postpone_us;
    rc.worker.max_sends = c->payouts_max_sends;
    rc.worker.clock_error_us = c->payouts_clock_error_us;
    rc.workers = c->payouts_workers;
    rc.sweeper = rc.reconciler = rc.janitor = true;
    rc.reconcile.actor = "payout-reconciler";
    rc.reconcile.provider_url = url;
    rc.reconcile.table = p->table;
    rc.reconcile.credential = payouts_credential;
    rc.reconcile.credential_arg = p;
    rc.reconcile.backoff_us = p->backoff;
    rc.reconcile.backoff_n = n;
    rc.reconcile.escalate_after_us = c->payouts_escalate_after_us;
    rc.reconcile.max_per_pass = c->payouts_max_per_pass;
    rc.reconcile.provider_timeout_us = c->timings.provider_timeout_us;
    rc.sweeper_actor = "payout-sweeper";
    rc.sweep_limit = c->payouts_sweep_limit;
    rc.janitor_batch = c->janitor_batch;
    rc.janitor_max_batches = c->janitor_max_batches;
    rc.idle_wait_us = c->payouts_poll_us;
    rc.interval_us = c->payouts_interval_us;
    rc.on_work = payouts_on_work;
    if ((e = og_payout_runner_start(srv->store, &rc, &p->runner)) != 0) {
        og_srv_payouts_free(p);
        return og_srv_fail(err, errlen, e, "payouts",
                           "the payout pipeline did not start: %s",
                           og_err_name(e));
    }
    og_log(OG_LOG_INFO, "payouts_started",
           json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:I}", "worker_id",
                     c->payouts_worker_id, "audience", c->payouts_worker_id,
                     "workers", c->payouts_workers, "send_window_ms",
                     (json_int_t)(c->payouts_send_window_us / 1000),
                     "attempt_lease_ms",
                     (json_int_t)(c->payouts_attempt_lease_us / 1000),
                     "job_lease_ms",
                     (json_int_t)(c->payouts_job_lease_us / 1000),
                     "interval_ms",
                     (json_int_t)(c->payouts_interval_us / 1000)));
    og_metrics_payout_runner(p->runner);
    *out = p;
    return 0;
}

og_payout_runner *og_srv_payouts_runner(og_srv_payouts *p)
{
    return p ? p->runner : NULL;
}

void og_srv_payouts_stop(og_srv_payouts *p)
{
    if (p)
        og_payout_runner_stop(p->runner);
}

void og_srv_payouts_free(og_srv_payouts *p)
{
    if (!p)
        return;
    og_metrics_payout_runner(NULL);
    og_payout_runner_free(p->runner);
    og_provider_table_free(p->table);
    free(p->api_key_file);
    free(p);
}
