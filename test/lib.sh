# Shared by test/replay and test/check: dependencies, build, and a throwaway
# PostgreSQL 15 cluster run by the postgres user on a private socket directory.
# Source it; it sets PGHOST, PGPORT, PGUSER and stops the cluster on exit.

set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '== %s\n' "$*" >&2; }

# Installs what a job needs, only when something is missing, by tiers:
#   ensure_dependencies [TIER ...]       (no TIER: all)
#   build     the compiler, make and PostgreSQL 15's server headers
#   regress   build, and what pg_regress, the isolation tester and the TAP
#             tests need (libipc-run-perl)
#   harness   build, and the worker harness (libpq, hiredis, redis-server):
#             test/replay, the main job, needs these two tiers only
#   all       everything test/check runs (drivers, ORMs, Patroni and etcd,
#             a JDK, npm, SPIN, debootstrap, clang tools, packaging)
#   monitoring  Prometheus (promtool) and postgres_exporter: test/monitoring/run
#   core      regress, and bzip2 for the server's source (test/core/run:
#             PostgreSQL's own suite, test/debian_source fetches it)
#   assert    core, and what test/assert needs to build the server
#             (test/check --assert)
# A contributor needs only build and regress (CONTRIBUTING.md).
dependencies_of() {
	case "$1" in
	build) echo postgresql-server-dev-15 build-essential g++ gcc make ;;
	regress) dependencies_of build; echo postgresql-15 libipc-run-perl ;;
	harness) dependencies_of build; echo postgresql-15 libpq-dev libhiredis-dev redis-server ;;
	client) echo python3-psycopg ;;
	monitoring) echo prometheus prometheus-postgres-exporter curl ;;
	core) dependencies_of regress; echo bzip2 ;;
	assert) dependencies_of core; echo pkg-config libicu-dev ;;
	all)
		dependencies_of core
		dependencies_of harness
		echo python3-psycopg python3-psycopg2 python3-asyncpg pgbouncer python3-django \
			python3-sqlalchemy debootstrap rsync debhelper postgresql-server-dev-all dpkg-dev \
			clang-tidy clang-format libpostgresql-jdbc-java libspring-jdbc-java patroni \
			etcd-server etcd-client python3-etcd nftables iproute2 util-linux patch \
			default-jdk-headless npm spin
		dependencies_of monitoring
		;;
	*) echo "test/lib.sh: unknown dependency tier $1" >&2; return 1 ;;
	esac
}
ensure_dependencies() {
	local tiers=("$@") pkg need=() wanted
	[ ${#tiers[@]} -gt 0 ] || tiers=(all)
	wanted=$(for tier in "${tiers[@]}"; do dependencies_of "$tier" || exit 1; done | tr ' ' '\n' | sort -u) ||
		exit 1
	for pkg in $wanted; do
		case "$pkg" in
		# Commands that other packages may provide: present is enough.
		default-jdk-headless) command -v javac >/dev/null || need+=("$pkg") ;;
		npm | spin | make | gcc | g++) command -v "$pkg" >/dev/null || need+=("$pkg") ;;
		*) dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg") ;;
		esac
	done
	if [ ${#need[@]} -gt 0 ]; then
		say "installing ${need[*]}"
		if [ "$(id -u)" -ne 0 ]; then
			echo "error: missing packages (${need[*]}); run as root or install them" >&2
			exit 1
		fi
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	fi
}

# Builds with warnings as errors and installs into the PostgreSQL 15 tree.
build_and_install() {
	say "building and installing fencing"
	make -C "$ROOT" -s PG_CONFIG=$PG_CONFIG WERROR=1 >/dev/null
	make -C "$ROOT" -s PG_CONFIG=$PG_CONFIG WERROR=1 install >/dev/null
}

# as_postgres COMMAND...: COMMAND as the server user, started in / : a
# PostgreSQL program returns to its working directory after finding its own
# binary (and pg_upgrade needs that directory), which the postgres user
# cannot enter when the checkout is in a private home directory.
as_postgres() { (cd / && runuser -u postgres -- "$@"); }

FENCING_TMP=""
CLUSTERS=()
cleanup() {
	local data
	for data in "${CLUSTERS[@]}"; do
		if [ -f "$data/postmaster.pid" ]; then
			as_postgres $PGBIN/pg_ctl -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
		fi
	done
	[ -n "$FENCING_TMP" ] && rm -rf "$FENCING_TMP"
}

# start_cluster NAME [-c name=value ...]: a throwaway cluster in
# $FENCING_TMP/NAME (its log: server.log there), stopped on exit; exports
# PGHOST, PGPORT, PGUSER and PGDATABASE for it.
start_cluster() {
	local name=$1
	shift
	if [ -z "$FENCING_TMP" ]; then
		FENCING_TMP=$(mktemp -d /tmp/fencing-test.XXXXXX)
		chown postgres: "$FENCING_TMP"
		trap cleanup EXIT
		trap 'exit 130' INT TERM
	fi
	local dir="$FENCING_TMP/$name"
	mkdir -p "$dir/socket"
	chown -R postgres: "$dir"
	as_postgres $PGBIN/initdb -D "$dir/data" -A trust -U postgres \
		--no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	CLUSTERS+=("$dir/data")
	export PGHOST="$dir/socket"
	export PGPORT=${FENCING_PORT:-$((20000 + RANDOM % 20000))}
	export PGUSER=postgres
	export PGDATABASE=postgres
	# Who may restart it (clients/conformance/run restarts the server).
	export PGDATA="$dir/data" FENCING_SERVER_USER=postgres
	as_postgres $PGBIN/pg_ctl -D "$dir/data" -w -l "$dir/server.log" \
		-o "-p $PGPORT -k $PGHOST -c listen_addresses='' -c fsync=off -c max_connections=50 $*" \
		start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
	say "throwaway PostgreSQL 15 cluster '$name' on socket $PGHOST, port $PGPORT"
}

# Builds the worker harness (test/harness/harness.cpp, libpq + hiredis).
build_harness() {
	HARNESS="$FENCING_TMP/fencing-harness"
	g++ -std=c++17 -O2 -Wall -Wextra -Werror -I/usr/include/postgresql -o "$HARNESS" \
		"$ROOT/test/harness/harness.cpp" -lpq -lhiredis -pthread
}
