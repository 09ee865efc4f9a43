//! A frame kept apart from the ring: the bytes and metadata of a slot's frame, copied.
//!
//! Owns: [`FrameCopy`] (taken from a slot, written back into a slot of heap memory to run again),
//! for the few frames an engine is checked on. Must not: be used on the per-frame path (it
//! allocates and copies a whole frame).

use super::format::PixelFormat;
use super::slot::{FrameSlot, HeapMemory};

/// A copy of one frame.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameCopy {
    pub width: u32,
    pub height: u32,
    pub format: PixelFormat,
    pub data: Vec<u8>,
}

impl FrameCopy {
    /// The frame in `slot`, copied.
    pub fn of(slot: &FrameSlot) -> FrameCopy {
        let meta = slot.meta();
        FrameCopy { width: meta.width, height: meta.height, format: meta.format, data: slot.data().to_vec() }
    }

    /// A slot of heap memory holding this frame again.
    pub fn to_slot(&self) -> Result<FrameSlot, String> {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let bytes = slot.prepare(self.width, self.height, self.format)?;
        if bytes.len() != self.data.len() {
            return Err(format!(
                "a {}x{} {} frame has {} bytes, not {}",
                self.width,
                self.height,
                self.format.name(),
                bytes.len(),
                self.data.len()
            ));
        }
        bytes.copy_from_slice(&self.data);
        Ok(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copied_frame_goes_back_into_a_slot_as_it_was() {
        let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
        let pixels = slot.prepare(4, 2, PixelFormat::Rgb8).expect("a 4x2 frame");
        pixels.iter_mut().enumerate().for_each(|(i, byte)| *byte = i as u8);
        let copy = FrameCopy::of(&slot);
        let again = copy.to_slot().expect("a slot");
        assert_eq!((again.meta().width, again.meta().height, again.meta().format), (4, 2, PixelFormat::Rgb8));
        assert_eq!(again.data(), slot.data());
        let short = FrameCopy { data: vec![0; 5], ..copy };
        assert!(short.to_slot().is_err(), "bytes that do not make the frame are an error");
    }
}
