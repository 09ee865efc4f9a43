//! The GStreamer source itself: a pipeline ending in an appsink (RTSP, CSI or the user's own).
//!
//! Owns: starting the pipeline a [`PipelineSpec`] describes, configuring its appsink (caps limited
//! to formats the slot and the preprocessing kernel take, a two-buffer drop-oldest queue, no clock
//! sync, slot memory offered upstream through [`super::slot_pool`]), lending each sample that upstream
//! wrote into slot memory to the frame slot, copying every other sample once into the slot
//! honouring the plane strides (said once in the log), stamping the
//! frame with the time its buffer was captured, and restarting the pipeline with backoff after an
//! error or end of stream, and the pipeline's warnings in the log (rate-limited, naming the
//! camera). Must not: wait on the appsink longer than [`GstreamerOptions::poll_interval`] without
//! checking the stop flag, or let bus messages pile up.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use super::buffer::{buffer_age, pixel_format, ACCEPTED_FORMATS};
use super::rtsp::NOT_AUTHORIZED;
use super::slot_pool::{self, PoolOffer, TightLayout};
use super::{csi, decoder, record_tap, rtsp};
use crate::frame::{CaptureMode, FrameSlot, PixelFormat, SlotAllocator};
use crate::source::error::SourceError;
use crate::source::frame_source::{Capture, FrameSource};
use crate::source::image_decode::{self, ImageDecodeError};
use crate::source::limits::LimitsConfig;
use crate::source::reconnect::{self, Backoff, Connection, DeviceError};
use crate::source::status::{SourceState, SourceStatus};
use crate::source::tap::StreamTap;
use crate::sys::log_limit::{excerpt, RateLimitedLog};

/// What to run: a pipeline built in code for an RTSP or CSI camera, or the user's own.
#[derive(Debug, Clone)]
pub enum PipelineSpec {
    Rtsp(rtsp::RtspSpec),
    Csi(csi::CsiSpec),
    /// A `gst-launch-1.0` description ending in an appsink.
    Launch(String),
}

impl PipelineSpec {
    pub fn describe(&self) -> String {
        match self {
            PipelineSpec::Rtsp(spec) => spec.describe(),
            PipelineSpec::Csi(spec) => spec.describe(),
            PipelineSpec::Launch(pipeline) => format!("gstreamer:{pipeline}"),
        }
    }
}

/// Timing knobs and slot memory of the source; the defaults are what the daemon uses with a CPU
/// backend.
#[derive(Debug, Clone)]
pub struct GstreamerOptions {
    /// Memory of the buffer pool offered upstream: the inference backend's slot memory.
    pub slots: SlotAllocator,
    /// Offer the pool at all. The daemon always does; `benches/gst_capture.rs` turns it off to
    /// measure the copy it saves.
    pub offer_pool: bool,
    /// Longest wait for a sample before the stop flag and the bus are checked again.
    pub poll_interval: Duration,
    /// No sample for this long (after start or the last frame) restarts the pipeline. Generous,
    /// because an RTSP session can take seconds to come up.
    pub stall_timeout: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The camera's tap (its recorder, its live feed): every H.264/H.265 access unit before the
    /// decoder goes to it.
    pub record: Option<StreamTap>,
    /// The camera's name, which its pipeline's warnings carry in the log (without it: the
    /// pipeline's description).
    pub camera: Option<String>,
}

impl Default for GstreamerOptions {
    fn default() -> Self {
        GstreamerOptions {
            slots: SlotAllocator::heap(),
            offer_pool: true,
            poll_interval: Duration::from_millis(200),
            stall_timeout: Duration::from_secs(20),
            initial_backoff: reconnect::INITIAL_BACKOFF,
            max_backoff: reconnect::MAX_BACKOFF,
            record: None,
            camera: None,
        }
    }
}

/// A playing pipeline; set to NULL (which stops its threads and closes devices and sockets) on drop.
struct Running {
    pipeline: gst::Element,
    appsink: gst_app::AppSink,
    bus: gst::Bus,
    last_sample: Instant,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Failing to reach NULL leaves nothing to clean up that dropping the last reference does not.
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// Why a sample did not become a frame.
enum SampleError {
    /// This sample was unusable; later ones may be fine.
    Skip(String),
    /// This sample is larger than `[limits]` allows; it was not copied.
    OverLimit(String),
    /// No later sample will be usable either (format the slot cannot take, slot too small).
    Fatal(String),
}

/// A GStreamer pipeline ending in an appsink, as a [`crate::source::FrameSource`].
pub struct GstreamerSource {
    spec: PipelineSpec,
    options: GstreamerOptions,
    limits: LimitsConfig,
    stop: Arc<AtomicBool>,
    connection: Connection<Running>,
    /// Video layout of the current caps, parsed once per caps object rather than per sample, and
    /// the tightly packed layout a slot can take a pool buffer of these caps in (else why not).
    layout: Option<(gst::Caps, gst_video::VideoInfo, Result<TightLayout, String>)>,
    /// The slot-memory pool every pipeline's appsink offers upstream (`None`: not offered).
    pub(super) offer: Option<PoolOffer>,
    /// How the latest frame reached its slot.
    mode: CaptureMode,
    /// A copied frame was explained in the log already.
    copy_explained: bool,
    skip_log: RateLimitedLog,
    warnings: BusWarnings,
    description: String,
}

/// Characters of a warning's text a log line shows.
const WARNING_EXCERPT_CHARS: usize = 200;
/// At most one line per this for a pipeline's warnings.
const WARNING_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A pipeline's warnings (malformed SEI in every frame of a camera's stream, late buffers): a
/// stream can raise several a second for as long as it runs, so they are logged at most once per
/// [`WARNING_LOG_INTERVAL`] per camera, naming the camera and the element, with how many were
/// not logged in between.
#[derive(Debug)]
struct BusWarnings {
    /// `camera <name>`, or the pipeline's description.
    camera: String,
    limit: RateLimitedLog,
}

impl BusWarnings {
    fn new(camera: String) -> BusWarnings {
        BusWarnings { camera, limit: RateLimitedLog::new(WARNING_LOG_INTERVAL) }
    }

    /// The line to log for a warning of `element` saying `text` at `now`, if one is due.
    fn note(&mut self, now: Instant, element: &str, text: &str) -> Option<String> {
        let suppressed = self.limit.admit(now)?;
        let text = excerpt(text, WARNING_EXCERPT_CHARS);
        Some(match suppressed {
            0 => format!("{}: GStreamer warning from {element}: {text}", self.camera),
            n => format!(
                "{}: GStreamer warning from {element}: {text} ({n} more since the last one logged)",
                self.camera
            ),
        })
    }
}

impl GstreamerSource {
    /// Builds and starts the pipeline. A pipeline that does not parse, has no appsink or needs
    /// elements this machine lacks is an error; one that fails to start (camera busy, RTSP server
    /// down, wrong password, nvargus-daemon not up yet) is retried with backoff. Samples larger
    /// than `limits` are skipped (and counted), never copied.
    pub fn open(
        spec: PipelineSpec,
        limits: LimitsConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<GstreamerSource, SourceError> {
        GstreamerSource::with_options(spec, GstreamerOptions::default(), limits, stop)
    }

    pub fn with_options(
        spec: PipelineSpec,
        options: GstreamerOptions,
        limits: LimitsConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<GstreamerSource, SourceError> {
        let description = spec.describe();
        gst::init().map_err(|err| SourceError::Open {
            source_name: description.clone(),
            message: format!("cannot initialise GStreamer: {err}"),
        })?;
        let offer = options.offer_pool.then(|| PoolOffer::new(options.slots.clone(), &description));
        let mut warnings = BusWarnings::new(match &options.camera {
            Some(camera) => format!("camera {camera}"),
            None => description.clone(),
        });
        let connection = Connection::opened(
            description.clone(),
            Backoff::new(options.initial_backoff, options.max_backoff),
            options.poll_interval,
            "restarting",
            || start_pipeline(&spec, offer.as_ref(), options.record.as_ref(), &mut warnings),
        )?;
        Ok(GstreamerSource {
            spec,
            options,
            limits,
            stop,
            connection,
            layout: None,
            offer,
            mode: CaptureMode::Copy,
            copy_explained: false,
            skip_log: RateLimitedLog::new(Duration::from_secs(10)),
            warnings,
            description,
        })
    }

    /// The state now (telemetry keeps [`FrameSource::connection_status`] to read it from any
    /// thread).
    pub fn state(&self) -> SourceState {
        self.connection.state()
    }
}

/// Builds the pipeline, configures its appsink (offering `offer`'s slot memory upstream), taps
/// its compressed stream for `record` and sets it playing.
fn start_pipeline(
    spec: &PipelineSpec,
    offer: Option<&PoolOffer>,
    record: Option<&StreamTap>,
    warnings: &mut BusWarnings,
) -> Result<Running, DeviceError> {
    let (pipeline, appsink) = match spec {
        PipelineSpec::Launch(description) => {
            let pipeline = gst::parse::launch(description)
                .map_err(|err| DeviceError::Permanent(format!("cannot build the pipeline: {err}")))?;
            let appsink = find_appsink(&pipeline)?;
            if let Some(tap) = record {
                match record_tap::find_decoder(&pipeline) {
                    Some(decoder) => {
                        record_tap::attach(&decoder, tap.clone());
                    }
                    None => {
                        log::info!("{}: no H.264/H.265 decoder in the pipeline; clips are encoded", spec.describe())
                    }
                }
            }
            (pipeline, appsink)
        }
        PipelineSpec::Csi(csi) => {
            let description = csi::launch_description(csi, &decoder::GstRegistry, Path::new(csi::ARGUS_SOCKET))
                .map_err(|unavailable| match unavailable {
                    csi::CsiUnavailable::NoElement(message) => DeviceError::Permanent(message),
                    csi::CsiUnavailable::NoDaemon(message) => DeviceError::Transient(message),
                })?;
            let pipeline = gst::parse::launch(&description)
                .map_err(|err| DeviceError::Permanent(format!("cannot build the CSI pipeline: {err}")))?;
            let appsink = find_appsink(&pipeline)?;
            (pipeline, appsink)
        }
        PipelineSpec::Rtsp(spec) => {
            let appsink = gst_app::AppSink::builder().name("sink").caps(&nv12_caps()).build();
            let pipeline = rtsp::build(spec, appsink.upcast_ref(), record.cloned()).map_err(DeviceError::Permanent)?;
            (pipeline.upcast(), appsink)
        }
    };
    if appsink.caps().is_none() {
        let caps = gst::Caps::builder("video/x-raw").field("format", gst::List::new(ACCEPTED_FORMATS)).build();
        appsink.set_caps(Some(&caps));
    }
    appsink.set_max_buffers(2);
    appsink.set_drop(true);
    appsink.set_sync(false);
    if let Some(offer) = offer {
        offer.install(&appsink).map_err(DeviceError::Permanent)?;
    }
    let bus = pipeline.bus().ok_or_else(|| DeviceError::Permanent("the pipeline has no bus".into()))?;
    let running = Running { pipeline, appsink, bus, last_sample: Instant::now() };
    if running.pipeline.set_state(gst::State::Playing).is_err() {
        let reason = drain_bus(&running.bus, warnings).unwrap_or_else(|| "the pipeline refused to start".into());
        return Err(DeviceError::Transient(reason));
    }
    Ok(running)
}

/// Raw NV12 in system memory: what the decoders' converters are asked for in the pipelines built
/// here (the preprocessing kernel reads it directly, and it is the smallest of the accepted formats).
fn nv12_caps() -> gst::Caps {
    gst::Caps::builder("video/x-raw").field("format", "NV12").build()
}

/// The appsink named `sink`, else the pipeline's only appsink sink element.
fn find_appsink(pipeline: &gst::Element) -> Result<gst_app::AppSink, DeviceError> {
    if let Ok(appsink) = pipeline.clone().downcast::<gst_app::AppSink>() {
        return Ok(appsink);
    }
    let missing = || DeviceError::Permanent("no appsink in the pipeline; end it with `appsink name=sink`".into());
    let bin = pipeline.clone().downcast::<gst::Bin>().map_err(|_| missing())?;
    if let Some(named) = bin.by_name("sink").and_then(|element| element.downcast::<gst_app::AppSink>().ok()) {
        return Ok(named);
    }
    bin.iterate_sinks()
        .into_iter()
        .filter_map(Result::ok)
        .find_map(|element| element.downcast::<gst_app::AppSink>().ok())
        .ok_or_else(missing)
}

/// Pops every queued bus message (an unread bus grows without bound), hands the warnings to
/// `warnings` and returns the first error or end of stream among them, as a message for the log
/// and telemetry.
fn drain_bus(bus: &gst::Bus, warnings: &mut BusWarnings) -> Option<String> {
    let mut failure = None;
    while let Some(message) = bus.pop() {
        match message.view() {
            gst::MessageView::Error(err)
                if failure.is_none() && err.error().matches(gst::ResourceError::NotAuthorized) =>
            {
                failure = Some(NOT_AUTHORIZED.into());
            }
            gst::MessageView::Error(err) if failure.is_none() => {
                // The error first, then the element and the last line of the debug text (the lines
                // before it name C files and functions): `Could not read from resource. (rtspsrc0:
                // The server closed the connection.)` still says what happened when STATUS=
                // shortens it.
                let element = err.src().map(|src| src.name().to_string()).unwrap_or_default();
                let debug = err.debug();
                let detail = debug.as_deref().and_then(|debug| debug.lines().map(str::trim).rfind(|l| !l.is_empty()));
                failure = Some(match detail {
                    Some(detail) => format!("{} ({element}: {detail})", err.error()),
                    None => format!("{} ({element})", err.error()),
                });
            }
            gst::MessageView::Eos(_) if failure.is_none() => failure = Some("end of stream".into()),
            gst::MessageView::Warning(warning) => {
                let element = warning.src().map(|src| src.name().to_string()).unwrap_or_default();
                if let Some(line) = warnings.note(Instant::now(), &element, &warning.error().to_string()) {
                    log::warn!("{line}");
                }
            }
            _ => {}
        }
    }
    failure
}

/// Copies `rows` rows of `row_bytes` from a plane with `stride` into a tightly packed `target`.
fn copy_plane(plane: &[u8], stride: i32, row_bytes: usize, rows: usize, target: &mut [u8]) -> Result<(), SampleError> {
    let stride = usize::try_from(stride).map_err(|_| SampleError::Skip(format!("negative stride {stride}")))?;
    let needed = stride.checked_mul(rows.saturating_sub(1)).and_then(|n| n.checked_add(row_bytes));
    if stride < row_bytes || needed.is_none_or(|needed| plane.len() < needed) || target.len() != row_bytes * rows {
        return Err(SampleError::Skip(format!(
            "plane of {} bytes with stride {stride} cannot hold {rows} rows of {row_bytes} bytes",
            plane.len()
        )));
    }
    if stride == row_bytes {
        target.copy_from_slice(&plane[..target.len()]);
    } else {
        for (row, out) in target.chunks_exact_mut(row_bytes).enumerate() {
            out.copy_from_slice(&plane[row * stride..row * stride + row_bytes]);
        }
    }
    Ok(())
}

/// The sample's video layout, parsed when its caps differ from the last sample's; checked against
/// the formats the slots take and `limits`.
fn sample_layout<'a>(
    sample: &gst::Sample,
    layout: &'a mut Option<(gst::Caps, gst_video::VideoInfo, Result<TightLayout, String>)>,
    limits: &LimitsConfig,
) -> Result<(&'a gst_video::VideoInfo, &'a Result<TightLayout, String>), SampleError> {
    let caps = sample.caps().ok_or_else(|| SampleError::Skip("sample without caps".into()))?;
    if layout.as_ref().is_none_or(|(known, _, _)| known.as_ptr() != caps.as_ptr()) {
        let info = gst_video::VideoInfo::from_caps(caps)
            .map_err(|err| SampleError::Fatal(format!("appsink caps {caps} are not raw video: {err}")))?;
        let tight = slot_pool::layout_of(caps);
        *layout = Some((caps.to_owned(), info, tight));
    }
    let Some((_, info, tight)) = layout.as_ref() else {
        return Err(SampleError::Skip("no video layout".into()));
    };
    let format = pixel_format(info.format()).ok_or_else(|| {
        SampleError::Fatal(format!(
            "the appsink delivers {:?}; the pipeline must produce one of {} (its own appsink caps override the default)",
            info.format(),
            ACCEPTED_FORMATS.join(", ")
        ))
    })?;
    image_decode::check_frame(info.width(), info.height(), format, limits).map_err(|err| match err {
        ImageDecodeError::OverLimit(message) => SampleError::OverLimit(message),
        ImageDecodeError::Invalid(message) | ImageDecodeError::Slot(message) => SampleError::Skip(message),
    })?;
    Ok((info, tight))
}

/// Maps the sample's buffer and copies it once into the slot.
fn copy_sample(sample: &gst::Sample, info: &gst_video::VideoInfo, slot: &mut FrameSlot) -> Result<(), SampleError> {
    let buffer = sample.buffer().ok_or_else(|| SampleError::Skip("sample without a buffer".into()))?;
    let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, info)
        .map_err(|err| SampleError::Skip(format!("cannot map the buffer: {err}")))?;
    let format = pixel_format(frame.format()).ok_or_else(|| SampleError::Skip("unknown format".into()))?;
    let (width, height) = (frame.width(), frame.height());
    let strides = frame.plane_stride();
    let target = slot.prepare(width, height, format).map_err(SampleError::Fatal)?;
    let plane = |index: u32| frame.plane_data(index).map_err(|err| SampleError::Skip(err.to_string()));
    let (w, h) = (width as usize, height as usize);
    match format {
        PixelFormat::Nv12 => {
            let (luma, chroma) = target.split_at_mut(w * h);
            copy_plane(plane(0)?, strides[0], w, h, luma)?;
            copy_plane(plane(1)?, strides[1], w, h / 2, chroma)?;
        }
        PixelFormat::Rgba8 => copy_plane(plane(0)?, strides[0], w * 4, h, target)?,
        PixelFormat::Rgb8 | PixelFormat::Bgr8 => copy_plane(plane(0)?, strides[0], w * 3, h, target)?,
        PixelFormat::Yuyv => copy_plane(plane(0)?, strides[0], w * 2, h, target)?,
    }
    slot.note_copy();
    Ok(())
}

impl GstreamerSource {
    /// Lends the sample's buffer to the slot when upstream wrote it into slot memory; copies it
    /// otherwise, saying once why.
    fn fill_slot(&mut self, sample: &gst::Sample, slot: &mut FrameSlot) -> Result<(), SampleError> {
        let (info, tight) = sample_layout(sample, &mut self.layout, &self.limits)?;
        if let (Ok(tight), Some(offer), Some(buffer)) = (tight, &self.offer, sample.buffer_owned()) {
            if let Ok(frame) = offer.lend(buffer, tight) {
                slot.lend(tight.width, tight.height, tight.format, frame).map_err(SampleError::Skip)?;
                self.mode = CaptureMode::Pool;
                return Ok(());
            }
        }
        if !self.copy_explained {
            self.copy_explained = true;
            let reason = match (tight, &self.offer) {
                (Err(padded), _) => padded.clone(),
                (Ok(_), Some(offer)) => offer.why_not_pooled(),
                (Ok(_), None) => "no slot memory is offered upstream".to_owned(),
            };
            log::info!("{}: frames are copied once into the slots: {reason}", self.description);
        }
        self.mode = CaptureMode::Copy;
        copy_sample(sample, info, slot)
    }
}

impl FrameSource for GstreamerSource {
    fn describe(&self) -> String {
        self.description.clone()
    }

    /// Pool when upstream wrote the latest frame into slot memory, else copy.
    fn capture_mode(&self) -> CaptureMode {
        self.mode
    }

    fn connection_status(&self) -> Option<SourceStatus> {
        Some(self.connection.status().clone())
    }

    /// Returns [`Capture::End`] once the stop flag is set (and stops the pipeline).
    fn next_frame(&mut self, slot: &mut FrameSlot) -> Result<Capture, SourceError> {
        let (spec, offer, record) = (&self.spec, self.offer.as_ref(), self.options.record.as_ref());
        let warnings = &mut self.warnings;
        let running = match self.connection.next_link(&self.stop, || start_pipeline(spec, offer, record, warnings)) {
            Ok(running) => running,
            Err(capture) => return Ok(capture),
        };
        let timeout =
            gst::ClockTime::from_nseconds(self.options.poll_interval.as_nanos().try_into().unwrap_or(u64::MAX));
        let Some(sample) = running.appsink.try_pull_sample(timeout) else {
            let failure = drain_bus(&running.bus, &mut self.warnings)
                .or_else(|| running.appsink.is_eos().then(|| "end of stream".to_owned()))
                .or_else(|| {
                    let silent = running.last_sample.elapsed();
                    (silent >= self.options.stall_timeout)
                        .then(|| format!("no frame for {:.1} s", silent.as_secs_f64()))
                });
            if let Some(reason) = failure {
                self.connection.down(&DeviceError::Transient(reason));
            }
            return Ok(Capture::Retry);
        };
        running.last_sample = Instant::now();
        if let Some(reason) = drain_bus(&running.bus, &mut self.warnings) {
            log::debug!("{}: {reason} after a sample; handled once the samples run out", self.description);
        }
        let age = buffer_age(&running.pipeline, &sample);
        match self.fill_slot(&sample, slot) {
            Ok(()) => {
                slot.meta_mut().captured_at = SystemTime::now() - age.unwrap_or(Duration::ZERO);
                self.connection.frame_arrived();
                Ok(Capture::Frame)
            }
            Err(SampleError::Skip(message)) => {
                self.skip_log.skipped(&self.description, "a sample", &message);
                Ok(Capture::Retry)
            }
            Err(SampleError::OverLimit(message)) => {
                self.skip_log.skipped(&self.description, "a sample over the limits", &message);
                Ok(Capture::OverLimit)
            }
            Err(SampleError::Fatal(message)) => {
                Err(SourceError::Read { source_name: self.description.clone(), message })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: LimitsConfig = LimitsConfig { max_width: 16384, max_height: 16384, max_alloc_mib: 256 };

    #[test]
    fn plane_copy_drops_stride_padding_and_rejects_short_planes() {
        let plane: Vec<u8> = (0..24).collect();
        let mut target = vec![0; 12];
        assert!(copy_plane(&plane, 8, 6, 2, &mut target[..12]).is_ok());
        assert_eq!(target, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]);
        assert!(copy_plane(&plane[..13], 8, 6, 2, &mut target).is_err());
        assert!(copy_plane(&plane, 4, 6, 2, &mut target).is_err());
        assert!(copy_plane(&plane, -8, 6, 2, &mut target).is_err());
    }

    /// Issue 49: a stream with malformed SEI in every frame logged ~6 warnings a second per
    /// camera, none naming it.
    #[test]
    fn pipeline_warnings_are_logged_once_per_interval_naming_the_camera_and_what_was_left_out() {
        let mut warnings = BusWarnings::new("camera front".into());
        let start = Instant::now();
        let first = warnings.note(start, "h264parse0", "SEI type 5 truncated").expect("the first is logged");
        assert_eq!(first, "camera front: GStreamer warning from h264parse0: \"SEI type 5 truncated\"");
        let quiet = (1..60).filter_map(|n| warnings.note(start + Duration::from_millis(n * 150), "h264parse0", "x"));
        assert_eq!(quiet.count(), 0, "9 s of warnings: none logged");
        let next = warnings.note(start + WARNING_LOG_INTERVAL, "h264parse0", &"y".repeat(10_000)).expect("logged");
        assert!(next.starts_with("camera front: GStreamer warning from h264parse0:"), "{next}");
        assert!(next.contains("(10000 bytes)") && next.ends_with("(59 more since the last one logged)"), "{next}");
    }

    #[test]
    fn off_a_jetson_a_csi_camera_fails_to_open_naming_what_is_missing() {
        if gst::init().is_err() || gst::ElementFactory::find(csi::CSI_SOURCE).is_some() {
            eprintln!("skipped: GStreamer cannot be initialised here, or this is a Jetson");
            return;
        }
        let spec = PipelineSpec::Csi(csi::CsiSpec { sensor_id: 0, width: 1920, height: 1080, fps: 30 });
        let err = GstreamerSource::open(spec, LIMITS, Arc::new(AtomicBool::new(false))).err().expect("no CSI here");
        assert!(err.to_string().contains("nvarguscamerasrc"), "{err}");
    }

    #[test]
    fn unparsable_pipelines_and_pipelines_without_appsink_fail_to_open() {
        if gst::init().is_err() {
            eprintln!("skipped: GStreamer cannot be initialised here");
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let launch = |pipeline: &str| PipelineSpec::Launch(pipeline.into());
        let err = GstreamerSource::open(launch("this-element-does-not-exist ! appsink"), LIMITS, stop.clone())
            .err()
            .expect("bad element");
        assert!(err.to_string().contains("cannot build the pipeline"), "{err}");
        if gst::ElementFactory::find("fakesink").is_some() && gst::ElementFactory::find("fakesrc").is_some() {
            let err = GstreamerSource::open(launch("fakesrc ! fakesink"), LIMITS, stop).err().expect("no appsink");
            assert!(err.to_string().contains("no appsink"), "{err}");
        }
    }
}
