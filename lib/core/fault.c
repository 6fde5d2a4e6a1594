/*
 * fault.c — named fault-injection points for tests, compiled in only when
 * the build is configured with -Dfault_injection=true (meson_options.txt),
 * which defines OG_FAULT_INJECTION for the library. Release builds never
 * contain it: without the define og__fault() is a constant 0 and reads no
 * environment.
 *
 * Why it exists: some failures cannot be produced from outside the process.
 * "Admission committed, acknowledgment lost" on SQLite is one: the commit and
 * the caller are in the same process, with no network between them that a
 * test could cut (on PostgreSQL tests/serve/failures.c cuts the replies in a
 * TCP relay instead). A point asks og__fault(NAME) at the exact place the
 * failure would happen, and acts as if it did.
 *
 * With the define, a point fires when the environment variable OG_FAULT
 * holds NAME as one of its comma-separated entries ("admit_ack_lost" or
 * "x,admit_ack_lost"). Points:
 *   admit_ack_lost  lib/store/sqlite/admit.c, after an admission's COMMIT
 *                   succeeded: the admitted callers get
 *                   OG_ESTORE_UNAVAILABLE as if the acknowledgment was lost;
 *                   the commit stays (tests/serve/failures.c).
 *   consume_batch_ack_lost
 *                   lib/store/postgres/consume_batch.c (asked by
 *                   batch_run.c) and
 *                   lib/store/sqlite/admit.c, after a batch holding consume
 *                   verdicts committed: every row of the batch gets
 *                   OG_ESTORE_UNAVAILABLE; the commit stays
 *                   (tests/consume_batch.c).
 *   outcome_batch_ack_lost
 *                   lib/store/sqlite/admit.c and
 *                   lib/store/postgres/outcome_batch.c (asked by
 *                   batch_run.c), after a batch holding outcome writes
 *                   committed: every row of the batch gets
 *                   OG_ESTORE_UNAVAILABLE; the commit stays
 *                   (tests/outcome_batch.c).
 *   consume_batch_abort
 *                   lib/store/postgres/consume_batch.c (asked by
 *                   batch_run.c), before a batch's statement runs: the
 *                   statement counts as aborted whole, nothing of it ran,
 *                   and the round falls back to one statement per verdict
 *                   (tests/consume_batch.c).
 *   rotate_batch_ack_lost
 *                   lib/store/postgres/rotate_batch.c (asked by
 *                   batch_run.c) and
 *                   lib/store/sqlite/admit.c, after a batch holding ticket
 *                   rotations committed: every row of the batch gets
 *                   OG_ESTORE_UNAVAILABLE; the commit stays
 *                   (tests/rotate_batch.c).
 *   rotate_batch_abort
 *                   lib/store/postgres/rotate_batch.c (asked by
 *                   batch_run.c), before a batch's
 *                   statement runs: the statement counts as aborted whole,
 *                   nothing of it ran, and the round falls back to one
 *                   rotation per row (tests/rotate_batch.c).
 *   payout_decide_after_reservation, payout_decide_after_decision,
 *   payout_decide_before_commit
 *                   og_payout_decide (lib/store/payout.c, once for both
 *                   backends), after the reservation, after the decision
 *                   row, before COMMIT (tests/payouts_decide.c);
 *   payout_claim_before_commit, payout_resolve_before_commit
 *                   og_payout_claim and og_payout_resolve
 *                   (lib/store/payout_run.c, once for both backends), their
 *                   writes done, before COMMIT (tests/payouts_resolve.c);
 *                   the resolution's point also in og_payout_evidence and
 *                   og_payout_operator_resolve, which share its steps
 *                   (lib/store/payout_after.c).
 *                   Each payout point fails the call with
 *                   OG_ESTORE_UNAVAILABLE as if the store failed there, and
 *                   the transaction is rolled back (nothing of it stays).
 *   payout_claim_ack_lost, payout_start_ack_lost
 *                   og_payout_claim (lib/store/payout_run.c) after its
 *                   COMMIT succeeded, og_op_start (lib/store/exec.c) after
 *                   a payout attempt's Started write committed: the call
 *                   returns OG_ESTORE_UNAVAILABLE as if the acknowledgment
 *                   was lost; the write stays (tests/payouts_after.c).
 *   payout_claim_pause
 *                   og_payout_claim (lib/store/payout_run.c), before its
 *                   transaction begins: the call waits 1500 ms
 *                   (OG__FAULT_CLAIM_PAUSE_MS, why that value is there),
 *                   then runs as usual. It holds open the window between a
 *                   worker's validation and its claim, so a test consumes
 *                   the grant in it and the worker's claim is claim.lost
 *                   every time (tests/serve/payouts.c).
 *                   lib/store/store_int.h names them (OG__FAULT_*).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"

int og__fault(const char *name)
{
#ifdef OG_FAULT_INJECTION
    const char *v = getenv("OG_FAULT");
    size_t n = name ? strlen(name) : 0;

    if (!v || n == 0)
        return 0;
    for (const char *p = v; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
#else
    (void)name;
    return 0;
#endif
}
