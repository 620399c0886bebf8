/*
 * Citus: marks co-located with shards, floors on every node, the
 * coordinator's TRUNCATE check.  See citus.hpp.  Nothing here runs unless
 * Citus is loaded and a table was protected as a distributed table.  The
 * names of shards' tables: catalog/citus_names.cpp; fencing.token handed to
 * the workers: token_relay.cpp.
 */
#include "citus/citus.hpp"
#include "catalog/citus_names.hpp"
#include "base/compat.hpp"
#include "base/spi.hpp"
#include "base/rights.hpp"

extern "C" {
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "tcop/dest.h"
#include "tcop/pquery.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace fencing
{

/*
 * Any role with CREATE on the database can make a schema fencing_citus
 * first: the extension then never reads or writes it with rights other than
 * the caller's.
 */
bool citus_own_schema()
{
	Oid schema = get_namespace_oid("fencing_citus", true);
	if (!OidIsValid(schema))
		return false;
	Oid floors = get_relname_relid("floors", schema);
	Oid owner = extension_owner();
	HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(schema));
	bool ours = HeapTupleIsValid(tuple) &&
	            reinterpret_cast<Form_pg_namespace>(GETSTRUCT(tuple))->nspowner == owner;
	if (HeapTupleIsValid(tuple))
		ReleaseSysCache(tuple);
	return ours && OidIsValid(floors) && relation_owner(floors) == owner;
}

namespace
{

/* Errors unless citus_own_schema(). */
void require_own_schema()
{
	if (!citus_own_schema())
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("schema \"fencing_citus\" was not made by the fencing extension"),
		         errdetail("The marks of distributed tables live there; another role owns it, or "
		                   "its table floors."),
		         errhint("Drop or rename that schema, then protect the table again.")));
}

/*
 * Runs `sql` on a Citus marks table as its owner (the protected table's
 * owner, who made it), with SECURITY_RESTRICTED_OPERATION: nothing that
 * owner defined on it runs with other rights.  read(rc) reads the result
 * before SPI_finish(), as the caller, and returns what run_on_marks() returns.
 */
template <typename Read>
auto run_on_marks(Oid marks, const char *sql, int nargs, Oid *types, Datum *values,
                  Snapshot snapshot, bool read_only, Read read) -> decltype(read(0))
{
	return with_spi([&] {
		Rights saved = become(relation_owner(marks), SECURITY_NOFORCE_RLS, true);
		int rc = execute_sql(sql, nargs, types, values, snapshot, read_only, false);
		restore(saved);
		return read(rc);
	});
}

} // namespace

CitusShard citus_shard(Relation shard, int64 id)
{
	require_own_schema();
	int64 shard_id = citus_shard_id(shard);
	Oid types[4] = {INT8OID, TEXTOID, OIDOID, TEXTOID};
	Datum values[4] = {Int64GetDatum(shard_id),
	                   CStringGetTextDatum(psprintf("fencing_citus.marks_" INT64_FORMAT, id)),
	                   ObjectIdGetDatum(RelationGetNamespace(shard)),
	                   CStringGetTextDatum(RelationGetRelationName(shard))};
	CitusShard placement{};
	placement.id = id;
	bool found = false;
	char *column = nullptr;
	citus_metadata_query(
	    "SELECT pg_catalog.to_regclass(pg_catalog.shard_name(m.logicalrelid, "
	    "m.shardid))::pg_catalog.oid,"
	    "       pg_catalog.to_regclass(pg_catalog.shard_name(f.logicalrelid, "
	    "f.shardid))::pg_catalog.oid,"
	    "       pg_catalog.column_to_column_name(p.logicalrelid, p.partkey)"
	    " FROM pg_catalog.pg_dist_shard s"
	    " JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
	    " JOIN pg_catalog.pg_dist_shard m ON m.logicalrelid = pg_catalog.to_regclass($2)"
	    "  AND m.shardminvalue IS NOT DISTINCT FROM s.shardminvalue"
	    " JOIN pg_catalog.pg_dist_shard f"
	    "  ON f.logicalrelid = pg_catalog.to_regclass('fencing_citus.floors')"
	    " JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
	    " WHERE s.shardid = $1 AND c.relnamespace = $3"
	    "  AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $1 = $4",
	    4, types, values, [&]() {
		    found = SPI_processed > 0;
		    column = found ? citus_result_text(3) : nullptr;
		    if (found) {
			    bool isnull;
			    Datum marks = result_value(0, 1, &isnull);
			    placement.marks = isnull ? InvalidOid : DatumGetObjectId(marks);
			    Datum floors = result_value(0, 2, &isnull);
			    placement.floors = isnull ? InvalidOid : DatumGetObjectId(floors);
		    }
	    });
	if (!found || !OidIsValid(placement.marks) || !OidIsValid(placement.floors) ||
	    column == nullptr) {
		const char *qualified = nullptr, *name = RelationGetRelationName(shard);
		(void)citus_logical_name(shard, &qualified, &name, nullptr);
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("the deleted-key marks of relation \"%s\" are not on this node", name),
		         errdetail("fencing_citus.marks_" INT64_FORMAT " must stay co-located with the "
		                   "table, and fencing_citus.floors must be a reference table.",
		                   id),
		         errhint("Move the marks table's shards to the table's shards' nodes and run "
		                 "update_distributed_table_colocation('fencing_citus.marks_" INT64_FORMAT
		                 "', colocate_with => %s).",
		                 id, quote_literal_cstr(qualified ? qualified : quote_identifier(name)))));
	}
	/* A forged marks id on a shard's guard cannot reach another owner's marks. */
	if (relation_owner(placement.marks) != shard->rd_rel->relowner)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("the deleted-key marks of relation \"%s\" belong to another role",
		                       RelationGetRelationName(shard)),
		                errhint("Run fencing.protect() on the distributed table again.")));
	placement.dist_attnum = get_attnum(RelationGetRelid(shard), column);
	if (placement.dist_attnum == InvalidAttrNumber)
		elog(ERROR, "fencing: distribution column \"%s\" not found in shard \"%s\"", column,
		     RelationGetRelationName(shard));
	placement.dist_type = get_atttype(RelationGetRelid(shard), placement.dist_attnum);
	return placement;
}

void citus_record_mark(const CitusShard &shard, Datum dist_value, const KeyHash &key, int64 token)
{
	const char *marks = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.marks)), get_rel_name(shard.marks));
	Oid types[3] = {shard.dist_type, BYTEAOID, INT8OID};
	Datum values[3] = {dist_value, key_hash_datum(key), Int64GetDatum(token)};
	run_on_marks(shard.marks,
	             psprintf("INSERT INTO %s AS m (dist, key, token, deleted_at)"
	                      " VALUES ($1, $2, $3, pg_catalog.now())"
	                      " ON CONFLICT (key, dist) DO UPDATE"
	                      " SET token = EXCLUDED.token, deleted_at = pg_catalog.now()"
	                      " WHERE fencing.token_accepts(m.token, EXCLUDED.token, false)",
	                      marks),
	             3, types, values, InvalidSnapshot, false,
	             [&](int rc) { expect_result(rc, SPI_OK_INSERT, "raising a mark"); });
}

namespace
{

/* Runs a query for one bigint (a max); false if it is NULL. */
bool max_token(const char *sql, int nargs, Oid *types, Datum *values, Snapshot snapshot,
               bool as_owner, int64 *result)
{
	return run_sql(sql, nargs, types, values, snapshot, true, as_owner, [&](int rc) {
		expect_result(rc, SPI_OK_SELECT, "reading tokens");
		bool isnull = true;
		if (SPI_processed > 0)
			*result = DatumGetInt64(result_value(0, 1, &isnull));
		return !isnull;
	});
}

} // namespace

bool citus_find_high_water(const CitusShard &shard, const KeyHash &key, int64 *mark)
{
	const char *marks = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.marks)), get_rel_name(shard.marks));
	const char *floors = quote_qualified_identifier(
	    get_namespace_name(get_rel_namespace(shard.floors)), get_rel_name(shard.floors));
	Oid types[1] = {BYTEAOID};
	Datum values[1] = {key_hash_datum(key)};
	/* The marks as their owner, the floor (the extension's) as the extension owner. */
	bool found = run_on_marks(shard.marks,
	                          psprintf("SELECT pg_catalog.max(token) FROM %s"
	                                   " WHERE key OPERATOR(pg_catalog.=) $1",
	                                   marks),
	                          1, types, values, GetLatestSnapshot(), true, [&](int rc) {
		                          expect_result(rc, SPI_OK_SELECT, "reading tokens");
		                          bool isnull = true;
		                          if (SPI_processed > 0)
			                          *mark = DatumGetInt64(result_value(0, 1, &isnull));
		                          return !isnull;
	                          });
	int64 floor = 0;
	Oid floor_types[1] = {INT8OID};
	Datum floor_values[1] = {Int64GetDatum(shard.id)};
	if (max_token(psprintf("SELECT token FROM %s WHERE id OPERATOR(pg_catalog.=) $1", floors), 1,
	              floor_types, floor_values, GetLatestSnapshot(), true, &floor) &&
	    (!found || floor > *mark)) {
		*mark = floor;
		found = true;
	}
	return found;
}

bool citus_find_high_water_anywhere(int64 id, const KeyHash &key, int64 *mark)
{
	/*
	 * Through Citus, so as the current user: Citus wants the table's shards
	 * and the co-located marks read with the connections that wrote them.
	 * A caller who may not read the marks table is told nothing of them.
	 */
	require_own_schema();
	Oid marks = get_relname_relid(psprintf("marks_" INT64_FORMAT, id),
	                              get_namespace_oid("fencing_citus", false));
	if (!OidIsValid(marks) || pg_class_aclcheck(marks, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return false;
	Oid types[1] = {BYTEAOID};
	Datum values[1] = {key_hash_datum(key)};
	bool found =
	    max_token(psprintf("SELECT pg_catalog.max(token) FROM fencing_citus.marks_" INT64_FORMAT
	                       " WHERE key OPERATOR(pg_catalog.=) $1",
	                       id),
	              1, types, values, InvalidSnapshot, false, mark);
	/* The floor, read as the extension owner: nothing of this transaction's touches it. */
	int64 floor = 0;
	Oid floor_types[1] = {INT8OID};
	Datum floor_values[1] = {Int64GetDatum(id)};
	if (max_token("SELECT token FROM fencing_citus.floors WHERE id OPERATOR(pg_catalog.=) $1", 1,
	              floor_types, floor_values, InvalidSnapshot, true, &floor) &&
	    (!found || floor > *mark)) {
		*mark = floor;
		found = true;
	}
	return found;
}

int64 citus_highest_stored(Relation rel, AttrNumber token_attnum)
{
	const char *table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
	                                               RelationGetRelationName(rel));
	const char *column = quote_identifier(get_attname(RelationGetRelid(rel), token_attnum, false));
	int64 highest = 0;
	/* As the current user, with the connections that hold the table's lock. */
	if (!max_token(psprintf("SELECT pg_catalog.max(%s) FROM %s", column, table), 0, nullptr,
	               nullptr, InvalidSnapshot, false, &highest))
		highest = 0;
	return highest;
}

void citus_raise_floor(int64 id, int64 token)
{
	require_own_schema();
	Oid types[2] = {INT8OID, INT8OID};
	Datum values[2] = {Int64GetDatum(id), Int64GetDatum(token)};
	run_sql("INSERT INTO fencing_citus.floors AS f (id, token) VALUES ($1, $2)"
	        " ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token"
	        " WHERE fencing.token_accepts(f.token, EXCLUDED.token, false)",
	        2, types, values, InvalidSnapshot, false, true,
	        [&](int rc) { expect_result(rc, SPI_OK_INSERT, "raising a floor"); });
}

int64 citus_remove_marks(int64 id, int64 below)
{
	/* As the marks table's owner (the table's), even when a superuser compacts. */
	require_own_schema();
	Oid marks = get_relname_relid(psprintf("marks_" INT64_FORMAT, id),
	                              get_namespace_oid("fencing_citus", false));
	if (!OidIsValid(marks))
		return 0;
	Oid types[1] = {INT8OID};
	Datum values[1] = {Int64GetDatum(below)};
	return run_on_marks(marks,
	                    psprintf("DELETE FROM fencing_citus.marks_" INT64_FORMAT
	                             " WHERE token OPERATOR(pg_catalog.<=) $1",
	                             id),
	                    1, types, values, InvalidSnapshot, false, [&](int rc) {
		                    expect_result(rc, SPI_OK_DELETE, "removing marks");
		                    return static_cast<int64>(SPI_processed);
	                    });
}

bool citus_node_is_coordinator()
{
	return citus_metadata_query(
	    "SELECT pg_catalog.citus_is_coordinator()", 0, nullptr, nullptr, [] {
		    bool isnull = true;
		    return SPI_processed > 0 && DatumGetBool(result_value(0, 1, &isnull)) && !isnull;
	    });
}

bool on_coordinator()
{
	const char *application = GetConfigOption("application_name", false, false);
	if (application != nullptr && strncmp(application, "citus_internal", 14) == 0)
		return false;
	return citus_node_is_coordinator();
}

} // namespace fencing

/*
 * fencing_internal._citus_record_shards(target): records the shards of the
 * distributed table `target` under its marks id (its OID) in
 * fencing_citus.shards, as the extension owner, for its owner only (protect()
 * calls it), on the coordinator only (a worker's OIDs name other tables
 * there): the record is what the guards of its shards are checked against,
 * and only the table's own shards are recorded, never an id given.
 */
FENCING_FUNCTION(citus_record_shards)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	/* As protect() requires (schema fencing_internal grants USAGE to PUBLIC). */
	if (!fencing::has_fencing_usage())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("permission denied for schema fencing")));
	Oid target = PG_GETARG_OID(0);
	if (!fencing::owns_relation(target, GetUserId()))
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("must be owner of table %s", get_rel_name(target))));
	fencing::require_own_schema();
	/* Marks ids are the coordinator's OIDs: a worker's would name another table. */
	if (!fencing::on_coordinator())
		ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		                errmsg("shards are recorded on the Citus coordinator only"),
		                errhint("Run fencing.protect() on the coordinator.")));
	Oid types[1] = {OIDOID};
	Datum values[1] = {ObjectIdGetDatum(target)};
	fencing::run_sql("DELETE FROM fencing_citus.shards WHERE id = $1::pg_catalog.int8", 1, types,
	                 values, InvalidSnapshot, false, true, [&](int rc) {
		                 fencing::expect_result(rc, SPI_OK_DELETE, "recording shards");
	                 });
	fencing::run_sql("INSERT INTO fencing_citus.shards (shardid, id)"
	                 " SELECT s.shardid, $1::pg_catalog.int8 FROM pg_catalog.pg_dist_shard s"
	                 " WHERE s.logicalrelid = $1",
	                 1, types, values, InvalidSnapshot, false, true, [&](int rc) {
		                 fencing::expect_result(rc, SPI_OK_INSERT, "recording shards");
	                 });
	PG_RETURN_VOID();
}
