//! The workloads' inputs and sequential kernels: the Rust twin of
//! bench/kernels.c. Same data, same algorithms, same checksums (the driver
//! compares them with the sequential C program's).

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
