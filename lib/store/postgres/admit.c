/*
 * admit.c — the admission: the claim and the operation insert as ONE
 * statement, the report of a claim that did not happen (the follow-up
 * read the consume verdict shares, og__pg_consumption), and the read
 * of an operation by id. The store's admission method is og__pg_admit, the
 * group commit (admit_batch.c, B1-B6): og__pg_admit_one below is its batch
 * of one, and what each row of a batch that falls back runs.
 *
 * It keeps M8-M11 (lib/store/store_int.h); how:
 *
 *  I10 One statement admits (M8). The claim and the insert into operations
 *      are ONE statement, run alone in its own implicit Read Committed
 *      transaction: pg_admit_sql (token form: the claim is an insert on
 *      grant_consumptions) or pg_admit_row_sql (row form: the claim is the
 *      conditional UPDATE of the grant's row in grants), or their hashed
 *      instances (I9). The unique key (issuer, grant_id) — in a hashed
 *      store key_hash —, resp. the row lock on the grant's row with its
 *      consumed_at/revoked_at conditions re-checked after any wait, lets at
 *      most one statement ever claim a grant.
 *  I11 An admission that claims nothing is reported (M9) from its own
 *      statement's snapshot when that snapshot shows the key's holder: a
 *      holder committed before the statement began never changes (keys are
 *      held until cleanup, a grant row's consumed/revoked marks are final),
 *      so a replay or a same-operation retry costs one round trip. When the
 *      snapshot shows no holder, a fresh statement reads again. Either read
 *      only reports; the claim decided (AD1, AD2 in lib/core/admission.c).
 *  I12 An archived operation still answers for its id (M10) from the
 *      statement's snapshot: an archive that commits while an admission
 *      reusing the same finished operation's id for another grant is
 *      running is not seen by it (the operations key no longer conflicts
 *      either). Operation ids are fresh per operation, so that needs a
 *      client's reuse of an id it finished long ago, at that very instant;
 *      the grant itself stays single-use either way (its key is the claim).
 *  I30 An answer read from a key this call did not claim (already
 *      admitted, a refusal, a consume's denial, an operation read by id)
 *      is only given once the row it was read from is as durable as a
 *      commit would have made it: on a server whose commits wait for a
 *      synchronous standby, the read row may be one that only this server
 *      holds — committed locally by an earlier call whose wait was
 *      cancelled (I3), on a primary cut off from its standbys — and a
 *      failover would discard it. So such an answer is fenced: the
 *      statement that read it also writes WAL in its own transaction with
 *      an xid (PG_READ_FENCE_EXPR, internal.h: a transactional logical
 *      message), so its commit waits for the standby up to a position after
 *      the row's own commit, which the read came after. A cancelled wait is
 *      I3's unavailable, never an answer. Without a synchronous standby the
 *      fence writes nothing. The admission folds the fence into its own
 *      statement's report branch (evaluated only when the row claimed
 *      nothing: a replay costs ONE round trip), the fresh read
 *      (og__pg_consumption) and the read by id into theirs; a call whose
 *      answer comes from a statement that cannot carry it ends with the
 *      separate fence (og__pg_read_fence). Found by the partition chaos
 *      scenario (docs/operations.md).
 *
 * Also carried here: I1 (ADMITTED only after ReadyForQuery), I4 (the only
 * refusal a unique violation can make), I5 (the deadline decided in the
 * claiming statement), I6 (the family's row FOR SHARE, internal.h) and I9
 * (each statement in both consumption keys).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * What holds a key that was not claimed
 * ========================================================================= */

/* PG_UNCLAIMED_COLUMNS' FROM clause (internal.h): $1 issuer, $2 grant_id,
 * $3 operation_id (NULL: consume), f the family (NULL: none). */
#define PG_UNCLAIMED_FROM(f, K) PG_UNCLAIMED_FROM_X(f, K, PG_OP_STORED_COLS)
/* The admission's tail reports the operation in PG_OP_COLUMNS_REPORT's
 * columns: schema 7's (internal.h). */
#define PG_UNCLAIMED_FROM_V7(f, K)                                             \
    PG_UNCLAIMED_FROM_X(f, K, PG_OP_STORED_COLS_V7)
#define PG_UNCLAIMED_FROM_X(f, K, cols)                                        \
    "(VALUES (1)) AS v (one)\n"                                                \
    "LEFT JOIN grant_consumptions c ON " PG_KEQ_##K("c.", "$1::text", "$2::text") "\n" \
    "LEFT JOIN grants g ON g.issuer = $1::text AND g.grant_id = $2::text\n"   \
    "LEFT JOIN families fm ON fm.issuer = $1::text AND fm.family = " f "::text\n" \
    "LEFT JOIN LATERAL (" PG_OP_LIVE_OR_ARCHIVED("$3", cols) ") o ON true"

/* Parses the PG_UNCLAIMED_COLUMNS of row `row` of res starting at column u,
 * and (with_op) the operation columns starting at column o, into the shape
 * og__classify_unclaimed() / og__classify_consume() read. Token form: the
 * consumption row and its kind. Row form: the grant's row — missing is
 * not_issued, consumed_by_operation set an admission, consumed with no
 * operation the consume verdict, revoked_at a revocation, a live row
 * nothing (the deadline or the family refused). */
int og__pg_unclaimed_parse(const PGresult *res, int row, int u, int o,
                           const og__admit_req *req, bool with_op,
                           og__consumption *cons, og_operation *op,
                           bool *have_op)
{
    og__consumption cn;
    og_operation opr;
    const char *kind, *holder = NULL;
    bool hop = false;
    int rc = 0;

    memset(&cn, 0, sizeof cn);
    memset(&opr, 0, sizeof opr);
    if (req->form == OG_FORM_ROW) {
        if (!og__pg_get_bool(res, row, u + UNCLAIMED_ROW_EXISTS)) {
            cn.not_issued = true;
        } else if (!PQgetisnull(res, row, u + UNCLAIMED_ROW_CONSUMER)) {
            cn.present = true;
            cn.kind = OG__CLAIM_ADMISSION;
            holder = PQgetvalue(res, row, u + UNCLAIMED_ROW_CONSUMER);
        } else if (og__pg_get_bool(res, row, u + UNCLAIMED_ROW_CONSUMED)) {
            cn.present = true;
            cn.kind = OG__CLAIM_CONSUME;
        } else if (og__pg_get_bool(res, row, u + UNCLAIMED_ROW_REVOKED)) {
            cn.present = true;
            cn.kind = OG__CLAIM_REVOCATION;
        }
    } else if (og__pg_get_bool(res, row, u + UNCLAIMED_KEY_HELD)) {
        cn.present = true;
        kind = PQgetisnull(res, row, u + UNCLAIMED_KIND)
                   ? ""
                   : PQgetvalue(res, row, u + UNCLAIMED_KIND);
        if (strcmp(kind, "admission") == 0)
            cn.kind = OG__CLAIM_ADMISSION;
        else if (strcmp(kind, "revocation") == 0)
            cn.kind = OG__CLAIM_REVOCATION;
        else if (strcmp(kind, "consume") == 0)
            cn.kind = OG__CLAIM_CONSUME;
        else
            return OG_EINTERNAL;
        if (cn.kind == OG__CLAIM_ADMISSION) {
            /* grant_consumptions_kind_check2: an admission has an id. */
            if (PQgetisnull(res, row, u + UNCLAIMED_HOLDER))
                return OG_EINTERNAL;
            holder = PQgetvalue(res, row, u + UNCLAIMED_HOLDER);
        }
    }
    if (holder != NULL) {
        cn.has_operation = true;
        if (og__copy(cn.operation_id, sizeof cn.operation_id, holder) != 0)
            return OG_EINTERNAL;
    }
    cn.family_blocked = og__pg_get_bool(res, row, u + UNCLAIMED_FAMILY_BLOCKED);
    hop = with_op && og__pg_get_bool(res, row, u + UNCLAIMED_OP_EXISTS);
    if (hop && (rc = og__pg_op_parse(res, row, o, &opr)) != 0)
        return rc;
    *cons = cn;
    if (op != NULL)
        *op = opr;
    if (have_op != NULL)
        *have_op = hop;
    return 0;
}

/* The read fence (I30), as a statement of its own. PostgreSQL waits for a
 * synchronous standby only at the commit of a transaction that has an xid
 * AND wrote WAL; a transactional logical message is both (it needs no
 * wal_level = logical, and is granted to PUBLIC). PG_READ_FENCE_EXPR's
 * CASE evaluates it only where commits wait. */
static const char pg_read_fence_sql[] = "SELECT " PG_READ_FENCE_EXPR;
static const og__pg_stmt pg_read_fence_stmt = {"og_read_fence",
                                               pg_read_fence_sql, 0,
                                               OG_KEYS_AS_STORED};

int og__pg_read_fence(og__pg_store *pg, og__pg_conn *c)
{
    PGresult *res = NULL;
    int rc = og__pg_run(pg, c, &pg_read_fence_stmt, NULL, &res);

    PQclear(res);
    return rc;
}

/* After an admission or a consume that claimed nothing: what holds the key
 * (token form: the consumption row; row form: the grant's row), whether the
 * family blocked the claim, and the operation row for the id, in one
 * statement with a fresh snapshot. Only for reporting — the claim already
 * decided, so nothing read here can turn a refusal into a claim. Always
 * exactly one row, whose last column is the read fence (I30): every answer
 * given from this read is one read from a key the call did not claim, so
 * the statement's own commit waits for the standby, after everything its
 * snapshot shows.
 *   $1 issuer   $2 grant_id   $3 operation_id (NULL: consume)
 *   $4 family (NULL: none) */
#define PG_UNCLAIMED_SQL(K)                                                    \
    "SELECT " PG_UNCLAIMED_COLUMNS("$4", K) ", " PG_OP_COLUMNS("o.") ",\n"     \
    "       " PG_READ_FENCE_EXPR "\n"                                          \
    "FROM " PG_UNCLAIMED_FROM("$4", K)
static const char pg_unclaimed_sql[] = PG_UNCLAIMED_SQL(READABLE);
static const char pg_unclaimed_hashed_sql[] = PG_UNCLAIMED_SQL(HASHED);
const og__pg_stmt og__pg_unclaimed_stmt = {"og_unclaimed", pg_unclaimed_sql,
                                           4, OG_KEYS_READABLE};
const og__pg_stmt og__pg_unclaimed_hashed_stmt = {
    "og_unclaimed_hashed", pg_unclaimed_hashed_sql, 4, OG_KEYS_HASHED};
/* Its row: the PG_UNCLAIMED_COLUMNS, the operation's, the fence's. */
enum {
    UNCLAIMED_READ_HOLDER = 0,
    UNCLAIMED_READ_OP = UNCLAIMED_NCOLS,
    UNCLAIMED_READ_FENCE = UNCLAIMED_READ_OP + OP_NCOLS,
    UNCLAIMED_READ_NCOLS
};

int og__pg_consumption(og__pg_store *pg, og__pg_conn *c,
                            const og__admit_req *req, bool with_op,
                            og__consumption *cons, og_operation *op,
                            bool *have_op)
{
    const char *params[4] = {req->issuer, req->grant_id,
                             with_op ? req->operation_id : NULL,
                             req->family[0] ? req->family : NULL};
    const og__pg_stmt *s = og__pg_keyed(pg, &og__pg_unclaimed_stmt,
                                        &og__pg_unclaimed_hashed_stmt);
    PGresult *res = NULL;
    int rc;

    rc = og__pg_run(pg, c, s, params, &res);
    if (rc == 0 && (PQntuples(res) != 1 ||
                    og__pg_shape(res, UNCLAIMED_READ_NCOLS, 1) != 0))
        rc = OG_EINTERNAL;
    if (rc == 0)
        rc = og__pg_unclaimed_parse(res, 0, UNCLAIMED_READ_HOLDER,
                                    UNCLAIMED_READ_OP,
                                req, with_op, cons, op, have_op);
    PQclear(res);
    return rc;
}

/* The tail both admission statements end with: the operation insert, and
 * in the SAME statement the report of a claim that did not happen.
 *  - ins reads only `claim`: data-modifying CTEs share one snapshot and
 *    RETURNING is the only way the claim's row reaches it — no claim, no
 *    operation (I10). clock_timestamp() for lease_until, submit_by and
 *    created_at is evaluated once in a LATERAL subquery (a volatile target
 *    list is never flattened, so all three share one instant): a lock wait
 *    must not eat the lease.
 *  - The outer query returns exactly one row: (true, the new operation),
 *    or, when nothing was inserted, (false, the operation row with this id,
 *    what holds the key, whether the family blocked) read from the
 *    statement's snapshot — the columns of pg_unclaimed_sql. A replay or a
 *    same-operation retry meets a key committed before the statement began,
 *    so one round trip answers it (I11). The snapshot can miss a holder that
 *    committed while this statement waited; og__pg_admit_one() then reads
 *    again with a fresh statement. Reporting only: the claim already decided.
 *  - The report's last column is the read fence (I30, PG_READ_FENCE_EXPR):
 *    evaluated only on the report's row, i.e. only when nothing was claimed,
 *    it makes this statement's implicit transaction write WAL with an xid,
 *    so its commit — at Sync, before ReadyForQuery — waits for a
 *    synchronous standby, after the holder's commit the claim met or the
 *    snapshot shows. A cancelled wait is reported by pg_collect() as I3's
 *    unavailable, so no replay is answered from a row only this server
 *    holds, and it costs no second round trip. An admission that claimed
 *    writes anyway: its commit waits as every commit does (NULL there).
 * Parameters $3 and $5..$12 as in pg_admit_sql; f is the family, K the
 * store's consumption keys (I9). */
#define PG_ADMIT_TAIL(f, K)                                                    \
    "ins AS (\n"                                                               \
    "  INSERT INTO operations (operation_id, issuer, grant_id, caller_id, account_id, amount, currency,\n" \
    "    status, owner_version, lease_until, submit_by, created_at)\n"        \
    "  SELECT $3::uuid, c.issuer, c.grant_id, $5::text, $6::text, $7::numeric, $8::text,\n" \
    "         'Admitted', $12::bigint, t.now + " PG_US("$10") ", t.now + " PG_US("$11") ", t.now\n" \
    "  FROM claim c CROSS JOIN LATERAL (SELECT clock_timestamp() AS now) t\n"  \
    "  RETURNING " PG_OP_COLUMNS_NEW("") ")\n"                                 \
    "SELECT true, ins.*, NULL::bool, NULL::text, NULL::text, NULL::bool,\n"    \
    "       NULL::bool, NULL::text, NULL::bool, NULL::bool, NULL::bool,\n"     \
    "       NULL::pg_lsn\n"                                                    \
    "FROM ins\n"                                                               \
    "UNION ALL\n"                                                              \
    "SELECT false, " PG_OP_COLUMNS_REPORT("o.") ",\n"                          \
    "       " PG_UNCLAIMED_COLUMNS(f, K) ",\n"                                 \
    "       " PG_READ_FENCE_EXPR "\n"                                          \
    "FROM " PG_UNCLAIMED_FROM_V7(f, K) "\n"                                    \
    "WHERE NOT EXISTS (SELECT 1 FROM ins)"

/* ===========================================================================
 * The admission statements (I10, I1, I4, I5, I6).
 *
 * Token form, pg_admit_sql. Parameters (text format; every time value
 * is bigint microseconds):
 *   $1 issuer   $2 grant_id   $3 operation_id   $4 expires_at (since epoch)
 *   $5 caller   $6 account    $7 amount (canonical decimal)   $8 currency
 *   $9 admission leeway   $10 execution lease   $11 submission window
 *   $12 initial owner version (OG__INITIAL_OWNER_VERSION)
 *   $13 family (NULL: none)
 *
 * Why each part carries the guarantee:
 *  - claim: INSERT ... ON CONFLICT (the key) DO NOTHING — (issuer, grant_id),
 *    or in a hashed store key_hash (I9). The primary key is the atomic
 *    check. Under Read Committed a competing insert of the
 *    same key waits for the holder to commit or abort; if it commits, the
 *    waiter DOES NOTHING and returns no row. Exactly one statement can claim
 *    a key, and a revocation and the consume verdict claim the very same
 *    key, so whichever commits first wins. kind = 'admission' names the
 *    holder (the table's CHECK ties it to operation_id being set).
 *  - WHERE admit_until > statement_timestamp(): the deadline is decided in
 *    the claiming statement against the store's clock (I5), and
 *    statement_timestamp() stays fixed however long the statement waits on a
 *    lock. Past the deadline nothing is claimed and nothing is recorded.
 *  - AND PG_FAMILY_LIVE: the family's row locked live, or no claim (I6).
 *  - AND PG_OP_ID_NOT_ARCHIVED: an archived operation keeps its id (I12),
 *    in the readable and the hashed instance alike.
 *  - operations_pkey / operations_grant_key: if the operation id is already
 *    taken, or an operation already holds this grant, the unique violation
 *    aborts the WHOLE statement, claim included; og__pg_classify() maps
 *    exactly those two constraint names to a refusal (I4).
 *  - It is ONE statement in an implicit transaction, so nothing can run
 *    between the claim and the insert, and the commit happens at Sync: the
 *    caller learns ADMITTED only after ReadyForQuery (I1).
 *  - A hashed store's claim RETURNs $1 and $2 as issuer and grant_id, the
 *    ids the operation row records (its table has none to return).
 * bench/admit.pgbench runs the readable instance as pgbench can; bench/admit
 * derives the hashed one from it (hashed_pgbench: the key swapped where the
 * instances differ, each swap checked to apply once).
 * ========================================================================= */
#define PG_ADMIT_HEAD(K)                                                       \
    "WITH " PG_FAMILY_CTE("$13") ",\n"                                         \
    "claim AS (\n"                                                             \
    "  " PG_CLAIM_INTO(K) "\n"                                                 \
    "  SELECT " PG_KVALS_##K("$1::text", "$2::text") ", $3::uuid, statement_timestamp(), d.admit_until, 'admission'\n" \
    "  FROM (SELECT " PG_TS("$4") " + " PG_US("$9") " AS admit_until) d\n"     \
    "  WHERE d.admit_until > statement_timestamp()\n"                          \
    "    AND " PG_FAMILY_LIVE("$13") "\n"                                      \
    "    AND " PG_OP_ID_NOT_ARCHIVED("$3") "\n"                                \
    "  " PG_ON_KEY_CONFLICT(K) "\n"                                            \
    "  RETURNING " PG_KRET_##K("$1::text", "$2::text") "),\n"

/* Row form, pg_admit_row_sql. Parameters as pg_admit_sql, except
 * $4 is the family (NULL: none) and there is no $13: the request's
 * expires_at is not used, the grant's row carries the trusted one.
 *  - claim: the conditional UPDATE of the grant's row. It row-locks the
 *    grant; a concurrent admission, consume or revocation of the same grant
 *    waits for this statement's transaction and then, under Read Committed,
 *    re-evaluates consumed_at IS NULL AND revoked_at IS NULL on the newest
 *    version and finds the grant taken. At most one claim per row (I10).
 *  - expires_at + leeway > statement_timestamp(): the row's deadline,
 *    decided against the store's clock in the claiming statement (I5).
 *  - consumed_by_operation = $3 names the holder; the follow-up read maps it
 *    to an admission.
 *  - AND PG_FAMILY_LIVE and the operation insert as in the token form (I6,
 *    I10, I4): a unique violation on operations aborts the UPDATE too.
 *  - Only the tail's report reads grant_consumptions: K (I9). */
#define PG_ADMIT_ROW_HEAD                                                      \
    "WITH " PG_FAMILY_CTE("$4") ",\n"                                          \
    "claim AS (\n"                                                             \
    "  UPDATE grants SET consumed_at = statement_timestamp(), consumed_by_operation = $3::uuid\n" \
    "  WHERE issuer = $1::text AND grant_id = $2::text\n"                      \
    "    AND consumed_at IS NULL AND revoked_at IS NULL\n"                     \
    "    AND expires_at + " PG_US("$9") " > statement_timestamp()\n"           \
    "    AND " PG_FAMILY_LIVE("$4") "\n"                                       \
    "    AND " PG_OP_ID_NOT_ARCHIVED("$3") "\n"                                \
    "  RETURNING issuer, grant_id),\n"

/* Each statement, its report carrying the read fence, is longer than the
 * 4095 characters of one literal ISO C guarantees, so it is written as two
 * literals (its claim, its tail) and joined once, before the first store
 * object opens (og__pg_admit_sql_join), into a buffer the descriptor
 * names. */
enum { PGA_TOKEN, PGA_TOKEN_HASHED, PGA_ROW, PGA_ROW_HASHED, PGA_NSTMTS };
static const char *const pga_parts[PGA_NSTMTS][2] = {
    [PGA_TOKEN] = {PG_ADMIT_HEAD(READABLE), PG_ADMIT_TAIL("$13", READABLE)},
    [PGA_TOKEN_HASHED] = {PG_ADMIT_HEAD(HASHED), PG_ADMIT_TAIL("$13", HASHED)},
    [PGA_ROW] = {PG_ADMIT_ROW_HEAD, PG_ADMIT_TAIL("$4", READABLE)},
    [PGA_ROW_HASHED] = {PG_ADMIT_ROW_HEAD, PG_ADMIT_TAIL("$4", HASHED)},
};
#define PGA_SQL_MAX 6144
static char pga_sql[PGA_NSTMTS][PGA_SQL_MAX];
static pthread_once_t pga_sql_once = PTHREAD_ONCE_INIT;

void og__pg_sql_join(char *dst, size_t cap, const char *const *parts, int n)
{
    size_t len = 0;

    for (int p = 0; p < n; p++) {
        size_t k = strlen(parts[p]);

        if (len + k >= cap)
            abort(); /* a defect: the statements are fixed text */
        memcpy(dst + len, parts[p], k + 1);
        len += k;
    }
}

static void pga_sql_join(void)
{
    for (int i = 0; i < PGA_NSTMTS; i++)
        og__pg_sql_join(pga_sql[i], PGA_SQL_MAX, pga_parts[i], 2);
}

void og__pg_admit_sql_join(void)
{
    pthread_once(&pga_sql_once, pga_sql_join);
}

const og__pg_stmt og__pg_admit_stmt = {"og_admit", pga_sql[PGA_TOKEN], 13,
                                       OG_KEYS_READABLE};
const og__pg_stmt og__pg_admit_hashed_stmt = {
    "og_admit_hashed", pga_sql[PGA_TOKEN_HASHED], 13, OG_KEYS_HASHED};
const og__pg_stmt og__pg_admit_row_stmt = {"og_admit_row", pga_sql[PGA_ROW],
                                           12, OG_KEYS_READABLE};
const og__pg_stmt og__pg_admit_row_hashed_stmt = {
    "og_admit_row_hashed", pga_sql[PGA_ROW_HASHED], 12, OG_KEYS_HASHED};
/* Their row: whether it admitted, the operation's columns (the new one, or
 * the one holding the request's id), the PG_UNCLAIMED_COLUMNS, then the
 * read fence's (I30: NULL, or the message's position; not read). */
enum {
    ADMIT_ADMITTED,
    ADMIT_OP,
    ADMIT_HOLDER = ADMIT_OP + OP_NCOLS,
    ADMIT_FENCE = ADMIT_HOLDER + UNCLAIMED_NCOLS,
    ADMIT_NCOLS
};

int og__pg_admit_one(og__pg_store *pg, const og__admit_req *req,
                     int64_t deadline_us, og_admission *out)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og_admission result;
    og__consumption cons;
    og_operation op;
    bool have_op = false;
    char expires[24], owner[24], constraint[64];
    const char *family = req->family[0] ? req->family : NULL;
    const char *params[13];
    const og__pg_stmt *stmt;
    int rc;

    memset(&result, 0, sizeof result);
    constraint[0] = '\0';
    og__pg_fmt_i64(expires, sizeof expires, req->expires_at_us);
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    params[0] = req->issuer;
    params[1] = req->grant_id;
    params[2] = req->operation_id;
    params[4] = req->caller_id;
    params[5] = req->account_id;
    params[6] = req->amount;
    params[7] = req->currency;
    params[8] = pg->leeway;
    params[9] = pg->lease;
    params[10] = pg->window;
    params[11] = owner;
    if (req->form == OG_FORM_ROW) {
        /* The row's expires_at is the trusted deadline; $4 is the family. */
        stmt = og__pg_keyed(pg, &og__pg_admit_row_stmt,
                            &og__pg_admit_row_hashed_stmt);
        params[3] = family;
        params[12] = NULL; /* not sent: the row statement takes 12 */
    } else {
        stmt = og__pg_keyed(pg, &og__pg_admit_stmt, &og__pg_admit_hashed_stmt);
        params[3] = expires;
        params[12] = family;
    }

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_prepared_until(pg, c, stmt, params, &res, constraint,
                                    sizeof constraint, deadline_us);
    if (rc == OG__PG_REFUSE) {
        /* The statement aborted whole (I10, I4): nothing was claimed. */
        rc = 0;
        result.outcome = OG_OUTCOME_REFUSED;
        if (strcmp(constraint, "operations_pkey") == 0)
            result.refusal = OG_REFUSAL_OPERATION_ID_TAKEN;
        else if (strcmp(constraint, "operations_grant_key") == 0)
            result.refusal = OG_REFUSAL_GRANT_SPENT;
        else
            rc = OG_EINTERNAL; /* classify and this file disagree: a defect */
        goto out;
    }
    if (rc != 0)
        goto out;
    if (PQntuples(res) != 1 || PQnfields(res) != ADMIT_NCOLS) {
        rc = OG_EINTERNAL;
        goto out;
    }
    if (og__pg_get_bool(res, 0, ADMIT_ADMITTED)) {
        /* Confirmed at ReadyForQuery by pg_collect() (I1). */
        rc = og__pg_op_parse(res, 0, ADMIT_OP, &result.operation);
        if (rc == 0) {
            result.outcome = OG_OUTCOME_ADMITTED;
            result.refusal = OG_REFUSAL_NONE;
        }
        goto out;
    }
    /* Not admitted. The statement's snapshot says what holds the key; a
     * holder it shows committed before the statement and never changes
     * (I11), and the statement's commit waited for the standby (its folded
     * read fence, I30). When it shows none (a holder that committed while
     * the statement waited, a family, a deadline), a fresh statement says
     * why, fenced in its own commit: what it read may have committed after
     * this statement's. */
    rc = og__pg_unclaimed_parse(res, 0, ADMIT_HOLDER, ADMIT_OP, req, true,
                                &cons, &op, &have_op);
    if (rc == 0 && !cons.present)
        rc = og__pg_consumption(pg, c, req, true, &cons, &op, &have_op);
    if (rc == 0)
        og__classify_unclaimed(req, &cons, have_op ? &op : NULL, &result);
out:
    PQclear(res);
    if (c != NULL)
        og__pg_release(pg, c);
    if (rc == 0)
        *out = result;
    return rc;
}

/* ===========================================================================
 * An operation by id
 * ========================================================================= */

/* The row, and in its last column the read fence (I30): the answer is
 * read from a row this call did not write, and the fence is evaluated
 * only for a row found — a miss answers nothing that a failover could
 * take back. */
static const char pg_operation_get_sql[] =
    "SELECT " PG_OP_COLUMNS("") ", " PG_READ_FENCE_EXPR "\n"
    "FROM operations WHERE operation_id = $1::uuid";
static const og__pg_stmt pg_operation_get_stmt = {
    "og_operation_get", pg_operation_get_sql, 1, OG_KEYS_AS_STORED};

int og__pg_operation_get(void *impl, const char *operation_id,
                         og_operation *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {operation_id};
    og_operation op;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_operation_get_stmt, params, &res);
    if (rc != 0)
        goto out;
    if (PQntuples(res) == 0) {
        rc = 0;
        goto out;
    }
    if (PQntuples(res) != 1 || PQnfields(res) != OP_NCOLS + 1) {
        rc = OG_EINTERNAL;
        goto out;
    }
    rc = og__pg_op_parse(res, 0, 0, &op); /* fenced in its commit (I30) */
    if (rc == 0) {
        *out = op;
        rc = 1;
    }
out:
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}
