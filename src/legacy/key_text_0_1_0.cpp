/*
 * 0.1.0's objects: marks named by the key's text.  See key_text_0_1_0.hpp.
 */
#include "legacy/key_text_0_1_0.hpp"
#include "legacy/installed_release.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

namespace fencing
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

namespace
{

/* One text for all the equal values of numeric (scale) and floats (zeros), as 0.1.0 printed them.
 */
Datum normalized_0_1_0(Oid type, Datum value)
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

} // namespace

Datum key_text_0_1_0(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull)
{
	Datum texts[INDEX_MAX_KEYS];
	int level = use_0_1_0_styles();
	for (int i = 0; i < key.count; i++) {
		if (isnull[i]) {
			texts[i] = CStringGetTextDatum("");
			continue;
		}
		Oid type = TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1)->atttypid;
		Oid output;
		bool varlena;
		getTypeOutputInfo(type, &output, &varlena);
		texts[i] =
		    CStringGetTextDatum(OidOutputFunctionCall(output, normalized_0_1_0(type, values[i])));
	}
	AtEOXact_GUC(true, level);
	return PointerGetDatum(construct_array(texts, key.count, TEXTOID, -1, false, TYPALIGN_INT));
}

KeyHash key_identity(Relation rel, const KeyColumns &key, const Datum *values, const bool *isnull)
{
	KeyHash identity = key_hash(rel, key, values, isnull);
	if (installed_layout() == Layout::v0_1_0)
		identity.text_0_1_0 = key_text_0_1_0(rel, key, values, isnull);
	return identity;
}

KeyHash row_key_identity(Relation rel, const KeyColumns &key, HeapTuple row)
{
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(rel, key, row, values, isnull);
	return key_identity(rel, key, values, isnull);
}

} // namespace fencing
