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
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::daemon::{sample, TestConfig};
use crate::pace::Pace;

/// Lines a stream gave so far, collected by a thread of their own.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<String>>);

impl Lines {
    fn collect(stream: impl Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut text = sink.0.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&line);
                text.push('\n');
            }
        });
        lines
    }

    fn text(&self) -> String {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[test]
fn ctrl_c_to_the_demos_process_group_ends_with_offline_printed_and_nothing_left_running() {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a free port").port();
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
    let describe = || format!("stdout:\n{}\nstderr:\n{}", stdout.text(), stderr.text());

    let wait = Pace::measured().daemon_wait();
    let deadline = Instant::now() + wait;
    // The main loop handles SIGINT; before it, a start-up ends at once by design.
    while !(stdout.text().contains("jetson-detectd/demo-sigint/status online") && stderr.text().contains("running:")) {
        assert!(child.try_wait().expect("try_wait").is_none(), "the demo ended early\n{}", describe());
        assert!(Instant::now() < deadline, "the demo's daemon did not come up within {wait:?}\n{}", describe());
        std::thread::sleep(Duration::from_millis(50));
    }

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
