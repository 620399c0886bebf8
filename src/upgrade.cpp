/*
 * Conversions that ALTER EXTENSION fencing UPDATE needs from C.
 *
 * 0.1.0 -> 0.2.0: deleted-key marks were named by the key's text, printed
 * with fixed DateStyle, TimeZone, IntervalStyle, extra_float_digits and
 * bytea_output; 0.2.0 names them by the hash of the key's binary images.
 */
#include "keys.hpp"
#include "compat.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
}

namespace
{

/* The settings 0.1.0 printed keys with, so that their text reads back as the same values. */
int use_0_1_0_styles()
{
	int level = NewGUCNestLevel();
	const char *settings[][2] = {{"datestyle", "ISO, YMD"}, {"intervalstyle", "postgres"},
	                             {"timezone", "UTC"},       {"extra_float_digits", "3"},
	                             {"bytea_output", "hex"},   {"lc_monetary", "C"}};
	for (auto &setting : settings)
		(void)set_config_option(setting[0], setting[1], PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
		                        true, 0, false);
	return level;
}

/*
 * Reads 0.1.0 key texts back into values, inside a subtransaction: a key
 * whose column changed type since may not read back.  False then.
 */
bool read_key(Relation rel, const fencing::KeyColumns &key, Datum *texts, Datum *values)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(context);
	volatile bool ok = true;
	PG_TRY();
	{
		for (int i = 0; i < key.count; i++) {
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1);
			Oid input, ioparam;
			getTypeInputInfo(att->atttypid, &input, &ioparam);
			values[i] =
			    OidInputFunctionCall(input, TextDatumGetCString(texts[i]), ioparam, att->atttypmod);
		}
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
	return ok;
}

} // namespace

/*
 * fencing._key_hash_0_1_0(relid, key text[]): the 0.2.0 name of a 0.1.0
 * mark, or NULL if its table is gone or the key no longer reads as the
 * table's primary key.
 */
FENCING_FUNCTION(key_hash_0_1_0)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	Relation rel = try_relation_open(PG_GETARG_OID(0), AccessShareLock);
	if (rel == nullptr)
		PG_RETURN_NULL();
	if (!OidIsValid(fencing::primary_key_index(rel))) {
		relation_close(rel, AccessShareLock);
		PG_RETURN_NULL();
	}
	Relation pk = index_open(fencing::primary_key_index(rel), AccessShareLock);
	fencing::KeyColumns key = fencing::key_columns(pk);
	index_close(pk, AccessShareLock);

	Datum *texts;
	bool *nulls;
	int n;
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &texts, &nulls,
	                  &n);
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS] = {false};
	bool ok = n == key.count;
	for (int i = 0; ok && i < n; i++)
		ok = !nulls[i];
	if (ok) {
		int level = use_0_1_0_styles();
		ok = read_key(rel, key, texts, values);
		AtEOXact_GUC(true, level);
	}
	if (!ok) {
		relation_close(rel, AccessShareLock);
		PG_RETURN_NULL();
	}
	Datum hash = fencing::key_hash_datum(fencing::key_hash(rel, key, values, isnull));
	relation_close(rel, AccessShareLock);
	PG_RETURN_DATUM(hash);
}
