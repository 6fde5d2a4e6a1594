/*
 * payout_runner.h — the payout pipeline inside `serve` and in
 * `oncegate payout-worker` (payout_runner.c), configured by the `payouts.`
 * rows of the one configuration table.
 */
#ifndef OG_SERVE_PAYOUT_RUNNER_H
#define OG_SERVE_PAYOUT_RUNNER_H

#include <stddef.h>

#include "http.h"

typedef struct og_srv_payouts og_srv_payouts;

/* Loads payouts.provider_table and starts the runner on srv->store
 * (borrowed: it must outlive the runner) with the configuration's
 * payouts.* and timings. 0 and *out, or a negative code with one line in
 * err (a missing URL or table, an unreadable table, the runner's refusal);
 * nothing is left running then. */
int og_srv_payouts_start(og_srv *srv, og_srv_payouts **out, char *err,
                         size_t errlen);

/* The runner, for its counters; NULL for NULL. */
og_payout_runner *og_srv_payouts_runner(og_srv_payouts *p);

/* Asks every thread to stop after what it is doing, and waits. NULL: no-op. */
void og_srv_payouts_stop(og_srv_payouts *p);

/* Stops and frees. NULL is a no-op. */
void og_srv_payouts_free(og_srv_payouts *p);

#endif /* OG_SERVE_PAYOUT_RUNNER_H */
