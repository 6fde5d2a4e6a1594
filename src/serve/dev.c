/*
 * dev.c — `oncegate serve --dev`: one data directory holding everything a
 * first try needs (a SQLite store, an issuer key, one principal per role
 * with a random API key), the banner with ready-to-paste commands, and
 * `oncegate dev-env`, which hands the keys to a shell.
 *
 *   DIR/                    0700
 *   DIR/.lock               flock'd for the whole setup (D2)
 *   DIR/keys/               0700: oncegate-dev.KID.{private,public}.jwk
 *   DIR/dev-credentials.json  0600: {"issuer": "oncegate-dev",
 *                           "principals": {ROLE: {"id", "api_key"}}}
 *   DIR/redemption.key      0600: the key redemption results are sealed
 *                           with (32 bytes, hex)
 *   DIR/operation-id.key    0600: the operation-id MAC key (32 bytes, hex;
 *                           operation_ids.mac_key_file), so dev grants
 *                           carry operation_mac
 *   DIR/oncegate.db         the store (migrated by the server at startup)
 *
 * Invariants:
 *   D1  API keys are secrets (so is DIR/redemption.key, written the same
 *       way and never printed). They are written to dev-credentials.json
 *       (created 0600 with O_EXCL under a temporary name, fsync'd, then
 *       renamed, so it is never seen half-written or readable by others)
 *       and printed only by `dev-env`, to stdout, on request. Never to err,
 *       the banner or a log; buffers that held one are wiped.
 *   D2  Setup runs under an exclusive flock on DIR/.lock, so instances
 *       started together agree: the first creates, the others find the
 *       complete result and reuse it.
 *   D3  An existing issuer key or credentials file is reused, never
 *       replaced: grants and shells that already use them keep working.
 *       A credentials file written before a role existed (the payout
 *       roles came later) is completed: the missing roles get fresh
 *       principals, the others keep their ids and keys, and the file is
 *       rewritten atomically under the lock.
 *   D4  Dev mode executes: unless a provider is given (--provider URL or
 *       provider.url), each instance starts `oncegate-sandbox` beside
 *       itself (control endpoint on, loopback, state in DIR/sandbox.db,
 *       which instances sharing DIR share, so a credit one instance's
 *       sandbox made is found by the other's lookup) and stops it when it
 *       drains; the sandbox dies with the server (PR_SET_PDEATHSIG). Its
 *       log goes to DIR/sandbox.log, so the server's stderr carries the
 *       server's own log lines only. The
 *       classification table the server reads, DIR/sandbox-credits.v1.json,
 *       is the copy compiled into the binary, rewritten at every start.
 *       POST /v1/redemptions redeems at the same sandbox (redemption.url
 *       follows provider.url), sealing with DIR/redemption.key.
 *   D5  Every value dev mode changes is a row of og_srv_dev_overrides,
 *       set through the configuration table's setter (a key that is not a
 *       row is refused at startup, and a test), and printed from the same
 *       rows by `oncegate help serve` and docs/config.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "exit.h" /* the exit codes every subcommand shares */
#include "serve.h"

#define DEV_CREDS_MAX 16384      /* bytes of dev-credentials.json */
#define DEV_KEY_RANDOM 32        /* bytes of randomness in an API key */
#define DEV_KEY_PREFIX "og_"
#define DEV_DEFAULT_DIR "./oncegate-dev"
#define DEV_TABLE_FILE "sandbox-credits.v1.json"
#define DEV_PAYOUTS_TABLE_FILE "sandbox-payouts.v1.json"
#define DEV_SANDBOX_STATE "sandbox.db"
#define DEV_SANDBOX_LOG "sandbox.log"
#define DEV_SANDBOX_READY "oncegate-sandbox: listening on "
#define DEV_SANDBOX_START_MS 15000 /* its ready line, at most */
#define DEV_SANDBOX_STOP_MS 10000  /* its drain after SIGTERM, at most */

/* providers/sandbox-credits.v1.json, compiled in (tools/embed.py). */
extern const char og_srv_dev_table[];
extern const size_t og_srv_dev_table_len;
/* providers/sandbox-payouts.v1.json, compiled in: the payout pipeline's. */
extern const char og_srv_dev_payouts_table[];
extern const size_t og_srv_dev_payouts_table_len;

/* The credentials of one data directory, by role index. Wiped after use. */
typedef struct dev_creds {
    char id[OG_ROLE_COUNT][OG_ID_MAX + 1];
    char key[OG_ROLE_COUNT][OG_API_KEY_MAX + 1];
} dev_creds;

/* Writes one "dev: ..." line to err and returns rc. Callers never pass key
 * material (D1). */
__attribute__((format(printf, 4, 5))) static int
dev_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = og_srv_vfail(err, errlen, rc, "dev", fmt, ap);
    va_end(ap);
    return rc;
}

/* DIR/name into buf (OG_PATH_MAX bytes). 0, or -1 when it does not fit. */
static int dev_path(char buf[OG_PATH_MAX], const char *dir, const char *name)
{
    int n = snprintf(buf, OG_PATH_MAX, "%s/%s", dir, name);
    return n >= 0 && n < OG_PATH_MAX ? 0 : -1;
}

/* ===========================================================================
 * The directory, its lock and the issuer key.
 * ========================================================================= */

/* Creates directory path (0700 exactly, whatever the umask) unless it
 * exists as a directory (then its mode is the owner's choice). 0 or
 * OG_EKEY_IO with err. */
static int dev_mkdir(const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (mkdir(path, 0700) == 0) {
        if (chmod(path, 0700) != 0)
            return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot chmod: %s",
                            path, strerror(errno));
        return 0;
    }
    if (errno != EEXIST)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot create: %s",
                        path, strerror(errno));
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: not a directory", path);
    return 0;
}

/* Opens DIR/.lock and takes the exclusive lock (D2); *fd holds it until
 * closed. 0 or OG_EKEY_IO with err. */
static int dev_lock(const char *dir, int *fd, char *err, size_t errlen)
{
    char path[OG_PATH_MAX];
    int f;

    if (dev_path(path, dir, ".lock") != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    if ((f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot open: %s", path,
                        strerror(errno));
    while (flock(f, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(f);
            return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot lock: %s",
                            path, strerror(e));
        }
    }
    *fd = f;
    return 0;
}

/* 1 when keys_dir holds an OG_DEV_ISSUER private key, 0 when not, -1 when
 * it cannot be read. */
static int dev_has_key(const char *keys_dir)
{
    size_t pl = strlen(OG_DEV_ISSUER), sl = strlen(OG_KEY_PRIVATE_SUFFIX);
    struct dirent *e;
    DIR *d = opendir(keys_dir);
    int found = 0;

    if (!d)
        return -1;
    while (!found && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        found = n > pl + 1 + sl &&
                strncmp(e->d_name, OG_DEV_ISSUER ".", pl + 1) == 0 &&
                strcmp(e->d_name + n - sl, OG_KEY_PRIVATE_SUFFIX) == 0;
    }
    closedir(d);
    return found;
}

/* Generates the issuer key in keys_dir unless one exists (D3). 0 or an
 * error with err. */
static int dev_ensure_key(const char *keys_dir, char *err, size_t errlen)
{
    og_keygen_result r;
    int has = dev_has_key(keys_dir), rc;

    if (has < 0)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s",
                        keys_dir, strerror(errno));
    if (has)
        return 0;
    if ((rc = og_keygen(OG_DEV_ISSUER, keys_dir, &r)) != 0)
        return dev_fail(err, errlen, rc, "%s: cannot create the issuer key: %s",
                        keys_dir, og_strerror(rc));
    return 0;
}

/* ===========================================================================
 * dev-credentials.json.
 * ========================================================================= */

/* 0 when key is 1..OG_API_KEY_MAX printable ASCII without spaces (what a
 * bearer header and a shell export carry safely); else -1. */
static int dev_key_check(const char *key)
{
    size_t n = strlen(key);

    if (n == 0 || n > OG_API_KEY_MAX)
        return -1;
    for (; *key; key++)
        if (*key < 0x21 || *key > 0x7e)
            return -1;
    return 0;
}

/* Wipes jansson's copies of the api_key strings in a parsed credentials
 * document before it is freed (D1). The strings are jansson's own heap
 * buffers, so writing through the const pointer is sound. */
static void dev_json_wipe(json_t *root)
{
    json_t *ps = json_object_get(root, "principals"), *p, *k;
    const char *role;

    if (!json_is_object(ps))
        return;
    json_object_foreach(ps, role, p) {
        if ((k = json_object_get(p, "api_key")) && json_is_string(k))
            sodium_memzero((char *)json_string_value(k), json_string_length(k));
    }
}

/* Validates one principals.ROLE entry into cr[idx]. 0 or OG_EINVAL. */
static int dev_parse_role(json_t *p, const char *role, int idx, dev_creds *cr,
                          const char *path, char *err, size_t errlen)
{
    json_t *id = json_object_get(p, "id"), *key = json_object_get(p, "api_key");

    if (!json_is_object(p) || json_object_size(p) != 2 || !id || !key)
        return dev_fail(err, errlen, OG_EINVAL,
                        "%s: principals.%s: must be {\"id\", \"api_key\"}",
                        path, role);
    if (!json_is_string(id) || !og_id_valid(json_string_value(id)))
        return dev_fail(err, errlen, OG_EINVAL,
                        "%s: principals.%s.id: must be 1-128 printable ASCII "
                        "characters without spaces",
                        path, role);
    if (!json_is_string(key) || dev_key_check(json_string_value(key)) != 0)
        return dev_fail(err, errlen, OG_EINVAL,
                        "%s: principals.%s.api_key: must be 1-%d printable "
                        "ASCII characters without spaces",
                        path, role, OG_API_KEY_MAX);
    snprintf(cr->id[idx], sizeof cr->id[idx], "%s", json_string_value(id));
    snprintf(cr->key[idx], sizeof cr->key[idx], "%s", json_string_value(key));
    return 0;
}

/* Validates the document's shape into *cr: {"issuer": str, "principals":
 * {ROLE: {"id", "api_key"}}} with each role at most once and no key shared
 * by two roles; *seen: the roles present (a file older than a role lacks
 * it, D3). 0 or OG_EINVAL with err (naming members, never values). */
static int dev_parse(json_t *root, dev_creds *cr, unsigned *seen_out,
                     const char *path, char *err, size_t errlen)
{
    json_t *iss = json_object_get(root, "issuer");
    json_t *ps = json_object_get(root, "principals"), *p;
    const char *role;
    unsigned seen = 0;
    int rc;

    if (!json_is_object(root) || json_object_size(root) != 2 ||
        !json_is_string(iss) || !og_id_valid(json_string_value(iss)) ||
        !json_is_object(ps))
        return dev_fail(err, errlen, OG_EINVAL,
                        "%s: must be {\"issuer\": ID, \"principals\": {ROLE: "
                        "{\"id\", \"api_key\"}}}",
                        path);
    json_object_foreach(ps, role, p) {
        unsigned bit = og_role_parse(role);
        int idx = 0;

        if (bit == 0)
            return dev_fail(err, errlen, OG_EINVAL,
                            "%s: principals: unknown role", path);
        while ((1u << idx) != bit)
            idx++;
        if ((rc = dev_parse_role(p, role, idx, cr, path, err, errlen)) != 0)
            return rc;
        seen |= bit;
    }
    if (seen == 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: principals: none", path);
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        for (int j = 0; j < i; j++)
            if ((seen & (1u << i)) && (seen & (1u << j)) &&
                strcmp(cr->key[i], cr->key[j]) == 0)
                return dev_fail(err, errlen, OG_EINVAL,
                                "%s: principals %s and %s share one api_key",
                                path, og_role_name(1u << j),
                                og_role_name(1u << i));
    }
    *seen_out = seen;
    return 0;
}

/* Parses len bytes of text (the file at path) into *cr, the roles present
 * into *seen. 0 or OG_EINVAL with err. */
static int dev_creds_parse(const char *text, size_t len, dev_creds *cr,
                           unsigned *seen, const char *path, char *err,
                           size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    int rc;

    /* Only line and column: jansson's text quotes the input near the
     * error, which could be part of a key (D1). */
    if (!root)
        return dev_fail(err, errlen, OG_EINVAL,
                        "%s: not valid JSON (line %d, column %d)", path,
                        je.line, je.column);
    rc = dev_parse(root, cr, seen, path, err, errlen);
    dev_json_wipe(root);
    json_decref(root);
    return rc;
}

/* Reads and validates the credentials file at path into *cr, the roles
 * it holds into *seen. 1 when read, 0 when it does not exist, or a
 * negative code with err. */
static int dev_creds_read(const char *path, dev_creds *cr, unsigned *seen,
                          char *err, size_t errlen)
{
    char buf[DEV_CREDS_MAX];
    struct stat st;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s", path,
                        strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > DEV_CREDS_MAX)
        rc = dev_fail(err, errlen, OG_EINVAL,
                      "%s: not a regular file of at most %d bytes", path,
                      DEV_CREDS_MAX);
    while (rc == 0 && got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            rc = dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s", path,
                          r < 0 ? strerror(errno) : "file shrank");
        else
            got += (size_t)r;
    }
    close(fd);
    if (rc == 0)
        rc = dev_creds_parse(buf, got, cr, seen, path, err, errlen);
    sodium_memzero(buf, sizeof buf);
    return rc == 0 ? 1 : rc;
}

/* Fills *cr with fresh credentials for each role not in have: id
 * "dev-ROLE" ("clerk-22" for the clerk: the payout scenario's requester,
 * dev_payouts.c) and a 256-bit random key "og_" + unpadded base64url. */
static void dev_creds_generate(dev_creds *cr, unsigned have)
{
    unsigned char raw[DEV_KEY_RANDOM];
    char b64[sodium_base64_ENCODED_LEN(DEV_KEY_RANDOM,
                                       sodium_base64_VARIANT_URLSAFE_NO_PADDING)];

    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        if (have & (1u << i))
            continue;
        randombytes_buf(raw, sizeof raw);
        sodium_bin2base64(b64, sizeof b64, raw, sizeof raw,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        if ((1u << i) == OG_ROLE_CLERK)
            snprintf(cr->id[i], sizeof cr->id[i], "clerk-22");
        else
            snprintf(cr->id[i], sizeof cr->id[i], "dev-%s",
                     og_role_name(1u << i));
        snprintf(cr->key[i], sizeof cr->key[i], DEV_KEY_PREFIX "%s", b64);
    }
    sodium_memzero(raw, sizeof raw);
    sodium_memzero(b64, sizeof b64);
}

/* Renders *cr as the credentials document into buf. Built by hand rather
 * than with jansson so no unwiped copy of a key is left on the heap (D1);
 * generated ids and keys need no JSON escaping. 0, or -1 when it does not
 * fit. */
static int dev_creds_render(const dev_creds *cr, char *buf, size_t len)
{
    size_t used;
    int n = snprintf(buf, len, "{\n  \"issuer\": \"%s\",\n  \"principals\": {\n",
                     OG_DEV_ISSUER);

    if (n < 0 || (size_t)n >= len)
        return -1;
    used = (size_t)n;
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        n = snprintf(buf + used, len - used,
                     "    \"%s\": {\"id\": \"%s\", \"api_key\": \"%s\"}%s\n",
                     og_role_name(1u << i), cr->id[i], cr->key[i],
                     i + 1 < OG_ROLE_COUNT ? "," : "");
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    n = snprintf(buf + used, len - used, "  }\n}\n");
    return n >= 0 && (size_t)n < len - used ? 0 : -1;
}

/* Writes all of text to fd. 0 or -1 (errno set). */
static int dev_write_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, text, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        text += w;
        len -= (size_t)w;
    }
    return 0;
}

/* fsyncs directory dir, so a rename into it survives a crash. 0 or -1. */
static int dev_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

    if (fd < 0)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

/* Creates or replaces DIR/name (path) holding len bytes of text,
 * atomically, with mode (0600 for the credentials, D1): written under a
 * temporary name, fsync'd, renamed, the directory fsync'd. Called under the
 * lock. 0 or OG_EKEY_IO with err. */
static int dev_file_write(const char *dir, const char *name, const char *path,
                          const char *text, size_t len, mode_t mode,
                          char *err, size_t errlen)
{
    char tmp[OG_PATH_MAX], tmpname[OG_PATH_MAX];
    int fd, e;

    if ((size_t)snprintf(tmpname, sizeof tmpname, ".%s.tmp", name) >=
            sizeof tmpname ||
        dev_path(tmp, dir, tmpname) != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    /* Under the lock nobody else writes tmp: one left here is from a setup
     * that crashed. O_EXCL then refuses anything (a symlink included) that
     * appears in between. */
    if (unlink(tmp) != 0 && errno != ENOENT)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot remove: %s", tmp,
                        strerror(errno));
    fd = open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot create: %s", tmp,
                        strerror(errno));
    if (fchmod(fd, mode) != 0 || dev_write_all(fd, text, len) != 0 ||
        fsync(fd) != 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot write: %s", tmp,
                        strerror(e));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0 || dev_fsync_dir(dir) != 0) {
        e = errno;
        unlink(tmp);
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot write: %s", path,
                        strerror(e));
    }
    return 0;
}

/* Reads DIR/dev-credentials.json into *cr, creating it first when absent
 * and completing it when a role is missing (D3). Called under the lock. 0
 * or an error with err. */
static int dev_creds_ensure(const char *dir, const char *path, dev_creds *cr,
                            char *err, size_t errlen)
{
    char text[DEV_CREDS_MAX];
    unsigned have = 0, all = (1u << OG_ROLE_COUNT) - 1;
    int rc = dev_creds_read(path, cr, &have, err, errlen);

    if (rc < 0 || (rc == 1 && have == all))
        return rc < 0 ? rc : 0;
    dev_creds_generate(cr, have);
    if (dev_creds_render(cr, text, sizeof text) != 0)
        rc = dev_fail(err, errlen, OG_EINTERNAL, "%s: credentials too long",
                      path);
    else
        rc = dev_file_write(dir, OG_DEV_CREDENTIALS, path, text, strlen(text),
                            0600, err, errlen);
    sodium_memzero(text, sizeof text);
    return rc;
}

/* ===========================================================================
 * The redemption sealing key and the operation-id MAC key (D1, D3).
 * ========================================================================= */

/* Creates DIR/name (path), 0600, with 32 random bytes as hex, unless it
 * exists: a key in use is never replaced (D3) — every result sealed with
 * the redemption key, every operation MAC handed out with the other,
 * would stop verifying. Called under the lock. 0 or an error with err. */
static int dev_secret_key_ensure(const char *dir, const char *name,
                                 const char *path, char *err, size_t errlen)
{
    unsigned char key[32];
    char hex[2 * sizeof key + 2];
    struct stat st;
    int rc;

    if (lstat(path, &st) == 0)
        return 0;
    if (errno != ENOENT)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s", path,
                        strerror(errno));
    randombytes_buf(key, sizeof key);
    sodium_bin2hex(hex, sizeof hex - 1, key, sizeof key);
    strcat(hex, "\n");
    rc = dev_file_write(dir, name, path, hex, strlen(hex), 0600, err, errlen);
    sodium_memzero(key, sizeof key);
    sodium_memzero(hex, sizeof hex);
    return rc;
}

/* ===========================================================================
 * Preparing the configuration.
 * ========================================================================= */

/* Fills c from the data directory and the credentials; c is changed only
 * on success. 0 or OG_ENOMEM / OG_EINVAL with err. */
static int dev_fill(og_srv_config *c, const char *dir, const char *store_url,
                    const char *keys_dir, const char *table_path,
                    const char *redemption_key, const dev_creds *cr,
                    char *err, size_t errlen)
{
    char url[OG_PATH_MAX + 16];
    og_principal *ps = calloc(OG_ROLE_COUNT, sizeof *ps);
    char *store, *keys, *iss, *aud, *table = NULL, *rkey = NULL;

    if ((size_t)snprintf(url, sizeof url, "sqlite:%s/oncegate.db", dir) >=
        sizeof url) {
        free(ps);
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    }
    store = strdup(store_url ? store_url : url);
    keys = strdup(keys_dir);
    iss = strdup(OG_DEV_ISSUER);
    aud = strdup(OG_DEV_AUDIENCE);
    /* A table or key file the configuration names wins: --dev with
     * --config. */
    if (!c->provider_table)
        table = strdup(table_path);
    if (!c->redemption_key_file)
        rkey = strdup(redemption_key);
    if (!ps || !store || !keys || !iss || !aud ||
        (!c->provider_table && !table) || (!c->redemption_key_file && !rkey)) {
        free(ps);
        free(store);
        free(keys);
        free(iss);
        free(aud);
        free(table);
        free(rkey);
        return dev_fail(err, errlen, OG_ENOMEM, "out of memory");
    }
    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        snprintf(ps[i].id, sizeof ps[i].id, "%s", cr->id[i]);
        ps[i].roles = 1u << i;
        /* the dev clerk submits up to 10,000.00 (at scale 2) unescalated;
         * the dev approver settles escalations up to 100,000.00 */
        if ((1u << i) == OG_ROLE_CLERK)
            ps[i].approval_limit_minor = 1000000;
        if ((1u << i) == OG_ROLE_APPROVER)
            ps[i].approval_limit_minor = 10000000;
        crypto_hash_sha256(ps[i].key_hash, (const unsigned char *)cr->key[i],
                           strlen(cr->key[i]));
    }
    free(c->store_url);
    free(c->keys_dir);
    free(c->issuer);
    free(c->audience);
    free(c->signing_key);
    if (c->principals)
        sodium_memzero(c->principals, c->n_principals * sizeof *c->principals);
    free(c->principals);
    c->store_url = store;
    c->keys_dir = keys;
    c->issuer = iss;
    c->audience = aud;
    c->signing_key = NULL; /* the issuer's first key in keys_dir */
    c->principals = ps;
    c->n_principals = OG_ROLE_COUNT;
    c->auto_migrate = true;
    if (table)
        c->provider_table = table;
    if (rkey)
        c->redemption_key_file = rkey;
    return 0;
}

/* DIR/sandbox-payouts.v1.json, rewritten from the compiled-in copy as the
 * credits table is. 0 or an error with err. */
static int dev_payouts_table_write(const char *dir, char *err, size_t errlen)
{
    char path[OG_PATH_MAX];

    if (dev_path(path, dir, DEV_PAYOUTS_TABLE_FILE) != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    return dev_file_write(dir, DEV_PAYOUTS_TABLE_FILE, path,
                          og_srv_dev_payouts_table,
                          og_srv_dev_payouts_table_len, 0644, err, errlen);
}

/* DIR/operation-id.key, created once (D3). 0 or an error with err. */
static int dev_opid_key_ensure(const char *dir, char *err, size_t errlen)
{
    char path[OG_PATH_MAX];

    if (dev_path(path, dir, OG_DEV_OPID_KEY) != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    return dev_secret_key_ensure(dir, OG_DEV_OPID_KEY, path, err, errlen);
}

/* The locked part of og_srv_dev_prepare: keys directory, issuer key,
 * credentials into *cr, and the sandbox's classification table — rewritten
 * from the copy compiled into this binary every time, so the file always
 * describes the sandbox this binary starts (D4). 0 or an error with err. */
static int dev_setup_locked(const char *dir, const char *keys_dir,
                            const char *creds_path, const char *table_path,
                            const char *redemption_key, dev_creds *cr,
                            char *err, size_t errlen)
{
    int rc;

    if ((rc = dev_mkdir(keys_dir, err, errlen)) != 0 ||
        (rc = dev_ensure_key(keys_dir, err, errlen)) != 0 ||
        (rc = dev_file_write(dir, DEV_TABLE_FILE, table_path,
                             og_srv_dev_table, og_srv_dev_table_len, 0644,
                             err, errlen)) != 0 ||
        (rc = dev_payouts_table_write(dir, err, errlen)) != 0 ||
        (rc = dev_secret_key_ensure(dir, OG_DEV_REDEMPTION_KEY,
                                    redemption_key, err, errlen)) != 0 ||
        (rc = dev_opid_key_ensure(dir, err, errlen)) != 0)
        return rc;
    return dev_creds_ensure(dir, creds_path, cr, err, errlen);
}

int og_srv_dev_prepare(og_srv_config *c, const char *dir,
                       const char *store_url, char *err, size_t errlen)
{
    char keys_dir[OG_PATH_MAX], creds_path[OG_PATH_MAX];
    char table_path[OG_PATH_MAX], redemption_key[OG_PATH_MAX];
    dev_creds cr;
    int rc, lock = -1;

    if (err && errlen)
        err[0] = '\0';
    if (!c || !dir || !dir[0])
        return dev_fail(err, errlen, OG_EINVAL, "no data directory");
    if (sodium_init() < 0)
        return dev_fail(err, errlen, OG_EINTERNAL, "libsodium failed to start");
    if (dev_path(keys_dir, dir, "keys") != 0 ||
        dev_path(creds_path, dir, OG_DEV_CREDENTIALS) != 0 ||
        dev_path(table_path, dir, DEV_TABLE_FILE) != 0 ||
        dev_path(redemption_key, dir, OG_DEV_REDEMPTION_KEY) != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    memset(&cr, 0, sizeof cr);
    if ((rc = dev_mkdir(dir, err, errlen)) == 0 &&
        (rc = dev_lock(dir, &lock, err, errlen)) == 0) {
        rc = dev_setup_locked(dir, keys_dir, creds_path, table_path,
                              redemption_key, &cr, err, errlen);
        close(lock); /* releases the flock */
    }
    if (rc == 0)
        rc = dev_fill(c, dir, store_url, keys_dir, table_path, redemption_key,
                      &cr, err, errlen);
    sodium_memzero(&cr, sizeof cr);
    /* Dev grants carry operation_mac: the MAC key, unless the
     * configuration names one. */
    if (rc == 0 && !c->opid_mac_key_file) {
        char kpath[OG_PATH_MAX];

        if (dev_path(kpath, dir, OG_DEV_OPID_KEY) != 0)
            return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
        if (!(c->opid_mac_key_file = strdup(kpath)))
            return dev_fail(err, errlen, OG_ENOMEM, "out of memory");
    }
    /* The payout pipeline's table, unless the configuration names one. */
    if (rc == 0 && !c->payouts_table) {
        char ptable[OG_PATH_MAX];

        if (dev_path(ptable, dir, DEV_PAYOUTS_TABLE_FILE) != 0)
            return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
        if (!(c->payouts_table = strdup(ptable)))
            return dev_fail(err, errlen, OG_ENOMEM, "out of memory");
    }
    return rc;
}

/* ===========================================================================
 * Dev mode's values (D5): ONE table, applied through the configuration's
 * own setters and printed by `oncegate help serve` and docs/config.md from
 * the same rows, so what dev mode changes cannot drift from what is shown.
 * ========================================================================= */

/* Seconds instead of minutes, so recovery and the payout pipeline are seen
 * within seconds. The relations hold with these (test_config_dev.c checks
 * them): T5: 6 s >= 3 x 1 s + 2 s + 0.5 s; T6: 6 s >= 2 x 2 s + 1 s;
 * R3: 10 s > 3 x 2 s + 2 s + 1 s; R4: 60 s > 3 x 2 s; R5: 10 s > 3 x 1 s;
 * R6: 2 s, 5 s >= 1 s; R7: 1 h >= 2 s. The attempt lease is what a lost
 * answer waits before the reconciler looks it up: 10 s, so the banner's
 * payout path is Paid about 20 s after its release. */
const og_srv_dev_override og_srv_dev_overrides[] = {
    {"timings.store_timeout_ms", "1000"},
    {"timings.provider_timeout_ms", "2000"},
    {"timings.lease_margin_ms", "500"},
    {"timings.execution_lease_ms", "6000"},
    {"timings.recovery_lease_ms", "6000"},
    {"timings.recovery_delay_ms", "2000"}, /* a recovery pass every second */
    /* a cleanup pass every 5 s; the refusal retention (cleanup_margin) is
     * the production one all the same */
    {"janitor.interval_ms", "5000"},
    /* The banner's step 5 shows a lost answer: on a kept connection
     * libcurl would re-send the request and the sandbox replay the credit
     * (docs/design.md, KA1), hiding what the step is there to show. */
    {"provider.keep_alive", "0"},
    {"payouts.runner", "true"},
    {"payouts.worker_id", "\"dev-payout-worker\""}, /* the role's */
    {"payouts.send_window_ms", "60000"},
    {"payouts.attempt_lease_ms", "10000"},
    {"payouts.job_lease_ms", "10000"},
    {"payouts.record_timeout_ms", "2000"},
    {"payouts.postpone_ms", "2000"},
    {"payouts.interval_ms", "1000"},
    {"payouts.backoff_ms", "\"2000,5000\""},
};
const size_t og_srv_dev_n_overrides =
    sizeof og_srv_dev_overrides / sizeof og_srv_dev_overrides[0];

int og_srv_dev_apply(og_srv_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < og_srv_dev_n_overrides; i++) {
        int rc = og_srv_config_set(c, og_srv_dev_overrides[i].key,
                                   og_srv_dev_overrides[i].value, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void og_srv_dev_overrides_print(FILE *f, bool markdown)
{
    if (markdown)
        fputs("| key | dev mode | default |\n|---|---|---|\n", f);
    else
        fprintf(f, "  %-28s %-19s %s\n", "key", "dev mode", "default");
    for (size_t i = 0; i < og_srv_dev_n_overrides; i++) {
        const og_srv_dev_override *o = &og_srv_dev_overrides[i];
        char def[96];

        if (og_srv_config_default_text(o->key, def, sizeof def) != 0)
            snprintf(def, sizeof def, "-");
        if (markdown)
            fprintf(f, "| `%s` | `%s` | `%s` |\n", o->key, o->value, def);
        else
            fprintf(f, "  %-28s %-19s %s\n", o->key, o->value, def);
    }
}

void og_srv_dev_help(FILE *f)
{
    fputs("\n"
          "Dev mode (--dev) sets these keys before reading --config FILE (a\n"
          "file's values win); listen is 127.0.0.1:8080 unless --listen:\n"
          "\n",
          f);
    og_srv_dev_overrides_print(f, false);
}

/* ===========================================================================
 * The sandbox provider beside the server (D4).
 * ========================================================================= */

char *og_srv_sandbox_path(void)
{
    char self[OG_PATH_MAX], *slash, *path;
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

    if (n <= 0)
        return NULL;
    self[n] = '\0';
    if (!(slash = strrchr(self, '/')))
        return NULL;
    slash[1] = '\0';
    if (!(path = malloc(strlen(self) + sizeof OG_SANDBOX_BIN)))
        return NULL;
    strcpy(path, self);
    strcat(path, OG_SANDBOX_BIN);
    if (access(path, X_OK) != 0) {
        free(path);
        return NULL;
    }
    return path;
}

/* In the child: becomes the sandbox, its stdout to out, its log (stderr)
 * to log — the server's stderr carries the server's own log only. Never
 * returns. */
static void dev_sandbox_exec(const char *path, const char *state, int out,
                             int log, pid_t parent)
{
    char *argv[] = {(char *)OG_SANDBOX_BIN, (char *)"--listen",
                    (char *)"127.0.0.1:0", (char *)"--state", (char *)state,
                    (char *)"--control", NULL};
    sigset_t none;
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

    /* The server blocks the signals it sigwaits for; a blocked mask and an
     * ignored SIGPIPE would survive exec and keep the sandbox from
     * draining on SIGTERM. */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    /* Dies with the server, even when the server is killed (D4). */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(127);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
        dup2(out, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0)
        _exit(127);
    if (path)
        execv(path, argv);
    else
        execvp(OG_SANDBOX_BIN, argv);
    fprintf(stderr, "oncegate: dev: cannot run %s: %s\n",
            path ? path : OG_SANDBOX_BIN, strerror(errno));
    _exit(127);
}

/* Reads the sandbox's ready line from fd into url (its base URL), within
 * DEV_SANDBOX_START_MS. 0, or -1 on EOF, timeout or a line not expected. */
static int dev_sandbox_ready(int fd, char *url, size_t urllen)
{
    char line[512];
    size_t used = 0;
    int waited = 0;

    while (used < sizeof line - 1 && waited < DEV_SANDBOX_START_MS) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;
        char *nl;
        int ready = poll(&p, 1, 100);

        if (ready < 0 && errno != EINTR)
            return -1;
        if (ready <= 0) {
            waited += 100;
            continue;
        }
        if ((r = read(fd, line + used, sizeof line - 1 - used)) <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        used += (size_t)r;
        line[used] = '\0';
        if (!(nl = strchr(line, '\n')))
            continue;
        *nl = '\0';
        if (strncmp(line, DEV_SANDBOX_READY, strlen(DEV_SANDBOX_READY)) != 0 ||
            (size_t)snprintf(url, urllen, "%s",
                             line + strlen(DEV_SANDBOX_READY)) >= urllen)
            return -1;
        return 0;
    }
    return -1;
}

int og_srv_dev_sandbox_start(og_srv_config *c, const char *dir,
                             og_srv_dev_sandbox *sb, char *err, size_t errlen)
{
    char state[OG_PATH_MAX], logpath[OG_PATH_MAX], *path, *url;
    pid_t parent = getpid(), pid;
    int p[2], status, log;

    memset(sb, 0, sizeof sb[0]);
    if (dev_path(state, dir, DEV_SANDBOX_STATE) != 0 ||
        dev_path(logpath, dir, DEV_SANDBOX_LOG) != 0)
        return dev_fail(err, errlen, OG_EINVAL, "%s: path too long", dir);
    log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log < 0)
        return dev_fail(err, errlen, OG_EKEY_IO, "%s: cannot open: %s",
                        logpath, strerror(errno));
    /* Close-on-exec, so no other child inherits the pipe; the sandbox
     * gets its end by dup2, which clears the flag. */
    if (pipe(p) != 0) {
        int e = errno;

        close(log);
        return dev_fail(err, errlen, OG_EINTERNAL, "pipe: %s", strerror(e));
    }
    if (fcntl(p[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(p[1], F_SETFD, FD_CLOEXEC) != 0) {
        int e = errno;

        close(p[0]);
        close(p[1]);
        close(log);
        return dev_fail(err, errlen, OG_EINTERNAL, "pipe: %s", strerror(e));
    }
    path = og_srv_sandbox_path();
    fflush(NULL); /* nothing buffered is written twice */
    if ((pid = fork()) < 0) {
        int e = errno;

        close(p[0]);
        close(p[1]);
        close(log);
        free(path);
        return dev_fail(err, errlen, OG_EINTERNAL, "fork: %s", strerror(e));
    }
    if (pid == 0)
        dev_sandbox_exec(path, state, p[1], log, parent);
    free(path);
    close(p[1]);
    close(log);
    if (dev_sandbox_ready(p[0], sb->url, sizeof sb->url) != 0) {
        close(p[0]);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return dev_fail(err, errlen, OG_EPROVIDER_UNAVAILABLE,
                        "%s did not start (its log: %s); give a provider "
                        "with --provider URL, or put " OG_SANDBOX_BIN
                        " beside oncegate or in PATH",
                        OG_SANDBOX_BIN, logpath);
    }
    /* Nothing more is read: the sandbox writes only its ready line to
     * stdout (and ignores SIGPIPE should it ever write again). */
    close(p[0]);
    sb->pid = pid;
    snprintf(sb->state, sizeof sb->state, "%s", state);
    if (!(url = strdup(sb->url))) {
        og_srv_dev_sandbox_stop(sb);
        return dev_fail(err, errlen, OG_ENOMEM, "out of memory");
    }
    free(c->provider_url);
    c->provider_url = url;
    return 0;
}

void og_srv_dev_sandbox_stop(og_srv_dev_sandbox *sb)
{
    int status;

    if (!sb || sb->pid <= 0)
        return;
    kill(sb->pid, SIGTERM);
    for (int waited = 0; waited < DEV_SANDBOX_STOP_MS; waited += 50) {
        pid_t r = waitpid(sb->pid, &status, WNOHANG);

        if (r == sb->pid || (r < 0 && errno != EINTR)) {
            sb->pid = 0;
            return;
        }
        usleep(50 * 1000);
    }
    kill(sb->pid, SIGKILL);
    waitpid(sb->pid, &status, 0);
    sb->pid = 0;
}

/* ===========================================================================
 * The banner and dev-env.
 * ========================================================================= */

/* A role's name as a shell variable's part: upper case, '-' as '_'
 * ("payout-admin" is PAYOUT_ADMIN, exported as OG_PAYOUT_ADMIN_KEY).
 * Writes it NUL-terminated into name (cut to len - 1); its length. */
static size_t dev_env_shell_name(unsigned role_bit, char *name, size_t len)
{
    size_t n = 0;

    for (const char *r = og_role_name(role_bit); *r && n + 1 < len; r++)
        name[n++] = *r >= 'a' && *r <= 'z' ? (char)(*r - 'a' + 'A')
                    : *r == '-'            ? '_'
                                           : *r;
    name[n] = '\0';
    return n;
}

/* 1 when s needs no quoting in a POSIX shell. */
static int dev_sh_safe(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789_@%+=:,./-",
                    *s))
            return 0;
    return 1;
}

/* Writes s to f in single quotes, each ' as '\''. */
static void dev_sh_quote_always(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

/* Writes s to f as one shell word, quoted only when it must be. */
static void dev_sh_word(FILE *f, const char *s)
{
    if (dev_sh_safe(s))
        fputs(s, f);
    else
        dev_sh_quote_always(f, s);
}

/* Writes s as the inside of a JSON string that itself sits inside a
 * single-quoted shell word: '"' and '\\' JSON-escaped, '\'' shell-escaped. */
static void dev_sh_json(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
}

const char *og_srv_dev_principal_id(const og_srv_config *c, unsigned role,
                                    const char *fallback)
{
    for (size_t i = 0; c && i < c->n_principals; i++)
        if (c->principals[i].roles == role)
            return c->principals[i].id;
    return fallback;
}

#define DEV_PARAMS                                                             \
    "\"params\": {\"account\": \"A-1187\", \"amount\": \"250.00\", "          \
    "\"currency\": \"USD\"}"

/* Writes one `curl` presenting $TOKEN with operation id $var (step 2/3). */
static void dev_banner_present(FILE *f, const char *url, const char *g,
                               const char *var)
{
    fputs("  curl -sS", f);
    fputs(g, f);
    fputs(" -w '\\n%{http_code}\\n' -X POST ", f);
    dev_sh_word(f, url);
    fprintf(f,
            "/v1/operations \\\n"
            "    -H 'Content-Type: application/json' "
            "-H \"Authorization: Bearer $OG_AGENT_KEY\" \\\n"
            "    -d '{\"operation_id\": \"'\"$%s\"'\", \"token\": "
            "\"'\"$TOKEN\"'\", " DEV_PARAMS "}'\n",
            var);
}

/* Writes the `curl` that issues a grant to the agent into $TOKEN. */
static void dev_banner_issue(FILE *f, const og_srv_config *c, const char *url,
                             const char *g)
{
    fprintf(f, "  TOKEN=$(curl -sS%s -X POST ", g);
    dev_sh_word(f, url);
    fputs("/v1/grants \\\n"
          "    -H 'Content-Type: application/json' "
          "-H \"Authorization: Bearer $OG_ISSUER_KEY\" \\\n"
          "    -d '{\"subject\": \"",
          f);
    dev_sh_json(f, og_srv_dev_principal_id(c, OG_ROLE_AGENT, "dev-agent"));
    fputs("\", \"action\": \"credit.apply\", " DEV_PARAMS
          ", \"ttl_seconds\": 900, \"family\": \"fam-1\"}' \\\n"
          "    | sed -E 's/.*\"token\": ?\"([^\"]+)\".*/\\1/')\n",
          f);
}

/* Writes the `curl` that reads operation $OP as its caller. */
static void dev_banner_read(FILE *f, const char *url, const char *g)
{
    fprintf(f, "  curl -sS%s -w '\\n%%{http_code}\\n' ", g);
    dev_sh_word(f, url);
    fputs("/v1/operations/\"$OP\" \\\n"
          "    -H \"Authorization: Bearer $OG_AGENT_KEY\"\n",
          f);
}

/* Writes step 5: the sandbox drops its next answer after making the
 * credit; the presentation is pending until recovery finds the credit. */
static void dev_banner_lost_answer(FILE *f, const og_srv_config *c,
                                   const char *url, const char *g,
                                   const og_srv_dev_sandbox *sb)
{
    fputs("  # 5. the provider makes the next credit but its answer is lost: "
          "202, pending;\n"
          "  #    recovery finds the credit within seconds, and the read "
          "says succeeded\n",
          f);
    fprintf(f, "  curl -sS%s -X POST ", g);
    dev_sh_word(f, sb->url);
    fputs("/_control/faults -w '\\n' \\\n"
          "    -H 'Content-Type: application/json' \\\n"
          "    -d '{\"fault\": \"drop_response_after_effect\", "
          "\"count\": 1}'\n",
          f);
    dev_banner_issue(f, c, url, g);
    fputs("  OP=$(cat /proc/sys/kernel/random/uuid)\n", f);
    dev_banner_present(f, url, g, "OP");
    fputs("  sleep 10\n", f);
    dev_banner_read(f, url, g);
}

/* Writes the ready-to-paste steps: issue, present, replay, read, and with
 * a sandbox started here, a lost answer. */
static void dev_banner_steps(FILE *f, const og_srv_config *c, const char *url,
                             const og_srv_dev_sandbox *sb)
{
    const char *g = strchr(url, '[') ? " -g" : ""; /* IPv6: no URL globbing */

    fprintf(f, "  # 1. issue a grant to %s (as the issuer); the token goes to "
               "$TOKEN\n",
            og_srv_dev_principal_id(c, OG_ROLE_AGENT, "dev-agent"));
    dev_banner_issue(f, c, url, g);
    fputs(c && c->provider_url
              ? "  # 2. present it with a fresh operation id: 200, applied "
                "(the provider made the credit)\n"
              : "  # 2. present it with a fresh operation id: 202, admitted\n",
          f);
    fputs("  OP=$(cat /proc/sys/kernel/random/uuid)\n", f);
    dev_banner_present(f, url, g, "OP");
    fputs("  # 3. replay it with another operation id: 409, "
          "grant_not_available\n"
          "  OP2=$(cat /proc/sys/kernel/random/uuid)\n",
          f);
    dev_banner_present(f, url, g, "OP2");
    fputs("  # 4. read the operation: 200, with its status\n", f);
    dev_banner_read(f, url, g);
    if (sb && sb->pid > 0)
        dev_banner_lost_answer(f, c, url, g, sb);
}

void og_srv_dev_banner(FILE *f, const og_srv_config *c, const char *dir,
                       const char *url, const char *argv0,
                       const og_srv_dev_sandbox *sb)
{
    char *abs = realpath(dir, NULL); /* the eval line works from any cwd */
    const char *shown = abs ? abs : dir;

    fprintf(f,
            "oncegate: development mode - NOT FOR PRODUCTION (API keys in a "
            "plain file, plain HTTP, issuer and audience %s)\n"
            "  url          %s\n"
            "  console      %s/console (sign in with the operator's key: "
            "OG_OPERATOR_KEY below)\n"
            "  data dir     %s\n"
            "  credentials  %s/" OG_DEV_CREDENTIALS
            " (mode 0600; API keys are never printed)\n",
            c && c->issuer ? c->issuer : OG_DEV_ISSUER, url, url, shown,
            shown);
    if (sb && sb->pid > 0)
        fprintf(f, "  provider     %s: " OG_SANDBOX_BIN ", started beside "
                   "this instance (state and log %s/" DEV_SANDBOX_STATE
                   ", " DEV_SANDBOX_LOG ";\n"
                   "               faults and counters at /_control, see "
                   "docs/sandbox.md)\n",
                sb->url, shown);
    else if (c && c->provider_url)
        fprintf(f, "  provider     %s\n", c->provider_url);
    else
        fputs("  provider     none: operations are admitted, not executed\n",
              f);
    /* The variables dev-env exports, named from the same role table
     * (dev_env_shell_name), so a new role cannot be left out here. */
    fputs("\nLoad the API keys into your shell as", f);
    for (int i = 0, col = 35; i < OG_ROLE_COUNT; i++) {
        char name[32];
        int w;

        dev_env_shell_name(1u << i, name, sizeof name);
        w = (int)strlen(name) + 9 + (i == OG_ROLE_COUNT - 1 ? 4 : 1);
        if (col + w > 78) {
            fputc('\n', f);
            col = 0;
        } else {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%sOG_%s_KEY%s", i == OG_ROLE_COUNT - 1 ? "and " : "",
                name, i == OG_ROLE_COUNT - 1 ? ":" : ",");
        col += w;
    }
    fputs("\n\n  eval \"$(", f);
    dev_sh_word(f, argv0 && argv0[0] ? argv0 : "oncegate");
    fputs(" dev-env --data-dir ", f);
    dev_sh_word(f, shown);
    fputs(")\"\n"
          "\n"
          "Then, in the same shell, paste in order:\n"
          "\n",
          f);
    dev_banner_steps(f, c, url, sb);
    if (sb && sb->pid > 0) /* the payout path needs the sandbox's faults */
        og_srv_dev_banner_payouts(f, c, url, sb->url);
    fflush(f);
    free(abs);
}

static const char dev_env_usage[] =
    "usage: oncegate dev-env [--data-dir DIR]\n"
    "\n"
    "Prints `export OG_<ROLE>_KEY='...'` lines with the API keys of a\n"
    "development server (`oncegate serve --dev`), read from\n"
    "DIR/" OG_DEV_CREDENTIALS " (default DIR: " DEV_DEFAULT_DIR "), for:\n"
    "\n"
    "  eval \"$(oncegate dev-env --data-dir DIR)\"\n";

/* Parses dev-env's arguments into *dir. Returns -1 to go on, or the exit
 * code when --help was answered or the usage is wrong. */
static int dev_env_args(int argc, char **argv, const char **dir)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(dev_env_usage, stdout);
            return OG_EXIT_OK;
        } else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) {
            *dir = argv[++i];
        } else if (!strncmp(argv[i], "--data-dir=", 11)) {
            *dir = argv[i] + 11;
        } else {
            fprintf(stderr, "oncegate dev-env: %s: %s\n\n", argv[i],
                    strcmp(argv[i], "--data-dir") == 0 ? "needs a directory"
                                                       : "unknown argument");
            fputs(dev_env_usage, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (!(*dir)[0]) {
        fputs("oncegate dev-env: --data-dir: empty\n\n", stderr);
        fputs(dev_env_usage, stderr);
        return OG_EXIT_USAGE;
    }
    return -1;
}

/* Appends the text of n bytes at s to buf (len bytes, *used so far).
 * 0, or -1 when it does not fit. */
static int dev_append(char *buf, size_t len, size_t *used, const char *s,
                      size_t n)
{
    if (n >= len - *used)
        return -1;
    memcpy(buf + *used, s, n);
    *used += n;
    buf[*used] = '\0';
    return 0;
}

/* Renders `export OG_<ROLE>_KEY='KEY'` lines for *cr into buf (len bytes)
 * and returns their length, or -1 when they do not fit. */
static ssize_t dev_env_render(const dev_creds *cr, char *buf, size_t len)
{
    size_t used = 0;

    for (int i = 0; i < OG_ROLE_COUNT; i++) {
        char name[32];
        size_t n = dev_env_shell_name(1u << i, name, sizeof name);

        if (dev_append(buf, len, &used, "export OG_", 10) ||
            dev_append(buf, len, &used, name, n) ||
            dev_append(buf, len, &used, "_KEY='", 6))
            return -1;
        for (const char *k = cr->key[i]; *k; k++) /* ' closes, \' adds one */
            if (*k == '\'' ? dev_append(buf, len, &used, "'\\''", 4)
                           : dev_append(buf, len, &used, k, 1))
                return -1;
        if (dev_append(buf, len, &used, "'\n", 2))
            return -1;
    }
    return (ssize_t)used;
}

/* Reads DIR's credentials and writes the export lines to fd 1 with one
 * write, so the keys pass through no stdio buffer and the one buffer that
 * held them is wiped (D1). Returns the exit code. */
static int dev_env_print(const char *dir)
{
    char path[OG_PATH_MAX], err[512] = "";
    char out[OG_ROLE_COUNT * (4 * OG_API_KEY_MAX + 64)];
    dev_creds cr;
    unsigned seen = 0;
    ssize_t n;
    int rc;

    if (dev_path(path, dir, OG_DEV_CREDENTIALS) != 0) {
        fprintf(stderr, "oncegate dev-env: %s: path too long\n", dir);
        return OG_EXIT_USAGE;
    }
    memset(&cr, 0, sizeof cr);
    if ((rc = dev_creds_read(path, &cr, &seen, err, sizeof err)) <= 0 ||
        seen != (1u << OG_ROLE_COUNT) - 1) {
        sodium_memzero(&cr, sizeof cr); /* a failed parse may fill part */
        if (rc > 0)
            fprintf(stderr,
                    "oncegate dev-env: %s: a role is missing; start "
                    "`oncegate serve --dev --data-dir %s` once to add it\n",
                    path, dir);
        else if (rc == 0)
            fprintf(stderr,
                    "oncegate dev-env: %s: not found; start `oncegate serve "
                    "--dev --data-dir %s` first\n",
                    path, dir);
        else /* err starts "dev: "; this command names itself */
            fprintf(stderr, "oncegate dev-env: %s\n",
                    strncmp(err, "dev: ", 5) == 0 ? err + 5 : err);
        return OG_EXIT_CONFIG;
    }
    n = dev_env_render(&cr, out, sizeof out);
    sodium_memzero(&cr, sizeof cr);
    fflush(stdout);
    rc = n < 0 ? OG_EXIT_INTERNAL
         : dev_write_all(1, out, (size_t)n) != 0 ? OG_EXIT_IOERR
                                                 : OG_EXIT_OK;
    sodium_memzero(out, sizeof out);
    if (rc != OG_EXIT_OK)
        fprintf(stderr, "oncegate dev-env: cannot write the export lines\n");
    return rc;
}

int og_cli_dev_env(int argc, char **argv)
{
    const char *dir = DEV_DEFAULT_DIR;
    int rc = dev_env_args(argc, argv, &dir);

    return rc >= 0 ? rc : dev_env_print(dir);
}
