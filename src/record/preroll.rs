//! One camera's pre-roll: the newest seconds of its compressed stream, kept in memory so that a
//! clip can start before the event that triggers it.
//!
//! Owns: the ring of access units, bounded by a span of capture time and by bytes, trimmed only at
//! keyframes so that it always starts with one (a decoder can start there), and the choice of
//! where a clip that should start at a given time begins. Must not: copy the units' bytes (they
//! are shared with the writer), or grow past its byte bound: past it whole keyframe intervals are
//! dropped from the front and counted, and a keyframe interval that alone is over the bound (a
//! camera with a keyframe a minute) empties the ring, which then waits for the next keyframe: the
//! pre-roll is cut, and counted as such ([`Preroll::cuts`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::source::tap::{AccessUnit, StreamFormat};

/// The ring of one camera.
#[derive(Debug)]
pub struct Preroll {
    units: VecDeque<AccessUnit>,
    bytes: usize,
    /// Capture time kept behind the newest unit (pre-roll plus the shortest event), not counting
    /// the keyframe interval needed to reach back that far.
    span: Duration,
    max_bytes: usize,
    /// Units dropped because the byte bound was reached before the span was.
    dropped: u64,
    /// Times the newest keyframe interval alone went over the byte bound and the ring was emptied.
    cuts: u64,
    /// Emptied by a cut: the units until the next keyframe are dropped (and counted).
    cut_open: bool,
}

impl Preroll {
    pub fn new(span: Duration, max_bytes: usize) -> Preroll {
        Preroll { units: VecDeque::new(), bytes: 0, span, max_bytes, dropped: 0, cuts: 0, cut_open: false }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Units dropped to the byte bound so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Times the ring was emptied because one keyframe interval alone was over the byte bound.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// How far back the ring reaches: from its first unit to its newest.
    pub fn reach(&self) -> Duration {
        match (self.units.front(), self.units.back()) {
            (Some(first), Some(last)) => last.captured_at.duration_since(first.captured_at).unwrap_or_default(),
            _ => Duration::ZERO,
        }
    }

    /// Adds the newest unit. A unit of another stream format (a reconnect with new caps) empties
    /// the ring first; a ring that is empty takes only a keyframe.
    pub fn push(&mut self, unit: AccessUnit) {
        if self.units.front().is_some_and(|first| !same_format(&first.format, &unit.format)) {
            self.clear();
        }
        if self.units.is_empty() && !unit.keyframe {
            self.dropped += u64::from(self.cut_open);
            return;
        }
        self.cut_open = false;
        self.bytes += unit.data.len();
        self.units.push_back(unit);
        self.trim();
    }

    pub fn clear(&mut self) {
        self.units.clear();
        self.bytes = 0;
    }

    /// Drops the front while a later keyframe alone still reaches back `span`, then whole keyframe
    /// intervals while over the byte bound; when the newest interval alone is over it, everything
    /// (the ring then takes nothing before the next keyframe).
    fn trim(&mut self) {
        let Some(newest) = self.units.back().map(|unit| unit.captured_at) else { return };
        let horizon = newest.checked_sub(self.span).unwrap_or(SystemTime::UNIX_EPOCH);
        let keep_from = self.units.iter().rposition(|unit| unit.keyframe && unit.captured_at <= horizon).unwrap_or(0);
        self.drop_front(keep_from);
        while self.bytes > self.max_bytes {
            match self.units.iter().skip(1).position(|unit| unit.keyframe) {
                Some(next_key) => {
                    self.drop_front(next_key + 1);
                    self.dropped += next_key as u64 + 1;
                }
                None => {
                    self.dropped += self.units.len() as u64;
                    self.cuts += 1;
                    self.clear();
                    self.cut_open = true;
                }
            }
        }
    }

    fn drop_front(&mut self, count: usize) {
        for unit in self.units.drain(..count) {
            self.bytes -= unit.data.len();
        }
    }

    /// The units a clip that should show everything from `from` on starts with: from the last
    /// keyframe at or before `from` (the first keyframe held when the ring does not reach back
    /// that far) to the newest unit.
    pub fn since(&self, from: SystemTime) -> Vec<AccessUnit> {
        let start = self.units.iter().rposition(|unit| unit.keyframe && unit.captured_at <= from).unwrap_or(0);
        self.units.iter().skip(start).cloned().collect()
    }
}

fn same_format(a: &Arc<StreamFormat>, b: &Arc<StreamFormat>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::tap::VideoCodec;

    fn format(width: u32) -> Arc<StreamFormat> {
        Arc::new(StreamFormat { codec: VideoCodec::H264, width, height: 48, nal_length_size: None, codec_data: None })
    }

    /// Unit `n` of a 10 fps stream with a keyframe every 10 units, `bytes` long.
    fn unit(start: SystemTime, n: u64, bytes: usize, format: &Arc<StreamFormat>) -> AccessUnit {
        AccessUnit {
            data: Arc::from(vec![0u8; bytes]),
            format: format.clone(),
            keyframe: n.is_multiple_of(10),
            dts: None,
            pts: Some(Duration::from_millis(n * 100)),
            captured_at: start + Duration::from_millis(n * 100),
        }
    }

    fn times(units: &[AccessUnit], start: SystemTime) -> Vec<u64> {
        units.iter().map(|u| u.captured_at.duration_since(start).unwrap_or_default().as_millis() as u64 / 100).collect()
    }

    #[test]
    fn the_ring_keeps_the_span_back_to_a_keyframe_and_starts_with_one() {
        let (start, f) = (SystemTime::now(), format(64));
        let mut ring = Preroll::new(Duration::from_secs(3), 1 << 20);
        for n in 0..=57 {
            ring.push(unit(start, n, 100, &f));
        }
        // 3 s back from unit 57 is unit 27; the last keyframe at or before it is unit 20.
        let held = ring.since(SystemTime::UNIX_EPOCH);
        assert_eq!(times(&held, start).first(), Some(&20));
        assert_eq!(held.len(), 38);
        assert!(held[0].keyframe);
        assert_eq!(ring.bytes(), 3800);
        assert_eq!(ring.reach(), Duration::from_millis(3700));
    }

    #[test]
    fn a_clip_starts_at_the_keyframe_at_or_before_its_start() {
        let (start, f) = (SystemTime::now(), format(64));
        let mut ring = Preroll::new(Duration::from_secs(10), 1 << 20);
        for n in 0..40 {
            ring.push(unit(start, n, 10, &f));
        }
        assert_eq!(times(&ring.since(start + Duration::from_millis(2500)), start)[0], 20);
        assert_eq!(times(&ring.since(start + Duration::from_millis(3000)), start)[0], 30);
        assert_eq!(times(&ring.since(start), start)[0], 0, "the ring does not reach back further");
    }

    #[test]
    fn over_the_byte_bound_whole_keyframe_intervals_go_and_are_counted() {
        let (start, f) = (SystemTime::now(), format(64));
        let mut ring = Preroll::new(Duration::from_secs(60), 2500);
        for n in 0..36 {
            ring.push(unit(start, n, 100, &f));
        }
        assert!(ring.bytes() <= 2500, "{}", ring.bytes());
        let held = ring.since(SystemTime::UNIX_EPOCH);
        assert_eq!(times(&held, start)[0], 20, "starts at a keyframe");
        assert_eq!(ring.dropped(), 20);
    }

    /// Issue 49: with a keyframe a minute the pre-roll held 24 MB under a 1 MiB bound and dropped
    /// nothing (the newest interval was kept whatever its size).
    #[test]
    fn a_keyframe_interval_alone_over_the_bound_empties_the_ring_until_the_next_keyframe() {
        let (start, f) = (SystemTime::now(), format(64));
        let mut ring = Preroll::new(Duration::from_secs(60), 2500);
        let mut held_most = 0;
        for n in 0..45 {
            let mut unit = unit(start, n, 300, &f);
            // One keyframe in all: at unit 0, then at 40.
            unit.keyframe = n == 0 || n == 40;
            ring.push(unit);
            held_most = held_most.max(ring.bytes());
        }
        assert!(held_most <= 2500, "{held_most} bytes held under a 2500-byte bound");
        assert_eq!(ring.cuts(), 1);
        assert_eq!(
            times(&ring.since(SystemTime::UNIX_EPOCH), start),
            [40, 41, 42, 43, 44],
            "from the next keyframe on"
        );
        assert_eq!(ring.dropped(), 40, "units 0..=8 (the ninth went over the bound), then 9..40");
    }

    #[test]
    fn a_ring_starts_only_at_a_keyframe_and_a_new_format_empties_it() {
        let start = SystemTime::now();
        let mut ring = Preroll::new(Duration::from_secs(60), 1 << 20);
        for n in 5..12 {
            ring.push(unit(start, n, 10, &format(64)));
        }
        assert_eq!(times(&ring.since(SystemTime::UNIX_EPOCH), start), [10, 11]);
        ring.push(unit(start, 20, 10, &format(128)));
        assert_eq!(times(&ring.since(SystemTime::UNIX_EPOCH), start), [20]);
        assert_eq!(ring.bytes(), 10);
    }
}
