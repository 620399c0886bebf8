/*
 * What fencing.protect() and the DDL event trigger ask of the catalogs: see
 * catalog_checks.cpp.
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "nodes/primnodes.h"
}

namespace fencing
{

/*
 * The relations a DETACH PARTITION named: PostgreSQL does not tell event
 * triggers which one it detached, and the name it was given may be
 * unqualified, to be read under a search_path the event trigger does not
 * have.  So: the tables of that name (in that schema if one was given) that
 * are no longer partitions and whose catalog row this transaction changed.
 * Only tables: a view or anything else of that name is never one.
 */
List *detached_relations(const RangeVar *name);

} // namespace fencing
