//! One-shot detection on image files: the `detect` command.
//!
//! Owns: reading each file into a frame slot, running it through the same session and decoder
//! sequence a camera uses ([`step::process`]), and the JSON line printed per file.
//! Must not: publish over MQTT, open cameras, or stop at the first bad file (the caller decides).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::backend::{Backend, BackendError, InferenceSession};
use crate::config::LimitsConfig;
use crate::decode::{DecodeParams, Decoder};
use crate::detection::{Detection, Labels};
use crate::frame::{FrameSlot, HeapMemory};
use crate::infer::step;
use crate::preprocess::PreprocessSpec;
use crate::publish::payload::{DetectionsView, Latency, LatencyMs};
use crate::source::image_decode;

#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    #[error("{path}: cannot read the image: {message}")]
    Image { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Detect { path: PathBuf, message: String },
}

/// Runs files through one inference session, reusing its buffers from file to file.
pub struct OneShotDetector {
    session: Box<dyn InferenceSession>,
    decoder: Decoder,
    spec: PreprocessSpec,
    labels: Arc<Labels>,
    limits: LimitsConfig,
    slot: FrameSlot,
    detections: Vec<Detection>,
}

/// One line of `detect` output.
#[derive(Serialize)]
struct FileResult<'a> {
    file: String,
    width: u32,
    height: u32,
    latency_ms: LatencyMs,
    detections: DetectionsView<'a>,
}

impl OneShotDetector {
    /// Every file is decoded within `limits`: one over them is that file's error.
    pub fn new(
        backend: &dyn Backend,
        params: DecodeParams,
        labels: Arc<Labels>,
        limits: LimitsConfig,
    ) -> Result<Self, BackendError> {
        Ok(OneShotDetector {
            session: backend.new_session()?,
            decoder: Decoder::new(params),
            spec: backend.spec().clone(),
            labels,
            limits,
            slot: FrameSlot::new(Box::new(HeapMemory::default())),
            detections: Vec::new(),
        })
    }

    /// Detects objects in the image at `path`; returns its result as one JSON line (no newline):
    /// `{"file", "width", "height", "latency_ms", "detections"}`, detections as in the MQTT schema.
    pub fn detect(&mut self, path: &Path) -> Result<Vec<u8>, OneShotError> {
        let decoded = image_decode::decode_file(path, &self.limits, &mut self.slot)
            .map_err(|e| OneShotError::Image { path: path.to_path_buf(), message: e.to_string() })?;
        if decoded == image_decode::Decoded::Truncated {
            log::warn!("{}: truncated JPEG: detections are from the part that is there", path.display());
        }
        let timings =
            step::process(&mut *self.session, &mut self.decoder, &self.spec, &self.slot, &mut self.detections)
                .map_err(|e| OneShotError::Detect { path: path.to_path_buf(), message: e.to_string() })?;
        let latency = Latency::from(&timings);
        let meta = self.slot.meta();
        let line = FileResult {
            file: path.display().to_string(),
            width: meta.width,
            height: meta.height,
            latency_ms: LatencyMs::from(&latency),
            detections: DetectionsView { detections: &self.detections, labels: &self.labels },
        };
        // Plain strings and numbers always serialise.
        Ok(serde_json::to_vec(&line).unwrap_or_default())
    }
}
