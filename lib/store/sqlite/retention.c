/*
 * retention.c — the SQLite store's retention: cleanup of grant_consumptions
 * and the archiving of finished operations, one batch per BEGIN IMMEDIATE
 * transaction; store.c loops.
 *
 * They keep M23-M25 and M10 (lib/store/store_int.h); how:
 *
 *   Q19 A refusal record outlives every admission that could still commit
 *       (M23): cleanup (og__sq_cleanup_sql) deletes a grant_consumptions row
 *       only where retain_until < now - cleanup_margin on SQLite's clock,
 *       the clock the claim decided its deadline on (Q9), re-checked on the
 *       row it deletes. Here an admission cannot even be delayed between
 *       its deadline check and its commit behind a delete: both hold the
 *       write lock (Q1) for their whole transaction. The margin (T9) covers
 *       clock steps on the host.
 *   Q20 Cleanup's batch (M24) is one BEGIN IMMEDIATE transaction whose rows
 *       are picked oldest first over grant_consumptions_retain_until_idx by
 *       their primary key (the table has no rowid; (issuer, grant_id), or
 *       key_hash in a hashed store, Q6).
 *   Q21 An archiving batch (M25) is ONE BEGIN IMMEDIATE transaction over
 *       one fixed set: every statement of it selects the set with the same
 *       bound cutoff (read once from SQLite's clock) and a total order (last
 *       change, then id), under the write lock; SQ_TERMINAL names the
 *       terminal statuses. An archived operation still answers for its id
 *       (M10, Q10: admit.c).
 */
#include "internal.h"

/* ===========================================================================
 * Cleanup (Q19, Q20)
 * ========================================================================= */

/* ?1 cleanup_margin, ?2 batch, ?3 the pass's keyset cursor. At most ?2 due
 * rows, oldest first over grant_consumptions_retain_until_idx, picked by
 * their primary key (the table has no rowid: (issuer, grant_id), resp.
 * key_hash) and deleted where the bound still holds; returns each deleted
 * row's kind and key. */
#define SQ_CLEANUP_SQL(K)                                                      \
    "DELETE FROM grant_consumptions"                                           \
    " WHERE (" SQ_KCOLS_##K ") IN ("                                           \
    "   SELECT " SQ_KCOLS_##K " FROM grant_consumptions"                       \
    "   WHERE retain_until >= ?3 AND retain_until < " SQ_NOW " - ?1"           \
    "   ORDER BY retain_until LIMIT ?2)"                                       \
    "   AND retain_until < " SQ_NOW " - ?1"                                    \
    " RETURNING kind, retain_until"
const char og__sq_cleanup_sql[] = SQ_CLEANUP_SQL(READABLE);
const char og__sq_cleanup_hashed_sql[] = SQ_CLEANUP_SQL(HASHED);
enum { CLEANUP_KIND, CLEANUP_RETAIN_UNTIL, CLEANUP_NCOLS };

static int sq_cleanup_in(og__sq_store *s, og__sq_conn *c, int batch,
                         int64_t *from_us, og_cleanup_stats *out, bool *keep)
{
    og__claim_kind kind;
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, SQ_KEYED(s, og__sq_cleanup), &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, s->opts.timings.cleanup_margin_us);
    sqlite3_bind_int(st, 2, batch);
    sqlite3_bind_int64(st, 3, *from_us);
    while ((rc = og__sq_step(c, st)) == 1) {
        int64_t key = sqlite3_column_int64(st, CLEANUP_RETAIN_UNTIL);

        if (key > *from_us)
            *from_us = key;
        if ((rc = og__sq_claim_kind_parse(
                 (const char *)sqlite3_column_text(st, CLEANUP_KIND),
                 &kind)) < 0)
            break;
        if (kind == OG__CLAIM_ADMISSION)
            out->admissions++;
        else if (kind == OG__CLAIM_REVOCATION)
            out->revocations++;
        else
            out->consumes++;
        *keep = true;
    }
    sqlite3_reset(st);
    return rc;
}

int og__sq_cleanup_batch(void *impl, int batch, int64_t *from_us,
                         og_cleanup_stats *out)
{
    og__sq_store *s = impl;
    og_cleanup_stats one = {0, 0, 0, 0};
    int64_t from = *from_us;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_cleanup_in(s, c, batch, &from, &one, &keep);
    rc = og__sq_end(s, c, rc, keep);
    if (rc == 0) {
        *out = one;
        *from_us = from;
    }
    return rc;
}

/* ===========================================================================
 * Archiving (Q21)
 * ========================================================================= */

/* One archive batch (Q21): at most ?2 terminal operations whose last change
 * lies in [?4, ?1), in a total order, over operations_terminal_idx (its
 * expression and predicate repeated verbatim). INDEXED BY: without ANALYZE
 * statistics the planner prefers operations_backlog_idx's status range and
 * sorts every finished operation for each batch. */
#define SQ_ARCHIVE_PICK                                                       \
    "SELECT operation_id FROM operations INDEXED BY operations_terminal_idx"  \
    " WHERE status IN " SQ_TERMINAL                                           \
    "   AND coalesce(updated_at, created_at) >= ?4"                           \
    "   AND coalesce(updated_at, created_at) < ?1"                            \
    " ORDER BY coalesce(updated_at, created_at), operation_id LIMIT ?2"

/* Archiving: ?1 cutoff (last change before it), ?2 batch, ?3 archived_at
 * (the same 'now' the cutoff came from), ?4 the pass's keyset cursor. The
 * batch's greatest key, read first: the next cursor. */
static const char sq_archive_cursor_sql[] =
    "SELECT max(coalesce(updated_at, created_at)) FROM operations"
    " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")";
enum { ARCHIVE_CURSOR_LAST, ARCHIVE_CURSOR_NCOLS };
static const char sq_archive_events_sql[] =
    "INSERT INTO operation_events_archive (" SQ_EVENT_COLS ", archived_at)"
    " SELECT " SQ_EVENT_COLS ", ?3 FROM operation_events"
    " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")";
static const char sq_delete_events_sql[] =
    "DELETE FROM operation_events WHERE operation_id IN (" SQ_ARCHIVE_PICK ")";
static const char sq_archive_ops_sql[] =
    "INSERT INTO operations_archive (" SQ_OP_STORED_COLS ", archived_at)"
    " SELECT " SQ_OP_STORED_COLS ", ?3 FROM operations"
    " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")";
static const char sq_delete_ops_sql[] =
    "DELETE FROM operations WHERE operation_id IN (" SQ_ARCHIVE_PICK ")"
    "   AND status IN " SQ_TERMINAL;

/* One archive batch's fixed parameters (Q21). */
typedef struct sq_archive_args {
    int64_t cutoff; /* ?1: last change before it */
    int batch;      /* ?2 */
    int64_t now;    /* ?3: archived_at */
    int64_t from;   /* ?4: the pass's keyset cursor */
} sq_archive_args;

/* Runs archive statement sql for the batch a and adds the rows it changed
 * to *changed (NULL: not counted). */
static int sq_archive_step(og__sq_conn *c, const char *sql,
                           const sq_archive_args *a, int64_t *changed)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sql, &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, a->cutoff);
    sqlite3_bind_int(st, 2, a->batch);
    sqlite3_bind_int64(st, 3, a->now); /* the copies' archived_at; the
                                          DELETEs leave ?3 unused */
    sqlite3_bind_int64(st, 4, a->from);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if (changed)
        *changed += sqlite3_changes64(c->db);
    return 0;
}

/* The batch a's greatest key into *out, left as it is when the batch is
 * empty. */
static int sq_archive_cursor(og__sq_conn *c, const sq_archive_args *a,
                             int64_t *out)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_archive_cursor_sql, &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, a->cutoff);
    sqlite3_bind_int(st, 2, a->batch);
    sqlite3_bind_int64(st, 4, a->from);
    if ((rc = og__sq_step(c, st)) == 1 &&
        sqlite3_column_type(st, ARCHIVE_CURSOR_LAST) != SQLITE_NULL)
        *out = sqlite3_column_int64(st, ARCHIVE_CURSOR_LAST);
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

static int sq_archive_in(og__sq_conn *c, int64_t older_than_us,
                         og_archive_mode mode, int batch, int64_t *from_us,
                         og_archive_stats *out, bool *keep)
{
    sq_archive_args a = {0, batch, 0, *from_us};
    int64_t ops = 0, events = 0, next = *from_us;
    int rc;

    /* One cutoff for every statement of the batch (Q21). */
    if ((rc = og__sq_clock(c, &a.now)) < 0)
        return rc;
    a.cutoff = a.now - older_than_us;
    if ((rc = sq_archive_cursor(c, &a, &next)) < 0 ||
        (mode == OG_ARCHIVE_MOVE &&
         (rc = sq_archive_step(c, sq_archive_events_sql, &a, NULL)) < 0) ||
        (rc = sq_archive_step(c, sq_delete_events_sql, &a, &events)) < 0 ||
        (mode == OG_ARCHIVE_MOVE &&
         (rc = sq_archive_step(c, sq_archive_ops_sql, &a, NULL)) < 0) ||
        (rc = sq_archive_step(c, sq_delete_ops_sql, &a, &ops)) < 0)
        return rc;
    out->operations = ops;
    out->events = events;
    *from_us = next;
    *keep = ops > 0;
    return 0;
}

int og__sq_archive_batch(void *impl, int64_t older_than_us,
                         og_archive_mode mode, int batch, int64_t *from_us,
                         og_archive_stats *out)
{
    og__sq_store *s = impl;
    og_archive_stats one = {0, 0, 0};
    int64_t from = *from_us;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_archive_in(c, older_than_us, mode, batch, &from, &one, &keep);
    rc = og__sq_end(s, c, rc, keep);
    if (rc == 0) {
        *out = one;
        *from_us = from;
    }
    return rc;
}
