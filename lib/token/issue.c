/*
 * issue.c — the issuing side: fresh grant ids, fresh UUIDs (decisions,
 * jobs) and signed grant tokens.
 * The claim rules are the validator's (grant.c); this file only
 * adds randomness and the signature.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "token/token_int.h"

int og_grant_new_id(char out[OG_GRANT_ID_LEN + 1])
{
    unsigned char id[16]; /* 128 bits: collisions are not a concern */

    if (out == NULL)
        return OG_EINVAL;
    if (sodium_init() < 0)
        return OG_EINTERNAL;
    randombytes_buf(id, sizeof id);
    og__b64url_encode(id, sizeof id, out);
    return 0;
}

int og__uuid_new(char out[OG_UUID_LEN + 1])
{
    unsigned char b[16];

    if (sodium_init() < 0)
        return OG_EINTERNAL;
    randombytes_buf(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, OG_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
             b[10], b[11], b[12], b[13], b[14], b[15]);
    return 0;
}

int og_grant_token_sign(const og_signer *s, const og_grant_claims *claims,
                        char **token)
{
    char *payload = NULL;
    size_t len = 0;
    int rc;

    if (s == NULL || claims == NULL || token == NULL)
        return OG_EINVAL;
    if ((rc = og__grant_claims_json(claims, &payload, &len)) != 0)
        return rc;
    rc = og__jws_sign(s, payload, len, token);
    free(payload);
    return rc;
}
