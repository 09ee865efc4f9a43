//! What a command shows of an engine build, the same in every build of the binary.
//!
//! Owns: [`BuildDisplay`], the one place that sets up the progress display the commands share (a
//! bar on a TTY, log lines otherwise: `trt::ProgressReporter`), so that no command needs a
//! `tensorrt` feature gate around it: without TensorRT there is never a build
//! ([`BuildProgress`] has no values) and it shows nothing. Must not: talk to systemd or MQTT (the
//! caller forwards [`BuildDisplay::line`] where it needs to).

use std::time::Duration;

use super::load::BuildProgress;

/// Shows an engine build's progress on stderr (see the module doc).
#[derive(Debug, Default)]
pub struct BuildDisplay {
    #[cfg(feature = "tensorrt")]
    reporter: super::trt::ProgressReporter,
}

impl BuildDisplay {
    /// Shows `event`.
    pub fn report(&mut self, event: &BuildProgress) {
        #[cfg(feature = "tensorrt")]
        self.reporter.report(event);
        #[cfg(not(feature = "tensorrt"))]
        match *event {}
    }

    /// The progress as one line (systemd's `STATUS=`, telemetry while building).
    pub fn line(&self) -> String {
        #[cfg(feature = "tensorrt")]
        return self.reporter.line();
        #[cfg(not(feature = "tensorrt"))]
        String::new()
    }

    /// Whether `event` shows the build moving, so that systemd's start timeout may be extended
    /// once more, with `limit` the longest build (`trt::progress::extends_start`).
    pub fn extends_start(&self, event: &BuildProgress, limit: Duration) -> bool {
        #[cfg(feature = "tensorrt")]
        {
            let phases_reported = super::trt::header_version().major >= 10;
            super::trt::progress::extends_start(event, phases_reported, limit)
        }
        #[cfg(not(feature = "tensorrt"))]
        {
            let _ = limit;
            match *event {}
        }
    }

    /// Ends the bar's line on a TTY.
    pub fn finish(&mut self) {
        #[cfg(feature = "tensorrt")]
        self.reporter.finish();
    }
}
