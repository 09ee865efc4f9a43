//! An RTSP camera that goes offline, end to end (feature `gstreamer`): a real RTSP server (Debian's
//! gst-rtsp-server through python3-gi, `rtsp_server.py`) is killed while the daemon streams from it
//! and restarted later. Meanwhile systemd's keep-alives must keep coming (an offline camera is not a
//! hung daemon), `STATUS=` and telemetry must name the camera's state, and the other camera must go
//! on; when the server is back, the camera's detections resume.
//!
//! Skipped, saying what to install, where the server or the GStreamer plugins are missing (CI installs
//! them: `.ci/run`).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::{Broker, Subscriber};
use crate::daemon::{position, sample_source, FakeSystemd, RunningDaemon, TestConfig};
use crate::pace::Pace;

/// Elements the server and the daemon's pipeline need, and the Debian packages they come in.
const ELEMENTS: [(&str, &str); 8] = [
    ("videotestsrc", "gstreamer1.0-plugins-base"),
    ("videoconvert", "gstreamer1.0-plugins-base"),
    ("appsink", "gstreamer1.0-plugins-base"),
    ("jpegenc", "gstreamer1.0-plugins-good"),
    ("jpegdec", "gstreamer1.0-plugins-good"),
    ("rtpjpegpay", "gstreamer1.0-plugins-good"),
    ("rtpjpegdepay", "gstreamer1.0-plugins-good"),
    ("rtspsrc", "gstreamer1.0-plugins-good"),
];

/// A Python that has GObject introspection for gst-rtsp-server (Debian's own, not a pyenv one).
fn python_with_rtsp_server() -> Option<&'static str> {
    let check = "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer";
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|python| Command::new(python).args(["-c", check]).output().is_ok_and(|output| output.status.success()))
}

/// `Ok(python)` when the test can run, else why not.
fn prerequisites() -> Result<&'static str, String> {
    for (element, package) in ELEMENTS {
        let found = Command::new("gst-inspect-1.0").arg(element).output().is_ok_and(|o| o.status.success());
        if !found {
            return Err(format!("GStreamer element {element} is missing (apt-get install {package})"));
        }
    }
    python_with_rtsp_server()
        .ok_or_else(|| "no python3 with gst-rtsp-server (apt-get install python3-gi gir1.2-gst-rtsp-server-1.0)".into())
}

/// The RTSP server process; killed on drop.
struct RtspServer {
    python: &'static str,
    port: u16,
    child: Option<Child>,
}

impl RtspServer {
    fn start(python: &'static str) -> RtspServer {
        let mut server = RtspServer { python, port: 0, child: None };
        // Another process can take the port between our probe and the server's bind; try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("the RTSP server did not start on a free port");
    }

    fn url(&self) -> String {
        format!("rtsp://127.0.0.1:{}/test", self.port)
    }

    /// SIGKILL, as a camera that loses power: its clients see the connection drop.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port.
    fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Pace::measured().daemon_wait();
        while !self.spawn() {
            assert!(Instant::now() < deadline, "the RTSP server did not restart on port {}", self.port);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the server and waits for its "listening"; false if it could not bind.
    fn spawn(&mut self) -> bool {
        let mut child = Command::new(self.python)
            .arg(script())
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} {}: {e}", self.python, script().display()));
        let stdout = child.stdout.take().expect("piped stdout");
        // The first line is "listening", or nothing when the server exits (end of file).
        let listening = BufReader::new(stdout).lines().next().is_some_and(|line| line.is_ok_and(|l| l == "listening"));
        if listening {
            self.child = Some(child);
        } else {
            let _ = child.kill();
            let _ = child.wait();
        }
        listening
    }
}

impl Drop for RtspServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/rtsp_server.py")
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local addr").port()
}

/// The newest `STATUS=` line (without `STATUS=`), if any.
fn last_status(notifications: &[String]) -> Option<&str> {
    notifications.iter().rev().find_map(|n| n.strip_prefix("STATUS="))
}

#[test]
fn an_rtsp_camera_offline_longer_than_the_watchdog_keeps_the_daemon_alive_and_comes_back() {
    let python = match prerequisites() {
        Ok(python) => python,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let pace = Pace::measured();
    let watchdog = pace.watchdog();
    let mut server = RtspServer::start(python);
    let broker = Broker::start();
    let prefix = "e2e-rtsp-offline";
    let dir = tempfile::tempdir().expect("tempdir");
    let rtsp = format!(
        "{{ kind = \"gstreamer\", pipeline = \"rtspsrc location={} protocols=tcp latency=0 ! rtpjpegdepay ! jpegdec \
         ! videoconvert ! appsink name=sink\" }}",
        server.url()
    );
    let config = TestConfig::new(broker.port(), prefix)
        .set("mqtt", "publish", "\"every_frame\"")
        .set("telemetry", "interval_s", "1")
        .camera("gate", 5.0, &rtsp)
        .camera("front", 2.0, &sample_source("chelsea.png", "loop"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-rtsp-offline-sub", &[&format!("{prefix}/#")]);
    let mut systemd = FakeSystemd::bind(dir.path());
    let watchdog_usec = watchdog.as_micros().to_string();
    let mut daemon = RunningDaemon::start(
        &config,
        &[("NOTIFY_SOCKET", systemd.path.as_os_str()), ("WATCHDOG_USEC", OsStr::new(&watchdog_usec))],
    );
    let (gate, front) = (format!("{prefix}/gate/detections"), format!("{prefix}/front/detections"));
    daemon.wait_for_messages(&subscriber, &gate, "detections from the RTSP camera", |m| m.len() >= 2);

    server.kill();
    let down_at = Instant::now();
    let front_before = subscriber.messages(&front).len();
    // Down for one and a half watchdog timeouts (systemd would have killed the old daemon), and at
    // least until STATUS= says the camera is reconnecting. Every keep-alive's arrival is noted from
    // the moment of the kill on; no gap may reach the timeout.
    let outage = watchdog + watchdog / 2;
    let deadline = down_at + pace.daemon_wait();
    let mut seen = systemd.poll().len();
    let mut last_keep_alive = down_at;
    let mut keep_alives = 0;
    let mut reconnecting_reported = false;
    while down_at.elapsed() < outage || !reconnecting_reported {
        assert!(Instant::now() < deadline, "STATUS= never said the camera is reconnecting; log:\n{}", daemon.log());
        std::thread::sleep(Duration::from_millis(20));
        let notifications = systemd.poll();
        for notification in &notifications[seen..] {
            if notification == "WATCHDOG=1" {
                let gap = last_keep_alive.elapsed();
                assert!(gap < watchdog, "{gap:?} without WATCHDOG=1 (timeout {watchdog:?}); log:\n{}", daemon.log());
                last_keep_alive = Instant::now();
                keep_alives += 1;
            }
            if notification.strip_prefix("STATUS=").is_some_and(|status| status.contains("gate: reconnecting for ")) {
                reconnecting_reported = true;
            }
        }
        seen = notifications.len();
    }
    assert!(last_keep_alive.elapsed() < watchdog, "keep-alives stopped during the outage; log:\n{}", daemon.log());
    assert!(keep_alives >= 2, "{keep_alives} keep-alives in {outage:?}");
    assert!(daemon.is_running(), "an offline camera must not stop the daemon; log:\n{}", daemon.log());
    assert!(!daemon.log().contains("withholding watchdog"), "log:\n{}", daemon.log());
    let front_during = subscriber.messages(&front).len();
    assert!(front_during > front_before, "the other camera goes on while one is offline");
    let gate_during = subscriber.messages(&gate).len();

    let telemetry = subscriber.messages(&format!("{prefix}/telemetry"));
    let offline_report = telemetry.iter().rev().find_map(|message| {
        let report: serde_json::Value = serde_json::from_slice(&message.payload).ok()?;
        let camera = report["cameras"]["gate"].clone();
        (camera["state"] == "reconnecting").then_some(camera)
    });
    let offline_report = offline_report.unwrap_or_else(|| panic!("no telemetry report shows the camera reconnecting"));
    assert!(offline_report["attempt"].as_u64().is_some_and(|n| n >= 1), "{offline_report}");
    assert!(offline_report["last_error"].as_str().is_some_and(|e| !e.is_empty()), "{offline_report}");
    assert!(offline_report["since"].is_string(), "{offline_report}");

    server.restart();
    daemon.wait_for_messages(&subscriber, &gate, "detections to resume after the server returned", |m| {
        m.len() >= gate_during + 2
    });
    daemon.wait_until("STATUS= to show the camera streaming again", || {
        let notifications = systemd.poll();
        let status = last_status(notifications).unwrap_or_default();
        status.contains("gate: ") && !status.contains("reconnecting")
    });
    let notifications = systemd.poll().to_vec();
    assert!(position(&notifications, "READY=1").is_some(), "{notifications:?}");
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}
