//! A tracked object's event as the outlets receive it: typed ([`ObjectEvent`]), with the run's
//! stamp, the zones and line it concerns, its best picture and its clip.
//!
//! Owns: [`ObjectEvent`] and what it carries ([`EventStamp`], [`LineCrossing`], [`ClipRef`]), and
//! building it from a camera's tracking state. Must not: decide when an event happens (tracking
//! does), or serialise it (its one JSON form is `super::event_message`'s).

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::detection::BoundingBox;
use crate::infer::per_track::Attributes;
use crate::reid::Identity;
use crate::track::events::{Changes, EventKind, TrackEvent};
use crate::track::lines::Direction;
use crate::track::scene_tracker::{system_time, SceneTracker};
use crate::track::tracker::TrackId;

/// Where an event stands in the daemon's run: `run` (the run id) and `seq`, this camera's events
/// so far in the run, from 0 (`crate::service::run_id::Stamp`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventStamp {
    pub run: Arc<str>,
    pub seq: u64,
}

/// A line crossing, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineCrossing {
    pub line: String,
    pub direction: Direction,
}

/// Where an event's clip is (`[record]`): its path relative to the record directory, and the URL
/// of the daemon's HTTP server that serves it. The clip is named when the event first needs it and
/// complete `record.post_s` after the event (and any event that joined it) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClipRef {
    pub path: String,
    pub url: String,
}

/// One event of a tracked object, as tracking reports it to the outlets.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectEvent {
    pub kind: EventKind,
    pub track_id: TrackId,
    /// The track's label: the class with the highest score-weighted vote so far.
    pub class_id: usize,
    /// Best detection score of the track so far.
    pub best_score: f32,
    /// The latest box the track was seen at, source-frame pixels.
    pub bbox: BoundingBox,
    /// Capture times of the first and the latest frame the track was seen on.
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    /// Zones the object is in (by its box's bottom-centre), in config order.
    pub zones: Vec<String>,
    /// `update` only, when the update is a line crossing.
    pub crossed: Option<LineCrossing>,
    /// `update` only: what changed.
    pub changes: Changes,
    pub stationary: bool,
    /// Frames the track was seen on.
    pub frames: u32,
    /// The sequence number of the frame whose processing produced the event; `None` for the
    /// events of a camera that stopped and of shutdown.
    pub frame: Option<u64>,
    /// Absent when the daemon runs without a run id (tests, tools).
    pub stamp: Option<EventStamp>,
    /// `end` only, with `snapshot.events`: the track's best picture (JPEG, boxes drawn).
    pub picture: Option<Arc<Vec<u8>>>,
    /// The clip that shows the event, once it has one (the recorder names it before the outlets
    /// see the event: `super::clips::ClipNaming`).
    pub clip: Option<ClipRef>,
    /// The latest answer of each classifier on the track (empty without classifiers).
    pub attributes: Attributes,
    /// With `[reid]`: the track's object id and the earlier track it continues, once linked.
    pub identity: Option<Identity>,
}

impl ObjectEvent {
    /// The event `event` of `tracking`'s last update (`frame`: the frame that update was for);
    /// `None` if its track is unknown or unconfirmed. Not stamped, no picture, no clip.
    pub fn describe(event: &TrackEvent, tracking: &SceneTracker, frame: Option<u64>) -> Option<ObjectEvent> {
        let track = tracking.tracker().track(event.slot)?;
        let scene = tracking.scene();
        let zone_bits = tracking.watcher().zones(event.slot);
        Some(ObjectEvent {
            kind: event.kind,
            track_id: track.id()?,
            class_id: track.class_id(),
            best_score: track.best_score(),
            bbox: *track.bbox(),
            first_seen: system_time(track.first_seen()),
            last_seen: system_time(track.last_seen()),
            zones: scene
                .zones
                .iter()
                .enumerate()
                .filter(|(i, _)| zone_bits & (1 << i) != 0)
                .map(|(_, zone)| zone.name.clone())
                .collect(),
            crossed: event.crossed.and_then(|(line, direction)| {
                Some(LineCrossing { line: scene.lines.get(line)?.name.clone(), direction })
            }),
            changes: event.changes,
            stationary: tracking.watcher().is_stationary(event.slot),
            frames: track.hits(),
            frame,
            stamp: None,
            picture: None,
            clip: None,
            attributes: Attributes::new(),
            identity: None,
        })
    }
}

#[cfg(test)]
impl ObjectEvent {
    /// A `start` of a `person` (class 0) track, for tests: seen on 3 frames, no zones, no clip.
    pub fn example(track_id: TrackId) -> ObjectEvent {
        ObjectEvent {
            kind: EventKind::Start,
            track_id,
            class_id: 0,
            best_score: 0.9,
            bbox: BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 },
            first_seen: SystemTime::UNIX_EPOCH,
            last_seen: SystemTime::UNIX_EPOCH,
            zones: Vec::new(),
            crossed: None,
            changes: Changes::default(),
            stationary: false,
            frames: 3,
            frame: Some(track_id),
            stamp: None,
            picture: None,
            clip: None,
            attributes: Attributes::new(),
            identity: None,
        }
    }
}
