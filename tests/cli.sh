#!/usr/bin/env bash
# tests/cli.sh — the oncegate command as a user runs it: help, JSON answers,
# documented exit codes, and the demo. Usage: tests/cli.sh PATH/TO/oncegate
set -uo pipefail
OG=${1:?usage: cli.sh PATH/TO/oncegate}
T=$(mktemp -d /tmp/og-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0

check() { # NAME EXPECTED_EXIT COMMAND... ; stdout in $T/out, stderr in $T/err
    local name=$1 want=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"; local got=$?
    if [ "$got" -eq "$want" ]; then pass=$((pass+1)); echo "ok   $name";
    else fail=$((fail+1)); echo "FAIL $name: exit $got, want $want"; cat "$T/out" "$T/err"; fi
}
expect_out() { # NAME PATTERN : the last check's stdout matches
    if grep -Eq -- "$2" "$T/out"; then pass=$((pass+1)); echo "ok   $1";
    else fail=$((fail+1)); echo "FAIL $1: stdout lacks /$2/"; cat "$T/out"; fi
}
expect_err() {
    if grep -Eq -- "$2" "$T/err"; then pass=$((pass+1)); echo "ok   $1";
    else fail=$((fail+1)); echo "FAIL $1: stderr lacks /$2/"; cat "$T/err"; fi
}

S="sqlite:$T/store.db"
EXP=$(date -u -d '+15 min' +%Y-%m-%dT%H:%M:%SZ)
OP1=6f1c2a8e-3b4d-4c5e-8f90-123456789abc
OP2=0a1b2c3d-4e5f-4a6b-9c7d-8e9fa0b1c2d3
admit() { "$OG" admit --store "$S" --issuer support-approvals --expires-at "$EXP" \
          --caller agent-17 --account A-1187 --currency USD "$@"; }

check "help" 0 "$OG" --help;                expect_out "help lists admit" "admit"
check "help admit" 0 "$OG" help admit;      expect_out "admit help names exit codes" "75 store unavailable"
check "admit --help" 0 "$OG" admit --help
check "unknown command" 2 "$OG" frobnicate
check "no command" 2 "$OG"
check "admit on a store never migrated" 78 admit --grant-id g-1 --operation-id $OP1 --amount 250.00
expect_out "schema mismatch is a JSON error" '"error":"schema_mismatch"'
check "migrate" 0 "$OG" migrate --store "$S";  expect_out "migrate reports versions" '"from":0,"to":1'
check "migrate again" 0 "$OG" migrate --store "$S"; expect_out "migrate is idempotent" '"from":1,"to":1'
check "admit" 0 admit --grant-id g-1 --operation-id $OP1 --amount 250.00
expect_out "admitted JSON" '^\{"outcome":"admitted","operation":\{"operation_id":"'$OP1'"'
expect_out "admitted with owner version 1" '"status":"Admitted","owner_version":1'
check "same operation retry" 0 admit --grant-id g-1 --operation-id $OP1 --amount 250.0
expect_out "already admitted JSON" '"outcome":"already_admitted"'
check "another operation" 1 admit --grant-id g-1 --operation-id $OP2 --amount 250.00
expect_out "refused JSON reveals nothing" '^\{"outcome":"refused"\}$'
expect_err "refusal reason goes to the log" 'reason=grant_spent_by_other_operation'
check "same operation, other amount" 1 admit --grant-id g-1 --operation-id $OP1 --amount 251
check "expired on the store clock" 1 "$OG" admit --store "$S" --issuer support-approvals \
      --grant-id g-2 --expires-at 2020-01-01T00:00:00Z --operation-id $OP2 --caller agent-17 \
      --account A-1187 --amount 1 --currency USD
expect_err "deadline reason logged" 'reason=admission_deadline_passed'
check "bad amount" 2 admit --grant-id g-3 --operation-id $OP2 --amount 1e5
expect_out "bad amount code" '"error":"input.amount_invalid"'
check "bad expiry" 2 "$OG" admit --store "$S" --issuer i --grant-id g --expires-at tomorrow \
      --operation-id $OP2 --caller c --account a --amount 1 --currency USD
expect_out "bad expiry code" '"error":"input.expires_at_invalid"'
check "oversize grant id" 2 admit --grant-id "$(printf 'g%.0s' $(seq 1 129))" --operation-id $OP2 --amount 1
expect_out "oversize grant id code" '"error":"input.grant_id_invalid"'
check "missing option" 2 "$OG" admit --store "$S" --issuer i
check "bad store URL" 78 admit --store mysql://x --grant-id g-4 --operation-id $OP2 --amount 1
check "postgres unreachable" 75 "$OG" admit --store "postgresql://postgres@127.0.0.1:1/x?connect_timeout=2" \
      --issuer i --grant-id g --expires-at "$EXP" --operation-id $OP2 --caller c --account a --amount 1 --currency USD
expect_out "unavailable JSON" '^\{"outcome":"store_unavailable"\}$'
check "demo" 0 "$OG" demo --store "sqlite:$T/demo.db"
expect_out "demo refuses every replay" '2 of 2 replays refused'
check "demo again on the same store" 0 "$OG" demo --store "sqlite:$T/demo.db"

echo "cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
