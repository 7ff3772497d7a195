// The CPU quota of the process's own cgroup: how many CPUs' worth of time
// a container (or any cgroup with a CFS bandwidth limit) lets the process
// use, which the default pool size must not exceed.
//
// Where it comes from (both cgroup versions, and a hybrid of the two):
//   /proc/self/cgroup     the process's cgroup in each hierarchy: "0::PATH"
//                         for v2, "N:CONTROLLERS:PATH" for v1 (the one
//                         whose controllers include "cpu");
//   /proc/self/mountinfo  where each hierarchy is mounted, and which part
//                         of it the mount shows (its root field: inside a
//                         cgroup namespace, the container's own cgroup);
//   the limit files       v2 "cpu.max" ("QUOTA PERIOD" or "max PERIOD"),
//                         v1 "cpu.cfs_quota_us" (-1: none) and
//                         "cpu.cfs_period_us".
// A cgroup's limit also binds everything below it, so the limit is the
// smallest over the cgroup and each ancestor visible in the mount, in
// whole CPUs rounded up (1.5 CPUs of time: 2 workers, which together
// cannot use more than the quota anyway, where 1 would leave half a CPU
// idle), at least 1.
//
// Read once per call, by blz_pool_create (with num_threads 0) and
// blz_default_size: a handful of small files, nothing cached, so a quota
// changed at run time applies to the next pool.
#pragma once

#include <cstdint>
#include <string>

namespace blz {

// The limit in whole CPUs, or 0 when there is none or it cannot be read.
// `root` is prepended to every path read ("" for the real /proc and
// cgroup mounts; tests lay out a tree of their own). Never throws.
uint32_t cgroup_cpu_limit(const std::string &root = "") noexcept;

}  // namespace blz
