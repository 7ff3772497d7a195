// blitz.h compiled as C++17 with the strictest warnings (tests/abi/meson.build
// lists them; every warning is an error): no C-style casts, no 0 as a null
// pointer, no implicit conversions in the header, and the declarations keep C
// linkage inside extern "C". Compile-only: the test passes when this
// translation unit compiles.
#include <blitz.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

// The declarations are exactly the C ones, seen from C++.
static_assert(std::is_same<blz_status, std::int32_t>::value, "blz_status is int32_t");
static_assert(std::is_same<decltype(&blz_pool_create),
                           blz_status (*)(const blz_pool_config *, blz_pool **)>::value,
              "blz_pool_create");
static_assert(std::is_same<decltype(&blz_parallel_for),
                           blz_status (*)(blz_pool *, std::size_t, std::size_t, std::size_t,
                                          blz_range_fn, void *)>::value,
              "blz_parallel_for");
static_assert(std::is_standard_layout<blz_pool_config>::value, "config is C layout");
static_assert(std::is_trivially_copyable<blz_pool_config>::value, "config is C layout");
static_assert(std::is_standard_layout<blz_stats>::value, "stats is C layout");
static_assert(std::is_trivially_copyable<blz_stats>::value, "stats is C layout");
static_assert(BLZ_OK == 0 && BLZ_EFORK == -7, "status values");
static_assert(offsetof(blz_pool_config, struct_size) == 0, "config starts with its size");
static_assert(offsetof(blz_stats, struct_size) == 0, "stats starts with its size");

// Callbacks with C language linkage, as the function pointer types declare.
extern "C" {

static void job(void *arg) { static_cast<void>(arg); }

static void range(void *arg, std::size_t begin, std::size_t end) {
    *static_cast<std::size_t *>(arg) += end - begin;
}

static void hook(void *user, std::uint32_t worker_index) {
    *static_cast<std::uint32_t *>(user) = worker_index;
}

}  // extern "C"

// Every function, never called.
int blitz_header_cpp_uses_everything();
int blitz_header_cpp_uses_everything() {
    blz_pool_config config{};
    blz_pool_config_init(&config);
    std::uint32_t last = 0;
    config.num_threads = 2U;
    config.thread_name = "hdr";
    config.on_thread_start = hook;
    config.on_thread_stop = hook;
    config.user = &last;

    blz_pool *pool = nullptr;
    blz_status status = blz_pool_create(&config, &pool);
    const char *text = blz_status_string(status);
    blz_stats stats{};
    stats.struct_size = sizeof stats;
    status = blz_pool_stats(pool, &stats);
    blz_task *task = nullptr;
    status = blz_spawn(pool, job, nullptr, &task);
    status = blz_join(task);
    status = blz_fork_join(pool, job, nullptr, job, nullptr);
    status = blz_call(pool, job, nullptr);
    std::size_t sum = 0;
    status = blz_parallel_for(pool, 0U, 100U, 0U, range, &sum);
    blz_group *group = nullptr;
    status = blz_group_create(pool, &group);
    status = blz_group_spawn(group, job, nullptr);
    status = blz_group_wait(group);
    status = blz_group_destroy(group);
    const std::uint32_t threads = blz_pool_num_threads(pool);
    const std::int32_t index = blz_worker_index(pool);
    status = blz_pool_destroy(pool);
    const bool ok = status == BLZ_OK && text != nullptr && threads + last > 0U && index >= 0 &&
                    blz_version_number() == BLZ_VERSION_NUMBER && sum + stats.jobs_executed > 0U;
    return ok ? 0 : 1;
}
