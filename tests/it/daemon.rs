//! The `jetson-detectd` binary, driven as a user would: `check-config`, and `run` end to end against
//! the bundled model (CPU backend), the bundled sample images, a real mosquitto broker and a fake
//! systemd notify socket.
//!
//! Waits are failure guards only, derived from this machine's measured pace ([`Pace`]: the aarch64
//! suite runs under qemu, 10-20x slower); nothing here measures speed. A [`RunningDaemon`] is killed
//! on drop and prints its log when the test failed.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, ErrorKind};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jetson_detectd::publish::payload::{DetectionsMessage, SCHEMA_VERSION};

use crate::arch::daemon_command as daemon;
use crate::broker::{Broker, Received, Subscriber};
use crate::pace::Pace;
/// Daemon log kept for assertion messages (the newest part when it grows beyond this).
const MAX_LOG_BYTES: usize = 256 * 1024;

/// A bundled sample image.
pub fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples").join(name)
}

/// An `images` camera source (TOML inline table) for one bundled sample image.
pub fn sample_source(name: &str, mode: &str) -> String {
    images_source(&sample(name), mode)
}

/// An `images` camera source (TOML inline table) for a file or directory.
pub fn images_source(path: &Path, mode: &str) -> String {
    format!(
        "{{ kind = \"images\", path = {}, mode = {} }}",
        toml_string(&path.display().to_string()),
        toml_string(mode)
    )
}

pub fn toml_string(text: &str) -> String {
    format!("{text:?}")
}

/// A state file of the test daemons with topic prefix `prefix`, outside the machine's state
/// directory. The controls file is removed first: every test starts from the config's controls.
fn test_state_file(prefix: &str, name: &str) -> String {
    let path = std::env::temp_dir().join(format!("jetson-detectd-test-{}-{name}", prefix.replace('/', "-")));
    if name == "controls.toml" {
        let _ = std::fs::remove_file(&path);
    }
    path.display().to_string()
}

/// A config file for a test: the embedded default with the CPU backend, absolute paths to the
/// bundled model, the test's broker and topic prefix, and only the cameras the test adds.
#[derive(Clone)]
pub struct TestConfig {
    text: String,
}

impl TestConfig {
    pub fn bundled_model() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ssd_mobilenet_v2_coco_prenms_fp32.onnx")
    }

    pub fn bundled_labels() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("models/coco_labels.txt")
    }

    pub fn new(broker_port: u16, prefix: &str) -> TestConfig {
        let default = jetson_detectd::cmd::outlets::schema().default_text();
        let cameras_start = default.find("\n[[camera]]\n").expect("embedded default has a [[camera]]");
        // The next table after the example camera (its zones and lines are commented out).
        let cameras_end = default[cameras_start + 1..]
            .find("\n[")
            .map(|end| cameras_start + 1 + end)
            .expect("a table after the cameras");
        let text = format!("{}{}", &default[..cameras_start], &default[cameras_end..]);
        TestConfig { text }
            .set("device", "backend", "\"cpu\"")
            .model(&Self::bundled_model(), &Self::bundled_labels())
            .set("mqtt", "host", "\"127.0.0.1\"")
            .set("mqtt", "port", &broker_port.to_string())
            .set("mqtt", "prefix", &toml_string(prefix))
            .set("mqtt", "client_id", &toml_string(&format!("{}-daemon", prefix.replace('/', "-"))))
            .set("mqtt", "reconnect_max_ms", "1000")
            // No HTTP server unless a test asks (tests run in parallel: one port each), and no
            // zones or controls file from the machine's state directory.
            .set("http", "listen", "\"\"")
            .set("http", "zones_file", &toml_string(&test_state_file(prefix, "no-zones.toml")))
            .set("controls", "file", &toml_string(&test_state_file(prefix, "controls.toml")))
    }

    pub fn model(self, onnx: &Path, labels: &Path) -> TestConfig {
        self.set("model", "onnx", &toml_string(&onnx.display().to_string())).set(
            "model",
            "labels",
            &toml_string(&labels.display().to_string()),
        )
    }

    /// Sets `key` in `[section]`, where the embedded default has it (or documents it commented out).
    pub fn set(mut self, section: &str, key: &str, value: &str) -> TestConfig {
        let header = format!("[{section}]");
        let (assigned, commented) = (format!("{key} = "), format!("# {key} = "));
        let mut lines: Vec<String> = self.text.lines().map(str::to_string).collect();
        let start = lines.iter().position(|line| line.trim() == header).unwrap_or_else(|| panic!("no {header}"));
        let end =
            lines[start + 1..].iter().position(|line| line.starts_with('[')).map_or(lines.len(), |i| start + 1 + i);
        let index = (start + 1..end)
            .find(|&i| lines[i].starts_with(&assigned) || lines[i].starts_with(&commented))
            .unwrap_or_else(|| panic!("the embedded default has no `{key}` in {header}"));
        lines[index] = format!("{key} = {value}");
        self.text = lines.join("\n") + "\n";
        self
    }

    /// Appends TOML as is (e.g. `[[camera.zone]]` tables for the camera added last).
    pub fn append(mut self, toml: &str) -> TestConfig {
        self.text += "\n";
        self.text += toml;
        self.text += "\n";
        self
    }

    pub fn camera(mut self, name: &str, fps: f32, source: &str) -> TestConfig {
        self.text += &format!("\n[[camera]]\nname = {}\nfps = {fps:?}\nsource = {source}\n", toml_string(name));
        self
    }

    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, &self.text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path.to_path_buf()
    }
}

/// `jetson-detectd run --config F` with stderr collected; killed on drop.
pub struct RunningDaemon {
    child: Child,
    log: Arc<Mutex<String>>,
    reader: Option<JoinHandle<()>>,
}

impl RunningDaemon {
    pub fn start(config: &Path, env: &[(&str, &OsStr)]) -> RunningDaemon {
        RunningDaemon::start_with(config, env, |_| {})
    }

    /// [`RunningDaemon::start`], with `adjust` applied to the command before it starts (limits,
    /// a wrapper such as [`crate::arch::as_service_user`], which may replace the command: its
    /// standard streams are set afterwards).
    pub fn start_with(config: &Path, env: &[(&str, &OsStr)], adjust: impl FnOnce(&mut Command)) -> RunningDaemon {
        let mut command = daemon();
        command.arg("run").arg("--config").arg(config).env_remove("NOTIFY_SOCKET").env_remove("WATCHDOG_USEC");
        for (name, value) in env {
            command.env(name, value);
        }
        adjust(&mut command);
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("start jetson-detectd run");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut log = log.lock().unwrap_or_else(PoisonError::into_inner);
                    if log.len() > MAX_LOG_BYTES {
                        let cut = log.len() - MAX_LOG_BYTES / 2;
                        let cut = (cut..log.len()).find(|&i| log.is_char_boundary(i)).unwrap_or(log.len());
                        log.drain(..cut);
                    }
                    log.push_str(&line);
                    log.push('\n');
                }
            })
        };
        RunningDaemon { child, log, reader: Some(reader) }
    }

    /// What the daemon wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log_handle().text()
    }

    /// The daemon's stderr, readable while the daemon is borrowed mutably (inside a wait).
    pub fn log_handle(&self) -> DaemonLog {
        DaemonLog(Arc::clone(&self.log))
    }

    /// The process id (under qemu-user: qemu's, which carries the daemon's command line).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `signal` (under qemu-user the child is qemu, which passes it on to the daemon).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits pid_t");
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child, not yet reaped.
        let result = unsafe { libc::kill(pid, signal) };
        assert_eq!(result, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }

    /// Waits until `done` holds; panics with the daemon's log when the daemon exits first or after
    /// [`Pace::daemon_wait`].
    pub fn wait_until(&mut self, what: &str, done: impl FnMut() -> bool) {
        self.wait_until_within(Pace::measured().daemon_wait(), what, done);
    }

    /// [`RunningDaemon::wait_until`] with another bound: for what takes a source's own time on
    /// top of the daemon's frames (a scene that must play for a while).
    pub fn wait_until_within(&mut self, wait: Duration, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + wait;
        while !done() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("daemon exited ({status}) while waiting for {what}; its log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; daemon log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `done` holds for the messages `subscriber` received on `topic`; returns them.
    pub fn wait_for_messages(
        &mut self,
        subscriber: &Subscriber,
        topic: &str,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let mut messages = Vec::new();
        self.wait_until(&format!("{what} on {topic}"), || {
            messages = subscriber.messages(topic);
            done(&messages)
        });
        messages
    }

    /// Waits for the daemon to exit by itself; panics with its log after [`Pace::daemon_wait`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Pace::measured().daemon_wait();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            assert!(Instant::now() < deadline, "daemon did not exit; its log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        if self.is_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- jetson-detectd log ----\n{}", self.log());
        }
    }
}

/// Shared view of a running daemon's stderr.
pub struct DaemonLog(Arc<Mutex<String>>);

impl DaemonLog {
    pub fn text(&self) -> String {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// A bound Unix datagram socket standing in for systemd's `$NOTIFY_SOCKET`.
pub struct FakeSystemd {
    socket: UnixDatagram,
    pub path: PathBuf,
    received: Vec<String>,
}

impl FakeSystemd {
    pub fn bind(dir: &Path) -> FakeSystemd {
        let path = dir.join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind notify socket");
        socket.set_nonblocking(true).expect("non-blocking");
        FakeSystemd { socket, path, received: Vec::new() }
    }

    /// Every notification so far, one entry per assignment (`READY=1`, `STATUS=…`).
    pub fn poll(&mut self) -> &[String] {
        let mut buf = [0u8; 4096];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    self.received.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return &self.received,
                Err(e) => panic!("notify socket: {e}"),
            }
        }
    }
}

pub fn position(notifications: &[String], wanted: &str) -> Option<usize> {
    notifications.iter().position(|n| n == wanted)
}

/// Checks a detections message field by field against the schema in the design (exact key sets,
/// types, timestamp format), then parses it as [`DetectionsMessage`]. `expected` maps each source
/// image size to exactly the labels that image gives.
fn check_detections_message(
    received: &Received,
    camera: &str,
    expected: &[((u32, u32), &[&str])],
) -> DetectionsMessage {
    let text = received.text();
    let value: serde_json::Value = serde_json::from_slice(&received.payload).unwrap_or_else(|e| panic!("{e}: {text}"));
    let keys = |v: &serde_json::Value| -> BTreeSet<String> {
        v.as_object().unwrap_or_else(|| panic!("not an object in {text}")).keys().cloned().collect()
    };
    let set = |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
    assert_eq!(
        keys(&value),
        set(&["schema", "run", "seq", "kind", "camera", "frame", "ts", "width", "height", "latency_ms", "detections"]),
        "{text}"
    );
    assert_eq!(value["schema"], 1, "{text}");
    let run = value["run"].as_str().unwrap_or_else(|| panic!("run is not a string: {text}"));
    assert!(run.len() == 16 && run.chars().all(|c| c.is_ascii_hexdigit()), "{text}");
    assert!(value["seq"].is_u64(), "{text}");
    assert!(value["frame"].is_u64() && value["width"].is_u64() && value["height"].is_u64(), "{text}");
    assert_eq!(keys(&value["latency_ms"]), set(&["wait", "pre", "infer", "post", "total"]), "{text}");
    assert!(value["latency_ms"]
        .as_object()
        .is_some_and(|l| l.values().all(|v| v.as_f64().is_some_and(|ms| ms >= 0.0))));
    let ts = value["ts"].as_str().unwrap_or_else(|| panic!("ts is not a string: {text}"));
    let ts_shape_ok = ts.len() == 24
        && ts.char_indices().all(|(i, c)| match i {
            4 | 7 => c == '-',
            10 => c == 'T',
            13 | 16 => c == ':',
            19 => c == '.',
            23 => c == 'Z',
            _ => c.is_ascii_digit(),
        });
    assert!(ts_shape_ok, "ts {ts:?} is not RFC 3339 UTC with milliseconds");
    for detection in value["detections"].as_array().unwrap_or_else(|| panic!("detections not an array: {text}")) {
        // `track_id` is there once the object's track is confirmed.
        let mut detection_keys = keys(detection);
        if detection_keys.remove("track_id") {
            assert!(detection["track_id"].is_u64(), "{text}");
        }
        assert_eq!(detection_keys, set(&["label", "class_id", "score", "box"]), "{text}");
        assert!(detection["label"].is_string() && detection["class_id"].is_u64(), "{text}");
        assert_eq!(keys(&detection["box"]), set(&["x1", "y1", "x2", "y2"]), "{text}");
    }

    let message: DetectionsMessage = serde_json::from_slice(&received.payload).expect("parses as DetectionsMessage");
    let latency = &message.latency_ms;
    // The total covers every stage; each value is rounded to 0.01 ms on its own.
    assert!(latency.total + 0.03 >= latency.wait.unwrap_or(0.0) + latency.pre + latency.infer + latency.post, "{text}");
    assert_eq!(message.envelope.schema, SCHEMA_VERSION);
    assert_eq!(message.camera, camera, "{text}");
    assert!(!received.retain, "detections are not retained: {text}");
    let size = (message.width, message.height);
    let labels = expected
        .iter()
        .find(|(image_size, _)| *image_size == size)
        .unwrap_or_else(|| panic!("size {size:?} is none of the source images: {text}"))
        .1;
    let seen: BTreeSet<&str> = message.detections.iter().map(|d| d.label.as_str()).collect();
    assert_eq!(seen, labels.iter().copied().collect(), "{text}");
    for detection in &message.detections {
        let b = &detection.bbox;
        let inside = 0.0 <= b.x1
            && b.x1 < b.x2
            && b.x2 <= f64::from(message.width)
            && 0.0 <= b.y1
            && b.y1 < b.y2
            && b.y2 <= f64::from(message.height);
        assert!(inside, "box outside the frame: {text}");
    }
    message
}

fn parse(received: &Received) -> DetectionsMessage {
    serde_json::from_slice(&received.payload).unwrap_or_else(|e| panic!("{e}: {}", received.text()))
}

const CHELSEA: ((u32, u32), &[&str]) = ((451, 300), &["cat"]);
const DOG: ((u32, u32), &[&str]) = ((768, 576), &["dog", "bicycle", "car"]);

/// A directory holding copies of sample images, under the names given.
fn image_dir(parent: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir(&dir).expect("mkdir");
    for (sample_name, copy_name) in files {
        std::fs::copy(sample(sample_name), dir.join(copy_name)).expect("copy sample image");
    }
    dir
}

/// The retained message a fresh subscriber gets on `topic`.
pub fn retained(broker: &Broker, client_id: &str, topic: &str) -> Received {
    let late = Subscriber::connect(broker, client_id, &[topic]);
    let messages = late.wait_until(topic, "the retained message", |m| !m.is_empty());
    assert!(messages[0].retain, "{topic}: {:?} is not retained", messages[0].text());
    messages[0].clone()
}

#[test]
fn check_config_accepts_the_embedded_default() {
    let output = daemon().arg("check-config").output().expect("run jetson-detectd");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn malformed_config_exits_78_naming_file_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.toml");
    let text = jetson_detectd::cmd::outlets::schema()
        .default_text()
        .replace("nms_iou = 0.5", "nms_iou = 0.5\nnms_threshold = 2");
    std::fs::write(&path, text).expect("write config");
    let output = daemon().args(["check-config", "--config"]).arg(&path).output().expect("run jetson-detectd");
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.toml") && stderr.contains("nms_threshold"), "{stderr}");
}

/// Issue 50, item 2: check-config stopped at the first mistake, without a line. A file with
/// three (a misspelt key, a word where a number goes, a value out of range) gets three messages,
/// one a line, each with the file, its line and column, the key and what is allowed, and the
/// misspelt key its nearest known one.
#[test]
fn a_file_with_three_mistakes_gets_three_located_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("mine.toml");
    let text =
        "[mqtt]\nhost = \"broker.lan\"\nusername = \"jetson\"\npasword_file = \"/etc/jetson-detectd/mqtt-password\"\n\
                port = \"1883x\"\n\n[[camera]]\nname = \"porch\"\nfps = -1\n\
                source = { kind = \"images\", path = \"/tmp\" }\n";
    std::fs::write(&path, text).expect("write config");
    let output = daemon().args(["check-config", "--config"]).arg(&path).output().expect("run jetson-detectd");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    let file = path.display().to_string();
    let located: Vec<&str> =
        stderr.lines().map(str::trim_start).filter(|line| line.starts_with(&format!("{file}:"))).collect();
    assert_eq!(located.len(), 3, "three located messages:\n{stderr}");
    let expected = [
        ("4:1", "`mqtt.pasword_file`", "did you mean `password_file`?"),
        ("5:1", "`mqtt.port`", "allowed: a whole number from 0 to 65535"),
        ("9:1", "`camera[0].fps`", "-1: allowed: 0 (no limit)"),
    ];
    for (line, (place, key, words)) in located.iter().zip(expected) {
        assert!(line.starts_with(&format!("{file}:{place}: {key}: ")) && line.contains(words), "{line}\n{stderr}");
    }
}

/// Issue 35.16: camera `front` with zone `yard` and a camera `front_yard` made the same Home
/// Assistant ids, and one entity silently replaced the other. check-config refuses it (78), naming
/// both entities and the id.
#[test]
fn home_assistant_ids_that_would_collide_are_a_config_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(1, "collide")
        .set("homeassistant", "discovery", "true")
        .camera("front", 1.0, &sample_source("dog.jpg", "loop"))
        .append("[[camera.zone]]\nname = \"yard\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\n")
        .camera("front_yard", 1.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let output = daemon().args(["check-config", "--config"]).arg(&config).output().expect("run jetson-detectd");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    for named in ["config.toml", "Front yard person count", "Front_yard person count", "front_yard_person_count"] {
        assert!(stderr.contains(named), "{named} missing: {stderr}");
    }
}

/// A file with only what differs from the defaults: a broker and one camera whose images path is
/// relative to the config file. `--print` shows every key with the values the daemon would use.
#[test]
fn a_partial_config_is_complete_and_prints_with_defaults_filled_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_dir(dir.path(), "pics", &[("chelsea.png", "a.png")]);
    let path = dir.path().join("partial.toml");
    let text = "[mqtt]\nhost = \"broker.lan\"\n\n[[camera]]\nname = \"door\"\nsource = { kind = \"images\", path = \"pics\" }\n";
    std::fs::write(&path, text).expect("write config");
    let output = daemon().args(["check-config", "--print", "--config"]).arg(&path).output().expect("run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed = String::from_utf8_lossy(&output.stdout);
    let effective: toml::Table = toml::from_str(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(effective["mqtt"]["host"].as_str(), Some("broker.lan"));
    assert_eq!(effective["mqtt"]["port"].as_integer(), Some(1883), "a default");
    assert_eq!(effective["model"]["decoder"].as_str(), Some("ssd"));
    assert!(effective["mqtt"].get("prefix").is_some(), "computed values are printed: {printed}");
    let cameras = effective["camera"].as_array().expect("cameras");
    assert_eq!(cameras.len(), 1, "the file's cameras replace the default's");
    let images = dir.path().join("pics").display().to_string();
    assert_eq!(cameras[0]["source"]["path"].as_str(), Some(images.as_str()));
    let onnx = effective["model"]["onnx"].as_str().expect("the bundled model");
    assert!(Path::new(onnx).is_file(), "the default's model path resolves against the data dir: {onnx}");
}

#[test]
fn a_config_naming_its_own_engine_must_describe_it_and_its_own_onnx_must_be_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("yolo.toml");
    std::fs::write(&path, "[model]\nengine = \"yolov8n.engine\"\nlabels = \"coco.txt\"\ndecoder = \"yolov8\"\n")
        .expect("write config");
    let output = daemon().args(["check-config", "--config"]).arg(&path).output().expect("run");
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("yolo.toml") && stderr.contains("model.input.width"), "{stderr}");

    // An ONNX file describes itself: what the config leaves out is read from it, so a file that
    // is not there is the error.
    std::fs::write(&path, "[model]\nonnx = \"yolov8n.onnx\"\nlabels = \"coco.txt\"\ndecoder = \"yolov8\"\n")
        .expect("write config");
    let output = daemon().args(["check-config", "--config"]).arg(&path).output().expect("run");
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`model.onnx`") && stderr.contains("yolov8n.onnx"), "{stderr}");
}

#[test]
fn unparsable_and_missing_config_exit_78() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("broken.toml");
    std::fs::write(&path, "[model\nonnx = ").expect("write config");
    for config in [path, dir.path().join("missing.toml")] {
        let output = daemon().args(["check-config", "--config"]).arg(&config).output().expect("run");
        assert_eq!(output.status.code(), Some(78), "{}", String::from_utf8_lossy(&output.stderr));
    }
}

/// Issue 33: `run` printed a config error twice (the log line and the command's own), and a model
/// path relative to a relative `--config` stayed relative in the message.
#[test]
fn run_reports_a_config_error_once_naming_the_resolved_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("config.toml"),
        "[model]\nonnx = \"nope/missing.onnx\"\nlabels = \"labels.txt\"\ndecoder = \"ssd\"\n\
         [model.input]\nwidth = 300\nheight = 300\nlayout = \"nhwc\"\ndtype = \"u8\"\n",
    )
    .expect("write config");
    let output = daemon()
        .args(["run", "--config", "config.toml"])
        .current_dir(dir.path())
        .env_remove("NOTIFY_SOCKET")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    let missing = dir.path().join("nope/missing.onnx").display().to_string();
    assert_eq!(stderr.matches(&missing).count(), 1, "one report, with the resolved path:\n{stderr}");
}

/// Start to stop: retained `online`, detections messages that follow the schema, READY=1 and
/// watchdog keep-alives, then SIGTERM → STOPPING=1, retained `offline`, exit status 0.
#[test]
fn run_publishes_detections_keeps_systemd_informed_and_stops_cleanly_on_sigterm() {
    let prefix = "e2e-lifecycle";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let images = image_dir(dir.path(), "images", &[("chelsea.png", "a.png"), ("dog.jpg", "b.jpg")]);
    let config = TestConfig::new(broker.port(), prefix)
        .camera("front", 4.0, &images_source(&images, "loop"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-lifecycle-sub", &[&format!("{prefix}/#")]);
    let mut systemd = FakeSystemd::bind(dir.path());
    let watchdog_usec = Pace::measured().watchdog().as_micros().to_string();
    let mut daemon = RunningDaemon::start(
        &config,
        &[("NOTIFY_SOCKET", systemd.path.as_os_str()), ("WATCHDOG_USEC", OsStr::new(&watchdog_usec))],
    );

    let status = format!("{prefix}/status");
    daemon.wait_for_messages(&subscriber, &status, "online", |m| m.last().is_some_and(|m| m.payload == b"online"));
    let detections = format!("{prefix}/front/detections");
    let messages = daemon.wait_for_messages(&subscriber, &detections, "two detections messages", |m| m.len() >= 2);
    let frames: Vec<u64> =
        messages.iter().map(|m| check_detections_message(m, "front", &[CHELSEA, DOG]).frame).collect();
    assert!(frames.windows(2).all(|pair| pair[0] < pair[1]), "frame numbers increase: {frames:?}");
    assert_eq!(retained(&broker, "e2e-lifecycle-late", &status).payload, b"online");

    daemon.wait_until("READY=1 and then two WATCHDOG=1", || {
        let notifications = systemd.poll();
        position(notifications, "READY=1")
            .is_some_and(|ready| notifications[ready..].iter().filter(|n| *n == "WATCHDOG=1").count() >= 2)
    });

    daemon.signal(libc::SIGTERM);
    let exit = daemon.wait_exit();
    assert_eq!(exit.code(), Some(0), "SIGTERM is a clean stop; log:\n{}", daemon.log());
    let notifications = systemd.poll().to_vec();
    let ready = position(&notifications, "READY=1").expect("READY=1");
    let stopping = position(&notifications, "STOPPING=1").unwrap_or_else(|| panic!("no STOPPING=1: {notifications:?}"));
    assert!(ready < stopping, "{notifications:?}");
    let first_keep_alive = position(&notifications, "WATCHDOG=1").expect("WATCHDOG=1");
    assert!(ready < first_keep_alive, "no keep-alive before READY=1: {notifications:?}");
    assert!(notifications.iter().any(|n| n.starts_with("STATUS=")), "a STATUS= summary: {notifications:?}");
    subscriber.wait_for_payload(&status, b"offline");
    assert_eq!(retained(&broker, "e2e-lifecycle-after", &status).payload, b"offline");
    let log = daemon.log();
    assert!(!log.contains("panicked"), "{log}");
}

/// A daemon that dies without a goodbye (SIGKILL) still ends up `offline`: the broker publishes its
/// retained Last Will.
#[test]
fn killed_daemon_is_offline_by_its_last_will() {
    let prefix = "e2e-will";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .camera("front", 2.0, &sample_source("chelsea.png", "loop"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-will-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let status = format!("{prefix}/status");
    daemon.wait_for_messages(&subscriber, &status, "online", |m| m.last().is_some_and(|m| m.payload == b"online"));

    daemon.signal(libc::SIGKILL);
    daemon.wait_exit();
    subscriber.wait_for_payload(&status, b"offline");
    assert_eq!(retained(&broker, "e2e-will-late", &status).payload, b"offline");
}

/// The broker crashes (SIGKILL) mid-run and comes back 2 s later on the same port: the daemon keeps
/// running, goes `online` again, its detections resume, and — QoS 1, every frame published — a
/// camera that produced frames during the outage still delivers every frame number.
#[test]
fn run_survives_a_broker_crash_without_losing_a_frame() {
    const BURST_FRAMES: u64 = 6;
    let prefix = "e2e-crash";
    let mut broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let names: Vec<String> = (0..BURST_FRAMES).map(|n| format!("frame-{n}.png")).collect();
    let copies: Vec<(&str, &str)> = names.iter().map(|name| ("chelsea.png", name.as_str())).collect();
    let burst = image_dir(dir.path(), "burst", &copies);
    let config = TestConfig::new(broker.port(), prefix)
        .set("mqtt", "qos", "1")
        .set("mqtt", "publish", "\"every_frame\"")
        .set("mqtt", "queue_capacity", "10000")
        // Room for every burst frame: none is dropped before inference, so each has a message.
        .set("engine", "frame_slots", "8")
        .camera("live", 3.0, &sample_source("chelsea.png", "loop"))
        .camera("burst", 3.0, &images_source(&burst, "once"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-crash-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);

    let status = format!("{prefix}/status");
    let (live, burst) = (format!("{prefix}/live/detections"), format!("{prefix}/burst/detections"));
    daemon.wait_for_messages(&subscriber, &status, "online", |m| m.last().is_some_and(|m| m.payload == b"online"));
    daemon.wait_for_messages(&subscriber, &burst, "two burst frames", |m| m.len() >= 2);
    let online_before = subscriber.messages(&status).len();

    broker.kill();
    let before_crash: BTreeSet<u64> = subscriber.messages(&burst).iter().map(|m| parse(m).frame).collect();
    assert!(before_crash.len() < BURST_FRAMES as usize, "the outage must fall inside the burst: {before_crash:?}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(daemon.is_running(), "the daemon must outlive the broker; log:\n{}", daemon.log());
    broker.restart();

    daemon.wait_for_messages(&subscriber, &status, "online again after the restart", |m| {
        m.iter().skip(online_before).any(|m| m.payload == b"online")
    });
    let live_seen = subscriber.messages(&live).len();
    daemon.wait_for_messages(&subscriber, &live, "live detections to resume", |m| m.len() >= live_seen + 2);
    let received = daemon.wait_for_messages(&subscriber, &burst, "every burst frame number", |m| {
        m.iter().map(|m| parse(m).frame).collect::<BTreeSet<_>>().len() == BURST_FRAMES as usize
    });
    let frames: BTreeSet<u64> =
        received.iter().map(|m| check_detections_message(m, "burst", &[CHELSEA]).frame).collect();
    assert_eq!(frames, (0..BURST_FRAMES).collect(), "no frame may be lost");
    assert!(daemon.is_running(), "the live camera keeps the daemon running; log:\n{}", daemon.log());

    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}

/// Two cameras, each on its own topics, with snapshots and telemetry switched on.
#[test]
fn run_publishes_per_camera_detections_snapshots_and_telemetry() {
    let prefix = "e2e-cameras";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .set("telemetry", "interval_s", "1")
        .set("snapshot", "enabled", "true")
        .camera("front", 3.0, &sample_source("chelsea.png", "loop"))
        .camera("back", 3.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-cameras-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);

    let mut run_ids = BTreeSet::new();
    for (camera, image) in [("front", CHELSEA), ("back", DOG)] {
        let topic = format!("{prefix}/{camera}/detections");
        let messages = daemon.wait_for_messages(&subscriber, &topic, "two detections messages", |m| m.len() >= 2);
        let parsed: Vec<_> =
            messages.iter().map(|message| check_detections_message(message, camera, &[image])).collect();
        // One run; the camera's detections counted from 0 without a gap (the subscriber was there first).
        let runs: BTreeSet<_> = parsed.iter().map(|m| m.envelope.run.clone()).collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let seqs: Vec<_> = parsed.iter().map(|m| m.envelope.seq).collect();
        assert_eq!(seqs, (0..parsed.len() as u64).map(Some).collect::<Vec<_>>());
        run_ids.extend(runs.into_iter().flatten().map(|run| run.into_owned()));
        let topic = format!("{prefix}/{camera}/snapshot");
        daemon.wait_for_messages(&subscriber, &topic, "a snapshot", |m| !m.is_empty());
        let snapshot = retained(&broker, &format!("e2e-cameras-{camera}-late"), &topic);
        let format = image::guess_format(&snapshot.payload).expect("snapshot image format");
        assert_eq!(format, image::ImageFormat::Jpeg);
        let decoded = image::load_from_memory(&snapshot.payload).expect("snapshot decodes");
        assert_eq!((decoded.width(), decoded.height()), image.0, "{camera} snapshot has the source image's size");
    }

    let telemetry = format!("{prefix}/telemetry");
    let reports = daemon.wait_for_messages(&subscriber, &telemetry, "a report counting frames of both cameras", |m| {
        m.iter().any(|m| {
            let report: serde_json::Value = serde_json::from_slice(&m.payload).unwrap_or_default();
            ["front", "back"].iter().all(|camera| report["cameras"][camera]["frames"].as_u64().is_some_and(|n| n > 0))
        })
    });
    for report in &reports {
        let value: serde_json::Value = serde_json::from_slice(&report.payload).expect("telemetry is JSON");
        assert!(value["ts"].is_string() && value["cameras"].is_object(), "{}", report.text());
        run_ids.insert(value["run"].as_str().unwrap_or_default().to_owned());
        if value["engine"]["status"] == "starting" {
            // The start's first report holds no figures (the previous run's go at once).
            assert_eq!(value["seq"], 0, "only the first report says starting: {}", report.text());
            continue;
        }
        let mqtt = &value["outlets"]["mqtt"];
        assert!(mqtt.is_object(), "telemetry carries the MQTT outlet's queue state: {}", report.text());
        assert!(mqtt["queued_bytes"].is_u64(), "and the queue's bytes: {}", report.text());
        check_model_memory(&value["engine"]["model_memory"], report);
    }
    assert_eq!(run_ids.len(), 1, "detections and telemetry of one start share one run: {run_ids:?}");

    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}

/// Telemetry's `engine.model_memory` on the CPU backend: `[model]` alone, a detector of the
/// bundled engine, with no device memory and no arena, in as many workers as the scheduler runs.
fn check_model_memory(memory: &serde_json::Value, report: &Received) {
    let text = report.text();
    assert!(memory["workers"].as_u64().is_some_and(|workers| workers >= 1), "{text}");
    assert_eq!(memory["contexts_per_worker"], 1, "{text}");
    assert!(memory["arena"].as_str().is_some_and(|arena| arena.starts_with("none: ")), "{text}");
    let models = memory["models"].as_array().expect("telemetry lists the worker's models");
    assert_eq!(models.len(), 1, "{text}");
    let model = &models[0];
    assert_eq!(
        (&model["name"], &model["role"], &model["backend"]),
        (&"model".into(), &"detector".into(), &"cpu".into())
    );
    let engine = model["engine"].as_str().unwrap_or_default();
    assert!(engine.starts_with("rten ") || engine.starts_with("ONNX Runtime "), "{text}");
    for field in ["scratch_bytes_per_context", "persistent_bytes_per_context", "saved_bytes"] {
        assert!(model[field].is_null(), "no device memory on the CPU backend, not zero bytes: {text}");
    }
}

/// SIGHUP re-reads the config file: a broken file is refused, a raised score threshold applies to
/// the following frames, and the daemon keeps running throughout.
#[test]
fn sighup_applies_a_new_score_threshold() {
    const RAISED: f64 = 0.95;
    let prefix = "e2e-reload";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("config.toml");
    let config = TestConfig::new(broker.port(), prefix).camera("front", 4.0, &sample_source("dog.jpg", "loop"));
    config.write(&config_path);
    let subscriber = Subscriber::connect(&broker, "e2e-reload-sub", &[&format!("{prefix}/#")]);
    // The inference worker logs each processed frame at debug level: that tells which frame came
    // first after the reload.
    let mut daemon =
        RunningDaemon::start(&config_path, &[("RUST_LOG", OsStr::new("info,jetson_detectd::infer::scheduler=debug"))]);

    let topic = format!("{prefix}/front/detections");
    let before = daemon.wait_for_messages(&subscriber, &topic, "a message", |m| !m.is_empty());
    let low = parse(&before[0]).detections.iter().any(|d| d.score < RAISED);
    assert!(low, "the dog sample has a detection below {RAISED} at the default threshold: {}", before[0].text());

    // A broken file on SIGHUP keeps the running settings.
    std::fs::write(&config_path, "[model\nscore_threshold = ").expect("write broken config");
    daemon.signal(libc::SIGHUP);
    let log = daemon.log_handle();
    daemon
        .wait_until("the broken reload to be refused", || log.text().contains("SIGHUP: keeping the running settings"));

    config.set("model", "score_threshold", &RAISED.to_string()).write(&config_path);
    daemon.signal(libc::SIGHUP);
    let mut first_reloaded = None;
    daemon.wait_until("a frame processed after the reload", || {
        first_reloaded =
            first_frame_after(&log.text(), "inference worker 0: reloaded thresholds", "camera front frame ");
        first_reloaded.is_some()
    });
    let first_reloaded = first_reloaded.unwrap_or_default();
    let reloaded = |m: &Received| parse(m).frame >= first_reloaded;
    let messages = daemon.wait_for_messages(&subscriber, &topic, "two messages after the reload", |m| {
        m.iter().filter(|m| reloaded(m)).count() >= 2
    });
    for message in messages.iter().filter(|m| reloaded(m)) {
        let parsed = parse(message);
        assert!(!parsed.detections.is_empty(), "the dog is above {RAISED}: {}", message.text());
        assert!(
            parsed.detections.iter().all(|d| d.score >= RAISED),
            "threshold {RAISED} not applied: {}",
            message.text()
        );
    }
    assert!(daemon.is_running(), "SIGHUP must not stop the daemon; log:\n{}", daemon.log());
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
}

/// The frame number of the first `frame_prefix<N>:` log line after the first line containing `marker`.
fn first_frame_after(log: &str, marker: &str, frame_prefix: &str) -> Option<u64> {
    let after_marker = &log[log.find(marker)?..];
    let rest = &after_marker[after_marker.find(frame_prefix)? + frame_prefix.len()..];
    rest[..rest.find(':')?].parse().ok()
}

/// A camera whose image source cannot be opened (its parent is a regular file, so not even root can
/// open it) stops `run` with an error naming the path, never a panic.
#[test]
fn run_with_an_unopenable_image_source_exits_78_naming_it() {
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let plain_file = dir.path().join("plain-file");
    std::fs::write(&plain_file, b"not a directory").expect("write");
    let unopenable = plain_file.join("images");
    let config = TestConfig::new(broker.port(), "e2e-unopenable")
        .camera("front", 2.0, &images_source(&unopenable, "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let exit = daemon.wait_exit();
    let log = daemon.log();
    // 78 (EX_CONFIG): systemd's RestartPreventExitStatus keeps a wrong path from restart-looping.
    assert_eq!(exit.code(), Some(78), "{log}");
    assert!(log.contains(&unopenable.display().to_string()), "the error names {}:\n{log}", unopenable.display());
    assert!(!log.contains("panicked"), "{log}");
}

/// Home Assistant's per-camera count returns to 0 when the object leaves, with the default
/// `mqtt.publish = "detections"` (the empty frame sends no detections message): the sensor reads
/// the retained `<prefix>/<camera>/counts/<label>`, published on every change.
#[test]
fn home_assistant_counts_return_to_zero_when_the_object_leaves() {
    let prefix = "e2e-ha-counts";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let images = image_dir(dir.path(), "frames", &[("chelsea.png", "a-cat.png")]);
    image::RgbImage::from_pixel(300, 300, image::Rgb([128, 128, 128]))
        .save(images.join("b-empty.png"))
        .expect("write an empty frame");
    let config = TestConfig::new(broker.port(), prefix)
        .set("homeassistant", "discovery", "true")
        .set("homeassistant", "labels", "[\"cat\"]")
        .camera("front", 5.0, &images_source(&images, "once"))
        .write(&dir.path().join("config.toml"));
    let counts = format!("{prefix}/front/counts/cat");
    let subscriber =
        Subscriber::connect(&broker, "e2e-ha-counts-sub", &[&counts, &format!("{prefix}/front/detections")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let received = daemon.wait_for_messages(&subscriber, &counts, "the count up and back to 0", |m| m.len() >= 3);
    let values: Vec<String> = received.iter().map(Received::text).collect();
    assert_eq!(values, ["0", "1", "0"], "start, the cat, the empty frame");
    let detections = subscriber.messages(&format!("{prefix}/front/detections"));
    assert_eq!(detections.len(), 1, "the empty frame sent no detections message, yet the count went to 0");
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
    let late = retained(&broker, "e2e-ha-counts-late", &counts);
    assert_eq!(late.text(), "0", "the retained count is 0 for a subscriber that comes later");
}

/// Review S6: an entity removed from the config between two runs (here a whole camera) leaves
/// Home Assistant: the next run finds its retained discovery config on the broker and deletes it,
/// and the retained value only it read; what is still configured stays.
#[test]
fn home_assistant_entities_removed_between_runs_are_deleted_at_the_next_start() {
    let prefix = "e2e-ha-stale";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |cameras: &[&str]| {
        let mut config = TestConfig::new(broker.port(), prefix).set("device", "id", "\"stalehost\"").set(
            "homeassistant",
            "discovery",
            "true",
        );
        for camera in cameras {
            config = config.camera(camera, 2.0, &sample_source("dog.jpg", "loop"));
        }
        config.write(&dir.path().join("config.toml"))
    };
    let gone = "homeassistant/sensor/jetson-detectd_stalehost/back_fps/config";
    let gone_count = format!("{prefix}/back/counts/person");
    let kept = "homeassistant/sensor/jetson-detectd_stalehost/front_fps/config";
    let subscriber = Subscriber::connect(&broker, "e2e-ha-stale-sub", &[gone, &gone_count, kept]);

    let mut daemon = RunningDaemon::start(&config(&["front", "back"]), &[]);
    daemon.wait_for_messages(&subscriber, gone, "back's discovery", |m| m.iter().any(|m| !m.payload.is_empty()));
    daemon.wait_for_messages(&subscriber, &gone_count, "back's count", |m| !m.is_empty());
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "a clean stop:\n{}", daemon.log());

    let seen_kept = subscriber.messages(kept).len();
    let mut daemon = RunningDaemon::start(&config(&["front"]), &[]);
    daemon.wait_for_messages(&subscriber, gone, "back's discovery deleted", |m| {
        m.last().is_some_and(|last| last.payload.is_empty())
    });
    daemon.wait_for_messages(&subscriber, &gone_count, "back's count deleted", |m| {
        m.last().is_some_and(|last| last.payload.is_empty())
    });
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "a clean stop:\n{}", daemon.log());
    let kept_messages = subscriber.messages(kept);
    assert!(kept_messages[seen_kept..].iter().all(|m| !m.payload.is_empty()), "front's entity was never deleted");
    let late = retained(&broker, "e2e-ha-stale-late", kept);
    assert!(!late.payload.is_empty(), "front's discovery stays retained");
}

/// Issue 50, item 6: the telemetry is retained, so at every start Home Assistant's fps,
/// inference time and CPU showed the previous run's values for a whole telemetry interval. The
/// first report of a start has no figures: the sensors read "unknown" until this run's first.
#[test]
fn the_previous_runs_telemetry_is_replaced_at_start_before_any_figure() {
    let prefix = "e2e-telemetry-start";
    let topic = format!("{prefix}/telemetry");
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |interval_s: &str| {
        TestConfig::new(broker.port(), prefix)
            .set("telemetry", "interval_s", interval_s)
            .camera("front", 2.0, &sample_source("dog.jpg", "loop"))
            .write(&dir.path().join("config.toml"))
    };
    let subscriber = Subscriber::connect(&broker, "e2e-telemetry-start-sub", &[&topic]);
    let has_fps = |message: &Received| {
        let report: serde_json::Value = serde_json::from_slice(&message.payload).unwrap_or_default();
        report["cameras"]["front"]["fps"].is_number()
    };
    let mut daemon = RunningDaemon::start(&config("1"), &[]);
    daemon.wait_for_messages(&subscriber, &topic, "a report with the camera's fps", |m| m.iter().any(has_fps));
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "a clean stop:\n{}", daemon.log());

    // A period far beyond the test: the only report of this start is its first.
    let seen = subscriber.messages(&topic).len();
    let mut daemon = RunningDaemon::start(&config("3600"), &[]);
    let log = daemon.log_handle();
    daemon.wait_until("the daemon to run", || log.text().contains("running:"));
    let messages = subscriber.wait_until(&topic, "this start's first report", |m| m.len() > seen);
    let first: serde_json::Value = serde_json::from_slice(&messages[seen].payload).expect("JSON");
    assert_eq!((&first["seq"], &first["engine"]["status"]), (&0.into(), &"starting".into()), "{first}");
    assert!(first.get("cameras").is_none_or(|cameras| cameras.as_object().is_some_and(|c| c.is_empty())), "{first}");
    let late = retained(&broker, "e2e-telemetry-start-late", &topic);
    assert!(!has_fps(&late), "a subscriber that comes now reads no figure of the previous run: {}", late.text());
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "a clean stop:\n{}", daemon.log());
}
