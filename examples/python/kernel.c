/*
 * The C kernel the Python example runs through pool.parallel_for: a
 * blz_range_fn (void kernel(void *arg, size_t lo, size_t hi)) that Python
 * passes as a blitz.RANGE_FN pointer, so the workers call it directly,
 * without the GIL. It links nothing from libblitz. Its data comes in arg,
 * so any number of calls can run at once, each on its own array.
 *
 * Each index iterates the logistic map: a dependent chain of `iterations`
 * multiply-adds, so the work per index is fixed and memory plays no part.
 */
#include <stddef.h>
#include <stdint.h>

/* What one call works on; Python passes a ctypes Structure of this layout. */
struct blitz_example_job {
    double *out;         /* written at [lo, hi) */
    size_t size;         /* the length of out */
    uint32_t iterations; /* work per index */
};

/* The blz_range_fn: fills job->out[lo .. hi). */
void blitz_example_kernel(void *arg, size_t lo, size_t hi) {
    const struct blitz_example_job *job = arg;
    if (hi > job->size) hi = job->size;
    for (size_t i = lo; i < hi; ++i) {
        double x = 0.1 + 0.8 * (double)(i % 1000) / 1000.0;
        for (uint32_t k = 0; k < job->iterations; ++k) x = 3.7 * x * (1.0 - x);
        job->out[i] = x;
    }
}
