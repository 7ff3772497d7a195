// Running a piece of a fault test in a child process of its own, so that
// an abort, a crash, a sanitizer report or a hang there is a failed check
// with the child's output, not the end of the test program.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace blz_test {

struct ChildResult {
    int status = -1;     // as waitpid gives it; -1 if no child ran
    std::string output;  // what it wrote to stdout and stderr

    bool exited_cleanly() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

    // "exited with 3", "killed by Aborted".
    std::string how() const {
        if (status == -1) return "did not run";
        if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
        if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
        return "ended";
    }
};

// Forks; the child, its stdout and stderr going to a temporary file, calls
// `child()` and exits with what it returns. Fork only while the calling
// process has no other thread that could hold a lock the child needs (the
// heap's, under AddressSanitizer: tests/support.hpp).
template <class F>
ChildResult run_in_child(F &&child) {
    ChildResult result;
    char path[] = "/tmp/blz_fault_child.XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return result;
    unlink(path);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        _exit(child());
    }
    if (pid > 0) {
        while (waitpid(pid, &result.status, 0) < 0 && errno == EINTR) {
        }
    }
    char buffer[4096];
    lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) result.output.append(buffer, static_cast<size_t>(n));
    close(fd);
    return result;
}

// This program again, in a fresh process (nothing inherited but the
// environment), with `args` after its name.
template <class... Args>
ChildResult run_self(const char *name, Args... args) {
    return run_in_child([&] {
        execl("/proc/self/exe", name, args..., static_cast<char *>(nullptr));
        return 127;
    });
}

}  // namespace blz_test
