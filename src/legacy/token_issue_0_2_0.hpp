/*
 * Serves 0.1.0's and 0.2.0's objects (until ALTER EXTENSION fencing
 * UPDATE) where tokens are issued (state/token_issue.cpp): 0.2.0's
 * fencing.token_timelines has no generation column, and 0.1.0 keeps no
 * token history at all.  Each function does its part with those objects and
 * returns true, and with the current ones does nothing and returns false.
 * Called inside SPI_connect.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/*
 * 0.1.0 and 0.2.0: the base of this system's generations.  0.2.0 records
 * no generations: the first tokens of its rows carry them (the same base as
 * the current objects give, pg_upgrade before the update being a new
 * system), which the update records (sql/upgrade/0.2.0--0.3.0.sql); 0.1.0
 * has no rows: base 1.
 */
bool generation_base_0_2_0(int64 *base);

/* 0.2.0 (and 0.1.0): records the history row of `token` without a generation. */
bool record_history_0_2_0(int64 token);

/* 0.1.0: keeps no token history, so no failover margin; the clock still bounds tokens. */
bool no_history_0_1_0();

} // namespace fencing
