/*
 * fencing.deleted_keys, read and written with the extension owner's rights
 * through two prepared plans.
 */
#include "marks.hpp"
#include "spi.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

SPIPlanPtr find_plan = nullptr;
SPIPlanPtr record_plan = nullptr;

/* The owner of fencing.deleted_keys: the rights the marks are read and written with. */
Oid marks_owner()
{
	Oid nsp = get_namespace_oid("fencing", false);
	Oid relid = get_relname_relid("deleted_keys", nsp);
	HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "fencing: table fencing.deleted_keys is missing");
	Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Prepares (if needed) and runs a marks plan as the extension owner, with row
 * security not forced: callers need no rights on the marks table, not even
 * USAGE on schema fencing.  An error restores the caller's identity at
 * (sub)transaction abort.
 */
int run_as_owner(SPIPlanPtr *cache, const char *sql, int nargs, Oid *types, Datum *values,
                 Snapshot snapshot, bool read_only)
{
	Oid save_user;
	int save_context;
	GetUserIdAndSecContext(&save_user, &save_context);
	SetUserIdAndSecContext(marks_owner(), save_context | SECURITY_LOCAL_USERID_CHANGE |
	                                          SECURITY_RESTRICTED_OPERATION | SECURITY_NOFORCE_RLS);
	SPIPlanPtr plan = kept_plan(cache, sql, nargs, types);
	int rc =
	    SPI_execute_snapshot(plan, values, nullptr, snapshot, InvalidSnapshot, read_only, false, 1);
	SetUserIdAndSecContext(save_user, save_context);
	return rc;
}

/* Types whose text form does not depend on any setting. */
bool style_free(Oid type)
{
	switch (type) {
	case INT2OID:
	case INT4OID:
	case INT8OID:
	case TEXTOID:
	case VARCHAROID:
	case BPCHAROID:
	case NAMEOID:
	case UUIDOID:
	case OIDOID:
	case BOOLOID:
		return true;
	default:
		return false;
	}
}

} // namespace

bool normalized_key_type(Oid type)
{
	return type == NUMERICOID || type == FLOAT4OID || type == FLOAT8OID;
}

namespace
{

/*
 * One value for all the equal values of a key type whose equality is looser
 * than its bits: 1.0 = 1.00 (numeric scale), -0 = 0 (floats).
 */
Datum normalized(Oid type, Datum value)
{
	switch (type) {
	case NUMERICOID:
		return DirectFunctionCall1(numeric_trim_scale, value);
	case FLOAT4OID:
		return DatumGetFloat4(value) == 0 ? Float4GetDatum(0.0f) : value;
	case FLOAT8OID:
		return DatumGetFloat8(value) == 0 ? Float8GetDatum(0.0) : value;
	default:
		return value;
	}
}

/*
 * Fixes the settings that change how values print (dates, times, intervals,
 * floats, bytea), so that a key has one text whatever the session's settings.
 * Returns the GUC nest level to pop with AtEOXact_GUC().
 */
int use_canonical_styles()
{
	int level = NewGUCNestLevel();
	const char *settings[][2] = {{"datestyle", "ISO, YMD"},
	                             {"intervalstyle", "postgres"},
	                             {"timezone", "UTC"},
	                             {"extra_float_digits", "3"},
	                             {"bytea_output", "hex"}};
	for (auto &setting : settings)
		(void)set_config_option(setting[0], setting[1], PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
		                        true, 0, false);
	return level;
}

} // namespace

MarkKey mark_key(Relation rel, Relation pk, const Datum *values, const bool *isnull)
{
	MarkKey key;
	key.relid = RelationGetRelid(rel);
	if (rel->rd_rel->relispartition)
		key.relid = llast_oid(get_partition_ancestors(key.relid));

	int n = pk->rd_index->indnkeyatts;
	Datum *texts = static_cast<Datum *>(palloc(sizeof(Datum) * n));
	TupleDesc desc = RelationGetDescr(rel);
	bool canonical = true;
	for (int i = 0; i < n; i++)
		canonical &= style_free(TupleDescAttr(desc, pk->rd_index->indkey.values[i] - 1)->atttypid);
	int level = canonical ? -1 : use_canonical_styles();
	for (int i = 0; i < n; i++) {
		if (isnull[i]) {
			texts[i] = CStringGetTextDatum("");
			continue;
		}
		Oid output;
		bool varlena;
		Oid type = TupleDescAttr(desc, pk->rd_index->indkey.values[i] - 1)->atttypid;
		getTypeOutputInfo(type, &output, &varlena);
		texts[i] = CStringGetTextDatum(OidOutputFunctionCall(output, normalized(type, values[i])));
	}
	if (level >= 0)
		AtEOXact_GUC(true, level);
	key.key = construct_array(texts, n, TEXTOID, -1, false, TYPALIGN_INT);
	return key;
}

bool find_mark(const MarkKey &key, int64 *mark)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	Oid types[2] = {REGCLASSOID, TEXTARRAYOID};
	Datum values[2] = {ObjectIdGetDatum(key.relid), PointerGetDatum(key.key)};
	int rc = run_as_owner(&find_plan,
	                      "SELECT token FROM fencing.deleted_keys"
	                      " WHERE relid OPERATOR(pg_catalog.=) $1"
	                      " AND key OPERATOR(pg_catalog.=) $2",
	                      2, types, values, GetLatestSnapshot(), true);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: reading fencing.deleted_keys failed: %s", SPI_result_code_string(rc));
	bool found = SPI_processed > 0;
	if (found) {
		bool isnull;
		*mark =
		    DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();
	return found;
}

void record_mark(const MarkKey &key, int64 token)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "fencing: SPI_connect failed");
	Oid types[3] = {REGCLASSOID, TEXTARRAYOID, INT8OID};
	Datum values[3] = {ObjectIdGetDatum(key.relid), PointerGetDatum(key.key), Int64GetDatum(token)};
	int rc = run_as_owner(&record_plan,
	                      "INSERT INTO fencing.deleted_keys (relid, key, token)"
	                      " VALUES ($1, $2, $3) ON CONFLICT (relid, key) DO UPDATE"
	                      " SET token = EXCLUDED.token, deleted_at = pg_catalog.now()"
	                      " WHERE fencing.token_accepts(deleted_keys.token, EXCLUDED.token, false)",
	                      3, types, values, InvalidSnapshot, false);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "fencing: writing fencing.deleted_keys failed: %s", SPI_result_code_string(rc));
	SPI_finish();
}

} // namespace fencing
