#!/usr/bin/env bash
# workloads/relay/verify.sh: check the relay workload on a throwaway PostgreSQL cluster.
#
#   bash workloads/relay/verify.sh            # PGBIN defaults to /usr/lib/postgresql/15/bin
#   ROWS=100000 bash workloads/relay/verify.sh   # seed size per partition (default 200)
#
# Steps: initdb + start a private cluster (Unix socket only, in a temp dir), load
# schema.sql twice (idempotency), run check.sql, seed, run check.sql again, then apply
# crates/pgshift/tests/data/migrations/relay/*.sql in order, each with plain `psql -f`
# (no wrapping transaction). The cluster is stopped and removed on exit.
# Run as root (the server runs as the `postgres` OS user) or as a non-root user.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
ROWS="${ROWS:-200}"
migrations="$root/crates/pgshift/tests/data/migrations/relay"

dir="$(mktemp -d /tmp/relay-verify.XXXXXX)"
chmod 755 "$dir"
as_pg() {
    if [ "$(id -u)" = 0 ]; then
        su postgres -c "$*"
    else
        bash -c "$*"
    fi
}
[ "$(id -u)" = 0 ] && chown postgres "$dir"

cleanup() {
    as_pg "'$PGBIN/pg_ctl' -D '$dir/data' -m immediate stop" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT

as_pg "'$PGBIN/initdb' -D '$dir/data' -U postgres --auth=trust --no-sync" >/dev/null
as_pg "'$PGBIN/pg_ctl' -D '$dir/data' -w -l '$dir/log' -o \"-c listen_addresses='' -c unix_socket_directories='$dir' -c wal_level=logical -c fsync=off\" start" >/dev/null

psql_() { psql -X -q -h "$dir" -U postgres -v ON_ERROR_STOP=1 "$@"; }
psql_ -d postgres -c 'CREATE DATABASE relay'

echo "== schema (twice)"
psql_ -d relay -f "$here/schema.sql" >/dev/null
psql_ -d relay -f "$here/schema.sql" >/dev/null
echo "== check (empty)"
psql_ -d relay -f "$here/check.sql" 2>/dev/null
echo "== seed ($ROWS rows per partition)"
start_ms=$(($(date +%s%N) / 1000000))
psql_ -d relay -v rows_per_partition="$ROWS" -f "$here/seed.sql" >/dev/null
end_ms=$(($(date +%s%N) / 1000000))
echo "seed took $((end_ms - start_ms)) ms"
echo "== check (seeded)"
psql_ -d relay -f "$here/check.sql" 2>/dev/null

echo "== migrations"
n=0
for f in "$migrations"/[0-9][0-9][0-9][0-9]_*.sql; do
    psql_ -d relay -f "$f" >/dev/null
    n=$((n + 1))
done
echo "applied $n migrations"
echo "relay verify: OK"
