#!/usr/bin/env bash
# Durable webhooks/s and p99 of 1, 2 and 3 paystate instances on one
# PostgreSQL 15, beside one paystate on its embedded bbolt file, and then
# pgbench running the webhook's transaction (bench/pg/run.sh), all in one
# run so that every figure sees the same machine.
#
#   bench/pg/instances.sh
#
# For each round and each instance count k, a new database on one
# throwaway cluster (scripts/postgres.sh), k `paystate serve` processes on
# it (storage.backend = "postgres", one port each), and bench/load -mode
# webhook spreading creates and webhooks round robin over them (the webhook
# of a payment goes to another instance than its create) until every
# webhook is applied. The bbolt row is the same load on one `paystate
# serve` with its own file. Settings (environment):
#   INST_N=4000         webhooks per run (as many payments, created first)
#   INST_C=64           concurrent clients of bench/load
#   INST_COUNTS="1 2 3" instance counts
#   INST_ROUNDS=2       rounds; every round runs bbolt and each count once
#   INST_MAX_CONNS=16   storage.max_conns of each instance
#   INST_PGBENCH=1      0: skip the pgbench part
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

n=${INST_N:-4000}
c=${INST_C:-64}
read -r -a counts <<<"${INST_COUNTS:-1 2 3}"
rounds=${INST_ROUNDS:-2}
maxconns=${INST_MAX_CONNS:-16}
pgbench=${INST_PGBENCH:-1}
secret='whsec_cGF5c3RhdGUtZGV2ZWxvcG1lbnQtc2VjcmV0LTAwMDA=' # config.DevelopmentWebhookSecret

work=$(mktemp -d)
chmod 755 "$work"
pgdir=
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
cleanup() {
  stop_all
  if [ -n "$pgdir" ]; then
    "$root/scripts/postgres.sh" remove "$pgdir" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

(cd "$root" && go build -o "$work/paystate" . && go build -o "$work/load" ./bench/load)
"$root/scripts/postgres.sh" start >"$work/env"
# shellcheck disable=SC1091 # written just above by scripts/postgres.sh
. "$work/env"
pgdir=$PAYSTATE_PG_DIR
psql=$PAYSTATE_PG_BIN/psql

# freeport prints a free TCP port on 127.0.0.1.
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start starts one paystate with the [storage] table given as $2 on a free
# port, logging to $work/$1.log, and prints its base URL once /healthz
# answers.
start() {
  local name=$1 storage=$2 port
  port=$(freeport)
  cat >"$work/$name.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
[storage]
$storage
[log]
level = "warn"
[providers.standard]
webhook_secret = "$secret"
EOF
  "$work/paystate" serve -config "$work/$name.toml" >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      echo "http://127.0.0.1:$port"
      return 0
    fi
    sleep 0.05
  done
  cat "$work/$name.log" >&2
  echo "paystate $name did not start" >&2
  return 1
}

# measure runs the load against the comma-separated URLs $2 and prints one
# result line labelled $1: applied webhooks/s, answered webhooks/s, p50 and
# p99 of the webhook answers.
measure() {
  local label=$1 urls=$2 out
  out=$work/load.out
  "$work/load" -mode webhook -url "$urls" -n "$n" -c "$c" -standard-secret "$secret" >"$out" 2>&1 || {
    cat "$out" >&2
    return 1
  }
  awk -v label="$label" '
    /^webhooks$/ { w = 1 }
    w && /^throughput/ { sub("/s", "", $2); answered = $2 }
    w && /^latency/ { p50 = $3; p99 = $7; w = 0 }
    /^applied/ { applied = $(NF - 1) }
    END { printf "%-18s %10s %12s %10s %10s\n", label, applied, answered, p50, p99 }
  ' "$out"
}

echo "# bench/pg/instances.sh $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# $("$psql" "$PAYSTATE_PG_DSN" -XqtA -c 'select version()')"
echo "# $(uname -sr), $(nproc) cores; webhooks=$n clients=$c max_conns=$maxconns rounds=$rounds"
printf '%-18s %10s %12s %10s %10s\n' run applied/s answered/s p50 p99
for r in $(seq 1 "$rounds"); do
  url=$(start "bolt-$r" "path = \"$work/bolt-$r.db\"")
  measure "r$r bbolt" "$url"
  stop_all
  for k in "${counts[@]}"; do
    db="bench_${r}_$k"
    "$psql" "$PAYSTATE_PG_DSN" -XqtA -c "create database $db" >/dev/null
    dsn=${PAYSTATE_PG_DSN/\/paystate\?//$db?}
    urls=
    for i in $(seq 1 "$k"); do
      u=$(start "pg-$r-$k-$i" "backend = \"postgres\"
dsn = \"$dsn\"
max_conns = $maxconns")
      urls=${urls:+$urls,}$u
    done
    measure "r$r postgres x$k" "$urls"
    stop_all
  done
done

if [ "$pgbench" = 1 ]; then
  echo
  echo "# pgbench, the webhook's transaction (bench/pg/run.sh), on its own cluster right after"
  PG_DURATION=${PG_DURATION:-10} "$here/run.sh"
fi
