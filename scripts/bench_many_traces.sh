#!/usr/bin/env bash
# Scaling of a many-trace run (docs/many-traces.md): the wall time of `dtx -q -E A -E B -s
# SCRIPT` (two traces, one engine each on the pool) against `dtx -q -E A -s SCRIPT` (one trace)
# and against the two single runs one after the other, in the same sitting. On a machine with
# two free cores the two-trace run should take about as long as one (ratio near 1.0); run one
# after the other, two take twice as long (2.0). Each case runs RUNS times after a warm-up; the
# medians are compared. The load average is printed before and after: quote figures with it.
#
#   scripts/bench_many_traces.sh [TRACE] [RUNS] [SCRIPT]
#   (defaults: the randomascii slow-ppt trace from ../shared/etl, unpacked once and copied
#    under a second name; 7 runs; dscripts/sched/oncpu.d)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${2:-7}
TRACE=${1:-}
SCRIPT=${3:-dscripts/sched/oncpu.d}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$TRACE" ]; then
  zip=../shared/etl/randomascii_slow_ppt_trace.etl.zip
  [ -f "$zip" ] || { echo "bench_many_traces: $zip not found; give a trace" >&2; exit 1; }
  (cd "$work" && unzip -q "$OLDPWD/$zip")
  mv "$work"/*.etl "$work/a.etl"
  TRACE=$work/a.etl
fi
cp "$TRACE" "$work/b.etl"
A=$TRACE
B=$work/b.etl
cargo build --release --quiet --bin dtx
DTX=${CARGO_TARGET_DIR:-target}/release/dtx
echo "trace: $A ($(du -h "$A" | cut -f1)), script: $SCRIPT, runs: $RUNS, cores: $(nproc)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# "wall cpu" seconds (cpu: user + system) of one run of: dtx -q ARGS... -s SCRIPT
measure() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$DTX" -q "$@" -s "$SCRIPT" > /dev/null
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$work/time"
}

# the two single runs one after the other, as a loop over files would do them
sequential() {
  local a b
  a=$(measure -E "$A")
  b=$(measure -E "$B")
  echo "$a $b" | awk '{printf "%.3f %.3f\n", $1 + $3, $2 + $4}'
}

# median wall and median cpu of RUNS runs (after one warm-up) of: CASE ARGS...
medians() {
  "$@" > /dev/null
  for _ in $(seq "$RUNS"); do "$@"; done > "$work/runs"
  w=$(cut -d' ' -f1 "$work/runs" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  c=$(cut -d' ' -f2 "$work/runs" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  echo "$w $c"
}

read -r one_w one_c < <(medians measure -E "$A")
read -r two_w two_c < <(medians measure -E "$A" -E "$B")
read -r seq_w seq_c < <(medians sequential)
ratio() { echo "scale=2; $1 / $2" | bc; }
printf "%-28s %8s %8s %10s %10s\n" case wall_s cpu_s wall/one cpu/one
printf "%-28s %8s %8s %10s %10s\n" "one trace" "$one_w" "$one_c" 1.00 1.00
printf "%-28s %8s %8s %10s %10s\n" "two traces, one run" "$two_w" "$two_c" "$(ratio "$two_w" "$one_w")" "$(ratio "$two_c" "$one_c")"
printf "%-28s %8s %8s %10s %10s\n" "two runs, one after other" "$seq_w" "$seq_c" "$(ratio "$seq_w" "$one_w")" "$(ratio "$seq_c" "$one_c")"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ -r /proc/pressure/cpu ] && echo "cpu pressure: $(head -1 /proc/pressure/cpu)"
# wall/one near 1.0 for the two-trace run needs two cores free for dtx: on a loaded machine
# (with autogroup scheduling, one session's share of the CPUs is fixed whatever its threads)
# it stays near the sequential 2.0 while cpu/one shows the work is the same
