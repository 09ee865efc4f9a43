//! Outlets: everything that leaves the pipeline goes through one small trait, and a dispatcher
//! fans it out (in the spirit of Frigate's `Communicator` and `Dispatcher`).
//!
//! Owns: the [`Outlet`] trait, the typed values outlets receive ([`FrameResult`],
//! [`TrackingUpdate`], [`DaemonStatus`], the telemetry report), the neutral [`ConnectionStats`]
//! an outlet with a connection reports, and [`Outlets`], the dispatcher. Must not: know topics,
//! JSON or any outlet's settings: the MQTT outlet alone turns values into topics and bytes
//! (`super::mqtt::outlet`), the live view keeps what the HTTP stage reads (`super::live`).
//!
//! # What an outlet may do, and where
//!
//! [`Outlet::frame`] and [`Outlet::tracking`] run on the inference worker that processed the
//! frame, one outlet after the other, while every camera's next frame waits ([`Outlet::picture`],
//! a frame of a camera whose detection is off, runs on that camera's source thread instead). An outlet may do
//! there what is bounded and never waits: look at the values, update its own counters, encode a
//! small message (a detections message is a few hundred bytes), copy what a reader asked for, and
//! hand the result to its own task through a bounded queue that drops (and counts) instead of
//! blocking when full — as the MQTT outlet hands every message to its connection task's outbox
//! (`super::mqtt`). Anything that waits (network, disk, a lock a reader may hold across I/O)
//! belongs to the outlet's own task, which it owns like rumqttc's event loop: a handle apart
//! from the task that owns the connection. The other methods run on the daemon's async threads or
//! at start; they must not block either (no CUDA, no file I/O beyond a bounded read).
//!
//! # Adding an outlet
//!
//! Implement [`Outlet`] (every method has a no-op default: take what you need), build it in
//! `crate::cmd::run` and add it to the [`Outlets`] there. Nothing else changes: no outlet knows
//! another (the recording outlet of `tests/it/golden.rs` shows it). The values are shared, never
//! edited by an outlet: what one outlet derives (a clip of an event, a webhook's answer) is its
//! own output. The one exception is the clip of an event (`crate::record`): the recorder names
//! it at once, from the event alone ([`Outlet::clip_of`], asked before any outlet receives the
//! event), so the event itself carries it ([`ObjectEvent::clip`]) and every outlet sees the same
//! value — the MQTT outlet's `end` names the clip even though the clip is complete only a
//! post-roll later. Home Assistant's birth message and the command topics (issue 34) are the MQTT
//! outlet's business alone: its publisher keeps the current state and sends it again, and it
//! subscribes through its own connection; a command sets the shared
//! `crate::controls::Controls`, and every outlet hears the applied result ([`Outlet::controls`]).

use std::sync::Arc;

use serde::Serialize;

use super::events::{ClipRef, ObjectEvent};
use super::payload::TrackAttributes;
use crate::config::Config;
use crate::controls::ControlValues;
use crate::detection::Detection;
use crate::frame::{FrameSlot, FrameTimings};
use crate::service::telemetry::TelemetryReport;
use crate::track::occupancy::OccupancyChange;
use crate::track::tracker::TrackId;

/// What tracking made of a frame, or of a moment without one (a camera that ended, shutdown, a
/// reload, the start): events in the order they happened, then the zone counts that changed.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackingUpdate<'a> {
    pub events: &'a [ObjectEvent],
    /// `count: None` clears a zone that a reload removed.
    pub occupancy: &'a [OccupancyChange],
}

impl TrackingUpdate<'_> {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.occupancy.is_empty()
    }
}

/// One processed frame with everything the pipeline made of it.
#[derive(Clone, Copy)]
pub struct FrameResult<'a> {
    /// The camera's configured name.
    pub camera: &'a str,
    /// The frame, still in its slot: copy what you keep.
    pub slot: &'a FrameSlot,
    pub detections: &'a [Detection],
    /// Per detection, its confirmed track's id (empty while tracking is off).
    pub track_ids: &'a [Option<TrackId>],
    /// What classifiers said of the camera's live tracks (`None` while tracking is off).
    pub attributes: Option<&'a TrackAttributes>,
    /// Stage timings up to the hand-over to the outlets.
    pub timings: &'a FrameTimings,
    pub tracking: TrackingUpdate<'a>,
    /// The camera's periodic snapshot (JPEG, boxes drawn), when `[snapshot]` made one of this frame.
    pub snapshot: Option<&'a [u8]>,
}

/// What the daemon is doing, for outlets that announce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonStatus {
    /// Connected, building the engine (minutes on a Jetson): not detecting yet.
    Building,
    /// Detecting.
    Online,
}

/// How an outlet's connection is doing (the MQTT outlet's, today): telemetry's `mqtt` section,
/// the page and `/metrics` read it without knowing whose it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ConnectionStats {
    /// A connection is up (for MQTT: a CONNACK was received and the connection has not failed since).
    pub connected: bool,
    /// Messages accepted and not yet acknowledged (QoS ≥ 1) or written (QoS 0), status messages included.
    pub queued: usize,
    /// Bytes (payload and topic) of the queued data messages, what `mqtt.queue_max_mib` bounds.
    pub queued_bytes: usize,
    /// Messages dropped: by the queue bounds (per-frame messages first, then the oldest), for being
    /// too large or having an invalid topic, or for arriving after `shutdown()`.
    pub dropped: u64,
    /// Messages acknowledged by the broker (QoS ≥ 1) or written to it (QoS 0), status messages included.
    pub published: u64,
    /// Successful connections after the first.
    pub reconnects: u64,
    /// Connections the broker closed right after accepting them, while that looked like another
    /// client taking the session over (same client id).
    pub takeovers: u64,
}

/// Receives what leaves the pipeline. Every method has a no-op default; see the module doc for
/// what may run where.
pub trait Outlet: Send + Sync {
    /// Once, before the first frame: what subscribers need first (discovery, counts at 0).
    fn starting(&self, _config: &Config) {}

    /// Every processed frame, on the inference worker.
    fn frame(&self, _frame: &FrameResult<'_>) {}

    /// A frame of a camera whose detection is off, on the camera's source thread: its picture
    /// alone (no detections, no tracking), and the camera's periodic snapshot when one was made
    /// of it. Bounded and never waiting, as [`Outlet::frame`].
    fn picture(&self, _camera: &str, _slot: &FrameSlot, _snapshot: Option<&[u8]>) {}

    /// `camera`'s detection was switched off and its tracks have ended: what counts its
    /// detections goes to 0. Called with the camera's frames held off, so no frame of it is
    /// processed meanwhile (a frame already on its way is dropped, never published after this).
    fn detection_stopped(&self, _camera: &str) {}

    /// Tracking outside a frame (start-up counts, a camera that ended, shutdown, a reload).
    fn tracking(&self, _camera: &str, _update: &TrackingUpdate<'_>) {}

    /// A reload (SIGHUP) or a zone change from the page was applied: `config` is what runs now.
    fn reconfigured(&self, _config: &Config) {}

    /// A control changed (a switch, the score threshold; from MQTT or the HTTP API) and was
    /// applied: what they all are now.
    fn controls(&self, _values: &ControlValues) {}

    /// The daemon's status changed (it goes `offline` when the outlet shuts down).
    fn status(&self, _status: DaemonStatus) {}

    /// The periodic telemetry report (and, during an engine build, its progress).
    fn telemetry(&self, _report: &TelemetryReport<'_>) {}

    /// The outlet's connection figures, if it has a connection.
    fn connection(&self) -> Option<ConnectionStats> {
        None
    }

    /// The figures of an outlet that records (`crate::record`): telemetry's `record` section.
    fn recording(&self) -> Option<serde_json::Value> {
        None
    }

    /// The clip `event` of `camera` belongs to, for an outlet that records (`crate::record`).
    /// Asked for every event before any outlet receives it, on the inference worker: it answers
    /// at once, from the event alone (no I/O, no waiting), and the answer travels in the event.
    fn clip_of(&self, _camera: &str, _event: &ObjectEvent) -> Option<ClipRef> {
        None
    }
}

/// The dispatcher: hands everything to every outlet, in the order they were added.
#[derive(Clone, Default)]
pub struct Outlets(Arc<[Arc<dyn Outlet>]>);

impl std::fmt::Debug for Outlets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Outlets({})", self.0.len())
    }
}

impl Outlets {
    pub fn new(outlets: Vec<Arc<dyn Outlet>>) -> Outlets {
        Outlets(outlets.into())
    }
}

impl Outlet for Outlets {
    fn starting(&self, config: &Config) {
        self.0.iter().for_each(|outlet| outlet.starting(config));
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        self.0.iter().for_each(|outlet| outlet.frame(frame));
    }

    fn picture(&self, camera: &str, slot: &FrameSlot, snapshot: Option<&[u8]>) {
        self.0.iter().for_each(|outlet| outlet.picture(camera, slot, snapshot));
    }

    fn detection_stopped(&self, camera: &str) {
        self.0.iter().for_each(|outlet| outlet.detection_stopped(camera));
    }

    fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        if !update.is_empty() {
            self.0.iter().for_each(|outlet| outlet.tracking(camera, update));
        }
    }

    fn reconfigured(&self, config: &Config) {
        self.0.iter().for_each(|outlet| outlet.reconfigured(config));
    }

    fn controls(&self, values: &ControlValues) {
        self.0.iter().for_each(|outlet| outlet.controls(values));
    }

    fn status(&self, status: DaemonStatus) {
        self.0.iter().for_each(|outlet| outlet.status(status));
    }

    fn telemetry(&self, report: &TelemetryReport<'_>) {
        self.0.iter().for_each(|outlet| outlet.telemetry(report));
    }

    /// The first outlet's that has a connection.
    fn connection(&self) -> Option<ConnectionStats> {
        self.0.iter().find_map(|outlet| outlet.connection())
    }

    /// The first recording outlet's figures (one recorder per daemon).
    fn recording(&self) -> Option<serde_json::Value> {
        self.0.iter().find_map(|outlet| outlet.recording())
    }

    /// The first outlet's answer (one recorder per daemon).
    fn clip_of(&self, camera: &str, event: &ObjectEvent) -> Option<ClipRef> {
        self.0.iter().find_map(|outlet| outlet.clip_of(camera, event))
    }
}
