"""The event streams' budgets (issue 37, findings 3 and 4), attacked from 29
loopback addresses (127.0.0.2-.30) against the real binary while the liveness
prober (probes.Liveness, from 127.0.0.99, outside the attack) checks that
/healthz and /api/version answer within 2 s: a foreign page gets 403, one
address at most --max-event-clients-per-ip streams, all of them at most
--max-event-clients, and a closed client frees its place at once; a token
rotated out (SIGHUP) ends the streams opened with it. The rest of the HTTP
layer's budgets: test_10_http_budgets.py.
"""

import os
import signal
import socket
import time

from conftest import figure, wait_until
from probes import Liveness, metric, status_of

PROBER = "127.0.0.99"


def _open_stream(port, source, headers=(), timeout=3.0):
    """Opens `GET /api/events` from `source`: (status, socket or None)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(timeout)
    try:
        sock.connect(("127.0.0.1", port))
        lines = ["GET /api/events HTTP/1.1", f"Host: 127.0.0.1:{port}", *headers, "", ""]
        sock.sendall("\r\n".join(lines).encode())
        got = b""
        for _ in range(64):
            if b"\r\n\r\n" in got:
                break
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        sock.close()
        return None, None
    status = status_of(got)
    if status != 200:
        sock.close()
        return status, None
    return status, sock


def test_event_streams_are_budgeted_per_address_and_in_all(server_factory):
    s = server_factory(liveness_source=PROBER)
    addresses = [f"127.0.0.{i}" for i in range(2, 31)]  # 29 addresses
    # 1. A page of another origin (what EventSource sends) gets 403 from each address.
    foreign = [_open_stream(s.port, a, (f"Origin: http://{a}:{s.port}",))[0] for a in addresses]
    https = _open_stream(s.port, "127.0.0.2", (f"Origin: https://127.0.0.1:{s.port}",))[0]
    # 2. Ten streams from each address: at most 8 per address, 32 in all.
    held = {}
    statuses = {}
    for a in addresses:
        for _ in range(10):
            status, sock = _open_stream(s.port, a)
            statuses[status] = statuses.get(status, 0) + 1
            if sock is not None:
                held.setdefault(a, []).append(sock)
    per_address = max(len(v) for v in held.values())
    total = sum(len(v) for v in held.values())
    gauge = metric(s.port, PROBER, "runloopd_event_clients")
    # 3. The clients close: every place is free at once (no write needed to notice).
    closed_at = time.monotonic()
    for socks in held.values():
        for sock in socks:
            sock.close()
    wait_until(lambda: metric(s.port, PROBER, "runloopd_event_clients") == 0, 2.0,
               "the closed streams' places were not freed within 2 s")
    freed_s = round(time.monotonic() - closed_at, 3)
    hung_up = metric(s.port, PROBER, "runloopd_event_clients_hung_up_total")
    # 4. The dashboard (its own address) gets its stream.
    status, sock = _open_stream(s.port, "127.0.0.1")
    if sock:
        sock.close()
    figure("event_streams_attack", {
        "foreign_origin_statuses": sorted(set(foreign)), "https_origin_status": https, "statuses": statuses,
        "held_total": total, "held_per_address_max": per_address, "gauge_while_held": gauge,
        "freed_after_close_s": freed_s, "hung_up_total": hung_up, "rss_mb": round(s.rss_kb() / 1024, 1)})
    assert set(foreign) == {403}, foreign
    assert https == 403
    assert per_address == 8, held
    assert total == 32 and gauge == 32
    assert statuses.get(429, 0) == len(addresses) * 10 - 32
    assert hung_up >= 32
    assert status == 200


def test_a_stream_ends_when_its_token_is_rotated_out(server_factory, tmp_path):
    old, new = "old-token-" + "a" * 24, "new-token-" + "b" * 24
    token_file = tmp_path / "token"
    token_file.write_text(old + "\n")
    s = server_factory("--token-file", str(token_file), auth_token=old, liveness_source=PROBER)
    status, sock = _open_stream(s.port, "127.0.0.2", (f"Authorization: Bearer {old}",))
    assert status == 200
    # The prober presents the old token: it is paused while the token changes, then follows.
    with s.liveness.paused():
        s.liveness.stop()
        token_file.write_text(new + "\n")
        rotated = time.monotonic()
        os.kill(s.pid, signal.SIGHUP)
        sock.settimeout(0.2)
        ended = None
        got = b"\r\n"  # the chunk before was read with the head
        # Bounded: 5 s of reads; the stream's end is its last chunk (or the connection's end).
        while time.monotonic() - rotated < 5 and ended is None:
            try:
                chunk = sock.recv(65536)
                got += chunk
                if chunk == b"" or got.endswith(b"\r\n0\r\n\r\n"):
                    ended = time.monotonic() - rotated
            except socket.timeout:
                continue
            except OSError:
                ended = time.monotonic() - rotated
        sock.close()
    s.token = new
    s.liveness = Liveness(s, source=PROBER).start()
    refused = _open_stream(s.port, "127.0.0.2", (f"Authorization: Bearer {old}",))[0]
    accepted, again = _open_stream(s.port, "127.0.0.2", (f"Authorization: Bearer {new}",))
    if again:
        again.close()
    figure("event_stream_token_rotation", {"ended_after_s": None if ended is None else round(ended, 3),
                                          "old_token_status": refused, "new_token_status": accepted})
    assert ended is not None and ended < 3, "the stream outlived its token"
    assert refused == 401 and accepted == 200
    s.liveness.stop()
    s.liveness.assert_alive()
