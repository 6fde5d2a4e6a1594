#!/usr/bin/env bash
# tests/cli.sh — the oncegate command as a user runs it: help, JSON answers,
# documented exit codes, the demo and keygen.
# Usage: tests/cli.sh PATH/TO/oncegate PATH/TO/payout_fixture
set -uo pipefail
OG=${1:?usage: cli.sh PATH/TO/oncegate PATH/TO/payout_fixture}
FIX=${2:?usage: cli.sh PATH/TO/oncegate PATH/TO/payout_fixture}
T=$(mktemp -d /tmp/og-cli-XXXXXX)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/support/check.sh"

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
check "explain on a store never migrated" 78 "$OG" explain --store "$S"
# the schema this build needs, as --version reports it
SV=$("$OG" --version | sed -n 's/.*(schema \([0-9][0-9]*\)).*/\1/p')
check "migrate" 0 "$OG" migrate --store "$S";  expect_out "migrate reports versions" "\"from\":0,\"to\":$SV"
check "migrate again" 0 "$OG" migrate --store "$S"; expect_out "migrate is idempotent" "\"from\":$SV,\"to\":$SV"
check "admit" 0 admit --grant-id g-1 --operation-id $OP1 --amount 250.00
expect_out "admitted JSON" '^\{"outcome":"admitted","operation":\{"operation_id":"'$OP1'"'
expect_out "admitted with owner version 1" '"status":"Admitted","owner_version":1'
check "explain" 0 "$OG" explain --store "$S"
expect_out "explain shows the claim" '^### Admission, token form: the claim: `CLAIM`$'
expect_out "explain shows cleanup over the retain_until index" 'USING COVERING INDEX grant_consumptions_retain_until_idx'
check "explain --batch 0" 2 "$OG" explain --store "$S" --batch 0
expect_err "explain names the bound" 'batch is 1..100000'
check "explain --batch junk" 2 "$OG" explain --store "$S" --batch 12x
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
# An amount finer than its currency's minor units (ISO 4217)
check "amount finer than USD" 2 admit --grant-id g-3 --operation-id $OP2 --amount 0.001
expect_out "finer amount code" '"error":"input.amount_minor_units"'
check "amount finer than JPY" 2 admit --grant-id g-3 --operation-id $OP2 --amount 1.5 --currency JPY
expect_out "finer yen code" '"error":"input.amount_minor_units"'
check "currency not in ISO 4217" 2 admit --grant-id g-3 --operation-id $OP2 --amount 1 --currency ZZZ
expect_out "unknown currency code" '"error":"input.currency_invalid"'
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
# The demo: one oncegate-sandbox (beside $OG) and two `oncegate serve --dev`
# processes; its data directory goes under TMPDIR, removed when it passes.
demo_logs() { # the kept data directory's logs, when a demo failed
    for f in "$T"/oncegate-demo-*/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 40 "$f"; }; done; }
# Incident 3, the payout (src/cli/demo_payout.c): its numbered lines on
# the engine named, in the last check's stdout.
demo_payout_checks() { # ENGINE
expect_out "demo on $1: the payout is decided Allowed, with grant and job" \
    '→ Allowed payout\.allowed: decision [0-9a-f-]{36}, grant [A-Za-z0-9_-]{22}, job [0-9a-f-]{36}, attempt 1 +✔'
expect_out "demo on $1: A's worker sends once and the answer is lost" \
    'attempt Unknown, payout Unknown; A.s /metrics: sent 1, sends 1 +✔ sent once; Unknown, nothing resent'
expect_out "demo on $1: the job is redelivered on B" \
    '→ job [0-9a-f-]{36}, naming the same grant [A-Za-z0-9_-]{22} +✔ redelivered'
expect_out "demo on $1: B's worker is refused and sends nothing" \
    'B.s /metrics: duplicate 1, sent 0, sends 0 +✔ second worker refused, nothing sent'
expect_out "demo on $1: the reconciler finds the payout by the attempt's reference" \
    'history: outcome +Unknown +→ Succeeded +by payout-reconciler \(found\), po_[0-9a-f]{24}'
expect_out "demo on $1: the payout ends Paid" 'payout PAY-3107-[0-9a-f]{8} +✔ reconciled: Paid'
expect_out "demo on $1: the sandbox counts one completed payout" \
    'payout_requests 1, payouts_created 1, payout_lookups [1-9][0-9]* +✔ exactly one completed payout; nothing sent twice'
expect_out "demo on $1: every step as expected" '3 of 3 replays refused; 18 of 18 steps as expected'
if grep -Eq 'og_[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}|tok_[0-9a-f]{24}' "$T/out" "$T/err"; then
    fail=$((fail+1)); echo "FAIL demo on $1 printed an API key, a grant token or a destination token";
else pass=$((pass+1)); echo "ok   demo on $1 prints no API key, grant token or destination token"; fi
}
check "demo" 0 env TMPDIR="$T" "$OG" demo --store "sqlite:$T/demo.db"
expect_out "demo: the lost answer reaches the agent as pending" \
    '202 (unknown|admitted), result pending, outcome admitted +✔ no final answer reached the agent'
expect_out "demo: the same operation on B is never billed again" \
    'outcome already_admitted +✔ its status; billing is not called again'
expect_out "demo: a new operation on B is refused" '409 grant_not_available +✔ replay refused'
expect_out "demo: recovery records the credit it found" \
    'history: outcome +unknown +→ succeeded +by recovery \(found\), cr_[0-9a-f]{24}'
expect_out "demo: recovered" 'succeeded [0-9.]+ s after the lost answer, credit cr_[0-9a-f]{24} +✔ recovered'
expect_out "demo: the sandbox counts exactly one credit" \
    'create_requests 1, credits_created 1, lookups [0-9]+ +✔ the sandbox counts exactly one credit'
expect_out "demo: incident 2 bills once per grant" \
    'create_requests 2, credits_created 2, lookups [0-9]+ +✔ still one credit per grant'
demo_payout_checks sqlite
if grep -Eq 'og_[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}' "$T/out" "$T/err"; then
    fail=$((fail+1)); echo "FAIL demo printed an API key or a grant token";
else pass=$((pass+1)); echo "ok   demo prints no API key or grant token"; fi
if ls -d "$T"/oncegate-demo-* >/dev/null 2>&1; then
    fail=$((fail+1)); echo "FAIL demo left its data directory (the logs follow)"; demo_logs
else pass=$((pass+1)); echo "ok   demo removed its data directory"; fi
if ps -eo args | grep -F -- "$T/oncegate-demo-" | grep -v grep >/dev/null; then
    fail=$((fail+1)); echo "FAIL demo left processes behind"
else pass=$((pass+1)); echo "ok   demo stopped every process it started"; fi
check "demo again on the same store" 0 env TMPDIR="$T" "$OG" demo --store "sqlite:$T/demo.db"
expect_out "demo again refuses every replay" '3 of 3 replays refused'
check "demo on the embedded store (no --store)" 0 env TMPDIR="$T" "$OG" demo
demo_payout_checks "the embedded store"
check "demo refuses a store with an operation awaiting its outcome" 78 \
      env TMPDIR="$T" "$OG" demo --store "$S"
expect_err "demo names the reason" 'awaiting an outcome'
check "migrate a store for an Unknown payout attempt" 0 "$OG" migrate --store "sqlite:$T/demo-unknown.db"
check "fixture: an Unknown payout attempt" 0 "$FIX" "sqlite:$T/demo-unknown.db" PAY-3999 unknown
check "demo refuses a store with a payout attempt awaiting its outcome" 78 \
      env TMPDIR="$T" "$OG" demo --store "sqlite:$T/demo-unknown.db"
expect_err "demo names the reason for the payout attempt" 'awaiting an outcome'
# PostgreSQL: the demo on a database of its own, when there is a cluster.
if [ -n "${OG_TEST_PG_URL:-}" ] && [ "${OG_TEST_PG_URL#*\?}" = "$OG_TEST_PG_URL" ]; then
    DEMODB="og_demo_$$_$RANDOM"
    if psql "$OG_TEST_PG_URL" -qXc "CREATE DATABASE $DEMODB" >/dev/null; then
        check "demo on postgres" 0 env TMPDIR="$T" "$OG" demo --store "${OG_TEST_PG_URL%/*}/$DEMODB"
        expect_out "demo on postgres refuses every credit replay" \
            'create_requests 2, credits_created 2, lookups [0-9]+ +✔ still one credit per grant'
        demo_payout_checks postgres
        psql "$OG_TEST_PG_URL" -qXc "DROP DATABASE $DEMODB" >/dev/null
    else fail=$((fail+1)); echo "FAIL could not create a PostgreSQL database for the demo"; fi
else
    skip_part "demo on postgres: OG_TEST_PG_URL not set (or holds a query)"
fi
if ls -d "$T"/oncegate-demo-* >/dev/null 2>&1; then
    fail=$((fail+1)); echo "FAIL a demo left its data directory (the logs follow)"; demo_logs
else pass=$((pass+1)); echo "ok   every demo removed its data directory"; fi

# keygen: files, modes, JSON with paths and never key material, refusals.
K="$T/keys"; mkdir -p "$K"
check "recover without a config" 2 "$OG" recover
# help serve lists every key dev mode changes, with its dev value and its
# default: each row of docs/config.md's dev mode table (generated from the
# table dev mode applies) is a line of the help.
check "help serve" 0 "$OG" help serve; expect_out "serve help has the dev mode block" "Dev mode \(--dev\) sets these keys"
cp "$T/out" "$T/help-serve"
check "serve --config-doc" 0 "$OG" serve --config-doc
sed -n '/^## Dev mode/,$p' "$T/out" | sed -n 's/^| `\([^`]*\)` | `\([^`]*\)` | `\([^`]*\)` |$/\1 \2 \3/p' >"$T/dev-rows"
if [ "$(wc -l <"$T/dev-rows")" -ge 10 ]; then pass=$((pass+1)); echo "ok   config doc lists the dev overrides"
else fail=$((fail+1)); echo "FAIL config doc lists the dev overrides"; cat "$T/dev-rows"; fi
while read -r key val def; do
    if grep -Eq "^  $key +$(printf '%s' "$val" | sed 's/[].[*^$\\/]/\\&/g') +$(printf '%s' "$def" | sed 's/[].[*^$\\/]/\\&/g')\$" "$T/help-serve"; then
        pass=$((pass+1)); echo "ok   help serve: $key $val (default $def)"
    else fail=$((fail+1)); echo "FAIL help serve lacks $key $val $def"; cat "$T/help-serve"; fi
done <"$T/dev-rows"
check "serve --help" 0 "$OG" serve --help; expect_out "serve --help has the dev mode block" "payouts.attempt_lease_ms +10000 +120000"
check "help recover" 0 "$OG" help recover; expect_out "recover help says it never records Failed on not-found" "Never records Failed"
printf '{"store":"sqlite:%s/r.db","auto_migrate":true}' "$T" > "$T/norecover.json"
check "recover without a provider is refused" 78 "$OG" recover --config "$T/norecover.json" --once
# cleanup and archive-operations: one pass each, a JSON summary line,
# their log lines in the service's JSON log. Rows are moved past their
# retention with SQL (python3's sqlite3: the build needs python3 anyway).
R="$T/ret.db"
printf '{"store":"sqlite:%s","auto_migrate":true,"log_file":"%s/ret.log"}' "$R" "$T" > "$T/ret.json"
sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(sys.argv[2]); c.commit()' "$R" "$1"; }
check "cleanup without a config" 2 "$OG" cleanup
check "help cleanup" 0 "$OG" help cleanup; expect_out "cleanup help names the margin" "retain_until"
check "help archive-operations" 0 "$OG" help archive-operations
expect_out "archive help says open operations stay" "Never touches"
check "cleanup --once on an empty store" 0 "$OG" cleanup --config "$T/ret.json" --once
expect_out "cleanup summary" '^\{"job":"cleanup","deleted":0,"admissions":0,"revocations":0,"consumes":0,"batches":1,"elapsed_ms":[0-9]+\}$'
expect_out "the pass also expires payout grants" '^\{"job":"payout-expiry","grants":0,"batches":1,"elapsed_ms":[0-9]+\}$'
OP3=3c4d5e6f-7a8b-4c9d-8e0f-a1b2c3d4e5f6
check "admit into the retention store" 0 "$OG" admit --store "sqlite:$R" --issuer support-approvals \
      --grant-id g-ret --expires-at "$EXP" --operation-id $OP3 --caller agent-17 --account A-1187 \
      --amount 1 --currency USD
sql "UPDATE grant_consumptions SET retain_until = 0"
check "cleanup --once deletes a due row" 0 "$OG" cleanup --config "$T/ret.json" --once
expect_out "cleanup counts it" '^\{"job":"cleanup","deleted":1,"admissions":1,"revocations":0,"consumes":0,"batches":1,'
if grep -q '"event":"cleanup"' "$T/ret.log" && grep -q '"deleted":1' "$T/ret.log"; then
    pass=$((pass+1)); echo "ok   cleanup logs its pass as JSON";
else fail=$((fail+1)); echo "FAIL cleanup log line"; cat "$T/ret.log"; fi
check "archive-operations: nothing finished" 0 "$OG" archive-operations --config "$T/ret.json"
expect_out "archive summary" '^\{"job":"archive","mode":"archive","operations":0,"events":0,"batches":1,"older_than_days":365,"elapsed_ms":[0-9]+\}$'
sql "UPDATE operations SET status = 'Succeeded', updated_at = 0"
check "archive-operations moves a finished operation" 0 "$OG" archive-operations --config "$T/ret.json"
expect_out "archive counts it" '"mode":"archive","operations":1,'
check "archive-operations --delete" 0 "$OG" archive-operations --config "$T/ret.json" --delete
expect_out "delete mode: nothing left" '"mode":"delete","operations":0,'
check "archive-operations takes no --once" 2 "$OG" archive-operations --config "$T/ret.json" --once
check "cleanup with a bad store" 78 "$OG" cleanup --config "$T/ret.json" --store mysql://x --once
# Without --once: a pass at once, then one per interval until SIGTERM.
"$OG" cleanup --config "$T/ret.json" >"$T/loop.out" 2>"$T/loop.err" & LOOP=$!
for _ in $(seq 1 100); do grep -q '"job":"cleanup"' "$T/loop.out" && break; sleep 0.1; done
kill -TERM "$LOOP"; wait "$LOOP"; got=$?
if [ "$got" -eq 0 ] && grep -q '"job":"cleanup"' "$T/loop.out"; then
    pass=$((pass+1)); echo "ok   cleanup loop: a pass at once, exit 0 on SIGTERM";
else fail=$((fail+1)); echo "FAIL cleanup loop: exit $got"; cat "$T/loop.out" "$T/loop.err"; fi
check "help keygen" 0 "$OG" help keygen;  expect_out "keygen help names its exit codes" "73 a key file already exists"
check "keygen" 0 "$OG" keygen --issuer support-approvals --out "$K"
expect_out "keygen JSON" '^\{"issuer":"support-approvals","kid":"[A-Za-z0-9_-]{43}","private_key":"[^"]+\.private\.jwk","public_key":"[^"]+\.public\.jwk"\}$'
KID=$(sed -E 's/.*"kid":"([^"]+)".*/\1/' "$T/out")
PRIV="$K/support-approvals.$KID.private.jwk"; PUB="$K/support-approvals.$KID.public.jwk"
if [ -f "$PRIV" ] && [ -f "$PUB" ]; then pass=$((pass+1)); echo "ok   keygen files exist";
else fail=$((fail+1)); echo "FAIL keygen files exist"; ls -l "$K"; fi
if [ "$(stat -c %a "$PRIV")" = 600 ]; then pass=$((pass+1)); echo "ok   private key mode 0600";
else fail=$((fail+1)); echo "FAIL private key mode: $(stat -c %a "$PRIV")"; fi
D=$(sed -nE 's/.*"d": "([^"]+)".*/\1/p' "$PRIV")
if [ -n "$D" ] && ! grep -q "\"d\"" "$PUB" && ! grep -qF -- "$D" "$T/out" "$T/err"; then
    pass=$((pass+1)); echo "ok   private part only in the private file";
else fail=$((fail+1)); echo "FAIL private part leaked or missing"; fi
if grep -q '"kty": "OKP"' "$PUB" && grep -q '"crv": "Ed25519"' "$PUB" && grep -q "\"kid\": \"$KID\"" "$PUB"; then
    pass=$((pass+1)); echo "ok   public key is an OKP JWK with its kid";
else fail=$((fail+1)); echo "FAIL public JWK form"; cat "$PUB"; fi
SUMS=$(sha256sum "$PRIV" "$PUB")
check "keygen again: a second key (rotation)" 0 "$OG" keygen --issuer support-approvals --out "$K"
if [ "$(ls "$K" | wc -l)" -eq 4 ] && [ "$(sha256sum "$PRIV" "$PUB")" = "$SUMS" ]; then
    pass=$((pass+1)); echo "ok   existing key files untouched";
else fail=$((fail+1)); echo "FAIL existing key files changed"; ls -l "$K"; fi
# A second keygen cannot be made to pick an existing name from here (the
# kid is a fresh key's thumbprint); the O_EXCL refusal of an existing name
# or a planted symlink is keygen_never_overwrites in tests/test_grant.c.
check "keygen without --out" 2 "$OG" keygen --issuer support-approvals
check "keygen bad issuer" 2 "$OG" keygen --issuer "../up" --out "$K"
expect_out "bad issuer code" '"error":"input.issuer_invalid"'
check "keygen into a missing directory" 74 "$OG" keygen --issuer i --out "$T/nope"
expect_out "missing directory code" '"error":"key.io_error"'
check "keygen into a file" 74 "$OG" keygen --issuer i --out "$PRIV"

# grant issue + consume: sign and record, then the consume verdict once.
gissue() { "$OG" grant issue --store "$S" --key "$PRIV" --issuer support-approvals \
           --subject agent-17 --audience billing --action credit.apply \
           --account A-1187 --amount 250.00 --currency USD "$@"; }
check "grant issue" 0 gissue --family fam-cli
expect_out "grant issue JSON" '^\{"grant_id":"[A-Za-z0-9_-]{22}","issuer":"support-approvals","token":"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+","expires_at":"[0-9T:.Z-]+","family":"fam-cli"\}$'
GID=$(sed -n 's/.*"grant_id":"\([^"]*\)".*/\1/p' "$T/out")
GEXP=$(sed -n 's/.*"expires_at":"\([^"]*\)".*/\1/p' "$T/out")
if ! grep -q '"token"' "$T/err"; then pass=$((pass+1)); echo "ok   the token never reaches stderr";
else fail=$((fail+1)); echo "FAIL token on stderr"; fi
check "consume" 0 "$OG" consume --store "$S" --issuer support-approvals --grant-id "$GID" --expires-at "$GEXP" --family fam-cli
expect_out "consumed JSON" '^\{"consumed":true,"family":"fam-cli"\}$'
check "consume again" 1 "$OG" consume --store "$S" --issuer support-approvals --grant-id "$GID" --expires-at "$GEXP" --family fam-cli
expect_out "already consumed JSON" '^\{"consumed":false,"error":"already_consumed"\}$'
check "grant issue row form" 0 gissue --form row
check "grant issue bad amount" 2 gissue --amount 1e5
check "grant issue amount finer than USD" 2 gissue --amount 0.001
expect_out "grant issue finer amount code" '"error":"input.amount_minor_units"'
check "grant issue amount finer than JPY" 2 gissue --amount 1.5 --currency JPY
expect_out "grant issue finer yen code" '"error":"input.amount_minor_units"'
# A signing key others may read is refused, naming the code only
chmod 0640 "$PRIV"
check "grant issue with a key others may read" 78 gissue
expect_out "open key code" '"error":"key.mode_too_open"'
chmod 0600 "$PRIV"
check "grant issue missing key file" 74 "$OG" grant issue --store "$S" --key "$T/none.jwk" --issuer i \
      --subject s --audience a --action x --account a --amount 1 --currency USD
check "consume bad grant id" 2 "$OG" consume --store "$S" --issuer i --grant-id "a b" --expires-at "$GEXP"

# payouts run: the runner as a process (the pipeline's tests are
# tests/pipeline/ and tests/payout_exec.c).
P="sqlite:$T/payouts.db"
SRC=$(cd "$(dirname "$0")/.." && pwd)
: >"$T/cred"
check "help payouts" 0 "$OG" help payouts; expect_out "payouts help names the runner" "payouts run"
check "payouts run without its required flags" 2 "$OG" payouts run --store "$P"
check "payouts without a subcommand" 2 "$OG" payouts
check "payouts run with a bad duration" 2 "$OG" payouts run --store "$P" --provider http://127.0.0.1:9 \
      --provider-table "$SRC/providers/sandbox-payouts.v1.json" --credential-file "$T/cred" --send-window 5
check "payouts run with an unreadable table" 78 "$OG" payouts run --store "$P" --provider http://127.0.0.1:9 \
      --provider-table "$T/none.json" --credential-file "$T/cred"
check "migrate the payouts store" 0 "$OG" migrate --store "$P"
check "payouts run --until-idle on an empty store" 0 "$OG" payouts run --store "$P" \
      --provider http://127.0.0.1:9 --provider-table "$SRC/providers/sandbox-payouts.v1.json" \
      --credential-file "$T/cred" --until-idle --poll 50ms --interval 100ms --workers 2
expect_out "payouts run prints its counts" '^\{"ends":\{"idle":[0-9]+,"refused":0,.*"sent":0\},"reasons":\{\},"sends":0,'

# payout: an operator's hand, on each engine. tests/payout_fixture puts
# each payout in the stage a command acts on (no command creates one).
jget() { sed -n 's/.*"'"$1"'":"\([^"]*\)".*/\1/p' "$T/out"; }
no_token() { # NAME : the last check printed no destination token
    if grep -q 'tok_fixture' "$T/out" "$T/err"; then fail=$((fail+1)); echo "FAIL $1 printed a destination token";
    else pass=$((pass+1)); echo "ok   $1 prints no destination token"; fi; }
payout_suite() { # STORE-URL ENGINE
local PS=$1 E=$2
echo "-- payout on $E"
check "help payout" 0 "$OG" help payout; expect_out "payout help names its exit codes" "75 store unavailable"
expect_out "payout help lists the subcommands" "payout hold --grant ID"
check "payout --help" 0 "$OG" payout --help
check "payout without a subcommand" 2 "$OG" payout
check "payout with an unknown subcommand" 2 "$OG" payout frobnicate --store "$PS"
check "migrate the payout store" 0 "$OG" migrate --store "$PS"
check "fixture: PAY-3107 needs reconciliation" 0 "$FIX" "$PS" PAY-3107 needs-reconciliation
att7=$(jget attempt); grant7=$(jget grant)
check "fixture: PAY-3108 unknown" 0 "$FIX" "$PS" PAY-3108 unknown
att8=$(jget attempt)
check "fixture: PAY-3109 approved" 0 "$FIX" "$PS" PAY-3109 approved
job9=$(jget job)
check "fixture: PAY-3110 approved" 0 "$FIX" "$PS" PAY-3110 approved
grant10=$(jget grant)
check "payout backlog" 0 "$OG" payout backlog --store "$PS"
no_token "payout backlog"
expect_out "backlog lists the escalated attempt first, with its payout" \
    '^\{"backlog":\[\{"attempt":"'"$att7"'","payout":"PAY-3107","grant":"'"$grant7"'","status":"NeedsReconciliation",'
expect_out "backlog lists the Unknown attempt" '\{"attempt":"'"$att8"'","payout":"PAY-3108",.*"status":"Unknown",.*"age_seconds":[0-9]+\}'
expect_out "backlog counts by status" '"unknown":1,"needs_reconciliation":1\}$'
check "payout backlog --limit 1" 0 "$OG" payout backlog --store "$PS" --limit 1
expect_out "backlog --limit 1: the oldest only" '^\{"backlog":\[\{"attempt":"'"$att7"'"[^]]*\],"unknown":0,"needs_reconciliation":1\}$'
check "payout backlog --limit 0" 2 "$OG" payout backlog --store "$PS" --limit 0
expect_err "backlog names the bound" 'limit is 1..1000'
check "payout backlog refuses another subcommand's option" 2 "$OG" payout backlog --store "$PS" --grant g
check "payout backlog on a store never migrated" 78 "$OG" payout backlog --store "sqlite:$T/none.db"
expect_out "backlog: schema mismatch is a JSON error" '"error":"schema_mismatch"'
check "payout backlog, postgres unreachable" 75 "$OG" payout backlog \
      --store "postgresql://postgres@127.0.0.1:1/x?connect_timeout=2"
expect_out "backlog: unavailable JSON" '"error":"store_unavailable"'
rargs() { "$OG" payout resolve --store "$PS" --operator ops-4 --reason provider.statement \
          --evidence "statement line 2026-12-01 #88, provider ref PRV-551" "$@"; }
check "payout resolve without --evidence" 2 "$OG" payout resolve --store "$PS" --attempt "$att7" \
      --to Succeeded --operator ops-4 --reason provider.statement
expect_err "resolve names what is missing" 'evidence is required'
check "payout resolve --to Unknown" 2 rargs --attempt "$att7" --to Unknown
check "payout resolve, bad attempt id" 2 rargs --attempt not-a-uuid --to Succeeded
expect_out "bad attempt id code" '"error":"input.operation_id_invalid"'
check "payout resolve an Unknown attempt" 1 rargs --attempt "$att8" --to Succeeded
expect_out "an Unknown attempt is not the operator's to resolve" '^\{"outcome":"not-recorded"\}$'
check "payout resolve NotApplied before the request expired" 1 rargs --attempt "$att7" --to NotApplied
expect_out "NotApplied too early is refused" '^\{"outcome":"not-recorded"\}$'
check "payout resolve" 0 rargs --attempt "$att7" --to Succeeded --provider-reference PRV-551
expect_out "resolved: the payout Paid, the reservation paid" \
    '^\{"outcome":"resolved","attempt":"'"$att7"'","payout":"PAY-3107","grant":"'"$grant7"'","state":"Paid","payout_version":[0-9]+,"reservation":"paid"\}$'
expect_err "resolve logs identifiers" "attempt=$att7 payout=PAY-3107"
check "payout resolve again" 1 rargs --attempt "$att7" --to Failed
expect_out "a second resolution changes nothing" '^\{"outcome":"not-recorded"\}$'
check "payout backlog after the resolution" 0 "$OG" payout backlog --store "$PS"
expect_out "the resolved attempt left the backlog" '"unknown":1,"needs_reconciliation":0\}$'
check "payout resubmit without --operator" 2 "$OG" payout resubmit --store "$PS" --job "$job9"
check "payout resubmit" 0 "$OG" payout resubmit --store "$PS" --job "$job9" --operator ops-4
expect_out "resubmitted: a new job" '^\{"outcome":"resubmitted","job":"[0-9a-f-]{36}","from":"'"$job9"'"\}$'
if [ "$(jget job)" != "$job9" ]; then pass=$((pass+1)); echo "ok   the new job has its own id";
else fail=$((fail+1)); echo "FAIL resubmit returned the same job id"; fi
check "payout resubmit an unknown job" 1 "$OG" payout resubmit --store "$PS" \
      --job 0a1b2c3d-4e5f-4a6b-9c7d-8e9fa0b1c2d3 --operator ops-4
expect_out "unknown job refused" '^\{"outcome":"not_found"\}$'
check "payout resubmit, bad job id" 2 "$OG" payout resubmit --store "$PS" --job x --operator ops-4
check "payout hold, bad operator" 2 "$OG" payout hold --store "$PS" --grant "$grant10" --operator "a b"
expect_out "bad operator code" '"error":"input.actor_invalid"'
check "payout hold" 0 "$OG" payout hold --store "$PS" --grant "$grant10" --operator finance-2
expect_out "held: the grant revoked" '^\{"outcome":"revoked","grant":"'"$grant10"'"\}$'
check "payout hold again" 1 "$OG" payout hold --store "$PS" --grant "$grant10" --operator finance-2
expect_out "a second hold changes nothing" '^\{"outcome":"already_used_or_revoked"\}$'
check "payout hold a consumed grant" 1 "$OG" payout hold --store "$PS" --grant "$grant7" --operator finance-2
expect_out "a consumed grant cannot be held" '^\{"outcome":"already_used_or_revoked"\}$'
check "payout hold a grant that is not a payout's" 1 "$OG" payout hold --store "$PS" --grant nope-1 --operator finance-2
expect_out "not a payout grant" '^\{"outcome":"not_issued"\}$'
check "payout show the resolved payout" 0 "$OG" payout show --store "$PS" --payout PAY-3107
no_token "payout show"
expect_out "show: the payout, Paid" '^\{"payout":\{"payout_id":"PAY-3107","tenant_id":"T-PAY-3107",.*"amount":"4250.00","amount_minor":425000,"currency":"EUR",.*"state":"Paid",'
expect_out "show: its Allowed decision with the requester" '"decisions":\[\{"decision_id":"[0-9a-f-]{36}","outcome":"Allowed","reason":"payout.allowed",.*"requester_id":"clerk-22",'
expect_out "show: its grant, consumed by the attempt" '"grants":\[\{"grant_id":"'"$grant7"'",.*"state":"Consumed",.*"consumed_by_operation":"'"$att7"'"'
expect_out "show: the attempt with the operator's resolution in its history" \
    '"attempts":\[\{"operation_id":"'"$att7"'",.*"status":"Succeeded",.*"history":\[\{"at":"[^"]+","kind":"admitted",.*"kind":"resolved","from":"NeedsReconciliation","to":"Succeeded",[^}]*"actor":"ops-4","reason":"provider.statement","provider_reference":"PRV-551","evidence":"statement line 2026-12-01 #88, provider ref PRV-551"'
expect_out "show: the payout's history from draft to the resolution" \
    '"history":\[\{"seq":[0-9]+,"at":"[^"]+","kind":"drafted","actor":"clerk-22",.*"kind":"claimed",.*"kind":"resolved",[^]]*"to_state":"Paid"'
check "payout show the held payout" 0 "$OG" payout show --store "$PS" --payout PAY-3110
expect_out "show: the held grant is Revoked, its reservation released, no attempt" \
    '"grants":\[\{"grant_id":"'"$grant10"'",.*"state":"Revoked",.*"revoked_at":"[^"]+","released_at":"[^"]+",.*"attempts":\[\],'
expect_out "show: the hold in the history" '"kind":"grant-revoked","actor":"finance-2"'
check "payout show a payout that does not exist" 1 "$OG" payout show --store "$PS" --payout PAY-0000
expect_out "no such payout" '^\{"outcome":"not_found"\}$'
check "payout show, bad payout id" 2 "$OG" payout show --store "$PS" --payout "a b"
expect_out "bad payout id code" '"error":"input.payout_id_invalid"'
check "payout show without --payout" 2 "$OG" payout show --store "$PS"
# Identifiers are refused before the store is reached: 2, never 75.
NOPG="postgresql://postgres@127.0.0.1:1/x?connect_timeout=2"
check "show: a bad payout id, before any I/O" 2 "$OG" payout show --store "$NOPG" --payout "a b"
check "resolve: a bad attempt id, before any I/O" 2 "$OG" payout resolve --store "$NOPG" --attempt x \
      --to Failed --operator ops-4 --reason r --evidence e
expect_out "resolve: its code" '"error":"input.operation_id_invalid"'
check "resubmit: a bad job id, before any I/O" 2 "$OG" payout resubmit --store "$NOPG" --job x --operator ops-4
check "hold: a bad operator, before any I/O" 2 "$OG" payout hold --store "$NOPG" --grant g-1 --operator "a b"
expect_out "hold: its code" '"error":"input.actor_invalid"'
no_token "payout hold"
if [ "$E" = sqlite ]; then
    if python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); sys.exit(0 if c.execute("SELECT COUNT(*) FROM grants WHERE grant_id=? AND revoked_at IS NOT NULL",(sys.argv[2],)).fetchone()[0]==1 else 1)' "${PS#sqlite:}" "$grant10"; then
        pass=$((pass+1)); echo "ok   the hold revoked the grant in the store";
    else fail=$((fail+1)); echo "FAIL the held grant is not revoked in the store"; fi
fi
}
payout_suite "sqlite:$T/payout.db" sqlite
# PostgreSQL: a database of its own on the test cluster, when there is one.
if [ -n "${OG_TEST_PG_URL:-}" ] && [ "${OG_TEST_PG_URL#*\?}" = "$OG_TEST_PG_URL" ]; then
    PGDB="og_cli_$$_$RANDOM"
    if psql "$OG_TEST_PG_URL" -qXc "CREATE DATABASE $PGDB" >/dev/null; then
        payout_suite "${OG_TEST_PG_URL%/*}/$PGDB" postgres
        psql "$OG_TEST_PG_URL" -qXc "DROP DATABASE $PGDB" >/dev/null
    else fail=$((fail+1)); echo "FAIL could not create a PostgreSQL database for the payout commands"; fi
else
    skip_part "payout on postgres: OG_TEST_PG_URL not set (or holds a query)"
fi
# payout-worker: the pipeline on a serve configuration (paying a payout:
# tests/serve/payouts.c, both engines).
check "help payout-worker" 0 "$OG" help payout-worker; expect_out "payout-worker help names --config" "payout-worker --config FILE"
check "payout-worker without --config" 2 "$OG" payout-worker
printf '{"store": "%s", "payouts": {"provider_url": "http://127.0.0.1:9"}}' "$P" >"$T/pw-notable.json"
check "payout-worker without a payouts table" 78 "$OG" payout-worker --config "$T/pw-notable.json"

check_summary cli
