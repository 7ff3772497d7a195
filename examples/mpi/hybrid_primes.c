/*
 * Hybrid MPI + work stealing: counts the primes in [1, N] by deterministic
 * Miller-Rabin. Ranks claim chunks of the range dynamically from a shared
 * counter on rank 0 (MPI_Fetch_and_op in a passive-target epoch); each rank
 * runs its chunk with blz_parallel_for on its own pool; MPI_Allreduce adds up
 * the counts. Rank 0 then counts again with a plain sequential loop and with
 * a sieve, and the program checks that all three agree.
 *
 * Threading contract: only the thread that called MPI_Init_thread calls MPI
 * (MPI_THREAD_FUNNELED, checked with MPI_Query_thread); the pool's workers
 * never do. On rank 0, which hosts the counter, that thread drives MPI's
 * progress engine every -p microseconds while its pool works, so that the
 * other ranks' claims complete even where a one-sided operation needs the
 * target's help (see docs/scale-out.md).
 *
 * usage: mpirun -np R hybrid_primes [-w workers] [-n N] [-c chunk]
 *                                   [-g grain] [-p poll_us] [-r repeats]
 * It prints one line per rank (chunks, items, wall and CPU time, the mean
 * claim latency), the result, the checks and "mpi: P passed, F failed".
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, getopt */
#include <blitz.h>
#include <mpi.h>

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the workload: primality below 2^32 ---- */

static uint32_t pow_mod(uint32_t base, uint32_t exponent, uint32_t modulus) {
    uint64_t result = 1, power = base % modulus; /* every product < 2^64 since modulus < 2^32 */
    for (; exponent != 0; exponent >>= 1) {
        if (exponent & 1) result = result * power % modulus;
        power = power * power % modulus;
    }
    return (uint32_t)result;
}

/* n odd, n > base: is n a strong probable prime to this base? */
static bool strong_probable_prime(uint32_t n, uint32_t base) {
    uint32_t odd_part = n - 1;
    int twos = 0;
    for (; (odd_part & 1) == 0; odd_part >>= 1) ++twos;
    uint64_t x = pow_mod(base, odd_part, n);
    if (x == 1 || x == n - 1) return true;
    for (int i = 1; i < twos; ++i) {
        x = x * x % n;
        if (x == n - 1) return true;
    }
    return false;
}

/*
 * Deterministic below 2^32: a strong probable prime to bases 2, 7 and 61
 * below 4,759,123,141 is prime (G. Jaeschke, "On strong pseudoprimes to
 * several bases", Math. Comp. 61 (1993) 915-926). Trial division first makes
 * the cost per number irregular: most numbers leave at once, primes pay for
 * three modular exponentiations.
 */
static bool is_prime(uint32_t n) {
    static const uint32_t small_primes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
    static const uint32_t bases[] = {2, 7, 61};
    if (n < 2) return false;
    for (size_t i = 0; i < sizeof small_primes / sizeof small_primes[0]; ++i) {
        if (n == small_primes[i]) return true;
        if (n % small_primes[i] == 0) return false;
    }
    if (n < 67 * 67) return true; /* no prime factor up to 61 and below the next prime's square */
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; ++i)
        if (!strong_probable_prime(n, bases[i])) return false;
    return true;
}

static uint64_t count_primes_between(uint64_t first, uint64_t end) { /* [first, end) */
    uint64_t count = 0;
    for (uint64_t n = first; n < end; ++n) count += is_prime((uint32_t)n);
    return count;
}

/* An independent count for the check: a sieve over the odd numbers 3..n. */
static bool count_primes_by_sieve(uint32_t n, uint64_t *out_count) {
    if (n < 2) {
        *out_count = 0;
        return true;
    }
    size_t odd_count = (n - 1) / 2; /* index i stands for 2i + 3 */
    unsigned char *composite = calloc(odd_count + 1, 1);
    if (composite == NULL) return false;
    for (uint64_t i = 0; (2 * i + 3) * (2 * i + 3) <= n; ++i) {
        if (composite[i]) continue;
        uint64_t p = 2 * i + 3;
        for (uint64_t j = (p * p - 3) / 2; j < odd_count; j += p) composite[j] = 1;
    }
    uint64_t count = 1; /* the prime 2 */
    for (size_t i = 0; i < odd_count; ++i) count += !composite[i];
    free(composite);
    *out_count = count;
    return true;
}

/* ---- options ---- */

#define MAX_N UINT32_MAX        /* is_prime's domain */
#define SIEVE_LIMIT (1u << 28) /* the sieve check needs N / 2 bytes on rank 0 */

typedef struct options {
    uint32_t workers; /* per rank; 0: BLZ_NUM_THREADS, else the CPUs of the rank's affinity mask */
    uint64_t n;
    uint64_t chunk;
    uint64_t grain;   /* blz_parallel_for's grain; 0: automatic */
    uint64_t poll_us; /* on rank 0; 0: block in blz_join without driving MPI's progress */
    uint64_t repeats;
} options;

static bool parse_number(const char *text, uint64_t min, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value < min || value > max) return false;
    *out = value;
    return true;
}

static const char usage[] =
    "usage: hybrid_primes [-w workers per rank, 0..65535 (0: BLZ_NUM_THREADS or the CPUs)]\n"
    "                     [-n N, 1..4294967295] [-c chunk, >= 1] [-g grain, 0: automatic]\n"
    "                     [-p poll_us, 0..1000000: rank 0 drives MPI progress that often (0: never)]\n"
    "                     [-r repeats, 1..100]\n";

/* Every rank parses the same command line, so every rank reaches the same verdict. */
static bool parse_options(int argc, char **argv, options *out, char *error, size_t error_size) {
    options o = {0, 10000000, 1000000, 0, 1000, 1};
    uint64_t workers = 0;
    int opt;
    opterr = 0; /* one message from rank 0 instead of one per rank */
    while ((opt = getopt(argc, argv, "w:n:c:g:p:r:")) != -1) {
        bool ok = false;
        switch (opt) {
        case 'w': ok = parse_number(optarg, 0, BLZ_MAX_THREADS, &workers); break;
        case 'n': ok = parse_number(optarg, 1, MAX_N, &o.n); break;
        case 'c': ok = parse_number(optarg, 1, UINT64_MAX, &o.chunk); break;
        case 'g': ok = parse_number(optarg, 0, UINT64_MAX, &o.grain); break;
        case 'p': ok = parse_number(optarg, 0, 1000000, &o.poll_us); break;
        case 'r': ok = parse_number(optarg, 1, 100, &o.repeats); break;
        default:
            snprintf(error, error_size, "unknown option or missing value: -%c", optopt);
            return false;
        }
        if (!ok) {
            snprintf(error, error_size, "-%c %s: not a number in range", opt, optarg);
            return false;
        }
    }
    if (optind != argc) {
        snprintf(error, error_size, "unexpected argument: %s", argv[optind]);
        return false;
    }
    o.workers = (uint32_t)workers;
    *out = o;
    return true;
}

/* ---- one chunk on the rank's pool ---- */

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct chunk_job {
    blz_pool *pool;
    uint64_t first, end; /* the numbers [first, end) */
    size_t grain;
    /* relaxed adds: each is read after blz_join, which orders every piece before it */
    atomic_uint_fast64_t primes;
    atomic_uint_fast64_t items;
    atomic_uint_fast64_t pieces_off_pool; /* pieces that ran on a thread outside the pool */
    atomic_bool done;                     /* hint for the polling loop only */
    blz_status status;
} chunk_job;

static void count_piece(void *arg, size_t begin, size_t end) {
    chunk_job *job = arg;
    uint64_t primes = count_primes_between(begin, end);
    atomic_fetch_add_explicit(&job->primes, primes, memory_order_relaxed); /* read after blz_join */
    atomic_fetch_add_explicit(&job->items, end - begin, memory_order_relaxed); /* read after blz_join */
    if (blz_worker_index(job->pool) < 0) /* the MPI thread must never run the workload */
        atomic_fetch_add_explicit(&job->pieces_off_pool, 1, memory_order_relaxed); /* read after blz_join */
}

static void run_chunk_task(void *arg) {
    chunk_job *job = arg;
    job->status = blz_parallel_for(job->pool, job->first, job->end, job->grain, count_piece, job);
    /* relaxed: only tells the polling loop to stop; blz_join publishes the results */
    atomic_store_explicit(&job->done, true, memory_order_relaxed);
}

/* Keeps MPI's progress engine turning until the job is done, without a busy loop. */
static void drive_mpi_progress_until_done(const chunk_job *job, uint64_t poll_us) {
    const struct timespec pause = {(time_t)(poll_us / 1000000), (long)(poll_us % 1000000) * 1000};
    /* relaxed: a late sight of done costs one more pause, nothing else */
    while (!atomic_load_explicit(&job->done, memory_order_relaxed)) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        nanosleep(&pause, NULL);
    }
}

static void fail_and_abort(const char *what, blz_status status) {
    fprintf(stderr, "hybrid_primes: %s: %s\n", what, blz_status_string(status));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- one hybrid run: every rank claims chunks until none is left ---- */

typedef struct rank_report {
    char host[MPI_MAX_PROCESSOR_NAME];
    uint64_t chunks, items, primes, pieces_off_pool, claims;
    uint64_t steals;       /* jobs this rank's workers took from each other during the run */
    uint32_t workers, cpus;
    double wall, cpu;      /* seconds over this rank's whole claiming loop */
    double claim_seconds;  /* inside MPI_Fetch_and_op + MPI_Win_flush */
    double chunk_seconds;  /* inside the chunks' computation */
} rank_report;

static uint64_t count_chunks(const options *o) { return o->n / o->chunk + (o->n % o->chunk != 0); }

/* Claims the next chunk index from the counter on rank 0. */
static uint64_t claim_chunk(MPI_Win counter, rank_report *report) {
    const uint64_t one = 1;
    uint64_t index;
    double t0 = MPI_Wtime();
    MPI_Fetch_and_op(&one, &index, MPI_UINT64_T, 0, 0, MPI_SUM, counter);
    MPI_Win_flush(0, counter);
    report->claim_seconds += MPI_Wtime() - t0;
    ++report->claims;
    return index;
}

static void run_one_chunk(blz_pool *pool, const options *o, uint64_t index, uint64_t poll_us,
                          rank_report *report) {
    chunk_job job = {.pool = pool, .grain = (size_t)o->grain};
    job.first = 1 + index * o->chunk;
    job.end = (o->n - index * o->chunk <= o->chunk) ? o->n + 1 : job.first + o->chunk;
    atomic_init(&job.primes, 0);
    atomic_init(&job.items, 0);
    atomic_init(&job.pieces_off_pool, 0);
    atomic_init(&job.done, false);
    double t0 = MPI_Wtime();
    blz_task *task;
    blz_status status = blz_spawn(pool, run_chunk_task, &job, &task);
    if (status != BLZ_OK) fail_and_abort("blz_spawn", status);
    if (poll_us > 0) drive_mpi_progress_until_done(&job, poll_us);
    status = blz_join(task);
    if (status != BLZ_OK) fail_and_abort("blz_join", status);
    if (job.status != BLZ_OK) fail_and_abort("blz_parallel_for", job.status);
    report->chunk_seconds += MPI_Wtime() - t0;
    report->chunks += 1;
    report->primes += atomic_load_explicit(&job.primes, memory_order_relaxed); /* ordered by blz_join */
    report->items += atomic_load_explicit(&job.items, memory_order_relaxed); /* ordered by blz_join */
    report->pieces_off_pool += atomic_load_explicit(&job.pieces_off_pool, memory_order_relaxed); /* ditto */
}

static rank_report run_hybrid(blz_pool *pool, const options *o) {
    rank_report report;
    memset(&report, 0, sizeof report);
    uint64_t chunk_count = count_chunks(o);
    MPI_Win counter;
    uint64_t *counter_value;
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    /* Only the counter's host answers others' claims; an origin completes its own in MPI_Win_flush. */
    uint64_t poll_us = rank == 0 && ranks > 1 ? o->poll_us : 0;
    /* Only rank 0's window holds the counter; the others expose nothing. */
    MPI_Win_allocate(rank == 0 ? (MPI_Aint)sizeof(uint64_t) : 0, sizeof(uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD,
                     &counter_value, &counter);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, counter);
    if (rank == 0) {
        *counter_value = 0;
        MPI_Win_sync(counter); /* a local store reaches RMA only through a sync (separate memory model) */
    }
    MPI_Barrier(MPI_COMM_WORLD); /* nobody claims before the zero is in place */
    double wall0 = MPI_Wtime(), cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (uint64_t index = claim_chunk(counter, &report); index < chunk_count; index = claim_chunk(counter, &report))
        run_one_chunk(pool, o, index, poll_us, &report);
    report.wall = MPI_Wtime() - wall0;
    report.cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    MPI_Win_unlock_all(counter);
    MPI_Win_free(&counter);
    return report;
}

/* ---- the checks and the report on rank 0 ---- */

typedef struct tally {
    int passed, failed;
} tally;

static void check(tally *t, bool ok, const char *what) {
    printf("check %-58s %s\n", what, ok ? "ok" : "FAILED");
    if (ok) ++t->passed;
    else ++t->failed;
}

static void print_rank_lines(const rank_report *reports, int ranks) {
    printf("%4s %-16s %4s %7s %6s %10s %9s %8s %8s %8s %9s %9s %8s\n", "rank", "host", "cpus", "workers", "chunks",
           "items", "primes", "wall_s", "cpu_s", "cpu/wall", "claim_us", "chunk_ms", "steals");
    for (int r = 0; r < ranks; ++r) {
        const rank_report *p = &reports[r];
        double claim_us = p->claims ? p->claim_seconds * 1e6 / (double)p->claims : 0;
        double chunk_ms = p->chunks ? p->chunk_seconds * 1e3 / (double)p->chunks : 0;
        printf("%4d %-16.16s %4" PRIu32 " %7" PRIu32 " %6" PRIu64 " %10" PRIu64 " %9" PRIu64
               " %8.3f %8.3f %8.2f %9.2f %9.3f %8" PRIu64 "\n",
               r, p->host, p->cpus, p->workers, p->chunks, p->items, p->primes, p->wall, p->cpu,
               p->wall > 0 ? p->cpu / p->wall : 0, claim_us, chunk_ms, p->steals);
        if (p->workers > p->cpus)
            printf("note: rank %d has %" PRIu32 " workers but may run on %" PRIu32
                   " CPUs (see --bind-to in docs/scale-out.md)\n",
                   r, p->workers, p->cpus);
    }
}

typedef struct totals {
    uint64_t primes, items, pieces_off_pool;
    double wall, cpu; /* the slowest rank's wall time, every rank's CPU time */
} totals;

static totals sum_reports(const rank_report *reports, int ranks) {
    totals t = {0, 0, 0, 0, 0};
    for (int r = 0; r < ranks; ++r) {
        t.primes += reports[r].primes;
        t.items += reports[r].items;
        t.pieces_off_pool += reports[r].pieces_off_pool;
        t.cpu += reports[r].cpu;
        if (reports[r].wall > t.wall) t.wall = reports[r].wall;
    }
    return t;
}

/* ---- main ---- */

static uint32_t affinity_cpus(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 0;
}

static blz_pool *create_rank_pool(const options *o, int rank) {
    char name[16];
    snprintf(name, sizeof name, "r%d-blz", rank); /* workers show as r0-blz-0, ... in top -H */
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = o->workers;
    config.thread_name = name;
    blz_pool *pool = NULL;
    blz_status status = blz_pool_create(&config, &pool);
    if (status != BLZ_OK) fail_and_abort("blz_pool_create", status);
    return pool;
}

static uint64_t pool_steals(const blz_pool *pool) {
    blz_stats stats = {.struct_size = sizeof stats};
    blz_status status = blz_pool_stats(pool, &stats);
    if (status != BLZ_OK) fail_and_abort("blz_pool_stats", status);
    return stats.steals;
}

/* Runs the hybrid count o->repeats times; keeps the fastest run's reports. Returns false if any run disagreed. */
static bool run_repeats(blz_pool *pool, const options *o, int rank, int ranks, rank_report *best_reports,
                        uint64_t *out_primes) {
    bool agree = true;
    double best_wall = 1e300;
    rank_report *reports = rank == 0 ? calloc((size_t)ranks, sizeof *reports) : NULL;
    if (rank == 0 && reports == NULL) fail_and_abort("run_repeats", BLZ_ENOMEM);
    for (uint64_t r = 0; r < o->repeats; ++r) {
        uint64_t steals_before = pool_steals(pool);
        rank_report mine = run_hybrid(pool, o);
        mine.steals = pool_steals(pool) - steals_before;
        uint64_t primes = 0;
        MPI_Allreduce(&mine.primes, &primes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        MPI_Get_processor_name(mine.host, &(int){0});
        mine.workers = blz_pool_num_threads(pool);
        mine.cpus = affinity_cpus();
        /* MPI_BYTE: every rank runs this binary, so the struct's layout is the same everywhere */
        MPI_Gather(&mine, sizeof mine, MPI_BYTE, reports, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (r > 0 && primes != *out_primes) agree = false;
        *out_primes = primes;
        double wall = rank == 0 ? sum_reports(reports, ranks).wall : 0;
        if (rank == 0 && wall < best_wall) {
            best_wall = wall;
            memcpy(best_reports, reports, (size_t)ranks * sizeof *reports);
        }
    }
    free(reports);
    return agree;
}

/* Rank 0: prints the table, counts sequentially and by sieve, runs the checks. */
static void report_and_check(tally *t, const options *o, const rank_report *reports, int ranks,
                             uint64_t hybrid_primes, bool repeats_agree) {
    totals sum = sum_reports(reports, ranks);
    char polling[48] = "rank 0 does not poll";
    if (ranks > 1 && o->poll_us > 0)
        snprintf(polling, sizeof polling, "rank 0 polls every %" PRIu64 " us", o->poll_us);
    printf("hybrid_primes: primes in [1, %" PRIu64 "] by Miller-Rabin, %d rank%s, chunk %" PRIu64
           " (%" PRIu64 " chunks), %s, fastest of %" PRIu64 " run%s\n",
           o->n, ranks, ranks == 1 ? "" : "s", o->chunk, count_chunks(o), polling, o->repeats,
           o->repeats == 1 ? "" : "s");
    print_rank_lines(reports, ranks);
    printf("hybrid:     pi(%" PRIu64 ") = %" PRIu64 "  wall %.3f s  CPU %.3f s  CPU/wall %.2f\n", o->n, hybrid_primes,
           sum.wall, sum.cpu, sum.cpu / sum.wall);

    double t0 = seconds(CLOCK_MONOTONIC);
    uint64_t sequential = count_primes_between(1, o->n + 1);
    printf("sequential: pi(%" PRIu64 ") = %" PRIu64 "  wall %.3f s  (one thread, no pool, no MPI)\n", o->n, sequential,
           seconds(CLOCK_MONOTONIC) - t0);

    check(t, hybrid_primes == sequential && repeats_agree, "hybrid count equals the sequential count");
    check(t, sum.items == o->n, "every number in [1, N] counted exactly once");
    check(t, sum.primes == hybrid_primes, "the ranks' counts add up to the MPI_Allreduce sum");
    check(t, sum.pieces_off_pool == 0, "every loop piece ran on a worker, none on the MPI thread");
    uint64_t sieved;
    if (o->n > SIEVE_LIMIT)
        printf("sieve check skipped: N above %u\n", SIEVE_LIMIT);
    else if (!count_primes_by_sieve((uint32_t)o->n, &sieved))
        check(t, false, "sieve: out of memory");
    else
        check(t, sieved == sequential, "Miller-Rabin agrees with a sieve of Eratosthenes");
}

/* MPI_THREAD_FUNNELED at least, and this thread is the one MPI calls its main thread. */
static bool funneled_here(int provided) {
    int queried, is_main;
    MPI_Query_thread(&queried);
    MPI_Is_thread_main(&is_main);
    return provided >= MPI_THREAD_FUNNELED && queried == provided && is_main;
}

int main(int argc, char **argv) {
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    options o;
    char error[128];
    if (!parse_options(argc, argv, &o, error, sizeof error)) {
        if (rank == 0) fprintf(stderr, "hybrid_primes: %s\n%s", error, usage);
        MPI_Finalize();
        return 2;
    }
    int funneled = funneled_here(provided), all_funneled;
    MPI_Allreduce(&funneled, &all_funneled, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    tally t = {0, 0};
    if (rank == 0) check(&t, all_funneled, "MPI_THREAD_FUNNELED on every rank, called from its main thread");
    if (!all_funneled) { /* workers must not run beside an MPI that cannot have them */
        if (rank == 0) printf("mpi: %d passed, %d failed\n", t.passed, t.failed);
        MPI_Finalize();
        return 1;
    }

    blz_pool *pool = create_rank_pool(&o, rank);
    rank_report *reports = rank == 0 ? calloc((size_t)ranks, sizeof *reports) : NULL;
    if (rank == 0 && reports == NULL) fail_and_abort("calloc", BLZ_ENOMEM);
    uint64_t hybrid_primes = 0;
    bool repeats_agree = run_repeats(pool, &o, rank, ranks, reports, &hybrid_primes);
    blz_status status = blz_pool_destroy(pool);
    if (status != BLZ_OK) fail_and_abort("blz_pool_destroy", status);

    int failed = 0;
    if (rank == 0) {
        report_and_check(&t, &o, reports, ranks, hybrid_primes, repeats_agree);
        printf("mpi: %d passed, %d failed\n", t.passed, t.failed);
        fflush(stdout);
        failed = t.failed;
        free(reports);
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return failed ? 1 : 0;
}
