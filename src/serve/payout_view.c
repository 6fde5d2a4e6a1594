/*
 * payout_view.c — a payout as it is read: the payout with its decisions,
 * grants (never a credential: a payout grant has no token), attempts with
 * their histories and its own history; and the Unknown / NeedsReconciliation
 * payout attempts by age (docs/payouts.md). One assembly from store reads
 * (oncegate/payout_store.h) that `oncegate payout show|backlog` (src/cli/)
 * and the operator's HTTP routes (payout_http.c) both answer with.
 */
#include <string.h>

#include "commands.h"
#include "oncegate/payout_store.h"

json_t *og_srv_operation_json(const og_operation *op)
{
    char lease[40], submit[40], created[40];

    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s}",
        "operation_id", op->operation_id, "issuer", op->issuer, "grant_id",
        op->grant_id, "caller_id", op->caller_id, "account_id", op->account_id,
        "amount", op->amount, "currency", op->currency, "status",
        og_op_status_name(op->status), "owner_version",
        (json_int_t)op->owner_version, "lease_until",
        og_time_format_rfc3339(op->lease_until_us, lease, sizeof lease),
        "submit_by",
        og_time_format_rfc3339(op->submit_by_us, submit, sizeof submit),
        "created_at",
        og_time_format_rfc3339(op->created_at_us, created, sizeof created));
}

/* RFC 3339 of us into buf, or NULL (JSON null) when us is 0: not set. */
static const char *when(int64_t us, char *buf, size_t len)
{
    return us ? og_time_format_rfc3339(us, buf, len) : NULL;
}

static json_t *payout_json(const og_payout_view *v)
{
    char c[40], u[40];

    return json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:s, s:s?, s:s, s:I, s:I,"
        " s:s?, s:s?, s:s, s:s, s:s}",
        "payout_id", v->payout_id, "tenant_id", v->tenant_id,
        "beneficiary_id", v->beneficiary_id, "destination_id",
        v->destination_id, "destination_version",
        (json_int_t)v->destination_version, "amount", v->amount,
        "amount_minor", (json_int_t)v->amount_minor, "currency", v->currency,
        "purpose", v->has_purpose ? v->purpose : NULL, "state",
        og_payout_state_name(v->state), "version", (json_int_t)v->version,
        "attempt_count", (json_int_t)v->attempt_count, "active_attempt",
        v->active_attempt[0] ? v->active_attempt : NULL, "release_day",
        v->release_day[0] ? v->release_day : NULL, "requester_id",
        v->requester_id, "created_at",
        og_time_format_rfc3339(v->created_at_us, c, sizeof c), "updated_at",
        og_time_format_rfc3339(v->updated_at_us, u, sizeof u));
}

static json_t *decision_json(const og_payout_decision_view *d)
{
    char o[40], t[40];
    json_t *j;

    j = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s?}",
        "decision_id", d->decision_id, "outcome",
        og_payout_outcome_name(d->outcome), "reason",
        og_payout_reason_name(d->reason), "policy_version", d->policy_version,
        "reauthorize", d->reauthorize, "requester_id", d->requester_id,
        "requester_role", d->requester_role, "terms_fingerprint",
        d->terms_fingerprint, "requester_approval_limit",
        (json_int_t)d->requester_approval_limit, "observed_at",
        og_time_format_rfc3339(d->observed_at_us, o, sizeof o), "decided_at",
        og_time_format_rfc3339(d->decided_at_us, t, sizeof t),
        "correlation_id", d->correlation_id, "settles_decision_id",
        d->settles_decision_id[0] ? d->settles_decision_id : NULL);
    /* An approval's acknowledgment: the destination version it covers. */
    if (j && d->acknowledged_destination_version != 0)
        json_object_set_new(
            j, "acknowledged_destination_version",
            json_integer((json_int_t)d->acknowledged_destination_version));
    return j;
}

/* A payout grant: its bindings and state — it has no token to leak. */
static json_t *grant_json(const og_payout_grant_view *g)
{
    char nb[40], ex[40], cr[40], co[40], rv[40], rl[40];

    return json_pack(
        "{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:s, s:s?, s:s?,"
        " s:s?, s:s?, s:s, s:s}",
        "grant_id", g->grant_id, "decision_id", g->decision_id, "state",
        og_payout_grant_state_name(g->state), "attempt_number",
        (json_int_t)g->attempt_number, "executable_payout_version",
        (json_int_t)g->executable_payout_version, "reserved_minor",
        (json_int_t)g->reserved_minor, "release_day", g->release_day,
        "not_before", og_time_format_rfc3339(g->not_before_us, nb, sizeof nb),
        "expires_at", og_time_format_rfc3339(g->expires_at_us, ex, sizeof ex),
        "created_at", og_time_format_rfc3339(g->created_at_us, cr, sizeof cr),
        "consumed_at", when(g->consumed_at_us, co, sizeof co),
        "consumed_by_operation",
        g->consumed_by_operation[0] ? g->consumed_by_operation : NULL,
        "revoked_at", when(g->revoked_at_us, rv, sizeof rv), "released_at",
        when(g->released_at_us, rl, sizeof rl), "policy_version",
        g->policy_version, "audience", g->audience);
}

/* One history entry: the columns it has, no others. */
static json_t *event_json(const og_payout_event *e)
{
    char at[40];
    json_t *j = json_pack("{s:I, s:s, s:s, s:s}", "seq", (json_int_t)e->seq,
                          "at", og_time_format_rfc3339(e->at_us, at, sizeof at),
                          "kind", e->kind, "actor", e->actor);
    const struct { const char *name, *v; } opt[] = {
        {"correlation_id", e->correlation_id}, {"decision_id", e->decision_id},
        {"grant_id", e->grant_id},             {"job_id", e->job_id},
        {"from_state", e->from_state},         {"to_state", e->to_state},
        {"release_day", e->release_day},       {"reason", e->reason},
        {"evidence", e->evidence},
    };

    for (size_t i = 0; j && i < sizeof opt / sizeof opt[0]; i++)
        if (opt[i].v[0])
            json_object_set_new(j, opt[i].name, json_string(opt[i].v));
    if (j && e->payout_version)
        json_object_set_new(j, "payout_version",
                            json_integer(e->payout_version));
    if (j && e->has_amount)
        json_object_set_new(j, "amount_minor", json_integer(e->amount_minor));
    return j;
}

static json_t *op_event_json(const og_op_event *e)
{
    char at[40];
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:s}", "at",
        og_time_format_rfc3339(e->at_us, at, sizeof at), "kind", e->kind,
        "from", og_op_status_name(e->from_status), "to",
        og_op_status_name(e->to_status), "owner_version",
        (json_int_t)e->owner_version, "actor", e->actor);
    const struct { const char *name, *v; } opt[] = {
        {"reason", e->reason}, {"provider_reference", e->provider_reference},
        {"evidence", e->evidence}, {"source", e->source},
    };

    for (size_t i = 0; j && i < sizeof opt / sizeof opt[0]; i++)
        if (opt[i].v[0])
            json_object_set_new(j, opt[i].name, json_string(opt[i].v));
    return j;
}

/* Appends attempt operation_id with its history to attempts: 0, or an
 * error. An archived attempt (the grant still names it) is left out. */
static int add_attempt(og_store *s, const char *operation_id,
                       json_t *attempts)
{
    og_operation op;
    og_op_events h = {NULL, 0};
    json_t *j, *hist;
    int rc;

    if ((rc = og_operation_get(s, operation_id, &op)) <= 0)
        return rc;
    if ((rc = og_op_history(s, operation_id, &h)) != 0)
        return rc;
    j = og_srv_operation_json(&op);
    hist = json_array();
    if (!j || !hist) {
        json_decref(j);
        json_decref(hist);
        og_op_events_free(&h);
        return OG_ENOMEM;
    }
    for (size_t i = 0; i < h.n; i++)
        json_array_append_new(hist, op_event_json(&h.v[i]));
    og_op_events_free(&h);
    json_object_set_new(j, "idempotency_key",
                        json_string(op.idempotency_key));
    json_object_set_new(j, "client_reference",
                        json_string(op.client_reference));
    json_object_set_new(j, "provider_reference",
                        json_string(op.provider_reference));
    json_object_set_new(j, "history", hist);
    json_array_append_new(attempts, j);
    return 0;
}

int og_payout_show_json(og_store *s, const char *payout_id, json_t **out)
{
    og_payout_view v;
    og_payout_events e = {NULL, 0};
    json_t *decisions = json_array(), *grants = json_array(),
           *attempts = json_array(), *history = json_array();
    int rc;

    *out = NULL;
    if (!decisions || !grants || !attempts || !history) {
        rc = OG_ENOMEM;
        goto done;
    }
    if ((rc = og_payout_get(s, payout_id, &v)) <= 0)
        goto done;
    if ((rc = og_payout_history(s, payout_id, &e)) != 0)
        goto done;
    /* The history names every decision and grant; a consumed grant names
     * its attempt. */
    for (size_t i = 0; i < e.n; i++) {
        const og_payout_event *ev = &e.v[i];

        json_array_append_new(history, event_json(ev));
        if (strcmp(ev->kind, "decided") == 0 && ev->decision_id[0]) {
            og_payout_decision_view d;

            if ((rc = og_payout_decision_get(s, ev->decision_id, &d)) < 0)
                goto done;
            if (rc == 1)
                json_array_append_new(decisions, decision_json(&d));
        } else if (strcmp(ev->kind, "grant-issued") == 0 && ev->grant_id[0]) {
            og_payout_grant_view g;

            if ((rc = og_payout_grant_get(s, ev->grant_id, &g)) < 0)
                goto done;
            if (rc == 1) {
                json_array_append_new(grants, grant_json(&g));
                if (g.consumed_by_operation[0] &&
                    (rc = add_attempt(s, g.consumed_by_operation,
                                      attempts)) < 0)
                    goto done;
            }
        }
    }
    *out = json_pack("{s:o, s:O, s:O, s:O, s:O}", "payout", payout_json(&v),
                     "decisions", decisions, "grants", grants, "attempts",
                     attempts, "history", history);
    rc = *out ? 1 : OG_ENOMEM;
done:
    og_payout_events_free(&e);
    json_decref(decisions);
    json_decref(grants);
    json_decref(attempts);
    json_decref(history);
    return rc;
}

int og_payout_backlog_json(og_store *s, int limit, int64_t now_us,
                           json_t **out)
{
    og_op_filter f = {OG_OP_BIT(OG_OP_UNKNOWN) |
                          OG_OP_BIT(OG_OP_NEEDS_RECONCILIATION),
                      false, 0, 100, OG_OP_KIND_BIT(OG_OP_KIND_PAYOUT)};
    og_op_list l = {NULL, 0};
    json_t *list;
    int unknown = 0, needs = 0, rc;

    *out = NULL;
    f.limit = limit;
    if ((rc = og_op_scan(s, &f, &l)) != 0)
        return rc;
    if (!(list = json_array())) {
        og_op_list_free(&l);
        return OG_ENOMEM;
    }
    for (size_t i = 0; i < l.n; i++) {
        const og_operation *op = &l.v[i];
        og_payout_grant_view g;
        char created[40], updated[40];

        /* The attempt names its grant; the grant names its payout. */
        if ((rc = og_payout_grant_get(s, op->grant_id, &g)) < 0) {
            json_decref(list);
            og_op_list_free(&l);
            return rc;
        }
        if (op->status == OG_OP_UNKNOWN)
            unknown++;
        else
            needs++;
        json_array_append_new(
            list,
            json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:I}",
                      "attempt", op->operation_id, "payout",
                      rc == 1 ? g.payout_id : "", "grant", op->grant_id,
                      "status", og_op_status_name(op->status),
                      "owner_version", (json_int_t)op->owner_version,
                      "provider_reference", op->provider_reference,
                      "reason", op->reason, "created_at",
                      og_time_format_rfc3339(op->created_at_us, created,
                                             sizeof created),
                      "updated_at",
                      og_time_format_rfc3339(op->updated_at_us, updated,
                                             sizeof updated),
                      "age_seconds",
                      (json_int_t)((now_us - op->created_at_us) / 1000000)));
    }
    og_op_list_free(&l);
    *out = json_pack("{s:o, s:i, s:i}", "backlog", list, "unknown", unknown,
                     "needs_reconciliation", needs);
    return *out ? 0 : OG_ENOMEM;
}
