#!/usr/bin/env bash
# Installs what the `dotnet_pid_*` tests need to run a real .NET program on Linux, and prints the
# two paths they use on stdout, one a line:
#   DOTNET=<path of the dotnet host>
#   MCS=<path of the C# compiler>
# The .NET Core 3.1 runtime comes from PyPI's `dotnetcore2` wheel (`dotnetcore2/bin/dotnet`,
# unpacked under ~/.cache/dtx/dotnetcore2), the C# compiler from Debian's `mono-mcs` (installed
# with apt-get when missing; needs root). Cached: a second run only checks that both are there.
# Exit status 2, with the reason on stderr, when an install is impossible (no network to PyPI or
# Debian, not root): the tests then skip with that reason.
set -euo pipefail
CACHE=${DTX_DOTNET_CACHE:-$HOME/.cache/dtx/dotnetcore2}
DOTNET=$CACHE/dotnetcore2/bin/dotnet

fail() {
    echo "dotnet-test-env: $1" >&2
    exit 2
}

# 1. the runtime: the wheel is a zip; its bin/ holds the host, the shared framework and hostfxr
if [ ! -x "$DOTNET" ]; then
    mkdir -p "$CACHE"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    py=$(command -v python3 || command -v python || true)
    [ -n "$py" ] || fail "python3 is needed to fetch the dotnetcore2 wheel"
    "$py" -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux1_x86_64 --dest "$tmp" dotnetcore2 >&2 ||
        fail "pip could not download dotnetcore2 from PyPI"
    whl=$(ls "$tmp"/dotnetcore2-*.whl 2>/dev/null | head -n1)
    [ -n "$whl" ] || fail "no dotnetcore2 wheel was downloaded"
    rm -rf "$CACHE.new" && mkdir -p "$CACHE.new"
    "$py" -m zipfile -e "$whl" "$CACHE.new" || fail "could not unpack $whl"
    # zipfile does not keep the execute bit
    chmod +x "$CACHE.new/dotnetcore2/bin/dotnet"
    rm -rf "$CACHE" && mv "$CACHE.new" "$CACHE"
fi
[ -x "$DOTNET" ] || fail "no dotnet host in $CACHE"

# 2. the compiler
MCS=$(command -v mcs || true)
if [ -z "$MCS" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        fail "mono-mcs is missing; install it as root with apt-get install mono-mcs"
    fi
    export DEBIAN_FRONTEND=noninteractive
    {
        apt-get install -y --no-install-recommends mono-mcs ||
            { apt-get update && apt-get install -y --no-install-recommends mono-mcs; }
    } >&2 || fail "apt-get could not install mono-mcs"
    MCS=$(command -v mcs || true)
    [ -n "$MCS" ] || fail "mono-mcs installed no mcs"
fi
echo "DOTNET=$DOTNET"
echo "MCS=$MCS"
