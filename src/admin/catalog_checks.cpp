/*
 * What fencing.protect() asks of C: whether a table's primary key can be
 * guarded, and the condition under which an UPDATE changed the key.
 */
#include "catalog/keys.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
}

/*
 * fencing_internal.key_change_condition(target): errors unless the table has
 * an immediate primary key that the guard can mark (55000, 0A000); returns
 * the WHEN condition of the AFTER UPDATE trigger, true when the new row's key
 * differs from the old one's, by the key's own equality operators:
 * NOT (OLD."a" OPERATOR(pg_catalog.=) NEW."a" AND ...).
 */
FENCING_FUNCTION(key_change_condition)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	Relation rel = try_relation_open(PG_GETARG_OID(0), AccessShareLock);
	if (rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", PG_GETARG_OID(0))));
	Relation pk = fencing::open_primary_key(rel);
	fencing::require_identifiable_key(rel, pk);
	fencing::KeyColumns key = fencing::key_columns(pk);
	StringInfoData condition;
	initStringInfo(&condition);
	appendStringInfoString(&condition, "NOT (");
	for (int i = 0; i < key.count; i++) {
		const char *column = quote_identifier(
		    NameStr(TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1)->attname));
		appendStringInfo(&condition, "%sOLD.%s %s NEW.%s", i > 0 ? " AND " : "", column,
		                 fencing::key_equality_operator(pk, i), column);
	}
	appendStringInfoChar(&condition, ')');
	index_close(pk, AccessShareLock);
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(condition.data));
}
