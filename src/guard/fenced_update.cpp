/*
 * fencing.fenced_update(target, key, token, changes, on_stale): one UPDATE
 * that applies `changes` and advances the token column iff the row's stored
 * token accepts `token`, run with the caller's rights through cached plans.
 */
#include "reporting/rejections.hpp"
#include "guard/decision.hpp"
#include "guard/fenced_write.hpp"
#include "base/spi.hpp"
#include "catalog/citus_names.hpp"
#include "catalog/json_columns.hpp"
#include "catalog/keys.hpp"
#include "legacy/key_text_0_1_0.hpp"
#include "state/mark_store.hpp"
#include "guard/plan_cache.hpp"
#include "reporting/stats.hpp"
#include "state/table_settings.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/transam.h"
#include "access/htup_details.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "utils/syscache.h"
#include "lib/stringinfo.h"
#include "catalog/objectaddress.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rls.h"
}

using namespace fencing;

namespace
{

/* One call's arguments and what they resolve to. */
struct Call {
	Relation rel;
	Bitmapset *key_attrs; /* primary key columns (relcache), offset by FirstLowInvalid... */
	mutable Relation pk;  /* the primary key index, opened only when needed */
	TableSettings fence;
	mutable MarkStore marks; /* where its marks live */
	int64 token;
	bool skip_stale;
	Columns key;     /* in primary key order */
	Jsonb *key_json; /* the caller's key, for messages */
	Columns changes;
};
FENCING_PLAIN_DATA(Call);

/*
 * Does `stored` (the row's token, its key's mark or the table's floor) let
 * the call's token in?  The guard's decision for its UPDATE; max_token is
 * the guard's to check, on the row the UPDATE writes.
 */
bool follows(const Call &call, int64 stored)
{
	WriteFacts f{};
	f.operation = Operation::update;
	f.mode = call.fence.mode;
	f.enforce = true;
	f.has_token = true;
	f.presented = call.token;
	f.stored = stored;
	return decide(f).verdict == Verdict::accept;
}

/* Where a column stands among the key columns (in attnum order), or -1. */
int key_position(const Call &call, AttrNumber attnum)
{
	return fencing::key_position(call.key_attrs, attnum);
}

/* The primary key index, opened on first use (plans, marks and messages need it). */
Relation primary_key(const Call &call)
{
	if (call.pk == nullptr)
		call.pk = open_primary_key(call.rel);
	return call.pk;
}

/* The key values in the primary key index's column order. */
Datum *key_in_index_order(const Call &call)
{
	if (call.key.count == 1)
		return call.key.values; /* one column: the index is not opened */
	return fencing::key_in_index_order(call.key, call.key_attrs, primary_key(call));
}

/* `changes`: any columns but the token column and the key. */
void parse_changes(Call *call, Jsonb *json)
{
	char **names;
	JsonbValue *values;
	int n = object_members(json, "changes", &names, &values);
	alloc_columns(&call->changes, n);
	for (int i = 0; i < n; i++) {
		AttrNumber attnum = named_column(call->rel, names[i]);
		if (attnum == call->fence.token_attnum)
			ereport(ERROR,
			        (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			         errmsg("changes must not name the fencing token column \"%s\"", names[i]),
			         errhint("Pass the token as the token argument.")));
		if (key_position(*call, attnum) >= 0)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("changes must not name primary key column \"%s\"", names[i]),
			                errhint("Name the row in the key argument.")));
		char *text = json_text(values[i], column_type(call->rel, attnum));
		call->changes.attnums[i] = attnum;
		/* JSON null too goes through the input function: a domain checks its constraints. */
		call->changes.values[i] = column_value(call->rel, attnum, text);
		call->changes.nulls[i] = text ? ' ' : 'n';
	}
}

/* "k1" OPERATOR(s.=) $n AND ...: the primary key's own equality, schema-qualified. */
void append_key_match(StringInfo sql, const Call &call, int first_param)
{
	fencing::append_key_match(sql, call.rel, primary_key(call), call.key, first_param);
}

/*
 * UPDATE t SET c1 = $1, ..., tok = $n WHERE <key> AND fencing.token_accepts(tok, $n, strict)
 * and SELECT tok FROM t WHERE <key>.
 */
void prepare_plans(const Call &call, SPIPlanPtr *update, SPIPlanPtr *probe)
{
	const char *table = relation_display_name(call.rel);
	const char *only = call.rel->rd_rel->relkind == RELKIND_RELATION ? "ONLY " : "";
	const char *token_column = column_name(call.rel, call.fence.token_attnum);
	int nchanges = call.changes.count, nkeys = call.key.count;
	Oid *types = static_cast<Oid *>(palloc(sizeof(Oid) * (nchanges + 1 + nkeys)));

	StringInfoData sql;
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s%s SET ", only, table);
	for (int i = 0; i < nchanges; i++) {
		appendStringInfo(&sql, "%s = $%d, ", column_name(call.rel, call.changes.attnums[i]), i + 1);
		types[i] = column_type(call.rel, call.changes.attnums[i]);
	}
	int token_param = nchanges + 1;
	types[nchanges] = INT8OID;
	appendStringInfo(&sql, "%s = $%d WHERE ", token_column, token_param);
	append_key_match(&sql, call, token_param + 1);
	for (int i = 0; i < nkeys; i++)
		types[token_param + i] = column_type(call.rel, call.key.attnums[i]);
	appendStringInfo(&sql, " AND fencing.token_accepts(%s, $%d, %s)", token_column, token_param,
	                 call.fence.mode == Mode::strict ? "true" : "false");
	*update = SPI_prepare(sql.data, token_param + nkeys, types);
	if (*update == nullptr)
		elog(ERROR, "fencing: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));

	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s FROM %s%s WHERE ", token_column, only, table);
	append_key_match(&sql, call, 1);
	*probe = SPI_prepare(sql.data, nkeys, types + token_param);
	if (*probe == nullptr)
		elog(ERROR, "fencing: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
}

/*
 * The plans for this call's shape: from the cache, or freshly prepared and
 * kept, or - while a running call of the same shape uses the cached ones -
 * prepared for this call only (into `local`, freed by SPI_finish).
 */
FencedPlans *plans_for(const Call &call, FencedPlans *local)
{
	int ncolumns = call.key.count + call.changes.count;
	AttrNumber *columns = static_cast<AttrNumber *>(palloc(sizeof(AttrNumber) * ncolumns));
	memcpy(columns, call.key.attnums, sizeof(AttrNumber) * call.key.count);
	memcpy(columns + call.key.count, call.changes.attnums, sizeof(AttrNumber) * call.changes.count);
	PlanShape shape{RelationGetRelid(call.rel),
	                call.fence.token_attnum,
	                call.fence.mode == Mode::strict,
	                call.key.count,
	                call.changes.count,
	                columns};
	FencedPlans *plans = find_plans(shape);
	if (plans == nullptr) {
		SPIPlanPtr update, probe;
		prepare_plans(call, &update, &probe);
		plans = keep_plans(shape, update, probe);
		if (plans == nullptr) {
			*local = FencedPlans{update, probe, 0};
			plans = local;
		}
	}
	return plans;
}

enum class Outcome { applied, stale, missing, skipped };

/* Runs the fenced UPDATE once; on a miss, finds out whether the row is stale or missing. */
Outcome attempt(const Call &call, const FencedPlans &plans, int64 *stored)
{
	int nchanges = call.changes.count, nkeys = call.key.count;
	int nparams = nchanges + 1 + nkeys;
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * nparams));
	char *nulls = static_cast<char *>(palloc(nparams));
	memcpy(values, call.changes.values, sizeof(Datum) * nchanges);
	memcpy(nulls, call.changes.nulls, nchanges);
	values[nchanges] = Int64GetDatum(call.token);
	nulls[nchanges] = ' ';
	memcpy(values + nchanges + 1, call.key.values, sizeof(Datum) * nkeys);
	memcpy(nulls + nchanges + 1, call.key.nulls, nkeys);

	int rc = SPI_execute_plan(plans.update, values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("fenced_update() cannot update relation \"%s\": a rule rewrites its "
		                       "UPDATE",
		                       RelationGetRelationName(call.rel)),
		                errhint("Write to the relation the rule writes to, or with plain SQL.")));
	if (SPI_processed > 0)
		return Outcome::applied;

	rc = SPI_execute_plan(plans.probe, call.key.values, call.key.nulls, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "fencing: probe failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0) {
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		*stored = isnull ? 0 : DatumGetInt64(d);
		/*
		 * The row accepts the token, yet the UPDATE did not change it: it was
		 * inserted after the UPDATE's snapshot, or a trigger or an UPDATE
		 * row security policy skipped it.
		 */
		return follows(call, *stored) ? Outcome::skipped : Outcome::stale;
	}
	/*
	 * No row.  Under row security the row may be one the caller cannot see,
	 * and its marks would tell a hidden deleted key from a missing one.
	 */
	if (check_enable_rls(RelationGetRelid(call.rel), InvalidOid, true) == RLS_ENABLED)
		return Outcome::missing;
	bool isnull[INDEX_MAX_KEYS] = {false};
	KeyHash key =
	    key_identity(call.rel, key_columns(primary_key(call)), key_in_index_order(call), isnull);
	bool marked = call.marks.kind->find_for_table(&call.marks, key, stored);
	if (marked && !follows(call, *stored))
		return Outcome::stale;
	return Outcome::missing;
}

/*
 * "(id)=(101)"; where row security or column privileges hide key values from
 * messages, the caller's own key argument instead.
 */
const char *describe_call_key(const Call &call)
{
	bool isnull[INDEX_MAX_KEYS] = {false};
	const char *text = describe_key(call.rel, primary_key(call), key_in_index_order(call), isnull);
	return text ? text : JsonbToCString(nullptr, &call.key_json->root, VARSIZE(call.key_json));
}

/*
 * Refuses a caller without any UPDATE privilege on the table before taking a
 * lock on it; column privileges are then checked by the UPDATE itself.
 */
void check_update_privilege(Oid relid)
{
	Oid user = GetUserId();
	if (pg_class_aclcheck(relid, user, ACL_UPDATE) == ACLCHECK_OK ||
	    pg_attribute_aclcheck_all(relid, user, ACL_UPDATE, ACLMASK_ANY) == ACLCHECK_OK)
		return;
	aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
	               get_rel_name(relid));
}

void open_target(Call *call, Oid relid)
{
	/*
	 * The UPDATE's own lock, taken first: compact() cannot raise the floor
	 * between the check of it below and the UPDATE.
	 */
	call->rel = try_relation_open(relid, RowExclusiveLock);
	if (call->rel == nullptr)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
		                errmsg("relation with OID %u does not exist", relid)));
	char kind = call->rel->rd_rel->relkind;
	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
		                errmsg("\"%s\" is not a table", RelationGetRelationName(call->rel))));
	require_primary_key(call->rel);
	call->key_attrs = RelationGetIndexAttrBitmap(call->rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	call->pk = nullptr;
	fence_of_table(call->rel, &call->fence);
	call->marks = open_mark_store(call->rel, call->fence, CurrentMemoryContext);
}

} // namespace

FENCING_FUNCTION(fenced_update)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("key must not be null")));
	if (PG_ARGISNULL(3))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("changes must not be null"),
		                errhint("Pass '{}' for no changes.")));
	if (PG_ARGISNULL(4))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("on_stale must not be null")));

	Call call;
	call.token = require_token(PG_GETARG_DATUM(2), PG_ARGISNULL(2), "token");
	char *on_stale = text_to_cstring(PG_GETARG_TEXT_PP(4));
	if (strcmp(on_stale, "error") != 0 && strcmp(on_stale, "skip") != 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("on_stale must be 'error' or 'skip', got '%s'", on_stale)));
	call.skip_stale = strcmp(on_stale, "skip") == 0;

	check_update_privilege(PG_GETARG_OID(0));
	open_target(&call, PG_GETARG_OID(0));
	Jsonb *key = PG_GETARG_JSONB_P(1);
	call.key_json = key;
	call.key = parse_key(call.rel, call.key_attrs, key);
	parse_changes(&call, PG_GETARG_JSONB_P(3));

	/* Below the table's floor (compact()), no row would take it: stale without trying. */
	int64 floor = call.fence.is_protected ? call.marks.kind->write_floor(&call.marks) : 0;
	int64 stored = floor;
	volatile Outcome outcome = Outcome::skipped;
	if (!follows(call, floor)) {
		outcome = Outcome::stale;
	} else {
		with_spi([&]() {
			FencedPlans local;
			FencedPlans *volatile plans = plans_for(call, &local);
			/* The guard takes `call.token` as this row's token, whatever fencing.token holds. */
			auto *write = static_cast<FencedWrite *>(palloc(sizeof(FencedWrite)));
			*write = FencedWrite{
			    RelationGetRelid(call.rel), key_in_index_order(call), call.token, false, false,
			    running_fenced_write};
			/*
			 * On Citus, a call that is its whole statement (SELECT
			 * fencing.fenced_update(...) outside a transaction block) writes as
			 * that UPDATE statement would: in one round trip to the shard's
			 * worker, which commits it there, instead of BEGIN, UPDATE, COMMIT.
			 */
			volatile int alone = call.marks.kind->write_alone(&call.marks, fcinfo->flinfo->fn_expr);
			plans->users++;
			running_fenced_write = write;
			PG_TRY();
			{
				/* A second attempt sees a row inserted after the first one's snapshot. */
				for (int tries = 0; outcome == Outcome::skipped && tries < 2; tries++) {
					write->taken = false;
					outcome = attempt(call, *plans, &stored);
				}
			}
			PG_FINALLY();
			{
				running_fenced_write = write->outer;
				plans->users--;
			}
			PG_END_TRY();
			if (alone >= 0)
				call.marks.kind->write_alone_end(alone);
		});
	}

	if (outcome == Outcome::stale && !call.skip_stale)
		report_stale(call.rel, call.fence.token_attnum, describe_call_key(call), call.fence.mode,
		             call.token, stored);
	if (outcome == Outcome::stale)
		note_rejection(call.rel, nullptr, Rejection::stale, describe_call_key(call), call.token,
		               stored);
	if (outcome == Outcome::skipped)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("row with key %s in relation \"%s\" accepts token " INT64_FORMAT
		                " but was not updated",
		                describe_call_key(call), RelationGetRelationName(call.rel), call.token),
		         errhint("A BEFORE UPDATE trigger returned NULL for it, or a row-level "
		                 "security policy for UPDATE hides it.")));
	if (outcome == Outcome::missing)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
		                errmsg("no row with key %s in relation \"%s\"", describe_call_key(call),
		                       RelationGetRelationName(call.rel))));
	if (call.pk != nullptr)
		index_close(call.pk, AccessShareLock);
	relation_close(call.rel, NoLock);
	PG_RETURN_BOOL(outcome == Outcome::applied);
}
