/*
 * Names of relations for messages, and which relations Citus distributes:
 * see citus_names.hpp.
 */
#include "catalog/citus_names.hpp"
#include "base/relid_cache.hpp"
#include "base/rights.hpp"
#include "base/spi.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "executor/spi.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

namespace fencing
{

namespace
{

/* Where citus_result_text() copies to: the caller's memory, not SPI's. */
MemoryContext caller_context = nullptr;

} // namespace

MemoryContext citus_caller_context()
{
	return caller_context;
}

/* The text of column `column` of the first result row, copied out of SPI; NULL if NULL. */
char *citus_result_text(int column)
{
	char *text = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, column);
	return text == nullptr ? nullptr : MemoryContextStrdup(caller_context, text);
}

void citus_metadata_execute(MemoryContext caller, const char *sql, int nargs, Oid *types,
                            Datum *values)
{
	caller_context = caller;
	int rc = execute_sql(sql, nargs, types, values, InvalidSnapshot, true, true);
	expect_result(rc, SPI_OK_SELECT, "reading Citus metadata");
}

int64 citus_shard_id(Relation rel)
{
	const char *name = RelationGetRelationName(rel);
	const char *underscore = strrchr(name, '_');
	if (underscore == nullptr || underscore[1] == '\0')
		return 0;
	char *end;
	long long id = strtoll(underscore + 1, &end, 10);
	return *end == '\0' && id > 0 ? id : 0;
}

bool citus_loaded()
{
	/* Citus is loaded at server start (shared_preload_libraries) or not at all. */
	static int loaded = -1;
	if (loaded < 0)
		loaded = GetConfigOption("citus.propagate_set_commands", true, false) != nullptr;
	return loaded == 1;
}

bool citus_is_distributed(Oid relid)
{
	if (!citus_loaded())
		return false;
	Oid types[1] = {OIDOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	return citus_metadata_query("SELECT FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1",
	                            1, types, values, [] { return SPI_processed > 0; });
}

namespace
{

/*
 * The Citus tables of the shards this backend wrote, by shard relation: the
 * guard of a shard needs its table's name for each statement (three
 * triggers), and a metadata query each time costs more than the write.  A
 * shard's relation maps to one table for as long as it exists under its name
 * (shard ids are never reused); an entry goes when the relcache forgets its
 * relation (DROP, RENAME, SET SCHEMA, a move that drops the placement, an
 * aborted transaction that made it).  Bounded: a few entries, reused in turn.
 */
struct LogicalName {
	Oid shard;
	Oid schema;
	NameData relname;
	char *qualified; /* in TopMemoryContext */
	char *name;
	bool hash;
};
FENCING_PLAIN_DATA(LogicalName);
constexpr int logical_names_kept = 32;
LogicalName logical_names[logical_names_kept];
int next_logical_name = 0;
bool logical_names_watched = false;

void forget_logical_name(Datum, Oid relid)
{
	for (LogicalName &entry : logical_names)
		if (OidIsValid(entry.shard) && (!OidIsValid(relid) || entry.shard == relid))
			entry.shard = InvalidOid;
}

LogicalName *known_logical_name(Relation rel)
{
	for (LogicalName &entry : logical_names)
		if (OidIsValid(entry.shard) && entry.shard == RelationGetRelid(rel) &&
		    entry.schema == RelationGetNamespace(rel) &&
		    strcmp(NameStr(entry.relname), RelationGetRelationName(rel)) == 0)
			return &entry;
	return nullptr;
}

void keep_logical_name(Relation rel, const char *qualified, const char *name, bool hash)
{
	if (!logical_names_watched) {
		on_relcache_invalidation(forget_logical_name, 0);
		logical_names_watched = true;
	}
	LogicalName &entry = logical_names[next_logical_name];
	next_logical_name = (next_logical_name + 1) % logical_names_kept;
	entry.shard = InvalidOid;
	if (entry.qualified != nullptr)
		pfree(entry.qualified);
	if (entry.name != nullptr)
		pfree(entry.name);
	entry.qualified = MemoryContextStrdup(TopMemoryContext, qualified);
	entry.name = MemoryContextStrdup(TopMemoryContext, name);
	entry.schema = RelationGetNamespace(rel);
	namestrcpy(&entry.relname, RelationGetRelationName(rel));
	entry.hash = hash;
	entry.shard = RelationGetRelid(rel);
}

} // namespace

bool citus_logical_name(Relation rel, const char **qualified, const char **name,
                        bool *hash_distributed)
{
	int64 shard_id = citus_shard_id(rel);
	if (shard_id == 0 || !citus_loaded())
		return false;
	if (const LogicalName *known = known_logical_name(rel)) {
		*qualified = pstrdup(known->qualified);
		*name = pstrdup(known->name);
		if (hash_distributed != nullptr)
			*hash_distributed = known->hash;
		return true;
	}
	Oid types[3] = {INT8OID, OIDOID, TEXTOID};
	Datum values[3] = {Int64GetDatum(shard_id), ObjectIdGetDatum(RelationGetNamespace(rel)),
	                   CStringGetTextDatum(RelationGetRelationName(rel))};
	bool found = false;
	bool hash = false;
	citus_metadata_query(
	    "SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
	    "       OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
	    "       c.relname::pg_catalog.text, p.partmethod OPERATOR(pg_catalog.=) 'h'"
	    " FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_class c ON c.oid = s.logicalrelid"
	    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
	    " JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
	    " WHERE s.shardid = $1 AND c.relnamespace = $2"
	    "  AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $1 = $3",
	    3, types, values, [&]() {
		    found = SPI_processed > 0;
		    if (found) {
			    *qualified = citus_result_text(1);
			    *name = citus_result_text(2);
			    bool isnull;
			    hash = DatumGetBool(result_value(0, 3, &isnull)) && !isnull;
			    if (hash_distributed != nullptr)
				    *hash_distributed = hash;
		    }
	    });
	if (found)
		keep_logical_name(rel, *qualified, *name, hash);
	return found;
}

bool citus_shard_named(Relation rel, const Trigger *trigger, const char **qualified,
                       const char **name)
{
	int64 shard_id = citus_shard_id(rel);
	if (shard_id == 0 || !citus_loaded())
		return false;
	const char *suffix = psprintf("_" INT64_FORMAT, shard_id);
	size_t suffix_length = strlen(suffix);
	const char *relname = RelationGetRelationName(rel);
	size_t relname_length = strlen(relname);
	size_t tgname_length = strlen(trigger->tgname);
	if (relname_length <= suffix_length || tgname_length <= suffix_length ||
	    strcmp(relname + relname_length - suffix_length, suffix) != 0 ||
	    strcmp(trigger->tgname + tgname_length - suffix_length, suffix) != 0 ||
	    !guard_trigger_named(pnstrdup(trigger->tgname, tgname_length - suffix_length)))
		return false;
	/*
	 * A table name too long for the suffix: Citus cut it (at a character
	 * boundary, up to 3 bytes short) and put a hash of the whole name before
	 * the suffix ("<cut>_<8 hex digits>_<shard id>", 60 to 63 bytes), so the
	 * table's name is not there to read.
	 */
	size_t base_length = relname_length - suffix_length;
	constexpr size_t hash_length = 9; /* "_" and 8 hex digits */
	if (relname_length + 4 >= NAMEDATALEN && base_length > hash_length &&
	    relname[base_length - hash_length] == '_' &&
	    strspn(relname + base_length - hash_length + 1, "0123456789abcdef") == hash_length - 1)
		return false;
	*name = pnstrdup(relname, base_length);
	*qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), *name);
	return true;
}

char *relation_display_name(Relation rel)
{
	const char *qualified, *name;
	if (citus_logical_name(rel, &qualified, &name, nullptr))
		return pstrdup(qualified);
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
	                                  RelationGetRelationName(rel));
}

const char *relation_name(Relation rel)
{
	const char *qualified, *name;
	if (citus_logical_name(rel, &qualified, &name, nullptr))
		return name;
	return RelationGetRelationName(rel);
}

int64 citus_recorded_id(Relation rel)
{
	if (!citus_loaded())
		return 0;
	/*
	 * The relation's table, from Citus' metadata: the shell itself, or the
	 * table of the shard the relation is named for, whose placement is on
	 * this node; and the local placement of fencing_citus.shards (read
	 * directly: a shard's trigger may not start a distributed query).
	 */
	Oid types[4] = {OIDOID, INT8OID, OIDOID, TEXTOID};
	Datum values[4] = {ObjectIdGetDatum(RelationGetRelid(rel)), Int64GetDatum(citus_shard_id(rel)),
	                   ObjectIdGetDatum(RelationGetNamespace(rel)),
	                   CStringGetTextDatum(RelationGetRelationName(rel))};
	Oid table = InvalidOid, shards = InvalidOid;
	citus_metadata_query(
	    "SELECT t.logicalrelid::pg_catalog.oid,"
	    "       pg_catalog.to_regclass(pg_catalog.shard_name(r.logicalrelid, r.shardid))"
	    "::pg_catalog.oid"
	    " FROM (SELECT p.logicalrelid FROM pg_catalog.pg_dist_partition p"
	    "       WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1"
	    "       UNION ALL"
	    "       SELECT s.logicalrelid FROM pg_catalog.pg_dist_shard s"
	    "       JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.logicalrelid"
	    "       WHERE s.shardid OPERATOR(pg_catalog.=) $2"
	    "        AND c.relnamespace OPERATOR(pg_catalog.=) $3"
	    "        AND c.relname OPERATOR(pg_catalog.||) '_' OPERATOR(pg_catalog.||) $2"
	    "            OPERATOR(pg_catalog.=) $4"
	    "        AND EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
	    "                    WHERE pl.shardid OPERATOR(pg_catalog.=) s.shardid"
	    "                     AND pl.groupid OPERATOR(pg_catalog.=)"
	    "                         (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g))) t,"
	    "      pg_catalog.pg_dist_shard r"
	    " WHERE r.logicalrelid OPERATOR(pg_catalog.=)"
	    "       pg_catalog.to_regclass('fencing_citus.shards')",
	    4, types, values, [&]() {
		    if (SPI_processed == 1) {
			    bool table_null, shards_null;
			    Datum t = result_value(0, 1, &table_null);
			    Datum r = result_value(0, 2, &shards_null);
			    table = table_null ? InvalidOid : DatumGetObjectId(t);
			    shards = shards_null ? InvalidOid : DatumGetObjectId(r);
		    }
	    });
	/*
	 * Only the extension's own record counts (a role with CREATE there could
	 * make one first; fencing_citus itself may be another role's).
	 */
	if (!OidIsValid(table) || !OidIsValid(shards) || relation_owner(shards) != extension_owner())
		return 0;
	/* One id for all of the table's recorded shards (a split's new shards are not recorded). */
	Oid id_types[1] = {OIDOID};
	Datum id_values[1] = {ObjectIdGetDatum(table)};
	int64 id = 0;
	citus_metadata_query(
	    psprintf("SELECT DISTINCT r.id FROM %s r"
	             " JOIN pg_catalog.pg_dist_shard t"
	             "  ON t.shardid OPERATOR(pg_catalog.=) r.shardid"
	             " WHERE t.logicalrelid OPERATOR(pg_catalog.=) $1",
	             quote_qualified_identifier("fencing_citus", get_rel_name(shards))),
	    1, id_types, id_values, [&]() {
		    if (SPI_processed == 1) {
			    bool isnull;
			    Datum value = result_value(0, 1, &isnull);
			    id = isnull ? 0 : DatumGetInt64(value);
		    }
	    });
	return id;
}

} // namespace fencing
