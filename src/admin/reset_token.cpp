/*
 * fencing.reset_token(target, key, token): the repair of a row, or of a
 * deleted key's mark, whose stored token is higher than any real holder's
 * (a writer presented 2^63 - 1, say), for the table's owner.  The row is
 * updated as the table's owner, with SECURITY_RESTRICTED_OPERATION, through
 * the guard, which takes the token for that one row as reset_token()
 * registered it (guard/fenced_write.hpp); the key's marks are set with the
 * extension owner's rights.
 */
#include "admin/ddl.hpp"
#include "base/rights.hpp"
#include "base/spi.hpp"
#include "base/token_compare.hpp"
#include "catalog/citus_names.hpp"
#include "catalog/json_columns.hpp"
#include "catalog/relation.hpp"
#include "guard/fenced_write.hpp"
#include "legacy/key_text_0_1_0.hpp"
#include "reporting/errors.hpp"
#include "state/mark_store.hpp"
#include "state/table_options.hpp"
#include "state/table_settings.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
}

using namespace fencing;

namespace
{

/* What one call resolved its arguments to. */
struct Reset {
	Relation rel;
	Relation pk;
	TableSettings fence;
	Columns key;    /* in attnum order */
	Datum *ordered; /* the key in primary key index order */
	int64 token;
};
FENCING_PLAIN_DATA(Reset);

/* The table's owner may reset; a maintainer may not (it cannot lower a token). */
void check_target(const Reset &r)
{
	char kind = r.rel->rd_rel->relkind;
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("\"%s\" is not a table", RelationGetRelationName(r.rel))));
	if (!r.fence.is_protected)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", RelationGetRelationName(r.rel)),
		                errhint("Run fencing.protect() on it first, or UPDATE its token column "
		                        "directly.")));
	if (citus_loaded() && citus_is_distributed(RelationGetRelid(r.rel)))
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("fencing.reset_token() does not support Citus distributed table \"%s\"",
		                RelationGetRelationName(r.rel)),
		         errdetail("Its rows and deleted-key marks are on the workers, whose guards "
		                   "refuse a lower token."),
		         errhint("Run fencing.unprotect(), UPDATE the token column, then "
		                 "fencing.protect() again.")));
}

/* Refuses a token below the floor compact() or TRUNCATE left: no write could follow it. */
[[noreturn]] void refuse_below_floor(const Reset &r, int64 floor)
{
	ereport(ERROR,
	        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
	         errmsg("token " INT64_FORMAT " is below the floor " INT64_FORMAT " of relation \"%s\"",
	                r.token, floor, RelationGetRelationName(r.rel)),
	         errdetail("fencing.compact() or a TRUNCATE raised the floor: no write below it "
	                   "is accepted."),
	         errhint("Reset to a token of at least " INT64_FORMAT ".", floor)));
}

/*
 * Sets the row's token as the table's owner (SECURITY_RESTRICTED_OPERATION,
 * search_path pg_catalog, pg_temp); false if no row has the key.  *previous:
 * its token before.
 */
bool reset_row(const Reset &r, int64 *previous)
{
	const char *table = relation_display_name(r.rel);
	const char *only = r.rel->rd_rel->relkind == RELKIND_RELATION ? "ONLY " : "";
	const char *token_column = column_name(r.rel, r.fence.token_attnum);
	int nkeys = r.key.count;
	Oid *types = static_cast<Oid *>(palloc(sizeof(Oid) * (nkeys + 1)));
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * (nkeys + 1)));
	types[0] = INT8OID;
	values[0] = Int64GetDatum(r.token);
	for (int i = 0; i < nkeys; i++) {
		types[i + 1] = column_type(r.rel, r.key.attnums[i]);
		values[i + 1] = r.key.values[i];
	}
	StringInfoData select, update;
	initStringInfo(&select);
	appendStringInfo(&select, "SELECT %s FROM %s%s WHERE ", token_column, only, table);
	append_key_match(&select, r.rel, r.pk, r.key, 1);
	appendStringInfoString(&select, " FOR UPDATE");
	initStringInfo(&update);
	appendStringInfo(&update, "UPDATE %s%s SET %s = $1 WHERE ", only, table, token_column);
	append_key_match(&update, r.rel, r.pk, r.key, 2);

	Rights saved = become(relation_owner(RelationGetRelid(r.rel)));
	bool found = with_spi([&] {
		int rc =
		    execute_sql(select.data, nkeys, types + 1, values + 1, InvalidSnapshot, false, false);
		expect_result(rc, SPI_OK_SELECT, "reading the row to reset");
		if (SPI_processed == 0)
			return false;
		bool isnull;
		Datum stored = result_value(0, 1, &isnull);
		*previous = isnull ? 0 : DatumGetInt64(stored);
		auto *write = static_cast<FencedWrite *>(palloc(sizeof(FencedWrite)));
		*write = FencedWrite{RelationGetRelid(r.rel), r.ordered, r.token, false, true,
		                     running_fenced_write};
		running_fenced_write = write;
		PG_TRY();
		{
			rc = execute_sql(update.data, nkeys + 1, types, values, InvalidSnapshot, false, false);
		}
		PG_FINALLY();
		{
			running_fenced_write = write->outer;
		}
		PG_END_TRY();
		if (rc != SPI_OK_UPDATE || SPI_processed != 1)
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("the row to reset in relation \"%s\" was not updated",
			                RelationGetRelationName(r.rel)),
			         errhint("A rule, a BEFORE UPDATE trigger or a row-level security policy "
			                 "for UPDATE skipped it.")));
		return true;
	});
	restore(saved);
	return found;
}

/* "(id)=(101)", or the caller's key argument where row security or privileges hide values. */
const char *describe(const Reset &r, Jsonb *key)
{
	bool isnull[INDEX_MAX_KEYS] = {false};
	const char *text = describe_key(r.rel, r.pk, r.ordered, isnull);
	return text ? text : JsonbToCString(nullptr, &key->root, VARSIZE(key));
}

} // namespace

/*
 * fencing.reset_token(target, key, token) RETURNS bigint: the token the row
 * (or the deleted key's highest mark) had.  Sets the row's token, and every
 * mark of its key, to `token`, lower than before or not.
 */
FENCING_FUNCTION(fencing_reset_token)
{
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key must not be null")));
	Reset r{};
	r.token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	/* The lock an UPDATE takes, after the owner check: no one else queues it. */
	r.rel = open_target(fcinfo, RowExclusiveLock, Target::owned);
	fence_of_table(r.rel, &r.fence);
	check_target(r);
	TableOptions options = options_of(r.rel);
	if (above_ceiling(options, r.token))
		raise_above_ceiling(
		    NamedRelation{r.rel, RelationGetRelationName(r.rel), relation_display_name(r.rel)},
		    r.token, options.max_token, options.enforce);
	require_primary_key(r.rel);
	Bitmapset *key_attrs = RelationGetIndexAttrBitmap(r.rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	Jsonb *key = PG_GETARG_JSONB_P(1);
	r.key = parse_key(r.rel, key_attrs, key);
	r.pk = open_primary_key(r.rel);
	r.ordered = key_in_index_order(r.key, key_attrs, r.pk);

	MarkStore marks = open_mark_store(r.rel, r.fence, CurrentMemoryContext);
	int64 floor = marks.kind->write_floor(&marks);
	if (!token_accepts(Mode::monotonic, floor, r.token))
		refuse_below_floor(r, floor);
	int64 previous = 0;
	bool row = reset_row(r, &previous);
	/* The key's marks, under every relation of the tree and its ancestors. */
	List *relations = list_concat(find_all_inheritors(RelationGetRelid(r.rel), NoLock, nullptr),
	                              partition_ancestors(r.rel));
	bool isnull[INDEX_MAX_KEYS] = {false};
	KeyHash hash = key_identity(r.rel, key_columns(r.pk), r.ordered, isnull);
	int64 marked = marks.kind->reset_marks(&marks, relations, hash, r.token);
	if (!row && marked == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
		                errmsg("no row and no deleted-key mark with key %s in relation \"%s\"",
		                       describe(r, key), RelationGetRelationName(r.rel))));
	int64 high_water = 0;
	if (!row && marks.kind->find_for_table(&marks, hash, &high_water) &&
	    !token_accepts(Mode::monotonic, high_water, r.token))
		refuse_below_floor(r, high_water);
	if (!row)
		previous = marked;
	ereport(LOG,
	        (errmsg("fencing: role \"%s\" reset the token of %s with key %s in relation "
	                "\"%s\" from " INT64_FORMAT " to " INT64_FORMAT,
	                GetUserNameFromId(GetUserId(), false), row ? "the row" : "the deleted key",
	                describe(r, key), qualified_name(RelationGetRelid(r.rel)), previous, r.token)));
	index_close(r.pk, AccessShareLock);
	relation_close(r.rel, NoLock);
	PG_RETURN_INT64(previous);
}
