#!/usr/bin/env bash
# Installs what the `metrics_*` tests need to scrape dtx with a real Prometheus, and prints the
# two paths they use on stdout, one a line:
#   PROMETHEUS=<path of the prometheus server>
#   PROMTOOL=<path of promtool>
# Both come from Debian's `prometheus` package (installed with apt-get when missing; needs
# root). A second run only checks that both are there. Exit status 2, with the reason on
# stderr, when the install is impossible (no network to Debian, not root): the tests then skip
# with that reason.
set -euo pipefail

fail() {
    echo "prometheus-test-env: $1" >&2
    exit 2
}

find_tools() {
    PROMETHEUS=$(command -v prometheus || true)
    PROMTOOL=$(command -v promtool || true)
}

find_tools
if [ -z "$PROMETHEUS" ] || [ -z "$PROMTOOL" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        fail "prometheus is missing; install it as root with apt-get install prometheus"
    fi
    export DEBIAN_FRONTEND=noninteractive
    {
        apt-get install -y --no-install-recommends prometheus ||
            { apt-get update && apt-get install -y --no-install-recommends prometheus; }
    } >&2 || fail "apt-get could not install prometheus"
    # the package starts a system service on :9090; the tests start their own on other ports
    if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
        systemctl stop prometheus >&2 || true
    fi
    find_tools
    [ -n "$PROMETHEUS" ] && [ -n "$PROMTOOL" ] || fail "the prometheus package installed no prometheus/promtool"
fi
echo "PROMETHEUS=$PROMETHEUS"
echo "PROMTOOL=$PROMTOOL"
