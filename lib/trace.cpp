#include "trace.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>

#include "deadline.hpp"
#include "registry.hpp"
#include "task.hpp"
#include "worker.hpp"

namespace blz {

namespace {

// Events per thread when BLZ_TRACE_BUFFER does not say: 32 MiB of address
// space per thread, made resident only as far as it is filled.
constexpr size_t kDefaultCapacity = size_t{1} << 20;

size_t capacity_from_environment() {
    const char *text = std::getenv("BLZ_TRACE_BUFFER");
    if (text == nullptr || *text == '\0') return kDefaultCapacity;
    char *end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || value < 1 || value > (1ull << 32)) return kDefaultCapacity;
    return static_cast<size_t>(value);
}

// BLZ_TRACE's path for the n-th pool of the process traced through it:
// "%p" is the process id, "%n" that number; without "%n", pools after
// the first add ".n" to the path.
std::string expand_path(const char *pattern, uint32_t n) {
    std::string path;
    bool numbered = false;
    for (const char *c = pattern; *c != '\0'; ++c) {
        if (c[0] == '%' && c[1] == 'p') {
            path += std::to_string(getpid());
            ++c;
        } else if (c[0] == '%' && c[1] == 'n') {
            path += std::to_string(n);
            numbered = true;
            ++c;
        } else {
            path += *c;
        }
    }
    if (!numbered && n > 1) {
        path += '.';
        path += std::to_string(n);
    }
    return path;
}

std::atomic<uint32_t> g_traced_pools{0};

// A readable name for a function address, and where it lives:
// {"fib_task", "app+0x1139"}. dladdr's name is taken only when the
// symbol's extent covers the address: otherwise it is merely the nearest
// exported symbol before a hidden function (libblitz's own job runners).
struct FunctionName {
    std::string name;  // empty when no symbol covers the address
    std::string where;
};

FunctionName describe_function(uint64_t address) {
    FunctionName out;
    char hex[32];
    std::snprintf(hex, sizeof(hex), "0x%" PRIx64, address);
    Dl_info info{};
    ElfW(Sym) *symbol = nullptr;
    void *addr = reinterpret_cast<void *>(static_cast<uintptr_t>(address));
    if (dladdr1(addr, &info, reinterpret_cast<void **>(&symbol), RTLD_DL_SYMENT) == 0 || info.dli_fname == nullptr) {
        out.where = hex;
        return out;
    }
    const char *file = std::strrchr(info.dli_fname, '/');
    file = file != nullptr ? file + 1 : info.dli_fname;
    char offset[40];
    std::snprintf(offset, sizeof(offset), "+0x%" PRIxPTR,
                  reinterpret_cast<uintptr_t>(addr) - reinterpret_cast<uintptr_t>(info.dli_fbase));
    out.where = std::string(*file != '\0' ? file : "main program") + offset;
    if (info.dli_sname == nullptr || symbol == nullptr) return out;
    const uintptr_t start = reinterpret_cast<uintptr_t>(info.dli_saddr);
    const uintptr_t here = reinterpret_cast<uintptr_t>(addr);
    if (here != start && here - start >= symbol->st_size) return out;
    int status = 0;
    char *demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    out.name = status == 0 && demangled != nullptr ? demangled : info.dli_sname;
    std::free(demangled);
    return out;
}

// JSON string contents: quotes, backslashes and control characters escaped.
std::string json_escaped(const std::string &text) {
    std::string out;
    for (const unsigned char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char code[8];
            std::snprintf(code, sizeof(code), "\\u%04x", c);
            out += code;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

const char *source_name(TraceKind kind) {
    switch (kind) {
        case TraceKind::kJobOwn: return "own";
        case TraceKind::kJobStolen: return "stolen";
        case TraceKind::kJobInjected: return "injected";
        case TraceKind::kJobUrgent: return "urgent";
        case TraceKind::kJobMail: return "broadcast";
        default: return nullptr;
    }
}

}  // namespace

uint64_t function_of(const Job *job) {
    // The user's function where the job's type is known to carry one;
    // otherwise the job's runner (inside libblitz for C++ closures).
    if (job->execute == &SpawnedJob::run) {
        return reinterpret_cast<uintptr_t>(static_cast<const SpawnedJob *>(job)->fn);
    }
    if (job->execute == &StackJob<CFunction>::run) {
        return reinterpret_cast<uintptr_t>(static_cast<const StackJob<CFunction> *>(job)->fn.fn);
    }
    return reinterpret_cast<uintptr_t>(job->execute);
}

TraceBuffer::TraceBuffer(size_t capacity)
    : events_(static_cast<TraceEvent *>(std::malloc(capacity * sizeof(TraceEvent)))), capacity_(capacity) {}

void TraceBuffer::Free::operator()(TraceEvent *p) const { std::free(p); }

TraceBuffer *TraceSlot::detach() {
    // seq_cst: the detacher's half of the pair in write().
    TraceBuffer *buffer = buffer_.exchange(nullptr, std::memory_order_seq_cst);
    // seq_cst: see write(); a writer that saw the buffer is waited out.
    while (writing_.load(std::memory_order_seq_cst) != 0 && !BLZ_FAULT_MUTANT(kTraceDetachSkipsWriters)) sched_yield();
    return buffer;
}

// One trace under way: its file, its clock origin and its buffers (one per
// worker, then one for the threads outside the pool).
struct Tracer::Session {
    FILE *file = nullptr;
    uint64_t start_ns = 0;
    size_t capacity = 0;  // events per buffer
    std::vector<std::unique_ptr<TraceBuffer>> buffers;

    ~Session() {
        if (file != nullptr) std::fclose(file);
    }
};

Tracer::Tracer(Registry &registry) : registry_(registry) {}

Tracer::~Tracer() = default;

// Allocation failures inside start, stop and start_from_environment are
// bad_alloc from the standard library (strings, vectors, the JSON writer):
// each is caught here and becomes BLZ_ENOMEM, with everything the call
// allocated freed by the unwind, so no exception reaches the C boundary
// and the admitted call that wraps it always leaves (blitz.h).
blz_status Tracer::start(const char *path) {
    std::lock_guard<std::mutex> lock(control_);
    if (session_ != nullptr) return BLZ_EINVAL;
    try {
        return start_session(path);
    } catch (const std::bad_alloc &) {
        return BLZ_ENOMEM;  // nothing was attached: the slots never saw the unwound session
    }
}

blz_status Tracer::start_session(const char *path) {
    auto session = std::make_unique<Session>();
    session->file = std::fopen(path, "w");
    if (session->file == nullptr) return errno == ENOMEM ? BLZ_ENOMEM : BLZ_EINVAL;  // fopen allocates its FILE
    const uint32_t n = registry_.num_threads();
    session->capacity = capacity_from_environment();
    session->buffers.reserve(n + 1);
    for (uint32_t i = 0; i <= n; ++i) {
        auto buffer = std::make_unique<TraceBuffer>(session->capacity);
        if (!buffer->ok()) return BLZ_ENOMEM;
        session->buffers.push_back(std::move(buffer));
    }
    session->start_ns = monotonic_now_ns();
    for (uint32_t i = 0; i < n; ++i) registry_.worker(i).attach_trace(session->buffers[i].get());
    outside_slot_.attach(session->buffers[n].get());
    active_.store(true, std::memory_order_relaxed);  // relaxed: a hint for woke(); the slots decide
    session_ = std::move(session);
    return BLZ_OK;
}

blz_status Tracer::stop() {
    std::lock_guard<std::mutex> lock(control_);
    if (session_ == nullptr) return BLZ_EINVAL;
    active_.store(false, std::memory_order_relaxed);  // relaxed: a hint, as above
    for (uint32_t i = 0; i < registry_.num_threads(); ++i) registry_.worker(i).detach_trace();
    outside_slot_.detach();
    std::unique_ptr<Session> session = std::move(session_);
    try {
        return write_and_close(*session);
    } catch (const std::bad_alloc &) {
        return BLZ_ENOMEM;  // the trace is over; ~Session closes the file, unfinished
    }
}

void Tracer::start_from_environment() {
    const char *pattern = std::getenv("BLZ_TRACE");
    if (pattern == nullptr || *pattern == '\0') return;
    const uint32_t n = g_traced_pools.fetch_add(1, std::memory_order_relaxed) + 1;  // relaxed: a numbering
    try {
        const std::string path = expand_path(pattern, n);
        const blz_status status = start(path.c_str());
        if (status == BLZ_OK) return;
        const char *why = status == BLZ_ENOMEM ? "out of memory" : std::strerror(errno);
        std::fprintf(stderr, "libblitz: BLZ_TRACE: cannot trace into %s: %s\n", path.c_str(), why);
    } catch (const std::bad_alloc &) {
        std::fprintf(stderr, "libblitz: BLZ_TRACE: cannot trace pool %u: out of memory\n", n);
    }
}

void Tracer::abandon() {
    // No lock: the parent's threads are gone, and one may have held it.
    session_.reset();
}

void Tracer::woke(uint32_t worker, uint64_t sleep_count) {
    if (!active_.load(std::memory_order_relaxed)) return;  // relaxed: a hint; the slot decides
    const uint64_t now = monotonic_now_ns();
    const TraceEvent event{now, now, wake_flow_id(worker, sleep_count), TraceKind::kWakeOut, sched_getcpu()};
    Worker *self = Worker::current();
    if (registry_.is_own(self)) {
        self->trace_slot().write(event);
        return;
    }
    std::lock_guard<std::mutex> lock(outside_);
    outside_slot_.write(event);
}

namespace {

// Writes the JSON: one track (tid) per worker, then the outside threads.
class TraceWriter {
public:
    TraceWriter(FILE *file, uint64_t start_ns) : file_(file), start_ns_(start_ns) {}

    void track_name(uint32_t tid, const char *name) {
        event_prefix();
        std::fprintf(file_, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"%s\"}}",
                     pid_, tid, name);
        event_prefix();
        std::fprintf(file_, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                     pid_, tid, tid);
    }

    void event(uint32_t tid, const TraceEvent &e) {
        if (const char *source = source_name(e.kind)) {
            job(tid, e, source);
            return;
        }
        switch (e.kind) {
            case TraceKind::kSearch: span(tid, e, "search", "idle", ""); break;
            case TraceKind::kSleep: span(tid, e, "sleep", "idle", ""); break;
            case TraceKind::kWakeOut: wake_out(tid, e); break;
            case TraceKind::kWakeIn: flow(tid, "f", e, ",\"bp\":\"e\""); break;
            default: break;
        }
    }

    void dropped(uint32_t tid, const TraceBuffer &buffer) {
        if (buffer.dropped() == 0) return;
        event_prefix();
        std::fprintf(file_, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"events dropped\",\"cat\":\"trace\",\"pid\":%d,"
                            "\"tid\":%u,\"ts\":%s,\"args\":{\"dropped\":%" PRIu64 "}}",
                     pid_, tid, micros(relative(buffer.first_drop_ns())).c_str(), buffer.dropped());
    }

private:
    void event_prefix() {
        std::fputs(first_ ? "\n" : ",\n", file_);
        first_ = false;
    }

    uint64_t relative(uint64_t ns) const { return ns > start_ns_ ? ns - start_ns_ : 0; }

    // Microseconds with nanosecond digits, exact (no floating point).
    static std::string micros(uint64_t ns) {
        char text[40];
        std::snprintf(text, sizeof(text), "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
        return text;
    }

    void span(uint32_t tid, const TraceEvent &e, const std::string &name, const char *category, const std::string &args) {
        const uint64_t begin = relative(e.begin_ns);
        const uint64_t end = std::max(begin, relative(e.end_ns));
        event_prefix();
        std::fprintf(file_, "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%u,\"ts\":%s,\"dur\":%s%s}",
                     json_escaped(name).c_str(), category, pid_, tid, micros(begin).c_str(),
                     micros(end - begin).c_str(), args.c_str());
    }

    void job(uint32_t tid, const TraceEvent &e, const char *source) {
        const FunctionName &fn = name_of(e.what);
        char address[24];
        std::snprintf(address, sizeof(address), "0x%" PRIx64, e.what);
        std::string args = ",\"args\":{\"source\":\"";
        args += source;
        args += "\",\"fn\":\"";
        args += address;
        args += "\",\"where\":\"";
        args += json_escaped(fn.where);
        args += "\"}";
        span(tid, e, fn.name.empty() ? "job" : fn.name, "job", args);
    }

    // A wake-up: a zero-length slice on the waker's track, for the flow's
    // start to bind to (a thread outside the pool has no other), then the flow.
    void wake_out(uint32_t tid, const TraceEvent &e) {
        const uint32_t woken = static_cast<uint32_t>(e.what >> 40);
        std::string args = ",\"args\":{\"worker\":";
        args += std::to_string(woken);
        args += ",\"cpu\":";
        args += std::to_string(e.cpu);
        args += '}';
        span(tid, e, "wake", "wake", args);
        flow(tid, "s", e, "");
    }

    // One end of a wake-up's arrow; args.cpu is the CPU that end ran on
    // (the waker's, or the woken worker's when it returned from the futex).
    void flow(uint32_t tid, const char *phase, const TraceEvent &e, const char *extra) {
        event_prefix();
        std::fprintf(file_, "{\"ph\":\"%s\",\"name\":\"wake\",\"cat\":\"wake\",\"id\":%" PRIu64
                            ",\"pid\":%d,\"tid\":%u,\"ts\":%s%s,\"args\":{\"cpu\":%d}}",
                     phase, e.what, pid_, tid, micros(relative(e.begin_ns)).c_str(), extra, e.cpu);
    }

    const FunctionName &name_of(uint64_t address) {
        auto found = names_.find(address);
        if (found == names_.end()) found = names_.emplace(address, describe_function(address)).first;
        return found->second;
    }

    FILE *file_;
    uint64_t start_ns_;
    int pid_ = getpid();
    bool first_ = true;
    std::unordered_map<uint64_t, FunctionName> names_;
};

}  // namespace

blz_status Tracer::write_and_close(Session &session) {
    const uint64_t stop_ns = monotonic_now_ns();
    const uint32_t n = registry_.num_threads();
    uint64_t dropped = 0;
    for (const auto &buffer : session.buffers) dropped += buffer->dropped();
    FILE *file = session.file;
    std::fprintf(file, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"libblitz\":\"%d.%d.%d\",\"workers\":%u,"
                       "\"clock\":\"CLOCK_MONOTONIC\",\"start_ns\":%" PRIu64 ",\"stop_ns\":%" PRIu64
                       ",\"dropped_events\":%" PRIu64,
                 BLZ_VERSION_MAJOR, BLZ_VERSION_MINOR, BLZ_VERSION_PATCH, n, session.start_ns, stop_ns, dropped);
    if (dropped != 0) {
        std::fprintf(file, ",\"note\":\"%" PRIu64 " events were dropped: a thread's buffer of %zu events was "
                           "full (BLZ_TRACE_BUFFER sets the size); the trace is incomplete after each track's "
                           "'events dropped' mark\"",
                     dropped, session.capacity);
    }
    std::fputs("},\n\"traceEvents\":[", file);
    TraceWriter writer(file, session.start_ns);
    for (uint32_t tid = 0; tid <= n; ++tid) {
        char name[32];
        if (tid < n) {
            std::snprintf(name, sizeof(name), "worker %u", tid);
        } else {
            std::snprintf(name, sizeof(name), "outside the pool");
        }
        writer.track_name(tid, name);
        const TraceBuffer &buffer = *session.buffers[tid];
        for (const TraceEvent *e = buffer.begin(); e != buffer.end(); ++e) writer.event(tid, *e);
        writer.dropped(tid, buffer);
    }
    std::fputs("\n]}\n", file);
    const bool failed = std::ferror(file) != 0;
    session.file = nullptr;
    const bool closed = std::fclose(file) == 0;
    return failed || !closed ? BLZ_EINVAL : BLZ_OK;
}

}  // namespace blz
