# A throwaway Citus cluster: a coordinator and two workers on loopback, each a
# cluster of test/lib.sh (stopped on exit), all preloading citus and fencing.
# Source test/lib.sh first.  start_citus sets COORD_PORT, WORKER1_PORT,
# WORKER2_PORT and leaves PG* pointing at the coordinator, where citus and
# fencing are created (Citus creates fencing on the workers).

citus_settings=(-c listen_addresses=127.0.0.1 -c "shared_preload_libraries=citus,fencing"
	-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20
	-c max_worker_processes=32 -c max_connections=100 -c citus.shard_count=4
	-c citus.log_remote_commands=off)

# Runs SQL on the node listening on port $1 (database postgres).
on_node() {
	local port=$1
	shift
	psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -d postgres "$@"
}

start_citus() {
	start_cluster citus_worker1 "${citus_settings[@]}"
	WORKER1_PORT=$PGPORT
	start_cluster citus_worker2 "${citus_settings[@]}"
	WORKER2_PORT=$PGPORT
	start_cluster citus_coordinator "${citus_settings[@]}"
	COORD_PORT=$PGPORT
	local port
	for port in "$WORKER1_PORT" "$WORKER2_PORT" "$COORD_PORT"; do
		on_node "$port" -c "CREATE EXTENSION citus" >/dev/null
	done
	on_node "$COORD_PORT" >/dev/null <<-SQL
		SELECT citus_set_coordinator_host('127.0.0.1', $COORD_PORT);
		SELECT citus_add_node('127.0.0.1', $WORKER1_PORT);
		SELECT citus_add_node('127.0.0.1', $WORKER2_PORT);
		CREATE EXTENSION fencing;
	SQL
	export PGHOST=127.0.0.1 PGPORT=$COORD_PORT
	export COORD_PORT WORKER1_PORT WORKER2_PORT
	say "Citus: coordinator on port $COORD_PORT, workers on $WORKER1_PORT and $WORKER2_PORT"
}
