#!/usr/bin/env bash
# fpid on Linux at hot-loop rates: the cost of a hit and whether every hit is counted.
# `hit N` (built here with gcc -O2) calls a one-line function N times (default 10,000,000).
# For each of: the untraced program, `fpid ... hit:entry { @c = count(); }` (one hit a call),
# and entry + return (two hits a call), three runs each, taking the best: wall time, CPU
# (user + system of dtx and the target together, from /usr/bin/time), and the count dtx
# printed against N (exact: the count equals the hits and no drop was said). Per hit:
# (CPU traced - CPU untraced) / hits, so the figure is what tracing adds. The machine's load
# average is printed before and after, as the figures depend on it.
#
# Needs gcc, /usr/bin/time and a dtx built (DTX, default target/release/dtx); run as a user
# allowed to ptrace the target (root, or ptrace_scope 0). Extra dtx options in DTX_OPTS
# (e.g. DTX_OPTS="-x fpidwait=0" shows what the ring loses without the wait).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DTX=${DTX:-$ROOT/target/release/dtx}
N=${N:-10000000}
RUNS=${RUNS:-3}
read -r -a OPTS <<< "${DTX_OPTS:-}"
for tool in gcc /usr/bin/time; do
    if ! command -v "$tool" >/dev/null; then
        echo "fpid-linux-bench: needs $tool (apt-get install gcc time)" >&2
        exit 2
    fi
done
[ -x "$DTX" ] || { echo "fpid-linux-bench: no dtx at $DTX (cargo build --release)" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/hit.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long hit(long i) { return i * 3 + 1; }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0, sum = 0;
    for (long i = 0; i < n; i++) sum += hit(i);
    printf("checksum %ld\n", sum);
    return 0;
}
C
gcc -O2 -o "$WORK/hit" "$WORK/hit.c"

# one run of "$@": prints "wall cpu count drops" (count and drops from dtx's output)
run() {
    /usr/bin/time -f '%e %U %S' -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" || true
    local wall user sys count drops
    read -r wall user sys < <(tail -1 "$WORK/time")
    count=$(awk '/^count /{print $2}' "$WORK/out")
    drops=$(awk '/fpid drops in pid/{s += $2} END {print s + 0}' "$WORK/err")
    echo "$wall $(echo "$user + $sys" | bc -l) ${count:-0} $drops"
}

# the best (least CPU) of RUNS runs of "$@"
best() {
    local best="" line
    for _ in $(seq "$RUNS"); do
        line=$(run "$@")
        if [ -z "$best" ] || (( $(echo "$(cut -d' ' -f2 <<<"$line") < $(cut -d' ' -f2 <<<"$best")" | bc -l) )); then
            best=$line
        fi
    done
    echo "$best"
}

echo "fpid-linux-bench: N=$N calls, best of $RUNS, $(nproc) CPUs, dtx options: ${DTX_OPTS:-none}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r base_wall base_cpu _ _ < <(best "$WORK/hit" "$N")
# /usr/bin/time counts in hundredths: a floor keeps the ratios finite
floor() { echo "if ($1 < 0.01) 0.01 else $1" | bc -l; }
base_wall=$(floor "$base_wall")
base_cpu=$(floor "$base_cpu")
printf '%-26s %7s %7s %10s %8s %6s %10s %8s %8s\n' run wall_s cpu_s counted drops exact cpu_us/hit x_wall x_cpu
printf '%-26s %7.2f %7.2f %10s %8s %6s %10s %8s %8s\n' untraced "$base_wall" "$base_cpu" - - - - 1.0 1.0
for probes in entry entry+return; do
    if [ "$probes" = entry ]; then
        clause='fpid$target:a.out:hit:entry { @c = count(); }'
        hits=$N
    else
        clause='fpid$target:a.out:hit:entry, fpid$target:a.out:hit:return { @c = count(); }'
        hits=$((2 * N))
    fi
    read -r wall cpu count drops < <(best "$DTX" -q "${OPTS[@]}" \
        -n "$clause END { printa(\"count %@d\\n\", @c); }" -c "$WORK/hit $N")
    exact=no
    if [ "$count" = "$hits" ] && [ "$drops" = 0 ]; then exact=yes; fi
    per_hit=$(echo "($cpu - $base_cpu) * 1000000 / $hits" | bc -l)
    printf '%-26s %7.2f %7.2f %10s %8s %6s %10.3f %8.1f %8.1f\n' "fpid $probes, count()" \
        "$wall" "$cpu" "$count" "$drops" "$exact" "$per_hit" \
        "$(echo "$wall / $base_wall" | bc -l)" "$(echo "$cpu / $base_cpu" | bc -l)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
