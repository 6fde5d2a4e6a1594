/*
 * harness.c — serve_test's harness: the suite's state, servers as real
 * processes (started, waited for, stopped through tests/support), the
 * PostgreSQL outage relay, sites (a store and its configuration), the
 * store's write lock, dev mode's files, and the group and per-test
 * fixtures. See harness.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "harness.h"

extern char **environ;

/* ===========================================================================
 * Small helpers
 * ========================================================================= */

void uuid4(char out[OG_UUID_LEN + 1])
{
    unsigned char b[16];

    randombytes_buf(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, OG_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
}

void api_key_new(char out[API_KEY_LEN])
{
    unsigned char b[32];
    char enc[48];

    randombytes_buf(b, sizeof b);
    sodium_bin2base64(enc, sizeof enc, b, sizeof b,
                      sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    snprintf(out, API_KEY_LEN, "ogt_%s", enc);
}

void sha256_hex(const char *s, char out[65])
{
    unsigned char h[crypto_hash_sha256_BYTES];

    crypto_hash_sha256(h, (const unsigned char *)s, strlen(s));
    sodium_bin2hex(out, 65, h, sizeof h);
}

int write_file(const char *path, const char *text)
{
    char tmp[PATHLEN + 8];
    FILE *f;

    /* Written beside and renamed: a reload never sees half a file. */
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb")))
        return -1;
    if (fputs(text, f) < 0) {
        fclose(f);
        return -1;
    }
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int copy_file(const char *from, const char *dir)
{
    char to[PATHLEN + 256];
    const char *base = strrchr(from, '/');
    char *text = t_slurp(from, NULL);
    int fd, rc = -1;

    if (!text)
        return -1;
    snprintf(to, sizeof to, "%s/%s", dir, base ? base + 1 : from);
    fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text))
        rc = 0;
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ===========================================================================
 * Suite state
 * ========================================================================= */

bool g_pg;                 /* the backend under test */
char g_tmp[256];           /* everything this run writes */
const char *g_bin;         /* the oncegate binary */
const char *g_src;         /* the source tree */
static char g_keys_dir[PATHLEN];  /* the issuer's key pair */
og_signer *g_signer;       /* the issuer's private key, for tokens the
                              test signs itself */
char g_kid[OG_KID_MAX + 1];
char g_pub_path[PATHLEN], g_priv_path[PATHLEN];

/* PostgreSQL: the cluster from OG_TEST_PG_URL. */
static char g_pg_user[128], g_pg_pass[256];
char g_pg_host[256];
int g_pg_port;

struct principal g_p[P_COUNT] = {
    {"issuer-1", "issuer", R_ISSUER, "", ""},
    {"agent-1", "agent", R_AGENT, "", ""},
    {"agent-2", "agent", R_AGENT, "", ""},
    {"enforcer-1", "enforcer", R_ENFORCER, "", ""},
    {"revoker-1", "revoker", R_REVOKER, "", ""},
    {"operator-1", "operator", R_OPERATOR, "", ""},
    {"payout-admin-1", "payout-admin", R_PAYOUT_ADMIN, "", ""},
    {"clerk-22", "clerk", R_CLERK, "", ""},
    {"approver-5", "approver", R_APPROVER, "", ""},
    {"approver-6", "approver", R_APPROVER, "", ""},
    {"clerk-approver-1", "clerk", R_CLERK | R_APPROVER, "", ""},
};

/* ---------------------------------------------------------------------------
 * Every secret the suite used, for the log scan.
 * ------------------------------------------------------------------------- */

static pthread_mutex_t g_secret_mu = PTHREAD_MUTEX_INITIALIZER;
char **g_secrets;
size_t g_n_secrets;
static size_t g_cap_secrets;

void secret_add(const char *s)
{
    if (!s || strlen(s) < 12) /* shorter fragments would match by chance */
        return;
    pthread_mutex_lock(&g_secret_mu);
    for (size_t i = 0; i < g_n_secrets; i++)
        if (strcmp(g_secrets[i], s) == 0) {
            pthread_mutex_unlock(&g_secret_mu);
            return;
        }
    if (g_n_secrets == g_cap_secrets) {
        size_t cap = g_cap_secrets ? 2 * g_cap_secrets : 256;
        char **v = realloc(g_secrets, cap * sizeof *v);
        if (!v)
            abort();
        g_secrets = v;
        g_cap_secrets = cap;
    }
    if (!(g_secrets[g_n_secrets] = strdup(s)))
        abort();
    g_n_secrets++;
    pthread_mutex_unlock(&g_secret_mu);
}

void secret_add_token(const char *tok)
{
    const char *d1, *d2;
    char seg[OG_TOKEN_MAX + 1];

    secret_add(tok);
    if (!tok || !(d1 = strchr(tok, '.')) || !(d2 = strchr(d1 + 1, '.')))
        return;
    if ((size_t)(d2 - d1 - 1) < sizeof seg) {
        memcpy(seg, d1 + 1, (size_t)(d2 - d1 - 1));
        seg[d2 - d1 - 1] = '\0';
        secret_add(seg);
    }
    secret_add(d2 + 1);
}

void secret_add_private_jwk(const char *path)
{
    json_t *j = json_load_file(path, 0, NULL);

    if (j)
        secret_add(jstr(j, "d"));
    json_decref(j);
}

/* ---------------------------------------------------------------------------
 * Every file a server wrote, for the log scan.
 * ------------------------------------------------------------------------- */

struct outfile g_files[512];
size_t g_n_files;

void outfile_add(const char *path, int kind)
{
    if (g_n_files < sizeof g_files / sizeof g_files[0]) {
        snprintf(g_files[g_n_files].path, PATHLEN, "%s", path);
        g_files[g_n_files++].kind = kind;
    }
}

char g_bad_exits[8192];

/* ===========================================================================
 * Servers
 * ========================================================================= */

static srv g_srvs[128];
unsigned g_srv_seq;

srv *srv_new(int log_kind, const char *arg, ...)
{
    srv *s = NULL;
    va_list ap;
    int n = 0;

    for (size_t i = 0; i < sizeof g_srvs / sizeof g_srvs[0]; i++)
        if (!g_srvs[i].used) {
            s = &g_srvs[i];
            break;
        }
    if (!s)
        abort();
    memset(s, 0, sizeof *s);
    s->used = true;
    s->log_kind = log_kind;
    s->argv[n++] = strdup(g_bin);
    va_start(ap, arg);
    for (const char *a = arg; a; a = va_arg(ap, const char *)) {
        if (n >= 30)
            abort();
        s->argv[n++] = strdup(a);
    }
    va_end(ap);
    s->argv[n] = NULL;
    return s;
}

void srv_add_arg(srv *s, const char *arg)
{
    int n = 0;

    while (s->argv[n])
        n++;
    if (n >= 30)
        abort();
    s->argv[n] = strdup(arg);
    s->argv[n + 1] = NULL;
}

static void srv_free(srv *s)
{
    for (int i = 0; s->argv[i]; i++)
        free(s->argv[i]);
    for (int i = 0; s->env[i]; i++)
        free(s->env[i]);
    memset(s, 0, sizeof *s);
}

void srv_setenv(srv *s, const char *kv)
{
    int i = 0;

    while (s->env[i])
        i++;
    if (i + 1 >= (int)(sizeof s->env / sizeof s->env[0]))
        abort();
    s->env[i] = strdup(kv);
}

int srv_exec(srv *s)
{
    unsigned n = ++g_srv_seq;
    char **envp = NULL;
    size_t ne = 0, nx = 0;

    snprintf(s->out_path, PATHLEN, "%s/srv-%03u.out", g_tmp, n);
    snprintf(s->log_path, PATHLEN, "%s/srv-%03u.log", g_tmp, n);
    outfile_add(s->out_path, OUT_STDOUT);
    outfile_add(s->log_path, s->log_kind);
    s->port = 0;
    s->base[0] = '\0';
    if (s->env[0]) { /* this process's environment plus s's own */
        while (environ[ne])
            ne++;
        while (s->env[nx])
            nx++;
        if (!(envp = calloc(ne + nx + 1, sizeof *envp)))
            abort();
        memcpy(envp, environ, ne * sizeof *envp);
        memcpy(envp + ne, s->env, nx * sizeof *envp);
    }
    s->pid = t_proc_spawn(s->argv, envp, s->out_path, s->log_path);
    free(envp);
    return s->pid > 0 ? 0 : -1;
}

void srv_print_log(const srv *s)
{
    t_proc_print_output(s->out_path, s->log_path);
}

int srv_wait_ready_as(srv *s, const char *prefix, int timeout_ms)
{
    int rc = t_proc_wait_ready(s->pid, s->out_path, prefix, timeout_ms,
                               &s->port, &s->last_status);

    if (rc == -1)
        s->pid = 0;
    else if (s->port > 0)
        snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
    return rc;
}

int srv_wait_ready(srv *s, int timeout_ms)
{
    return srv_wait_ready_as(s, READY_PREFIX, timeout_ms);
}

int srv_start(srv *s)
{
    int rc;

    if (srv_exec(s) != 0)
        return -1;
    rc = srv_wait_ready(s, READY_MS);
    if (rc != 0) {
        fprintf(stderr, "server %s did not become ready (%s, exit %d)\n",
                s->argv[1], rc == -1 ? "exited" : "timeout",
                rc == -1 ? t_proc_exit_code(s->last_status) : -1);
        srv_print_log(s);
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
        }
        return -1;
    }
    return 0;
}

int srv_stop(srv *s, int sig, int timeout_ms)
{
    int code;

    if (s->pid <= 0)
        return -1;
    code = t_proc_stop(s->pid, sig, timeout_ms, &s->last_status);
    if (sig == SIGTERM && code != 0) {
        size_t n = strlen(g_bad_exits);
        snprintf(g_bad_exits + n, sizeof g_bad_exits - n,
                 "  pid %ld (%s): SIGTERM ended in %s %d\n", (long)s->pid,
                 s->log_path, code < 0 ? "a kill after" : "exit", code);
        fprintf(stderr, "server pid %ld (%s) did not exit 0 after SIGTERM: %d\n",
                (long)s->pid, s->log_path, code);
        srv_print_log(s);
    }
    s->pid = 0;
    return code;
}

int srv_restart(srv *s)
{
    if (srv_stop(s, SIGTERM, EXIT_MS) != 0)
        return -1;
    return srv_start(s);
}

void srv_stop_all(bool include_group)
{
    for (size_t i = 0; i < sizeof g_srvs / sizeof g_srvs[0]; i++) {
        srv *s = &g_srvs[i];
        if (!s->used || (s->group && !include_group))
            continue;
        if (s->pid > 0)
            srv_stop(s, SIGTERM, EXIT_MS);
        srv_free(s);
    }
}

void kill_all_at_exit(void)
{
    for (size_t i = 0; i < sizeof g_srvs / sizeof g_srvs[0]; i++)
        if (g_srvs[i].used && g_srvs[i].pid > 0) {
            kill(g_srvs[i].pid, SIGKILL);
            waitpid(g_srvs[i].pid, NULL, 0);
            g_srvs[i].pid = 0;
        }
}

bool log_wait_for(const srv *s, const char *needle, int timeout_ms)
{
    return t_file_wait_for(s->log_path, needle, timeout_ms);
}

json_t *log_request_find(const srv *s, const char *key,
                         const char *value, const char *need,
                         int timeout_ms)
{
    int64_t deadline = t_now_ms() + timeout_ms;

    do {
        char *log = t_slurp(s->log_path, NULL), *save = NULL;
        for (char *line = log ? strtok_r(log, "\n", &save) : NULL; line;
             line = strtok_r(NULL, "\n", &save)) {
            json_t *j;
            if (!strstr(line, value))
                continue;
            j = json_loads(line, 0, NULL);
            if (jstr(j, "event") && strcmp(jstr(j, "event"), "request") == 0 &&
                jstr(j, key) && strcmp(jstr(j, key), value) == 0 &&
                (!need || json_object_get(j, need))) {
                free(log);
                return j;
            }
            json_decref(j);
        }
        free(log);
        t_sleep_ms(50);
    } while (t_now_ms() < deadline);
    return NULL;
}

json_t *log_request_event(const srv *s, const char *cid, int timeout_ms)
{
    return log_request_find(s, "correlation_id", cid, NULL, timeout_ms);
}

/* ===========================================================================
 * PostgreSQL helpers and the outage relay
 * ========================================================================= */

static int pg_parse_base(void)
{
    const char *url = getenv("OG_TEST_PG_URL");
    PQconninfoOption *opts;
    char *err = NULL;

    if (!url || !(opts = PQconninfoParse(url, &err))) {
        fprintf(stderr, "OG_TEST_PG_URL unparsable: %s\n", err ? err : "");
        PQfreemem(err);
        return -1;
    }
    snprintf(g_pg_user, sizeof g_pg_user, "postgres");
    snprintf(g_pg_host, sizeof g_pg_host, "127.0.0.1");
    g_pg_port = 5432;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !*o->val)
            continue;
        if (strcmp(o->keyword, "user") == 0)
            snprintf(g_pg_user, sizeof g_pg_user, "%s", o->val);
        else if (strcmp(o->keyword, "password") == 0)
            snprintf(g_pg_pass, sizeof g_pg_pass, "%s", o->val);
        else if (strcmp(o->keyword, "host") == 0 ||
                 strcmp(o->keyword, "hostaddr") == 0)
            snprintf(g_pg_host, sizeof g_pg_host, "%s", o->val);
        else if (strcmp(o->keyword, "port") == 0)
            g_pg_port = atoi(o->val);
    }
    PQconninfoFree(opts);
    return 0;
}

static void pg_url(char *out, size_t n, const char *db, int port)
{
    snprintf(out, n, "postgresql://%s%s%s@%s:%d/%s", g_pg_user,
             g_pg_pass[0] ? ":" : "", g_pg_pass, g_pg_host, port, db);
}

int pg_admin(const char *sql)
{
    PGconn *c = PQconnectdb(getenv("OG_TEST_PG_URL"));
    PGresult *r;
    int ok;

    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg_admin connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    r = PQexec(c, sql);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
         PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        fprintf(stderr, "pg_admin %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return ok ? 0 : -1;
}

#define RELAY_MAX 128

/* See harness.h. */
struct relay {
    int lfd, port;
    int wake[2];
    pthread_t th;
    pthread_mutex_t mu;
    bool down, quit, mute;     /* under mu */
    int a[RELAY_MAX], b[RELAY_MAX];
    int n;                     /* the thread's own */
};

/* Moves what from has to to; discard: reads it and drops it. */
static int relay_pump(int from, int to, bool discard)
{
    char buf[65536];
    ssize_t n = recv(from, buf, sizeof buf, 0), off = 0;

    if (n <= 0)
        return -1;
    while (!discard && off < n) {
        ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += w;
    }
    return 0;
}

static void relay_close_pair(relay *r, int i)
{
    close(r->a[i]);
    close(r->b[i]);
    r->a[i] = r->a[r->n - 1];
    r->b[i] = r->b[r->n - 1];
    r->n--;
}

static int relay_connect_target(void)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)g_pg_port);
    if (inet_pton(AF_INET, g_pg_host, &sa.sin_addr) != 1)
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

static void *relay_main(void *arg)
{
    relay *r = arg;
    struct pollfd p[2 + 2 * RELAY_MAX];

    for (;;) {
        int np = 0;
        bool down, quit, mute;

        p[np++] = (struct pollfd){r->lfd, POLLIN, 0};
        p[np++] = (struct pollfd){r->wake[0], POLLIN, 0};
        for (int i = 0; i < r->n; i++) {
            p[np++] = (struct pollfd){r->a[i], POLLIN, 0};
            p[np++] = (struct pollfd){r->b[i], POLLIN, 0};
        }
        if (poll(p, (nfds_t)np, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents) {
            char c[16];
            if (read(r->wake[0], c, sizeof c) < 0 && errno != EINTR &&
                errno != EAGAIN)
                break;
        }
        pthread_mutex_lock(&r->mu);
        down = r->down;
        quit = r->quit;
        mute = r->mute;
        pthread_mutex_unlock(&r->mu);
        if (quit)
            break;
        if (down) {
            while (r->n > 0)
                relay_close_pair(r, r->n - 1);
        } else {
            for (int i = r->n - 1; i >= 0; i--) {
                short ra = p[2 + 2 * i].revents, rb = p[3 + 2 * i].revents;
                int bad = 0;
                if (ra & (POLLIN | POLLHUP | POLLERR))
                    bad |= relay_pump(r->a[i], r->b[i], false) != 0;
                if (!bad && (rb & (POLLIN | POLLHUP | POLLERR)))
                    bad |= relay_pump(r->b[i], r->a[i], mute) != 0;
                if (bad)
                    relay_close_pair(r, i);
            }
        }
        if (p[0].revents & POLLIN) {
            int fd = accept(r->lfd, NULL, NULL);
            if (fd >= 0) {
                int t = -1;
                fcntl(fd, F_SETFD, FD_CLOEXEC);
                if (!down && r->n < RELAY_MAX)
                    t = relay_connect_target();
                if (t < 0) {
                    close(fd);
                } else {
                    r->a[r->n] = fd;
                    r->b[r->n] = t;
                    r->n++;
                }
            }
        }
    }
    while (r->n > 0)
        relay_close_pair(r, r->n - 1);
    return NULL;
}

static relay *relay_start(void)
{
    relay *r = calloc(1, sizeof *r);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    int one = 1;

    if (!r)
        return NULL;
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(r->lfd, 128) != 0 ||
        getsockname(r->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
        pipe(r->wake) != 0) {
        if (r->lfd >= 0)
            close(r->lfd);
        free(r);
        return NULL;
    }
    fcntl(r->lfd, F_SETFD, FD_CLOEXEC);
    fcntl(r->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(r->wake[1], F_SETFD, FD_CLOEXEC);
    fcntl(r->wake[0], F_SETFL, O_NONBLOCK);
    r->port = ntohs(sa.sin_port);
    pthread_mutex_init(&r->mu, NULL);
    if (pthread_create(&r->th, NULL, relay_main, r) != 0) {
        close(r->lfd);
        free(r);
        return NULL;
    }
    return r;
}

void relay_mode(relay *r, bool down, bool quit, bool mute)
{
    pthread_mutex_lock(&r->mu);
    r->down = down;
    r->quit = quit;
    r->mute = mute;
    pthread_mutex_unlock(&r->mu);
    if (write(r->wake[1], "x", 1) != 1)
        fprintf(stderr, "relay: wake failed\n");
}

void relay_set(relay *r, bool down, bool quit)
{
    relay_mode(r, down, quit, false);
}

static void relay_stop(relay *r)
{
    if (!r)
        return;
    relay_set(r, true, true);
    pthread_join(r->th, NULL);
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ===========================================================================
 * Sites: one store, one configuration file
 * ========================================================================= */

static site g_sites[64];
static unsigned g_site_seq;

static json_t *principals_json(void)
{
    json_t *a = json_array();

    for (int i = 0; i < P_COUNT; i++) {
        json_t *p = json_pack("{s:s, s:[s], s:s}", "id", g_p[i].id, "roles",
                              g_p[i].role, "api_key_sha256", g_p[i].hash);
        if (g_p[i].bit & (R_CLERK | R_OPERATOR))
            json_object_set_new(p, "approval_limit_minor",
                                json_integer(CLERK_APPROVAL_LIMIT));
        /* a clerk that is an approver too: role names the first role */
        if ((g_p[i].bit & R_APPROVER) && strcmp(g_p[i].role, "approver") != 0)
            json_array_append_new(json_object_get(p, "roles"),
                                  json_string("approver"));
        if (i == P_APPROVER || i == P_APPROVER_LOW)
            json_object_set_new(p, "approval_limit_minor",
                                json_integer(i == P_APPROVER
                                                 ? APPROVER_APPROVAL_LIMIT
                                                 : APPROVER_LOW_APPROVAL_LIMIT));
        json_array_append_new(a, p);
    }
    return a;
}

int site_write(site *st)
{
    char *text = json_dumps(st->conf, JSON_INDENT(2));
    int rc;

    if (!text)
        return -1;
    rc = write_file(st->config, text);
    free(text);
    return rc;
}

void site_timing(site *st, const char *name, json_int_t ms)
{
    json_t *t = json_object_get(st->conf, "timings");

    if (!t) {
        t = json_object();
        json_object_set_new(st->conf, "timings", t);
    }
    json_object_set_new(t, name, json_integer(ms));
}

site *site_new(const char *name, bool with_relay, int store_timeout_ms,
               bool migrate)
{
    site *st = NULL;
    unsigned n = ++g_site_seq;
    char dir[512];
    int from, to, rc;

    for (size_t i = 0; i < sizeof g_sites / sizeof g_sites[0]; i++)
        if (!g_sites[i].used) {
            st = &g_sites[i];
            break;
        }
    if (!st)
        return NULL;
    memset(st, 0, sizeof *st);
    st->used = true;
    snprintf(dir, sizeof dir, "%s/site-%02u-%.32s", g_tmp, n, name);
    memcpy(st->dir, dir, sizeof dir);
    if (mkdir(dir, 0700) != 0)
        return NULL;
    snprintf(st->config, PATHLEN, "%s/config.json", dir);
    if (!g_pg) {
        snprintf(st->direct_url, sizeof st->direct_url, "sqlite:%s/store.db",
                 dir);
        memcpy(st->url, st->direct_url, sizeof st->url);
    } else {
        char sql[256], db[64];
        snprintf(db, sizeof db, "og_serve_%ld_%u", (long)getpid(), n);
        memcpy(st->db, db, sizeof st->db);
        snprintf(sql, sizeof sql, "CREATE DATABASE %s", db);
        for (int attempt = 0; pg_admin(sql) != 0; attempt++) {
            if (attempt == 5)
                return NULL;
            t_sleep_ms(500); /* template1 busy with another suite's CREATE */
        }
        pg_url(st->direct_url, sizeof st->direct_url, db, g_pg_port);
        if (with_relay) {
            if (!(st->relay = relay_start()))
                return NULL;
            pg_url(st->url, sizeof st->url, db, st->relay->port);
        } else {
            memcpy(st->url, st->direct_url, sizeof st->url);
        }
    }
    rc = migrate ? og_store_migrate(st->direct_url, NULL, &from, &to) : 0;
    if (rc < 0) {
        fprintf(stderr, "migrate %s: %s\n", st->direct_url, og_err_name(rc));
        return NULL;
    }
    st->conf = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:b, s:o}",
        "listen", "127.0.0.1:0", "store", st->url, "audience", AUDIENCE,
        "issuer", ISSUER, "keys_dir", g_keys_dir, "grant_form", "token",
        "pool_size", 8, "max_body_bytes", MAX_BODY, "max_connections", 256,
        "drain_timeout_ms", 20000, "retry_after_seconds", RETRY_AFTER,
        "auto_migrate", 0, "principals", principals_json());
    if (!st->conf)
        return NULL;
    /* The suite is one client on loopback that fails authentication on
     * purpose hundreds of times (every route without a key, with each
     * wrong role): the failed-authentication limit is not what those
     * tests are about. tests/serve/edge.c tightens it where it is. */
    json_object_set_new(st->conf, "rate_limit",
                        json_pack("{s:i, s:i}", "auth_failures_per_minute",
                                  1000000, "auth_failures_burst", 1000000));
    if (store_timeout_ms > 0)
        site_timing(st, "store_timeout_ms", store_timeout_ms);
    /* T5: execution_lease >= 3 x store_timeout + provider_timeout (10 s) +
     * lease_margin (5 s); the default lease (60 s) covers up to 15 s. */
    if (store_timeout_ms > 15000)
        site_timing(st, "execution_lease_ms", 3 * (json_int_t)store_timeout_ms + 20000);
    if (site_write(st) != 0)
        return NULL;
    return st;
}

static void site_close(site *st)
{
    if (!st || !st->used)
        return;
    relay_stop(st->relay);
    if (st->db[0]) {
        char sql[256];
        char db[64];
        memcpy(db, st->db, sizeof db);
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", db);
        pg_admin(sql);
    }
    json_decref(st->conf);
    memset(st, 0, sizeof *st);
}

srv *site_server(const site *st)
{
    return srv_new(OUT_LOG_JSON, "serve", "--config", st->config, "--listen",
                   "127.0.0.1:0", (const char *)NULL);
}

int run_refused(site *st, char **log)
{
    srv *s = site_server(st);
    int rc, code;

    s->log_kind = OUT_LOG_TEXT;
    if (srv_exec(s) != 0)
        return -1;
    rc = srv_wait_ready(s, READY_MS);
    if (rc == 0) {
        srv_stop(s, SIGKILL, EXIT_MS);
        *log = t_slurp(s->log_path, NULL);
        return 0;
    }
    if (rc == -2) {
        srv_stop(s, SIGKILL, EXIT_MS);
        *log = t_slurp(s->log_path, NULL);
        return -1;
    }
    code = t_proc_exit_code(s->last_status);
    *log = t_slurp(s->log_path, NULL);
    return code;
}

/* ---------------------------------------------------------------------------
 * Holding the store's write lock from outside (SQLite: an exclusive
 * transaction on the file; PostgreSQL: the admission tables locked).
 * ------------------------------------------------------------------------- */

struct storelock g_lock;

int store_lock(const site *st)
{
    if (!g_pg) {
        if (sqlite3_open_v2(st->direct_url + strlen("sqlite:"), &g_lock.db,
                            SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
            return -1;
        sqlite3_busy_timeout(g_lock.db, 10000);
        if (sqlite3_exec(g_lock.db, "BEGIN EXCLUSIVE", NULL, NULL, NULL) !=
            SQLITE_OK) {
            fprintf(stderr, "BEGIN EXCLUSIVE: %s\n", sqlite3_errmsg(g_lock.db));
            return -1;
        }
        return 0;
    }
    g_lock.pg = PQconnectdb(st->direct_url);
    if (PQstatus(g_lock.pg) != CONNECTION_OK)
        return -1;
    {
        PGresult *r = PQexec(g_lock.pg,
                             "BEGIN; LOCK TABLE grant_consumptions, operations,"
                             " grant_issuance, families IN ACCESS EXCLUSIVE MODE");
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!ok)
            fprintf(stderr, "lock: %s", PQerrorMessage(g_lock.pg));
        PQclear(r);
        return ok ? 0 : -1;
    }
}

void store_unlock(void)
{
    if (g_lock.db) {
        sqlite3_exec(g_lock.db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(g_lock.db);
        g_lock.db = NULL;
    }
    if (g_lock.pg) {
        PQclear(PQexec(g_lock.pg, "ROLLBACK"));
        PQfinish(g_lock.pg);
        g_lock.pg = NULL;
    }
}

void store_down(site *st)
{
    if (g_pg)
        relay_set(st->relay, true, false);
    else
        assert_int_equal(store_lock(st), 0);
}

void store_up(site *st)
{
    if (g_pg)
        relay_set(st->relay, false, false);
    else
        store_unlock();
}

/* ===========================================================================
 * Dev mode
 * ========================================================================= */

const char *const g_dev_roles[9] = {
    "issuer",       "agent", "enforcer",     "revoker",
    "operator",     "payout-admin", "clerk", "payout-worker", "approver"};

srv *dev_server(const char *dir, const site *pgsite)
{
    if (pgsite)
        return srv_new(OUT_LOG_JSON, "serve", "--dev", "--data-dir", dir,
                       "--listen", "127.0.0.1:0", "--store", pgsite->url,
                       (const char *)NULL);
    return srv_new(OUT_LOG_JSON, "serve", "--dev", "--data-dir", dir,
                   "--listen", "127.0.0.1:0", (const char *)NULL);
}

char *dev_credentials(const char *dir, json_t **doc)
{
    char path[PATHLEN];
    struct stat sb;
    char *text;
    json_t *ps;

    snprintf(path, sizeof path, "%s/dev-credentials.json", dir);
    assert_int_equal(stat(path, &sb), 0);
    if ((sb.st_mode & 07777) != 0600)
        fail_msg("%s has mode %o, not 0600", path, (unsigned)(sb.st_mode & 07777));
    text = t_slurp(path, NULL);
    assert_non_null(text);
    *doc = json_loads(text, 0, NULL);
    assert_non_null(*doc);
    assert_str(jstr(*doc, "issuer"), "oncegate-dev");
    ps = json_object_get(*doc, "principals");
    for (size_t i = 0; i < sizeof g_dev_roles / sizeof g_dev_roles[0]; i++) {
        json_t *p = json_object_get(ps, g_dev_roles[i]);
        char id[64];
        /* the clerk is the payout scenario's clerk-22 (dev_payouts.c) */
        if (strcmp(g_dev_roles[i], "clerk") == 0)
            snprintf(id, sizeof id, "clerk-22");
        else
            snprintf(id, sizeof id, "dev-%s", g_dev_roles[i]);
        assert_non_null(p);
        assert_str(jstr(p, "id"), id);
        assert_non_null(jstr(p, "api_key"));
        secret_add(jstr(p, "api_key"));
    }
    /* The issuer's private key in DIR/keys is a credential too. */
    {
        char cmd[PATHLEN + 64], line[PATHLEN];
        FILE *f;
        snprintf(cmd, sizeof cmd, "ls '%s'/keys/*.private.jwk 2>/dev/null", dir);
        if ((f = popen(cmd, "r"))) {
            while (fgets(line, sizeof line, f)) {
                line[strcspn(line, "\n")] = '\0';
                secret_add_private_jwk(line);
            }
            pclose(f);
        }
    }
    /* So are the redemption and operation-id MAC keys (64 hex digits). */
    {
        const char *keys[] = {"redemption.key", "operation-id.key"};

        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            char kp[PATHLEN], *k;

            snprintf(kp, sizeof kp, "%s/%s", dir, keys[i]);
            if ((k = t_slurp(kp, NULL))) {
                k[strcspn(k, "\n")] = '\0';
                if (k[0])
                    secret_add(k);
                free(k);
            }
        }
    }
    return text;
}

const char *dev_key(json_t *doc, const char *role)
{
    return jstr(json_object_get(json_object_get(doc, "principals"), role),
                "api_key");
}

/* ===========================================================================
 * Group state: one store with two instances A and B for the stateless
 * claims; each race and restart claim makes its own.
 * ========================================================================= */

site *g_main;
srv *g_a, *g_b;

int group_setup(void **state)
{
    g_main = site_new("main", false, LOADED_STORE_TIMEOUT_MS, true);
    if (!g_main)
        return -1;
    g_main->group = true;
    g_a = site_server(g_main);
    g_b = site_server(g_main);
    g_a->group = g_b->group = true;
    if (srv_start(g_a) != 0 || srv_start(g_b) != 0)
        return -1;
    return 0;
}

int group_teardown(void **state)
{
    store_unlock();
    srv_stop_all(true);
    for (size_t i = 0; i < sizeof g_sites / sizeof g_sites[0]; i++)
        site_close(&g_sites[i]);
    return 0;
}

int test_teardown(void **state)
{
    store_unlock();
    srv_stop_all(false);
    xinflight_reap(); /* answered or cut by now: the servers are stopped */
    for (size_t i = 0; i < sizeof g_sites / sizeof g_sites[0]; i++)
        if (g_sites[i].used && !g_sites[i].group)
            site_close(&g_sites[i]);
    free(*state);
    *state = NULL;
    return 0;
}

int pair_setup(void **state)
{
    pair *p = calloc(1, sizeof *p);

    *state = p;
    if (!p || !(p->st = site_new("pair", false, LOADED_STORE_TIMEOUT_MS, true)))
        return -1;
    p->a = site_server(p->st);
    p->b = site_server(p->st);
    if (srv_start(p->a) != 0 || srv_start(p->b) != 0)
        return -1;
    return 0;
}

/* ===========================================================================
 * The run
 * ========================================================================= */

int suite_setup(const char *backend)
{
    og_keygen_result kr;
    int rc;

    if (strcmp(backend, "postgres") == 0) {
        const char *url = getenv("OG_TEST_PG_URL");
        const char *req = getenv("OG_TEST_REQUIRE_PG");
        if (!url || !*url) {
            if (req && strcmp(req, "1") == 0) {
                fprintf(stderr, "OG_TEST_PG_URL unset but OG_TEST_REQUIRE_PG=1\n");
                return 1;
            }
            fprintf(stderr, "skipping: OG_TEST_PG_URL unset (run scripts/test)\n");
            return 77;
        }
        g_pg = true;
        if (pg_parse_base() != 0)
            return 1;
    } else if (strcmp(backend, "sqlite") != 0) {
        fprintf(stderr, "usage: serve_test sqlite|postgres\n");
        return 1;
    }
    g_bin = getenv("OG_TEST_ONCEGATE");
    g_src = getenv("OG_TEST_SOURCE_ROOT");
    g_sbx_bin = getenv("OG_TEST_SANDBOX"); /* checked by the tests that use it */
    if (!g_bin || !*g_bin || access(g_bin, X_OK) != 0) {
        fprintf(stderr, "OG_TEST_ONCEGATE must name the oncegate binary\n");
        return 1;
    }
    if (!g_src || !*g_src)
        g_src = ".";
    if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_ALL) != 0)
        return 1;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/og-serve-%s-XXXXXX", backend);
    if (!mkdtemp(g_tmp))
        return 1;
    for (int i = 0; i < P_COUNT; i++) {
        api_key_new(g_p[i].key);
        sha256_hex(g_p[i].key, g_p[i].hash);
        secret_add(g_p[i].key);
    }
    snprintf(g_keys_dir, sizeof g_keys_dir, "%s/keys", g_tmp);
    if (mkdir(g_keys_dir, 0700) != 0)
        return 1;
    if ((rc = og_keygen(ISSUER, g_keys_dir, &kr)) != 0 ||
        (rc = og_signer_load_file(kr.private_path, &g_signer)) != 0) {
        fprintf(stderr, "issuer key: %s\n", og_err_name(rc));
        return 1;
    }
    snprintf(g_kid, sizeof g_kid, "%s", kr.kid);
    snprintf(g_pub_path, sizeof g_pub_path, "%s", kr.public_path);
    snprintf(g_priv_path, sizeof g_priv_path, "%s", kr.private_path);
    secret_add_private_jwk(kr.private_path);
    atexit(kill_all_at_exit);
    return 0;
}

int suite_end(int rc)
{
    kill_all_at_exit();
    og_signer_free(g_signer);
    curl_global_cleanup();
    /* A failed run keeps the servers' logs; a run that started no server
     * (a filter that matched no test) has none to keep. */
    if (rc == 0 || g_srv_seq == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_tmp);
    } else {
        fprintf(stderr, "kept %s (server logs) for inspection\n", g_tmp);
        /* A failed assertion longjmps past its test's frees; LeakSanitizer
         * would only report those. A passing run is still leak-checked. */
        fflush(NULL);
        _exit(rc);
    }
    for (size_t i = 0; i < g_n_secrets; i++)
        free(g_secrets[i]);
    free(g_secrets);
    return rc;
}
