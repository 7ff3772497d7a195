// Destroy under load: eight threads outside the pool submit work as fast as
// they can (detached spawns, spawns with a handle, group spawns, blz_call),
// each piece with its own id, while another thread destroys the pool. Every
// accepted piece runs exactly once, every refused one got BLZ_ESHUTDOWN and
// never runs, destroy returns BLZ_OK, and nothing hangs (a watchdog).
//
// The contract forbids starting a call on a pool after its destroy
// returned, and a submitter cannot know when that is. So the first task
// accepted is a gate: it runs until every submitter has been refused once
// (after which each stops), and destroy, which waits for accepted work,
// cannot return before that. Group spawns would be safe anyway: a live group
// keeps the pool's bookkeeping.
#include <blitz.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "support.hpp"

namespace {

constexpr int kSubmitters = 8;
constexpr int kIdsPerSubmitter = 1 << 17;
// The destroyer starts once this many pieces were accepted in all.
constexpr int kAcceptedBeforeDestroy = 20000;

struct Submitter;

struct Piece {
    Submitter *owner;
    int id;
};

struct Submitter {
    int index = 0;
    blz_pool *pool = nullptr;
    blz_group *group = nullptr;
    std::unique_ptr<std::atomic<uint8_t>[]> runs{new std::atomic<uint8_t>[kIdsPerSubmitter]()};
    std::unique_ptr<Piece[]> pieces{new Piece[kIdsPerSubmitter]};
    std::vector<blz_task *> handles;
    int accepted = 0;          // ids 0 .. accepted-1 were accepted
    int refused_id = -1;       // the id that was refused, if any
    blz_status refusal = BLZ_OK;
    int wrong_statuses = 0;    // statuses other than BLZ_OK and BLZ_ESHUTDOWN
};

struct Shared {
    std::atomic<int> accepted_total{0};
    std::atomic<int> refused_submitters{0};
    std::atomic<bool> gate_started{false};
};

void run_piece(void *arg) {
    auto *piece = static_cast<Piece *>(arg);
    piece->owner->runs[piece->id].fetch_add(1);
}

// The gate: holds destroy back until every submitter has stopped submitting.
void gate(void *arg) {
    auto *shared = static_cast<Shared *>(arg);
    shared->gate_started.store(true);
    while (shared->refused_submitters.load() < kSubmitters) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

// Submits piece `id` the way `id` selects; the status says whether it was accepted.
blz_status submit(Submitter &s, int id) {
    Piece *piece = &s.pieces[id];
    *piece = Piece{&s, id};
    switch ((id + s.index) % 4) {
        case 0: return blz_spawn(s.pool, run_piece, piece, nullptr);
        case 1: {
            blz_task *task = nullptr;
            blz_status st = blz_spawn(s.pool, run_piece, piece, &task);
            if (st == BLZ_OK) s.handles.push_back(task);
            return st;
        }
        case 2: return blz_group_spawn(s.group, run_piece, piece);
        default: return blz_call(s.pool, run_piece, piece);
    }
}

void submit_until_refused(Submitter &s, Shared &shared) {
    for (int id = 0; id < kIdsPerSubmitter; ++id) {
        blz_status st = submit(s, id);
        if (st == BLZ_OK) {
            s.accepted = id + 1;
            shared.accepted_total.fetch_add(1);
            continue;
        }
        if (st != BLZ_ESHUTDOWN) ++s.wrong_statuses;
        s.refused_id = id;
        s.refusal = st;
        break;
    }
    shared.refused_submitters.fetch_add(1);
}

}  // namespace

TEST_CASE("fault: destroy while 8 threads submit as fast as they can", "[fault][destroy]") {
    blz_test::Watchdog dog("destroy under load", std::chrono::seconds(600));
    for (int round = 0; round < 3; ++round) {
        INFO("round " << round);
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = 3;
        blz_pool *pool = nullptr;
        REQUIRE(blz_pool_create(&config, &pool) == BLZ_OK);
        Shared shared;
        REQUIRE(blz_spawn(pool, gate, &shared, nullptr) == BLZ_OK);

        std::vector<std::unique_ptr<Submitter>> submitters;
        for (int i = 0; i < kSubmitters; ++i) {
            auto s = std::make_unique<Submitter>();
            s->index = i;
            s->pool = pool;
            s->handles.reserve(kIdsPerSubmitter / 4 + 1);
            REQUIRE(blz_group_create(pool, &s->group) == BLZ_OK);
            submitters.push_back(std::move(s));
        }
        std::vector<std::thread> threads;
        for (auto &s : submitters) threads.emplace_back([&s, &shared] { submit_until_refused(*s, shared); });

        blz_status destroyed = 99;
        std::thread destroyer([&] {
            while (shared.accepted_total.load() < kAcceptedBeforeDestroy &&
                   shared.refused_submitters.load() == 0) {
                std::this_thread::yield();
            }
            destroyed = blz_pool_destroy(pool);
        });
        for (auto &t : threads) t.join();
        destroyer.join();
        CHECK(destroyed == BLZ_OK);
        CHECK(shared.gate_started.load());

        int accepted = 0, refused = 0, wrong_runs = 0, refused_ran = 0, wrong_statuses = 0, failed_joins = 0;
        for (auto &s : submitters) {
            accepted += s->accepted;
            wrong_statuses += s->wrong_statuses;
            for (int id = 0; id < s->accepted; ++id) wrong_runs += s->runs[id].load() != 1;
            if (s->refused_id >= 0) {
                ++refused;
                CHECK(s->refusal == BLZ_ESHUTDOWN);
                refused_ran += s->runs[s->refused_id].load() != 0;
            }
            for (blz_task *task : s->handles) failed_joins += blz_join(task) != BLZ_OK;
            // After destroy, the group still answers, refusing new work.
            CHECK(blz_group_spawn(s->group, run_piece, &s->pieces[0]) == BLZ_ESHUTDOWN);
            CHECK(blz_group_destroy(s->group) == BLZ_OK);
        }
        WARN("round " << round << ": " << accepted << " pieces accepted before the refusals");
        CHECK(refused == kSubmitters);  // each submitter stopped at a refusal, not at the end of its ids
        CHECK(wrong_statuses == 0);
        CHECK(wrong_runs == 0);         // every accepted piece ran exactly once
        CHECK(refused_ran == 0);        // no refused piece ran
        CHECK(failed_joins == 0);
        CHECK(accepted >= kAcceptedBeforeDestroy);
    }
}
