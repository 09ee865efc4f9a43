//! Explicit SIMD versions of the fast path's per-pixel row kernels, chosen once at run time:
//! AVX2 (with F16C) on x86_64, NEON on aarch64. The row conversions of packed RGB, BGR and RGBA
//! frames (bytes widened to f32 pixels by shuffles instead of one byte at a time) and of YUYV and
//! NV12 frames (computed straight from the definition's formulas instead of per-pixel table
//! lookups), the u8 encoding (round half away from zero, clamped), the horizontal filter, the
//! vertical filter (every tap of a column block summed in registers), the normalisation
//! `(v − mean) / std`, the split of interleaved RGB into channel planes (NCHW), and on x86 the
//! f16 encoding (`vcvtps2ph` straight into the tensor); on aarch64 `half`'s slice conversion
//! already picks the FP16 instructions at run time, so there is no NEON f16 kernel.
//!
//! Owns: the kernels, and the dispatch: [`Kernels::detect`] (which asks `crate::sys::simd` what
//! the CPU has) is the only way to get a SIMD kernel set. Must not: compute anything differently
//! from the portable kernels in `super::fast`: every lane does the definition's f32 operations in
//! the definition's order, without fused multiply-adds, so the tensors stay bit-identical to the
//! reference (the fast path's tests compare both, SIMD and portable, with it on random and real
//! frames, and property tests compare each kernel with the portable code on random rows).
//!
//! Every kernel does a prefix of its row (whole vectors) and returns how much it did; the caller
//! finishes the row with the portable code. The portable set does nothing (returns 0).

use crate::sys::simd::SimdSet;

/// One converted source pixel: R, G, B and a fourth lane that no result reads (it keeps the
/// horizontal sums 4 lanes wide, which the compiler maps to one SIMD register).
pub(super) type Pixel = [f32; 4];

/// The byte layouts of packed pixels the row conversion takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Packed {
    Rgb,
    Bgr,
    Rgba,
}

impl Packed {
    /// Bytes per pixel.
    pub(super) fn bytes(self) -> usize {
        match self {
            Packed::Rgb | Packed::Bgr => 3,
            Packed::Rgba => 4,
        }
    }
}

/// A kernel set. Only [`Kernels::detect`] makes a SIMD one, after checking that this CPU has its
/// instructions: holding a `Kernels` is what makes calling its kernels sound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kernels(SimdSet);

impl Kernels {
    /// No SIMD kernels: the portable code does everything.
    pub(super) const PORTABLE: Kernels = Kernels(SimdSet::Portable);

    /// The best set this CPU runs.
    pub(super) fn detect() -> Kernels {
        Kernels(SimdSet::detect(true))
    }

    /// The set's name, for benchmarks and logs.
    pub(super) fn name(self) -> &'static str {
        self.0.name()
    }

    /// Converts the first pixels of a packed row (`row`: [`Packed::bytes`] per pixel) into
    /// `rgbx` as `[R, G, B, 0]`; returns how many it converted (a multiple of 4).
    pub(super) fn packed_row(self, packed: Packed, row: &[u8], rgbx: &mut [Pixel]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::packed_row(packed, row, rgbx) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::packed_row(packed, row, rgbx) },
        }
    }

    /// Encodes the first `values` as u8 into `out` as the portable `round_to_u8`: clamped to
    /// 0..=255, rounded half away from zero (NaN to 0); returns how many it encoded.
    pub(super) fn u8_row(self, values: &[f32], out: &mut [u8]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::u8_row(values, out) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::u8_row(values, out) },
        }
    }

    /// Converts the first pixels of a YUYV row (`row`: 2 bytes per pixel) into `rgbx`; returns
    /// how many it converted (a multiple of 8).
    pub(super) fn yuyv_row(self, row: &[u8], rgbx: &mut [Pixel]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::yuyv_row(row, rgbx) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::yuyv_row(row, rgbx) },
        }
    }

    /// Converts the first pixels of an NV12 row (`luma`: 1 byte per pixel; `chroma`: the UV
    /// row under it, a U and V byte per pair of pixels) into `rgbx`; returns how many it converted
    /// (a multiple of 8).
    pub(super) fn nv12_row(self, luma: &[u8], chroma: &[u8], rgbx: &mut [Pixel]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::nv12_row(luma, chroma, rgbx) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::nv12_row(luma, chroma, rgbx) },
        }
    }

    /// The horizontal filter for windows of `N` taps (`first` and `weights` as in `AxisTaps`),
    /// for content pixels `0..done`, where `done` is what it returns. Windows that do not lie
    /// inside `rgbx` stop it.
    pub(super) fn filter_row<const N: usize>(
        self,
        first: &[u32],
        weights: &[f32],
        rgbx: &[Pixel],
        out: &mut [f32],
    ) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::filter_row::<N>(first, weights, rgbx, out) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::filter_row::<N>(first, weights, rgbx, out) },
        }
    }

    /// The vertical filter: `out[j] = Σ_k weights[k] · rows[slots[k]][j]`, from 0 in tap order,
    /// for `j` in `0..done`, where `done` is what it returns (a multiple of the vector width,
    /// within every row used).
    pub(super) fn vertical_row(self, rows: &[Vec<f32>], slots: &[usize], weights: &[f32], out: &mut [f32]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::vertical_row(rows, slots, weights, out) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::vertical_row(rows, slots, weights, out) },
        }
    }

    /// `values[j] = (values[j] − mean[j]) / std[j]` for `j` in `0..done`, where `done` is what
    /// it returns.
    pub(super) fn normalise(self, values: &mut [f32], mean: &[f32], std: &[f32]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::normalise(values, mean, std) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::normalise(values, mean, std) },
        }
    }

    /// Converts `values` to f16 (round to nearest even) into `out` as native-endian bytes, for
    /// values `0..done`, where `done` is what it returns. Only x86 has a kernel (F16C): on
    /// aarch64 `half`'s slice conversion already uses the FP16 instructions.
    pub(super) fn f16_row(self, values: &[f32], out: &mut [u8]) -> usize {
        match self.0 {
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 and F16C on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::f16_row(values, out) },
            _ => {
                let _ = (values, out);
                0
            }
        }
    }

    /// Splits interleaved RGB values into the three channels, `channels[c][i] = rgb[3i + c]`, for
    /// pixels `0..done`, where `done` is what it returns.
    pub(super) fn deinterleave(self, rgb: &[f32], channels: [&mut [f32]; 3]) -> usize {
        match self.0 {
            SimdSet::Portable => 0,
            // SAFETY: a `Kernels` holds `Avx2` only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            SimdSet::Avx2 => unsafe { x86::deinterleave(rgb, channels) },
            // SAFETY: a `Kernels` holds `Neon` only when `detect` found NEON on this CPU.
            #[cfg(target_arch = "aarch64")]
            SimdSet::Neon => unsafe { neon::deinterleave(rgb, channels) },
        }
    }
}

/// How many floats from 0 every row `rows[slot]` of `slots` and `out` have.
fn common_len(rows: &[Vec<f32>], slots: &[usize], out: &[f32]) -> usize {
    slots.iter().fold(out.len(), |len, &slot| rows.get(slot).map_or(0, |row| len.min(row.len())))
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Packed, Pixel};

    /// 8 YUYV pixels (16 bytes) per step: Y, U and V of each pixel picked by byte shuffles, then
    /// [`yuv8`].
    #[target_feature(enable = "avx2")]
    pub(super) fn yuyv_row(row: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = (row.len() / 2).min(rgbx.len()) / 8 * 8;
        let y_bytes = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
        let u_bytes = _mm_setr_epi8(1, 1, 5, 5, 9, 9, 13, 13, -1, -1, -1, -1, -1, -1, -1, -1);
        let v_bytes = _mm_setr_epi8(3, 3, 7, 7, 11, 11, 15, 15, -1, -1, -1, -1, -1, -1, -1, -1);
        for p in (0..pixels).step_by(8) {
            // SAFETY: pixels p..p+8 are bytes 2p..2p+16 of `row`, in bounds as p + 8 <= row.len() / 2.
            let bytes = unsafe { _mm_loadu_si128(row.as_ptr().add(2 * p).cast()) };
            let (y, u, v) =
                (_mm_shuffle_epi8(bytes, y_bytes), _mm_shuffle_epi8(bytes, u_bytes), _mm_shuffle_epi8(bytes, v_bytes));
            yuv8(y, u, v, &mut rgbx[p..p + 8]);
        }
        pixels
    }

    /// 8 NV12 pixels per step: 8 luma bytes, and the 4 UV pairs under them spread to each pixel
    /// of their pair by byte shuffles, then [`yuv8`].
    #[target_feature(enable = "avx2")]
    pub(super) fn nv12_row(luma: &[u8], chroma: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = luma.len().min(chroma.len()).min(rgbx.len()) / 8 * 8;
        let u_bytes = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, -1, -1, -1, -1, -1, -1, -1, -1);
        let v_bytes = _mm_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, -1, -1, -1, -1, -1, -1, -1, -1);
        for p in (0..pixels).step_by(8) {
            // SAFETY: p + 8 <= luma.len() and chroma.len(): 8 bytes of each at p.
            let (y, uv) = unsafe {
                (_mm_loadl_epi64(luma.as_ptr().add(p).cast()), _mm_loadl_epi64(chroma.as_ptr().add(p).cast()))
            };
            yuv8(y, _mm_shuffle_epi8(uv, u_bytes), _mm_shuffle_epi8(uv, v_bytes), &mut rgbx[p..p + 8]);
        }
        pixels
    }

    /// 8 pixels from the low 8 bytes of `y`, `u` and `v` (one each per pixel), to f32 in 8 lanes,
    /// then `c = 1.164·(Y−16)`, `R = c + 1.596·e`, `G = (c − 0.392·d) − 0.813·e`,
    /// `B = c + 2.017·d` (`d = U−128`, `e = V−128`), each clamped like `f32::clamp(0, 255)` (max
    /// with 0 first, keeping the value on a tie as `clamp` does, then min with 255), transposed to
    /// RGBX pixels (the fourth lane 0) in `out` (8 pixels).
    #[target_feature(enable = "avx2")]
    fn yuv8(y: __m128i, u: __m128i, v: __m128i, out: &mut [Pixel]) {
        let out = &mut out[..8];
        let (k1164, k16, k128) = (_mm256_set1_ps(1.164), _mm256_set1_ps(16.0), _mm256_set1_ps(128.0));
        let (k1596, k0392, k0813, k2017) =
            (_mm256_set1_ps(1.596), _mm256_set1_ps(0.392), _mm256_set1_ps(0.813), _mm256_set1_ps(2.017));
        let (zero, k255) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0));
        let to_f32 = |bytes: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        let clamp = |x: __m256| _mm256_min_ps(k255, _mm256_max_ps(zero, x));
        let y = to_f32(y);
        let d = _mm256_sub_ps(to_f32(u), k128);
        let e = _mm256_sub_ps(to_f32(v), k128);
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
        let out = out.as_mut_ptr().cast::<f32>();
        // SAFETY: `out` points to 8 pixels of 4 f32 each (32 floats), written 8 at a time.
        unsafe {
            _mm256_storeu_ps(out, _mm256_permute2f128_ps(p0, p1, 0x20));
            _mm256_storeu_ps(out.add(8), _mm256_permute2f128_ps(p2, p3, 0x20));
            _mm256_storeu_ps(out.add(16), _mm256_permute2f128_ps(p0, p1, 0x31));
            _mm256_storeu_ps(out.add(24), _mm256_permute2f128_ps(p2, p3, 0x31));
        }
    }

    /// 4 pixels per step from one 16-byte load: two byte shuffles put pixels 0, 1 and 2, 3 as
    /// `R G B 0` bytes in the low 8 bytes of a register, each widened to 8 i32 lanes and converted
    /// to f32 (exact: every byte is a small integer).
    #[target_feature(enable = "avx2")]
    pub(super) fn packed_row(packed: Packed, row: &[u8], rgbx: &mut [Pixel]) -> usize {
        let bytes = packed.bytes();
        // The load reads 16 bytes from pixel p's first: for 3-byte pixels 4 beyond the 4th.
        let pixels = (row.len().saturating_sub(16) / bytes + 1).min(row.len() / bytes).min(rgbx.len()) / 4 * 4;
        let (low, high) = match packed {
            Packed::Rgb => (
                _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                _mm_setr_epi8(6, 7, 8, -1, 9, 10, 11, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            ),
            Packed::Bgr => (
                _mm_setr_epi8(2, 1, 0, -1, 5, 4, 3, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                _mm_setr_epi8(8, 7, 6, -1, 11, 10, 9, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            ),
            Packed::Rgba => (
                _mm_setr_epi8(0, 1, 2, -1, 4, 5, 6, -1, -1, -1, -1, -1, -1, -1, -1, -1),
                _mm_setr_epi8(8, 9, 10, -1, 12, 13, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            ),
        };
        let to_f32 = |bytes: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
        for p in (0..pixels).step_by(4) {
            // SAFETY: bytes · p + 16 <= row.len() for every p < pixels (the bound above).
            let source = unsafe { _mm_loadu_si128(row.as_ptr().add(bytes * p).cast()) };
            let out = rgbx[p..p + 4].as_mut_ptr().cast::<f32>();
            // SAFETY: `out` points to 4 pixels of 4 f32 each (16 floats), written 8 at a time.
            unsafe {
                _mm256_storeu_ps(out, to_f32(_mm_shuffle_epi8(source, low)));
                _mm256_storeu_ps(out.add(8), to_f32(_mm_shuffle_epi8(source, high)));
            }
        }
        pixels
    }

    /// 32 values per step: `max(v, 0)` (0 for NaN, as `f32::clamp` then `as u8` give), `min`
    /// with 255, the integer part by truncation (exact on 0..=255), plus 1 where the fraction is
    /// at least 0.5; packed to bytes with saturation (nothing saturates), in order.
    #[target_feature(enable = "avx2")]
    pub(super) fn u8_row(values: &[f32], out: &mut [u8]) -> usize {
        let len = values.len().min(out.len()) / 32 * 32;
        let (zero, k255, half) = (_mm256_setzero_ps(), _mm256_set1_ps(255.0), _mm256_set1_ps(0.5));
        let round = |value: __m256| {
            let clamped = _mm256_min_ps(_mm256_max_ps(value, zero), k255);
            let whole = _mm256_cvttps_epi32(clamped);
            let fraction = _mm256_sub_ps(clamped, _mm256_cvtepi32_ps(whole));
            // All ones (−1) where the fraction rounds up.
            let up = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GE_OQ>(fraction, half));
            _mm256_sub_epi32(whole, up)
        };
        // packs work within 128-bit lanes: dwords of the packed bytes come out as
        // a0-3 b0-3 c0-3 d0-3 a4-7 b4-7 c4-7 d4-7.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for j in (0..len).step_by(32) {
            // SAFETY: j + 32 <= len: values j..j+32 and bytes j..j+32 of `out` exist.
            unsafe {
                let source = values.as_ptr().add(j);
                let [a, b, c, d] = [0, 8, 16, 24].map(|k| round(_mm256_loadu_ps(source.add(k))));
                let words = (_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
                let bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words.0, words.1), order);
                _mm256_storeu_si256(out.as_mut_ptr().add(j).cast(), bytes);
            }
        }
        len
    }

    /// Two content pixels per 256-bit register: pixel `i` in the low half, `i + 1` in the high,
    /// each summing `weight · pixel` over its window from 0 in tap order, as the portable kernel.
    /// The weights of both pixels are loaded 4 taps at a time into the matching halves, and each
    /// tap's pair broadcast within the halves by an in-lane permutation. A pixel's 4-float store
    /// runs one float into the next pixel's place, which that pixel's own store then overwrites;
    /// so the last pixel is left to the caller.
    #[target_feature(enable = "avx2")]
    pub(super) fn filter_row<const N: usize>(first: &[u32], weights: &[f32], rgbx: &[Pixel], out: &mut [f32]) -> usize {
        let count = (out.len() / 3).min(first.len()).min(weights.len() / N);
        let in_bounds = |i: usize| first[i] as usize + N <= rgbx.len();
        // The last 4-tap load of pixel i + 1's weights may run into the next pixel's (unused), not
        // past the slice.
        let weights_in_bounds = |i: usize| (i + 1) * N + N.next_multiple_of(4) <= weights.len();
        let mut i = 0;
        while i + 2 < count && in_bounds(i) && in_bounds(i + 1) && weights_in_bounds(i) {
            let (low, high) = (first[i] as usize, first[i + 1] as usize);
            let (w_low, w_high) = (weights[i * N..].as_ptr(), weights[(i + 1) * N..].as_ptr());
            let (mut sum, mut four) = (_mm256_setzero_ps(), _mm256_setzero_ps());
            for k in 0..N {
                if k % 4 == 0 {
                    // SAFETY: taps k..k+4 of both pixels lie inside `weights` (checked above).
                    four = unsafe { _mm256_loadu2_m128(w_high.add(k), w_low.add(k)) };
                }
                let weight = match k % 4 {
                    0 => _mm256_permute_ps::<0x00>(four),
                    1 => _mm256_permute_ps::<0x55>(four),
                    2 => _mm256_permute_ps::<0xAA>(four),
                    _ => _mm256_permute_ps::<0xFF>(four),
                };
                // SAFETY: both windows lie inside `rgbx` (checked above); each pixel is 4 f32.
                let pixels = unsafe {
                    _mm256_loadu2_m128(rgbx.as_ptr().add(high + k).cast(), rgbx.as_ptr().add(low + k).cast())
                };
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

    /// Column blocks of 32 floats (4 registers) while they last, then of 8: per block, every
    /// tap's `weight · value` added to a sum from 0 in tap order, the sums kept in registers.
    #[target_feature(enable = "avx2")]
    pub(super) fn vertical_row(rows: &[Vec<f32>], slots: &[usize], weights: &[f32], out: &mut [f32]) -> usize {
        let taps = slots.len().min(weights.len());
        let (slots, weights) = (&slots[..taps], &weights[..taps]);
        let len = super::common_len(rows, slots, out) / 8 * 8;
        let out = out.as_mut_ptr();
        let mut j = 0;
        while j + 32 <= len {
            let mut sums = [_mm256_setzero_ps(); 4];
            for (&slot, &weight) in slots.iter().zip(weights) {
                let (row, weight) = (rows[slot].as_ptr(), _mm256_set1_ps(weight));
                for (v, sum) in sums.iter_mut().enumerate() {
                    // SAFETY: j + 8v + 8 <= len, which every used row's length bounds.
                    let values = unsafe { _mm256_loadu_ps(row.add(j + 8 * v)) };
                    *sum = _mm256_add_ps(*sum, _mm256_mul_ps(weight, values));
                }
            }
            for (v, sum) in sums.iter().enumerate() {
                // SAFETY: j + 8v + 8 <= len <= out's length.
                unsafe { _mm256_storeu_ps(out.add(j + 8 * v), *sum) };
            }
            j += 32;
        }
        while j + 8 <= len {
            let mut sum = _mm256_setzero_ps();
            for (&slot, &weight) in slots.iter().zip(weights) {
                // SAFETY: j + 8 <= len, which every used row's length bounds.
                let values = unsafe { _mm256_loadu_ps(rows[slot].as_ptr().add(j)) };
                sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_set1_ps(weight), values));
            }
            // SAFETY: j + 8 <= len <= out's length.
            unsafe { _mm256_storeu_ps(out.add(j), sum) };
            j += 8;
        }
        len
    }

    /// 8 values per step, by the instruction `half::f16::from_f32` uses on this CPU (`vcvtps2ph`,
    /// round to nearest even), stored straight into the byte slice.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn f16_row(values: &[f32], out: &mut [u8]) -> usize {
        let len = values.len().min(out.len() / 2) / 8 * 8;
        for j in (0..len).step_by(8) {
            // SAFETY: j + 8 <= len: values j..j+8 exist, and bytes 2j..2j+16 of `out`.
            unsafe {
                let halves = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(values.as_ptr().add(j)));
                _mm_storeu_si128(out.as_mut_ptr().add(2 * j).cast(), halves);
            }
        }
        len
    }

    /// 8 values per step: one subtraction, then one (correctly rounded) division per lane.
    #[target_feature(enable = "avx2")]
    pub(super) fn normalise(values: &mut [f32], mean: &[f32], std: &[f32]) -> usize {
        let len = values.len().min(mean.len()).min(std.len()) / 8 * 8;
        for j in (0..len).step_by(8) {
            // SAFETY: j + 8 <= len, which bounds all three slices.
            unsafe {
                let value = _mm256_loadu_ps(values.as_ptr().add(j));
                let (mean, std) = (_mm256_loadu_ps(mean.as_ptr().add(j)), _mm256_loadu_ps(std.as_ptr().add(j)));
                _mm256_storeu_ps(values.as_mut_ptr().add(j), _mm256_div_ps(_mm256_sub_ps(value, mean), std));
            }
        }
        len
    }

    /// 8 pixels (3 registers) per step. Lane `i` of a blend of the three registers takes the one
    /// where lane `i` holds the wanted channel (channel c of pixel p is float 3p + c, so lane
    /// `i` of register `r` holds channel `(8r + i) % 3`); one permutation then puts the pixels
    /// in order.
    #[target_feature(enable = "avx2")]
    pub(super) fn deinterleave(rgb: &[f32], channels: [&mut [f32]; 3]) -> usize {
        let [red, green, blue] = channels;
        let pixels = (rgb.len() / 3).min(red.len()).min(green.len()).min(blue.len()) / 8 * 8;
        let order_r = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
        let order_g = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
        let order_b = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
        for p in (0..pixels).step_by(8) {
            // SAFETY: floats 3p..3p+24 of `rgb` exist as p + 8 <= rgb.len() / 3.
            let (a, b, c) = unsafe {
                let source = rgb.as_ptr().add(3 * p);
                (_mm256_loadu_ps(source), _mm256_loadu_ps(source.add(8)), _mm256_loadu_ps(source.add(16)))
            };
            let r = _mm256_blend_ps::<0x24>(_mm256_blend_ps::<0x92>(a, b), c);
            let g = _mm256_blend_ps::<0x49>(_mm256_blend_ps::<0x24>(a, b), c);
            let b = _mm256_blend_ps::<0x92>(_mm256_blend_ps::<0x49>(a, b), c);
            // SAFETY: p + 8 <= every channel's length.
            unsafe {
                _mm256_storeu_ps(red.as_mut_ptr().add(p), _mm256_permutevar8x32_ps(r, order_r));
                _mm256_storeu_ps(green.as_mut_ptr().add(p), _mm256_permutevar8x32_ps(g, order_g));
                _mm256_storeu_ps(blue.as_mut_ptr().add(p), _mm256_permutevar8x32_ps(b, order_b));
            }
        }
        pixels
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::{Packed, Pixel};

    /// `f32::clamp(x, 0, 255)` lane by lane, by comparisons as `clamp` does (not `fmax`/`fmin`,
    /// which differ from it on −0).
    #[target_feature(enable = "neon")]
    fn clamp(x: float32x4_t) -> float32x4_t {
        let (zero, k255) = (vdupq_n_f32(0.0), vdupq_n_f32(255.0));
        let x = vbslq_f32(vcltq_f32(x, zero), zero, x);
        vbslq_f32(vcgtq_f32(x, k255), k255, x)
    }

    /// Bytes 0..8 of `bytes` as four f32 lanes (`high`: bytes 4..8, else 0..4).
    #[target_feature(enable = "neon")]
    fn to_f32(bytes: uint8x8_t, high: bool) -> float32x4_t {
        let wide = vmovl_u8(bytes);
        vcvtq_f32_u32(if high { vmovl_high_u16(wide) } else { vmovl_u16(vget_low_u16(wide)) })
    }

    /// 16 YUYV pixels (32 bytes) per step, split by `vld4` into even Y, U, odd Y and V (8
    /// pairs), then [`yuv16`].
    #[target_feature(enable = "neon")]
    pub(super) fn yuyv_row(row: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = (row.len() / 2).min(rgbx.len()) / 16 * 16;
        for p in (0..pixels).step_by(16) {
            // SAFETY: pixels p..p+16 are bytes 2p..2p+32 of `row`, in bounds as p + 16 <= row.len() / 2.
            let yuyv = unsafe { vld4_u8(row.as_ptr().add(2 * p)) };
            yuv16(yuyv.0, yuyv.1, yuyv.2, yuyv.3, &mut rgbx[p..p + 16]);
        }
        pixels
    }

    /// 16 NV12 pixels per step: luma split by `vld2` into even and odd pixels, the 8 UV pairs
    /// under them into U and V, then [`yuv16`].
    #[target_feature(enable = "neon")]
    pub(super) fn nv12_row(luma: &[u8], chroma: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = luma.len().min(chroma.len()).min(rgbx.len()) / 16 * 16;
        for p in (0..pixels).step_by(16) {
            // SAFETY: p + 16 <= luma.len() and chroma.len(): 16 bytes of each at p.
            let (y, uv) = unsafe { (vld2_u8(luma.as_ptr().add(p)), vld2_u8(chroma.as_ptr().add(p))) };
            yuv16(y.0, uv.0, y.1, uv.1, &mut rgbx[p..p + 16]);
        }
        pixels
    }

    /// 16 pixels from 8 pairs (even Y, U, odd Y, V), per group of 4 pairs: `c = 1.164·(Y−16)`,
    /// `R = c + 1.596·e`, `G = (c − 0.392·d) − 0.813·e`, `B = c + 2.017·d` (`d = U−128`,
    /// `e = V−128`), each clamped, even and odd pixels zipped into order and stored as RGBX by
    /// `vst4` (the fourth lane 0) in `out` (16 pixels).
    #[target_feature(enable = "neon")]
    fn yuv16(even_y: uint8x8_t, u: uint8x8_t, odd_y: uint8x8_t, v: uint8x8_t, out: &mut [Pixel]) {
        let out = &mut out[..16];
        let (k1164, k16, k128) = (vdupq_n_f32(1.164), vdupq_n_f32(16.0), vdupq_n_f32(128.0));
        let (k1596, k0392, k0813, k2017) =
            (vdupq_n_f32(1.596), vdupq_n_f32(0.392), vdupq_n_f32(0.813), vdupq_n_f32(2.017));
        let zero = vdupq_n_f32(0.0);
        for (group, high) in [(0, false), (1, true)] {
            let d = vsubq_f32(to_f32(u, high), k128);
            let e = vsubq_f32(to_f32(v, high), k128);
            let rgb = |y: float32x4_t| {
                let c = vmulq_f32(k1164, vsubq_f32(y, k16));
                let r = clamp(vaddq_f32(c, vmulq_f32(k1596, e)));
                let g = clamp(vsubq_f32(vsubq_f32(c, vmulq_f32(k0392, d)), vmulq_f32(k0813, e)));
                let b = clamp(vaddq_f32(c, vmulq_f32(k2017, d)));
                (r, g, b)
            };
            let (even, odd) = (rgb(to_f32(even_y, high)), rgb(to_f32(odd_y, high)));
            let first =
                float32x4x4_t(vzip1q_f32(even.0, odd.0), vzip1q_f32(even.1, odd.1), vzip1q_f32(even.2, odd.2), zero);
            let second =
                float32x4x4_t(vzip2q_f32(even.0, odd.0), vzip2q_f32(even.1, odd.1), vzip2q_f32(even.2, odd.2), zero);
            let target = out[8 * group..8 * group + 8].as_mut_ptr().cast::<f32>();
            // SAFETY: `target` points to 8 pixels of 4 f32 each; each store writes 4 of them.
            unsafe {
                vst4q_f32(target, first);
                vst4q_f32(target.add(16), second);
            }
        }
    }

    /// 8 pixels per step, split into channels by `vld3`/`vld4`, widened to f32 (exact) and
    /// stored as RGBX by `vst4` (the fourth lane 0).
    #[target_feature(enable = "neon")]
    pub(super) fn packed_row(packed: Packed, row: &[u8], rgbx: &mut [Pixel]) -> usize {
        let pixels = (row.len() / packed.bytes()).min(rgbx.len()) / 8 * 8;
        let zero = vdupq_n_f32(0.0);
        for p in (0..pixels).step_by(8) {
            // SAFETY: pixels p..p+8 are bytes bytes·p..bytes·(p+8) of `row`, in bounds as
            // p + 8 <= row.len() / bytes.
            let (r, g, b) = unsafe {
                let source = row.as_ptr().add(packed.bytes() * p);
                match packed {
                    Packed::Rgb => {
                        let split = vld3_u8(source);
                        (split.0, split.1, split.2)
                    }
                    Packed::Bgr => {
                        let split = vld3_u8(source);
                        (split.2, split.1, split.0)
                    }
                    Packed::Rgba => {
                        let split = vld4_u8(source);
                        (split.0, split.1, split.2)
                    }
                }
            };
            let out = rgbx[p..p + 8].as_mut_ptr().cast::<f32>();
            for (half, high) in [(0, false), (1, true)] {
                let pixels = float32x4x4_t(to_f32(r, high), to_f32(g, high), to_f32(b, high), zero);
                // SAFETY: `out` points to 8 pixels of 4 f32 each; each store writes 4 of them.
                unsafe { vst4q_f32(out.add(16 * half), pixels) };
            }
        }
        pixels
    }

    /// 16 values per step: `vmaxnm` with 0 (0 for NaN, as `f32::clamp` then `as u8` give), `min`
    /// with 255, the integer part by truncation (exact on 0..=255), plus 1 where the fraction is
    /// at least 0.5; narrowed to bytes (nothing exceeds 255).
    #[target_feature(enable = "neon")]
    pub(super) fn u8_row(values: &[f32], out: &mut [u8]) -> usize {
        let len = values.len().min(out.len()) / 16 * 16;
        let (zero, k255, half) = (vdupq_n_f32(0.0), vdupq_n_f32(255.0), vdupq_n_f32(0.5));
        let round = |value: float32x4_t| {
            let clamped = vminq_f32(vmaxnmq_f32(value, zero), k255);
            let whole = vcvtq_u32_f32(clamped);
            let fraction = vsubq_f32(clamped, vcvtq_f32_u32(whole));
            // All ones (−1 as an integer) where the fraction rounds up.
            vsubq_u32(whole, vcgeq_f32(fraction, half))
        };
        for j in (0..len).step_by(16) {
            // SAFETY: j + 16 <= len: values j..j+16 and bytes j..j+16 of `out` exist.
            unsafe {
                let source = values.as_ptr().add(j);
                let [a, b, c, d] = [0, 4, 8, 12].map(|k| round(vld1q_f32(source.add(k))));
                let low = vcombine_u16(vmovn_u32(a), vmovn_u32(b));
                let high = vcombine_u16(vmovn_u32(c), vmovn_u32(d));
                vst1q_u8(out.as_mut_ptr().add(j), vcombine_u8(vmovn_u16(low), vmovn_u16(high)));
            }
        }
        len
    }

    /// Two content pixels at a time in two registers, each summing `weight · pixel` over its
    /// window from 0 in tap order, as the portable kernel. A pixel's 4-float store runs one float
    /// into the next pixel's place, which that pixel's own store then overwrites; so the last
    /// pixel is left to the caller.
    #[target_feature(enable = "neon")]
    pub(super) fn filter_row<const N: usize>(first: &[u32], weights: &[f32], rgbx: &[Pixel], out: &mut [f32]) -> usize {
        let count = (out.len() / 3).min(first.len()).min(weights.len() / N);
        let in_bounds = |i: usize| first[i] as usize + N <= rgbx.len();
        let mut i = 0;
        while i + 2 < count && in_bounds(i) && in_bounds(i + 1) {
            let (low, high) = (first[i] as usize, first[i + 1] as usize);
            let (w_low, w_high) = (&weights[i * N..(i + 1) * N], &weights[(i + 1) * N..(i + 2) * N]);
            let (mut sum_low, mut sum_high) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
            for k in 0..N {
                // SAFETY: both windows lie inside `rgbx` (checked above); each pixel is 4 f32.
                let (pixel_low, pixel_high) = unsafe {
                    (vld1q_f32(rgbx.as_ptr().add(low + k).cast()), vld1q_f32(rgbx.as_ptr().add(high + k).cast()))
                };
                sum_low = vaddq_f32(sum_low, vmulq_f32(vdupq_n_f32(w_low[k]), pixel_low));
                sum_high = vaddq_f32(sum_high, vmulq_f32(vdupq_n_f32(w_high[k]), pixel_high));
            }
            let target = out[3 * i..3 * i + 7].as_mut_ptr();
            // SAFETY: floats 3i..3i+7 of `out` exist (i + 2 < count); pixel i first, then i + 1.
            unsafe {
                vst1q_f32(target, sum_low);
                vst1q_f32(target.add(3), sum_high);
            }
            i += 2;
        }
        i
    }

    /// Column blocks of 16 floats (4 registers) while they last, then of 4: per block, every
    /// tap's `weight · value` added to a sum from 0 in tap order, the sums kept in registers.
    #[target_feature(enable = "neon")]
    pub(super) fn vertical_row(rows: &[Vec<f32>], slots: &[usize], weights: &[f32], out: &mut [f32]) -> usize {
        let taps = slots.len().min(weights.len());
        let (slots, weights) = (&slots[..taps], &weights[..taps]);
        let len = super::common_len(rows, slots, out) / 4 * 4;
        let out = out.as_mut_ptr();
        let mut j = 0;
        while j + 16 <= len {
            let mut sums = [vdupq_n_f32(0.0); 4];
            for (&slot, &weight) in slots.iter().zip(weights) {
                let (row, weight) = (rows[slot].as_ptr(), vdupq_n_f32(weight));
                for (v, sum) in sums.iter_mut().enumerate() {
                    // SAFETY: j + 4v + 4 <= len, which every used row's length bounds.
                    let values = unsafe { vld1q_f32(row.add(j + 4 * v)) };
                    *sum = vaddq_f32(*sum, vmulq_f32(weight, values));
                }
            }
            for (v, sum) in sums.iter().enumerate() {
                // SAFETY: j + 4v + 4 <= len <= out's length.
                unsafe { vst1q_f32(out.add(j + 4 * v), *sum) };
            }
            j += 16;
        }
        while j + 4 <= len {
            let mut sum = vdupq_n_f32(0.0);
            for (&slot, &weight) in slots.iter().zip(weights) {
                // SAFETY: j + 4 <= len, which every used row's length bounds.
                let values = unsafe { vld1q_f32(rows[slot].as_ptr().add(j)) };
                sum = vaddq_f32(sum, vmulq_f32(vdupq_n_f32(weight), values));
            }
            // SAFETY: j + 4 <= len <= out's length.
            unsafe { vst1q_f32(out.add(j), sum) };
            j += 4;
        }
        len
    }

    /// 4 values per step: one subtraction, then one (correctly rounded) division per lane.
    #[target_feature(enable = "neon")]
    pub(super) fn normalise(values: &mut [f32], mean: &[f32], std: &[f32]) -> usize {
        let len = values.len().min(mean.len()).min(std.len()) / 4 * 4;
        for j in (0..len).step_by(4) {
            // SAFETY: j + 4 <= len, which bounds all three slices.
            unsafe {
                let value = vld1q_f32(values.as_ptr().add(j));
                let (mean, std) = (vld1q_f32(mean.as_ptr().add(j)), vld1q_f32(std.as_ptr().add(j)));
                vst1q_f32(values.as_mut_ptr().add(j), vdivq_f32(vsubq_f32(value, mean), std));
            }
        }
        len
    }

    /// 4 pixels per step, split by `vld3`.
    #[target_feature(enable = "neon")]
    pub(super) fn deinterleave(rgb: &[f32], channels: [&mut [f32]; 3]) -> usize {
        let [red, green, blue] = channels;
        let pixels = (rgb.len() / 3).min(red.len()).min(green.len()).min(blue.len()) / 4 * 4;
        for p in (0..pixels).step_by(4) {
            // SAFETY: floats 3p..3p+12 of `rgb` exist, and p + 4 <= every channel's length.
            unsafe {
                let split = vld3q_f32(rgb.as_ptr().add(3 * p));
                vst1q_f32(red.as_mut_ptr().add(p), split.0);
                vst1q_f32(green.as_mut_ptr().add(p), split.1);
                vst1q_f32(blue.as_mut_ptr().add(p), split.2);
            }
        }
        pixels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_takes_the_cpus_set_with_f16c_and_the_portable_set_leaves_rows_to_the_caller() {
        assert_eq!(Kernels::detect(), Kernels(SimdSet::detect(true)));
        let mut values = [0.0; 24];
        assert_eq!(Kernels::PORTABLE.normalise(&mut values, &[0.0; 24], &[1.0; 24]), 0);
    }
}
