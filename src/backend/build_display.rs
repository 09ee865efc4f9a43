//! What a command shows of an engine build, the same in every build of the binary.
//!
//! Owns: [`BuildDisplay`], the one place that sets up the progress display the commands share (a
//! bar on a TTY, log lines otherwise: `engine::ProgressReporter`). Must not: talk to systemd or
//! MQTT (the caller forwards [`BuildDisplay::line`] where it needs to).

use std::time::Duration;

use super::engine::{Progress, ProgressReporter};

/// Shows an engine build's progress on stderr (see the module doc).
#[derive(Debug, Default)]
pub struct BuildDisplay {
    reporter: ProgressReporter,
}

impl BuildDisplay {
    /// Shows `event`.
    pub fn report(&mut self, event: &Progress) {
        self.reporter.report(event);
    }

    /// The progress as one line (systemd's `STATUS=`, telemetry while building).
    pub fn line(&self) -> String {
        self.reporter.line()
    }

    /// Whether `event` shows the build moving, so that systemd's start timeout may be extended
    /// once more, with `limit` the longest build (`engine::progress::extends_start`).
    pub fn extends_start(&self, event: &Progress, limit: Duration) -> bool {
        #[cfg(feature = "tensorrt")]
        let phases_reported = super::trt::header_version().major >= 10;
        #[cfg(not(feature = "tensorrt"))]
        let phases_reported = false;
        super::engine::progress::extends_start(event, phases_reported, limit)
    }

    /// Ends the bar's line on a TTY.
    pub fn finish(&mut self) {
        self.reporter.finish();
    }
}
