//! The preprocessing contract as a type: which input tensor a model wants, and how a frame fills it.
//!
//! Owns: [`PreprocessSpec`] (also the config's `[model.input]` table, typed once for both) and its
//! vocabulary (layout, dtype, colour order, resize kind and filter). Must not: preprocess (the
//! definition and the implementations are the rest of `crate::preprocess`'s).

use serde::{Deserialize, Serialize};

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

impl TensorDtype {
    /// Bytes of one element.
    pub fn bytes(self) -> usize {
        match self {
            TensorDtype::U8 => 1,
            TensorDtype::F16 => 2,
            TensorDtype::F32 => 4,
        }
    }
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
        self.elements() * self.dtype.bytes()
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

/// Where the source frame lands in the input tensor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResizeGeometry {
    pub src_width: u32,
    pub src_height: u32,
    /// Content size inside the tensor.
    pub content_width: u32,
    pub content_height: u32,
    /// Offset of the content inside the tensor.
    pub pad_x: u32,
    pub pad_y: u32,
}

impl ResizeGeometry {
    pub fn new(resize: ResizeKind, src_width: u32, src_height: u32, in_width: u32, in_height: u32) -> Self {
        match resize {
            ResizeKind::Stretch => ResizeGeometry {
                src_width,
                src_height,
                content_width: in_width,
                content_height: in_height,
                pad_x: 0,
                pad_y: 0,
            },
            ResizeKind::Letterbox => {
                let scale = (in_width as f64 / src_width as f64).min(in_height as f64 / src_height as f64);
                let content_width = ((src_width as f64 * scale).round() as u32).clamp(1, in_width);
                let content_height = ((src_height as f64 * scale).round() as u32).clamp(1, in_height);
                ResizeGeometry {
                    src_width,
                    src_height,
                    content_width,
                    content_height,
                    pad_x: (in_width - content_width) / 2,
                    pad_y: (in_height - content_height) / 2,
                }
            }
        }
    }

    /// Source-frame x of a tensor-space x (in tensor pixels), clamped to the frame.
    pub fn to_source_x(&self, x: f32) -> f32 {
        ((x - self.pad_x as f32) * self.src_width as f32 / self.content_width as f32).clamp(0.0, self.src_width as f32)
    }

    /// Source-frame y of a tensor-space y (in tensor pixels), clamped to the frame.
    pub fn to_source_y(&self, y: f32) -> f32 {
        ((y - self.pad_y as f32) * self.src_height as f32 / self.content_height as f32)
            .clamp(0.0, self.src_height as f32)
    }
}

#[cfg(test)]
impl PreprocessSpec {
    /// The test fixture every backend's tests share: RGB, stretched, no normalisation (pixel values
    /// as they are), pad 114 (used only by letterbox variants made from it).
    pub(crate) fn plain(
        width: u32,
        height: u32,
        layout: TensorLayout,
        dtype: TensorDtype,
        filter: ResizeFilter,
    ) -> PreprocessSpec {
        PreprocessSpec {
            width,
            height,
            layout,
            dtype,
            color: ColorOrder::Rgb,
            resize: ResizeKind::Stretch,
            filter,
            pad: 114,
            mean: [0.0; 3],
            std: [1.0; 3],
            name: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letterbox_centres_a_wide_frame() {
        let g = ResizeGeometry::new(ResizeKind::Letterbox, 1920, 1080, 640, 640);
        assert_eq!((g.content_width, g.content_height, g.pad_x, g.pad_y), (640, 360, 0, 140));
        assert_eq!(g.to_source_y(140.0), 0.0);
        assert_eq!(g.to_source_y(500.0), 1080.0);
        assert_eq!(g.to_source_x(320.0), 960.0);
    }

    #[test]
    fn stretch_maps_corners_to_corners() {
        let g = ResizeGeometry::new(ResizeKind::Stretch, 1280, 720, 300, 300);
        assert_eq!(g.to_source_x(300.0), 1280.0);
        assert_eq!(g.to_source_y(150.0), 360.0);
    }
}
