// Job: the unit the deques and the injector carry, and StackJob, the job
// that lives in the frame of the thread waiting for it (fork-join's second
// half, calls from outside the pool): no heap allocation.
#pragma once

#include <atomic>
#include <exception>

#include "fault.hpp"
#include "isolation.hpp"
#include "latch.hpp"

namespace blz {

struct Job {
    using Execute = void (*)(Job *);

    Job() = default;
    explicit Job(Execute execute_fn) : execute(execute_fn) {}

    Execute execute = nullptr;
};

// A job that can go through a pool's injector: it carries the queue's link.
// Fork-join's second half never does, and is spared the link's store.
struct QueuedJob : Job {
    QueuedJob() = default;  // the injector's stub
    explicit QueuedJob(Execute execute_fn) : Job(execute_fn) {}

    std::atomic<QueuedJob *> next{nullptr};
};

struct SpawnedJob;

// What the calling thread is working for right now, innermost first: the
// spawned tasks it runs (a task can wait, and while waiting run another
// one), and, through bridge frames, the tasks of whoever submitted a stack
// job it runs (a stolen fork-join half or a call from another thread works
// for the submitter's tasks too). Waiting for any task in this tree would
// wait for itself. Every frame lives on a stack that cannot unwind before
// the work it describes has finished.
//
// A completion frame is the task's on_done: the task has not finished yet
// (waiting for it, its group or an enclosing task from on_done would wait
// for itself), but on_done is no task's work: innermost_task() stops
// there, so blz_cancelled() is 0 in it and blz_fail() cancels no group.
// An on_done that runs after its task finished (BLZ_SPAWN_DONE_AFTER_FINISH)
// has a completion frame with no task: the task may be freed already.
struct TaskFrame {
    const SpawnedJob *task;      // nullptr in a bridge frame
    const TaskFrame *outer;      // this thread's enclosing frames
    const TaskFrame *submitter;  // bridge frames: the submitter's frames
    bool completion = false;     // on_done of `task`
};
extern constinit thread_local const TaskFrame *t_task_frames __attribute__((tls_model("initial-exec")));

// Failures reported by blz_fail, counted per thread: blz_fail adds one,
// and the boundary of the job that called it (consume_failures) compares
// the count with what it was when the job started, and puts it back, so a
// failure belongs to the innermost job around the call and to no other.
// Inline code (a fork-join half run by its forker, a parallel_for split)
// belongs to the job it runs in. Outside any job, an increment is seen by
// nobody: blz_fail does nothing there.
extern constinit thread_local uint32_t t_failures __attribute__((tls_model("initial-exec")));

// A job failed (an exception, or blz_fail): counted in the calling
// worker's pool; and if the innermost task it works for is in a group that
// cancels on failure (or the task itself does: BLZ_SPAWN_CANCEL_ON_FAILURE), it is cancelled now (fail-fast).
void job_failed();

// blz_fail's second half: the cancel-on-failure task and group, at once.
void cancel_group_on_failure();

// User code on a worker was left by an unwind that is not a C++
// exception: glibc's forced unwind (pthread_exit, or a cancellation the
// code enabled itself: workers run with cancellation disabled), or another
// language's exception. A worker cannot end inside user code: its deque,
// its sleep state and the jobs whose frames are on its stack would be
// lost, its pool's destroy would wait for it for ever, and unwinding the
// runtime's frames would leave a stack job queued on a dead frame; a
// foreign exception has no C++ object to report. So the process ends
// here, with a message on stderr. `what` names the user code ("a job").
[[noreturn]] void die_unwound_out_of(const char *what);

// Called in a catch (...) handler on a worker: stops the process unless
// the exception being handled is a C++ one. Asked through
// std::current_exception(), which is empty for an unwind that is not a C++
// exception, rather than by catching abi::__forced_unwind by reference,
// which binds the reference to no object (UBSan reports it).
inline void stop_unless_cxx_exception(const char *what) {
    if (std::current_exception()) return;
    if (BLZ_FAULT_MUTANT(kForcedUnwindEscapes)) throw;  // rethrows the unwind
    die_unwound_out_of(what);
}

// Runs user code at the runtime's boundary, on a worker: an exception is
// caught, counted, and reported as false; any other unwind stops the
// process (die_unwound_out_of).
template <class F>
bool run_guarded(F &&f) {
    try {
        f();
        return true;
    } catch (...) {
        stop_unless_cxx_exception("a job");
        job_failed();
        return false;
    }
}

// The cold half of a boundary that found a blz_fail: puts the count back
// to `before`, counts the failure unless `count` is false, returns false.
[[gnu::noinline, gnu::cold]] bool take_failures(uint32_t before, bool count);

// Runs `f` (returning true when it ended normally) as a job's boundary
// for blz_fail: false also when a blz_fail inside it was not consumed by
// an inner boundary, and then counted once. A fork-join's halves run
// inline are one job for this (`f` is the whole join); a stolen half is a
// job of its own (StackJob::run). Two loads of a thread-local when nothing
// failed. Inlined: on the fork-join path it must cost no call of its own.
template <class F>
[[gnu::always_inline]] inline bool consume_failures(F &&f) {
    const uint32_t before = t_failures;
    const bool ok = f();
    if (t_failures != before) [[unlikely]] return take_failures(before, true);
    return ok;
}

// User code as a whole job: exceptions and blz_fail both make it false,
// and it counts once even when it did both.
template <class F>
bool run_job(F &&f) {
    const uint32_t before = t_failures;
    const bool ok = run_guarded(f);  // counts an exception
    if (t_failures != before) [[unlikely]] return take_failures(before, ok);
    return ok;
}

// Runs `fn` (a callable returning true when it ended normally) on whatever
// thread takes the job, then sets the latch its waiter waits on. `Base` is
// Job, or QueuedJob for a job that goes through an injector.
template <class F, class Base = Job>
struct StackJob : Base {
    template <class G>
    StackJob(G &&f, Latch::Waiter waiter)
        : Base(&run),
          fn(static_cast<G &&>(f)),
          latch(waiter),
          submitter_frames(t_task_frames),
          isolated(t_isolation.on) {}

    F fn;
    Latch latch;
    const TaskFrame *const submitter_frames;  // valid while the submitter waits for us
    // Written by the thread that runs the job before it sets the latch, and
    // read only after the latch is seen set; when the submitter pops the job
    // back and runs fn itself, never. Left uninitialized: one store less on
    // every fork.
    bool ok;
    // Made in an isolated context: run isolated (isolation.hpp). Beside
    // `ok`, in its padding: a promoted frame's job keeps its size.
    const bool isolated;

    // Run by a thread other than the submitter (the submitter pops its own
    // job back and calls fn directly).
    static void run(Job *job) {
        auto *self = static_cast<StackJob *>(job);
        TaskFrame bridge{nullptr, t_task_frames, self->submitter_frames};
        t_task_frames = &bridge;
        // The failures of a stolen half are the thief's to find.
        self->ok = run_isolated_if(self->isolated, [self] { return consume_failures(self->fn); });
        t_task_frames = bridge.outer;
        self->latch.set();  // last access: the frame holding *self may end now
    }
};

}  // namespace blz
