//! A command that must end by itself, run to its end with a bound: it is killed, and the test fails,
//! when it is still running after [`Pace::daemon_wait`]. Reports how it ended: exit status, output
//! and peak resident memory.
//!
//! Only runs and reports: what the status, output or memory must be is each test's to assert (the
//! hostile tests bound the memory, for one). Output is read while the command runs, so a command
//! that writes more than a pipe holds does not stall.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::pace::Pace;

/// How a command that was expected to end by itself ended.
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident memory in bytes (`wait4`'s `ru_maxrss`) of that child alone, not of this
    /// process nor of the children of tests running beside it. Under qemu-user it is qemu's.
    pub peak_rss: u64,
}

impl Ended {
    /// Exit status 78 (a config problem, which systemd does not restart) with every `wanted` text
    /// in stderr, and no panic.
    pub fn assert_config_error(&self, what: &str, wanted: &[&str]) {
        assert_eq!(self.status.code(), Some(78), "{what}: {}\n{}", self.status, self.stderr);
        for text in wanted {
            assert!(self.stderr.contains(text), "{what}: stderr must name {text:?}:\n{}", self.stderr);
        }
        assert!(!self.stderr.contains("panicked"), "{what}:\n{}", self.stderr);
    }
}

/// Runs `command` with stdin closed to its end; kills it and fails when it has not ended within
/// [`Pace::daemon_wait`].
#[allow(clippy::zombie_processes, reason = "the child is reaped by wait4, which also reports its peak memory")]
pub fn run_to_end(what: &str, mut command: Command) -> Ended {
    let limit = Pace::measured().daemon_wait();
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start {command:?}: {e}"));
    let readers = [
        child.stdout.take().map(|pipe| Box::new(pipe) as Box<dyn Read + Send>),
        child.stderr.take().map(|pipe| Box::new(pipe) as _),
    ]
    .map(|pipe| {
        let mut pipe = pipe.expect("piped");
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    });
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: rusage is plain old data, for which all-zero bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut hung = false;
    loop {
        // SAFETY: `pid` is our own child, reaped only here (std's wait is never called);
        // `status` and `usage` are valid, exclusive out-pointers for the duration of the call.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if reaped == pid {
            break;
        }
        assert_eq!(reaped, 0, "{what}: wait4: {}", std::io::Error::last_os_error());
        if !hung && started.elapsed() > limit {
            hung = true;
            // SAFETY: kill has no memory-safety preconditions; the pid is our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let [stdout, stderr] = readers.map(|reader| reader.join().expect("reader thread"));
    assert!(!hung, "{what}: still running after {limit:?}, killed; stderr:\n{stderr}");
    let peak_rss = u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024;
    Ended { status: ExitStatus::from_raw(status), stdout, stderr, peak_rss }
}
