//! The versioned JSON message published for each processed frame (`<prefix>/<camera>/detections`).
//!
//! Owns: the schema (field names, units, rounding, timestamp format) and its encoder. The public
//! structs ([`DetectionsMessage`] and friends) are the documented schema and parse what
//! [`detections_message`] writes; the encoder itself serialises straight from the pipeline's
//! [`Detection`]s so that a frame costs one output buffer and nothing else. Must not: decide when
//! a message is sent, or know about topics and MQTT.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

use crate::detection::{BoundingBox, Detection, Labels};
use crate::frame::{FrameMeta, FrameTimings};
use crate::infer::per_track::{Attribute, Attributes, TrackAttributes};
use crate::service::envelope::Envelope;
use crate::service::run_id::{Stamp, KIND_DETECTIONS};
use crate::sys::time::Rfc3339Millis;

/// Value of the `schema` field. Bumped only for changes that break existing consumers.
pub const SCHEMA_VERSION: u32 = 1;

/// Time spent per pipeline stage on one frame.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// In the camera's ring until the inference worker took the frame; `None` for a frame that
    /// went through no ring (`detect`).
    pub wait: Option<Duration>,
    pub preprocess: Duration,
    pub infer: Duration,
    pub postprocess: Duration,
    /// Capture hand-over to message encoding; at least the sum of the stages.
    pub total: Duration,
}

impl From<&FrameTimings> for Latency {
    /// Stages a frame skipped count as zero.
    fn from(timings: &FrameTimings) -> Self {
        Latency {
            wait: timings.wait,
            preprocess: timings.pre.unwrap_or_default(),
            infer: timings.infer.unwrap_or_default(),
            postprocess: timings.post.unwrap_or_default(),
            total: timings.total.unwrap_or_default(),
        }
    }
}

/// One detections message, as consumers parse it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectionsMessage {
    /// [`SCHEMA_VERSION`]; the daemon's run, this camera's detections messages in it ([`Stamp`]) and
    /// `detections` (`crate::service::run_id::KIND_DETECTIONS`), absent in `detect`'s output.
    #[serde(flatten)]
    pub envelope: Envelope<'static>,
    /// The camera's configured name.
    pub camera: String,
    /// Per-camera frame sequence number; gaps mean frames dropped before inference.
    pub frame: u64,
    /// Capture time, RFC 3339 UTC with milliseconds (`2026-11-22T10:00:00.123Z`).
    pub ts: String,
    /// Source frame size in pixels; boxes are in this coordinate space.
    pub width: u32,
    pub height: u32,
    pub latency_ms: LatencyMs,
    pub detections: Vec<DetectionRecord>,
}

/// Stage latencies in milliseconds, rounded to 0.01 ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Absent where the frame went through no ring (`detect`), and in messages of versions
    /// before it was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<f64>,
    pub pre: f64,
    pub infer: f64,
    pub post: f64,
    pub total: f64,
}

impl From<&Latency> for LatencyMs {
    fn from(latency: &Latency) -> Self {
        LatencyMs {
            wait: latency.wait.map(milliseconds),
            pre: milliseconds(latency.preprocess),
            infer: milliseconds(latency.infer),
            post: milliseconds(latency.postprocess),
            total: milliseconds(latency.total),
        }
    }
}

/// One detected object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectionRecord {
    pub label: String,
    pub class_id: usize,
    /// Confidence 0..=1, rounded to 3 decimals.
    pub score: f64,
    #[serde(rename = "box")]
    pub bbox: BoxPixels,
    /// The confirmed track this detection belongs to (absent while tracking is off or the object's
    /// track is not confirmed yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track_id: Option<u64>,
    /// The latest answer of each per-track model on its track, by model name (absent while none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, AttributeRecord>,
}

/// One per-track model's answer on a track, as events and detections carry it, whichever kind of
/// model gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttributeRecord {
    /// `{"label": …, "score": …}` (a classifier's).
    Label {
        /// From the model's label file.
        label: String,
        /// 0..=1, rounded to 3 decimals.
        score: f64,
    },
    /// A vector of numbers (an embedding).
    Vector(Vec<f32>),
}

impl From<&Attribute> for AttributeRecord {
    fn from(attribute: &Attribute) -> AttributeRecord {
        match attribute {
            Attribute::Label { label, score } => {
                AttributeRecord::Label { label: label.clone(), score: round_to(f64::from(*score), 1000.0) }
            }
            Attribute::Vector(values) => AttributeRecord::Vector(values.to_vec()),
        }
    }
}

/// Box corners in source-frame pixels, rounded to 0.1 px.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BoxPixels {
    pub x1: f64,
    pub y1: f64,
    pub x2: f64,
    pub y2: f64,
}

impl From<&BoundingBox> for BoxPixels {
    /// Every message's rounding of a box: 0.1 px.
    fn from(b: &BoundingBox) -> BoxPixels {
        let tenth = |v: f32| round_to(f64::from(v), 10.0);
        BoxPixels { x1: tenth(b.x1), y1: tenth(b.y1), x2: tenth(b.x2), y2: tenth(b.y2) }
    }
}

/// Every message's rounding of a score: 3 decimals.
pub fn rounded_score(score: f32) -> f64 {
    round_to(f64::from(score), 1000.0)
}

/// Encodes the detections message of one frame.
pub fn detections_message(
    camera: &str,
    meta: &FrameMeta,
    latency: &Latency,
    detections: &[Detection],
    labels: &Labels,
) -> Vec<u8> {
    tracked_detections_message(camera, meta, latency, detections, &[], None, labels, None)
}

/// Encodes the detections message of one frame whose detections were tracked: `track_ids[i]` is the
/// confirmed track of `detections[i]` (a shorter slice leaves the rest without a track), and
/// `attributes` what classifiers said of the tracks. The daemon's messages carry a [`Stamp`].
#[allow(clippy::too_many_arguments)]
pub fn tracked_detections_message(
    camera: &str,
    meta: &FrameMeta,
    latency: &Latency,
    detections: &[Detection],
    track_ids: &[Option<u64>],
    attributes: Option<&TrackAttributes>,
    labels: &Labels,
    stamp: Option<Stamp<'_>>,
) -> Vec<u8> {
    let view = MessageView {
        envelope: Envelope::new(SCHEMA_VERSION, stamp, KIND_DETECTIONS),
        camera,
        frame: meta.sequence,
        ts: Rfc3339Millis(meta.captured_at),
        width: meta.width,
        height: meta.height,
        latency_ms: LatencyMs::from(latency),
        detections: TrackedDetectionsView { detections, track_ids, attributes, labels },
    };
    // Room for the fixed fields plus a typical detection, so most messages never reallocate.
    let mut out = Vec::with_capacity(256 + 96 * detections.len());
    // Serialising plain numbers and strings into a Vec cannot fail.
    if serde_json::to_writer(&mut out, &view).is_err() {
        out.clear();
    }
    out
}

/// Serialises exactly like [`DetectionsMessage`] (same field order and rounding) without building it.
#[derive(Serialize)]
struct MessageView<'a> {
    #[serde(flatten)]
    envelope: Envelope<'a>,
    camera: &'a str,
    frame: u64,
    #[serde(serialize_with = "serialize_display")]
    ts: Rfc3339Millis,
    width: u32,
    height: u32,
    latency_ms: LatencyMs,
    detections: TrackedDetectionsView<'a>,
}

/// Serialises detections as the `detections` array of the schema (labels resolved, rounding as
/// documented), without building [`DetectionRecord`]s. Also used by the `detect` command.
pub struct DetectionsView<'a> {
    pub detections: &'a [Detection],
    pub labels: &'a Labels,
}

impl Serialize for DetectionsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        TrackedDetectionsView { detections: self.detections, track_ids: &[], attributes: None, labels: self.labels }
            .serialize(serializer)
    }
}

/// [`DetectionsView`] with each detection's track id.
struct TrackedDetectionsView<'a> {
    detections: &'a [Detection],
    track_ids: &'a [Option<u64>],
    attributes: Option<&'a TrackAttributes>,
    labels: &'a Labels,
}

impl Serialize for TrackedDetectionsView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.detections.len()))?;
        for (index, detection) in self.detections.iter().enumerate() {
            let track_id = self.track_ids.get(index).copied().flatten();
            seq.serialize_element(&DetectionView {
                label: self.labels.name(detection.class_id),
                class_id: detection.class_id,
                score: rounded_score(detection.score),
                bbox: BoxPixels::from(&detection.bbox),
                track_id,
                attributes: track_id.and_then(|id| self.attributes?.get(&id)).map(AttributesView),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct DetectionView<'a> {
    label: Cow<'a, str>,
    class_id: usize,
    score: f64,
    #[serde(rename = "box")]
    bbox: BoxPixels,
    #[serde(skip_serializing_if = "Option::is_none")]
    track_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attributes: Option<AttributesView<'a>>,
}

/// A track's attributes as [`AttributeRecord`]s, serialised without copying.
struct AttributesView<'a>(&'a Attributes);

impl Serialize for AttributesView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, attribute)| (name, AttributeRecord::from(attribute))))
    }
}

fn serialize_display<S: Serializer>(value: &Rfc3339Millis, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

fn milliseconds(duration: Duration) -> f64 {
    round_to(duration.as_secs_f64() * 1000.0, 100.0)
}

/// 2^53: up to here every whole number is an f64, and a decimal with at most this many units and
/// a small exponent is parsed back exactly by every JSON parser (serde_json's default one too).
const EXACT_UNITS: f64 = 9_007_199_254_740_992.0;

/// Rounds to `1/scale`; non-finite values become 0 because JSON has no NaN or infinity, and
/// magnitudes beyond 2^53 units (never a real box, score or latency) are clamped so that the
/// number reads back exactly.
pub(crate) fn round_to(value: f64, scale: f64) -> f64 {
    if value.is_finite() {
        (value * scale).round().clamp(-EXACT_UNITS, EXACT_UNITS) / scale
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::frame::PixelFormat;

    fn at(secs: u64, millis: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, millis * 1_000_000 + 999_999)
    }

    fn sample() -> Vec<u8> {
        let labels = Labels::parse("0 person\n1 bicycle\n", Path::new("labels")).expect("labels");
        let meta = FrameMeta {
            width: 1920,
            height: 1080,
            format: PixelFormat::Rgb8,
            sequence: 1234,
            captured_at: at(1_795_341_600, 123),
        };
        let latency = Latency {
            wait: Some(Duration::from_micros(1_250)),
            preprocess: Duration::from_micros(412),
            infer: Duration::from_micros(7_894),
            postprocess: Duration::from_micros(306),
            total: Duration::from_micros(10_361),
        };
        let detections = [
            Detection { class_id: 0, score: 0.91234, bbox: BoundingBox { x1: 10.04, y1: 20.0, x2: 200.06, y2: 400.0 } },
            Detection { class_id: 7, score: 0.5, bbox: BoundingBox { x1: 0.0, y1: 1.25, x2: 3.0, y2: 4.0 } },
        ];
        detections_message("front", &meta, &latency, &detections, &labels)
    }

    #[test]
    fn message_has_the_documented_layout() {
        let expected = concat!(
            r#"{"schema":1,"camera":"front","frame":1234,"ts":"2026-11-22T10:00:00.123Z","width":1920,"#,
            r#""height":1080,"latency_ms":{"wait":1.25,"pre":0.41,"infer":7.89,"post":0.31,"total":10.36},"#,
            r#""detections":["#,
            r#"{"label":"person","class_id":0,"score":0.912,"box":{"x1":10.0,"y1":20.0,"x2":200.1,"y2":400.0}},"#,
            r#"{"label":"class7","class_id":7,"score":0.5,"box":{"x1":0.0,"y1":1.3,"x2":3.0,"y2":4.0}}]}"#
        );
        assert_eq!(String::from_utf8(sample()).expect("utf-8"), expected);
    }

    #[test]
    fn the_daemons_messages_carry_the_run_and_the_sequence_number() {
        let labels = Labels::parse("0 person\n", Path::new("labels")).expect("labels");
        let meta = FrameMeta { width: 2, height: 2, format: PixelFormat::Rgb8, sequence: 0, captured_at: UNIX_EPOCH };
        let stamp = Stamp { run: "0123456789abcdef", seq: 41 };
        let bytes = tracked_detections_message("c", &meta, &Latency::default(), &[], &[], None, &labels, Some(stamp));
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        assert!(
            text.starts_with(r#"{"schema":1,"run":"0123456789abcdef","seq":41,"kind":"detections","camera":"c","#),
            "{text}"
        );
        let parsed: DetectionsMessage = serde_json::from_slice(&bytes).expect("parse");
        assert_eq!(parsed.envelope, Envelope::new(SCHEMA_VERSION, Some(stamp), KIND_DETECTIONS).into_owned());
        assert_eq!(serde_json::to_vec(&parsed).expect("serialise"), bytes);
    }

    #[test]
    fn encoder_and_schema_structs_agree() {
        let bytes = sample();
        let parsed: DetectionsMessage = serde_json::from_slice(&bytes).expect("parse");
        assert_eq!(parsed.detections[0].bbox.x2, 200.1);
        assert_eq!(serde_json::to_vec(&parsed).expect("serialise"), bytes);
    }

    #[test]
    fn track_ids_are_added_to_tracked_detections_only() {
        let labels = Labels::parse("0 person\n", Path::new("labels")).expect("labels");
        let meta = FrameMeta { width: 2, height: 2, format: PixelFormat::Rgb8, sequence: 0, captured_at: UNIX_EPOCH };
        let box_ = BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 };
        let detections =
            [Detection { class_id: 0, score: 0.9, bbox: box_ }, Detection { class_id: 0, score: 0.8, bbox: box_ }];
        let bytes = tracked_detections_message(
            "c",
            &meta,
            &Latency::default(),
            &detections,
            &[None, Some(7)],
            None,
            &labels,
            None,
        );
        let text = String::from_utf8(bytes.clone()).expect("utf-8");
        assert!(text.ends_with(r#""y2":1.0}},{"label":"person","class_id":0,"score":0.8,"box":{"x1":0.0,"y1":0.0,"x2":1.0,"y2":1.0},"track_id":7}]}"#), "{text}");
        let parsed: DetectionsMessage = serde_json::from_slice(&bytes).expect("parse");
        assert_eq!(parsed.detections.iter().map(|d| d.track_id).collect::<Vec<_>>(), [None, Some(7)]);
        assert_eq!(serde_json::to_vec(&parsed).expect("serialise"), bytes);
    }

    #[test]
    fn empty_detections_and_non_finite_values() {
        let labels = Labels::parse("a\n", Path::new("l")).expect("labels");
        let meta = FrameMeta { width: 2, height: 2, format: PixelFormat::Rgb8, sequence: 0, captured_at: UNIX_EPOCH };
        let nan =
            [Detection { class_id: 0, score: f32::NAN, bbox: BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 } }];
        let message: DetectionsMessage =
            serde_json::from_slice(&detections_message("c", &meta, &Latency::default(), &nan, &labels)).expect("json");
        assert_eq!(message.detections[0].score, 0.0);
        assert_eq!(message.ts, "1970-01-01T00:00:00.000Z");
        let empty = detections_message("c", &meta, &Latency::default(), &[], &labels);
        assert!(String::from_utf8(empty).expect("utf-8").ends_with(r#""detections":[]}"#));
    }

    /// Found by `properties::detections_messages_are_json_that_round_trips`: f32::MAX printed as
    /// 3.4028234663852886e38 reads back through serde_json as a neighbouring f64.
    #[test]
    fn extreme_values_read_back_exactly() {
        let labels = Labels::parse("a\n", Path::new("l")).expect("labels");
        let meta = FrameMeta { width: 0, height: 0, format: PixelFormat::Rgb8, sequence: 0, captured_at: UNIX_EPOCH };
        let extreme = [Detection {
            class_id: 0,
            score: f32::MAX,
            bbox: BoundingBox { x1: f32::MIN, y1: f32::NAN, x2: f32::MAX, y2: f32::MAX },
        }];
        let latency = Latency { total: Duration::MAX, ..Latency::default() };
        let bytes = detections_message("c", &meta, &latency, &extreme, &labels);
        let message: DetectionsMessage = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(serde_json::to_vec(&message).expect("serialise"), bytes);
        assert_eq!(message.detections[0].bbox.x2, EXACT_UNITS / 10.0);
        assert_eq!(message.detections[0].bbox.x1, -EXACT_UNITS / 10.0);
    }

    #[test]
    fn timestamps_across_leap_years_and_centuries() {
        for (secs, expected) in [
            (951_782_400, "2000-02-29T00:00:00.000Z"),
            (4_107_542_399, "2100-02-28T23:59:59.000Z"),
            (4_107_542_400, "2100-03-01T00:00:00.000Z"),
            (1_709_251_199, "2024-02-29T23:59:59.000Z"),
            (253_402_300_799, "9999-12-31T23:59:59.000Z"),
        ] {
            assert_eq!(Rfc3339Millis(at(secs, 0)).to_string(), expected, "{secs}");
        }
        assert_eq!(Rfc3339Millis(UNIX_EPOCH - Duration::from_secs(5)).to_string(), "1970-01-01T00:00:00.000Z");
    }
}

/// Property tests: any frame, latency, detections and track ids give valid JSON that parses as the
/// documented schema and serialises back to the same bytes.
#[cfg(test)]
mod properties {
    use std::path::Path;
    use std::time::{SystemTime, UNIX_EPOCH};

    use proptest::prelude::*;

    use super::*;
    use crate::detection::BoundingBox;
    use crate::frame::PixelFormat;

    /// Cases per run on the host; see `proptest_support`.
    const CASES: u32 = 512;

    fn float() -> impl Strategy<Value = f32> {
        prop_oneof![
            prop::sample::select(vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, -0.0, 0.05]),
            any::<f32>(),
            -10.0f32..5000.0,
        ]
    }

    fn detection() -> impl Strategy<Value = Detection> {
        (prop_oneof![0usize..5, any::<usize>()], float(), float(), float(), float(), float()).prop_map(
            |(class_id, score, x1, y1, x2, y2)| Detection { class_id, score, bbox: BoundingBox { x1, y1, x2, y2 } },
        )
    }

    fn duration() -> impl Strategy<Value = Duration> {
        prop_oneof![
            (0u64..10, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            Just(Duration::MAX),
            any::<u64>().prop_map(Duration::from_nanos),
        ]
    }

    /// Capture times up to the year 33658 and a little before the epoch.
    fn capture_time() -> impl Strategy<Value = SystemTime> {
        prop_oneof![
            (0u64..1_000_000_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| UNIX_EPOCH + Duration::new(s, n)),
            (1u64..1_000_000).prop_map(|s| UNIX_EPOCH - Duration::from_secs(s)),
        ]
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn detections_messages_are_json_that_round_trips(
            camera in any::<String>(),
            label in "[^\n\r]{1,12}",
            sequence in any::<u64>(),
            (width, height) in (any::<u32>(), any::<u32>()),
            captured_at in capture_time(),
            (wait, preprocess, infer, postprocess, total) in
                (prop::option::of(duration()), duration(), duration(), duration(), duration()),
            detections in prop::collection::vec(detection(), 0..8),
            track_ids in prop::collection::vec(prop::option::of(any::<u64>()), 0..10),
        ) {
            let labels = Labels::parse(&format!("0 {label}\n"), Path::new("labels")).expect("one label");
            let meta = FrameMeta { width, height, format: PixelFormat::Rgb8, sequence, captured_at };
            let latency = Latency { wait, preprocess, infer, postprocess, total };
            let bytes = tracked_detections_message(&camera, &meta, &latency, &detections, &track_ids, None, &labels, None);
            let parsed: DetectionsMessage = serde_json::from_slice(&bytes)
                .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&bytes))))?;
            prop_assert_eq!(serde_json::to_vec(&parsed).expect("serialise"), bytes);
            prop_assert_eq!(&parsed.camera, &camera);
            prop_assert_eq!((parsed.frame, parsed.width, parsed.height), (sequence, width, height));
            prop_assert_eq!(parsed.detections.len(), detections.len());
            for (index, (record, detection)) in parsed.detections.iter().zip(&detections).enumerate() {
                prop_assert_eq!(record.class_id, detection.class_id);
                prop_assert_eq!(record.track_id, track_ids.get(index).copied().flatten());
                prop_assert_eq!(&record.label, &labels.name(detection.class_id));
                let b = record.bbox;
                prop_assert!([record.score, b.x1, b.y1, b.x2, b.y2].iter().all(|v| v.is_finite()));
            }
            let ts = &parsed.ts;
            prop_assert!(ts.ends_with('Z') && ts.len() >= 24, "{}", ts);
        }
    }
}
