"""The loop budgets of issue 37 (findings 1 and 6), attacked from many
loopback addresses (127.0.0.2 and 127.0.0.4-.30; the liveness prober keeps
127.0.0.3) against the real binary, while the prober checks that /healthz and
/api/version answer within HARDENING_LIVENESS_GAP_S (2 s):

- nesting depth (--max-nesting): 1,200 `runNested {"seconds":60}` performs on
  one loop thread. Before the budget, ~1,150 of them overflowed the thread's
  stack and killed the process. Now the depth stops at the budget, every
  further one is 429 `nesting_limit`, and DELETE unwinds the nest.
- CPU in nested runs (--max-nest-cpu): 157 timers at 100-256 us whose action
  is `runNested {"seconds":0.001}`. Before, the thread sat ~157 deep, burned
  a core, and its `run` and `DELETE` answered 504. Now it is reported
  livelocked, its run answers by its deadline and DELETE ends it at once.
- held requests (finding 6): `waitUntilDone` with `afterDelay` answers 202 at
  its `timeout`, however many are held at once.

Figures (depth reached, answers, prober gaps, CPU, times) go to the summary.
"""

import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from conftest import figure, wait_until
from probes import raw_exchange, status_of

ADDRESSES = ["127.0.0.2"] + [f"127.0.0.{i}" for i in range(4, 31)]
DEFAULT_MAX_NESTING = 128
END_WAIT_S = 15  # DELETE's own bound (the end wait)
STOP_WAIT_S = 10  # a run's bound past its seconds


def call(server, method, path, body=None, source="127.0.0.2", timeout=30):
    """One request on a fresh connection from `source`: (status, JSON or None, seconds)."""
    data = json.dumps(body).encode() if body is not None else b""
    head = (f"{method} {path} HTTP/1.1\r\nHost: {server.authority}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    started = time.monotonic()
    got, _ = raw_exchange(server.port, head.encode() + data, read_timeout=timeout, source=source)
    took = time.monotonic() - started
    payload = None
    if b"\r\n\r\n" in got:
        try:
            payload = json.loads(got.split(b"\r\n\r\n", 1)[1])
        except ValueError:
            payload = None
    return status_of(got), payload, took


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(server, name, labels=""):
    text = server.get("/metrics").text
    for line in text.splitlines():
        if line.startswith(name + labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_nesting_depth_attack_is_refused_at_the_budget(server_factory):
    server = server_factory()
    thread = server.thread()
    body = {"selector": "runNested", "args": {"seconds": 60}, "modes": ["common"]}
    statuses = {}
    codes = {}
    lock = threading.Lock()

    def one(n):
        status, payload, _ = call(server, "POST", f"/api/threads/{thread}/perform", body,
                                  source=ADDRESSES[n % len(ADDRESSES)])
        with lock:
            statuses[status] = statuses.get(status, 0) + 1
            if status == 429 and payload:
                code = payload["error"]["code"]
                codes[code] = codes.get(code, 0) + 1

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(1200)))
    attack_s = time.monotonic() - started
    assert server.alive(), server.log_text()[-3000:]
    # The nest settles at the budget: performs that passed the route's check
    # while the depth was lower are refused when they run.
    depth = wait_until(lambda: (lambda d: d if d == DEFAULT_MAX_NESTING else 0)(
        server.get(f"/api/threads/{thread}").json()["depth"]), 30, "depth never reached the budget")
    pending = server.get(f"/api/threads/{thread}").json()["counts"]["pendingPerforms"]
    assert statuses.get(202, 0) + statuses.get(429, 0) == 1200, statuses
    assert statuses.get(429, 0) > 0 and set(codes) == {"nesting_limit"}, (statuses, codes)
    peak = metric(server, "runloopd_nesting_depth", '{stat="peak"}')
    used = metric(server, "runloopd_thread_stack_bytes", '{stat="used"}')
    size = metric(server, "runloopd_thread_stack_bytes", '{stat="size"}')
    refused = metric(server, "runloopd_nested_runs_refused_total", '{reason="depth"}')
    assert peak == DEFAULT_MAX_NESTING, peak
    assert used < size / 2, (used, size)
    assert refused >= statuses[429], (refused, statuses)
    status, _, end_s = call(server, "DELETE", f"/api/threads/{thread}", source=ADDRESSES[-1], timeout=END_WAIT_S + 5)
    assert status == 200 and end_s < END_WAIT_S, (status, end_s)
    assert server.alive() and server.healthy()
    figure("loop_nesting_attack", {
        "requests": 1200, "addresses": len(ADDRESSES), "answers": statuses, "depth_reached": depth,
        "pending_after": pending, "stack_used_bytes": used, "stack_size_bytes": size,
        "attack_s": round(attack_s, 2), "delete_s": round(end_s, 3), "prober_gaps_s": server.liveness.gaps()})


def _livelock_timers(server, thread):
    rnd = random.Random(37)
    intervals = [rnd.uniform(0.0001, 0.000256) for _ in range(157)]

    def add(n):
        status, payload, _ = call(server, "POST", f"/api/threads/{thread}/timers", {
            "interval": intervals[n], "action": {"selector": "runNested", "args": {"seconds": 0.001}}},
            source=ADDRESSES[n % len(ADDRESSES)])
        assert status == 201, payload

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(add, range(157)))


def test_livelocked_nest_is_reported_and_ended(server_factory):
    server = server_factory()
    thread = server.thread(run={"style": "manual"})
    _livelock_timers(server, thread)
    cpu0 = cpu_seconds(server.pid)
    status, payload, run_s = call(server, "POST", f"/api/threads/{thread}/run", {"seconds": 5},
                                  source=ADDRESSES[1], timeout=5 + STOP_WAIT_S + 10)
    run_cpu = cpu_seconds(server.pid) - cpu0
    assert status == 200 and payload["exitReason"] == "timedOut", (status, payload)
    assert run_s < 5 + STOP_WAIT_S, run_s
    livelocks = metric(server, "runloopd_livelocks_total")
    peak = metric(server, "runloopd_nesting_depth", '{stat="peak"}')
    assert livelocks >= 1, livelocks
    warnings = server.get(f"/api/warnings?thread={thread}&code=livelock").json()["warnings"]
    assert warnings, "no livelock warning"

    # A second run, ended while it runs: DELETE answers at once and the run
    # returns stopped.
    second = {}

    def run_again():
        second["answer"] = call(server, "POST", f"/api/threads/{thread}/run", {"seconds": 60},
                                source=ADDRESSES[2], timeout=90)

    runner = threading.Thread(target=run_again)
    runner.start()
    wait_until(lambda: server.get(f"/api/threads/{thread}").json()["depth"] >= 1, 10, "the second run never began")
    status, _, end_s = call(server, "DELETE", f"/api/threads/{thread}", source=ADDRESSES[3], timeout=END_WAIT_S + 5)
    runner.join(30)
    assert status == 200 and end_s < END_WAIT_S, (status, end_s)
    run_status, run_payload, _ = second["answer"]
    assert run_status == 200 and run_payload["exitReason"] == "stopped", (run_status, run_payload)

    # The same shape on a loop thread (its run never ends by itself).
    looping = server.thread()
    _livelock_timers(server, looping)
    wait_until(lambda: (metric(server, "runloopd_livelocks_total") or 0) > livelocks, 60,
               "the loop thread was never found livelocked")
    status, _, loop_end_s = call(server, "DELETE", f"/api/threads/{looping}", source=ADDRESSES[4],
                                 timeout=END_WAIT_S + 5)
    assert status == 200 and loop_end_s < END_WAIT_S, (status, loop_end_s)
    assert server.alive() and server.healthy()
    figure("loop_livelock_attack", {
        "timers": 157, "run_answer_s": round(run_s, 2), "run_cpu_s": round(run_cpu, 2),
        "depth_peak": peak, "livelocks": metric(server, "runloopd_livelocks_total"),
        "refused": {r: metric(server, "runloopd_nested_runs_refused_total", f'{{reason="{r}"}}')
                    for r in ("depth", "stack", "livelock", "ending")},
        "delete_manual_s": round(end_s, 3), "delete_loop_s": round(loop_end_s, 3),
        "prober_gaps_s": server.liveness.gaps()})


def test_held_performs_answer_at_their_timeout(server_factory):
    server = server_factory()
    thread = server.thread()
    results = []
    lock = threading.Lock()

    def held(n, timeout):
        status, payload, took = call(server, "POST", f"/api/threads/{thread}/perform", {
            "selector": "count", "afterDelay": 100, "waitUntilDone": True, "timeout": timeout},
            source=ADDRESSES[n % len(ADDRESSES)], timeout=timeout + 30)
        with lock:
            results.append((timeout, status, payload and payload.get("state"), took))

    # The request (timeout 12) beside two held from every address.
    with ThreadPoolExecutor(max_workers=len(ADDRESSES) * 2 + 1) as pool:
        jobs = [pool.submit(held, 0, 12)]
        jobs += [pool.submit(held, n, 2) for n in range(len(ADDRESSES) * 2)]
        for job in jobs:
            job.result()
    late = [r for r in results if r[1] != 202 or r[2] != "delayed" or r[3] > r[0] + 2]
    assert not late, late
    assert server.alive() and server.healthy()
    exact = [r for r in results if r[0] == 12][0]
    figure("held_perform_deadline", {
        "held": len(results), "issue_request_answer_s": round(exact[3], 2),
        "slowest_2s_answer_s": round(max(r[3] for r in results if r[0] == 2), 2),
        "prober_gaps_s": server.liveness.gaps()})
