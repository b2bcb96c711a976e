#!/usr/bin/env bash
# Runs a command with a real PostgreSQL of its own: installs Debian's
# postgresql when missing, creates a cluster in a temporary folder owned by
# an unprivileged user (initdb refuses root), starts it on a free loopback
# port, creates the database `runloopd`, exports
#   RUNLOOPD_TEST_POSTGRES_URL  postgres://runloopd@127.0.0.1:PORT/runloopd?sslmode=disable
#   RUNLOOPD_TEST_PG_CTL        a command line: "$RUNLOOPD_TEST_PG_CTL stop|start"
#   RUNLOOPD_TEST_POSTGRES_CA   the self-signed certificate it also accepts TLS
#                               with (when openssl is there): the TLS test
#                               connects with sslmode=verify-full against it
#   RUNLOOPD_TEST_POSTGRES_PASSWORD_URL, RUNLOOPD_TEST_POSTGRES_PASSWORD
#                               a role (and its database) that must give a
#                               password (scram-sha-256), the URL without it:
#                               the password-file test's
# (the history-store tests stop and start it under load), runs the command,
# then stops the server and removes the folder whatever happened. A second
# cluster (RUNLOOPD_TEST_POSTGRES_OUTAGE_URL, RUNLOOPD_TEST_POSTGRES_OUTAGE_PG_CTL)
# is the outage test's own, so stopping it disturbs no other test; a third
# (RUNLOOPD_TEST_POSTGRES_FLEET_URL, RUNLOOPD_TEST_POSTGRES_FLEET_PG_CTL) the
# fleet-health outage test's.
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

dirs=()
cleanup() {
  for d in "${dirs[@]}"; do
    "${as[@]}" "$bindir/pg_ctl" -D "$d/data" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$d"
  done
}
trap cleanup EXIT INT TERM

# start_cluster VAR_PREFIX [tls]: a cluster of its own; exports ${VAR_PREFIX}_URL and
# ${VAR_PREFIX}_PG_CTL; with `tls`, also ${VAR_PREFIX}_CA (TLS on, plain still accepted).
start_cluster() {
  local dir port pgctl ctl tls="" query=""
  dir="$(mktemp -d /tmp/runloopd-pg.XXXXXX)"
  dirs+=("$dir")
  chmod 755 "$dir"
  [ ${#as[@]} -eq 0 ] || chown postgres "$dir"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
  if [ "${2:-}" = tls ] && command -v openssl >/dev/null \
    && openssl req -new -x509 -days 2 -nodes -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
      -keyout "$dir/server.key" -out "$dir/server.crt" >/dev/null 2>&1; then
    chmod 600 "$dir/server.key"
    [ ${#as[@]} -eq 0 ] || chown postgres "$dir/server.key" "$dir/server.crt"
    tls=" -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
    export "$1_CA=$dir/server.crt"
    # The tests connect in plain text, as before, unless they ask for TLS.
    query="?sslmode=disable"
  fi
  pgctl=("${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 30
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200$tls")
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
  # One role must give its password (the first matching line of pg_hba.conf wins).
  local hba="$dir/data/pg_hba.conf"
  "${as[@]}" sh -c "{ echo 'host all runloopd_pw 127.0.0.1/32 scram-sha-256'; cat '$hba'; } > '$hba.new' && mv '$hba.new' '$hba'"
  "${pgctl[@]}" start >/dev/null
  "${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres -qc "CREATE ROLE runloopd LOGIN CREATEDB" >/dev/null
  "${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres -qc "CREATE DATABASE runloopd OWNER runloopd" >/dev/null
  local password
  password="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
  "${as[@]}" "$bindir/psql" -h "$dir" -p "$port" -U postgres \
    -qc "CREATE ROLE runloopd_pw LOGIN PASSWORD '$password'" -qc "CREATE DATABASE runloopd_pw OWNER runloopd_pw" >/dev/null
  export "$1_PASSWORD_URL=postgres://runloopd_pw@127.0.0.1:$port/runloopd_pw$query"
  export "$1_PASSWORD=$password"
  export "$1_URL=postgres://runloopd@127.0.0.1:$port/runloopd$query"
  printf -v ctl '%q ' "${pgctl[@]}"
  export "$1_PG_CTL=$ctl"
}

# One shared by the tests; two that an outage test each stops and starts on its own.
start_cluster RUNLOOPD_TEST_POSTGRES tls
start_cluster RUNLOOPD_TEST_POSTGRES_OUTAGE
start_cluster RUNLOOPD_TEST_POSTGRES_FLEET
export RUNLOOPD_TEST_PG_CTL="$RUNLOOPD_TEST_POSTGRES_PG_CTL"
port="${RUNLOOPD_TEST_POSTGRES_URL##*:}"; port="${port%%/*}"
echo "with-postgres.sh: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port and two for the outage tests" >&2
status=0
"$@" || status=$?
exit $status
