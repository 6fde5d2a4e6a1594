# bench/lib.sh — shell pieces shared by bench/http and bench/execute.
# Sourced, never run. Before sourcing, the script sets:
#   BENCH_NAME         its name in messages (bench/http, bench/execute)
#   BUILD SECONDS_PER_POINT WARMUP_SECONDS TOKENS WARMUP_TOKENS TOKEN_TTL
#   PG_BIN ISSUER AUDIENCE SUBJECT BACKENDS
#   DB_PREFIX          PostgreSQL database names: DB_PREFIX_<id>
# and runs from the repository root. bench_build builds, bench_setup makes
# the work directory (with the cleanup trap), the keys and the API key;
# start_cluster starts the throwaway PostgreSQL cluster when BACKENDS has
# postgres. Everything started through these helpers (servers, the
# sandbox, wrk, the cluster) is stopped on exit, whatever happens, and the
# work directory removed unless BENCH_KEEP=1.
# shellcheck shell=bash

say() { echo "$BENCH_NAME: $*" >&2; }
die() { say "$*"; exit 1; }

in_range() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }

check_backends() {
    local b
    for b in $BACKENDS; do
        case "$b" in postgres|sqlite) ;; *) die "BENCH_BACKENDS: unknown backend $b" ;; esac
    done
    command -v wrk >/dev/null || die "wrk is not installed (Debian package wrk)"
}

ratio() {
    if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "$1" != - ] && [ "$2" != - ]; then
        awk -v a="$1" -v f="$2" 'BEGIN { if (f > 0) printf "%.2f", a / f; else print "-" }'
    else
        echo "-"
    fi
}

# ---------------------------------------------------------------- build ----
# bench_build TARGET...: configures BUILD (release, no sanitizers) when it
# is not, then builds the targets; sets OG and TOK.
bench_build() {
    if [ ! -f "$BUILD/build.ninja" ]; then
        say "configuring $BUILD (release, no sanitizers)"
        meson setup "$BUILD" --buildtype=release -Db_sanitize=none >&2
    fi
    ninja -C "$BUILD" "$@" >&2
    OG=$BUILD/oncegate
    TOK=$BUILD/bench/og-bench-http-tokens
}

# ------------------------------------------------------------- cleanup -----
server_pids=()
server_urls=()
wrk_pids=()
notes=()
cluster_up=0
cleanup() {
    local p
    for p in "${wrk_pids[@]}" "${server_pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${server_pids[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null || true
    done
    for p in "${wrk_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    if [ "$cluster_up" = 1 ]; then
        scripts/pg-cluster destroy "$work/pg" >/dev/null 2>&1 || true
    fi
    if [ "${BENCH_KEEP:-0}" = 1 ]; then
        say "kept $work (configs, server logs, wrk output)"
    else
        rm -rf -- "$work"
    fi
}

# ---------------------------------------- work directory, keys, API key ----
# Sets work, PRIVATE_KEY, API_KEY_SHA256; exports OG_BENCH_API_KEY.
bench_setup() {
    work=$(mktemp -d "/tmp/og-${BENCH_NAME//\//-}.XXXXXX")
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$work/keys"
    "$OG" keygen --issuer "$ISSUER" --out "$work/keys" >/dev/null
    PRIVATE_KEY=$(ls "$work/keys/$ISSUER".*.private.jwk)
    local key
    key=og_bench_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
    API_KEY_SHA256=$(printf '%s' "$key" | sha256sum | cut -d' ' -f1)
    export OG_BENCH_API_KEY=$key
}

# -------------------------------------------------------------- tokens -----
# One set of grants serves every measurement: each runs on a fresh database,
# where none of them is spent yet. Lines 1..WARMUP_TOKENS are for the
# warm-ups, the rest for the measured runs. A set is re-signed when it gets
# old (the grants must stay valid through a run).
tokens_made=0
verify_line=""
sign_tokens() {
    local n=$((TOKENS + WARMUP_TOKENS)) out
    say "signing $n grants"
    out=$("$TOK" --key "$PRIVATE_KEY" --issuer "$ISSUER" --audience "$AUDIENCE" \
                 --subject "$SUBJECT" --count "$n" --ttl "$TOKEN_TTL" \
                 --out "$work/tokens" --verify-dir "$work/keys") ||
        die "og-bench-http-tokens failed"
    say "  $out"
    [ -n "$verify_line" ] || verify_line=$out
    head -n "$WARMUP_TOKENS" "$work/tokens" >"$work/tokens.warm"
    tail -n +"$((WARMUP_TOKENS + 1))" "$work/tokens" >"$work/tokens.main"
    rm -rf -- "$work/tokens" "$work"/split.*
    tokens_made=$(date +%s)
}
maybe_sign_tokens() {
    local need=$((2 * SECONDS_PER_POINT + WARMUP_SECONDS + 120))
    if [ $(($(date +%s) - tokens_made + need)) -ge "$TOKEN_TTL" ]; then sign_tokens; fi
}

# Splits the token set into N files, round robin, once per N:
# $work/split.N/{main,warm}.<i>, i = 0..N-1, one per wrk thread.
split_tokens() {
    local n=$1 d=$work/split.$1
    [ -d "$d" ] && return 0
    mkdir -p "$d"
    awk -v n="$n" -v p="$d/main" '{ print > (p "." ((NR - 1) % n)) }' "$work/tokens.main"
    awk -v n="$n" -v p="$d/warm" '{ print > (p "." ((NR - 1) % n)) }' "$work/tokens.warm"
}

# ------------------------------------------------------------- stores ------
# The throwaway cluster, when BACKENDS has postgres; sets PGSOCK, PGPORT_.
start_cluster() {
    case " $BACKENDS " in
    *" postgres "*)
        say "starting a throwaway PostgreSQL cluster in $work/pg"
        cluster_up=1
        local env_lines
        env_lines=$(scripts/pg-cluster start "$work/pg")
        eval "$env_lines"
        PGSOCK=$OG_TEST_PG_DIR
        PGPORT_=$OG_TEST_PG_PORT
        ;;
    esac
}
psql_() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$PGSOCK" -p "$PGPORT_" -U postgres "$@"; }

# A fresh, migrated store for measurement ID on BACKEND; sets store_url
# (and store_db: the database name, or the SQLite file).
fresh_store() {
    local backend=$1 id=$2
    if [ "$backend" = postgres ]; then
        store_db=${DB_PREFIX}_$id
        store_url="postgresql://postgres@127.0.0.1:$PGPORT_/$store_db"
        "$PG_BIN/createdb" -h "$PGSOCK" -p "$PGPORT_" -U postgres "$store_db" >&2 || return 1
    else
        store_db=$work/sq-$id.db
        rm -f -- "$store_db"*
        store_url="sqlite:$store_db"
    fi
    "$OG" migrate --store "$store_url" >/dev/null || return 1
    if [ "$backend" = postgres ]; then psql_ -d postgres -c CHECKPOINT >&2 || return 1; fi
}

drop_store() {
    local backend=$1 id=$2
    if [ "$backend" = postgres ]; then
        "$PG_BIN/dropdb" -h "$PGSOCK" -p "$PGPORT_" -U postgres "${DB_PREFIX}_$id" >&2 || true
    else
        rm -f -- "$work/sq-$id.db"*
    fi
}

# ------------------------------------------------------------- servers ------
# write_config FILE STORE_URL POOL LOG [PROVIDER_URL]: a serve config; with
# PROVIDER_URL, execution against it (an oncegate-sandbox, classified by
# providers/sandbox-credits.v1.json). BENCH_BATCH_MAX sets the server's
# admit_batch_max (1: group commit off), BENCH_OUTCOME_BATCH_MAX its
# outcome_batch_max (1: group commit of outcomes off), BENCH_KEEP_ALIVE
# provider.keep_alive.
write_config() {
    local file=$1 url=$2 pool=$3 log=$4 provider="" batch=""
    [ -z "${BENCH_BATCH_MAX:-}" ] || batch=" \"admit_batch_max\": $BENCH_BATCH_MAX,"
    [ -z "${BENCH_OUTCOME_BATCH_MAX:-}" ] ||
        batch="$batch \"outcome_batch_max\": $BENCH_OUTCOME_BATCH_MAX,"
    [ -z "${5:-}" ] ||
        provider="\"provider\": {\"url\": \"$5\", \"table\": \"$PWD/providers/sandbox-credits.v1.json\"${BENCH_KEEP_ALIVE:+, \"keep_alive\": $BENCH_KEEP_ALIVE}},"
    cat >"$file" <<EOF
{
  "listen": "127.0.0.1:0",
  "store": "$url",
  "audience": "$AUDIENCE",
  "issuer": "$ISSUER",
  "keys_dir": "$work/keys",
  "pool_size": $pool,
  "max_connections": 1024,
  "log_file": "$log",
  "auto_migrate": true,$batch
  $provider
  "principals": [
    {"id": "$SUBJECT", "roles": ["agent"], "api_key_sha256": "$API_KEY_SHA256"}
  ]
}
EOF
}

# spawn_ready FILES READY CMD...: starts CMD with stdout FILES.out and
# stderr FILES.err, waits (30 s at most) for its ready line "READY URL" on
# stdout; sets spawned_url and spawned_pid, appends the pid to server_pids.
spawn_ready() {
    local files=$1 ready=$2 url=""
    shift 2
    "$@" >"$files.out" 2>"$files.err" &
    spawned_pid=$!
    server_pids+=("$spawned_pid")
    for _ in $(seq 1 300); do
        url=$(awk -v r="$ready" 'index($0, r " ") == 1 { print $(split(r, w, " ") + 1); exit }' "$files.out")
        [ -n "$url" ] && break
        kill -0 "$spawned_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        say "${files##*/} did not report '$ready ...':"
        tail -n 20 "$files.out" "$files.err" "$files.log" 2>/dev/null | sed 's/^/  /' >&2 || true
        return 1
    fi
    spawned_url=$url
}

# Starts instance I with config CFG; appends to server_pids and server_urls.
start_server() {
    local cfg=$1 i=$2 d=$3
    spawn_ready "$d/serve.$i" "oncegate: listening on" \
        "$OG" serve --config "$cfg" --listen 127.0.0.1:0 || return 1
    server_urls+=("$spawned_url")
}

# stop_pids PID...: SIGTERM drains; exit 0 is expected, anything else is
# reported. The pids leave server_pids.
stop_pids() {
    local p q rc left=()
    for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do
        for _ in $(seq 1 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$p" 2>/dev/null; then
            say "pid $p did not exit 15 s after SIGTERM; killed"
            notes+=("pid $p ignored SIGTERM for 15 s")
            kill -KILL "$p" 2>/dev/null || true
        fi
        rc=0
        wait "$p" 2>/dev/null || rc=$?
        if [ "$rc" -ne 0 ]; then
            say "pid $p exited $rc after SIGTERM (expected 0)"
            notes+=("a server exited $rc after SIGTERM (expected 0)")
        fi
    done
    for q in "${server_pids[@]}"; do
        for p in "$@"; do [ "$q" = "$p" ] && continue 2; done
        left+=("$q")
    done
    server_pids=("${left[@]}")
}

stop_servers() {
    stop_pids "${server_pids[@]}"
    server_urls=()
}

# ------------------------------------------------------------------ wrk -----
# run_wrk MODE DIR PREFIX SECONDS INSTANCES CONNS TP TAG [SCRIPT [URL]]: one
# wrk process per instance (process p: TP threads, CONNS connections, files
# PREFIX.<p*TP+t>), all started together; process p targets instance p, or
# in replay mode instance p+1 (the grants the other instance admitted), or
# URL when given. SCRIPT defaults to bench/http.lua and gets the arguments
# MODE PREFIX FIRST. Each writes DIR/TAG.<p> (the script's done()) and
# DIR/TAG.<p>.log.
run_wrk() {
    local mode=$1 d=$2 prefix=$3 secs=$4 inst=$5 conns=$6 tp=$7 tag=$8
    local script=${9:-bench/http.lua} url p target pids=()
    wrk_pids=()
    for ((p = 0; p < inst; p++)); do
        target=$p
        [ "$mode" = replay ] && target=$(((p + 1) % inst))
        url=${10:-${server_urls[$target]}}
        OG_BENCH_OUT="$d/$tag.$p" \
            wrk -t "$tp" -c "$conns" -d "${secs}s" --timeout 10s -s "$script" \
            "$url" -- "$mode" "$prefix" $((p * tp)) \
            >"$d/$tag.$p.log" 2>&1 &
        pids+=("$!")
        wrk_pids+=("$!")
    done
    local ok=0
    for p in "${pids[@]}"; do wait "$p" || ok=1; done
    wrk_pids=()
    return $ok
}

# merge_wrk EXPECT DIR TAG INSTANCES: merges DIR/TAG.*; prints
#   RATE P50_MS P99_MS ERRORS SPILL EXHAUSTED WRAPPED GOOD STATUSES
# EXPECT is the expected status, or admit (202) or replay (409). RATE =
# expected answers / second, summed over the processes; ERRORS = every other
# answer or socket error (spill excluded).
merge_wrk() {
    local expect=$1 d=$2 tag=$3 inst=$4 counts pct p files=()
    case "$expect" in admit) expect=202 ;; replay) expect=409 ;; esac
    for ((p = 0; p < inst; p++)); do
        [ -s "$d/$tag.$p" ] && files+=("$d/$tag.$p")
    done
    if [ "${#files[@]}" -eq 0 ]; then
        echo "- - - 1 0 0 0 0 -"
        return 0
    fi
    counts=$(awk -v expect="$expect" '
        FNR == 1 { f++ }
        $1 == "duration_us" { dur[f] = $2 }
        $1 == "exhausted_threads" { exh += $2 }
        $1 == "wrapped" { wrapped += $2 }
        $1 ~ /^err_/ { sockerr += $2 }
        $1 == "status" { st[$2] += $3
                         if ($2 == expect) good[f] += $3
                         else if ($2 == 404) spill += $3
                         else other += $3 }
        END {
            if (f == 0) { print "- 1 0 0 0 0 -"; exit }
            rate = 0; g = 0
            for (i = 1; i <= f; i++) {
                if (dur[i] > 0) rate += good[i] / (dur[i] / 1e6)
                g += good[i]
            }
            sts = ""
            for (s in st) sts = sts (sts == "" ? "" : ",") s ":" st[s]
            if (sts == "") sts = "-"
            printf "%.1f %d %d %d %d %d %s\n", rate, other + sockerr, spill,
                   exh, wrapped, g, sts
        }' "${files[@]}") || counts="- 1 0 0 0 0 -"
    # Percentiles from the merged histogram as wrk computes them: the
    # smallest value whose cumulative count reaches p% of all requests.
    pct=$(awk '$1 == "lat" { c[$2] += $3 } END { for (v in c) print v, c[v] }' "${files[@]}" |
          sort -n | awk '{ v[NR] = $1; c[NR] = $2; n += $2 }
            END {
                if (n == 0) { print "- -"; exit }
                t50 = n * 0.50; t99 = n * 0.99; cum = 0; p50 = ""; p99 = ""
                for (i = 1; i <= NR; i++) {
                    cum += c[i]
                    if (p50 == "" && cum >= t50) p50 = v[i]
                    if (p99 == "" && cum >= t99) p99 = v[i]
                }
                printf "%.2f %.2f\n", p50 / 1000, p99 / 1000
            }') || pct="- -"
    local rate rest
    read -r rate rest <<<"$counts"
    echo "$rate $pct $rest"
}
