/*
 * exec.c — the ownership protocol's entry points (store.h, "Execution"):
 * may-submit, start, record, takeover, resolve, the scan, the history, and
 * the tests' og__op_insert. Validation and the transition table are
 * checked here, before any I/O (S1, dispatch.h); each backend method is one
 * conditional write.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/dispatch.h"
#include "store/store_int.h"

/* 1..max printable ASCII without spaces (reason codes, references). */
bool og__code_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;

    return n >= 1 && n <= max && og__id_check(s) == 0;
}

/* Evidence: 1..OG_EVIDENCE_MAX bytes of UTF-8 without control characters
 * other than newline and tab. */
bool og__evidence_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    json_t *probe;

    if (n < 1 || n > OG_EVIDENCE_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\n' && s[i] != '\t')
            return false;
    /* jansson validates UTF-8 strictly; no hand-written decoder. */
    probe = json_stringn(s, n);
    json_decref(probe);
    return probe != NULL;
}

/* The transition table of store.h ("Execution"): may an owner (not an
 * operator) at owner_version move an operation from a status in expected
 * to to? Started is og_op_start's alone; the owned statuses are the only
 * ones an owner may expect, so a terminal status is never replaced. */
static bool owner_transition_ok(unsigned expected, int64_t owner_version,
                                og_op_status to)
{
    if (expected == 0 || (expected & ~(unsigned)OG__OP_OWNED) != 0)
        return false;
    switch (to) {
    case OG_OP_SUCCEEDED:
    case OG_OP_FAILED:
    case OG_OP_UNKNOWN:
    case OG_OP_NEEDS_RECONCILIATION:
        return true;
    case OG_OP_NOT_STARTED:
        /* P2: only an Admitted attempt, and only once a takeover fenced
         * its claimer (whose og_op_start can then no longer succeed). The
         * store re-checks it, with the kind, in the write itself. */
        return expected == OG_OP_BIT(OG_OP_ADMITTED) &&
               owner_version > OG__INITIAL_OWNER_VERSION;
    case OG_OP_NOT_APPLIED:
        /* Decided on the provider's records (P6): only from Unknown. */
        return expected == OG_OP_BIT(OG_OP_UNKNOWN);
    case OG_OP_ADMITTED:
    case OG_OP_STARTED:
        return false;
    }
    return false;
}

int og_op_may_submit(og_store *s, const char *operation_id,
                     int64_t owner_version, bool *may)
{
    char id[OG_UUID_LEN + 1];
    bool m = false;
    int rc;

    if (!s || !may || owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    rc = s->m->op_may_submit(s->impl, id, owner_version, &m);
    if (rc == 0)
        *may = m;
    return rc;
}

int og_op_start(og_store *s, const char *operation_id, int64_t owner_version,
                const char *actor, bool *started)
{
    char id[OG_UUID_LEN + 1];
    bool st = false;
    int rc;

    if (!s || !started || owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (!og__code_ok(actor, OG_ID_MAX))
        return OG_EACTOR;
    rc = s->m->op_start(s->impl, id, owner_version, actor, &st);
    /* The Started write committed and its acknowledgment is lost: the
     * caller hears "unknown" and sends nothing (P1); the sweeper makes the
     * lapsed Started attempt Unknown (P3). Only a start happens to a
     * payout. */
    if (rc == 0 && st && og__fault(OG__FAULT_START_ACK_LOST))
        return OG_ESTORE_UNAVAILABLE;
    if (rc == 0)
        *started = st;
    return rc;
}

int og__op_outcome_check(unsigned expected, int64_t expected_owner_version,
                         const og_op_outcome *o)
{
    if (!owner_transition_ok(expected, expected_owner_version, o->status))
        return OG_ETRANSITION;
    if (o->reason && !og__code_ok(o->reason, OG_REASON_MAX))
        return OG_EREASON;
    if (o->provider_reference &&
        !og__code_ok(o->provider_reference, OG_ID_MAX))
        return OG_EPROVIDER_REFERENCE;
    if (!og__code_ok(o->actor, OG_ID_MAX))
        return OG_EACTOR;
    if (o->evidence && !og__evidence_ok(o->evidence))
        return OG_EEVIDENCE;
    return 0;
}

int og_op_record(og_store *s, const char *operation_id, unsigned expected,
                 int64_t expected_owner_version, const og_op_outcome *o,
                 bool *recorded)
{
    char id[OG_UUID_LEN + 1];
    bool r = false;
    int rc;

    if (!s || !o || !recorded ||
        expected_owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if ((rc = og__op_outcome_check(expected, expected_owner_version, o)) != 0)
        return rc;
    rc = s->m->op_record(s->impl, id, expected, expected_owner_version, o, &r);
    if (rc == 0)
        *recorded = r;
    return rc;
}

/* The test hook's check of one row: og_op_start's or og_op_record's,
 * without the transition table (store_int.h, og__op_outcome_batch). */
static int outcome_row_check(const og__outcome_row *r, char *id)
{
    if (r->owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(r->operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (r->kind == OG__OUTCOME_START)
        return og__code_ok(r->actor, OG_ID_MAX) ? 0 : OG_EACTOR;
    if (r->kind != OG__OUTCOME_RECORD || !r->o || r->expected == 0 ||
        (r->expected & ~(unsigned)OG__OP_OWNED) != 0)
        return OG_EINVAL;
    if (r->o->reason && !og__code_ok(r->o->reason, OG_REASON_MAX))
        return OG_EREASON;
    if (r->o->provider_reference &&
        !og__code_ok(r->o->provider_reference, OG_ID_MAX))
        return OG_EPROVIDER_REFERENCE;
    if (!og__code_ok(r->o->actor, OG_ID_MAX))
        return OG_EACTOR;
    if (r->o->evidence && !og__evidence_ok(r->o->evidence))
        return OG_EEVIDENCE;
    return 0;
}

int og__op_outcome_batch(og_store *s, og__outcome_row *rows, int n, int *rcs)
{
    char (*ids)[OG_UUID_LEN + 1];
    og__outcome_row *canon;
    int rc = 0, i;

    if (!s || !rows || !rcs || n < 1 || n > OG_ADMIT_BATCH_MAX)
        return OG_EINVAL;
    if (!s->m->outcome_batch)
        return OG_EINVAL; /* this backend writes each outcome alone */
    ids = calloc((size_t)n, sizeof *ids);
    canon = calloc((size_t)n, sizeof *canon);
    if (!ids || !canon) {
        free(ids);
        free(canon);
        return OG_ENOMEM;
    }
    for (i = 0; i < n && rc == 0; i++) { /* S1: every row before any I/O */
        rc = outcome_row_check(&rows[i], ids[i]);
        canon[i] = rows[i];
        canon[i].operation_id = ids[i];
        canon[i].hit = false;
    }
    if (rc == 0)
        rc = s->m->outcome_batch(s->impl, canon, n, rcs);
    for (i = 0; i < n && rc == 0; i++)
        rows[i].hit = rcs[i] == 0 && canon[i].hit;
    free(canon);
    free(ids);
    return rc;
}

int og_op_takeover(og_store *s, const char *operation_id,
                   int64_t expected_owner_version, const char *actor,
                   og_operation *out, bool *taken)
{
    char id[OG_UUID_LEN + 1];
    og_operation op;
    bool t = false;
    int rc;

    if (!s || !out || !taken ||
        expected_owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if (!og__code_ok(actor, OG_ID_MAX))
        return OG_EACTOR;
    memset(&op, 0, sizeof op);
    rc = s->m->op_takeover(s->impl, id, expected_owner_version, actor, &op, &t);
    if (rc == 0) {
        *taken = t;
        if (t)
            *out = op;
    }
    return rc;
}

int og_op_resolve(og_store *s, const char *operation_id, og_op_status to,
                  const char *operator_id, const char *reason,
                  const char *evidence, const char *provider_reference,
                  bool *resolved)
{
    char id[OG_UUID_LEN + 1];
    bool r = false;
    int rc;

    if (!s || !resolved)
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
    rc = s->m->op_resolve(s->impl, id, to, operator_id, reason, evidence,
                          provider_reference, &r);
    if (rc == 0)
        *resolved = r;
    return rc;
}

int og_op_scan(og_store *s, const og_op_filter *f, og_op_list *out)
{
    og_op_list l = {0};
    int rc;

    if (!s || !f || !out || f->limit < 1 || f->limit > 1000 ||
        f->created_before_us < 0 || (f->statuses >> OG_OP_STATUS_COUNT) != 0 ||
        (f->kinds >> OG_OP_KIND_COUNT) != 0)
        return OG_EINVAL;
    rc = s->m->op_list(s->impl, f, &l);
    if (rc == 0)
        *out = l;
    return rc;
}

int og__op_insert(og_store *s, og_op_kind k, const og_grant *g,
                  const og_intent *in, const char *idempotency_key,
                  const char *client_reference, og_operation *out)
{
    og__admit_req req;
    og_operation op;
    int rc;

    if (!s || !g || !in || !out ||
        (k != OG_OP_KIND_CREDIT && k != OG_OP_KIND_PAYOUT))
        return OG_EINVAL;
    if ((rc = og__admit_req_build(g, in, &req)) < 0) /* S1 */
        return rc;
    /* The columns' bounds (schema 7), before the store. */
    if (idempotency_key && !og__code_ok(idempotency_key, OG_ID_MAX))
        return OG_EIDEMPOTENCY_KEY;
    if (client_reference && !og__code_ok(client_reference, OG_ID_MAX))
        return OG_ECLIENT_REFERENCE;
    memset(&op, 0, sizeof op);
    if ((rc = s->m->op_insert(s->impl, &req, k, idempotency_key,
                              client_reference, &op)) < 0)
        return rc;
    *out = op;
    return 0;
}

void og_op_list_free(og_op_list *l)
{
    if (!l)
        return;
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int og_op_history(og_store *s, const char *operation_id, og_op_events *out)
{
    char id[OG_UUID_LEN + 1];
    og_operation op;
    og_op_events stored = {0};
    og_op_event *all;
    size_t n;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    rc = s->m->operation_get(s->impl, id, &op);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        out->v = NULL;
        out->n = 0;
        return 0;
    }
    if ((rc = s->m->op_history(s->impl, id, &stored)) != 0)
        return rc;
    all = calloc(stored.n + 1, sizeof *all);
    if (!all) {
        og_op_events_free(&stored);
        return OG_ENOMEM;
    }
    /* The admission itself, from the record (admission stays ONE insert). */
    all[0].seq = 0;
    all[0].at_us = op.created_at_us;
    snprintf(all[0].kind, sizeof all[0].kind, "admitted");
    all[0].from_status = OG_OP_ADMITTED;
    all[0].to_status = OG_OP_ADMITTED;
    all[0].owner_version = OG__INITIAL_OWNER_VERSION;
    og__idcpy(all[0].actor, op.caller_id);
    n = stored.n;
    if (n)
        memcpy(all + 1, stored.v, n * sizeof *all);
    og_op_events_free(&stored);
    out->v = all;
    out->n = n + 1;
    return 0;
}

void og_op_events_free(og_op_events *e)
{
    if (!e)
        return;
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

