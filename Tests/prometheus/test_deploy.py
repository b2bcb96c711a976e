"""The shipped Kubernetes manifests and Dockerfile, read as an operator's tools would.

Parsed with PyYAML; checked against the binary (`runloopd --version`,
`runloopd help serve`) so a renamed flag or a new version breaks the test,
not a rollout.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = [ROOT / "deploy/kubernetes.yaml", ROOT / "deploy/kubernetes-fleet.yaml"]
# RunLoopService.stopBound (4 s) plus StopWatchdog.grace (1 s): the longest a graceful stop takes.
STOP_SECONDS = 5


def run(*args):
    return subprocess.run([os.environ["RUNLOOPD_BIN"], *args], capture_output=True, text=True, timeout=30)


def serve_help():
    return run("help", "serve").stdout


def documents(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, path
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def workload(docs):
    [pod] = [d for (kind, _), d in docs.items() if kind in ("Deployment", "StatefulSet")]
    return pod


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest(path):
    docs = documents(path)
    kinds = {kind for kind, _ in docs}
    assert {"Service", "PodDisruptionBudget", "NetworkPolicy"} <= kinds, kinds
    for doc in docs.values():
        assert "namespace" not in doc["metadata"], f"{doc['kind']} names a namespace"
    pod = workload(docs)
    spec = pod["spec"]["template"]["spec"]
    [container] = spec["containers"]

    # A pinned image: the version the binary reports, never :latest.
    # `runloopd --version`: the version, then the commit it was built from.
    printed = run("--version").stdout.strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+\S* \(commit ([0-9a-f]{7,40}(-dirty)?|unknown)\)", printed), printed
    version = printed.split()[0]
    assert container["image"] == f"runloopd:{version}"

    # Every flag and RUNLOOPD_* variable is one `runloopd serve` knows (--drain-delay: see below).
    known = set(re.findall(r"--[a-z][a-z0-9-]+", serve_help()))
    flags = [a for a in container["args"] if a.startswith("--")]
    assert "--drain-delay" in flags
    for flag in flags:
        if flag != "--drain-delay":
            assert flag in known, f"runloopd serve has no {flag}"
    env = env_of(container)
    for name in env:
        if name.startswith("RUNLOOPD_"):
            flag = "--" + name.removeprefix("RUNLOOPD_").lower().replace("_", "-")
            assert flag in known, f"{name}: runloopd serve has no {flag}"
    # $(VAR) only names a variable defined before it (Kubernetes expands nothing else).
    defined = []
    for entry in container["env"]:
        for ref in re.findall(r"\$\((\w+)\)", entry.get("value", "")):
            assert ref in defined, f"{entry['name']} uses $({ref}) before it is defined"
        defined.append(entry["name"])

    # No hard-coded namespace: the Service's names come from the pod's own.
    allowed = env["RUNLOOPD_ALLOWED_HOST"]["value"]
    assert "default" not in allowed
    assert "$(POD_NAMESPACE)" in allowed
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"

    # Probes, and a stop that drains: preStop, then --drain-delay, then the stop, within the grace period.
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "/bin/sleep"
    pre_stop = float(command[1])
    drain = float(container["args"][container["args"].index("--drain-delay") + 1])
    assert drain == 5, "the flag's default; keep the grace period in step when it changes"
    assert spec["terminationGracePeriodSeconds"] >= pre_stop + drain + STOP_SECONDS

    # The PodDisruptionBudget and NetworkPolicy select these pods.
    labels = pod["spec"]["template"]["metadata"]["labels"]
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        [doc] = [d for (k, _), d in docs.items() if k == kind]
        selector = doc["spec"].get("selector", doc["spec"].get("podSelector"))["matchLabels"]
        assert selector.items() <= labels.items(), kind
    policy = next(d for (k, _), d in docs.items() if k == "NetworkPolicy")["spec"]
    assert policy["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}]}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_fleet_is_wired_to_postgres_by_pod_name_and_ip():
    docs = documents(ROOT / "deploy/kubernetes-fleet.yaml")
    pod = workload(docs)
    assert pod["kind"] == "StatefulSet"  # stable pod names: a restart is the same instance's next boot
    [container] = pod["spec"]["template"]["spec"]["containers"]
    env = env_of(container)
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["RUNLOOPD_INSTANCE_ID"]["value"] == "$(POD_NAME)"
    assert env["RUNLOOPD_ADVERTISE_URL"]["value"] == "http://$(POD_IP):8080/"
    store = env["RUNLOOPD_STORE"]["value"]
    assert store.startswith("postgres://") and ":" not in store.split("@")[0].removeprefix("postgres://"), \
        "no password in the URL"
    assert "sslmode=verify-full" in store
    # The password from a file runloopd reads at each connection (rotation without a restart), not PGPASSWORD.
    assert "PGPASSWORD" not in env
    password_file = env["RUNLOOPD_STORE_PASSWORD_FILE"]["value"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["template"]["spec"]["volumes"]}
    [volume] = [name for name, path in mounts.items() if password_file.startswith(path + "/")]
    items = {i["path"]: i["key"] for i in volumes[volume]["secret"]["items"]}
    assert items[password_file.rsplit("/", 1)[1]] == "password"
    assert volumes[volume]["secret"]["defaultMode"] & 0o007 == 0, "the password is not world-readable"
    egress_ports = {p["port"] for rule in next(d for (k, _), d in docs.items() if k == "NetworkPolicy")["spec"]
                    ["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 5432}


def test_drain_delay_flag_is_known():
    """The manifests pass --drain-delay (SIGTERM: /readyz 503, still serving, default 5 s)."""
    text = serve_help()
    assert "--drain-delay" in text, text
    # The option's own lines: from its name to the next option (ArgumentParser wraps them).
    entry = text.split("--drain-delay", 1)[1].split("\n  --", 1)[0]
    assert re.search(r"\(default:\s+5s;\s+env\s+RUNLOOPD_DRAIN_DELAY\)", entry), entry


def test_dockerfile_ships_a_stripped_binary():
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"strip -o /runloopd \.build/release/runloopd", text)
    assert "COPY --from=build /runloopd /usr/local/bin/runloopd" in text
