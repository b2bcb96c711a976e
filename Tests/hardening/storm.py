"""The storm the fuzzer runs beside (issue 22's conditions): busy loops with
observers on every activity and 5 ms timers, SSE clients that reconnect with
Last-Event-ID, and stalled SSE readers that overflow their streams. Every
client loop is bounded and ends on stop()."""

import collections
import os
import random
import re
import socket
import struct
import threading
import time

import requests

from probes import status_of

STORM_LOOPS = int(os.environ.get("HARDENING_STORM_LOOPS", "3"))
STORM_RESUMERS = int(os.environ.get("HARDENING_STORM_RESUMERS", "3"))
STORM_STALLED = int(os.environ.get("HARDENING_STORM_STALLED", "6"))
STORM_SOURCE = "127.0.0.4"  # the storm's SSE clients (their own per-IP budget)


class Storm:
    """Busy loops with observers, resuming SSE clients and stalled SSE readers
    (see the module docstring); every client loop ends on stop() or after
    `seconds`, and makes at most 2,000 connections."""

    def __init__(self, server, seconds, loops=STORM_LOOPS, resumers=STORM_RESUMERS, stalled=STORM_STALLED):
        self.s = server
        self.until = time.monotonic() + seconds
        self.loops = loops
        self.resumers = resumers
        self.stalled = stalled
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.stats = collections.Counter()
        self.last_id = None
        # (when, id) every 0.25 s at most: resume points of every age, so
        # replays range from nothing to --replay-limit events.
        self.milestones = collections.deque(maxlen=5000)
        self.threads = []
        self.loop_ids = []
        self.errors = []

    # (a) busy loops
    def _make_loop(self, i):
        tid = self.s.thread(name=f"storm{i}")
        for mode in ("common", "default"):
            r = self.s.post(f"/api/threads/{tid}/observers", {"activities": "all", "mode": mode})
            assert r.status_code == 201, r.text
        r = self.s.post(f"/api/threads/{tid}/timers", {"interval": 0.005, "mode": "common"})
        assert r.status_code == 201, r.text
        return tid

    def _keep_loops(self):
        """Recreates a storm loop the fuzzer ended (at most 100 times): its
        stateful phase ends the threads it finds."""
        for _ in range(100_000):
            if self.stopping.wait(1.0) or time.monotonic() > self.until:
                return
            for i, tid in enumerate(list(self.loop_ids)):
                try:
                    r = self.s.get(f"/api/threads/{tid}", timeout=5)
                    if r.status_code == 404 or r.json().get("state") == "exited":
                        if self.stats["loops_recreated"] < 100:
                            self.loop_ids[i] = self._make_loop(i)
                            self.stats["loops_recreated"] += 1
                except (requests.RequestException, ValueError, AssertionError):
                    self.stats["loop_check_errors"] += 1

    # SSE plumbing
    def _open(self, last_event_id=None, rcvbuf=None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind((STORM_SOURCE, 0))
        sock.settimeout(5)
        sock.connect(("127.0.0.1", self.s.port))
        head = ["GET /api/events HTTP/1.1", f"Host: 127.0.0.1:{self.s.port}", "Accept: text/event-stream"]
        if last_event_id is not None:
            head.append(f"Last-Event-ID: {last_event_id}")
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        with self.lock:
            self.stats["sse_connections"] += 1
            if last_event_id is not None:
                self.stats["sse_resumes_with_last_event_id"] += 1
        return sock

    def _scan(self, tail, chunk):
        """Ids and resumed events in `chunk` (with the tail of the one before);
        returns the new tail and the last id seen or None."""
        text = tail + chunk
        # Only matches that end in the new chunk (the tail's were counted).
        ids = [m.group(1) for m in re.finditer(rb"\nid: (\d+)\n", text) if m.end() > len(tail)]
        resumed = [m.group(1) for m in re.finditer(rb"event: resumed\ndata: [^\n]*\"replayed\":(\d+)", text)
                   if m.end() > len(tail)]
        with self.lock:
            if ids:
                self.last_id = int(ids[-1])
                self.stats["ids_seen"] += len(ids)
                now = time.monotonic()
                if not self.milestones or now - self.milestones[-1][0] >= 0.25:
                    self.milestones.append((now, self.last_id))
            if resumed:
                self.stats["resumed_events"] += len(resumed)
                self.stats["replayed_events"] += sum(int(n) for n in resumed)
                self.stats["replayed_max"] = max([self.stats["replayed_max"]] + [int(n) for n in resumed])
        return text[-96:], (int(ids[-1]) if ids else None)

    def _pick_id(self, rng):
        """A Last-Event-ID to resume from: half the time one of the last 20 s
        (a replay around the size of a stream's buffers), else any age, else
        the newest."""
        with self.lock:
            if not self.milestones:
                return self.last_id
            r = rng.random()
            if r < 0.5:
                recent = [i for t, i in self.milestones if t > time.monotonic() - 20]
                return rng.choice(recent) if recent else self.milestones[-1][1]
            if r < 0.8:
                return rng.choice(self.milestones)[1]
            return self.last_id

    # (b) resumers
    def _receive(self, sock, until, step, reads):
        """Yields what `sock` receives until `until` (or the storm stops), at
        most `reads` reads, waiting at most `step` s per read; a closed
        connection yields b"" and ends it."""
        for _ in range(reads):
            left = until - time.monotonic()
            if left <= 0 or self.stopping.is_set():
                return
            sock.settimeout(min(step, left))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            yield chunk
            if not chunk:
                return

    def _resumer(self, n):
        rng = random.Random(n)
        last = None
        for round_ in range(2000):
            if self.stopping.is_set() or time.monotonic() > self.until:
                return
            # Mostly where this client left off (what a browser does), every
            # third time an id from elsewhere in the stream.
            resume = None if not round_ else (self._pick_id(rng) if round_ % 3 == 2 or last is None else last)
            try:
                sock = self._open(resume)
            except OSError:
                with self.lock:
                    self.stats["sse_connect_failed"] += 1
                self.stopping.wait(0.2)
                continue
            got, tail = b"", b""
            try:
                hold_until = time.monotonic() + rng.uniform(1.0, 2.0)
                for chunk in self._receive(sock, hold_until, step=0.2, reads=100_000):
                    if not chunk:
                        with self.lock:
                            self.stats["resumer_closed_by_server"] += 1
                        break
                    if len(got) < 64:
                        got += chunk
                    tail, seen = self._scan(tail, chunk)
                    last = seen if seen is not None else last
            except OSError:
                with self.lock:
                    self.stats["resumer_reset"] += 1
            finally:
                if status_of(got) == 429:
                    with self.lock:
                        self.stats["sse_429"] += 1
                if round_ % 2:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()

    # (c) stalled readers
    def _stalled(self, n):
        rng = random.Random(100 + n)
        for round_ in range(2000):
            if self.stopping.is_set() or time.monotonic() > self.until:
                return
            resume = self._pick_id(rng) if (n + round_) % 4 else None
            try:
                sock = self._open(resume, rcvbuf=4096)
            except OSError:
                with self.lock:
                    self.stats["sse_connect_failed"] += 1
                self.stopping.wait(0.2)
                continue
            try:
                try:
                    sock.settimeout(3)
                    sock.recv(300)  # a few bytes, then nothing for a long time
                except socket.timeout:
                    pass
                if self.stopping.wait(rng.uniform(2.0, 5.0)):
                    return
                # Drain what is queued: a dropped client reaches the end (or a
                # reset) quickly; one still served keeps receiving for 5 s.
                tail = b""
                outcome = "stalled_survived"
                drain_until = time.monotonic() + 5
                for chunk in self._receive(sock, drain_until, step=0.5, reads=1_000_000):
                    if not chunk:
                        outcome = "stalled_dropped"
                        break
                    tail, _ = self._scan(tail, chunk)
                with self.lock:
                    self.stats[outcome] += 1
            except OSError:
                with self.lock:
                    self.stats["stalled_dropped"] += 1  # a reset: dropped too
            finally:
                sock.close()

    def start(self):
        for i in range(self.loops):
            self.loop_ids.append(self._make_loop(i))
        targets = [(self._keep_loops, ())]
        targets += [(self._resumer, (n,)) for n in range(self.resumers)]
        targets += [(self._stalled, (n,)) for n in range(self.stalled)]
        for target, args in targets:
            t = threading.Thread(target=self._guard, args=(target, args), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def _guard(self, target, args):
        try:
            target(*args)
        except Exception as error:  # reported in the figures, never silent
            with self.lock:
                self.errors.append(f"{target.__name__}: {type(error).__name__}: {error}")

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        return {k: v for k, v in sorted(self.stats.items())}

    def cleanup(self):
        for tid in self.loop_ids:
            try:
                self.s.delete(f"/api/threads/{tid}", timeout=20)
            except requests.RequestException:
                pass
