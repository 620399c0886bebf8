/*
 * The executor hooks that refuse a MERGE the row guard could not judge.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* Installs the ExecutorStart and ExecutorFinish hooks (from _PG_init). */
void install_merge_check();

} // namespace fencing
