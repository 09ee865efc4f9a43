//! The benchmark's cameras running as the daemon runs cameras: the inference scheduler on the
//! models' lanes, and one camera pipeline per source feeding it, for `cameras` (N cameras as fast
//! as inference takes them) and `capacity` (N cameras at a frame rate, maybe through motion gates).
//!
//! Owns: [`RunningCameras`], their one start (the run-time controls, the scheduler, the pipelines'
//! shared parts, a synthetic camera config per source) and their one stop (the stop flag, every
//! pipeline and the scheduler joined). Must not: make frames or count them (the callers' sources
//! and sinks do), or decide how long a run lasts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::error::BenchError;
use crate::config::{CameraConfig, LimitsConfig, SourceConfig};
use crate::infer::camera::{CameraPipeline, PipelineShared};
use crate::infer::gating::{MotionConfig, MotionGates};
use crate::infer::per_track::PerTrackLane;
use crate::infer::scheduler::{ModelLane, SchedulePlan, ScheduleReport, Scheduler};
use crate::infer::step::{FrameSink, PipelineError};
use crate::source::kinds::synthetic::SyntheticConfig;
use crate::source::FrameSource;

/// What every camera of a run has in common.
pub struct CameraSetup<'a> {
    /// The size of every source's frames.
    pub width: u32,
    pub height: u32,
    /// Each camera's frame-rate cap; 0: none (a source then sets its own pace).
    pub fps: f32,
    /// The controls' score threshold.
    pub score_threshold: f32,
    pub limits: &'a LimitsConfig,
    /// `[motion]`, enabled: every camera's frames go through its gate; `None`: no gating.
    pub motion: Option<&'a Arc<MotionConfig>>,
}

/// The scheduler and the camera pipelines of one benchmark run, until [`stop`](Self::stop).
pub struct RunningCameras {
    scheduler: Arc<Scheduler>,
    stop: Arc<AtomicBool>,
    cameras: Vec<CameraPipeline>,
}

/// What is left of a run once it has stopped.
pub struct StoppedCameras {
    scheduler: Arc<Scheduler>,
    /// Frames the cameras' rings dropped because inference had not taken the one before.
    pub frames_dropped: u64,
}

impl RunningCameras {
    /// Starts the scheduler on `lanes` (and the per-track models every worker holds) as `plan`
    /// says, delivering to `sink`, then one pipeline per camera of `names`, showing what
    /// `source(index)` gives it. When a camera does not start, what has started is stopped and the
    /// start's error returned (a failure to stop first).
    pub fn start(
        lanes: Vec<ModelLane>,
        per_track: Arc<[PerTrackLane]>,
        plan: SchedulePlan,
        sink: Arc<dyn FrameSink>,
        names: &[String],
        mut source: impl FnMut(usize) -> Box<dyn FrameSource>,
        setup: &CameraSetup<'_>,
    ) -> Result<RunningCameras, BenchError> {
        let stop = Arc::new(AtomicBool::new(false));
        let liveness = crate::service::notify::Liveness::new();
        let controls = Arc::new(crate::controls::Controls::with_cameras(names.to_vec(), false, setup.score_threshold));
        let scheduler = Scheduler::start_lanes(lanes, per_track, plan, sink.clone(), stop.clone(), &liveness)
            .map_err(setup_error)?;
        let shared = PipelineShared {
            slots: 3,
            limits: *setup.limits,
            scheduler: Arc::clone(&scheduler),
            sink,
            stop: Arc::clone(&stop),
            liveness,
            controls,
            motion: setup.motion.map(|motion| Arc::new(MotionGates::new((**motion).clone(), names.iter().cloned()))),
        };
        let mut running = RunningCameras { scheduler, stop, cameras: Vec::new() };
        for (index, name) in names.iter().enumerate() {
            let camera = CameraConfig {
                name: name.clone(),
                source: SourceConfig::Synthetic(SyntheticConfig { width: setup.width, height: setup.height }),
                fps: setup.fps,
                zones: Vec::new(),
                lines: Vec::new(),
                record: None,
                model: None,
            };
            match CameraPipeline::start_with_source(&camera, source(index), &shared) {
                Ok(camera) => running.cameras.push(camera),
                Err(e) => {
                    running.stop()?;
                    return Err(setup_error(e));
                }
            }
        }
        Ok(running)
    }

    /// Whether the stop flag is up: before [`stop`](Self::stop), only a failed inference worker
    /// raises it.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Raises the stop flag, counts the frames the rings dropped, and joins every camera, then
    /// the scheduler.
    pub fn stop(self) -> Result<StoppedCameras, BenchError> {
        let RunningCameras { scheduler, stop, cameras } = self;
        stop.store(true, Ordering::SeqCst);
        let frames_dropped = cameras.iter().map(|camera| camera.ring().stats().dropped.load(Ordering::Relaxed)).sum();
        for camera in cameras {
            camera.join().map_err(setup_error)?;
        }
        scheduler.join().map_err(setup_error)?;
        Ok(StoppedCameras { scheduler, frames_dropped })
    }
}

impl StoppedCameras {
    /// The scheduler's account of the run: workers, batch sizes, device memory.
    pub fn report(&self) -> ScheduleReport {
        self.scheduler.report()
    }
}

fn setup_error(e: PipelineError) -> BenchError {
    BenchError::Setup(e.to_string())
}
