//! JoinHandle and spawn_future as std futures: woken from the task's
//! on_done, driven here by a minimal block_on written for the test (no
//! executor crate), with several wakers, early drops and inline polls.
//! Atomics are counters read after a join or a channel that orders them;
//! SeqCst only for simplicity.
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use blitz::{Error, ThreadPool, ThreadPoolBuilder};

mod common;
use common::{message, quiet_panics, Watchdog};

fn pool(n: usize) -> ThreadPool {
    ThreadPoolBuilder::new().num_threads(n).build().expect("build")
}

/// A waker that unparks the thread that made it and counts its wakes.
struct Unpark {
    thread: Thread,
    wakes: AtomicUsize,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn unpark_waker() -> (Arc<Unpark>, Waker) {
    let unpark = Arc::new(Unpark { thread: thread::current(), wakes: AtomicUsize::new(0) });
    (Arc::clone(&unpark), Waker::from(unpark))
}

/// The smallest executor: poll, park until woken, poll again. A lost
/// wake-up parks for ever (the watchdog then fails the test).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = Box::pin(future);
    let (_unpark, waker) = unpark_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        thread::park();
    }
}

/// Counts its drops: the value or closure of a task is dropped exactly once.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn spawn_future_gives_the_value() {
    let _watchdog = Watchdog::new("spawn_future_gives_the_value", 60);
    let pool = pool(2);
    assert_eq!(block_on(pool.spawn_future(|| 6 * 7)), 42);
    let futures: Vec<_> = (0..200u64).map(|i| pool.spawn_future(move || i * i)).collect();
    let sum: u64 = futures.into_iter().map(block_on).sum();
    assert_eq!(sum, (0..200u64).map(|i| i * i).sum());
    // The free function: on the global pool from here, on the worker's pool inside it.
    assert_eq!(block_on(blitz::spawn_future(|| blitz::current_thread_index().is_some())), true);
    let inner = pool.install(|| blitz::spawn_future(|| blitz::current_thread_index()));
    assert!(matches!(block_on(inner), Some(index) if index < 2));
}

#[test]
fn join_handle_is_a_future_of_joins_result() {
    let _watchdog = Watchdog::new("join_handle_is_a_future_of_joins_result", 60);
    quiet_panics();
    let pool = pool(2);
    assert_eq!(block_on(pool.spawn_with_handle(|| "seven")).unwrap(), "seven");
    match block_on(pool.spawn_with_handle(|| -> u8 { panic!("in the task") })) {
        Err(Error::TaskPanicked(Some(payload))) => assert_eq!(message(&*payload.into_inner()), "in the task"),
        other => panic!("expected the task's panic, got {:?}", other.map(|_| ())),
    }
    // A finished handle that is_finished already looked at: ready at the first poll.
    let handle = pool.spawn_with_handle(|| 5);
    while !handle.is_finished() {
        thread::yield_now();
    }
    let mut handle = Box::pin(handle);
    let (unpark, waker) = unpark_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(handle.as_mut().poll(&mut cx), Poll::Ready(Ok(5))));
    assert!(matches!(handle.as_mut().poll(&mut cx), Poll::Ready(Err(Error::InvalidArgument))));
    assert_eq!(unpark.wakes.load(Ordering::SeqCst), 0);
}

#[test]
fn spawn_future_resumes_the_panic_in_the_poll() {
    let _watchdog = Watchdog::new("spawn_future_resumes_the_panic_in_the_poll", 60);
    quiet_panics();
    let pool = pool(2);
    let future = pool.spawn_future(|| -> u8 { panic!("from the pool") });
    let caught = panic::catch_unwind(AssertUnwindSafe(|| block_on(future))).unwrap_err();
    assert_eq!(message(&*caught), "from the pool");
}

#[test]
fn the_latest_pollers_waker_is_woken_once() {
    let _watchdog = Watchdog::new("the_latest_pollers_waker_is_woken_once", 60);
    let pool = pool(2);
    let (go, wait) = mpsc::channel::<()>();
    let mut future = Box::pin(pool.spawn_future(move || {
        wait.recv().unwrap();
        11
    }));
    let (first, first_waker) = unpark_waker();
    let (second, second_waker) = unpark_waker();
    assert!(future.as_mut().poll(&mut Context::from_waker(&first_waker)).is_pending());
    assert!(future.as_mut().poll(&mut Context::from_waker(&second_waker)).is_pending());
    // The same waker again is kept, not cloned anew.
    assert!(future.as_mut().poll(&mut Context::from_waker(&second_waker)).is_pending());
    go.send(()).unwrap();
    while second.wakes.load(Ordering::SeqCst) == 0 {
        thread::park();
    }
    assert_eq!(first.wakes.load(Ordering::SeqCst), 0, "a replaced waker was woken");
    assert!(matches!(future.as_mut().poll(&mut Context::from_waker(&second_waker)), Poll::Ready(11)));
    assert_eq!(second.wakes.load(Ordering::SeqCst), 1);
    // Once the pool has ended (the worker may still be leaving the wake),
    // only the test holds the wakers: the task kept none.
    drop(future);
    let registry = Arc::clone(&pool.registry);
    drop(pool);
    registry.wait_until_stopped();
    assert_eq!(Arc::strong_count(&first), 2); // `first` and `first_waker`
    assert_eq!(Arc::strong_count(&second), 2);
}

#[test]
fn polls_from_several_threads_each_see_the_end() {
    let _watchdog = Watchdog::new("polls_from_several_threads_each_see_the_end", 60);
    let pool = pool(2);
    // Futures moved between threads (Send) and polled from each in turn:
    // whichever thread polled last is woken.
    for round in 0..50u64 {
        let (go, wait) = mpsc::channel::<()>();
        let mut future = Box::pin(pool.spawn_future(move || {
            wait.recv().unwrap();
            round
        }));
        let (unpark, waker) = unpark_waker();
        assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
        let future = thread::spawn(move || {
            let (_, waker) = unpark_waker();
            let _ = future.as_mut().poll(&mut Context::from_waker(&waker));
            future
        })
        .join()
        .unwrap();
        go.send(()).unwrap();
        // The other thread's waker (the latest) gets the wake; ours does not.
        assert_eq!(block_on(future), round);
        assert_eq!(unpark.wakes.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn dropping_a_pending_future_detaches_the_task() {
    let _watchdog = Watchdog::new("dropping_a_pending_future_detaches_the_task", 60);
    let pool = pool(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let (unpark, waker) = unpark_waker();
    let (go, wait) = mpsc::channel::<()>();
    let (ran, ran_wait) = mpsc::channel::<()>();
    let value = DropCount(Arc::clone(&drops));
    let mut future = Box::pin(pool.spawn_future(move || {
        wait.recv().unwrap();
        ran.send(()).unwrap();
        value
    }));
    assert!(future.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    drop(future); // returns at once: the task still waits for `go`
    assert_eq!(Arc::strong_count(&unpark), 2, "the dropped future let its waker go at once");
    go.send(()).unwrap();
    ran_wait.recv().unwrap();
    // Never polled, and dropped before its task started: the closure is
    // dropped unrun or run; either way exactly once.
    let never_polled = pool.spawn_future({
        let value = DropCount(Arc::clone(&drops));
        move || value
    });
    drop(never_polled);
    let registry = Arc::clone(&pool.registry);
    drop(pool);
    registry.wait_until_stopped(); // every task ended, the jobs freed
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(unpark.wakes.load(Ordering::SeqCst), 0);
    assert_eq!(Arc::strong_count(&unpark), 2);
}

#[test]
fn a_cancelled_handle_is_ready_with_cancelled() {
    let _watchdog = Watchdog::new("a_cancelled_handle_is_ready_with_cancelled", 60);
    let pool = pool(1);
    let (go, wait) = mpsc::channel::<()>();
    let busy = pool.spawn_with_handle(move || wait.recv().unwrap()); // the only worker, held
    let mut queued = Box::pin(pool.spawn_with_handle(|| 7));
    let (unpark, waker) = unpark_waker();
    assert!(queued.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    queued.cancel();
    go.send(()).unwrap();
    assert!(matches!(block_on(busy), Ok(())));
    while unpark.wakes.load(Ordering::SeqCst) == 0 {
        thread::park();
    }
    assert!(matches!(queued.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(Err(Error::Cancelled))));
}

/// A waker whose wake polls the future at once, on the worker, inside the
/// task's on_done: the task has finished by then (on_done runs after the
/// end), so the inline poll is ready rather than a deadlock or a Pending
/// that nobody would wake again.
struct PollInline {
    future: Mutex<Option<Pin<Box<blitz::JoinHandle<u32>>>>>,
    result: Mutex<Option<mpsc::Sender<Poll<Result<u32, Error>>>>>,
}

impl Wake for PollInline {
    fn wake(self: Arc<Self>) {
        let waker = Waker::from(Arc::clone(&self));
        let mut future = self.future.lock().unwrap();
        let poll = future.as_mut().unwrap().as_mut().poll(&mut Context::from_waker(&waker));
        if let Some(result) = self.result.lock().unwrap().take() {
            result.send(poll).unwrap();
        }
    }
}

#[test]
fn a_wake_that_polls_inline_finds_the_value() {
    let _watchdog = Watchdog::new("a_wake_that_polls_inline_finds_the_value", 60);
    let pool = pool(2);
    let (go, wait) = mpsc::channel::<()>();
    let (result, result_wait) = mpsc::channel();
    let inline = Arc::new(PollInline {
        future: Mutex::new(Some(Box::pin(pool.spawn_with_handle(move || {
            wait.recv().unwrap();
            99u32
        })))),
        result: Mutex::new(Some(result)),
    });
    {
        let waker = Waker::from(Arc::clone(&inline));
        let mut future = inline.future.lock().unwrap();
        assert!(future.as_mut().unwrap().as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    }
    go.send(()).unwrap();
    assert!(matches!(result_wait.recv().unwrap(), Poll::Ready(Ok(99))));
    drop(inline.future.lock().unwrap().take());
}
