/*
 * grants.c — `oncegate grant issue` and `oncegate consume`: thin edges over
 * og_grant_issue() and og_consume(). The token is printed once, to stdout,
 * for the caller to hand to its subject; it never goes to stderr or a log.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char og_usage_grant[] =
    "usage: oncegate grant issue [--store URL] --key PRIVATE.jwk --issuer I\n"
    "                            --subject S --audience A --action ACT\n"
    "                            --account A --amount DECIMAL --currency CUR\n"
    "                            [--ttl-seconds 900] [--family F]\n"
    "                            [--form token|row]\n"
    "\n"
    "Signs a single-use grant (compact JWS, EdDSA) with the issuer's private\n"
    "key and records its issuance in the store: the proof of issuance and the\n"
    "trusted expiry revocation needs (row form: also the grant's row). A grant\n"
    "into a revoked family is refused. Prints\n"
    "  {\"grant_id\":…, \"issuer\":…, \"token\":…, \"expires_at\":…, \"family\":…}\n"
    "\n"
    "exit: 0 issued, 1 refused (family revoked or id reused), 2 bad input,\n"
    "75 store unavailable, 78 schema/URL, 70 internal error.\n";

const char og_usage_consume[] =
    "usage: oncegate consume [--store URL] --issuer I --grant-id G\n"
    "                        --expires-at RFC3339 [--family F]\n"
    "                        [--form token|row]\n"
    "\n"
    "The consume verdict for an enforcement point that runs the effect\n"
    "itself, with a grant it has already verified: ONE conditional write.\n"
    "Prints {\"consumed\":true,\"family\":…} or\n"
    "{\"consumed\":false,\"error\":\"already_consumed\"}; the second is a\n"
    "denial, without exception.\n"
    "\n"
    "exit: 0 consumed, 1 not consumed, 2 bad input, 75 store unavailable,\n"
    "78 schema/URL, 70 internal error.\n";

/* Parses --form. */
static int og_parse_form(const char *s, og_grant_form *out)
{
    if (strcmp(s, "token") == 0)
        *out = OG_FORM_TOKEN;
    else if (strcmp(s, "row") == 0)
        *out = OG_FORM_ROW;
    else
        return -1;
    return 0;
}

/* Prints the error JSON for rc and returns its exit code. */
static int og_fail(const char *what, int rc)
{
    json_t *out = og_cli_error_json(rc);

    fprintf(stderr, "oncegate: %s: %s: %s\n", what, og_err_name(rc),
            og_strerror(rc));
    og_cli_print_json(out);
    json_decref(out);
    return og_exit_for_error(rc);
}

static int og_cmd_grant_issue(int argc, char **argv)
{
    enum { O_STORE = 256, O_KEY, O_ISSUER, O_SUBJECT, O_AUD, O_ACTION,
           O_ACCOUNT, O_AMOUNT, O_CURRENCY, O_TTL, O_FAMILY, O_FORM };
    static const struct option longopts[] = {
        {"store", required_argument, NULL, O_STORE},
        {"key", required_argument, NULL, O_KEY},
        {"issuer", required_argument, NULL, O_ISSUER},
        {"subject", required_argument, NULL, O_SUBJECT},
        {"audience", required_argument, NULL, O_AUD},
        {"action", required_argument, NULL, O_ACTION},
        {"account", required_argument, NULL, O_ACCOUNT},
        {"amount", required_argument, NULL, O_AMOUNT},
        {"currency", required_argument, NULL, O_CURRENCY},
        {"ttl-seconds", required_argument, NULL, O_TTL},
        {"family", required_argument, NULL, O_FAMILY},
        {"form", required_argument, NULL, O_FORM},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL, *key = NULL;
    char grant_id[OG_GRANT_ID_LEN + 1], expires[40];
    og_grant_claims cl;
    og_grant_form form = OG_FORM_TOKEN;
    og_issue_outcome outcome;
    og_signer *signer = NULL;
    og_store *s = NULL;
    char *token = NULL, *end;
    long ttl = 900;
    json_t *out;
    int c, rc;

    memset(&cl, 0, sizeof cl);
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_STORE: url = optarg; break;
        case O_KEY: key = optarg; break;
        case O_ISSUER: cl.iss = optarg; break;
        case O_SUBJECT: cl.sub = optarg; break;
        case O_AUD: cl.aud = optarg; break;
        case O_ACTION: cl.act = optarg; break;
        case O_ACCOUNT: cl.prm.account = optarg; break;
        case O_AMOUNT: cl.prm.amount = optarg; break;
        case O_CURRENCY: cl.prm.currency = optarg; break;
        case O_FAMILY: cl.fam = optarg; break;
        case O_TTL:
            ttl = strtol(optarg, &end, 10);
            if (*end || ttl < 1 || ttl > 366L * 24 * 3600) {
                fprintf(stderr, "oncegate: grant issue: --ttl-seconds must be a positive number of seconds\n");
                return OG_EXIT_USAGE;
            }
            break;
        case O_FORM:
            if (og_parse_form(optarg, &form) < 0) {
                fprintf(stderr, "oncegate: grant issue: --form is token or row\n");
                return OG_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(og_usage_grant, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_grant, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !key || !cl.iss || !cl.sub || !cl.aud || !cl.act ||
        !cl.prm.account || !cl.prm.amount || !cl.prm.currency) {
        fprintf(stderr, "oncegate: grant issue: missing a required option\n");
        fputs(og_usage_grant, stderr);
        return OG_EXIT_USAGE;
    }
    if ((rc = og_grant_new_id(grant_id)) != 0)
        return og_fail("grant issue", rc);
    cl.jti = grant_id;
    cl.iat = (int64_t)time(NULL);
    cl.exp = cl.iat + ttl;

    if ((rc = og_signer_load_file(key, &signer)) != 0)
        return og_fail("grant issue", rc);
    if ((rc = og_store_open(url, NULL, &s)) != 0) {
        og_signer_free(signer);
        return og_fail("grant issue", rc);
    }
    rc = og_grant_issue(s, signer, &cl, form, &token, &outcome);
    og_signer_free(signer);
    og_store_free(s);
    if (rc != 0)
        return og_fail("grant issue", rc);
    if (outcome != OG_ISSUE_RECORDED) {
        const char *why = outcome == OG_ISSUE_FAMILY_REVOKED ? "family_revoked"
                                                             : "grant_id_reused";
        fprintf(stderr, "oncegate: grant issue refused issuer=%s grant=%s reason=%s\n",
                cl.iss, grant_id, why);
        out = json_pack("{s:b, s:s}", "issued", 0, "error", why);
        og_cli_print_json(out);
        json_decref(out);
        return OG_EXIT_REFUSED;
    }
    og_time_format_rfc3339(cl.exp * INT64_C(1000000), expires, sizeof expires);
    out = json_pack("{s:s, s:s, s:s, s:s, s:s?}", "grant_id", grant_id,
                    "issuer", cl.iss, "token", token, "expires_at", expires,
                    "family", cl.fam);
    free(token);
    if (!out)
        return OG_EXIT_INTERNAL;
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_OK;
}

int og_cli_grant(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "issue") == 0)
        return og_cmd_grant_issue(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(og_usage_grant, stdout);
        return OG_EXIT_OK;
    }
    fputs(og_usage_grant, stderr);
    return OG_EXIT_USAGE;
}

int og_cli_consume(int argc, char **argv)
{
    enum { O_STORE = 256, O_ISSUER, O_GRANT, O_EXPIRES, O_FAMILY, O_FORM };
    static const struct option longopts[] = {
        {"store", required_argument, NULL, O_STORE},
        {"issuer", required_argument, NULL, O_ISSUER},
        {"grant-id", required_argument, NULL, O_GRANT},
        {"expires-at", required_argument, NULL, O_EXPIRES},
        {"family", required_argument, NULL, O_FAMILY},
        {"form", required_argument, NULL, O_FORM},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0},
    };
    const char *url = OG_DEFAULT_STORE_URL, *expires = NULL;
    og_grant g = {NULL, NULL, 0, NULL, OG_FORM_TOKEN};
    og_consume_result res;
    og_store *s = NULL;
    json_t *out;
    int c, rc;

    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_STORE: url = optarg; break;
        case O_ISSUER: g.issuer = optarg; break;
        case O_GRANT: g.grant_id = optarg; break;
        case O_EXPIRES: expires = optarg; break;
        case O_FAMILY: g.family = optarg; break;
        case O_FORM:
            if (og_parse_form(optarg, &g.form) < 0) {
                fprintf(stderr, "oncegate: consume: --form is token or row\n");
                return OG_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(og_usage_consume, stdout);
            return OG_EXIT_OK;
        default:
            fputs(og_usage_consume, stderr);
            return OG_EXIT_USAGE;
        }
    }
    if (optind != argc || !g.issuer || !g.grant_id || !expires) {
        fprintf(stderr, "oncegate: consume: --issuer, --grant-id and --expires-at are required\n");
        fputs(og_usage_consume, stderr);
        return OG_EXIT_USAGE;
    }
    if ((rc = og_time_parse_rfc3339(expires, &g.expires_at_us)) != 0)
        return og_fail("consume", rc);
    if ((rc = og_store_open(url, NULL, &s)) != 0)
        return og_fail("consume", rc);
    rc = og_consume(s, &g, &res);
    og_store_free(s);
    if (rc != 0)
        return og_fail("consume", rc);
    if (res.consumed) {
        out = json_pack("{s:b, s:s?}", "consumed", 1, "family",
                        res.family[0] ? res.family : NULL);
        og_cli_print_json(out);
        json_decref(out);
        return OG_EXIT_OK;
    }
    fprintf(stderr, "oncegate: consume refused issuer=%s grant=%s reason=%s\n",
            g.issuer, g.grant_id, og_refusal_name(res.refusal));
    out = json_pack("{s:b, s:s}", "consumed", 0, "error", "already_consumed");
    og_cli_print_json(out);
    json_decref(out);
    return OG_EXIT_REFUSED;
}
