//! Sampling tables and tile plans for the preprocessing kernels, computed on the host.
//!
//! Owns: turning the CPU code's [`AxisTaps`] into the tables the kernels read — the same f32
//! weights with exact-zero weights trimmed off both ends of every window (the definition adds
//! `0 · q = +0` there, and every weight and pixel value is ≥ 0, so no sum changes) — and the
//! resample kernel's [`TilePlan`]: how many output rows one block takes, and the shared memory its
//! largest tile needs. Must not: touch the GPU (the preprocessor uploads what this computes) or
//! compute weights of its own.

use crate::preprocess::{AxisTaps, ResizeGeometry};

/// Output columns per resample tile (`TILE_W` in `preprocess.cu`).
pub(crate) const TILE_WIDTH: u32 = 32;
/// Threads per column of a resample block (`BLOCK_ROWS` in `preprocess.cu`).
pub(crate) const BLOCK_ROWS: u32 = 8;
/// Shared memory a tile may use before the plan takes fewer output rows per tile: up to this, five
/// blocks of 256 threads fit on an H100 multiprocessor (228 KiB) and three on an Orin (164 KiB).
const PREFERRED_SHARED_BYTES: usize = 48 << 10;

/// One axis of [`AxisTaps`] as the kernels read it: per content pixel one record of
/// `stride + 2` words — first source index, tap count, then `stride` f32 weights as bits (zero
/// past the count) — so a tile's taps are one contiguous range.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KernelTaps {
    pub records: Vec<u32>,
    pub stride: usize,
}

impl KernelTaps {
    /// The taps of `taps` with exact-zero weights trimmed off both ends of each window (at least
    /// one tap stays). `None` when a source index does not fit the kernel's `int`.
    pub fn trimmed(taps: &AxisTaps) -> Option<Self> {
        let windows: Vec<(u32, &[f32])> = (0..taps.len())
            .map(|i| {
                let all = &taps.weights[i * taps.stride..][..taps.count[i] as usize];
                let lead = all.iter().take_while(|w| **w == 0.0).count().min(all.len().saturating_sub(1));
                let live = &all[lead..];
                let tail = live.iter().rev().take_while(|w| **w == 0.0).count().min(live.len().saturating_sub(1));
                (taps.first[i] + lead as u32, &live[..live.len() - tail])
            })
            .collect();
        let stride = windows.iter().map(|(_, weights)| weights.len()).max().unwrap_or(1).max(1);
        let mut records = Vec::with_capacity((stride + 2) * windows.len());
        for (first, live) in windows {
            i32::try_from(first).ok()?;
            records.push(first);
            records.push(live.len() as u32);
            records.extend(live.iter().map(|w| w.to_bits()));
            records.extend(std::iter::repeat_n(0, stride - live.len()));
        }
        Some(KernelTaps { records, stride })
    }

    fn record(&self, i: usize) -> &[u32] {
        &self.records[i * (self.stride + 2)..][..self.stride + 2]
    }

    /// Weights of content pixel `i`.
    #[cfg(test)]
    fn weights(&self, i: usize) -> Vec<f32> {
        let record = self.record(i);
        record[2..2 + record[1] as usize].iter().map(|bits| f32::from_bits(*bits)).collect()
    }

    fn len(&self) -> usize {
        self.records.len() / (self.stride + 2)
    }

    fn first(&self, i: usize) -> i64 {
        i64::from(self.record(i)[0])
    }

    fn count(&self, i: usize) -> i64 {
        i64::from(self.record(i)[1])
    }

    fn end(&self, i: usize) -> i64 {
        self.first(i) + self.count(i)
    }

    /// Windows start and end in non-decreasing order, each with at least one tap: then the source
    /// window of content pixels `lo..hi` runs from `first(lo)` to `end(hi - 1)`, which is how the
    /// resample kernel finds it.
    fn is_monotonic(&self) -> bool {
        (0..self.len()).all(|i| self.count(i) >= 1)
            && (1..self.len()).all(|i| self.first(i - 1) <= self.first(i) && self.end(i - 1) <= self.end(i))
    }

    /// Source window of every tile along this axis: tile `t` covers output pixels
    /// `t·tile .. (t + 1)·tile`, of which content pixels `o − pad` inside `0..len` have taps.
    fn tile_windows(&self, out_len: u32, pad: u32, tile: u32) -> impl Iterator<Item = (i64, i64)> + '_ {
        let (pad, len, tile) = (i64::from(pad), self.len() as i64, i64::from(tile));
        (0..i64::from(out_len.div_ceil(tile as u32))).filter_map(move |t| {
            let lo = (t * tile - pad).max(0);
            let hi = ((t + 1) * tile - pad).min(len);
            (lo < hi).then(|| (self.first(lo as usize), self.end(hi as usize - 1)))
        })
    }
}

/// How the resample kernel tiles one frame size: blocks of [`TILE_WIDTH`] × `tile_rows` output
/// pixels, each staging up to `stage_rows` source rows of `stage_pitch` RGB pixels (a multiple of
/// 4: the kernel stores 4 pixels per 16-byte store), `stage_rows` rows of horizontal sums, and the
/// tap tables of its columns and rows (`x_stride`, `y_stride` weights each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TilePlan {
    pub tile_rows: u32,
    pub stage_rows: u32,
    pub stage_pitch: u32,
    pub x_stride: u32,
    pub y_stride: u32,
}

impl TilePlan {
    /// The plan for `tile_rows` rows per tile, or fewer (halving) when the largest tile needs more
    /// than 48 KiB of shared memory; the largest that fits `shared_limit` when none fits 48 KiB.
    /// `None` when the windows are not monotonic or even one-row tiles exceed `shared_limit`
    /// (extreme shrink factors): the caller uses the single-pass kernel then.
    pub fn new(
        x: &KernelTaps,
        y: &KernelTaps,
        geometry: &ResizeGeometry,
        out_width: u32,
        out_height: u32,
        tile_rows: u32,
        shared_limit: usize,
    ) -> Option<Self> {
        if !x.is_monotonic() || !y.is_monotonic() {
            return None;
        }
        // Chunks of 4 pixels start at multiples of 4, so a window staged whole may grow by up to 3.
        let stage_pitch = x
            .tile_windows(out_width, geometry.pad_x, TILE_WIDTH)
            .map(|(first, end)| (end - (first & !3) + 3) & !3)
            .max()?;
        let plan = |tile_rows: u32| {
            let stage_rows =
                y.tile_windows(out_height, geometry.pad_y, tile_rows).map(|(first, end)| end - first).max()?;
            Some(TilePlan {
                tile_rows,
                stage_rows: u32::try_from(stage_rows).ok()?,
                stage_pitch: u32::try_from(stage_pitch).ok()?,
                x_stride: u32::try_from(x.stride).ok()?,
                y_stride: u32::try_from(y.stride).ok()?,
            })
        };
        let candidates: Vec<TilePlan> = std::iter::successors(Some(tile_rows.max(1)), |rows| Some(rows / 2))
            .take_while(|rows| *rows >= 1)
            .filter_map(plan)
            .collect();
        candidates
            .iter()
            .find(|plan| plan.shared_bytes() <= PREFERRED_SHARED_BYTES)
            .or_else(|| candidates.iter().find(|plan| plan.shared_bytes() <= shared_limit))
            .copied()
    }

    /// Dynamic shared memory of one block (4-byte words): staged RGB source pixels, horizontal
    /// sums, and the tile's `(first, count)` pairs and weights per column and per row.
    pub fn shared_bytes(&self) -> usize {
        let (rows, tile_rows, tile_width) = (self.stage_rows as usize, self.tile_rows as usize, TILE_WIDTH as usize);
        let staged = 3 * rows * (self.stage_pitch as usize + tile_width);
        let tables = tile_width * (2 + self.x_stride as usize) + tile_rows * (2 + self.y_stride as usize);
        4 * (staged + tables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResizeFilter, ResizeKind};

    fn kernel_taps(src: u32, content: u32) -> KernelTaps {
        KernelTaps::trimmed(&AxisTaps::new(ResizeFilter::Antialias, src, content)).expect("fits")
    }

    /// The definition's sum over one window: from 0, in increasing k, f32.
    fn mix(first: usize, weights: &[f32], values: &[f32]) -> f32 {
        weights.iter().enumerate().fold(0.0f32, |sum, (k, w)| sum + w * values[first + k])
    }

    #[test]
    fn trimming_changes_no_sum() {
        let values: Vec<f32> = (0..1920).map(|i| (i * 7919 % 2551) as f32 / 10.0).collect();
        for (src, content) in [(1920, 640), (1080, 360), (1280, 300), (640, 1280), (37, 11), (3, 2), (5, 2)] {
            let taps = AxisTaps::new(ResizeFilter::Antialias, src, content);
            let kernel = KernelTaps::trimmed(&taps).expect("fits");
            for i in 0..content as usize {
                let full = &taps.weights[i * taps.stride..][..taps.count[i] as usize];
                let live = kernel.weights(i);
                assert!(live.first().is_some_and(|w| *w != 0.0) || live.len() == 1, "{src}→{content} pixel {i}");
                assert_eq!(
                    mix(kernel.first(i) as usize, &live, &values).to_bits(),
                    mix(taps.first[i] as usize, full, &values).to_bits(),
                    "{src}→{content} pixel {i}"
                );
            }
        }
    }

    #[test]
    fn trimming_drops_the_zero_tap_of_a_threefold_shrink() {
        // scale 3, support 3: taps 3i − 1 .. 3i + 4, the last with weight 0.
        let taps = AxisTaps::new(ResizeFilter::Antialias, 1920, 640);
        assert_eq!(taps.stride, 6);
        let kernel = kernel_taps(1920, 640);
        assert_eq!(kernel.stride, 5);
        assert_eq!((kernel.first(100), kernel.count(100)), (299, 5));
        assert_eq!(kernel.record(100).len(), 7);
        assert!(kernel.is_monotonic());
    }

    #[test]
    fn plan_for_1080p_to_640_letterbox_uses_eight_row_tiles_in_48_kib() {
        let geometry = ResizeGeometry::new(ResizeKind::Letterbox, 1920, 1080, 640, 640);
        let (x, y) = (kernel_taps(1920, 640), kernel_taps(1080, 360));
        let plan = TilePlan::new(&x, &y, &geometry, 640, 640, 8, 227 << 10).expect("plan");
        // 8 content rows need 3·7 + 5 = 26 source rows; 32 columns 3·31 + 5 = 98 source pixels,
        // staged from a multiple of 4: up to 104.
        assert_eq!(plan, TilePlan { tile_rows: 8, stage_rows: 26, stage_pitch: 104, x_stride: 5, y_stride: 5 });
        assert!(plan.shared_bytes() <= 48 << 10);
        let tall = TilePlan::new(&x, &y, &geometry, 640, 640, 16, 227 << 10).expect("plan");
        assert_eq!(tall.tile_rows, 8, "16 rows need more than 48 KiB: halved");
    }

    #[test]
    fn plan_falls_back_to_fewer_rows_then_to_none() {
        let geometry = ResizeGeometry::new(ResizeKind::Stretch, 3840, 2160, 300, 300);
        let (x, y) = (kernel_taps(3840, 300), kernel_taps(2160, 300));
        let plan = TilePlan::new(&x, &y, &geometry, 300, 300, 8, 227 << 10).expect("plan");
        assert!(plan.tile_rows < 8 && plan.shared_bytes() <= 227 << 10, "{plan:?}");
        let geometry = ResizeGeometry::new(ResizeKind::Stretch, 24000, 4, 4, 4);
        let (x, y) = (kernel_taps(24000, 4), kernel_taps(4, 4));
        assert_eq!(TilePlan::new(&x, &y, &geometry, 4, 4, 8, 227 << 10), None, "one row of 24000 pixels");
    }

    #[test]
    fn tile_windows_cover_every_content_pixel_of_a_letterbox() {
        let y = kernel_taps(1080, 360);
        let windows: Vec<(i64, i64)> = y.tile_windows(640, 140, 8).collect();
        // Content rows 0..360 sit in output rows 140..500: tiles 17 (rows 136..144) to 62.
        assert_eq!(windows.len(), 63 - 17);
        assert_eq!(windows[0], (0, y.end(3)));
        assert_eq!(windows.last().map(|w| w.1), Some(1080));
    }
}
