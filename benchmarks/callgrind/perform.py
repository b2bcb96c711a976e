#!/usr/bin/env python3
"""Instructions per `POST /api/threads/{id}/perform` (echo, waitUntilDone) under
valgrind's callgrind: noise-free where wall-clock ratios on a shared VM are not.

    python3 benchmarks/callgrind/perform.py benchmarks/.build/release/runloopd [extra runloopd flags...]

Runs the server under callgrind twice (500 and 2,500 requests on one keep-alive
connection) and prints the slope: instructions per request, start-up and
shutdown cancelled out. valgrind cannot read the DWARF 5 of Swift's release
builds, so a copy with its debug info stripped (symbols kept) is measured.
Example: `... runloopd` vs `... runloopd --no-trace` gives the explainer's cost.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchkit import free_port  # noqa: E402 - benchmarks/ is on the path only now


def measure(binary, extra, count, workdir):
    port = free_port()
    out = os.path.join(workdir, f"callgrind.{count}")
    here = os.path.dirname(os.path.abspath(__file__))
    public = os.path.join(here, "..", "..", "Public")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "--port", str(port),
         "--log-level", "error", "--public-dir", public] + extra,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("runloopd did not start under valgrind")
            time.sleep(0.2)
    headers = {"Content-Type": "application/json"}
    conn.request("POST", "/api/threads", body="{}", headers=headers)
    thread = json.loads(conn.getresponse().read())["id"]
    body = json.dumps({"selector": "echo", "args": {"n": 1}, "waitUntilDone": True})
    for _ in range(count):
        conn.request("POST", f"/api/threads/{thread}/perform", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
    conn.close()
    server.send_signal(signal.SIGINT)
    server.wait(timeout=120)
    for line in open(out):
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise SystemExit("no totals in " + out)


def main():
    if len(sys.argv) < 2 or not shutil.which("valgrind"):
        raise SystemExit(__doc__)
    with tempfile.TemporaryDirectory() as workdir:
        binary = os.path.join(workdir, "runloopd")
        shutil.copy(sys.argv[1], binary)
        subprocess.run(["strip", "-g", binary], check=True)
        small = measure(binary, sys.argv[2:], 500, workdir)
        large = measure(binary, sys.argv[2:], 2500, workdir)
    print(f"{(large - small) / 2000:.0f} instructions per perform request ({' '.join(sys.argv[2:]) or 'default flags'})")


if __name__ == "__main__":
    main()
