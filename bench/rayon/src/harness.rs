//! The measuring harness: the Rust twin of the parts of bench/harness.c that
//! do not depend on the runtime (arguments, clocks, the JSON line, the futex
//! floor, the tiny task's slots).
use std::collections::HashMap;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    fn clock_nanosleep(clock: i32, flags: i32, request: *const Timespec, remain: *mut Timespec) -> i32;
    fn syscall(number: i64, ...) -> i64;
    fn sched_getcpu() -> i32;
}

/// The CPU the calling thread runs on (glibc's sched_getcpu; -1 on failure).
pub fn current_cpu() -> i32 {
    // SAFETY: no arguments, no memory touched.
    unsafe { sched_getcpu() }
}

/// As harness.c's add_cpu_split: how many wake-ups ran on the waker's CPU,
/// and the p50 and p99 of those and of the others, under `keys`.
pub fn add_cpu_split(r: &mut Report, keys: [&'static str; 5], us: &[f64], same: &[bool]) {
    let pick = |want: bool| us.iter().zip(same).filter(|(_, s)| **s == want).map(|(u, _)| *u).collect::<Vec<f64>>();
    let (here, elsewhere) = (pick(true), pick(false));
    r.extra.push((keys[0], here.len() as f64));
    r.extra.push((keys[1], quantile(&here, 0.5)));
    r.extra.push((keys[2], quantile(&here, 0.99)));
    r.extra.push((keys[3], quantile(&elsewhere, 0.5)));
    r.extra.push((keys[4], quantile(&elsewhere, 0.99)));
}

const CLOCK_MONOTONIC: i32 = 1;
const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
const TIMER_ABSTIME: i32 = 1;

fn seconds_of(clock: i32) -> f64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec (64-bit Linux layout).
    unsafe { clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CLOCK_MONOTONIC in seconds, the clock the C programs use.
pub fn wall() -> f64 {
    seconds_of(CLOCK_MONOTONIC)
}

/// The whole process's CPU time in seconds.
pub fn cpu() -> f64 {
    seconds_of(CLOCK_PROCESS_CPUTIME_ID)
}

pub fn sleep_until(deadline: f64) {
    let secs = deadline.floor();
    let ts = Timespec { tv_sec: secs as i64, tv_nsec: (((deadline - secs) * 1e9) as i64).min(999_999_999) };
    // SAFETY: valid pointers; EINTR just retries.
    while unsafe { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, ptr::null_mut()) } != 0 {}
}

pub fn sleep(seconds: f64) {
    sleep_until(wall() + seconds);
}

/// `key=value` arguments; every key must be read, or the run is refused.
pub struct Args {
    values: HashMap<String, String>,
    used: Vec<String>,
}

impl Args {
    pub fn parse(items: &[String]) -> Result<Args, String> {
        let mut values = HashMap::new();
        for item in items {
            match item.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    values.insert(k.to_string(), v.to_string());
                }
                _ => return Err(format!("expected key=value, got '{}'", item)),
            }
        }
        Ok(Args { values, used: Vec::new() })
    }

    pub fn string(&mut self, key: &str, fallback: &str) -> String {
        self.used.push(key.to_string());
        self.values.get(key).cloned().unwrap_or_else(|| fallback.to_string())
    }

    pub fn number(&mut self, key: &str, fallback: u64) -> u64 {
        let text = self.string(key, &fallback.to_string());
        text.parse().unwrap_or_else(|_| fail(&format!("{}={} is not a non-negative integer", key, text)))
    }

    pub fn unused(&self) -> Option<&String> {
        self.values.keys().find(|k| !self.used.contains(k))
    }
}

pub fn fail(what: &str) -> ! {
    eprintln!("bench: {}", what);
    std::process::exit(1)
}

/// The q-quantile (0..1) by the nearest rank.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = ((q * sorted.len() as f64 + 0.999_999) as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One run's result, printed as the same JSON line as bench/harness.c.
/// The runtime under Rayon's API: "Rayon" natively; bench/rayon-on-blitz
/// builds this same program on libblitz and names it in its build script.
const IMPL: &str = match option_env!("BENCH_IMPL") {
    Some(name) => name,
    None => "Rayon",
};

pub struct Report {
    pub workload: String,
    pub threads: usize,
    pub wall: f64,
    pub cpu: f64,
    pub metric: f64,
    pub unit: &'static str,
    pub checksum: String,
    pub extra: Vec<(&'static str, f64)>,
    pub samples: Vec<(&'static str, Vec<f64>)>,
}

impl Report {
    pub fn new(workload: &str, threads: usize) -> Report {
        Report {
            workload: workload.to_string(),
            threads,
            wall: 0.0,
            cpu: 0.0,
            metric: 0.0,
            unit: "",
            checksum: String::new(),
            extra: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// Times f as the measured region.
    pub fn measure<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let c0 = cpu();
        let w0 = wall();
        let value = f();
        self.wall = wall() - w0;
        self.cpu = cpu() - c0;
        value
    }

    pub fn print(&self) {
        let mut line = format!(
            "{{\"impl\":\"{}\",\"workload\":\"{}\",\"threads\":{},\"wall_s\":{:e},\"cpu_s\":{:e},\
             \"cpu_per_wall\":{:.4},\"metric\":{:e},\"unit\":\"{}\",\"checksum\":\"{}\",\"extra\":{{",
            IMPL,
            self.workload,
            self.threads,
            self.wall,
            self.cpu,
            if self.wall > 0.0 { self.cpu / self.wall } else { 0.0 },
            self.metric,
            self.unit,
            self.checksum
        );
        let extras: Vec<String> = self.extra.iter().map(|(k, v)| format!("\"{}\":{:e}", k, v)).collect();
        line.push_str(&extras.join(","));
        line.push('}');
        for (key, values) in &self.samples {
            let list: Vec<String> = values.iter().map(|v| format!("{:.4}", v)).collect();
            line.push_str(&format!(",\"{}\":[{}]", key, list.join(",")));
        }
        line.push('}');
        println!("{}", line);
    }
}

#[cfg(target_arch = "x86_64")]
const SYS_FUTEX: i64 = 202;
#[cfg(target_arch = "aarch64")]
const SYS_FUTEX: i64 = 98;
const FUTEX_WAIT_PRIVATE: i32 = 128;
const FUTEX_WAKE_PRIVATE: i32 = 129;

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: word is a live, aligned u32; a spurious return is re-checked by the caller.
    unsafe { syscall(SYS_FUTEX, word as *const AtomicU32, FUTEX_WAIT_PRIVATE, expected, ptr::null::<u8>()) };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: word is a live, aligned u32.
    unsafe { syscall(SYS_FUTEX, word as *const AtomicU32, FUTEX_WAKE_PRIVATE, 1i32) };
}

/// The raw futex wake-to-run latency, as harness.c's futex_floor measures it.
pub struct FutexFloor {
    shared: std::sync::Arc<FloorShared>,
    waiter: Option<std::thread::JoinHandle<()>>,
}

struct FloorShared {
    round: AtomicU32, // 2k: the waiter sleeps; 2k+1: wake up; 2k+2: it ran
    posted_bits: std::sync::atomic::AtomicU64,
    latency_bits: std::sync::atomic::AtomicU64,
    waiter_cpu: std::sync::atomic::AtomicI32, // where the waiter ran after the wake-up
}

const FLOOR_STOP: u32 = u32::MAX;

impl FutexFloor {
    pub fn start() -> FutexFloor {
        let shared = std::sync::Arc::new(FloorShared {
            round: AtomicU32::new(0),
            posted_bits: Default::default(),
            latency_bits: Default::default(),
            waiter_cpu: Default::default(),
        });
        let s = shared.clone();
        let waiter = std::thread::spawn(move || {
            let mut sleeping = 0u32;
            loop {
                // Acquire: posted_bits, stored before the release of the round, is read below.
                let mut now = s.round.load(Ordering::Acquire);
                while now == sleeping {
                    futex_wait(&s.round, sleeping);
                    now = s.round.load(Ordering::Acquire);
                }
                if now == FLOOR_STOP {
                    return;
                }
                let latency = wall() - f64::from_bits(s.posted_bits.load(Ordering::Relaxed));
                s.latency_bits.store(latency.to_bits(), Ordering::Relaxed); // published by the release below
                s.waiter_cpu.store(current_cpu(), Ordering::Relaxed); // published by the release below
                s.round.store(sleeping + 2, Ordering::Release); // release: the poster reads latency_bits after it
                futex_wake(&s.round);
                sleeping += 2;
            }
        });
        FutexFloor { shared, waiter: Some(waiter) }
    }

    /// One sample in microseconds, and whether the waiter ran on the CPU
    /// the post was made from; the waiter has slept since the last one.
    pub fn sample(&self) -> (f64, bool) {
        let s = &self.shared;
        let sleeping = s.round.load(Ordering::Relaxed); // relaxed: only this thread posts
        let poster_cpu = current_cpu();
        s.posted_bits.store(wall().to_bits(), Ordering::Relaxed); // published by the release below
        s.round.store(sleeping + 1, Ordering::Release); // release: publishes posted_bits
        futex_wake(&s.round);
        // Acquire: pairs with the waiter's release so that latency_bits is visible.
        while s.round.load(Ordering::Acquire) != sleeping + 2 {
            futex_wait(&s.round, sleeping + 1);
        }
        let same_cpu = s.waiter_cpu.load(Ordering::Relaxed) == poster_cpu;
        (f64::from_bits(s.latency_bits.load(Ordering::Relaxed)) * 1e6, same_cpu)
    }
}

impl Drop for FutexFloor {
    fn drop(&mut self) {
        self.shared.round.store(FLOOR_STOP, Ordering::Release); // release: the waiter exits after seeing it
        futex_wake(&self.shared.round);
        if let Some(w) = self.waiter.take() {
            let _ = w.join();
        }
    }
}

/// The tiny task's slots: slot i receives i + 1 (as bench_tiny_task in kernels.c).
static SLOTS: AtomicPtr<AtomicU32> = AtomicPtr::new(ptr::null_mut());
static SLOT_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Replaces the slots by `count` zeroes; no task may be running.
pub fn tiny_prepare(count: usize) {
    let old = SLOTS.load(Ordering::Relaxed); // relaxed: no task runs now
    if !old.is_null() {
        let n = SLOT_COUNT.load(Ordering::Relaxed);
        // SAFETY: old came from Box::into_raw of a boxed slice of n slots.
        drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(old, n)) });
    }
    let slots: Box<[AtomicU32]> = (0..count.max(1)).map(|_| AtomicU32::new(0)).collect();
    SLOT_COUNT.store(count.max(1), Ordering::Relaxed); // relaxed: read by this thread only
    // Relaxed: the tasks that read it are submitted later, and submission synchronizes.
    SLOTS.store(Box::into_raw(slots) as *mut AtomicU32, Ordering::Relaxed);
}

pub fn tiny_task(i: usize) {
    // Relaxed: the pointer was published before the task was submitted.
    let slots = SLOTS.load(Ordering::Relaxed);
    // SAFETY: i < count, and the slots live until the next tiny_prepare, after every task ran.
    unsafe { (*slots.add(i)).store(i as u32 + 1, Ordering::Relaxed) }; // relaxed: read after the wait
}

pub fn tiny_checksum(count: usize) -> u64 {
    let slots = SLOTS.load(Ordering::Relaxed); // relaxed: the tasks' wait synchronized
    // SAFETY: count slots exist.
    (0..count).map(|i| unsafe { (*slots.add(i)).load(Ordering::Relaxed) } as u64).sum()
}
