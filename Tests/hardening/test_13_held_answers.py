"""The held-answer budget (issue 37, "bytes of a held answer"): clients that
ask for a large answer and never read it, from 127.0.0.2-.30, while the
liveness prober (127.0.0.3's fixture prober is replaced by 127.0.0.99)
checks /healthz and /api/version within 2 s.

Each attacking socket asks for GET /api/openapi.json (about 340 KB) with a
tiny receive buffer and reads nothing, so libmicrohttpd keeps the answer
queued. The answers over 64 KiB that clients have not taken yet may hold at
most --max-held-answer-bytes in all: past it an answer is 503
answers_over_budget. The test samples the held bytes and RSS while the
sockets stay open, then closes them and waits for the bytes to be given
back; a fresh client then gets the whole answer.

On loopback the kernel's send buffer (tcp_wmem, up to 4 MB) soon takes a
whole 340 KB answer off libmicrohttpd's hands, so most answers are held only
for the moment of a burst: the budget shows by its refusals (> 0 required:
the burst of 336 requests passes 4 MB at once), and the held bytes never
over the budget at any sample.
"""

import os
import socket
import time

from conftest import figure, wait_until

BUDGET = 4_000_000
ADDRESSES = [f"127.0.0.{i}" for i in range(2, 31) if i != 3]
PER_ADDRESS = 12


def _ask_and_never_read(port, address):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # The smallest receive window the kernel allows: the answer stays queued server-side.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.bind((address, 0))
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


def test_answers_clients_do_not_take_are_bounded_in_bytes(server_factory):
    server = server_factory("--max-held-answer-bytes", str(BUDGET), liveness_source="127.0.0.99")
    whole = server.get("/api/openapi.json")
    assert whole.status_code == 200
    size = len(whole.content)
    assert size > 64 * 1024, f"the attack needs an answer over 64 KiB, got {size}"

    sockets = []
    rss_before = server.rss_kb()
    try:
        for address in ADDRESSES:
            for _ in range(PER_ADDRESS):
                sockets.append(_ask_and_never_read(server.port, address))
        # Every request was answered or refused: some answers are held, the rest refused.
        wait_until(lambda: server.metric("runloopd_http_answers_over_budget_total") > 0, 30,
                   "answers refused for the held-answer budget")
        peak_held, peak_rss = 0, 0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            held = server.metric("runloopd_http_answer_bytes_held")
            peak_held = max(peak_held, held)
            peak_rss = max(peak_rss, server.rss_kb())
            assert held <= BUDGET, f"{held} bytes of answers held, over the {BUDGET} budget"
            time.sleep(0.2)  # a sampling interval, not a synchronisation
        refused = server.metric("runloopd_http_answers_over_budget_total")
        # What the held answers can cost: the budget, plus the refusals and the kernel's buffers.
        assert peak_rss - rss_before < 64 * 1024, f"RSS grew {peak_rss - rss_before} KiB under the attack"
        # A client that reads still gets a small answer at once, and the process is alive.
        assert server.healthy()
        figure("held_answers_connections", len(sockets))
        figure("held_answers_peak_bytes", int(peak_held))
        figure("held_answers_refused", int(refused))
        figure("held_answers_rss_growth_kb", peak_rss - rss_before)
    finally:
        for sock in sockets:
            sock.close()
    # Closed clients give their bytes back (at the latest when the connection times out).
    wait_until(lambda: server.metric("runloopd_http_answer_bytes_held") == 0, 60,
               "held answer bytes given back after the clients closed")
    again = server.get("/api/openapi.json")
    assert again.status_code == 200 and len(again.content) == size
    assert server.alive()
    assert os.path.exists(f"/proc/{server.pid}")
