//! H.264/H.265 access units as an MP4 file wants them: NAL units split out of Annex B
//! byte-stream or length-prefixed framing, parameter sets kept apart, and the decoder
//! configuration record (`avcC`, `hvcC`) built from them.
//!
//! Owns: the NAL unit types the recorder cares about (parameter sets, delimiters, keyframes), the
//! few SPS fields an `hvcC` record needs (read with emulation-prevention bytes removed), and the
//! conversion of one access unit into 4-byte length-prefixed samples without in-band parameter
//! sets. Must not: decode pictures, or trust a length field: every read of camera bytes is
//! bounds-checked and a malformed unit is an error, never a panic.

use crate::source::tap::VideoCodec;

/// What a malformed unit or parameter set is reported as.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NalError(pub String);

fn malformed(what: impl Into<String>) -> NalError {
    NalError(what.into())
}

/// The kind of a NAL unit, as far as recording goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NalKind {
    Vps,
    Sps,
    Pps,
    /// An access unit delimiter: dropped from samples (MP4 samples carry none).
    Delimiter,
    /// An IDR (H.264) or IRAP (H.265) slice: a decoder can start here.
    KeySlice,
    Other,
}

/// The kind of `nal` (its header byte(s) included).
pub fn kind(codec: VideoCodec, nal: &[u8]) -> NalKind {
    let Some(&first) = nal.first() else { return NalKind::Other };
    match codec {
        VideoCodec::H264 => match first & 0x1f {
            5 => NalKind::KeySlice,
            7 => NalKind::Sps,
            8 => NalKind::Pps,
            9 => NalKind::Delimiter,
            _ => NalKind::Other,
        },
        VideoCodec::H265 => match (first >> 1) & 0x3f {
            16..=21 => NalKind::KeySlice,
            32 => NalKind::Vps,
            33 => NalKind::Sps,
            34 => NalKind::Pps,
            35 => NalKind::Delimiter,
            _ => NalKind::Other,
        },
    }
}

/// The NAL units of an Annex B access unit (start codes `00 00 01` or `00 00 00 01` removed, as
/// are the zero bytes that trail a unit).
pub fn split_annex_b(data: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut units = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let mut end = starts.get(n + 1).map_or(data.len(), |next| next - 3);
        while end > start && data[end - 1] == 0 {
            end -= 1;
        }
        if end > start {
            units.push(&data[start..end]);
        }
    }
    units
}

/// The NAL units of a length-prefixed access unit (`length_size` bytes, big-endian, per unit).
pub fn split_length_prefixed(data: &[u8], length_size: u8) -> Result<Vec<&[u8]>, NalError> {
    let size = usize::from(length_size);
    if !matches!(size, 1 | 2 | 4) {
        return Err(malformed(format!("NAL length size {size} (1, 2 or 4 allowed)")));
    }
    let mut units = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        if rest.len() < size {
            return Err(malformed("a NAL length cut short"));
        }
        let length = rest[..size].iter().fold(0usize, |n, byte| n << 8 | usize::from(*byte));
        let unit = rest.get(size..size + length).ok_or_else(|| malformed("a NAL unit longer than its access unit"))?;
        if !unit.is_empty() {
            units.push(unit);
        }
        rest = &rest[size + length..];
    }
    Ok(units)
}

/// The parameter sets of a stream, as last seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParameterSets {
    pub vps: Vec<Vec<u8>>,
    pub sps: Vec<Vec<u8>>,
    pub pps: Vec<Vec<u8>>,
}

impl ParameterSets {
    /// Takes the parameter sets among `units`; a set of one kind replaces the earlier ones of that
    /// kind (a new SPS comes with its PPS). Returns whether anything changed.
    pub fn update(&mut self, codec: VideoCodec, units: &[&[u8]]) -> bool {
        let mut fresh = ParameterSets::default();
        for unit in units {
            match kind(codec, unit) {
                NalKind::Vps => fresh.vps.push(unit.to_vec()),
                NalKind::Sps => fresh.sps.push(unit.to_vec()),
                NalKind::Pps => fresh.pps.push(unit.to_vec()),
                _ => {}
            }
        }
        let mut changed = false;
        for (mine, new) in [(&mut self.vps, fresh.vps), (&mut self.sps, fresh.sps), (&mut self.pps, fresh.pps)] {
            if !new.is_empty() && *mine != new {
                *mine = new;
                changed = true;
            }
        }
        changed
    }

    /// The parameter sets inside a decoder configuration record (`avcC` or `hvcC`).
    pub fn from_record(codec: VideoCodec, record: &[u8]) -> Result<ParameterSets, NalError> {
        let mut reader = ByteReader { data: record, at: 0 };
        let mut sets = ParameterSets::default();
        let units: Vec<Vec<u8>> = match codec {
            VideoCodec::H264 => {
                reader.skip(5)?;
                let mut units = Vec::new();
                let sps_count = reader.u8()? & 0x1f;
                for _ in 0..sps_count {
                    units.push(reader.sized()?.to_vec());
                }
                let pps_count = reader.u8()?;
                for _ in 0..pps_count {
                    units.push(reader.sized()?.to_vec());
                }
                units
            }
            VideoCodec::H265 => {
                reader.skip(22)?;
                let arrays = reader.u8()?;
                let mut units = Vec::new();
                for _ in 0..arrays {
                    reader.skip(1)?;
                    let count = reader.u16()?;
                    for _ in 0..count {
                        units.push(reader.sized()?.to_vec());
                    }
                }
                units
            }
        };
        let borrowed: Vec<&[u8]> = units.iter().map(Vec::as_slice).collect();
        sets.update(codec, &borrowed);
        Ok(sets)
    }

    /// Whether a decoder could start with these: an SPS and a PPS (and a VPS for H.265).
    pub fn is_complete(&self, codec: VideoCodec) -> bool {
        !self.sps.is_empty() && !self.pps.is_empty() && (codec == VideoCodec::H264 || !self.vps.is_empty())
    }

    /// The `avcC` or `hvcC` record for these parameter sets, 4-byte NAL lengths.
    pub fn decoder_record(&self, codec: VideoCodec) -> Result<Vec<u8>, NalError> {
        if !self.is_complete(codec) {
            return Err(malformed("no complete parameter sets seen yet"));
        }
        match codec {
            VideoCodec::H264 => self.avcc(),
            VideoCodec::H265 => self.hvcc(),
        }
    }

    fn avcc(&self) -> Result<Vec<u8>, NalError> {
        let sps = &self.sps[0];
        if sps.len() < 4 {
            return Err(malformed("an SPS of fewer than 4 bytes"));
        }
        let mut out = vec![1, sps[1], sps[2], sps[3], 0xfc | 3, 0xe0 | count(&self.sps, 31)?];
        for unit in &self.sps {
            push_sized(&mut out, unit)?;
        }
        out.push(count(&self.pps, 255)?);
        for unit in &self.pps {
            push_sized(&mut out, unit)?;
        }
        Ok(out)
    }

    fn hvcc(&self) -> Result<Vec<u8>, NalError> {
        let sps = HevcSps::parse(&self.sps[0])?;
        let mut out = Vec::with_capacity(64);
        out.push(1);
        out.extend_from_slice(&sps.profile_tier_level);
        out.extend_from_slice(&[0xf0, 0x00, 0xfc, 0xfc | sps.chroma_format_idc]);
        out.push(0xf8 | sps.bit_depth_luma_minus8);
        out.push(0xf8 | sps.bit_depth_chroma_minus8);
        out.extend_from_slice(&[0, 0]);
        let layers = (sps.max_sub_layers_minus1 + 1) & 0x07;
        out.push(layers << 3 | u8::from(sps.temporal_id_nesting) << 2 | 3);
        out.push(3);
        for (nal_type, units) in [(32u8, &self.vps), (33, &self.sps), (34, &self.pps)] {
            out.push(0x80 | nal_type);
            let n = u16::try_from(units.len()).map_err(|_| malformed("too many parameter sets"))?;
            out.extend_from_slice(&n.to_be_bytes());
            for unit in units {
                push_sized(&mut out, unit)?;
            }
        }
        Ok(out)
    }
}

fn count(units: &[Vec<u8>], max: usize) -> Result<u8, NalError> {
    if units.len() > max {
        return Err(malformed(format!("{} parameter sets of one kind (at most {max})", units.len())));
    }
    Ok(units.len() as u8)
}

fn push_sized(out: &mut Vec<u8>, unit: &[u8]) -> Result<(), NalError> {
    let length = u16::try_from(unit.len()).map_err(|_| malformed("a parameter set over 64 KiB"))?;
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(unit);
    Ok(())
}

/// Writes `units` as one MP4 sample: each unit behind its 4-byte length, parameter sets and
/// delimiters left out (they live in the sample entry). Returns whether a key slice was among them.
pub fn write_sample(codec: VideoCodec, units: &[&[u8]], out: &mut Vec<u8>) -> Result<bool, NalError> {
    let mut key = false;
    for unit in units {
        match kind(codec, unit) {
            NalKind::Vps | NalKind::Sps | NalKind::Pps | NalKind::Delimiter => continue,
            NalKind::KeySlice => key = true,
            NalKind::Other => {}
        }
        let length = u32::try_from(unit.len()).map_err(|_| malformed("a NAL unit over 4 GiB"))?;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(unit);
    }
    Ok(key)
}

/// The fields of an H.265 SPS that an `hvcC` record repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HevcSps {
    max_sub_layers_minus1: u8,
    temporal_id_nesting: bool,
    /// general_profile_space .. general_level_idc: 12 bytes as in the SPS.
    profile_tier_level: [u8; 12],
    chroma_format_idc: u8,
    bit_depth_luma_minus8: u8,
    bit_depth_chroma_minus8: u8,
}

impl HevcSps {
    fn parse(nal: &[u8]) -> Result<HevcSps, NalError> {
        let rbsp = unescape(nal.get(2..).ok_or_else(|| malformed("an SPS without a header"))?);
        let mut bits = BitReader { data: &rbsp, bit: 0 };
        bits.skip(4)?;
        let max_sub_layers_minus1 = bits.bits(3)? as u8;
        let temporal_id_nesting = bits.bits(1)? == 1;
        let mut profile_tier_level = [0u8; 12];
        for byte in &mut profile_tier_level {
            *byte = bits.bits(8)? as u8;
        }
        let sub_layers = usize::from(max_sub_layers_minus1);
        let mut present = Vec::with_capacity(sub_layers);
        for _ in 0..sub_layers {
            present.push((bits.bits(1)? == 1, bits.bits(1)? == 1));
        }
        if sub_layers > 0 {
            bits.skip(2 * (8 - sub_layers))?;
        }
        for (profile, level) in present {
            bits.skip(if profile { 88 } else { 0 } + if level { 8 } else { 0 })?;
        }
        bits.ue()?;
        let chroma_format_idc = bits.ue()?;
        if chroma_format_idc > 3 {
            return Err(malformed(format!("chroma_format_idc {chroma_format_idc}")));
        }
        if chroma_format_idc == 3 {
            bits.skip(1)?;
        }
        bits.ue()?;
        bits.ue()?;
        if bits.bits(1)? == 1 {
            for _ in 0..4 {
                bits.ue()?;
            }
        }
        let luma = bits.ue()?;
        let chroma = bits.ue()?;
        if luma > 8 || chroma > 8 {
            return Err(malformed(format!("bit depths {} / {}", luma + 8, chroma + 8)));
        }
        Ok(HevcSps {
            max_sub_layers_minus1,
            temporal_id_nesting,
            profile_tier_level,
            chroma_format_idc: chroma_format_idc as u8,
            bit_depth_luma_minus8: luma as u8,
            bit_depth_chroma_minus8: chroma as u8,
        })
    }
}

/// The RBSP of a NAL payload: every `00 00 03` loses its `03`.
fn unescape(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut zeros = 0;
    for &byte in data {
        if zeros >= 2 && byte == 3 {
            zeros = 0;
            continue;
        }
        zeros = if byte == 0 { zeros + 1 } else { 0 };
        out.push(byte);
    }
    out
}

struct BitReader<'a> {
    data: &'a [u8],
    bit: usize,
}

impl BitReader<'_> {
    fn bits(&mut self, n: usize) -> Result<u32, NalError> {
        let mut value = 0u32;
        for _ in 0..n {
            let byte = self.data.get(self.bit / 8).ok_or_else(|| malformed("an SPS cut short"))?;
            value = value << 1 | u32::from(byte >> (7 - self.bit % 8) & 1);
            self.bit += 1;
        }
        Ok(value)
    }

    fn skip(&mut self, n: usize) -> Result<(), NalError> {
        if self.bit + n > self.data.len() * 8 {
            return Err(malformed("an SPS cut short"));
        }
        self.bit += n;
        Ok(())
    }

    /// An unsigned Exp-Golomb value (at most 31 leading zeros).
    fn ue(&mut self) -> Result<u32, NalError> {
        let mut zeros = 0;
        while self.bits(1)? == 0 {
            zeros += 1;
            if zeros > 31 {
                return Err(malformed("an Exp-Golomb code over 32 bits"));
            }
        }
        let rest = self.bits(zeros)?;
        Ok(((1u64 << zeros) - 1 + u64::from(rest)).min(u64::from(u32::MAX)) as u32)
    }
}

struct ByteReader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> ByteReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], NalError> {
        let bytes = self.data.get(self.at..self.at + n).ok_or_else(|| malformed("a configuration record cut short"))?;
        self.at += n;
        Ok(bytes)
    }
    fn skip(&mut self, n: usize) -> Result<(), NalError> {
        self.take(n).map(drop)
    }
    fn u8(&mut self) -> Result<u8, NalError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, NalError> {
        let bytes = self.take(2)?;
        Ok(u16::from_be_bytes([bytes[0], bytes[1]]))
    }
    fn sized(&mut self) -> Result<&'a [u8], NalError> {
        let length = self.u16()?;
        self.take(usize::from(length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// x265enc's VPS, SPS and PPS for 1280x720 I420 (Main profile, level 3.1).
    const HEVC_VPS: [u8; 24] = [
        0x40, 0x01, 0x0c, 0x01, 0xff, 0xff, 0x01, 0x60, 0x00, 0x00, 0x03, 0x00, 0x90, 0x00, 0x00, 0x03, 0x00, 0x00,
        0x03, 0x00, 0x5d, 0x95, 0x98, 0x09,
    ];
    const HEVC_SPS: [u8; 50] = [
        0x42, 0x01, 0x01, 0x01, 0x60, 0x00, 0x00, 0x03, 0x00, 0x90, 0x00, 0x00, 0x03, 0x00, 0x00, 0x03, 0x00, 0x5d,
        0xa0, 0x02, 0x80, 0x80, 0x2d, 0x16, 0x59, 0x59, 0xa4, 0x93, 0x2b, 0xff, 0xc0, 0x00, 0x40, 0x00, 0x5a, 0x80,
        0x80, 0x80, 0x82, 0x00, 0x00, 0x03, 0x00, 0x02, 0x00, 0x00, 0x03, 0x00, 0x3c, 0x10,
    ];
    const HEVC_PPS: [u8; 7] = [0x44, 0x01, 0xc1, 0x72, 0xb4, 0x62, 0x40];
    /// The `hvcC` h265parse makes of them, but for the arrays' completeness bits (set here: the
    /// sets are never in band in our samples).
    const HEVC_RECORD_HEAD: [u8; 23] = [
        0x01, 0x01, 0x60, 0x00, 0x00, 0x00, 0x90, 0x00, 0x00, 0x00, 0x00, 0x00, 0x5d, 0xf0, 0x00, 0xfc, 0xfd, 0xf8,
        0xf8, 0x00, 0x00, 0x0f, 0x03,
    ];

    #[test]
    fn annex_b_units_are_split_at_either_start_code_and_lose_trailing_zeros() {
        let data = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 0, 1, 0x65, 4, 5, 0];
        assert_eq!(split_annex_b(&data), [&[0x67, 1, 2][..], &[0x68, 3], &[0x65, 4, 5]]);
        assert!(split_annex_b(&[1, 2, 3]).is_empty(), "no start code: nothing");
        assert!(split_annex_b(&[]).is_empty());
    }

    #[test]
    fn length_prefixed_units_are_split_and_lengths_past_the_end_are_errors() {
        let data = [0, 0, 0, 2, 0x65, 1, 0, 0, 0, 1, 0x41];
        assert_eq!(split_length_prefixed(&data, 4).expect("valid"), [&[0x65, 1][..], &[0x41]]);
        assert!(split_length_prefixed(&[0, 0, 0, 9, 1], 4).is_err());
        assert!(split_length_prefixed(&[0, 0], 4).is_err());
        assert!(split_length_prefixed(&data, 3).is_err());
    }

    #[test]
    fn an_h264_sample_loses_parameter_sets_and_delimiters_and_the_record_carries_them() {
        let (sps, pps, aud, idr) =
            (&[0x67, 0x64, 0x00, 0x1f, 0xac][..], &[0x68, 0xee][..], &[0x09, 0xf0][..], &[0x65, 9][..]);
        let mut sets = ParameterSets::default();
        assert!(sets.update(VideoCodec::H264, &[aud, sps, pps, idr]));
        assert!(!sets.update(VideoCodec::H264, &[sps, pps, idr]), "the same sets again change nothing");
        let record = sets.decoder_record(VideoCodec::H264).expect("avcC");
        assert_eq!(record, [1, 0x64, 0x00, 0x1f, 0xff, 0xe1, 0, 5, 0x67, 0x64, 0, 0x1f, 0xac, 1, 0, 2, 0x68, 0xee]);
        assert_eq!(ParameterSets::from_record(VideoCodec::H264, &record).expect("parse"), sets);
        let mut sample = Vec::new();
        assert!(write_sample(VideoCodec::H264, &[aud, sps, pps, idr], &mut sample).expect("sample"));
        assert_eq!(sample, [0, 0, 0, 2, 0x65, 9]);
        assert!(!write_sample(VideoCodec::H264, &[&[0x41, 1]], &mut Vec::new()).expect("sample"), "not a keyframe");
    }

    #[test]
    fn an_hevc_record_is_the_one_h265parse_makes() {
        let mut sets = ParameterSets::default();
        assert!(!sets.is_complete(VideoCodec::H265));
        sets.update(VideoCodec::H265, &[&HEVC_VPS, &HEVC_SPS, &HEVC_PPS]);
        let record = sets.decoder_record(VideoCodec::H265).expect("hvcC");
        assert_eq!(record[..23], HEVC_RECORD_HEAD);
        let mut arrays = Vec::new();
        for (header, unit) in [(0xa0, &HEVC_VPS[..]), (0xa1, &HEVC_SPS[..]), (0xa2, &HEVC_PPS[..])] {
            arrays.extend_from_slice(&[header, 0, 1, 0, unit.len() as u8]);
            arrays.extend_from_slice(unit);
        }
        assert_eq!(record[23..], arrays);
        assert_eq!(ParameterSets::from_record(VideoCodec::H265, &record).expect("parse"), sets);
    }

    #[test]
    fn malformed_parameter_sets_are_errors_never_panics() {
        let mut sets = ParameterSets::default();
        sets.update(VideoCodec::H265, &[&[0x40, 1], &HEVC_SPS[..12], &[0x44, 1]]);
        assert!(sets.decoder_record(VideoCodec::H265).is_err());
        let mut short = ParameterSets::default();
        short.update(VideoCodec::H264, &[&[0x67, 1], &[0x68]]);
        assert!(short.decoder_record(VideoCodec::H264).is_err());
        assert!(ParameterSets::from_record(VideoCodec::H264, &[1, 2, 3]).is_err());
        assert!(ParameterSets::from_record(VideoCodec::H265, &[1; 23]).is_err());
    }

    #[test]
    fn emulation_prevention_bytes_are_removed() {
        assert_eq!(unescape(&[0, 0, 3, 1, 0, 0, 3, 0, 3]), [0, 0, 1, 0, 0, 0, 3]);
    }
}
