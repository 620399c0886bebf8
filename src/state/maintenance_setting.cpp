/*
 * fencing.maintenance: see maintenance_setting.hpp.  As for fencing.token
 * (token_setting.cpp): a value counts when the session assigned it (SET,
 * SET LOCAL, set_config, a function's SET clause) and while the setting's
 * stack is not empty, that is in the transaction that assigned it;
 * PostgreSQL drops the stack when that transaction ends, so a value left
 * for the session by a plain SET, or a role, database or server default,
 * never counts.
 */
#include "state/maintenance_setting.hpp"
#include "base/compat.hpp"

extern "C" {
#include "utils/guc_tables.h"
}

namespace fencing
{

namespace
{

/* The value and whether the session assigned it (a check hook's extra). */
struct MaintenanceValue {
	bool on;
	bool assigned;
};

MaintenanceValue current = {false, false};
const config_generic *setting = nullptr;

} // namespace

bool maintenance_setting_value = false;

bool check_maintenance(bool *newval, void **extra, GucSource source)
{
	auto *value = static_cast<MaintenanceValue *>(guc_extra_alloc(sizeof(MaintenanceValue)));
	if (value == nullptr)
		return false;
	value->on = *newval;
	value->assigned = source == PGC_S_SESSION;
	*extra = value;
	return true;
}

void assign_maintenance(bool, void *extra)
{
	current = *static_cast<MaintenanceValue *>(extra);
}

void maintenance_setting_defined()
{
	setting = find_setting("fencing.maintenance");
	if (setting == nullptr)
		elog(ERROR, "fencing: setting fencing.maintenance is not defined");
}

bool maintenance_requested()
{
	return current.on && current.assigned && setting != nullptr && setting->stack != nullptr;
}

} // namespace fencing
