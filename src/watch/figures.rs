//! The live video's figures as the hub reports them, an outlet named `watch`: its report
//! (telemetry's `outlets.watch`, `GET /api/status`) and its metrics (`jetson_detectd_watch_…`, per
//! camera where they are a camera's).
//!
//! Owns: [`WatchReport`] and [`FeedReport`] (the report's layout, documented in
//! docs/src/reference/telemetry.md), the metric names, help texts and units (documented in
//! docs/src/reference/http.md). Must not: read anything but the report it is given (the hub
//! makes it from its feeds' counters, `super::hub::WatchHub`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::publish::figures::{Label, Metric, OutletFigures};

/// The hub's figures (telemetry's `outlets.watch`).
#[derive(Debug, Serialize)]
pub struct WatchReport {
    /// Live streams playing now.
    pub viewers: usize,
    /// Per camera whose source sends a compressed stream.
    pub cameras: BTreeMap<String, FeedReport>,
}

/// One camera's feed since start.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FeedReport {
    /// Access units the feed got, and units it could not read.
    pub units: u64,
    pub malformed: u64,
    /// Times a viewer fell too far behind and skipped to the next keyframe, and the fragments
    /// viewers skipped.
    pub lagged: u64,
    pub skipped: u64,
}

/// The hub's figures from its `report`.
pub fn figures(report: &WatchReport) -> OutletFigures {
    OutletFigures { connected: None, report: OutletFigures::report_of(report), metrics: metrics(report) }
}

fn metrics(report: &WatchReport) -> Vec<Metric> {
    let per_camera = |value: fn(&FeedReport) -> u64| -> Vec<(Vec<Label>, u64)> {
        report.cameras.iter().map(|(name, feed)| (vec![("camera", name.clone())], value(feed))).collect()
    };
    vec![
        Metric::gauge(
            "watch_viewers",
            "Live streams playing now (live.mp4, live.boxes; a page's camera counts two: its video and its boxes).",
            None,
            report.viewers as f64,
        ),
        Metric::counters(
            "watch_units",
            "Access units of the camera's own stream its live feed got.",
            None,
            per_camera(|feed| feed.units),
        ),
        Metric::counters(
            "watch_malformed_units",
            "Access units the camera's live feed could not read.",
            None,
            per_camera(|feed| feed.malformed),
        ),
        Metric::counters(
            "watch_lagged",
            "Times a live viewer of the camera fell too far behind and skipped to the next keyframe.",
            None,
            per_camera(|feed| feed.lagged),
        ),
        Metric::counters(
            "watch_skipped_fragments",
            "Fragments live viewers of the camera skipped so.",
            None,
            per_camera(|feed| feed.skipped),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::figures::Samples;

    #[test]
    fn the_report_and_the_metrics_carry_the_same_figures_per_camera() {
        let feed = FeedReport { units: 300, malformed: 1, lagged: 2, skipped: 130 };
        let report = WatchReport { viewers: 3, cameras: BTreeMap::from([("gate".to_owned(), feed)]) };
        let figures = figures(&report);
        assert_eq!(figures.report["viewers"], 3);
        assert_eq!(figures.report["cameras"]["gate"]["skipped"], 130, "{}", figures.report);
        let metric =
            |name: &str| figures.metrics.iter().find(|metric| metric.name == name).expect(name).samples.clone();
        assert_eq!(metric("watch_viewers"), Samples::Gauge(vec![(Vec::new(), 3.0)]));
        let gate = |value| Samples::Counter(vec![(vec![("camera", "gate".to_owned())], value)]);
        assert_eq!(metric("watch_units"), gate(300));
        assert_eq!(metric("watch_malformed_units"), gate(1));
        assert_eq!(metric("watch_lagged"), gate(2));
        assert_eq!(metric("watch_skipped_fragments"), gate(130));
    }
}
