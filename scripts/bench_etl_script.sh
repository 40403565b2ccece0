#!/usr/bin/env bash
# End-to-end throughput of a D script over a recorded trace: `dtx -q -E TRACE -s SCRIPT`, run
# RUNS times (after one warm-up run), reported as events per second of the trace's records.
#
# The record count comes from dtx itself (`diag:::events` counts every record). Each run is
# timed by wall clock and by user+system CPU time (the CPU time is steadier on a shared machine);
# the best and the median of each are printed. With CALLGRIND=1 the script also counts the
# instructions of one run under valgrind (independent of the machine's load).
#
#   scripts/bench_etl_script.sh [TRACE] [SCRIPT] [RUNS]
#   (defaults: the randomascii slow-ppt trace from ../shared/etl, dscripts/sched/oncpu.d, 10)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${3:-10}
SCRIPT=${2:-dscripts/sched/oncpu.d}
TRACE=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$TRACE" ]; then
  zip=../shared/etl/randomascii_slow_ppt_trace.etl.zip
  [ -f "$zip" ] || { echo "bench_etl_script: $zip not found; give a trace" >&2; exit 1; }
  # unpacked, so that the runs time the trace and not the inflation of the zip member
  (cd "$work" && unzip -q "$OLDPWD/$zip")
  TRACE=$(ls "$work"/*.etl)
  mv "$TRACE" "$work/trace.etl"
  TRACE=$work/trace.etl
fi
cargo build --release --quiet --bin dtx
DTX=target/release/dtx
events=$($DTX -q -E "$TRACE" -n 'diag:::events { @n = count(); } END { printa("%@d\n", @n); }' | tr -d ' \n')
echo "trace: $TRACE ($events records), script: $SCRIPT"
$DTX -q -E "$TRACE" -s "$SCRIPT" > /dev/null
for _ in $(seq "$RUNS"); do
  /usr/bin/time -f "%e %U %S" -o "$work/t" $DTX -q -E "$TRACE" -s "$SCRIPT" > /dev/null
  cat "$work/t" >> "$work/times"
done
awk -v n="$events" '
  { wall[NR] = $1; cpu[NR] = $2 + $3 }
  function report(name, a,    k, i, j, t, best, med) {
    k = NR
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    best = a[1]; med = a[int((k + 1) / 2)]
    if (best <= 0) best = 0.005
    if (med <= 0) med = 0.005
    printf "%-5s best %.3f s (%.2f M events/s), median %.3f s (%.2f M events/s)\n", name, best, n / best / 1e6, med, n / med / 1e6
  }
  END { report("wall", wall); report("cpu", cpu) }
' "$work/times"
if [ "${CALLGRIND:-0}" = 1 ] && command -v valgrind > /dev/null; then
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" $DTX -q -E "$TRACE" -s "$SCRIPT" > /dev/null 2> "$work/cg.err"
  ir=$(sed -n 's/.*Collected : //p' "$work/cg.err")
  echo "callgrind: $ir instructions, $((ir / events)) per record"
fi
