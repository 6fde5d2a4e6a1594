/*
 * payout_after.c — a payout attempt after its send (oncegate/payout_store.h,
 * schema 11; docs/payouts.md, section 6): the reconciler's backoff, late
 * evidence, a return after completion and an operator's resolution of an
 * escalated attempt. Every input is checked here, before the store (S1).
 *
 * Late evidence and the operator's resolution are orchestrated as
 * og_payout_resolve is (S6): ONE WRITE transaction of the method table, a
 * record step, then what follows a recorded outcome (og__payout_follow,
 * payout_run.c: the binding and payout, the pure plan PP5, the writes, the
 * fault point), then commit or roll back — so the attempt's outcome, its
 * payout and its reservation move together or not at all. The backoff
 * and the return are ONE backend write each. What the backends guarantee
 * under it is M36 (store_int.h).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "store/dispatch.h"
#include "store/store_int.h"

int og_payout_reconcile_later(og_store *s, const char *operation_id,
                              int64_t expected_owner_version,
                              int64_t delay_us, const char *reason,
                              const char *actor, bool *deferred)
{
    char id[OG_UUID_LEN + 1];
    bool d = false;
    int rc;

    if (!s || !deferred || expected_owner_version < OG__INITIAL_OWNER_VERSION ||
        delay_us < 1000 || delay_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (!og__code_ok(reason, OG_REASON_MAX))
        return OG_EREASON;
    if (!og__code_ok(actor, OG_ID_MAX))
        return OG_EACTOR;
    if ((rc = s->m->payout_reconcile_later(s->impl, id, expected_owner_version,
                                           delay_us, reason, actor, &d)) == 0)
        *deferred = d;
    return rc;
}

/* Late evidence's steps in tx: the attempt, read under its lock; when it is
 * a payout attempt still Unknown, og_payout_resolve's steps expecting
 * Unknown at the version read. Anything else changes nothing. */
static int evidence_in(og_store *s, void *tx, const char *id,
                       const og_op_outcome *o, const char *source,
                       og_payout_resolution *out, bool *resolved)
{
    og_operation op;
    int rc;

    if ((rc = s->m->payout_attempt_read(s->impl, tx, id, &op)) < 0)
        return rc;
    if (rc == 0 || op.status != OG_OP_UNKNOWN) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_RECORDED; /* settled already */
        return 0;
    }
    if (op.kind != OG_OP_KIND_PAYOUT) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_ACTIVE;
        return 0;
    }
    return og__payout_resolve_in(s, tx, id, OG_OP_BIT(OG_OP_UNKNOWN),
                                 op.owner_version, o, source, out, resolved);
}

int og_payout_evidence(og_store *s, const og_payout_evidence_req *r,
                       og_payout_resolution *out)
{
    char id[OG_UUID_LEN + 1];
    og_payout_resolution res;
    og_op_outcome o;
    const char *source;
    bool resolved = false;
    void *tx;
    int rc;

    if (!s || !r || !out)
        return OG_EINVAL;
    if (og__uuid_normalize(r->operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (r->status != OG_OP_SUCCEEDED && r->status != OG_OP_FAILED &&
        r->status != OG_OP_NEEDS_RECONCILIATION)
        return OG_ETRANSITION;
    if (r->source && strcmp(r->source, OG_PAYOUT_EVIDENCE_LATE_RESPONSE) == 0)
        source = OG_PAYOUT_EVIDENCE_LATE_RESPONSE;
    else if (r->source &&
             strcmp(r->source, OG_PAYOUT_EVIDENCE_NOTIFICATION) == 0)
        source = OG_PAYOUT_EVIDENCE_NOTIFICATION;
    else
        return OG_EINVAL;
    o = (og_op_outcome){.status = r->status,
                        .reason = r->reason,
                        .provider_reference = r->provider_reference,
                        .actor = r->actor,
                        .evidence = r->evidence};
    if ((rc = og__op_outcome_check(OG_OP_BIT(OG_OP_UNKNOWN),
                                   OG__INITIAL_OWNER_VERSION, &o)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_WRITE, &tx)) != 0)
        return rc;
    rc = evidence_in(s, tx, id, &o, source, &res, &resolved);
    /* Only RESOLVED commits (S6). */
    if ((rc = s->m->txn_end(s->impl, tx, rc, resolved)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_return_record(og_store *s, const char *payout_id,
                            const char *provider_reference, const char *actor,
                            const char *evidence, bool *recorded)
{
    bool r = false;
    int rc;

    if (!s || !recorded)
        return OG_EINVAL;
    if (og__id_check(payout_id) != 0)
        return OG_EPAYOUT_ID;
    if (!og__code_ok(provider_reference, OG_ID_MAX))
        return OG_EPROVIDER_REFERENCE;
    if (!og__code_ok(actor, OG_ID_MAX))
        return OG_EACTOR;
    if (evidence && !og__evidence_ok(evidence))
        return OG_EEVIDENCE;
    if ((rc = s->m->payout_return(s->impl, payout_id, provider_reference,
                                  actor, evidence, &r)) == 0)
        *recorded = r;
    return rc;
}

/* The operator's steps in tx: a credit is not this function's (NOT_ACTIVE:
 * og_op_resolve's); og_op_resolve's conditional write with the NotApplied
 * guard (M36); then what follows it, as a resolution. */
static int operator_in(og_store *s, void *tx, const char *id,
                       const og_op_outcome *o, og_payout_resolution *out,
                       bool *resolved)
{
    og_operation op;
    bool recorded = false;
    int rc;

    if ((rc = s->m->payout_attempt_read(s->impl, tx, id, &op)) < 0)
        return rc;
    if (rc == 1 && op.kind != OG_OP_KIND_PAYOUT) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_ACTIVE;
        return 0;
    }
    if ((rc = s->m->payout_operator_record(
             s->impl, tx, id, o->status, o->actor, o->reason, o->evidence,
             o->provider_reference, &recorded)) != 0)
        return rc;
    if (!recorded) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_RECORDED;
        return 0;
    }
    return og__payout_follow(s, tx, id, o, out, resolved);
}

int og_payout_operator_resolve(og_store *s, const char *operation_id,
                               og_op_status to, const char *operator_id,
                               const char *reason, const char *evidence,
                               const char *provider_reference,
                               og_payout_resolution *out)
{
    char id[OG_UUID_LEN + 1];
    og_payout_resolution res;
    og_op_outcome o;
    bool resolved = false;
    void *tx;
    int rc;

    /* og_op_resolve's input checks, in its order. */
    if (!s || !out)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (to != OG_OP_SUCCEEDED && to != OG_OP_FAILED && to != OG_OP_NOT_APPLIED)
        return OG_ETRANSITION;
    if (!og__code_ok(operator_id, OG_ID_MAX))
        return OG_EACTOR;
    if (!og__code_ok(reason, OG_REASON_MAX))
        return OG_EREASON;
    if (!og__evidence_ok(evidence))
        return OG_EEVIDENCE;
    if (provider_reference && !og__code_ok(provider_reference, OG_ID_MAX))
        return OG_EPROVIDER_REFERENCE;
    o = (og_op_outcome){.status = to,
                        .reason = reason,
                        .provider_reference = provider_reference,
                        .actor = operator_id,
                        .evidence = evidence};
    memset(&res, 0, sizeof res);
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_WRITE, &tx)) != 0)
        return rc;
    rc = operator_in(s, tx, id, &o, &res, &resolved);
    /* Only RESOLVED commits (S6): NOT_RECORDED and NOT_ACTIVE roll the
     * operator's write back with everything else. */
    if ((rc = s->m->txn_end(s->impl, tx, rc, resolved)) != 0)
        return rc;
    *out = res;
    return 0;
}
