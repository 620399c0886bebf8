/*
 * Leases renewed in memory only, bounded by a durable horizon (README.md,
 * "Renewals in memory only"). Included by fencing.pml with -DGRACE.
 *
 * One resource, WORKERS workers, discrete time (a tick process, up to TMAX),
 * ttl TTL and grace G. Server P (the primary) keeps its lease row in memory
 * (what its transactions see), flushed on disk, and on its synchronous
 * standby; Q is that standby once promoted. A row is (holder, token,
 * expires, grace_until, released, epoch of its last durable write). Each
 * server also has a lease entry in shared memory (holder, token, expires,
 * epoch), written by renewals only and never written to any disk: every
 * reader of the expiry takes the later of the row's and the entry's, when
 * the entry is of the row's (holder, token) and of the server's epoch.
 *
 *   grant    durable: flushed, confirmed by the standby; grace_until =
 *            now + TTL + G
 *   renew    within grace_until: the shared-memory entry only (no row, no
 *            WAL), or, when that memory is full, the row without a flush,
 *            the epoch kept; beyond it: durable, grace_until moved to
 *            now + TTL + G
 *   release  the row, without a flush
 *   flush    P's WAL writer: any row P has committed reaches its disk, any time
 *   stream   what P flushed reaches the standby, any time
 *   crash    at most once: P's rows are replaced by what it flushed, its
 *            shared memory is empty; a new epoch
 *   promote  at most once: Q starts from the standby's copy with an empty
 *            shared memory, in an epoch of its own; P keeps running (two
 *            primaries) but can no longer confirm a durable write (its
 *            standby is gone)
 *
 * A row written in another epoch than its server's and not released is held
 * until the later of expires and grace_until. A worker believes it holds the
 * lease until its last acknowledged grant or renewal + TTL, and stops
 * believing when it starts a release. P12: no grant to one worker while
 * another believes it holds the lease.
 *
 *   NO_HORIZON   renewals are never made durable and nothing is held after
 *                a crash or promotion: P12 fails (a lost renewal)
 *   NO_CLAIM     the horizon is not checked: a renewal beyond grace_until is
 *                kept in memory too: P12 fails (lost at a crash, beyond
 *                what the row holds)
 *   NO_HOLD      renewals within the horizon as designed, but nothing is held
 *                after a crash or promotion: P12 fails (a lost renewal)
 *   MEM_IGNORED  acquire() judges the row alone, not the shared-memory
 *                expiry: P12 fails without any crash
 *   MEM_ON_STANDBY  the standby accepts a renewal within the horizon of its
 *                copy of the row into its own memory (it needs no
 *                transaction id): P12 fails (P never sees it)
 *   MEM_ANY_ENTRY  the shared-memory entry is taken without matching its
 *                holder, token and epoch: P12 still holds (an entry only
 *                lengthens a lease, and a stale one ends before any later
 *                grant's expiry); checked to show what the match is not for
 *   RELAXED_EPOCH  a renewal into the row without a flush (memory full)
 *                marks the row as of its server's epoch: P12 fails (the old
 *                primary renews up to the horizon the new one no longer holds)
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

/* Rows: 0 P's (as its transactions see it), 1 Q's, 2 P's disk, 3 P's standby. */
#define PMEM 0
#define QMEM 1
#define PDISK 2
#define STANDBY 3
byte holder[4], tok[4], exp[4], gr[4], ep[4];
bool rel[4];
/* Shared memory: 0 P's, 1 Q's (before the promotion: the standby's). */
byte mholder[2], mtok[2], mexp[2], mep[2];
#define forget(m) mholder[m] = 0; mtok[m] = 0; mexp[m] = 0; mep[m] = 0
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

/* The shared-memory entry of server s's lease row, if it is that lease's */
#ifdef MEM_ANY_ENTRY
#define mem_of(s) true
#else
#define mem_of(s) (mholder[s] == holder[s] && mtok[s] == tok[s] && mep[s] == epoch[s])
#endif
/* The expiry every reader takes: the later of the row's and the memory's */
#define expiry(s) (mem_of(s) -> max(exp[s], mexp[s]) : exp[s])
#if defined(NO_HORIZON) || defined(NO_HOLD)
#define held_until(s) expiry(s)
#else
#define held_until(s) ((ep[s] != epoch[s] && !rel[s]) -> max(expiry(s), gr[s]) : expiry(s))
#endif
#define live(s) (holder[s] != 0 && !rel[s] && held_until(s) > now)
/* What acquire() judges by */
#ifdef MEM_IGNORED
#define free_for_grant(s) \
    !(holder[s] != 0 && !rel[s] && \
      ((ep[s] != epoch[s] && !rel[s]) -> max(exp[s], gr[s]) : exp[s]) > now)
#else
#define free_for_grant(s) !live(s)
#endif
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
            up(s) && can_confirm(s) && free_for_grant(s) && grants < GRANTS ->
            no_other_belief(me);
            counter++; grants++; t = counter;
            holder[s] = me; tok[s] = t; exp[s] = now + TTL; gr[s] = now + TTL + G;
            rel[s] = false; ep[s] = epoch[s];
#ifndef KEEP_ENTRY
            forget(s);
#endif
            confirm(s);
            bel[me] = now + TTL;
            printf("%c acquires on %c at %d: token %d, expires %d, grace_until %d\n",
                   name(me), (s == PMEM -> 'P' : 'Q'), now, t, exp[s], gr[s])
        }
    :: /* renew(): within the horizon in memory only, else durable */
        if :: s = PMEM :: s = QMEM fi;
        d_step {
            t != 0 && up(s) && holder[s] == me && tok[s] == t && live(s) ->
            if
#if defined(NO_HORIZON) || defined(NO_CLAIM)
            :: true ->
#else
            :: now + TTL <= gr[s] ->
#endif
#ifndef MEM_FULL
                /* the shared-memory entry: no row, no WAL */
                mholder[s] = me; mtok[s] = t; mexp[s] = now + TTL; mep[s] = epoch[s];
                printf("%c renews on %c at %d in memory only: expires %d\n",
                       name(me), (s == PMEM -> 'P' : 'Q'), now, mexp[s]);
#else
                /* the memory is full: the row, without a flush */
                exp[s] = now + TTL;
#ifdef RELAXED_EPOCH
                ep[s] = epoch[s];
#endif
                printf("%c renews on %c at %d, the row without a flush (memory full): expires %d\n",
                       name(me), (s == PMEM -> 'P' : 'Q'), now, exp[s]);
#endif
                bel[me] = now + TTL
            :: else ->
                if
                :: can_confirm(s) ->
                    exp[s] = now + TTL; gr[s] = now + TTL + G; ep[s] = epoch[s];
#ifndef KEEP_ENTRY
                    forget(s); /* its expiry is no later than the row's now */
#endif
                    confirm(s);
                    bel[me] = now + TTL;
                    printf("%c renews on %c at %d, durable: expires %d, grace_until %d\n",
                           name(me), (s == PMEM -> 'P' : 'Q'), now, exp[s], gr[s])
                :: else -> skip /* the commit waits for a standby that is gone: no answer */
                fi
            fi
        }
#ifdef MEM_ON_STANDBY
    :: /* renew() on the standby, before the promotion: its copy of the row,
        * its own memory */
        d_step {
            t != 0 && !promoted && holder[STANDBY] == me && tok[STANDBY] == t && !rel[STANDBY] &&
            max(exp[STANDBY], (mholder[QMEM] == me && mtok[QMEM] == t -> mexp[QMEM] : 0)) > now &&
            now + TTL <= gr[STANDBY] ->
            mholder[QMEM] = me; mtok[QMEM] = t; mexp[QMEM] = now + TTL; mep[QMEM] = 0;
            bel[me] = now + TTL;
            printf("%c renews on the standby at %d in its memory only: expires %d\n", name(me), now, mexp[QMEM])
        }
#endif
    :: /* release(): the worker stops believing first; the row, never flushed */
        if :: s = PMEM :: s = QMEM fi;
        d_step {
            t != 0 && up(s) ->
            bel[me] = 0;
            if
            :: holder[s] == me && tok[s] == t && live(s) ->
                rel[s] = true;
#ifndef KEEP_ENTRY
                forget(s) /* a released row is not live, whatever the memory says */
#endif
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
    byte w;
end:
    do
    :: d_step {
           now < TMAX -> now++;
           /* what no longer counts goes, so that states equal in all that
            * counts are one: a belief that has ended, a memory expiry that
            * has passed */
           w = 1;
           do
           :: w > WORKERS -> break
           :: w <= WORKERS -> if :: bel[w] <= now -> bel[w] = 0 :: else -> skip fi; w++
           od;
           w = 0;
#ifndef KEEP_ENTRY
           if :: mexp[PMEM] <= now -> forget(PMEM) :: else -> skip fi;
           if :: mexp[QMEM] <= now -> forget(QMEM) :: else -> skip fi
#endif
       }
    :: d_step { copy(PDISK, PMEM) }                       /* P's WAL writer flushes */
    :: d_step { !promoted -> copy(STANDBY, PDISK) }       /* the standby receives it */
    :: d_step {
           !crashed && !promoted -> crashed = true;
           copy(PMEM, PDISK); forget(PMEM); epochs++; epoch[0] = epochs;
           printf("P crashes at %d and restarts from its disk, its shared memory empty: expires %d, grace_until %d\n",
                  now, exp[PMEM], gr[PMEM])
       }
    :: d_step {
           !promoted -> promoted = true;
           copy(QMEM, STANDBY); forget(QMEM); epochs++; epoch[1] = epochs;
           printf("Q is promoted at %d from the standby's copy, its shared memory empty: expires %d, grace_until %d; P keeps running\n",
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
