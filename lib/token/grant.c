/*
 * grant.c — the grant validator and the claim rules. Pure: the keyset and
 * the time are arguments; no I/O, no clock, no global state.
 *
 * Invariants:
 *   V1  Nothing read from a token's payload is used before its signature
 *       verifies, except the claimed issuer, and that only to choose which
 *       of the issuer's keys to verify with (kid comes from the header).
 *   V2  One set of claim rules (parse_claims) serves both directions:
 *       og_grant_token_sign() runs it on what it is about to sign, so an
 *       issuer cannot produce a token the validator refuses as malformed.
 *   V3  The deadline test is the store's: exp + leeway > now, with the ONE
 *       admission leeway (og_timings.admission_leeway_us). Validation is an
 *       early filter and is never stricter than admission; the store still
 *       decides, on its own clock.
 *   V4  Everything og_admit() receives comes from the validated grant
 *       (og_validated_grant_admission), never from request fields: the
 *       request is only compared against the grant.
 *   V5  *out is written only when every check passed.
 */
#include <string.h>

#include <jansson.h>

#include "token/token_int.h"

#define US_PER_SEC INT64_C(1000000)
/* NumericDate bounds: 1970-01-01 .. 9999-12-31T23:59:59Z, so every value
 * converts to microseconds inside OG__TIME_MIN_US .. OG__TIME_MAX_US. */
#define NUMERIC_DATE_MAX INT64_C(253402300799)
#define HOUR_US (3600 * US_PER_SEC)

/* Claims after parse_claims(): every field checked, amount canonical. */
typedef struct claims {
    char iss[OG_ID_MAX + 1];
    char jti[OG_ID_MAX + 1];
    int64_t iat, nbf, exp; /* seconds */
    int has_nbf;
    char sub[OG_ID_MAX + 1];
    char aud[OG_ID_MAX + 1];
    char act[OG_ID_MAX + 1];
    char account[OG_ID_MAX + 1];
    char amount[OG_AMOUNT_MAX + 1];
    char currency[OG_CURRENCY_LEN + 1];
    char fam[OG_ID_MAX + 1];
} claims;

/* ===========================================================================
 * Claim rules
 * ========================================================================= */

/* A string claim obeying the store's identifier rule, copied into buf. */
static int get_id(json_t *o, const char *name, char buf[OG_ID_MAX + 1])
{
    json_t *v = json_object_get(o, name);

    if (!json_is_string(v) || og__id_check(json_string_value(v)) != 0)
        return -1;
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* A NumericDate: a JSON integer (never a real such as 1.8e9 or 1800000000.0)
 * within NUMERIC_DATE_MAX. Integers jansson cannot hold fail to parse. */
static int get_time(json_t *o, const char *name, int64_t *out)
{
    json_t *v = json_object_get(o, name);
    json_int_t t;

    if (!json_is_integer(v))
        return -1;
    t = json_integer_value(v);
    if (t < 0 || t > NUMERIC_DATE_MAX)
        return -1;
    *out = (int64_t)t;
    return 0;
}

/* prm: exactly account, amount, currency. */
static int parse_params(json_t *prm, claims *c)
{
    json_t *amount;

    if (!json_is_object(prm) || json_object_size(prm) != 3)
        return -1;
    if (get_id(prm, "account", c->account) != 0)
        return -1;
    /* A decimal string, never a JSON number: a number would pass through a
     * binary double in most parsers, and "250.10" must stay 250.10. */
    amount = json_object_get(prm, "amount");
    if (!json_is_string(amount) ||
        og_amount_canonical(json_string_value(amount), c->amount,
                            sizeof c->amount) != 0)
        return -1;
    /* An ISO 4217 currency with minor units, and an amount no finer than
     * them: a grant for "0.001" USD could never be paid as signed. */
    if (!json_is_string(json_object_get(prm, "currency")) ||
        og__amount_minor_units_check(
            c->amount, json_string_value(json_object_get(prm, "currency"))) !=
            0)
        return -1;
    memcpy(c->currency, json_string_value(json_object_get(prm, "currency")),
           OG_CURRENCY_LEN + 1);
    return 0;
}

/* The claim set: the members below and no others. 0 or OG_EGRANT_MALFORMED.
 * Unknown claims are refused rather than ignored: a claim an issuer meant
 * as a restriction ("only before 18:00", "tenant T") and we silently drop
 * would widen the grant. */
static int parse_claims(json_t *o, claims *out)
{
    static const char *const known[] = {"iss", "jti", "iat", "nbf", "exp",
                                        "sub", "aud", "act", "prm", "fam"};
    const char *key;
    json_t *v;
    claims c;

    json_object_foreach(o, key, v) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(key, known[i]) != 0)
            i++;
        if (i == sizeof known / sizeof known[0])
            return OG_EGRANT_MALFORMED;
    }
    memset(&c, 0, sizeof c);
    if (get_id(o, "iss", c.iss) != 0 || get_id(o, "jti", c.jti) != 0 ||
        get_time(o, "iat", &c.iat) != 0 || get_time(o, "exp", &c.exp) != 0 ||
        get_id(o, "sub", c.sub) != 0 || get_id(o, "aud", c.aud) != 0 ||
        get_id(o, "act", c.act) != 0 ||
        parse_params(json_object_get(o, "prm"), &c) != 0)
        return OG_EGRANT_MALFORMED;
    if (json_object_get(o, "nbf")) {
        if (get_time(o, "nbf", &c.nbf) != 0)
            return OG_EGRANT_MALFORMED;
        c.has_nbf = 1;
    }
    if (json_object_get(o, "fam") && get_id(o, "fam", c.fam) != 0)
        return OG_EGRANT_MALFORMED;
    /* A grant that expires when or before it is issued is incoherent, and
     * lifetime checks below assume exp - iat > 0. */
    if (c.exp <= c.iat)
        return OG_EGRANT_MALFORMED;
    memcpy(out, &c, sizeof c);
    return 0;
}

int og__grant_claims_json(const og_grant_claims *gc, char **text, size_t *len)
{
    char amount[OG_AMOUNT_MAX + 1];
    json_t *o = NULL;
    claims check;
    char *t;
    int rc = OG_EGRANT_MALFORMED;

    if (gc == NULL || text == NULL || len == NULL)
        return OG_EINVAL;
    if (og_amount_canonical(gc->prm.amount, amount, sizeof amount) != 0)
        return OG_EGRANT_MALFORMED;
    /* The issuer learns which rule its parameters broke; parse_claims()
     * below would refuse them as malformed all the same (V2). */
    if (og__amount_minor_units_check(amount, gc->prm.currency) ==
        OG_EAMOUNT_MINOR_UNITS)
        return OG_EAMOUNT_MINOR_UNITS;
    /* json_pack fails on a NULL string: a missing claim is malformed. */
    o = json_pack("{s:s, s:s, s:I}", "iss", gc->iss, "jti", gc->jti, "iat",
                  (json_int_t)gc->iat);
    if (o == NULL)
        goto out;
    if (gc->has_nbf && json_object_set_new(o, "nbf",
                                           json_integer((json_int_t)gc->nbf)))
        goto out;
    if (json_object_set_new(o, "exp", json_integer((json_int_t)gc->exp)) ||
        json_object_set_new(o, "sub", json_pack("s", gc->sub)) ||
        json_object_set_new(o, "aud", json_pack("s", gc->aud)) ||
        json_object_set_new(o, "act", json_pack("s", gc->act)) ||
        json_object_set_new(o, "prm",
                            json_pack("{s:s, s:s, s:s}", "account",
                                      gc->prm.account, "amount", amount,
                                      "currency", gc->prm.currency)))
        goto out;
    if (gc->fam && json_object_set_new(o, "fam", json_pack("s", gc->fam)))
        goto out;
    /* V2: the validator's own rules decide what may be signed. */
    if ((rc = parse_claims(o, &check)) != 0)
        goto out;
    rc = OG_ENOMEM;
    if ((t = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII)) == NULL)
        goto out;
    *text = t;
    *len = strlen(t);
    rc = 0;
out:
    json_decref(o);
    return rc;
}

/* ===========================================================================
 * Policy
 * ========================================================================= */

void og_grant_policy_init(og_grant_policy *p, const char *audience,
                          const og_timings *t)
{
    og_timings d;

    if (p == NULL)
        return;
    if (t == NULL) {
        og_timings_default(&d);
        t = &d;
    }
    p->audience = audience;
    p->admission_leeway_us = t->admission_leeway_us;
    /* The same values bound the fallback revocation retention: one place. */
    p->max_lifetime_us = t->max_grant_lifetime_us;
    p->issue_skew_us = t->issue_time_skew_us;
    /* The rollout default (docs/design.md, "Explicit token type"): grants
     * an instance of the previous release issued stay valid until they
     * expire; the deployment turns it off once they have. */
    p->accept_legacy_typ = true;
}

static int policy_check(const og_grant_policy *p)
{
    return og__id_check(p->audience) == 0 && p->admission_leeway_us >= 0 &&
                   p->admission_leeway_us <= HOUR_US &&
                   p->max_lifetime_us > 0 &&
                   p->max_lifetime_us <= OG__TIME_MAX_US &&
                   p->issue_skew_us >= 0 && p->issue_skew_us <= HOUR_US
               ? 0
               : -1;
}

/* ===========================================================================
 * The validator
 * ========================================================================= */

/* The checks after the signature, on verified claims. */
static int check_claims(const claims *c, const og_grant_policy *p,
                        const og_grant_request *req, int64_t now_us)
{
    char amount[OG_AMOUNT_MAX + 1];
    int64_t iat_us = c->iat * US_PER_SEC, exp_us = c->exp * US_PER_SEC;

    if (strcmp(c->aud, p->audience) != 0)
        return OG_EGRANT_WRONG_AUDIENCE;
    /* Both bounds widened by the one leeway, never narrowed (V3). Every
     * term is within 0 .. 253402300799999999 + 1 h: no overflow. */
    if (c->has_nbf && c->nbf * US_PER_SEC - p->admission_leeway_us > now_us)
        return OG_EGRANT_NOT_YET_VALID;
    if (!(exp_us + p->admission_leeway_us > now_us))
        return OG_EGRANT_EXPIRED;
    /* The two limits revocation's fallback retention relies on
     * (docs/design.md, "The grant lifecycle"). */
    if (exp_us - iat_us > p->max_lifetime_us)
        return OG_EGRANT_LIFETIME_EXCEEDED;
    if (iat_us > now_us + p->issue_skew_us)
        return OG_EGRANT_ISSUED_IN_FUTURE;
    if (req == NULL) /* og_grant_verify_unbound: the presenter checks */
        return 0;
    if (req->caller == NULL || strcmp(c->sub, req->caller) != 0)
        return OG_EGRANT_SUBJECT_MISMATCH;
    if (req->action == NULL || strcmp(c->act, req->action) != 0)
        return OG_EGRANT_ACTION_MISMATCH;
    /* Amounts compare canonically ("250.0" = "250.00" != "250.01");
     * currencies exactly, so "usd" is not "USD"; accounts exactly. */
    if (req->account == NULL || strcmp(c->account, req->account) != 0 ||
        og_amount_canonical(req->amount, amount, sizeof amount) != 0 ||
        strcmp(c->amount, amount) != 0 || req->currency == NULL ||
        strcmp(c->currency, req->currency) != 0)
        return OG_EGRANT_BINDING_MISMATCH;
    return 0;
}

/* og_grant_verify with req NULL meaning "no request binding". */
static int verify(const og_keyset *ks, const og_grant_policy *policy,
                  const char *token, const og_grant_request *req,
                  int64_t now_us, og_validated_grant *out)
{
    unsigned char pk[OG__ED25519_PK];
    og_validated_grant v;
    og__jws j;
    json_t *iss;
    claims c;
    int rc;

    if (ks == NULL || policy == NULL || token == NULL || out == NULL || policy_check(policy) != 0 ||
        now_us < OG__TIME_MIN_US || now_us > OG__TIME_MAX_US)
        return OG_EINVAL;
    memset(&j, 0, sizeof j);
    /* Size, structure, header (alg first), payload JSON. */
    if ((rc = og__jws_decode(token, &j)) != 0)
        return rc;
    /* A grant by its type: a legacy typ only while the policy allows it,
     * before any key is looked at (another type never got this far). */
    if (j.typ == OG__TYP_LEGACY && !policy->accept_legacy_typ) {
        rc = OG_EGRANT_TYPE;
        goto out;
    }
    /* V1: the claimed issuer, unverified, picks among its keys. */
    iss = json_object_get(j.payload, "iss");
    if (!json_is_string(iss) || og__id_check(json_string_value(iss)) != 0) {
        rc = OG_EGRANT_MALFORMED;
        goto out;
    }
    if ((rc = og__keyset_find(ks, json_string_value(iss), j.kid, pk)) != 0 ||
        (rc = og__jws_verify(token, &j, pk)) != 0)
        goto out;
    /* Verified from here on. */
    if ((rc = parse_claims(j.payload, &c)) != 0 ||
        (rc = check_claims(&c, policy, req, now_us)) != 0)
        goto out;

    memset(&v, 0, sizeof v);
    memcpy(v.issuer, c.iss, sizeof v.issuer);
    memcpy(v.grant_id, c.jti, sizeof v.grant_id);
    memcpy(v.kid, j.kid, sizeof v.kid);
    v.issued_at_us = c.iat * US_PER_SEC;
    v.not_before_us = (c.has_nbf ? c.nbf : c.iat) * US_PER_SEC;
    v.expires_at_us = c.exp * US_PER_SEC;
    memcpy(v.subject, c.sub, sizeof v.subject);
    memcpy(v.audience, c.aud, sizeof v.audience);
    memcpy(v.action, c.act, sizeof v.action);
    memcpy(v.account, c.account, sizeof v.account);
    memcpy(v.amount, c.amount, sizeof v.amount);
    memcpy(v.currency, c.currency, sizeof v.currency);
    memcpy(v.family, c.fam, sizeof v.family);
    memcpy(out, &v, sizeof v); /* V5 */
out:
    og__jws_clear(&j);
    return rc;
}

int og_grant_verify(const og_keyset *ks, const og_grant_policy *policy,
                    const char *token, const og_grant_request *req,
                    int64_t now_us, og_validated_grant *out)
{
    if (req == NULL)
        return OG_EINVAL;
    return verify(ks, policy, token, req, now_us, out);
}

int og_grant_verify_unbound(const og_keyset *ks, const og_grant_policy *policy,
                            const char *token, int64_t now_us,
                            og_validated_grant *out)
{
    return verify(ks, policy, token, NULL, now_us, out);
}

int og_validated_grant_admission(const og_validated_grant *v,
                                 const char *operation_id, og_grant *g,
                                 og_intent *in)
{
    if (v == NULL || operation_id == NULL || g == NULL || in == NULL)
        return OG_EINVAL;
    /* V4: the grant's own fields, the caller being the verified subject. */
    g->issuer = v->issuer;
    g->grant_id = v->grant_id;
    g->expires_at_us = v->expires_at_us;
    /* The family orders this admission against the family's revocation. */
    g->family = v->family[0] ? v->family : NULL;
    g->form = OG_FORM_TOKEN; /* a verified token; the issuer's config may
                                switch the caller to OG_FORM_ROW */
    in->operation_id = operation_id;
    in->caller_id = v->subject;
    in->account_id = v->account;
    in->amount = v->amount;
    in->currency = v->currency;
    return 0;
}
