/*
 * blitz.pml: libblitz's sleep/wake protocol, as implemented, for spin.
 *
 * docs/verification.md says what is modelled, what is abstracted, and
 * why; the comments below name the function each step stands for.
 * tools/verify.sh runs every check (./dev verify; ./dev test runs the
 * quick set).
 *
 * Processes:
 *   worker 0 .. NW-1   the idle loop: Worker::wait_until, Worker::find_work,
 *                      Sleep::start_looking / no_work_found / sleep / work_found.
 *                      Worker 0 starts inside a job that calls join(a, b)
 *                      (fork_join.hpp): it pushes b's frame (job K) onto its
 *                      fork stack, pending, and promotes it at once if a
 *                      request is set (push_fork_slow: K onto its deque,
 *                      published, posted: the internal poster), runs a(),
 *                      then runs K inline if it stayed pending, else pops K
 *                      back or, if a thief took it, waits on K's latch,
 *                      which the thief sets after running K (Latch::set,
 *                      Sleep::wake_specific_thread). A thief's steal that
 *                      took K or found the deque empty sets the request
 *                      (steal_and_request).
 *   poster             a thread outside the pool: NINJ times Registry::inject
 *                      (Injector::push, the inject fence, Sleep::new_shared_jobs).
 *   drainer            store buffers drain to memory, one store at a time, at any moment.
 *   monitor            checks the safety invariants in every reachable state.
 *
 * Memory model (docs/verification.md, "The spin model"):
 *   - x86-TSO store buffers for the plain stores the protocol depends on:
 *     the injector's `pushed` (written by the poster) and the deque's
 *     `split` (written by worker 0). A fence or a locked instruction
 *     (every operation on the counters, the latches, the mutexes, the
 *     deque's and the injector's claims) drains the thread's buffer first.
 *   - The C++ guarantee for the injector's relaxed loads (`pushed` in
 *     has_jobs): a worker's relaxed load of `pushed` may return any value
 *     from the last one it is guaranteed to see (its floor pf[t]) up to the
 *     value in memory. The floor rises only through what C++ guarantees:
 *     the fence rule (a seq-cst fence of the worker after the poster's
 *     inject fence in the total order S), synchronisation through the
 *     counters (the poster's post_event CAS is a release every later
 *     access to the word acquires), a wake (the waker's release store of
 *     the worker's futex word, which the worker acquires), and
 *     read-read coherence. With -DX86 the loads read memory instead (on x86
 *     a locked instruction already orders every later load).
 *
 * Switches (spin -D...):
 *   NW=2..4, NINJ=1..3                 workers, injected jobs
 *   X86                                worker loads of `pushed` read memory (x86-TSO only)
 *   CREDIT_DEQUE_FENCE                 each search starts with a seq-cst fence
 *                                      (the fence in Deque::pop, which find_work calls first)
 *   MUTANT_NO_INJECT_FENCE             new_shared_jobs without its fence
 *   MUTANT_NO_SLEEP_FENCE              sleep() without the fence before the final check
 *   MUTANT_JEC_SAVED_BEFORE_CHANGE     announce_sleepy remembers the JEC before its change
 *   MUTANT_BLITZ_JEC_DIRECTION         announce_sleepy also increments only when even
 *   MUTANT_SLEEPER_DECREMENTS          the woken worker decrements `sleeping`, not its waker
 *   MUTANT_LAGGING_COUNT               the sleeper adds itself to `sleeping` only after
 *                                      its final check (Julia #61826: a count that lags)
 *   MUTANT_NO_HANDOFF                  work_found never hands injected work to a sleeper
 *   MUTANT_NO_HANDOFF_FENCE            work_found without its fence
 *   MUTANT_LATCH_IGNORES_SLEEPY        the waiter blocks even though fall_asleep() failed
 *   MUTANT_NO_FORK_REQUEST             a thief's steal does not set the request
 *   MUTANT_PROMOTE_WITHOUT_POST        the promotion publishes K without the internal post
 *   MUTANT_POP_IGNORES_PROMOTED        the join runs K inline although it was promoted
 *   MUTANT_JOIN_SKIPS_STOLEN           the join returns while the thief still has K
 *   ONLY_<invariant>                   the monitor checks that invariant alone
 *                                      (NoLostWakeup, LatchWakes, HandOff,
 *                                      InternalPostNoticed, SleepingCount, JecExact,
 *                                      ForkPromoted, ForkOnce)
 *   NO_INVARIANTS                      no safety invariant (for the LTL progress run)
 */

#ifndef NW
#define NW 2
#endif
#ifndef NINJ
#define NINJ 1
#endif

#define P   NW            /* thread id of the external poster */
#define KL  NW            /* latch[KL] is job K's latch; latch[i] is worker i's terminate latch */
#define SBN (NINJ + 1)    /* store buffer entries per thread */

/* CoreLatch states (core_latch.hpp) */
#define UNSET    0
#define SLEEPY   1
#define SLEEPING 2
#define SET      3

/* what find_work returned */
#define NONE 0
#define FK   1            /* job K, stolen from worker 0's deque */
#define FJ   2            /* an injected job */

/* Which invariants the monitor (and the JecExact assertion) check. */
#if !defined(ONLY_NoLostWakeup) && !defined(ONLY_LatchWakes) && !defined(ONLY_HandOff) && \
    !defined(ONLY_InternalPostNoticed) && !defined(ONLY_SleepingCount) && !defined(ONLY_JecExact) && \
    !defined(ONLY_ForkPromoted) && !defined(ONLY_ForkOnce) && !defined(NO_INVARIANTS)
#define CHECK_ALL 1
#endif

/* ---- shared memory ------------------------------------------------------ */

/* Locations written by plain stores, which sit in a store buffer until drained. */
#define PUSHED 0          /* Injector::pushed_ */
#define DQ     1          /* worker 0's deque: 1 while K is public in it (the owner's `split`) */
byte mem[2];

/* Per-thread FIFO store buffers (only worker 0 and the poster store plainly). */
byte sbv[(NW + 1) * SBN];   /* location */
byte sbx[(NW + 1) * SBN];   /* value */
byte sbl[NW + 1];           /* length */
byte sb_k;                  /* scratch, 0 between steps */

/* What C++ guarantees a worker's relaxed load of `pushed` sees (see the header). */
byte pf[NW];                /* worker t's floor */
byte fpub;                  /* `pushed` as of the poster's last inject fence */
byte ctag;                  /* `pushed` as of the poster's last post_event CAS (a release on the word) */

/* AtomicCounters (counters.hpp): one word; locked RMWs and seq-cst loads only. */
byte sleeping;
byte inactive;
byte jec;

byte popped;                /* Injector::popped_, written by the consumer holding the turn */

/* Sleep::WorkerSleepState */
byte mutex[NW];             /* 0 free, else the holder's thread id + 1 */
bit  is_blocked[NW];        /* guarded by mutex[i] */

byte latch[NW + 1];         /* CoreLatch states */

bit  req = 1;               /* worker 0's ForkStack requests bit kWanted: set at creation
                               (an idle pool's first fork promotes), by thieves (a locked RMW) */

/* ---- ghost state, read only by assertions and the LTL property ------------- */

byte injected;              /* jobs the poster pushed (in its program order) */
byte taken;                 /* injected jobs popped by workers */
bit  kq;                    /* K is in worker 0's deque (pushed, not yet taken) */
bit  kdone;                 /* K ran */
byte kruns;                 /* how many times K ran */
bit  kpend;                 /* K's frame is on worker 0's fork stack, pending (not promoted) */
bit  asked;                 /* a thief's steal asked for a promotion (took K or found the deque empty) */
bit  asked_at_fork;         /* a thief had asked when worker 0 pushed K */
bit  w0_in_a;               /* worker 0 runs a(); its internal post has finished */
bit  k_vis_at_post;         /* K was in memory when worker 0's post read the counters */
bit  w0_on_k;               /* worker 0 waits on K's latch */
bit  w0_joined;             /* worker 0's join returned */
byte inflight;              /* posts, latch sets and internal posts between their start and their last wake */
byte posts;                 /* post_event calls so far (at their access to the counters) */
bit  counted[NW];           /* worker i is counted in `sleeping` */
bit  busy[NW];              /* worker i runs a job (between work_found and the next start_looking) */
byte nblk;                  /* workers with is_blocked set */
byte nbusy;                 /* busy workers */

/* ---- store buffers and loads ------------------------------------------------ */

inline SB_PUT(t, loc, val) {
    assert(sbl[t] < SBN);
    sbv[t * SBN + sbl[t]] = loc;
    sbx[t * SBN + sbl[t]] = val;
    sbl[t]++
}

/* A fence or a locked instruction: the thread's buffer drains first. */
inline FLUSH(t) {
    sb_k = 0;
    do
    :: sb_k < sbl[t] ->
        mem[sbv[t * SBN + sb_k]] = sbx[t * SBN + sb_k];
        sbv[t * SBN + sb_k] = 0;
        sbx[t * SBN + sb_k] = 0;
        sb_k++
    :: else -> break
    od;
    sbl[t] = 0;
    sb_k = 0
}

/* A load by the thread that may have stores buffered: its own newest store
 * to the location (store forwarding), else memory. */
inline LOAD(t, loc, r) {
    r = mem[loc];
    sb_k = 0;
    do
    :: sb_k < sbl[t] ->
        if
        :: sbv[t * SBN + sb_k] == loc -> r = sbx[t * SBN + sb_k]
        :: else
        fi;
        sb_k++
    :: else -> break
    od;
    sb_k = 0
}

/* The oldest buffered store of thread t reaches memory. */
inline DRAIN_ONE(t) {
    mem[sbv[t * SBN]] = sbx[t * SBN];
    sb_k = 0;
    do
    :: sb_k + 1 < sbl[t] ->
        sbv[t * SBN + sb_k] = sbv[t * SBN + sb_k + 1];
        sbx[t * SBN + sb_k] = sbx[t * SBN + sb_k + 1];
        sb_k++
    :: else -> break
    od;
    sbv[t * SBN + sb_k] = 0;
    sbx[t * SBN + sb_k] = 0;
    sbl[t]--;
    sb_k = 0
}

/* Event log for counterexample replays (spin -t); no effect on the search. */
#define SAY1(t, pfmt, wfmt, a) if :: t == P -> printf(pfmt, a) :: else -> printf(wfmt, t, a) fi
#define SAY3(t, pfmt, wfmt, a, b, c) if :: t == P -> printf(pfmt, a, b, c) :: else -> printf(wfmt, t, a, b, c) fi

inline RAISE(x, y) {
    if
    :: x < y -> x = y
    :: else
    fi
}

/* Worker t accesses the counters word (every access is seq_cst, so acquire):
 * it synchronises with the poster's last post_event CAS. */
#define SYNC_C(t) RAISE(pf[t], ctag)

/* A seq-cst fence by worker t: after the poster's inject fence in S, it
 * sees the poster's stores from before that fence. */
inline WFENCE(t) {
    FLUSH(t);
    RAISE(pf[t], fpub)
}

/* A relaxed load of `pushed` by worker t (not inside d_step: it branches). */
inline LOADP(t, r) {
#ifdef X86
    r = mem[PUSHED]
#else
    r = pf[t];
    do
    :: r < mem[PUSHED] -> r++
    :: true -> break
    od;
    pf[t] = r
#endif
}

/* ---- the posting side (sleep.hpp) ------------------------------------------- */

/* AtomicCounters::post_event: JEC even -> odd by CAS (locked: drains the
 * buffer; a release); when the JEC is already odd it only loads the word. */
inline POST_EVENT(t, c_sl, c_in) {
    if
    :: (jec % 2) == 1 -> skip
    :: else ->
        FLUSH(t);
        jec++;
        if
        :: t == P -> ctag = mem[PUSHED]
        :: else
        fi
    fi;
    c_sl = sleeping;
    c_in = inactive;
    posts++;
    SAY3(t, "P : post_event: jec now %d, read sleeping=%d inactive=%d\n",
            "w%d: post_event: jec now %d, read sleeping=%d inactive=%d\n", jec, c_sl, c_in)
}

/* Sleep::wake_for_jobs with num_jobs = 1, after new_*_jobs returned early on
 * sleeping == 0:
 *   idle = inactive - sleeping (saturating);
 *   queue_was_empty ? (idle < 1 ? min(1 - idle, sleeping) : 0)
 *                   : (idle == 0 ? min(1, sleeping) : 0)
 * With one job both cases are "wake one iff nobody awake is idle", so
 * was_empty does not change the outcome here. */
inline WAKE_DECISION(c_sl, c_in, was_empty, n) {
    if
    :: c_sl == 0 -> n = 0
    :: else ->
        if
        :: c_in > c_sl -> n = 0                    /* idle >= 1 */
        :: else -> n = 1
        fi
    fi
}

/* Sleep::wake_specific_thread(w) by thread t: lock w's mutex; if blocked,
 * clear `blocked` (a release store); the waker decrements `sleeping`;
 * unlock; futex wake. The woken worker resumes as soon as its acquire load
 * sees `blocked` cleared, without the mutex (it blocks on the futex word),
 * so it may run before the waker's decrement and unlock; it sees what the
 * waker saw (`view`) through that release/acquire pair. */
inline WAKE_SPECIFIC(t, w, woke, view) {
    d_step {
        mutex[w] == 0 ->
        FLUSH(t);
        if
        :: is_blocked[w] ->
            is_blocked[w] = 0; nblk--; mutex[w] = t + 1; woke = 1;
            RAISE(pf[w], view);
            SAY1(t, "P : wakes w%d\n", "w%d: wakes w%d\n", w)
        :: else -> woke = 0;                       /* lock, look, unlock */
            SAY1(t, "P : w%d is not blocked\n", "w%d: w%d is not blocked\n", w)
        fi
    };
    if
    :: woke ->
        d_step {
#ifndef MUTANT_SLEEPER_DECREMENTS
            sleeping--; counted[w] = 0;
            if
            :: t < NW -> SYNC_C(t)
            :: else
            fi;
#endif
            mutex[w] = 0
        }
    :: else
    fi
}

/* Sleep::wake_any_threads(n): each worker in turn, never a broadcast. */
inline WAKE_ANY(t, n, k, woke, view) {
    SAY1(t, "P : wake_any_threads(%d)\n", "w%d: wake_any_threads(%d)\n", n);
    k = 0;
    do
    :: n > 0 && k < NW ->
        WAKE_SPECIFIC(t, k, woke, view);
        if
        :: woke -> n--
        :: else
        fi;
        woke = 0;
        k++
    :: else -> break
    od;
    k = 0;
    n = 0
}

/* ---- workers ------------------------------------------------------------------ */

#define me _pid

active [NW] proctype worker() {
    byte L;                 /* the latch wait_until waits on */
    byte found, saved, rounds, snapposts, old;
    byte c_sl, c_in, n, k, v;
    bit ok, has, woke;

    d_step {
        assert(me < NW);    /* pids 0 .. NW-1 are the workers */
        L = me;
        if
        :: me == 0 -> busy[0] = 1; nbusy++
        :: else
        fi
    };

    if
    :: me == 0 ->
        /* The request bit as this fork finds it: still set since the
         * ForkStack was made, or served by an earlier fork's promotion
         * (cleared) before any thief of this run asked. */
        if
        :: skip
        :: d_step { asked == 0 -> req = 0 }
        fi;
        /* join(a, b) (fork_join): ForkStack::try_push finds the request
         * set, so push_fork_slow pushes the frame and serves it (clears the
         * request, promote_forks(1)); otherwise the frame stays pending. */
        d_step {
            asked_at_fork = asked;
            if
            :: req -> req = 0; ok = 1
            :: else -> kpend = 1; ok = 0; printf("w0: fork: K pending\n")
            fi
        };
        if
        :: ok ->
            /* promote_forks: Deque::push writes K into the private part;
             * publish_forks: Deque::publish's release store of split (plain
             * on x86: buffered), then Sleep::new_internal_jobs: post_event,
             * no fence; queue_was_empty() is true (K is the only job). */
            d_step { SB_PUT(0, DQ, 1); kq = 1; ok = 0; printf("w0: fork: K promoted (buffered)\n") };
            d_step {
                inflight++;
                k_vis_at_post = (mem[DQ] == 1);
#ifndef MUTANT_PROMOTE_WITHOUT_POST
                SYNC_C(0);
                POST_EVENT(0, c_sl, c_in)
#endif
            };
#ifndef MUTANT_PROMOTE_WITHOUT_POST
            WAKE_DECISION(c_sl, c_in, 1, n);
            c_sl = 0; c_in = 0;
            WAKE_ANY(0, n, k, woke, pf[0]);
#endif
            d_step { inflight-- }
        :: else
        fi;
        d_step { w0_in_a = 1; printf("w0: runs a()\n") };
        /* a() runs here, for any length of time. */
        if
        :: kpend ->
            /* ForkStack::pop_pending: K never left the stack: run it inline */
            d_step { w0_in_a = 0; kpend = 0; kruns++; kdone = 1; w0_joined = 1; printf("w0: runs K inline\n") }
#ifdef MUTANT_POP_IGNORES_PROMOTED
        :: !kpend ->
            d_step { w0_in_a = 0; kruns++; kdone = 1; w0_joined = 1; printf("w0: runs promoted K inline\n") }
#else
        :: !kpend ->
            /* join_promoted_frame: Worker::pop -> Deque::pop: no private
             * job, so pop_public (store split, seq-cst fence, claim K
             * unless a thief has it) */
            d_step {
                w0_in_a = 0;
                WFENCE(0);
                if
                :: mem[DQ] == 1 -> mem[DQ] = 0; kq = 0; kruns++; kdone = 1; w0_joined = 1;  /* taken back: runs it */
                    printf("w0: pops K back, runs it\n")
#ifdef MUTANT_JOIN_SKIPS_STOLEN
                :: else -> w0_joined = 1;                 /* returns without waiting for the thief */
                    printf("w0: K was stolen: returns at once\n")
#else
                :: else -> L = KL; w0_on_k = 1;            /* stolen: wait_until(K's latch) */
                    printf("w0: K was stolen: waits on K's latch\n")
#endif
                fi
            }
#endif
        fi;
        d_step { busy[0] = 0; nbusy-- }
    :: else
    fi;

wait_until:
    do
    :: latch[L] == SET -> break                          /* latch.probe() */
    :: else ->
        /* (wait_until's own-deque pop before start_looking never finds a job
         *  here: only worker 0 pushes, once, and it popped or lost K above) */
        d_step { FLUSH(me); SYNC_C(me); inactive++; printf("w%d: start_looking (inactive=%d)\n", me, inactive) };
        rounds = 0;
        do
        :: latch[L] == SET -> found = NONE; break
        :: else ->
            /* Worker::find_work: own deque (empty), steal, injector */
            d_step {
#ifdef CREDIT_DEQUE_FENCE
                WFENCE(me);                              /* Deque::pop's fence */
#endif
                /* steal_and_request: a steal that took K or found worker 0's
                 * deque empty asks for a promotion (a locked RMW) */
                if
                :: me != 0 && mem[DQ] == 1 -> FLUSH(me); mem[DQ] = 0; kq = 0; found = FK;
                    printf("w%d: steals K\n", me)
                :: else -> found = NONE
                fi;
                if
                :: me != 0 ->
                    asked = 1;
#ifndef MUTANT_NO_FORK_REQUEST
                    req = 1;
#endif
                    skip
                :: else
                fi
            };
            if
            :: found == NONE ->
                atomic {
                    LOADP(me, v);                        /* Injector::pop: has_jobs() */
                    if
                    :: v != popped && mem[PUSHED] > popped ->
                        /* the consumer turn and take(): the node is there */
                        FLUSH(me); popped++; taken++; found = FJ;
                        RAISE(pf[me], popped);
                        printf("w%d: pops injected job %d\n", me, popped)
                    :: else ->                           /* empty (or has_jobs() was spuriously true) */
                        printf("w%d: search finds nothing (reads pushed=%d, memory has %d)\n", me, v, mem[PUSHED])
                    fi;
                    v = 0
                }
            :: else
            fi;
            if
            :: found != NONE -> break
            :: else
            fi;
            /* Sleep::no_work_found, with kRoundsUntilSleepy = 0 */
            if
            :: rounds == 0 ->
                /* AtomicCounters::announce_sleepy, then one more search */
                d_step {
                    SYNC_C(me);
#ifdef MUTANT_BLITZ_JEC_DIRECTION
                    if
                    :: (jec % 2) == 0 -> FLUSH(me); jec++
                    :: else
                    fi;
                    saved = jec;
#else
                    if
                    :: (jec % 2) == 0 -> saved = jec      /* already even: as found */
                    :: else ->
                        FLUSH(me); jec++;
#ifdef MUTANT_JEC_SAVED_BEFORE_CHANGE
                        saved = jec - 1
#else
                        saved = jec
#endif
                    fi;
#endif
                    snapposts = posts;
                    rounds = 1;
                    printf("w%d: announce_sleepy: jec now %d, remembers %d\n", me, jec, saved)
                }
            :: else ->
                /* Sleep::sleep */
                d_step {
                    FLUSH(me);
                    if
                    :: latch[L] == UNSET -> latch[L] = SLEEPY; ok = 1   /* get_sleepy */
                    :: else -> ok = 0;                                  /* kLatchSet */
                        printf("w%d: get_sleepy: latch already set\n", me)
                    fi
                };
                if
                :: ok ->
                    d_step { mutex[me] == 0 -> FLUSH(me); mutex[me] = me + 1 };
                    d_step {
                        if
                        :: latch[L] == SLEEPY -> latch[L] = SLEEPING; ok = 1   /* fall_asleep */
                        :: else -> ok = 0;
                            printf("w%d: fall_asleep fails: latch was set\n", me)
                        fi;
#ifdef MUTANT_LATCH_IGNORES_SLEEPY
                        ok = 1;
#endif
                        skip
                    };
                    if
                    :: !ok -> d_step { rounds = 0; mutex[me] = 0 }      /* kLatchSet */
                    :: else ->
                        /* the JEC re-check and the registration: one CAS */
                        d_step {
                            FLUSH(me);
                            SYNC_C(me);
#if defined(CHECK_ALL) || defined(ONLY_JecExact)
                            /* JecExact: the JEC changed iff a post happened since the announcement */
                            assert((jec != saved) == (posts != snapposts));
#endif
                            if
                            :: jec != saved ->
                                ok = 0; rounds = 0;          /* idle.rounds = kSleepy (= 0) */
                                printf("w%d: sleep aborted: jec %d != remembered %d\n", me, jec, saved);
                                if
                                :: latch[L] == SLEEPING -> latch[L] = UNSET   /* wake_up */
                                :: else
                                fi;
                                mutex[me] = 0
                            :: else ->
#ifndef MUTANT_LAGGING_COUNT
                                sleeping++; counted[me] = 1;
#endif
                                ok = 1;
                                printf("w%d: jec unchanged (%d): CAS sleeping -> %d\n", me, jec, sleeping)
                            fi
                        };
                        if
                        :: ok ->
                            /* the sleep fence, then the final check: Injector::has_jobs() */
                            atomic {
#ifndef MUTANT_NO_SLEEP_FENCE
                                WFENCE(me);
#endif
                                LOADP(me, v);
                                has = (v != popped);
                                printf("w%d: final check reads pushed=%d popped=%d (memory has %d)\n", me, v, popped, mem[PUSHED]);
                                v = 0
                            };
                            if
                            :: has ->
                                d_step {
#ifndef MUTANT_LAGGING_COUNT
                                    SYNC_C(me);
                                    sleeping--; counted[me] = 0;   /* the sleeper undoes its own registration */
#endif
                                    has = 0; rounds = 0;
                                    printf("w%d: sleep aborted: injector has jobs\n", me);
                                    if
                                    :: latch[L] == SLEEPING -> latch[L] = UNSET
                                    :: else
                                    fi;
                                    mutex[me] = 0
                                }
                            :: else ->
#ifdef MUTANT_LAGGING_COUNT
                                d_step { SYNC_C(me); sleeping++; counted[me] = 1 };
#endif
                                /* blocked = 1 under the mutex, unlock, futex wait */
                                d_step { is_blocked[me] = 1; nblk++; mutex[me] = 0; printf("w%d: BLOCKS\n", me) };
end_blocked:
                                d_step {
                                    !is_blocked[me] ->          /* the acquire load sees the waker's store */
#ifdef MUTANT_SLEEPER_DECREMENTS
                                    SYNC_C(me);
                                    sleeping--; counted[me] = 0;
#endif
                                    skip
                                };
                                /* woken: wake_fully, latch.wake_up (no mutex held) */
                                d_step {
                                    rounds = 0;
                                    printf("w%d: woken\n", me);
                                    if
                                    :: latch[L] == SLEEPING -> latch[L] = UNSET
                                    :: else
                                    fi
                                }
                            fi
                        :: else
                        fi;
                        ok = 0
                    fi
                :: else
                fi;
                ok = 0
            fi
        od;

        /* Sleep::work_found: inactive - 1; if that left no awake searcher
         * while workers sleep: fence, and hand injected work to one sleeper. */
        skip;
        d_step {
            FLUSH(me);
            SYNC_C(me);
            inactive--;
            c_sl = sleeping; c_in = inactive;
            snapposts = 0; saved = 0;
            printf("w%d: work_found: inactive now %d, sleeping %d\n", me, c_in, c_sl)
        };
        if
        :: c_sl == 0 || c_in > c_sl -> skip
        :: else ->
            atomic {
#ifndef MUTANT_NO_HANDOFF_FENCE
                WFENCE(me);                          /* the hand-off fence */
#endif
                LOADP(me, v);
                has = (v != popped);
                printf("w%d: hand-off check reads pushed=%d popped=%d (memory has %d)\n", me, v, popped, mem[PUSHED]);
                v = 0
            };
#ifndef MUTANT_NO_HANDOFF
            if
            :: has -> n = 1; WAKE_ANY(me, n, k, woke, pf[me])
            :: else
            fi;
#endif
            skip
        fi;
        d_step { c_sl = 0; c_in = 0; has = 0; busy[me] = 1; nbusy++ };

        if
        :: found == NONE -> break                     /* the latch was set: return */
        :: found == FJ -> found = NONE                /* run the injected job */
        :: found == FK ->
            /* run K, then Latch::set(): copy the waiter, swap to SET, and
             * wake exactly that worker when the latch was SLEEPING */
            d_step {
                kdone = 1;
                kruns++;
                inflight++;
                FLUSH(me);
                old = latch[KL];
                latch[KL] = SET;
                found = NONE;
                printf("w%d: ran K; Latch::set finds state %d (2 = SLEEPING)\n", me, old)
            };
            if
            :: old == SLEEPING -> WAKE_SPECIFIC(me, 0, woke, pf[me]); woke = 0
            :: else
            fi;
            d_step { old = 0; inflight-- }
        fi;
        d_step { busy[me] = 0; nbusy-- }              /* back to the top of wait_until */
    od;

    /* wait_until(L) returned: only K's latch is ever set */
    skip;
    d_step {
        assert(L == KL);
        w0_joined = 1; w0_on_k = 0; L = me;
        if
        :: !busy[me] -> busy[me] = 1; nbusy++      /* back in the job that called join */
        :: else
        fi
    };
    d_step { busy[me] = 0; nbusy-- };             /* that job ends: the main loop */
    goto wait_until
}

/* ---- the external poster: Registry::inject, NINJ times --------------------------- */

active proctype poster() {
    byte j, v, c_sl, c_in, n, k;
    bit was_empty, woke;
    do
    :: j < NINJ ->
        /* Injector::push: pushed_ += 1 (a relaxed RMW: one producer here, so a
         * plain store into the store buffer), was_empty from a relaxed load
         * of popped_; the node's link is not modelled (docs/verification.md). */
        d_step {
            inflight++;
            LOAD(P, PUSHED, v);
            was_empty = (v == popped);
            SB_PUT(P, PUSHED, v + 1);
            injected++;
            printf("P : push J%d: pushed=%d (buffered), queue_was_empty=%d\n", injected, v + 1, was_empty);
            v = 0
        };
#ifndef MUTANT_NO_INJECT_FENCE
        d_step { FLUSH(P); fpub = mem[PUSHED]; printf("P : inject fence\n") };
#endif
        d_step { POST_EVENT(P, c_sl, c_in) };      /* new_shared_jobs */
        WAKE_DECISION(c_sl, c_in, was_empty, n);
        c_sl = 0; c_in = 0; was_empty = 0;
        LOAD(P, PUSHED, v);
        WAKE_ANY(P, n, k, woke, v);
        d_step { v = 0; inflight--; j++ }
    :: else -> break
    od
}

/* ---- store buffers drain at any time -------------------------------------------- */

active proctype drainer() {
end_drain:
    do
    :: d_step { sbl[P] > 0 -> printf("   (P's store of %d reaches memory)\n", sbx[P * SBN]); DRAIN_ONE(P) }
    :: d_step { sbl[0] > 0 -> printf("   (w0's deque store reaches memory)\n"); DRAIN_ONE(0) }
    od
}

/* ---- safety invariants, checked in every reachable state -------------------------- */

#define QUEUED_J    (injected > taken)
#define ALL_BLOCKED (nblk == NW)

/* NoLostWakeup (Julia's): no job stays queued (an injected job, or a job in
 * a deque whose owner is blocked) while every worker is blocked, once no
 * post, latch set or internal post is under way. */
#define NoLostWakeup !(ALL_BLOCKED && inflight == 0 && (QUEUED_J || (kq && is_blocked[0])))

/* LatchWakes: once set() returned, the latch's waiter is not blocked. */
#define LatchWakes !(w0_on_k && latch[KL] == SET && is_blocked[0] && inflight == 0)

/* HandOff: no injected job stays queued while at least one worker is
 * blocked and every other one runs a job (which may take any time). */
#define HandOff !(QUEUED_J && inflight == 0 && nblk > 0 && nblk + nbusy == NW)

/* InternalPostNoticed: a job worker 0 pushed, in memory when its post read
 * the counters, does not stay in the deque while worker 0 runs a() and every
 * other worker is blocked (a worker counted as idle sees the post). */
#define InternalPostNoticed !(w0_in_a && k_vis_at_post && mem[DQ] == 1 && nblk == NW - 1 && inflight == 0)

/* SleepingCount: `sleeping` counts only workers that are blocked, or hold
 * their own mutex on the way to blocking, or whose waker still holds their
 * mutex (it decrements before unlocking): never a worker already running. */
#define CNT_OK(w) (!counted[w] || is_blocked[w] || mutex[w] != 0)

/* ForkPromoted: a fork serves a thief's request: K is not left pending
 * when a thief had asked before worker 0 pushed it. */
#define ForkPromoted !(kpend && asked_at_fork)

/* ForkOnce: K runs at most once, and worker 0's join returns only after
 * it ran. */
#define ForkOnce (kruns <= 1 && !(w0_joined && kruns == 0))
#if NW == 2
#define SleepingCount (CNT_OK(0) && CNT_OK(1))
#elif NW == 3
#define SleepingCount (CNT_OK(0) && CNT_OK(1) && CNT_OK(2))
#else
#define SleepingCount (CNT_OK(0) && CNT_OK(1) && CNT_OK(2) && CNT_OK(3))
#endif

#if defined(CHECK_ALL)
#define ALL_INV (NoLostWakeup && LatchWakes && HandOff && InternalPostNoticed && SleepingCount && ForkPromoted && ForkOnce)
#elif defined(ONLY_NoLostWakeup)
#define ALL_INV NoLostWakeup
#elif defined(ONLY_LatchWakes)
#define ALL_INV LatchWakes
#elif defined(ONLY_HandOff)
#define ALL_INV HandOff
#elif defined(ONLY_InternalPostNoticed)
#define ALL_INV InternalPostNoticed
#elif defined(ONLY_SleepingCount)
#define ALL_INV SleepingCount
#elif defined(ONLY_ForkPromoted)
#define ALL_INV ForkPromoted
#elif defined(ONLY_ForkOnce)
#define ALL_INV ForkOnce
#else
#define ALL_INV true
#endif

active proctype monitor() {
end_monitor:
    d_step {
        !(ALL_INV) ->
#ifdef CHECK_ALL
        assert(NoLostWakeup);
        assert(LatchWakes);
        assert(HandOff);
        assert(InternalPostNoticed);
        assert(SleepingCount);
        assert(ForkPromoted);
        assert(ForkOnce)
#else
        assert(ALL_INV)
#endif
    }
}

/* Progress, under weak fairness: every injected job is taken, K runs, and
 * worker 0's join returns. */
ltl progress { <> (taken == NINJ && kdone && w0_joined) }
