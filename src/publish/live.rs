//! The live view: an outlet that keeps what the HTTP stage shows, read by the page, the API and
//! `/metrics`.
//!
//! Owns: per camera the latest frame *on request* (a reader asks with [`LiveCamera::request_frame`];
//! the outlet copies the next frame's bytes, detections, track ids and classifier answers once, and nothing per frame
//! otherwise — rendering and JPEG encoding happen on the reader's side), a bounded ring of recent
//! events (typed: the HTTP API serialises them with the event schema,
//! [`EventMessage`](super::event_message::EventMessage)) and their [`EventFeed`] (each event
//! pushed to the open event streams as it is kept) and the best pictures of the latest ended
//! tracks ([`EventPictures`]), the running config (its zones and lines
//! included, as the last reload or zone change left it) and the latest figures (camera states,
//! every outlet's figures, scheduler, engine, system load, board sensors). Must not: make the pipeline
//! wait on a reader, or know topics and JSON. Every lock here is held only to swap or clone an
//! `Arc` (or push one event), never across a render, an encode or I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::dispatch::NamedFigures;
use super::event_feed::EventFeed;
use super::event_pictures::EventPictures;
use super::live_event::LiveEvent;
use super::object_event::ObjectEvent;
use super::outlet::{FrameResult, Outlet, TrackingUpdate};
use crate::backend::BackendInfo;
use crate::config::Config;
use crate::detection::{Detection, Labels};
use crate::frame::{FrameMeta, FrameSlot};
use crate::infer::engine_build::ModelBuildReport;
use crate::infer::per_track::TrackAttributes;
use crate::infer::scheduler::ScheduleReport;
use crate::service::notify::Liveness;
use crate::service::telemetry::{CameraStats, JetsonSysfs, SystemSample};
use crate::source::{SourceReport, SourceState};
use crate::sys::lock::lock;
use crate::track::tracker::TrackId;

/// Recent events kept for `GET /api/events` and the page.
pub const EVENT_RING: usize = 200;

/// One frame as a camera delivered it, with what the daemon found on it.
#[derive(Debug)]
pub struct CapturedFrame {
    pub data: Vec<u8>,
    pub meta: FrameMeta,
    pub detections: Vec<Detection>,
    /// Per detection, its confirmed track's id.
    pub track_ids: Vec<Option<TrackId>>,
    /// Per detection, what classifiers said of its track (`name=label`, space separated; empty
    /// without an answer).
    pub attributes: Vec<String>,
}

/// One camera's side of the live view.
#[derive(Debug)]
pub struct LiveCamera {
    pub name: String,
    pub stats: Arc<CameraStats>,
    wanted: AtomicBool,
    latest: Mutex<Option<Arc<CapturedFrame>>>,
    /// Bumped after every capture, so readers can wait for the frame they asked for.
    captures: watch::Sender<u64>,
}

impl LiveCamera {
    /// Asks the sink to keep the camera's next frame; returns a receiver that sees it arrive.
    pub fn request_frame(&self) -> watch::Receiver<u64> {
        let receiver = self.captures.subscribe();
        self.wanted.store(true, Ordering::Release);
        receiver
    }

    /// The latest kept frame, if any was asked for yet.
    pub fn latest(&self) -> Option<Arc<CapturedFrame>> {
        lock(&self.latest).clone()
    }

    /// Outlet side, every frame: one atomic load unless a reader asked for a frame.
    pub fn offer(
        &self,
        slot: &FrameSlot,
        detections: &[Detection],
        track_ids: &[Option<TrackId>],
        attributes: Option<&TrackAttributes>,
    ) {
        if !self.wanted.swap(false, Ordering::AcqRel) {
            return;
        }
        let answers = |index: usize| -> Option<String> {
            let track = track_ids.get(index).copied().flatten()?;
            let answers = attributes?.get(&track)?;
            let captions = answers.iter().filter_map(|(name, answer)| Some(format!("{name}={}", answer.caption()?)));
            Some(captions.collect::<Vec<_>>().join(" "))
        };
        let frame = Arc::new(CapturedFrame {
            data: slot.data().to_vec(),
            meta: slot.meta().clone(),
            detections: detections.to_vec(),
            track_ids: track_ids.to_vec(),
            attributes: (0..detections.len()).map(|index| answers(index).unwrap_or_default()).collect(),
        });
        *lock(&self.latest) = Some(frame);
        self.captures.send_modify(|count| *count += 1);
    }
}

/// Figures refreshed by the daemon's tick.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Per camera (config order): its source's state, and frames per second over the last tick.
    pub sources: Vec<Option<SourceReport>>,
    pub fps: Vec<f64>,
    /// Every outlet's figures, as telemetry's `outlets` section.
    pub outlets: Vec<NamedFigures>,
    pub scheduler: Option<ScheduleReport>,
    /// The engines built while the CPU serves (empty without), and `[model]`'s backend now.
    pub builds: Vec<ModelBuildReport>,
    pub backend: Option<BackendInfo>,
    pub system: Option<SystemSample>,
    pub jetson: JetsonSysfs,
    pub updated: Option<SystemTime>,
}

/// What the daemon knew at start and does not change while it runs.
#[derive(Debug, Clone)]
pub struct StartFacts {
    /// The backend's description and the GPU probe (as in telemetry's `engine`).
    pub engine: serde_json::Value,
    /// Time to load the model: an engine build included, when one ran.
    pub model_load: Duration,
    pub started: SystemTime,
}

/// The whole live view; one per daemon, shared as an `Arc`.
#[derive(Debug)]
pub struct LiveView {
    pub cameras: Vec<LiveCamera>,
    pub labels: Arc<Labels>,
    pub liveness: Arc<Liveness>,
    /// The longest silence the watchdog allows a pipeline.
    pub max_silence: Duration,
    pub facts: StartFacts,
    /// Every event kept, pushed to the open event streams (`GET /api/events/stream`).
    pub feed: EventFeed,
    /// The best pictures of the latest ended tracks (with `snapshot.events`).
    pub pictures: EventPictures,
    config: Mutex<Arc<Config>>,
    events: Mutex<VecDeque<LiveEvent>>,
    figures: Mutex<Arc<Figures>>,
}

impl LiveView {
    /// One [`LiveCamera`] (with its statistics) per configured camera, in config order.
    pub fn new(
        config: Arc<Config>,
        labels: Arc<Labels>,
        liveness: Arc<Liveness>,
        max_silence: Duration,
        facts: StartFacts,
    ) -> LiveView {
        let cameras = config
            .cameras
            .iter()
            .map(|camera| LiveCamera {
                name: camera.name.clone(),
                stats: Arc::new(CameraStats::new(&camera.name)),
                wanted: AtomicBool::new(false),
                latest: Mutex::new(None),
                captures: watch::channel(0).0,
            })
            .collect();
        LiveView {
            cameras,
            labels,
            liveness,
            max_silence,
            facts,
            feed: EventFeed::default(),
            pictures: EventPictures::default(),
            config: Mutex::new(config),
            events: Mutex::new(VecDeque::with_capacity(EVENT_RING)),
            figures: Mutex::new(Arc::default()),
        }
    }

    pub fn camera(&self, name: &str) -> Option<&LiveCamera> {
        self.cameras.iter().find(|camera| camera.name == name)
    }

    /// The running config (zones and lines as applied).
    pub fn config(&self) -> Arc<Config> {
        lock(&self.config).clone()
    }

    pub fn set_config(&self, config: Arc<Config>) {
        *lock(&self.config) = config;
    }

    pub fn figures(&self) -> Arc<Figures> {
        lock(&self.figures).clone()
    }

    pub fn set_figures(&self, figures: Figures) {
        *lock(&self.figures) = Arc::new(figures);
    }

    /// Outlet side: a camera's events, newest last; each is also offered to the feed.
    pub fn record_events(&self, camera: &str, events: &[ObjectEvent]) {
        if events.is_empty() {
            return;
        }
        let mut ring = lock(&self.events);
        for event in events {
            if let Some(picture) = &event.picture {
                self.pictures.keep(camera, event.track_id, picture.clone());
            }
            if ring.len() == EVENT_RING {
                ring.pop_front();
            }
            let event = LiveEvent {
                camera: camera.to_string(),
                event: Arc::new(ObjectEvent { picture: None, ..event.clone() }),
            };
            self.feed.offer(event.clone());
            ring.push_back(event);
        }
    }

    /// The newest `limit` events (of `camera` when given), oldest first.
    pub fn events(&self, camera: Option<&str>, limit: usize) -> Vec<LiveEvent> {
        let events = lock(&self.events);
        let mut newest: Vec<LiveEvent> = events
            .iter()
            .rev()
            .filter(|event| camera.is_none_or(|name| event.camera == name))
            .take(limit)
            .cloned()
            .collect();
        newest.reverse();
        newest
    }

    /// The daemon's health: `Err` names every stalled pipeline (the watchdog's verdict) and every
    /// camera that delivers no frames (connecting without a frame yet, or reconnecting), as of
    /// the latest figures.
    pub fn health(&self) -> Result<(), String> {
        let mut problems: Vec<String> = match self.liveness.all_alive(self.max_silence) {
            Ok(()) => Vec::new(),
            Err(stalls) => stalls
                .iter()
                .map(|stall| format!("{} silent for {:.1} s", stall.name, stall.silent_for.as_secs_f64()))
                .collect(),
        };
        let figures = self.figures();
        let now = SystemTime::now();
        for (camera, report) in self.cameras.iter().zip(&figures.sources) {
            let Some(report) = report.as_ref().filter(|report| report.state.is_offline()) else { continue };
            let offline_for = now.duration_since(report.since).unwrap_or_default().as_secs_f64();
            problems.push(match &report.state {
                SourceState::Reconnecting { attempt, last_error } => format!(
                    "camera {}: offline for {offline_for:.0} s, reconnecting (attempt {attempt}: {last_error})",
                    camera.name
                ),
                _ => format!("camera {}: no frame for {offline_for:.0} s, connecting", camera.name),
            });
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(problems.join("; ")),
        }
    }
}

impl Outlet for LiveView {
    fn name(&self) -> &str {
        "live"
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        if let Some(camera) = self.camera(frame.camera) {
            camera.offer(frame.slot, frame.detections, frame.track_ids, frame.attributes);
        }
        self.record_events(frame.camera, frame.tracking.events);
    }

    /// The picture goes on while detection is off: a reader that asked gets the frame, bare.
    fn picture(&self, camera: &str, slot: &FrameSlot, _snapshot: Option<&[u8]>) {
        if let Some(camera) = self.camera(camera) {
            camera.offer(slot, &[], &[], None);
        }
    }

    fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        self.record_events(camera, update.events);
    }

    fn reconfigured(&self, config: &Config) {
        self.set_config(Arc::new(config.clone()));
    }

    /// The event streams end, so that the HTTP server stops without waiting for them.
    fn stopping(&self) {
        self.feed.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CameraConfig;
    use crate::frame::HeapMemory;
    use crate::infer::per_track::Attribute;

    fn view(cameras: &[&str]) -> LiveView {
        let mut config = Config::embedded_default().expect("the embedded default is valid");
        let template = config.cameras[0].clone();
        config.cameras =
            cameras.iter().map(|name| CameraConfig { name: name.to_string(), ..template.clone() }).collect();
        let labels = Arc::new(Labels::parse("person\n", std::path::Path::new("labels.txt")).unwrap());
        let facts =
            StartFacts { engine: serde_json::Value::Null, model_load: Duration::ZERO, started: SystemTime::now() };
        LiveView::new(Arc::new(config), labels, Liveness::new(), Duration::from_secs(30), facts)
    }

    #[test]
    fn a_frame_is_copied_only_after_a_reader_asked_and_only_once() {
        let view = view(&["front"]);
        let camera = view.camera("front").unwrap();
        let slot = FrameSlot::new(Box::new(HeapMemory::with_capacity(12)));
        camera.offer(&slot, &[], &[], None);
        assert!(camera.latest().is_none(), "nobody asked");
        let arrived = camera.request_frame();
        camera.offer(&slot, &[], &[], None);
        assert!(arrived.has_changed().unwrap());
        let first = camera.latest().expect("kept");
        camera.offer(&slot, &[], &[], None);
        assert!(Arc::ptr_eq(&first, &camera.latest().unwrap()), "one request keeps one frame");
    }

    #[test]
    fn a_kept_frame_names_what_classifiers_said_of_each_detections_track() {
        let view = view(&["front"]);
        let camera = view.camera("front").unwrap();
        let slot = FrameSlot::new(Box::new(HeapMemory::with_capacity(12)));
        let detection = Detection {
            class_id: 0,
            score: 0.9,
            bbox: crate::detection::BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 },
        };
        let answer = |label: &str| Attribute::Label { label: label.into(), score: 0.8 };
        let answers = [("colour".to_string(), answer("red")), ("kind".to_string(), answer("van"))];
        let attributes: TrackAttributes = [(7, answers.into_iter().collect())].into_iter().collect();
        let _arrived = camera.request_frame();
        camera.offer(&slot, &[detection.clone(), detection], &[Some(7), None], Some(&attributes));
        assert_eq!(camera.latest().expect("kept").attributes, ["colour=red kind=van", ""]);
    }

    #[test]
    fn health_is_the_watchdogs_verdict_naming_each_stalled_pipeline() {
        let mut view = view(&["front"]);
        let _worker = view.liveness.register("inference worker 0");
        assert_eq!(view.health(), Ok(()));
        view.max_silence = Duration::ZERO;
        std::thread::sleep(Duration::from_millis(5));
        let reason = view.health().unwrap_err();
        assert!(reason.starts_with("inference worker 0 silent for"), "{reason}");
    }

    /// Issue 35: a camera without frames (an RTSP server silent after OPTIONS) left `/healthz` ok.
    #[test]
    fn health_names_each_camera_that_delivers_no_frames() {
        let view = view(&["front", "gate", "door"]);
        let report = |state| Some(SourceReport { state, since: SystemTime::now() - Duration::from_secs(12) });
        view.set_figures(Figures {
            sources: vec![
                report(SourceState::Streaming),
                report(SourceState::Connecting { attempt: 0 }),
                report(SourceState::Reconnecting { attempt: 2, last_error: "no frame for 20.0 s".into() }),
            ],
            ..Figures::default()
        });
        let reason = view.health().unwrap_err();
        assert!(reason.contains("camera gate: no frame for 12 s, connecting"), "{reason}");
        assert!(
            reason.contains("camera door: offline for 12 s, reconnecting (attempt 2: no frame for 20.0 s)"),
            "{reason}"
        );
        assert!(!reason.contains("front"), "{reason}");
    }

    #[test]
    fn the_event_ring_keeps_the_newest_and_filters_by_camera() {
        let view = view(&["front", "back"]);
        let event =
            |track_id: u64| ObjectEvent { picture: Some(Arc::new(vec![0xff, 0xd8])), ..ObjectEvent::example(track_id) };
        for i in 0..EVENT_RING as u64 + 5 {
            let camera = if i % 2 == 0 { "front" } else { "back" };
            view.record_events(camera, &[event(i)]);
        }
        let all = view.events(None, usize::MAX);
        assert_eq!(all.len(), EVENT_RING);
        assert_eq!(all.last().unwrap().event.track_id, EVENT_RING as u64 + 4);
        assert!(all.iter().all(|e| e.event.picture.is_none()), "the ring keeps no pictures");
        let front = view.events(Some("front"), 2);
        assert_eq!(front.iter().map(|e| e.event.track_id).collect::<Vec<_>>(), [202, 204]);
    }

    #[test]
    fn every_kept_event_is_pushed_to_the_feed_without_its_picture() {
        let view = view(&["front"]);
        let mut subscription = view.feed.subscribe();
        view.record_events("front", &[ObjectEvent { picture: Some(Arc::new(vec![0xff])), ..ObjectEvent::example(7) }]);
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        match runtime.block_on(subscription.next()) {
            super::super::event_feed::FeedItem::Event(pushed) => {
                assert_eq!((pushed.camera.as_str(), pushed.event.track_id), ("front", 7));
                assert!(pushed.event.picture.is_none());
                assert_eq!(view.pictures.get("front", 7).as_deref(), Some(&vec![0xff]), "the picture kept apart");
            }
            other => panic!("{other:?}"),
        }
    }
}
