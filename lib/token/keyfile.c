/*
 * keyfile.c — key files: generating them, and loading keysets and signers
 * from them, and the one loader of the service's symmetric secret keys
 * (og_secret_key_file_read). The only token code that touches the disk;
 * everything it reads goes through the parsers of keys.c or the key
 * decoder below.
 *
 * Invariants:
 *   F1  A key file is never overwritten or truncated: both files of a key
 *       are created with O_CREAT | O_EXCL, and O_NOFOLLOW, so neither an
 *       existing file nor a planted symlink is written through.
 *   F2  The private file is created with mode 0600 and never has wider
 *       permissions, not even for an instant: open() sets the mode.
 *   F3  A keygen that fails leaves nothing behind: files it created are
 *       removed. One that succeeds has fsync'd both files and the directory.
 *   F4  The private key text is read into, and written from, memory that is
 *       wiped before it is freed.
 *   F5  A secret key file is read only when it is a regular file reached
 *       without a symlink that neither group nor others can touch: a key
 *       others can read is no longer a secret, and a planted link must not
 *       choose which file is trusted. The signing key (og_signer_load_file)
 *       likewise. A file too open is OG_EKEY_MODE, checked before a byte
 *       of it is read.
 *   F6  A secret key's file text and a key that failed to load are wiped
 *       before the loader returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "token/token_int.h"

/* ===========================================================================
 * Reading
 * ========================================================================= */

/* Reads the regular file at path (at most OG_JWK_MAX bytes) into a
 * terminated buffer: sodium_malloc'd when secret, else malloc'd. Returns 0,
 * OG_EKEY_IO (cannot open or read, not a regular file), OG_EKEY_INVALID (too
 * large, or a NUL byte inside), OG_ENOMEM. */
static int read_key_file(const char *path, int secret, char **text)
{
    struct stat st;
    char *buf = NULL;
    size_t have = 0;
    int fd, rc = OG_EKEY_IO;

    if (path == NULL)
        return OG_EINVAL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return OG_EKEY_IO;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        goto out;
    if (secret && (st.st_mode & 077) != 0) { /* F5 */
        rc = OG_EKEY_MODE;
        goto out;
    }
    if (st.st_size > OG_JWK_MAX) {
        rc = OG_EKEY_INVALID;
        goto out;
    }
    /* One byte more than the cap, to see a file that grew past it. */
    buf = secret ? sodium_malloc(OG_JWK_MAX + 2) : malloc(OG_JWK_MAX + 2);
    if (buf == NULL) {
        rc = OG_ENOMEM;
        goto out;
    }
    for (;;) {
        ssize_t r = read(fd, buf + have, OG_JWK_MAX + 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto out;
        if (r == 0)
            break;
        have += (size_t)r;
        if (have > OG_JWK_MAX) {
            rc = OG_EKEY_INVALID;
            goto out;
        }
    }
    buf[have] = '\0';
    if (memchr(buf, '\0', have) != NULL) {
        rc = OG_EKEY_INVALID;
        goto out;
    }
    *text = buf;
    buf = NULL;
    rc = 0;
out:
    if (buf) {
        if (secret)
            sodium_free(buf);
        else
            free(buf);
    }
    close(fd);
    return rc;
}

/* Reads at most OG_SECRET_KEY_FILE_MAX bytes of the secret key file at path
 * into buf (room for one more), refusing what F5 refuses. Length, or a
 * negative error. */
static int secret_read(const char *path, char *buf)
{
    struct stat st;
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), rc = 0;

    if (fd < 0)
        return errno == ELOOP ? OG_EKEY_INVALID : OG_EKEY_IO;
    if (fstat(fd, &st) != 0) {
        rc = OG_EKEY_IO;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = OG_EKEY_INVALID;
        goto out;
    }
    if ((st.st_mode & 077) != 0) { /* F5 */
        rc = OG_EKEY_MODE;
        goto out;
    }
    while (n <= OG_SECRET_KEY_FILE_MAX) {
        ssize_t r = read(fd, buf + n, OG_SECRET_KEY_FILE_MAX + 1 - n);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = OG_EKEY_IO;
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    rc = n > OG_SECRET_KEY_FILE_MAX ? OG_EKEY_INVALID : (int)n;
out:
    close(fd);
    return rc;
}

/* Decodes text (n bytes, white space trimmed) in enc into exactly
 * OG_SECRET_KEY_LEN bytes of key. 0 or -1. */
static int secret_decode(const char *text, size_t n, og_key_encoding enc,
                         unsigned char key[OG_SECRET_KEY_LEN])
{
    static const int variants[] = {
        sodium_base64_VARIANT_ORIGINAL, sodium_base64_VARIANT_ORIGINAL_NO_PADDING,
        sodium_base64_VARIANT_URLSAFE, sodium_base64_VARIANT_URLSAFE_NO_PADDING};
    size_t len = 0;

    if (n == 2 * OG_SECRET_KEY_LEN &&
        sodium_hex2bin(key, OG_SECRET_KEY_LEN, text, n, NULL, &len, NULL) ==
            0 &&
        len == OG_SECRET_KEY_LEN)
        return 0;
    if (enc != OG_KEY_HEX_OR_BASE64)
        return -1;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
        if (sodium_base642bin(key, OG_SECRET_KEY_LEN, text, n, NULL, &len,
                              NULL, variants[i]) == 0 &&
            len == OG_SECRET_KEY_LEN)
            return 0;
    return -1;
}

int og_secret_key_file_read(const char *path, og_key_encoding enc,
                            unsigned char key[OG_SECRET_KEY_LEN])
{
    char buf[OG_SECRET_KEY_FILE_MAX + 1];
    size_t a = 0, b;
    int n, rc;

    if (!path || !key || (enc != OG_KEY_HEX && enc != OG_KEY_HEX_OR_BASE64))
        return OG_EINVAL;
    if ((n = secret_read(path, buf)) < 0) {
        sodium_memzero(buf, sizeof buf);
        return n;
    }
    b = (size_t)n;
    while (a < b && strchr(" \t\r\n", buf[a]))
        a++;
    while (b > a && strchr(" \t\r\n", buf[b - 1]))
        b--;
    rc = secret_decode(buf + a, b - a, enc, key) == 0 ? 0 : OG_EKEY_INVALID;
    sodium_memzero(buf, sizeof buf); /* F6 */
    if (rc != 0)
        sodium_memzero(key, OG_SECRET_KEY_LEN);
    return rc;
}

int og_keyset_add_file(og_keyset *ks, const char *issuer, const char *path)
{
    char *text = NULL;
    int rc;

    if (ks == NULL)
        return OG_EINVAL;
    if ((rc = read_key_file(path, 0, &text)) != 0)
        return rc;
    rc = og_keyset_add(ks, issuer, text, NULL);
    free(text);
    return rc;
}

int og_signer_load_file(const char *path, og_signer **out)
{
    char *text = NULL;
    int rc;

    if (out == NULL)
        return OG_EINVAL;
    if (sodium_init() < 0) /* before sodium_malloc */
        return OG_EINTERNAL;
    if ((rc = read_key_file(path, 1, &text)) != 0)
        return rc;
    rc = og_signer_load(text, out);
    sodium_free(text); /* F4 */
    return rc;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Splits "ISSUER.KID.public.jwk" (the suffix already checked) into its
 * issuer and kid. The kid has no '.', so it is the last dotted part. */
static int split_key_name(const char *name, char issuer[OG_ID_MAX + 1],
                          char kid[OG_KID_MAX + 1])
{
    size_t n = strlen(name) - strlen(OG_KEY_PUBLIC_SUFFIX);
    const char *dot = NULL;

    for (size_t i = 0; i < n; i++)
        if (name[i] == '.')
            dot = name + i;
    if (dot == NULL || (size_t)(dot - name) > OG_ID_MAX ||
        n - (size_t)(dot - name) - 1 > OG_KID_MAX)
        return -1;
    memcpy(issuer, name, (size_t)(dot - name));
    issuer[dot - name] = '\0';
    memcpy(kid, dot + 1, n - (size_t)(dot - name) - 1);
    kid[n - (size_t)(dot - name) - 1] = '\0';
    return og__issuer_file_check(issuer) == 0 && og__kid_check(kid) == 0 ? 0
                                                                         : -1;
}

int og_keyset_load_dir(og_keyset *ks, const char *dir, size_t *added)
{
    size_t n0 = og_keyset_count(ks), count = 0, cap = 0;
    const size_t sl = strlen(OG_KEY_PUBLIC_SUFFIX);
    char **names = NULL;
    struct dirent *e;
    DIR *d;
    int rc = 0;

    if (ks == NULL || dir == NULL)
        return OG_EINVAL;
    if ((d = opendir(dir)) == NULL)
        return OG_EKEY_IO;
    /* Collect, then sort: the load order, and so the first error reported,
     * does not depend on the file system's directory order. */
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= sl ||
            strcmp(e->d_name + len - sl, OG_KEY_PUBLIC_SUFFIX) != 0)
            continue;
        if (count == OG_KEYSET_MAX) {
            rc = OG_EKEY_INVALID;
            goto out;
        }
        if (count == cap) {
            char **nn = og__grow(names, sizeof *nn, &cap, 16, OG_KEYSET_MAX);
            if (nn == NULL) {
                rc = OG_ENOMEM;
                goto out;
            }
            names = nn;
        }
        if ((names[count] = strdup(e->d_name)) == NULL) {
            rc = OG_ENOMEM;
            goto out;
        }
        count++;
    }
    if (count)
        qsort(names, count, sizeof *names, cmp_names);
    for (size_t i = 0; i < count && rc == 0; i++) {
        char issuer[OG_ID_MAX + 1], kid[OG_KID_MAX + 1], got[OG_KID_MAX + 1];
        char path[OG_PATH_MAX], *text = NULL;

        if (split_key_name(names[i], issuer, kid) != 0) {
            rc = OG_EKEY_INVALID;
            break;
        }
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >=
            sizeof path) {
            rc = OG_EKEY_IO;
            break;
        }
        if ((rc = read_key_file(path, 0, &text)) != 0)
            break;
        rc = og_keyset_add(ks, issuer, text, got);
        free(text);
        /* The name is what an operator reads; the JWK is what verifies. A
         * file whose name and kid disagree is refused rather than guessed. */
        if (rc == 0 && strcmp(got, kid) != 0)
            rc = OG_EKEY_INVALID;
    }
out:
    closedir(d);
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    if (rc != 0) {
        og__keyset_truncate(ks, n0); /* all or nothing */
        return rc;
    }
    if (added)
        *added = og_keyset_count(ks) - n0;
    return 0;
}

/* ===========================================================================
 * Writing
 * ========================================================================= */

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Creates path exclusively with mode and writes text (plus a final newline
 * when text lacks one), fsync'd. 0,
 * OG_EKEY_EXISTS (path existed; nothing touched) or OG_EKEY_IO (the file,
 * if it was created, is removed). */
static int create_key_file(const char *path, mode_t mode, const char *text)
{
    size_t len = strlen(text);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  mode);

    if (fd < 0)
        return errno == EEXIST ? OG_EKEY_EXISTS : OG_EKEY_IO;
    /* F2: exactly mode, whatever the umask took away or not. */
    if (fchmod(fd, mode) != 0 || write_all(fd, text, len) != 0 ||
        ((len == 0 || text[len - 1] != '\n') && write_all(fd, "\n", 1) != 0) ||
        fsync(fd) != 0) {
        close(fd);
        unlink(path);
        return OG_EKEY_IO;
    }
    if (close(fd) != 0) {
        unlink(path);
        return OG_EKEY_IO;
    }
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

int og__keygen_seed(const char *issuer, const char *dir,
                    const unsigned char seed[OG__ED25519_SEED],
                    og_keygen_result *out)
{
    og_keygen_result r;
    og_signer *s = NULL;
    char *priv = NULL, *pub = NULL;
    struct stat st;
    int rc;

    if (dir == NULL || out == NULL || seed == NULL)
        return OG_EINVAL;
    if (sodium_init() < 0)
        return OG_EINTERNAL;
    if (og__issuer_file_check(issuer) != 0)
        return OG_EISSUER;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return OG_EKEY_IO;
    memset(&r, 0, sizeof r);
    if ((rc = og__jwk_private_text(seed, &priv, r.kid)) != 0)
        goto out;
    /* The public file is derived by loading the private text we are about
     * to write: a key that cannot be loaded back is never written. */
    if ((rc = og_signer_load(priv, &s)) != 0 ||
        (rc = og_signer_public_jwk(s, &pub)) != 0)
        goto out;
    if ((size_t)snprintf(r.private_path, sizeof r.private_path, "%s/%s.%s%s",
                         dir, issuer, r.kid, OG_KEY_PRIVATE_SUFFIX) >=
            sizeof r.private_path ||
        (size_t)snprintf(r.public_path, sizeof r.public_path, "%s/%s.%s%s",
                         dir, issuer, r.kid, OG_KEY_PUBLIC_SUFFIX) >=
            sizeof r.public_path) {
        rc = OG_EKEY_IO;
        goto out;
    }
    /* F1, F2. The private file first: if it cannot be created, nothing is. */
    if ((rc = create_key_file(r.private_path, 0600, priv)) != 0)
        goto out;
    if ((rc = create_key_file(r.public_path, 0644, pub)) != 0) {
        unlink(r.private_path); /* F3: ours, created a moment ago */
        goto out;
    }
    if (fsync_dir(dir) != 0) {
        unlink(r.public_path);
        unlink(r.private_path);
        rc = OG_EKEY_IO;
        goto out;
    }
    memcpy(out, &r, sizeof r);
out:
    if (priv) {
        sodium_memzero(priv, strlen(priv)); /* F4 */
        free(priv);
    }
    free(pub);
    og_signer_free(s);
    return rc;
}

int og_keygen(const char *issuer, const char *dir, og_keygen_result *out)
{
    unsigned char *seed;
    int rc;

    if (sodium_init() < 0)
        return OG_EINTERNAL;
    if ((seed = sodium_malloc(OG__ED25519_SEED)) == NULL)
        return OG_ENOMEM;
    randombytes_buf(seed, OG__ED25519_SEED);
    rc = og__keygen_seed(issuer, dir, seed, out);
    sodium_free(seed);
    return rc;
}
