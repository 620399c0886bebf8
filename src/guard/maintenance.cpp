/*
 * Maintenance writes: see maintenance.hpp.
 */
#include "guard/maintenance.hpp"
#include "catalog/citus_names.hpp"
#include "reporting/rollout.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
}

namespace fencing
{

namespace
{

/* The owner of relation `relid`. */
Oid owner_of(Oid relid)
{
	HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "fencing: relation %u does not exist", relid);
	Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/* An INSERT that kept its key's mark, until its AFTER trigger takes it. */
struct KeptInsert {
	Oid relid;
	uint8 key[sizeof(KeyHash::bytes)];
	int64 token;
};
FENCING_PLAIN_DATA(KeptInsert);

/*
 * This transaction's notes, a hash table in its top memory context (which
 * the callback below outlives): a bulk INSERT makes all its notes before its
 * AFTER triggers take them, so each note is found and removed in constant
 * time, and a taken note's memory is reused.
 */
HTAB *kept_inserts = nullptr;
MemoryContextCallback forget_kept_inserts;

void forget_kept(void *)
{
	kept_inserts = nullptr;
}

KeptInsert kept_key(Oid relid, const KeyHash &key, int64 token)
{
	KeptInsert kept;
	memset(&kept, 0, sizeof kept);
	kept.relid = relid;
	memcpy(kept.key, key.bytes, sizeof kept.key);
	kept.token = token;
	return kept;
}

/* Does `role` have the privileges of the owner or of the maintainer? */
bool may_maintain(Oid role, Oid owner, Oid maintainer)
{
	return has_privs_of_role(role, owner) ||
	       (OidIsValid(maintainer) && has_privs_of_role(role, maintainer));
}

} // namespace

/*
 * Both the role the write runs as and the session's role (after SET ROLE;
 * a SECURITY DEFINER function does not change it) must qualify: a role that
 * may not maintain cannot borrow the right through the owner's or the
 * maintainer's SECURITY DEFINER functions or triggers, and a SECURITY
 * DEFINER function of someone else's does not pass a maintainer's right on.
 */
bool maintenance_write(Relation rel, const TableOptions &options, Mode mode, const char *key,
                       int64 stored)
{
	Oid protected_table = OidIsValid(options.relid) ? options.relid : RelationGetRelid(rel);
	Oid owner = owner_of(protected_table);
	if (!may_maintain(GetUserId(), owner, options.maintainer) ||
	    !may_maintain(GetOuterUserId(), owner, options.maintainer))
		ereport(ERROR,
		        (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
		         errmsg("permission denied for a maintenance write to relation \"%s\"",
		                relation_name(rel)),
		         errdetail("fencing.maintenance is on; only the owner of the protected table or "
		                   "the maintainer it named, and the roles with their privileges, write "
		                   "without a token."),
		         errhint("Present a token, or have the table's owner name a maintainer with "
		                 "fencing.set_maintainer().")));
	note_reported(rel, protected_table, Unfenced::maintenance, key, mode, 0, stored);
	return true;
}

void note_kept_insert(Oid relid, const KeyHash &key, int64 token)
{
	if (kept_inserts == nullptr) {
		HASHCTL control{};
		control.keysize = sizeof(KeptInsert);
		control.entrysize = sizeof(KeptInsert);
		control.hcxt = TopTransactionContext;
		kept_inserts = hash_create("fencing kept inserts", 64, &control,
		                           HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		forget_kept_inserts.func = forget_kept;
		forget_kept_inserts.arg = nullptr;
		MemoryContextRegisterResetCallback(TopTransactionContext, &forget_kept_inserts);
	}
	KeptInsert kept = kept_key(relid, key, token);
	(void)hash_search(kept_inserts, &kept, HASH_ENTER, nullptr);
}

bool take_kept_insert(Oid relid, const KeyHash &key, int64 token)
{
	if (kept_inserts == nullptr)
		return false;
	KeptInsert kept = kept_key(relid, key, token);
	bool found = false;
	(void)hash_search(kept_inserts, &kept, HASH_REMOVE, &found);
	return found;
}

} // namespace fencing
