# tests/support/check.sh — the checks of the shell tests (tests/cli.sh,
# tests/restore.sh), sourced after T (a temp dir) is set. Counts in pass,
# fail and skipped; each script ends with check_summary NAME.
pass=0 fail=0 skipped=0
# A part that cannot run here (no PostgreSQL cluster) is counted: the run
# then ends as a skip (exit 77), never as a pass that checked less.
skip_part() { skipped=$((skipped+1)); echo "skip $1"; }

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
expect_err() { # NAME PATTERN : the last check's stderr matches
    if grep -Eq -- "$2" "$T/err"; then pass=$((pass+1)); echo "ok   $1";
    else fail=$((fail+1)); echo "FAIL $1: stderr lacks /$2/"; cat "$T/err"; fi
}
check_summary() { # NAME : prints the counts; exits 1 on a failure, 77 on a skip
    echo "$1: $pass passed, $fail failed, $skipped parts skipped"
    [ "$fail" -eq 0 ] || exit 1
    [ "$skipped" -eq 0 ] || exit 77 # meson: SKIP
    exit 0
}
