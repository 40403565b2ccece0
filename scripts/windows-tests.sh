#!/usr/bin/env bash
# One test filter of the windows-live workflow (.github/workflows/windows-live.yml), run on the
# elevated runner (Git Bash), where it must run exactly the tests the workflow says:
#
#   scripts/windows-tests.sh it FILTER COUNT   cargo test --release --test it -- FILTER
#                                              --test-threads=1 --nocapture: COUNT tests must run
#                                              and pass, none ignored
#   scripts/windows-tests.sh lib "" any        cargo test --release --lib: at least one must run
#   scripts/windows-tests.sh --expected [WORKFLOW]
#                                              prints the workflow's `it` filters, "FILTER COUNT"
#                                              a line (scripts/windows-check.sh compares them with
#                                              `--list` of the Windows test binary under Wine)
#
# The whole output (stdout and stderr, with libtest's summary) goes to the console and to
# $DTX_TESTS_OUT/<name>.log (default live-artifacts/tests/), which the workflow keeps. It fails
# when cargo fails, when the filter ran another number of tests than COUNT (none, after a
# rename; fewer, after a cfg or a feature dropped some; more: then COUNT is stale), when a test
# was ignored, and, with DTX_LIVE_TESTS=require, when a test said that it skipped: a line
# starting `skipped` or `skipping` (or libtest's `test NAME ... ` and then that), as every
# Windows test says it (tests/it/etw_live_windows.rs,
# pid/windows.rs, fpid_windows.rs, dotnet_pid_windows.rs, self_check.rs).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

if [ "${1:-}" = --expected ]; then
    # the `run:` lines `"scripts/windows-tests.sh it FILTER COUNT"` (quoted: a filter's `:: `
    # would end a plain YAML scalar)
    sed -n 's/^[[:space:]]*run:[[:space:]]*"scripts\/windows-tests\.sh[[:space:]]\{1,\}it[[:space:]]\{1,\}\([^[:space:]"]\{1,\}\)[[:space:]]\{1,\}\([0-9]\{1,\}\)"[[:space:]]*$/\1 \2/p' \
        "${2:-.github/workflows/windows-live.yml}"
    exit 0
fi

kind=${1:?usage: scripts/windows-tests.sh it FILTER COUNT | lib "" any | --expected [WORKFLOW]}
filter=${2-}
want=${3:?usage: scripts/windows-tests.sh it FILTER COUNT}
case $kind in
it) args=(--test it -- "$filter" --test-threads=1 --nocapture) ;;
lib) args=(--lib -- ${filter:+"$filter"}) ;;
*)
    echo "windows-tests: unknown kind $kind (it, lib)" >&2
    exit 2
    ;;
esac
case $want in
any | [0-9] | [0-9]*[0-9]) ;;
*)
    echo "windows-tests: COUNT is a number or any, not $want" >&2
    exit 2
    ;;
esac
out=${DTX_TESTS_OUT:-live-artifacts/tests}
mkdir -p "$out"
name=$kind-$(printf '%s' "${filter:-all}" | tr -c 'A-Za-z0-9_.-' '_')
log=$out/$name.log
echo "windows-tests: cargo test --release ${args[*]} (expecting $want tests; output in $log)"
cargo test --release "${args[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# libtest's summaries: "running N tests", "test result: ok. P passed; F failed; I ignored; ..."
read -r ran passed failed ignored < <(awk '
    { sub(/\r$/, "") }
    /^running [0-9]+ tests?$/ { r += $2 }
    /^test result:/ {
        for (i = 1; i <= NF; i++) {
            if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i
        }
    } END { print r + 0, p + 0, f + 0, g + 0 }' "$log")
problems=()
[ "$status" -eq 0 ] || problems+=("cargo test exited with $status")
[ "$failed" -eq 0 ] || problems+=("$failed tests failed")
if [ "$want" = any ]; then
    [ "$ran" -gt 0 ] || problems+=("no test ran")
elif [ "$ran" -ne "$want" ]; then
    problems+=("$ran tests ran, the workflow expects $want (a test added, removed or renamed: change the count beside the filter)")
fi
[ "$ignored" -eq 0 ] || problems+=("$ignored tests were ignored")
if [ "${DTX_LIVE_TESTS:-}" = require ]; then
    # at the start of a line, or after libtest's `test NAME ... ` (one thread, --nocapture)
    skips=$(grep -aiE '(^|^test [^ ]+ \.\.\. )skip(ped|ping)\b' "$log" || true)
    if [ -n "$skips" ]; then
        problems+=("DTX_LIVE_TESTS=require, but tests skipped: $(printf '%s' "$skips" | head -c 2000 | tr '\n' ';')")
    fi
fi
summary="windows-tests: $kind ${filter:-(all)}: $ran ran, $passed passed, $failed failed, $ignored ignored (expected $want)"
echo "$summary" | tee -a "$out/summary.txt"
if [ ${#problems[@]} -gt 0 ]; then
    for p in "${problems[@]}"; do echo "windows-tests: FAIL: $p" | tee -a "$out/summary.txt"; done
    exit 1
fi
exit 0
