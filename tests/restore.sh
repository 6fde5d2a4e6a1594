#!/usr/bin/env bash
# tests/restore.sh — restoring the store from a backup, on both engines:
# what the guarantee keeps and where it ends (docs/design.md, "Which
# failures the guarantee survives"; the procedure: docs/operations.md,
# "Restoring the store from a backup").
#
#   restore_keeps_an_admission_acknowledged_before_the_backup
#       its same-operation retry is answered already_admitted with the
#       operation, and a new operation on its grant is refused;
#   restore_keeps_a_consume_before_the_backup
#       the consume verdict denies the grant it spent;
#   restore_forgets_what_came_after_the_backup (the documented limit)
#       an admission and a consume made after the backup are not in the
#       restored store, so their grants are admitted / consumed again: the
#       reason the procedure keeps those grants away from the store until
#       they have expired. If this ever stops holding, the documents must
#       change with it.
#
# SQLite is backed up with SQLite's online backup API (python3's sqlite3
# module), PostgreSQL with pg_dump -Fc into a new database by pg_restore.
# Usage: tests/restore.sh PATH/TO/oncegate
set -uo pipefail
OG=${1:?usage: restore.sh PATH/TO/oncegate}
T=$(mktemp -d /tmp/og-restore-XXXXXX)
PGDBS=()
cleanup() {
    for db in "${PGDBS[@]}"; do
        psql "$OG_TEST_PG_URL" -qXc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
    done
    rm -rf "$T"
}
trap cleanup EXIT
. "$(dirname "$0")/support/check.sh"

EXP=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
OP1=7b0f3c1e-1a2b-4c3d-8e4f-5a6b7c8d9e01
OP2=7b0f3c1e-1a2b-4c3d-8e4f-5a6b7c8d9e02
OP3=7b0f3c1e-1a2b-4c3d-8e4f-5a6b7c8d9e03
OP4=7b0f3c1e-1a2b-4c3d-8e4f-5a6b7c8d9e04
admit() { # STORE GRANT OPERATION
    "$OG" admit --store "$1" --issuer support-approvals --grant-id "$2" \
        --operation-id "$3" --expires-at "$EXP" --caller agent-17 \
        --account A-1187 --amount 250.00 --currency USD
}
consume() { # STORE GRANT
    "$OG" consume --store "$1" --issuer support-approvals --grant-id "$2" \
        --expires-at "$EXP"
}

# ENGINE STORE BACKUP_FN RESTORE_FN: RESTORE_FN prints the restored store.
suite() {
    local eng=$1 S=$2 backup=$3 restore=$4 R
    check "$eng: migrate" 0 "$OG" migrate --store "$S"
    check "$eng: an admission before the backup" 0 admit "$S" g-before "$OP1"
    expect_out "$eng: admitted before the backup" '"outcome":"admitted"'
    check "$eng: a consume before the backup" 0 consume "$S" c-before
    check "$eng: the backup" 0 "$backup" "$S" "$T/$eng.backup"
    check "$eng: an admission after the backup" 0 admit "$S" g-after "$OP2"
    check "$eng: a consume after the backup" 0 consume "$S" c-after
    # Run in this shell, not in $(...), so the databases pg_restore_new
    # creates reach the cleanup list.
    if ! "$restore" "$T/$eng.backup" >"$T/restored" 2>"$T/err"; then
        fail=$((fail+1)); echo "FAIL $eng: the restore"; cat "$T/err"; return
    fi
    R=$(cat "$T/restored")
    pass=$((pass+1)); echo "ok   $eng: the restore"

    check "$eng: restore_keeps_an_admission_acknowledged_before_the_backup: the same operation" \
        0 admit "$R" g-before "$OP1"
    expect_out "$eng: restore_keeps_an_admission_acknowledged_before_the_backup: already_admitted, the operation" \
        '"outcome":"already_admitted","operation":\{"operation_id":"'"$OP1"'"'
    check "$eng: restore_keeps_an_admission_acknowledged_before_the_backup: a new operation is refused" \
        1 admit "$R" g-before "$OP3"
    expect_out "$eng: refused" '"outcome":"refused"'
    check "$eng: restore_keeps_a_consume_before_the_backup" 1 consume "$R" c-before
    expect_out "$eng: restore_keeps_a_consume_before_the_backup: denied" '"consumed":false,"error":"already_consumed"'

    check "$eng: restore_forgets_what_came_after_the_backup: its grant is admitted again" \
        0 admit "$R" g-after "$OP4"
    expect_out "$eng: restore_forgets_what_came_after_the_backup: a second admission" '"outcome":"admitted"'
    check "$eng: restore_forgets_what_came_after_the_backup: its consume again" 0 consume "$R" c-after
    expect_out "$eng: restore_forgets_what_came_after_the_backup: consumed twice" '"consumed":true'
}

# SQLite: the online backup API copies a consistent snapshot, WAL included.
sqlite_backup() { # STORE FILE
    python3 - "${1#sqlite:}" "$2" <<'EOF'
import sqlite3, sys
src = sqlite3.connect(sys.argv[1])
dst = sqlite3.connect(sys.argv[2])
src.backup(dst)
dst.close()
src.close()
EOF
}
sqlite_restore() { # FILE -> prints the restored store
    cp "$1" "$T/restored.db" && echo "sqlite:$T/restored.db"
}
if command -v python3 >/dev/null; then
    suite sqlite "sqlite:$T/store.db" sqlite_backup sqlite_restore
else
    skip_part "sqlite: python3 (SQLite's backup API) not installed"
fi

# PostgreSQL: pg_dump of the store's database, pg_restore into a new one.
PGBIN=/usr/lib/postgresql/15/bin
pg_tool() { if [ -x "$PGBIN/$1" ]; then echo "$PGBIN/$1"; else command -v "$1"; fi; }
pg_backup() { "$(pg_tool pg_dump)" -Fc -f "$2" -d "$1"; }
pg_restore_new() {
    local db="og_restored_$$_$RANDOM"
    psql "$OG_TEST_PG_URL" -qXc "CREATE DATABASE $db" >/dev/null || return 1
    PGDBS+=("$db")
    "$(pg_tool pg_restore)" --no-owner -d "${OG_TEST_PG_URL%/*}/$db" "$1" || return 1
    echo "${OG_TEST_PG_URL%/*}/$db"
}
if [ -n "${OG_TEST_PG_URL:-}" ] && [ "${OG_TEST_PG_URL#*\?}" = "$OG_TEST_PG_URL" ] &&
   [ -n "$(pg_tool pg_dump)" ] && [ -n "$(pg_tool pg_restore)" ]; then
    PGDB="og_restore_$$_$RANDOM"
    if psql "$OG_TEST_PG_URL" -qXc "CREATE DATABASE $PGDB" >/dev/null; then
        PGDBS+=("$PGDB")
        suite postgres "${OG_TEST_PG_URL%/*}/$PGDB" pg_backup pg_restore_new
    else fail=$((fail+1)); echo "FAIL could not create a PostgreSQL database"; fi
else
    skip_part "postgres: OG_TEST_PG_URL not set (or holds a query), or pg_dump/pg_restore missing"
fi

check_summary restore
