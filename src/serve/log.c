/*
 * log.c — one JSON object per line: {"ts","level","event", ...fields}.
 *
 * Invariants:
 *   1. A line is built whole in memory and handed to ONE write(2) on a
 *      descriptor opened O_APPEND, so lines from threads of this process
 *      and from other processes appending to the same file never
 *      interleave (the kernel appends each write at the end, atomically
 *      with respect to other appends).
 *   2. "ts", "level" and "event" are always the first three members and
 *      are always ours: a field of the same name is dropped, so a caller
 *      can never forge the time, level or event of a line.
 *   3. A line never exceeds OG_LOG_LINE_MAX bytes: string values longer
 *      than OG_LOG_VALUE_MAX are cut (so a line's size follows the number
 *      of its fields, which callers fix in code, not the size of a value
 *      that came from a request), and a line still too long loses its
 *      fields rather than being split or torn.
 *   4. The only mutable state is the sink descriptor and the least level,
 *      both atomics; og_log itself takes no lock. og_log_open and
 *      og_log_close run while no other thread logs (startup, shutdown): a
 *      line in flight keeps the descriptor it loaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

/* Upper bound of one line, newline included. */
#define OG_LOG_LINE_MAX (64 * 1024)
/* Longest string value kept whole. Fields are identifiers, routes, codes
 * and short messages (docs/http.md, "Logs"): none legitimately needs more,
 * and a cap per value keeps the memory a line costs bounded even when a
 * value comes from a request. */
#define OG_LOG_VALUE_MAX 1024
/* Nesting kept below the fields object; deeper values become the marker. */
#define OG_LOG_DEPTH_MAX 8
/* Appended to a cut value ("…", U+2026). */
#define OG_LOG_CUT_MARK "\xe2\x80\xa6"

/* Written when a line cannot be built (out of memory, invalid UTF-8). */
static const char log_failed_line[] =
    "{\"level\":\"error\",\"event\":\"log_failed\"}\n";

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static atomic_int log_fd = STDERR_FILENO;
static atomic_int log_min = OG_LOG_INFO;

/* Offers the whole line to one write(2); EINTR and a short write (a full
 * disk, a signal) continue with the rest, any other error drops the line:
 * there is nowhere left to report it. */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        n -= (size_t)w;
    }
}

/* Opens the sink (NULL or "-": stderr, never closed) and sets the least
 * level; a previous file sink is closed. 0, or OG_EKEY_IO with the old sink
 * kept when path cannot be opened. */
int og_log_open(const char *path, og_log_level min)
{
    int fd = STDERR_FILENO, old;

    if (path && strcmp(path, "-") != 0) {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0)
            return OG_EKEY_IO;
    }
    if ((int)min < OG_LOG_DEBUG || (int)min > OG_LOG_ERROR)
        min = OG_LOG_INFO;
    atomic_store(&log_min, (int)min);
    old = atomic_exchange(&log_fd, fd);
    if (old != STDERR_FILENO)
        close(old);
    return 0;
}

/* Closes a file sink; later lines go to stderr. */
void og_log_close(void)
{
    int old = atomic_exchange(&log_fd, STDERR_FILENO);

    if (old != STDERR_FILENO)
        close(old);
}

/* The string v when it is at most OG_LOG_VALUE_MAX bytes, else a new one
 * of its first OG_LOG_VALUE_MAX bytes or fewer plus the cut marker, cut on
 * a UTF-8 character boundary so the result stays valid UTF-8. v is
 * borrowed. New reference, NULL when out of memory. */
static json_t *cut_string(json_t *v)
{
    char buf[OG_LOG_VALUE_MAX + sizeof OG_LOG_CUT_MARK];
    const char *s = json_string_value(v);
    size_t k = OG_LOG_VALUE_MAX;

    if (json_string_length(v) <= OG_LOG_VALUE_MAX)
        return json_incref(v);
    /* Step back over continuation bytes (10xxxxxx) to a character start. */
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    memcpy(buf, s, k);
    memcpy(buf + k, OG_LOG_CUT_MARK, sizeof OG_LOG_CUT_MARK - 1);
    return json_stringn(buf, k + sizeof OG_LOG_CUT_MARK - 1);
}

/* A copy of v with every string cut to OG_LOG_VALUE_MAX; v is borrowed and
 * never modified (its parts may be shared with the caller). New reference,
 * NULL when out of memory. */
static json_t *bounded_copy(json_t *v, int depth)
{
    json_t *c = NULL;
    const char *key;
    json_t *m;
    size_t i;

    if (json_is_string(v))
        return cut_string(v);
    if (!json_is_object(v) && !json_is_array(v))
        return json_incref(v);
    if (depth >= OG_LOG_DEPTH_MAX)
        return json_string(OG_LOG_CUT_MARK);
    c = json_is_object(v) ? json_object() : json_array();
    if (!c)
        return NULL;
    if (json_is_object(v)) {
        json_object_foreach(v, key, m)
            if (json_object_set_new(c, key, bounded_copy(m, depth + 1)) != 0)
                goto fail;
    } else {
        json_array_foreach(v, i, m)
            if (json_array_append_new(c, bounded_copy(m, depth + 1)) != 0)
                goto fail;
    }
    return c;
fail:
    json_decref(c);
    return NULL;
}

/* The line object: our three members, then fields' members in order (bounded
 * copies, without ts/level/event) unless with_fields is false, when a
 * marker says they were dropped. fields is borrowed and may be NULL. New
 * reference, NULL on out of memory or an event that is not valid UTF-8. */
static json_t *build_line(og_log_level level, const char *event,
                          json_t *fields, bool with_fields)
{
    char ts[32];
    struct timespec now;
    json_t *o = json_object();
    const char *key;
    json_t *m;

    if (!o)
        return NULL;
    clock_gettime(CLOCK_REALTIME, &now);
    og_time_format_rfc3339((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000,
                           ts, sizeof ts);
    if (json_object_set_new(o, "ts", json_string(ts)) != 0 ||
        json_object_set_new(o, "level", json_string(level_names[level])) != 0 ||
        json_object_set_new(o, "event", json_string(event)) != 0)
        goto fail;
    if (!with_fields) {
        if (json_object_set_new(o, "fields_dropped",
                                json_string("line_too_long")) != 0)
            goto fail;
        return o;
    }
    json_object_foreach(fields, key, m) {
        if (strcmp(key, "ts") == 0 || strcmp(key, "level") == 0 ||
            strcmp(key, "event") == 0)
            continue;
        if (json_object_set_new(o, key, bounded_copy(m, 1)) != 0)
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* The serialized line with its newline, malloc'd into *out (*len bytes).
 * fields is borrowed. 0, OG_ENOMEM (or unserializable), or 1 when the line
 * would exceed OG_LOG_LINE_MAX. */
static int render_line(og_log_level level, const char *event, json_t *fields,
                       bool with_fields, char **out, size_t *len)
{
    json_t *o = build_line(level, event, fields, with_fields);
    char *s, *grown;
    size_t n;

    if (!o)
        return OG_ENOMEM;
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return OG_ENOMEM;
    n = strlen(s);
    if (n + 1 > OG_LOG_LINE_MAX) {
        free(s);
        return 1;
    }
    if (!(grown = realloc(s, n + 2))) {
        free(s);
        return OG_ENOMEM;
    }
    grown[n] = '\n';
    grown[n + 1] = '\0';
    *out = grown;
    *len = n + 1;
    return 0;
}

/* The flat line's buffer: what a request's line needs, with room. */
#define FLAT_MAX 4096

typedef struct flat {
    char *p;
    size_t n, cap;
} flat;

static bool flat_put(flat *f, const char *s, size_t n)
{
    if (f->n + n > f->cap)
        return false;
    memcpy(f->p + f->n, s, n);
    f->n += n;
    return true;
}

/* A key made of letters, digits, '_', '-' and '.' only: written as it is,
 * in quotes. */
static bool flat_key(flat *f, const char *k)
{
    size_t n = strlen(k);

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)k[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
            return false;
    }
    return flat_put(f, "\"", 1) && flat_put(f, k, n) &&
           flat_put(f, "\":", 2);
}

/* A scalar value (a string no longer than OG_LOG_VALUE_MAX, a number, a
 * boolean, null) through jansson's own encoder into the buffer: no
 * allocation. */
static bool flat_value(flat *f, const json_t *v)
{
    size_t n;

    if (json_is_object(v) || json_is_array(v) ||
        (json_is_string(v) && json_string_length(v) > OG_LOG_VALUE_MAX))
        return false;
    n = json_dumpb(v, f->p + f->n, f->cap - f->n,
                   JSON_COMPACT | JSON_ENCODE_ANY);
    if (n == 0 || n > f->cap - f->n)
        return false;
    f->n += n;
    return true;
}

/* The line written straight into buf, without building an object: for the
 * usual line, whose fields are all scalars with plain keys (a request's).
 * Same members, order and bounds as render_line (invariants 2 and 3), the
 * same text as its json_dumps. false when the line does not qualify: the
 * caller then takes render_line. */
static bool flat_line(og_log_level level, const char *event, json_t *fields,
                      char *buf, size_t cap, size_t *len)
{
    flat f = {buf, 0, cap - 1};
    char ts[32];
    struct timespec now;
    json_t *ev, *m;
    const char *key;
    bool ok;

    clock_gettime(CLOCK_REALTIME, &now);
    og_time_format_rfc3339((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000,
                           ts, sizeof ts);
    if (!flat_put(&f, "{\"ts\":\"", 7) || !flat_put(&f, ts, strlen(ts)) ||
        !flat_put(&f, "\",\"level\":\"", 11) ||
        !flat_put(&f, level_names[level], strlen(level_names[level])) ||
        !flat_put(&f, "\",\"event\":", 10))
        return false;
    if (!(ev = json_string(event)))
        return false;
    ok = flat_value(&f, ev);
    json_decref(ev);
    if (!ok)
        return false;
    json_object_foreach(fields, key, m) {
        if (strcmp(key, "ts") == 0 || strcmp(key, "level") == 0 ||
            strcmp(key, "event") == 0)
            continue;
        if (!flat_put(&f, ",", 1) || !flat_key(&f, key) || !flat_value(&f, m))
            return false;
    }
    if (!flat_put(&f, "}", 1))
        return false;
    buf[f.n++] = '\n';
    *len = f.n;
    return true;
}

/* Writes one line when level >= the least level; fields (may be NULL) is
 * always released. Failures write log_failed_line instead, never nothing. */
void og_log(og_log_level level, const char *event, json_t *fields)
{
    int fd = atomic_load(&log_fd);
    char *line = NULL;
    size_t len = 0;
    int rc;

    if ((int)level < OG_LOG_DEBUG || (int)level > OG_LOG_ERROR)
        level = OG_LOG_ERROR;
    if ((int)level < atomic_load(&log_min))
        goto out;
    if (!event)
        event = "unnamed";
    /* fields must be an object; anything else is dropped, not guessed at. */
    {
        char buf[FLAT_MAX];

        if (flat_line(level, event, json_is_object(fields) ? fields : NULL,
                      buf, sizeof buf, &len)) {
            write_all(fd, buf, len);
            goto out;
        }
    }
    rc = render_line(level, event, json_is_object(fields) ? fields : NULL,
                     true, &line, &len);
    if (rc == 1)
        rc = render_line(level, event, NULL, false, &line, &len);
    if (rc == 0)
        write_all(fd, line, len);
    else
        write_all(fd, log_failed_line, sizeof log_failed_line - 1);
    free(line);
out:
    json_decref(fields);
}
