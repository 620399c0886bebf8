/*
 * The extension in this database's catalog: see extension.hpp.
 *
 * pg_extension has no syscache, so a change of its rows sends no
 * invalidation of its own.  The changes of an extension send one instead:
 * the relcache invalidation of pg_extension itself
 * (CacheInvalidateRelcacheByRelid), registered
 *   - by the object access hook when an extension is created, altered or
 *     dropped in a backend that had loaded the module;
 *   - by _PG_init when an extension's script loads the module: CREATE
 *     FUNCTION ... LANGUAGE C loads it (whatever check_function_bodies
 *     says), and the scripts of every release, 0.4.0's and the frozen
 *     older ones, make C functions, so none needs a call of its own.
 * PostgreSQL sends it to the backends of this database at commit, and this
 * backend runs it at its next command (or at the abort that undoes the
 * change).  The cache forgets on it, on a full reset (invalidations were
 * lost), on the relcache invalidation of the extension's sequence
 * fencing.token_seq (every release has it; DROP EXTENSION drops it, also
 * where the dropping backend never loaded the module: 0.3.0's objects do
 * not load it for DROP EXTENSION), and on any change of pg_namespace (the
 * schemas CREATE and DROP EXTENSION make and drop, a second line).
 */
#include "catalog/extension.hpp"
#include "base/relid_cache.hpp"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
}

namespace
{

/* What pg_extension says of the extension in this database. */
struct Installed {
	bool known;
	Oid oid;          /* InvalidOid: not installed */
	char version[64]; /* extversion, cut to fit (the releases' names are short) */
	Oid member;       /* fencing.token_seq, whose drop goes with the extension's */
};
FENCING_PLAIN_DATA(Installed);

Installed cached = {false, InvalidOid, "", InvalidOid};
const Installed unknown = {false, InvalidOid, "", InvalidOid};

/* Invalidations heard: a read that one overtook is used once, not kept. */
uint64 invalidations = 0;
bool listening = false;

void forget()
{
	cached.known = false;
	invalidations++;
}

void forget_on_relcache(Datum, Oid relid)
{
	if (relid == InvalidOid || relid == ExtensionRelationId ||
	    (OidIsValid(cached.member) && relid == cached.member))
		forget();
}

void forget_on_namespace(Datum, int, uint32)
{
	forget();
}

/* Listens to the invalidations before the first read, so that none is missed. */
void listen()
{
	if (listening)
		return;
	fencing::on_relcache_invalidation(forget_on_relcache, 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, forget_on_namespace, 0);
	listening = true;
}

/* Reads the extension's row of pg_extension (one index lookup) into the cache. */
void read_installed()
{
	listen();
	uint64 heard = invalidations;
	Installed read = {true, InvalidOid, "", InvalidOid};
	Relation extensions = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
	            CStringGetDatum("fencing"));
	SysScanDesc scan = systable_beginscan(extensions, ExtensionNameIndexId, true, nullptr, 1, &key);
	HeapTuple row = systable_getnext(scan);
	Oid schema = InvalidOid;
	if (HeapTupleIsValid(row)) {
		read.oid = reinterpret_cast<Form_pg_extension>(GETSTRUCT(row))->oid;
		schema = reinterpret_cast<Form_pg_extension>(GETSTRUCT(row))->extnamespace;
		bool isnull;
		Datum version =
		    heap_getattr(row, Anum_pg_extension_extversion, RelationGetDescr(extensions), &isnull);
		if (!isnull)
			text_to_cstring_buffer(DatumGetTextPP(version), read.version, sizeof read.version);
	}
	systable_endscan(scan);
	table_close(extensions, AccessShareLock);
	if (OidIsValid(schema))
		read.member = get_relname_relid("token_seq", schema);
	read.known = invalidations == heard;
	cached = read;
}

/* The answer: cached, else read if a catalog can be read here, else none. */
const Installed &answer()
{
	if (!cached.known) {
		if (!IsTransactionState() || !OidIsValid(MyDatabaseId))
			return unknown;
		read_installed();
	}
	return cached;
}

/* Every backend of this database (this one too, at its next command) asks pg_extension again. */
void announce_change()
{
	CacheInvalidateRelcacheByRelid(ExtensionRelationId);
}

} // namespace

namespace fencing
{

bool extension_installed()
{
	const Installed &installed = answer();
	return OidIsValid(installed.oid) &&
	       !(creating_extension && CurrentExtensionObject == installed.oid);
}

const char *installed_version()
{
	const Installed &installed = answer();
	return OidIsValid(installed.oid) ? installed.version : nullptr;
}

void extension_object_access(ObjectAccessType access, Oid class_id)
{
	if (class_id == ExtensionRelationId &&
	    (access == OAT_POST_CREATE || access == OAT_POST_ALTER || access == OAT_DROP))
		guarded("object access hook", [] { announce_change(); });
}

void extension_module_loaded()
{
	if (creating_extension && IsTransactionState())
		announce_change();
}

} // namespace fencing
