/*
 * timings.c — the timing values in one place and the relations between them
 * (seed 000, "The timing values in one place"). Pure.
 *
 * Relations checked here, for the values this build uses:
 *   T1  admission_leeway >= 0 and <= 1 h: one bounded clock tolerance.
 *   T2  store_timeout > 0.
 *   T3  execution_lease > 2 x store_timeout: the lease must cover the admission
 *       commit and the MaySubmit read before any provider call, with margin.
 *   T4  submission_window > execution_lease: otherwise recovery could never
 *       resubmit after taking over a stalled operation.
 *   T5  0 < max_grant_lifetime <= 1 year, T6 0 <= issue_time_skew <= 1 h:
 *       both bound the fallback revocation retention, so validators must
 *       enforce them and they may never shrink while grants are outstanding.
 * Later relations (provider timeout < lease − margin, window < provider key
 * retention, cleanup margin > admission bound) join this list with the
 * components that own those values.
 */
#include "og_internal.h"

#define SEC INT64_C(1000000)

void og_timings_default(og_timings *t)
{
    t->admission_leeway_us = 30 * SEC;
    t->execution_lease_us = 60 * SEC;
    t->submission_window_us = 3600 * SEC;
    t->store_timeout_us = 5 * SEC;
    t->max_grant_lifetime_us = 3600 * SEC;
    t->issue_time_skew_us = 30 * SEC;
}

int og_timings_check(const og_timings *t, const char **why)
{
    const char *fail = NULL;

    if (!t)
        fail = "timings missing";
    else if (t->admission_leeway_us < 0 || t->admission_leeway_us > 3600 * SEC)
        fail = "T1: admission_leeway must be between 0 and 1 hour";
    else if (t->store_timeout_us <= 0 || t->store_timeout_us > 3600 * SEC)
        fail = "T2: store_timeout must be positive and at most 1 hour";
    else if (t->execution_lease_us <= 2 * t->store_timeout_us)
        fail = "T3: execution_lease must exceed twice store_timeout";
    else if (t->submission_window_us <= t->execution_lease_us)
        fail = "T4: submission_window must exceed execution_lease";
    else if (t->max_grant_lifetime_us <= 0 ||
             t->max_grant_lifetime_us > 366 * 24 * 3600 * SEC)
        fail = "T5: max_grant_lifetime must be positive and at most a year";
    else if (t->issue_time_skew_us < 0 || t->issue_time_skew_us > 3600 * SEC)
        fail = "T6: issue_time_skew must be between 0 and 1 hour";
    if (fail) {
        if (why)
            *why = fail;
        return OG_ETIMINGS;
    }
    return 0;
}
