/*
 * The settings of 0.1.0's and 0.2.0's protected tables: see registry_0_2_0.hpp.
 */
#include "legacy/registry_0_2_0.hpp"
#include "legacy/installed_release.hpp"
#include "catalog/relation.hpp"

extern "C" {
#include "utils/rel.h"
#include "utils/builtins.h"
#include "utils/relcache.h"
}

namespace fencing
{

bool settings_in_triggers_0_2_0()
{
	return installed_layout() != Layout::current;
}

bool trigger_settings_0_2_0(Oid relid, NameData *token_column, Mode *mode, bool *found)
{
	if (!settings_in_triggers_0_2_0())
		return false;
	*found = false;
	Relation rel = RelationIdGetRelation(relid);
	if (!RelationIsValid(rel))
		return true;
	TriggerDesc *triggers = rel->trigdesc;
	for (int i = 0; triggers != nullptr && i < triggers->numtriggers && !*found; i++) {
		const Trigger *trigger = &triggers->triggers[i];
		if (strcmp(trigger->tgname, guard_trigger_name) != 0 || trigger->tgisclone ||
		    trigger->tgnargs < 2 || !calls_guard(trigger->tgfoid) ||
		    !parse_mode(trigger->tgargs[1], mode))
			continue;
		namestrcpy(token_column, trigger->tgargs[0]);
		*found = true;
	}
	RelationClose(rel);
	return true;
}

} // namespace fencing
