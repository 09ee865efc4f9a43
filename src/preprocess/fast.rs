//! The CPU backend's preprocessing: the parent module's definition computed with the same f32
//! operations in the same order as [`CpuPreprocessor`](super::CpuPreprocessor), so its tensors
//! are bit-identical to the reference's, restructured for speed:
//! - every source pixel is converted once per row (the reference converts it once per tap) to a
//!   4-lane RGB0 pixel, YUV through per-lane tables that hold exactly the reference's products;
//! - the horizontal taps of a content pixel are summed as one 4-lane vector over a window of the
//!   taps' fixed width (unrolled), which the compiler turns into SIMD on every target;
//! - values are normalised and stored a whole row at a time, in loops the compiler vectorises;
//! - the output rows are split into bands that run in parallel on the caller's rayon pool;
//! - on CPUs that have them, the YUYV conversion and the horizontal filter run as explicit SIMD
//!   kernels ([`super::simd`]) with the same operations.
//!
//! Must not: change the definition (the reference is the specification; the tests below prove
//! equality on random and real frames for every format, layout, dtype, resize and filter), or
//! spawn threads of its own.

use std::ops::Range;
use std::sync::LazyLock;

use rayon::prelude::*;

use super::simd::Pixel;
use super::{check_sizes, AxisTaps, PreprocessError, PreprocessSpec, ResizeGeometry};
use crate::config::{ColorOrder, TensorDtype, TensorLayout};
use crate::frame::{FrameMeta, PixelFormat};

/// Preprocesses frames like [`CpuPreprocessor`](super::CpuPreprocessor), faster. Caches the
/// sampling tables for the current (frame size, spec) and one set of row buffers per band, so a
/// steady stream of same-sized frames allocates nothing but the band list.
#[derive(Debug)]
pub struct FastPreprocessor {
    plan: Option<FastPlan>,
    bands: Vec<BandScratch>,
    /// Whether the SIMD kernels run (the CPU has them; tests also run without).
    simd: bool,
}

impl Default for FastPreprocessor {
    fn default() -> Self {
        FastPreprocessor { plan: None, bands: Vec::new(), simd: super::simd::available() }
    }
}

#[derive(Debug)]
struct FastPlan {
    src_width: u32,
    src_height: u32,
    spec: PreprocessSpec,
    geometry: ResizeGeometry,
    x_taps: AxisTaps,
    y_taps: AxisTaps,
    /// Per interleaved element of a content row: the mean and std of its output channel.
    mean_row: Vec<f32>,
    std_row: Vec<f32>,
    /// A row of pad pixels after step 4, in the tensor's encoding: one interleaved row (NHWC) or
    /// one row of each channel plane (NCHW).
    pad_row: Vec<u8>,
    pad_planes: [Vec<u8>; 3],
}

/// One band's row buffers.
#[derive(Debug, Default)]
struct BandScratch {
    /// One source row as RGB f32 with a fourth lane of 0 per pixel, plus zero pixels after it so
    /// that every tap window of the widest width stays in bounds.
    rgbx: Vec<Pixel>,
    /// Horizontally filtered source rows (`3 · content_width` floats each) in a ring as long as
    /// the widest y tap window: source row `r` lives in buffer `r % ring.len()`.
    ring: Vec<Vec<f32>>,
    tags: Vec<Option<usize>>,
    /// One content row: vertical sums, then values after step 4.
    content: Vec<f32>,
    /// One channel of the content row (NCHW) or f16 bits of the row, before encoding.
    channel: Vec<f32>,
    halves: Vec<u16>,
}

/// BT.601 limited-range terms for every byte value, each the same f32 product the reference's
/// `yuv_to_rgb` computes, laid out per lane: a pixel is `clamp(([c; 4] + uv) + gv)` with
/// `uv = u_terms[u] + v_terms[v] = [rv, −gu, bu, 0]` and `gv = [0, −gv, 0, 0]`, which is
/// `R = c + rv`, `G = (c − gu) − gv`, `B = c + bu` bit for bit: adding a zero lane, or a negated
/// term, is exact, and no term is −0.
struct YuvTables {
    c: [f32; 256],
    u_terms: [Pixel; 256],
    v_terms: [Pixel; 256],
    gv: [Pixel; 256],
}

static YUV: LazyLock<YuvTables> = LazyLock::new(|| YuvTables {
    c: std::array::from_fn(|y| 1.164 * (y as f32 - 16.0)),
    u_terms: std::array::from_fn(|u| [0.0, -(0.392 * (u as f32 - 128.0)), 2.017 * (u as f32 - 128.0), 0.0]),
    v_terms: std::array::from_fn(|v| [1.596 * (v as f32 - 128.0), 0.0, 0.0, 0.0]),
    gv: std::array::from_fn(|v| [0.0, -(0.813 * (v as f32 - 128.0)), 0.0, 0.0]),
});

impl YuvTables {
    /// The chroma terms a pair of pixels shares.
    #[inline(always)]
    fn chroma(&self, u: u8, v: u8) -> (Pixel, Pixel) {
        let (u_terms, v_terms) = (self.u_terms[u as usize], self.v_terms[v as usize]);
        (std::array::from_fn(|lane| u_terms[lane] + v_terms[lane]), self.gv[v as usize])
    }

    #[inline(always)]
    fn pixel(&self, y: u8, (uv, gv): (Pixel, Pixel)) -> Pixel {
        let c = self.c[y as usize];
        std::array::from_fn(|lane| ((c + uv[lane]) + gv[lane]).clamp(0.0, 255.0))
    }
}

impl FastPlan {
    fn new(src_width: u32, src_height: u32, spec: &PreprocessSpec) -> Self {
        let geometry = spec.geometry(src_width, src_height);
        let content_len = 3 * geometry.content_width as usize;
        let (mean, std) = match spec.dtype {
            TensorDtype::U8 => ([0.0; 3], [1.0; 3]),
            TensorDtype::F16 | TensorDtype::F32 => (spec.mean, spec.std),
        };
        let pad = super::finish_pixel([spec.pad as f32; 3], spec);
        let width = spec.width as usize;
        let element = element_bytes(spec.dtype);
        let encoded = |values: Vec<f32>| {
            let mut bytes = vec![0; values.len() * element];
            encode(spec.dtype, &values, &mut bytes, &mut Vec::new());
            bytes
        };
        let pad_row = encoded(pad.iter().copied().cycle().take(3 * width).collect());
        let pad_planes = std::array::from_fn(|c| encoded(vec![pad[c]; width]));
        FastPlan {
            src_width,
            src_height,
            spec: spec.clone(),
            geometry,
            x_taps: AxisTaps::new(spec.filter, src_width, geometry.content_width),
            y_taps: AxisTaps::new(spec.filter, src_height, geometry.content_height),
            mean_row: (0..content_len).map(|j| mean[j % 3]).collect(),
            std_row: (0..content_len).map(|j| std[j % 3]).collect(),
            pad_row,
            pad_planes,
        }
    }

    fn matches(&self, src_width: u32, src_height: u32, spec: &PreprocessSpec) -> bool {
        self.src_width == src_width && self.src_height == src_height && self.spec == *spec
    }
}

fn element_bytes(dtype: TensorDtype) -> usize {
    match dtype {
        TensorDtype::U8 => 1,
        TensorDtype::F16 => 2,
        TensorDtype::F32 => 4,
    }
}

/// Step 4's encoding of `values` into `out` (native-endian), as the reference's `store_row`:
/// u8 rounds half away from zero and clamps, f16 rounds to nearest even.
fn encode(dtype: TensorDtype, values: &[f32], out: &mut [u8], halves: &mut Vec<u16>) {
    match dtype {
        TensorDtype::U8 => {
            for (byte, value) in out.iter_mut().zip(values) {
                *byte = round_to_u8(*value);
            }
        }
        TensorDtype::F16 => {
            use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
            halves.resize(values.len(), 0);
            halves.reinterpret_cast_mut::<half::f16>().convert_from_f32_slice(values);
            for (bytes, bits) in out.chunks_exact_mut(2).zip(halves.iter()) {
                bytes.copy_from_slice(&bits.to_ne_bytes());
            }
        }
        TensorDtype::F32 => {
            for (bytes, value) in out.chunks_exact_mut(4).zip(values) {
                bytes.copy_from_slice(&value.to_ne_bytes());
            }
        }
    }
}

/// `value.round().clamp(0.0, 255.0) as u8` without the libm call `round` becomes: clamping first
/// changes nothing for finite values, and on 0..=255 the integer part is exact, so comparing the
/// fraction with 0.5 is rounding half away from zero.
#[inline(always)]
fn round_to_u8(value: f32) -> u8 {
    let clamped = value.clamp(0.0, 255.0);
    let whole = clamped as u8;
    whole + u8::from(clamped - whole as f32 >= 0.5)
}

/// Where one band's output rows go.
enum BandOut<'a> {
    /// Whole interleaved rows.
    Nhwc(&'a mut [u8]),
    /// The band's rows of each channel plane.
    Nchw([&'a mut [u8]; 3]),
}

impl FastPreprocessor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same without the SIMD kernels (same output): what CPUs without them run, for
    /// benchmarks that compare the two.
    pub fn portable() -> Self {
        FastPreprocessor { simd: false, ..Self::default() }
    }

    /// Preprocesses one frame into `out` (exactly [`PreprocessSpec::bytes`] bytes of native-endian
    /// u8 / f16 / f32), bit-identical to [`CpuPreprocessor::run`](super::CpuPreprocessor::run).
    /// With `bands` > 1 the output rows are split into that many bands that run on the current
    /// rayon pool (call it inside the pool that should do the work).
    pub fn run(
        &mut self,
        frame: &[u8],
        meta: &FrameMeta,
        spec: &PreprocessSpec,
        out: &mut [u8],
        bands: usize,
    ) -> Result<(), PreprocessError> {
        check_sizes(frame, meta, spec, out)?;
        if !self.plan.as_ref().is_some_and(|plan| plan.matches(meta.width, meta.height, spec)) {
            self.plan = Some(FastPlan::new(meta.width, meta.height, spec));
        }
        let Some(plan) = self.plan.as_ref() else { return Ok(()) };
        let rows = band_rows(spec.height as usize, &plan.geometry, bands);
        self.bands.resize_with(rows.len(), BandScratch::default);

        let row_bytes = spec.width as usize * element_bytes(spec.dtype);
        let mut outputs = Vec::with_capacity(rows.len());
        match spec.layout {
            TensorLayout::Nhwc => {
                let mut rest = out;
                for band in &rows {
                    let (head, tail) = rest.split_at_mut(band.len() * 3 * row_bytes);
                    outputs.push(BandOut::Nhwc(head));
                    rest = tail;
                }
            }
            TensorLayout::Nchw => {
                let plane_bytes = spec.height as usize * row_bytes;
                let (r, rest) = out.split_at_mut(plane_bytes);
                let (g, b) = rest.split_at_mut(plane_bytes);
                let mut rest = [r, g, b];
                for band in &rows {
                    let [r, g, b] = rest.map(|plane| plane.split_at_mut(band.len() * row_bytes));
                    outputs.push(BandOut::Nchw([r.0, g.0, b.0]));
                    rest = [r.1, g.1, b.1];
                }
            }
        }
        let parallel = self.bands.len() > 1;
        let simd = self.simd;
        let work = self.bands.iter_mut().zip(rows).zip(outputs);
        let run_band = |((scratch, rows), out): ((&mut BandScratch, Range<usize>), BandOut)| {
            scratch.run(plan, frame, meta, rows, out, simd)
        };
        if parallel {
            work.par_bridge().for_each(run_band);
        } else {
            work.for_each(run_band);
        }
        Ok(())
    }
}

/// Splits the output rows `0..height` into at most `bands` ranges with equal shares of content
/// rows (pad rows cost a copy; the leading ones go to the first band, the trailing to the last).
fn band_rows(height: usize, geometry: &ResizeGeometry, bands: usize) -> Vec<Range<usize>> {
    let (pad_y, content) = (geometry.pad_y as usize, geometry.content_height as usize);
    let bands = bands.clamp(1, content.max(1));
    (0..bands)
        .map(|band| {
            let start = if band == 0 { 0 } else { pad_y + content * band / bands };
            let end = if band + 1 == bands { height } else { pad_y + content * (band + 1) / bands };
            start..end
        })
        .collect()
}

impl BandScratch {
    fn run(&mut self, plan: &FastPlan, frame: &[u8], meta: &FrameMeta, rows: Range<usize>, out: BandOut, simd: bool) {
        let spec = &plan.spec;
        let geometry = plan.geometry;
        let content_len = 3 * geometry.content_width as usize;
        let ring = plan.y_taps.stride;
        self.rgbx.clear();
        self.rgbx.resize(meta.width as usize + plan.x_taps.stride, [0.0; 4]);
        self.ring.resize_with(ring, Vec::new);
        for buffer in &mut self.ring {
            buffer.resize(content_len, 0.0);
        }
        // Rows filtered from the previous frame are stale.
        self.tags.clear();
        self.tags.resize(ring, None);
        self.content.resize(content_len, 0.0);

        let element = element_bytes(spec.dtype);
        let (pad_x, pad_y) = (geometry.pad_x as usize, geometry.pad_y as usize);
        let content_height = geometry.content_height as usize;
        let first_row = rows.start;
        let mut out = out;
        for y in rows {
            let local = y - first_row;
            let inside = y >= pad_y && y < pad_y + content_height;
            if inside {
                self.content_row(plan, frame, meta, y - pad_y, simd);
            }
            match &mut out {
                BandOut::Nhwc(rows) => {
                    let row_len = plan.pad_row.len();
                    let row = &mut rows[local * row_len..(local + 1) * row_len];
                    row.copy_from_slice(&plan.pad_row);
                    if inside {
                        let start = 3 * pad_x * element;
                        encode(
                            spec.dtype,
                            &self.content,
                            &mut row[start..start + content_len * element],
                            &mut self.halves,
                        );
                    }
                }
                BandOut::Nchw(planes) => {
                    for (c, plane) in planes.iter_mut().enumerate() {
                        let row_len = plan.pad_planes[c].len();
                        let row = &mut plane[local * row_len..(local + 1) * row_len];
                        row.copy_from_slice(&plan.pad_planes[c]);
                        if inside {
                            self.channel.clear();
                            self.channel.extend(self.content.iter().skip(c).step_by(3));
                            let start = pad_x * element;
                            let end = start + self.channel.len() * element;
                            encode(spec.dtype, &self.channel, &mut row[start..end], &mut self.halves);
                        }
                    }
                }
            }
        }
    }

    /// Steps 2 (vertical half), 3 (output order) and 4 (value) for content row `row`, into
    /// `self.content`.
    fn content_row(&mut self, plan: &FastPlan, frame: &[u8], meta: &FrameMeta, row: usize, simd: bool) {
        let (first, weights) = plan.y_taps.taps(row);
        self.content.fill(0.0);
        for (k, weight) in weights.iter().enumerate() {
            let source_row = first + k;
            let slot = source_row % self.ring.len();
            if self.tags[slot] != Some(source_row) {
                convert_row(frame, meta, source_row, &mut self.rgbx, simd);
                filter_row(&plan.x_taps, &self.rgbx, &mut self.ring[slot], simd);
                self.tags[slot] = Some(source_row);
            }
            for (sum, value) in self.content.iter_mut().zip(&self.ring[slot]) {
                *sum += weight * value;
            }
        }
        if plan.spec.color == ColorOrder::Bgr {
            for pixel in self.content.chunks_exact_mut(3) {
                pixel.swap(0, 2);
            }
        }
        if plan.spec.dtype != TensorDtype::U8 {
            for ((value, mean), std) in self.content.iter_mut().zip(&plan.mean_row).zip(&plan.std_row) {
                *value = (*value - mean) / std;
            }
        }
    }
}

/// Step 3's conversion of source row `y` to RGB f32 pixels (the frame length has been checked
/// against the format, so every index is in bounds).
fn convert_row(frame: &[u8], meta: &FrameMeta, y: usize, rgbx: &mut [Pixel], simd: bool) {
    let width = meta.width as usize;
    let rgbx = &mut rgbx[..width];
    let rgb = |r: u8, g: u8, b: u8| [r as f32, g as f32, b as f32, 0.0];
    match meta.format {
        PixelFormat::Rgb8 => {
            for (dst, src) in rgbx.iter_mut().zip(frame[y * width * 3..(y + 1) * width * 3].chunks_exact(3)) {
                *dst = rgb(src[0], src[1], src[2]);
            }
        }
        PixelFormat::Bgr8 => {
            for (dst, src) in rgbx.iter_mut().zip(frame[y * width * 3..(y + 1) * width * 3].chunks_exact(3)) {
                *dst = rgb(src[2], src[1], src[0]);
            }
        }
        PixelFormat::Rgba8 => {
            for (dst, src) in rgbx.iter_mut().zip(frame[y * width * 4..(y + 1) * width * 4].chunks_exact(4)) {
                *dst = rgb(src[0], src[1], src[2]);
            }
        }
        PixelFormat::Yuyv => {
            let yuv = &*YUV;
            let row = &frame[y * width * 2..(y + 1) * width * 2];
            let done = if simd { super::simd::yuyv_row(row, rgbx) } else { 0 };
            for (dst, src) in rgbx[done..].chunks_exact_mut(2).zip(row[2 * done..].chunks_exact(4)) {
                let chroma = yuv.chroma(src[1], src[3]);
                dst[0] = yuv.pixel(src[0], chroma);
                dst[1] = yuv.pixel(src[2], chroma);
            }
        }
        PixelFormat::Nv12 => {
            let yuv = &*YUV;
            let luma = &frame[y * width..(y + 1) * width];
            let chroma_start = width * meta.height as usize + (y / 2) * width;
            let chroma = &frame[chroma_start..chroma_start + width];
            for ((dst, luma), uv) in rgbx.chunks_exact_mut(2).zip(luma.chunks_exact(2)).zip(chroma.chunks_exact(2)) {
                let chroma = yuv.chroma(uv[0], uv[1]);
                dst[0] = yuv.pixel(luma[0], chroma);
                dst[1] = yuv.pixel(luma[1], chroma);
            }
        }
    }
}

/// Step 2's horizontal half for one converted row: every content pixel's taps summed in order, R,
/// G and B side by side in one 4-lane sum. Windows are the taps' full stride: the weights past a
/// pixel's own taps are 0 and add exactly nothing (every product is +0, no sum is −0), and the
/// row has zero pixels after its end for the windows that reach past it.
fn filter_row(taps: &AxisTaps, rgbx: &[Pixel], out: &mut [f32], simd: bool) {
    match taps.stride {
        1 => filter_row_fixed::<1>(taps, rgbx, out, simd),
        2 => filter_row_fixed::<2>(taps, rgbx, out, simd),
        3 => filter_row_fixed::<3>(taps, rgbx, out, simd),
        4 => filter_row_fixed::<4>(taps, rgbx, out, simd),
        5 => filter_row_fixed::<5>(taps, rgbx, out, simd),
        6 => filter_row_fixed::<6>(taps, rgbx, out, simd),
        7 => filter_row_fixed::<7>(taps, rgbx, out, simd),
        8 => filter_row_fixed::<8>(taps, rgbx, out, simd),
        _ => {
            for ((mixed, first), weights) in
                out.chunks_exact_mut(3).zip(&taps.first).zip(taps.weights.chunks_exact(taps.stride))
            {
                let window = &rgbx[*first as usize..*first as usize + taps.stride];
                mixed.copy_from_slice(&weighted_sum(window, weights)[..3]);
            }
        }
    }
}

/// [`filter_row`] for windows of exactly `N` taps, unrolled (after the SIMD kernel's pixels).
fn filter_row_fixed<const N: usize>(taps: &AxisTaps, rgbx: &[Pixel], out: &mut [f32], simd: bool) {
    let done = if simd { super::simd::filter_row::<N>(&taps.first, &taps.weights, rgbx, out) } else { 0 };
    let pixels = out.chunks_exact_mut(3).zip(&taps.first).zip(taps.weights.chunks_exact(N)).skip(done);
    for ((mixed, first), weights) in pixels {
        let first = *first as usize;
        let (Some(window), Ok(weights)) = (rgbx.get(first..first + N), <&[f32; N]>::try_from(weights)) else {
            continue;
        };
        mixed.copy_from_slice(&weighted_sum(window, weights)[..3]);
    }
}

#[inline(always)]
fn weighted_sum(window: &[Pixel], weights: &[f32]) -> Pixel {
    let mut sum = [0.0f32; 4];
    for (pixel, weight) in window.iter().zip(weights) {
        for lane in 0..4 {
            sum[lane] += weight * pixel[lane];
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::SystemTime;

    use super::*;
    use crate::config::{ResizeFilter, ResizeKind};
    use crate::preprocess::CpuPreprocessor;

    const FORMATS: [PixelFormat; 5] =
        [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];

    fn meta(width: u32, height: u32, format: PixelFormat) -> FrameMeta {
        FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH }
    }

    /// Every combination of the spec's discrete choices, with the given size and a mean/std that
    /// makes float outputs non-trivial.
    fn every_spec(width: u32, height: u32) -> Vec<PreprocessSpec> {
        let mut specs = Vec::new();
        for layout in [TensorLayout::Nchw, TensorLayout::Nhwc] {
            for dtype in [TensorDtype::U8, TensorDtype::F16, TensorDtype::F32] {
                for resize in [ResizeKind::Stretch, ResizeKind::Letterbox] {
                    for filter in [ResizeFilter::Bilinear, ResizeFilter::Antialias] {
                        for color in [ColorOrder::Rgb, ColorOrder::Bgr] {
                            let float = dtype != TensorDtype::U8;
                            specs.push(PreprocessSpec {
                                width,
                                height,
                                layout,
                                dtype,
                                color,
                                resize,
                                filter,
                                pad: 114,
                                mean: if float { [123.675, 116.28, 103.53] } else { [0.0; 3] },
                                std: if float { [58.395, 57.12, 57.375] } else { [1.0; 3] },
                            });
                        }
                    }
                }
            }
        }
        specs
    }

    fn noise(seed: &mut u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (*seed >> 24) as u8
            })
            .collect()
    }

    /// Runs the reference and the fast path (with 1 and 3 bands on a 2-thread pool, with the
    /// SIMD kernels where the CPU has them and without) and requires identical bytes.
    fn assert_identical(frame: &[u8], meta: &FrameMeta, spec: &PreprocessSpec, pool: &rayon::ThreadPool) {
        let mut expected = vec![0; spec.bytes()];
        CpuPreprocessor::new().run(frame, meta, spec, &mut expected).expect("reference");
        for mut fast in [FastPreprocessor::new(), FastPreprocessor::portable()] {
            for bands in [1, 3] {
                let mut actual = vec![0xA5; spec.bytes()];
                pool.install(|| fast.run(frame, meta, spec, &mut actual, bands)).expect("fast path");
                assert!(
                    actual == expected,
                    "{:?} {}x{} → {spec:?}, {bands} bands, simd {}: first difference at byte {:?}",
                    meta.format,
                    meta.width,
                    meta.height,
                    fast.simd,
                    actual.iter().zip(&expected).position(|(a, e)| a != e)
                );
            }
        }
    }

    fn pool() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("thread pool")
    }

    #[test]
    fn random_frames_match_the_reference_bit_for_bit() {
        let pool = pool();
        let mut seed = 0x5eed_u32;
        // Shrinking (both filters widen differently), enlarging, odd sizes, a letterbox of each
        // orientation, and the same size.
        let sizes = [(64, 36, 23, 17), (10, 6, 31, 29), (6, 14, 9, 9), (98, 62, 12, 14), (16, 8, 16, 8), (2, 2, 5, 3)];
        for format in FORMATS {
            for &(sw, sh, tw, th) in &sizes {
                let frame = noise(&mut seed, format.frame_bytes(sw, sh).expect("frame size"));
                for spec in every_spec(tw, th) {
                    assert_identical(&frame, &meta(sw, sh, format), &spec, &pool);
                }
            }
        }
    }

    /// A 96x64 crop (the dog's head: edges and texture) of a decoded sample in `format`, small
    /// enough for unoptimised test builds under qemu: RGB as is, reordered, with alpha, or
    /// converted to YUV (BT.601 limited range, the inverse of the definition's step 3, rounded).
    fn sample_frame(format: PixelFormat) -> (Vec<u8>, FrameMeta) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples/dog.jpg");
        let image = image::open(path).expect("decode sample").to_rgb8();
        let (width, height) = (96, 64);
        let (left, top) = (200, 250);
        let image = image::imageops::crop_imm(&image, left, top, width, height).to_image();
        let rgb = |x: u32, y: u32| image.get_pixel(x, y).0.map(f32::from);
        let yuv = |[r, g, b]: [f32; 3]| {
            let y = 16.0 + 0.257 * r + 0.504 * g + 0.098 * b;
            let u = 128.0 - 0.148 * r - 0.291 * g + 0.439 * b;
            let v = 128.0 + 0.439 * r - 0.368 * g - 0.071 * b;
            [y, u, v].map(|value| value.round().clamp(0.0, 255.0) as u8)
        };
        let mut frame = Vec::new();
        match format {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 | PixelFormat::Rgba8 => {
                for y in 0..height {
                    for x in 0..width {
                        let [r, g, b] = image.get_pixel(x, y).0;
                        match format {
                            PixelFormat::Rgb8 => frame.extend_from_slice(&[r, g, b]),
                            PixelFormat::Bgr8 => frame.extend_from_slice(&[b, g, r]),
                            _ => frame.extend_from_slice(&[r, g, b, 255]),
                        }
                    }
                }
            }
            PixelFormat::Yuyv => {
                for y in 0..height {
                    for x in (0..width).step_by(2) {
                        let [y0, u, v] = yuv(rgb(x, y));
                        let [y1, ..] = yuv(rgb(x + 1, y));
                        frame.extend_from_slice(&[y0, u, y1, v]);
                    }
                }
            }
            PixelFormat::Nv12 => {
                for y in 0..height {
                    for x in 0..width {
                        frame.push(yuv(rgb(x, y))[0]);
                    }
                }
                for y in (0..height).step_by(2) {
                    for x in (0..width).step_by(2) {
                        let [_, u, v] = yuv(rgb(x, y));
                        frame.extend_from_slice(&[u, v]);
                    }
                }
            }
        }
        (frame, meta(width, height, format))
    }

    #[test]
    fn real_frames_match_the_reference_bit_for_bit() {
        let pool = pool();
        for (i, format) in FORMATS.into_iter().enumerate() {
            let (frame, meta) = sample_frame(format);
            // Shrinking by an odd factor, or enlarging, every combination of the rest.
            let (width, height) = if i % 2 == 0 { (31, 23) } else { (120, 90) };
            for spec in every_spec(width, height) {
                assert_identical(&frame, &meta, &spec, &pool);
            }
        }
    }

    #[test]
    fn bands_share_the_content_rows_and_cover_every_row_once() {
        let letterbox = ResizeGeometry::new(ResizeKind::Letterbox, 1920, 1080, 640, 640);
        assert_eq!(band_rows(640, &letterbox, 3), [0..260, 260..380, 380..640]);
        let whole = band_rows(640, &letterbox, 1);
        assert_eq!((whole.len(), whole[0].clone()), (1, 0..640));
        let tiny = ResizeGeometry::new(ResizeKind::Stretch, 10, 10, 4, 2);
        assert_eq!(band_rows(2, &tiny, 8), [0..1, 1..2], "no more bands than content rows");
    }

    #[test]
    fn errors_are_the_references() {
        let spec = every_spec(2, 2).remove(0);
        let mut out = vec![0; spec.bytes()];
        let frame = [0; 11];
        let meta = meta(2, 2, PixelFormat::Rgb8);
        assert_eq!(
            FastPreprocessor::new().run(&frame, &meta, &spec, &mut out, 1),
            CpuPreprocessor::new().run(&frame, &meta, &spec, &mut out)
        );
    }

    #[test]
    fn u8_rounding_matches_round_then_clamp() {
        for value in [-3.0, -0.5, -0.2, 0.0, 0.49999997, 0.5, 1.5, 2.5, 254.49998, 254.5, 255.0, 300.0] {
            assert_eq!(round_to_u8(value), value.round().clamp(0.0, 255.0) as u8, "{value}");
        }
        let mut value = 0.0f32;
        while value <= 256.0 {
            assert_eq!(round_to_u8(value), value.round().clamp(0.0, 255.0) as u8, "{value}");
            value = f32::from_bits(value.to_bits() + 997);
        }
    }
}
