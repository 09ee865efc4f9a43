//! One camera's pipeline: a source thread fills frame slots, an inference thread turns them into
//! detections and hands them to a [`FrameSink`].
//!
//! Owns: the two threads per camera, the fps cap, the frame ring between them, per-frame stage
//! timing, and applying reloaded decode parameters. The inference thread is the camera's GPU
//! thread: its backend session (CUDA context binding, stream, TensorRT context) is created on it and
//! never leaves it. Must not: publish, format payloads, or block on the network — the sink decides
//! what to do with a result and must return quickly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError};
use crate::config::{CameraConfig, LimitsConfig};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Detection;
use crate::frame::{FrameRing, FrameSlot};
use crate::source::{self, Capture, FrameSource, SourceError};
use crate::telemetry::FrameTimings;

/// How often blocked threads look at the stop flag.
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
    source_thread: Option<JoinHandle<()>>,
    infer_thread: Option<JoinHandle<()>>,
}

impl CameraPipeline {
    /// Opens the camera's source (errors here mean the camera never started) and starts its threads.
    /// Every frame the source decodes is bounded by `limits`.
    pub fn start(
        camera: &CameraConfig,
        slots: usize,
        limits: LimitsConfig,
        backend: Arc<dyn Backend>,
        params: DecodeParams,
        sink: Arc<dyn FrameSink>,
        stop: Arc<AtomicBool>,
    ) -> Result<CameraPipeline, PipelineError> {
        let name = camera.name.clone();
        let source = source::open(&camera.source, limits, stop.clone())
            .map_err(|source| PipelineError::Source { camera: name.clone(), source })?;
        let slot_bytes = camera.max_frame_bytes();
        let memories = (0..slots)
            .map(|_| backend.slot_memory(slot_bytes).map(FrameSlot::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| PipelineError::Backend { camera: name.clone(), source })?;
        let ring = Arc::new(FrameRing::new(memories));
        let pending = Arc::new(PendingParams::default());
        let frame_interval = camera.frame_interval();
        log::info!("camera {name}: {} (fps cap: {})", source.describe(), fps_text(camera.fps));

        let source_thread = {
            let (name, ring, sink, stop) = (name.clone(), ring.clone(), sink.clone(), stop.clone());
            spawn(&format!("{}-source", camera.name), &camera.name, move || {
                let result = run_source(source, &ring, frame_interval, &stop)
                    .map_err(|source| PipelineError::Source { camera: name.clone(), source });
                ring.close();
                if result.is_err() {
                    sink.camera_ended(&name, &result);
                }
            })?
        };
        let infer_thread = {
            let (name, ring, pending) = (name.clone(), ring.clone(), pending.clone());
            spawn(&format!("{}-infer", camera.name), &camera.name, move || {
                let decoder = Decoder::new(params);
                let result = run_inference(&name, backend.as_ref(), decoder, &ring, &pending, &stop, sink.as_ref());
                if result.is_err() {
                    // Unblock the source so it does not fill slots nobody will read.
                    stop.store(true, Ordering::SeqCst);
                    ring.close();
                }
                sink.camera_ended(&name, &result);
            })?
        };
        Ok(CameraPipeline { name, ring, pending, source_thread: Some(source_thread), infer_thread: Some(infer_thread) })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ring's counters (frames produced, frames dropped because inference was behind).
    pub fn ring(&self) -> &FrameRing {
        &self.ring
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

/// Sleeps until `deadline` in short steps; false when asked to stop meanwhile.
fn sleep_until(deadline: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(POLL));
    }
}

fn run_source(
    mut source: Box<dyn FrameSource>,
    ring: &FrameRing,
    frame_interval: Option<Duration>,
    stop: &AtomicBool,
) -> Result<(), SourceError> {
    let mut sequence = 0u64;
    let mut next_due = Instant::now();
    let keeps_every_frame = source.keeps_every_frame();
    while !stop.load(Ordering::SeqCst) {
        if let Some(interval) = frame_interval {
            if !sleep_until(next_due, stop) {
                break;
            }
            // After a stall, resume the cadence from now rather than bursting to catch up.
            next_due = (next_due + interval).max(Instant::now());
        }
        let slot = if keeps_every_frame { wait_for_free_slot(ring, stop) } else { ring.acquire_for_write() };
        let Some(mut slot) = slot else {
            std::thread::sleep(RETRY_PAUSE);
            continue;
        };
        let started = Instant::now();
        match source.next_frame(&mut slot) {
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
                log::info!("{}: no more frames", source.describe());
                break;
            }
            Err(e) => {
                ring.release(slot);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// A free slot for a source that must not drop frames; `None` when asked to stop meanwhile.
fn wait_for_free_slot(ring: &FrameRing, stop: &AtomicBool) -> Option<FrameSlot> {
    while !stop.load(Ordering::SeqCst) {
        if let Some(slot) = ring.acquire_free(POLL) {
            return Some(slot);
        }
    }
    None
}

fn run_inference(
    camera: &str,
    backend: &dyn Backend,
    mut decoder: Decoder,
    ring: &FrameRing,
    pending: &PendingParams,
    stop: &AtomicBool,
    sink: &dyn FrameSink,
) -> Result<(), PipelineError> {
    let backend_error = |source| PipelineError::Backend { camera: camera.to_string(), source };
    let mut session = backend.new_session().map_err(backend_error)?;
    let spec = backend.spec().clone();
    let mut detections = Vec::new();
    loop {
        // A requested stop skips the frames still waiting: with a slow backend, working through a
        // full ring would hold up shutdown for several inference times. A source that ended by
        // itself closes the ring without the stop flag, and its remaining frames are still run.
        if stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if let Some(params) = pending.take() {
            decoder.set_params(params);
            log::info!("camera {camera}: reloaded thresholds and class filter");
        }
        let Some(slot) = ring.take_ready(POLL) else {
            if ring.is_finished() {
                return Ok(());
            }
            continue;
        };
        let outcome = process(&mut *session, &mut decoder, &spec, &slot, &mut detections);
        match outcome {
            Ok(timings) => {
                log::debug!(
                    "camera {camera} frame {}: {timings:?} ({} detections)",
                    slot.meta().sequence,
                    detections.len()
                );
                sink.frame(camera, &slot, &detections, &timings);
                ring.release(slot);
            }
            // A frame the preprocessor cannot take (odd size, truncated data) is one bad frame,
            // not a broken pipeline.
            Err(FrameError::Backend(BackendError::Preprocess(message))) => {
                log::warn!("camera {camera} frame {}: skipped: {message}", slot.meta().sequence);
                ring.release(slot);
            }
            Err(FrameError::Backend(source)) => {
                ring.release(slot);
                return Err(backend_error(source));
            }
            Err(FrameError::Decode(message)) => {
                ring.release(slot);
                return Err(PipelineError::Decode { camera: camera.to_string(), message });
            }
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
        let pipeline =
            CameraPipeline::start(&camera, SLOTS, config.limits, backend, params, Arc::new(NullSink), stop.clone())
                .expect("start pipeline");
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
