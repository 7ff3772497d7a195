// Files for tests that make them (traces): a directory removed with its
// files at scope exit, and reading a file back as text.
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace blz_test {

// A directory of its own under /tmp, removed with its files at scope exit.
class TempDir {
public:
    TempDir() {
        char name[] = "/tmp/blz-test-XXXXXX";  // mkdtemp's template: it replaces the Xs
        if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
        path_ = name;
    }
    ~TempDir() {
        for (const std::string &file : files()) unlink((path_ + "/" + file).c_str());
        rmdir(path_.c_str());
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;

    std::string operator/(const std::string &name) const { return path_ + "/" + name; }

    std::vector<std::string> files() const {
        std::vector<std::string> names;
        if (DIR *dir = opendir(path_.c_str())) {
            while (dirent *entry = readdir(dir)) {
                const std::string name = entry->d_name;
                if (name != "." && name != "..") names.push_back(name);
            }
            closedir(dir);
        }
        return names;
    }

private:
    std::string path_;
};

inline std::string contents_of(const std::string &path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

inline std::size_t occurrences(const std::string &text, const std::string &what) {
    std::size_t count = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
    return count;
}

}  // namespace blz_test
