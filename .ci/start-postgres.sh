#!/usr/bin/env bash
# Start a local PostgreSQL server for the hermes-core tests and print the DSN.
#
# Usage (as root, on Debian):   eval "$(bash .ci/start-postgres.sh)"
#
# - installs the `postgresql` Debian package when no server is installed;
# - creates the cluster (pg_createcluster) when it does not exist, then starts it;
# - creates the role and database `hermes_test` (UTF-8, C.UTF-8 locale) on 127.0.0.1;
# - enables pg_trgm in that database when the extension is available;
# - prints ONLY `export HERMES_CORE_POSTGRES_DSN=...` on stdout (progress goes to stderr).
#
# Environment: HERMES_PG_VERSION (default: 15 when installed, else the newest installed),
# HERMES_PG_CLUSTER (default: main), HERMES_PG_PASSWORD (default: hermes_test).
set -euo pipefail

log() { printf 'start-postgres: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (it starts the system cluster and creates a role)"

installed_versions() {
    ls -1 /usr/lib/postgresql 2>/dev/null | grep -E '^[0-9]+$' | sort -n || true
}

if [ -z "$(installed_versions)" ] || ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "PostgreSQL is not installed; installing the Debian package 'postgresql'"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

version="${HERMES_PG_VERSION:-}"
if [ -z "$version" ]; then
    if installed_versions | grep -qx 15; then version=15; else version="$(installed_versions | tail -n1)"; fi
fi
[ -n "$version" ] || die "no PostgreSQL server version found under /usr/lib/postgresql"
cluster="${HERMES_PG_CLUSTER:-main}"
password="${HERMES_PG_PASSWORD:-hermes_test}"

if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$version $cluster"; then
    log "creating cluster $version/$cluster"
    pg_createcluster --locale C.UTF-8 --encoding UTF8 "$version" "$cluster" >&2
fi

status="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $4}')"
if [ "$status" != "online" ]; then
    log "starting cluster $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start >&2
fi
port="$(pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1==v && $2==c {print $3}')"
[ -n "$port" ] || die "cannot read the port of cluster $version/$cluster"

for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "$port"; then break; fi
    sleep 0.5
done
pg_isready -q -h 127.0.0.1 -p "$port" || die "server $version/$cluster did not accept connections on 127.0.0.1:$port"

psql_admin() { runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -p "$port" "$@"; }

psql_admin -d postgres >&2 <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hermes_test') THEN
        CREATE ROLE hermes_test LOGIN CREATEDB PASSWORD '${password}';
    ELSE
        ALTER ROLE hermes_test LOGIN CREATEDB PASSWORD '${password}';
    END IF;
END
\$\$;
SQL

if ! psql_admin -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'hermes_test'" | grep -qx 1; then
    log "creating database hermes_test"
    psql_admin -d postgres -c "CREATE DATABASE hermes_test OWNER hermes_test ENCODING 'UTF8' LC_COLLATE 'C.UTF-8' LC_CTYPE 'C.UTF-8' TEMPLATE template0" >&2
fi

if psql_admin -d hermes_test -c "CREATE EXTENSION IF NOT EXISTS pg_trgm" >&2 2>/dev/null; then
    log "pg_trgm enabled in hermes_test"
else
    log "warning: pg_trgm is not available; substring search runs without a trigram index"
fi

printf 'export HERMES_CORE_POSTGRES_DSN=%q\n' "postgresql://hermes_test:${password}@127.0.0.1:${port}/hermes_test"
