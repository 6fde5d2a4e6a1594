/*
 * admission.c — what an admission that claimed nothing means. Pure.
 *
 * The claim decides; this file only reports. When the atomic write returns no
 * row, a backend reads the consumption row for the grant key and the
 * operation row for the request's operation id (a fresh read: it describes
 * the state after the attempt) and asks og__classify_unclaimed() which answer
 * to give. Invariants it protects:
 *
 *   AD1 ALREADY_ADMITTED only when the key is held by THIS operation id and
 *       the stored operation carries exactly the request's binding (issuer,
 *       grant id, caller, account, canonical amount, currency) and is a
 *       credit, the kind admission creates: a payout attempt (schema 7) is
 *       never handed to a credit caller as its own. An operation id is not
 *       a credential: matching the id alone reveals nothing.
 *   AD2 Everything else is REFUSED, and the refusal copies no stored field
 *       into the result's operation, so nothing returned to a caller
 *       reveals another operation. The reason is for logs; key_held and
 *       held_by (a key present: what holds it) are for the caller's own
 *       process, the service's refusal cache, which never tells them to a
 *       client (docs/http.md, "The refusal cache").
 *   AD3 A key held by a revocation or by the consume verdict (no operation
 *       id) is refused even when an operation with the request's id exists
 *       elsewhere.
 *   AD4 A claim blocked by its family (row missing or revoked) or, in row
 *       form, by a grant that was never issued is refused with that reason;
 *       a present key takes precedence, since it says what actually holds
 *       the grant.
 */
#include <string.h>

#include "core/core_int.h"

bool og__operation_matches(const og__admit_req *req, const og_operation *op)
{
    return op->kind == OG_OP_KIND_CREDIT && /* AD1 */
           strcmp(op->operation_id, req->operation_id) == 0 &&
           strcmp(op->issuer, req->issuer) == 0 &&
           strcmp(op->grant_id, req->grant_id) == 0 &&
           strcmp(op->caller_id, req->caller_id) == 0 &&
           strcmp(op->account_id, req->account_id) == 0 &&
           strcmp(op->amount, req->amount) == 0 && /* both canonical */
           strcmp(op->currency, req->currency) == 0;
}

static void refuse(og_admission *out, og_refusal why)
{
    memset(out, 0, sizeof *out);
    out->outcome = OG_OUTCOME_REFUSED;
    out->refusal = why;
}

/* What holds a key that is present, when it is not this operation. */
static og_refusal held_by(const og__consumption *c)
{
    switch (c->kind) {
    case OG__CLAIM_REVOCATION:
        return OG_REFUSAL_GRANT_REVOKED;
    case OG__CLAIM_CONSUME:
        return OG_REFUSAL_GRANT_CONSUMED;
    case OG__CLAIM_ADMISSION:
    default:
        return OG_REFUSAL_GRANT_SPENT;
    }
}

og_refusal og__classify_consume(const og__consumption *c)
{
    if (c->present)
        return held_by(c);
    if (c->not_issued)
        return OG_REFUSAL_NOT_ISSUED;
    if (c->family_blocked)
        return OG_REFUSAL_FAMILY_REVOKED;
    return OG_REFUSAL_DEADLINE_PASSED;
}

void og__classify_unclaimed(const og__admit_req *req,
                            const og__consumption *c, const og_operation *op,
                            og_admission *out)
{
    if (c->present) {
        if (!c->has_operation) {
            refuse(out, held_by(c)); /* AD3 */
            out->key_held = true;
            return;
        }
        if (strcmp(c->operation_id, req->operation_id) != 0) {
            refuse(out, OG_REFUSAL_GRANT_SPENT);
            out->key_held = true;
            memcpy(out->held_by, c->operation_id,
                   strnlen(c->operation_id, OG_UUID_LEN));
            return;
        }
        if (op && og__operation_matches(req, op)) {
            memset(out, 0, sizeof *out);
            out->outcome = OG_OUTCOME_ALREADY_ADMITTED; /* AD1 */
            out->refusal = OG_REFUSAL_NONE;
            out->operation = *op;
            return;
        }
        refuse(out, OG_REFUSAL_OPERATION_MISMATCH);
        return;
    }

    /* Nothing to claim (row form), or the family blocked the claim (AD4). */
    if (c->not_issued) {
        refuse(out, OG_REFUSAL_NOT_ISSUED);
        return;
    }
    if (c->family_blocked) {
        refuse(out, OG_REFUSAL_FAMILY_REVOKED);
        return;
    }

    /* No consumption row: the deadline check in the claim failed, or the row
     * was cleaned up after its retention. An operation row is only ever
     * written by the admission statement together with its claim, so one that
     * carries exactly this binding is this operation's own admission. */
    if (op) {
        if (og__operation_matches(req, op)) {
            memset(out, 0, sizeof *out);
            out->outcome = OG_OUTCOME_ALREADY_ADMITTED;
            out->operation = *op;
            return;
        }
        refuse(out, strcmp(op->issuer, req->issuer) == 0 &&
                                strcmp(op->grant_id, req->grant_id) == 0
                            ? OG_REFUSAL_OPERATION_MISMATCH
                            : OG_REFUSAL_OPERATION_ID_TAKEN);
        return;
    }
    refuse(out, OG_REFUSAL_DEADLINE_PASSED);
}
