//! Motion gating as users see it (issue 48), end to end: the daemon (CPU backend, bundled model)
//! with `[motion]` enabled on a still camera, a real mosquitto broker, Home Assistant discovery.
//! How gating judges frames is tested beside the code (`motion`, `infer::gating`) and on the
//! issue's sequences (`motion::scenarios`); here what reaches MQTT: the entities, the retained
//! motion topic, the gating switch and what it does to the telemetry's gated frames.
//!
//! Waits are failure guards bounded by the measured pace of this machine; nothing here measures
//! speed or counts frames per second.

use std::process::Command;

use crate::broker::{Broker, Received, Subscriber};
use crate::daemon::{retained, sample_source, RunningDaemon, TestConfig};

/// Detection messages inferred with gating switched off before the test reads the gated count
/// again: with gating on, a still camera's frames after the first few are held.
const FRAMES_UNGATED: usize = 4;

/// `cameras.front.gated` of a telemetry message (absent while 0).
fn gated(telemetry: &Received) -> u64 {
    let message: serde_json::Value = serde_json::from_slice(&telemetry.payload).expect("telemetry is JSON");
    message["cameras"]["front"]["gated"].as_u64().unwrap_or(0)
}

/// The discovery config published on the topic ending in `/<object_id>/config`.
fn discovery(subscriber: &Subscriber, object_id: &str) -> Option<serde_json::Value> {
    let suffix = format!("/{object_id}/config");
    let message = subscriber.all_messages().into_iter().rev().find(|m| m.topic.ends_with(&suffix))?;
    serde_json::from_slice(&message.payload).ok()
}

/// `mosquitto_pub -q 1 -t topic -m payload` (not retained: a command).
fn command(broker: &Broker, topic: &str, payload: &str) {
    let status = Command::new("mosquitto_pub")
        .args(["-h", broker.host(), "-p", &broker.port().to_string(), "-q", "1", "-t", topic, "-m", payload])
        .status()
        .expect("mosquitto_pub (Debian: mosquitto-clients) runs");
    assert!(status.success(), "mosquitto_pub {topic} {payload}: {status}");
}

/// With `[motion]` on, a camera has a `motion gating` switch and a motion binary sensor in Home
/// Assistant and a retained motion topic; its still frames are gated (telemetry `gated` grows);
/// the switch set OFF sends every frame to inference (`gated` stops growing while frames are
/// detected) and ON gates again.
#[test]
fn with_motion_the_gating_switch_and_sensor_are_discovered_and_switched_off_every_frame_is_detected() {
    let prefix = "e2e-motion";
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .set("homeassistant", "discovery", "true")
        .set("telemetry", "interval_s", "1")
        .set("motion", "enabled", "true")
        .camera("front", 5.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let (telemetry, detections) = (format!("{prefix}/telemetry"), format!("{prefix}/front/detections"));
    let (state, motion) = (format!("{prefix}/front/controls/gating"), format!("{prefix}/front/motion"));
    let subscriber = Subscriber::connect(&broker, "e2e-motion-sub", &[&format!("{prefix}/#"), "homeassistant/#"]);
    let mut daemon = RunningDaemon::start(&config, &[]);

    // (a) The switch and the sensor, on the daemon's topics.
    daemon.wait_until("the gating switch and the motion sensor discovered", || {
        discovery(&subscriber, "front_gating").is_some() && discovery(&subscriber, "front_motion").is_some()
    });
    let switch = discovery(&subscriber, "front_gating").expect("the switch");
    assert_eq!(
        (&switch["state_topic"], &switch["command_topic"]),
        (&serde_json::json!(state), &serde_json::json!(format!("{state}/set"))),
        "{switch}"
    );
    let sensor = discovery(&subscriber, "front_motion").expect("the sensor");
    assert_eq!(
        (&sensor["state_topic"], &sensor["device_class"]),
        (&serde_json::json!(motion), &serde_json::json!("motion"))
    );
    daemon.wait_for_messages(&subscriber, &state, "gating ON", |m| m.last().is_some_and(|m| m.payload == b"ON"));

    // (c) Nothing moves: the sensor is OFF, retained for whoever subscribes later.
    daemon.wait_for_messages(&subscriber, &motion, "the motion sensor", |m| !m.is_empty());
    assert_eq!(retained(&broker, "e2e-motion-late", &motion).text(), "OFF");

    // Gating on: the still frames are held.
    daemon.wait_for_messages(&subscriber, &telemetry, "gated frames", |m| m.last().is_some_and(|m| gated(m) > 0));

    // (b) OFF: every frame goes to inference. The second telemetry message after the switch's
    // state was taken a telemetry period after it, when no frame judged before it can still count.
    command(&broker, &format!("{state}/set"), "OFF");
    daemon.wait_for_messages(&subscriber, &state, "gating OFF", |m| m.last().is_some_and(|m| m.payload == b"OFF"));
    let switched = subscriber.all_messages().len();
    let after_switch = |topic: &str| -> Vec<Received> {
        subscriber.all_messages().into_iter().skip(switched).filter(|m| m.topic == topic).collect()
    };
    daemon.wait_until("two telemetry messages after gating OFF", || after_switch(&telemetry).len() >= 2);
    let from = after_switch(&telemetry)[1].clone();
    let seen = subscriber.all_messages().len();
    let since_from = |topic: &str| -> Vec<Received> {
        subscriber.all_messages().into_iter().skip(seen).filter(|m| m.topic == topic).collect()
    };
    daemon.wait_until("frames detected with gating OFF, then a telemetry message", || {
        since_from(&detections).len() >= FRAMES_UNGATED && !since_from(&telemetry).is_empty()
    });
    let to = since_from(&telemetry).last().cloned().expect("a telemetry message");
    assert_eq!(gated(&to), gated(&from), "no frame gated while gating is OFF:\n{}\n{}", from.text(), to.text());

    // ON: gated again.
    command(&broker, &format!("{state}/set"), "ON");
    daemon.wait_for_messages(&subscriber, &state, "gating ON again", |m| m.last().is_some_and(|m| m.payload == b"ON"));
    daemon.wait_for_messages(&subscriber, &telemetry, "gated frames again", |m| {
        m.last().is_some_and(|m| gated(m) > gated(&to))
    });
}
