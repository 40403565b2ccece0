#!/usr/bin/env python3
"""What scraping costs the event path (issue 39, docs/metrics.md): events/s of `dtx -x metrics`
over a trace while a client scrapes /metrics every 100 ms, against the same run not scraped,
interleaved run by run in one sitting. A run's time is from dtx's start to its line saying the
trace has ended; its events are what it served as dtx_metrics_events_total at the end.

    scripts/bench-metrics.py [TRACE] [RUNS]

TRACE defaults to ../shared/etl/randomascii_slow_ppt_trace.etl.zip, RUNS to 15 per mode.
Prints both rates, their ratio and the load average; build dtx first (cargo build --release).
"""
import os
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTX = os.path.join(ROOT, "target", "release", "dtx")
TRACE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    ROOT, "..", "shared", "etl", "randomascii_slow_ppt_trace.etl.zip")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
PROG = ("sched:::on-cpu { @oncpu[execname] = count(); @q[cpu] = quantize(pid); "
        "@t[tid] = sum(cpu); }")


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def run(scraped):
    p = subprocess.Popen([DTX, "-q", "-x", "metrics=127.0.0.1:0", "-E", TRACE, "-n", PROG],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    start = time.perf_counter()
    url = None
    stop = threading.Event()
    scrapes = [0]

    def loop():
        while not stop.is_set():
            try:
                scrape(url)
                scrapes[0] += 1
            except OSError:
                pass
            stop.wait(0.1)

    t = None
    for line in p.stderr:
        if line.startswith("dtx: serving metrics on "):
            url = line.split()[-1]
            if scraped:
                t = threading.Thread(target=loop)
                t.start()
        if "the trace has ended" in line:
            break
    took = time.perf_counter() - start
    stop.set()
    if t:
        t.join()
    events = 0
    for l in scrape(url).splitlines():
        if l.startswith("dtx_metrics_events_total "):
            events = int(l.split()[1])
    p.kill()
    p.wait()
    return events, took, scrapes[0]


def main():
    if not os.path.exists(TRACE):
        sys.exit(f"bench-metrics: no trace at {TRACE}")
    totals = {False: [0, 0.0, 0], True: [0, 0.0, 0]}
    for _ in range(RUNS):
        for scraped in (False, True):
            e, s, n = run(scraped)
            totals[scraped][0] += e
            totals[scraped][1] += s
            totals[scraped][2] += n
    plain = totals[False][0] / totals[False][1]
    scraped = totals[True][0] / totals[True][1]
    load = os.getloadavg()
    print(f"trace {os.path.basename(TRACE)}, {RUNS} runs per mode, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"not scraped:          {plain / 1e6:8.3f} M events/s")
    print(f"scraped every 100 ms: {scraped / 1e6:8.3f} M events/s "
          f"({totals[True][2]} scrapes)")
    print(f"ratio scraped/not:    {scraped / plain:8.3f}")


main()
