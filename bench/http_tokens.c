/*
 * bench/http_tokens.c — og-bench-http-tokens: pre-issued grant tokens for
 * bench/http, so the HTTP run measures the service and not the issuer.
 *
 *   og-bench-http-tokens --key PRIVATE.jwk --issuer I --audience A
 *                        --subject S --count N --out FILE
 *                        [--threads T] [--ttl SECONDS] [--verify-dir DIR]
 *       Signs N grants (og_grant_token_sign: iat now, exp now + ttl
 *       (default 1800 s), act "credit.apply", prm account "A-<i>", amount
 *       "1.00", currency "USD", a fresh jti each) on T threads (default:
 *       the online CPUs) and writes one line per grant:
 *         OPERATION_UUID TOKEN ACCOUNT
 *       with a fresh random version-4 UUID per line (libsodium
 *       randombytes). With --verify-dir, then verifies up to 20000 of the
 *       tokens on ONE thread against the public keys in DIR, as the server
 *       does for each admission (og_grant_verify, bound to the request), so
 *       the report can show what signature verification costs per request.
 *
 *   og-bench-http-tokens --renew-ids --in FILE --out FILE2 [--limit N]
 *       Copies the first N lines (default all) of a token file with a NEW
 *       operation id on each: the same grants presented again as other
 *       operations, i.e. replays the store must refuse.
 *
 * stdout gets one line for the script:
 *   tokens count=N seconds=S rate=R/s [verified=V verify_rate=W/s verify_us=U]
 *   renew count=N
 * progress and diagnostics go to stderr. The output is written to FILE.tmp
 * and renamed, so a reader never sees half a file. Exit 0 on success, 1 on
 * any failure, 2 on bad usage. Tokens are bench credentials for a throwaway
 * audience; they are written because the load generator must present them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "oncegate/oncegate.h"

#define TOK_MAX_COUNT 10000000L  /* lines in one file */
#define TOK_MAX_THREADS 256
#define TOK_VERIFY_MAX 20000     /* tokens verified for the rate */
#define TOK_ACTION "credit.apply"
#define TOK_AMOUNT "1.00"
#define TOK_CURRENCY "USD"
#define TOK_LINE_MAX (OG_UUID_LEN + 1 + OG_TOKEN_MAX + 1 + OG_ID_MAX + 2)

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A random version-4 UUID, canonical lower case, from libsodium's CSPRNG
 * (thread-safe once sodium_init() has run). */
static void uuid_v4(char out[OG_UUID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    size_t o = 0;

    randombytes_buf(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 0x0f];
    }
    out[o] = '\0';
}

/* ===========================================================================
 * A growable text buffer with a hard cap: max, set when it is made, is the
 * most it ever holds (a signing job's lines, each at most TOK_LINE_MAX
 * bytes, at most TOK_MAX_COUNT of them), and it never grows past it.
 * ========================================================================= */
typedef struct tok_buf {
    char *p;
    size_t len, cap, max;
} tok_buf;

/* Positive, so that a job's err tells them from the (negative) OG_E*
 * codes. */
#define TOK_BUF_NOMEM 1  /* realloc failed */
#define TOK_BUF_FULL 2   /* more than max would be needed */

/* Makes room for more bytes after len. 0, TOK_BUF_FULL when len + more
 * exceeds max (nothing changes), or TOK_BUF_NOMEM. */
static int tok_buf_reserve(tok_buf *b, size_t more)
{
    if (more > b->max - b->len)
        return TOK_BUF_FULL;
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap - b->len < more)
        cap = cap > b->max / 2 ? b->max : cap * 2;
    if (cap > b->max)
        cap = b->max;
    char *p = realloc(b->p, cap);
    if (!p)
        return TOK_BUF_NOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* ===========================================================================
 * Signing
 * ========================================================================= */
typedef struct sign_job {
    const og_signer *signer;
    const char *issuer, *audience, *subject;
    int64_t iat, exp;
    long first, count;   /* the global line numbers [first, first+count) */
    tok_buf out;
    int err;             /* 0, the first OG_E* code, or a TOK_BUF_* */
    pthread_t tid;
} sign_job;

static void *sign_thread(void *arg)
{
    sign_job *j = arg;

    for (long i = j->first; i < j->first + j->count; i++) {
        char jti[OG_GRANT_ID_LEN + 1], account[32], op[OG_UUID_LEN + 1];
        char *token = NULL;
        int rc;

        if ((rc = og_grant_new_id(jti)) < 0) {
            j->err = rc;
            return NULL;
        }
        snprintf(account, sizeof account, "A-%ld", i);
        og_grant_claims c = {
            .iss = j->issuer,
            .jti = jti,
            .iat = j->iat,
            .exp = j->exp,
            .sub = j->subject,
            .aud = j->audience,
            .act = TOK_ACTION,
            .prm = {.account = account, .amount = TOK_AMOUNT,
                    .currency = TOK_CURRENCY},
        };
        if ((rc = og_grant_token_sign(j->signer, &c, &token)) < 0) {
            j->err = rc;
            return NULL;
        }
        uuid_v4(op);
        size_t need = strlen(op) + strlen(token) + strlen(account) + 3;
        if ((rc = need > TOK_LINE_MAX ? TOK_BUF_FULL
                                      : tok_buf_reserve(&j->out, need)) != 0) {
            free(token);
            j->err = rc;
            return NULL;
        }
        j->out.len += (size_t)sprintf(j->out.p + j->out.len, "%s %s %s\n", op,
                                      token, account);
        free(token);
    }
    return NULL;
}

/* Writes the buffers in order to path.tmp, then renames it to path. */
static int write_all(const char *path, sign_job *jobs, int n)
{
    char tmp[4096];
    int status = -1;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "og-bench-http-tokens: path too long\n");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "og-bench-http-tokens: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (jobs[i].out.len &&
            fwrite(jobs[i].out.p, 1, jobs[i].out.len, f) != jobs[i].out.len)
            goto out;
    if (fflush(f) != 0)
        goto out;
    status = 0;
out:
    if (fclose(f) != 0)
        status = -1;
    if (status == 0 && rename(tmp, path) != 0)
        status = -1;
    if (status != 0) {
        fprintf(stderr, "og-bench-http-tokens: writing %s: %s\n", path,
                strerror(errno));
        unlink(tmp);
    }
    return status;
}

/* Verifies up to TOK_VERIFY_MAX of the signed lines on this thread, as the
 * server's admission does (bound to subject, action and parameters). Prints
 * the figures onto the stdout line. 0, or -1 when a token does not verify
 * (which would make the HTTP run measure refusals). */
static int verify_rate(const char *dir, const char *audience,
                       const char *subject, sign_job *jobs, int n)
{
    og_keyset *ks = NULL;
    size_t added = 0;
    long done = 0;
    int rc, status = -1;
    char *line = NULL;

    if ((rc = og_keyset_new(&ks)) < 0 ||
        (rc = og_keyset_load_dir(ks, dir, &added)) < 0) {
        fprintf(stderr, "og-bench-http-tokens: keys in %s: %s (%s)\n", dir,
                og_err_name(rc), og_strerror(rc));
        goto out;
    }
    og_grant_policy pol;
    og_grant_policy_init(&pol, audience, NULL);
    line = malloc(TOK_LINE_MAX);
    if (!line)
        goto out;

    double t0 = now_mono();
    for (int k = 0; k < n && done < TOK_VERIFY_MAX; k++) {
        const char *p = jobs[k].out.p, *end = p + jobs[k].out.len;
        while (p < end && done < TOK_VERIFY_MAX) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            if (len >= TOK_LINE_MAX)
                goto out;
            memcpy(line, p, len);
            line[len] = '\0';
            p += len + 1;
            char *tok = strchr(line, ' ');
            char *acct = tok ? strchr(tok + 1, ' ') : NULL;
            if (!acct)
                goto out;
            *tok++ = '\0';
            *acct++ = '\0';
            og_grant_request req = {
                .caller = subject, .action = TOK_ACTION, .account = acct,
                .amount = TOK_AMOUNT, .currency = TOK_CURRENCY,
            };
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
            og_validated_grant v;
            if ((rc = og_grant_verify(ks, &pol, tok, &req, now_us, &v)) < 0) {
                fprintf(stderr, "og-bench-http-tokens: a signed token does "
                                "not verify: %s\n", og_err_name(rc));
                goto out;
            }
            done++;
        }
    }
    double el = now_mono() - t0;
    if (done > 0 && el > 0)
        printf(" verified=%ld verify_rate=%.0f/s verify_us=%.1f", done,
               (double)done / el, el * 1e6 / (double)done);
    status = 0;
out:
    free(line);
    og_keyset_free(ks);
    return status;
}

static int cmd_sign(const char *key, const char *issuer, const char *audience,
                    const char *subject, long count, const char *out,
                    int threads, long ttl, const char *verify_dir)
{
    og_signer *signer = NULL;
    sign_job *jobs = NULL;
    int rc, status = 1, started = 0;

    if ((rc = og_signer_load_file(key, &signer)) < 0) {
        fprintf(stderr, "og-bench-http-tokens: %s: %s (%s)\n", key,
                og_err_name(rc), og_strerror(rc));
        return 1;
    }
    if (threads > count)
        threads = (int)count;
    jobs = calloc((size_t)threads, sizeof *jobs);
    if (!jobs)
        goto out;

    int64_t now = (int64_t)time(NULL);
    long per = count / threads, extra = count % threads, next = 0;
    double t0 = now_mono();
    for (int i = 0; i < threads; i++) {
        sign_job *j = &jobs[i];
        *j = (sign_job){
            .signer = signer, .issuer = issuer, .audience = audience,
            .subject = subject, .iat = now, .exp = now + ttl,
            .first = next, .count = per + (i < extra ? 1 : 0),
        };
        /* count <= TOK_MAX_COUNT lines; where that many TOK_LINE_MAX lines
         * cannot be addressed, the buffer is refused here, not grown. */
        if ((size_t)j->count > SIZE_MAX / TOK_LINE_MAX) {
            fprintf(stderr, "og-bench-http-tokens: %ld tokens per thread do "
                            "not fit in memory here\n", j->count);
            break;
        }
        j->out.max = (size_t)j->count * TOK_LINE_MAX;
        next += j->count;
        if ((rc = pthread_create(&j->tid, NULL, sign_thread, j)) != 0) {
            fprintf(stderr, "og-bench-http-tokens: pthread_create: %s\n",
                    strerror(rc));
            break;
        }
        started++;
    }
    bool ok = started == threads;
    for (int i = 0; i < started; i++) {
        pthread_join(jobs[i].tid, NULL);
        if (jobs[i].err) {
            ok = false;
            fprintf(stderr, "og-bench-http-tokens: signing: %s\n",
                    jobs[i].err == TOK_BUF_NOMEM  ? "out of memory"
                    : jobs[i].err == TOK_BUF_FULL ? "a line over its cap"
                                                  : og_strerror(jobs[i].err));
        }
    }
    double el = now_mono() - t0;
    if (!ok || write_all(out, jobs, threads) != 0)
        goto out;
    printf("tokens count=%ld seconds=%.2f rate=%.0f/s threads=%d", count, el,
           el > 0 ? (double)count / el : 0.0, threads);
    if (verify_dir &&
        verify_rate(verify_dir, audience, subject, jobs, threads) != 0) {
        printf("\n");
        goto out;
    }
    printf("\n");
    status = 0;
out:
    if (jobs)
        for (int i = 0; i < threads; i++)
            free(jobs[i].out.p);
    free(jobs);
    og_signer_free(signer);
    return status;
}

/* ===========================================================================
 * --renew-ids
 * ========================================================================= */

/* Reads one line of f, its '\n' included, into buf (size bytes, not
 * terminated): its length, 0 at the end of the file, or size when the line
 * does not fit (the caller refuses it). A fixed buffer, where getline()
 * would grow one without a cap. */
static size_t read_line(FILE *f, char *buf, size_t size)
{
    size_t n = 0;
    int c;

    while (n < size && (c = getc_unlocked(f)) != EOF) {
        buf[n++] = (char)c;
        if (c == '\n')
            break;
    }
    return n;
}

static int cmd_renew(const char *in, const char *out, long limit)
{
    char tmp[4096];
    FILE *fi = NULL, *fo = NULL;
    char *line = NULL;
    size_t len;
    long n = 0;
    int status = 1;

    if (snprintf(tmp, sizeof tmp, "%s.tmp", out) >= (int)sizeof tmp)
        return 1;
    if (!(fi = fopen(in, "r"))) {
        fprintf(stderr, "og-bench-http-tokens: %s: %s\n", in, strerror(errno));
        return 1;
    }
    if (!(fo = fopen(tmp, "w"))) {
        fprintf(stderr, "og-bench-http-tokens: %s: %s\n", tmp, strerror(errno));
        goto out;
    }
    /* One byte more than a line may have, so a longer one is seen. */
    if (!(line = malloc(TOK_LINE_MAX + 1))) {
        fprintf(stderr, "og-bench-http-tokens: out of memory\n");
        goto out;
    }
    while ((limit < 0 || n < limit) &&
           (len = read_line(fi, line, TOK_LINE_MAX + 1)) > 0) {
        char op[OG_UUID_LEN + 1];
        char *rest = memchr(line, ' ', len);
        if (!rest || len > TOK_LINE_MAX) {
            fprintf(stderr, "og-bench-http-tokens: %s: line %ld malformed\n",
                    in, n + 1);
            goto out;
        }
        uuid_v4(op);
        if (fputs(op, fo) == EOF ||
            fwrite(rest, 1, (size_t)(line + len - rest), fo) !=
                (size_t)(line + len - rest))
            goto out;
        n++;
    }
    if (ferror(fi))
        goto out;
    if (fflush(fo) != 0)
        goto out;
    status = 0;
out:
    if (fo && fclose(fo) != 0)
        status = 1;
    if (fi)
        fclose(fi);
    free(line);
    if (status == 0 && rename(tmp, out) != 0) {
        fprintf(stderr, "og-bench-http-tokens: %s: %s\n", out, strerror(errno));
        status = 1;
    }
    if (status != 0)
        unlink(tmp);
    else
        printf("renew count=%ld\n", n);
    return status;
}

/* ===========================================================================
 * main
 * ========================================================================= */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: og-bench-http-tokens --key PRIVATE.jwk --issuer I "
            "--audience A --subject S\n"
            "                            --count N --out FILE [--threads T]"
            " [--ttl SECONDS]\n"
            "                            [--verify-dir KEYS_DIR]\n"
            "       og-bench-http-tokens --renew-ids --in FILE --out FILE2"
            " [--limit N]\n");
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    enum { O_KEY = 256, O_ISSUER, O_AUD, O_SUB, O_COUNT, O_OUT, O_THREADS,
           O_TTL, O_VERIFY, O_RENEW, O_IN, O_LIMIT };
    static const struct option longopts[] = {
        {"key", required_argument, NULL, O_KEY},
        {"issuer", required_argument, NULL, O_ISSUER},
        {"audience", required_argument, NULL, O_AUD},
        {"subject", required_argument, NULL, O_SUB},
        {"count", required_argument, NULL, O_COUNT},
        {"out", required_argument, NULL, O_OUT},
        {"threads", required_argument, NULL, O_THREADS},
        {"ttl", required_argument, NULL, O_TTL},
        {"verify-dir", required_argument, NULL, O_VERIFY},
        {"renew-ids", no_argument, NULL, O_RENEW},
        {"in", required_argument, NULL, O_IN},
        {"limit", required_argument, NULL, O_LIMIT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *key = NULL, *issuer = NULL, *aud = NULL, *sub = NULL;
    const char *out = NULL, *in = NULL, *verify_dir = NULL;
    long count = 0, threads = 0, ttl = 1800, limit = -1;
    bool renew = false;
    int opt;

    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_KEY: key = optarg; break;
        case O_ISSUER: issuer = optarg; break;
        case O_AUD: aud = optarg; break;
        case O_SUB: sub = optarg; break;
        case O_OUT: out = optarg; break;
        case O_IN: in = optarg; break;
        case O_VERIFY: verify_dir = optarg; break;
        case O_RENEW: renew = true; break;
        case O_COUNT:
            if (parse_long(optarg, 1, TOK_MAX_COUNT, &count) != 0)
                goto bad;
            break;
        case O_THREADS:
            if (parse_long(optarg, 1, TOK_MAX_THREADS, &threads) != 0)
                goto bad;
            break;
        case O_TTL:
            if (parse_long(optarg, 1, 86400, &ttl) != 0)
                goto bad;
            break;
        case O_LIMIT:
            if (parse_long(optarg, 0, TOK_MAX_COUNT, &limit) != 0)
                goto bad;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind != argc || !out)
        goto bad;
    if (sodium_init() < 0) {
        fprintf(stderr, "og-bench-http-tokens: sodium_init failed\n");
        return 1;
    }
    if (renew) {
        if (!in)
            goto bad;
        return cmd_renew(in, out, limit);
    }
    if (!key || !issuer || !aud || !sub || count == 0)
        goto bad;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > TOK_MAX_THREADS ? TOK_MAX_THREADS : n;
    }
    return cmd_sign(key, issuer, aud, sub, count, out, (int)threads, ttl,
                    verify_dir);
bad:
    usage(stderr);
    return 2;
}
