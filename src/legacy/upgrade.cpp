/*
 * 0.1.0: the conversions ALTER EXTENSION fencing UPDATE needs from C (every
 * upgrade script locks the protected tables with lock_protected_tables()),
 * and primary_key_columns(), which 0.1.0's protect() calls until that update
 * runs.  0.1.0 named deleted-key marks by the key's text
 * (key_text_0_1_0.hpp); 0.2.0 names them by the hash of the key's binary
 * images, and the update renames them (key_hash_0_1_0()).
 */
#include "legacy/key_text_0_1_0.hpp"
#include "catalog/keys.hpp"
#include "base/compat.hpp"
#include "base/rights.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_trigger.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/fmgrprotos.h"
#include "lib/stringinfo.h"
#include "utils/rel.h"
}

namespace
{

/*
 * Reads 0.1.0 key texts back into values, inside a subtransaction: a key
 * whose column changed type since may not read back.  False then.  Run as
 * the table's owner (key_hash_0_1_0): a domain's input runs its CHECKs.
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
 * fencing.primary_key_columns(target), called by 0.1.0's protect(): the
 * quoted, comma-separated primary key columns of a table the guard can
 * mark; errors if it has none (or one the guard cannot mark).
 */
FENCING_FUNCTION(primary_key_columns)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
		        (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("target must not be null")));
	Relation rel = relation_open(PG_GETARG_OID(0), AccessShareLock);
	Relation pk = fencing::open_primary_key(rel);
	fencing::require_identifiable_key(rel, pk);
	fencing::KeyColumns key = fencing::key_columns(pk);
	StringInfoData columns;
	initStringInfo(&columns);
	for (int i = 0; i < key.count; i++)
		appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "",
		                 quote_identifier(NameStr(
		                     TupleDescAttr(RelationGetDescr(rel), key.attnums[i] - 1)->attname)));
	index_close(pk, AccessShareLock);
	relation_close(rel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(columns.data));
}

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
		/*
		 * Input functions can run the table owner's code (a domain's CHECK
		 * constraints): as the owner, never as the superuser running the
		 * update (SECURITY.md).
		 */
		int level = fencing::use_0_1_0_styles();
		fencing::Rights saved = fencing::become(fencing::relation_owner(RelationGetRelid(rel)));
		ok = read_key(rel, key, texts, values);
		fencing::restore(saved);
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

/*
 * fencing._lock_protected_tables(), the first step of every upgrade script:
 * takes the ACCESS EXCLUSIVE lock of every table whose triggers call
 * fencing.guard().  A write locks its table and then the extension's (the
 * guard reads and writes marks); an update changes the extension's tables
 * and then the guard's triggers.  Taking the tables first makes the update
 * wait for running writes, and later writes wait for it, instead of a
 * deadlock between them.  It never waits while holding another table: it
 * takes the others without waiting, and when one is busy it lets go of all
 * and waits for that one alone (then keeps it).  So a transaction that holds
 * one protected table stalls no other, and one that writes two cannot
 * deadlock with it.  Only after many rounds (tables kept busy in turn) does
 * it wait in OID order while holding the rest; lock_timeout bounds every
 * wait.
 */
FENCING_FUNCTION(lock_protected_tables)
{
	Oid guard = InvalidOid;
	List *relids = NIL;
	Relation triggers = table_open(TriggerRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(triggers, InvalidOid, false, nullptr, 0, nullptr);
	for (HeapTuple tuple; HeapTupleIsValid(tuple = systable_getnext(scan));) {
		auto *form = reinterpret_cast<Form_pg_trigger>(GETSTRUCT(tuple));
		if (form->tgisinternal || OidIsValid(form->tgparentid))
			continue;
		if (form->tgfoid != guard) {
			if (!fencing::calls_guard(form->tgfoid))
				continue;
			guard = form->tgfoid;
		}
		relids = list_append_unique_oid(relids, form->tgrelid);
	}
	systable_endscan(scan);
	table_close(triggers, AccessShareLock);
	list_sort(relids, list_oid_cmp);
	constexpr int rounds = 100;
	Oid held = InvalidOid; /* the one waited for, kept */
	ListCell *cell;
	for (int round = 0;; round++) {
		if (round == rounds) {
			foreach (cell, relids)
				if (lfirst_oid(cell) != held)
					LockRelationOid(lfirst_oid(cell), AccessExclusiveLock);
			break;
		}
		Oid busy = InvalidOid;
		List *taken = NIL;
		foreach (cell, relids) {
			Oid relid = lfirst_oid(cell);
			if (relid == held)
				continue;
			if (!ConditionalLockRelationOid(relid, AccessExclusiveLock)) {
				busy = relid;
				break;
			}
			taken = lappend_oid(taken, relid);
		}
		if (!OidIsValid(busy))
			break;
		foreach (cell, taken)
			UnlockRelationOid(lfirst_oid(cell), AccessExclusiveLock);
		if (OidIsValid(held))
			UnlockRelationOid(held, AccessExclusiveLock);
		list_free(taken);
		CHECK_FOR_INTERRUPTS();
		LockRelationOid(busy, AccessExclusiveLock);
		held = busy;
	}
	PG_RETURN_VOID();
}
