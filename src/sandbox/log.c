/*
 * log.c — the sandbox's log: one JSON object per line on stderr,
 * {"ts","level","event", …fields}.
 *
 * Invariants:
 *   SL1 A line is built whole and handed to ONE write(2), so lines from
 *       concurrent request threads never interleave.
 *   SL2 "ts", "level" and "event" come first and are always ours: a field
 *       of the same name is dropped.
 *   SL3 String values are cut at LOG_VALUE_MAX bytes (on a UTF-8 boundary),
 *       so a line's size is bounded by the fields the code adds, never by
 *       what a client sent.
 *   SL4 Fields are identifiers and outcomes (credit ids, idempotency keys,
 *       accounts, references, codes). The API key and request bodies are
 *       never passed here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox.h"

#define LOG_VALUE_MAX 512
#define CUT_MARK "\xe2\x80\xa6" /* "…" */

static const char failed_line[] =
    "{\"level\":\"error\",\"event\":\"log_failed\"}\n";

static const char *const level_names[] = {"info", "warn", "error"};

/* Offers all n bytes to write(2); other errors drop the line. */
static void write_all(const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        n -= (size_t)w;
    }
}

/* v, or a new string of its first LOG_VALUE_MAX bytes plus the mark (SL3).
 * New reference; NULL on out of memory. */
static json_t *bounded(json_t *v)
{
    char buf[LOG_VALUE_MAX + sizeof CUT_MARK];
    const char *s = json_string_value(v);
    size_t k = LOG_VALUE_MAX;

    if (!json_is_string(v) || json_string_length(v) <= LOG_VALUE_MAX)
        return json_incref(v);
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--; /* back to a character start */
    memcpy(buf, s, k);
    memcpy(buf + k, CUT_MARK, sizeof CUT_MARK - 1);
    return json_stringn(buf, k + sizeof CUT_MARK - 1);
}

/* The line as a new object (fields borrowed); NULL on out of memory. */
static json_t *build(og_sbx_log_level level, const char *event,
                     json_t *fields)
{
    char ts[32];
    json_t *o = json_object(), *v;
    const char *key;

    if (!o)
        return NULL;
    og_sbx_time_format(og_sbx_now_us(), ts, sizeof ts);
    if (json_object_set_new(o, "ts", json_string(ts)) != 0 ||
        json_object_set_new(o, "level", json_string(level_names[level])) !=
            0 ||
        json_object_set_new(o, "event", json_string(event)) != 0)
        goto fail;
    json_object_foreach(fields, key, v) {
        if (strcmp(key, "ts") == 0 || strcmp(key, "level") == 0 ||
            strcmp(key, "event") == 0)
            continue; /* SL2 */
        if (json_object_set_new(o, key, bounded(v)) != 0)
            goto fail;
    }
    return o;
fail:
    json_decref(o);
    return NULL;
}

void og_sbx_log(og_sbx_log_level level, const char *event, json_t *fields)
{
    json_t *o;
    char *s = NULL, *line = NULL;
    size_t n = 0;

    if ((unsigned)level > OG_SBX_LOG_ERROR)
        level = OG_SBX_LOG_ERROR;
    o = build(level, event ? event : "unnamed",
              json_is_object(fields) ? fields : NULL);
    if (o)
        s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s) {
        n = strlen(s);
        line = realloc(s, n + 2); /* room for the newline */
        if (line)
            s = NULL;
    }
    if (line) {
        line[n] = '\n';
        write_all(line, n + 1); /* SL1 */
    } else {
        write_all(failed_line, sizeof failed_line - 1);
    }
    free(s);
    free(line);
    json_decref(fields);
}
