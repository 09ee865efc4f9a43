//! What a frame is: its pixel format and the metadata a source writes with it.
//!
//! Owns: [`PixelFormat`] (with the byte size a frame of it has) and [`FrameMeta`]. Must not: hold
//! frame memory (`slot`) or hand frames over (`ring`).

use std::time::SystemTime;

/// Pixel layout of a frame as a source delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PixelFormat {
    /// 3 bytes per pixel, R G B.
    Rgb8,
    /// 3 bytes per pixel, B G R.
    Bgr8,
    /// 4 bytes per pixel, R G B A (alpha ignored).
    Rgba8,
    /// Packed 4:2:2, Y0 U Y1 V per two pixels; width must be even.
    Yuyv,
    /// Planar Y (width × height) followed by interleaved UV at half resolution; width and height even.
    Nv12,
}

impl PixelFormat {
    /// Bytes one frame of this format and size occupies, or `None` for sizes the format cannot have
    /// (odd widths for the 4:2:x formats, zero sizes, overflow).
    pub fn frame_bytes(self, width: u32, height: u32) -> Option<usize> {
        if width == 0 || height == 0 {
            return None;
        }
        let (w, h) = (width as usize, height as usize);
        match self {
            PixelFormat::Rgb8 | PixelFormat::Bgr8 => w.checked_mul(h)?.checked_mul(3),
            PixelFormat::Rgba8 => w.checked_mul(h)?.checked_mul(4),
            PixelFormat::Yuyv if w % 2 == 0 => w.checked_mul(h)?.checked_mul(2),
            PixelFormat::Nv12 if w % 2 == 0 && h % 2 == 0 => w.checked_mul(h)?.checked_mul(3).map(|n| n / 2),
            PixelFormat::Yuyv | PixelFormat::Nv12 => None,
        }
    }

    /// The config/log name of the format.
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Rgb8 => "rgb",
            PixelFormat::Bgr8 => "bgr",
            PixelFormat::Rgba8 => "rgba",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Nv12 => "nv12",
        }
    }
}

/// What is known about the frame in a slot.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameMeta {
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    /// Monotonic per camera, starting at 0; gaps mean dropped frames.
    pub sequence: u64,
    /// Wall-clock capture time (driver timestamp where the source has one).
    pub captured_at: SystemTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_bytes_rejects_impossible_sizes() {
        assert_eq!(PixelFormat::Rgb8.frame_bytes(4, 2), Some(24));
        assert_eq!(PixelFormat::Nv12.frame_bytes(4, 2), Some(12));
        assert_eq!(PixelFormat::Yuyv.frame_bytes(3, 2), None);
        assert_eq!(PixelFormat::Nv12.frame_bytes(4, 3), None);
        assert_eq!(PixelFormat::Rgba8.frame_bytes(0, 3), None);
        assert_eq!(PixelFormat::Rgb8.frame_bytes(u32::MAX, u32::MAX), None, "overflow is an impossible size");
    }
}
