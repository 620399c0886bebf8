/*
 * Which release's SQL objects a database holds.  A new library is installed
 * before ALTER EXTENSION fencing UPDATE runs in each database (and, without
 * shared_preload_libraries, sessions load it as soon as the files are
 * replaced): until the update, it serves the older release's objects with
 * the current checks and SQLSTATEs.  The layouts differ in where settings
 * and marks live:
 *   0.1.0: settings in the guard triggers' arguments, marks named by the
 *          key's text (fencing.deleted_keys.key text[]) under the top
 *          partitioned table, no floors, tokens from fencing.token_seq;
 *   0.2.0: settings in the guard triggers' arguments, marks named by key
 *          hash, floors, clock-bounded tokens;
 *   current: the registry (fencing.registry) holds the settings.
 * 0.3.0's objects have the current layout without 0.4.0's additions (the
 * schema fencing_internal, fencing.table_options, the leases' horizon).
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* The release of the installed objects (none: the extension is not installed here). */
enum class Release { none, v0_1_0, v0_2_0, v0_3_0, current };

/*
 * The release pg_extension records for the extension in this database
 * (catalog/extension.hpp, cached per backend); during ALTER EXTENSION
 * UPDATE, the release its running step leads to.
 */
Release installed_release();

/* Are the objects those of 0.3.0 or an older release (false if the extension is not installed)? */
bool objects_before_0_4_0();

enum class Layout { v0_1_0, v0_2_0, current };

/* The layout of the extension's objects in this database (current if it is not installed). */
Layout installed_layout();

/* The layout's release, for messages. */
const char *layout_release(Layout layout);

} // namespace fencing
