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
#include "guard/decision.hpp"
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
 * What carrying a decision out names: the write's relation and settings, its
 * row (nullptr: every row, TRUNCATE), and the stored token that a write
 * without one is shown (an INSERT's row has none: 0).
 */
struct Carried {
	Relation rel;
	const TableSettings *fence;
	const TableOptions *options;
	PendingCount *counter;
	HeapTuple row;
	const char *operation; /* "INSERT", ...: for 23T02 */
	int64 missing_stored;
	MarkStore *truncate_marks; /* TRUNCATE: 23T02 shows the table's highest token */
};
FENCING_PLAIN_DATA(Carried);

/* The facts every write shares: its table's options and the transaction's settings. */
WriteFacts facts_of(Operation operation, const TableSettings &fence, const TableOptions &options)
{
	WriteFacts f{};
	f.operation = operation;
	f.mode = fence.mode;
	f.enforce = options.enforce;
	f.max_token = options.max_token;
	f.maintenance = maintenance_requested();
	return f;
}

/*
 * Raises the refusal's error: 23T01, 23T02, 22023 for two tokens or 40001
 * (22023 above max_token is raised before).
 */
[[noreturn]] void refuse(const Carried &c, const char *key, const WriteFacts &f, const Decision &d)
{
	AttrNumber column = c.fence->token_attnum;
	if (d.rule == Rule::missing)
		report_missing(c.rel, column, key, c.operation,
		               shown(c.rel, column,
		                     c.truncate_marks != nullptr
		                         ? c.truncate_marks->kind->truncate_shown(c.truncate_marks, column)
		                         : c.missing_stored));
	if (d.rule == Rule::stale)
		report_stale(c.rel, column, key, f.mode, f.presented, shown(c.rel, column, f.stored));
	if (d.rule == Rule::two_tokens)
		report_two_tokens(
		    c.rel, key, NameStr(TupleDescAttr(RelationGetDescr(c.rel), column - 1)->attname),
		    f.second_token, f.presented, shown(c.rel, column, stored_token(c.rel, c.row, column)));
	report_mark_moved(c.rel, key, shown(c.rel, column, f.presented),
	                  shown(c.rel, column, f.stored));
}

/*
 * Carries out decide()'s decision, the one place that does: raises 22023
 * (a token above max_token, in both modes), checks the role of a maintenance
 * write (42501), raises the refusal, records the report, counts the write.
 * Returns the token the row, the mark or the floor gets.
 */
int64 carry_out(const Carried &c, const WriteFacts &f, const Decision &d)
{
	const char *key = c.row == nullptr ? all_rows : nullptr;
	auto described = [&]() { return key != nullptr ? key : (key = describe_row(c.rel, c.row)); };
	AttrNumber column = c.fence->token_attnum;
	if (d.rule == Rule::above_max)
		report_above_ceiling(c.rel, described(), f.presented, f.max_token, f.enforce);
	if (d.verdict == Verdict::maintain)
		(void)maintenance_write(c.rel, *c.options, f.mode, described(),
		                        shown(c.rel, column, c.missing_stored));
	if (d.verdict == Verdict::refuse)
		refuse(c, described(), f, d);
	if (d.verdict == Verdict::report && d.rule == Rule::stale)
		note_reported(c.rel, c.options->relid, Unfenced::stale, described(), f.mode, f.presented,
		              shown(c.rel, column, f.stored));
	if (d.verdict == Verdict::report && d.rule == Rule::missing)
		note_reported(c.rel, c.options->relid, Unfenced::missing, described(), f.mode, 0,
		              shown(c.rel, column, c.missing_stored));
	if (d.counted)
		count_accepted(c.counter);
	return d.token;
}

/* A row write's Carried. */
Carried carried(const Write &w, HeapTuple row, const char *operation, int64 missing_stored)
{
	return Carried{w.rel, w.fence,   &w.info->options, w.info->counter,
	               row,   operation, missing_stored,   nullptr};
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
 * other value is a second token in one write (`*second`, for decide(): refused
 * as such, or as stale if the transaction's token cannot follow the row's: an
 * ORM's stale save writes back a value it loaded before the newer holder
 * wrote, and must be told what matters, that its lock is lost).
 * fenced_update()'s own row presents its token argument.
 */
int64 assigned_token(const Write &w, HeapTuple old_row, HeapTuple new_row, int64 *second)
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
	if (assigned != transaction)
		*second = assigned;
	return transaction;
}

/*
 * BEFORE INSERT.  An enforcing guard takes the token as presented (the AFTER
 * trigger checks the key's mark).  A report-only guard's INSERT, or a
 * maintenance write's, reads its key's mark first: a row without a token
 * (reported or maintained), or with one that its key's mark or the table's
 * floor would refuse (reported), takes that mark: no key's token goes down.
 * The AFTER trigger then takes it as it is, and looks only for a DELETE
 * that raced it.
 */
Datum guard_insert(const Write &w)
{
	HeapTuple row = w.trigger->tg_trigtuple;
	bool isnull;
	Datum value = heap_getattr(row, w.fence->token_attnum, RelationGetDescr(w.rel), &isnull);
	bool explicit_token = !isnull && DatumGetInt64(value) != 0;
	WriteFacts f = facts_of(Operation::insert, *w.fence, w.info->options);
	f.has_token = explicit_token
	                  ? (f.presented = require_token(value, false, "fencing token"), true)
	                  : session_token(&f.presented);
	KeyHash key{};
	if (insert_follows_mark(f)) {
		int64 mark = 0;
		key = row_key_identity(w.rel, w.info->key, row);
		(void)high_water(w, key, &mark);
		f.stored = bar(w, mark);
	}
	Decision d = decide(f);
	int64 kept = carry_out(carried(w, row, "INSERT", 0), f, d);
	/* Only a mode that refuses a token equal to the mark needs the AFTER trigger told. */
	if (d.note_insert)
		note_kept_insert(RelationGetRelid(w.rel), key, kept);
	/*
	 * For ON CONFLICT DO UPDATE: the key this row proposes, should it
	 * conflict; a row reported (or maintained) here is so for its UPDATE too,
	 * which keeps the stored token and is not counted again.
	 */
	Lend *lend = lend_next(w.info, true, f.presented);
	lend->reported = kept != f.presented || !f.has_token;
	TupleDesc desc = RelationGetDescr(w.rel);
	key_values(w.rel, w.info->key, row, lend->key, lend->key_isnull);
	for (int i = 0; i < w.info->key.count; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, w.info->key.attnums[i] - 1);
		if (!lend->key_isnull[i])
			lend->key[i] = datumCopy(lend->key[i], att->attbyval, att->attlen);
	}
	if (lend->reported)
		return PointerGetDatum(with_token(w, row, kept));
	return PointerGetDatum(explicit_token ? row : with_token(w, row, f.presented));
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
	WriteFacts f = facts_of(Operation::update, *w.fence, w.info->options);
	f.stored = bar(w, stored_token(w.rel, old_row, w.fence->token_attnum));
	f.has_token = true;
	if (assigned) {
		f.presented = assigned_token(w, old_row, new_row, &f.second_token);
	} else if (!session_token(&f.presented)) {
		if (taken != nullptr && taken->from_insert && proposed_key(w, *taken, old_row)) {
			f.presented = taken->token;
			/* The upsert's INSERT reported (or maintained) this write already. */
			f.lent_reported = taken->reported;
		} else {
			f.has_token = false;
		}
	}
	Decision d = decide(f);
	int64 presented = carry_out(carried(w, old_row, "UPDATE", f.stored), f, d);
	/* Report-only or maintenance: a write enforcement would refuse keeps the stored token. */
	bool kept = d.verdict != Verdict::accept;
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
	WriteFacts f = facts_of(Operation::remove, *w.fence, w.info->options);
	f.stored = bar(w, stored_token(w.rel, row, w.fence->token_attnum));
	if (taken != nullptr && !taken->from_insert &&
	    ItemPointerEquals(const_cast<ItemPointer>(&taken->row), &row->t_self)) {
		f.has_token = true;
		f.presented = taken->token;
		/* A moved row: its UPDATE half kept the stored token, and so does the mark. */
		f.lent_reported = taken->reported;
	} else {
		f.has_token = session_token(&f.presented);
	}
	int64 token = carry_out(carried(w, row, "DELETE", f.stored), f, decide(f));
	mark_deleted(w, row, row_key_identity(w.rel, w.info->key, row), token);
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
	WriteFacts f = facts_of(Operation::new_key, *w.fence, w.info->options);
	f.has_token = true;
	f.presented = stored_token(w.rel, row, w.fence->token_attnum);
	KeyHash key = row_key_identity(w.rel, w.info->key, row);
	if (update) {
		KeyHash old_key = row_key_identity(w.rel, w.info->key, w.trigger->tg_trigtuple);
		if (old_key == key)
			return PointerGetDatum(nullptr);
		mark_deleted(w, w.trigger->tg_trigtuple, old_key, f.presented);
	}
	f.has_mark = high_water(w, key, &f.stored);
	/*
	 * A row that kept its key's mark (guard_insert()) has exactly that
	 * mark.  A higher one is a DELETE's that the unique check waited for
	 * after the BEFORE trigger read the mark: the row would stay below it,
	 * so it is refused, as stale when enforcing, and in report-only mode
	 * (whose writes never lower a token) as a serialization failure; the
	 * retry takes the new mark.  The note of a kept mark is taken only when
	 * the mark refuses the row.
	 */
	Decision d = decide(f);
	if (d.verdict == Verdict::refuse) {
		f.kept_insert =
		    take_kept_insert(RelationGetRelid(w.rel), key, f.presented) && f.stored == f.presented;
		d = decide(f);
	}
	(void)carry_out(carried(w, row, update ? "UPDATE" : "INSERT", 0), f, d);
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
	/*
	 * On a Citus distributed table this is its shell, whose rows are in the
	 * shards (which have no TRUNCATE trigger of their own): its store reads
	 * them through Citus.
	 */
	MarkStore marks = open_mark_store(rel, fence, CurrentMemoryContext);
	TableOptions options = options_of(rel);
	WriteFacts f = facts_of(Operation::truncate, fence, options);
	f.has_token = session_token(&f.presented);
	f.stored = marks.kind->truncate_bar(&marks, fence.token_attnum);
	/* Report-only or maintenance: the floor keeps the highest stored token. */
	Carried c{rel, &fence, &options, relation_counter(rel), nullptr, "TRUNCATE", f.stored, &marks};
	int64 token = carry_out(c, f, decide(f));
	if (token > 0)
		marks.kind->raise_truncate_floor(&marks, token);
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
