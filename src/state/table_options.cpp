/*
 * A protected table's rollout options: see table_options.hpp.
 */
#include "state/table_options.hpp"
#include "base/relid_cache.hpp"
#include "base/token_compare.hpp"
#include "base/spi.hpp"
#include "legacy/table_options_0_3_0.hpp"
#include "state/registry.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/hsearch.h"
#include "storage/sinval.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
}

namespace fencing
{

namespace
{

SPIPlanPtr read_plan = nullptr;
SPIPlanPtr upsert_plan = nullptr;
SPIPlanPtr enforce_plan = nullptr;
SPIPlanPtr forget_plan = nullptr;
SPIPlanPtr maintainer_plan = nullptr;

/* What this backend read of fencing.table_options, by protected table. */
struct CacheEntry {
	Oid relid; /* hash key */
	TableOptions options;
};
FENCING_PLAIN_DATA(CacheEntry);
HTAB *cache = nullptr;

/* Reads the options of `relid` (latest committed state, and this transaction's). */
TableOptions read_options(Oid relid)
{
	TableOptions options{relid, true, 0, InvalidOid};
	if (no_table_options_0_3_0())
		return options;
	Oid types[1] = {REGCLASSOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	run_as_owner(&read_plan,
	             "SELECT o.enforce, o.max_token, o.maintainer FROM fencing.table_options o"
	             " WHERE o.relid OPERATOR(pg_catalog.=) $1",
	             1, types, values, GetLatestSnapshot(), true, [&](int rc) {
		             expect_result(rc, SPI_OK_SELECT, "reading the table options");
		             if (SPI_processed == 0)
			             return;
		             bool isnull;
		             options.enforce = DatumGetBool(result_value(0, 1, &isnull));
		             Datum ceiling = result_value(0, 2, &isnull);
		             options.max_token = isnull ? 0 : DatumGetInt64(ceiling);
		             Datum maintainer = result_value(0, 3, &isnull);
		             options.maintainer = isnull ? InvalidOid : DatumGetObjectId(maintainer);
	             });
	return options;
}

} // namespace

TableOptions options_of(Relation rel)
{
	Registration registration;
	if (!protection_of(rel, &registration))
		return TableOptions{InvalidOid, true, 0, InvalidOid};
	(void)relid_cache(&cache, "fencing table options", sizeof(CacheEntry));
	bool found;
	auto *entry =
	    static_cast<CacheEntry *>(hash_search(cache, &registration.relid, HASH_FIND, &found));
	if (found)
		return entry->options;
	/*
	 * The read's snapshot is taken before its lock on the table of options,
	 * whose grant processes invalidations: a change committed in between
	 * would be read as it was and its invalidation spent on an entry not
	 * made yet.  So a read during which any invalidation arrived is read
	 * again, as the relcache does.
	 */
	TableOptions read;
	for (;;) {
		uint64 invalidations = SharedInvalidMessageCounter;
		read = read_options(registration.relid);
		if (invalidations == SharedInvalidMessageCounter)
			break;
	}
	/* The hash table may have been reset meanwhile: look the slot up again. */
	entry = static_cast<CacheEntry *>(hash_search(cache, &registration.relid, HASH_ENTER, &found));
	entry->options = read;
	return read;
}

bool above_ceiling(const TableOptions &options, int64 presented)
{
	return above_max_token(options.max_token, presented);
}

const char *protect_options_text(const TableOptions &options)
{
	if (options.max_token == 0)
		return psprintf("enforce => %s, max_token => NULL", options.enforce ? "true" : "false");
	return psprintf("enforce => %s, max_token => " INT64_FORMAT, options.enforce ? "true" : "false",
	                options.max_token);
}

void record_options(Oid relid, bool enforce, int64 max_token)
{
	Oid types[3] = {REGCLASSOID, BOOLOID, INT8OID};
	Datum values[3] = {ObjectIdGetDatum(relid), BoolGetDatum(enforce), Int64GetDatum(max_token)};
	char nulls[4] = {' ', ' ', max_token == 0 ? 'n' : ' ', '\0'};
	run_as_owner(&upsert_plan,
	             "INSERT INTO fencing.table_options AS o (relid, enforce, max_token)"
	             " VALUES ($1, $2, $3)"
	             " ON CONFLICT (relid) DO UPDATE SET enforce = EXCLUDED.enforce,"
	             " max_token = EXCLUDED.max_token, changed_at = pg_catalog.now()",
	             3, types, values, InvalidSnapshot, false, nulls,
	             [&](int rc) { expect_result(rc, SPI_OK_INSERT, "writing the table options"); });
	CacheInvalidateRelcacheByRelid(relid);
}

bool record_enforce(Oid relid, bool enforce)
{
	Oid types[2] = {REGCLASSOID, BOOLOID};
	Datum values[2] = {ObjectIdGetDatum(relid), BoolGetDatum(enforce)};
	bool done = run_as_owner(&enforce_plan,
	                         "INSERT INTO fencing.table_options AS o (relid, enforce)"
	                         " SELECT r.relid, $2 FROM fencing.registry r"
	                         "  WHERE r.relid OPERATOR(pg_catalog.=) $1 AND r.protected"
	                         " ON CONFLICT (relid) DO UPDATE SET enforce = EXCLUDED.enforce,"
	                         " changed_at = pg_catalog.now()",
	                         2, types, values, InvalidSnapshot, false, [&](int rc) {
		                         expect_result(rc, SPI_OK_INSERT, "writing the table options");
		                         return SPI_processed > 0;
	                         });
	CacheInvalidateRelcacheByRelid(relid);
	return done;
}

bool record_maintainer(Oid relid, Oid role)
{
	Oid types[2] = {REGCLASSOID, REGROLEOID};
	Datum values[2] = {ObjectIdGetDatum(relid), ObjectIdGetDatum(role)};
	char nulls[3] = {' ', OidIsValid(role) ? ' ' : 'n', '\0'};
	bool done = run_as_owner(&maintainer_plan,
	                         "INSERT INTO fencing.table_options AS o (relid, maintainer)"
	                         " SELECT r.relid, $2 FROM fencing.registry r"
	                         "  WHERE r.relid OPERATOR(pg_catalog.=) $1 AND r.protected"
	                         " ON CONFLICT (relid) DO UPDATE SET maintainer = EXCLUDED.maintainer,"
	                         " changed_at = pg_catalog.now()",
	                         2, types, values, InvalidSnapshot, false, nulls, [&](int rc) {
		                         expect_result(rc, SPI_OK_INSERT, "writing the table options");
		                         return SPI_processed > 0;
	                         });
	CacheInvalidateRelcacheByRelid(relid);
	return done;
}

void forget_options(Oid relid)
{
	if (no_table_options_0_3_0())
		return;
	Oid types[1] = {REGCLASSOID};
	Datum values[1] = {ObjectIdGetDatum(relid)};
	run_as_owner(&forget_plan,
	             "DELETE FROM fencing.table_options WHERE relid OPERATOR(pg_catalog.=) $1", 1,
	             types, values, InvalidSnapshot, false,
	             [&](int rc) { expect_result(rc, SPI_OK_DELETE, "writing the table options"); });
	CacheInvalidateRelcacheByRelid(relid);
}

} // namespace fencing
