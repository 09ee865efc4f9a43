//! Bounded decoding of untrusted image bytes into frame slots: image files (the `images` source,
//! `detect`, `bench`) and MJPEG frames (V4L2), plus the same size check for raw frames whose size
//! a stream announces (GStreamer caps).
//!
//! Owns: applying `[limits]` (width, height and the bytes a decode allocates) from the image
//! header, before anything frame-sized is allocated, and telling an over-limit image from a corrupt
//! one. Must not: list files, log, retry, or keep pixels anywhere but the caller's frame slot.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Seek};
use std::path::Path;

use image::codecs::jpeg::JpegDecoder;
use image::error::ImageError;
use image::{ColorType, DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};

use crate::frame::{FrameSlot, PixelFormat};
use crate::source::limits::LimitsConfig;
use crate::sys::files::{self, ReadError};

/// Why an image did not become a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageDecodeError {
    /// The image is larger than `[limits]` allows; nothing frame-sized was allocated.
    #[error("{0}")]
    OverLimit(String),
    /// Not a readable image (unknown format, corrupt or truncated data, unreadable file).
    #[error("{0}")]
    Invalid(String),
    /// The frame slot cannot take a frame of this size (fixed pinned memory too small).
    #[error("frame slot: {0}")]
    Slot(String),
}

/// How a decode that filled the slot went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// The whole image was there.
    Whole,
    /// A JPEG that ends before its end-of-image marker: the decoder filled the missing rows
    /// (grey). The frame is usable but damaged; callers count it.
    Truncated,
}

/// Decodes the image file at `path` into `slot` as RGB or RGBA (other colour types are converted
/// to RGB), within `limits`. Only a regular file is opened, without blocking (a FIFO named
/// `x.jpg` is refused at once), and one larger than `limits.max_alloc_mib` is not read.
pub fn decode_file(path: &Path, limits: &LimitsConfig, slot: &mut FrameSlot) -> Result<Decoded, ImageDecodeError> {
    // Some decoders (JPEG) read the whole file into memory first.
    let (file, file_bytes) = files::open_regular(path, limits.max_alloc_bytes()).map_err(|e| match e {
        ReadError::TooLarge { size, .. } => ImageDecodeError::OverLimit(format!(
            "the file is {}, more than `limits.max_alloc_mib` ({} MiB)",
            mib_text(size),
            limits.max_alloc_mib
        )),
        other => ImageDecodeError::Invalid(other.to_string()),
    })?;
    let complete = jpeg_tail_is_complete(&file, file_bytes);
    let format = decode_reader(BufReader::new(file), limits, slot)?;
    Ok(match format {
        Some(ImageFormat::Jpeg) if !complete => Decoded::Truncated,
        _ => Decoded::Whole,
    })
}

/// Whether the file's last bytes are a JPEG end-of-image marker (`FF D9`), allowing zero padding
/// after it. Meaningful for JPEG files only; a tail that cannot be read, or is all padding, counts
/// as complete (only a JPEG known to be cut short is reported).
fn jpeg_tail_is_complete(file: &File, length: u64) -> bool {
    use std::os::unix::fs::FileExt;
    let mut tail = [0u8; 4096];
    let start = length.saturating_sub(tail.len() as u64);
    let Ok(read) = file.read_at(&mut tail[..(length - start) as usize], start) else { return true };
    ends_with_eoi(&tail[..read])
}

/// Whether `jpeg` ends with the end-of-image marker, zero bytes after it allowed (all zeros: yes).
fn ends_with_eoi(jpeg: &[u8]) -> bool {
    jpeg.iter().rposition(|&byte| byte != 0).is_none_or(|last| jpeg[..=last].ends_with(&[0xFF, 0xD9]))
}

/// Decodes the image `reader` holds (its format recognised from its first bytes) into `slot`;
/// returns that format.
fn decode_reader(
    reader: impl BufRead + Seek,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<Option<ImageFormat>, ImageDecodeError> {
    let mut reader =
        ImageReader::new(reader).with_guessed_format().map_err(|e| ImageDecodeError::Invalid(e.to_string()))?;
    let format = reader.format();
    // The size limits are checked below with a message that names them; the allocation limit also
    // bounds what the PNG decoder allocates for itself while it reads the header chunks.
    let mut allocation_only = Limits::no_limits();
    allocation_only.max_alloc = Some(limits.max_alloc_bytes());
    reader.limits(allocation_only);
    let decoder = reader.into_decoder().map_err(from_image_error)?;
    decode_into(decoder, limits, slot)?;
    Ok(format)
}

/// Decodes one JPEG (an MJPEG frame; colour or grey) into `slot` as [`PixelFormat::Rgb8`]. Its header must say
/// `width`×`height` (the size the device negotiated), so that a corrupt header cannot make the slot
/// grow; the frame must also be within `limits`. A frame without its end-of-image marker is
/// decoded (the missing part grey) and reported as [`Decoded::Truncated`].
pub fn decode_jpeg(
    jpeg: &[u8],
    width: u32,
    height: u32,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<Decoded, ImageDecodeError> {
    let decoder = JpegDecoder::new(Cursor::new(jpeg)).map_err(from_image_error)?;
    let (jpeg_width, jpeg_height) = decoder.dimensions();
    if (jpeg_width, jpeg_height) != (width, height) {
        return Err(ImageDecodeError::Invalid(format!(
            "JPEG is {jpeg_width}x{jpeg_height}, the device negotiated {width}x{height}"
        )));
    }
    match decoder.color_type() {
        ColorType::Rgb8 => decode_into(decoder, limits, slot)?,
        ColorType::L8 => decode_grey_jpeg(decoder, limits, slot)?,
        other => return Err(ImageDecodeError::Invalid(format!("JPEG colour type {other:?}, expected RGB or grey"))),
    }
    Ok(if ends_with_eoi(jpeg) { Decoded::Whole } else { Decoded::Truncated })
}

/// A single-component (grey, IR) JPEG: decoded into the first third of the slot's RGB bytes, then
/// widened to RGB in place, so no frame-sized buffer is allocated per frame.
fn decode_grey_jpeg(
    mut decoder: JpegDecoder<Cursor<&[u8]>>,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<(), ImageDecodeError> {
    let (width, height) = decoder.dimensions();
    check_frame(width, height, PixelFormat::Rgb8, limits)?;
    let mut limits_for_decoder = Limits::no_limits();
    limits_for_decoder.max_image_width = Some(limits.max_width);
    limits_for_decoder.max_image_height = Some(limits.max_height);
    limits_for_decoder.max_alloc = Some(limits.max_alloc_bytes());
    decoder.set_limits(limits_for_decoder).map_err(from_image_error)?;
    let pixels =
        usize::try_from(decoder.total_bytes()).map_err(|_| ImageDecodeError::Invalid("grey JPEG too large".into()))?;
    let buffer = slot.prepare(width, height, PixelFormat::Rgb8).map_err(ImageDecodeError::Slot)?;
    let grey = buffer
        .get_mut(..pixels)
        .ok_or_else(|| ImageDecodeError::Invalid(format!("a {width}x{height} grey JPEG claims {pixels} bytes")))?;
    decoder.read_image(grey).map_err(from_image_error)?;
    widen_grey_in_place(buffer, pixels);
    Ok(())
}

/// Turns `pixels` grey bytes at the start of `buffer` into RGB triples filling it, back to front
/// (pixel i moves to 3i ≥ i, so no byte is overwritten before it is read).
fn widen_grey_in_place(buffer: &mut [u8], pixels: usize) {
    for i in (0..pixels).rev() {
        let value = buffer[i];
        buffer[3 * i..3 * i + 3].fill(value);
    }
}

/// Checks a raw frame of `format` and size `width`×`height` (as a stream announces it) against
/// `limits` before a slot is sized for it.
pub fn check_frame(
    width: u32,
    height: u32,
    format: PixelFormat,
    limits: &LimitsConfig,
) -> Result<(), ImageDecodeError> {
    // A size the format cannot have is the slot's to report.
    let bytes = format.frame_bytes(width, height).map_or(0, |bytes| bytes as u64);
    check_size(width, height, bytes, limits)
}

/// The size check shared by every path: pixel dimensions, then the bytes the decode will allocate.
fn check_size(width: u32, height: u32, bytes: u64, limits: &LimitsConfig) -> Result<(), ImageDecodeError> {
    if width > limits.max_width || height > limits.max_height {
        return Err(ImageDecodeError::OverLimit(format!(
            "{width}x{height} pixels is over `limits.max_width` x `limits.max_height` ({}x{})",
            limits.max_width, limits.max_height
        )));
    }
    if bytes > limits.max_alloc_bytes() {
        return Err(ImageDecodeError::OverLimit(format!(
            "{width}x{height} pixels need {} to decode, more than `limits.max_alloc_mib` ({} MiB)",
            mib_text(bytes),
            limits.max_alloc_mib
        )));
    }
    Ok(())
}

fn mib_text(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Reads `decoder`'s image into `slot` once the header passed the limits. 8-bit RGB and RGBA are
/// decoded straight into the slot; other colour types go through an RGB copy, which is counted.
fn decode_into(
    mut decoder: impl ImageDecoder,
    limits: &LimitsConfig,
    slot: &mut FrameSlot,
) -> Result<(), ImageDecodeError> {
    let (width, height) = decoder.dimensions();
    let direct = match decoder.color_type() {
        ColorType::Rgb8 => Some(PixelFormat::Rgb8),
        ColorType::Rgba8 => Some(PixelFormat::Rgba8),
        _ => None,
    };
    let rgb_bytes = u64::from(width).saturating_mul(u64::from(height)).saturating_mul(3);
    let decoded_bytes = decoder.total_bytes();
    let needed = match direct {
        Some(_) => decoded_bytes,
        // The decoded image, its RGB conversion, and the slot the conversion is copied into.
        None => decoded_bytes.saturating_add(rgb_bytes.saturating_mul(2)),
    };
    check_size(width, height, needed, limits)?;
    let mut limits_for_decoder = Limits::no_limits();
    limits_for_decoder.max_image_width = Some(limits.max_width);
    limits_for_decoder.max_image_height = Some(limits.max_height);
    limits_for_decoder.max_alloc = Some(limits.max_alloc_bytes());
    decoder.set_limits(limits_for_decoder).map_err(from_image_error)?;
    match direct {
        Some(format) => {
            let buffer = slot.prepare(width, height, format).map_err(ImageDecodeError::Slot)?;
            decoder.read_image(buffer).map_err(from_image_error)
        }
        None => {
            let rgb = DynamicImage::from_decoder(decoder).map_err(from_image_error)?.into_rgb8();
            let buffer = slot.prepare(width, height, PixelFormat::Rgb8).map_err(ImageDecodeError::Slot)?;
            if buffer.len() != rgb.as_raw().len() {
                return Err(ImageDecodeError::Invalid(format!(
                    "the decoder produced {} bytes for a {width}x{height} RGB image",
                    rgb.as_raw().len()
                )));
            }
            buffer.copy_from_slice(rgb.as_raw());
            slot.note_copy();
            Ok(())
        }
    }
}

fn from_image_error(error: ImageError) -> ImageDecodeError {
    match error {
        ImageError::Limits(limit) => ImageDecodeError::OverLimit(limit.to_string()),
        other => ImageDecodeError::Invalid(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::HeapMemory;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

    fn slot() -> FrameSlot {
        FrameSlot::new(Box::new(HeapMemory::default()))
    }

    fn png_bytes(image: &DynamicImage) -> Vec<u8> {
        let mut bytes = Vec::new();
        image.write_to(&mut Cursor::new(&mut bytes), image::ImageFormat::Png).expect("encode png");
        bytes
    }

    #[test]
    fn rgb_png_decodes_into_the_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.png");
        image::RgbImage::from_pixel(3, 2, image::Rgb([10, 20, 30])).save(&path).expect("save");
        let mut slot = slot();
        decode_file(&path, &LIMITS, &mut slot).expect("decode");
        assert_eq!((slot.meta().width, slot.meta().height, slot.meta().format), (3, 2, PixelFormat::Rgb8));
        assert_eq!(&slot.data()[..3], &[10, 20, 30]);
    }

    #[test]
    fn grey_16_bit_png_is_converted_to_rgb() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("grey.png");
        let grey = image::ImageBuffer::<image::Luma<u16>, Vec<u16>>::from_pixel(4, 4, image::Luma([0xFFFF]));
        std::fs::write(&path, png_bytes(&DynamicImage::ImageLuma16(grey))).expect("write");
        let mut slot = slot();
        decode_file(&path, &LIMITS, &mut slot).expect("decode");
        assert_eq!(slot.meta().format, PixelFormat::Rgb8);
        assert!(slot.data().iter().all(|&v| v == 255));
    }

    #[test]
    fn images_over_the_pixel_or_memory_limits_are_refused_before_allocating() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("wide.png");
        image::RgbImage::new(64, 8).save(&path).expect("save");
        let narrow = LimitsConfig { max_width: 32, ..LIMITS };
        let mut slot = slot();
        match decode_file(&path, &narrow, &mut slot) {
            Err(ImageDecodeError::OverLimit(message)) => {
                assert!(message.contains("64x8") && message.contains("limits.max_width"), "{message}")
            }
            other => panic!("expected over the limit, got {other:?}"),
        }
        assert_eq!(slot.memory().capacity(), 0, "nothing was allocated");
        // 1 MiB holds 349525 RGB pixels: 1024x341 fits, 1024x342 does not, and 1024x341 grey
        // does not either, because of its RGB conversion copies.
        let small = LimitsConfig { max_alloc_mib: 1, ..LIMITS };
        image::RgbImage::new(1024, 341).save(&path).expect("save");
        decode_file(&path, &small, &mut slot).expect("fits");
        image::RgbImage::new(1024, 342).save(&path).expect("save");
        assert!(matches!(decode_file(&path, &small, &mut slot), Err(ImageDecodeError::OverLimit(_))));
        image::GrayImage::new(1024, 341).save(&path).expect("save");
        assert!(matches!(decode_file(&path, &small, &mut slot), Err(ImageDecodeError::OverLimit(_))));
    }

    #[test]
    fn a_file_larger_than_the_allocation_limit_is_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("big.jpg");
        std::fs::write(&path, vec![0u8; (1 << 20) + 1]).expect("write");
        let small = LimitsConfig { max_alloc_mib: 1, ..LIMITS };
        let err = decode_file(&path, &small, &mut slot()).expect_err("too big");
        assert!(matches!(&err, ImageDecodeError::OverLimit(m) if m.contains("file")), "{err}");
    }

    #[test]
    fn garbage_and_missing_files_are_invalid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("garbage.png");
        std::fs::write(&path, b"not an image at all").expect("write");
        assert!(matches!(decode_file(&path, &LIMITS, &mut slot()), Err(ImageDecodeError::Invalid(_))));
        let missing = dir.path().join("missing.png");
        assert!(matches!(decode_file(&missing, &LIMITS, &mut slot()), Err(ImageDecodeError::Invalid(_))));
    }

    /// Issue 21: BMP and PPM were claimed but not built in, so such files were skipped.
    #[test]
    fn bmp_and_ppm_files_decode_within_the_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["a.bmp", "a.ppm"] {
            let path = dir.path().join(name);
            image::RgbImage::from_pixel(5, 3, image::Rgb([10, 20, 30])).save(&path).expect("save");
            let mut slot = slot();
            assert_eq!(decode_file(&path, &LIMITS, &mut slot).expect(name), Decoded::Whole);
            assert_eq!((slot.meta().width, slot.meta().height), (5, 3), "{name}");
            assert_eq!(&slot.data()[..3], &[10, 20, 30], "{name}");
            let narrow = LimitsConfig { max_width: 4, ..LIMITS };
            assert!(matches!(decode_file(&path, &narrow, &mut slot), Err(ImageDecodeError::OverLimit(_))), "{name}");
        }
    }

    /// Issue 21: a truncated JPEG decoded silently with grey fill.
    #[test]
    fn a_truncated_jpeg_is_reported_as_truncated_and_a_whole_one_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let jpeg = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples/dog.jpg")).expect("dog");
        let whole = dir.path().join("whole.jpg");
        let mut padded = jpeg.clone();
        padded.extend([0u8; 300]);
        std::fs::write(&whole, &padded).expect("write");
        assert_eq!(decode_file(&whole, &LIMITS, &mut slot()).expect("whole"), Decoded::Whole);
        let truncated = dir.path().join("truncated.jpg");
        std::fs::write(&truncated, &jpeg[..jpeg.len() * 2 / 3]).expect("write");
        assert_eq!(decode_file(&truncated, &LIMITS, &mut slot()).expect("decodes, grey filled"), Decoded::Truncated);
        let png = dir.path().join("cut.png");
        std::fs::write(&png, png_bytes(&DynamicImage::ImageRgb8(image::RgbImage::new(4, 4)))).expect("write");
        assert_eq!(decode_file(&png, &LIMITS, &mut slot()).expect("png"), Decoded::Whole);
    }

    /// Issue 21: `detect fifo.jpg dog.jpg` never returned.
    #[test]
    fn a_fifo_or_a_device_named_like_an_image_is_refused_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo.jpg");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            match decode_file(path, &LIMITS, &mut slot()) {
                Err(ImageDecodeError::Invalid(message)) => assert!(message.contains("not a regular file"), "{message}"),
                other => panic!("{}: expected an invalid file, got {other:?}", path.display()),
            }
        }
    }

    #[test]
    fn raw_frames_are_checked_against_the_limits() {
        assert!(check_frame(1920, 1080, PixelFormat::Nv12, &LIMITS).is_ok());
        assert!(matches!(check_frame(20000, 2, PixelFormat::Rgb8, &LIMITS), Err(ImageDecodeError::OverLimit(_))));
        let small = LimitsConfig { max_alloc_mib: 1, ..LIMITS };
        assert!(matches!(check_frame(1024, 1024, PixelFormat::Rgba8, &small), Err(ImageDecodeError::OverLimit(_))));
        assert!(check_frame(3, 2, PixelFormat::Yuyv, &LIMITS).is_ok(), "an impossible size is the slot's to report");
    }
}

/// Property tests: mutated real PNG and JPEG files decode within the limits or fail, never panic.
#[cfg(test)]
mod properties {
    use super::*;
    use crate::frame::HeapMemory;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use std::sync::LazyLock;

    /// Cases per run on the host (each decodes a real photo); see `proptest_support`.
    const CASES: u32 = 64;

    /// Small enough that a mutated header cannot make a test allocate much, large enough for the
    /// samples (768x576 RGB is 1.3 MiB).
    const LIMITS: LimitsConfig = LimitsConfig { max_width: 2048, max_height: 2048, max_alloc_mib: 4 };

    fn sample(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("models/samples").join(name)).expect("sample image")
    }

    static PNG: LazyLock<Vec<u8>> = LazyLock::new(|| sample("chelsea.png"));
    static JPEG: LazyLock<Vec<u8>> = LazyLock::new(|| sample("dog.jpg"));

    /// Recomputes every chunk CRC, so that a mutation reaches the decoder behind the checksum.
    fn fix_png_crcs(png: &mut [u8]) {
        let mut at = 8;
        while let Some(length) = png.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize) {
            let (start, end) = (at + 4, at + 8 + length);
            if end + 4 > png.len() {
                break;
            }
            let crc = crc32fast::hash(&png[start..end]).to_be_bytes();
            png[end..end + 4].copy_from_slice(&crc);
            at = end + 4;
        }
    }

    /// Offset of the height field of a JPEG's frame header (SOF0..SOF2), the width follows it.
    fn jpeg_size_offset(jpeg: &[u8]) -> Option<usize> {
        let mut at = 2;
        while let Some(&[0xFF, marker, hi, lo]) = jpeg.get(at..at + 4) {
            if matches!(marker, 0xC0..=0xC2) {
                return Some(at + 5);
            }
            at += 2 + usize::from(u16::from_be_bytes([hi, lo]));
        }
        None
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Flip(Index, u8),
        Truncate(Index),
        Insert(Index, Vec<u8>),
        Remove(Index, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            4 => (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Flip(at, byte)),
            1 => any::<Index>().prop_map(Mutation::Truncate),
            1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, b)| Mutation::Insert(at, b)),
            1 => (any::<Index>(), 1usize..64).prop_map(|(at, len)| Mutation::Remove(at, len)),
        ]
    }

    fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
        if bytes.is_empty() {
            return;
        }
        match mutation {
            Mutation::Flip(at, byte) => {
                let at = at.index(bytes.len());
                bytes[at] ^= byte;
            }
            Mutation::Truncate(at) => bytes.truncate(at.index(bytes.len())),
            Mutation::Insert(at, inserted) => {
                let at = at.index(bytes.len());
                bytes.splice(at..at, inserted.iter().copied());
            }
            Mutation::Remove(at, len) => {
                let at = at.index(bytes.len());
                bytes.drain(at..(at + len).min(bytes.len()));
            }
        }
    }

    fn claimed_size() -> impl Strategy<Value = u32> {
        prop_oneof![
            prop::sample::select(vec![0, 1, 2, 2047, 2048, 2049, 16384, 60000, 65535, 65536, u32::MAX]),
            1u32..3000,
            any::<u32>(),
        ]
    }

    /// The outcome must be a frame within the limits or an error, and the slot never larger.
    fn check<T>(result: &Result<T, ImageDecodeError>, slot: &FrameSlot) -> Result<(), TestCaseError> {
        if result.is_ok() {
            let meta = slot.meta();
            prop_assert!(meta.width <= LIMITS.max_width && meta.height <= LIMITS.max_height, "{:?}", meta);
            prop_assert_eq!(Some(slot.data().len()), meta.format.frame_bytes(meta.width, meta.height));
        }
        prop_assert!(slot.memory().capacity() as u64 <= LIMITS.max_alloc_bytes());
        Ok(())
    }

    proptest! {
        #![proptest_config(crate::proptest_support::config(CASES))]

        #[test]
        fn mutated_png_decodes_within_the_limits_or_fails(mutations in prop::collection::vec(mutation(), 1..6)) {
            let mut png = PNG.clone();
            for mutation in &mutations {
                apply(&mut png, mutation);
            }
            fix_png_crcs(&mut png);
            let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
            let result = decode_reader(Cursor::new(&png), &LIMITS, &mut slot);
            check(&result, &slot)?;
        }

        #[test]
        fn mutated_jpeg_decodes_within_the_limits_or_fails(mutations in prop::collection::vec(mutation(), 1..6)) {
            let mut jpeg = JPEG.clone();
            for mutation in &mutations {
                apply(&mut jpeg, mutation);
            }
            let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
            let result = decode_reader(Cursor::new(&jpeg), &LIMITS, &mut slot);
            check(&result, &slot)?;
        }

        #[test]
        fn a_header_claiming_any_size_is_refused_over_the_limits(width in claimed_size(), height in claimed_size()) {
            let mut png = PNG.clone();
            png[16..20].copy_from_slice(&width.to_be_bytes());
            png[20..24].copy_from_slice(&height.to_be_bytes());
            fix_png_crcs(&mut png);
            let mut jpeg = JPEG.clone();
            let at = jpeg_size_offset(&jpeg).expect("the sample has a frame header");
            let (jpeg_width, jpeg_height) = (width as u16, height as u16);
            jpeg[at..at + 2].copy_from_slice(&jpeg_height.to_be_bytes());
            jpeg[at + 2..at + 4].copy_from_slice(&jpeg_width.to_be_bytes());
            for (bytes, (w, h)) in [(png, (width, height)), (jpeg, (u32::from(jpeg_width), u32::from(jpeg_height)))] {
                let mut slot = FrameSlot::new(Box::new(HeapMemory::default()));
                let result = decode_reader(Cursor::new(&bytes), &LIMITS, &mut slot);
                check(&result, &slot)?;
                if w > LIMITS.max_width || h > LIMITS.max_height {
                    prop_assert!(result.is_err(), "{}x{} was accepted", w, h);
                }
            }
        }
    }
}
