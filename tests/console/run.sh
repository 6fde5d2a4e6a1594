#!/usr/bin/env bash
# tests/console/run.sh ONCEGATE ENGINE — the operator console in a real
# browser (docs/console.md): starts `oncegate serve --dev` (ENGINE sqlite:
# its own SQLite store; postgres: --store $OG_TEST_PG_URL) with the sandbox
# beside it, then runs console.test.mjs with playwright-core driving
# Debian's chromium. Exit 77 (a skip, never a pass) when chromium, node or
# playwright-core, or the PostgreSQL server for ENGINE postgres, is absent;
# scripts/deps installs all of them. Screenshots go to
# $OG_CONSOLE_ARTIFACTS (default: the build's meson-logs/console-ENGINE).
set -uo pipefail

bin=${1:?usage: run.sh ONCEGATE sqlite|postgres}
engine=${2:?usage: run.sh ONCEGATE sqlite|postgres}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }

command -v node > /dev/null || skip "node is not installed (scripts/deps installs it)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
    || skip "node $(node --version) is older than 20, which playwright-core needs"
chromium=${OG_CHROMIUM:-$(command -v chromium || true)}
[ -n "$chromium" ] || skip "chromium is not installed (scripts/deps installs Debian's chromium)"
[ -d "$here/node_modules/playwright-core" ] \
    || skip "playwright-core is not installed in tests/console (scripts/deps runs npm ci there)"
store=()
db=
if [ "$engine" = postgres ]; then
    [ -n "${OG_TEST_PG_URL:-}" ] || skip "no PostgreSQL (OG_TEST_PG_URL unset; scripts/test starts one)"
    command -v psql > /dev/null || skip "psql is not installed"
    # A database of its own: dev mode creates its payout scenario once per
    # store, and this run takes it from Draft to Paid.
    db=og_console_$$_$RANDOM
    psql -q -v ON_ERROR_STOP=1 "$OG_TEST_PG_URL" -c "CREATE DATABASE $db" \
        || { echo "FAIL: could not create database $db"; exit 1; }
    store=(--store "${OG_TEST_PG_URL%/*}/$db")
fi

work=$(mktemp -d /tmp/og-console-XXXXXX)
artifacts=${OG_CONSOLE_ARTIFACTS:-$(dirname "$bin")/meson-logs/console-$engine}
mkdir -p "$artifacts"
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2> /dev/null && wait "$server" 2> /dev/null
    [ -n "$db" ] && psql -q "$OG_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db" > /dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# Short windows so recovery parks an operation whose creates keep failing in
# NeedsReconciliation within seconds (T7: > 6 + 2 + 6 s); the reconciler's
# first look at an Unknown payout attempt 8 s after it, so the page sees it
# Unknown first.
cat > "$work/config.json" <<'JSON'
{"timings": {"submission_window_ms": 15000}, "payouts": {"backoff_ms": "8000,8000"}}
JSON
"$bin" serve --dev --data-dir "$work/dev" --listen 127.0.0.1:0 \
    --config "$work/config.json" "${store[@]}" > "$work/serve.out" 2> "$work/serve.err" &
server=$!
url=
for _ in $(seq 1 200); do
    url=$(sed -n 's/^oncegate: listening on \(http:[^ ]*\)$/\1/p' "$work/serve.out" | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$server" 2> /dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    echo "FAIL: oncegate serve --dev did not start; its output:"
    cat "$work/serve.out" "$work/serve.err"
    exit 1
fi
sandbox=$(sed -n 's/^  provider     \(http:[^:]*:[0-9]*\):.*/\1/p' "$work/serve.out" | head -n 1)
[ -n "$sandbox" ] || { echo "FAIL: no sandbox URL in the banner"; cat "$work/serve.out"; exit 1; }
grep -q "console      $url/console" "$work/serve.out" \
    || { echo "FAIL: the dev banner does not print the console's URL"; cat "$work/serve.out"; exit 1; }
eval "$("$bin" dev-env --data-dir "$work/dev")"

if [ "$engine" = postgres ]; then
    OG_STORE_LOCK=$db
else
    OG_STORE_LOCK="$work/dev/oncegate.db"
fi
OG_STORE_LOCK=$OG_STORE_LOCK OG_URL=$url OG_SANDBOX=$sandbox OG_CHROMIUM=$chromium OG_ARTIFACTS=$artifacts \
OG_ENGINE=$engine OG_OPERATOR_KEY=$OG_OPERATOR_KEY OG_ISSUER_KEY=$OG_ISSUER_KEY \
OG_AGENT_KEY=$OG_AGENT_KEY OG_REVOKER_KEY=$OG_REVOKER_KEY OG_CLERK_KEY=$OG_CLERK_KEY \
    node "$here/console.test.mjs"
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "--- the server's log (last 40 lines)"
    tail -n 40 "$work/serve.err"
fi
exit "$rc"
