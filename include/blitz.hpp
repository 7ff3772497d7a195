/**
 * @file blitz.hpp
 * @brief libblitz for C++17: RAII handles, lambdas, values and exceptions
 *        over the C ABI of blitz.h; with C++20, coroutines (blz::co).
 *
 * Header-only. Everything here is an inline or template layer over the
 * functions and records of blitz.h: only the C ABI crosses the library
 * boundary, so a program built with any C++17 compiler and standard library
 * works with any build of libblitz.so. pool::join on a worker of its pool
 * forks through blitz.h's inline fork path (GCC and clang): a fork that
 * nobody steals makes no call into the library.
 *
 * How exceptions travel. The C API catches an exception escaping a task
 * at its boundary and reports only BLZ_ETASK. To carry the real exception,
 * every function this header hands to the C API (a "trampoline") catches
 * whatever the user's code throws, stores it as a std::exception_ptr next
 * to the call, reports the failure to the C API with blz_fail(), and
 * returns normally; the C++ side rethrows it once the C call has returned.
 * Through blz_fail() the C API sees the failure as it sees a C job's: the
 * job counts in blz_stats::tasks_failed (the two sides of a join that the
 * forker ran itself count as one job), and a group made with
 * group_flags::cancel_on_failure is cancelled at once. The one exception not reported is a blz::error(BLZ_ECANCELED)
 * leaving work whose group is cancelled (what a parallel_for there throws):
 * that is the cancellation travelling up, not a failure. No C++ exception
 * ever unwinds through the library.
 * (The one thing let through is an unwind that is not a C++ exception,
 * such as glibc's thread cancellation or pthread_exit: it reaches the
 * library, which stops the process, since a worker thread cannot end
 * inside a job; see blitz.h.)
 *
 * Failures of the C API itself (a status other than BLZ_OK) are thrown as
 * blz::error, which carries the status.
 *
 * Coroutines (C++20, 0.3). blz::co::task<T> coroutines run on a pool's
 * workers and await tasks, C tasks and other coroutines without blocking
 * a thread: see the section "C++20 coroutines" near the end of this file.
 *
 * Cancellation (0.2). group::cancel() skips the group's tasks that have not
 * started; running ones are not interrupted but may poll blz::cancelled()
 * and return early, and a pool::parallel_for they call stops starting
 * pieces and throws blz::error(BLZ_ECANCELED). The group's next wait
 * reports the cancellation (see group::wait) and resets the group.
 *
 * @code
 * #include <blitz.hpp>
 *
 * long fib(blz::pool &pool, int n) {
 *     if (n < 2) return n;
 *     auto [a, b] = pool.join([&] { return fib(pool, n - 1); },
 *                             [&] { return fib(pool, n - 2); });
 *     return a + b;
 * }
 *
 * int main() {
 *     blz::pool pool;                                   // one worker per CPU
 *     long r = pool.call([&] { return fib(pool, 30); });  // on a worker
 *     std::vector<double> v = ...;
 *     blz::parallel_sort(pool, v.begin(), v.end());
 * }
 * @endcode
 */

#ifndef BLITZ_HPP
#define BLITZ_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "blitz.hpp needs C++17 or later (blitz.h is the C interface)"
#endif

#include "blitz.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

/** The C++ layer of libblitz. */
namespace blz {

/**
 * A libblitz function failed: the C API returned a status other than
 * BLZ_OK. what() names the operation and the status
 * ("blz::pool: BLZ_EINVAL: invalid argument").
 */
class error : public std::runtime_error {
public:
    /**
     * @param status  the blz_status the C API returned.
     * @param context the operation that failed, prefixed to what().
     */
    error(blz_status status, const char *context)
        : std::runtime_error(std::string(context) + ": " + blz_status_string(status)), status_(status) {}

    /** @return the status the C API returned (one of the negative blz_status_code values). */
    blz_status status() const noexcept { return status_; }

private:
    blz_status status_;
};

/// @cond BLZ_DETAIL
namespace detail {

inline void check(blz_status status, const char *context) {
    if (status != BLZ_OK) throw error(status, context);
}

// A blz::error(BLZ_ECANCELED) thrown inside cancelled work is the
// cancellation travelling up (from a parallel_for or a wait that saw it),
// not a failure of the work: reporting it would count it in tasks_failed.
inline bool is_cancellation(const std::exception_ptr &e) noexcept {
    if (blz_cancelled() == 0) return false;
    try {
        std::rethrow_exception(e);
    } catch (const error &err) {
        return err.status() == BLZ_ECANCELED;
    } catch (...) {
        return false;
    }
}

// A duration as a timeout of the C API's bounded waits: up to zero polls,
// beyond 64 bits of nanoseconds waits for ever, anything else is rounded
// up (a wait never shorter than asked). Computed in long double, so that no
// duration, however long or fine, overflows on the way.
template <class Rep, class Period>
std::uint64_t timeout_ns(const std::chrono::duration<Rep, Period> &timeout) {
    constexpr std::uint64_t forever = std::numeric_limits<std::uint64_t>::max();
    const long double ns = std::chrono::duration<long double, std::nano>(timeout).count();
    if (!(ns > 0)) return 0;  // NaN too
    if (ns >= static_cast<long double>(forever)) return forever;
    const auto whole = static_cast<std::uint64_t>(ns);
    return static_cast<long double>(whole) < ns ? whole + 1 : whole;
}

// Runs body(); whatever it throws goes to on_error (which must not throw)
// instead of leaving: for code that returns to a C frame.
template <class Body, class OnError>
void guard(Body &&body, OnError &&on_error) {
    try {
        body();
    } catch (...) {
        std::exception_ptr caught = std::current_exception();
        // Empty for an unwind that is not a C++ exception: glibc's thread
        // cancellation or pthread_exit (abi::__forced_unwind), another
        // language's exception. Not an error to carry: it goes on to the
        // library, which stops the process (blitz.h). Caught here rather
        // than by type, since catching abi::__forced_unwind by reference
        // binds the reference to no object.
        if (!caught) throw;
        on_error(caught);
    }
}

// guard() for user code that the C API runs as a job: keep(e) stores the
// exception, then blz_fail() reports the failure to the C API. In that
// order: in a cancel_on_failure group the failure cancels the group, and
// the exception that caused it must be recorded before any exception that
// the cancellation causes in other jobs.
template <class Body, class Keep>
void run_job(Body &&body, Keep &&keep) {
    guard(std::forward<Body>(body), [&](std::exception_ptr e) noexcept {
        keep(e);
        if (!is_cancellation(e)) blz_fail();
    });
}

// The first exception (in time) of calls that may run concurrently; read
// only once the C call that ran them has returned.
class first_error {
public:
    void record(const std::exception_ptr &e) noexcept {
        // relaxed: the exchange only elects the one writer of error_; the reader
        // comes after the C call returned, which orders every call it ran.
        if (!taken_.exchange(true, std::memory_order_relaxed)) error_ = e;
    }
    void rethrow_if_any() const {
        if (error_) std::rethrow_exception(error_);
    }

private:
    std::atomic<bool> taken_{false};
    std::exception_ptr error_;
};

// The type a call of F gives back: void and lvalue references as they are,
// anything else by value.
template <class R>
using normalize_t = std::conditional_t<std::is_lvalue_reference_v<R>, R, std::remove_cv_t<std::remove_reference_t<R>>>;
template <class F>
using result_t = normalize_t<std::invoke_result_t<F>>;

// What join() gives back for a result R: std::monostate for void.
template <class R>
using value_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

// Holds the result of one call until it is taken.
template <class R>
class slot {
public:
    template <class F>
    void fill(F &&f) {
        value_.emplace(std::invoke(std::forward<F>(f)));
    }
    R take() { return std::move(*value_); }
    R take_value() { return std::move(*value_); }

private:
    std::optional<R> value_;
};

template <class R>
class slot<R &> {
public:
    template <class F>
    void fill(F &&f) {
        ptr_ = std::addressof(std::invoke(std::forward<F>(f)));
    }
    R &take() { return *ptr_; }
    R &take_value() { return *ptr_; }

private:
    R *ptr_ = nullptr;
};

template <>
class slot<void> {
public:
    template <class F>
    void fill(F &&f) {
        std::invoke(std::forward<F>(f));
    }
    void take() {}
    std::monostate take_value() { return {}; }
};

// One call of f by the C API, on the caller's stack (join, call). F is
// deduced from a forwarding reference: invoked as an rvalue unless F is an
// lvalue reference type.
template <class F>
struct call_frame {
    explicit call_frame(std::remove_reference_t<F> &f) : fn(f) {}

    static void run(void *arg) {
        call_frame &self = *static_cast<call_frame *>(arg);
        run_job([&] { self.result.fill(std::forward<F>(self.fn)); },
                [&](const std::exception_ptr &e) noexcept { self.error = e; });
    }

    // Rethrows f's exception, else fails on a bad status.
    void finish(blz_status status, const char *context) {
        if (error) std::rethrow_exception(error);
        check(status, context);
    }

    std::remove_reference_t<F> &fn;
    slot<result_t<F>> result;
    std::exception_ptr error;
};

// The process pool for blz::join off every pool: one reference, taken at
// the first use and kept to process exit (never given up, so no pool is
// created and destroyed per join, and none is destroyed by a static
// destructor while other threads may still join).
inline blz_pool *process_pool_for_join() {
    static blz_pool *const handle = [] {
        blz_pool *p = nullptr;
        check(blz_pool_shared(nullptr, &p), "blz::join");
        return p;
    }();
    return handle;
}

// A join through the C call blz_fork_join: from a thread that is not a
// worker of `handle`'s pool (the pair moves into the pool), or where the
// compiler cannot name the fork stack.
template <class F, class G>
std::pair<value_t<result_t<F>>, value_t<result_t<G>>> join_through(blz_pool *handle, F &&f, G &&g) {
    call_frame<F> a(f);
    call_frame<G> b(g);
    const blz_status status = blz_fork_join(handle, &call_frame<F>::run, &a, &call_frame<G>::run, &b);
    if (a.error) std::rethrow_exception(a.error);
    b.finish(status, "blz::pool::join");
    return std::pair<value_t<result_t<F>>, value_t<result_t<G>>>(a.result.take_value(), b.result.take_value());
}

#if defined(__GNUC__)
// The fork path compiled into the caller (blitz.h, "The inline fork path",
// steps 1 to 4), for a worker of the pool forking. When nobody asked for
// work the fork costs two stores and a load before f, a load and a store
// after it, and f and g are direct calls the compiler may inline. What a
// join that nobody steals keeps across the calls of f and g is what it
// needs; everything else (exceptions, a promoted g) is in functions kept
// out of the caller: an optional result or an exception_ptr per half
// costs 10 to 15 instructions per join, a third of the fork path
// (callgrind, fib by blitzxx_bench; bench/findings.md).

// Storage for one call's result with no flag beside it: the fork path
// knows from where it is whether fill() ran, and takes or drops the value.
template <class R>
class raw_slot {
public:
    raw_slot() noexcept {}
    ~raw_slot() {}
    raw_slot(const raw_slot &) = delete;
    raw_slot &operator=(const raw_slot &) = delete;

    template <class F>
    void fill(F &&f) {
        ::new (static_cast<void *>(std::addressof(value_))) R(std::invoke(std::forward<F>(f)));
    }
    // Moves the value out and ends it, also when the move throws.
    R take_value() {
        struct end_value {
            raw_slot &slot;
            ~end_value() { slot.drop(); }
        } end{*this};
        return std::move(value_);
    }
    void drop() noexcept { value_.~R(); }

private:
    union {
        R value_;
    };
};

template <class R>
class raw_slot<R &> {
public:
    template <class F>
    void fill(F &&f) {
        ptr_ = std::addressof(std::invoke(std::forward<F>(f)));
    }
    R &take_value() { return *ptr_; }
    void drop() noexcept {}

private:
    R *ptr_;
};

template <>
class raw_slot<void> {
public:
    template <class F>
    void fill(F &&f) {
        std::invoke(std::forward<F>(f));
    }
    std::monostate take_value() { return {}; }
    void drop() noexcept {}
};

// Both values out of their slots, into the pair join() returns. In order
// (a braced list is evaluated left to right): when taking a's value
// throws, b's is dropped, so neither outlives the join.
template <class Pair, class A, class B>
Pair take_both(raw_slot<A> &a, raw_slot<B> &b) {
    if constexpr (std::is_nothrow_move_constructible_v<value_t<A>>) {
        return Pair{a.take_value(), b.take_value()};
    } else {
        value_t<A> first = [&]() -> value_t<A> {
            try {
                return a.take_value();
            } catch (...) {
                b.drop();
                throw;
            }
        }();
        return Pair{std::move(first), b.take_value()};
    }
}

// A fork's second half g on the forker's stack: the frame a thief runs
// once it is promoted, and where g's value goes. `ran` is written by
// whoever runs the frame through the library (thief or owner), and read
// after blz_fork_join_v1 returned, which orders it.
template <class G>
class forked_half {
public:
    using result = result_t<G>;

    explicit forked_half(std::remove_reference_t<G> &g) noexcept : fn_(g) {
        frame.fn = &run_promoted;
        frame.arg = this;
    }
    ~forked_half() {}  // the owner drops value or error, knowing which is there
    forked_half(const forked_half &) = delete;
    forked_half &operator=(const forked_half &) = delete;

    // g called here, the frame never promoted; throws what g throws.
    void run_inline() { value.fill(std::forward<G>(fn_)); }

    enum class outcome : unsigned char { not_run, value, error };

    blz_fork_frame frame;
    raw_slot<result> value;
    outcome ran = outcome::not_run;
    union {
        std::exception_ptr error;  // outcome::error only
    };

    // outcome::error: moves the exception out of the frame.
    std::exception_ptr take_error() noexcept {
        std::exception_ptr out(std::move(error));
        error.~exception_ptr();
        return out;
    }

private:
    static void run_promoted(void *arg) {
        forked_half &self = *static_cast<forked_half *>(arg);
        run_job(
            [&] {
                self.value.fill(std::forward<G>(self.fn_));
                self.ran = outcome::value;
            },
            [&](const std::exception_ptr &e) noexcept {
                ::new (static_cast<void *>(std::addressof(self.error))) std::exception_ptr(e);
                self.ran = outcome::error;
            });
    }

    std::remove_reference_t<G> &fn_;
};

// Step 1: false when the frame could not be pushed (out of memory): g
// runs here, and step 3 is skipped.
[[gnu::always_inline]] inline bool fork_push(blz_fork_stack &stack, blz_fork_frame &frame) noexcept {
    const std::uint32_t depth = stack.depth;
    // relaxed: requests is a hint other workers set (blitz.h).
    if (__builtin_expect(depth < stack.capacity && __atomic_load_n(&stack.requests, __ATOMIC_RELAXED) == 0, 1)) {
        stack.frames[depth] = &frame;
        stack.depth = depth + 1;
        return true;
    }
    return blz_fork_push_v1(&stack, &frame) != 0;
}

// Step 3: true when the newest frame was still pending: popped, g is the
// caller's to run. False when it was promoted: blz_fork_join_v1's to join.
[[gnu::always_inline]] inline bool fork_pop(blz_fork_stack &stack) noexcept {
    const std::uint32_t newest = stack.depth - 1;
    if (__builtin_expect(newest < stack.promoted, 0)) return false;
    stack.depth = newest;
    // relaxed load + store: only this thread writes it; statistics read it.
    __atomic_store_n(&stack.jobs_executed, __atomic_load_n(&stack.jobs_executed, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
    return true;
}

// Step 4 when a half failed: reports it, then throws the join's error.
[[noreturn, gnu::cold, gnu::noinline]] inline void fork_failed(blz_fork_stack &stack, std::uint32_t before) {
    blz_fork_failed_v1(&stack, before);
    throw error(BLZ_ETASK, "blz::pool::join");
}

// Inside the handler of an exception from the half just run inline:
// reports it as run_job would (not a cancellation: blz_fail), then step 4.
// An unwind that is not a C++ exception is left alone (run_job's rule).
[[gnu::cold, gnu::noinline]] inline void inline_half_threw(blz_fork_stack &stack, std::uint32_t before) noexcept {
    const std::exception_ptr e = std::current_exception();
    if (!e) return;
    if (!is_cancellation(e)) blz_fail();
    if (*stack.failures != before) blz_fork_failed_v1(&stack, before);
}

// Inside the handler of f's exception: joins g all the same (a thief may
// hold its frame, which lives on this stack) and drops its value or
// exception (f's is the one rethrown), then reports the failures.
template <class G>
[[gnu::cold, gnu::noinline]] void join_after_first_threw(blz_fork_stack &stack, forked_half<G> &b, bool pushed,
                                                         std::uint32_t before) noexcept {
    const std::exception_ptr e = std::current_exception();
    if (e && !is_cancellation(e)) blz_fail();
    if (pushed && !fork_pop(stack)) {
        (void)blz_fork_join_v1(&stack, &b.frame);
        if (b.ran == forked_half<G>::outcome::value) b.value.drop();
        if (b.ran == forked_half<G>::outcome::error) (void)b.take_error();
    } else {
        run_job([&] { b.run_inline(); b.value.drop(); }, [](const std::exception_ptr &) noexcept {});
    }
    if (e && *stack.failures != before) blz_fork_failed_v1(&stack, before);
}

// Step 3 for a promoted g: the library takes it back or waits for its
// thief. Returns normally when g gave a value and did not fail; else
// drops the values, reports a failure counted here (g taken back and run
// on this thread) and throws g's exception, or the join's error (g called
// blz_fail, or never ran).
template <class G, class RA>
[[gnu::noinline]] void join_promoted_half(blz_fork_stack &stack, forked_half<G> &b, raw_slot<RA> &a,
                                          std::uint32_t before) {
    // 0: g failed where it ran (an exception, or blz_fail on its thief).
    const bool ok = blz_fork_join_v1(&stack, &b.frame) == 1;
    if (__builtin_expect(ok && b.ran == forked_half<G>::outcome::value, 1)) return;
    a.drop();
    if (b.ran == forked_half<G>::outcome::value) b.value.drop();
    if (*stack.failures != before) blz_fork_failed_v1(&stack, before);
    if (b.ran == forked_half<G>::outcome::error) std::rethrow_exception(b.take_error());
    throw error(BLZ_ETASK, "blz::pool::join");
}

template <class F, class G>
using join_result = std::pair<value_t<result_t<F>>, value_t<result_t<G>>>;

// Steps 2 to 4. Pushed: g's frame is on the stack, to pop or to join
// through the library; else g simply runs here after f.
template <bool Pushed, class F, class G>
[[gnu::always_inline]] inline join_result<F, G> join_halves(blz_fork_stack &stack, F &&f, forked_half<G> &b,
                                                            std::uint32_t failures_before) {
    raw_slot<result_t<F>> a;
    try {
        a.fill(std::forward<F>(f));
    } catch (...) {
        join_after_first_threw(stack, b, Pushed, failures_before);
        throw;
    }
    if (__builtin_expect(!Pushed || fork_pop(stack), 1)) {
        try {
            b.run_inline();
        } catch (...) {
            a.drop();
            inline_half_threw(stack, failures_before);
            throw;
        }
    } else {
        join_promoted_half(stack, b, a, failures_before);
    }
    if (__builtin_expect(*stack.failures != failures_before, 0)) {
        a.drop();
        b.value.drop();
        fork_failed(stack, failures_before);
    }
    return take_both<join_result<F, G>>(a, b.value);
}

// The push failed (out of memory): no fork, both halves run here.
template <class F, class G>
[[gnu::noinline, gnu::cold]] join_result<F, G> join_unpushed(blz_fork_stack &stack, F &&f, forked_half<G> &b,
                                                             std::uint32_t failures_before) {
    return join_halves<false>(stack, std::forward<F>(f), b, failures_before);
}

// A join on the calling worker, whose fork stack this is: blitz.h's
// inline fork path. g's forked_half is what a thief runs if g is
// promoted; f and an unpromoted g are called right here.
template <class F, class G>
join_result<F, G> join_inline(blz_fork_stack &stack, F &&f, G &&g) {
    forked_half<G> b(g);
    const std::uint32_t failures_before = *stack.failures;
    if (__builtin_expect(!fork_push(stack, b.frame), 0)) {
        return join_unpushed(stack, std::forward<F>(f), b, failures_before);
    }
    return join_halves<true>(stack, std::forward<F>(f), b, failures_before);
}
#endif

// A body called by blz_parallel_for on sub-ranges, possibly concurrently.
// The first exception (in time) is kept; every piece still runs, as in C
// (unless a cancel_on_failure group skips the rest).
template <class Body>
struct range_frame {
    explicit range_frame(Body &b) : body(b) {}

    static void run(void *arg, std::size_t lo, std::size_t hi) {
        range_frame &self = *static_cast<range_frame *>(arg);
        run_job([&] { self.body(lo, hi); }, [&](const std::exception_ptr &e) noexcept { self.errors.record(e); });
    }

    Body &body;
    first_error errors;
};

// f called by blz_broadcast with each worker's index, concurrently.
template <class F>
struct broadcast_frame {
    explicit broadcast_frame(F &f) : fn(f) {}

    static void run(void *arg, std::uint32_t worker_index) {
        broadcast_frame &self = *static_cast<broadcast_frame *>(arg);
        run_job([&] { self.fn(worker_index); }, [&](const std::exception_ptr &e) noexcept { self.errors.record(e); });
    }

    F &fn;
    first_error errors;
};

// Someone waiting for a completion (a coroutine, a fan-in of several, a
// blocked get()) as a handoff parks it: wake() is called once, by the
// thread that completed, and says what that thread runs next.
struct waiter {
    // may_transfer: the caller is at a coroutine's final suspend point and
    // can run a coroutine next by symmetric transfer. Returns the address of
    // the coroutine to run so, or nullptr.
    void *(*wake)(waiter &self, bool may_transfer) noexcept;
};

// One completion handed from the side that completes (an on_done, a
// coroutine's end) to the one side that waits for it (an await, a get()),
// which may come first in either order: the word says whether a waiter is
// parked, the completion happened, or the owner left (a spawned coroutine
// given up before its end). Each of park(), unpark(), detach() and
// complete() is one atomic step, so exactly one side sees the other's mark
// and acts on it: a parked waiter is woken once, never lost, and a
// completion that came first is seen by the waiter that comes later.
class handoff {
public:
    // The completer's mark is in the word before the waiter looks, or the
    // waiter's after the completer looked: the waiter then parks. True
    // when parked (w.wake will be called); false when it had completed
    // already (nothing parked: the waiter goes on at once).
    bool park(waiter &w) noexcept {
        std::uintptr_t expected = kEmpty;
        // release on success: the completer that takes w reads the fields
        // the waiter wrote into it before. acquire on failure: the word was
        // kDone, and what the completer wrote before completing (a result,
        // an exception) is read next by this thread.
        return word_.compare_exchange_strong(expected, reinterpret_cast<std::uintptr_t>(&w),
                                             std::memory_order_release, std::memory_order_acquire);
    }

    // Takes a parked waiter back (a bounded wait that timed out): true if
    // it was still parked, false if the completer took it already and is
    // waking it (then the waiter must wait for that wake).
    bool unpark(waiter &w) noexcept {
        std::uintptr_t expected = reinterpret_cast<std::uintptr_t>(&w);
        // acquire on failure: the completer's writes, as in park(). On
        // success no data goes either way (w is simply not parked any
        // more), but a success order weaker than the failure order is
        // rejected by compilers (g++'s -Winvalid-memory-model): acquire too.
        return word_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire,
                                             std::memory_order_acquire);
    }

    // The owner gives the completion up: true when the completer will see
    // the mark (and free what it must), false when it completed already
    // (the owner frees).
    bool detach() noexcept {
        std::uintptr_t expected = kEmpty;
        // acq_rel on success: the owner's last reads of the shared state
        // happen before the completer frees it. acquire on failure: the
        // completer's writes happen before the owner frees the state.
        return word_.compare_exchange_strong(expected, kDetached, std::memory_order_acq_rel,
                                             std::memory_order_acquire);
    }

    // What complete() found in the word.
    struct previous {
        std::uintptr_t word;
        bool detached() const noexcept { return word == kDetached; }
        // Wakes the parked waiter, if one was: what the caller runs next.
        void *wake(bool may_transfer) const noexcept {
            if (word == kEmpty || word == kDetached) return nullptr;
            waiter *const w = reinterpret_cast<waiter *>(word);
            return w->wake(*w, may_transfer);
        }
    };

    // Marks the completion; at most once. The caller wakes the waiter it
    // found, or frees the state when the owner left.
    previous complete() noexcept {
        // acq_rel: release publishes what was written before the completion
        // to a waiter that parks later (its failed CAS acquires); acquire
        // makes a parked waiter's fields (released by its park) readable.
        return previous{word_.exchange(kDone, std::memory_order_acq_rel)};
    }

    // Whether it completed; acquire: then the completer's writes are visible.
    bool done() const noexcept { return word_.load(std::memory_order_acquire) == kDone; }

private:
    // Never the address of a waiter (aligned to a pointer's size).
    static constexpr std::uintptr_t kEmpty = 0;
    static constexpr std::uintptr_t kDone = 1;
    static constexpr std::uintptr_t kDetached = 2;

    std::atomic<std::uintptr_t> word_{kEmpty};
};

// The awaiters of a blz::task and a blz::group (C++20, defined with the coroutines).
template <class T>
struct task_awaiter;
struct cxx_group_awaiter;

// A spawned task's result, exception and final status. Two references hold
// it: the blz::task (until the task is joined, or detached) and the C API
// (until the task's on_done ran, which happens for every accepted task,
// also one skipped by a cancel). The last of them frees it, so a detached
// task frees its own state, whichever of detach and on_done comes last.
template <class R>
struct task_state {
    task_state() = default;
    task_state(const task_state &) = delete;
    task_state &operator=(const task_state &) = delete;
    virtual ~task_state() = default;

    void release() noexcept {
        // acq_rel: the last releaser must see every write the other one made.
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    slot<R> result;
    std::exception_ptr error;
    blz_status status = BLZ_OK;  // the join's status; set by the owner once the task finished
    // What on_done reported, and its hand-off to a coroutine awaiting the
    // task (co_await, C++20): written by on_done, then completed.
    blz_status done_status = BLZ_OK;
    handoff completion;

private:
    std::atomic<int> refs_{2};
};

template <class S>
struct release_ref {
    void operator()(S *state) const noexcept { state->release(); }
};

// The completion callback of a pool::spawn without one.
struct no_callback {
    void operator()(blz_status, const std::exception_ptr &) const noexcept {}
};

template <class R, class Fn, class Done>
struct spawned_task final : task_state<R> {
    template <class F, class D>
    spawned_task(F &&f, D &&d) : fn(std::in_place, std::forward<F>(f)), on_done(std::in_place, std::forward<D>(d)) {}

    static void run(void *arg) {
        spawned_task &self = *static_cast<spawned_task *>(arg);
        run_job(
            [&] {
                self.result.fill(std::move(*self.fn));
                self.fn.reset();  // the captures go now, not when the task object does
            },
            [&](const std::exception_ptr &e) noexcept { self.error = e; });
    }

    // The C API's on_done: the user's callback, then the C API's reference ends.
    static void done(void *arg, blz_status status) {
        spawned_task *self = static_cast<spawned_task *>(arg);
        // The C API would catch its exception too, but no C++ exception may
        // cross the library boundary (see the file's documentation).
        guard([&] { std::invoke(std::move(*self->on_done), status, std::as_const(self->error)); },
              [](std::exception_ptr) noexcept {});
        self->fn.reset();  // a task skipped by a cancel never ran its callable
        self->on_done.reset();
        self->done_status = status;
        // A coroutine awaiting the task is resumed now, on its pool (from
        // this worker, before the task counts as finished: the pool's
        // destroy waits for the resumption too).
        (void)self->completion.complete().wake(false);
        self->release();
    }

    std::optional<Fn> fn;
    std::optional<Done> on_done;
};

// A group's first exception since its last wait.
class group_state {
public:
    void record(std::exception_ptr e) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);  // lock() failing would terminate: never through C
        if (!first_) first_ = std::move(e);
    }
    std::exception_ptr take() noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        return std::exchange(first_, nullptr);
    }

private:
    std::mutex mutex_;
    std::exception_ptr first_;
};

// One task of a group: owns its callable and frees itself in on_done,
// which runs also when a cancel skipped the task.
template <class Fn>
struct group_job {
    template <class F>
    group_job(F &&f, group_state &s) : fn(std::forward<F>(f)), state(s) {}

    static void run(void *arg) {
        group_job &self = *static_cast<group_job *>(arg);
        run_job([&] { std::invoke(std::move(self.fn)); },
                [&](const std::exception_ptr &e) noexcept { self.state.record(e); });
    }
    static void done(void *arg, blz_status) { delete static_cast<group_job *>(arg); }

    Fn fn;
    group_state &state;
};

// The std::function hooks of a pool, given to the C API as its user pointer.
struct pool_hooks {
    std::function<void(std::uint32_t)> on_thread_start;
    std::function<void(std::uint32_t)> on_thread_stop;

    static void run(const std::function<void(std::uint32_t)> &hook, std::uint32_t index) {
        // Like the C API: a hook has nobody to report to; its exception is ignored.
        guard([&] { hook(index); }, [](std::exception_ptr) noexcept {});
    }
    static void start(void *user, std::uint32_t index) {
        run(static_cast<pool_hooks *>(user)->on_thread_start, index);
    }
    static void stop(void *user, std::uint32_t index) {
        run(static_cast<pool_hooks *>(user)->on_thread_stop, index);
    }
};

// Owns a C handle and the C++ state its work uses; move-only. Releasing it
// (destructor, or a move assignment over it) calls Release, which waits for
// the handle's work, and only then frees the state that work used. Release
// answering BLZ_EDEADLK (called from inside that work, which can never
// finish first) terminates, as destroying a joinable std::thread does.
template <class Handle, class State, blz_status (*Release)(Handle *), class Deleter = std::default_delete<State>>
class unique_handle {
public:
    using state_ptr = std::unique_ptr<State, Deleter>;

    unique_handle() noexcept = default;
    unique_handle(Handle *handle, state_ptr state) noexcept : handle_(handle), state_(std::move(state)) {}
    unique_handle(unique_handle &&other) noexcept
        : handle_(std::exchange(other.handle_, nullptr)), state_(std::move(other.state_)) {}
    unique_handle &operator=(unique_handle &&other) noexcept {
        if (this != &other) {
            reset();
            handle_ = std::exchange(other.handle_, nullptr);
            state_ = std::move(other.state_);
        }
        return *this;
    }
    ~unique_handle() { reset(); }

    Handle *get() const noexcept { return handle_; }
    State *state() const noexcept { return state_.get(); }

    // The C API freed the handle itself (blz_join, a finished wait, a
    // detach do): forget it, keep the state.
    void handle_freed() noexcept { handle_ = nullptr; }

    // Hands over the state, once the handle was freed.
    state_ptr take_state() noexcept { return std::move(state_); }

private:
    void reset() noexcept {
        if (handle_ == nullptr) return;
        if (Release(handle_) == BLZ_EDEADLK) std::terminate();
        handle_ = nullptr;
        state_.reset();
    }

    Handle *handle_ = nullptr;
    state_ptr state_;
};

// The C library's automatic grain: about eight pieces per worker.
inline std::size_t automatic_grain(std::size_t count, std::uint32_t num_threads) {
    const std::size_t pieces = std::size_t{8} * (num_threads > 0 ? num_threads : 1);
    const std::size_t grain = count / pieces;
    return grain > 0 ? grain : 1;
}

}  // namespace detail
/// @endcond

/**
 * The result of a pool::spawn: joined exactly once, by get() or, if get()
 * was never called, by the destructor; or detached by detach().
 *
 * Move-only. A default-constructed or moved-from task is empty
 * (valid() is false).
 *
 * @tparam T what the spawned callable returns (void allowed; an lvalue
 *           reference is kept as a reference, anything else by value).
 */
template <class T>
class task {
public:
    /** An empty task. */
    task() noexcept = default;

    /** Takes other's task. @param other becomes empty. */
    task(task &&other) noexcept = default;

    /**
     * Joins the task this object holds (as the destructor does), then takes other's.
     * @param other becomes empty.
     * @return this task.
     */
    task &operator=(task &&other) noexcept = default;

    /**
     * Joins the task if get() was not called: waits until it has run and
     * frees it, so nothing leaks. Its value and any exception it ended by
     * are discarded. Destroying a task from inside itself (where blz_join
     * answers BLZ_EDEADLK) calls std::terminate, as destroying a joinable
     * std::thread does.
     */
    ~task() = default;

    /**
     * @return true for a spawned task until get() or detach() is called
     *         (also once wait_for() saw it finish); false when empty or moved from.
     */
    bool valid() const noexcept { return task_.state() != nullptr; }

    /**
     * Waits for the task (a worker runs other jobs meanwhile) and returns
     * its value, or rethrows the exception it ended by. After get() the
     * task is empty, also when get() threw. After wait_for() returned true
     * it returns (or throws) at once.
     *
     * @return the task's value (nothing for task<void>, the reference for task<U &>).
     * @throws error BLZ_EINVAL if the task is empty; BLZ_EDEADLK if called
     *         from inside the task itself (the task stays valid); BLZ_EFORK
     *         in a forked child; BLZ_ETASK if the task called blz_fail()
     *         without throwing. Or whatever the task threw.
     */
    T get() {
        await(std::numeric_limits<std::uint64_t>::max(), "blz::task::get");
        const auto state = task_.take_state();
        if (state->error) std::rethrow_exception(state->error);
        detail::check(state->status, "blz::task::get");
        return state->result.take();
    }

    /**
     * Waits at most timeout for the task to finish (blz_task_wait_for). A
     * worker runs other jobs of its pool meanwhile and does not interrupt
     * one it runs, so the wait may end later than timeout. Once it returned
     * true, the task has finished, its on_done included, and get() returns
     * its value or rethrows its exception at once; the task stays valid()
     * until then.
     *
     * @param timeout how long to wait; zero or negative only polls, without
     *                blocking; a duration beyond about 584 years waits for ever.
     * @return true if the task has finished (also when it threw: get() rethrows);
     *         false if it had not finished in time.
     * @throws error BLZ_EINVAL if the task is empty; BLZ_EDEADLK if called from
     *         inside the task itself; BLZ_EFORK in a forked child. Never the task's exception.
     */
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &timeout) {
        return await(detail::timeout_ns(timeout), "blz::task::wait_for");
    }

    /**
     * Whether the task has finished, without blocking: wait_for() with a zero timeout.
     * @return true if it has finished (get() will not wait), false if not yet.
     * @throws error as wait_for().
     */
    bool is_ready() { return await(0, "blz::task::is_ready"); }

    /**
     * Cancels the task (blz_task_cancel, libblitz 0.3): if it has not
     * started it never runs, and get() throws error BLZ_ECANCELED (an
     * on_done gets BLZ_ECANCELED); if it runs, blz::cancelled() is true in
     * it, and loops it runs stop starting pieces, while its value stays
     * what it returns. A finished task does not change. Its pool, its
     * other tasks and its group are not cancelled.
     *
     * Any thread, not while another thread calls get(), wait_for() or
     * detach() on this object (a task object is used by one thread at a time).
     *
     * @throws error BLZ_EINVAL if the task is empty.
     */
    void cancel() {
        if (!valid()) throw error(BLZ_EINVAL, "blz::task::cancel: empty task");
        if (task_.get() != nullptr) detail::check(blz_task_cancel(task_.get()), "blz::task::cancel");
    }

    /**
     * Lets the task run on without this object (blz_task_detach): the task
     * is empty afterwards, and the spawned task frees its own state once it
     * has run and called its on_done. Its value and any exception it ends
     * by are discarded (an exception still counts in tasks_failed). The
     * pool's destruction waits for a detached task as for any other.
     * Detaching a task that wait_for() saw finish only discards its result.
     *
     * @throws error BLZ_EINVAL if the task is empty, or if another thread
     *         is waiting for it right now (the task then stays valid).
     */
    void detach() {
        if (!valid()) throw error(BLZ_EINVAL, "blz::task::detach: empty task");
        if (task_.get() != nullptr) {
            detail::check(blz_task_detach(task_.get()), "blz::task::detach");
            task_.handle_freed();
        }
        task_.take_state();  // drops this object's reference; the task drops the other one after on_done
    }

private:
    friend class pool;
    friend struct detail::task_awaiter<T>;

    using state_ptr = std::unique_ptr<detail::task_state<T>, detail::release_ref<detail::task_state<T>>>;

    task(blz_task *handle, state_ptr state) noexcept : task_(handle, std::move(state)) {}

    // Waits up to timeout_ns (the maximum: blz_join). True once the task
    // has finished: the C API then freed the handle, so its status is kept
    // in the state, where get() finds it without another join.
    bool await(std::uint64_t timeout_ns, const char *context) {
        if (!valid()) throw error(BLZ_EINVAL, (std::string(context) + ": empty task").c_str());
        if (task_.get() == nullptr) return true;
        const blz_status status = timeout_ns == std::numeric_limits<std::uint64_t>::max()
                                      ? blz_join(task_.get())
                                      : blz_task_wait_for(task_.get(), timeout_ns);
        if (status == BLZ_ETIMEDOUT) return false;
        if (status == BLZ_EDEADLK) throw error(status, context);
        task_.state()->status = status;
        task_.handle_freed();
        return true;
    }

    detail::unique_handle<blz_task, detail::task_state<T>, &blz_join, detail::release_ref<detail::task_state<T>>>
        task_;
};

/**
 * How pool::group(group_flags) makes a group (blz_group_create_ex's flags).
 */
enum class group_flags : std::uint32_t {
    /** A plain group, as pool::group() makes. */
    none = 0,
    /**
     * Fail-fast: the first exception in the group's work (a task, or a
     * join() side, call(), or parallel_for() piece that a task of the group
     * runs) cancels the group at once, as group::cancel() does; wait() then
     * rethrows that exception (BLZ_GROUP_CANCEL_ON_FAILURE).
     */
    cancel_on_failure = BLZ_GROUP_CANCEL_ON_FAILURE
};

/** Shorthand for group_flags::cancel_on_failure: `pool.group(blz::cancel_on_failure)`. */
inline constexpr group_flags cancel_on_failure = group_flags::cancel_on_failure;

/**
 * Whether the calling thread works for a cancelled group: the innermost
 * task it runs (or a join() side, call() or parallel_for() piece of it,
 * whichever worker runs that) belongs to a group that group::cancel() or a
 * cancel_on_failure failure cancelled (blz_cancelled). For long-running
 * tasks to poll and return early. Cheap: a walk of a few thread-local
 * frames and one relaxed load, so a cancel from another thread is seen
 * soon, not at once.
 *
 * @return true if so; false otherwise, also outside any task and in a task of no group.
 */
inline bool cancelled() noexcept { return blz_cancelled() != 0; }

/**
 * Runs f() on the calling thread as a blocking section (blz_block_begin,
 * blz_block_end; 0.3): for a task about to block outside the pool (I/O, a
 * lock, an external event). On a pool's worker, the pool stands a spare
 * thread (or a worker the cap held back) in while f runs, so the other
 * work keeps as many threads as the pool has; elsewhere nothing changes.
 * Keep only the blocking call inside. Sections nest.
 *
 *     auto text = blz::blocking([&] { return read_file(path); });
 *
 * @param f a callable taking no arguments.
 * @return f's value, as it returns it.
 * @throws f's exception, after the section was closed.
 */
template <class F>
decltype(auto) blocking(F &&f) {
    struct section {
        section() noexcept { (void)blz_block_begin(); }  // never fails
        ~section() { (void)blz_block_end(); }           // closes the section opened above
        section(const section &) = delete;
        section &operator=(const section &) = delete;
    } open;
    return static_cast<F &&>(f)();
}

/**
 * Tasks waited for together: pool::group() makes one.
 *
 * spawn(), wait(), wait_for(), cancel() and cancelled() may be called from
 * any thread, spawn() and cancel() by several at once. Move-only; a
 * default-constructed or moved-from group is empty and its calls throw
 * error(BLZ_EINVAL).
 */
class group {
public:
    /** An empty group. */
    group() noexcept = default;

    /** Takes other's group. @param other becomes empty. */
    group(group &&other) noexcept = default;

    /**
     * Destroys the group this object holds (as the destructor does), then takes other's.
     * @param other becomes empty.
     * @return this group.
     */
    group &operator=(group &&other) noexcept = default;

    /**
     * Waits for every task of the group and frees it (blz_group_destroy).
     * An exception or a cancellation not yet reported by wait() is
     * discarded. Destroying a group from inside one of its tasks calls
     * std::terminate.
     */
    ~group() = default;

    /**
     * Spawns f() (called as an rvalue, once) as a task of the group, on
     * the group's pool. f is moved or copied into the task, and destroyed
     * once the task has run, or was skipped because the group was
     * cancelled (f then never runs).
     *
     * @param f a callable taking no arguments; its return value is ignored.
     * @throws error BLZ_EINVAL for an empty group; BLZ_ENOMEM;
     *         BLZ_ESHUTDOWN if the pool is being (or was) destroyed; BLZ_EFORK.
     *         f does not run when spawn throws.
     */
    template <class F>
    void spawn(F &&f) {
        using job = detail::group_job<std::decay_t<F>>;
        if (group_.get() == nullptr) throw error(BLZ_EINVAL, "blz::group::spawn: empty group");
        auto owned = std::make_unique<job>(std::forward<F>(f), *group_.state());
        blz_spawn_options options;
        blz_spawn_options_init(&options);
        options.group = group_.get();
        options.on_done = &job::done;  // called also for a task the group's cancel skips, which run never is
        options.done_arg = owned.get();
        detail::check(blz_spawn_ex(nullptr, &job::run, owned.get(), &options, nullptr), "blz::group::spawn");
        owned.release();
    }

    /**
     * Waits until every task spawned before the call has run (a worker
     * runs other jobs meanwhile). Then rethrows the first exception (in
     * time) that a task of the group raised since the previous wait(); it
     * is reported once. Else, if the group was cancelled since the
     * previous wait, throws error(BLZ_ECANCELED), also reported once. The
     * group is reset and can be reused afterwards: tasks spawned later run.
     *
     * @throws error BLZ_EINVAL for an empty group; BLZ_EDEADLK if called
     *         from inside one of the group's tasks; BLZ_EFORK;
     *         BLZ_ECANCELED if the group was cancelled and no task threw;
     *         BLZ_ETASK if a task called blz_fail() without throwing.
     *         Or a task's exception.
     */
    void wait() {
        const blz_status status = blz_group_wait(checked("blz::group::wait"));
        finish(status, "blz::group::wait");
    }

    /**
     * wait() for at most timeout (blz_group_wait_for). A worker runs other
     * jobs of its pool meanwhile and does not interrupt one it runs, so the
     * wait may end later than timeout.
     *
     * @param timeout how long to wait; zero or negative only polls, without
     *                blocking; a duration beyond about 584 years waits for ever.
     * @return true if every task had run: then it rethrows or throws as
     *         wait() does, and resets the group; false if a task was still
     *         unfinished at the deadline (nothing is reported or reset: a
     *         later wait reports it).
     * @throws error as wait(). Or a task's exception.
     */
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &timeout) {
        const blz_status status = blz_group_wait_for(checked("blz::group::wait_for"), detail::timeout_ns(timeout));
        if (status == BLZ_ETIMEDOUT) return false;
        finish(status, "blz::group::wait_for");
        return true;
    }

    /**
     * Cancels the group (blz_group_cancel): its tasks that have not
     * started are skipped (their callables are destroyed without running),
     * and so are tasks spawned into it afterwards, until a wait reports
     * the cancellation and resets the group. Running tasks are not
     * interrupted: they may poll blz::cancelled() and return early, and a
     * parallel_for() they call stops starting pieces. Cancelling twice is
     * the same as once; a task of the group may cancel it.
     *
     * @throws error BLZ_EINVAL for an empty group.
     */
    void cancel() { detail::check(blz_group_cancel(checked("blz::group::cancel")), "blz::group::cancel"); }

    /**
     * Whether the group is cancelled, since the last wait that reset it
     * (blz_group_cancelled; one relaxed load: a cancel from another thread
     * is seen soon, not at once).
     * @return true if cancelled; false if not, and for an empty group.
     */
    bool cancelled() const noexcept { return blz_group_cancelled(group_.get()) != 0; }

    /** @return the C handle (nullptr for an empty group); it stays owned by this object. */
    blz_group *native_handle() const noexcept { return group_.get(); }

private:
    friend class pool;
    friend struct detail::cxx_group_awaiter;

    using handle_t = detail::unique_handle<blz_group, detail::group_state, &blz_group_destroy>;

    group(blz_pool *pool, group_flags flags) : group_(create(pool, flags)) {}

    static handle_t create(blz_pool *pool, group_flags flags) {
        auto state = std::make_unique<detail::group_state>();
        blz_group *handle = nullptr;
        detail::check(blz_group_create_ex(pool, static_cast<std::uint32_t>(flags), &handle), "blz::pool::group");
        return {handle, std::move(state)};
    }

    blz_group *checked(const char *context) const {
        if (group_.get() == nullptr) throw error(BLZ_EINVAL, (std::string(context) + ": empty group").c_str());
        return group_.get();
    }

    // What a finished wait reports: the first exception, else a bad status
    // (BLZ_ECANCELED for a cancellation).
    void finish(blz_status status, const char *context) {
        if (status == BLZ_EDEADLK) throw error(status, context);
        if (std::exception_ptr e = group_.state()->take()) std::rethrow_exception(e);
        detail::check(status, context);
    }

    handle_t group_;
};

/**
 * How to build a pool: the fields of blz_pool_config, with the worker
 * hooks as std::function (so a lambda with captures or a plain function
 * pointer both work; the pool keeps its own copies for as long as it
 * lives, which replaces blz_pool_config::user).
 */
struct pool_options {
    /** Workers; 0: BLZ_NUM_THREADS if it parses to 1..65535, else the CPUs this process may run on. */
    std::uint32_t num_threads = 0;
    /** Bytes of stack per worker; 0: the platform's default. */
    std::size_t stack_size = 0;
    /** Worker name prefix ("calc" names the workers "calc-0", "calc-1", ...); empty: "blz". */
    std::string thread_name;
    /**
     * Called on each worker with its index, before its first job; empty:
     * none. Workers call it concurrently. An exception it throws is ignored.
     */
    std::function<void(std::uint32_t worker_index)> on_thread_start;
    /**
     * Called on each worker with its index, after its last job (during the
     * pool's destruction); empty: none. An exception it throws is ignored.
     */
    std::function<void(std::uint32_t worker_index)> on_thread_stop;
    /**
     * (0.2) CPUs to pin the workers to, a Linux CPU list ("0-3,8-11"):
     * worker i on the i-th CPU, cycling; with num_threads 0, one worker per
     * entry. Empty: BLZ_CPU_LIST if set, else no pinning (blz_pool_config::cpu_list).
     */
    std::string cpu_list;
};

/**
 * A thread pool (blz_pool) that destroys itself: the destructor waits for
 * every accepted task, runs on_thread_stop on each worker and joins them.
 *
 * Move-only. A moved-from pool is empty: num_threads() is 0 and the calls
 * that submit work throw error(BLZ_EINVAL).
 *
 * Every member may be called from any thread, including the pool's own
 * workers (where join(), call() and parallel_for() run inline and waiting
 * runs other jobs) and the workers of other pools, except that the pool
 * must not be destroyed by one of its own workers.
 */
class pool {
public:
    /**
     * A pool with the library's defaults (as blz_pool_create with a NULL config).
     * @throws error BLZ_ENOMEM, BLZ_ETHREAD.
     */
    pool() : pool(pool_options()) {}

    /**
     * A pool of num_threads workers, otherwise the defaults.
     * @param num_threads workers, 1 .. BLZ_MAX_THREADS; 0: as pool_options::num_threads.
     * @throws error BLZ_EINVAL (num_threads above BLZ_MAX_THREADS), BLZ_ENOMEM, BLZ_ETHREAD.
     */
    explicit pool(std::uint32_t num_threads) : pool(with_threads(num_threads)) {}

    /**
     * A pool built from options; the hooks are moved into the pool.
     * @param options as blz_pool_config, see pool_options.
     * @throws error BLZ_EINVAL (num_threads above BLZ_MAX_THREADS, stack_size
     *         rejected), BLZ_ENOMEM, BLZ_ETHREAD. No hook is left running.
     */
    explicit pool(pool_options options) : pool_(create(std::move(options))) {}

    /**
     * A reference to the process pool (blz_pool_shared, 0.3): the one
     * pool every library of the process can share, created by the first
     * user with the defaults (BLZ_NUM_THREADS, else the CPUs the process
     * may use, bounded by its cgroup quota). The object's destructor gives
     * the reference up: the pool goes only with the last reference in the
     * process, and then waits for its accepted work as ~pool() does. Use it
     * wherever a library would otherwise make a default pool of its own.
     * @return a pool object holding one reference.
     * @throws error BLZ_ENOMEM, BLZ_ETHREAD (creating it).
     */
    static pool shared() {
        blz_pool *handle = nullptr;
        detail::check(blz_pool_shared(nullptr, &handle), "blz::pool::shared");
        return pool(handle_t(handle, nullptr));
    }

    /** Takes other's pool. @param other becomes empty. */
    pool(pool &&other) noexcept = default;

    /**
     * Destroys the pool this object holds (as the destructor does), then takes other's.
     * @param other becomes empty.
     * @return this pool.
     */
    pool &operator=(pool &&other) noexcept = default;

    /**
     * blz_pool_destroy: waits for every accepted task (spawned, in a group,
     * running), runs on_thread_stop on each worker and joins them. Called
     * from one of the pool's own workers (BLZ_EDEADLK), it calls
     * std::terminate. For a pool from shared(): gives its reference up, and
     * destroys the pool so only if it was the last in the process.
     */
    ~pool() = default;

    /** @return the C handle (nullptr for an empty pool); it stays owned by this object. */
    blz_pool *native_handle() const noexcept { return pool_.get(); }

    /** @return the number of workers; 0 for an empty pool. */
    std::uint32_t num_threads() const noexcept { return blz_pool_num_threads(pool_.get()); }

    /** @return the calling thread's index among the pool's workers, or -1 if it is not one of them. */
    std::int32_t worker_index() const noexcept { return blz_worker_index(pool_.get()); }

    /**
     * A snapshot of the pool's counters (blz_pool_stats).
     * @return the counters, every field filled.
     * @throws error BLZ_EINVAL for an empty pool, BLZ_ESHUTDOWN, BLZ_EFORK.
     */
    blz_stats stats() const {
        blz_stats out{};
        out.struct_size = sizeof(out);
        detail::check(blz_pool_stats(pool_.get(), &out), "blz::pool::stats");
        return out;
    }

    /**
     * One worker's counters and times (blz_worker_stats); the pool's
     * stats() are their sum.
     * @param worker_index 0 .. num_threads() - 1.
     * @return the counters, every field filled.
     * @throws error BLZ_EINVAL for an empty pool or an unknown index, BLZ_ESHUTDOWN, BLZ_EFORK.
     */
    blz_stats worker_stats(std::uint32_t worker_index) const {
        blz_stats out{};
        out.struct_size = sizeof(out);
        detail::check(blz_worker_stats(pool_.get(), worker_index, &out), "blz::pool::worker_stats");
        return out;
    }

    /**
     * At most n workers run jobs at once from now on; 0 lifts the cap
     * (blz_pool_set_max_active: what the cap counts, and when it takes effect).
     * @param n the most active workers; 0: all.
     * @throws error BLZ_EINVAL for an empty pool, BLZ_ESHUTDOWN, BLZ_EFORK.
     */
    void set_max_active(std::uint32_t n) {
        detail::check(blz_pool_set_max_active(pool_.get(), n), "blz::pool::set_max_active");
    }

    /**
     * Starts recording what the workers do, for a Chrome Trace Event file
     * written to path by trace_stop() or by the pool's destruction
     * (blz_pool_trace_start: what is recorded, the cost, BLZ_TRACE).
     * @param path the file to write; created or truncated now.
     * @throws error BLZ_EINVAL for an empty path, a trace already running or a
     *         path that cannot be opened; BLZ_ENOMEM, BLZ_ESHUTDOWN, BLZ_EFORK.
     */
    void trace_start(const std::string &path) {
        detail::check(blz_pool_trace_start(pool_.get(), path.c_str()), "blz::pool::trace_start");
    }

    /**
     * Stops the trace and writes its file (blz_pool_trace_stop).
     * @throws error BLZ_EINVAL when no trace runs or writing failed; BLZ_ESHUTDOWN, BLZ_EFORK.
     */
    void trace_stop() {
        detail::check(blz_pool_trace_stop(pool_.get()), "blz::pool::trace_stop");
    }

    /**
     * Runs f() and g(), possibly in parallel, and returns both values
     * (blz_fork_join's contract: on a worker, f runs inline and g waits for
     * a thief, here through blitz.h's inline fork path, without a call into
     * the library unless a thief asked; from another thread the pair first
     * moves into the pool).
     *
     * `auto [a, b] = pool.join(f, g);` A side returning void gives
     * std::monostate; a side returning an lvalue reference gives the
     * reference; anything else is returned by value (move-constructed).
     *
     * If either side throws, the exception is rethrown after both sides
     * ran; if both throw, f's exception is the one rethrown.
     *
     * @param f called once (as an rvalue if passed as one) on the calling worker.
     * @param g called once, maybe on another worker.
     * @return the pair of f's and g's values.
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ESHUTDOWN from outside
     *         while the pool is being destroyed; BLZ_EFORK. Or f's or g's exception.
     */
    template <class F, class G>
    std::pair<detail::value_t<detail::result_t<F>>, detail::value_t<detail::result_t<G>>> join(F &&f, G &&g) {
#if defined(__GNUC__)
        blz_fork_stack *const stack = blz_fork_stack_v1;
        if (__builtin_expect(stack != nullptr && stack->pool == pool_.get(), 1)) {
            return detail::join_inline(*stack, std::forward<F>(f), std::forward<G>(g));
        }
#endif
        return detail::join_through(pool_.get(), std::forward<F>(f), std::forward<G>(g));
    }


    /**
     * Runs f() on one of the pool's workers (inline on a worker of this
     * pool), waits and returns its value, or rethrows its exception.
     *
     * @param f a callable taking no arguments.
     * @return f's value; void and references are returned as they are.
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ESHUTDOWN; BLZ_EFORK. Or f's exception.
     */
    template <class F>
    detail::result_t<F> call(F &&f) {
        detail::call_frame<F> frame(f);
        frame.finish(blz_call(pool_.get(), &detail::call_frame<F>::run, &frame), "blz::pool::call");
        return frame.result.take();
    }

    /**
     * Runs f() as call(f) does, isolated (blz_isolate): every wait inside
     * f (a join, a task's get(), a group's wait, a call) runs only work
     * forked or spawned inside f. For a lock held across a join.
     *
     * @param f a callable taking no arguments.
     * @return f's value; void and references are returned as they are.
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ESHUTDOWN; BLZ_EFORK. Or f's exception.
     */
    template <class F>
    detail::result_t<F> isolate(F &&f) {
        detail::call_frame<F> frame(f);
        frame.finish(blz_isolate(pool_.get(), &detail::call_frame<F>::run, &frame), "blz::pool::isolate");
        return frame.result.take();
    }

    /**
     * Runs f() on a worker, later (blz_spawn): from a worker of this pool
     * the task goes to that worker's deque, from elsewhere through the
     * pool's injector. f is moved or copied into the task and destroyed
     * once it has run.
     *
     * @param f a callable taking no arguments, called once as an rvalue.
     * @return the task; get() returns f's value or rethrows its exception.
     *         The task must be joined (get() or its destructor) or detached
     *         (task::detach()), even after the pool is gone: the pool's
     *         destructor waits for it to run.
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ENOMEM; BLZ_ESHUTDOWN;
     *         BLZ_EFORK. f does not run when spawn throws.
     */
    template <class F>
    task<detail::result_t<std::decay_t<F>>> spawn(F &&f) {
        return spawn(std::forward<F>(f), detail::no_callback());
    }

    /**
     * spawn(f) with BLZ_SPAWN_HIGH_PRIORITY: every worker looking for work
     * takes it before any normal queued task, also when spawned from a
     * worker (it does not go onto that worker's deque). Running jobs are
     * not preempted (blitz.h has what is not promised).
     *
     * @param f a callable taking no arguments, called once as an rvalue.
     * @return the task, as spawn(f) returns it.
     * @throws error as spawn(f).
     */
    template <class F>
    task<detail::result_t<std::decay_t<F>>> spawn_high_priority(F &&f) {
        return spawn_flagged(std::forward<F>(f), detail::no_callback(), BLZ_SPAWN_HIGH_PRIORITY);
    }

    /**
     * spawn(f), with a completion callback (blz_spawn_ex's on_done).
     *
     * on_done(status, error) is called exactly once, on the worker that
     * ran the task, right after f returned or threw, and before the task
     * counts as finished: before its get(), wait_for() or destructor
     * returns, and before the pool's destructor does; also for a detached
     * task. status is BLZ_OK (f returned), or BLZ_ETASK (f threw; error
     * holds its exception, which get() still rethrows; or f called
     * blz_fail() and error is null). The task's value is not passed: it
     * stays for get(). on_done runs on a worker, so it should be short and
     * must not wait for its own task. An exception escaping it is caught
     * and discarded (the task's status does not change). on_done is moved
     * or copied into the task, and destroyed once it has run. When spawn
     * throws, neither f nor on_done is called.
     *
     * @param f       a callable taking no arguments, called once as an rvalue.
     * @param on_done called once, as an rvalue, as on_done(blz_status status,
     *                std::exception_ptr error) (a const std::exception_ptr &
     *                parameter works too).
     * @return the task, as spawn(f) returns it.
     * @throws error as spawn(f).
     */
    template <class F, class Done>
    task<detail::result_t<std::decay_t<F>>> spawn(F &&f, Done &&on_done) {
        return spawn_flagged(std::forward<F>(f), std::forward<Done>(on_done), 0);
    }

private:
    // spawn(f, on_done) with blz_spawn_options flags.
    template <class F, class Done>
    task<detail::result_t<std::decay_t<F>>> spawn_flagged(F &&f, Done &&on_done, std::uint32_t flags) {
        static_assert(std::is_invocable_v<std::decay_t<Done>, blz_status, const std::exception_ptr &>,
                      "blz::pool::spawn: on_done must be callable as on_done(blz_status, std::exception_ptr)");
        using R = detail::result_t<std::decay_t<F>>;
        using state = detail::spawned_task<R, std::decay_t<F>, std::decay_t<Done>>;
        auto owned = std::make_unique<state>(std::forward<F>(f), std::forward<Done>(on_done));
        blz_spawn_options options;
        blz_spawn_options_init(&options);
        options.on_done = &state::done;  // where the C API's reference to the state ends
        options.done_arg = owned.get();
        options.flags = flags;
        blz_task *handle = nullptr;
        detail::check(blz_spawn_ex(pool_.get(), &state::run, owned.get(), &options, &handle), "blz::pool::spawn");
        return task<R>(handle, typename task<R>::state_ptr(owned.release()));
    }

public:

    /**
     * Calls body(lo, hi) on disjoint sub-ranges that cover [begin, end)
     * exactly once, split by fork-join down to grain indices per call
     * (blz_parallel_for). Pieces run concurrently on several workers, so
     * body must be safe to call that way. Returns when every piece has run;
     * if pieces threw, every other piece still ran and the first exception
     * (in time) is rethrown.
     *
     * Called from a task of a group (or from work such a task waits for),
     * the loop obeys the group's cancellation: once the group is
     * cancelled, no further piece starts, the running ones finish, and the
     * call throws error(BLZ_ECANCELED) (or the first exception of a piece,
     * if one threw). In a group made with cancel_on_failure, a piece that
     * throws cancels the group, so the rest of the loop is skipped.
     *
     * @param begin first index.
     * @param end   one past the last index; begin == end calls nothing.
     * @param body  called as body(std::size_t lo, std::size_t hi) on an lvalue.
     * @param grain indices per call at most; 0: automatic, about eight pieces per worker.
     * @throws error BLZ_EINVAL for an empty pool or begin > end; BLZ_ESHUTDOWN;
     *         BLZ_EFORK; BLZ_ECANCELED (see above). Or body's exception.
     */
    template <class Body>
    void parallel_for(std::size_t begin, std::size_t end, Body &&body, std::size_t grain = 0) {
        using frame_t = detail::range_frame<std::remove_reference_t<Body>>;
        frame_t frame(body);
        const blz_status status = blz_parallel_for(pool_.get(), begin, end, grain, &frame_t::run, &frame);
        frame.errors.rethrow_if_any();
        detail::check(status, "blz::pool::parallel_for");
    }

    /**
     * Calls f(worker_index) exactly once on every worker of the pool,
     * concurrently, and returns when all of them have returned
     * (blz_broadcast): to set up or flush per-worker state. A worker runs
     * it when it next looks for work, so one busy with a long job delays
     * the return. From one of the pool's own workers it does not deadlock:
     * that worker runs its own call while it waits for the others. If
     * calls threw, every worker still ran f and the first exception (in
     * time) is rethrown.
     *
     * @param f called as f(std::uint32_t worker_index) on an lvalue, on several workers at once.
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ENOMEM (f ran nowhere);
     *         BLZ_ESHUTDOWN; BLZ_EFORK. Or f's exception.
     */
    template <class F>
    void broadcast(F &&f) {
        using frame_t = detail::broadcast_frame<std::remove_reference_t<F>>;
        frame_t frame(f);
        const blz_status status = blz_broadcast(pool_.get(), &frame_t::run, &frame);
        frame.errors.rethrow_if_any();
        detail::check(status, "blz::pool::broadcast");
    }

    /**
     * A new, empty group of tasks on this pool (blz_group_create).
     * @return the group; it may outlive the pool (its spawns then throw BLZ_ESHUTDOWN).
     * @throws error BLZ_EINVAL for an empty pool; BLZ_ENOMEM; BLZ_ESHUTDOWN; BLZ_EFORK.
     */
    blz::group group() { return blz::group(pool_.get(), group_flags::none); }

    /**
     * A new, empty group of tasks on this pool, with flags
     * (blz_group_create_ex): `pool.group(blz::cancel_on_failure)` makes a
     * fail-fast group.
     * @param flags group_flags::none, or group_flags::cancel_on_failure.
     * @return the group; it may outlive the pool (its spawns then throw BLZ_ESHUTDOWN).
     * @throws error BLZ_EINVAL for an empty pool or an unknown flag; BLZ_ENOMEM;
     *         BLZ_ESHUTDOWN; BLZ_EFORK.
     */
    blz::group group(group_flags flags) { return blz::group(pool_.get(), flags); }

private:
    using handle_t = detail::unique_handle<blz_pool, detail::pool_hooks, &blz_pool_destroy>;

    // blz_pool_create from options; the hooks' std::functions go into the
    // state the handle owns, which the C hooks get as their user pointer.
    static handle_t create(pool_options options) {
        blz_pool_config config;
        blz_pool_config_init(&config);
        config.num_threads = options.num_threads;
        config.stack_size = options.stack_size;
        if (!options.thread_name.empty()) config.thread_name = options.thread_name.c_str();
        if (!options.cpu_list.empty()) config.cpu_list = options.cpu_list.c_str();
        std::unique_ptr<detail::pool_hooks> hooks;
        if (options.on_thread_start || options.on_thread_stop) {
            hooks = std::make_unique<detail::pool_hooks>();
            hooks->on_thread_start = std::move(options.on_thread_start);
            hooks->on_thread_stop = std::move(options.on_thread_stop);
            if (hooks->on_thread_start) config.on_thread_start = &detail::pool_hooks::start;
            if (hooks->on_thread_stop) config.on_thread_stop = &detail::pool_hooks::stop;
            config.user = hooks.get();
        }
        blz_pool *handle = nullptr;
        detail::check(blz_pool_create(&config, &handle), "blz::pool");
        return {handle, std::move(hooks)};  // the hooks are freed after blz_pool_destroy ran them
    }

    explicit pool(handle_t handle) noexcept : pool_(std::move(handle)) {}

    static pool_options with_threads(std::uint32_t num_threads) {
        pool_options options;
        options.num_threads = num_threads;
        return options;
    }

    handle_t pool_;
};

/**
 * Runs f() and g(), possibly in parallel, on the pool of the calling
 * worker, and returns both values: rayon::join's form, for code that does
 * not carry its pool around. pool::join's contract and results otherwise:
 * on a worker, f runs inline and g waits on the fork stack for a thief,
 * through blitz.h's inline fork path; exceptions as pool::join's.
 *
 * Off every pool's workers (a thread of the program's own), the pair runs
 * in the process pool (blz_pool_shared), as rayon::join runs in Rayon's
 * global pool: the first such join takes a reference to it that it keeps
 * for the life of the process, as Rayon keeps its global pool.
 *
 * Cheaper than pool.join on a worker: no pool to compare and none to
 * carry into the halves (bench/findings.md, issue 31).
 *
 * @param f called once on the calling thread (inline on a worker).
 * @param g called once, maybe on another worker.
 * @return the pair of f's and g's values, as pool::join's.
 * @throws error as pool::join, or f's or g's exception.
 */
template <class F, class G>
std::pair<detail::value_t<detail::result_t<F>>, detail::value_t<detail::result_t<G>>> join(F &&f, G &&g) {
#if defined(__GNUC__)
    if (blz_fork_stack *const stack = blz_fork_stack_v1; __builtin_expect(stack != nullptr, 1)) {
        return detail::join_inline(*stack, std::forward<F>(f), std::forward<G>(g));
    }
#endif
    return detail::join_through(detail::process_pool_for_join(), std::forward<F>(f), std::forward<G>(g));
}

}  // namespace blz

/*
 * ---- C++20 coroutines (0.3): blz::co ----
 *
 * Compiled where the compiler has coroutines (C++20: g++ 11 and later,
 * clang 14 and later); BLZ_HAS_COROUTINES is then 1. Everything is built
 * on the same C calls as the rest of this header.
 *
 * A coroutine of type blz::co::task<T> runs on the workers of a pool, and
 * none of its waits blocks a thread: a co_await that cannot go on at once
 * suspends the coroutine, the worker goes back to other work, and
 * whatever completes the awaited thing resumes the coroutine on its pool.
 *
 *   - co_await of another co::task: the child runs at once on the same
 *     worker, and the parent goes on where the child ends (symmetric
 *     transfer: no thread waits, the stack does not grow).
 *   - co::spawn(pool, coro): starts the coroutine on the pool and returns a
 *     co::spawned<T>, which a coroutine co_awaits (without blocking) or a
 *     plain thread joins with get().
 *   - co::when_all(spawned...): waits for many at once, with one resumption.
 *   - co_await of a blz::task (pool.spawn(f)) or of co::spawn_ex (a C task
 *     spawned by blz_spawn_ex): the task's on_done resumes the coroutine.
 *   - co_await of co::after(event), co::after(C task handle),
 *     co::after(C group) or of a blz::group: the coroutine's resumption is
 *     spawned with that predecessor (blz_spawn_options::after_events,
 *     after_tasks, after_groups, with BLZ_SPAWN_AFTER_ANY_END), so the pool
 *     queues it once the predecessor completed; the await then reads the
 *     outcome (the event's status, a join, the group's wait report).
 *
 * Resumption (the hand-off). An await parks the coroutine in a handoff
 * word; the completer (an on_done, or a spawned coroutine's end) marks the
 * word and, if a coroutine was parked, spawns its resumption onto that
 * coroutine's pool (blz_spawn), or, at a spawned coroutine's end on a
 * worker of that same pool, transfers to it directly. Either side may come
 * first: one atomic step each decides (detail::handoff), so the
 * completion is never lost and the coroutine is resumed exactly once.
 *
 * The pool a coroutine is resumed on is the pool co::spawn started it on;
 * a co::task it co_awaits inherits it. A co_await of a blz awaitable is
 * only possible in a co::task (the compiler says so otherwise).
 *
 * Exceptions: an exception leaving a coroutine travels to whoever awaits
 * it (co_await rethrows it; get() rethrows it), as a value is returned
 * (by value). One that ends a spawned coroutine also counts once in
 * blz_stats::tasks_failed (blz_fail), as an exception of a task does.
 * Cancellation (blz::cancelled, a group's cancel) does not reach into a
 * coroutine: its resumptions belong to no group.
 *
 * Lifetimes and the pool's destruction. A coroutine suspended on work of
 * its own pool (a blz::task, a C task, another coroutine spawned there) is
 * accepted work of that pool: its resumption is spawned before the awaited
 * task counts as finished, so ~pool() (blz_pool_destroy) waits for it to
 * run to its end (or its next suspension on such work), as it waits for
 * any task. A coroutine suspended on an event, a C task handle or a group
 * (co::after) has its resumption spawned already, waiting for that
 * predecessor: accepted work too, so the destroy waits until the event is
 * set (set it with BLZ_ECANCELED to release it at shutdown, and destroy
 * it only after the await returned: the await reads its status). A co::spawned<T> destroyed before its coroutine ended detaches
 * it: the coroutine runs on and frees its own frame at its end, and its
 * value or exception is dropped. A co::spawned<T> that outlives its pool
 * keeps its value: get() still returns it. The one rule: a coroutine must
 * not be suspended on another pool's work (or a spawned coroutine of
 * another pool) when its own pool is destroyed: its resumption would be
 * spawned onto a pool that is gone. If a pool refuses a resumption
 * (BLZ_ENOMEM, or BLZ_ESHUTDOWN from outside it once destroy began), the
 * coroutine is resumed on the thread that completed what it awaited,
 * rather than never.
 */
#if defined(__cpp_impl_coroutine) && __cpp_impl_coroutine >= 201902L && defined(__has_include)
#if __has_include(<coroutine>)
#define BLZ_HAS_COROUTINES 1
#endif
#endif

#if defined(BLZ_HAS_COROUTINES)
#include <coroutine>
#include <vector>

namespace blz {

/** C++20 coroutines on a pool: task, spawn, spawned, when_all, spawn_ex (see the section above). */
namespace co {

template <class T = void>
class task;
template <class T>
class spawned;

}  // namespace co

/// @cond BLZ_DETAIL
namespace detail {

#if defined(__SANITIZE_ADDRESS__)
#define BLZ_DETAIL_FRAME_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BLZ_DETAIL_FRAME_CACHE 0
#endif
#endif
#if !defined(BLZ_DETAIL_FRAME_CACHE)
#define BLZ_DETAIL_FRAME_CACHE 1
#endif

// Coroutine frames, recycled per thread: a frame is freed on the worker
// where its coroutine ended and is most often wanted again there (the next
// node of a graph, the next child of a recursion), where malloc and free
// were a quarter of a coroutine fork's instructions. Each thread keeps at
// most kKeep frames of each size class (64-byte steps up to 1 KiB; larger
// frames go to the heap each time), freed when the thread ends. A frame
// freed on another thread than its allocator's simply joins that thread's
// cache. Under AddressSanitizer every frame goes to the heap, so that a
// frame touched after its end is still reported.
class frame_cache {
public:
    static constexpr std::size_t kStep = 64;
    static constexpr std::size_t kClasses = 16;
    static constexpr unsigned kKeep = 32;

    constexpr frame_cache() noexcept = default;
    frame_cache(const frame_cache &) = delete;
    frame_cache &operator=(const frame_cache &) = delete;
    // At thread exit. A frame freed later in the exit (by another
    // thread_local's destructor) goes to the heap: `closed_` says so.
    ~frame_cache() {
        closed_ = true;
        for (std::size_t c = 0; c < kClasses; ++c) {
            while (node *n = free_[c]) {
                free_[c] = n->next;
                ::operator delete(n);
            }
        }
    }

    void *allocate(std::size_t size) {
        const std::size_t c = class_of(size);
        if (c >= kClasses) return ::operator new(size);
        if (node *n = free_[c]) {
            free_[c] = n->next;
            --count_[c];
            return n;
        }
        return ::operator new((c + 1) * kStep);
    }

    void release(void *frame, std::size_t size) noexcept {
        const std::size_t c = class_of(size);
        if (c >= kClasses || closed_) {
            ::operator delete(frame);
        } else if (count_[c] == kKeep) {
            ::operator delete(frame);
        } else {
            free_[c] = new (frame) node{free_[c]};
            ++count_[c];
        }
    }

private:
    struct node {
        node *next;
    };
    static constexpr std::size_t class_of(std::size_t size) noexcept { return (size + kStep - 1) / kStep - 1; }

    node *free_[kClasses] = {};
    unsigned count_[kClasses] = {};
    bool closed_ = false;
};

inline thread_local frame_cache t_frame_cache;

// What every co::task's promise holds besides its value.
struct promise_base {
#if BLZ_DETAIL_FRAME_CACHE
    static void *operator new(std::size_t size) { return t_frame_cache.allocate(size); }
    static void operator delete(void *frame, std::size_t size) noexcept { t_frame_cache.release(frame, size); }
#endif

    // The co::task that awaits this one, run at its end (symmetric
    // transfer); empty for a spawned coroutine, whose end goes to `end`.
    std::coroutine_handle<> continuation;
    // Where this coroutine is resumed after a wait: its co::spawn's pool,
    // or the pool of the coroutine that awaits it.
    blz_pool *pool = nullptr;
    // A spawned coroutine's end, handed to its co::spawned (unused in an
    // awaited one).
    handoff end;
    std::exception_ptr error;

    std::suspend_always initial_suspend() const noexcept { return {}; }

    void unhandled_exception() {
        std::exception_ptr e = std::current_exception();
        if (!e) throw;  // an unwind that is not a C++ exception goes on (see guard())
        // A spawned coroutine's exception counts once, as a task's does;
        // an awaited one's travels to its awaiter, which may catch it.
        if (!continuation && !is_cancellation(e)) blz_fail();
        error = std::move(e);
    }

    void rethrow_if_failed() const {
        if (error) std::rethrow_exception(error);
    }
};

// Resumes a coroutine: the job a resumption is spawned as.
inline void resume_job(void *address) { std::coroutine_handle<>::from_address(address).resume(); }

// A co::task coroutine parked in a handoff, with the pool to resume it on.
// It lives in the parked coroutine's frame: read by wake() before the
// coroutine can run again, and not after.
struct coroutine_waiter : waiter {
    coroutine_waiter() noexcept : waiter{&wake_coroutine} {}

    template <class P>
    void set(std::coroutine_handle<P> h) noexcept {
        static_assert(std::is_base_of_v<promise_base, P>,
                      "blz::co: blz awaitables are awaited in a blz::co::task coroutine");
        coroutine = h;
        pool = h.promise().pool;
    }

    std::coroutine_handle<> coroutine;
    blz_pool *pool = nullptr;

private:
    static void *wake_coroutine(waiter &self, bool may_transfer) noexcept {
        auto &w = static_cast<coroutine_waiter &>(self);
        // Copied: w is in the coroutine's frame, which may be gone once it ran.
        const std::coroutine_handle<> coroutine = w.coroutine;
        blz_pool *const pool = w.pool;
        // Already on a worker of its pool at a coroutine's end: run it next, here.
        if (may_transfer && blz_worker_index(pool) >= 0) return coroutine.address();
        if (blz_spawn(pool, &resume_job, coroutine.address(), nullptr) == BLZ_OK) return nullptr;
        // The pool refused (out of memory, or being destroyed): resumed
        // here rather than never.
        if (may_transfer) return coroutine.address();
        coroutine.resume();
        return nullptr;
    }
};

// A thread (not a coroutine) blocked until the completion: get() and
// wait_for(). The event is set once; a set that wakes the waiter may still
// be inside blz_event_set when the waiter destroys it, which blitz.h allows.
struct event_waiter : waiter {
    explicit event_waiter(blz_event *e) noexcept : waiter{&wake_event}, event(e) {}

    blz_event *event;

private:
    static void *wake_event(waiter &self, bool) noexcept {
        (void)blz_event_set(static_cast<event_waiter &>(self).event, BLZ_OK);
        return nullptr;
    }
};

// Waits for h to complete, at most timeout_ns (UINT64_MAX: for ever),
// blocking the calling thread (a worker runs other jobs meanwhile: it
// waits in blz_event_wait_for). True once completed.
inline bool block_until_done(handoff &h, std::uint64_t timeout_ns, const char *context) {
    if (h.done()) return true;
    if (timeout_ns == 0) return false;
    blz_event *event = nullptr;
    check(blz_event_create(&event), context);
    event_waiter w(event);
    bool completed = true;
    if (h.park(w)) {
        if (blz_event_wait_for(event, timeout_ns) == BLZ_ETIMEDOUT) {
            if (h.unpark(w)) {
                completed = false;
            } else {
                // The completer took w: its set comes next, and w must live until then.
                (void)blz_event_wait_for(event, std::numeric_limits<std::uint64_t>::max());
            }
        }
    }
    (void)blz_event_destroy(event);
    return completed;
}

// The end of every co::task: the awaiting co::task runs next, on this
// thread (symmetric transfer); a spawned coroutine hands its end over.
struct final_awaiter {
    bool await_ready() const noexcept { return false; }

    template <class P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> self) const noexcept {
        promise_base &promise = self.promise();
        if (promise.continuation) return promise.continuation;
        return end_spawned(self, promise.end);
    }

    void await_resume() const noexcept {}

private:
    // The coroutine is suspended: from the complete() on, its
    // co::spawned's owner may destroy it, so neither self's frame nor
    // this object is touched after it.
    static std::coroutine_handle<> end_spawned(std::coroutine_handle<> self, handoff &end) noexcept {
        const handoff::previous before = end.complete();
        if (before.detached()) {
            self.destroy();  // its co::spawned was given up: nobody else will
            return std::noop_coroutine();
        }
        void *const next = before.wake(true);
        return next != nullptr ? std::coroutine_handle<>::from_address(next) : std::noop_coroutine();
    }
};

template <class T>
struct promise final : promise_base {
    static_assert(!std::is_reference_v<T>, "blz::co::task<T>: T is returned by value");

    co::task<T> get_return_object() noexcept;
    final_awaiter final_suspend() const noexcept { return {}; }

    template <class V = T>
    void return_value(V &&v) {
        value.emplace(std::forward<V>(v));
    }
    T take() {
        rethrow_if_failed();
        return std::move(*value);
    }

    std::optional<T> value;
};

template <>
struct promise<void> final : promise_base {
    co::task<void> get_return_object() noexcept;
    final_awaiter final_suspend() const noexcept { return {}; }

    void return_void() const noexcept {}
    void take() const { rethrow_if_failed(); }
};

// Destroys a coroutine's frame at scope exit: after its value was moved
// into what the caller returns.
struct frame_guard {
    std::coroutine_handle<> frame;
    ~frame_guard() {
        if (frame) frame.destroy();
    }
};

template <class T>
struct task_awaiter {
    blz::task<T> &awaited;
    coroutine_waiter waiter;

    bool await_ready() const {
        if (!awaited.valid()) throw error(BLZ_EINVAL, "blz::task: co_await of an empty task");
        return false;
    }

    // The handle is given up (detached) first: the status comes from
    // on_done, which the state keeps, and nothing joins the task.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) {
        if (blz_task *const handle = awaited.task_.get()) {
            check(blz_task_detach(handle), "blz::task: co_await");
            awaited.task_.handle_freed();
        }
        waiter.set(h);
        return awaited.task_.state()->completion.park(waiter);
    }

    T await_resume() {
        const auto state = awaited.task_.take_state();
        if (state->error) std::rethrow_exception(state->error);
        check(state->done_status, "blz::task: co_await");
        return state->result.take();
    }
};

// One co::spawned of a when_all: counts down the fan-in, and the last
// completion resumes the awaiting coroutine.
struct fan_in {
    std::atomic<std::size_t> remaining{0};
    coroutine_waiter parent;
};

struct fan_in_waiter : waiter {
    fan_in_waiter() noexcept : waiter{&wake_fan_in} {}
    fan_in *shared = nullptr;

private:
    static void *wake_fan_in(waiter &self, bool may_transfer) noexcept {
        fan_in *const shared = static_cast<fan_in_waiter &>(self).shared;
        // acq_rel: each completion releases its child's value; the last
        // one acquires them all (the decrements form one release sequence)
        // before it resumes the parent, which reads them.
        if (shared->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return nullptr;
        return shared->parent.wake(shared->parent, may_transfer);
    }
};

// The C task of co::spawn_ex: its on_done (after the task finished)
// completes the hand-off. Two references: the native_task and on_done.
struct native_completion {
    std::atomic<int> refs{2};
    handoff end;
    blz_status status = BLZ_OK;
    blz_done_fn user_done = nullptr;
    void *user_arg = nullptr;

    void release() noexcept {
        // acq_rel: the last releaser sees every write of the other one.
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    static void done(void *arg, blz_status status) {
        auto *self = static_cast<native_completion *>(arg);
        if (self->user_done != nullptr) self->user_done(self->user_arg, status);
        self->status = status;
        (void)self->end.complete().wake(false);
        self->release();
    }
};

// Spawns a coroutine's resumption, fn(arg), onto its pool, queued once
// every predecessor named in opts has completed, whatever it ended with
// (BLZ_SPAWN_AFTER_ANY_END): nothing waits meanwhile. From the spawn on,
// the coroutine may run on another worker: the caller touches nothing of
// it (nor of an awaiter in its frame) after this call.
inline blz_status spawn_resumption_after(blz_pool *pool, blz_fn fn, void *arg, blz_spawn_options &opts) noexcept {
    opts.flags |= BLZ_SPAWN_AFTER_ANY_END;
    return blz_spawn_ex(pool, fn, arg, &opts, nullptr);
}

template <class P>
blz_pool *pool_of(std::coroutine_handle<P> h) noexcept {
    static_assert(std::is_base_of_v<promise_base, P>,
                  "blz::co: blz awaitables are awaited in a blz::co::task coroutine");
    return h.promise().pool;
}

// co::after(event): the resumption runs after the event; the await then
// reads the status the event was set with.
struct event_awaiter {
    blz_event *event;

    // Set already: no suspension.
    bool await_ready() const {
        if (event == nullptr) throw error(BLZ_EINVAL, "blz::co::after: null event");
        return blz_event_wait_for(event, 0) != BLZ_ETIMEDOUT;
    }

    template <class P>
    void await_suspend(std::coroutine_handle<P> h) const {
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        blz_event *const events[1] = {event};  // read during the spawn only
        opts.after_events = events;
        opts.num_after_events = 1;
        check(spawn_resumption_after(pool_of(h), &resume_job, h.address(), opts), "blz::co::after");
    }

    blz_status await_resume() const noexcept { return blz_event_wait_for(event, 0); }
};

// co::after(task): the resumption runs once the task finished; the await
// then joins it (at once: it has finished) and gives its status.
struct native_join_awaiter {
    blz_task *task;
    blz_status status = BLZ_OK;

    // Finished already (the poll then freed the handle), or a wait that
    // fails (BLZ_EDEADLK: the coroutine runs inside that task): no suspension.
    bool await_ready() {
        if (task == nullptr) throw error(BLZ_EINVAL, "blz::co::after: null task");
        status = blz_task_wait_for(task, 0);
        if (status == BLZ_ETIMEDOUT) return false;
        if (status != BLZ_EDEADLK && status != BLZ_EINVAL) task = nullptr;  // freed
        return true;
    }

    template <class P>
    void await_suspend(std::coroutine_handle<P> h) const {
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        blz_task *const tasks[1] = {task};
        opts.after_tasks = tasks;
        opts.num_after_tasks = 1;
        check(spawn_resumption_after(pool_of(h), &resume_job, h.address(), opts), "blz::co::after");
    }

    blz_status await_resume() noexcept {
        if (task != nullptr && status == BLZ_ETIMEDOUT) status = blz_join(std::exchange(task, nullptr));
        return status;
    }
};

// co::after(group) and co_await of a blz::group: the resumption runs once
// the group has no task left; it then polls the group as a wait of it
// would (which reports and resets it). Tasks spawned into the group after
// the resumption was queued make the poll time out: the check is queued
// again after the group, until the poll finds it empty.
struct group_awaiter {
    explicit group_awaiter(blz_group *g) noexcept : group(g) {}

    bool await_ready() {
        if (group == nullptr) throw error(BLZ_EINVAL, "blz::co::after: null group");
        status = blz_group_wait_for(group, 0);
        return status != BLZ_ETIMEDOUT;  // empty (or a wait that fails): no suspension
    }

    template <class P>
    void await_suspend(std::coroutine_handle<P> h) {
        coroutine = h;
        pool = pool_of(h);
        check(queue_check(), "blz::co::after");
    }

    blz_status await_resume() const noexcept { return status; }

    blz_group *group;
    blz_status status = BLZ_OK;

private:
    blz_status queue_check() noexcept {
        blz_spawn_options opts;
        blz_spawn_options_init(&opts);
        blz_group *const groups[1] = {group};
        opts.after_groups = groups;
        opts.num_after_groups = 1;
        return spawn_resumption_after(pool, &check_again, this, opts);
    }

    // The resumption: this awaiter lives in the suspended coroutine's frame.
    static void check_again(void *arg) {
        auto *self = static_cast<group_awaiter *>(arg);
        self->status = blz_group_wait_for(self->group, 0);
        if (self->status == BLZ_ETIMEDOUT) {
            const blz_status queued = self->queue_check();
            if (queued == BLZ_OK) return;  // `self` may be resumed and gone from here on
            self->status = queued;         // the pool refused: the await reports why
        }
        self->coroutine.resume();
    }

    std::coroutine_handle<> coroutine;
    blz_pool *pool = nullptr;
};

// co_await of a blz::group: group_awaiter, then what wait() reports.
struct cxx_group_awaiter : group_awaiter {
    explicit cxx_group_awaiter(blz::group &g)
        : group_awaiter(g.checked("blz::group: co_await")), awaited(g) {}

    void await_resume() const { awaited.finish(status, "blz::group: co_await"); }

    blz::group &awaited;
};

}  // namespace detail
/// @endcond

namespace co {

/**
 * A coroutine that returns T (by value, or void) on a pool: lazy (it does
 * not start when called), started by co::spawn or by a co_await from
 * another co::task.
 *
 * `co_await child(...)` in a co::task runs the child at once on the same
 * worker (no spawn, no thread waits) and returns its value or rethrows its
 * exception; the parent goes on where the child ends. To run children in
 * parallel, co::spawn them and co_await the co::spawned (or when_all).
 *
 * Move-only. Destroying a task that never started destroys its frame (the
 * arguments it copied); a task is awaited or spawned at most once.
 *
 * @code
 * blz::co::task<long> fib(blz::pool &pool, int n) {
 *     if (n < 2) co_return n;
 *     auto a = blz::co::spawn(pool, fib(pool, n - 1));   // in parallel
 *     long b = co_await fib(pool, n - 2);                 // here
 *     co_return co_await a + b;
 * }
 * long r = blz::co::spawn(pool, fib(pool, 30)).get();
 * @endcode
 */
template <class T>
class [[nodiscard]] task {
public:
    /** The coroutine's promise type. */
    using promise_type = detail::promise<T>;

    /** An empty task. */
    task() noexcept = default;
    /** Takes other's coroutine. @param other becomes empty. */
    task(task &&other) noexcept : frame_(std::exchange(other.frame_, {})) {}
    /** Destroys this task's coroutine (if it never started), then takes other's. @param other becomes empty. @return this. */
    task &operator=(task &&other) noexcept {
        if (this != &other) {
            reset();
            frame_ = std::exchange(other.frame_, {});
        }
        return *this;
    }
    /** Destroys the coroutine's frame if it never started (the arguments it copied go with it). */
    ~task() { reset(); }

    /** @return true if it holds a coroutine not yet awaited or spawned. */
    bool valid() const noexcept { return static_cast<bool>(frame_); }

    /// @cond BLZ_DETAIL
    // Owns the child's frame from the co_await on (the task is empty then),
    // and destroys it with the co_await's temporaries, after its value was
    // taken.
    struct awaiter {
        explicit awaiter(std::coroutine_handle<promise_type> frame) noexcept : child(frame) {}
        awaiter(awaiter &&other) noexcept : child(std::exchange(other.child, {})) {}
        awaiter &operator=(awaiter &&) = delete;
        ~awaiter() {
            if (child) child.destroy();
        }

        std::coroutine_handle<promise_type> child;

        bool await_ready() const noexcept { return !child; }

        template <class P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> parent) noexcept {
            static_assert(std::is_base_of_v<detail::promise_base, P>,
                          "blz::co::task is awaited in a blz::co::task coroutine");
            child.promise().continuation = parent;
            child.promise().pool = parent.promise().pool;
            return child;
        }

        T await_resume() {
            if (!child) throw error(BLZ_EINVAL, "blz::co::task: co_await of an empty task");
            return child.promise().take();
        }
    };
    /// @endcond

    /**
     * Runs the coroutine now, on this thread, and resumes the awaiting one
     * where it ends (`co_await std::move(t)`, or `co_await make()`); the
     * task is empty from then on.
     * @return awaiting it gives its value, or rethrows its exception;
     *         error(BLZ_EINVAL) for an empty task.
     */
    awaiter operator co_await() && noexcept { return awaiter(std::exchange(frame_, {})); }

private:
    friend struct detail::promise<T>;
    template <class U>
    friend spawned<U> spawn(blz_pool *pool, task<U> coroutine);

    explicit task(std::coroutine_handle<promise_type> frame) noexcept : frame_(frame) {}

    void reset() noexcept {
        if (frame_) std::exchange(frame_, {}).destroy();
    }

    std::coroutine_handle<promise_type> frame_;
};

/**
 * A coroutine started by co::spawn: co_await it in a co::task (the
 * awaiting coroutine is suspended until it ends, no thread waits), or
 * join it from any thread with get().
 *
 * Awaited or joined at most once: the value is moved out, and the object
 * is empty afterwards (also when that rethrew). Move-only. Destroying it
 * before the coroutine ended detaches the coroutine: it runs on and frees
 * itself at its end, its value or exception dropped (unlike blz::task,
 * whose destructor joins: a join would block a worker inside coroutine
 * code, which this layer never does).
 *
 * @tparam T what the coroutine returns (void allowed).
 */
template <class T>
class [[nodiscard]] spawned {
public:
    /** An empty object. */
    spawned() noexcept = default;
    /** Takes other's coroutine. @param other becomes empty. */
    spawned(spawned &&other) noexcept : frame_(std::exchange(other.frame_, {})) {}
    /** Detaches this object's coroutine (as the destructor does), then takes other's. @param other becomes empty. @return this. */
    spawned &operator=(spawned &&other) noexcept {
        if (this != &other) {
            release();
            frame_ = std::exchange(other.frame_, {});
        }
        return *this;
    }
    /** Detaches a coroutine that has not ended; frees one that has. */
    ~spawned() { release(); }

    /** @return true until its value is taken (get, co_await); false when empty. */
    bool valid() const noexcept { return static_cast<bool>(frame_); }

    /**
     * Whether the coroutine has ended, without waiting.
     * @return true if get() or co_await will not wait.
     * @throws error BLZ_EINVAL if empty.
     */
    bool is_ready() const { return checked("blz::co::spawned::is_ready").promise().end.done(); }

    /**
     * Waits until the coroutine has ended, blocking the calling thread (a
     * worker of a pool runs other jobs of its pool meanwhile), and returns
     * its value or rethrows its exception. For code outside coroutines (in
     * a coroutine, co_await it instead: that does not block).
     * @return the coroutine's value.
     * @throws error BLZ_EINVAL if empty; BLZ_ENOMEM. Or the coroutine's exception.
     */
    T get() {
        detail::block_until_done(checked("blz::co::spawned::get").promise().end,
                                 std::numeric_limits<std::uint64_t>::max(), "blz::co::spawned::get");
        return take();
    }

    /**
     * Waits at most timeout for the coroutine to end (as get() waits).
     * @param timeout how long; zero or negative only polls.
     * @return true if it has ended (get() then returns at once), false if not in time.
     * @throws error BLZ_EINVAL if empty; BLZ_ENOMEM. Never the coroutine's exception.
     */
    template <class Rep, class Period>
    bool wait_for(const std::chrono::duration<Rep, Period> &timeout) {
        return detail::block_until_done(checked("blz::co::spawned::wait_for").promise().end,
                                        detail::timeout_ns(timeout), "blz::co::spawned::wait_for");
    }

    /// @cond BLZ_DETAIL
    struct awaiter {
        spawned &awaited;
        detail::coroutine_waiter waiter;

        bool await_ready() const { return awaited.checked("blz::co::spawned: co_await").promise().end.done(); }

        template <class P>
        bool await_suspend(std::coroutine_handle<P> h) noexcept {
            waiter.set(h);
            return awaited.frame_.promise().end.park(waiter);
        }

        T await_resume() { return awaited.take(); }
    };
    /// @endcond

    /**
     * Suspends the awaiting co::task until the coroutine ended (`co_await s`
     * or `co_await std::move(s)`); it resumes on its own pool.
     * @return awaiting it gives the value, or rethrows the coroutine's
     *         exception; error(BLZ_EINVAL) if empty.
     */
    awaiter operator co_await() & noexcept { return awaiter{*this, {}}; }
    /** As the lvalue form. @return the awaiter. */
    awaiter operator co_await() && noexcept { return awaiter{*this, {}}; }

private:
    template <class U>
    friend spawned<U> spawn(blz_pool *pool, task<U> coroutine);
    template <class U>
    friend class when_all_awaitable;

    using frame_t = std::coroutine_handle<detail::promise<T>>;

    explicit spawned(frame_t frame) noexcept : frame_(frame) {}

    frame_t checked(const char *context) const {
        if (!frame_) throw error(BLZ_EINVAL, (std::string(context) + ": empty").c_str());
        return frame_;
    }

    // Once ended: the value (or exception) out, the frame freed.
    T take() {
        const detail::frame_guard guard{std::exchange(frame_, {})};
        return frame_t::from_address(guard.frame.address()).promise().take();
    }

    void release() noexcept {
        if (!frame_) return;
        const frame_t frame = std::exchange(frame_, {});
        // Not ended yet: the coroutine frees itself at its end.
        if (!frame.promise().end.detach()) frame.destroy();
    }

    frame_t frame_;
};

/**
 * Starts a coroutine on a pool's workers (a job spawned with blz_spawn:
 * from a worker of the pool onto its deque, from elsewhere through the
 * injector); the coroutine is resumed there after each wait.
 *
 * @param pool      the pool.
 * @param coroutine a co::task not yet started.
 * @return the co::spawned to co_await or get().
 * @throws error BLZ_EINVAL for an empty pool or task; BLZ_ENOMEM;
 *         BLZ_ESHUTDOWN; BLZ_EFORK. The coroutine does not run then
 *         (its frame is destroyed with the task).
 */
template <class T>
spawned<T> spawn(blz_pool *pool, task<T> coroutine) {
    if (!coroutine.valid()) throw error(BLZ_EINVAL, "blz::co::spawn: empty task");
    coroutine.frame_.promise().pool = pool;
    detail::check(blz_spawn(pool, &detail::resume_job, coroutine.frame_.address(), nullptr), "blz::co::spawn");
    return spawned<T>(std::exchange(coroutine.frame_, {}));
}

/**
 * co::spawn on a blz::pool.
 * @param pool      the pool.
 * @param coroutine a co::task not yet started.
 * @return the co::spawned to co_await or get().
 * @throws error as co::spawn(blz_pool *, ...).
 */
template <class T>
spawned<T> spawn(blz::pool &pool, task<T> coroutine) {
    return spawn(pool.native_handle(), std::move(coroutine));
}

/**
 * What co::when_all returns: awaiting it suspends the awaiting co::task
 * until every coroutine ended (one resumption, by the last to end).
 */
template <class T>
class [[nodiscard]] when_all_awaitable {
public:
    /** @param children the coroutines; each must be valid. */
    explicit when_all_awaitable(std::vector<spawned<T>> children)
        : children_(std::move(children)), waiters_(children_.size()) {
        for (const spawned<T> &child : children_) {
            if (!child.valid()) throw error(BLZ_EINVAL, "blz::co::when_all: empty co::spawned");
        }
        for (detail::fan_in_waiter &w : waiters_) w.shared = &fan_in_;
    }
    when_all_awaitable(when_all_awaitable &&) = delete;  // the waiters point into it

    /// @cond BLZ_DETAIL
    bool await_ready() const noexcept { return children_.empty(); }

    // One count per child and one for this call, so that the count cannot
    // reach zero (and resume the parent) before every child is parked.
    template <class P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        fan_in_.parent.set(h);
        // relaxed: the parks below (release) publish it to the completers.
        fan_in_.remaining.store(children_.size() + 1, std::memory_order_relaxed);
        std::size_t ended = 0;
        for (std::size_t i = 0; i < children_.size(); ++i) {
            if (!children_[i].frame_.promise().end.park(waiters_[i])) ++ended;
        }
        // acq_rel: as a completer's decrement; when it reaches zero here,
        // every child ended and this coroutine goes on without suspending.
        return fan_in_.remaining.fetch_sub(ended + 1, std::memory_order_acq_rel) != ended + 1;
    }

    // Every value out (frames freed), then the first exception, in order.
    auto await_resume() {
        std::exception_ptr first;
        if constexpr (std::is_void_v<T>) {
            for (spawned<T> &child : children_) take_one(child, first);
            if (first) std::rethrow_exception(first);
        } else {
            std::vector<T> values;
            values.reserve(children_.size());
            for (spawned<T> &child : children_) {
                std::optional<T> value = take_one(child, first);
                if (value) values.push_back(std::move(*value));
            }
            if (first) std::rethrow_exception(first);
            return values;
        }
    }
    /// @endcond

private:
    static auto take_one(spawned<T> &child, std::exception_ptr &first) {
        if constexpr (std::is_void_v<T>) {
            try {
                child.take();
            } catch (...) {
                if (!first) first = std::current_exception();
            }
        } else {
            std::optional<T> value;
            try {
                value.emplace(child.take());
            } catch (...) {
                if (!first) first = std::current_exception();
            }
            return value;
        }
    }

    std::vector<spawned<T>> children_;
    std::vector<detail::fan_in_waiter> waiters_;
    detail::fan_in fan_in_;
};

/**
 * Fan-in: `auto values = co_await blz::co::when_all(std::move(children));`
 * suspends the awaiting co::task until every child ended, without a
 * thread waiting and with a single resumption (by the last child to end).
 *
 * @param children coroutines from co::spawn, each valid (they are moved in).
 * @return the awaitable; awaiting it gives the values in the children's
 *         order (std::vector<T>; nothing for T = void), or, when children
 *         threw, rethrows the first exception in that order after every
 *         child ended.
 * @throws error BLZ_EINVAL for an empty co::spawned among them.
 */
template <class T>
when_all_awaitable<T> when_all(std::vector<spawned<T>> children) {
    return when_all_awaitable<T>(std::move(children));
}

/**
 * A C task spawned with blz_spawn_ex that a co::task can co_await
 * (co::spawn_ex makes one): its on_done resumes the awaiting coroutine.
 * Move-only. Destroying it without awaiting it detaches the task.
 */
class [[nodiscard]] native_task {
public:
    /** An empty object. */
    native_task() noexcept = default;
    /** Takes other's task. @param other becomes empty. */
    native_task(native_task &&other) noexcept
        : task_(std::exchange(other.task_, nullptr)), completion_(std::exchange(other.completion_, nullptr)) {}
    /** Detaches this object's task (as the destructor does), then takes other's. @param other becomes empty. @return this. */
    native_task &operator=(native_task &&other) noexcept {
        if (this != &other) {
            release();
            task_ = std::exchange(other.task_, nullptr);
            completion_ = std::exchange(other.completion_, nullptr);
        }
        return *this;
    }
    /** Detaches the task if not awaited (blz_task_detach); it runs on. */
    ~native_task() { release(); }

    /** @return the C handle until the task is awaited (for blz_task_cancel); nullptr after, or when empty. */
    blz_task *native_handle() const noexcept { return task_; }

    /// @cond BLZ_DETAIL
    struct awaiter {
        native_task &awaited;
        detail::coroutine_waiter waiter;

        bool await_ready() const {
            if (awaited.completion_ == nullptr) throw error(BLZ_EINVAL, "blz::co::native_task: co_await of an empty task");
            return false;
        }

        template <class P>
        bool await_suspend(std::coroutine_handle<P> h) {
            awaited.detach_handle();
            waiter.set(h);
            return awaited.completion_->end.park(waiter);
        }

        blz_status await_resume() noexcept {
            const blz_status status = awaited.completion_->status;
            std::exchange(awaited.completion_, nullptr)->release();
            return status;
        }
    };
    /// @endcond

    /**
     * Suspends the awaiting co::task until the task has finished, its
     * on_done included (and, if it has a group, has left it: a wait or
     * destroy of the group then does not wait for it).
     * @return awaiting it gives the task's status: BLZ_OK, BLZ_ETASK or BLZ_ECANCELED.
     */
    awaiter operator co_await() & noexcept { return awaiter{*this, {}}; }
    /** As the lvalue form. @return the awaiter. */
    awaiter operator co_await() && noexcept { return awaiter{*this, {}}; }

private:
    friend native_task spawn_ex(blz_pool *pool, blz_fn fn, void *arg, const blz_spawn_options *options);

    native_task(blz_task *task, detail::native_completion *completion) noexcept
        : task_(task), completion_(completion) {}

    void detach_handle() noexcept {
        // BLZ_EINVAL only when another thread waits for the handle, which
        // nobody else has.
        if (task_ != nullptr) (void)blz_task_detach(std::exchange(task_, nullptr));
    }

    void release() noexcept {
        detach_handle();
        if (completion_ != nullptr) std::exchange(completion_, nullptr)->release();
    }

    blz_task *task_ = nullptr;
    detail::native_completion *completion_ = nullptr;
};

/**
 * Spawns fn(arg) with blz_spawn_ex, to co_await in a co::task:
 * `blz_status s = co_await blz::co::spawn_ex(pool, fn, arg, &options);`
 *
 * The options are used as given (a group, BLZ_SPAWN_HIGH_PRIORITY, ...),
 * with two changes: on_done is this layer's (an on_done in options is
 * still called, first, with its done_arg), and BLZ_SPAWN_DONE_AFTER_FINISH
 * is set, so that the awaiting coroutine is resumed only once the task
 * has finished and left its group.
 *
 * @param pool    the pool (may be NULL when options->group is set, as in blz_spawn_ex).
 * @param fn      the function; arg must stay valid until it ran.
 * @param arg     passed to fn.
 * @param options NULL for the defaults, else options from blz_spawn_options_init.
 * @return the awaitable task.
 * @throws error with blz_spawn_ex's status when it fails (fn does not run).
 */
inline native_task spawn_ex(blz_pool *pool, blz_fn fn, void *arg, const blz_spawn_options *options = nullptr) {
    blz_spawn_options opts;
    blz_spawn_options_init(&opts);
    if (options != nullptr) {
        // The caller's layout may be an older, shorter one: its prefix.
        std::memcpy(&opts, options, std::min<std::size_t>(options->struct_size, sizeof opts));
        if (options->struct_size < sizeof opts) opts.struct_size = sizeof opts;
    }
    auto completion = std::make_unique<detail::native_completion>();
    completion->user_done = opts.on_done;
    completion->user_arg = opts.done_arg;
    opts.on_done = &detail::native_completion::done;  // releases on_done's reference
    opts.done_arg = completion.get();
    opts.flags |= BLZ_SPAWN_DONE_AFTER_FINISH;
    blz_task *task = nullptr;
    detail::check(blz_spawn_ex(pool, fn, arg, &opts, &task), "blz::co::spawn_ex");
    return native_task(task, completion.release());
}

/**
 * `blz_status s = co_await blz::co::after(event);` in a co::task: suspends
 * the coroutine until the event is set (blz_event_set, from any thread),
 * without a thread waiting: its resumption is spawned onto its pool with
 * the event as predecessor (blz_spawn_options::after_events,
 * BLZ_SPAWN_AFTER_ANY_END). An event set already does not suspend.
 *
 * The event must stay valid until the await returned (the await reads
 * the status it was set with): to release a coroutine awaiting an event
 * that will not come (at shutdown), set it with BLZ_ECANCELED, and destroy
 * it afterwards. While the coroutine waits, its resumption is accepted
 * work of its pool: the pool's destroy waits for the event's set.
 *
 * @param event the event (not NULL).
 * @return the awaitable; awaiting it gives the event's status (BLZ_OK,
 *         BLZ_ETASK or BLZ_ECANCELED).
 * @throws error (from the co_await) BLZ_EINVAL for a NULL event; the
 *         spawn's BLZ_ENOMEM, BLZ_ESHUTDOWN or BLZ_EFORK (not suspended then).
 */
inline detail::event_awaiter after(blz_event *event) noexcept { return detail::event_awaiter{event}; }

/**
 * `blz_status s = co_await blz::co::after(task);` in a co::task, for a C
 * task handle (blz_spawn, blz_spawn_ex): suspends the coroutine until the
 * task has finished (its resumption is spawned with the task as
 * predecessor, blz_spawn_options::after_tasks), then joins it: the handle
 * is freed by the await, as by blz_join, and must not be used after.
 * A task finished already does not suspend.
 *
 * @param task the handle, not joined, detached or waited for elsewhere.
 * @return the awaitable; awaiting it gives blz_join's status (BLZ_OK,
 *         BLZ_ETASK or BLZ_ECANCELED; BLZ_EDEADLK, the handle kept, when
 *         the coroutine runs inside that task).
 * @throws error (from the co_await) BLZ_EINVAL for a NULL task; the
 *         spawn's BLZ_ENOMEM, BLZ_ESHUTDOWN or BLZ_EFORK (not suspended
 *         then; the handle stays the caller's).
 */
inline detail::native_join_awaiter after(blz_task *task) noexcept { return detail::native_join_awaiter{task}; }

/**
 * `blz_status s = co_await blz::co::after(group);` in a co::task, for a C
 * group: suspends the coroutine until the group has no task left (its
 * resumption is spawned with the group as predecessor,
 * blz_spawn_options::after_groups), then reports what blz_group_wait would:
 * the group is reset, as by a wait. Tasks spawned into the group while the
 * coroutine waits are waited for too. A group with no task left does not
 * suspend. For a blz::group, `co_await group` rethrows as wait() does.
 *
 * @param group the group; it must outlive the await.
 * @return the awaitable; awaiting it gives blz_group_wait's status (BLZ_OK,
 *         BLZ_ETASK, BLZ_ECANCELED; BLZ_EDEADLK without suspending when the
 *         coroutine runs inside one of the group's tasks), or the status of
 *         a spawn of its resumption that the pool refused.
 * @throws error (from the co_await) BLZ_EINVAL for a NULL group; the
 *         first spawn's BLZ_ENOMEM, BLZ_ESHUTDOWN or BLZ_EFORK (not suspended then).
 */
inline detail::group_awaiter after(blz_group *group) noexcept { return detail::group_awaiter(group); }

}  // namespace co

/**
 * co_await of a blz::group in a co::task (`co_await group;`): suspends the
 * coroutine until every task of the group has run, without a thread
 * waiting (co::after(group)), then reports as wait() does: rethrows the
 * first exception of a task since the previous wait, else throws
 * error(BLZ_ECANCELED) if the group was cancelled; the group is reset.
 * The group must outlive the await.
 * @param g the group (not empty).
 * @return the awaiter.
 * @throws error BLZ_EINVAL for an empty group; as wait(); the spawn's
 *         BLZ_ENOMEM, BLZ_ESHUTDOWN or BLZ_EFORK.
 */
inline detail::cxx_group_awaiter operator co_await(group &g) { return detail::cxx_group_awaiter(g); }

/// @cond BLZ_DETAIL
namespace detail {

template <class T>
co::task<T> promise<T>::get_return_object() noexcept {
    return co::task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}

inline co::task<void> promise<void>::get_return_object() noexcept {
    return co::task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}

}  // namespace detail
/// @endcond

/**
 * co_await of a blz::task in a co::task (`T v = co_await pool.spawn(f);`
 * or `co_await t` for a task kept in a variable): suspends the coroutine
 * until the task ran (its on_done included) and resumes it on its own
 * pool; gives the task's value or rethrows its exception, as get() does
 * (error(BLZ_ECANCELED) for a cancelled task). The task is empty
 * afterwards. The handle is detached when the coroutine suspends, so the
 * task is never joined (and no thread waits for it).
 * @param t the task (valid).
 * @return the awaiter.
 */
template <class T>
detail::task_awaiter<T> operator co_await(task<T> &t) noexcept {
    return detail::task_awaiter<T>{t, {}};
}

/** As co_await of an lvalue task. @param t the task. @return the awaiter. */
template <class T>
detail::task_awaiter<T> operator co_await(task<T> &&t) noexcept {
    return detail::task_awaiter<T>{t, {}};
}

}  // namespace blz

#endif  // BLZ_HAS_COROUTINES

// The algorithms built on pool::join (parallel_reduce, parallel_sort) are
// in a header of their own; included here so that code written against
// 0.1 and 0.2, which found them in blitz.hpp, compiles unchanged.
#include "blitz_algorithms.hpp"

#endif  // BLITZ_HPP
