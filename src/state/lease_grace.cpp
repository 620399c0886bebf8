/*
 * The durable horizon of leases (lease_grace.hpp): the settings, the server
 * epoch and fencing_internal._lease_epoch().
 *
 * The epoch must change whenever WAL that was written but not flushed can
 * have been lost: a restart (the postmaster's start time), a crash of a
 * backend, after which the postmaster reinitialises shared memory and
 * replays only what was flushed (the time shared memory was set up, kept
 * there), and a promotion (the timeline).  The system identifier tells a
 * restored copy from the original.
 */
#include "state/lease_grace.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/xlog.h"
#include "common/hashfn.h"
#include "datatype/timestamp.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"
}

namespace fencing
{

int lease_grace = 10000;
int lease_durability = durability_grace;
const struct config_enum_entry lease_durability_options[] = {
    {"grace", durability_grace, false}, {"always", durability_always, false}, {nullptr, 0, false}};

namespace
{

/* When this server's shared memory was set up (preloaded only). */
struct EpochStart {
	TimestampTz started;
};
FENCING_PLAIN_DATA(EpochStart);

EpochStart *epoch_start = nullptr;

void attach_epoch_start(void *memory, bool found, LWLockPadded *)
{
	epoch_start = static_cast<EpochStart *>(memory);
	if (!found)
		epoch_start->started = GetCurrentTimestamp();
}

} // namespace

const SharedArea lease_epoch_area =
    shared_struct("fencing lease epoch", size_of<EpochStart>, attach_epoch_start);

int64 lease_epoch()
{
	if (RecoveryInProgress())
		return 0;
	struct {
		uint64 system;
		TimestampTz postmaster;
		TimestampTz shared_memory;
		uint32 timeline;
	} parts;
	memset(&parts, 0, sizeof parts);
	parts.system = GetSystemIdentifier();
	parts.postmaster = PgStartTime;
	parts.shared_memory = epoch_start != nullptr ? epoch_start->started : 0;
	parts.timeline = GetWALInsertionTimeLine();
	uint64 hash = DatumGetUInt64(
	    hash_any_extended(reinterpret_cast<unsigned char *>(&parts), sizeof parts, 0));
	/* Positive and never 0 (0 means none). */
	return static_cast<int64>((hash >> 1) | 1);
}

bool lease_flush_optional()
{
	return lease_durability == durability_grace && epoch_start != nullptr;
}

Datum lease_grace_interval()
{
	auto *interval = static_cast<Interval *>(palloc0(sizeof(Interval)));
	interval->time = lease_flush_optional() ? int64{lease_grace} * 1000 : 0;
	return PointerGetDatum(interval);
}

} // namespace fencing

/*
 * _lease_epoch() RETURNS bigint: this server's epoch (NULL during recovery),
 * for fencing.leases to tell rows written before the last restart or
 * promotion.
 */
FENCING_FUNCTION(fencing_lease_epoch)
{
	int64 epoch = fencing::lease_epoch();
	if (epoch == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(epoch);
}
