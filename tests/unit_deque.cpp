// Unit tests of blz::Deque on one thread: the private part (pushed, not yet
// published: only the owner can take it), publish, the owner's LIFO end
// across both parts, the thieves' FIFO end, empty results, growth by
// doubling (also with the live range wrapped around the buffer), reuse of
// stolen slots, size_hint.
//
// Elements are int* into an array (never nullptr: T{} means "no element").
#include <catch2/catch.hpp>

#include <deque.hpp>

#include <cstdint>
#include <vector>

namespace {

using IntDeque = blz::Deque<int *>;
using Steal = IntDeque::Steal;

// Elements 0..n-1 with distinct addresses; item i has value i.
struct Items {
    explicit Items(std::size_t n) : values(n) {
        for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<int>(i);
    }
    int *operator[](std::size_t i) { return &values[i]; }
    std::vector<int> values;
};

// A push made stealable at once.
template <class D, class V>
bool push_published(D &d, V value) {
    if (!d.push(value)) return false;
    d.publish();
    return true;
}

// The smallest power of two >= n, and at least the initial capacity.
int64_t expected_capacity(int64_t live) {
    int64_t c = IntDeque::kInitialCapacity;
    while (c < live) c *= 2;
    return c;
}

}  // namespace

TEST_CASE("deque: init allocates the initial capacity and starts empty", "[deque]") {
    IntDeque d;
    REQUIRE(d.init());
    CHECK(d.capacity_for_owner() == IntDeque::kInitialCapacity);
    CHECK(d.size_hint() == 0);
}

TEST_CASE("deque: owner push/pop is LIFO, private or published", "[deque]") {
    Items items(5);
    IntDeque d;
    REQUIRE(d.init());
    // 0 and 1 published, 2..4 private: pops cross from the private part
    // into the public one (the fenced path) without changing the order.
    for (int i = 0; i < 5; ++i) {
        REQUIRE(d.push(items[i]));
        if (i == 1) CHECK(d.publish() == 2);
    }
    for (int i = 4; i >= 0; --i) {
        int *p = d.pop();
        REQUIRE(p == items[i]);
        CHECK(*p == i);
    }
    CHECK(d.pop() == nullptr);
}

TEST_CASE("deque: pushed elements stay private until published", "[deque]") {
    Items items(6);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 3; ++i) REQUIRE(d.push(items[i]));
    CHECK(d.private_size() == 3);
    CHECK(d.size_hint() == 0);
    CHECK(d.steal().status == Steal::kEmpty);  // thieves see none of them

    CHECK(d.publish() == 3);
    CHECK(d.private_size() == 0);
    CHECK(d.size_hint() == 3);
    CHECK(d.publish() == 0);  // nothing new
    CHECK(d.steal().value == items[0]);

    REQUIRE(d.push(items[3]));
    CHECK(d.private_size() == 1);
    CHECK(d.size_hint() == 2);
    CHECK(d.pop() == items[3]);  // private: the public part is untouched
    CHECK(d.size_hint() == 2);
    CHECK(d.pop() == items[2]);  // public, two left: no race
    CHECK(d.size_hint() == 1);
    CHECK(d.pop() == items[1]);  // public, the last one: the CAS path
    CHECK(d.size_hint() == 0);
    CHECK(d.pop() == nullptr);
    CHECK(d.steal().status == Steal::kEmpty);
}

TEST_CASE("deque: thieves drain the public part and stop at the private one", "[deque]") {
    Items items(4);
    IntDeque d;
    REQUIRE(d.init());
    REQUIRE(push_published(d, items[0]));
    REQUIRE(push_published(d, items[1]));
    REQUIRE(d.push(items[2]));
    REQUIRE(d.push(items[3]));
    CHECK(d.steal().value == items[0]);
    CHECK(d.steal().value == items[1]);
    CHECK(d.steal().status == Steal::kEmpty);
    CHECK(d.private_size() == 2);
    CHECK(d.pop() == items[3]);
    CHECK(d.pop() == items[2]);
    CHECK(d.pop() == nullptr);
}

TEST_CASE("deque: a private part survives growth and is published whole", "[deque]") {
    Items items(200);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 50; ++i) REQUIRE(push_published(d, items[i]));
    for (int i = 50; i < 200; ++i) REQUIRE(d.push(items[i]));  // grows twice, private
    CHECK(d.capacity_for_owner() == 256);
    CHECK(d.size_hint() == 50);
    CHECK(d.private_size() == 150);
    CHECK(d.publish() == 150);
    for (int i = 0; i < 100; ++i) REQUIRE(d.steal().value == items[i]);
    for (int i = 199; i >= 100; --i) REQUIRE(d.pop() == items[i]);
    CHECK(d.pop() == nullptr);
    CHECK(d.steal().status == Steal::kEmpty);
}

TEST_CASE("deque: steal is FIFO (oldest first)", "[deque]") {
    Items items(5);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 5; ++i) REQUIRE(push_published(d, items[i]));
    for (int i = 0; i < 5; ++i) {
        IntDeque::StealResult r = d.steal();
        REQUIRE(r.status == Steal::kSuccess);
        REQUIRE(r.value == items[i]);
    }
    IntDeque::StealResult r = d.steal();
    CHECK(r.status == Steal::kEmpty);
    CHECK(r.value == nullptr);
}

TEST_CASE("deque: pop on empty returns nullptr and leaves the deque usable", "[deque]") {
    Items items(3);
    IntDeque d;
    REQUIRE(d.init());
    CHECK(d.pop() == nullptr);
    CHECK(d.pop() == nullptr);
    CHECK(d.size_hint() == 0);
    // A pop on empty must restore bottom: the next push/pop/steal see one element.
    REQUIRE(push_published(d, items[0]));
    CHECK(d.size_hint() == 1);
    CHECK(d.pop() == items[0]);
    CHECK(d.pop() == nullptr);
    REQUIRE(push_published(d, items[1]));
    REQUIRE(push_published(d, items[2]));
    IntDeque::StealResult r = d.steal();
    REQUIRE(r.status == Steal::kSuccess);
    CHECK(r.value == items[1]);
    CHECK(d.pop() == items[2]);
    CHECK(d.pop() == nullptr);
}

TEST_CASE("deque: steal on empty returns kEmpty with no value", "[deque]") {
    Items items(1);
    IntDeque d;
    REQUIRE(d.init());
    IntDeque::StealResult r = d.steal();
    CHECK(r.status == Steal::kEmpty);
    CHECK(r.value == nullptr);
    // After the last element went out by pop (the t == b path) and by steal.
    REQUIRE(push_published(d, items[0]));
    CHECK(d.pop() == items[0]);
    r = d.steal();
    CHECK(r.status == Steal::kEmpty);
    REQUIRE(push_published(d, items[0]));
    r = d.steal();
    REQUIRE(r.status == Steal::kSuccess);
    CHECK(r.value == items[0]);
    r = d.steal();
    CHECK(r.status == Steal::kEmpty);
    CHECK(d.pop() == nullptr);
}

TEST_CASE("deque: mixing pops and steals takes from the two ends", "[deque]") {
    Items items(5);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 5; ++i) REQUIRE(push_published(d, items[i]));
    CHECK(d.steal().value == items[0]);
    CHECK(d.pop() == items[4]);
    CHECK(d.steal().value == items[1]);
    CHECK(d.pop() == items[3]);
    CHECK(d.size_hint() == 1);
    CHECK(d.pop() == items[2]);  // the last element, via the CAS path
    CHECK(d.size_hint() == 0);
    CHECK(d.pop() == nullptr);
    CHECK(d.steal().status == Steal::kEmpty);
}

TEST_CASE("deque: size_hint follows pushes, pops and steals", "[deque]") {
    Items items(10);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 10; ++i) {
        REQUIRE(push_published(d, items[i]));
        CHECK(d.size_hint() == i + 1);
    }
    REQUIRE(d.steal().status == Steal::kSuccess);
    CHECK(d.size_hint() == 9);
    REQUIRE(d.pop() != nullptr);
    CHECK(d.size_hint() == 8);
    while (d.pop() != nullptr) {
    }
    CHECK(d.size_hint() == 0);
}

TEST_CASE("deque: growth doubles the capacity and keeps every item in order", "[deque]") {
    constexpr int64_t kN = 5000;  // about 78 times the initial capacity: 7 doublings
    Items items(kN);
    IntDeque d;
    REQUIRE(d.init());

    int64_t capacity = d.capacity_for_owner();
    int doublings = 0;
    for (int64_t i = 0; i < kN; ++i) {
        REQUIRE(push_published(d, items[static_cast<std::size_t>(i)]));
        int64_t now = d.capacity_for_owner();
        if (now != capacity) {
            REQUIRE(now == 2 * capacity);  // grows by doubling, one step at a time
            capacity = now;
            ++doublings;
        }
        REQUIRE(capacity == expected_capacity(i + 1));  // grows only when full
    }
    CHECK(capacity == 8192);
    CHECK(doublings == 7);
    CHECK(d.size_hint() == kN);

    // Alternate steals (oldest first) and pops (newest first): every item
    // comes back exactly once, each end in its order.
    std::vector<int> seen(kN, 0);
    int64_t next_stolen = 0, next_popped = kN - 1;
    for (int64_t k = 0; k < kN; ++k) {
        if (k % 3 == 0) {
            IntDeque::StealResult r = d.steal();
            REQUIRE(r.status == Steal::kSuccess);
            REQUIRE(r.value == items[static_cast<std::size_t>(next_stolen)]);
            ++next_stolen;
            ++seen[static_cast<std::size_t>(*r.value)];
        } else {
            int *p = d.pop();
            REQUIRE(p == items[static_cast<std::size_t>(next_popped)]);
            --next_popped;
            ++seen[static_cast<std::size_t>(*p)];
        }
    }
    CHECK(next_stolen == next_popped + 1);
    CHECK(d.pop() == nullptr);
    CHECK(d.steal().status == Steal::kEmpty);
    for (int64_t i = 0; i < kN; ++i) {
        INFO("item " << i);
        REQUIRE(seen[static_cast<std::size_t>(i)] == 1);
    }
    CHECK(d.capacity_for_owner() == 8192);  // buffers never shrink
}

TEST_CASE("deque: slots freed by steals are reused without growing", "[deque]") {
    Items items(300);
    IntDeque d;
    REQUIRE(d.init());
    for (int i = 0; i < 100; ++i) REQUIRE(push_published(d, items[i]));
    REQUIRE(d.capacity_for_owner() == 128);
    for (int i = 0; i < 50; ++i) REQUIRE(d.steal().value == items[i]);
    // 50 live; 78 more pushes fill all 128 slots (wrapping around) with no growth.
    for (int i = 100; i < 178; ++i) REQUIRE(push_published(d, items[i]));
    CHECK(d.size_hint() == 128);
    CHECK(d.capacity_for_owner() == 128);
    // One more: now it must grow.
    REQUIRE(push_published(d, items[178]));
    CHECK(d.capacity_for_owner() == 256);
    for (int i = 50; i < 179; ++i) {
        IntDeque::StealResult r = d.steal();
        REQUIRE(r.status == Steal::kSuccess);
        REQUIRE(r.value == items[i]);
    }
    CHECK(d.steal().status == Steal::kEmpty);
}

TEST_CASE("deque: growth while the live range wraps around the buffer", "[deque]") {
    Items items(200);
    IntDeque d;
    REQUIRE(d.init());
    // Fill the 64 slots, steal 40, push 40 more: the live range [40, 104)
    // wraps around the physical end of the buffer and fills it.
    for (int i = 0; i < 64; ++i) REQUIRE(push_published(d, items[i]));
    for (int i = 0; i < 40; ++i) REQUIRE(d.steal().value == items[i]);
    for (int i = 64; i < 104; ++i) REQUIRE(push_published(d, items[i]));
    REQUIRE(d.capacity_for_owner() == 64);
    REQUIRE(d.size_hint() == 64);
    // The next push copies the wrapped range into a 128-slot buffer.
    REQUIRE(push_published(d, items[104]));
    REQUIRE(d.capacity_for_owner() == 128);
    // Newest from the bottom, oldest from the top: all in order.
    CHECK(d.pop() == items[104]);
    CHECK(d.pop() == items[103]);
    for (int i = 40; i < 103; ++i) {
        IntDeque::StealResult r = d.steal();
        REQUIRE(r.status == Steal::kSuccess);
        REQUIRE(r.value == items[i]);
    }
    CHECK(d.steal().status == Steal::kEmpty);
    CHECK(d.pop() == nullptr);
}

TEST_CASE("deque: works with uintptr_t-encoded elements", "[deque]") {
    blz::Deque<uintptr_t> d;
    REQUIRE(d.init());
    for (uintptr_t v = 1; v <= 1000; ++v) REQUIRE(push_published(d, v << 4));
    CHECK(d.capacity_for_owner() == 1024);
    for (uintptr_t v = 1; v <= 500; ++v) {
        auto r = d.steal();
        REQUIRE(r.status == blz::Deque<uintptr_t>::Steal::kSuccess);
        REQUIRE(r.value == v << 4);
    }
    for (uintptr_t v = 1000; v > 500; --v) REQUIRE(d.pop() == v << 4);
    CHECK(d.pop() == 0);
}
