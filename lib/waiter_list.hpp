// WaiterList: threads waiting until a condition that another thread makes
// true, each on a latch on its own stack. Group (its last task finishes)
// and Event (it is set) wait through it.
//
// A waiter that finds the condition false puts its latch into the list,
// under the mutex, after checking the condition again there; the thread
// that makes the condition true calls notify(), which takes the list under
// the mutex (only if the condition still holds: a group's new spawn may
// have raced in), then sets each latch after unlocking. Either the
// waiter's locked check sees the condition, or its latch is in the list
// when the notifier locks: no lost wake-up. A bounded wait that ends first
// takes its entry out of the list under the mutex; if the entry is gone,
// the notifier has taken the list and will set the latch, and the waiter
// waits for that set (its latch lives on its stack).
//
// A callback entry (Callback, for a task that runs after the event or the
// group: task.hpp's dependencies) is the same hand-off without a thread:
// add_callback() puts it in the list under the mutex unless done() holds
// there (then the caller handles the completion itself), and notify() runs
// it after unlocking, once, with the owner's status. It never leaves the
// list otherwise. Its memory is its owner's (the waiting task's) and is
// read by notify() only until its `run` is called (`next` first).
//
// Lifetime: the list lives in its owner (the Group, the Event), which the
// notifier keeps alive across notify() and every waiter across wait()
// (their references: group.hpp, event.hpp). A waiter's entry lives on the
// waiter's stack until its latch is set; the notifier reads an entry's
// `next` before setting its latch, and nothing of it after.
#pragma once

#include <cstdint>
#include <mutex>

#include "blitz.h"

#include "deadline.hpp"
#include "fault.hpp"
#include "latch.hpp"
#include "parker.hpp"

namespace blz {

class WaiterList {
public:
    // An entry that is run instead of woken: run(self, status) once.
    struct Callback {
        void (*run)(Callback *self, blz_status status) = nullptr;
        Callback *next = nullptr;
    };

    // Puts `callback` in the list (true), unless done() holds under the
    // mutex (false: nothing was added, the caller handles it).
    template <class Done>
    bool add_callback(Done &&done, Callback *callback) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (done()) return false;
        callback->next = callbacks_;
        callbacks_ = callback;
        return true;
    }

    // Waits until done() holds (true), running the pool's jobs meanwhile
    // on a worker, or until `deadline` passed first (false: the waiter is
    // out of the list). done() is read without the mutex and again under
    // it; it must say true from the notifier's change on. `tag`: what the
    // fault pause points report (tests/fault).
    template <class Done>
    bool wait(Done &&done, uint64_t deadline, [[maybe_unused]] const void *tag) {
        if (done()) return true;
        if (deadline_passed(deadline)) return false;
        Parker parker;
        Waiter waiter{Latch(Latch::current_thread(&parker)), nullptr};
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (done()) return true;
            waiter.next = head_;
            head_ = &waiter;
        }
        BLZ_FAULT_POINT(kWaiterInstalled, tag);
        if (waiter.latch.wait_until(deadline)) return true;
        BLZ_FAULT_POINT(kTimedWaitExpired, tag);
        if (BLZ_FAULT_MUTANT(kTimedWaitForgetsLatch) || withdraw(&waiter)) return false;
        waiter.latch.wait();  // the notifier took the list: its set is on the way
        return true;
    }

    // The caller just made done() true: wakes every waiter, unless done()
    // is false again under the mutex. `took` runs once the list is taken
    // and before any latch is set (a fault pause point). The callbacks then
    // run with status(), read once and only if there is one.
    template <class Done, class Took, class Status>
    void notify(Done &&done, Took &&took, Status &&status) {
        Waiter *list = nullptr;
        Callback *callbacks = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (done()) {
                list = head_;
                head_ = nullptr;
                callbacks = callbacks_;
                callbacks_ = nullptr;
            }
        }
        if (list != nullptr) took();
        while (list != nullptr) {
            Waiter *next = list->next;  // read first: the waiter's frame ends once its latch is set
            list->latch.set();
            list = next;
        }
        if (callbacks == nullptr) return;
        const blz_status outcome = status();
        while (callbacks != nullptr) {
            Callback *next = callbacks->next;  // read first: run may free the entry's task
            callbacks->run(callbacks, outcome);
            callbacks = next;
        }
    }

private:
    struct Waiter {
        Latch latch;
        Waiter *next;
    };

    // Takes `waiter` out of the list; false when the notifier already took it.
    bool withdraw(Waiter *waiter) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Waiter **link = &head_; *link != nullptr; link = &(*link)->next) {
            if (*link == waiter) {
                *link = waiter->next;
                return true;
            }
        }
        return false;
    }

    std::mutex mutex_;
    Waiter *head_ = nullptr;         // guarded by mutex_
    Callback *callbacks_ = nullptr;  // guarded by mutex_
};

}  // namespace blz
