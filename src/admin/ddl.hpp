/*
 * The DDL the extension follows (ddl.cpp): the parts entry/module.cpp calls,
 * and what protect() and unprotect() (protect.cpp) share with it.
 */
#pragma once

#include "base/boundary.hpp"
#include "base/spi.hpp"
#include "state/registry.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "storage/lockdefs.h"
#include "utils/rel.h"
}

namespace fencing
{

/* From _PG_init: a module loaded during a statement may have missed its drops. */
void ddl_module_loaded();

/* The object access hook: records the partitions a command drops. */
void ddl_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id);

/* At the end of a transaction: forgets the partitions it dropped. */
void ddl_end_of_transaction(XactEvent event);

/*
 * Runs `call` (an internal helper's, one argument per relation setting) as
 * the owner of `relid`, with SECURITY_RESTRICTED_OPERATION and search_path
 * pg_catalog, pg_temp; the event trigger leaves the guard it changes alone
 * meanwhile.  Prepared for this run only, as that owner: the USAGE on the
 * helper's schema is checked when the call is parsed, and a plan kept for
 * one owner would skip it for the next.
 */
void run_as_table_owner(Oid relid, Statement *call, Datum *values);

/* fencing_internal._protect(target, token column, mode): the guard's DDL (sql/src/protect.sql). */
extern Statement protect_call;

/*
 * What a function may be called on, and by whom.  The rights over a
 * relation of a protected table's tree (the table and its partitions, at
 * every level) are the protected table's owner's, whoever owns the
 * relation: a partition may belong to another role, which writes it under
 * the guard but changes nothing fencing keeps for the table.  A relation no
 * protected table covers is its own owner's.
 */
enum class Target {
	any,            /* no owner check */
	owned,          /* the owner of the relation's protected table (partitions accepted) */
	protected_table /* the same, and a partition of a protected table is refused (55000) */
};

/*
 * Opens the relation of a function's first argument, or errors with 42P01
 * (a missing one) or 42501 (a caller without the rights `target` asks)
 * before taking the lock, and checks the rights again under it.
 */
Relation open_target(FunctionCallInfo fcinfo, LOCKMODE lock, Target target = Target::any);

/* open_target() of relation `relid` for `function`; nullptr if it does not exist. */
Relation try_open_target(Oid relid, LOCKMODE lock, Target target, const char *function);

/*
 * Errors (42501) unless `user` has the privileges of the owner of the
 * protected table whose tree holds `relid`; nothing if no protected table
 * covers it.  `action` ("add partition ... to its tree") says what needed them.
 */
void require_tree_owner(Oid relid, Oid user, const char *action);

/* Is the column's default absent, or the constant 0? */
bool default_is_zero(Relation rel, AttrNumber attnum);

/* The TRUNCATE triggers of a protected table's tree, each made as its relation's owner. */
void guard_truncate_tree(const Registration &registration);

/* Partitions of `relid` registered on their own get their floors and new key identities. */
void follow_partition_identities(Oid relid);

/* A relation's name as messages show it: schema-qualified, quoted where needed. */
const char *qualified_name(Oid relid);

} // namespace fencing
