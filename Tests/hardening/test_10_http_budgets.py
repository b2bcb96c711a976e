"""The HTTP layer's budgets (issue 37, findings 2, 3, 4 and 7), each attacked
from many loopback addresses (127.0.0.2-.30) against the real binary while
the liveness prober (probes.Liveness, from 127.0.0.99, outside the attack)
checks that /healthz and /api/version answer within 2 s:

- a keep-alive trickle (one whole request, then one byte of the next every
  5 s) from 1,340 connections on 21 addresses, as the issue ran it, and
  again with every closed connection reopened at once: each is closed at
  --request-deadline counted from its answer, and --connection-headroom
  keeps the table from filling with them;
- event streams: test_10_event_stream_budgets.py;
- request framing (RFC 9112): CL with TE, differing CLs, Host with a NUL or
  a control byte, HTTP/1.1 without Host, an https Origin: 400 (403) and the
  connection closed, the smuggled request never run;
- a journal export of 60 MB: one page is at most --max-export-bytes;
- a flood of 60 kB performs: the journal holds at most --journal-bytes.

Figures (the prober's largest gap, RSS, connections held) go to the
summary. Every loop is bounded in count and time.
"""

import errno
import http.client
import json
import multiprocessing as mp
import os
import resource
import selectors
import socket
import threading
import time

from conftest import figure
from probes import closed_counts, metrics_text, raw_exchange, status_of

PROBER = "127.0.0.99"
TRICKLE_SECONDS = float(os.environ.get("HARDENING_TRICKLE_SECONDS", "20"))
DEADLINE = 10.0  # --request-deadline's default


def _raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(need, soft)), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --- the keep-alive trickle (finding 2) ---------------------------------------

def _trickle(port, addresses, per_address, seconds, byte_every, reconnect, out):
    """The attacker, in its own process (no GIL shared with the prober): each
    connection sends one whole `GET /healthz`, reads the answer, then one byte
    of the next request line every `byte_every` s. Reports how many were
    opened and answered, how many the server closed, and the longest any
    stayed open after its answer."""
    sel = selectors.DefaultSelector()
    request = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    trickle = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    conns = {}
    counts = {"opened": 0, "connect_failed": 0, "answered": 0, "closed_by_server": 0, "bytes_trickled": 0}
    held = []  # seconds from an answer to the server's close
    started = time.monotonic()

    def open_one(address):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.bind((address, 0))
            code = sock.connect_ex(("127.0.0.1", port))
        except OSError:
            code = -1
        if code not in (0, errno.EINPROGRESS):
            counts["connect_failed"] += 1
            sock.close()
            return
        counts["opened"] += 1
        conns[sock] = {"address": address, "state": "connecting", "got": b"", "answered": None, "next": 0.0,
                       "sent": 0}
        sel.register(sock, selectors.EVENT_WRITE)

    def gone(sock, now):
        st = conns.pop(sock)
        try:
            sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()
        if st["answered"] is not None:
            counts["closed_by_server"] += 1
            held.append(now - st["answered"])
        if reconnect and now - started < seconds:
            open_one(st["address"])

    for address in addresses:
        for _ in range(per_address):
            open_one(address)
    # Bounded: at most 2,000,000 rounds and `seconds`.
    for _ in range(2_000_000):
        now = time.monotonic()
        if now - started > seconds:
            break
        for key, _ in sel.select(timeout=0.05):
            sock = key.fileobj
            st = conns.get(sock)
            if st is None:
                continue
            try:
                if st["state"] == "connecting":
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                        raise ConnectionRefusedError()
                    sock.send(request)
                    st["state"] = "reading"
                    sel.modify(sock, selectors.EVENT_READ)
                    continue
                data = sock.recv(65536)
                if not data:
                    raise ConnectionResetError()
                st["got"] += data
                if st["state"] == "reading" and st["got"].endswith(b"}\n"):
                    st["state"] = "trickling"
                    st["answered"] = time.monotonic()
                    st["next"] = st["answered"]
                    counts["answered"] += 1
            except BlockingIOError:
                continue
            except OSError:
                gone(sock, time.monotonic())
        now = time.monotonic()
        for sock, st in list(conns.items()):
            if st["state"] == "trickling" and now >= st["next"] and st["sent"] < len(trickle):
                try:
                    sock.send(trickle[st["sent"]:st["sent"] + 1])
                    st["sent"] += 1
                    counts["bytes_trickled"] += 1
                except BlockingIOError:
                    pass
                except OSError:
                    gone(sock, now)
                    continue
                st["next"] = now + byte_every
    now = time.monotonic()
    still = [now - st["answered"] for st in conns.values() if st["answered"] is not None]
    for sock in list(conns):
        sock.close()
    counts["still_open_at_end"] = len(conns)
    counts["longest_open_after_answer_s"] = round(max(held + still, default=0.0), 2)
    counts["longest_closed_after_answer_s"] = round(max(held, default=0.0), 2)
    out.put(counts)


def _run_trickle(s, reconnect):
    addresses = [f"127.0.0.{i}" for i in range(2, 23)]  # 21 addresses
    per_address = 64  # --max-connections-per-ip's default: 1,344 >= 1,340
    total = 1340
    limit = _raise_nofile(total + 1024)
    assert limit >= total + 256, f"RLIMIT_NOFILE {limit} is too low (run.sh raises it)"
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    # 1,340 over 21 addresses: 64 on the first 20, 60 on the last.
    plan = addresses[:20]
    proc = ctx.Process(target=_trickle, args=(s.port, plan, per_address, TRICKLE_SECONDS, 5.0, reconnect, out))
    last = ctx.Process(target=_trickle, args=(s.port, addresses[20:], total - 20 * per_address, TRICKLE_SECONDS,
                                             5.0, reconnect, out))
    rss = []
    sockets = []
    pending = []
    started = time.monotonic()
    proc.start()
    last.start()
    # Bounded: the attack's length plus 30 s.
    while (proc.is_alive() or last.is_alive()) and time.monotonic() - started < TRICKLE_SECONDS + 30:
        rss.append(s.rss_kb())
        sockets.append((round(time.monotonic() - started, 1), s.sockets()))
        time.sleep(0.25)
    a, b = out.get(timeout=30), out.get(timeout=30)
    proc.join(timeout=10)
    last.join(timeout=10)
    counts = {k: a[k] + b[k] if not k.startswith("longest") else max(a[k], b[k]) for k in a}
    return counts, rss, sockets


def _trickle_test(server_factory, reconnect, tag):
    s = server_factory(liveness_source=PROBER)
    counts, rss, sockets = _run_trickle(s, reconnect)
    closed = closed_counts(s.port, PROBER)
    gaps = s.liveness.gaps()
    held_after_2s = [n for t, n in sockets if t >= 2.0]
    figure(f"keepalive_trickle_{tag}", {
        **counts, "server_closed_by_reason": closed, "prober_largest_gap_s": gaps,
        "rss_mb_max": round(max(rss) / 1024, 1), "server_sockets_peak": max(n for _, n in sockets),
        "server_sockets_after_2s_median": sorted(held_after_2s)[len(held_after_2s) // 2] if held_after_2s else None,
    })
    problems = []
    if counts["answered"] < 900:
        problems.append(f"the attack barely got in ({counts}): it did not test the budget")
    # Each trickling connection is closed at the deadline counted from its
    # answer (the timer's leeway and a loaded machine: 3 s of slack).
    if counts["longest_open_after_answer_s"] > DEADLINE + 3:
        problems.append(f"a trickling keep-alive connection stayed open {counts['longest_open_after_answer_s']} s "
                        f"after its answer (--request-deadline {DEADLINE})")
    if closed.get("pending_cap", 0) + closed.get("headroom", 0) + closed.get("deadline", 0) == 0:
        problems.append(f"no connection was closed by a budget: {closed}")
    if max(rss) > 400 * 1024:
        problems.append(f"RSS reached {max(rss) // 1024} MB")
    assert not problems, "\n".join(problems)
    assert s.healthy()


def test_keepalive_trickle_as_the_issue_ran_it(server_factory):
    """1,340 connections from 127.0.0.2-.22, none reopened."""
    _trickle_test(server_factory, reconnect=False, tag="once")


def test_keepalive_trickle_reopening_every_closed_connection(server_factory):
    """The same, but every connection the server closes is reopened at once
    from its address: the table keeps its headroom and the prober gets in."""
    _trickle_test(server_factory, reconnect=True, tag="reopened")


# --- request framing (finding 7) -----------------------------------------------

def test_framing_attacks_are_refused_and_closed(server_factory):
    s = server_factory(liveness_source=PROBER)
    own = f"127.0.0.1:{s.port}"
    smuggled = (f"POST /api/threads HTTP/1.1\r\nHost: {own}\r\nContent-Type: application/json\r\n"
                f"Content-Length: 2\r\n\r\n{{}}").encode()
    cases = {
        "cl_and_te": (f"POST /api/threads HTTP/1.1\r\nHost: {own}\r\nContent-Type: application/json\r\n"
                      f"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n").encode()
        + smuggled,
        "two_lengths": (f"POST /api/threads HTTP/1.1\r\nHost: {own}\r\nContent-Type: application/json\r\n"
                        f"Content-Length: 2\r\nContent-Length: {len(smuggled) + 2}\r\n\r\n{{}}").encode() + smuggled,
        "host_nul": b"POST /api/threads HTTP/1.1\r\nHost: 127.0.0.1\x00.evil\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 2\r\n\r\n{}",
        "host_control": b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\x1b[2J\r\n\r\n",
        "no_host": b"POST /api/threads HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
        "https_origin": (f"POST /api/threads HTTP/1.1\r\nHost: {own}\r\nOrigin: https://{own}\r\n"
                         f"Connection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}").encode(),
    }
    expected = {"https_origin": 403}
    results = {}
    problems = []
    rss = []
    for i in range(2, 31):
        source = f"127.0.0.{i}"
        for name, payload in cases.items():
            got, ended = raw_exchange(s.port, payload, read_timeout=5, source=source)
            status = status_of(got)
            results.setdefault(name, set()).add((status, ended))
            if status != expected.get(name, 400):
                problems.append(f"{name} from {source}: {got[:200]!r}")
            elif ended != "closed":
                problems.append(f"{name} from {source}: the connection was left open ({ended})")
            elif got.count(b"\r\nDate: ") > 1:
                problems.append(f"{name} from {source}: a second answer (the smuggled request ran): {got!r}")
        rss.append(s.rss_kb())
    threads = s.get("/api/threads").json()
    count = len(threads.get("threads", threads if isinstance(threads, list) else []))
    bad = closed_counts(s.port, PROBER).get("bad_framing")
    figure("framing_attacks", {name: sorted(map(str, v)) for name, v in results.items()}
           | {"threads_created": count, "bad_framing_total": bad, "rss_mb_max": round(max(rss) / 1024, 1)})
    assert not problems, "\n".join(problems[:20])
    assert count == 0, "a refused request created a thread"
    assert bad == 29 * 5


# --- a journal export (finding 7) ----------------------------------------------

def test_a_60mb_journal_exports_in_bounded_pages(server_factory):
    cap = 4_000_000  # --max-export-bytes' default
    # The byte budget made room for the whole 60 MB (--journal-bytes).
    s = server_factory("--journal-size", "1000", "--journal-bytes", "64MB", liveness_source=PROBER)
    pad = "x" * 60_000
    body = ('{"selector":"echo","pad":"' + pad + '"}').encode()
    head = (f"POST /api/threads/none/perform HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    f = sock.makefile("rb")
    # Bounded: 1,000 requests on one kept-alive connection.
    for _ in range(1000):
        sock.sendall(head + body)
        line = f.readline()
        length = 0
        while True:
            h = f.readline()
            if h in (b"\r\n", b""):
                break
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":")[1])
        f.read(length)
        assert line.split(b" ")[1] in (b"400", b"404"), line
    sock.close()
    rss_full = s.rss_kb()
    pages = []
    since = 0
    # Bounded: at most 1,000 pages.
    for _ in range(1000):
        t0 = time.monotonic()
        r = s.get(f"/api/journal?since={since}", timeout=30)
        took = time.monotonic() - t0
        assert r.status_code == 200, r.text[:300]
        doc = r.json()
        pages.append((len(doc["steps"]), len(r.content), round(took, 3)))
        if doc["lastSeq"] >= doc["journalSeq"] or not doc["steps"]:
            break
        since = doc["lastSeq"]
    steps = sum(p[0] for p in pages)
    figure("journal_export_60mb", {
        "pages": len(pages), "steps": steps, "largest_page_bytes": max(p[1] for p in pages),
        "slowest_page_s": max(p[2] for p in pages), "rss_mb_after_fill": round(rss_full / 1024, 1),
        "prober_largest_gap_s": s.liveness.gaps()})
    assert steps == 1000, pages
    assert len(pages) >= 15, f"a 60 MB journal came in {len(pages)} pages: not bounded by {cap} bytes"
    # A page carries at most the cap of bodies and answers (plus the steps' own JSON).
    assert max(p[1] for p in pages) <= cap * 1.5, pages


# --- the journal's bytes --------------------------------------------------------------

def _journal(s):
    """(entries, bytes held, byte limit, dropped) from /metrics, asked from the prober's address."""
    text = metrics_text(s.port, PROBER)

    def value(series):
        found = [line for line in text.splitlines() if line.startswith(series + " ")]
        assert found, f"{series} missing from /metrics"
        return int(float(found[0].rsplit(" ", 1)[1]))

    return (value("runloopd_journal_entries"), value('runloopd_journal_bytes{stat="held"}'),
            value('runloopd_journal_bytes{stat="limit"}'), value("runloopd_journal_dropped_total"))


def test_a_flood_of_large_performs_keeps_the_journal_within_its_bytes(server_factory):
    """--journal-bytes: 1,200 waited perform echoes of a 60 kB argument (each
    about 120 kB in the journal with its answer, 144 MB offered) from 6
    addresses. At every sample the journal holds at most its budget; the
    oldest requests made room and were counted; an export since 0 says how
    many it missed and holds the newest; RSS grew by far less than was offered
    (the count bound alone, 1,000 requests, would have kept 120 MB)."""
    limit = 4_000_000
    s = server_factory("--journal-bytes", "4MB", liveness_source=PROBER)
    threads = [s.thread(run={"style": "loop"}) for _ in range(4)]
    rss_before = s.rss_kb()
    body = json.dumps({"selector": "echo", "args": {"blob": "x" * 60_000}, "waitUntilDone": True})
    per_address, addresses = 200, [f"127.0.0.{i}" for i in range(40, 46)]
    answered, failures = [], []
    samples = []
    done = threading.Event()

    def flood(address, k):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30, source_address=(address, 0))
        try:
            for n in range(per_address):  # bounded: 200 requests each
                conn.request("POST", f"/api/threads/{threads[(k + n) % len(threads)]}/perform", body=body,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                (answered if r.status == 200 else failures).append(r.status)
        except (OSError, http.client.HTTPException) as error:
            failures.append(repr(error))
        finally:
            conn.close()

    def sample():
        while not done.is_set():  # bounded by the flood's end
            samples.append(_journal(s))
            done.wait(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    workers = [threading.Thread(target=flood, args=(a, k)) for k, a in enumerate(addresses)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    done.set()
    sampler.join()
    samples.append(_journal(s))
    entries, held, reported_limit, dropped = samples[-1]
    rss_after = s.rss_kb()
    figure("journal_bytes_flood", {
        "answered": len(answered), "failures": len(failures), "samples": len(samples),
        "largest_held": max(x[1] for x in samples), "entries": entries, "dropped": dropped,
        "rss_growth_mb": round((rss_after - rss_before) / 1024, 1), "prober_largest_gap_s": s.liveness.gaps()})
    assert not failures, failures[:5]
    assert len(answered) == per_address * len(addresses)
    assert reported_limit == limit
    assert all(x[1] <= limit for x in samples), [x for x in samples if x[1] > limit][:5]
    # Full: within one entry of the budget, the rest dropped and counted.
    assert limit - 130_000 < held <= limit and entries * 120_000 <= limit < (entries + 1) * 125_000, samples[-1]
    assert dropped + entries == len(answered) + len(threads), samples[-1]
    # An export since 0 misses exactly what was dropped, and ends with the newest request.
    r = s.get("/api/journal?since=0&limit=10000", timeout=30)
    assert r.status_code == 200, r.text[:300]
    doc = r.json()
    assert doc["missed"] == dropped and doc["lastSeq"] == doc["journalSeq"] == dropped + entries, \
        {k: doc[k] for k in ("missed", "lastSeq", "journalSeq")}
    assert len(doc["steps"]) == entries and doc["steps"][-1]["request"]["method"] == "POST"
    assert rss_after - rss_before < 60 * 1024, f"RSS grew {(rss_after - rss_before) / 1024:.0f} MB"
    assert s.alive()
