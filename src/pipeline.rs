//! One camera's pipeline: a source thread fills frame slots, an inference thread turns them into
//! detections and hands them to a [`FrameSink`].
//!
//! Owns: the two threads per camera, the fps cap, the frame ring between them, per-frame stage
//! timing, applying reloaded decode parameters, the camera's [`SourceStatus`] (from a source that
//! reconnects, else kept here), and the threads' [`Liveness`] parties: the source thread beats on
//! every turn of its loop, the inference thread (the camera's inference worker) after every frame
//! and every idle wait (see `notify` for why the two are separate). The inference thread is the
//! camera's GPU thread: its backend session (CUDA context binding, stream, TensorRT context) is
//! created on it and never leaves it. Must not: publish, format payloads, or block on the network —
//! the sink decides what to do with a result and must return quickly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError};
use crate::config::{CameraConfig, LimitsConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Detection;
use crate::frame::{FrameRing, FrameSlot};
use crate::notify::{Liveness, LivenessHandle};
use crate::source::{self, Capture, FrameSource, SourceError, SourceReport, SourceState, SourceStatus};
use crate::telemetry::{FrameTimings, Stage};

/// How often blocked threads look at the stop flag (and an idle inference worker beats).
const POLL: Duration = Duration::from_millis(100);
/// A source that asks to be called again gets this pause, so a flapping device cannot spin a core.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("camera {camera}: {source}")]
    Source { camera: String, source: SourceError },
    #[error("camera {camera}: {source}")]
    Backend { camera: String, source: BackendError },
    #[error("camera {camera}: cannot decode the model output: {message}")]
    Decode { camera: String, message: String },
    #[error("camera {camera}: cannot start a thread: {source}")]
    Thread { camera: String, source: std::io::Error },
    #[error("camera {camera}: a pipeline thread panicked")]
    Panicked { camera: String },
}

/// Receives every processed frame. Called on the camera's inference thread with the frame still in
/// its slot (for snapshots); must not block.
pub trait FrameSink: Send + Sync {
    fn frame(&self, camera: &str, slot: &FrameSlot, detections: &[Detection], timings: &FrameTimings);
    /// The camera stopped: `Ok` for a finite source that ended or a requested shutdown.
    fn camera_ended(&self, camera: &str, result: &Result<(), PipelineError>);
}

/// What every camera pipeline of a daemon shares.
#[derive(Clone)]
pub struct PipelineShared {
    /// Frame slots per camera ring (`engine.frame_slots`).
    pub slots: usize,
    /// The bounds on every frame a source decodes (`[limits]`).
    pub limits: LimitsConfig,
    pub backend: Arc<dyn Backend>,
    pub sink: Arc<dyn FrameSink>,
    /// The daemon's shutdown flag.
    pub stop: Arc<AtomicBool>,
    /// Where the source and inference threads register for the watchdog.
    pub liveness: Arc<Liveness>,
}

/// Decode parameters waiting to be picked up by the inference thread (SIGHUP reload).
#[derive(Default)]
pub struct PendingParams(Mutex<Option<DecodeParams>>);

impl PendingParams {
    pub fn set(&self, params: DecodeParams) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(params);
    }

    fn take(&self) -> Option<DecodeParams> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A running camera.
pub struct CameraPipeline {
    name: String,
    ring: Arc<FrameRing>,
    pending: Arc<PendingParams>,
    status: SourceStatus,
    source_thread: Option<JoinHandle<()>>,
    infer_thread: Option<JoinHandle<()>>,
}

impl CameraPipeline {
    /// Opens the camera's source (errors here mean the camera never started) and starts its threads.
    /// Every frame the source decodes is bounded by `shared.limits`.
    pub fn start(
        camera: &CameraConfig,
        params: DecodeParams,
        shared: &PipelineShared,
    ) -> Result<CameraPipeline, PipelineError> {
        let source = source::open(&camera.source, shared.limits, shared.stop.clone())
            .map_err(|source| PipelineError::Source { camera: camera.name.clone(), source })?;
        CameraPipeline::start_with_source(camera, source, params, shared)
    }

    /// Starts the threads on a source that is already open (`camera.source` is not used).
    pub fn start_with_source(
        camera: &CameraConfig,
        source: Box<dyn FrameSource>,
        params: DecodeParams,
        shared: &PipelineShared,
    ) -> Result<CameraPipeline, PipelineError> {
        let name = camera.name.clone();
        let slot_bytes = camera.max_frame_bytes();
        let memories = (0..shared.slots)
            .map(|_| shared.backend.slot_memory(slot_bytes).map(FrameSlot::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| PipelineError::Backend { camera: name.clone(), source })?;
        let ring = Arc::new(FrameRing::new(memories));
        let pending = Arc::new(PendingParams::default());
        let status = source.connection_status().unwrap_or_else(|| SourceStatus::new(SourceState::Streaming));
        let frame_interval = camera.frame_interval();
        log::info!("camera {name}: {} (fps cap: {})", source.describe(), fps_text(camera.fps));

        let source_thread = {
            let liveness = shared.liveness.register(format!("camera {name}: source"));
            let (name, ring, status) = (name.clone(), ring.clone(), status.clone());
            let (sink, stop) = (shared.sink.clone(), shared.stop.clone());
            spawn(&format!("{}-source", camera.name), &camera.name, move || {
                let result = run_source(source, &ring, frame_interval, &stop, &status, &liveness)
                    .map_err(|source| PipelineError::Source { camera: name.clone(), source });
                ring.close();
                match result {
                    Ok(()) => liveness.finish(),
                    // The handle is dropped unfinished: the watchdog counts the thread as dead.
                    Err(_) => sink.camera_ended(&name, &result),
                }
            })?
        };
        let infer_thread = {
            let liveness = shared.liveness.register(format!("camera {name}: inference worker"));
            let (name, ring, pending) = (name.clone(), ring.clone(), pending.clone());
            let (backend, sink, stop) = (shared.backend.clone(), shared.sink.clone(), shared.stop.clone());
            spawn(&format!("{}-infer", camera.name), &camera.name, move || {
                let decoder = Decoder::new(params);
                let worker = InferenceWorker { camera: &name, ring: &ring, pending: &pending, stop: &stop };
                let result = worker.run(backend.as_ref(), decoder, sink.as_ref(), &liveness);
                if result.is_err() {
                    // Unblock the source so it does not fill slots nobody will read.
                    stop.store(true, Ordering::SeqCst);
                    ring.close();
                } else {
                    liveness.finish();
                }
                sink.camera_ended(&name, &result);
            })?
        };
        Ok(CameraPipeline {
            name,
            ring,
            pending,
            status,
            source_thread: Some(source_thread),
            infer_thread: Some(infer_thread),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ring's counters (frames produced, frames dropped because inference was behind).
    pub fn ring(&self) -> &FrameRing {
        &self.ring
    }

    /// The camera's source state (streaming, reconnecting, ended, stopped) and since when.
    pub fn source_report(&self) -> SourceReport {
        self.status.report()
    }

    /// New thresholds/filters, applied before the next frame.
    pub fn reload(&self, params: DecodeParams) {
        self.pending.set(params);
    }

    /// Waits for both threads (after the stop flag was set or the source ended).
    pub fn join(mut self) -> Result<(), PipelineError> {
        let mut outcome = Ok(());
        for handle in [self.source_thread.take(), self.infer_thread.take()].into_iter().flatten() {
            if handle.join().is_err() {
                outcome = Err(PipelineError::Panicked { camera: self.name.clone() });
            }
        }
        outcome
    }
}

fn fps_text(fps: f32) -> String {
    if fps > 0.0 {
        format!("{fps}/s")
    } else {
        "none".into()
    }
}

fn spawn(
    thread_name: &str,
    camera: &str,
    body: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, PipelineError> {
    std::thread::Builder::new()
        .name(thread_name.chars().take(15).collect())
        .spawn(body)
        .map_err(|source| PipelineError::Thread { camera: camera.to_string(), source })
}

/// Sleeps until `deadline` in short steps, beating `liveness` after each; false when asked to stop
/// meanwhile.
fn sleep_until(deadline: Instant, stop: &AtomicBool, liveness: &LivenessHandle) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(POLL));
        liveness.beat();
    }
}

fn run_source(
    mut source: Box<dyn FrameSource>,
    ring: &FrameRing,
    frame_interval: Option<Duration>,
    stop: &AtomicBool,
    status: &SourceStatus,
    liveness: &LivenessHandle,
) -> Result<(), SourceError> {
    let mut sequence = 0u64;
    let mut next_due = Instant::now();
    let keeps_every_frame = source.keeps_every_frame();
    while !stop.load(Ordering::SeqCst) {
        if let Some(interval) = frame_interval {
            if !sleep_until(next_due, stop, liveness) {
                break;
            }
            // After a stall, resume the cadence from now rather than bursting to catch up.
            next_due = (next_due + interval).max(Instant::now());
        }
        let slot = if keeps_every_frame { wait_for_free_slot(ring, stop, liveness) } else { ring.acquire_for_write() };
        let Some(mut slot) = slot else {
            std::thread::sleep(RETRY_PAUSE);
            liveness.beat();
            continue;
        };
        let started = Instant::now();
        liveness.enter(Stage::Source);
        let captured = source.next_frame(&mut slot);
        // A reconnecting source returns here after each backoff step: it is alive, whatever
        // its camera's state.
        liveness.beat();
        match captured {
            Ok(Capture::Frame) => {
                slot.set_capture_time(started.elapsed());
                slot.meta_mut().sequence = sequence;
                sequence += 1;
                ring.publish(slot);
            }
            Ok(Capture::Retry) => {
                ring.release(slot);
                std::thread::sleep(RETRY_PAUSE);
            }
            Ok(Capture::OverLimit) => {
                ring.stats().over_limit.fetch_add(1, Ordering::Relaxed);
                ring.release(slot);
                std::thread::sleep(RETRY_PAUSE);
            }
            Ok(Capture::End) => {
                ring.release(slot);
                if !stop.load(Ordering::SeqCst) {
                    log::info!("{}: no more frames", source.describe());
                    status.set(SourceState::Ended);
                }
                break;
            }
            Err(e) => {
                ring.release(slot);
                return Err(e);
            }
        }
    }
    if stop.load(Ordering::SeqCst) {
        status.set(SourceState::Stopped);
    }
    Ok(())
}

/// A free slot for a source that must not drop frames; `None` when asked to stop meanwhile. Waiting
/// for inference to free a slot is the source being alive (the inference worker has its own party).
fn wait_for_free_slot(ring: &FrameRing, stop: &AtomicBool, liveness: &LivenessHandle) -> Option<FrameSlot> {
    while !stop.load(Ordering::SeqCst) {
        if let Some(slot) = ring.acquire_free(POLL) {
            return Some(slot);
        }
        liveness.beat();
    }
    None
}

/// The camera's inference thread: takes ready frames from the ring and runs them.
struct InferenceWorker<'a> {
    camera: &'a str,
    ring: &'a FrameRing,
    pending: &'a PendingParams,
    stop: &'a AtomicBool,
}

impl InferenceWorker<'_> {
    fn run(
        &self,
        backend: &dyn Backend,
        mut decoder: Decoder,
        sink: &dyn FrameSink,
        liveness: &LivenessHandle,
    ) -> Result<(), PipelineError> {
        let camera = self.camera;
        let backend_error = |source| PipelineError::Backend { camera: camera.to_string(), source };
        let mut session = backend.new_session().map_err(backend_error)?;
        liveness.beat();
        let spec = backend.spec().clone();
        let mut detections = Vec::new();
        loop {
            // A requested stop skips the frames still waiting: with a slow backend, working through
            // a full ring would hold up shutdown for several inference times. A source that ended
            // by itself closes the ring without the stop flag, and its remaining frames are still run.
            if self.stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            if let Some(params) = self.pending.take() {
                decoder.set_params(params);
                log::info!("camera {camera}: reloaded thresholds and class filter");
            }
            let Some(slot) = self.ring.take_ready(POLL) else {
                if self.ring.is_finished() {
                    return Ok(());
                }
                // Idle because no frame came: alive, not hung.
                liveness.beat();
                continue;
            };
            // Preprocessing, inference and decoding: the backend does the first two in one call.
            liveness.enter(Stage::Infer);
            let outcome = process(&mut *session, &mut decoder, &spec, &slot, &mut detections);
            match outcome {
                Ok(timings) => {
                    log::debug!(
                        "camera {camera} frame {}: {timings:?} ({} detections)",
                        slot.meta().sequence,
                        detections.len()
                    );
                    liveness.enter(Stage::Publish);
                    sink.frame(camera, &slot, &detections, &timings);
                    self.ring.release(slot);
                }
                // A frame the preprocessor cannot take (odd size, truncated data) is one bad frame,
                // not a broken pipeline.
                Err(FrameError::Backend(BackendError::Preprocess(message))) => {
                    log::warn!("camera {camera} frame {}: skipped: {message}", slot.meta().sequence);
                    self.ring.release(slot);
                }
                Err(FrameError::Backend(source)) => {
                    self.ring.release(slot);
                    return Err(backend_error(source));
                }
                Err(FrameError::Decode(message)) => {
                    self.ring.release(slot);
                    return Err(PipelineError::Decode { camera: camera.to_string(), message });
                }
            }
            liveness.beat();
        }
    }
}

/// Why one frame produced no detections.
#[derive(Debug)]
pub enum FrameError {
    Backend(BackendError),
    Decode(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Backend(e) => e.fmt(f),
            FrameError::Decode(message) => write!(f, "cannot decode the model output: {message}"),
        }
    }
}

/// Runs one frame through the model and the decoder: `detections` holds the result. Shared by the
/// camera pipeline and the one-shot `detect` command so both see the same numbers.
pub fn process(
    session: &mut dyn crate::backend::InferenceSession,
    decoder: &mut Decoder,
    spec: &crate::preprocess::PreprocessSpec,
    slot: &FrameSlot,
    detections: &mut Vec<Detection>,
) -> Result<FrameTimings, FrameError> {
    let (outputs, backend_timings) = session.run(slot).map_err(FrameError::Backend)?;
    let post_started = Instant::now();
    let geometry = spec.geometry(slot.meta().width, slot.meta().height);
    decoder
        .decode(outputs, spec.width, spec.height, &geometry, detections)
        .map_err(|e| FrameError::Decode(e.to_string()))?;
    let postprocess = post_started.elapsed();
    Ok(FrameTimings {
        source: Some(slot.capture_time()),
        pre: Some(backend_timings.preprocess),
        infer: Some(backend_timings.infer),
        post: Some(postprocess),
        publish: None,
        total: Some(backend_timings.preprocess + backend_timings.infer + postprocess),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::backend::{BackendInfo, BackendTimings, InferenceSession, ModelOutputs};
    use crate::config::{Config, DecoderKind, SourceConfig};
    use crate::preprocess::PreprocessSpec;

    /// A backend whose every inference takes a while and then rejects the frame.
    struct SlowBackend {
        spec: PreprocessSpec,
        runs: Arc<AtomicUsize>,
    }

    struct SlowSession {
        runs: Arc<AtomicUsize>,
    }

    const INFERENCE_TIME: Duration = Duration::from_millis(150);

    impl Backend for SlowBackend {
        fn info(&self) -> BackendInfo {
            BackendInfo { kind: "cpu", model: "slow".into(), detail: String::new() }
        }
        fn spec(&self) -> &PreprocessSpec {
            &self.spec
        }
        fn new_session(&self) -> Result<Box<dyn InferenceSession>, BackendError> {
            Ok(Box::new(SlowSession { runs: self.runs.clone() }))
        }
    }

    impl InferenceSession for SlowSession {
        fn run(&mut self, _slot: &FrameSlot) -> Result<(&ModelOutputs, BackendTimings), BackendError> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(INFERENCE_TIME);
            Err(BackendError::Preprocess("test backend rejects every frame".into()))
        }
    }

    struct NullSink;

    impl FrameSink for NullSink {
        fn frame(&self, _: &str, _: &FrameSlot, _: &[Detection], _: &FrameTimings) {}
        fn camera_ended(&self, _: &str, _: &Result<(), PipelineError>) {}
    }

    #[test]
    fn stop_does_not_wait_for_the_frames_still_in_the_ring() {
        const SLOTS: usize = 4;
        let config = Config::embedded_default().expect("embedded default config");
        let runs = Arc::new(AtomicUsize::new(0));
        let backend = Arc::new(SlowBackend { spec: PreprocessSpec::from(&config.model.input), runs: runs.clone() });
        let params = DecodeParams {
            kind: DecoderKind::Ssd,
            score_threshold: 0.5,
            nms_iou: 0.5,
            max_detections: 10,
            allowed_classes: None,
        };
        let camera = CameraConfig {
            name: "test".into(),
            source: SourceConfig::Synthetic { width: 64, height: 48 },
            fps: 0.0,
            zones: Vec::new(),
            lines: Vec::new(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let shared = PipelineShared {
            slots: SLOTS,
            limits: config.limits,
            backend,
            sink: Arc::new(NullSink),
            stop: stop.clone(),
            liveness: Liveness::new(),
        };
        let pipeline = CameraPipeline::start(&camera, params, &shared).expect("start pipeline");
        // An uncapped synthetic source fills every free slot while the first frame is in inference.
        let deadline = Instant::now() + Duration::from_secs(30);
        while runs.load(Ordering::SeqCst) == 0 || pipeline.ring().stats().produced.load(Ordering::SeqCst) < SLOTS as u64
        {
            assert!(Instant::now() < deadline, "the pipeline never filled its ring");
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
        let runs_at_stop = runs.load(Ordering::SeqCst);
        pipeline.join().expect("join");
        let runs_after_stop = runs.load(Ordering::SeqCst) - runs_at_stop;
        assert!(
            runs_after_stop <= 1,
            "{runs_after_stop} frames were run after the stop request (one may be in flight)"
        );
    }
}
