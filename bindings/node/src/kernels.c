/*
 * The built-in kernels (kernels.h): CRC-32 by slicing-by-8, a parallel
 * merge sort by blz_fork_join, and the element-wise maps. Plain C, no
 * Node-API: they own nothing but the CRC tables (built once per process,
 * never freed) and touch only the memory they are handed, which their
 * caller keeps alive while they run (a call: lifetime.c).
 */
#include "kernels.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- CRC-32 (IEEE, reflected), slicing-by-8 ---- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_build(void) {
    for (uint32_t n = 0; n < 256; ++n) {
        uint32_t c = n;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; ++n) {
        for (int k = 1; k < 8; ++k) {
            uint32_t prev = crc_table[k - 1][n];
            crc_table[k][n] = (prev >> 8) ^ crc_table[0][prev & 0xFFu];
        }
    }
}

/* pthread_once: every env (main thread, each worker_thread) initialises the
 * addon, and the libuv and libblitz threads read the tables; once is enough
 * and the once-call publishes the tables to every thread that returns from it. */
void bn_crc32_init(void) { pthread_once(&crc_once, crc_build); }

uint32_t bn_crc32(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Eight bytes per step, read as one little-endian word (memcpy: the
     * buffer may be unaligned, and a word load through a cast would break
     * the aliasing rules for memory V8 wrote as bytes). */
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, sizeof w);
        uint32_t lo = (uint32_t)w ^ crc;
        uint32_t hi = (uint32_t)(w >> 32);
        crc = crc_table[7][lo & 0xFFu] ^ crc_table[6][(lo >> 8) & 0xFFu] ^
              crc_table[5][(lo >> 16) & 0xFFu] ^ crc_table[4][lo >> 24] ^
              crc_table[3][hi & 0xFFu] ^ crc_table[2][(hi >> 8) & 0xFFu] ^
              crc_table[1][(hi >> 16) & 0xFFu] ^ crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
#endif
    while (len-- > 0) crc = crc_table[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

/* ---- sort: Float64Array order ---- */

/*
 * A key whose unsigned order is the order of TypedArray sort: negative
 * numbers have their bits inverted, the others get the sign bit set, so
 * -0 (0x8000...) comes right before +0; every NaN, of either sign and any
 * payload, maps to the largest key. The doubles themselves are moved, never
 * converted, so a NaN keeps its bits.
 */
static inline uint64_t sort_key(double x) {
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) return UINT64_MAX;
    return (bits >> 63) ? ~bits : bits | 0x8000000000000000ull;
}

static void insertion_sort(double *a, size_t n) {
    for (size_t i = 1; i < n; ++i) {
        double x = a[i];
        uint64_t kx = sort_key(x);
        size_t j = i;
        while (j > 0 && sort_key(a[j - 1]) > kx) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = x;
    }
}

/* Merges the sorted runs l[0..nl) and r[0..nr) into out (which overlaps neither). */
static void merge(const double *l, size_t nl, const double *r, size_t nr, double *out) {
    size_t i = 0, j = 0, k = 0;
    while (i < nl && j < nr) out[k++] = sort_key(r[j]) < sort_key(l[i]) ? r[j++] : l[i++];
    if (i < nl) memcpy(out + k, l + i, (nl - i) * sizeof *l);
    if (j < nr) memcpy(out + k, r + j, (nr - j) * sizeof *r);
}

/*
 * Merge sort without copies back: sorts the n elements that start at a and
 * leaves the result in b when to_b, else in a; the other array is scratch.
 * The halves are sorted into the array the merge reads from.
 */
static void sort_seq(double *a, double *b, size_t n, int to_b) {
    if (n <= 16) {
        if (to_b) memcpy(b, a, n * sizeof *a);
        insertion_sort(to_b ? b : a, n);
        return;
    }
    size_t h = n / 2;
    sort_seq(a, b, h, !to_b);
    sort_seq(a + h, b + h, n - h, !to_b);
    if (to_b) {
        merge(a, h, a + h, n - h, b);
    } else {
        merge(b, h, b + h, n - h, a);
    }
}

/* Halves above this many elements are forked: about 0.3 ms of sorting each,
 * far above the cost of a steal. */
#define SORT_PAR_CUTOFF 32768

typedef struct sort_node {
    blz_pool *pool;
    double *a, *b;
    size_t n;
    int to_b;
} sort_node;

/*
 * The parallel levels. A cancelled node still puts its n elements where
 * its parent expects them (a plain copy instead of the sort or the merge),
 * so that whatever is skipped, a[] ends up a permutation of the input.
 */
static void sort_par(void *arg) {
    sort_node *s = arg;
    if (blz_cancelled()) {
        if (s->to_b) memcpy(s->b, s->a, s->n * sizeof *s->a);
        return;
    }
    if (s->n <= SORT_PAR_CUTOFF) {
        sort_seq(s->a, s->b, s->n, s->to_b);
        return;
    }
    size_t h = s->n / 2;
    sort_node left = {s->pool, s->a, s->b, h, !s->to_b};
    sort_node right = {s->pool, s->a + h, s->b + h, s->n - h, !s->to_b};
    /* Both halves are ours and never fail; a status other than BLZ_OK can
     * only be BLZ_ESHUTDOWN/BLZ_EFORK from outside the pool, and the
     * addon calls this from a task of the pool. */
    (void)blz_fork_join(s->pool, sort_par, &left, sort_par, &right);
    double *src = s->to_b ? s->a : s->b;
    double *dst = s->to_b ? s->b : s->a;
    if (blz_cancelled()) {
        memcpy(dst, src, s->n * sizeof *src);
        return;
    }
    merge(src, h, src + h, s->n - h, dst);
}

int bn_sort_f64(blz_pool *pool, double *a, double *tmp, size_t n) {
    sort_node root = {pool, a, tmp, n, 0};
    sort_par(&root);
    return blz_cancelled() ? 1 : 0;
}

/* ---- map ---- */

static inline double apply(int op, double mul, double add, double x) {
    switch (op) {
    case BN_MAP_SQRT: return sqrt(x);
    case BN_MAP_ABS: return fabs(x);
    case BN_MAP_NEGATE: return -x;
    case BN_MAP_SQUARE: return x * x;
    case BN_MAP_EXP: return exp(x);
    case BN_MAP_LOG: return log(x);
    case BN_MAP_SIN: return sin(x);
    case BN_MAP_COS: return cos(x);
    default: return x * mul + add;
    }
}

void bn_map_f64(int op, double mul, double add, const double *in, double *out, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) out[i] = apply(op, mul, add, in[i]);
}

void bn_map_f32(int op, double mul, double add, const float *in, float *out, size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) out[i] = (float)apply(op, mul, add, (double)in[i]);
}
