#!/usr/bin/env bash
# Events per second of CPU time, end to end (`dtx -q -E TRACE ...`, the whole process), for the
# programs issue 22 names: every record (`diag:::events { n++; }`), context switches alone
# (`sched:::on-cpu { n++; }`) and dscripts/sched/oncpu.d. Each is run RUNS times after a warm-up;
# the best and median of user+system CPU time (to the microsecond) and the median wall time are
# turned into the trace's records per second, and the ratio of the first two programs' CPU is
# printed.
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

# CPU seconds (user + system) the calling shell's children have used so far, to the
# millisecond (getrusage through bash's `times`, run in the shell that started the children;
# /usr/bin/time counts in hundredths of a second, too coarse here)
children_cpu() {
  tail -n 1 "$1" | awk '{ s = 0
    for (i = 1; i <= 2; i++) { split($i, m, "m"); sub("s", "", m[2]); s += m[1] * 60 + m[2] }
    printf "%.6f\n", s }'
}

# median and best CPU seconds, and median wall seconds, of RUNS runs of: dtx -q -E TRACE ARGS...
median_cpu() {
  local bin=$1; shift
  : > "$work/t"
  "$bin" -q -E "$TRACE" "$@" > /dev/null
  for _ in $(seq "$RUNS"); do
    local w0 w1
    # nothing forks between the two snapshots but dtx (EPOCHREALTIME is bash's own clock)
    times > "$work/tm0"
    w0=$EPOCHREALTIME
    "$bin" -q -E "$TRACE" "$@" > /dev/null
    w1=$EPOCHREALTIME
    times > "$work/tm1"
    awk -v a="$(children_cpu "$work/tm0")" -v b="$(children_cpu "$work/tm1")" -v w0="$w0" -v w1="$w1" \
      'BEGIN { printf "%.6f %.6f\n", b - a, w1 - w0 }' >> "$work/t"
  done
  local cm cb wm
  read -r cm cb < <(sort -n "$work/t" | awk '{ c[NR] = $1 } END { print c[int((NR + 1) / 2)], c[1] }')
  wm=$(sort -n -k2 "$work/t" | awk '{ w[NR] = $2 } END { print w[int((NR + 1) / 2)] }')
  echo "$cm $cb $wm"
}

# the ratio of the first two programs' CPU medians, as the issue asks (at most 1.5)
declare -A MED

report() {
  local name=$1; shift
  read -r med best wall < <(median_cpu "$DTX" "$@")
  MED[$name]=$med
  awk -v n="$events" -v m="$med" -v b="$best" -v w="$wall" -v name="$name" 'BEGIN {
    if (m <= 0) m = 0.0005; if (b <= 0) b = 0.0005; if (w <= 0) w = 0.0005
    printf "%-22s cpu median %.4f s (%.2f M events/s), best %.4f s (%.2f M events/s); wall median %.4f s (%.2f M events/s)\n",
      name, m, n / m / 1e6, b, n / b / 1e6, w, n / w / 1e6 }'
  if [ -n "${BASE:-}" ]; then
    read -r bmed _ bwall < <(median_cpu "$BASE" "$@")
    awk -v n="$events" -v m="$bmed" -v w="$bwall" -v new="$med" -v name="$name" 'BEGIN {
      if (m <= 0) m = 0.0005; if (new <= 0) new = 0.0005
      printf "%-22s BASE cpu median %.4f s (%.2f M events/s), wall median %.4f s: %.2fx faster now\n",
        name, m, n / m / 1e6, w, m / new }'
  fi
}

report "diag:::events" -n 'diag:::events { n++; }'
report "sched:::on-cpu" -n 'sched:::on-cpu { n++; }'
report "sched/oncpu.d" -s dscripts/sched/oncpu.d
awk -v d="${MED[diag:::events]}" -v s="${MED[sched:::on-cpu]}" 'BEGIN {
  if (s > 0) printf "every record / context switches, CPU medians: %.2fx (issue 30 asks at most 1.5x)\n", d / s }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
