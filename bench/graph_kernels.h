/*
 * The graph workloads of issue 30 item 4: the inputs, the per-task kernels
 * and the sequential versions, shared by every C and C++ benchmark program
 * so that each runtime runs the same tasks in an order its dependencies
 * allow. Every dependency edge is a true data dependency, so a runtime that
 * starts a task before one of its predecessors ended computes a different
 * checksum (the driver, bench/graph.py, compares them with the sequential
 * program's).
 */
#ifndef BLZ_BENCH_GRAPH_KERNELS_H
#define BLZ_BENCH_GRAPH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 2D wavefront ----
 *
 * A square of blocks x blocks blocks; block (r, c) runs after (r-1, c) and
 * (r, c-1), so there are 2 blocks (blocks - 1) edges. Each block computes
 * its block_side x block_side cells of a grid in which every cell is a hash
 * of its upper and left neighbours (a chain of multiplies: about 4 ns per
 * cell), and its path count: the number of monotone paths from block (0, 0),
 * the sum of its two neighbours' counts (mod 2^64). With block_side 0 a block
 * computes only its path count, a few instructions: the runtime's cost per
 * task and per edge is then all there is to time. */
typedef struct bench_wave {
    uint32_t blocks;     /* per side */
    uint32_t block_side; /* cells per block side; 0: a tiny block */
    size_t side;         /* blocks * block_side: cells per grid side */
    uint64_t *cells;     /* side x side, row-major (NULL when side is 0) */
    uint64_t *paths;     /* blocks x blocks, row-major */
} bench_wave;

/* Allocates the grid; 0 on success, -1 if memory ran out. */
int bench_wave_init(bench_wave *wave, uint32_t blocks, uint32_t block_side);
void bench_wave_free(bench_wave *wave);
/* Clears every cell and count: the state before a run (the run overwrites
 * them all, so a block that ran early would read a zero and change the result). */
void bench_wave_reset(bench_wave *wave);
/* Block (row, col): its cells and its path count, from its upper and left neighbours'. */
void bench_wave_block(bench_wave *wave, uint32_t row, uint32_t col);
/* Rows in order, each left to right. */
void bench_wave_sequential(bench_wave *wave);
size_t bench_wave_edges(uint32_t blocks);
/* A hash of every cell and count. */
uint64_t bench_wave_checksum(const bench_wave *wave);

/* ---- blocked (tiled) Cholesky on doubles ----
 *
 * A = L L^T for the n x n symmetric positive definite matrix
 * A(i, j) = u(min, max) + (i == j ? n : 0), u uniform in [0, 1) from mix64,
 * stored as tiles x tiles tiles of tile x tile doubles (column-major inside
 * a tile; only the lower triangle's tiles exist). The right-looking
 * algorithm's four kernels, step k = 0 .. tiles-1:
 *   potrf(k):       L(k,k) = chol(A(k,k))
 *   trsm(k, i):     A(i,k) = A(i,k) L(k,k)^-T               (i > k)
 *   syrk(k, i):     A(i,i) -= A(i,k) A(i,k)^T               (i > k)
 *   gemm(k, i, j):  A(i,j) -= A(i,k) A(j,k)^T               (i > j > k)
 * Every kernel accumulates in a fixed order, and the updates of one tile
 * run in the order of k in every runtime (each waits for the tile's last
 * writer), so every runtime computes the same bits. */
typedef struct bench_chol {
    uint32_t n, tile, tiles;
    double **a; /* a[i * tiles + j] for i >= j, NULL above the diagonal */
} bench_chol;

/* n a multiple of tile; 0 on success, -1 if memory ran out. */
int bench_chol_init(bench_chol *chol, uint32_t n, uint32_t tile);
void bench_chol_free(bench_chol *chol);
/* Writes A (the lower triangle) into the tiles. */
void bench_chol_fill(bench_chol *chol);
/* The plain loops of the right-looking algorithm: the tasks below in their order. */
void bench_chol_sequential(bench_chol *chol);
uint64_t bench_chol_checksum(const bench_chol *chol);
/* The largest |(L L^T)(i, j) - A(i, j)| over `samples` entries of the lower
 * triangle picked by mix64, divided by n (A's diagonal is about n). */
double bench_chol_residual(const bench_chol *chol, unsigned samples);

/* The algorithm as a task graph, for the runtimes that need the edges
 * spelled out (a flow graph, a task that names its predecessors): its tasks
 * in the sequential order (a topological order) and, for each, the tasks
 * that last wrote a tile it reads or writes: the true dependencies (no task
 * writes a tile another task read before it, so none are needed against
 * readers). OpenMP finds the same edges from its depend clauses. */
enum bench_chol_kind { BENCH_CHOL_POTRF, BENCH_CHOL_TRSM, BENCH_CHOL_SYRK, BENCH_CHOL_GEMM };
enum { BENCH_CHOL_MAX_PREDECESSORS = 3 };
typedef struct bench_chol_task {
    uint8_t kind; /* enum bench_chol_kind */
    uint8_t num_predecessors;
    uint32_t k, i, j; /* as in the kernels; unused indices 0 */
    uint32_t predecessors[BENCH_CHOL_MAX_PREDECESSORS]; /* indices into tasks[] */
} bench_chol_task;
typedef struct bench_chol_graph {
    size_t num_tasks, num_edges;
    bench_chol_task *tasks;
    /* num_successors[t] and, from successor_start[t], successors[] of task t: the
     * reverse edges, for runtimes whose nodes name their successors. */
    uint32_t *num_successors, *successor_start, *successors;
} bench_chol_graph;

/* 0 on success, -1 if memory ran out. */
int bench_chol_graph_build(bench_chol_graph *graph, uint32_t tiles);
void bench_chol_graph_free(bench_chol_graph *graph);
/* Runs one task's kernel. */
void bench_chol_run(bench_chol *chol, const bench_chol_task *task);
/* The tile a task writes (OpenMP's inout dependency) and the ones it reads
 * (in): for potrf none, trsm A(k,k), syrk A(i,k), gemm A(i,k) and A(j,k). */
double *bench_chol_output(const bench_chol *chol, const bench_chol_task *task);
size_t bench_chol_inputs(const bench_chol *chol, const bench_chol_task *task, double *inputs[2]);

#ifdef __cplusplus
}
#endif

#endif
