"""A fleet of two versions on one real PostgreSQL loses nothing (issue 40).

Run by Tests/upgrade/run.sh (make test-upgrade) under scripts/with-postgres.sh:
RUNLOOPD_PREVIOUS_BIN is the previous release's runloopd (built from git),
RUNLOOPD_BIN this one. Two instances, `a` and `b`, answer performs while
the fleet goes through a rolling upgrade and a rollback:

  1. a runs the previous release, b this one (a fleet half upgraded);
  2. a is upgraded to this one (SIGTERM, the new binary, the same instance id);
  3. b is rolled back to the previous release.

Every perform either answered is then in the history, once, under the
instance and boot that answered it, read through an instance of each
version; every stop was clean (the fleet shows no instance lost, and no
thread ended `lost`). Every wait is a condition with a deadline.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests/pysupport"))
from runloopd_processes import call, free_port, start_runloopd, wait_for  # noqa: E402

ARTIFACTS = Path(os.environ.get("ARTIFACTS_DIR", ROOT / ".build/artifacts"))
PERFORMS = 40  # per instance per phase


class Instance:
    """One instance id, started with one binary or the other, on its own port."""

    def __init__(self, tmp, name, store):
        self.tmp, self.name, self.store = tmp, name, store
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = None
        self.starts = 0

    def start(self, binary):
        self.starts += 1
        port_file = self.tmp / f"{self.name}-{self.starts}.port"
        log = ARTIFACTS / f"runloopd-upgrade-{self.name}-{self.starts}.log"
        self.binary = binary
        self.process = start_runloopd(
            binary, self.name, self.port, port_file, log,
            ["--store", self.store, "--instance-id", self.name, "--heartbeat-interval", "0.5", "--drain-delay", "0",
             "--log-level", "info"])

    def stop(self):
        """SIGTERM: a clean stop (the store's last batch and `stoppedAt`)."""
        self.process.terminate()
        assert self.process.wait(timeout=20) == 0, f"{self.name} did not stop cleanly"

    def performs(self, count):
        """`count` performs on a new thread, each answered 200; the thread ended after. Returns the boot."""
        status, thread = call("POST", self.base + "/api/threads", {"run": {"style": "loop"}})
        assert status == 201, thread
        for n in range(count):
            status, answer = call("POST", self.base + f"/api/threads/{thread['id']}/perform",
                                  {"selector": "echo", "args": {"n": n}, "waitUntilDone": True})
            assert status == 200, answer
        status, answer = call("DELETE", self.base + f"/api/threads/{thread['id']}")
        assert status in (200, 202, 204), answer
        return boot(self)


def boot(instance):
    status, fleet = call("GET", instance.base + "/api/fleet")
    assert status == 200, fleet
    [me] = [i for i in fleet["instances"] if i["id"] == instance.name]
    return me["boot"]


def performs_kept(reader, instance):
    """{boot: performs of `instance`} in the history, read through `reader`."""
    kept = {}
    cursor = None
    while True:
        query = f"/api/history?instance={instance}&type=perform&order=asc&limit=1000"
        status, page = call("GET", reader.base + query + (f"&cursor={cursor}" if cursor else ""))
        assert status == 200, page
        for event in page["events"]:
            kept[event["boot"]] = kept.get(event["boot"], 0) + 1
        cursor = page.get("next")
        if not cursor:
            return kept


@pytest.fixture
def fleet():
    for name in ("RUNLOOPD_BIN", "RUNLOOPD_PREVIOUS_BIN", "RUNLOOPD_TEST_POSTGRES_URL"):
        if not os.environ.get(name):
            pytest.fail(f"{name} is not set: run Tests/upgrade/run.sh")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        url = os.environ["RUNLOOPD_TEST_POSTGRES_URL"]
        a, b = Instance(Path(folder), "upgrade-a", url), Instance(Path(folder), "upgrade-b", url)
        try:
            yield a, b
        finally:
            for instance in (a, b):
                if instance.process and instance.process.poll() is None:
                    instance.process.kill()
                    instance.process.wait()


def test_a_rolling_upgrade_and_rollback_lose_nothing(fleet):
    a, b = fleet
    old, new = os.environ["RUNLOOPD_PREVIOUS_BIN"], os.environ["RUNLOOPD_BIN"]
    versions = {path: subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
                for path in (old, new)}
    print(f"\nprevious: {versions[old]} ({os.environ.get('RUNLOOPD_PREVIOUS')}), this: {versions[new]}")
    answered = {}  # (instance, boot) -> performs answered

    def phase(*instances):
        for instance in instances:
            key = (instance.name, instance.performs(PERFORMS))
            answered[key] = answered.get(key, 0) + PERFORMS

    # 1. Half upgraded: a on the previous release, b on this one.
    a.start(old)
    b.start(new)
    phase(a, b)
    # 2. a upgraded to this one.
    a.stop()
    a.start(new)
    phase(a, b)
    # 3. b rolled back to the previous release.
    b.stop()
    b.start(old)
    phase(a, b)

    expected = {name: {} for name in (a.name, b.name)}
    for (name, boot_number), count in answered.items():
        expected[name][boot_number] = count
    assert len(expected[a.name]) == 2 and len(expected[b.name]) == 2, answered
    # Read through either version: every perform, once, under the boot that answered it.
    for reader in (a, b):
        for name in (a.name, b.name):
            wait_for(f"{name}'s performs through {reader.name} ({versions[reader.binary]})",
                     lambda: performs_kept(reader, name) == expected[name], 20)
    # Every stop was clean: nobody lost, no thread ended lost.
    for reader in (a, b):
        status, fleet_now = call("GET", reader.base + "/api/fleet")
        assert status == 200
        health = {i["id"]: i["health"] for i in fleet_now["instances"] if i["id"] in (a.name, b.name)}
        assert health == {a.name: "up", b.name: "up"}, health
        status, threads = call("GET", reader.base + "/api/history/threads?limit=1000")
        assert status == 200, threads
        lost = [t for t in threads["threads"] if t.get("instance") in (a.name, b.name) and t.get("endedHow") == "lost"]
        assert not lost, lost
    print(f"answered and kept: {answered}")
    a.stop()
    b.stop()
