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
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

enum class Layout { v0_1_0, v0_2_0, current };

/* The layout of the extension's objects in this database (cached per backend). */
Layout installed_layout();

/* The layout's release, for messages. */
const char *layout_release(Layout layout);

} // namespace fencing
