/* The measuring harness: one warm-up, one measured run, one JSON line; see harness.h. */
#define _GNU_SOURCE
#include "harness.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void bench_fail(const char *what) {
    fprintf(stderr, "bench: %s\n", what);
    exit(1);
}

/* ---- arguments: WORKLOAD key=value ... ---- */

enum { MAX_ARGS = 16 };

typedef struct args {
    int count;
    const char *key[MAX_ARGS];
    const char *value[MAX_ARGS];
    size_t key_length[MAX_ARGS];
    int used[MAX_ARGS];
} args;

static int args_parse(args *a, int argc, char **argv) {
    a->count = 0;
    for (int i = 0; i < argc; ++i) {
        const char *eq = strchr(argv[i], '=');
        if (eq == NULL || eq == argv[i] || a->count == MAX_ARGS) {
            fprintf(stderr, "bench: expected key=value, got '%s'\n", argv[i]);
            return 0;
        }
        a->key[a->count] = argv[i];
        a->key_length[a->count] = (size_t)(eq - argv[i]);
        a->value[a->count] = eq + 1;
        a->used[a->count] = 0;
        ++a->count;
    }
    return 1;
}

static const char *arg_string(args *a, const char *key, const char *fallback) {
    for (int i = 0; i < a->count; ++i) {
        if (strlen(key) == a->key_length[i] && strncmp(a->key[i], key, a->key_length[i]) == 0) {
            a->used[i] = 1;
            return a->value[i];
        }
    }
    return fallback;
}

static long arg_long(args *a, const char *key, long fallback) {
    const char *text = arg_string(a, key, NULL);
    if (text == NULL) return fallback;
    char *end;
    long value = strtol(text, &end, 10);
    if (*end != '\0' || value < 0) {
        fprintf(stderr, "bench: %s=%s is not a non-negative integer\n", key, text);
        exit(2);
    }
    return value;
}

static int args_all_used(const args *a) {
    for (int i = 0; i < a->count; ++i) {
        if (!a->used[i]) {
            fprintf(stderr, "bench: unknown argument '%s' for this workload\n", a->key[i]);
            return 0;
        }
    }
    return 1;
}

/* ---- statistics ---- */

static int compare_doubles(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The q-quantile (0..1) of v by the nearest rank; v keeps its order. */
static double quantile(const double *v, size_t n, double q) {
    if (n == 0) return 0;
    double *sorted = malloc(n * sizeof *sorted);
    if (sorted == NULL) bench_fail("out of memory");
    memcpy(sorted, v, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, compare_doubles);
    size_t rank = (size_t)(q * (double)n + 0.999999);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    double value = sorted[rank - 1];
    free(sorted);
    return value;
}

/* ---- the result and its JSON line ---- */

enum { MAX_EXTRAS = 16 };

typedef struct result {
    const char *impl;
    const char *workload;
    unsigned threads;
    double wall, cpu;   /* seconds, of the measured region */
    double metric;      /* lower is better */
    const char *unit;
    char checksum[48];
    int extra_count;
    const char *extra_key[MAX_EXTRAS];
    double extra_value[MAX_EXTRAS];
    const char *samples_key[2];
    double *samples[2];      /* owned: freed after the result is printed */
    size_t sample_count[2];
    int has_pool;            /* the runtime reports counters: */
    bench_pool_stats pool;   /* their change over the measured region */
} result;

static void add_extra(result *r, const char *key, double value) {
    if (r->extra_count == MAX_EXTRAS) bench_fail("too many extras");
    r->extra_key[r->extra_count] = key;
    r->extra_value[r->extra_count] = value;
    ++r->extra_count;
}

static void print_result(const result *r) {
    printf("{\"impl\":\"%s\",\"workload\":\"%s\",\"threads\":%u,\"wall_s\":%.9g,\"cpu_s\":%.9g,"
           "\"cpu_per_wall\":%.4f,\"metric\":%.6g,\"unit\":\"%s\",\"checksum\":\"%s\",\"extra\":{",
           r->impl, r->workload, r->threads, r->wall, r->cpu, r->wall > 0 ? r->cpu / r->wall : 0.0,
           r->metric, r->unit, r->checksum);
    for (int i = 0; i < r->extra_count; ++i)
        printf("%s\"%s\":%.6g", i ? "," : "", r->extra_key[i], r->extra_value[i]);
    printf("}");
    if (r->has_pool) {
        const bench_pool_stats *p = &r->pool;
        printf(",\"pool\":{\"jobs_executed\":%llu,\"jobs_injected\":%llu,\"steals\":%llu,\"sleeps\":%llu,"
               "\"wakeups\":%llu,\"spurious_wakeups\":%llu,\"sleep_aborts\":%llu}",
               (unsigned long long)p->jobs_executed, (unsigned long long)p->jobs_injected,
               (unsigned long long)p->steals, (unsigned long long)p->sleeps, (unsigned long long)p->wakeups,
               (unsigned long long)p->spurious_wakeups, (unsigned long long)p->sleep_aborts);
    }
    for (int s = 0; s < 2; ++s) {
        if (r->samples_key[s] == NULL) continue;
        printf(",\"%s\":[", r->samples_key[s]);
        for (size_t i = 0; i < r->sample_count[s]; ++i) printf("%s%.4g", i ? "," : "", r->samples[s][i]);
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
}

/* ---- measuring a region ---- */

typedef struct region {
    const bench_runtime *rt;
    double wall0, cpu0;
    bench_pool_stats pool0;
} region;

static void read_pool(const bench_runtime *rt, bench_pool_stats *out) {
    if (rt->stats(out) != 0) bench_fail("pool statistics");
}

static region region_begin(const bench_runtime *rt) {
    region g;
    g.rt = rt;
    if (rt->stats) read_pool(rt, &g.pool0);
    g.cpu0 = bench_cpu();
    g.wall0 = bench_wall();
    return g;
}

/* Wall and CPU time since region_begin, and the change of the pool's counters. */
static void region_end(region g, result *r) {
    r->wall = bench_wall() - g.wall0;
    r->cpu = bench_cpu() - g.cpu0;
    if (g.rt->stats == NULL) return;
    bench_pool_stats now;
    read_pool(g.rt, &now);
    r->has_pool = 1;
    r->pool.jobs_executed = now.jobs_executed - g.pool0.jobs_executed;
    r->pool.jobs_injected = now.jobs_injected - g.pool0.jobs_injected;
    r->pool.steals = now.steals - g.pool0.steals;
    r->pool.sleeps = now.sleeps - g.pool0.sleeps;
    r->pool.wakeups = now.wakeups - g.pool0.wakeups;
    r->pool.spurious_wakeups = now.spurious_wakeups - g.pool0.spurious_wakeups;
    r->pool.sleep_aborts = now.sleep_aborts - g.pool0.sleep_aborts;
}

/* ---- the futex floor: wake-to-run of a thread blocked in FUTEX_WAIT ---- */

typedef struct futex_floor {
    _Atomic uint32_t round;  /* 2k: the waiter sleeps; 2k+1: wake up; 2k+2: it ran */
    double posted_at;
    double latency;
    int waiter_cpu;          /* where the waiter ran after the wake-up */
    pthread_t thread;
} futex_floor;

static const uint32_t FLOOR_STOP = UINT32_MAX;

static void futex_wait(_Atomic uint32_t *word, uint32_t expected) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void *floor_waiter(void *p) {
    futex_floor *f = p;
    for (uint32_t sleeping = 0;; sleeping += 2) {
        uint32_t now;
        /* acquire: posted_at, written before the release store of the round, is read below. */
        while ((now = atomic_load_explicit(&f->round, memory_order_acquire)) == sleeping) futex_wait(&f->round, sleeping);
        if (now == FLOOR_STOP) return NULL;
        f->latency = bench_wall() - f->posted_at;
        f->waiter_cpu = sched_getcpu();
        /* release: the main thread reads latency after it sees the new round. */
        atomic_store_explicit(&f->round, sleeping + 2, memory_order_release);
        futex_wake(&f->round);
    }
}

static void floor_start(futex_floor *f) {
    atomic_init(&f->round, 0);
    if (pthread_create(&f->thread, NULL, floor_waiter, f) != 0) bench_fail("cannot start the futex waiter");
}

/* One wake-to-run sample, in microseconds; the waiter has been asleep since
 * the last one. *same_cpu: the waiter ran on the CPU the post was made from. */
static double floor_sample(futex_floor *f, int *same_cpu) {
    uint32_t sleeping = atomic_load_explicit(&f->round, memory_order_relaxed);  /* only this thread posts */
    int poster_cpu = sched_getcpu();
    f->posted_at = bench_wall();
    /* release: publishes posted_at to the waiter. */
    atomic_store_explicit(&f->round, sleeping + 1, memory_order_release);
    futex_wake(&f->round);
    /* acquire: pairs with the waiter's release so that latency is visible. */
    while (atomic_load_explicit(&f->round, memory_order_acquire) != sleeping + 2) futex_wait(&f->round, sleeping + 1);
    *same_cpu = f->waiter_cpu == poster_cpu;
    return f->latency * 1e6;
}

static void floor_stop(futex_floor *f) {
    atomic_store_explicit(&f->round, FLOOR_STOP, memory_order_release);  /* release: the waiter exits after seeing it */
    futex_wake(&f->round);
    pthread_join(f->thread, NULL);
}

/* Sleeps `gap` seconds, then until the runtime says every worker sleeps
 * (when it can tell). Returns 0 if the pool never fell asleep within 2 s. */
static int settle(const bench_runtime *rt, double gap) {
    bench_sleep(gap);
    if (rt->all_asleep == NULL) return 1;
    double give_up = bench_wall() + 2.0;
    while (!rt->all_asleep()) {
        if (bench_wall() > give_up) return 0;
        bench_sleep(0.001);
    }
    return 1;
}

/* ---- the workloads ---- */

/* A workload a runtime's table leaves out (NULL) fails with a message. */
#define BENCH_NEED(rt, op, workload)                                                          \
    do {                                                                                      \
        if ((rt)->op == NULL) bench_fail(workload ": this runtime does not implement " #op); \
    } while (0)

static void workload_fib(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, fib, "fib");
    unsigned n = (unsigned)arg_long(a, "n", 30);
    if (n > 50) bench_fail("fib: n above 50 would take hours");
    rt->fib(n < 20 ? n : 20);
    region g = region_begin(rt);
    uint64_t value = rt->fib(n);
    region_end(g, r);
    uint64_t joins = bench_fib(n + 1) - 1;
    r->metric = r->wall * 1e9 / (double)(joins ? joins : 1);
    r->unit = "ns/join";
    snprintf(r->checksum, sizeof r->checksum, "%llu", (unsigned long long)value);
}

static void workload_tree(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, tree_sum, "tree");
    unsigned depth = (unsigned)arg_long(a, "depth", 10);
    unsigned reps = (unsigned)arg_long(a, "reps", 1);
    if (depth < 1 || depth > 30 || reps < 1) bench_fail("tree: depth must be 1..30, reps at least 1");
    bench_node *warm = bench_tree_build(depth < 12 ? depth : 12);
    bench_node *tree = bench_tree_build(depth);
    rt->tree_sum(warm, 1);
    region g = region_begin(rt);
    int64_t sum = rt->tree_sum(tree, reps);
    region_end(g, r);
    double nodes = (double)(((int64_t)1 << depth) - 1);
    r->metric = r->wall * 1e9 / (nodes * reps);
    r->unit = "ns/node";
    snprintf(r->checksum, sizeof r->checksum, "%lld", (long long)sum);
    add_extra(r, "nodes", nodes);
    add_extra(r, "reps", reps);
    bench_tree_free(warm);
    bench_tree_free(tree);
}

static double *alloc_doubles(size_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    if (p == NULL) bench_fail("out of memory for the input array");
    return p;
}

static void workload_parfor(const bench_runtime *rt, args *a, result *r) {
    const char *op = arg_string(a, "op", "sum");
    size_t n = (size_t)arg_long(a, "n", 10000000);
    if (n < 16) bench_fail("parfor: n must be at least 16");
    double *x = alloc_doubles(n), *y = alloc_doubles(n);
    region g;
    if (strcmp(op, "sum") == 0) {
        BENCH_NEED(rt, sum, "parfor sum");
        bench_fill_integers(x, n);
        rt->sum(x, n / 16);
        g = region_begin(rt);
        double sum = rt->sum(x, n);
        region_end(g, r);
        snprintf(r->checksum, sizeof r->checksum, "%.0f", sum);
    } else if (strcmp(op, "map") == 0) {
        BENCH_NEED(rt, map, "parfor map");
        bench_fill_integers(x, n);
        rt->map(x, y, n / 16);
        g = region_begin(rt);
        rt->map(x, y, n);
        region_end(g, r);
        snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_hash_doubles(y, n));
    } else if (strcmp(op, "sort") == 0) {
        BENCH_NEED(rt, sort, "parfor sort");
        bench_fill_uniform(x, n);
        memcpy(y, x, (n / 16) * sizeof *x);
        rt->sort(y, n / 16);
        g = region_begin(rt);
        rt->sort(x, n);
        region_end(g, r);
        if (bench_is_sorted(x, n))
            snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_hash_doubles(x, n));
        else
            snprintf(r->checksum, sizeof r->checksum, "unsorted");
    } else {
        fprintf(stderr, "bench: parfor op must be sum, map or sort, not '%s'\n", op);
        exit(2);
    }
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    free(x);
    free(y);
}

static void workload_uts(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, uts, "uts");
    int depth = (int)arg_long(a, "depth", 10);
    if (depth < 1 || depth > 14) bench_fail("uts: depth must be 1..14");
    bench_uts_node root;
    bench_uts_root(&root);
    rt->uts(&root, depth < 5 ? depth : 5);
    region g = region_begin(rt);
    bench_uts_count count = rt->uts(&root, depth);
    region_end(g, r);
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    snprintf(r->checksum, sizeof r->checksum, "%llu/%llu", (unsigned long long)count.nodes,
             (unsigned long long)count.leaves);
    add_extra(r, "ns_per_node", r->wall * 1e9 / (double)count.nodes);
}

/* The spawn workloads: `tasks` tiny tasks submitted and waited for by
 * spawn_wait (from outside the pool or from a worker), after a warm-up of at
 * most 10^4. The checksum is the slots' sum, so a lost task shows. */
static void time_spawns(const bench_runtime *rt, void (*spawn_wait)(size_t), size_t tasks, result *r) {
    bench_tiny_prepare(tasks < 10000 ? tasks : 10000);
    spawn_wait(tasks < 10000 ? tasks : 10000);
    bench_tiny_prepare(tasks);
    region g = region_begin(rt);
    spawn_wait(tasks);
    region_end(g, r);
    r->metric = r->wall * 1e9 / (double)tasks;
    r->unit = "ns/task";
    snprintf(r->checksum, sizeof r->checksum, "%llu", (unsigned long long)bench_tiny_checksum());
    add_extra(r, "tasks_per_s", (double)tasks / r->wall);
}

static void workload_spawn(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, spawn_wait, "spawn");
    size_t tasks = (size_t)arg_long(a, "tasks", 1000000);
    if (tasks < 1) bench_fail("spawn: tasks must be at least 1");
    time_spawns(rt, rt->spawn_wait, tasks, r);
}

/* The same tiny tasks spawned by one worker into its own queue: the cost of
 * a task that fans out, without the outside thread's hand-over. */
static void workload_spawn_inside(const bench_runtime *rt, args *a, result *r) {
    size_t tasks = (size_t)arg_long(a, "tasks", 1000000);
    if (tasks < 1) bench_fail("spawn_inside: tasks must be at least 1");
    if (rt->spawn_wait_inside == NULL) bench_fail("spawn_inside: this runtime does not spawn from a worker");
    time_spawns(rt, rt->spawn_wait_inside, tasks, r);
}

static void empty_function(void *arg) { (void)arg; }

static void workload_roundtrip(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, call, "roundtrip");
    size_t calls = (size_t)arg_long(a, "calls", 2000);
    if (calls < 1) bench_fail("roundtrip: calls must be at least 1");
    double *us = alloc_doubles(calls);
    for (int i = 0; i < 100; ++i) rt->call(empty_function, NULL);
    region g = region_begin(rt);
    for (size_t i = 0; i < calls; ++i) {
        double t0 = bench_wall();
        rt->call(empty_function, NULL);
        us[i] = (bench_wall() - t0) * 1e6;
    }
    region_end(g, r);
    r->metric = quantile(us, calls, 0.5);
    r->unit = "us";
    add_extra(r, "p99_us", quantile(us, calls, 0.99));
    add_extra(r, "mean_us", r->wall * 1e6 / (double)calls);
    add_extra(r, "calls", (double)calls);
    snprintf(r->checksum, sizeof r->checksum, "%zu", calls);
    free(us);
}

typedef struct stamp {
    double at;
    int cpu;
} stamp;

static void stamp_now(void *p) {
    stamp *s = p;
    s->at = bench_wall();
    s->cpu = sched_getcpu();
}

/* Wake-ups that ran on the waker's CPU and those that ran on another: how
 * many of the first, and each group's p50 and p99 (extras PREFIX_same,
 * PREFIX_same_p50_us, ...). Both have their own cost on a VM: a wake-up on
 * another CPU that is idle must bring that CPU out of its halt first. */
static void add_cpu_split(result *r, const char *const keys[5], const double *us, const int *same, size_t n) {
    double *in[2] = {alloc_doubles(n), alloc_doubles(n)};
    size_t count[2] = {0, 0};
    for (size_t i = 0; i < n; ++i) in[same[i] != 0][count[same[i] != 0]++] = us[i];
    add_extra(r, keys[0], (double)count[1]);
    add_extra(r, keys[1], quantile(in[1], count[1], 0.5));
    add_extra(r, keys[2], quantile(in[1], count[1], 0.99));
    add_extra(r, keys[3], quantile(in[0], count[0], 0.5));
    add_extra(r, keys[4], quantile(in[0], count[0], 0.99));
    free(in[0]);
    free(in[1]);
}

/* Deep-sleep wake latency, sample by sample next to the futex floor. */
static void workload_wake(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, post, "wake");
    BENCH_NEED(rt, call, "wake");
    size_t samples = (size_t)arg_long(a, "samples", 10);
    double gap = (double)arg_long(a, "gap_ms", 30) * 1e-3;
    if (samples < 1) bench_fail("wake: samples must be at least 1");
    /* The result takes both arrays over (a sequential run has no pool samples). */
    double *pool_us = alloc_doubles(samples), *floor_us = alloc_doubles(samples);
    int *pool_same = calloc(samples, sizeof *pool_same), *floor_same = calloc(samples, sizeof *floor_same);
    if (pool_same == NULL || floor_same == NULL) bench_fail("out of memory");
    futex_floor floor;
    floor_start(&floor);
    rt->call(empty_function, NULL);
    int never_asleep = 0;
    region g = region_begin(rt);
    for (size_t i = 0; i < samples; ++i) {
        bench_sleep(gap);
        floor_us[i] = floor_sample(&floor, &floor_same[i]);
        if (rt->sequential) continue;
        never_asleep += !settle(rt, gap);
        stamp started = {0};
        int caller_cpu = sched_getcpu();
        double t0 = bench_wall();
        rt->call(stamp_now, &started);
        pool_us[i] = (started.at - t0) * 1e6;
        pool_same[i] = started.cpu == caller_cpu;
    }
    region_end(g, r);
    floor_stop(&floor);
    r->samples_key[1] = "floor_samples_us";
    r->samples[1] = floor_us;
    r->sample_count[1] = samples;
    if (!rt->sequential) {
        r->samples_key[0] = "samples_us";
        r->samples[0] = pool_us;
        r->sample_count[0] = samples;
    } else {
        free(pool_us);
    }
    double floor_p50 = quantile(floor_us, samples, 0.5);
    r->metric = rt->sequential ? floor_p50 : quantile(pool_us, samples, 0.5);
    r->unit = "us";
    add_extra(r, "p99_us", rt->sequential ? quantile(floor_us, samples, 0.99) : quantile(pool_us, samples, 0.99));
    add_extra(r, "floor_p50_us", floor_p50);
    add_extra(r, "floor_p99_us", quantile(floor_us, samples, 0.99));
    add_extra(r, "never_asleep", never_asleep);
    static const char *const floor_keys[5] = {"floor_same_cpu", "floor_same_p50_us", "floor_same_p99_us",
                                              "floor_other_p50_us", "floor_other_p99_us"};
    add_cpu_split(r, floor_keys, floor_us, floor_same, samples);
    if (!rt->sequential) {
        static const char *const pool_keys[5] = {"same_cpu", "same_p50_us", "same_p99_us", "other_p50_us",
                                                 "other_p99_us"};
        add_cpu_split(r, pool_keys, pool_us, pool_same, samples);
    }
    free(pool_same);
    free(floor_same);
    snprintf(r->checksum, sizeof r->checksum, "%zu", samples);
}

typedef struct trickle_slot {
    double posted, started;
} trickle_slot;

static _Atomic size_t trickle_done;

static void trickle_task(void *p) {
    ((trickle_slot *)p)->started = bench_wall();
    /* release: the main thread reads `started` after it counts this task done. */
    atomic_fetch_add_explicit(&trickle_done, 1, memory_order_release);
}

/* Idle cost: CPU burned in the 100 ms after work ends, or during a trickle
 * of one tiny task per period (the pattern of Rayon issue #642). */
static void workload_idle(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, fib, "idle");
    BENCH_NEED(rt, post, "idle");
    const char *phase = arg_string(a, "phase", "after");
    if (strcmp(phase, "after") == 0) {
        unsigned quiet_ms = (unsigned)arg_long(a, "quiet_ms", 100);
        rt->fib(27);
        region g = region_begin(rt);
        bench_sleep(quiet_ms * 1e-3);
        region_end(g, r);
        r->metric = r->cpu * 1e3;
        r->unit = "ms CPU";
        snprintf(r->checksum, sizeof r->checksum, "%u", quiet_ms);
        return;
    }
    if (strcmp(phase, "trickle") != 0) {
        fprintf(stderr, "bench: idle phase must be after or trickle, not '%s'\n", phase);
        exit(2);
    }
    double seconds = (double)arg_long(a, "ms", 2000) * 1e-3;
    double period = (double)arg_long(a, "period_us", 1000) * 1e-6;
    size_t ticks = (size_t)(seconds / period);
    if (ticks < 1) bench_fail("idle: the trickle needs at least one period");
    trickle_slot *slots = calloc(ticks, sizeof *slots);
    double *latency_us = alloc_doubles(ticks);
    if (slots == NULL) bench_fail("out of memory");
    rt->fib(20);
    atomic_store_explicit(&trickle_done, 0, memory_order_relaxed);  /* relaxed: no task runs yet */
    region g = region_begin(rt);
    for (size_t k = 0; k < ticks; ++k) {
        bench_sleep_until(g.wall0 + (double)k * period);
        slots[k].posted = bench_wall();
        rt->post(trickle_task, &slots[k]);
    }
    /* acquire: pairs with trickle_task's release, so every `started` is visible. */
    while (atomic_load_explicit(&trickle_done, memory_order_acquire) < ticks) bench_sleep(0.0002);
    region_end(g, r);
    for (size_t k = 0; k < ticks; ++k) latency_us[k] = (slots[k].started - slots[k].posted) * 1e6;
    r->metric = r->cpu / r->wall * 100.0;
    r->unit = "% CPU";
    add_extra(r, "p50_us", quantile(latency_us, ticks, 0.5));
    add_extra(r, "p99_us", quantile(latency_us, ticks, 0.99));
    add_extra(r, "tasks", (double)ticks);
    snprintf(r->checksum, sizeof r->checksum, "%zu", ticks);
    free(slots);
    free(latency_us);
}

/* Wake storm: `storms` bursts of `tasks` tiny spawns, each into a sleeping pool. */
static void workload_storm(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, spawn_wait, "storm");
    size_t tasks = (size_t)arg_long(a, "tasks", 1000);
    size_t storms = (size_t)arg_long(a, "storms", 10);
    double gap = (double)arg_long(a, "gap_ms", 20) * 1e-3;
    if (tasks < 1 || storms < 1) bench_fail("storm: tasks and storms must be at least 1");
    double *us = alloc_doubles(storms);
    bench_tiny_prepare(tasks);
    rt->spawn_wait(tasks);
    uint64_t expected = (uint64_t)tasks * (tasks + 1) / 2;
    int wrong = 0, never_asleep = 0;
    never_asleep += !settle(rt, gap);
    region g = region_begin(rt);
    for (size_t s = 0; s < storms; ++s) {
        if (s > 0) never_asleep += !settle(rt, gap);
        bench_tiny_prepare(tasks);
        double t0 = bench_wall();
        rt->spawn_wait(tasks);
        us[s] = (bench_wall() - t0) * 1e6;
        wrong += bench_tiny_checksum() != expected;
    }
    never_asleep += !settle(rt, gap);  /* late wakeups of the last storm count too */
    region_end(g, r);
    r->metric = quantile(us, storms, 0.5);
    r->unit = "us";
    add_extra(r, "jobs", (double)tasks * (double)storms);
    add_extra(r, "never_asleep", never_asleep);
    if (wrong)
        snprintf(r->checksum, sizeof r->checksum, "lost tasks in %d storms", wrong);
    else
        snprintf(r->checksum, sizeof r->checksum, "%llu", (unsigned long long)expected);
    free(us);
}

/* ---- the application workloads (kernels.h describes the algorithms) ---- */

static void *alloc_bytes(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) bench_fail("out of memory for the input");
    return p;
}

static void workload_msort(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, msort, "msort");
    size_t n = (size_t)arg_long(a, "n", 10000000);
    if (n < 32) bench_fail("msort: n must be at least 32");
    uint64_t *keys = alloc_bytes(n * sizeof *keys), *scratch = alloc_bytes(n * sizeof *scratch);
    bench_fill_keys(keys, n);
    /* Warm-up: a sixteenth of the keys, sorted in the scratch array's halves. */
    size_t warm = n / 16;
    memcpy(scratch, keys, warm * sizeof *keys);
    rt->msort(scratch, scratch + warm, warm);
    /* The scratch is written before it is read; filling it takes its page faults untimed. */
    memcpy(scratch, keys, n * sizeof *keys);
    region g = region_begin(rt);
    rt->msort(keys, scratch, n);
    region_end(g, r);
    if (bench_keys_sorted(keys, n))
        snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_hash_keys(keys, n));
    else
        snprintf(r->checksum, sizeof r->checksum, "unsorted");
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    add_extra(r, "ns_per_key", r->wall * 1e9 / (double)n);
    free(keys);
    free(scratch);
}

static int is_block_power_of_two(size_t n) {
    if (n < BENCH_MM_BLOCK || n % BENCH_MM_BLOCK != 0) return 0;
    size_t blocks = n / BENCH_MM_BLOCK;
    return (blocks & (blocks - 1)) == 0;
}

static void workload_matmul(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, matmul, "matmul");
    size_t n = (size_t)arg_long(a, "n", 1024);
    if (!is_block_power_of_two(n) || n > 16384) bench_fail("matmul: n must be 64 times a power of two, up to 16384");
    size_t warm = n / 4 < BENCH_MM_BLOCK ? BENCH_MM_BLOCK : n / 4;
    double *wa = alloc_doubles(warm * warm), *wb = alloc_doubles(warm * warm), *wc = alloc_doubles(warm * warm);
    double *ma = alloc_doubles(n * n), *mb = alloc_doubles(n * n), *mc = alloc_doubles(n * n);
    bench_fill_matrices(wa, wb, wc, warm);
    bench_fill_matrices(ma, mb, mc, n);  /* C starts as a third matrix: every page is touched untimed */
    rt->matmul(wc, wa, wb, warm);
    region g = region_begin(rt);
    rt->matmul(mc, ma, mb, n);
    region_end(g, r);
    snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_hash_doubles(mc, n * n));
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    add_extra(r, "gflops", 2.0 * (double)n * (double)n * (double)n / r->wall * 1e-9);
    double *blocks[] = {wa, wb, wc, ma, mb, mc};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; ++i) free(blocks[i]);
}

static void workload_bfs(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, bfs, "bfs");
    long side = arg_long(a, "side", 1000);
    long shortcuts = arg_long(a, "shortcuts", 3);
    if (side < 2 || side > 20000 || shortcuts > 64) bench_fail("bfs: side must be 2..20000, shortcuts 0..64");
    bench_graph graph;
    bench_graph_build(&graph, (uint32_t)side, (uint32_t)shortcuts);
    bench_bfs *search = bench_bfs_create(&graph);
    /* Warm-up: the same search once (it also brings the graph into the caches every runtime then finds). */
    bench_bfs_reset(search, 0);
    rt->bfs(search);
    bench_bfs_reset(search, 0);
    region g = region_begin(rt);
    rt->bfs(search);
    region_end(g, r);
    bench_bfs_result found = bench_bfs_summary(search);
    snprintf(r->checksum, sizeof r->checksum, "%llu/%llu", (unsigned long long)found.reached,
             (unsigned long long)found.level_sum);
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    add_extra(r, "vertices", graph.vertices);
    add_extra(r, "edges", (double)graph.edges);
    add_extra(r, "levels", found.levels);
    bench_bfs_destroy(search);
    bench_graph_free(&graph);
}

/* ---- the graph workloads (issue 30, graph_kernels.h) ---- */

static void workload_wavefront(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, wavefront, "wavefront");
    long blocks = arg_long(a, "blocks", 64), side = arg_long(a, "side", 32);
    if (blocks < 1 || blocks > 4096 || side > 1024 || blocks * side > 8192)
        bench_fail("wavefront: blocks must be 1..4096, side (cells per block side) 0..1024, blocks*side at most 8192");
    bench_wave wave;
    if (bench_wave_init(&wave, (uint32_t)blocks, (uint32_t)side) != 0) bench_fail("out of memory for the grid");
    rt->wavefront(&wave); /* warm-up: the same graph once */
    bench_wave_reset(&wave);
    region g = region_begin(rt);
    rt->wavefront(&wave);
    region_end(g, r);
    snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_wave_checksum(&wave));
    size_t edges = bench_wave_edges((uint32_t)blocks);
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    add_extra(r, "tasks", (double)blocks * (double)blocks);
    add_extra(r, "edges", (double)edges);
    add_extra(r, "us_per_edge", edges ? r->wall * 1e6 / (double)edges : 0.0);
    add_extra(r, "us_per_task", r->wall * 1e6 / ((double)blocks * (double)blocks));
    bench_wave_free(&wave);
}

/* One factorisation of an n x n matrix in tiles of `tile`; the graph is built
 * (and the input written) outside the timed region. */
static double time_cholesky(const bench_runtime *rt, uint32_t n, uint32_t tile, bench_chol *chol,
                            bench_chol_graph *graph, result *r) {
    if (bench_chol_init(chol, n, tile) != 0 || bench_chol_graph_build(graph, n / tile) != 0)
        bench_fail("out of memory for the matrix");
    bench_chol_fill(chol);
    region g = region_begin(rt);
    rt->cholesky(chol, graph);
    if (r != NULL) region_end(g, r);
    return bench_chol_residual(chol, 256);
}

static void workload_cholesky(const bench_runtime *rt, args *a, result *r) {
    BENCH_NEED(rt, cholesky, "cholesky");
    long n = arg_long(a, "n", 1024), tile = arg_long(a, "tile", 64);
    if (tile < 1 || tile > 1024 || n < tile || n > 8192 || n % tile != 0)
        bench_fail("cholesky: tile must be 1..1024 and n (at most 8192) a multiple of it");
    bench_chol chol;
    bench_chol_graph graph;
    /* Warm-up: half the size (at least one tile), its own matrix and graph. */
    long warm = n / 2 / tile * tile;
    time_cholesky(rt, (uint32_t)(warm < tile ? tile : warm), (uint32_t)tile, &chol, &graph, NULL);
    bench_chol_free(&chol);
    bench_chol_graph_free(&graph);
    double residual = time_cholesky(rt, (uint32_t)n, (uint32_t)tile, &chol, &graph, r);
    /* L L^T = A to rounding (about 1e-16 n per entry, divided by n here): a
     * task run before its inputs were final leaves errors of order 1 or NaN. */
    if (residual <= 1e-9)
        snprintf(r->checksum, sizeof r->checksum, "%016llx", (unsigned long long)bench_chol_checksum(&chol));
    else
        snprintf(r->checksum, sizeof r->checksum, "residual %.3g", residual);
    r->metric = r->wall * 1e3;
    r->unit = "ms";
    add_extra(r, "tasks", (double)graph.num_tasks);
    add_extra(r, "edges", (double)graph.num_edges);
    add_extra(r, "residual", residual);
    add_extra(r, "gflops", (double)n * (double)n * (double)n / 3.0 / r->wall * 1e-9);
    bench_chol_free(&chol);
    bench_chol_graph_free(&graph);
}

typedef struct workload {
    const char *name;
    void (*run)(const bench_runtime *, args *, result *);
} workload;

static const workload workloads[] = {
    {"fib", workload_fib},       {"tree", workload_tree},   {"parfor", workload_parfor},
    {"uts", workload_uts},       {"spawn", workload_spawn}, {"roundtrip", workload_roundtrip},
    {"wake", workload_wake},     {"idle", workload_idle},   {"storm", workload_storm},
    {"msort", workload_msort},   {"matmul", workload_matmul}, {"bfs", workload_bfs},
    {"spawn_inside", workload_spawn_inside}, {"wavefront", workload_wavefront},
    {"cholesky", workload_cholesky},
};

static void usage(const char *program) {
    fprintf(stderr, "usage: %s WORKLOAD [threads=N] [key=value ...]\nworkloads:", program);
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; ++i) fprintf(stderr, " %s", workloads[i].name);
    fprintf(stderr, "\n");
}

int bench_main(int argc, char **argv, const bench_runtime *rt) {
    if (argc < 2) {
        usage(argv[0]);
        return 2;
    }
    const workload *w = NULL;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; ++i)
        if (strcmp(argv[1], workloads[i].name) == 0) w = &workloads[i];
    args a;
    if (w == NULL || !args_parse(&a, argc - 2, argv + 2)) {
        usage(argv[0]);
        return 2;
    }
    long threads = arg_long(&a, "threads", 2);
    if (threads < 1 || threads > 1024) bench_fail("threads must be 1..1024");
    result r;
    memset(&r, 0, sizeof r);
    r.impl = rt->name;
    r.workload = w->name;
    r.threads = rt->sequential ? 1 : (unsigned)threads;
    if (rt->start((unsigned)threads) != 0) bench_fail("cannot start the runtime");
    w->run(rt, &a, &r);
    if (!args_all_used(&a)) return 2;
    rt->stop();
    print_result(&r);
    for (int s = 0; s < 2; ++s) free(r.samples[s]);
    return 0;
}
