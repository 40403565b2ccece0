#!/usr/bin/env bash
# Builds the pid provider's Windows test programs (tests/pid_windows/*.c) into DIR, for
# tests/it/pid/windows.rs under Wine (a test running under Wine cannot call the Linux compilers):
#   - every program with mingw gcc, -O0 and frame pointers (ustack() walks rbp), COFF symbols kept;
#   - unwind.exe with -O2 -fomit-frame-pointer (ustack() needs .pdata/.xdata unwinding);
#   - pidwin_pdb.exe: pidwin.c built by clang + lld with a PDB, stripped of its COFF symbols
#     (names come from pidwin_pdb.pdb only; its debug record names C:\build\pidwin_pdb.pdb), when
#     clang and lld are installed (else the PDB tests skip);
#   - shapes_pdb.exe: shapes.c built the same way, whose types the PDB types test reads;
#   - ringlib_pdb.dll: ringlib.c built the same way as a DLL, and rings.exe, built by gcc with
#     no PDB, importing it (its types come from the DLL's PDB).
#
#   scripts/pid-windows-fixtures.sh DIR
#
# Runs on Linux (Debian's cross compilers) and on Windows in Git Bash (the windows-live
# workflow: the runner's mingw-w64, whose gcc may be named plain `gcc`, and LLVM's clang).
# MINGW_CC names the gcc to use.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${1:?usage: pid-windows-fixtures.sh DIR}
mkdir -p "$DIR"
CC=${MINGW_CC:-}
if [ -z "$CC" ]; then
    if command -v x86_64-w64-mingw32-gcc >/dev/null; then
        CC=x86_64-w64-mingw32-gcc
    elif gcc -dumpmachine 2>/dev/null | grep -q '^x86_64-w64-mingw32'; then
        CC=gcc
    else
        echo "pid-windows-fixtures: no mingw-w64 gcc for x86_64 (x86_64-w64-mingw32-gcc, or MINGW_CC)" >&2
        exit 1
    fi
fi
for c in "$ROOT"/tests/pid_windows/*.c; do
    name=$(basename "$c" .c)
    case $name in
        *.dll) "$CC" -O0 -fno-omit-frame-pointer -shared -o "$DIR/$name" "$c" ;;
        unwind) "$CC" -O2 -fomit-frame-pointer -o "$DIR/$name.exe" "$c" ;;
        # built below, with clang, when it is here
        ringlib|rings) ;;
        *) "$CC" -O0 -g -fno-omit-frame-pointer -o "$DIR/$name.exe" "$c" ;;
    esac
done
if command -v clang >/dev/null && command -v ld.lld >/dev/null; then
    libgcc=$(dirname "$("$CC" -print-libgcc-file-name)")
    clang --target=x86_64-w64-mingw32 -O1 -g -gcodeview -fuse-ld=lld -L"$libgcc" \
        -Wl,--pdb="$DIR/pidwin_pdb.pdb" '-Wl,-Xlink=-pdbaltpath:C:\build\pidwin_pdb.pdb' -s \
        -o "$DIR/pidwin_pdb.exe" "$ROOT/tests/pid_windows/pidwin.c"
    # the PDB types test's program (tests/it/pid/windows.rs): its types come from its PDB
    clang --target=x86_64-w64-mingw32 -O1 -g -gcodeview -fuse-ld=lld -L"$libgcc" \
        -Wl,--pdb="$DIR/shapes_pdb.pdb" -o "$DIR/shapes_pdb.exe" "$ROOT/tests/pid_windows/shapes.c"
    # a DLL's types: ringlib_pdb.dll with its PDB, and rings.exe (no PDB) importing it
    clang --target=x86_64-w64-mingw32 -O1 -g -gcodeview -fuse-ld=lld -shared -L"$libgcc" \
        -Wl,--pdb="$DIR/ringlib_pdb.pdb" -Wl,--out-implib,"$DIR/libringlib_pdb.dll.a" \
        -o "$DIR/ringlib_pdb.dll" "$ROOT/tests/pid_windows/ringlib.c"
    "$CC" -O0 -g -o "$DIR/rings.exe" "$ROOT/tests/pid_windows/rings.c" "$DIR/libringlib_pdb.dll.a"
else
    echo "pid-windows-fixtures: clang/lld missing: no pidwin_pdb.exe (the PDB tests will skip)" >&2
fi
# a 32-bit program (runs under WOW64 on 64-bit Windows): pidwin.c built by mingw's i686
# compiler, for the tests that dtx refuses it clearly (MINGW_CC32 names the compiler)
CC32=${MINGW_CC32:-i686-w64-mingw32-gcc}
if command -v "$CC32" >/dev/null; then
    "$CC32" -O0 -g -o "$DIR/pidwin32.exe" "$ROOT/tests/pid_windows/pidwin.c"
else
    echo "pid-windows-fixtures: no $CC32: no pidwin32.exe (the WOW64 tests will skip)" >&2
fi
