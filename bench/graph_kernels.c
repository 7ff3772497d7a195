/* The graph workloads' inputs, kernels and sequential versions; see graph_kernels.h. */
#include "graph_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- 2D wavefront ---- */

int bench_wave_init(bench_wave *wave, uint32_t blocks, uint32_t block_side) {
    wave->blocks = blocks;
    wave->block_side = block_side;
    wave->side = (size_t)blocks * block_side;
    wave->cells = wave->side ? malloc(wave->side * wave->side * sizeof *wave->cells) : NULL;
    wave->paths = malloc((size_t)blocks * blocks * sizeof *wave->paths);
    if ((wave->side && wave->cells == NULL) || wave->paths == NULL) {
        bench_wave_free(wave);
        return -1;
    }
    bench_wave_reset(wave);
    return 0;
}

void bench_wave_free(bench_wave *wave) {
    free(wave->cells);
    free(wave->paths);
    wave->cells = NULL;
    wave->paths = NULL;
}

void bench_wave_reset(bench_wave *wave) {
    if (wave->cells) memset(wave->cells, 0, wave->side * wave->side * sizeof *wave->cells);
    memset(wave->paths, 0, (size_t)wave->blocks * wave->blocks * sizeof *wave->paths);
}

/* The cells of one block, row by row: each a hash of its upper and left
 * neighbours (fixed seeds on the grid's top row and left column). */
static void wave_cells(bench_wave *wave, size_t row0, size_t col0) {
    size_t side = wave->side, bs = wave->block_side;
    for (size_t y = row0; y < row0 + bs; ++y) {
        uint64_t *line = wave->cells + y * side;
        uint64_t left = col0 > 0 ? line[col0 - 1] : bench_mix64(~(uint64_t)y);
        for (size_t x = col0; x < col0 + bs; ++x) {
            uint64_t up = y > 0 ? line[x - side] : bench_mix64(x);
            left = bench_mix64(up + 3 * left);
            line[x] = left;
        }
    }
}

void bench_wave_block(bench_wave *wave, uint32_t row, uint32_t col) {
    size_t blocks = wave->blocks;
    uint64_t *here = wave->paths + row * blocks + col;
    uint64_t up = row > 0 ? here[-(ptrdiff_t)blocks] : 0, left = col > 0 ? here[-1] : 0;
    *here = (row == 0 && col == 0) ? 1 : up + left;
    if (wave->block_side) wave_cells(wave, (size_t)row * wave->block_side, (size_t)col * wave->block_side);
}

void bench_wave_sequential(bench_wave *wave) {
    for (uint32_t row = 0; row < wave->blocks; ++row)
        for (uint32_t col = 0; col < wave->blocks; ++col) bench_wave_block(wave, row, col);
}

size_t bench_wave_edges(uint32_t blocks) { return blocks ? 2 * (size_t)blocks * (blocks - 1) : 0; }

uint64_t bench_wave_checksum(const bench_wave *wave) {
    uint64_t h = bench_hash_keys(wave->paths, (size_t)wave->blocks * wave->blocks);
    if (wave->cells) h = bench_mix64(h ^ bench_hash_keys(wave->cells, wave->side * wave->side));
    return h;
}

/* ---- blocked Cholesky ---- */

static double *tile_at(const bench_chol *chol, uint32_t i, uint32_t j) { return chol->a[(size_t)i * chol->tiles + j]; }

int bench_chol_init(bench_chol *chol, uint32_t n, uint32_t tile) {
    chol->n = n;
    chol->tile = tile;
    chol->tiles = n / tile;
    size_t count = (size_t)chol->tiles * chol->tiles;
    chol->a = calloc(count ? count : 1, sizeof *chol->a);
    if (chol->a == NULL) return -1;
    for (uint32_t i = 0; i < chol->tiles; ++i)
        for (uint32_t j = 0; j <= i; ++j) {
            double **slot = &chol->a[(size_t)i * chol->tiles + j];
            *slot = malloc((size_t)tile * tile * sizeof **slot);
            if (*slot == NULL) {
                bench_chol_free(chol);
                return -1;
            }
        }
    return 0;
}

void bench_chol_free(bench_chol *chol) {
    if (chol->a)
        for (size_t t = 0; t < (size_t)chol->tiles * chol->tiles; ++t) free(chol->a[t]);
    free(chol->a);
    chol->a = NULL;
}

/* A(i, j), i >= j. */
static double chol_input(uint32_t n, uint32_t i, uint32_t j) {
    double u = (double)(bench_mix64(((uint64_t)i << 32) | j) >> 11) * 0x1.0p-53;
    return i == j ? u + n : u;
}

void bench_chol_fill(bench_chol *chol) {
    uint32_t ts = chol->tile;
    for (uint32_t ti = 0; ti < chol->tiles; ++ti)
        for (uint32_t tj = 0; tj <= ti; ++tj) {
            double *t = tile_at(chol, ti, tj);
            for (uint32_t c = 0; c < ts; ++c)
                for (uint32_t r = 0; r < ts; ++r) {
                    uint32_t i = ti * ts + r, j = tj * ts + c;
                    /* The diagonal tiles' upper part mirrors the lower (potrf never reads it). */
                    t[(size_t)c * ts + r] = i >= j ? chol_input(chol->n, i, j) : chol_input(chol->n, j, i);
                }
        }
}

/* The kernels, column-major tiles (element (r, c) at t[c * ts + r]): every
 * inner loop runs down a column, so gcc vectorizes it without reordering
 * any element's sums. */

static void kernel_potrf(double *t, uint32_t ts) {
    for (uint32_t j = 0; j < ts; ++j) {
        double *col = t + (size_t)j * ts;
        for (uint32_t p = 0; p < j; ++p) {
            const double *earlier = t + (size_t)p * ts;
            double l = earlier[j];
            for (uint32_t r = j; r < ts; ++r) col[r] -= earlier[r] * l;
        }
        double d = sqrt(col[j]);
        col[j] = d;
        for (uint32_t r = j + 1; r < ts; ++r) col[r] /= d;
        for (uint32_t r = 0; r < j; ++r) col[r] = 0.0; /* L's upper part is zero */
    }
}

/* x = x l^-T (l lower triangular). */
static void kernel_trsm(const double *l, double *x, uint32_t ts) {
    for (uint32_t c = 0; c < ts; ++c) {
        double *col = x + (size_t)c * ts;
        for (uint32_t p = 0; p < c; ++p) {
            const double *earlier = x + (size_t)p * ts;
            double f = l[(size_t)p * ts + c];
            for (uint32_t r = 0; r < ts; ++r) col[r] -= earlier[r] * f;
        }
        double d = l[(size_t)c * ts + c];
        for (uint32_t r = 0; r < ts; ++r) col[r] /= d;
    }
}

/* c -= a a^T, the lower triangle only. */
static void kernel_syrk(const double *a, double *c, uint32_t ts) {
    for (uint32_t j = 0; j < ts; ++j) {
        double *col = c + (size_t)j * ts;
        for (uint32_t p = 0; p < ts; ++p) {
            const double *ap = a + (size_t)p * ts;
            double f = ap[j];
            for (uint32_t r = j; r < ts; ++r) col[r] -= ap[r] * f;
        }
    }
}

/* c -= a b^T. */
static void kernel_gemm(const double *a, const double *b, double *c, uint32_t ts) {
    for (uint32_t j = 0; j < ts; ++j) {
        double *col = c + (size_t)j * ts;
        for (uint32_t p = 0; p < ts; ++p) {
            const double *ap = a + (size_t)p * ts;
            double f = b[(size_t)p * ts + j];
            for (uint32_t r = 0; r < ts; ++r) col[r] -= ap[r] * f;
        }
    }
}

void bench_chol_sequential(bench_chol *chol) {
    uint32_t nt = chol->tiles, ts = chol->tile;
    for (uint32_t k = 0; k < nt; ++k) {
        kernel_potrf(tile_at(chol, k, k), ts);
        for (uint32_t i = k + 1; i < nt; ++i) kernel_trsm(tile_at(chol, k, k), tile_at(chol, i, k), ts);
        for (uint32_t i = k + 1; i < nt; ++i) kernel_syrk(tile_at(chol, i, k), tile_at(chol, i, i), ts);
        for (uint32_t i = k + 1; i < nt; ++i)
            for (uint32_t j = k + 1; j < i; ++j)
                kernel_gemm(tile_at(chol, i, k), tile_at(chol, j, k), tile_at(chol, i, j), ts);
    }
}

uint64_t bench_chol_checksum(const bench_chol *chol) {
    uint64_t h = 0;
    size_t per_tile = (size_t)chol->tile * chol->tile;
    for (uint32_t i = 0; i < chol->tiles; ++i)
        for (uint32_t j = 0; j <= i; ++j) h = bench_mix64(h ^ bench_hash_doubles(tile_at(chol, i, j), per_tile));
    return h;
}

static double chol_l(const bench_chol *chol, uint32_t i, uint32_t j) {
    uint32_t ts = chol->tile;
    return tile_at(chol, i / ts, j / ts)[(size_t)(j % ts) * ts + i % ts];
}

double bench_chol_residual(const bench_chol *chol, unsigned samples) {
    double worst = 0.0;
    for (unsigned s = 0; s < samples && chol->n > 0; ++s) {
        uint32_t i = (uint32_t)(bench_mix64(0x5EED0000ull + s) % chol->n);
        uint32_t j = (uint32_t)(bench_mix64(0x5EED8000ull + s) % (i + 1));
        double product = 0.0;
        for (uint32_t p = 0; p <= j; ++p) product += chol_l(chol, i, p) * chol_l(chol, j, p);
        double error = fabs(product - chol_input(chol->n, i, j));
        if (!(error <= worst)) worst = error; /* a NaN wins */
    }
    return worst / (chol->n ? chol->n : 1);
}

/* ---- the Cholesky task graph ---- */

static size_t chol_task_count(uint32_t nt) {
    size_t n = nt;
    return n + n * (n - (n > 0)) + (n >= 3 ? n * (n - 1) * (n - 2) / 6 : 0);
}

typedef struct graph_builder {
    bench_chol_graph *graph;
    uint32_t tiles;
    uint32_t *last_writer; /* per tile, the task that last wrote it; UINT32_MAX: none */
} graph_builder;

static void depend_on(graph_builder *b, bench_chol_task *task, uint32_t ti, uint32_t tj) {
    uint32_t writer = b->last_writer[(size_t)ti * b->tiles + tj];
    if (writer == UINT32_MAX) return;
    for (unsigned p = 0; p < task->num_predecessors; ++p)
        if (task->predecessors[p] == writer) return;
    task->predecessors[task->num_predecessors++] = writer;
    ++b->graph->num_edges;
}

static void add_task(graph_builder *b, uint8_t kind, uint32_t k, uint32_t i, uint32_t j) {
    bench_chol_graph *g = b->graph;
    uint32_t id = (uint32_t)g->num_tasks++;
    bench_chol_task *task = &g->tasks[id];
    memset(task, 0, sizeof *task);
    task->kind = kind;
    task->k = k;
    task->i = i;
    task->j = j;
    /* What each kernel reads, then the tile it writes (its previous writer). */
    uint32_t out_i = k, out_j = k;
    if (kind == BENCH_CHOL_TRSM) {
        depend_on(b, task, k, k);
        out_i = i;
    } else if (kind == BENCH_CHOL_SYRK) {
        depend_on(b, task, i, k);
        out_i = out_j = i;
    } else if (kind == BENCH_CHOL_GEMM) {
        depend_on(b, task, i, k);
        depend_on(b, task, j, k);
        out_i = i;
        out_j = j;
    }
    depend_on(b, task, out_i, out_j);
    b->last_writer[(size_t)out_i * b->tiles + out_j] = id;
}

static int graph_link_successors(bench_chol_graph *g) {
    size_t n = g->num_tasks;
    g->num_successors = calloc(n ? n : 1, sizeof *g->num_successors);
    g->successor_start = malloc((n ? n : 1) * sizeof *g->successor_start);
    g->successors = malloc((g->num_edges ? g->num_edges : 1) * sizeof *g->successors);
    if (!g->num_successors || !g->successor_start || !g->successors) return -1;
    for (size_t t = 0; t < n; ++t)
        for (unsigned p = 0; p < g->tasks[t].num_predecessors; ++p) ++g->num_successors[g->tasks[t].predecessors[p]];
    uint32_t next = 0;
    for (size_t t = 0; t < n; ++t) {
        g->successor_start[t] = next;
        next += g->num_successors[t];
    }
    uint32_t *fill = calloc(n ? n : 1, sizeof *fill);
    if (fill == NULL) return -1;
    for (size_t t = 0; t < n; ++t)
        for (unsigned p = 0; p < g->tasks[t].num_predecessors; ++p) {
            uint32_t pred = g->tasks[t].predecessors[p];
            g->successors[g->successor_start[pred] + fill[pred]++] = (uint32_t)t;
        }
    free(fill);
    return 0;
}

int bench_chol_graph_build(bench_chol_graph *graph, uint32_t tiles) {
    memset(graph, 0, sizeof *graph);
    graph->tasks = malloc((chol_task_count(tiles) + 1) * sizeof *graph->tasks);
    graph_builder b = {graph, tiles, malloc(((size_t)tiles * tiles + 1) * sizeof(uint32_t))};
    if (graph->tasks == NULL || b.last_writer == NULL) {
        free(b.last_writer);
        bench_chol_graph_free(graph);
        return -1;
    }
    memset(b.last_writer, 0xFF, (size_t)tiles * tiles * sizeof(uint32_t));
    for (uint32_t k = 0; k < tiles; ++k) {
        add_task(&b, BENCH_CHOL_POTRF, k, 0, 0);
        for (uint32_t i = k + 1; i < tiles; ++i) add_task(&b, BENCH_CHOL_TRSM, k, i, 0);
        for (uint32_t i = k + 1; i < tiles; ++i) add_task(&b, BENCH_CHOL_SYRK, k, i, 0);
        for (uint32_t i = k + 1; i < tiles; ++i)
            for (uint32_t j = k + 1; j < i; ++j) add_task(&b, BENCH_CHOL_GEMM, k, i, j);
    }
    free(b.last_writer);
    if (graph_link_successors(graph) != 0) {
        bench_chol_graph_free(graph);
        return -1;
    }
    return 0;
}

void bench_chol_graph_free(bench_chol_graph *graph) {
    free(graph->tasks);
    free(graph->num_successors);
    free(graph->successor_start);
    free(graph->successors);
    memset(graph, 0, sizeof *graph);
}

void bench_chol_run(bench_chol *chol, const bench_chol_task *t) {
    uint32_t ts = chol->tile;
    switch (t->kind) {
    case BENCH_CHOL_POTRF: kernel_potrf(tile_at(chol, t->k, t->k), ts); break;
    case BENCH_CHOL_TRSM: kernel_trsm(tile_at(chol, t->k, t->k), tile_at(chol, t->i, t->k), ts); break;
    case BENCH_CHOL_SYRK: kernel_syrk(tile_at(chol, t->i, t->k), tile_at(chol, t->i, t->i), ts); break;
    default: kernel_gemm(tile_at(chol, t->i, t->k), tile_at(chol, t->j, t->k), tile_at(chol, t->i, t->j), ts); break;
    }
}

double *bench_chol_output(const bench_chol *chol, const bench_chol_task *t) {
    switch (t->kind) {
    case BENCH_CHOL_POTRF: return tile_at(chol, t->k, t->k);
    case BENCH_CHOL_TRSM: return tile_at(chol, t->i, t->k);
    case BENCH_CHOL_SYRK: return tile_at(chol, t->i, t->i);
    default: return tile_at(chol, t->i, t->j);
    }
}

size_t bench_chol_inputs(const bench_chol *chol, const bench_chol_task *t, double *inputs[2]) {
    switch (t->kind) {
    case BENCH_CHOL_POTRF: return 0;
    case BENCH_CHOL_TRSM: inputs[0] = tile_at(chol, t->k, t->k); return 1;
    case BENCH_CHOL_SYRK: inputs[0] = tile_at(chol, t->i, t->k); return 1;
    default:
        inputs[0] = tile_at(chol, t->i, t->k);
        inputs[1] = tile_at(chol, t->j, t->k);
        return 2;
    }
}
