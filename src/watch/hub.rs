//! The live video of every camera: its feed, the bound on viewers, and the boxes of its frames.
//!
//! Owns: [`WatchHub`] — a [`CameraFeed`] per camera whose source delivers an encoded stream (RTSP,
//! a GStreamer pipeline: `crate::source::SourceKind::delivers_encoded`) and its [`HlsStream`], the
//! listener its source
//! side hands each access unit to, the bound on live viewers over all cameras
//! ([`MAX_VIEWERS`]), the signal that ends every viewer's stream when the daemon stops, and, as an
//! outlet, each processed frame's boxes for the feeds someone watches (nothing at all for the
//! others) and its figures (viewers, and per feed its units and the viewers that lagged:
//! [`super::figures`]). Must not: make the pipeline wait (the boxes are sent without waiting, and only while
//! someone watches), or know sockets and HTTP.

use std::sync::Arc;

use std::sync::atomic::Ordering;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use super::feed::CameraFeed;
use super::figures::{figures, FeedReport, WatchReport};
use super::hls::HlsStream;
use crate::config::Config;
use crate::detection::Labels;
use crate::publish::figures::OutletFigures;
use crate::publish::outlet::{FrameResult, Outlet};
use crate::record::boxes::BoxFrame;
use crate::source::tap::UnitListener;

/// Live streams (a page's video and its boxes count two) at once, over all cameras: each holds
/// one of the web server's connections (at most 64) for as long as it plays, and the page and
/// the API keep the rest.
pub const MAX_VIEWERS: usize = 32;

/// Why a camera cannot be watched live.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unwatchable {
    #[error("no camera named {0:?}")]
    Unknown(String),
    #[error("camera {0:?} sends raw frames, not a compressed stream: its live view is the JPEG picture")]
    Raw(String),
}

/// Every camera's live video.
pub struct WatchHub {
    /// Each camera's name and its feed (`None`: its source sends raw frames).
    cameras: Vec<(String, Option<Arc<CameraFeed>>)>,
    /// The HLS stream of each feed, by camera name.
    hls: Vec<(String, Arc<HlsStream>)>,
    labels: Arc<Labels>,
    viewers: Arc<Semaphore>,
    stopping: watch::Sender<bool>,
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHub").field("cameras", &self.cameras.len()).finish_non_exhaustive()
    }
}

impl WatchHub {
    /// A feed for every camera of `config` whose source delivers an encoded stream.
    pub fn new(config: &Config, labels: Arc<Labels>) -> WatchHub {
        let cameras = config
            .cameras
            .iter()
            .map(|camera| {
                let feed = camera.source.kind().delivers_encoded().then(|| Arc::new(CameraFeed::new(&camera.name)));
                (camera.name.clone(), feed)
            })
            .collect::<Vec<_>>();
        let hls = cameras
            .iter()
            .filter_map(|(name, feed)| Some((name.clone(), Arc::new(HlsStream::new(feed.clone()?)))))
            .collect();
        WatchHub {
            cameras,
            hls,
            labels,
            viewers: Arc::new(Semaphore::new(MAX_VIEWERS)),
            stopping: watch::channel(false).0,
        }
    }

    /// `camera`'s feed.
    pub fn feed(&self, camera: &str) -> Result<Arc<CameraFeed>, Unwatchable> {
        let (name, feed) = self
            .cameras
            .iter()
            .find(|(name, _)| name == camera)
            .ok_or_else(|| Unwatchable::Unknown(camera.to_owned()))?;
        feed.clone().ok_or_else(|| Unwatchable::Raw(name.clone()))
    }

    /// `camera`'s HLS stream.
    pub fn hls(&self, camera: &str) -> Result<Arc<HlsStream>, Unwatchable> {
        self.feed(camera)?;
        let hls = self.hls.iter().find(|(name, _)| name == camera).map(|(_, hls)| hls.clone());
        hls.ok_or_else(|| Unwatchable::Raw(camera.to_owned()))
    }

    /// What `camera`'s source side hands its access units to.
    pub fn listener(&self, camera: &str) -> Option<Arc<dyn UnitListener>> {
        let feed: Arc<dyn UnitListener> = self.feed(camera).ok()?;
        Some(feed)
    }

    /// A place for one more live stream, held for as long as it plays; `None` while
    /// [`MAX_VIEWERS`] play.
    pub fn admit(&self) -> Option<OwnedSemaphorePermit> {
        self.viewers.clone().try_acquire_owned().ok()
    }

    /// Live streams playing now, over all cameras.
    pub fn viewers(&self) -> usize {
        MAX_VIEWERS - self.viewers.available_permits()
    }

    /// Turns `true` when the daemon stops: every live stream ends then.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }
}

/// The hub as an outlet: a processed frame's boxes go to its camera's feed while someone watches
/// them; stopping ends every live stream, so that the web server's graceful end does not wait on
/// them.
impl Outlet for WatchHub {
    fn name(&self) -> &str {
        "watch"
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        let feed = self.cameras.iter().find(|(name, _)| name == frame.camera).and_then(|(_, feed)| feed.as_ref());
        if let Some(feed) = feed.filter(|feed| feed.boxes_watched()) {
            feed.frame_boxes(&BoxFrame::from_frame(frame, &self.labels));
        }
    }

    fn figures(&self) -> Option<OutletFigures> {
        let load = |value: &std::sync::atomic::AtomicU64| value.load(Ordering::Relaxed);
        let cameras = self
            .cameras
            .iter()
            .filter_map(|(name, feed)| {
                let figures = &feed.as_ref()?.figures;
                let report = FeedReport {
                    units: load(&figures.units),
                    malformed: load(&figures.malformed),
                    lagged: load(&figures.lagged),
                    skipped: load(&figures.skipped_items),
                };
                Some((name.clone(), report))
            })
            .collect();
        Some(figures(&WatchReport { viewers: self.viewers(), cameras }))
    }

    fn stopping(&self) {
        self.stopping.send_replace(true);
    }
}
