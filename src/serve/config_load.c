/*
 * config_load.c — loading the configuration of `oncegate serve`: the JSON
 * loader driven by the table (config.c, config_table.h), one setter per
 * type, and the checks across keys.
 *
 * Why JSON: the service already parses JSON with jansson for tokens and its
 * API, so the configuration needs no second parser. Why strict: an unknown or
 * duplicated key is refused, because a typo that silently keeps a default
 * (a 60 s lease where 6 s was meant) is worse than a server that refuses to
 * start and names the key.
 *
 * Invariants:
 *   CF1 Every value a loaded configuration holds passed its row's setter,
 *       and og_srv_config_check re-checks every row's bounds, so values set
 *       by flags or dev mode are held to the same rules as the file's.
 *   CF2 Defaults are JSON text in the table and go through the same setters
 *       as the file (the timings' come from og_timings_default(), the one
 *       place the library keeps them).
 *   CF3 Every error is ONE line naming the key ("principals[2].roles") or
 *       the timing relation ("T4: ..."), never a value that could be secret.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oncegate/payout_store.h"

#include <sodium.h>

#include "config_table.h"

#define CFG_FILE_MAX (4 * 1024 * 1024) /* a config file: 4096 principals
                                          fit many times over */
#define CFG_HEX_LEN (2 * OG_API_KEY_HASH_LEN)

/* ===========================================================================
 * Small helpers.
 * ========================================================================= */

int og_srv_vfail(char *err, size_t errlen, int rc, const char *prefix,
                 const char *fmt, va_list ap)
{
    int n;

    if (!err || errlen == 0)
        return rc;
    n = snprintf(err, errlen, "%s: ", prefix);
    if (n < 0 || (size_t)n >= errlen)
        return rc;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    return rc;
}

int og_srv_fail(char *err, size_t errlen, int rc, const char *prefix,
                const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = og_srv_vfail(err, errlen, rc, prefix, fmt, ap);
    va_end(ap);
    return rc;
}

/* Writes one "config: ..." line to err and returns rc, so a failure is one
 * statement. */
__attribute__((format(printf, 4, 5))) static int
cfg_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    rc = og_srv_vfail(err, errlen, rc, "config", fmt, ap);
    va_end(ap);
    return rc;
}

/* Copies untrusted text into buf for an error line: at most 64 characters,
 * non-printable bytes and quotes as '?', so a hostile key name cannot break
 * the one-line rule or forge a second message. Returns buf. */
static const char *cfg_show(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s && *s && i + 4 < len && i < 64; s++)
        buf[i++] = (*s > 0x20 && *s < 0x7f && *s != '"') ? *s : '?';
    if (s && *s && i + 4 <= len) {
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = '\0';
    return buf;
}

/* 1 when s has no control characters (they would break log lines and
 * error messages); else 0. */
static int cfg_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

/* The row named name, or NULL. */
static const og_srv_cfg_key *cfg_find(const char *name)
{
    for (size_t i = 0; i < og_srv_cfg_n_keys; i++)
        if (strcmp(og_srv_cfg_keys[i].name, name) == 0)
            return &og_srv_cfg_keys[i];
    return NULL;
}

/* Edit distance between a and b, capped at 3 (all a suggestion needs). */
static int cfg_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[OG_CFG_NAME_MAX + 1];

    if (la > OG_CFG_NAME_MAX || lb > OG_CFG_NAME_MAX ||
        (la > lb ? la - lb : lb - la) > 2)
        return 3;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

/* The known key name probably meant (a unit left off, or at most two
 * edits away), or NULL: a typo is refused, and the refusal says what was
 * probably meant. */
static const char *cfg_suggest(const char *name)
{
    const char *best = NULL;
    int bd = 3;

    for (size_t i = 0; i < og_srv_cfg_n_keys; i++) {
        const char *k = og_srv_cfg_keys[i].name;
        size_t n = strlen(name);
        int d = strncmp(k, name, n) == 0 && strcmp(k + n, "_ms") == 0
                    ? 0
                    : cfg_distance(name, k);
        if (d < bd) {
            bd = d;
            best = k;
        }
    }
    return best;
}

/* The error for an unknown key (full dotted name). Returns OG_EINVAL. */
static int cfg_unknown(const char *name, char *err, size_t errlen)
{
    char shown[80];
    const char *s = cfg_suggest(name);

    cfg_show(name, shown, sizeof shown);
    if (s)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "unknown key \"%s\" (did you mean \"%s\"?)", shown, s);
    return cfg_fail(err, errlen, OG_EINVAL, "unknown key \"%s\"", shown);
}

/* A pointer to row k's landing place in c. */
static void *cfg_at(const og_srv_cfg_key *k, og_srv_config *c)
{
    return (char *)c + k->off;
}

/* ===========================================================================
 * Listen addresses.
 * ========================================================================= */

/* Parses "HOST:PORT" / "[IPV6]:PORT" into host (hostlen bytes) and *port.
 * 0 or -1; nothing written on failure. */
static int cfg_parse_listen(const char *s, char *host, size_t hostlen,
                            int *port)
{
    char h[INET6_ADDRSTRLEN + 1];
    unsigned char addr[sizeof(struct in6_addr)];
    const char *start, *end, *p;
    long v = 0;
    int v6;

    if (!s)
        return -1;
    v6 = s[0] == '[';
    start = s + v6;
    end = v6 ? strchr(s, ']') : strrchr(s, ':');
    if (!end || (v6 && end[1] != ':'))
        return -1;
    p = v6 ? end + 2 : end + 1; /* the port */
    if (end == start || (size_t)(end - start) >= sizeof h ||
        (size_t)(end - start) >= hostlen)
        return -1;
    memcpy(h, start, (size_t)(end - start));
    h[end - start] = '\0';
    /* Literals only: a name would be resolved at bind time, and the
     * address a service listens on should not depend on DNS. */
    if (inet_pton(v6 ? AF_INET6 : AF_INET, h, addr) != 1)
        return -1;
    if (!*p || strlen(p) > 5)
        return -1;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return -1;
        v = v * 10 + (*q - '0');
    }
    if (v > 65535)
        return -1;
    memcpy(host, h, strlen(h) + 1);
    *port = (int)v;
    return 0;
}

int og_srv_config_set_listen(og_srv_config *c, const char *hostport)
{
    if (!c)
        return OG_EINVAL;
    return cfg_parse_listen(hostport, c->listen_host, sizeof c->listen_host,
                            &c->listen_port) == 0
               ? 0
               : OG_EINVAL;
}

/* ===========================================================================
 * Principals.
 * ========================================================================= */

/* Decodes 64 lower-case hex characters into out. 0 or -1: upper case is
 * refused so that one key has exactly one spelling, and duplicates cannot
 * hide behind case. */
static int cfg_hex32(const char *s, unsigned char out[OG_API_KEY_HASH_LEN])
{
    unsigned char tmp[OG_API_KEY_HASH_LEN];

    if (strlen(s) != CFG_HEX_LEN)
        return -1;
    for (size_t i = 0; i < CFG_HEX_LEN; i++) {
        char ch = s[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                         : -1;
        if (v < 0)
            return -1;
        if (i % 2 == 0)
            tmp[i / 2] = (unsigned char)(v << 4);
        else
            tmp[i / 2] |= (unsigned char)v;
    }
    memcpy(out, tmp, sizeof tmp);
    return 0;
}

/* Parses principals[i].roles into *roles. 0 or OG_EINVAL with err. */
static int cfg_roles(json_t *v, size_t i, unsigned *roles, char *err,
                     size_t errlen)
{
    unsigned acc = 0;
    size_t j;
    json_t *r;
    char shown[80];

    if (!json_is_array(v) || json_array_size(v) == 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].roles: must be a non-empty array of "
                        "role names (issuer, agent, enforcer, revoker, "
                        "operator)",
                        i);
    json_array_foreach(v, j, r) {
        unsigned bit = json_is_string(r) ? og_role_parse(json_string_value(r))
                                         : 0;
        if (!json_is_string(r))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles[%zu]: must be a string", i,
                            j);
        if (bit == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles: unknown role \"%s\"", i,
                            cfg_show(json_string_value(r), shown,
                                     sizeof shown));
        if (acc & bit)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].roles: duplicate role \"%s\"", i,
                            og_role_name(bit));
        acc |= bit;
    }
    *roles = acc;
    return 0;
}

/* Parses principals[i] (an object) into *p. 0 or OG_EINVAL with err. */
static int cfg_principal(json_t *o, size_t i, og_principal *p, char *err,
                         size_t errlen)
{
    static const char *const members[] = {"id", "roles", "api_key_sha256"};
    const char *key;
    json_t *v, *id, *hash;
    char shown[80];
    int rc;

    if (!json_is_object(o))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu]: must be an object {\"id\", "
                        "\"roles\", \"api_key_sha256\"}",
                        i);
    json_object_foreach(o, key, v) {
        if (strcmp(key, "id") && strcmp(key, "roles") &&
            strcmp(key, "api_key_sha256") &&
            strcmp(key, "approval_limit_minor"))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu]: unknown key \"%s\"", i,
                            cfg_show(key, shown, sizeof shown));
    }
    for (size_t m = 0; m < sizeof members / sizeof members[0]; m++)
        if (!json_object_get(o, members[m]))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu]: missing \"%s\"", i, members[m]);
    id = json_object_get(o, "id");
    if (!json_is_string(id) || !og_id_valid(json_string_value(id)))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].id: must be 1-128 printable ASCII "
                        "characters without spaces",
                        i);
    if ((rc = cfg_roles(json_object_get(o, "roles"), i, &p->roles, err,
                        errlen)) != 0)
        return rc;
    hash = json_object_get(o, "api_key_sha256");
    if (!json_is_string(hash) ||
        cfg_hex32(json_string_value(hash), p->key_hash) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].api_key_sha256: must be 64 "
                        "lower-case hex characters (the SHA-256 of the API "
                        "key)",
                        i);
    v = json_object_get(o, "approval_limit_minor");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
              json_integer_value(v) > OG_PAYOUT_LIMIT_MAX))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals[%zu].approval_limit_minor: must be an "
                        "integer 0 ... 999999999999999999",
                        i);
    p->approval_limit_minor = v ? (int64_t)json_integer_value(v) : 0;
    memcpy(p->id, json_string_value(id), strlen(json_string_value(id)) + 1);
    return 0;
}

/* Refuses a principal whose id or key hash repeats an earlier one: two
 * principals with one key would make the lookup's answer depend on order.
 * 0 or OG_EINVAL with err. */
static int cfg_principal_unique(const og_principal *ps, size_t i, char *err,
                                size_t errlen)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(ps[j].id, ps[i].id) == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].id: duplicate id \"%s\" (also "
                            "principals[%zu])",
                            i, ps[i].id, j);
        if (memcmp(ps[j].key_hash, ps[i].key_hash, OG_API_KEY_HASH_LEN) == 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals[%zu].api_key_sha256: duplicate key "
                            "hash (also principals[%zu])",
                            i, j);
    }
    return 0;
}

/* Parses the principals array into *out / *n (malloc'd, NULL when empty;
 * written only on success). 0, OG_EINVAL or OG_ENOMEM with err. */
static int cfg_principals(json_t *arr, og_principal **out, size_t *n,
                          char *err, size_t errlen)
{
    og_principal *ps = NULL;
    size_t count, i;
    json_t *o;
    int rc = 0;

    if (!json_is_array(arr))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals: must be an array of objects");
    count = json_array_size(arr);
    if (count > OG_CFG_PRINCIPALS_MAX)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "principals: at most %d principals",
                        OG_CFG_PRINCIPALS_MAX);
    if (count && !(ps = calloc(count, sizeof *ps)))
        return cfg_fail(err, errlen, OG_ENOMEM, "principals: out of memory");
    json_array_foreach(arr, i, o) {
        if ((rc = cfg_principal(o, i, &ps[i], err, errlen)) != 0 ||
            (rc = cfg_principal_unique(ps, i, err, errlen)) != 0)
            break;
    }
    if (rc != 0) {
        free(ps);
        return rc;
    }
    *out = ps;
    *n = count;
    return 0;
}

/* ===========================================================================
 * Setters: one per type, each validating before it writes (CF1).
 * ========================================================================= */

/* Checks s against string row k (OG_CFG_STRING, OG_CFG_PATH_OPT, OG_CFG_ID,
 * OG_CFG_ISSUER): the one rule the setter and og_srv_config_check share. 0 or
 * OG_EINVAL with err. */
static int cfg_string_ok(const og_srv_cfg_key *k, const char *s, char *err,
                         size_t errlen)
{
    size_t len = strlen(s);

    if (k->type == OG_CFG_ID && !og_id_valid(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be 1-128 printable ASCII characters "
                        "without spaces",
                        k->name);
    if (k->type == OG_CFG_ISSUER && !og_issuer_file_valid(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be 1-128 characters of [A-Za-z0-9._~-], "
                        "not starting with '.' (it names key files)",
                        k->name);
    if ((int64_t)len < k->min || (int64_t)len > k->max || !cfg_printable(s))
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be %" PRId64 " to %" PRId64
                        " bytes without control characters",
                        k->name, k->min, k->max);
    return 0;
}

/* The error for a value enum row k does not name. Returns OG_EINVAL. */
static int cfg_enum_fail(const og_srv_cfg_key *k, char *err, size_t errlen)
{
    char list[128];

    return cfg_fail(err, errlen, OG_EINVAL, "%s: must be %s", k->name,
                    og_srv_cfg_enum_list(k, '"', list, sizeof list));
}

/* Sets a string row; OG_CFG_PATH_OPT's "" lands as NULL. */
static int cfg_set_string(const og_srv_cfg_key *k, json_t *v, og_srv_config *c,
                          char *err, size_t errlen)
{
    char **slot = cfg_at(k, c);
    char *copy = NULL;
    int rc;

    if (!json_is_string(v))
        return cfg_fail(err, errlen, OG_EINVAL, "%s: must be a string",
                        k->name);
    if ((rc = cfg_string_ok(k, json_string_value(v), err, errlen)) != 0)
        return rc;
    if (json_string_length(v) > 0 && !(copy = strdup(json_string_value(v))))
        return cfg_fail(err, errlen, OG_ENOMEM, "%s: out of memory", k->name);
    free(*slot);
    *slot = copy;
    return 0;
}

/* Sets a number row (OG_CFG_INT, OG_CFG_SIZE, OG_CFG_MS). */
static int cfg_set_number(const og_srv_cfg_key *k, json_t *v, og_srv_config *c,
                          char *err, size_t errlen)
{
    json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;

    if (!json_is_integer(v) || x < k->min || x > k->max)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be an integer between %" PRId64
                        " and %" PRId64,
                        k->name, k->min, k->max);
    if (k->type == OG_CFG_INT)
        *(int *)cfg_at(k, c) = (int)x;
    else if (k->type == OG_CFG_SIZE)
        *(size_t *)cfg_at(k, c) = (size_t)x;
    else
        *(int64_t *)cfg_at(k, c) = (int64_t)x * 1000;
    return 0;
}

/* Sets the principals row: the new list replaces the old one whole. */
static int cfg_set_principals(json_t *v, og_srv_config *c, char *err,
                              size_t errlen)
{
    og_principal *ps = NULL;
    size_t n = 0;
    int rc = cfg_principals(v, &ps, &n, err, errlen);

    if (rc != 0)
        return rc;
    if (c->principals)
        sodium_memzero(c->principals, c->n_principals * sizeof *c->principals);
    free(c->principals);
    c->principals = ps;
    c->n_principals = n;
    return 0;
}

/* Validates v for row k and writes it into c. 0, OG_EINVAL or OG_ENOMEM
 * with err. */
static int cfg_set(const og_srv_cfg_key *k, json_t *v, og_srv_config *c,
                   char *err, size_t errlen)
{
    switch (k->type) {
    case OG_CFG_STRING:
    case OG_CFG_PATH_OPT:
    case OG_CFG_ID:
    case OG_CFG_ISSUER:
        return cfg_set_string(k, v, c, err, errlen);
    case OG_CFG_INT:
    case OG_CFG_SIZE:
    case OG_CFG_MS:
        return cfg_set_number(k, v, c, err, errlen);
    case OG_CFG_LISTEN:
        if (!json_is_string(v) ||
            og_srv_config_set_listen(c, json_string_value(v)) != 0)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be \"HOST:PORT\" or \"[IPV6]:PORT\" "
                            "with an IP address literal and a port between "
                            "0 and 65535",
                            k->name);
        return 0;
    case OG_CFG_ENUM:
        for (int i = 0; json_is_string(v) && og_srv_cfg_names(k)[i]; i++)
            if (strcmp(json_string_value(v), og_srv_cfg_names(k)[i]) == 0) {
                *(int *)cfg_at(k, c) = i;
                return 0;
            }
        return cfg_enum_fail(k, err, errlen);
    case OG_CFG_BOOL:
        if (!json_is_boolean(v))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be true or false", k->name);
        *(bool *)cfg_at(k, c) = json_is_true(v);
        return 0;
    case OG_CFG_PRINCIPALS:
        return cfg_set_principals(v, c, err, errlen);
    case OG_CFG_OBJECT:
        break;
    }
    return cfg_fail(err, errlen, OG_EINVAL, "%s: must be an object", k->name);
}

int og_srv_config_set(og_srv_config *c, const char *name, const char *json,
                      char *err, size_t errlen)
{
    const og_srv_cfg_key *k = name ? cfg_find(name) : NULL;
    json_t *v;
    int rc;

    if (!k || k->type == OG_CFG_OBJECT)
        return cfg_unknown(name ? name : "(none)", err, errlen);
    if (!json || !(v = json_loads(json, JSON_DECODE_ANY, NULL)))
        return cfg_fail(err, errlen, OG_EINVAL, "%s: not a JSON value",
                        k->name);
    rc = cfg_set(k, v, c, err, errlen);
    json_decref(v);
    return rc;
}

/* Applies every member of obj, whose rows are named prefix + member, to c.
 * Unknown members are refused; object rows recurse. 0 or an error. */
static int cfg_apply(json_t *obj, const char *prefix, og_srv_config *c,
                     char *err, size_t errlen)
{
    const char *member;
    json_t *v;
    int rc;

    json_object_foreach(obj, member, v) {
        char name[OG_CFG_NAME_MAX + 1];
        const og_srv_cfg_key *k = NULL;
        int n = snprintf(name, sizeof name, "%s%s", prefix, member);

        /* A member never contains '.': "timings.x" is reached only through
         * the timings object, so each value has one spelling. */
        if (n >= 0 && (size_t)n < sizeof name && !strchr(member, '.'))
            k = cfg_find(name);
        if (!k)
            return cfg_unknown(n >= 0 && (size_t)n < sizeof name ? name
                                                                 : member,
                               err, errlen);
        if (k->type == OG_CFG_OBJECT) {
            char sub[OG_CFG_NAME_MAX + 1];
            if (!json_is_object(v))
                return cfg_fail(err, errlen, OG_EINVAL,
                                "%s: must be an object", k->name);
            snprintf(sub, sizeof sub, "%s.", k->name);
            rc = cfg_apply(v, sub, c, err, errlen);
        } else {
            rc = cfg_set(k, v, c, err, errlen);
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ===========================================================================
 * Reading the file.
 * ========================================================================= */

/* Reads the whole file at path (at most CFG_FILE_MAX bytes) into a
 * malloc'd, NUL-terminated *buf. 0 or OG_EKEY_IO / OG_ENOMEM with err. */
static int cfg_read(const char *path, char **buf, size_t *len, char *err,
                    size_t errlen)
{
    struct stat st;
    size_t got = 0;
    char *b = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

    if (fd < 0)
        return cfg_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s", path,
                        strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: not a regular file", path);
        goto out;
    }
    if (st.st_size > CFG_FILE_MAX) {
        rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: larger than %d bytes",
                      path, CFG_FILE_MAX);
        goto out;
    }
    if (!(b = malloc((size_t)st.st_size + 1))) {
        rc = cfg_fail(err, errlen, OG_ENOMEM, "%s: out of memory", path);
        goto out;
    }
    /* Read up to the size fstat saw: a file growing meanwhile is cut
     * there, and JSON parsing then refuses the truncated text. */
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = cfg_fail(err, errlen, OG_EKEY_IO, "%s: cannot read: %s",
                          path, r < 0 ? strerror(errno) : "file shrank");
            goto out;
        }
        got += (size_t)r;
    }
    b[got] = '\0';
    *buf = b;
    *len = got;
    b = NULL;
out:
    free(b);
    close(fd);
    return rc;
}

/* Parses the file at path into a new JSON object *root. Duplicate members
 * are refused by the parser itself (JSON_REJECT_DUPLICATES), at any depth.
 * 0; OG_EKEY_IO (unreadable, not JSON); OG_EINVAL (a duplicate key, or not
 * an object); OG_ENOMEM. */
static int cfg_parse_file(const char *path, json_t **root, char *err,
                          size_t errlen)
{
    json_error_t je;
    char *text = NULL, shown[80];
    size_t len = 0;
    json_t *j;
    int rc = cfg_read(path, &text, &len, err, errlen);

    if (rc != 0)
        return rc;
    j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!j && json_error_code(&je) == json_error_duplicate_key) {
        /* jansson says: duplicate object key near '"KEY"' */
        char key[sizeof je.text] = "?";
        const char *near = strstr(je.text, "near '\"");
        const char *end = near ? strrchr(je.text, '"') : NULL;

        if (near && end > near + 7) {
            memcpy(key, near + 7, (size_t)(end - near - 7));
            key[end - near - 7] = '\0';
        }
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: line %d, column %d: duplicate key \"%s\" (each "
                        "key may appear once)",
                        path, je.line, je.column,
                        cfg_show(key, shown, sizeof shown));
    }
    if (!j)
        return cfg_fail(err, errlen, OG_EKEY_IO,
                        "%s: not JSON: line %d, column %d: %s", path, je.line,
                        je.column, je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must hold one JSON object", path);
    }
    *root = j;
    return 0;
}

/* ===========================================================================
 * The public functions.
 * ========================================================================= */

int og_srv_config_defaults(og_srv_config *c)
{
    char err[256];
    int rc;

    memset(c, 0, sizeof *c);
    og_timings_default(&c->timings);
    for (size_t i = 0; i < og_srv_cfg_n_keys; i++) {
        const og_srv_cfg_key *k = &og_srv_cfg_keys[i];
        json_t *v;

        if (!k->def)
            continue;
        if (!(v = json_loads(k->def, JSON_DECODE_ANY, NULL))) {
            og_srv_config_free(c);
            return OG_ENOMEM;
        }
        rc = cfg_set(k, v, c, err, sizeof err);
        json_decref(v);
        if (rc != 0) {
            og_srv_config_free(c);
            return rc;
        }
    }
    return 0;
}

int og_srv_config_load(og_srv_config *c, const char *path, char *err,
                       size_t errlen)
{
    json_t *root = NULL;
    char *copy;
    int rc;

    if (err && errlen)
        err[0] = '\0';
    if (!c || !path)
        return cfg_fail(err, errlen, OG_EINVAL, "no configuration file");
    if ((rc = cfg_parse_file(path, &root, err, errlen)) != 0)
        return rc;
    rc = cfg_apply(root, "", c, err, errlen);
    json_decref(root);
    if (rc != 0)
        return rc;
    if (!(copy = strdup(path)))
        return cfg_fail(err, errlen, OG_ENOMEM, "out of memory");
    free(c->config_path);
    c->config_path = copy;
    return og_srv_config_check(c, err, errlen);
}

int og_srv_config_load_principals(const char *path, og_principal **out,
                                  size_t *n, char *err, size_t errlen)
{
    og_srv_config tmp;
    int rc;

    /* The whole file is validated, not just its principals: a reload must
     * not accept a file that a restart would refuse. */
    if ((rc = og_srv_config_defaults(&tmp)) != 0)
        return cfg_fail(err, errlen, rc, "out of memory");
    if ((rc = og_srv_config_load(&tmp, path, err, errlen)) == 0) {
        *out = tmp.principals;
        *n = tmp.n_principals;
        tmp.principals = NULL;
        tmp.n_principals = 0;
    }
    og_srv_config_free(&tmp);
    return rc;
}

/* Re-checks row k's value in c against its bounds (CF1). 0 or OG_EINVAL. */
static int cfg_check_key(const og_srv_cfg_key *k, const og_srv_config *c,
                         char *err, size_t errlen)
{
    const void *at = og_srv_cfg_at_const(k, c);
    int64_t v = 0;

    switch (k->type) {
    case OG_CFG_STRING:
    case OG_CFG_ID:
    case OG_CFG_ISSUER:
    case OG_CFG_PATH_OPT: {
        const char *s = *(char *const *)at;

        if (!s && k->type == OG_CFG_PATH_OPT)
            return 0; /* automatic */
        if (!s)
            return cfg_fail(err, errlen, OG_EINVAL, "%s: missing", k->name);
        return cfg_string_ok(k, s, err, errlen);
    }
    case OG_CFG_INT:
        v = *(const int *)at;
        break;
    case OG_CFG_SIZE:
        v = (int64_t)*(const size_t *)at;
        break;
    case OG_CFG_MS:
        v = *(const int64_t *)at;
        if (v % 1000 == 0)
            v /= 1000;
        else
            v = -1; /* not whole milliseconds: not expressible here */
        break;
    case OG_CFG_LISTEN:
        if (!c->listen_host[0] || c->listen_port < 0 ||
            c->listen_port > 65535)
            return cfg_fail(err, errlen, OG_EINVAL,
                            "%s: must be \"HOST:PORT\" or \"[IPV6]:PORT\" "
                            "with a port between 0 and 65535",
                            k->name);
        return 0;
    case OG_CFG_ENUM:
        v = *(const int *)at;
        if (v < 0 || v >= og_srv_cfg_enum_count(k))
            return cfg_enum_fail(k, err, errlen);
        return 0;
    case OG_CFG_PRINCIPALS:
        if (c->n_principals > (size_t)k->max ||
            (c->n_principals && !c->principals))
            return cfg_fail(err, errlen, OG_EINVAL,
                            "principals: at most %d principals",
                            OG_CFG_PRINCIPALS_MAX);
        return 0;
    case OG_CFG_BOOL:
    case OG_CFG_OBJECT:
        return 0;
    }
    if (v < k->min || v > k->max)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "%s: must be an integer between %" PRId64
                        " and %" PRId64,
                        k->name, k->min, k->max);
    return 0;
}

/* R1: an operation record outlives its grant's refusal record. The
 * timings are checked (T12: each at most a year), so the sum cannot
 * overflow. 0 or OG_ETIMINGS naming the relation. */
static int cfg_check_audit_retention(const og_srv_config *c, char *err,
                                     size_t errlen)
{
    const og_timings *t = &c->timings;
    int64_t need = t->max_grant_lifetime_us + t->issue_time_skew_us +
                   t->admission_leeway_us + t->cleanup_margin_us;

    if ((int64_t)c->audit_retention_days * 86400 * INT64_C(1000000) >= need)
        return 0;
    return cfg_fail(err, errlen, OG_ETIMINGS,
                    "operations.audit_retention_days: R1: the audit "
                    "retention (%d days) must be at least max_grant_lifetime "
                    "+ issue_time_skew + admission_leeway + cleanup_margin "
                    "(%" PRId64 " s), so an operation record outlives its "
                    "grant's refusal record",
                    c->audit_retention_days, need / 1000000);
}

/* The redemption keys together, and R2. 0, or OG_EINVAL / OG_ETIMINGS. */
static int cfg_check_redemption(const og_srv_config *c, char *err,
                                size_t errlen)
{
    const char *url = og_srv_config_redemption_url(c);

    if (c->redemption_url && !c->redemption_key_file)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "redemption.key_file: required with redemption.url "
                        "(results are credentials: they are stored sealed)");
    /* No URL yet is refused at startup, not here: dev mode sets
     * provider.url once its sandbox runs, after this check. */
    if (!url)
        return 0;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "redemption.url: must start with http:// or https://");
    /* R2: a duplicate must be able to wait out the winner's exchange and
     * its write, or it answers redemption_lost for a result that was about
     * to be persisted. */
    if (c->redemption_catch_up_us <=
        c->timings.provider_timeout_us + c->timings.store_timeout_us)
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "redemption.catch_up_timeout_ms: R2: must be more "
                        "than timings.provider_timeout_ms + "
                        "timings.store_timeout_ms (%lld ms), the longest a "
                        "redemption still in flight needs to persist its "
                        "result",
                        (long long)((c->timings.provider_timeout_us +
                                     c->timings.store_timeout_us) /
                                    1000));
    return 0;
}

/* ---- payouts (payout_runner.c): R3-R7 ---- */

int og_srv_payouts_backoff(const char *s, int64_t *out, int max)
{
    const char *p = s;
    int n = 0;

    if (!s || !*s)
        return -1;
    for (;;) {
        char *end;
        long long v;

        if (*p < '0' || *p > '9' || n == max)
            return -1;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (errno || v < 1 || v > 86400000)
            return -1;
        out[n++] = (int64_t)v * 1000;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

int og_srv_config_check_payouts(const og_srv_config *c, char *err,
                                size_t errlen)
{
    const og_timings *t = &c->timings;
    int64_t steps[OG_SRV_PAYOUTS_BACKOFF_MAX], need;
    int n = og_srv_payouts_backoff(c->payouts_backoff, steps,
                                   OG_SRV_PAYOUTS_BACKOFF_MAX);

    if (n < 1)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "payouts.backoff_ms: 1-16 whole milliseconds "
                        "between 1 and 86400000, comma-separated");
    /* Bounded by the table (each at most a day, max_sends <= 100) and T2:
     * no sum below overflows. */
    need = c->payouts_max_sends * t->provider_timeout_us +
           c->payouts_record_timeout_us + t->store_timeout_us;
    if (c->payouts_attempt_lease_us <= need)
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "payouts.attempt_lease_ms: R3: must be more than "
                        "payouts.max_sends x timings.provider_timeout_ms + "
                        "payouts.record_timeout_ms + "
                        "timings.store_timeout_ms (%lld ms)",
                        (long long)(need / 1000));
    need = c->payouts_max_sends * t->provider_timeout_us;
    if (c->payouts_send_window_us <= need)
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "payouts.send_window_ms: R4: must be more than "
                        "payouts.max_sends x timings.provider_timeout_ms "
                        "(%lld ms)",
                        (long long)(need / 1000));
    if (c->payouts_job_lease_us <= 3 * t->store_timeout_us)
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "payouts.job_lease_ms: R5: must be more than 3 x "
                        "timings.store_timeout_ms (%lld ms)",
                        (long long)(3 * t->store_timeout_us / 1000));
    for (int i = 0; i < n; i++)
        if (steps[i] < c->payouts_interval_us)
            return cfg_fail(err, errlen, OG_ETIMINGS,
                            "payouts.backoff_ms: R6: every step must be at "
                            "least payouts.interval_ms (%lld ms)",
                            (long long)(c->payouts_interval_us / 1000));
    if (c->payouts_escalate_after_us < steps[0])
        return cfg_fail(err, errlen, OG_ETIMINGS,
                        "payouts.escalate_after_ms: R7: must be at least "
                        "the first payouts.backoff_ms step (%lld ms)",
                        (long long)(steps[0] / 1000));
    return 0;
}

int og_srv_config_check(const og_srv_config *c, char *err, size_t errlen)
{
    const char *why = NULL;
    int rc;

    if (!c)
        return cfg_fail(err, errlen, OG_EINVAL, "no configuration");
    for (size_t i = 0; i < og_srv_cfg_n_keys; i++)
        if ((rc = cfg_check_key(&og_srv_cfg_keys[i], c, err, errlen)) != 0)
            return rc;
    if (og_timings_check(&c->timings, &why) != 0)
        return cfg_fail(err, errlen, OG_ETIMINGS, "timings: %s",
                        why ? why : "a timing relation fails");
    if ((rc = cfg_check_audit_retention(c, err, errlen)) != 0)
        return rc;
    /* R3-R7 bind where the pipeline runs: here with payouts.runner, and
     * in `oncegate payout-worker`, which checks them itself. */
    if (c->payouts_runner &&
        (rc = og_srv_config_check_payouts(c, err, errlen)) != 0)
        return rc;
    if (c->provider_url && !c->provider_table)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "provider.table: required with provider.url (how "
                        "else would an answer be classified?)");
    if (c->provider_url && strncmp(c->provider_url, "http://", 7) != 0 &&
        strncmp(c->provider_url, "https://", 8) != 0)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "provider.url: must start with http:// or https://");
    if (c->pool_size > c->max_connections)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "pool_size: must not exceed max_connections (%d): a "
                        "request uses one store connection at a time, so "
                        "the rest could never be used",
                        c->max_connections);
    if (c->opid_require_mac && !c->opid_mac_key_file)
        return cfg_fail(err, errlen, OG_EINVAL,
                        "operation_ids.require_mac: requires "
                        "operation_ids.mac_key_file (no key, no MAC to "
                        "verify)");
    return cfg_check_redemption(c, err, errlen);
}

const char *og_srv_config_redemption_url(const og_srv_config *c)
{
    if (!c->redemption_key_file)
        return NULL;
    return c->redemption_url ? c->redemption_url : c->provider_url;
}

void og_srv_config_free(og_srv_config *c)
{
    if (!c)
        return;
    free(c->store_url);
    free(c->audience);
    free(c->issuer);
    free(c->keys_dir);
    free(c->signing_key);
    free(c->provider_url);
    free(c->provider_table);
    free(c->provider_api_key_file);
    free(c->redemption_url);
    free(c->redemption_key_file);
    free(c->redemption_api_key_file);
    free(c->opid_mac_key_file);
    free(c->log_file);
    free(c->payouts_provider_url);
    free(c->payouts_table);
    free(c->payouts_api_key_file);
    free(c->payouts_worker_id);
    free(c->payouts_backoff);
    free(c->config_path);
    if (c->principals)
        sodium_memzero(c->principals, c->n_principals * sizeof *c->principals);
    free(c->principals);
    memset(c, 0, sizeof *c);
}

int og_srv_config_check_bounds(const og_srv_config *c,
                               const og_session_bounds *b, char *err,
                               size_t errlen)
{
    int64_t bound_ms = c->timings.store_timeout_us / 1000;

    if (!b->applicable)
        return 0;
    if (b->statement_timeout_ms <= 0 || b->lock_timeout_ms <= 0)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections carry statement_timeout="
                           "%lldms and lock_timeout=%lldms; both must be "
                           "finite (non-zero), or an admission could "
                           "outlive cleanup_margin (T9)",
                           (long long)b->statement_timeout_ms,
                           (long long)b->lock_timeout_ms);
    if (b->statement_timeout_ms > bound_ms || b->lock_timeout_ms > bound_ms)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections' statement_timeout "
                           "(%lldms) or lock_timeout (%lldms) exceeds "
                           "store_timeout (%lldms), the admission bound "
                           "relation T9 relies on",
                           (long long)b->statement_timeout_ms,
                           (long long)b->lock_timeout_ms,
                           (long long)bound_ms);
    /* From 17 the whole implicit transaction can be bounded: require it. */
    if (b->has_transaction_timeout &&
        (b->transaction_timeout_ms <= 0 ||
         b->transaction_timeout_ms > bound_ms))
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "admission connections carry transaction_timeout="
                           "%lldms; on PostgreSQL 17+ it must be finite and "
                           "at most store_timeout (%lldms) (T9)",
                           (long long)b->transaction_timeout_ms,
                           (long long)bound_ms);
    /* No server setting bounds a synchronous-replication wait at commit:
     * only the deployment can, and T9 must count it. */
    if (b->sync_commit_waits && c->timings.commit_bound_us <= 0)
        return og_srv_fail(err, errlen, OG_ETIMINGS, "store",
                           "commits wait for a synchronous standby "
                           "(synchronous_standby_names, synchronous_commit) "
                           "and no server timeout bounds that wait: set "
                           "timings.commit_bound_ms to the bound your "
                           "failover policy guarantees, so cleanup_margin "
                           "covers it (T9)");
    return 0;
}
