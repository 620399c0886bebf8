/*
 * fencing.guard(): the row triggers that fencing.protect() installs.
 *
 * BEFORE INSERT OR UPDATE OR DELETE: finds the token a write presents,
 * compares it with the row's stored token, refuses stale and unfenced writes,
 * writes the token into the row and records the mark of a key that goes away.
 *
 * AFTER INSERT OR UPDATE OF <primary key>: compares the token of a key that
 * appears with the mark of its last deletion.  This runs after the unique
 * index check, which waits for any transaction deleting the same key, so the
 * deletion's mark is committed and visible by then.  No extra lock is taken.
 */
#include "errors.hpp"
#include "marks.hpp"
#include "settings.hpp"
#include "table.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "storage/itemptr.h"
#include "storage/proc.h"
#include "nodes/bitmapset.h"
#include "utils/lsyscache.h"
}

using namespace fencing;

namespace
{

/* What one firing needs: the trigger data and the table's settings. */
struct Write {
	TriggerData *trigger;
	Relation rel;
	const TableFence *fence;
	const Bitmapset *key_attrs; /* primary key columns */
};

/*
 * The token of the last UPDATE this backend let through.  PostgreSQL runs an
 * UPDATE that moves a row to another partition as DELETE + INSERT, and the
 * DELETE of that very row version carries no token of its own.
 */
struct {
	LocalTransactionId xact;
	SubTransactionId subxact;
	Oid relid;
	ItemPointerData row;
	int64 token;
} last_update;

void remember_update(Relation rel, HeapTuple row, int64 token)
{
	last_update.xact = MyProc->lxid;
	last_update.subxact = GetCurrentSubTransactionId();
	last_update.relid = RelationGetRelid(rel);
	last_update.row = row->t_self;
	last_update.token = token;
}

/* The token of the UPDATE that is moving `row` out of `rel`, if that is what this DELETE is. */
bool moving_update_token(Relation rel, HeapTuple row, int64 *token)
{
	if (last_update.xact != MyProc->lxid || last_update.subxact != GetCurrentSubTransactionId() ||
	    last_update.relid != RelationGetRelid(rel) ||
	    !ItemPointerEquals(&last_update.row, &row->t_self))
		return false;
	*token = last_update.token;
	last_update.relid = InvalidOid;
	return true;
}

/*
 * The token the last INSERT of this statement presented.  In INSERT ... ON
 * CONFLICT DO UPDATE, the UPDATE of the conflicting row comes right after the
 * proposed row's INSERT trigger, and presents the same token.
 */
struct {
	LocalTransactionId xact;
	SubTransactionId subxact;
	CommandId command;
	Oid relid;
	int64 token;
} last_insert;

void remember_insert(Relation rel, int64 token)
{
	last_insert.xact = MyProc->lxid;
	last_insert.subxact = GetCurrentSubTransactionId();
	last_insert.command = GetCurrentCommandId(false);
	last_insert.relid = RelationGetRelid(rel);
	last_insert.token = token;
}

/* The token of this statement's INSERT into `rel`, for its ON CONFLICT DO UPDATE. */
bool upsert_token(Relation rel, int64 *token)
{
	if (last_insert.xact != MyProc->lxid || last_insert.subxact != GetCurrentSubTransactionId() ||
	    last_insert.command != GetCurrentCommandId(false) ||
	    last_insert.relid != RelationGetRelid(rel))
		return false;
	*token = last_insert.token;
	return true;
}

/* What a firing needs to know of its table, worked out once per statement. */
struct TableInfo {
	Oid trigger_oid;
	TableFence fence;
	Bitmapset *key_attrs;
};

/* The table's settings and key columns, kept in fn_extra for the statement. */
const TableInfo *table_info(FunctionCallInfo fcinfo, TriggerData *trigger)
{
	auto *info = static_cast<TableInfo *>(fcinfo->flinfo->fn_extra);
	if (info == nullptr || info->trigger_oid != trigger->tg_trigger->tgoid) {
		TableFence fence;
		fence_from_trigger(trigger->tg_relation, trigger->tg_trigger, &fence);
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Bitmapset *key_attrs =
		    RelationGetIndexAttrBitmap(trigger->tg_relation, INDEX_ATTR_BITMAP_PRIMARY_KEY);
		info = static_cast<TableInfo *>(palloc(sizeof(TableInfo)));
		MemoryContextSwitchTo(old);
		info->trigger_oid = trigger->tg_trigger->tgoid;
		info->fence = fence;
		info->key_attrs = key_attrs;
		fcinfo->flinfo->fn_extra = info;
	}
	return info;
}

/* "(id)=(101)" for a row, for error messages only. */
const char *describe_row(Relation rel, HeapTuple row)
{
	if (!OidIsValid(RelationGetPrimaryKeyIndex(rel)))
		return "(no primary key)";
	Relation pk = open_primary_key(rel);
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(rel, pk, row, values, isnull);
	const char *text = describe_key(pk, values, isnull);
	index_close(pk, AccessShareLock);
	return text;
}

/* The mark key of a row. */
MarkKey row_mark_key(Relation rel, HeapTuple row)
{
	Relation pk = open_primary_key(rel);
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(rel, pk, row, values, isnull);
	MarkKey key = mark_key(rel, pk, values, isnull);
	index_close(pk, AccessShareLock);
	return key;
}

/* The token from fencing.token, or FN002. */
int64 token_from_setting(const Write &w, HeapTuple row, const char *operation, int64 stored)
{
	int64 token;
	if (!session_token(&token))
		report_missing(w.rel, describe_row(w.rel, row), operation, stored);
	return token;
}

/* Refuses `presented` unless the table's mode accepts it over `stored`. */
void check(const Write &w, HeapTuple row, int64 presented, int64 stored)
{
	if (!token_accepts(w.fence->mode, stored, presented))
		report_stale(w.rel, describe_row(w.rel, row), w.fence->mode, presented, stored);
}

/* A key about to disappear (DELETE, or UPDATE away from it): its mark outlives the row. */
void remember_deleted_key(const Write &w, HeapTuple row, int64 presented)
{
	record_mark(row_mark_key(w.rel, row), presented);
}

/* Writes `token` into the row's token column. */
HeapTuple with_token(const Write &w, HeapTuple row, int64 token)
{
	int column = w.fence->token_attnum;
	Datum value = Int64GetDatum(token);
	bool isnull = false;
	return heap_modify_tuple_by_cols(row, RelationGetDescr(w.rel), 1, &column, &value, &isnull);
}

Datum guard_insert(const Write &w)
{
	HeapTuple row = w.trigger->tg_trigtuple;
	bool isnull;
	Datum value = heap_getattr(row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
	bool explicit_token = !isnull && DatumGetInt64(value) != 0;
	int64 presented = explicit_token ? require_token(value, false, "fencing token")
	                                 : token_from_setting(w, row, "INSERT", 0);
	remember_insert(w.rel, presented);
	return PointerGetDatum(explicit_token ? row : with_token(w, row, presented));
}

/* Do two rows have the same primary key values (by their text)? */
bool same_key(Relation rel, HeapTuple a, HeapTuple b)
{
	MarkKey ka = row_mark_key(rel, a);
	MarkKey kb = row_mark_key(rel, b);
	return ARR_SIZE(ka.key) == ARR_SIZE(kb.key) && memcmp(ka.key, kb.key, ARR_SIZE(ka.key)) == 0;
}

Datum guard_update(const Write &w)
{
	HeapTuple old_row = w.trigger->tg_trigtuple;
	HeapTuple new_row = w.trigger->tg_newtuple;
	const Bitmapset *updated = w.trigger->tg_updatedcols;
	int64 stored = stored_token(w.rel, old_row, w.fence->token_attnum);
	bool assigned =
	    bms_is_member(w.fence->token_attnum - FirstLowInvalidHeapAttributeNumber, updated);
	int64 presented;
	if (assigned) {
		bool isnull;
		Datum value =
		    heap_getattr(new_row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
		presented = require_token(value, isnull, "fencing token");
	} else if (!session_token(&presented) && !upsert_token(w.rel, &presented))
		presented = token_from_setting(w, old_row, "UPDATE", stored);
	check(w, old_row, presented, stored);
	if (bms_overlap(w.key_attrs, updated) && !same_key(w.rel, old_row, new_row))
		remember_deleted_key(w, old_row, presented);
	remember_update(w.rel, old_row, presented);
	return PointerGetDatum(assigned ? new_row : with_token(w, new_row, presented));
}

Datum guard_delete(const Write &w)
{
	HeapTuple row = w.trigger->tg_trigtuple;
	int64 stored = stored_token(w.rel, row, w.fence->token_attnum);
	int64 presented;
	if (!moving_update_token(w.rel, row, &presented))
		presented = token_from_setting(w, row, "DELETE", stored);
	check(w, row, presented, stored);
	remember_deleted_key(w, row, presented);
	return PointerGetDatum(row);
}

/*
 * AFTER INSERT, or UPDATE of the key: the row's key may have been deleted
 * under a newer token than the one the row now holds.
 */
Datum guard_new_key(const Write &w)
{
	bool update = TRIGGER_FIRED_BY_UPDATE(w.trigger->tg_event);
	HeapTuple row = update ? w.trigger->tg_newtuple : w.trigger->tg_trigtuple;
	if (update && same_key(w.rel, w.trigger->tg_trigtuple, row))
		return PointerGetDatum(nullptr);
	int64 presented = stored_token(w.rel, row, w.fence->token_attnum);
	int64 mark;
	if (find_mark(row_mark_key(w.rel, row), &mark))
		check(w, row, presented, mark);
	return PointerGetDatum(nullptr);
}

/* Refuses to run as anything but the row triggers fencing.protect() installs. */
void check_trigger_call(FunctionCallInfo fcinfo)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing.guard: not called by trigger manager")));
	auto *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	if (!TRIGGER_FIRED_FOR_ROW(trigger->tg_event))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing.guard: must be fired for each row")));
	if (TRIGGER_FIRED_INSTEAD(trigger->tg_event) ||
	    (TRIGGER_FIRED_AFTER(trigger->tg_event) && TRIGGER_FIRED_BY_DELETE(trigger->tg_event)))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing.guard: must be fired BEFORE INSERT, UPDATE or DELETE, or "
		                       "AFTER INSERT or UPDATE")));
}

} // namespace

FENCING_FUNCTION(guard)
{
	check_trigger_call(fcinfo);
	auto *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	const TableInfo *info = table_info(fcinfo, trigger);
	Write w{trigger, trigger->tg_relation, &info->fence, info->key_attrs};
	if (TRIGGER_FIRED_AFTER(trigger->tg_event))
		return guard_new_key(w);
	if (TRIGGER_FIRED_BY_INSERT(trigger->tg_event))
		return guard_insert(w);
	if (TRIGGER_FIRED_BY_UPDATE(trigger->tg_event))
		return guard_update(w);
	if (TRIGGER_FIRED_BY_DELETE(trigger->tg_event))
		return guard_delete(w);
	ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
	                errmsg("fencing.guard: must be fired for INSERT, UPDATE or DELETE")));
	pg_unreachable();
}
