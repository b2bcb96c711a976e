"""Shutdown under load: SIGTERM while 100 requests are in flight (80 waits on
performs queued on manual threads, 5 manual runs of 50 s, 5 event streams, 10
performs queued behind `sleep` on a busy thread): every one of them gets an
HTTP answer (event streams a clean end of the chunked body), and runloopd
exits 0 within 5 s. Fast clients keep hammering during the stop; their
requests get an answer or a refused connection, never a hang. The liveness
prober (probes.Liveness: /healthz and /api/version every 100 ms from
127.0.0.3) watches the server under the load until the SIGTERM, where
terminate() stops it (a stop is not a hang; the exit has its own 5 s bound)."""

import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import figure, wait_until
from probes import status_of


def _sse(port, opened, results):
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    got = b""
    opened.release()
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError as error:
        results.append(("sse", f"error {error}"))
        return
    finally:
        sock.close()
    clean = status_of(got) == 200 and got.endswith(b"0\r\n\r\n")
    results.append(("sse", "clean-end" if clean else f"unclean {got[-40:]!r}"))


def test_sigterm_with_100_requests_in_flight(server_factory):
    s = server_factory("--max-wait", "60", "--max-event-clients", "8", "--max-connections-per-ip", "0")
    manual = [s.thread(run={"style": "manual"}) for _ in range(9)]
    busy = s.thread(name="busy")
    results = []
    lock = threading.Lock()

    def call(method, path, body):
        try:
            r = requests.request(method, s.base + path, json=body, timeout=20)
            outcome = (path.rsplit("/", 1)[-1], r.status_code)
        except requests.RequestException as error:
            outcome = (path.rsplit("/", 1)[-1], f"no answer: {type(error).__name__}")
        with lock:
            results.append(outcome)

    pool = ThreadPoolExecutor(100)
    futures = []
    for i in range(80):
        futures.append(pool.submit(call, "POST", f"/api/threads/{manual[i % 4]}/perform",
                                   {"selector": "count", "waitUntilDone": True, "timeout": 60}))
    for tid in manual[4:9]:
        futures.append(pool.submit(call, "POST", f"/api/threads/{tid}/run", {"seconds": 50}))
    for _ in range(10):
        futures.append(pool.submit(call, "POST", f"/api/threads/{busy}/perform",
                                   {"selector": "sleep", "args": {"ms": 300}, "waitUntilDone": True, "timeout": 60}))
    opened = threading.Semaphore(0)
    sse_results = []
    sse_threads = [threading.Thread(target=_sse, args=(s.port, opened, sse_results)) for _ in range(5)]
    for t in sse_threads:
        t.start()
    for _ in range(5):
        assert opened.acquire(timeout=10)

    # Confirm all 95 non-stream requests are inside the server before the signal.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pending = sum(len(s.get(f"/api/threads/{t}").json()["pendingPerforms"]) for t in manual[:4])
        running = sum(s.get(f"/api/threads/{t}").json()["state"] in ("running", "waiting") for t in manual[4:9])
        busy_pending = len(s.get(f"/api/threads/{busy}").json()["pendingPerforms"])
        if pending == 80 and running == 5 and busy_pending >= 8 and s.metric("runloopd_event_clients") == 5:
            break
        time.sleep(0.05)
    assert (pending, running) == (80, 5), (pending, running, busy_pending)

    # Fast clients keep going through the stop.
    stop_fast = threading.Event()
    fast = Counter()

    def hammer():
        http = requests.Session()
        for _ in range(2000):
            if stop_fast.is_set():
                return
            try:
                fast[http.get(s.base + "/api/threads", timeout=5).status_code] += 1
            except requests.RequestException:
                fast["refused"] += 1
                time.sleep(0.01)
    hammers = [threading.Thread(target=hammer) for _ in range(4)]
    for t in hammers:
        t.start()
    wait_until(lambda: sum(fast.values()) >= 20, 10, "the fast clients under way")

    code, seconds = s.terminate(5.0)
    backtraces = s.hang_report() if code is None else ""
    stop_fast.set()
    for f in futures:
        f.result(timeout=30)
    for t in sse_threads + hammers:
        t.join(timeout=30)
    pool.shutdown()

    statuses = Counter(str(status) for _, status in results)
    figure("shutdown_exit_code", code)
    figure("shutdown_seconds", round(seconds, 2))
    figure("shutdown_in_flight_answers", dict(statuses))
    figure("shutdown_streams", dict(Counter(r for _, r in sse_results)))
    figure("shutdown_fast_clients", dict(fast))
    assert code == 0, f"exit {code} after {seconds:.1f}s\n{backtraces}"
    assert seconds < 5
    assert len(results) == 95 and all(isinstance(status, int) for _, status in results), results
    assert len(sse_results) == 5 and all(r == "clean-end" for _, r in sse_results), sse_results
