//! What the GStreamer source reads of a buffer besides its pixels: the pixel formats the appsink
//! accepts, and when the buffer was captured, by the pipeline clock (the recorder's tap stamps
//! compressed access units the same way).
//!
//! Owns: [`ACCEPTED_FORMATS`], [`pixel_format`], [`buffer_age`] and [`age_at`]. Must not: copy
//! or lend frames (`super::appsink` does).

use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_video as gst_video;

use crate::frame::PixelFormat;

/// Formats the appsink is told to accept unless the pipeline sets its own `caps` on it.
pub const ACCEPTED_FORMATS: [&str; 4] = ["RGB", "BGR", "RGBA", "NV12"];

/// A buffer stamped longer ago than this is not believed (a source whose timestamps are not
/// capture times); the frame is stamped when the appsink hands it over instead.
const MAX_BUFFER_AGE: Duration = Duration::from_secs(10);

/// The frame format of a GStreamer video format the slots take; `None` for any other.
pub(super) fn pixel_format(format: gst_video::VideoFormat) -> Option<PixelFormat> {
    match format {
        gst_video::VideoFormat::Rgb => Some(PixelFormat::Rgb8),
        gst_video::VideoFormat::Bgr => Some(PixelFormat::Bgr8),
        gst_video::VideoFormat::Rgba => Some(PixelFormat::Rgba8),
        gst_video::VideoFormat::Nv12 => Some(PixelFormat::Nv12),
        gst_video::VideoFormat::Yuy2 => Some(PixelFormat::Yuyv),
        _ => None,
    }
}

/// How long ago the sample's buffer was captured, by the pipeline clock: the buffer's timestamp
/// as running time, plus the pipeline's base time, against the clock now. `None` for buffers
/// without a timestamp or a time segment, and for timestamps that are not plausible capture
/// times (in the future, or older than [`MAX_BUFFER_AGE`]).
pub(super) fn buffer_age(pipeline: &gst::Element, sample: &gst::Sample) -> Option<Duration> {
    let pts = sample.buffer()?.pts()?;
    let running_time = sample.segment()?.downcast_ref::<gst::ClockTime>()?.to_running_time(pts)?;
    let now = pipeline.clock()?.time();
    age_at(now, pipeline.base_time()?, running_time)
}

/// The age of a buffer whose running time is `running_time`, at clock time `now`, in a pipeline
/// that started at `base_time` (GStreamer's clock time = base time + running time).
pub(super) fn age_at(now: gst::ClockTime, base_time: gst::ClockTime, running_time: gst::ClockTime) -> Option<Duration> {
    let captured = base_time.checked_add(running_time)?;
    let age = Duration::from_nanos(now.checked_sub(captured)?.nseconds());
    (age <= MAX_BUFFER_AGE).then_some(age)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_as_old_as_the_clock_says_and_implausible_stamps_are_not_believed() {
        let ms = gst::ClockTime::from_mseconds;
        assert_eq!(age_at(ms(10_250), ms(10_000), ms(200)), Some(Duration::from_millis(50)));
        assert_eq!(age_at(ms(10_000), ms(10_000), ms(200)), None, "a buffer from the future");
        assert_eq!(age_at(ms(30_000), ms(10_000), ms(0)), None, "20 s old: not a capture time");
    }
}
