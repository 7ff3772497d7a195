//! The workloads' inputs and sequential kernels: the Rust twin of
//! bench/kernels.c. Same data, same algorithms, same checksums (the driver
//! compares them with the sequential C program's).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicUsize, Ordering};

/// splitmix64's finaliser.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// x[i] = mix64(i) % 1000: integer-valued, so every summation order is exact.
pub fn fill_integers(x: &mut [f64]) {
    for (i, v) in x.iter_mut().enumerate() {
        *v = (mix64(i as u64) % 1000) as f64;
    }
}

/// x[i] uniform in [0, 1) from the top 53 bits of mix64(i).
pub fn fill_uniform(x: &mut [f64]) {
    for (i, v) in x.iter_mut().enumerate() {
        *v = (mix64(i as u64) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0);
    }
}

/// FNV-1a over the bit patterns.
pub fn hash_doubles(x: &[f64]) -> u64 {
    x.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, v| (h ^ v.to_bits()).wrapping_mul(0x0100_0000_01B3))
}

/// The map workload's element function.
pub fn map_one(x: f64) -> f64 {
    x.sqrt() * 3.0
}

pub fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

/// A node of the perfect binary tree, laid out as in kernels.c: one block,
/// preorder, values 1..N in order; null children at the leaves.
#[repr(C)]
pub struct Node {
    pub value: i64,
    left: *const Node,
    right: *const Node,
}

// SAFETY: the tree is immutable once built and outlives every task reading it.
unsafe impl Sync for Node {}
unsafe impl Send for Node {}

impl Node {
    /// Both children, or None at a leaf (the tree is perfect).
    pub fn children(&self) -> Option<(&Node, &Node)> {
        if self.left.is_null() || self.right.is_null() {
            return None;
        }
        // SAFETY: non-null children point into the same live block (Tree).
        unsafe { Some((&*self.left, &*self.right)) }
    }
}

pub struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    /// 2^depth - 1 nodes.
    pub fn build(depth: u32) -> Tree {
        let count = (1usize << depth) - 1;
        let mut nodes: Vec<Node> = Vec::with_capacity(count);
        // The capacity is exact, so the block never moves while it fills.
        let base = nodes.as_mut_ptr();
        build_range(&mut nodes, base, 1, count as i64);
        Tree { nodes }
    }

    pub fn root(&self) -> &Node {
        &self.nodes[0]
    }
}

/// Pushes the subtree of values [lo, hi] in preorder; returns its root's address.
fn build_range(nodes: &mut Vec<Node>, base: *mut Node, lo: i64, hi: i64) -> *const Node {
    if lo > hi {
        return std::ptr::null();
    }
    let mid = lo + (hi - lo) / 2;
    let index = nodes.len();
    nodes.push(Node { value: mid, left: std::ptr::null(), right: std::ptr::null() });
    let left = build_range(nodes, base, lo, mid - 1);
    let right = build_range(nodes, base, mid + 1, hi);
    nodes[index].left = left;
    nodes[index].right = right;
    // SAFETY: index < capacity, within the block.
    unsafe { base.add(index) }
}

/// Below this many elements the parallel sort recurses sequentially.
pub const QS_GRAIN: usize = 4096;

fn median_of_three(a: f64, b: f64, c: f64) -> f64 {
    if a < b {
        if b < c {
            b
        } else if a < c {
            c
        } else {
            a
        }
    } else if a < c {
        a
    } else if b < c {
        c
    } else {
        b
    }
}

/// Hoare partition around the median of three; len >= 3. Returns k,
/// 1 <= k < len: a[..k] <= pivot <= a[k..].
pub fn qs_partition(a: &mut [f64]) -> usize {
    let n = a.len();
    let pivot = median_of_three(a[0], a[n / 2], a[n - 1]);
    let mut i: isize = -1;
    let mut j: isize = n as isize;
    loop {
        loop {
            i += 1;
            if a[i as usize] >= pivot {
                break;
            }
        }
        loop {
            j -= 1;
            if a[j as usize] <= pivot {
                break;
            }
        }
        if i >= j {
            return j as usize + 1;
        }
        a.swap(i as usize, j as usize);
    }
}

fn insertion_sort(a: &mut [f64]) {
    for i in 1..a.len() {
        let v = a[i];
        let mut j = i;
        while j > 0 && a[j - 1] > v {
            a[j] = a[j - 1];
            j -= 1;
        }
        a[j] = v;
    }
}

pub fn qs_sequential(mut a: &mut [f64]) {
    while a.len() > 16 {
        let k = qs_partition(a);
        let (left, right) = a.split_at_mut(k);
        if left.len() < right.len() {
            qs_sequential(left);
            a = right;
        } else {
            qs_sequential(right);
            a = left;
        }
    }
    insertion_sort(a);
}

pub fn is_sorted(a: &[f64]) -> bool {
    a.windows(2).all(|w| w[0] <= w[1])
}

/// SHA-1 (FIPS 180-4) of a message short enough for one block (< 56 bytes).
fn sha1_one_block(message: &[u8]) -> [u8; 20] {
    let mut block = [0u8; 64];
    block[..message.len()].copy_from_slice(message);
    block[message.len()] = 0x80;
    block[56..].copy_from_slice(&((message.len() as u64) * 8).to_be_bytes());
    // The message schedule in a ring of 16 words, each computed in the round
    // that uses it: the same form as the C kernel (bench/kernels.c says why
    // it is written so), so that every runtime runs an equally fast kernel.
    let mut w = [0u32; 16];
    for i in 0..16 {
        w[i] = u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
    }
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let (mut a, mut b, mut c, mut d, mut e) = (h[0], h[1], h[2], h[3], h[4]);
    for i in 0..80 {
        let wi = if i < 16 {
            w[i]
        } else {
            w[i & 15] = (w[(i + 13) & 15] ^ w[(i + 8) & 15] ^ w[(i + 2) & 15] ^ w[i & 15]).rotate_left(1);
            w[i & 15]
        };
        let (f, k) = match i {
            0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
            20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
            40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
            _ => (b ^ c ^ d, 0xCA62_C1D6),
        };
        let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(wi);
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    for (x, v) in h.iter_mut().zip([a, b, c, d, e]) {
        *x = x.wrapping_add(v);
    }
    let mut digest = [0u8; 20];
    for i in 0..5 {
        digest[4 * i..4 * i + 4].copy_from_slice(&h[i].to_be_bytes());
    }
    digest
}

/// A node of the UTS T1 tree (geometric, fixed shape, b = 4, root seed 19).
#[derive(Clone, Copy)]
pub struct UtsNode {
    state: [u8; 20],
    height: i32,
}

#[derive(Clone, Copy, Default)]
pub struct UtsCount {
    pub nodes: u64,
    pub leaves: u64,
}

impl UtsCount {
    pub fn add(self, other: UtsCount) -> UtsCount {
        UtsCount { nodes: self.nodes + other.nodes, leaves: self.leaves + other.leaves }
    }
}

const UTS_ROOT_SEED: u32 = 19;
const UTS_MAX_CHILDREN: i32 = 100;
const UTS_BRANCHING: f64 = 4.0;

impl UtsNode {
    pub fn root() -> UtsNode {
        let mut seed = [0u8; 20];
        seed[16..].copy_from_slice(&UTS_ROOT_SEED.to_be_bytes());
        UtsNode { state: sha1_one_block(&seed), height: 0 }
    }

    pub fn children(&self, max_depth: i32) -> i32 {
        if self.height >= max_depth {
            return 0;
        }
        let p = 1.0 / (1.0 + UTS_BRANCHING);
        let s = &self.state;
        let r = u32::from_be_bytes([s[16], s[17], s[18], s[19]]) & 0x7FFF_FFFF;
        let u = r as f64 / 2_147_483_648.0;
        let children = ((1.0 - u).ln() / (1.0 - p).ln()).floor() as i32;
        children.min(UTS_MAX_CHILDREN)
    }

    pub fn child(&self, index: i32) -> UtsNode {
        let mut message = [0u8; 24];
        message[..20].copy_from_slice(&self.state);
        message[20..].copy_from_slice(&(index as u32).to_be_bytes());
        UtsNode { state: sha1_one_block(&message), height: self.height + 1 }
    }
}

// ---- msort: the twin of kernels.c's merge sort (kernels.h describes the recursion) ----

/// Ranges of at most this many keys are sorted by msort_sequential.
pub const MSORT_GRAIN: usize = 2048;
/// Merges of at most this many output keys are sequential.
pub const MERGE_GRAIN: usize = 8192;

/// a[i] = mix64(i).
pub fn fill_keys(a: &mut [u64]) {
    for (i, v) in a.iter_mut().enumerate() {
        *v = mix64(i as u64);
    }
}

/// FNV-1a over the keys.
pub fn hash_keys(a: &[u64]) -> u64 {
    a.iter().fold(0xCBF2_9CE4_8422_2325u64, |h, &v| (h ^ v).wrapping_mul(0x0100_0000_01B3))
}

pub fn keys_sorted(a: &[u64]) -> bool {
    a.windows(2).all(|w| w[0] <= w[1])
}

fn insertion_sort_keys(a: &mut [u64]) {
    for i in 1..a.len() {
        let v = a[i];
        let mut j = i;
        while j > 0 && a[j - 1] > v {
            a[j] = a[j - 1];
            j -= 1;
        }
        a[j] = v;
    }
}

/// Merges runs x and y into out (x.len() + y.len() keys).
pub fn merge_sequential(x: &[u64], y: &[u64], out: &mut [u64]) {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        if y[j] < x[i] {
            out[k] = y[j];
            j += 1;
        } else {
            out[k] = x[i];
            i += 1;
        }
        k += 1;
    }
    out[k..k + x.len() - i].copy_from_slice(&x[i..]);
    k += x.len() - i;
    out[k..].copy_from_slice(&y[j..]);
}

/// The merge that ends a sort of a with scratch b whose halves are sorted:
/// they are in b if !to_b (the result goes to a), else in a. Returns the
/// two runs and the output.
pub fn msort_halves<'a>(a: &'a mut [u64], b: &'a mut [u64], to_b: bool) -> (&'a [u64], &'a [u64], &'a mut [u64]) {
    let h = a.len() / 2;
    let (from, to): (&'a [u64], &'a mut [u64]) = if to_b { (a, b) } else { (b, a) };
    let (x, y) = from.split_at(h);
    (x, y, to)
}

/// Sorts a with scratch b (as long); the sorted keys end in b if to_b, else
/// in a. Top-down merge sort, insertion sort below 16.
pub fn msort_sequential(a: &mut [u64], b: &mut [u64], to_b: bool) {
    let n = a.len();
    if n <= 16 {
        insertion_sort_keys(a);
        if to_b {
            b.copy_from_slice(a);
        }
        return;
    }
    let h = n / 2;
    {
        let (a0, a1) = a.split_at_mut(h);
        let (b0, b1) = b.split_at_mut(h);
        msort_sequential(a0, b0, !to_b);
        msort_sequential(a1, b1, !to_b);
    }
    let (x, y, out) = msort_halves(a, b, to_b);
    merge_sequential(x, y, out);
}

/// The first index of y whose key is at least `key`.
fn lower_bound_keys(y: &[u64], key: u64) -> usize {
    let (mut lo, mut hi) = (0, y.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if y[mid] < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Two runs to merge (the left part of the output takes the first pair).
pub type MergeParts<'a> = ((&'a [u64], &'a [u64]), (&'a [u64], &'a [u64]));

/// Splits a merge of more than MERGE_GRAIN keys in two independent merges:
/// the middle key of the longer run and its lower bound in the other run
/// cut both runs (and the output after left's keys).
pub fn merge_split<'a>(x: &'a [u64], y: &'a [u64]) -> MergeParts<'a> {
    // Cut the longer run in its middle so that both parts shrink by a quarter at least.
    let (x, y) = if x.len() < y.len() { (y, x) } else { (x, y) };
    let mx = x.len() / 2;
    let my = lower_bound_keys(y, x[mx]);
    ((&x[..mx], &y[..my]), (&x[mx..], &y[my..]))
}

// ---- matmul: the twin of kernels.c's quadrant recursion ----

/// The side of the blocks the kernel multiplies.
pub const MM_BLOCK: usize = 64;

/// a[i] = mix64(i) % 1000, b[i] = mix64(n^2 + i) % 1000, c[i] = mix64(2 n^2 + i) % 1000.
pub fn fill_matrices(a: &mut [f64], b: &mut [f64], c: &mut [f64]) {
    let cells = a.len() as u64;
    for i in 0..a.len() {
        a[i] = (mix64(i as u64) % 1000) as f64;
        b[i] = (mix64(cells + i as u64) % 1000) as f64;
        c[i] = (mix64(2 * cells + i as u64) % 1000) as f64;
    }
}

/// C += A B on square blocks of side n inside row-major matrices of row
/// stride ld. Raw pointers, because a quadrant of a matrix is no slice; the
/// lifetime ties a job to the borrowed matrices.
#[derive(Clone, Copy)]
pub struct MmJob<'m> {
    c: *mut f64,
    a: *const f64,
    b: *const f64,
    pub n: usize,
    ld: usize,
    _matrices: std::marker::PhantomData<&'m mut [f64]>,
}

// SAFETY: the jobs running at the same time write disjoint blocks of C (the
// quadrants), and C never overlaps A or B, which are only read.
unsafe impl Send for MmJob<'_> {}
unsafe impl Sync for MmJob<'_> {}

impl<'m> MmJob<'m> {
    /// The whole product of n x n matrices; n must be MM_BLOCK times a power of two.
    pub fn new(c: &'m mut [f64], a: &'m [f64], b: &'m [f64], n: usize) -> MmJob<'m> {
        assert!(c.len() == n * n && a.len() == n * n && b.len() == n * n);
        MmJob { c: c.as_mut_ptr(), a: a.as_ptr(), b: b.as_ptr(), n, ld: n, _matrices: std::marker::PhantomData }
    }

    /// The part for output quadrant q (0 top left, 1 top right, 2 bottom
    /// left, 3 bottom right) and half k (0, 1) of the inner dimension.
    pub fn part(&self, q: usize, k: usize) -> MmJob<'m> {
        let (h, ld) = (self.n / 2, self.ld);
        let (row, col, mid) = ((q / 2) * h, (q % 2) * h, k * h);
        // SAFETY: the offsets stay inside this job's blocks, which lie inside the matrices.
        unsafe {
            MmJob {
                c: self.c.add(row * ld + col),
                a: self.a.add(row * ld + mid),
                b: self.b.add(mid * ld + col),
                n: h,
                ld,
                _matrices: self._matrices,
            }
        }
    }

    /// The kernel on a job of side MM_BLOCK: the same loops as kernels.c's
    /// mm_block (which says why four k at a time).
    pub fn block(&self) {
        let ld = self.ld;
        for i in 0..MM_BLOCK {
            // SAFETY: the block's MM_BLOCK rows of MM_BLOCK elements at stride ld lie
            // inside the matrices; no other job touches this block of C meanwhile.
            let c = unsafe { &mut *(self.c.add(i * ld) as *mut [f64; MM_BLOCK]) };
            for k in (0..MM_BLOCK).step_by(4) {
                // SAFETY: as above, for A's row i and B's rows k..k+4, which nobody writes.
                let (aik, b) = unsafe {
                    let row = |r: usize| &*(self.b.add((k + r) * ld) as *const [f64; MM_BLOCK]);
                    (&*(self.a.add(i * ld + k) as *const [f64; 4]), [row(0), row(1), row(2), row(3)])
                };
                row_update(c, aik, b);
            }
        }
    }
}

/// c[j] = c[j] + a[0] b[0][j] + ... + a[3] b[3][j], added left to right. A
/// function of its own so that its reference parameters tell the compiler
/// that C overlaps neither A nor B, as restrict does in kernels.c.
#[inline(always)]
fn row_update(c: &mut [f64; MM_BLOCK], a: &[f64; 4], b: [&[f64; MM_BLOCK]; 4]) {
    for j in 0..MM_BLOCK {
        c[j] = c[j] + a[0] * b[0][j] + a[1] * b[1][j] + a[2] * b[2][j] + a[3] * b[3][j];
    }
}

// ---- bfs: the twin of kernels.c's graph and level-synchronous search ----

/// Frontier pieces of at most this many vertices are expanded sequentially.
pub const BFS_GRAIN: usize = 512;
const BFS_FOUND_BUFFER: usize = 1024;

/// The grid with shortcuts in CSR form (kernels.h describes it).
pub struct Graph {
    pub vertices: u32,
    offsets: Vec<usize>,
    targets: Vec<u32>,
}

/// Every directed edge in kernels.c's order: grid edges, then shortcuts.
fn graph_edges(side: u32, shortcuts: u32, mut add: impl FnMut(u32, u32)) {
    let vertices = side * side;
    for r in 0..side {
        for c in 0..side {
            let v = r * side + c;
            if c + 1 < side {
                add(v, v + 1);
            }
            if c > 0 {
                add(v, v - 1);
            }
            if r + 1 < side {
                add(v, v + side);
            }
            if r > 0 {
                add(v, v - side);
            }
        }
    }
    for v in 0..vertices {
        for s in 0..shortcuts {
            let u = (mix64((1u64 << 40) + v as u64 * shortcuts as u64 + s as u64) % vertices as u64) as u32;
            add(v, u);
            add(u, v);
        }
    }
}

impl Graph {
    pub fn build(side: u32, shortcuts: u32) -> Graph {
        let vertices = side * side;
        let mut offsets = vec![0usize; vertices as usize + 1];
        graph_edges(side, shortcuts, |from, _| offsets[from as usize + 1] += 1);
        for v in 0..vertices as usize {
            offsets[v + 1] += offsets[v];
        }
        let mut targets = vec![0u32; offsets[vertices as usize]];
        let mut cursor = offsets[..vertices as usize].to_vec();
        graph_edges(side, shortcuts, |from, to| {
            targets[cursor[from as usize]] = to;
            cursor[from as usize] += 1;
        });
        Graph { vertices, offsets, targets }
    }

    pub fn edges(&self) -> usize {
        self.targets.len()
    }
}

/// The search's state: levels claimed by compare-and-swap, the current and
/// the next frontier (appended to in batches, one atomic add each).
pub struct Bfs<'g> {
    graph: &'g Graph,
    level: Vec<AtomicI32>, // -1: unseen
    frontier: Vec<AtomicU32>,
    next: Vec<AtomicU32>,
    frontier_size: usize,
    next_size: AtomicUsize,
    depth: i32, // the level of the current frontier
}

pub struct BfsSummary {
    pub reached: u64,
    pub level_sum: u64,
    pub levels: u32,
}

impl<'g> Bfs<'g> {
    pub fn new(graph: &'g Graph) -> Bfs<'g> {
        let n = graph.vertices as usize;
        // Filled (not zeroed) so that the search does not take the first-touch page faults.
        let slots = || (0..n).map(|_| AtomicU32::new(u32::MAX)).collect::<Vec<_>>();
        Bfs {
            graph,
            level: (0..n).map(|_| AtomicI32::new(-1)).collect(),
            frontier: slots(),
            next: slots(),
            frontier_size: 0,
            next_size: AtomicUsize::new(0),
            depth: 0,
        }
    }

    /// Every level unseen, the frontier {source} at level 0.
    pub fn reset(&mut self, source: u32) {
        for l in &mut self.level {
            *l.get_mut() = -1;
        }
        *self.level[source as usize].get_mut() = 0;
        *self.frontier[0].get_mut() = source;
        self.frontier_size = 1;
        *self.next_size.get_mut() = 0;
        self.depth = 0;
    }

    pub fn frontier_size(&self) -> usize {
        self.frontier_size
    }

    /// Appends found to the next frontier.
    fn flush(&self, found: &[u32]) {
        // Relaxed: the slots reserved are this chunk's alone, and the join that
        // ends the level orders these stores before the next level reads them.
        let at = self.next_size.fetch_add(found.len(), Ordering::Relaxed);
        for (slot, &u) in self.next[at..at + found.len()].iter().zip(found) {
            slot.store(u, Ordering::Relaxed);
        }
    }

    /// True if this call claimed u for level `to` (it was unseen).
    fn claim(&self, u: u32, to: i32) -> bool {
        // Load first: most neighbours are already seen, and a failed CAS still
        // takes the cache line exclusively. Relaxed: the level is the only data
        // the claim protects; the joins order everything else.
        let level = &self.level[u as usize];
        level.load(Ordering::Relaxed) == -1
            && level.compare_exchange(-1, to, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Expands frontier[begin..end]; chunks of one level may run in parallel.
    pub fn chunk(&self, begin: usize, end: usize) {
        let g = self.graph;
        let to = self.depth + 1;
        let mut found = [0u32; BFS_FOUND_BUFFER];
        let mut count = 0;
        for slot in &self.frontier[begin..end] {
            let v = slot.load(Ordering::Relaxed) as usize; // relaxed: written before the last join
            for &u in &g.targets[g.offsets[v]..g.offsets[v + 1]] {
                if !self.claim(u, to) {
                    continue;
                }
                found[count] = u;
                count += 1;
                if count == BFS_FOUND_BUFFER {
                    self.flush(&found);
                    count = 0;
                }
            }
        }
        if count > 0 {
            self.flush(&found[..count]);
        }
    }

    /// After every chunk of the level ran: the next frontier becomes the
    /// current one; returns its size (0: the search is over).
    pub fn advance(&mut self) -> usize {
        std::mem::swap(&mut self.frontier, &mut self.next);
        self.frontier_size = std::mem::replace(self.next_size.get_mut(), 0);
        self.depth += 1;
        self.frontier_size
    }

    pub fn summary(&self) -> BfsSummary {
        let mut s = BfsSummary { reached: 0, level_sum: 0, levels: 0 };
        for l in &self.level {
            let level = l.load(Ordering::Relaxed); // relaxed: the search is over
            if level < 0 {
                continue;
            }
            s.reached += 1;
            s.level_sum += level as u64;
            s.levels = s.levels.max(level as u32 + 1);
        }
        s
    }
}
