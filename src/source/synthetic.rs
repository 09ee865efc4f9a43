//! A moving test pattern: needs no files or devices, so every pipeline stage can run anywhere.
//!
//! Owns: drawing the pattern into a slot. Must not: sleep (the pipeline applies the fps cap).

use std::time::SystemTime;

use super::error::SourceError;
use super::frame_source::{Capture, FrameSource};
use crate::frame::{CaptureMode, FrameSlot, PixelFormat};

/// Colour bars with a white square that moves one step per frame.
pub struct SyntheticSource {
    width: u32,
    height: u32,
    frame_index: u64,
}

impl SyntheticSource {
    pub fn new(width: u32, height: u32) -> Self {
        SyntheticSource { width, height, frame_index: 0 }
    }
}

const BARS: [[u8; 3]; 8] = [
    [235, 235, 235],
    [235, 235, 16],
    [16, 235, 235],
    [16, 235, 16],
    [235, 16, 235],
    [235, 16, 16],
    [16, 16, 235],
    [16, 16, 16],
];

impl FrameSource for SyntheticSource {
    fn capture_mode(&self) -> CaptureMode {
        CaptureMode::Generate
    }

    fn describe(&self) -> String {
        format!("synthetic {}x{}", self.width, self.height)
    }

    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        let (w, h) = (self.width as usize, self.height as usize);
        let pixels = slot
            .prepare(self.width, self.height, PixelFormat::Rgb8)
            .map_err(|message| SourceError::Read { source_name: self.describe(), message })?;
        let side = (w.min(h) / 4).max(1);
        let travel = (w - side).max(1);
        let square_x = (self.frame_index as usize * 8) % travel;
        let square_y = (h - side) / 2;
        for (y, row) in pixels.chunks_exact_mut(w * 3).enumerate() {
            for (x, px) in row.chunks_exact_mut(3).enumerate() {
                let inside = (square_x..square_x + side).contains(&x) && (square_y..square_y + side).contains(&y);
                px.copy_from_slice(if inside { &[255, 255, 255] } else { &BARS[x * BARS.len() / w] });
            }
        }
        slot.meta_mut().captured_at = SystemTime::now();
        self.frame_index += 1;
        Ok(Capture::Frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HeapMemory;

    #[test]
    fn pattern_fills_the_frame_and_moves() {
        let mut source = SyntheticSource::new(64, 32);
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        assert_eq!(source.next_frame(&mut slot).expect("frame"), Capture::Frame);
        let first = slot.data().to_vec();
        assert_eq!(first.len(), 64 * 32 * 3);
        source.next_frame(&mut slot).expect("frame");
        assert_ne!(first, slot.data(), "the square moves between frames");
    }
}
