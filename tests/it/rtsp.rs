//! RTSP cameras end to end (feature `gstreamer`), configured as users do (`kind = "rtsp"`, a URL,
//! a user and a password file), against a real RTSP server (Debian's gst-rtsp-server through
//! python3-gi, `rtsp_server.py`) serving MJPEG, H.264 (x264enc) or H.265 (x265enc), with basic
//! authentication where a test needs it:
//! - H.264 and H.265 detections arrive; the password shows in no log line, MQTT message,
//!   `check-config --print` or command line; the latency of a live stream does not grow.
//! - A wrong password is an error that names the camera, retried with backoff.
//! - The server killed while the daemon streams from it and restarted later: systemd's keep-alives
//!   keep coming (an offline camera is not a hung daemon), `STATUS=` and telemetry name the
//!   camera's state, the other camera goes on, and the camera's detections resume.
//!
//! Skipped, saying what to install, where the server or the GStreamer plugins are missing, except
//! with `CI=true`, where they fail ([`crate::prerequisite`]: `.ci/run` installs them).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::arch::daemon_command;
use crate::broker::{Broker, Subscriber};
use crate::daemon::{position, sample_source, FakeSystemd, RunningDaemon, TestConfig};
use crate::pace::Pace;
use crate::prerequisite::{gstreamer_element, or_skip};

/// Elements the server and the daemon's pipeline need for every codec, and the Debian packages
/// they come in.
const ELEMENTS: [(&str, &str); 4] = [
    ("videotestsrc", "gstreamer1.0-plugins-base"),
    ("videoconvert", "gstreamer1.0-plugins-base"),
    ("appsink", "gstreamer1.0-plugins-base"),
    ("rtspsrc", "gstreamer1.0-plugins-good"),
];

/// A codec the test server can send, with the elements each side needs for it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Codec {
    Mjpeg,
    H264,
    H265,
}

impl Codec {
    fn server_name(self) -> &'static str {
        match self {
            Codec::Mjpeg => "mjpeg",
            Codec::H264 => "h264",
            Codec::H265 => "h265",
        }
    }

    fn elements(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Codec::Mjpeg => &[
                ("jpegenc", "gstreamer1.0-plugins-good"),
                ("rtpjpegpay", "gstreamer1.0-plugins-good"),
                ("rtpjpegdepay", "gstreamer1.0-plugins-good"),
                ("jpegdec", "gstreamer1.0-plugins-good"),
            ],
            Codec::H264 => &[
                ("x264enc", "gstreamer1.0-plugins-ugly"),
                ("rtph264pay", "gstreamer1.0-plugins-good"),
                ("rtph264depay", "gstreamer1.0-plugins-good"),
                ("h264parse", "gstreamer1.0-plugins-bad"),
                ("avdec_h264", "gstreamer1.0-libav"),
            ],
            Codec::H265 => &[
                ("x265enc", "gstreamer1.0-plugins-bad"),
                ("rtph265pay", "gstreamer1.0-plugins-good"),
                ("rtph265depay", "gstreamer1.0-plugins-good"),
                ("h265parse", "gstreamer1.0-plugins-bad"),
                ("avdec_h265", "gstreamer1.0-libav"),
            ],
        }
    }
}

/// The test camera's account; the password must show up nowhere on our side.
const USER: &str = "viewer";
const PASSWORD: &str = "Sesame-7f3d9c2a";

/// A Python that has GObject introspection for gst-rtsp-server (Debian's own, not a pyenv one).
fn python_with_rtsp_server() -> Option<&'static str> {
    let check = "import gi; gi.require_version('GstRtspServer', '1.0'); from gi.repository import GstRtspServer";
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|python| Command::new(python).args(["-c", check]).output().is_ok_and(|output| output.status.success()))
}

/// `Ok(python)` when a test of `codec` can run, else why not.
pub(crate) fn prerequisites(codec: Codec) -> Result<&'static str, String> {
    for &(element, package) in ELEMENTS.iter().chain(codec.elements()) {
        gstreamer_element(element, package)?;
    }
    python_with_rtsp_server()
        .ok_or_else(|| "no python3 with gst-rtsp-server (apt-get install python3-gi gir1.2-gst-rtsp-server-1.0)".into())
}

/// The RTSP server process; killed on drop.
pub(crate) struct RtspServer {
    python: &'static str,
    codec: Codec,
    /// Basic authentication with [`USER`] and [`PASSWORD`].
    auth: bool,
    /// `RTSP_SCENE` (see `rtsp_server.py`): a scene instead of the test pattern.
    scene: Option<String>,
    port: u16,
    child: Option<Child>,
}

impl RtspServer {
    fn start(python: &'static str, codec: Codec, auth: bool) -> RtspServer {
        RtspServer::launch(RtspServer { python, codec, auth, scene: None, port: 0, child: None })
    }

    /// A server of `scene` (`IMAGE:APPEAR:STAY:PERIOD`, see `rtsp_server.py`), without a password.
    pub(crate) fn scene(python: &'static str, codec: Codec, scene: &str) -> RtspServer {
        RtspServer::launch(RtspServer { python, codec, auth: false, scene: Some(scene.into()), port: 0, child: None })
    }

    fn launch(mut server: RtspServer) -> RtspServer {
        // Another process can take the port between our probe and the server's bind; try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return server;
            }
        }
        panic!("the RTSP server did not start on a free port");
    }

    pub(crate) fn url(&self) -> String {
        format!("rtsp://127.0.0.1:{}/test", self.port)
    }

    /// SIGKILL, as a camera that loses power: its clients see the connection drop.
    pub(crate) fn kill(&mut self) {
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
        let mut command = Command::new(self.python);
        command.arg(script()).arg(self.port.to_string()).arg(self.codec.server_name());
        if self.auth {
            command.env("RTSP_USER", USER).env("RTSP_PASSWORD", PASSWORD);
        }
        if let Some(scene) = &self.scene {
            command.env("RTSP_SCENE", scene);
        }
        let mut child = command
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

/// `source = { kind = "rtsp", … }` for `server`, with the password in a file when `password` is set.
fn rtsp_source(server: &RtspServer, password: Option<&Path>) -> String {
    match password {
        Some(file) => format!(
            "{{ kind = \"rtsp\", url = \"{}\", user = \"{USER}\", password_file = {:?} }}",
            server.url(),
            file.display().to_string()
        ),
        None => format!("{{ kind = \"rtsp\", url = \"{}\" }}", server.url()),
    }
}

/// Standard base64 with padding, as HTTP basic authentication encodes `user:password`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            let sextet = (n >> (18 - 6 * i)) & 63;
            out.push(if i <= chunk.len() { char::from(ALPHABET[sextet as usize]) } else { '=' });
        }
    }
    out
}

fn password_file(dir: &Path, password: &str) -> PathBuf {
    let path = dir.join("camera.password");
    std::fs::write(&path, format!("{password}\n")).expect("write the password file");
    path
}

/// A detections message as the test reads it: when it says the frame was captured, and the
/// processing time.
struct Detections {
    /// Milliseconds since the Unix epoch (`ts`).
    captured_ms: f64,
    total_ms: f64,
}

fn parse_detections(payload: &[u8]) -> Detections {
    let message: serde_json::Value = serde_json::from_slice(payload).expect("detections are JSON");
    let ts = message["ts"].as_str().unwrap_or_else(|| panic!("no ts: {message}"));
    let total_ms = message["latency_ms"]["total"].as_f64().unwrap_or_else(|| panic!("no latency_ms.total: {message}"));
    Detections { captured_ms: unix_ms(ts), total_ms }
}

/// `2026-11-25T09:55:12.345Z` as milliseconds since the Unix epoch.
pub(crate) fn unix_ms(ts: &str) -> f64 {
    let number = |range: std::ops::Range<usize>| -> i64 {
        ts.get(range).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not an RFC 3339 UTC time: {ts}"))
    };
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let seconds = days * 86_400 + number(11..13) * 3600 + number(14..16) * 60 + number(17..19);
    let millis: f64 = ts.get(19..ts.len() - 1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    seconds as f64 * 1000.0 + millis * 1000.0
}

fn now_unix_ms() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_secs_f64() * 1000.0
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// An RTSP camera with basic authentication streams detections through the daemon; its password
/// appears in no log line, MQTT message, `check-config --print` output or command line; and over
/// a live stream the latency does not grow: neither the processing time (`latency_ms.total`) nor
/// the age of a frame when its message arrives (from `ts`, which is the buffer's capture time),
/// last third of the window against the first.
fn streams_with_a_password_that_shows_nowhere(codec: Codec, watch_latency: bool) {
    let Some(python) = or_skip(prerequisites(codec)) else { return };
    let pace = Pace::measured();
    let server = RtspServer::start(python, codec, true);
    let broker = Broker::start();
    let prefix = format!("e2e-rtsp-{}", codec.server_name());
    let dir = tempfile::tempdir().expect("tempdir");
    let password = password_file(dir.path(), PASSWORD);
    let config = TestConfig::new(broker.port(), &prefix)
        .set("mqtt", "publish", "\"every_frame\"")
        .set("telemetry", "interval_s", "1")
        .camera("gate", 0.0, &rtsp_source(&server, Some(&password)))
        .write(&dir.path().join("config.toml"));
    let printed = daemon_command().args(["check-config", "--print", "--config"]).arg(&config).output().expect("run");
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains(&server.url()), "the camera is printed: {printed}");

    let subscriber = Subscriber::connect(&broker, &format!("{prefix}-sub"), &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", daemon.pid())).expect("the daemon's command line");
    let gate = format!("{prefix}/gate/detections");
    daemon.wait_for_messages(&subscriber, &gate, "detections from the RTSP camera", |m| m.len() >= 3);

    if watch_latency {
        // Frames as they arrive: (age, processing). Sampled long enough for a queue that grows by
        // one frame every few frames to show: 40 frames, at least 20 s, at most 30 s for CI's time.
        let window = (pace.frame * 40).clamp(Duration::from_secs(20), Duration::from_secs(30));
        let mut samples: Vec<(f64, f64)> = Vec::new();
        let mut seen = subscriber.messages(&gate).len();
        let started = Instant::now();
        while started.elapsed() < window {
            std::thread::sleep(Duration::from_millis(10));
            let messages = subscriber.messages(&gate);
            let arrived_ms = now_unix_ms();
            for message in &messages[seen..] {
                let detections = parse_detections(&message.payload);
                samples.push((arrived_ms - detections.captured_ms, detections.total_ms));
            }
            seen = messages.len();
        }
        assert!(samples.len() >= 9, "{} messages in {window:?}; log:\n{}", samples.len(), daemon.log());
        let third = samples.len() / 3;
        let (mut first_age, mut first_total): (Vec<f64>, Vec<f64>) = samples[..third].iter().copied().unzip();
        let (mut last_age, mut last_total): (Vec<f64>, Vec<f64>) =
            samples[samples.len() - third..].iter().copied().unzip();
        let (first_age, last_age) = (median(&mut first_age), median(&mut last_age));
        let (first_total, last_total) = (median(&mut first_total), median(&mut last_total));
        eprintln!(
            "{codec:?} over {window:?}, {} frames: age at arrival {first_age:.0} -> {last_age:.0} ms, \
             latency_ms.total {first_total:.1} -> {last_total:.1} ms",
            samples.len()
        );
        // Slack for a busier machine: twice the first third plus a few frames. A queue in front of
        // inference adds a frame time per queued frame, and keeps adding.
        let frame_ms = pace.frame.as_secs_f64() * 1000.0;
        assert!(
            last_age <= 2.0 * first_age.max(0.0) + 4.0 * frame_ms,
            "the age of frames grows: {first_age:.0} -> {last_age:.0} ms"
        );
        assert!(
            last_total <= 2.0 * first_total + 4.0 * frame_ms,
            "processing time grows: {first_total:.1} -> {last_total:.1} ms"
        );
    }

    // Telemetry says how frames reach the slots: the decoder's converter writes them into slot memory.
    daemon.wait_for_messages(&subscriber, &format!("{prefix}/telemetry"), "telemetry with frame copies", |m| {
        m.iter().any(|message| {
            let report: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
            let camera = &report["cameras"]["gate"];
            camera["capture_mode"] == "pool" && camera["frame_copies"] == 0.0
        })
    });

    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(log.contains("decoder"), "the log says which decoder: {log}");
    let everything_published: Vec<u8> = subscriber.all_messages().into_iter().flat_map(|m| m.payload).collect();
    for (what, text) in [
        ("the daemon's log", log.as_bytes()),
        ("check-config --print", printed.as_bytes()),
        ("the daemon's command line", cmdline.as_slice()),
        ("the MQTT messages", everything_published.as_slice()),
    ] {
        assert!(
            !text.windows(PASSWORD.len()).any(|window| window == PASSWORD.as_bytes()),
            "the camera's password shows in {what}"
        );
    }
}

#[test]
fn base64_encodes_like_http_basic_authentication() {
    assert_eq!(base64(b"Aladdin:open sesame"), "QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    assert_eq!(base64(b"ab"), "YWI=");
    assert_eq!(base64(b"abc"), "YWJj");
}

#[test]
fn an_h264_camera_with_a_password_streams_with_flat_latency_and_the_password_shows_nowhere() {
    streams_with_a_password_that_shows_nowhere(Codec::H264, true);
}

#[test]
fn an_h265_camera_with_a_password_streams_and_the_password_shows_nowhere() {
    streams_with_a_password_that_shows_nowhere(Codec::H265, false);
}

/// `probe` asks the camera for its stream and says which decoder it gets here; with a wrong
/// password it says the camera refused it.
#[test]
fn probe_names_the_stream_codec_and_decoder_or_the_refused_password() {
    let Some(python) = or_skip(prerequisites(Codec::H264)) else { return };
    let server = RtspServer::start(python, Codec::H264, true);
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = |password: &str| -> serde_json::Value {
        let file = password_file(dir.path(), password);
        let config = TestConfig::new(1, "probe")
            .camera("gate", 0.0, &rtsp_source(&server, Some(&file)))
            .write(&dir.path().join("config.toml"));
        // GStreamer's most verbose debug output (every RTSP message it sends and receives) shows
        // neither the password nor the basic-auth header made from it.
        let output = daemon_command()
            .args(["probe", "--config"])
            .arg(&config)
            .env("GST_DEBUG", "*:9")
            .env("GST_DEBUG_NO_COLOR", "1")
            .output()
            .expect("run probe");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let everything = [output.stdout.as_slice(), output.stderr.as_slice()].concat();
        let basic = base64(format!("{USER}:{password}").as_bytes());
        for secret in [password, basic.as_str()] {
            assert!(
                !everything.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} shows in probe's output"
            );
        }
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("probe prints JSON");
        report["cameras"][0].clone()
    };
    let camera = probe(PASSWORD);
    assert_eq!(camera["stream"]["codec"], "H.264", "{camera}");
    assert_eq!((&camera["stream"]["decoder"], &camera["stream"]["hardware"]), (&"avdec_h264".into(), &false.into()));
    assert_eq!(camera["decoders"]["H.265"]["decoder"], "avdec_h265", "{camera}");
    assert_eq!(camera["ok"], true, "{camera}");
    let refused = probe("not-the-password");
    assert_eq!(refused["ok"], false, "{refused}");
    let error = refused["stream"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("refused the user name or password"), "{refused}");
}

#[test]
fn a_wrong_password_is_an_error_naming_the_camera_and_is_retried() {
    let Some(python) = or_skip(prerequisites(Codec::Mjpeg)) else { return };
    let server = RtspServer::start(python, Codec::Mjpeg, true);
    let broker = Broker::start();
    let prefix = "e2e-rtsp-wrong-password";
    let dir = tempfile::tempdir().expect("tempdir");
    let wrong = password_file(dir.path(), "not-the-password");
    let config = TestConfig::new(broker.port(), prefix)
        .set("telemetry", "interval_s", "1")
        .camera("gate", 0.0, &rtsp_source(&server, Some(&wrong)))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-rtsp-wrong-password-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let log = daemon.log_handle();
    // The first attempt fails, then the second one after the backoff: both are logged.
    daemon.wait_until("the second refused attempt in the log", || {
        log.text()
            .lines()
            .any(|line| line.contains("camera gate") && line.contains("password") && line.contains("attempt 2"))
    });
    let refused = log.text();
    let line = refused.lines().find(|line| line.contains("attempt 1")).unwrap_or_default();
    assert!(line.contains("camera gate") && line.contains("refused the user name or password"), "{line}");
    daemon.wait_for_messages(
        &subscriber,
        &format!("{prefix}/telemetry"),
        "telemetry with the camera reconnecting",
        |m| {
            m.iter().any(|message| {
                let report: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
                let camera = &report["cameras"]["gate"];
                camera["state"] == "reconnecting"
                    && camera["last_error"].as_str().is_some_and(|e| e.contains("refused the user name or password"))
            })
        },
    );
    assert!(daemon.is_running(), "a wrong password must not stop the daemon; log:\n{}", daemon.log());
    // The server sets up each session before it refuses the login: that is no recovery.
    let log = daemon.log();
    assert!(!log.contains("again after"), "a camera that never delivered a frame is not said to be back; log:\n{log}");
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}

#[test]
fn an_rtsp_camera_offline_longer_than_the_watchdog_keeps_the_daemon_alive_and_comes_back() {
    let Some(python) = or_skip(prerequisites(Codec::Mjpeg)) else { return };
    let pace = Pace::measured();
    let watchdog = pace.watchdog();
    let mut server = RtspServer::start(python, Codec::Mjpeg, false);
    let broker = Broker::start();
    let prefix = "e2e-rtsp-offline";
    let dir = tempfile::tempdir().expect("tempdir");
    let rtsp = rtsp_source(&server, None);
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
    assert!(
        daemon.log().lines().any(|line| line.contains("camera gate") && line.contains("streaming again after")),
        "the return is logged once frames flow again; log:\n{}",
        daemon.log()
    );
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}
