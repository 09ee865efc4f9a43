//! Golden payloads: what the publish stage sends for one fixed script, byte for byte.
//!
//! The test drives the daemon's per-frame sink directly (no model, no camera): two cameras, small
//! synthetic frames with fixed pixels and capture times, fixed detections that move through zones
//! and across a line, flip labels, stand still and leave; tracking, zones, lines, Home Assistant
//! discovery, label counts, periodic and event snapshots and the publish policy all on; a
//! SIGHUP-style reload and a zone change from the page in the middle; a fixed run id. A real
//! mosquitto delivers every message to an MQTT 5 subscriber that keeps the retain flag as
//! published, and the test compares topic, retain flag and payload bytes with the committed file
//! `tests/it/golden/payloads.txt`. It also compares the events the live view kept for the HTTP
//! API (`GET /api/events`) with the same file.
//!
//! What is compared, and why: the script is cut into steps, and after each step the test waits
//! until the broker has acknowledged every message and the subscriber has received as many as the
//! publisher sent, so messages belong to the step that caused them. Within a step, each topic's
//! messages are compared in order (MQTT keeps the order of one topic); the order across topics of
//! one step is not compared (the file shows it as it was when written). Binary payloads (JPEGs) are
//! written as their length and SHA-256; text payloads as they are.
//!
//! A third outlet rides along: [`Recorder`], a few lines that record what they receive, added to
//! the dispatcher without touching the MQTT outlet or the live view — how a new outlet (a clips
//! recorder, a webhook) plugs in. It must see every event that MQTT published.
//!
//! A change that alters payloads on purpose rewrites the file:
//! `JETSON_DETECTD_UPDATE_GOLDEN=1 cargo test --test it golden::`, then review the diff of
//! `tests/it/golden/payloads.txt` like code: it shows exactly what subscribers will see differently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use jetson_detectd::config::{camera_scene, Config, ConfigOrigin};

use jetson_detectd::controls::Controls;
use jetson_detectd::detection::{BoundingBox, Detection, Labels};
use jetson_detectd::frame::{FrameMeta, FrameSlot, FrameTimings, HeapMemory, PixelFormat};
use jetson_detectd::infer::per_track::PerTrackSessions;
use jetson_detectd::infer::step::FrameSink;
use jetson_detectd::publish::dispatch::Outlets;
use jetson_detectd::publish::event_message::EventMessage;
use jetson_detectd::publish::live::{LiveView, StartFacts};
use jetson_detectd::publish::mqtt::homeassistant::BoardSensors;
use jetson_detectd::publish::mqtt::{MqttOutlet, MqttSettings};
use jetson_detectd::publish::object_event::ObjectEvent;
use jetson_detectd::publish::outlet::{DaemonStatus, FrameResult, Outlet, Stop, TrackingUpdate};
use jetson_detectd::publish::sink::PublishSink;
use jetson_detectd::service::notify::Liveness;
use jetson_detectd::track::events::Scene;
use rumqttc::v5::mqttbytes::v5::{Filter, Packet};
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{Client, Event, MqttOptions};
use sha2::{Digest, Sha256};

use crate::broker::{Broker, WAIT};

/// Rewrites the golden file instead of comparing with it.
const UPDATE_VARIABLE: &str = "JETSON_DETECTD_UPDATE_GOLDEN";
const RUN_ID: &str = "901d0000c0ffee00";
const PREFIX: &str = "golden";
const WIDTH: u32 = 128;
const HEIGHT: u32 = 96;
/// Frames per camera; a camera's frames are 200 ms apart.
const FRAMES: u64 = 16;
/// The SIGHUP-style reload comes after this frame of both cameras, the zone change from the page
/// after [`APPLY_SCENE_AFTER`].
const RELOAD_AFTER: u64 = 7;
const APPLY_SCENE_AFTER: u64 = 11;
/// Capture time of frame 0 of camera `front` (2026-11-22T10:00:00.000Z); `back` is 100 ms later.
const EPOCH_MS: u64 = 1_795_341_600_000;

const LABELS: &str = "person\nbicycle\ncar\ndog\ntraffic light\n";
const PERSON: usize = 0;
const BICYCLE: usize = 1;
const CAR: usize = 2;
const DOG: usize = 3;

fn golden_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/golden/payloads.txt")
}

/// The config of the run; `reloaded` is the one the SIGHUP brings (another publish mode, another
/// zone on `front`, other tracking settings).
fn config_text(broker: &Broker, zones_file: &Path, reloaded: bool) -> String {
    let (publish, front_zone, stationary_px) = if reloaded {
        ("on_change", "name = \"lawn\"\npolygon = [[0.5, 0.0], [1.0, 0.0], [1.0, 1.0], [0.5, 1.0]]\n", 3.0)
    } else {
        (
            "detections",
            "name = \"yard\"\npolygon = [[0.5, 0.0], [1.0, 0.0], [1.0, 1.0], [0.5, 1.0]]\nlabels = [\"person\"]\n",
            2.0,
        )
    };
    format!(
        r#"
        [device]
        id = "golden"
        [model]
        onnx = "m.onnx"
        labels = "labels.txt"
        decoder = "ssd"
        input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
        [mqtt]
        host = "{host}"
        port = {port}
        client_id = "golden-publisher"
        prefix = "{PREFIX}"
        qos = 1
        queue_capacity = 100000
        publish = "{publish}"
        max_rate_hz = 0.0
        shutdown_flush_ms = 20000
        [snapshot]
        enabled = true
        interval_s = 86400.0
        jpeg_quality = 80
        events = true
        [homeassistant]
        discovery = true
        labels = ["person", "car", "traffic light"]
        [tracking]
        enabled = true
        max_lost_s = 1.0
        min_hits = 2
        high_score = 0.5
        match_iou = 0.2
        max_tracks = 16
        stationary_px = {stationary_px}
        stationary_s = 1.0
        [http]
        listen = ""
        zones_file = "{zones_file}"
        [[camera]]
        name = "front"
        source = {{ kind = "synthetic" }}
        [[camera.zone]]
        {front_zone}
        [[camera.zone]]
        name = "drive"
        polygon = [[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]
        [[camera.line]]
        name = "gate"
        points = [[0.5, 1.0], [0.5, 0.0]]
        [[camera]]
        name = "back"
        source = {{ kind = "synthetic" }}
        [[camera.zone]]
        name = "porch"
        polygon = [[0.0, 0.5], [1.0, 0.5], [1.0, 1.0], [0.0, 1.0]]
        labels = ["person", "dog"]
        "#,
        host = broker.host(),
        port = broker.port(),
        zones_file = zones_file.display(),
    )
}

fn detection(class_id: usize, score: f32, x1: f32, y1: f32, x2: f32, y2: f32) -> Detection {
    Detection { class_id, score, bbox: BoundingBox { x1, y1, x2, y2 } }
}

/// What the model "found" on frame `n` of `camera`.
fn detections(camera: &str, n: u64) -> Vec<Detection> {
    let f = n as f32;
    let mut found = Vec::new();
    if camera == "front" {
        // A person walks left to right along the bottom, through `drive`, across `gate`, into
        // `yard`; seen better from frame 5 on.
        let x = 8.0 + 7.0 * f;
        let score = if n >= 5 { 0.93 } else { 0.7 };
        found.push(detection(PERSON, score, x, 40.0, x + 14.0, 90.0));
        // A parked car whose label flips to bicycle on two frames.
        let (class, score) = if (4..6).contains(&n) { (BICYCLE, 0.55) } else { (CAR, 0.8) };
        found.push(detection(class, score, 4.0, 10.0, 34.0, 30.0));
        // A dog on frames 2..=6, then gone: its track ends after `max_lost_s`.
        if (2..=6).contains(&n) {
            let x = 100.0 - 4.0 * f;
            found.push(detection(DOG, 0.75, x, 60.0, x + 20.0, 80.0));
        }
    } else {
        // A person stands on the porch (stationary after a second), a dog passes on 3..=9.
        found.push(detection(PERSON, 0.88, 50.0, 30.0, 70.0, 85.0));
        if (3..=9).contains(&n) {
            let x = 10.0 + 9.0 * (f - 3.0);
            found.push(detection(DOG, 0.66, x, 70.0, x + 18.0, 92.0));
        }
    }
    found
}

/// Frame `n` of camera `index`: fixed pixels, a fixed capture time.
fn frame(index: u64, n: u64) -> FrameSlot {
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    let pixels = slot.prepare(WIDTH, HEIGHT, PixelFormat::Rgb8).expect("a frame fits");
    for (i, byte) in pixels.iter_mut().enumerate() {
        let (pixel, channel) = ((i / 3) as u64, (i % 3) as u64);
        let (x, y) = (pixel % u64::from(WIDTH), pixel / u64::from(WIDTH));
        *byte = ((x * 2 + y * 3 + n * 5 + index * 60 + channel * 85) % 256) as u8;
    }
    *slot.meta_mut() = FrameMeta {
        width: WIDTH,
        height: HEIGHT,
        format: PixelFormat::Rgb8,
        sequence: n,
        captured_at: UNIX_EPOCH + Duration::from_millis(EPOCH_MS + 200 * n + 100 * index),
    };
    slot
}

fn timings() -> FrameTimings {
    let ms = Duration::from_millis;
    FrameTimings {
        source: Some(ms(3)),
        wait: Some(ms(1)),
        pre: Some(ms(2)),
        infer: Some(ms(11)),
        post: Some(ms(1)),
        publish: None,
        total: Some(ms(18)),
    }
}

/// One message as the broker delivered it.
#[derive(Debug, Clone, PartialEq)]
struct Delivered {
    topic: String,
    retain: bool,
    payload: Vec<u8>,
}

impl Delivered {
    /// `r topic payload` (`-` for a message not retained); a payload that is not printable text
    /// is written as its length and SHA-256.
    fn line(&self) -> String {
        let text = std::str::from_utf8(&self.payload).ok().filter(|text| !text.chars().any(char::is_control));
        let payload = match text {
            Some(text) => text.to_string(),
            None => {
                let digest: String = Sha256::digest(&self.payload).iter().map(|b| format!("{b:02x}")).collect();
                format!("<{} bytes, sha256 {digest}>", self.payload.len())
            }
        };
        format!("{} {} {payload}", if self.retain { "r" } else { "-" }, self.topic)
    }
}

/// An MQTT 5 client subscribed to everything, retain flags as published (MQTT 3.1.1 clears the
/// flag on live delivery).
struct Capture {
    messages: Arc<Mutex<Vec<Delivered>>>,
    client: Client,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Capture {
    fn connect(broker: &Broker) -> Capture {
        let mut options = MqttOptions::new("golden-capture", broker.host(), broker.port());
        options.set_keep_alive(Duration::from_secs(5)).set_max_packet_size(Some(16 * 1024 * 1024));
        let (client, mut connection) = Client::new(options, 64);
        let filter = Filter { preserve_retain: true, ..Filter::new("#", QoS::AtLeastOnce) };
        client.subscribe_many([filter]).expect("subscribe");
        let messages = Arc::new(Mutex::new(Vec::new()));
        let subscribed = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (messages, subscribed, stop) = (messages.clone(), subscribed.clone(), stop.clone());
            std::thread::spawn(move || {
                for event in connection.iter() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match event {
                        Ok(Event::Incoming(Packet::SubAck(_))) => subscribed.store(true, Ordering::SeqCst),
                        Ok(Event::Incoming(Packet::Publish(publish))) => {
                            messages.lock().expect("capture").push(Delivered {
                                topic: String::from_utf8_lossy(&publish.topic).into_owned(),
                                retain: publish.retain,
                                payload: publish.payload.to_vec(),
                            });
                        }
                        Ok(_) => {}
                        Err(e) => panic!("the capturing client failed: {e}"),
                    }
                }
            })
        };
        let deadline = Instant::now() + WAIT;
        while !subscribed.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "no SUBACK; broker log:\n{}", broker.log());
            std::thread::sleep(Duration::from_millis(5));
        }
        Capture { messages, client, stop, thread: Some(thread) }
    }

    fn len(&self) -> usize {
        self.messages.lock().expect("capture").len()
    }

    fn since(&self, start: usize) -> Vec<Delivered> {
        self.messages.lock().expect("capture")[start..].to_vec()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.client.try_disconnect();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The script's steps and what each delivered, in order.
struct Recording<'a> {
    mqtt: &'a MqttOutlet,
    capture: &'a Capture,
    seen: usize,
    steps: Vec<(String, Vec<Delivered>)>,
}

impl Recording<'_> {
    /// Waits until everything published so far is acknowledged and delivered, and files what
    /// arrived since the last step under `name`.
    fn step(&mut self, name: impl Into<String>) {
        let deadline = Instant::now() + WAIT;
        loop {
            let stats = self.mqtt.stats();
            assert_eq!(stats.dropped, 0, "the publisher dropped messages");
            if stats.published > 0 && stats.queued == 0 && self.capture.len() as u64 == stats.published {
                break;
            }
            assert!(Instant::now() < deadline, "messages not delivered: {stats:?}, {} received", self.capture.len());
            std::thread::sleep(Duration::from_millis(2));
        }
        let delivered = self.capture.since(self.seen);
        self.seen += delivered.len();
        self.steps.push((name.into(), delivered));
    }
}

/// An outlet of its own: what it received, per camera.
#[derive(Default)]
struct Recorder {
    frames: Mutex<BTreeMap<String, u64>>,
    events: Mutex<BTreeMap<String, Vec<ObjectEvent>>>,
}

impl Recorder {
    fn record(&self, camera: &str, events: &[ObjectEvent]) {
        self.events.lock().expect("recorder").entry(camera.to_string()).or_default().extend_from_slice(events);
    }
}

impl Outlet for Recorder {
    fn name(&self) -> &str {
        "golden-recorder"
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        *self.frames.lock().expect("recorder").entry(frame.camera.to_string()).or_default() += 1;
        self.record(frame.camera, frame.tracking.events);
    }

    fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        self.record(camera, update.events);
    }
}

fn scenes(config: &Config, labels: &Labels) -> Vec<Scene> {
    (0..config.cameras.len()).map(|i| camera_scene(config, i, labels).expect("a valid scene")).collect()
}

/// Runs the script against a fresh broker: the golden file's text, and what the recording outlet
/// received.
fn run_script() -> (String, Recorder) {
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let zones_file = dir.path().join("zones.toml");
    let load = |reloaded: bool| {
        jetson_detectd::cmd::outlets::schema()
            .from_toml(
                &config_text(&broker, &zones_file, reloaded),
                ConfigOrigin::File("golden.toml".into()),
                dir.path(),
            )
            .expect("the golden config")
    };
    let config = load(false);
    let labels = Arc::new(Labels::parse(LABELS, Path::new("labels.txt")).expect("labels"));
    let capture = Capture::connect(&broker);
    let controls = Arc::new(Controls::new(&config));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
    let mqtt = {
        let _entered = runtime.enter();
        let settings = MqttSettings::from_config(&config).expect("settings");
        let board = BoardSensors::default();
        let started = MqttOutlet::start(
            settings,
            DaemonStatus::Online,
            &config,
            RUN_ID.into(),
            labels.clone(),
            controls.clone(),
            board,
        );
        Arc::new(started.expect("the MQTT outlet"))
    };
    let mut recording = Recording { mqtt: &mqtt, capture: &capture, seen: 0, steps: Vec::new() };
    recording.step("connect");

    let facts = StartFacts { engine: serde_json::Value::Null, model_load: Duration::ZERO, started: UNIX_EPOCH };
    let live = Arc::new(LiveView::new(
        Arc::new(config.clone()),
        labels.clone(),
        Liveness::new(),
        Duration::from_secs(60),
        facts,
    ));
    let (ended, _ended_reports) = tokio::sync::mpsc::channel(8);
    let recorder = Arc::new(Recorder::default());
    let outlets = Outlets::new(vec![mqtt.clone(), live.clone(), recorder.clone()]);
    let stats = live.cameras.iter().map(|camera| camera.stats.clone()).collect();
    let start_scenes = scenes(&config, &labels);
    let sink =
        PublishSink::start(&config, RUN_ID.into(), labels.clone(), start_scenes, stats, ended, outlets, None, controls);
    recording.step("start: discovery, counts at 0");

    let mut running = config.clone();
    for n in 0..FRAMES {
        for (index, camera) in ["front", "back"].into_iter().enumerate() {
            if camera == "back" && n > APPLY_SCENE_AFTER + 2 {
                continue;
            }
            sink.frame(
                camera,
                &frame(index as u64, n),
                &detections(camera, n),
                &timings(),
                &mut PerTrackSessions::none(),
            );
            recording.step(format!("frame {n} of {camera}"));
        }
        if n == RELOAD_AFTER {
            running = load(true);
            sink.reload(&running, scenes(&running, &labels));
            recording.step("reload (SIGHUP)");
        }
        if n == APPLY_SCENE_AFTER {
            let mut changed = running.clone();
            let back = &mut changed.cameras[1];
            back.zones[0].polygon = vec![[0.0, 0.0], [0.6, 0.0], [0.6, 1.0], [0.0, 1.0]];
            back.lines =
                vec![jetson_detectd::config::LineConfig { name: "door".into(), points: [[0.4, 0.0], [0.4, 1.0]] }];
            let scene = camera_scene(&changed, 1, &labels).expect("the page's scene");
            sink.apply_scene(&changed, "back", scene);
            running = changed;
            recording.step("zones of back saved from the page");
        }
        if n == APPLY_SCENE_AFTER + 2 {
            sink.camera_ended("back", &Ok(()));
            recording.step("back ended");
        }
    }
    sink.finish_tracking();
    recording.step("finish tracking (shutdown)");
    runtime.block_on(mqtt.clone().stop(Stop::Shutdown));
    recording.step("shutdown");

    let mut text = String::from(
        "# Golden payloads of tests/it/golden.rs: every message of its script as the broker delivered it\n\
         # (r = retained, - = not), step by step; then the events the live view keeps for GET /api/events.\n\
         # Rewrite with JETSON_DETECTD_UPDATE_GOLDEN=1 cargo test --test it golden:: and review the diff.\n",
    );
    for (name, delivered) in &recording.steps {
        text.push_str(&format!("== {name}\n"));
        for message in delivered {
            text.push_str(&message.line());
            text.push('\n');
        }
    }
    text.push_str("== live view events (GET /api/events)\n");
    for event in live.events(None, usize::MAX) {
        let message = EventMessage::new(&event.camera, &event.event, &labels);
        let json = serde_json::json!({ "camera": event.camera, "event": message });
        text.push_str(&format!("{} {json}\n", event.camera));
    }
    drop(sink);
    let recorder = Arc::try_unwrap(recorder).unwrap_or_else(|_| panic!("the sink is gone, and the recorder with it"));
    (text, recorder)
}

/// Each step's lines, grouped by topic (or, for the live view, by camera) in their order.
fn by_step(text: &str) -> Vec<(String, BTreeMap<String, Vec<String>>)> {
    let mut steps: Vec<(String, BTreeMap<String, Vec<String>>)> = Vec::new();
    for line in text.lines().filter(|line| !line.starts_with('#')) {
        if let Some(name) = line.strip_prefix("== ") {
            steps.push((name.to_string(), BTreeMap::new()));
            continue;
        }
        let Some((_, groups)) = steps.last_mut() else { panic!("a line before the first step: {line}") };
        let key = if let Some(rest) = line.strip_prefix("r ").or_else(|| line.strip_prefix("- ")) {
            rest.split(' ').next().unwrap_or_default()
        } else {
            line.split(' ').next().unwrap_or_default()
        };
        groups.entry(key.to_string()).or_default().push(line.to_string());
    }
    steps
}

#[test]
fn the_publish_stage_sends_the_golden_payloads_for_the_fixed_script() {
    let (text, recorder) = run_script();
    let frames = recorder.frames.into_inner().expect("recorder");
    assert_eq!(frames, BTreeMap::from([("back".to_string(), APPLY_SCENE_AFTER + 3), ("front".to_string(), FRAMES)]));
    let recorded = recorder.events.into_inner().expect("recorder");
    for camera in ["front", "back"] {
        let topic = format!("- {PREFIX}/{camera}/events ");
        let published: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| line.strip_prefix(&topic))
            .map(|json| serde_json::from_str::<EventMessage>(json).expect("an event message"))
            .map(|message| (message.track_id, message.kind))
            .collect();
        let received: Vec<(u64, String)> =
            recorded[camera].iter().map(|event| (event.track_id, event.kind.name().to_string())).collect();
        assert_eq!(received, published, "the recording outlet got every event of {camera} MQTT published");
    }
    let path = golden_file();
    if std::env::var_os(UPDATE_VARIABLE).is_some() {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("golden folder");
        std::fs::write(&path, &text).expect("write the golden file");
        eprintln!("rewrote {}", path.display());
        return;
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; write it with {UPDATE_VARIABLE}=1", path.display()));
    let (expected, got) = (by_step(&golden), by_step(&text));
    let names =
        |steps: &[(String, BTreeMap<String, Vec<String>>)]| steps.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(&expected), "the script's steps differ from the golden file's");
    for ((name, want), (_, have)) in expected.iter().zip(&got) {
        for topic in want.keys().chain(have.keys()) {
            let (want, have) =
                (want.get(topic).cloned().unwrap_or_default(), have.get(topic).cloned().unwrap_or_default());
            assert!(
                want == have,
                "step {name:?}, {topic}: the messages differ from {}\nexpected:\n{}\ngot:\n{}\n(if the change is \
                 wanted: {UPDATE_VARIABLE}=1 rewrites the file)",
                path.display(),
                want.join("\n"),
                have.join("\n")
            );
        }
    }
}
