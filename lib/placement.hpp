// Placement: the CPU list a pool's workers are pinned to (blz_pool_config's
// cpu_list, else BLZ_CPU_LIST). Worker i runs on the (i mod length)-th CPU
// of the list. The list is parsed and checked against the process's
// affinity mask before any worker starts, and then only read. Without a
// list, workers run on the process's mask, whatever the creating thread's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <pthread.h>
#include <sched.h>

#include "blitz.h"

namespace blz {

// The largest CPU number a list may name: AffinityMask gives up beyond it,
// and so no CPU above it can be in the mask.
inline constexpr uint32_t kMaxCpuNumber = (uint32_t{1} << 20) - 1;

// An affinity mask, in a buffer of `first_cpus` CPUs grown (`grow`) until
// the kernel accepts it: its own mask's size depends on CONFIG_NR_CPUS,
// more than 1024 on large machines.
class AffinityMask {
public:
    // The calling thread's mask.
    AffinityMask(size_t first_cpus, bool grow) { load(0, first_cpus, grow); }
    // The process's: its main thread's, which taskset, numactl and MPI
    // launchers set for the whole process (a thread pinned later, a worker
    // of a pinned pool say, does not change it). The calling thread's when
    // the main thread's cannot be read (it has exited).
    static AffinityMask of_process(size_t first_cpus = 1024, bool grow = true);
    ~AffinityMask() { release(); }
    AffinityMask(const AffinityMask &) = delete;
    AffinityMask &operator=(const AffinityMask &) = delete;
    AffinityMask(AffinityMask &&other) noexcept : set_(other.set_), size_(other.size_) {
        other.set_ = nullptr;
        other.size_ = 0;
    }

    bool loaded() const { return set_ != nullptr; }
    bool contains(uint32_t cpu) const { return cpu < size_ * 8 && CPU_ISSET_S(cpu, size_, set_); }
    uint32_t count() const { return loaded() ? static_cast<uint32_t>(CPU_COUNT_S(size_, set_)) : 0; }

    // Gives this mask to a thread about to be created, or to the calling
    // thread. False when not loaded or refused.
    bool apply(pthread_attr_t &attr) const { return loaded() && pthread_attr_setaffinity_np(&attr, size_, set_) == 0; }
    bool apply_to_calling_thread() const {
        return loaded() && pthread_setaffinity_np(pthread_self(), size_, set_) == 0;
    }

private:
    AffinityMask() = default;
    // sched_getaffinity(tid); false (nothing loaded) if it failed.
    bool load(pid_t tid, size_t first_cpus, bool grow);
    void release();
    cpu_set_t *set_ = nullptr;
    size_t size_ = 0;
};

class CpuList {
public:
    // Parses `text` ("0-3,8-11": numbers and low-high ranges, comma
    // separated) and checks every CPU against the process's affinity
    // mask. BLZ_OK, BLZ_EINVAL (malformed, a CPU outside the mask, more
    // than BLZ_MAX_THREADS entries) or BLZ_ENOMEM.
    blz_status parse(const char *text);

    bool empty() const { return size_ == 0; }
    uint32_t size() const { return size_; }
    // The distinct CPUs in the list: how many workers can run at once.
    uint32_t distinct() const { return distinct_; }

    // Sets `attr` to pin worker `index` (a no-op for an empty list). False
    // when the platform refused it or memory ran out.
    bool pin(pthread_attr_t &attr, uint32_t index) const;
    // The same for the calling thread, a worker the embedder started
    // (blz_pool_config.spawn_thread).
    bool pin_calling_thread(uint32_t index) const;

private:
    // apply(size, set) with worker `index`'s CPU alone in the set; true if it returned 0.
    template <class Apply>
    bool with_cpu_of(uint32_t index, Apply &&apply) const;

    std::unique_ptr<uint32_t[]> cpus_;
    uint32_t size_ = 0;
    uint32_t distinct_ = 0;
};

// The list a pool uses: `configured` if not NULL, else BLZ_CPU_LIST if set
// and not empty, else NULL (no pinning).
const char *cpu_list_text(const char *configured);

}  // namespace blz
