/*
 * fencing: the protocol, model-checked (see README.md in this directory).
 *
 * Lease service, workers that can pause, and the storage guard, small enough
 * for SPIN to explore every interleaving. One file gives the design and the
 * weakened variants through -D switches:
 *
 *   design    (no switch)     the guard, deleted-key marks, truncate floor,
 *                             fence() holding its lock to COMMIT
 *   STRICT                    strict mode (t > s) instead of monotonic (t >= s)
 *   RESET                     the counter can be reset once (Redis without
 *                             persistence); the lease is lost with it
 *   (a) NO_MARKS              re-insert after DELETE ignores the key's mark
 *   (b) SEED                  only UPDATE ... WHERE last_fencing_token < :token
 *   (c) LOCK_ONLY             storage takes any write; the lease is all there is
 *   (e) NO_FLOOR              TRUNCATE leaves no floor
 *   (f) FENCE_UNLOCKED        fence() does not hold the resource lock to COMMIT
 *   (d) is RESET without STRICT (P4), or no STRICT checked for P6
 *   ACQUIRE_ANY               lease service: acquire() ignores a live lease
 *   BY_NAME                   lease service: renew()/release() check the
 *                             holder, not the token
 *   SAME_TOKEN                lease service: acquire() by the last holder
 *                             gives it its last token again
 *
 *   PRIMARIES                 two lock managers: the old primary P keeps
 *                             granting after Q is promoted (a partition, a
 *                             stalled HA agent); tokens (generation, low)
 *   CLOCK_ONLY                with PRIMARIES: tokens are the clock-based low
 *                             only, Q's first MARGIN ahead (0.2.0)
 *
 *   REUSE                     a restarted worker reuses its holder name while
 *                             the old incarnation may still renew/release
 *   NO_WRITES                 workers only acquire, renew and release
 *   NO_FENCE, NO_UNFENCED     leave out fenced writes / the tokenless client
 *   WITNESS                   stop at the first stale UPDATE refused
 *   WORKERS KEYS GRANTS       bounds; PROPS  bit set of checked properties
 *   MARGIN AHEAD              PRIMARIES: 0.2.0's margin; how far P's clock runs ahead
 *
 *   GRACE                     leases renewed without a flush within a durable
 *                             horizon, crash and promotion (lease_grace.pml,
 *                             and its switches NO_HORIZON, UNCONFIRMED, TMAX)
 */

#ifdef GRACE
#include "lease_grace.pml"
#else


#ifndef WORKERS
#define WORKERS 2       /* processes competing for the one resource */
#endif
#ifndef KEYS
#define KEYS 2          /* rows of the protected table */
#endif
#ifndef GRANTS
#define GRANTS 3        /* lease grants in a run: bounds the tokens */
#endif
#ifndef PROPS
#ifdef STRICT
#define PROPS 511       /* bit n-1 checks Pn; 511 = P1..P9 */
#else
#define PROPS 479       /* P6 is strict mode's: all but P6 */
#endif
#endif
#if defined(PRIMARIES) && (defined(RESET) || defined(REUSE) || defined(ACQUIRE_ANY) || defined(BY_NAME) || defined(SAME_TOKEN))
#error "PRIMARIES has a lease service of its own: no RESET, REUSE or lease variant"
#endif
#if defined(CLOCK_ONLY) && !defined(PRIMARIES)
#error "CLOCK_ONLY is a variant of PRIMARIES"
#endif
#if KEYS > 3
#error "any_write() picks one of at most 3 keys"
#endif
#define want(n) ((PROPS & (1 << ((n) - 1))) != 0)

#define max(a, b) ((a) > (b) -> (a) : (b))
#define name(me) ((me) + 'A' - 1)   /* workers are A, B, C in the traces */

/* The one comparison (src/base/token_compare.hpp, fencing::token_accepts). */
#ifdef STRICT
#define accepts(t, stored) ((t) > (stored))
#else
#define accepts(t, stored) ((t) >= (stored))
#endif

/* ------------------------------------------------------------------------
 * Lease service: fencing.acquire/renew/release on one resource.
 * Time is abstract: the server's clock is judged only by the `clock` process,
 * which may let a live lease expire at any moment. That is every pause of a
 * holder longer than the TTL (GC, I/O, SIGSTOP), heartbeat included.
 */
#ifndef PRIMARIES
byte counter;           /* last token issued (fencing.token_seq / INCR) */
byte holder;            /* holder of the lease, 0 = none */
byte ltoken;            /* its token */
bool live;              /* neither released nor expired */
#endif
byte grants;            /* grants so far: the model's bound */

/* ghosts of the reset, for P4 */
bool reset_done;
byte before_reset;      /* highest token issued before the reset */

/* Ghosts of the lease service's specification, for P7..P9, changed only by
 * the events that may start or end a lease: a grant, its expiry, its release,
 * a reset. vt[w] = token of w's live lease, 0 = none (holder names are 1..3);
 * issued = last token granted since the last reset. */
byte vt[4];
byte issued;

#define check(n, cond, why) \
    if \
    :: want(n) && !(cond) -> printf(why); assert(false) \
    :: else -> skip \
    fi

#ifndef PRIMARIES
/* renew(me, t) and release(me, t) find the live lease of (me, t) */
#ifdef BY_NAME
#define lease_is(me, t) (live && holder == (me))    /* the token is not checked */
#else
#define lease_is(me, t) (live && holder == (me) && ltoken == (t))
#endif

/* renew() or release() of (me, t) returned true */
#define lease_true(me, t) \
    check(8, vt[me] != 0 && vt[me] == (t), "P8 violated: renew() or release() returned true for a lease that is not the live one\n")

/* acquire(): granted iff no live lease (none, released or expired); a new
 * token from the global counter. Blocks (retries) while someone holds it. */
inline acquire(me)
{
    d_step {
#ifdef ACQUIRE_ANY
        grants < GRANTS ->      /* a live lease is overwritten */
#else
        !live && grants < GRANTS ->
#endif
#ifdef SAME_TOKEN
        if
        :: holder == me && ltoken != 0 -> skip  /* "welcome back": its last token */
        :: else -> counter++; ltoken = counter
        fi;
#else
        counter++; ltoken = counter;
#endif
        grants++;
        tok = ltoken; grant = grants;
        reissued = (reset_done && tok <= before_reset);
        printf("%c acquires the lease: token %d\n", name(me), tok);
        check(7, vt[1] == 0 && vt[2] == 0 && vt[3] == 0, "P7 violated: a lease granted while another is live\n");
        check(9, tok > issued, "P9 violated: a grant's token is not above the previous grant's (no reset between)\n");
        holder = me; live = true; vt[me] = tok; issued = tok
    }
}

/* release(me, t), true: the lease ends. Inside d_step or atomic. */
inline release_true(me, t)
{
    lease_true(me, t);
    live = false; vt[holder] = 0
}

active proctype clock()
{
end:
    do
    :: d_step { live -> live = false; vt[holder] = 0;
                printf("lease of %c (token %d) expires: its holder was paused past the TTL\n",
                       name(holder), ltoken) }
    od
}

#ifdef RESET
/* Redis restarts without persistence: the counter starts again from 0 and
 * the lease is gone. At most once; at any moment, or never. */
active proctype redis_restart()
{
end:
    d_step {
        before_reset = counter; counter = 0; live = false; reset_done = true;
        vt[1] = 0; vt[2] = 0; vt[3] = 0; issued = 0;
        printf("lock manager restarts: counter reset (highest token issued was %d)\n", before_reset)
    }
}
#endif
#endif /* !PRIMARIES */

#ifdef PRIMARIES
/* ------------------------------------------------------------------------
 * Two lock managers: the old primary P (0) and the new primary Q (1), each
 * with its own lease of the resource and its own token issuer. Q is promoted
 * once, at a moment the search picks, with the state P had replicated to it
 * so far: asynchronous replication may have lost P's tail. After that both
 * grant (a network partition, a stalled HA agent); a worker may acquire from
 * either, and all write to the one storage.
 *
 * A token is (generation, low): P's generation g, Q's g + 1; low follows the
 * server's clock, above the previous low (a hybrid logical clock), so it
 * goes up by at least 1 per grant, and P's clock may run ahead, at any one
 * grant (its low jumps by AHEAD more; once, for the bound). Q's clock does not
 * run ahead: P's is the worst case. Q's low starts at the replicated one; CLOCK_ONLY (0.2.0) has no
 * generation, and Q's first token is MARGIN ahead of it instead.
 */
#ifndef MARGIN
#define MARGIN 2        /* CLOCK_ONLY: Q's first low is MARGIN above P's replicated one */
#endif
#ifndef AHEAD
#define AHEAD (MARGIN + 1)  /* P's clock may run ahead by more than the margin */
#endif
#define LOWS 32         /* lows stay below this: (generation, low) = generation * LOWS + low */
#ifdef CLOCK_ONLY
#define token_of(srv, l) (l)
#else
#define token_of(srv, l) (((srv) + 1) * LOWS + (l))  /* generation first */
#endif
#define srv_name(srv) ((srv) == 0 -> 'P' : 'Q')

byte holder[2];         /* per lock manager, as above */
byte ltoken[2];
bool live[2];
byte low[2];            /* the last low issued */
bool promoted;
bool ahead;             /* P's clock has run ahead (once: by AHEAD) */
byte r_low, r_holder, r_tok;    /* P's state as far as it reached Q, until the promotion */
byte qfirst;            /* ghost for P11: Q's first token (its lowest), 0 = none yet */

/* The worker's `grant` is the leadership of its grant: 1 = P, 2 = Q. */
#define lease_is(me, t) (live[grant - 1] && holder[grant - 1] == (me) && ltoken[grant - 1] == (t))

inline acquire(me)
{
    atomic {
        grants < GRANTS && (!live[0] || promoted && !live[1]) ->
        if
        :: !live[0] -> grant = 1
        :: promoted && !live[1] -> grant = 2
        fi;
        grants++;
        if
        :: grant == 1 ->
            if
            :: low[0] = low[0] + 1
            :: !ahead -> low[0] = low[0] + 1 + AHEAD; ahead = true;
                printf("P's clock runs ahead by %d\n", AHEAD)
            fi;
            tok = token_of(0, low[0]);
            if
            :: !promoted -> r_low = low[0]; r_holder = me; r_tok = tok   /* replicated */
            :: skip             /* not (yet): lost if Q is promoted now */
            fi
        :: else ->
            low[1]++; tok = token_of(1, low[1])
        fi;
        assert(low[grant - 1] < LOWS);
#ifdef CLOCK_ONLY
        printf("%c acquires the lease from %c: token %d\n", name(me), srv_name(grant - 1), tok);
#else
        printf("%c acquires the lease from %c: token %d = (generation %d, low %d)\n",
               name(me), srv_name(grant - 1), tok, grant, low[grant - 1]);
#endif
        check(11, grant == 2 || qfirst == 0 || tok < qfirst, "P11 violated: the old primary issued a token above one of the new primary's\n");
        check(11, grant == 1 || tok > token_of(0, low[0]) || low[0] == 0, "P11 violated: the new primary issued a token not above one of the old primary's\n");
        if
        :: grant == 2 && qfirst == 0 -> qfirst = tok
        :: else -> skip
        fi;
        holder[grant - 1] = me; ltoken[grant - 1] = tok; live[grant - 1] = true
    }
}

/* A lease that ends is forgotten: fewer states, and nothing reads it. */
#define lease_ends(srv) live[srv] = false; holder[srv] = 0; ltoken[srv] = 0

inline release_true(me, t)
{
    lease_ends(grant - 1)
}

/* Each lease expires by its own server's clock, at any moment. */
active proctype clock()
{
end:
    do
    :: d_step { live[0] -> printf("P: lease of %c (token %d) expires\n", name(holder[0]), ltoken[0]);
                lease_ends(0) }
    :: d_step { live[1] -> printf("Q: lease of %c (token %d) expires\n", name(holder[1]), ltoken[1]);
                lease_ends(1) }
    od
}

/* Q is promoted, once, at any moment (or never), with the replicated state:
 * the lease row of P's last replicated grant (live until Q's clock expires
 * it) and its low. */
active proctype promotion()
{
end:
    d_step {
#ifdef CLOCK_ONLY
        low[1] = r_low + MARGIN;
#else
        low[1] = r_low;
#endif
        holder[1] = r_holder; ltoken[1] = r_tok; live[1] = (r_holder != 0);
        promoted = true;
        printf("Q is promoted: P's state replicated so far: low %d, lease token %d; P keeps granting\n", r_low, r_tok);
        r_low = 0; r_holder = 0; r_tok = 0
    }
}
#endif /* PRIMARIES */

/* ------------------------------------------------------------------------
 * Storage: one protected table, rows 0..KEYS-1 keyed by primary key, and
 * one unprotected row U written under fence(). Each statement is one atomic
 * step: PostgreSQL's row locks, MVCC and unique-index waits make it behave
 * as if serialised against the latest committed state (trusted, not modelled).
 */
mtype = { UPDATE, DELETE, INSERT, TRUNCATE };

bool row[KEYS] = true;  /* the key has a row: all but the last at the start... */
byte s[KEYS];           /* ...with last_fencing_token 0, as protect() adds it */
byte mark[KEYS];        /* deleted-key mark; 0 = none, tokens are >= 1 */
byte floor;             /* truncate floor of the table */
byte fmark;             /* fence(): the resource's high-water mark */

/* The guard's rule per statement. Token 0 is "no token" (FN002/23T02). */
#if defined(LOCK_ONLY)
/* (c) the storage knows nothing of tokens: the lease is trusted */
#define UPDATE_OK(k, t)    true
#define DELETE_OK(k, t)    true
#define INSERT_OK(k, t)    true
#define TRUNCATE_OK(t)     true
#define TRUNCATE_ROW_OK(k, t) true
#elif defined(SEED)
/* (b) UPDATE ... WHERE last_fencing_token < :token; INSERT, DELETE and
 * TRUNCATE are plain SQL. Without a token (NULL) the UPDATE matches no row. */
#define UPDATE_OK(k, t)    ((t) != 0 && s[k] < (t))
#define DELETE_OK(k, t)    true
#define INSERT_OK(k, t)    true
#define TRUNCATE_OK(t)     true
#define TRUNCATE_ROW_OK(k, t) true
#else
#ifdef NO_MARKS
#define MARK_OK(k, t)      true     /* (a) */
#else
#define MARK_OK(k, t)      accepts(t, mark[k])
#endif
#ifdef NO_FLOOR
#define FLOOR_OK(t)        true     /* (e) */
#else
#define FLOOR_OK(t)        accepts(t, floor)
#endif
#define UPDATE_OK(k, t)    ((t) != 0 && accepts(t, s[k]))
#define DELETE_OK(k, t)    ((t) != 0 && accepts(t, s[k]))
#define INSERT_OK(k, t)    ((t) != 0 && MARK_OK(k, t) && FLOOR_OK(t))
#define TRUNCATE_OK(t)     ((t) != 0)
#define TRUNCATE_ROW_OK(k, t) accepts(t, s[k])
#endif

/* ------------------------------------------------------------------------
 * Properties: a monitor run on every accepted write of key k (U is k = KEYS).
 * Ghosts: last = token of the key's last accepted write; hw = highest token
 * the key has accepted, TRUNCATE counting for every key; lastg = the grant
 * (never reset, unlike tokens) of the last accepted write, 0 = no grant.
 * A ghost that no checked property reads is not kept: fewer states.
 */
#define HW_GHOST (want(2) || want(4) || want(6))
byte last[KEYS + 1];
byte hw[KEYS + 1];
byte lastg[KEYS + 1];
#ifdef PRIMARIES
/* the newest leadership (1 = P, 2 = Q) whose write the key has accepted,
 * TRUNCATE counting for every key; g is the leadership, not a grant number */
byte lead[KEYS + 1];
#define newer(k, g) lead[k] = max(lead[k], g)
#else
#define newer(k, g) skip
#endif

inline accepted(k, t, g, re)
{
    check(1, t >= last[k], "P1 violated: this key's accepted tokens went down\n");
    check(2, t >= hw[k], "P2 violated: accepted below the key's high-water mark\n");
    check(3, t != 0, "P3 violated: accepted a write without a token\n");
    check(4, !re || t > hw[k], "P4 violated: a reissued token passed where that number (or higher) was accepted before\n");
    check(5, g >= lastg[k], "P5 violated: a write of an older grant after one of a newer grant\n");
    check(6, k == KEYS || t > hw[k], "P6 violated: strict mode accepted a token not above the key's high-water mark\n");
#ifdef PRIMARIES
    check(10, g >= lead[k], "P10 violated: a write of the old primary's grant accepted after one of the new primary's\n");
    newer(k, g);
#else
    lastg[k] = g;
#endif
    if
    :: want(1) -> last[k] = t
    :: else -> skip
    fi;
    if
    :: HW_GHOST -> hw[k] = max(hw[k], t)
    :: else -> skip
    fi
}

/* One statement of `who` with token t (0: none) under grant g; re: t is a
 * reissued token. Called inside d_step: the statement is one step. */
inline storage(who, op, k, t, g, re)
{
    if
    :: op == UPDATE && row[k] ->
        if
        :: UPDATE_OK(k, t) ->
            printf("%c UPDATE key %d with token %d: accepted (stored %d)\n", who, k, t, s[k]);
            accepted(k, t, g, re); s[k] = t
        :: else -> printf("%c UPDATE key %d with token %d: refused (stored %d)\n", who, k, t, s[k]);
#ifdef WITNESS
            /* not a property: stops the search at the first stale UPDATE
             * refused, to show that the design meets the split brain */
            if
            :: t != 0 && t < s[k] -> printf("witness reached: a stale write was refused\n"); assert(false)
            :: else -> skip
            fi
#endif
        fi
    :: op == DELETE && row[k] ->
        if
        :: DELETE_OK(k, t) ->
            printf("%c DELETE key %d with token %d: accepted (stored %d)\n", who, k, t, s[k]);
            accepted(k, t, g, re); row[k] = false; mark[k] = max(mark[k], t)
        :: else -> printf("%c DELETE key %d with token %d: refused (stored %d)\n", who, k, t, s[k])
        fi
    :: op == INSERT && !row[k] ->
        if
        :: INSERT_OK(k, t) ->
            printf("%c INSERT key %d with token %d: accepted (mark %d, floor %d)\n", who, k, t, mark[k], floor);
            accepted(k, t, g, re); row[k] = true; s[k] = t
        :: else -> printf("%c INSERT key %d with token %d: refused (mark %d, floor %d)\n", who, k, t, mark[k], floor)
        fi
    :: op == TRUNCATE ->
        ok = TRUNCATE_OK(t);
        for (i : 0 .. KEYS - 1) {
            if
            :: row[i] && !TRUNCATE_ROW_OK(i, t) -> ok = false
            :: else -> skip
            fi
        }
        if
        :: ok ->
            printf("%c TRUNCATE with token %d: accepted (floor was %d)\n", who, t, floor);
            for (i : 0 .. KEYS - 1) {
                if
                :: row[i] -> accepted(i, t, g, re); row[i] = false
                :: else -> skip
                fi;
                if
                :: HW_GHOST -> hw[i] = max(hw[i], t)    /* the floor speaks for every key */
                :: else -> skip
                fi;
                newer(i, g)
            }
            floor = max(floor, t)
        :: else -> printf("%c TRUNCATE with token %d: refused\n", who, t)
        fi
    :: else -> skip     /* nothing to do (any_write does not pick these) */
    fi
}

/* A write of any kind to any key: what a worker writes is not the storage's
 * business, so every choice is open. Statements that find nothing to do (an
 * UPDATE of a missing row, a duplicate INSERT) change nothing and are left out.
 * A worker may write any number of times under one grant: the state space
 * stays finite because tokens are bounded. */
inline any_write(who, t, g, re)
{
    atomic {
        if
        :: k = 0
        :: KEYS > 1 -> k = 1
        :: KEYS > 2 -> k = 2
        fi;
        if
        :: row[k] -> op = UPDATE
        :: row[k] -> op = DELETE
        :: !row[k] -> op = INSERT
        :: k == 0 -> op = TRUNCATE      /* the whole table: once, not per key */
        fi;
        d_step {
            storage(who, op, k, t, g, re);
            k = 0; op = 0; i = 0; ok = false    /* scratch: forget it, or states multiply */
        }
    }
}

/* BEGIN; SELECT fencing.fence(r, t); UPDATE u ...; COMMIT. fence() holds the
 * resource's row lock until COMMIT, so no other fence() on r can come between
 * the check and the write: one step. Its rule is monotonic in every mode. */
inline fenced_write(who, t, g, re)
{
#ifndef FENCE_UNLOCKED
    d_step {
        if
        :: t >= fmark ->
            printf("%c fence(%d) + write U: accepted (mark %d)\n", who, t, fmark);
            fmark = t; accepted(KEYS, t, g, re)
        :: else -> printf("%c fence(%d): refused (mark %d)\n", who, t, fmark)
        fi
    }
#else
    /* (f) as if the lock were released when fence() returns */
    d_step {
        if
        :: t >= fmark -> printf("%c fence(%d): accepted (mark %d)\n", who, t, fmark); fmark = t; ok = true
        :: else -> printf("%c fence(%d): refused (mark %d)\n", who, t, fmark); ok = false
        fi
    }
    d_step {
        if
        :: ok -> printf("%c writes U with token %d\n", who, t); accepted(KEYS, t, g, re)
        :: else -> skip
        fi;
        ok = false
    }
#endif
}

/* ------------------------------------------------------------------------
 * A worker: acquire, then write while it believes it holds the lease. Its
 * belief changes only when its heartbeat's renew() fails, which it may not
 * have noticed yet: any gap between two of its steps is a pause, so its next
 * write may come long after the lease expired. The split brain of
 * docs/design.md is the interleaving
 *   A acquires (1); A pauses; clock expires A's lease; B acquires (2);
 *   B writes (accepted); A wakes and writes with 1 (refused)
 * (`run --trails` shows it accepted under LOCK_ONLY). A renew() that succeeds
 * changes nothing here: the lease can still expire right after it.
 *
 * REUSE: a worker that stops without releasing may have crashed, or been
 * paused so long that it was restarted: the restarted worker acquires under
 * the same holder name, and the old incarnation may still wake and call
 * renew() or release() with its old token (`old`), once. Checked without
 * writes (NO_WRITES): the storage never sees holder names, and all an old
 * incarnation can do to the lease in the design is end it, which expiry
 * already does at any moment.
 */
inline old_incarnation(me, old)
{
    atomic {
        old != 0 ->
        if
        :: lease_is(me, old) ->
            printf("%c (old incarnation, token %d): renew() true\n", name(me), old);
            lease_true(me, old)
        :: lease_is(me, old) ->
            printf("%c (old incarnation, token %d): release() true\n", name(me), old);
            release_true(me, old)
        :: else ->
            printf("%c (old incarnation, token %d): renew() or release() false\n", name(me), old)
        fi;
        old = 0
    }
}

proctype worker(byte me)
{
    byte tok, grant, old, k, i;
    bool reissued, ok;
    mtype op;

    do
    :: acquire(me);
        do
#ifndef NO_WRITES
        :: any_write(name(me), tok, grant, reissued)
#ifndef NO_FENCE
        :: fenced_write(name(me), tok, grant, reissued)
#endif
#endif
        :: atomic { !lease_is(me, tok) ->   /* renew(me, tok) returned false */
                printf("%c: renew() false, stops writing\n", name(me)); break }
        :: atomic { lease_is(me, tok) ->    /* release(me, tok) */
                printf("%c releases the lease\n", name(me));
                release_true(me, tok); break }
#ifdef REUSE
        :: old_incarnation(me, old)
        :: atomic { old = tok;  /* crashed, or done: the lease will expire */
                printf("%c stops without release(); a restarted %c may acquire\n", name(me), name(me)); break }
#else
        :: break                /* crashed, or done: the lease will expire */
#endif
        od;
        tok = 0; grant = 0; reissued = false
#ifdef REUSE
    :: old_incarnation(me, old)
#endif
    :: grants == GRANTS -> break
    od
}

#ifndef NO_UNFENCED
/* A client that forgot SET LOCAL fencing.token (or a human at psql): its one
 * write carries no token at all. */
active proctype unfenced()
{
    byte k, i;
    bool ok;
    mtype op;
    any_write('X', 0, 0, false)
}
#endif

init
{
    byte n;
    atomic {
        row[KEYS - 1] = false;  /* never inserted: a fresh key */
        for (n : 1 .. WORKERS) {
            run worker(WORKERS + 1 - n)     /* A last: pan tries it first, so trails start with A */
        }
    }
}

#endif /* GRACE */
