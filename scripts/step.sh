# scripts/step.sh — sourced by scripts/start and scripts/test: run one named
# step quietly, and when it fails say which step, its exit status and the end
# of what it printed (the whole output stays in $STEP_LOG). A set-up command
# must never fail silently.
STEP_LOG=${STEP_LOG:-$(pwd)/build-step.log}

step() { # NAME COMMAND [ARGS...]
    local name=$1 rc=0
    shift
    "$@" >"$STEP_LOG" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        {
            echo "$(basename "$0"): FAILED: $name (exit $rc): $*"
            echo "---- last 40 lines of its output ($STEP_LOG) ----"
            tail -n 40 "$STEP_LOG"
            echo "----"
        } >&2
        exit "$rc"
    fi
}
