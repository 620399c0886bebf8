/*
 * Serves 0.1.0's and 0.2.0's objects (until ALTER EXTENSION fencing
 * UPDATE): they have no registry (fencing.registry, 0.3.0); a protected
 * table's settings are the arguments of its own guard trigger.
 */
#pragma once

#include "base/token_compare.hpp"

namespace fencing
{

/* 0.1.0 and 0.2.0: are the settings in the guard triggers' arguments (no registry)? */
bool settings_in_triggers_0_2_0();

/*
 * 0.1.0 and 0.2.0: the settings of `relid` from the arguments of its own
 * guard trigger (not one PostgreSQL cloned to a partition), *found whether
 * it has one; returns false, doing nothing, with the current objects.
 */
bool trigger_settings_0_2_0(Oid relid, NameData *token_column, Mode *mode, bool *found);

} // namespace fencing
