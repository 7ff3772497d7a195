//! Helpers shared by the test programs: a watchdog that turns a hang into
//! a failure, child processes for outcomes that end a process (an abort),
//! and quiet panics.
#![allow(dead_code)]

use std::io::Write as _;
use std::panic;
use std::process::{Command, ExitStatus};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Aborts the whole test program, naming the test, unless dropped within
/// `seconds`: a deadlock or a lost wake-up fails with a message instead of
/// hanging `cargo test` (which has no per-test timeout).
pub struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn new(what: &'static str, seconds: u64) -> Watchdog {
        let (done, wait) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            // A message or a disconnect (the guard was dropped, also by a
            // panic) both mean the test is over.
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(Duration::from_secs(seconds)) {
                // Straight to the file descriptor: libtest captures eprintln!
                // of the test's threads, and the abort would lose it.
                let _ = writeln!(std::io::stderr(), "WATCHDOG: '{}' still running after {} s: a hang", what, seconds);
                std::process::abort();
            }
        });
        Watchdog { done: Some(done), thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The variable that tells a copy of this test program which child case to run.
pub const CHILD: &str = "BLITZ_TEST_CHILD";

/// The child case this process runs, if it is a child.
pub fn child_case() -> Option<String> {
    std::env::var(CHILD).ok()
}

/// Runs the test `test` of this very program in a child process with
/// `BLITZ_TEST_CHILD=case` (and `env`), and returns how it ended. The test
/// function checks `child_case()` first and runs the child's part.
pub fn run_child(test: &str, case: &str, env: &[(&str, &str)]) -> (ExitStatus, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let mut command = Command::new(exe);
    command.args(["--exact", test, "--nocapture", "--test-threads=1"]).env(CHILD, case);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run the child");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status, text)
}

/// Whether a child ended by SIGABRT.
pub fn aborted(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(6)
}

/// The text of a panic payload.
pub fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "?".to_string()
    }
}

/// Silences the default panic message for the panics the tests cause on
/// purpose (their message says "on purpose").
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !info.to_string().contains("on purpose") {
                default(info);
            }
        }));
    });
}

/// Polls `done` until it holds, at most a minute: a bound that turns a
/// hang into a failure, never a timing a test relies on.
pub fn within_a_minute(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(1));
    }
    true
}
