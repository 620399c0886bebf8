/*
 * The executor hooks that refuse a MERGE the row guard could not judge.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "executor/execdesc.h"
}

namespace fencing
{

/*
 * Refuses a MERGE whose UPDATE actions disagree about a protected table's
 * token column (0A000); from ExecutorStart and ExecutorFinish.
 */
void merge_check(const QueryDesc *query);

} // namespace fencing
