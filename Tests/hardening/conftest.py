"""Shared pieces of the hardening suite (issue 7): start and stop the real
runloopd binary, talk to it over loopback only, read its /proc numbers, and
collect the figures the suite reports at the end.

Every loop in this suite is bounded in count and in time; all traffic goes to
127.0.0.1 (probes come from 127.0.0.2, which Linux routes over loopback too).
"""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests

BIN = os.environ.get("RUNLOOPD_BIN", "")
RESULTS_PATH = os.environ.get("HARDENING_RESULTS", "")
FIGURES = {}


def figure(name, value):
    """Records one number for the summary (and the results file)."""
    FIGURES[name] = value


class Server:
    """One runloopd process on a free loopback port."""

    def __init__(self, *flags, log_level="warning"):
        if not BIN or not os.access(BIN, os.X_OK):
            raise RuntimeError("set RUNLOOPD_BIN to a built runloopd")
        self.dir = tempfile.mkdtemp(prefix="rl-hard-")
        self.port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "wb")
        args = [BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", self.port_file,
                "--log-level", log_level, "--public-dir", os.path.join(self.dir, "public"),
                # Its history store (SQLite) in its own folder, not the user's state directory.
                "--data-dir", os.path.join(self.dir, "data"), *flags]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 15
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("runloopd did not start: " + self.log_text()[-2000:])
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        self.base = f"http://127.0.0.1:{self.port}"
        self.http = requests.Session()
        self.exit_code = None

    # --- HTTP -------------------------------------------------------------
    def request(self, method, path, body=None, timeout=10, **kw):
        data = None
        headers = kw.pop("headers", {})
        if body is not None:
            data = json.dumps(body)
            headers = {"Content-Type": "application/json", **headers}
        return requests.request(method, self.base + path, data=data, headers=headers, timeout=timeout, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body if body is not None else {}, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def thread(self, **body):
        r = self.post("/api/threads", body)
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def healthy(self, timeout=2):
        """/healthz (libmicrohttpd thread) and /api/version (control loop) both answer."""
        try:
            a = requests.get(self.base + "/healthz", timeout=timeout)
            b = requests.get(self.base + "/api/version", timeout=timeout)
            return a.status_code == 200 and b.status_code == 200
        except requests.RequestException:
            return False

    def metric(self, name):
        """Sum of every sample of one Prometheus metric."""
        text = requests.get(self.base + "/metrics", timeout=5).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    # --- /proc --------------------------------------------------------------
    def status(self, key):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return -1

    def rss_kb(self):
        return self.status("VmRSS")

    def threads(self):
        return self.status("Threads")

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def alive(self):
        return self.proc.poll() is None

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    # --- stop ---------------------------------------------------------------
    def terminate(self, timeout=5.0):
        """SIGTERM; returns (exit code, seconds) or (None, timeout) if it hangs."""
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, timeout
        self.exit_code = code
        return code, time.monotonic() - started

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()

    def backtraces(self):
        """gdb backtraces of every thread (for a hang report); where gdb is
        missing or may not attach, each thread's name, state and kernel wait
        channel from /proc."""
        threads = []
        try:
            for tid in sorted(os.listdir(f"/proc/{self.pid}/task"), key=int):
                base = f"/proc/{self.pid}/task/{tid}"
                try:
                    with open(base + "/comm") as f:
                        name = f.read().strip()
                    with open(base + "/wchan") as f:
                        wchan = f.read().strip() or "-"
                    with open(base + "/stat") as f:
                        state = f.read().rsplit(")", 1)[1].split()[0]
                    threads.append(f"  {tid} {name}: {state} {wchan}")
                except OSError:
                    continue
        except OSError as error:
            threads.append(f"  (no /proc: {error})")
        report = "threads (tid name: state wait channel):\n" + "\n".join(threads)
        try:
            out = subprocess.run(["gdb", "-p", str(self.pid), "-batch", "-ex", "thread apply all bt 30"],
                                 capture_output=True, text=True, timeout=60)
            traces = out.stdout.strip() or "(gdb printed nothing: " + out.stderr.strip()[-500:] + ")"
        except Exception as error:  # gdb missing or not permitted
            traces = f"(no backtraces: {error})"
        return report + "\n" + traces[-20000:]

    def hang_report(self):
        """What a server that did not exit in time was doing: its log's last
        lines first (they say which step of the stop was slow), then its threads."""
        return "server log (last lines):\n" + self.log_text()[-3000:] + "\n" + self.backtraces()


@pytest.fixture
def server_factory():
    """Starts servers with the given flags; every one is stopped afterwards.
    A server that does not exit 0 within 5 s of SIGTERM fails the test (with
    its threads' backtraces)."""
    started = []

    def make(*flags, **kw):
        s = Server(*flags, **kw)
        started.append(s)
        return s

    yield make
    problems = []
    for s in started:
        if s.exit_code is None and s.alive():
            code, seconds = s.terminate(5.0)
            if code is None:
                problems.append(f"runloopd pid {s.pid} ignored SIGTERM for 5 s:\n{s.hang_report()}")
            elif code != 0:
                problems.append(f"runloopd exited {code} after SIGTERM:\n{s.log_text()[-3000:]}")
        elif s.proc.returncode not in (0, None):
            problems.append(f"runloopd exited {s.proc.returncode}:\n{s.log_text()[-3000:]}")
        s.kill()
    assert not problems, "\n".join(problems)


def raw_exchange(port, payload, read_timeout=5.0, source="127.0.0.1", shutdown_write=False):
    """Sends raw bytes, reads until the server closes or `read_timeout` passes.
    Returns (bytes received, how it ended: "closed" | "reset" | "timeout")."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(read_timeout)
    got = b""
    ended = "closed"
    try:
        sock.connect(("127.0.0.1", port))
        if payload:
            sock.sendall(payload)
        if shutdown_write:
            sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + read_timeout
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        else:
            ended = "timeout"
    except socket.timeout:
        ended = "timeout"
    except (ConnectionResetError, BrokenPipeError):
        ended = "reset"
    finally:
        sock.close()
    return got, ended


def status_of(raw):
    """The status code of the first response in `raw`, or None."""
    if not raw.startswith(b"HTTP/1."):
        return None
    try:
        return int(raw.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def probe_once(port, path="/healthz", source="127.0.0.2", timeout=2.0):
    """One request on a fresh connection from `source`; seconds taken, or None."""
    started = time.monotonic()
    got, _ = raw_exchange(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(),
                          read_timeout=timeout, source=source)
    if status_of(got) != 200:
        return None
    return time.monotonic() - started


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    terminalreporter.section("hardening figures")
    for key, value in FIGURES.items():
        terminalreporter.write_line(f"{key}: {value}")
    if RESULTS_PATH:
        os.makedirs(os.path.dirname(RESULTS_PATH) or ".", exist_ok=True)
        with open(RESULTS_PATH, "w") as f:
            json.dump(FIGURES, f, indent=2)


def _probe_loop(port, interval, stop, out):
    latencies = []
    failures = 0
    paths = ["/healthz", "/api/version"]
    n = 0
    while not stop.is_set() and n < 100_000:
        took = probe_once(port, paths[n % 2])
        if took is None:
            failures += 1
        else:
            latencies.append(took)
        n += 1
        stop.wait(interval)
    out.put((latencies, failures))


class Prober:
    """A separate process (no GIL shared with the attacker) that sends a request
    every `interval` s from 127.0.0.2, alternating /healthz (libmicrohttpd
    thread) and /api/version (through the control loop)."""

    def __init__(self, port, interval=0.05):
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        self.stop_event = ctx.Event()
        self.queue = ctx.Queue()
        self.proc = ctx.Process(target=_probe_loop, args=(port, interval, self.stop_event, self.queue))

    def __enter__(self):
        self.proc.start()
        return self

    def __exit__(self, *exc):
        if self.proc.is_alive():
            self.finish()

    def finish(self):
        self.stop_event.set()
        latencies, failures = self.queue.get(timeout=30)
        self.proc.join(timeout=10)
        latencies.sort()
        self.count = len(latencies)
        self.failures = failures
        self.max_ms = round(latencies[-1] * 1000, 1) if latencies else None
        self.p99_ms = round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1) if latencies else None
        return self
