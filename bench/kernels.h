/*
 * The workloads' inputs and sequential kernels, shared by every C and C++
 * benchmark program (libblitz, oneTBB, OpenMP, sequential) so that each
 * runtime forks the same work over the same data. bench/rayon/src/kernels.rs
 * is the Rust twin; the checksums the driver compares prove they agree.
 */
#ifndef BLZ_BENCH_KERNELS_H
#define BLZ_BENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Clocks, in seconds: CLOCK_MONOTONIC and the whole process's CPU time. */
double bench_wall(void);
double bench_cpu(void);
/* Sleeps until the CLOCK_MONOTONIC time `deadline` (seconds). */
void bench_sleep_until(double deadline);
void bench_sleep(double seconds);

/* splitmix64's finaliser: a well-mixed 64-bit value for each x. */
uint64_t bench_mix64(uint64_t x);
/* x[i] = mix64(i) % 1000: integer-valued, so every summation order is exact. */
void bench_fill_integers(double *x, size_t n);
/* x[i] uniform in [0, 1) from mix64(i) (53 bits), the sort's input. */
void bench_fill_uniform(double *x, size_t n);
/* FNV-1a over the bit patterns: equal arrays give equal checksums. */
uint64_t bench_hash_doubles(const double *x, size_t n);
/* The map workload's element function (sqrt is correctly rounded: deterministic). */
static inline double bench_map_one(double x) { return __builtin_sqrt(x) * 3.0; }

/* fib by plain recursion. */
uint64_t bench_fib(unsigned n);

/* Binary tree sum (the Spice/Chili benchmark): a perfect tree of
 * 2^depth - 1 nodes whose values are 1..N in order, so the sum is N(N+1)/2.
 * Nodes are allocated in preorder in one block (free it with bench_tree_free). */
typedef struct bench_node {
    int64_t value;
    const struct bench_node *left, *right;
} bench_node;
bench_node *bench_tree_build(unsigned depth);
void bench_tree_free(bench_node *root);
int64_t bench_tree_sum(const bench_node *node);

/* Quicksort of doubles: the parallel sorts fork the two parts of
 * bench_qs_partition and sort ranges below BENCH_QS_GRAIN sequentially. */
#define BENCH_QS_GRAIN 4096
/* Hoare partition around the median of three; n >= 3. Returns k, 1 <= k < n:
 * a[0..k) <= pivot <= a[k..n). */
size_t bench_qs_partition(double *a, size_t n);
void bench_qs_sequential(double *a, size_t n);
/* 1 if a is in non-decreasing order. */
int bench_is_sorted(const double *a, size_t n);

/* Unbalanced Tree Search, geometric tree with a fixed shape (T1: -t 1 -a 3
 * -d 10 -b 4 -r 19): each node's state is a SHA-1 digest, a child's state is
 * SHA-1(parent state, child index), and a node above the maximum depth has
 * floor(log(1 - u) / log(1 - p)) children with p = 1 / (1 + 4), u from its
 * state. With depth 10 the tree has 4130071 nodes, 3305118 of them leaves. */
typedef struct bench_uts_node {
    uint8_t state[20];
    int32_t height;
} bench_uts_node;
typedef struct bench_uts_count {
    uint64_t nodes, leaves;
} bench_uts_count;
void bench_uts_root(bench_uts_node *root);
int bench_uts_children(const bench_uts_node *node, int max_depth);
void bench_uts_child(const bench_uts_node *parent, int index, bench_uts_node *child);
/* The runtime's part of UTS: counts the subtrees of children [first, last)
 * of parent (splitting the range by its fork-join), each through
 * bench_uts_count_node. */
typedef bench_uts_count (*bench_uts_children_fn)(const bench_uts_node *parent, int first, int last, int max_depth);
/* Counts node and its subtree, handing its children to `children`. */
bench_uts_count bench_uts_count_node(const bench_uts_node *node, int max_depth, bench_uts_children_fn children);
/* bench_uts_count_node of child `index` of parent. */
bench_uts_count bench_uts_count_child(const bench_uts_node *parent, int index, int max_depth,
                                      bench_uts_children_fn children);
bench_uts_count bench_uts_sequential(const bench_uts_node *node, int max_depth);
/* Adds b into a. */
static inline void bench_uts_add(bench_uts_count *a, bench_uts_count b) {
    a->nodes += b.nodes;
    a->leaves += b.leaves;
}

/* The spawn workloads' tiny task: writes i + 1 into slot i of an array
 * (bench_tiny_prepare allocates and zeroes it), so that the tasks share no
 * counter; bench_tiny_checksum sums the slots afterwards, untimed. */
void bench_tiny_prepare(size_t count);
void bench_tiny_task(size_t i);
uint64_t bench_tiny_checksum(void);

#ifdef __cplusplus
}
#endif

#endif
