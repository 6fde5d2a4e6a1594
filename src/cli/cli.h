/*
 * cli.h — pieces shared by the oncegate command's subcommands.
 */
#ifndef OG_CLI_H
#define OG_CLI_H

#include <jansson.h>

#include "oncegate/oncegate.h"

/* Exit codes (sysexits-style where one fits). */
enum {
    OG_EXIT_OK = 0,           /* admitted or already admitted; success */
    OG_EXIT_REFUSED = 1,      /* refused */
    OG_EXIT_USAGE = 2,        /* bad input or usage */
    OG_EXIT_INTERNAL = 70,    /* internal error */
    OG_EXIT_CANTCREAT = 73,   /* keygen: a key file already exists */
    OG_EXIT_IOERR = 74,       /* keygen: directory missing, write failed */
    OG_EXIT_UNAVAILABLE = 75, /* store unavailable: retry, same operation id */
    OG_EXIT_CONFIG = 78,      /* schema mismatch, bad store URL, bad timings */
};

/* The exit code for a negative OG_E* error. */
int og_cli_exit_for_error(int err);

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

/* `oncegate demo`. */
int og_cli_demo(int argc, char **argv);

#endif
