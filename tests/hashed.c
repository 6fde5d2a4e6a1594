/*
 * hashed.c — hashed consumption keys (issue 6, item 3), against the real
 * engine. Each test makes the stores it needs, in the keys it needs, so the
 * group runs the same in every suite:
 *
 *   conformance sqlite|postgres hashed
 *
 * The rest of the store suites run unchanged on a hashed store too
 * (meson: *-hashed, argv[4] "hashed"); these tests prove what only hashed
 * stores claim: the key's encoding in both engines' SQL, a table without
 * readable ids, refusal across store objects and processes, and keys that
 * are the store's own.
 */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

#define SEC INT64_C(1000000)

static const char *const h_revokers[] = {"supervisor-3"};
static const og_revoke_policy h_policy = {h_revokers, 1};

/* A token-form grant (issuer, grant_id) expiring in 15 minutes, its intent
 * with a fresh operation id in op. */
static void h_case(og_grant *g, og_intent *in, char op[OG_UUID_LEN + 1],
                   const char *issuer, const char *grant_id,
                   const char *family)
{
    t_uuid(op);
    *g = (og_grant){issuer, grant_id, t_now_us() + 15 * 60 * SEC, family,
                    OG_FORM_TOKEN};
    *in = (og_intent){op, "agent-17", "A-1187", "250.00", "USD"};
}

static og_admission h_admit(og_store *s, const og_grant *g,
                            const og_intent *in)
{
    og_admission a;

    assert_int_equal(og_admit(s, g, in, &a), 0);
    return a;
}

/* Records the issuance of a token-form grant (the log revocation reads). */
static void h_issue(og_store *s, const og_grant *g, const og_intent *in)
{
    char digest[65];
    og_issuance iss;
    og_issue_outcome o;

    assert_int_equal(og_params_digest(in->account_id, in->amount,
                                      in->currency, digest), 0);
    iss = (og_issuance){g->issuer, g->grant_id, g->family, in->caller_id,
                        "credit.apply", digest, t_now_us() - SEC,
                        g->expires_at_us, OG_FORM_TOKEN};
    assert_int_equal(og_issuance_record(s, &iss, &o), 0);
    assert_int_equal(o, OG_ISSUE_RECORDED);
}

/* Runs the oncegate program with argv, quietly; its exit status. */
static int h_oncegate(char *const argv[])
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int st;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null",
                                     O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
                                     O_WRONLY, 0);
    assert_int_equal(posix_spawn(&pid, t_oncegate_bin(), &fa, NULL, argv,
                                 environ),
                     0);
    posix_spawn_file_actions_destroy(&fa);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Rows of grant_consumptions under (issuer, grant_id)'s C-computed key. */
static int64_t h_key_rows(t_raw *raw, const char *issuer, const char *grant_id)
{
    unsigned char key[OG_CONSUMPTION_KEY_LEN];
    char lit[128];

    assert_int_equal(og_consumption_key(issuer, grant_id, key), 0);
    return t_raw_int(raw, "SELECT count(*) FROM grant_consumptions"
                          " WHERE key_hash = %s",
                     t_key_literal(key, lit, sizeof lit));
}

/* 1 when the store's SQL og_consumption_key(issuer, grant_id) is the C
 * function's key. */
static int64_t h_sql_agrees(t_raw *raw, const char *issuer,
                            const char *grant_id)
{
    unsigned char key[OG_CONSUMPTION_KEY_LEN];
    char lit[128];

    assert_int_equal(og_consumption_key(issuer, grant_id, key), 0);
    return t_raw_int(raw,
                     t_kind == T_POSTGRES
                         ? "SELECT (og_consumption_key('%s', '%s') = %s)::int"
                         : "SELECT og_consumption_key('%s', '%s') = %s",
                     issuer, grant_id, t_key_literal(key, lit, sizeof lit));
}

/* ===========================================================================
 * The encoding, in both engines' SQL and through the store's own paths
 * ========================================================================= */
static void hashed_key_encoding_is_length_prefixed_so_ab_c_and_a_bc_differ(
    void **state)
{
    char url[4200], fam[32], u[OG_UUID_LEN + 1];
    og_store *s = t_migrated_store("hkey", OG_KEYS_HASHED, url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_grant g1, g2;
    og_intent in1, in2;
    char op1[OG_UUID_LEN + 1], op2[OG_UUID_LEN + 1];
    og_revoke_outcome ro;
    og_strv list = {0};
    og_admission a;

    /* The SQL function, which computes every key this store writes or looks
     * up, is the C function — in this engine. */
    assert_int_equal(h_sql_agrees(raw, "ab", "c"), 1);
    assert_int_equal(h_sql_agrees(raw, "a", "bc"), 1);
    assert_int_equal(h_sql_agrees(raw, "support-approvals", "g-41c9"), 1);
    assert_int_equal(t_raw_int(raw,
                               t_kind == T_POSTGRES
                                   ? "SELECT (og_consumption_key('ab', 'c') <>"
                                     " og_consumption_key('a', 'bc'))::int"
                                   : "SELECT og_consumption_key('ab', 'c') <>"
                                     " og_consumption_key('a', 'bc')"),
                     1);

    /* Through the store: ("ab", "c") and ("a", "bc") are two grants. One is
     * revoked with its family, from the issuance log's rows (the key
     * computed by SQL over stored ids); the other is then still admitted
     * (the key computed from the request). Each row sits under the key the
     * C function computes. */
    t_uuid(u);
    snprintf(fam, sizeof fam, "fam-%.12s", u);
    h_case(&g1, &in1, op1, "ab", "c", fam);
    h_case(&g2, &in2, op2, "a", "bc", fam);
    h_issue(s, &g1, &in1);
    h_issue(s, &g2, &in2);
    assert_int_equal(og_family_revoke(s, &h_policy, "ab", fam, "supervisor-3",
                                      &ro, &list),
                     0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(list.n, 1); /* families are per issuer: only "ab"'s */
    assert_string_equal(list.v[0], "c");
    og_strv_free(&list);
    assert_int_equal(h_key_rows(raw, "ab", "c"), 1);
    assert_int_equal(h_key_rows(raw, "a", "bc"), 0);

    /* refused, and reported from the key: the family's revocation holds it */
    a = h_admit(s, &g1, &in1);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
    a = h_admit(s, &g2, &in2);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    assert_string_equal(a.operation.issuer, "a");
    assert_string_equal(a.operation.grant_id, "bc");
    assert_int_equal(h_key_rows(raw, "a", "bc"), 1);

    /* A revocation by the request's key (og_revoke) of ("ab", "c") meets the
     * key the family revocation's SQL wrote: already held. */
    {
        og_revocation rv = {"ab", "c", "supervisor-3", g1.expires_at_us,
                            OG_FORM_TOKEN};

        assert_int_equal(og_revoke(s, &h_policy, &rv, &ro), 0);
        assert_int_equal(ro, OG_REVOKE_ALREADY_USED_OR_REVOKED);
    }
    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM grant_consumptions"),
                     2);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * The table holds keys, never ids
 * ========================================================================= */

/* Rows of grant_consumptions in which text appears anywhere: in a column's
 * text or in the key's bytes. */
static int64_t h_rows_containing(t_raw *raw, const char *text)
{
    if (t_kind == T_POSTGRES)
        return t_raw_int(raw,
                         "SELECT count(*) FROM grant_consumptions c"
                         " WHERE strpos(c::text, '%s') > 0"
                         "    OR position(convert_to('%s', 'UTF8') IN c.key_hash) > 0",
                         text, text);
    return t_raw_int(raw,
                     "SELECT count(*) FROM grant_consumptions"
                     " WHERE instr(key_hash, CAST('%s' AS BLOB)) > 0"
                     "    OR instr(coalesce(operation_id, ''), '%s') > 0"
                     "    OR instr(kind, '%s') > 0"
                     "    OR instr(CAST(consumed_at AS TEXT), '%s') > 0"
                     "    OR instr(CAST(retain_until AS TEXT), '%s') > 0",
                     text, text, text, text, text);
}

static void hashed_store_keeps_no_readable_ids_in_consumptions(void **state)
{
    char url[4200], u[OG_UUID_LEN + 1], issuer[48], fam[32];
    char ids[4][48];
    og_store *s = t_migrated_store("hids", OG_KEYS_HASHED, url, sizeof url);
    t_raw *raw = t_raw_open_url(url);
    og_grant g[4];
    og_intent in[4];
    char op[4][OG_UUID_LEN + 1];
    og_revoke_outcome ro;
    og_revocation rv;
    og_consume_result cr;
    og_strv list = {0};
    og_admission a;
    og_operation got;

    t_uuid(u);
    snprintf(issuer, sizeof issuer, "issuer-%.8s", u);
    snprintf(fam, sizeof fam, "fam-%.8s", u);
    for (int i = 0; i < 4; i++) {
        t_uuid(u);
        snprintf(ids[i], sizeof ids[i], "grant-%d-%.8s", i, u);
        h_case(&g[i], &in[i], op[i], issuer, ids[i], i == 3 ? fam : NULL);
        h_issue(s, &g[i], &in[i]);
    }
    /* Every kind of claim: an admission, a revocation, the consume verdict,
     * a family's revocation. */
    a = h_admit(s, &g[0], &in[0]);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    rv = (og_revocation){issuer, ids[1], "supervisor-3", 0, OG_FORM_TOKEN};
    assert_int_equal(og_revoke(s, &h_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(og_consume(s, &g[2], &cr), 0);
    assert_true(cr.consumed);
    assert_int_equal(og_family_revoke(s, &h_policy, issuer, fam,
                                      "supervisor-3", &ro, &list),
                     0);
    assert_int_equal(list.n, 1);
    og_strv_free(&list);

    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM grant_consumptions"),
                     4);
    /* The table's columns: a key and the claim's facts, no identifier. */
    assert_int_equal(
        t_raw_int(raw, t_kind == T_POSTGRES
                           ? "SELECT count(*) FROM information_schema.columns"
                             " WHERE table_name = 'grant_consumptions'"
                             "   AND table_schema = current_schema()"
                           : "SELECT count(*) FROM"
                             " pragma_table_info('grant_consumptions')"),
        5);
    assert_int_equal(
        t_raw_int(raw, t_kind == T_POSTGRES
                           ? "SELECT count(*) FROM information_schema.columns"
                             " WHERE table_name = 'grant_consumptions'"
                             "   AND table_schema = current_schema()"
                             "   AND column_name IN ('key_hash', 'operation_id',"
                             "     'consumed_at', 'retain_until', 'kind')"
                           : "SELECT count(*) FROM"
                             " pragma_table_info('grant_consumptions')"
                             " WHERE name IN ('key_hash', 'operation_id',"
                             "   'consumed_at', 'retain_until', 'kind')"),
        5);
    /* No row holds the issuer or a grant id, as text or as key bytes. */
    assert_int_equal(h_rows_containing(raw, issuer), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(h_rows_containing(raw, ids[i]), 0);
        assert_int_equal(h_key_rows(raw, issuer, ids[i]), 1);
    }
    /* The operation record keeps the readable ids for audit. */
    assert_int_equal(og_operation_get(s, op[0], &got), 1);
    assert_string_equal(got.issuer, issuer);
    assert_string_equal(got.grant_id, ids[0]);
    assert_int_equal(t_raw_int(raw,
                               "SELECT count(*) FROM operations"
                               " WHERE issuer = '%s' AND grant_id = '%s'",
                               issuer, ids[0]),
                     1);
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * A replay is refused by every store object and every process
 * ========================================================================= */

/* In a child process with its own store object on url: a replay of (g, in)
 * under another operation id must be refused and the same operation's retry
 * must be answered with its record. Exit 0 when both hold. */
static void h_child_replays(const char *url, const og_grant *g,
                            const og_intent *in, const char *admitted_op)
{
    og_store *s = NULL;
    og_intent other = *in;
    char op[OG_UUID_LEN + 1];
    og_admission a;

    if (og_store_open(url, NULL, &s) != 0 ||
        og_store_consumption_keys(s) != OG_KEYS_HASHED)
        _exit(2);
    t_uuid(op);
    other.operation_id = op;
    if (og_admit(s, g, &other, &a) != 0 || a.outcome != OG_OUTCOME_REFUSED ||
        a.refusal != OG_REFUSAL_GRANT_SPENT)
        _exit(3);
    if (og_admit(s, g, in, &a) != 0 ||
        a.outcome != OG_OUTCOME_ALREADY_ADMITTED ||
        strcmp(a.operation.operation_id, admitted_op) != 0)
        _exit(4);
    og_store_free(s);
    _exit(0);
}

static void hashed_store_refuses_a_replay_across_store_objects_and_processes(
    void **state)
{
    char url[4200], gid[64], op2[OG_UUID_LEN + 1], op3[OG_UUID_LEN + 1];
    og_store *a_store = t_migrated_store("hreplay", OG_KEYS_HASHED, url,
                                         sizeof url);
    og_store *b_store = t_store_url(url, 0, 0);
    t_raw *raw = t_raw_open_url(url);
    og_grant g;
    og_intent in, other;
    char op[OG_UUID_LEN + 1], expires[40];
    og_admission first, a;
    pid_t kid;
    int st;

    /* Both objects read the keys from the store. */
    assert_int_equal(og_store_consumption_keys(a_store), OG_KEYS_HASHED);
    assert_int_equal(og_store_consumption_keys(b_store), OG_KEYS_HASHED);

    t_grant_id(gid, sizeof gid);
    h_case(&g, &in, op, "support-approvals", gid, NULL);
    first = h_admit(a_store, &g, &in);
    assert_int_equal(first.outcome, OG_OUTCOME_ADMITTED);

    /* Another store object: a new operation is refused, the same one gets
     * the stored record. */
    other = in;
    t_uuid(op2);
    other.operation_id = op2;
    a = h_admit(b_store, &g, &other);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    a = h_admit(b_store, &g, &in);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    assert_string_equal(a.operation.operation_id, op);

    /* A restarted "process": both objects gone, a new one. */
    og_store_free(a_store);
    og_store_free(b_store);
    b_store = t_store_url(url, 0, 0);
    a = h_admit(b_store, &g, &other);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    og_store_free(b_store);

    /* Another OS process with its own store object. */
    fflush(NULL);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0)
        h_child_replays(url, &g, &in, op);
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);

    /* `oncegate admit`, a separate program on the same store: refused
     * (exit 1). */
    og_time_format_rfc3339(g.expires_at_us, expires, sizeof expires);
    t_uuid(op3);
    {
        char *argv[] = {(char *)"oncegate", (char *)"admit",
                        (char *)"--store", url,
                        (char *)"--issuer", (char *)g.issuer,
                        (char *)"--grant-id", gid,
                        (char *)"--expires-at", expires,
                        (char *)"--operation-id", op3,
                        (char *)"--caller", (char *)"agent-17",
                        (char *)"--account", (char *)"A-1187",
                        (char *)"--amount", (char *)"250.00",
                        (char *)"--currency", (char *)"USD", NULL};

        assert_int_equal(h_oncegate(argv), 1); /* refused */
    }
    /* One claim, one operation, whatever asked. */
    assert_int_equal(h_key_rows(raw, "support-approvals", gid), 1);
    assert_int_equal(t_raw_int(raw,
                               "SELECT count(*) FROM operations"
                               " WHERE grant_id = '%s'",
                               gid),
                     1);
    t_raw_close(raw);
}

/* ===========================================================================
 * The keys are the store's: recorded by migration 5, read on every open
 * ========================================================================= */
static og_store_options h_opts(og_consumption_keys keys)
{
    og_store_options o;

    og_store_options_default(&o);
    o.pool_size = 2;
    o.consumption_keys = keys;
    return o;
}

/* The keys og_store_settings records: 1 hashed, 0 readable. */
static int64_t h_recorded_hashed(t_raw *raw)
{
    return t_raw_int(raw, "SELECT count(*) FROM og_store_settings"
                          " WHERE consumption_keys = 'hashed'");
}

static void store_mode_is_recorded_in_the_store_and_read_on_open(void **state)
{
    char hurl[4200], rurl[4200];
    og_store_options asked;
    og_store *s = NULL;
    t_raw *raw;
    og_grant g;
    og_intent in;
    char op[OG_UUID_LEN + 1], gid[64];
    og_admission a;
    int from = -1, to = -1;
    pid_t kid;
    int st;

    /* A new store migrated hashed records it; an object opened without
     * asking reads it, one that asks for readable keys is refused. */
    t_new_store_url("hmode", hurl, sizeof hurl);
    asked = h_opts(OG_KEYS_HASHED);
    assert_int_equal(og_store_migrate(hurl, &asked, &from, &to), 0);
    assert_int_equal(from, 0);
    assert_int_equal(to, OG_SCHEMA_VERSION);
    raw = t_raw_open_url(hurl);
    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM og_store_settings"), 1);
    assert_int_equal(h_recorded_hashed(raw), 1);
    asked = h_opts(OG_KEYS_AS_STORED);
    assert_int_equal(og_store_open(hurl, &asked, &s), 0);
    assert_int_equal(og_store_consumption_keys(s), OG_KEYS_HASHED);
    og_store_free(s);
    s = NULL;
    asked = h_opts(OG_KEYS_HASHED);
    assert_int_equal(og_store_open(hurl, &asked, &s), 0);
    og_store_free(s);
    s = NULL;
    asked = h_opts(OG_KEYS_READABLE);
    assert_int_equal(og_store_open(hurl, &asked, &s), OG_ESTORE_KEYS);
    assert_null(s);
    /* Migrating again keeps them; asking for others changes nothing. */
    assert_int_equal(og_store_migrate(hurl, &asked, &from, &to),
                     OG_ESTORE_KEYS);
    assert_int_equal(h_recorded_hashed(raw), 1);
    asked = h_opts(OG_KEYS_AS_STORED);
    assert_int_equal(og_store_migrate(hurl, &asked, &from, &to), 0);
    assert_int_equal(from, OG_SCHEMA_VERSION);
    assert_int_equal(h_recorded_hashed(raw), 1);
    /* Another process reads the same keys from the store, whatever its own
     * defaults: there is no per-process setting to disagree on. */
    fflush(NULL);
    kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        og_store *k = NULL;
        _exit(og_store_open(hurl, NULL, &k) == 0 &&
                      og_store_consumption_keys(k) == OG_KEYS_HASHED
                  ? 0
                  : 1);
    }
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    t_raw_close(raw);

    /* A readable store: the default; holding claims, it is never converted
     * once at schema 5 — asked for hashed keys, migrate refuses with a clear
     * error and leaves every row as it was. */
    t_new_store_url("rmode", rurl, sizeof rurl);
    assert_int_equal(og_store_migrate(rurl, NULL, NULL, NULL), 0);
    raw = t_raw_open_url(rurl);
    assert_int_equal(h_recorded_hashed(raw), 0);
    s = t_store_url(rurl, 0, 0);
    assert_int_equal(og_store_consumption_keys(s), OG_KEYS_READABLE);
    t_grant_id(gid, sizeof gid);
    h_case(&g, &in, op, "support-approvals", gid, NULL);
    a = h_admit(s, &g, &in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    og_store_free(s);
    s = NULL;
    asked = h_opts(OG_KEYS_HASHED);
    assert_int_equal(og_store_migrate(rurl, &asked, &from, &to),
                     OG_ESTORE_KEYS);
    assert_int_equal(og_store_open(rurl, &asked, &s), OG_ESTORE_KEYS);
    assert_string_equal(og_err_name(OG_ESTORE_KEYS),
                        "store.consumption_keys_mismatch");
    assert_int_equal(h_recorded_hashed(raw), 0);
    assert_int_equal(t_raw_int(raw,
                               "SELECT count(*) FROM grant_consumptions"
                               " WHERE issuer = 'support-approvals'"
                               "   AND grant_id = '%s'",
                               gid),
                     1);
    /* `oncegate migrate --consumption-keys hashed` says so too (78). */
    {
        char *argv[] = {(char *)"oncegate", (char *)"migrate",
                        (char *)"--store", rurl,
                        (char *)"--consumption-keys", (char *)"hashed", NULL};

        assert_int_equal(h_oncegate(argv), 78);
    }
    t_raw_close(raw);
}

/* A readable store BELOW schema 5 that is migrated hashed gets its claims
 * rewritten under their keys, in migration 5's transaction: every replay
 * that was refused before is refused after. Below-5 is made by undoing
 * migrations 15, 13, 11, 8, 7, 6 and 5 of a readable store by hand (what
 * they add or change: t_undo_migration_15, t_undo_migration_13, t_undo_migration_11, t_undo_migration_8,
 * t_undo_migration_7; the redemptions table; the settings row and table,
 * the function; their versions). */
static void readable_store_below_schema_5_migrated_hashed_keeps_every_claim(
    void **state)
{
    char url[4200], op2[OG_UUID_LEN + 1];
    og_store *s = t_migrated_store("hconv", OG_KEYS_READABLE, url, sizeof url);
    og_store_options asked = h_opts(OG_KEYS_HASHED);
    t_raw *raw = t_raw_open_url(url);
    struct {
        char gid[64], op[OG_UUID_LEN + 1];
        og_grant g;
        og_intent in;
    } adm, rev, con;
    og_revocation rv;
    og_revoke_outcome ro;
    og_consume_result cr;
    og_admission a;
    og_intent other;
    int from = -1, to = -1;

    t_grant_id(adm.gid, sizeof adm.gid);
    t_grant_id(rev.gid, sizeof rev.gid);
    t_grant_id(con.gid, sizeof con.gid);
    h_case(&adm.g, &adm.in, adm.op, "support-approvals", adm.gid, NULL);
    h_case(&rev.g, &rev.in, rev.op, "support-approvals", rev.gid, NULL);
    h_case(&con.g, &con.in, con.op, "support-approvals", con.gid, NULL);
    a = h_admit(s, &adm.g, &adm.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    rv = (og_revocation){rev.g.issuer, rev.gid, "supervisor-3",
                         rev.g.expires_at_us, OG_FORM_TOKEN};
    assert_int_equal(og_revoke(s, &h_policy, &rv, &ro), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    assert_int_equal(og_consume(s, &con.g, &cr), 0);
    assert_true(cr.consumed);
    og_store_free(s);

    t_undo_migration_15(raw);
    t_undo_migration_13(raw);
    t_undo_migration_11(raw);
    t_undo_migration_8(raw);
    t_undo_migration_7(raw);
    assert_int_equal(t_raw_exec(raw, t_kind == T_POSTGRES
                                         ? "BEGIN;"
                                           " DROP TABLE redemptions;"
                                           " DROP TABLE og_store_settings;"
                                           " DROP FUNCTION og_consumption_key(text, text);"
                                           " DELETE FROM og_schema_migrations"
                                           "   WHERE version >= 5;"
                                           " COMMIT"
                                         : "BEGIN;"
                                           " DROP TABLE redemptions;"
                                           " DROP TABLE og_store_settings;"
                                           " DELETE FROM og_schema_migrations"
                                           "   WHERE version >= 5;"
                                           " COMMIT"),
                     0);
    assert_int_equal(og_store_migrate(url, &asked, &from, &to), 0);
    assert_int_equal(from, 4); /* migration 4 (retention) stays applied */
    assert_int_equal(to, OG_SCHEMA_VERSION);
    assert_int_equal(h_recorded_hashed(raw), 1);
    assert_int_equal(t_raw_int(raw, "SELECT count(*) FROM grant_consumptions"),
                     3);
    assert_int_equal(h_key_rows(raw, adm.g.issuer, adm.gid), 1);
    assert_int_equal(h_key_rows(raw, rev.g.issuer, rev.gid), 1);
    assert_int_equal(h_key_rows(raw, con.g.issuer, con.gid), 1);
    assert_int_equal(h_rows_containing(raw, adm.gid), 0);

    s = t_store_url(url, 0, 0);
    assert_int_equal(og_store_consumption_keys(s), OG_KEYS_HASHED);
    other = adm.in;
    t_uuid(op2);
    other.operation_id = op2;
    a = h_admit(s, &adm.g, &other);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_SPENT);
    a = h_admit(s, &adm.g, &adm.in);
    assert_int_equal(a.outcome, OG_OUTCOME_ALREADY_ADMITTED);
    a = h_admit(s, &rev.g, &rev.in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_REVOKED);
    a = h_admit(s, &con.g, &con.in);
    assert_int_equal(a.outcome, OG_OUTCOME_REFUSED);
    assert_int_equal(a.refusal, OG_REFUSAL_GRANT_CONSUMED);
    og_store_free(s);
    t_raw_close(raw);
}

const struct CMUnitTest t_hashed_tests[] = {
    cmocka_unit_test(hashed_key_encoding_is_length_prefixed_so_ab_c_and_a_bc_differ),
    cmocka_unit_test(hashed_store_keeps_no_readable_ids_in_consumptions),
    cmocka_unit_test(hashed_store_refuses_a_replay_across_store_objects_and_processes),
    cmocka_unit_test(store_mode_is_recorded_in_the_store_and_read_on_open),
    cmocka_unit_test(readable_store_below_schema_5_migrated_hashed_keeps_every_claim),
};
const size_t t_hashed_tests_count =
    sizeof t_hashed_tests / sizeof t_hashed_tests[0];
