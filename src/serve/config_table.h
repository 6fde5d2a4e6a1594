/*
 * config_table.h — the configuration table of `oncegate serve` as its two
 * readers share it: config.c holds the table (one row per key: name, type,
 * bounds, default, doc, where the value lands in og_srv_config) and writes
 * docs/config.md from it; config_load.c loads, sets and checks a
 * configuration by it. Private to those two files.
 */
#ifndef OG_SERVE_CONFIG_TABLE_H
#define OG_SERVE_CONFIG_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "serve.h"

#define OG_CFG_NAME_MAX 128        /* a dotted key name */
#define OG_CFG_PRINCIPALS_MAX 4096 /* principals in one configuration */

typedef enum og_srv_cfg_type {
    OG_CFG_OBJECT,     /* a JSON object whose members are "NAME.member" rows */
    OG_CFG_STRING,     /* min..max bytes, no control characters: char * */
    OG_CFG_PATH_OPT,   /* as OG_CFG_STRING; "" lands as NULL (automatic) */
    OG_CFG_ID,         /* the identifier rule: char * */
    OG_CFG_ISSUER,     /* the identifier and key-file-name rules: char * */
    OG_CFG_LISTEN,     /* HOST:PORT or [IPV6]:PORT: listen_host, listen_port */
    OG_CFG_ENUM,       /* one of the row's names: its index, an enum */
    OG_CFG_INT,        /* integer min..max: int */
    OG_CFG_SIZE,       /* integer min..max: size_t */
    OG_CFG_MS,         /* integer milliseconds min..max: int64_t microseconds */
    OG_CFG_BOOL,       /* true | false: bool */
    OG_CFG_PRINCIPALS, /* array of at most max principal objects */
} og_srv_cfg_type;

typedef struct og_srv_cfg_key {
    const char *name; /* dotted path: "timings.execution_lease_ms" */
    og_srv_cfg_type type;
    int64_t min, max; /* numbers: the value; strings: the length; listen:
                         the port; principals: the count */
    const char *def;  /* the default as JSON text; NULL: og_timings_default()
                         (timings) or none (objects) */
    size_t off;       /* where the value lands in og_srv_config */
    const char *doc;  /* one sentence or two for docs/config.md */
} og_srv_cfg_key;

extern const og_srv_cfg_key og_srv_cfg_keys[];
extern const size_t og_srv_cfg_n_keys; /* rows in og_srv_cfg_keys */

/* A pointer to row k's landing place in c, read-only. */
const void *og_srv_cfg_at_const(const og_srv_cfg_key *k,
                                const og_srv_config *c);

/* The names of enum row k, NULL-ended: never NULL for a row of the table
 * (a test renders every row). */
const char *const *og_srv_cfg_names(const og_srv_cfg_key *k);

/* The number of names of enum row k. */
int og_srv_cfg_enum_count(const og_srv_cfg_key *k);

/* Writes the names of enum row k as `"a", "b" or "c"` (quote: the
 * character around each name) into buf. Returns buf. */
const char *og_srv_cfg_enum_list(const og_srv_cfg_key *k, char quote,
                                 char *buf, size_t len);

#endif /* OG_SERVE_CONFIG_TABLE_H */
