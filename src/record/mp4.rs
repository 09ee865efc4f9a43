//! Fragmented MP4, written and read back: a video track and, beside it, a timed metadata track.
//!
//! A clip is `ftyp` + `moov` (the tracks, no samples) written once, then one `moof` + `mdat` pair
//! per fragment, each complete in itself, so a file cut anywhere plays up to its last complete
//! fragment. Two fixed-size `free` boxes, which players skip as any `free` box, carry what the
//! recorder needs to read a clip back: the [head] after `moov` (when the first frame was
//! captured) and, once a clip is finished, the [trailer] (camera, start, end, events). The live
//! video's stream (`crate::watch`) is the same layout without the notes and the metadata track.
//!
//! The metadata track ([`METADATA_TRACK`], handler `meta`, sample entry `mett` with the MIME type
//! [`METADATA_MIME`]: ISO/IEC 14496-12's text metadata) carries one JSON sample per change of
//! the boxes drawn over the video, lasting until the next; players that do not know it ignore it,
//! and [`track_samples`] reads it back for the page.
//!
//! Owns: the box layout the recorder writes (timescale [`TIMESCALE`] on both tracks, per-sample
//! durations, sizes, flags and composition offsets), [`scan`], which walks a file the recorder
//! wrote and says where its last complete fragment ends and how long its video plays,
//! [`track_samples`], and the two notes' framing. Must not: do I/O beyond the reader it is given,
//! or trust a size field: every box is checked against the file's length and a bound before
//! anything is allocated for it.

use std::io::{Read, Seek, SeekFrom};

use crate::source::tap::VideoCodec;

/// Ticks per second of the track: MPEG's 90 kHz, exact for every common frame rate.
pub const TIMESCALE: u32 = 90_000;
/// Size of the trailer box, header included.
pub const TRAILER_BYTES: usize = 1024;
/// What a trailer's payload starts with.
const TRAILER_MAGIC: &[u8] = b"jetson-detectd clip 1\n";
/// Size of the head box, header included, and what its payload starts with.
pub const HEAD_BYTES: usize = 256;
const HEAD_MAGIC: &[u8] = b"jetson-detectd clip head 1\n";
/// Largest `moov` or `moof` the scanner reads: ours are a few KiB (a `moof` is 16 bytes a sample).
const MAX_HEADER_BOX: u64 = 1 << 20;
/// The video track's id, and the timed metadata track's beside it in a clip.
pub const VIDEO_TRACK: u32 = 1;
pub const METADATA_TRACK: u32 = 2;
/// What the metadata track's samples are (its `mett` sample entry says so).
pub const METADATA_MIME: &str = "application/json";

#[derive(Debug, thiserror::Error)]
pub enum Mp4Error {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a clip this recorder wrote: {0}")]
    Foreign(String),
}

/// The video track of a clip or of the live video.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    pub codec: VideoCodec,
    pub width: u32,
    pub height: u32,
    /// The `avcC` or `hvcC` record.
    pub decoder_record: Vec<u8>,
}

impl Track {
    /// The track's `codecs` parameter (RFC 6381, ISO/IEC 14496-15 annex E), from its decoder
    /// configuration record: what a browser's Media Source is asked whether it plays, e.g.
    /// `avc1.42c01e` or `hvc1.1.6.L93.B0`. `None` for a record too short to say.
    pub fn codecs(&self) -> Option<String> {
        let record = &self.decoder_record;
        match self.codec {
            VideoCodec::H264 => {
                let [profile, compatibility, level] = [*record.get(1)?, *record.get(2)?, *record.get(3)?];
                Some(format!("avc1.{profile:02x}{compatibility:02x}{level:02x}"))
            }
            VideoCodec::H265 => {
                let first = *record.get(1)?;
                let space = ["", "A", "B", "C"][usize::from(first >> 6)];
                let tier = if first & 0x20 != 0 { 'H' } else { 'L' };
                let compatibility = u32::from_be_bytes(record.get(2..6)?.try_into().ok()?).reverse_bits();
                let constraints = record.get(6..12)?;
                let kept = constraints.iter().rposition(|byte| *byte != 0).map_or(0, |last| last + 1);
                let mut codecs = format!("hvc1.{space}{}.{compatibility:x}.{tier}{}", first & 0x1f, record.get(12)?);
                for byte in &constraints[..kept] {
                    codecs.push_str(&format!(".{byte:x}"));
                }
                Some(codecs)
            }
        }
    }
}

/// One sample of a fragment: an access unit in 4-byte length-prefixed form, or a metadata sample.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub data: &'a [u8],
    /// Ticks of [`TIMESCALE`] until the next sample's decode time.
    pub duration: u32,
    /// Presentation time minus decode time, ticks.
    pub composition_offset: i32,
    pub keyframe: bool,
}

/// Builds boxes: a box is opened (its size written as 0), filled, and closed (its size patched).
struct Boxes {
    out: Vec<u8>,
}

impl Boxes {
    fn open(&mut self, kind: &[u8; 4]) -> usize {
        let at = self.out.len();
        self.out.extend_from_slice(&[0, 0, 0, 0]);
        self.out.extend_from_slice(kind);
        at
    }

    fn open_full(&mut self, kind: &[u8; 4], version: u8, flags: u32) -> usize {
        let at = self.open(kind);
        self.u32(u32::from(version) << 24 | flags & 0x00ff_ffff);
        at
    }

    fn close(&mut self, at: usize) {
        let size = (self.out.len() - at) as u32;
        self.out[at..at + 4].copy_from_slice(&size.to_be_bytes());
    }

    fn u16(&mut self, value: u16) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }
    fn u32(&mut self, value: u32) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }
    fn u64(&mut self, value: u64) {
        self.out.extend_from_slice(&value.to_be_bytes());
    }
    fn zeros(&mut self, n: usize) {
        self.out.resize(self.out.len() + n, 0);
    }
    fn bytes(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
    fn matrix(&mut self) {
        for value in [0x0001_0000, 0, 0, 0, 0x0001_0000, 0, 0, 0, 0x4000_0000u32] {
            self.u32(value);
        }
    }
}

/// `ftyp` and `moov`: what a player needs before the first fragment. With `metadata`, the timed
/// metadata track ([`METADATA_TRACK`]) follows the video track.
pub fn init_segment(track: &Track, metadata: bool) -> Vec<u8> {
    let mut b = Boxes { out: Vec::with_capacity(1024) };
    let ftyp = b.open(b"ftyp");
    b.bytes(b"isom");
    b.u32(0x200);
    let brand: &[u8; 4] = match track.codec {
        VideoCodec::H264 => b"avc1",
        VideoCodec::H265 => b"hvc1",
    };
    for compatible in [b"isom", b"iso6", b"mp41", brand] {
        b.bytes(compatible);
    }
    b.close(ftyp);

    let moov = b.open(b"moov");
    let mvhd = b.open_full(b"mvhd", 0, 0);
    b.zeros(8);
    b.u32(1000);
    b.u32(0);
    b.u32(0x0001_0000);
    b.u16(0x0100);
    b.zeros(10);
    b.matrix();
    b.zeros(24);
    b.u32(if metadata { METADATA_TRACK + 1 } else { VIDEO_TRACK + 1 });
    b.close(mvhd);

    let trak = b.open(b"trak");
    track_header(&mut b, VIDEO_TRACK, track.width, track.height);
    let mdia = b.open(b"mdia");
    media_header(&mut b);
    handler(&mut b, b"vide", b"VideoHandler\0");
    let minf = b.open(b"minf");
    let vmhd = b.open_full(b"vmhd", 0, 1);
    b.zeros(8);
    b.close(vmhd);
    data_information(&mut b);
    let stbl = b.open(b"stbl");
    let stsd = b.open_full(b"stsd", 0, 0);
    b.u32(1);
    let (entry_kind, record_kind): (&[u8; 4], &[u8; 4]) = match track.codec {
        VideoCodec::H264 => (b"avc1", b"avcC"),
        VideoCodec::H265 => (b"hvc1", b"hvcC"),
    };
    let entry = b.open(entry_kind);
    b.zeros(6);
    b.u16(1);
    b.zeros(16);
    b.u16(track.width.min(0xffff) as u16);
    b.u16(track.height.min(0xffff) as u16);
    b.u32(0x0048_0000);
    b.u32(0x0048_0000);
    b.u32(0);
    b.u16(1);
    b.zeros(32);
    b.u16(0x0018);
    b.u16(0xffff);
    let record = b.open(record_kind);
    b.bytes(&track.decoder_record);
    b.close(record);
    b.close(entry);
    b.close(stsd);
    empty_sample_tables(&mut b);
    b.close(stbl);
    b.close(minf);
    b.close(mdia);
    b.close(trak);

    if metadata {
        let trak = b.open(b"trak");
        track_header(&mut b, METADATA_TRACK, 0, 0);
        let mdia = b.open(b"mdia");
        media_header(&mut b);
        handler(&mut b, b"meta", b"jetson-detectd boxes\0");
        let minf = b.open(b"minf");
        let nmhd = b.open_full(b"nmhd", 0, 0);
        b.close(nmhd);
        data_information(&mut b);
        let stbl = b.open(b"stbl");
        let stsd = b.open_full(b"stsd", 0, 0);
        b.u32(1);
        // TextMetaDataSampleEntry: no content encoding, the samples' MIME type.
        let entry = b.open(b"mett");
        b.zeros(6);
        b.u16(1);
        b.bytes(b"\0");
        b.bytes(METADATA_MIME.as_bytes());
        b.bytes(b"\0");
        b.close(entry);
        b.close(stsd);
        empty_sample_tables(&mut b);
        b.close(stbl);
        b.close(minf);
        b.close(mdia);
        b.close(trak);
    }

    let mvex = b.open(b"mvex");
    let tracks: &[u32] = if metadata { &[VIDEO_TRACK, METADATA_TRACK] } else { &[VIDEO_TRACK] };
    for &track_id in tracks {
        let trex = b.open_full(b"trex", 0, 0);
        b.u32(track_id);
        b.u32(1);
        b.zeros(12);
        b.close(trex);
    }
    b.close(mvex);
    b.close(moov);
    b.out
}

/// `tkhd`: enabled and in the movie, `width` × `height` (0 for a track without pictures).
fn track_header(b: &mut Boxes, track_id: u32, width: u32, height: u32) {
    let tkhd = b.open_full(b"tkhd", 0, 3);
    b.zeros(8);
    b.u32(track_id);
    b.zeros(4);
    b.u32(0);
    b.zeros(8);
    b.zeros(8);
    b.matrix();
    b.u32(width << 16);
    b.u32(height << 16);
    b.close(tkhd);
}

/// `mdhd`: [`TIMESCALE`], no duration (fragments carry it), language "und".
fn media_header(b: &mut Boxes) {
    let mdhd = b.open_full(b"mdhd", 0, 0);
    b.zeros(8);
    b.u32(TIMESCALE);
    b.u32(0);
    // "und", packed as three 5-bit letters.
    b.u16(0x55c4);
    b.u16(0);
    b.close(mdhd);
}

fn handler(b: &mut Boxes, kind: &[u8; 4], name: &[u8]) {
    let hdlr = b.open_full(b"hdlr", 0, 0);
    b.u32(0);
    b.bytes(kind);
    b.zeros(12);
    b.bytes(name);
    b.close(hdlr);
}

/// `dinf`: the media is in this file.
fn data_information(b: &mut Boxes) {
    let dinf = b.open(b"dinf");
    let dref = b.open_full(b"dref", 0, 0);
    b.u32(1);
    let url = b.open_full(b"url ", 0, 1);
    b.close(url);
    b.close(dref);
    b.close(dinf);
}

/// The sample tables of a fragmented track: empty (its samples are in the fragments).
fn empty_sample_tables(b: &mut Boxes) {
    for kind in [b"stts", b"stsc", b"stco"] {
        let empty = b.open_full(kind, 0, 0);
        b.u32(0);
        b.close(empty);
    }
    let stsz = b.open_full(b"stsz", 0, 0);
    b.u32(0);
    b.u32(0);
    b.close(stsz);
}

/// Sample flags: a sync sample depends on no other; any other sample depends on others and is
/// not a sync sample.
const KEY_SAMPLE_FLAGS: u32 = 0x0200_0000;
const DELTA_SAMPLE_FLAGS: u32 = 0x0101_0000;
/// `trun` flags: data offset, then per sample duration, size, flags and composition offset.
const TRUN_FLAGS: u32 = 0x0000_0f01;
/// `tfhd` flag: offsets are from the start of the `moof` (no base data offset).
const DEFAULT_BASE_IS_MOOF: u32 = 0x0002_0000;

/// One track's samples in a fragment, the first decoded at `decode_time`.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub track: u32,
    pub decode_time: u64,
    pub samples: &'a [Sample<'a>],
}

/// One fragment of the video track alone: see [`fragment_of`].
pub fn fragment(sequence: u32, decode_time: u64, samples: &[Sample<'_>]) -> Vec<u8> {
    fragment_of(sequence, &[Run { track: VIDEO_TRACK, decode_time, samples }])
}

/// One fragment: `moof` (sequence number, then per run its track, the decode time of its first
/// sample, every sample's duration, size, flags and composition offset) and the `mdat` holding
/// the samples, run after run. Runs without samples are left out.
pub fn fragment_of(sequence: u32, runs: &[Run<'_>]) -> Vec<u8> {
    let runs: Vec<&Run<'_>> = runs.iter().filter(|run| !run.samples.is_empty()).collect();
    let data_bytes: usize = runs.iter().flat_map(|run| run.samples).map(|sample| sample.data.len()).sum();
    let sample_count: usize = runs.iter().map(|run| run.samples.len()).sum();
    let mut b = Boxes { out: Vec::with_capacity(128 + runs.len() * 64 + sample_count * 16 + data_bytes) };
    let moof = b.open(b"moof");
    let mfhd = b.open_full(b"mfhd", 0, 0);
    b.u32(sequence);
    b.close(mfhd);
    let mut data_offsets = Vec::with_capacity(runs.len());
    for run in &runs {
        let traf = b.open(b"traf");
        let tfhd = b.open_full(b"tfhd", 0, DEFAULT_BASE_IS_MOOF);
        b.u32(run.track);
        b.close(tfhd);
        let tfdt = b.open_full(b"tfdt", 1, 0);
        b.u64(run.decode_time);
        b.close(tfdt);
        let trun = b.open_full(b"trun", 1, TRUN_FLAGS);
        b.u32(run.samples.len() as u32);
        data_offsets.push(b.out.len());
        b.u32(0);
        for sample in run.samples {
            b.u32(sample.duration);
            b.u32(sample.data.len() as u32);
            b.u32(if sample.keyframe { KEY_SAMPLE_FLAGS } else { DELTA_SAMPLE_FLAGS });
            b.u32(sample.composition_offset as u32);
        }
        b.close(trun);
        b.close(traf);
    }
    b.close(moof);
    // Each run's data follows the one before it in the mdat, right after its 8-byte header.
    let mut data_offset = b.out.len() - moof + 8;
    for (run, at) in runs.iter().zip(data_offsets) {
        b.out[at..at + 4].copy_from_slice(&(data_offset as u32).to_be_bytes());
        data_offset += run.samples.iter().map(|sample| sample.data.len()).sum::<usize>();
    }
    b.u32((8 + data_bytes) as u32);
    b.bytes(b"mdat");
    for sample in runs.iter().flat_map(|run| run.samples) {
        b.bytes(sample.data);
    }
    b.out
}

/// A `free` box of `size` bytes holding `magic` and `text`, padded with spaces; `None` when the
/// text does not fit.
fn note(magic: &[u8], size: usize, text: &[u8]) -> Option<Vec<u8>> {
    if 8 + magic.len() + text.len() > size {
        return None;
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(size as u32).to_be_bytes());
    out.extend_from_slice(b"free");
    out.extend_from_slice(magic);
    out.extend_from_slice(text);
    out.resize(size, b' ');
    Some(out)
}

/// The text of `bytes` if they are a note of `magic` and `size`.
fn note_text<'a>(magic: &[u8], size: usize, bytes: &'a [u8]) -> Option<&'a [u8]> {
    if bytes.len() != size || bytes[..4] != (size as u32).to_be_bytes() || &bytes[4..8] != b"free" {
        return None;
    }
    let text = bytes[8..].strip_prefix(magic)?;
    let end = text.iter().rposition(|byte| *byte != b' ').map_or(0, |last| last + 1);
    Some(&text[..end])
}

/// The trailer box: `free`, [`TRAILER_BYTES`] long, holding `text`. `None` when `text` does not fit.
pub fn trailer(text: &[u8]) -> Option<Vec<u8>> {
    note(TRAILER_MAGIC, TRAILER_BYTES, text)
}

/// The trailer's text, if `tail` (a file's last [`TRAILER_BYTES`]) is a trailer.
pub fn trailer_text(tail: &[u8]) -> Option<&[u8]> {
    note_text(TRAILER_MAGIC, TRAILER_BYTES, tail)
}

/// The head box, written right after `moov`: `free`, [`HEAD_BYTES`] long, holding what a clip
/// cut short needs to be recovered (`text`). `None` when `text` does not fit.
pub fn head(text: &[u8]) -> Option<Vec<u8>> {
    note(HEAD_MAGIC, HEAD_BYTES, text)
}

/// What [`scan`] found in a clip file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// Bytes of `ftyp`, `moov` and every complete fragment: the file cut here plays whole.
    pub complete_len: u64,
    pub fragments: u32,
    /// The track's timescale (ticks per second).
    pub timescale: u32,
    /// Decode time at the end of the last complete fragment, ticks.
    pub duration_ticks: u64,
    /// Whether the last complete fragment is followed by a trailer.
    pub has_trailer: bool,
    /// The head box's text, when the clip has one.
    pub head: Option<Vec<u8>>,
}

impl Scan {
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.duration_ticks as f64 / f64::from(self.timescale.max(1)))
    }
}

/// Walks a clip of `len` bytes: `ftyp`, `moov`, then `moof` + `mdat` pairs, whose sizes must
/// agree with the samples the `moof` lists; stops at the first box that is cut short, foreign or
/// inconsistent. An error when the file does not even start as a clip.
pub fn scan<R: Read + Seek>(reader: &mut R, len: u64) -> Result<Scan, Mp4Error> {
    let mut at = 0u64;
    let mut result =
        Scan { complete_len: 0, fragments: 0, timescale: 0, duration_ticks: 0, has_trailer: false, head: None };
    let mut pending: Option<Fragment> = None;
    let mut seen_moov = false;
    while let Some((kind, header, size)) = read_header(reader, at, len)? {
        match &kind {
            b"ftyp" if at == 0 => {}
            b"moov" if !seen_moov && at > 0 => {
                let body = read_body(reader, at + header, size - header)?;
                result.timescale =
                    find_timescale(&body).ok_or_else(|| Mp4Error::Foreign("the moov has no media timescale".into()))?;
                seen_moov = true;
                result.complete_len = at + size;
            }
            b"moof" if seen_moov && pending.is_none() => {
                match read_body(reader, at + header, size - header).ok().and_then(|body| Fragment::parse(&body)) {
                    Some(fragment) => pending = Some(fragment),
                    None => break,
                }
            }
            b"mdat" => match pending.take() {
                Some(fragment) if size - header == fragment.data_bytes => {
                    result.fragments += 1;
                    if let Some(video) = fragment.run(VIDEO_TRACK) {
                        result.duration_ticks = video.decode_time + video.duration();
                    }
                    result.complete_len = at + size;
                }
                _ => break,
            },
            b"free" if seen_moov && result.fragments == 0 && result.head.is_none() && size == HEAD_BYTES as u64 => {
                let body = read_body(reader, at, size)?;
                match note_text(HEAD_MAGIC, HEAD_BYTES, &body) {
                    Some(text) => result.head = Some(text.to_vec()),
                    None => break,
                }
                result.complete_len = at + size;
            }
            b"free" if seen_moov && pending.is_none() && size == TRAILER_BYTES as u64 => {
                let mut tail = vec![0; TRAILER_BYTES];
                reader.seek(SeekFrom::Start(at))?;
                reader.read_exact(&mut tail)?;
                result.has_trailer = trailer_text(&tail).is_some();
                break;
            }
            _ if at == 0 => return Err(Mp4Error::Foreign("it does not start with an ftyp box".into())),
            _ => break,
        }
        at += size;
    }
    if !seen_moov {
        return Err(Mp4Error::Foreign("no complete moov box".into()));
    }
    Ok(result)
}

/// The box header at `at`: its type, header length and total size; `None` at the end of the file
/// or at a box that does not fit in it.
fn read_header<R: Read + Seek>(reader: &mut R, at: u64, len: u64) -> Result<Option<([u8; 4], u64, u64)>, Mp4Error> {
    if at + 8 > len {
        return Ok(None);
    }
    let mut header = [0u8; 16];
    reader.seek(SeekFrom::Start(at))?;
    reader.read_exact(&mut header[..8])?;
    let kind = [header[4], header[5], header[6], header[7]];
    let (size, header_len) = match u32::from_be_bytes([header[0], header[1], header[2], header[3]]) {
        1 if at + 16 <= len => {
            reader.read_exact(&mut header[8..16])?;
            (u64::from_be_bytes(header[8..16].try_into().unwrap_or_default()), 16)
        }
        // 0 ("to the end of the file") is never written by the recorder; 1 without room is cut.
        0 | 1 => return Ok(None),
        size => (u64::from(size), 8),
    };
    if size < header_len || at.checked_add(size).is_none_or(|end| end > len) {
        return Ok(None);
    }
    Ok(Some((kind, header_len, size)))
}

fn read_body<R: Read + Seek>(reader: &mut R, at: u64, size: u64) -> Result<Vec<u8>, Mp4Error> {
    if size > MAX_HEADER_BOX {
        return Err(Mp4Error::Foreign(format!("a header box of {size} bytes")));
    }
    let mut body = vec![0; size as usize];
    reader.seek(SeekFrom::Start(at))?;
    reader.read_exact(&mut body)?;
    Ok(body)
}

/// The child boxes of a box body: (type, body).
fn children(body: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    let mut rest = body;
    std::iter::from_fn(move || {
        let size = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let kind: [u8; 4] = rest.get(4..8)?.try_into().ok()?;
        let child = rest.get(8..size.max(8))?;
        rest = &rest[size.max(8)..];
        Some((kind, child))
    })
}

fn child<'a>(body: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    children(body).find(|(found, _)| found == kind).map(|(_, child)| child)
}

fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn be64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// `moov/trak/mdia/mdhd`'s timescale.
fn find_timescale(moov: &[u8]) -> Option<u32> {
    let mdhd = child(child(child(moov, b"trak")?, b"mdia")?, b"mdhd")?;
    let timescale = if mdhd.first()? == &1 { be32(mdhd, 20)? } else { be32(mdhd, 12)? };
    (timescale > 0).then_some(timescale)
}

/// Each fragment of a clip the recorder wrote (`file`, whole in memory): its sequence number and
/// the decode time of each of its samples. What tests check a clip's timeline with.
#[cfg(test)]
pub fn sample_times(file: &[u8]) -> Vec<(u32, Vec<u64>)> {
    let fragment = |moof: &[u8]| -> Option<(u32, Vec<u64>)> {
        let sequence = be32(child(moof, b"mfhd")?, 4)?;
        let traf = children(moof)
            .filter(|(kind, _)| kind == b"traf")
            .map(|(_, traf)| traf)
            .find(|traf| child(traf, b"tfhd").and_then(|tfhd| be32(tfhd, 4)) == Some(VIDEO_TRACK))?;
        let mut time = be64(child(traf, b"tfdt")?, 4)?;
        let trun = child(traf, b"trun")?;
        // The recorder's `trun`: flags, count, data offset, then 16 bytes a sample, duration first.
        let times = (0..be32(trun, 4)? as usize)
            .map(|sample| {
                let at = time;
                time += u64::from(be32(trun, 12 + 16 * sample)?);
                Some(at)
            })
            .collect::<Option<Vec<u64>>>()?;
        Some((sequence, times))
    };
    children(file).filter(|(kind, _)| kind == b"moof").filter_map(|(_, moof)| fragment(moof)).collect()
}

/// What one `moof` says of its fragment: each track's run of samples.
struct Fragment {
    runs: Vec<TrackRun>,
    /// Bytes of every run's samples: the `mdat` that follows holds exactly these.
    data_bytes: u64,
}

/// One `traf`: a track's samples in a fragment.
struct TrackRun {
    track: u32,
    decode_time: u64,
    /// Each sample's duration and size.
    samples: Vec<(u32, u32)>,
    /// Where its first sample's bytes start, from the start of the `moof`.
    data_offset: u64,
}

impl TrackRun {
    fn duration(&self) -> u64 {
        self.samples.iter().map(|(duration, _)| u64::from(*duration)).sum()
    }
}

impl Fragment {
    fn parse(moof: &[u8]) -> Option<Fragment> {
        let mut runs = Vec::new();
        for (kind, traf) in children(moof) {
            if &kind == b"traf" {
                runs.push(TrackRun::parse(traf)?);
            }
        }
        if runs.is_empty() {
            return None;
        }
        let data_bytes = runs.iter().flat_map(|run| &run.samples).map(|(_, size)| u64::from(*size)).sum();
        Some(Fragment { runs, data_bytes })
    }

    fn run(&self, track: u32) -> Option<&TrackRun> {
        self.runs.iter().find(|run| run.track == track)
    }
}

impl TrackRun {
    fn parse(traf: &[u8]) -> Option<TrackRun> {
        let tfhd = child(traf, b"tfhd")?;
        let tfhd_flags = be32(tfhd, 0)? & 0x00ff_ffff;
        let track = be32(tfhd, 4)?;
        // Only offsets from the start of the `moof` (what the recorder writes) are read.
        if tfhd_flags & 0x01 != 0 {
            return None;
        }
        let mut at = 8;
        at += if tfhd_flags & 0x02 != 0 { 4 } else { 0 };
        let default_duration = if tfhd_flags & 0x08 != 0 { be32(tfhd, at)? } else { 0 };
        at += if tfhd_flags & 0x08 != 0 { 4 } else { 0 };
        let default_size = if tfhd_flags & 0x10 != 0 { be32(tfhd, at)? } else { 0 };
        let tfdt = child(traf, b"tfdt")?;
        let decode_time = if tfdt.first()? == &1 { be64(tfdt, 4)? } else { u64::from(be32(tfdt, 4)?) };
        let trun = child(traf, b"trun")?;
        let flags = be32(trun, 0)? & 0x00ff_ffff;
        let count = be32(trun, 4)? as usize;
        let data_offset = if flags & 0x01 != 0 { u64::from(be32(trun, 8)?) } else { 0 };
        let mut at = 8 + if flags & 0x01 != 0 { 4 } else { 0 } + if flags & 0x04 != 0 { 4 } else { 0 };
        let per_sample = [0x100, 0x200, 0x400, 0x800].iter().filter(|bit| flags & **bit != 0).count() * 4;
        if count.checked_mul(per_sample)?.checked_add(at)? > trun.len() {
            return None;
        }
        let mut samples = Vec::with_capacity(count);
        for _ in 0..count {
            let mut field = || {
                let value = be32(trun, at);
                at += 4;
                value
            };
            let duration = if flags & 0x100 != 0 { field()? } else { default_duration };
            let size = if flags & 0x200 != 0 { field()? } else { default_size };
            if flags & 0x400 != 0 {
                field()?;
            }
            if flags & 0x800 != 0 {
                field()?;
            }
            samples.push((duration, size));
        }
        Some(TrackRun { track, decode_time, samples, data_offset })
    }
}

/// One sample read back by [`track_samples`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSample {
    /// Decode time and duration, ticks of [`TIMESCALE`].
    pub decode_time: u64,
    pub duration: u32,
    pub data: Vec<u8>,
}

/// The samples of track `track` in the complete fragments of a file the recorder wrote, `len`
/// bytes long, in order: at most `max_bytes` of sample data (the samples past it are left out,
/// and the answer says so with `true`).
pub fn track_samples<R: Read + Seek>(
    reader: &mut R,
    len: u64,
    track: u32,
    max_bytes: u64,
) -> Result<(Vec<ReadSample>, bool), Mp4Error> {
    let mut at = 0u64;
    let mut samples = Vec::new();
    let mut read = 0u64;
    let mut pending: Option<(u64, Fragment)> = None;
    while let Some((kind, header, size)) = read_header(reader, at, len)? {
        match &kind {
            b"moof" if pending.is_none() => {
                match read_body(reader, at + header, size - header).ok().and_then(|body| Fragment::parse(&body)) {
                    Some(fragment) => pending = Some((at, fragment)),
                    None => break,
                }
            }
            b"mdat" => {
                let Some((moof_at, fragment)) = pending.take() else { break };
                if size - header != fragment.data_bytes {
                    break;
                }
                let body = (at + header)..(at + size);
                if let Some(run) = fragment.run(track) {
                    let mut offset = moof_at + run.data_offset;
                    let mut time = run.decode_time;
                    for &(duration, bytes) in &run.samples {
                        let end = offset + u64::from(bytes);
                        if offset < body.start || end > body.end {
                            return Err(Mp4Error::Foreign("a sample outside its mdat".into()));
                        }
                        if read + u64::from(bytes) > max_bytes {
                            return Ok((samples, true));
                        }
                        let mut data = vec![0; bytes as usize];
                        reader.seek(SeekFrom::Start(offset))?;
                        reader.read_exact(&mut data)?;
                        read += u64::from(bytes);
                        samples.push(ReadSample { decode_time: time, duration, data });
                        time += u64::from(duration);
                        offset = end;
                    }
                }
            }
            b"ftyp" | b"moov" | b"free" if pending.is_none() => {}
            _ => break,
        }
        at += size;
    }
    Ok((samples, false))
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    fn track() -> Track {
        Track {
            codec: VideoCodec::H264,
            width: 320,
            height: 240,
            decoder_record: vec![1, 0x42, 0, 0x1e, 0xff, 0xe0, 0],
        }
    }

    fn clip(fragments: u32) -> Vec<u8> {
        let mut file = init_segment(&track(), false);
        let data = [0, 0, 0, 2, 0x65, 1];
        for n in 0..fragments {
            let samples = [
                Sample { data: &data, duration: 3000, composition_offset: 0, keyframe: true },
                Sample { data: &data[..5], duration: 3000, composition_offset: 0, keyframe: false },
            ];
            file.extend(fragment(n + 1, u64::from(n) * 6000, &samples));
        }
        file
    }

    #[test]
    fn a_scan_finds_every_fragment_and_the_duration() {
        let file = clip(3);
        let scan = scan(&mut Cursor::new(&file), file.len() as u64).expect("scan");
        assert_eq!((scan.fragments, scan.timescale, scan.duration_ticks), (3, TIMESCALE, 18_000));
        assert_eq!(scan.complete_len, file.len() as u64);
        assert_eq!(scan.duration(), std::time::Duration::from_millis(200));
        assert!(!scan.has_trailer);
    }

    #[test]
    fn a_file_cut_anywhere_in_a_fragment_scans_to_the_fragment_before() {
        let whole = clip(2);
        let one = clip(1).len() as u64;
        let header = init_segment(&track(), false).len() as u64;
        for cut in [one + 1, one + 8, whole.len() as u64 - 1] {
            let scan = scan(&mut Cursor::new(&whole[..cut as usize]), cut).expect("scan");
            assert_eq!((scan.fragments, scan.complete_len), (1, one), "cut at {cut}");
        }
        let scan = scan(&mut Cursor::new(&whole[..header as usize + 3]), header + 3).expect("scan");
        assert_eq!((scan.fragments, scan.complete_len), (0, header));
        assert!(super::scan(&mut Cursor::new(&whole[..20]), 20).is_err(), "no moov");
        assert!(super::scan(&mut Cursor::new(b"garbage garbage!"), 16).is_err());
    }

    #[test]
    fn a_fragment_whose_mdat_disagrees_with_its_moof_ends_the_scan() {
        let mut file = clip(2);
        let one = clip(1).len();
        // The second mdat's size claims one byte less than its samples.
        let mdat = file.windows(4).rposition(|w| w == b"mdat").expect("mdat") - 4;
        let size = u32::from_be_bytes(file[mdat..mdat + 4].try_into().expect("4 bytes")) - 1;
        file[mdat..mdat + 4].copy_from_slice(&size.to_be_bytes());
        let scan = scan(&mut Cursor::new(&file), file.len() as u64).expect("scan");
        assert_eq!((scan.fragments, scan.complete_len), (1, one as u64));
    }

    #[test]
    fn the_trailer_is_found_after_the_last_fragment_and_its_text_read_back() {
        let mut file = clip(1);
        file.extend(trailer(br#"{"tracks":[4]}"#).expect("fits"));
        let scan = scan(&mut Cursor::new(&file), file.len() as u64).expect("scan");
        assert!(scan.has_trailer && scan.fragments == 1);
        assert_eq!(trailer_text(&file[file.len() - TRAILER_BYTES..]), Some(&br#"{"tracks":[4]}"#[..]));
        assert_eq!(trailer_text(&file[..TRAILER_BYTES]), None);
        assert!(trailer(&[b'x'; TRAILER_BYTES]).is_none());
    }

    #[test]
    fn the_head_box_after_the_moov_is_read_back_and_fragments_follow_it() {
        let mut file = init_segment(&track(), false);
        file.extend(head(br#"{"start_ms":5}"#).expect("fits"));
        let data = [0, 0, 0, 1, 0x65];
        file.extend(fragment(1, 0, &[Sample { data: &data, duration: 9, composition_offset: 0, keyframe: true }]));
        let scan = scan(&mut Cursor::new(&file), file.len() as u64).expect("scan");
        assert_eq!(scan.head.as_deref(), Some(&br#"{"start_ms":5}"#[..]));
        assert_eq!((scan.fragments, scan.duration_ticks, scan.complete_len), (1, 9, file.len() as u64));
    }

    #[test]
    fn a_fragment_with_a_metadata_run_scans_by_its_video_and_the_metadata_samples_read_back() {
        let mut file = init_segment(&track(), true);
        let video = [0, 0, 0, 2, 0x65, 1];
        let boxes: [&[u8]; 3] = [br#"{"boxes":[]}"#, br#"{"boxes":[1]}"#, br#"{"boxes":[2]}"#];
        let meta = |n: usize, duration| Sample { data: boxes[n], duration, composition_offset: 0, keyframe: true };
        for n in 0..2u32 {
            let samples = [Sample { data: &video, duration: 3000, composition_offset: 0, keyframe: true }];
            let metadata = [meta(n as usize, 2000), meta(n as usize + 1, 1000)];
            let runs = [
                Run { track: VIDEO_TRACK, decode_time: u64::from(n) * 3000, samples: &samples },
                Run { track: METADATA_TRACK, decode_time: u64::from(n) * 3000, samples: &metadata[..1 + n as usize] },
            ];
            file.extend(fragment_of(n + 1, &runs));
        }
        let scan = scan(&mut Cursor::new(&file), file.len() as u64).expect("scan");
        assert_eq!((scan.fragments, scan.duration_ticks, scan.complete_len), (2, 6000, file.len() as u64));
        let (samples, cut) = track_samples(&mut Cursor::new(&file), file.len() as u64, METADATA_TRACK, 1 << 20)
            .expect("the metadata track");
        let read: Vec<(u64, u32, &[u8])> = samples.iter().map(|s| (s.decode_time, s.duration, &s.data[..])).collect();
        assert_eq!(read, [(0, 2000, boxes[0]), (3000, 2000, boxes[1]), (5000, 1000, boxes[2])]);
        assert!(!cut);
        let (video_samples, _) =
            track_samples(&mut Cursor::new(&file), file.len() as u64, VIDEO_TRACK, 1 << 20).expect("the video");
        assert!(video_samples.iter().all(|sample| sample.data == video));
        let (first, cut) = track_samples(&mut Cursor::new(&file), file.len() as u64, METADATA_TRACK, 30).expect("cut");
        assert_eq!((first.len(), cut), (2, true), "at most 30 bytes of samples");
        assert_eq!(sample_times(&file), [(1, vec![0]), (2, vec![3000])], "the video's times");
    }

    #[test]
    fn the_codecs_parameter_comes_from_the_decoder_record() {
        assert_eq!(track().codecs().as_deref(), Some("avc1.42001e"));
        // An hvcC of Main profile, Main tier, level 3.1 (93), progressive-source flag only.
        let mut record = vec![1, 0x01, 0x60, 0, 0, 0, 0x90, 0, 0, 0, 0, 0, 93];
        let hevc = |record: &[u8]| {
            Track { codec: VideoCodec::H265, width: 1, height: 1, decoder_record: record.to_vec() }.codecs()
        };
        assert_eq!(hevc(&record).as_deref(), Some("hvc1.1.6.L93.90"));
        record[1] = 0x22;
        record[12] = 120;
        assert_eq!(hevc(&record).as_deref(), Some("hvc1.2.6.H120.90"), "Main 10, High tier");
        assert_eq!(hevc(&record[..5]), None);
    }

    #[test]
    fn the_moof_data_offset_points_at_the_first_sample() {
        let data = [0, 0, 0, 1, 0x65];
        let bytes = fragment(1, 0, &[Sample { data: &data, duration: 1, composition_offset: 0, keyframe: true }]);
        let moof_len = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let trun = bytes.windows(4).position(|w| w == b"trun").expect("trun") + 4;
        let offset = u32::from_be_bytes(bytes[trun + 8..trun + 12].try_into().expect("4 bytes")) as usize;
        assert_eq!(offset, moof_len + 8);
        assert_eq!(&bytes[offset..], &data);
    }
}
