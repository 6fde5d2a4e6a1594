/*
 * test_classify.c — claims about what a provider's answer means
 * (lib/core/classify.c, providers/sandbox-credits.v1.json,
 * providers/sandbox-payouts.v1.json):
 *
 *   - every vector in tests/vectors/sandbox-credits.v1.jsonl and
 *     tests/vectors/sandbox-payouts.v1.jsonl — answers the real sandbox
 *     gave (recorded by `provider_test --record credits|payouts PATH`) and
 *     invented undocumented ones — classifies through its table exactly as
 *     its "expect" says, and every create rule of each table is exercised
 *     by at least one vector;
 *   - the loader is strict: each refusal carries its stable code and the
 *     path it is about, *out stays untouched, and rules that claim more than
 *     their answer proves (CT1-CT5) are refused;
 *   - anything undocumented is UNKNOWN: every status 100..599 without a
 *     rule, any error code a status does not list, every transport kind the
 *     table does not name, every 2xx body that does not prove success;
 *     nothing but a documented 2xx is SUCCEEDED, nothing but connect_failed
 *     among transport failures is no-effect;
 *   - lookups answer found / found_multiple / pending / not_found and never
 *     "failed"; an undocumented lookup answer is OG_EPROVIDER_UNAVAILABLE;
 *     an effect is final in any of the table's succeeded_if states (a
 *     payout completed, or returned); an effect listed under the reference
 *     with other terms (destination, amount, currency) is terms_mismatch,
 *     whatever else is listed;
 *   - reasons never carry the provider's text.
 *
 * OG_TEST_SOURCE_ROOT is the repository root.
 */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>

#include "oncegate/provider.h"
#include "support.h"

#define TABLE_PATH "providers/sandbox-credits.v1.json"
#define VECTORS_PATH "tests/vectors/sandbox-credits.v1.jsonl"
#define PAYOUTS_TABLE_PATH "providers/sandbox-payouts.v1.json"
#define PAYOUTS_VECTORS_PATH "tests/vectors/sandbox-payouts.v1.jsonl"

/* The statuses the sandbox table has rules for (written out here, not
 * read from the table, so the test does not trust what it tests). */
static const int documented[] = {201, 202, 400, 401, 404, 405,
                                 413, 415, 422, 429, 500};

static og_provider_table *g_table; /* the sandbox table, for every test */

/* ===========================================================================
 * Helpers
 * ========================================================================= */

/* OG_TEST_SOURCE_ROOT/rel into buf. */
static void src_path(char buf[PATH_MAX], const char *rel)
{
    const char *root = getenv("OG_TEST_SOURCE_ROOT");
    int n;

    if (!root)
        root = ".";
    n = snprintf(buf, PATH_MAX, "%s/%s", root, rel);
    assert_true(n > 0 && n < PATH_MAX);
}

/* The whole file, malloc'd and terminated; *len its size. */
static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    assert_true(n >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

static bool is_documented(int status)
{
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
        if (documented[i] == status)
            return true;
    return false;
}

/* A complete answer with status and body text. */
static og_provider_response answer(int status, const char *body)
{
    og_provider_response r = {.transport = OG_TRANSPORT_OK,
                              .status = status,
                              .body = body,
                              .body_len = body ? strlen(body) : 0};
    return r;
}

static og_provider_outcome classify(const og_provider_table *t,
                                    og_provider_response r)
{
    og_provider_outcome o;

    memset(&o, 0x5a, sizeof o); /* classify must write every member */
    og_provider_classify(t, &r, &o);
    return o;
}

static int setup(void **state)
{
    char path[PATH_MAX];
    og_provider_table_error err;

    src_path(path, TABLE_PATH);
    if (og_provider_table_load_file(path, &g_table, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    og_provider_table_free(g_table);
    g_table = NULL;
    return 0;
}

/* ===========================================================================
 * Recorded vectors
 * ========================================================================= */

/* The vector's string member, failing the test when it is missing. */
static const char *vstr(const json_t *v, const char *name, const char *vname)
{
    const char *s = json_string_value(json_object_get(v, name));
    if (!s)
        fail_msg("vector %s: member %s missing or not a string", vname, name);
    return s;
}

/* Checks one outcome against "expect"; names the vector on failure. */
static void expect_outcome(const char *name, const json_t *expect,
                           const og_provider_outcome *o)
{
    const char *cls = vstr(expect, "class", name);
    const char *reason = vstr(expect, "reason", name);
    const char *ref = vstr(expect, "reference", name);

    if (strcmp(og_outcome_class_name(o->cls), cls) != 0 ||
        strcmp(o->reason, reason) != 0 || strcmp(o->reference, ref) != 0)
        fail_msg("vector %s: got class %s reason %s reference \"%s\"; "
                 "expected %s %s \"%s\"",
                 name, og_outcome_class_name(o->cls), o->reason, o->reference,
                 cls, reason, ref);
}

/* Replays the vectors file vectors_rel through the table at table_rel
 * (both relative to the source root). */
static void replay_vectors(const char *table_rel, const char *vectors_rel)
{
    static const char *const members[] = {"name", "source", "call", "query",
                                          "transport", "status", "headers",
                                          "body", "expect", NULL};
    bool covered[OG_PROVIDER_RULES_MAX] = {false};
    char path[PATH_MAX];
    char *text, *line, *save = NULL;
    json_t *names = json_object();
    int n_vectors = 0, n_recorded = 0, n_rules = 0;
    og_provider_table *table = NULL;
    og_provider_table_error err;

    src_path(path, table_rel);
    if (og_provider_table_load_file(path, &table, &err) != 0)
        fail_msg("%s: %s", path, err.text);
    src_path(path, vectors_rel);
    text = read_text(path, NULL);
    for (line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        json_error_t jerr;
        json_t *v = json_loads(line, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                               &jerr), *hv, *expect, *body;
        og_provider_response r = {0};
        og_provider_outcome o;
        const char *name, *key, *call, *tr;
        int k;

        if (!v)
            fail_msg("%s: line %d: %s", vectors_rel, n_vectors + 1,
                     jerr.text);
        json_object_foreach(v, key, hv) {
            bool ok = false;
            for (size_t i = 0; members[i]; i++)
                ok = ok || strcmp(key, members[i]) == 0;
            if (!ok)
                fail_msg("vector line %d: unknown member %s", n_vectors + 1,
                         key);
        }
        name = vstr(v, "name", "?");
        if (json_object_get(names, name))
            fail_msg("vector %s: name used twice", name);
        json_object_set_new(names, name, json_true());
        if (strcmp(vstr(v, "source", name), "recorded") == 0)
            n_recorded++;
        tr = vstr(v, "transport", name);
        k = og_provider_transport_parse(tr);
        if (k < 0)
            fail_msg("vector %s: transport %s", name, tr);
        r.transport = (og_provider_transport)k;
        if (!json_is_integer(json_object_get(v, "status")))
            fail_msg("vector %s: status not an integer", name);
        r.status = (int)json_integer_value(json_object_get(v, "status"));
        body = json_object_get(v, "body");
        if (!json_is_string(body))
            fail_msg("vector %s: body not a string", name);
        r.body = json_string_value(body);
        r.body_len = json_string_length(body);
        json_object_foreach(json_object_get(v, "headers"), key, hv) {
            if (strcasecmp(key, "Retry-After") == 0)
                r.retry_after = json_string_value(hv);
        }
        expect = json_object_get(v, "expect");
        assert_true(json_is_object(expect));

        call = json_string_value(json_object_get(v, "call"));
        if (call && strcmp(call, "lookup") == 0) {
            const char *want = vstr(expect, "result", name);
            int rc;

            memset(&o, 0, sizeof o);
            rc = og_provider_classify_lookup(table, &r,
                                             vstr(v, "query", name), &o);
            if (strcmp(want, "found") == 0 ? rc != 1
                : strcmp(want, "not_found") == 0
                    ? rc != 0
                    : rc != OG_EPROVIDER_UNAVAILABLE)
                fail_msg("vector %s: lookup returned %d, expected %s", name,
                         rc, want);
            if (rc >= 0)
                expect_outcome(name, expect, &o);
        } else {
            assert_true(!call || strcmp(call, "create") == 0);
            o = classify(table, r);
            expect_outcome(name, expect, &o);
            if (o.rule >= 0) {
                assert_true(o.rule < OG_PROVIDER_RULES_MAX);
                covered[o.rule] = true;
            }
        }
        n_vectors++;
        json_decref(v);
    }
    free(text);
    json_decref(names);

    /* Every rule of the table is exercised by some vector. */
    {
        char tpath[PATH_MAX];
        json_t *t;

        src_path(tpath, table_rel);
        t = json_load_file(tpath, 0, NULL);
        assert_non_null(t);
        n_rules = (int)json_array_size(json_object_get(t, "create"));
        json_decref(t);
    }
    for (int i = 0; i < n_rules; i++)
        if (!covered[i])
            fail_msg("create[%d] of %s is exercised by no vector", i,
                     table_rel);
    print_message("%s: %d vectors (%d recorded from the sandbox), %d rules "
                  "covered\n",
                  vectors_rel, n_vectors, n_recorded, n_rules);
    assert_true(n_vectors >= 30);
    assert_true(n_recorded >= 15);
    og_provider_table_free(table);
}

static void vectors_classify_as_expected(void **state)
{
    replay_vectors(TABLE_PATH, VECTORS_PATH);
    replay_vectors(PAYOUTS_TABLE_PATH, PAYOUTS_VECTORS_PATH);
}

/* ===========================================================================
 * The table as loaded
 * ========================================================================= */
/* The contract of the sandbox's api with its default flags. */
static void assert_sandbox_contract(const og_provider_properties *p,
                                    const char *api)
{
    assert_string_equal(p->provider, "oncegate-sandbox");
    assert_string_equal(p->api, api);
    assert_int_equal(p->version, 1);
    assert_int_equal(p->key_retention_s, 86400);
    assert_true(p->atomic_same_key);
    assert_int_equal(p->lookup, OG_PROVIDER_LOOKUP_REFERENCE |
                                    OG_PROVIDER_LOOKUP_IDEMPOTENCY_KEY);
    assert_true(p->request_expiry);
    assert_int_equal(p->request_expiry_skew_s, 5);
}

static void sandbox_table_declares_its_contract(void **state)
{
    assert_sandbox_contract(og_provider_table_properties(g_table), "credits");
    /* the credits table declares no final absence: recovery never needs it */
    assert_false(og_provider_table_properties(g_table)->not_found_final);
    assert_int_equal(og_provider_final_absence_margin_us(
                         og_provider_table_properties(g_table)),
                     -1);
    assert_int_equal(og_provider_final_absence_margin_us(NULL), -1);
    assert_null(og_provider_table_properties(NULL));
    og_provider_table_free(NULL); /* a no-op */
}

/* The payouts table declares the same contract (and the sandbox's default
 * skew), and a returned payout is final: it completed. */
static void payouts_table_declares_its_contract(void **state)
{
    char path[PATH_MAX];
    og_provider_table *t = NULL;
    og_provider_table_error err;
    og_provider_response r = answer(
        200, "{\"payouts\":[{\"id\":\"po_1\",\"reference\":\"PAY-1\","
             "\"status\":\"returned\",\"returned_at\":"
             "\"2026-03-01T16:30:00.000000Z\"}]}");
    og_provider_outcome o;

    src_path(path, PAYOUTS_TABLE_PATH);
    if (og_provider_table_load_file(path, &t, &err) != 0)
        fail_msg("%s: %s", path, err.text);
    assert_sandbox_contract(og_provider_table_properties(t), "payouts");
    /* and the processing window (docs/sandbox.md): absence is final after
     * expires_at + 5 s skew + the default visibility delay, 0 ms */
    assert_true(og_provider_table_properties(t)->not_found_final);
    assert_int_equal(og_provider_table_properties(t)->visibility_delay_ms, 0);
    assert_int_equal(
        og_provider_final_absence_margin_us(og_provider_table_properties(t)),
        5000000);
    assert_int_equal(og_provider_classify_lookup(t, &r, "PAY-1", &o), 1);
    assert_int_equal(o.cls, OG_CLASS_SUCCEEDED);
    assert_string_equal(o.reason, "returned");
    /* two payouts under one reference are a duplicate first of all */
    r = answer(200, "{\"payouts\":[{\"id\":\"po_1\",\"reference\":"
                    "\"PAY-1\",\"status\":\"returned\"},{\"id\":\"po_2\","
                    "\"reference\":\"PAY-1\",\"status\":\"completed\"}]}");
    assert_int_equal(og_provider_classify_lookup(t, &r, "PAY-1", &o), 1);
    assert_int_equal(o.cls, OG_CLASS_SUCCEEDED);
    assert_string_equal(o.reason, "found_multiple");
    assert_string_equal(o.reference, "po_1");
    og_provider_table_free(t);
}

/* ===========================================================================
 * Loader refusals
 * ========================================================================= */

/* A small valid table the refusal cases mutate. */
static const char base_table[] =
    "{\"format\":\"oncegate-provider-classification\",\"version\":1,"
    "\"provider\":\"p\",\"api\":\"a\",\"error_member\":\"error\","
    "\"properties\":{\"key_retention_seconds\":60,\"atomic_same_key\":false,"
    "\"lookup\":[],\"request_expiry\":false},"
    "\"create\":[{\"status\":201,\"class\":\"succeeded\",\"reason\":"
    "\"created\",\"reference\":\"id\"}]}";

#define LOOKUP_OK                                                              \
    "{\"status\":200,\"list\":\"credits\",\"match\":\"reference\","         \
    "\"reference\":\"id\",\"succeeded_if\":{\"status\":\"succeeded\"}}"

/* Properties with request expiry, a lookup by reference and
 * not_found_final = FINAL, then MORE members. */
#define PROPS_FINAL(FINAL, MORE)                                               \
    "{\"key_retention_seconds\":60,\"atomic_same_key\":true,"              \
    "\"lookup\":[\"reference\"],\"request_expiry\":true,"                \
    "\"request_expiry_skew_seconds\":5,\"not_found_final\":" FINAL MORE "}"

/* Sets (value JSON text) or deletes (value NULL) the member at path:
 * dot-separated names and array indices, "+" appends. */
static void mutate(json_t *root, const char *path, const char *value)
{
    char buf[128], *seg, *next, *save = NULL;
    json_t *at = root, *v = NULL;

    if (value) {
        v = json_loads(value, JSON_DECODE_ANY, NULL);
        assert_non_null(v);
    }
    snprintf(buf, sizeof buf, "%s", path);
    seg = strtok_r(buf, ".", &save);
    while (seg) {
        next = strtok_r(NULL, ".", &save);
        bool idx = json_is_array(at);
        if (!next) {
            if (idx && strcmp(seg, "+") == 0)
                assert_int_equal(json_array_append_new(at, v), 0);
            else if (idx && !v)
                assert_int_equal(json_array_remove(at, (size_t)atoi(seg)), 0);
            else if (idx)
                assert_int_equal(json_array_set_new(at, (size_t)atoi(seg), v), 0);
            else if (!v)
                json_object_del(at, seg);
            else
                assert_int_equal(json_object_set_new(at, seg, v), 0);
            return;
        }
        at = idx ? json_array_get(at, (size_t)atoi(seg))
                 : json_object_get(at, seg);
        assert_non_null(at);
        seg = next;
    }
}

typedef struct refusal {
    const char *name;
    const char *mut[3][2];         /* up to three {path, value} */
    og_provider_table_err code;    /* NONE: the table must load */
    const char *where;
} refusal;

#define E(x) OG_PROVIDER_TABLE_E_##x
static const refusal refusals[] = {
    {"the base table loads", {{NULL}}, E(NONE), NULL},
    /* format, version, members */
    {"another format", {{"format", "\"openapi\""}}, E(FORMAT), "format"},
    {"no format", {{"format", NULL}}, E(FORMAT), "format"},
    {"version 2", {{"version", "2"}}, E(VERSION), "version"},
    {"version as text", {{"version", "\"1\""}}, E(VERSION), "version"},
    {"version as a real", {{"version", "1.0"}}, E(VERSION), "version"},
    {"unknown top-level member", {{"comment", "\"x\""}}, E(UNKNOWN_MEMBER),
     "$.comment"},
    {"unknown rule member", {{"create.0.colour", "\"red\""}},
     E(UNKNOWN_MEMBER), "create[0].colour"},
    {"unknown property", {{"properties.retention", "60"}}, E(UNKNOWN_MEMBER),
     "properties.retention"},
    {"unknown lookup member",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.found_if", "\"credits nonempty\""}},
     E(UNKNOWN_MEMBER), "lookup.found_if"},
    {"no error_member", {{"error_member", NULL}}, E(MISSING_MEMBER),
     "$.error_member"},
    {"no provider", {{"provider", NULL}}, E(MISSING_MEMBER), "$.provider"},
    {"provider not a token", {{"provider", "\"Sand box\""}}, E(TYPE),
     "$.provider"},
    {"no properties", {{"properties", NULL}}, E(MISSING_MEMBER), "properties"},
    {"no create", {{"create", NULL}}, E(MISSING_MEMBER), "create"},
    /* properties */
    {"no key retention", {{"properties.key_retention_seconds", NULL}},
     E(MISSING_MEMBER), "properties.key_retention_seconds"},
    {"key retention as text", {{"properties.key_retention_seconds", "\"60\""}},
     E(TYPE), "properties.key_retention_seconds"},
    {"key retention 0", {{"properties.key_retention_seconds", "0"}}, E(TYPE),
     "properties.key_retention_seconds"},
    {"atomic_same_key not a boolean", {{"properties.atomic_same_key", "1"}},
     E(TYPE), "properties.atomic_same_key"},
    {"no lookup property", {{"properties.lookup", NULL}}, E(MISSING_MEMBER),
     "properties.lookup"},
    {"lookup by email", {{"properties.lookup", "[\"email\"]"}}, E(TYPE),
     "properties.lookup"},
    {"lookup listed twice",
     {{"properties.lookup", "[\"reference\",\"reference\"]"}}, E(TYPE),
     "properties.lookup"},
    {"expiry skew without expiry",
     {{"properties.request_expiry_skew_seconds", "5"}}, E(RULE),
     "properties.request_expiry_skew_seconds"},
    {"expiry without skew", {{"properties.request_expiry", "true"}},
     E(MISSING_MEMBER), "properties.request_expiry_skew_seconds"},
    {"lookup rules without the property", {{"lookup", LOOKUP_OK}}, E(RULE),
     "lookup"},
    {"lookup property without rules", {{"properties.lookup", "[\"reference\"]"}},
     E(MISSING_MEMBER), "lookup"},
    {"lookup of a non-2xx",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.status", "404"}},
     E(TYPE), "lookup.status"},
    {"lookup without succeeded_if",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if", NULL}},
     E(MISSING_MEMBER), "lookup.succeeded_if"},
    {"lookup by idempotency key only needs no lookup rules",
     {{"properties.lookup", "[\"idempotency_key\"]"}}, E(NONE), NULL},
    /* the processing window: not_found_final (CT6), visibility_delay_ms */
    {"absence final with expiry and a lookup by reference",
     {{"properties", PROPS_FINAL("true", ", \"visibility_delay_ms\": 250")},
      {"lookup", LOOKUP_OK}},
     E(NONE), NULL},
    {"absence declared not final, no delay",
     {{"properties", PROPS_FINAL("false", "")}, {"lookup", LOOKUP_OK}},
     E(NONE), NULL},
    {"absence final without its visibility delay",
     {{"properties", PROPS_FINAL("true", "")}, {"lookup", LOOKUP_OK}},
     E(MISSING_MEMBER), "properties.visibility_delay_ms"},
    {"a visibility delay without final absence",
     {{"properties", PROPS_FINAL("false", ", \"visibility_delay_ms\": 0")},
      {"lookup", LOOKUP_OK}},
     E(RULE), "properties.visibility_delay_ms"},
    {"a visibility delay over an hour",
     {{"properties",
       PROPS_FINAL("true", ", \"visibility_delay_ms\": 3600001")},
      {"lookup", LOOKUP_OK}},
     E(TYPE), "properties.visibility_delay_ms"},
    {"absence final without request expiry",
     {{"properties", "{\"key_retention_seconds\":60,\"atomic_same_key\":"
                     "true,\"lookup\":[\"reference\"],\"request_expiry\":"
                     "false,\"not_found_final\":true,"
                     "\"visibility_delay_ms\":0}"},
      {"lookup", LOOKUP_OK}},
     E(RULE), "properties.not_found_final"},
    {"absence final without a lookup by reference",
     {{"properties", "{\"key_retention_seconds\":60,\"atomic_same_key\":"
                     "true,\"lookup\":[\"idempotency_key\"],"
                     "\"request_expiry\":true,"
                     "\"request_expiry_skew_seconds\":5,"
                     "\"not_found_final\":true,\"visibility_delay_ms\":0}"}},
     E(RULE), "properties.not_found_final"},
    {"not_found_final not a boolean",
     {{"properties", PROPS_FINAL("1", ", \"visibility_delay_ms\": 0")},
      {"lookup", LOOKUP_OK}},
     E(TYPE), "properties.not_found_final"},
    /* returned_if: a final state (CT7) */
    {"returned_if implying succeeded_if",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.returned_if", "{\"status\":\"succeeded\",\"kind\":\"r\"}"}},
     E(NONE), NULL},
    {"returned_if that is not a final state",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.returned_if", "{\"status\":\"returned\"}"}},
     E(RULE), "lookup.returned_if"},
    {"returned_if not a condition",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.returned_if", "\"returned\""}},
     E(TYPE), "lookup.returned_if"},
    /* succeeded_if / pending_if: one condition or 1-8 alternatives */
    {"succeeded_if with two alternatives",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if",
       "[{\"status\":\"completed\"},{\"status\":\"returned\"}]"}},
     E(NONE), NULL},
    {"succeeded_if as an empty array",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if", "[]"}},
     E(TYPE), "lookup.succeeded_if"},
    {"succeeded_if with nine alternatives",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if",
       "[{\"s\":\"1\"},{\"s\":\"2\"},{\"s\":\"3\"},{\"s\":\"4\"},"
       "{\"s\":\"5\"},{\"s\":\"6\"},{\"s\":\"7\"},{\"s\":\"8\"},"
       "{\"s\":\"9\"}]"}},
     E(TYPE), "lookup.succeeded_if"},
    {"succeeded_if alternative not an object",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if", "[{\"status\":\"completed\"},\"returned\"]"}},
     E(TYPE), "lookup.succeeded_if[1]"},
    {"pending_if alternative with a number",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.pending_if", "[{\"status\":1}]"}},
     E(TYPE), "lookup.pending_if[0]"},
    {"succeeded_if nested arrays",
     {{"properties.lookup", "[\"reference\"]"},
      {"lookup", LOOKUP_OK},
      {"lookup.succeeded_if", "[[{\"status\":\"completed\"}]]"}},
     E(TYPE), "lookup.succeeded_if[0]"},
    /* rule shapes */
    {"no rules", {{"create", "[]"}}, E(TYPE), "create"},
    {"rules not an array", {{"create", "{}"}}, E(TYPE), "create"},
    {"a rule not an object", {{"create.+", "1"}}, E(TYPE), "create[1]"},
    {"unknown class",
     {{"create.0.class", "\"refused\""}}, E(CLASS), "create[0].class"},
    {"class missing", {{"create.0.class", NULL}}, E(MISSING_MEMBER),
     "create[0].class"},
    {"reason missing", {{"create.0.reason", NULL}}, E(MISSING_MEMBER),
     "create[0].reason"},
    {"reason not a token", {{"create.0.reason", "\"Created!\""}}, E(TYPE),
     "create[0].reason"},
    {"reason of 64 bytes",
     {{"create.0.reason",
       "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""}},
     E(TYPE), "create[0].reason"},
    {"status 600", {{"create.0.status", "600"}}, E(TYPE), "create[0].status"},
    {"status as text", {{"create.0.status", "\"201\""}}, E(TYPE),
     "create[0].status"},
    {"neither status nor transport", {{"create.0.status", NULL}},
     E(MISSING_MEMBER), "create[0].status"},
    {"status and transport",
     {{"create.0.transport", "\"timeout\""}}, E(RULE), "create[0]"},
    {"transport ok", {{"create.+", "{\"transport\":\"ok\",\"class\":"
                                   "\"unknown\",\"reason\":\"x\",\"why\":\"w\"}"}},
     E(TYPE), "create[1].transport"},
    {"transport unheard of",
     {{"create.+", "{\"transport\":\"solar_flare\",\"class\":\"unknown\","
                   "\"reason\":\"x\",\"why\":\"w\"}"}},
     E(TYPE), "create[1].transport"},
    /* duplicates: order never decides */
    {"one status twice",
     {{"create.+", "{\"status\":201,\"class\":\"unknown\",\"reason\":\"x\"}"}},
     E(DUPLICATE_RULE), "create[1]"},
    {"one status and error twice",
     {{"create.+", "{\"status\":422,\"error\":\"closed\",\"class\":\"failed\","
                   "\"reason\":\"a\",\"why\":\"w\"}"},
      {"create.+", "{\"status\":422,\"error\":\"closed\",\"class\":\"unknown\","
                   "\"reason\":\"b\"}"}},
     E(DUPLICATE_RULE), "create[2]"},
    {"one status with two errors is fine",
     {{"create.+", "{\"status\":422,\"error\":\"closed\",\"class\":\"failed\","
                   "\"reason\":\"a\",\"why\":\"w\"}"},
      {"create.+", "{\"status\":422,\"error\":\"gone\",\"class\":\"unknown\","
                   "\"reason\":\"b\"}"},
      {"create.+", "{\"status\":422,\"class\":\"unknown\",\"reason\":\"c\"}"}},
     E(NONE), NULL},
    {"one transport twice",
     {{"create.+", "{\"transport\":\"timeout\",\"class\":\"unknown\","
                   "\"reason\":\"a\",\"why\":\"w\"}"},
      {"create.+", "{\"transport\":\"timeout\",\"class\":\"unknown\","
                   "\"reason\":\"b\",\"why\":\"w\"}"}},
     E(DUPLICATE_RULE), "create[2]"},
    /* CT1: succeeded only for a 2xx, with its reference */
    {"succeeded for a 422",
     {{"create.0.status", "422"}}, E(RULE), "create[0]"},
    {"succeeded for a 302", {{"create.0.status", "302"}}, E(RULE), "create[0]"},
    {"succeeded without reference", {{"create.0.reference", NULL}}, E(RULE),
     "create[0]"},
    {"succeeded for a transport",
     {{"create.+", "{\"transport\":\"no_response\",\"class\":\"succeeded\","
                   "\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    /* CT2: a bare 2xx is never a refusal */
    {"failed for a bare 200",
     {{"create.+", "{\"status\":200,\"class\":\"failed\",\"reason\":\"x\","
                   "\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"transient for a bare 202",
     {{"create.+", "{\"status\":202,\"class\":\"transient\",\"reason\":\"x\","
                   "\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"failed for a 200 naming its error code",
     {{"create.+", "{\"status\":200,\"error\":\"declined\",\"class\":"
                   "\"failed\",\"reason\":\"declined\",\"why\":\"w\"}"}},
     E(NONE), NULL},
    /* CT3: no effect is claimed with a why */
    {"failed without why",
     {{"create.+", "{\"status\":422,\"error\":\"x\",\"class\":\"failed\","
                   "\"reason\":\"x\"}"}},
     E(RULE), "create[1]"},
    {"transient without why",
     {{"create.+", "{\"status\":429,\"class\":\"transient\",\"reason\":\"x\"}"}},
     E(RULE), "create[1]"},
    /* CT4: transports are unknown but for connect_failed, transient */
    {"timeout as transient",
     {{"create.+", "{\"transport\":\"timeout\",\"class\":\"transient\","
                   "\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"no_response as failed",
     {{"create.+", "{\"transport\":\"no_response\",\"class\":\"failed\","
                   "\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"connect_failed as failed",
     {{"create.+", "{\"transport\":\"connect_failed\",\"class\":\"failed\","
                   "\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"connect_failed as transient without why",
     {{"create.+", "{\"transport\":\"connect_failed\",\"class\":"
                   "\"transient\",\"reason\":\"x\"}"}},
     E(RULE), "create[1]"},
    {"a transport rule without why",
     {{"create.+", "{\"transport\":\"timeout\",\"class\":\"unknown\","
                   "\"reason\":\"x\"}"}},
     E(RULE), "create[1]"},
    {"connect_failed as transient with why",
     {{"create.+", "{\"transport\":\"connect_failed\",\"class\":"
                   "\"transient\",\"reason\":\"x\",\"why\":\"w\"}"}},
     E(NONE), NULL},
    /* CT5: members only where they mean something */
    {"reference in a failed rule",
     {{"create.+", "{\"status\":422,\"error\":\"x\",\"class\":\"failed\","
                   "\"reason\":\"x\",\"why\":\"w\",\"reference\":\"id\"}"}},
     E(RULE), "create[1]"},
    {"require in an unknown rule",
     {{"create.+", "{\"status\":202,\"class\":\"unknown\",\"reason\":\"x\","
                   "\"require\":{\"status\":\"pending\"}}"}},
     E(RULE), "create[1]"},
    {"error in a transport rule",
     {{"create.+", "{\"transport\":\"timeout\",\"error\":\"x\",\"class\":"
                   "\"unknown\",\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"reference in a transport rule",
     {{"create.+", "{\"transport\":\"timeout\",\"reference\":\"id\",\"class\":"
                   "\"unknown\",\"reason\":\"x\",\"why\":\"w\"}"}},
     E(RULE), "create[1]"},
    {"require not an object of strings",
     {{"create.0.require", "{\"status\":1}"}}, E(TYPE), "create[0].require"},
    {"require empty", {{"create.0.require", "{}"}}, E(TYPE),
     "create[0].require"},
    {"require as alternatives (lookup conditions only)",
     {{"create.0.require", "[{\"status\":\"succeeded\"}]"}}, E(TYPE),
     "create[0].require"},
    {"unknown with reference is fine",
     {{"create.+", "{\"status\":202,\"class\":\"unknown\",\"reason\":"
                   "\"pending\",\"reference\":\"id\"}"}},
     E(NONE), NULL},
};
#undef E

static void loader_refuses_each_with_its_code(void **state)
{
    og_provider_table *const sentinel = (og_provider_table *)&g_table;

    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const refusal *c = &refusals[i];
        og_provider_table_error err;
        og_provider_table *t = sentinel;
        json_t *root = json_loads(base_table, 0, NULL);
        char *text;
        int rc;

        assert_non_null(root);
        for (int m = 0; m < 3 && c->mut[m][0]; m++)
            mutate(root, c->mut[m][0], c->mut[m][1]);
        text = json_dumps(root, JSON_COMPACT);
        assert_non_null(text);
        rc = og_provider_table_load(text, strlen(text), &t, &err);
        if (c->code == OG_PROVIDER_TABLE_E_NONE) {
            if (rc != 0)
                fail_msg("case \"%s\": refused: %s", c->name, err.text);
            og_provider_table_free(t);
        } else {
            if (rc != OG_EINVAL || err.code != c->code ||
                strcmp(err.where, c->where) != 0)
                fail_msg("case \"%s\": rc %d, %s at %s; expected %s at %s",
                         c->name, rc, og_provider_table_err_name(err.code),
                         err.where, og_provider_table_err_name(c->code),
                         c->where);
            /* One line that starts with the stable code. */
            assert_int_equal(strncmp(err.text,
                                     og_provider_table_err_name(c->code),
                                     strlen(og_provider_table_err_name(c->code))),
                             0);
            assert_null(strchr(err.text, '\n'));
            assert_ptr_equal(t, sentinel); /* out untouched */
        }
        free(text);
        json_decref(root);
    }
}

static void loader_refuses_text_that_is_not_one_object(void **state)
{
    static const char *const texts[] = {
        "", "not json", "[]", "1", "{} trailing",
        /* a repeated member is ambiguous: which one counts? */
        ("{\"format\":\"oncegate-provider-classification\","
         "\"format\":\"oncegate-provider-classification\"}"),
        /* NUL inside a string */
        "{\"format\":\"oncegate-provider\\u0000classification\"}",
    };
    og_provider_table_error err;
    og_provider_table *t = NULL;
    char *big;

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        assert_int_equal(og_provider_table_load(texts[i], strlen(texts[i]), &t,
                                                &err),
                         OG_EINVAL);
        assert_int_equal(err.code, OG_PROVIDER_TABLE_E_JSON);
        assert_null(t);
    }
    /* Over the cap: refused before it is parsed. */
    big = malloc(OG_PROVIDER_TABLE_MAX + 2);
    assert_non_null(big);
    memset(big, ' ', OG_PROVIDER_TABLE_MAX + 1);
    big[OG_PROVIDER_TABLE_MAX + 1] = '\0';
    assert_int_equal(og_provider_table_load(big, OG_PROVIDER_TABLE_MAX + 1, &t,
                                            &err),
                     OG_EINVAL);
    assert_int_equal(err.code, OG_PROVIDER_TABLE_E_TOO_LARGE);
    free(big);
    /* err may be NULL. */
    assert_int_equal(og_provider_table_load("[]", 2, &t, NULL), OG_EINVAL);
    assert_int_equal(og_provider_table_load(NULL, 0, &t, &err), OG_EINVAL);
}

static void load_file_reports_io_and_size(void **state)
{
    char dir[] = "/tmp/og-classify-XXXXXX", path[PATH_MAX];
    og_provider_table_error err;
    og_provider_table *t = NULL;
    FILE *f;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_equal(og_provider_table_load_file(path, &t, &err), OG_EINVAL);
    assert_int_equal(err.code, OG_PROVIDER_TABLE_E_IO);
    assert_null(t);

    snprintf(path, sizeof path, "%s/big.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i <= OG_PROVIDER_TABLE_MAX; i++)
        fputc(' ', f);
    fclose(f);
    assert_int_equal(og_provider_table_load_file(path, &t, &err), OG_EINVAL);
    assert_int_equal(err.code, OG_PROVIDER_TABLE_E_TOO_LARGE);
    unlink(path);

    snprintf(path, sizeof path, "%s/base.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(base_table, f);
    fclose(f);
    assert_int_equal(og_provider_table_load_file(path, &t, &err), 0);
    og_provider_table_free(t);
    unlink(path);
    rmdir(dir);
}

/* ===========================================================================
 * Anything undocumented is UNKNOWN
 * ========================================================================= */
static void every_undocumented_status_is_unknown(void **state)
{
    static const char *const bodies[] = {
        NULL, "", "{}", "not json", "<html>503</html>",
        "{\"error\":\"account_closed\"}", "{\"error\":\"rate_limited\"}",
        "{\"id\":\"cr_1\",\"status\":\"succeeded\"}",
        "{\"error\":\"brand_new_code\"}",
    };
    char want[64];

    for (int s = 0; s <= 999; s++) {
        for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
            og_provider_outcome o = classify(g_table, answer(s, bodies[b]));

            /* Never SUCCEEDED outside 2xx; never a refusal from a bare
             * body the table does not name. */
            if (o.cls == OG_CLASS_SUCCEEDED)
                assert_int_equal(s, 201);
            if (is_documented(s))
                continue;
            snprintf(want, sizeof want, "undocumented_status_%d", s);
            assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
            assert_string_equal(o.reason, want);
            assert_string_equal(o.reference, "");
            assert_int_equal(o.rule, -1);
            assert_int_equal(o.retry_after_s, -1);
        }
    }
}

static void an_undocumented_error_code_is_unknown(void **state)
{
    /* Statuses with rules for named errors only: another code, or no code,
     * or no JSON, is undocumented. */
    static const int statuses[] = {400, 401, 404, 405, 413, 415, 422, 429,
                                   500};
    static const char *const bodies[] = {
        "{\"error\":\"brand_new_code\"}", "{\"error\":7}", "{}", "nope", "",
        "{\"error\":\"account_closed\",\"error\":\"account_closed\"}",
        "{\"error\":\"ACCOUNT_CLOSED\"}", "[\"account_closed\"]",
    };
    char want[64];

    for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++)
        for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
            og_provider_outcome o =
                classify(g_table, answer(statuses[s], bodies[b]));
            snprintf(want, sizeof want, "undocumented_error_%d", statuses[s]);
            assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
            assert_string_equal(o.reason, want);
            assert_int_equal(o.rule, -1);
        }
    /* The documented code on the wrong status is not that code. */
    {
        og_provider_outcome o = classify(
            g_table, answer(409, "{\"error\":\"account_closed\"}"));
        assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
        assert_string_equal(o.reason, "undocumented_status_409");
    }
}

static void only_connect_failed_is_a_no_effect_transport(void **state)
{
    for (int k = 0; k <= OG_TRANSPORT_ERROR; k++) {
        og_provider_response r = answer(201, "{\"id\":\"cr_1\",\"status\":"
                                             "\"succeeded\"}");
        og_provider_outcome o;
        char want[64];

        if (k == OG_TRANSPORT_OK)
            continue;
        r.transport = (og_provider_transport)k;
        r.retry_after = "1";
        o = classify(g_table, r);
        if (k == OG_TRANSPORT_CONNECT_FAILED) {
            assert_int_equal(o.cls, OG_CLASS_TRANSIENT);
            assert_string_equal(o.reason, "connect_failed");
            continue;
        }
        /* Whatever status and body came before the failure count for
         * nothing. */
        assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
        assert_string_equal(o.reference, "");
        if (o.rule < 0) {
            snprintf(want, sizeof want, "transport_%s",
                     og_provider_transport_name((og_provider_transport)k));
            assert_string_equal(o.reason, want);
        }
    }

    /* A table with no transport rules: every failure is UNKNOWN. */
    {
        og_provider_table *t;
        og_provider_table_error err;

        assert_int_equal(og_provider_table_load(base_table, strlen(base_table),
                                                &t, &err),
                         0);
        for (int k = OG_TRANSPORT_TIMEOUT; k <= OG_TRANSPORT_ERROR; k++) {
            og_provider_response r = answer(0, NULL);
            og_provider_outcome o;
            char want[64];

            r.transport = (og_provider_transport)k;
            o = classify(t, r);
            snprintf(want, sizeof want, "transport_%s",
                     og_provider_transport_name((og_provider_transport)k));
            assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
            assert_string_equal(o.reason, want);
            assert_int_equal(o.rule, -1);
        }
        og_provider_table_free(t);
    }
}

static void a_2xx_that_does_not_prove_success_is_unknown(void **state)
{
    char long_id[200], body[300];
    const char *const bodies[] = {
        NULL, "", "created", "{\"id\":\"cr_1\",\"status\":\"succ", /* cut */
        "[{\"id\":\"cr_1\",\"status\":\"succeeded\"}]",
        "{\"status\":\"succeeded\"}",                     /* no id */
        "{\"id\":null,\"status\":\"succeeded\"}",
        "{\"id\":17,\"status\":\"succeeded\"}",
        "{\"id\":\"\",\"status\":\"succeeded\"}",
        "{\"id\":\"cr 1\",\"status\":\"succeeded\"}",      /* space */
        "{\"id\":\"cr\\n1\",\"status\":\"succeeded\"}",    /* control */
        "{\"id\":\"cr_\\u00e9\",\"status\":\"succeeded\"}", /* not ASCII */
        "{\"id\":\"cr_1\"}",                               /* no status */
        "{\"id\":\"cr_1\",\"status\":\"pending\"}",
        "{\"id\":\"cr_1\",\"status\":\"failed\"}",
        "{\"id\":\"cr_1\",\"status\":\"succeeded\",\"id\":\"cr_2\"}",
        body, /* an id of 129 bytes, below */
    };

    memset(long_id, 'a', 129);
    long_id[129] = '\0';
    snprintf(body, sizeof body, "{\"id\":\"%s\",\"status\":\"succeeded\"}",
             long_id);
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        og_provider_outcome o = classify(g_table, answer(201, bodies[b]));
        assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
        assert_string_equal(o.reason, "malformed_success");
        assert_string_equal(o.reference, "");
        assert_int_equal(o.rule, 0); /* which rule it would have been */
    }
    /* 128 bytes is the limit, and fits. */
    long_id[128] = '\0';
    snprintf(body, sizeof body, "{\"id\":\"%s\",\"status\":\"succeeded\"}",
             long_id);
    {
        og_provider_outcome o = classify(g_table, answer(201, body));
        assert_int_equal(o.cls, OG_CLASS_SUCCEEDED);
        assert_string_equal(o.reference, long_id);
    }
    /* A body with a NUL byte in it is not the JSON it starts with. */
    {
        static const char nul[] =
            "{\"id\":\"cr_1\",\"status\":\"succeeded\"}\0 and more";
        og_provider_response r = answer(201, nul);
        r.body_len = sizeof nul - 1;
        og_provider_outcome o = classify(g_table, r);
        assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
        assert_string_equal(o.reason, "malformed_success");
    }
}

static void retry_after_is_read_for_transient_only(void **state)
{
    static const struct {
        const char *v;
        int64_t want;
    } cases[] = {
        {"1", 1},      {" 5 ", 5},        {"0", 0},     {"86400", 86400},
        {"86401", -1}, {"9999999999", -1}, {"", -1},    {"-1", -1},
        {"1.5", -1},   {"abc", -1},       {"Wed, 21 Oct 2015 07:28:00 GMT", -1},
        {NULL, -1},
    };
    const char *rl = "{\"error\":\"rate_limited\",\"message\":\"m\"}";

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        og_provider_response r = answer(429, rl);
        og_provider_outcome o;

        r.retry_after = cases[i].v;
        o = classify(g_table, r);
        assert_int_equal(o.cls, OG_CLASS_TRANSIENT);
        assert_string_equal(o.reason, "rate_limited");
        assert_int_equal(o.retry_after_s, cases[i].want);
    }
    {
        og_provider_response r = answer(500, "{\"error\":\"internal\"}");
        r.retry_after = "3";
        assert_int_equal(classify(g_table, r).retry_after_s, -1);
    }
}

static void reasons_never_carry_the_providers_text(void **state)
{
    static const char *const bodies[] = {
        "{\"error\":\"sk_live_SECRET\",\"message\":\"sk_live_SECRET\"}",
        "{\"id\":\"sk_live_SECRET\"}",
        "sk_live_SECRET",
    };
    static const int statuses[] = {201, 202, 418, 422, 500};

    for (size_t s = 0; s < sizeof statuses / sizeof statuses[0]; s++)
        for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
            og_provider_outcome o =
                classify(g_table, answer(statuses[s], bodies[b]));
            assert_null(strstr(o.reason, "SECRET"));
            /* Only the documented id member of a documented 2xx becomes a
             * reference (202 pending keeps its id). */
            if (strstr(o.reference, "SECRET"))
                assert_int_equal(statuses[s], 202);
        }
}

static void a_missing_table_classifies_unknown(void **state)
{
    og_provider_response r = answer(201, "{\"id\":\"cr_1\",\"status\":"
                                         "\"succeeded\"}");
    og_provider_outcome o;

    og_provider_classify(NULL, &r, &o);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_string_equal(o.reason, "no_table");
}

/* ===========================================================================
 * Lookups
 * ========================================================================= */

/* Classifies a lookup for "ref-1" answered status/body. */
static int lookup(int status, const char *body, og_provider_outcome *o)
{
    og_provider_response r = answer(status, body);
    memset(o, 0x5a, sizeof *o);
    return og_provider_classify_lookup(g_table, &r, "ref-1", o);
}

#define CREDIT(id, ref, st)                                                    \
    "{\"id\":\"" id "\",\"account\":\"a\",\"amount\":\"1\",\"currency\":"   \
    "\"EUR\",\"reference\":\"" ref "\",\"status\":\"" st "\"}"

static void lookup_found_pending_and_not_found(void **state)
{
    og_provider_outcome o;

    assert_int_equal(lookup(200, "{\"credits\":[]}", &o), 0);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN); /* never FAILED */
    assert_string_equal(o.reason, "not_found");
    assert_string_equal(o.reference, "");

    assert_int_equal(
        lookup(200, "{\"credits\":[" CREDIT("cr_1", "ref-1", "succeeded") "]}",
               &o),
        1);
    assert_int_equal(o.cls, OG_CLASS_SUCCEEDED);
    assert_string_equal(o.reason, "found");
    assert_string_equal(o.reference, "cr_1");
    assert_int_equal(o.rule, -1);

    assert_int_equal(
        lookup(200, "{\"credits\":[" CREDIT("cr_1", "ref-1", "pending") "]}",
               &o),
        1);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_string_equal(o.reason, "pending");
    assert_string_equal(o.reference, "cr_1");

    /* Two effects for one reference: evidence of a duplicate; the
     * succeeded one is reported. */
    assert_int_equal(lookup(200,
                            "{\"credits\":[" CREDIT("cr_1", "ref-1", "pending")
                            "," CREDIT("cr_2", "ref-1", "succeeded") "]}",
                            &o),
                     1);
    assert_int_equal(o.cls, OG_CLASS_SUCCEEDED);
    assert_string_equal(o.reason, "found_multiple");
    assert_string_equal(o.reference, "cr_2");

    /* A state the table does not document exists, but is not final. */
    assert_int_equal(
        lookup(200, "{\"credits\":[" CREDIT("cr_1", "ref-1", "reversed") "]}",
               &o),
        1);
    assert_int_equal(o.cls, OG_CLASS_UNKNOWN);
    assert_string_equal(o.reason, "undocumented_state");
    assert_string_equal(o.reference, "cr_1");
}

static void an_undocumented_lookup_answer_is_unavailable(void **state)
{
    static const struct {
        int status;
        const char *body;
    } cases[] = {
        {500, "{\"error\":\"internal\"}"},
        {404, "{\"error\":\"not_found\"}"},
        {400, "{\"error\":\"invalid_request\"}"},
        {201, "{\"credits\":[]}"},
        {200, ""},
        {200, "not json"},
        {200, "{}"},
        {200, "{\"credits\":{}}"},
        {200, "{\"credits\":[1]}"},
        {200, "{\"credits\":[],\"credits\":[]}"},
        /* the provider ignored the filter: a stranger is no evidence */
        {200, "{\"credits\":[" CREDIT("cr_1", "ref-2", "succeeded") "]}"},
        {200, "{\"credits\":[" CREDIT("cr_1", "ref-1", "succeeded") ","
              CREDIT("cr_2", "ref-2", "succeeded") "]}"},
        {200, "{\"credits\":[{\"reference\":\"ref-1\",\"status\":"
              "\"succeeded\"}]}"},
        {200, "{\"credits\":[" CREDIT("cr 1", "ref-1", "succeeded") "]}"},
    };
    og_provider_outcome o;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&o, 0x5a, sizeof o);
        if (lookup(cases[i].status, cases[i].body, &o) !=
            OG_EPROVIDER_UNAVAILABLE)
            fail_msg("case %zu (%d %s) is not unavailable", i, cases[i].status,
                     cases[i].body);
        assert_int_equal(o.rule, 0x5a5a5a5a); /* untouched */
    }
    for (int k = OG_TRANSPORT_TIMEOUT; k <= OG_TRANSPORT_ERROR; k++) {
        og_provider_response r = answer(200, "{\"credits\":[]}");
        r.transport = (og_provider_transport)k;
        assert_int_equal(og_provider_classify_lookup(g_table, &r, "ref-1", &o),
                         OG_EPROVIDER_UNAVAILABLE);
    }
    /* A table without lookups cannot classify one. */
    {
        og_provider_table *t;
        og_provider_response r = answer(200, "{\"credits\":[]}");

        assert_int_equal(og_provider_table_load(base_table, strlen(base_table),
                                                &t, NULL),
                         0);
        assert_int_equal(og_provider_classify_lookup(t, &r, "ref-1", &o),
                         OG_EINVAL);
        og_provider_table_free(t);
    }
    assert_string_equal(og_err_name(OG_EPROVIDER_UNAVAILABLE),
                        "provider_unavailable");
}

/* A table whose lookup has two final states and a pending one, as the
 * payouts API (completed, then returned). */
static og_provider_table *two_final_states_table(void)
{
    static const char text[] =
        "{\"format\":\"oncegate-provider-classification\",\"version\":1,"
        "\"provider\":\"p\",\"api\":\"payouts\",\"error_member\":\"error\","
        "\"properties\":{\"key_retention_seconds\":60,"
        "\"atomic_same_key\":true,\"lookup\":[\"reference\"],"
        "\"request_expiry\":true,\"request_expiry_skew_seconds\":5},"
        "\"create\":[{\"status\":201,\"class\":\"succeeded\",\"reason\":"
        "\"created\",\"reference\":\"id\"}],"
        "\"lookup\":{\"status\":200,\"list\":\"payouts\",\"match\":"
        "\"reference\",\"reference\":\"id\",\"succeeded_if\":["
        "{\"status\":\"completed\"},{\"status\":\"returned\"}],"
        "\"pending_if\":{\"status\":\"pending\"}}}";
    og_provider_table *t = NULL;
    og_provider_table_error err;

    if (og_provider_table_load(text, strlen(text), &t, &err) != 0)
        fail_msg("%s", err.text);
    return t;
}

#define PAYOUT(id, ref, dest, amt, st)                                         \
    "{\"id\":\"" id "\",\"destination\":\"" dest "\",\"amount\":\"" amt     \
    "\",\"currency\":\"EUR\",\"reference\":\"" ref "\",\"status\":\"" st    \
    "\"}"

/* The terms of the attempt the lookups below reconcile. */
static const og_provider_term pay1_terms[] = {
    {"destination", "dst_secret_77"}, {"amount", "4250"}, {"currency", "EUR"}};

/* One payouts lookup for "PAY-1": the answer's body, whether the terms
 * are verified, and what it must classify as. */
typedef struct lookup_case {
    const char *body;
    bool terms;
    int rc;
    og_outcome_class cls;
    const char *reason, *reference;
} lookup_case;

static void check_lookups(const lookup_case *c, size_t n)
{
    og_provider_table *t = two_final_states_table();
    og_provider_outcome o;

    for (size_t i = 0; i < n; i++) {
        og_provider_response r = answer(200, c[i].body);
        int rc;

        memset(&o, 0x5a, sizeof o);
        rc = og_provider_classify_lookup_terms(
            t, &r, "PAY-1", c[i].terms ? pay1_terms : NULL,
            c[i].terms ? sizeof pay1_terms / sizeof pay1_terms[0] : 0, &o);
        if (rc != c[i].rc || o.cls != c[i].cls ||
            strcmp(o.reason, c[i].reason) != 0 ||
            strcmp(o.reference, c[i].reference) != 0)
            fail_msg("case %zu: %d %s %s \"%s\"", i, rc,
                     og_outcome_class_name(o.cls), o.reason, o.reference);
        /* A term's value never reaches the outcome. */
        assert_null(strstr(o.reason, "secret"));
        assert_null(strstr(o.reference, "secret"));
    }
    og_provider_table_free(t);
}

#define LIST(...) "{\"payouts\":[" __VA_ARGS__ "]}"
#define MINE(id, st) PAYOUT(id, "PAY-1", "dst_secret_77", "4250", st)

static void lookup_final_in_any_of_its_states_is_found(void **state)
{
    static const lookup_case cases[] = {
        {LIST(MINE("po_1", "completed")), false, 1, OG_CLASS_SUCCEEDED,
         "found", "po_1"},
        /* Returned: it completed; the return is a later event, not a
         * failure. */
        {LIST(MINE("po_2", "returned")), false, 1, OG_CLASS_SUCCEEDED,
         "found", "po_2"},
        {LIST(MINE("po_3", "pending")), false, 1, OG_CLASS_UNKNOWN,
         "pending", "po_3"},
        {LIST(MINE("po_4", "failed")), false, 1, OG_CLASS_UNKNOWN,
         "undocumented_state", "po_4"},
        {LIST(), false, 0, OG_CLASS_UNKNOWN, "not_found", ""},
    };

    check_lookups(cases, sizeof cases / sizeof cases[0]);
}

static void lookup_of_an_effect_with_other_terms_is_terms_mismatch(
    void **state)
{
    static const lookup_case cases[] = {
        /* The same terms: evidence about this attempt. */
        {LIST(MINE("po_1", "completed")), true, 1, OG_CLASS_SUCCEEDED,
         "found", "po_1"},
        {LIST(MINE("po_1", "returned")), true, 1, OG_CLASS_SUCCEEDED,
         "found", "po_1"},
        /* Another amount, another destination, a member missing: not this
         * attempt's payout — escalate, never resolve. */
        {LIST(PAYOUT("po_2", "PAY-1", "dst_secret_77", "4251", "completed")),
         true, 1, OG_CLASS_UNKNOWN, "terms_mismatch", "po_2"},
        {LIST(PAYOUT("po_3", "PAY-1", "dst_other", "4250", "returned")), true,
         1, OG_CLASS_UNKNOWN, "terms_mismatch", "po_3"},
        {LIST("{\"id\":\"po_4\",\"reference\":\"PAY-1\",\"status\":"
              "\"completed\"}"),
         true, 1, OG_CLASS_UNKNOWN, "terms_mismatch", "po_4"},
        /* A mismatch outweighs a matching effect listed with it, in either
         * order. */
        {LIST(MINE("po_5", "completed") "," PAYOUT("po_6", "PAY-1",
                                                   "dst_secret_77", "1",
                                                   "completed")),
         true, 1, OG_CLASS_UNKNOWN, "terms_mismatch", "po_6"},
        {LIST(PAYOUT("po_6", "PAY-1", "dst_secret_77", "1", "completed") ","
              MINE("po_5", "completed")),
         true, 1, OG_CLASS_UNKNOWN, "terms_mismatch", "po_6"},
        /* Nothing listed is "not found", whatever the terms. */
        {LIST(), true, 0, OG_CLASS_UNKNOWN, "not_found", ""},
    };
    og_provider_term many[OG_PROVIDER_TERMS_MAX + 1];
    og_provider_table *t = two_final_states_table();
    og_provider_response r = answer(200, LIST());
    const og_provider_term no_value[] = {{"amount", NULL}};
    const og_provider_term no_member[] = {{NULL, "1"}};
    og_provider_outcome o;

    check_lookups(cases, sizeof cases / sizeof cases[0]);
    /* Bad terms are refused, *out untouched. */
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
        many[i] = pay1_terms[0];
    memset(&o, 0x5a, sizeof o);
    assert_int_equal(og_provider_classify_lookup_terms(
                         t, &r, "PAY-1", many, OG_PROVIDER_TERMS_MAX + 1, &o),
                     OG_EINVAL);
    assert_int_equal(
        og_provider_classify_lookup_terms(t, &r, "PAY-1", no_value, 1, &o),
        OG_EINVAL);
    assert_int_equal(
        og_provider_classify_lookup_terms(t, &r, "PAY-1", no_member, 1, &o),
        OG_EINVAL);
    assert_int_equal(
        og_provider_classify_lookup_terms(t, &r, "PAY-1", NULL, 2, &o),
        OG_EINVAL);
    assert_int_equal(o.rule, 0x5a5a5a5a);
    assert_int_equal(og_provider_classify_lookup_terms(
                         t, &r, "PAY-1", many, OG_PROVIDER_TERMS_MAX, &o),
                     0);
    og_provider_table_free(t);
}

/* ===========================================================================
 * Names
 * ========================================================================= */
static void names_round_trip(void **state)
{
    for (int c = OG_CLASS_UNKNOWN; c <= OG_CLASS_TRANSIENT; c++)
        assert_int_equal(
            og_outcome_class_parse(og_outcome_class_name((og_outcome_class)c)),
            c);
    assert_int_equal(OG_CLASS_UNKNOWN, 0); /* a zeroed outcome is safe */
    assert_string_equal(og_outcome_class_name((og_outcome_class)9), "?");
    assert_int_equal(og_outcome_class_parse("Succeeded"), -1);
    assert_int_equal(og_outcome_class_parse(NULL), -1);
    for (int k = OG_TRANSPORT_OK; k <= OG_TRANSPORT_ERROR; k++)
        assert_int_equal(og_provider_transport_parse(og_provider_transport_name(
                             (og_provider_transport)k)),
                         k);
    assert_string_equal(og_provider_transport_name(OG_TRANSPORT_RESET),
                        "connection_reset");
    assert_string_equal(og_provider_transport_name((og_provider_transport)99),
                        "?");
    assert_string_equal(og_provider_table_err_name(OG_PROVIDER_TABLE_E_RULE),
                        "table.rule_invalid");
    assert_string_equal(
        og_provider_table_err_name((og_provider_table_err)99), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vectors_classify_as_expected),
        cmocka_unit_test(sandbox_table_declares_its_contract),
        cmocka_unit_test(payouts_table_declares_its_contract),
        cmocka_unit_test(loader_refuses_each_with_its_code),
        cmocka_unit_test(loader_refuses_text_that_is_not_one_object),
        cmocka_unit_test(load_file_reports_io_and_size),
        cmocka_unit_test(every_undocumented_status_is_unknown),
        cmocka_unit_test(an_undocumented_error_code_is_unknown),
        cmocka_unit_test(only_connect_failed_is_a_no_effect_transport),
        cmocka_unit_test(a_2xx_that_does_not_prove_success_is_unknown),
        cmocka_unit_test(retry_after_is_read_for_transient_only),
        cmocka_unit_test(reasons_never_carry_the_providers_text),
        cmocka_unit_test(a_missing_table_classifies_unknown),
        cmocka_unit_test(lookup_found_pending_and_not_found),
        cmocka_unit_test(an_undocumented_lookup_answer_is_unavailable),
        cmocka_unit_test(lookup_final_in_any_of_its_states_is_found),
        cmocka_unit_test(lookup_of_an_effect_with_other_terms_is_terms_mismatch),
        cmocka_unit_test(names_round_trip),
    };
    return t_run_tests("classify", tests, setup, teardown);
}
