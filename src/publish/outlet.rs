//! Outlets: everything that leaves the pipeline goes through one small trait (in the spirit of
//! Frigate's `Communicator`), and the dispatcher (`super::dispatch`) fans it out.
//!
//! Owns: the [`Outlet`] trait — what an outlet receives, its name, its figures and its bounded
//! [`Outlet::stop`] — and the typed values outlets receive ([`FrameResult`], [`TrackingUpdate`],
//! [`DaemonStatus`], the telemetry report). Must not: know topics, JSON or any outlet's settings:
//! each outlet turns values into its own bytes (MQTT topics and messages: `super::mqtt::outlet`;
//! signed POSTs: `super::webhook`), the live view keeps what the HTTP stage reads (`super::live`).
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
//! # Its life
//!
//! An outlet is started by whoever builds it (before the first frame: the MQTT outlet even before
//! the engine is built, so that subscribers see `building`), told [`Outlet::starting`] once, then
//! receives values until the daemon calls [`Outlet::stop`] — for every outlet alike, all at once,
//! at shutdown and after a start that failed. `stop` is bounded by the outlet's own setting (MQTT:
//! `mqtt.shutdown_flush_ms`) and flushes what it promised within that bound; whatever the outlet
//! still holds after it is dropped and counted. Each period the daemon reads every outlet's
//! [`Outlet::figures`] under its [`Outlet::name`]: telemetry's `outlets.<name>`, `/metrics` with an
//! `outlet` label, `GET /api/status` and, for an outlet with a connection, the `STATUS=` line.
//!
//! # Adding an outlet
//!
//! Give it a folder of its own beside the others (`super::webhook` shows the whole of one): its
//! config section (`crate::config::Section`: types, commented defaults, checks, secrets),
//! its [`Outlet`] (every method but [`Outlet::name`] has a no-op default: take what you need) and
//! its registration (`super::kind::OutletKind`: its sections, its checks before the start, its
//! start); then declare the folder and add the kind to `crate::cmd::outlets`, one line each. No
//! outlet knows another (the recording outlet of `tests/it/golden.rs` shows it). The values are shared, never edited by
//! an outlet: what one outlet derives (a webhook's answer) is its own output. The clip of an event
//! is named before any outlet sees the event, by a stage of the sink (`super::clips`), so every
//! outlet sees the same [`ObjectEvent::clip`](super::object_event::ObjectEvent::clip) — the MQTT outlet's
//! `end` names the clip even though the clip is complete only a post-roll later. Home Assistant's
//! birth message and the command topics are the MQTT outlet's business alone: its publisher keeps
//! the current state and sends it again, and it subscribes through its own connection; a command
//! sets the shared `crate::controls::Controls`, and every outlet hears the applied result
//! ([`Outlet::controls`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::figures::OutletFigures;
use super::object_event::ObjectEvent;
use crate::config::Config;
use crate::controls::ControlValues;
use crate::detection::Detection;
use crate::frame::{FrameSlot, FrameTimings};
use crate::infer::per_track::TrackAttributes;
use crate::service::telemetry::TelemetryReport;
use crate::track::detection_zones::DetectionZones;
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
    /// Per detection, the zones its confirmed track is in (none while tracking is off).
    pub zones: DetectionZones<'a>,
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

/// Why an outlet is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The daemon shuts down: say so (MQTT: `offline`) and flush what is queued, within the
    /// outlet's bound.
    Shutdown,
    /// The start failed before the daemon detected anything: end without waiting for a
    /// connection that never came (the error is not held back); what a connection made meanwhile
    /// would carry is what [`Stop::Shutdown`] sends.
    FailedStart,
}

/// An outlet's [`Outlet::stop`] under way: a future that ends within the outlet's bound.
pub type Stopping = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Receives what leaves the pipeline. Every method but [`Outlet::name`] has a no-op default; see
/// the module doc for what may run where.
pub trait Outlet: Send + Sync {
    /// The outlet's name, unique among the daemon's outlets: its figures' key (`outlets.<name>` in
    /// telemetry, the `outlet` label in `/metrics`) and how the log names it.
    fn name(&self) -> &str;

    /// Once, before the first frame: what subscribers need first (discovery, counts at 0).
    fn starting(&self, _config: &Config) {}

    /// Every processed frame, on the inference worker.
    fn frame(&self, _frame: &FrameResult<'_>) {}

    /// A frame of a camera whose detection is off, on the camera's source thread: its picture
    /// alone (no detections, no tracking), and the camera's periodic snapshot when one was made
    /// of it. Bounded and never waiting, as [`Outlet::frame`].
    fn picture(&self, _camera: &str, _slot: &FrameSlot, _snapshot: Option<&[u8]>) {}

    /// `camera`'s motion sensor changed (`[motion]` enabled): `moving` while it sees motion, not
    /// once it has seen none for `crate::infer::gating::camera_gate::MOTION_OFF_S`. On the camera's
    /// source thread: must not block.
    fn motion(&self, _camera: &str, _moving: bool) {}

    /// `camera`'s detection was switched off and its tracks have ended: what counts its
    /// detections goes to 0. Called with the camera's frames held off, so no frame of it is
    /// processed meanwhile (a frame already on its way is dropped, never published after this).
    fn detection_stopped(&self, _camera: &str) {}

    /// `camera`'s source lost its stream (it reconnects) and its tracks have ended (their `end`s
    /// came through [`Outlet::tracking`] just before): nothing it showed is in sight any more, and
    /// no frame comes until it is back (a frame captured before, still on its way, is dropped).
    /// What counts its detections goes to 0, and a clip being written ends with what it has.
    fn camera_offline(&self, _camera: &str) {}

    /// Tracking outside a frame (start-up counts, a camera that ended, shutdown, a reload).
    fn tracking(&self, _camera: &str, _update: &TrackingUpdate<'_>) {}

    /// A reload (SIGHUP) or a zone change from the page was applied: `config` is what runs now.
    fn reconfigured(&self, _config: &Config) {}

    /// A control changed (a switch, the score threshold; from MQTT or the HTTP API) and was
    /// applied: what they all are now.
    fn controls(&self, _values: &ControlValues) {}

    /// The daemon's status changed (an outlet that announces it says `offline` in its
    /// [`Outlet::stop`]).
    fn status(&self, _status: DaemonStatus) {}

    /// The periodic telemetry report (and, during an engine build, its progress).
    fn telemetry(&self, _report: &TelemetryReport<'_>) {}

    /// The outlet's figures as of now (its queue, what it delivered and dropped, its connection):
    /// read each period, on the daemon's async threads, so it only reads counters.
    fn figures(&self) -> Option<OutletFigures> {
        None
    }

    /// The daemon has begun to stop (a signal came): the cameras and the recorder stop before
    /// [`Outlet::stop`], and their last events still come. An outlet may quiet what it would
    /// report meanwhile (MQTT no longer logs its retries).
    fn stopping(&self) {}

    /// Ends the outlet: it takes nothing more, flushes what it promised within its own bound, and
    /// stops its task. Called once, for every outlet alike; the future must end within the bound
    /// (an outlet that blocks, such as one joining threads, does so off the async threads).
    fn stop(self: Arc<Self>, _why: Stop) -> Stopping {
        Box::pin(std::future::ready(()))
    }
}
