/*
 * demo.h — what `oncegate demo`'s files share (src/cli/demo.c: the
 * processes, HTTP and the credit incidents; src/cli/demo_payout.c: the
 * payout incident). Nothing outside the demo includes it.
 */
#ifndef OG_CLI_DEMO_H
#define OG_CLI_DEMO_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "oncegate/oncegate.h" /* OG_UUID_LEN */

typedef struct demo_proc {
    const char *name; /* "sandbox", "serve A", "serve B" */
    const char *log;  /* file name of its stderr inside the data dir */
    pid_t pid;
    char url[256];
} demo_proc;

typedef struct demo_tally {
    int steps, failed, replays, replays_refused;
} demo_tally;

typedef struct demo {
    char dir[PATH_MAX];
    const char *store; /* --store, or NULL: DIR/oncegate.db */
    char *sandbox_path;
    demo_proc sb, a, b;
    char issuer_key[256], agent_key[256], agent_id[160];
    char payout_admin_key[256], clerk_key[256], operator_key[256];
    demo_tally t;
} demo;

/* Starts serve p on the shared data dir and store, against the sandbox. */
int demo_start_serve(demo *d, demo_proc *p);
/* Stops p with sig and reaps it; true when it exited as expected. */
bool demo_reap(demo_proc *p, int sig);
/* One request (a fresh connection); the HTTP status and *out, or 0. */
long demo_http(const char *method, const char *base, const char *path,
               const char *key, json_t *body, json_t **out);
/* GET base+path without credentials: the status and *text (the answer,
 * NUL-terminated, or NULL; the caller frees it), or 0. */
long demo_http_text(const char *base, const char *path, char **text);
/* o[k] as a string, or "" when absent or not a string. */
const char *demo_str(const json_t *o, const char *k);
/* Tallies a step and prints its verdict at the end of the current line. */
void demo_verdict(demo_tally *t, bool ok, bool replay, const char *yes,
                  const char *no);
/* Seconds since t0 (CLOCK_MONOTONIC). */
double demo_since(const struct timespec *t0);

/* Prints one history entry of an operation or payout attempt
 * ({kind, from, to, actor, reason, provider_reference}) after indent. */
void demo_history_line(const json_t *e, const char *indent);
/* Arms the sandbox's drop_response_after_effect once: the next create
 * takes effect and its answer is lost. 0, or -1 (said on stderr). */
int demo_arm_drop(demo *d);
/* n random (version 4) UUIDs. */
void demo_uuids(char op[][OG_UUID_LEN + 1], size_t n);

/* Incident 3, the payout (src/cli/demo_payout.c). -1 when the demo cannot
 * go on. */
int demo_payout_incident(demo *d);

#endif
