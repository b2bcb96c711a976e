"""The liveness prober itself (probes.Liveness), against issue 22's freeze
as the debug build can stage it: RUNLOOPD_TEST_FAULT=stuck-lock makes a thread
(rl-fault) take the event hub's lock for good, as the re-entry did. The prober
must see the gap, say which probe stopped, and carry the server's backtraces
(gdb) naming that thread. Skipped on a release build (no fault switch)."""

import threading

import pytest
import requests

from conftest import Server
from probes import Liveness, raw_exchange


def test_the_prober_catches_a_stuck_hub_lock_with_backtraces():
    s = Server(env={"RUNLOOPD_TEST_FAULT": "stuck-lock"})
    probe = None
    clients = []
    try:
        # The switch is logged just after the port file is written.
        logged = threading.Event()
        for _ in range(60):  # at most 3 s
            if "test fault injected" in s.log_text():
                break
            logged.wait(0.05)
        else:
            pytest.skip("a build without RUNLOOPD_TEST_FAULT (release)")
        probe = Liveness(s, threshold=1.0).start()
        # A browser's EventSource (re)connecting: opening a stream takes the
        # hub's lock on the control loop, which wedges /api; and every event
        # published meanwhile waits for the lock too.
        def quietly(call):
            try:
                call()
            except (OSError, requests.RequestException):
                pass  # the server is killed under it

        clients = [threading.Thread(target=quietly, args=(lambda: raw_exchange(
                       s.port, b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nLast-Event-ID: 1\r\n\r\n",
                       read_timeout=10),), daemon=True),
                   threading.Thread(target=quietly, args=(lambda: s.post("/api/threads", {}, timeout=10),),
                                    daemon=True)]
        for t in clients:
            t.start()
        done = threading.Event()
        for _ in range(200):  # at most 20 s for the gap and the report
            if probe.report is not None:
                break
            done.wait(0.1)
        probe.stop()
        problem = probe.problem()
        assert problem, probe.summary()
        assert "/api/version unanswered" in problem, problem[:2000]
        assert "rl-fault" in problem, problem[:4000]
        assert "Thread " in problem and "#0" in problem, "no gdb backtraces:\n" + problem[:4000]
    finally:
        if probe is not None:
            probe.stop()
        s.kill()
        for t in clients:
            t.join(timeout=15)
