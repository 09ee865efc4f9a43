//! The small luma image motion is judged on: the definition, its scalar reference, and the fast
//! CPU downscaler.
//!
//! Owns: [`CellGrid`] (how a frame is cut into cells), [`LumaImage`] (one mean luma byte per
//! cell), [`downscale_reference`] (the definition, literally) and [`LumaDownscaler`] (the same
//! bytes, a row at a time with the SIMD kernels of `super::simd`). The CUDA kernel
//! (`crate::gpu`'s motion kernel) implements the same definition and is tested against
//! [`downscale_reference`]. Must not: keep state between frames (the background does), or know
//! about cameras.
//!
//! The definition, for a frame of `width × height`:
//! 1. Cells: `cell = clamp(height / 90, 1, 256)` pixels square (integer division), so a frame of
//!    any size gives a grid about 90 cells high (1080p: 12 px cells, 160 × 90); the grid has
//!    `width / cell` columns and `height / cell` rows (at least 1 each, cells cut to the frame),
//!    and the `width % cell` columns on the right and `height % cell` rows at the bottom that do
//!    not fill a cell are not read.
//! 2. Luma of a pixel: YUYV and NV12 give their Y byte as it is (limited range: what the camera
//!    sent); RGB, BGR and RGBA give `(77·R + 150·G + 29·B + 128) >> 8` (BT.601 weights in 8-bit
//!    fixed point, full range).
//! 3. A cell's value: `(S + n / 2) / n` (integer division), where `S` is the sum of its pixels'
//!    luma and `n` their count: the mean, rounded half up.
//!
//! Everything is integer arithmetic, so every implementation gives the same bytes, not merely
//! close ones.

use super::error::MotionError;
use super::pixel::{luma_bytes, pixel_luma};
use super::simd::Kernels;
use crate::frame::FrameMeta;

/// Cells the grid has along the frame's height, about: what sets the cell size.
pub const GRID_ROWS: u32 = 90;
/// Largest cell side: a column of one cell's luma sums to at most `256 · 255`, which fits the
/// 16-bit column sums of the fast path.
pub const MAX_CELL: u32 = 256;

/// How a frame is cut into cells (step 1 of the definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellGrid {
    /// The frame's size in pixels.
    pub frame_width: u32,
    pub frame_height: u32,
    /// A cell's side in pixels.
    pub cell: u32,
    /// Cells across and down.
    pub cols: u32,
    pub rows: u32,
}

impl CellGrid {
    /// The grid of a `width × height` frame (both at least 1).
    pub fn new(width: u32, height: u32) -> CellGrid {
        let (width, height) = (width.max(1), height.max(1));
        let cell = (height / GRID_ROWS).clamp(1, MAX_CELL).min(width);
        CellGrid { frame_width: width, frame_height: height, cell, cols: width / cell, rows: height / cell }
    }

    /// Cells in all.
    pub fn len(&self) -> usize {
        self.cols as usize * self.rows as usize
    }

    /// A grid has at least one cell.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The frame pixels of cell `(col, row)`: columns `x .. x + cell`, rows `y .. y + cell`.
    pub fn cell_origin(&self, col: u32, row: u32) -> (u32, u32) {
        (col * self.cell, row * self.cell)
    }
}

/// One mean luma byte per cell of a [`CellGrid`], row by row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LumaImage {
    grid: CellGrid,
    values: Vec<u8>,
}

impl Default for LumaImage {
    fn default() -> Self {
        LumaImage { grid: CellGrid::new(1, 1), values: vec![0] }
    }
}

impl LumaImage {
    /// Sizes the image for `grid` (allocating only when it grows) and returns its values to fill.
    pub fn prepare(&mut self, grid: CellGrid) -> &mut [u8] {
        self.grid = grid;
        self.values.resize(grid.len(), 0);
        &mut self.values
    }

    pub fn grid(&self) -> CellGrid {
        self.grid
    }

    /// The cells' values, row by row.
    pub fn values(&self) -> &[u8] {
        &self.values
    }
}

/// Checks that `frame` holds a whole `meta` frame; its grid.
fn check_frame(frame: &[u8], meta: &FrameMeta) -> Result<CellGrid, MotionError> {
    let format = meta.format.name();
    let needed = meta.format.frame_bytes(meta.width, meta.height).ok_or(MotionError::ImpossibleFrameSize {
        format,
        width: meta.width,
        height: meta.height,
    })?;
    if frame.len() < needed {
        return Err(MotionError::FrameTooShort { format, needed, actual: frame.len() });
    }
    Ok(CellGrid::new(meta.width, meta.height))
}

/// Step 3: the rounded mean of `sum` over `count` pixels.
#[inline(always)]
fn cell_mean(sum: u32, count: u32) -> u8 {
    ((sum + count / 2) / count) as u8
}

/// The definition evaluated literally, pixel by pixel: the luma image of the frame in `frame`.
pub fn downscale_reference(frame: &[u8], meta: &FrameMeta, out: &mut LumaImage) -> Result<(), MotionError> {
    let grid = check_frame(frame, meta)?;
    let width = meta.width as usize;
    let bytes = luma_bytes(meta.format);
    let luma = |x: usize, y: usize| pixel_luma(meta.format, &frame[(y * width + x) * bytes..]) as u32;
    let cell = grid.cell as usize;
    let values = out.prepare(grid);
    for row in 0..grid.rows as usize {
        for col in 0..grid.cols as usize {
            let mut sum = 0u32;
            for y in row * cell..(row + 1) * cell {
                for x in col * cell..(col + 1) * cell {
                    sum += luma(x, y);
                }
            }
            values[row * grid.cols as usize + col] = cell_mean(sum, (cell * cell) as u32);
        }
    }
    Ok(())
}

/// Computes [`LumaImage`]s like [`downscale_reference`], bit for bit, reading each frame row once:
/// every row's luma is added to 16-bit column sums (the SIMD kernels where the CPU has them), and
/// a band of `cell` rows becomes a row of cells. Keeps its column sums between frames, so a steady
/// stream of same-sized frames allocates nothing.
#[derive(Debug)]
pub struct LumaDownscaler {
    kernels: Kernels,
    /// Per frame column: the luma sum over the current band's rows.
    columns: Vec<u16>,
}

impl Default for LumaDownscaler {
    fn default() -> Self {
        LumaDownscaler { kernels: Kernels::detect(), columns: Vec::new() }
    }
}

impl LumaDownscaler {
    pub fn new() -> Self {
        Self::default()
    }

    /// The same without the SIMD kernels (same output), for benchmarks and tests.
    pub fn portable() -> Self {
        LumaDownscaler { kernels: Kernels::PORTABLE, columns: Vec::new() }
    }

    /// The kernel set it runs: "avx2", "neon" or "portable".
    pub fn kernels(&self) -> &'static str {
        self.kernels.name()
    }

    /// The luma image of the frame in `frame` (laid out as `meta` says) into `out`.
    pub fn run(&mut self, frame: &[u8], meta: &FrameMeta, out: &mut LumaImage) -> Result<(), MotionError> {
        let grid = check_frame(frame, meta)?;
        let (cell, cols) = (grid.cell as usize, grid.cols as usize);
        // Only the columns the cells cover are summed.
        let used = cols * cell;
        self.columns.resize(used, 0);
        let values = out.prepare(grid);
        for (band, cells) in values.chunks_exact_mut(cols).enumerate() {
            self.columns.fill(0);
            for y in band * cell..(band + 1) * cell {
                add_row(frame, meta, y, &mut self.columns, self.kernels);
            }
            let count = (cell * cell) as u32;
            for (value, sums) in cells.iter_mut().zip(self.columns.chunks_exact(cell)) {
                *value = cell_mean(sums.iter().map(|&s| s as u32).sum(), count);
            }
        }
        Ok(())
    }
}

/// Adds the luma of frame row `y`'s first `columns.len()` pixels to `columns` (the frame's length
/// has been checked against its format, so every index is in bounds).
fn add_row(frame: &[u8], meta: &FrameMeta, y: usize, columns: &mut [u16], kernels: Kernels) {
    let (width, bytes) = (meta.width as usize, luma_bytes(meta.format));
    let row = &frame[y * width * bytes..(y * width + columns.len()) * bytes];
    let done = kernels.add_row(meta.format, row, columns);
    for (sum, pixel) in columns[done..].iter_mut().zip(row[done * bytes..].chunks_exact(bytes)) {
        *sum += pixel_luma(meta.format, pixel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::frame::PixelFormat;

    fn meta(width: u32, height: u32, format: PixelFormat) -> FrameMeta {
        FrameMeta { width, height, format, sequence: 0, captured_at: SystemTime::UNIX_EPOCH }
    }

    const FORMATS: [PixelFormat; 5] =
        [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];

    fn noise(seed: &mut u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (*seed >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn a_1080p_frame_gives_12_pixel_cells_160_by_90() {
        let grid = CellGrid::new(1920, 1080);
        assert_eq!((grid.cell, grid.cols, grid.rows), (12, 160, 90));
        let small = CellGrid::new(64, 48);
        assert_eq!((small.cell, small.cols, small.rows), (1, 64, 48));
        let tall = CellGrid::new(2, 5000);
        assert_eq!((tall.cell, tall.cols, tall.rows), (2, 1, 2500));
        assert_eq!(CellGrid::new(60_000, 60_000).cell, MAX_CELL);
    }

    #[test]
    fn cells_hold_the_rounded_mean_of_their_pixels_luma() {
        // A 180-row frame has 2-pixel cells. Luma rows of 10 and 13 make the first band's
        // cells (10 + 10 + 13 + 13 + 2) / 4 = 12 (11.5 rounded up); the next band is black.
        let (width, height) = (4, 180);
        let mut frame = vec![0u8; width * height * 3 / 2];
        frame[..width].fill(10);
        frame[width..2 * width].fill(13);
        let mut out = LumaImage::default();
        downscale_reference(&frame, &meta(width as u32, height as u32, PixelFormat::Nv12), &mut out).expect("luma");
        assert_eq!(out.grid().cell, 2);
        assert_eq!(&out.values()[..2], &[12, 12]);
        assert_eq!(out.values()[2], 0);
    }

    #[test]
    fn every_format_sees_the_same_scene_alike() {
        // A grey frame of value 100 in each format: Y = 100 for YUV, R = G = B = 100 for RGB.
        let (width, height) = (8u32, 4u32);
        let n = (width * height) as usize;
        let frames = [
            (PixelFormat::Rgb8, vec![100; 3 * n]),
            (PixelFormat::Bgr8, vec![100; 3 * n]),
            (PixelFormat::Rgba8, [100, 100, 100, 7].repeat(n)),
            (PixelFormat::Yuyv, [100, 128].repeat(n)),
            (PixelFormat::Nv12, [vec![100; n], vec![128; n / 2]].concat()),
        ];
        for (format, frame) in frames {
            let mut out = LumaImage::default();
            downscale_reference(&frame, &meta(width, height, format), &mut out).expect("luma");
            assert!(out.values().iter().all(|&v| v == 100), "{format:?}: {:?}", out.values());
        }
    }

    #[test]
    fn short_and_impossible_frames_are_errors() {
        let mut out = LumaImage::default();
        let error = downscale_reference(&[0; 11], &meta(2, 2, PixelFormat::Rgb8), &mut out).expect_err("short");
        assert_eq!(error, MotionError::FrameTooShort { format: "rgb", needed: 12, actual: 11 });
        let error = LumaDownscaler::new().run(&[0; 64], &meta(3, 2, PixelFormat::Yuyv), &mut out).expect_err("odd");
        assert_eq!(error, MotionError::ImpossibleFrameSize { format: "yuyv", width: 3, height: 2 });
    }

    #[test]
    fn the_fast_downscaler_gives_the_references_bytes_on_random_frames() {
        let mut seed = 0x5eed_u32;
        let sizes = [(1920, 1080), (640, 480), (38, 200), (2, 2), (1282, 722), (90, 270)];
        for format in FORMATS {
            for (width, height) in sizes {
                let frame = noise(&mut seed, format.frame_bytes(width, height).expect("size"));
                let m = meta(width, height, format);
                let (mut expected, mut actual) = (LumaImage::default(), LumaImage::default());
                downscale_reference(&frame, &m, &mut expected).expect("reference");
                for mut downscaler in [LumaDownscaler::new(), LumaDownscaler::portable()] {
                    downscaler.run(&frame, &m, &mut actual).expect("fast");
                    assert_eq!(actual, expected, "{format:?} {width}x{height} {}", downscaler.kernels());
                }
            }
        }
    }

    #[test]
    fn white_frames_reach_the_largest_sums_without_overflow() {
        // 23 040 rows give 256-pixel cells: a column of one cell sums 256 · 255 = 65 280.
        let (width, height) = (256u32, 23_040u32);
        let frame = vec![255u8; PixelFormat::Nv12.frame_bytes(width, height).expect("size")];
        let mut out = LumaImage::default();
        LumaDownscaler::new().run(&frame, &meta(width, height, PixelFormat::Nv12), &mut out).expect("luma");
        assert_eq!(out.grid().cell, MAX_CELL);
        assert!(out.values().iter().all(|&v| v == 255));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(crate::proptest_support::config(64))]

            #[test]
            fn random_frames_of_every_format_and_size_give_the_references_bytes(
                format in proptest::sample::select(FORMATS.to_vec()),
                half_width in 1u32..200,
                half_height in 1u32..300,
                seed in any::<u32>(),
            ) {
                let (width, height) = (2 * half_width, 2 * half_height);
                let mut seed = seed;
                let frame = noise(&mut seed, format.frame_bytes(width, height).expect("size"));
                let m = meta(width, height, format);
                let (mut expected, mut actual) = (LumaImage::default(), LumaImage::default());
                downscale_reference(&frame, &m, &mut expected).expect("reference");
                LumaDownscaler::new().run(&frame, &m, &mut actual).expect("fast");
                prop_assert_eq!(actual, expected);
            }
        }
    }
}
