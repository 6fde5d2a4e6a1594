/*
 * retention.c — retention: cleanup of the refusal records
 * (grant_consumptions) and archiving of finished operations with their
 * history, one batch per statement, each its own implicit transaction;
 * lib/store/retention.c loops and carries the keyset cursor (S4). They
 * keep M23-M25 (lib/store/store_int.h); how:
 *
 *  I18 A refusal record outlives every admission that could still commit
 *      (M23). Cleanup (pg_cleanup_sql) deletes a grant_consumptions row
 *      only where retain_until < statement_timestamp() - cleanup_margin,
 *      and the DELETE re-checks that on the row it removes. An admission
 *      that could still claim the key evaluated its deadline (retain_until
 *      is exactly that deadline, I5) at its own statement_timestamp(), so
 *      it started before retain_until; the server aborts it store_timeout
 *      later, or it commits within commit_bound of its last timeout-covered
 *      moment (I8, checked at startup), and T9 makes cleanup_margin longer
 *      than both plus the largest clock step. So no admission that could
 *      have missed the row is still running when the row goes.
 *      statement_timestamp() is the cleanup statement's start: any wait
 *      makes it delete less, never more.
 *  I19 A cleanup batch (M24) is one statement: the row ids come from an
 *      index scan of grant_consumptions_retain_until_idx under FOR UPDATE
 *      SKIP LOCKED, so concurrent janitors split the work instead of
 *      queueing, and no batch holds locks for long; rows are picked by
 *      ctid, so one statement serves both consumption keys (I9).
 *  I20 An archiving batch (M25, pg_archive_sql, PG_V7_TERMINAL) is ONE
 *      statement: an operation and its history leave together or not at
 *      all (the events' foreign key is checked at the end of that
 *      statement). It never touches grant_consumptions.
 *
 * An archived operation still answers for its id (M10, I12: admit.c).
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Running a batch
 * ========================================================================= */

/* Runs retention statement stmt and reads its single row of n bigints —
 * counts, then the new cursor — into v. */
static int pg_run_counts(og__pg_store *pg, const og__pg_stmt *stmt,
                         const char *const *params, int64_t *v, int n)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int64_t got[PG_BATCH_NCOLS];
    int rc, i;

    if (n > PG_BATCH_NCOLS)
        return OG_EINTERNAL;
    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, stmt, params, &res);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, n, 1) != 0))
        rc = OG_EINTERNAL;
    for (i = 0; rc == 0 && i < n; i++)
        if (og__pg_get_i64(res, 0, i, &got[i]) != 0 ||
            (i < n - 1 && got[i] < 0))
            rc = OG_EINTERNAL; /* counts are never negative; the cursor
                                  (last) is a time */
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        memcpy(v, got, (size_t)n * sizeof *v);
    return rc;
}

int og__pg_run_batch(og__pg_store *pg, const og__pg_stmt *stmt,
                     const char *margin, int batch, int64_t from_us,
                     int64_t v[PG_BATCH_NCOLS])
{
    char limit[16], from[24];
    const char *params[3] = {margin, limit, from};

    snprintf(limit, sizeof limit, "%d", batch);
    og__pg_fmt_i64(from, sizeof from, from_us);
    return pg_run_counts(pg, stmt, params, v, PG_BATCH_NCOLS);
}

/* ===========================================================================
 * Cleanup (I18, I19). $1 cleanup_margin (µs)  $2 batch  $3 cursor (µs since
 * the epoch). The inner SELECT walks grant_consumptions_retain_until_idx from
 * the cursor — not from the oldest entry: the entries earlier batches deleted
 * stay in the index until a vacuum, and walking them again made a pass
 * quadratic — and locks at most $2 rows that no other janitor holds (I19); the
 * DELETE removes them by ctid and re-checks the bound on each row it removes
 * (I18), so even a row a ctid no longer names correctly is never deleted
 * early. statement_timestamp() is the statement's start: waiting only makes it
 * delete less. One row: the deleted rows by kind and the new cursor (the
 * greatest retain_until deleted; $3 when none).
 * ========================================================================= */
static const char pg_cleanup_sql[] =
    "WITH gone AS (\n"
    "  DELETE FROM grant_consumptions\n"
    "  WHERE ctid = ANY (ARRAY(\n"
    "          SELECT ctid FROM grant_consumptions\n"
    "          WHERE retain_until >= " PG_TS("$3") "\n"
    "            AND retain_until < statement_timestamp() - " PG_US("$1") "\n"
    "          ORDER BY retain_until\n"
    "          LIMIT $2::integer\n"
    "          FOR UPDATE SKIP LOCKED))\n"
    "    AND retain_until < statement_timestamp() - " PG_US("$1") "\n"
    "  RETURNING kind, retain_until)\n"
    "SELECT count(*) FILTER (WHERE kind = 'admission'),\n"
    "       count(*) FILTER (WHERE kind = 'revocation'),\n"
    "       count(*) FILTER (WHERE kind = 'consume'),\n"
    "       coalesce(" PG_EPOCH_US("max(retain_until)") ", $3::bigint)\n"
    "FROM gone";
const og__pg_stmt og__pg_cleanup_stmt = {"og_cleanup", pg_cleanup_sql, 3,
                                         OG_KEYS_AS_STORED};
enum {
    CLEANUP_ADMISSIONS,
    CLEANUP_REVOCATIONS,
    CLEANUP_CONSUMES,
    CLEANUP_CURSOR,
    CLEANUP_NCOLS
};
_Static_assert(CLEANUP_NCOLS == PG_BATCH_NCOLS, "a keyset batch's row");

int og__pg_cleanup_batch(void *impl, int batch, int64_t *from_us,
                         og_cleanup_stats *out)
{
    og__pg_store *pg = impl;
    int64_t v[CLEANUP_NCOLS];
    int rc;

    rc = og__pg_run_batch(pg, &og__pg_cleanup_stmt, pg->cleanup_margin, batch,
                          *from_us, v);
    if (rc == 0) {
        out->admissions = v[CLEANUP_ADMISSIONS];
        out->revocations = v[CLEANUP_REVOCATIONS];
        out->consumes = v[CLEANUP_CONSUMES];
        *from_us = v[CLEANUP_CURSOR];
    }
    return rc;
}

/* Archiving (I20). $1 minimum age of the last status change (µs)  $2 batch
 * $3 move (true) or delete (false)  $4 cursor (µs since the epoch, as for
 * cleanup).
 *  - pick: at most $2 terminal operations, oldest last change first from
 *    the cursor, over operations_terminal_idx, locked (SKIP LOCKED:
 *    concurrent archivers split the work). Terminal rows always have
 *    updated_at (the write that made them terminal set it); the coalesce
 *    matches the index anyway.
 *  - ev / eva: their events deleted, and copied to the archive when $3.
 *  - op / opa: the operations deleted, and copied when $3. pick holds their
 *    rows locked, and a terminal status never changes, so they are still
 *    the ones picked. Both DELETEs take their rows by = ANY (ARRAY(...)):
 *    an index lookup per id whatever the planner thinks of pick's size.
 *    The foreign key from operation_events is checked at the end of the
 *    statement, when the events are gone.
 * One row: operations, events, the new cursor. */
#define PG_EVENT_STORED_COLS                                                   \
    "seq, operation_id, at, kind, from_status, to_status, owner_version, "     \
    "reason, provider_reference, actor, evidence, source"
static const char pg_archive_sql[] =
    "WITH pick AS MATERIALIZED (\n"
    "  SELECT operation_id, coalesce(updated_at, created_at) AS changed FROM operations\n"
    "  WHERE status IN " PG_V7_TERMINAL "\n"
    "    AND coalesce(updated_at, created_at) >= " PG_TS("$4") "\n"
    "    AND coalesce(updated_at, created_at) < statement_timestamp() - " PG_US("$1") "\n"
    "  ORDER BY coalesce(updated_at, created_at)\n"
    "  LIMIT $2::integer\n"
    "  FOR UPDATE SKIP LOCKED),\n"
    "ev AS (\n"
    "  DELETE FROM operation_events\n"
    "  WHERE operation_id = ANY (ARRAY(SELECT operation_id FROM pick))\n"
    "  RETURNING *),\n"
    "eva AS (\n"
    "  INSERT INTO operation_events_archive (" PG_EVENT_STORED_COLS ", archived_at)\n"
    "  SELECT " PG_EVENT_STORED_COLS ", statement_timestamp() FROM ev WHERE $3::bool\n"
    "  RETURNING 1),\n"
    "op AS (\n"
    "  DELETE FROM operations\n"
    "  WHERE operation_id = ANY (ARRAY(SELECT operation_id FROM pick))\n"
    "  RETURNING *),\n"
    "opa AS (\n"
    "  INSERT INTO operations_archive (" PG_OP_STORED_COLS ", archived_at)\n"
    "  SELECT " PG_OP_STORED_COLS ", statement_timestamp() FROM op WHERE $3::bool\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT count(*) FROM op), (SELECT count(*) FROM ev),\n"
    "       coalesce((SELECT " PG_EPOCH_US("max(changed)") " FROM pick), $4::bigint)";
static const og__pg_stmt pg_archive_stmt = {"og_archive", pg_archive_sql, 4,
                                            OG_KEYS_AS_STORED};
enum { ARCHIVE_OPERATIONS, ARCHIVE_EVENTS, ARCHIVE_CURSOR, ARCHIVE_NCOLS };

int og__pg_archive_batch(void *impl, int64_t older_than_us,
                         og_archive_mode mode, int batch, int64_t *from_us,
                         og_archive_stats *out)
{
    og__pg_store *pg = impl;
    char age[24], limit[16], from[24];
    const char *params[4] = {age, limit,
                             mode == OG_ARCHIVE_MOVE ? "true" : "false", from};
    int64_t v[ARCHIVE_NCOLS];
    int rc;

    og__pg_fmt_i64(age, sizeof age, older_than_us);
    snprintf(limit, sizeof limit, "%d", batch);
    og__pg_fmt_i64(from, sizeof from, *from_us);
    rc = pg_run_counts(pg, &pg_archive_stmt, params, v, ARCHIVE_NCOLS);
    if (rc == 0) {
        out->operations = v[ARCHIVE_OPERATIONS];
        out->events = v[ARCHIVE_EVENTS];
        *from_us = v[ARCHIVE_CURSOR];
    }
    return rc;
}
