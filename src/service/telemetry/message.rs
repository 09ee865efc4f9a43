//! The `<prefix>/telemetry` JSON message, whose field names are a stable, documented interface
//! (the book: docs/src/reference/telemetry.md).
//!
//! Owns: [`TelemetryReport`] (everything one message carries), the JSON layout and
//! [`TELEMETRY_SCHEMA`]. Must not: sample anything itself, or publish (the MQTT outlet
//! serialises the report with it and publishes it; `GET /api/status` shows the same fields).

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::Serialize;

use super::camera_stats::{CameraSnapshot, Percentiles};
use super::jetson::{GpuState, JetsonSysfs, PowerRail};
use super::system::{ProcessLoad, SystemLoad, SystemSample};
use crate::frame::CaptureMode;
use crate::service::envelope::Envelope;
use crate::service::run_id::{Stamp, KIND_TELEMETRY};
use crate::source::SourceState;
use crate::sys::time::Rfc3339Millis;

/// Version of the telemetry message layout; bumped on any incompatible change (2: the MQTT
/// connection's `mqtt` and the recorder's `record` became `outlets.mqtt` and `outlets.record`).
pub const TELEMETRY_SCHEMA: u32 = 2;

/// Everything one telemetry message carries. `engine` and each of `outlets` are filled by their
/// owners (backend/engine info; each outlet's report of its figures) and embedded as they are.
#[derive(Debug, Clone)]
pub struct TelemetryReport<'a> {
    /// The daemon's run and this message's sequence number (`crate::service::run_id::Stamp`).
    pub stamp: Option<Stamp<'a>>,
    pub cameras: &'a [CameraSnapshot],
    pub load: Option<SystemSample>,
    pub jetson: &'a JetsonSysfs,
    pub engine: Option<serde_json::Value>,
    /// Each outlet's figures under its name (`crate::publish::figures`: MQTT's connection and
    /// queue, the recorder's clips, ...).
    pub outlets: Vec<(String, serde_json::Value)>,
    /// With `[reid]`: re-identification's figures (`crate::publish::camera_reid::ReidFigures`).
    pub reid: Option<serde_json::Value>,
    pub ts: SystemTime,
}

#[derive(Serialize)]
struct CameraJson<'a> {
    /// `state` and, while reconnecting, `attempt` and `last_error`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    source: Option<&'a SourceState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    fps: f64,
    frames: u64,
    dropped: u64,
    over_limit: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    capture_mode: Option<CaptureMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_copies: Option<f64>,
    truncated: u64,
    /// Absent while 0 (always without classifiers).
    #[serde(skip_serializing_if = "is_zero")]
    classify_skipped: u64,
    /// Absent while 0 (always without `[motion]` gating).
    #[serde(skip_serializing_if = "is_zero")]
    gated: u64,
    /// Inference time the gated frames saved, in seconds; absent while nothing was gated.
    #[serde(skip_serializing_if = "Option::is_none")]
    inference_saved_s: Option<f64>,
    latency_ms: BTreeMap<&'static str, &'a Percentiles>,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

#[derive(Serialize)]
struct TelemetryJson<'a> {
    #[serde(flatten)]
    envelope: Envelope<'a>,
    ts: String,
    cameras: BTreeMap<&'a str, CameraJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<&'a ProcessLoad>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<&'a SystemLoad>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpu: Option<&'a GpuState>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    thermal: &'a BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    power: &'a BTreeMap<String, PowerRail>,
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    outlets: BTreeMap<&'a str, &'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reid: Option<&'a serde_json::Value>,
    warnings: Vec<String>,
}

/// The `<prefix>/telemetry` payload (JSON; field reference in the book, docs/src/reference/telemetry.md).
pub fn telemetry_message(report: &TelemetryReport<'_>) -> Vec<u8> {
    let cameras = report
        .cameras
        .iter()
        .map(|camera| {
            let latency_ms = camera.latency_ms.iter().map(|(stage, p)| (stage.name(), p)).collect();
            let json = CameraJson {
                source: camera.source.as_ref().map(|report| &report.state),
                since: camera.source.as_ref().map(|report| Rfc3339Millis(report.since).to_string()),
                fps: camera.fps,
                frames: camera.frames,
                dropped: camera.dropped,
                over_limit: camera.over_limit,
                capture_mode: camera.capture_mode,
                frame_copies: camera.frame_copies,
                truncated: camera.truncated,
                classify_skipped: camera.classify_skipped,
                gated: camera.gated,
                inference_saved_s: (camera.gated > 0).then(|| (camera.inference_saved_s * 1000.0).round() / 1000.0),
                latency_ms,
            };
            (camera.name.as_str(), json)
        })
        .collect();
    let message = TelemetryJson {
        envelope: Envelope::new(TELEMETRY_SCHEMA, report.stamp, KIND_TELEMETRY),
        ts: Rfc3339Millis(report.ts).to_string(),
        cameras,
        process: report.load.as_ref().map(|load| &load.process),
        system: report.load.as_ref().map(|load| &load.system),
        gpu: report.jetson.gpu.as_ref(),
        thermal: &report.jetson.thermal,
        power: &report.jetson.power,
        engine: report.engine.as_ref(),
        outlets: report.outlets.iter().map(|(name, figures)| (name.as_str(), figures)).collect(),
        reid: report.reid.as_ref(),
        warnings: report.jetson.clock_warning().into_iter().collect(),
    };
    // Serialising plain structs, string-keyed maps and finite numbers cannot fail; an empty payload
    // would only ever show up as an obviously broken message, never as a crash.
    serde_json::to_vec(&message).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::frame::CaptureMode;
    use crate::service::telemetry::camera_stats::CameraStats;
    use crate::source::SourceReport;

    #[test]
    fn frame_copies_are_per_frame_over_the_window_with_the_capture_mode() {
        let stats = CameraStats::new("front");
        assert_eq!((stats.snapshot().capture_mode, stats.snapshot().frame_copies), (None, None));
        stats.set_capture(Some(CaptureMode::Copy), 10, 10);
        let first = stats.snapshot();
        assert_eq!((first.capture_mode, first.frame_copies), (Some(CaptureMode::Copy), Some(1.0)));
        stats.set_capture(Some(CaptureMode::Decode), 14, 11);
        assert_eq!(stats.snapshot().frame_copies, Some(0.25), "1 copy in 4 frames since the last snapshot");
        let idle = stats.snapshot();
        assert_eq!((idle.capture_mode, idle.frame_copies), (Some(CaptureMode::Decode), None));
        let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&TelemetryReport {
            cameras: &[first],
            load: None,
            jetson: &JetsonSysfs::default(),
            engine: None,
            outlets: Vec::new(),
            reid: None,
            ts: SystemTime::UNIX_EPOCH,
            stamp: None,
        }))
        .expect("json");
        assert_eq!(json["cameras"]["front"]["capture_mode"], "copy");
        assert_eq!(json["cameras"]["front"]["frame_copies"], 1.0);
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_millis() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        assert_eq!(Rfc3339Millis(at).to_string(), "2026-11-22T10:00:00.123Z");
        assert_eq!(Rfc3339Millis(SystemTime::UNIX_EPOCH).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Rfc3339Millis(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)).to_string(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn telemetry_shows_each_cameras_source_state() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        let offline = SourceState::Reconnecting { attempt: 3, last_error: "gone".into() };
        let cameras = [
            CameraSnapshot::for_tests("gate", 0.0).with_source(SourceReport { state: offline, since }),
            CameraSnapshot::for_tests("front", 5.0).with_source(SourceReport { state: SourceState::Streaming, since }),
            CameraSnapshot::for_tests("other", 5.0),
        ];
        let jetson = JetsonSysfs::default();
        let report = TelemetryReport {
            stamp: Some(Stamp { run: "0123456789abcdef", seq: 3 }),
            cameras: &cameras,
            load: None,
            jetson: &jetson,
            engine: None,
            outlets: Vec::new(),
            reid: None,
            ts: since,
        };
        let json: serde_json::Value = serde_json::from_slice(&telemetry_message(&report)).expect("JSON");
        let gate = &json["cameras"]["gate"];
        assert_eq!(
            (&gate["state"], &gate["since"], &gate["attempt"], &gate["last_error"]),
            (
                &serde_json::json!("reconnecting"),
                &serde_json::json!("2026-11-22T10:00:00.123Z"),
                &serde_json::json!(3),
                &serde_json::json!("gone")
            )
        );
        assert_eq!(json["cameras"]["front"]["state"], "streaming");
        assert!(json["cameras"]["front"].get("attempt").is_none());
        assert!(json["cameras"]["other"].get("state").is_none(), "no state when none is known");
        assert_eq!((&json["run"], &json["seq"]), (&serde_json::json!("0123456789abcdef"), &serde_json::json!(3)));
    }
}

/// Property tests: any camera names, counters, latencies and sysfs readings give valid JSON that
/// reads back to the same value.
#[cfg(test)]
mod properties {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::frame::Stage;
    use crate::source::SourceReport;

    /// Cases per run on the host; see `proptest_support`.
    const CASES: u32 = 256;

    fn camera() -> impl Strategy<Value = CameraSnapshot> {
        let latency = (prop::sample::select(Stage::ALL.to_vec()), 0.0f32..1e9, 0.0f32..1e9)
            .prop_map(|(stage, p50, p99)| (stage, Percentiles { p50, p99 }));
        let state = prop_oneof![
            Just(SourceState::Streaming),
            (any::<u32>(), any::<String>())
                .prop_map(|(attempt, last_error)| SourceState::Reconnecting { attempt, last_error }),
            Just(SourceState::Ended),
            Just(SourceState::Stopped),
        ];
        let source = prop::option::of((state, 0u64..1_000_000_000_000).prop_map(|(state, millis)| SourceReport {
            state,
            since: SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
        }));
        let counters = (any::<u64>(), any::<u64>(), any::<u64>());
        (any::<String>(), 0.0f64..1e12, counters, prop::collection::vec(latency, 0..6), source).prop_map(
            |(name, fps, (frames, dropped, over_limit), latency_ms, source)| CameraSnapshot {
                name,
                fps,
                frames,
                dropped,
                over_limit,
                truncated: over_limit / 2,
                classify_skipped: 0,
                gated: 0,
                inference_saved_s: 0.0,
                latency_ms,
                source,
                capture_mode: None,
                frame_copies: None,
            },
        )
    }

    fn jetson() -> impl Strategy<Value = JetsonSysfs> {
        let thermal = prop::collection::btree_map(any::<String>(), -100.0f64..1e6, 0..4);
        let rail = (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(mv, ma, mw)| PowerRail { mv, ma, mw });
        let power = prop::collection::btree_map(any::<String>(), rail, 0..3);
        let gpu = prop::option::of(
            (prop::option::of(any::<String>()), prop::option::of(0.0f32..100.0), prop::option::of(any::<u64>()))
                .prop_map(|(devfreq, load_percent, freq_hz)| GpuState {
                    devfreq,
                    load_percent,
                    freq_hz,
                    min_freq_hz: freq_hz,
                    max_freq_hz: freq_hz.map(|hz| hz.saturating_add(1)),
                    governor: Some("nvhost_podgov".into()),
                    at_max_clock: Some(false),
                }),
        );
        (gpu, thermal, power).prop_map(|(gpu, thermal, power)| JetsonSysfs { gpu, thermal, power })
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn telemetry_messages_are_json_that_round_trips(
            cameras in prop::collection::vec(camera(), 0..4),
            jetson in jetson(),
            seconds in 0u64..1_000_000_000_000,
        ) {
            let report = TelemetryReport {
                stamp: None,
                cameras: &cameras,
                load: None,
                jetson: &jetson,
                engine: None,
                outlets: vec![("mqtt".into(), serde_json::json!({"connected": true, "queued": 1}))],
                reid: None,
                ts: SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
            };
            let bytes = telemetry_message(&report);
            let parsed: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&bytes))))?;
            let reparsed: serde_json::Value =
                serde_json::from_slice(&serde_json::to_vec(&parsed).expect("serialise")).expect("parse");
            prop_assert_eq!(&reparsed, &parsed);
            let names: BTreeMap<&str, ()> = cameras.iter().map(|c| (c.name.as_str(), ())).collect();
            prop_assert_eq!(parsed["cameras"].as_object().map(|o| o.len()), Some(names.len()));
        }
    }
}
