#!/usr/bin/env bash
# Postgres's side of transaction mode against its floor, without Node: each script here is
# one request's statements (the read before the transaction, then BEGIN, the claim, the
# order's INSERT, the completion, COMMIT), run by pgbench as prepared statements, scripts
# alternated round by round on one scratch database with @idem/server's migrations.
# idem.sql holds the statements transaction mode sends (captured through a Drizzle logger on
# 2026-12-04, values inlined, the key from pgbench variables): capture them again when the
# claim or the completion changes. Its claim tries the key lock first and bounds the wait
# only when the lock is held; the idem-* variants were written against the claim before
# that, which always bounded the wait (set_config twice, then the lock, then put it back).
#
#   apps/bench/pgbench/transaction-mode/run.sh [rounds=4] [seconds=8] [clients=16] [script…]
#
# Prints transactions per second per round, then each script's median and its ratio to the
# floor's. Connects as PGHOST/PGPORT/PGUSER (default 127.0.0.1, 5432, postgres).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-4} seconds=${2:-8} clients=${3:-16}
shift $(( $# < 3 ? $# : 3 ))
scripts=("$@")
[ ${#scripts[@]} -gt 0 ] || scripts=(floor idem idem-without-key-lock idem-without-key-lock-or-guard
  idem-key-lock-flat idem-savepoint-instead-of-key-lock
  idem-completion-keeps-expiry floor-with-idem-read
  floor-with-idem-insert floor-with-idem-completion)
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
db="idem_pgbench_$$"
psql -qd postgres -c "create database $db"
trap 'psql -qd postgres -c "drop database if exists $db with (force)"' EXIT
for migration in "$here"/../../../../packages/server/drizzle/*.sql; do
  psql -qd "$db" -v ON_ERROR_STOP=1 -f "$migration" > /dev/null
done
psql -qd "$db" -c "create table bench_orders (id bigserial primary key, principal text not null,
  sku text not null, quantity integer not null, ref text not null,
  created_at timestamptz not null default now())"
results=$(mktemp)
for round in $(seq 1 "$rounds"); do
  # The order turns each round, so the table's growth within a round hits every script.
  ordered=("${scripts[@]}")
  [ $((round % 2)) -eq 0 ] && mapfile -t ordered < <(printf '%s\n' "${scripts[@]}" | tac)
  for script in "${ordered[@]}"; do
    tps=$(pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" -f "$here/$script.sql" "$db" 2>&1 |
      grep -oP 'tps = \K[0-9.]+' | head -n 1)
    echo "round $round $script: ${tps:-failed} tps"
    echo "$script ${tps:-0}" >> "$results"
  done
done
awk '{ tps[$1] = tps[$1] " " $2 } END { for (s in tps) print s tps[s] }' "$results" |
  while read -r script values; do
    median=$(printf '%s\n' $values | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    echo "$script $median"
  done | sort -k2,2nr | awk '$1 == "floor" { floor = $2 } { rows[NR] = $0 } END {
    for (i = 1; i <= NR; i++) { split(rows[i], f, " "); printf "%-36s median %7.0f tps  %.2fx the floor\n", f[1], f[2], f[2] / floor } }'
rm -f "$results"
