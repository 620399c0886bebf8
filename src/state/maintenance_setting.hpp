/*
 * The fencing.maintenance setting (defined in entry/settings.cpp): a
 * transaction asks for maintenance writes, which the guard accepts without a
 * token from a protected table's owner or named maintainer.  Like
 * fencing.token, it counts only in the transaction that set it, also when
 * set with a plain SET: a pooled connection never hands it on.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "utils/guc.h"
}

namespace fencing
{

/* Did this transaction ask for maintenance writes (SET LOCAL fencing.maintenance = on)? */
bool maintenance_requested();

/* The setting's variable and hooks (entry/settings.cpp). */
extern bool maintenance_setting_value;
bool check_maintenance(bool *newval, void **extra, GucSource source);
void assign_maintenance(bool newval, void *extra);

/* Once the setting is defined: finds its entry, where PostgreSQL keeps its stack. */
void maintenance_setting_defined();

} // namespace fencing
