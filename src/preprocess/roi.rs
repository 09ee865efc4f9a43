//! A region of interest: the part of a frame that preprocessing treats as its source, so that a
//! detection's crop goes through the same definition (and, on the GPU, the same kernel) as a
//! whole frame.
//!
//! Owns: [`Roi`], its checks against a frame ([`UnusableRoi`]), and snapping a detection box outward to whole
//! pixels and to the chroma grid of subsampled formats. Must not: copy pixels (both
//! implementations read the frame in place through the ROI's offset and the frame's row pitch).
//!
//! With an ROI, the module definition applies with `src_w`, `src_h` = the ROI's size and source
//! pixel `(i, j)` = frame pixel `(x + i, y + j)`; chroma is taken by the frame pixel's absolute
//! position, so a YUYV ROI starts at an even `x` and an NV12 ROI at an even `x` and `y` (pairs are
//! never split: the ROI's pixels convert exactly as in the whole frame).

use crate::frame::{FrameMeta, PixelFormat};

/// A rectangle of whole frame pixels: columns `x .. x + width`, rows `y .. y + height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roi {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

/// An ROI that preprocessing cannot take from its frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("region {roi} is empty, outside the {width}x{height} {format} frame or off its chroma grid")]
pub struct UnusableRoi {
    pub roi: Roi,
    pub format: &'static str,
    pub width: u32,
    pub height: u32,
}

/// The alignment of an ROI's origin that `format`'s chroma needs, per axis.
fn alignment(format: PixelFormat) -> (u32, u32) {
    match format {
        PixelFormat::Yuyv => (2, 1),
        PixelFormat::Nv12 => (2, 2),
        PixelFormat::Rgb8 | PixelFormat::Bgr8 | PixelFormat::Rgba8 => (1, 1),
    }
}

impl Roi {
    /// The whole frame.
    pub fn full(meta: &FrameMeta) -> Roi {
        Roi { x: 0, y: 0, width: meta.width, height: meta.height }
    }

    /// Whether this is all of a `meta` frame.
    pub fn is_full(&self, meta: &FrameMeta) -> bool {
        *self == Roi::full(meta)
    }

    /// The smallest ROI that holds the box `x1..x2` × `y1..y2` (frame pixels, clamped to the frame)
    /// and starts on `meta`'s chroma grid; `None` for a box with no area inside the frame or
    /// non-finite corners.
    pub fn around_box(meta: &FrameMeta, x1: f32, y1: f32, x2: f32, y2: f32) -> Option<Roi> {
        if ![x1, y1, x2, y2].iter().all(|v| v.is_finite()) {
            return None;
        }
        let (align_x, align_y) = alignment(meta.format);
        let axis = |low: f32, high: f32, len: u32, align: u32| {
            let start = (low.floor().max(0.0) as u32).min(len) / align * align;
            let end = (high.ceil().max(0.0) as u32).min(len);
            (end > start).then_some((start, end - start))
        };
        let (x, width) = axis(x1, x2, meta.width, align_x)?;
        let (y, height) = axis(y1, y2, meta.height, align_y)?;
        Some(Roi { x, y, width, height })
    }

    /// Checks that the ROI is not empty, lies inside the `meta` frame and starts on its chroma grid.
    pub fn check(&self, meta: &FrameMeta) -> Result<(), UnusableRoi> {
        let (align_x, align_y) = alignment(meta.format);
        let inside = self.width > 0
            && self.height > 0
            && self.x.checked_add(self.width).is_some_and(|end| end <= meta.width)
            && self.y.checked_add(self.height).is_some_and(|end| end <= meta.height);
        if !inside || !self.x.is_multiple_of(align_x) || !self.y.is_multiple_of(align_y) {
            return Err(UnusableRoi { roi: *self, format: meta.format.name(), width: meta.width, height: meta.height });
        }
        Ok(())
    }
}

impl std::fmt::Display for Roi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{} at ({}, {})", self.width, self.height, self.x, self.y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResizeFilter, ResizeKind, TensorDtype, TensorLayout};
    use crate::preprocess::reference::CpuPreprocessor;
    use crate::preprocess::spec::PreprocessSpec;
    use proptest::prelude::*;

    fn meta(format: PixelFormat, width: u32, height: u32) -> FrameMeta {
        FrameMeta { width, height, format, sequence: 0, captured_at: std::time::SystemTime::UNIX_EPOCH }
    }

    #[test]
    fn a_box_becomes_the_whole_pixels_around_it_on_the_chroma_grid() {
        let rgb = meta(PixelFormat::Rgb8, 640, 480);
        assert_eq!(Roi::around_box(&rgb, 10.2, 20.7, 50.1, 60.0), Some(Roi { x: 10, y: 20, width: 41, height: 40 }));
        let nv12 = meta(PixelFormat::Nv12, 640, 480);
        assert_eq!(Roi::around_box(&nv12, 11.0, 21.0, 50.0, 60.0), Some(Roi { x: 10, y: 20, width: 40, height: 40 }));
        let yuyv = meta(PixelFormat::Yuyv, 640, 480);
        assert_eq!(Roi::around_box(&yuyv, 11.0, 21.0, 50.0, 60.0), Some(Roi { x: 10, y: 21, width: 40, height: 39 }));
        assert_eq!(Roi::around_box(&rgb, -5.0, -5.0, 1000.0, 1000.0), Some(Roi::full(&rgb)));
        assert_eq!(Roi::around_box(&rgb, 700.0, 10.0, 800.0, 20.0), None, "outside the frame");
        assert_eq!(Roi::around_box(&rgb, 10.0, 10.0, 10.0, 20.0), None, "no width");
        assert_eq!(Roi::around_box(&rgb, f32::NAN, 10.0, 10.0, 20.0), None);
    }

    #[test]
    fn rois_outside_the_frame_empty_or_off_the_chroma_grid_are_refused() {
        let nv12 = meta(PixelFormat::Nv12, 64, 48);
        assert!(Roi { x: 2, y: 2, width: 10, height: 10 }.check(&nv12).is_ok());
        assert!(Roi::full(&nv12).check(&nv12).is_ok());
        for roi in [
            Roi { x: 1, y: 2, width: 10, height: 10 },
            Roi { x: 2, y: 1, width: 10, height: 10 },
            Roi { x: 60, y: 0, width: 10, height: 10 },
            Roi { x: 0, y: 0, width: 0, height: 10 },
            Roi { x: u32::MAX, y: 0, width: 2, height: 2 },
        ] {
            let message = roi.check(&nv12).expect_err("refused").to_string();
            assert!(message.contains("nv12") && message.contains("64x48"), "{message}");
        }
    }

    /// The bytes of `roi` of `frame` as a frame of their own (even sizes for YUYV and NV12).
    fn cut(frame: &[u8], meta: &FrameMeta, roi: Roi) -> Vec<u8> {
        let (width, x, w) = (meta.width as usize, roi.x as usize, roi.width as usize);
        let rows = roi.y as usize..(roi.y + roi.height) as usize;
        let bytes_per_pixel = match meta.format {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 => 3,
            PixelFormat::Rgba8 => 4,
            PixelFormat::Yuyv => 2,
            PixelFormat::Nv12 => 1,
        };
        let mut out = Vec::new();
        for y in rows.clone() {
            out.extend_from_slice(&frame[(y * width + x) * bytes_per_pixel..(y * width + x + w) * bytes_per_pixel]);
        }
        if meta.format == PixelFormat::Nv12 {
            let chroma = width * meta.height as usize;
            for y in rows.step_by(2) {
                let start = chroma + (y / 2) * width + x;
                out.extend_from_slice(&frame[start..start + w]);
            }
        }
        out
    }

    fn format() -> impl Strategy<Value = PixelFormat> {
        prop::sample::select(vec![
            PixelFormat::Rgb8,
            PixelFormat::Bgr8,
            PixelFormat::Rgba8,
            PixelFormat::Yuyv,
            PixelFormat::Nv12,
        ])
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(64))]

        #[test]
        fn a_region_preprocesses_exactly_as_its_pixels_cut_into_a_frame_of_their_own(
            format in format(),
            (half_x, half_y, half_w, half_h) in (0u32..8, 0u32..8, 1u32..12, 1u32..12),
            seed in any::<u64>(),
            antialias in any::<bool>(),
            letterbox in any::<bool>(),
            (out_w, out_h) in (1u32..24, 1u32..24),
        ) {
            let frame_meta = meta(format, 40, 36);
            let roi = Roi { x: 2 * half_x, y: 2 * half_y, width: 2 * half_w, height: 2 * half_h };
            let len = format.frame_bytes(40, 36).expect("size");
            let frame: Vec<u8> = (0..len).map(|i| (seed.wrapping_mul(i as u64 + 1).wrapping_add(i as u64 * 7919) >> 13) as u8).collect();
            let filter = if antialias { ResizeFilter::Antialias } else { ResizeFilter::Bilinear };
            let mut spec = PreprocessSpec::plain(out_w, out_h, TensorLayout::Nchw, TensorDtype::F32, filter);
            spec.resize = if letterbox { ResizeKind::Letterbox } else { ResizeKind::Stretch };
            let mut through_roi = vec![0u8; spec.bytes()];
            CpuPreprocessor::new().run_roi(&frame, &frame_meta, roi, &spec, &mut through_roi).expect("roi");
            let crop = cut(&frame, &frame_meta, roi);
            let mut through_cut = vec![0u8; spec.bytes()];
            CpuPreprocessor::new().run(&crop, &meta(format, roi.width, roi.height), &spec, &mut through_cut).expect("cut");
            prop_assert_eq!(through_roi, through_cut);
        }
    }
}
