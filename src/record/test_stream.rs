//! A small H.264 stream for the tests of the recorder and the live feed: its parameter sets and
//! the access units of a 10 fps Annex B stream with a keyframe every 10th. Compiled for tests only.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::nal::ParameterSets;
use crate::source::tap::{AccessUnit, StreamFormat, VideoCodec};

pub const SPS: [u8; 11] = [0x67, 0x42, 0xc0, 0x1e, 0xd9, 0x00, 0xa0, 0x47, 0xfe, 0xc8, 0x04];
pub const PPS: [u8; 4] = [0x68, 0xce, 0x3c, 0x80];

/// The stream's format: 160 × 120 H.264, Annex B.
pub fn format() -> Arc<StreamFormat> {
    Arc::new(StreamFormat { codec: VideoCodec::H264, width: 160, height: 120, nal_length_size: None, codec_data: None })
}

/// Unit `n`, captured `n` × 100 ms after `start`; a keyframe (with SPS and PPS) every 10th.
pub fn unit(format: &Arc<StreamFormat>, start: SystemTime, n: u64) -> AccessUnit {
    let mut data = Vec::new();
    if n.is_multiple_of(10) {
        for set in [&SPS[..], &PPS[..]] {
            data.extend_from_slice(&[0, 0, 0, 1]);
            data.extend_from_slice(set);
        }
        data.extend_from_slice(&[0, 0, 0, 1, 0x65, 0x88, n as u8]);
    } else {
        data.extend_from_slice(&[0, 0, 0, 1, 0x41, 0x9a, n as u8]);
    }
    AccessUnit {
        data: Arc::from(data),
        format: format.clone(),
        keyframe: n.is_multiple_of(10),
        dts: None,
        pts: Some(Duration::from_millis(5000 + n * 100)),
        captured_at: start + Duration::from_millis(n * 100),
    }
}

/// The stream's parameter sets.
pub fn sets() -> ParameterSets {
    let mut sets = ParameterSets::default();
    sets.update(VideoCodec::H264, &[&SPS, &PPS]);
    sets
}
