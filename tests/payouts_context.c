/*
 * payouts_context.c — the payout store, the context a decision reads: versions move with every change, a
 * store that cannot be read or locked decides nothing, bad input gets the
 * pure core's codes and writes nothing.
 * The conformance group payouts (payouts.c has the list).
 */
#include "payouts.h"

/* ===========================================================================
 * Versions move with every change
 * ========================================================================= */

/* Reads id's context into *snap (its strings point into *snap). */
static void p_read(og_store *s, const char *id, int64_t at,
                   og_payout_snapshot *snap)
{
    assert_int_equal(og_payout_context_read(s, id, at, snap), 0);
    assert_false(snap->ctx.unavailable);
    assert_int_equal(snap->why, OG_PAYOUT_UNAVAILABLE_NONE);
}

void context_versions_move_with_every_change(void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {0, 0};
    og_payout_snapshot snap, copy;
    og_payout_decide_req r;
    og_payout_decision d;
    char id[64], other[64];
    int64_t changed, at;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "ver", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);
    at = r.not_before_us;
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.tenant.settings_version, 1);
    assert_int_equal(snap.ctx.beneficiary.version, 1);
    assert_int_equal(snap.ctx.destination.version, 1);
    assert_int_equal(snap.ctx.payout.version, 1);
    assert_int_equal(snap.ctx.intent.payout_version, 1);
    assert_int_equal(snap.day_version, 0);
    assert_int_equal(snap.ctx.tenant.daily_limit, 5000000);
    assert_string_equal(snap.ctx.payout.terms.amount, "4250.00");
    assert_string_equal(snap.ctx.payout.terms.purpose, "invoice INV-9031");
    assert_string_equal(snap.ctx.destination.beneficiary_id, w.ben);
    /* the snapshot owns its strings; a copy is re-pointed at its own */
    copy = snap;
    og_payout_snapshot_bind(&copy);
    assert_ptr_equal(copy.ctx.payout.terms.tenant_id, copy.tenant_id);
    assert_string_equal(copy.ctx.payout.terms.tenant_id, w.tenant);

    /* Tenant settings: each change moves settings_version; a stale one,
     * or a change of the currency, changes nothing. */
    {
        og_payout_tenant_settings t = {w.tenant, false, 6000000, "EUR",
                                       "Europe/Berlin"};

        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        assert_int_equal(pr.version, 2);
        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        t.currency = "USD";
        assert_int_equal(og_payout_tenant_put(s, &t, 2, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        t.tenant_id = "T-nobody";
        assert_int_equal(og_payout_tenant_put(s, &t, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    }
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.tenant.settings_version, 2);
    assert_int_equal(snap.ctx.tenant.daily_limit, 6000000);
    assert_string_equal(snap.settlement_time_zone, "Europe/Berlin");

    /* Beneficiary: moves its version; it cannot change tenant. */
    {
        og_payout_beneficiary_record b = {w.ben, w.tenant, true,
                                          OG_PAYOUT_BENEFICIARY_SUSPENDED};

        assert_int_equal(og_payout_beneficiary_put(s, &b, 1, &pr), 0);
        assert_int_equal(pr.version, 2);
        b.status = OG_PAYOUT_BENEFICIARY_ACTIVE;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 2, &pr), 0);
        assert_int_equal(pr.version, 3);
        b.tenant_id = "T-other";
        assert_int_equal(og_payout_beneficiary_put(s, &b, 3, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        p_id(other, &w, "BEN", 9);
        b.beneficiary_id = other;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND); /* no such tenant */
    }
    /* Destination: every write moves its version and changed_at. */
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.beneficiary.version, 3);
    changed = snap.ctx.destination.changed_at_us;
    {
        og_payout_destination_record dst = {w.dst, w.ben, "tok_rotated"};

        assert_int_equal(og_payout_destination_put(s, &dst, 1, &pr), 0);
        assert_int_equal(pr.version, 2);
        assert_int_equal(og_payout_destination_put(s, &dst, 1, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        dst.beneficiary_id = "BEN-nobody";
        assert_int_equal(og_payout_destination_put(s, &dst, 2, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    }
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.destination.version, 2);
    assert_true(snap.ctx.destination.changed_at_us > changed);
    p_age_destination(raw, w.dst, 30);

    /* The payout names destination version 1: now at 2, it is no longer
     * the destination the terms were drafted for. */
    r = p_req(id);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason,
                     OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED);
    assert_int_equal(d.verdict.evaluated.destination, 2);

    /* A payout drafted for it: Draft 1 -> Approved 2 (a decision) ->
     * Cancelled 3; the day's counters move with the reservation and
     * settings_version does not. */
    p_id(id, &w, "PAY", 3);
    {
        og_payout_draft_req dr = {
            id, {w.tenant, w.ben, w.dst, 2, "4250.00", "EUR", NULL},
            "clerk-22"};

        p_put_ok(og_payout_draft(s, &dr, &pr), pr, "draft for v2");
    }
    r = p_req(id);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    assert_int_equal(d.verdict.evaluated.destination, 2);
    assert_int_equal(d.verdict.evaluated.beneficiary, 3);
    assert_int_equal(d.verdict.evaluated.tenant_settings, 2);
    p_read(s, id, r.not_before_us, &snap);
    assert_int_equal(snap.ctx.payout.state, OG_PAYOUT_STATE_APPROVED);
    assert_int_equal(snap.ctx.payout.version, 2);
    assert_int_equal(snap.attempt_count, 1);
    assert_int_equal(snap.day_version, 1);
    assert_int_equal(snap.ctx.tenant.reserved_today, 425000);
    assert_int_equal(snap.ctx.tenant.settings_version, 2);
    assert_string_equal(snap.release_day, d.release_day);
    {
        og_revoke_outcome ro;

        assert_int_equal(og_payout_grant_revoke(s, d.grant_id, "finance-1",
                                                &ro),
                         0);
    }
    p_read(s, id, r.not_before_us, &snap);
    assert_int_equal(snap.day_version, 2);
    assert_int_equal(snap.ctx.tenant.reserved_today, 0);
    assert_int_equal(og_payout_cancel(s, id, 1, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
    assert_int_equal(og_payout_cancel(s, id, 2, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    assert_int_equal(pr.version, 3);
    assert_int_equal(og_payout_cancel(s, id, 3, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED); /* Cancelled is final */
    assert_int_equal(og_payout_cancel(s, "PAY-nobody", 1, "clerk-22", &pr), 0);
    assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    p_read(s, id, at, &snap);
    assert_int_equal(snap.ctx.payout.state, OG_PAYOUT_STATE_CANCELLED);
    assert_int_equal(snap.ctx.payout.version, 3);

    /* Drafts: an id is taken once; every record named must exist; the
     * currency must be the tenant's. */
    {
        og_payout_draft_req dr = {
            id, {w.tenant, w.ben, w.dst, 2, "1.00", "EUR", NULL}, "clerk-22"};

        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        p_id(other, &w, "PAY", 2);
        dr.payout_id = other;
        dr.terms.destination_id = "DST-nobody";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
        dr.terms.destination_id = w.dst;
        dr.terms.beneficiary_id = "BEN-nobody";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
        dr.terms.beneficiary_id = w.ben;
        dr.terms.currency = "USD";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_REFUSED);
        assert_int_equal(og_payout_get(s, other, &(og_payout_view){0}), 0);
        dr.terms.currency = "EUR";
        assert_int_equal(og_payout_draft(s, &dr, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        assert_false(p_get(s, other).has_purpose);
    }

    /* A payout that is not there: unavailable (missing), never facts. */
    assert_int_equal(og_payout_context_read(s, "PAY-nobody", at, &snap), 0);
    assert_true(snap.ctx.unavailable);
    assert_int_equal(snap.why, OG_PAYOUT_UNAVAILABLE_MISSING);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * An imported destination (dev mode's scenario): changed_at as given, never
 * ahead of the store's clock; an existing destination is never changed.
 * ========================================================================= */

void destination_import_keeps_an_earlier_changed_at_and_never_a_later(
    void **state)
{
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {0, 0};
    og_payout_snapshot snap;
    og_payout_decide_req r;
    og_payout_decision d;
    char id[64], id2[64], dst2[64];
    int64_t before = t_now_us();
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "imp", 5000000);
    /* A second destination of w's beneficiary, imported as changed 30
     * days ago: the policy sees a change long past and allows. */
    p_id(dst2, &w, "DST", 2);
    {
        og_payout_destination_record dr = {dst2, w.ben, "tok_imported"};

        assert_int_equal(og_payout_destination_import(s, &dr,
                                                      before - 30 * DAY, &pr),
                         0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
        assert_int_equal(pr.version, 1);
        /* never a change of an existing one */
        dr.provider_token = "tok_other";
        assert_int_equal(og_payout_destination_import(s, &dr, before, &pr),
                         0);
        assert_int_equal(pr.outcome, OG_PAYOUT_VERSION_CONFLICT);
        /* bounds, before any I/O */
        assert_int_equal(og_payout_destination_import(s, &dr, 0, &pr),
                         OG_EINVAL);
        assert_int_equal(og_payout_destination_import(
                             s, &dr, INT64_C(253402300800000000), &pr),
                         OG_EINVAL);
        dr.beneficiary_id = "BEN-nobody";
        dr.destination_id = "DST-nobody";
        assert_int_equal(og_payout_destination_import(s, &dr, before, &pr),
                         0);
        assert_int_equal(pr.outcome, OG_PAYOUT_NOT_FOUND);
    }
    p_id(id, &w, "PAY", 1);
    {
        og_payout_draft_req dq = {
            id, {w.tenant, w.ben, dst2, 1, "4250.00", "EUR", "invoice"},
            "clerk-22"};

        assert_int_equal(og_payout_draft(s, &dq, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    r = p_req(id);
    assert_int_equal(og_payout_context_read(s, id, r.not_before_us, &snap), 0);
    assert_false(snap.ctx.unavailable);
    if (snap.ctx.destination.changed_at_us > before - 30 * DAY + SEC)
        fail_msg("changed_at %lld, before %lld", (long long)snap.ctx.destination.changed_at_us, (long long)before);
    assert_true(snap.ctx.destination.changed_at_us >= before - 30 * DAY - SEC);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);

    /* A time ahead of the store's clock lands as the store's clock: the
     * change is recent, and the policy says so. */
    p_id(dst2, &w, "DST", 3);
    {
        og_payout_destination_record dr = {dst2, w.ben, "tok_future"};

        assert_int_equal(og_payout_destination_import(s, &dr,
                                                      before + 365 * DAY, &pr),
                         0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    p_id(id2, &w, "PAY", 2);
    {
        og_payout_draft_req dq = {
            id2, {w.tenant, w.ben, dst2, 1, "10.00", "EUR", "invoice"},
            "clerk-22"};

        assert_int_equal(og_payout_draft(s, &dq, &pr), 0);
        assert_int_equal(pr.outcome, OG_PAYOUT_WRITTEN);
    }
    r = p_req(id2);
    assert_int_equal(og_payout_context_read(s, id2, r.not_before_us, &snap),
                     0);
    assert_true(snap.ctx.destination.changed_at_us <= t_now_us());
    assert_true(snap.ctx.destination.changed_at_us >= before - SEC);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.reason,
                     OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A store that cannot be read or locked: unavailable, nothing decided
 * ========================================================================= */
void context_that_cannot_be_read_is_unavailable_and_nothing_is_decided(
    void **state)
{
    og_store *s = t_store(0, 0), *quick = t_store(1, 300);
    t_raw *raw = t_raw_open(), *holder = t_raw_open();
    og_payout_snapshot snap;
    og_payout_decide_req r;
    og_payout_decision d;
    char id[64];
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "locked", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    r = p_req(id);

    /* Another session holds what the decision needs: SQLite's write lock;
     * on PostgreSQL an exclusive lock on payouts, which the reads wait
     * for too (until the store's timeout). */
    p_raw_exec(holder, t_kind == T_POSTGRES
                           ? "BEGIN; LOCK TABLE payouts IN ACCESS EXCLUSIVE MODE"
                           : "BEGIN IMMEDIATE");
    assert_int_equal(og_payout_decide(quick, &r, &d), OG_ESTORE_UNAVAILABLE);
    assert_int_equal(og_payout_context_read(quick, id, r.not_before_us, &snap),
                     0);
    if (t_kind == T_POSTGRES) {
        /* "cannot read": unavailable — wait, never allow, never old facts */
        assert_true(snap.ctx.unavailable);
        assert_int_equal(snap.why, OG_PAYOUT_UNAVAILABLE_STORE);
    } else {
        /* a WAL snapshot reads past a writer: the facts as committed */
        assert_false(snap.ctx.unavailable);
        assert_int_equal(snap.ctx.payout.version, 1);
    }
    p_raw_exec(holder, "ROLLBACK");

    /* Nothing of the failed decision exists; the payout decides now. */
    assert_int_equal(p_count_payout(raw, "payout_decisions", id), 0);
    assert_int_equal(p_get(s, id).version, 1);
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    t_raw_close(holder);
    t_raw_close(raw);
    og_store_free(quick);
    og_store_free(s);
}

/* ===========================================================================
 * Bad input: the pure core's codes, nothing written
 * ========================================================================= */
void bad_payout_input_gets_the_cores_error_and_writes_nothing(
    void **state)
{
    static const char *const tables[] = {
        "tenants", "beneficiaries", "destinations", "payouts",
        "payout_decisions", "payout_grants", "payout_jobs", "payout_events",
        "tenant_days"};
    og_store *s = t_store(0, 0);
    t_raw *raw = t_raw_open();
    og_payout_put_result pr = {OG_PAYOUT_WRITTEN, 77};
    int64_t before[sizeof tables / sizeof tables[0]];
    char big[OG_ID_MAX + 2], bigtok[OG_PAYOUT_TOKEN_MAX + 2], id[64];
    og_payout_decision d;
    og_payout_job j;
    bool done = false;
    p_world w;

    (void)state;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0'; /* 129 bytes */
    memset(bigtok, 't', sizeof bigtok - 1);
    bigtok[sizeof bigtok - 1] = '\0'; /* 513 bytes */
    p_world_new(s, raw, &w, "bad", 5000000);
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "4250.00");
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        before[i] = p_count(raw, tables[i], "1 = 1");

    /* Context records. */
    {
        og_payout_tenant_settings t = {big, false, 100, "EUR", 0};

        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_TENANT);
        t.tenant_id = "T-bad";
        t.daily_limit = -1;
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), OG_EPAYOUT_LIMIT);
        t.daily_limit = OG_PAYOUT_LIMIT_MAX + 1;
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr), OG_EPAYOUT_LIMIT);
        t.daily_limit = 100;
        t.currency = "XAU"; /* a metal: no minor units */
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_CURRENCY);
        t.currency = "eur";
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_CURRENCY);
        t.currency = "EUR";
        t.settlement_time_zone = "Europe/Atlantis"; /* no such zone */
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_TIMEZONE);
        t.settlement_time_zone = "GMT+01:00"; /* a custom id, not a zone */
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_TIMEZONE);
        t.settlement_time_zone = "";
        assert_int_equal(og_payout_tenant_put(s, &t, 0, &pr),
                         OG_EPAYOUT_TIMEZONE);
        t.settlement_time_zone = NULL; /* "UTC" */
        assert_int_equal(og_payout_tenant_put(s, &t, -1, &pr),
                         OG_EPAYOUT_VERSION);
        assert_int_equal(og_payout_tenant_put(s, NULL, 0, &pr), OG_EINVAL);
    }
    {
        og_payout_beneficiary_record b = {"BEN-bad", big, true,
                                          OG_PAYOUT_BENEFICIARY_ACTIVE};

        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr),
                         OG_EPAYOUT_TENANT);
        b.tenant_id = w.tenant;
        b.beneficiary_id = "BEN bad";
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr),
                         OG_EPAYOUT_BENEFICIARY);
        b.beneficiary_id = "BEN-bad";
        b.status = (og_payout_beneficiary_status)7;
        assert_int_equal(og_payout_beneficiary_put(s, &b, 0, &pr), OG_EINVAL);
    }
    {
        og_payout_destination_record dst = {"DST-bad", w.ben, "tok with space"};

        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = bigtok;
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = "";
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_TOKEN);
        dst.provider_token = "tok";
        dst.destination_id = big;
        assert_int_equal(og_payout_destination_put(s, &dst, 0, &pr),
                         OG_EPAYOUT_DESTINATION);
    }
    /* Drafts: the terms by the pure core's rules and codes. */
    {
        static const struct {
            const char *what, *amount, *currency, *purpose;
            int64_t dv;
            int want;
        } rows[] = {
            {"amount with a sign", "-10.00", "EUR", NULL, 1,
             OG_EPAYOUT_AMOUNT},
            {"zero", "0.00", "EUR", NULL, 1, OG_EPAYOUT_AMOUNT},
            {"finer than the currency", "10.001", "EUR", NULL, 1,
             OG_EAMOUNT_MINOR_UNITS},
            {"yen with decimals", "10.5", "JPY", NULL, 1,
             OG_EAMOUNT_MINOR_UNITS},
            {"over the maximum", "10000000000000.00", "EUR", NULL, 1,
             OG_EPAYOUT_AMOUNT},
            {"exponent", "1e3", "EUR", NULL, 1, OG_EPAYOUT_AMOUNT},
            {"unknown currency", "10.00", "ZZZ", NULL, 1,
             OG_EPAYOUT_CURRENCY},
            {"control character in purpose", "10.00", "EUR", "a\nb", 1,
             OG_EPAYOUT_PURPOSE},
            {"blank purpose", "10.00", "EUR", "   ", 1, OG_EPAYOUT_PURPOSE},
            {"destination version 0", "10.00", "EUR", NULL, 0,
             OG_EPAYOUT_DESTINATION_VERSION},
        };
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            og_payout_draft_req dr = {
                "PAY-bad",
                {w.tenant, w.ben, w.dst, rows[i].dv, rows[i].amount,
                 rows[i].currency, rows[i].purpose},
                "clerk-22"};
            int rc = og_payout_draft(s, &dr, &pr);

            if (rc != rows[i].want)
                fail_msg("%s: %s", rows[i].what, og_err_name(rc));
        }
        {
            og_payout_draft_req dr = {
                big, {w.tenant, w.ben, w.dst, 1, "1.00", "EUR", NULL},
                "clerk-22"};

            assert_int_equal(og_payout_draft(s, &dr, &pr), OG_EPAYOUT_ID);
            dr.payout_id = "PAY-bad";
            dr.terms.tenant_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr), OG_EPAYOUT_TENANT);
            dr.terms.tenant_id = w.tenant;
            dr.terms.beneficiary_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr),
                             OG_EPAYOUT_BENEFICIARY);
            dr.terms.beneficiary_id = w.ben;
            dr.requester_id = big;
            assert_int_equal(og_payout_draft(s, &dr, &pr),
                             OG_EPAYOUT_REQUESTER);
        }
    }
    assert_int_equal(pr.version, 77); /* never written on an error */
    /* Decisions. */
    {
        og_payout_decide_req r = p_req(id);

        r.payout_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_ID);
        r = p_req(id);
        r.requester_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_REQUESTER);
        r = p_req(id);
        r.requester_role = "";
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_REQUESTER);
        r = p_req(id);
        r.requester_approval_limit = -5;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_LIMIT);
        r = p_req(id);
        r.expires_at_us = r.not_before_us;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.expires_at_us = r.not_before_us + 2 * 3600 * SEC; /* not short */
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.not_before_us = -1;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_WINDOW);
        r = p_req(id);
        r.correlation_id = big;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_CORRELATION);
        r = p_req(id);
        r.payout_version = -1;
        assert_int_equal(og_payout_decide(s, &r, &d), OG_EPAYOUT_VERSION);
    }
    /* Jobs and grants. */
    assert_int_equal(og_payout_job_take(s, 999, &j), OG_EINVAL);
    assert_int_equal(og_payout_job_take(s, OG_PAYOUT_LEASE_MAX_US + 1, &j),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_ack(s, "not-a-uuid", 1, &done),
                     OG_EPAYOUT_JOB);
    assert_int_equal(og_payout_job_ack(s, "00000000-0000-4000-8000-000000000001",
                                       0, &done),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_postpone(
                         s, "00000000-0000-4000-8000-000000000001", 1, -1,
                         &done),
                     OG_EINVAL);
    assert_int_equal(og_payout_job_resubmit(s, big, "ops-7", id),
                     OG_EPAYOUT_JOB);
    assert_int_equal(og_payout_grant_revoke(s, big, "finance-1",
                                            &(og_revoke_outcome){0}),
                     OG_EGRANT_ID);
    assert_int_equal(og_payout_grant_revoke(s, "g-1", "fin ance",
                                            &(og_revoke_outcome){0}),
                     OG_EACTOR);
    assert_int_equal(og_payout_cancel(s, id, 0, "clerk-22", &pr),
                     OG_EPAYOUT_VERSION);
    assert_int_equal(og_payout_expire_grants(s, 0, 1,
                                             &(og_payout_expiry_stats){0}),
                     OG_EINVAL);
    assert_int_equal(og_payout_context_read(s, big, t_now_us(),
                                            &(og_payout_snapshot){0}),
                     OG_EPAYOUT_ID);

    /* Nothing was written anywhere. */
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        assert_int_equal(p_count(raw, tables[i], "1 = 1"), before[i]);
    assert_int_equal(p_get(s, id).version, 1);
    t_raw_close(raw);
    og_store_free(s);
}
