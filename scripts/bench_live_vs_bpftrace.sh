#!/usr/bin/env bash
# dtx against bpftrace on a system-call-heavy program (Linux, root, gcc, bpftrace): issue 40's
# "must show". A C loop of getppid() calls, compiled here, prints its own rate. It runs
#   1. untraced,
#   2. under bpftrace    tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }
#   3. under dtx         syscall:::entry { @[execname] = count(); }   (the BPF back end)
#   4. the same with -x bpf=off (every event to user space)
# interleaved, one round after another (one sitting), RUNS rounds; the best rate of each is
# printed in M calls/s, with the ratios against bpftrace and the cost per call over untraced.
# Then the latency case, each tracer starting the loop itself (-c) and timing its getppid():
#   dtx       syscall::getppid:entry /pid == $target/ { self->ts = timestamp; }
#             syscall::getppid:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }
#   bpftrace  the same with tracepoint:syscalls:sys_{enter,exit}_getppid, @ts[tid], hist()
# (dtx with the BPF back end and with -x bpf=off). The load (`uptime`) is printed before and
# after: on a shared machine the figures are only comparable within one sitting.
#
#   scripts/bench_live_vs_bpftrace.sh [N] [RUNS]     (default 5000000 calls, 3 rounds)
#   DTX=path/to/dtx skips the release build.
#
# Exit status: 0 done; 1 an error; 3 bpftrace is missing (Debian: apt-get install bpftrace);
# 4 not root.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000000}
RUNS=${2:-3}
if ! command -v bpftrace >/dev/null; then
    echo "bench_live_vs_bpftrace: bpftrace not found (Debian: apt-get install bpftrace); nothing measured" >&2
    exit 3
fi
if [ "$(id -u)" != 0 ]; then
    echo "bench_live_vs_bpftrace: needs root (perf events and BPF)" >&2
    exit 4
fi
work=$(mktemp -d)
tracer=
mounted=
cleanup() {
    if [ -n "$tracer" ]; then kill -INT "$tracer" 2>/dev/null || true; wait "$tracer" 2>/dev/null || true; fi
    if [ -n "$mounted" ]; then umount /sys/kernel/tracing 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
# bpftrace finds tracepoints in tracefs (dtx mounts it for itself): mounted for the run if it
# is not, and unmounted after
if [ ! -e /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing
    mounted=1
fi
cat > "$work/loop.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
/* loop N [FILE]: N getppid() calls; the rate (M calls/s) on stdout, or into FILE */
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
  FILE *f = argc > 2 ? fopen(argv[2], "w") : stdout;
  if (!f) return 1;
  fprintf(f, "%.3f\n", n / s / 1e6);
  return 0;
}
C
gcc -O2 -o "$work/loop" "$work/loop.c"
if [ -z "${DTX:-}" ]; then
    cargo build --release --quiet
    DTX=target/release/dtx
fi

# starts a tracer in the background and waits for its "ready" line (BEGIN prints it)
start() {
    "$@" > "$work/tracer.out" 2> "$work/tracer.err" &
    tracer=$!
    for _ in $(seq 300); do
        grep -q ready "$work/tracer.out" 2>/dev/null && return 0
        kill -0 "$tracer" 2>/dev/null || break
        sleep 0.1
    done
    echo "tracer did not start: $*" >&2
    cat "$work/tracer.err" >&2
    exit 1
}
stop() {
    kill -INT "$tracer"
    wait "$tracer" || true
    tracer=
}
max() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }

COUNT_BT='BEGIN { printf("ready\n"); } tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }'
COUNT_D='BEGIN { printf("ready\n"); } syscall:::entry { @[execname] = count(); }'
echo "calls per run: $N, rounds: $RUNS, CPUs: $(nproc), kernel: $(uname -r), $($DTX --version 2>/dev/null | head -1), $(bpftrace --version)"
echo "load before: $(uptime)"
untraced=0 bt=0 kern=0 user=0
for round in $(seq "$RUNS"); do
    untraced=$(max "$untraced" "$("$work/loop" "$N")")
    start bpftrace -e "$COUNT_BT"
    bt=$(max "$bt" "$("$work/loop" "$N")")
    stop
    start "$DTX" -q -n "$COUNT_D"
    kern=$(max "$kern" "$("$work/loop" "$N")")
    stop
    grep -q "loop" "$work/tracer.out" || { echo "dtx (BPF) counted no loop calls:" >&2; cat "$work/tracer.out" "$work/tracer.err" >&2; exit 1; }
    start "$DTX" -q -x bpf=off -n "$COUNT_D"
    user=$(max "$user" "$("$work/loop" "$N")")
    stop
    echo "round $round done"
done
cost() { awk -v r="$1" -v u="$untraced" 'BEGIN { printf "%+.0f ns/call", 1000 / r - 1000 / u }'; }
ratio() { awk -v r="$1" -v b="${2:-$bt}" 'BEGIN { printf "%.2fx bpftrace", r / b }'; }
printf '%-58s %8s  %s\n' "configuration (best of $RUNS)" "M/s" "vs untraced, vs bpftrace"
printf '%-58s %8s\n' "untraced" "$untraced"
printf '%-58s %8s  %s\n' "bpftrace raw_syscalls:sys_enter { @[comm] = count(); }" "$bt" "$(cost "$bt")"
printf '%-58s %8s  %s, %s\n' "dtx syscall:::entry { @[execname] = count(); } (BPF)" "$kern" "$(cost "$kern")" "$(ratio "$kern")"
printf '%-58s %8s  %s, %s\n' "dtx ... -x bpf=off" "$user" "$(cost "$user")" "$(ratio "$user")"

# the latency case: each tracer runs the loop (-c) and times its getppid() calls
LAT_D='syscall::getppid:entry /pid == $target/ { self->ts = timestamp; }
syscall::getppid:return /self->ts/ { @ = quantize(timestamp - self->ts); self->ts = 0; }'
LAT_BT='tracepoint:syscalls:sys_enter_getppid /pid == cpid/ { @ts[tid] = nsecs; }
tracepoint:syscalls:sys_exit_getppid /@ts[tid]/ { @ = hist(nsecs - @ts[tid]); delete(@ts[tid]); }'
lat_bt=0 lat_kern=0 lat_user=0
for round in $(seq "$RUNS"); do
    bpftrace -e "$LAT_BT" -c "$work/loop $N $work/rate" > "$work/lat_bt.out" 2>&1
    lat_bt=$(max "$lat_bt" "$(cat "$work/rate")")
    "$DTX" -q -x bpf=verbose -n "$LAT_D" -c "$work/loop $N $work/rate" > "$work/lat_kern.out" 2> "$work/lat_kern.err"
    lat_kern=$(max "$lat_kern" "$(cat "$work/rate")")
    "$DTX" -q -x bpf=off -n "$LAT_D" -c "$work/loop $N $work/rate" > "$work/lat_user.out" 2>&1
    lat_user=$(max "$lat_user" "$(cat "$work/rate")")
done
echo
printf '%-58s %8s  %s\n' "latency: quantize(return - entry) of getppid (best of $RUNS)" "M/s" "vs untraced, vs bpftrace"
printf '%-58s %8s  %s\n' "bpftrace syscalls:sys_{enter,exit}_getppid, hist()" "$lat_bt" "$(cost "$lat_bt")"
printf '%-58s %8s  %s, %s\n' "dtx self->ts, quantize() (BPF)" "$lat_kern" "$(cost "$lat_kern")" "$(ratio "$lat_kern" "$lat_bt")"
printf '%-58s %8s  %s, %s\n' "dtx ... -x bpf=off" "$lat_user" "$(cost "$lat_user")" "$(ratio "$lat_user" "$lat_bt")"
echo "where dtx ran the latency clauses:"
sed 's/^/  /' "$work/lat_kern.err"
echo "dtx's last latency distribution (BPF):"
cat "$work/lat_kern.out"
echo "load after: $(uptime)"
