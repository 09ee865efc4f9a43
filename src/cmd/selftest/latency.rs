//! Latency percentiles of timed inferences, and the power-state verdict.
//!
//! Owns: p50/p99 of a run of samples and the sentence `selftest` prints when inferences that follow
//! a pause are much slower than back-to-back ones (the GPU clocks down while idle and takes time to
//! come back). Must not: time anything itself, or assert on speed.

use std::time::Duration;

use serde::Serialize;

/// How much slower (p99) paused inferences may be before the verdict speaks up.
pub const JITTER_FACTOR: f64 = 2.0;

/// Percentiles of one run, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub runs: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Nearest-rank percentiles (`p99` of fewer than 100 samples is the maximum); `None` without samples.
pub fn summarise(samples: &[Duration]) -> Option<LatencySummary> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    sorted.sort_by(f64::total_cmp);
    let rank = |fraction: f64| sorted[((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    Some(LatencySummary {
        runs: sorted.len(),
        p50_ms: round(rank(0.5)),
        p99_ms: round(rank(0.99)),
        max_ms: round(sorted[sorted.len() - 1]),
    })
}

/// A plain sentence when inferences after a pause have a p99 more than [`JITTER_FACTOR`] times the
/// back-to-back p99.
pub fn jitter_verdict(back_to_back: &LatencySummary, paused: &LatencySummary, pause: Duration) -> Option<String> {
    (paused.p99_ms > JITTER_FACTOR * back_to_back.p99_ms).then(|| {
        format!(
            "inferences that follow a {} ms pause are much slower (p99 {:.1} ms) than back-to-back ones (p99 {:.1} \
             ms): the GPU clocks down between frames and takes time to come back. Pin the clocks for steady \
             latency: choose the power mode with `sudo nvpmodel -m <mode>`, then run `sudo jetson_clocks`",
            pause.as_millis(),
            paused.p99_ms,
            back_to_back.p99_ms
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|v| Duration::from_millis(*v)).collect()
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let samples: Vec<u64> = (1..=200).collect();
        let summary = summarise(&ms(&samples)).expect("samples");
        assert_eq!((summary.runs, summary.p50_ms, summary.p99_ms, summary.max_ms), (200, 100.0, 198.0, 200.0));
        let few = summarise(&ms(&[9, 3, 5])).expect("samples");
        assert_eq!((few.p50_ms, few.p99_ms), (5.0, 9.0));
        assert_eq!(summarise(&[]), None);
    }

    #[test]
    fn a_slow_wake_up_is_explained_and_steady_clocks_are_not() {
        let steady = summarise(&ms(&[8, 8, 9, 9, 10])).expect("samples");
        let woken = summarise(&ms(&[9, 12, 25, 31])).expect("samples");
        let verdict = jitter_verdict(&steady, &woken, Duration::from_millis(200)).expect("31 > 2 x 10");
        assert!(verdict.contains("200 ms pause") && verdict.contains("jetson_clocks"), "{verdict}");
        let similar = summarise(&ms(&[9, 11, 14, 19])).expect("samples");
        assert_eq!(jitter_verdict(&steady, &similar, Duration::from_millis(200)), None);
    }
}
