/*
 * payouts_fidelity.c — what schema 12 makes exact (docs/payouts.md,
 * sections 4 and 5), on both engines: a payout grant is valid while
 * not_before <= now < expires_at on the store's clock with no admission
 * leeway (PP7, lib/store/payout_plan.c); the payout policy's current
 * release is the store's, and the decision and the claim fence on it; the
 * release day is the date in the tenant's settlement time zone, daylight
 * saving time included; migration 12 turns the tenants' offsets into
 * zones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payouts.h"
#include "store/store_int.h" /* og__store_migrate_to: a store at schema 10 */

#define HOUR (60 * MINUTE)

/* The first line of t_raw_lines(sql), without its newline (malloc'd). */
static char *f_line(t_raw *raw, const char *sql)
{
    char *text = t_raw_lines(raw, sql);

    assert_non_null(text);
    text[strcspn(text, "\n")] = '\0';
    return text;
}

/* A decision whose grant window ended ended_s seconds ago (20 minutes
 * long). */
static og_payout_decision f_decide_ended(og_store *s, const char *id,
                                         int ended_s)
{
    og_payout_decide_req r = p_req(id);
    og_payout_decision d;

    r.expires_at_us = t_now_us() - ended_s * SEC;
    r.not_before_us = r.expires_at_us - 20 * MINUTE;
    d = p_decide(s, &r);
    assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
    return d;
}

/* PP7: two seconds past expires_at the grant is Expired and its claim is
 * refused grant.expired, although the store's admission leeway (30 s by
 * default) would have admitted it; the janitor releases an unused grant's
 * reservation once expires_at + the cleanup margin passed, not a leeway
 * later. */
void grant_is_valid_until_expires_at_with_no_leeway(void **state)
{
    char url[4200], id[64], late[64], early[64];
    og_store *s = t_fresh_store("pleeway", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d, dl, de;
    og_payout_claim_req c;
    og_payout_grant_view g;
    og_payout_view was;
    og_payout_expiry_stats st;
    og_store_options o;
    int64_t before[P_CLAIM_TABLES];
    int margin_s;
    p_world w;

    (void)state;
    og_store_options_default(&o);
    assert_true(o.timings.admission_leeway_us > 2 * SEC);
    margin_s = (int)(o.timings.cleanup_margin_us / SEC);
    p_world_new(s, raw, &w, "leeway", INT64_C(100000000));

    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "10.00");
    d = f_decide_ended(s, id, 2);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.state, OG_PAYOUT_GRANT_EXPIRED);
    assert_true(g.read_at_us >= g.expires_at_us);
    c = p_claim_req(&d, "worker-7");
    was = p_get(s, id);
    p_counts(raw, before);
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_EXPIRED);
    assert_string_equal(og_payout_claim_outcome_name(OG_PAYOUT_CLAIM_EXPIRED),
                        "grant.expired");
    p_assert_unclaimed(s, raw, before, id, &was, d.grant_id);

    /* Released after expires_at + margin; not before. */
    p_id(late, &w, "PAY", 2);
    p_draft(s, &w, late, "20.00");
    dl = f_decide_ended(s, late, margin_s + 10);
    p_id(early, &w, "PAY", 3);
    p_draft(s, &w, early, "40.00");
    de = f_decide_ended(s, early, margin_s - 20);
    assert_int_equal(p_reserved(raw, w.tenant), 7000);
    assert_int_equal(og_payout_expire_grants(s, 100, 10, &st), 0);
    assert_int_equal(st.grants, 1);
    assert_int_equal(p_reserved(raw, w.tenant), 5000);
    assert_int_equal(og_payout_grant_get(s, dl.grant_id, &g), 1);
    assert_true(g.released_at_us > 0);
    assert_int_equal(og_payout_grant_get(s, de.grant_id, &g), 1);
    assert_int_equal(g.released_at_us, 0);
    assert_int_equal(og_payout_grant_get(s, d.grant_id, &g), 1);
    assert_int_equal(g.released_at_us, 0);
    t_raw_close(raw);
    og_store_free(s);
}

/* The policy's current release is the store's: a build whose policy is not
 * it decides nothing and claims nothing; moving it is one conditional
 * write; moving it back lets the same grant be claimed. */
void policy_release_is_the_stores_and_fences_decisions_and_claims(
    void **state)
{
    static const char next[] = "oncegate-payout-policy/2";
    char url[4200], a[64], b[64], cur[OG_ID_MAX + 1];
    og_store *s = t_fresh_store("prelease", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_decision d;
    og_payout_claim_req c;
    og_payout_view was;
    og_payout_write wr = OG_PAYOUT_REFUSED;
    int64_t before[P_CLAIM_TABLES], decisions;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "release", INT64_C(100000000));
    assert_int_equal(og_payout_policy_release_get(s, cur), 0);
    assert_string_equal(cur, OG_PAYOUT_POLICY_VERSION); /* the seed */
    /* a stale expectation writes nothing */
    assert_int_equal(og_payout_policy_release_set(s, next, next, "ops-1", &wr),
                     0);
    assert_int_equal(wr, OG_PAYOUT_VERSION_CONFLICT);
    assert_int_equal(og_payout_policy_release_get(s, cur), 0);
    assert_string_equal(cur, OG_PAYOUT_POLICY_VERSION);
    /* bad input */
    assert_int_equal(og_payout_policy_release_set(s, "", cur, "ops-1", &wr),
                     OG_EINVAL);
    assert_int_equal(og_payout_policy_release_set(s, next, NULL, "ops-1", &wr),
                     OG_EINVAL);
    assert_int_equal(og_payout_policy_release_set(s, next, cur, "", &wr),
                     OG_EACTOR);
    assert_int_equal(og_payout_policy_release_get(s, NULL), OG_EINVAL);

    p_id(a, &w, "PAY", 1);
    p_draft(s, &w, a, "10.00");
    d = p_decide_now(s, a); /* decided on the current release */

    /* The release moves on (a newer build's): this build decides and
     * claims nothing. */
    assert_int_equal(og_payout_policy_release_set(
                         s, next, OG_PAYOUT_POLICY_VERSION, "ops-1", &wr),
                     0);
    assert_int_equal(wr, OG_PAYOUT_WRITTEN);
    assert_int_equal(og_payout_policy_release_get(s, cur), 0);
    assert_string_equal(cur, next);
    p_id(b, &w, "PAY", 2);
    p_draft(s, &w, b, "10.00");
    decisions = p_count(raw, "payout_decisions", "1 = 1");
    {
        og_payout_decide_req r = p_req(b);
        og_payout_decision db;

        assert_int_equal(og_payout_decide(s, &r, &db),
                         OG_EPAYOUT_POLICY_RELEASE);
        assert_string_equal(og_err_name(OG_EPAYOUT_POLICY_RELEASE),
                            "policy.release-mismatch");
    }
    assert_int_equal(p_count(raw, "payout_decisions", "1 = 1"), decisions);
    assert_int_equal(p_get(s, b).state, OG_PAYOUT_STATE_DRAFT);
    was = p_get(s, a);
    p_counts(raw, before);
    c = p_claim_req(&d, "worker-7"); /* the recheck ran this build's */
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
    /* naming the store's release does not make this build's policy it */
    c.policy_version = next;
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CONTEXT_CHANGED);
    p_assert_unclaimed(s, raw, before, a, &was, d.grant_id);

    /* Back to this build's release (a rollback of the deploy): the same
     * grant is claimed, and decisions are made again. */
    assert_int_equal(og_payout_policy_release_set(
                         s, OG_PAYOUT_POLICY_VERSION, next, "ops-1", &wr),
                     0);
    assert_int_equal(wr, OG_PAYOUT_WRITTEN);
    c = p_claim_req(&d, "worker-7");
    assert_int_equal(p_claim(s, &c).outcome, OG_PAYOUT_CLAIM_CLAIMED);
    (void)p_decide_now(s, b);
    assert_int_equal(p_count(raw, "payout_decisions", "1 = 1"), decisions + 1);
    t_raw_close(raw);
    og_store_free(s);
}

/* The release day is the date in the tenant's zone at the grant's
 * not_before, daylight saving time included: Berlin's spring-forward
 * Sunday night, 00:30 CEST on Monday, reserves on Monday (a fixed UTC+1
 * would have said Sunday); Kolkata's +05:30 likewise; a zone change is a
 * settings change and moves the day of later decisions only. */
void release_day_is_the_date_in_the_tenants_time_zone(void **state)
{
    /* 2026-03-29T22:30:00Z: 00:30 CEST on Monday 2026-03-30 in Berlin */
    static const int64_t monday_0030_cest = INT64_C(1774823400000000);
    /* 2027-01-15T18:30:00Z: midnight of 2027-01-16 in Kolkata */
    static const int64_t kolkata_midnight = INT64_C(1800037800000000);
    char url[4200], id[64];
    og_store *s = t_fresh_store("pzone", url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_payout_put_result pr;
    og_payout_snapshot snap;
    og_payout_decision d;
    p_world w;

    (void)state;
    p_world_new(s, raw, &w, "zone", INT64_C(100000000));
    {
        og_payout_tenant_settings t = {w.tenant, false, INT64_C(100000000),
                                       "EUR", "Europe/Berlin"};

        p_put_ok(og_payout_tenant_put(s, &t, 1, &pr), pr, "tenant zone");
    }
    p_id(id, &w, "PAY", 1);
    p_draft(s, &w, id, "10.00");
    assert_int_equal(og_payout_context_read(s, id, monday_0030_cest, &snap),
                     0);
    assert_string_equal(snap.settlement_time_zone, "Europe/Berlin");
    assert_string_equal(snap.release_day, "2026-03-30");
    assert_int_equal(og_payout_context_read(s, id, monday_0030_cest - HOUR,
                                            &snap),
                     0);
    assert_string_equal(snap.release_day, "2026-03-29"); /* 23:30 CEST */
    {
        og_payout_decide_req r = p_req(id);

        r.not_before_us = monday_0030_cest;
        r.expires_at_us = monday_0030_cest + 20 * MINUTE;
        d = p_decide(s, &r);
        assert_int_equal(d.verdict.outcome, OG_PAYOUT_ALLOWED);
        assert_string_equal(d.release_day, "2026-03-30");
        assert_string_equal(p_get(s, id).release_day, "2026-03-30");
    }
    {
        og_payout_tenant_settings t = {w.tenant, false, INT64_C(100000000),
                                       "EUR", "Asia/Kolkata"};

        p_put_ok(og_payout_tenant_put(s, &t, 2, &pr), pr, "tenant zone");
    }
    p_id(id, &w, "PAY", 2);
    p_draft(s, &w, id, "10.00");
    assert_int_equal(og_payout_context_read(s, id, kolkata_midnight, &snap),
                     0);
    assert_string_equal(snap.settlement_time_zone, "Asia/Kolkata");
    assert_int_equal(snap.ctx.tenant.settings_version, 3);
    assert_string_equal(snap.release_day, "2027-01-16");
    assert_int_equal(og_payout_context_read(s, id, kolkata_midnight - 1,
                                            &snap),
                     0);
    assert_string_equal(snap.release_day, "2027-01-15");
    t_raw_close(raw);
    og_store_free(s);
}

/* Migration 12 on a store schema 10 left with tenants: each offset becomes
 * the zone of that fixed offset ("UTC", "Etc/GMT-N" for UTC+N, "Etc/GMT+N"
 * for UTC-N), the tenants keep their versions, and the release row is
 * seeded; an offset no such zone has stops the migration, which changes
 * nothing. */
void migration_12_turns_offsets_into_zones(void **state)
{
    static const struct {
        const char *id;
        int offset;
        const char *zone;
    } rows[] = {
        {"T-m0", 0, "UTC"},          {"T-m60", 60, "Etc/GMT-1"},
        {"T-m-300", -300, "Etc/GMT+5"}, {"T-m840", 840, "Etc/GMT-14"},
        {"T-m-720", -720, "Etc/GMT+12"},
    };
    char url[4200], sql[1024], *zone;
    og_store_options o;
    og_store *s = NULL;
    t_raw *raw;
    int from = -1, to = -1;

    (void)state;
    og_store_options_default(&o);
    o.consumption_keys = t_keys;
    for (int round = 0; round < 2; round++) {
        t_new_store_url(round == 0 ? "pmig12" : "pmig12bad", url, sizeof url);
        assert_int_equal(og__store_migrate_to(url, &o, 10, &from, &to), 0);
        assert_int_equal(to, 10);
        raw = t_raw_open_url(url);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            snprintf(sql, sizeof sql,
                     t_kind == T_POSTGRES
                         ? "INSERT INTO tenants VALUES ('%s', false, 100,"
                           " 'EUR', %d, 4, now())"
                         : "INSERT INTO tenants VALUES ('%s', 0, 100, 'EUR',"
                           " %d, 4, 0)",
                     rows[i].id, rows[i].offset);
            p_raw_exec(raw, sql);
        }
        if (round == 1) { /* India's +05:30 has no fixed-offset name */
            p_raw_exec(raw, t_kind == T_POSTGRES
                                ? "INSERT INTO tenants VALUES ('T-m330',"
                                  " false, 100, 'EUR', 330, 1, now())"
                                : "INSERT INTO tenants VALUES ('T-m330', 0,"
                                  " 100, 'EUR', 330, 1, 0)");
            assert_true(og_store_migrate(url, &o, &from, &to) < 0);
            /* SQLite migrates in one transaction, PostgreSQL one per
             * migration: 12 is never recorded, and nothing of it stays */
            assert_true(t_raw_int(raw, "SELECT max(version) FROM"
                                       " og_schema_migrations") < 12);
            assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM tenants"
                                            " WHERE settlement_offset_minutes"
                                            " = 330"),
                             1);
            t_raw_close(raw);
            continue;
        }
        assert_int_equal(og_store_migrate(url, &o, &from, &to), 0);
        assert_int_equal(from, 10);
        assert_int_equal(to, OG_SCHEMA_VERSION);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            snprintf(sql, sizeof sql,
                     "SELECT settlement_time_zone FROM tenants"
                     " WHERE tenant_id = '%s' AND settings_version = 4",
                     rows[i].id);
            zone = f_line(raw, sql);
            assert_string_equal(zone, rows[i].zone);
            free(zone);
            assert_int_equal(og_payout_time_zone_check(rows[i].zone), 0);
        }
        zone = f_line(raw, "SELECT current_version FROM"
                           " payout_policy_releases");
        assert_string_equal(zone, OG_PAYOUT_POLICY_VERSION);
        free(zone);
        assert_int_equal(og_store_open(url, NULL, &s), 0);
        {
            char cur[OG_ID_MAX + 1];

            assert_int_equal(og_payout_policy_release_get(s, cur), 0);
            assert_string_equal(cur, OG_PAYOUT_POLICY_VERSION);
        }
        og_store_free(s);
        s = NULL;
        t_raw_close(raw);
    }
}
