/*
 * payout_int.h — what lib/exec/payout.c shares with lib/exec/payout_run.c:
 * the configuration checks, so the runner refuses a configuration before
 * it starts a thread. Not API.
 */
#ifndef OG_EXEC_PAYOUT_INT_H
#define OG_EXEC_PAYOUT_INT_H

#include "oncegate/payout_exec.h"

/* 0 when c is complete and within its bounds (oncegate/payout_exec.h),
 * else OG_EINVAL. */
int og__payout_worker_cfg_check(const og_payout_worker_cfg *c);
int og__payout_reconciler_cfg_check(const og_payout_reconciler_cfg *c);

#endif
