#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage without a Docker engine:
#   1. builds the release binary with the Dockerfile's command (make release),
#      stripped as the image's is;
#   2. debootstraps a minimal bookworm root holding ONLY the runtime packages the
#      Dockerfile installs (its RUNTIME_PACKAGES argument), cached under .build/;
#   3. installs the binary, Public/ and the non-root user as the Dockerfile does;
#   4. runs runloopd inside the root (chroot) as that user with the Dockerfile's
#      CMD (--host 0.0.0.0, only the port changed): without a token it must refuse
#      to start; with the token as a mounted secret file (RUNLOOPD_TOKEN_FILE) it
#      checks /healthz (also by pod IP), 401 without the token, one API round
#      trip with it, 421 for a foreign Host, 403 for a foreign Origin, the
#      dashboard's CSP, the healthcheck subcommand, and a clean SIGTERM exit.
# A shared library missing from the root makes the binary fail to start: FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "test-container needs root (debootstrap, chroot)" >&2; exit 1; }

packages=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"/\1/p' Dockerfile)
[ -n "$packages" ] || { echo "no RUNTIME_PACKAGES in Dockerfile" >&2; exit 1; }
uid=$(sed -n 's/.*--uid \([0-9]*\).*/\1/p' Dockerfile | head -1)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=.build/container-root
stamp="$root/.runloopd-packages"
started=$(date +%s)

command -v debootstrap >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

echo "== release build (the Dockerfile's command: make release)"
make release >/dev/null

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$packages" ]; then
  echo "== debootstrap --variant=minbase bookworm + $packages"
  rm -rf "$root"
  debootstrap --variant=minbase --include="${packages// /,}" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log"; exit 1; }
  echo "$packages" >"$stamp"
fi

echo "== install the binary alone (the dashboard and experiments are compiled in), user $uid (as the Dockerfile does)"
install -D -m 0755 -s .build/release/runloopd "$root/usr/local/bin/runloopd"   # stripped, as the Dockerfile does
rm -rf "$root/srv/runloopd" && mkdir -p "$root/srv/runloopd"
chroot "$root" getent passwd runloopd >/dev/null \
  || chroot "$root" useradd --system --uid "$uid" --user-group --no-create-home --shell /usr/sbin/nologin runloopd
# The Dockerfile's data volume and its ENV (the store's folder).
rm -rf "$root/var/lib/runloopd" && install -d -o "$uid" -g "$uid" -m 0750 "$root/var/lib/runloopd"
data_env=$(python3 -c 'import re; print(re.search(r"^ENV (RUNLOOPD_DATA_DIR=\S+)$", open("Dockerfile").read(), re.M).group(1))')
export "${data_env?}"

mounted=""
server=""
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null || true
  [ -n "$mounted" ] && umount "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
mount -t proc proc "$root/proc" && mounted=1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The Dockerfile's CMD, with the free port instead of 8080.
mapfile -t cmd < <(python3 - "$port" <<'PY'
import json, re, sys
text = open("Dockerfile").read()
args = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
args[args.index("--port") + 1] = sys.argv[1]
print("\n".join(args))
PY
)
fail() { echo "FAIL: $*"; echo "--- server log"; cat "$root.server.log"; exit 1; }
passed=0
check() { if "$@"; then passed=$((passed + 1)); else fail "$*"; fi; }

echo "== run the image's CMD (${cmd[*]}) as uid $uid without a token: it must refuse"
rc=0
env -u RUNLOOPD_TOKEN -u RUNLOOPD_TOKEN_FILE -u RUNLOOPD_NO_AUTH timeout 20 \
  chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd "${cmd[@]}" >"$root.server.log" 2>&1 || rc=$?
check test "$rc" -eq 1
check grep -q -- "--no-auth" "$root.server.log"
check grep -q "RUNLOOPD_TOKEN_FILE" "$root.server.log"

# The token as a secret file, readable only by the runtime user (as a mounted secret).
token=$(python3 -c 'import secrets; print(secrets.token_hex(32))')
mkdir -p "$root/run/secrets"
printf '%s\n' "$token" >"$root/run/secrets/runloopd_token"
chown "$uid:$uid" "$root/run/secrets/runloopd_token" && chmod 0400 "$root/run/secrets/runloopd_token"
echo "== run the image's CMD as uid $uid on 0.0.0.0:$port with RUNLOOPD_TOKEN_FILE"
RUNLOOPD_TOKEN_FILE=/run/secrets/runloopd_token \
  chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd "${cmd[@]}" >"$root.server.log" 2>&1 &
server=$!
deadline=$((SECONDS + 20))
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
  kill -0 "$server" 2>/dev/null || fail "runloopd exited at start (a missing shared library?)"
  [ $SECONDS -lt $deadline ] || fail "no /healthz within 20 s"
  # wait on the process for a moment instead of sleeping blind
  timeout 0.1 tail --pid="$server" -f /dev/null || true
done
base="http://127.0.0.1:$port"
auth=(-H "Authorization: Bearer $token")
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
check curl -fsS "$base/healthz" -o /dev/null
check test "$(status -H "Host: 10.244.0.7:8080" "$base/healthz")" = 200   # a kubelet probe by pod IP
check test "$(status "$base/api/threads")" = 401
created=$(curl -fsS "${auth[@]}" -X POST -H 'Content-Type: application/json' \
  -d '{"run":{"style":"manual"},"keepAlive":"none"}' "$base/api/threads")
tid=$(printf '%s' "$created" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
run=$(curl -fsS "${auth[@]}" -X POST -H 'Content-Type: application/json' -d '{"seconds":0.1}' \
  "$base/api/threads/$tid/run")
check test "$(printf '%s' "$run" | python3 -c 'import json,sys; print(json.load(sys.stdin)["exitReason"])')" = finished
check test "$(status "${auth[@]}" -H 'Host: evil.example' "$base/api/threads")" = 421
check test "$(status "${auth[@]}" -X POST -H 'Origin: http://evil.example' "$base/api/threads")" = 403
count=$(curl -fsS "${auth[@]}" "$base/api/threads" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["threads"]))')
check test "$count" = 1
check sh -c "curl -fsS '$base/' | cmp -s - Public/index.html"
experiments=$(curl -fsS "${auth[@]}" "$base/api/experiments" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["experiments"]))')
check test "$experiments" -eq "$(ls experiments/*.json | wc -l)"
check grep -q "dashboard=compiled in" "$root.server.log"
check sh -c "curl -fsSI '$base/' | grep -qi \"^content-security-policy: default-src 'none'; script-src 'self'\""
check chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd healthcheck --port "$port"
if chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd healthcheck --port 1 2>/dev/null; then
  fail "healthcheck passed against a closed port"
fi
passed=$((passed + 1))
store=$(curl -fsS "${auth[@]}" "$base/api/store")
check test "$(printf '%s' "$store" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["kind"], d["up"], d["location"])')" \
  = "sqlite True /var/lib/runloopd/history.sqlite"
kill -TERM "$server"
rc=0; wait "$server" || rc=$?
server=""
check test "$rc" -eq 0
# The history is in the volume, written by the runtime user: the thread's end is there.
check test "$(stat -c %u "$root/var/lib/runloopd/history.sqlite")" = "$uid"
check python3 - "$root/var/lib/runloopd/history.sqlite" "$tid" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
row = db.execute("SELECT ended_how FROM threads WHERE thread = ?", (sys.argv[2],)).fetchone()
assert row is not None and row[0] == "service_stopping", row
PY
echo "container runtime: $passed passed, 0 failed ($(( $(date +%s) - started )) s)"
