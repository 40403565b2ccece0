#!/usr/bin/env bash
# Overhead of live syscall tracing on a syscall-heavy program (Linux, root, gcc, perf optional).
#
# The program makes N getppid() system calls and prints its rate. It runs:
#   1. untraced,
#   2. under `perf stat -e raw_syscalls:sys_enter` (in-kernel counting, the floor of tracepoint cost),
#   3. while `perf record -a -e raw_syscalls:sys_enter` records every call system-wide (ring buffers),
#   4. while dtx runs `syscall:::entry { @[probefunc] = count(); }` system-wide,
# each RUNS times, and prints the best rate of each (M calls/s) and dtx's count of the calls.
#
#   scripts/bench_syscall_overhead.sh [N] [RUNS]      (default 5000000 calls, 3 runs)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000000}
RUNS=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/sysbench.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  printf("%.3f\n", n / s / 1e6);
  return 0;
}
C
gcc -O2 -o "$work/sysbench" "$work/sysbench.c"
cargo build --release --quiet
DTX=target/release/dtx

best() { sort -g | tail -1; }

run_plain() { for _ in $(seq "$RUNS"); do "$work/sysbench" "$N"; done | best; }

echo "calls per run: $N, runs: $RUNS, CPUs: $(nproc), kernel: $(uname -r)"
printf '%-52s %s\n' "configuration" "best rate (M calls/s)"
base=$(run_plain)
printf '%-52s %s\n' "untraced" "$base"

if command -v perf >/dev/null; then
    r=$(for _ in $(seq "$RUNS"); do
        perf stat -x, -o "$work/stat" -e raw_syscalls:sys_enter "$work/sysbench" "$N"
    done | best)
    printf '%-52s %s   (perf counted %s enters)\n' "perf stat -e raw_syscalls:sys_enter ./prog" "$r" \
        "$(cut -d, -f1 "$work/stat" | grep -E '^[0-9]+' | tail -1)"
    perf record -q -a -e raw_syscalls:sys_enter -o "$work/perf.data" -- sleep 3600 >/dev/null 2>&1 &
    prec=$!
    sleep 1
    r=$(run_plain)
    kill -INT "$prec"; wait "$prec" 2>/dev/null || true
    printf '%-52s %s\n' "perf record -a -e raw_syscalls:sys_enter (running)" "$r"
fi

"$DTX" -q -n 'BEGIN { printf("ready\n"); } syscall:::entry { @[probefunc] = count(); }' \
    > "$work/dtx.out" 2> "$work/dtx.err" &
dtx=$!
for _ in $(seq 100); do grep -q ready "$work/dtx.out" 2>/dev/null && break; sleep 0.1; done
r=$(run_plain)
kill -INT "$dtx"; wait "$dtx" || true
printf '%-52s %s\n' "dtx syscall:::entry { @[probefunc] = count(); }" "$r"
seen=$(awk '$1 == "getppid" { print $2 }' "$work/dtx.out")
echo "dtx counted getppid: ${seen:-0} (expected at least $((N * RUNS)))"
if [ -s "$work/dtx.err" ]; then echo "dtx stderr:"; cat "$work/dtx.err"; fi
