# Shared by test/replay and test/check: dependencies, build, and a throwaway
# PostgreSQL 15 cluster run by the postgres user on a private socket directory.
# Source it; it sets PGHOST, PGPORT, PGUSER and stops the cluster on exit.

set -euo pipefail

PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '== %s\n' "$*" >&2; }

# Installs what the build and the tests need, only when something is missing.
ensure_dependencies() {
	local need=()
	[ -f /usr/include/postgresql/15/server/postgres.h ] || need+=(postgresql-server-dev-15)
	for pkg in libipc-run-perl libpq-dev libhiredis-dev redis-server; do
		dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
	done
	command -v g++ >/dev/null || need+=(g++)
	command -v make >/dev/null || need+=(make)
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

FENCING_TMP=""
stop_cluster() {
	if [ -n "$FENCING_TMP" ] && [ -d "$FENCING_TMP" ]; then
		if [ -f "$FENCING_TMP/data/postmaster.pid" ]; then
			runuser -u postgres -- $PGBIN/pg_ctl -D "$FENCING_TMP/data" -m immediate -w stop >/dev/null 2>&1 || true
		fi
		rm -rf "$FENCING_TMP"
	fi
}

# Starts a throwaway cluster; extra "-c name=value" settings may be passed.
start_cluster() {
	FENCING_TMP=$(mktemp -d /tmp/fencing-test.XXXXXX)
	trap stop_cluster EXIT
	trap 'exit 130' INT TERM
	chown postgres: "$FENCING_TMP"
	mkdir -p "$FENCING_TMP/socket"
	chown postgres: "$FENCING_TMP/socket"
	runuser -u postgres -- $PGBIN/initdb -D "$FENCING_TMP/data" -A trust -U postgres \
		--no-sync -E UTF8 --locale=C >"$FENCING_TMP/initdb.log" 2>&1 ||
		{ cat "$FENCING_TMP/initdb.log" >&2; exit 1; }
	export PGHOST="$FENCING_TMP/socket"
	export PGPORT=${FENCING_PORT:-$((20000 + RANDOM % 20000))}
	export PGUSER=postgres
	export PGDATABASE=postgres
	runuser -u postgres -- $PGBIN/pg_ctl -D "$FENCING_TMP/data" -w -l "$FENCING_TMP/server.log" \
		-o "-p $PGPORT -k $PGHOST -c listen_addresses='' -c fsync=off -c max_connections=50 $*" \
		start >/dev/null || { cat "$FENCING_TMP/server.log" >&2; exit 1; }
	say "throwaway PostgreSQL 15 cluster on socket $PGHOST, port $PGPORT"
}

# Runs the TAP tests (test/t/*.pl) as the postgres user, in a copy under the
# throwaway directory; each test starts its own clusters.
run_tap() {
	local dir="$FENCING_TMP/tap"
	mkdir -p "$dir"
	cp -r "$ROOT/test/t" "$dir/"
	chown -R postgres: "$dir"
	(
		cd "$dir"
		[ $# -gt 0 ] || set -- t/*.pl
		runuser -u postgres -- env PATH="$PGBIN:$PATH" \
			PG_REGRESS=/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress \
			prove -I /usr/lib/postgresql/15/lib/pgxs/src/test/perl -I t "$@"
	)
}

# Builds the worker harness (test/harness/harness.cpp, libpq + hiredis).
build_harness() {
	HARNESS="$FENCING_TMP/fencing-harness"
	g++ -std=c++17 -O2 -Wall -Wextra -Werror -I/usr/include/postgresql -o "$HARNESS" \
		"$ROOT/test/harness/harness.cpp" -lpq -lhiredis -pthread
}
