#!/usr/bin/env bash
# Measures paystate's durable webhook transaction on PostgreSQL 15 with
# pgbench, at 1, 16 and 64 clients, beside a one-insert commit as the
# reference, on a throwaway cluster (scripts/postgres.sh) that is removed
# at the end. See bench/pg/README.md for what the transaction models and
# how to read the output.
#
#   bench/pg/run.sh              # the PostgreSQL figures
#   bench/pg/run.sh --go-bench   # then paystate's webhook path (./httpd), in the same run
#
# Settings (environment):
#   PG_DURATION=10        seconds per pgbench run (-T)
#   PG_CLIENTS="1 16 64"  client counts (-c N -j min(N,2))
#   PG_ROUNDS=1           times to repeat every run; the summary takes medians
#   PG_PAYMENTS=200000    payments in status created, loaded before each run
#   PG_SHARDS=1           rows per balance in the model's tables (1: two balance rows)
#   PG_SCRIPTS="webhook webhook_before commit"
#                         the pgbench scripts run at each client count, in
#                         this order: webhook (paystate's transaction now,
#                         on paystate's own tables, in its four round
#                         trips), webhook_before (paystate's transaction
#                         before its writes were batched, one round trip
#                         per statement), model (the first design's model
#                         of the transaction, on schema.sql), webhook_fn
#                         (the model in one round trip), webhook_split (the
#                         model in two commits), commit (the reference: one
#                         insert, one commit)
#   GO_BENCH=0            1: same as --go-bench
# The cluster is always a new one of this run, whatever PAYSTATE_PG_DIR
# says: run.sh removes it at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

duration=${PG_DURATION:-10}
read -r -a clients <<<"${PG_CLIENTS:-1 16 64}"
rounds=${PG_ROUNDS:-1}
payments=${PG_PAYMENTS:-200000}
shards=${PG_SHARDS:-1}
read -r -a scripts <<<"${PG_SCRIPTS:-webhook webhook_before commit}"
for s in "${scripts[@]}"; do
  [ -f "$here/$s.sql" ] || {
    echo "no pgbench script $here/$s.sql" >&2
    exit 2
  }
done
gobench=${GO_BENCH:-0}
for arg in "$@"; do
  case "$arg" in
  --go-bench) gobench=1 ;;
  *)
    echo "usage: bench/pg/run.sh [--go-bench]" >&2
    exit 2
    ;;
  esac
done

work=$(mktemp -d)
pgdir=
cleanup() {
  if [ -n "$pgdir" ]; then
    "$root/scripts/postgres.sh" remove "$pgdir" || true
    pgdir=
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. The cluster, a new one (an inherited PAYSTATE_PG_DIR is not used).
PAYSTATE_PG_DIR='' "$root/scripts/postgres.sh" start >"$work/env"
# shellcheck disable=SC1091 # written just above by scripts/postgres.sh
. "$work/env"
pgdir=$PAYSTATE_PG_DIR
dsn=$PAYSTATE_PG_DSN
psql=$PAYSTATE_PG_BIN/psql
pgbench=$PAYSTATE_PG_BIN/pgbench

q() { "$psql" "$dsn" -XqtA -v ON_ERROR_STOP=1 "$@"; }

# 2. The schemas: the model's (schema.sql) in the cluster's database, and
# paystate's own (its migrations, in order) in the database ps, for the
# scripts that say "-- schema: paystate" on their first line.
q -c 'SET client_min_messages = warning' -f "$here/schema.sql"
psdsn=${dsn/\/paystate\?//ps?}
q -c 'create database ps'
for m in "$root"/store/postgres/migrations/*.sql; do
  "$psql" "$psdsn" -XqtA -v ON_ERROR_STOP=1 -1 -c 'SET client_min_messages = warning' -f "$m"
done
# ownschema reports whether script $1 runs on paystate's own tables (its
# first line says "-- schema: paystate").
ownschema() { head -n 1 "$here/$1.sql" | grep -q '^-- schema: paystate$'; }

# scriptfile prints the file pgbench runs for script $1: its own, but for
# webhook_before, whose file holds the reads: its writes are webhook.sql's,
# each sent alone (no pipeline), the inbox entry inserted with ON CONFLICT
# DO NOTHING as that tree did, then COMMIT.
scriptfile() {
  if [ "$1" != webhook_before ]; then
    echo "$here/$1.sql"
    return
  fi
  {
    cat "$here/webhook_before.sql"
    awk '/^UPDATE payments SET/ { on = 1 } /^COMMIT;/ { on = 0 } on && !/^\\(start|end)pipeline/' "$here/webhook.sql" |
      sed "s/'null'::jsonb, '');\$/'null'::jsonb, '') ON CONFLICT DO NOTHING;/"
    echo 'COMMIT;'
  } >"$work/webhook_before.sql"
  grep -q 'ON CONFLICT DO NOTHING;$' "$work/webhook_before.sql" || {
    echo "webhook.sql's inbox insert was not found: webhook_before cannot be made" >&2
    return 1
  }
  echo "$work/webhook_before.sql"
}

echo "# bench/pg $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# $(q -c 'select version()')"
echo "# $(uname -sr), $(nproc) cores, data on $(df -T "$pgdir" | awk 'NR == 2 { print $2 " " $1 }')"
echo "# $(q -c "select string_agg(name || '=' || setting || coalesce(unit, ''), ' ' order by name) from pg_settings
  where name in ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'shared_buffers',
                 'max_wal_size', 'commit_delay', 'wal_level')")"
echo "# payments=$payments shards=$shards duration=${duration}s clients=${clients[*]} scripts=${scripts[*]} rounds=$rounds"
echo

# percentiles prints the p50 and p99 latency in ms of pgbench's per
# transaction logs (third column: microseconds).
percentiles() {
  awk '{ print $3 }' "$@" | sort -n | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "- -"; exit }
      i50 = int(NR * 0.50); if (i50 < 1) i50 = 1
      i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
      printf "%.3f %.3f\n", v[i50] / 1000, v[i99] / 1000
    }'
}

# check verifies that a webhook run captured each payment once and that
# the ledger balances: captured payments = processed events = pgbench's
# transactions, two ledger entries each, the balances sum to zero and the
# receivable equals the captured amounts.
check() {
  local want=$1 got
  got=$(q -c "select (select count(*) from payments where status = 'captured') || ' ' ||
      (select count(*) from processed) || ' ' || (select count(*) from ledger) / 2 || ' ' ||
      (select count(*) from timeline where seq = 2) || ' ' || (select count(*) from outbox)")
  if [ "$got" != "$want $want $want $want $want" ]; then
    echo "check failed: captured, processed, postings, steps, outbox = $got; pgbench committed $want" >&2
    return 1
  fi
  got=$(q -c "select (select coalesce(sum(balance), 0) from balances) = 0 and
      (select coalesce(sum(balance), 0) from balances where account = 'psp_receivable') =
      (select coalesce(sum(amount), 0) from payments where status = 'captured')")
  if [ "$got" != t ]; then
    echo "check failed: the balances do not match the captured payments" >&2
    return 1
  fi
}

printf '%-5s %-13s %7s %9s %8s %8s %8s %8s %10s %9s %8s %5s\n' \
  round script clients tps avg_ms p50_ms p99_ms txns wal_syncs syncs/tx KiB/tx fpi/tx
results=()

# checkown is check for paystate's own tables (webhook, webhook_before):
# captured payments, processed ids, inbox entries, timeline steps and
# outbox records equal pgbench's committed transactions, with two
# deliveries and two ledger lines each; the balances sum to zero and the
# receivable equals the captured amounts.
checkown() {
  local want=$1 got
  got=$("$psql" "$psdsn" -XqtA -c "select (select count(*) from payments where status = 'captured' and version = 2) || ' ' ||
      (select count(*) from processed) || ' ' || (select count(*) from inbox where processed) || ' ' ||
      (select count(*) from timeline) || ' ' || (select count(*) from outbox) || ' ' ||
      (select count(*) from deliveries) / 2 || ' ' || (select count(*) from ledger) / 2")
  if [ "$got" != "$want $want $want $want $want $want $want" ]; then
    echo "check failed: captured, processed, inbox, steps, outbox, deliveries/2, postings = $got; pgbench committed $want" >&2
    return 1
  fi
  got=$("$psql" "$psdsn" -XqtA -c "select (select coalesce(sum(amount), 0) from balances) = 0 and
      (select coalesce(sum(amount), 0) from balances where account = 'psp_receivable') =
      (select coalesce(sum(amount), 0) from payments where status = 'captured')")
  if [ "$got" != t ]; then
    echo "check failed: the balances do not match the captured payments" >&2
    return 1
  fi
}

# run runs one pgbench script at c clients on freshly loaded tables (round
# r) and prints one line: throughput, latency, and the WAL counts of the run
# (fdatasyncs of WAL, WAL bytes and full-page images per transaction).
run() {
  local script=$1 c=$2 r=$3 j stride lsn out rc tps lat txns p50 p99 stats syncs bytes fpi ns file target=$dsn
  j=$((c < 2 ? c : 2))
  stride=$((payments / c))
  ns=$(date +%s%N)
  if ownschema "$script"; then
    target=$psdsn
    "$psql" "$psdsn" -XqtA -v ON_ERROR_STOP=1 -v payments="$payments" -v ns="$ns" -f "$here/load_paystate.sql"
  else
    q -v payments="$payments" -v shards="$shards" -f "$here/load.sql"
  fi
  lsn=$(q -c 'select pg_current_wal_lsn()')
  q -c "select pg_stat_reset_shared('wal')" >/dev/null
  out=$work/$script.$c.out
  rc=0
  file=$(scriptfile "$script")
  "$pgbench" -n -M prepared -f "$file" -c "$c" -j "$j" -T "$duration" \
    -D n=0 -D stride="$stride" -D shards="$shards" -D ns="$ns" \
    --log --log-prefix="$work/$script.$c.log" "$target" >"$out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || grep -q 'aborted' "$out"; then
    cat "$out" >&2
    echo "pgbench $script at $c clients failed (exit $rc); a client that ran out of payments needs a larger PG_PAYMENTS" >&2
    return 1
  fi
  tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$out")
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' "$out")
  txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
  read -r p50 p99 < <(percentiles "$work/$script.$c.log".*)
  # The WAL writer reports its counts on its next round (wal_writer_delay).
  sleep 1
  stats=$(q -F ' ' -c "select wal_sync, pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn'), wal_fpi from pg_stat_wal")
  read -r syncs bytes fpi <<<"$stats"
  if ownschema "$script"; then
    checkown "$txns"
  elif [ "$script" != commit ]; then
    check "$txns"
  fi
  awk -v r="$r" -v s="$script" -v c="$c" -v tps="$tps" -v lat="$lat" -v p50="$p50" -v p99="$p99" -v n="$txns" \
    -v syncs="$syncs" -v bytes="$bytes" -v fpi="$fpi" 'BEGIN {
      printf "%-5d %-13s %7d %9.0f %8.3f %8s %8s %8d %10d %9.3f %8.2f %5.2f\n",
        r, s, c, tps, lat, p50, p99, n, syncs, syncs / n, bytes / 1024 / n, fpi / n
    }'
  results+=("$script $c $tps $lat $p50 $r")
}

# 3 and 4. The runs: at each client count every script, one after the
# other, so that the reference sees the same machine as the webhook.
for r in $(seq 1 "$rounds"); do
  for c in "${clients[@]}"; do
    for s in "${scripts[@]}"; do
      run "$s" "$c" "$r"
    done
  done
done

# The summary: medians over the rounds (of one value when PG_ROUNDS=1).
# A ratio is taken within a round, webhook and commit at the same client
# count one after the other, and then its median.
echo
printf '%s\n' "${results[@]}" | awk -v counts="${clients[*]}" -v rounds="$rounds" '
  function median(list,   v, n, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++)
      for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  !($1 in seen) { seen[$1] = 1; order[++m] = $1 }
  { tps[$1, $2] = tps[$1, $2] " " $3; one[$1, $2, $6] = $3 }
  $2 == 1 { lat[$1] = lat[$1] " " $4; p50[$1] = p50[$1] " " $5 }
  END {
    nc = split(counts, cs, " ")
    for (i = 1; i <= m; i++) {
      s = order[i]; best = 0
      for (j = 1; j <= nc; j++) {
        t = median(tps[s, cs[j]])
        if (t + 0 > best) { best = t; at = cs[j] }
      }
      printf "best of %s clients, %s: %.0f tps at %d clients\n", counts, s, best, at
      if (s in lat) printf "1-client %s latency: avg %.3f ms, p50 %.3f ms\n", s, median(lat[s]), median(p50[s])
    }
    for (i = 1; i <= m; i++) {
      s = order[i]
      if (s == "commit" || !(("commit", cs[1], 1) in one)) continue
      for (j = 1; j <= nc; j++) {
        list = ""
        for (r = 1; r <= rounds; r++) list = list " " one[s, cs[j], r] / one["commit", cs[j], r]
        printf "%s / commit tps at %d clients: %.3f\n", s, cs[j], median(list)
      }
    }
  }'

# The cluster goes before the Go benchmark, so that no checkpoint of
# PostgreSQL shares the disk with it.
cleanup
trap - EXIT INT TERM

# 5. The Go benchmark of paystate's webhook path, in the same run.
if [ "$gobench" = 1 ]; then
  echo
  cd "$root"
  rc=0
  list=$(go test -list '^BenchmarkWebhooks' ./httpd/ 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "$list"
    echo "go test -list ./httpd/ failed (exit $rc): BenchmarkWebhooks skipped"
  elif ! grep -q '^BenchmarkWebhooks$' <<<"$list"; then
    echo "BenchmarkWebhooks is not in ./httpd (go test -list found none): skipped"
  else
    # The durable path (each webhook stored and applied in one commit) at
    # 1 client and at 256, with serve's garbage-collector defaults
    # (cli/gc.go) unless GOGC or GOMEMLIMIT is set.
    export GOGC=${GOGC:-400} GOMEMLIMIT=${GOMEMLIMIT:-128MiB}
    echo "# GOGC=$GOGC GOMEMLIMIT=$GOMEMLIMIT go test -run '^\$' -bench 'BenchmarkLoneWebhook/inline\$' -benchtime 2000x ./httpd/"
    go test -run '^$' -bench 'BenchmarkLoneWebhook/inline$' -benchtime 2000x ./httpd/
    echo "# GOGC=$GOGC GOMEMLIMIT=$GOMEMLIMIT go test -run '^\$' -bench 'BenchmarkWebhooks/ratio\$' -benchtime 16384x ./httpd/"
    go test -run '^$' -bench 'BenchmarkWebhooks/ratio$' -benchtime 16384x ./httpd/
  fi
fi
