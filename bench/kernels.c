/* The workloads' inputs and sequential kernels; see kernels.h. */
#define _POSIX_C_SOURCE 200809L
#include "kernels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds_of(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_wall(void) { return seconds_of(CLOCK_MONOTONIC); }
double bench_cpu(void) { return seconds_of(CLOCK_PROCESS_CPUTIME_ID); }

void bench_sleep_until(double deadline) {
    struct timespec ts;
    ts.tv_sec = (time_t)deadline;
    ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

void bench_sleep(double seconds) { bench_sleep_until(bench_wall() + seconds); }

uint64_t bench_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void bench_fill_integers(double *x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = (double)(bench_mix64(i) % 1000);
}

void bench_fill_uniform(double *x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = (double)(bench_mix64(i) >> 11) * 0x1.0p-53;
}

uint64_t bench_hash_doubles(const double *x, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) {
        uint64_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        h = (h ^ bits) * 0x100000001B3ull;
    }
    return h;
}

uint64_t bench_fib(unsigned n) { return n < 2 ? n : bench_fib(n - 1) + bench_fib(n - 2); }

/* Builds the subtree holding values [lo, hi] at *next, advancing *next. */
static bench_node *tree_build_range(bench_node **next, int64_t lo, int64_t hi) {
    if (lo > hi) return NULL;
    int64_t mid = lo + (hi - lo) / 2;
    bench_node *node = (*next)++;
    node->value = mid;
    node->left = tree_build_range(next, lo, mid - 1);
    node->right = tree_build_range(next, mid + 1, hi);
    return node;
}

bench_node *bench_tree_build(unsigned depth) {
    int64_t count = ((int64_t)1 << depth) - 1;
    bench_node *block = malloc((size_t)count * sizeof *block);
    if (block == NULL) {
        fprintf(stderr, "bench: out of memory for a tree of depth %u\n", depth);
        exit(1);
    }
    bench_node *next = block;
    return tree_build_range(&next, 1, count);
}

void bench_tree_free(bench_node *root) { free(root); }

int64_t bench_tree_sum(const bench_node *node) {
    int64_t sum = node->value;
    if (node->left) sum += bench_tree_sum(node->left);
    if (node->right) sum += bench_tree_sum(node->right);
    return sum;
}

static double median_of_three(double a, double b, double c) {
    if (a < b) return b < c ? b : (a < c ? c : a);
    return a < c ? a : (b < c ? c : b);
}

size_t bench_qs_partition(double *a, size_t n) {
    double pivot = median_of_three(a[0], a[n / 2], a[n - 1]);
    ptrdiff_t i = -1, j = (ptrdiff_t)n;
    for (;;) {
        do ++i; while (a[i] < pivot);
        do --j; while (a[j] > pivot);
        if (i >= j) return (size_t)j + 1;
        double t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void insertion_sort(double *a, size_t n) {
    for (size_t i = 1; i < n; ++i) {
        double v = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
        a[j] = v;
    }
}

void bench_qs_sequential(double *a, size_t n) {
    while (n > 16) {  /* recurse into the smaller part, loop on the larger */
        size_t k = bench_qs_partition(a, n);
        if (k < n - k) {
            bench_qs_sequential(a, k);
            a += k;
            n -= k;
        } else {
            bench_qs_sequential(a + k, n - k);
            n = k;
        }
    }
    insertion_sort(a, n);
}

int bench_is_sorted(const double *a, size_t n) {
    for (size_t i = 1; i < n; ++i)
        if (a[i - 1] > a[i]) return 0;
    return 1;
}

static uint32_t rotl32(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

/* SHA-1 (FIPS 180-4) of a message short enough for one block (< 56 bytes). */
static void sha1_one_block(const uint8_t *message, size_t length, uint8_t digest[20]) {
    uint8_t block[64] = {0};
    memcpy(block, message, length);
    block[length] = 0x80;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; ++i) block[63 - i] = (uint8_t)(bits >> (8 * i));
    /* The message schedule in a ring of 16 words, each computed in the round
     * that uses it, and four loops of 20 rounds, one per round function.
     * gcc 12 vectorized the textbook 80-word schedule loop two words at a
     * time, each pair reloading words it had just stored (store-forwarding
     * stalls): sequential UTS T1 took 1347 ms that way, 621 ms this way,
     * and the Rust peer's kernel, then textbook too, 856 ms. The Rust peer
     * (bench/rayon/src/kernels.rs) uses the same form (719 ms), so the
     * runtimes are compared on kernels of about the same speed. */
    uint32_t w[16];
    for (int i = 0; i < 16; ++i)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
#define SHA1_WORD(i) \
    ((i) < 16 ? w[i] : (w[(i) & 15] = rotl32(w[((i) + 13) & 15] ^ w[((i) + 8) & 15] ^ w[((i) + 2) & 15] ^ w[(i) & 15], 1)))
#define SHA1_ROUND(f, k, i)                                         \
    do {                                                            \
        uint32_t t = rotl32(a, 5) + (f) + e + (k) + SHA1_WORD(i);   \
        e = d;                                                      \
        d = c;                                                      \
        c = rotl32(b, 30);                                          \
        b = a;                                                      \
        a = t;                                                      \
    } while (0)
    for (int i = 0; i < 20; ++i) SHA1_ROUND((b & c) | (~b & d), 0x5A827999u, i);
    for (int i = 20; i < 40; ++i) SHA1_ROUND(b ^ c ^ d, 0x6ED9EBA1u, i);
    for (int i = 40; i < 60; ++i) SHA1_ROUND((b & c) | (b & d) | (c & d), 0x8F1BBCDCu, i);
    for (int i = 60; i < 80; ++i) SHA1_ROUND(b ^ c ^ d, 0xCA62C1D6u, i);
#undef SHA1_ROUND
#undef SHA1_WORD
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 4; ++j) digest[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

static void put_be32(uint8_t *out, uint32_t v) {
    for (int j = 0; j < 4; ++j) out[j] = (uint8_t)(v >> (24 - 8 * j));
}

enum { UTS_ROOT_SEED = 19, UTS_MAX_CHILDREN = 100 };
static const double uts_branching = 4.0;

void bench_uts_root(bench_uts_node *root) {
    uint8_t seed[20] = {0};
    put_be32(seed + 16, UTS_ROOT_SEED);
    sha1_one_block(seed, sizeof seed, root->state);
    root->height = 0;
}

int bench_uts_children(const bench_uts_node *node, int max_depth) {
    if (node->height >= max_depth) return 0;  /* the fixed shape: no children at the maximum depth */
    double p = 1.0 / (1.0 + uts_branching);
    uint32_t r = ((uint32_t)node->state[16] << 24 | (uint32_t)node->state[17] << 16 |
                  (uint32_t)node->state[18] << 8 | node->state[19]) & 0x7FFFFFFFu;
    double u = (double)r / 2147483648.0;
    int children = (int)floor(log(1.0 - u) / log(1.0 - p));
    return children > UTS_MAX_CHILDREN ? UTS_MAX_CHILDREN : children;
}

void bench_uts_child(const bench_uts_node *parent, int index, bench_uts_node *child) {
    uint8_t message[24];
    memcpy(message, parent->state, 20);
    put_be32(message + 20, (uint32_t)index);
    sha1_one_block(message, sizeof message, child->state);
    child->height = parent->height + 1;
}

bench_uts_count bench_uts_count_node(const bench_uts_node *node, int max_depth, bench_uts_children_fn children) {
    int n = bench_uts_children(node, max_depth);
    bench_uts_count count = {1, n == 0};
    if (n > 0) bench_uts_add(&count, children(node, 0, n, max_depth));
    return count;
}

bench_uts_count bench_uts_count_child(const bench_uts_node *parent, int index, int max_depth,
                                      bench_uts_children_fn children) {
    bench_uts_node child;
    bench_uts_child(parent, index, &child);
    return bench_uts_count_node(&child, max_depth, children);
}

static bench_uts_count uts_children_in_order(const bench_uts_node *parent, int first, int last, int max_depth) {
    bench_uts_count count = {0, 0};
    for (int i = first; i < last; ++i)
        bench_uts_add(&count, bench_uts_count_child(parent, i, max_depth, uts_children_in_order));
    return count;
}

bench_uts_count bench_uts_sequential(const bench_uts_node *node, int max_depth) {
    return bench_uts_count_node(node, max_depth, uts_children_in_order);
}

static uint32_t *tiny_slots;
static size_t tiny_count;

void bench_tiny_prepare(size_t count) {
    free(tiny_slots);
    tiny_slots = calloc(count ? count : 1, sizeof *tiny_slots);
    if (tiny_slots == NULL) {
        fprintf(stderr, "bench: out of memory for %zu task slots\n", count);
        exit(1);
    }
    tiny_count = count;
}

void bench_tiny_task(size_t i) { tiny_slots[i] = (uint32_t)(i + 1); }

uint64_t bench_tiny_checksum(void) {
    uint64_t sum = 0;
    for (size_t i = 0; i < tiny_count; ++i) sum += tiny_slots[i];
    return sum;
}
