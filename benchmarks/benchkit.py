"""What the Python benchmarks share: a free loopback port, ending a server, a
JSON request, and the perform echo's wrk script.

The scripts in benchmarks/ import it as it is; those in its subfolders put
benchmarks/ on sys.path first (`sys.path.insert(0, <benchmarks/>)`).
"""

import json
import signal
import socket
import subprocess
import urllib.request

# rlbench hop's second case: the perform echo, waiting for the result (two hops).
PERFORM_BODY = '{"selector":"echo","args":{"n":1},"waitUntilDone":true}'


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on at this moment."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(server, timeout, sig=signal.SIGINT):
    """Sends `sig` to `server` (a Popen), waits up to `timeout` seconds for it
    to exit, then kills it; returns once it is reaped."""
    server.send_signal(sig)
    try:
        server.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def http(port, method, path, body=None):
    """One JSON request to 127.0.0.1:`port`; its answer parsed ({} when empty)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=body.encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"{}")


def write_perform_script(path):
    """A wrk script at `path` that POSTs PERFORM_BODY; returns `path`."""
    with open(path, "w") as f:
        f.write(f"wrk.method = \"POST\"\nwrk.body = '{PERFORM_BODY}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n")
    return path
