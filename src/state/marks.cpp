/*
 * fencing.deleted_keys and fencing.floors, read and written with the
 * extension owner's rights through prepared plans.
 */
#include "state/marks.hpp"
#include "legacy/marks_0_1_0.hpp"
#include "catalog/relation.hpp"
#include "base/relid_cache.hpp"
#include "base/spi.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "catalog/pg_inherits.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

SPIPlanPtr high_water_plan = nullptr;
SPIPlanPtr record_plan = nullptr;
SPIPlanPtr floor_plan = nullptr;
SPIPlanPtr scope_floor_plan = nullptr;
SPIPlanPtr compaction_plan = nullptr;

/*
 * The floors this backend read, by relation: the highest floor over the
 * relation's scope.  A floor is raised only by TRUNCATE and compact(), which
 * invalidate the relcache entries of the relations it covers; an entry goes
 * with its relation's invalidation (and all of them with a full one).
 */
struct FloorEntry {
	Oid relid; /* hash key */
	int64 floor;
};
FENCING_PLAIN_DATA(FloorEntry);
HTAB *floor_cache = nullptr;

void forget_floor(Datum, Oid relid)
{
	if (floor_cache == nullptr)
		return;
	if (!OidIsValid(relid)) {
		HASH_SEQ_STATUS scan;
		hash_seq_init(&scan, floor_cache);
		while (auto *entry = static_cast<FloorEntry *>(hash_seq_search(&scan)))
			(void)hash_search(floor_cache, &entry->relid, HASH_REMOVE, nullptr);
		return;
	}
	(void)hash_search(floor_cache, &relid, HASH_REMOVE, nullptr);
}

Datum relid_array(const MarkScope &scope)
{
	Datum *relids = static_cast<Datum *>(palloc(sizeof(Datum) * scope.count));
	for (int i = 0; i < scope.count; i++)
		relids[i] = ObjectIdGetDatum(scope.relids[i]);
	return PointerGetDatum(
	    construct_array(relids, scope.count, REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT));
}

/* With 0.1.0's objects, a key's marks are under the top table of the row's partition tree. */
Oid top_of(const MarkScope &scope)
{
	return scope.relids[scope.count - 1];
}

} // namespace

MarkScope mark_scope(Relation rel)
{
	List *ancestors = partition_ancestors(rel);
	MarkScope scope;
	scope.count = 1 + list_length(ancestors);
	scope.relids = static_cast<Oid *>(palloc(sizeof(Oid) * scope.count));
	scope.relids[0] = RelationGetRelid(rel);
	for (int i = 1; i < scope.count; i++)
		scope.relids[i] = list_nth_oid(ancestors, i - 1);
	return scope;
}

bool find_high_water(const MarkScope &scope, const KeyHash &key, int64 *mark)
{
	bool found;
	if (find_mark_0_1_0(top_of(scope), key, mark, &found))
		return found;
	Oid types[2] = {REGCLASSARRAYOID, BYTEAOID};
	Datum values[2] = {relid_array(scope), key_hash_datum(key)};
	return read_mark_as_owner(&high_water_plan,
	                          "SELECT pg_catalog.max(token) FROM ("
	                          " SELECT token FROM fencing.deleted_keys"
	                          "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1)"
	                          "  AND key OPERATOR(pg_catalog.=) $2"
	                          " UNION ALL"
	                          " SELECT token FROM fencing.floors"
	                          "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1)) marks",
	                          2, types, values, mark);
}

void record_mark(const MarkScope &scope, const KeyHash &key, int64 token)
{
	if (record_mark_0_1_0(top_of(scope), key, token))
		return;
	Oid types[3] = {REGCLASSARRAYOID, BYTEAOID, INT8OID};
	Datum values[3] = {relid_array(scope), key_hash_datum(key), Int64GetDatum(token)};
	raise_mark_as_owner(&record_plan,
	                    "INSERT INTO fencing.deleted_keys (relid, key, token)"
	                    " SELECT r, $2, $3 FROM pg_catalog.unnest($1) r"
	                    " ON CONFLICT (relid, key) DO UPDATE"
	                    " SET token = EXCLUDED.token, deleted_at = pg_catalog.now()"
	                    " WHERE fencing.token_accepts(deleted_keys.token, EXCLUDED.token, false)",
	                    3, types, values);
}

int64 reset_marks(List *relations, const KeyHash &key, int64 token)
{
	Oid types[3] = {REGCLASSARRAYOID, BYTEAOID, INT8OID};
	Datum values[3] = {relid_array(relations), key_hash_datum(key), Int64GetDatum(token)};
	return run_sql(
	    "WITH marks AS ("
	    " SELECT pg_catalog.max(token) AS token FROM fencing.deleted_keys"
	    "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1) AND key OPERATOR(pg_catalog.=) $2),"
	    " reset AS ("
	    " UPDATE fencing.deleted_keys SET token = $3, deleted_at = pg_catalog.now()"
	    "  WHERE relid OPERATOR(pg_catalog.=) ANY ($1) AND key OPERATOR(pg_catalog.=) $2)"
	    " SELECT token FROM marks",
	    3, types, values, InvalidSnapshot, false, true, [&](int rc) {
		    expect_result(rc, SPI_OK_SELECT, "resetting marks");
		    bool isnull = true;
		    Datum previous = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
		    return isnull ? 0 : DatumGetInt64(previous);
	    });
}

namespace
{

/* The cached floor of `relid` (the first relation of its scope); false if none is cached. */
bool cached_floor(Oid relid, int64 *floor)
{
	if (floor_cache == nullptr) {
		HASHCTL control{};
		control.keysize = sizeof(Oid);
		control.entrysize = sizeof(FloorEntry);
		floor_cache = hash_create("fencing floors", 64, &control, HASH_ELEM | HASH_BLOBS);
		on_relcache_invalidation(forget_floor, 0);
	}
	bool found;
	auto *entry = static_cast<FloorEntry *>(hash_search(floor_cache, &relid, HASH_FIND, &found));
	if (found)
		*floor = entry->floor;
	return found;
}

} // namespace

int64 floor_of(Relation rel)
{
	int64 floor;
	if (floor_0_1_0(&floor) || cached_floor(RelationGetRelid(rel), &floor))
		return floor;
	return floor_of(mark_scope(rel));
}

int64 floor_of(const MarkScope &scope)
{
	int64 cached;
	if (floor_0_1_0(&cached))
		return cached;
	if (cached_floor(scope.relids[0], &cached))
		return cached;
	bool found;
	Oid types[1] = {REGCLASSARRAYOID};
	Datum values[1] = {relid_array(scope)};
	int64 floor = run_as_owner(&scope_floor_plan,
	                           "SELECT pg_catalog.max(compacted) FROM fencing.floors"
	                           " WHERE relid OPERATOR(pg_catalog.=) ANY ($1)",
	                           1, types, values, GetLatestSnapshot(), true, [&](int rc) {
		                           expect_result(rc, SPI_OK_SELECT, "reading floors");
		                           bool isnull = true;
		                           int64 found_floor = 0;
		                           if (SPI_processed > 0)
			                           found_floor = DatumGetInt64(result_value(0, 1, &isnull));
		                           return isnull ? 0 : found_floor;
	                           });
	/* The hash table may have been reset meanwhile: look the slot up again. */
	auto *entry =
	    static_cast<FloorEntry *>(hash_search(floor_cache, &scope.relids[0], HASH_ENTER, &found));
	entry->floor = floor;
	return floor;
}

void raise_floor(Oid relid, int64 token, bool every_write)
{
	refuse_floor_0_1_0();
	Oid types[2] = {REGCLASSOID, INT8OID};
	Datum values[2] = {ObjectIdGetDatum(relid), Int64GetDatum(token)};
	if (!every_write) {
		raise_mark_as_owner(&floor_plan,
		                    "INSERT INTO fencing.floors (relid, token) VALUES ($1, $2)"
		                    " ON CONFLICT (relid) DO UPDATE"
		                    " SET token = EXCLUDED.token, raised_at = pg_catalog.now()"
		                    " WHERE fencing.token_accepts(floors.token, EXCLUDED.token, false)",
		                    2, types, values);
		return;
	}
	raise_mark_as_owner(
	    &compaction_plan,
	    "INSERT INTO fencing.floors AS f (relid, token, compacted) VALUES ($1, $2, $2)"
	    " ON CONFLICT (relid) DO UPDATE"
	    " SET token = GREATEST(f.token, EXCLUDED.token),"
	    "     compacted = EXCLUDED.compacted, raised_at = pg_catalog.now()"
	    " WHERE f.compacted OPERATOR(pg_catalog.<) EXCLUDED.compacted",
	    2, types, values);
	/* Every backend's cached floor of the relation. */
	CacheInvalidateRelcacheByRelid(relid);
}

} // namespace fencing
