/*
 * blitz.h compiled as C99 and as C11 with the strictest warnings
 * (tests/abi/meson.build lists them; every warning is an error), and the
 * ABI contract that abidiff cannot see, checked at compile time: the values
 * of the status codes and of the constants are compiled into callers, so
 * changing one breaks every program built against the old header.
 *
 * Compile-only: the test passes when this translation unit compiles.
 */
#include <blitz.h>

#include <stddef.h>
#include <stdint.h>

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_ASSERT(cond, name) _Static_assert(cond, #name)
#else
#define ABI_ASSERT(cond, name) typedef char abi_assert_##name[(cond) ? 1 : -1]
#endif

/* Status codes: the values are ABI (stored in programs, sent over FFI). */
ABI_ASSERT(BLZ_OK == 0, ok);
ABI_ASSERT(BLZ_EINVAL == -1, einval);
ABI_ASSERT(BLZ_ENOMEM == -2, enomem);
ABI_ASSERT(BLZ_ETHREAD == -3, ethread);
ABI_ASSERT(BLZ_ESHUTDOWN == -4, eshutdown);
ABI_ASSERT(BLZ_EDEADLK == -5, edeadlk);
ABI_ASSERT(BLZ_ETASK == -6, etask);
ABI_ASSERT(BLZ_EFORK == -7, efork);
ABI_ASSERT(BLZ_ETIMEDOUT == -8, etimedout);
ABI_ASSERT(BLZ_ECANCELED == -9, ecanceled);
ABI_ASSERT(BLZ_GROUP_CANCEL_ON_FAILURE == 1u, group_cancel_on_failure);
ABI_ASSERT(BLZ_SPAWN_HIGH_PRIORITY == 1u, spawn_high_priority);
ABI_ASSERT(BLZ_SPAWN_DONE_AFTER_FINISH == 2u, spawn_done_after_finish);
ABI_ASSERT(BLZ_SPAWN_CANCEL_ON_FAILURE == 4u, spawn_cancel_on_failure);
ABI_ASSERT(BLZ_SPAWN_AFTER_ANY_END == 8u, spawn_after_any_end);
ABI_ASSERT(BLZ_SIZE_FROM_ENVIRONMENT == 1u && BLZ_SIZE_FROM_AFFINITY == 2u && BLZ_SIZE_FROM_CPU_QUOTA == 3u, size_sources);
ABI_ASSERT(sizeof(blz_default_size_info) == 24, default_size_info_size);
ABI_ASSERT(sizeof(blz_status) == 4, status_is_32_bits);

/* Versioning: the baseline abi/blitz.abi is for major version 0 (soname
 * libblitz.so.0); a new major version means a new baseline. */
ABI_ASSERT(BLZ_VERSION_MAJOR == 0, major);
ABI_ASSERT(BLZ_VERSION_NUMBER ==
               BLZ_VERSION_MAJOR * 10000 + BLZ_VERSION_MINOR * 100 + BLZ_VERSION_PATCH,
           version_number);
ABI_ASSERT(BLZ_MAX_THREADS == 65535, max_threads);

/* The extensible structs start with their size, whatever follows. */
ABI_ASSERT(offsetof(blz_pool_config, struct_size) == 0, config_size_first);
ABI_ASSERT(offsetof(blz_stats, struct_size) == 0, stats_size_first);
ABI_ASSERT(offsetof(blz_spawn_options, struct_size) == 0, spawn_options_size_first);

/* The inline fork path's layout (blitz.h): code compiled against this
 * header reads these offsets; a change needs a new layout version (a new
 * blz_fork_stack_vN pointer), never an edit of version 1. */
ABI_ASSERT(BLZ_FORK_LAYOUT_VERSION == 1, fork_layout_version);
ABI_ASSERT(offsetof(blz_fork_frame, fn) == 0, frame_fn);
ABI_ASSERT(offsetof(blz_fork_frame, arg) == sizeof(void *), frame_arg);
ABI_ASSERT(sizeof(((blz_fork_frame *)0)->job) == 8 * sizeof(uintptr_t), frame_job);
ABI_ASSERT(offsetof(blz_fork_stack, pool) == 0, stack_pool);
ABI_ASSERT(offsetof(blz_fork_stack, frames) == 8, stack_frames);
ABI_ASSERT(offsetof(blz_fork_stack, depth) == 16, stack_depth);
ABI_ASSERT(offsetof(blz_fork_stack, capacity) == 20, stack_capacity);
ABI_ASSERT(offsetof(blz_fork_stack, promoted) == 24, stack_promoted);
ABI_ASSERT(offsetof(blz_fork_stack, failures) == 32, stack_failures);
ABI_ASSERT(offsetof(blz_fork_stack, jobs_executed) == 40, stack_jobs);
ABI_ASSERT(offsetof(blz_fork_stack, requests) == 64, stack_requests_own_line);
ABI_ASSERT(sizeof(blz_fork_stack) == 128, stack_two_lines);

/* Every callback type, implemented with the exact prototype. */
static void job(void *arg) { (void)arg; }

static void range(void *arg, size_t begin, size_t end) {
    size_t *sum = (size_t *)arg;
    *sum += end - begin;
}

static void hook(void *user, uint32_t worker_index) {
    uint32_t *last = (uint32_t *)user;
    *last = worker_index;
}

static void done(void *done_arg, blz_status status) {
    blz_status *last = (blz_status *)done_arg;
    *last = status;
}

/* Every function, with arguments of exactly the declared types, so that
 * -Wconversion and -Wsign-conversion see each parameter. Never called. */
int blitz_header_c_uses_everything(void);
int blitz_header_c_uses_everything(void) {
    blz_pool_config config;
    blz_pool *pool = NULL;
    blz_task *task = NULL;
    blz_group *group = NULL;
    blz_event *event = NULL;
    blz_stats stats;
    blz_default_size_info size_info;
    size_t sum = 0;
    uint32_t last = 0;
    blz_status status;
    const char *text;
    uint32_t version;
    uint32_t threads;
    int32_t index;
    blz_spawn_options options;
    blz_status last_done = BLZ_OK;
    int32_t cancelled;

    blz_pool_config_init(&config);
    config.num_threads = 2u;
    config.stack_size = (size_t)1 << 20;
    config.thread_name = "hdr";
    config.on_thread_start = hook;
    config.on_thread_stop = hook;
    config.user = &last;

    version = blz_version_number();
    status = blz_pool_create(&config, &pool);
    text = blz_status_string(status);
    threads = blz_pool_num_threads(pool);
    size_info.struct_size = (uint32_t)sizeof size_info;
    status = blz_default_size(&size_info);
    index = blz_worker_index(pool);
    stats.struct_size = (uint32_t)sizeof stats;
    status = blz_pool_stats(pool, &stats);
    status = blz_spawn(pool, job, NULL, &task);
    status = blz_join(task);
    status = blz_spawn(pool, job, NULL, NULL);
    status = blz_fork_join(pool, job, NULL, job, NULL);
    status = blz_call(pool, job, NULL);
    status = blz_isolate(pool, job, NULL);
    status = blz_parallel_for(pool, 0u, 100u, 0u, range, &sum);
    status = blz_group_create(pool, &group);
    status = blz_group_spawn(group, job, NULL);
    status = blz_group_wait(group);
    status = blz_group_destroy(group);

    status = blz_group_create_ex(pool, BLZ_GROUP_CANCEL_ON_FAILURE, &group);
    blz_spawn_options_init(&options);
    options.flags = 0u;
    options.group = group;
    options.on_done = done;
    options.done_arg = &last_done;
    options.after_tasks = &task;
    options.num_after_tasks = 1u;
    options.after_events = &event;
    options.num_after_events = 1u;
    options.after_groups = &group;
    options.num_after_groups = 1u;
    status = blz_spawn_ex(pool, job, NULL, &options, &task);
    status = blz_task_finish_later(&event);
    status = blz_task_cancel(task);
    status = blz_event_create(&event);
    status = blz_event_set(event, BLZ_OK);
    status = blz_event_wait_for(event, UINT64_C(1000000));
    status = blz_event_destroy(event);
    status = blz_task_wait_for(task, UINT64_C(1000000));
    status = blz_task_detach(task);
    status = blz_group_cancel(group);
    cancelled = blz_group_cancelled(group) + blz_cancelled();
    blz_fail();
    status = blz_group_wait_for(group, 0u);
    status = blz_group_destroy(group);
    status = blz_broadcast(pool, hook, &last);
    status = blz_pool_destroy(pool);
    status = blz_pool_create(NULL, &pool);
    status = blz_pool_release(pool, done, &last_done);
    /* 0.3: the process pool */
    status = blz_pool_shared(NULL, &pool);
    status = blz_pool_destroy(pool);

    {
        blz_fork_stack *stack = *blz_fork_stack_slot_v1();
        blz_fork_frame frame;
        frame.fn = job;
        frame.arg = NULL;
        if (stack == NULL) stack = blz_fork_stack_v1;
        if (blz_fork_push_v1(stack, &frame) != 0 && blz_fork_join_v1(stack, &frame) != 1) {
            blz_fork_failed_v1(stack, 0u);
        }
    }

    return (int)(status + (text != NULL) + (int32_t)(version + threads + last) + index +
                 (int32_t)(sum + stats.jobs_executed) + last_done + cancelled);
}
