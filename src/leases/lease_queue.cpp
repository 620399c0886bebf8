/*
 * The queue of waiting acquire() calls, in shared memory: one record per
 * backend (indexed by its process number), holding the resource it waits for
 * (a 64-bit hash of database and name) and its arrival number.  The first in
 * line of a resource is its active record with the lowest arrival; only that
 * one tries to grant, so waiters are served first come, first served, and a
 * call without wait that finds any record of its resource gives way.
 *
 * Only the first in line is woken: by the commit of a release() of its
 * resource, and when the record before it goes - the waiter before it left
 * (granted... or not) or the transaction of that waiter's grant ended: a
 * granted waiter stays first in line until then, so that the next one does
 * not take the uncommitted grant for a free lease and wait for its row lock.
 * Waking one process per handoff, not all waiters of the resource, keeps the
 * handoff fast with many waiters.  A wakeup sets the record's `woken` and
 * then the process's latch: the flag is not lost when code between the
 * waiter's look at the lease and its sleep (a lock wait) resets the latch.
 * The first in line also sleeps until the holder's expiry, as acquire()
 * tells it (acquire.cpp).
 *
 * A record is cleared on every way out: the grant's commit or abort, an
 * error (acquire.cpp's PG_CATCH), the backend's exit.
 */
#include "leases/lease_queue.hpp"
#include "base/compat.hpp"

extern "C" {
#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
}

namespace fencing
{

namespace
{

/* One backend's place: waiting, or granted and first in line until its transaction ends. */
struct QueueRecord {
	uint64 resource;
	uint64 arrival;
	bool active;
	bool granted;
	bool woken; /* set by a waker, cleared by the waiter before it looks */
};

struct SharedQueue {
	uint64 next_arrival;     /* under the lock */
	pg_atomic_uint32 active; /* active records, changed under the lock: a try reads it without */
	int records;             /* MaxBackends */
	QueueRecord record[FLEXIBLE_ARRAY_MEMBER];
};
FENCING_PLAIN_DATA(SharedQueue);

SharedQueue *queue = nullptr; /* nullptr when not preloaded */
LWLock *queue_lock = nullptr;

/* This backend's record held for a grant until its (sub)transaction ends; -1: none. */
int held_slot = -1;
SubTransactionId held_in = InvalidSubTransactionId;

/* Resources that this transaction's release() calls freed, woken at commit. */
constexpr int wakes_kept = 16;
uint64 wakes[wakes_kept];
int wake_count = 0;
bool wake_everyone = false; /* more than wakes_kept of them */

bool exit_callback_registered = false;

Size queue_size()
{
	return add_size(offsetof(SharedQueue, record),
	                mul_size(sizeof(QueueRecord), static_cast<Size>(MaxBackends)));
}

void attach_queue(void *memory, bool found, LWLockPadded *locks)
{
	queue_lock = &locks[0].lock;
	queue = static_cast<SharedQueue *>(memory);
	if (!found) {
		queue->next_arrival = 1;
		pg_atomic_init_u32(&queue->active, 0);
		queue->records = MaxBackends;
	}
}

} // namespace

const SharedArea lease_queue_area =
    shared_struct("fencing lease queue", queue_size, attach_queue, "fencing lease queue", 1);

namespace
{

/* Wakes a record's process; call with the lock held. */
void wake(int slot)
{
	queue->record[slot].woken = true;
	SetLatch(&GetPGProcByNumber(slot)->procLatch);
}

/*
 * Wakes the first in line of `resource` if it waits (a granted one is woken
 * by nothing: its transaction's end wakes the next); call with the lock held.
 */
void wake_first(uint64 resource)
{
	int first = -1;
	for (int i = 0; i < queue->records; i++) {
		const QueueRecord &r = queue->record[i];
		if (r.active && r.resource == resource &&
		    (first < 0 || r.arrival < queue->record[first].arrival))
			first = i;
	}
	if (first >= 0 && !queue->record[first].granted)
		wake(first);
}

/* Clears a record and wakes the one behind it. */
void clear_record(int slot)
{
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	QueueRecord *record = &queue->record[slot];
	if (record->active) {
		record->active = false;
		pg_atomic_sub_fetch_u32(&queue->active, 1);
		wake_first(record->resource);
	}
	LWLockRelease(queue_lock);
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

/* Wakes the first in line of each resource this transaction released. */
void wake_released()
{
	if (wake_count == 0 && !wake_everyone)
		return;
	LWLockAcquire(queue_lock, LW_SHARED);
	if (wake_everyone) {
		for (int i = 0; i < queue->records; i++)
			if (queue->record[i].active && !queue->record[i].granted)
				wake(i);
	} else
		for (int i = 0; i < wake_count; i++)
			wake_first(wakes[i]);
	LWLockRelease(queue_lock);
}

} // namespace

/*
 * At commit: wake the first waiter of what this transaction released, and
 * let the next waiter behind this transaction's grant look (it finds the
 * lease held and sleeps until its expiry).  At abort or PREPARE the grant's
 * place goes too (a prepared release wakes nobody: waiters see it at the
 * holder's expiry or their own deadline, docs/leases.md).
 */
void lease_queue_end_of_transaction(XactEvent event)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
		release_held_place();
		wake_released();
		wake_count = 0;
		wake_everyone = false;
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
		release_held_place();
		wake_count = 0;
		wake_everyone = false;
		break;
	default:
		break;
	}
}

/* The subtransaction of a grant rolled back: the lease is free again, the place goes. */
void lease_queue_end_of_subtransaction(SubXactEvent event, SubTransactionId subid,
                                       SubTransactionId parent)
{
	if (held_slot < 0 || subid != held_in)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		release_held_place();
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		held_in = parent;
}

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
	/* Nobody waits anywhere, the common case: no lock, no scan. */
	if (pg_atomic_read_u32(&queue->active) == 0)
		return false;
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
	if (!queue->record[slot].active)
		pg_atomic_add_fetch_u32(&queue->active, 1);
	queue->record[slot] = QueueRecord{resource, queue->next_arrival++, true, false, false};
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
	/* Wakeups before this moment are seen by the look that follows. */
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	queue->record[place->slot].woken = false;
	LWLockRelease(queue_lock);
}

void queue_sleep(const QueuePlace *place, long timeout_ms)
{
	LWLockAcquire(queue_lock, LW_SHARED);
	bool woken = queue->record[place->slot].woken;
	LWLockRelease(queue_lock);
	if (!woken)
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, timeout_ms,
		                lease_wait_event());
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

void leave_queue(QueuePlace *place)
{
	clear_record(place->slot);
}

void hold_place_until_commit(QueuePlace *place)
{
	LWLockAcquire(queue_lock, LW_EXCLUSIVE);
	queue->record[place->slot].granted = true;
	LWLockRelease(queue_lock);
	held_slot = place->slot;
	held_in = GetCurrentSubTransactionId();
}

void wake_queue_at_commit(const char *resource)
{
	if (queue == nullptr)
		return;
	uint64 key = queue_key(resource);
	for (int i = 0; i < wake_count; i++)
		if (wakes[i] == key)
			return;
	if (wake_count < wakes_kept)
		wakes[wake_count++] = key;
	else
		wake_everyone = true;
}

} // namespace fencing
