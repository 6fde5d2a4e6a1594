/*
 * commands.h — what src/serve/ offers the oncegate command (src/cli/): the
 * subcommands it implements, and where the sandbox executable is. The only
 * header of src/serve/ that src/cli/ includes (tools/check_layers.py): the
 * rest of serve.h and http.h stays inside the service.
 *
 * Each subcommand takes the command's argv from its own name on and returns
 * the process exit code (src/common/exit.h).
 */
#ifndef OG_SERVE_COMMANDS_H
#define OG_SERVE_COMMANDS_H

#include <stdio.h>

#include <jansson.h>

#include "oncegate/store.h"

/* `oncegate serve ...`. Returns the process exit code. */
int og_cli_serve(int argc, char **argv);
extern const char og_usage_serve[];
/* What `oncegate help serve` prints after og_usage_serve: the keys dev
 * mode changes, with their dev values and defaults (dev.c, D5). */
void og_srv_dev_help(FILE *f);

/* `oncegate recover --config FILE [--once]`. Returns the exit code. */
int og_cli_recover(int argc, char **argv);
extern const char og_usage_recover[];

/* `oncegate cleanup --config FILE [--once]`. Returns the exit code. */
int og_cli_cleanup(int argc, char **argv);
extern const char og_usage_cleanup[];

/* `oncegate archive-operations --config FILE [--delete]`. Returns the exit
 * code. */
int og_cli_archive_operations(int argc, char **argv);
extern const char og_usage_archive_operations[];

/* `oncegate payout-worker --config FILE [--until-idle]`: the payout
 * pipeline as its own process. Returns the exit code. */
int og_cli_payout_worker(int argc, char **argv);
extern const char og_usage_payout_worker[];

/* `oncegate dev-env [--data-dir DIR]`: prints `export OG_<ROLE>_KEY=...`
 * lines from DIR/dev-credentials.json for eval in a shell. Exit code. */
int og_cli_dev_env(int argc, char **argv);

/* The sandbox's executable name, and its path beside this executable (a
 * build directory, or the bindir both were installed to): malloc'd (the
 * caller frees it), or NULL when it is not there — then exec looks
 * OG_SANDBOX_BIN up in PATH. Used by serve --dev and oncegate demo. */
#define OG_SANDBOX_BIN "oncegate-sandbox"
char *og_srv_sandbox_path(void);

/* A payout as it is read (payout_view.c), for `oncegate payout show` and
 * GET /v1/admin/payouts/{payout_id}: {"payout", "decisions", "grants" (no
 * credential), "attempts" (each with its "history"), "history"} into *out
 * (the caller decrefs). Several store reads, not one snapshot. 1 found, 0
 * no such payout (*out NULL), or a library error. */
int og_payout_show_json(og_store *s, const char *payout_id, json_t **out);

/* The Unknown / NeedsReconciliation payout attempts, oldest first, at most
 * limit, each with its payout, grant and age at now_us: {"backlog",
 * "unknown", "needs_reconciliation"} into *out. 0 or a library error. */
int og_payout_backlog_json(og_store *s, int limit, int64_t now_us,
                           json_t **out);

/* An operation (a payout attempt's record) as JSON, without its secrets. */
json_t *og_srv_operation_json(const og_operation *op);

#endif /* OG_SERVE_COMMANDS_H */
