#!/usr/bin/env bash
# Starts a throwaway PostgreSQL 15 cluster on 127.0.0.1 for benchmarks and
# for tests that need a real PostgreSQL, and prints the lines to export:
#
#   eval "$(scripts/postgres.sh start)"   # PAYSTATE_PG_DSN, PAYSTATE_PG_DIR, PAYSTATE_PG_BIN
#   psql "$PAYSTATE_PG_DSN" -c 'select 1'
#   scripts/postgres.sh remove "$PAYSTATE_PG_DIR"   # stop it and delete its files
#
# Commands:
#   start [DIR]   install PostgreSQL 15 from Debian's packages if it is
#                 missing, create the cluster in DIR (or $PAYSTATE_PG_DIR, or
#                 a new temporary directory) unless it is there, start it
#                 unless it runs, make the database "paystate", and print
#                 the exports. Running it again on the same DIR prints the
#                 same DSN (after a stop, too, unless its port was taken).
#   stop DIR      stop the cluster, keep its files (start DIR starts it again)
#   remove DIR    stop the cluster and delete DIR
#
# The output of start is one `export NAME='value'` line per variable and
# nothing else (progress goes to stderr), so a program can read it too:
#   PAYSTATE_PG_DSN   postgres://postgres@127.0.0.1:PORT/paystate?sslmode=disable
#   PAYSTATE_PG_DIR   the cluster's directory (data/, server.log, the socket)
#   PAYSTATE_PG_BIN   the PostgreSQL 15 programs (psql, pgbench, pg_ctl)
#
# The cluster is for this machine only: it listens on 127.0.0.1 (and on a
# unix socket in DIR), trusts every local connection, and keeps PostgreSQL's
# durable defaults, written out: fsync = on, synchronous_commit = on,
# full_page_writes left at its default (on); max_connections is 300. As
# root, the server runs as the OS user "postgres" (initdb refuses root),
# which then owns DIR: DIR's parents must be reachable by that user (a 0700
# directory of root's, such as Go's t.TempDir(), is not; leave DIR unset
# and the script picks one).
set -euo pipefail

pgversion=15
pgbin=/usr/lib/postgresql/$pgversion/bin
dbname=paystate
superuser=postgres

say() { echo "postgres.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

# install_pg puts PostgreSQL 15 (server and client programs) in place from
# Debian's packages if any of the programs used here is missing.
install_pg() {
  local p missing=
  for p in initdb pg_ctl postgres psql pgbench; do
    [ -x "$pgbin/$p" ] || missing=1
  done
  [ -z "$missing" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "PostgreSQL $pgversion is not installed in $pgbin; as root this script installs postgresql-$pgversion"
  say "installing postgresql-$pgversion and postgresql-client-$pgversion"
  apt-get update >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "postgresql-$pgversion" "postgresql-client-$pgversion" >&2
  for p in initdb pg_ctl postgres psql pgbench; do
    [ -x "$pgbin/$p" ] || die "$pgbin/$p is still missing after the install"
  done
}

# as runs a command as the OS user that owns the cluster: "postgres" when
# this script runs as root, the caller otherwise.
as() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# server_user makes sure the OS user "postgres" exists when running as root
# (Debian's package creates it; a machine with the programs but without the
# user gets a system user of that name).
server_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  getent passwd postgres >/dev/null && return 0
  say "creating the system user postgres"
  useradd --system --home-dir /var/lib/postgresql --no-create-home --shell /usr/sbin/nologin postgres
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$(shuf -i 20000-59999 -n 1)
    if ! (: <"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  die "no free port found on 127.0.0.1"
}

running() { as "$pgbin/pg_ctl" -D "$1/data" status >/dev/null 2>&1; }

# check_dir refuses a directory name that would need quoting in the DSN,
# the configuration file or the printed exports.
check_dir() {
  case "$1" in
  /*) ;;
  *) die "directory must be an absolute path: $1" ;;
  esac
  [[ "$1" =~ ^[A-Za-z0-9._/+-]+$ ]] || die "directory name must use only letters, digits and ._/+-: $1"
}

# create makes the cluster in $1/data with trust authentication for local
# connections and the durable settings.
create() {
  local dir=$1
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir"
    as test -w "$dir" || die "the OS user postgres cannot write $dir (is a parent directory private to root?)"
  fi
  say "initdb in $dir/data"
  as "$pgbin/initdb" -D "$dir/data" --username="$superuser" --auth=trust \
    --encoding=UTF8 --locale=C --no-instructions >"$dir/initdb.log" 2>&1 ||
    {
      cat "$dir/initdb.log" >&2
      die "initdb failed"
    }
  # A unix socket path must fit in 107 bytes (sun_path); without room for
  # one the cluster listens on TCP only.
  local sockdir=$dir
  if [ $((${#dir} + 20)) -gt 107 ]; then
    sockdir=
  fi
  as tee -a "$dir/data/postgresql.conf" >/dev/null <<EOF

# paystate: a throwaway cluster on loopback, with the durable settings.
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockdir'
fsync = on
synchronous_commit = on
# full_page_writes: PostgreSQL's default (on)
# Room for benchmarks of 256 clients (the default is 100).
max_connections = 300
EOF
}

# start_server starts the cluster in $1 on the port it had before if that
# is free, else on a free port, trying again on another port if one was
# taken in between, and records the port in $1/port.
start_server() {
  local dir=$1 port= tail
  if [ -f "$dir/port" ]; then
    port=$(cat "$dir/port")
    if (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      port=
    fi
  fi
  for _ in 1 2 3 4 5; do
    [ -n "$port" ] || port=$(free_port)
    if as "$pgbin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 60 start >/dev/null; then
      echo "$port" | as tee "$dir/port" >/dev/null
      return 0
    fi
    tail=$(tail -n 20 "$dir/server.log")
    if ! grep -q 'could not bind\|could not create any TCP/IP sockets' <<<"$tail"; then
      echo "$tail" >&2
      die "PostgreSQL did not start (log: $dir/server.log)"
    fi
    say "port $port was taken, trying another"
    port=
  done
  die "PostgreSQL did not start after 5 ports (log: $dir/server.log)"
}

cmd_start() {
  local dir=${1:-${PAYSTATE_PG_DIR:-}}
  install_pg
  server_user
  if [ -z "$dir" ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/paystate-pg.XXXXXX")
  fi
  check_dir "$dir"
  mkdir -p "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    [ -z "$(find "$dir" -mindepth 1 -maxdepth 1 -print -quit)" ] || die "$dir is not empty and holds no cluster"
    create "$dir"
    touch "$dir/.paystate-pg"
  fi
  [ -f "$dir/.paystate-pg" ] || die "$dir holds a cluster this script did not create"
  if running "$dir"; then
    say "already running in $dir"
  else
    start_server "$dir"
  fi
  local port dsn
  port=$(cat "$dir/port")
  dsn="postgres://$superuser@127.0.0.1:$port/$dbname?sslmode=disable"
  if [ -z "$("$pgbin/psql" "postgres://$superuser@127.0.0.1:$port/postgres?sslmode=disable" -XtAc \
    "select 1 from pg_database where datname = '$dbname'")" ]; then
    "$pgbin/psql" "postgres://$superuser@127.0.0.1:$port/postgres?sslmode=disable" -Xq -c "create database $dbname" >&2
  fi
  echo "export PAYSTATE_PG_DSN='$dsn'"
  echo "export PAYSTATE_PG_DIR='$dir'"
  echo "export PAYSTATE_PG_BIN='$pgbin'"
}

cmd_stop() {
  local dir=${1:?usage: postgres.sh stop DIR}
  check_dir "$dir"
  [ -f "$dir/.paystate-pg" ] || die "$dir holds no cluster of this script"
  if running "$dir"; then
    as "$pgbin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
}

cmd_remove() {
  local dir=${1:?usage: postgres.sh remove DIR}
  [ -d "$dir" ] || return 0
  cmd_stop "$dir"
  rm -rf "$dir"
}

case "${1:-start}" in
start) cmd_start "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
remove) cmd_remove "${2:-}" ;;
*) die "usage: postgres.sh start [DIR] | stop DIR | remove DIR" ;;
esac
