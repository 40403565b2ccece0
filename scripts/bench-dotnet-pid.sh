#!/usr/bin/env bash
# Cost of one pid probe hit on a .NET method (the ptrace loop: a breakpoint in JIT code)
# against the same on a native C function, and an fpid hook on that function, on Linux. Each
# program calls its function N times; the time of `dtx -c 'prog N'` less the time for 0 calls,
# divided by N, is the cost per hit (wall clock, best of three). The .NET program runs under the
# runtime that scripts/dotnet-test-env.sh installs; the C program is built with gcc.
# Usage: scripts/bench-dotnet-pid.sh [N]   (default 100000; dtx from target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
DTX=${DTX:-target/release/dtx}
eval "$(scripts/dotnet-test-env.sh | sed 's/^/export /')"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/app.cs" <<'CS'
using System.Runtime.CompilerServices;
static class Work {
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static int Add(int a, int b) { return a + b; }
}
class Program {
    static int Main(string[] args) {
        int n = int.Parse(args[0]);
        long s = 0;
        for (int i = 0; i < n; i++) s += Work.Add(i, 7);
        return s == 42 ? 1 : 0;
    }
}
CS
"$MCS" -target:exe -out:"$W/app.dll" "$W/app.cs" >/dev/null
echo '{"runtimeOptions":{"tfm":"netcoreapp3.1","framework":{"name":"Microsoft.NETCore.App","version":"3.1.0"}}}' > "$W/app.runtimeconfig.json"
cat > "$W/hit.c" <<'C'
#include <stdlib.h>
__attribute__((noinline)) int hit(int x) { int y = x * 3; return y + 1; }
int main(int argc, char **argv) {
    long n = atol(argv[1]), s = 0;
    for (long i = 0; i < n; i++) s += hit((int)i);
    return s == 42;
}
C
gcc -O1 -o "$W/hit" "$W/hit.c"
export DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1
# best of three wall-clock runs, in ns
run() {
    local best=
    for _ in 1 2 3; do
        local t0 t1
        t0=$(date +%s%N)
        "$DTX" -q -x pidmode=ptrace -n "$1" -c "$2" >/dev/null 2>&1
        t1=$(date +%s%N)
        local d=$((t1 - t0))
        if [ -z "$best" ] || [ "$d" -lt "$best" ]; then best=$d; fi
    done
    echo "$best"
}
per_hit() { # name probe command-prefix
    local z n
    z=$(run "$2 { @ = count(); }" "$3 0")
    n=$(run "$2 { @ = count(); }" "$3 $N")
    echo "$1: $(((n - z) / N)) ns per hit (N=$N; 0 calls: $((z / 1000000)) ms, N calls: $((n / 1000000)) ms)"
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
per_hit "native C function (pid, ptrace)" 'pid$target:a.out:hit:entry' "$W/hit"
# fpid hooks go into native code only (JIT code has no file and moves): the fpid figure is the
# native function's, for comparison
per_hit "native C function (fpid)" 'fpid$target:a.out:hit:entry' "$W/hit"
per_hit ".NET method (pid, ptrace)" 'pid$target:app:Work.Add:entry' "$DOTNET $W/app.dll"
