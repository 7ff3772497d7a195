// Unit tests of blz::AtomicCounters and blz::Counters: the packing of the
// 64-bit word, the JEC rules (posters even -> odd, sleepy workers odd ->
// even), wrap-around, awake_but_idle, the snapshot CAS; and a deterministic
// replay of the interleaving that Blitz's JEC rule gets wrong.
#include <catch2/catch.hpp>

#include <counters.hpp>

#include <cstdint>

namespace {

using Counters = blz::Counters;
using AtomicCounters = blz::AtomicCounters<>;

constexpr Counters make(uint32_t jec, uint32_t inactive, uint32_t sleeping) {
    return Counters{(uint64_t{jec} << 32) | (uint64_t{inactive} << 16) | uint64_t{sleeping}};
}

// Replaces the whole word (single-threaded set-up).
void set_word(AtomicCounters &a, Counters desired) {
    Counters expected = a.load();
    REQUIRE(a.compare_exchange(expected, desired));
    REQUIRE(a.load().word == desired.word);
}

// Blitz's rule, used by both its posters and its sleepy workers: increment
// the JEC only if it is even. Returns the JEC afterwards.
uint32_t blitz_increment_if_even(AtomicCounters &a) {
    Counters c = a.load();
    for (;;) {
        if (!c.jec_is_sleepy()) return c.jec();
        Counters next{c.word + Counters::kOneJec};
        if (a.compare_exchange(c, next)) return next.jec();
    }
}

}  // namespace

TEST_CASE("counters: a fresh word is all zero", "[counters]") {
    AtomicCounters a;
    Counters c = a.load();
    CHECK(c.word == 0);
    CHECK(c.sleeping() == 0);
    CHECK(c.inactive() == 0);
    CHECK(c.jec() == 0);
    CHECK(c.jec_is_sleepy());
    CHECK(c.awake_but_idle() == 0);
}

TEST_CASE("counters: accessors decode bits 0-15, 16-31, 32-63", "[counters]") {
    Counters c = make(0xDEADBEEF, 0x1234, 0xABCD);
    CHECK(c.word == 0xDEADBEEF1234ABCDull);
    CHECK(c.sleeping() == 0xABCD);
    CHECK(c.inactive() == 0x1234);
    CHECK(c.jec() == 0xDEADBEEF);
    CHECK_FALSE(c.jec_is_sleepy());  // odd
    CHECK(make(2, 0, 0).jec_is_sleepy());
    CHECK(Counters{Counters::kOneSleeping}.sleeping() == 1);
    CHECK(Counters{Counters::kOneInactive}.inactive() == 1);
    CHECK(Counters{Counters::kOneJec}.jec() == 1);
    CHECK(Counters{Counters::kOneInactive}.sleeping() == 0);
    CHECK(Counters{Counters::kOneJec}.inactive() == 0);
}

TEST_CASE("counters: inactive and sleeping updates touch only their field", "[counters]") {
    AtomicCounters a;
    a.add_inactive_thread();
    a.add_inactive_thread();
    a.add_inactive_thread();
    CHECK(a.load().word == make(0, 3, 0).word);

    REQUIRE(a.try_add_sleeping_thread(a.load()));
    REQUIRE(a.try_add_sleeping_thread(a.load()));
    CHECK(a.load().word == make(0, 3, 2).word);

    a.sub_sleeping_thread();
    CHECK(a.load().word == make(0, 3, 1).word);
    CHECK(a.sub_inactive_thread() == make(0, 3, 1).word);  // returns the word before
    CHECK(a.load().word == make(0, 2, 1).word);

    // With a JEC set, the thread counts still leave it alone.
    set_word(a, make(0x8000'0001, 2, 1));
    a.add_inactive_thread();
    REQUIRE(a.try_add_sleeping_thread(a.load()));
    CHECK(a.load().word == make(0x8000'0001, 3, 2).word);
    a.sub_sleeping_thread();
    a.sub_sleeping_thread();
    a.sub_inactive_thread();
    CHECK(a.load().word == make(0x8000'0001, 2, 0).word);
}

TEST_CASE("counters: thread fields hold up to 0xFFFF without carrying", "[counters]") {
    AtomicCounters a;
    set_word(a, make(7, 0xFFFE, 0xFFFE));
    a.add_inactive_thread();
    REQUIRE(a.try_add_sleeping_thread(a.load()));
    Counters c = a.load();
    CHECK(c.inactive() == 0xFFFF);
    CHECK(c.sleeping() == 0xFFFF);
    CHECK(c.jec() == 7);
}

TEST_CASE("counters: post_event turns an even JEC odd and leaves an odd one unchanged", "[counters]") {
    AtomicCounters a;
    set_word(a, make(10, 4, 3));
    Counters after = a.post_event();
    CHECK(after.jec() == 11);
    CHECK(after.word == make(11, 4, 3).word);  // returns the counters after its change
    CHECK(a.load().word == make(11, 4, 3).word);

    // Odd: nothing changes, and it returns the counters as found.
    Counters again = a.post_event();
    CHECK(again.word == make(11, 4, 3).word);
    CHECK(a.load().word == make(11, 4, 3).word);
}

TEST_CASE("counters: announce_sleepy turns odd to even and returns the value after it", "[counters]") {
    AtomicCounters a;
    set_word(a, make(11, 4, 3));
    CHECK(a.announce_sleepy() == 12);
    CHECK(a.load().word == make(12, 4, 3).word);

    // Even: returned unchanged, word untouched.
    CHECK(a.announce_sleepy() == 12);
    CHECK(a.load().word == make(12, 4, 3).word);

    // A post after it makes the JEC differ from what the sleepy worker holds.
    a.post_event();
    CHECK(a.load().jec() == 13);
    CHECK(a.announce_sleepy() == 14);
}

TEST_CASE("counters: JEC wrap-around at 2^32 leaves the thread fields alone", "[counters]") {
    AtomicCounters a;
    set_word(a, make(0xFFFF'FFFE, 5, 2));

    // Even 0xFFFFFFFE -> odd 0xFFFFFFFF by a post.
    CHECK(a.post_event().word == make(0xFFFF'FFFF, 5, 2).word);
    // Odd 0xFFFFFFFF -> 0 (even) by a sleepy worker: the carry leaves the word.
    CHECK(a.announce_sleepy() == 0);
    Counters c = a.load();
    CHECK(c.word == make(0, 5, 2).word);
    CHECK(c.inactive() == 5);
    CHECK(c.sleeping() == 2);
    // And the protocol goes on from 0.
    CHECK(a.post_event().jec() == 1);
    CHECK(a.load().word == make(1, 5, 2).word);
}

TEST_CASE("counters: JEC wrap-around starting from 0xFFFFFFFF set by compare_exchange", "[counters]") {
    AtomicCounters a;
    set_word(a, make(0xFFFF'FFFF, 0xFFFF, 0xFFFF));  // all ones
    CHECK(a.load().word == ~uint64_t{0});
    CHECK(a.post_event().word == ~uint64_t{0});  // odd: unchanged
    CHECK(a.announce_sleepy() == 0);
    CHECK(a.load().word == make(0, 0xFFFF, 0xFFFF).word);
    a.sub_sleeping_thread();
    a.sub_inactive_thread();
    CHECK(a.load().word == make(0, 0xFFFE, 0xFFFE).word);
}

TEST_CASE("counters: compare_exchange fails on a stale expected value and reports the current one",
          "[counters]") {
    AtomicCounters a;
    set_word(a, make(3, 2, 1));
    Counters stale = make(1, 2, 1);
    CHECK_FALSE(a.compare_exchange(stale, make(9, 9, 9)));
    CHECK(stale.word == make(3, 2, 1).word);
    CHECK(a.load().word == make(3, 2, 1).word);
}

TEST_CASE("counters: awake_but_idle is inactive - sleeping, saturating at 0", "[counters]") {
    CHECK(make(0, 5, 2).awake_but_idle() == 3);
    CHECK(make(0, 5, 5).awake_but_idle() == 0);
    CHECK(make(0, 0, 0).awake_but_idle() == 0);
    CHECK(make(0, 2, 5).awake_but_idle() == 0);  // sleeping > inactive: saturates
    CHECK(make(0xFFFF'FFFF, 0xFFFF, 0).awake_but_idle() == 0xFFFF);
    CHECK(make(1, 1, 0xFFFF).awake_but_idle() == 0);

    AtomicCounters a;
    a.add_inactive_thread();
    a.add_inactive_thread();
    REQUIRE(a.try_add_sleeping_thread(a.load()));
    CHECK(a.load().awake_but_idle() == 1);
}

TEST_CASE("counters: try_add_sleeping_thread fails when the word changed since the snapshot",
          "[counters]") {
    AtomicCounters a;
    a.add_inactive_thread();
    a.post_event();  // JEC 1

    SECTION("a post since the snapshot") {
        a.announce_sleepy();  // JEC 2
        Counters snapshot = a.load();
        a.post_event();  // JEC 3
        CHECK_FALSE(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().sleeping() == 0);
        CHECK(a.load().word == make(3, 1, 0).word);
    }
    SECTION("another thread became inactive since the snapshot") {
        Counters snapshot = a.load();
        a.add_inactive_thread();
        CHECK_FALSE(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().word == make(1, 2, 0).word);
    }
    SECTION("another sleeper registered since the snapshot") {
        Counters snapshot = a.load();
        REQUIRE(a.try_add_sleeping_thread(a.load()));
        CHECK_FALSE(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().word == make(1, 1, 1).word);
    }
    SECTION("an unchanged word: success, +1 sleeping only") {
        Counters snapshot = a.load();
        CHECK(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().word == make(1, 1, 1).word);
    }
}

// docs/anchors: Blitz's sleepy worker uses the same "increment if even" as
// its posters, so once the JEC is odd nobody changes it and the sleepy
// worker's re-check cannot see a post. Replayed deterministically on one
// thread, with Blitz's rule written against the same counters word.
TEST_CASE("counters: Blitz's JEC rule misses a post that post_event/announce_sleepy catch",
          "[counters][jec][blitz]") {
    // The same starting point for both: one worker inactive, JEC odd after
    // an earlier post that no sleepy worker has consumed yet.
    auto start = [](AtomicCounters &a) {
        a.add_inactive_thread();
        a.post_event();
        REQUIRE(a.load().word == make(1, 1, 0).word);
        REQUIRE_FALSE(a.load().jec_is_sleepy());
    };

    SECTION("Blitz's rule: both sides increment only if even -> the post is missed") {
        AtomicCounters a;
        start(a);
        // 1. The worker gets sleepy: JEC is odd, so Blitz leaves it; snapshot.
        uint32_t remembered = blitz_increment_if_even(a);
        Counters snapshot = a.load();
        CHECK(remembered == 1);
        // 2. A poster publishes a job: JEC still odd, so Blitz's post changes nothing.
        CHECK(blitz_increment_if_even(a) == 1);
        // 3. The worker compares before blocking: no change visible: THE MISS.
        CHECK(a.load().jec() == remembered);
        CHECK(a.load().word == snapshot.word);
        // ...so it registers as sleeping with a job posted since it got sleepy.
        CHECK(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().sleeping() == 1);
    }

    SECTION("the real protocol: announce_sleepy odd->even, post_event even->odd -> the post is seen") {
        AtomicCounters a;
        start(a);
        // 1. The worker gets sleepy: odd -> even, remember the value after its change.
        uint32_t remembered = a.announce_sleepy();
        Counters snapshot = a.load();
        CHECK(remembered == 2);
        CHECK(snapshot.jec() == 2);
        // 2. A poster publishes a job: even -> odd.
        CHECK(a.post_event().jec() == 3);
        // 3. The worker compares before blocking: the change is visible.
        CHECK(a.load().jec() != remembered);
        CHECK(a.load().word != snapshot.word);
        // ...and the sleep registration fails, so it searches again.
        CHECK_FALSE(a.try_add_sleeping_thread(snapshot));
        CHECK(a.load().sleeping() == 0);
    }
}
