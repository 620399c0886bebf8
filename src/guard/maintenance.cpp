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
	KeyHash key;
	int64 token;
	KeptInsert *next;
};
FENCING_PLAIN_DATA(KeptInsert);

/* This transaction's notes, in its top memory context (which the callback below outlives). */
KeptInsert *kept_inserts = nullptr;
MemoryContextCallback forget_kept_inserts;
bool forget_registered = false;

void forget_kept(void *)
{
	kept_inserts = nullptr;
	forget_registered = false;
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
	if (!forget_registered) {
		forget_kept_inserts.func = forget_kept;
		forget_kept_inserts.arg = nullptr;
		MemoryContextRegisterResetCallback(TopTransactionContext, &forget_kept_inserts);
		forget_registered = true;
	}
	auto *kept =
	    static_cast<KeptInsert *>(MemoryContextAlloc(TopTransactionContext, sizeof(KeptInsert)));
	*kept = KeptInsert{relid, key, token, kept_inserts};
	kept_inserts = kept;
}

bool take_kept_insert(Oid relid, const KeyHash &key, int64 token)
{
	for (KeptInsert **at = &kept_inserts; *at != nullptr; at = &(*at)->next)
		if ((*at)->relid == relid && (*at)->token == token && (*at)->key == key) {
			*at = (*at)->next;
			return true;
		}
	return false;
}

} // namespace fencing
