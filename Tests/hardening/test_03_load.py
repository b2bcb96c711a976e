"""Connection-level load: slowloris and a 10,000-attempt connection flood.

The attackers connect from 127.0.0.1; a separate probe process sends one
request every 50 ms from 127.0.0.2 (its own per-IP budget), alternating
/healthz and /api/version (the control loop), and must be answered within
100 ms throughout. Every attempt ends cleanly (answered, refused by a close, or
timed out by us at a bounded deadline), and descriptors and memory come back.
On top of that latency probe, the liveness prober (probes.Liveness: /healthz
and /api/version every 100 ms from 127.0.0.3) watches the server: a gap over
2 s between answers fails the test with the server's backtraces.
"""

import errno
import os
import selectors
import socket
import time

from conftest import figure
from probes import Prober, closed_counts

PROBE_BUDGET_MS = float(os.environ.get("HARDENING_PROBE_BUDGET_MS", "100"))


def _settle(server, fds0, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and server.fds() > fds0 + 2:
        time.sleep(0.2)


def test_slowloris_200_connections_a_byte_a_second(server_factory):
    s = server_factory("--max-connections", "256", "--max-connections-per-ip", "100", "--connection-timeout", "3")
    assert s.healthy()
    fds0, rss0 = s.fds(), s.rss_kb()
    socks = []
    with Prober(s.port) as probe:
        for i in range(200):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.settimeout(2)
            sock.connect(("127.0.0.1", s.port))
            sock.setblocking(False)
            try:
                sock.send(b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            except OSError:
                pass
            socks.append(sock)
        open_ = set(range(len(socks)))
        refused = 0
        for second in range(10):
            time.sleep(1)
            for i in list(open_):
                try:
                    if socks[i].recv(1024) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    open_.discard(i)
                    refused += 1
                    continue
                try:
                    socks[i].send(b"a")
                except BlockingIOError:
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    open_.discard(i)
                    refused += 1
        held = len(open_)
        for sock in socks:
            sock.close()
        probe.finish()
    figure("slowloris_connections", 200)
    figure("slowloris_held_after_10s", held)
    figure("slowloris_refused_by_per_ip_limit", refused)
    figure("slowloris_probe_max_ms", probe.max_ms)
    figure("slowloris_probes", probe.count)
    assert probe.failures == 0, f"{probe.failures} probes failed: {probe.failed}"
    assert probe.max_ms is not None and probe.max_ms < PROBE_BUDGET_MS, f"probe max {probe.max_ms} ms"
    assert held <= 100 and refused >= 100, (held, refused)
    _settle(s, fds0)
    assert s.fds() <= fds0 + 2
    assert s.healthy()
    figure("slowloris_rss_kb_before_after", (rss0, s.rss_kb()))


def test_ten_thousand_connection_attempts_against_a_low_limit(server_factory):
    attempts = int(os.environ.get("HARDENING_FLOOD_ATTEMPTS", "10000"))
    s = server_factory("--max-connections", "32", "--max-connections-per-ip", "16", "--connection-timeout", "2")
    for _ in range(50):  # warm up allocator pools before the baseline
        s.get("/api/version")
    fds0, rss0 = s.fds(), s.rss_kb()
    outcome = {"answered": 0, "refused": 0, "timeout": 0, "connect_failed": 0, "5xx": 0}
    sel = selectors.DefaultSelector()
    inflight = {}
    started = time.monotonic()
    launched = 0
    request = b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with Prober(s.port) as probe:
        while (launched < attempts or inflight) and time.monotonic() - started < 240:
            while launched < attempts and len(inflight) < 200:
                sock = socket.socket()
                sock.setblocking(False)
                sock.bind(("127.0.0.1", 0))
                code = sock.connect_ex(("127.0.0.1", s.port))
                launched += 1
                if code not in (0, errno.EINPROGRESS):
                    outcome["connect_failed"] += 1
                    sock.close()
                    continue
                inflight[sock] = {"deadline": time.monotonic() + 3, "sent": False, "got": b""}
                sel.register(sock, selectors.EVENT_WRITE)
            for key, _ in sel.select(timeout=0.05):
                sock = key.fileobj
                st = inflight[sock]
                try:
                    if not st["sent"]:
                        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            raise ConnectionRefusedError(err)
                        sock.send(request)
                        st["sent"] = True
                        sel.modify(sock, selectors.EVENT_READ)
                        continue
                    chunk = sock.recv(65536)
                    if chunk:
                        st["got"] += chunk
                        continue
                    done = "answered" if st["got"] else "refused"
                except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
                    done = "answered" if st["got"] else "refused"
                if st["got"][:9] in (b"HTTP/1.1 ", b"HTTP/1.0 ") and st["got"][9:10] == b"5":
                    outcome["5xx"] += 1
                outcome[done] += 1
                sel.unregister(sock)
                sock.close()
                del inflight[sock]
            now = time.monotonic()
            for sock in [k for k, v in inflight.items() if v["deadline"] < now]:
                outcome["timeout"] += 1
                sel.unregister(sock)
                sock.close()
                del inflight[sock]
        probe.finish()
    took = time.monotonic() - started
    figure("flood_attempts", launched)
    figure("flood_outcomes", outcome)
    figure("flood_seconds", round(took, 1))
    figure("flood_probe_max_ms", probe.max_ms)
    figure("flood_probe_p99_ms", probe.p99_ms)
    figure("flood_probes", probe.count)
    figure("flood_server_closed_by_reason", closed_counts(s.port, "127.0.0.2"))
    assert launched == attempts and not inflight
    assert sum(outcome.values()) - outcome["5xx"] == attempts
    assert outcome["5xx"] == 0
    assert probe.failures == 0, f"{probe.failures} probes failed: {probe.failed}"
    assert probe.max_ms is not None and probe.max_ms < PROBE_BUDGET_MS, f"probe max {probe.max_ms} ms"
    _settle(s, fds0)
    rss1 = s.rss_kb()
    figure("flood_rss_kb_before_after", (rss0, rss1))
    figure("flood_fds_before_after", (fds0, s.fds()))
    assert s.fds() <= fds0 + 2
    assert rss1 < rss0 + 16 * 1024, f"RSS {rss0} -> {rss1} kB"
    assert s.healthy()
