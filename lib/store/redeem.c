/*
 * redeem.c — redemption recovery points (schema 6): input is checked here
 * (S1, dispatch.h); each backend runs ONE statement per call. The store
 * keeps the result sealed; sealing is og_redeem's (lib/exec/redeem.c).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "store/dispatch.h"
#include "store/store_int.h"

static int ids_check(const char *caller, const char *key,
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
    if ((rc = ids_check(r->caller, r->idempotency_key,
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
    if ((rc = ids_check(caller, idempotency_key, code_hash)) !=
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

