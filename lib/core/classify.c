/*
 * classify.c — what a billing provider's answer means, read from a
 * versioned classification table (include/oncegate/provider.h). PURE: no
 * I/O, no clock — text in, values out (og_provider_table_load_file, which
 * reads the file, lives with the client in lib/provider/client.c).
 *
 * The table, version 1: one JSON object with exactly these members.
 *
 *   format        "oncegate-provider-classification"
 *   version       1
 *   provider, api names: 1..64 of [a-z0-9._-]
 *   documentation optional string: where the provider documents its contract
 *   error_member  the body member that carries the provider's error code
 *   properties    { key_retention_seconds  integer > 0,
 *                   atomic_same_key        boolean,
 *                   lookup                 array of "reference" /
 *                                          "idempotency_key" (may be empty),
 *                   request_expiry         boolean,
 *                   request_expiry_skew_seconds  integer >= 0: required
 *                                          when request_expiry, else refused,
 *                   not_found_final        boolean, optional (false): a
 *                                          lookup after expires_at + skew +
 *                                          visibility delay that lists
 *                                          nothing is final; true only with
 *                                          request_expiry and a lookup by
 *                                          reference (CT6),
 *                   visibility_delay_ms    integer 0..3600000: required
 *                                          when not_found_final, else
 *                                          refused }
 *   create        1..64 rules, in order (an outcome's "rule" is the index)
 *   lookup        required when properties.lookup has "reference", refused
 *                 otherwise: { status, list, match, reference,
 *                              succeeded_if, pending_if (optional),
 *                              returned_if (optional), why }
 *                 succeeded_if and pending_if are each a condition
 *                 {member: "value", ...} or an array of 1..8 conditions of
 *                 which any one suffices — for a provider whose effect has
 *                 more than one final state (a payout "completed", then
 *                 "returned": it completed either way). returned_if, a
 *                 condition of the same form, names the final state that
 *                 is a later return of a completed effect: an effect
 *                 satisfying it must satisfy succeeded_if too (CT7), and
 *                 the lookup then reports reason "returned".
 *
 * A create rule has exactly one of
 *   status     100..599: matches a complete response with that status
 *   transport  a kind other than "ok" (OG_TRANSPORT_MAP)
 * and
 *   error      status rules only: the body's error_member must equal it
 *   class      "succeeded" | "failed" | "transient" | "unknown"
 *   reason     [a-z0-9_.]{1,63}: what the outcome reports
 *   reference  the body member holding the provider's id: required for
 *              succeeded, optional for unknown (202 pending), else refused
 *   require    succeeded only: {member: "value", ...} the body must carry
 *   why        a string; required where a rule claims "no effect"
 *
 * Matching a complete response: the rule for (status, the body's error
 * code) first, then the rule for the status without an error; nothing
 * matched is UNKNOWN. A succeeded rule whose body is not a JSON object, or
 * lacks the reference or a required value, is UNKNOWN "malformed_success":
 * a 2xx proves nothing by itself.
 *
 * The loader refuses a rule that claims more than its answer can prove
 * (table.rule_invalid):
 *   CT1 succeeded only for a 2xx status, and it names its reference.
 *   CT2 failed or transient for a 2xx status only together with an error
 *       code: a bare 2xx is never a refusal (a provider that reports errors
 *       inside 200 must name them).
 *   CT3 failed and transient rules carry "why": they assert "no effect",
 *       which only the provider's documentation can.
 *   CT4 a transport rule is unknown — except connect_failed, which may be
 *       transient: the client reports it only when no connection was ever
 *       established, so not one byte of the request reached the provider.
 *       Never failed: the provider refused nothing. A timeout, reset, empty
 *       reply, oversized or otherwise broken exchange may follow the effect.
 *       Transport rules carry "why".
 *   CT5 reference, require and error only where listed above.
 *   CT6 not_found_final only with request_expiry and a lookup by
 *       reference: absence is final only because the provider refuses
 *       every request decided after expires_at + skew, and only a lookup
 *       by the request's reference can see it.
 *   CT7 returned_if names a final state: each of its conditions carries
 *       every member of some succeeded_if condition with the same value,
 *       so a returned effect is always found (SUCCEEDED) — a return never
 *       turns an effect that completed into anything else.
 * Duplicates — two rules for one (status, error), one status without error
 * or one transport — are table.duplicate_rule: order never decides.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "oncegate/classify.h"

#define MEMBER_MAX 64   /* member names, error codes, provider names */

typedef struct table_rule {
    bool is_transport;
    int status;
    og_provider_transport transport;
    bool has_error;
    char error[MEMBER_MAX + 1];
    og_outcome_class cls;
    char reason[OG_PROVIDER_REASON_MAX + 1];
    bool has_reference;
    char reference[MEMBER_MAX + 1];
    json_t *require;                 /* object of strings, or NULL; owned */
} table_rule;

typedef struct table_lookup {
    bool present;
    int status;
    char list[MEMBER_MAX + 1];      /* the array of effects found */
    char match[MEMBER_MAX + 1];     /* item member equal to the query */
    char reference[MEMBER_MAX + 1]; /* item member holding the id */
    json_t *succeeded_if;             /* owned: an array of conditions */
    json_t *pending_if;               /* owned, the same, may be NULL */
    json_t *returned_if;              /* owned, the same, may be NULL */
} table_lookup;

struct og_provider_table {
    og_provider_properties props;
    char error_member[MEMBER_MAX + 1];
    size_t n_rules;
    table_rule rules[OG_PROVIDER_RULES_MAX];
    table_lookup lookup;
};

/* ===========================================================================
 * Names
 * ========================================================================= */
static const char *const class_names[] = {
#define X(name, text) text,
    OG_OUTCOME_CLASS_MAP(X)
#undef X
};
#define N_CLASSES (sizeof class_names / sizeof class_names[0])

static const char *const transport_names[] = {
#define X(name, text) text,
    OG_TRANSPORT_MAP(X)
#undef X
};
#define N_TRANSPORTS                                                           \
    (sizeof transport_names / sizeof transport_names[0])

static const char *const table_err_names[] = {
#define X(name, text) text,
    OG_PROVIDER_TABLE_ERR_MAP(X)
#undef X
};

const char *og_outcome_class_name(og_outcome_class c)
{
    return (unsigned)c < N_CLASSES ? class_names[c] : "?";
}

int og_outcome_class_parse(const char *text)
{
    for (size_t i = 0; text && i < N_CLASSES; i++)
        if (strcmp(text, class_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *og_provider_transport_name(og_provider_transport t)
{
    return (unsigned)t < N_TRANSPORTS ? transport_names[t] : "?";
}

int og_provider_transport_parse(const char *text)
{
    for (size_t i = 0; text && i < N_TRANSPORTS; i++)
        if (strcmp(text, transport_names[i]) == 0)
            return (int)i;
    return -1;
}

const char *og_provider_table_err_name(og_provider_table_err e)
{
    if ((unsigned)e >= sizeof table_err_names / sizeof table_err_names[0])
        return "?";
    return table_err_names[e];
}

/* ===========================================================================
 * Loading: every refusal goes through fail(), so each carries its stable
 * code, the path into the table and one line of detail.
 * ========================================================================= */

/* Fills *e (may be NULL) and returns OG_EINVAL. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static int fail(og_provider_table_error *e, og_provider_table_err code,
                const char *where, const char *fmt, ...)
{
    char detail[128];
    va_list ap;

    if (!e)
        return OG_EINVAL;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    e->code = code;
    snprintf(e->where, sizeof e->where, "%s", where);
    snprintf(e->text, sizeof e->text, "%s at %s: %s",
             og_provider_table_err_name(code), where, detail);
    return OG_EINVAL;
}

/* Refuses any member of obj not in allowed (NULL-terminated). */
static int only_members(const json_t *obj, const char *const *allowed,
                        const char *where, og_provider_table_error *e)
{
    const char *key;
    json_t *v;
    char path[64];

    json_object_foreach((json_t *)obj, key, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            ok = ok || strcmp(key, allowed[i]) == 0;
        if (!ok) {
            snprintf(path, sizeof path, "%s.%.40s", where, key);
            return fail(e, OG_PROVIDER_TABLE_E_UNKNOWN_MEMBER, path,
                        "not a member of this object");
        }
    }
    return 0;
}

/* 1..max bytes of printable ASCII without spaces. */
static bool visible(const char *s, size_t max)
{
    size_t n = 0;

    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e)
            return false;
    return n >= 1 && n <= max;
}

/* 1..max bytes of [a-z0-9._] (extra: also '-'). */
static bool token(const char *s, size_t max, bool dash)
{
    size_t n = 0;

    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || (dash && c == '-')))
            return false;
    }
    return n >= 1 && n <= max;
}

/* What a text member may hold: 1-2000 bytes of anything (why,
 * documentation), a name (1-64 visible ASCII), a token ([a-z0-9._-]), a
 * reason ([a-z0-9_.], 1-63). */
typedef enum { TEXT_ANY, TEXT_NAME, TEXT_TOKEN, TEXT_REASON } text_kind;

/* Member name of obj as text of kind: 0 and *out; MISSING_MEMBER when
 * absent and required, TYPE when not a string or not of its kind. *out is
 * NULL when absent and optional. */
static int get_text(const json_t *obj, const char *name, const char *where,
                    bool required, text_kind kind, const char **out,
                    og_provider_table_error *e)
{
    json_t *v = json_object_get(obj, name);
    char path[64];
    const char *s;
    bool ok;

    snprintf(path, sizeof path, "%s.%s", where, name);
    *out = NULL;
    if (!v)
        return required ? fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, path,
                               "required")
                        : 0;
    if (!json_is_string(v))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path, "must be a string");
    s = json_string_value(v);
    switch (kind) {
    case TEXT_ANY: ok = strlen(s) >= 1 && strlen(s) <= 2000; break;
    case TEXT_NAME: ok = visible(s, MEMBER_MAX); break;
    case TEXT_TOKEN: ok = token(s, MEMBER_MAX, true); break;
    case TEXT_REASON: ok = token(s, OG_PROVIDER_REASON_MAX, false); break;
    default: ok = false; break;
    }
    if (!ok)
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                    kind == TEXT_ANY  ? "must be 1-2000 bytes"
                    : kind == TEXT_NAME    ? "must be 1-64 visible ASCII"
                    : kind == TEXT_TOKEN   ? "must be 1-64 of [a-z0-9._-]"
                                          : "must be 1-63 of [a-z0-9_.]");
    *out = s;
    return 0;
}

/* An integer member in [lo, hi]. */
static int get_int(const json_t *obj, const char *name, const char *where,
                   json_int_t lo, json_int_t hi, json_int_t *out,
                   og_provider_table_error *e)
{
    json_t *v = json_object_get(obj, name);
    char path[64];

    snprintf(path, sizeof path, "%s.%s", where, name);
    if (!v)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, path, "required");
    if (!json_is_integer(v) || json_integer_value(v) < lo ||
        json_integer_value(v) > hi)
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                    "must be an integer in %lld..%lld", (long long)lo,
                    (long long)hi);
    *out = json_integer_value(v);
    return 0;
}

static int get_bool(const json_t *obj, const char *name, const char *where,
                    bool *out, og_provider_table_error *e)
{
    json_t *v = json_object_get(obj, name);
    char path[64];

    snprintf(path, sizeof path, "%s.%s", where, name);
    if (!v)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, path, "required");
    if (!json_is_boolean(v))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path, "must be a boolean");
    *out = json_is_true(v);
    return 0;
}

#define CONDITIONS_MAX 8 /* alternatives of one lookup condition */

static bool satisfies_any(const json_t *obj, const json_t *conds);

/* Checks v as a {member: "value", ...} condition: 1..16 members, names and
 * values 1-64 visible ASCII. 0, or TYPE at path. */
static int check_condition(const json_t *v, const char *path,
                           og_provider_table_error *e)
{
    const char *key;
    json_t *m;

    if (!json_is_object(v) || json_object_size(v) < 1 ||
        json_object_size(v) > 16)
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                    "must be an object of 1-16 members");
    json_object_foreach((json_t *)v, key, m) {
        if (!visible(key, MEMBER_MAX) || !json_is_string(m) ||
            !visible(json_string_value(m), MEMBER_MAX))
            return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                        "names and values must be 1-64 visible ASCII");
    }
    return 0;
}

/* Member name of obj as one condition (any: or an array of 1..8
 * alternatives). *out is a new reference, always an array of conditions
 * when any is set (NULL when absent). */
static int get_condition(const json_t *obj, const char *name,
                         const char *where, bool any, json_t **out,
                         og_provider_table_error *e)
{
    json_t *v = json_object_get(obj, name);
    char path[64];
    size_t i;
    int rc;

    snprintf(path, sizeof path, "%s.%s", where, name);
    *out = NULL;
    if (!v)
        return 0;
    if (!any || !json_is_array(v)) {
        if ((rc = check_condition(v, path, e)) < 0)
            return rc;
        *out = any ? json_pack("[O]", v) : json_incref(v);
        return *out ? 0 : OG_ENOMEM;
    }
    if (json_array_size(v) < 1 || json_array_size(v) > CONDITIONS_MAX)
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                    "must be a condition or an array of 1-%d conditions",
                    CONDITIONS_MAX);
    for (i = 0; i < json_array_size(v); i++) {
        char item[sizeof path + 24];

        snprintf(item, sizeof item, "%s[%zu]", path, i);
        if ((rc = check_condition(json_array_get(v, i), item, e)) < 0)
            return rc;
    }
    *out = json_incref(v);
    return 0;
}

static int load_properties(const json_t *root, og_provider_table *t,
                           og_provider_table_error *e)
{
    static const char *const allowed[] = {
        "key_retention_seconds", "atomic_same_key", "lookup",
        "request_expiry", "request_expiry_skew_seconds", "not_found_final",
        "visibility_delay_ms", NULL};
    json_t *p = json_object_get(root, "properties"), *v;
    og_provider_properties *pr = &t->props;
    json_int_t n;
    size_t i;
    int rc;

    if (!p)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, "properties",
                    "required");
    if (!json_is_object(p))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, "properties",
                    "must be an object");
    if ((rc = only_members(p, allowed, "properties", e)) < 0)
        return rc;
    /* At most ten years: a longer claim is a typo, not a contract. */
    if ((rc = get_int(p, "key_retention_seconds", "properties", 1,
                      10LL * 366 * 86400, &n, e)) < 0)
        return rc;
    pr->key_retention_s = (int64_t)n;
    if ((rc = get_bool(p, "atomic_same_key", "properties",
                       &pr->atomic_same_key, e)) < 0 ||
        (rc = get_bool(p, "request_expiry", "properties",
                       &pr->request_expiry, e)) < 0)
        return rc;

    v = json_object_get(p, "lookup");
    if (!v)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, "properties.lookup",
                    "required (an empty array: no lookup)");
    if (!json_is_array(v))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, "properties.lookup",
                    "must be an array");
    pr->lookup = 0;
    for (i = 0; i < json_array_size(v); i++) {
        const char *s = json_string_value(json_array_get(v, i));
        unsigned bit = !s                                 ? 0
                       : strcmp(s, "reference") == 0       ? OG_PROVIDER_LOOKUP_REFERENCE
                       : strcmp(s, "idempotency_key") == 0 ? OG_PROVIDER_LOOKUP_IDEMPOTENCY_KEY
                                                           : 0;
        if (!bit || (pr->lookup & bit))
            return fail(e, OG_PROVIDER_TABLE_E_TYPE, "properties.lookup",
                        "items must be distinct \"reference\" or "
                        "\"idempotency_key\"");
        pr->lookup |= bit;
    }

    if (pr->request_expiry) {
        if ((rc = get_int(p, "request_expiry_skew_seconds", "properties", 0,
                          86400, &n, e)) < 0)
            return rc;
        pr->request_expiry_skew_s = (int64_t)n;
    } else if (json_object_get(p, "request_expiry_skew_seconds")) {
        return fail(e, OG_PROVIDER_TABLE_E_RULE,
                    "properties.request_expiry_skew_seconds",
                    "only with request_expiry true");
    }

    pr->not_found_final = false;
    pr->visibility_delay_ms = 0;
    if (json_object_get(p, "not_found_final") &&
        (rc = get_bool(p, "not_found_final", "properties",
                       &pr->not_found_final, e)) < 0)
        return rc;
    if (pr->not_found_final) {
        if (!pr->request_expiry ||
            !(pr->lookup & OG_PROVIDER_LOOKUP_REFERENCE))
            return fail(e, OG_PROVIDER_TABLE_E_RULE,
                        "properties.not_found_final",
                        "only with request_expiry and a lookup by "
                        "reference (CT6)");
        if ((rc = get_int(p, "visibility_delay_ms", "properties", 0, 3600000,
                          &n, e)) < 0)
            return rc;
        pr->visibility_delay_ms = (int64_t)n;
    } else if (json_object_get(p, "visibility_delay_ms")) {
        return fail(e, OG_PROVIDER_TABLE_E_RULE,
                    "properties.visibility_delay_ms",
                    "only with not_found_final true");
    }
    return 0;
}

int64_t og_provider_final_absence_margin_us(const og_provider_properties *p)
{
    if (!p || !p->not_found_final || !p->request_expiry ||
        p->request_expiry_skew_s < 0 || p->visibility_delay_ms < 0)
        return -1;
    return p->request_expiry_skew_s * 1000000 + p->visibility_delay_ms * 1000;
}

/* Reads create[i] into *r, checking CT1-CT5. */
static int load_rule(const json_t *j, size_t i, table_rule *r,
                     og_provider_table_error *e)
{
    static const char *const allowed[] = {"status", "transport", "error",
                                          "class", "reason", "reference",
                                          "require", "why", NULL};
    char where[32], path[64];
    const char *s, *why;
    json_int_t status;
    int rc, k;
    bool two_xx;

    snprintf(where, sizeof where, "create[%zu]", i);
    if (!json_is_object(j))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, where, "must be an object");
    if ((rc = only_members(j, allowed, where, e)) < 0)
        return rc;

    if (json_object_get(j, "status") && json_object_get(j, "transport"))
        return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                    "a rule matches a status or a transport, not both");
    if (json_object_get(j, "transport")) {
        if ((rc = get_text(j, "transport", where, true, TEXT_TOKEN, &s, e)) < 0)
            return rc;
        k = og_provider_transport_parse(s);
        snprintf(path, sizeof path, "%s.transport", where);
        if (k < 0 || k == OG_TRANSPORT_OK)
            return fail(e, OG_PROVIDER_TABLE_E_TYPE, path,
                        "not a transport failure kind");
        r->is_transport = true;
        r->transport = (og_provider_transport)k;
    } else {
        if ((rc = get_int(j, "status", where, 100, 599, &status, e)) < 0)
            return rc;
        r->status = (int)status;
    }

    if ((rc = get_text(j, "class", where, true, TEXT_TOKEN, &s, e)) < 0)
        return rc;
    k = og_outcome_class_parse(s);
    if (k < 0) {
        snprintf(path, sizeof path, "%s.class", where);
        return fail(e, OG_PROVIDER_TABLE_E_CLASS, path,
                    "not succeeded, failed, transient or unknown");
    }
    r->cls = (og_outcome_class)k;

    if ((rc = get_text(j, "reason", where, true, TEXT_REASON, &s, e)) < 0)
        return rc;
    snprintf(r->reason, sizeof r->reason, "%s", s);
    if ((rc = get_text(j, "why", where, false, TEXT_ANY, &why, e)) < 0)
        return rc;

    if ((rc = get_text(j, "error", where, false, TEXT_NAME, &s, e)) < 0)
        return rc;
    if (s) {
        if (r->is_transport)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "error only in a status rule (CT5)");
        r->has_error = true;
        snprintf(r->error, sizeof r->error, "%s", s);
    }

    if ((rc = get_text(j, "reference", where, false, TEXT_NAME, &s, e)) < 0)
        return rc;
    if (s) {
        if (r->cls != OG_CLASS_SUCCEEDED && r->cls != OG_CLASS_UNKNOWN)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "reference only in a succeeded or unknown rule (CT5)");
        if (r->is_transport)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "a transport failure has no body to reference (CT5)");
        r->has_reference = true;
        snprintf(r->reference, sizeof r->reference, "%s", s);
    }
    if ((rc = get_condition(j, "require", where, false, &r->require, e)) < 0)
        return rc;
    if (r->require && r->cls != OG_CLASS_SUCCEEDED)
        return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                    "require only in a succeeded rule (CT5)");

    two_xx = !r->is_transport && r->status >= 200 && r->status <= 299;
    switch (r->cls) {
    case OG_CLASS_SUCCEEDED:
        if (!two_xx)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "succeeded only for a 2xx status (CT1)");
        if (!r->has_reference)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "a succeeded rule names its reference (CT1)");
        break;
    case OG_CLASS_FAILED:
    case OG_CLASS_TRANSIENT:
        if (two_xx && !r->has_error)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "a 2xx is a refusal only with an error code (CT2)");
        if (!why)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "a rule claiming no effect carries why (CT3)");
        if (r->is_transport &&
            !(r->cls == OG_CLASS_TRANSIENT &&
              r->transport == OG_TRANSPORT_CONNECT_FAILED))
            return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                        "only connect_failed may be no-effect, and only "
                        "transient (CT4)");
        break;
    case OG_CLASS_UNKNOWN:
        break;
    }
    if (r->is_transport && !why)
        return fail(e, OG_PROVIDER_TABLE_E_RULE, where,
                    "a transport rule carries why (CT4)");
    return 0;
}

static bool same_match(const table_rule *a, const table_rule *b)
{
    if (a->is_transport || b->is_transport)
        return a->is_transport && b->is_transport &&
               a->transport == b->transport;
    if (a->status != b->status || a->has_error != b->has_error)
        return false;
    return !a->has_error || strcmp(a->error, b->error) == 0;
}

static int load_rules(const json_t *root, og_provider_table *t,
                      og_provider_table_error *e)
{
    json_t *c = json_object_get(root, "create");
    char where[32];
    size_t i, k;
    int rc;

    if (!c)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, "create",
                    "required");
    if (!json_is_array(c) || json_array_size(c) < 1 ||
        json_array_size(c) > OG_PROVIDER_RULES_MAX)
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, "create",
                    "must be an array of 1-%d rules", OG_PROVIDER_RULES_MAX);
    for (i = 0; i < json_array_size(c); i++) {
        table_rule *r = &t->rules[i];
        t->n_rules = i + 1; /* so og_provider_table_free releases require */
        if ((rc = load_rule(json_array_get(c, i), i, r, e)) < 0)
            return rc;
        for (k = 0; k < i; k++)
            if (same_match(&t->rules[k], r)) {
                snprintf(where, sizeof where, "create[%zu]", i);
                return fail(e, OG_PROVIDER_TABLE_E_DUPLICATE_RULE, where,
                            "matches what create[%zu] matches", k);
            }
    }
    return 0;
}

static int load_lookup(const json_t *root, og_provider_table *t,
                       og_provider_table_error *e)
{
    static const char *const allowed[] = {"status", "list", "match",
                                          "reference", "succeeded_if",
                                          "pending_if", "returned_if",
                                          "why", NULL};
    json_t *l = json_object_get(root, "lookup");
    table_lookup *lk = &t->lookup;
    json_int_t status;
    const char *s;
    int rc;

    if (!(t->props.lookup & OG_PROVIDER_LOOKUP_REFERENCE)) {
        if (l)
            return fail(e, OG_PROVIDER_TABLE_E_RULE, "lookup",
                        "properties.lookup does not list \"reference\"");
        return 0;
    }
    if (!l)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER, "lookup",
                    "required when properties.lookup lists \"reference\"");
    if (!json_is_object(l))
        return fail(e, OG_PROVIDER_TABLE_E_TYPE, "lookup", "must be an object");
    if ((rc = only_members(l, allowed, "lookup", e)) < 0)
        return rc;
    /* A lookup answer is evidence of an effect only with a 2xx. */
    if ((rc = get_int(l, "status", "lookup", 200, 299, &status, e)) < 0)
        return rc;
    lk->status = (int)status;
    if ((rc = get_text(l, "list", "lookup", true, TEXT_NAME, &s, e)) < 0)
        return rc;
    snprintf(lk->list, sizeof lk->list, "%s", s);
    if ((rc = get_text(l, "match", "lookup", true, TEXT_NAME, &s, e)) < 0)
        return rc;
    snprintf(lk->match, sizeof lk->match, "%s", s);
    if ((rc = get_text(l, "reference", "lookup", true, TEXT_NAME, &s, e)) < 0)
        return rc;
    snprintf(lk->reference, sizeof lk->reference, "%s", s);
    if ((rc = get_text(l, "why", "lookup", false, TEXT_ANY, &s, e)) < 0)
        return rc;
    if ((rc = get_condition(l, "succeeded_if", "lookup", true,
                            &lk->succeeded_if, e)) < 0 ||
        (rc = get_condition(l, "pending_if", "lookup", true, &lk->pending_if,
                            e)) < 0 ||
        (rc = get_condition(l, "returned_if", "lookup", true,
                            &lk->returned_if, e)) < 0)
        return rc;
    if (!lk->succeeded_if)
        return fail(e, OG_PROVIDER_TABLE_E_MISSING_MEMBER,
                    "lookup.succeeded_if", "required");
    /* CT7: a returned effect satisfies succeeded_if too. */
    for (size_t i = 0; lk->returned_if && i < json_array_size(lk->returned_if);
         i++)
        if (!satisfies_any(json_array_get(lk->returned_if, i),
                           lk->succeeded_if))
            return fail(e, OG_PROVIDER_TABLE_E_RULE, "lookup.returned_if",
                        "each condition must imply a succeeded_if "
                        "condition (CT7)");
    lk->present = true;
    return 0;
}

int og_provider_table_load(const char *json, size_t len,
                           og_provider_table **out,
                           og_provider_table_error *err)
{
    static const char *const allowed[] = {
        "format", "version", "provider", "api", "documentation",
        "error_member", "properties", "create", "lookup", NULL};
    og_provider_table *t = NULL;
    json_error_t jerr;
    json_t *root = NULL, *v;
    const char *s;
    int rc;

    if (err)
        memset(err, 0, sizeof *err);
    if (!json || !out)
        return fail(err, OG_PROVIDER_TABLE_E_JSON, "$", "no text");
    if (len > OG_PROVIDER_TABLE_MAX)
        return fail(err, OG_PROVIDER_TABLE_E_TOO_LARGE, "$",
                    "over %d bytes", OG_PROVIDER_TABLE_MAX);
    root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        rc = fail(err, OG_PROVIDER_TABLE_E_JSON, "$",
                  root ? "not an object" : "line %d: %.80s", jerr.line,
                  jerr.text);
        goto out;
    }
    t = calloc(1, sizeof *t);
    if (!t) {
        rc = OG_ENOMEM;
        goto out;
    }
    /* The format and version first: a file of another kind or version is
     * named as such, not as a pile of unknown members. */
    v = json_object_get(root, "format");
    if (!json_is_string(v) ||
        strcmp(json_string_value(v), "oncegate-provider-classification") != 0) {
        rc = fail(err, OG_PROVIDER_TABLE_E_FORMAT, "format",
                  "must be \"oncegate-provider-classification\"");
        goto out;
    }
    v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != 1) {
        rc = fail(err, OG_PROVIDER_TABLE_E_VERSION, "version",
                  "this build reads version 1");
        goto out;
    }
    t->props.version = 1;
    if ((rc = only_members(root, allowed, "$", err)) < 0)
        goto out;
    if ((rc = get_text(root, "provider", "$", true, TEXT_TOKEN, &s, err)) < 0)
        goto out;
    snprintf(t->props.provider, sizeof t->props.provider, "%s", s);
    if ((rc = get_text(root, "api", "$", true, TEXT_TOKEN, &s, err)) < 0)
        goto out;
    snprintf(t->props.api, sizeof t->props.api, "%s", s);
    if ((rc = get_text(root, "documentation", "$", false, TEXT_ANY, &s,
                       err)) < 0)
        goto out;
    if ((rc = get_text(root, "error_member", "$", true, TEXT_NAME, &s,
                       err)) < 0)
        goto out;
    snprintf(t->error_member, sizeof t->error_member, "%s", s);
    if ((rc = load_properties(root, t, err)) < 0 ||
        (rc = load_rules(root, t, err)) < 0 ||
        (rc = load_lookup(root, t, err)) < 0)
        goto out;
    *out = t;
    t = NULL;
    rc = 0;
out:
    og_provider_table_free(t);
    json_decref(root);
    return rc;
}

void og_provider_table_free(og_provider_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_rules; i++)
        json_decref(t->rules[i].require);
    json_decref(t->lookup.succeeded_if);
    json_decref(t->lookup.pending_if);
    json_decref(t->lookup.returned_if);
    free(t);
}

const og_provider_properties *
og_provider_table_properties(const og_provider_table *t)
{
    return t ? &t->props : NULL;
}

/* ===========================================================================
 * Classification
 * ========================================================================= */

/* The body as a JSON object (new reference), or NULL: empty, not JSON, not
 * an object, or a member repeated — an ambiguous body proves nothing. */
static json_t *body_object(const og_provider_response *r)
{
    json_t *j;

    if (!r->body || r->body_len == 0)
        return NULL;
    j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* True when obj carries every member of cond with exactly its value. */
static bool satisfies(const json_t *obj, const json_t *cond)
{
    const char *key;
    json_t *want;

    json_object_foreach((json_t *)cond, key, want) {
        json_t *got = json_object_get(obj, key);
        if (!json_is_string(got) ||
            strcmp(json_string_value(got), json_string_value(want)) != 0)
            return false;
    }
    return true;
}

/* True when obj satisfies one of conds (an array of conditions). */
static bool satisfies_any(const json_t *obj, const json_t *conds)
{
    for (size_t i = 0; i < json_array_size(conds); i++)
        if (satisfies(obj, json_array_get(conds, i)))
            return true;
    return false;
}

/* True when obj carries every term's member with exactly its value. */
static bool has_terms(const json_t *obj, const og_provider_term *terms,
                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *got =
            json_string_value(json_object_get(obj, terms[i].member));

        if (!got || strcmp(got, terms[i].value) != 0)
            return false;
    }
    return true;
}

/* The member name of obj as a reference, or NULL when absent or not
 * 1..OG_PROVIDER_REF_MAX visible ASCII (it will reach logs). */
static const char *reference_of(const json_t *obj, const char *name)
{
    const char *s = json_string_value(json_object_get(obj, name));
    return s && visible(s, OG_PROVIDER_REF_MAX) ? s : NULL;
}

/* Retry-After as delta-seconds (RFC 9110 10.2.3): digits only, at most a
 * day; an HTTP-date or anything else is -1 (the caller's own backoff). */
static int64_t retry_after(const char *v)
{
    int64_t n = 0;
    size_t i = 0, digits = 0;

    if (!v)
        return -1;
    while (v[i] == ' ' || v[i] == '\t')
        i++;
    for (; v[i] >= '0' && v[i] <= '9'; i++, digits++)
        if (digits >= 9 || (n = n * 10 + (v[i] - '0')) > 86400)
            return -1;
    while (v[i] == ' ' || v[i] == '\t')
        i++;
    return digits && !v[i] ? n : -1;
}

void og_provider_classify(const og_provider_table *t,
                          const og_provider_response *r,
                          og_provider_outcome *out)
{
    og_provider_outcome o = {.cls = OG_CLASS_UNKNOWN, .rule = -1,
                             .retry_after_s = -1};
    const table_rule *rule = NULL, *generic = NULL;
    const char *code = NULL, *ref;
    bool status_has_rules = false;
    json_t *body = NULL;

    if (!t || !r) {
        snprintf(o.reason, sizeof o.reason, "no_table");
        goto out;
    }
    if (r->transport != OG_TRANSPORT_OK) {
        for (size_t i = 0; i < t->n_rules && !rule; i++)
            if (t->rules[i].is_transport &&
                t->rules[i].transport == r->transport)
                rule = &t->rules[i];
        if (!rule)
            snprintf(o.reason, sizeof o.reason, "transport_%s",
                     og_provider_transport_name(r->transport));
        goto matched;
    }

    body = body_object(r);
    if (body)
        code = json_string_value(json_object_get(body, t->error_member));
    for (size_t i = 0; i < t->n_rules; i++) {
        const table_rule *c = &t->rules[i];
        if (c->is_transport || c->status != r->status)
            continue;
        status_has_rules = true;
        if (!c->has_error)
            generic = c;
        else if (code && strcmp(c->error, code) == 0)
            rule = c;
    }
    if (!rule)
        rule = generic;
    if (!rule && status_has_rules)
        snprintf(o.reason, sizeof o.reason, "undocumented_error_%d",
                 r->status);
    else if (!rule)
        snprintf(o.reason, sizeof o.reason, "undocumented_status_%d",
                 r->status);

matched:
    if (rule) {
        o.rule = (int)(rule - t->rules);
        o.cls = rule->cls;
        snprintf(o.reason, sizeof o.reason, "%s", rule->reason);
        ref = rule->has_reference && body ? reference_of(body, rule->reference)
                                          : NULL;
        if (rule->cls == OG_CLASS_SUCCEEDED &&
            (!ref || (rule->require && !satisfies(body, rule->require)))) {
            /* A 2xx proves nothing by itself: without the documented body
             * the effect may or may not exist. */
            o.cls = OG_CLASS_UNKNOWN;
            snprintf(o.reason, sizeof o.reason, "malformed_success");
            ref = NULL;
        }
        if (ref)
            snprintf(o.reference, sizeof o.reference, "%s", ref);
        if (o.cls == OG_CLASS_TRANSIENT)
            o.retry_after_s = retry_after(r->retry_after);
    }
out:
    json_decref(body);
    *out = o;
}

int og_provider_classify_lookup(const og_provider_table *t,
                                const og_provider_response *r,
                                const char *query, og_provider_outcome *out)
{
    return og_provider_classify_lookup_terms(t, r, query, NULL, 0, out);
}

int og_provider_classify_lookup_terms(const og_provider_table *t,
                                      const og_provider_response *r,
                                      const char *query,
                                      const og_provider_term *terms,
                                      size_t n_terms,
                                      og_provider_outcome *out)
{
    og_provider_outcome o = {.cls = OG_CLASS_UNKNOWN, .rule = -1,
                             .retry_after_s = -1};
    const table_lookup *lk;
    json_t *body = NULL, *list, *item;
    const char *ref, *chosen = NULL, *state = NULL;
    const json_t *chosen_item = NULL;
    size_t i, n;
    int rc = OG_EPROVIDER_UNAVAILABLE;

    if (!t || !r || !out || !query || !t->lookup.present ||
        n_terms > OG_PROVIDER_TERMS_MAX || (n_terms && !terms))
        return OG_EINVAL;
    for (i = 0; i < n_terms; i++)
        if (!terms[i].member || !terms[i].value)
            return OG_EINVAL;
    lk = &t->lookup;
    if (r->transport != OG_TRANSPORT_OK || r->status != lk->status)
        return OG_EPROVIDER_UNAVAILABLE;
    body = body_object(r);
    list = json_object_get(body, lk->list);
    if (!json_is_array(list))
        goto out;
    n = json_array_size(list);
    /* Every item must be a documented effect for exactly this query: a
     * provider that ignored the filter would otherwise "find" strangers. */
    for (i = 0; i < n; i++) {
        item = json_array_get(list, i);
        const char *m = json_string_value(json_object_get(item, lk->match));
        if (!json_is_object(item) || !m || strcmp(m, query) != 0 ||
            !(ref = reference_of(item, lk->reference)))
            goto out;
        /* An effect under this reference with other terms is not this
         * attempt's: it proves nothing about it, and outweighs every other
         * finding (docs/payouts.md, P7: on any mismatch, escalate). */
        if (!has_terms(item, terms, n_terms)) {
            if (!state || strcmp(state, "terms_mismatch") != 0) {
                state = "terms_mismatch";
                chosen = ref;
            }
        } else if (state && strcmp(state, "terms_mismatch") == 0) {
            continue;
        } else if (satisfies_any(item, lk->succeeded_if)) {
            if (!state || strcmp(state, "found") != 0) {
                state = "found";
                chosen = ref;
                chosen_item = item;
            }
        } else if (lk->pending_if && satisfies_any(item, lk->pending_if)) {
            if (!state || strcmp(state, "undocumented_state") == 0) {
                state = "pending";
                chosen = ref;
            }
        } else if (!state) {
            state = "undocumented_state";
            chosen = ref;
        }
    }
    if (n == 0) {
        snprintf(o.reason, sizeof o.reason, "not_found");
        rc = 0;
    } else {
        bool found = strcmp(state, "found") == 0;
        o.cls = found ? OG_CLASS_SUCCEEDED : OG_CLASS_UNKNOWN;
        /* One effect, completed and later returned: found all the same
         * (CT7), and named so that its return can be recorded. Several
         * effects are a duplicate first of all. */
        if (found && n == 1 && lk->returned_if &&
            satisfies_any(chosen_item, lk->returned_if))
            state = "returned";
        snprintf(o.reason, sizeof o.reason, "%s",
                 found && n > 1 ? "found_multiple" : state);
        snprintf(o.reference, sizeof o.reference, "%s", chosen);
        rc = 1;
    }
    *out = o;
out:
    json_decref(body);
    return rc;
}
