//! The preprocessing contract as a type: which input tensor a model wants, and how a frame fills it.
//!
//! Owns: [`PreprocessSpec`] (also the config's `[model.input]` table, typed once for both) and its
//! vocabulary (layout, dtype, colour order, resize kind and filter). Must not: preprocess (the
//! definition and the implementations are the rest of `crate::preprocess`'s).

use serde::{Deserialize, Serialize};

use super::ResizeGeometry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TensorLayout {
    Nchw,
    Nhwc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TensorDtype {
    U8,
    F16,
    F32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorOrder {
    Rgb,
    Bgr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResizeKind {
    /// Scale each axis independently to the input size.
    Stretch,
    /// Keep aspect ratio, centre, pad with `pad`.
    Letterbox,
}

/// How source pixels are weighted when the frame is scaled to the content size (step 2 of the
/// definition in `crate::preprocess`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResizeFilter {
    /// Two taps per axis around the half-pixel-centred sample point (OpenCV's `INTER_LINEAR`).
    /// Shrinking by more than 2× skips source pixels and aliases.
    Bilinear,
    /// Triangle filter whose support widens with the downscale factor, so every source pixel
    /// contributes (Pillow's `Image.resize(..., BILINEAR)`); equal to bilinear when enlarging.
    Antialias,
}

/// The input tensor a model wants, and how to fill it from a frame: the config's `[model.input]`
/// table. Output value = (pixel − mean\[c\]) / std\[c\], with pixels in 0..255; u8 tensors take
/// the pixel as is (the module doc of `crate::preprocess` defines every step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreprocessSpec {
    /// Tensor name; default: the model's first input.
    pub name: Option<String>,
    pub width: u32,
    pub height: u32,
    pub layout: TensorLayout,
    pub dtype: TensorDtype,
    pub color: ColorOrder,
    pub resize: ResizeKind,
    /// Resampling filter; the default, `antialias`, is how the bundled SSD model's reference
    /// inputs were made and does not alias when shrinking camera frames.
    pub filter: ResizeFilter,
    /// Letterbox padding value (0..255 pixel units).
    pub pad: u8,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

impl PreprocessSpec {
    /// Elements in the tensor (1 × 3 × H × W).
    pub fn elements(&self) -> usize {
        3 * self.width as usize * self.height as usize
    }

    /// Bytes in the tensor.
    pub fn bytes(&self) -> usize {
        self.elements()
            * match self.dtype {
                TensorDtype::U8 => 1,
                TensorDtype::F16 => 2,
                TensorDtype::F32 => 4,
            }
    }

    /// Tensor shape, batch first.
    pub fn shape(&self) -> [usize; 4] {
        let (h, w) = (self.height as usize, self.width as usize);
        match self.layout {
            TensorLayout::Nchw => [1, 3, h, w],
            TensorLayout::Nhwc => [1, h, w, 3],
        }
    }

    /// The geometry for frames of `src_width` × `src_height`.
    pub fn geometry(&self, src_width: u32, src_height: u32) -> ResizeGeometry {
        ResizeGeometry::new(self.resize, src_width, src_height, self.width, self.height)
    }
}
