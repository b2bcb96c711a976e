"""Debian's real Prometheus against two runloopd instances on one real PostgreSQL.

Run by Tests/prometheus/run.sh (under scripts/with-postgres.sh). The shipped
rules are checked and unit-tested with promtool as they are, at their real
scale (deploy/prometheus/runloopd-alerts.test.yml: a 60 s outage, a refusal
burst, a kill -9, minute by minute). The live Prometheus scrapes every second
and loads a copy scaled down: every `for:` cut to 2 s and every 1-minute rate
window to 5 s, so that in seconds it shows which alerts the real series of an
outage, a burst and a kill -9 fire, and that each stops with its trouble
(none fires after recovery). The scrape job is named as annotation discovery
names it (`kubernetes-pods`): no rule may depend on the job's name. Every
wait is a condition with a deadline.
"""

import datetime
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests/pysupport"))
from runloopd_processes import (  # noqa: E402
    START_DEADLINE_S, alive, call, end, free_port, get_json, start_runloopd, wait_for)

RULES = ROOT / "deploy/prometheus/runloopd-alerts.yml"
RULE_TESTS = ROOT / "deploy/prometheus/runloopd-alerts.test.yml"
DASHBOARD = ROOT / "deploy/grafana/runloopd-dashboard.json"
ARTIFACTS = Path(os.environ.get("ARTIFACTS_DIR", ROOT / ".build/artifacts"))
# The scrape job of the shipped manifests' annotation discovery.
JOB = "kubernetes-pods"
# The scaled copy's windows: `for:` and the rates' range (see the module docstring).
QUICK_FOR = "2s"
QUICK_WINDOW = 5
# How long the live outage lasts (the promtool tests replay 60 s at full scale).
OUTAGE_SECONDS = float(os.environ.get("RUNLOOPD_TEST_OUTAGE_SECONDS", "30"))


def pg_ctl(action):
    """Stops or starts the outage cluster of scripts/with-postgres.sh (a quoted command line)."""
    line = os.environ["RUNLOOPD_TEST_POSTGRES_OUTAGE_PG_CTL"]
    subprocess.run(shlex.split(line) + [action], check=True, stdout=subprocess.DEVNULL, timeout=60)


def key(labels):
    return (labels["alertname"], labels.get("instance", ""), labels.get("reason", ""))


def quick_rules():
    """The shipped rules, scaled down: every `for:` to 2 s, every 1-minute rate window to 5 s (the
    one-day look-back of RunloopdDown stays)."""
    shipped = RULES.read_text()
    quick = re.sub(r"for: \d+[smh]", f"for: {QUICK_FOR}", shipped)
    assert quick.count(f"for: {QUICK_FOR}") == shipped.count("for: "), "every for: was rewritten"
    windows = re.findall(r"\[(\w+)\]", shipped)
    assert set(windows) == {"1m", "1d"}, f"a window the scaled copy does not know: {windows}"
    return quick.replace("[1m]", f"[{QUICK_WINDOW}s]")


class Runloopd:
    """One instance on a fixed port, so that a restart is the same scrape target."""

    def __init__(self, tmp, name, store_url, extra=()):
        self.name = name
        self.tmp = tmp
        self.args = ["--store", store_url, "--instance-id", name, "--heartbeat-interval", "0.5",
                     "--log-level", "warning", *extra]
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.target = f"127.0.0.1:{self.port}"
        self.boots = 0
        self.start()

    def start(self):
        self.boots += 1
        port_file = self.tmp / f"{self.name}-{self.boots}.port"
        self.log = ARTIFACTS / f"runloopd-prometheus-{self.name}-{self.boots}.log"
        self.process = start_runloopd(os.environ["RUNLOOPD_BIN"], f"runloopd {self.name}", self.port, port_file,
                                      self.log, self.args)

    def kill(self):
        """kill -9: no drain, no clean stop."""
        self.process.kill()
        self.process.wait()

    def stop(self):
        end(self.process)


class Prometheus:
    def __init__(self, tmp, targets):
        (tmp / "rules.yml").write_text(quick_rules())
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp / "rules.yml")],
            "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": targets}]}],
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
        wait_for("prometheus ready", lambda: alive(self.process, "prometheus", self.log) and urllib.request.urlopen(
            self.base + "/-/ready", timeout=2).status == 200, START_DEADLINE_S)

    def query(self, expr):
        answer = get_json(self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert answer["status"] == "success", f"{expr}: {answer}"
        return answer["data"]["result"]

    def query_at(self, expr, at):
        answer = get_json(self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": at}))
        assert answer["status"] == "success", f"{expr}: {answer}"
        return answer["data"]["result"]

    def alerts(self, name=None, state="firing"):
        """The alerts in `state` now (all names, or `name`): [(alertname, instance, reason)]."""
        answer = get_json(self.base + "/api/v1/alerts")
        assert answer["status"] == "success"
        return sorted(key(a["labels"]) for a in answer["data"]["alerts"]
                      if (name is None or a["labels"]["alertname"] == name) and a["state"] == state)

    def alerts_between(self, start, stop, states="firing"):
        """Every alert that was in one of `states` (a regex) at an evaluation in [start, stop] (Unix times):
        {(alertname, instance, reason)}, read from Prometheus's own ALERTS series."""
        span = max(1, math.ceil(stop - start))
        result = self.query_at(f'max_over_time(ALERTS{{alertstate=~"{states}"}}[{span}s])', stop)
        return {key(r["metric"]) for r in result}

    def last_evaluation(self):
        """When the rule group was last evaluated (Unix time)."""
        [group] = get_json(self.base + "/api/v1/rules")["data"]["groups"]
        stamp = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$",
                         group["lastEvaluation"])
        assert stamp, group["lastEvaluation"]
        whole = datetime.datetime.fromisoformat(stamp[1] + stamp[3].replace("Z", "+00:00"))
        return whole.timestamp() + float(stamp[2] or 0)

    def evaluated_past(self, moment):
        wait_for(f"a rule evaluation after {moment:.1f}", lambda: self.last_evaluation() >= moment,
                 moment - time.time() + 20)

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
    fill = {"$job": JOB, "$instance": ".+", "$__rate_interval": "10s"}

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
        {"match[]": f'runloopd_build_info{{job=~"{JOB}"}}'}))["data"]
    assert sorted(s["instance"] for s in series) == sorted([a.target, b.target])
    # The latency histograms share one set of buckets.
    buckets = {}
    for family in ("http_request_duration", "turn_busy", "timer_lateness", "wakeup_latency"):
        result = prometheus.query(f'count by (le) (runloopd_{family}_seconds_bucket{{instance="{a.target}"}})')
        buckets[family] = sorted(r["metric"]["le"] for r in result)
    assert len({tuple(v) for v in buckets.values()}) == 1, buckets


# How long after its trouble ends a windowed alert may still hold (the scaled
# copy's rate window, the scaled "minute", plus a scrape and an evaluation);
# a gauge's alert goes at the first evaluation after recovery.
SETTLE_WINDOWED = QUICK_WINDOW + 3
SETTLE_GAUGE = 2
# How long after that nothing may be pending or firing.
HOLD = 8


def quiet(prometheus):
    """Waits until no alert is pending or firing (the previous test's trouble is over)."""
    wait_for("no alert pending or firing",
             lambda: not prometheus.alerts(state="firing") and not prometheus.alerts(state="pending"), 30)


def judge(prometheus, name, began, back, expected, settle):
    """Exactly `expected` fired between `began` and `back` + `settle` (when the trouble was over, as
    the scrapes saw it, plus what the rule's window may hold), and nothing was pending or firing for
    `HOLD` seconds after that, read from Prometheus's ALERTS series once it has evaluated past them."""
    calm = back + settle
    prometheus.evaluated_past(calm + HOLD)
    fired = prometheus.alerts_between(began, calm)
    assert fired == expected, f"{name}: fired {sorted(fired)}, expected exactly {sorted(expected)}"
    after = prometheus.alerts_between(calm, calm + HOLD, states="pending|firing")
    assert not after, f"{name}: alerts after recovery: {sorted(after)}"
    print(f"\n{name}: fired {sorted(fired)}; none from {settle} s after recovery for {HOLD} s")


def value(prometheus, expr):
    return [r["value"][1] for r in prometheus.query(expr)]


def test_store_outage_fires_the_store_alert_only_and_none_after(fleet):
    """PostgreSQL stopped for OUTAGE_SECONDS while clients read /api/history and /api/fleet (503
    store_unavailable): RunloopdStoreDown for both instances and nothing else, none after it is back."""
    a, b, prometheus = fleet
    quiet(prometheus)
    began = time.time()
    pg_ctl("stop")
    both = {("RunloopdStoreDown", a.target, ""), ("RunloopdStoreDown", b.target, "")}
    refused = 0
    fired_at = None
    while time.time() < began + OUTAGE_SECONDS or fired_at is None:
        assert time.time() < began + OUTAGE_SECONDS + 40, "RunloopdStoreDown never fired for both"
        for server in (a, b):
            for path in ("/api/history?limit=5", "/api/fleet"):
                status, body = call("GET", server.base + path)
                if status == 503:
                    assert body["error"]["code"] == "store_unavailable", body
                    refused += 1
        if fired_at is None and set(prometheus.alerts("RunloopdStoreDown")) == both:
            fired_at = time.time() - began
        # Paces the clients: the next round once Prometheus has evaluated its rules
        # again (every second), so that each evaluation sees a round's refusals.
        prometheus.evaluated_past(time.time())
    assert refused > 0, "no 503 store_unavailable answered during the outage"
    assert value(prometheus, f'min(up{{job="{JOB}"}})') == ["1"], "the scrapes failed during the outage"
    pg_ctl("start")
    wait_for("the store back on both", lambda: value(prometheus, "min(runloopd_store_up)") == ["1"], 40)
    back = time.time()
    # The 503s were counted, and as the store's: they fired no refusal alert.
    counted = prometheus.query_at(
        f'sum(increase(runloopd_limit_refusals_total{{reason="store_unavailable"}}[{math.ceil(back - began)}s]))',
        back)
    assert counted and float(counted[0]["value"][1]) > 0, counted
    judge(prometheus, f"{OUTAGE_SECONDS:.0f} s store outage ({refused} answers 503 store_unavailable, "
          f"the alert firing {fired_at:.1f} s in)", began, back, both, SETTLE_GAUGE)


def test_refusal_burst_fires_once_and_stops_with_it(fleet):
    """60 thread creations on an instance limited to 2: too_many_threads only, gone a window after."""
    a, b, prometheus = fleet
    quiet(prometheus)
    began = time.time()
    statuses = [call("POST", a.base + "/api/threads", {"run": {"style": "loop"}})[0] for _ in range(60)]
    done = time.time()
    assert set(statuses) <= {201, 429} and statuses.count(201) <= 2 and statuses.count(429) >= 58, statuses
    expected = {("RunloopdLimitRefusals", a.target, "too_many_threads")}
    wait_for("RunloopdLimitRefusals firing", lambda: set(prometheus.alerts()) == expected, 20)
    judge(prometheus, f"burst of {statuses.count(429)} refusals", began, done, expected, SETTLE_WINDOWED)


def test_kill_9_fires_down_and_lost_and_none_after_the_restart(fleet):
    """b killed with SIGKILL: RunloopdDown for b (the rule finds it without a job name) and
    RunloopdInstanceLost (a reports it); both gone once b is started again on its port."""
    a, b, prometheus = fleet
    quiet(prometheus)
    began = time.time()
    b.kill()
    expected = {("RunloopdDown", b.target, ""), ("RunloopdInstanceLost", "", "")}
    wait_for("RunloopdDown and RunloopdInstanceLost firing", lambda: set(prometheus.alerts()) == expected, 40)
    fired = time.time() - began
    b.start()
    wait_for("b scraped and no instance lost",
             lambda: value(prometheus, f'up{{instance="{b.target}"}}') == ["1"]
             and value(prometheus, 'max(runloopd_fleet_instances{state="lost"})') == ["0"], 40)
    back = time.time()
    judge(prometheus, f"kill -9 (alerts firing {fired:.1f} s after)", began, back, expected, SETTLE_GAUGE)


def test_exposition_passes_promtool_lint(fleet):
    """promtool's own linter (HELP, counter names, units) finds nothing in either instance's /metrics."""
    for server in fleet[:2]:
        with urllib.request.urlopen(server.base + "/metrics", timeout=10) as response:
            text = response.read()
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
        assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), \
            (lint.stdout + lint.stderr).decode()
        assert b"# HELP runloopd_store_pruned_total " in text
