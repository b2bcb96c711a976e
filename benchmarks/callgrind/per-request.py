#!/usr/bin/env python3
"""Instructions per request under valgrind's callgrind, for the hop's four
servers side by side: bare libmicrohttpd (hello.c), the minimal hop
(minimal-hop.c, 1 and 2 hops), runloopd GET /api/version and runloopd
perform echo + waitUntilDone. Instruction counts are repeatable on a noisy
shared VM where wall-clock ratios are not.

    python3 benchmarks/callgrind/per-request.py BIN_DIR [--top N] [--out FILE] [--section FILE]

BIN_DIR holds `hello`, `minimal-hop` and `runloopd` (benchmarks/.build: run
`benchmarks/run.sh hop` once to build them; runloopd is taken from the
release bin path next to it). Each server runs under callgrind twice (400 and
2,000 requests on one keep-alive connection); the slope is instructions per
request with start-up and shutdown cancelled out, counted over every thread.
For runloopd the functions with the most *self* instructions per request
(large run minus small run, over the extra requests; `--top N`, default 15)
are listed, from callgrind_annotate. `--out` writes the tables as Markdown;
`--section` writes them as an rlbench report section (`benchmarks/run.sh
callgrind` does, so BENCHMARKS.md shows them). Swift release
binaries carry DWARF 5 that valgrind 3.19 cannot read: a copy with its debug
info stripped (symbols kept) is measured.
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchkit import free_port, stop  # noqa: E402 - benchmarks/ is on the path only now

SMALL, LARGE = 400, 2000


def wait_up(port, server, path):
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            # /readyz answers 503 until start() has finished (the store opened).
            if response.status == 200 or path != "/readyz":
                return conn
            conn.close()
            if time.monotonic() > deadline:
                raise SystemExit(f"server not ready under valgrind (port {port})")
            time.sleep(0.2)
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"server did not start under valgrind (port {port})")
            time.sleep(0.2)


def measure(argv_for_port, kind, count, workdir, tag, valgrind_flags=()):
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{tag}.{count}")
    # A runloopd with its default flags keeps its history store in the work folder.
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *valgrind_flags] + argv_for_port(port),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, XDG_STATE_HOME=workdir))
    conn = wait_up(port, server, "/readyz" if kind.startswith("runloopd") else "/")
    headers = {"Content-Type": "application/json"}
    if kind == "runloopd-perform":
        conn.request("POST", "/api/threads", body="{}", headers=headers)
        thread = json.loads(conn.getresponse().read())["id"]
        path, body = f"/api/threads/{thread}/perform", json.dumps(
            {"selector": "echo", "args": {"n": 1}, "waitUntilDone": True})
    elif kind == "post":
        path, body = "/api/threads/t1/perform", json.dumps({"selector": "echo", "args": {"n": 1}, "waitUntilDone": True})
    else:
        path, body = "/api/version", None
    for _ in range(count):
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    conn.close()
    stop(server, 120)
    for line in open(out):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]), out
    raise SystemExit("no totals in " + out)


def self_costs(path):
    """function -> self instructions, from callgrind_annotate (all threads)."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True).stdout
    costs = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line) or re.match(r"\s*([\d,]+)\s+(\S.*)$", line)
        if not m:
            continue
        name = m.group(2).strip()
        if name.startswith(("PROGRAM TOTALS", "file:function", "Ir")):
            continue
        name = re.sub(r"^.*?:", "", name, count=1) if ":" in name.split(" ")[0] else name
        # Keyed by the function alone: callgrind may name the object a symbol came
        # from differently in two runs, which would make a start-up cost look per-request.
        name = re.sub(r" \[[^]]*\]$", "", name)
        costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def demangled(name):
    """A Swift symbol as `swift demangle --simplified` prints it (else as given)."""
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    if not name.startswith(("$s", "_$s")) or not os.path.exists(swift):
        return name
    out = subprocess.run([swift, "demangle", "--simplified", "--compact", name], capture_output=True, text=True)
    return out.stdout.strip() or name


def main():
    args = sys.argv[1:]
    if not args or not shutil.which("valgrind"):
        raise SystemExit(__doc__)
    bindir = args[0]
    top = int(args[args.index("--top") + 1]) if "--top" in args else 15
    report = args[args.index("--out") + 1] if "--out" in args else None
    section = args[args.index("--section") + 1] if "--section" in args else None
    started = time.monotonic()
    public = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Public")
    rows, tops = [], []
    with tempfile.TemporaryDirectory() as workdir:
        runloopd = os.path.join(workdir, "runloopd")
        release = subprocess.run(["find", bindir, "-name", "runloopd", "-type", "f", "-path", "*release*"],
                                 capture_output=True, text=True).stdout.split()
        shutil.copy(release[0] if release else os.path.join(bindir, "runloopd"), runloopd)
        subprocess.run(["strip", "-g", runloopd], check=True)
        hello = os.path.join(bindir, "hello")
        minimal = os.path.join(bindir, "minimal-hop")
        version_bytes = 0
        servers = [
            ("bare libmicrohttpd (hello.c), GET", lambda p: [hello, str(p), "1", "120"], "get"),
            ("minimal hop (1 loop), GET", lambda p: [minimal, str(p), "1", "120"], "get"),
            ("runloopd GET /api/version (--log-level error --no-store)",
             lambda p: [runloopd, "--port", str(p), "--log-level", "error", "--no-store", "--public-dir", public],
             "runloopd-get"),
            ("runloopd GET /api/version (default flags)",
             lambda p: [runloopd, "--port", str(p), "--public-dir", public], "runloopd-get"),
            ("minimal hop (2 loops), POST", lambda p: [minimal, str(p), "2", "200"], "post"),
            ("runloopd POST perform echo, waitUntilDone (--log-level error --no-store)",
             lambda p: [runloopd, "--port", str(p), "--log-level", "error", "--no-store", "--public-dir", public],
             "runloopd-perform"),
        ]
        for index, (name, argv, kind) in enumerate(servers):
            small, small_out = measure(argv, kind, SMALL, workdir, f"s{index}")
            large, large_out = measure(argv, kind, LARGE, workdir, f"l{index}")
            per = (large - small) / (LARGE - SMALL)
            rows.append((name, per))
            print(f"{per:12,.0f}  {name}", flush=True)
            if kind.startswith("runloopd") and "default" not in name:
                a, b = self_costs(small_out), self_costs(large_out)
                delta = sorted(((b.get(k, 0) - a.get(k, 0)) / (LARGE - SMALL), k) for k in b)
                tops.append((name, [d for d in reversed(delta[-top:])]))
    lines = ["| server | instructions per request | vs minimal hop |", "|---|---|---|"]
    base = {r[0]: r[1] for r in rows}
    one = base.get("minimal hop (1 loop), GET")
    two = base.get("minimal hop (2 loops), POST")
    for name, per in rows:
        ref = two if "POST" in name else one
        lines.append(f"| {name} | {per:,.0f} | {per / ref:.2f}× |" if ref else f"| {name} | {per:,.0f} | |")
    for name, items in tops:
        lines += ["", f"Top functions by self instructions per request, {name}:", "",
                  "| instructions / request | function |", "|---|---|"]
        for per, fn in items:
            lines.append(f"| {per:,.0f} | `{demangled(fn)[:110]}` |")
    text = "\n".join(lines) + "\n"
    print(text)
    if report:
        with open(report, "w") as f:
            f.write(text)
    if section:
        write_section(section, rows, text, time.monotonic() - started)


def write_section(path, rows, tables, seconds):
    """The tables as an rlbench report section (`rlbench report` reads it)."""
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    environment = f"{os.cpu_count()} cores ({cpu}), Linux {os.uname().release}, load {load}, valgrind callgrind"
    base = {name: per for name, per in rows}
    figures = []
    for name, per in rows:
        if not name.startswith("runloopd"):
            continue
        ref_name = "minimal hop (2 loops), POST" if "POST" in name else "minimal hop (1 loop), GET"
        ref = base.get(ref_name)
        if not ref:
            continue
        figures.append({
            "name": f"instructions per request: {name}", "value": f"{per:,.0f}", "baseline": f"{ref:,.0f} ({ref_name})",
            "ratio": f"{per / ref:.2f}×", "goal": "none (where the hop's cost is)", "pass": None, "steal": 0.0,
            "clean": True})
    details = (
        "`python3 benchmarks/callgrind/per-request.py benchmarks/.build` (valgrind's callgrind counts instructions, "
        "not seconds, so the figures repeat on a noisy VM): each server runs twice, for 400 and for 2,000 requests on "
        "one keep-alive connection, and the difference over the 1,600 extra requests is the count per request, every "
        "thread included, start-up and shutdown cancelled out. runloopd runs with `--log-level error --no-store` "
        "except in the default-flags row (its access log on, the store in a temporary folder).\n\n" + tables)
    with open(path, "w") as f:
        json.dump({"id": "callgrind", "title": "Instructions per request (callgrind)", "environment": environment,
                   "command": "python3 benchmarks/callgrind/per-request.py", "seconds": seconds, "figures": figures,
                   "details": details, "notes": []}, f, indent=1)


if __name__ == "__main__":
    main()
