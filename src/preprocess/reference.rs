//! The CPU reference implementation of the definition in [`super`]: the numbers the fast path and
//! the CUDA kernel are tested against.
//!
//! Owns: [`CpuPreprocessor`] (row by row, each source row sampled once into a ring of rows) and
//! [`preprocess_cpu`]. Must not: trade exactness for speed (the fast path does that, and must
//! still match it bit for bit).

use super::error::PreprocessError;
use super::plan::{check_sizes, finish_pixel, SamplingPlan};
use super::roi::Roi;
use super::spec::{PreprocessSpec, TensorDtype, TensorLayout};
use super::taps::AxisTaps;
use crate::frame::{FrameMeta, PixelFormat};

/// Preprocesses one frame into `out` (exactly [`PreprocessSpec::bytes`] bytes of native-endian
/// u8 / f16 / f32). Allocates its sampling tables on every call: pipelines keep a
/// [`CpuPreprocessor`] instead.
pub fn preprocess_cpu(
    frame: &[u8],
    meta: &FrameMeta,
    spec: &PreprocessSpec,
    out: &mut [u8],
) -> Result<(), PreprocessError> {
    CpuPreprocessor::new().run(frame, meta, spec, out)
}

/// The CPU implementation of the module's definition. It caches the sampling tables for the
/// current (frame size, spec) and its row buffers, so a steady stream of same-sized frames
/// allocates nothing.
#[derive(Debug, Default)]
pub struct CpuPreprocessor {
    plan: Option<SamplingPlan>,
    /// A full output row of pad values (interleaved channels, after step 4), for the plan.
    pad_row: Vec<f32>,
    rows: SourceRows,
    /// One output row in interleaved channel order, after step 4 for float tensors.
    out_row: Vec<f32>,
}

/// Horizontally filtered RGB of the source rows the current output row needs (`3 · content_width`
/// floats each), in a ring: source row `r` lives in buffer `r % buffers.len()`, and the ring is as
/// long as the widest y tap window, so one window never evicts its own rows.
#[derive(Debug, Default)]
struct SourceRows {
    buffers: Vec<Vec<f32>>,
    /// The source row each buffer holds for the current frame.
    tags: Vec<Option<usize>>,
}

/// BT.601 limited range, each channel clamped to 0..255.
fn yuv_to_rgb(y: u8, u: u8, v: u8) -> [f32; 3] {
    let c = 1.164 * (y as f32 - 16.0);
    let d = u as f32 - 128.0;
    let e = v as f32 - 128.0;
    [
        (c + 1.596 * e).clamp(0.0, 255.0),
        (c - 0.392 * d - 0.813 * e).clamp(0.0, 255.0),
        (c + 2.017 * d).clamp(0.0, 255.0),
    ]
}

/// Horizontal half of step 2 for one source row: mixes the taps of every content pixel, each
/// converted to RGB first, into `out` (3 floats per content pixel).
fn mix_row(taps: &AxisTaps, out: &mut [f32], pixel: impl Fn(usize) -> [f32; 3]) {
    for (i, mixed) in out.chunks_exact_mut(3).enumerate() {
        let (first, weights) = taps.taps(i);
        let mut sum = [0.0f32; 3];
        for (k, weight) in weights.iter().enumerate() {
            let p = pixel(first + k);
            for c in 0..3 {
                sum[c] += weight * p[c];
            }
        }
        mixed.copy_from_slice(&sum);
    }
}

/// Fills `out` with the horizontally filtered RGB of frame row `y`, whose source pixel `i` is
/// frame pixel `x0 + i`. The frame length and the ROI have been checked against the format, so
/// every index below is in bounds.
fn sample_source_row(frame: &[u8], meta: &FrameMeta, y: usize, x0: usize, taps: &AxisTaps, out: &mut [f32]) {
    let width = meta.width as usize;
    match meta.format {
        PixelFormat::Rgb8 => {
            let row = &frame[y * width * 3..(y + 1) * width * 3];
            mix_row(taps, out, |i| {
                let x = x0 + i;
                [row[3 * x] as f32, row[3 * x + 1] as f32, row[3 * x + 2] as f32]
            });
        }
        PixelFormat::Bgr8 => {
            let row = &frame[y * width * 3..(y + 1) * width * 3];
            mix_row(taps, out, |i| {
                let x = x0 + i;
                [row[3 * x + 2] as f32, row[3 * x + 1] as f32, row[3 * x] as f32]
            });
        }
        PixelFormat::Rgba8 => {
            let row = &frame[y * width * 4..(y + 1) * width * 4];
            mix_row(taps, out, |i| {
                let x = x0 + i;
                [row[4 * x] as f32, row[4 * x + 1] as f32, row[4 * x + 2] as f32]
            });
        }
        PixelFormat::Yuyv => {
            let row = &frame[y * width * 2..(y + 1) * width * 2];
            mix_row(taps, out, |i| {
                let x = x0 + i;
                let pair = 4 * (x / 2);
                yuv_to_rgb(row[2 * x], row[pair + 1], row[pair + 3])
            });
        }
        PixelFormat::Nv12 => {
            let luma = &frame[y * width..(y + 1) * width];
            let chroma_start = width * meta.height as usize + (y / 2) * width;
            let chroma = &frame[chroma_start..chroma_start + width];
            mix_row(taps, out, |i| {
                let x = x0 + i;
                let pair = 2 * (x / 2);
                yuv_to_rgb(luma[x], chroma[pair], chroma[pair + 1])
            });
        }
    }
}

/// Step 5 for one output row `y` of values in interleaved channel order.
fn store_row(row: &[f32], y: usize, spec: &PreprocessSpec, out: &mut [u8]) {
    match spec.dtype {
        TensorDtype::U8 => store_row_as(row, y, spec, out, |v| [v.round().clamp(0.0, 255.0) as u8]),
        TensorDtype::F16 => store_row_as(row, y, spec, out, |v| half::f16::from_f32(v).to_ne_bytes()),
        TensorDtype::F32 => store_row_as(row, y, spec, out, f32::to_ne_bytes),
    }
}

fn store_row_as<const N: usize>(
    row: &[f32],
    y: usize,
    spec: &PreprocessSpec,
    out: &mut [u8],
    encode: impl Fn(f32) -> [u8; N],
) {
    let (width, height) = (spec.width as usize, spec.height as usize);
    match spec.layout {
        TensorLayout::Nhwc => {
            let start = y * width * 3 * N;
            let dst = &mut out[start..start + width * 3 * N];
            for (value, bytes) in row.iter().zip(dst.chunks_exact_mut(N)) {
                bytes.copy_from_slice(&encode(*value));
            }
        }
        TensorLayout::Nchw => {
            for c in 0..3 {
                let start = (c * height + y) * width * N;
                let dst = &mut out[start..start + width * N];
                for (pixel, bytes) in row.chunks_exact(3).zip(dst.chunks_exact_mut(N)) {
                    bytes.copy_from_slice(&encode(pixel[c]));
                }
            }
        }
    }
}

impl CpuPreprocessor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Preprocesses one frame into `out` (exactly [`PreprocessSpec::bytes`] bytes of native-endian
    /// u8 / f16 / f32), following the module's definition.
    pub fn run(
        &mut self,
        frame: &[u8],
        meta: &FrameMeta,
        spec: &PreprocessSpec,
        out: &mut [u8],
    ) -> Result<(), PreprocessError> {
        self.run_roi(frame, meta, Roi::full(meta), spec, out)
    }

    /// [`CpuPreprocessor::run`] with `roi` of the frame as the source.
    pub fn run_roi(
        &mut self,
        frame: &[u8],
        meta: &FrameMeta,
        roi: Roi,
        spec: &PreprocessSpec,
        out: &mut [u8],
    ) -> Result<(), PreprocessError> {
        check_sizes(frame, meta, spec, out)?;
        roi.check(meta)?;
        if !self.plan.as_ref().is_some_and(|plan| plan.matches(roi.width, roi.height, spec)) {
            let plan = SamplingPlan::new(roi.width, roi.height, spec);
            self.pad_row = plan.pad.iter().copied().cycle().take(3 * spec.width as usize).collect();
            self.plan = Some(plan);
        }
        let Some(plan) = self.plan.as_ref() else { return Ok(()) };
        let ring = plan.y_taps.stride;
        let row_len = 3 * plan.geometry.content_width as usize;
        self.rows.buffers.resize_with(ring, Vec::new);
        for buffer in &mut self.rows.buffers {
            buffer.resize(row_len, 0.0);
        }
        // Rows sampled from the previous frame are stale.
        self.rows.tags.clear();
        self.rows.tags.resize(ring, None);
        self.out_row.resize(3 * spec.width as usize, 0.0);

        let geometry = plan.geometry;
        let (pad_y, content_height) = (geometry.pad_y as usize, geometry.content_height as usize);
        let content_cols = 3 * geometry.pad_x as usize..3 * (geometry.pad_x + geometry.content_width) as usize;
        for y in 0..spec.height as usize {
            if y < pad_y || y >= pad_y + content_height {
                store_row(&self.pad_row, y, spec, out);
                continue;
            }
            let (first, weights) = plan.y_taps.taps(y - pad_y);
            self.out_row.copy_from_slice(&self.pad_row);
            let content = &mut self.out_row[content_cols.clone()];
            content.fill(0.0);
            for (k, weight) in weights.iter().enumerate() {
                let row = self.rows.load(first + k, frame, meta, roi, &plan.x_taps);
                for (sum, value) in content.iter_mut().zip(row) {
                    *sum += weight * value;
                }
            }
            for pixel in content.chunks_exact_mut(3) {
                let finished = finish_pixel([pixel[0], pixel[1], pixel[2]], spec);
                pixel.copy_from_slice(&finished);
            }
            store_row(&self.out_row, y, spec, out);
        }
        Ok(())
    }
}

impl SourceRows {
    /// The horizontally filtered source row `y` of `roi`, sampled now unless its ring buffer holds it.
    fn load(&mut self, y: usize, frame: &[u8], meta: &FrameMeta, roi: Roi, x_taps: &AxisTaps) -> &[f32] {
        let slot = y % self.buffers.len();
        if self.tags[slot] != Some(y) {
            let (frame_y, x0) = (roi.y as usize + y, roi.x as usize);
            sample_source_row(frame, meta, frame_y, x0, x_taps, &mut self.buffers[slot]);
            self.tags[slot] = Some(y);
        }
        &self.buffers[slot]
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;
    use crate::preprocess::spec::{ColorOrder, ResizeFilter, ResizeKind};
    use std::time::SystemTime;

    fn meta(width: u32, height: u32, format: PixelFormat) -> FrameMeta {
        FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH }
    }

    fn spec(width: u32, height: u32, layout: TensorLayout, dtype: TensorDtype) -> PreprocessSpec {
        PreprocessSpec::plain(width, height, layout, dtype, ResizeFilter::Bilinear)
    }

    fn run_u8(frame: &[u8], meta: &FrameMeta, spec: &PreprocessSpec) -> Vec<u8> {
        let mut out = vec![0; spec.bytes()];
        preprocess_cpu(frame, meta, spec, &mut out).expect("preprocess");
        out
    }

    fn run_f32(frame: &[u8], meta: &FrameMeta, spec: &PreprocessSpec) -> Vec<f32> {
        let mut out = vec![0; spec.bytes()];
        preprocess_cpu(frame, meta, spec, &mut out).expect("preprocess");
        out.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect()
    }

    fn nhwc_u8(width: u32, height: u32) -> PreprocessSpec {
        spec(width, height, TensorLayout::Nhwc, TensorDtype::U8)
    }

    #[test]
    fn rgb_upscale_interpolates_with_half_pixel_centres() {
        // sx = ox/2 − 0.25 → clamped 0, 0.25, 0.75, clamped 1.
        let frame = [0, 0, 0, 100, 200, 40];
        let out = run_u8(&frame, &meta(2, 1, PixelFormat::Rgb8), &nhwc_u8(4, 1));
        assert_eq!(out, [0, 0, 0, 25, 50, 10, 75, 150, 30, 100, 200, 40]);
    }

    #[test]
    fn u8_rounds_half_away_from_zero() {
        // The middle output pixel samples at sx = 0.5 exactly: 0.5, 1.5, 2.5.
        let frame = [0, 0, 0, 1, 3, 5];
        let out = run_u8(&frame, &meta(2, 1, PixelFormat::Rgb8), &nhwc_u8(3, 1));
        assert_eq!(&out[3..6], [1, 2, 3]);
    }

    #[test]
    fn bgr_and_rgba_frames_read_as_rgb() {
        let rgb = [0, 0, 0, 100, 200, 40];
        let expected = run_u8(&rgb, &meta(2, 1, PixelFormat::Rgb8), &nhwc_u8(4, 1));
        let bgr = [0, 0, 0, 40, 200, 100];
        assert_eq!(run_u8(&bgr, &meta(2, 1, PixelFormat::Bgr8), &nhwc_u8(4, 1)), expected);
        let rgba = [0, 0, 0, 7, 100, 200, 40, 255];
        assert_eq!(run_u8(&rgba, &meta(2, 1, PixelFormat::Rgba8), &nhwc_u8(4, 1)), expected);
    }

    // BT.601 limited range, worked by hand:
    // Y=81 U=90 V=240:  c = 75.66  → R 254.412, G −0.5 → 0, B −0.986 → 0    ⇒ (254, 0, 0)
    // Y=145 U=90 V=240: c = 150.156 → R 328.9 → 255, G 73.996, B 73.51       ⇒ (255, 74, 74)
    // Y=16 U=90 V=240:  c = 0       → R 178.752, G → 0, B → 0               ⇒ (179, 0, 0)
    // Y=235 U=90 V=240: c = 254.916 → R → 255, G 178.756, B 178.27          ⇒ (255, 179, 178)
    // Y=81 U=V=128:     grey 75.66                                           ⇒ (76, 76, 76)

    #[test]
    fn yuyv_converts_bt601_limited_range() {
        let frame = [81, 90, 145, 240];
        let out = run_u8(&frame, &meta(2, 1, PixelFormat::Yuyv), &nhwc_u8(2, 1));
        assert_eq!(out, [254, 0, 0, 255, 74, 74]);
    }

    #[test]
    fn yuyv_pixels_take_the_chroma_of_their_pair() {
        let frame = [81, 128, 81, 128, 81, 90, 81, 240];
        let out = run_u8(&frame, &meta(4, 1, PixelFormat::Yuyv), &nhwc_u8(4, 1));
        assert_eq!(out, [76, 76, 76, 76, 76, 76, 254, 0, 0, 254, 0, 0]);
    }

    #[test]
    fn yuv_neighbours_are_converted_before_mixing() {
        // Mixing the two RGB pixels gives (254.706, 36.998, 36.755) → (255, 37, 37); mixing YUV
        // first would give Y=113 → (255, 37, 36).
        let frame = [81, 90, 145, 240];
        let out = run_u8(&frame, &meta(2, 1, PixelFormat::Yuyv), &nhwc_u8(1, 1));
        assert_eq!(out, [255, 37, 37]);
    }

    #[test]
    fn nv12_converts_bt601_limited_range() {
        let frame = [81, 145, 16, 235, 90, 240];
        let out = run_u8(&frame, &meta(2, 2, PixelFormat::Nv12), &nhwc_u8(2, 2));
        assert_eq!(out, [254, 0, 0, 255, 74, 74, 179, 0, 0, 255, 179, 178]);
    }

    #[test]
    fn nv12_pixels_take_the_chroma_at_half_resolution() {
        // 4x4: the chroma plane has two rows of two UV pairs; only the bottom-right pair is red.
        let mut frame = vec![81; 16];
        frame.extend_from_slice(&[128, 128, 128, 128, 128, 128, 90, 240]);
        let out = run_u8(&frame, &meta(4, 4, PixelFormat::Nv12), &nhwc_u8(4, 4));
        for y in 0..4 {
            for x in 0..4 {
                let expected: [u8; 3] = if x >= 2 && y >= 2 { [254, 0, 0] } else { [76, 76, 76] };
                let i = (y * 4 + x) * 3;
                assert_eq!(out[i..i + 3], expected, "pixel ({x}, {y})");
            }
        }
    }

    #[test]
    fn stretch_to_the_same_size_is_an_exact_copy() {
        let frame: Vec<u8> = (0..5 * 3 * 3).map(|i| (i * 37 % 256) as u8).collect();
        assert_eq!(run_u8(&frame, &meta(5, 3, PixelFormat::Rgb8), &nhwc_u8(5, 3)), frame);
    }

    #[test]
    fn letterbox_pads_rows_of_a_wide_frame() {
        let frame: Vec<u8> = (0..4 * 2 * 3).map(|i| i as u8 * 10).collect();
        let mut spec = nhwc_u8(4, 4);
        spec.resize = ResizeKind::Letterbox;
        let out = run_u8(&frame, &meta(4, 2, PixelFormat::Rgb8), &spec);
        assert_eq!(out[..12], [114; 12], "top pad row");
        assert_eq!(out[12..36], frame[..], "content rows are a copy");
        assert_eq!(out[36..], [114; 12], "bottom pad row");
    }

    #[test]
    fn letterbox_pads_columns_of_a_tall_frame_after_normalising() {
        let frame: Vec<u8> = (0..2 * 4 * 3).map(|i| i as u8).collect();
        let mut spec = spec(4, 4, TensorLayout::Nhwc, TensorDtype::F32);
        spec.resize = ResizeKind::Letterbox;
        spec.mean = [14.0, 0.0, 114.0];
        spec.std = [2.0, 1.0, 4.0];
        let out = run_f32(&frame, &meta(2, 4, PixelFormat::Rgb8), &spec);
        let pad = [50.0, 114.0, 0.0];
        for y in 0..4 {
            let row = &out[y * 12..(y + 1) * 12];
            assert_eq!(row[..3], pad, "left pad of row {y}");
            assert_eq!(row[9..], pad, "right pad of row {y}");
            let src = &frame[y * 6..y * 6 + 3];
            let expected = [0, 1, 2].map(|c| (src[c] as f32 - spec.mean[c]) / spec.std[c]);
            assert_eq!(row[3..6], expected, "first content pixel of row {y}");
        }
    }

    #[test]
    fn nchw_and_nhwc_order_elements_differently() {
        let frame = [1, 2, 3, 4, 5, 6];
        let m = meta(2, 1, PixelFormat::Rgb8);
        assert_eq!(run_u8(&frame, &m, &nhwc_u8(2, 1)), [1, 2, 3, 4, 5, 6]);
        assert_eq!(run_u8(&frame, &m, &spec(2, 1, TensorLayout::Nchw, TensorDtype::U8)), [1, 4, 2, 5, 3, 6]);
    }

    #[test]
    fn float_outputs_apply_mean_and_std() {
        let frame = [10, 20, 30];
        let m = meta(1, 1, PixelFormat::Rgb8);
        let mut spec = spec(1, 1, TensorLayout::Nchw, TensorDtype::F32);
        spec.mean = [1.0, 2.0, 3.0];
        spec.std = [2.0, 4.0, 8.0];
        assert_eq!(run_f32(&frame, &m, &spec), [4.5, 4.5, 3.375]);

        spec.dtype = TensorDtype::F16;
        let mut out = vec![0; spec.bytes()];
        preprocess_cpu(&frame, &m, &spec, &mut out).expect("preprocess");
        let values: Vec<f32> = out.chunks_exact(2).map(|b| half::f16::from_ne_bytes([b[0], b[1]]).to_f32()).collect();
        assert_eq!(values, [4.5, 4.5, 3.375]);
    }

    #[test]
    fn bgr_colour_order_swaps_output_channels_before_normalising() {
        let frame = [10, 20, 30];
        let mut spec = spec(1, 1, TensorLayout::Nhwc, TensorDtype::F32);
        spec.color = ColorOrder::Bgr;
        spec.mean = [1.0, 2.0, 3.0];
        assert_eq!(run_f32(&frame, &meta(1, 1, PixelFormat::Rgb8), &spec), [29.0, 18.0, 7.0]);
        spec.dtype = TensorDtype::U8;
        spec.mean = [0.0; 3];
        assert_eq!(run_u8(&frame, &meta(1, 1, PixelFormat::Rgb8), &spec), [30, 20, 10]);
    }

    #[test]
    fn bad_sizes_are_errors() {
        let spec = nhwc_u8(2, 2);
        let mut out = vec![0; spec.bytes()];
        assert_eq!(
            preprocess_cpu(&[0; 11], &meta(2, 2, PixelFormat::Rgb8), &spec, &mut out),
            Err(PreprocessError::FrameTooShort { format: "rgb", width: 2, height: 2, needed: 12, actual: 11 })
        );
        assert_eq!(
            preprocess_cpu(&[0; 5], &meta(2, 2, PixelFormat::Nv12), &spec, &mut out),
            Err(PreprocessError::FrameTooShort { format: "nv12", width: 2, height: 2, needed: 6, actual: 5 })
        );
        assert_eq!(
            preprocess_cpu(&[0; 64], &meta(3, 2, PixelFormat::Yuyv), &spec, &mut out),
            Err(PreprocessError::ImpossibleFrameSize { format: "yuyv", width: 3, height: 2 })
        );
        assert_eq!(
            preprocess_cpu(&[0; 12], &meta(2, 2, PixelFormat::Rgb8), &spec, &mut out[..11]),
            Err(PreprocessError::OutputLength { expected: 12, actual: 11 })
        );
        assert_eq!(
            preprocess_cpu(&[0; 12], &meta(2, 2, PixelFormat::Rgb8), &nhwc_u8(0, 2), &mut []),
            Err(PreprocessError::ImpossibleTensorSize { width: 0, height: 2 })
        );
    }

    fn antialias_u8(width: u32, height: u32) -> PreprocessSpec {
        PreprocessSpec { filter: ResizeFilter::Antialias, ..nhwc_u8(width, height) }
    }

    #[test]
    fn antialias_keeps_a_constant_image_constant() {
        for (sw, sh, tw, th) in [(1920, 1080, 300, 300), (37, 11, 5, 7), (3, 2, 11, 9), (640, 480, 640, 480)] {
            let frame: Vec<u8> = [77, 140, 200].repeat((sw * sh) as usize);
            let out = run_u8(&frame, &meta(sw, sh, PixelFormat::Rgb8), &antialias_u8(tw, th));
            assert_eq!(out, [77, 140, 200].repeat((tw * th) as usize), "{sw}x{sh} → {tw}x{th}");
        }
    }

    #[test]
    fn antialias_halving_matches_pillow() {
        // scale 2, support 2. Output 0: centre 1, taps 0..3 with raw weights 0.75, 0.75, 0.25
        // → 3/7, 3/7, 1/7; output 1: centre 3, taps 1..4 → 1/7, 3/7, 3/7.
        // Red: 0·3/7 + 70·3/7 + 140/7 = 50; 70/7 + 140·3/7 + 210·3/7 = 160.
        let frame = [0, 0, 0, 70, 7, 1, 140, 14, 2, 210, 21, 3];
        let out = run_u8(&frame, &meta(4, 1, PixelFormat::Rgb8), &antialias_u8(2, 1));
        assert_eq!(out, [50, 5, 1, 160, 16, 2]);
        // Pillow 11: Image.fromarray(row).resize((2, 1), Image.BILINEAR) on a 5-pixel row.
        let frame = [0, 10, 20, 100, 110, 120, 30, 40, 50, 255, 255, 255, 9, 9, 9];
        let out = run_u8(&frame, &meta(5, 1, PixelFormat::Rgb8), &antialias_u8(2, 1));
        assert_eq!(out, [59, 69, 78, 119, 121, 124]);
    }

    /// The module's definition evaluated literally, per output element, for comparison with the
    /// row-cached implementation.
    fn literal_definition(frame: &[u8], meta: &FrameMeta, spec: &PreprocessSpec) -> Vec<f32> {
        let g = spec.geometry(meta.width, meta.height);
        let (w, h) = (meta.width as usize, meta.height as usize);
        let pixel = |x: usize, y: usize| -> [f32; 3] {
            let rgb = |i: usize| [frame[i] as f32, frame[i + 1] as f32, frame[i + 2] as f32];
            match meta.format {
                PixelFormat::Rgb8 => rgb((y * w + x) * 3),
                PixelFormat::Bgr8 => {
                    let [b, g, r] = rgb((y * w + x) * 3);
                    [r, g, b]
                }
                PixelFormat::Rgba8 => rgb((y * w + x) * 4),
                PixelFormat::Yuyv => {
                    let pair = (y * w + x / 2 * 2) * 2;
                    yuv_to_rgb(frame[(y * w + x) * 2], frame[pair + 1], frame[pair + 3])
                }
                PixelFormat::Nv12 => {
                    let uv = w * h + (y / 2) * w + (x / 2) * 2;
                    yuv_to_rgb(frame[y * w + x], frame[uv], frame[uv + 1])
                }
            }
        };
        let tap = |o: u32, pad: u32, content: u32, src: u32| {
            let s = ((o as f32 - pad as f32 + 0.5) * src as f32 / content as f32 - 0.5).clamp(0.0, (src - 1) as f32);
            let i0 = s.floor() as usize;
            (i0, (i0 + 1).min(src as usize - 1), s - s.floor())
        };
        let antialias_taps = |i: u32, content: u32, src: u32| -> (usize, Vec<f32>) {
            let scale = src as f64 / content as f64;
            let support = scale.max(1.0);
            let center = (i as f64 + 0.5) * scale;
            let first = (center - support + 0.5).floor().max(0.0) as usize;
            let end = ((center + support + 0.5).floor() as usize).min(src as usize);
            let raw: Vec<f64> =
                (first..end).map(|j| (1.0 - ((j as f64 - center + 0.5) * (1.0 / support)).abs()).max(0.0)).collect();
            let sum: f64 = raw.iter().sum();
            (first, raw.iter().map(|w| (w / sum) as f32).collect())
        };
        let (tw, th) = (spec.width as usize, spec.height as usize);
        let mut out = vec![0.0; 3 * tw * th];
        for oy in 0..spec.height {
            for ox in 0..spec.width {
                let inside = (g.pad_x..g.pad_x + g.content_width).contains(&ox)
                    && (g.pad_y..g.pad_y + g.content_height).contains(&oy);
                let rgb = if inside && spec.filter == ResizeFilter::Antialias {
                    let (x0, wx) = antialias_taps(ox - g.pad_x, g.content_width, meta.width);
                    let (y0, wy) = antialias_taps(oy - g.pad_y, g.content_height, meta.height);
                    let mut v = [0.0f32; 3];
                    for (ky, weight_y) in wy.iter().enumerate() {
                        let mut h = [0.0f32; 3];
                        for (kx, weight_x) in wx.iter().enumerate() {
                            let p = pixel(x0 + kx, y0 + ky);
                            for c in 0..3 {
                                h[c] += weight_x * p[c];
                            }
                        }
                        for c in 0..3 {
                            v[c] += weight_y * h[c];
                        }
                    }
                    v
                } else if inside {
                    let (x0, x1, fx) = tap(ox, g.pad_x, g.content_width, meta.width);
                    let (y0, y1, fy) = tap(oy, g.pad_y, g.content_height, meta.height);
                    let (p00, p01, p10, p11) = (pixel(x0, y0), pixel(x1, y0), pixel(x0, y1), pixel(x1, y1));
                    [0, 1, 2].map(|c| {
                        (1.0 - fy) * ((1.0 - fx) * p00[c] + fx * p01[c]) + fy * ((1.0 - fx) * p10[c] + fx * p11[c])
                    })
                } else {
                    [spec.pad as f32; 3]
                };
                let value = finish_pixel(rgb, spec);
                for (c, v) in value.iter().enumerate() {
                    let (x, y) = (ox as usize, oy as usize);
                    let index = match spec.layout {
                        TensorLayout::Nchw => c * th * tw + y * tw + x,
                        TensorLayout::Nhwc => (y * tw + x) * 3 + c,
                    };
                    out[index] = *v;
                }
            }
        }
        out
    }

    #[test]
    fn row_cached_implementation_equals_the_literal_definition() {
        let mut seed = 0x2545_f491_u32;
        let mut noise = move || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 24) as u8
        };
        let mut preprocessor = CpuPreprocessor::new();
        let formats = [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];
        let sizes = [(38, 22, 17, 13), (10, 6, 31, 29), (64, 48, 20, 20), (6, 14, 9, 9), (98, 62, 12, 14)];
        for (filter, (i, format)) in [ResizeFilter::Bilinear, ResizeFilter::Antialias]
            .into_iter()
            .flat_map(|f| formats.into_iter().enumerate().map(move |e| (f, e)))
        {
            for (j, &(sw, sh, tw, th)) in sizes.iter().enumerate() {
                let frame: Vec<u8> = (0..format.frame_bytes(sw, sh).expect("size")).map(|_| noise()).collect();
                let mut spec = spec(tw, th, TensorLayout::Nchw, TensorDtype::F32);
                spec.resize = if (i + j) % 2 == 0 { ResizeKind::Letterbox } else { ResizeKind::Stretch };
                spec.layout = if j % 2 == 0 { TensorLayout::Nchw } else { TensorLayout::Nhwc };
                spec.color = if i % 2 == 0 { ColorOrder::Rgb } else { ColorOrder::Bgr };
                spec.filter = filter;
                spec.mean = [123.7, 116.3, 103.5];
                spec.std = [58.4, 57.1, 57.4];
                let m = meta(sw, sh, format);
                let expected = literal_definition(&frame, &m, &spec);
                let mut out = vec![0; spec.bytes()];
                preprocessor.run(&frame, &m, &spec, &mut out).expect("preprocess");
                let actual: Vec<f32> =
                    out.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect();
                assert_eq!(actual, expected, "{format:?} {sw}x{sh} → {tw}x{th} {:?} {filter:?}", spec.resize);

                spec.dtype = TensorDtype::U8;
                spec.mean = [0.0; 3];
                spec.std = [1.0; 3];
                let rounded: Vec<u8> =
                    literal_definition(&frame, &m, &spec).iter().map(|v| v.round().clamp(0.0, 255.0) as u8).collect();
                let mut out = vec![0; spec.bytes()];
                preprocessor.run(&frame, &m, &spec, &mut out).expect("preprocess");
                assert_eq!(out, rounded, "u8 {format:?} {sw}x{sh} → {tw}x{th} {filter:?}");
            }
        }
    }
}
