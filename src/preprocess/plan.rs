//! What both CPU implementations work out once per frame size and spec, and check on every run.
//!
//! Owns: [`SamplingPlan`] (where the frame lands in the tensor, step 2's taps along each axis, the
//! pad value after steps 3 and 4), [`finish_pixel`] (steps 3 and 4 for one pixel) and
//! [`check_sizes`] (the frame and the output buffer against the format and the spec). Must not:
//! sample pixels (`super::reference` and `super::fast` do, each its own way).

use super::error::PreprocessError;
use super::spec::{ColorOrder, PreprocessSpec, ResizeGeometry, TensorDtype};
use super::taps::AxisTaps;
use crate::frame::FrameMeta;

/// The sampling tables of one (frame size, spec), which a preprocessor keeps while frames of that
/// size come.
#[derive(Debug)]
pub(super) struct SamplingPlan {
    src_width: u32,
    src_height: u32,
    pub(super) spec: PreprocessSpec,
    pub(super) geometry: ResizeGeometry,
    pub(super) x_taps: AxisTaps,
    pub(super) y_taps: AxisTaps,
    /// The pad value after steps 3 and 4 (interleaved channels; pixel values for u8 tensors).
    pub(super) pad: [f32; 3],
}

impl SamplingPlan {
    pub(super) fn new(src_width: u32, src_height: u32, spec: &PreprocessSpec) -> Self {
        let geometry = spec.geometry(src_width, src_height);
        SamplingPlan {
            src_width,
            src_height,
            spec: spec.clone(),
            geometry,
            x_taps: AxisTaps::new(spec.filter, src_width, geometry.content_width),
            y_taps: AxisTaps::new(spec.filter, src_height, geometry.content_height),
            pad: finish_pixel([spec.pad as f32; 3], spec),
        }
    }

    /// Whether the plan is the one for `src_width` × `src_height` frames into `spec`.
    pub(super) fn matches(&self, src_width: u32, src_height: u32, spec: &PreprocessSpec) -> bool {
        self.src_width == src_width && self.src_height == src_height && self.spec == *spec
    }
}

/// Steps 3 (output colour order) and 4 (value) for one RGB pixel, for float tensors; u8 tensors
/// keep the pixel value and round when they store it.
pub(super) fn finish_pixel(rgb: [f32; 3], spec: &PreprocessSpec) -> [f32; 3] {
    let ordered = match spec.color {
        ColorOrder::Rgb => rgb,
        ColorOrder::Bgr => [rgb[2], rgb[1], rgb[0]],
    };
    match spec.dtype {
        TensorDtype::U8 => ordered,
        TensorDtype::F16 | TensorDtype::F32 => [0, 1, 2].map(|c| (ordered[c] - spec.mean[c]) / spec.std[c]),
    }
}

/// Checks that `frame` holds a whole `meta` frame and that `out` is exactly the tensor `spec`
/// describes.
pub(super) fn check_sizes(
    frame: &[u8],
    meta: &FrameMeta,
    spec: &PreprocessSpec,
    out: &[u8],
) -> Result<(), PreprocessError> {
    let format = meta.format.name();
    let needed = meta.format.frame_bytes(meta.width, meta.height).ok_or(PreprocessError::ImpossibleFrameSize {
        format,
        width: meta.width,
        height: meta.height,
    })?;
    if frame.len() < needed {
        return Err(PreprocessError::FrameTooShort {
            format,
            width: meta.width,
            height: meta.height,
            needed,
            actual: frame.len(),
        });
    }
    let expected = (spec.width as usize)
        .checked_mul(spec.height as usize)
        .and_then(|n| n.checked_mul(3 * spec.dtype.bytes()))
        .filter(|n| *n > 0)
        .ok_or(PreprocessError::ImpossibleTensorSize { width: spec.width, height: spec.height })?;
    if out.len() != expected {
        return Err(PreprocessError::OutputLength { expected, actual: out.len() });
    }
    Ok(())
}
