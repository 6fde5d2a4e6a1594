/*
 * error.c — names and messages generated from the X-macro lists in
 * oncegate.h, so a code, its stable string and its message cannot drift.
 * Pure.
 */
#include <string.h>

#include "og_internal.h"

static const char *const og__err_names[] = {
#define X(name, code, msg) code,
    OG_ERRNO_MAP(X)
#undef X
};

static const char *const og__err_msgs[] = {
#define X(name, code, msg) msg,
    OG_ERRNO_MAP(X)
#undef X
};

/* -1 -> 0, -2 -> 1, ...; -1 when err is not an OG_E* code. */
static int og__err_index(int err)
{
    if (err >= 0 || err < -OG__ERR_COUNT)
        return -1;
    return -err - 1;
}

const char *og_strerror(int err)
{
    int i = og__err_index(err);
    return i < 0 ? "unknown error" : og__err_msgs[i];
}

const char *og_err_name(int err)
{
    int i = og__err_index(err);
    return i < 0 ? "unknown_error" : og__err_names[i];
}

static const char *const og__status_names[] = {
#define X(name, text) text,
    OG_OP_STATUS_MAP(X)
#undef X
};

const char *og_op_status_name(og_op_status st)
{
    if ((unsigned)st >= sizeof og__status_names / sizeof og__status_names[0])
        return "?";
    return og__status_names[st];
}

int og__op_status_parse(const char *text)
{
    for (size_t i = 0; i < sizeof og__status_names / sizeof og__status_names[0]; i++)
        if (text && strcmp(text, og__status_names[i]) == 0)
            return (int)i;
    return -1;
}

static const char *const og__outcome_names[] = {
#define X(name, text) text,
    OG_OUTCOME_MAP(X)
#undef X
};

const char *og_outcome_name(og_outcome o)
{
    if ((unsigned)o >= sizeof og__outcome_names / sizeof og__outcome_names[0])
        return "?";
    return og__outcome_names[o];
}

static const char *const og__refusal_names[] = {
#define X(name, text) text,
    OG_REFUSAL_MAP(X)
#undef X
};

const char *og_refusal_name(og_refusal r)
{
    if ((unsigned)r >= sizeof og__refusal_names / sizeof og__refusal_names[0])
        return "?";
    return og__refusal_names[r];
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
