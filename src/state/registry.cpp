/*
 * The registry of protected tables: see registry.hpp.
 */
#include "state/registry.hpp"
#include "base/compat.hpp"
#include "base/relid_cache.hpp"
#include "legacy/registry_0_2_0.hpp"
#include "base/spi.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "access/genam.h"
#include "catalog/partition.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

SPIPlanPtr lookup_plan = nullptr;
SPIPlanPtr identity_plan = nullptr;
SPIPlanPtr marks_floor_plan = nullptr;
SPIPlanPtr upsert_plan = nullptr;
SPIPlanPtr unprotect_plan = nullptr;

/*
 * What this backend read of the registry, by relation (also "not
 * registered").  protect(), unprotect() and the DDL they follow invalidate
 * the relation's relcache entry whenever they change its row; an entry goes
 * with that invalidation (and all of them with a full one).
 */
struct CacheEntry {
	Oid relid; /* hash key */
	bool found;
	Registration registration;
	bool from_triggers; /* read (with an older release's objects) from triggers, not the registry */
};
FENCING_PLAIN_DATA(CacheEntry);
HTAB *cache = nullptr;

/* Reads the registry row of `relid` (latest committed state, and this transaction's). */
bool read_registration(Oid relid, Registration *registration)
{
	bool in_triggers;
	if (trigger_settings_0_2_0(relid, &registration->token_column, &registration->mode,
	                           &in_triggers)) {
		if (in_triggers) {
			registration->relid = relid;
			registration->is_protected = true;
		}
		return in_triggers;
	}
	Oid types[1] = {REGCLASSOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	return run_as_owner(&lookup_plan,
	                    "SELECT r.token_column, r.mode, r.protected FROM fencing.registry r"
	                    " WHERE r.relid OPERATOR(pg_catalog.=) $1",
	                    1, types, values, GetLatestSnapshot(), true, [&](int rc) {
		                    expect_result(rc, SPI_OK_SELECT, "reading the registry");
		                    bool found = SPI_processed > 0;
		                    if (found) {
			                    bool isnull;
			                    registration->relid = relid;
			                    namestrcpy(&registration->token_column,
			                               NameStr(*DatumGetName(result_value(0, 1, &isnull))));
			                    char *mode = TextDatumGetCString(result_value(0, 2, &isnull));
			                    if (!parse_mode(mode, &registration->mode))
				                    elog(ERROR, "fencing: the registry holds mode \"%s\"", mode);
			                    registration->is_protected =
			                        DatumGetBool(result_value(0, 3, &isnull));
		                    }
		                    return found;
	                    });
}

/* Are two identity arrays (or NULLs) equal? */
bool same_array(Datum a, bool a_null, Datum b, bool b_null)
{
	if (a_null || b_null)
		return a_null && b_null;
	return DatumGetBool(OidFunctionCall2Coll(F_ARRAY_EQ, C_COLLATION_OID, a, b));
}

} // namespace

bool registration_of(Oid relid, Registration *registration)
{
	(void)relid_cache(&cache, "fencing registry", sizeof(CacheEntry));
	bool found;
	auto *entry = static_cast<CacheEntry *>(hash_search(cache, &relid, HASH_FIND, &found));
	if (found && entry->from_triggers == settings_in_triggers_0_2_0()) {
		*registration = entry->registration;
		return entry->found;
	}
	Registration read{};
	bool registered = read_registration(relid, &read);
	/* The hash table may have been reset meanwhile: look the slot up again. */
	entry = static_cast<CacheEntry *>(hash_search(cache, &relid, HASH_ENTER, &found));
	entry->found = registered;
	entry->registration = read;
	entry->from_triggers = settings_in_triggers_0_2_0();
	*registration = read;
	return registered;
}

bool protection_of(Relation rel, Registration *registration)
{
	/* A table that is no partition (the guard's common case) needs no catalog lookup. */
	if (!rel->rd_rel->relispartition)
		return registration_of(RelationGetRelid(rel), registration) && registration->is_protected;
	return protection_of(RelationGetRelid(rel), registration);
}

bool protection_of(Oid relid, Registration *registration)
{
	if (registration_of(relid, registration) && registration->is_protected)
		return true;
	for (Oid ancestor = relid; get_rel_relispartition(ancestor);) {
		ancestor = get_partition_parent(ancestor, true);
		if (registration_of(ancestor, registration) && registration->is_protected)
			return true;
	}
	return false;
}

bool registered(Relation rel)
{
	Registration registration;
	if (registration_of(RelationGetRelid(rel), &registration))
		return true;
	ListCell *cell;
	foreach (cell, partition_ancestors(rel))
		if (registration_of(lfirst_oid(cell), &registration))
			return true;
	return false;
}

/*
 * A collation as the registry records it: schema-qualified and quoted
 * ("pg_catalog"."C" reads pg_catalog."C"), '' for none.  Text, not
 * regcollation: pg_upgrade keeps no collation OIDs and refuses tables with
 * regcollation columns.
 */
const char *collation_name(Oid collation)
{
	if (!OidIsValid(collation))
		return "";
	HeapTuple tuple = SearchSysCache1(COLLOID, ObjectIdGetDatum(collation));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "fencing: collation %u does not exist", collation);
	auto *form = reinterpret_cast<Form_pg_collation>(GETSTRUCT(tuple));
	const char *name = quote_qualified_identifier(get_namespace_name(form->collnamespace),
	                                              NameStr(form->collname));
	ReleaseSysCache(tuple);
	return name;
}

bool key_identity(Relation rel, Datum identity[4])
{
	Oid index = fencing::primary_key_index(rel);
	if (!OidIsValid(index)) {
		identity[0] = identity[1] = identity[2] = identity[3] = static_cast<Datum>(0);
		return false;
	}
	Relation pk = index_open(index, AccessShareLock);
	KeyColumns key = key_columns(pk);
	Datum names[INDEX_MAX_KEYS], types[INDEX_MAX_KEYS], collations[INDEX_MAX_KEYS],
	    typmods[INDEX_MAX_KEYS];
	for (int i = 0; i < key.count; i++) {
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1);
		names[i] = NameGetDatum(&att->attname);
		types[i] = ObjectIdGetDatum(att->atttypid);
		collations[i] = CStringGetTextDatum(collation_name(pk->rd_indcollation[i]));
		typmods[i] = Int32GetDatum(att->atttypmod);
	}
	identity[0] = PointerGetDatum(
	    construct_array(names, key.count, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
	identity[1] = PointerGetDatum(
	    construct_array(types, key.count, REGTYPEOID, sizeof(Oid), true, TYPALIGN_INT));
	identity[2] =
	    PointerGetDatum(construct_array(collations, key.count, TEXTOID, -1, false, TYPALIGN_INT));
	identity[3] = PointerGetDatum(
	    construct_array(typmods, key.count, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	index_close(pk, AccessShareLock);
	return true;
}

bool identity_unchanged(Relation rel)
{
	Oid relid = RelationGetRelid(rel);
	Datum identity[4];
	bool has_key = key_identity(rel, identity);
	Oid types[2] = {REGCLASSOID, REGCLASSARRAYOID};
	Datum values[2] = {ObjectIdGetDatum(relid),
	                   relid_array(find_all_inheritors(relid, NoLock, nullptr))};
	return run_as_owner(
	    &identity_plan,
	    "SELECT r.key_columns, r.key_types, r.key_collations, r.key_typmods,"
	    " r.relid IS NOT NULL,"
	    " EXISTS (SELECT FROM fencing.deleted_keys d"
	    "  WHERE d.relid OPERATOR(pg_catalog.=) ANY ($2))"
	    " FROM (SELECT) one LEFT JOIN fencing.registry r"
	    "  ON r.relid OPERATOR(pg_catalog.=) $1",
	    2, types, values, GetLatestSnapshot(), true, [&](int rc) {
		    if (rc != SPI_OK_SELECT || SPI_processed != 1)
			    elog(ERROR, "fencing: reading the registry failed: %s", SPI_result_code_string(rc));
		    bool isnull, null[4];
		    Datum recorded[4];
		    for (int i = 0; i < 4; i++)
			    recorded[i] = result_value(0, i + 1, &null[i]);
		    bool was_registered = DatumGetBool(result_value(0, 5, &isnull));
		    bool has_marks = DatumGetBool(result_value(0, 6, &isnull));
		    bool unchanged = true;
		    for (int i = 0; i < 4; i++)
			    unchanged = unchanged && same_array(recorded[i], null[i], identity[i], !has_key);
		    /* Never registered: the identity its marks (if any) were made under is unknown. */
		    if (!was_registered)
			    unchanged = !has_marks;
		    return unchanged;
	    });
}

bool record_registration(Relation rel, const char *token_column, Mode mode, bool is_protected,
                         bool marks_current)
{
	Oid relid = RelationGetRelid(rel);
	bool raised = false;
	if (!marks_current && !identity_unchanged(rel)) {
		Oid types[2] = {REGCLASSOID, REGCLASSARRAYOID};
		Datum values[2] = {ObjectIdGetDatum(relid),
		                   relid_array(find_all_inheritors(relid, NoLock, nullptr))};
		run_as_owner(&marks_floor_plan,
		             "INSERT INTO fencing.floors (relid, token)"
		             " SELECT $1, pg_catalog.max(d.token) FROM fencing.deleted_keys d"
		             "  WHERE d.relid OPERATOR(pg_catalog.=) ANY ($2)"
		             "  HAVING pg_catalog.max(d.token) IS NOT NULL"
		             " ON CONFLICT (relid) DO UPDATE"
		             " SET token = EXCLUDED.token, raised_at = pg_catalog.now()"
		             " WHERE fencing.token_accepts(floors.token, EXCLUDED.token, true)",
		             2, types, values, InvalidSnapshot, false, [&](int rc) {
			             expect_result(rc, SPI_OK_INSERT, "raising a floor");
			             raised = SPI_processed > 0;
		             });
	}
	Datum identity[4];
	bool has_key = key_identity(rel, identity);
	Oid types[8] = {REGCLASSOID,  NAMEOID,         TEXTOID,      BOOLOID,
	                NAMEARRAYOID, REGTYPEARRAYOID, TEXTARRAYOID, INT4ARRAYOID};
	NameData column;
	namestrcpy(&column, token_column);
	Datum values[8] = {ObjectIdGetDatum(relid),
	                   NameGetDatum(&column),
	                   CStringGetTextDatum(mode_name(mode)),
	                   BoolGetDatum(is_protected),
	                   identity[0],
	                   identity[1],
	                   identity[2],
	                   identity[3]};
	char key_null = has_key ? ' ' : 'n';
	char nulls[9] = {' ', ' ', ' ', ' ', key_null, key_null, key_null, key_null, '\0'};
	run_as_owner(&upsert_plan,
	             "INSERT INTO fencing.registry AS r (relid, token_column, mode, protected,"
	             " key_columns, key_types, key_collations, key_typmods)"
	             " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
	             " ON CONFLICT (relid) DO UPDATE SET token_column = EXCLUDED.token_column,"
	             " mode = EXCLUDED.mode, protected = EXCLUDED.protected,"
	             " key_columns = EXCLUDED.key_columns, key_types = EXCLUDED.key_types,"
	             " key_collations = EXCLUDED.key_collations,"
	             " key_typmods = EXCLUDED.key_typmods, recorded_at = pg_catalog.now()",
	             8, types, values, InvalidSnapshot, false, nulls,
	             [&](int rc) { expect_result(rc, SPI_OK_INSERT, "writing the registry"); });
	CacheInvalidateRelcacheByRelid(relid);
	return raised;
}

bool record_unprotected(Oid relid)
{
	Oid types[1] = {REGCLASSOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	bool was =
	    run_as_owner(&unprotect_plan,
	                 "UPDATE fencing.registry SET protected = false, recorded_at = pg_catalog.now()"
	                 " WHERE relid OPERATOR(pg_catalog.=) $1 AND protected",
	                 1, types, values, InvalidSnapshot, false, [&](int rc) {
		                 expect_result(rc, SPI_OK_UPDATE, "writing the registry");
		                 return SPI_processed > 0;
	                 });
	CacheInvalidateRelcacheByRelid(relid);
	return was;
}

} // namespace fencing
