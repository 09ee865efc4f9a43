//! Objects over time, end to end: the daemon (CPU backend, bundled model) tracks objects cut out of
//! the bundled sample images and moved across a plain background, and publishes events, zone
//! counts and event snapshots to a real mosquitto broker.
//!
//! The frames are made at test time and replayed with `replay_fps`: every frame is processed (none
//! is dropped however slow inference is, e.g. under qemu) and stamped at the replay rate, so the
//! tracker sees the same times on any machine. Waits are failure guards that restart whenever the
//! daemon makes progress; nothing here measures speed.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use image::{imageops, Rgb, RgbImage};
use jetson_detectd::publish::event_message::EventMessage;
use jetson_detectd::publish::payload::DetectionsMessage;

use crate::broker::{Broker, Received, Subscriber};
use crate::daemon::{sample, sample_source, RunningDaemon, TestConfig};
use crate::pace::Pace;

const WIDTH: u32 = 640;
const HEIGHT: u32 = 480;
const FRAMES: usize = 20;
const REPLAY_FPS: f32 = 5.0;
/// The person is not pasted on these frames: 0.8 s unseen, within the default `max_lost_s` of 1 s.
const PERSON_HIDDEN: std::ops::Range<usize> = 7..10;
/// The dog leaves after this frame and stays away for 1.6 s: its track ends while the camera runs.
const DOG_LAST_FRAME: usize = 11;

/// The boxes the bundled model finds in the samples (tests/it/detect.rs), cut out with a margin.
const DOG_IN_SAMPLE: [u32; 4] = [127, 226, 320, 544];
pub const PERSON_IN_SAMPLE: [u32; 4] = [182, 103, 268, 378];
const MARGIN: u32 = 6;

/// The part of a sample image around `bbox`, scaled by `scale`.
pub fn cutout(name: &str, bbox: [u32; 4], scale: f32) -> RgbImage {
    let source = image::open(sample(name)).unwrap_or_else(|e| panic!("{name}: {e}")).into_rgb8();
    let [x1, y1, x2, y2] = bbox;
    let (x1, y1) = (x1.saturating_sub(MARGIN), y1.saturating_sub(MARGIN));
    let (x2, y2) = ((x2 + MARGIN).min(source.width()), (y2 + MARGIN).min(source.height()));
    let crop = imageops::crop_imm(&source, x1, y1, x2 - x1, y2 - y1).to_image();
    let (w, h) = ((crop.width() as f32 * scale) as u32, (crop.height() as f32 * scale) as u32);
    imageops::resize(&crop, w, h, imageops::FilterType::Triangle)
}

/// Bottom-centre x of each object on `frame`, as a fraction of the width.
fn person_x(frame: usize) -> f64 {
    0.12 + 0.04 * frame as f64
}

fn dog_x(frame: usize) -> f64 {
    0.85 - 0.05 * frame as f64
}

/// Bottom edges in pixels: the dog walks across the top half, the person along the bottom.
const DOG_BOTTOM: u32 = 190;
const PERSON_BOTTOM: u32 = 470;

/// Writes the frame sequence into `dir/frames` and returns that directory.
fn write_frames(dir: &Path) -> PathBuf {
    let frames = dir.join("frames");
    std::fs::create_dir(&frames).expect("mkdir frames");
    let dog = cutout("dog.jpg", DOG_IN_SAMPLE, 0.5);
    let person = cutout("person.jpg", PERSON_IN_SAMPLE, 0.7);
    let paste = |frame: &mut RgbImage, object: &RgbImage, centre_x: f64, bottom: u32| {
        let left = (centre_x * f64::from(WIDTH)) as i64 - i64::from(object.width() / 2);
        imageops::overlay(frame, object, left, i64::from(bottom - object.height()));
    };
    for n in 0..FRAMES {
        let mut frame = RgbImage::from_pixel(WIDTH, HEIGHT, Rgb([178, 182, 176]));
        if n <= DOG_LAST_FRAME {
            paste(&mut frame, &dog, dog_x(n), DOG_BOTTOM);
        }
        if !PERSON_HIDDEN.contains(&n) {
            paste(&mut frame, &person, person_x(n), PERSON_BOTTOM);
        }
        frame.save(frames.join(format!("frame-{n:02}.png"))).expect("write frame");
    }
    frames
}

pub fn events(subscriber: &Subscriber, topic: &str) -> Vec<EventMessage> {
    subscriber
        .messages(topic)
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).unwrap_or_else(|e| panic!("{e}: {}", m.text())))
        .collect()
}

/// Payloads on `topic`, consecutive repeats collapsed (a reconnect may repeat a QoS 1 message).
fn count_sequence(subscriber: &Subscriber, topic: &str) -> Vec<String> {
    let mut sequence: Vec<String> = subscriber.messages(topic).iter().map(Received::text).collect();
    sequence.dedup();
    sequence
}

/// Waits for the daemon to exit by itself; the guard ([`Pace::daemon_wait`]) restarts whenever a
/// message arrives on `topic`.
pub fn wait_exit_while_progressing(daemon: &mut RunningDaemon, subscriber: &Subscriber, topic: &str) {
    let stall_wait = Pace::measured().daemon_wait();
    let mut seen = 0;
    let mut deadline = Instant::now() + stall_wait;
    while daemon.is_running() {
        let now_seen = subscriber.messages(topic).len();
        if now_seen > seen {
            seen = now_seen;
            deadline = Instant::now() + stall_wait;
        }
        assert!(Instant::now() < deadline, "no progress on {topic} for {stall_wait:?}; log:\n{}", daemon.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A dog crosses a zone, a person crosses a line while hidden for 0.8 s: one track and exactly one
/// `start` and `end` each, the person's id the same across the gap, one `in` crossing, the zone
/// count 0 → 1 → 0, and each track's best picture after its `end`.
#[test]
fn tracks_zones_lines_and_events_end_to_end() {
    let prefix = "e2e-tracking";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = write_frames(dir.path());
    let source = format!(
        "{{ kind = \"images\", path = {:?}, mode = \"once\", replay_fps = {REPLAY_FPS:?} }}",
        frames.display().to_string()
    );
    let config = TestConfig::new(broker.port(), prefix)
        .set("snapshot", "events", "true")
        .camera("yard", 0.0, &source)
        .append(
            "[[camera.zone]]\nname = \"middle\"\npolygon = [[0.36, 0.0], [0.64, 0.0], [0.64, 0.6], [0.36, 0.6]]\n\
             [[camera.line]]\nname = \"gate\"\npoints = [[0.5, 1.0], [0.5, 0.5]]",
        )
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "e2e-tracking-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config, &[]);

    let detections_topic = format!("{prefix}/yard/detections");
    wait_exit_while_progressing(&mut daemon, &subscriber, &detections_topic);
    let exit = daemon.wait_exit();
    assert_eq!(exit.code(), Some(0), "the camera ended, so did the daemon; log:\n{}", daemon.log());
    subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");

    let events_topic = format!("{prefix}/yard/events");
    let events = events(&subscriber, &events_topic);
    let log = daemon.log();
    let starts: Vec<&EventMessage> = events.iter().filter(|e| e.kind == "start").collect();
    assert_eq!(starts.len(), 2, "one start per object: {events:#?}\n{log}");
    // The dog walks in the top half, the person in the bottom half.
    let is_dog = |e: &EventMessage| e.bbox.y2 < f64::from(HEIGHT) / 2.0;
    let dog = starts.iter().find(|e| is_dog(e)).unwrap_or_else(|| panic!("no dog track: {events:#?}")).track_id;
    let person = starts.iter().find(|e| !is_dog(e)).unwrap_or_else(|| panic!("no person track: {events:#?}")).track_id;
    assert_ne!(dog, person);
    let ids: BTreeSet<u64> = events.iter().map(|e| e.track_id).collect();
    assert_eq!(ids, BTreeSet::from([dog, person]), "no other track: {events:#?}");
    for (id, label) in [(dog, "dog"), (person, "person")] {
        let story: Vec<&str> = events.iter().filter(|e| e.track_id == id).map(|e| e.kind.as_str()).collect();
        assert_eq!(story.first(), Some(&"start"), "{label}: {story:?}");
        assert_eq!(story.last(), Some(&"end"), "{label}: {story:?}");
        assert_eq!(story.iter().filter(|k| **k == "end").count(), 1, "{label}: {story:?}");
        let end = events.iter().rfind(|e| e.track_id == id).expect("end");
        assert_eq!(end.label, label, "{end:?}");
    }
    // The dog's track ended on its own, 1 s after it was last seen, while the person's went on.
    let end_of = |id: u64| events.iter().position(|e| e.track_id == id && e.kind == "end").expect("end");
    assert!(end_of(dog) < end_of(person), "{events:#?}");

    // The person was hidden on frames 7-9 and kept its id: its detections before and after the gap
    // carry it, and its end event counts the frames it was seen on.
    let person_end = events.iter().rfind(|e| e.track_id == person).expect("end");
    assert_eq!(person_end.frames, (FRAMES - PERSON_HIDDEN.len()) as u32, "{person_end:?}");
    let detections: Vec<DetectionsMessage> = subscriber
        .messages(&detections_topic)
        .iter()
        .map(|m| serde_json::from_slice(&m.payload).expect("detections message"))
        .collect();
    let person_ids: BTreeMap<u64, Option<u64>> = detections
        .iter()
        .filter_map(|m| {
            let d = m.detections.iter().find(|d| d.bbox.y2 > f64::from(HEIGHT) / 2.0)?;
            Some((m.frame, d.track_id))
        })
        .collect();
    let before_gap = person_ids.get(&(PERSON_HIDDEN.start as u64 - 1)).copied().flatten();
    let after_gap = person_ids.get(&(PERSON_HIDDEN.end as u64)).copied().flatten();
    assert_eq!((before_gap, after_gap), (Some(person), Some(person)), "{person_ids:?}");

    // The person crossed the gate (drawn bottom to top: moving right is `in`) once, while hidden;
    // the dog passed beyond the gate's end without crossing it.
    let crossings: Vec<(u64, String, String)> = events
        .iter()
        .filter_map(|e| e.crossed.as_ref().map(|c| (e.track_id, c.line.clone(), c.direction.clone())))
        .collect();
    assert_eq!(crossings, [(person, "gate".to_string(), "in".to_string())], "{events:#?}");

    // The dog entered the middle zone and left it: 0 → 1 → 0; the person never entered.
    assert_eq!(count_sequence(&subscriber, &format!("{prefix}/yard/zones/middle")), ["0", "1", "0"]);
    assert_eq!(count_sequence(&subscriber, &format!("{prefix}/yard/zones/middle/dog")), ["1", "0"]);
    let zone_updates: Vec<(u64, Vec<String>)> = events
        .iter()
        .filter(|e| e.kind == "update" && e.changed.iter().any(|c| c == "zones"))
        .map(|e| (e.track_id, e.zones.clone()))
        .collect();
    assert_eq!(zone_updates, [(dog, vec!["middle".to_string()]), (dog, vec![])], "{events:#?}");
    assert!(subscriber.messages(&format!("{prefix}/yard/zones/middle")).iter().all(|m| !m.payload.is_empty()));

    // Each track's best picture, once, after its end.
    for (id, label) in [(dog, "dog"), (person, "person")] {
        let topic = format!("{prefix}/yard/events/snapshot/{label}/{id}");
        let pictures = subscriber.messages(&topic);
        assert_eq!(pictures.len(), 1, "{topic}");
        assert!(!pictures[0].retain);
        let picture = image::load_from_memory(&pictures[0].payload).expect("a JPEG");
        assert_eq!((picture.width(), picture.height()), (WIDTH, HEIGHT));
    }
    assert!(!log.contains("panicked"), "{log}");
}

/// SIGHUP with a self-intersecting zone is refused and the running zone keeps counting; SIGHUP with
/// a new zone clears the old zone's retained count and counts in the new one, and the tracks go on
/// (no second `start`, the same track id).
#[test]
fn sighup_reloads_zones_and_tracks_survive() {
    let prefix = "e2e-zone-reload";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("config.toml");
    // A looped file is stamped when read: on a slow machine (qemu) processed frames can be seconds
    // apart, so tracks must not time out here.
    let base = TestConfig::new(broker.port(), prefix).set("tracking", "max_lost_s", "3600.0").camera(
        "front",
        4.0,
        &sample_source("dog.jpg", "loop"),
    );
    let with_zone = |zone: &str, polygon: &str| {
        base.clone().append(&format!("[[camera.zone]]\nname = \"{zone}\"\npolygon = {polygon}\nlabels = [\"dog\"]"))
    };
    with_zone("all", "[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]").write(&config_path);
    let subscriber = Subscriber::connect(&broker, "e2e-zone-reload-sub", &[&format!("{prefix}/#")]);
    let mut daemon = RunningDaemon::start(&config_path, &[("RUST_LOG", OsStr::new("info"))]);

    let all = format!("{prefix}/front/zones/all");
    daemon.wait_for_messages(&subscriber, &all, "the dog counted in `all`", |m| {
        m.last().is_some_and(|m| m.payload == b"1")
    });
    let events_topic = format!("{prefix}/front/events");
    let starts =
        |subscriber: &Subscriber| events(subscriber, &events_topic).into_iter().filter(|e| e.kind == "start").count();
    let dog_track = || {
        events(&subscriber, &events_topic)
            .into_iter()
            .find(|e| e.kind == "start" && e.label == "dog")
            .map(|e| e.track_id)
    };
    let dog = dog_track().expect("the dog's start event came before its count");

    // A bow tie: refused, and the running zone stays.
    with_zone("bad", "[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]").write(&config_path);
    daemon.signal(libc::SIGHUP);
    let log = daemon.log_handle();
    daemon.wait_until("the bad zone to be refused", || log.text().contains("SIGHUP: keeping the running settings"));
    assert!(log.text().contains("intersects itself"), "the refusal says why:\n{}", log.text());

    let starts_before = starts(&subscriber);
    with_zone("left", "[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]").write(&config_path);
    daemon.signal(libc::SIGHUP);
    let left = format!("{prefix}/front/zones/left");
    daemon.wait_for_messages(&subscriber, &left, "the dog counted in `left`", |m| {
        m.last().is_some_and(|m| m.payload == b"1")
    });
    assert_eq!(count_sequence(&subscriber, &left), ["0", "1"]);
    assert_eq!(count_sequence(&subscriber, &all), ["0", "1", ""], "the removed zone's count is cleared at last");
    assert_eq!(starts(&subscriber), starts_before, "the reload started no track");
    let detections_topic = format!("{prefix}/front/detections");
    let seen = subscriber.messages(&detections_topic).len();
    let messages =
        daemon.wait_for_messages(&subscriber, &detections_topic, "a frame after the reload", |m| m.len() > seen);
    let last: DetectionsMessage = serde_json::from_slice(&messages[messages.len() - 1].payload).expect("detections");
    let dog_id = last.detections.iter().find(|d| d.label == "dog").and_then(|d| d.track_id);
    assert_eq!(dog_id, Some(dog), "the dog kept its track id: {last:?}");

    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
    subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");
    let ends: BTreeSet<u64> =
        events(&subscriber, &events_topic).iter().filter(|e| e.kind == "end").map(|e| e.track_id).collect();
    assert!(ends.contains(&dog), "every track ends at shutdown: {ends:?}");
    assert_eq!(count_sequence(&subscriber, &left).last().map(String::as_str), Some("0"), "counts fall back to 0");
}

/// Issue 33: a looping folder of unrelated pictures (the demo's) merged a person, a cat and a cup
/// into one "cup" track. Each file is now a scene of its own: every track ends when the next
/// picture comes, so each picture's objects are tracks of their own, each with one label, and
/// each `start` has its `end`. Each picture is held (`hold_s`) for a few measured frame times, so
/// inference sees it however slow this machine is (frames of a live camera are dropped when the
/// worker is behind); with `min_hits = 1` one processed frame makes a track, and with
/// `max_lost_s` of an hour only the change of picture can end one.
#[test]
fn unrelated_pictures_are_scenes_of_their_own_and_never_share_a_track() {
    let prefix = "e2e-pictures";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let pictures = dir.path().join("pictures");
    std::fs::create_dir(&pictures).expect("mkdir");
    for (n, name) in ["person.jpg", "chelsea.png", "coffee.png", "dog.jpg"].iter().enumerate() {
        std::fs::copy(sample(name), pictures.join(format!("{n}-{name}"))).expect("copy sample");
    }
    let hold_s = (Pace::measured().frame.as_secs_f64() * 4.0 + 1.0).ceil();
    let config = TestConfig::new(broker.port(), prefix)
        .set("tracking", "min_hits", "1")
        .set("tracking", "max_lost_s", "3600.0")
        .camera(
            "front",
            2.0,
            &format!(
                "{{ kind = \"images\", path = {:?}, mode = \"once\", hold_s = {hold_s} }}",
                pictures.display().to_string()
            ),
        )
        .write(&dir.path().join("config.toml"));
    let events_topic = format!("{prefix}/front/events");
    let subscriber = Subscriber::connect(&broker, "e2e-pictures-sub", &[&events_topic]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    wait_exit_while_progressing(&mut daemon, &subscriber, &events_topic);
    let events = events(&subscriber, &events_topic);
    let mut labels: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for event in &events {
        labels.entry(event.track_id).or_default().insert(event.label.clone());
    }
    let summary: Vec<(String, u64, String)> =
        events.iter().map(|e| (e.kind.clone(), e.track_id, e.label.clone())).collect();
    assert!(labels.values().all(|set| set.len() == 1), "a track with two labels: {summary:?}");
    let started: BTreeSet<&str> = events.iter().filter(|e| e.kind == "start").map(|e| e.label.as_str()).collect();
    for label in ["person", "cat", "cup", "dog"] {
        assert!(started.contains(label), "no track of the {label}'s picture: {summary:?}");
    }
    let ends: BTreeSet<u64> = events.iter().filter(|e| e.kind == "end").map(|e| e.track_id).collect();
    assert_eq!(ends, labels.keys().copied().collect(), "every track ends: {summary:?}");
}
