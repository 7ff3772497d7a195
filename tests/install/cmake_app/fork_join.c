/*
 * fib by blz_fork_join, built by CMake against an installed libblitz
 * (cmake_app/CMakeLists.txt: find_package(blitz), blitz::blitz). Exit 0
 * when the result is right and the header and library are one version.
 */
#include <blitz.h>

#include <stdint.h>
#include <stdio.h>

typedef struct {
    blz_pool *pool;
    int n;
    long result;
} fib_args;

static void fib(void *p) {
    fib_args *a = (fib_args *)p;
    fib_args x, y;
    if (a->n < 2) {
        a->result = a->n;
        return;
    }
    x.pool = a->pool; x.n = a->n - 1; x.result = 0;
    y.pool = a->pool; y.n = a->n - 2; y.result = 0;
    blz_fork_join(a->pool, fib, &x, fib, &y);
    a->result = x.result + y.result;
}

static long fib_seq(int n) { return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2); }

int main(void) {
    blz_pool_config config;
    blz_pool *pool = NULL;
    blz_stats stats;
    fib_args args;
    blz_status status;

    if (blz_version_number() != BLZ_VERSION_NUMBER) {
        printf("fork_join_c: FAIL: header %d, library %u\n", BLZ_VERSION_NUMBER,
               (unsigned)blz_version_number());
        return 1;
    }
    blz_pool_config_init(&config);
    config.num_threads = 2u;
    status = blz_pool_create(&config, &pool);
    if (status != BLZ_OK) {
        printf("fork_join_c: FAIL: blz_pool_create: %s\n", blz_status_string(status));
        return 1;
    }
    args.pool = pool; args.n = 25; args.result = 0;
    status = blz_call(pool, fib, &args);
    stats.struct_size = (uint32_t)sizeof stats;
    if (status == BLZ_OK) status = blz_pool_stats(pool, &stats);
    if (status == BLZ_OK) status = blz_pool_destroy(pool);
    if (status != BLZ_OK) {
        printf("fork_join_c: FAIL: %s\n", blz_status_string(status));
        return 1;
    }
    printf("fork_join_c: libblitz %u, fib(25) = %ld by fork-join (%llu steals)\n",
           (unsigned)blz_version_number(), args.result, (unsigned long long)stats.steals);
    if (args.result != fib_seq(25)) {
        printf("fork_join_c: FAIL: expected %ld\n", fib_seq(25));
        return 1;
    }
    printf("fork_join_c: ok\n");
    return 0;
}
