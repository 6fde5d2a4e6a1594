/*
 * oncegate.h — the public C API of oncegate: an application includes this
 * header, which includes every other. Anything not declared in
 * include/oncegate/ is not API.
 *
 * oncegate admits a signed single-use grant at most once across every
 * instance, retry and restart: ONE atomic conditional write in a shared,
 * durable store claims the grant key (issuer, grant_id) and records the
 * operation intent in the same statement. See docs/design.md for the
 * guarantee and its boundaries.
 *
 * The API is one header per layer of the library, and a layer's header
 * includes only the headers of the layers below it (tools/check_layers.py
 * checks it on every build):
 *
 *   core      oncegate/core.h      errors, limits, timings, the records and
 *                                  their names, small pure helpers
 *             oncegate/payout.h    a payout's terms, fingerprint and policy
 *             oncegate/classify.h  what a provider's answer means
 *             oncegate/execute.h   an owner's next step (pure decisions)
 *   token     oncegate/grant.h     keys, grant tokens, the validator
 *   store     oncegate/store.h     the store: admission, execution writes,
 *                                  retention, redemption points, the grant
 *                                  lifecycle
 *             oncegate/payout_store.h  the payout store
 *   provider  oncegate/provider.h  the provider client (libcurl)
 *   exec      oncegate/exec.h      one create and its record for every
 *                                  owner (og_exec_drive, og_exec_admit),
 *                                  a recovery pass (og_recover_once)
 *             oncegate/redeem.h    redeeming an external single-use token
 *             oncegate/payout_exec.h  the payout worker, sweeper,
 *                                  reconciler and their runner
 *
 * Conventions:
 *  - Functions return 0 (or a documented non-negative outcome) on success and
 *    a negative OG_E* code on error. og_strerror() and og_err_name() describe
 *    a code; both are generated from the one list OG_ERRNO_MAP.
 *  - An expected outcome (admitted, already admitted, refused) is a value the
 *    caller must handle, never an error.
 *  - Out-parameters are written only on success.
 *  - og_x_free(NULL) is a no-op.
 *  - Every string the API takes is borrowed for the duration of the call;
 *    every record it returns is a plain struct with fixed-size buffers the
 *    caller owns.
 */
#ifndef ONCEGATE_H
#define ONCEGATE_H

#include "oncegate/classify.h"
#include "oncegate/core.h"
#include "oncegate/exec.h"
#include "oncegate/execute.h"
#include "oncegate/grant.h"
#include "oncegate/payout.h"
#include "oncegate/payout_exec.h"
#include "oncegate/payout_store.h"
#include "oncegate/provider.h"
#include "oncegate/redeem.h"
#include "oncegate/store.h"

#endif /* ONCEGATE_H */
