/*
 * Leases renewed without a flush, bounded by a durable horizon (README.md,
 * "Renewals without a flush"). Included by fencing.pml with -DGRACE.
 *
 * One resource, WORKERS workers, discrete time (a tick process, up to TMAX),
 * ttl TTL and grace G. Server P (the primary) keeps its lease row in memory
 * (what its transactions see), flushed on disk, and on its synchronous
 * standby; Q is that standby once promoted. A row is (holder, token,
 * expires, grace_until, released, epoch of its last durable write).
 *
 *   grant    durable: flushed, confirmed by the standby; grace_until =
 *            now + TTL + G
 *   renew    within grace_until: memory only (no flush), the epoch kept;
 *            beyond it: durable, grace_until moved to now + TTL + G
 *   release  memory only
 *   flush    P's WAL writer: anything P has committed reaches its disk, any time
 *   stream   what P flushed reaches the standby, any time
 *   crash    at most once: P's memory is replaced by what it flushed; a new epoch
 *   promote  at most once: Q starts from the standby's copy, in an epoch of
 *            its own; P keeps running (two primaries) but can no longer
 *            confirm a durable write (its standby is gone)
 *
 * A row written in another epoch than its server's and not released is held
 * until the later of expires and grace_until. A worker believes it holds the
 * lease until its last acknowledged grant or renewal + TTL, and stops
 * believing when it starts a release. P12: no grant to one worker while
 * another believes it holds the lease.
 *
 *   NO_HORIZON   renewals are never flushed and nothing is held after a crash
 *                or promotion: P12 fails (a lost renewal)
 *   NO_HOLD      renewals within the horizon as designed, but nothing is held
 *                after a crash or promotion: P12 fails (a lost renewal)
 *   RELAXED_EPOCH  a renewal without a flush marks the row as of its server's
 *                epoch: P12 fails (the old primary renews up to the horizon
 *                the new one no longer holds)
 *   UNCONFIRMED  durable writes are flushed but not confirmed by the standby
 *                before they are acknowledged: P12 fails (a promotion)
 */

#ifndef WORKERS
#define WORKERS 2
#endif
#ifndef GRANTS
#define GRANTS 3
#endif
#ifndef TMAX
#define TMAX 6
#endif
#define TTL 2
#define G 2
#define name(me) ((me) + 'A' - 1)
#define max(a, b) ((a) > (b) -> (a) : (b))

/* Rows: 0 P's memory, 1 Q's memory, 2 P's disk, 3 P's standby. */
#define PMEM 0
#define QMEM 1
#define PDISK 2
#define STANDBY 3
byte holder[4], tok[4], exp[4], gr[4], ep[4];
bool rel[4];
#define copy(to, from) \
    holder[to] = holder[from]; tok[to] = tok[from]; exp[to] = exp[from]; \
    gr[to] = gr[from]; rel[to] = rel[from]; ep[to] = ep[from]

byte now;               /* the clock */
byte epoch[2];          /* P's and Q's epochs */
byte epochs = 1;        /* the last epoch handed out */
bool promoted;          /* Q runs (and P can no longer confirm) */
bool crashed;
byte counter;           /* tokens */
byte grants;
byte bel[WORKERS + 1];  /* a worker believes it holds the lease while now < bel */

#if defined(NO_HORIZON) || defined(NO_HOLD)
#define held_until(s) exp[s]
#else
#define held_until(s) ((ep[s] != epoch[s] && !rel[s]) -> max(exp[s], gr[s]) : exp[s])
#endif
#define live(s) (holder[s] != 0 && !rel[s] && held_until(s) > now)
#define up(s) ((s) == PMEM || promoted)
/* A durable write on s is acknowledged: P flushes and waits for its standby */
#ifdef UNCONFIRMED
#define can_confirm(s) ((s) == QMEM || true)
#define confirm(s) if :: (s) == PMEM -> copy(PDISK, PMEM) :: else -> skip fi
#else
#define can_confirm(s) ((s) == QMEM || !promoted)
#define confirm(s) if :: (s) == PMEM -> copy(PDISK, PMEM); copy(STANDBY, PDISK) :: else -> skip fi
#endif

inline no_other_belief(me)
{
    i = 1;
    do
    :: i > WORKERS -> break
    :: i <= WORKERS ->
        if
        :: i != me && bel[i] > now ->
            printf("P12 violated: %c is granted the lease at %d while %c believes it holds it until %d\n",
                   name(me), now, name(i), bel[i]);
            assert(false)
        :: else -> skip
        fi;
        i++
    od
}

proctype worker(byte me)
{
    byte s, t, i;
end:
    do
    :: /* acquire(), on a server that is up and can confirm */
        if :: s = PMEM :: s = QMEM fi;
        d_step {
            up(s) && can_confirm(s) && !live(s) && grants < GRANTS ->
            no_other_belief(me);
            counter++; grants++; t = counter;
            holder[s] = me; tok[s] = t; exp[s] = now + TTL; gr[s] = now + TTL + G;
            rel[s] = false; ep[s] = epoch[s];
            confirm(s);
            bel[me] = now + TTL;
            printf("%c acquires on %c at %d: token %d, expires %d, grace_until %d\n",
                   name(me), (s == PMEM -> 'P' : 'Q'), now, t, exp[s], gr[s])
        }
    :: /* renew(): within the horizon without a flush, else durable */
        if :: s = PMEM :: s = QMEM fi;
        d_step {
            t != 0 && up(s) && holder[s] == me && tok[s] == t && live(s) ->
            if
#ifdef NO_HORIZON
            :: true ->
#else
            :: now + TTL <= gr[s] ->
#endif
                exp[s] = now + TTL; bel[me] = now + TTL;
#ifdef RELAXED_EPOCH
                ep[s] = epoch[s];
#endif
                printf("%c renews on %c at %d without a flush: expires %d\n",
                       name(me), (s == PMEM -> 'P' : 'Q'), now, exp[s])
            :: else ->
                if
                :: can_confirm(s) ->
                    exp[s] = now + TTL; gr[s] = now + TTL + G; ep[s] = epoch[s];
                    confirm(s);
                    bel[me] = now + TTL;
                    printf("%c renews on %c at %d, durable: expires %d, grace_until %d\n",
                           name(me), (s == PMEM -> 'P' : 'Q'), now, exp[s], gr[s])
                :: else -> skip /* the commit waits for a standby that is gone: no answer */
                fi
            fi
        }
    :: /* release(): the worker stops believing first; never flushed */
        if :: s = PMEM :: s = QMEM fi;
        d_step {
            t != 0 && up(s) ->
            bel[me] = 0;
            if
            :: holder[s] == me && tok[s] == t && live(s) -> rel[s] = true
            :: else -> skip
            fi;
            printf("%c releases token %d on %c at %d\n", name(me), t, (s == PMEM -> 'P' : 'Q'), now);
            t = 0
        }
    :: /* the worker gives up its lease without releasing it */
        d_step { t != 0 -> t = 0 }
    od
}

active proctype environment()
{
end:
    do
    :: d_step { now < TMAX -> now++ }
    :: d_step { copy(PDISK, PMEM) }                       /* P's WAL writer flushes */
    :: d_step { !promoted -> copy(STANDBY, PDISK) }       /* the standby receives it */
    :: d_step {
           !crashed && !promoted -> crashed = true;
           copy(PMEM, PDISK); epochs++; epoch[0] = epochs;
           printf("P crashes at %d and restarts from its disk: expires %d, grace_until %d\n",
                  now, exp[PMEM], gr[PMEM])
       }
    :: d_step {
           !promoted -> promoted = true;
           copy(QMEM, STANDBY); epochs++; epoch[1] = epochs;
           printf("Q is promoted at %d from the standby's copy: expires %d, grace_until %d; P keeps running\n",
                  now, exp[QMEM], gr[QMEM])
       }
    od
}

init
{
    byte w = 1;
    epoch[0] = 1;
    atomic {
        do
        :: w <= WORKERS -> run worker(w); w++
        :: else -> break
        od
    }
}
