/*
 * A C program built against an installed libblitz, outside the source tree:
 *     cc consumer.c $(pkg-config --cflags --libs blitz)
 * and by the meson project in app/ (dependency('blitz') with a fallback).
 * Sums 1..N by blz_parallel_for and by a group of tasks; exit 0 when right.
 */
#include <blitz.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define N 100000u

/* Each index is written by exactly one piece; read after the loop returned. */
static uint64_t g_values[N];

static void fill_range(void *arg, size_t begin, size_t end) {
    uint64_t *values = (uint64_t *)arg;
    size_t i;
    for (i = begin; i < end; ++i) values[i] = (uint64_t)i + 1u;
}

typedef struct {
    uint64_t value;
} square_task;

static void square(void *arg) {
    square_task *t = (square_task *)arg;
    t->value *= t->value;
}

int main(void) {
    blz_pool_config config;
    blz_pool *pool = NULL;
    blz_group *group = NULL;
    square_task tasks[8];
    uint64_t total = 0, squares = 0;
    blz_status status;
    unsigned i;

    if (blz_version_number() != BLZ_VERSION_NUMBER) {
        printf("consumer_c: header %d but library %u\n", BLZ_VERSION_NUMBER,
               (unsigned)blz_version_number());
        return 1;
    }
    blz_pool_config_init(&config);
    config.num_threads = 2u;
    config.thread_name = "consumer";
    status = blz_pool_create(&config, &pool);
    if (status != BLZ_OK) {
        printf("consumer_c: blz_pool_create: %s\n", blz_status_string(status));
        return 1;
    }
    status = blz_parallel_for(pool, 0u, N, 1000u, fill_range, g_values);
    for (i = 0; i < N; ++i) total += g_values[i];

    if (status == BLZ_OK) status = blz_group_create(pool, &group);
    for (i = 0; i < 8u && status == BLZ_OK; ++i) {
        tasks[i].value = i + 1u;
        status = blz_group_spawn(group, square, &tasks[i]);
    }
    if (status == BLZ_OK) status = blz_group_destroy(group);
    for (i = 0; i < 8u; ++i) squares += tasks[i].value;

    if (status == BLZ_OK) status = blz_pool_destroy(pool);
    if (status != BLZ_OK) {
        printf("consumer_c: %s\n", blz_status_string(status));
        return 1;
    }
    printf("consumer_c: libblitz %u, sum 1..%u = %llu, sum of squares 1..8 = %llu\n",
           (unsigned)blz_version_number(), N, (unsigned long long)total,
           (unsigned long long)squares);
    if (total != (uint64_t)N * (N + 1u) / 2u || squares != 204u) {
        printf("consumer_c: FAIL: wrong result\n");
        return 1;
    }
    printf("consumer_c: ok\n");
    return 0;
}
