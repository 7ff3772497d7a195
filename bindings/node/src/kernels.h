/*
 * The built-in kernels of the Node binding: plain C that runs on libblitz
 * workers (or, for the comparisons, on libuv's threads and on the calling
 * thread). None of it touches Node-API: a kernel sees raw memory that the
 * addon keeps alive for it (lifetime.c says how).
 */
#ifndef BLITZ_NODE_KERNELS_H
#define BLITZ_NODE_KERNELS_H

#include <blitz.h>

#include <stddef.h>
#include <stdint.h>

/* Builds the CRC tables once per process; any thread, any number of times. */
void bn_crc32_init(void);

/*
 * CRC-32 with the IEEE polynomial (reflected 0xEDB88320), as zlib's
 * crc32(crc, data, len) computes it: bn_crc32(0, p, n) is zlib.crc32(p).
 * Chaining works as in zlib: bn_crc32(bn_crc32(0, a, n), b, m) is the CRC of
 * a followed by b. bn_crc32_init must have returned first.
 */
uint32_t bn_crc32(uint32_t crc, const void *data, size_t len);

/*
 * Sorts a[0..n) into the order of Float64Array.prototype.sort (ascending,
 * -0 before +0, every NaN last), using tmp[0..n) as scratch, on pool: from
 * a task of the pool, halves of more than a cutoff are forked with
 * blz_fork_join. Once the calling task's group is cancelled (blz_cancelled),
 * no further merge starts; a[] then holds a permutation of its input, not
 * sorted. Returns 1 if the sort was cut short that way, else 0.
 */
int bn_sort_f64(blz_pool *pool, double *a, double *tmp, size_t n);

/* The element-wise operations of pool.map, in the order of index.js's list. */
enum bn_map_op {
    BN_MAP_AFFINE = 0, /* x * mul + add */
    BN_MAP_SQRT,
    BN_MAP_ABS,
    BN_MAP_NEGATE,
    BN_MAP_SQUARE,
    BN_MAP_EXP,
    BN_MAP_LOG,
    BN_MAP_SIN,
    BN_MAP_COS,
    BN_MAP_COUNT
};

/*
 * out[i] = op(in[i]) for i in [lo, hi); in and out may be the same array.
 * The float version computes in double and rounds once, as
 * Math.fround(Math.op(x)) does in JavaScript.
 */
void bn_map_f64(int op, double mul, double add, const double *in, double *out, size_t lo, size_t hi);
void bn_map_f32(int op, double mul, double add, const float *in, float *out, size_t lo, size_t hi);

#endif
