//! Serving while the engine builds, and the check before it serves, end to end: the real binary
//! with the stand-in toolchain (`JETSON_DETECTD_STAND_IN_ENGINE`: builds by waiting, runs the model
//! on the CPU), the bundled model, a real mosquitto.
//!
//! The stand-in's build ends when the test creates its `until` file, never by the clock: what
//! happens during the build is observed while it provably lasts, however loaded the machine is.
//! Waits are failure guards ([`crate::pace::Pace`]). `SIGTERM` during a build ends the daemon
//! cleanly, whether the CPU serves meanwhile or the start waits for the engine
//! (`serve_while_building = "none"`), and leaves no engine file.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::broker::{Broker, Received, Subscriber};
use crate::daemon::{sample, toml_string, RunningDaemon, TestConfig};

const STAND_IN: &str = "JETSON_DETECTD_STAND_IN_ENGINE";

/// A test daemon's files: its config, and the engine cache and the build's gate in one temp dir.
struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    cache: PathBuf,
    /// The stand-in build ends once this file exists.
    gate: PathBuf,
}

/// The bundled model with an engine ("auto": the stand-in builds it), one camera replaying
/// `picture` as a recording (so that no frame is dropped by the ring: every frame's number is
/// published), a message for every frame, and telemetry every second.
fn setup(broker: &Broker, prefix: &str, picture: &str, extra: &[(&str, &str, &str)]) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let source = format!(
        "{{ kind = \"images\", path = {}, mode = \"loop\", replay_fps = 5.0 }}",
        toml_string(&sample(picture).display().to_string())
    );
    let mut config = TestConfig::new(broker.port(), prefix)
        .set("device", "backend", "\"auto\"")
        .set("engine", "cache_dir", &toml_string(&cache.display().to_string()))
        .set("telemetry", "interval_s", "1")
        .set("mqtt", "publish", "\"every_frame\"")
        .camera("yard", 0.0, &source);
    for (section, key, value) in extra {
        config = config.set(section, key, value);
    }
    let config = config.write(&dir.path().join("config.toml"));
    let gate = dir.path().join("build-may-end");
    Setup { _dir: dir, config, cache, gate }
}

impl Setup {
    fn start(&self, flags: &str) -> RunningDaemon {
        let value = format!("build_s=1,until={}{flags}", self.gate.display());
        RunningDaemon::start(&self.config, &[(STAND_IN, OsStr::new(&value))])
    }

    fn end_build(&self) {
        std::fs::write(&self.gate, b"").expect("open the gate");
    }

    /// The cache directory's engine files (staged ones too), by name.
    fn engines(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.cache) else { return Vec::new() };
        entries
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name.contains(".engine") && !name.contains(".stand-in"))
            .collect()
    }
}

fn json(message: &Received) -> Value {
    serde_json::from_slice(&message.payload).unwrap_or_else(|e| panic!("{}: {e}", message.text()))
}

/// The `engine.build` section of a telemetry message (`Null` without one).
fn build(message: &Received) -> Value {
    json(message)["engine"]["build"].clone()
}

fn telemetry_with(messages: &[Received], status: &str, serving: &str) -> bool {
    messages.iter().map(build).any(|build| build["status"] == status && build["serving"] == serving)
}

/// The track id of the person in a detections message, once the track is confirmed.
fn person_track(frame: &Value) -> Option<u64> {
    frame["detections"].as_array()?.iter().find(|d| d["label"] == "person")?["track_id"].as_u64()
}

/// Where in `all` (every message, in the order the daemon sent them) the first message on `topic`
/// that satisfies `what` is.
fn first(all: &[Received], topic: &str, what: impl Fn(&Received) -> bool) -> Option<usize> {
    all.iter().position(|message| message.topic == topic && what(message))
}

#[test]
fn the_cpu_serves_from_the_start_while_the_engine_builds_and_the_engine_takes_over_keeping_tracks_and_sequences() {
    let broker = Broker::start();
    let prefix = "jd-test/engine-build/swap";
    let setup = setup(&broker, prefix, "person.jpg", &[]);
    let subscriber = Subscriber::connect(&broker, "engine-build-swap", &[&format!("{prefix}/#")]);
    let (detections, telemetry) = (format!("{prefix}/yard/detections"), format!("{prefix}/telemetry"));
    let mut daemon = setup.start("");

    daemon.wait_for_messages(&subscriber, &telemetry, "a report of the build, the CPU serving", |messages| {
        telemetry_with(messages, "building", "cpu")
    });
    daemon.wait_for_messages(&subscriber, &detections, "a track while the engine builds", |messages| {
        messages.iter().map(json).any(|frame| person_track(&frame).is_some())
    });
    assert!(setup.engines().is_empty(), "nothing is cached while it builds: {:?}", setup.engines());
    setup.end_build();
    daemon.wait_for_messages(&subscriber, &telemetry, "the engine serving", |messages| {
        telemetry_with(messages, "ready", "stand-in")
    });
    let swapped = subscriber.all_messages().len();
    daemon.wait_until("three frames on the engine", || {
        subscriber.all_messages()[swapped..].iter().filter(|message| message.topic == detections).count() >= 3
    });
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "{}", daemon.log());

    let all = subscriber.all_messages();
    let serving_engine = first(&all, &telemetry, |m| build(m)["serving"] == "stand-in").expect("the swap");
    let building = first(&all, &telemetry, |m| build(m)["status"] == "building").expect("the build");
    let first_detection = first(&all, &detections, |_| true).expect("a detection");
    assert!(building < serving_engine && first_detection < serving_engine, "the CPU served before the swap");
    let frames: Vec<Value> = all.iter().filter(|m| m.topic == detections).map(json).collect();
    let numbers = |field: &str| frames.iter().map(|frame| frame[field].as_u64().expect(field)).collect::<Vec<_>>();
    let (frame_numbers, seqs) = (numbers("frame"), numbers("seq"));
    assert!(frame_numbers.windows(2).all(|pair| pair[1] == pair[0] + 1), "no frame lost: {frame_numbers:?}");
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "one sequence across the swap");
    let tracks: Vec<Option<u64>> = frames.iter().map(person_track).collect();
    let confirmed: Vec<u64> = tracks.iter().flatten().copied().collect();
    assert!(confirmed.windows(2).all(|pair| pair[0] == pair[1]), "one person, one track throughout: {tracks:?}");
    let swap_frame = all[..serving_engine].iter().filter(|m| m.topic == detections).count();
    assert!(tracks[swap_frame..].iter().all(Option::is_some), "the track goes on after the swap: {tracks:?}");
    assert!(tracks[..swap_frame].iter().any(Option::is_some), "the track began on the CPU: {tracks:?}");

    let report = build(&all[serving_engine]);
    let agreement = &report["models"][0]["agreement"];
    assert_eq!((&agreement["recall"], &agreement["precision"]), (&Value::from(1.0), &Value::from(1.0)), "{report}");
    assert_eq!(setup.engines().len(), 2, "the checked engine and its sidecar are cached: {:?}", setup.engines());
}

#[test]
fn an_engine_that_disagrees_with_its_model_is_refused_and_the_cpu_keeps_serving() {
    let broker = Broker::start();
    let prefix = "jd-test/engine-build/refused";
    let setup = setup(&broker, prefix, "dog.jpg", &[]);
    let subscriber = Subscriber::connect(&broker, "engine-build-refused", &[&format!("{prefix}/#")]);
    let (detections, telemetry) = (format!("{prefix}/yard/detections"), format!("{prefix}/telemetry"));
    let mut daemon = setup.start(",altered");
    setup.end_build();
    let reports = daemon.wait_for_messages(&subscriber, &telemetry, "the engine refused", |messages| {
        telemetry_with(messages, "refused", "cpu")
    });
    let refused = reports.iter().map(build).find(|build| build["status"] == "refused").expect("refused");
    let model = &refused["models"][0];
    let problem = model["problem"].as_str().expect("why");
    assert!(problem.contains("under engine.min_agreement = 0.9"), "{refused}");
    assert!(model["agreement"]["recall"].as_f64().is_some_and(|recall| recall < 0.9), "{refused}");
    let seen = subscriber.messages(&detections).len();
    daemon
        .wait_for_messages(&subscriber, &detections, "frames after the refusal", |messages| messages.len() >= seen + 2);
    assert!(setup.engines().is_empty(), "a refused engine is never cached: {:?}", setup.engines());
    assert!(daemon.log().contains("the new engine is refused, the CPU keeps serving"), "{}", daemon.log());
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "{}", daemon.log());
}

#[test]
fn with_on_disagreement_warn_the_disagreeing_engine_serves_and_the_warning_stays_in_the_status() {
    let broker = Broker::start();
    let prefix = "jd-test/engine-build/warn";
    let setup = setup(&broker, prefix, "dog.jpg", &[("engine", "on_disagreement", "\"warn\"")]);
    let subscriber = Subscriber::connect(&broker, "engine-build-warn", &[&format!("{prefix}/#")]);
    let telemetry = format!("{prefix}/telemetry");
    let mut daemon = setup.start(",altered");
    setup.end_build();
    daemon.wait_for_messages(&subscriber, &telemetry, "the disagreeing engine serving", |messages| {
        telemetry_with(messages, "ready", "stand-in")
    });
    let seen = subscriber.messages(&telemetry).len();
    let later = daemon.wait_for_messages(&subscriber, &telemetry, "a later report", |m| m.len() > seen);
    let model = &build(&later[seen])["models"][0];
    assert!(model["problem"].as_str().is_some_and(|why| why.starts_with("disagrees with the CPU")), "{model}");
    assert_eq!(setup.engines().len(), 2, "served, so cached: {:?}", setup.engines());
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "{}", daemon.log());
}

#[test]
fn sigterm_during_a_build_ends_the_daemon_cleanly_and_leaves_no_engine_file() {
    let broker = Broker::start();
    let prefix = "jd-test/engine-build/sigterm";
    let setup = setup(&broker, prefix, "person.jpg", &[]);
    let subscriber = Subscriber::connect(&broker, "engine-build-sigterm", &[&format!("{prefix}/#")]);
    let (detections, telemetry) = (format!("{prefix}/yard/detections"), format!("{prefix}/telemetry"));
    let mut daemon = setup.start("");
    daemon.wait_for_messages(&subscriber, &telemetry, "the build", |messages| {
        telemetry_with(messages, "building", "cpu")
    });
    daemon.wait_for_messages(&subscriber, &detections, "a frame served meanwhile", |messages| !messages.is_empty());
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "exit status 0 during a build; log:\n{}", daemon.log());
    assert!(daemon.log().contains("SIGTERM: shutting down"), "{}", daemon.log());
    let left: Vec<String> = std::fs::read_dir(&setup.cache)
        .expect("the cache directory")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".engine") || name.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "nothing half-built is left: {left:?}");
    subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");
    assert!(!Path::new(&setup.gate).exists(), "the build was never let finish");
}

#[test]
fn with_serve_while_building_none_sigterm_during_the_build_the_start_waits_for_ends_the_daemon_cleanly() {
    let broker = Broker::start();
    let prefix = "jd-test/engine-build/sigterm-waited";
    let setup = setup(&broker, prefix, "person.jpg", &[("engine", "serve_while_building", "\"none\"")]);
    let subscriber = Subscriber::connect(&broker, "engine-build-sigterm-waited", &[&format!("{prefix}/#")]);
    let mut daemon = setup.start("");
    let log = daemon.log_handle();
    daemon.wait_until("the build the start waits for", || {
        let log = log.text();
        log.contains("the start waits for its engine") && log.contains("building the engine")
    });
    daemon.signal(libc::SIGTERM);
    // The build never ends by itself (its gate stays shut): the daemon's exit is the cancel's.
    assert!(daemon.wait_exit().success(), "exit status 0 during the build; log:\n{}", daemon.log());
    assert!(daemon.log().contains("SIGTERM during the start: shutting down"), "{}", daemon.log());
    assert!(setup.engines().is_empty(), "nothing is cached: {:?}", setup.engines());
    let left: Vec<String> = std::fs::read_dir(&setup.cache)
        .expect("the cache directory")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "nothing half-written is left: {left:?}");
    subscriber.wait_for_payload(&format!("{prefix}/status"), b"offline");
    assert!(subscriber.messages(&format!("{prefix}/yard/detections")).is_empty(), "nothing was served");
}
