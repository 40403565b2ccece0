#!/usr/bin/env bash
# Peak resident memory and events per second of `dtx -q -E TRACE -n 'diag:::events
# { @[execname] = count(); }'` over the 33 MB Windows 7 xperf trace and over a synthetic trace
# COPIES times as long (its buffers repeated with their timestamps moved on: the test helper
# of tests/it/support/etl.rs writes it). Memory must stay flat: the large trace's peak RSS within
# a small factor of the small one's, at the same events per second.
#
#   scripts/bench-memory.sh [COPIES] [DIR]
#   (defaults: 120 copies, about 4 GB, written to /tmp and removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
COPIES=${1:-120}
work=$(mktemp -d "${2:-/tmp}/dtx-bench-memory.XXXXXX")
trap 'rm -rf "$work"' EXIT
zip=../shared/etl/randomascii_slow_ppt_trace.etl.zip
[ -f "$zip" ] || { echo "bench-memory: $zip not found" >&2; exit 1; }
(cd "$work" && unzip -q "$OLDPWD/$zip")
mv "$work"/*.etl "$work/one.etl"
cargo build --release --quiet --bin dtx
DTX=${CARGO_TARGET_DIR:-target}/release/dtx
echo "writing $COPIES copies..."
DTX_BIG_TRACE=$work/big.etl DTX_BIG_COPIES=$COPIES \
  cargo test --release --quiet --test it -- --ignored --exact trace_memory::write_big_trace > /dev/null
PROG='diag:::events { @[execname] = count(); }'
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

# one run: events (the sum of the counts), CPU and wall seconds, peak RSS (KB)
run() {
  local trace=$1
  cat "$trace" > /dev/null # in the page cache, as for every run after the first
  /usr/bin/time -f "%U %S %e %M" -o "$work/time" "$DTX" -q -E "$trace" -n "$PROG" > "$work/out"
  local events
  events=$(awk 'NF >= 2 { n += $NF } END { print n }' "$work/out")
  read -r user sys wall rss < "$work/time"
  awk -v name="$(basename "$trace")" -v size="$(stat -c %s "$trace")" -v n="$events" \
      -v u="$user" -v s="$sys" -v w="$wall" -v rss="$rss" 'BEGIN {
    cpu = u + s; if (cpu <= 0) cpu = 0.005; if (w <= 0) w = 0.005
    printf "%-8s %6.0f MB  %11d events  %6.2f s cpu (%5.2f M events/s)  %6.2f s wall  peak RSS %7.1f MB\n",
      name, size / 1048576, n, cpu, n / cpu / 1e6, w, rss / 1024 }'
  echo "$rss" > "$work/rss.$(basename "$trace")"
}
run "$work/one.etl"
run "$work/big.etl"
awk -v a="$(cat "$work/rss.one.etl")" -v b="$(cat "$work/rss.big.etl")" \
  'BEGIN { printf "peak RSS, large trace against the 33 MB one: %.2fx\n", b / a }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
