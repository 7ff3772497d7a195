// Unit tests of blz::CoreLatch: every transition of its state machine
//
//   UNSET --get_sleepy--> SLEEPY --fall_asleep--> SLEEPING --wake_up--> UNSET
//     \________________________\__________________________\___set___> SET
//
// and what set() reports from each state.
#include <catch2/catch.hpp>

#include <core_latch.hpp>

namespace {
using Latch = blz::CoreLatch<>;
}

TEST_CASE("core latch: starts UNSET and not probed set", "[core_latch]") {
    Latch l;
    CHECK(l.state() == Latch::kUnset);
    CHECK_FALSE(l.probe());
}

TEST_CASE("core latch: UNSET -> SLEEPY -> SLEEPING -> (wake_up) -> UNSET", "[core_latch]") {
    Latch l;
    REQUIRE(l.get_sleepy());
    CHECK(l.state() == Latch::kSleepy);
    CHECK_FALSE(l.probe());
    REQUIRE(l.fall_asleep());
    CHECK(l.state() == Latch::kSleeping);
    CHECK_FALSE(l.probe());
    l.wake_up();
    CHECK(l.state() == Latch::kUnset);
    CHECK_FALSE(l.probe());
    // And the cycle can be repeated.
    REQUIRE(l.get_sleepy());
    REQUIRE(l.fall_asleep());
    l.wake_up();
    CHECK(l.state() == Latch::kUnset);
}

TEST_CASE("core latch: transitions out of the wrong state fail and change nothing", "[core_latch]") {
    Latch l;
    // fall_asleep needs SLEEPY.
    CHECK_FALSE(l.fall_asleep());
    CHECK(l.state() == Latch::kUnset);
    // wake_up from UNSET: stays UNSET.
    l.wake_up();
    CHECK(l.state() == Latch::kUnset);

    REQUIRE(l.get_sleepy());
    // get_sleepy needs UNSET.
    CHECK_FALSE(l.get_sleepy());
    CHECK(l.state() == Latch::kSleepy);
    // wake_up only leaves SLEEPING.
    l.wake_up();
    CHECK(l.state() == Latch::kSleepy);

    REQUIRE(l.fall_asleep());
    CHECK_FALSE(l.get_sleepy());
    CHECK_FALSE(l.fall_asleep());
    CHECK(l.state() == Latch::kSleeping);
}

TEST_CASE("core latch: set() returns true only from SLEEPING", "[core_latch]") {
    SECTION("from UNSET") {
        Latch l;
        CHECK_FALSE(l.set());
        CHECK(l.state() == Latch::kSet);
        CHECK(l.probe());
    }
    SECTION("from SLEEPY") {
        Latch l;
        REQUIRE(l.get_sleepy());
        CHECK_FALSE(l.set());  // the waiter will see SET at fall_asleep
        CHECK(l.state() == Latch::kSet);
        CHECK(l.probe());
        CHECK_FALSE(l.fall_asleep());
        CHECK(l.state() == Latch::kSet);
    }
    SECTION("from SLEEPING") {
        Latch l;
        REQUIRE(l.get_sleepy());
        REQUIRE(l.fall_asleep());
        CHECK(l.set());  // the setter must wake the waiter
        CHECK(l.state() == Latch::kSet);
        CHECK(l.probe());
    }
    SECTION("from SET (a second set)") {
        Latch l;
        REQUIRE_FALSE(l.set());
        CHECK_FALSE(l.set());
        CHECK(l.state() == Latch::kSet);
    }
}

TEST_CASE("core latch: get_sleepy and fall_asleep fail once SET; wake_up leaves SET alone",
          "[core_latch]") {
    Latch l;
    l.set();
    CHECK_FALSE(l.get_sleepy());
    CHECK(l.state() == Latch::kSet);
    CHECK_FALSE(l.fall_asleep());
    CHECK(l.state() == Latch::kSet);
    l.wake_up();
    CHECK(l.state() == Latch::kSet);
    CHECK(l.probe());

    // Set while SLEEPING, then the waiter's wake_up: still SET.
    Latch m;
    REQUIRE(m.get_sleepy());
    REQUIRE(m.fall_asleep());
    REQUIRE(m.set());
    m.wake_up();
    CHECK(m.state() == Latch::kSet);
    CHECK(m.probe());
}

TEST_CASE("core latch: probe() is true exactly in SET", "[core_latch]") {
    Latch l;
    CHECK_FALSE(l.probe());
    l.get_sleepy();
    CHECK_FALSE(l.probe());
    l.fall_asleep();
    CHECK_FALSE(l.probe());
    l.set();
    CHECK(l.probe());
}
