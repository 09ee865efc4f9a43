//! A clip's timed metadata track: each processed frame's boxes placed on the clip's timeline at
//! the picture they were found on.
//!
//! A frame's boxes arrive after its picture was written (detection runs on the decoded frame, the
//! clip stores the access unit from before the decoder), stamped with the frame's capture time,
//! which the access unit carries too. The track keeps the capture and presentation times of the
//! clip's recent units, places each box frame at the unit captured at the same moment (within half
//! a frame), and holds the last sample back until the next one says how long it lasts. A frame
//! whose boxes are those of the sample before it extends that sample instead of adding one, so a
//! still scene costs one sample. The track spans the video's whole timeline, from 0 to the clip's
//! end: the time before the clip's first processed frame is a sample without boxes. (A track
//! starting later would end later too for ffmpeg — it takes a fragmented track's duration from 0
//! and adds the track's start — and a clip would probe longer than its video.)
//!
//! Owns: that mapping ([`BoxTrack`], with the units' times of [`super::timeline::UnitTimes`]) and
//! its bounds ([`MAX_UNITS`], [`MAX_WAITING`]). Must not: write files or build boxes (the clip
//! writer puts the samples in its fragments).

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use super::boxes::BoxFrame;
use super::timeline::UnitTimes;

/// Recent units whose capture times are kept: 20 s of 30 fps video, more than detection lags.
pub const MAX_UNITS: usize = 600;
/// Box frames waiting for their unit at most; the oldest goes first.
pub const MAX_WAITING: usize = 256;

/// One sample ready for a fragment: its decode time and duration in ticks, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataSample {
    pub ticks: u64,
    pub duration: u32,
    pub data: Vec<u8>,
}

/// The metadata track of one clip being written.
#[derive(Debug)]
pub struct BoxTrack {
    /// The capture and presentation times of the clip's recent units.
    units: UnitTimes,
    /// Box frames waiting for their unit, in capture order.
    waiting: VecDeque<BoxFrame>,
    /// Placed samples not written yet, in time order: (ticks, bytes).
    placed: Vec<(u64, Vec<u8>)>,
    /// The newest sample placed (written or not): its ticks and bytes.
    last: Option<(u64, Vec<u8>)>,
    /// Box frames left out: no unit of the clip was captured at their time.
    pub unplaced: u64,
}

impl Default for BoxTrack {
    fn default() -> BoxTrack {
        BoxTrack {
            units: UnitTimes::new(MAX_UNITS),
            waiting: VecDeque::new(),
            placed: Vec::new(),
            last: None,
            unplaced: 0,
        }
    }
}

impl BoxTrack {
    /// A unit of the clip, captured at `captured_at`, presented at `ticks`; `step` is the time to
    /// the unit before it.
    pub fn unit(&mut self, captured_at: SystemTime, ticks: u64, step: Duration) {
        self.units.push(captured_at, ticks, step);
        self.place();
    }

    /// A processed frame's boxes.
    pub fn frame(&mut self, frame: BoxFrame) {
        if self.waiting.len() == MAX_WAITING {
            self.waiting.pop_front();
            self.unplaced += 1;
        }
        self.waiting.push_back(frame);
        self.place();
    }

    /// Places the waiting frames whose unit is known.
    fn place(&mut self) {
        while let Some(frame) = self.waiting.front() {
            if self.units.is_ahead(frame.captured_at) {
                return;
            }
            let ticks = self.units.find(frame.captured_at);
            let Some(frame) = self.waiting.pop_front() else { return };
            let Some(ticks) = ticks.filter(|ticks| self.last.as_ref().is_none_or(|(last, _)| ticks > last)) else {
                self.unplaced += 1;
                continue;
            };
            if self.last.is_none() && ticks > 0 {
                self.lead();
            }
            let data = frame.sample();
            if self.last.as_ref().is_some_and(|(_, last)| *last == data) {
                continue;
            }
            self.placed.push((ticks, data.clone()));
            self.last = Some((ticks, data));
        }
    }

    /// The track's first sample, from 0: no boxes (nothing processed yet).
    fn lead(&mut self) {
        let empty = BoxFrame { captured_at: SystemTime::UNIX_EPOCH, boxes: Vec::new() }.sample();
        self.placed.push((0, empty.clone()));
        self.last = Some((0, empty));
    }

    /// The samples whose duration is known, to be written now: every placed one but the newest,
    /// which lasts until the next. With `end` (the clip ends at these ticks), all of them: a clip
    /// with video but without a processed frame gets one sample without boxes, from 0 to its end.
    pub fn take(&mut self, end: Option<u64>) -> Vec<MetadataSample> {
        if end.is_some_and(|end| end > 0) && self.last.is_none() {
            self.lead();
        }
        let keep = match end {
            Some(_) => 0,
            None => usize::from(!self.placed.is_empty()),
        };
        let ready = self.placed.len() - keep;
        let mut samples: Vec<MetadataSample> = Vec::with_capacity(ready);
        let following: Vec<u64> = self.placed.iter().skip(1).map(|(ticks, _)| *ticks).chain(end).collect();
        for ((ticks, data), next) in self.placed.drain(..ready).zip(following) {
            let duration = next.saturating_sub(ticks).clamp(1, u64::from(u32::MAX)) as u32;
            samples.push(MetadataSample { ticks, duration, data });
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::record::boxes::FrameBox;

    const FRAME: Duration = Duration::from_millis(100);

    fn at(n: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000) + FRAME * n as u32
    }

    fn boxes(n: u64, x: f32) -> BoxFrame {
        let bbox = FrameBox {
            label: "person".into(),
            score: 0.9,
            track: Some(1),
            zones: vec![],
            bbox: [x, 0.1, x + 0.1, 0.5],
        };
        BoxFrame { captured_at: at(n) + Duration::from_micros(30), boxes: vec![bbox] }
    }

    #[test]
    fn the_track_starts_at_0_and_boxes_land_on_the_unit_captured_with_them_lasting_until_the_next() {
        let mut track = BoxTrack::default();
        for n in 0..5 {
            track.unit(at(n), 1000 + n * 9000, FRAME);
        }
        track.frame(boxes(1, 0.1));
        track.frame(boxes(3, 0.3));
        track.frame(boxes(7, 0.7));
        let written = track.take(None);
        let times: Vec<(u64, u32)> = written.iter().map(|s| (s.ticks, s.duration)).collect();
        assert_eq!(times, [(0, 10_000), (10_000, 18_000)], "from 0, the newest waiting for its successor");
        assert_eq!(BoxFrame::parse_sample(&written[0].data), Some(Vec::new()), "no boxes before the first frame");
        for n in 5..8 {
            track.unit(at(n), 1000 + n * 9000, FRAME);
        }
        let rest = track.take(Some(1000 + 8 * 9000));
        assert_eq!(rest.iter().map(|s| (s.ticks, s.duration)).collect::<Vec<_>>(), [(28_000, 36_000), (64_000, 9000)]);
        assert_eq!(BoxFrame::parse_sample(&rest[1].data).expect("boxes")[0].bbox[0], 0.7);
    }

    #[test]
    fn an_unchanged_frame_extends_its_sample_and_a_frame_without_its_unit_is_left_out() {
        let mut track = BoxTrack::default();
        for n in [0, 1, 2, 4] {
            track.unit(at(n), n * 9000, FRAME);
        }
        track.frame(boxes(0, 0.2));
        track.frame(boxes(1, 0.2));
        track.frame(boxes(3, 0.5));
        track.frame(boxes(4, 0.5));
        let samples = track.take(Some(5 * 9000));
        assert_eq!(samples.iter().map(|s| (s.ticks, s.duration)).collect::<Vec<_>>(), [(0, 36_000), (36_000, 9000)]);
        assert_eq!(track.unplaced, 1, "unit 3 never came");
        let mut early = BoxTrack::default();
        early.unit(at(10), 0, FRAME);
        early.frame(boxes(2, 0.1));
        let samples = early.take(Some(9000));
        assert_eq!(samples.len(), 1, "captured before the clip's first unit: {samples:?}");
        assert_eq!((samples[0].ticks, samples[0].duration), (0, 9000), "the whole clip without boxes");
        assert_eq!(BoxFrame::parse_sample(&samples[0].data), Some(Vec::new()));
    }
}
