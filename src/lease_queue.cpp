/*
 * The queue of waiting acquire() calls, in shared memory: one record per
 * backend (indexed by its process number), holding the resource it waits for
 * (a 64-bit hash of database and name) and its arrival number.  The first in
 * line of a resource is its active record with the lowest arrival; only that
 * one tries to grant, so waiters are served first come, first served, and a
 * call without wait that finds any record of its resource gives way.
 *
 * Waiters sleep on one of a fixed array of condition variables, chosen by
 * the resource's hash.  A release() broadcasts on it when its transaction
 * commits, a waiter when it leaves the queue, and a waiter that was granted
 * when the transaction of its grant ends: until then its record stays first
 * in line, so that the next one does not take the uncommitted grant for a
 * free lease and wait for its row lock.  The first in line also sleeps until
 * the holder's expiry, as acquire() tells it (acquire.cpp).
 *
 * A record is cleared on every way out: the grant's commit or abort, an
 * error (acquire.cpp's PG_CATCH), the backend's exit.
 */
#include "lease_queue.hpp"
#include "compat.hpp"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace fencing
{

namespace
{

/* Condition variables shared by all resources: a wakeup goes to those of one of them. */
constexpr int sleep_slots = 128;

/* One backend's place: waiting, or granted and first in line until its transaction ends. */
struct QueueRecord {
	uint64 resource;
	uint64 arrival;
	bool active;
};

struct SharedQueue {
	uint64 next_arrival; /* under the lock */
	int records;         /* MaxBackends */
	ConditionVariable sleepers[sleep_slots];
	QueueRecord record[FLEXIBLE_ARRAY_MEMBER];
};
FENCING_PLAIN_DATA(SharedQueue);

SharedQueue *queue = nullptr; /* nullptr when not preloaded */
LWLock *queue_lock = nullptr;

shmem_request_hook_type previous_request = nullptr;
shmem_startup_hook_type previous_startup = nullptr;

/* This backend's record held for a grant until its (sub)transaction ends; -1: none. */
int held_slot = -1;
SubTransactionId held_in = InvalidSubTransactionId;

/* Resources that this transaction's release() calls freed, woken at commit. */
constexpr int wakes_kept = 16;
uint64 wakes[wakes_kept];
int wake_count = 0;
bool wake_every_slot = false; /* more than wakes_kept of them */

bool exit_callback_registered = false;

Size queue_size()
{
	return add_size(offsetof(SharedQueue, record),
	                mul_size(sizeof(QueueRecord), static_cast<Size>(MaxBackends)));
}

void request_queue()
{
	if (previous_request != nullptr)
		previous_request();
	RequestAddinShmemSpace(queue_size());
	RequestNamedLWLockTranche("fencing lease queue", 1);
}

void start_queue()
{
	if (previous_startup != nullptr)
		previous_startup();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	queue_lock = &GetNamedLWLockTranche("fencing lease queue")[0].lock;
	bool found;
	queue =
	    static_cast<SharedQueue *>(ShmemInitStruct("fencing lease queue", queue_size(), &found));
	if (!found) {
		queue->next_arrival = 1;
		queue->records = MaxBackends;
		for (auto &sleeper : queue->sleepers)
			ConditionVariableInit(&sleeper);
		for (int i = 0; i < queue->records; i++)
			queue->record[i] = QueueRecord{0, 0, false};
	}
	LWLockRelease(AddinShmemInitLock);
}

ConditionVariable *sleeper_of(uint64 resource)
{
	return &queue->sleepers[resource % sleep_slots];
}

/* Clears a record and wakes those who wait behind it. */
void clear_record(int slot)
{
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	QueueRecord *record = &queue->record[slot];
	bool was_active = record->active;
	uint64 resource = record->resource;
	record->active = false;
	LWLockRelease(queue_lock);
	if (was_active)
		ConditionVariableBroadcast(sleeper_of(resource));
}

void release_held_place()
{
	if (held_slot < 0)
		return;
	int slot = held_slot;
	held_slot = -1;
	held_in = InvalidSubTransactionId;
	clear_record(slot);
}

/* The backend exits (also FATAL, pg_terminate_backend()): its record goes. */
void clear_on_exit(int, Datum)
{
	if (queue == nullptr)
		return;
	held_slot = -1;
	int slot = my_proc_number();
	if (slot >= 0 && slot < queue->records)
		clear_record(slot);
}

/*
 * At commit: wake the waiters of what this transaction released and let the
 * next waiter behind this transaction's grant try (it finds the lease held
 * and sleeps until its expiry).  At abort or PREPARE the grant's place goes
 * too (a prepared release wakes nobody: waiters see it at the holder's
 * expiry or their own deadline, docs/leases.md).
 */
void end_of_transaction(XactEvent event, void *)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		release_held_place();
		if (wake_every_slot) {
			for (auto &sleeper : queue->sleepers)
				ConditionVariableBroadcast(&sleeper);
		} else
			for (int i = 0; i < wake_count; i++)
				ConditionVariableBroadcast(sleeper_of(wakes[i]));
		wake_count = 0;
		wake_every_slot = false;
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
		release_held_place();
		wake_count = 0;
		wake_every_slot = false;
		break;
	default:
		break;
	}
}

/* The subtransaction of a grant rolled back: the lease is free again, the place goes. */
void end_of_subtransaction(SubXactEvent event, SubTransactionId subid, SubTransactionId parent,
                           void *)
{
	if (held_slot < 0 || subid != held_in)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		release_held_place();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		held_in = parent;
}

} // namespace

bool queue_available()
{
	return queue != nullptr;
}

uint64 queue_key(const char *resource)
{
	return hash_bytes_extended(reinterpret_cast<const unsigned char *>(resource),
	                           static_cast<int>(strlen(resource)), MyDatabaseId);
}

bool anyone_queued(uint64 resource)
{
	int mine = my_proc_number();
	bool found = false;
	LWLockAcquire(queue_lock, LW_SHARED);
	for (int i = 0; i < queue->records && !found; i++)
		found = i != mine && queue->record[i].active && queue->record[i].resource == resource;
	LWLockRelease(queue_lock);
	return found;
}

bool join_queue(uint64 resource, QueuePlace *place)
{
	int slot = my_proc_number();
	if (slot < 0 || slot >= queue->records)
		return false;
	if (!exit_callback_registered) {
		before_shmem_exit(clear_on_exit, 0);
		exit_callback_registered = true;
	}
	/*
	 * One record per backend: a grant of this transaction still first in
	 * line for another resource gives its place up (the next waiter there
	 * waits for the grant's row lock instead, until this transaction ends).
	 */
	release_held_place();
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	queue->record[slot] = QueueRecord{resource, queue->next_arrival++, true};
	LWLockRelease(queue_lock);
	place->resource = resource;
	place->slot = slot;
	return true;
}

bool first_in_queue(const QueuePlace *place)
{
	bool first = true;
	LWLockAcquire(queue_lock, LW_SHARED);
	uint64 mine = queue->record[place->slot].arrival;
	for (int i = 0; i < queue->records && first; i++) {
		const QueueRecord &other = queue->record[i];
		first = !(other.active && other.resource == place->resource && other.arrival < mine);
	}
	LWLockRelease(queue_lock);
	return first;
}

void prepare_queue_sleep(const QueuePlace *place)
{
	ConditionVariablePrepareToSleep(sleeper_of(place->resource));
}

void queue_sleep(const QueuePlace *place, long timeout_ms)
{
	(void)ConditionVariableTimedSleep(sleeper_of(place->resource), timeout_ms, lease_wait_event());
}

void leave_queue(QueuePlace *place)
{
	ConditionVariableCancelSleep();
	clear_record(place->slot);
}

void hold_place_until_commit(QueuePlace *place)
{
	ConditionVariableCancelSleep();
	held_slot = place->slot;
	held_in = GetCurrentSubTransactionId();
}

void wake_queue_at_commit(const char *resource)
{
	if (queue == nullptr)
		return;
	uint64 key = queue_key(resource);
	for (int i = 0; i < wake_count; i++)
		if (wakes[i] % sleep_slots == key % sleep_slots)
			return;
	if (wake_count < wakes_kept)
		wakes[wake_count++] = key;
	else
		wake_every_slot = true;
}

void install_lease_queue()
{
	if (!process_shared_preload_libraries_in_progress)
		return;
	previous_request = shmem_request_hook;
	shmem_request_hook = request_queue;
	previous_startup = shmem_startup_hook;
	shmem_startup_hook = start_queue;
	RegisterXactCallback(end_of_transaction, nullptr);
	RegisterSubXactCallback(end_of_subtransaction, nullptr);
}

} // namespace fencing
