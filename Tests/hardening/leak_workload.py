"""A short workload for a runloopd built with -sanitize=address: every kind of
object the server makes (threads of each style, timers, sources, observers,
tasks, performs of each outcome, event streams, errors, a client gone mid-wait),
then SIGTERM. LeakSanitizer reports at exit; the script fails on any report
or a non-zero exit.   python3 leak_workload.py path/to/asan/runloopd"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["RUNLOOPD_BIN"] = os.path.abspath(sys.argv[1])
import conftest  # noqa: E402

conftest.BIN = os.environ["RUNLOOPD_BIN"]
s = conftest.Server("--max-wait", "5", "--connection-timeout", "2", log_level="error")
sse = socket.create_connection(("127.0.0.1", s.port), timeout=10)
sse.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
sse.recv(4096)
for round_ in range(20):
    ids = [s.thread(run={"style": style}) for style in ("loop", "manual", "forever")]
    loop, manual, _ = ids
    s.post(f"/api/threads/{loop}/timers", {"interval": 0.01, "action": {"selector": "count"}})
    s.post(f"/api/threads/{loop}/timers", {"interval": 0.05, "repeats": False})
    custom = s.post(f"/api/threads/{loop}/sources", {"kind": "custom", "action": {"selector": "log", "args": {"message": "x"}}}).json()["id"]
    port = s.post(f"/api/threads/{loop}/sources", {"kind": "port"}).json()["id"]
    s.post(f"/api/threads/{loop}/sources/{custom}/signal", {"wakeup": True})
    s.post(f"/api/threads/{loop}/sources/{port}/messages", {"msgid": 1, "data": "hi"})
    s.post(f"/api/threads/{loop}/observers", {"activities": "all"})
    s.post(f"/api/threads/{loop}/tasks", {"id": "a", "selector": "step", "args": {"until": 3}})
    s.post(f"/api/threads/{loop}/perform", {"selector": "echo", "args": {"k": [1, 2]}, "waitUntilDone": True})
    s.post(f"/api/threads/{loop}/perform", {"selector": "fail", "waitUntilDone": True})
    s.post(f"/api/threads/{loop}/perform", {"selector": "count", "afterDelay": 5})
    s.post(f"/api/threads/{manual}/perform", {"selector": "count", "waitUntilDone": True, "timeout": 0.05})
    s.post(f"/api/threads/{manual}/run", {"seconds": 0.05})
    s.get(f"/api/threads/{loop}/activity?since=0")
    s.post("/api/threads", {"bogus": 1})
    s.get("/api/threads/nope")
    gone = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    body = b'{"selector":"count","waitUntilDone":true,"timeout":0.5}'
    gone.sendall(b"POST /api/threads/%s/perform HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (manual.encode(), len(body), body))
    gone.close()
    # The server has read the gone client's perform once it is queued.
    conftest.wait_until(lambda: s.get(f"/api/threads/{manual}").json()["pendingPerforms"], 5,
                        "the gone client's perform queued")
    for tid in ids:
        s.delete(f"/api/threads/{tid}")
s.get("/api/openapi.json")
s.get("/metrics")
sse.settimeout(5)
assert sse.recv(65536), "the event stream went quiet"  # it still streams at the end
sse.close()
code, seconds = s.terminate(30)
log = s.log_text()
s.kill()
leaks = log.count("LeakSanitizer")
print(f"leak_workload: exit {code} after {seconds:.1f}s, LeakSanitizer reports: {leaks}")
if leaks or code != 0:
    print(log[-20000:])
    sys.exit(1)
