/*
 * main.c — the oncegate command: a thin edge over the C API.
 *
 *   oncegate migrate [--store URL] [--consumption-keys readable|hashed]
 *   oncegate admit --store URL --issuer I --grant-id G --expires-at T
 *                  --operation-id UUID --caller C --account A
 *                  --amount 250.00 --currency USD
 *   oncegate demo [--store URL]
 *   oncegate keygen --issuer NAME --out DIR
 *   oncegate serve --config FILE | --dev    (src/serve/)
 *   oncegate recover | cleanup | archive-operations --config FILE
 *   oncegate payouts run --provider URL --provider-table FILE
 *                        --credential-file FILE [--store URL] ...
 *   oncegate payout show|backlog|resolve|resubmit|hold ...
 *
 * Output is JSON on stdout; diagnostics go to stderr and carry identifiers
 * only — never secrets: keygen prints file paths and the kid, never key
 * material.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char og_usage[] =
    "usage: oncegate <command> [options]\n"
    "\n"
    "Admits each single-use grant at most once, across instances and restarts.\n"
    "\n"
    "commands:\n"
    "  migrate   create or upgrade a store's schema\n"
    "  admit     admit a grant for one operation (one atomic write)\n"
    "  demo      three replay incidents, live: two serve instances, a sandbox\n"
    "  grant     grant issue: sign a grant and record its issuance\n"
    "  consume   the consume verdict: spend a grant once, or be told no\n"
    "  keygen    generate an issuer's Ed25519 signing key (JWK files)\n"
    "  serve     the HTTP service (--dev: a development instance)\n"
    "  recover   take over stalled operations, look up, record (recovery)\n"
    "  cleanup   delete refusal records past retain_until + cleanup margin\n"
    "  archive-operations\n"
    "            archive (or delete) finished operations past their audit\n"
    "            retention\n"
    "  explain   the query plans of admission and cleanup on a store\n"
    "  payouts   payouts run: the payout workers, sweeper, reconciler and\n"
    "            grant-expiry janitor (docs/payouts.md)\n"
    "  payout    an operator's hand: show, backlog, resolve, resubmit, hold\n"
    "  payout-worker\n"
    "            the payout pipeline on a serve configuration (payouts.*)\n"
    "  dev-env   export lines for a dev data directory's API keys\n"
    "  help CMD  help for one command\n"
    "\n"
    "Stores: sqlite:PATH (default " OG_DEFAULT_STORE_URL "), or a libpq URI\n"
    "(postgres://..., postgresql://..., multi-host with\n"
    "target_session_attrs=read-write) or key=value connection string.\n"
    "See docs/design.md for what is guaranteed.\n";

static const char og_usage_migrate[] =
    "usage: oncegate migrate [--store URL]\n"
    "                        [--consumption-keys readable|hashed]\n"
    "\n"
    "Applies every schema migration the store lacks, each in its own\n"
    "transaction; concurrent migrators serialize. Creates an SQLite file if\n"
    "needed. Prints {\"from\":N,\"to\":M,\"consumption_keys\":K}.\n"
    "\n"
    "--consumption-keys chooses how the store keys its consumption records,\n"
    "once, when schema 5 is applied (docs/design.md, \"Hashed consumption\n"
    "keys\"): readable (the default) keys them by (issuer, grant id); hashed\n"
    "by SHA-256 over the length-prefixed pair, keeping the readable ids in\n"
    "the operation records only. Existing records are rewritten under their\n"
    "hashed keys in the same transaction. A store already at schema 5 keeps\n"
    "its keys: asking for the other ones is refused and changes nothing.\n"
    "\n"
    "exit: 0 done, 75 store unavailable, 78 store newer than this build, bad\n"
    "URL or other consumption keys recorded, 2 bad option, 70 internal error.\n";

static const char og_usage_explain[] =
    "usage: oncegate explain [--store URL] [--batch N]\n"
    "\n"
    "Prints, as Markdown, the query plans the store's engine picks now, on\n"
    "its tables as they are, for the admission statements and for one\n"
    "cleanup batch of N rows (default 1000, janitor.batch's default): each\n"
    "statement's text exactly as the store prepares it, then its plan.\n"
    "PostgreSQL: EXPLAIN EXECUTE of the store's own prepared statements,\n"
    "the custom and the generic plan; SQLite: EXPLAIN QUERY PLAN. Nothing\n"
    "is executed: no grant is claimed, no row deleted. docs/plans.md is\n"
    "this command's output on a loaded store (scripts/plans).\n"
    "\n"
    "exit: 0 printed, 75 store unavailable, 78 schema mismatch or bad URL,\n"
    "2 bad option, 70 internal error.\n";

static const char og_usage_admit[] =
    "usage: oncegate admit [--store URL] --issuer I --grant-id G\n"
    "                      --expires-at RFC3339 --operation-id UUID\n"
    "                      --caller C --account A --amount DECIMAL\n"
    "                      --currency CUR [--leeway-seconds N]\n"
    "                      [--store-timeout-ms N]\n"
    "\n"
    "Claims grant (I, G) for the operation and records the operation in ONE\n"
    "atomic write. The deadline (expires-at + leeway) is checked by the store\n"
    "on its own clock. Prints one JSON object:\n"
    "  {\"outcome\":\"admitted\"|\"already_admitted\", \"operation\":{...}}\n"
    "  {\"outcome\":\"refused\"}           (the reason goes to stderr only)\n"
    "  {\"outcome\":\"store_unavailable\"} (may or may not have happened:\n"
    "                                  retry with the same operation id)\n"
    "  {\"error\":CODE, \"message\":TEXT}  (bad input; nothing written)\n"
    "\n"
    "Identifiers: 1-128 printable ASCII characters, no spaces. Amount: a\n"
    "positive decimal, compared canonically (250.0 = 250.00). Currency: ISO\n"
    "4217 (USD). Operation id: a UUID.\n"
    "\n"
    "exit: 0 admitted or already admitted, 1 refused, 75 store unavailable,\n"
    "2 bad input, 78 schema mismatch or bad URL, 70 internal error.\n";

static const char og_usage_demo[] =
    "usage: oncegate demo [--store URL]\n"
    "\n"
    "Replays three incidents of replay protection over HTTP against real\n"
    "processes: one oncegate-sandbox (the billing and payouts provider,\n"
    "control endpoint on) and two `oncegate serve --dev` instances, A and B,\n"
    "each running the payout pipeline, sharing a throwaway data directory\n"
    "and one store (SQLite in that directory unless --store).\n"
    "  1. Billing creates the credit but its answer is lost (the sandbox fault\n"
    "     drop_response_after_effect): A answers 202 pending; the agent's retry\n"
    "     of the same operation on B is answered pending (already_admitted, no\n"
    "     second billing call); a new operation presenting the spent grant on\n"
    "     B is refused (409); recovery looks the credit up and records\n"
    "     succeeded; the sandbox counts exactly one credit.\n"
    "  2. A credit applied on A; A killed and restarted with empty memory; a\n"
    "     stale resubmission refused; the original operation answered with\n"
    "     its status; two grants, two credits.\n"
    "  3. A payout (docs/payouts.md's running example: 4,250.00 EUR, fresh ids\n"
    "     each run): the payout-admin writes its context, the clerk submits it\n"
    "     on A (Allowed: grant, reservation and job); A's worker (B stopped)\n"
    "     claims the grant and sends; the sandbox completes the payout, its\n"
    "     answer is lost (attempt and payout Unknown); A stopped, B started,\n"
    "     the operator resubmits the job; B's worker finds the grant consumed\n"
    "     (a duplicate, no send); B's reconciler looks the attempt up by its\n"
    "     reference: Paid; the sandbox counts one payout request, one payout.\n"
    "     Steps are numbered and name payout, decision, grant, job and\n"
    "     attempt; API keys and the destination's provider token never.\n"
    "     The destination is imported into the store as registered 30 days\n"
    "     ago (og_payout_destination_import), so the policy needs no\n"
    "     acknowledgment.\n"
    "oncegate-sandbox is run from beside oncegate, else from PATH. The data\n"
    "directory is created under $TMPDIR (or /tmp) and removed at the end; when\n"
    "the demo fails it is kept, with the processes' logs, and named on stderr.\n"
    "Takes about 30 s: recovery waits for the execution lease (6 s) to end,\n"
    "the reconciler for the payout attempt's lease (20 s).\n"
    "--store URL must hold no operation or payout attempt awaiting an outcome\n"
    "(admitted, started or unknown): the demo's recovery would settle it\n"
    "against its sandbox.\n"
    "\n"
    "exit: 0 every step as expected (every replay refused, one credit per\n"
    "grant, one completed payout, Paid), 1 a guarantee did not hold (two\n"
    "completions, a second worker not refused, ...), 78 a --store that is\n"
    "unusable or holds such operations, 75 that store unavailable, 70 a\n"
    "process could not be started or the demo could not go on.\n";

static const char og_usage_keygen[] =
    "usage: oncegate keygen --issuer NAME --out DIR\n"
    "\n"
    "Generates an Ed25519 key pair for grant issuer NAME and writes, into the\n"
    "existing directory DIR:\n"
    "  NAME.KID.private.jwk  mode 0600, the signing key (OKP JWK with \"d\")\n"
    "  NAME.KID.public.jwk   the verification key (RFC 8037 OKP JWK)\n"
    "KID is the key's RFC 7638 thumbprint. Existing files are never\n"
    "overwritten. An issuer may have several public keys (rotation): verifiers\n"
    "load every NAME.*.public.jwk in their key directory. NAME: 1-128 of\n"
    "[A-Za-z0-9._~-], not starting with '.'. Prints\n"
    "  {\"issuer\":…, \"kid\":…, \"private_key\":PATH, \"public_key\":PATH}\n"
    "(paths only, never key material).\n"
    "\n"
    "exit: 0 written, 2 bad usage or issuer, 73 a key file already exists,\n"
    "74 DIR missing or not writable, 70 internal error.\n";

/* ===========================================================================
 * Shared helpers
 * ========================================================================= */
void og_cli_print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);

    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}

json_t *og_cli_operation_json(const og_operation *op)
{
    return og_srv_operation_json(op);
}

json_t *og_cli_error_json(int err)
{
    return json_pack("{s:s, s:s}", "error", og_err_name(err), "message",
                     og_strerror(err));
}

int og_cli_admit(og_store *s, const og_grant *g, const og_intent *in,
                 json_t **answer)
{
    og_admission res;
    json_t *out = NULL;
    int rc = og_admit(s, g, in, &res);

    if (rc == OG_ESTORE_UNAVAILABLE) {
        fprintf(stderr,
                "oncegate: admit store_unavailable operation=%s issuer=%s "
                "grant=%s: outcome unknown, retry with the same operation id\n",
                in->operation_id, g->issuer, g->grant_id);
        *answer = json_pack("{s:s}", "outcome", "store_unavailable");
        return OG_EXIT_UNAVAILABLE;
    }
    if (rc < 0) {
        /* Bad input is echoed by field name only, never by value. */
        fprintf(stderr, "oncegate: admit error %s: %s\n", og_err_name(rc),
                og_strerror(rc));
        *answer = og_cli_error_json(rc);
        return og_exit_for_error(rc);
    }
    switch (res.outcome) {
    case OG_OUTCOME_ADMITTED:
    case OG_OUTCOME_ALREADY_ADMITTED:
        out = json_pack("{s:s, s:o}", "outcome", og_outcome_name(res.outcome),
                        "operation", og_cli_operation_json(&res.operation));
        *answer = out;
        return OG_EXIT_OK;
    case OG_OUTCOME_REFUSED:
    default:
        /* The reason is for logs only: the answer reveals no other
         * operation. */
        fprintf(stderr,
                "oncegate: admit refused operation=%s issuer=%s grant=%s "
                "reason=%s\n",
                in->operation_id, g->issuer, g->grant_id,
                og_refusal_name(res.refusal));
        *answer = json_pack("{s:s}", "outcome", "refused");
        return OG_EXIT_REFUSED;
    }
}

/* ===========================================================================
 * migrate
 * ========================================================================= */
static int og_cmd_migrate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {"consumption-keys", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL;
    og_store_options opts;
    og_store *s = NULL;
    og_consumption_keys keys = OG_KEYS_AS_STORED;
    int from = 0, to = 0, rc, c;
    json_t *out;

    og_store_options_default(&opts);
    opts.pool_size = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            url = optarg;
            break;
        case 'k':
            if (og_consumption_keys_parse(optarg, &opts.consumption_keys) != 0) {
                fprintf(stderr, "oncegate: migrate: --consumption-keys is "
                                "readable or hashed, not '%s'\n", optarg);
                return OG_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(og_usage_migrate, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_migrate, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fputs(og_usage_migrate, stderr);
        return OG_EXIT_USAGE;
    }
    rc = og_store_migrate(url, &opts, &from, &to);
    /* the keys the store records, read the way every instance reads them */
    if (rc == 0 && (rc = og_store_open(url, &opts, &s)) == 0)
        keys = og_store_consumption_keys(s);
    og_store_free(s);
    if (rc < 0) {
        fprintf(stderr, "oncegate: migrate: %s: %s\n", og_err_name(rc),
                og_strerror(rc));
        out = og_cli_error_json(rc);
        og_cli_print_json(out);
        json_decref(out);
        return og_exit_for_error(rc);
    }
    out = json_pack("{s:i, s:i, s:s}", "from", from, "to", to,
                    "consumption_keys", og_consumption_keys_name(keys));
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_OK;
}

/* ===========================================================================
 * admit
 * ========================================================================= */

/* Parses a non-negative integer option; -1 when it is not one. */
static long long og_parse_nonneg(const char *s, long long max)
{
    char *end;
    long long v;

    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    v = strtoll(s, &end, 10);
    if (*end || v < 0 || v > max)
        return -1;
    return v;
}

static int og_cmd_admit(int argc, char **argv)
{
    enum { O_STORE = 256, O_ISSUER, O_GRANT, O_EXPIRES, O_OP, O_CALLER,
           O_ACCOUNT, O_AMOUNT, O_CURRENCY, O_LEEWAY, O_TIMEOUT };
    static const struct option longopts[] = {
        {"store", required_argument, NULL, O_STORE},
        {"issuer", required_argument, NULL, O_ISSUER},
        {"grant-id", required_argument, NULL, O_GRANT},
        {"expires-at", required_argument, NULL, O_EXPIRES},
        {"operation-id", required_argument, NULL, O_OP},
        {"caller", required_argument, NULL, O_CALLER},
        {"account", required_argument, NULL, O_ACCOUNT},
        {"amount", required_argument, NULL, O_AMOUNT},
        {"currency", required_argument, NULL, O_CURRENCY},
        {"leeway-seconds", required_argument, NULL, O_LEEWAY},
        {"store-timeout-ms", required_argument, NULL, O_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL, *expires = NULL;
    og_grant g = {0};
    og_intent in = {0};
    og_store_options opts;
    og_store *s = NULL;
    json_t *answer = NULL;
    long long v;
    int c, rc;

    og_store_options_default(&opts);
    opts.pool_size = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_STORE: url = optarg; break;
        case O_ISSUER: g.issuer = optarg; break;
        case O_GRANT: g.grant_id = optarg; break;
        case O_EXPIRES: expires = optarg; break;
        case O_OP: in.operation_id = optarg; break;
        case O_CALLER: in.caller_id = optarg; break;
        case O_ACCOUNT: in.account_id = optarg; break;
        case O_AMOUNT: in.amount = optarg; break;
        case O_CURRENCY: in.currency = optarg; break;
        case O_LEEWAY:
            if ((v = og_parse_nonneg(optarg, 3600)) < 0) {
                fprintf(stderr, "oncegate: admit: --leeway-seconds must be 0..3600\n");
                return OG_EXIT_USAGE;
            }
            opts.timings.admission_leeway_us = v * 1000000;
            break;
        case O_TIMEOUT:
            if ((v = og_parse_nonneg(optarg, 600000)) < 1) {
                fprintf(stderr, "oncegate: admit: --store-timeout-ms must be 1..600000\n");
                return OG_EXIT_USAGE;
            }
            opts.timings.store_timeout_us = v * 1000;
            og_timings_fit(&opts.timings);
            break;
        case 'h':
            fputs(og_usage_admit, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_admit, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !g.issuer || !g.grant_id || !expires ||
        !in.operation_id || !in.caller_id || !in.account_id || !in.amount ||
        !in.currency) {
        fprintf(stderr, "oncegate: admit: every option but --store is required\n");
        fputs(og_usage_admit, stderr);
        return OG_EXIT_USAGE;
    }
    if ((rc = og_time_parse_rfc3339(expires, &g.expires_at_us)) < 0) {
        answer = og_cli_error_json(rc);
        og_cli_print_json(answer);
        json_decref(answer);
        fprintf(stderr, "oncegate: admit error %s: %s\n", og_err_name(rc),
                og_strerror(rc));
        return OG_EXIT_USAGE;
    }

    if ((rc = og_store_open(url, &opts, &s)) < 0) {
        fprintf(stderr, "oncegate: admit: cannot open store: %s: %s\n",
                og_err_name(rc), og_strerror(rc));
        answer = rc == OG_ESTORE_UNAVAILABLE
                     ? json_pack("{s:s}", "outcome", "store_unavailable")
                     : og_cli_error_json(rc);
        og_cli_print_json(answer);
        json_decref(answer);
        return og_exit_for_error(rc);
    }
    rc = og_cli_admit(s, &g, &in, &answer);
    og_cli_print_json(answer);
    json_decref(answer);
    og_store_free(s);
    return rc;
}

/* ===========================================================================
 * explain
 * ========================================================================= */
static int og_cmd_explain(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"store", required_argument, NULL, 's'},
        {"batch", required_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL;
    og_store_options opts;
    og_store *s = NULL;
    char *text = NULL, *end;
    long batch = 1000;
    int rc, c;

    og_store_options_default(&opts);
    opts.pool_size = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            url = optarg;
            break;
        case 'b':
            errno = 0;
            batch = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || batch < 1 ||
                batch > OG_RETENTION_BATCH_MAX) {
                fprintf(stderr, "oncegate: explain: --batch is 1..%d, not "
                                "'%s'\n", OG_RETENTION_BATCH_MAX, optarg);
                return OG_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(og_usage_explain, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_explain, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fputs(og_usage_explain, stderr);
        return OG_EXIT_USAGE;
    }
    if ((rc = og_store_open(url, &opts, &s)) == 0)
        rc = og_store_explain(s, (int)batch, &text);
    og_store_free(s);
    if (rc < 0) {
        fprintf(stderr, "oncegate: explain: %s: %s\n", og_err_name(rc),
                og_strerror(rc));
        return og_exit_for_error(rc);
    }
    fputs(text, stdout);
    free(text);
    return fflush(stdout) == 0 ? OG_EXIT_OK : OG_EXIT_INTERNAL;
}

/* ===========================================================================
 * keygen
 * ========================================================================= */
static int og_cmd_keygen(int argc, char **argv)
{
    enum { O_ISSUER = 256, O_OUT };
    static const struct option longopts[] = {
        {"issuer", required_argument, NULL, O_ISSUER},
        {"out", required_argument, NULL, O_OUT},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *issuer = NULL, *dir = NULL;
    og_keygen_result r;
    json_t *out;
    int c, rc;

    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_ISSUER: issuer = optarg; break;
        case O_OUT: dir = optarg; break;
        case 'h':
            fputs(og_usage_keygen, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_keygen, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !issuer || !dir) {
        fprintf(stderr, "oncegate: keygen: --issuer and --out are required\n");
        fputs(og_usage_keygen, stderr);
        return OG_EXIT_USAGE;
    }
    rc = og_keygen(issuer, dir, &r);
    if (rc < 0) {
        fprintf(stderr, "oncegate: keygen: %s: %s\n", og_err_name(rc),
                og_strerror(rc));
        out = og_cli_error_json(rc);
        og_cli_print_json(out);
        json_decref(out);
        return og_exit_for_error(rc);
    }
    out = json_pack("{s:s, s:s, s:s, s:s}", "issuer", issuer, "kid", r.kid,
                    "private_key", r.private_path, "public_key",
                    r.public_path);
    if (out == NULL) {
        /* The files exist; say so even when the JSON cannot be built. */
        fprintf(stderr, "oncegate: keygen: wrote %s and %s\n", r.private_path,
                r.public_path);
        return OG_EXIT_INTERNAL;
    }
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_OK;
}

/* ===========================================================================
 * dispatch
 * ========================================================================= */
typedef struct og_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage; /* NULL: hidden */
} og_command;

static const og_command og_commands[] = {
    {"migrate", og_cmd_migrate, og_usage_migrate},
    {"admit", og_cmd_admit, og_usage_admit},
    {"demo", og_cli_demo, og_usage_demo},
    {"keygen", og_cmd_keygen, og_usage_keygen},
    {"grant", og_cli_grant, og_usage_grant},
    {"consume", og_cli_consume, og_usage_consume},
    {"serve", og_cli_serve, og_usage_serve},
    {"recover", og_cli_recover, og_usage_recover},
    {"cleanup", og_cli_cleanup, og_usage_cleanup},
    {"archive-operations", og_cli_archive_operations,
     og_usage_archive_operations},
    {"explain", og_cmd_explain, og_usage_explain},
    {"payouts", og_cli_payouts, og_usage_payouts},
    {"payout", og_cli_payout, og_usage_payout},
    {"payout-worker", og_cli_payout_worker, og_usage_payout_worker},
    {"dev-env", og_cli_dev_env, NULL},
};

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        fputs(og_usage, stderr);
        return OG_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(og_usage, stdout);
        return OG_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("oncegate %s (schema %d)\n", OG_VERSION, OG_SCHEMA_VERSION);
        return OG_EXIT_OK;
    }
    if (strcmp(argv[1], "help") == 0) {
        if (argc == 2) {
            fputs(og_usage, stdout);
            return OG_EXIT_OK;
        }
        for (i = 0; i < sizeof og_commands / sizeof og_commands[0]; i++)
            if (og_commands[i].usage && strcmp(argv[2], og_commands[i].name) == 0) {
                fputs(og_commands[i].usage, stdout);
                /* serve's ends with the keys dev mode changes, printed
                 * from the table dev mode applies (dev.c, D5) */
                if (og_commands[i].run == og_cli_serve)
                    og_srv_dev_help(stdout);
                return OG_EXIT_OK;
            }
        fprintf(stderr, "oncegate: no such command: %s\n", argv[2]);
        return OG_EXIT_USAGE;
    }
    for (i = 0; i < sizeof og_commands / sizeof og_commands[0]; i++)
        if (strcmp(argv[1], og_commands[i].name) == 0)
            return og_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "oncegate: no such command: %s\n\n", argv[1]);
    fputs(og_usage, stderr);
    return OG_EXIT_USAGE;
}
