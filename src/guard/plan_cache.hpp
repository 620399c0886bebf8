/*
 * Prepared plans of fenced_update(), kept per backend and keyed by the
 * statement's shape: (table, token column, mode, key columns, changed
 * columns).  Like ri_triggers.c: SPI_keepplan, and rebuilt when
 * SPI_plan_is_valid says the table changed under them.  The cache is
 * bounded (least recently used shapes go first) and forgets the plans of a
 * table as soon as the table is invalidated (dropped, altered).
 */
#pragma once

#include "base/boundary.hpp"

extern "C" {
#include "access/attnum.h"
#include "executor/spi.h"
}

namespace fencing
{

/* Shapes kept per backend; each holds two plans of some tens of kB. */
constexpr int plan_cache_capacity = 128;

/* What a fenced_update() statement looks like; its plans depend on nothing else. */
struct PlanShape {
	Oid relid;
	AttrNumber token_attnum;
	bool strict;
	int nkeys;
	int nchanged;
	const AttrNumber *columns; /* key columns, then changed columns */
};
FENCING_PLAIN_DATA(PlanShape);

/* The two statements of one shape: the fenced UPDATE and the probe that explains a miss. */
struct FencedPlans {
	SPIPlanPtr update;
	SPIPlanPtr probe;
	int users; /* calls running them now: a nested call must not free them */
};
FENCING_PLAIN_DATA(FencedPlans);

/*
 * The cached plans of `shape`, or nullptr when there are none or the table
 * changed since they were prepared.
 */
FencedPlans *find_plans(const PlanShape &shape);

/*
 * Keeps freshly prepared plans for `shape`, replacing older ones, and returns
 * them; nullptr (the plans are then not kept) while the older ones are in use.
 */
FencedPlans *keep_plans(const PlanShape &shape, SPIPlanPtr update, SPIPlanPtr probe);

} // namespace fencing
