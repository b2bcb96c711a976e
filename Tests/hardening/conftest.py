"""Shared pieces of the hardening suite (issue 7): start and stop the real
runloopd binary, talk to it over loopback only, read its /proc numbers, and
collect the figures the suite reports at the end.

Every loop in this suite is bounded in count and in time; all traffic goes to
127.0.0.1 (probes come from 127.0.0.2, which Linux routes over loopback too).

Issue 22 (a lock re-entry in the SSE hub froze every request, /healthz
included, and SIGTERM never ended the process): every server `server_factory`
starts is watched by a `Liveness` prober from 127.0.0.3 (threads asking
`GET /healthz` and `GET /api/version`, the latter through the control loop,
every 100 ms). The largest gap between two successful answers of either probe
must stay under HARDENING_LIVENESS_GAP_S (default 2 s), or the test fails with
every server thread's backtrace (gdb) and the server log's tail, taken while
the gap was open. `terminate()` and `kill()` stop the prober first (a stop is
not a hang); a test may also wrap a documented pause in `server.liveness.paused()`.
"""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest
import requests

from probes import LIVENESS_SOURCE, Liveness

BIN = os.environ.get("RUNLOOPD_BIN", "")
RESULTS_PATH = os.environ.get("HARDENING_RESULTS", "")
FIGURES = {}
# How long a start may take before it counts as a hang (not a judgement of speed).
START_DEADLINE_S = float(os.environ.get("RUNLOOPD_START_DEADLINE", "300"))


def figure(name, value):
    """Records one number for the summary (and the results file)."""
    FIGURES[name] = value


def wait_until(condition, seconds, what, every=0.05):
    """Waits until `condition()` is true, checking every `every` s; fails the
    test with `what` when `seconds` pass first. Returns the condition's value."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"not within {seconds} s: {what}")
        time.sleep(every)


def steady(read, seconds, what, every=0.2):
    """Waits until two reads of `read()` `every` s apart agree (a count that has
    stopped moving, e.g. threads after their teardown); returns that value."""
    last = [read()]

    def settled():
        now = read()
        same, last[0] = now == last[0], now
        return same
    wait_until(settled, seconds, what, every)
    return last[0]


class Server:
    """One runloopd process on a free loopback port."""

    def __init__(self, *flags, log_level="warning", host="127.0.0.1", token=None, auth_token=None, env=None):
        if not BIN or not os.access(BIN, os.X_OK):
            raise RuntimeError("set RUNLOOPD_BIN to a built runloopd")
        self.dir = tempfile.mkdtemp(prefix="rl-hard-")
        self.port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "server.log")
        self.log = open(self.log_path, "wb")
        self.host = host
        # `token` is passed as --token; `auth_token` is only sent (a token
        # the server got another way: --token-file, RUNLOOPD_TOKEN).
        self.token = token if token is not None else auth_token
        self.liveness = None
        if token is not None:
            flags = (*flags, "--token", token)
        args = [BIN, "serve", "--host", host, "--port", "0", "--port-file", self.port_file,
                "--log-level", log_level, "--public-dir", os.path.join(self.dir, "public"),
                # Its history store (SQLite) in its own folder, not the user's state directory.
                "--data-dir", os.path.join(self.dir, "data"),
                # SIGTERM stops at once (no drain): the 5 s stop expectation stands.
                "--drain-delay", "0", *flags]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=None if env is None else {**os.environ, **env})
        self.pid = self.proc.pid
        # Ready when it says so (the port file, written once it accepts
        # connections), however loaded the machine: waited for while it runs;
        # START_DEADLINE_S only catches a start that hangs (issue 41).
        deadline = time.monotonic() + START_DEADLINE_S
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("runloopd did not start: " + self.log_text()[-2000:])
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read().strip())
        self.authority = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        self.base = f"http://{self.authority}"
        self.http = requests.Session()
        self.exit_code = None

    # --- HTTP -------------------------------------------------------------
    def request(self, method, path, body=None, timeout=10, **kw):
        data = None
        headers = kw.pop("headers", {})
        if self.token is not None:
            headers = {"Authorization": f"Bearer {self.token}", **headers}
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
            b = self.get("/api/version", timeout=timeout)
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

    def sockets(self):
        """How many of its descriptors are sockets (listening one included)."""
        count = 0
        for fd in os.listdir(f"/proc/{self.pid}/fd"):
            try:
                count += os.readlink(f"/proc/{self.pid}/fd/{fd}").startswith("socket:")
            except OSError:
                continue
        return count

    def accept_queue(self):
        """Connections the kernel holds for the listening socket that the
        server has not accepted yet (Recv-Q of a LISTEN socket in
        /proc/net/tcp and tcp6)."""
        waiting = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == self.port:
                    waiting += int(fields[4].split(":")[1], 16)
        return waiting

    def alive(self):
        return self.proc.poll() is None

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    # --- stop ---------------------------------------------------------------
    def terminate(self, timeout=5.0):
        """SIGTERM; returns (exit code, seconds) or (None, timeout) if it hangs."""
        if self.liveness is not None:
            self.liveness.stop()  # a stop is not a hang
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
        if self.liveness is not None:
            self.liveness.stop()
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
            traces = out.stdout.strip() or "(gdb printed nothing)"
            if out.stderr.strip():
                traces += "\n(gdb's stderr: " + out.stderr.strip()[-800:] + ")"
        except Exception as error:  # gdb missing or not permitted
            traces = f"(no backtraces: {error})"
        return report + "\n" + traces[-20000:]

    def hang_report(self):
        """What a server that did not exit in time was doing: its log's last
        lines first (they say which step of the stop was slow), then its threads."""
        return "server log (last lines):\n" + self.log_text()[-3000:] + "\n" + self.backtraces()


@pytest.fixture
def server_factory(request):
    """Starts servers with the given flags; every one is stopped afterwards.
    Each is watched by a Liveness prober from 127.0.0.3 (`liveness_source=`
    picks another loopback address; ::1 for a server on ::1) while the test
    runs: a gap over HARDENING_LIVENESS_GAP_S fails the test (see
    pytest_runtest_call below). A server that does not exit 0 within 5 s of
    SIGTERM fails the test (with its threads' backtraces)."""
    started = []
    probers = request.node.__dict__.setdefault("_liveness", [])

    def make(*flags, liveness_source=None, **kw):
        s = Server(*flags, **kw)
        started.append(s)
        source = liveness_source or ("::1" if ":" in s.host else LIVENESS_SOURCE)
        s.liveness = Liveness(s, source=source).start()
        probers.append(s.liveness)
        return s

    yield make
    problems = []
    for s in started:
        s.liveness.stop()
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


def _record_liveness(item, probers):
    """Figures: per test (parametrized ones merged), the largest gap seen by
    each probe, [healthz, api] in seconds; and the largest over the run."""
    key = f"{item.module.__name__}::{getattr(item, 'originalname', item.name)}"
    table = FIGURES.setdefault("liveness_max_gap_s", {})
    overall = FIGURES.setdefault("liveness_max_gap_s_overall", [0.0, 0.0])
    for p in probers:
        gaps = p.gaps()
        pair = [gaps["healthz"], gaps["api"]]
        old = table.get(key, [0.0, 0.0])
        table[key] = [max(a, b) for a, b in zip(old, pair)]
        FIGURES["liveness_max_gap_s_overall"] = [max(a, b) for a, b in zip(overall, pair)]
        overall = FIGURES["liveness_max_gap_s_overall"]


def _liveness_problems(item):
    """Stops the test's probers, records their gaps, and returns what they found."""
    probers = item.__dict__.get("_liveness", [])
    for p in probers:
        p.stop()
    _record_liveness(item, probers)
    problems = [p.problem() for p in probers if not p.reported]
    return [p for p in problems if p]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After each test body: every server it started must have answered both
    probes without a gap over the limit, or the test fails here."""
    try:
        result = yield
    except BaseException as error:
        problems = _liveness_problems(item)
        if problems:
            raise AssertionError("\n".join(problems)) from error
        raise
    problems = _liveness_problems(item)
    if problems:
        raise AssertionError("\n".join(problems))
    return result
