//! The CPU backend's preprocessing: the parent module's definition computed with the same f32
//! operations in the same order as [`CpuPreprocessor`](super::reference::CpuPreprocessor), so its tensors
//! are bit-identical to the reference's, restructured for speed:
//! - every source pixel is converted once per row (the reference converts it once per tap) to a
//!   4-lane RGB pixel (its fourth lane unread), YUV through per-lane tables that hold exactly the
//!   reference's products;
//! - the horizontal taps of a content pixel are summed as one 4-lane vector over a window of the
//!   taps' fixed width (unrolled), which the compiler turns into SIMD on every target;
//! - the vertical taps of a content row are summed a row at a time once all its source rows are
//!   filtered; values are normalised, split into channel planes and stored a whole row at a time,
//!   in loops the compiler vectorises; pad pixels are copied from a ready-made encoded row;
//! - the output rows are split into chunks that the caller and its rayon pool's threads share
//!   out ([`super::shares`]): each takes its own run of consecutive chunks, then helps with the
//!   longest run left, so a thread that starts late does not hold up the frame;
//! - on CPUs that have them (AVX2, NEON), the YUYV conversion, both filters, the normalisation
//!   and the channel split run as explicit SIMD kernels ([`super::simd`]) with the same
//!   operations, and the portable code finishes each row.
//!
//! Must not: change the definition (the reference is the specification; the tests below prove
//! equality on random and real frames for every format, layout, dtype, resize and filter), or
//! spawn threads of its own.

use std::ops::Range;
use std::sync::LazyLock;

use rayon::prelude::*;

use super::error::PreprocessError;
use super::plan::{check_sizes, SamplingPlan};
use super::shares::Shares;
use super::simd::{Kernels, Packed, Pixel};
use super::spec::{ColorOrder, PreprocessSpec, ResizeGeometry, TensorDtype, TensorLayout};
use super::taps::AxisTaps;
use crate::frame::{FrameMeta, PixelFormat};

/// Preprocesses frames like [`CpuPreprocessor`](super::reference::CpuPreprocessor), faster. Caches the
/// sampling tables for the current (frame size, spec) and one set of row buffers per participating
/// thread, so a steady stream of same-sized frames allocates nothing but each frame's chunk lists.
#[derive(Debug)]
pub struct FastPreprocessor {
    plan: Option<FastPlan>,
    scratch: Vec<BandScratch>,
    /// The SIMD kernels this CPU has (tests and benchmarks also run the portable set).
    kernels: Kernels,
}

impl Default for FastPreprocessor {
    fn default() -> Self {
        FastPreprocessor { plan: None, scratch: Vec::new(), kernels: Kernels::detect() }
    }
}

/// The shared [`SamplingPlan`] and what the fast path adds to it: step 4's mean and std laid out
/// per row element, and the pad row already encoded.
#[derive(Debug)]
struct FastPlan {
    sampling: SamplingPlan,
    /// Per interleaved element of a content row: the mean and std of its output channel.
    mean_row: Vec<f32>,
    std_row: Vec<f32>,
    /// A row of pad pixels after step 4, in the tensor's encoding: one interleaved row (NHWC) or
    /// one row of each channel plane (NCHW).
    pad_row: Vec<u8>,
    pad_planes: [Vec<u8>; 3],
}

/// One participating thread's row buffers, for the bands of rows (chunks) it runs one after another.
#[derive(Debug, Default)]
struct BandScratch {
    /// One source row as RGB f32 (a fourth, unread lane per pixel), plus zero pixels after it so
    /// that every tap window of the widest width stays in bounds.
    rgbx: Vec<Pixel>,
    /// Horizontally filtered source rows (`3 · content_width` floats each) in a ring as long as
    /// the widest y tap window: source row `r` lives in buffer `r % ring.len()`.
    ring: Vec<Vec<f32>>,
    tags: Vec<Option<usize>>,
    /// The ring buffers of the current content row's taps, in tap order.
    slots: Vec<usize>,
    /// One content row: vertical sums, then values after step 4.
    content: Vec<f32>,
    /// The content row's channels (NCHW), and f16 bits of a row, before encoding.
    channels: [Vec<f32>; 3],
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
        let sampling = SamplingPlan::new(src_width, src_height, spec);
        let content_len = 3 * sampling.geometry.content_width as usize;
        let (mean, std) = match spec.dtype {
            TensorDtype::U8 => ([0.0; 3], [1.0; 3]),
            TensorDtype::F16 | TensorDtype::F32 => (spec.mean, spec.std),
        };
        let pad = sampling.pad;
        let width = spec.width as usize;
        let element = spec.dtype.bytes();
        let encoded = |values: Vec<f32>| {
            let mut bytes = vec![0; values.len() * element];
            encode(spec.dtype, &values, &mut bytes, &mut Vec::new(), Kernels::PORTABLE);
            bytes
        };
        let pad_row = encoded(pad.iter().copied().cycle().take(3 * width).collect());
        let pad_planes = std::array::from_fn(|c| encoded(vec![pad[c]; width]));
        FastPlan {
            sampling,
            mean_row: (0..content_len).map(|j| mean[j % 3]).collect(),
            std_row: (0..content_len).map(|j| std[j % 3]).collect(),
            pad_row,
            pad_planes,
        }
    }

    fn matches(&self, src_width: u32, src_height: u32, spec: &PreprocessSpec) -> bool {
        self.sampling.matches(src_width, src_height, spec)
    }
}

/// Step 4's encoding of `values` into `out` (native-endian), as the reference's `store_row`:
/// u8 rounds half away from zero and clamps (the SIMD kernel where there is one), f16 rounds to nearest even (the SIMD kernel where
/// there is one, else `half`'s slice conversion, both the instruction `half::f16::from_f32` uses).
fn encode(dtype: TensorDtype, values: &[f32], out: &mut [u8], halves: &mut Vec<u16>, kernels: Kernels) {
    match dtype {
        TensorDtype::U8 => {
            let done = kernels.u8_row(values, out);
            for (byte, value) in out[done..].iter_mut().zip(&values[done..]) {
                *byte = round_to_u8(*value);
            }
        }
        TensorDtype::F16 => {
            use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
            let done = kernels.f16_row(values, out);
            let (values, out) = (&values[done..], &mut out[2 * done..]);
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
        FastPreprocessor { kernels: Kernels::PORTABLE, ..Self::default() }
    }

    /// The kernel set it runs: "avx2", "neon" or "portable".
    pub fn kernels(&self) -> &'static str {
        self.kernels.name()
    }

    /// Preprocesses one frame into `out` (exactly [`PreprocessSpec::bytes`] bytes of native-endian
    /// u8 / f16 / f32), bit-identical to [`CpuPreprocessor::run`](super::reference::CpuPreprocessor::run).
    /// With `threads` > 1 the output rows are shared out among that many tasks of the current
    /// rayon pool (call it inside the pool that should do the work).
    pub fn run(
        &mut self,
        frame: &[u8],
        meta: &FrameMeta,
        spec: &PreprocessSpec,
        out: &mut [u8],
        threads: usize,
    ) -> Result<(), PreprocessError> {
        self.run_shared(frame, meta, spec, out, threads, None)
    }

    /// [`run`](Self::run) shared out between the calling thread and every thread of `pool`: the
    /// caller starts on its own rows while each pool thread is handed its task straight. Unlike
    /// calling `run` inside the pool, the caller works instead of waiting, and no pool thread has
    /// to wake first to hand the work on (measured: that hand-over was most of what a worker's
    /// preprocessing cost over its uncontended time after an inference).
    pub fn run_beside(
        &mut self,
        pool: &rayon::ThreadPool,
        frame: &[u8],
        meta: &FrameMeta,
        spec: &PreprocessSpec,
        out: &mut [u8],
    ) -> Result<(), PreprocessError> {
        self.run_shared(frame, meta, spec, out, pool.current_num_threads() + 1, Some(pool))
    }

    /// Runs the frame as `participants` tasks (the first on the calling thread where `beside` is
    /// given, the others on its threads; else all on the current pool) that share out its chunks.
    fn run_shared(
        &mut self,
        frame: &[u8],
        meta: &FrameMeta,
        spec: &PreprocessSpec,
        out: &mut [u8],
        participants: usize,
        beside: Option<&rayon::ThreadPool>,
    ) -> Result<(), PreprocessError> {
        check_sizes(frame, meta, spec, out)?;
        if !self.plan.as_ref().is_some_and(|plan| plan.matches(meta.width, meta.height, spec)) {
            self.plan = Some(FastPlan::new(meta.width, meta.height, spec));
        }
        let Some(plan) = self.plan.as_ref() else { return Ok(()) };
        let participants = participants.max(1);
        let chunks = if participants == 1 { 1 } else { participants * CHUNKS_PER_PARTICIPANT };
        let rows = band_rows(spec.height as usize, &plan.sampling.geometry, chunks);
        self.scratch.resize_with(participants, BandScratch::default);

        let row_bytes = spec.width as usize * spec.dtype.bytes();
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
        let kernels = self.kernels;
        let shares = Shares::new(rows.into_iter().zip(outputs).collect(), participants);
        let participate = |participant: usize, scratch: &mut BandScratch| {
            scratch.begin_frame(plan, meta);
            while let Some((rows, out)) = shares.next(participant) {
                scratch.run(plan, frame, meta, rows, out, kernels);
            }
        };
        let participate = &participate;
        match (beside, self.scratch.split_first_mut()) {
            (_, None) => {}
            (_, Some((only, []))) => participate(0, only),
            (Some(pool), Some((caller, helpers))) => pool.in_place_scope(|scope| {
                for (index, scratch) in helpers.iter_mut().enumerate() {
                    scope.spawn(move |_| participate(index + 1, scratch));
                }
                participate(0, caller);
            }),
            (None, Some(_)) => {
                self.scratch.par_iter_mut().enumerate().for_each(|(index, scratch)| participate(index, scratch));
            }
        }
        Ok(())
    }
}

/// Chunks of output rows per participating thread: enough that the others can take over most of
/// a late thread's run, few enough that the lock taken per chunk costs nothing measurable.
const CHUNKS_PER_PARTICIPANT: usize = 4;

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
    /// Sizes the buffers for `plan` and forgets the rows filtered from the previous frame; the
    /// rows filtered for one chunk serve the next chunk of the same frame.
    fn begin_frame(&mut self, plan: &FastPlan, meta: &FrameMeta) {
        let content_width = plan.sampling.geometry.content_width as usize;
        let content_len = 3 * content_width;
        let ring = plan.sampling.y_taps.stride;
        self.rgbx.clear();
        self.rgbx.resize(meta.width as usize + plan.sampling.x_taps.stride, [0.0; 4]);
        self.ring.resize_with(ring, Vec::new);
        for buffer in &mut self.ring {
            buffer.resize(content_len, 0.0);
        }
        // Rows filtered from the previous frame are stale.
        self.tags.clear();
        self.tags.resize(ring, None);
        self.content.resize(content_len, 0.0);
        if plan.sampling.spec.layout == TensorLayout::Nchw {
            for channel in &mut self.channels {
                channel.resize(content_width, 0.0);
            }
        }
    }

    /// Runs output rows `rows` into `out`, after [`begin_frame`](Self::begin_frame) for this frame.
    fn run(
        &mut self,
        plan: &FastPlan,
        frame: &[u8],
        meta: &FrameMeta,
        rows: Range<usize>,
        out: BandOut,
        kernels: Kernels,
    ) {
        let spec = &plan.sampling.spec;
        let geometry = plan.sampling.geometry;
        let (pad_x, pad_y) = (geometry.pad_x as usize, geometry.pad_y as usize);
        let (content_width, content_height) = (geometry.content_width as usize, geometry.content_height as usize);
        let content_len = 3 * content_width;
        let element = spec.dtype.bytes();
        let first_row = rows.start;
        let mut out = out;
        for y in rows {
            let local = y - first_row;
            let inside = y >= pad_y && y < pad_y + content_height;
            if inside {
                self.content_row(plan, frame, meta, y - pad_y, kernels);
            }
            match &mut out {
                BandOut::Nhwc(rows) => {
                    let row_len = plan.pad_row.len();
                    let row = &mut rows[local * row_len..(local + 1) * row_len];
                    if inside {
                        let (left, rest) = row.split_at_mut(3 * pad_x * element);
                        let (content, right) = rest.split_at_mut(content_len * element);
                        left.copy_from_slice(&plan.pad_row[..left.len()]);
                        right.copy_from_slice(&plan.pad_row[..right.len()]);
                        encode(spec.dtype, &self.content, content, &mut self.halves, kernels);
                    } else {
                        row.copy_from_slice(&plan.pad_row);
                    }
                }
                BandOut::Nchw(planes) => {
                    if inside {
                        let [red, green, blue] = &mut self.channels;
                        deinterleave(&self.content, [red, green, blue], kernels);
                    }
                    for (c, plane) in planes.iter_mut().enumerate() {
                        let row_len = plan.pad_planes[c].len();
                        let row = &mut plane[local * row_len..(local + 1) * row_len];
                        if inside {
                            let (left, rest) = row.split_at_mut(pad_x * element);
                            let (content, right) = rest.split_at_mut(content_width * element);
                            left.copy_from_slice(&plan.pad_planes[c][..left.len()]);
                            right.copy_from_slice(&plan.pad_planes[c][..right.len()]);
                            encode(spec.dtype, &self.channels[c], content, &mut self.halves, kernels);
                        } else {
                            row.copy_from_slice(&plan.pad_planes[c]);
                        }
                    }
                }
            }
        }
    }

    /// Steps 2 (vertical half), 3 (output order) and 4 (value) for content row `row`, into
    /// `self.content`.
    fn content_row(&mut self, plan: &FastPlan, frame: &[u8], meta: &FrameMeta, row: usize, kernels: Kernels) {
        let (first, weights) = plan.sampling.y_taps.taps(row);
        // The ring is as long as the widest window, so the window's rows have distinct slots.
        self.slots.clear();
        for source_row in first..first + weights.len() {
            let slot = source_row % self.ring.len();
            if self.tags[slot] != Some(source_row) {
                convert_row(frame, meta, source_row, &mut self.rgbx, kernels);
                filter_row(&plan.sampling.x_taps, &self.rgbx, &mut self.ring[slot], kernels);
                self.tags[slot] = Some(source_row);
            }
            self.slots.push(slot);
        }
        vertical_row(&self.ring, &self.slots, weights, &mut self.content, kernels);
        if plan.sampling.spec.color == ColorOrder::Bgr {
            for pixel in self.content.chunks_exact_mut(3) {
                pixel.swap(0, 2);
            }
        }
        if plan.sampling.spec.dtype != TensorDtype::U8 {
            normalise(&mut self.content, &plan.mean_row, &plan.std_row, kernels);
        }
    }
}

/// Step 2's vertical half for one content row: `out[j] = Σ_k weights[k] · rows[slots[k]][j]`,
/// summed from 0 in tap order (every row at least as long as `out`).
fn vertical_row(rows: &[Vec<f32>], slots: &[usize], weights: &[f32], out: &mut [f32], kernels: Kernels) {
    let done = kernels.vertical_row(rows, slots, weights, out);
    let rest = &mut out[done..];
    rest.fill(0.0);
    for (&slot, weight) in slots.iter().zip(weights) {
        for (sum, value) in rest.iter_mut().zip(&rows[slot][done..]) {
            *sum += weight * value;
        }
    }
}

/// Step 4 for float tensors: `(value − mean) / std` per element.
fn normalise(values: &mut [f32], mean: &[f32], std: &[f32], kernels: Kernels) {
    let done = kernels.normalise(values, mean, std);
    for ((value, mean), std) in values[done..].iter_mut().zip(&mean[done..]).zip(&std[done..]) {
        *value = (*value - mean) / std;
    }
}

/// Splits interleaved RGB values into the three channels (NCHW's planes), as many pixels as the
/// channels hold.
fn deinterleave(rgb: &[f32], channels: [&mut [f32]; 3], kernels: Kernels) {
    let [red, green, blue] = channels;
    let done = kernels.deinterleave(rgb, [&mut *red, &mut *green, &mut *blue]);
    for (c, channel) in [red, green, blue].into_iter().enumerate() {
        for (value, pixel) in channel[done..].iter_mut().zip(rgb[3 * done..].chunks_exact(3)) {
            *value = pixel[c];
        }
    }
}

/// Step 3's conversion of source row `y` to RGB f32 pixels (the frame length has been checked
/// against the format, so every index is in bounds).
fn convert_row(frame: &[u8], meta: &FrameMeta, y: usize, rgbx: &mut [Pixel], kernels: Kernels) {
    let width = meta.width as usize;
    let rgbx = &mut rgbx[..width];
    let rgb = |r: u8, g: u8, b: u8| [r as f32, g as f32, b as f32, 0.0];
    let packed = |packed: Packed, rgbx: &mut [Pixel]| {
        let row = &frame[y * width * packed.bytes()..(y + 1) * width * packed.bytes()];
        let done = kernels.packed_row(packed, row, rgbx);
        (row[done * packed.bytes()..].chunks_exact(packed.bytes()), done)
    };
    match meta.format {
        PixelFormat::Rgb8 => {
            let (rest, done) = packed(Packed::Rgb, rgbx);
            for (dst, src) in rgbx[done..].iter_mut().zip(rest) {
                *dst = rgb(src[0], src[1], src[2]);
            }
        }
        PixelFormat::Bgr8 => {
            let (rest, done) = packed(Packed::Bgr, rgbx);
            for (dst, src) in rgbx[done..].iter_mut().zip(rest) {
                *dst = rgb(src[2], src[1], src[0]);
            }
        }
        PixelFormat::Rgba8 => {
            let (rest, done) = packed(Packed::Rgba, rgbx);
            for (dst, src) in rgbx[done..].iter_mut().zip(rest) {
                *dst = rgb(src[0], src[1], src[2]);
            }
        }
        PixelFormat::Yuyv => {
            let yuv = &*YUV;
            let row = &frame[y * width * 2..(y + 1) * width * 2];
            let done = kernels.yuyv_row(row, rgbx);
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
            let done = kernels.nv12_row(luma, chroma, rgbx);
            let rest =
                rgbx[done..].chunks_exact_mut(2).zip(luma[done..].chunks_exact(2)).zip(chroma[done..].chunks_exact(2));
            for ((dst, luma), uv) in rest {
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
fn filter_row(taps: &AxisTaps, rgbx: &[Pixel], out: &mut [f32], kernels: Kernels) {
    match taps.stride {
        1 => filter_row_fixed::<1>(taps, rgbx, out, kernels),
        2 => filter_row_fixed::<2>(taps, rgbx, out, kernels),
        3 => filter_row_fixed::<3>(taps, rgbx, out, kernels),
        4 => filter_row_fixed::<4>(taps, rgbx, out, kernels),
        5 => filter_row_fixed::<5>(taps, rgbx, out, kernels),
        6 => filter_row_fixed::<6>(taps, rgbx, out, kernels),
        7 => filter_row_fixed::<7>(taps, rgbx, out, kernels),
        8 => filter_row_fixed::<8>(taps, rgbx, out, kernels),
        9 => filter_row_fixed::<9>(taps, rgbx, out, kernels),
        10 => filter_row_fixed::<10>(taps, rgbx, out, kernels),
        11 => filter_row_fixed::<11>(taps, rgbx, out, kernels),
        12 => filter_row_fixed::<12>(taps, rgbx, out, kernels),
        13 => filter_row_fixed::<13>(taps, rgbx, out, kernels),
        14 => filter_row_fixed::<14>(taps, rgbx, out, kernels),
        15 => filter_row_fixed::<15>(taps, rgbx, out, kernels),
        16 => filter_row_fixed::<16>(taps, rgbx, out, kernels),
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
fn filter_row_fixed<const N: usize>(taps: &AxisTaps, rgbx: &[Pixel], out: &mut [f32], kernels: Kernels) {
    let done = kernels.filter_row::<N>(&taps.first, &taps.weights, rgbx, out);
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
    use crate::preprocess::reference::CpuPreprocessor;
    use crate::preprocess::spec::{ResizeFilter, ResizeKind};

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
                                name: None,
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

    /// Runs the reference and the fast path (on 1 and 3 threads of a 2-thread pool, and beside it,
    /// with the SIMD kernels where the CPU has them and without) and requires identical bytes.
    fn assert_identical(frame: &[u8], meta: &FrameMeta, spec: &PreprocessSpec, pool: &rayon::ThreadPool) {
        let mut expected = vec![0; spec.bytes()];
        CpuPreprocessor::new().run(frame, meta, spec, &mut expected).expect("reference");
        for mut fast in [FastPreprocessor::new(), FastPreprocessor::portable()] {
            // 1 and 3 tasks inside the pool, and 3 beside it (the caller and the pool's 2).
            for (threads, beside) in [(1, false), (3, false), (3, true)] {
                let mut actual = vec![0xA5; spec.bytes()];
                if beside {
                    fast.run_beside(pool, frame, meta, spec, &mut actual).expect("fast path");
                } else {
                    pool.install(|| fast.run(frame, meta, spec, &mut actual, threads)).expect("fast path");
                }
                assert!(
                    actual == expected,
                    "{:?} {}x{} → {spec:?}, {threads} threads (beside the pool: {beside}), {} kernels: first difference at byte {:?}",
                    meta.format,
                    meta.width,
                    meta.height,
                    fast.kernels(),
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

    /// One of the pool's two threads is busy elsewhere for the whole frame, so its task starts
    /// late (after the other's) or finds nothing left: the rows it did not run are the others'.
    #[test]
    fn a_busy_pool_thread_leaves_its_rows_to_the_others() {
        let pool = pool();
        let (started, wait_started) = std::sync::mpsc::channel();
        let (release, wait_release) = std::sync::mpsc::channel::<()>();
        pool.spawn(move || {
            started.send(()).expect("test alive");
            let _ = wait_release.recv();
        });
        wait_started.recv().expect("the busy job runs");
        let mut seed = 0xb05e_u32;
        let meta = meta(200, 150, PixelFormat::Rgb8);
        let frame = noise(&mut seed, PixelFormat::Rgb8.frame_bytes(200, 150).expect("frame size"));
        for spec in every_spec(37, 29) {
            let mut expected = vec![0; spec.bytes()];
            CpuPreprocessor::new().run(&frame, &meta, &spec, &mut expected).expect("reference");
            let mut actual = vec![0xA5; spec.bytes()];
            FastPreprocessor::new().run_beside(&pool, &frame, &meta, &spec, &mut actual).expect("fast path");
            assert!(actual == expected, "{spec:?}");
        }
        release.send(()).expect("busy job waits");
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

    /// The property tests: each SIMD kernel (with its portable tail) against the portable code,
    /// on random rows whose lengths and start offsets leave tails shorter than a vector, and the
    /// whole fast path against the reference on random frames and specs.
    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// Cases per run on the host; see `proptest_support`.
        const CASES: u32 = 256;

        fn bits(values: &[f32]) -> Vec<u32> {
            values.iter().map(|value| value.to_bits()).collect()
        }

        fn finite() -> impl Strategy<Value = f32> {
            prop_oneof![-1e4f32..1e4, prop::sample::select(vec![0.0, -0.0, 1.0, 255.0, 1e-3, -1e-30])]
        }

        /// Source row `y` converted by the SIMD kernels and by the portable code, each into a row
        /// that starts `offset` pixels into its buffer.
        fn both_conversions(frame: &[u8], meta: &FrameMeta, y: usize, offset: usize) -> (Vec<Pixel>, Vec<Pixel>) {
            let width = meta.width as usize;
            let (mut simd, mut portable) = (vec![[-1.0; 4]; offset + width], vec![[-1.0; 4]; offset + width]);
            convert_row(frame, meta, y, &mut simd[offset..], Kernels::detect());
            convert_row(frame, meta, y, &mut portable[offset..], Kernels::PORTABLE);
            (simd, portable)
        }

        /// The bits of every pixel's R, G and B. The fourth lane is not part of a YUV result (the
        /// portable tables leave the luma term there, the SIMD kernels 0).
        fn rgb_bits(row: &[Pixel]) -> Vec<u32> {
            row.iter().flat_map(|pixel| bits(&pixel[..3])).collect()
        }

        /// A filter's taps from `src_len` to `content_len`, and an RGBX row of `src_len` random
        /// pixels plus the zero pixels the fast path adds for windows that reach past its end.
        fn taps_and_row() -> impl Strategy<Value = (AxisTaps, Vec<Pixel>)> {
            (1u32..120, 1u32..90, any::<bool>()).prop_flat_map(|(src_len, content_len, antialias)| {
                let filter = if antialias { ResizeFilter::Antialias } else { ResizeFilter::Bilinear };
                let taps = AxisTaps::new(filter, src_len, content_len);
                let pixel = prop::array::uniform4(0f32..=255.0);
                let stride = taps.stride;
                prop::collection::vec(pixel, src_len as usize).prop_map(move |mut row| {
                    row.resize(row.len() + stride, [0.0; 4]);
                    (taps.clone(), row)
                })
            })
        }

        proptest! {
            #![proptest_config(crate::proptest_support::config(CASES))]

            #[test]
            fn the_yuv_kernels_convert_rows_of_any_width_like_the_portable_code(
                format in prop::sample::select(vec![PixelFormat::Yuyv, PixelFormat::Nv12]),
                pairs in 0usize..70,
                offset in 0usize..9,
                seed in any::<u32>(),
            ) {
                let width = 2 * pairs;
                // YUYV: one row. NV12: two luma rows and the chroma row under both.
                let (rows, bytes) = if format == PixelFormat::Nv12 { (2, 3 * width) } else { (1, 2 * width) };
                let frame = noise(&mut { seed }, bytes);
                let meta = meta(width as u32, rows as u32, format);
                for y in 0..rows {
                    let (simd, portable) = both_conversions(&frame, &meta, y, offset);
                    prop_assert_eq!(rgb_bits(&simd), rgb_bits(&portable));
                }
            }

            #[test]
            fn the_packed_kernels_convert_rows_of_any_width_like_the_portable_code(
                format in prop::sample::select(vec![PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8]),
                width in 0usize..70,
                offset in 0usize..9,
                seed in any::<u32>(),
            ) {
                let bytes = if format == PixelFormat::Rgba8 { 4 } else { 3 };
                let frame = noise(&mut { seed }, width * bytes);
                let (simd, portable) = both_conversions(&frame, &meta(width as u32, 1, format), 0, offset);
                let all = |row: &[Pixel]| row.iter().flat_map(|pixel| bits(pixel)).collect::<Vec<_>>();
                prop_assert_eq!(all(&simd), all(&portable));
            }

            #[test]
            fn the_horizontal_kernel_filters_rows_of_any_size_like_the_portable_code(
                (taps, row) in taps_and_row(),
                offset in 0usize..7,
            ) {
                let len = 3 * taps.len();
                let (mut simd, mut portable) = (vec![-1.0; offset + len], vec![-1.0; offset + len]);
                filter_row(&taps, &row, &mut simd[offset..], Kernels::detect());
                filter_row(&taps, &row, &mut portable[offset..], Kernels::PORTABLE);
                prop_assert_eq!(bits(&simd), bits(&portable));
            }

            #[test]
            fn the_vertical_kernel_sums_rows_of_any_length_like_the_portable_code(
                (len, rows, weights) in (0usize..150, 1usize..10).prop_flat_map(|(len, taps)| (
                    Just(len),
                    prop::collection::vec(prop::collection::vec(finite(), len), taps),
                    prop::collection::vec(finite(), taps),
                )),
                offset in 0usize..9,
                rotation in 0usize..10,
            ) {
                // Taps read the ring from a rotated start, as a band's ring of source rows does.
                let slots: Vec<usize> = (0..rows.len()).map(|k| (k + rotation) % rows.len()).collect();
                let (mut simd, mut portable) = (vec![-1.0; offset + len], vec![-1.0; offset + len]);
                vertical_row(&rows, &slots, &weights, &mut simd[offset..], Kernels::detect());
                vertical_row(&rows, &slots, &weights, &mut portable[offset..], Kernels::PORTABLE);
                prop_assert_eq!(bits(&simd), bits(&portable));
            }

            #[test]
            fn the_normalising_kernel_treats_rows_of_any_length_like_the_portable_code(
                values in prop::collection::vec((finite(), finite(), 0.01f32..300.0), 0..100),
                offset in 0usize..9,
            ) {
                let row: Vec<f32> = values.iter().map(|v| v.0).collect();
                let mean: Vec<f32> = values.iter().map(|v| v.1).collect();
                let std: Vec<f32> = values.iter().map(|v| v.2).collect();
                let (mut simd, mut portable) = ([vec![0.0; offset], row.clone()].concat(), [vec![0.0; offset], row].concat());
                normalise(&mut simd[offset..], &mean, &std, Kernels::detect());
                normalise(&mut portable[offset..], &mean, &std, Kernels::PORTABLE);
                prop_assert_eq!(bits(&simd), bits(&portable));
            }

            #[test]
            fn the_f16_kernel_encodes_rows_of_any_length_like_halfs_conversion(
                values in prop::collection::vec(prop_oneof![finite(), -7e4f32..7e4, -1e-4f32..1e-4, any::<f32>()], 0..100),
                offset in 0usize..17,
            ) {
                let len = offset + 2 * values.len();
                let (mut simd, mut portable) = (vec![0xA5; len], vec![0xA5; len]);
                encode(TensorDtype::F16, &values, &mut simd[offset..], &mut Vec::new(), Kernels::detect());
                encode(TensorDtype::F16, &values, &mut portable[offset..], &mut Vec::new(), Kernels::PORTABLE);
                prop_assert_eq!(simd, portable);
            }

            #[test]
            fn the_u8_kernel_encodes_rows_of_any_length_like_round_to_u8(
                values in prop::collection::vec(prop_oneof![
                    finite(),
                    -2.0f32..300.0,
                    (0u8..=255).prop_map(|whole| whole as f32 + 0.5),
                    (0u8..=255).prop_map(|whole| f32::from_bits((whole as f32 + 0.5).to_bits() - 1)),
                    any::<f32>(),
                ], 0..100),
                offset in 0usize..33,
            ) {
                let len = offset + values.len();
                let (mut simd, mut portable) = (vec![0xA5; len], vec![0xA5; len]);
                encode(TensorDtype::U8, &values, &mut simd[offset..], &mut Vec::new(), Kernels::detect());
                encode(TensorDtype::U8, &values, &mut portable[offset..], &mut Vec::new(), Kernels::PORTABLE);
                prop_assert_eq!(&simd, &portable);
                let expected: Vec<u8> = values.iter().map(|value| value.round().clamp(0.0, 255.0) as u8).collect();
                prop_assert_eq!(&portable[offset..], &expected[..]);
            }

            #[test]
            fn the_channel_split_kernel_splits_rows_of_any_length_like_the_portable_code(
                rgb in prop::collection::vec(finite(), 0..120).prop_map(|mut rgb| { rgb.truncate(rgb.len() / 3 * 3); rgb }),
                offset in 0usize..9,
            ) {
                let pixels = rgb.len() / 3;
                let channels = || [0.0, 1.0, 2.0].map(|fill| vec![fill; offset + pixels]);
                let (mut simd, mut portable) = (channels(), channels());
                let [r, g, b] = &mut simd;
                deinterleave(&rgb, [&mut r[offset..], &mut g[offset..], &mut b[offset..]], Kernels::detect());
                let [r, g, b] = &mut portable;
                deinterleave(&rgb, [&mut r[offset..], &mut g[offset..], &mut b[offset..]], Kernels::PORTABLE);
                prop_assert_eq!(simd.each_ref().map(|c| bits(c)), portable.each_ref().map(|c| bits(c)));
                for (c, channel) in portable.iter().enumerate() {
                    let expected: Vec<f32> = rgb.iter().skip(c).step_by(3).copied().collect();
                    prop_assert_eq!(bits(&channel[offset..]), bits(&expected));
                }
            }
        }

        /// A random frame size (odd where the format allows) and spec; the spec's discrete
        /// choices come from `every_spec`.
        fn frame_and_spec() -> impl Strategy<Value = (PixelFormat, u32, u32, PreprocessSpec)> {
            let sizes = (1u32..80, 1u32..30, 1u32..50, 1u32..40);
            (prop::sample::select(FORMATS.to_vec()), sizes, any::<prop::sample::Index>()).prop_map(
                |(format, (width, height, width_out, height_out), choice)| {
                    let even = |n: u32| n + n % 2;
                    let (width, height) = match format {
                        PixelFormat::Yuyv => (even(width), height),
                        PixelFormat::Nv12 => (even(width), even(height)),
                        _ => (width, height),
                    };
                    (format, width, height, choice.get(&every_spec(width_out, height_out)).clone())
                },
            )
        }

        proptest! {
            #![proptest_config(crate::proptest_support::config(CASES / 4))]

            #[test]
            fn random_frames_and_specs_give_the_references_bytes_with_either_kernel_set(
                (format, width, height, spec) in frame_and_spec(),
                seed in any::<u32>(),
            ) {
                let frame = noise(&mut { seed }, format.frame_bytes(width, height).expect("frame size"));
                assert_identical(&frame, &meta(width, height, format), &spec, &pool());
            }
        }
    }
}
