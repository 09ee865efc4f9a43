//! The recorder's figures as an outlet reports them: its report (telemetry's `outlets.record`,
//! `GET /api/status`) and its metrics (`jetson_detectd_record_…`, per camera where they are a
//! camera's).
//!
//! Owns: the recorder's metric names, help texts and units. Must not: read anything but the
//! report it is given (the recorder makes it, `super::recorder::Recorder::report`).

use crate::publish::figures::{Label, Metric, OutletFigures};

use super::report::{CameraRecordReport, RecordReport};

/// The recorder's figures from its `report`.
pub fn figures(report: &RecordReport) -> OutletFigures {
    OutletFigures { connected: None, report: OutletFigures::report_of(report), metrics: metrics(report) }
}

fn per_camera<T: Copy>(report: &RecordReport, value: impl Fn(&CameraRecordReport) -> T) -> Vec<(Vec<Label>, T)> {
    report.cameras.iter().map(|(name, camera)| (vec![("camera", name.clone())], value(camera))).collect()
}

fn metrics(report: &RecordReport) -> Vec<Metric> {
    let flag = |on: bool| f64::from(u8::from(on));
    vec![
        Metric::gauge(
            "record_paused",
            "1 while recording is paused because the disk of record.dir is too full (detection goes on), else 0.",
            None,
            flag(report.paused),
        ),
        Metric::gauge(
            "record_budget",
            "The byte budget of record.dir (record.max_gib).",
            Some("bytes"),
            report.max_bytes as f64,
        ),
        Metric::counter(
            "record_removed_clips",
            "Clips retention removed (record.max_gib, record.max_days).",
            None,
            report.removed,
        ),
        Metric::gauges(
            "record_clips",
            "Clips of the camera in record.dir.",
            None,
            per_camera(report, |c| c.clips as f64),
        ),
        Metric::gauges(
            "record_stored",
            "Bytes of the camera's clips in record.dir.",
            Some("bytes"),
            per_camera(report, |c| c.bytes as f64),
        ),
        Metric::gauges(
            "record_recording",
            "1 while a clip of the camera is being written, else 0.",
            None,
            per_camera(report, |c| flag(c.recording)),
        ),
        Metric::gauges(
            "record_preroll",
            "Memory the camera's encoded pre-roll holds.",
            Some("bytes"),
            per_camera(report, |c| c.preroll_bytes as f64),
        ),
        Metric::counters(
            "record_written_clips",
            "Clips of the camera finished since start.",
            None,
            per_camera(report, |c| c.written),
        ),
        Metric::counters(
            "record_written",
            "Bytes of the camera's clips finished since start.",
            Some("bytes"),
            per_camera(report, |c| c.written_bytes),
        ),
        Metric::counters(
            "record_dropped",
            "Video the recorder dropped (its queue full, the pre-roll over its byte bound, the encoder behind), \
             and processed frames whose boxes its queue had no room for.",
            None,
            per_camera(report, |c| c.dropped),
        ),
        Metric::counters(
            "record_preroll_cuts",
            "Times the camera's pre-roll was emptied because one keyframe interval alone was over \
             record.preroll_max_mib: a clip then starts at the next keyframe.",
            None,
            per_camera(report, |c| c.preroll_cut),
        ),
        Metric::counters(
            "record_failed",
            "Clips that could not be started or written, and units that could not be read (the log says why).",
            None,
            per_camera(report, |c| c.failed),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::publish::figures::Samples;
    use crate::record::camera::Feed;

    /// Issue 49: a pre-roll emptied because one keyframe interval alone was over
    /// `record.preroll_max_mib` is counted where the recorder's other figures are.
    #[test]
    fn the_preroll_cuts_are_in_the_report_and_a_counter_per_camera() {
        let camera = CameraRecordReport {
            feed: Feed::Passthrough,
            recording: false,
            clips: 0,
            bytes: 0,
            written: 0,
            written_bytes: 0,
            preroll_bytes: 0,
            preroll_cut: 2,
            dropped: 40,
            failed: 0,
        };
        let report = RecordReport {
            dir: "/var/lib/jetson-detectd/clips".into(),
            paused: false,
            paused_reason: None,
            clips: 0,
            bytes: 0,
            max_bytes: 1 << 30,
            removed: 0,
            cameras: BTreeMap::from([("gate".to_owned(), camera)]),
        };
        let figures = figures(&report);
        assert_eq!(figures.report["cameras"]["gate"]["preroll_cut"], 2, "{}", figures.report);
        let cuts = figures.metrics.iter().find(|metric| metric.name == "record_preroll_cuts").expect("the counter");
        assert_eq!(cuts.samples, Samples::Counter(vec![(vec![("camera", "gate".to_owned())], 2)]));
    }
}
