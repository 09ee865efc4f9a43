//! Explicit SIMD versions of the luma downscale's row kernel — adding one frame row's luma to the
//! 16-bit column sums — chosen once at run time: AVX2 on x86_64, NEON on aarch64. For Y planes
//! (NV12) the bytes are widened and added; for YUYV the Y bytes are picked out of each pair
//! (a mask on x86, a de-interleaving load on NEON); for packed RGB, BGR and RGBA the channels are
//! gathered into 16-bit lanes and weighted `(77·R + 150·G + 29·B + 128) >> 8` in integers.
//!
//! Owns: the kernels and their dispatch: [`Kernels::detect`] (which asks `crate::sys::simd` what
//! the CPU has) is the only way to get a SIMD kernel set. Must not: compute anything differently
//! from the portable code in `super::luma`: everything is integer arithmetic on the same values,
//! so the sums are equal, not close (property tests below compare each kernel with the portable
//! code on random rows of any length).
//!
//! Every kernel does a prefix of its row (whole vectors) and returns how many pixels it did; the
//! caller finishes the row with the portable code. The portable set does nothing (returns 0).

use super::pixel::luma_bytes;
#[cfg(any(target_arch = "x86_64", test))]
use super::pixel::rgb_offsets;
use crate::frame::PixelFormat;
use crate::sys::simd::SimdSet;

/// A kernel set. Only [`Kernels::detect`] makes a SIMD one, after checking that this CPU has its
/// instructions: holding a `Kernels` is what makes calling its kernels sound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kernels(SimdSet);

impl Kernels {
    /// No SIMD kernels: the portable code does everything.
    pub(super) const PORTABLE: Kernels = Kernels(SimdSet::Portable);

    /// The best set this CPU runs.
    pub(super) fn detect() -> Kernels {
        Kernels(SimdSet::detect(false))
    }

    /// The set's name, for benchmarks and logs.
    pub(super) fn name(self) -> &'static str {
        self.0.name()
    }

    /// Adds the luma of a row's first pixels to `columns` (`columns[x] += luma(pixel x)`, `row`
    /// holding `luma_bytes` per pixel of `format`: an NV12 row is its Y plane's); returns how
    /// many pixels it did (a multiple of 8).
    pub(super) fn add_row(self, format: PixelFormat, row: &[u8], columns: &mut [u16]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::add_row(format, row, columns) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::add_row(format, row, columns) },
        }
    }
}

/// Byte shuffles that gather channel `channel` of 8 packed pixels (RGB, BGR or RGBA) into the low
/// bytes of 8 16-bit lanes, from two 16-byte loads: `low` at the first pixel, `high` at its byte
/// [`high_load`]. Each byte comes from the low load when it lies in it, else from the high one; −1
/// writes a zero.
#[cfg(any(target_arch = "x86_64", test))]
fn gather_masks(format: PixelFormat, channel: usize) -> ([i8; 16], [i8; 16]) {
    let high_load = high_load(format);
    let (mut low, mut high) = ([-1i8; 16], [-1i8; 16]);
    for pixel in 0..8 {
        let byte = luma_bytes(format) * pixel + rgb_offsets(format)[channel];
        if byte < 16 {
            low[2 * pixel] = byte as i8;
        } else {
            high[2 * pixel] = (byte - high_load) as i8;
        }
    }
    (low, high)
}

/// Where the second 16-byte load of 8 packed pixels starts: it ends at the last pixel's last byte.
#[cfg(any(target_arch = "x86_64", test))]
fn high_load(format: PixelFormat) -> usize {
    8 * luma_bytes(format) - 16
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{gather_masks, high_load, luma_bytes};
    use crate::frame::PixelFormat;

    /// The kernel for `format`'s rows.
    #[target_feature(enable = "avx2")]
    pub(super) fn add_row(format: PixelFormat, row: &[u8], columns: &mut [u16]) -> usize {
        match format {
            PixelFormat::Nv12 => add_plane(row, columns),
            PixelFormat::Yuyv => add_yuyv(row, columns),
            PixelFormat::Rgb8 | PixelFormat::Bgr8 | PixelFormat::Rgba8 => add_packed(format, row, columns),
        }
    }

    /// 32 pixels per step: 32 bytes widened to two registers of 16 16-bit lanes, added to the
    /// column sums (no sum overflows: the caller's cells keep them under 2¹⁶).
    #[target_feature(enable = "avx2")]
    fn add_plane(row: &[u8], columns: &mut [u16]) -> usize {
        let pixels = row.len().min(columns.len()) / 32 * 32;
        for p in (0..pixels).step_by(32) {
            // SAFETY: p + 32 <= row.len() and columns.len(): 32 bytes of `row` and 32 sums at p.
            unsafe {
                let bytes = _mm256_loadu_si256(row.as_ptr().add(p).cast());
                let low = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(bytes));
                let high = _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(bytes));
                add16(columns.as_mut_ptr().add(p), low);
                add16(columns.as_mut_ptr().add(p + 16), high);
            }
        }
        pixels
    }

    /// 16 pixels (32 bytes) per step: in little-endian 16-bit lanes, each Y is the low byte of its
    /// pixel's lane, so masking off the chroma bytes leaves the pixels' luma in order.
    #[target_feature(enable = "avx2")]
    fn add_yuyv(row: &[u8], columns: &mut [u16]) -> usize {
        let pixels = (row.len() / 2).min(columns.len()) / 16 * 16;
        let luma = _mm256_set1_epi16(0x00ff);
        for p in (0..pixels).step_by(16) {
            // SAFETY: pixels p..p+16 are bytes 2p..2p+32 of `row` and sums p..p+16, in bounds.
            unsafe {
                let bytes = _mm256_loadu_si256(row.as_ptr().add(2 * p).cast());
                add16(columns.as_mut_ptr().add(p), _mm256_and_si256(bytes, luma));
            }
        }
        pixels
    }

    /// Adds 16 lanes to the 16 sums at `columns`.
    ///
    /// # Safety
    /// `columns` must point to 16 writable `u16`s, on a CPU with AVX2.
    #[target_feature(enable = "avx2")]
    unsafe fn add16(columns: *mut u16, values: __m256i) {
        // SAFETY: the caller's contract: 16 sums at `columns`.
        unsafe {
            let sums = _mm256_loadu_si256(columns.cast());
            _mm256_storeu_si256(columns.cast(), _mm256_add_epi16(sums, values));
        }
    }

    /// 8 pixels per step, from two 16-byte loads: each channel gathered into 8 16-bit lanes by two
    /// byte shuffles ([`gather_masks`]), then `(77·R + 150·G + 29·B + 128) >> 8` in 16-bit lanes
    /// (at most 65 408: nothing wraps), added to the column sums.
    #[target_feature(enable = "avx2")]
    fn add_packed(format: PixelFormat, row: &[u8], columns: &mut [u16]) -> usize {
        let bytes = luma_bytes(format);
        let pixels = (row.len() / bytes).min(columns.len()) / 8 * 8;
        let load = |mask: [i8; 16]| {
            // SAFETY: `mask` is 16 bytes; an unaligned load reads exactly those.
            unsafe { _mm_loadu_si128(mask.as_ptr().cast()) }
        };
        let masks: [(__m128i, __m128i); 3] = std::array::from_fn(|channel| {
            let (low, high) = gather_masks(format, channel);
            (load(low), load(high))
        });
        let weights = [_mm_set1_epi16(77), _mm_set1_epi16(150), _mm_set1_epi16(29)];
        let (half, offset) = (_mm_set1_epi16(128), high_load(format));
        for p in (0..pixels).step_by(8) {
            let start = bytes * p;
            // SAFETY: 8 whole pixels start at byte `start`: bytes start..start + 8·bytes exist, and
            // both loads lie inside them (the high one ends at the last pixel's last byte).
            let (low, high) = unsafe {
                (
                    _mm_loadu_si128(row.as_ptr().add(start).cast()),
                    _mm_loadu_si128(row.as_ptr().add(start + offset).cast()),
                )
            };
            let mut luma = half;
            for (channel, (low_mask, high_mask)) in masks.iter().enumerate() {
                let value = _mm_or_si128(_mm_shuffle_epi8(low, *low_mask), _mm_shuffle_epi8(high, *high_mask));
                luma = _mm_add_epi16(luma, _mm_mullo_epi16(value, weights[channel]));
            }
            let luma = _mm_srli_epi16::<8>(luma);
            // SAFETY: sums p..p+8 exist (p + 8 <= columns.len()).
            unsafe {
                let sums = columns.as_mut_ptr().add(p).cast::<__m128i>();
                _mm_storeu_si128(sums, _mm_add_epi16(_mm_loadu_si128(sums), luma));
            }
        }
        pixels
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::luma_bytes;
    use crate::frame::PixelFormat;

    /// The kernel for `format`'s rows.
    #[target_feature(enable = "neon")]
    pub(super) fn add_row(format: PixelFormat, row: &[u8], columns: &mut [u16]) -> usize {
        match format {
            PixelFormat::Nv12 => add_plane(row, columns),
            PixelFormat::Yuyv => add_yuyv(row, columns),
            PixelFormat::Rgb8 | PixelFormat::Bgr8 | PixelFormat::Rgba8 => add_packed(format, row, columns),
        }
    }

    /// Adds 16 bytes, widened, to the 16 sums at `columns`.
    ///
    /// # Safety
    /// `columns` must point to 16 writable `u16`s.
    #[target_feature(enable = "neon")]
    unsafe fn add16(columns: *mut u16, bytes: uint8x16_t) {
        // SAFETY: the caller's contract: 16 sums at `columns`.
        unsafe {
            let (low, high) = (vld1q_u16(columns), vld1q_u16(columns.add(8)));
            vst1q_u16(columns, vaddw_u8(low, vget_low_u8(bytes)));
            vst1q_u16(columns.add(8), vaddw_high_u8(high, bytes));
        }
    }

    /// 16 pixels per step: 16 bytes widened and added to the column sums.
    #[target_feature(enable = "neon")]
    fn add_plane(row: &[u8], columns: &mut [u16]) -> usize {
        let pixels = row.len().min(columns.len()) / 16 * 16;
        for p in (0..pixels).step_by(16) {
            // SAFETY: p + 16 <= row.len() and columns.len().
            unsafe { add16(columns.as_mut_ptr().add(p), vld1q_u8(row.as_ptr().add(p))) };
        }
        pixels
    }

    /// 16 pixels (32 bytes) per step: a de-interleaving load puts the 16 Y bytes in one register.
    #[target_feature(enable = "neon")]
    fn add_yuyv(row: &[u8], columns: &mut [u16]) -> usize {
        let pixels = (row.len() / 2).min(columns.len()) / 16 * 16;
        for p in (0..pixels).step_by(16) {
            // SAFETY: pixels p..p+16 are bytes 2p..2p+32 of `row` and sums p..p+16, in bounds.
            unsafe {
                let pairs = vld2q_u8(row.as_ptr().add(2 * p));
                add16(columns.as_mut_ptr().add(p), pairs.0);
            }
        }
        pixels
    }

    /// 8 pixels per step: a de-interleaving load of 3 or 4 channels, then
    /// `(77·R + 150·G + 29·B + 128) >> 8` by widening multiply-adds in 16-bit lanes (at most
    /// 65 408: nothing wraps), added to the column sums.
    #[target_feature(enable = "neon")]
    fn add_packed(format: PixelFormat, row: &[u8], columns: &mut [u16]) -> usize {
        let bytes = luma_bytes(format);
        let pixels = (row.len() / bytes).min(columns.len()) / 8 * 8;
        for p in (0..pixels).step_by(8) {
            let source = row[bytes * p..].as_ptr();
            // SAFETY: 8 whole pixels (24 or 32 bytes) start at `source`.
            let (r, g, b) = unsafe {
                match format {
                    PixelFormat::Bgr8 => {
                        let v = vld3_u8(source);
                        (v.2, v.1, v.0)
                    }
                    PixelFormat::Rgba8 => {
                        let v = vld4_u8(source);
                        (v.0, v.1, v.2)
                    }
                    _ => {
                        let v = vld3_u8(source);
                        (v.0, v.1, v.2)
                    }
                }
            };
            let luma = vmull_u8(r, vdup_n_u8(77));
            let luma = vmlal_u8(luma, g, vdup_n_u8(150));
            let luma = vmlal_u8(luma, b, vdup_n_u8(29));
            let luma = vshrq_n_u16::<8>(vaddq_u16(luma, vdupq_n_u16(128)));
            // SAFETY: sums p..p+8 exist (p + 8 <= columns.len()).
            unsafe {
                let sums = columns.as_mut_ptr().add(p);
                vst1q_u16(sums, vaddq_u16(vld1q_u16(sums), luma));
            }
        }
        pixels
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::motion::pixel::pixel_luma;

    const FORMATS: [PixelFormat; 5] =
        [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8, PixelFormat::Yuyv, PixelFormat::Nv12];

    #[test]
    fn the_portable_set_leaves_rows_to_the_caller() {
        assert_eq!(Kernels::PORTABLE.add_row(PixelFormat::Nv12, &[1; 64], &mut [0; 64]), 0);
        assert_eq!(Kernels::detect().name(), SimdSet::detect(false).name());
    }

    #[test]
    fn the_gather_masks_pick_each_channel_of_8_pixels_once() {
        for format in [PixelFormat::Rgb8, PixelFormat::Bgr8, PixelFormat::Rgba8] {
            let bytes = luma_bytes(format);
            let row: Vec<u8> = (0..8 * bytes as u8).collect();
            for channel in 0..3 {
                let (low, high) = gather_masks(format, channel);
                for pixel in 0..8 {
                    let picked = match (low[2 * pixel], high[2 * pixel]) {
                        (l, -1) if l >= 0 => row[l as usize],
                        (-1, h) if h >= 0 => row[high_load(format) + h as usize],
                        other => panic!("{format:?} pixel {pixel} channel {channel}: {other:?}"),
                    };
                    assert_eq!(picked as usize, bytes * pixel + rgb_offsets(format)[channel]);
                    assert_eq!((low[2 * pixel + 1], high[2 * pixel + 1]), (-1, -1), "high bytes are zero");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(512))]

        /// Whatever prefix the kernel does, its sums are the portable code's, and it leaves the
        /// rest of the row's sums alone.
        #[test]
        fn the_kernels_add_rows_of_any_length_like_the_portable_code(
            format in proptest::sample::select(FORMATS.to_vec()),
            pixels in 0usize..200,
            seed in proptest::collection::vec(any::<u8>(), 800),
            start in proptest::collection::vec(0u16..=65_280 - 255, 200),
        ) {
            let bytes = luma_bytes(format);
            let row = &seed[..bytes * pixels];
            let start = &start[..pixels];
            let mut actual = start.to_vec();
            let done = Kernels::detect().add_row(format, row, &mut actual);
            let expected: Vec<u16> = start
                .iter()
                .zip(row.chunks_exact(bytes))
                .map(|(sum, pixel)| sum + pixel_luma(format, pixel))
                .collect();
            prop_assert_eq!(&actual[..done], &expected[..done]);
            prop_assert_eq!(&actual[done..], &start[done..]);
        }
    }
}
