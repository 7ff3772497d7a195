/*
 * A program written and compiled for libblitz 0.1: it includes the 0.1
 * header (abi/v0.1/blitz.h, kept unchanged) and uses every 0.1 function.
 * compat_v01.sh checks that it binds only to version node BLITZ_0.1 and
 * runs it against the library just built, which must accept it unchanged.
 * Exits 0 when every check held; prints each failed one.
 */
#include <blitz.h>

#include <stdio.h>
#include <string.h>

#if BLZ_VERSION_MINOR != 1
#error "compat_v01.c must be compiled against the 0.1 header"
#endif

/*
 * Linked today, a call binds to the newest version of its function; a
 * binary linked against 0.1 references the BLITZ_0.1 one. The functions
 * that have a newer version (abi/libblitz.map) are bound to their 0.1
 * version here, as in such a binary: blz_pool_config_init@BLITZ_0.1
 * clears the 0.1 struct only (the newer one would write past it).
 */
__asm__(".symver blz_pool_config_init, blz_pool_config_init@BLITZ_0.1");

static int failures;

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("FAIL: %s (line %d)\n", #cond, __LINE__);          \
            ++failures;                                               \
        }                                                             \
    } while (0)

static void add_one(void *arg) { __atomic_fetch_add((long *)arg, 1, __ATOMIC_RELAXED); }

static void add_range(void *arg, size_t begin, size_t end) {
    __atomic_fetch_add((long *)arg, (long)(end - begin), __ATOMIC_RELAXED);
}

static void hook(void *user, uint32_t index) {
    (void)index;
    __atomic_fetch_add((long *)user, 1, __ATOMIC_RELAXED);
}

int main(void) {
    blz_pool_config config;
    blz_pool *pool = NULL;
    blz_task *task = NULL;
    blz_group *group = NULL;
    blz_stats stats;
    long count = 0, hooks = 0;
    int i;

    /* A newer library of the same major version, never an older one. */
    CHECK(blz_version_number() / 10000 == BLZ_VERSION_MAJOR);
    CHECK(blz_version_number() >= BLZ_VERSION_NUMBER);
    CHECK(strncmp(blz_status_string(BLZ_ETASK), "BLZ_ETASK", 9) == 0);

    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = hook;
    config.user = &hooks;
    CHECK(blz_pool_create(&config, &pool) == BLZ_OK);
    CHECK(blz_pool_num_threads(pool) == 2);
    CHECK(blz_worker_index(pool) == -1);

    CHECK(blz_spawn(pool, add_one, &count, &task) == BLZ_OK);
    CHECK(blz_join(task) == BLZ_OK);
    CHECK(blz_spawn(pool, add_one, &count, NULL) == BLZ_OK);
    CHECK(blz_fork_join(pool, add_one, &count, add_one, &count) == BLZ_OK);
    CHECK(blz_call(pool, add_one, &count) == BLZ_OK);
    CHECK(blz_parallel_for(pool, 0, 1000, 0, add_range, &count) == BLZ_OK);
    CHECK(blz_group_create(pool, &group) == BLZ_OK);
    for (i = 0; i < 100; ++i) CHECK(blz_group_spawn(group, add_one, &count) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(blz_group_destroy(group) == BLZ_OK);

    /* A 0.1 program's stats struct is the 0.1 size: it gets that prefix. */
    memset(&stats, 0, sizeof stats);
    stats.struct_size = (uint32_t)sizeof stats;
    CHECK(blz_pool_stats(pool, &stats) == BLZ_OK);
    CHECK(stats.num_threads == 2);
    CHECK(stats.tasks_failed == 0);

    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    CHECK(count == 1 + 1 + 2 + 1 + 1000 + 100);
    CHECK(hooks == 2);
    CHECK(blz_pool_create(NULL, NULL) == BLZ_EINVAL);

    printf("compat_v01: %s (library %u, header %d)\n", failures == 0 ? "ok" : "FAILED",
           blz_version_number(), BLZ_VERSION_NUMBER);
    return failures == 0 ? 0 : 1;
}
