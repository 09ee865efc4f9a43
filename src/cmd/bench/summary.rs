//! Timings summarised: the median, the 90th percentile and the least of a stage's durations.
//!
//! Owns: [`StageSummary`] and [`summarise`]. Must not: time anything (the benchmarks do).

use std::time::Duration;

use serde::Serialize;

/// Milliseconds of one stage over the measured iterations, to the microsecond: preprocessing on
/// many threads takes about 0.1 ms, where hundredths of a millisecond would move a ratio to its
/// uncontended time by up to 10 %.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct StageSummary {
    pub median_ms: f64,
    pub p90_ms: f64,
    pub min_ms: f64,
}

pub(super) fn summarise(mut durations: Vec<Duration>) -> StageSummary {
    if durations.is_empty() {
        return StageSummary { median_ms: 0.0, p90_ms: 0.0, min_ms: 0.0 };
    }
    durations.sort();
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1000.0;
    let at = |fraction: f64| durations[((durations.len() - 1) as f64 * fraction).round() as usize];
    StageSummary { median_ms: ms(at(0.5)), p90_ms: ms(at(0.9)), min_ms: ms(durations[0]) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_picks_median_p90_and_min() {
        let durations = (1..=10).map(Duration::from_millis).collect();
        let summary = summarise(durations);
        assert_eq!(summary, StageSummary { median_ms: 6.0, p90_ms: 9.0, min_ms: 1.0 });
        assert_eq!(summarise(Vec::new()).median_ms, 0.0);
    }

    #[test]
    fn a_summary_keeps_microseconds() {
        let summary = summarise(vec![Duration::from_nanos(123_456)]);
        assert_eq!(summary, StageSummary { median_ms: 0.123, p90_ms: 0.123, min_ms: 0.123 });
    }
}
