/*
 * storeerr.c — what a store failure means for an admission. Pure.
 *
 * The distinction carries the guarantee: "unavailable" tells the caller that
 * the write may or may not have happened and that a retry with the same
 * operation id finds out; "internal" is a defect that must surface. A
 * failure is never reported as a refusal, except the two unique keys that
 * ARE the refusal (operation id taken; grant already bound to an operation).
 *
 * Invariants:
 *   SE1 Only a unique violation on operations_pkey or operations_grant_key
 *       refuses; any other constraint failure is internal.
 *   SE2 Lost connections, cancellations, timeouts, shutdowns, exhausted
 *       resources, serialization failures, I/O errors and a read-only target
 *       (a standby after failover) are unavailable: retryable, outcome
 *       unknown.
 *   SE3 Anything unrecognised is internal, never unavailable, so a defect is
 *       not silently retried forever.
 *
 * PostgreSQL's failures arrive as strings (SQLSTATE, constraint name), so
 * their table is here; SQLite's arrive as its result codes, so its table
 * (og__sqlite_classify: SE2, SE3; the admission applies SE1 to SQLite's
 * constraint codes) lives with its backend in lib/store/sqlite/conn.c, and
 * core includes no backend header.
 */
#include <string.h>

#include "core/core_int.h"

/* SQLSTATE classes (first two characters) and codes that mean "retry". */
static const char *const pg_unavailable_classes[] = {
    "08", /* connection exception */
    "40", /* transaction rollback: serialization, deadlock, completion unknown */
    "53", /* insufficient resources: disk full, out of memory, too many conns */
    "57", /* operator intervention: query_canceled (statement_timeout or
             cancel), admin/crash shutdown, cannot connect now */
    "58", /* system error: I/O error */
};

static const char *const pg_unavailable_codes[] = {
    "25006", /* read_only_sql_transaction: connected to a standby */
    "25P03", /* idle_in_transaction_session_timeout */
    "25P04", /* transaction_timeout (PostgreSQL 17+) */
    "55P03", /* lock_not_available (lock_timeout) */
};

int og__pg_classify(const char *sqlstate, const char *constraint)
{
    size_t i;

    /* No SQLSTATE: libpq's own failure (connection lost, protocol). */
    if (!sqlstate || strlen(sqlstate) != 5)
        return OG_ESTORE_UNAVAILABLE;
    if (strcmp(sqlstate, "23505") == 0) {
        if (constraint && (strcmp(constraint, "operations_pkey") == 0 ||
                           strcmp(constraint, "operations_grant_key") == 0))
            return OG__PG_REFUSE; /* SE1 */
        return OG_EINTERNAL;
    }
    for (i = 0; i < sizeof pg_unavailable_codes / sizeof *pg_unavailable_codes;
         i++)
        if (strcmp(sqlstate, pg_unavailable_codes[i]) == 0)
            return OG_ESTORE_UNAVAILABLE;
    for (i = 0; i < sizeof pg_unavailable_classes / sizeof *pg_unavailable_classes;
         i++)
        if (strncmp(sqlstate, pg_unavailable_classes[i], 2) == 0)
            return OG_ESTORE_UNAVAILABLE;
    return OG_EINTERNAL; /* SE3 */
}
