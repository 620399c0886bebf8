/*
 * Superuser settings defined after the session started (the module loaded
 * late, without shared_preload_libraries): PostgreSQL then applies the values
 * it kept for the names, and refuses those that the session set without the
 * right to (connection options, SET, a role's own setting), falling back to
 * the built-in default, not to the database's, the role's or the server's
 * value.  A setting that lost its configured value so refuses the features
 * that read it for the rest of the session (docs/operations.md, SECURITY.md).
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace fencing
{

/* Where a setting's current and reset values came from. */
struct SettingSources {
	GucSource source;
	GucSource reset_source;
};
FENCING_PLAIN_DATA(SettingSources);

/* The sources of `name`'s values (its placeholder's before it is defined); DEFAULT if unknown. */
SettingSources setting_sources(const char *name);

/*
 * Notes that `name` (a string constant) lost a configured value if its
 * sources after its definition are not those its placeholder had before.
 */
void note_definition(const char *name, SettingSources before);

/* Defines a superuser setting with define() and notes whether it kept its configured values. */
template <typename Define> void define_superuser_setting(const char *name, Define define)
{
	SettingSources before = setting_sources(name);
	define();
	note_definition(name, before);
}

/* Errors (55000) if `name` lost its configured value when the module loaded in this session. */
void require_configured(const char *name);

} // namespace fencing
