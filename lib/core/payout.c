/*
 * payout.c — the decision side of a delayed payout (docs/payouts.md,
 * sections 1 and 4): money in minor units, the terms' canonical serialization and fingerprint, the
 * policy, the execution recheck and the release day. PURE: no I/O, no
 * clock, no randomness, no locale; the library calls are libsodium's
 * SHA-256 and, for the release day only, ICU's calendar (its own time-zone
 * database, compiled into the library: no file is read), which allocates.
 *
 * Invariants (tests/test_payout.c proves each; fuzz/fuzz_payout.c asserts
 * PC1-PC4 on arbitrary input):
 *   PC1 Every scan is bounded by a fixed cap of its input, and every output
 *       is written only on success and only within its stated length.
 *   PC2 Money round-trips: for every text og_payout_amount_parse accepts,
 *       formatting its value and parsing that gives the same minor units,
 *       and the formatted text is a fixed point.
 *   PC3 One payout, one fingerprint: terms that differ only in spelling
 *       (padding of the amount, spaces of the purpose) serialize to the
 *       same bytes; terms that differ in any field serialize differently,
 *       because every field is length-prefixed in a fixed order and an
 *       absent purpose has a length no present one can have.
 *   PC4 The verdict's outcome is always its reason's outcome
 *       (OG_PAYOUT_REASON_MAP's third column): there is no code path that
 *       sets one without the other. A rule that cannot be evaluated
 *       (overflow) fails — Denied, never Allowed.
 *   PC5 An unavailable context is answered before any other field is read:
 *       an unavailable context decides nothing else.
 *   PC6 Rules run in OG_PAYOUT_REASON_MAP's order (rule_table below lists
 *       them in that order); the first that fails decides.
 *   PC7 An acknowledgment of a recently changed destination covers that
 *       destination's version only: rule 7 is skipped exactly while the
 *       destination is at the acknowledged version, in a decision and in a
 *       recheck alike.
 */
#include <sodium.h>
#include <unicode/ucal.h>
#include <unicode/utypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oncegate/payout.h"
#include "core/core_int.h"

/* ===========================================================================
 * Names
 * ========================================================================= */

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const state_names[] = {
#define X(name, text) text,
    OG_PAYOUT_STATE_MAP(X)
#undef X
};

static const char *const bstatus_names[] = {
#define X(name, text) text,
    OG_PAYOUT_BENEFICIARY_STATUS_MAP(X)
#undef X
};

static const char *const outcome_names[] = {
#define X(name, text) text,
    OG_PAYOUT_OUTCOME_MAP(X)
#undef X
};

static const char *const reason_names[] = {
#define X(name, code, outcome) code,
    OG_PAYOUT_REASON_MAP(X)
#undef X
};

static const og_payout_outcome reason_outcomes[] = {
#define X(name, code, outcome) OG_PAYOUT_##outcome,
    OG_PAYOUT_REASON_MAP(X)
#undef X
};

static const char *const exec_outcome_names[] = {
#define X(name, text) text,
    OG_PAYOUT_EXEC_OUTCOME_MAP(X)
#undef X
};

static const char *const worker_reason_names[] = {
#define X(name, code) code,
    OG_PAYOUT_WORKER_REASON_MAP(X)
#undef X
};

/* (unsigned) folds negative values of a corrupted enum into "too large". */
#define NAME_OF(table, v)                                                      \
    ((unsigned)(v) < COUNT_OF(table) ? table[(unsigned)(v)] : "?")

const char *og_payout_state_name(og_payout_state s)
{
    return NAME_OF(state_names, s);
}

const char *og_payout_beneficiary_status_name(og_payout_beneficiary_status s)
{
    return NAME_OF(bstatus_names, s);
}

const char *og_payout_outcome_name(og_payout_outcome o)
{
    return NAME_OF(outcome_names, o);
}

const char *og_payout_reason_name(og_payout_reason r)
{
    return NAME_OF(reason_names, r);
}

const char *og_payout_exec_outcome_name(og_payout_exec_outcome o)
{
    return NAME_OF(exec_outcome_names, o);
}

const char *og_payout_worker_reason_name(og_payout_worker_reason r)
{
    return NAME_OF(worker_reason_names, r);
}

og_payout_outcome og_payout_reason_outcome(og_payout_reason r)
{
    if ((unsigned)r >= COUNT_OF(reason_outcomes))
        return OG_PAYOUT_DENIED;
    return reason_outcomes[(unsigned)r];
}

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

/* Length of s, or max + 1 when s is longer than max: every scan below
 * measures with this first (PC1). */
static size_t bounded_len(const char *s, size_t max)
{
    size_t n = 0;
    while (n <= max && s[n] != '\0')
        n++;
    return n;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* *sum = a + b for a, b >= 0; false when it would exceed INT64_MAX. */
static bool add_nonneg(int64_t a, int64_t b, int64_t *sum)
{
    if (a > INT64_MAX - b)
        return false;
    *sum = a + b;
    return true;
}

/* ===========================================================================
 * Currencies
 *
 * The table is generated by tools/gen_currencies.py and committed: see that
 * script for both sources and for why it is not generated at build time.
 * ========================================================================= */

typedef struct currency_row {
    char code[OG_CURRENCY_LEN + 1];
    int scale; /* 0..4, or -1: no minor unit, refused for payouts */
} currency_row;

static const currency_row currencies[] = {
#include "payout_currencies.inc"
};

static int currency_cmp(const void *key, const void *elem)
{
    return memcmp(key, ((const currency_row *)elem)->code, OG_CURRENCY_LEN);
}

/* The scale of currency, or -1 when it is not a payout currency. */
static int currency_scale(const char *currency)
{
    if (currency == NULL)
        return -1;
    /* Exactly three upper-case ASCII letters: lower case is refused, not
     * folded, so a currency has one spelling in the fingerprint. */
    for (int i = 0; i < OG_CURRENCY_LEN; i++)
        if (currency[i] < 'A' || currency[i] > 'Z')
            return -1; /* also stops at the terminator of a short string */
    if (currency[OG_CURRENCY_LEN] != '\0')
        return -1;
    const currency_row *c =
        bsearch(currency, currencies, COUNT_OF(currencies),
                sizeof currencies[0], currency_cmp);
    return c ? c->scale : -1;
}

int og_payout_currency_scale(const char *currency, int *scale)
{
    if (scale == NULL)
        return OG_EINVAL;
    int s = currency_scale(currency);
    if (s < 0)
        return OG_EPAYOUT_CURRENCY;
    *scale = s;
    return 0;
}

/* ===========================================================================
 * Money
 * ========================================================================= */

/* Raw input cap: the longest acceptable amount is 15 digits and a point;
 * 64 leaves room for the refusals to be about content, not length. */
#define AMOUNT_INPUT_MAX 64

/* acc * 10 + digit, refused above OG_PAYOUT_MINOR_MAX. Because that max is
 * far below INT64_MAX / 10, this can never overflow int64 either. */
static bool push_digit(int64_t *acc, int digit)
{
    if (*acc > (OG_PAYOUT_MINOR_MAX - digit) / 10)
        return false;
    *acc = *acc * 10 + digit;
    return true;
}

int og_payout_amount_parse(const char *text, const char *currency,
                           int64_t *minor)
{
    int scale = currency_scale(currency);
    if (scale < 0)
        return OG_EPAYOUT_CURRENCY;
    if (minor == NULL)
        return OG_EINVAL;
    if (text == NULL)
        return OG_EPAYOUT_AMOUNT;
    size_t n = bounded_len(text, AMOUNT_INPUT_MAX);
    if (n == 0 || n > AMOUNT_INPUT_MAX)
        return OG_EPAYOUT_AMOUNT;

    /* Integer part: "0" alone, or a non-zero digit and digits. A leading
     * zero ("04") is refused: one spelling per amount. */
    size_t i = 0;
    int64_t acc = 0;
    if (!is_digit(text[0]))
        return OG_EPAYOUT_AMOUNT; /* "", "-1", "+1", ".5", " 1" ... */
    if (text[0] == '0') {
        i = 1;
        if (i < n && is_digit(text[i]))
            return OG_EPAYOUT_AMOUNT;
    } else {
        while (i < n && is_digit(text[i]))
            if (!push_digit(&acc, text[i++] - '0'))
                return OG_EPAYOUT_AMOUNT;
    }

    /* Fraction: '.' and 1..scale digits; none at scale 0. The grammar is
     * checked first, so "1.5x" is malformed whatever the currency. */
    int frac = 0;
    if (i < n) {
        if (text[i] != '.')
            return OG_EPAYOUT_AMOUNT; /* "1e3", "1 ", "1,0" */
        size_t f0 = ++i;
        while (i < n && is_digit(text[i]))
            i++;
        if (i != n || i == f0)
            return OG_EPAYOUT_AMOUNT; /* "1.2.3", "1.", "1.5x" */
        /* Finer than the currency ("0.001" EUR, "1.5" or "5.0" JPY): the
         * code every route that takes an amount gives it. */
        if (i - f0 > (size_t)scale)
            return OG_EAMOUNT_MINOR_UNITS;
        for (size_t k = f0; k < i; k++, frac++)
            if (!push_digit(&acc, text[k] - '0'))
                return OG_EPAYOUT_AMOUNT;
    }
    for (; frac < scale; frac++)
        if (!push_digit(&acc, 0))
            return OG_EPAYOUT_AMOUNT;
    if (acc == 0)
        return OG_EPAYOUT_AMOUNT; /* zero in any spelling */
    *minor = acc;
    return 0;
}

int og_payout_amount_format(int64_t minor, const char *currency, char *out,
                            size_t outlen)
{
    int scale = currency_scale(currency);
    if (scale < 0)
        return OG_EPAYOUT_CURRENCY;
    if (minor < 0)
        return OG_EPAYOUT_AMOUNT;
    if (out == NULL)
        return OG_EINVAL;

    /* Digits, least significant first, at least scale + 1 of them so a
     * pure fraction gets its "0" before the point. */
    char rev[OG_PAYOUT_MONEY_TEXT_MAX];
    int nd = 0;
    uint64_t v = (uint64_t)minor;
    do {
        rev[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (nd < scale + 1)
        rev[nd++] = '0';

    char buf[OG_PAYOUT_MONEY_TEXT_MAX + 1];
    size_t o = 0;
    for (int k = nd - 1; k >= 0; k--) {
        buf[o++] = rev[k];
        if (k == scale && scale > 0)
            buf[o++] = '.';
    }
    buf[o] = '\0';
    if (outlen < o + 1)
        return OG_EINVAL;
    memcpy(out, buf, o + 1);
    return 0;
}

/* ===========================================================================
 * Purpose
 * ========================================================================= */

int og_payout_purpose_normalize(const char *in, char *out, size_t outlen)
{
    if (in == NULL)
        return OG_EPAYOUT_PURPOSE;
    size_t n = bounded_len(in, OG_PAYOUT_PURPOSE_INPUT_MAX);
    if (n > OG_PAYOUT_PURPOSE_INPUT_MAX)
        return OG_EPAYOUT_PURPOSE;

    char buf[OG_PAYOUT_PURPOSE_MAX + 1];
    size_t o = 0;
    bool pending_space = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x20 || c > 0x7e)
            return OG_EPAYOUT_PURPOSE;
        if (c == ' ') {
            pending_space = o > 0; /* leading spaces are dropped */
            continue;
        }
        /* A run of spaces becomes one, and only once something follows
         * it: trailing spaces are never written. */
        if (pending_space) {
            if (o == OG_PAYOUT_PURPOSE_MAX)
                return OG_EPAYOUT_PURPOSE;
            buf[o++] = ' ';
            pending_space = false;
        }
        if (o == OG_PAYOUT_PURPOSE_MAX)
            return OG_EPAYOUT_PURPOSE;
        buf[o++] = (char)c;
    }
    if (o == 0)
        return OG_EPAYOUT_PURPOSE; /* empty or all spaces: absent is NULL */
    buf[o] = '\0';
    if (out == NULL || outlen < o + 1)
        return OG_EINVAL;
    memcpy(out, buf, o + 1);
    return 0;
}

/* ===========================================================================
 * Terms: validation, canonical serialization, fingerprint
 * ========================================================================= */

/* Terms after validation, in their canonical spellings. */
typedef struct canon_terms {
    const char *tenant, *beneficiary, *destination; /* borrowed, checked */
    int64_t destination_version;                    /* >= 1 */
    char version[24];                               /* the same, decimal */
    char amount[OG_PAYOUT_MONEY_TEXT_MAX + 1];      /* canonical */
    int64_t amount_minor;
    char currency[OG_CURRENCY_LEN + 1];
    bool has_purpose;
    char purpose[OG_PAYOUT_PURPOSE_MAX + 1];        /* normalized */
} canon_terms;

/* Validates t in the documented order and fills *c. 0 or the first bad
 * field's code. */
static int terms_check(const og_payout_terms *t, canon_terms *c)
{
    int rc;

    if (og__id_check(t->tenant_id) != 0)
        return OG_EPAYOUT_TENANT;
    if (og__id_check(t->beneficiary_id) != 0)
        return OG_EPAYOUT_BENEFICIARY;
    if (og__id_check(t->destination_id) != 0)
        return OG_EPAYOUT_DESTINATION;
    if (t->destination_version < 1)
        return OG_EPAYOUT_DESTINATION_VERSION;
    if (currency_scale(t->currency) < 0)
        return OG_EPAYOUT_CURRENCY;
    if ((rc = og_payout_amount_parse(t->amount, t->currency,
                                     &c->amount_minor)) != 0)
        return rc;
    c->tenant = t->tenant_id;
    c->beneficiary = t->beneficiary_id;
    c->destination = t->destination_id;
    c->destination_version = t->destination_version;
    snprintf(c->version, sizeof c->version, "%lld",
             (long long)t->destination_version);
    /* Cannot fail: the value was just parsed for this currency and the
     * buffer holds any int64. */
    if (og_payout_amount_format(c->amount_minor, t->currency, c->amount,
                                sizeof c->amount) != 0)
        return OG_EINTERNAL;
    memcpy(c->currency, t->currency, OG_CURRENCY_LEN + 1);
    c->has_purpose = t->purpose != NULL;
    if (c->has_purpose &&
        og_payout_purpose_normalize(t->purpose, c->purpose,
                                    sizeof c->purpose) != 0)
        return OG_EPAYOUT_PURPOSE;
    return 0;
}

static size_t put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return 4;
}

static size_t put_field(unsigned char *p, const char *s)
{
    size_t n = strlen(s); /* every field was capped by its check */
    size_t o = put_u32(p, (uint32_t)n);
    memcpy(p + o, s, n);
    return o + n;
}

/* Writes the serialization of c into buf (OG_PAYOUT_TERMS_CANONICAL_MAX
 * bytes) and returns its length. */
static size_t terms_encode(const canon_terms *c, unsigned char *buf)
{
    size_t o = 0;
    o += put_field(buf + o, OG_PAYOUT_TERMS_TAG);
    o += put_field(buf + o, c->tenant);
    o += put_field(buf + o, c->beneficiary);
    o += put_field(buf + o, c->destination);
    o += put_field(buf + o, c->version);
    o += put_field(buf + o, c->amount);
    o += put_field(buf + o, c->currency);
    if (c->has_purpose)
        o += put_field(buf + o, c->purpose);
    else
        o += put_u32(buf + o, OG_PAYOUT_ABSENT_LEN);
    return o;
}

int og_payout_terms_canonicalize(const og_payout_terms *t, unsigned char *out,
                                 size_t outlen, size_t *len)
{
    canon_terms c;
    unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
    int rc;

    if (t == NULL || out == NULL || len == NULL)
        return OG_EINVAL;
    if ((rc = terms_check(t, &c)) != 0)
        return rc;
    size_t n = terms_encode(&c, buf);
    if (outlen < n)
        return OG_EINVAL;
    memcpy(out, buf, n);
    *len = n;
    return 0;
}

/* The fingerprint of validated terms, as hex into out. */
static void fingerprint_of(const canon_terms *c,
                           char out[OG_PAYOUT_FINGERPRINT_HEX + 1])
{
    unsigned char buf[OG_PAYOUT_TERMS_CANONICAL_MAX];
    unsigned char digest[crypto_hash_sha256_BYTES];

    size_t n = terms_encode(c, buf);
    crypto_hash_sha256(digest, buf, n);
    sodium_bin2hex(out, OG_PAYOUT_FINGERPRINT_HEX + 1, digest, sizeof digest);
}

int og_payout_terms_fingerprint(const og_payout_terms *t,
                                char out[OG_PAYOUT_FINGERPRINT_HEX + 1])
{
    canon_terms c;
    int rc;

    if (t == NULL || out == NULL)
        return OG_EINVAL;
    if ((rc = terms_check(t, &c)) != 0)
        return rc;
    fingerprint_of(&c, out);
    return 0;
}

/* 1 when s is exactly 64 lower-case hex characters. */
static bool fingerprint_valid(const char *s)
{
    if (s == NULL || bounded_len(s, OG_PAYOUT_FINGERPRINT_HEX) !=
                         OG_PAYOUT_FINGERPRINT_HEX)
        return false;
    for (size_t i = 0; i < OG_PAYOUT_FINGERPRINT_HEX; i++)
        if (!is_digit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return true;
}

/* ===========================================================================
 * The policy
 *
 * One evaluation = the context, the terms being evaluated, the payout state
 * and version the rules expect, and whether this payout's own amount is
 * already among the reserved total (a recheck after the grant reserved it).
 * ========================================================================= */

typedef struct eval_input {
    const og_payout_context *ctx;
    const canon_terms *terms;
    og_payout_state want_state;
    int64_t want_version;
    bool active_attempt; /* a re-authorization's payout has an attempt that
                            is not terminal yet: not submittable */
    bool own_reserved;
} eval_input;

static bool tenant_suspended(const eval_input *e)
{
    return e->ctx->tenant.payouts_suspended;
}

static bool beneficiary_not_eligible(const eval_input *e)
{
    const og_payout_beneficiary *b = &e->ctx->beneficiary;
    return !(b->verified && b->status == OG_PAYOUT_BENEFICIARY_ACTIVE);
}

static bool destination_not_registered(const eval_input *e)
{
    const og_payout_destination *d = &e->ctx->destination;
    return strcmp(d->beneficiary_id, e->terms->beneficiary) != 0 ||
           d->version != e->terms->destination_version;
}

static bool payout_not_submittable(const eval_input *e)
{
    return e->ctx->payout.state != e->want_state ||
           e->ctx->payout.version != e->want_version || e->active_attempt;
}

/* paid + reserved + amount > limit, where reserved excludes this payout's
 * own reservation when it is already held (context validation made sure
 * reserved_today >= amount then). An overflowing sum fails the rule. */
static bool daily_limit_exceeded(const eval_input *e)
{
    const og_payout_tenant *t = &e->ctx->tenant;
    int64_t others = t->reserved_today, sum;

    if (e->own_reserved)
        others -= e->terms->amount_minor;
    if (!add_nonneg(t->paid_today, others, &sum) ||
        !add_nonneg(sum, e->terms->amount_minor, &sum))
        return true;
    return sum > t->daily_limit;
}

/* observed_at - changed_at < 7 days, exact for every pair of int64s: a
 * change at or after the observation (clock skew between writers) counts
 * as recent, and a positive difference is computed in uint64, where it
 * cannot overflow. An acknowledgment covers exactly the destination
 * version its approver saw (PC7): a destination changed again after it
 * asks for a new one. */
static bool destination_recently_changed(const eval_input *e)
{
    int64_t observed = e->ctx->observed_at_us;
    int64_t changed = e->ctx->destination.changed_at_us;
    int64_t acked = e->ctx->acknowledged_destination_version;

    if (acked != 0 && acked == e->ctx->destination.version)
        return false;
    if (changed >= observed)
        return true;
    return (uint64_t)observed - (uint64_t)changed <
           (uint64_t)OG_PAYOUT_RECENT_CHANGE_US;
}

static bool above_requester_limit(const eval_input *e)
{
    return e->terms->amount_minor > e->ctx->requester.approval_limit;
}

/* PC6: the order of checks, which is OG_PAYOUT_REASON_MAP's order
 * (context.unavailable is answered before any of these, payout.allowed
 * after all of them). */
static const struct {
    og_payout_reason reason;
    bool (*fails)(const eval_input *);
} rule_table[] = {
    {OG_PAYOUT_REASON_TENANT_SUSPENDED, tenant_suspended},
    {OG_PAYOUT_REASON_BENEFICIARY_NOT_ELIGIBLE, beneficiary_not_eligible},
    {OG_PAYOUT_REASON_DESTINATION_NOT_REGISTERED, destination_not_registered},
    {OG_PAYOUT_REASON_PAYOUT_NOT_SUBMITTABLE, payout_not_submittable},
    {OG_PAYOUT_REASON_DAILY_LIMIT, daily_limit_exceeded},
    {OG_PAYOUT_REASON_DESTINATION_RECENTLY_CHANGED,
     destination_recently_changed},
    {OG_PAYOUT_REASON_ABOVE_REQUESTER_LIMIT, above_requester_limit},
};

/* PC4: the one place a verdict's outcome and reason are set. */
static void verdict_set(og_payout_verdict *v, og_payout_reason r)
{
    v->reason = r;
    v->outcome = og_payout_reason_outcome(r);
    v->policy_version = OG_PAYOUT_POLICY_VERSION;
}

/* Runs the rules; fills the verdict's outcome, reason and versions. The
 * caller sets the fingerprint. */
static void rules_run(const eval_input *e, og_payout_verdict *v)
{
    og_payout_reason r = OG_PAYOUT_REASON_ALLOWED;

    for (size_t i = 0; i < COUNT_OF(rule_table); i++) {
        if (rule_table[i].fails(e)) {
            r = rule_table[i].reason;
            break;
        }
    }
    verdict_set(v, r);
    v->evaluated.tenant_settings = e->ctx->tenant.settings_version;
    v->evaluated.beneficiary = e->ctx->beneficiary.version;
    v->evaluated.destination = e->ctx->destination.version;
    v->evaluated.payout = e->ctx->payout.version;
}

/* The context's own consistency (everything but the terms). 0 or
 * OG_EPAYOUT_CONTEXT. */
static int context_check(const og_payout_context *ctx)
{
    const og_payout_tenant *t = &ctx->tenant;

    if (t->daily_limit < 0 || t->paid_today < 0 || t->reserved_today < 0 ||
        t->settings_version < 1 || ctx->requester.approval_limit < 0 ||
        ctx->acknowledged_destination_version < 0)
        return OG_EPAYOUT_CONTEXT;
    if ((unsigned)ctx->beneficiary.status >= COUNT_OF(bstatus_names) ||
        ctx->beneficiary.version < 1)
        return OG_EPAYOUT_CONTEXT;
    if (og__id_check(ctx->destination.beneficiary_id) != 0 ||
        ctx->destination.version < 1)
        return OG_EPAYOUT_CONTEXT;
    if ((unsigned)ctx->payout.state >= COUNT_OF(state_names) ||
        ctx->payout.version < 1)
        return OG_EPAYOUT_CONTEXT;
    return 0;
}

/* og_payout_evaluate and og_payout_evaluate_reauthorization: the payout
 * expected in want_state at ctx->intent.payout_version. */
static int evaluate_intent(const og_payout_context *ctx,
                           og_payout_state want_state, bool active_attempt,
                           og_payout_verdict *out)
{
    og_payout_verdict v;
    canon_terms intent, record;
    char record_fp[OG_PAYOUT_FINGERPRINT_HEX + 1];
    int rc;

    if (ctx == NULL || out == NULL)
        return OG_EINVAL;
    memset(&v, 0, sizeof v);
    if (ctx->unavailable) { /* PC5 */
        verdict_set(&v, OG_PAYOUT_REASON_CONTEXT_UNAVAILABLE);
        *out = v;
        return 0;
    }
    if ((rc = terms_check(&ctx->intent.terms, &intent)) != 0)
        return rc;
    if (ctx->intent.payout_version < 1)
        return OG_EPAYOUT_CONTEXT;
    if ((rc = context_check(ctx)) != 0)
        return rc;
    if ((rc = terms_check(&ctx->payout.terms, &record)) != 0)
        return rc;
    fingerprint_of(&intent, v.terms_fingerprint);
    fingerprint_of(&record, record_fp);
    /* Not a secret: a plain comparison is fine. */
    if (strcmp(v.terms_fingerprint, record_fp) != 0)
        return OG_EPAYOUT_INTENT_MISMATCH;

    eval_input e = {ctx, &intent, want_state, ctx->intent.payout_version,
                  active_attempt, false};
    rules_run(&e, &v);
    *out = v;
    return 0;
}

int og_payout_evaluate(const og_payout_context *ctx, og_payout_verdict *out)
{
    return evaluate_intent(ctx, OG_PAYOUT_STATE_DRAFT, false, out);
}

int og_payout_evaluate_reauthorization(const og_payout_context *ctx,
                                       bool active_attempt,
                                       og_payout_verdict *out)
{
    return evaluate_intent(ctx, OG_PAYOUT_STATE_APPROVED, active_attempt, out);
}

int og_payout_evaluate_for_execution(const og_payout_context *ctx,
                                     const og_payout_grant_binding *grant,
                                     og_payout_exec_verdict *out)
{
    og_payout_exec_verdict x;
    canon_terms current;
    char current_fp[OG_PAYOUT_FINGERPRINT_HEX + 1];
    int rc;

    if (ctx == NULL || grant == NULL || out == NULL)
        return OG_EINVAL;
    memset(&x, 0, sizeof x);
    if (ctx->unavailable) { /* PC5: the grant is not consumed; wait */
        x.outcome = OG_PAYOUT_EXEC_POSTPONED;
        x.reason = OG_PAYOUT_WORKER_CONTEXT_UNAVAILABLE;
        *out = x;
        return 0;
    }
    if (!fingerprint_valid(grant->terms_fingerprint))
        return OG_EPAYOUT_FINGERPRINT;
    if (grant->executable_payout_version < 1)
        return OG_EPAYOUT_CONTEXT;
    if ((rc = terms_check(&ctx->payout.terms, &current)) != 0)
        return rc;
    if ((rc = context_check(ctx)) != 0)
        return rc;

    x.outcome = OG_PAYOUT_EXEC_REFUSED;
    if (ctx->payout.state != OG_PAYOUT_STATE_APPROVED ||
        ctx->payout.version != grant->executable_payout_version) {
        x.reason = OG_PAYOUT_WORKER_PAYOUT_NOT_EXECUTABLE;
        *out = x;
        return 0;
    }
    fingerprint_of(&current, current_fp);
    if (strcmp(current_fp, grant->terms_fingerprint) != 0) {
        x.reason = OG_PAYOUT_WORKER_BINDING_MISMATCH;
        *out = x;
        return 0;
    }
    /* The terms are the granted ones, so the grant reserved exactly this
     * amount when it was issued, and the reservation is held until the
     * attempt resolves (docs/payouts.md, P5). A smaller total means the
     * counters do not hold it: counting the amount "once" is then
     * undefined, and guessing either way could allow too much. */
    if (ctx->tenant.reserved_today < current.amount_minor)
        return OG_EPAYOUT_CONTEXT;

    eval_input e = {ctx, &current, OG_PAYOUT_STATE_APPROVED,
                  grant->executable_payout_version, false, true};
    rules_run(&e, &x.recheck);
    memcpy(x.recheck.terms_fingerprint, current_fp, sizeof current_fp);
    x.rechecked = true;
    if (x.recheck.outcome != OG_PAYOUT_ALLOWED) {
        x.reason = OG_PAYOUT_WORKER_POLICY_NO_LONGER_ALLOWS;
        *out = x;
        return 0;
    }
    x.outcome = OG_PAYOUT_EXEC_VALID;
    x.reason = OG_PAYOUT_WORKER_NONE;
    x.relied = x.recheck.evaluated;
    *out = x;
    return 0;
}

/* ===========================================================================
 * The release day
 * ========================================================================= */

/* zone as UTF-16 for ICU: 1..OG_PAYOUT_TIME_ZONE_MAX printable ASCII
 * characters without spaces (every IANA name is), else -1. */
static int zone_id(const char *zone, UChar id[OG_PAYOUT_TIME_ZONE_MAX + 1],
                   int32_t *len)
{
    size_t n;

    if (zone == NULL)
        return -1;
    n = strnlen(zone, OG_PAYOUT_TIME_ZONE_MAX + 1);
    if (n == 0 || n > OG_PAYOUT_TIME_ZONE_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (zone[i] <= 0x20 || zone[i] > 0x7e)
            return -1;
        id[i] = (UChar)zone[i];
    }
    id[n] = 0;
    *len = (int32_t)n;
    return 0;
}

/* What ICU calls a zone it does not know (ucal_open falls back to it,
 * silently): never a settlement zone. */
static const char unknown_zone[] = "Etc/Unknown";

int og_payout_time_zone_check(const char *zone)
{
    UChar id[OG_PAYOUT_TIME_ZONE_MAX + 1], canonical[OG_PAYOUT_TIME_ZONE_MAX + 1];
    UErrorCode err = U_ZERO_ERROR;
    UBool system = 0;
    int32_t n = 0;

    if (zone_id(zone, id, &n) != 0 || strcmp(zone, unknown_zone) == 0)
        return OG_EPAYOUT_TIMEZONE;
    /* A system id is one of the database's zones or aliases; an unknown
     * name fails, and a custom id ("GMT+01:00") is not a system id: a
     * settlement zone is a place, whose rules the database keeps. */
    ucal_getCanonicalTimeZoneID(id, n, canonical,
                                OG_PAYOUT_TIME_ZONE_MAX + 1, &system, &err);
    if (U_FAILURE(err) || !system)
        return OG_EPAYOUT_TIMEZONE;
    return 0;
}

/* v (0 .. 10^n - 1) as exactly n decimal digits, zero-padded. */
static void put_digits(char *p, int64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (char)('0' + v % 10);
        v /= 10;
    }
}

int og_payout_release_day(int64_t at_us, const char *zone,
                          char out[OG_PAYOUT_DAY_LEN + 1])
{
    UChar id[OG_PAYOUT_TIME_ZONE_MAX + 1];
    UErrorCode err = U_ZERO_ERROR;
    UCalendar *cal;
    int32_t n = 0, y, m, d;

    if (og_payout_time_zone_check(zone) != 0 ||
        zone_id(zone, id, &n) != 0)
        return OG_EPAYOUT_TIMEZONE;
    if (out == NULL || at_us < OG__TIME_MIN_US || at_us > OG__TIME_MAX_US)
        return OG_EINVAL;
    /* The Gregorian calendar in zone, at the instant (milliseconds: a
     * double holds every one of the range exactly, < 2^53); ICU applies
     * the offset the zone had then, daylight saving time included. */
    cal = ucal_open(id, n, "en_US_POSIX", UCAL_GREGORIAN, &err);
    if (U_FAILURE(err) || cal == NULL)
        return OG_EINTERNAL;
    ucal_setMillis(cal, (UDate)(at_us / 1000), &err);
    y = ucal_get(cal, UCAL_YEAR, &err);
    m = ucal_get(cal, UCAL_MONTH, &err) + 1; /* ICU's months count from 0 */
    d = ucal_get(cal, UCAL_DATE, &err);
    ucal_close(cal);
    if (U_FAILURE(err) || m < 1 || m > 12 || d < 1 || d > 31)
        return OG_EINTERNAL;
    /* 9999-12-31 + 14 h is 10000-01-01: four digits no longer hold it. */
    if (y < 1 || y > 9999)
        return OG_EINVAL;
    put_digits(out, y, 4);
    out[4] = '-';
    put_digits(out + 5, m, 2); /* 1..12 */
    out[7] = '-';
    put_digits(out + 8, d, 2); /* 1..31 */
    out[OG_PAYOUT_DAY_LEN] = '\0';
    return 0;
}
