#!/usr/bin/env bash
# What the release workflow (.github/workflows/release.yml) checks of the files it ships, in one
# script so that it runs the same in the build jobs, in the verify jobs on fresh runners, and
# here (scripts/windows-check.sh checks the mingw cross build with `pe`):
#
#   scripts/release-check.sh pe EXE|DLL...
#       the imports of each PE image: no C runtime a clean Windows lacks (VCRUNTIME*.dll,
#       MSVCP*.dll, ucrtbase.dll, api-ms-win-crt-*.dll; mingw's libgcc_s*, libwinpthread*,
#       libstdc++*); and for dtx.exe its exports: every `dtx_check_*` function of
#       src/cli/selfcheck/workload.rs (build.rs exports them), which name the self-check's
#       workload where the image has no symbols and no PDB is beside it. Read with MSVC's
#       dumpbin (found through vswhere) where there is one, else objdump (mingw's or binutils').
#   scripts/release-check.sh elf BINARY
#       the shared libraries it needs (glibc's and libgcc_s alone) and the newest glibc symbol
#       version it asks for, which must be at most DTX_MAX_GLIBC (default 2.35, Ubuntu 22.04).
#   scripts/release-check.sh run DTX OUT_DIR
#       the program as a user runs it: `--version`, a one-liner over the built-in demo trace
#       (`-E demo`), and `--check -x oformat=json` into OUT_DIR/check.json (its stderr beside
#       it), which must exit 0: run it elevated (an Administrator prompt; root on Linux).
#
# Exit status 0 when everything held, 1 otherwise; every finding is said on stderr.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
failed=0
say() { echo "release-check: $*" >&2; }
fail() {
    say "FAIL: $*"
    failed=1
}

# the names build.rs exports (the same reading of workload.rs)
check_functions() {
    sed -n 's/^[[:space:]]*pub extern "C" fn \(dtx_check_[A-Za-z0-9_]*\)(.*/\1/p' \
        "$ROOT/src/cli/selfcheck/workload.rs"
}

dumpbin_path() {
    local vswhere found
    if [ -n "${DTX_DUMPBIN:-}" ]; then
        echo "$DTX_DUMPBIN"
        return
    fi
    command -v dumpbin 2>/dev/null && return
    # Visual Studio's own locator, on the PATH of the hosted runners, else where its installer
    # puts it (Git Bash paths)
    vswhere=$(command -v vswhere 2>/dev/null || echo "/c/Program Files (x86)/Microsoft Visual Studio/Installer/vswhere.exe")
    [ -f "$vswhere" ] || return 1
    found=$("$vswhere" -latest -products '*' -find 'VC\Tools\MSVC\**\bin\Hostx64\x64\dumpbin.exe' 2>/dev/null |
        tr -d '\r' | head -1)
    [ -n "$found" ] || return 1
    if command -v cygpath >/dev/null; then cygpath -u "$found"; else echo "$found"; fi
}

objdump_path() {
    local o
    for o in x86_64-w64-mingw32-objdump objdump llvm-objdump; do
        command -v "$o" 2>/dev/null && return
    done
    return 1
}

# imports and exports of one PE image, as "import NAME" and "export NAME" lines
pe_table() {
    local file=$1 tool
    if tool=$(dumpbin_path) && [ -n "$tool" ]; then
        "$tool" -nologo -imports "$file" | tr -d '\r' |
            awk 'tolower($0) ~ /^ +[^ ]+\.dll$/ { print "import " $1 }'
        "$tool" -nologo -exports "$file" | tr -d '\r' |
            awk '/ordinal +hint +RVA +name/ { t = 1; next } t && NF >= 4 && $1 ~ /^[0-9]+$/ { print "export " $4 } t && /Summary/ { t = 0 }'
    elif tool=$(objdump_path); then
        "$tool" -p "$file" | tr -d '\r' | awk '
            /DLL Name:/ { print "import " $3 }
            /\[Ordinal\/Name Pointer\] Table/ { t = 1; next }
            t && /^\t\[ *[0-9]+\]/ { print "export " $NF; next }
            t { t = 0 }'
    else
        say "neither dumpbin (Visual Studio) nor objdump is here to read $file"
        return 1
    fi
}

pe() {
    local file table imports bad name
    [ $# -gt 0 ] || { say "usage: release-check.sh pe FILE..."; exit 2; }
    for file in "$@"; do
        if ! table=$(pe_table "$file") || [ -z "$table" ]; then
            fail "$file: its import table could not be read"
            continue
        fi
        imports=$(sed -n 's/^import //p' <<<"$table" | sort -uf | tr '\n' ' ')
        say "$file imports: $imports"
        bad=$(sed -n 's/^import //p' <<<"$table" |
            grep -iE '^(vcruntime|msvcp|ucrtbase|api-ms-win-crt-|libgcc_s|libwinpthread|libstdc\+\+|concrt|vcomp)' | sort -uf | tr '\n' ' ')
        [ -z "$bad" ] || fail "$file needs a C runtime a clean Windows lacks: $bad"
        case $(basename "$file" | tr '[:upper:]' '[:lower:]') in
        dtx.exe)
            for name in $(check_functions); do
                grep -qx "export $name" <<<"$table" || fail "$file does not export $name"
            done
            say "$file exports: $(sed -n 's/^export //p' <<<"$table" | tr '\n' ' ')"
            ;;
        esac
    done
}

elf() {
    local bin=${1:?usage: release-check.sh elf BINARY} max=${DTX_MAX_GLIBC:-2.35} needed newest
    needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    say "$bin needs: $(tr '\n' ' ' <<<"$needed")"
    for lib in $needed; do
        case $lib in
        libc.so.6 | libm.so.6 | libgcc_s.so.1 | ld-linux-x86-64.so.2 | libpthread.so.0 | libdl.so.2 | librt.so.1) ;;
        *) fail "$bin needs $lib, which a user's machine may lack" ;;
        esac
    done
    newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
    say "$bin asks for glibc $newest at most"
    [ "$(printf '%s\n%s\n' "$newest" "$max" | sort -V | tail -1)" = "$max" ] ||
        fail "$bin needs glibc $newest; the oldest supported system (DTX_MAX_GLIBC) has $max"
}

run() {
    local dtx=${1:?usage: release-check.sh run DTX OUT_DIR} out=${2:?usage: release-check.sh run DTX OUT_DIR}
    mkdir -p "$out"
    if v=$("$dtx" --version 2>&1); then say "--version: $v"; else fail "--version: $v"; fi
    # the README's first line over the trace built into dtx
    if demo=$("$dtx" -q -E demo -n 'sched:::on-cpu { @[execname] = count(); } END { trunc(@, 3); }' 2>&1) &&
        grep -Eq '[[:space:]][1-9][0-9]*[[:space:]]*$' <<<"$demo"; then
        say "-E demo: $(tr -s ' \n' ' ' <<<"$demo")"
    else
        fail "-E demo one-liner: $demo"
    fi
    "$dtx" --check -x oformat=json >"$out/check.json" 2>"$out/check.stderr"
    local check=$?
    say "--check -x oformat=json exited with $check: $(grep -o '"verdict": "[^"]*"' "$out/check.json")"
    if [ "$check" -ne 0 ]; then
        fail "--check must pass on a clean machine, elevated; what did not: $(tr -d '\n' <"$out/check.json" | grep -oE '\{[^{}]*"result": "(fail|skip)"[^{}]*\}' | head -c 3000)"
    fi
}

case ${1:-} in
pe | elf | run)
    what=$1
    shift
    "$what" "$@"
    ;;
*)
    say "usage: release-check.sh pe FILE... | elf BINARY | run DTX OUT_DIR"
    exit 2
    ;;
esac
[ "$failed" -eq 0 ] && say "$what: every check held"
exit "$failed"
