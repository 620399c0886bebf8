/*
 * Superuser settings that lost their configured value when the module loaded
 * late: see late_load.hpp.
 */
#include "base/late_load.hpp"
#include "base/compat.hpp"

namespace fencing
{

namespace
{

/* The settings that lost a configured value in this session (string constants). */
constexpr int max_lost = 8;
const char *lost[max_lost];
int nlost = 0;

} // namespace

SettingSources setting_sources(const char *name)
{
	const config_generic *setting = find_setting(name);
	if (setting == nullptr)
		return SettingSources{PGC_S_DEFAULT, PGC_S_DEFAULT};
	return SettingSources{setting->source, setting->reset_source};
}

void note_definition(const char *name, SettingSources before)
{
	SettingSources after = setting_sources(name);
	if (after.source == before.source && after.reset_source == before.reset_source)
		return;
	if (nlost == max_lost)
		elog(ERROR, "fencing: more than %d settings lost their configured value", max_lost);
	lost[nlost++] = name;
}

void require_configured(const char *name)
{
	for (int i = 0; i < nlost; i++)
		if (strcmp(lost[i], name) == 0)
			ereport(ERROR,
			        (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			         errmsg("setting \"%s\" lost its configured value in this session", name),
			         errdetail("The module loaded after the session started, and a value kept "
			                   "for the setting was refused then (see that WARNING): one set for "
			                   "this session (connection options, SET or a role setting) without "
			                   "the right to, which only a superuser or a role granted SET on it "
			                   "has, or an invalid one. PostgreSQL then falls back to the built-in "
			                   "default, not to the database's or the server's value."),
			         errhint("Reconnect without setting %s, correct its configured value, or add "
			                 "fencing to shared_preload_libraries (then such a connection is "
			                 "refused).",
			                 name)));
}

} // namespace fencing
