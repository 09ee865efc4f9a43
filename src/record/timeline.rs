//! A stream's timeline in an MP4 track: the camera's timestamps as 90 kHz ticks from 0, and the
//! capture time of each picture found again on it.
//!
//! Owns: [`Timeline`] (a unit's decode time in ticks from the first one; a stream restart or a
//! jump of more than [`MAX_STEP`] bridged by one frame), [`raw_times`] (a unit's decode time on
//! the stream's own clock and its composition offset) and [`UnitTimes`] (the capture and
//! presentation times of the recent units, so that a processed frame, stamped with its capture
//! time, is placed at its picture: the clips' metadata track and the live view's boxes). Must not:
//! hold units' bytes.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::mp4::TIMESCALE;
use crate::source::tap::AccessUnit;

/// A stream timestamp that jumps further than this (or back) is a restart of the stream: the
/// timeline goes on by one frame instead.
pub const MAX_STEP: Duration = Duration::from_secs(10);
/// The frame duration assumed when nothing better is known (30 fps).
pub const DEFAULT_TICKS: u32 = TIMESCALE / 30;

/// Stream timestamps to a track's ticks, from 0.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Raw ticks of the previous unit, and the track ticks they became.
    previous: Option<(u64, u64)>,
    last_step: u32,
}

impl Default for Timeline {
    fn default() -> Timeline {
        Timeline { previous: None, last_step: DEFAULT_TICKS }
    }
}

impl Timeline {
    /// The track ticks of a unit whose decode time is `raw` ticks on the stream's clock.
    pub fn ticks(&mut self, raw: u64) -> u64 {
        let ticks = match self.previous {
            None => 0,
            Some((previous_raw, previous)) => {
                let step = raw.checked_sub(previous_raw).filter(|step| *step > 0 && *step <= to_ticks(MAX_STEP));
                match step {
                    Some(step) => {
                        self.last_step = step.min(u64::from(u32::MAX)) as u32;
                        previous + step
                    }
                    None => previous + u64::from(self.last_step),
                }
            }
        };
        self.previous = Some((raw, ticks));
        ticks
    }

    /// The step between the last two units, ticks: the duration a last sample is given.
    pub fn last_step(&self) -> u32 {
        self.last_step
    }
}

/// A unit's decode time on its stream's clock, in ticks (its presentation time when it has no
/// decode time, its capture time when it has neither), and its composition offset (presentation
/// minus decode time, ticks; 0 when either is unknown).
pub fn raw_times(unit: &AccessUnit) -> (u64, i32) {
    let raw = unit
        .dts
        .or(unit.pts)
        .map_or_else(|| to_ticks(unit.captured_at.duration_since(UNIX_EPOCH).unwrap_or_default()), to_ticks);
    let composition_offset = match (unit.pts, unit.dts) {
        (Some(pts), Some(dts)) if pts >= dts => to_ticks(pts - dts).min(i32::MAX as u64) as i32,
        _ => 0,
    };
    (raw, composition_offset)
}

pub fn to_ticks(time: Duration) -> u64 {
    (time.as_nanos() * u128::from(TIMESCALE) / 1_000_000_000) as u64
}

pub fn ticks_duration(ticks: u64) -> Duration {
    Duration::from_nanos(ticks * 1_000_000_000 / u64::from(TIMESCALE))
}

/// The capture and presentation times of a track's recent units.
#[derive(Debug)]
pub struct UnitTimes {
    /// Capture time and presentation ticks, in decode order.
    units: VecDeque<(SystemTime, u64)>,
    capacity: usize,
    /// Half the last frame interval: how far a capture time may be from its unit's.
    tolerance: Duration,
}

impl UnitTimes {
    /// Keeps the times of the last `capacity` units.
    pub fn new(capacity: usize) -> UnitTimes {
        UnitTimes { units: VecDeque::with_capacity(capacity), capacity: capacity.max(1), tolerance: Duration::ZERO }
    }

    /// A unit captured at `captured_at`, presented at `ticks`; `step` is the time to the unit
    /// before it.
    pub fn push(&mut self, captured_at: SystemTime, ticks: u64, step: Duration) {
        if self.units.len() == self.capacity {
            self.units.pop_front();
        }
        self.units.push_back((captured_at, ticks));
        self.tolerance = (step / 2).max(Duration::from_millis(1));
    }

    /// The latest capture time of the units kept.
    pub fn newest(&self) -> Option<SystemTime> {
        self.units.iter().map(|(at, _)| *at).max()
    }

    /// Whether a picture captured at `at` is too new for the units kept (its unit may come yet).
    pub fn is_ahead(&self, at: SystemTime) -> bool {
        self.newest().is_none_or(|newest| at > newest + self.tolerance)
    }

    /// The presentation ticks of the unit captured at `at` (within half a frame), if it is kept.
    pub fn find(&self, at: SystemTime) -> Option<u64> {
        let distance = |unit: SystemTime| match unit.duration_since(at) {
            Ok(after) => after,
            Err(before) => before.duration(),
        };
        let (captured, ticks) = self.units.iter().min_by_key(|(captured, _)| distance(*captured))?;
        (distance(*captured) <= self.tolerance).then_some(*ticks)
    }

    pub fn clear(&mut self) {
        self.units.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_restart_is_bridged_by_one_frame_on_the_timeline() {
        let mut timeline = Timeline::default();
        let step = to_ticks(Duration::from_millis(100));
        assert_eq!(timeline.ticks(1_000_000), 0);
        assert_eq!(timeline.ticks(1_000_000 + step), step);
        assert_eq!(timeline.ticks(500), 2 * step, "back to 0: a restart");
        assert_eq!(timeline.ticks(500 + step), 3 * step);
        assert_eq!(timeline.ticks(500 + step + to_ticks(Duration::from_secs(60))), 4 * step, "a jump of a minute");
    }

    #[test]
    fn a_capture_time_finds_its_unit_within_half_a_frame_only() {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let frame = Duration::from_millis(100);
        let mut times = UnitTimes::new(3);
        for n in 0..4u32 {
            times.push(start + frame * n, u64::from(n) * 9000, frame);
        }
        assert_eq!(times.find(start + frame * 2 + Duration::from_micros(40)), Some(18_000));
        assert_eq!(times.find(start + frame * 3 - Duration::from_millis(49)), Some(27_000));
        assert_eq!(times.find(start + frame * 2 + Duration::from_millis(51)), Some(27_000));
        assert_eq!(times.find(start), None, "older than the three kept");
        assert!(times.is_ahead(start + frame * 4) && !times.is_ahead(start + frame * 3));
    }
}
