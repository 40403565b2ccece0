#!/usr/bin/env bash
# Cost of one pid probe hit under Wine: the target stops at the int3, the clause runs, the
# target resumes. `hits.exe N` calls hit() N times; (time of dtx -c 'hits.exe N' - time for
# 0 calls) / N is the cost per hit. Best of three for each of: an empty clause (the debugger
# loop alone), count(), an aggregation keyed on an argument, the return probe (emulated ret)
# and an offset probe whose instruction is single-stepped (trap flag); then the floor: a bare C
# debugger loop (scripts/wine/debug_floor.c: wait, get/set context, continue per int3).
#
# Called by `scripts/pid-windows-check.sh bench` (which builds dtx.exe and the test programs);
# alone it needs DTX_EXE (Linux path of dtx.exe) and FIXTURES (folder of hits.exe).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export WINEPREFIX=${WINEPREFIX:-/tmp/wine-dtx-pid} WINEDEBUG=${WINEDEBUG:--all}
DTX_EXE=${DTX_EXE:-${CARGO_TARGET_DIR:-$ROOT/target-wine}/x86_64-pc-windows-gnu/release/dtx.exe}
FIXTURES=${FIXTURES:-${CARGO_TARGET_DIR:-$ROOT/target-wine}/pid-fixtures}
N=${N:-20000}
WINE=/usr/lib/wine/wine64
HITS="Z:$(printf '%s' "$FIXTURES/hits.exe" | tr / '\\')"

# seconds (float) of one run, best of three
best() {
    local best=""
    for _ in 1 2 3; do
        local a b
        a=$(date +%s%N)
        "$WINE" "$DTX_EXE" -q "$@" >/dev/null 2>&1 || true
        b=$(date +%s%N)
        local t=$(( b - a ))
        if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
    done
    echo "$best"
}

# the offset of hit's second instruction (mov rbp,rsp after push rbp: emulated; pick the
# third, a stack store, which is single-stepped)
step_off=$("$WINE" "$DTX_EXE" -l -n 'pid$target:a.out:hit:' -c "$HITS 0" 2>/dev/null \
    | awk '$NF ~ /^[0-9a-f]+$/ && $NF != "0" {print $NF}' | sed -n 3p | tr -d '\r')
step_off=${step_off:-4}

printf 'probe hit cost under Wine, N=%d calls, best of 3\n' "$N"
for row in "empty clause|pid\$target:a.out:hit:entry {}" \
           "count()|pid\$target:a.out:hit:entry { @ = count(); }" \
           "@[arg0 % 16] = count()|pid\$target:a.out:hit:entry { @[arg0 % 16] = count(); }" \
           "return (emulated ret)|pid\$target:a.out:hit:return { @ = count(); }" \
           "offset $step_off (single step)|pid\$target:a.out:hit:$step_off { @ = count(); }"; do
    label=${row%%|*}
    script=${row#*|}
    t0=$(best -n "$script" -c "$HITS 0")
    tn=$(best -n "$script" -c "$HITS $N")
    awk -v l="$label" -v a="$t0" -v b="$tn" -v n="$N" \
        'BEGIN { printf "  %-28s %8.2f us/hit\n", l, (b - a) / n / 1000 }'
done

x86_64-w64-mingw32-gcc -O2 -o "$FIXTURES/debug_floor.exe" "$ROOT/scripts/wine/debug_floor.c"
floor=""
for _ in 1 2 3; do
    f=$("$WINE" "$FIXTURES/debug_floor.exe" "$N" | tr -d '\r')
    if [ -z "$floor" ] || awk -v a="$f" -v b="$floor" 'BEGIN { exit !(a < b) }'; then floor=$f; fi
done
printf '  %-28s %8.2f us/trap\n' "floor (bare C debug loop)" "$floor"
