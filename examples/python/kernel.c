/*
 * The C kernel the Python example runs through pool.parallel_for: a
 * blz_range_fn (void kernel(void *arg, size_t lo, size_t hi)) that Python
 * passes as a blitz.RANGE_FN pointer, so the workers call it directly,
 * without the GIL. It links nothing from libblitz.
 *
 * Each index iterates the logistic map: a dependent chain of `iterations`
 * multiply-adds, so the work per index is fixed and memory plays no part.
 */
#include <stddef.h>
#include <stdint.h>

static double *g_out;
static size_t g_size;
static uint32_t g_iterations;

/* Where blitz_example_kernel writes (out[0 .. size)) and how hard it works. */
void blitz_example_setup(double *out, size_t size, uint32_t iterations) {
    g_out = out;
    g_size = size;
    g_iterations = iterations;
}

/* The blz_range_fn: fills out[lo .. hi). arg is NULL (blitz passes None). */
void blitz_example_kernel(void *arg, size_t lo, size_t hi) {
    (void)arg;
    if (hi > g_size) hi = g_size;
    for (size_t i = lo; i < hi; ++i) {
        double x = 0.1 + 0.8 * (double)(i % 1000) / 1000.0;
        for (uint32_t k = 0; k < g_iterations; ++k) x = 3.7 * x * (1.0 - x);
        g_out[i] = x;
    }
}
