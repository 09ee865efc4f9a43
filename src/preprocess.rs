//! Frame → input tensor: the preprocessing contract and its CPU reference implementation.
//!
//! Owns: [`PreprocessSpec`] (what tensor the model wants), [`ResizeGeometry`] (letterbox/stretch
//! mapping both ways), and the CPU implementation. The CUDA kernel implements the *same* definition
//! and is tested against this one (≤ 1 LSB). Must not: run models or know about sources.
//!
//! The definition both implementations follow, per output pixel `(ox, oy)` and channel `c`:
//! 1. Geometry: stretch uses `scale_x = in_w / src_w`, `scale_y = in_h / src_h`, no padding.
//!    Letterbox uses `s = min(in_w / src_w, in_h / src_h)`, content size `cw = round(src_w·s)`,
//!    `ch = round(src_h·s)` (each at least 1), padding `pad_x = (in_w − cw) / 2`,
//!    `pad_y = (in_h − ch) / 2` (integer division); pixels outside the content get the pad value.
//! 2. Sampling (bilinear, half-pixel centres): `sx = (ox − pad_x + 0.5) · src_w / cw − 0.5`,
//!    clamped to `[0, src_w − 1]` (same for y). Neighbours `x0 = floor(sx)`, `x1 = min(x0 + 1, src_w − 1)`,
//!    weights `fx = sx − x0`; the four neighbours are converted to RGB (f32, 0..255) *before* mixing:
//!    `v = (1−fy)·((1−fx)·p00 + fx·p01) + fy·((1−fx)·p10 + fx·p11)`.
//! 3. Colour: YUYV and NV12 use BT.601 limited range: `c = 1.164·(Y−16)`,
//!    `R = c + 1.596·(V−128)`, `G = c − 0.392·(U−128) − 0.813·(V−128)`, `B = c + 2.017·(U−128)`,
//!    each clamped to 0..255. YUYV pixel x takes U,V of its pair; NV12 pixel (x, y) takes the UV
//!    pair at (x/2, y/2). RGBA ignores alpha. BGR frames are swapped to RGB first; `color = "bgr"`
//!    swaps the output channels.
//! 4. Value: f32/f16 outputs hold `(v − mean[c]) / std[c]`; u8 outputs hold `round(v)` (half away
//!    from zero) clamped to 0..255. The pad value goes through the same step 4.
//! 5. Layout: NCHW index `c·H·W + y·W + x`, NHWC index `(y·W + x)·3 + c`; batch 1.

use crate::config::{ColorOrder, InputConfig, ResizeKind, TensorDtype, TensorLayout};

/// The input tensor a model wants, and how to fill it from a frame.
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessSpec {
    pub width: u32,
    pub height: u32,
    pub layout: TensorLayout,
    pub dtype: TensorDtype,
    pub color: ColorOrder,
    pub resize: ResizeKind,
    pub pad: u8,
    pub mean: [f32; 3],
    pub std: [f32; 3],
}

impl From<&InputConfig> for PreprocessSpec {
    fn from(input: &InputConfig) -> Self {
        PreprocessSpec {
            width: input.width,
            height: input.height,
            layout: input.layout,
            dtype: input.dtype,
            color: input.color,
            resize: input.resize,
            pad: input.pad,
            mean: input.mean,
            std: input.std,
        }
    }
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
mod geometry_tests {
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
