#!/usr/bin/env bash
# Runs a command with a real PostgreSQL of its own: installs Debian's
# postgresql when missing, creates a cluster in a temporary folder owned by
# an unprivileged user (initdb refuses root), starts it on a free loopback
# port, creates the database `runloopd`, exports
#   RUNLOOPD_TEST_POSTGRES_URL  postgres://runloopd@127.0.0.1:PORT/runloopd
#   RUNLOOPD_TEST_PG_CTL        a command line: "$RUNLOOPD_TEST_PG_CTL stop|start"
# (the history-store tests stop and start it under load), runs the command,
# then stops the server and removes the folder whatever happened.
#   bash scripts/with-postgres.sh swift test --skip-build
set -euo pipefail

bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "with-postgres.sh: installing postgresql (apt)" >&2
  if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
fi

# initdb and postgres refuse to run as root: as root, use the postgres user
# the package created; otherwise whoever runs this.
as=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  as=(runuser -u postgres --)
fi

dir="$(mktemp -d /tmp/runloopd-pg.XXXXXX)"
chmod 755 "$dir"
[ ${#as[@]} -eq 0 ] || chown postgres "$dir"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
pgctl=("${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200")

cleanup() {
  "${pgctl[@]}" stop -m immediate >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
"${pgctl[@]}" start >/dev/null
"${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres -qc "CREATE ROLE runloopd LOGIN CREATEDB" >/dev/null
"${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres -qc "CREATE DATABASE runloopd OWNER runloopd" >/dev/null

export RUNLOOPD_TEST_POSTGRES_URL="postgres://runloopd@127.0.0.1:$port/runloopd"
printf -v RUNLOOPD_TEST_PG_CTL '%q ' "${pgctl[@]}"
export RUNLOOPD_TEST_PG_CTL
echo "with-postgres.sh: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)" >&2
status=0
"$@" || status=$?
exit $status
