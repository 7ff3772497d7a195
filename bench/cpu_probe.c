/* cpu_probe: how many CPUs the machine delivers right now.
 *
 *     cpu_probe [threads=2] [ms=20]
 *
 * Starts `threads` threads that spin (no memory shared, no waiting) for
 * `ms` milliseconds of wall time each and prints one JSON line with their
 * CPU time over the wall time: close to `threads` when the VM gives every
 * thread a CPU, lower by the time it took them away. bench/graph.py runs
 * it before and after each multi-worker run, to tell a VM that withheld
 * CPUs from a runtime whose own workers slept (both lower a run's own CPU
 * time over wall time; only the first says the run is not a 2-worker one). */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

enum { MAX_THREADS = 64 };

typedef struct probe_thread {
    double spin_s;
    double cpu_s; /* written by the thread, read after pthread_join */
} probe_thread;

static void *spin(void *p) {
    probe_thread *t = p;
    double start = bench_wall(), cpu_start = bench_thread_cpu();
    volatile unsigned long sink = 0;
    while (bench_wall() - start < t->spin_s)
        for (unsigned i = 0; i < 1000; ++i) sink += i;
    t->cpu_s = bench_thread_cpu() - cpu_start;
    return NULL;
}

static long arg(int argc, char **argv, const char *name, long fallback) {
    size_t len = strlen(name);
    for (int i = 1; i < argc; ++i)
        if (strncmp(argv[i], name, len) == 0 && argv[i][len] == '=') return strtol(argv[i] + len + 1, NULL, 10);
    return fallback;
}

int main(int argc, char **argv) {
    long threads = arg(argc, argv, "threads", 2), ms = arg(argc, argv, "ms", 20);
    if (threads < 1 || threads > MAX_THREADS || ms < 1 || ms > 10000) {
        fprintf(stderr, "cpu_probe: threads must be 1-%d and ms 1-10000\n", MAX_THREADS);
        return 2;
    }
    probe_thread t[MAX_THREADS];
    pthread_t id[MAX_THREADS];
    for (long i = 0; i < threads; ++i) {
        t[i] = (probe_thread){(double)ms * 1e-3, 0.0};
        if (pthread_create(&id[i], NULL, spin, &t[i]) != 0) {
            fprintf(stderr, "cpu_probe: pthread_create failed\n");
            return 1;
        }
    }
    double cpu = 0.0;
    for (long i = 0; i < threads; ++i) {
        pthread_join(id[i], NULL);
        cpu += t[i].cpu_s;
    }
    /* Each thread's own wall span is ms: the ratio does not count thread start-up. */
    printf("{\"threads\":%ld,\"ms\":%ld,\"cpu_per_wall\":%.4f}\n", threads, ms, cpu / ((double)ms * 1e-3));
    return 0;
}
