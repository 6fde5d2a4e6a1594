/*
 * payout_run.c — what runs a decided payout (oncegate/payout_store.h): the
 * jobs (take, acknowledge, postpone, resubmit), the payout grants (read,
 * revoke, expire), the claim and the resolution. Every input is checked
 * here, before the store (S1).
 *
 * The claim and the resolution are orchestrated here, once for both
 * backends (S6, S8): one WRITE transaction of the method table each, the
 * backend's steps (M34, M35) and the pure plan between them. Every other
 * call is one backend write (M27, M32, M33); the expiry loops as
 * retention does (S4). dispatch.h states S1, S4, S6 and S8.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/dispatch.h"
#include "store/store_int.h"
#include "token/token_int.h"

static int job_id_check(const char *in, char out[OG_UUID_LEN + 1])
{
    return og__uuid_normalize(in, out) == 0 ? 0 : OG_EPAYOUT_JOB;
}

int og_payout_job_take(og_store *s, int64_t lease_us, og_payout_job *out)
{
    og_payout_job j;
    int rc;

    if (!s || !out || lease_us < 1000 || lease_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    memset(&j, 0, sizeof j);
    rc = s->m->payout_job_take(s->impl, lease_us, &j);
    if (rc == 1)
        *out = j;
    return rc;
}

int og_payout_job_ack(og_store *s, const char *job_id, int64_t delivery,
                      bool *acked)
{
    char id[OG_UUID_LEN + 1];
    bool a = false;
    int rc;

    if (!s || !acked || delivery < 1)
        return OG_EINVAL;
    if ((rc = job_id_check(job_id, id)) != 0)
        return rc;
    if ((rc = s->m->payout_job_ack(s->impl, id, delivery, &a)) == 0)
        *acked = a;
    return rc;
}

int og_payout_job_postpone(og_store *s, const char *job_id, int64_t delivery,
                           int64_t delay_us, bool *postponed)
{
    char id[OG_UUID_LEN + 1];
    bool p = false;
    int rc;

    if (!s || !postponed || delivery < 1 || delay_us < 0 ||
        delay_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    if ((rc = job_id_check(job_id, id)) != 0)
        return rc;
    if ((rc = s->m->payout_job_postpone(s->impl, id, delivery, delay_us,
                                        &p)) == 0)
        *postponed = p;
    return rc;
}

int og_payout_job_resubmit(og_store *s, const char *job_id, const char *actor,
                           char new_job_id[OG_UUID_LEN + 1])
{
    char id[OG_UUID_LEN + 1], fresh[OG_UUID_LEN + 1];
    int rc;

    if (!s || !new_job_id)
        return OG_EINVAL;
    if ((rc = job_id_check(job_id, id)) != 0)
        return rc;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    if ((rc = og__uuid_new(fresh)) != 0)
        return rc;
    rc = s->m->payout_job_resubmit(s->impl, id, actor, fresh);
    if (rc == 1)
        memcpy(new_job_id, fresh, sizeof fresh);
    return rc == 2 ? OG_EINTERNAL : rc; /* a fresh id is never taken */
}

int og_payout_job_resubmit_keyed(og_store *s, const char *job_id,
                                 const char *key, const char *actor,
                                 char new_job_id[OG_UUID_LEN + 1])
{
    char id[OG_UUID_LEN + 1], k[OG_UUID_LEN + 1];
    int rc;

    if (!s || !new_job_id)
        return OG_EINVAL;
    if ((rc = job_id_check(job_id, id)) != 0 ||
        (rc = job_id_check(key, k)) != 0)
        return rc;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    rc = s->m->payout_job_resubmit(s->impl, id, actor, k);
    if (rc == 1 || rc == 2)
        memcpy(new_job_id, k, sizeof k);
    return rc;
}

int og_payout_grant_get(og_store *s, const char *grant_id,
                        og_payout_grant_view *out)
{
    og_payout_grant_view v;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__id_check(grant_id) != 0)
        return OG_EGRANT_ID;
    memset(&v, 0, sizeof v);
    rc = s->m->payout_grant_get(s->impl, grant_id, &v);
    if (rc == 1)
        *out = v;
    return rc;
}

int og_payout_grant_revoke(og_store *s, const char *grant_id,
                           const char *actor, og_revoke_outcome *out)
{
    og__payout_revoke_report rep = {false, false};
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__id_check(grant_id) != 0)
        return OG_EGRANT_ID;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    if ((rc = s->m->payout_grant_revoke(s->impl, grant_id, actor, &rep)) == 0)
        *out = og__payout_revoke_outcome(&rep);
    return rc;
}

/* The claim's steps, in tx (S8): the facts, held until the commit; the
 * pure verdict (PP4); for CLAIMED only, the writes and the fault point.
 * *claimed: the transaction is to commit — nothing else wrote anything. */
static int claim_in(og_store *s, void *tx, const og__payout_claim_req *r,
                    og_payout_claim_result *out, bool *claimed)
{
    og__payout_claim_facts f;
    og__payout_claim_plan p;
    int rc;

    if ((rc = s->m->payout_claim_facts(s->impl, tx, r->grant_id, &f)) != 0 ||
        (rc = og__payout_plan_claim(&f, r, &p)) != 0)
        return rc;
    out->outcome = p.outcome;
    if (f.found) {
        memcpy(out->payout_id, f.payout_id, sizeof out->payout_id);
        out->attempt_number = f.attempt_number;
    }
    if (p.outcome == OG_PAYOUT_CLAIM_DUPLICATE)
        memcpy(out->attempt.operation_id, f.consumed_by,
               sizeof out->attempt.operation_id);
    if (p.outcome != OG_PAYOUT_CLAIM_CLAIMED)
        return 0;
    if ((rc = s->m->payout_claim_write(s->impl, tx, r, &f, &p,
                                       &out->attempt)) != 0)
        return rc;
    if (og__fault(OG__FAULT_CLAIM_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    out->has_attempt = true;
    *claimed = true;
    return 0;
}

/* The fault point payout_claim_pause: the claim waits before it begins,
 * as a slow worker would between its validation and its claim. */
static void claim_pause(void)
{
    struct timespec ts = {OG__FAULT_CLAIM_PAUSE_MS / 1000,
                          (OG__FAULT_CLAIM_PAUSE_MS % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* S8: the claim, checked, then ONE transaction. */
int og_payout_claim(og_store *s, const og_payout_claim_req *c,
                    og_payout_claim_result *out)
{
    og__payout_claim_req r;
    og_payout_claim_result res;
    bool claimed = false;
    void *tx;
    int rc;

    if (!s || !c || !out)
        return OG_EINVAL;
    if (og__id_check(c->grant_id) != 0)
        return OG_EGRANT_ID;
    if (og__id_check(c->worker_id) != 0)
        return OG_EACTOR;
    if (og__id_check(c->audience) != 0 || og__id_check(c->policy_version) != 0 ||
        c->relied.tenant_settings < 1 || c->relied.beneficiary < 1 ||
        c->relied.destination < 1 || c->relied.payout < 1 ||
        c->send_window_us < 1000 || c->send_window_us > OG_PAYOUT_LEASE_MAX_US ||
        c->lease_us < 1000 || c->lease_us > OG_PAYOUT_LEASE_MAX_US ||
        c->final_absence_margin_us < -1 ||
        c->final_absence_margin_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    memset(&r, 0, sizeof r);
    og__idcpy(r.grant_id, c->grant_id);
    og__idcpy(r.worker_id, c->worker_id);
    og__idcpy(r.audience, c->audience);
    og__idcpy(r.policy_version, c->policy_version);
    r.relied = c->relied;
    r.send_window_us = c->send_window_us;
    r.lease_us = c->lease_us;
    r.final_absence_margin_us = c->final_absence_margin_us;
    if ((rc = og__uuid_new(r.operation_id)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    /* Before the transaction, so the pause holds no lock and reads nothing:
     * whatever lands in it is what the claim's facts find. */
    if (og__fault(OG__FAULT_CLAIM_PAUSE))
        claim_pause();
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_WRITE, &tx)) != 0)
        return rc;
    rc = claim_in(s, tx, &r, &res, &claimed);
    /* Only CLAIMED commits; every other outcome and any error roll back:
     * zero rows anywhere. */
    if ((rc = s->m->txn_end(s->impl, tx, rc, claimed)) != 0)
        return rc;
    /* The commit succeeded and its acknowledgment is lost: the claim stays,
     * the caller hears "unknown" (the worker sends nothing; a redelivery
     * finds DUPLICATE, the sweeper the Admitted attempt). */
    if (claimed && og__fault(OG__FAULT_CLAIM_ACK_LOST))
        return OG_ESTORE_UNAVAILABLE;
    if (res.outcome == OG_PAYOUT_CLAIM_DUPLICATE && !res.has_attempt &&
        res.attempt.operation_id[0] != '\0') {
        og_operation op;

        if ((rc = s->m->operation_get(s->impl, res.attempt.operation_id,
                                      &op)) < 0)
            return rc;
        memset(&res.attempt, 0, sizeof res.attempt);
        if (rc == 1) {
            res.attempt = op;
            res.has_attempt = true;
        }
    }
    *out = res;
    return 0;
}

/* What follows a recorded outcome o of attempt id, in tx: the attempt's
 * binding and payout, held until the commit; the pure plan (PP5); for
 * RESOLVED only, the writes and the fault point. *resolved: the
 * transaction is to commit — NOT_ACTIVE changes nothing, the outcome
 * included. Shared with payout_after.c (late evidence, operators). */
int og__payout_follow(og_store *s, void *tx, const char *id,
                      const og_op_outcome *o, og_payout_resolution *out,
                      bool *resolved)
{
    og__payout_resolve_facts f;
    og__payout_resolve_plan p;
    int rc;

    if ((rc = s->m->payout_resolve_facts(s->impl, tx, id, &f)) != 0 ||
        (rc = og__payout_plan_resolve(&f, o->status, &p)) != 0)
        return rc;
    if (p.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
        out->outcome = p.outcome;
        return 0;
    }
    if ((rc = s->m->payout_resolve_write(s->impl, tx, id, o, &f, &p)) != 0)
        return rc;
    if (og__fault(OG__FAULT_RESOLVE_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    out->outcome = OG_PAYOUT_RESOLVE_RESOLVED;
    memcpy(out->payout_id, f.payout_id, sizeof out->payout_id);
    memcpy(out->grant_id, f.grant_id, sizeof out->grant_id);
    out->state = p.to;
    out->payout_version = p.new_version;
    out->attempt_cleared = p.clear_attempt;
    out->reservation = p.reservation;
    out->amount_minor = f.amount_minor;
    memcpy(out->release_day, f.release_day, sizeof out->release_day);
    *resolved = true;
    return 0;
}

/* The resolution's steps, in tx: the outcome (og_op_record's own write),
 * then what follows it (og__payout_follow). NOT_RECORDED changes
 * nothing. */
int og__payout_resolve_in(og_store *s, void *tx, const char *id,
                          unsigned expected, int64_t owner_version,
                          const og_op_outcome *o, const char *source,
                          og_payout_resolution *out, bool *resolved)
{
    bool recorded = false;
    int rc;

    if ((rc = s->m->payout_resolve_record(s->impl, tx, id, expected,
                                          owner_version, o, source,
                                          &recorded)) != 0)
        return rc;
    if (!recorded) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_RECORDED;
        return 0;
    }
    return og__payout_follow(s, tx, id, o, out, resolved);
}

int og_payout_resolve(og_store *s, const char *operation_id,
                      unsigned expected, int64_t expected_owner_version,
                      const og_op_outcome *o, og_payout_resolution *out)
{
    char id[OG_UUID_LEN + 1];
    og_payout_resolution res;
    bool resolved = false;
    void *tx;
    int rc;

    if (!s || !o || !out || expected_owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if ((rc = og__op_outcome_check(expected, expected_owner_version, o)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->txn_begin(s->impl, OG__TXN_WRITE, &tx)) != 0)
        return rc;
    rc = og__payout_resolve_in(s, tx, id, expected, expected_owner_version, o,
                               NULL, &res, &resolved);
    /* Only RESOLVED commits; NOT_RECORDED, NOT_ACTIVE and any error roll
     * back: nothing changed anywhere. */
    if ((rc = s->m->txn_end(s->impl, tx, rc, resolved)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_expire_grants(og_store *s, int batch, int max_batches,
                            og_payout_expiry_stats *out)
{
    og_payout_expiry_stats total = {0, 0};
    int64_t from = OG__RETENTION_FROM_US, taken;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches))
        return OG_EINVAL;
    do { /* S4: bounded batches, each its own transaction */
        taken = 0;
        if ((rc = s->m->payout_expire_batch(s->impl, batch, &from, &taken)) <
            0)
            return rc;
        if (taken < 0 || taken > batch)
            return OG_EINTERNAL;
        total.grants += taken;
        total.batches++;
    } while (taken == batch && total.batches < max_batches);
    *out = total;
    return 0;
}


/* ===========================================================================
 * Operators' statistics: ONE backend read (payout_stats), checked here so
 * that a backend's answer that does not add up is OG_EINTERNAL, never a
 * metric.
 * ========================================================================= */

/* The listed tenants' order, as the header promises it: the largest
 * amount first, ties by tenant id (a UNION ALL does not promise to keep
 * its arm's ORDER BY, so it is restored here). */
static int stats_tenant_cmp(const void *a, const void *b)
{
    const og_payout_stats_tenant *l = a, *r = b;

    if (l->held.reserved_minor != r->held.reserved_minor)
        return l->held.reserved_minor > r->held.reserved_minor ? -1 : 1;
    return strcmp(l->tenant_id, r->tenant_id);
}

int og_payout_stats_read(og_store *s, og_payout_stats *out)
{
    og_payout_stats v;
    og_payout_stats_held listed = {0, 0};
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    memset(&v, 0, sizeof v);
    if ((rc = s->m->payout_stats(s->impl, &v)) != 0)
        return rc;
    for (int i = 0; i < v.n_tenants; i++) {
        listed.reservations += v.tenants[i].held.reservations;
        listed.reserved_minor += v.tenants[i].held.reserved_minor;
    }
    v.other.reservations = v.total.reservations - listed.reservations;
    v.other.reserved_minor = v.total.reserved_minor - listed.reserved_minor;
    if (v.n_tenants < 0 || v.n_tenants > OG_PAYOUT_STATS_TENANTS ||
        v.other.reservations < 0 || v.other.reserved_minor < 0 ||
        v.grants_pending < 0 || v.grants_open < 0 || v.grants_expired < 0 ||
        v.grants_pending + v.grants_open + v.grants_expired >
            v.total.reservations)
        return OG_EINTERNAL;
    qsort(v.tenants, (size_t)v.n_tenants, sizeof v.tenants[0],
          stats_tenant_cmp);
    *out = v;
    return 0;
}
