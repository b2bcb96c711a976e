#!/usr/bin/env python3
"""Where a GET /api/version's work happens, thread by thread, in counts that do
not depend on the machine's load: compares two runloopd builds (e.g. before
and after a change of the request path).

    python3 benchmarks/callgrind/threads.py NEW_RUNLOOPD [OLD_RUNLOOPD] [--http-threads N]

For each build, with `--log-level error --no-store` and N keep-alive
connections taken in turn (one per HTTP thread):

- callgrind with `--separate-threads=yes`, 400 and 2,000 requests: per thread,
  the instructions, `pthread_mutex_lock` calls, mallocs and retains per request
  (the difference over the 1,600 extra requests);
- natively, 3,000 requests: per thread, the voluntary context switches per
  request (`/proc/PID/task/*/status`; involuntary ones count other processes'
  load and are printed apart) and, with strace, the system calls per request
  (`strace -c -f`, all threads).

A thread is named by what it runs: `http` (libmicrohttpd's), `control` (the
control loop), else its number.
"""

import collections
import glob
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchkit import free_port, stop  # noqa: E402 - benchmarks/ is on the path only now

SMALL, LARGE, NATIVE = 400, 2000, 3000
COUNTED = ("pthread_mutex_lock", "malloc", "swift_retain", "swift_release", "CFRunLoopWakeUp")


def start(argv, port, deadline=300):
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + deadline
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            response.read()
            conn.close()
            if response.status == 200:
                return server
        except OSError:
            pass
        if time.monotonic() > end or server.poll() is not None:
            raise SystemExit("runloopd did not start: " + " ".join(argv))
        time.sleep(0.2)


def requests(port, count, connections):
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120) for _ in range(connections)]
    for index in range(count):
        conn = conns[index % connections]
        conn.request("GET", "/api/version")
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    for conn in conns:
        conn.close()


def flags(port, http_threads):
    return ["--port", str(port), "--log-level", "error", "--no-store", "--http-threads", str(http_threads)]


def callgrind(binary, count, http_threads, workdir):
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{count}")
    server = start(
        ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--compress-strings=no", "--compress-pos=no",
         f"--callgrind-out-file={out}", binary] + flags(port, http_threads), port)
    requests(port, count, http_threads)
    stop(server, 300)
    return {path.rsplit("-", 1)[1]: read(path) for path in glob.glob(out + "-*")}


def read(path):
    """(total instructions, calls by callee, self instructions by function) of one thread's file."""
    total, calls, own = 0, collections.Counter(), collections.Counter()
    function = callee = None
    after_call = False
    for line in open(path, errors="replace"):
        if line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
        elif line.startswith("fn="):
            function = line[3:].strip()
        elif line.startswith("cfn="):
            callee = line[4:].strip()
        elif line.startswith("calls="):
            calls[callee] += int(line[6:].split()[0])
            after_call = True
        elif line[:1].isdigit():
            if after_call:
                after_call = False
            else:
                own[function] += int(line.split()[-1])
    return total, calls, own


def thread_name(own):
    if any(name.startswith("__CFRunLoopDoSources0") for name in own):
        return "control"
    if any("accessHandler" in name for name in own):
        return "http"
    return None


def per_thread(binary, http_threads):
    with tempfile.TemporaryDirectory() as workdir:
        # valgrind 3.19 cannot read a release build's DWARF 5: a copy without debug info.
        copy = os.path.join(workdir, "runloopd")
        shutil.copy(binary, copy)
        subprocess.run(["strip", "-g", copy], check=True)
        small = callgrind(copy, SMALL, http_threads, workdir)
        large = callgrind(copy, LARGE, http_threads, workdir)
    rows = {}
    for tid, (total, calls, own) in sorted(large.items()):
        total0, calls0, _ = small.get(tid, (0, collections.Counter(), None))
        instructions = (total - total0) / (LARGE - SMALL)
        if abs(instructions) < 1000:
            continue
        counted = {}
        for key in COUNTED:
            counted[key] = sum(v - calls0.get(k, 0) for k, v in calls.items() if k.startswith(key)) / (LARGE - SMALL)
        name = thread_name(own) or f"thread {tid}"
        while name in rows:
            name += "'"
        rows[name] = (instructions, counted)
    return rows


def native(binary, http_threads):
    """Voluntary/involuntary switches per request by thread name, and syscalls per request."""
    port = free_port()
    server = start([binary] + flags(port, http_threads), port)
    requests(port, 200, http_threads)

    def snapshot():
        out = {}
        for tid in os.listdir(f"/proc/{server.pid}/task"):
            try:
                fields = dict(
                    line.split(":\t", 1) for line in open(f"/proc/{server.pid}/task/{tid}/status") if ":\t" in line)
            except OSError:
                continue
            out[tid] = (fields["Name"].strip(), int(fields["voluntary_ctxt_switches"]),
                        int(fields["nonvoluntary_ctxt_switches"]))
        return out

    before = snapshot()
    requests(port, NATIVE, http_threads)
    after = snapshot()
    # Then the system calls, in a second pass: a traced thread stops at each one.
    syscalls = {}
    if shutil.which("strace"):
        trace_out = tempfile.NamedTemporaryFile(suffix=".strace", delete=False).name
        tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(server.pid), "-o", trace_out],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached to every thread
        requests(port, NATIVE, http_threads)
        tracer.send_signal(signal.SIGINT)
        tracer.wait()
        for line in open(trace_out):
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                syscalls[parts[-1]] = int(parts[3]) / NATIVE
        os.unlink(trace_out)
    stop(server, 300)
    switches = collections.defaultdict(lambda: [0.0, 0.0])
    for tid, (name, voluntary, involuntary) in after.items():
        if tid in before:
            switches[name][0] += (voluntary - before[tid][1]) / NATIVE
            switches[name][1] += (involuntary - before[tid][2]) / NATIVE
    return {k: v for k, v in switches.items() if v[0] + v[1] >= 0.01}, syscalls


def main():
    args = sys.argv[1:]
    http_threads = 1
    if "--http-threads" in args:
        index = args.index("--http-threads")
        http_threads = int(args[index + 1])
        del args[index:index + 2]
    if not args or not shutil.which("valgrind"):
        raise SystemExit(__doc__)
    builds = args[:2]
    results = [(b, per_thread(b, http_threads), *native(b, http_threads)) for b in builds]
    print(f"GET /api/version, --http-threads {http_threads}, per request "
          f"(load {' '.join(open('/proc/loadavg').read().split()[:3])})")
    for binary, threads, switches, syscalls in results:
        print(f"\n{binary}")
        for name, (instructions, counted) in threads.items():
            extra = ", ".join(f"{k} {v:.1f}" for k, v in counted.items() if v >= 0.05)
            print(f"  {name:10s} {instructions:9,.0f} instructions; {extra}")
        print(f"  {'all':10s} {sum(t[0] for t in threads.values()):9,.0f} instructions")
        for name, (voluntary, involuntary) in sorted(switches.items()):
            print(f"  {name:16s} voluntary switches {voluntary:.2f} (involuntary {involuntary:.2f}: the machine's load)")
        if syscalls:
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(syscalls.items(), key=lambda kv: -kv[1]) if v >= 0.05)
            print(f"  system calls {sum(syscalls.values()):.2f}: {shown}")


if __name__ == "__main__":
    main()
