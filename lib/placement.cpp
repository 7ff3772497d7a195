#include "placement.hpp"

#include <cerrno>
#include <cstdlib>
#include <new>
#include <sched.h>
#include <unistd.h>

namespace blz {

namespace {

// One decimal CPU number at `p`: advances `p`; false when there is none or
// it is above kMaxCpuNumber.
bool read_cpu(const char *&p, uint32_t &cpu) {
    if (*p < '0' || *p > '9') return false;
    uint64_t value = 0;
    for (; *p >= '0' && *p <= '9'; ++p) {
        value = value * 10 + static_cast<uint64_t>(*p - '0');
        if (value > kMaxCpuNumber) return false;
    }
    cpu = static_cast<uint32_t>(value);
    return true;
}

// Walks the list, calling each(cpu) for every CPU in order. False when
// malformed or longer than BLZ_MAX_THREADS entries.
template <class Each>
bool for_each_cpu(const char *text, Each &&each) {
    const char *p = text;
    uint64_t entries = 0;
    for (;;) {
        uint32_t low = 0, high = 0;
        if (!read_cpu(p, low)) return false;
        high = low;
        if (*p == '-' && (!read_cpu(++p, high) || high < low)) return false;
        entries += uint64_t{high} - low + 1;
        if (entries > BLZ_MAX_THREADS) return false;
        for (uint32_t cpu = low; cpu <= high; ++cpu) each(cpu);
        if (*p != ',') break;
        ++p;  // a comma must be followed by another entry
    }
    return *p == '\0';
}

}  // namespace

bool AffinityMask::load(pid_t tid, size_t first_cpus, bool grow) {
    for (size_t cpus = first_cpus; cpus <= size_t{kMaxCpuNumber} + 1; cpus *= 2) {
        set_ = CPU_ALLOC(cpus);
        if (set_ == nullptr) return false;
        size_ = CPU_ALLOC_SIZE(cpus);
        if (sched_getaffinity(tid, size_, set_) == 0) return true;
        const int error = errno;
        release();
        if (error != EINVAL || !grow) return false;
    }
    return false;
}

AffinityMask AffinityMask::of_process(size_t first_cpus, bool grow) {
    AffinityMask mask;
    if (!mask.load(getpid(), first_cpus, grow)) mask.load(0, first_cpus, grow);
    return mask;
}

void AffinityMask::release() {
    if (set_ != nullptr) CPU_FREE(set_);
    set_ = nullptr;
    size_ = 0;
}

blz_status CpuList::parse(const char *text) {
    const AffinityMask mask = AffinityMask::of_process();
    if (!mask.loaded()) return BLZ_ENOMEM;
    bool inside = true;
    uint32_t count = 0, highest = 0;
    if (!for_each_cpu(text, [&](uint32_t cpu) {
            inside = inside && mask.contains(cpu);
            highest = cpu > highest ? cpu : highest;
            ++count;
        })) {
        return BLZ_EINVAL;
    }
    if (!inside) return BLZ_EINVAL;
    cpus_.reset(new (std::nothrow) uint32_t[count]);
    std::unique_ptr<uint64_t[]> seen(new (std::nothrow) uint64_t[highest / 64 + 1]());
    if (!cpus_ || !seen) return BLZ_ENOMEM;
    size_ = 0;
    distinct_ = 0;
    for_each_cpu(text, [&](uint32_t cpu) {
        cpus_[size_++] = cpu;
        const uint64_t bit = uint64_t{1} << (cpu % 64);
        distinct_ += (seen[cpu / 64] & bit) == 0 ? 1 : 0;
        seen[cpu / 64] |= bit;
    });
    return BLZ_OK;
}

template <class Apply>
bool CpuList::with_cpu_of(uint32_t index, Apply &&apply) const {
    if (empty()) return true;
    const uint32_t cpu = cpus_[index % size_];
    cpu_set_t *set = CPU_ALLOC(cpu + 1);
    if (set == nullptr) return false;
    const size_t size = CPU_ALLOC_SIZE(cpu + 1);
    CPU_ZERO_S(size, set);
    CPU_SET_S(cpu, size, set);
    const bool ok = apply(size, set) == 0;
    CPU_FREE(set);
    return ok;
}

bool CpuList::pin(pthread_attr_t &attr, uint32_t index) const {
    return with_cpu_of(index, [&](size_t size, cpu_set_t *set) { return pthread_attr_setaffinity_np(&attr, size, set); });
}

bool CpuList::pin_calling_thread(uint32_t index) const {
    return with_cpu_of(index, [](size_t size, cpu_set_t *set) { return pthread_setaffinity_np(pthread_self(), size, set); });
}

const char *cpu_list_text(const char *configured) {
    if (configured != nullptr) return configured;
    const char *from_env = std::getenv("BLZ_CPU_LIST");
    return from_env != nullptr && *from_env != '\0' ? from_env : nullptr;
}

}  // namespace blz
