//! Explicit SIMD versions of the fast path's hottest row kernels, chosen at run time: on x86_64
//! with AVX2, the YUYV row conversion (8 pixels per step, computed straight from the definition's
//! formulas instead of per-pixel table lookups) and the horizontal filter (two content pixels per
//! 256-bit register).
//!
//! Owns: the kernels, and the dispatch (`is_x86_feature_detected!`). Must not: compute anything
//! differently from the portable kernels in `super::fast`: every lane does the definition's f32
//! operations in the definition's order, without fused multiply-adds, so the tensors stay
//! bit-identical to the reference (the fast path's tests compare both, SIMD and portable, with it
//! on random and real frames).

/// One converted source pixel: R, G, B and a lane that is 0 (it keeps the horizontal sums 4 lanes
/// wide, which the compiler maps to one SIMD register).
pub(super) type Pixel = [f32; 4];

/// Whether this CPU has the SIMD kernels' instructions.
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Converts the first pixels of a YUYV row (`row`: 2 bytes per pixel) into `rgbx`, 8 at a time;
/// returns how many it converted (a multiple of 8, 0 without [`available`] kernels; the caller
/// converts the rest).
pub(super) fn yuyv_row(row: &[u8], rgbx: &mut [Pixel]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: `available` checked that this CPU has AVX2, the only feature the function uses.
        return unsafe { x86::yuyv_row_avx2(row, rgbx) };
    }
    let _ = (row, rgbx);
    0
}

/// The horizontal filter of [`super::fast`] for windows of `N` taps, for content pixels
/// `0..done` where `done` is what it returns (0 without [`available`] kernels; the caller filters
/// the rest). `first` and
/// `weights` are the taps; every window must lie inside `rgbx`.
pub(super) fn filter_row<const N: usize>(first: &[u32], weights: &[f32], rgbx: &[Pixel], out: &mut [f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if available() {
        // SAFETY: `available` checked that this CPU has AVX2, the only feature the function uses.
        return unsafe { x86::filter_row_avx2::<N>(first, weights, rgbx, out) };
    }
    let _ = (first, weights, rgbx, out);
    0
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::Pixel;

    /// 8 YUYV pixels (16 bytes) per step: Y to f32 in 8 lanes, U and V of each pixel's pair
    /// likewise, then `c = 1.164·(Y−16)`, `R = c + 1.596·e`, `G = (c − 0.392·d) − 0.813·e`,
    /// `B = c + 2.017·d` (`d = U−128`, `e = V−128`), each clamped like `f32::clamp(0, 255)` (max
    /// with 0 first, keeping the value on a tie as `clamp` does, then min with 255), transposed to
    /// RGBX pixels (the fourth lane 0).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn yuyv_row_avx2(row: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = (row.len() / 2).min(rgbx.len()) / 8 * 8;
        let (k1164, k16, k128) = (_mm256_set1_ps(1.164), _mm256_set1_ps(16.0), _mm256_set1_ps(128.0));
        let (k1596, k0392, k0813, k2017) =
            (_mm256_set1_ps(1.596), _mm256_set1_ps(0.392), _mm256_set1_ps(0.813), _mm256_set1_ps(2.017));
        let (zero, k255) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let y_bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
        let u_bytes = _mm_setr_epi8(1, 1, 5, 5, 9, 9, 13, 13, -1, -1, -1, -1, -1, -1, -1, -1);
        let v_bytes = _mm_setr_epi8(3, 3, 7, 7, 11, 11, 15, 15, -1, -1, -1, -1, -1, -1, -1, -1);
        let to_f32 = |bytes: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        let clamp = |x: __m256| _mm256_min_ps(k255, _mm256_max_ps(zero, x));
        for p in (0..pixels).step_by(8) {
            // SAFETY: pixels p..p+8 are bytes 2p..2p+16 of `row`, in bounds as p + 8 <= row.len() / 2.
            let bytes = unsafe { _mm_loadu_si128(row.as_ptr().add(2 * p).cast()) };
            let y = to_f32(_mm_shuffle_epi8(bytes, y_bytes));
            let d = _mm256_sub_ps(to_f32(_mm_shuffle_epi8(bytes, u_bytes)), k128);
            let e = _mm256_sub_ps(to_f32(_mm_shuffle_epi8(bytes, v_bytes)), k128);
            let c = _mm256_mul_ps(k1164, _mm256_sub_ps(y, k16));
            let r = clamp(_mm256_add_ps(c, _mm256_mul_ps(k1596, e)));
            let g = clamp(_mm256_sub_ps(_mm256_sub_ps(c, _mm256_mul_ps(k0392, d)), _mm256_mul_ps(k0813, e)));
            let b = clamp(_mm256_add_ps(c, _mm256_mul_ps(k2017, d)));
            // Lanes (r_i, g_i, b_i, 0): pixels 0, 1, 2, 3 in the low halves, 4..8 in the high.
            let (rg_low, rg_high) = (_mm256_unpacklo_ps(r, g), _mm256_unpackhi_ps(r, g));
            let (b_low, b_high) = (_mm256_unpacklo_ps(b, zero), _mm256_unpackhi_ps(b, zero));
            let pair = |rg: __m256, b0: __m256, high: bool| {
                let (rg, b0) = (_mm256_castps_pd(rg), _mm256_castps_pd(b0));
                _mm256_castpd_ps(if high { _mm256_unpackhi_pd(rg, b0) } else { _mm256_unpacklo_pd(rg, b0) })
            };
            let (p0, p1) = (pair(rg_low, b_low, false), pair(rg_low, b_low, true));
            let (p2, p3) = (pair(rg_high, b_high, false), pair(rg_high, b_high, true));
            let out = rgbx[p..p + 8].as_mut_ptr().cast::<f32>();
            // SAFETY: `out` points to 8 pixels of 4 f32 each (32 floats), written 8 at a time.
            unsafe {
                _mm256_storeu_ps(out, _mm256_permute2f128_ps(p0, p1, 0x20));
                _mm256_storeu_ps(out.add(8), _mm256_permute2f128_ps(p2, p3, 0x20));
                _mm256_storeu_ps(out.add(16), _mm256_permute2f128_ps(p0, p1, 0x31));
                _mm256_storeu_ps(out.add(24), _mm256_permute2f128_ps(p2, p3, 0x31));
            }
        }
        pixels
    }

    /// Two content pixels per 256-bit register: pixel `i` in the low half, `i + 1` in the high,
    /// each summing `weight · pixel` over its window from 0 in tap order, as the portable kernel.
    /// A pixel's 4-float store runs one float into the next pixel's place, which that pixel's own
    /// store then overwrites; so the last pixel is left to the caller.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn filter_row_avx2<const N: usize>(
        first: &[u32],
        weights: &[f32],
        rgbx: &[Pixel],
        out: &mut [f32],
    ) -> usize {
        let count = (out.len() / 3).min(first.len()).min(weights.len() / N);
        let in_bounds = |i: usize| first[i] as usize + N <= rgbx.len();
        let mut i = 0;
        while i + 2 < count && in_bounds(i) && in_bounds(i + 1) {
            let (low, high) = (first[i] as usize, first[i + 1] as usize);
            let (w_low, w_high) = (&weights[i * N..(i + 1) * N], &weights[(i + 1) * N..(i + 2) * N]);
            let mut sum = _mm256_setzero_ps();
            for k in 0..N {
                // SAFETY: both windows lie inside `rgbx` (checked above); each pixel is 4 f32.
                let pixels = unsafe {
                    _mm256_loadu2_m128(rgbx.as_ptr().add(high + k).cast(), rgbx.as_ptr().add(low + k).cast())
                };
                let weight = _mm256_set_m128(_mm_set1_ps(w_high[k]), _mm_set1_ps(w_low[k]));
                sum = _mm256_add_ps(sum, _mm256_mul_ps(weight, pixels));
            }
            let target = out[3 * i..3 * i + 7].as_mut_ptr();
            // SAFETY: floats 3i..3i+7 of `out` exist (i + 2 < count); low half first, then high.
            unsafe {
                _mm_storeu_ps(target, _mm256_castps256_ps128(sum));
                _mm_storeu_ps(target.add(3), _mm256_extractf128_ps(sum, 1));
            }
            i += 2;
        }
        i
    }
}
