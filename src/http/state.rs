//! What every handler shares, and the zone change the daemon's loop applies.
//!
//! Owns: [`HttpState`] and [`ZonesChange`]. Must not: hold anything the pipeline waits on (the
//! view hands out `Arc`s).

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::hosts::AllowedHosts;
use super::metrics::Metrics;
use super::picture::Pictures;
use super::token::Token;
use crate::config::zones_file::CameraScene;
use crate::controls::Controls;
use crate::infer::gating::MotionGates;
use crate::publish::live::LiveView;
use crate::record::Recorder;
use crate::track::events::Scene;
use crate::track::zones::Polygon;
use crate::watch::hub::WatchHub;

/// A zone and line change for one camera, already parsed and checked; the daemon's loop saves it
/// to the zones file, applies it to the camera's tracking and answers (an error: not saved).
#[derive(Debug)]
pub struct ZonesChange {
    /// As the zones file keeps it (and the running config shows it).
    pub scene: CameraScene,
    /// As tracking uses it.
    pub tracked: Scene,
    /// The motion masks as the camera's gate uses them, when the change sets them.
    pub masks: Option<Vec<Polygon>>,
    pub applied: oneshot::Sender<Result<(), String>>,
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub view: Arc<LiveView>,
    pub token: Option<Token>,
    pub changes: mpsc::Sender<ZonesChange>,
    /// Serialises zone changes (read the running zones, merge, check, save, apply).
    pub saving: Arc<tokio::sync::Mutex<()>>,
    pub metrics: Arc<Metrics>,
    /// The `Host` values requests may carry (DNS rebinding).
    pub hosts: Arc<AllowedHosts>,
    /// Each camera's live picture, rendered once per frame.
    pub pictures: Arc<Pictures>,
    /// The run-time controls that `PUT /api/controls` sets.
    pub controls: Arc<Controls>,
    /// The recorder, when a camera records clips.
    pub record: Option<Arc<Recorder>>,
    /// The cameras' live video.
    pub watch: Option<Arc<WatchHub>>,
    /// The cameras' motion gates (with `[motion]` enabled), for the debug view.
    pub motion: Option<Arc<MotionGates>>,
}

/// What the API serves of the cameras' pictures besides the latest one: the recorder's clips, the
/// live feeds, and the motion the gates see.
#[derive(Debug, Clone, Default)]
pub struct Video {
    pub record: Option<Arc<Recorder>>,
    pub watch: Option<Arc<WatchHub>>,
    pub motion: Option<Arc<MotionGates>>,
}
