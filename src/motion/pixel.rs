//! Step 2 of the luma image's definition (`super::luma`): the luma of one pixel, and where a
//! format's row keeps its pixels.
//!
//! Owns: [`luma_bytes`] and `pixel_luma`, shared by the reference, the fast downscale's row tails
//! and the SIMD kernels' tests. Must not: sum or scale anything.

use crate::frame::PixelFormat;

/// The bytes per pixel of the row the luma kernels read for `format`: an NV12 row is its Y plane's.
pub fn luma_bytes(format: PixelFormat) -> usize {
    match format {
        PixelFormat::Nv12 => 1,
        PixelFormat::Yuyv => 2,
        PixelFormat::Rgb8 | PixelFormat::Bgr8 => 3,
        PixelFormat::Rgba8 => 4,
    }
}

/// Where R, G and B sit in a packed pixel's bytes (YUV formats: their Y, three times).
pub(super) fn rgb_offsets(format: PixelFormat) -> [usize; 3] {
    match format {
        PixelFormat::Rgb8 | PixelFormat::Rgba8 => [0, 1, 2],
        PixelFormat::Bgr8 => [2, 1, 0],
        PixelFormat::Yuyv | PixelFormat::Nv12 => [0, 0, 0],
    }
}

/// Step 2 of the definition for one pixel's bytes (`luma_bytes(format)` of them).
#[inline(always)]
pub(super) fn pixel_luma(format: PixelFormat, pixel: &[u8]) -> u16 {
    match format {
        PixelFormat::Nv12 | PixelFormat::Yuyv => pixel[0] as u16,
        PixelFormat::Rgb8 | PixelFormat::Bgr8 | PixelFormat::Rgba8 => {
            let [r, g, b] = rgb_offsets(format).map(|offset| pixel[offset] as u16);
            (77 * r + 150 * g + 29 * b + 128) >> 8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rgb_luma_uses_bt601_weights_in_fixed_point() {
        let luma = |r, g, b| pixel_luma(PixelFormat::Rgb8, &[r, g, b]);
        assert_eq!((luma(255, 255, 255), luma(0, 0, 0)), (255, 0));
        // 77·255 + 128 = 19763 → 77.
        assert_eq!((luma(255, 0, 0), luma(0, 255, 0), luma(0, 0, 255)), (77, 149, 29));
        assert_eq!(pixel_luma(PixelFormat::Bgr8, &[255, 0, 0]), 29);
        assert_eq!(pixel_luma(PixelFormat::Rgba8, &[255, 0, 0, 255]), 77);
    }
}
