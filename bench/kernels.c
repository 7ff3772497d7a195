/* The workloads' inputs and sequential kernels; see kernels.h. */
#define _POSIX_C_SOURCE 200809L
#include "kernels.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
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
double bench_thread_cpu(void) { return seconds_of(CLOCK_THREAD_CPUTIME_ID); }

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

/* ---- msort ---- */

void bench_fill_keys(uint64_t *a, size_t n) {
    for (size_t i = 0; i < n; ++i) a[i] = bench_mix64(i);
}

uint64_t bench_hash_keys(const uint64_t *a, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ a[i]) * 0x100000001B3ull;
    return h;
}

int bench_keys_sorted(const uint64_t *a, size_t n) {
    for (size_t i = 1; i < n; ++i)
        if (a[i - 1] > a[i]) return 0;
    return 1;
}

static void insertion_sort_keys(uint64_t *a, size_t n) {
    for (size_t i = 1; i < n; ++i) {
        uint64_t v = a[i];
        size_t j = i;
        for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
        a[j] = v;
    }
}

void bench_merge_sequential(const bench_merge_job *job) {
    const uint64_t *x = job->x, *y = job->y;
    size_t i = 0, j = 0, k = 0;
    while (i < job->nx && j < job->ny) job->out[k++] = y[j] < x[i] ? y[j++] : x[i++];
    while (i < job->nx) job->out[k++] = x[i++];
    while (j < job->ny) job->out[k++] = y[j++];
}

bench_merge_job bench_msort_merge_job(uint64_t *a, uint64_t *b, size_t n, int to_b) {
    size_t h = n / 2;
    const uint64_t *from = to_b ? a : b;
    bench_merge_job job = {from, from + h, h, n - h, to_b ? b : a};
    return job;
}

void bench_msort_sequential(uint64_t *a, uint64_t *b, size_t n, int to_b) {
    if (n <= 16) {
        insertion_sort_keys(a, n);
        if (to_b) memcpy(b, a, n * sizeof *a);
        return;
    }
    size_t h = n / 2;
    bench_msort_sequential(a, b, h, !to_b);
    bench_msort_sequential(a + h, b + h, n - h, !to_b);
    bench_merge_job job = bench_msort_merge_job(a, b, n, to_b);
    bench_merge_sequential(&job);
}

/* The first index of y[0, n) whose key is at least `key`. */
static size_t lower_bound_keys(const uint64_t *y, size_t n, uint64_t key) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (y[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void bench_merge_split(const bench_merge_job *job, bench_merge_job *left, bench_merge_job *right) {
    /* Cut the longer run in its middle so that both parts shrink by a quarter at least. */
    int swap = job->nx < job->ny;
    const uint64_t *x = swap ? job->y : job->x, *y = swap ? job->x : job->y;
    size_t nx = swap ? job->ny : job->nx, ny = swap ? job->nx : job->ny;
    size_t mx = nx / 2, my = lower_bound_keys(y, ny, x[mx]);
    /* left: x[0, mx) <= x[mx] and y[0, my) < x[mx]; right: the rest, all >= x[mx]. */
    bench_merge_job l = {x, y, mx, my, job->out};
    bench_merge_job r = {x + mx, y + my, nx - mx, ny - my, job->out + mx + my};
    *left = l;
    *right = r;
}

/* ---- matmul ---- */

void bench_fill_matrices(double *a, double *b, double *c, size_t n) {
    size_t cells = n * n;
    for (size_t i = 0; i < cells; ++i) {
        a[i] = (double)(bench_mix64(i) % 1000);
        b[i] = (double)(bench_mix64(cells + i) % 1000);
        c[i] = (double)(bench_mix64(2 * cells + i) % 1000);
    }
}

bench_mm_job bench_mm_part(const bench_mm_job *job, int q, int k) {
    size_t h = job->n / 2, ld = job->ld;
    size_t row = (size_t)(q / 2) * h, col = (size_t)(q % 2) * h, mid = (size_t)k * h;
    bench_mm_job part = {job->c + row * ld + col, job->a + row * ld + mid, job->b + mid * ld + col, h, ld};
    return part;
}

/* C += A B on one block: for each row i of C and each group of four k,
 * c[i][j] = c[i][j] + a[i][k] b[k][j] + ... + a[i][k+3] b[k+3][j], added
 * left to right, so every element still adds its products in k order.
 * Why four k at a time, written out: with one k per pass (the textbook
 * loop) gcc 12 unrolls and jams the k loop by two on its own and LLVM does
 * not, so the Rust twin (bench/rayon/src/kernels.rs) ran 1.3x slower than
 * this kernel; written with four, LLVM loads and stores each row of C once
 * per four products (gcc jams again, to eight) and the two ran within 5% of
 * each other alone (1024 x 1024: 100 to 107 ms; the report's 1-worker
 * figures show what remains in the benchmark). restrict: C never overlaps A or B (the Rust twin's reference
 * parameters say the same), so no run-time overlap checks. */
static void mm_block(double *restrict c, const double *restrict a, const double *restrict b, size_t ld) {
    for (size_t i = 0; i < BENCH_MM_BLOCK; ++i) {
        double *ci = c + i * ld;
        for (size_t k = 0; k < BENCH_MM_BLOCK; k += 4) {
            const double *aik = a + i * ld + k, *bk = b + k * ld;
            for (size_t j = 0; j < BENCH_MM_BLOCK; ++j)
                ci[j] = ci[j] + aik[0] * bk[j] + aik[1] * bk[ld + j] + aik[2] * bk[2 * ld + j] +
                        aik[3] * bk[3 * ld + j];
        }
    }
}

void bench_mm_block(const bench_mm_job *job) { mm_block(job->c, job->a, job->b, job->ld); }

void bench_mm_sequential(const bench_mm_job *job) {
    if (job->n <= BENCH_MM_BLOCK) {
        bench_mm_block(job);
        return;
    }
    for (int q = 0; q < 4; ++q)
        for (int k = 0; k < 2; ++k) {
            bench_mm_job part = bench_mm_part(job, q, k);
            bench_mm_sequential(&part);
        }
}

/* ---- bfs ---- */

/* Shortcut s of vertex v: a stream of mix64 apart from the other inputs'. */
static uint32_t shortcut_target(uint32_t v, uint32_t s, uint32_t shortcuts, uint32_t vertices) {
    return (uint32_t)(bench_mix64(((uint64_t)1 << 40) + (uint64_t)v * shortcuts + s) % vertices);
}

/* One directed edge: counted into offsets[from + 1] while cursor is NULL,
 * else stored at from's next free slot. */
static void graph_add(bench_graph *g, size_t *cursor, uint32_t from, uint32_t to) {
    if (cursor == NULL) ++g->offsets[from + 1];
    else g->targets[cursor[from]++] = to;
}

/* Every directed edge in a fixed order: grid edges, then shortcuts. */
static void graph_edges(bench_graph *g, size_t *cursor, uint32_t side, uint32_t shortcuts) {
    for (uint32_t r = 0; r < side; ++r)
        for (uint32_t c = 0; c < side; ++c) {
            uint32_t v = r * side + c;
            if (c + 1 < side) graph_add(g, cursor, v, v + 1);
            if (c > 0) graph_add(g, cursor, v, v - 1);
            if (r + 1 < side) graph_add(g, cursor, v, v + side);
            if (r > 0) graph_add(g, cursor, v, v - side);
        }
    for (uint32_t v = 0; v < g->vertices; ++v)
        for (uint32_t s = 0; s < shortcuts; ++s) {
            uint32_t u = shortcut_target(v, s, shortcuts, g->vertices);
            graph_add(g, cursor, v, u);
            graph_add(g, cursor, u, v);
        }
}

static void *alloc_or_fail(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "bench: out of memory for %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

void bench_graph_build(bench_graph *g, uint32_t side, uint32_t shortcuts) {
    g->vertices = side * side;
    g->offsets = alloc_or_fail(((size_t)g->vertices + 1) * sizeof *g->offsets);
    memset(g->offsets, 0, ((size_t)g->vertices + 1) * sizeof *g->offsets);
    graph_edges(g, NULL, side, shortcuts);
    for (uint32_t v = 0; v < g->vertices; ++v) g->offsets[v + 1] += g->offsets[v];
    g->edges = g->offsets[g->vertices];
    g->targets = alloc_or_fail(g->edges * sizeof *g->targets);
    size_t *cursor = alloc_or_fail((size_t)g->vertices * sizeof *cursor);
    memcpy(cursor, g->offsets, (size_t)g->vertices * sizeof *cursor);
    graph_edges(g, cursor, side, shortcuts);
    free(cursor);
}

void bench_graph_free(bench_graph *g) {
    free(g->offsets);
    free(g->targets);
}

struct bench_bfs {
    const bench_graph *graph;
    _Atomic int32_t *level;  /* -1: unseen; claimed by compare-and-swap */
    uint32_t *frontier, *next;
    size_t frontier_size;
    _Atomic size_t next_size;  /* slots of `next` handed out so far */
    int32_t depth;             /* the level of the current frontier */
};

bench_bfs *bench_bfs_create(const bench_graph *g) {
    bench_bfs *s = alloc_or_fail(sizeof *s);
    s->graph = g;
    s->level = alloc_or_fail((size_t)g->vertices * sizeof *s->level);
    /* Each vertex enters one frontier at most. Filled so that the search
     * does not take the first-touch page faults. */
    s->frontier = alloc_or_fail((size_t)g->vertices * sizeof *s->frontier);
    s->next = alloc_or_fail((size_t)g->vertices * sizeof *s->next);
    memset(s->frontier, 0xFF, (size_t)g->vertices * sizeof *s->frontier);
    memset(s->next, 0xFF, (size_t)g->vertices * sizeof *s->next);
    return s;
}

void bench_bfs_destroy(bench_bfs *s) {
    free(s->level);
    free(s->frontier);
    free(s->next);
    free(s);
}

void bench_bfs_reset(bench_bfs *s, uint32_t source) {
    for (uint32_t v = 0; v < s->graph->vertices; ++v) atomic_init(&s->level[v], -1);
    atomic_init(&s->level[source], 0);
    s->frontier[0] = source;
    s->frontier_size = 1;
    atomic_init(&s->next_size, 0);
    s->depth = 0;
}

size_t bench_bfs_frontier_size(const bench_bfs *s) { return s->frontier_size; }

enum { BFS_FOUND_BUFFER = 1024 };

/* Appends found[0, count) to the next frontier: one atomic add per batch. */
static void bfs_flush(bench_bfs *s, const uint32_t *found, size_t count) {
    /* relaxed: the slots reserved are this chunk's alone, and the join that
     * ends the level orders these writes before the next level reads them. */
    size_t at = atomic_fetch_add_explicit(&s->next_size, count, memory_order_relaxed);
    memcpy(s->next + at, found, count * sizeof *found);
}

/* 1 if this call claimed u for level `to` (it was unseen). */
static int bfs_claim(bench_bfs *s, uint32_t u, int32_t to) {
    /* Load first: most neighbours are already seen, and a failed CAS still
     * takes the cache line exclusively. relaxed: the level is the only data
     * the claim protects; the joins order everything else. */
    if (atomic_load_explicit(&s->level[u], memory_order_relaxed) != -1) return 0;
    int32_t unseen = -1;
    return atomic_compare_exchange_strong_explicit(&s->level[u], &unseen, to, memory_order_relaxed,
                                                   memory_order_relaxed);
}

void bench_bfs_chunk(bench_bfs *s, size_t begin, size_t end) {
    const bench_graph *g = s->graph;
    int32_t to = s->depth + 1;
    uint32_t found[BFS_FOUND_BUFFER];
    size_t count = 0;
    for (size_t i = begin; i < end; ++i) {
        uint32_t v = s->frontier[i];
        for (size_t e = g->offsets[v]; e < g->offsets[v + 1]; ++e) {
            uint32_t u = g->targets[e];
            if (!bfs_claim(s, u, to)) continue;
            found[count++] = u;
            if (count == BFS_FOUND_BUFFER) {
                bfs_flush(s, found, count);
                count = 0;
            }
        }
    }
    if (count > 0) bfs_flush(s, found, count);
}

size_t bench_bfs_advance(bench_bfs *s) {
    uint32_t *t = s->frontier;
    s->frontier = s->next;
    s->next = t;
    s->frontier_size = atomic_load_explicit(&s->next_size, memory_order_relaxed);  /* relaxed: after the join */
    atomic_store_explicit(&s->next_size, 0, memory_order_relaxed);
    ++s->depth;
    return s->frontier_size;
}

void bench_bfs_sequential(bench_bfs *s) {
    for (size_t n = bench_bfs_frontier_size(s); n > 0; n = bench_bfs_advance(s)) bench_bfs_chunk(s, 0, n);
}

bench_bfs_result bench_bfs_summary(const bench_bfs *s) {
    bench_bfs_result r = {0, 0, 0};
    for (uint32_t v = 0; v < s->graph->vertices; ++v) {
        int32_t level = atomic_load_explicit(&s->level[v], memory_order_relaxed);  /* relaxed: the search is over */
        if (level < 0) continue;
        ++r.reached;
        r.level_sum += (uint64_t)level;
        if ((uint32_t)level + 1 > r.levels) r.levels = (uint32_t)level + 1;
    }
    return r;
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
