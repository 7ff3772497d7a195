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

/* Clocks, in seconds: CLOCK_MONOTONIC, the whole process's CPU time and
 * the calling thread's. */
double bench_wall(void);
double bench_cpu(void);
double bench_thread_cpu(void);
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

/* ---- msort: merge sort of 64-bit keys (the application workloads) ----
 * Every runtime sorts by the same recursion: split in halves, sort both
 * halves by fork-join (each into the other buffer: the buffers alternate
 * level by level, so no copy-back pass), then merge them by fork-join
 * (bench_merge_split) down to BENCH_MERGE_GRAIN output elements. Ranges of
 * at most BENCH_MSORT_GRAIN keys are sorted by bench_msort_sequential. */
#define BENCH_MSORT_GRAIN 2048
#define BENCH_MERGE_GRAIN 8192
/* a[i] = mix64(i). */
void bench_fill_keys(uint64_t *a, size_t n);
/* FNV-1a over the keys; 1 if a is in non-decreasing order. */
uint64_t bench_hash_keys(const uint64_t *a, size_t n);
int bench_keys_sorted(const uint64_t *a, size_t n);
/* Sorts the n keys of a, using b (n keys) as scratch; the sorted keys end
 * in b if to_b, else in a. Top-down merge sort, insertion sort below 16. */
void bench_msort_sequential(uint64_t *a, uint64_t *b, size_t n, int to_b);
/* Merging runs x and y into out (nx + ny keys). */
typedef struct bench_merge_job {
    const uint64_t *x, *y;
    size_t nx, ny;
    uint64_t *out;
} bench_merge_job;
/* The merge that ends a sort of a[0..n) with scratch b whose halves are
 * sorted: they are in b if to_b is 0 (the result goes to a), else in a. */
bench_merge_job bench_msort_merge_job(uint64_t *a, uint64_t *b, size_t n, int to_b);
void bench_merge_sequential(const bench_merge_job *job);
/* Splits a merge of more than BENCH_MERGE_GRAIN keys into two independent
 * merges: the middle key of the longer run and its lower bound in the
 * other run cut both runs and the output. */
void bench_merge_split(const bench_merge_job *job, bench_merge_job *left, bench_merge_job *right);

/* ---- matmul: C += A B for n x n row-major doubles ----
 * Every runtime recurses on the four quadrants of C by fork-join; inside a
 * quadrant the two halves of the k dimension run one after the other, so
 * each element of C adds its products in k order in every runtime (equal
 * bits). A job of BENCH_MM_BLOCK x BENCH_MM_BLOCK runs bench_mm_block.
 * n must be BENCH_MM_BLOCK times a power of two. */
#define BENCH_MM_BLOCK 64
typedef struct bench_mm_job {
    double *c;
    const double *a, *b;
    size_t n;   /* the block's side */
    size_t ld;  /* the row stride of all three matrices */
} bench_mm_job;
/* a[i] = mix64(i) % 1000, b[i] = mix64(n^2 + i) % 1000, c[i] = mix64(2 n^2 + i) % 1000:
 * integer-valued, so C0 + A B is exact and the driver can check it. */
void bench_fill_matrices(double *a, double *b, double *c, size_t n);
/* The part of job for output quadrant q (0 top left, 1 top right, 2 bottom
 * left, 3 bottom right) and half k (0, 1) of the inner dimension. */
bench_mm_job bench_mm_part(const bench_mm_job *job, int q, int k);
/* The kernel: C += A B on one BENCH_MM_BLOCK-sided job, plain i-k-j loops. */
void bench_mm_block(const bench_mm_job *job);
void bench_mm_sequential(const bench_mm_job *job);

/* ---- bfs: level-synchronous breadth-first search ----
 * The graph: a side x side grid (4-neighbour) plus, for each vertex v,
 * `shortcuts` undirected edges to mix64(2^40 + v * shortcuts + s) % V,
 * in CSR form, built untimed. The search from vertex 0 expands one level
 * at a time: the runtime splits the frontier by fork-join down to
 * BENCH_BFS_GRAIN vertices and runs bench_bfs_chunk on each piece, which
 * claims unseen neighbours by compare-and-swap on their level and appends
 * them to the next frontier. The checksum, vertices reached and the sum of
 * their levels, does not depend on the schedule. */
#define BENCH_BFS_GRAIN 512
typedef struct bench_graph {
    uint32_t vertices;
    size_t edges;       /* directed: each undirected edge twice */
    size_t *offsets;    /* vertices + 1 */
    uint32_t *targets;  /* edges */
} bench_graph;
void bench_graph_build(bench_graph *g, uint32_t side, uint32_t shortcuts);
void bench_graph_free(bench_graph *g);
typedef struct bench_bfs bench_bfs;  /* opaque: its level array is C11 atomics */
bench_bfs *bench_bfs_create(const bench_graph *g);
void bench_bfs_destroy(bench_bfs *s);
/* Untimed: every level unseen, the frontier {source} at level 0. */
void bench_bfs_reset(bench_bfs *s, uint32_t source);
size_t bench_bfs_frontier_size(const bench_bfs *s);
/* Expands frontier[begin, end); chunks of one level may run in parallel. */
void bench_bfs_chunk(bench_bfs *s, size_t begin, size_t end);
/* After every chunk of the level has run: the next frontier becomes the
 * current one; returns its size (0: the search is over). */
size_t bench_bfs_advance(bench_bfs *s);
void bench_bfs_sequential(bench_bfs *s);
typedef struct bench_bfs_result {
    uint64_t reached, level_sum;
    uint32_t levels;  /* non-empty frontiers */
} bench_bfs_result;
bench_bfs_result bench_bfs_summary(const bench_bfs *s);

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
