"""Probes of the hardening suite: raw HTTP exchanges over loopback, the
latency Prober (a separate process) and the issue-22 Liveness prober that
watches every server a test starts (see conftest.server_factory)."""

import contextlib
import os
import re
import socket
import threading
import time

LIVENESS_GAP_S = float(os.environ.get("HARDENING_LIVENESS_GAP_S", "2"))
LIVENESS_SOURCE = "127.0.0.3"


def raw_exchange(port, payload, read_timeout=5.0, source="127.0.0.1", shutdown_write=False, host="127.0.0.1"):
    """Sends raw bytes, reads until the server closes or `read_timeout` passes.
    Returns (bytes received, how it ended: "closed" | "reset" | "timeout")."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    if ":" in host and source == "127.0.0.1":
        source = "::1"
    sock.bind((source, 0))
    sock.settimeout(read_timeout)
    got = b""
    ended = "closed"
    try:
        sock.connect((host, port))
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



def _probe_loop(port, interval, stop, out):
    latencies = []
    failed = []  # what each failed probe got: (path, status, how it ended, seconds)
    paths = ["/healthz", "/api/version"]
    n = 0
    source = "127.0.0.2"
    while not stop.is_set() and n < 100_000:
        path = paths[n % 2]
        started = time.monotonic()
        got, ended = raw_exchange(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode(),
                                  read_timeout=2.0, source=source)
        took = time.monotonic() - started
        if status_of(got) != 200:
            failed.append((path, status_of(got), ended, round(took, 3), got[:120]))
        else:
            latencies.append(took)
        n += 1
        stop.wait(interval)
    out.put((latencies, failed))


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
        latencies, failed = self.queue.get(timeout=30)
        self.proc.join(timeout=10)
        latencies.sort()
        self.count = len(latencies)
        self.failures = len(failed)
        # (path, status or None, "closed" | "reset" | "timeout", seconds, first bytes)
        self.failed = failed
        self.max_ms = round(latencies[-1] * 1000, 1) if latencies else None
        self.p99_ms = round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1) if latencies else None
        return self


# --- liveness (issue 22) -----------------------------------------------------

def http_status(host, port, path, source, timeout, headers=()):
    """One `GET path` on a fresh connection from `source`, everything within
    `timeout` s: the answer's status, or None (refused, reset, timed out)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    lines = [f"GET {path} HTTP/1.1", f"Host: {authority}", "Connection: close", *headers, "", ""]
    deadline = time.monotonic() + timeout
    sock = socket.socket(family, socket.SOCK_STREAM)
    got = b""
    try:
        sock.bind((source, 0))
        sock.settimeout(timeout)
        sock.connect((host, port))
        sock.sendall("\r\n".join(lines).encode())
        # Bounded: at most 64 reads and `timeout` seconds; the head is enough.
        for _ in range(64):
            left = deadline - time.monotonic()
            if left <= 0 or b"\r\n\r\n" in got:
                break
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    finally:
        sock.close()
    if b"\r\n\r\n" not in got:
        return None
    return status_of(got)


class Liveness:
    """The issue-22 prober: every 100 ms, from its own loopback address
    (127.0.0.3 by default), `GET /healthz` (answered on libmicrohttpd's
    thread) and `GET /api/version` (answered through the control loop), each
    on a fresh connection with a short timeout. Each probe has its own thread,
    so a probe waiting out its timeout never stretches the other's gap. It
    records, per probe, the largest gap between two consecutive successful
    answers (200), counting the time from start to the first answer and from
    the last answer to stop(). A gap over HARDENING_LIVENESS_GAP_S (default 2)
    is a failure; the first time it happens, while the gap is still open, the
    prober takes the server's hang report (log tail, /proc wait channels, gdb
    backtraces of every thread). `paused()` suspends measuring around a
    documented interruption; terminate()/kill() stop the prober."""

    PROBES = {"healthz": "/healthz", "api": "/api/version"}

    def __init__(self, server, source=LIVENESS_SOURCE, interval=0.1, threshold=None, timeout=None):
        self.server = server
        self.source = source
        self.interval = interval
        self.threshold = LIVENESS_GAP_S if threshold is None else threshold
        self.timeout = timeout if timeout is not None else min(1.5, max(0.5, self.threshold * 0.75))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._paused = 0
        self._threads = []
        self._reporting = False
        self.report = None          # the hang report taken while a gap was open
        self.report_gap = None      # (probe, gap) that triggered it
        self.reported = False       # already raised by a test itself
        self.started = None
        self.stopped = None
        now = time.monotonic()
        self.state = {name: {"last_ok": now, "max_gap": 0.0, "ok": 0, "failed": 0, "max_latency": 0.0}
                      for name in self.PROBES}

    def start(self):
        self.started = time.monotonic()
        with self._lock:
            for st in self.state.values():
                st["last_ok"] = self.started
        headers = (f"Authorization: Bearer {self.server.token}",) if self.server.token else ()
        for name, path in self.PROBES.items():
            t = threading.Thread(target=self._run, args=(name, path, headers), daemon=True,
                                 name=f"liveness-{name}-{self.server.pid}")
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._watch, daemon=True, name=f"liveness-watch-{self.server.pid}")
        t.start()
        self._threads.append(t)
        return self

    def _run(self, name, path, headers):
        host = self.server.host
        # Bounded: at most 100,000 probes (2.8 h at 100 ms) and 3 hours.
        limit = time.monotonic() + 3 * 3600
        for _ in range(100_000):
            if self._stop.is_set() or time.monotonic() > limit:
                return
            t0 = time.monotonic()
            status = None if self._paused else http_status(host, self.server.port, path, self.source,
                                                           self.timeout, headers)
            now = time.monotonic()
            with self._lock:
                st = self.state[name]
                if self._paused or self._stop.is_set():
                    pass
                elif status == 200:
                    st["max_gap"] = max(st["max_gap"], now - st["last_ok"])
                    st["last_ok"] = now
                    st["ok"] += 1
                    st["max_latency"] = max(st["max_latency"], now - t0)
                else:
                    st["failed"] += 1
            self._stop.wait(max(0.01, self.interval - (time.monotonic() - t0)))

    def _watch(self):
        """Takes the hang report as soon as either gap passes the limit,
        while it is still open (a probe may be inside its own timeout)."""
        limit = time.monotonic() + 3 * 3600
        for _ in range(200_000):
            if self._stop.wait(0.1) or time.monotonic() > limit:
                return
            with self._lock:
                if self._paused:
                    continue
                now = time.monotonic()
                name, gap = max(((n, now - st["last_ok"]) for n, st in self.state.items()), key=lambda x: x[1])
                if gap <= self.threshold:
                    continue
                self._reporting = True
                self.report_gap = (self.PROBES[name], round(gap, 2))
            self.report = (f"liveness: {self.PROBES[name]} unanswered for {gap:.1f} s at "
                           f"{now - self.started:.1f} s into the test; the server then:\n" + self.server.hang_report())
            return

    @contextlib.contextmanager
    def paused(self):
        """Measuring suspended inside (a documented stop or overload); the
        gaps restart from the moment it ends."""
        with self._lock:
            self._paused += 1
        try:
            yield self
        finally:
            with self._lock:
                self._paused -= 1
                now = time.monotonic()
                for st in self.state.values():
                    st["last_ok"] = now

    def failed_now(self):
        """True once a gap over the threshold has been seen (for early abort)."""
        return self._reporting

    def stop(self):
        """Stops probing; the time since each probe's last answer counts as a gap."""
        if self.stopped is not None:
            return self
        now = time.monotonic()
        with self._lock:
            if not self._paused:
                for st in self.state.values():
                    st["max_gap"] = max(st["max_gap"], now - st["last_ok"])
            self._paused += 1
            self.stopped = now
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.timeout + 90)  # a hang report (gdb) may be under way
        return self

    def gaps(self):
        """{probe: largest gap in seconds} (rounded to ms)."""
        now = time.monotonic()
        with self._lock:
            out = {}
            for name, st in self.state.items():
                gap = st["max_gap"]
                if self.stopped is None and not self._paused:
                    gap = max(gap, now - st["last_ok"])
                out[name] = round(gap, 3)
            return out

    def summary(self):
        with self._lock:
            counts = {n: (st["ok"], st["failed"], round(st["max_latency"] * 1000, 1)) for n, st in self.state.items()}
        return (f"liveness from {self.source}: largest gaps {self.gaps()} s (limit {self.threshold} s); "
                f"probes (answered, failed, slowest ms) {counts}")

    def problem(self):
        """None, or the failure text: the gaps and the hang report."""
        gaps = self.gaps()
        if max(gaps.values()) <= self.threshold:
            return None
        report = self.report
        if report is None:
            # The gap was not caught while open: describe the server as it is now.
            if self.server.alive():
                report = "(taken after the gap closed)\n" + self.server.hang_report()
            else:
                report = "(the server has exited)\nserver log (last lines):\n" + self.server.log_text()[-3000:]
        return (f"runloopd pid {self.server.pid} stopped answering: {self.summary()}\n"
                f"first gap over the limit: {self.report_gap}\n{report}")

    def assert_alive(self):
        """Raises with the hang report when a gap went over the limit."""
        problem = self.problem()
        if problem:
            self.reported = True
            raise AssertionError(problem)


def metrics_text(port, source):
    """`GET /metrics`' text, asked from `source` (the prober's address: outside an attack's budgets)."""
    got, _ = raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                          read_timeout=5, source=source)
    return got.decode("utf-8", "replace")


def metric(port, source, name):
    """The value of the unlabelled series `name` in /metrics (None when it is not there)."""
    m = re.search(r"\n" + re.escape(name) + r" (\S+)", metrics_text(port, source))
    return float(m.group(1)) if m else None


def closed_counts(port, source):
    """runloopd_http_connections_closed_total by reason: {reason: count}."""
    text = metrics_text(port, source)
    return {m.group(1): int(float(m.group(2)))
            for m in re.finditer(r'runloopd_http_connections_closed_total\{reason="(\w+)"\} (\S+)', text)}

