/*
 * The extension in this database's catalog: whether `CREATE EXTENSION
 * fencing` was run here, and at which release.  The one question every hook
 * asks first (entry/module.cpp): the library is loaded server-wide
 * (shared_preload_libraries), and in a database without the extension its
 * hooks do nothing.  The answer is read from pg_extension once and kept per
 * backend (a backend serves one database) until the extension's own CREATE,
 * ALTER ... UPDATE or DROP, in this backend or another, invalidates it.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "catalog/objectaccess.h"
}

namespace fencing
{

/*
 * Is the extension installed in this database, and not being created or
 * updated by the script this backend runs (CREATE EXTENSION fencing, ALTER
 * EXTENSION fencing UPDATE: until the script ends, the hooks leave its
 * half-made objects alone)?  Reads pg_extension when nothing is cached;
 * where no catalog can be read (an aborted transaction, a commit's end), the
 * cached answer alone, and false if there is none.
 */
bool extension_installed();

/*
 * The installed release, pg_extension.extversion (also while the script of
 * CREATE or ALTER EXTENSION runs: during an update, the release the running
 * step leads to), or nullptr if the extension is not installed.  Asked in
 * src/legacy/ only (test/lint/subset): the rest asks what a release has.
 */
const char *installed_version();

/*
 * The object access hook's part: an extension created, altered or dropped
 * in this backend.  Every backend of the database reads pg_extension again
 * once this transaction commits, this one at its next command.
 */
void extension_object_access(ObjectAccessType access, Oid class_id);

/*
 * From _PG_init: the module loaded during an extension's script (a backend
 * that had not loaded it when CREATE or ALTER EXTENSION began, so no hook of
 * it saw the change); the other backends are told as above.
 */
void extension_module_loaded();

} // namespace fencing
