/*
 * The public API from strict C99: the header must compile as C99 with
 * -pedantic -Werror, and every function must work from C. A plain program:
 * prints each check, exits 0 when all passed, 1 otherwise.
 *
 * No C11 atomics here: every task writes only its own slot of an array,
 * and the slots are read after the call that waited for the tasks
 * (blz_join, blz_group_wait, blz_parallel_for, blz_pool_destroy).
 */
#include <blitz.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int g_failures = 0;
static int g_checks = 0;

static void check(int ok, const char *what, int line) {
    ++g_checks;
    if (ok) {
        printf("ok    %s\n", what);
    } else {
        printf("FAIL  %s (line %d)\n", what, line);
        ++g_failures;
    }
}
#define CHECK(expr) check((expr) ? 1 : 0, #expr, __LINE__)

#define NUM_WORKERS 2u
#define MAX_WORKERS 8u

/* --- hooks --------------------------------------------------------------- */

struct hook_state {
    int starts[MAX_WORKERS];
    int stops[MAX_WORKERS];
    int user_ok_start[MAX_WORKERS];
    int user_ok_stop[MAX_WORKERS];
    int bad_index; /* written only if an index is out of range */
};
static struct hook_state g_hooks;

static void on_start(void *user, uint32_t index) {
    if (index >= NUM_WORKERS) {
        g_hooks.bad_index = 1;
        return;
    }
    g_hooks.starts[index] += 1;
    g_hooks.user_ok_start[index] = user == (void *)&g_hooks;
}

static void on_stop(void *user, uint32_t index) {
    if (index >= NUM_WORKERS) {
        g_hooks.bad_index = 1;
        return;
    }
    g_hooks.stops[index] += 1;
    g_hooks.user_ok_stop[index] = user == (void *)&g_hooks;
}

/* --- tasks --------------------------------------------------------------- */

struct slot {
    blz_pool *pool;
    unsigned index;
    unsigned long value;
    int32_t worker;
};

static void square(void *arg) {
    struct slot *s = (struct slot *)arg;
    s->value = (unsigned long)s->index * s->index;
    s->worker = blz_worker_index(s->pool);
}

struct fib_arg {
    blz_pool *pool;
    unsigned n;
    unsigned long result;
    blz_status status;
    int inline_path; /* blz_fork_join_inline instead of blz_fork_join */
};

static void fib(void *arg) {
    struct fib_arg *f = (struct fib_arg *)arg;
    struct fib_arg a, b;
    if (f->n < 2) {
        f->result = f->n;
        f->status = BLZ_OK;
        return;
    }
    a.pool = b.pool = f->pool;
    a.inline_path = b.inline_path = f->inline_path;
    a.n = f->n - 1;
    a.result = 0;
    a.status = BLZ_OK;
    b.n = f->n - 2;
    b.result = 0;
    b.status = BLZ_OK;
    f->status = f->inline_path ? blz_fork_join_inline(f->pool, fib, &a, fib, &b)
                               : blz_fork_join(f->pool, fib, &a, fib, &b);
    if (f->status == BLZ_OK) f->status = a.status != BLZ_OK ? a.status : b.status;
    f->result = a.result + b.result;
}

/* A fork-join whose first or second half calls blz_fail. */
struct failing_join {
    blz_pool *pool;
    int failing_half; /* 0: a, 1: b, -1: neither */
    int ran[2];
    blz_status status;
};

static void half_0(void *arg) {
    struct failing_join *j = (struct failing_join *)arg;
    j->ran[0] += 1;
    if (j->failing_half == 0) blz_fail();
}

static void half_1(void *arg) {
    struct failing_join *j = (struct failing_join *)arg;
    j->ran[1] += 1;
    if (j->failing_half == 1) blz_fail();
}

/* A fork-join whose first half waits (10 s of CPU at most) for the second
 * to start: it must have been promoted and stolen by the other worker. */
struct stolen_join {
    blz_pool *pool;
    int b_started;
    int32_t a_worker, b_worker;
    int a_saw_b;
    blz_status status;
};

static void wait_for_b(void *arg) {
    struct stolen_join *j = (struct stolen_join *)arg;
    const clock_t start = clock();
    j->a_worker = blz_worker_index(j->pool);
    /* acquire: b's writes before its release store are seen after it. */
    while (!__atomic_load_n(&j->b_started, __ATOMIC_ACQUIRE) && clock() - start < 10 * CLOCKS_PER_SEC) {
    }
    j->a_saw_b = __atomic_load_n(&j->b_started, __ATOMIC_ACQUIRE);
}

static void start_b(void *arg) {
    struct stolen_join *j = (struct stolen_join *)arg;
    j->b_worker = blz_worker_index(j->pool);
    __atomic_store_n(&j->b_started, 1, __ATOMIC_RELEASE); /* release: b_worker is written first */
}

static void stolen_join_inline(void *arg) {
    struct stolen_join *j = (struct stolen_join *)arg;
    j->status = blz_fork_join_inline(j->pool, wait_for_b, j, start_b, j);
}

static void failing_join_inline(void *arg) {
    struct failing_join *j = (struct failing_join *)arg;
    j->status = blz_fork_join_inline(j->pool, half_0, j, half_1, j);
}

#define RANGE 100000u
static unsigned char g_hits[RANGE];
static unsigned long g_piece_sums[RANGE]; /* indexed by a piece's first index */

static void sum_range(void *arg, size_t begin, size_t end) {
    size_t i;
    unsigned long sum = 0;
    (void)arg;
    for (i = begin; i < end; ++i) {
        g_hits[i] += 1;
        sum += (unsigned long)i;
    }
    g_piece_sums[begin] = sum;
}

#define DETACHED 64u
static int g_detached[DETACHED];
static void mark(void *arg) { *(int *)arg += 1; }

#define GROUP_TASKS 32u

/* --- main ---------------------------------------------------------------- */

int main(void) {
    blz_pool_config config;
    blz_pool *pool = NULL;
    blz_status status;
    unsigned i;

    printf("libblitz C99 API check, header %d.%d.%d\n", BLZ_VERSION_MAJOR, BLZ_VERSION_MINOR, BLZ_VERSION_PATCH);

    /* Versions. */
    CHECK(BLZ_VERSION_NUMBER == BLZ_VERSION_MAJOR * 10000 + BLZ_VERSION_MINOR * 100 + BLZ_VERSION_PATCH);
    CHECK(BLZ_VERSION_NUMBER == 300);
    CHECK(blz_version_number() == (uint32_t)BLZ_VERSION_NUMBER);

    /* Status strings. */
    {
        static const struct {
            blz_status status;
            const char *name;
        } codes[] = {
            {BLZ_OK, "BLZ_OK"},           {BLZ_EINVAL, "BLZ_EINVAL"},       {BLZ_ENOMEM, "BLZ_ENOMEM"},
            {BLZ_ETHREAD, "BLZ_ETHREAD"}, {BLZ_ESHUTDOWN, "BLZ_ESHUTDOWN"}, {BLZ_EDEADLK, "BLZ_EDEADLK"},
            {BLZ_ETASK, "BLZ_ETASK"},     {BLZ_EFORK, "BLZ_EFORK"},
        };
        size_t n = sizeof(codes) / sizeof(codes[0]);
        size_t k, j;
        int names_ok = 1, distinct = 1;
        for (k = 0; k < n; ++k) {
            const char *text = blz_status_string(codes[k].status);
            if (text == NULL || strncmp(text, codes[k].name, strlen(codes[k].name)) != 0) {
                printf("      status %d gives \"%s\"\n", (int)codes[k].status, text ? text : "(null)");
                names_ok = 0;
                continue;
            }
            for (j = 0; j < k; ++j) {
                const char *other = blz_status_string(codes[j].status);
                if (other != NULL && strcmp(other, text) == 0) distinct = 0;
            }
        }
        CHECK(names_ok);
        CHECK(distinct);
        CHECK(blz_status_string(12345) != NULL);
        CHECK(blz_status_string(-99) != NULL);
    }

    /* Config and create, with C hooks. */
    memset(&config, 0xAB, sizeof(config));
    blz_pool_config_init(&config);
    CHECK(config.struct_size == sizeof(blz_pool_config));
    CHECK(config.num_threads == 0 && config.stack_size == 0 && config.thread_name == NULL);
    CHECK(config.on_thread_start == NULL && config.on_thread_stop == NULL && config.user == NULL);
    blz_pool_config_init(NULL);
    config.num_threads = NUM_WORKERS;
    config.thread_name = "c99";
    config.on_thread_start = on_start;
    config.on_thread_stop = on_stop;
    config.user = &g_hooks;
    status = blz_pool_create(&config, &pool);
    CHECK(status == BLZ_OK);
    if (status != BLZ_OK || pool == NULL) {
        printf("cannot continue without a pool: %s\n", blz_status_string(status));
        return 1;
    }
    CHECK(blz_pool_num_threads(pool) == NUM_WORKERS);
    CHECK(blz_worker_index(pool) == -1);

    /* Spawn with handles, then join each. */
    {
        struct slot slots[16];
        blz_task *tasks[16];
        int spawned = 1, joined = 1, values = 1, workers = 1;
        for (i = 0; i < 16; ++i) {
            slots[i].pool = pool;
            slots[i].index = i;
            slots[i].value = 0;
            slots[i].worker = -7;
            tasks[i] = NULL;
            if (blz_spawn(pool, square, &slots[i], &tasks[i]) != BLZ_OK || tasks[i] == NULL) spawned = 0;
        }
        for (i = 0; i < 16; ++i) {
            if (tasks[i] != NULL && blz_join(tasks[i]) != BLZ_OK) joined = 0;
        }
        for (i = 0; i < 16; ++i) {
            if (slots[i].value != (unsigned long)i * i) values = 0;
            if (slots[i].worker < 0 || slots[i].worker >= (int32_t)NUM_WORKERS) workers = 0;
        }
        CHECK(spawned);
        CHECK(joined);
        CHECK(values);
        CHECK(workers);
    }

    /* Detached spawns: checked after destroy, which waits for them. */
    {
        int spawned = 1;
        for (i = 0; i < DETACHED; ++i) {
            if (blz_spawn(pool, mark, &g_detached[i], NULL) != BLZ_OK) spawned = 0;
        }
        CHECK(spawned);
    }

    /* Fork-join recursion. */
    {
        struct fib_arg f;
        f.pool = pool;
        f.inline_path = 0;
        f.n = 22;
        f.result = 0;
        f.status = -100;
        status = blz_call(pool, fib, &f);
        CHECK(status == BLZ_OK);
        CHECK(f.status == BLZ_OK);
        CHECK(f.result == 17711ul);
        /* From outside the pool directly. */
        {
            struct fib_arg a, b;
            a.pool = b.pool = pool;
            a.n = 10;
            b.n = 11;
            a.result = b.result = 0;
            a.status = b.status = -100;
            a.inline_path = b.inline_path = 0;
            CHECK(blz_fork_join(pool, fib, &a, fib, &b) == BLZ_OK);
            CHECK(a.result == 55ul && b.result == 89ul);
        }
    }

    /* blz_fork_join_inline (0.3): blz_fork_join's results and statuses. */
    {
        struct fib_arg f, a, b;
        struct failing_join j;
        int half;
        f.pool = pool;
        f.inline_path = 1;
        f.n = 24;
        f.result = 0;
        f.status = -100;
        CHECK(blz_call(pool, fib, &f) == BLZ_OK);
        CHECK(f.status == BLZ_OK);
        CHECK(f.result == 46368ul);
        /* Off the pool's workers it is blz_fork_join. */
        a.pool = b.pool = pool;
        a.inline_path = b.inline_path = 1;
        a.n = 10;
        b.n = 11;
        a.result = b.result = 0;
        a.status = b.status = -100;
        CHECK(blz_fork_join_inline(pool, fib, &a, fib, &b) == BLZ_OK);
        CHECK(a.result == 55ul && b.result == 89ul);
        CHECK(blz_fork_join_inline(pool, NULL, &a, fib, &b) == BLZ_EINVAL);
        CHECK(blz_fork_join_inline(pool, fib, &a, NULL, &b) == BLZ_EINVAL);
        /* A half that calls blz_fail makes it BLZ_ETASK, both halves run,
           and the failure stays with that join. */
        for (half = -1; half <= 1; ++half) {
            j.pool = pool;
            j.failing_half = half;
            j.ran[0] = j.ran[1] = 0;
            j.status = -100;
            CHECK(blz_call(pool, failing_join_inline, &j) == BLZ_OK);
            CHECK(j.status == (half < 0 ? BLZ_OK : BLZ_ETASK));
            CHECK(j.ran[0] == 1 && j.ran[1] == 1);
        }
    }

    /* blz_fork_join_inline's second half goes to an idle worker while the
       first runs (promoted, stolen, joined through blz_fork_join_v1). */
    {
        struct stolen_join j;
        j.pool = pool;
        j.b_started = 0;
        j.a_worker = j.b_worker = -1;
        j.a_saw_b = 0;
        j.status = -100;
        CHECK(blz_call(pool, stolen_join_inline, &j) == BLZ_OK);
        CHECK(j.status == BLZ_OK);
        CHECK(j.a_saw_b);
        CHECK(j.a_worker >= 0 && j.b_worker >= 0 && j.a_worker != j.b_worker);
    }

    /* blz_call runs on a worker and waits. */
    {
        struct slot s;
        s.pool = pool;
        s.index = 12;
        s.value = 0;
        s.worker = -7;
        CHECK(blz_call(pool, square, &s) == BLZ_OK);
        CHECK(s.value == 144ul);
        CHECK(s.worker >= 0 && s.worker < (int32_t)NUM_WORKERS);
    }

    /* parallel_for summing a range. */
    {
        unsigned long total = 0, expected = (unsigned long)RANGE * (RANGE - 1) / 2;
        int once = 1;
        memset(g_hits, 0, sizeof(g_hits));
        memset(g_piece_sums, 0, sizeof(g_piece_sums));
        CHECK(blz_parallel_for(pool, 0, RANGE, 0, sum_range, NULL) == BLZ_OK);
        for (i = 0; i < RANGE; ++i) {
            if (g_hits[i] != 1) once = 0;
            total += g_piece_sums[i];
        }
        CHECK(once);
        CHECK(total == expected);
        CHECK(blz_parallel_for(pool, 5, 5, 0, sum_range, NULL) == BLZ_OK);
        CHECK(blz_parallel_for(pool, 6, 5, 0, sum_range, NULL) == BLZ_EINVAL);
    }

    /* A group. */
    {
        blz_group *group = NULL;
        struct slot slots[GROUP_TASKS];
        int spawned = 1, values = 1;
        CHECK(blz_group_create(pool, &group) == BLZ_OK);
        if (group != NULL) {
            for (i = 0; i < GROUP_TASKS; ++i) {
                slots[i].pool = pool;
                slots[i].index = i + 100;
                slots[i].value = 0;
                slots[i].worker = -7;
                if (blz_group_spawn(group, square, &slots[i]) != BLZ_OK) spawned = 0;
            }
            CHECK(spawned);
            CHECK(blz_group_wait(group) == BLZ_OK);
            for (i = 0; i < GROUP_TASKS; ++i) {
                if (slots[i].value != (unsigned long)(i + 100) * (i + 100)) values = 0;
            }
            CHECK(values);
            CHECK(blz_group_destroy(group) == BLZ_OK);
        }
    }

    /* Stats with struct_size. */
    {
        blz_stats stats;
        unsigned char raw[sizeof(blz_stats)];
        size_t k;
        int untouched = 1;
        memset(&stats, 0, sizeof(stats));
        stats.struct_size = sizeof(stats);
        CHECK(blz_pool_stats(pool, &stats) == BLZ_OK);
        CHECK(stats.struct_size == sizeof(blz_stats));
        CHECK(stats.num_threads == NUM_WORKERS);
        CHECK(stats.jobs_executed > 0);
        CHECK(stats.jobs_injected > 0);
        /* The two failing joins of blz_fork_join_inline, each once. */
        CHECK(stats.tasks_failed == 2);

        /* An older, shorter struct gets only its prefix. */
        memset(raw, 0xAB, sizeof(raw));
        {
            uint32_t size = (uint32_t)offsetof(blz_stats, jobs_executed);
            uint32_t n = 0;
            memcpy(raw, &size, sizeof(size));
            CHECK(blz_pool_stats(pool, (blz_stats *)(void *)raw) == BLZ_OK);
            memcpy(&n, raw + offsetof(blz_stats, num_threads), sizeof(n));
            CHECK(n == NUM_WORKERS);
            for (k = offsetof(blz_stats, jobs_executed); k < sizeof(raw); ++k) {
                if (raw[k] != 0xAB) untouched = 0;
            }
            CHECK(untouched);
        }
        stats.struct_size = 0;
        CHECK(blz_pool_stats(pool, &stats) == BLZ_EINVAL);
    }

    /* Destroy: waits for the detached tasks, runs the stop hooks. */
    CHECK(blz_pool_destroy(pool) == BLZ_OK);
    {
        int all = 1;
        for (i = 0; i < DETACHED; ++i) {
            if (g_detached[i] != 1) all = 0;
        }
        CHECK(all);
    }
    {
        int hooks = 1;
        for (i = 0; i < NUM_WORKERS; ++i) {
            if (g_hooks.starts[i] != 1 || g_hooks.stops[i] != 1) hooks = 0;
            if (!g_hooks.user_ok_start[i] || !g_hooks.user_ok_stop[i]) hooks = 0;
        }
        for (i = NUM_WORKERS; i < MAX_WORKERS; ++i) {
            if (g_hooks.starts[i] != 0 || g_hooks.stops[i] != 0) hooks = 0;
        }
        CHECK(hooks);
        CHECK(g_hooks.bad_index == 0);
    }

    /* Invalid arguments from C. */
    CHECK(blz_pool_destroy(NULL) == BLZ_EINVAL);
    CHECK(blz_join(NULL) == BLZ_EINVAL);
    CHECK(blz_pool_num_threads(NULL) == 0);
    CHECK(blz_worker_index(NULL) == -1);

    printf("%d of %d checks passed\n", g_checks - g_failures, g_checks);
    return g_failures == 0 ? 0 : 1;
}
