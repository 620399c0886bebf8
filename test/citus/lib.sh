# A throwaway Citus cluster on loopback, each node a cluster of test/lib.sh
# (stopped on exit, or by stop_citus), all preloading citus and fencing.
# Source test/lib.sh first.
#   start_citus [TOPOLOGY]
#     workers      (the default) a coordinator without shards and two workers
#     coordinator  the same, the coordinator holding shards too
#                  (shouldhaveshards = true): a third of the shards, and every
#                  co-located one of theirs, live beside the metadata
#     single       one node, the coordinator, holding every shard
# It sets COORD_PORT, WORKER1_PORT and WORKER2_PORT (empty for single),
# CITUS_TOPOLOGY, and leaves PG* pointing at the coordinator, where citus
# and fencing are created (Citus creates fencing on the workers).

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

CITUS_DATA=()
start_citus() {
	local topology=${1:-workers} port
	case "$topology" in
	workers | coordinator | single) ;;
	*) echo "start_citus: unknown topology $topology" >&2; return 2 ;;
	esac
	CITUS_DATA=()
	WORKER1_PORT="" WORKER2_PORT=""
	if [ "$topology" != single ]; then
		start_cluster "citus_${topology}_worker1" "${citus_settings[@]}"
		WORKER1_PORT=$PGPORT
		CITUS_DATA+=("$PGDATA")
		start_cluster "citus_${topology}_worker2" "${citus_settings[@]}"
		WORKER2_PORT=$PGPORT
		CITUS_DATA+=("$PGDATA")
	fi
	start_cluster "citus_${topology}_coordinator" "${citus_settings[@]}"
	COORD_PORT=$PGPORT
	CITUS_DATA+=("$PGDATA")
	for port in $WORKER1_PORT $WORKER2_PORT $COORD_PORT; do
		on_node "$port" -c "CREATE EXTENSION citus" >/dev/null
	done
	on_node "$COORD_PORT" -c "SELECT citus_set_coordinator_host('127.0.0.1', $COORD_PORT)" >/dev/null
	if [ "$topology" != workers ]; then
		on_node "$COORD_PORT" >/dev/null \
			-c "SELECT citus_set_node_property('127.0.0.1', $COORD_PORT, 'shouldhaveshards', true)"
	fi
	for port in $WORKER1_PORT $WORKER2_PORT; do
		on_node "$COORD_PORT" -c "SELECT citus_add_node('127.0.0.1', $port)" >/dev/null
	done
	on_node "$COORD_PORT" -c "CREATE EXTENSION fencing" >/dev/null
	export PGHOST=127.0.0.1 PGPORT=$COORD_PORT CITUS_TOPOLOGY=$topology
	export COORD_PORT WORKER1_PORT WORKER2_PORT
	case "$topology" in
	workers) say "Citus: coordinator on port $COORD_PORT, workers on $WORKER1_PORT and $WORKER2_PORT" ;;
	coordinator) say "Citus: coordinator holding shards on port $COORD_PORT, workers on $WORKER1_PORT and $WORKER2_PORT" ;;
	single) say "Citus: a single node on port $COORD_PORT, coordinator holding every shard" ;;
	esac
}

# Stops the nodes start_citus started (test/lib.sh's cleanup stops them on exit anyway).
stop_citus() {
	local data
	for data in "${CITUS_DATA[@]}"; do
		runuser -u postgres -- "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
	done
	CITUS_DATA=()
}
