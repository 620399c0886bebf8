/*
 * Serves 0.1.0's objects (until ALTER EXTENSION fencing UPDATE): a key's
 * marks are one row of fencing.deleted_keys, named by the key's text
 * (key_text_0_1_0.hpp), under the top table of the row's partition tree;
 * there are no floors.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* 0.1.0: the mark of `key_text` under `top`, as of the latest committed state; false if none. */
bool find_mark_0_1_0(Oid top, Datum key_text, int64 *mark);

/* 0.1.0: records `token` as the mark of `key_text` under `top`; never lowers it. */
void record_mark_0_1_0(Oid top, Datum key_text, int64 token);

} // namespace fencing
