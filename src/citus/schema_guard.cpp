/*
 * fencing_internal._guard_citus_schema(): the ddl_command_end event trigger
 * that keeps schema fencing_citus to what the extension puts there.
 *
 * The schema grants CREATE to PUBLIC, because Citus creates a marks table's
 * shards, on every node that holds a shard of the protected table, as that
 * table's owner.  A role other than the superuser and the extension owner
 * may leave there only the marks table of a table it owns
 * (fencing_citus.marks_<id>, <id> the table's OID on the coordinator), the
 * shards Citus makes of it (marks_<id>_<shard id>) and their primary keys
 * named for them.  One rule on every node, judged from what this node knows
 * of <id>:
 *
 *  - the relation is a table (or its primary key) owned by the role that
 *    owns <id>'s table, whatever the creator's connection and its
 *    application_name;
 *  - the marks table marks_<id> that this node holds, if any, has that owner;
 *  - a shard id this node's Citus metadata knows belongs to marks_<id>;
 *  - on the coordinator (where <id> is an OID) <id> is a table outside
 *    fencing_citus owned by that role; on any other node (where <id> names
 *    nothing, or another node's relation) every table whose shards
 *    protect() recorded under <id> in fencing_citus.shards (a reference
 *    table the extension owner alone writes) has that owner.
 *
 * Everything is read through the system caches or as committed metadata:
 * a shard Citus creates in this backend (local execution on a coordinator
 * that holds shards, single-node Citus) is not yet visible to SQL on
 * pg_class when ddl_command_end fires, and the marks table it belongs to may
 * be in another backend's uncommitted transaction.
 */
#include "base/boundary.hpp"
#include "base/rights.hpp"
#include "base/spi.hpp"
#include "catalog/citus_names.hpp"
#include "citus/citus.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

namespace
{

using namespace fencing;

/* A name the extension gives in fencing_citus: marks_<id>, marks_<id>_<shard id>. */
struct MarksName {
	int64 id;    /* the protected table's OID on the coordinator */
	int64 shard; /* 0: the marks table itself */
};
FENCING_PLAIN_DATA(MarksName);

/* Reads decimal digits (no sign, no leading zero) up to `end`; 0 if none or too long. */
int64 number(const char *start, const char *end)
{
	if (start >= end || end - start > 18 || *start == '0')
		return 0;
	int64 value = 0;
	for (const char *c = start; c < end; c++) {
		if (*c < '0' || *c > '9')
			return 0;
		value = value * 10 + (*c - '0');
	}
	return value;
}

/*
 * Parses the name of a marks table or shard ("marks_<id>", "marks_<id>_<shard>")
 * or of its primary key ("marks_<id>_pkey", "marks_<id>_pkey_<shard>"): false
 * for any other name.  <id> is an OID (at most 4294967295).
 */
bool parse_marks_name(const char *name, bool primary_key, MarksName *parsed)
{
	if (strncmp(name, "marks_", 6) != 0)
		return false;
	const char *id_start = name + 6;
	const char *id_end = id_start + strspn(id_start, "0123456789");
	parsed->id = number(id_start, id_end);
	if (parsed->id == 0 || parsed->id > static_cast<int64>(PG_UINT32_MAX))
		return false;
	const char *rest = id_end;
	if (primary_key) {
		if (strncmp(rest, "_pkey", 5) != 0)
			return false;
		rest += 5;
	}
	if (*rest == '\0') {
		parsed->shard = 0;
		return true;
	}
	if (*rest != '_')
		return false;
	parsed->shard = number(rest + 1, rest + strlen(rest));
	return parsed->shard != 0;
}

/*
 * The marks table or shard a relation of fencing_citus is, or stands for
 * (an index: the primary key of one, named for it); false for anything else.
 * `table` is the table's OID.
 */
bool marks_relation(Oid relid, Oid schema, MarksName *parsed, Oid *table)
{
	char kind = get_rel_relkind(relid);
	const char *name = get_rel_name(relid);
	if (name == nullptr)
		return false;
	if (kind == RELKIND_RELATION) {
		*table = relid;
		return parse_marks_name(name, false, parsed);
	}
	if (kind != RELKIND_INDEX)
		return false;
	HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		return false;
	auto *index = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
	bool primary = index->indisprimary;
	*table = index->indrelid;
	ReleaseSysCache(tuple);
	MarksName of_table;
	const char *table_name = get_rel_name(*table);
	return primary && get_rel_namespace(*table) == schema && table_name != nullptr &&
	       get_rel_relkind(*table) == RELKIND_RELATION &&
	       parse_marks_name(table_name, false, &of_table) && parse_marks_name(name, true, parsed) &&
	       parsed->id == of_table.id && parsed->shard == of_table.shard;
}

/* The OID a query of Citus' metadata returns (as the extension owner); InvalidOid if none. */
Oid metadata_oid(const char *sql, int nargs, Oid *types, Datum *values)
{
	return citus_metadata_query(sql, nargs, types, values, [] {
		bool isnull = true;
		Datum value = SPI_processed > 0 ? result_value(0, 1, &isnull) : 0;
		return isnull ? InvalidOid : DatumGetObjectId(value);
	});
}

/*
 * On a node that is not the coordinator: does every table whose shards
 * protect() recorded under `id` (fencing_citus.shards, read in its local
 * placement as the extension owner) belong to `owner`?  True when none is
 * recorded: the table was never protected (its first protect() makes the
 * marks shards here before anything is recorded).
 */
bool recorded_tables_owned_by(Oid schema, int64 id, Oid owner)
{
	Oid shards = metadata_oid("SELECT pg_catalog.to_regclass(pg_catalog.shard_name("
	                          "s.logicalrelid, s.shardid))::pg_catalog.oid"
	                          " FROM pg_catalog.pg_dist_shard s"
	                          " WHERE s.logicalrelid OPERATOR(pg_catalog.=)"
	                          "  pg_catalog.to_regclass('fencing_citus.shards')",
	                          0, nullptr, nullptr);
	/* Only the extension's own record counts; none at all: nothing protected yet. */
	if (!OidIsValid(shards) || get_rel_namespace(shards) != schema ||
	    relation_owner(shards) != extension_owner())
		return true;
	Oid types[2] = {INT8OID, OIDOID};
	Datum values[2] = {Int64GetDatum(id), ObjectIdGetDatum(owner)};
	return citus_metadata_query(
	    psprintf("SELECT FROM %s r"
	             " JOIN pg_catalog.pg_dist_shard s ON s.shardid OPERATOR(pg_catalog.=) r.shardid"
	             " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.logicalrelid"
	             " WHERE r.id OPERATOR(pg_catalog.=) $1"
	             "  AND c.relowner OPERATOR(pg_catalog.<>) $2 LIMIT 1",
	             quote_qualified_identifier("fencing_citus", get_rel_name(shards))),
	    2, types, values, [] { return SPI_processed == 0; });
}

/* May the relation `relid` (a table or index the command left in fencing_citus) stay? */
bool may_stay(Oid relid, Oid schema, bool coordinator)
{
	MarksName name;
	Oid table;
	if (!marks_relation(relid, schema, &name, &table))
		return false;
	Oid owner = relation_owner(table);
	/* The marks table this node holds, if this is one of its shards. */
	Oid marks = get_relname_relid(psprintf("marks_" INT64_FORMAT, name.id), schema);
	if (OidIsValid(marks) && marks != table && relation_owner(marks) != owner)
		return false;
	if (name.shard != 0) {
		Oid types[1] = {INT8OID};
		Datum values[1] = {Int64GetDatum(name.shard)};
		Oid shard_of = metadata_oid("SELECT s.logicalrelid::pg_catalog.oid"
		                            " FROM pg_catalog.pg_dist_shard s"
		                            " WHERE s.shardid OPERATOR(pg_catalog.=) $1",
		                            1, types, values);
		if (OidIsValid(shard_of) && shard_of != marks)
			return false;
	}
	if (!coordinator)
		return recorded_tables_owned_by(schema, name.id, owner);
	/* The coordinator: <id> is the OID of the protected table. */
	Oid target = static_cast<Oid>(name.id);
	char kind = get_rel_relkind(target);
	return (kind == RELKIND_RELATION || kind == RELKIND_PARTITIONED_TABLE) &&
	       get_rel_namespace(target) != schema && relation_owner(target) == owner;
}

/* An object a command left in fencing_citus. */
struct Placed {
	Oid classid;
	Oid objid;
	const char *type;
	const char *identity;
};
FENCING_PLAIN_DATA(Placed);

} // namespace

/*
 * fencing_internal._guard_citus_schema(): refuses (42501) every object a
 * command of a role other than the superuser and the extension owner leaves
 * in schema fencing_citus, unless it is a marks table of a table that role's
 * owner owns, a shard of one, or their primary key (see the top of this
 * file).  Runs with the rights of the role that ran the command; reads
 * catalogs, Citus' metadata and fencing_citus.shards (as the extension
 * owner); changes nothing.
 */
FENCING_FUNCTION(guard_citus_schema)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
		        (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		         errmsg("fencing_internal._guard_citus_schema: not fired by an event trigger")));
	Oid schema = get_namespace_oid("fencing_citus", true);
	if (!OidIsValid(schema) || superuser())
		PG_RETURN_VOID();
	/*
	 * A schema of that name that another role made is not the extension's
	 * (it uses none of it); its owner puts there what it likes.
	 */
	Oid owner = extension_owner();
	HeapTuple tuple = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(schema));
	if (!HeapTupleIsValid(tuple))
		PG_RETURN_VOID();
	Oid schema_owner = reinterpret_cast<Form_pg_namespace>(GETSTRUCT(tuple))->nspowner;
	ReleaseSysCache(tuple);
	if (schema_owner != owner || has_privs_of_role(GetUserId(), owner))
		PG_RETURN_VOID();
	MemoryContext caller = CurrentMemoryContext;
	List *placed = NIL;
	run_sql("SELECT c.classid, c.objid, c.object_type, c.object_identity"
	        " FROM pg_catalog.pg_event_trigger_ddl_commands() c"
	        " WHERE c.schema_name OPERATOR(pg_catalog.=) 'fencing_citus'",
	        0, nullptr, nullptr, InvalidSnapshot, true, false, [&](int rc) {
		        expect_result(rc, SPI_OK_SELECT, "reading the DDL commands");
		        MemoryContext spi = MemoryContextSwitchTo(caller);
		        for (uint64 row = 0; row < SPI_processed; row++) {
			        auto *object = static_cast<Placed *>(palloc0(sizeof(Placed)));
			        bool isnull;
			        Datum classid = result_value(row, 1, &isnull);
			        object->classid = isnull ? InvalidOid : DatumGetObjectId(classid);
			        Datum objid = result_value(row, 2, &isnull);
			        object->objid = isnull ? InvalidOid : DatumGetObjectId(objid);
			        object->type = SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 3);
			        object->identity =
			            SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 4);
			        placed = lappend(placed, object);
		        }
		        MemoryContextSwitchTo(spi);
	        });
	if (placed == NIL)
		PG_RETURN_VOID();
	/*
	 * Without Citus nothing makes a marks table (protect() of a table Citus
	 * does not distribute makes none): everything is refused.
	 */
	bool citus =
	    citus_loaded() && OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE));
	bool coordinator = citus && citus_node_is_coordinator();
	ListCell *cell;
	foreach (cell, placed) {
		auto *object = static_cast<Placed *>(lfirst(cell));
		if (citus && object->classid == RelationRelationId &&
		    may_stay(object->objid, schema, coordinator))
			continue;
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         errmsg("permission denied to put %s %s into schema fencing_citus",
		                object->type ? object->type : "object",
		                object->identity ? object->identity : "?"),
		         errdetail("Schema fencing_citus holds the marks tables that fencing.protect() "
		                   "makes, named for the protected table they serve, and their shards."),
		         errhint("Use a schema of your own.")));
	}
	PG_RETURN_VOID();
}
