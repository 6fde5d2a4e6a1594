/*
 * test_core.c — table-driven tests of the pure core: what a zero-row
 * admission means, what a store failure means, the timing relations, and
 * the generated names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "store/store_int.h"
#include "support.h"

#define OP "6f1c2a8e-3b4d-4c5e-8f90-123456789abc"
#define OP2 "0a1b2c3d-4e5f-4a6b-9c7d-8e9fa0b1c2d3"

static og__admit_req t_req(void)
{
    og__admit_req r;
    memset(&r, 0, sizeof r);
    strcpy(r.issuer, "support-approvals");
    strcpy(r.grant_id, "g-41c9");
    r.expires_at_us = 1;
    strcpy(r.operation_id, OP);
    strcpy(r.caller_id, "agent-17");
    strcpy(r.account_id, "A-1187");
    strcpy(r.amount, "250");
    strcpy(r.currency, "USD");
    return r;
}

static og_operation t_op_for(const og__admit_req *r)
{
    og_operation op;
    memset(&op, 0, sizeof op);
    strcpy(op.operation_id, r->operation_id);
    strcpy(op.issuer, r->issuer);
    strcpy(op.grant_id, r->grant_id);
    strcpy(op.caller_id, r->caller_id);
    strcpy(op.account_id, r->account_id);
    strcpy(op.amount, r->amount);
    strcpy(op.currency, r->currency);
    op.status = OG_OP_SUCCEEDED;
    op.owner_version = 3;
    return op;
}

static void classify_unclaimed_table(void **state)
{
    enum { NO_OP, SAME_OP, OP_OTHER_CALLER, OP_OTHER_GRANT, OP_OTHER_AMOUNT,
           OP_PAYOUT };
    static const struct {
        const char *name;
        bool present, has_operation;
        const char *holder;
        int op;
        og_outcome want;
        og_refusal why;
    } cases[] = {
        {"held by this operation, same binding", true, true, OP, SAME_OP,
         OG_OUTCOME_ALREADY_ADMITTED, OG_REFUSAL_NONE},
        {"held by this operation, other caller", true, true, OP, OP_OTHER_CALLER,
         OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_MISMATCH},
        {"held by this operation, other amount", true, true, OP, OP_OTHER_AMOUNT,
         OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_MISMATCH},
        {"held by this operation id, row missing", true, true, OP, NO_OP,
         OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_MISMATCH},
        {"held by another operation", true, true, OP2, NO_OP,
         OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_SPENT},
        {"held by another op; our id names another grant", true, true, OP2,
         OP_OTHER_GRANT, OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_SPENT},
        {"held by a revocation", true, false, NULL, NO_OP, OG_OUTCOME_REFUSED,
         OG_REFUSAL_GRANT_REVOKED},
        {"held by a revocation, our op exists", true, false, NULL, SAME_OP,
         OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_REVOKED},
        {"not held, nothing: deadline", false, false, NULL, NO_OP,
         OG_OUTCOME_REFUSED, OG_REFUSAL_DEADLINE_PASSED},
        {"not held, our id bound to another grant", false, false, NULL,
         OP_OTHER_GRANT, OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_ID_TAKEN},
        {"not held (cleaned up), our own operation", false, false, NULL, SAME_OP,
         OG_OUTCOME_ALREADY_ADMITTED, OG_REFUSAL_NONE},
        {"not held, our id, other caller", false, false, NULL, OP_OTHER_CALLER,
         OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_MISMATCH},
        /* AD1: a payout attempt is never a credit caller's own operation */
        {"held by this operation id, a payout with the same binding", true,
         true, OP, OP_PAYOUT, OG_OUTCOME_REFUSED,
         OG_REFUSAL_OPERATION_MISMATCH},
        {"not held, our id, a payout with the same binding", false, false,
         NULL, OP_PAYOUT, OG_OUTCOME_REFUSED, OG_REFUSAL_OPERATION_MISMATCH},
    };
    /* Kinds, family and row-form flags (AD3, AD4). */
    static const struct {
        const char *name;
        og__consumption c;
        og_outcome want;
        og_refusal why;
    } more[] = {
        {"held by the consume verdict", {true, false, OG__CLAIM_CONSUME, "", false, false},
         OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_CONSUMED},
        {"held by a revocation, family also blocked",
         {true, false, OG__CLAIM_REVOCATION, "", true, false},
         OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_REVOKED},
        {"family blocked the claim", {false, false, OG__CLAIM_ADMISSION, "", true, false},
         OG_OUTCOME_REFUSED, OG_REFUSAL_FAMILY_REVOKED},
        {"row form: never issued", {false, false, OG__CLAIM_ADMISSION, "", false, true},
         OG_OUTCOME_REFUSED, OG_REFUSAL_NOT_ISSUED},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        og__admit_req r = t_req();
        og_admission out;
        og__classify_unclaimed(&r, &more[i].c, NULL, &out);
        if (out.outcome != more[i].want || out.refusal != more[i].why)
            print_error("case '%s': got %s/%s\n", more[i].name,
                        og_outcome_name(out.outcome), og_refusal_name(out.refusal));
        assert_int_equal(out.outcome, more[i].want);
        assert_int_equal(out.refusal, more[i].why);
        /* A key held without an operation is held for good: the refusal
         * cache may keep it, with no holder (docs/design.md, RF1, RF5). */
        assert_int_equal(out.key_held, more[i].c.present);
        assert_string_equal(out.held_by, "");
    }
    /* The consume verdict's reasons. */
    {
        og__consumption c = {true, true, OG__CLAIM_ADMISSION, OP, false, false};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_GRANT_SPENT);
        c = (og__consumption){true, false, OG__CLAIM_CONSUME, "", false, false};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_GRANT_CONSUMED);
        c = (og__consumption){true, false, OG__CLAIM_REVOCATION, "", false, false};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_GRANT_REVOKED);
        c = (og__consumption){false, false, OG__CLAIM_ADMISSION, "", true, false};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_FAMILY_REVOKED);
        c = (og__consumption){false, false, OG__CLAIM_ADMISSION, "", false, true};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_NOT_ISSUED);
        c = (og__consumption){false, false, OG__CLAIM_ADMISSION, "", false, false};
        assert_int_equal(og__classify_consume(&c), OG_REFUSAL_DEADLINE_PASSED);
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og__admit_req r = t_req();
        og__consumption c = {cases[i].present, cases[i].has_operation,
                             cases[i].has_operation ? OG__CLAIM_ADMISSION
                                                    : OG__CLAIM_REVOCATION,
                             "", false, false};
        og_operation op = t_op_for(&r);
        og_admission out;

        if (cases[i].holder)
            strcpy(c.operation_id, cases[i].holder);
        switch (cases[i].op) {
        case OP_OTHER_CALLER: strcpy(op.caller_id, "agent-99"); break;
        case OP_OTHER_GRANT: strcpy(op.grant_id, "g-other"); break;
        case OP_OTHER_AMOUNT: strcpy(op.amount, "250.01"); break;
        case OP_PAYOUT: op.kind = OG_OP_KIND_PAYOUT; break;
        default: break;
        }
        memset(&out, 0x5a, sizeof out);
        og__classify_unclaimed(&r, &c, cases[i].op == NO_OP ? NULL : &op, &out);
        if (out.outcome != cases[i].want || out.refusal != cases[i].why)
            print_error("case '%s': got %s/%s\n", cases[i].name,
                        og_outcome_name(out.outcome), og_refusal_name(out.refusal));
        assert_int_equal(out.outcome, cases[i].want);
        assert_int_equal(out.refusal, cases[i].why);
        /* key_held only for a key another operation (or a revocation)
         * holds, with the holder's id (docs/design.md, RF1). */
        if (out.outcome == OG_OUTCOME_REFUSED && c.present &&
            (!c.has_operation || strcmp(c.operation_id, r.operation_id) != 0)) {
            assert_true(out.key_held);
            assert_string_equal(out.held_by,
                                c.has_operation ? c.operation_id : "");
        } else {
            assert_false(out.key_held);
            assert_string_equal(out.held_by, "");
        }
        if (out.outcome == OG_OUTCOME_ALREADY_ADMITTED) {
            assert_memory_equal(&out.operation, &op, sizeof op);
        } else {
            /* A refusal carries nothing of any stored operation. */
            og_operation zero;
            memset(&zero, 0, sizeof zero);
            assert_memory_equal(&out.operation, &zero, sizeof zero);
        }
    }
}

static void pg_classify_table(void **state)
{
    static const struct {
        const char *sqlstate, *constraint;
        int want;
    } cases[] = {
        {"23505", "operations_pkey", OG__PG_REFUSE},
        {"23505", "operations_grant_key", OG__PG_REFUSE},
        {"23505", "grant_consumptions_pkey", OG_EINTERNAL},
        {"23505", NULL, OG_EINTERNAL},
        {"23514", "operations_amount_check", OG_EINTERNAL},
        {"23502", NULL, OG_EINTERNAL},
        {"08006", NULL, OG_ESTORE_UNAVAILABLE},
        {"08001", NULL, OG_ESTORE_UNAVAILABLE},
        {"57014", NULL, OG_ESTORE_UNAVAILABLE}, /* statement_timeout, cancel */
        {"57P01", NULL, OG_ESTORE_UNAVAILABLE}, /* terminated */
        {"57P03", NULL, OG_ESTORE_UNAVAILABLE},
        {"53300", NULL, OG_ESTORE_UNAVAILABLE},
        {"53100", NULL, OG_ESTORE_UNAVAILABLE},
        {"40001", NULL, OG_ESTORE_UNAVAILABLE},
        {"40P01", NULL, OG_ESTORE_UNAVAILABLE},
        {"25006", NULL, OG_ESTORE_UNAVAILABLE}, /* a standby */
        {"25P04", NULL, OG_ESTORE_UNAVAILABLE},
        {"55P03", NULL, OG_ESTORE_UNAVAILABLE},
        {"58030", NULL, OG_ESTORE_UNAVAILABLE},
        {"42P01", NULL, OG_EINTERNAL}, /* undefined table */
        {"42601", NULL, OG_EINTERNAL},
        {"22P02", NULL, OG_EINTERNAL},
        {"XX000", NULL, OG_EINTERNAL},
        {NULL, NULL, OG_ESTORE_UNAVAILABLE}, /* libpq's own failure */
        {"", NULL, OG_ESTORE_UNAVAILABLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(og__pg_classify(cases[i].sqlstate, cases[i].constraint),
                         cases[i].want);
}

static void sqlite_classify_table(void **state)
{
    static const struct {
        int rc, want;
    } cases[] = {
        {SQLITE_BUSY, OG_ESTORE_UNAVAILABLE},
        {SQLITE_BUSY_SNAPSHOT, OG_ESTORE_UNAVAILABLE},
        {SQLITE_LOCKED, OG_ESTORE_UNAVAILABLE},
        {SQLITE_IOERR_FSYNC, OG_ESTORE_UNAVAILABLE},
        {SQLITE_FULL, OG_ESTORE_UNAVAILABLE},
        {SQLITE_CANTOPEN, OG_ESTORE_UNAVAILABLE},
        {SQLITE_INTERRUPT, OG_ESTORE_UNAVAILABLE},
        {SQLITE_NOMEM, OG_ENOMEM},
        {SQLITE_CONSTRAINT_CHECK, OG_EINTERNAL},
        {SQLITE_CONSTRAINT_PRIMARYKEY, OG_EINTERNAL}, /* the caller handles its two */
        {SQLITE_CORRUPT, OG_EINTERNAL},
        {SQLITE_ERROR, OG_EINTERNAL},
        {SQLITE_MISUSE, OG_EINTERNAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(og__sqlite_classify(cases[i].rc), cases[i].want);
}

static void timings_relations_are_checked(void **state)
{
    og_timings t;
    const char *why = NULL;

    og_timings_default(&t);
    assert_int_equal(og_timings_check(&t, &why), 0);

    t.admission_leeway_us = -1;
    assert_int_equal(og_timings_check(&t, &why), OG_ETIMINGS);
    assert_non_null(strstr(why, "T1"));

    /* Each relation, broken alone, is the one named. */
    static const struct { const char *rel; int field; int64_t v; } bad[] = {
        {"T2", 0, 0},                      /* store_timeout */
        {"T3", 1, 10 * 1000000},           /* execution_lease = 2 x store */
        {"T4", 2, 56 * INT64_C(1000000)},  /* provider = lease - margin + 1 */
        {"T5", 3, 50 * INT64_C(1000000)},  /* lease < 3s + p + margin */
        {"T6", 4, 24 * INT64_C(1000000)},  /* recovery_lease < 2p + s */
        {"T7", 5, 130 * INT64_C(1000000)}, /* window = lease + delay + rl */
        {"T8", 6, 3600 * INT64_C(1000000)},/* retention = window */
        {"T9", 7, 15 * INT64_C(1000000)},  /* cleanup = store + step */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        og_timings_default(&t);
        switch (bad[i].field) {
        case 0: t.store_timeout_us = bad[i].v; break;
        case 1: t.execution_lease_us = bad[i].v; break;
        case 2: t.provider_timeout_us = bad[i].v; break;
        case 3: t.provider_timeout_us = 40 * INT64_C(1000000);
                t.execution_lease_us = bad[i].v; break;
        case 4: t.recovery_lease_us = bad[i].v; break;
        case 5: t.submission_window_us = bad[i].v; break;
        case 6: t.provider_key_retention_us = bad[i].v; break;
        case 7: t.cleanup_margin_us = bad[i].v; break;
        }
        why = NULL;
        assert_int_equal(og_timings_check(&t, &why), OG_ETIMINGS);
        assert_non_null(why);
        assert_non_null(strstr(why, bad[i].rel));
    }

    /* fit() repairs a long store timeout; check() then passes. */
    og_timings_default(&t);
    t.store_timeout_us = 30 * INT64_C(1000000);
    assert_int_equal(og_timings_check(&t, NULL), OG_ETIMINGS);
    og_timings_fit(&t);
    assert_int_equal(og_timings_check(&t, &why), 0);
    assert_int_equal(og_timings_check(NULL, NULL), OG_ETIMINGS);
}

static void names_are_generated_and_stable(void **state)
{
    assert_string_equal(og_err_name(OG_ESTORE_UNAVAILABLE), "store_unavailable");
    assert_string_equal(og_err_name(OG_EAMOUNT), "input.amount_invalid");
    assert_string_equal(og_err_name(0), "unknown_error");
    assert_string_equal(og_err_name(-1000), "unknown_error");
    assert_string_equal(og_strerror(1), "unknown error");
    for (int e = -1; e >= -OG__ERR_COUNT; e--) {
        assert_true(strlen(og_err_name(e)) > 0);
        assert_true(strcmp(og_strerror(e), "unknown error") != 0);
    }
    assert_string_equal(og_outcome_name(OG_OUTCOME_ALREADY_ADMITTED),
                        "already_admitted");
    assert_string_equal(og_refusal_name(OG_REFUSAL_GRANT_SPENT),
                        "grant_spent_by_other_operation");
    assert_string_equal(og_op_status_name(OG_OP_NEEDS_RECONCILIATION),
                        "NeedsReconciliation");
    assert_string_equal(og_op_status_name((og_op_status)99), "?");
    /* Schema 7 appended three statuses: the old values did not move. */
    assert_int_equal(OG_OP_NEEDS_RECONCILIATION, 4);
    assert_int_equal(OG_OP_STATUS_COUNT, 8);
    assert_string_equal(og_op_status_name(OG_OP_STARTED), "Started");
    assert_string_equal(og_op_status_name(OG_OP_NOT_STARTED), "NotStarted");
    assert_string_equal(og_op_status_name(OG_OP_NOT_APPLIED), "NotApplied");
    assert_int_equal(og__op_status_parse("NotApplied"), OG_OP_NOT_APPLIED);
    assert_string_equal(og_op_kind_name(OG_OP_KIND_CREDIT), "credit");
    assert_string_equal(og_op_kind_name(OG_OP_KIND_PAYOUT), "payout");
    assert_string_equal(og_op_kind_name((og_op_kind)7), "?");
    assert_int_equal(og__op_kind_parse("payout"), OG_OP_KIND_PAYOUT);
    assert_int_equal(og__op_kind_parse("Payout"), -1);
    assert_int_equal(og__op_kind_parse(NULL), -1);
    assert_string_equal(og_err_name(OG_ECLIENT_REFERENCE),
                        "input.client_reference_invalid");
    assert_int_equal(og__op_status_parse("Admitted"), OG_OP_ADMITTED);
    assert_int_equal(og__op_status_parse("admitted"), -1);
    assert_int_equal(og__op_status_parse(NULL), -1);
}

static void copy_refuses_what_does_not_fit(void **state)
{
    char buf[4] = "abc";

    assert_int_equal(og__copy(buf, sizeof buf, "xyz"), 0);
    assert_string_equal(buf, "xyz");
    assert_int_equal(og__copy(buf, sizeof buf, "wxyz"), -1);
    assert_string_equal(buf, "xyz"); /* untouched */
    assert_int_equal(og__copy(buf, sizeof buf, NULL), -1);
}

/* og__grow doubles from first, stops at max exactly, and at the cap refuses
 * with the array and its capacity untouched (still the caller's to free). */
static void grow_doubles_up_to_its_cap_and_no_further(void **state)
{
    static const size_t want[] = {3, 6, 10};
    int *v = NULL, *g;
    size_t cap = 0;

    (void)state;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        g = og__grow(v, sizeof *v, &cap, 3, 10);
        assert_non_null(g);
        assert_int_equal(cap, want[i]); /* 3, 6, then 10 (the cap), not 12 */
        v = g;
        for (size_t k = 0; k < cap; k++)
            v[k] = (int)k; /* every element usable (ASan checks) */
    }
    assert_null(og__grow(v, sizeof *v, &cap, 3, 10));
    assert_int_equal(cap, 10);
    assert_int_equal(v[9], 9); /* untouched */
    free(v);
    cap = 0; /* an element size that overflows is refused, not wrapped */
    assert_null(og__grow(NULL, SIZE_MAX / 2, &cap, 4, 8));
    assert_int_equal(cap, 0);
}

/* ===========================================================================
 * The hashed consumption key (lib/core/consumption_key.c)
 * ========================================================================= */

/* Expected keys computed independently (Python's hashlib over
 * struct.pack('>I', len) framing). */
static const struct {
    const char *issuer, *grant_id, *hex;
} key_vectors[] = {
    {"ab", "c", "f2939f903016e5bb29b1e4a61cdbd376220ca03a24180b39995f2d50f2e0a647"},
    {"a", "bc", "b534ce16ac9c8b36823f39a395ce8e0e3c7ad9605b82b5444f18cadacd217a5d"},
    {"support-approvals", "g-41c9",
     "648fb23a7c3dfefd87926134816283c484e05bb1e289bcd67a0b07dacacbcce7"},
};

static void key_hex(const unsigned char k[OG_CONSUMPTION_KEY_LEN],
                    char hex[2 * OG_CONSUMPTION_KEY_LEN + 1])
{
    for (int i = 0; i < OG_CONSUMPTION_KEY_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
}

static void consumption_key_matches_known_vectors(void **state)
{
    unsigned char k[OG_CONSUMPTION_KEY_LEN];
    char hex[2 * OG_CONSUMPTION_KEY_LEN + 1];

    for (size_t i = 0; i < sizeof key_vectors / sizeof key_vectors[0]; i++) {
        assert_int_equal(og_consumption_key(key_vectors[i].issuer,
                                            key_vectors[i].grant_id, k), 0);
        key_hex(k, hex);
        assert_string_equal(hex, key_vectors[i].hex);
    }
    /* the empty grant id the pure function accepts (the API does not) */
    assert_int_equal(og__consumption_key("abc", 3, "", 0, k), 0);
    key_hex(k, hex);
    assert_string_equal(
        hex, "2ddb14a1438cb06f0658085e174f50efba5cfb97b27cfcc9d5c69735e9602e1e");
    /* the longest identifiers */
    {
        char big_i[OG_ID_MAX + 1], big_g[OG_ID_MAX + 1];

        memset(big_i, 'x', OG_ID_MAX);
        big_i[OG_ID_MAX] = '\0';
        memset(big_g, 'y', OG_ID_MAX);
        big_g[OG_ID_MAX] = '\0';
        assert_int_equal(og_consumption_key(big_i, big_g, k), 0);
        key_hex(k, hex);
        assert_string_equal(
            hex,
            "49cdb5ca2549a02fcdf2cb0df2be1bdd3615247172492d73bd7236ba13f7f295");
    }
    /* the identifiers' rules: what could never be a stored key is refused */
    assert_int_equal(og_consumption_key("", "c", k), OG_EISSUER);
    assert_int_equal(og_consumption_key("a b", "c", k), OG_EISSUER);
    assert_int_equal(og_consumption_key("ab", NULL, k), OG_EGRANT_ID);
    assert_int_equal(og_consumption_key("ab", "c", NULL), OG_EINVAL);
}

static void hashed_key_encoding_is_length_prefixed_so_ab_c_and_a_bc_differ(
    void **state)
{
    unsigned char abc[OG_CONSUMPTION_KEY_LEN], a_bc[OG_CONSUMPTION_KEY_LEN],
        plain[OG_CONSUMPTION_KEY_LEN];
    char a_hex[2 * OG_CONSUMPTION_KEY_LEN + 1], b_hex[2 * OG_CONSUMPTION_KEY_LEN + 1];

    assert_int_equal(og_consumption_key("ab", "c", abc), 0);
    assert_int_equal(og_consumption_key("a", "bc", a_bc), 0);
    key_hex(abc, a_hex);
    key_hex(a_bc, b_hex);
    assert_string_not_equal(a_hex, b_hex);
    /* ...where hashing the plain concatenation would not tell them apart */
    crypto_hash_sha256(plain, (const unsigned char *)"abc", 3);
    assert_memory_not_equal(plain, abc, sizeof abc);
    assert_memory_not_equal(plain, a_bc, sizeof a_bc);
    /* every split of one string into (issuer, grant id) has its own key */
    {
        static const char text[] = "support-approvals";
        unsigned char keys[sizeof text - 2][OG_CONSUMPTION_KEY_LEN];
        char issuer[sizeof text], *grant_id;

        for (size_t cut = 1; cut < sizeof text - 1; cut++) {
            memcpy(issuer, text, cut);
            issuer[cut] = '\0';
            grant_id = (char *)text + cut;
            assert_int_equal(og_consumption_key(issuer, grant_id,
                                                keys[cut - 1]), 0);
            for (size_t j = 0; j + 1 < cut; j++)
                assert_memory_not_equal(keys[j], keys[cut - 1],
                                        OG_CONSUMPTION_KEY_LEN);
        }
    }
}

/* SQLite's og_consumption_key() — the function every connection of a
 * SQLite store registers — against the C function it wraps. */
static void sqlite_key_function_agrees_with_c(void **state)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    unsigned char k[OG_CONSUMPTION_KEY_LEN];

    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(og__sqlite_register_key_function(db), SQLITE_OK);
    for (size_t i = 0; i < sizeof key_vectors / sizeof key_vectors[0]; i++) {
        assert_int_equal(sqlite3_prepare_v2(db,
                                            "SELECT og_consumption_key(?1, ?2)",
                                            -1, &st, NULL),
                         SQLITE_OK);
        sqlite3_bind_text(st, 1, key_vectors[i].issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, key_vectors[i].grant_id, -1, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_bytes(st, 0), OG_CONSUMPTION_KEY_LEN);
        assert_int_equal(og_consumption_key(key_vectors[i].issuer,
                                            key_vectors[i].grant_id, k), 0);
        assert_memory_equal(sqlite3_column_blob(st, 0), k, sizeof k);
        sqlite3_finalize(st);
    }
    /* deterministic: usable where SQLite requires it; NULL in, NULL out */
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT og_consumption_key(NULL, 'c')"
                                        " IS NULL",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 1);
    sqlite3_finalize(st);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TABLE t (i TEXT, g TEXT,"
                                  " k BLOB AS (og_consumption_key(i, g)))",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
}

static void consumption_keys_have_names(void **state)
{
    og_consumption_keys k = OG_KEYS_AS_STORED;

    assert_string_equal(og_consumption_keys_name(OG_KEYS_READABLE), "readable");
    assert_string_equal(og_consumption_keys_name(OG_KEYS_HASHED), "hashed");
    assert_string_equal(og_consumption_keys_name((og_consumption_keys)9), "?");
    assert_int_equal(og_consumption_keys_parse("hashed", &k), 0);
    assert_int_equal(k, OG_KEYS_HASHED);
    assert_int_equal(og_consumption_keys_parse("readable", &k), 0);
    assert_int_equal(k, OG_KEYS_READABLE);
    assert_int_equal(og_consumption_keys_parse("Hashed", &k), OG_EINVAL);
    assert_int_equal(og_consumption_keys_parse(NULL, &k), OG_EINVAL);
    assert_string_equal(og_err_name(OG_ESTORE_KEYS),
                        "store.consumption_keys_mismatch");
}

int main(void)
{
    static const struct CMUnitTest tests[] = {
        cmocka_unit_test(consumption_key_matches_known_vectors),
        cmocka_unit_test(hashed_key_encoding_is_length_prefixed_so_ab_c_and_a_bc_differ),
        cmocka_unit_test(sqlite_key_function_agrees_with_c),
        cmocka_unit_test(consumption_keys_have_names),
        cmocka_unit_test(classify_unclaimed_table),
        cmocka_unit_test(pg_classify_table),
        cmocka_unit_test(sqlite_classify_table),
        cmocka_unit_test(timings_relations_are_checked),
        cmocka_unit_test(names_are_generated_and_stable),
        cmocka_unit_test(copy_refuses_what_does_not_fit),
        cmocka_unit_test(grow_doubles_up_to_its_cap_and_no_further),
    };
    return t_run_tests("core", tests, NULL, NULL);
}
