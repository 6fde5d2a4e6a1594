/*
 * store.c — the store's public face: resolves a URL to a backend table,
 * validates input before anything reaches the store, and dispatches.
 *
 * Invariants:
 *   S1  A backend never sees raw input: og_admit builds a canonical
 *       og__admit_req first, and bad input returns its own error code with
 *       nothing written.
 *   S2  A store whose schema version differs from OG_SCHEMA_VERSION is not
 *       opened: running an admission against a schema this build does not
 *       know could silently drop a guarantee (a missing unique key).
 *   S3  og_admit never retries: an unavailable store is reported to the
 *       caller, whose retry with the same operation id finds out what
 *       happened.
 *   S4  Retention runs in bounded batches: every statement takes at most
 *       `batch` rows in its own transaction, and the loop stops at the first
 *       batch that took fewer or after max_batches, so neither job holds
 *       admissions behind one long delete nor runs unbounded. A backend that
 *       reports more than `batch` rows is a defect (OG_EINTERNAL). Each call
 *       starts its keyset cursor afresh, so a row an earlier call's cursor
 *       passed is looked at again.
 *   S5  The consumption keys (readable or hashed) are the store's, recorded
 *       by migration 5 and read on every open: two store objects — in one
 *       process or two — of one store run the same statements on the same
 *       keys. A caller that asks for the other mode is refused
 *       (OG_ESTORE_KEYS), at open and at migrate; nothing is converted once
 *       recorded. Retention (S4) runs on either: the backends' cleanup
 *       statements address rows by their key mode's primary key (SQLite)
 *       or by ctid (PostgreSQL).
 *   S6  The payout store (schema 7, oncegate/payout_store.h): one
 *       transaction per call. A put, a draft, a cancellation, a job's
 *       take, acknowledgment, postponement or resubmission, a revocation
 *       and an expiry batch each write in ONE transaction that also holds
 *       their history entries; a decision reads its facts and writes
 *       everything it decides in ONE transaction (Q25-Q29 in sqlite.c,
 *       I25-I29 in postgres.c). Inputs are checked here first, with the
 *       pure core's own rules and codes (S1).
 *   S7  A provider token reaches the store through
 *       og_payout_destination_put and leaves it through
 *       og_payout_destination_token only; no other record, result or error
 *       carries it, and this file's copies are wiped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "store/dispatch.h"
#include "store/store_int.h"
#include "token/token_int.h"

#define OG__URL_MAX 4096

void og_store_options_default(og_store_options *o)
{
    og_timings_default(&o->timings);
    o->pool_size = 16;
    o->session_bounds_from_role = false;
    o->consumption_keys = OG_KEYS_AS_STORED;
}

/* Picks the backend for url and the target string it gets. */
static int og__resolve(const char *url, const og__store_methods **m,
                       const char **target)
{
    if (!url || !*url || strlen(url) > OG__URL_MAX)
        return OG_EBAD_URL;
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (url[7] == '\0')
            return OG_EBAD_URL;
        *m = &og__sqlite_methods;
        *target = url + 7;
        return 0;
    }
    if (strncmp(url, "postgres://", 11) == 0 ||
        strncmp(url, "postgresql://", 13) == 0 ||
        (strchr(url, '=') && !strstr(url, "://"))) {
        *m = &og__postgres_methods;
        *target = url;
        return 0;
    }
    return OG_EBAD_URL;
}

static int og__options(const og_store_options *in, og_store_options *out)
{
    if (in)
        *out = *in;
    else
        og_store_options_default(out);
    if (out->pool_size < 1 || out->pool_size > 1024)
        return OG_EINVAL;
    if (out->consumption_keys != OG_KEYS_AS_STORED &&
        out->consumption_keys != OG_KEYS_READABLE &&
        out->consumption_keys != OG_KEYS_HASHED)
        return OG_EINVAL;
    return og_timings_check(&out->timings, NULL);
}

/* S5: the store's recorded keys against what the caller asked for. */
static int og__keys_agree(og_consumption_keys asked, og_consumption_keys stored)
{
    return asked == OG_KEYS_AS_STORED || asked == stored ? 0 : OG_ESTORE_KEYS;
}

int og_store_open(const char *url, const og_store_options *opts,
                  og_store **out)
{
    const og__store_methods *m;
    const char *target;
    og_store *s = NULL;
    int version = -1, rc;

    if (!out)
        return OG_EINVAL;
    if ((rc = og__resolve(url, &m, &target)) < 0)
        return rc;
    s = calloc(1, sizeof *s);
    if (!s)
        return OG_ENOMEM;
    if ((rc = og__options(opts, &s->opts)) < 0)
        goto fail;
    s->m = m;
    if ((rc = m->open(target, &s->opts, &s->impl)) < 0)
        goto fail;
    if ((rc = m->schema_version(s->impl, &version)) < 0)
        goto fail;
    if (version != OG_SCHEMA_VERSION) { /* S2 */
        rc = OG_ESCHEMA;
        goto fail;
    }
    if ((rc = m->read_keys(s->impl, &s->keys)) < 0 ||
        (rc = og__keys_agree(s->opts.consumption_keys, s->keys)) < 0) /* S5 */
        goto fail;
    *out = s;
    return 0;
fail:
    if (s->impl)
        m->close(s->impl);
    free(s);
    return rc;
}

void og_store_free(og_store *s)
{
    if (!s)
        return;
    s->m->close(s->impl);
    free(s);
}

const char *og_store_backend(const og_store *s)
{
    return s ? s->m->name : "none";
}

og_consumption_keys og_store_consumption_keys(const og_store *s)
{
    return s ? s->keys : OG_KEYS_AS_STORED;
}

/* og_store_migrate up to schema version (og__store_migrate_to). */
static int og__migrate(const char *url, const og_store_options *opts,
                       int version, int *from, int *to)
{
    const og__store_methods *m;
    const char *target;
    og_store_options o;
    og_consumption_keys keys = OG_KEYS_AS_STORED;
    void *impl = NULL;
    int f = 0, t = 0, rc;

    if ((rc = og__resolve(url, &m, &target)) < 0)
        return rc;
    if ((rc = og__options(opts, &o)) < 0)
        return rc;
    if ((rc = m->open(target, &o, &impl)) < 0)
        return rc;
    rc = m->migrate(impl, o.consumption_keys, version, &f, &t);
    /* S5: a store already at 5 keeps its keys; asking for others is an
     * error, with nothing changed. */
    if (rc == 0 && (rc = m->read_keys(impl, &keys)) == 0)
        rc = og__keys_agree(o.consumption_keys, keys);
    m->close(impl);
    if (rc < 0)
        return rc;
    if (from)
        *from = f;
    if (to)
        *to = t;
    return 0;
}

int og_store_migrate(const char *url, const og_store_options *opts,
                     int *from, int *to)
{
    return og__migrate(url, opts, OG_SCHEMA_VERSION, from, to);
}

int og__store_migrate_to(const char *url, const og_store_options *opts,
                         int version, int *from, int *to)
{
    if (version < 1 || version > OG_SCHEMA_VERSION)
        return OG_EINVAL;
    return og__migrate(url, opts, version, from, to);
}

int og_admit(og_store *s, const og_grant *grant, const og_intent *intent,
             og_admission *result)
{
    og__admit_req req;
    og_admission res;
    int rc;

    if (!s || !grant || !intent || !result)
        return OG_EINVAL;
    if ((rc = og__admit_req_build(grant, intent, &req)) < 0) /* S1 */
        return rc;
    if ((rc = s->m->admit(s->impl, &req, &res)) < 0) /* S3: no retry */
        return rc;
    *result = res;
    return 0;
}

int og_store_check(og_store *s)
{
    int version = 0;
    int rc;

    if (!s)
        return OG_EINVAL;
    rc = s->m->schema_version(s->impl, &version);
    if (rc < 0)
        return rc;
    return version == OG_SCHEMA_VERSION ? 0 : OG_ESCHEMA;
}

int og_store_session_bounds(og_store *s, og_session_bounds *out)
{
    if (!s || !out)
        return OG_EINVAL;
    if (s->m->session_bounds == NULL) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    return s->m->session_bounds(s->impl, out);
}

int og_operation_get(og_store *s, const char *operation_id, og_operation *out)
{
    char id[OG_UUID_LEN + 1];
    og_operation op;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    rc = s->m->operation_get(s->impl, id, &op);
    if (rc == 1)
        *out = op;
    return rc;
}

/* ===========================================================================
 * Grant lifecycle: issuance, revocation, families, consume, tickets.
 * Validation and privilege are checked here, before the store (S1); the
 * backends run one conditional write each.
 * ========================================================================= */

void og_strv_free(og_strv *sv)
{
    if (!sv)
        return;
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = 0;
}

int og__strv_push(og_strv *sv, const char *id)
{
    char **v, *copy = strdup(id);

    if (!copy)
        return OG_ENOMEM;
    v = realloc(sv->v, (sv->n + 1) * sizeof *v);
    if (!v) {
        free(copy);
        return OG_ENOMEM;
    }
    v[sv->n++] = copy;
    sv->v = v;
    return 0;
}

/* 0 when s is exactly 64 lower-case hex characters. */
static int og__hex64_check(const char *s)
{
    size_t i;

    if (!s)
        return -1;
    for (i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return -1;
    return s[64] == '\0' ? 0 : -1;
}

static bool og__time_ok(int64_t us)
{
    return us >= OG__TIME_MIN_US && us <= OG__TIME_MAX_US;
}

/* Copies a checked id (og__id_check passed) into a fixed buffer. */
static void og__idcpy(char dst[OG_ID_MAX + 1], const char *src)
{
    size_t n = strlen(src);
    memcpy(dst, src, n + 1);
}

int og_issuance_record(og_store *s, const og_issuance *iss,
                       og_issue_outcome *out)
{
    og__issuance_req r;
    og_issue_outcome o;
    int rc;

    if (!s || !iss || !out)
        return OG_EINVAL;
    memset(&r, 0, sizeof r);
    if (og__id_check(iss->issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(iss->grant_id) != 0)
        return OG_EGRANT_ID;
    if (iss->family && og__id_check(iss->family) != 0)
        return OG_EFAMILY;
    if (og__id_check(iss->subject) != 0)
        return OG_ESUBJECT;
    if (og__id_check(iss->action) != 0)
        return OG_EACTION;
    if (og__hex64_check(iss->params_digest) != 0)
        return OG_EDIGEST;
    if (iss->form != OG_FORM_TOKEN && iss->form != OG_FORM_ROW)
        return OG_EFORM;
    /* A row-form grant's row carries its deadline: it must have one. */
    if (!og__time_ok(iss->issued_at_us) ||
        (iss->expires_at_us != 0 && (!og__time_ok(iss->expires_at_us) ||
                                     iss->expires_at_us <= iss->issued_at_us)) ||
        (iss->form == OG_FORM_ROW && iss->expires_at_us == 0))
        return OG_EEXPIRES_AT;
    og__idcpy(r.issuer, iss->issuer);
    og__idcpy(r.grant_id, iss->grant_id);
    if (iss->family)
        og__idcpy(r.family, iss->family);
    og__idcpy(r.subject, iss->subject);
    og__idcpy(r.action, iss->action);
    memcpy(r.params_digest, iss->params_digest, 65);
    r.issued_at_us = iss->issued_at_us;
    r.expires_at_us = iss->expires_at_us;
    r.form = iss->form;
    if ((rc = s->m->issuance_record(s->impl, &r, &o)) < 0)
        return rc;
    *out = o;
    return 0;
}

/* Revocation is privileged: the issuer's configuration lists who may. */
static bool og__may_revoke(const og_revoke_policy *p, const char *revoker)
{
    if (!p)
        return false;
    for (size_t i = 0; i < p->n_revokers; i++)
        if (p->revokers[i] && strcmp(p->revokers[i], revoker) == 0)
            return true;
    return false;
}

int og_revoke(og_store *s, const og_revoke_policy *policy,
              const og_revocation *rv, og_revoke_outcome *out)
{
    og__revoke_req r;
    og_revoke_outcome o;
    int rc;

    if (!s || !rv || !out)
        return OG_EINVAL;
    if (og__id_check(rv->revoker) != 0)
        return OG_EREVOKER;
    if (og__id_check(rv->issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(rv->grant_id) != 0) /* shape and length, before anything */
        return OG_EGRANT_ID;
    if (rv->trusted_expires_at_us != 0 && !og__time_ok(rv->trusted_expires_at_us))
        return OG_EEXPIRES_AT;
    if (rv->form != OG_FORM_TOKEN && rv->form != OG_FORM_ROW)
        return OG_EFORM;
    if (!og__may_revoke(policy, rv->revoker)) {
        *out = OG_REVOKE_NOT_PERMITTED; /* nothing reaches the store */
        return 0;
    }
    memset(&r, 0, sizeof r);
    og__idcpy(r.issuer, rv->issuer);
    og__idcpy(r.grant_id, rv->grant_id);
    r.trusted_expires_at_us = rv->trusted_expires_at_us;
    r.form = rv->form;
    if ((rc = s->m->revoke(s->impl, &r, &o)) < 0)
        return rc;
    *out = o;
    return 0;
}

int og_family_revoke(og_store *s, const og_revoke_policy *policy,
                     const char *issuer, const char *family,
                     const char *revoker, og_revoke_outcome *outcome,
                     og_strv *revoked)
{
    og_strv list = {NULL, 0};
    int rc;

    if (!s || !outcome || !revoked)
        return OG_EINVAL;
    if (og__id_check(revoker) != 0)
        return OG_EREVOKER;
    if (og__id_check(issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(family) != 0)
        return OG_EFAMILY;
    if (!og__may_revoke(policy, revoker)) {
        *outcome = OG_REVOKE_NOT_PERMITTED;
        revoked->v = NULL;
        revoked->n = 0;
        return 0;
    }
    if ((rc = s->m->family_revoke(s->impl, issuer, family, &list)) < 0) {
        og_strv_free(&list);
        return rc;
    }
    *outcome = OG_REVOKE_REVOKED;
    *revoked = list;
    return 0;
}

int og_consume(og_store *s, const og_grant *grant, og_consume_result *out)
{
    og__admit_req req;
    og_consume_result res;
    int rc;

    if (!s || !grant || !out)
        return OG_EINVAL;
    if ((rc = og__grant_req_build(grant, &req)) < 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->consume(s->impl, &req, &res)) < 0)
        return rc;
    *out = res;
    return 0;
}

int og_params_digest(const char *account, const char *amount,
                     const char *currency, char out[65])
{
    char canon[OG_AMOUNT_MAX + 1];
    const char *field[3];
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_state st;

    if (!out)
        return OG_EINVAL;
    if (og__id_check(account) != 0)
        return OG_EACCOUNT;
    if (og_amount_canonical(amount, canon, sizeof canon) != 0)
        return OG_EAMOUNT;
    if (og__currency_check(currency) != 0)
        return OG_ECURRENCY;
    field[0] = account;
    field[1] = canon;
    field[2] = currency;
    /* Length-prefixed, so ("ab","c") and ("a","bc") never hash alike. */
    crypto_hash_sha256_init(&st);
    for (int i = 0; i < 3; i++) {
        uint32_t n = (uint32_t)strlen(field[i]);
        unsigned char be[4] = {(unsigned char)(n >> 24), (unsigned char)(n >> 16),
                               (unsigned char)(n >> 8), (unsigned char)n};
        crypto_hash_sha256_update(&st, be, sizeof be);
        crypto_hash_sha256_update(&st, (const unsigned char *)field[i], n);
    }
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(out, 65, h, sizeof h);
    return 0;
}

/* The stored form of a ticket: SHA-256 of its text, hex. The text is a
 * bearer secret and never reaches the store. */
static void og__ticket_hash(const char *ticket, char hash[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(h, (const unsigned char *)ticket, strlen(ticket));
    sodium_bin2hex(hash, 65, h, sizeof h);
}

/* 256 random bits as base64url (43 characters). */
static int og__ticket_new(char ticket[OG_TICKET_LEN + 1])
{
    unsigned char b[32];

    if (sodium_init() < 0)
        return OG_EINTERNAL;
    randombytes_buf(b, sizeof b);
    og__b64url_encode(b, sizeof b, ticket);
    sodium_memzero(b, sizeof b);
    return 0;
}

static int og__ticket_check(const char *t)
{
    unsigned char b[32];
    size_t n = 0;

    if (!t || strlen(t) != OG_TICKET_LEN)
        return -1;
    if (og__b64url_decode(t, OG_TICKET_LEN, b, sizeof b, &n) != 0 || n != 32)
        return -1;
    sodium_memzero(b, sizeof b);
    return 0;
}

int og_ticket_create(og_store *s, const char *issuer, const char *family,
                     og_ticket_result *out)
{
    og_ticket_result res;
    char hash[65];
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__id_check(issuer) != 0)
        return OG_EISSUER;
    if (og__id_check(family) != 0)
        return OG_EFAMILY;
    memset(&res, 0, sizeof res);
    if ((rc = og__ticket_new(res.ticket)) < 0)
        return rc;
    og__ticket_hash(res.ticket, hash);
    if ((rc = s->m->ticket_create(s->impl, issuer, family, hash, &res.outcome)) < 0) {
        sodium_memzero(&res, sizeof res);
        return rc;
    }
    og__idcpy(res.issuer, issuer);
    og__idcpy(res.family, family);
    if (res.outcome != OG_TICKET_ISSUED)
        sodium_memzero(res.ticket, sizeof res.ticket);
    *out = res;
    sodium_memzero(&res, sizeof res);
    return 0;
}

int og_ticket_rotate(og_store *s, const char *ticket, og_ticket_result *out)
{
    og_ticket_result res;
    char old_hash[65], new_hash[65];
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__ticket_check(ticket) != 0)
        return OG_ETICKET;
    memset(&res, 0, sizeof res);
    if ((rc = og__ticket_new(res.ticket)) < 0)
        return rc;
    og__ticket_hash(ticket, old_hash);
    og__ticket_hash(res.ticket, new_hash);
    rc = s->m->ticket_rotate(s->impl, old_hash, new_hash, &res.outcome,
                             res.issuer, res.family);
    if (rc < 0) {
        sodium_memzero(&res, sizeof res);
        return rc;
    }
    if (res.outcome != OG_TICKET_ISSUED)
        sodium_memzero(res.ticket, sizeof res.ticket);
    *out = res;
    sodium_memzero(&res, sizeof res);
    return 0;
}

/* Signing (lib/token) and the issuance log (the store) together; here so
 * that the token library stays free of the store. */
int og_grant_issue(og_store *s, const og_signer *signer,
                   const og_grant_claims *claims, og_grant_form form,
                   char **token, og_issue_outcome *out)
{
    char digest[65];
    char *t = NULL;
    og_issuance iss;
    og_issue_outcome o;
    int rc;

    if (s == NULL || signer == NULL || claims == NULL || token == NULL ||
        out == NULL)
        return OG_EINVAL;
    /* Sign first: signing runs the validator's claim rules, so nothing is
     * logged for a grant that could never verify. */
    if ((rc = og_grant_token_sign(signer, claims, &t)) != 0)
        return rc;
    if ((rc = og_params_digest(claims->prm.account, claims->prm.amount,
                               claims->prm.currency, digest)) != 0)
        goto fail;
    iss = (og_issuance){
        .issuer = claims->iss,
        .grant_id = claims->jti,
        .family = claims->fam,
        .subject = claims->sub,
        .action = claims->act,
        .params_digest = digest,
        .issued_at_us = claims->iat * INT64_C(1000000),
        .expires_at_us = claims->exp * INT64_C(1000000),
        .form = form,
    };
    /* The log entry is the proof of issuance: the token leaves this
     * function only once it is recorded. */
    if ((rc = og_issuance_record(s, &iss, &o)) != 0)
        goto fail;
    *out = o;
    if (o == OG_ISSUE_RECORDED) {
        *token = t;
        return 0;
    }
    free(t);
    *token = NULL;
    return 0;
fail:
    free(t);
    return rc;
}

/* ===========================================================================
 * Execution: the ownership protocol. Validation and the transition table
 * are checked here (S1); each backend method is one conditional write.
 * ========================================================================= */

/* 1..max printable ASCII without spaces (reason codes, references). */
static bool og__code_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;

    return n >= 1 && n <= max && og__id_check(s) == 0;
}

/* Evidence: 1..OG_EVIDENCE_MAX bytes of UTF-8 without control characters
 * other than newline and tab. */
static bool og__evidence_ok(const char *s)
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

/* The transition table of oncegate.h: may an owner (not an operator) at
 * owner_version move an operation from a status in expected to to?
 * Started is og_op_start's alone; the owned statuses are the only ones an
 * owner may expect, so a terminal status is never replaced. */
static bool og__owner_transition_ok(unsigned expected, int64_t owner_version,
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
    if (rc == 0)
        *started = st;
    return rc;
}

int og__op_outcome_check(unsigned expected, int64_t expected_owner_version,
                         const og_op_outcome *o)
{
    if (!og__owner_transition_ok(expected, expected_owner_version, o->status))
        return OG_ETRANSITION;
    if (o->reason && !og__code_ok(o->reason, OG_REASON_MAX))
        return OG_EREASON;
    if (o->provider_reference && !og__code_ok(o->provider_reference, OG_ID_MAX))
        return OG_EPROVIDER_REFERENCE;
    if (!og__code_ok(o->actor, OG_ID_MAX))
        return OG_EACTOR;
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

/* ===========================================================================
 * Retention: refusal records (cleanup) and operation records (archive), in
 * bounded batches (S4). What each may delete is decided by the backend's
 * statement; here only the loop.
 * ========================================================================= */

/* Where a pass's keyset cursor starts: every time the store keeps is at or
 * after the epoch (S1: expires_at >= OG__TIME_MIN_US; the store's clock). */
#define OG__RETENTION_FROM_US OG__TIME_MIN_US

static bool og__batch_args_ok(int batch, int max_batches)
{
    return batch >= 1 && batch <= OG_RETENTION_BATCH_MAX && max_batches >= 1 &&
           max_batches <= OG_RETENTION_BATCHES_MAX;
}

int og_store_cleanup(og_store *s, int batch, int max_batches,
                     og_cleanup_stats *out)
{
    og_cleanup_stats total = {0, 0, 0, 0}, one;
    int64_t n, from = OG__RETENTION_FROM_US;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches))
        return OG_EINVAL;
    do {
        memset(&one, 0, sizeof one);
        if ((rc = s->m->cleanup_batch(s->impl, batch, &from, &one)) < 0)
            return rc; /* earlier batches stay committed (S4) */
        n = one.admissions + one.revocations + one.consumes;
        if (n < 0 || n > batch)
            return OG_EINTERNAL;
        total.admissions += one.admissions;
        total.revocations += one.revocations;
        total.consumes += one.consumes;
        total.batches++;
    } while (n == batch && total.batches < max_batches);
    *out = total;
    return 0;
}

int og_store_archive_operations(og_store *s, int64_t older_than_us,
                                og_archive_mode mode, int batch,
                                int max_batches, og_archive_stats *out)
{
    og_archive_stats total = {0, 0, 0}, one;
    int64_t from = OG__RETENTION_FROM_US;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches) ||
        older_than_us < 0 || older_than_us > OG__TIME_MAX_US ||
        (mode != OG_ARCHIVE_MOVE && mode != OG_ARCHIVE_DELETE))
        return OG_EINVAL;
    do {
        memset(&one, 0, sizeof one);
        if ((rc = s->m->archive_batch(s->impl, older_than_us, mode, batch,
                                      &from, &one)) < 0)
            return rc;
        if (one.operations < 0 || one.operations > batch || one.events < 0)
            return OG_EINTERNAL;
        total.operations += one.operations;
        total.events += one.events;
        total.batches++;
    } while (one.operations == batch && total.batches < max_batches);
    *out = total;
    return 0;
}

/* ===========================================================================
 * Redemption recovery points (schema 6). Input is checked here (S1); each
 * backend runs ONE statement per call.
 * ========================================================================= */

static int og__redemption_ids_check(const char *caller, const char *key,
                                    const char *code_hash)
{
    if (og__id_check(caller) != 0)
        return OG_ECALLER;
    if (og__id_check(key) != 0)
        return OG_EIDEMPOTENCY_KEY;
    if (code_hash && og__hex64_check(code_hash) != 0)
        return OG_ECODE_HASH;
    return 0;
}

int og_redemption_put(og_store *s, const og_redemption_record *r,
                      bool *inserted)
{
    bool ins = false;
    int rc;

    if (!s || !r || !inserted)
        return OG_EINVAL;
    if (!r->code_hash)
        return OG_ECODE_HASH;
    if ((rc = og__redemption_ids_check(r->caller, r->idempotency_key,
                                       r->code_hash)) != 0)
        return rc;
    if (!r->nonce || !r->sealed || r->sealed_len <= OG_REDEMPTION_TAG_LEN ||
        r->sealed_len > OG_REDEMPTION_SEALED_MAX)
        return OG_ESEALED;
    rc = s->m->redemption_put(s->impl, r, &ins);
    if (rc == 0)
        *inserted = ins;
    return rc;
}

int og_redemption_get(og_store *s, const char *caller,
                      const char *idempotency_key, const char *code_hash,
                      og_redemption_found *found, og_redemption_point *out)
{
    og_redemption_found f = OG_REDEMPTION_ABSENT;
    og_redemption_point p;
    int rc;

    if (!s || !found || !out)
        return OG_EINVAL;
    if ((rc = og__redemption_ids_check(caller, idempotency_key, code_hash)) !=
        0)
        return rc;
    memset(&p, 0, sizeof p);
    rc = s->m->redemption_get(s->impl, caller, idempotency_key, code_hash, &f,
                              &p);
    if (rc != 0) {
        og_redemption_point_clear(&p);
        return rc;
    }
    *found = f;
    if (f == OG_REDEMPTION_OWN)
        *out = p;
    else
        og_redemption_point_clear(&p);
    return 0;
}

void og_redemption_point_clear(og_redemption_point *p)
{
    if (!p)
        return;
    if (p->sealed) {
        sodium_memzero(p->sealed, p->sealed_len);
        free(p->sealed);
    }
    memset(p, 0, sizeof *p);
}

/* ===========================================================================
 * The payout store (schema 7). Every input is checked here, before the
 * store (S1), with the pure core's own rules and codes where it has them
 * (ids, currencies, amounts, purposes); the backends run one transaction
 * per call (S6). The provider token is copied into the backend's request
 * only, and wiped when the call returns (S7). Fresh identifiers (decision,
 * grant, job) are made here, so both backends write the same kinds.
 * ========================================================================= */

/* og_id_valid(): 0, or err. */
static int og__payout_id(const char *id, int err)
{
    return og__id_check(id) == 0 ? 0 : err;
}

static int og__payout_limit_check(int64_t v)
{
    return v >= 0 && v <= OG_PAYOUT_LIMIT_MAX ? 0 : OG_EPAYOUT_LIMIT;
}

static void og__put_result_zero(og_payout_put_result *r)
{
    r->outcome = OG_PAYOUT_WRITTEN;
    r->version = 0;
}

int og_payout_tenant_put(og_store *s, const og_payout_tenant_settings *t,
                         int64_t expected_version, og_payout_put_result *out)
{
    og__payout_tenant_req r;
    og_payout_put_result res;
    int scale, rc;

    if (!s || !t || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(t->tenant_id, OG_EPAYOUT_TENANT)) != 0 ||
        (rc = og__payout_limit_check(t->daily_limit)) != 0 ||
        (rc = og_payout_currency_scale(t->currency, &scale)) != 0)
        return rc;
    if (t->settlement_offset_minutes < -OG_PAYOUT_OFFSET_MAX ||
        t->settlement_offset_minutes > OG_PAYOUT_OFFSET_MAX)
        return OG_EPAYOUT_OFFSET;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.tenant_id, t->tenant_id);
    r.payouts_suspended = t->payouts_suspended;
    r.daily_limit = t->daily_limit;
    memcpy(r.currency, t->currency, OG_CURRENCY_LEN + 1);
    r.offset_minutes = t->settlement_offset_minutes;
    r.expected_version = expected_version;
    og__put_result_zero(&res);
    if ((rc = s->m->payout_tenant_put(s->impl, &r, &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_beneficiary_put(og_store *s,
                              const og_payout_beneficiary_record *b,
                              int64_t expected_version,
                              og_payout_put_result *out)
{
    og__payout_beneficiary_req r;
    og_payout_put_result res;
    const char *status;
    int rc;

    if (!s || !b || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(b->beneficiary_id, OG_EPAYOUT_BENEFICIARY)) != 0 ||
        (rc = og__payout_id(b->tenant_id, OG_EPAYOUT_TENANT)) != 0)
        return rc;
    status = og_payout_beneficiary_status_name(b->status);
    if (strcmp(status, "?") == 0)
        return OG_EINVAL;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.beneficiary_id, b->beneficiary_id);
    og__idcpy(r.tenant_id, b->tenant_id);
    r.verified = b->verified;
    r.status = status;
    r.expected_version = expected_version;
    og__put_result_zero(&res);
    if ((rc = s->m->payout_beneficiary_put(s->impl, &r, &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

/* A provider token: 1..OG_PAYOUT_TOKEN_MAX printable ASCII, no spaces. */
static int og__payout_token_check(const char *t)
{
    size_t n = 0;

    if (!t)
        return OG_EPAYOUT_TOKEN;
    while (n <= OG_PAYOUT_TOKEN_MAX && t[n] != '\0') {
        if ((unsigned char)t[n] < 0x21 || (unsigned char)t[n] > 0x7e)
            return OG_EPAYOUT_TOKEN;
        n++;
    }
    return n >= 1 && n <= OG_PAYOUT_TOKEN_MAX ? 0 : OG_EPAYOUT_TOKEN;
}

int og_payout_destination_put(og_store *s,
                              const og_payout_destination_record *d,
                              int64_t expected_version,
                              og_payout_put_result *out)
{
    og__payout_destination_req r;
    og_payout_put_result res;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(d->destination_id, OG_EPAYOUT_DESTINATION)) != 0 ||
        (rc = og__payout_id(d->beneficiary_id, OG_EPAYOUT_BENEFICIARY)) != 0 ||
        (rc = og__payout_token_check(d->provider_token)) != 0)
        return rc;
    if (expected_version < 0)
        return OG_EPAYOUT_VERSION;
    memset(&r, 0, sizeof r);
    og__idcpy(r.destination_id, d->destination_id);
    og__idcpy(r.beneficiary_id, d->beneficiary_id);
    memcpy(r.provider_token, d->provider_token, strlen(d->provider_token) + 1);
    r.expected_version = expected_version;
    og__put_result_zero(&res);
    rc = s->m->payout_destination_put(s->impl, &r, &res);
    sodium_memzero(r.provider_token, sizeof r.provider_token); /* S7 */
    if (rc != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_destination_token(og_store *s, const char *destination_id,
                                int64_t version, char *out, size_t outlen)
{
    char token[OG_PAYOUT_TOKEN_MAX + 1];
    int rc;

    if (!s || !out || outlen < sizeof token)
        return OG_EINVAL;
    if ((rc = og__payout_id(destination_id, OG_EPAYOUT_DESTINATION)) != 0)
        return rc;
    if (version < 1)
        return OG_EPAYOUT_VERSION;
    rc = s->m->payout_destination_token(s->impl, destination_id, version,
                                        token, sizeof token);
    if (rc == 1)
        memcpy(out, token, strlen(token) + 1);
    sodium_memzero(token, sizeof token); /* S7 */
    return rc;
}

int og_payout_draft(og_store *s, const og_payout_draft_req *d,
                    og_payout_put_result *out)
{
    og__payout_draft_req r;
    og_payout_put_result res;
    char fp[OG_PAYOUT_FINGERPRINT_HEX + 1];
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(d->payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    /* The terms by the pure core's rules, in its order and with its codes
     * (OG_EPAYOUT_TENANT ... OG_EPAYOUT_PURPOSE). */
    if ((rc = og_payout_terms_fingerprint(&d->terms, fp)) != 0)
        return rc;
    if ((rc = og__payout_id(d->requester_id, OG_EPAYOUT_REQUESTER)) != 0)
        return rc;
    memset(&r, 0, sizeof r);
    og__idcpy(r.payout_id, d->payout_id);
    og__idcpy(r.tenant_id, d->terms.tenant_id);
    og__idcpy(r.beneficiary_id, d->terms.beneficiary_id);
    og__idcpy(r.destination_id, d->terms.destination_id);
    r.destination_version = d->terms.destination_version;
    if (og_payout_amount_parse(d->terms.amount, d->terms.currency,
                               &r.amount_minor) != 0)
        return OG_EINTERNAL; /* the fingerprint just parsed it */
    memcpy(r.currency, d->terms.currency, OG_CURRENCY_LEN + 1);
    r.has_purpose = d->terms.purpose != NULL;
    if (r.has_purpose && og_payout_purpose_normalize(
                             d->terms.purpose, r.purpose, sizeof r.purpose) != 0)
        return OG_EINTERNAL; /* likewise */
    og__idcpy(r.requester_id, d->requester_id);
    og__put_result_zero(&res);
    if ((rc = s->m->payout_draft(s->impl, &r, &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_cancel(og_store *s, const char *payout_id,
                     int64_t expected_version, const char *actor,
                     og_payout_put_result *out)
{
    og_payout_put_result res;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (expected_version < 1)
        return OG_EPAYOUT_VERSION;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    og__put_result_zero(&res);
    if ((rc = s->m->payout_cancel(s->impl, payout_id, expected_version, actor,
                                  &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_get(og_store *s, const char *payout_id, og_payout_view *out)
{
    og_payout_view v;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    memset(&v, 0, sizeof v);
    rc = s->m->payout_get(s->impl, payout_id, &v);
    if (rc == 1)
        *out = v;
    return rc;
}

int og_payout_context_read(og_store *s, const char *payout_id,
                           int64_t release_at_us, og_payout_snapshot *out)
{
    og__payout_facts f;
    og_payout_snapshot snap;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (!og__time_ok(release_at_us))
        return OG_EINVAL;
    memset(&f, 0, sizeof f);
    rc = s->m->payout_facts(s->impl, payout_id, release_at_us, &f);
    if (rc == OG_ESTORE_UNAVAILABLE) {
        /* "Cannot read": unavailable, never an answer from old facts. */
        memset(&snap, 0, sizeof snap);
        snap.ctx.unavailable = true;
        snap.why = OG_PAYOUT_UNAVAILABLE_STORE;
    } else if (rc != 0 || (rc = og__payout_snapshot_build(&f, &snap)) != 0) {
        return rc;
    }
    *out = snap;
    og_payout_snapshot_bind(out);
    return 0;
}

int og_payout_decide(og_store *s, const og_payout_decide_req *d,
                     og_payout_decision *out)
{
    og__payout_decide_req r;
    og_payout_decision res;
    int rc;

    if (!s || !d || !out)
        return OG_EINVAL;
    if ((rc = og__payout_id(d->payout_id, OG_EPAYOUT_ID)) != 0)
        return rc;
    if (d->payout_version < 0)
        return OG_EPAYOUT_VERSION;
    if ((rc = og__payout_id(d->requester_id, OG_EPAYOUT_REQUESTER)) != 0 ||
        (rc = og__payout_id(d->requester_role, OG_EPAYOUT_REQUESTER)) != 0 ||
        (rc = og__payout_limit_check(d->requester_approval_limit)) != 0)
        return rc;
    /* A short-lived window (seed section 6): at most the lifetime the
     * store's validators allow any grant. */
    if (!og__time_ok(d->not_before_us) || !og__time_ok(d->expires_at_us) ||
        d->expires_at_us <= d->not_before_us ||
        d->expires_at_us - d->not_before_us >
            s->opts.timings.max_grant_lifetime_us)
        return OG_EPAYOUT_WINDOW;
    if ((rc = og__payout_id(d->correlation_id, OG_EPAYOUT_CORRELATION)) != 0)
        return rc;
    memset(&r, 0, sizeof r);
    og__idcpy(r.payout_id, d->payout_id);
    r.payout_version = d->payout_version;
    r.reauthorize = d->reauthorize;
    og__idcpy(r.requester_id, d->requester_id);
    og__idcpy(r.requester_role, d->requester_role);
    r.approval_limit = d->requester_approval_limit;
    r.not_before_us = d->not_before_us;
    r.expires_at_us = d->expires_at_us;
    og__idcpy(r.correlation_id, d->correlation_id);
    if ((rc = og__uuid_new(r.decision_id)) != 0 ||
        (rc = og__uuid_new(r.job_id)) != 0 ||
        (rc = og_grant_new_id(r.grant_id)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->payout_decide(s->impl, &r, &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

static int og__payout_job_id(const char *in, char out[OG_UUID_LEN + 1])
{
    return og__uuid_normalize(in, out) == 0 ? 0 : OG_EPAYOUT_JOB;
}

int og_payout_job_take(og_store *s, int64_t lease_us, og_payout_job *out)
{
    og_payout_job j;
    int rc;

    if (!s || !out || lease_us < 1000 || lease_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    memset(&j, 0, sizeof j);
    rc = s->m->payout_job_take(s->impl, lease_us, &j);
    if (rc == 1)
        *out = j;
    return rc;
}

int og_payout_job_ack(og_store *s, const char *job_id, int64_t delivery,
                      bool *acked)
{
    char id[OG_UUID_LEN + 1];
    bool a = false;
    int rc;

    if (!s || !acked || delivery < 1)
        return OG_EINVAL;
    if ((rc = og__payout_job_id(job_id, id)) != 0)
        return rc;
    if ((rc = s->m->payout_job_ack(s->impl, id, delivery, &a)) == 0)
        *acked = a;
    return rc;
}

int og_payout_job_postpone(og_store *s, const char *job_id, int64_t delivery,
                           int64_t delay_us, bool *postponed)
{
    char id[OG_UUID_LEN + 1];
    bool p = false;
    int rc;

    if (!s || !postponed || delivery < 1 || delay_us < 0 ||
        delay_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    if ((rc = og__payout_job_id(job_id, id)) != 0)
        return rc;
    if ((rc = s->m->payout_job_postpone(s->impl, id, delivery, delay_us,
                                        &p)) == 0)
        *postponed = p;
    return rc;
}

int og_payout_job_resubmit(og_store *s, const char *job_id, const char *actor,
                           char new_job_id[OG_UUID_LEN + 1])
{
    char id[OG_UUID_LEN + 1], fresh[OG_UUID_LEN + 1];
    int rc;

    if (!s || !new_job_id)
        return OG_EINVAL;
    if ((rc = og__payout_job_id(job_id, id)) != 0)
        return rc;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    if ((rc = og__uuid_new(fresh)) != 0)
        return rc;
    rc = s->m->payout_job_resubmit(s->impl, id, actor, fresh);
    if (rc == 1)
        memcpy(new_job_id, fresh, sizeof fresh);
    return rc;
}

int og_payout_grant_get(og_store *s, const char *grant_id,
                        og_payout_grant_view *out)
{
    og_payout_grant_view v;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__id_check(grant_id) != 0)
        return OG_EGRANT_ID;
    memset(&v, 0, sizeof v);
    rc = s->m->payout_grant_get(s->impl, grant_id, &v);
    if (rc == 1)
        *out = v;
    return rc;
}

int og_payout_grant_revoke(og_store *s, const char *grant_id,
                           const char *actor, og_revoke_outcome *out)
{
    og_revoke_outcome o = OG_REVOKE_NOT_ISSUED;
    int rc;

    if (!s || !out)
        return OG_EINVAL;
    if (og__id_check(grant_id) != 0)
        return OG_EGRANT_ID;
    if (og__id_check(actor) != 0)
        return OG_EACTOR;
    if ((rc = s->m->payout_grant_revoke(s->impl, grant_id, actor, &o)) == 0)
        *out = o;
    return rc;
}

/* S-claim: the inputs are checked before any I/O; the attempt's id is
 * fresh (og__uuid_new); the backend decides and writes in ONE transaction
 * (og__payout_plan_claim); a DUPLICATE's consuming attempt is read after
 * it, from the store, for the caller's evidence. */
int og_payout_claim(og_store *s, const og_payout_claim_req *c,
                    og_payout_claim_result *out)
{
    og__payout_claim_req r;
    og_payout_claim_result res;
    int rc;

    if (!s || !c || !out)
        return OG_EINVAL;
    if (og__id_check(c->grant_id) != 0)
        return OG_EGRANT_ID;
    if (og__id_check(c->worker_id) != 0)
        return OG_EACTOR;
    if (og__id_check(c->audience) != 0 || og__id_check(c->policy_version) != 0 ||
        c->relied.tenant_settings < 1 || c->relied.beneficiary < 1 ||
        c->relied.destination < 1 || c->relied.payout < 1 ||
        c->send_window_us < 1000 || c->send_window_us > OG_PAYOUT_LEASE_MAX_US ||
        c->lease_us < 1000 || c->lease_us > OG_PAYOUT_LEASE_MAX_US)
        return OG_EINVAL;
    memset(&r, 0, sizeof r);
    og__idcpy(r.grant_id, c->grant_id);
    og__idcpy(r.worker_id, c->worker_id);
    og__idcpy(r.audience, c->audience);
    og__idcpy(r.policy_version, c->policy_version);
    r.relied = c->relied;
    r.send_window_us = c->send_window_us;
    r.lease_us = c->lease_us;
    if ((rc = og__uuid_new(r.operation_id)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->payout_claim(s->impl, &r, &res)) != 0)
        return rc;
    if (res.outcome == OG_PAYOUT_CLAIM_DUPLICATE && !res.has_attempt &&
        res.attempt.operation_id[0] != '\0') {
        og_operation op;

        if ((rc = s->m->operation_get(s->impl, res.attempt.operation_id,
                                      &op)) < 0)
            return rc;
        memset(&res.attempt, 0, sizeof res.attempt);
        if (rc == 1) {
            res.attempt = op;
            res.has_attempt = true;
        }
    }
    *out = res;
    return 0;
}

int og_payout_resolve(og_store *s, const char *operation_id,
                      unsigned expected, int64_t expected_owner_version,
                      const og_op_outcome *o, og_payout_resolution *out)
{
    char id[OG_UUID_LEN + 1];
    og_payout_resolution res;
    int rc;

    if (!s || !o || !out || expected_owner_version < OG__INITIAL_OWNER_VERSION)
        return OG_EINVAL;
    if (og__uuid_normalize(operation_id, id) < 0)
        return OG_EOPERATION_ID;
    if ((rc = og__op_outcome_check(expected, expected_owner_version, o)) != 0)
        return rc;
    memset(&res, 0, sizeof res);
    if ((rc = s->m->payout_resolve(s->impl, id, expected,
                                   expected_owner_version, o, &res)) != 0)
        return rc;
    *out = res;
    return 0;
}

int og_payout_expire_grants(og_store *s, int batch, int max_batches,
                            og_payout_expiry_stats *out)
{
    og_payout_expiry_stats total = {0, 0};
    int64_t from = OG__RETENTION_FROM_US, taken;
    int rc;

    if (!s || !out || !og__batch_args_ok(batch, max_batches))
        return OG_EINVAL;
    do { /* S4: bounded batches, each its own transaction */
        taken = 0;
        if ((rc = s->m->payout_expire_batch(s->impl, batch, &from, &taken)) <
            0)
            return rc;
        if (taken < 0 || taken > batch)
            return OG_EINTERNAL;
        total.grants += taken;
        total.batches++;
    } while (taken == batch && total.batches < max_batches);
    *out = total;
    return 0;
}

/* ===========================================================================
 * Plans (og_store_explain)
 * ========================================================================= */

void og__explain_statement(FILE *out, const char *title, const char *name,
                           const char *sql, const char *const *values, int n)
{
    fprintf(out, "### %s: `%s`\n\n```sql\n%s\n```\n\n", title, name, sql);
    if (n <= 0)
        return;
    fputs("Planned with", out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s $%d = %s%s%s", i ? "," : "", i + 1,
                values[i] ? "'" : "", values[i] ? values[i] : "NULL",
                values[i] ? "'" : "");
    fputs(".\n\n", out);
}

void og__explain_plan(FILE *out, const char *caption,
                      const char *const *lines, int n)
{
    if (caption)
        fprintf(out, "%s\n\n", caption);
    fputs("```text\n", out);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s\n", lines[i]);
    fputs("```\n\n", out);
}

int og_store_explain(og_store *s, int batch, char **text)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out;
    int rc;

    if (!s || !text || batch < 1 || batch > OG_RETENTION_BATCH_MAX)
        return OG_EINVAL;
    if (!(out = open_memstream(&buf, &len)))
        return OG_ENOMEM;
    fprintf(out, "## %s, %s consumption keys\n\n", s->m->name,
            og_consumption_keys_name(s->keys));
    rc = s->m->explain(s->impl, batch, out);
    if ((fclose(out) != 0 || buf == NULL) && rc == 0)
        rc = OG_ENOMEM;
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *text = buf;
    return 0;
}
