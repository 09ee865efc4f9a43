//! Writing one captured V4L2 buffer into a frame slot.
//!
//! Owns: MJPEG decoding (to RGB, straight into the slot, through the bounded decoder), the
//! strided YUYV copy, and lending a YUYV frame the driver wrote into slot memory to the slot.
//! Must not: touch the device, allocate a frame-sized buffer of its own, or decide about
//! reconnecting — it only says whether the buffer was usable.

use crate::frame::{FrameSlot, LentFrame, PixelFormat};
use crate::source::image_decode::{self, Decoded, ImageDecodeError};
use crate::source::limits::LimitsConfig;

/// Why a captured buffer did not become a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// This buffer is unusable (corrupt or truncated JPEG, short YUYV buffer); the next one may be
    /// fine. UVC cameras produce these now and then.
    #[error("unusable frame: {0}")]
    Corrupt(String),
    /// The frame is larger than `[limits]` allows; it was not decoded.
    #[error("frame over the limits: {0}")]
    OverLimit(String),
    /// The slot cannot take a frame of this size (fixed pinned memory too small): no later frame
    /// will fit either.
    #[error("frame slot: {0}")]
    Slot(String),
}

/// APP0 segment that marks a JPEG as Motion-JPEG ("AVI1"), which tells the decoder to use the
/// standard Huffman tables when the frame has none.
const AVI1_APP0: [u8; 9] = [0xFF, 0xE0, 0x00, 0x07, b'A', b'V', b'I', b'1', 0x00];

/// Whether a JPEG without its own Huffman tables (as UVC cameras send them) lacks the AVI1 marker
/// the decoder needs to fall back to the standard tables. Walks the marker segments up to the
/// start of scan; anything malformed is left to the decoder to reject.
fn needs_avi1_marker(jpeg: &[u8]) -> bool {
    let mut at = 2;
    while let Some(&[0xFF, marker, len_hi, len_lo]) = jpeg.get(at..at + 4) {
        match marker {
            0xC4 => return false,
            0xDA => return true,
            0xE0 if jpeg.get(at + 4..at + 8) == Some(b"AVI1") => return false,
            _ => at += 2 + usize::from(u16::from_be_bytes([len_hi, len_lo])),
        }
    }
    false
}

/// Decodes a JPEG buffer into `slot` as [`PixelFormat::Rgb8`]. The JPEG must be `width`×`height`
/// (the negotiated size), so that a corrupt header cannot make the slot grow, and within `limits`.
/// `scratch` is reused across frames for the rare camera whose frames need the AVI1 marker added.
pub fn write_mjpeg(
    jpeg: &[u8],
    width: u32,
    height: u32,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
    scratch: &mut Vec<u8>,
) -> Result<Decoded, ConvertError> {
    let jpeg = if jpeg.starts_with(&[0xFF, 0xD8]) && needs_avi1_marker(jpeg) {
        scratch.clear();
        scratch.extend_from_slice(&jpeg[..2]);
        scratch.extend_from_slice(&AVI1_APP0);
        scratch.extend_from_slice(&jpeg[2..]);
        scratch.as_slice()
    } else {
        jpeg
    };
    image_decode::decode_jpeg(jpeg, width, height, limits, slot).map_err(ConvertError::from)
}

impl From<ImageDecodeError> for ConvertError {
    fn from(error: ImageDecodeError) -> Self {
        match error {
            ImageDecodeError::OverLimit(message) => ConvertError::OverLimit(message),
            ImageDecodeError::Invalid(message) => ConvertError::Corrupt(message),
            ImageDecodeError::Slot(message) => ConvertError::Slot(message),
        }
    }
}

/// Copies a packed YUYV buffer with `bytes_per_line` stride into `slot` as [`PixelFormat::Yuyv`]
/// (tightly packed rows, which is what the preprocessing kernel reads), if it is within `limits`.
pub fn write_yuyv(
    data: &[u8],
    width: u32,
    height: u32,
    bytes_per_line: u32,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<(), ConvertError> {
    image_decode::check_frame(width, height, PixelFormat::Yuyv, limits)?;
    let row_bytes = width as usize * 2;
    let stride = bytes_per_line as usize;
    let rows = height as usize;
    let needed = stride.checked_mul(rows.saturating_sub(1)).and_then(|n| n.checked_add(row_bytes));
    match needed {
        Some(needed) if stride >= row_bytes && data.len() >= needed => {}
        _ => {
            return Err(ConvertError::Corrupt(format!(
                "YUYV buffer of {} bytes is too short for {width}x{height} with {bytes_per_line} bytes per line",
                data.len()
            )))
        }
    }
    let target = slot.prepare(width, height, PixelFormat::Yuyv).map_err(ConvertError::Slot)?;
    if stride == row_bytes {
        target.copy_from_slice(&data[..target.len()]);
    } else {
        for (row, out) in target.chunks_exact_mut(row_bytes).enumerate() {
            let start = row * stride;
            out.copy_from_slice(&data[start..start + row_bytes]);
        }
    }
    slot.note_copy();
    Ok(())
}

/// Makes `frame`, a tightly packed `width`×`height` YUYV frame the driver wrote into slot memory,
/// the slot's frame without copying it, if it is within `limits` and complete. A refused frame is
/// dropped, which gives its buffer back.
pub fn lend_yuyv(
    frame: Box<dyn LentFrame>,
    width: u32,
    height: u32,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<(), ConvertError> {
    image_decode::check_frame(width, height, PixelFormat::Yuyv, limits)?;
    slot.lend(width, height, PixelFormat::Yuyv, frame).map_err(ConvertError::Corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HeapMemory;
    use image::codecs::jpeg::JpegEncoder;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

    fn slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    fn encode_jpeg(width: u32, height: u32, rgb: [u8; 3]) -> Vec<u8> {
        let pixels: Vec<u8> = (0..width * height).flat_map(|_| rgb).collect();
        let mut jpeg = Vec::new();
        JpegEncoder::new_with_quality(&mut jpeg, 95)
            .encode(&pixels, width, height, image::ExtendedColorType::Rgb8)
            .expect("encode");
        jpeg
    }

    /// UVC cameras send "motion JPEG" without Huffman tables (DHT segments); decoders must use the
    /// standard tables then.
    pub(super) fn strip_huffman_tables(jpeg: &[u8]) -> Vec<u8> {
        let mut out = jpeg[..2].to_vec();
        let mut at = 2;
        while at + 4 <= jpeg.len() && jpeg[at] == 0xFF && jpeg[at + 1] != 0xDA {
            let len = u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]) as usize;
            if jpeg[at + 1] != 0xC4 {
                out.extend_from_slice(&jpeg[at..at + 2 + len]);
            }
            at += 2 + len;
        }
        out.extend_from_slice(&jpeg[at..]);
        out
    }

    fn assert_close(actual: &[u8], expected: [u8; 3]) {
        for pixel in actual.chunks_exact(3) {
            for (a, e) in pixel.iter().zip(expected) {
                assert!(a.abs_diff(e) <= 4, "pixel {pixel:?} vs {expected:?}");
            }
        }
    }

    #[test]
    fn mjpeg_decodes_into_the_slot_as_rgb() {
        let mut slot = slot();
        write_mjpeg(&encode_jpeg(16, 8, [200, 40, 90]), 16, 8, &LIMITS, &mut slot, &mut Vec::new()).expect("decode");
        assert_eq!((slot.meta().width, slot.meta().height, slot.meta().format), (16, 8, PixelFormat::Rgb8));
        assert_eq!(slot.data().len(), 16 * 8 * 3);
        assert_close(slot.data(), [200, 40, 90]);
        assert_eq!(slot.copies(), 0, "decoded straight into the slot");
    }

    #[test]
    fn grey_ir_mjpeg_decodes_as_rgb_with_equal_channels() {
        let (width, height) = (16u32, 8u32);
        let pixels: Vec<u8> = (0..width * height).map(|i| if i % width < width / 2 { 40 } else { 210 }).collect();
        let mut jpeg = Vec::new();
        JpegEncoder::new_with_quality(&mut jpeg, 100)
            .encode(&pixels, width, height, image::ExtendedColorType::L8)
            .expect("encode grey");
        let mut slot = slot();
        write_mjpeg(&strip_huffman_tables(&jpeg), width, height, &LIMITS, &mut slot, &mut Vec::new())
            .expect("a grey frame decodes");
        assert_eq!((slot.meta().width, slot.meta().format), (width, PixelFormat::Rgb8));
        assert_eq!(slot.data().len(), pixels.len() * 3);
        for (rgb, grey) in slot.data().chunks_exact(3).zip(&pixels) {
            assert!(rgb[0] == rgb[1] && rgb[1] == rgb[2], "{rgb:?}");
            assert!(rgb[0].abs_diff(*grey) <= 8, "{rgb:?} vs {grey}");
        }
    }

    #[test]
    fn mjpeg_without_huffman_tables_decodes() {
        let jpeg = encode_jpeg(16, 16, [30, 160, 220]);
        let stripped = strip_huffman_tables(&jpeg);
        assert!(stripped.len() < jpeg.len(), "the test JPEG had DHT segments to strip");
        let mut slot = slot();
        let mut scratch = Vec::new();
        write_mjpeg(&stripped, 16, 16, &LIMITS, &mut slot, &mut scratch).expect("decode with default tables");
        assert_close(slot.data(), [30, 160, 220]);
        assert!(scratch.windows(4).any(|w| w == b"AVI1"), "the marker was added in the scratch buffer");

        let mut uvc_style = stripped[..2].to_vec();
        uvc_style.extend_from_slice(&AVI1_APP0);
        uvc_style.extend_from_slice(&stripped[2..]);
        let mut untouched = Vec::new();
        write_mjpeg(&uvc_style, 16, 16, &LIMITS, &mut slot, &mut untouched).expect("decode AVI1 frame");
        assert!(untouched.is_empty(), "frames that carry the marker are decoded in place");
        assert_close(slot.data(), [30, 160, 220]);
    }

    /// Issue 21: a truncated MJPEG frame decoded silently with grey fill.
    #[test]
    fn a_truncated_mjpeg_frame_is_decoded_and_reported_as_truncated() {
        let dog = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/models/samples/dog.jpg")).expect("dog.jpg");
        let mut slot = slot();
        let whole = write_mjpeg(&dog, 768, 576, &LIMITS, &mut slot, &mut Vec::new()).expect("whole");
        assert_eq!(whole, Decoded::Whole);
        let cut = write_mjpeg(&dog[..dog.len() * 3 / 4], 768, 576, &LIMITS, &mut slot, &mut Vec::new());
        assert_eq!(cut.expect("decodes, the missing part grey"), Decoded::Truncated);
    }

    #[test]
    fn corrupt_or_mismatched_jpeg_is_reported_as_corrupt() {
        let mut slot = slot();
        let jpeg = encode_jpeg(16, 8, [1, 2, 3]);
        let mut scratch = Vec::new();
        assert!(matches!(
            write_mjpeg(&jpeg[..20], 16, 8, &LIMITS, &mut slot, &mut scratch),
            Err(ConvertError::Corrupt(_))
        ));
        assert!(matches!(
            write_mjpeg(b"not a jpeg", 16, 8, &LIMITS, &mut slot, &mut scratch),
            Err(ConvertError::Corrupt(_))
        ));
        let mut truncated_body = jpeg.clone();
        truncated_body.truncate(jpeg.len() / 2);
        assert!(write_mjpeg(&truncated_body, 16, 8, &LIMITS, &mut slot, &mut scratch).is_err());
        let err = write_mjpeg(&jpeg, 32, 8, &LIMITS, &mut slot, &mut scratch).expect_err("size mismatch");
        assert!(err.to_string().contains("16x8"), "{err}");
    }

    #[test]
    fn frames_over_the_limits_are_refused() {
        let narrow = LimitsConfig { max_width: 8, ..LIMITS };
        let mut slot = slot();
        let jpeg = encode_jpeg(16, 8, [1, 2, 3]);
        let err = write_mjpeg(&jpeg, 16, 8, &narrow, &mut slot, &mut Vec::new()).expect_err("too wide");
        assert!(matches!(err, ConvertError::OverLimit(_)), "{err}");
        let yuyv = vec![0u8; 16 * 8 * 2];
        let err = write_yuyv(&yuyv, 16, 8, 32, &narrow, &mut slot).expect_err("too wide");
        assert!(matches!(err, ConvertError::OverLimit(_)), "{err}");
        assert_eq!(slot.memory().capacity(), 0, "nothing was allocated");
    }

    #[test]
    fn yuyv_copy_drops_the_row_padding() {
        let (width, height, stride) = (4u32, 3u32, 12u32);
        let data: Vec<u8> = (0..stride * height).map(|i| if i % stride < width * 2 { i as u8 } else { 0xEE }).collect();
        let mut slot = slot();
        write_yuyv(&data, width, height, stride, &LIMITS, &mut slot).expect("copy");
        assert_eq!(slot.meta().format, PixelFormat::Yuyv);
        assert_eq!(slot.data().len(), 4 * 3 * 2);
        assert!(!slot.data().contains(&0xEE), "padding must not reach the slot");
        assert_eq!(&slot.data()[8..16], &data[12..20]);
        assert_eq!(slot.copies(), 1, "the mmap buffer is copied once");
    }

    #[test]
    fn yuyv_tight_buffer_copies_whole_and_short_buffer_is_corrupt() {
        let data: Vec<u8> = (0..32).collect();
        let mut slot = slot();
        write_yuyv(&data, 4, 4, 8, &LIMITS, &mut slot).expect("copy");
        assert_eq!(slot.data(), &data[..]);
        assert!(matches!(write_yuyv(&data[..31], 4, 4, 8, &LIMITS, &mut slot), Err(ConvertError::Corrupt(_))));
        assert!(matches!(write_yuyv(&data, 4, 4, 6, &LIMITS, &mut slot), Err(ConvertError::Corrupt(_))));
    }
}

/// Property tests: any buffer, size and stride a driver could hand over gives a frame or an error.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::frame::HeapMemory;
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::LazyLock;

    /// Cases per run on the host; see `proptest_support`.
    const CASES: u32 = 256;
    /// Each case decodes a real 768x576 photo.
    const MJPEG_CASES: u32 = 64;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 2048, max_height: 2048, max_alloc_mib: 4 };

    static JPEG: LazyLock<Vec<u8>> = LazyLock::new(|| {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples/dog.jpg")).expect("sample")
    });

    fn slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn yuyv_of_any_size_and_stride_is_copied_exactly_or_refused(
            width in 0u32..48,
            height in 0u32..48,
            bytes_per_line in prop_oneof![0u32..200, Just(u32::MAX)],
            len in 0usize..5000,
        ) {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut slot = slot();
            if write_yuyv(&data, width, height, bytes_per_line, &LIMITS, &mut slot).is_ok() {
                let row = width as usize * 2;
                prop_assert_eq!(slot.data().len(), row * height as usize);
                for (index, out) in slot.data().chunks_exact(row).enumerate() {
                    let start = index * bytes_per_line as usize;
                    prop_assert_eq!(out, &data[start..start + row]);
                }
            }
        }

        #[test]
        fn arbitrary_bytes_are_never_taken_for_a_frame(
            mut bytes in prop::collection::vec(any::<u8>(), 0..2048),
            soi in any::<bool>(),
            width in 0u32..64,
            height in 0u32..64,
        ) {
            if soi && bytes.len() >= 2 {
                bytes[..2].copy_from_slice(&[0xFF, 0xD8]);
            }
            let mut slot = slot();
            let _ = write_mjpeg(&bytes, width, height, &LIMITS, &mut slot, &mut Vec::new());
            prop_assert!(slot.memory().capacity() <= width as usize * height as usize * 3);
        }
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(MJPEG_CASES))]

        #[test]
        fn mutated_mjpeg_frames_decode_at_the_negotiated_size_or_fail(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in prop::option::of(any::<prop::sample::Index>()),
            strip_tables in any::<bool>(),
        ) {
            let mut jpeg = if strip_tables { tests::strip_huffman_tables(&JPEG) } else { JPEG.clone() };
            for (at, byte) in flips {
                let at = at.index(jpeg.len());
                jpeg[at] ^= byte;
            }
            if let Some(cut) = cut {
                jpeg.truncate(cut.index(jpeg.len()));
            }
            let mut slot = slot();
            if write_mjpeg(&jpeg, 768, 576, &LIMITS, &mut slot, &mut Vec::new()).is_ok() {
                prop_assert_eq!((slot.meta().width, slot.meta().height), (768, 576));
                prop_assert_eq!(slot.data().len(), 768 * 576 * 3);
            }
            prop_assert!(slot.memory().capacity() <= 768 * 576 * 3);
        }
    }
}
