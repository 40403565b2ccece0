#!/usr/bin/env bash
# The pid provider's Windows debugger loop, built for x86_64-pc-windows-gnu and tested under Wine.
#
#   scripts/pid-windows-check.sh [build|test|bench|all]    (default: all = build + test)
#
# Needs gcc-mingw-w64-x86-64-win32 and wine64, and a Rust for x86_64-pc-windows-gnu: rustup's
# stable toolchain with that target installed (`rustup target add x86_64-pc-windows-gnu`), used
# when present; otherwise Debian's rustc-web/cargo-web/rust-web-src with -Zbuild-std (called as
# /usr/bin/cargo with RUSTC=/usr/bin/rustc; it must be at least the crate's dependencies'
# minimum, 1.88: Debian 12's 1.85 is too old for ratatui 0.30). Uses its own Wine prefix and target dir
# (WINEPREFIX, CARGO_TARGET_DIR override them). The mingw test programs (tests/pid_windows/*.c)
# are compiled here, and their directory handed to the tests in DTX_PID_WIN_FIXTURES, since a
# test running under Wine cannot call the Linux compiler.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=x86_64-pc-windows-gnu
WHAT=${1:-all}

export WINEPREFIX=${WINEPREFIX:-/tmp/wine-dtx-pid}
export WINEDEBUG=${WINEDEBUG:--all}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target-wine}
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=/usr/lib/wine/wine64
if command -v rustup >/dev/null && rustup target list --installed --toolchain stable 2>/dev/null | grep -qx "$TARGET"; then
    CARGO=(nice -n 10 cargo +stable)
    BUILD_STD=(--target "$TARGET")
else
    export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
    CARGO=(nice -n 10 /usr/bin/cargo)
    BUILD_STD=(-Zbuild-std=std,panic_abort --target "$TARGET")
fi
FIXTURES=$CARGO_TARGET_DIR/pid-fixtures

for tool in x86_64-w64-mingw32-gcc /usr/lib/wine/wine64; do
    command -v "$tool" >/dev/null || { echo "pid-windows-check: $tool is missing" >&2; exit 2; }
done

prefix() {
    if [ ! -f "$WINEPREFIX/system.reg" ]; then
        /usr/lib/wine/wine64 cmd /c ver >/dev/null 2>&1 || true
    fi
    local dll=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
    if [ ! -f "$dll" ]; then
        x86_64-w64-mingw32-gcc -O2 -shared -o "$dll" \
            "$ROOT/scripts/wine/prng.c" "$ROOT/scripts/wine/prng.def" -ladvapi32
    fi
}

fixtures() {
    "$ROOT/scripts/pid-windows-fixtures.sh" "$FIXTURES"
}

build() {
    prefix
    fixtures
    (cd "$ROOT" && "${CARGO[@]}" build --release "${BUILD_STD[@]}" --bin dtx)
}

# the fixtures' folder as the Windows side sees it (Wine maps Z: to /)
win_path() { printf 'Z:%s' "$1" | tr / '\\'; }

run_tests() {
    DTX_PID_WIN_FIXTURES=$(win_path "$FIXTURES")
    export DTX_PID_WIN_FIXTURES
    (cd "$ROOT" && "${CARGO[@]}" test --release "${BUILD_STD[@]}" --test it pid:: -- --test-threads=1)
}

bench() {
    DTX_PID_WIN_FIXTURES=$(win_path "$FIXTURES")
    export DTX_PID_WIN_FIXTURES
    "$ROOT/scripts/pid-windows-bench.sh"
}

case $WHAT in
    build) build ;;
    test) build; run_tests ;;
    bench) build; bench ;;
    all) build; run_tests ;;
    *) echo "usage: $0 [build|test|bench|all]" >&2; exit 2 ;;
esac
