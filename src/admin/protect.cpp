/*
 * fencing.protect() and fencing.unprotect(), and the helpers their SQL
 * calls: the guard is made and removed by SQL functions that run as the
 * table's owner with SECURITY_RESTRICTED_OPERATION and a safe search_path
 * (admin/ddl.hpp, run_as_table_owner()), the way VACUUM acts on a user's
 * table; then the registry records the table.  The event triggers that
 * follow later DDL are in ddl.cpp.
 */
#include "admin/ddl.hpp"
#include "base/compat.hpp"
#include "catalog/citus_names.hpp"
#include "catalog/relation.hpp"
#include "legacy/helpers_0_3_0.hpp"
#include "state/registry.hpp"
#include "state/table_options.hpp"

extern "C" {
#include "access/relation.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

using namespace fencing;

namespace
{

/* fencing_internal._unprotect(target): the guard's triggers go (sql/src/protect.sql). */
Statement unprotect_call = {"SELECT fencing_internal._unprotect($1)", 1, {REGCLASSOID}};

} // namespace

/*
 * The guards of a Citus table's shards do not read the table's options (they
 * run where the registry and fencing.table_options are not, and Citus copies
 * only the trigger's arguments): they would enforce a table set to
 * report-only, accept tokens above its ceiling and refuse its maintainer's
 * writes.  So the options other than the defaults are refused there.
 */
static void refuse_option_on_citus(Oid relid, const char *option)
{
	if (!citus_is_distributed(relid))
		return;
	ereport(ERROR,
	        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	         errmsg("%s is not supported on Citus table \"%s\"", option, get_rel_name(relid)),
	         errdetail("The guards of its shards on the workers do not read the table's options: "
	                   "they enforce every write, with no max_token and no maintainer."),
	         errhint("Protect a Citus table with enforce => true and no max_token; roll out "
	                 "report-only before create_distributed_table(), then protect it again.")));
}

/*
 * A NOTICE when protect() of a table already protected changes the options
 * recorded for it (by an earlier protect() or set_enforce()): run again with
 * the defaults, it would switch a report-only table to enforcing and drop
 * its max_token.  The maintainer stays.
 */
static void notice_changed_options(Oid relid, const TableOptions &before, bool enforce,
                                   int64 max_token)
{
	if (before.relid != relid || (before.enforce == enforce && before.max_token == max_token))
		return;
	TableOptions after{relid, enforce, max_token, before.maintainer};
	ereport(NOTICE, (errmsg("fencing.protect() changed the options of relation \"%s\"",
	                        get_rel_name(relid)),
	                 errdetail("They were %s; they are %s.", protect_options_text(before),
	                           protect_options_text(after)),
	                 errhint("fencing.protect() sets every option it takes; pass %s to keep the "
	                         "previous ones.",
	                         protect_options_text(before))));
}

/*
 * protect(target, token_column, mode[, enforce, max_token]): for the table's
 * owner.  The guard is installed by fencing_internal._protect() running as the owner
 * with SECURITY_RESTRICTED_OPERATION (also when a superuser calls), then the
 * registry records the table and its key identity, and the table of options
 * (0.4.0's objects) its rollout options.
 */
static void protect_table(FunctionCallInfo fcinfo, bool with_options)
{
	int arguments = with_options ? 4 : 3;
	for (int i = 0; i < arguments; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
			                errmsg("fencing.protect() arguments must not be null"),
			                errhint("Only max_token may be null (no ceiling).")));
	bool enforce = with_options ? PG_GETARG_BOOL(3) : true;
	int64 max_token = with_options && !PG_ARGISNULL(4) ? PG_GETARG_INT64(4) : 0;
	if (with_options && !PG_ARGISNULL(4) && max_token <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("max_token must be positive, got " INT64_FORMAT, max_token),
		                errhint("Pass a positive bigint, or NULL for no ceiling.")));
	/* One protect() or unprotect() of a table at a time: they drop and remake its triggers. */
	Relation rel = open_target(fcinfo, ShareRowExclusiveLock, Target::protected_table);
	Oid relid = RelationGetRelid(rel);
	/*
	 * A temporary table goes at commit (ON COMMIT DROP) or at the session's
	 * end without sql_drop: its registry row, marks and floor would stay
	 * under an OID a later relation can take.
	 */
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		         errmsg("temporary table \"%s\" cannot be protected", RelationGetRelationName(rel)),
		         errdetail("A temporary table is dropped at commit or at the session's end "
		                   "without the event triggers that remove the extension's state "
		                   "with it."),
		         errhint("Protect a permanent table.")));
	/* What a protected table had: protect() sets every option it takes. */
	TableOptions before = options_of(rel);
	relation_close(rel, NoLock);
	if (!enforce)
		refuse_option_on_citus(relid, "report-only mode (enforce => false)");
	if (max_token > 0)
		refuse_option_on_citus(relid, "max_token");
	char *column = pstrdup(NameStr(*PG_GETARG_NAME(1)));
	char *mode_text = TextDatumGetCString(PG_GETARG_DATUM(2));
	fencing::Mode mode;
	Datum values[3] = {ObjectIdGetDatum(relid), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)};
	run_as_table_owner(relid, for_installed_release(&protect_call, &protect_call_0_3_0), values);
	if (!parse_mode(mode_text, &mode))
		elog(ERROR, "fencing: protect() accepted mode \"%s\"", mode_text);
	Registration made;
	made.relid = relid;
	namestrcpy(&made.token_column, column);
	made.mode = mode;
	made.is_protected = true;
	guard_truncate_tree(made);
	follow_partition_identities(relid);
	rel = relation_open(relid, AccessShareLock);
	(void)record_registration(rel, column, mode, true);
	relation_close(rel, NoLock);
	if (with_options) {
		record_options(relid, enforce, max_token);
		notice_changed_options(relid, before, enforce, max_token);
	}
}

/* 0.3.0's fencing.protect(target, token_column, mode), until ALTER EXTENSION UPDATE. */
FENCING_FUNCTION(protect)
{
	protect_table(fcinfo, false);
	PG_RETURN_VOID();
}

/* fencing.protect(target, token_column, mode, enforce, max_token). */
FENCING_FUNCTION(fencing_protect)
{
	protect_table(fcinfo, true);
	PG_RETURN_VOID();
}

/*
 * fencing.set_maintainer(target, role): for the table's owner.  The role
 * (NULL: none) may then make maintenance writes to the table; the
 * extension creates no role.
 */
FENCING_FUNCTION(fencing_set_maintainer)
{
	Relation rel = open_target(fcinfo, AccessShareLock, Target::protected_table);
	Oid relid = RelationGetRelid(rel);
	const char *name = pstrdup(RelationGetRelationName(rel));
	relation_close(rel, NoLock);
	Oid role = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);
	if (OidIsValid(role) && !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
		                errmsg("role with OID %u does not exist", role)));
	if (OidIsValid(role))
		refuse_option_on_citus(relid, "a maintainer");
	if (!record_maintainer(relid, role))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", name),
		                errhint("Run fencing.protect() on it first.")));
	PG_RETURN_VOID();
}

/*
 * fencing.set_enforce(target, enforce): for the table's owner.  No lock on
 * the table: writers see the change from their next transaction (the
 * relcache invalidation it sends at commit).
 */
FENCING_FUNCTION(fencing_set_enforce)
{
	if (PG_ARGISNULL(1))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
		                errmsg("fencing.set_enforce() arguments must not be null")));
	Relation rel = open_target(fcinfo, AccessShareLock, Target::protected_table);
	Oid relid = RelationGetRelid(rel);
	const char *name = pstrdup(RelationGetRelationName(rel));
	relation_close(rel, NoLock);
	if (!PG_GETARG_BOOL(1))
		refuse_option_on_citus(relid, "report-only mode (enforce => false)");
	if (!record_enforce(relid, PG_GETARG_BOOL(1)))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("relation \"%s\" is not protected", name),
		                errhint("Run fencing.protect() on it first.")));
	PG_RETURN_VOID();
}

/* fencing.unprotect(target): the guard goes; the registry keeps the key identity. */
FENCING_FUNCTION(unprotect)
{
	Relation rel = open_target(fcinfo, ShareRowExclusiveLock, Target::protected_table);
	Oid relid = RelationGetRelid(rel);
	relation_close(rel, NoLock);
	Datum values[1] = {ObjectIdGetDatum(relid)};
	run_as_table_owner(relid, for_installed_release(&unprotect_call, &unprotect_call_0_3_0),
	                   values);
	(void)record_unprotected(relid);
	forget_options(relid);
	PG_RETURN_VOID();
}

/*
 * fencing_internal._highest_token(rel, column): the highest value of a bigint column
 * over a table and its partitions, read in C (nothing the table's owner
 * defined runs).  For high_water_mark(), which runs as the extension owner.
 */
FENCING_FUNCTION(highest_token)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	Relation rel = try_relation_open(PG_GETARG_OID(0), AccessShareLock);
	if (rel == nullptr)
		PG_RETURN_NULL();
	char kind = rel->rd_rel->relkind;
	int64 highest = kind == RELKIND_RELATION || kind == RELKIND_PARTITIONED_TABLE
	                    ? highest_stored_token_below(rel, NameStr(*PG_GETARG_NAME(1)))
	                    : 0;
	relation_close(rel, AccessShareLock);
	PG_RETURN_INT64(highest);
}

/* fencing_internal._default_is_zero(target, column): is the column's default absent or the constant
 * 0? */
FENCING_FUNCTION(default_is_zero)
{
	Relation rel = open_target(fcinfo, AccessShareLock);
	AttrNumber attnum = user_column(rel, NameStr(*PG_GETARG_NAME(1)));
	bool zero = attnum == InvalidAttrNumber || default_is_zero(rel, attnum);
	relation_close(rel, AccessShareLock);
	PG_RETURN_BOOL(zero);
}
