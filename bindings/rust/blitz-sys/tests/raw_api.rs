//! The raw functions called the way C calls them: a smoke test of linking,
//! of the calling convention of every kind of callback, and of the statuses.
//! The atomics are counters read after the call that waited for them, which
//! already orders them; SeqCst is used only for simplicity.
use std::ffi::CString;
use std::os::raw::c_void;
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use blitz_sys::*;

unsafe fn pool(threads: u32) -> *mut blz_pool {
    let mut config = std::mem::zeroed::<blz_pool_config>();
    blz_pool_config_init(&mut config);
    assert_eq!(config.struct_size as usize, std::mem::size_of::<blz_pool_config>());
    config.num_threads = threads;
    let mut pool = ptr::null_mut();
    assert_eq!(blz_pool_create(&config, &mut pool), BLZ_OK);
    pool
}

unsafe extern "C" fn add_one(arg: *mut c_void) {
    (*(arg as *const AtomicUsize)).fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn sum_range(arg: *mut c_void, begin: usize, end: usize) {
    (*(arg as *const AtomicUsize)).fetch_add((begin..end).sum::<usize>(), Ordering::SeqCst);
}

static STARTED: AtomicU32 = AtomicU32::new(0);
static STOPPED: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn on_start(user: *mut c_void, index: u32) {
    assert_eq!(user as usize, 0x5eed);
    STARTED.fetch_or(1 << index, Ordering::SeqCst);
}

unsafe extern "C" fn on_stop(_user: *mut c_void, index: u32) {
    STOPPED.fetch_or(1 << index, Ordering::SeqCst);
}

#[test]
fn pool_lifecycle_hooks_and_names() {
    unsafe {
        let name = CString::new("rawtest").unwrap();
        let mut config = std::mem::zeroed::<blz_pool_config>();
        blz_pool_config_init(&mut config);
        config.num_threads = 2;
        config.thread_name = name.as_ptr();
        config.on_thread_start = Some(on_start);
        config.on_thread_stop = Some(on_stop);
        config.user = 0x5eed as *mut c_void;
        let mut pool = ptr::null_mut();
        assert_eq!(blz_pool_create(&config, &mut pool), BLZ_OK);
        assert_eq!(blz_pool_num_threads(pool), 2);
        assert_eq!(blz_worker_index(pool), -1);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
        assert_eq!(STARTED.load(Ordering::SeqCst), 0b11);
        assert_eq!(STOPPED.load(Ordering::SeqCst), 0b11);
    }
}

#[test]
fn every_kind_of_submission() {
    unsafe {
        let pool = pool(2);
        let count = AtomicUsize::new(0);
        let arg = &count as *const AtomicUsize as *mut c_void;

        assert_eq!(blz_fork_join(pool, Some(add_one), arg, Some(add_one), arg), BLZ_OK);
        assert_eq!(blz_call(pool, Some(add_one), arg), BLZ_OK);
        let mut task = ptr::null_mut();
        assert_eq!(blz_spawn(pool, Some(add_one), arg, &mut task), BLZ_OK);
        assert_eq!(blz_join(task), BLZ_OK);
        let mut group = ptr::null_mut();
        assert_eq!(blz_group_create(pool, &mut group), BLZ_OK);
        for _ in 0..10 {
            assert_eq!(blz_group_spawn(group, Some(add_one), arg), BLZ_OK);
        }
        assert_eq!(blz_group_wait(group), BLZ_OK);
        assert_eq!(blz_group_destroy(group), BLZ_OK);
        assert_eq!(count.load(Ordering::SeqCst), 14);

        let sum = AtomicUsize::new(0);
        let sum_arg = &sum as *const AtomicUsize as *mut c_void;
        assert_eq!(blz_parallel_for(pool, 0, 1000, 0, Some(sum_range), sum_arg), BLZ_OK);
        assert_eq!(sum.load(Ordering::SeqCst), 999 * 1000 / 2);

        let mut stats = blz_stats { struct_size: std::mem::size_of::<blz_stats>() as u32, ..Default::default() };
        assert_eq!(blz_pool_stats(pool, &mut stats), BLZ_OK);
        assert_eq!(stats.num_threads, 2);
        assert!(stats.jobs_executed >= 13, "{:?}", stats);
        // A shorter struct gets its prefix only.
        let mut short = blz_stats { struct_size: 8, num_threads: 0, sleeping_now: 77, ..Default::default() };
        assert_eq!(blz_pool_stats(pool, &mut short), BLZ_OK);
        assert_eq!((short.num_threads, short.sleeping_now), (2, 77));

        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

#[test]
fn bad_arguments_give_einval() {
    unsafe {
        assert_eq!(blz_pool_create(ptr::null(), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_join(ptr::null_mut()), BLZ_EINVAL);
        let mut config = std::mem::zeroed::<blz_pool_config>();
        blz_pool_config_init(&mut config);
        config.num_threads = BLZ_MAX_THREADS + 1;
        let mut pool = ptr::null_mut();
        assert_eq!(blz_pool_create(&config, &mut pool), BLZ_EINVAL);
        assert!(pool.is_null());
        let pool = pool_or_default();
        assert_eq!(blz_fork_join(pool, None, ptr::null_mut(), Some(add_one), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_parallel_for(pool, 5, 4, 0, Some(sum_range), ptr::null_mut()), BLZ_EINVAL);
        assert_eq!(blz_pool_destroy(pool), BLZ_OK);
    }
}

unsafe fn pool_or_default() -> *mut blz_pool {
    let mut pool = ptr::null_mut();
    assert_eq!(blz_pool_create(ptr::null(), &mut pool), BLZ_OK);
    pool
}
