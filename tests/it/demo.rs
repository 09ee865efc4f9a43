//! `bash .ci/demo`, the first thing everyone runs, stopped the way a terminal stops it (issue 33,
//! item 7): Ctrl-C sends SIGINT to the terminal's whole foreground process group. The demo's
//! broker and subscriber used to share that group and die first, so the daemon logged connection
//! errors and `offline` was never printed.
//!
//! Here the demo runs in a process group of its own (as under a terminal), on the binary this test
//! run built (`DEMO_BINARY`), on a broker port of its own (`DEMO_MQTT_PORT`, `DEMO_CONFIG`), and
//! gets SIGINT as a group. Native only: the script starts the binary itself, which an aarch64
//! binary under qemu-user cannot be.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::daemon::{sample, TestConfig};
use crate::pace::Pace;

/// Lines a stream gave so far, collected by a thread of their own.
#[derive(Clone, Default)]
struct Lines {
    text: Arc<Mutex<String>>,
    /// The stream ended: every process that held it closed it.
    ended: Arc<AtomicBool>,
}

impl Lines {
    fn collect(stream: impl Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut text = sink.text.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
            sink.ended.store(true, Ordering::Release);
        });
        lines
    }

    fn text(&self) -> String {
        self.text.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Waits until the stream has ended, at most `wait`.
    fn wait_for_end(&self, wait: Duration) {
        let deadline = Instant::now() + wait;
        while !self.ended.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Starts of the demo on another port when the one the test found free was taken before the
/// demo's broker bound it.
const DEMO_STARTS: usize = 5;

/// The demo running in a process group of its own, its daemon up and its subscriber printing.
struct Demo {
    child: Child,
    group: libc::pid_t,
    port: u16,
    stdout: Lines,
    stderr: Lines,
    _dir: tempfile::TempDir,
}

impl Demo {
    /// Starts the demo on a free port and waits for its daemon's `online`. The port is one the
    /// test found free and released (mosquitto cannot say which port it bound): when another
    /// listener took it first, the demo says so (its broker did not start, or it found a broker
    /// already there), and the demo is started again on another port.
    fn start(wait: Duration) -> Demo {
        for _ in 0..DEMO_STARTS {
            let port =
                TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a free port");
            let mut demo = Demo::spawn(port.port());
            let deadline = Instant::now() + wait;
            // The main loop handles SIGINT; before it, a start-up ends at once by design.
            while !(demo.stdout.text().contains("jetson-detectd/demo-sigint/status online")
                && demo.stderr.text().contains("running:"))
            {
                if let Some(status) = demo.child.try_wait().expect("try_wait") {
                    // Its last words may still be on their way through the pipe.
                    demo.stderr.wait_for_end(wait);
                    assert!(demo.port_was_taken(), "the demo ended early ({status})\n{}", demo.describe());
                }
                if demo.port_was_taken() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the demo's daemon did not come up within {wait:?}\n{}",
                    demo.describe()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            if !demo.port_was_taken() {
                return demo;
            }
            eprintln!(
                "port {} was taken before the demo's broker bound it: starting it again\n{}",
                demo.port,
                demo.describe()
            );
            demo.stop(wait);
        }
        panic!("the demo's broker port was taken at each of {DEMO_STARTS} starts");
    }

    fn spawn(port: u16) -> Demo {
        let dir = tempfile::tempdir().expect("tempdir");
        let samples = sample("dog.jpg").parent().expect("the samples' directory").to_path_buf();
        let config = TestConfig::new(port, "jetson-detectd/demo-sigint")
            .camera(
                "demo",
                2.0,
                &format!(
                    "{{ kind = \"images\", path = {:?}, mode = \"loop\", hold_s = 3.0 }}",
                    samples.display().to_string()
                ),
            )
            .write(&dir.path().join("demo.toml"));
        let mut demo = Command::new("bash");
        demo.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/demo"))
            .env("DEMO_BINARY", env!("CARGO_BIN_EXE_jetson-detectd"))
            .env("DEMO_CONFIG", &config)
            .env("DEMO_MQTT_PORT", port.to_string())
            .env_remove("DEMO_SECONDS")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A process group of its own, led by the demo: what a terminal gives a foreground job.
            .process_group(0);
        let mut child = demo.spawn().expect("start bash .ci/demo");
        let group = libc::pid_t::try_from(child.id()).expect("pid");
        let stdout = Lines::collect(child.stdout.take().expect("stdout"));
        let stderr = Lines::collect(child.stderr.take().expect("stderr"));
        Demo { child, group, port, stdout, stderr, _dir: dir }
    }

    /// Whether another listener had the port: the demo's broker could not bind it, or the demo
    /// found something listening there and took it for a broker.
    fn port_was_taken(&self) -> bool {
        self.stderr.text().contains("demo: mosquitto did not start")
            || self.stdout.text().contains("demo: using the broker already listening")
    }

    /// Ends the demo as Ctrl-C does (its exit trap ends the subscriber and the broker it started,
    /// which have sessions of their own), by SIGKILL to its group if it is still there after `wait`.
    fn stop(mut self, wait: Duration) {
        // SAFETY: kill has no memory-safety preconditions; the group is the demo's, led by our child.
        unsafe { libc::kill(-self.group, libc::SIGINT) };
        let deadline = Instant::now() + wait;
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    fn describe(&self) -> String {
        printed(&self.stdout, &self.stderr)
    }
}

/// What the demo printed, for a failure's message.
fn printed(stdout: &Lines, stderr: &Lines) -> String {
    format!("stdout:\n{}\nstderr:\n{}", stdout.text(), stderr.text())
}

/// Issue 50, item 5: the demo printed every frame's detections, which buried its events, and a
/// `controls/record ON` of a camera that records nothing. It prints the events and leaves the
/// detections out (unless `DEMO_DETECTIONS=1`), and a camera without clips has no recording switch
/// (nor, without `[motion]`, a motion gating switch: issue 48).
#[test]
fn the_demo_prints_events_without_detections_and_ctrl_c_ends_it_with_offline_printed_and_nothing_left_running() {
    let wait = Pace::measured().daemon_wait();
    let Demo { mut child, group, port, stdout, stderr, _dir } = Demo::start(wait);
    let describe = || printed(&stdout, &stderr);

    // An event comes after the detections of the frames that confirmed its track: had the
    // subscriber printed detections, they would be in the terminal by then.
    let deadline = Instant::now() + wait;
    while !stdout.text().lines().any(|line| line.starts_with("jetson-detectd/demo-sigint/demo/events ")) {
        assert!(Instant::now() < deadline, "no event printed within {wait:?}\n{}", describe());
        std::thread::sleep(Duration::from_millis(50));
    }
    let terminal = stdout.text();
    assert!(!terminal.contains("/detections "), "the per-frame detections are left out\n{}", describe());
    assert!(!terminal.contains("/controls/record"), "no recording switch without clips\n{}", describe());
    assert!(!terminal.contains("/controls/gating"), "no motion gating switch without [motion]\n{}", describe());

    // SAFETY: kill has no memory-safety preconditions; the group is the demo's, led by our child.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGINT) }, 0, "kill: {}", std::io::Error::last_os_error());
    let deadline = Instant::now() + wait;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: as above; the group's processes are ours to end.
            unsafe { libc::kill(-group, libc::SIGKILL) };
            panic!("the demo did not end within {wait:?} of Ctrl-C\n{}", describe());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // The readers see the end of both pipes once the broker and subscriber are gone too.
    std::thread::sleep(Duration::from_millis(200));

    assert!(status.success(), "{status}\n{}", describe());
    let printed = stdout.text();
    assert!(
        printed.lines().any(|line| line == "jetson-detectd/demo-sigint/status offline"),
        "the subscriber printed the daemon's offline\n{}",
        describe()
    );
    let log = stderr.text();
    assert!(log.contains("SIGINT: shutting down"), "{}", describe());
    assert!(!log.contains("ERROR"), "a clean stop logs no error\n{}", describe());
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the demo's broker still runs after the demo\n{}",
        describe()
    );
}
