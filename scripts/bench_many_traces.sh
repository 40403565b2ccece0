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

# wall seconds of one run of: dtx -q ARGS... -s SCRIPT
wall() {
  local t0 t1
  t0=$(date +%s%N)
  "$DTX" -q "$@" -s "$SCRIPT" > /dev/null
  t1=$(date +%s%N)
  echo "scale=4; ($t1 - $t0) / 1000000000" | bc
}

# median of RUNS wall times (after one warm-up run) of: dtx -q ARGS...
median_wall() {
  wall "$@" > /dev/null
  for _ in $(seq "$RUNS"); do wall "$@"; done | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}

# the single runs one after the other, as a loop over files would do them
sequential() {
  local t0 t1
  t0=$(date +%s%N)
  "$DTX" -q -E "$A" -s "$SCRIPT" > /dev/null
  "$DTX" -q -E "$B" -s "$SCRIPT" > /dev/null
  t1=$(date +%s%N)
  echo "scale=4; ($t1 - $t0) / 1000000000" | bc
}

one=$(median_wall -E "$A")
two=$(median_wall -E "$A" -E "$B")
seq_two=$(sequential > /dev/null; for _ in $(seq "$RUNS"); do sequential; done | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
echo "one trace:                 ${one} s"
echo "two traces, one run:       ${two} s  (ratio to one: $(echo "scale=2; $two / $one" | bc))"
echo "two runs, one after other: ${seq_two} s  (ratio to one: $(echo "scale=2; $seq_two / $one" | bc))"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
