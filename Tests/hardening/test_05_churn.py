"""Churn: create/end many workers and add/remove many timers under 8 concurrent
clients; no crash, and descriptors / threads / RSS back to baseline.

Issue 7 asks for 10,000 workers and 100,000 timers. Workers: the full 10,000
(HARDENING_CHURN_WORKERS). Timers: 20,000 add/remove pairs by default
(HARDENING_CHURN_TIMERS), a fifth, because 40,000 requests from Python take
about a minute on the 2-core machine this suite is sized for; set 100000 for
the full figure (about 5 minutes).
The liveness prober (probes.Liveness: /healthz and /api/version every 100 ms
from 127.0.0.3) watches the server through the churn: a gap over 2 s between
answers fails the test with the server's backtraces.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from conftest import figure, steady

WORKERS = int(os.environ.get("HARDENING_CHURN_WORKERS", "10000"))
TIMERS = int(os.environ.get("HARDENING_CHURN_TIMERS", "20000"))
CLIENTS = 8


def _numbers(s):
    return {"fds": s.fds(), "threads": s.threads(), "rss_kb": s.rss_kb()}


def _worker_client(base, n, style):
    http = requests.Session()
    for i in range(n):
        r = http.post(base + "/api/threads", json={"run": {"style": style}, "keepAlive": "port"}, timeout=30)
        assert r.status_code == 201, r.text
        tid = r.json()["id"]
        if i % 4 == 0:  # some with a timer and a perform in flight when they end
            http.post(f"{base}/api/threads/{tid}/timers", json={"interval": 0.001}, timeout=30)
            http.post(f"{base}/api/threads/{tid}/perform", json={"selector": "count"}, timeout=30)
        r = http.delete(f"{base}/api/threads/{tid}", timeout=30)
        assert r.status_code == 200 and r.json()["state"] == "exited", r.text
    return n


def _timer_client(base, tid, n):
    http = requests.Session()
    for i in range(n):
        r = http.post(f"{base}/api/threads/{tid}/timers", json={"interval": 0.01 + (i % 7) * 0.001}, timeout=30)
        assert r.status_code == 201, r.text
        r = http.delete(f"{base}/api/threads/{tid}/timers/{r.json()['id']}", timeout=30)
        assert r.status_code == 200 and r.json()["valid"] is False, r.text
    return n


def _settle(s, baseline, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = _numbers(s)
        if now["fds"] <= baseline["fds"] + 2 and now["threads"] <= baseline["threads"] + 4:
            return now
        time.sleep(0.25)
    return _numbers(s)


def test_worker_and_timer_churn_returns_to_baseline(server_factory):
    s = server_factory("--max-threads", "64", "--max-timers", "256", "--log-level", "error",
                       log_level="error")
    # Warm-up round, so pools and caches exist before the baseline.
    _worker_client(s.base, 16, "loop")
    keeper = s.thread(name="timers")
    _timer_client(s.base, keeper, 200)
    steady(lambda: (s.fds(), s.threads()), 10, "descriptors and threads steady after the warm-up")
    baseline = _numbers(s)

    # Three equal rounds: a leak grows RSS in every round by the same amount;
    # glibc's arenas and thread-stack cache grow in the first and then level
    # off (measured: +12.5 MB, +0.6, +0.6, +0.03 MB for rounds of 3000). A DELETE's
    # --end-wait deadline is cancelled when the thread ends (Deadlines), so
    # nothing of a round outlives it: each round settles at once.
    started = time.monotonic()
    styles = ["loop", "manual", "forever", "loop"]
    per = WORKERS // CLIENTS // 3
    done = 0
    rounds = []
    for _ in range(3):
        with ThreadPoolExecutor(CLIENTS) as pool:
            done += sum(f.result() for f in [pool.submit(_worker_client, s.base, per, styles[i % 4]) for i in range(CLIENTS)])
        rounds.append(_settle(s, baseline))
    worker_seconds = time.monotonic() - started
    assert done == per * CLIENTS * 3
    after_workers = rounds[-1]
    figure("churn_rss_kb_after_rounds", [r["rss_kb"] for r in rounds])
    assert rounds[2]["rss_kb"] - rounds[1]["rss_kb"] < 3 * 1024, rounds

    started = time.monotonic()
    per = TIMERS // CLIENTS
    with ThreadPoolExecutor(CLIENTS) as pool:
        done_timers = sum(f.result() for f in [pool.submit(_timer_client, s.base, keeper, per) for _ in range(CLIENTS)])
    timer_seconds = time.monotonic() - started
    assert done_timers == per * CLIENTS
    after = _settle(s, baseline)
    listed = s.get(f"/api/threads/{keeper}").json()
    assert listed["counts"]["timers"] == 0

    figure("churn_workers", done)
    figure("churn_workers_seconds", round(worker_seconds, 1))
    figure("churn_timers", done_timers)
    figure("churn_timers_seconds", round(timer_seconds, 1))
    figure("churn_baseline", baseline)
    figure("churn_after_workers", after_workers)
    figure("churn_after_timers", after)
    assert s.alive() and s.healthy()
    assert after["fds"] <= baseline["fds"] + 2, (baseline, after)
    # +4: idle Dispatch pool threads come and go.
    assert after["threads"] <= baseline["threads"] + 4, (baseline, after)
    # RSS: glibc keeps a malloc arena per CPU-heavy thread and caches pages;
    # the round-over-round check above is the leak test, this the ceiling.
    assert after["rss_kb"] < baseline["rss_kb"] + 24 * 1024, (baseline, after)
