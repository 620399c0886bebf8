/*
 * Serves 0.3.0's objects (until ALTER EXTENSION fencing UPDATE): they have
 * no table of options (fencing.table_options, 0.4.0), so every protected
 * table enforces, without a ceiling or a maintainer.
 */
#pragma once

#include "base/boundary.hpp"

namespace fencing
{

/* 0.3.0 and older: is there no fencing.table_options (every table enforces, no options)? */
bool no_table_options_0_3_0();

} // namespace fencing
