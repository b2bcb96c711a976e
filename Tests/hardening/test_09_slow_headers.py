"""Distributed slow headers (an attack finding of issue 22), against the real
binary: 1,088 connections from 17 addresses trickling header lines; /healthz
keeps answering within 2 s, a slow request is closed at --request-deadline,
and --max-pending-requests (256) evicts the oldest so the server holds far
fewer sockets than the attack opened. The liveness prober (probes.Liveness)
watches from its own address, outside the attack's.
"""

import errno
import os
import resource
import selectors
import socket
import time

from conftest import figure

PENDING_CAP = 256  # --max-pending-requests' default
ATTACK_SECONDS = float(os.environ.get("HARDENING_SLOW_HEADERS_SECONDS", "15"))


def _raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _closed_within(port, host_header, limit):
    """One request whose headers never end: a header line every 0.5 s. Seconds
    until the server closes it (b"" or a reset), or None within `limit`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    started = time.monotonic()
    try:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host_header}\r\n".encode())
        sel = selectors.DefaultSelector()
        sel.register(sock, selectors.EVENT_READ)
        for n in range(int(limit / 0.5) + 2):
            if time.monotonic() - started > limit:
                return None
            if sel.select(timeout=0.5):
                try:
                    data = sock.recv(4096)
                except OSError:
                    return time.monotonic() - started
                if not data:
                    return time.monotonic() - started
                # An answer (a 408, say) before the close is fine; wait for the close.
                continue
            try:
                sock.send(f"X-Slow-{n}: {n}\r\n".encode())
            except OSError:
                return time.monotonic() - started
        return None
    finally:
        sock.close()


def test_distributed_slow_headers_neither_starve_healthz_nor_pile_up(server_factory):
    addresses = [f"127.0.0.{i}" for i in range(2, 19)]  # 17 addresses
    per_address = 64
    total = len(addresses) * per_address  # 1,088
    limit = _raise_nofile(total + 512)
    assert limit >= total + 256, f"RLIMIT_NOFILE {limit} is too low (run.sh raises it)"
    problems = []
    flags = ["--request-deadline", "3", "--max-pending-requests", str(PENDING_CAP)]
    # The prober uses its own address, outside the attack's 127.0.0.2-18
    # (whose per-address budget the attack fills).
    s = server_factory(*flags, liveness_source="127.0.0.99")
    authority = f"127.0.0.1:{s.port}"

    # 1. One slow request alone: closed at the deadline (3 s), well within 8 s.
    took = _closed_within(s.port, authority, 8.0)
    figure("slow_headers_single_closed_after_s", None if took is None else round(took, 2))
    if took is None:
        problems.append("a request whose headers never end was still open after 8 s (--request-deadline 3)")

    # 2. The distributed attack.
    sel = selectors.DefaultSelector()
    conns = {}
    connect_failed = 0
    head = f"GET /healthz HTTP/1.1\r\nHost: {authority}\r\n".encode()
    started = time.monotonic()
    for address in addresses:
        for _ in range(per_address):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.bind((address, 0))
            code = sock.connect_ex(("127.0.0.1", s.port))
            if code not in (0, errno.EINPROGRESS):
                connect_failed += 1
                sock.close()
                continue
            conns[sock] = {"sent": False, "closed": None}
            sel.register(sock, selectors.EVENT_WRITE)
    opened_at = time.monotonic()
    samples = []
    closed = 0
    lines_sent = 0
    next_line = opened_at + 2.0
    next_sample = opened_at
    round_ = 0
    for _ in range(100_000):
        now = time.monotonic()
        if now - opened_at > ATTACK_SECONDS:
            break
        if now >= next_sample:
            samples.append((round(now - opened_at, 2), s.sockets()))
            next_sample = now + 0.25
        if now >= next_line:  # one more header line on every open connection
            round_ += 1
            for sock, st in conns.items():
                if st["sent"] and st["closed"] is None:
                    try:
                        sock.send(f"X-Slow-{round_}: {round_}\r\n".encode())
                        lines_sent += 1
                    except BlockingIOError:
                        pass
                    except OSError:
                        st["closed"] = now - opened_at
                        closed += 1
                        sel.unregister(sock)
            next_line = now + 2.0
        for key, _ in sel.select(timeout=0.1):
            sock, st = key.fileobj, conns[key.fileobj]
            try:
                if not st["sent"]:
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise ConnectionRefusedError(err)
                    sock.send(head)
                    st["sent"] = True
                    sel.modify(sock, selectors.EVENT_READ)
                    continue
                if sock.recv(4096):
                    continue  # an answer (408/503) before the close
            except BlockingIOError:
                continue
            except OSError:
                pass
            st["closed"] = time.monotonic() - opened_at
            closed += 1
            sel.unregister(sock)
    end_sockets = s.sockets()
    still_open = sum(1 for st in conns.values() if st["closed"] is None)
    for sock in conns:
        sock.close()
    sel.close()

    # Once the attack's connections have been pending for over 1 s (the
    # cap's grace) and before the 3 s deadline closes them, and at the
    # attack's end, the server holds far fewer than 1,088 sockets.
    early = [n for t, n in samples if 1.5 <= t <= 2.5]
    early_min = min(early) if early else None
    figure("slow_headers_attack", {
        "connections": total, "connect_failed": connect_failed, "closed_by_server": closed,
        "still_open_at_end": still_open, "header_lines_sent": lines_sent,
        "server_sockets_peak": max(n for _, n in samples) if samples else None,
        "server_sockets_1.5_to_2.5s_min": early_min, "server_sockets_end": end_sockets,
        "open_seconds": round(opened_at - started, 2)})
    bound = PENDING_CAP + 64
    if early_min is None or early_min > bound:
        problems.append(f"the server held {early_min} sockets 1.5-2.5 s into the attack (cap "
                        f"{PENDING_CAP} pending + slack: at most {bound}); samples {samples[:12]}")
    if end_sockets > bound:
        problems.append(f"the server held {end_sockets} sockets at the attack's end (at most {bound})")
    liveness = s.liveness.stop().problem()
    if liveness:
        s.liveness.reported = True
        problems.append("/healthz or /api did not answer within 2 s during the attack: " + liveness)
    assert not problems, "\n".join(problems)
    assert s.healthy()
