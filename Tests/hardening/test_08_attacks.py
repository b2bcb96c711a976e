"""Attack findings (after issue 22), against the real binary. Every server
here is watched by the liveness prober (probes.Liveness: /healthz and
/api/version every 100 ms from 127.0.0.3, a gap over 2 s fails the test with
the server's backtraces):

  - Origin: another loopback origin on the same port (http://[::1]:PORT or
    http://localhost:PORT to a server on 127.0.0.1:PORT, http://127.0.0.1:PORT
    to one on [::1]:PORT) is refused, 403 forbidden_origin without
    Access-Control-Allow-Origin, on a POST and on its preflight; the server's
    own origin is allowed;
  - (distributed slow headers: test_09_slow_headers.py);
  - control bytes in request lines never reach the text access log raw;
  - bidi and control characters in names are refused or round-trip exactly;
  - experiment steps whose path is not under /api/ are refused when the file
    is loaded (runloopd play, and the server's --experiments-dir);
  - tokens shorter than 16 characters refuse to start (--token, --token-file,
    RUNLOOPD_TOKEN); 16 starts;
  - 1,200 query parameters and 200 header lines get a quick 4xx.
"""

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import BIN, START_DEADLINE_S, figure
from probes import raw_exchange, status_of



def thread_count(s):
    return len(s.get("/api/threads").json()["threads"])


def error_code(response):
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


# --- Origin: another loopback origin on the same port ----------------------------

def _refused(s, origin, label):
    before = thread_count(s)
    r = s.post("/api/threads", {}, headers={"Origin": origin})
    assert r.status_code == 403, f"{label}: POST with Origin {origin} -> {r.status_code} {r.text[:300]}"
    assert error_code(r) == "forbidden_origin", f"{label}: {r.text[:300]}"
    assert "Access-Control-Allow-Origin" not in r.headers, f"{label}: {dict(r.headers)}"
    pre = s.request("OPTIONS", "/api/threads", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 403, f"{label}: preflight with Origin {origin} -> {pre.status_code} {pre.text[:300]}"
    assert error_code(pre) == "forbidden_origin", f"{label}: preflight {pre.text[:300]}"
    assert "Access-Control-Allow-Origin" not in pre.headers, f"{label}: preflight {dict(pre.headers)}"
    assert thread_count(s) == before, f"{label}: a thread was created"


@pytest.mark.parametrize("other", ["http://[::1]:{port}", "http://localhost:{port}"])
def test_another_loopback_origin_on_the_same_port_is_refused(server_factory, other):
    s = server_factory()
    _refused(s, other.format(port=s.port), f"server 127.0.0.1:{s.port}")
    # The server's own origin (with its own Host) is allowed.
    before = thread_count(s)
    r = s.post("/api/threads", {}, headers={"Origin": f"http://127.0.0.1:{s.port}"})
    assert r.status_code == 201, r.text
    assert thread_count(s) == before + 1


@pytest.mark.skipif(not ipv6_loopback(), reason="::1 is not available")
def test_an_ipv4_loopback_origin_is_refused_by_a_server_on_ipv6_loopback(server_factory):
    s = server_factory(host="::1")
    _refused(s, f"http://127.0.0.1:{s.port}", f"server [::1]:{s.port}")
    r = s.post("/api/threads", {}, headers={"Origin": f"http://[::1]:{s.port}"})
    assert r.status_code == 201, r.text


# --- control bytes in the text access log -------------------------------------------

def test_control_bytes_in_request_lines_never_reach_the_log_raw(server_factory):
    s = server_factory("--log-format", "text", log_level="info")
    host = f"Host: 127.0.0.1:{s.port}\r\nConnection: close\r\n\r\n".encode()
    answers = {}
    for name, line in (("esc", b"GET /\x1b[2J HTTP/1.1\r\n"), ("cr", b"GET /x\rFAKE 200 HTTP/1.1\r\n")):
        got, ended = raw_exchange(s.port, line + host, read_timeout=5)
        answers[name] = status_of(got) or ended
    figure("log_control_bytes_answers", answers)
    assert s.healthy()
    code, _ = s.terminate(5.0)
    assert code == 0
    with open(s.log_path, "rb") as f:
        log = f.read()
    lines = log.split(b"\n")
    escs = [line for line in lines if b"\x1b" in line]
    assert not escs, f"raw ESC (0x1b) in the log: {escs[:3]!r}"
    bare_cr = [line for line in lines if b"\r" in line.removesuffix(b"\r")]
    assert not bare_cr, f"a bare CR inside a log line: {bare_cr[:3]!r}"
    assert not [line for line in lines if line.startswith(b"FAKE")], "a forged log line"
    mentions = [line for line in lines if b"2J" in line]
    assert mentions, f"no log line for the request with ESC[2J (answered {answers['esc']}):\n" + \
        log[-3000:].decode("utf-8", "replace")
    figure("log_control_bytes_line", mentions[0][:200].decode("utf-8", "replace"))


# --- bidi and control characters in names -------------------------------------------------

NAMES = {
    "rlo": "\u202e1t",  # RIGHT-TO-LEFT OVERRIDE: "t1" displayed
    "isolates": "a\u2066b\u2069c",
    "marks": "\u200f\u200e\u061cz",
    "esc": "x\u001b[2Jy",
    "cr_lf": "x\r\ny",
    "zero_width": "t\u200b1",
}


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_bidi_and_control_characters_in_names_round_trip_or_are_refused(server_factory, kind):
    s = server_factory()
    name = NAMES[kind]
    r = s.post("/api/threads", {"name": name, "keepAlive": "none"})
    assert r.status_code < 500, r.text
    figure(f"name_{kind}_status", r.status_code)
    if r.status_code == 400:
        assert error_code(r) in ("bad_value", "bad_json"), r.text
        return
    assert r.status_code == 201, r.text
    assert r.json()["name"] == name, r.text
    tid = r.json()["id"]
    got = s.get(f"/api/threads/{tid}")
    assert got.status_code == 200 and got.json()["name"] == name, got.text
    listed = [t for t in s.get("/api/threads").json()["threads"] if t["id"] == tid]
    assert listed and listed[0]["name"] == name
    # Exactly: the raw JSON decodes to the same code points (no NFC, no stripping).
    assert json.loads(got.content.decode("utf-8"))["name"].encode("utf-8") == name.encode("utf-8")


# --- experiment paths ----------------------------------------------------------------------

def _experiment(path):
    return {"id": "evil-path", "title": "a step outside /api/", "steps": [
        {"say": "harmless", "request": {"method": "POST", "path": "/api/threads", "body": {"name": "played"}},
         "expect": {"status": 201}},
        {"say": "outside", "request": {"method": "GET", "path": path}, "expect": {"status": 200}}]}


@pytest.mark.parametrize("path", ["//evil.example/x", "/healthz"])
def test_play_refuses_a_step_outside_api_at_load_time(server_factory, tmp_path, path):
    s = server_factory()
    before = thread_count(s)
    file = tmp_path / "evil.json"
    file.write_text(json.dumps(_experiment(path)))
    out = subprocess.run([BIN, "play", str(file), "--url", s.base], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    figure(f"play_{path.strip('/').replace('/', '_')}_exit", out.returncode)
    assert out.returncode != 0, text
    assert "/api/" in text, f"the refusal does not say steps must be under /api/:\n{text[-2000:]}"
    assert "step 2" in text.lower(), f"the refusal does not name the step:\n{text[-2000:]}"
    # Refused when loaded: not even the harmless first step ran.
    assert thread_count(s) == before, f"steps were played before the refusal:\n{text[-2000:]}"


def test_the_server_does_not_serve_an_experiment_with_a_step_outside_api(server_factory, tmp_path):
    """The lab endpoint does not accept documents over HTTP (GET only); it
    loads --experiments-dir at start, and must skip such a file there."""
    folder = tmp_path / "experiments"
    folder.mkdir()
    (folder / "evil-path.json").write_text(json.dumps(_experiment("//evil.example/x")))
    good = _experiment("/api/threads")
    good["id"] = "good-path"
    (folder / "good-path.json").write_text(json.dumps(good))
    s = server_factory("--experiments-dir", str(folder))
    listed = s.get("/api/experiments")
    assert listed.status_code == 200, listed.text
    ids = [e["id"] for e in listed.json()["experiments"]]
    posted = s.post("/api/experiments", _experiment("//evil.example/x"))
    figure("lab_post_experiment_status", posted.status_code)
    assert 400 <= posted.status_code < 500, posted.text  # documents are not accepted over HTTP
    assert "good-path" in ids, ids
    assert "evil-path" not in ids, f"served an experiment with a step outside /api/: {ids}"
    assert s.get("/api/experiments/evil-path").status_code == 404
    log = s.log_text()
    assert "evil-path" in log and "/api/" in log, log[-2000:]


# --- short tokens ------------------------------------------------------------------------

SHORT = {"flag_1": ("--token", "a"), "flag_15": ("--token", "x" * 15),
         "file_15": ("--token-file", "y" * 15), "env_15": ("RUNLOOPD_TOKEN", "z" * 15)}


@pytest.mark.parametrize("how", sorted(SHORT))
def test_a_token_shorter_than_16_characters_refuses_to_start(tmp_path, how):
    kind, token = SHORT[how]
    port_file = tmp_path / "port"
    args = [BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
            "--data-dir", str(tmp_path / "data"), "--public-dir", str(tmp_path / "public")]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    if kind == "--token":
        args += ["--token", token]
    elif kind == "--token-file":
        (tmp_path / "token").write_text(token + "\n")
        args += ["--token-file", str(tmp_path / "token")]
    else:
        env[kind] = token
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    started = None
    try:
        # It refuses at once; the bound only catches a hang (a loaded machine is slow).
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if port_file.exists():
                    started = "listening (port file written)"
                    break
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        output = proc.stdout.read().decode("utf-8", "replace")
    assert started is None, f"{how}: a {len(token)}-character token started a server ({started})"
    assert proc.returncode != 0, output
    assert "16" in output, f"{how}: the refusal does not say 16:\n{output[-1500:]}"


def test_a_16_character_token_starts(server_factory, tmp_path):
    token = "0123456789abcdef"
    s = server_factory(token=token)
    assert s.get("/api/version").status_code == 200
    anonymous = s.get("/api/version", headers={"Authorization": ""})
    assert anonymous.status_code == 401, anonymous.text
    (tmp_path / "token").write_text("  " + token[::-1] + "\n")
    t = server_factory("--token-file", str(tmp_path / "token"), auth_token=token[::-1])
    assert t.get("/api/version").status_code == 200


# --- too many query parameters and header lines ------------------------------------------------

def test_too_many_query_parameters_get_a_quick_4xx(server_factory):
    s = server_factory()
    query = "&".join(f"a{i}=1" for i in range(1200))
    started = time.monotonic()
    r = s.get("/api/threads?" + query, timeout=2)
    took = time.monotonic() - started
    figure("query_1200_parameters", {"status": r.status_code, "ms": round(took * 1000, 1)})
    assert r.status_code in (400, 414), f"{r.status_code} {r.text[:300]}"
    assert error_code(r), r.text[:300]
    assert took < 2
    assert s.healthy()


def test_two_hundred_header_lines_get_a_quick_431(server_factory):
    s = server_factory()
    fields = "".join(f"X-H{i}: v\r\n" for i in range(200))
    request = f"GET /api/threads HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n{fields}Connection: close\r\n\r\n"
    started = time.monotonic()
    got, ended = raw_exchange(s.port, request.encode(), read_timeout=2)
    took = time.monotonic() - started
    status = status_of(got)
    figure("header_lines_200", {"status": status, "ended": ended, "ms": round(took * 1000, 1)})
    assert status is not None and 400 <= status < 500, f"{ended}: {got[:300]!r}"
    assert status == 431, got[:300]
    assert took < 2
    assert s.healthy()
