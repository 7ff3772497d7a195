#include "cpu_quota.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace blz {
namespace {

// A small file's whole text; empty if it cannot be read.
std::string read_file(const std::string &path) {
    std::string text;
    if (FILE *file = std::fopen(path.c_str(), "re")) {
        char buffer[4096];
        size_t got;
        while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, got);
        std::fclose(file);
    }
    return text;
}

std::vector<std::string> split(const std::string &text, char separator) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream stream(text);
    while (std::getline(stream, part, separator)) parts.push_back(part);
    return parts;
}

bool has_item(const std::string &list, const std::string &item) {
    for (const std::string &entry : split(list, ',')) {
        if (entry == item) return true;
    }
    return false;
}

// mountinfo escapes a space, tab, newline and backslash as \ooo (octal).
std::string unescape(const std::string &field) {
    std::string out;
    for (size_t i = 0; i < field.size(); ++i) {
        if (field[i] == '\\' && i + 3 < field.size()) {
            out += static_cast<char>(std::strtol(field.substr(i + 1, 3).c_str(), nullptr, 8));
            i += 3;
        } else {
            out += field[i];
        }
    }
    return out;
}

// Parses a non-negative decimal integer that is the whole of `text`.
bool parse_count(const std::string &text, uint64_t &out) {
    if (text.empty() || text[0] < '0' || text[0] > '9') return false;
    char *end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return false;
    out = value;
    return true;
}

// QUOTA / PERIOD in whole CPUs, rounded up; 0 for no limit or nonsense.
uint32_t whole_cpus(uint64_t quota, uint64_t period) {
    if (quota == 0 || period == 0) return 0;
    const uint64_t cpus = quota / period + (quota % period != 0 ? 1 : 0);
    return static_cast<uint32_t>(std::min<uint64_t>(cpus, UINT32_MAX));
}

std::string trimmed(const std::string &text) {
    const size_t end = text.find_last_not_of(" \t\n");
    return end == std::string::npos ? std::string() : text.substr(0, end + 1);
}

// The limit a v2 cgroup directory sets itself ("cpu.max"), or 0.
uint32_t v2_limit_at(const std::string &dir) {
    std::istringstream line(read_file(dir + "/cpu.max"));
    std::string quota, period;
    uint64_t q = 0, p = 0;
    if (!(line >> quota >> period) || quota == "max") return 0;
    return parse_count(quota, q) && parse_count(period, p) ? whole_cpus(q, p) : 0;
}

// The limit a v1 cpu cgroup directory sets itself, or 0 (a quota of -1).
uint32_t v1_limit_at(const std::string &dir) {
    uint64_t q = 0, p = 0;
    if (!parse_count(trimmed(read_file(dir + "/cpu.cfs_quota_us")), q)) return 0;
    if (!parse_count(trimmed(read_file(dir + "/cpu.cfs_period_us")), p)) return 0;
    return whole_cpus(q, p);
}

struct Mount {
    std::string root;   // the part of the hierarchy the mount shows
    std::string point;  // where it is mounted
};

// The mount of the v2 hierarchy (`v2`) or of the v1 hierarchy with the
// cpu controller; false if there is none.
bool find_mount(const std::string &mountinfo, bool v2, Mount &out) {
    for (const std::string &line : split(mountinfo, '\n')) {
        const std::vector<std::string> fields = split(line, ' ');
        // id parent dev root point options [optional...] - fstype source superoptions
        auto dash = std::find(fields.begin(), fields.end(), "-");
        if (fields.size() < 5 || dash == fields.end() || fields.end() - dash < 4) continue;
        const std::string &fstype = dash[1];
        const bool match = v2 ? fstype == "cgroup2" : fstype == "cgroup" && has_item(dash[3], "cpu");
        if (match) {
            out = Mount{unescape(fields[3]), unescape(fields[4])};
            return true;
        }
    }
    return false;
}

// The process's cgroup path in the v2 hierarchy, or in the v1 one that
// has the cpu controller; false if /proc/self/cgroup names none.
bool find_cgroup(const std::string &cgroups, bool v2, std::string &out) {
    for (const std::string &line : split(cgroups, '\n')) {
        const size_t first = line.find(':');
        const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos) continue;
        const std::string id = line.substr(0, first);
        const std::string controllers = line.substr(first + 1, second - first - 1);
        const bool match = v2 ? id == "0" && controllers.empty() : has_item(controllers, "cpu");
        if (match) {
            out = line.substr(second + 1);
            return true;
        }
    }
    return false;
}

// The smallest limit from the process's cgroup up to the top of the
// mount, in one hierarchy; 0 if none is set or the hierarchy is absent.
uint32_t limit_in(const std::string &root, const std::string &cgroups, const std::string &mountinfo, bool v2) {
    Mount mount;
    std::string path;
    if (!find_mount(mountinfo, v2, mount) || !find_cgroup(cgroups, v2, path)) return 0;
    // The mount shows the hierarchy from mount.root down: strip it from
    // the path. A path outside it (a cgroup namespace whose root is the
    // mount's) leaves the mount point itself as the process's cgroup.
    std::string relative;
    if (mount.root == "/") {
        relative = path;
    } else if (path.compare(0, mount.root.size(), mount.root) == 0) {
        relative = path.substr(mount.root.size());
    }
    if (relative == "/") relative.clear();
    uint32_t limit = 0;
    for (;;) {
        const std::string dir = root + mount.point + relative;
        const uint32_t here = v2 ? v2_limit_at(dir) : v1_limit_at(dir);
        if (here != 0) limit = limit == 0 ? here : std::min(limit, here);
        if (relative.empty()) return limit;
        relative.erase(relative.find_last_of('/'));
    }
}

}  // namespace

uint32_t cgroup_cpu_limit(const std::string &root) noexcept {
    try {
        const std::string cgroups = read_file(root + "/proc/self/cgroup");
        const std::string mountinfo = read_file(root + "/proc/self/mountinfo");
        const uint32_t v2 = limit_in(root, cgroups, mountinfo, true);
        const uint32_t v1 = limit_in(root, cgroups, mountinfo, false);
        if (v1 == 0 || v2 == 0) return std::max(v1, v2);
        return std::min(v1, v2);
    } catch (...) {  // out of memory: no limit known, as when there is none
        return 0;
    }
}

}  // namespace blz
