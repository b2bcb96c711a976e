"""Starting, asking and ending runloopd (and other servers) from a Python test.

Shared by Tests/prometheus and Tests/upgrade (each puts this folder on
sys.path). Every wait is a condition with a deadline; a server is ready when
it says so (its port file, then `/readyz` 200), however loaded the machine:
it is waited for while its process runs, and START_DEADLINE_S only catches
a start that hangs (issue 41).
"""

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

# How long a start may take before it counts as a hang (not a judgement of speed).
START_DEADLINE_S = float(os.environ.get("RUNLOOPD_START_DEADLINE", "300"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout, every=0.2):
    """Asks `predicate` until it answers something truthy and returns that; fails the test after
    `timeout` seconds. An OSError, ValueError or KeyError (not up yet, a refused connection, an
    answer without the key) counts as "not yet". Between two questions it pauses `every` seconds,
    never past the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
        except (OSError, ValueError, KeyError) as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})")
        time.sleep(min(every, left))


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def call(method, url, body=None, timeout=15):
    """One JSON request: (status, parsed body), an error status included."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def end(process, grace=15):
    """SIGTERM, then SIGKILL if it has not exited within `grace` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def alive(process, name, log):
    """True while `process` runs; fails the test at once when it exited."""
    if process.poll() is not None:
        pytest.fail(f"{name} exited ({process.returncode}) at start: see {log}")
    return True


def start_runloopd(binary, name, port, port_file, log, args):
    """Starts `binary` on 127.0.0.1:`port` with `args` (its output to `log`) and returns the process
    once it is ready: its port file written, then `/readyz` answering 200."""
    process = subprocess.Popen(
        [binary, "--host", "127.0.0.1", "--port", str(port), "--port-file", str(port_file), *args],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    wait_for(f"{name}'s port file", lambda: alive(process, name, log) and port_file.exists()
             and port_file.read_text().strip(), START_DEADLINE_S)
    base = f"http://127.0.0.1:{port}"
    wait_for(f"{name} ready", lambda: alive(process, name, log) and call("GET", base + "/readyz", timeout=2)[0] == 200,
             START_DEADLINE_S)
    return process
