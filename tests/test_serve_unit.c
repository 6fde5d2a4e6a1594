/*
 * test_serve_unit.c — claims about the service's logs (log.c) and metrics
 * (metrics.c), each test named by the claim it proves.
 *
 * Logs are written to a file in a fresh temporary directory per test and
 * read back line by line. Metrics are process-global and never reset, so
 * every metrics test reads deltas: it renders before and after its calls
 * and compares the values of the series it touched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "secret.h"
#include "serve.h"
#include "support.h"

/* og_secret_text_file_read (src/common/secret.h): the provider credential's
 * reader. Trimmed, bounded, NUL-free, fits, or refused with out untouched. */
static void secret_text_file_reads_trims_and_refuses(void **state)
{
    char dir[] = "/tmp/og-secret-XXXXXX", path[600], out[16], big[40];
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/key", dir);
#define WRITE(text, n)                                                         \
    do {                                                                       \
        assert_non_null(f = fopen(path, "wb"));                                \
        assert_int_equal(fwrite(text, 1, n, f), n);                            \
        assert_int_equal(fclose(f), 0);                                        \
    } while (0)
    WRITE(" \tsk-123\r\n", 10);
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), 0);
    assert_string_equal(out, "sk-123");
    WRITE("\n \n", 3); /* only white space: the empty credential */
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), 0);
    assert_string_equal(out, "");
    strcpy(out, "keep");
    WRITE("a\0b", 3); /* a NUL inside */
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), -1);
    assert_string_equal(out, "keep");
    memset(big, 'k', sizeof big);
    WRITE(big, 33); /* over max */
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), -1);
    WRITE(big, 16); /* within max, but no room for its NUL in out */
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), -1);
    WRITE(big, 15);
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), 0);
    assert_int_equal(strlen(out), 15);
#undef WRITE
    assert_int_equal(unlink(path), 0);
    assert_int_equal(og_secret_text_file_read(path, 32, out, sizeof out), -1);
    assert_int_equal(og_secret_text_file_read(NULL, 32, out, sizeof out), -1);
    assert_int_equal(rmdir(dir), 0);
}

/* ===========================================================================
 * Helpers: files and lines.
 * ========================================================================= */

/* The whole file at path, NUL terminated, malloc'd (the caller frees). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0, r;

    assert_non_null(f);
    do {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
    } while (r > 0);
    assert_int_equal(ferror(f), 0);
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* A file split into lines: line[i] points into buf, newline removed. */
typedef struct lines {
    char *buf;
    char **line;
    size_t n;
} lines;

/* Reads path into *ls; asserts the file is empty or ends with a newline
 * and holds no NUL byte. Free with lines_free. */
static void lines_read(const char *path, lines *ls)
{
    size_t len, cap = 0;
    char *p;

    memset(ls, 0, sizeof *ls);
    ls->buf = slurp(path, &len);
    assert_int_equal(strlen(ls->buf), len);
    assert_true(len == 0 || ls->buf[len - 1] == '\n');
    for (p = ls->buf; *p;) {
        char *nl = strchr(p, '\n');

        if (ls->n == cap) {
            cap = cap ? cap * 2 : 64;
            ls->line = realloc(ls->line, cap * sizeof *ls->line);
            assert_non_null(ls->line);
        }
        *nl = '\0';
        ls->line[ls->n++] = p;
        p = nl + 1;
    }
}

static void lines_free(lines *ls)
{
    free(ls->line);
    free(ls->buf);
}

/* A line parsed strictly: valid JSON, an object, no duplicated member.
 * New reference. */
static json_t *parse_line(const char *line)
{
    json_error_t e;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &e);

    if (!o)
        fail_msg("line is not JSON (%s): %.200s", e.text, line);
    assert_true(json_is_object(o));
    return o;
}

/* ===========================================================================
 * Log fixture: a fresh directory and a log file opened at DEBUG.
 * ========================================================================= */
typedef struct log_fx {
    char dir[64];
    char path[128];
    char other[128]; /* a second file for tests that redirect stderr */
} log_fx;

static int log_setup(void **state)
{
    log_fx *fx = calloc(1, sizeof *fx);

    if (!fx)
        return -1;
    strcpy(fx->dir, "/tmp/og-serve-unit-XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof fx->path, "%s/oncegate.log", fx->dir);
    snprintf(fx->other, sizeof fx->other, "%s/stderr.log", fx->dir);
    if (og_log_open(fx->path, OG_LOG_DEBUG) != 0) {
        rmdir(fx->dir);
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int log_teardown(void **state)
{
    log_fx *fx = *state;

    og_log_close();
    unlink(fx->path);
    unlink(fx->other);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

/* The only line of path, parsed; asserts there is exactly one. */
static json_t *only_line(const char *path, lines *ls)
{
    lines_read(path, ls);
    assert_int_equal(ls->n, 1);
    return parse_line(ls->line[0]);
}

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ===========================================================================
 * Log claims.
 * ========================================================================= */

/* A line is one JSON object: ts (RFC 3339 UTC, microseconds), level and
 * event first, then the fields in the order the caller added them. */
static void log_line_is_json_with_ts_level_event_first(void **state)
{
    log_fx *fx = *state;
    static const char *const want_keys[] = {
        "ts", "level", "event", "correlation_id", "status", "nested", "ok"};
    json_t *fields = json_pack("{s:s, s:i, s:{s:[i,s]}, s:b}", "correlation_id",
                               "c-1", "status", 202, "nested", "a", 1, "x",
                               "ok", 1);
    int64_t before = now_us(), ts_us = 0;
    const char *ts;
    json_t *o;
    void *it;
    size_t k = 0;
    lines ls;

    assert_non_null(fields);
    og_log(OG_LOG_INFO, "request", fields);
    o = only_line(fx->path, &ls);
    assert_true(strncmp(ls.line[0], "{\"ts\":\"", 7) == 0);
    for (it = json_object_iter(o); it; it = json_object_iter_next(o, it), k++) {
        assert_true(k < sizeof want_keys / sizeof want_keys[0]);
        assert_string_equal(json_object_iter_key(it), want_keys[k]);
    }
    assert_int_equal(k, sizeof want_keys / sizeof want_keys[0]);

    ts = json_string_value(json_object_get(o, "ts"));
    assert_non_null(ts);
    assert_int_equal(strlen(ts), 27); /* YYYY-MM-DDTHH:MM:SS.ffffffZ */
    assert_int_equal(ts[19], '.');
    assert_int_equal(ts[26], 'Z');
    assert_int_equal(og_time_parse_rfc3339(ts, &ts_us), 0);
    assert_true(ts_us >= before - 1 && ts_us <= now_us() + 1);

    assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(o, "event")),
                        "request");
    assert_string_equal(
        json_string_value(json_object_get(o, "correlation_id")), "c-1");
    assert_int_equal(json_integer_value(json_object_get(o, "status")), 202);
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(json_object_get(o, "nested"), "a"), 1)),
        "x");
    json_decref(o);
    lines_free(&ls);
}

/* NULL fields give just ts, level, event; every level has its name. */
static void log_levels_are_named_and_fields_optional(void **state)
{
    log_fx *fx = *state;
    static const char *const names[] = {"debug", "info", "warn", "error"};
    lines ls;

    og_log(OG_LOG_DEBUG, "e0", NULL);
    og_log(OG_LOG_INFO, "e1", NULL);
    og_log(OG_LOG_WARN, "e2", NULL);
    og_log(OG_LOG_ERROR, "e3", json_object());
    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, 4);
    for (size_t i = 0; i < ls.n; i++) {
        json_t *o = parse_line(ls.line[i]);

        assert_int_equal(json_object_size(o), 3);
        assert_string_equal(json_string_value(json_object_get(o, "level")),
                            names[i]);
        json_decref(o);
    }
    lines_free(&ls);
}

/* Levels below the configured least level write nothing (and still release
 * their fields: LeakSanitizer would report them otherwise). */
static void log_level_below_min_is_dropped(void **state)
{
    log_fx *fx = *state;
    lines ls;

    assert_int_equal(og_log_open(fx->path, OG_LOG_WARN), 0);
    og_log(OG_LOG_DEBUG, "dropped", json_pack("{s:s}", "k", "v"));
    og_log(OG_LOG_INFO, "dropped", json_pack("{s:s}", "k", "v"));
    og_log(OG_LOG_WARN, "kept_warn", json_pack("{s:s}", "k", "v"));
    og_log(OG_LOG_ERROR, "kept_error", NULL);
    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, 2);
    assert_non_null(strstr(ls.line[0], "\"event\":\"kept_warn\""));
    assert_non_null(strstr(ls.line[1], "\"event\":\"kept_error\""));
    lines_free(&ls);
}

/* A field named ts, level or event is dropped: the line keeps ours, once. */
static void log_reserved_names_cannot_be_forged(void **state)
{
    log_fx *fx = *state;
    json_t *fields = json_pack("{s:s, s:s, s:s, s:i}", "ts",
                               "1999-01-01T00:00:00.000000Z", "level", "debug",
                               "event", "forged", "k", 1);
    json_t *o;
    lines ls;

    og_log(OG_LOG_INFO, "real", fields);
    o = only_line(fx->path, &ls); /* rejects duplicated members */
    assert_int_equal(json_object_size(o), 4);
    assert_string_equal(json_string_value(json_object_get(o, "level")), "info");
    assert_string_equal(json_string_value(json_object_get(o, "event")), "real");
    assert_string_not_equal(json_string_value(json_object_get(o, "ts")),
                            "1999-01-01T00:00:00.000000Z");
    assert_int_equal(json_integer_value(json_object_get(o, "k")), 1);
    json_decref(o);
    lines_free(&ls);
}

/* A string of n bytes of c (malloc'd). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* String values over 1024 bytes are cut to 1024 bytes + "…", on a UTF-8
 * character boundary, at any depth; 1024 bytes exactly stay whole. */
static void log_long_string_is_cut(void **state)
{
    log_fx *fx = *state;
    char *big = repeat('a', 5000), *exact = repeat('b', 1024);
    char *want = repeat('a', 1024 + 3), *want_utf8 = repeat('a', 1023 + 3);
    char *utf8 = repeat('a', 1200);
    json_t *o;
    lines ls;

    memcpy(want + 1024, "\xe2\x80\xa6", 3);
    memcpy(want_utf8 + 1023, "\xe2\x80\xa6", 3);
    memcpy(utf8 + 1023, "\xc3\xa9", 2); /* é spans bytes 1023..1024 */
    og_log(OG_LOG_INFO, "long",
           json_pack("{s:s, s:s, s:s, s:[s]}", "big", big, "exact", exact,
                     "utf8", utf8, "deep", big));
    o = only_line(fx->path, &ls);
    assert_string_equal(json_string_value(json_object_get(o, "big")), want);
    assert_string_equal(json_string_value(json_object_get(o, "exact")), exact);
    assert_string_equal(json_string_value(json_object_get(o, "utf8")),
                        want_utf8);
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(o, "deep"), 0)), want);
    json_decref(o);
    lines_free(&ls);
    free(big), free(exact), free(want), free(want_utf8), free(utf8);
}

/* A line never exceeds 64 KiB: when the fields would make it longer, they
 * are dropped and the line says so, keeping ts, level and event. */
static void log_line_never_exceeds_64k(void **state)
{
    log_fx *fx = *state;
    json_t *fields = json_object();
    char *v = repeat('v', 1000), key[16];
    json_t *o;
    lines ls;

    assert_non_null(fields);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "f%d", i);
        assert_int_equal(json_object_set_new(fields, key, json_string(v)), 0);
    }
    og_log(OG_LOG_WARN, "huge", fields);
    o = only_line(fx->path, &ls);
    assert_true(strlen(ls.line[0]) + 1 <= 64 * 1024);
    assert_string_equal(json_string_value(json_object_get(o, "event")), "huge");
    assert_string_equal(
        json_string_value(json_object_get(o, "fields_dropped")),
        "line_too_long");
    assert_null(json_object_get(o, "f0"));
    json_decref(o);
    lines_free(&ls);
    free(v);
}

/* A line that cannot be serialized (an event that is not UTF-8) becomes the
 * fixed log_failed line, never a broken one and never nothing. */
static void log_unserializable_line_writes_log_failed(void **state)
{
    log_fx *fx = *state;
    lines ls;

    og_log(OG_LOG_INFO, "bad\xff\xfe", json_pack("{s:i}", "k", 1));
    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, 1);
    assert_string_equal(ls.line[0], "{\"level\":\"error\",\"event\":\"log_failed\"}");
    lines_free(&ls);
}

/* An unopenable path is OG_EKEY_IO and the sink in use stays in use. */
static void log_open_failure_keeps_old_sink(void **state)
{
    log_fx *fx = *state;
    lines ls;

    assert_int_equal(og_log_open("/nonexistent-og-dir/x/y.log", OG_LOG_DEBUG),
                     OG_EKEY_IO);
    og_log(OG_LOG_INFO, "still_here", NULL);
    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, 1);
    assert_non_null(strstr(ls.line[0], "\"event\":\"still_here\""));
    lines_free(&ls);
}

/* Runs fn with fd 2 redirected to path, then restores it. */
static void with_stderr_to(const char *path, void (*fn)(void))
{
    int saved = dup(STDERR_FILENO);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    assert_true(saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
    fn();
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
}

static void close_then_log(void)
{
    og_log_close();
    og_log(OG_LOG_INFO, "to_stderr", NULL);
}

static void open_dash_then_log(void)
{
    assert_int_equal(og_log_open("-", OG_LOG_INFO), 0);
    og_log(OG_LOG_INFO, "dash", NULL);
}

/* og_log_close reverts to stderr, and "-" is stderr too. */
static void log_close_and_dash_write_to_stderr(void **state)
{
    log_fx *fx = *state;
    lines ls, err;

    with_stderr_to(fx->other, close_then_log);
    lines_read(fx->other, &err);
    assert_int_equal(err.n, 1);
    assert_non_null(strstr(err.line[0], "\"event\":\"to_stderr\""));
    lines_free(&err);

    with_stderr_to(fx->other, open_dash_then_log);
    lines_read(fx->other, &err);
    assert_int_equal(err.n, 1);
    assert_non_null(strstr(err.line[0], "\"event\":\"dash\""));
    lines_free(&err);

    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, 0);
    lines_free(&ls);
}

/* ---- concurrency -------------------------------------------------------- */
enum {
    LOG_THREADS = 8,
    LOG_PROCS = 2,
    LOG_LINES = 2000,
    LOG_PAD = 600 /* makes a line ~700 bytes: a torn write would show */
};

static char log_pad[LOG_PAD + 1];

/* Writes LOG_LINES lines as writer w. */
static void log_burst(int w)
{
    for (int i = 0; i < LOG_LINES; i++)
        og_log(OG_LOG_INFO, "burst",
               json_pack("{s:i, s:i, s:s}", "writer", w, "seq", i, "pad",
                         log_pad));
}

static void *log_thread(void *arg)
{
    log_burst((int)(intptr_t)arg);
    return NULL;
}

/* 8 threads and 2 other processes (each with its own O_APPEND open of the
 * file) write 2000 lines each at once: every line of the file parses, and
 * every (writer, seq) appears exactly once. */
static void log_concurrent_writers_never_interleave(void **state)
{
    log_fx *fx = *state;
    static bool seen[LOG_THREADS + LOG_PROCS][LOG_LINES];
    pid_t pid[LOG_PROCS];
    pthread_t th[LOG_THREADS];
    lines ls;

    memset(log_pad, 'p', LOG_PAD);
    memset(seen, 0, sizeof seen);
    for (int p = 0; p < LOG_PROCS; p++) {
        pid[p] = fork();
        assert_true(pid[p] >= 0);
        if (pid[p] == 0) {
            /* Another instance: its own open file description. */
            if (og_log_open(fx->path, OG_LOG_INFO) != 0)
                _exit(1);
            log_burst(LOG_THREADS + p);
            _exit(0);
        }
    }
    for (int t = 0; t < LOG_THREADS; t++)
        assert_int_equal(
            pthread_create(&th[t], NULL, log_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < LOG_THREADS; t++)
        pthread_join(th[t], NULL);
    for (int p = 0; p < LOG_PROCS; p++) {
        int st = 0;

        assert_int_equal(waitpid(pid[p], &st, 0), pid[p]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }

    lines_read(fx->path, &ls);
    assert_int_equal(ls.n, (LOG_THREADS + LOG_PROCS) * LOG_LINES);
    for (size_t i = 0; i < ls.n; i++) {
        json_t *o = parse_line(ls.line[i]);
        json_int_t w = json_integer_value(json_object_get(o, "writer"));
        json_int_t s = json_integer_value(json_object_get(o, "seq"));

        assert_true(w >= 0 && w < LOG_THREADS + LOG_PROCS);
        assert_true(s >= 0 && s < LOG_LINES);
        assert_false(seen[w][s]);
        seen[w][s] = true;
        assert_string_equal(json_string_value(json_object_get(o, "pad")),
                            log_pad);
        json_decref(o);
    }
    lines_free(&ls);
}

/* ===========================================================================
 * Helpers: the exposition text.
 * ========================================================================= */

static char *render(void)
{
    char *out = NULL;
    size_t len = 0;

    assert_int_equal(og_metrics_render(&out, &len), 0);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    return out;
}

/* The value of the sample line that starts with exactly `series` (name and
 * labels as rendered), or -1 when there is none. */
static double value_of(const char *text, const char *series)
{
    size_t n = strlen(series);
    const char *p = text;

    while (p && *p) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        if ((p = strchr(p, '\n')))
            p++;
    }
    return -1;
}

/* A series' value, asserting it is present. */
static double must_value(const char *text, const char *series)
{
    double v = value_of(text, series);

    if (v < 0)
        fail_msg("series missing: %s", series);
    return v;
}

/* after - before of an integer-valued series present in both. */
static long long delta(const char *before, const char *after,
                       const char *series)
{
    return (long long)(must_value(after, series) - must_value(before, series));
}

static const char *const op_text[] = {
#define T_OP(name, text) text,
    OG_METRIC_OP_MAP(T_OP)
#undef T_OP
};

static const struct {
    int64_t us;
    const char *le;
} bounds[] = {
    {500, "0.0005"},     {1000, "0.001"},    {2500, "0.0025"},
    {5000, "0.005"},     {10000, "0.01"},    {25000, "0.025"},
    {50000, "0.05"},     {100000, "0.1"},    {250000, "0.25"},
    {500000, "0.5"},     {1000000, "1"},     {2500000, "2.5"},
    {5000000, "5"},      {10000000, "10"},
};
#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

/* The histogram series name for op with le (NULL: _count; "sum": _sum). */
static const char *hist_series(char *buf, size_t len, const char *op,
                               const char *le)
{
    if (!le)
        snprintf(buf, len, "oncegate_store_latency_seconds_count{op=\"%s\"}",
                 op);
    else if (strcmp(le, "sum") == 0)
        snprintf(buf, len, "oncegate_store_latency_seconds_sum{op=\"%s\"}", op);
    else
        snprintf(buf, len,
                 "oncegate_store_latency_seconds_bucket{op=\"%s\",le=\"%s\"}",
                 op, le);
    return buf;
}

/* ---- a small checker of the text format 0.0.4 --------------------------- */
enum { MAX_FAMILIES = 64, MAX_NAME = 128 };

typedef struct exposition {
    char name[MAX_FAMILIES][MAX_NAME];
    char type[MAX_FAMILIES][16];
    size_t n;
} exposition;

static bool is_name_start(char c, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
    return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

/* Length of a metric name (colon true) or label name at p; 0 if none. */
static size_t name_len(const char *p, bool colon)
{
    size_t n = 0;

    if (!is_name_start(p[0], colon))
        return 0;
    while (is_name_char(p[n], colon))
        n++;
    return n;
}

static const char *type_of(const exposition *x, const char *name, size_t n)
{
    for (size_t i = 0; i < x->n; i++)
        if (strlen(x->name[i]) == n && strncmp(x->name[i], name, n) == 0)
            return x->type[i];
    return NULL;
}

/* The family of a sample name: itself, or a histogram's name without
 * _bucket/_sum/_count. Its TYPE, or NULL when no TYPE line came before. */
static const char *family_type(const exposition *x, const char *name, size_t n,
                               bool *is_bucket)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    const char *t = type_of(x, name, n);

    *is_bucket = false;
    if (t)
        return t;
    for (size_t i = 0; i < 3; i++) {
        size_t s = strlen(sfx[i]);

        if (n > s && strncmp(name + n - s, sfx[i], s) == 0 &&
            (t = type_of(x, name, n - s)) && strcmp(t, "histogram") == 0) {
            *is_bucket = i == 0;
            return t;
        }
    }
    return NULL;
}

/* `# HELP name text` or `# TYPE name type`; other comments are free. */
static const char *check_comment(exposition *x, const char *l)
{
    static const char *const types[] = {"counter", "gauge", "histogram",
                                        "summary", "untyped"};
    bool is_type = strncmp(l, "# TYPE ", 7) == 0;
    size_t n;

    if (!is_type && strncmp(l, "# HELP ", 7) != 0)
        return NULL;
    if (!(n = name_len(l + 7, true)) || l[7 + n] != ' ' || n >= MAX_NAME)
        return "HELP/TYPE without a valid metric name";
    if (!is_type)
        return NULL;
    if (type_of(x, l + 7, n))
        return "second TYPE line for a family";
    for (size_t i = 0; i < 5; i++) {
        if (strcmp(l + 8 + n, types[i]) != 0)
            continue;
        assert_true(x->n < MAX_FAMILIES);
        memcpy(x->name[x->n], l + 7, n);
        x->name[x->n][n] = '\0';
        strcpy(x->type[x->n++], types[i]);
        return NULL;
    }
    return "unknown TYPE";
}

/* `{name="value",...}` at *pp, advancing past it; sets *has_le. */
static const char *check_labels(const char **pp, bool *has_le)
{
    const char *p = *pp + 1;
    size_t n;

    *has_le = false;
    while (*p != '}') {
        if (!(n = name_len(p, false)) || p[n] != '=' || p[n + 1] != '"')
            return "bad label name";
        if (n == 2 && strncmp(p, "le", 2) == 0)
            *has_le = true;
        for (p += n + 2; *p != '"'; p++) {
            if (*p == '\0' || *p == '\n')
                return "unterminated label value";
            if (*p != '\\')
                continue;
            p++;
            if (*p != '\\' && *p != '"' && *p != 'n')
                return "bad escape in label value";
        }
        p++;
        if (*p == ',')
            p++;
        else if (*p != '}')
            return "labels not separated by ','";
    }
    *pp = p + 1;
    return NULL;
}

/* `name{labels} value [timestamp]` whose family has a TYPE line before. */
static const char *check_sample(const exposition *x, const char *l)
{
    size_t n = name_len(l, true);
    const char *p = l + n, *t;
    bool is_bucket, has_le = false;
    char *end;
    const char *why;

    if (n == 0)
        return "sample without a valid metric name";
    if (!(t = family_type(x, l, n, &is_bucket)))
        return "sample before its family's TYPE line";
    if (*p == '{' && (why = check_labels(&p, &has_le)))
        return why;
    if (is_bucket && !has_le)
        return "histogram bucket without le";
    if (*p++ != ' ')
        return "no space before the value";
    strtod(p, &end);
    if (end == p)
        return "value is not a number";
    if (*end == ' ') {
        p = end + 1;
        strtoll(p, &end, 10);
        if (end == p)
            return "timestamp is not an integer";
    }
    return *end == '\0' ? NULL : "trailing text after the value";
}

/* NULL when text is valid exposition, else why; *bad_line is the line. */
static const char *check_exposition(const char *text, char *bad, size_t blen)
{
    exposition *x = calloc(1, sizeof *x);
    const char *why = NULL, *p = text;
    char line[1024];

    assert_non_null(x);
    if (!*text || text[strlen(text) - 1] != '\n')
        why = "text does not end with a newline";
    while (!why && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);

        assert_true(n < sizeof line);
        memcpy(line, p, n);
        line[n] = '\0';
        p = nl + 1;
        if (n == 0)
            continue; /* the format ignores empty lines */
        why = line[0] == '#' ? check_comment(x, line) : check_sample(x, line);
        if (why)
            snprintf(bad, blen, "%s", line);
    }
    free(x);
    return why;
}

/* ===========================================================================
 * Metrics claims.
 * ========================================================================= */

/* The checker itself refuses what the format forbids (so that passing it
 * means something). */
static void metrics_format_checker_refuses_bad_text(void **state)
{
    static const char *const bad[] = {
        "x 1\n",                                   /* no TYPE before */
        "# TYPE x counter\n9x 1\n",                /* bad name */
        "# TYPE x counter\nx{a=\"b} 1\n",          /* unterminated */
        "# TYPE x counter\nx{a=\"\\q\"} 1\n",      /* bad escape */
        "# TYPE x counter\nx{1a=\"b\"} 1\n",       /* bad label name */
        "# TYPE x counter\nx one\n",               /* not a number */
        "# TYPE x counter\nx 1",                   /* no final newline */
        "# TYPE x counter\n# TYPE x counter\n",    /* TYPE twice */
        "# TYPE x wibble\n",                       /* unknown type */
        "# TYPE h histogram\nh_bucket{a=\"b\"} 1\n", /* bucket without le */
    };
    char line[1024];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!check_exposition(bad[i], line, sizeof line))
            fail_msg("checker accepted case %zu", i);
    assert_null(check_exposition("# HELP x h\n# TYPE x gauge\nx{a=\"q\\\"\\n\","
                                 "} -1.5e3 123\nx +Inf\n",
                                 line, sizeof line));
}

/* The rendered text passes the format checker, with every kind of series
 * present (response codes included). */
static void metrics_text_passes_format_check(void **state)
{
    char line[1024];
    const char *why;
    char *text;

    og_metrics_response(200);
    og_metrics_store_call(OG_MOP_ADMIT, 1234, 0);
    og_metrics_admission(OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_SPENT);
    text = render();
    why = check_exposition(text, line, sizeof line);
    if (why)
        fail_msg("%s: %s", why, line);
    free(text);
}

/* Every family has its HELP and TYPE lines, before any observation. */
static void metrics_every_family_has_help_and_type(void **state)
{
    static const struct {
        const char *name, *type;
    } fam[] = {
        {"oncegate_admissions_total", "counter"},
        {"oncegate_refusals_total", "counter"},
        {"oncegate_store_latency_seconds", "histogram"},
        {"oncegate_store_unavailable_total", "counter"},
        {"oncegate_consumes_total", "counter"},
        {"oncegate_http_requests_in_flight", "gauge"},
        {"oncegate_http_responses_total", "counter"},
    };
    char *text = render(), want[256];

    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        snprintf(want, sizeof want, "# HELP %s ", fam[i].name);
        assert_non_null(strstr(text, want));
        snprintf(want, sizeof want, "# TYPE %s %s\n", fam[i].name,
                 fam[i].type);
        assert_non_null(strstr(text, want));
    }
    free(text);
}

/* Every outcome, every refusal reason but "none", every op and both
 * verdicts are series from the start. */
static void metrics_series_are_stable(void **state)
{
    char *text = render(), s[256];

    for (int o = OG_OUTCOME_ADMITTED; o <= OG_OUTCOME_REFUSED; o++) {
        snprintf(s, sizeof s, "oncegate_admissions_total{outcome=\"%s\"}",
                 og_outcome_name((og_outcome)o));
        must_value(text, s);
    }
#define T_REASON(name, text_)                                                  \
    snprintf(s, sizeof s, "oncegate_refusals_total{reason=\"%s\"}", text_);   \
    if (OG_REFUSAL_##name == OG_REFUSAL_NONE)                                  \
        assert_true(value_of(text, s) < 0);                                    \
    else                                                                       \
        must_value(text, s);
    OG_REFUSAL_MAP(T_REASON)
#undef T_REASON
    for (size_t op = 0; op < OG_MOP_COUNT; op++) {
        must_value(text, hist_series(s, sizeof s, op_text[op], "+Inf"));
        must_value(text, hist_series(s, sizeof s, op_text[op], "sum"));
        must_value(text, hist_series(s, sizeof s, op_text[op], NULL));
        snprintf(s, sizeof s, "oncegate_store_unavailable_total{op=\"%s\"}",
                 op_text[op]);
        must_value(text, s);
    }
    must_value(text, "oncegate_consumes_total{consumed=\"true\"}");
    must_value(text, "oncegate_consumes_total{consumed=\"false\"}");
    must_value(text, "oncegate_http_requests_in_flight");
    free(text);
}

/* Admissions and refusals rise by exactly the calls made; a refusal counts
 * its reason, other outcomes count none. */
static void metrics_admissions_count_exactly_the_calls(void **state)
{
    char *before = render(), *after, s[3][128], r[2][128];

    for (int i = 0; i < 3; i++)
        og_metrics_admission(OG_OUTCOME_ADMITTED, OG_REFUSAL_NONE);
    for (int i = 0; i < 2; i++)
        og_metrics_admission(OG_OUTCOME_ALREADY_ADMITTED, OG_REFUSAL_NONE);
    for (int i = 0; i < 4; i++)
        og_metrics_admission(OG_OUTCOME_REFUSED, OG_REFUSAL_GRANT_REVOKED);
    og_metrics_admission(OG_OUTCOME_REFUSED, OG_REFUSAL_DEADLINE_PASSED);
    og_metrics_admission((og_outcome)99, OG_REFUSAL_GRANT_REVOKED); /* ignored */
    after = render();

#define ADM "oncegate_admissions_total{outcome=\"%s\"}"
    snprintf(s[0], sizeof s[0], ADM, "admitted");
    snprintf(s[1], sizeof s[1], ADM, "already_admitted");
    snprintf(s[2], sizeof s[2], ADM, "refused");
#undef ADM
    snprintf(r[0], sizeof r[0], "oncegate_refusals_total{reason=\"%s\"}",
             og_refusal_name(OG_REFUSAL_GRANT_REVOKED));
    snprintf(r[1], sizeof r[1], "oncegate_refusals_total{reason=\"%s\"}",
             og_refusal_name(OG_REFUSAL_DEADLINE_PASSED));
    assert_int_equal(delta(before, after, s[0]), 3);
    assert_int_equal(delta(before, after, s[1]), 2);
    assert_int_equal(delta(before, after, s[2]), 5);
    assert_int_equal(delta(before, after, r[0]), 4);
    assert_int_equal(delta(before, after, r[1]), 1);
    free(before);
    free(after);
}

/* Buckets are cumulative, +Inf and _count equal the observations, _sum is
 * the total latency within 1 µs, for every op at any time. */
static void metrics_histogram_is_cumulative_with_exact_count_and_sum(void **s_)
{
    static const int64_t obs[] = {0, 499, 500, 501, 7000, 7000, 2500000,
                                  20000000, -5 /* counts as 0 */};
    static const int64_t obs_sum = 0 + 499 + 500 + 501 + 7000 + 7000 +
                                   2500000 + 20000000;
    char *before = render(), *after, s[256];
    const char *op = op_text[OG_MOP_CHECK];
    double prev = 0;

    for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
        og_metrics_store_call(OG_MOP_CHECK, obs[i], 0);
    after = render();

    for (size_t b = 0; b < N_BOUNDS; b++) {
        long long want = 0;

        for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
            want += obs[i] <= bounds[b].us;
        hist_series(s, sizeof s, op, bounds[b].le);
        assert_int_equal(delta(before, after, s), want);
    }
    assert_int_equal(delta(before, after, hist_series(s, sizeof s, op, "+Inf")),
                     sizeof obs / sizeof obs[0]);
    assert_int_equal(delta(before, after, hist_series(s, sizeof s, op, NULL)),
                     sizeof obs / sizeof obs[0]);
    hist_series(s, sizeof s, op, "sum");
    {
        double d = must_value(after, s) - must_value(before, s);
        double err = d - (double)obs_sum / 1e6;

        assert_true(err < 1e-6 && err > -1e-6);
    }
    for (size_t o = 0; o < OG_MOP_COUNT; o++) {
        prev = 0;
        for (size_t b = 0; b < N_BOUNDS; b++) {
            double v = must_value(after, hist_series(s, sizeof s, op_text[o],
                                                     bounds[b].le));
            assert_true(v >= prev);
            prev = v;
        }
        assert_true(must_value(after, hist_series(s, sizeof s, op_text[o],
                                                  "+Inf")) >= prev);
        assert_true(must_value(after, hist_series(s, sizeof s, op_text[o],
                                                  "+Inf")) ==
                    must_value(after, hist_series(s, sizeof s, op_text[o],
                                                  NULL)));
    }
    free(before);
    free(after);
}

/* A latency of exactly a bound lands in that bound's bucket (le is
 * inclusive) and not in the one below. */
static void metrics_bucket_bound_is_inclusive(void **state)
{
    const char *op = op_text[OG_MOP_ISSUE];
    char s[256];

    for (size_t b = 0; b < N_BOUNDS; b++) {
        char *before = render(), *after;

        og_metrics_store_call(OG_MOP_ISSUE, bounds[b].us, 0);
        after = render();
        assert_int_equal(
            delta(before, after, hist_series(s, sizeof s, op, bounds[b].le)),
            1);
        if (b > 0)
            assert_int_equal(delta(before, after, hist_series(s, sizeof s, op,
                                                              bounds[b - 1].le)),
                             0);
        free(before);
        free(after);
    }
}

/* oncegate_store_unavailable_total counts OG_ESTORE_UNAVAILABLE only. */
static void metrics_unavailable_counts_only_store_unavailable(void **state)
{
    char *before = render(), *after, u[2][128];

    og_metrics_store_call(OG_MOP_ADMIT, 10, OG_ESTORE_UNAVAILABLE);
    og_metrics_store_call(OG_MOP_ADMIT, 10, OG_ESTORE_UNAVAILABLE);
    og_metrics_store_call(OG_MOP_ADMIT, 10, OG_EINTERNAL);
    og_metrics_store_call(OG_MOP_ADMIT, 10, 0);
    og_metrics_store_call(OG_MOP_CONSUME, 10, OG_ESCHEMA);
    after = render();
    snprintf(u[0], sizeof u[0], "oncegate_store_unavailable_total{op=\"%s\"}",
             op_text[OG_MOP_ADMIT]);
    snprintf(u[1], sizeof u[1], "oncegate_store_unavailable_total{op=\"%s\"}",
             op_text[OG_MOP_CONSUME]);
    assert_int_equal(delta(before, after, u[0]), 2);
    assert_int_equal(delta(before, after, u[1]), 0);
    free(before);
    free(after);
}

/* The in-flight gauge follows +1 and -1 and comes back to where it was. */
static void metrics_inflight_gauge_goes_up_and_down(void **state)
{
    static const char *const g = "oncegate_http_requests_in_flight";
    char *base = render(), *up, *down;

    og_metrics_inflight(+1);
    og_metrics_inflight(+1);
    og_metrics_inflight(+1);
    up = render();
    og_metrics_inflight(-1);
    og_metrics_inflight(-1);
    og_metrics_inflight(-1);
    down = render();
    assert_int_equal(delta(base, up, g), 3);
    assert_int_equal(delta(base, down, g), 0);
    free(base);
    free(up);
    free(down);
}

/* Consume verdicts count by consumed="true|false". */
static void metrics_consumes_count_each_verdict(void **state)
{
    static const char *const t = "oncegate_consumes_total{consumed=\"true\"}";
    static const char *const f = "oncegate_consumes_total{consumed=\"false\"}";
    char *before = render(), *after;

    og_metrics_consume(true);
    og_metrics_consume(false);
    og_metrics_consume(false);
    after = render();
    assert_int_equal(delta(before, after, t), 1);
    assert_int_equal(delta(before, after, f), 2);
    free(before);
    free(after);
}

/* Response codes appear once seen, with exact counts; codes outside
 * 100..599 are not statuses and are not counted. */
static void metrics_response_codes_appear_once_seen(void **state)
{
#define CODE "oncegate_http_responses_total{code=\"%u\"}"
    char *before = render(), *after, s[128];

    snprintf(s, sizeof s, CODE, 418u);
    assert_true(value_of(before, s) < 0);
    og_metrics_response(418);
    og_metrics_response(418);
    og_metrics_response(100);
    og_metrics_response(599);
    og_metrics_response(99);
    og_metrics_response(600);
    after = render();
    assert_int_equal((long long)must_value(after, s), 2);
    snprintf(s, sizeof s, CODE, 100u);
    assert_int_equal((long long)must_value(after, s), 1);
    snprintf(s, sizeof s, CODE, 599u);
    assert_int_equal((long long)must_value(after, s), 1);
    snprintf(s, sizeof s, CODE, 99u);
    assert_true(value_of(after, s) < 0);
    snprintf(s, sizeof s, CODE, 600u);
    assert_true(value_of(after, s) < 0);
    free(before);
    free(after);
#undef CODE
}

/* ---- concurrency -------------------------------------------------------- */
enum { M_THREADS = 8, M_CALLS = 10000, M_LATENCY_US = 700 };

static atomic_int m_running;

static void *metrics_thread(void *arg)
{
    for (int i = 0; i < M_CALLS; i++) {
        og_metrics_consume(false);
        og_metrics_store_call(OG_MOP_TICKET_ROTATE, M_LATENCY_US, 0);
        og_metrics_inflight(+1);
        og_metrics_inflight(-1);
    }
    atomic_fetch_sub(&m_running, 1);
    return NULL;
}

/* Within one render taken while threads observe, the histogram stays
 * cumulative and +Inf equals _count. */
static void check_consistent(const char *text)
{
    const char *op = op_text[OG_MOP_TICKET_ROTATE];
    char s[256];
    double prev = 0, v;

    for (size_t b = 0; b < N_BOUNDS; b++) {
        v = must_value(text, hist_series(s, sizeof s, op, bounds[b].le));
        assert_true(v >= prev);
        prev = v;
    }
    v = must_value(text, hist_series(s, sizeof s, op, "+Inf"));
    assert_true(v >= prev);
    assert_true(v == must_value(text, hist_series(s, sizeof s, op, NULL)));
}

/* 8 threads × 10000 calls give exact totals, while renders taken during
 * the run stay consistent. */
static void metrics_concurrent_increments_are_exact(void **state)
{
    const char *op = op_text[OG_MOP_TICKET_ROTATE];
    char *before = render(), *after, s[256];
    pthread_t th[M_THREADS];
    double d, err;

    atomic_store(&m_running, M_THREADS);
    for (int t = 0; t < M_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, metrics_thread, NULL), 0);
    while (atomic_load(&m_running) > 0) {
        char *mid = render();

        check_consistent(mid);
        free(mid);
    }
    for (int t = 0; t < M_THREADS; t++)
        pthread_join(th[t], NULL);
    after = render();

    assert_int_equal(
        delta(before, after, "oncegate_consumes_total{consumed=\"false\"}"),
        M_THREADS * M_CALLS);
    assert_int_equal(delta(before, after, hist_series(s, sizeof s, op, NULL)),
                     M_THREADS * M_CALLS);
    assert_int_equal(delta(before, after, hist_series(s, sizeof s, op, "0.001")),
                     M_THREADS * M_CALLS);
    assert_int_equal(
        delta(before, after, hist_series(s, sizeof s, op, "0.0005")), 0);
    assert_int_equal(delta(before, after, "oncegate_http_requests_in_flight"),
                     0);
    hist_series(s, sizeof s, op, "sum");
    d = must_value(after, s) - must_value(before, s);
    err = d - (double)M_THREADS * M_CALLS * M_LATENCY_US / 1e6;
    assert_true(err < 1e-6 && err > -1e-6);
    check_consistent(after);
    free(before);
    free(after);
}

int main(void)
{
#define LOG_TEST(f) cmocka_unit_test_setup_teardown(f, log_setup, log_teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(secret_text_file_reads_trims_and_refuses),
        LOG_TEST(log_line_is_json_with_ts_level_event_first),
        LOG_TEST(log_levels_are_named_and_fields_optional),
        LOG_TEST(log_level_below_min_is_dropped),
        LOG_TEST(log_reserved_names_cannot_be_forged),
        LOG_TEST(log_long_string_is_cut),
        LOG_TEST(log_line_never_exceeds_64k),
        LOG_TEST(log_unserializable_line_writes_log_failed),
        LOG_TEST(log_open_failure_keeps_old_sink),
        LOG_TEST(log_close_and_dash_write_to_stderr),
        LOG_TEST(log_concurrent_writers_never_interleave),
        cmocka_unit_test(metrics_format_checker_refuses_bad_text),
        cmocka_unit_test(metrics_text_passes_format_check),
        cmocka_unit_test(metrics_every_family_has_help_and_type),
        cmocka_unit_test(metrics_series_are_stable),
        cmocka_unit_test(metrics_admissions_count_exactly_the_calls),
        cmocka_unit_test(metrics_histogram_is_cumulative_with_exact_count_and_sum),
        cmocka_unit_test(metrics_bucket_bound_is_inclusive),
        cmocka_unit_test(metrics_unavailable_counts_only_store_unavailable),
        cmocka_unit_test(metrics_inflight_gauge_goes_up_and_down),
        cmocka_unit_test(metrics_consumes_count_each_verdict),
        cmocka_unit_test(metrics_response_codes_appear_once_seen),
        cmocka_unit_test(metrics_concurrent_increments_are_exact),
    };
#undef LOG_TEST
    return t_run_tests("serve-unit", tests, NULL, NULL);
}
