/*
 * renew_in_memory() (renew_memory.hpp): the lease row read with a plain
 * index scan under the lease memory's partition lock, the new expiry kept in
 * shared memory.
 *
 * Why it needs no row lock (a row lock would assign a transaction id and
 * write the tuple, the cost this path avoids) and still serializes with a
 * concurrent grant, release or row-writing renewal:
 *
 *  - Everything that judges the lease free before acting on it (acquire()'s
 *    grant, lock_lease(), compact_resources()) reads the clock first and the
 *    memory after (clock_timestamp() on the left of the comparison, see
 *    state/lease_grace.hpp), and acts only if the later of the row's expiry
 *    and the memory's has passed at that clock reading.
 *  - This renewal reads the clock, the row (with a snapshot taken after the
 *    lock, so it sees every change committed before) and the memory, and
 *    stores, all under the partition's exclusive lock, and renews only if the
 *    lease is live at that clock reading.
 *  - So if a grant to another holder read the memory before this renewal
 *    took the lock, its clock reading came before ours, and it found the
 *    lease expired at an instant no later than ours, with the same or a
 *    later row (a row-writing change it saw committed before our snapshot):
 *    we find it expired too and renew nothing.  If it read the memory after
 *    we stored, it sees the new expiry, which lies beyond our clock reading
 *    and so beyond its own unless the new expiry itself passed: then the
 *    holder's lease ended before the grant.  A grant we see committed in the
 *    row has another token, and one not yet committed has a token the memory
 *    may hold: a higher token in memory sends us to the row write, whose row
 *    lock waits for that grant.
 *  - A release committed before our snapshot shows as released: we renew
 *    nothing.  One still running ends the lease after this renewal, and a
 *    released row is never live whatever the memory says.
 *  - A row-writing renewal never removes the entry: rolled back, it would
 *    take back an expiry this renewal already promised.  It sets the row's
 *    expiry anew, and the later of the two counts.
 *
 * After a restart, a crash or a promotion the memory is empty and the row,
 * written in another epoch, is held until its grace_until, which bounds
 * every expiry kept here (the new expiry must stay within it, and the
 * grace_until read is one a flushed, confirmed commit wrote: the caller
 * checks lease_horizons_confirmed(), and a transaction that has written,
 * whose own uncommitted row the snapshot would show, never renews here).
 */
#include "leases/renew_memory.hpp"
#include "state/lease_grace.hpp"
#include "state/lease_memory.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace fencing
{

namespace
{

/* The lease row's columns renew_in_memory() reads, by position (attnums). */
enum Column { c_holder, c_token, c_expires_at, c_released, c_grace_until, c_epoch, c_count };
constexpr const char *column_names[c_count] = {"holder",   "token",       "expires_at",
                                               "released", "grace_until", "epoch"};

/* The row as read: valid only when found and nothing was NULL. */
struct Row {
	bool found;
	bool complete;
	int64 token;
	TimestampTz expires_at;
	bool released;
	TimestampTz grace_until;
	int64 epoch;
	bool holder_matches;
};
FENCING_PLAIN_DATA(Row);

/* Reads the resource's row with a snapshot taken now (the caller holds the partition lock). */
Row read_row(Relation resources, Oid index, const AttrNumber *columns, Datum name,
             const char *holder)
{
	Row row = {false, false, 0, 0, false, 0, 0, false};
	ScanKeyData key;
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ, name);
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	SysScanDesc scan = systable_beginscan(resources, index, true, snapshot, 1, &key);
	HeapTuple tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple)) {
		TupleDesc descriptor = RelationGetDescr(resources);
		Datum values[c_count];
		bool nulls[c_count];
		bool any_null = false;
		for (int c = 0; c < c_count; c++) {
			values[c] = heap_getattr(tuple, columns[c], descriptor, &nulls[c]);
			any_null = any_null || nulls[c];
		}
		row.found = true;
		if (!any_null) {
			row.complete = true;
			text *stored_holder = DatumGetTextPP(values[c_holder]);
			size_t length = strlen(holder);
			row.holder_matches = VARSIZE_ANY_EXHDR(stored_holder) == length &&
			                     memcmp(VARDATA_ANY(stored_holder), holder, length) == 0;
			row.token = DatumGetInt64(values[c_token]);
			row.expires_at = DatumGetTimestampTz(values[c_expires_at]);
			row.released = DatumGetBool(values[c_released]);
			row.grace_until = DatumGetTimestampTz(values[c_grace_until]);
			row.epoch = DatumGetInt64(values[c_epoch]);
		}
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	return row;
}

} // namespace

bool renew_in_memory(const char *resource, const char *holder, int64 token, Datum ttl,
                     TimestampTz *expires)
{
	/* A read-only transaction or a standby: the row write refuses as before. */
	if (!lease_memory_enabled() || XactReadOnly || RecoveryInProgress())
		return false;
	/*
	 * A transaction that has written may have written this row (a grant, or a
	 * renewal past the horizon): its grace_until, read below, is neither
	 * committed nor flushed, and a rollback and a crash would leave an expiry
	 * kept here beyond the durable one.  Its renewals write their row.
	 */
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return false;
	int64 epoch = lease_epoch();
	LeaseKey key = {resource, static_cast<int>(strlen(resource)),
	                holder,   static_cast<int>(strlen(holder)),
	                token,    epoch};
	if (epoch == 0 || key.resource_len + key.holder_len > lease_memory_key_max)
		return false;
	/* The extension's own table, by its qualified name: nothing of the caller's is looked up. */
	Oid schema = get_namespace_oid("fencing", true);
	Oid relid = OidIsValid(schema) ? get_relname_relid("resources", schema) : InvalidOid;
	if (!OidIsValid(relid))
		return false;
	/* Every heavyweight lock taken before the LWLock, which must never wait for one. */
	Relation resources = table_open(relid, AccessShareLock);
	AttrNumber columns[c_count];
	for (int c = 0; c < c_count; c++) {
		columns[c] = InvalidAttrNumber;
		TupleDesc descriptor = RelationGetDescr(resources);
		for (int a = 0; a < descriptor->natts; a++) {
			Form_pg_attribute attribute = TupleDescAttr(descriptor, a);
			if (!attribute->attisdropped &&
			    strcmp(NameStr(attribute->attname), column_names[c]) == 0)
				columns[c] = attribute->attnum;
		}
	}
	list_free(RelationGetIndexList(resources));
	Oid index = resources->rd_pkindex;
	bool usable = OidIsValid(index);
	for (int c = 0; c < c_count; c++)
		usable = usable && columns[c] != InvalidAttrNumber;
	if (!usable) {
		table_close(resources, AccessShareLock);
		return false;
	}
	Relation index_relation = index_open(index, AccessShareLock);
	index_close(index_relation, NoLock);
	Datum name = CStringGetTextDatum(resource);

	int partition = lease_memory_lock(key);
	TimestampTz now = GetCurrentTimestamp();
	Row row = read_row(resources, index, columns, name, holder);
	bool later_grant = false;
	TimestampTz kept = lease_memory_find(partition, key, &later_grant);
	TimestampTz renewed = 0;
	bool done = false;
	if (row.found && row.complete && row.holder_matches && row.token == token && !row.released &&
	    row.epoch == epoch && !later_grant && now < Max(row.expires_at, kept)) {
		renewed = DatumGetTimestampTz(
		    DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now), ttl));
		/*
		 * A shorter expiry than the row's, or one beyond the horizon, is the
		 * row's to write.  One shorter than the memory's keeps the memory's, as
		 * the row write does (docs/leases.md): a renewal never shortens a lease.
		 */
		if (renewed >= row.expires_at && renewed <= row.grace_until) {
			renewed = Max(renewed, kept);
			done = lease_memory_store(partition, key, renewed, now);
		}
	}
	lease_memory_unlock(partition);
	table_close(resources, NoLock);
	if (done)
		*expires = renewed;
	return done;
}

} // namespace fencing
