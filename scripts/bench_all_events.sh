#!/usr/bin/env bash
# Events per second of CPU time, end to end (`dtx -q -E TRACE ...`, the whole process), for the
# programs issue 22 names: every record (`diag:::events { n++; }`), context switches alone
# (`sched:::on-cpu { n++; }`) and dscripts/sched/oncpu.d. Each is run RUNS times after a warm-up;
# the best and median of user+system CPU time are turned into the trace's records per second.
# With BASE=/path/to/older/dtx the same runs are made with that binary in the same sitting, and
# the ratio of the medians is printed (the machine's load is printed too: quote figures with it).
#
#   scripts/bench_all_events.sh [TRACE] [RUNS]
#   (defaults: the randomascii slow-ppt trace from ../shared/etl, unpacked once; 10 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${2:-10}
TRACE=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$TRACE" ]; then
  zip=../shared/etl/randomascii_slow_ppt_trace.etl.zip
  [ -f "$zip" ] || { echo "bench_all_events: $zip not found; give a trace" >&2; exit 1; }
  (cd "$work" && unzip -q "$OLDPWD/$zip")
  mv "$work"/*.etl "$work/trace.etl"
  TRACE=$work/trace.etl
fi
cargo build --release --quiet --bin dtx
DTX=${CARGO_TARGET_DIR:-target}/release/dtx
events=$($DTX -q -E "$TRACE" -n 'diag:::events { @n = count(); } END { printa("%@d\n", @n); }' | tr -d ' \n')
echo "trace: $TRACE ($events records); load: $(cut -d' ' -f1-3 /proc/loadavg)"

# median CPU seconds of RUNS runs of: dtx -q -E TRACE ARGS...
median_cpu() {
  local bin=$1; shift
  : > "$work/t"
  "$bin" -q -E "$TRACE" "$@" > /dev/null
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%U %S" -o "$work/one" "$bin" -q -E "$TRACE" "$@" > /dev/null
    cat "$work/one" >> "$work/t"
  done
  awk '{ print $1 + $2 }' "$work/t" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)], a[1] }'
}

report() {
  local name=$1; shift
  read -r med best < <(median_cpu "$DTX" "$@")
  awk -v n="$events" -v m="$med" -v b="$best" -v name="$name" 'BEGIN {
    if (m <= 0) m = 0.005; if (b <= 0) b = 0.005
    printf "%-22s median %.3f s cpu (%.2f M events/s), best %.3f s (%.2f M events/s)\n", name, m, n / m / 1e6, b, n / b / 1e6 }'
  if [ -n "${BASE:-}" ]; then
    read -r bmed bbest < <(median_cpu "$BASE" "$@")
    awk -v n="$events" -v m="$bmed" -v new="$med" -v name="$name" 'BEGIN {
      if (m <= 0) m = 0.005; if (new <= 0) new = 0.005
      printf "%-22s BASE median %.3f s cpu (%.2f M events/s): %.2fx faster now\n", name, m, n / m / 1e6, m / new }'
  fi
}

report "diag:::events" -n 'diag:::events { n++; }'
report "sched:::on-cpu" -n 'sched:::on-cpu { n++; }'
report "sched/oncpu.d" -s dscripts/sched/oncpu.d
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
