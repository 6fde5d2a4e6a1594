/*
 * janitor.c — the retention passes of `oncegate serve` and of the
 * `oncegate cleanup` / `oncegate archive-operations` commands
 * (docs/design.md, "Retention: refusal records and operation records"): ONE library call each, then its log line, its
 * metrics and, for the commands, its JSON summary on stdout.
 *
 * Two jobs, kept apart because they answer two questions:
 *   cleanup   refusal retention: consumption rows whose retain_until +
 *             cleanup_margin has passed (og_store_cleanup). The only job
 *             that may delete what refuses a grant, so it runs only where
 *             the server-side admission bound was checked at startup
 *             (server.c, open_store): cleanup_margin is measured against it
 *             (T9).
 *   archive   audit retention: finished operations older than
 *             operations.audit_retention_days, with their history
 *             (og_store_archive_operations), moved or deleted per the
 *             configured mode; never an operation recovery may still need.
 * Neither ever touches what the other keeps. The cleanup pass also runs
 * the payout grants' expiry (og_payout_expire_grants): the reservation of
 * every payout grant that expired unused is released, once, after the
 * last moment a claim could still succeed (docs/payouts.md, section 4,
 * "Expiry of an unused grant"). Log lines carry counts and
 * error codes only: nothing either job reads is a secret, and no store
 * text reaches a line.
 */
#include <inttypes.h>
#include <stdio.h>

#include "http.h"

#define DAY_US (86400 * INT64_C(1000000))

/* The archive job's mode: delete when configured so, else move. */
static og_archive_mode archive_mode(const og_srv *srv)
{
    return srv->cfg.retention_mode == OG_RETAIN_DELETE ? OG_ARCHIVE_DELETE
                                                       : OG_ARCHIVE_MOVE;
}

/* Milliseconds since start (monotonic), for summaries and logs. */
static int64_t elapsed_ms(int64_t start_us)
{
    return (og_http_mono_us() - start_us) / 1000;
}

/* A pass that failed: the log line and, when print, the summary line. The
 * rows of batches committed before the error stay deleted; the next pass
 * carries on. */
static void pass_failed(const char *job, int err, int64_t ms, bool print)
{
    og_log(OG_LOG_WARN, "retention_failed",
           json_pack("{s:s, s:s, s:I}", "job", job, "store_error",
                     og_err_name(err), "elapsed_ms", (json_int_t)ms));
    if (print) {
        printf("{\"job\":\"%s\",\"error\":\"%s\",\"elapsed_ms\":%" PRId64
               "}\n",
               job, og_err_name(err), ms);
        fflush(stdout);
    }
}

/* The payout grants' expiry, after the cleanup of the same pass: its own
 * call, its own log line and summary; a failure is logged and the next
 * pass carries on (committed batches stay). */
static int payout_expiry_pass(og_srv *srv, bool print)
{
    og_payout_expiry_stats st;
    int64_t start = og_http_mono_us(), ms;
    int rc = og_payout_expire_grants(srv->store, srv->cfg.janitor_batch,
                                     srv->cfg.janitor_max_batches, &st);

    ms = elapsed_ms(start);
    if (rc != 0) {
        pass_failed("payout-expiry", rc, ms, print);
        return rc;
    }
    if (st.grants > 0 || print)
        og_log(OG_LOG_INFO, "payout_expiry",
               json_pack("{s:I, s:i, s:I}", "grants", (json_int_t)st.grants,
                         "batches", st.batches, "elapsed_ms",
                         (json_int_t)ms));
    if (print) {
        printf("{\"job\":\"payout-expiry\",\"grants\":%" PRId64
               ",\"batches\":%d,\"elapsed_ms\":%" PRId64 "}\n",
               st.grants, st.batches, ms);
        fflush(stdout);
    }
    return 0;
}

int og_srv_cleanup_pass(og_srv *srv, bool print)
{
    og_cleanup_stats st;
    int64_t start = og_http_mono_us(), ms, deleted;
    /* One call for the whole pass: its batches share one keyset cursor
     * (a pass cut into several calls walked PostgreSQL's dead index
     * entries again at every call: 4x slower over a million rows). */
    int rc = og_store_cleanup(srv->store, srv->cfg.janitor_batch,
                              srv->cfg.janitor_max_batches, &st);

    ms = elapsed_ms(start);
    if (rc != 0) {
        pass_failed("cleanup", rc, ms, print);
        return rc;
    }
    og_metrics_cleanup(&st, og_http_mono_us() - start);
    deleted = st.admissions + st.revocations + st.consumes;
    if (deleted > 0 || print)
        og_log(OG_LOG_INFO, "cleanup",
               json_pack("{s:I, s:I, s:I, s:I, s:i, s:I}", "deleted",
                         (json_int_t)deleted, "admissions",
                         (json_int_t)st.admissions, "revocations",
                         (json_int_t)st.revocations, "consumes",
                         (json_int_t)st.consumes, "batches", st.batches,
                         "elapsed_ms", (json_int_t)ms));
    if (print) {
        printf("{\"job\":\"cleanup\",\"deleted\":%" PRId64
               ",\"admissions\":%" PRId64 ",\"revocations\":%" PRId64
               ",\"consumes\":%" PRId64 ",\"batches\":%d,\"elapsed_ms\":%" PRId64
               "}\n",
               deleted, st.admissions, st.revocations, st.consumes,
               st.batches, ms);
        fflush(stdout);
    }
    return payout_expiry_pass(srv, print);
}

int og_srv_archive_pass(og_srv *srv, bool print)
{
    og_archive_mode mode = archive_mode(srv);
    const char *mode_name = mode == OG_ARCHIVE_DELETE ? "delete" : "archive";
    og_archive_stats st;
    int64_t start = og_http_mono_us(), ms;
    int rc = og_store_archive_operations(
        srv->store, (int64_t)srv->cfg.audit_retention_days * DAY_US, mode,
        srv->cfg.janitor_batch, srv->cfg.janitor_max_batches, &st);

    ms = elapsed_ms(start);
    if (rc != 0) {
        pass_failed("archive", rc, ms, print);
        return rc;
    }
    og_metrics_archived(mode, st.operations);
    if (st.operations > 0 || print)
        og_log(OG_LOG_INFO, "archive",
               json_pack("{s:s, s:I, s:I, s:i, s:i, s:I}", "mode", mode_name,
                         "operations", (json_int_t)st.operations, "events",
                         (json_int_t)st.events, "batches", st.batches,
                         "older_than_days", srv->cfg.audit_retention_days,
                         "elapsed_ms", (json_int_t)ms));
    if (print) {
        printf("{\"job\":\"archive\",\"mode\":\"%s\",\"operations\":%" PRId64
               ",\"events\":%" PRId64 ",\"batches\":%d,\"older_than_days\":%d"
               ",\"elapsed_ms\":%" PRId64 "}\n",
               mode_name, st.operations, st.events, st.batches,
               srv->cfg.audit_retention_days, ms);
        fflush(stdout);
    }
    return 0;
}
