/*
 * exec.c — execution: the ownership protocol one owner at a time moves an
 * admitted operation forward with (op_may_submit, op_start, op_record,
 * op_takeover, op_resolve), and the reads of operations and their history
 * (op_list, op_insert for tests, op_history).
 *
 * These keep M16-M22 (lib/store/store_int.h); how:
 *
 *  I15 Each execution write (pg_op_start_sql, pg_op_record_sql,
 *      pg_op_takeover_sql, pg_op_resolve_sql) is ONE statement (M16): a CTE
 *      locks the operation's row FOR NO KEY UPDATE where its status and
 *      owner_version are the expected ones (M17) — under Read Committed a
 *      locker that waited re-checks them on the row's newest version — then
 *      reads clock_timestamp() ONCE, after the lock (M18: a lock wait never
 *      eats a lease), then UPDATEs the row with the same conditions (a
 *      start's lease_until and submit_by tests use that instant) and
 *      INSERTs the event from the UPDATE's RETURNING. A start and a record
 *      go through the group commit of outcomes (outcome_batch.c,
 *      OB1-OB6): alone, these statements; in a batch, one statement of
 *      the same conditions for every row.
 *  I16 op_list runs as an unnamed statement (M21), planned with its
 *      parameters on every call: a generic plan of a named one could not
 *      prove the partial recovery index's predicate from a status
 *      parameter. Its lease_expired test uses statement_timestamp()
 *      (stable, so an index condition); the takeover decides with its own
 *      clock anyway. op_may_submit (M19) reads clock_timestamp().
 *  I17 Operation kinds (M22, schema 7): the admission statements write no
 *      new column (a credit is kind's DEFAULT) and old rows need no
 *      backfill (NULL key and reference), so migration 7 rewrites nothing;
 *      the schema holds both rules of a payout attempt
 *      (operations_payout_status_check, operations_not_started_check), so
 *      a statement that broke one would fail as a defect (M5), never
 *      commit. The credit path's statements are those of schema 6 apart
 *      from the columns every read returns.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Execution (M16-M22; I15-I17): one owner at a time moves an admitted
 * operation forward. The four writes share one shape:
 *  - cur: the operation's row, locked FOR NO KEY UPDATE (the lock the
 *    UPDATE itself takes) where its status and owner_version are the
 *    expected ones. A concurrent writer of the same row makes this wait;
 *    Read Committed then re-checks the conditions on the newest version, so
 *    of two writers expecting one version at most one finds it (I15, M17).
 *  - t: clock_timestamp() read once, after the lock: it reads cur, and a
 *    volatile CTE is materialized, never re-evaluated.
 *  - upd: the UPDATE, repeating the conditions (the row is ours now, so they
 *    hold; repeating them keeps the guarantee readable in one place).
 *  - ev: the event, from upd's RETURNING only: written exactly when the row
 *    changed, in the same implicit transaction (I1).
 * ========================================================================= */

/* The set of statuses in bits as a text[] literal ("{Admitted,Unknown}").
 * Status names are plain letters, so no element needs quoting. Room for
 * every status (PG_STATUSES_MAX, internal.h). */
static int pg_status_array(unsigned bits, char *buf, size_t n)
{
    size_t len = 0;
    int st, w;

    buf[len++] = '{';
    for (st = 0; st < OG_OP_STATUS_COUNT; st++) {
        if (!(bits & OG_OP_BIT(st)))
            continue;
        w = snprintf(buf + len, n - len, "%s%s", len > 1 ? "," : "",
                     og_op_status_name((og_op_status)st));
        if (w < 0 || (size_t)w >= n - len)
            return OG_EINTERNAL;
        len += (size_t)w;
    }
    if (len + 2 > n)
        return OG_EINTERNAL;
    buf[len++] = '}';
    buf[len] = '\0';
    return 0;
}

/* The one row of pg_op_may_submit_sql, pg_op_start_sql, pg_op_record_sql
 * and pg_op_resolve_sql: one bool, the answer. */
enum { OP_ANSWER, OP_ANSWER_NCOLS };

/* Runs a statement whose single row holds a single bool (may_submit,
 * record, resolve) and reads it into *out. */
static int pg_run_bool(og__pg_store *pg, const og__pg_stmt *stmt,
                       const char *const *params, bool *out)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, stmt, params, &res);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, OP_ANSWER_NCOLS, 1) != 0 ||
         PQgetisnull(res, 0, OP_ANSWER)))
        rc = OG_EINTERNAL;
    if (rc == 0)
        *out = og__pg_get_bool(res, 0, OP_ANSWER);
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* May the owner send a create request now (M19)? $1 operation_id
 * $2 owner_version. One row: the answer. A credit is sent from Admitted or
 * Unknown; a payout only once Started (P1, I17). */
static const char pg_op_may_submit_sql[] =
    "SELECT EXISTS (\n"
    "  SELECT 1 FROM operations\n"
    "  WHERE operation_id = $1::uuid\n"
    "    AND ((kind = 'credit' AND status IN ('Admitted','Unknown'))\n"
    "         OR (kind = 'payout' AND status = 'Started'))\n"
    "    AND owner_version = $2::bigint\n"
    "    AND clock_timestamp() < least(lease_until, submit_by))";
static const og__pg_stmt pg_op_may_submit_stmt = {
    "og_op_may_submit", pg_op_may_submit_sql, 2, OG_KEYS_AS_STORED};

int og__pg_op_may_submit(void *impl, const char *operation_id,
                         int64_t owner_version, bool *may)
{
    og__pg_store *pg = impl;
    char version[24];
    const char *params[2] = {operation_id, version};

    og__pg_fmt_i64(version, sizeof version, owner_version);
    return pg_run_bool(pg, &pg_op_may_submit_stmt, params, may);
}

/* Marks a payout attempt Started (I17: P1, P2). $1 operation_id
 * $2 owner_version  $3 actor. One row: whether it started. The lease and
 * submit_by are compared with t.now, read once after cur's lock: a start
 * that waited for a takeover's lock re-checks the version on the newest
 * row and finds it moved (I15, M17). updated_at and the event's `at` are
 * that instant. */
static const char pg_op_start_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id FROM operations\n"
    "  WHERE operation_id = $1::uuid AND kind = 'payout' AND status = 'Admitted'\n"
    "    AND owner_version = $2::bigint\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET status = 'Started', updated_at = t.now\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id\n"
    "    AND o.kind = 'payout' AND o.status = 'Admitted' AND o.owner_version = $2::bigint\n"
    "    AND o.lease_until > t.now AND o.submit_by > t.now\n"
    "  RETURNING o.operation_id, o.owner_version, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                actor)\n"
    "  SELECT operation_id, event_at, 'started', 'Admitted', 'Started', owner_version, $3::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT EXISTS (SELECT 1 FROM ev)";
const og__pg_stmt og__pg_op_start_stmt = {"og_op_start", pg_op_start_sql,
                                             3, OG_KEYS_AS_STORED};

int og__pg_op_start(void *impl, const char *operation_id, int64_t owner_version,
                    const char *actor, bool *started)
{
    og__outcome_row row = {.kind = OG__OUTCOME_START,
                           .operation_id = operation_id,
                           .owner_version = owner_version,
                           .actor = actor};

    /* Through the group commit of outcomes (outcome_batch.c, OB1); true
     * only after ReadyForQuery (I1, OB6): the caller may send (P1). */
    return og__pg_outcome_submit(impl, &row, started);
}

/* Records an outcome. $1 operation_id  $2 expected statuses (text[] of
 * Admitted, Started and Unknown only: store.c)  $3 owner_version  $4 new
 * status  $5 reason (NULL: none)  $6 provider reference (NULL: keep the
 * stored one)  $7 actor. One row: whether it recorded. from_status comes
 * from cur, the locked row, since an UPDATE's RETURNING sees only the new
 * values. PG_NOT_STARTED_OK: NotStarted only for a payout above the
 * initial owner version (P2, I17), whatever store.c checked. $8 evidence
 * and $9 source (schema 11; NULL: none) go into the event; NotApplied only
 * once "not found" may be final, at the takeover that began the lookup and
 * at t.now (PG_FINAL_ABSENCE, I29: P6). */
#define PG_NOT_STARTED_OK(t)                                                   \
    "($4::text <> 'NotStarted' OR (" t "kind = 'payout' AND " t               \
    "owner_version > " PG_STR(OG__INITIAL_OWNER_VERSION) "))"
static const char pg_op_record_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id, status FROM operations\n"
    "  WHERE operation_id = $1::uuid AND status = ANY ($2::text[]) AND owner_version = $3::bigint\n"
    "    AND " PG_NOT_STARTED_OK("") "\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET status = $4::text, outcome_reason = $5::text,\n"
    "      provider_reference = coalesce($6::text, o.provider_reference), updated_at = t.now\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id\n"
    "    AND o.status = ANY ($2::text[]) AND o.owner_version = $3::bigint\n"
    "    AND " PG_NOT_STARTED_OK("o.") "\n"
    "    AND ($4::text <> 'NotApplied' OR " PG_FINAL_ABSENCE("o.", "t.now") ")\n"
    "  RETURNING o.operation_id, cur.status AS from_status, o.status AS to_status,\n"
    "            o.owner_version, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                reason, provider_reference, actor, evidence, source)\n"
    "  SELECT operation_id, event_at, 'outcome', from_status, to_status, owner_version,\n"
    "         $5::text, $6::text, $7::text, $8::text, $9::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT EXISTS (SELECT 1 FROM ev)";
const og__pg_stmt og__pg_op_record_stmt = {
    "og_op_record", pg_op_record_sql, 9, OG_KEYS_AS_STORED};

/* pg_op_record_sql's parameters, into params[9]; version and statuses are
 * the caller's buffers (24 and PG_STATUSES_MAX bytes). Shared by the
 * outcome alone and the resolution (I28), so both run the one statement. */
int og__pg_op_record_params(const char *operation_id, unsigned expected,
                            int64_t owner_version, const og_op_outcome *o,
                            const char *source, char *version,
                            char *statuses, const char *params[9])
{
    const char *to = og_op_status_name(o->status);
    int rc;

    if (expected == 0 || strcmp(to, "?") == 0)
        return OG_EINTERNAL; /* store.c checked the transition: a defect */
    rc = pg_status_array(expected, statuses, PG_STATUSES_MAX);
    if (rc != 0)
        return rc;
    og__pg_fmt_i64(version, 24, owner_version);
    params[0] = operation_id;
    params[1] = statuses;
    params[2] = version;
    params[3] = to;
    params[4] = o->reason;
    params[5] = o->provider_reference;
    params[6] = o->actor;
    params[7] = o->evidence;
    params[8] = source;
    return 0;
}

/* The resolution's outcome (I28): this very statement, inside its
 * transaction. */
int og__pg_op_record_in(og__pg_store *pg, og__pg_conn *c, const char *id,
                        unsigned expected, int64_t owner_version,
                        const og_op_outcome *o, const char *source,
                        bool *recorded, int64_t deadline_us)
{
    char version[24], statuses[PG_STATUSES_MAX];
    const char *params[9];
    PGresult *res = NULL;
    int rc;

    if ((rc = og__pg_op_record_params(id, expected, owner_version, o, source,
                                  version, statuses, params)) != 0)
        return rc;
    rc = og__pg_run_in(pg, c, &og__pg_op_record_stmt, params, &res,
                       deadline_us);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, OP_ANSWER_NCOLS, 1) != 0 ||
         PQgetisnull(res, 0, OP_ANSWER)))
        rc = OG_EINTERNAL;
    if (rc == 0)
        *recorded = og__pg_get_bool(res, 0, OP_ANSWER);
    PQclear(res);
    return rc;
}

int og__pg_op_record(void *impl, const char *operation_id, unsigned expected,
                     int64_t owner_version, const og_op_outcome *o,
                     bool *recorded)
{
    og__outcome_row row = {.kind = OG__OUTCOME_RECORD,
                           .operation_id = operation_id,
                           .owner_version = owner_version,
                           .expected = expected,
                           .o = o};

    /* Through the group commit of outcomes (outcome_batch.c, OB1). */
    return og__pg_outcome_submit(impl, &row, recorded);
}

/* Takes an operation over for recovery (docs/design.md, "Execution: one
 * owner at a time": the conditional update).
 * $1 operation_id  $2 expected owner_version  $3 recovery lease (µs)
 * $4 actor. Zero rows: not taken; one row: the record after the takeover,
 * from upd's RETURNING (the statement's snapshot still shows the old row).
 * lease_until < now is decided after the lock, with the instant the new
 * lease starts from; updated_at is left (M17). A Started payout is taken
 * over too (its owner's lease lapsed: P3 then makes it Unknown); the new
 * version fences the old owner's og_op_start and records (P2). */
static const char pg_op_takeover_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id FROM operations\n"
    "  WHERE operation_id = $1::uuid AND status IN " PG_V7_OWNED "\n"
    "    AND owner_version = $2::bigint\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET owner_version = o.owner_version + 1, lease_until = t.now + " PG_US("$3") ",\n"
    "      taken_at = t.now\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id\n"
    "    AND o.status IN " PG_V7_OWNED " AND o.owner_version = $2::bigint\n"
    "    AND o.lease_until < t.now\n"
    "  RETURNING o.*, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                actor)\n"
    "  SELECT operation_id, event_at, 'takeover', status, status, owner_version, $4::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT " PG_OP_COLUMNS("upd.") " FROM upd";
const og__pg_stmt og__pg_op_takeover_stmt = {
    "og_op_takeover", pg_op_takeover_sql, 4, OG_KEYS_AS_STORED};

int og__pg_op_takeover(void *impl, const char *operation_id,
                       int64_t owner_version, const char *actor,
                       og_operation *out, bool *taken)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char version[24];
    const char *params[4] = {operation_id, version, pg->recovery_lease, actor};
    og_operation op;
    bool t = false;
    int rc;

    og__pg_fmt_i64(version, sizeof version, owner_version);
    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, &og__pg_op_takeover_stmt, params, &res);
    if (rc != 0)
        goto out;
    if (og__pg_shape(res, OP_NCOLS, 1) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (PQntuples(res) == 1) {
        /* Confirmed at ReadyForQuery (I1), event included (I15). */
        rc = og__pg_op_parse(res, 0, 0, &op);
        t = rc == 0;
    }
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0) {
        *taken = t;
        if (t)
            *out = op;
    }
    return rc;
}

/* Resolves a NeedsReconciliation operation by hand. $1 operation_id
 * $2 to ('Succeeded' | 'Failed' | 'NotApplied': store.c)  $3 operator
 * $4 reason
 * $5 evidence  $6 provider reference (NULL: keep the stored one). One row:
 * whether it resolved. The version increment fences any late writer (M17). */
static const char pg_op_resolve_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id, status FROM operations\n"
    "  WHERE operation_id = $1::uuid AND status = 'NeedsReconciliation'\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET status = $2::text, owner_version = o.owner_version + 1, outcome_reason = $4::text,\n"
    "      provider_reference = coalesce($6::text, o.provider_reference), updated_at = t.now\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id AND o.status = 'NeedsReconciliation'\n"
    "  RETURNING o.operation_id, cur.status AS from_status, o.status AS to_status,\n"
    "            o.owner_version, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                reason, provider_reference, actor, evidence)\n"
    "  SELECT operation_id, event_at, 'resolved', from_status, to_status, owner_version,\n"
    "         $4::text, $6::text, $3::text, $5::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT EXISTS (SELECT 1 FROM ev)";
static const og__pg_stmt pg_op_resolve_stmt = {
    "og_op_resolve", pg_op_resolve_sql, 6, OG_KEYS_AS_STORED};

int og__pg_op_resolve(void *impl, const char *operation_id, og_op_status to,
                      const char *operator_id, const char *reason,
                      const char *evidence, const char *provider_reference,
                      bool *resolved)
{
    og__pg_store *pg = impl;
    const char *params[6];

    if (to != OG_OP_SUCCEEDED && to != OG_OP_FAILED && to != OG_OP_NOT_APPLIED)
        return OG_EINTERNAL; /* store.c checked the transition: a defect */
    params[0] = operation_id;
    params[1] = og_op_status_name(to);
    params[2] = operator_id;
    params[3] = reason;
    params[4] = evidence;
    params[5] = provider_reference;
    return pg_run_bool(pg, &pg_op_resolve_stmt, params, resolved);
}

/* Lists operations, oldest first (I16). $1 statuses (text[]; NULL: all,
 * or exactly one)  $2 lease expired only  $3 created before (µs; NULL: no
 * bound)  $4 limit  $5 the one status when exactly one (NULL otherwise)
 * $6 the one kind (NULL: every kind; there are two, so a set of kinds is
 * one kind or all).
 * Run unnamed, so each call is planned with its values: the NULL and false
 * branches fold away, status = ANY ('{Admitted,Unknown}') proves the
 * predicate of operations_recovery_idx, and one status is an equality,
 * which operations_backlog_idx serves already in order (a one-element
 * ANY is not turned into one, and an array condition gives up the
 * index's order on PostgreSQL 15) — from schema 15 a status of
 * PG_V15_BACKLOG; Admitted or Started alone is read over the recovery
 * index, whose predicate it proves, and sorted (schema.c, migration 15). The ORDER BY names the table's columns:
 * a bare operation_id would mean the output column, its text. */
static const char pg_op_list_sql[] =
    "SELECT " PG_OP_COLUMNS("") "\n"
    "FROM operations\n"
    "WHERE ($1::text[] IS NULL OR status = ANY ($1::text[]))\n"
    "  AND ($5::text IS NULL OR status = $5::text)\n"
    "  AND (NOT $2::bool OR lease_until < statement_timestamp())\n"
    "  AND ($3::bigint IS NULL OR created_at < " PG_TS("$3") ")\n"
    "  AND ($6::text IS NULL OR kind = $6::text)\n"
    "ORDER BY operations.created_at, operations.operation_id\n"
    "LIMIT $4::integer";
/* Its descriptor, for og_store_explain alone: the listing runs unnamed
 * (og__pg_exec_params), so it is planned for each call's values, the
 * custom plan. */
const og__pg_stmt og__pg_op_scan_stmt = {"og_op_scan", pg_op_list_sql, 6,
                                         OG_KEYS_AS_STORED};

/* pg_op_list_sql's six values for filter f, in the buffers given:
 * 0, or OG_EINTERNAL for a status set store.c should have refused. */
int og__pg_op_list_params(const og_op_filter *f,
                          char statuses[PG_STATUSES_MAX], char before[24],
                          char limit[16], const char *params[6])
{
    bool one = f->statuses != 0 && (f->statuses & (f->statuses - 1)) == 0;
    int rc, i;

    for (i = 0; i < 6; i++)
        params[i] = NULL;
    /* One kind, or all of them (NULL): a set of two is one or both. */
    for (i = 0; i < OG_OP_KIND_COUNT; i++)
        if (f->kinds == OG_OP_KIND_BIT(i))
            params[5] = og_op_kind_name((og_op_kind)i);
    if (one) {
        for (i = 0; i < OG_OP_STATUS_COUNT; i++)
            if (f->statuses == OG_OP_BIT(i))
                params[4] = og_op_status_name((og_op_status)i);
        if (params[4] == NULL)
            return OG_EINTERNAL; /* store.c bounds the bits: a defect */
    } else if (f->statuses != 0) {
        rc = pg_status_array(f->statuses, statuses, PG_STATUSES_MAX);
        if (rc != 0)
            return rc;
        params[0] = statuses;
    }
    og__pg_fmt_i64(before, 24, f->created_before_us);
    snprintf(limit, 16, "%d", f->limit);
    params[1] = f->lease_expired ? "true" : "false";
    params[2] = f->created_before_us > 0 ? before : NULL;
    params[3] = limit;
    return 0;
}

int og__pg_op_list(void *impl, const og_op_filter *f, og_op_list *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char statuses[PG_STATUSES_MAX], before[24], limit[16];
    const char *params[6];
    og_op_list l = {NULL, 0};
    int rc, i, n;

    if ((rc = og__pg_op_list_params(f, statuses, before, limit, params)) != 0)
        return rc;
    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    /* Unnamed: planned with these values (I16). */
    rc = og__pg_exec_params(pg, c, pg_op_list_sql, 6, params, PQTRANS_IDLE,
                            &res);
    if (rc != 0)
        goto out;
    n = PQntuples(res);
    if (og__pg_shape(res, OP_NCOLS, f->limit) != 0) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (n > 0) {
        l.v = calloc((size_t)n, sizeof *l.v);
        if (l.v == NULL) {
            rc = OG_ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < n && rc == 0; i++)
        rc = og__pg_op_parse(res, i, 0, &l.v[i]);
    l.n = (size_t)n;
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc != 0) {
        free(l.v);
        return rc;
    }
    *out = l;
    return 0;
}

/* og__op_insert (tests only, run unprepared): one operation of kind $11,
 * without a claim. $1..$7 the binding as in pg_admit_sql's $3, $1, $2,
 * $5..$8  $8 initial owner version  $9 execution lease  $10 submission
 * window  $12 idempotency key, $13 client reference (NULL: the operation
 * id). The times as an admission sets them: one clock_timestamp(). */
static const char pg_op_insert_sql[] =
    "INSERT INTO operations (operation_id, issuer, grant_id, caller_id, account_id, amount, currency,\n"
    "                        status, owner_version, lease_until, submit_by, created_at,\n"
    "                        kind, idempotency_key, client_reference)\n"
    "SELECT $1::uuid, $2::text, $3::text, $4::text, $5::text, $6::numeric, $7::text,\n"
    "       'Admitted', $8::bigint, t.now + " PG_US("$9") ", t.now + " PG_US("$10") ", t.now,\n"
    "       $11::text, $12::text, $13::text\n"
    "FROM (SELECT clock_timestamp() AS now) t\n"
    "RETURNING " PG_OP_COLUMNS("");

int og__pg_op_insert(void *impl, const og__admit_req *req, og_op_kind k,
                     const char *idempotency_key, const char *client_reference,
                     og_operation *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char version[24];
    const char *params[13] = {
        req->operation_id, req->issuer, req->grant_id,      req->caller_id,
        req->account_id,   req->amount, req->currency,      version,
        pg->lease,         pg->window,  og_op_kind_name(k), idempotency_key,
        client_reference};
    og_operation op;
    int rc;

    og__pg_fmt_i64(version, sizeof version, OG__INITIAL_OWNER_VERSION);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_exec_params(pg, c, pg_op_insert_sql, 13, params, PQTRANS_IDLE,
                            &res);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, OP_NCOLS, 1) != 0))
        rc = OG_EINTERNAL;
    if (rc == 0)
        rc = og__pg_op_parse(res, 0, 0, &op);
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 0)
        *out = op;
    return rc;
}

/* The stored history of one operation, in seq order (M21). $1 operation_id. */
static const char pg_op_history_sql[] =
    "SELECT seq, (extract(epoch FROM at) * 1000000)::bigint, kind, from_status, to_status,\n"
    "       owner_version, reason, provider_reference, actor, evidence, source\n"
    "FROM operation_events WHERE operation_id = $1::uuid\n"
    "ORDER BY seq";
static const og__pg_stmt pg_op_history_stmt = {
    "og_op_history", pg_op_history_sql, 1, OG_KEYS_AS_STORED};
/* Its columns: OP_HISTORY_* (rows.h). */

int og__pg_op_history(void *impl, const char *operation_id, og_op_events *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {operation_id};
    og_op_events e = {NULL, 0};
    int rc, i, n;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_op_history_stmt, params, &res);
    if (rc != 0)
        goto out;
    n = PQntuples(res);
    if (PQnfields(res) != OP_HISTORY_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if ((size_t)n > OG__OP_HISTORY_MAX) {
        rc = OG_ENOMEM; /* as SQLite's array stops there */
        goto out;
    }
    if (n > 0) {
        e.v = calloc((size_t)n, sizeof *e.v);
        if (e.v == NULL) {
            rc = OG_ENOMEM;
            goto out;
        }
    }
    for (i = 0; i < n && rc == 0; i++)
        rc = og__row_op_event(og__pg_row(res, i), &e.v[i]);
    e.n = (size_t)n;
out:
    PQclear(res);
    og__pg_release(pg, c);
    if (rc != 0) {
        free(e.v);
        return rc;
    }
    *out = e;
    return 0;
}
