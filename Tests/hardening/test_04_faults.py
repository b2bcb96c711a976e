"""Faults inside loops: a worker blocked 10 s, a worker ended under pending
performs, failing selectors, and every limit hit by concurrent clients. The
liveness prober (probes.Liveness: /healthz and /api/version every 100 ms
from 127.0.0.3) watches every server: a loop blocked in a handler must never
stall the HTTP thread or the control loop for over 2 s."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import figure, wait_until

LIMITS = {"threads": 8, "timers": 16, "queued": 32, "tasks": 10}


@pytest.fixture
def server(server_factory):
    return server_factory("--max-threads", str(LIMITS["threads"]), "--max-timers", str(LIMITS["timers"]),
                          "--max-queued", str(LIMITS["queued"]), "--max-tasks", str(LIMITS["tasks"]),
                          "--max-wait", "30", "--max-connections-per-ip", "0")


def test_a_worker_blocked_ten_seconds_does_not_stall_the_others(server):
    blocked = server.thread(name="blocked")
    other = server.thread(name="other")
    r = server.post(f"/api/threads/{other}/timers", {"interval": 0.05})
    assert r.status_code == 201
    timer = r.json()["id"]
    r = server.post(f"/api/threads/{blocked}/perform", {"selector": "sleep", "args": {"ms": 10000}})
    assert r.status_code == 202
    wait_until(lambda: server.get(f"/api/threads/{blocked}").json()["state"] == "running", 5, "the sleep perform running")
    started = time.monotonic()
    worst = {"control": 0.0, "other": 0.0}
    timeouts = 0
    fires0 = server.get(f"/api/threads/{other}/timers/{timer}").json()["fires"]
    with ThreadPoolExecutor(4) as pool:
        # Waits on the blocked thread pass their timeout, in parallel: 202, the
        # perform accepted and still queued (not a server error).
        waits = [pool.submit(server.post, f"/api/threads/{blocked}/perform",
                             {"selector": "echo", "args": {"i": i}, "waitUntilDone": True, "timeout": 1.0})
                 for i in range(3)]
        while time.monotonic() - started < 6:
            t0 = time.monotonic()
            assert server.get("/api/threads").status_code == 200
            worst["control"] = max(worst["control"], time.monotonic() - t0)
            t0 = time.monotonic()
            r = server.post(f"/api/threads/{other}/perform", {"selector": "echo", "waitUntilDone": True, "timeout": 2})
            assert r.status_code == 200 and r.json()["ok"], r.text
            worst["other"] = max(worst["other"], time.monotonic() - t0)
        for w in waits:
            r = w.result(timeout=10)
            assert r.status_code == 202, r.text
            assert r.json()["state"] == "pending" and r.json()["follow"].endswith(r.json()["performId"])
            timeouts += 1
    fires1 = server.get(f"/api/threads/{other}/timers/{timer}").json()["fires"]
    figure("blocked_worker_control_max_ms", round(worst["control"] * 1000, 1))
    figure("blocked_worker_other_perform_max_ms", round(worst["other"] * 1000, 1))
    assert worst["control"] < 0.5 and worst["other"] < 0.5, worst
    assert fires1 - fires0 > 50, "the other worker's timer stopped firing"
    assert timeouts == 3
    state = server.get(f"/api/threads/{blocked}").json()
    assert len(state["pendingPerforms"]) == 3  # they stay queued, as CF would leave them
    # Once the sleep returns (10 s), the queued echoes run and the thread is idle again.
    wait_until(lambda: server.get(f"/api/threads/{blocked}").json()["pendingPerforms"] == [], 10,
               "the queued echoes ran once the sleep returned")


def test_ending_a_worker_answers_every_pending_caller(server):
    tid = server.thread(run={"style": "manual"})  # never runs: performs stay pending
    with ThreadPoolExecutor(24) as pool:
        waits = [pool.submit(server.post, f"/api/threads/{tid}/perform",
                             {"selector": "count", "waitUntilDone": True, "timeout": 25})
                 for _ in range(20)]
        delayed = [pool.submit(server.post, f"/api/threads/{tid}/perform",
                               {"selector": "count", "waitUntilDone": True, "timeout": 25, "afterDelay": 20})
                   for _ in range(4)]
        wait_until(lambda: len(server.get(f"/api/threads/{tid}").json()["pendingPerforms"]) == 24, 10,
                   "all 24 performs pending")
        started = time.monotonic()
        ended = server.delete(f"/api/threads/{tid}")
        assert ended.status_code == 200 and ended.json()["state"] == "exited"
        answers = [w.result(timeout=10) for w in waits + delayed]
        took = time.monotonic() - started
    figure("pending_callers_answered_on_end", len(answers))
    figure("pending_callers_answer_seconds", round(took, 2))
    for r in answers:
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "thread_ended"
    assert took < 5
    assert server.get(f"/api/threads/{tid}").json()["pendingPerforms"] == []


def test_fail_is_reported_never_fatal(server):
    tid = server.thread()
    for _ in range(20):
        r = server.post(f"/api/threads/{tid}/perform",
                        {"selector": "fail", "args": {"message": "boom"}, "waitUntilDone": True, "timeout": 5})
        assert r.status_code == 200 and r.json()["ok"] is False and r.json()["error"]["message"], r.text
    r = server.post(f"/api/threads/{tid}/timers", {"interval": 0.02, "action": {"selector": "fail"}, "maxFires": 10})
    assert r.status_code == 201
    r = server.post(f"/api/threads/{tid}/tasks", {"id": "bad", "selector": "fail"})
    assert r.status_code == 201
    wait_until(lambda: server.get(f"/api/threads/{tid}/tasks").json()["failed"] >= 1, 5, "the failing task ran")
    assert server.get(f"/api/threads/{tid}/tasks").json()["failed"] == 1
    state = server.get(f"/api/threads/{tid}").json()
    assert state["state"] in ("running", "waiting")
    r = server.post(f"/api/threads/{tid}/perform", {"selector": "echo", "args": {"x": 1}, "waitUntilDone": True})
    assert r.status_code == 200 and r.json()["result"] == {"x": 1}
    assert server.alive()


def _burst(server, n, method, path, body=None):
    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(server.request, method, path, body if body is None else dict(body, **({"id": f"k{i}"} if "id" in body else {})))
                   for i in range(n)]
        return [f.result(timeout=60) for f in futures]


def _refusals_carry_retry_after(responses, status):
    refused = [r for r in responses if r.status_code == status]
    for r in refused:
        assert r.headers.get("Retry-After"), f"{status} without Retry-After: {r.text}"
    return len(refused)


def test_limits_hit_by_concurrent_clients_are_exact(server):
    counts = {}
    # threads: 8 alive at once
    got = _burst(server, 20, "POST", "/api/threads", {"run": {"style": "manual"}})
    created = [r for r in got if r.status_code == 201]
    counts["threads"] = (len(created), _refusals_carry_retry_after(got, 429))
    assert counts["threads"] == (LIMITS["threads"], 20 - LIMITS["threads"]), [r.status_code for r in got]
    ids = [r.json()["id"] for r in created]
    tid = ids[0]
    # timers: 16 per thread
    got = _burst(server, 40, "POST", f"/api/threads/{tid}/timers", {"interval": 60})
    counts["timers"] = (sum(r.status_code == 201 for r in got), _refusals_carry_retry_after(got, 429))
    assert counts["timers"] == (LIMITS["timers"], 40 - LIMITS["timers"])
    # queued performs: 32 per thread (manual thread: nothing runs them)
    got = _burst(server, 80, "POST", f"/api/threads/{ids[1]}/perform", {"selector": "count"})
    counts["queued"] = (sum(r.status_code == 202 for r in got), _refusals_carry_retry_after(got, 429))
    assert counts["queued"] == (LIMITS["queued"], 80 - LIMITS["queued"])
    # tasks: capacity 10; a full task queue is a limit like the others: 429 queue_full
    # (_burst gives each request its own id: a repeated id would be 409 task_exists)
    assert server.post(f"/api/threads/{ids[2]}/tasks/suspend").status_code == 200
    got = _burst(server, 30, "POST", f"/api/threads/{ids[2]}/tasks", {"id": "x", "selector": "count"})
    full = [r for r in got if r.status_code == 429]
    assert all(r.json()["error"]["code"] == "queue_full" for r in full)
    counts["tasks"] = (sum(r.status_code == 201 for r in got), _refusals_carry_retry_after(got, 429))
    assert counts["tasks"] == (LIMITS["tasks"], 30 - LIMITS["tasks"])
    # After freeing one thread, exactly one more can be created.
    assert server.delete(f"/api/threads/{ids[-1]}").status_code == 200
    got = _burst(server, 10, "POST", "/api/threads", {"run": {"style": "manual"}})
    assert sum(r.status_code == 201 for r in got) == 1
    figure("limit_counts_accepted_refused", counts)
    assert server.metric("runloopd_limit_refusals_total") >= 12 + 24 + 48 + 20 + 9


def test_a_wait_never_outlasts_max_wait(server_factory):
    """Regression: waitUntilDone with afterDelay 3600 held the connection for
    afterDelay + timeout (found by schemathesis: 53,622 s); the caller now gets
    its answer at --max-wait (202: accepted, still delayed) and the delayed
    perform stays pending."""
    s = server_factory("--max-wait", "1")
    tid = s.thread()
    started = time.monotonic()
    r = s.post(f"/api/threads/{tid}/perform",
               {"selector": "echo", "waitUntilDone": True, "afterDelay": 3600}, timeout=10)
    took = time.monotonic() - started
    assert r.status_code == 202 and r.json()["state"] == "delayed", r.text
    assert took < 3, took
    assert len(s.get(f"/api/threads/{tid}").json()["pendingPerforms"]) == 1
    # A bare perform is valid under a small --max-wait (its default timeout is capped).
    r = s.post(f"/api/threads/{tid}/perform", {"selector": "count", "waitUntilDone": True})
    assert r.status_code == 200, r.text
