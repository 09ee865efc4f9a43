//! The event message: an [`ObjectEvent`]'s versioned JSON form, what `<prefix>/<camera>/events`,
//! a webhook's requests and `GET /api/events` carry alike.
//!
//! Owns: the event schema (field names, units, rounding, timestamps — the same conventions as the
//! detections message) and its one serialiser, which every outlet and the HTTP API share. Must
//! not: decide when an event happens, or know topics, MQTT or HTTP.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::object_event::{ClipRef, ObjectEvent};
use super::payload::{round_to, rounded_score, AttributeRecord, BoxPixels, SCHEMA_VERSION};
use crate::detection::Labels;
use crate::service::envelope::Envelope;
use crate::service::run_id::{Stamp, KIND_EVENT};
use crate::sys::time::Rfc3339Millis;
use crate::track::events::EventKind;
use crate::track::scene_tracker::system_time;

/// One event, as consumers parse it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventMessage {
    /// [`SCHEMA_VERSION`]; the daemon's run, this camera's event messages in it from 0
    /// (`crate::service::run_id::Stamp`) and `event` (`crate::service::run_id::KIND_EVENT`), what
    /// `seq` counts.
    #[serde(flatten)]
    pub envelope: Envelope<'static>,
    /// `start`, `update` or `end`.
    #[serde(rename = "type")]
    pub kind: String,
    pub camera: String,
    pub track_id: u64,
    /// The track's label: the class with the highest score-weighted vote so far.
    pub label: String,
    pub class_id: usize,
    /// Best detection score of the track so far, 3 decimals.
    pub score: f64,
    /// The latest box the track was seen at, source-frame pixels, 0.1 px.
    #[serde(rename = "box")]
    pub bbox: BoxPixels,
    /// Capture times of the first and the latest frame the track was seen on (RFC 3339, ms, UTC).
    pub first_ts: String,
    pub last_ts: String,
    /// Zones the object is in (by its box's bottom-centre), in config order.
    pub zones: Vec<String>,
    /// `update` only, when the update is a line crossing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crossed: Option<Crossing>,
    /// `update` only: what changed (`zones`, `crossed`, `score`, `stationary`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    pub stationary: bool,
    /// Frames the track was seen on.
    pub frames: u32,
    /// The event's clip, with `[record]`, once it has one: every later message of the track names
    /// it, its `end` included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<ClipRef>,
    /// The latest answer of each classifier on the track, by classifier name; absent when none
    /// has answered (or none is configured).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, AttributeRecord>,
    /// With `[reid]`: the object this track is, shared by the tracks linked to each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_id: Option<u64>,
    /// With `[reid]`, once linked: the earlier track of the same object this one continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_as: Option<SameAs>,
}

/// The earlier track a track continues (re-identification).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SameAs {
    pub camera: String,
    pub track_id: u64,
    /// Of the two tracks' appearances when they were linked, cosine, 3 decimals.
    pub similarity: f64,
    /// When the earlier track was last seen (RFC 3339, ms, UTC).
    pub seen_at: String,
}

/// A line crossing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    pub line: String,
    /// `in` or `out` (see docs/src/zones-and-lines/index.md for the line orientation convention).
    pub direction: String,
}

impl EventMessage {
    /// The message of `event` of `camera`, its label named by `labels`.
    pub fn new(camera: &str, event: &ObjectEvent, labels: &Labels) -> EventMessage {
        EventMessage {
            envelope: Envelope::new(
                SCHEMA_VERSION,
                event.stamp.as_ref().map(|stamp| Stamp { run: &stamp.run, seq: stamp.seq }),
                KIND_EVENT,
            )
            .into_owned(),
            kind: event.kind.name().into(),
            camera: camera.into(),
            track_id: event.track_id,
            label: labels.name(event.class_id).into_owned(),
            class_id: event.class_id,
            score: rounded_score(event.best_score),
            bbox: BoxPixels::from(&event.bbox),
            first_ts: Rfc3339Millis(event.first_seen).to_string(),
            last_ts: Rfc3339Millis(event.last_seen).to_string(),
            zones: event.zones.clone(),
            crossed: event
                .crossed
                .as_ref()
                .map(|crossing| Crossing { line: crossing.line.clone(), direction: crossing.direction.name().into() }),
            changed: if event.kind == EventKind::Update {
                event.changes.names().map(str::to_string).collect()
            } else {
                Vec::new()
            },
            stationary: event.stationary,
            frames: event.frames,
            clip: event.clip.clone(),
            attributes: event.attributes.iter().map(|(name, attribute)| (name.clone(), attribute.into())).collect(),
            object_id: event.identity.as_ref().map(|identity| identity.object_id),
            same_as: event.identity.as_ref().and_then(|identity| identity.same_as.as_ref()).map(|link| SameAs {
                camera: link.camera.to_string(),
                track_id: link.track,
                similarity: round_to(f64::from(link.similarity), 1000.0),
                seen_at: Rfc3339Millis(system_time(link.seen_at)).to_string(),
            }),
        }
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Plain strings and numbers (non-finite ones already rounded to 0) always serialise.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::detection::{BoundingBox, Detection};
    use crate::track::events::{Line, Scene, WatchParams, Zone};
    use crate::track::lines::Segment;
    use crate::track::scene_tracker::{SceneTracker, TrackingParams};
    use crate::track::tracker::TrackerParams;
    use crate::track::zones::Polygon;

    #[test]
    fn events_have_the_documented_layout() {
        let labels = Labels::parse("person\nbicycle\n", Path::new("labels")).expect("labels");
        let scene = Scene {
            zones: vec![Zone {
                name: "left".into(),
                polygon: Polygon::new(&[[0.0, 0.0], [0.5, 0.0], [0.5, 1.0], [0.0, 1.0]]).expect("polygon"),
                classes: vec![],
            }],
            lines: vec![Line { name: "gate".into(), segment: Segment::new([[0.5, 1.0], [0.5, 0.0]]).expect("line") }],
        };
        let params = TrackingParams {
            tracker: TrackerParams { max_lost_s: 1.0, min_hits: 3, high_score: 0.5, match_iou: 0.2, max_tracks: 4 },
            watch: WatchParams { stationary_px: 5.0, stationary_s: 10.0 },
        };
        let mut tracking = SceneTracker::new(params, scene);
        let start = UNIX_EPOCH + Duration::from_millis(1_795_341_600_123);
        let mut messages = Vec::new();
        for (frame, x) in [100.0f32, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0].into_iter().enumerate() {
            let person = Detection {
                class_id: 0,
                score: 0.6 + 0.05 * frame as f32,
                bbox: BoundingBox { x1: x - 100.0, y1: 300.04, x2: x + 100.0, y2: 700.0 },
            };
            tracking.update(&[person], 1000, 1000, start + Duration::from_millis(200 * frame as u64));
            for event in tracking.events() {
                let event = ObjectEvent::describe(event, &tracking, Some(frame as u64)).expect("event");
                let message = EventMessage::new("front", &event, &labels);
                messages.push(String::from_utf8(message.to_json()).expect("utf-8"));
            }
        }
        let expected_start = concat!(
            r#"{"schema":1,"type":"start","camera":"front","track_id":1,"label":"person","class_id":0,"score":0.7,"#,
            r#""box":{"x1":200.0,"y1":300.0,"x2":400.0,"y2":700.0},"first_ts":"2026-11-22T10:00:00.123Z","#,
            r#""last_ts":"2026-11-22T10:00:00.523Z","zones":["left"],"stationary":false,"frames":3}"#
        );
        assert_eq!(messages[0], expected_start);
        let crossing: EventMessage = serde_json::from_str(
            messages.iter().find(|m| m.contains("crossed")).unwrap_or_else(|| panic!("a crossing in {messages:?}")),
        )
        .expect("parses");
        assert_eq!(crossing.kind, "update");
        assert_eq!(crossing.crossed, Some(Crossing { line: "gate".into(), direction: "in".into() }));
        assert!(crossing.changed.contains(&"crossed".to_string()), "{crossing:?}");
        assert_eq!(serde_json::to_vec(&crossing).expect("serialise"), crossing.to_json());
    }
}
