/*
 * error.c — names and messages generated from the X-macro lists in
 * oncegate/core.h, so a code, its stable string and its message cannot drift.
 * Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core_int.h"

static const char *const err_names[] = {
#define X(name, code, msg) code,
    OG_ERRNO_MAP(X)
#undef X
};

static const char *const err_msgs[] = {
#define X(name, code, msg) msg,
    OG_ERRNO_MAP(X)
#undef X
};

/* -1 -> 0, -2 -> 1, ...; -1 when err is not an OG_E* code. */
static int err_index(int err)
{
    if (err >= 0 || err < -OG__ERR_COUNT)
        return -1;
    return -err - 1;
}

const char *og_strerror(int err)
{
    int i = err_index(err);
    return i < 0 ? "unknown error" : err_msgs[i];
}

const char *og_err_name(int err)
{
    int i = err_index(err);
    return i < 0 ? "unknown_error" : err_names[i];
}

/* Name tables: name i of table t (n entries), "?" out of range; the index
 * of text in t, -1 when absent. */
#define NAMES(t) (t), sizeof(t) / sizeof(t)[0]

static const char *name_at(const char *const *t, size_t n, unsigned i)
{
    return i < n ? t[i] : "?";
}

static int name_index(const char *const *t, size_t n, const char *text)
{
    for (size_t i = 0; text && i < n; i++)
        if (strcmp(text, t[i]) == 0)
            return (int)i;
    return -1;
}

static const char *const status_names[] = {
#define X(name, text) text,
    OG_OP_STATUS_MAP(X)
#undef X
};

const char *og_op_status_name(og_op_status st)
{
    return name_at(NAMES(status_names), (unsigned)st);
}

int og__op_status_parse(const char *text)
{
    return name_index(NAMES(status_names), text);
}

static const char *const kind_names[] = {
#define X(name, text) text,
    OG_OP_KIND_MAP(X)
#undef X
};

const char *og_op_kind_name(og_op_kind k)
{
    return name_at(NAMES(kind_names), (unsigned)k);
}

int og__op_kind_parse(const char *text)
{
    return name_index(NAMES(kind_names), text);
}

static const char *const outcome_names[] = {
#define X(name, text) text,
    OG_OUTCOME_MAP(X)
#undef X
};

const char *og_outcome_name(og_outcome o)
{
    return name_at(NAMES(outcome_names), (unsigned)o);
}

static const char *const refusal_names[] = {
#define X(name, text) text,
    OG_REFUSAL_MAP(X)
#undef X
};

const char *og_refusal_name(og_refusal r)
{
    return name_at(NAMES(refusal_names), (unsigned)r);
}

void *og__grow(void *v, size_t size, size_t *cap, size_t first, size_t max)
{
    size_t want = *cap ? 2 * *cap : first;
    void *grown;

    if (*cap >= max || size == 0)
        return NULL;
    if (want > max || want < *cap) /* the cap, or a doubling that wrapped */
        want = max;
    if (want > SIZE_MAX / size || !(grown = realloc(v, want * size)))
        return NULL;
    *cap = want;
    return grown;
}

int og__copy(char *dst, size_t n, const char *src)
{
    size_t len;

    if (!src || n == 0)
        return -1;
    len = strlen(src);
    if (len >= n)
        return -1;
    memcpy(dst, src, len + 1);
    return 0;
}
