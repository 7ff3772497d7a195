// Every function of blitz.h with each invalid argument: the exact status,
// and that nothing changed (no function ran, no job was queued, out
// pointers untouched, the pool still works).
#include <catch2/catch.hpp>

#include <atomic>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <set>
#include <string>

#include "support.hpp"

namespace {

using blz_test::Pool;
using blz_test::sentinel;
using blz_test::stats_of;
using blz_test::Watchdog;
using std::chrono::seconds;

// The size of blz_pool_config in version 0.1.
constexpr uint32_t kConfigSizeV01 = offsetof(blz_pool_config, user) + sizeof(void *);


std::atomic<int> g_calls{0};
void count_call(void *) { g_calls.fetch_add(1); }
void count_range(void *, size_t, size_t) { g_calls.fetch_add(1); }

std::atomic<int> g_hook_calls{0};
void count_hook(void *, uint32_t) { g_hook_calls.fetch_add(1); }

uint32_t cpus_in_affinity_mask() {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
    int count = CPU_COUNT(&set);
    REQUIRE(count > 0);
    return static_cast<uint32_t>(count);
}

// Sets (or, with nullptr, unsets) BLZ_NUM_THREADS and restores the previous
// state at scope exit.
class EnvGuard {
public:
    explicit EnvGuard(const char *value) {
        const char *old = std::getenv("BLZ_NUM_THREADS");
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value != nullptr) {
            REQUIRE(setenv("BLZ_NUM_THREADS", value, 1) == 0);
        } else {
            REQUIRE(unsetenv("BLZ_NUM_THREADS") == 0);
        }
    }
    ~EnvGuard() {
        if (had_) {
            setenv("BLZ_NUM_THREADS", old_.c_str(), 1);
        } else {
            unsetenv("BLZ_NUM_THREADS");
        }
    }
    EnvGuard(const EnvGuard &) = delete;
    EnvGuard &operator=(const EnvGuard &) = delete;

private:
    bool had_ = false;
    std::string old_;
};

// Creates a pool from `config`, returns its worker count and destroys it.
uint32_t workers_of_created_pool(const blz_pool_config *config) {
    blz_pool *pool = nullptr;
    REQUIRE(blz_pool_create(config, &pool) == BLZ_OK);
    REQUIRE(pool != nullptr);
    uint32_t n = blz_pool_num_threads(pool);
    blz_stats stats = stats_of(pool);
    CHECK(stats.num_threads == n);
    REQUIRE(blz_pool_destroy(pool) == BLZ_OK);
    return n;
}

// Runs `f` on a worker of `pool` through blz_call (f must not throw).
template <class F>
void on_worker(blz_pool *pool, F f) {
    auto trampoline = [](void *arg) { (*static_cast<F *>(arg))(); };
    REQUIRE(blz_call(pool, trampoline, &f) == BLZ_OK);
}

}  // namespace

TEST_CASE("blz_version_number matches the header", "[api][bad_input]") {
    STATIC_REQUIRE(BLZ_VERSION_NUMBER == 300);
    STATIC_REQUIRE(BLZ_VERSION_NUMBER == BLZ_VERSION_MAJOR * 10000 + BLZ_VERSION_MINOR * 100 + BLZ_VERSION_PATCH);
    CHECK(blz_version_number() == BLZ_VERSION_NUMBER);
    CHECK(blz_version_number() == 300u);
}

TEST_CASE("blz_status_string names every code and never returns NULL", "[api][bad_input]") {
    struct Code {
        blz_status status;
        const char *name;
    };
    const Code codes[] = {
        {BLZ_OK, "BLZ_OK"},           {BLZ_EINVAL, "BLZ_EINVAL"},     {BLZ_ENOMEM, "BLZ_ENOMEM"},
        {BLZ_ETHREAD, "BLZ_ETHREAD"}, {BLZ_ESHUTDOWN, "BLZ_ESHUTDOWN"}, {BLZ_EDEADLK, "BLZ_EDEADLK"},
        {BLZ_ETASK, "BLZ_ETASK"},     {BLZ_EFORK, "BLZ_EFORK"},
    };
    std::set<std::string> seen;
    for (const Code &code : codes) {
        const char *text = blz_status_string(code.status);
        INFO("status " << code.status);
        REQUIRE(text != nullptr);
        std::string s(text);
        // Starts with its name, and the whole name: the next character
        // cannot continue an identifier.
        const size_t len = std::strlen(code.name);
        CHECK(s.rfind(code.name, 0) == 0);
        CHECK(s.size() > len);  // a description follows the name
        if (s.size() > len) CHECK(!(std::isalnum(static_cast<unsigned char>(s[len])) || s[len] == '_'));
        seen.insert(s);
        CHECK(blz_status_string(code.status) == text);  // static: the same string every time
    }
    CHECK(seen.size() == sizeof(codes) / sizeof(codes[0]));

    for (blz_status unknown : {12345, -99, 1, -8, INT32_MIN, INT32_MAX}) {
        INFO("unknown status " << unknown);
        const char *text = blz_status_string(unknown);
        REQUIRE(text != nullptr);
        CHECK(std::strlen(text) > 0);
        CHECK(seen.count(text) == 0);  // not mistaken for a known code
    }
}

TEST_CASE("blz_pool_config_init fills the defaults and ignores NULL", "[api][bad_input]") {
    blz_pool_config_init(nullptr);  // harmless: must not crash

    blz_pool_config config;
    std::memset(&config, 0xAB, sizeof(config));
    blz_pool_config_init(&config);
    CHECK(config.struct_size == sizeof(blz_pool_config));
    CHECK(config.num_threads == 0);
    CHECK(config.stack_size == 0);
    CHECK(config.thread_name == nullptr);
    CHECK(config.on_thread_start == nullptr);
    CHECK(config.on_thread_stop == nullptr);
    CHECK(config.user == nullptr);
}

TEST_CASE("blz_pool_create rejects invalid arguments and leaves *out_pool untouched", "[api][bad_input]") {
    Watchdog watchdog("blz_pool_create with invalid arguments", seconds(60));
    g_hook_calls.store(0);
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 2;
    config.on_thread_start = count_hook;
    config.on_thread_stop = count_hook;
    blz_pool *pool = sentinel<blz_pool>();

    SECTION("NULL out_pool") {
        CHECK(blz_pool_create(&config, nullptr) == BLZ_EINVAL);
        CHECK(blz_pool_create(nullptr, nullptr) == BLZ_EINVAL);
    }
    SECTION("struct_size 0") {
        config.struct_size = 0;
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    SECTION("struct_size 4 (only the size field)") {
        config.struct_size = sizeof(uint32_t);
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    SECTION("struct_size one byte smaller than the 0.1 layout") {
        config.struct_size = kConfigSizeV01 - 1;
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    SECTION("num_threads BLZ_MAX_THREADS + 1") {
        config.num_threads = BLZ_MAX_THREADS + 1;
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    SECTION("num_threads UINT32_MAX") {
        config.num_threads = UINT32_MAX;
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    SECTION("stack_size 1 (below PTHREAD_STACK_MIN)") {
        config.stack_size = 1;
        CHECK(blz_pool_create(&config, &pool) == BLZ_EINVAL);
        CHECK(pool == sentinel<blz_pool>());
    }
    // No worker was started (or every started one was stopped without
    // running a hook): "nothing was done".
    CHECK(g_hook_calls.load() == 0);
}

TEST_CASE("blz_pool_create accepts NULL config, the exact 0.1 size and bigger structs", "[api][bad_input]") {
    Watchdog watchdog("blz_pool_create with valid configs", seconds(60));

    SECTION("NULL config gives the defaults") {
        EnvGuard env(nullptr);
        CHECK(workers_of_created_pool(nullptr) == cpus_in_affinity_mask());
    }
    SECTION("struct_size exactly the 0.1 layout") {
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.struct_size = kConfigSizeV01;
        config.num_threads = 2;
        CHECK(workers_of_created_pool(&config) == 2);
    }
    SECTION("a future version's bigger struct") {
        struct FutureConfig {
            blz_pool_config v01;
            uint64_t future_fields[6];
        } future;
        blz_pool_config_init(&future.v01);
        std::memset(future.future_fields, 0xAB, sizeof(future.future_fields));  // unknown to 0.1
        future.v01.struct_size = sizeof(future);
        future.v01.num_threads = 3;
        g_hook_calls.store(0);
        future.v01.on_thread_start = count_hook;
        future.v01.on_thread_stop = count_hook;
        CHECK(workers_of_created_pool(&future.v01) == 3);
        CHECK(g_hook_calls.load() == 6);  // the known fields were honoured: 3 starts + 3 stops
    }
}

TEST_CASE("num_threads 0 honours BLZ_NUM_THREADS", "[api][bad_input]") {
    Watchdog watchdog("BLZ_NUM_THREADS", seconds(60));
    const uint32_t cpus = cpus_in_affinity_mask();
    blz_pool_config config;
    blz_pool_config_init(&config);
    config.num_threads = 0;

    SECTION("\"3\" gives 3 workers") {
        EnvGuard env("3");
        CHECK(workers_of_created_pool(&config) == 3);
        CHECK(workers_of_created_pool(nullptr) == 3);
    }
    SECTION("\"1\" gives 1 worker") {
        EnvGuard env("1");
        CHECK(workers_of_created_pool(&config) == 1);
    }
    SECTION("an explicit num_threads wins over the environment") {
        EnvGuard env("3");
        config.num_threads = 2;
        CHECK(workers_of_created_pool(&config) == 2);
    }
    for (const char *bad : {"0", "abc", "70000", "65536", "-2", "", "3abc", "99999999999999999999999"}) {
        DYNAMIC_SECTION("invalid value \"" << bad << "\" falls back to the CPU count") {
            EnvGuard env(bad);
            CHECK(workers_of_created_pool(&config) == cpus);
        }
    }
    SECTION("unset falls back to the CPU count") {
        EnvGuard env(nullptr);
        CHECK(workers_of_created_pool(&config) == cpus);
    }
}

TEST_CASE("the environment is restored after the BLZ_NUM_THREADS checks", "[api][bad_input]") {
    const char *before = std::getenv("BLZ_NUM_THREADS");
    std::string saved = before != nullptr ? before : "<unset>";
    {
        EnvGuard env("3");
    }
    const char *after = std::getenv("BLZ_NUM_THREADS");
    CHECK((after != nullptr ? std::string(after) : std::string("<unset>")) == saved);
}

TEST_CASE("NULL pool is rejected by every function", "[api][bad_input]") {
    Watchdog watchdog("NULL pool", seconds(60));
    g_calls.store(0);

    CHECK(blz_pool_destroy(nullptr) == BLZ_EINVAL);
    CHECK(blz_pool_num_threads(nullptr) == 0);
    CHECK(blz_worker_index(nullptr) == -1);

    blz_stats stats;
    std::memset(&stats, 0xAB, sizeof(stats));
    stats.struct_size = sizeof(stats);
    CHECK(blz_pool_stats(nullptr, &stats) == BLZ_EINVAL);
    CHECK(stats.num_threads == 0xABABABABu);  // untouched

    blz_task *task = sentinel<blz_task>();
    CHECK(blz_spawn(nullptr, count_call, nullptr, &task) == BLZ_EINVAL);
    CHECK(task == sentinel<blz_task>());
    CHECK(blz_spawn(nullptr, count_call, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_fork_join(nullptr, count_call, nullptr, count_call, nullptr) == BLZ_EINVAL);
    CHECK(blz_call(nullptr, count_call, nullptr) == BLZ_EINVAL);
    CHECK(blz_isolate(nullptr, count_call, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(nullptr, 0, 100, 1, count_range, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(nullptr, 0, 0, 1, count_range, nullptr) == BLZ_EINVAL);
    blz_group *group = sentinel<blz_group>();
    CHECK(blz_group_create(nullptr, &group) == BLZ_EINVAL);
    CHECK(group == sentinel<blz_group>());

    CHECK(g_calls.load() == 0);
}

TEST_CASE("NULL functions and out pointers on a live pool", "[api][bad_input]") {
    Watchdog watchdog("NULL functions", seconds(60));
    Pool pool(2);
    g_calls.store(0);
    REQUIRE(blz_test::wait_until_asleep(pool, std::chrono::milliseconds(30000)));
    const uint64_t injected_before = stats_of(pool).jobs_injected;

    blz_task *task = sentinel<blz_task>();
    CHECK(blz_spawn(pool, nullptr, nullptr, &task) == BLZ_EINVAL);
    CHECK(task == sentinel<blz_task>());
    CHECK(blz_spawn(pool, nullptr, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_fork_join(pool, nullptr, nullptr, count_call, nullptr) == BLZ_EINVAL);
    CHECK(blz_fork_join(pool, count_call, nullptr, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_fork_join(pool, nullptr, nullptr, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_call(pool, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_isolate(pool, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(pool, 0, 100, 0, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(pool, 0, 0, 0, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_group_create(pool, nullptr) == BLZ_EINVAL);
    blz_stats *no_stats = nullptr;
    CHECK(blz_pool_stats(pool, no_stats) == BLZ_EINVAL);

    // Nothing was queued and nothing ran.
    CHECK(stats_of(pool).jobs_injected == injected_before);
    CHECK(g_calls.load() == 0);

    // The pool still works.
    CHECK(blz_call(pool, count_call, nullptr) == BLZ_OK);
    CHECK(g_calls.load() == 1);
    CHECK(pool.destroy() == BLZ_OK);
}

TEST_CASE("NULL functions from inside a worker of the pool", "[api][bad_input]") {
    Watchdog watchdog("NULL functions inside a worker", seconds(60));
    Pool pool(2);
    g_calls.store(0);
    struct Results {
        blz_status spawn_handle, spawn_detached, fork_join_a, fork_join_b, call, parallel_for, empty_for,
            reversed_for, group_create, destroy;
        blz_task *task;
    } r{};
    blz_pool *p = pool;
    on_worker(p, [&] {
        r.task = sentinel<blz_task>();
        r.spawn_handle = blz_spawn(p, nullptr, nullptr, &r.task);
        r.spawn_detached = blz_spawn(p, nullptr, nullptr, nullptr);
        r.fork_join_a = blz_fork_join(p, nullptr, nullptr, count_call, nullptr);
        r.fork_join_b = blz_fork_join(p, count_call, nullptr, nullptr, nullptr);
        r.call = blz_call(p, nullptr, nullptr);
        r.parallel_for = blz_parallel_for(p, 0, 10, 1, nullptr, nullptr);
        r.empty_for = blz_parallel_for(p, 7, 7, 1, count_range, nullptr);
        r.reversed_for = blz_parallel_for(p, 8, 7, 1, count_range, nullptr);
        r.group_create = blz_group_create(p, nullptr);
    });
    CHECK(r.spawn_handle == BLZ_EINVAL);
    CHECK(r.task == sentinel<blz_task>());
    CHECK(r.spawn_detached == BLZ_EINVAL);
    CHECK(r.fork_join_a == BLZ_EINVAL);
    CHECK(r.fork_join_b == BLZ_EINVAL);
    CHECK(r.call == BLZ_EINVAL);
    CHECK(r.parallel_for == BLZ_EINVAL);
    CHECK(r.empty_for == BLZ_OK);
    CHECK(r.reversed_for == BLZ_EINVAL);
    CHECK(r.group_create == BLZ_EINVAL);
    CHECK(g_calls.load() == 0);
    CHECK(pool.destroy() == BLZ_OK);
}

TEST_CASE("NULL task and NULL group", "[api][bad_input]") {
    Watchdog watchdog("NULL task and group", seconds(60));
    g_calls.store(0);
    CHECK(blz_join(nullptr) == BLZ_EINVAL);
    CHECK(blz_group_spawn(nullptr, count_call, nullptr) == BLZ_EINVAL);
    CHECK(blz_group_wait(nullptr) == BLZ_EINVAL);
    CHECK(blz_group_destroy(nullptr) == BLZ_EINVAL);

    Pool pool(2);
    blz_group *group = nullptr;
    REQUIRE(blz_group_create(pool, &group) == BLZ_OK);
    REQUIRE(group != nullptr);
    CHECK(blz_group_spawn(group, nullptr, nullptr) == BLZ_EINVAL);
    CHECK(blz_group_wait(group) == BLZ_OK);  // the rejected spawn left nothing pending or failed
    CHECK(g_calls.load() == 0);

    // The group still works after the rejected calls.
    CHECK(blz_group_spawn(group, count_call, nullptr) == BLZ_OK);
    CHECK(blz_group_wait(group) == BLZ_OK);
    CHECK(g_calls.load() == 1);
    CHECK(blz_group_destroy(group) == BLZ_OK);
    CHECK(pool.destroy() == BLZ_OK);
}

TEST_CASE("blz_parallel_for with empty and reversed ranges", "[api][bad_input]") {
    Watchdog watchdog("parallel_for ranges", seconds(60));
    Pool pool(2);
    g_calls.store(0);
    REQUIRE(blz_test::wait_until_asleep(pool, std::chrono::milliseconds(30000)));
    const uint64_t injected_before = stats_of(pool).jobs_injected;

    CHECK(blz_parallel_for(pool, 10, 9, 0, count_range, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(pool, 1, 0, 1, count_range, nullptr) == BLZ_EINVAL);
    CHECK(blz_parallel_for(pool, SIZE_MAX, 0, 1, count_range, nullptr) == BLZ_EINVAL);
    CHECK(g_calls.load() == 0);

    CHECK(blz_parallel_for(pool, 0, 0, 0, count_range, nullptr) == BLZ_OK);
    CHECK(blz_parallel_for(pool, 42, 42, 1, count_range, nullptr) == BLZ_OK);
    CHECK(blz_parallel_for(pool, SIZE_MAX, SIZE_MAX, 0, count_range, nullptr) == BLZ_OK);
    CHECK(g_calls.load() == 0);
    CHECK(stats_of(pool).jobs_injected == injected_before);

    // A one-index range calls the body exactly once.
    CHECK(blz_parallel_for(pool, 5, 6, 0, count_range, nullptr) == BLZ_OK);
    CHECK(g_calls.load() == 1);
}

TEST_CASE("blz_pool_stats and struct_size", "[api][bad_input]") {
    Watchdog watchdog("blz_pool_stats", seconds(60));
    Pool pool(2);
    REQUIRE(blz_call(pool, count_call, nullptr) == BLZ_OK);
    // A worker counts a job after running it, so the count may trail the
    // return of blz_call by a moment: wait until it shows (watchdog-bounded).
    while (stats_of(pool).jobs_executed == 0) std::this_thread::yield();

    SECTION("struct_size below 4 is rejected and nothing is written") {
        for (uint32_t size : {0u, 1u, 3u}) {
            INFO("struct_size " << size);
            blz_stats stats;
            std::memset(&stats, 0xAB, sizeof(stats));
            stats.struct_size = size;
            CHECK(blz_pool_stats(pool, &stats) == BLZ_EINVAL);
            CHECK(stats.struct_size == size);
            CHECK(stats.num_threads == 0xABABABABu);
            CHECK(stats.tasks_failed == 0xABABABABABABABABull);
        }
    }

    // Fills a 0xAB-patterned struct with struct_size `size` and checks that
    // exactly the whole fields below `expected_end` were written.
    auto check_prefix = [&](uint32_t size, size_t expected_end) {
        INFO("struct_size " << size);
        unsigned char raw[sizeof(blz_stats) + 64];
        std::memset(raw, 0xAB, sizeof(raw));
        blz_stats *stats = reinterpret_cast<blz_stats *>(raw);
        std::memcpy(raw, &size, sizeof(size));
        REQUIRE(blz_pool_stats(pool, stats) == BLZ_OK);
        uint32_t size_after;
        std::memcpy(&size_after, raw, sizeof(size_after));
        CHECK(size_after == size);
        if (expected_end >= offsetof(blz_stats, num_threads) + sizeof(uint32_t)) {
            uint32_t n;
            std::memcpy(&n, raw + offsetof(blz_stats, num_threads), sizeof(n));
            CHECK(n == 2);
        }
        if (expected_end >= offsetof(blz_stats, jobs_executed) + sizeof(uint64_t)) {
            uint64_t executed;
            std::memcpy(&executed, raw + offsetof(blz_stats, jobs_executed), sizeof(executed));
            CHECK(executed >= 1);
            CHECK(executed != 0xABABABABABABABABull);
        }
        size_t untouched = 0;
        for (size_t i = expected_end; i < sizeof(raw); ++i) untouched += raw[i] == 0xAB;
        CHECK(untouched == sizeof(raw) - expected_end);
    };

    SECTION("struct_size 4: only the size field") { check_prefix(4, 4); }
    SECTION("struct_size offsetof(jobs_executed): the four uint32_t fields") {
        check_prefix(offsetof(blz_stats, jobs_executed), offsetof(blz_stats, jobs_executed));
    }
    SECTION("struct_size between fields rounds down to a field boundary") {
        check_prefix(offsetof(blz_stats, jobs_executed) + 4, offsetof(blz_stats, jobs_executed));
        check_prefix(offsetof(blz_stats, sleeping_now) + 2, offsetof(blz_stats, sleeping_now));
    }
    SECTION("struct_size offsetof(steals)") {
        check_prefix(offsetof(blz_stats, steals), offsetof(blz_stats, steals));
    }
    SECTION("struct_size one short of the full struct") {
        check_prefix(sizeof(blz_stats) - 1, offsetof(blz_stats, spares_retired));  // the last field
    }
    SECTION("struct_size sizeof(blz_stats)") { check_prefix(sizeof(blz_stats), sizeof(blz_stats)); }
    SECTION("struct_size larger than sizeof (a future version's struct)") {
        check_prefix(sizeof(blz_stats) + 32, sizeof(blz_stats));
    }
    SECTION("a full snapshot is consistent") {
        blz_stats stats;
        std::memset(&stats, 0xAB, sizeof(stats));
        stats.struct_size = sizeof(stats);
        REQUIRE(blz_pool_stats(pool, &stats) == BLZ_OK);
        CHECK(stats.struct_size == sizeof(stats));
        CHECK(stats.num_threads == 2);
        CHECK(stats.sleeping_now <= 2);
        CHECK(stats.inactive_now <= 2);
        CHECK(stats.jobs_executed >= 1);
        CHECK(stats.jobs_injected >= 1);
        CHECK(stats.tasks_failed == 0);
    }
}

TEST_CASE("blz_worker_index and blz_pool_num_threads", "[api][bad_input]") {
    Watchdog watchdog("blz_worker_index", seconds(60));
    Pool a(2);
    Pool b(3);
    CHECK(blz_pool_num_threads(nullptr) == 0);
    CHECK(blz_pool_num_threads(a) == 2);
    CHECK(blz_pool_num_threads(b) == 3);
    CHECK(blz_worker_index(nullptr) == -1);
    CHECK(blz_worker_index(a) == -1);  // the test thread is nobody's worker

    struct Seen {
        int32_t own, other, null;
    } seen{-7, -7, -7};
    blz_pool *pa = a;
    blz_pool *pb = b;
    on_worker(pa, [&] {
        seen.own = blz_worker_index(pa);
        seen.other = blz_worker_index(pb);
        seen.null = blz_worker_index(nullptr);
    });
    CHECK(seen.own >= 0);
    CHECK(seen.own < 2);
    CHECK(seen.other == -1);
    CHECK(seen.null == -1);

    // Every index 0..n-1 of b shows up on b's workers and nothing else does.
    std::atomic<uint32_t> bad{0};
    std::atomic<uint64_t> mask{0};
    struct Ctx {
        blz_pool *pool;
        std::atomic<uint32_t> *bad;
        std::atomic<uint64_t> *mask;
    } ctx{pb, &bad, &mask};
    auto body = [](void *arg, size_t lo, size_t hi) {
        auto *c = static_cast<Ctx *>(arg);
        for (size_t i = lo; i < hi; ++i) {
            int32_t index = blz_worker_index(c->pool);
            if (index < 0 || index >= 3) {
                c->bad->fetch_add(1);
            } else {
                c->mask->fetch_or(uint64_t{1} << index);
            }
        }
    };
    REQUIRE(blz_parallel_for(pb, 0, 1000, 1, body, &ctx) == BLZ_OK);
    CHECK(bad.load() == 0);
    CHECK(mask.load() != 0);
    CHECK((mask.load() & ~uint64_t{7}) == 0);
}
