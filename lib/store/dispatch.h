/*
 * dispatch.h — what the store's files above the backends share: the store
 * object and the input checks more than one of them runs. Private to
 * lib/store/ (store.c, grants.c, exec.c, retention.c, redeem.c, payout.c,
 * payout_run.c); a backend never sees the store object, only its own impl.
 */
#ifndef OG_STORE_DISPATCH_H
#define OG_STORE_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store_int.h"

/* The store object og_store_open returns. */
struct og_store {
    const og__store_methods *m;
    void *impl;
    og_store_options opts;
    og_consumption_keys keys; /* S5 (store.c): as the store records them */
};

/* og_op_record's input checks, shared with og_payout_resolve: 0, or the
 * error og_op_record returns for it (OG_ETRANSITION, OG_EREASON, ...). */
int og__op_outcome_check(unsigned expected, int64_t expected_owner_version,
                         const og_op_outcome *o);

#endif /* OG_STORE_DISPATCH_H */
