#!/usr/bin/env python3
"""Where the history store's cost goes, thread by thread (issue 26):
perform echo + waitUntilDone under wrk -t1 -c16 against runloopd with its
SQLite store and with --no-store, several times, sides alternating. Per
request and per thread (by name): CPU (user + system, from
/proc/PID/task/*/stat), voluntary and involuntary context switches (from
/proc/PID/task/*/status); and the load generator's CPU per request. These
counts do not depend on the machine's load the way req/s does.

    python3 benchmarks/store-threads.py RUNLOOPD [--seconds 5] [--rounds 2]
        [--a "FLAGS"] [--b "FLAGS"] [--versus OTHER_RUNLOOPD]

A: RUNLOOPD with its store (plus --a flags); B: RUNLOOPD --no-store (or
OTHER_RUNLOOPD with its store, plus --b flags).
"""

import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time

from benchkit import free_port, http, write_perform_script

TICK = os.sysconf("SC_CLK_TCK")


def start(binary, flags, state):
    port = free_port()
    env = dict(os.environ, XDG_STATE_HOME=state)
    public = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Public")
    p = subprocess.Popen([binary, "--port", str(port), "--log-level", "error", "--public-dir", public] + flags,
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while True:
        try:
            http(port, "GET", "/api/version")
            break
        except Exception:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    created = http(port, "POST", "/api/threads", '{"name":"bench-store"}')
    tid = created.get("id") or created.get("thread", {}).get("id")
    return p, port, f"/api/threads/{tid}/perform"


def threads(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            status = open(f"/proc/{pid}/task/{tid}/status").read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        sys_cpu = int(fields[12]) / TICK
        faults = int(fields[7])
        try:
            io = dict(line.split(": ") for line in open(f"/proc/{pid}/task/{tid}/io").read().split("\n") if line)
        except OSError:
            io = {}
        io = tuple(int(io.get(k, 0)) for k in ("syscr", "syscw", "rchar", "wchar"))
        vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        nvol = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        out[tid] = (name, cpu, vol, nvol, sys_cpu, faults) + io
    return out


def group(name):
    # Worker and HTTP threads by kind, not by number.
    return re.sub(r"\d+$", "#", name)


def measure(proc, port, path, seconds, script):
    before = threads(proc.pid)
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["wrk", "-t1", "-c16", f"-d{seconds}s", "-s", script, f"http://127.0.0.1:{port}{path}"],
                         capture_output=True, text=True).stdout
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = threads(proc.pid)
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    rows = {}
    for tid, now in after.items():
        b = before.get(tid, (now[0],) + (0,) * 9)
        r = rows.setdefault(group(now[0]), [0.0, 0, 0, 0.0, 0, 0, 0, 0, 0])
        for i in range(1, 10):
            r[i - 1] += now[i] - b[i]
    wrk_cpu = (child1.ru_utime + child1.ru_stime) - (child0.ru_utime + child0.ru_stime)
    return requests, rps, rows, wrk_cpu


def main():
    args = sys.argv[1:]
    if not args:
        raise SystemExit(__doc__)
    binary = args[0]

    def opt(name, default):
        return args[args.index(name) + 1] if name in args else default

    seconds = int(opt("--seconds", "5"))
    rounds = int(opt("--rounds", "2"))
    versus = opt("--versus", None)
    a_flags = shlex.split(opt("--a", ""))
    b_flags = shlex.split(opt("--b", ""))
    script = write_perform_script(os.path.join(tempfile.gettempdir(), "store-threads.lua"))
    with tempfile.TemporaryDirectory() as sa, tempfile.TemporaryDirectory() as sb:
        sides = [("A store", start(binary, a_flags, sa)),
                 ("B " + ("versus" if versus else "--no-store"),
                  start(versus, b_flags, sb) if versus else start(binary, ["--no-store"] + b_flags, sb))]
        try:
            for _, (p, port, path) in sides:
                subprocess.run(["wrk", "-t1", "-c16", "-d2s", "-s", script, f"http://127.0.0.1:{port}{path}"],
                               capture_output=True)
            for rnd in range(rounds):
                order = sides if rnd % 2 == 0 else list(reversed(sides))
                for label, (p, port, path) in order:
                    load = open("/proc/loadavg").read().split()[0]
                    n, rps, rows, wrk_cpu = measure(p, port, path, seconds, script)
                    total = sum(r[0] for r in rows.values())
                    print(f"round {rnd + 1} {label}: {n} requests, {rps:.0f} req/s, load {load}; "
                          f"process {total / n * 1e6:.1f} us/req, wrk {wrk_cpu / n * 1e6:.1f} us/req")
                    for g, r in sorted(rows.items(), key=lambda kv: -kv[1][0]):
                        cpu, vol, nvol, sys_cpu, faults, syscr, syscw, rchar, wchar = r
                        if cpu == 0 and vol == 0 and nvol == 0:
                            continue
                        io = (f"  reads {syscr / n:.3f} ({rchar / n:.0f} B)  writes {syscw / n:.3f} ({wchar / n:.0f} B)"
                              if g == "rl-store" else "")
                        print(f"    {g:24s} cpu {cpu / n * 1e6:6.2f} us/req (sys {sys_cpu / n * 1e6:5.2f})  "
                              f"vcsw {vol / n:7.4f}/req  ivcsw {nvol / n:7.4f}/req  faults {faults / n:7.4f}/req{io}")
                    sys.stdout.flush()
            for label, (p, port, path) in sides:
                try:
                    st = http(port, "GET", "/api/store")
                    print(label, "store:", {k: st.get(k) for k in ("written", "dropped", "batches", "pruned")})
                except Exception:
                    pass
        finally:
            for _, (p, _, _) in sides:
                p.terminate()
                p.wait()


if __name__ == "__main__":
    main()
