#!/bin/sh
# Runs one fuzz target of fuzz/ (cargo-fuzz layout, libFuzzer) for a while and prints
# libFuzzer's summary: the runs, the time and the inputs per second, the figures that
# docs/performance.md ("Fuzzing") reports.
#
#   scripts/fuzz.sh vm [SECONDS]            # the D VM over generated programs
#   scripts/fuzz.sh etl_reader [SECONDS]    # the .etl reader over arbitrary bytes
#   scripts/fuzz.sh symbols [SECONDS]       # symbol path, file.ptr, names, .pd_, PDB headers
#   scripts/fuzz.sh TARGET SECONDS -- ARGS  # more libFuzzer flags (-jobs=2, -seed=1, ...)
#
# SECONDS defaults to 600 (the 10-minute run). Environment:
#   FUZZ_SANITIZER  none (default) or address. dtx is safe Rust but for two small unsafe blocks
#                   on these paths (an Arc borrow in the VM, a prefetch hint in the reader), so
#                   AddressSanitizer finds little and costs much: with it a VM input took about
#                   3x the CPU. Panics, overflow checks and debug assertions are on either way.
#   FUZZ_NICE       the nice level (default 10): the machine is shared.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). A nightly toolchain is used when rustup has
# one; otherwise stable, with RUSTC_BOOTSTRAP=1 for the sanitizer flags. The corpus lives in
# fuzz/corpus/TARGET, crashes in fuzz/artifacts/TARGET (both ignored by git). The etl_reader
# corpus is seeded with the small real traces of ../shared/etl when it is there.
set -eu

target=${1:?usage: scripts/fuzz.sh vm|etl_reader|symbols [SECONDS] [-- libFuzzer args]}
shift
secs=600
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    secs=$1
    shift
fi
[ "${1:-}" = "--" ] && shift

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"

sanitizer=${FUZZ_SANITIZER:-none}
if rustup run nightly rustc --version >/dev/null 2>&1; then
    toolchain=+nightly
else
    toolchain=
    export RUSTC_BOOTSTRAP=1
fi

case $target in
vm)
    # the same flags as the first runs (docs/differences.md): programs from up to 1 KB of input
    set -- -max_len=1024 -len_control=0 "$@"
    ;;
etl_reader)
    mkdir -p corpus/etl_reader
    shared="$root/../shared/etl"
    if [ -d "$shared" ]; then
        # seeds: the real traces small enough to mutate quickly (one to a few buffers)
        for f in "$shared/perfview_SelfDescribingSingleEvent.etl" \
            "$shared/etlparser_lxcore_kernel.etl"; do
            [ -f "$f" ] && cp -f "$f" corpus/etl_reader/
        done
        if [ -f "$shared/perfview_primitive-types.etl.zip" ] && command -v unzip >/dev/null; then
            unzip -o -q -j "$shared/perfview_primitive-types.etl.zip" -d corpus/etl_reader
        fi
    else
        echo "fuzz.sh: ../shared/etl is absent: the etl_reader corpus starts empty" >&2
    fi
    set -- -max_len=65536 "$@"
    ;;
symbols)
    # seeds: one of each kind of text the target reads (a symbol path, both file.ptr forms, a
    # name) and an MSF 7.00 header, so that mutation starts inside each grammar
    mkdir -p corpus/symbols
    printf 'srv*C:\\sym*https://127.0.0.1/symbols;cache*D:\\c;E:\\local' >corpus/symbols/path
    printf 'PATH:\\\\share\\ntkrnlmp.pdb\\1\\ntkrnlmp.pdb' >corpus/symbols/ptr-path
    printf 'MSG:not here' >corpus/symbols/ptr-msg
    printf 'ntkrnlmp.pdb' >corpus/symbols/name
    printf 'Microsoft C/C++ MSF 7.00\r\n\032DS\0\0\0\0\020\0\0\1\0\0\0\010\0\0\0\024\0\0\0' >corpus/symbols/msf
    set -- -max_len=65536 "$@"
    ;;
*)
    echo "fuzz.sh: unknown target '$target' (vm, etl_reader, symbols)" >&2
    exit 2
    ;;
esac

# a build per sanitizer, so that switching does not rebuild every dependency
case $sanitizer in
none) tdir=target/nosan ;;
*) tdir=target ;;
esac
nice -n "${FUZZ_NICE:-10}" cargo $toolchain fuzz build -s "$sanitizer" --target-dir "$tdir" "$target"
echo "fuzz.sh: $(uptime)"
# -print_final_stats gives the totals; the last "Done N runs in S second(s)" is the figure
nice -n "${FUZZ_NICE:-10}" cargo $toolchain fuzz run -s "$sanitizer" --target-dir "$tdir" "$target" -- \
    -max_total_time="$secs" -print_final_stats=1 "$@"
echo "fuzz.sh: $(uptime)"
