/*
 * grants.c — the grant lifecycle's entry points: issuance, revocation of
 * one grant, of a family, the consume verdict, tickets, and og_grant_issue
 * (signing and the issuance log together). Validation and privilege are
 * checked here, before the store (S1, dispatch.h); each backend method is
 * one conditional write (store_int.h, og__store_methods).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "store/dispatch.h"
#include "store/store_int.h"
#include "token/token_int.h"

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

/* The slots an og_strv's array has when it holds n ids: 0, then 8, 16, 32,
 * ... (the least power of two >= n, at least 8). og__strv_push keeps it so,
 * growing only when n reaches it, so og_strv needs no capacity member. */
static size_t strv_slots(size_t n)
{
    size_t slots = 8;

    if (n == 0)
        return 0;
    while (slots < n)
        slots *= 2;
    return slots;
}

int og__strv_push(og_strv *sv, const char *id)
{
    size_t slots = strv_slots(sv->n);
    char *copy;

    if (sv->n >= OG__STRV_MAX)
        return OG_ENOMEM;
    if (!(copy = strdup(id)))
        return OG_ENOMEM;
    if (sv->n == slots) {
        char **v = og__grow(sv->v, sizeof *v, &slots, 8, OG__STRV_MAX);

        if (!v) {
            free(copy);
            return OG_ENOMEM;
        }
        sv->v = v;
    }
    sv->v[sv->n++] = copy;
    return 0;
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
static bool may_revoke(const og_revoke_policy *p, const char *revoker)
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
    if (!may_revoke(policy, rv->revoker)) {
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
    if (!may_revoke(policy, revoker)) {
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
    int rc;

    if (!out)
        return OG_EINVAL;
    if (og__id_check(account) != 0)
        return OG_EACCOUNT;
    if (og_amount_canonical(amount, canon, sizeof canon) != 0)
        return OG_EAMOUNT;
    if ((rc = og__amount_minor_units_check(canon, currency)) != 0)
        return rc; /* OG_ECURRENCY, OG_EAMOUNT_MINOR_UNITS */
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
static void ticket_hash(const char *ticket, char hash[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(h, (const unsigned char *)ticket, strlen(ticket));
    sodium_bin2hex(hash, 65, h, sizeof h);
}

/* 256 random bits as base64url (43 characters). */
static int ticket_new(char ticket[OG_TICKET_LEN + 1])
{
    unsigned char b[32];

    if (sodium_init() < 0)
        return OG_EINTERNAL;
    randombytes_buf(b, sizeof b);
    og__b64url_encode(b, sizeof b, ticket);
    sodium_memzero(b, sizeof b);
    return 0;
}

static int ticket_check(const char *t)
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
    if ((rc = ticket_new(res.ticket)) < 0)
        return rc;
    ticket_hash(res.ticket, hash);
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
    if (ticket_check(ticket) != 0)
        return OG_ETICKET;
    memset(&res, 0, sizeof res);
    if ((rc = ticket_new(res.ticket)) < 0)
        return rc;
    ticket_hash(ticket, old_hash);
    ticket_hash(res.ticket, new_hash);
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

/* The test hook: tickets[0..n) rotated as one batch (store_int.h). Each
 * row checked and hashed as og_ticket_rotate does; no two alike (a batch
 * never holds two rotations of one ticket: CB2's rule for rotations). */
int og__rotate_batch(og_store *s, int n, const char *const *tickets,
                     og_ticket_result *out, int *rcs)
{
    og__rotate_row *rows;
    int rc = 0, i, j;

    if (!s || !tickets || !out || !rcs || n < 1 || n > OG_ADMIT_BATCH_MAX)
        return OG_EINVAL;
    for (i = 0; i < n; i++) {
        if (ticket_check(tickets[i]) != 0)
            return OG_ETICKET;
        for (j = 0; j < i; j++)
            if (strcmp(tickets[i], tickets[j]) == 0)
                return OG_EINVAL;
    }
    if ((rows = calloc((size_t)n, sizeof *rows)) == NULL)
        return OG_ENOMEM;
    memset(out, 0, (size_t)n * sizeof *out);
    for (i = 0; i < n && rc == 0; i++) {
        rc = ticket_new(out[i].ticket);
        ticket_hash(tickets[i], rows[i].old_hash);
        ticket_hash(out[i].ticket, rows[i].new_hash);
    }
    if (rc == 0)
        rc = s->m->rotate_batch(s->impl, rows, n, rcs); /* S3 */
    for (i = 0; i < n; i++) {
        if (rc == 0 && rcs[i] == 0) {
            out[i].outcome = rows[i].outcome;
            memcpy(out[i].issuer, rows[i].issuer, sizeof out[i].issuer);
            memcpy(out[i].family, rows[i].family, sizeof out[i].family);
        }
        if (rc != 0 || rcs[i] != 0 || out[i].outcome != OG_TICKET_ISSUED)
            sodium_memzero(out[i].ticket, sizeof out[i].ticket);
    }
    sodium_memzero(rows, (size_t)n * sizeof *rows);
    free(rows);
    return rc;
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

