#!/usr/bin/env bash
# Durable webhooks/s and p99 of 1, 2 and 3 paystate instances on one
# PostgreSQL 15, beside one paystate on its embedded bbolt file, and then
# pgbench running the webhook's transaction (bench/pg/run.sh, on a cluster
# of its own), all in one run so that every figure sees the same machine.
# Beside each PostgreSQL rate: WAL syncs (pg_stat_wal), commits
# (pg_stat_database) and SQL statements (pg_stat_statements; BEGIN, COMMIT
# and other utility statements not counted) per webhook, counted from the
# first webhook until ripple has delivered everything the webhooks caused
# (loyalty is on); of those commits, the ones that wrote (took a
# transaction id, pg_current_snapshot) and so may wait for a WAL flush.
# After each row, the CPU it cost: CPU seconds per webhook of the paystate
# processes, of PostgreSQL (every process of the cluster, /proc/<pid>/stat
# utime+stime, with the postmaster's exited children) and of the load tool
# (its own getrusage), the machine's idle share and the share of
# processes outside the run (/proc/stat) over the same span, and the rate
# that CPU cost allows on this machine's cores: when a row's rate is at
# that ceiling, the cores are the limit and more instances on them cannot
# add throughput.
#
#   bench/pg/instances.sh
#
# For each round and each instance count k, a new database on one
# throwaway cluster (scripts/postgres.sh, never the one PAYSTATE_PG_DIR
# names), k `paystate serve` processes on it (storage.backend =
# "postgres", one port each), and bench/load -mode webhook spreading
# creates and webhooks round robin over them (the webhook of a payment goes
# to another instance than its create) until every webhook is applied. The
# bbolt row is the same load on one `paystate serve` with its own file.
# Each configuration's processes are stopped, and checked gone, before the
# next one starts. PostgreSQL keeps the durable settings (fsync,
# synchronous_commit and full_page_writes on; the header prints them).
# Settings (environment):
#   INST_N=4000         webhooks per run (as many payments, created first)
#   INST_C=64           concurrent clients of bench/load
#   INST_COUNTS="1 2 3" instance counts
#   INST_ROUNDS=2       rounds; every round runs bbolt and each count once
#   INST_MAX_CONNS=16   storage.max_conns of each instance; 0: none
#                       written, each build's default
#   INST_PGBENCH=1      0: skip the pgbench part
#   INST_TOP=0          N: after each PostgreSQL row, its N most called
#                       statements (pg_stat_statements), calls per webhook
#   INST_BEFORE=        a git revision (main, a commit): its paystate is
#                       measured on PostgreSQL too, right before this
#                       tree's, in each round (rows "before xK")
#   INST_SETTLE=11      seconds to wait, after the creates and after the
#                       last delivery, before the counters are read:
#                       PostgreSQL 15's backends send their counts of
#                       commits and WAL syncs (pg_stat_database,
#                       pg_stat_wal) at most once a second while busy and
#                       10 s after they went idle, so counters read at
#                       once miss the last webhooks' and count the
#                       creates'
#   INST_WAITS=0        1: while the webhooks run, sample what the
#                       database's active backends wait for
#                       (pg_stat_activity, every 0.1 s) and print, after
#                       each PostgreSQL row, the most frequent wait events
#                       with their statement, as a share of the samples
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

n=${INST_N:-4000}
c=${INST_C:-64}
read -r -a counts <<<"${INST_COUNTS:-1 2 3}"
rounds=${INST_ROUNDS:-2}
maxconns=${INST_MAX_CONNS:-16}
pgbench=${INST_PGBENCH:-1}
before=${INST_BEFORE:-}
top=${INST_TOP:-0}
waits=${INST_WAITS:-0}
settle=${INST_SETTLE:-11}
secret='whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA=' # config.DevelopmentWebhookSecret

work=$(mktemp -d)
chmod 755 "$work"
pgdir=
hz=$(getconf CLK_TCK)
cores=$(nproc)
# pids are the paystate processes of the configuration being measured. They
# are kept in this shell: start runs in it, never in a command
# substitution (a subshell, whose pids the parent would never see).
pids=()
# sampler is the PID of the wait-event sampler (sample), a child of this
# shell, stopped by unsample.
sampler=
stop_all() {
  local p
  unsample
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then
      echo "paystate $p still runs after its stop" >&2
      return 1
    fi
  done
  pids=()
}
cleanup() {
  stop_all || true
  if [ -n "$pgdir" ]; then
    "$root/scripts/postgres.sh" remove "$pgdir" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

(cd "$root" && go build -o "$work/paystate" . && go build -o "$work/load" ./bench/load)
builds=(paystate)
if [ -n "$before" ]; then
  mkdir "$work/before"
  git -C "$root" archive "$before" | tar -x -C "$work/before"
  (cd "$work/before" && go build -o "$work/paystate-before" .)
  builds=(paystate-before paystate)
fi
PAYSTATE_PG_DIR='' "$root/scripts/postgres.sh" start >"$work/env"
# shellcheck disable=SC1091 # written just above by scripts/postgres.sh
. "$work/env"
pgdir=$PAYSTATE_PG_DIR
psql=$PAYSTATE_PG_BIN/psql
q() { "$psql" "$PAYSTATE_PG_DSN" -XqtA -v ON_ERROR_STOP=1 "$@"; }
# pg_stat_statements is loaded at start (shared_preload_libraries): a
# restart, on the same port.
q -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
"$root/scripts/postgres.sh" stop "$pgdir"
"$root/scripts/postgres.sh" start "$pgdir" >"$work/env"
# shellcheck disable=SC1091 # written just above by scripts/postgres.sh
. "$work/env"
q -c 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements' \
  -c 'ALTER SYSTEM SET pg_stat_statements.track_utility = off' -c 'SELECT pg_reload_conf()' >/dev/null

# $work/cpusnap prints the CPU ticks used so far by the paystate processes
# whose PIDs are in $work/pids.now, by the PostgreSQL cluster in directory
# $2 if given (the postmaster, the children it has reaped, and its
# children now), then the machine's busy and total ticks (/proc/stat,
# every core). The load's -before-webhooks hook runs it too, so it is a
# file, not a function.
cat >"$work/cpusnap" <<'EOF'
#!/usr/bin/env bash
set -u
# ticks prints utime+stime of process $1 (with its reaped children's if
# $2 is 1), 0 if it is gone. Fields are counted after the command name,
# which may hold spaces.
ticks() {
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
  read -r -a f <<<"${s##*) }"
  if [ "${2:-0}" = 1 ]; then echo $((f[11] + f[12] + f[13] + f[14])); else echo $((f[11] + f[12])); fi
}
ps=0 pg=0
while read -r p; do ps=$((ps + $(ticks "$p"))); done <"$1/pids.now"
if [ -n "${2:-}" ]; then
  pm=$(head -n 1 "$2/data/postmaster.pid")
  pg=$(ticks "$pm" 1)
  for p in $(ps -o pid= --ppid "$pm"); do pg=$((pg + $(ticks "$p"))); done
fi
read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
busy=$((user + nice + system + irq + softirq + steal))
echo "$ps $pg $busy $((busy + idle + iowait))"
EOF
chmod +x "$work/cpusnap"

# cpu prints what the span between $work/cpu0 and $work/cpu1 (cpusnap)
# cost per webhook, the load's CPU seconds read from $1 (its output).
cpu() {
  local load
  load=$(awk '/^load cpu/ { print $3 }' "$1")
  awk -v n="$n" -v hz="$hz" -v cores="$cores" -v load="${load:-0}" '
    NR == 1 { ps0 = $1; pg0 = $2; busy0 = $3; all0 = $4 }
    NR == 2 {
      ps = ($1 - ps0) / hz; pg = ($2 - pg0) / hz; busy = ($3 - busy0) / hz; all = ($4 - all0) / hz
      ours = ps + pg + load; other = busy - ours; if (other < 0) other = 0
      printf "#   cpu per webhook: paystate %.2f ms, postgres %.2f ms, load %.2f ms, %.2f ms in all: %d cores carry at most %.0f/s; over the %.1f s until no delivery was pending: idle %.0f %%, other processes %.0f %%\n",
        1000 * ps / n, 1000 * pg / n, 1000 * load / n, 1000 * ours / n, cores, cores * n / ours,
        all / cores, 100 * (all - busy) / all, 100 * other / all
    }' "$work/cpu0" "$work/cpu1"
}

# freeport prints a free TCP port on 127.0.0.1.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start starts one paystate (the build $3, default this tree's) with the
# [storage] table given as $2 on a free port, logging to $work/$1.log, adds
# its PID to pids and sets url to its base URL once /healthz answers.
url=
start() {
  local name=$1 storage=$2 bin=${3:-paystate} port
  port=$(freeport)
  cat >"$work/$name.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
[storage]
$storage
[log]
level = "warn"
[loyalty]
points_per_unit = 1
[providers.standard]
webhook_secret = "$secret"
EOF
  "$work/$bin" serve -config "$work/$name.toml" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      url="http://127.0.0.1:$port"
      return 0
    fi
    sleep 0.05
  done
  cat "$work/$name.log" >&2
  echo "paystate $name did not start" >&2
  return 1
}

# counters prints WAL syncs of the cluster, and commits and statements of
# database $1, so far, and the cluster's next transaction id.
counters() {
  # Every backend has sent its counts (INST_SETTLE).
  sleep "$settle"
  q -F ' ' -c "select (select wal_sync from pg_stat_wal),
      (select xact_commit from pg_stat_database where datname = '$1'),
      (select coalesce(sum(calls), 0) from pg_stat_statements s join pg_database d on d.oid = s.dbid
        where d.datname = '$1' and s.query not like '/* bench */%'),
      pg_snapshot_xmax(pg_current_snapshot())"
}

# drained waits until database $1 holds no pending delivery: ripple's work
# of the webhooks (loyalty) is done. It writes how many transactions it
# made to $work/polls (counters leaves out its statements: /* bench */).
drained() {
  local dsn=${PAYSTATE_PG_DSN/\/paystate\?//$1?} i
  for i in $(seq 1 600); do
    echo "$i" >"$work/polls"
    [ "$("$psql" "$dsn" -XqtA -c "/* bench */ select count(*) from deliveries where state = 'pending'")" = 0 ] && return 0
    sleep 0.1
  done
  echo "deliveries of $1 still pending after 60 s" >&2
  return 1
}

# sample starts sampling the active backends of database $1 (INST_WAITS)
# while $work/webhooks.on exists (the load's -before-webhooks hook creates
# it), into $work/waits, until unsample.
sample() {
  [ "$waits" = 1 ] || return 0
  rm -f "$work/waits" "$work/waits.stop" "$work/webhooks.on"
  (
    while [ ! -e "$work/waits.stop" ]; do
      if [ -e "$work/webhooks.on" ]; then
        "$psql" "$PAYSTATE_PG_DSN" -XqtA -F '|' -c "/* bench */ select coalesce(wait_event_type, 'CPU'),
          coalesce(wait_event, '-'), regexp_replace(left(query, 70), '\s+', ' ', 'g') from pg_stat_activity
          where datname = '$1' and state = 'active' and query not like '/* bench */%'" >>"$work/waits" 2>/dev/null || true
      fi
      sleep 0.1
    done
  ) &
  sampler=$!
}

# unsample stops the sampler and prints its most frequent wait events.
unsample() {
  [ -n "$sampler" ] || return 0
  touch "$work/waits.stop"
  wait "$sampler" 2>/dev/null || true
  sampler=
  rm -f "$work/webhooks.on"
  [ -s "$work/waits" ] || return 0
  sort "$work/waits" | uniq -c | sort -rn | head -n 12 |
    awk -v all="$(wc -l <"$work/waits")" '{ n = $1; $1 = ""; printf "#   waits %5.1f%% %s\n", 100 * n / all, $0 }'
  echo "#   (samples: $(wc -l <"$work/waits") active backends over $(sort -u "$work/waits" | wc -l) distinct rows)"
}

# retries prints how many transactions the instances at the
# comma-separated URLs $1 ran again after a deadlock or a serialization
# failure (paystate_store_pg_retries_total, summed).
retries() {
  local u sum=0 v
  for u in ${1//,/ }; do
    v=$(curl -fsS "$u/metrics" 2>/dev/null | awk '$1 == "paystate_store_pg_retries_total" { print $2 }')
    sum=$((sum + ${v:-0}))
  done
  echo "#   transactions retried (deadlock, serialization): $sum"
}

# measure runs the load against the comma-separated URLs $2 and prints one
# result line labelled $1: applied webhooks/s, answered webhooks/s, p50 and
# p99 of the webhook answers and, given a database $3, WAL syncs, commits
# and statements per webhook, counted from the first webhook (the load's
# -before-webhooks resets them) until no delivery is pending.
measure() {
  local label=$1 urls=$2 db=${3:-} out hook syncs=- commits=- stmts=- xid writes=- cluster= commits0 xid0
  out=$work/load.out
  printf '%s\n' "${pids[@]}" >"$work/pids.now"
  [ -n "$db" ] && cluster=$pgdir
  hook="'$work/cpusnap' '$work' '$cluster' >'$work/cpu0'"
  if [ -n "$db" ]; then
    # The creates' commits and WAL syncs are sent (INST_SETTLE) before
    # the counters are reset.
    hook="sleep $settle; $hook; '$psql' '$PAYSTATE_PG_DSN' -XqtA -v ON_ERROR_STOP=1 -F ' ' -c \"select pg_stat_reset_shared('wal')\" -c 'select pg_stat_statements_reset()' -c \"select xact_commit, pg_snapshot_xmax(pg_current_snapshot()) from pg_stat_database where datname = '$db'\" | tail -n 1 >'$work/commits0'; touch '$work/webhooks.on'"
    sample "$db"
  fi
  "$work/load" -mode webhook -url "$urls" -n "$n" -c "$c" -standard-secret "$secret" -before-webhooks "$hook" >"$out" 2>&1 || {
    cat "$out" >&2
    return 1
  }
  if [ -n "$db" ]; then
    rm -f "$work/webhooks.on"
    drained "$db"
  fi
  "$work/cpusnap" "$work" "$cluster" >"$work/cpu1"
  if [ -n "$db" ]; then
    read -r syncs commits stmts xid < <(counters "$db")
    read -r commits0 xid0 <"$work/commits0"
    commits=$((commits - commits0 - $(cat "$work/polls")))
    # Reading the counters takes no transaction id, nor do the polls of
    # drained (read only).
    writes=$((xid - xid0))
  fi
  awk -v label="$label" -v n="$n" -v syncs="$syncs" -v commits="$commits" -v stmts="$stmts" -v writes="$writes" '
    function per(x) { return x == "-" ? "-" : sprintf("%.2f", x / n) }
    /^webhooks$/ { w = 1 }
    w && /^throughput/ { sub("/s", "", $2); answered = $2 }
    w && /^latency/ { p50 = $3; p99 = $7; w = 0 }
    /^applied/ { applied = $(NF - 1) }
    END { printf "%-18s %10s %11s %10s %10s %9s %8s %9s %8s\n", label, applied, answered, p50, p99, per(syncs), per(commits), per(writes), per(stmts) }
  ' "$out"
  cpu "$out"
  if [ -n "$db" ] && [ "$top" -gt 0 ]; then
    q -F ' ' -c "select round(calls::numeric / $n, 2), regexp_replace(left(query, 110), '\s+', ' ', 'g')
      from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = '$db' and s.query not like '/* bench */%' order by calls desc limit $top" | sed 's/^/#   /'
  fi
  unsample
}

echo "# bench/pg/instances.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# $(q -c 'select version()')"
echo "# $(q -c "select string_agg(name || '=' || setting, ' ' order by name) from pg_settings
  where name in ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'commit_delay')")"
echo "# $(uname -sr), $(nproc) cores; webhooks=$n clients=$c max_conns=$maxconns rounds=$rounds; loyalty on"
printf '%-18s %10s %11s %10s %10s %9s %8s %9s %8s\n' run applied/s answered/s p50 p99 syncs/wh txns/wh writes/wh stmts/wh
for r in $(seq 1 "$rounds"); do
  start "bolt-$r" "path = \"$work/bolt-$r.db\""
  measure "r$r bbolt" "$url"
  stop_all
  for k in "${counts[@]}"; do
    for b in "${builds[@]}"; do
      label=postgres
      [ "$b" = paystate-before ] && label=before
      db="bench_${r}_${k}_${label}"
      q -c "create database $db" >/dev/null
      dsn=${PAYSTATE_PG_DSN/\/paystate\?//$db?}
      urls=
      conns=
      [ "$maxconns" = 0 ] || conns="max_conns = $maxconns"
      for i in $(seq 1 "$k"); do
        start "pg-$r-$k-$i-$label" "backend = \"postgres\"
dsn = \"$dsn\"
$conns" "$b"
        urls=${urls:+$urls,}$url
      done
      measure "r$r $label x$k" "$urls" "$db"
      retries "$urls"
      stop_all
    done
  done
done
echo "# syncs/wh: WAL syncs (pg_stat_wal), txns/wh: commits of the database (pg_stat_database),"
echo "# writes/wh: transactions of the cluster that took a transaction id (wrote),"
echo "# stmts/wh: statements (pg_stat_statements, no utility statements), per webhook, from the"
echo "# first webhook until no delivery is pending"

# The instances' cluster goes before pgbench starts its own.
"$root/scripts/postgres.sh" remove "$pgdir"
pgdir=

if [ "$pgbench" = 1 ]; then
  echo
  echo "# pgbench, the webhook's transaction (bench/pg/run.sh), on its own cluster right after"
  PG_DURATION=${PG_DURATION:-10} "$here/run.sh"
fi
