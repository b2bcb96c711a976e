#!/usr/bin/env python3
"""Two runloopd builds under the same wrk load, in paired rounds (A B, then
B A, ...): GET /api/version requests/s and p50 of the new build against the
old, round by round, and their medians. On a shared VM a round's load hits
both sides alike, so the paired ratio says more than two separate
`rlbench hop` runs. With several HTTP threads each round also prints the
share of the HTTP threads' CPU the busier one had (libmicrohttpd's pool
hands a burst of new connections to whichever thread wakes first: 100 %
means one thread served every connection of that round).

    python3 benchmarks/hop-versus.py OLD_RUNLOOPD NEW_RUNLOOPD [--rounds 8] [--seconds 2]
        [--connections 16] [--perform] [runloopd flags, e.g. --http-threads 2]

--perform measures rlbench hop's second case instead of GET /api/version:
POST /api/threads/{id}/perform echo with waitUntilDone (two hops), each side
on a thread of its own.
"""

import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from benchkit import free_port, http, write_perform_script


def start(binary, flags):
    port = free_port()
    server = subprocess.Popen([binary, "--port", str(port), "--log-level", "error", "--no-store"] + flags,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return server, port
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"{binary} did not start")
            time.sleep(0.05)


def http_cpu(pid):
    """Run time (ns) of each libmicrohttpd thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            if open(f"/proc/{pid}/task/{tid}/comm").read().startswith("MHD"):
                out[tid] = int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except OSError:
            pass
    return out


def microseconds(text):
    value, unit = re.match(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 1, "ms": 1000, "s": 1e6, "m": 6e7}[unit]


def wrk(server, port, seconds, connections, target=("/api/version", None)):
    path, script = target
    before = http_cpu(server.pid)
    text = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"] + (["-s", script] if script else [])
        + [f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True).stdout
    after = http_cpu(server.pid)
    spent = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
    rps, p50 = re.search(r"Requests/sec:\s+([\d.]+)", text), re.search(r"^\s*50%\s+(\S+)", text, re.M)
    if not rps or not p50:
        raise SystemExit("wrk gave no figures:\n" + text)
    return float(rps.group(1)), microseconds(p50.group(1)), spent[0] / max(1, sum(spent))


def main():
    args = sys.argv[1:]
    settings = {"--rounds": 8, "--seconds": 2, "--connections": 16}
    for key in settings:
        if key in args:
            index = args.index(key)
            settings[key] = int(args[index + 1])
            del args[index:index + 2]
    perform = "--perform" in args
    if perform:
        args.remove("--perform")
    if len(args) < 2:
        raise SystemExit(__doc__)
    old, new, flags = args[0], args[1], args[2:]
    rounds, seconds, connections = settings["--rounds"], settings["--seconds"], settings["--connections"]
    sides = {"old": start(old, flags), "new": start(new, flags)}
    script = None
    try:
        targets = {side: ("/api/version", None) for side in sides}
        if perform:  # each side performs echo on a thread of its own
            script = write_perform_script(os.path.join(tempfile.gettempdir(), f"hop-versus-{os.getpid()}.lua"))
            for side, (_, port) in sides.items():
                thread = http(port, "POST", "/api/threads", '{"name":"versus"}')["id"]
                targets[side] = (f"/api/threads/{thread}/perform", script)
        for side, (server, port) in sides.items():
            wrk(server, port, 1, connections, targets[side])  # warm-up
        throughput, latency = [], []
        for index in range(rounds):
            order = ["old", "new"] if index % 2 == 0 else ["new", "old"]
            result = {side: wrk(*sides[side], seconds, connections, targets[side]) for side in order}
            throughput.append(result["new"][0] / result["old"][0])
            latency.append(result["new"][1] / result["old"][1])
            o, n = result["old"], result["new"]
            print(f"round {index + 1}: old {o[0]:8.0f} req/s p50 {o[1]:6.0f} µs | new {n[0]:8.0f} req/s "
                  f"p50 {n[1]:6.0f} µs | busier HTTP thread {o[2] * 100:.0f} % / {n[2] * 100:.0f} % | "
                  f"new/old req/s {throughput[-1]:.3f}, p50 {latency[-1]:.3f}", flush=True)
        print(f"{'perform echo' if perform else 'GET /api/version'}, median new/old: req/s {statistics.median(throughput):.3f}, p50 {statistics.median(latency):.3f} "
              f"(load {' '.join(open('/proc/loadavg').read().split()[:3])})")
    finally:
        for server, _ in sides.values():
            server.terminate()
            server.wait()
        if script:
            os.unlink(script)


if __name__ == "__main__":
    main()
