/*
 * secret.c — see secret.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include <sodium.h>

#include "oncegate/core.h"
#include "secret.h"

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int og_secret_text_file_read(const char *path, size_t max, char *out,
                             size_t outlen)
{
    char *buf;
    size_t n, a = 0;
    FILE *f;
    int rc = -1;

    if (!path || !out || outlen < 1 || max < 1 || max > 65536)
        return -1;
    /* Guarded memory needs the library initialized; idempotent and
     * thread-safe. One byte more than max, to see a longer file. */
    if (sodium_init() < 0 || !(buf = sodium_malloc(max + 1)))
        return -1;
    if (!(f = fopen(path, "rbe"))) {
        sodium_free(buf);
        return -1;
    }
    n = fread(buf, 1, max + 1, f);
    if (!ferror(f) && n <= max) {
        while (n > a && is_space(buf[n - 1]))
            n--;
        while (a < n && is_space(buf[a]))
            a++;
        if (n - a + 1 <= outlen && !memchr(buf + a, '\0', n - a)) {
            memcpy(out, buf + a, n - a);
            out[n - a] = '\0';
            rc = 0;
        }
    }
    fclose(f);
    sodium_free(buf); /* wipes */
    return rc;
}

char *og_key_file_refusal(char *buf, size_t n, const char *what,
                          const char *path, int rc)
{
    struct stat st;

    if (!buf || n == 0)
        return buf;
    /* lstat: the mode of what is at path, a link's own if it is one (the
     * loaders never follow a link to a secret). */
    if (rc == OG_EKEY_MODE && path && lstat(path, &st) == 0)
        snprintf(buf, n,
                 "%s %s: %s: mode %04o gives group or others access; "
                 "chmod 600 it",
                 what, path, og_err_name(rc), (unsigned)(st.st_mode & 07777));
    else
        snprintf(buf, n, "%s %s: %s: %s", what, path ? path : "(none)",
                 og_err_name(rc), og_strerror(rc));
    return buf;
}
