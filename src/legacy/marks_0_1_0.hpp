/*
 * Serves 0.1.0's objects (until ALTER EXTENSION fencing UPDATE): a key's
 * marks are one row of fencing.deleted_keys, named by the key's text
 * (key_text_0_1_0.hpp), under the top table of the row's partition tree;
 * there are no floors.  Each function does its part with 0.1.0's objects
 * and returns true, and with a later release's does nothing and returns
 * false (state/marks.cpp then does the current release's).
 */
#pragma once

#include "catalog/keys.hpp"

namespace fencing
{

/*
 * 0.1.0: the mark of `key` under `top`, as of the latest committed state,
 * in *mark (*found: whether there is one).
 */
bool find_mark_0_1_0(Oid top, const KeyHash &key, int64 *mark, bool *found);

/* 0.1.0: records `token` as the mark of `key` under `top`; never lowers it. */
bool record_mark_0_1_0(Oid top, const KeyHash &key, int64 token);

/* 0.1.0: no floors, so every relation's is 0. */
bool floor_0_1_0(int64 *floor);

/* 0.1.0: no floor can be raised: errors (55000) until the update; nothing with later objects. */
void refuse_floor_0_1_0();

} // namespace fencing
