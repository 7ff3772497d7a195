/*
 * C kernels for the Node binding's tests, looked up by name with
 * blitz.nativeFunction(path, symbol, kind) as a user's own kernels would
 * be. Each reads and writes the memory of the TypedArray passed as `arg`;
 * the tests watch that memory from JavaScript (Atomics) while the kernels
 * run. Built by bindings/node/meson.build; the tests find it through
 * $BLITZ_NODE_TEST_KERNELS.
 */
#define _GNU_SOURCE
#include <blitz.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

static void pause_us(long us) {
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* A task that does nothing. */
void blzt_noop(void *arg) { (void)arg; }

/* A task; arg: Uint32Array, element 0 counts the calls. */
void blzt_count(void *arg) { ADD((uint32_t *)arg, 1u); }

/* A task that fails as a C kernel does, by blz_fail; counts its calls in
 * Uint32Array element 0 when arg is given. */
void blzt_fail(void *arg) {
    if (arg) ADD((uint32_t *)arg, 1u);
    blz_fail();
}

/* A task; arg: Float64Array, element 0 receives the kernel's thread id. */
void blzt_thread_id(void *arg) { ((double *)arg)[0] = (double)syscall(SYS_gettid); }

/*
 * A gate. arg: Int32Array [open, started, stopped_by_cancel, finished].
 * Counts itself started, then waits until the test opens the gate or the
 * task's group is cancelled (blz_cancelled), checking every 200 µs; a 60 s
 * guard keeps a broken test from hanging the suite.
 */
static void wait_at_gate(int32_t *g) {
    ADD(&g[1], 1);
    for (long waited = 0; waited < 60L * 1000 * 1000; waited += 200) {
        if (LOAD(&g[0]) != 0) break;
        if (blz_cancelled()) {
            ADD(&g[2], 1);
            return;
        }
        pause_us(200);
    }
    ADD(&g[3], 1);
}

void blzt_gate(void *arg) { wait_at_gate(arg); }

/* A loop body whose every piece waits at the gate (see blzt_gate). */
void blzt_gate_range(void *arg, size_t lo, size_t hi) {
    (void)lo;
    (void)hi;
    wait_at_gate(arg);
}

/* A loop body; arg: Float64Array, a[i] = i * i. */
void blzt_squares(void *arg, size_t lo, size_t hi) {
    double *a = arg;
    for (size_t i = lo; i < hi; ++i) a[i] = (double)i * (double)i;
}

/* A loop body; arg: Uint32Array, counts[i] += 1 for each index it is given. */
void blzt_mark(void *arg, size_t lo, size_t hi) {
    uint32_t *counts = arg;
    for (size_t i = lo; i < hi; ++i) ADD(&counts[i], 1u);
}

/* A loop body; arg: Uint32Array [bad, pieces]: counts its pieces, and the
 * piece that contains index `bad` fails (blz_fail). */
void blzt_fail_at(void *arg, size_t lo, size_t hi) {
    uint32_t *a = arg;
    ADD(&a[1], 1u);
    if (a[0] >= lo && a[0] < hi) blz_fail();
}

/* A task; arg: Float64Array [ms, started]: sets started to 1, then stays
 * busy for ms milliseconds, deaf to cancellation, as a kernel that never
 * polls blz_cancelled would be. */
void blzt_busy_ms(void *arg) {
    double *a = arg;
    double ms = a[0];
    double one = 1.0;
    __atomic_store(&a[1], &one, __ATOMIC_SEQ_CST);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        pause_us(500);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((double)(now.tv_sec - start.tv_sec) * 1e3 + (double)(now.tv_nsec - start.tv_nsec) / 1e6 < ms);
}

/* A loop body that waits 150 ms, then writes byte i = i mod 256 of arg for
 * each index of its piece: a kernel still using its memory well after the
 * call started (the memory-safety tests shrink or free the memory meanwhile). */
void blzt_fill_late(void *arg, size_t lo, size_t hi) {
    pause_us(150 * 1000);
    unsigned char *bytes = arg;
    for (size_t i = lo; i < hi; ++i) bytes[i] = (unsigned char)i;
}

/* Not a function at all: the symbol lookup test's wrong kind of symbol. */
int blzt_not_a_function = 42;
