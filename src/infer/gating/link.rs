//! What reaches a camera's gate while it runs, and what it shows: new masks saved from the page,
//! and its motion, frame after frame, for the page's debug view.
//!
//! Owns: [`MotionLink`] (one per gated camera: masks waiting for the gate's next frame; the last
//! frame's [`MotionView`] for whoever watches) and [`MotionGates`] (the running `[motion]` and
//! every camera's link, shared by the daemon's loop, the source threads and the HTTP API). Must
//! not: judge motion (`crate::motion`), route frames (`crate::infer::camera`) or make the source
//! thread wait: masks are taken only when their lock is free, and a frame's motion is copied out
//! only while someone watches (a watch channel keeps the newest alone: no queue, and the regions'
//! buffer is reused, so a frame allocates nothing).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::config::{CameraMotion, MotionConfig};
use super::view::MotionView;
use crate::frame::FrameMeta;
use crate::motion::{Motion, MAX_REGIONS};
use crate::track::zones::Polygon;

/// A running camera gate's link.
#[derive(Debug)]
pub struct MotionLink {
    /// Set when `masks` holds masks the gate has not taken yet.
    pending: AtomicBool,
    masks: Mutex<Option<Vec<Polygon>>>,
    view: watch::Sender<MotionView>,
}

impl Default for MotionLink {
    fn default() -> MotionLink {
        let view = MotionView { regions: Vec::with_capacity(MAX_REGIONS), ..MotionView::default() };
        MotionLink { pending: AtomicBool::new(false), masks: Mutex::new(None), view: watch::channel(view).0 }
    }
}

impl MotionLink {
    /// Hands the gate new masks: it applies them from its next frame on (the background stays).
    pub fn set_masks(&self, masks: Vec<Polygon>) {
        *crate::sys::lock::lock(&self.masks) = Some(masks);
        self.pending.store(true, Ordering::Release);
    }

    /// New masks, when some wait and their lock is free (else the next frame looks again).
    pub fn take_masks(&self) -> Option<Vec<Polygon>> {
        if !self.pending.load(Ordering::Acquire) {
            return None;
        }
        let mut waiting = self.masks.try_lock().ok()?;
        self.pending.store(false, Ordering::Release);
        waiting.take()
    }

    /// Whether anyone watches the camera's motion now.
    pub fn watched(&self) -> bool {
        self.view.receiver_count() > 0
    }

    /// The motion of the frame `meta` describes, for whoever watches (nothing while nobody does);
    /// `gated`: the frame was kept from inference.
    pub fn show(&self, motion: &Motion, meta: &FrameMeta, gated: bool) {
        if !self.watched() {
            return;
        }
        self.view.send_modify(|view| {
            view.frame += 1;
            view.captured_at = meta.captured_at;
            (view.width, view.height) = (meta.width, meta.height);
            (view.state, view.changed, view.gated) = (motion.state, motion.changed, gated);
            view.regions.clear();
            view.regions.extend_from_slice(&motion.regions);
        });
    }

    /// A watcher: it sees the newest frame's motion each time it looks (frames in between are
    /// of no use to it), and the gate copies motion out for as long as it lives.
    pub fn watch(&self) -> watch::Receiver<MotionView> {
        let mut receiver = self.view.subscribe();
        receiver.mark_unchanged();
        receiver
    }
}

/// `[motion]` as the cameras' gates run with it (masks saved from the page merged in), and each
/// camera's link.
#[derive(Debug)]
pub struct MotionGates {
    running: MotionConfig,
    links: BTreeMap<String, Arc<MotionLink>>,
}

impl MotionGates {
    /// Gates for `cameras` with `running` ([`MotionConfig::with_saved_masks`]).
    pub fn new(running: MotionConfig, cameras: impl IntoIterator<Item = String>) -> MotionGates {
        let links = cameras.into_iter().map(|name| (name, Arc::default())).collect();
        MotionGates { running, links }
    }

    /// What `camera`'s gate starts with; `Err((key, message))` for a value that does not fit.
    pub fn settings(&self, camera: &str) -> Result<CameraMotion, (String, String)> {
        self.running.for_camera(camera)
    }

    /// `camera`'s link; `None` for a camera without a gate.
    pub fn link(&self, camera: &str) -> Option<&Arc<MotionLink>> {
        self.links.get(camera)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::frame::PixelFormat;
    use crate::motion::{MotionState, Region};

    fn square() -> Polygon {
        Polygon::new(&[[0.0, 0.0], [0.5, 0.0], [0.5, 0.5], [0.0, 0.5]]).expect("polygon")
    }

    #[test]
    fn masks_set_reach_the_gate_once() {
        let link = MotionLink::default();
        assert!(link.take_masks().is_none());
        link.set_masks(vec![square()]);
        assert_eq!(link.take_masks().map(|masks| masks.len()), Some(1));
        assert!(link.take_masks().is_none(), "taken");
        link.set_masks(Vec::new());
        assert_eq!(link.take_masks().map(|masks| masks.len()), Some(0), "no masks is a change too");
    }

    #[test]
    fn motion_is_shown_only_while_someone_watches_and_the_newest_frame_wins() {
        let link = MotionLink::default();
        let meta = FrameMeta {
            width: 640,
            height: 480,
            format: PixelFormat::Rgb8,
            sequence: 0,
            captured_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
        };
        let region = Region { x: 12, y: 24, width: 36, height: 48, cells: 9 };
        let moving = Motion { state: MotionState::Moving, changed: 0.01, regions: vec![region] };
        link.show(&moving, &meta, false);
        assert!(!link.watched());
        let mut watcher = link.watch();
        assert!(!watcher.has_changed().expect("open"), "nothing shown yet");
        link.show(&moving, &meta, false);
        link.show(&Motion { state: MotionState::Still, ..Motion::default() }, &meta, true);
        let view = watcher.borrow_and_update().clone();
        assert_eq!((view.frame, view.state, view.gated, view.regions.len()), (2, MotionState::Still, true, 0));
        assert_eq!((view.width, view.height, view.captured_at), (640, 480, meta.captured_at));
        drop(watcher);
        assert!(!link.watched(), "the last watcher gone, the gate copies nothing");
    }
}
