// The state of the fault-injection build's pause points and mutants
// (fault.hpp); empty in the shipped library.
#include "fault.hpp"

#if defined(BLZ_FAULT_INJECTION)

namespace blz::fault {

std::atomic<Hook> g_hook{nullptr};
std::atomic<Mutant> g_mutant{Mutant::kNone};
std::atomic<int64_t> g_refuse_thread{-1};

}  // namespace blz::fault

#endif
