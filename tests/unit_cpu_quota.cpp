// Unit tests of the cgroup CPU quota (lib/cpu_quota.hpp) on trees laid out
// in a temporary directory: /proc/self/cgroup, /proc/self/mountinfo and the
// limit files of cgroup v2, v1 and both, the way the kernel writes them.
// The real cgroup v1 controller is tested by tests/cpu_quota_real.c.
#include <catch2/catch.hpp>

#include <cpu_quota.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace {

namespace fs = std::filesystem;

// A fake root: every path cgroup_cpu_limit reads is under it.
class FakeRoot {
public:
    FakeRoot() {
        char name[] = "/tmp/blz-quota-XXXXXX";  // mkdtemp's template: it replaces the Xs
        if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = name;
    }
    ~FakeRoot() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    FakeRoot(const FakeRoot &) = delete;
    FakeRoot &operator=(const FakeRoot &) = delete;

    void write(const std::string &file, const std::string &text) const {
        const fs::path full = path_ + file;
        fs::create_directories(full.parent_path());
        std::ofstream(full) << text;
    }
    uint32_t limit() const { return blz::cgroup_cpu_limit(path_); }

private:
    std::string path_;
};

// A cgroup v2 system: the unified hierarchy at /sys/fs/cgroup.
constexpr const char *kV2Mounts =
    "24 29 0:22 / /proc rw,nosuid - proc proc rw\n"
    "30 29 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

// A cgroup v1 system with cpu and cpuacct co-mounted, as systemd does.
constexpr const char *kV1Mounts =
    "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:7 - cgroup cgroup rw,cpu,cpuacct\n"
    "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";

}  // namespace

TEST_CASE("cpu quota: cgroup v2 cpu.max, rounded up, smallest over the ancestors", "[unit][cpu_quota]") {
    FakeRoot root;
    root.write("/proc/self/cgroup", "0::/app.slice/job.service\n");
    root.write("/proc/self/mountinfo", kV2Mounts);
    SECTION("no file at all: no limit") { CHECK(root.limit() == 0); }
    SECTION("max: no limit") {
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "max 100000\n");
        CHECK(root.limit() == 0);
    }
    SECTION("exactly two CPUs") {
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "200000 100000\n");
        CHECK(root.limit() == 2);
    }
    SECTION("1.5 CPUs round up to 2; 0.1 to 1") {
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "150000 100000\n");
        CHECK(root.limit() == 2);
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "10000 100000\n");
        CHECK(root.limit() == 1);
    }
    SECTION("an ancestor's smaller limit binds") {
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "800000 100000\n");
        root.write("/sys/fs/cgroup/app.slice/cpu.max", "300000 100000\n");
        CHECK(root.limit() == 3);
    }
    SECTION("a larger ancestor limit does not loosen the cgroup's own") {
        root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", "100000 100000\n");
        root.write("/sys/fs/cgroup/app.slice/cpu.max", "max 100000\n");
        root.write("/sys/fs/cgroup/cpu.max", "400000 100000\n");
        CHECK(root.limit() == 1);
    }
    SECTION("nonsense is no limit") {
        for (const char *text : {"", "abc 100000\n", "100000\n", "-5 100000\n", "100000 0\n", "0 100000\n"}) {
            INFO("cpu.max: '" << text << "'");
            root.write("/sys/fs/cgroup/app.slice/job.service/cpu.max", text);
            CHECK(root.limit() == 0);
        }
    }
}

TEST_CASE("cpu quota: a container's view (cgroup namespace, the mount's root is the container's cgroup)",
          "[unit][cpu_quota]") {
    FakeRoot root;
    SECTION("v2 inside a cgroup namespace: the path is /, the mount shows the container's cgroup") {
        root.write("/proc/self/cgroup", "0::/\n");
        root.write("/proc/self/mountinfo",
                   "500 400 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
        root.write("/sys/fs/cgroup/cpu.max", "50000 100000\n");
        CHECK(root.limit() == 1);
    }
    SECTION("v1 with the host's path: the mount's root is stripped from it") {
        root.write("/proc/self/cgroup", "4:cpu,cpuacct:/docker/abc123\n");
        root.write("/proc/self/mountinfo",
                   "700 600 0:28 /docker/abc123 /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n");
        root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "250000\n");
        root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        CHECK(root.limit() == 3);
    }
    SECTION("a mount point with a space, escaped in mountinfo") {
        root.write("/proc/self/cgroup", "0::/a\n");
        root.write("/proc/self/mountinfo", "30 29 0:26 / /cg\\040two rw - cgroup2 cgroup2 rw\n");
        root.write("/cg two/a/cpu.max", "300000 100000\n");
        CHECK(root.limit() == 3);
    }
}

TEST_CASE("cpu quota: cgroup v1 cfs files, and a hybrid system takes the smaller", "[unit][cpu_quota]") {
    FakeRoot root;
    const std::string dir = "/sys/fs/cgroup/cpu,cpuacct/user.slice";
    SECTION("v1: -1 is no limit, a quota is rounded up") {
        root.write("/proc/self/cgroup", "11:memory:/user.slice\n4:cpu,cpuacct:/user.slice\n0::/user.slice\n");
        root.write("/proc/self/mountinfo", kV1Mounts);
        root.write(dir + "/cpu.cfs_period_us", "100000\n");
        root.write(dir + "/cpu.cfs_quota_us", "-1\n");
        CHECK(root.limit() == 0);
        root.write(dir + "/cpu.cfs_quota_us", "50000\n");
        CHECK(root.limit() == 1);
        root.write(dir + "/cpu.cfs_quota_us", "100001\n");
        CHECK(root.limit() == 2);
    }
    SECTION("the cpu controller is found among others, not a prefix match") {
        root.write("/proc/self/cgroup", "4:cpuacct:/user.slice\n3:cpuset:/\n");
        root.write("/proc/self/mountinfo",
                   "32 30 0:29 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n"
                   "33 30 0:30 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n");
        root.write("/sys/fs/cgroup/cpuacct/user.slice/cpu.cfs_quota_us", "50000\n");
        root.write("/sys/fs/cgroup/cpuacct/user.slice/cpu.cfs_period_us", "100000\n");
        CHECK(root.limit() == 0);  // no hierarchy has "cpu": nothing to read
    }
    SECTION("hybrid: v1's cpu and v2 both limit; the smaller wins") {
        root.write("/proc/self/cgroup", "4:cpu,cpuacct:/user.slice\n0::/user.slice\n");
        root.write("/proc/self/mountinfo",
                   std::string(kV1Mounts) +
                       "40 30 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
        root.write(dir + "/cpu.cfs_period_us", "100000\n");
        root.write(dir + "/cpu.cfs_quota_us", "400000\n");
        root.write("/sys/fs/cgroup/unified/user.slice/cpu.max", "200000 100000\n");
        CHECK(root.limit() == 2);
        root.write("/sys/fs/cgroup/unified/user.slice/cpu.max", "max 100000\n");
        CHECK(root.limit() == 4);
    }
    SECTION("unreadable /proc files: no limit") { CHECK(root.limit() == 0); }
}
