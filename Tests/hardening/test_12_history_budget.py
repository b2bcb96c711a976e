"""The history bounded in bytes (issue 37 finding 5, issue 40 item 2), against
the real binary, with the liveness prober (conftest.server_factory) watching:

1. A flood of 60 KB performs for 60 s from several loopback addresses with
   `--retention-size 64MB`: the data folder stays under 64 MB + 10 % and RSS
   under 300 MB at every sample (taken every 0.5 s), the service answers, and
   afterwards every request answered in the flood's last minute is readable in
   /api/history with its perform, each cut to `--store-event-bytes` with a
   visible marker. Before the budget the same flood took the folder to 4.7 GB
   and RSS to 2.9 GB, and one prune emptied the history.
2. `--retention-size` below the floor is refused at start with the floor in
   the message; at the floor, under an offered 2,500 small performs a second
   for 60 s, every sample of /api/history (every 0.5 s) holds events.

The load comes from separate processes (no GIL shared with the sampler), each
bound to its own loopback address, each keeping a few keep-alive connections
busy with one request at a time. Figures (every sample) go to the summary.
"""

import json
import multiprocessing as mp
import os
import re
import selectors
import socket
import subprocess
import threading
import time

from conftest import BIN, figure, wait_until

FLOOD_SECONDS = float(os.environ.get("HARDENING_HISTORY_FLOOD_SECONDS", "60"))
STRESS_SECONDS = float(os.environ.get("HARDENING_HISTORY_STRESS_SECONDS", "30"))
FLOOR_SECONDS = float(os.environ.get("HARDENING_HISTORY_FLOOR_SECONDS", "60"))
FLOOR_RATE = float(os.environ.get("HARDENING_HISTORY_FLOOR_RATE", "2500"))
RETENTION = 64_000_000  # 64MB
DISK_LIMIT = RETENTION * 1.10
RSS_LIMIT_KB = 300 * 1000
EVENT_BYTES = 8192  # --store-event-bytes' default


def _request(port, path, body):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


class _Conn:
    """One keep-alive connection with at most one request in flight."""

    def __init__(self, port, source):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((source, 0))
        self.sock.settimeout(5)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.buf = b""
        self.out = b""
        self.busy = False


def _parse(buf):
    """(status, request id, bytes used) of the first whole answer in `buf`, or None."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = buf[:end].decode("latin-1")
    length = 0
    request_id = None
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value.strip())
        elif name.lower() == "x-request-id":
            request_id = value.strip()
    if len(buf) < end + 4 + length:
        return None
    return int(head.split(" ", 2)[1]), request_id, end + 4 + length


def _load(port, source, requests_, connections, seconds, rate, results):
    """Sends `requests_` (cycled) over `connections` keep-alive connections
    from `source` for `seconds`, paced to `rate` a second (0: as fast as
    answered). Puts (answers [(time, status, request id)], errors) on `results`."""
    answers = []
    errors = 0
    sel = selectors.DefaultSelector()
    conns = []
    for _ in range(connections):
        try:
            c = _Conn(port, source)
        except OSError:
            errors += 1
            continue
        conns.append(c)
        sel.register(c.sock, selectors.EVENT_READ, c)
    started = time.monotonic()
    sent = 0
    n = 0
    while time.monotonic() - started < seconds:
        now = time.monotonic()
        allowed = (now - started) * rate if rate else float("inf")
        for c in conns:
            if not c.busy and sent < allowed:
                c.out = requests_[n % len(requests_)]
                n += 1
                sent += 1
                c.busy = True
                try:
                    c.sock.setblocking(True)
                    c.sock.sendall(c.out)
                    c.sock.setblocking(False)
                except OSError:
                    errors += 1
                    c.busy = False
        for key, _ in sel.select(timeout=0.01):
            c = key.data
            try:
                chunk = c.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                errors += 1
                sel.unregister(c.sock)
                c.sock.close()
                conns.remove(c)
                try:
                    fresh = _Conn(port, source)
                    conns.append(fresh)
                    sel.register(fresh.sock, selectors.EVENT_READ, fresh)
                except OSError:
                    pass
                continue
            c.buf += chunk
            parsed = _parse(c.buf)
            if parsed:
                status, request_id, used = parsed
                c.buf = c.buf[used:]
                c.busy = False
                answers.append((time.time(), status, request_id))
    for c in conns:
        c.sock.close()
    results.put((answers, errors))


def _run_load(port, sources, requests_, connections, seconds, rate):
    """The load from one process per address; returns its answers and errors."""
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    per = rate / len(sources) if rate else 0
    procs = [ctx.Process(target=_load, args=(port, src, requests_, connections, seconds, per, results))
             for src in sources]
    for p in procs:
        p.start()
    return procs, results


def _collect(procs, results, seconds):
    answers, errors = [], 0
    for _ in procs:
        a, e = results.get(timeout=seconds + 60)
        answers += a
        errors += e
    for p in procs:
        p.join(timeout=10)
    return answers, errors


def _disk_bytes(folder):
    total = 0
    for name in os.listdir(folder):
        try:
            total += os.path.getsize(os.path.join(folder, name))
        except OSError:
            pass
    return total


def _history_pages(server, query, stop):
    """Every event of /api/history?{query}, newest first, page by page (1,000
    a page), until `stop(event)` says the rest is older."""
    events = []
    cursor = None
    while True:
        path = f"/api/history?{query}&limit=1000" + (f"&cursor={cursor}" if cursor is not None else "")
        r = server.get(path, timeout=30)
        assert r.status_code == 200, r.text[:500]
        page = r.json()
        batch = page["events"]
        events += batch
        if not batch or page.get("next") is None or any(stop(e) for e in batch):
            return events
        cursor = page["next"]


def _perform_requests(s):
    """Four loop threads and, for each, a waited perform of `echo` with a 60 kB argument."""
    threads = [s.thread(run={"style": "loop"}) for _ in range(4)]
    blob = "x" * 60_000
    return [_request(s.port, f"/api/threads/{t}/perform",
                     {"selector": "echo", "args": {"blob": blob}, "waitUntilDone": True})
            for t in threads]


def _sampled_flood(s, sources, requests_, seconds, samples_after=0):
    """Floods `requests_` from `sources` for `seconds` while a thread samples the data folder's
    bytes and the server's RSS every 0.5 s, until the writer has drained its queue and the
    sampler has taken `samples_after` more samples. Returns (answers, errors, samples, the
    flood's end as a Unix time); a sample is (seconds since the start, disk bytes, RSS kB)."""
    data_dir = os.path.join(s.dir, "data")
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((round(time.monotonic() - t0, 1), _disk_bytes(data_dir), s.rss_kb()))
            stop.wait(0.5)

    t0 = time.monotonic()
    procs, results = _run_load(s.port, sources, requests_, 4, seconds, 0)
    sampler = threading.Thread(target=sample)
    sampler.start()
    answers, errors = _collect(procs, results, seconds)
    flood_end = time.time()
    # The writer catches up (its queue empties), and memory goes back.
    wait_until(lambda: s.get("/api/store").json()["queued"] == 0, 60, "the writer drained its queue")
    drained = len(samples)
    wait_until(lambda: len(samples) >= drained + samples_after, 30, f"{samples_after} samples after the drain")
    stop.set()
    sampler.join()
    return answers, errors, samples, flood_end


def test_flood_of_60kb_performs_keeps_disk_and_rss_within_budget(server_factory):
    s = server_factory("--retention-size", "64MB", log_level="warning")
    sources = [f"127.0.0.{i}" for i in range(10, 16)]  # six addresses
    # Two more samples after the drain, for the record.
    answers, errors, samples, flood_end = _sampled_flood(s, sources, _perform_requests(s), FLOOD_SECONDS, 2)
    store = s.get("/api/store").json()
    rss_after_kb = s.rss_kb()

    ok = [a for a in answers if a[1] == 200]
    rate = len(ok) / FLOOD_SECONDS
    peak_disk = max(d for _, d, _ in samples)
    peak_rss = max(r for _, _, r in samples)
    figure("history_flood_requests_ok", len(ok))
    figure("history_flood_rate_per_s", round(rate, 1))
    figure("history_flood_errors", errors)
    figure("history_flood_peak_disk_bytes", peak_disk)
    figure("history_flood_peak_rss_kb", peak_rss)
    figure("history_flood_rss_after_drain_kb", rss_after_kb)
    figure("history_flood_store", {k: store.get(k) for k in
                                   ("written", "dropped", "pruned", "cut", "queuedBytes", "diskBytes", "batches")})
    figure("history_flood_samples_t_disk_rsskb", samples)
    assert len(ok) > 1000, f"the flood got {len(ok)} answers (errors {errors})"
    over_disk = [x for x in samples if x[1] > DISK_LIMIT]
    over_rss = [x for x in samples if x[2] > RSS_LIMIT_KB]
    assert not over_disk, f"data folder over 64 MB + 10 %: {over_disk[:10]}"
    assert not over_rss, f"RSS over 300 MB: {over_rss[:10]}"
    assert store["cut"] >= len(ok), store
    assert s.alive()

    # Every request answered in the flood's last minute is readable, with its perform.
    since = flood_end - 60
    wanted = {a[2] for a in ok if a[0] >= since}
    assert None not in wanted, "an answer without X-Request-Id"
    kept = _history_pages(s, "type=request", lambda e: e["at"] < _iso(since - 5))
    found = {e["data"].get("requestId") for e in kept}
    missing = wanted - found
    figure("history_flood_last_minute_requests", len(wanted))
    figure("history_flood_last_minute_missing", len(missing))
    assert not missing, f"{len(missing)} of the last minute's {len(wanted)} requests are not readable"
    r = s.get("/api/history?type=perform&limit=5", timeout=30)
    assert r.status_code == 200, r.text[:500]
    performs = r.json()["events"]
    assert performs, "no perform kept"
    for e in performs:
        # Cut with a visible marker, within the cap; the small members whole.
        assert e["data"]["storedCut"]["max"] == EVENT_BYTES, e["data"]
        assert e["data"]["result"]["cut"] > 60_000, e["data"]
        assert e["data"]["selector"] == "echo" and e["data"]["ok"] is True
        assert len(json.dumps(e["data"], separators=(",", ":"), ensure_ascii=False).encode()) <= EVENT_BYTES


def test_flood_of_whole_60kb_events_is_pruned_within_the_disk_bound(server_factory):
    """The disk bound under pruning: the same flood with events kept whole
    (`--store-event-bytes 128KiB`: about 120 KB stored per request, far more
    than 64 MB a minute), so retention runs all along. The folder stays under
    64 MB + 10 % and RSS under 300 MB at every sample, and the newest answered
    requests are all readable afterwards (a prune never deletes the newest)."""
    s = server_factory("--retention-size", "64MB", "--store-event-bytes", "128KiB", log_level="warning")
    sources = [f"127.0.0.{i}" for i in range(16, 22)]
    answers, errors, samples, _ = _sampled_flood(s, sources, _perform_requests(s), STRESS_SECONDS)
    store = s.get("/api/store").json()
    ok = sorted((a for a in answers if a[1] == 200), key=lambda a: a[0])
    figure("history_stress_requests_ok", len(ok))
    figure("history_stress_rate_per_s", round(len(ok) / STRESS_SECONDS, 1))
    figure("history_stress_peak_disk_bytes", max(d for _, d, _ in samples))
    figure("history_stress_peak_rss_kb", max(r for _, _, r in samples))
    figure("history_stress_store", {k: store.get(k) for k in
                                    ("written", "dropped", "pruned", "cut", "diskBytes", "batches", "lastCommitMs")})
    figure("history_stress_samples_t_disk_rsskb", samples)
    assert len(ok) > 500, f"the flood got {len(ok)} answers (errors {errors})"
    assert store["pruned"] > 0, "the flood never reached the size bound: it proves nothing"
    assert store["cut"] == 0, store
    over_disk = [x for x in samples if x[1] > DISK_LIMIT]
    over_rss = [x for x in samples if x[2] > RSS_LIMIT_KB]
    assert not over_disk, f"data folder over 64 MB + 10 %: {over_disk[:10]}"
    assert not over_rss, f"RSS over 300 MB: {over_rss[:10]}"
    # The newest 100 answered requests are all kept, whole.
    newest = {a[2] for a in ok[-100:]}
    kept = _history_pages(s, "type=request", lambda e: False)
    found = {e["data"].get("requestId") for e in kept}
    figure("history_stress_requests_kept", len(found))
    assert newest <= found, f"{len(newest - found)} of the newest 100 requests are not readable"
    assert s.alive()


def _iso(seconds):
    """The API's timestamp text for `seconds` since 1970 (UTC, milliseconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


def test_retention_size_below_the_floor_is_refused_and_at_the_floor_history_never_empties(server_factory, tmp_path):
    # 1. Refused at start, with the floor and the empty store's size.
    out = subprocess.run([BIN, "serve", "--port", "0", "--data-dir", str(tmp_path / "refused"),
                          "--retention-size", "300KB"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 64, out.stderr
    found = re.search(r"at least (\d+) bytes .*an empty store measures (\d+) bytes", out.stderr)
    assert found, out.stderr
    floor, empty = int(found.group(1)), int(found.group(2))
    figure("history_floor_bytes", floor)
    figure("history_empty_store_bytes", empty)
    assert not os.path.exists(tmp_path / "refused" / "history.sqlite")

    # 2. At the floor under load: every history sample holds events.
    s = server_factory("--retention-size", str(floor), log_level="warning")
    threads = [s.thread(run={"style": "loop"}) for _ in range(4)]
    requests_ = [_request(s.port, f"/api/threads/{t}/perform",
                          {"selector": "echo", "args": {"n": 1}, "waitUntilDone": True}) for t in threads]
    sources = [f"127.0.0.{i}" for i in range(20, 24)]
    samples = []
    stop = threading.Event()
    data_dir = os.path.join(s.dir, "data")

    def sample():
        while not stop.is_set():
            r = s.get("/api/history?limit=20", timeout=5)
            count = len(r.json()["events"]) if r.status_code == 200 else -r.status_code
            samples.append((round(time.monotonic() - t0, 1), count, _disk_bytes(data_dir)))
            stop.wait(0.5)

    t0 = time.monotonic()
    procs, results = _run_load(s.port, sources, requests_, 8, FLOOR_SECONDS, FLOOR_RATE)
    sampler = threading.Thread(target=sample)
    sampler.start()
    answers, errors = _collect(procs, results, FLOOR_SECONDS)
    stop.set()
    sampler.join()
    store = s.get("/api/store").json()
    ok = sum(1 for a in answers if a[1] == 200)
    figure("history_floor_offered_rate_per_s", FLOOR_RATE)
    figure("history_floor_answered_rate_per_s", round(ok / FLOOR_SECONDS, 1))
    figure("history_floor_samples_t_events_disk", samples)
    figure("history_floor_store", {k: store.get(k) for k in ("written", "dropped", "pruned", "diskBytes")})
    assert ok > 1000, f"the load got {ok} answers (errors {errors})"
    assert store["pruned"] > 0, "the load never reached the size bound: it proves nothing"
    assert len(samples) >= FLOOR_SECONDS, f"{len(samples)} samples"
    empty_samples = [x for x in samples if x[1] <= 0]
    assert not empty_samples, f"history samples without events: {empty_samples[:10]}"
    assert s.alive()
