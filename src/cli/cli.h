/*
 * cli.h — pieces shared by the oncegate command's subcommands.
 */
#ifndef OG_CLI_H
#define OG_CLI_H

#include <jansson.h>

#include "exit.h" /* the exit codes every subcommand shares */
#include "oncegate/oncegate.h"

/* A new JSON object describing op (timestamps as RFC 3339). NULL on OOM. */
json_t *og_cli_operation_json(const og_operation *op);

/* Runs one admission and builds the JSON answer the admit command prints
 * ({"outcome":…, "operation":{…}} or {"error":…, "message":…}) into
 * *answer (a new reference). Logs a refusal's reason and any error to stderr
 * with identifiers only. Returns the exit code. */
int og_cli_admit(og_store *s, const og_grant *g, const og_intent *in,
                 json_t **answer);

/* {"error": code, "message": text} for err (a new reference). */
json_t *og_cli_error_json(int err);

/* `oncegate grant issue`, `oncegate consume` (src/cli/grants.c). */
int og_cli_grant(int argc, char **argv);
int og_cli_consume(int argc, char **argv);
extern const char og_usage_grant[];
extern const char og_usage_consume[];

/* Prints a JSON value on one line to stdout and flushes. */
void og_cli_print_json(json_t *v);

/* `oncegate payouts run` (src/cli/payouts.c). */
int og_cli_payouts(int argc, char **argv);
extern const char og_usage_payouts[];

/* `oncegate payout show|backlog|resolve|resubmit|hold` (src/cli/payout.c). */
int og_cli_payout(int argc, char **argv);
extern const char og_usage_payout[];

/* `oncegate demo`. */
int og_cli_demo(int argc, char **argv);

#endif
