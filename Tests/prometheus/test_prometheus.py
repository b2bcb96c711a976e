"""Debian's real Prometheus against two runloopd instances on one real PostgreSQL.

Run by Tests/prometheus/run.sh (under scripts/with-postgres.sh). The shipped
rules are checked and unit-tested with promtool as they are; the live
Prometheus loads a copy whose `for:` durations are cut to 2 s (the shipped
ones are minutes; promtool's unit tests cover those), so the store alert can
fire and resolve within seconds. Every wait is a condition with a deadline.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/runloopd-alerts.yml"
RULE_TESTS = ROOT / "deploy/prometheus/runloopd-alerts.test.yml"
DASHBOARD = ROOT / "deploy/grafana/runloopd-dashboard.json"
ARTIFACTS = Path(os.environ.get("ARTIFACTS_DIR", ROOT / ".build/artifacts"))


# How long a start may take before it counts as a hang (not a judgement of
# speed: a start is waited for while the process runs).
START_DEADLINE_S = float(os.environ.get("RUNLOOPD_START_DEADLINE", "300"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout):
    """Calls `predicate` until it answers something truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (OSError, ValueError) as error:  # not up yet, or a refused connection
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def pg_ctl(action):
    """Stops or starts the outage cluster of scripts/with-postgres.sh (a quoted command line)."""
    line = os.environ["RUNLOOPD_TEST_POSTGRES_OUTAGE_PG_CTL"]
    subprocess.run(shlex.split(line) + [action], check=True, stdout=subprocess.DEVNULL, timeout=60)


def end(process):
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Runloopd:
    def __init__(self, tmp, name, store_url, extra=()):
        self.name = name
        port_file = tmp / f"{name}.port"
        self.log = ARTIFACTS / f"runloopd-prometheus-{name}.log"
        self.process = subprocess.Popen(
            [os.environ["RUNLOOPD_BIN"], "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
             "--store", store_url, "--instance-id", name, "--heartbeat-interval", "0.5", "--log-level", "warning",
             *extra],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        # Ready when it says so (its port file, then /readyz), however loaded
        # the machine: waited for while it runs; START_DEADLINE_S only
        # catches a start that hangs (issue 41).
        port = wait_for(f"{name}'s port file", lambda: self.alive() and port_file.exists()
                        and port_file.read_text().strip(), START_DEADLINE_S)
        self.base = f"http://127.0.0.1:{port}"
        self.target = f"127.0.0.1:{port}"
        wait_for(f"{name} ready", lambda: self.alive() and get_json(self.base + "/readyz", 2)["status"] == "ready",
                 START_DEADLINE_S)

    def alive(self):
        """True while the process runs; fails the test at once when it exited."""
        if self.process.poll() is not None:
            pytest.fail(f"runloopd {self.name} exited ({self.process.returncode}) at start: see {self.log}")
        return True

    def stop(self):
        end(self.process)


class Prometheus:
    def __init__(self, tmp, targets):
        # The shipped rules with every `for:` cut to 2 s (see the module docstring).
        quick = re.sub(r"for: \d+[smh]", "for: 2s", RULES.read_text())
        assert quick.count("for: 2s") == RULES.read_text().count("for: "), "every for: was rewritten"
        (tmp / "rules.yml").write_text(quick)
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp / "rules.yml")],
            "scrape_configs": [{"job_name": "runloopd", "static_configs": [{"targets": targets}]}],
        }
        (tmp / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        check = subprocess.run(["promtool", "check", "config", str(tmp / "prometheus.yml")], capture_output=True,
                               text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.log = ARTIFACTS / "prometheus.log"
        self.process = subprocess.Popen(
            ["prometheus", f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        wait_for("prometheus ready", lambda: self.alive() and urllib.request.urlopen(
            self.base + "/-/ready", timeout=2).status == 200, START_DEADLINE_S)

    def alive(self):
        """True while Prometheus runs; fails the test at once when it exited."""
        if self.process.poll() is not None:
            pytest.fail(f"prometheus exited ({self.process.returncode}) at start: see {self.log}")
        return True

    def query(self, expr):
        answer = get_json(self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert answer["status"] == "success", f"{expr}: {answer}"
        return answer["data"]["result"]

    def alerts(self, name):
        """The alerts named `name` now: [(state, instance)]."""
        answer = get_json(self.base + "/api/v1/alerts")
        assert answer["status"] == "success"
        return sorted((a["state"], a["labels"].get("instance", "")) for a in answer["data"]["alerts"]
                      if a["labels"]["alertname"] == name)

    def stop(self):
        end(self.process)


@pytest.fixture(scope="module")
def fleet():
    if not os.environ.get("RUNLOOPD_TEST_POSTGRES_OUTAGE_URL"):
        pytest.fail("run under scripts/with-postgres.sh (Tests/prometheus/run.sh does)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = os.environ["RUNLOOPD_TEST_POSTGRES_OUTAGE_URL"]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        a = Runloopd(tmp, "prom-a", url, ["--max-threads", "2"])
        b = Runloopd(tmp, "prom-b", url)
        prometheus = None
        try:
            prometheus = Prometheus(tmp, [a.target, b.target])
            yield a, b, prometheus
        finally:
            for process in (prometheus, b, a):
                if process:
                    process.stop()
            # The cluster is left running for whoever comes next.
            subprocess.run(shlex.split(os.environ["RUNLOOPD_TEST_POSTGRES_OUTAGE_PG_CTL"]) + ["start"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def test_shipped_rules_pass_promtool():
    check = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 8 rules found" in check.stdout
    # Run from deploy/prometheus: the unit tests name the rules file relative to themselves.
    tests = subprocess.run(["promtool", "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                           capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout + tests.stderr
    # Every alert of the file has a unit test.
    alerts = set(re.findall(r"- alert: (\w+)", RULES.read_text()))
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert alerts and alerts <= tested, alerts - tested


def dashboard_queries():
    """Every PromQL of the dashboard: (panel title, expr), its variables filled in as Grafana would."""
    board = json.loads(DASHBOARD.read_text())
    queries = [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
    queries += [("annotation " + a["name"], a["expr"]) for a in board["annotations"]["list"] if "expr" in a]
    fill = {"$job": "runloopd", "$instance": ".+", "$__rate_interval": "10s"}

    def filled(expr):
        for name, value in fill.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, f"unknown variable in {expr}"
        return expr

    return [(title, filled(expr)) for title, expr in queries]


def test_dashboard_queries_evaluate_with_data(fleet):
    a, b, prometheus = fleet
    # Traffic that gives every panel data: threads with timers, performs, a 404 and a 429.
    status, thread = call("POST", a.base + "/api/threads", {"run": {"style": "loop"}})
    assert status == 201, thread
    assert call("POST", a.base + f"/api/threads/{thread['id']}/timers", {"interval": 0.05})[0] in (200, 201)
    assert call("POST", a.base + f"/api/threads/{thread['id']}/perform",
                {"selector": "echo", "waitUntilDone": True})[0] == 200
    assert call("POST", a.base + "/api/threads", {"run": {"style": "loop"}})[0] == 201
    assert call("POST", a.base + "/api/threads", {"run": {"style": "loop"}})[0] == 429
    assert call("GET", b.base + "/api/nope")[0] == 404

    def both_up():
        targets = get_json(prometheus.base + "/api/v1/targets")["data"]["activeTargets"]
        return len(targets) == 2 and all(t["health"] == "up" for t in targets)

    wait_for("both targets scraped", both_up, 20)
    wait_for("the fleet of two in Prometheus",
             lambda: [r["value"][1] for r in prometheus.query('min(runloopd_fleet_instances{state="up"})')] == ["2"],
             20)

    queries = dashboard_queries()
    panels = [(t, e) for t, e in queries if not t.startswith("annotation")]
    assert len(panels) >= 25
    # Each query is valid PromQL (query() asserts status success) and, once the
    # rates have two samples in their window, answers at least one series.
    wait_for("data for every panel", lambda: all(prometheus.query(e) for _, e in panels), 30)
    for title, expr in queries:
        result = prometheus.query(expr)
        if not title.startswith("annotation"):  # ALERTS: empty while nothing fires
            assert result, f"{title}: {expr} answered no series"
    # The template variables' label_values() find the job and both instances.
    series = get_json(prometheus.base + "/api/v1/series?" + urllib.parse.urlencode(
        {"match[]": 'runloopd_build_info{job=~"runloopd"}'}))["data"]
    assert sorted(s["instance"] for s in series) == sorted([a.target, b.target])
    # The latency histograms share one set of buckets.
    buckets = {}
    for family in ("http_request_duration", "turn_busy", "timer_lateness", "wakeup_latency"):
        result = prometheus.query(f'count by (le) (runloopd_{family}_seconds_bucket{{instance="{a.target}"}})')
        buckets[family] = sorted(r["metric"]["le"] for r in result)
    assert len({tuple(v) for v in buckets.values()}) == 1, buckets


def test_store_down_alert_fires_and_resolves(fleet):
    a, b, prometheus = fleet
    assert prometheus.alerts("RunloopdStoreDown") == []
    stopped = time.monotonic()
    pg_ctl("stop")
    both = sorted([("firing", a.target), ("firing", b.target)])
    wait_for("RunloopdStoreDown firing for both instances", lambda: prometheus.alerts("RunloopdStoreDown") == both,
             40)
    fired = time.monotonic() - stopped
    assert [r["value"][1] for r in prometheus.query("max(runloopd_store_up)")] == ["0"]
    # Still served while the store is down: the scrapes never failed.
    assert [r["value"][1] for r in prometheus.query('min(up{job="runloopd"})')] == ["1"]
    started = time.monotonic()
    pg_ctl("start")
    wait_for("RunloopdStoreDown resolved", lambda: prometheus.alerts("RunloopdStoreDown") == [], 40)
    resolved = time.monotonic() - started
    assert [r["value"][1] for r in prometheus.query("min(runloopd_store_up)")] == ["1"]
    print(f"\nstore alert: firing {fired:.1f} s after PostgreSQL stopped, resolved {resolved:.1f} s after it started")


def test_exposition_passes_promtool_lint(fleet):
    """promtool's own linter (HELP, counter names, units) finds nothing in either instance's /metrics."""
    for server in fleet[:2]:
        with urllib.request.urlopen(server.base + "/metrics", timeout=10) as response:
            text = response.read()
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
        assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), \
            (lint.stdout + lint.stderr).decode()
        assert b"# HELP runloopd_store_pruned_total " in text
