//! Frame → input tensor: the preprocessing contract and its CPU reference implementation.
//!
//! Owns: [`PreprocessSpec`] (what tensor the model wants, in [`spec`]: also the config's
//! `[model.input]`) with [`ResizeGeometry`] (letterbox/stretch mapping both ways), the CPU
//! reference implementation ([`CpuPreprocessor`], in [`reference`](mod@reference)) and, in [`fast`], the CPU
//! backend's bit-identical fast path ([`FastPreprocessor`]); what both share: [`taps`] (step 2's
//! weights), [`plan`] (the tables of one frame size, the checks of every run), [`error`]. The
//! fast path's helpers: [`shares`] (rows among threads), [`simd`] (its kernels). The CUDA kernel implements the *same* definition and is tested against
//! this one (≤ 1 LSB). Must not: run models, know about sources, or read the config.
//!
//! The definition both implementations follow, per output pixel `(ox, oy)` and channel `c`:
//! 1. Geometry: stretch uses `scale_x = in_w / src_w`, `scale_y = in_h / src_h`, no padding.
//!    Letterbox uses `s = min(in_w / src_w, in_h / src_h)`, content size `cw = round(src_w·s)`,
//!    `ch = round(src_h·s)` (each at least 1), padding `pad_x = (in_w − cw) / 2`,
//!    `pad_y = (in_h − ch) / 2` (integer division); pixels outside the content get the pad value.
//! 2. Sampling, separable: along each axis every content pixel `i` has taps, source indices
//!    `first .. first + n` with f32 weights `w_k`; the taps are converted to RGB (f32, 0..255)
//!    *before* mixing. Per source row `r` of the y taps, `h_r = Σ_k wx_k · p(first_x + k, r)`, then
//!    `v = Σ_k wy_k · h_(first_y + k)`; both sums start at 0 and add in increasing k, in f32.
//!    `filter = "bilinear"` (half-pixel centres, OpenCV's INTER_LINEAR): `s = (i + 0.5) · src_len /
//!    content_len − 0.5` (f32) clamped to `[0, src_len − 1]`, `first = floor(s)`, `f = s − first`,
//!    weights `(1 − f, f)`, or the single weight `1 − f` (= 1) when `first = src_len − 1`.
//!    `filter = "antialias"` (Pillow's BILINEAR, libImaging/Resample.c `precompute_coeffs`), in f64:
//!    `scale = src_len / content_len`, `support = max(scale, 1)`, `center = (i + 0.5) · scale`,
//!    taps `first = max(0, floor(center − support + 0.5))` up to, excluding,
//!    `min(src_len, floor(center + support + 0.5))`, raw weight
//!    `max(0, 1 − |(j − center + 0.5) · (1 / support)|)` for source index `j`, each divided by
//!    their sum, then rounded to f32. Pillow also rounds to u8 between its horizontal and vertical
//!    passes (and uses 22-bit fixed-point weights); we do not. On the bundled samples the float
//!    intermediate moves the SSD model's scores by at most 0.003 from Pillow's (mimicking the
//!    rounding: 0.001), well inside what matters, and it keeps full precision for f16/f32 tensors.
//! 3. Colour: YUYV and NV12 use BT.601 limited range: `c = 1.164·(Y−16)`,
//!    `R = c + 1.596·(V−128)`, `G = c − 0.392·(U−128) − 0.813·(V−128)`, `B = c + 2.017·(U−128)`,
//!    each clamped to 0..255. YUYV pixel x takes U,V of its pair; NV12 pixel (x, y) takes the UV
//!    pair at (x/2, y/2). RGBA ignores alpha. BGR frames are swapped to RGB first; `color = "bgr"`
//!    swaps the output channels.
//! 4. Value: f32/f16 outputs hold `(v − mean[c]) / std[c]`; u8 outputs hold `round(v)` (half away
//!    from zero) clamped to 0..255. The pad value goes through the same step 4.
//! 5. Layout: NCHW index `c·H·W + y·W + x`, NHWC index `(y·W + x)·3 + c`; batch 1.
//!
//! A [`Roi`] narrows the source to a rectangle of the frame (a detection's crop for a
//! classifier); [`roi`] states how the definition reads it. This file declares and re-exports,
//! and holds the definition.

mod error;
mod fast;
mod plan;
mod reference;
mod roi;
mod shares;
mod simd;
mod spec;
mod taps;

pub use error::PreprocessError;
pub use fast::FastPreprocessor;
pub use reference::{preprocess_cpu, CpuPreprocessor};
pub use roi::{Roi, UnusableRoi};
pub use spec::{ColorOrder, PreprocessSpec, ResizeFilter, ResizeGeometry, ResizeKind, TensorDtype, TensorLayout};
pub use taps::AxisTaps;
