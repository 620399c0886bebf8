/*
 * fencing.guard(): the triggers that fencing.protect() installs.
 *
 * BEFORE INSERT OR UPDATE OR DELETE, for each row: finds the token the write
 * presents, compares it with the row's stored token, refuses stale and
 * unfenced writes, writes the token into the row and records the mark of a
 * deleted key.
 *
 * AFTER INSERT, and AFTER UPDATE when the key changed: records the mark of
 * the key that went away and compares the new key with its high-water mark
 * (its deletions and the table's floor).  This runs after the unique index
 * check, which waits for any transaction deleting the same key, so that
 * deletion's mark is committed and visible by then.  No extra lock is taken.
 *
 * BEFORE TRUNCATE: the statement presents a token as a DELETE of every row
 * would, and leaves the table a floor that every new key must follow.
 */
#include "base/compat.hpp"
#include "catalog/citus_names.hpp"
#include "reporting/rejections.hpp"
#include "legacy/guard_0_1_0.hpp"
#include "guard/fenced_write.hpp"
#include "catalog/keys.hpp"
#include "legacy/key_text_0_1_0.hpp"
#include "state/mark_store.hpp"
#include "state/registry.hpp"
#include "state/token_setting.hpp"
#include "guard/maintenance.hpp"
#include "reporting/rollout.hpp"
#include "state/maintenance_setting.hpp"
#include "reporting/stats.hpp"
#include "state/table_options.hpp"
#include "state/table_settings.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
}

#include <algorithm>

using namespace fencing;

namespace
{

struct TableInfo;

/*
 * A token that one firing of the BEFORE trigger lends to the next firing of
 * the same trigger on the same result relation, while the executor is still
 * on the same input row: the lend lives in the per-tuple memory that the
 * executor resets before the next row, and the next firing takes it, whatever
 * it is.  Only two statement shapes make such a pair, and the borrower checks
 * that it is the one it expects:
 *  - INSERT ... ON CONFLICT DO UPDATE: the UPDATE of the conflicting row
 *    follows the INSERT of the proposed row, and may present its token if
 *    both rows have the same primary key;
 *  - an UPDATE that moves a row to another partition: the DELETE of that very
 *    row version follows its UPDATE and presents the UPDATE's token.
 * Any other write - another row, another statement (CTEs included), another
 * result relation, a nested statement - finds no lend and presents only its
 * own token.
 */
struct Lend {
	TableInfo *owner;
	MemoryContextCallback forget; /* clears owner->lend when the row's memory goes */
	bool from_insert;             /* the proposed row of an INSERT, or an UPDATE */
	bool reported; /* report-only or maintenance: the write kept the stored token (or mark) */
	int64 token;
	ItemPointerData row;       /* UPDATE: the row version being updated */
	Datum key[INDEX_MAX_KEYS]; /* INSERT: the proposed key, copied into per-tuple memory */
	bool key_isnull[INDEX_MAX_KEYS];
};
FENCING_PLAIN_DATA(Lend);

/* What a trigger needs to know of its table, worked out once per statement (fn_extra). */
struct TableInfo {
	Oid trigger_oid;
	TableSettings fence;
	TableOptions options; /* report-only, max_token */
	KeyColumns key;
	MarkStore marks;         /* where marks of this relation's keys live, and its floor */
	PendingCount *counter;   /* its accepted writes, for fencing.stats */
	bool key_changes_unseen; /* other BEFORE UPDATE row triggers, key check without WHEN */
	Lend *lend;
};
FENCING_PLAIN_DATA(TableInfo);

void forget_lend(void *arg)
{
	auto *lend = static_cast<Lend *>(arg);
	if (lend->owner->lend == lend)
		lend->owner->lend = nullptr;
}

/* Lends `token` to the next firing on this trigger, for this input row only. */
Lend *lend_next(TableInfo *info, bool from_insert, int64 token)
{
	auto *lend = static_cast<Lend *>(palloc(sizeof(Lend)));
	lend->owner = info;
	lend->from_insert = from_insert;
	lend->reported = false;
	lend->token = token;
	lend->forget.func = forget_lend;
	lend->forget.arg = lend;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &lend->forget);
	info->lend = lend;
	return lend;
}

/*
 * Can another BEFORE UPDATE row trigger change a row's key where the guard's
 * AFTER UPDATE trigger does not look?  That trigger is AFTER UPDATE OF the
 * key columns unless the table has other BEFORE UPDATE row triggers, and then
 * AFTER UPDATE WHEN the key changed (fencing_internal._guard_key_changes(), kept so by
 * protect() and the event trigger on CREATE TRIGGER).  A trigger created
 * where the event trigger did not fire leaves the cheap form in place; a
 * partition being detached concurrently may have lost the trigger.
 */
bool key_changes_unseen(TriggerData *trigger)
{
	const TriggerDesc *triggers = trigger->tg_relation->trigdesc;
	/* On a Citus shard, with a suffix; 0.1.0's objects named it otherwise. */
	const char *name = key_changes_trigger_0_1_0("fencing_guard_key_changes");
	bool others = false, checked = false, when = false;
	for (int i = 0; triggers != nullptr && i < triggers->numtriggers; i++) {
		const Trigger &t = triggers->triggers[i];
		if (t.tgfoid != trigger->tg_trigger->tgfoid)
			others |= TRIGGER_TYPE_MATCHES(t.tgtype, TRIGGER_TYPE_ROW, TRIGGER_TYPE_BEFORE,
			                               TRIGGER_TYPE_UPDATE);
		else if (TRIGGER_TYPE_MATCHES(t.tgtype, TRIGGER_TYPE_ROW, TRIGGER_TYPE_AFTER,
		                              TRIGGER_TYPE_UPDATE) &&
		         strncmp(t.tgname, name, strlen(name)) == 0) {
			checked = true;
			when |= t.tgqual != nullptr;
		}
	}
	return !checked || (others && !when);
}

/*
 * A Citus shard of a table protected before Citus distributed it: its marks
 * would stay behind when the shard moves.
 */
[[noreturn]] void refuse_distributed_after_protect(const char *qualified, const char *name)
{
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("relation \"%s\" was distributed by Citus after it was protected", name),
	         errdetail("Its deleted-key marks would not move with its shards."),
	         errhint("Run SELECT fencing.protect(%s) again.", quote_literal_cstr(qualified))));
}

/*
 * A guard trigger on a relation the registry does not protect: only a Citus
 * shard's copy of its table's guard goes on (with the settings Citus copied:
 * on a worker the registry, which lives on the coordinator, has no row for
 * it); any other refuses every write, whoever made it.
 */
void fence_of_unprotected(TriggerData *trigger, TableSettings *fence)
{
	const char *qualified, *name;
	bool hash = false;
	if (citus_loaded() && trigger->tg_trigger->tgnargs == 3) {
		fence_from_arguments(trigger->tg_relation, trigger->tg_trigger, fence);
		if (marks_id_recorded(trigger->tg_relation, *fence))
			return;
		/*
		 * A marks id that protect() did not record for this relation's
		 * table: a copy of another table's guard, or a guard whose table
		 * Citus' metadata here does not show.  It acts on nothing.
		 */
		ereport(
		    ERROR,
		    (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		     errmsg("trigger \"%s\" on relation \"%s\" was not installed by fencing.protect()",
		            trigger->tg_trigger->tgname, RelationGetRelationName(trigger->tg_relation)),
		     errdetail("Its marks id " INT64_FORMAT " is not the one fencing.protect() recorded "
		               "for the relation's distributed table.",
		               fence->citus_id),
		     errhint("Drop the trigger, or run fencing.protect() on the distributed table.")));
	}
	/* Two arguments: a table protected before Citus distributed it (see table_info()). */
	if (citus_loaded() && citus_logical_name(trigger->tg_relation, &qualified, &name, &hash)) {
		fence_from_arguments(trigger->tg_relation, trigger->tg_trigger, fence);
		return;
	}
	/*
	 * create_distributed_table() of a table protected while local: Citus
	 * copies the rows into the new shards over connections of its own, which
	 * may not see the shard's metadata that the same distributed transaction
	 * wrote over another (Citus 14 opens one per shard placement); the shard's
	 * and the trigger's names, and the guard's two arguments (a table
	 * protected as distributed has three), tell what it is.
	 */
	if (trigger->tg_trigger->tgnargs == 2 &&
	    citus_shard_named(trigger->tg_relation, trigger->tg_trigger, &qualified, &name))
		refuse_distributed_after_protect(qualified, name);
	ereport(ERROR,
	        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	         errmsg("relation \"%s\" is not protected by fencing.protect()",
	                RelationGetRelationName(trigger->tg_relation)),
	         errdetail("Its trigger \"%s\" calls fencing.guard(), which guards only the tables "
	                   "fencing.protect() registered.",
	                   trigger->tg_trigger->tgname),
	         errhint("Drop the trigger, or run fencing.protect() on the table.")));
}

/* The settings and key columns of the trigger's table, kept in fn_extra for the statement. */
TableInfo *table_info(FunctionCallInfo fcinfo, TriggerData *trigger)
{
	auto *info = static_cast<TableInfo *>(fcinfo->flinfo->fn_extra);
	if (info == nullptr || info->trigger_oid != trigger->tg_trigger->tgoid) {
		TableSettings fence;
		if (!fence_from_trigger(trigger->tg_relation, trigger->tg_trigger, &fence))
			fence_of_unprotected(trigger, &fence);
		KeyColumns key = primary_key_columns(trigger->tg_relation);
		info = static_cast<TableInfo *>(
		    MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(TableInfo)));
		info->trigger_oid = trigger->tg_trigger->tgoid;
		info->fence = fence;
		info->options = options_of(trigger->tg_relation);
		info->key = key;
		info->counter = relation_counter(trigger->tg_relation);
		info->key_changes_unseen = key_changes_unseen(trigger);
		info->marks = open_mark_store(trigger->tg_relation, fence, fcinfo->flinfo->fn_mcxt);
		const char *qualified, *name;
		if (marks_left_behind(trigger->tg_relation, fence, &qualified, &name))
			refuse_distributed_after_protect(qualified, name);
		fcinfo->flinfo->fn_extra = info;
	}
	return info;
}

/* What one firing needs: the trigger data and the table's settings. */
struct Write {
	TriggerData *trigger;
	Relation rel;
	TableInfo *info;
	const TableSettings *fence;
};
FENCING_PLAIN_DATA(Write);

/* "(id)=(101)" for a row, for error messages only; NULL if the user may not see it. */
const char *describe_row(Relation rel, HeapTuple row)
{
	if (!OidIsValid(fencing::primary_key_index(rel)))
		return "(no primary key)";
	Relation pk = open_primary_key(rel);
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(rel, key_columns(pk), row, values, isnull);
	const char *text = describe_key(rel, pk, values, isnull);
	index_close(pk, AccessShareLock);
	return text;
}

/* A stored token as a message may show it: not to a user who may not read the token column. */
int64 shown(Relation rel, AttrNumber token_attnum, int64 stored)
{
	return may_read(rel, 1, &token_attnum) ? stored : hidden_token;
}

/*
 * The token from fencing.token, or 23T02.  Without one, a maintenance write
 * (guard/maintenance.hpp) goes on, and a report-only guard reports the
 * write; both return false (the write keeps the stored token), counted as
 * accepted.
 */
bool token_from_setting(const Write &w, HeapTuple row, const char *operation, int64 stored,
                        int64 *token)
{
	if (session_token(token))
		return true;
	count_accepted(w.info->counter);
	if (maintenance_requested() &&
	    maintenance_write(w.rel, w.info->options, w.fence->mode, describe_row(w.rel, row),
	                      shown(w.rel, w.fence->token_attnum, stored)))
		return false;
	if (w.info->options.enforce)
		report_missing(w.rel, w.fence->token_attnum, describe_row(w.rel, row), operation,
		               shown(w.rel, w.fence->token_attnum, stored));
	note_reported(w.rel, w.info->options.relid, Unfenced::missing, describe_row(w.rel, row),
	              w.fence->mode, 0, shown(w.rel, w.fence->token_attnum, stored));
	return false;
}

/* Refuses (22023) a token above the table's max_token, in both modes. */
void refuse_above_ceiling(const Write &w, HeapTuple row, int64 presented)
{
	if (above_ceiling(w.info->options, presented))
		report_above_ceiling(w.rel, describe_row(w.rel, row), presented, w.info->options.max_token,
		                     w.info->options.enforce);
}

/*
 * Refuses `presented` unless the table's mode accepts it over `stored` (and
 * its max_token); counts it if accepted.  A report-only guard reports a
 * stale token instead and returns false: the write keeps the stored token.
 */
bool check(const Write &w, HeapTuple row, int64 presented, int64 stored)
{
	refuse_above_ceiling(w, row, presented);
	bool accepted = token_accepts(w.fence->mode, stored, presented);
	if (!accepted && w.info->options.enforce)
		report_stale(w.rel, w.fence->token_attnum, describe_row(w.rel, row), w.fence->mode,
		             presented, shown(w.rel, w.fence->token_attnum, stored));
	if (!accepted)
		note_reported(w.rel, w.info->options.relid, Unfenced::stale, describe_row(w.rel, row),
		              w.fence->mode, presented, shown(w.rel, w.fence->token_attnum, stored));
	count_accepted(w.info->counter);
	return accepted;
}

/*
 * The stored token a write must follow: the row's, or the table's floor if
 * that is higher (compact() raised it over rows it left in place).
 */
int64 bar(const Write &w, int64 stored)
{
	MarkStore *marks = &w.info->marks;
	return std::max(stored, marks->kind->write_floor(marks));
}

/*
 * Records that `row`'s key went away under `token`.  Token 0 (a row never
 * written with a token, deleted by a report-only guard or a maintenance
 * write, which keep the stored token) leaves no mark: a key without one
 * already takes any token.
 */
void mark_deleted(const Write &w, HeapTuple row, const KeyHash &key, int64 token)
{
	if (token <= 0)
		return;
	w.info->marks.kind->record(&w.info->marks, row, key, token);
}

/* The high-water mark a new row with `key` must follow; false if none. */
bool high_water(const Write &w, const KeyHash &key, int64 *mark)
{
	return w.info->marks.kind->find(&w.info->marks, key, mark);
}

/* Writes `token` into the row's token column. */
HeapTuple with_token(const Write &w, HeapTuple row, int64 token)
{
	int column = w.fence->token_attnum;
	Datum value = Int64GetDatum(token);
	bool isnull = false;
	return heap_modify_tuple_by_cols(row, RelationGetDescr(w.rel), 1, &column, &value, &isnull);
}

/* Is `row`'s key the key the upsert proposed? */
bool proposed_key(const Write &w, const Lend &lend, HeapTuple row)
{
	Datum values[INDEX_MAX_KEYS];
	bool isnull[INDEX_MAX_KEYS];
	key_values(w.rel, w.info->key, row, values, isnull);
	return key_identity(w.rel, w.info->key, values, isnull) ==
	       key_identity(w.rel, w.info->key, lend.key, lend.key_isnull);
}

/*
 * Is this the row that the running fenced_update() is writing, assigning its
 * token argument `assigned`?  Taken once: no other row and no other write
 * (a statement that a trigger of that UPDATE runs, say) passes for it.
 */
bool fenced_update_row(const Write &w, HeapTuple old_row, int64 assigned)
{
	FencedWrite *write = running_fenced_write;
	if (write == nullptr || write->taken || write->token != assigned)
		return false;
	if (RelationGetRelid(w.rel) != write->relid &&
	    !list_member_oid(partition_ancestors(w.rel), write->relid))
		return false;
	bool isnull[INDEX_MAX_KEYS] = {false};
	if (!(key_identity(w.rel, w.info->key, write->key, isnull) ==
	      row_key_identity(w.rel, w.info->key, old_row)))
		return false;
	write->taken = true;
	return true;
}

/*
 * Is this the row whose token reset_token() sets, to the value `new_row`
 * assigns?  Then that value stands, lower than the stored one or not.
 */
bool reset_token_row(const Write &w, HeapTuple old_row, HeapTuple new_row)
{
	FencedWrite *write = running_fenced_write;
	if (write == nullptr || !write->resets)
		return false;
	bool isnull;
	Datum value = heap_getattr(new_row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
	return !isnull && fenced_update_row(w, old_row, DatumGetInt64(value));
}

/*
 * The token of an UPDATE that assigns the token column (docs/design.md).  Without
 * fencing.token it is the assigned value.  With it, the value the row
 * already has is no token (an ORM writes back every column it loaded): the
 * transaction's token applies; the transaction's token is that token; any
 * other value is a second token in one write, refused - as stale if the
 * transaction's token cannot follow the row's (`follow`, see bar()): an ORM's stale save
 * writes back a value it loaded before the newer holder wrote, and must be
 * told what matters, that its lock is lost.  fenced_update()'s own row
 * presents its token argument.
 */
int64 assigned_token(const Write &w, HeapTuple old_row, HeapTuple new_row, int64 follow)
{
	TupleDesc desc = RelationGetDescr(w.rel);
	AttrNumber column = w.fence->token_attnum;
	bool isnull, stored_isnull;
	Datum value = heap_getattr(new_row, column, desc, &isnull);
	int64 transaction;
	if (!session_token(&transaction))
		return require_token(value, isnull, "fencing token");
	if (!isnull && fenced_update_row(w, old_row, DatumGetInt64(value)))
		return require_token(value, isnull, "fencing token");
	Datum stored = heap_getattr(old_row, column, desc, &stored_isnull);
	if (isnull ? stored_isnull : !stored_isnull && DatumGetInt64(value) == DatumGetInt64(stored))
		return transaction;
	int64 assigned = require_token(value, isnull, "fencing token");
	if (assigned == transaction || !token_accepts(w.fence->mode, follow, transaction))
		return transaction;
	report_two_tokens(w.rel, describe_row(w.rel, old_row),
	                  NameStr(TupleDescAttr(desc, column - 1)->attname), assigned, transaction,
	                  shown(w.rel, column, stored_token(w.rel, old_row, column)));
}

/*
 * A report-only guard's INSERT, or a maintenance write's: the token the row
 * gets.  A row without a token (reported or maintained already), or with one
 * that its key's mark or the table's floor would refuse (reported here),
 * takes that mark: no key's token goes down.  The AFTER trigger then takes
 * it as it is, and looks only for a DELETE that raced it.
 */
int64 reported_insert(const Write &w, HeapTuple row, bool carries, int64 presented)
{
	int64 mark = 0;
	KeyHash key = row_key_identity(w.rel, w.info->key, row);
	(void)high_water(w, key, &mark);
	int64 follow = bar(w, mark);
	if (carries && token_accepts(w.fence->mode, follow, presented))
		return presented;
	if (carries)
		note_reported(w.rel, w.info->options.relid, Unfenced::stale, describe_row(w.rel, row),
		              w.fence->mode, presented, shown(w.rel, w.fence->token_attnum, follow));
	/* Only a mode that refuses a token equal to the mark needs the AFTER trigger told. */
	if (follow > 0 && !token_accepts(w.fence->mode, follow, follow))
		note_kept_insert(RelationGetRelid(w.rel), key, follow);
	return follow;
}

Datum guard_insert(const Write &w)
{
	HeapTuple row = w.trigger->tg_trigtuple;
	bool isnull;
	Datum value = heap_getattr(row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
	bool explicit_token = !isnull && DatumGetInt64(value) != 0;
	int64 presented = 0;
	bool carries = explicit_token ? (presented = require_token(value, false, "fencing token"), true)
	                              : token_from_setting(w, row, "INSERT", 0, &presented);
	if (carries) {
		refuse_above_ceiling(w, row, presented);
		count_accepted(w.info->counter);
	}
	int64 kept = carries && w.info->options.enforce ? presented
	                                                : reported_insert(w, row, carries, presented);
	/*
	 * For ON CONFLICT DO UPDATE: the key this row proposes, should it
	 * conflict; a row reported (or maintained) here is so for its UPDATE too,
	 * which keeps the stored token and is not counted again.
	 */
	Lend *lend = lend_next(w.info, true, presented);
	lend->reported = kept != presented || !carries;
	TupleDesc desc = RelationGetDescr(w.rel);
	key_values(w.rel, w.info->key, row, lend->key, lend->key_isnull);
	for (int i = 0; i < w.info->key.count; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, w.info->key.attnums[i] - 1);
		if (!lend->key_isnull[i])
			lend->key[i] = datumCopy(lend->key[i], att->attbyval, att->attlen);
	}
	if (lend->reported)
		return PointerGetDatum(with_token(w, row, kept));
	return PointerGetDatum(explicit_token ? row : with_token(w, row, presented));
}

Datum guard_update(const Write &w, const Lend *taken)
{
	if (w.info->key_changes_unseen)
		ereport(ERROR,
		        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		         errmsg("the guard of relation \"%s\" does not check every key change",
		                RelationGetRelationName(w.rel)),
		         errdetail("Its AFTER UPDATE trigger fencing_guard_key_changes is missing, or "
		                   "does not see keys changed by the relation's other BEFORE UPDATE "
		                   "triggers (created where the extension's event trigger did not fire, "
		                   "such as under session_replication_role = replica)."),
		         errhint("Run fencing.protect() on the protected table again with its token "
		                 "column, its mode and %s.",
		                 protect_options_text(options_of(w.rel)))));
	HeapTuple old_row = w.trigger->tg_trigtuple;
	HeapTuple new_row = w.trigger->tg_newtuple;
	bool assigned = bms_is_member(w.fence->token_attnum - FirstLowInvalidHeapAttributeNumber,
	                              w.trigger->tg_updatedcols);
	if (assigned && reset_token_row(w, old_row, new_row))
		return PointerGetDatum(new_row);
	int64 stored = bar(w, stored_token(w.rel, old_row, w.fence->token_attnum));
	int64 presented;
	bool valid = true;
	if (assigned) {
		presented = assigned_token(w, old_row, new_row, stored);
	} else if (!session_token(&presented)) {
		if (taken != nullptr && taken->from_insert && proposed_key(w, *taken, old_row)) {
			presented = taken->token;
			/* The upsert's INSERT reported (or maintained) this write already. */
			if (taken->reported) {
				count_accepted(w.info->counter);
				valid = false;
			}
		} else {
			valid = token_from_setting(w, old_row, "UPDATE", stored, &presented);
		}
	}
	/* Report-only or maintenance: a write enforcement would refuse keeps the stored token. */
	bool kept = !valid || !check(w, old_row, presented, stored);
	if (kept)
		presented = stored;
	/* Should the row move to another partition, its DELETE half presents this token. */
	if (w.rel->rd_rel->relispartition) {
		Lend *lend = lend_next(w.info, false, presented);
		lend->row = old_row->t_self;
		lend->reported = kept;
	}
	/* An assigned token column keeps its value unless fencing.token overrode a write-back. */
	bool isnull;
	Datum value = heap_getattr(new_row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
	bool carries = assigned && !isnull && DatumGetInt64(value) == presented;
	return PointerGetDatum(carries ? new_row : with_token(w, new_row, presented));
}

Datum guard_delete(const Write &w, const Lend *taken)
{
	HeapTuple row = w.trigger->tg_trigtuple;
	int64 stored = bar(w, stored_token(w.rel, row, w.fence->token_attnum));
	int64 presented;
	bool valid = true;
	if (taken != nullptr && !taken->from_insert &&
	    ItemPointerEquals(const_cast<ItemPointer>(&taken->row), &row->t_self))
		presented = taken->token;
	else
		valid = token_from_setting(w, row, "DELETE", stored, &presented);
	/* Report-only or maintenance: the mark keeps the stored token (so did a moved row's UPDATE
	 * half). */
	if (!valid ||
	    (taken != nullptr && !taken->from_insert && taken->reported && presented == stored) ||
	    !check(w, row, presented, stored))
		presented = stored;
	mark_deleted(w, row, row_key_identity(w.rel, w.info->key, row), presented);
	return PointerGetDatum(row);
}

/*
 * AFTER INSERT, or UPDATE that changed the key: the key that went away keeps
 * the write's token as its mark, and the new key must follow its own.
 */
Datum guard_new_key(const Write &w)
{
	bool update = TRIGGER_FIRED_BY_UPDATE(w.trigger->tg_event);
	HeapTuple row = update ? w.trigger->tg_newtuple : w.trigger->tg_trigtuple;
	int64 presented = stored_token(w.rel, row, w.fence->token_attnum);
	KeyHash key = row_key_identity(w.rel, w.info->key, row);
	if (update) {
		KeyHash old_key = row_key_identity(w.rel, w.info->key, w.trigger->tg_trigtuple);
		if (old_key == key)
			return PointerGetDatum(nullptr);
		mark_deleted(w, w.trigger->tg_trigtuple, old_key, presented);
	}
	int64 mark;
	/*
	 * A row that kept its key's mark (reported_insert()) has exactly that
	 * mark.  A higher one is a DELETE's that the unique check waited for
	 * after the BEFORE trigger read the mark: the row would stay below it,
	 * so it is refused, as stale when enforcing, and in report-only mode
	 * (whose writes never lower a token) as a serialization failure; the
	 * retry takes the new mark.
	 */
	if (high_water(w, key, &mark) && !token_accepts(w.fence->mode, mark, presented) &&
	    !(take_kept_insert(RelationGetRelid(w.rel), key, presented) && mark == presented)) {
		if (w.info->options.enforce)
			report_stale(w.rel, w.fence->token_attnum, describe_row(w.rel, row), w.fence->mode,
			             presented, shown(w.rel, w.fence->token_attnum, mark));
		report_mark_moved(w.rel, describe_row(w.rel, row),
		                  shown(w.rel, w.fence->token_attnum, presented),
		                  shown(w.rel, w.fence->token_attnum, mark));
	}
	return PointerGetDatum(nullptr);
}

/*
 * BEFORE TRUNCATE: a DELETE of every row under fencing.token, then a floor.
 * Each relation that TRUNCATE empties fires its own trigger (protect() and
 * the partition event trigger give every partition one), and checks its own
 * rows.  On a relation that is no longer protected (a detached partition
 * keeps its statement trigger but loses the cloned row triggers) it does
 * nothing.
 */
Datum guard_truncate(TriggerData *trigger)
{
	Relation rel = trigger->tg_relation;
	TableSettings fence;
	if (!find_guard(rel, &fence)) {
		/*
		 * A partition detached from a protected table, or a table no longer
		 * protected, may keep its TRUNCATE trigger: the registry still
		 * knows it (unprotected), and it guards nothing any more.
		 */
		if (registered(rel))
			return PointerGetDatum(nullptr);
		fence_of_unprotected(trigger, &fence);
	}
	int64 presented;
	/*
	 * On a Citus distributed table this is its shell, whose rows are in the
	 * shards (which have no TRUNCATE trigger of their own): its store reads
	 * them through Citus.
	 */
	MarkStore marks = open_mark_store(rel, fence, CurrentMemoryContext);
	TableOptions options = options_of(rel);
	bool valid = session_token(&presented);
	int64 stored = marks.kind->truncate_bar(&marks, fence.token_attnum);
	bool maintained = !valid && maintenance_requested() &&
	                  maintenance_write(rel, options, fence.mode, all_rows,
	                                    shown(rel, fence.token_attnum, stored));
	if (!valid && !maintained && options.enforce)
		report_missing(
		    rel, fence.token_attnum, all_rows, "TRUNCATE",
		    shown(rel, fence.token_attnum, marks.kind->truncate_shown(&marks, fence.token_attnum)));
	if (valid && above_ceiling(options, presented))
		report_above_ceiling(rel, all_rows, presented, options.max_token, options.enforce);
	bool accepted = valid && token_accepts(fence.mode, stored, presented);
	if (!accepted && !maintained && options.enforce)
		report_stale(rel, fence.token_attnum, all_rows, fence.mode, presented,
		             shown(rel, fence.token_attnum, stored));
	/* Report-only or maintenance: the floor keeps the highest stored token. */
	if (!accepted && !maintained)
		note_reported(rel, options.relid, valid ? Unfenced::stale : Unfenced::missing, all_rows,
		              fence.mode, presented, shown(rel, fence.token_attnum, stored));
	if (!accepted)
		presented = stored;
	if (presented > 0)
		marks.kind->raise_truncate_floor(&marks, presented);
	count_accepted(relation_counter(rel));
	return PointerGetDatum(nullptr);
}

/* Refuses to run as anything but the triggers fencing.protect() installs. */
void check_trigger_call(FunctionCallInfo fcinfo)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing.guard: not called by trigger manager")));
	TriggerEvent event = reinterpret_cast<TriggerData *>(fcinfo->context)->tg_event;
	bool before = TRIGGER_FIRED_BEFORE(event), row = TRIGGER_FIRED_FOR_ROW(event);
	bool truncate = TRIGGER_FIRED_BY_TRUNCATE(event), remove = TRIGGER_FIRED_BY_DELETE(event);
	if (TRIGGER_FIRED_INSTEAD(event) ||
	    (truncate ? !(before && !row) : !(row && (before || !remove))))
		ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
		                errmsg("fencing.guard: must be fired BEFORE INSERT, UPDATE or DELETE for "
		                       "each row, AFTER INSERT or UPDATE for each row, or BEFORE TRUNCATE "
		                       "for each statement"),
		                errhint("Install the guard with fencing.protect().")));
}

} // namespace

FENCING_FUNCTION(guard)
{
	check_trigger_call(fcinfo);
	auto *trigger = reinterpret_cast<TriggerData *>(fcinfo->context);
	if (TRIGGER_FIRED_BY_TRUNCATE(trigger->tg_event))
		return guard_truncate(trigger);
	TableInfo *info = table_info(fcinfo, trigger);
	Write w{trigger, trigger->tg_relation, info, &info->fence};
	if (TRIGGER_FIRED_AFTER(trigger->tg_event))
		return guard_new_key(w);
	const Lend *taken = info->lend;
	info->lend = nullptr;
	if (TRIGGER_FIRED_BY_INSERT(trigger->tg_event))
		return guard_insert(w);
	if (TRIGGER_FIRED_BY_UPDATE(trigger->tg_event))
		return guard_update(w, taken);
	return guard_delete(w, taken);
}
