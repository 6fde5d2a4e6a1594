/*
 * payout.c — `oncegate payout show|backlog|resolve|resubmit|hold`: what
 * an operator does by hand about payouts (docs/payouts.md, sections 5 and
 * 6), each with the calls of oncegate/payout_store.h it names:
 *
 *   show      a payout with its decisions, grants (never a credential: a
 *             payout grant is row-form, there is none), attempts with their
 *             histories, and its own history (og_payout_history) — several
 *             reads, each consistent, not one snapshot;
 *   backlog   the payout attempts in Unknown or NeedsReconciliation, oldest
 *             first (og_op_scan), each with its payout and its age;
 *   resolve   an operator's resolution of a NeedsReconciliation attempt,
 *             with reason and evidence (og_payout_operator_resolve);
 *   resubmit  a job republished (og_payout_job_resubmit): authority stays
 *             with the grant;
 *   hold      a finance hold: the unused grant revoked, its reservation
 *             released (og_payout_grant_revoke).
 *
 * Output is one JSON line on stdout; stderr carries identifiers and codes
 * only. Nothing here reads a destination token or a credential.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "oncegate/payout_store.h"

const char og_usage_payout[] =
    "usage: oncegate payout show --payout ID [--store URL]\n"
    "       oncegate payout backlog [--store URL] [--limit N]\n"
    "       oncegate payout resolve --attempt UUID\n"
    "                               --to Succeeded|Failed|NotApplied\n"
    "                               --operator ID --reason CODE\n"
    "                               --evidence TEXT\n"
    "                               [--provider-reference REF] [--store URL]\n"
    "       oncegate payout resubmit --job UUID --operator ID [--store URL]\n"
    "       oncegate payout hold --grant ID --operator ID [--store URL]\n"
    "\n"
    "What an operator does by hand about payouts (docs/payouts.md):\n"
    "\n"
    "show      the payout, its decisions (outcome, reason, policy,\n"
    "          requester), its grants (state, window, attempt number,\n"
    "          reservation; never a credential), its attempts with their\n"
    "          histories, and its history. Prints {\"payout\":{...},\n"
    "          \"decisions\":[...],\"grants\":[...],\"attempts\":[...],\n"
    "          \"history\":[...]}: several reads, not one snapshot.\n"
    "backlog   the payout attempts in Unknown or NeedsReconciliation, oldest\n"
    "          first, at most --limit (1..1000, default 100): for each its\n"
    "          attempt, payout, grant, status, provider reference,\n"
    "          created_at, updated_at and age_seconds (since created_at, this\n"
    "          host's clock). Prints {\"backlog\":[...],\"unknown\":N,\n"
    "          \"needs_reconciliation\":M}.\n"
    "resolve   records what the operator established about a\n"
    "          NeedsReconciliation attempt — Succeeded (the payout Paid),\n"
    "          Failed (Failed, reservation released) or NotApplied (Approved\n"
    "          again for a re-authorization; only once the request expired\n"
    "          at the provider) — with a reason code and the evidence, in one\n"
    "          transaction with the payout and its reservation. Prints\n"
    "          {\"outcome\":\"resolved\",\"payout\":...,\"state\":...,\n"
    "          \"payout_version\":N,\"reservation\":...}.\n"
    "resubmit  republishes a job: a new job for the same payout and grant\n"
    "          (the grant still decides whether anything is sent). Prints\n"
    "          {\"outcome\":\"resubmitted\",\"job\":NEW,\"from\":JOB}.\n"
    "hold      revokes a payout grant that no attempt has consumed and\n"
    "          releases its reservation. Prints {\"outcome\":\"revoked\"}.\n"
    "\n"
    "Refusals print {\"outcome\":CODE} with a stable code: not_found (no\n"
    "such payout, for show; no such job, for resubmit), not-recorded (the\n"
    "attempt is not NeedsReconciliation, does not exist, or NotApplied is\n"
    "too early), not-active (not its payout's active attempt),\n"
    "already_used_or_revoked, not_issued (not a payout grant). Errors\n"
    "print {\"error\":CODE,\"message\":...}.\n"
    "\n"
    "exit: 0 done, 1 refused (nothing changed), 2 bad usage or input,\n"
    "75 store unavailable (a write may or may not have happened: read\n"
    "before retrying), 78 bad store URL or schema mismatch, 70 internal\n"
    "error.\n";

enum { O_STORE = 256, O_PAYOUT, O_LIMIT, O_ATTEMPT, O_TO, O_OPERATOR, O_REASON,
       O_EVIDENCE, O_REFERENCE, O_JOB, O_GRANT };

static const struct option payout_opts[] = {
    {"store", required_argument, NULL, O_STORE},
    {"payout", required_argument, NULL, O_PAYOUT},
    {"limit", required_argument, NULL, O_LIMIT},
    {"attempt", required_argument, NULL, O_ATTEMPT},
    {"to", required_argument, NULL, O_TO},
    {"operator", required_argument, NULL, O_OPERATOR},
    {"reason", required_argument, NULL, O_REASON},
    {"evidence", required_argument, NULL, O_EVIDENCE},
    {"provider-reference", required_argument, NULL, O_REFERENCE},
    {"job", required_argument, NULL, O_JOB},
    {"grant", required_argument, NULL, O_GRANT},
    {"help", no_argument, NULL, 'h'},
    {0, 0, 0, 0},
};

/* The options of one subcommand; NULL when not given. */
typedef struct payout_args {
    const char *store, *payout, *limit, *attempt, *to, *op, *reason, *evidence,
        *reference, *job, *grant;
    int limit_n;      /* --limit, checked: 1..1000 (default 100) */
    og_op_status to_status; /* --to, checked */
} payout_args;

static int usage_error(const char *sub, const char *what)
{
    fprintf(stderr, "oncegate: payout %s: %s\n", sub, what);
    fputs(og_usage_payout, stderr);
    return OG_EXIT_USAGE;
}

/* Parses argv (argv[0] the subcommand) into *a. Returns -1 to go on, or
 * the exit code (help, bad usage). Options a subcommand does not take are
 * refused by the subcommand itself. */
static int parse_args(int argc, char **argv, payout_args *a)
{
    int c;

    memset(a, 0, sizeof *a);
    a->store = OG_DEFAULT_STORE_URL;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", payout_opts, NULL)) != -1) {
        switch (c) {
        case O_STORE: a->store = optarg; break;
        case O_PAYOUT: a->payout = optarg; break;
        case O_LIMIT: a->limit = optarg; break;
        case O_ATTEMPT: a->attempt = optarg; break;
        case O_TO: a->to = optarg; break;
        case O_OPERATOR: a->op = optarg; break;
        case O_REASON: a->reason = optarg; break;
        case O_EVIDENCE: a->evidence = optarg; break;
        case O_REFERENCE: a->reference = optarg; break;
        case O_JOB: a->job = optarg; break;
        case O_GRANT: a->grant = optarg; break;
        case 'h':
            fputs(og_usage_payout, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_payout, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc)
        return usage_error(argv[0], "unexpected argument");
    return -1;
}

/* Prints the error JSON for rc and returns its exit code. */
static int fail(const char *sub, int rc)
{
    json_t *out = og_cli_error_json(rc);

    fprintf(stderr, "oncegate: payout %s: %s: %s\n", sub, og_err_name(rc),
            og_strerror(rc));
    og_cli_print_json(out);
    json_decref(out);
    return og_exit_for_error(rc);
}

/* Prints {"outcome": code} and returns OG_EXIT_REFUSED. */
static int refused(const char *sub, const char *id, const char *code)
{
    json_t *out = json_pack("{s:s}", "outcome", code);

    fprintf(stderr, "oncegate: payout %s refused id=%s reason=%s\n", sub, id,
            code);
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_REFUSED;
}

/* Prints out (stolen) and returns OG_EXIT_OK, or OG_EXIT_INTERNAL on OOM. */
static int done(json_t *out)
{
    if (!out)
        return OG_EXIT_INTERNAL;
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_OK;
}

/* ===========================================================================
 * show
 * ========================================================================= */

/* The assembly is the HTTP API's too (src/serve/payout_view.c). */
static int payout_show(og_store *s, const payout_args *a)
{
    json_t *out;
    int rc = og_payout_show_json(s, a->payout, &out);

    if (rc < 0)
        return fail("show", rc);
    if (rc == 0)
        return refused("show", a->payout, "not_found");
    return done(out);
}

/* ===========================================================================
 * backlog
 * ========================================================================= */

static int payout_backlog(og_store *s, const payout_args *a)
{
    json_t *out;
    int rc = og_payout_backlog_json(s, a->limit_n,
                                    (int64_t)time(NULL) * 1000000, &out);

    if (rc != 0)
        return fail("backlog", rc);
    return done(out);
}

/* ===========================================================================
 * resolve, resubmit, hold
 * ========================================================================= */

static int payout_resolve(og_store *s, const payout_args *a)
{
    og_payout_resolution r;
    int rc;

    rc = og_payout_operator_resolve(s, a->attempt, a->to_status, a->op,
                                    a->reason, a->evidence, a->reference,
                                    &r);
    if (rc != 0)
        return fail("resolve", rc);
    if (r.outcome != OG_PAYOUT_RESOLVE_RESOLVED)
        return refused("resolve", a->attempt,
                       og_payout_resolve_outcome_name(r.outcome));
    fprintf(stderr,
            "oncegate: payout resolve attempt=%s payout=%s grant=%s to=%s "
            "operator=%s\n",
            a->attempt, r.payout_id, r.grant_id, a->to, a->op);
    return done(json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "outcome",
                          "resolved", "attempt", a->attempt, "payout",
                          r.payout_id, "grant", r.grant_id, "state",
                          og_payout_state_name(r.state), "payout_version",
                          (json_int_t)r.payout_version, "reservation",
                          og_payout_reservation_name(r.reservation)));
}

static int payout_resubmit(og_store *s, const payout_args *a)
{
    char job[OG_UUID_LEN + 1];
    int rc;

    rc = og_payout_job_resubmit(s, a->job, a->op, job);
    if (rc < 0)
        return fail("resubmit", rc);
    if (rc == 0)
        return refused("resubmit", a->job, "not_found");
    fprintf(stderr, "oncegate: payout resubmit job=%s new_job=%s operator=%s\n",
            a->job, job, a->op);
    return done(json_pack("{s:s, s:s, s:s}", "outcome", "resubmitted", "job",
                          job, "from", a->job));
}

static int payout_hold(og_store *s, const payout_args *a)
{
    og_revoke_outcome r;
    int rc;

    rc = og_payout_grant_revoke(s, a->grant, a->op, &r);
    if (rc != 0)
        return fail("hold", rc);
    switch (r) {
    case OG_REVOKE_REVOKED:
        fprintf(stderr, "oncegate: payout hold grant=%s operator=%s\n",
                a->grant, a->op);
        return done(json_pack("{s:s, s:s}", "outcome", "revoked", "grant",
                              a->grant));
    case OG_REVOKE_ALREADY_USED_OR_REVOKED:
        return refused("hold", a->grant, "already_used_or_revoked");
    case OG_REVOKE_NOT_ISSUED:
    default:
        return refused("hold", a->grant, "not_issued");
    }
}

/* ===========================================================================
 * Dispatch
 * ========================================================================= */

typedef struct payout_sub {
    const char *name;
    int (*run)(og_store *s, const payout_args *a);
    const char *takes; /* the options it takes, as "|name|name|" */
    const char *needs; /* those it requires */
} payout_sub;

static const payout_sub payout_subs[] = {
    {"show", payout_show, "|payout|", "|payout|"},
    {"backlog", payout_backlog, "|limit|", ""},
    {"resolve", payout_resolve,
     "|attempt|to|operator|reason|evidence|reference|",
     "|attempt|to|operator|reason|evidence|"},
    {"resubmit", payout_resubmit, "|job|operator|", "|job|operator|"},
    {"hold", payout_hold, "|grant|operator|", "|grant|operator|"},
};

/* Checks the options against sub before any I/O: each given is one it
 * takes, each it needs is given, --limit and --to parse. 0, or the exit
 * code of the usage error printed. */
static int options_check(const payout_sub *sub, payout_args *a)
{
    const struct { const char *name, *v; } given[] = {
        {"payout", a->payout},
        {"limit", a->limit},       {"attempt", a->attempt},
        {"to", a->to},             {"operator", a->op},
        {"reason", a->reason},     {"evidence", a->evidence},
        {"reference", a->reference}, {"job", a->job},
        {"grant", a->grant},
    };
    char key[32];

    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        snprintf(key, sizeof key, "|%s|", given[i].name);
        if (given[i].v && !strstr(sub->takes, key))
            return usage_error(sub->name, "an option this subcommand does"
                                          " not take");
        if (!given[i].v && strstr(sub->needs, key)) {
            char what[64];

            snprintf(what, sizeof what, "--%s is required",
                     strcmp(given[i].name, "reference") == 0
                         ? "provider-reference"
                         : given[i].name);
            return usage_error(sub->name, what);
        }
    }
    /* The identifiers, before the store is opened (the library checks them
     * again, and checks reason, evidence and reference before its I/O). */
    {
        char u[OG_UUID_LEN + 1];
        int bad = 0;

        if (a->payout && !og_id_valid(a->payout))
            bad = OG_EPAYOUT_ID;
        else if (a->grant && !og_id_valid(a->grant))
            bad = OG_EGRANT_ID;
        else if (a->op && !og_id_valid(a->op))
            bad = OG_EACTOR;
        else if (a->attempt && og_operation_id_canonical(a->attempt, u) != 0)
            bad = OG_EOPERATION_ID;
        else if (a->job && og_operation_id_canonical(a->job, u) != 0)
            bad = OG_EPAYOUT_JOB;
        if (bad)
            return fail(sub->name, bad);
    }
    a->limit_n = 100;
    if (a->limit) {
        char *end;
        long v = strtol(a->limit, &end, 10);

        if (*end || end == a->limit || v < 1 || v > 1000)
            return usage_error(sub->name, "--limit is 1..1000");
        a->limit_n = (int)v;
    }
    if (!a->to)
        a->to_status = OG_OP_SUCCEEDED; /* not read: --to not taken */
    else if (strcmp(a->to, "Succeeded") == 0)
        a->to_status = OG_OP_SUCCEEDED;
    else if (strcmp(a->to, "Failed") == 0)
        a->to_status = OG_OP_FAILED;
    else if (strcmp(a->to, "NotApplied") == 0)
        a->to_status = OG_OP_NOT_APPLIED;
    else
        return usage_error(sub->name,
                           "--to is Succeeded, Failed or NotApplied");
    return 0;
}

int og_cli_payout(int argc, char **argv)
{
    const payout_sub *sub = NULL;
    payout_args a;
    og_store *s = NULL;
    int rc;

    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
                      strcmp(argv[1], "-h") == 0)) {
        fputs(og_usage_payout, stdout);
        return OG_EXIT_OK;
    }
    for (size_t i = 0; argc >= 2 && i < sizeof payout_subs /
                                            sizeof payout_subs[0]; i++)
        if (strcmp(argv[1], payout_subs[i].name) == 0)
            sub = &payout_subs[i];
    if (!sub) {
        fputs(og_usage_payout, stderr);
        return OG_EXIT_USAGE;
    }
    if ((rc = parse_args(argc - 1, argv + 1, &a)) >= 0)
        return rc;
    if ((rc = options_check(sub, &a)) != 0)
        return rc;
    if ((rc = og_store_open(a.store, NULL, &s)) != 0)
        return fail(sub->name, rc);
    rc = sub->run(s, &a);
    og_store_free(s);
    return rc;
}
