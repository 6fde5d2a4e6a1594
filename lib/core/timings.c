/*
 * timings.c — the timing values in one place and the relations between them
 * (docs/design.md, "Timing values"). Pure.
 *
 * Relations, checked in this order (the first that fails is named):
 *   T1  0 <= admission_leeway <= 1 h: one bounded clock tolerance.
 *   T2  0 < store_timeout <= 1 h, 0 < provider_timeout <= 1 h,
 *       0 < lease_margin.
 *   T3  store_timeout < execution_lease - lease_margin: the store call
 *       timeout (MaySubmit and similar reads) is shorter than the lease
 *       minus its margin.
 *   T4  provider_timeout < execution_lease - lease_margin: the billing call
 *       timeout is shorter than the lease minus its margin.
 *   T5  execution_lease >= 3 x store_timeout + provider_timeout +
 *       lease_margin: the lease covers the admission commit, the MaySubmit
 *       read, the billing timeout, the outcome write and a margin.
 *   T6  recovery_lease >= 2 x provider_timeout + store_timeout: recovery's
 *       lease covers the lookup, a create call and recording.
 *   T7  submission_window > execution_lease + recovery_delay +
 *       recovery_lease: otherwise recovery could never resubmit.
 *   T8  submission_window <= provider_key_retention - provider_clock_margin:
 *       a create is never sent after the provider may have forgotten the key.
 *   T9  cleanup_margin > store_timeout + commit_bound + max_clock_step: a
 *       refusal record outlives every admission that could still commit
 *       (store_timeout is the server-side admission bound: statement_timeout,
 *       lock_timeout, transaction_timeout; commit_bound is the deployment's
 *       bound on the commit itself, which no server timeout covers).
 *   T10 0 < max_grant_lifetime <= 1 year.
 *   T11 0 <= issue_time_skew <= 1 h.
 *       Both bound the fallback revocation retention (T10, T11), so
 *       validators must enforce them and they may never shrink while grants
 *       are outstanding.
 *   T12 0 <= max_clock_step <= 1 h, recovery_delay > 0, and every value
 *       at most 1 year, so sums cannot overflow.
 */
#include "core/core_int.h"

#define SEC INT64_C(1000000)
#define YEAR (366 * 24 * 3600 * SEC)

void og_timings_default(og_timings *t)
{
    t->admission_leeway_us = 30 * SEC;
    t->execution_lease_us = 60 * SEC;
    t->lease_margin_us = 5 * SEC;
    t->submission_window_us = 3600 * SEC;
    t->store_timeout_us = 5 * SEC;
    t->provider_timeout_us = 10 * SEC;
    t->recovery_lease_us = 60 * SEC;
    t->recovery_delay_us = 10 * SEC;
    t->provider_key_retention_us = 24 * 3600 * SEC;
    t->provider_clock_margin_us = 300 * SEC;
    t->cleanup_margin_us = 300 * SEC;
    t->max_clock_step_us = 10 * SEC;
    t->max_grant_lifetime_us = 3600 * SEC;
    t->issue_time_skew_us = 30 * SEC;
    t->commit_bound_us = 0;
}

/* Every value within 0 .. 1 year, so the sums below cannot overflow. */
static int in_range(const og_timings *t)
{
    const int64_t v[] = {
        t->admission_leeway_us, t->execution_lease_us, t->lease_margin_us,
        t->submission_window_us, t->store_timeout_us, t->provider_timeout_us,
        t->recovery_lease_us, t->recovery_delay_us,
        t->provider_key_retention_us, t->provider_clock_margin_us,
        t->cleanup_margin_us, t->max_clock_step_us, t->max_grant_lifetime_us,
        t->issue_time_skew_us, t->commit_bound_us,
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < 0 || v[i] > YEAR)
            return 0;
    return 1;
}

int og_timings_check(const og_timings *t, const char **why)
{
    const char *fail = NULL;

    if (!t)
        fail = "timings missing";
    else if (!in_range(t))
        fail = "T12: every timing value must be between 0 and 1 year";
    else if (t->admission_leeway_us > 3600 * SEC)
        fail = "T1: admission_leeway must be between 0 and 1 hour";
    else if (t->store_timeout_us <= 0 || t->store_timeout_us > 3600 * SEC)
        fail = "T2: store_timeout must be positive and at most 1 hour";
    else if (t->provider_timeout_us <= 0 ||
             t->provider_timeout_us > 3600 * SEC)
        fail = "T2: provider_timeout must be positive and at most 1 hour";
    else if (t->lease_margin_us <= 0)
        fail = "T2: lease_margin must be positive";
    else if (t->store_timeout_us >= t->execution_lease_us - t->lease_margin_us)
        fail = "T3: store_timeout must be shorter than execution_lease minus "
               "lease_margin";
    else if (t->provider_timeout_us >=
             t->execution_lease_us - t->lease_margin_us)
        fail = "T4: provider_timeout (the billing call timeout) must be "
               "shorter than execution_lease minus lease_margin";
    else if (t->execution_lease_us < 3 * t->store_timeout_us +
                                         t->provider_timeout_us +
                                         t->lease_margin_us)
        fail = "T5: execution_lease must cover 3 x store_timeout (commit, "
               "MaySubmit, outcome write) + provider_timeout + lease_margin";
    else if (t->recovery_lease_us <
             2 * t->provider_timeout_us + t->store_timeout_us)
        fail = "T6: recovery_lease must cover 2 x provider_timeout (lookup, "
               "create) + store_timeout (recording)";
    else if (t->recovery_delay_us <= 0)
        fail = "T12: recovery_delay must be positive";
    else if (t->submission_window_us <= t->execution_lease_us +
                                            t->recovery_delay_us +
                                            t->recovery_lease_us)
        fail = "T7: submission_window must exceed execution_lease + "
               "recovery_delay + recovery_lease, or recovery can never "
               "resubmit";
    else if (t->submission_window_us >
             t->provider_key_retention_us - t->provider_clock_margin_us)
        fail = "T8: submission_window must not exceed provider_key_retention "
               "minus provider_clock_margin";
    else if (t->max_clock_step_us > 3600 * SEC)
        fail = "T12: max_clock_step must be at most 1 hour";
    else if (t->cleanup_margin_us <= t->store_timeout_us +
                                         t->commit_bound_us +
                                         t->max_clock_step_us)
        fail = "T9: cleanup_margin must exceed the admission bound "
               "(store_timeout) plus commit_bound plus max_clock_step";
    else if (t->max_grant_lifetime_us <= 0)
        fail = "T10: max_grant_lifetime must be positive and at most a year";
    else if (t->issue_time_skew_us > 3600 * SEC)
        fail = "T11: issue_time_skew must be between 0 and 1 hour";
    if (fail) {
        if (why)
            *why = fail;
        return OG_ETIMINGS;
    }
    return 0;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

void og_timings_fit(og_timings *t)
{
    int64_t need;

    /* T3..T5 with one extra second each, so strict inequalities hold. */
    need = 3 * t->store_timeout_us + t->provider_timeout_us +
           t->lease_margin_us + SEC;
    t->execution_lease_us = max64(t->execution_lease_us, need);
    t->recovery_lease_us = max64(t->recovery_lease_us,
                                 2 * t->provider_timeout_us +
                                     t->store_timeout_us);
    need = t->execution_lease_us + t->recovery_delay_us +
           t->recovery_lease_us + SEC;
    t->submission_window_us = max64(t->submission_window_us, need);
    t->provider_key_retention_us =
        max64(t->provider_key_retention_us,
              t->submission_window_us + t->provider_clock_margin_us);
    t->cleanup_margin_us = max64(t->cleanup_margin_us,
                                 t->store_timeout_us + t->commit_bound_us +
                                     t->max_clock_step_us + SEC);
}
