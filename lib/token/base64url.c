/*
 * base64url.c — unpadded base64url (RFC 4648 5), strictly. Pure.
 *
 * Strict means one spelling per byte string. A decoder that tolerated
 * padding, white space, the '+' '/' alphabet or non-zero trailing bits would
 * accept several texts for one token, and a token's identity (its signing
 * input, a log line, a replay cache) must not depend on which one a client
 * chose. The work is libsodium's; this file adds the re-encoding check that
 * makes "canonical" a tested property rather than a reading of its source.
 */
#include <string.h>

#include <sodium.h>

#include "token/token_int.h"

int og__b64url_decode(const char *in, size_t len, unsigned char *out,
                      size_t outmax, size_t *outlen)
{
    size_t n = 0;

    if (in == NULL || out == NULL || outlen == NULL)
        return -1;
    /* ignore = NULL and b64_end = NULL: any byte outside the alphabet,
     * '=' included for this variant, makes the call fail rather than stop
     * early; libsodium also refuses a dangling 6-bit group and non-zero
     * leftover bits. */
    if (sodium_base642bin(out, outmax, in, len, NULL, &n, NULL,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0)
        return -1;
    /* Belt and braces: the encoding of what we decoded must be the input,
     * byte for byte. Chunked so no buffer proportional to len is needed. */
    for (size_t done = 0; done < n; done += 48) {
        size_t chunk = n - done < 48 ? n - done : 48; /* 48 bytes -> 64 chars */
        char enc[OG__B64URL_LEN(48) + 1];
        size_t elen = OG__B64URL_LEN(chunk);
        size_t at = done / 3 * 4;

        og__b64url_encode(out + done, chunk, enc);
        if (at + elen > len || memcmp(enc, in + at, elen) != 0)
            return -1;
    }
    if (OG__B64URL_LEN(n) != len)
        return -1;
    *outlen = n;
    return 0;
}

char *og__b64url_encode(const unsigned char *in, size_t n, char *out)
{
    /* libsodium's nonnull(1) is on out; in may be anything when n is 0. */
    static const unsigned char none[1];

    sodium_bin2base64(out, OG__B64URL_LEN(n) + 1, n ? in : none, n,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    return out;
}
