//! The per-frame step: one frame through the model and the decoder, and where its result goes.
//!
//! Owns: [`process`] and [`decode_frame`] (the one sequence the inference workers and the
//! one-shot commands share, so both report the same numbers), [`check_model`] (that sequence on a
//! blank frame, at start and in `check-config`), the [`FrameSink`] trait that
//! receives every processed frame, and the pipeline's error types. Must not: own threads or rings,
//! or publish (a sink does).

use std::time::Instant;

use super::per_track::PerTrackSessions;
use crate::backend::{Backend, BackendError, BackendTimings, InferenceSession};
use crate::decode::{DecodeParams, Decoder};
use crate::detection::Detection;
use crate::frame::{FrameSlot, FrameTimings, HeapMemory, PixelFormat};
use crate::model::ModelOutputs;
use crate::preprocess::PreprocessSpec;
use crate::source::SourceError;
use crate::sys::exit::{Classified, ExitClass};

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("camera {camera}: {source}")]
    Source { camera: String, source: SourceError },
    #[error("camera {camera}: {source}")]
    Backend { camera: String, source: BackendError },
    #[error("inference: {source}")]
    Worker { source: BackendError },
    #[error("camera {camera}: cannot decode the model output: {message}")]
    Decode { camera: String, message: String },
    /// The model's outputs do not fit `model.decoder` (found at start on a blank frame).
    #[error("`model.decoder` = \"{decoder}\" does not fit the model: {message}")]
    ModelOutputs { decoder: String, message: String },
    #[error("{camera}: cannot start a thread: {source}")]
    Thread { camera: String, source: std::io::Error },
    #[error("{camera}: a pipeline thread panicked")]
    Panicked { camera: String },
    /// The camera's `[motion]` values do not fit (a config that passed its checks has none).
    #[error("camera {camera}: {message}")]
    Motion { camera: String, message: String },
}

impl Classified for PipelineError {
    /// A source's own class; outputs that do not fit `model.decoder` (a blank frame at start) are
    /// the config's; the rest happens to a running pipeline, which a restart may help.
    fn exit_class(&self) -> ExitClass {
        match self {
            PipelineError::Source { source, .. } => source.exit_class(),
            PipelineError::ModelOutputs { .. } | PipelineError::Motion { .. } => ExitClass::Configuration,
            _ => ExitClass::Failure,
        }
    }
}

/// Receives every processed frame. Called on an inference worker with the frame still in its slot
/// (for snapshots and the crops of per-track models); must not block: it holds up every camera's
/// next frame.
pub trait FrameSink: Send + Sync {
    /// `per_track` are the worker's sessions of every per-track model, on its thread: the sink
    /// hands them, with the camera's tracks, to the camera's per-track step
    /// ([`crate::infer::per_track::CameraPerTrack::step`]), which runs them on a bounded number
    /// of crops of this frame.
    fn frame(
        &self,
        camera: &str,
        slot: &FrameSlot,
        detections: &[Detection],
        timings: &FrameTimings,
        per_track: &mut PerTrackSessions,
    );
    /// A frame of a camera whose detection is off, on the camera's source thread (no inference):
    /// for its picture. Must not block either: it holds up the camera's capture.
    fn picture(&self, _camera: &str, _slot: &FrameSlot) {}
    /// A frame the camera's motion gate kept from inference (nothing moved on it), on the
    /// camera's source thread: its tracks stay as they are, and the picture goes on. Must not
    /// block either.
    fn held(&self, camera: &str, slot: &FrameSlot) {
        self.picture(camera, slot);
    }
    /// The camera's motion sensor changed (`[motion]` enabled), on its source thread: `moving`
    /// while it sees motion. Must not block.
    fn motion(&self, _camera: &str, _moving: bool) {}
    /// Whether the camera's tracks let a frame without motion be held (none waits for its
    /// confirmation or counts down to its end), asked on the camera's source thread; `false` when
    /// the answer would mean waiting. Without tracking, yes.
    fn tracking_settled(&self, _camera: &str) -> bool {
        true
    }
    /// The camera's source lost its stream and reconnects (on the camera's source thread): what it
    /// showed is out of sight until it is back.
    fn camera_offline(&self, _camera: &str) {}
    /// The camera stopped: `Ok` for a finite source that ended or a requested shutdown.
    fn camera_ended(&self, camera: &str, result: &Result<(), PipelineError>);
    /// An inference worker (named `worker`) failed; the stop flag is already set.
    fn worker_failed(&self, worker: &str, error: &PipelineError);
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
/// inference workers and the one-shot `detect` command so both see the same numbers.
pub fn process(
    session: &mut dyn InferenceSession,
    decoder: &mut Decoder,
    spec: &PreprocessSpec,
    slot: &FrameSlot,
    detections: &mut Vec<Detection>,
) -> Result<FrameTimings, FrameError> {
    let (outputs, backend_timings) = session.run(slot).map_err(FrameError::Backend)?;
    decode_frame(decoder, spec, slot, outputs, backend_timings, detections)
}

/// Runs one blank frame of the model's input size through a session of `backend` and the decoder
/// `params` configure: what every frame will go through, so that a model whose outputs do not fit
/// the decoder (names, count, shapes) is refused at start (and by `check-config`), not at the first
/// camera frame. The session is dropped before this returns.
pub fn check_model(backend: &dyn Backend, params: DecodeParams) -> Result<(), PipelineError> {
    let spec = backend.spec().clone();
    let decoder_name = format!("{:?}", params.kind).to_lowercase();
    let mut session = backend.new_session().map_err(|source| PipelineError::Worker { source })?;
    let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
    let pixels = slot
        .prepare(spec.width, spec.height, PixelFormat::Rgb8)
        .map_err(|message| PipelineError::Worker { source: BackendError::Preprocess(message) })?;
    pixels.fill(0);
    let mut decoder = Decoder::new(params);
    match process(session.as_mut(), &mut decoder, &spec, &slot, &mut Vec::new()) {
        Ok(_) => Ok(()),
        Err(FrameError::Backend(source)) => Err(PipelineError::Worker { source }),
        Err(FrameError::Decode(message)) => Err(PipelineError::ModelOutputs { decoder: decoder_name, message }),
    }
}

/// Decodes the model outputs of the frame in `slot` (run alone or as one row of a batch, whose
/// `backend_timings` it reports) into `detections`.
pub fn decode_frame(
    decoder: &mut Decoder,
    spec: &PreprocessSpec,
    slot: &FrameSlot,
    outputs: &ModelOutputs,
    backend_timings: BackendTimings,
    detections: &mut Vec<Detection>,
) -> Result<FrameTimings, FrameError> {
    let post_started = Instant::now();
    let geometry = spec.geometry(slot.meta().width, slot.meta().height);
    decoder
        .decode(outputs, spec.width, spec.height, &geometry, detections)
        .map_err(|e| FrameError::Decode(e.to_string()))?;
    let postprocess = post_started.elapsed();
    Ok(FrameTimings {
        source: Some(slot.capture_time()),
        wait: None,
        pre: Some(backend_timings.preprocess),
        infer: Some(backend_timings.infer),
        post: Some(postprocess),
        publish: None,
        total: Some(backend_timings.preprocess + backend_timings.infer + postprocess),
    })
}
