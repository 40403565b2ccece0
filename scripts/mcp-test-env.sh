#!/usr/bin/env bash
# Installs the MCP client the `mcp_*` tests drive dtx --mcp with: Python's MCP SDK (PyPI `mcp`),
# pinned with hashes in scripts/mcp-client-requirements.txt, into a cached venv under
# ~/.cache/dtx/mcp-venv, and prints its Python on stdout:
#   PYTHON=<path of the venv's python>
# Cached: a second run only checks that the SDK imports. Exit status 2, with the reason on
# stderr, when the install is impossible (no python3 with venv, no network to PyPI, wheels that
# do not fit this Python): the tests then skip with that reason.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REQ=$HERE/mcp-client-requirements.txt
VENV=${DTX_MCP_VENV:-$HOME/.cache/dtx/mcp-venv}
STAMP=$VENV/.requirements-sha256

fail() {
    echo "mcp-test-env: $1" >&2
    exit 2
}

want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ] ||
    ! "$VENV/bin/python" -c 'import mcp' 2>/dev/null; then
    py=$(command -v python3 || true)
    [ -n "$py" ] || fail "python3 is needed for the MCP client"
    rm -rf "$VENV.new"
    "$py" -m venv "$VENV.new" >&2 || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$VENV.new/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: --require-hashes -r "$REQ" >&2 ||
        fail "pip could not install the pinned mcp SDK from PyPI (no network, or no wheels for $("$py" -V 2>&1))"
    "$VENV.new/bin/python" -c 'import mcp' >&2 || fail "the mcp SDK does not import"
    echo "$want" >"$VENV.new/.requirements-sha256"
    rm -rf "$VENV" && mv "$VENV.new" "$VENV"
fi
echo "PYTHON=$VENV/bin/python"
